//! `reduce` (sum, max, min over axes): shape rule, gradients, native kernel.

use super::In;
use crate::ir::{Comparison, Graph, ReduceOp, TensorType, Value, MAX_RANK};
use crate::kernel::data::{Data, DataMut};
use crate::{Error, Result};

pub(crate) fn check(g: &Graph, op: ReduceOp, x: Value, axes: &[usize]) -> Result<TensorType> {
    let t = g.ty(x);
    if !t.dtype.is_numeric() {
        return Err(Error::shape(
            "reduce",
            format!("{op:?} needs f32, f64, i32 or i64, got {t}"),
        ));
    }
    super::check_axes("reduce", axes, t.rank())?;
    let dims: Vec<usize> = (0..t.rank())
        .filter(|d| !axes.contains(d))
        .map(|d| t.dims()[d])
        .collect();
    Ok(TensorType::new(t.dtype, dims))
}

/// The kept dimensions of `x` (where the result's dimensions land when broadcast back).
pub(crate) fn kept(rank: usize, axes: &[usize]) -> Vec<usize> {
    (0..rank).filter(|d| !axes.contains(d)).collect()
}

/// Sum: broadcast the cotangent back. Max/min: to the elements equal to the result,
/// split evenly among ties (as JAX).
pub(crate) fn vjp(
    g: &mut Graph,
    op: ReduceOp,
    x: Value,
    axes: &[usize],
    y: Value,
    ct: Value,
) -> Result<Value> {
    let xt = g.ty(x).clone();
    let keep = kept(xt.rank(), axes);
    let ctb = g.broadcast_in_dim(ct, xt.shape.clone(), &keep)?;
    match op {
        ReduceOp::Sum => Ok(ctb),
        ReduceOp::Max | ReduceOp::Min => {
            let yb = g.broadcast_in_dim(y, xt.shape.clone(), &keep)?;
            let hit = g.compare(Comparison::Eq, x, yb)?;
            let mask = g.convert(hit, xt.dtype)?;
            let count = g.sum(mask, axes)?;
            let count = g.broadcast_in_dim(count, xt.shape.clone(), &keep)?;
            let share = g.div(mask, count)?;
            g.mul(ctb, share)
        }
    }
}

/// A reduction's identity and combining step for one element type.
pub(crate) trait Reducible: Copy + PartialOrd + Send + Sync {
    fn zero() -> Self;
    fn lowest() -> Self;
    fn highest() -> Self;
    fn add(self, o: Self) -> Self;
    fn is_nan(self) -> bool;
}

macro_rules! reducible {
    ($t:ty, $lo:expr, $hi:expr, $add:expr, $nan:expr) => {
        impl Reducible for $t {
            fn zero() -> Self {
                0 as $t
            }
            fn lowest() -> Self {
                $lo
            }
            fn highest() -> Self {
                $hi
            }
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                $add(self, o)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                $nan(self)
            }
        }
    };
}
reducible!(
    f32,
    f32::NEG_INFINITY,
    f32::INFINITY,
    |a: f32, b| a + b,
    |a: f32| a.is_nan()
);
reducible!(
    f64,
    f64::NEG_INFINITY,
    f64::INFINITY,
    |a: f64, b| a + b,
    |a: f64| a.is_nan()
);
reducible!(
    i32,
    i32::MIN,
    i32::MAX,
    |a: i32, b| a.wrapping_add(b),
    |_| false
);
reducible!(
    i64,
    i64::MIN,
    i64::MAX,
    |a: i64, b| a.wrapping_add(b),
    |_| false
);

#[inline(always)]
fn combine<T: Reducible>(op: ReduceOp, acc: T, v: T) -> T {
    match op {
        ReduceOp::Sum => acc.add(v),
        // NaN wins, as in the binary max/min.
        ReduceOp::Max => {
            if acc.is_nan() || acc >= v {
                acc
            } else {
                v
            }
        }
        ReduceOp::Min => {
            if acc.is_nan() || acc <= v {
                acc
            } else {
                v
            }
        }
    }
}

fn identity<T: Reducible>(op: ReduceOp) -> T {
    match op {
        ReduceOp::Sum => T::zero(),
        ReduceOp::Max => T::lowest(),
        ReduceOp::Min => T::highest(),
    }
}

/// `x`'s dimensions for a reduction over `axes`, merged into runs of kept and of reduced
/// ones (size-1 dimensions dropped): the shape the kernels walk.
pub(crate) struct Runs {
    sizes: [usize; MAX_RANK],
    reduced: [bool; MAX_RANK],
    n: usize,
}

impl Runs {
    pub fn new(dims: &[usize], axes: &[usize]) -> Runs {
        let mut r = Runs {
            sizes: [0; MAX_RANK],
            reduced: [false; MAX_RANK],
            n: 0,
        };
        for (d, &s) in dims.iter().enumerate() {
            if s == 1 {
                continue;
            }
            let red = axes.contains(&d);
            if r.n > 0 && r.reduced[r.n - 1] == red {
                r.sizes[r.n - 1] *= s;
            } else {
                r.sizes[r.n] = s;
                r.reduced[r.n] = red;
                r.n += 1;
            }
        }
        r
    }

