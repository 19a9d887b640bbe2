//! `gather` (take along an axis, with leading batch dimensions) and `scatter_add`, its
//! transpose: shape rules, gradients, native kernels.

use super::In;
use crate::backend::native::data::{with_same, Data, DataMut, Elem};
use crate::ir::{Graph, TensorType, Value};
use crate::{Error, Result};

/// `operand[..axis] ++ indices[batch_dims..] ++ operand[axis+1..]`.
fn gathered_dims(o: &TensorType, i: &TensorType, axis: usize, batch_dims: usize) -> Vec<usize> {
    let mut dims = o.dims()[..axis].to_vec();
    dims.extend_from_slice(&i.dims()[batch_dims..]);
    dims.extend_from_slice(&o.dims()[axis + 1..]);
    dims
}

fn check_common(
    op: &'static str,
    o: &TensorType,
    i: &TensorType,
    axis: usize,
    batch_dims: usize,
) -> Result<()> {
    if !i.dtype.is_int() {
        return Err(Error::shape(
            op,
            format!("indices must be i32 or i64, got {i}"),
        ));
    }
    if axis >= o.rank() {
        return Err(Error::shape(
            op,
            format!("axis {axis} out of range for operand {o}"),
        ));
    }
    if batch_dims > axis
        || batch_dims > i.rank()
        || o.dims()[..batch_dims] != i.dims()[..batch_dims]
    {
        return Err(Error::shape(
            op,
            format!(
                "the first {batch_dims} batch dimension(s) of operand {o} and indices {i} must match, \
                 and batch_dims must not exceed axis {axis}"
            ),
        ));
    }
    Ok(())
}

pub(crate) fn check_gather(
    g: &Graph,
    operand: Value,
    indices: Value,
    axis: usize,
    batch_dims: usize,
) -> Result<TensorType> {
    let (o, i) = (g.ty(operand), g.ty(indices));
    check_common("gather", o, i, axis, batch_dims)?;
    Ok(TensorType::new(
        o.dtype,
        gathered_dims(o, i, axis, batch_dims),
    ))
}

pub(crate) fn check_scatter(
    g: &Graph,
    operand: Value,
    indices: Value,
    updates: Value,
    axis: usize,
    batch_dims: usize,
) -> Result<TensorType> {
    let (o, i, u) = (g.ty(operand), g.ty(indices), g.ty(updates));
    check_common("scatter_add", o, i, axis, batch_dims)?;
    let want = TensorType::new(o.dtype, gathered_dims(o, i, axis, batch_dims));
    if u != &want {
        return Err(Error::shape(
            "scatter_add",
            format!("updates must be {want} (the gathered shape), got {u}"),
        ));
    }
    if !o.dtype.is_numeric() {
        return Err(Error::shape(
            "scatter_add",
            format!("operand must be numeric, got {o}"),
        ));
    }
    Ok(o.clone())
}

pub(crate) fn vjp_gather(
    g: &mut Graph,
    operand: Value,
    indices: Value,
    axis: usize,
    batch_dims: usize,
    ct: Value,
) -> Result<Vec<Option<Value>>> {
    let zeros = g.zeros_like(operand)?;
    let d = g.scatter_add(zeros, indices, ct, axis, batch_dims)?;
    Ok(vec![Some(d), None])
}

pub(crate) fn vjp_scatter(
    g: &mut Graph,
    indices: Value,
    axis: usize,
    batch_dims: usize,
    ct: Value,
) -> Result<Vec<Option<Value>>> {
    let du = g.gather(ct, indices, axis, batch_dims)?;
    Ok(vec![Some(ct), None, Some(du)])
}

/// Sizes of `[batch, mid, axis, inner]` for the operand and the index count per batch.
struct Layout {
    batch: usize,
    mid: usize,
    len: usize,
    inner: usize,
    count: usize,
}

fn layout(o: &TensorType, i: &TensorType, axis: usize, batch_dims: usize) -> Layout {
    let od = o.dims();
    Layout {
        batch: od[..batch_dims].iter().product(),
        mid: od[batch_dims..axis].iter().product(),
        len: od[axis],
        inner: od[axis + 1..].iter().product(),
        count: i.dims()[batch_dims..].iter().product(),
    }
}

/// Clamps an index into `[0, len)`, as XLA does.
fn clamp(i: i64, len: usize) -> usize {
    i.clamp(0, len.saturating_sub(1) as i64) as usize
}

pub(crate) fn native_gather(
    operand: In<'_>,
    indices: In<'_>,
    axis: usize,
    batch_dims: usize,
    out: DataMut<'_>,
) -> Result<()> {
    let l = layout(operand.ty, indices.ty, axis, batch_dims);
    let idx = indices.data;
    with_same!("gather", operand.data, out, |a, o| {
        let mut w = 0;
        for b in 0..l.batch {
            for m in 0..l.mid {
                for j in 0..l.count {
                    let k = clamp(idx.index(b * l.count + j), l.len);
                    let src = ((b * l.mid + m) * l.len + k) * l.inner;
                    o[w..w + l.inner].copy_from_slice(&a[src..src + l.inner]);
                    w += l.inner;
                }
            }
        }
    });
    Ok(())
}

pub(crate) fn native_scatter(
    operand: In<'_>,
    indices: In<'_>,
    updates: In<'_>,
    axis: usize,
    batch_dims: usize,
    out: DataMut<'_>,
) -> Result<()> {
    fn run<T: Elem + std::ops::Add<Output = T>>(
        a: &[T],
        idx: Data<'_>,
        u: Data<'_>,
        l: &Layout,
        o: &mut [T],
    ) -> Result<()> {
        let u = T::of(u).ok_or_else(|| super::unsupported("scatter_add", u.dtype()))?;
        o.copy_from_slice(a);
        let mut r = 0;
        for b in 0..l.batch {
            for m in 0..l.mid {
                for j in 0..l.count {
                    let k = clamp(idx.index(b * l.count + j), l.len);
                    let dst = ((b * l.mid + m) * l.len + k) * l.inner;
                    for (d, &v) in o[dst..dst + l.inner].iter_mut().zip(&u[r..r + l.inner]) {
                        *d = *d + v;
                    }
                    r += l.inner;
                }
            }
        }
        Ok(())
    }
    let l = layout(operand.ty, indices.ty, axis, batch_dims);
    match (operand.data, out) {
        (Data::F32(a), DataMut::F32(o)) => run(a, indices.data, updates.data, &l, o),
        (Data::F64(a), DataMut::F64(o)) => run(a, indices.data, updates.data, &l, o),
        (Data::I32(a), DataMut::I32(o)) => run(a, indices.data, updates.data, &l, o),
        (Data::I64(a), DataMut::I64(o)) => run(a, indices.data, updates.data, &l, o),
        (a, _) => Err(super::unsupported("scatter_add", a.dtype())),
    }
}
