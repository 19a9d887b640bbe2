//! What a layer is in ONNX: the operators its inference pass becomes. Each layer emits
//! them in [`Layer::onnx`](super::Layer::onnx), beside its `forward`, into an
//! [`OnnxGraph`]: plain data here, written out as an ONNX file by `Model::export_onnx`.
//!
//! The values in the graph keep Strata's layouts: channels last (NHWC) for images, the
//! batch axis first and of any size. A layer whose ONNX operator wants another layout
//! (`Conv`, the pools: NCHW) transposes in and out itself, so every layer sees and leaves
//! the layout its `forward` does.

use super::layer::Layer;
use crate::{Error, Result};

/// The version of the default ONNX operator set every exported node is drawn from.
pub const ONNX_OPSET: i64 = 17;

/// A value of the graph, by its (unique) name: the model's input, a weight (named as
/// [`Model::weights`](crate::Model::weights) names it), a constant, or a node's output.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OnnxValue(String);

impl OnnxValue {
    pub fn new(name: impl Into<String>) -> OnnxValue {
        OnnxValue(name.into())
    }

    pub fn name(&self) -> &str {
        &self.0
    }
}

/// A node attribute, of the kinds the exported operators take.
#[derive(Clone, Debug, PartialEq)]
pub enum OnnxAttribute {
    Int(i64),
    Ints(Vec<i64>),
    Float(f32),
}

/// The elements of a constant, row-major.
#[derive(Clone, Debug, PartialEq)]
pub enum OnnxData {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

/// A constant tensor a layer needs besides its weights (a shape, a scalar).
#[derive(Clone, Debug, PartialEq)]
pub struct OnnxConstant {
    pub name: String,
    pub dims: Vec<usize>,
    pub data: OnnxData,
}

/// One operator call.
#[derive(Clone, Debug, PartialEq)]
pub struct OnnxNode {
    pub name: String,
    pub op_type: &'static str,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attributes: Vec<(&'static str, OnnxAttribute)>,
}

/// The nodes and constants emitted so far, in an order where each value is defined
/// before it is used.
#[derive(Clone, Debug, Default)]
pub struct OnnxGraph {
    pub nodes: Vec<OnnxNode>,
    pub constants: Vec<OnnxConstant>,
    /// Numbers the names given to nodes and values, so none repeats even when two layers
    /// of a hand-built model share a name.
    count: usize,
}

impl OnnxGraph {
    /// Renames the value `from` to `to` wherever a node reads or writes it (the model's
    /// output gets its public name this way, without an extra node).
    pub fn rename(&mut self, from: &str, to: &str) {
        for node in &mut self.nodes {
            for name in node.inputs.iter_mut().chain(node.outputs.iter_mut()) {
                if name == from {
                    *name = to.to_string();
                }
            }
        }
    }

    /// Whether some node writes `value`.
    pub fn defines(&self, value: &str) -> bool {
        self.nodes
            .iter()
            .any(|n| n.outputs.iter().any(|o| o == value))
    }

    fn fresh(&mut self, prefix: &str, what: &str) -> String {
        self.count += 1;
        format!("{prefix}/{what}_{}", self.count)
    }
}

/// What one layer's [`Layer::onnx`](super::Layer::onnx) emits into: the graph, the
/// layer's input shape, and names for its nodes under the layer's name.
pub struct OnnxForward<'g> {
    graph: &'g mut OnnxGraph,
    /// `name (Class)`, for errors.
    layer: String,
    prefix: String,
    input: Vec<usize>,
    /// Every input's shape without the batch axis, for a call on several.
    inputs: Vec<Vec<usize>>,
}