    /// `(outer, reduced, inner)` when the runs are one reduced run with at most one kept
    /// run on each side: the shapes that run as contiguous row operations.
    pub fn outer_reduced_inner(&self) -> Option<(usize, usize, usize)> {
        let (gs, gr) = (&self.sizes[..self.n], &self.reduced[..self.n]);
        match gr {
            [] => Some((1, 1, 1)),
            [true] => Some((1, gs[0], 1)),
            [false, true] => Some((gs[0], gs[1], 1)),
            [true, false] => Some((1, gs[0], gs[1])),
            [false, true, false] => Some((gs[0], gs[1], gs[2])),
            _ => None,
        }
    }

    /// Calls `f(i, o)` for each element `i` of `x` in order with `o`, its offset in the
    /// reduction's result.
    pub fn walk(&self, len: usize, mut f: impl FnMut(usize, usize)) {
        let n = self.n;
        let (gs, gr) = (&self.sizes[..n], &self.reduced[..n]);
        // Reduced runs have stride 0 in the result.
        let mut ostride = [0usize; MAX_RANK];
        let mut acc = 1;
        for d in (0..n).rev() {
            if !gr[d] {
                ostride[d] = acc;
                acc *= gs[d];
            }
        }
        let mut idx = [0usize; MAX_RANK];
        let mut off = 0usize;
        for i in 0..len {
            f(i, off);
            let mut d = n;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                off += ostride[d];
                if idx[d] < gs[d] {
                    break;
                }
                off -= ostride[d] * gs[d];
                idx[d] = 0;
            }
        }
    }
}

/// Reduces `x` (dims `dims`) over `axes` into `out`.
///
/// Dimensions are first merged into runs of kept and reduced ones; the common shapes
/// `[outer, reduced, inner]` then run as contiguous row operations.
fn run<T: Reducible>(op: ReduceOp, x: &[T], dims: &[usize], axes: &[usize], out: &mut [T]) {
    out.fill(identity(op));
    if x.is_empty() {
        return;
    }
    let runs = Runs::new(dims, axes);
    if let Some((outer, red, inner)) = runs.outer_reduced_inner() {
        if outer == 1 && op == ReduceOp::Sum && split_sum(x, red, inner, out) {
            return;
        }
        for o in 0..outer {
            let dst = &mut out[o * inner..(o + 1) * inner];
            let src = &x[o * red * inner..(o + 1) * red * inner];
            if inner == 1 {
                let mut acc = dst[0];
                for &v in src {
                    acc = combine(op, acc, v);
                }
                dst[0] = acc;
            } else {
                for row in src.chunks_exact(inner) {
                    for (a, &v) in dst.iter_mut().zip(row) {
                        *a = combine(op, *a, v);
                    }
                }
            }
        }
        return;
    }
    runs.walk(x.len(), |i, o| out[o] = combine(op, out[o], x[i]));
}

/// Below this many elements a sum runs as one pass on the calling thread.
pub(crate) const SPLIT_MIN: usize = 1 << 14;
/// The most parts [`split_sum`] cuts a sum into, and the widest row it splits.
const SPLIT_PARTS: usize = 16;
pub(crate) const SPLIT_INNER: usize = 256;

/// A large sum over the rows of `[red, inner]` (a bias's gradient: a convnet's activations
/// summed over batch and pixels) on the crew: the rows cut into parts, each summed alone,
/// the parts' sums then added in order. The parts depend only on the shape, never on the
/// number of threads, so the result is the same bits on every machine. Returns false
/// (nothing written) for sums too small or rows too wide to gain from it.
fn split_sum<T: Reducible>(x: &[T], red: usize, inner: usize, out: &mut [T]) -> bool {
    split_rows(red, inner, out, &|rows, sums: &mut [T]| {
        for row in x[rows.start * inner..rows.end * inner].chunks_exact(inner) {
            for (a, &v) in sums.iter_mut().zip(row) {
                *a = a.add(v);
            }
        }
    })
}

/// [`split_sum`]'s parts and order for any rows: `add(rows, sums)` adds rows `rows` (of
/// `inner` values) into `sums`, in order. Returns false (nothing written) where
/// `split_sum` would.
pub(crate) fn split_rows<T: Reducible>(
    red: usize,
    inner: usize,
    out: &mut [T],
    add: &(dyn Fn(std::ops::Range<usize>, &mut [T]) + Sync),
) -> bool {
    let parts = (red * inner / SPLIT_MIN).min(SPLIT_PARTS).min(red);
    if parts < 2 || !(2..=SPLIT_INNER).contains(&inner) {
        return false;
    }
    let mut partial = [T::zero(); SPLIT_PARTS * SPLIT_INNER];
    let partial = &mut partial[..parts * inner];
    crate::kernel::crew::run_chunks(partial, parts, inner, &|start, sums: &mut [T]| {
        add(crate::kernel::crew::part(red, parts, start / inner), sums);
    });
    for sums in partial.chunks_exact(inner) {
        for (a, &v) in out.iter_mut().zip(sums) {
            *a = a.add(v);
        }
    }
    true
}

