//! `reduce_window` (pooling) and `select_and_scatter_add` (its max/min gradient): shape
//! rules, gradients, native kernels.

use super::conv_winograd::Tiles;
use super::convolution::{winograd_kernel_grad, winograd_scatter, PooledConv};
use super::pool2d::{self, Pool2d};
use super::In;
use crate::ir::{Graph, ReduceOp, TensorType, Value, Window, MAX_RANK};
use crate::kernel::conv_direct::Direct2d;
use crate::kernel::data::{Data, DataMut};
use crate::kernel::real::Real;
use crate::kernel::strided;
use crate::{Error, Result};

/// The pooled shape: `(d + lo + hi - w) / s + 1` per dimension.
fn window_shape(op: &'static str, t: &TensorType, w: &Window) -> Result<Vec<usize>> {
    let r = t.rank();
    if w.dims.len() != r || w.strides.len() != r || w.padding.len() != r {
        return Err(Error::shape(
            op,
            format!("operand {t} has rank {r}; the window needs {r} sizes, strides and paddings"),
        ));
    }
    let mut out = Vec::with_capacity(r);
    for d in 0..r {
        let padded = t.dims()[d] + w.padding[d].0 + w.padding[d].1;
        if w.dims[d] == 0 || w.strides[d] == 0 {
            return Err(Error::shape(
                op,
                format!(
                    "window size and stride must be >= 1, got {} and {} in dimension {d}",
                    w.dims[d], w.strides[d]
                ),
            ));
        }
        if w.dims[d] > padded {
            return Err(Error::shape(
                op,
                format!(
                    "window of size {} does not fit dimension {d} of {t} (padded size {padded})",
                    w.dims[d]
                ),
            ));
        }
        out.push((padded - w.dims[d]) / w.strides[d] + 1);
    }
    Ok(out)
}

pub(crate) fn check(g: &Graph, op: ReduceOp, x: Value, w: &Window) -> Result<TensorType> {
    let t = g.ty(x);
    if !t.dtype.is_numeric() {
        return Err(Error::shape(
            "reduce_window",
            format!("{op:?} needs f32, f64, i32 or i64, got {t}"),
        ));
    }
    Ok(TensorType::new(
        t.dtype,
        window_shape("reduce_window", t, w)?,
    ))
}

pub(crate) fn check_select_and_scatter(
    g: &Graph,
    op: ReduceOp,
    source: Value,
    operand: Value,
    w: &Window,
) -> Result<TensorType> {
    let (s, t) = (g.ty(source), g.ty(operand));
    if op == ReduceOp::Sum {
        return Err(Error::shape(
            "select_and_scatter_add",
            "selects by Max or Min, not Sum",
        ));
    }
    if !t.dtype.is_arith_float() || s.dtype != t.dtype {
        return Err(Error::shape(
            "select_and_scatter_add",
            format!("operand and source must be the same float type, got {t} and {s}"),
        ));
    }
    let pooled = window_shape("select_and_scatter_add", t, w)?;
    if s.dims() != pooled.as_slice() {
        return Err(Error::shape(
            "select_and_scatter_add",
            format!(
                "source {s} must have the pooled shape {} of operand {t}",
                crate::ir::Shape(pooled)
            ),
        ));
    }
    Ok(t.clone())
}

/// Sum pooling: dilate the cotangent by the stride, pad it by the window less the
/// original padding, and sum-pool it again with stride 1. Max/min: route each cotangent
/// element to its window's selected input.
pub(crate) fn vjp(g: &mut Graph, op: ReduceOp, x: Value, w: &Window, ct: Value) -> Result<Value> {
    match op {
        ReduceOp::Sum => {
            let xd = g.ty(x).dims().to_vec();
            let cd = g.ty(ct).dims().to_vec();
            let zero = g.scalar(0.0, g.ty(ct).dtype);
            let r = xd.len();
            let (mut low, mut high, mut interior) = (vec![0i64; r], vec![0i64; r], vec![0; r]);
            for d in 0..r {
                let (k, s) = (w.dims[d] as i64, w.strides[d] as i64);
                let (lo, hi) = (w.padding[d].0 as i64, w.padding[d].1 as i64);
                let padded = xd[d] as i64 + lo + hi;
                let covered = (cd[d] as i64 - 1) * s + k; // input span the windows touch
                low[d] = k - 1 - lo;
                high[d] = k - 1 + (padded - covered) - hi;
                interior[d] = w.strides[d] - 1;
            }
            let p = g.pad(ct, zero, &low, &high, &interior)?;
            let unit = Window {
                dims: w.dims.clone(),
                strides: vec![1; r],
                padding: vec![(0, 0); r],
            };
            g.reduce_window(ReduceOp::Sum, p, unit)
        }
        ReduceOp::Max | ReduceOp::Min => g.select_and_scatter_add(op, ct, x, w.clone()),
    }
}

