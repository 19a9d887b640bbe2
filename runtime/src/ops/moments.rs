//! `moments`: the mean and the biased variance over axes, stacked as `[2, kept dims]`
//! (shape rule, gradient, native kernel, StableHLO lowering).
//!
//! Batch normalization's statistics as one primitive: the native kernel reads its input
//! twice (the mean, then the squared deviations from it, the two-pass form that keeps
//! the variance accurate when the mean is large), never writing the deviations out, and
//! the gradient is elementwise, so a training step's statistics cost two reads of the
//! activation forward and none of their own backward.

use super::reduce::{kept, split_rows, Reducible, Runs, SPLIT_INNER, SPLIT_MIN};
use super::In;
use crate::hlo::scalar_literal;
use crate::ir::{Graph, ReduceOp, TensorType, Value};
use crate::kernel::crew;
use crate::kernel::data::{Data, DataMut};
use crate::kernel::real::Real;
use crate::ops::Emitter;
use crate::{Error, Result};

const NAME: &str = "moments";

/// The kept dimensions of `x` and the number of elements each statistic is over.
fn split(t: &TensorType, axes: &[usize]) -> (Vec<usize>, usize) {
    let keep: Vec<usize> = kept(t.rank(), axes)
        .into_iter()
        .map(|d| t.dims()[d])
        .collect();
    let count = axes.iter().map(|&a| t.dims()[a]).product();
    (keep, count)
}

pub(crate) fn check(g: &Graph, x: Value, axes: &[usize]) -> Result<TensorType> {
    let t = g.ty(x);
    if !t.dtype.is_arith_float() {
        return Err(Error::shape(NAME, format!("needs f32 or f64, got {t}")));
    }
    super::check_axes(NAME, axes, t.rank())?;
    let (keep, _) = split(t, axes);
    Ok(TensorType::new(
        t.dtype,
        std::iter::once(2).chain(keep).collect::<Vec<_>>(),
    ))
}

/// With `n` elements per statistic: `d mean / dx = 1/n` and `d var / dx = 2 (x - mean) / n`
/// (the mean's own dependence on `x` drops out of the variance's, since the deviations
/// sum to zero), so the cotangent is elementwise in `x`.
pub(crate) fn vjp(g: &mut Graph, x: Value, axes: &[usize], y: Value, ct: Value) -> Result<Value> {
    let xt = g.ty(x).clone();
    let keep = kept(xt.rank(), axes);
    let (_, count) = split(&xt, axes);
    let n = count.max(1) as f64;
    let (mean, _) = g.rows_of_two(y)?;
    let (ct_mean, ct_var) = g.rows_of_two(ct)?;
    let mean = g.broadcast_in_dim(mean, xt.shape.clone(), &keep)?;
    let dev = g.sub(x, mean)?;
    let a = g.mul_scalar(ct_mean, 1.0 / n)?;
    let a = g.broadcast_in_dim(a, xt.shape.clone(), &keep)?;
    let b = g.mul_scalar(ct_var, 2.0 / n)?;
    let b = g.broadcast_in_dim(b, xt.shape.clone(), &keep)?;
    let db = g.mul(dev, b)?;
    g.add(a, db)
}

pub(crate) fn native(x: In<'_>, axes: &[usize], out: DataMut<'_>) -> Result<()> {
    let dims = x.ty.dims();
    match (x.data, out) {
        (Data::F32(a), DataMut::F32(o)) => run(a, dims, axes, o),
        (Data::F64(a), DataMut::F64(o)) => run(a, dims, axes, o),
        (a, _) => return Err(super::unsupported(NAME, a.dtype())),
    }
    Ok(())
}

/// The widest block of columns summed at once (`split_rows`' parts' sums live on the stack).
const BLOCK: usize = SPLIT_INNER;