/// The sum over `x`'s leading `lead` axes of `x · y` (same type), without the product in
/// memory: the bits of that sum over the product written out, since each product is
/// rounded as the multiplication writes it and the sum's parts and order are
/// [`run`]'s (`split_rows`, else one pass down the rows). The native planner substitutes
/// it for such a sum (`backend::native::sum_of_products`).
pub(crate) fn native_sum_of_products(
    x: In<'_>,
    y: In<'_>,
    lead: usize,
    out: DataMut<'_>,
) -> Result<()> {
    fn go<T: Reducible + std::ops::Mul<Output = T>>(x: &[T], y: &[T], red: usize, out: &mut [T]) {
        let inner = out.len();
        let add = |rows: std::ops::Range<usize>, sums: &mut [T]| {
            let (at, to) = (rows.start * inner, rows.end * inner);
            for (rx, ry) in x[at..to]
                .chunks_exact(inner)
                .zip(y[at..to].chunks_exact(inner))
            {
                for ((a, &u), &v) in sums.iter_mut().zip(rx).zip(ry) {
                    *a = a.add(u * v);
                }
            }
        };
        // `split_rows` adds its parts' sums to `out`, as `run` fills it first.
        out.fill(T::zero());
        if inner == 0 {
            return;
        }
        if !split_rows(red, inner, out, &add) {
            add(0..red, out);
        }
    }
    if x.ty != y.ty || lead > x.ty.rank() {
        return Err(Error::shape(
            "reduce",
            "a sum of products of unlike operands",
        ));
    }
    let red: usize = x.ty.dims()[..lead].iter().product();
    match (x.data, y.data, out) {
        (Data::F32(a), Data::F32(b), DataMut::F32(o)) => go(a, b, red, o),
        (Data::F64(a), Data::F64(b), DataMut::F64(o)) => go(a, b, red, o),
        (a, _, _) => return Err(super::unsupported("reduce", a.dtype())),
    }
    Ok(())
}

pub(crate) fn native(op: ReduceOp, x: In<'_>, axes: &[usize], out: DataMut<'_>) -> Result<()> {
    let dims = x.ty.dims();
    match (x.data, out) {
        (Data::F32(a), DataMut::F32(o)) => run(op, a, dims, axes, o),
        (Data::F64(a), DataMut::F64(o)) => run(op, a, dims, axes, o),
        (Data::I32(a), DataMut::I32(o)) => run(op, a, dims, axes, o),
        (Data::I64(a), DataMut::I64(o)) => run(op, a, dims, axes, o),
        (a, _) => return Err(super::unsupported("reduce", a.dtype())),
    }
    Ok(())
}

// ---- StableHLO lowering

use crate::hlo::{i64_array, scalar_literal};
use crate::ir::DType;
use crate::ops::Emitter;

/// The StableHLO op that combines two values of a reduction, and the reduction's
/// identity as a literal of element type `d` (also what pooling pads with).
pub(crate) fn combiner_and_identity(op: ReduceOp, d: DType) -> (&'static str, String) {
    let int = |i: i64| i.to_string();
    match (op, d) {
        (ReduceOp::Sum, _) => ("add", scalar_literal(d, 0.0)),
        (ReduceOp::Max, DType::I32) => ("maximum", int(i32::MIN.into())),
        (ReduceOp::Max, DType::I64) => ("maximum", int(i64::MIN)),
        (ReduceOp::Max, _) => ("maximum", scalar_literal(d, f64::NEG_INFINITY)),
        (ReduceOp::Min, DType::I32) => ("minimum", int(i32::MAX.into())),
        (ReduceOp::Min, DType::I64) => ("minimum", int(i64::MAX)),
        (ReduceOp::Min, _) => ("minimum", scalar_literal(d, f64::INFINITY)),
    }
}

/// Max and min propagate NaN (see `Emitter::combiner`), as the native reduction does.
pub(crate) fn lower(
    e: &mut Emitter<'_>,
    op: ReduceOp,
    x: Value,
    axes: &[usize],
    ty: &TensorType,
) -> String {
    let n = e.name(x);
    emit(e, op, &n, e.ty(x), axes, ty)
}

/// The reduction of the SSA value `x` (of type `xt`) over `axes` to `ty`.
pub(crate) fn emit(
    e: &mut Emitter<'_>,
    op: ReduceOp,
    x: &str,
    xt: &TensorType,
    axes: &[usize],
    ty: &TensorType,
) -> String {
    let d = xt.dtype;
    let st = TensorType::scalar(d).mlir();
    let (combine, identity) = combiner_and_identity(op, d);
    let init = e.splat(&identity, &st);
    let region = e.combiner(combine, &st, d.is_float());
    e.emit(format!(
        "\"stablehlo.reduce\"({x}, {init}) ({region}) {{dimensions = {}}} : ({}, {st}) -> {}",
        i64_array(axes),
        xt.mlir(),
        ty.mlir()
    ))
}

#[cfg(test)]
#[path = "reduce_tests.rs"]
mod tests;