/// What the window walk reports: an in-range input element of output `out`'s window
/// (in row-major window order), then the end of that window.
enum Visit {
    Elem { out: usize, input: usize },
    End { out: usize },
}

/// Walks every window of a pooling in output order.
fn for_each_window(xd: &[usize], od: &[usize], w: &Window, mut f: impl FnMut(Visit)) {
    let r = xd.len();
    let xs = strided::strides(xd);
    let mut oi = [0usize; MAX_RANK];
    let nout: usize = od.iter().product();
    let nwin: usize = w.dims.iter().product();
    for o in 0..nout {
        let mut wi = [0usize; MAX_RANK];
        for _ in 0..nwin {
            let mut off = 0isize;
            let mut inside = true;
            for d in 0..r {
                let p = (oi[d] * w.strides[d] + wi[d]) as isize - w.padding[d].0 as isize;
                if p < 0 || p >= xd[d] as isize {
                    inside = false;
                    break;
                }
                off += p * xs[d];
            }
            if inside {
                f(Visit::Elem {
                    out: o,
                    input: off as usize,
                });
            }
            let mut d = r;
            while d > 0 {
                d -= 1;
                wi[d] += 1;
                if wi[d] < w.dims[d] {
                    break;
                }
                wi[d] = 0;
            }
        }
        f(Visit::End { out: o });
        let mut d = r;
        while d > 0 {
            d -= 1;
            oi[d] += 1;
            if oi[d] < od[d] {
                break;
            }
            oi[d] = 0;
        }
    }
}

/// `*acc = combine(*acc, v)` for max/min/sum pooling, as the generic kernel and the fast
/// path both apply it: a NaN accumulator is replaced by the next element, a NaN element
/// wins over the accumulator.
pub(super) fn combine<T: Copy + PartialOrd + std::ops::Add<Output = T>>(
    op: ReduceOp,
) -> impl Fn(T, T) -> T {
    move |acc, v| match op {
        ReduceOp::Sum => sum_of(acc, v),
        ReduceOp::Max => max_of(acc, v),
        ReduceOp::Min => min_of(acc, v),
    }
}

// One function per reduction, so that the fast paths' inner loops are compiled for one
// (a closure matching on the op kept every element's work scalar).
pub(super) fn sum_of<T: std::ops::Add<Output = T>>(acc: T, v: T) -> T {
    acc + v
}

pub(super) fn max_of<T: PartialOrd>(acc: T, v: T) -> T {
    if acc >= v {
        acc
    } else {
        v
    }
}

pub(super) fn min_of<T: PartialOrd>(acc: T, v: T) -> T {
    if acc <= v {
        acc
    } else {
        v
    }
}

/// `better` for max and min selection.
pub(super) fn above<T: PartialOrd>(cand: T, cur: T) -> bool {
    cand > cur
}

pub(super) fn below<T: PartialOrd>(cand: T, cur: T) -> bool {
    cand < cur
}

/// Any pooling, by walking every window.
pub(super) fn pool_generic<T: Copy + PartialOrd + std::ops::Add<Output = T>>(
    op: ReduceOp,
    a: &[T],
    xd: &[usize],
    od: &[usize],
    w: &Window,
    init: T,
    o: &mut [T],
) {
    let f = combine(op);
    o.fill(init);
    for_each_window(xd, od, w, |e| {
        if let Visit::Elem { out: oi, input: xi } = e {
            o[oi] = f(o[oi], a[xi]);
        }
    });
}

/// One pooling: the NHWC 2-D fast path where it applies, else the generic walk.
fn pool<T: Copy + PartialOrd + std::ops::Add<Output = T> + Default + Send + Sync>(
    op: ReduceOp,
    a: &[T],
    xd: &[usize],
    od: &[usize],
    w: &Window,
    (lo, hi): (T, T),
    o: &mut [T],
) {
    let init = match op {
        ReduceOp::Sum => T::default(),
        ReduceOp::Max => lo,
        ReduceOp::Min => hi,
    };
    match (Pool2d::of(xd, od, w), op) {
        (Some(p), ReduceOp::Sum) => p.reduce(a, o, init, sum_of),
        (Some(p), ReduceOp::Max) => p.reduce(a, o, init, max_of),
        (Some(p), ReduceOp::Min) => p.reduce(a, o, init, min_of),
        (None, _) => pool_generic(op, a, xd, od, w, init, o),
    }
}

