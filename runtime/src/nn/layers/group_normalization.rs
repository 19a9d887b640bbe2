//! `GroupNormalization`: normalises each example over groups of its features (the
//! features along `axis` split into `groups` consecutive groups, with every other axis
//! but the batch), then scales and offsets per feature; the same in training and
//! inference.

use super::axis::feature_axis;
use super::layer_normalization::{
    onnx_scale_and_offset, onnx_standardize, scale_and_offset, standardize, weights,
};
use crate::ir::Value;
use crate::nn::entry::{args, axis, initializer};
use crate::nn::layer::{Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::nn::Initializer;
use crate::Result;
use strata_spec::{Args, Val};

#[derive(Clone, Debug, PartialEq)]
pub struct GroupNormalization {
    pub name: String,
    /// The features along `axis` are split into this many groups (it must divide them).
    pub groups: usize,
    /// The feature axis, counting the batch axis (Keras' `axis`; `-1` is the last).
    pub axis: isize,
    pub epsilon: f64,
    /// Learn an offset `beta`.
    pub center: bool,
    /// Learn a scale `gamma`.
    pub scale: bool,
    pub beta_initializer: Initializer,
    pub gamma_initializer: Initializer,
}

impl GroupNormalization {
    /// Keras' defaults: 32 groups, last axis, epsilon 1e-3, learned offset and scale.
    pub fn new(name: impl Into<String>) -> GroupNormalization {
        GroupNormalization {
            name: name.into(),
            groups: 32,
            axis: -1,
            epsilon: 1e-3,
            center: true,
            scale: true,
            beta_initializer: Initializer::Zeros,
            gamma_initializer: Initializer::Ones,
        }
    }
}

impl Layer for GroupNormalization {
    fn class(&self) -> &'static str {
        "GroupNormalization"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([
            ("groups", Val::Usize(self.groups)),
            ("axis", axis(self.axis)),
            ("epsilon", Val::Float(self.epsilon)),
            ("center", Val::Bool(self.center)),
            ("scale", Val::Bool(self.scale)),
            ("beta_initializer", initializer(self.beta_initializer)),
            ("gamma_initializer", initializer(self.gamma_initializer)),
        ]))
    }

    /// As Keras: the feature axis reshaped to `[groups, features / groups]`, the
    /// statistics over everything but the batch and group axes.
    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let shape = cx.g.try_ty("group_normalization", x)?.shape.clone();
        self.output_shape(shape.dims().get(1..).unwrap_or(&[]))?;
        let (gamma, beta) = weights(self, self.scale, self.center, params)?;
        let axis = feature_axis(self.axis, shape.rank());
        let dims = shape.dims();
        let mut grouped = dims[..axis].to_vec();
        grouped.extend([self.groups, dims[axis] / self.groups]);
        grouped.extend_from_slice(&dims[axis + 1..]);
        let over: Vec<usize> = (1..grouped.len()).filter(|&a| a != axis).collect();
        let g = &mut *cx.g;
        let r = g.reshape(x, grouped)?;
        let normalized = standardize(g, r, &over, self.epsilon)?;
        let y = g.reshape(normalized, shape.clone())?;
        scale_and_offset(g, y, gamma, beta, axis)
    }

    /// `forward`'s formula operator by operator, between `Reshape`s to and from the
    /// grouped shape (`0` keeps the open batch size).
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        let input = cx.input_shape().to_vec();
        self.output_shape(&input)?;
        let axis = feature_axis(self.axis, input.len() + 1);
        let dims: Vec<i64> = std::iter::once(0)
            .chain(input.iter().map(|&d| d as i64))
            .collect();
        let mut grouped = dims[..axis].to_vec();
        let groups = self.groups as i64;
        grouped.extend([groups, dims[axis] / groups]);
        grouped.extend_from_slice(&dims[axis + 1..]);
        let over: Vec<i64> = (1..grouped.len() as i64)
            .filter(|&a| a != axis as i64)
            .collect();
        let shape = cx.ints(&grouped);
        let r = cx.op("Reshape", &[&x, &shape], vec![]);
        let normalized = onnx_standardize(cx, &r, over, self.epsilon);
        let back = cx.ints(&dims);
        let y = cx.op("Reshape", &[&normalized, &back], vec![]);
        let learned = (self.scale, self.center);
        onnx_scale_and_offset(self, cx, y, learned, params, axis)
    }
}
