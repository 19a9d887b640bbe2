//! `SeparableConv2D`: a depthwise convolution (each channel with `depth_multiplier`
//! kernels of its own) then a 1x1 convolution mixing the channels, plus bias and
//! activation, with Keras' arguments, defaults and weights (`depthwise_kernel`
//! `[kh, kw, in, depth_multiplier]`, `pointwise_kernel` `[1, 1, in · depth_multiplier,
//! filters]`, `bias`).

use super::depthwise_conv2d::{depthwise, onnx_depthwise};
use super::spatial::{Padding, Sliding};
use crate::ir::Value;
use crate::nn::entry::{activation, args, initializer, padding};
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::nn::{Activation, Initializer};
use crate::Result;
use strata_spec::{Args, Val};

#[derive(Clone, Debug, PartialEq)]
pub struct SeparableConv2D {
    pub name: String,
    pub filters: usize,
    pub kernel_size: [usize; 2],
    pub strides: [usize; 2],
    pub padding: Padding,
    pub dilation_rate: [usize; 2],
    /// Depthwise output channels per input channel.
    pub depth_multiplier: usize,
    pub activation: Activation,
    pub use_bias: bool,
    pub depthwise_initializer: Initializer,
    pub pointwise_initializer: Initializer,
    pub bias_initializer: Initializer,
}

impl SeparableConv2D {
    /// Keras' defaults: stride 1, valid padding, no dilation, depth multiplier 1, a bias,
    /// glorot_uniform kernels.
    pub fn new(
        name: impl Into<String>,
        filters: usize,
        kernel_size: [usize; 2],
        activation: Activation,
    ) -> SeparableConv2D {
        SeparableConv2D {
            name: name.into(),
            filters,
            kernel_size,
            strides: [1, 1],
            padding: Padding::Valid,
            dilation_rate: [1, 1],
            depth_multiplier: 1,
            activation,
            use_bias: true,
            depthwise_initializer: Initializer::GlorotUniform,
            pointwise_initializer: Initializer::GlorotUniform,
            bias_initializer: Initializer::Zeros,
        }
    }
}

/// The 1x1 convolution that mixes the depthwise channels.
const POINTWISE: Sliding<2> = Sliding {
    kernel_size: [1, 1],
    strides: [1, 1],
    padding: Padding::Valid,
    dilation_rate: [1, 1],
};

impl SeparableConv2D {
    fn sliding(&self) -> Sliding<2> {
        Sliding {
            kernel_size: self.kernel_size,
            strides: self.strides,
            padding: self.padding,
            dilation_rate: self.dilation_rate,
        }
    }
}

impl Layer for SeparableConv2D {
    fn class(&self) -> &'static str {
        "SeparableConv2D"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([
            ("filters", Val::Usize(self.filters)),
            ("kernel_size", Val::Pair(self.kernel_size)),
            ("strides", Val::Pair(self.strides)),
            ("padding", padding(self.padding)),
            ("dilation_rate", Val::Pair(self.dilation_rate)),
            ("depth_multiplier", Val::Usize(self.depth_multiplier)),
            ("activation", activation(self.activation)),
            ("use_bias", Val::Bool(self.use_bias)),
            (
                "depthwise_initializer",
                initializer(self.depthwise_initializer),
            ),
            (
                "pointwise_initializer",
                initializer(self.pointwise_initializer),
            ),
            ("bias_initializer", initializer(self.bias_initializer)),
        ]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let (depthwise_kernel, pointwise_kernel, bias) = if self.use_bias {
            let [d, p, b] = expect_params(self, params)?;
            (d, p, Some(b))
        } else {
            let [d, p] = expect_params(self, params)?;
            (d, p, None)
        };
        let dims = cx.g.try_ty("separable_conv2d", x)?.dims().to_vec();
        let input = dims.get(1..).unwrap_or(&[]);
        let out = self.output_shape(input)?;
        let mid = depthwise(cx.g, x, depthwise_kernel, input, self.sliding())?;
        let mid_shape = [out[0], out[1], input[2] * self.depth_multiplier];
        let mut y = POINTWISE.convolve(cx.g, mid, pointwise_kernel, &mid_shape, 1)?;
        if let Some(b) = bias {
            y = cx.g.add(y, b)?;
        }
        cx.activate(self.activation, y)
    }

    /// The depthwise `Conv` (one group per channel), then a 1x1 `Conv` with the bias,
    /// its weight the pointwise kernel transposed to `[filters, in · multiplier, 1, 1]`.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        let (depthwise_kernel, pointwise_kernel, bias) = if self.use_bias {
            let [d, p, b] = cx.params(params)?;
            (d, p, Some(b))
        } else {
            let [d, p] = cx.params(params)?;
            (d, p, None)
        };
        self.output_shape(cx.input_shape())?;
        let m = self.depth_multiplier;
        let mid = onnx_depthwise(cx, &x, depthwise_kernel, None, self.sliding(), m);
        let w = cx.transpose(pointwise_kernel, &[3, 2, 0, 1]);
        let y = POINTWISE.onnx_conv(cx, &mid, &w, bias, 1);
        self.activation.onnx(cx, y)
    }
}