pub(crate) fn native(
    op: ReduceOp,
    x: In<'_>,
    w: &Window,
    out_ty: &TensorType,
    out: DataMut<'_>,
) -> Result<()> {
    let (xd, od) = (x.ty.dims(), out_ty.dims());
    match (x.data, out) {
        (Data::F32(a), DataMut::F32(o)) => {
            pool(op, a, xd, od, w, (f32::NEG_INFINITY, f32::INFINITY), o)
        }
        (Data::F64(a), DataMut::F64(o)) => {
            pool(op, a, xd, od, w, (f64::NEG_INFINITY, f64::INFINITY), o)
        }
        (Data::I32(a), DataMut::I32(o)) => pool(op, a, xd, od, w, (i32::MIN, i32::MAX), o),
        (Data::I64(a), DataMut::I64(o)) => pool(op, a, xd, od, w, (i64::MIN, i64::MAX), o),
        (a, _) => return Err(super::unsupported("reduce_window", a.dtype())),
    }
    Ok(())
}

/// Whether `cand` replaces the selected `cur` (strictly better: ties keep the first, a
/// NaN is never better, and a NaN selected first stays).
pub(super) fn better<T: Real>(op: ReduceOp) -> impl Fn(T, T) -> bool + Sync {
    move |cand: T, cur: T| match op {
        ReduceOp::Min => cand < cur,
        ReduceOp::Max | ReduceOp::Sum => cand > cur,
    }
}

/// The max/min-pooling gradient by walking every window.
pub(super) fn scatter_generic<T: Real>(
    op: ReduceOp,
    src: &[T],
    x: &[T],
    xd: &[usize],
    sd: &[usize],
    w: &Window,
    out: &mut [T],
) {
    out.fill(T::zero());
    // Per window: the first in-range element strictly better than every earlier one, so
    // ties go to the first (as StableHLO's select with `ge`/`le`).
    let better = better::<T>(op);
    let mut best: Option<usize> = None;
    for_each_window(xd, sd, w, |e| match e {
        Visit::Elem { input, .. } => match best {
            Some(b) if !better(x[input], x[b]) => {}
            _ => best = Some(input),
        },
        Visit::End { out: o } => {
            if let Some(b) = best.take() {
                out[b] = out[b] + src[o];
            }
        }
    });
}

fn scatter<T: Real>(
    op: ReduceOp,
    src: &[T],
    x: &[T],
    xd: &[usize],
    sd: &[usize],
    w: &Window,
    out: &mut [T],
) {
    match (Pool2d::of(xd, sd, w), op) {
        (Some(p), ReduceOp::Max) => p.scatter(src, x, out, above),
        (Some(p), ReduceOp::Min) => p.scatter(src, x, out, below),
        _ => scatter_generic(op, src, x, xd, sd, w, out),
    }
}

pub(crate) fn native_select_and_scatter(
    op: ReduceOp,
    source: In<'_>,
    operand: In<'_>,
    w: &Window,
    out: DataMut<'_>,
) -> Result<()> {
    match (source.data, operand.data, out) {
        (Data::F32(s), Data::F32(x), DataMut::F32(o)) => {
            scatter(op, s, x, operand.ty.dims(), source.ty.dims(), w, o)
        }
        (Data::F64(s), Data::F64(x), DataMut::F64(o)) => {
            scatter(op, s, x, operand.ty.dims(), source.ty.dims(), w, o)
        }
        (s, _, _) => return Err(super::unsupported("select_and_scatter_add", s.dtype())),
    }
    Ok(())
}

// ---- the index pairing (native planner)

/// Whether a max/min pooling of `x` by `w` can record its selections for the gradient
/// (`native_recording`) so that the `select_and_scatter_add` over the same operand and
/// window reads them (`native_select_and_scatter_indexed`) instead of the operand.
pub(crate) fn indexable(op: ReduceOp, x: &TensorType, out: &TensorType, w: &Window) -> bool {
    let float = matches!(x.dtype, crate::ir::DType::F32 | crate::ir::DType::F64);
    op != ReduceOp::Sum
        && float
        && Pool2d::of(x.dims(), out.dims(), w).is_some_and(|p| p.indexable())
}

