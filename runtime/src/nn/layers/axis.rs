//! Keras' `axis` arguments, which count the batch axis: `-1` is the last axis, `1` the
//! first after the batch.

use crate::nn::layer::{bad_input, Layer};
use crate::Result;

/// The position of `axis` in a `[batch, input...]` tensor; the batch axis itself is not a
/// feature axis.
pub(crate) fn feature_axis(layer: &dyn Layer, axis: isize, input: &[usize]) -> Result<usize> {
    let rank = input.len() as isize + 1;
    let a = if axis < 0 { rank + axis } else { axis };
    if a < 1 || a >= rank {
        return Err(bad_input(
            layer,
            input,
            &format!(
                "a feature axis {axis} (rank >= {})",
                axis.unsigned_abs().max(1)
            ),
        ));
    }
    Ok(a as usize)
}
