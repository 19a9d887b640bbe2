//! `Conv2DTranspose` (alias `Convolution2DTranspose`): the transpose (gradient) of a 2-D
//! convolution, plus bias and activation, with Keras' arguments, defaults, kernel layout
//! `[kh, kw, filters, in]` and output size (`deconv_output_length`).

use super::spatial::{dilated, Padding};
use crate::ir::{ConvParams, Value};
use crate::nn::entry::{activation, args, initializer, padding};
use crate::nn::layer::{kernel_and_bias, Forward, Layer};
use crate::nn::{Activation, Initializer};
use crate::Result;
use strata_spec::{Args, Val};

#[derive(Clone, Debug, PartialEq)]
pub struct Conv2DTranspose {
    pub name: String,
    pub filters: usize,
    pub kernel_size: [usize; 2],
    pub strides: [usize; 2],
    pub padding: Padding,
    /// Extra rows and columns at the end of the output (each smaller than its stride);
    /// `None`: Keras' inferred size.
    pub output_padding: Option<[usize; 2]>,
    pub dilation_rate: [usize; 2],
    pub activation: Activation,
    pub use_bias: bool,
    pub kernel_initializer: Initializer,
    pub bias_initializer: Initializer,
}

impl Conv2DTranspose {
    /// Keras' defaults: stride 1, valid padding, inferred output size, no dilation, a
    /// bias, glorot_uniform kernel.
    pub fn new(
        name: impl Into<String>,
        filters: usize,
        kernel_size: [usize; 2],
        activation: Activation,
    ) -> Conv2DTranspose {
        Conv2DTranspose {
            name: name.into(),
            filters,
            kernel_size,
            strides: [1, 1],
            padding: Padding::Valid,
            output_padding: None,
            dilation_rate: [1, 1],
            activation,
            use_bias: true,
            kernel_initializer: Initializer::GlorotUniform,
            bias_initializer: Initializer::Zeros,
        }
    }
}

impl Layer for Conv2DTranspose {
    fn class(&self) -> &'static str {
        "Conv2DTranspose"
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
            ("output_padding", Val::OptionalPair(self.output_padding)),
            ("dilation_rate", Val::Pair(self.dilation_rate)),
            ("activation", activation(self.activation)),
            ("use_bias", Val::Bool(self.use_bias)),
            ("kernel_initializer", initializer(self.kernel_initializer)),
            ("bias_initializer", initializer(self.bias_initializer)),
        ]))
    }

    /// The convolution whose gradient this is, written forwards: the input dilated by the
    /// strides (zeros between pixels), the kernel flipped in space and its channel axes
    /// swapped, stride 1. The padding places the output as TensorFlow's
    /// `conv2d_transpose` does: for `same`, the forward convolution from the output back
    /// to the input pads `total / 2` before; the rest of the output (and any output
    /// padding) comes after, negative padding cropping.
    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let (kernel, bias) = kernel_and_bias(self, self.use_bias, params)?;
        let dims = cx.g.try_ty("conv2d_transpose", x)?.dims().to_vec();
        let input = dims.get(1..).unwrap_or(&[]);
        let out = self.output_shape(input)?;
        let window = dilated(self.kernel_size, self.dilation_rate);
        let padding = (0..2)
            .map(|a| {
                let (n, o, s, k) = (input[a], out[a], self.strides[a], window[a]);
                let covered = (n - 1) * s + k;
                let before = match self.padding {
                    Padding::Same => covered.saturating_sub(o) / 2,
                    // Refused by the entry's checks (Conv1D only).
                    Padding::Valid | Padding::Causal => 0,
                };
                let lo = (k - 1 - before) as i64;
                let dilated_input = ((n - 1) * s + 1) as i64;
                (lo, o as i64 + k as i64 - 1 - dilated_input - lo)
            })
            .collect();
        let swapped = cx.g.transpose(kernel, &[0, 1, 3, 2])?;
        let flipped = cx.g.reverse(swapped, &[0, 1])?;
        let mut y = cx.g.convolution(
            x,
            flipped,
            ConvParams {
                strides: vec![1, 1],
                padding,
                lhs_dilation: self.strides.to_vec(),
                rhs_dilation: self.dilation_rate.to_vec(),
                feature_groups: 1,
            },
        )?;
        if let Some(b) = bias {
            y = cx.g.add(y, b)?;
        }
        cx.activate(self.activation, y)
    }
}
