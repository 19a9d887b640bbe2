//! `Model::export_onnx`: the inference function as an ONNX model, each layer's operators
//! emitted by its [`Layer::onnx`](crate::nn::Layer::onnx) (beside its `forward`), the
//! weights as initializers under their `weights()` names. Written with the messages of
//! `onnx.proto` (our subset of ONNX's schema; `generated.rs` is prost-build's output).

#[rustfmt::skip]
#[allow(dead_code, clippy::all, clippy::pedantic)]
mod generated;

use crate::atomic_file::write_atomic;
use crate::ir::DType;
use crate::nn::onnx::{OnnxAttribute, OnnxData, OnnxGraph, OnnxNode};
use crate::nn::{Architecture, OnnxValue, ONNX_OPSET};
use crate::{Error, Model, Result, Tensor};
use generated::attribute_proto::AttributeType;
use generated::tensor_proto::DataType;
use generated::tensor_shape_proto::{dimension, Dimension};
use generated::{
    type_proto, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use prost::Message;
use std::io::Write;
use std::path::Path;

/// The ONNX IR version of the files written: 8, the one that goes with opset 17.
pub const ONNX_IR_VERSION: i64 = 8;

/// The name of the graph's input and of its output.
const INPUT: &str = "input";
const OUTPUT: &str = "output";
/// The symbolic size of the batch axis of both.
const BATCH: &str = "batch";

impl<A: Architecture> Model<A> {
    /// Writes the model's inference function (what [`predict`](Model::predict) computes:
    /// dropout off, batch normalization by its moving statistics) to `path` as an ONNX
    /// model: IR version 8, the default operator set at version 17
    /// ([`ONNX_OPSET`](crate::nn::ONNX_OPSET)). The graph has one input, `input`
    /// (`[batch, input shape...]`, f32, or int32 ids for a model starting with an
    /// `Embedding`), and one output, `output` (f32), the batch axis of both symbolic
    /// (`batch`), so one file runs any batch size. Images stay channels-last as in
    /// Strata. The weights are initializers named as [`weights`](Model::weights) names
    /// them, in the same layouts; a layer whose ONNX operators want another layout
    /// (a convolution's kernel) transposes it in the graph.
    ///
    /// The model must be built. A layer without an ONNX mapping (one outside the
    /// catalogue that does not implement [`Layer::onnx`](crate::nn::Layer::onnx)) is an
    /// [`Error::OnnxUnsupported`] naming it, and nothing is written. The file is replaced
    /// atomically.
    pub fn export_onnx(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let bytes = self.onnx_model()?.encode_to_vec();
        write_atomic(path, |f| f.write_all(&bytes)).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// The model as ONNX messages.
    fn onnx_model(&self) -> Result<ModelProto> {
        self.check_single_io("export_onnx")?;
        let built = self.built.as_ref().ok_or_else(|| {
            Error::invalid(
                "export_onnx",
                format!(
                    "model `{}` is not built (no input shape declared and none seen yet); \
                     call build(&[...]) or fit it first",
                    self.name()
                ),
            )
        })?;
        let weights = self.weights();
        let names: Vec<OnnxValue> = weights.iter().map(|(n, _)| OnnxValue::new(n)).collect();
        let per_layer: Vec<&[OnnxValue]> = built.ranges.iter().map(|r| &names[r.clone()]).collect();
        let mut graph = OnnxGraph::default();
        let out = self
            .arch()
            .onnx(&mut graph, OnnxValue::new(INPUT), &built.input, &per_layer)?;
        // The output gets its public name: the last node's output renamed, or (a model
        // that is the identity, its output the input or a weight) an Identity node.
        if graph.defines(out.name()) {
            graph.rename(out.name(), OUTPUT);
        } else {
            graph.nodes.push(OnnxNode {
                name: OUTPUT.into(),
                op_type: "Identity",
                inputs: vec![out.name().into()],
                outputs: vec![OUTPUT.into()],
                attributes: vec![],
            });
        }

        let input_type = match self.input_dtype() {
            DType::F32 => DataType::Float,
            DType::I32 => DataType::Int32,
            other => {
                return Err(Error::invalid(
                    "export_onnx",
                    format!("inputs of element type {other} cannot be exported"),
                ))
            }
        };
        let output_shape = &built.output;
        let mut initializer: Vec<TensorProto> = weights
            .iter()
            .map(|(name, t)| weight(name, t))
            .collect::<Result<_>>()?;
        initializer.extend(graph.constants.into_iter().map(|c| TensorProto {
            dims: c.dims.iter().map(|&d| d as i64).collect(),
            data_type: match c.data {
                OnnxData::F32(_) => DataType::Float,
                OnnxData::I64(_) => DataType::Int64,
            } as i32,
            name: c.name,
            raw_data: match c.data {
                OnnxData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
                OnnxData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            },
        }));
        Ok(ModelProto {
            ir_version: ONNX_IR_VERSION,
            producer_name: "strata".into(),
            producer_version: env!("CARGO_PKG_VERSION").into(),
            doc_string: format!(
                "The inference function of the Strata model `{}`.",
                self.name()
            ),
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: ONNX_OPSET,
            }],
            graph: Some(GraphProto {
                name: self.name().into(),
                node: graph.nodes.into_iter().map(node).collect(),
                initializer,
                input: vec![value_info(INPUT, input_type, &built.input)],
                output: vec![value_info(OUTPUT, DataType::Float, output_shape)],
            }),
        })
    }
}

/// A weight as an initializer: f32, little-endian, row-major.
fn weight(name: &str, t: &Tensor) -> Result<TensorProto> {
    let Tensor::F32(a) = t else {
        return Err(Error::DType {
            what: format!("export_onnx: weight `{name}`"),
            expected: DType::F32,
            got: t.dtype(),
        });
    };
    Ok(TensorProto {
        dims: a.shape().iter().map(|&d| d as i64).collect(),
        data_type: DataType::Float as i32,
        name: name.into(),
        raw_data: a.iter().flat_map(|x| x.to_le_bytes()).collect(),
    })
}

/// `[batch, dims...]` of `elem_type`.
fn value_info(name: &str, elem_type: DataType, dims: &[usize]) -> ValueInfoProto {
    let batch = Dimension {
        value: Some(dimension::Value::DimParam(BATCH.into())),
    };
    let rest = dims.iter().map(|&d| Dimension {
        value: Some(dimension::Value::DimValue(d as i64)),
    });
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: elem_type as i32,
                shape: Some(TensorShapeProto {
                    dim: std::iter::once(batch).chain(rest).collect(),
                }),
            })),
        }),
    }
}

fn node(n: OnnxNode) -> NodeProto {
    NodeProto {
        input: n.inputs,
        output: n.outputs,
        name: n.name,
        op_type: n.op_type.into(),
        attribute: n
            .attributes
            .into_iter()
            .map(|(name, a)| {
                let mut p = AttributeProto {
                    name: name.into(),
                    ..AttributeProto::default()
                };
                match a {
                    OnnxAttribute::Int(i) => {
                        p.i = i;
                        p.r#type = AttributeType::Int as i32;
                    }
                    OnnxAttribute::Ints(v) => {
                        p.ints = v;
                        p.r#type = AttributeType::Ints as i32;
                    }
                    OnnxAttribute::Float(f) => {
                        p.f = f;
                        p.r#type = AttributeType::Float as i32;
                    }
                }
                p
            })
            .collect(),
        domain: String::new(),
    }
}
