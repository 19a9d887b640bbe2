//! Activation functions, as compositions of primitives.

use super::onnx::{OnnxAttribute, OnnxForward, OnnxValue};
use crate::ir::{Comparison, Graph, ReduceOp, UnaryOp, Value};
use crate::Result;
use std::fmt;

/// The activations of Keras, by their Keras names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Activation {
    /// `x`.
    Linear,
    /// `max(x, 0)`.
    Relu,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    Tanh,
    /// `e^x / Σ e^x` over the last axis (computed stably, shifted by the max).
    Softmax,
    /// `x · Φ(x)` with the exact normal CDF (Keras' default, `approximate=False`).
    Gelu,
    /// `x` if `x > 0`, else `e^x - 1`.
    Elu,
    /// `λ · elu_α(x)` with the self-normalising constants.
    Selu,
    /// `x` if `x > 0`, else `0.2 x` (Keras 3's default slope).
    LeakyRelu,
    /// `x · sigmoid(x)` (also called SiLU).
    Swish,
    /// `ln(1 + e^x)`, computed without overflow.
    Softplus,
}

impl Activation {
    pub const ALL: [Activation; 11] = [
        Activation::Linear,
        Activation::Relu,
        Activation::Sigmoid,
        Activation::Tanh,
        Activation::Softmax,
        Activation::Gelu,
        Activation::Elu,
        Activation::Selu,
        Activation::LeakyRelu,
        Activation::Swish,
        Activation::Softplus,
    ];

    /// The Keras name.
    pub fn name(self) -> &'static str {
        match self {
            Activation::Linear => "linear",
            Activation::Relu => "relu",
            Activation::Sigmoid => "sigmoid",
            Activation::Tanh => "tanh",
            Activation::Softmax => "softmax",
            Activation::Gelu => "gelu",
            Activation::Elu => "elu",
            Activation::Selu => "selu",
            Activation::LeakyRelu => "leaky_relu",
            Activation::Swish => "swish",
            Activation::Softplus => "softplus",
        }
    }

    /// Looks an activation up by its Keras name (`silu` is an alias of `swish`).
    pub fn from_name(name: &str) -> Option<Activation> {
        if name == "silu" {
            return Some(Activation::Swish);
        }
        Activation::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Emits the activation of `x`.
    pub fn apply(self, g: &mut Graph, x: Value) -> Result<Value> {
        match self {
            Activation::Linear => Ok(x),
            Activation::Relu => {
                let z = g.zeros_like(x)?;
                g.max(x, z)
            }
            Activation::Sigmoid => g.unary(UnaryOp::Logistic, x),
            Activation::Tanh => g.tanh(x),
            Activation::Softmax => softmax(g, x),
            Activation::Gelu => {
                // x/2 · (1 + erf(x/√2))
                let s = g.mul_scalar(x, std::f64::consts::FRAC_1_SQRT_2)?;
                let e = g.unary(UnaryOp::Erf, s)?;
                let e1 = g.add_scalar(e, 1.0)?;
                let h = g.mul(x, e1)?;
                g.mul_scalar(h, 0.5)
            }
            Activation::Elu => elu(g, x, 1.0),
            Activation::Selu => {
                let e = elu(g, x, SELU_ALPHA)?;
                g.mul_scalar(e, SELU_SCALE)
            }
            Activation::LeakyRelu => {
                let z = g.zeros_like(x)?;
                let pos = g.compare(Comparison::Gt, x, z)?;
                let neg = g.mul_scalar(x, 0.2)?;
                g.select(pos, x, neg)
            }
            Activation::Swish => {
                let s = g.unary(UnaryOp::Logistic, x)?;
                g.mul(x, s)
            }
            Activation::Softplus => {
                // max(x, 0) + log1p(e^-|x|)
                let z = g.zeros_like(x)?;
                let m = g.max(x, z)?;
                let a = g.abs(x)?;
                let na = g.neg(a)?;
                let e = g.exp(na)?;
                let l = g.unary(UnaryOp::Log1p, e)?;
                g.add(m, l)
            }
        }
    }

    /// Emits the ONNX operators of the activation of `x`: each computes the formula
    /// [`apply`](Activation::apply) does (an operator of the same name where ONNX's
    /// definition is that formula, a composition otherwise).
    pub fn onnx(self, cx: &mut OnnxForward<'_>, x: OnnxValue) -> Result<OnnxValue> {
        Ok(match self {
            Activation::Linear => x,
            Activation::Relu => cx.op("Relu", &[&x], vec![]),
            Activation::Sigmoid => cx.op("Sigmoid", &[&x], vec![]),
            Activation::Tanh => cx.op("Tanh", &[&x], vec![]),
            // Over the last axis alone: opset 13's definition (earlier ones flattened).
            Activation::Softmax => cx.op("Softmax", &[&x], vec![("axis", OnnxAttribute::Int(-1))]),
            Activation::Gelu => {
                // Opset 17 has no Gelu: x/2 · (1 + erf(x/√2)), as `apply`.
                let r = cx.scalar(std::f64::consts::FRAC_1_SQRT_2);
                let s = cx.op("Mul", &[&x, &r], vec![]);
                let e = cx.op("Erf", &[&s], vec![]);
                let one = cx.scalar(1.0);
                let e1 = cx.op("Add", &[&e, &one], vec![]);
                let h = cx.op("Mul", &[&x, &e1], vec![]);
                let half = cx.scalar(0.5);
                cx.op("Mul", &[&h, &half], vec![])
            }
            Activation::Elu => cx.op("Elu", &[&x], vec![("alpha", OnnxAttribute::Float(1.0))]),
            Activation::Selu => cx.op(
                "Selu",
                &[&x],
                vec![
                    ("alpha", OnnxAttribute::Float(SELU_ALPHA as f32)),
                    ("gamma", OnnxAttribute::Float(SELU_SCALE as f32)),
                ],
            ),
            Activation::LeakyRelu => cx.op(
                "LeakyRelu",
                &[&x],
                vec![("alpha", OnnxAttribute::Float(0.2))],
            ),
            Activation::Swish => {
                let s = cx.op("Sigmoid", &[&x], vec![]);
                cx.op("Mul", &[&x, &s], vec![])
            }
            Activation::Softplus => {
                // max(x, 0) + log(1 + e^-|x|), as `apply`: ONNX defines Softplus as
                // ln(e^x + 1), which overflows for large x where this does not.
                let m = cx.op("Relu", &[&x], vec![]);
                let a = cx.op("Abs", &[&x], vec![]);
                let na = cx.op("Neg", &[&a], vec![]);
                let e = cx.op("Exp", &[&na], vec![]);
                let one = cx.scalar(1.0);
                let e1 = cx.op("Add", &[&e, &one], vec![]);
                let l = cx.op("Log", &[&e1], vec![]);
                cx.op("Add", &[&m, &l], vec![])
            }
        })
    }
}

