//! `Reshape`: the non-batch axes rearranged into `target_shape` (one entry may be `-1`,
//! inferred from the element count, as in Keras).

use crate::ir::Value;
use crate::nn::entry::args;
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::Result;
use strata_spec::{Args, Val};

#[derive(Clone, Debug, PartialEq)]
pub struct Reshape {
    pub name: String,
    /// The output shape without batch; `-1` marks the one inferred axis.
    pub target_shape: Vec<isize>,
}

impl Reshape {
    pub fn new(name: impl Into<String>, target_shape: Vec<isize>) -> Reshape {
        Reshape {
            name: name.into(),
            target_shape,
        }
    }
}

impl Layer for Reshape {
    fn class(&self) -> &'static str {
        "Reshape"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        let target = self.target_shape.iter().map(|&d| d as i64).collect();
        Some(args([("target_shape", Val::TargetShape(target))]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("reshape", x)?.dims().to_vec();
        let (batch, rest) = dims.split_first().unwrap_or((&1, &[]));
        let mut shape = vec![*batch];
        shape.extend(self.output_shape(rest)?);
        cx.g.reshape(x, shape)
    }

    /// `Reshape` to `[batch, target...]`, the batch copied from the input (a `0`) and the
    /// rest resolved as `forward` resolves them (no `-1` left).
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        let out = self.output_shape(cx.input_shape())?;
        if out.contains(&0) {
            // ONNX reads a 0 in the shape as "copy the input's axis" unless allowzero is
            // set, which onnxruntime does not take with a copied batch axis.
            return Err(cx.unsupported(
                "Reshape",
                format!("a target shape with an axis of size 0 ({out:?})"),
            ));
        }
        let shape: Vec<i64> = std::iter::once(0)
            .chain(out.iter().map(|&d| d as i64))
            .collect();
        let shape = cx.ints(&shape);
        Ok(cx.op("Reshape", &[&x, &shape], vec![]))
    }
}
