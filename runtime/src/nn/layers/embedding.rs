//! `Embedding`: integer ids in, one learned vector per id out.

use crate::ir::{DType, Value};
use crate::nn::layer::{bad_config, expect_params, Forward, Layer, ParamSpec};
use crate::nn::Initializer;
use crate::Result;

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

    fn input_dtype(&self) -> DType {
        DType::I32
    }

    /// Any shape of ids, each replaced by a vector: `(a, b)` → `(a, b, output_dim)`.
    fn output_shape(&self, input: &[usize]) -> Result<Vec<usize>> {
        if self.input_dim == 0 || self.output_dim == 0 {
            return Err(bad_config(
                self,
                "input_dim and output_dim must be at least 1",
            ));
        }
        let mut out = input.to_vec();
        out.push(self.output_dim);
        Ok(out)
    }

    fn params(&self, _input: &[usize]) -> Result<Vec<ParamSpec>> {
        Ok(vec![ParamSpec {
            name: format!("{}/embeddings", self.name),
            dims: vec![self.input_dim, self.output_dim],
            init: self.embeddings_initializer,
            fan_in: self.input_dim,
            fan_out: self.output_dim,
            trainable: true,
        }])
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let [embeddings] = expect_params(self, params)?;
        cx.g.gather(embeddings, x, 0, 0)
    }
}
