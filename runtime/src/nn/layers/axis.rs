//! Keras' `axis` arguments, which count the batch axis: `-1` is the last axis, `1` the
//! first after the batch.

/// The position of `axis` in a `[batch, input...]` tensor of `rank` axes, for an input the
/// layer's shape rule accepted (so the axis exists and is not the batch axis).
pub(crate) fn feature_axis(axis: isize, rank: usize) -> usize {
    if axis < 0 {
        rank.saturating_sub(axis.unsigned_abs())
    } else {
        axis as usize
    }
}