impl<'g> OnnxForward<'g> {
    /// The context of `layer`, whose input has shape `[batch, input...]`.
    pub fn new(graph: &'g mut OnnxGraph, layer: &dyn Layer, input: &[usize]) -> OnnxForward<'g> {
        OnnxForward {
            graph,
            layer: format!("{} ({})", layer.name(), layer.class()),
            prefix: layer.name().to_string(),
            input: input.to_vec(),
            inputs: vec![input.to_vec()],
        }
    }

    /// The context of one call of `layer` on inputs of shapes `inputs` (each without the
    /// batch axis); the first is [`OnnxForward::input_shape`].
    pub fn call(
        graph: &'g mut OnnxGraph,
        layer: &dyn Layer,
        inputs: &[&[usize]],
    ) -> OnnxForward<'g> {
        let first = inputs.first().copied().unwrap_or(&[]);
        OnnxForward {
            inputs: inputs.iter().map(|s| s.to_vec()).collect(),
            ..OnnxForward::new(graph, layer, first)
        }
    }

    /// The layer's input shape without the batch axis (the batch size is left open).
    pub fn input_shape(&self) -> &[usize] {
        &self.input
    }

    /// Every input's shape without the batch axis (one for a one-input layer).
    pub fn input_shapes(&self) -> &[Vec<usize>] {
        &self.inputs
    }

    /// Emits `op_type(inputs)` with `attributes`; its one output.
    pub fn op(
        &mut self,
        op_type: &'static str,
        inputs: &[&OnnxValue],
        attributes: Vec<(&'static str, OnnxAttribute)>,
    ) -> OnnxValue {
        let name = self.graph.fresh(&self.prefix, op_type);
        let output = name.clone();
        self.graph.nodes.push(OnnxNode {
            name,
            op_type,
            inputs: inputs.iter().map(|v| v.0.clone()).collect(),
            outputs: vec![output.clone()],
            attributes,
        });
        OnnxValue(output)
    }

    /// A constant tensor of `dims`.
    pub fn constant(&mut self, dims: &[usize], data: OnnxData) -> OnnxValue {
        let name = self.graph.fresh(&self.prefix, "const");
        self.graph.constants.push(OnnxConstant {
            name: name.clone(),
            dims: dims.to_vec(),
            data,
        });
        OnnxValue(name)
    }

    /// An f32 scalar, which broadcasts against any tensor.
    pub fn scalar(&mut self, v: f64) -> OnnxValue {
        self.constant(&[], OnnxData::F32(vec![v as f32]))
    }

    /// An i64 vector (a shape or a list of axes, for the operators that take those as
    /// inputs).
    pub fn ints(&mut self, v: &[i64]) -> OnnxValue {
        self.constant(&[v.len()], OnnxData::I64(v.to_vec()))
    }

    /// `x` with its axes permuted: output axis `i` is input axis `perm[i]`.
    pub fn transpose(&mut self, x: &OnnxValue, perm: &[i64]) -> OnnxValue {
        self.op(
            "Transpose",
            &[x],
            vec![("perm", OnnxAttribute::Ints(perm.to_vec()))],
        )
    }

    /// The `N` weights the layer's mapping expects, or an error naming the layer.
    pub fn params<'p, const N: usize>(
        &self,
        params: &'p [OnnxValue],
    ) -> Result<[&'p OnnxValue; N]> {
        let got: Vec<&OnnxValue> = params.iter().collect();
        got.try_into().map_err(|got: Vec<_>| {
            Error::invalid(
                self.layer.clone(),
                format!("the ONNX mapping expects {N} weight(s), got {}", got.len()),
            )
        })
    }

    /// The kernel and, when the layer has one, the bias among its weights.
    pub fn kernel_and_bias<'p>(
        &self,
        use_bias: bool,
        params: &'p [OnnxValue],
    ) -> Result<(&'p OnnxValue, Option<&'p OnnxValue>)> {
        if use_bias {
            let [k, b] = self.params(params)?;
            Ok((k, Some(b)))
        } else {
            let [k] = self.params(params)?;
            Ok((k, None))
        }
    }

    /// The error for a part of this layer (`op`) that has no ONNX mapping.
    pub fn unsupported(&self, op: impl Into<String>, message: impl Into<String>) -> Error {
        Error::OnnxUnsupported {
            layer: self.layer.clone(),
            op: op.into(),
            message: message.into(),
        }
    }
}
