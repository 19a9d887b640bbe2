//! `Conv2DTranspose` (alias `Convolution2DTranspose`): the transpose (gradient) of a 2-D
//! convolution, plus bias and activation, with Keras' arguments, defaults, kernel layout
//! `[kh, kw, filters, in]` and output size (`deconv_output_length`).

use super::spatial::{dilated, onnx_nchw, onnx_sizes, Padding};
use crate::ir::{ConvParams, Value};
use crate::nn::entry::{activation, args, initializer, padding};
use crate::nn::layer::{bad_config, kernel_and_bias, Forward, Layer};
use crate::nn::onnx::{OnnxAttribute, OnnxForward, OnnxValue};
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

impl Conv2DTranspose {
    /// Where the output sits, per spatial axis, in the full transposed result (`(n - 1)
    /// · s + k` long, `k` the dilated kernel): how much of the full result comes before
    /// it, and how far the output reaches past the full result's end (negative: that
    /// much of the end is cut). `same` cuts half of the excess before, as TensorFlow's
    /// `conv2d_transpose` does (the odd element goes at the end).
    fn placement(&self, input: &[usize], out: &[usize]) -> Result<[(usize, i64); 2]> {
        let window = dilated(self.kernel_size, self.dilation_rate);
        let mut place = [(0, 0); 2];
        for (a, p) in place.iter_mut().enumerate() {
            let (n, o, s, k) = (input[a], out[a], self.strides[a], window[a]);
            // Sizes past i64 (strides or dilations of absurd size) are an error, not a wrap.
            let full = (n.max(1) - 1)
                .checked_mul(s)
                .and_then(|v| v.checked_add(k))
                .filter(|&f| i64::try_from(f).is_ok() && i64::try_from(o).is_ok())
                .ok_or_else(|| {
                    bad_config(
                        self,
                        format!(
                            "the transposed output of {n} pixels with stride {s} and a {k}-pixel \
                             window is too large to index"
                        ),
                    )
                })?;
            let before = match self.padding {
                Padding::Same => full.saturating_sub(o) / 2,
                // Causal is refused by the entry's checks (Conv1D only).
                Padding::Valid | Padding::Causal => 0,
            };
            *p = (before, o as i64 + before as i64 - full as i64);
        }
        Ok(place)
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
    /// swapped, stride 1, padded by `k - 1` at each end for the full result, less what
    /// [`Self::placement`] cuts (negative padding crops).
    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let (kernel, bias) = kernel_and_bias(self, self.use_bias, params)?;
        let dims = cx.g.try_ty("conv2d_transpose", x)?.dims().to_vec();
        let input = dims.get(1..).unwrap_or(&[]);
        let out = self.output_shape(input)?;
        let window = dilated(self.kernel_size, self.dilation_rate);
        let padding = self
            .placement(input, &out)?
            .iter()
            .zip(window)
            .map(|(&(before, after), k)| {
                let edge = k as i64 - 1;
                (edge - before as i64, edge + after)
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

    /// `ConvTranspose` on NCHW, its weight the kernel transposed from Keras' `[kh, kw,
    /// filters, in]` to ONNX's `[in, filters, kh, kw]`; `pads` cut what
    /// [`Self::placement`] cuts, and `output_padding` adds what reaches past the end.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        let (kernel, bias) = cx.kernel_and_bias(self.use_bias, params)?;
        let input = cx.input_shape().to_vec();
        let out = self.output_shape(&input)?;
        let place = self.placement(&input, &out)?;
        let mut pads: Vec<i64> = place.iter().map(|&(before, _)| before as i64).collect();
        pads.extend(place.iter().map(|&(_, after)| (-after).max(0)));
        let attributes = vec![
            ("kernel_shape", onnx_sizes(&self.kernel_size)),
            ("strides", onnx_sizes(&self.strides)),
            ("dilations", onnx_sizes(&self.dilation_rate)),
            ("pads", OnnxAttribute::Ints(pads)),
            (
                "output_padding",
                OnnxAttribute::Ints(place.iter().map(|&(_, after)| after.max(0)).collect()),
            ),
        ];
        let w = cx.transpose(kernel, &[3, 2, 0, 1]);
        let mut rest = vec![&w];
        rest.extend(bias);
        let y = onnx_nchw(cx, "ConvTranspose", &x, &rest, attributes);
        self.activation.onnx(cx, y)
    }
}
