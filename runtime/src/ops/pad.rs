//! `pad`: shape rule, gradient, native kernel.

use super::In;
use crate::ir::{Graph, TensorType, Value, MAX_RANK};
use crate::kernel::data::{with_same, Data, DataMut, Elem};
use crate::{Error, Result};

/// Result size per dimension: `low + high + d + (d - 1) * interior` (at least 0).
pub(crate) fn check(
    g: &Graph,
    x: Value,
    value: Value,
    low: &[i64],
    high: &[i64],
    interior: &[usize],
) -> Result<TensorType> {
    let (t, v) = (g.ty(x), g.ty(value));
    if v.rank() != 0 || v.dtype != t.dtype {
        return Err(Error::shape(
            "pad",
            format!("padding value must be a {} scalar, got {v}", t.dtype),
        ));
    }
    let r = t.rank();
    if low.len() != r || high.len() != r || interior.len() != r {
        return Err(Error::shape(
            "pad",
            format!("operand {t} has rank {r}; low, high and interior must each have {r} entries"),
        ));
    }
    let mut dims = Vec::with_capacity(r);
    for d in 0..r {
        let n = t.dims()[d] as i64;
        let size = i64::try_from(interior[d])
            .ok()
            .and_then(|i| (n - 1).max(0).checked_mul(i))
            .and_then(|v| v.checked_add(n))
            .and_then(|v| v.checked_add(low[d]))
            .and_then(|v| v.checked_add(high[d]))
            .ok_or_else(|| {
                Error::shape(
                    "pad",
                    format!(
                        "dimension {d} of {t} padded by {}, {} and {} interior overflows",
                        low[d], high[d], interior[d]
                    ),
                )
            })?;
        if size < 0 {
            return Err(Error::shape(
                "pad",
                format!("dimension {d} of {t} would have negative size {size}"),
            ));
        }
        dims.push(size as usize);
    }
    Ok(TensorType::new(t.dtype, dims))
}

/// Operand: undo the edge padding (a pad by the negated amounts), then keep every
/// `interior + 1`-th element. Value: everything not taken by the operand.
pub(crate) fn vjp(
    g: &mut Graph,
    x: Value,
    low: &[i64],
    high: &[i64],
    interior: &[usize],
    ct: Value,
) -> Result<Vec<Option<Value>>> {
    let dtype = g.ty(ct).dtype;
    let zero = g.scalar(0.0, dtype);
    let r = low.len();
    let nl: Vec<i64> = low.iter().map(|v| -v).collect();
    let nh: Vec<i64> = high.iter().map(|v| -v).collect();
    let unpadded = g.pad(ct, zero, &nl, &nh, &vec![0; r])?;
    let ud = g.ty(unpadded).dims().to_vec();
    let stride: Vec<usize> = interior.iter().map(|i| i + 1).collect();
    let dx = g.slice(unpadded, &vec![0; r], &ud, &stride)?;
    debug_assert_eq!(g.ty(dx).shape, g.ty(x).shape);
    let total = g.sum_all(ct)?;
    let taken = g.sum_all(dx)?;
    let dv = g.sub(total, taken)?;
    Ok(vec![Some(dx), Some(dv)])
}

/// Steps the row-major multi-index `idx` over `dims` to the next element.
fn next_index(idx: &mut [usize], dims: &[usize]) {
    for (i, &n) in idx.iter_mut().zip(dims).rev() {
        *i += 1;
        if *i < n {
            return;
        }
        *i = 0;
    }
}

pub(crate) fn native(
    x: In<'_>,
    value: Data<'_>,
    low: &[i64],
    interior: &[usize],
    out_ty: &TensorType,
    out: DataMut<'_>,
) -> Result<()> {
    fn run<T: Elem>(
        a: &[T],
        value: Data<'_>,
        xd: &[usize],
        od: &[usize],
        low: &[i64],
        interior: &[usize],
        o: &mut [T],
    ) -> Result<()> {
        let v = T::of(value).ok_or_else(|| super::unsupported("pad", value.dtype()))?[0];
        o.fill(v);
        if a.is_empty() {
            return Ok(());
        }
        let r = xd.len();
        let os = crate::kernel::strided::strides(od);
        let mut idx = [0usize; MAX_RANK];
        // Only edges, none cropped (a slice's gradient: the block put back among zeros):
        // the input's rows are contiguous runs of the result, copied whole.
        let plain =
            (0..r).all(|d| interior[d] == 0 && low[d] >= 0 && low[d] as usize + xd[d] <= od[d]);
        if plain && r > 0 {
            let row = xd[r - 1];
            for src in a.chunks_exact(row) {
                let off: usize = (0..r)
                    .map(|d| (low[d] as usize + idx[d]) * os[d] as usize)
                    .sum();
                o[off..off + row].copy_from_slice(src);
                next_index(&mut idx[..r - 1], &xd[..r - 1]);
            }
            return Ok(());
        }
        for &e in a {
            // Position of this element in the result; skip it if cropped away.
            let mut off = 0isize;
            let mut inside = true;
            for d in 0..r {
                let p = low[d] + (idx[d] * (interior[d] + 1)) as i64;
                if p < 0 || p >= od[d] as i64 {
                    inside = false;
                    break;
                }
                off += p as isize * os[d];
            }
            if inside {
                o[off as usize] = e;
            }
            next_index(&mut idx[..r], xd);
        }
        Ok(())
    }
    with_same!("pad", x.data, out, |a, o| run(
        a,
        value,
        x.ty.dims(),
        out_ty.dims(),
        low,
        interior,
        o
    ))
}

// ---- StableHLO lowering

use crate::hlo::list;
use crate::ops::Emitter;

/// StableHLO's pad has the IR's semantics, negative (cropping) edges included.
pub(crate) fn lower(
    e: &mut Emitter<'_>,
    x: Value,
    value: Value,
    low: &[i64],
    high: &[i64],
    interior: &[usize],
    ty: &TensorType,
) -> String {
    let (n, v) = (e.name(x), e.name(value));
    let (tx, tv) = (e.ty(x).mlir(), e.ty(value).mlir());
    e.emit(format!(
        "stablehlo.pad {n}, {v}, low = {}, high = {}, interior = {} : ({tx}, {tv}) -> {}",
        list(low),
        list(high),
        list(interior),
        ty.mlir()
    ))
}
