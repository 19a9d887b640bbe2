//! What the convolution and pooling layers share, over sequences `(steps, channels)` and
//! images `(height, width, channels)` alike: Keras' `padding` argument, the geometry of a
//! window sliding over the spatial axes, and the convolution itself.

use crate::ir::{ConvParams, Graph, ReduceOp, Value, Window};
use crate::nn::entry::{self, args};
use crate::nn::layer::{kernel_and_bias, Forward, Layer};
use crate::nn::onnx::{OnnxAttribute, OnnxForward, OnnxValue};
use crate::nn::Activation;
use crate::Result;
use std::fmt;
use strata_spec::{Args, Val};

/// Keras' `padding`: `valid` (no padding; windows must fit), `same` (pad so the output
/// has `ceil(input / stride)` positions) or `causal` (Conv1D only: as many positions, all
/// the padding at the start, so no output sees a later step).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Padding {
    Valid,
    Same,
    Causal,
}

impl Padding {
    pub fn name(self) -> &'static str {
        match self {
            Padding::Valid => "valid",
            Padding::Same => "same",
            Padding::Causal => "causal",
        }
    }

    pub fn from_name(name: &str) -> Option<Padding> {
        [Padding::Valid, Padding::Same, Padding::Causal]
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
            Padding::Causal => Some(((input - 1) / stride + 1, (window - 1, 0))),
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

/// The padding of each of the `N` spatial axes for `window` (already dilated) moving in
/// `strides` over an input (without batch) the layer's shape rule accepted (so the window
/// fits).
pub(crate) fn pads<const N: usize>(
    input: &[usize],
    window: [usize; N],
    strides: [usize; N],
    padding: Padding,
) -> [Pads; N] {
    std::array::from_fn(|axis| {
        let size = input.get(axis).copied().unwrap_or(0);
        padding
            .window(size, window[axis], strides[axis])
            .map_or((0, 0), |(_, p)| p)
    })
}

/// A pooling layer's window over `[batch, spatial..., channels]` for an input its shape
/// rule accepted (`strides` defaults to the pool size, as in Keras).
pub(crate) fn pool_window<const N: usize>(
    input: &[usize],
    pool_size: [usize; N],
    strides: Option<[usize; N]>,
    padding: Padding,
) -> Window {
    let strides = strides.unwrap_or(pool_size);
    let around = |inner: &[usize]| [&[1][..], inner, &[1]].concat();
    let mut pads = vec![(0, 0)];
    pads.extend(self::pads(input, pool_size, strides, padding));
    pads.push((0, 0));
    Window {
        dims: around(&pool_size),
        strides: around(&strides),
        padding: pads,
    }
}

/// The arguments every pooling layer takes: `pool_size` and `strides` as the entry's
/// kinds for its rank (sizes of a sequence, pairs of an image).
pub(crate) fn pool_args(pool_size: Val, strides: Val, padding: Padding) -> Args {
    args([
        ("pool_size", pool_size),
        ("strides", strides),
        ("padding", entry::padding(padding)),
    ])
}

/// A kernel's extent once dilated: `(k - 1) · d + 1` per axis.
pub(crate) fn dilated<const N: usize>(kernel: [usize; N], dilation: [usize; N]) -> [usize; N] {
    std::array::from_fn(|a| (kernel[a].max(1) - 1) * dilation[a] + 1)
}

/// How a kernel slides over the `N` spatial axes of a convolution's input.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sliding<const N: usize> {
    pub kernel_size: [usize; N],
    pub strides: [usize; N],
    pub padding: Padding,
    pub dilation_rate: [usize; N],
}

impl<const N: usize> Sliding<N> {
    /// The convolution of `x` (`[batch, spatial..., in]`, `input` its shape without the
    /// batch, one the layer's shape rule accepted) with `kernel` (`[spatial..., in /
    /// groups, out]`).
    pub(crate) fn convolve(
        &self,
        g: &mut Graph,
        x: Value,
        kernel: Value,
        input: &[usize],
        groups: usize,
    ) -> Result<Value> {
        let window = dilated(self.kernel_size, self.dilation_rate);
        let pads = pads(input, window, self.strides, self.padding);
        g.convolution(
            x,
            kernel,
            ConvParams {
                strides: self.strides.to_vec(),
                padding: pads
                    .iter()
                    .map(|&(lo, hi)| (lo as i64, hi as i64))
                    .collect(),
                lhs_dilation: vec![1; N],
                rhs_dilation: self.dilation_rate.to_vec(),
                feature_groups: groups,
            },
        )
    }

    /// A convolution layer's forward pass (`Conv1D`, `Conv2D`): its kernel over `x`
    /// checked by the layer's shape rule, its bias added, its activation applied.
    pub(crate) fn conv_layer(
        &self,
        layer: &dyn Layer,
        cx: &mut Forward<'_>,
        (x, params): (Value, &[Value]),
        (use_bias, groups, activation): (bool, usize, Activation),
    ) -> Result<Value> {
        let (kernel, bias) = kernel_and_bias(layer, use_bias, params)?;
        let dims = cx.g.try_ty("convolution layer", x)?.dims().to_vec();
        let input = dims.get(1..).unwrap_or(&[]);
        layer.output_shape(input)?;
        let mut y = self.convolve(cx.g, x, kernel, input, groups)?;
        if let Some(b) = bias {
            y = cx.g.add(y, b)?;
        }
        cx.activate(activation, y)
    }
}

/// The reduction of a global pooling layer over the given axes (mean or max).
pub(crate) type Pool = fn(&mut Graph, Value, &[usize]) -> Result<Value>;

pub(crate) fn mean_pool(g: &mut Graph, x: Value, axes: &[usize]) -> Result<Value> {
    g.mean(x, axes)
}

