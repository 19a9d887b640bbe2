//! `gather` (take along an axis, with leading batch dimensions) and `scatter_add`, its
//! transpose: shape rules, gradients, native kernels.

use super::In;
use crate::ir::{Graph, TensorType, Value};
use crate::kernel::data::{with_same, Data, DataMut, Elem};
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

// ---- StableHLO lowering

use crate::hlo::{i64_array, list};
use crate::ops::Emitter;

/// How `take` along `axis` with `batch_dims` leading batch dimensions maps onto StableHLO's
/// gather/scatter dimension numbers. The result (and a scatter's updates) is
/// `operand[..axis] ++ indices[batch_dims..] ++ operand[axis+1..]`; the operand dimensions
/// other than the batch ones and `axis` are whole "window" (offset) dimensions, which sit
/// at these result positions; the index dimensions fill the rest in order.
struct Numbers {
    /// Result positions of the operand's window dimensions.
    window_dims: Vec<usize>,
    /// `0..batch_dims`, in the operand and in the indices alike.
    batch: Vec<usize>,
    /// Slice sizes: 1 for batch dimensions and `axis`, full elsewhere.
    slice_sizes: Vec<usize>,
    /// The indices' rank: the index vector is an implicit trailing dimension of size 1.
    index_vector_dim: usize,
}

fn numbers(operand: &TensorType, indices: &TensorType, axis: usize, batch_dims: usize) -> Numbers {
    let r = operand.rank();
    let n_idx = indices.rank() - batch_dims;
    let window_dims = (batch_dims..axis)
        .chain(axis + n_idx..axis + n_idx + (r - axis - 1))
        .collect();
    let slice_sizes = (0..r)
        .map(|d| {
            if d < batch_dims || d == axis {
                1
            } else {
                operand.dims()[d]
            }
        })
        .collect();
    Numbers {
        window_dims,
        batch: (0..batch_dims).collect(),
        slice_sizes,
        index_vector_dim: indices.rank(),
    }
}

/// `name = [..], ` for a non-empty list; nothing for an empty one (the attribute parser's
/// defaults).
fn field(name: &str, xs: &[usize]) -> String {
    if xs.is_empty() {
        String::new()
    } else {
        format!("{name} = {}, ", list(xs))
    }
}

/// XLA clamps gather start indices into range, which for slices of size 1 along `axis` is
/// exactly the IR's clamping.
pub(crate) fn lower_gather(
    e: &mut Emitter<'_>,
    operand: Value,
    indices: Value,
    axis: usize,
    batch_dims: usize,
    ty: &TensorType,
) -> String {
    let (to, ti) = (e.ty(operand), e.ty(indices));
    let n = numbers(to, ti, axis, batch_dims);
    let dn = format!(
        "#stablehlo.gather<{}collapsed_slice_dims = [{axis}], {}{}start_index_map = [{axis}], index_vector_dim = {}>",
        field("offset_dims", &n.window_dims),
        field("operand_batching_dims", &n.batch),
        field("start_indices_batching_dims", &n.batch),
        n.index_vector_dim
    );
    let (o, i) = (e.name(operand), e.name(indices));
    let (tos, tis) = (to.mlir(), ti.mlir());
    e.emit(format!(
        "\"stablehlo.gather\"({o}, {i}) {{dimension_numbers = {dn}, indices_are_sorted = false, slice_sizes = {}}} : ({tos}, {tis}) -> {}",
        i64_array(&n.slice_sizes),
        ty.mlir()
    ))
}

/// XLA's scatter skips out-of-range updates instead of clamping, so the indices are
/// clamped explicitly first.
pub(crate) fn lower_scatter(
    e: &mut Emitter<'_>,
    operand: Value,
    indices: Value,
    updates: Value,
    axis: usize,
    batch_dims: usize,
    ty: &TensorType,
) -> String {
    let (to, ti, tu) = (e.ty(operand), e.ty(indices), e.ty(updates));
    let n = numbers(to, ti, axis, batch_dims);
    let ist = TensorType::scalar(ti.dtype).mlir();
    let lo = e.splat("0", &ist);
    let hi = e.splat(&to.dims()[axis].saturating_sub(1).to_string(), &ist);
    let i = e.name(indices);
    let tis = ti.mlir();
    let clamped = e.emit(format!(
        "stablehlo.clamp {lo}, {i}, {hi} : ({ist}, {tis}, {ist}) -> {tis}"
    ));
    let st = TensorType::scalar(to.dtype).mlir();
    let region = e.combiner("add", &st, false);
    let dn = format!(
        "#stablehlo.scatter<{}inserted_window_dims = [{axis}], {}{}scatter_dims_to_operand_dims = [{axis}], index_vector_dim = {}>",
        field("update_window_dims", &n.window_dims),
        field("input_batching_dims", &n.batch),
        field("scatter_indices_batching_dims", &n.batch),
        n.index_vector_dim
    );
    let (o, u) = (e.name(operand), e.name(updates));
    let (tos, tus) = (to.mlir(), tu.mlir());
    e.emit(format!(
        "\"stablehlo.scatter\"({o}, {clamped}, {u}) ({region}) {{indices_are_sorted = false, scatter_dimension_numbers = {dn}, unique_indices = false}} : ({tos}, {tis}, {tus}) -> {}",
        ty.mlir()
    ))
}