/// Writes the mean into `out[..k]` and the variance into `out[k..]` (`k` kept elements).
fn run<T: Real + Reducible>(x: &[T], dims: &[usize], axes: &[usize], out: &mut [T]) {
    let (mean, var) = out.split_at_mut(out.len() / 2);
    let count: usize = axes.iter().map(|&a| dims[a]).product();
    let n = T::from(count).unwrap_or_else(T::nan);
    let runs = Runs::new(dims, axes);
    match runs.outer_reduced_inner() {
        Some((outer, red, 1)) => {
            // Each statistic is over a contiguous row (layer normalization's shape).
            let row = |o: usize, m: &mut T, v: &mut T| {
                let r = &x[o * red..(o + 1) * red];
                *m = r.iter().copied().sum::<T>() / n;
                *v = r.iter().map(|&e| (e - *m) * (e - *m)).sum::<T>() / n;
            };
            let tasks = (outer * red / SPLIT_MIN).clamp(1, crew::width().max(1) * 4);
            if tasks < 2 {
                for o in 0..outer {
                    row(o, &mut mean[o], &mut var[o]);
                }
                return;
            }
            let mean_at = mean.as_mut_ptr() as usize;
            crew::run_chunks(var, tasks, 1, &|start, vs: &mut [T]| {
                // SAFETY: each task owns the same range of `mean` as of `var`, disjoint
                // from the others'; `mean` stays borrowed until `run_chunks` returns.
                let ms = unsafe {
                    std::slice::from_raw_parts_mut((mean_at as *mut T).add(start), vs.len())
                };
                for (j, (m, v)) in ms.iter_mut().zip(vs.iter_mut()).enumerate() {
                    row(start + j, m, v);
                }
            });
        }
        Some((outer, red, inner)) => {
            // Each statistic is over a column of `[red, inner]` (batch normalization's
            // channels-last shape): the rows in parts, each part's sums alone, then added
            // in order. The parts depend only on the shape, so the bits do not depend on
            // the number of threads.
            for o in 0..outer {
                let x = &x[o * red * inner..(o + 1) * red * inner];
                let at = o * inner;
                for c0 in (0..inner).step_by(BLOCK) {
                    let w = BLOCK.min(inner - c0);
                    let cols = at + c0..at + c0 + w;
                    column_sums(x, (red, inner), (c0, w), None, &mut mean[cols.clone()]);
                    for m in &mut mean[cols.clone()] {
                        *m = *m / n;
                    }
                    let center = Some(&mean[cols.clone()]);
                    column_sums(x, (red, inner), (c0, w), center, &mut var[cols.clone()]);
                    for v in &mut var[cols] {
                        *v = *v / n;
                    }
                }
            }
        }
        None => {
            mean.fill(<T as Reducible>::zero());
            var.fill(<T as Reducible>::zero());
            runs.walk(x.len(), |i, o| mean[o] = mean[o] + x[i]);
            for m in mean.iter_mut() {
                *m = *m / n;
            }
            runs.walk(x.len(), |i, o| {
                let d = x[i] - mean[o];
                var[o] = var[o] + d * d;
            });
            for v in var.iter_mut() {
                *v = *v / n;
            }
        }
    }
}

/// The sums down columns `c0..c0 + w` of `x` (`[red, inner]`) into `out`: of the elements
/// themselves, or of their squared deviations from `center` when given; in `reduce`'s
/// parts (`split_rows`), else one pass down the rows.
fn column_sums<T: Real + Reducible>(
    x: &[T],
    (red, inner): (usize, usize),
    (c0, w): (usize, usize),
    center: Option<&[T]>,
    out: &mut [T],
) {
    let add = |rows: std::ops::Range<usize>, sums: &mut [T]| {
        for r in rows {
            let row = &x[r * inner + c0..r * inner + c0 + w];
            match center {
                None => {
                    for (a, &v) in sums.iter_mut().zip(row) {
                        *a = *a + v;
                    }
                }
                Some(m) => {
                    for ((a, &v), &m) in sums.iter_mut().zip(row).zip(m) {
                        let d = v - m;
                        *a = *a + d * d;
                    }
                }
            }
        }
    };
    out.fill(<T as Reducible>::zero());
    if !split_rows(red, w, out, &add) {
        add(0..red, out);
    }
}

// ---- StableHLO lowering

/// The two passes written out: the sum and the mean, the squared deviations and their
/// mean, each reshaped to a row and the rows concatenated.
pub(crate) fn lower(e: &mut Emitter<'_>, x: Value, axes: &[usize], ty: &TensorType) -> String {
    let xt = e.ty(x);
    let (keep_dims, count) = split(xt, axes);
    let kt = TensorType::new(xt.dtype, keep_dims.clone());
    let (kty, xty) = (kt.mlir(), xt.mlir());
    let xn = e.name(x);
    let n = e.splat(&scalar_literal(xt.dtype, count as f64), &kty);
    let sum = super::reduce::emit(e, ReduceOp::Sum, &xn, xt, axes, &kt);
    let mean = e.binary("divide", &sum, &n, &kty);
    let keep = kept(xt.rank(), axes);
    let mb = e.emit(format!(
        "stablehlo.broadcast_in_dim {mean}, dims = {} : ({kty}) -> {xty}",
        crate::hlo::list(&keep)
    ));
    let dev = e.binary("subtract", &xn, &mb, &xty);
    let sq = e.binary("multiply", &dev, &dev, &xty);
    let ss = super::reduce::emit(e, ReduceOp::Sum, &sq, xt, axes, &kt);
    let var = e.binary("divide", &ss, &n, &kty);
    let rt = TensorType::new(
        xt.dtype,
        std::iter::once(1).chain(keep_dims).collect::<Vec<_>>(),
    )
    .mlir();
    let m1 = e.reshape(&mean, &kty, &rt);
    let v1 = e.reshape(&var, &kty, &rt);
    e.emit(format!(
        "stablehlo.concatenate {m1}, {v1}, dim = 0 : ({rt}, {rt}) -> {}",
        ty.mlir()
    ))
}

#[cfg(test)]
#[path = "moments_tests.rs"]
mod tests;
