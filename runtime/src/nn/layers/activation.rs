//! The `Activation` layer: an activation function on its own.

use crate::ir::Value;
use crate::nn::entry::{activation, args};
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::nn::Activation;
use crate::Result;
use strata_spec::Args;

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

    fn args(&self) -> Option<Args> {
        Some(args([("activation", activation(self.activation))]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        cx.activate(self.activation, x)
    }

    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        self.activation.onnx(cx, x)
    }
}
