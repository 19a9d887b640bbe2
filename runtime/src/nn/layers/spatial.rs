//! What the 2-D layers (convolution, pooling) share: Keras' `padding` argument and the
//! geometry of a window sliding over `(height, width, channels)` inputs.

use crate::ir::Window;
use crate::nn::layer::{bad_config, bad_input, Layer};
use crate::Result;
use std::fmt;

/// Keras' `padding`: `valid` (no padding; windows must fit) or `same` (pad so the output
/// has `ceil(input / stride)` positions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Padding {
    Valid,
    Same,
}

impl Padding {
    pub fn name(self) -> &'static str {
        match self {
            Padding::Valid => "valid",
            Padding::Same => "same",
        }
    }

    pub fn from_name(name: &str) -> Option<Padding> {
        [Padding::Valid, Padding::Same]
            .into_iter()
            .find(|p| p.name() == name)
    }

    /// The output length and `(low, high)` padding of a window of `window` elements moving
    /// over `input` elements in steps of `stride`; `None` when it does not fit (a valid
    /// window longer than the input, or a zero size). `same` splits the padding as
    /// TensorFlow does: the odd element goes at the end.
    pub fn window(
        self,
        input: usize,
        window: usize,
        stride: usize,
    ) -> Option<(usize, (usize, usize))> {
        if input == 0 || window == 0 || stride == 0 {
            return None;
        }
        match self {
            Padding::Valid => {
                let span = input.checked_sub(window)?;
                Some((span / stride + 1, (0, 0)))
            }
            Padding::Same => {
                let out = input.div_ceil(stride);
                let total = ((out - 1) * stride + window).saturating_sub(input);
                Some((out, (total / 2, total - total / 2)))
            }
        }
    }
}

impl fmt::Display for Padding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `(height, width, channels)` of an input that must be an image.
pub(crate) fn image(layer: &dyn Layer, input: &[usize]) -> Result<[usize; 3]> {
    <[usize; 3]>::try_from(input)
        .map_err(|_| bad_input(layer, input, "(height, width, channels) (rank 3)"))
}

/// `(low, high)` padding of one axis.
pub(crate) type Pads = (usize, usize);

/// The output `(height, width)` and per-axis padding of `window` (already dilated) moving
/// in `strides` over an image input.
pub(crate) fn slide(
    layer: &dyn Layer,
    input: &[usize],
    window: [usize; 2],
    strides: [usize; 2],
    padding: Padding,
) -> Result<([usize; 2], [Pads; 2])> {
    let [h, w, _] = image(layer, input)?;
    if strides.contains(&0) {
        return Err(bad_config(layer, "strides must be at least 1"));
    }
    let mut out = [0; 2];
    let mut pads = [(0, 0); 2];
    for (axis, size) in [h, w].into_iter().enumerate() {
        let (o, p) = padding
            .window(size, window[axis], strides[axis])
            .ok_or_else(|| {
                bad_input(
                    layer,
                    input,
                    &format!(
                        "at least {}x{} in height and width for a {}x{} window with {padding} padding",
                        window[0], window[1], window[0], window[1]
                    ),
                )
            })?;
        out[axis] = o;
        pads[axis] = p;
    }
    Ok((out, pads))
}

/// A pooling layer's output shape and its window over `[batch, height, width, channels]`
/// (`strides` defaults to the pool size, as in Keras).
pub(crate) fn pool(
    layer: &dyn Layer,
    input: &[usize],
    pool_size: [usize; 2],
    strides: Option<[usize; 2]>,
    padding: Padding,
) -> Result<(Vec<usize>, Window)> {
    if pool_size.contains(&0) {
        return Err(bad_config(layer, "pool_size must be at least 1"));
    }
    let strides = strides.unwrap_or(pool_size);
    let [_, _, c] = image(layer, input)?;
    let ([h, w], [ph, pw]) = slide(layer, input, pool_size, strides, padding)?;
    let window = Window {
        dims: vec![1, pool_size[0], pool_size[1], 1],
        strides: vec![1, strides[0], strides[1], 1],
        padding: vec![(0, 0), ph, pw, (0, 0)],
    };
    Ok((vec![h, w, c], window))
}
