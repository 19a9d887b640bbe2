//! `Dropout`: in training, zeroes each input with probability `rate` and scales the rest
//! by `1 / (1 - rate)` (inverted dropout, so inference is the identity).

use crate::ir::{Comparison, Value};
use crate::nn::entry::args;
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::Result;
use strata_spec::{Args, Val};

#[derive(Clone, Debug, PartialEq)]
pub struct Dropout {
    pub name: String,
    /// The fraction of inputs dropped, in `[0, 1)`.
    pub rate: f64,
}

impl Dropout {
    pub fn new(name: impl Into<String>, rate: f64) -> Dropout {
        Dropout {
            name: name.into(),
            rate,
        }
    }
}

impl Layer for Dropout {
    fn class(&self) -> &'static str {
        "Dropout"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([("rate", Val::Float(self.rate))]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let ty = cx.g.try_ty("dropout", x)?.clone();
        // Checks the rate.
        self.output_shape(ty.dims())?;
        if !cx.training || self.rate == 0.0 {
            return Ok(x);
        }
        let u = cx.random_uniform(ty)?;
        let rate = cx.g.full_like(self.rate, u)?;
        let keep = cx.g.compare(Comparison::Ge, u, rate)?;
        let scaled = cx.g.mul_scalar(x, 1.0 / (1.0 - self.rate))?;
        let zero = cx.g.zeros_like(x)?;
        cx.g.select(keep, scaled, zero)
    }

    /// Inference is the identity: an `Identity` node.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        self.output_shape(cx.input_shape())?;
        Ok(cx.op("Identity", &[&x], vec![]))
    }
}
