//! `Dense`: `activation(x · kernel + bias)` over the last axis (as Keras, any input rank).

use crate::ir::{DotDims, Value};
use crate::nn::layer::{bad_config, bad_input, kernel_and_bias, Forward, Layer, ParamSpec};
use crate::nn::{Activation, Initializer};
use crate::Result;

#[derive(Clone, Debug, PartialEq)]
pub struct Dense {
    pub name: String,
    pub units: usize,
    pub activation: Activation,
    pub use_bias: bool,
    pub kernel_initializer: Initializer,
    pub bias_initializer: Initializer,
}

impl Dense {
    /// A dense layer with Keras' defaults: bias, glorot_uniform kernel, zero bias.
    pub fn new(name: impl Into<String>, units: usize, activation: Activation) -> Dense {
        Dense {
            name: name.into(),
            units,
            activation,
            use_bias: true,
            kernel_initializer: Initializer::GlorotUniform,
            bias_initializer: Initializer::Zeros,
        }
    }
}

impl Layer for Dense {
    fn class(&self) -> &'static str {
        "Dense"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn output_shape(&self, input: &[usize]) -> Result<Vec<usize>> {
        if self.units == 0 {
            return Err(bad_config(self, "units must be at least 1"));
        }
        let Some((_, lead)) = input.split_last() else {
            return Err(bad_input(self, input, "[..., features] (rank >= 1)"));
        };
        let mut out = lead.to_vec();
        out.push(self.units);
        Ok(out)
    }

    fn params(&self, input: &[usize]) -> Result<Vec<ParamSpec>> {
        let &fan_in = input
            .last()
            .ok_or_else(|| bad_input(self, input, "[..., features] (rank >= 1)"))?;
        let mut p = vec![ParamSpec {
            name: format!("{}/kernel", self.name),
            dims: vec![fan_in, self.units],
            init: self.kernel_initializer,
            fan_in,
            fan_out: self.units,
            trainable: true,
        }];
        if self.use_bias {
            p.push(ParamSpec {
                name: format!("{}/bias", self.name),
                dims: vec![self.units],
                init: self.bias_initializer,
                fan_in,
                fan_out: self.units,
                trainable: true,
            });
        }
        Ok(p)
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let (kernel, bias) = kernel_and_bias(self, self.use_bias, params)?;
        let r = cx.g.try_ty("dense", x)?.rank();
        let g = &mut *cx.g;
        let mut y = g.dot_general(
            x,
            kernel,
            DotDims {
                lhs_batch: vec![],
                rhs_batch: vec![],
                lhs_contract: vec![r.saturating_sub(1)],
                rhs_contract: vec![0],
            },
        )?;
        if let Some(b) = bias {
            y = g.add(y, b)?;
        }
        cx.activate(self.activation, y)
    }
}
