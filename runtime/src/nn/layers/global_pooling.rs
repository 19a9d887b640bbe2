//! Keras' global pooling layers, one definition for the four: the mean
//! (`GlobalAveragePooling1D`/`2D`, aliases `GlobalAvgPool1D`/`2D`) or the maximum
//! (`GlobalMaxPooling1D`/`2D`, aliases `GlobalMaxPool1D`/`2D`) of each channel over the
//! whole sequence or image. `AXES` is the number of spatial axes, `MAX` picks the maximum.

use super::spatial::{global_pool, max_pool, mean_pool, onnx_global_pool, Pool};
use crate::ir::Value;
use crate::nn::entry::args;
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::Result;
use strata_spec::{Args, Val};

#[derive(Clone, PartialEq)]
pub struct GlobalPooling<const AXES: usize, const MAX: bool> {
    pub name: String,
    /// Keep the pooled axes as size 1: `(1, channels)` or `(1, 1, channels)` instead of
    /// `(channels,)`.
    pub keepdims: bool,
}

/// The mean of each channel over a sequence.
pub type GlobalAveragePooling1D = GlobalPooling<1, false>;
/// The mean of each channel over an image.
pub type GlobalAveragePooling2D = GlobalPooling<2, false>;
/// The maximum of each channel over a sequence.
pub type GlobalMaxPooling1D = GlobalPooling<1, true>;
/// The maximum of each channel over an image.
pub type GlobalMaxPooling2D = GlobalPooling<2, true>;

/// Printed under the layer's own name (`GlobalMaxPooling2D { .. }`), the type a user
/// writes.
impl<const AXES: usize, const MAX: bool> std::fmt::Debug for GlobalPooling<AXES, MAX> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(self.class())
            .field("name", &self.name)
            .field("keepdims", &self.keepdims)
            .finish()
    }
}

impl<const AXES: usize, const MAX: bool> GlobalPooling<AXES, MAX> {
    pub fn new(name: impl Into<String>) -> Self {
        GlobalPooling {
            name: name.into(),
            keepdims: false,
        }
    }
}

impl<const AXES: usize, const MAX: bool> Layer for GlobalPooling<AXES, MAX> {
    fn class(&self) -> &'static str {
        match (AXES, MAX) {
            (1, false) => "GlobalAveragePooling1D",
            (1, true) => "GlobalMaxPooling1D",
            (_, false) => "GlobalAveragePooling2D",
            (_, true) => "GlobalMaxPooling2D",
        }
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([("keepdims", Val::Bool(self.keepdims))]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("global pooling", x)?.dims().to_vec();
        let out = self.output_shape(dims.get(1..).unwrap_or(&[]))?;
        let pool: Pool = if MAX { max_pool } else { mean_pool };
        global_pool(cx.g, pool, x, AXES, self.keepdims, out)
    }

    /// `ReduceMean` or `ReduceMax` over the spatial axes (opset 17 takes them as an
    /// attribute).
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        self.output_shape(cx.input_shape())?;
        let op = if MAX { "ReduceMax" } else { "ReduceMean" };
        Ok(onnx_global_pool(cx, op, &x, AXES, self.keepdims))
    }
}
