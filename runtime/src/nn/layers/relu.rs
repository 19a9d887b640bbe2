//! `ReLU` (with Keras' `max_value`, `negative_slope` and `threshold`), `LeakyReLU`, and
//! `PReLU` (a learned slope per input element).

use crate::ir::{Comparison, Value};
use crate::nn::entry::{args, initializer};
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxAttribute, OnnxForward, OnnxValue};
use crate::nn::Initializer;
use crate::Result;
use strata_spec::{Args, Val};

/// Keras' `ReLU`: `x` above `threshold` (clipped at `max_value`), and below it
/// `negative_slope * (x - threshold)`. As in Keras, `x == threshold` gives 0.
#[derive(Clone, Debug, PartialEq)]
pub struct ReLU {
    pub name: String,
    /// The largest output, `>= 0`; `None`: unbounded.
    pub max_value: Option<f64>,
    /// The slope below the threshold, `>= 0`.
    pub negative_slope: f64,
    /// Where the activation starts, `>= 0`.
    pub threshold: f64,
}

impl ReLU {
    /// Keras' defaults: the plain `max(x, 0)`.
    pub fn new(name: impl Into<String>) -> ReLU {
        ReLU {
            name: name.into(),
            max_value: None,
            negative_slope: 0.0,
            threshold: 0.0,
        }
    }
}

impl Layer for ReLU {
    fn class(&self) -> &'static str {
        "ReLU"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([
            ("max_value", Val::OptionalFloat(self.max_value)),
            ("negative_slope", Val::Float(self.negative_slope)),
            ("threshold", Val::Float(self.threshold)),
        ]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("re_lu", x)?.dims().to_vec();
        // Checks the arguments' ranges.
        self.output_shape(dims.get(1..).unwrap_or(&[]))?;
        let g = &mut *cx.g;
        let zero = g.zeros_like(x)?;
        let t = g.full_like(self.threshold, x)?;
        let above = g.compare(Comparison::Gt, x, t)?;
        let mut y = g.select(above, x, zero)?;
        if let Some(m) = self.max_value {
            y = g.binary_scalar(crate::ir::BinaryOp::Min, y, m)?;
        }
        if self.negative_slope != 0.0 {
            // negative_slope · min(x - threshold, 0): zero above the threshold.
            let shifted = g.add_scalar(x, -self.threshold)?;
            let below = g.min(shifted, zero)?;
            let neg = g.mul_scalar(below, self.negative_slope)?;
            y = g.add(y, neg)?;
        }
        Ok(y)
    }

    /// The composition `forward` emits: `Where(x > threshold, x, 0)`, `Min` with
    /// `max_value`, plus `negative_slope · Min(x - threshold, 0)`.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        self.output_shape(cx.input_shape())?;
        let zero = cx.scalar(0.0);
        let t = cx.scalar(self.threshold);
        let above = cx.op("Greater", &[&x, &t], vec![]);
        let mut y = cx.op("Where", &[&above, &x, &zero], vec![]);
        if let Some(m) = self.max_value {
            let m = cx.scalar(m);
            y = cx.op("Min", &[&y, &m], vec![]);
        }
        if self.negative_slope != 0.0 {
            let shifted = cx.op("Sub", &[&x, &t], vec![]);
            let below = cx.op("Min", &[&shifted, &zero], vec![]);
            let slope = cx.scalar(self.negative_slope);
            let neg = cx.op("Mul", &[&below, &slope], vec![]);
            y = cx.op("Add", &[&y, &neg], vec![]);
        }
        Ok(y)
    }
}

/// Keras' `LeakyReLU`: `x` for `x >= 0`, `negative_slope * x` below.
#[derive(Clone, Debug, PartialEq)]
pub struct LeakyReLU {
    pub name: String,
    /// The slope below 0, `>= 0` (Keras' default 0.3).
    pub negative_slope: f64,
}

impl LeakyReLU {
    pub fn new(name: impl Into<String>) -> LeakyReLU {
        LeakyReLU {
            name: name.into(),
            negative_slope: 0.3,
        }
    }
}

impl Layer for LeakyReLU {
    fn class(&self) -> &'static str {
        "LeakyReLU"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([("negative_slope", Val::Float(self.negative_slope))]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("leaky_re_lu", x)?.dims().to_vec();
        self.output_shape(dims.get(1..).unwrap_or(&[]))?;
        let zero = cx.g.zeros_like(x)?;
        let pos = cx.g.compare(Comparison::Ge, x, zero)?;
        let neg = cx.g.mul_scalar(x, self.negative_slope)?;
        cx.g.select(pos, x, neg)
    }

    /// ONNX's `LeakyRelu`, the same formula.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        self.output_shape(cx.input_shape())?;
        let alpha = OnnxAttribute::Float(self.negative_slope as f32);
        Ok(cx.op("LeakyRelu", &[&x], vec![("alpha", alpha)]))
    }
}

/// Keras' `PReLU`: `x` for `x >= 0`, `alpha * x` below, with `alpha` learned: one per
/// input element (without the batch), shared along `shared_axes`.
#[derive(Clone, Debug, PartialEq)]
pub struct PReLU {
    pub name: String,
    pub alpha_initializer: Initializer,
    /// Axes (1-based, the batch not counted, as in Keras) along which one alpha is shared,
    /// e.g. `[1, 2]` for one slope per channel of an image.
    pub shared_axes: Option<Vec<usize>>,
}

impl PReLU {
    /// Keras' defaults: alphas start at 0 (a ReLU), none shared.
    pub fn new(name: impl Into<String>) -> PReLU {
        PReLU {
            name: name.into(),
            alpha_initializer: Initializer::Zeros,
            shared_axes: None,
        }
    }
}

impl Layer for PReLU {
    fn class(&self) -> &'static str {
        "PReLU"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([
            ("alpha_initializer", initializer(self.alpha_initializer)),
            ("shared_axes", Val::Axes(self.shared_axes.clone())),
        ]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let [alpha] = expect_params(self, params)?;
        let shape = cx.g.try_ty("p_re_lu", x)?.shape.clone();
        // Checks the shared axes exist.
        self.output_shape(shape.dims().get(1..).unwrap_or(&[]))?;
        // `alpha` has the input's rank without the batch, size 1 where shared.
        let dims: Vec<usize> = (1..shape.rank()).collect();
        let alpha = cx.g.broadcast_in_dim(alpha, shape, &dims)?;
        let zero = cx.g.zeros_like(x)?;
        let pos = cx.g.compare(Comparison::Ge, x, zero)?;
        let neg = cx.g.mul(alpha, x)?;
        cx.g.select(pos, x, neg)
    }

    /// ONNX's `PRelu`: `alpha` (the input's shape without the batch, 1 where shared)
    /// broadcasts from the right as it does in `forward`.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        let [alpha] = cx.params::<1>(params)?;
        self.output_shape(cx.input_shape())?;
        Ok(cx.op("PRelu", &[&x, alpha], vec![]))
    }
}
