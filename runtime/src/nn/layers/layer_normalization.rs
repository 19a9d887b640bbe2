//! `LayerNormalization`: normalises each example over its feature axis, then scales and
//! offsets per feature; the same in training and inference.

use super::axis::feature_axis;
use super::axis::onnx_along;
use crate::ir::{Graph, UnaryOp, Value};
use crate::nn::entry::{args, axis, initializer};
use crate::nn::layer::{bad_config, Forward, Layer};
use crate::nn::onnx::{OnnxAttribute, OnnxForward, OnnxValue};
use crate::nn::Initializer;
use crate::Result;
use strata_spec::{Args, Val};

#[derive(Clone, Debug, PartialEq)]
pub struct LayerNormalization {
    pub name: String,
    /// The normalised axis, counting the batch axis (Keras' `axis`; `-1` is the last).
    pub axis: isize,
    pub epsilon: f64,
    /// Learn an offset `beta`.
    pub center: bool,
    /// Learn a scale `gamma`.
    pub scale: bool,
    pub beta_initializer: Initializer,
    pub gamma_initializer: Initializer,
}

impl LayerNormalization {
    /// Keras' defaults: last axis, epsilon 1e-3, learned offset and scale.
    pub fn new(name: impl Into<String>) -> LayerNormalization {
        LayerNormalization {
            name: name.into(),
            axis: -1,
            epsilon: 1e-3,
            center: true,
            scale: true,
            beta_initializer: Initializer::Zeros,
            gamma_initializer: Initializer::Ones,
        }
    }
}

/// The learned scale and offset among a normalisation layer's parameter values (`gamma`,
/// then `beta`, each only when the layer learns it).
pub(crate) fn weights(
    layer: &dyn Layer,
    scale: bool,
    center: bool,
    params: &[Value],
) -> Result<(Option<Value>, Option<Value>)> {
    match (scale, center, params) {
        (true, true, &[g, b]) => Ok((Some(g), Some(b))),
        (true, false, &[g]) => Ok((Some(g), None)),
        (false, true, &[b]) => Ok((None, Some(b))),
        (false, false, &[]) => Ok((None, None)),
        _ => Err(bad_config(
            layer,
            format!("forward got {} parameter value(s)", params.len()),
        )),
    }
}

/// `(x - mean) / sqrt(variance + epsilon)`, the statistics over `axes` of `x`.
pub(crate) fn standardize(g: &mut Graph, x: Value, axes: &[usize], epsilon: f64) -> Result<Value> {
    let shape = g.ty(x).shape.clone();
    // Statistics have one value per position off the axes.
    let others: Vec<usize> = (0..shape.rank()).filter(|a| !axes.contains(a)).collect();
    let (mean, var) = g.mean_and_variance(x, axes)?;
    let mean = g.broadcast_in_dim(mean, shape.clone(), &others)?;
    let centered = g.sub(x, mean)?;
    let ve = g.add_scalar(var, epsilon)?;
    let inv = g.unary(UnaryOp::Rsqrt, ve)?;
    let inv = g.broadcast_in_dim(inv, shape, &others)?;
    g.mul(centered, inv)
}

/// `y · gamma + beta`, one weight per feature along `axis`.
pub(crate) fn scale_and_offset(
    g: &mut Graph,
    mut y: Value,
    gamma: Option<Value>,
    beta: Option<Value>,
    axis: usize,
) -> Result<Value> {
    let shape = g.ty(y).shape.clone();
    if let Some(gamma) = gamma {
        let gb = g.broadcast_in_dim(gamma, shape.clone(), &[axis])?;
        y = g.mul(y, gb)?;
    }
    if let Some(beta) = beta {
        let bb = g.broadcast_in_dim(beta, shape, &[axis])?;
        y = g.add(y, bb)?;
    }
    Ok(y)
}

impl Layer for LayerNormalization {
    fn class(&self) -> &'static str {
        "LayerNormalization"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([
            ("axis", axis(self.axis)),
            ("epsilon", Val::Float(self.epsilon)),
            ("center", Val::Bool(self.center)),
            ("scale", Val::Bool(self.scale)),
            ("beta_initializer", initializer(self.beta_initializer)),
            ("gamma_initializer", initializer(self.gamma_initializer)),
        ]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let shape = cx.g.try_ty("layer_normalization", x)?.shape.clone();
        self.output_shape(shape.dims().get(1..).unwrap_or(&[]))?;
        let axis = feature_axis(self.axis, shape.rank());
        let (gamma, beta) = weights(self, self.scale, self.center, params)?;
        let y = standardize(cx.g, x, &[axis], self.epsilon)?;
        scale_and_offset(cx.g, y, gamma, beta, axis)
    }

    /// `forward`'s formula operator by operator (ONNX's LayerNormalization normalises
    /// over every axis from `axis` on, and computes the variance another way).
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        let input = cx.input_shape().to_vec();
        self.output_shape(&input)?;
        let rank = input.len() + 1;
        let axis = feature_axis(self.axis, rank);
        let y = onnx_standardize(cx, &x, vec![axis as i64], self.epsilon);
        onnx_scale_and_offset(self, cx, y, (self.scale, self.center), params, axis)
    }
}

/// `standardize` in ONNX, over `axes` of `x`.
pub(crate) fn onnx_standardize(
    cx: &mut OnnxForward<'_>,
    x: &OnnxValue,
    axes: Vec<i64>,
    epsilon: f64,
) -> OnnxValue {
    let over = || {
        vec![
            ("axes", OnnxAttribute::Ints(axes.clone())),
            ("keepdims", OnnxAttribute::Int(1)),
        ]
    };
    let mean = cx.op("ReduceMean", &[x], over());
    let centered = cx.op("Sub", &[x, &mean], vec![]);
    let sq = cx.op("Mul", &[&centered, &centered], vec![]);
    let var = cx.op("ReduceMean", &[&sq], over());
    let eps = cx.scalar(epsilon);
    let ve = cx.op("Add", &[&var, &eps], vec![]);
    let sd = cx.op("Sqrt", &[&ve], vec![]);
    let inv = cx.op("Reciprocal", &[&sd], vec![]);
    cx.op("Mul", &[&centered, &inv], vec![])
}

/// `scale_and_offset` in ONNX: `y · gamma + beta` along `axis` of the layer's output,
/// `learned` saying which of `gamma`, `beta` the layer has among its weights.
pub(crate) fn onnx_scale_and_offset(
    layer: &dyn Layer,
    cx: &mut OnnxForward<'_>,
    mut y: OnnxValue,
    learned: (bool, bool),
    params: &[OnnxValue],
    axis: usize,
) -> Result<OnnxValue> {
    let rank = cx.input_shape().len() + 1;
    let (gamma, beta) = match (learned, params) {
        ((true, true), [g, b]) => (Some(g), Some(b)),
        ((true, false), [g]) => (Some(g), None),
        ((false, true), [b]) => (None, Some(b)),
        ((false, false), []) => (None, None),
        _ => {
            return Err(bad_config(
                layer,
                format!("the ONNX mapping got {} weight(s)", params.len()),
            ))
        }
    };
    if let Some(gamma) = gamma {
        let g = onnx_along(cx, gamma, axis, rank);
        y = cx.op("Mul", &[&y, &g], vec![]);
    }
    if let Some(beta) = beta {
        let b = onnx_along(cx, beta, axis, rank);
        y = cx.op("Add", &[&y, &b], vec![]);
    }
    Ok(y)
}
