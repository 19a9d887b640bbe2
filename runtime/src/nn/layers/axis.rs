//! Keras' `axis` arguments, which count the batch axis: `-1` is the last axis, `1` the
//! first after the batch.

use crate::nn::onnx::{OnnxForward, OnnxValue};

/// The position of `axis` in a `[batch, input...]` tensor of `rank` axes, for an input the
/// layer's shape rule accepted (so the axis exists and is not the batch axis).
pub(crate) fn feature_axis(axis: isize, rank: usize) -> usize {
    if axis < 0 {
        rank.saturating_sub(axis.unsigned_abs())
    } else {
        axis as usize
    }
}

/// A per-feature vector `v` (`[features]`) shaped to broadcast along `axis` of a tensor of
/// `rank` axes: `[features, 1, ...]` with one 1 per axis after it (none on the last axis).
pub(crate) fn onnx_along(
    cx: &mut OnnxForward<'_>,
    v: &OnnxValue,
    axis: usize,
    rank: usize,
) -> OnnxValue {
    let after = rank.saturating_sub(axis + 1);
    if after == 0 {
        return v.clone();
    }
    let shape: Vec<i64> = std::iter::once(-1)
        .chain(std::iter::repeat_n(1, after))
        .collect();
    let shape = cx.ints(&shape);
    cx.op("Reshape", &[v, &shape], vec![])
}
