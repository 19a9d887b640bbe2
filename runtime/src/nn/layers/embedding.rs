//! `Embedding`: integer ids in, one learned vector per id out.

use crate::ir::Value;
use crate::nn::entry::{args, initializer};
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxAttribute, OnnxForward, OnnxValue};
use crate::nn::Initializer;
use crate::Result;
use strata_spec::{Args, Val};

/// Any shape of ids, each replaced by a vector: `(a, b)` → `(a, b, output_dim)`. The ids
/// are i32 (its entry `takes_ids`).
#[derive(Clone, Debug, PartialEq)]
pub struct Embedding {
    pub name: String,
    /// The number of distinct ids: ids are in `0..input_dim`.
    pub input_dim: usize,
    /// The length of each id's vector.
    pub output_dim: usize,
    pub embeddings_initializer: Initializer,
}

impl Embedding {
    /// Keras' default initializer: uniform in `[-0.05, 0.05)`.
    pub fn new(name: impl Into<String>, input_dim: usize, output_dim: usize) -> Embedding {
        Embedding {
            name: name.into(),
            input_dim,
            output_dim,
            embeddings_initializer: Initializer::RandomUniform,
        }
    }
}

impl Layer for Embedding {
    fn class(&self) -> &'static str {
        "Embedding"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([
            ("input_dim", Val::Usize(self.input_dim)),
            ("output_dim", Val::Usize(self.output_dim)),
            (
                "embeddings_initializer",
                initializer(self.embeddings_initializer),
            ),
        ]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let [embeddings] = expect_params(self, params)?;
        cx.g.gather(embeddings, x, 0, 0)
    }

    /// `Gather` of the ids' rows (ONNX takes the int32 ids as they are).
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        let [embeddings] = cx.params(params)?;
        Ok(cx.op(
            "Gather",
            &[embeddings, &x],
            vec![("axis", OnnxAttribute::Int(0))],
        ))
    }
}