/// `native` for an `indexable` pooling, also writing into `index` (one byte per output
/// element) what `native_select_and_scatter_indexed` reads.
pub(crate) fn native_recording(
    op: ReduceOp,
    x: In<'_>,
    w: &Window,
    out_ty: &TensorType,
    out: DataMut<'_>,
    index: &mut [u8],
) -> Result<()> {
    let p = Pool2d::of(x.ty.dims(), out_ty.dims(), w)
        .filter(|p| p.indexable() && op != ReduceOp::Sum && index.len() == out_ty.numel())
        .ok_or_else(|| Error::shape("reduce_window", "not an indexable 2-D pooling"))?;
    let min = op == ReduceOp::Min;
    match (x.data, out) {
        (Data::F32(a), DataMut::F32(o)) => p.reduce_index_minmax(a, o, index, min),
        (Data::F64(a), DataMut::F64(o)) => p.reduce_index_minmax(a, o, index, min),
        (a, _) => return Err(super::unsupported("reduce_window", a.dtype())),
    }
    Ok(())
}

/// `native_select_and_scatter` from the `index` that `native_recording` wrote for the
/// same operand (of type `operand`) and window: the operand itself is not read.
pub(crate) fn native_select_and_scatter_indexed(
    source: In<'_>,
    operand: &TensorType,
    w: &Window,
    index: &[u8],
    out: DataMut<'_>,
) -> Result<()> {
    let p = Pool2d::of(operand.dims(), source.ty.dims(), w)
        .filter(|p| p.indexable() && index.len() == source.ty.numel())
        .ok_or_else(|| Error::shape("select_and_scatter_add", "not an indexable 2-D pooling"))?;
    match (source.data, out) {
        (Data::F32(s), DataMut::F32(o)) => p.scatter_indexed(s, index, o),
        (Data::F64(s), DataMut::F64(o)) => p.scatter_indexed(s, index, o),
        (s, _) => return Err(super::unsupported("select_and_scatter_add", s.dtype())),
    }
    Ok(())
}

// ---- bias and ReLU fused into a max pooling and its gradient (native planner)

/// What a max pooling fused with the bias add and ReLU before it (and its gradient with
/// the ReLU's gradient after it) computes, as the unfused graph's constants: the
/// pooled value is `reduce_window(max, max(x + bias, floor))` (`bias + x` with
/// `bias_first`), and the gradient with respect to `x` is
/// `g · select(a > gt, one, select(a == eq, half, zero))` (the gate times `g` unless
/// `ct_first`), `g` the pooling's gradient and `a = x + bias`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BiasReluPool {
    pub bias_first: bool,
    pub floor: f64,
    pub gt: f64,
    pub eq: f64,
    pub one: f64,
    pub half: f64,
    pub zero: f64,
    pub ct_first: bool,
}

impl BiasReluPool {
    fn act<T: num_traits::Float>(&self) -> Option<(pool2d::BiasRelu<T>, pool2d::ReluGate<T>)> {
        let t = |v: f64| T::from(v);
        Some((
            pool2d::BiasRelu {
                bias_first: self.bias_first,
                floor: t(self.floor)?,
                gt: t(self.gt)?,
                eq: t(self.eq)?,
            },
            pool2d::ReluGate {
                one: t(self.one)?,
                half: t(self.half)?,
                zero: t(self.zero)?,
                ct_first: self.ct_first,
            },
        ))
    }
}

/// Whether a max pooling of `x` by `w` (to `out`) can be fused with a bias and ReLU
/// before it (`native_recording_bias_relu`) and their gradients
/// (`native_select_and_scatter_bias_relu`): a float 2-D NHWC pooling of at most 64
/// window positions.
pub(crate) fn bias_relu_fusable(x: &TensorType, out: &TensorType, w: &Window) -> bool {
    let float = matches!(x.dtype, crate::ir::DType::F32 | crate::ir::DType::F64);
    float && Pool2d::of(x.dims(), out.dims(), w).is_some_and(|p| p.bias_relu_indexable())
}

