//! `slice`: shape rule, gradient, native kernel.

use super::In;
use crate::ir::{Graph, TensorType, Value};
use crate::kernel::data::{with_same, DataMut};
use crate::kernel::strided;
use crate::{Error, Result};

pub(crate) fn check(
    g: &Graph,
    x: Value,
    start: &[usize],
    limit: &[usize],
    stride: &[usize],
) -> Result<TensorType> {
    let t = g.ty(x);
    let r = t.rank();
    if start.len() != r || limit.len() != r || stride.len() != r {
        return Err(Error::shape(
            "slice",
            format!(
                "operand {t} has rank {r}; start, limit and stride must each have {r} entries, got {}, {} and {}",
                start.len(),
                limit.len(),
                stride.len()
            ),
        ));
    }
    let mut dims = Vec::with_capacity(r);
    for d in 0..r {
        if start[d] > limit[d] || limit[d] > t.dims()[d] || stride[d] == 0 {
            return Err(Error::shape(
                "slice",
                format!(
                    "dimension {d} of {t}: need start <= limit <= {} and stride >= 1, got {}..{} step {}",
                    t.dims()[d],
                    start[d],
                    limit[d],
                    stride[d]
                ),
            ));
        }
        dims.push((limit[d] - start[d]).div_ceil(stride[d]));
    }
    Ok(TensorType::new(t.dtype, dims))
}

/// The cotangent goes back to the sliced positions: padding with zeros, `stride - 1`
/// zeros between elements.
pub(crate) fn vjp(
    g: &mut Graph,
    x: Value,
    start: &[usize],
    stride: &[usize],
    ct: Value,
) -> Result<Value> {
    let xd = g.ty(x).dims().to_vec();
    let cd = g.ty(ct).dims().to_vec();
    let zero = g.scalar(0.0, g.ty(ct).dtype);
    let mut low = Vec::new();
    let mut high = Vec::new();
    let mut interior = Vec::new();
    for d in 0..xd.len() {
        let n = cd[d];
        let covered = if n == 0 { 0 } else { (n - 1) * stride[d] + 1 };
        low.push(start[d] as i64);
        high.push((xd[d] - start[d] - covered) as i64);
        interior.push(stride[d] - 1);
    }
    g.pad(ct, zero, &low, &high, &interior)
}

pub(crate) fn native(
    x: In<'_>,
    start: &[usize],
    stride: &[usize],
    out_ty: &TensorType,
    out: DataMut<'_>,
) -> Result<()> {
    let xs = strided::strides(x.ty.dims());
    let mut st = xs;
    let mut base = 0isize;
    for d in 0..start.len() {
        base += start[d] as isize * xs[d];
        st[d] = xs[d] * stride[d] as isize;
    }
    let r = start.len();
    with_same!("slice", x.data, out, |a, o| {
        strided::gather(a, base, &st[..r], out_ty.dims(), o)
    });
    Ok(())
}

// ---- StableHLO lowering

use crate::ops::Emitter;

pub(crate) fn lower(
    e: &mut Emitter<'_>,
    x: Value,
    start: &[usize],
    limit: &[usize],
    stride: &[usize],
    ty: &TensorType,
) -> String {
    let (n, from) = (e.name(x), e.ty(x).mlir());
    let ranges: Vec<String> = (0..start.len())
        .map(|d| format!("{}:{}:{}", start[d], limit[d], stride[d]))
        .collect();
    e.emit(format!(
        "stablehlo.slice {n} [{}] : ({from}) -> {}",
        ranges.join(", "),
        ty.mlir()
    ))
}
