//! `DepthwiseConv2D`: each channel of an image convolved with `depth_multiplier` kernels
//! of its own, plus bias and activation, with Keras' arguments, defaults and kernel layout
//! `[kh, kw, channels, depth_multiplier]`.

use super::spatial::{Padding, Sliding};
use crate::ir::{Graph, Value};
use crate::nn::entry::{activation, args, initializer, padding};
use crate::nn::layer::{kernel_and_bias, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::nn::{Activation, Initializer};
use crate::{Error, Result};
use strata_spec::{Args, Val};

#[derive(Clone, Debug, PartialEq)]
pub struct DepthwiseConv2D {
    pub name: String,
    pub kernel_size: [usize; 2],
    pub strides: [usize; 2],
    pub padding: Padding,
    /// Output channels per input channel.
    pub depth_multiplier: usize,
    pub dilation_rate: [usize; 2],
    pub activation: Activation,
    pub use_bias: bool,
    pub depthwise_initializer: Initializer,
    pub bias_initializer: Initializer,
}

impl DepthwiseConv2D {
    /// Keras' defaults: stride 1, valid padding, one output channel per input channel, no
    /// dilation, a bias, glorot_uniform kernel.
    pub fn new(
        name: impl Into<String>,
        kernel_size: [usize; 2],
        activation: Activation,
    ) -> DepthwiseConv2D {
        DepthwiseConv2D {
            name: name.into(),
            kernel_size,
            strides: [1, 1],
            padding: Padding::Valid,
            depth_multiplier: 1,
            dilation_rate: [1, 1],
            activation,
            use_bias: true,
            depthwise_initializer: Initializer::GlorotUniform,
            bias_initializer: Initializer::Zeros,
        }
    }

    fn sliding(&self) -> Sliding<2> {
        Sliding {
            kernel_size: self.kernel_size,
            strides: self.strides,
            padding: self.padding,
            dilation_rate: self.dilation_rate,
        }
    }
}

/// The depthwise convolution of the image `x` (`input`: its shape without the batch, one
/// the layer's shape rule accepted) with `kernel` (`[kh, kw, channels, multiplier]`): a
/// convolution with one group per channel, the kernel seen as `[kh, kw, 1, channels ·
/// multiplier]`, so output channel `c · multiplier + j` is channel `c`'s `j`-th, as in
/// Keras.
pub(crate) fn depthwise(
    g: &mut Graph,
    x: Value,
    kernel: Value,
    input: &[usize],
    sliding: Sliding<2>,
) -> Result<Value> {
    let k = g.try_ty("depthwise kernel", kernel)?.dims().to_vec();
    let &[kh, kw, channels, multiplier] = k.as_slice() else {
        return Err(Error::invalid(
            "depthwise kernel",
            format!("expected [kh, kw, channels, depth_multiplier], got {k:?}"),
        ));
    };
    let grouped = g.reshape(kernel, vec![kh, kw, 1, channels * multiplier])?;
    sliding.convolve(g, x, grouped, input, channels)
}

/// `depthwise` in ONNX: `Conv` with one group per channel, its weight the kernel
/// reshaped to `[kh, kw, 1, channels · multiplier]` and transposed to `[channels ·
/// multiplier, 1, kh, kw]`.
pub(crate) fn onnx_depthwise(
    cx: &mut OnnxForward<'_>,
    x: &OnnxValue,
    kernel: &OnnxValue,
    bias: Option<&OnnxValue>,
    sliding: Sliding<2>,
    multiplier: usize,
) -> OnnxValue {
    let channels = cx.input_shape().get(2).copied().unwrap_or(1);
    let [kh, kw] = sliding.kernel_size;
    let shape = cx.ints(&[kh as i64, kw as i64, 1, (channels * multiplier) as i64]);
    let grouped = cx.op("Reshape", &[kernel, &shape], vec![]);
    let w = cx.transpose(&grouped, &[3, 2, 0, 1]);
    sliding.onnx_conv(cx, x, &w, bias, channels)
}

impl Layer for DepthwiseConv2D {
    fn class(&self) -> &'static str {
        "DepthwiseConv2D"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([
            ("kernel_size", Val::Pair(self.kernel_size)),
            ("strides", Val::Pair(self.strides)),
            ("padding", padding(self.padding)),
            ("depth_multiplier", Val::Usize(self.depth_multiplier)),
            ("dilation_rate", Val::Pair(self.dilation_rate)),
            ("activation", activation(self.activation)),
            ("use_bias", Val::Bool(self.use_bias)),
            (
                "depthwise_initializer",
                initializer(self.depthwise_initializer),
            ),
            ("bias_initializer", initializer(self.bias_initializer)),
        ]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let (kernel, bias) = kernel_and_bias(self, self.use_bias, params)?;
        let dims = cx.g.try_ty("depthwise_conv2d", x)?.dims().to_vec();
        let input = dims.get(1..).unwrap_or(&[]);
        self.output_shape(input)?;
        let mut y = depthwise(cx.g, x, kernel, input, self.sliding())?;
        if let Some(b) = bias {
            y = cx.g.add(y, b)?;
        }
        cx.activate(self.activation, y)
    }

    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        let (kernel, bias) = cx.kernel_and_bias(self.use_bias, params)?;
        self.output_shape(cx.input_shape())?;
        let m = self.depth_multiplier;
        let y = onnx_depthwise(cx, &x, kernel, bias, self.sliding(), m);
        self.activation.onnx(cx, y)
    }
}
