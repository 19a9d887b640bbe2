//! `Softmax`: the softmax activation over one axis (the last by default).

use crate::ir::Value;
use crate::nn::entry::{args, axis};
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::layers::axis::feature_axis;
use crate::nn::onnx::{OnnxAttribute, OnnxForward, OnnxValue};
use crate::nn::{softmax, Activation};
use crate::Result;
use strata_spec::Args;

#[derive(Clone, Debug, PartialEq)]
pub struct Softmax {
    pub name: String,
    /// Keras' axis, counting the batch axis as 0 (`-1`: the last).
    pub axis: isize,
}

impl Softmax {
    pub fn new(name: impl Into<String>) -> Softmax {
        Softmax {
            name: name.into(),
            axis: -1,
        }
    }
}

impl Layer for Softmax {
    fn class(&self) -> &'static str {
        "Softmax"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([("axis", axis(self.axis))]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("softmax", x)?.dims().to_vec();
        // Checks the axis exists (and is not the batch axis).
        self.output_shape(dims.get(1..).unwrap_or(&[]))?;
        let a = feature_axis(self.axis, dims.len());
        let last = dims.len().saturating_sub(1);
        if a == last {
            // Through `activate`, so losses find the logits as after `Dense(.., softmax)`.
            return cx.activate(Activation::Softmax, x);
        }
        // The axis swapped with the last, the softmax taken there, and swapped back.
        let mut perm: Vec<usize> = (0..dims.len()).collect();
        perm.swap(a, last);
        let t = cx.g.transpose(x, &perm)?;
        let s = softmax(cx.g, t)?;
        cx.g.transpose(s, &perm)
    }

    /// `Softmax` on the one axis (opset 13's definition; earlier ones flattened).
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        self.output_shape(cx.input_shape())?;
        let a = feature_axis(self.axis, cx.input_shape().len() + 1) as i64;
        Ok(cx.op("Softmax", &[&x], vec![("axis", OnnxAttribute::Int(a))]))
    }
}
