//! `GlobalAveragePooling1D` (alias `GlobalAvgPool1D`): the mean of each channel over the
//! whole sequence.

use super::spatial::{global_pool, mean_pool, onnx_global_pool};
use crate::ir::Value;
use crate::nn::entry::args;
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::Result;
use strata_spec::{Args, Val};

#[derive(Clone, Debug, PartialEq)]
pub struct GlobalAveragePooling1D {
    pub name: String,
    /// Keep the pooled axis as size 1: `(1, channels)` instead of `(channels,)`.
    pub keepdims: bool,
}

impl GlobalAveragePooling1D {
    pub fn new(name: impl Into<String>) -> GlobalAveragePooling1D {
        GlobalAveragePooling1D {
            name: name.into(),
            keepdims: false,
        }
    }
}

impl Layer for GlobalAveragePooling1D {
    fn class(&self) -> &'static str {
        "GlobalAveragePooling1D"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([("keepdims", Val::Bool(self.keepdims))]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("global_average_pooling1d", x)?.dims().to_vec();
        let out = self.output_shape(dims.get(1..).unwrap_or(&[]))?;
        global_pool(cx.g, mean_pool, x, 1, self.keepdims, out)
    }

    /// `ReduceMean` over the steps.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        self.output_shape(cx.input_shape())?;
        Ok(onnx_global_pool(cx, "ReduceMean", &x, 1, self.keepdims))
    }
}
