//! `dynamic_slice` and `dynamic_update_slice`: a window of static size at a position
//! computed at run time (what a scan reads and writes per iteration), each start clamped
//! so the window lies inside the operand, as StableHLO defines them.

use super::In;
use crate::ir::{DType, Graph, TensorType, Value};
use crate::kernel::data::{type_mismatch, with_same, Data, DataMut, Elem};
use crate::kernel::strided;
use crate::types::MAX_RANK;
use crate::{Error, Result};

/// The start operands: one integer scalar per dimension, all of one type.
fn check_starts(g: &Graph, op: &'static str, x: &TensorType, starts: &[Value]) -> Result<()> {
    if starts.len() != x.rank() {
        return Err(Error::shape(
            op,
            format!(
                "operand {x} has rank {}: needs {} start indices, got {}",
                x.rank(),
                x.rank(),
                starts.len()
            ),
        ));
    }
    let first = starts.first().map(|&s| g.ty(s).clone());
    for (d, &s) in starts.iter().enumerate() {
        let t = g.ty(s);
        let integer = matches!(t.dtype, DType::I32 | DType::I64);
        if t.rank() != 0 || !integer || Some(t) != first.as_ref() {
            return Err(Error::shape(
                op,
                format!(
                    "start index {d} must be an i32 or i64 scalar of the first one's type, got {t}"
                ),
            ));
        }
    }
    Ok(())
}

pub(crate) fn check_slice(
    g: &Graph,
    x: Value,
    starts: &[Value],
    sizes: &[usize],
) -> Result<TensorType> {
    let t = g.ty(x);
    check_starts(g, "dynamic_slice", t, starts)?;
    if sizes.len() != t.rank() || sizes.iter().zip(t.dims()).any(|(s, d)| s > d) {
        return Err(Error::shape(
            "dynamic_slice",
            format!(
                "slice sizes {sizes:?} must give each of the {} dimensions of {t} a size no larger than it",
                t.rank()
            ),
        ));
    }
    Ok(TensorType::new(t.dtype, sizes.to_vec()))
}

pub(crate) fn check_update(
    g: &Graph,
    x: Value,
    update: Value,
    starts: &[Value],
) -> Result<TensorType> {
    let (t, u) = (g.ty(x), g.ty(update));
    check_starts(g, "dynamic_update_slice", t, starts)?;
    let fits = u.rank() == t.rank() && u.dims().iter().zip(t.dims()).all(|(a, b)| a <= b);
    if u.dtype != t.dtype || !fits {
        return Err(Error::shape(
            "dynamic_update_slice",
            format!("update {u} must have the element type and rank of {t} and fit inside it"),
        ));
    }
    Ok(t.clone())
}

/// The slice's cotangent goes back to the window it came from (the same clamped
/// position); the rest of the operand gets zeros.
pub(crate) fn vjp_slice(
    g: &mut Graph,
    x: Value,
    starts: &[Value],
    ct: Value,
) -> Result<Vec<Option<Value>>> {
    let zeros = g.zeros_like(x)?;
    let dx = g.dynamic_update_slice(zeros, ct, starts)?;
    Ok([Some(dx)]
        .into_iter()
        .chain(starts.iter().map(|_| None))
        .collect())
}

/// The window's elements were overwritten: the operand's cotangent is zero there and the
/// update's is the cotangent's window.
pub(crate) fn vjp_update(
    g: &mut Graph,
    update: Value,
    starts: &[Value],
    ct: Value,
) -> Result<Vec<Option<Value>>> {
    let sizes = g.ty(update).dims().to_vec();
    let zeros = g.zeros_like(update)?;
    let dx = g.dynamic_update_slice(ct, zeros, starts)?;
    let du = g.dynamic_slice(ct, starts, &sizes)?;
    Ok([Some(dx), Some(du)]
        .into_iter()
        .chain(starts.iter().map(|_| None))
        .collect())
}

