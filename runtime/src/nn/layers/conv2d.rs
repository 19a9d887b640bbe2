//! `Conv2D`: a 2-D convolution over `(height, width, channels)` inputs (channels_last),
//! plus bias and activation, with Keras' arguments and defaults.

use super::spatial::{image, slide, Padding};
use crate::ir::{ConvParams, Value};
use crate::nn::layer::{bad_config, bad_input, kernel_and_bias, Forward, Layer, ParamSpec};
use crate::nn::{Activation, Initializer};
use crate::Result;

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

    /// The kernel's extent once dilated: `(k - 1) · d + 1`.
    fn dilated_kernel(&self) -> [usize; 2] {
        [0, 1].map(|a| (self.kernel_size[a].max(1) - 1) * self.dilation_rate[a] + 1)
    }

    /// Checks the configuration and the input's channels; gives the input channels.
    fn channels(&self, input: &[usize]) -> Result<usize> {
        if self.filters == 0 || self.kernel_size.contains(&0) || self.groups == 0 {
            return Err(bad_config(
                self,
                "filters, kernel_size and groups must be at least 1",
            ));
        }
        if self.dilation_rate.contains(&0) {
            return Err(bad_config(self, "dilation_rate must be at least 1"));
        }
        // Keras refuses the combination: a strided atrous convolution skips inputs.
        if self.strides.iter().any(|&s| s > 1) && self.dilation_rate.iter().any(|&d| d > 1) {
            return Err(bad_config(
                self,
                "strides > 1 and dilation_rate > 1 cannot be combined",
            ));
        }
        let [_, _, c] = image(self, input)?;
        if !self.filters.is_multiple_of(self.groups) {
            return Err(bad_config(
                self,
                format!(
                    "filters ({}) must be a multiple of groups ({})",
                    self.filters, self.groups
                ),
            ));
        }
        if c % self.groups != 0 {
            return Err(bad_input(
                self,
                input,
                &format!("channels divisible by groups ({})", self.groups),
            ));
        }
        Ok(c)
    }
}

impl Layer for Conv2D {
    fn class(&self) -> &'static str {
        "Conv2D"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn output_shape(&self, input: &[usize]) -> Result<Vec<usize>> {
        self.channels(input)?;
        let ([h, w], _) = slide(
            self,
            input,
            self.dilated_kernel(),
            self.strides,
            self.padding,
        )?;
        Ok(vec![h, w, self.filters])
    }

    fn params(&self, input: &[usize]) -> Result<Vec<ParamSpec>> {
        let c = self.channels(input)?;
        let [kh, kw] = self.kernel_size;
        // Keras' fans for convolution kernels: channels times the receptive field.
        let (fan_in, fan_out) = (kh * kw * c / self.groups, kh * kw * self.filters);
        let mut p = vec![ParamSpec {
            name: format!("{}/kernel", self.name),
            dims: vec![kh, kw, c / self.groups, self.filters],
            init: self.kernel_initializer,
            fan_in,
            fan_out,
            trainable: true,
        }];
        if self.use_bias {
            p.push(ParamSpec {
                name: format!("{}/bias", self.name),
                dims: vec![self.filters],
                init: self.bias_initializer,
                fan_in,
                fan_out,
                trainable: true,
            });
        }
        Ok(p)
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let (kernel, bias) = kernel_and_bias(self, self.use_bias, params)?;
        let dims = cx.g.try_ty("conv2d", x)?.dims().to_vec();
        let input = dims.get(1..).unwrap_or(&[]);
        self.channels(input)?;
        let (_, pads) = slide(
            self,
            input,
            self.dilated_kernel(),
            self.strides,
            self.padding,
        )?;
        let mut y = cx.g.convolution(
            x,
            kernel,
            ConvParams {
                strides: self.strides.to_vec(),
                padding: pads
                    .iter()
                    .map(|&(lo, hi)| (lo as i64, hi as i64))
                    .collect(),
                lhs_dilation: vec![1, 1],
                rhs_dilation: self.dilation_rate.to_vec(),
                feature_groups: self.groups,
            },
        )?;
        if let Some(b) = bias {
            y = cx.g.add(y, b)?;
        }
        cx.activate(self.activation, y)
    }
}
