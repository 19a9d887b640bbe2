//! `Rescaling`: `x * scale + offset`, e.g. pixels from `[0, 255]` to `[0, 1]` with
//! `scale = 1 / 255`.

use crate::ir::Value;
use crate::nn::entry::args;
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::Result;
use strata_spec::{Args, Val};

#[derive(Clone, Debug, PartialEq)]
pub struct Rescaling {
    pub name: String,
    pub scale: f64,
    pub offset: f64,
}

impl Rescaling {
    /// Keras' default `offset` is 0.
    pub fn new(name: impl Into<String>, scale: f64) -> Rescaling {
        Rescaling {
            name: name.into(),
            scale,
            offset: 0.0,
        }
    }
}

impl Layer for Rescaling {
    fn class(&self) -> &'static str {
        "Rescaling"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([
            ("scale", Val::Float(self.scale)),
            ("offset", Val::Float(self.offset)),
        ]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("rescaling", x)?.dims().to_vec();
        // Checks the numbers are finite.
        self.output_shape(dims.get(1..).unwrap_or(&[]))?;
        let scaled = cx.g.mul_scalar(x, self.scale)?;
        if self.offset == 0.0 {
            return Ok(scaled);
        }
        cx.g.add_scalar(scaled, self.offset)
    }

    /// `Mul` then `Add`, as `forward`.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        self.output_shape(cx.input_shape())?;
        let scale = cx.scalar(self.scale);
        let scaled = cx.op("Mul", &[&x, &scale], vec![]);
        if self.offset == 0.0 {
            return Ok(scaled);
        }
        let offset = cx.scalar(self.offset);
        Ok(cx.op("Add", &[&scaled, &offset], vec![]))
    }
}