/// The window's clamped start in each dimension: `clamp(start, 0, dim - size)`.
pub(crate) fn clamped(
    starts: &[In<'_>],
    dims: &[usize],
    sizes: &[usize],
) -> Result<[usize; MAX_RANK]> {
    let mut at = [0usize; MAX_RANK];
    for (d, s) in starts.iter().enumerate() {
        let v = match s.data {
            Data::I32(v) => v.first().map(|&i| i as i64),
            Data::I64(v) => v.first().copied(),
            other => return Err(super::unsupported("dynamic slice start", other.dtype())),
        }
        .ok_or_else(|| super::unsupported("dynamic slice start", s.data.dtype()))?;
        let room = (dims[d] - sizes[d]) as i64;
        at[d] = v.clamp(0, room) as usize;
    }
    Ok(at)
}

pub(crate) fn native_slice(
    x: In<'_>,
    starts: &[In<'_>],
    out_ty: &TensorType,
    out: DataMut<'_>,
) -> Result<()> {
    let (dims, sizes) = (x.ty.dims(), out_ty.dims());
    let at = clamped(starts, dims, sizes)?;
    let xs = strided::strides(dims);
    let base: isize = (0..dims.len()).map(|d| at[d] as isize * xs[d]).sum();
    with_same!("dynamic_slice", x.data, out, |a, o| {
        strided::gather(a, base, &xs[..dims.len()], sizes, o)
    });
    Ok(())
}

pub(crate) fn native_update(
    x: In<'_>,
    update: In<'_>,
    starts: &[In<'_>],
    out: DataMut<'_>,
) -> Result<()> {
    let (dims, sizes) = (x.ty.dims(), update.ty.dims());
    let at = clamped(starts, dims, sizes)?;
    let xs = strided::strides(dims);
    let base: usize = (0..dims.len()).map(|d| at[d] * xs[d] as usize).sum();
    with_same!("dynamic_update_slice", x.data, out, |a, o| {
        o.copy_from_slice(a);
        write_window(o, base, &xs[..dims.len()], sizes, update.data)
    })
}

/// `native_update` where the operand already lies in `out` (of type `x`): only the
/// window is written (the planner's in-place update, when nothing reads the operand
/// afterwards).
pub(crate) fn native_update_in_place(
    x: &TensorType,
    update: In<'_>,
    starts: &[In<'_>],
    out: DataMut<'_>,
) -> Result<()> {
    let (dims, sizes) = (x.dims(), update.ty.dims());
    let at = clamped(starts, dims, sizes)?;
    let xs = strided::strides(dims);
    let base: usize = (0..dims.len()).map(|d| at[d] * xs[d] as usize).sum();
    with_same!("dynamic_update_slice", update.data, out, |_u, o| {
        write_window(o, base, &xs[..dims.len()], sizes, update.data)
    })
}

/// Writes `update` (of dims `sizes`, row-major) into `out` from offset `base`, with `out`'s
/// strides `strides`: one contiguous copy per row of the update.
fn write_window<T: Elem>(
    out: &mut [T],
    base: usize,
    strides: &[isize],
    sizes: &[usize],
    update: Data<'_>,
) -> Result<()> {
    let u = T::of(update)
        .ok_or_else(|| type_mismatch("dynamic_update_slice", update.dtype(), update.dtype()))?;
    let Some((&inner, outer)) = sizes.split_last() else {
        // A scalar operand: the window is the whole of it.
        if let (Some(o), Some(&v)) = (out.first_mut(), u.first()) {
            *o = v;
        }
        return Ok(());
    };
    if inner == 0 || u.is_empty() {
        return Ok(());
    }
    let mut idx = [0usize; MAX_RANK];
    for row in u.chunks_exact(inner) {
        let at = base
            + (0..outer.len())
                .map(|d| idx[d] * strides[d] as usize)
                .sum::<usize>();
        out[at..at + inner].copy_from_slice(row);
        for d in (0..outer.len()).rev() {
            idx[d] += 1;
            if idx[d] < outer[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(())
}

// ---- StableHLO lowering

use crate::hlo::i64_array;
use crate::ops::Emitter;

pub(crate) fn lower_slice(
    e: &mut Emitter<'_>,
    x: Value,
    starts: &[Value],
    sizes: &[usize],
    ty: &TensorType,
) -> String {
    let mut names = vec![e.name(x)];
    let mut types = vec![e.ty(x).mlir()];
    for &s in starts {
        names.push(e.name(s));
        types.push(e.ty(s).mlir());
    }
    // Through the shared printer: a rank-0 operand has no sizes, and MLIR spells the empty
    // array `array<i64>` (`array<i64: >` does not parse).
    e.emit(format!(
        "\"stablehlo.dynamic_slice\"({}) {{slice_sizes = {}}} : ({}) -> {}",
        names.join(", "),
        i64_array(sizes),
        types.join(", "),
        ty.mlir()
    ))
}

pub(crate) fn lower_update(
    e: &mut Emitter<'_>,
    x: Value,
    update: Value,
    starts: &[Value],
    ty: &TensorType,
) -> String {
    let mut names = vec![e.name(x), e.name(update)];
    let mut types = vec![e.ty(x).mlir(), e.ty(update).mlir()];
    for &s in starts {
        names.push(e.name(s));
        types.push(e.ty(s).mlir());
    }
    e.emit(format!(
        "\"stablehlo.dynamic_update_slice\"({}) : ({}) -> {}",
        names.join(", "),
        types.join(", "),
        ty.mlir()
    ))
}