/// The max pooling of `max(x + bias, floor)` (`f`) without that tensor in memory,
/// recording into `index` what `native_select_and_scatter_bias_relu` reads.
pub(crate) fn native_recording_bias_relu(
    x: In<'_>,
    bias: In<'_>,
    w: &Window,
    f: &BiasReluPool,
    out_ty: &TensorType,
    out: DataMut<'_>,
    index: &mut [u8],
) -> Result<()> {
    let p = Pool2d::of(x.ty.dims(), out_ty.dims(), w)
        .filter(|p| p.bias_relu_indexable() && index.len() == out_ty.numel())
        .filter(|_| bias.ty.numel() == x.ty.dims()[3])
        .ok_or_else(|| Error::shape("reduce_window", "not a fusable 2-D max pooling"))?;
    let bad = || Error::shape("reduce_window", "constants out of the type's range");
    match (x.data, bias.data, out) {
        (Data::F32(a), Data::F32(b), DataMut::F32(o)) => {
            let (act, _) = f.act::<f32>().ok_or_else(bad)?;
            p.reduce_index_bias_relu(a, b, o, index, &act)
        }
        (Data::F64(a), Data::F64(b), DataMut::F64(o)) => {
            let (act, _) = f.act::<f64>().ok_or_else(bad)?;
            p.reduce_index_bias_relu(a, b, o, index, &act)
        }
        (a, _, _) => return Err(super::unsupported("reduce_window", a.dtype())),
    }
    Ok(())
}

