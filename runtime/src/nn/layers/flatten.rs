//! `Flatten`: every non-batch axis folded into one.

use crate::ir::Value;
use crate::nn::entry::args;
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxAttribute, OnnxForward, OnnxValue};
use crate::Result;
use strata_spec::Args;

#[derive(Clone, Debug, PartialEq)]
pub struct Flatten {
    pub name: String,
}

impl Flatten {
    pub fn new(name: impl Into<String>) -> Flatten {
        Flatten { name: name.into() }
    }
}

impl Layer for Flatten {
    fn class(&self) -> &'static str {
        "Flatten"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("flatten", x)?.dims().to_vec();
        let (batch, rest) = dims.split_first().unwrap_or((&1, &[]));
        let mut shape = vec![*batch];
        shape.extend(self.output_shape(rest)?);
        cx.g.reshape(x, shape)
    }

    /// `Flatten` from axis 1: the values are NHWC in the exported graph too, so the
    /// elements come in the order `forward`'s reshape gives them.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        self.output_shape(cx.input_shape())?;
        Ok(cx.op("Flatten", &[&x], vec![("axis", OnnxAttribute::Int(1))]))
    }
}
