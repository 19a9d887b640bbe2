//! An architecture: a model's layers and how their forward passes compose.

use super::layer::{Forward, Layer, ParamDecl};
use super::onnx::{OnnxForward, OnnxGraph, OnnxValue};
use crate::ir::Value;
use crate::Result;

/// A stack of layers. `model![...]` generates a type implementing this for each model
/// (with the shapes it checked at compile time as the consts); [`Sequential`] is the same
/// thing assembled at run time.
pub trait Architecture: Send + Sync + 'static {
    /// The input shape without the batch dimension, when declared (`Input(784)` or
    /// `input_shape = 784`); `None` means it is taken from the first data (deferred build).
    const INPUT_SHAPE: Option<&'static [usize]>;
    /// The output shape without the batch dimension, when known before any data is seen.
    const OUTPUT_SHAPE: Option<&'static [usize]>;
    /// Every parameter, when its dims are known before any data is seen: `model!` lists
    /// them, so the expansion shows each weight's dims, and [`Model::build`] checks the
    /// layers create exactly these.
    const PARAMS: Option<&'static [ParamDecl]> = None;

    /// The model's name in summaries.
    fn name(&self) -> &str {
        "sequential"
    }

    /// The input shape, when declared (for run-time architectures; defaults to the const).
    fn input_shape(&self) -> Option<Vec<usize>> {
        Self::INPUT_SHAPE.map(|s| s.to_vec())
    }

    /// The layers, in order.
    fn layers(&self) -> Vec<&dyn Layer>;

    /// Emits the forward pass: each layer in turn, `params[i]` holding layer `i`'s
    /// parameter values. (`model!` overrides this with one statement per layer, each
    /// intermediate's shape in a comment, so the expansion reads as the model.)
    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[&[Value]]) -> Result<Value> {
        let mut h = x;
        for (layer, p) in self.layers().into_iter().zip(params) {
            h = layer.forward(cx, h, p)?;
        }
        Ok(h)
    }

    /// Emits the ONNX operators of the inference pass of `x` (`[batch, input...]`):
    /// each layer's [`Layer::onnx`] in turn, chained as the default `forward` chains
    /// them, `params[i]` naming layer `i`'s weights. An architecture whose `forward` is
    /// not that chain must override this as well, or its export would compute something
    /// else.
    fn onnx(
        &self,
        graph: &mut OnnxGraph,
        x: OnnxValue,
        input: &[usize],
        params: &[&[OnnxValue]],
    ) -> Result<OnnxValue> {
        let mut h = x;
        let mut shape = input.to_vec();
        for (layer, p) in self.layers().into_iter().zip(params) {
            h = layer.onnx(&mut OnnxForward::new(graph, layer, &shape), h, p)?;
            shape = layer.output_shape(&shape)?;
        }
        Ok(h)
    }
}

/// A run-time assembled layer stack.
#[derive(Debug, Default)]
pub struct Sequential {
    pub name: String,
    pub input_shape: Option<Vec<usize>>,
    pub layers: Vec<Box<dyn Layer>>,
}

impl Sequential {
    pub fn new(input_shape: Option<Vec<usize>>, layers: Vec<Box<dyn Layer>>) -> Sequential {
        Sequential {
            name: "sequential".into(),
            input_shape,
            layers,
        }
    }
}

impl Architecture for Sequential {
    const INPUT_SHAPE: Option<&'static [usize]> = None;
    const OUTPUT_SHAPE: Option<&'static [usize]> = None;

    fn name(&self) -> &str {
        &self.name
    }

    fn input_shape(&self) -> Option<Vec<usize>> {
        self.input_shape.clone()
    }

    fn layers(&self) -> Vec<&dyn Layer> {
        self.layers.iter().map(|l| l.as_ref()).collect()
    }
}