/// `native_recording_bias_relu` of the convolution `conv` of `x` by `kernel` (the
/// pooling's operand), that convolution computed a part at a time inside the pooling and
/// its output never stored: band by band by the direct kernel
/// (`Pool2d::conv_reduce_index_bias_relu`), or tile by tile by Winograd's
/// (`Pool2d::tiles_reduce_index_bias_relu`). `f32` only; `scratch` holds the parts.
#[allow(clippy::too_many_arguments)]
pub(crate) fn native_recording_conv_bias_relu(
    [x, kernel, bias]: [In<'_>; 3],
    conv: &PooledConv,
    w: &Window,
    f: &BiasReluPool,
    out_ty: &TensorType,
    out: DataMut<'_>,
    index: &mut [u8],
    scratch: &mut Vec<f32>,
) -> Result<()> {
    let p = Pool2d::of(&conv.output(), out_ty.dims(), w)
        .filter(|p| p.bias_relu_indexable() && index.len() == out_ty.numel())
        .ok_or_else(|| Error::shape("reduce_window", "not a fusable 2-D max pooling"))?;
    match (x.data, kernel.data, bias.data, out) {
        (Data::F32(x), Data::F32(k), Data::F32(b), DataMut::F32(o)) => {
            let bad = || Error::shape("reduce_window", "constants out of the type's range");
            let (act, _) = f.act::<f32>().ok_or_else(bad)?;
            let operands = (x, k, b);
            match conv {
                PooledConv::Direct(d) => {
                    p.conv_reduce_index_bias_relu(d, operands, (o, index), &act, scratch)
                }
                PooledConv::Winograd(t) => {
                    p.tiles_reduce_index_bias_relu(t, operands, (o, index), &act, scratch)
                }
            }
        }
        (a, _, _, _) => Err(super::unsupported("reduce_window", a.dtype())),
    }
}

/// Whether the planner may fuse the convolution `conv` into the bias and ReLU max pooling
/// of its output by `w` (to `out`): for the direct kernel, windows that share no rows, so
/// the fused kernel computes each convolution row once; for Winograd's tiles, windows
/// that each lie inside one tile.
pub(crate) fn conv_bias_relu_fusable(conv: &PooledConv, out: &TensorType, w: &Window) -> bool {
    Pool2d::of(&conv.output(), out.dims(), w).is_some_and(|p| {
        p.bias_relu_indexable()
            && match conv {
                PooledConv::Direct(_) => p.rows_disjoint(),
                PooledConv::Winograd(t) => p.tiles_fit(t),
            }
    })
}

/// The gradient with respect to `x` (of type `operand`) of `native_recording_bias_relu`'s
/// pooling, from the `index` it wrote: the cotangent `source` routed to each window's
/// selected element and gated by the ReLU's gradient there (`f`).
pub(crate) fn native_select_and_scatter_bias_relu(
    source: In<'_>,
    operand: &TensorType,
    w: &Window,
    f: &BiasReluPool,
    index: &[u8],
    out: DataMut<'_>,
) -> Result<()> {
    let p = Pool2d::of(operand.dims(), source.ty.dims(), w)
        .filter(|p| p.bias_relu_indexable() && index.len() == source.ty.numel())
        .ok_or_else(|| Error::shape("select_and_scatter_add", "not a fusable 2-D pooling"))?;
    let bad = || {
        Error::shape(
            "select_and_scatter_add",
            "constants out of the type's range",
        )
    };
    match (source.data, out) {
        (Data::F32(s), DataMut::F32(o)) => {
            let (_, gate) = f.act::<f32>().ok_or_else(bad)?;
            p.scatter_indexed_bias_relu(s, index, o, &gate)
        }
        (Data::F64(s), DataMut::F64(o)) => {
            let (_, gate) = f.act::<f64>().ok_or_else(bad)?;
            p.scatter_indexed_bias_relu(s, index, o, &gate)
        }
        (s, _) => return Err(super::unsupported("select_and_scatter_add", s.dtype())),
    }
    Ok(())
}

// ---- a convolution's kernel, input and bias gradients from its pooled cotangent (native
// planner)

/// The convolution's geometry as the direct kernel gradient takes it: `forward` of an
/// image of type `image` giving `y` (the pooling's operand), the kernel gradient `dw`, all
/// `f32`; `None` unless the direct kernel computes it on this CPU (few input features:
/// the convolution's kernel gradient the unfused plan runs there).
fn direct_taps(
    forward: &crate::ir::ConvParams,
    image: &TensorType,
    y: &TensorType,
    dw: &TensorType,
) -> Option<Direct2d> {
    let (x, yd, k) = (image.dims(), y.dims(), dw.dims());
    let two = |v: &[usize]| v.len() == 2;
    let shaped = x.len() == 4 && yd.len() == 4 && k.len() == 4;
    let ok = shaped
        && two(&forward.strides)
        && two(&forward.rhs_dilation)
        && forward.padding.len() == 2
        && forward.lhs_dilation.iter().all(|&d| d == 1)
        && forward.feature_groups == 1
        && x[0] == yd[0]
        && k[2] == x[3]
        && k[3] == yd[3]
        && [image, y, dw]
            .iter()
            .all(|t| t.dtype == crate::ir::DType::F32);
    let d = ok.then(|| Direct2d {
        batch: x[0],
        input: [x[1], x[2]],
        cin: x[3],
        kernel: [k[0], k[1]],
        cout: k[3],
        output: [yd[1], yd[2]],
        strides: [forward.strides[0], forward.strides[1]],
        dilation: [forward.rhs_dilation[0], forward.rhs_dilation[1]],
        pad: [forward.padding[0].0, forward.padding[1].0],
    })?;
    d.supported().then_some(d)
}

/// The pooling `w` of `operand` to `pooled` when the fused kernels rebuild the
/// cotangent of its operand a part at a time (bands of rows, or tiles): a fused bias and
/// ReLU max pooling whose windows never overlap.
fn band_pool(operand: &TensorType, pooled: &TensorType, w: &Window) -> Option<Pool2d> {
    Pool2d::of(operand.dims(), pooled.dims(), w).filter(|p| p.bias_relu_indexable() && p.disjoint())
}

/// How the fused kernels compute a kernel gradient from a pooled cotangent: by the
/// direct kernel gradient on bands of `dY`, or by Winograd's tiles of it.
enum PooledGrad {
    Direct(Direct2d),
    Tiles(Tiles),
}

/// The pooling and how the kernel gradient `dw` of the convolution `forward` of `image`
/// (output `y`, pooled by `w` to `pooled` by a fused bias and ReLU max pooling) is
/// computed from the pooled cotangent, as `native` computes it from the stored one: an
/// `f32` convolution the direct kernel gradient computes, and a pooling whose windows
/// never overlap; or one Winograd's tiles compute, each window inside one tile.
fn pooled_kernel_grad_way(
    forward: &crate::ir::ConvParams,
    image: &TensorType,
    (y, w, pooled): (&TensorType, &Window, &TensorType),
    dw: &TensorType,
) -> Option<(Pool2d, PooledGrad)> {
    let p = band_pool(y, pooled, w)?;
    if let Some(d) = direct_taps(forward, image, y, dw) {
        return Some((p, PooledGrad::Direct(d)));
    }
    let t = winograd_kernel_grad(forward, image, y, dw).filter(|t| p.tiles_kernel_grad_fit(t))?;
    Some((p, PooledGrad::Tiles(t)))
}

/// Whether the planner may compute the kernel gradient `dw` of the convolution `forward`
/// of `image` (output `y`, pooled by `w` to `pooled` by a fused bias and ReLU max
/// pooling) from the pooled cotangent (see `pooled_kernel_grad_way`).
pub(crate) fn pooled_kernel_grad_fusable(
    forward: &crate::ir::ConvParams,
    image: &TensorType,
    pooling: (&TensorType, &Window, &TensorType),
    dw: &TensorType,
) -> bool {
    pooled_kernel_grad_way(forward, image, pooling, dw).is_some()
}

/// Whether the planner may compute the convolution of `y`'s cotangent (`y` pooled by
/// `w` to `pooled` by a fused bias and ReLU max pooling) by `kernel` to `out` (the input
/// gradient of the convolution whose output `y` is) from the pooled cotangent: an `f32`
/// convolution Winograd's scatter form computes, each window inside one of its tiles.
pub(crate) fn pooled_input_grad_fusable(
    pooling: (&TensorType, &Window, &TensorType),
    kernel: &TensorType,
    params: &crate::ir::ConvParams,
    out: &TensorType,
) -> bool {
    pooled_input_grad_way(pooling, kernel, params, out).is_some()
}

/// The pooling and the tiles by which the fused kernel computes the convolution of
/// `pooled_input_grad_fusable`.
fn pooled_input_grad_way(
    (y, w, pooled): (&TensorType, &Window, &TensorType),
    kernel: &TensorType,
    params: &crate::ir::ConvParams,
    out: &TensorType,
) -> Option<(Pool2d, Tiles)> {
    let p = band_pool(y, pooled, w)?;
    let t = winograd_scatter(y, kernel, params, out).filter(|t| p.tiles_input_grad_fit(t))?;
    Some((p, t))
}

/// The kernel gradient (of type `out_ty`) of the convolution `forward` of `image` whose
/// output (of type `operand`) `native_recording_bias_relu`'s pooling by `w` (`f`) pooled,
/// from that pooling's cotangent `source` and `index`, without the convolution's output
/// cotangent in memory (`Pool2d::pooled_kernel_grad`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn native_pooled_kernel_grad(
    image: In<'_>,
    source: In<'_>,
    (operand, w, f): (&TensorType, &Window, &BiasReluPool),
    forward: &crate::ir::ConvParams,
    index: &[u8],
    out_ty: &TensorType,
    out: DataMut<'_>,
    scratch: &mut Vec<f32>,
) -> Result<()> {
    let op = "convolution";
    let sized = index.len() == source.ty.numel()
        && image.ty.numel() == image.data.len()
        && out_ty.numel() == out.as_data().len();
    let (p, way) = pooled_kernel_grad_way(forward, image.ty, (operand, w, source.ty), out_ty)
        .filter(|_| sized)
        .ok_or_else(|| Error::shape(op, "not a pooled convolution's kernel gradient"))?;
    let bad = || Error::shape(op, "constants out of the type's range");
    match (image.data, source.data, out) {
        (Data::F32(x), Data::F32(s), DataMut::F32(o)) => {
            let (_, gate) = f.act::<f32>().ok_or_else(bad)?;
            match way {
                PooledGrad::Direct(d) => p.pooled_kernel_grad(&d, x, (s, index), &gate, o, scratch),
                PooledGrad::Tiles(t) => p.tiles_kernel_grad(&t, x, (s, index), &gate, o, scratch),
            }
        }
        (x, _, _) => Err(super::unsupported(op, x.dtype())),
    }
}