pub(crate) fn max_pool(g: &mut Graph, x: Value, axes: &[usize]) -> Result<Value> {
    g.reduce(ReduceOp::Max, x, axes)
}

/// Global pooling of `x` (`[batch, spatial..., channels]`) over its `n` spatial axes by
/// `pool`, then the pooled axes back as size 1 on `keepdims` (`out`, the output without
/// the batch, from the layer's shape rule).
pub(crate) fn global_pool(
    g: &mut Graph,
    pool: Pool,
    x: Value,
    n: usize,
    keepdims: bool,
    out: Vec<usize>,
) -> Result<Value> {
    let axes: Vec<usize> = (1..=n).collect();
    let pooled = pool(g, x, &axes)?;
    if keepdims {
        let mut shape = vec![g.ty(x).dims()[0]];
        shape.extend(out);
        return g.reshape(pooled, shape);
    }
    Ok(pooled)
}

/// ONNX's `pads`: every axis's low padding, then every axis's high.
fn onnx_pads(pads: &[Pads]) -> OnnxAttribute {
    let lows = pads.iter().map(|&(lo, _)| lo as i64);
    let highs = pads.iter().map(|&(_, hi)| hi as i64);
    OnnxAttribute::Ints(lows.chain(highs).collect())
}

pub(crate) fn onnx_sizes(p: &[usize]) -> OnnxAttribute {
    OnnxAttribute::Ints(p.iter().map(|&v| v as i64).collect())
}

/// `op` (an ONNX operator on channels-first inputs: `Conv`, the pools) applied to the
/// channels-last `x` (`[batch, spatial..., channels]`): transposed to `[batch, channels,
/// spatial...]`, `op(x, rest...)`, transposed back.
pub(crate) fn onnx_nchw(
    cx: &mut OnnxForward<'_>,
    op: &'static str,
    x: &OnnxValue,
    rest: &[&OnnxValue],
    attributes: Vec<(&'static str, OnnxAttribute)>,
) -> OnnxValue {
    let rank = cx.input_shape().len() as i64 + 1;
    let first: Vec<i64> = [0, rank - 1].into_iter().chain(1..rank - 1).collect();
    let last: Vec<i64> = std::iter::once(0)
        .chain(2..rank)
        .chain(std::iter::once(1))
        .collect();
    let t = cx.transpose(x, &first);
    let mut inputs = vec![&t];
    inputs.extend_from_slice(rest);
    let y = cx.op(op, &inputs, attributes);
    cx.transpose(&y, &last)
}

/// The attributes placing a window of `window` (already dilated: the padding is
/// computed from it) with `kernel_shape` and `strides` as the layer's `forward` does:
/// explicit pads, so `same`'s odd element goes at the end as in TensorFlow.
pub(crate) fn onnx_window<const N: usize>(
    input: &[usize],
    kernel_shape: [usize; N],
    window: [usize; N],
    strides: [usize; N],
    padding: Padding,
) -> Vec<(&'static str, OnnxAttribute)> {
    vec![
        ("kernel_shape", onnx_sizes(&kernel_shape)),
        ("strides", onnx_sizes(&strides)),
        ("pads", onnx_pads(&pads(input, window, strides, padding))),
    ]
}

/// The dilation attribute of `Conv`.
pub(crate) fn onnx_dilations<const N: usize>(d: [usize; N]) -> (&'static str, OnnxAttribute) {
    ("dilations", onnx_sizes(&d))
}

impl<const N: usize> Sliding<N> {
    /// `Conv` of the channels-last `x` with `weight` (ONNX's `[out, in / groups,
    /// spatial...]`) and `bias`, placed as `convolve` places it.
    pub(crate) fn onnx_conv(
        &self,
        cx: &mut OnnxForward<'_>,
        x: &OnnxValue,
        weight: &OnnxValue,
        bias: Option<&OnnxValue>,
        groups: usize,
    ) -> OnnxValue {
        let input = cx.input_shape().to_vec();
        let window = dilated(self.kernel_size, self.dilation_rate);
        let mut attributes =
            onnx_window(&input, self.kernel_size, window, self.strides, self.padding);
        attributes.push(onnx_dilations(self.dilation_rate));
        attributes.push(("group", OnnxAttribute::Int(groups as i64)));
        let mut rest = vec![weight];
        rest.extend(bias);
        onnx_nchw(cx, "Conv", x, &rest, attributes)
    }
}

/// A pooling layer's ONNX operator (`MaxPool`, or `AveragePool` counting only real
/// elements, as `forward` does), placed as `pool_window` places the window.
pub(crate) fn onnx_pool<const N: usize>(
    cx: &mut OnnxForward<'_>,
    op: &'static str,
    x: &OnnxValue,
    pool_size: [usize; N],
    strides: Option<[usize; N]>,
    padding: Padding,
) -> OnnxValue {
    let input = cx.input_shape().to_vec();
    let strides = strides.unwrap_or(pool_size);
    let mut attributes = onnx_window(&input, pool_size, pool_size, strides, padding);
    if op == "AveragePool" {
        attributes.push(("count_include_pad", OnnxAttribute::Int(0)));
    }
    onnx_nchw(cx, op, x, &[], attributes)
}

/// Global pooling's ONNX operator (`ReduceMean` or `ReduceMax`) over the `n` spatial
/// axes (opset 17 takes them as an attribute).
pub(crate) fn onnx_global_pool(
    cx: &mut OnnxForward<'_>,
    op: &'static str,
    x: &OnnxValue,
    n: usize,
    keepdims: bool,
) -> OnnxValue {
    cx.op(
        op,
        &[x],
        vec![
            ("axes", OnnxAttribute::Ints((1..=n as i64).collect())),
            ("keepdims", OnnxAttribute::Int(keepdims as i64)),
        ],
    )
}
