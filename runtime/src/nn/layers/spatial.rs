//! What the 2-D layers (convolution, pooling) share: Keras' `padding` argument and the
//! geometry of a window sliding over `(height, width, channels)` inputs.

use crate::ir::Window;
use crate::nn::entry::{self, args};
use crate::nn::onnx::{OnnxAttribute, OnnxForward, OnnxValue};
use std::fmt;
use strata_spec::{Args, Val};

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

/// `(low, high)` padding of one axis.
pub(crate) type Pads = (usize, usize);

/// The padding of each spatial axis for `window` (already dilated) moving in `strides`
/// over an image input, one the layer's shape rule accepted (so the window fits).
pub(crate) fn pads(
    input: &[usize],
    window: [usize; 2],
    strides: [usize; 2],
    padding: Padding,
) -> [Pads; 2] {
    [0, 1].map(|axis| {
        let size = input.get(axis).copied().unwrap_or(0);
        padding
            .window(size, window[axis], strides[axis])
            .map_or((0, 0), |(_, p)| p)
    })
}

/// A pooling layer's window over `[batch, height, width, channels]` for an input its shape
/// rule accepted (`strides` defaults to the pool size, as in Keras).
pub(crate) fn pool_window(
    input: &[usize],
    pool_size: [usize; 2],
    strides: Option<[usize; 2]>,
    padding: Padding,
) -> Window {
    let strides = strides.unwrap_or(pool_size);
    let [ph, pw] = pads(input, pool_size, strides, padding);
    Window {
        dims: vec![1, pool_size[0], pool_size[1], 1],
        strides: vec![1, strides[0], strides[1], 1],
        padding: vec![(0, 0), ph, pw, (0, 0)],
    }
}

/// The arguments every 2-D pooling layer takes.
pub(crate) fn pool_args(
    pool_size: [usize; 2],
    strides: Option<[usize; 2]>,
    padding: Padding,
) -> Args {
    args([
        ("pool_size", Val::Pair(pool_size)),
        ("strides", Val::OptionalPair(strides)),
        ("padding", entry::padding(padding)),
    ])
}

/// ONNX's `pads` of a 2-D operator: every axis's low padding, then every axis's high.
fn onnx_pads([(h_lo, h_hi), (w_lo, w_hi)]: [Pads; 2]) -> OnnxAttribute {
    OnnxAttribute::Ints(vec![h_lo as i64, w_lo as i64, h_hi as i64, w_hi as i64])
}

fn onnx_pair(p: [usize; 2]) -> OnnxAttribute {
    OnnxAttribute::Ints(p.iter().map(|&v| v as i64).collect())
}

/// `op` (an ONNX operator on NCHW images: `Conv`, the pools) applied to the NHWC image
/// `x`: transposed to NCHW, `op(x, rest...)`, transposed back.
pub(crate) fn onnx_nchw(
    cx: &mut OnnxForward<'_>,
    op: &'static str,
    x: &OnnxValue,
    rest: &[&OnnxValue],
    attributes: Vec<(&'static str, OnnxAttribute)>,
) -> OnnxValue {
    let t = cx.transpose(x, &[0, 3, 1, 2]);
    let mut inputs = vec![&t];
    inputs.extend_from_slice(rest);
    let y = cx.op(op, &inputs, attributes);
    cx.transpose(&y, &[0, 2, 3, 1])
}

/// The attributes placing a window of `window` (already dilated: the padding is
/// computed from it) with `kernel_shape` and `strides` as the layer's `forward` does:
/// explicit pads, so `same`'s odd element goes at the end as in TensorFlow.
pub(crate) fn onnx_window(
    input: &[usize],
    kernel_shape: [usize; 2],
    window: [usize; 2],
    strides: [usize; 2],
    padding: Padding,
) -> Vec<(&'static str, OnnxAttribute)> {
    vec![
        ("kernel_shape", onnx_pair(kernel_shape)),
        ("strides", onnx_pair(strides)),
        ("pads", onnx_pads(pads(input, window, strides, padding))),
    ]
}

/// The dilation attribute of `Conv`.
pub(crate) fn onnx_dilations(d: [usize; 2]) -> (&'static str, OnnxAttribute) {
    ("dilations", onnx_pair(d))
}