/// The convolution (of type `out_ty`, parameters `params`) by `kernel` of the cotangent of
/// the operand (of type `operand`) that `native_recording_bias_relu`'s pooling by `w`
/// (`f`) pooled, from that pooling's cotangent `source` and `index`, that cotangent never
/// stored (`Pool2d::tiles_input_grad`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn native_pooled_input_grad(
    kernel: In<'_>,
    source: In<'_>,
    (operand, w, f): (&TensorType, &Window, &BiasReluPool),
    params: &crate::ir::ConvParams,
    index: &[u8],
    out_ty: &TensorType,
    out: DataMut<'_>,
    scratch: &mut Vec<f32>,
) -> Result<()> {
    let op = "convolution";
    let sized = index.len() == source.ty.numel()
        && kernel.ty.numel() == kernel.data.len()
        && out_ty.numel() == out.as_data().len();
    let (p, t) = pooled_input_grad_way((operand, w, source.ty), kernel.ty, params, out_ty)
        .filter(|_| sized)
        .ok_or_else(|| Error::shape(op, "not a pooled convolution's input gradient"))?;
    let bad = || Error::shape(op, "constants out of the type's range");
    match (kernel.data, source.data, out) {
        (Data::F32(k), Data::F32(s), DataMut::F32(o)) => {
            let (_, gate) = f.act::<f32>().ok_or_else(bad)?;
            p.tiles_input_grad(&t, k, (s, index), &gate, o, scratch)
        }
        (k, _, _) => Err(super::unsupported(op, k.dtype())),
    }
}

