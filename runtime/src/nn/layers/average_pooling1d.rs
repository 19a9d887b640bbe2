//! `AveragePooling1D` (alias `AvgPool1D`): the mean of each window of a sequence.

use super::average_pooling2d::average;
use super::spatial::{onnx_pool, pool_args, pool_window, Padding};
use crate::ir::Value;
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::Result;
use strata_spec::{Args, Val};

#[derive(Clone, Debug, PartialEq)]
pub struct AveragePooling1D {
    pub name: String,
    pub pool_size: usize,
    /// `None`: the pool size (Keras' default).
    pub strides: Option<usize>,
    pub padding: Padding,
}

impl AveragePooling1D {
    /// Keras' defaults: strides equal to the pool size, valid padding.
    pub fn new(name: impl Into<String>, pool_size: usize) -> AveragePooling1D {
        AveragePooling1D {
            name: name.into(),
            pool_size,
            strides: None,
            padding: Padding::Valid,
        }
    }
}

impl Layer for AveragePooling1D {
    fn class(&self) -> &'static str {
        "AveragePooling1D"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(pool_args(
            Val::Usize(self.pool_size),
            Val::OptionalUsize(self.strides),
            self.padding,
        ))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("average_pooling1d", x)?.dims().to_vec();
        let input = dims.get(1..).unwrap_or(&[]);
        let out = self.output_shape(input)?;
        let strides = self.strides.map(|s| [s]);
        let window = pool_window(input, [self.pool_size], strides, self.padding);
        // Divided by the real (unpadded) elements of each window, as Keras does.
        average(cx, x, input, &out, window)
    }

    /// `AveragePool` on `[batch, channels, steps]` with the same explicit padding.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        self.output_shape(cx.input_shape())?;
        let strides = self.strides.map(|s| [s]);
        Ok(onnx_pool(
            cx,
            "AveragePool",
            &x,
            [self.pool_size],
            strides,
            self.padding,
        ))
    }
}