/// Selu's self-normalising constants.
const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;
const SELU_SCALE: f64 = 1.050_700_987_355_480_5;

/// `x` if `x > 0`, else `α (e^x - 1)`.
fn elu(g: &mut Graph, x: Value, alpha: f64) -> Result<Value> {
    let z = g.zeros_like(x)?;
    let pos = g.compare(Comparison::Gt, x, z)?;
    // expm1 of min(x, 0), so the unused branch never overflows.
    let xm = g.min(x, z)?;
    let e = g.unary(UnaryOp::Expm1, xm)?;
    let neg = g.mul_scalar(e, alpha)?;
    g.select(pos, x, neg)
}

/// Softmax over the last axis: `e^(x - max) / Σ e^(x - max)`.
pub fn softmax(g: &mut Graph, x: Value) -> Result<Value> {
    let (shifted, _) = shift_by_max(g, x)?;
    let e = g.exp(shifted)?;
    let last = g.ty(x).rank().saturating_sub(1);
    let s = g.sum(e, &[last])?;
    let dims: Vec<usize> = (0..last).collect();
    let s = g.broadcast_in_dim(s, g.ty(x).shape.clone(), &dims)?;
    g.div(e, s)
}

/// `log softmax` over the last axis: `x - max - log Σ e^(x - max)`.
pub fn log_softmax(g: &mut Graph, x: Value) -> Result<Value> {
    let (shifted, _) = shift_by_max(g, x)?;
    let e = g.exp(shifted)?;
    let last = g.ty(x).rank().saturating_sub(1);
    let s = g.sum(e, &[last])?;
    let l = g.log(s)?;
    let dims: Vec<usize> = (0..last).collect();
    let l = g.broadcast_in_dim(l, g.ty(x).shape.clone(), &dims)?;
    g.sub(shifted, l)
}

/// `x - max(x)` over the last axis. The shift cancels exactly in softmax, so its gradient
/// is stopped rather than computed (as JAX does).
fn shift_by_max(g: &mut Graph, x: Value) -> Result<(Value, Value)> {
    let t = g.ty(x).clone();
    let last = t.rank().saturating_sub(1);
    let m = g.reduce(ReduceOp::Max, x, &[last])?;
    let m = g.stop_gradient(m)?;
    let dims: Vec<usize> = (0..last).collect();
    let mb = g.broadcast_in_dim(m, t.shape.clone(), &dims)?;
    Ok((g.sub(x, mb)?, m))
}

impl fmt::Display for Activation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