/// The bias gradient (`dY` summed over all but its channels) of the pooling of
/// `native_pooled_kernel_grad`, from the same cotangent and index.
pub(crate) fn native_pooled_bias_grad(
    source: In<'_>,
    (operand, w, f): (&TensorType, &Window, &BiasReluPool),
    index: &[u8],
    out: DataMut<'_>,
    scratch: &mut Vec<f32>,
) -> Result<()> {
    let op = "reduce";
    let p = band_pool(operand, source.ty, w)
        .filter(|_| index.len() == source.ty.numel())
        .filter(|_| out.as_data().len() == operand.dims()[3])
        .ok_or_else(|| Error::shape(op, "not a fusable 2-D pooling's bias gradient"))?;
    let bad = || Error::shape(op, "constants out of the type's range");
    match (source.data, out) {
        (Data::F32(s), DataMut::F32(o)) => {
            let (_, gate) = f.act::<f32>().ok_or_else(bad)?;
            p.pooled_bias_grad((s, index), &gate, o, scratch)
        }
        (s, _) => return Err(super::unsupported(op, s.dtype())),
    }
    Ok(())
}

// ---- StableHLO lowering

use crate::hlo::{i64_array, padding_attr, scalar_literal};
use crate::ops::Emitter;

/// The window attributes shared by `reduce_window` and `select_and_scatter`.
fn window_attrs(w: &Window) -> String {
    let pads: Vec<(i64, i64)> = w
        .padding
        .iter()
        .map(|&(l, h)| (l as i64, h as i64))
        .collect();
    format!(
        "padding = {}, window_dimensions = {}, window_strides = {}",
        padding_attr(&pads),
        i64_array(&w.dims),
        i64_array(&w.strides)
    )
}

/// Padding is filled with the reduction's identity, which is what the native kernel's
/// skipping of out-of-range positions amounts to.
pub(crate) fn lower(
    e: &mut Emitter<'_>,
    op: ReduceOp,
    x: Value,
    w: &Window,
    ty: &TensorType,
) -> String {
    let d = e.ty(x).dtype;
    let st = TensorType::scalar(d).mlir();
    let (combine, identity) = super::reduce::combiner_and_identity(op, d);
    let init = e.splat(&identity, &st);
    let region = e.combiner(combine, &st, d.is_float());
    let (n, tx) = (e.name(x), e.ty(x).mlir());
    e.emit(format!(
        "\"stablehlo.reduce_window\"({n}, {init}) ({region}) {{{}}} : ({tx}, {st}) -> {}",
        window_attrs(w),
        ty.mlir()
    ))
}

/// `select_and_scatter` with `ge` (max) or `le` (min) keeps the first of equal candidates,
/// and XLA never selects padding positions: both as the native kernel.
pub(crate) fn lower_select_and_scatter(
    e: &mut Emitter<'_>,
    op: ReduceOp,
    source: Value,
    operand: Value,
    w: &Window,
    ty: &TensorType,
) -> Result<String> {
    let dir = match op {
        ReduceOp::Max => "GE",
        ReduceOp::Min => "LE",
        ReduceOp::Sum => {
            return Err(Error::shape(
                "select_and_scatter_add",
                "selects by Max or Min, not Sum",
            ))
        }
    };
    let d = ty.dtype;
    let st = TensorType::scalar(d).mlir();
    let init = e.splat(&scalar_literal(d, 0.0), &st);
    let select = e.comparator(dir, "FLOAT", &st);
    let scatter = e.combiner("add", &st, false);
    let (o, s) = (e.name(operand), e.name(source));
    let (to, ts) = (e.ty(operand).mlir(), e.ty(source).mlir());
    Ok(e.emit(format!(
        "\"stablehlo.select_and_scatter\"({o}, {s}, {init}) ({select}, {scatter}) {{{}}} : ({to}, {ts}, {st}) -> {to}",
        window_attrs(w)
    )))
}
