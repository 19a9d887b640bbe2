//! `Conv2D`: a 2-D convolution over `(height, width, channels)` inputs (channels_last),
//! plus bias and activation, with Keras' arguments and defaults.

use super::spatial::{Padding, Sliding};
use crate::ir::Value;
use crate::nn::entry::{activation, args, initializer, padding};
use crate::nn::layer::{Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::nn::{Activation, Initializer};
use crate::Result;
use strata_spec::{Args, Val};

#[derive(Clone, Debug, PartialEq)]
pub struct Conv2D {
    pub name: String,
    pub filters: usize,
    pub kernel_size: [usize; 2],
    pub strides: [usize; 2],
    pub padding: Padding,
    pub dilation_rate: [usize; 2],
    /// Input and output channels are split into this many independent groups.
    pub groups: usize,
    pub activation: Activation,
    pub use_bias: bool,
    pub kernel_initializer: Initializer,
    pub bias_initializer: Initializer,
}

impl Conv2D {
    /// A convolution with Keras' defaults: stride 1, valid padding, no dilation, one
    /// group, a bias, glorot_uniform kernel.
    pub fn new(
        name: impl Into<String>,
        filters: usize,
        kernel_size: [usize; 2],
        activation: Activation,
    ) -> Conv2D {
        Conv2D {
            name: name.into(),
            filters,
            kernel_size,
            strides: [1, 1],
            padding: Padding::Valid,
            dilation_rate: [1, 1],
            groups: 1,
            activation,
            use_bias: true,
            kernel_initializer: Initializer::GlorotUniform,
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

impl Layer for Conv2D {
    fn class(&self) -> &'static str {
        "Conv2D"
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
            ("groups", Val::Usize(self.groups)),
            ("activation", activation(self.activation)),
            ("use_bias", Val::Bool(self.use_bias)),
            ("kernel_initializer", initializer(self.kernel_initializer)),
            ("bias_initializer", initializer(self.bias_initializer)),
        ]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let config = (self.use_bias, self.groups, self.activation);
        self.sliding().conv_layer(self, cx, (x, params), config)
    }

    /// `Conv` between transposes (NHWC to NCHW and back), its weight the kernel
    /// transposed from `[kh, kw, in / groups, out]` to ONNX's `[out, in / groups, kh, kw]`
    /// (a node on the initializer, which keeps the name and layout `weights()` gives), the
    /// bias as `Conv`'s third input; then the activation.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        let (kernel, bias) = cx.kernel_and_bias(self.use_bias, params)?;
        self.output_shape(cx.input_shape())?;
        let w = cx.transpose(kernel, &[3, 2, 0, 1]);
        let y = self.sliding().onnx_conv(cx, &x, &w, bias, self.groups);
        self.activation.onnx(cx, y)
    }
}
