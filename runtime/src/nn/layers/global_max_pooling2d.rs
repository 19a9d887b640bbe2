//! `GlobalMaxPooling2D` (alias `GlobalMaxPool2D`): the maximum of each channel over the
//! whole image.

use super::spatial::{global_pool, max_pool, onnx_global_pool};
use crate::ir::Value;
use crate::nn::entry::args;
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::Result;
use strata_spec::{Args, Val};

#[derive(Clone, Debug, PartialEq)]
pub struct GlobalMaxPooling2D {
    pub name: String,
    /// Keep the pooled axes as size 1: `(1, 1, channels)` instead of `(channels,)`.
    pub keepdims: bool,
}

impl GlobalMaxPooling2D {
    pub fn new(name: impl Into<String>) -> GlobalMaxPooling2D {
        GlobalMaxPooling2D {
            name: name.into(),
            keepdims: false,
        }
    }
}

impl Layer for GlobalMaxPooling2D {
    fn class(&self) -> &'static str {
        "GlobalMaxPooling2D"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([("keepdims", Val::Bool(self.keepdims))]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("global_max_pooling2d", x)?.dims().to_vec();
        let out = self.output_shape(dims.get(1..).unwrap_or(&[]))?;
        global_pool(cx.g, max_pool, x, 2, self.keepdims, out)
    }

    /// `ReduceMax` over the two image axes (opset 17 takes them as an attribute).
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        self.output_shape(cx.input_shape())?;
        Ok(onnx_global_pool(cx, "ReduceMax", &x, 2, self.keepdims))
    }
}
