//! The `Activation` layer: an activation function on its own.

use crate::ir::Value;
use crate::nn::layer::{expect_params, Forward, Layer, ParamSpec};
use crate::nn::Activation;
use crate::Result;

/// Keras' `Activation` layer (named so beside the [`Activation`] function it applies).
#[derive(Clone, Debug, PartialEq)]
pub struct ActivationLayer {
    pub name: String,
    pub activation: Activation,
}

impl ActivationLayer {
    pub fn new(name: impl Into<String>, activation: Activation) -> ActivationLayer {
        ActivationLayer {
            name: name.into(),
            activation,
        }
    }
}

impl Layer for ActivationLayer {
    fn class(&self) -> &'static str {
        "Activation"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn output_shape(&self, input: &[usize]) -> Result<Vec<usize>> {
        Ok(input.to_vec())
    }

    fn params(&self, _input: &[usize]) -> Result<Vec<ParamSpec>> {
        Ok(Vec::new())
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        cx.activate(self.activation, x)
    }
}
