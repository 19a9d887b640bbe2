//! `MaxPooling2D` (alias `MaxPool2D`): the maximum of each window of an image.

use super::spatial::{onnx_pool, pool_args, pool_window, Padding};
use crate::ir::{ReduceOp, Value};
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::Result;
use strata_spec::{Args, Val};

#[derive(Clone, Debug, PartialEq)]
pub struct MaxPooling2D {
    pub name: String,
    pub pool_size: [usize; 2],
    /// `None`: the pool size (Keras' default).
    pub strides: Option<[usize; 2]>,
    pub padding: Padding,
}

impl MaxPooling2D {
    /// Keras' defaults: strides equal to the pool size, valid padding.
    pub fn new(name: impl Into<String>, pool_size: [usize; 2]) -> MaxPooling2D {
        MaxPooling2D {
            name: name.into(),
            pool_size,
            strides: None,
            padding: Padding::Valid,
        }
    }
}

impl Layer for MaxPooling2D {
    fn class(&self) -> &'static str {
        "MaxPooling2D"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(pool_args(
            Val::Pair(self.pool_size),
            Val::OptionalPair(self.strides),
            self.padding,
        ))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("max_pooling2d", x)?.dims().to_vec();
        let input = dims.get(1..).unwrap_or(&[]);
        self.output_shape(input)?;
        // Same-padding positions hold the reduction's identity (-inf), so they never win.
        let window = pool_window(input, self.pool_size, self.strides, self.padding);
        cx.g.reduce_window(ReduceOp::Max, x, window)
    }

    /// `MaxPool` between NHWC/NCHW transposes, with the same explicit padding (which
    /// never wins a max in ONNX either).
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        self.output_shape(cx.input_shape())?;
        Ok(onnx_pool(
            cx,
            "MaxPool",
            &x,
            self.pool_size,
            self.strides,
            self.padding,
        ))
    }
}
