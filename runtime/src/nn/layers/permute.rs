//! `Permute` and `RepeatVector`: axes reordered, or a vector repeated along a new axis.

use crate::ir::Value;
use crate::nn::entry::args;
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::Result;
use strata_spec::{Args, Val};

/// Keras' `Permute`: output axis `i` is input axis `dims[i]`, counted from 1 without the
/// batch axis (`Permute((2, 1))` swaps the two axes of a `(steps, features)` input).
#[derive(Clone, Debug, PartialEq)]
pub struct Permute {
    pub name: String,
    /// A permutation of `1..=rank`.
    pub dims: Vec<usize>,
}

impl Permute {
    pub fn new(name: impl Into<String>, dims: Vec<usize>) -> Permute {
        Permute {
            name: name.into(),
            dims,
        }
    }
}

impl Layer for Permute {
    fn class(&self) -> &'static str {
        "Permute"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([("dims", Val::Dims(self.dims.clone()))]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("permute", x)?.dims().to_vec();
        // Checks `dims` is a permutation of the input's axes.
        self.output_shape(dims.get(1..).unwrap_or(&[]))?;
        // The batch stays first; Keras' 1-based axes are the tensor's own indices.
        let perm: Vec<usize> = std::iter::once(0)
            .chain(self.dims.iter().copied())
            .collect();
        cx.g.transpose(x, &perm)
    }

    /// `Transpose`, the batch axis kept first.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        self.output_shape(cx.input_shape())?;
        let perm: Vec<i64> = std::iter::once(0)
            .chain(self.dims.iter().map(|&d| d as i64))
            .collect();
        Ok(cx.transpose(&x, &perm))
    }
}

/// Keras' `RepeatVector`: `(features,)` becomes `(n, features)`, `n` copies.
#[derive(Clone, Debug, PartialEq)]
pub struct RepeatVector {
    pub name: String,
    pub n: usize,
}

impl RepeatVector {
    pub fn new(name: impl Into<String>, n: usize) -> RepeatVector {
        RepeatVector {
            name: name.into(),
            n,
        }
    }
}

impl Layer for RepeatVector {
    fn class(&self) -> &'static str {
        "RepeatVector"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([("n", Val::Usize(self.n))]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("repeat_vector", x)?.dims().to_vec();
        // Checks the input is a vector and `n` >= 1.
        let out = self.output_shape(dims.get(1..).unwrap_or(&[]))?;
        cx.g.broadcast_in_dim(x, [dims[0], out[0], out[1]], &[0, 2])
    }

    /// `Unsqueeze` a middle axis and `Expand` it to `n`.
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        self.output_shape(cx.input_shape())?;
        let axes = cx.ints(&[1]);
        let column = cx.op("Unsqueeze", &[&x, &axes], vec![]);
        let shape = cx.ints(&[1, self.n as i64, 1]);
        Ok(cx.op("Expand", &[&column, &shape], vec![]))
    }
}
