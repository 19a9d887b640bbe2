//! `Dense`: `activation(x · kernel + bias)` over the last axis (as Keras, any input rank).

use crate::ir::{DotDims, Value};
use crate::nn::entry::{activation, args, initializer};
use crate::nn::layer::{kernel_and_bias, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::nn::{Activation, Initializer};
use crate::Result;
use strata_spec::{Args, Val};

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

    fn args(&self) -> Option<Args> {
        Some(args([
            ("units", Val::Usize(self.units)),
            ("activation", activation(self.activation)),
            ("use_bias", Val::Bool(self.use_bias)),
            ("kernel_initializer", initializer(self.kernel_initializer)),
            ("bias_initializer", initializer(self.bias_initializer)),
        ]))
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

    /// `MatMul` (numpy's, so any input rank as `forward`), `Add` of the bias, the activation.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        let (kernel, bias) = cx.kernel_and_bias(self.use_bias, params)?;
        let mut y = cx.op("MatMul", &[&x, kernel], vec![]);
        if let Some(b) = bias {
            y = cx.op("Add", &[&y, b], vec![]);
        }
        self.activation.onnx(cx, y)
    }
}
