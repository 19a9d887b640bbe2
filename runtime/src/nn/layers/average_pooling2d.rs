//! `AveragePooling2D` (alias `AvgPool2D`): the mean of each window of an image.

use super::spatial::{onnx_pool, pool_args, pool_window, Padding};
use crate::ir::{DType, ReduceOp, Value, Window};
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::{Result, Tensor};
use strata_spec::{Args, Val};

#[derive(Clone, Debug, PartialEq)]
pub struct AveragePooling2D {
    pub name: String,
    pub pool_size: [usize; 2],
    /// `None`: the pool size (Keras' default).
    pub strides: Option<[usize; 2]>,
    pub padding: Padding,
}

impl AveragePooling2D {
    /// Keras' defaults: strides equal to the pool size, valid padding.
    pub fn new(name: impl Into<String>, pool_size: [usize; 2]) -> AveragePooling2D {
        AveragePooling2D {
            name: name.into(),
            pool_size,
            strides: None,
            padding: Padding::Valid,
        }
    }
}

/// How many of the window's `size` positions starting at `start` (in padded coordinates,
/// `lo` of them padding) fall on the `len` real elements.
fn overlap(start: usize, size: usize, lo: usize, len: usize) -> usize {
    let (a, b) = (start.max(lo), (start + size).min(lo + len));
    b.saturating_sub(a)
}

/// The mean of each `window` of `x` (`[batch, spatial..., channels]`; `input` and `out`
/// its shape and the output's without the batch, as the layer's shape rule gives them).
/// Keras divides by the number of real (unpadded) elements in each window, which varies
/// along the border under same padding: a constant `[spatial..., 1]` of counts, known
/// when the graph is built.
pub(crate) fn average(
    cx: &mut Forward<'_>,
    x: Value,
    input: &[usize],
    out: &[usize],
    window: Window,
) -> Result<Value> {
    let sum = cx.g.reduce_window(ReduceOp::Sum, x, window.clone())?;
    let spatial = &out[..out.len().saturating_sub(1)];
    let mut counts = vec![1.0f32; spatial.iter().product()];
    // Row-major over the output positions: each axis multiplies in its overlap.
    let mut stride = counts.len();
    for (axis, &len) in spatial.iter().enumerate() {
        stride /= len.max(1);
        for (k, c) in counts.iter_mut().enumerate() {
            let i = (k / stride.max(1)) % len.max(1);
            let w = axis + 1;
            *c *= overlap(
                i * window.strides[w],
                window.dims[w],
                window.padding[w].0,
                input[axis],
            ) as f32;
        }
    }
    for c in &mut counts {
        *c = c.max(1.0);
    }
    let mut shape = spatial.to_vec();
    shape.push(1);
    let mut counts = cx.g.constant(Tensor::from_vec(&shape, counts)?);
    let dtype = cx.g.ty(x).dtype;
    if dtype != DType::F32 {
        counts = cx.g.convert(counts, dtype)?;
    }
    cx.g.div(sum, counts)
}

impl Layer for AveragePooling2D {
    fn class(&self) -> &'static str {
        "AveragePooling2D"
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
        let dims = cx.g.try_ty("average_pooling2d", x)?.dims().to_vec();
        let input = dims.get(1..).unwrap_or(&[]);
        let out = self.output_shape(input)?;
        let window = pool_window(input, self.pool_size, self.strides, self.padding);
        average(cx, x, input, &out, window)
    }

    /// `AveragePool` between NHWC/NCHW transposes, with the same explicit padding and
    /// `count_include_pad = 0`: each window divided by its count of real elements, as
    /// `forward` does.
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
            "AveragePool",
            &x,
            self.pool_size,
            self.strides,
            self.padding,
        ))
    }
}
