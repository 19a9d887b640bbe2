//! `broadcast_in_dim`: shape rule, gradient, native kernel.

use super::In;
use crate::ir::{Graph, Shape, TensorType, Value};
use crate::kernel::data::{with_same, DataMut};
use crate::kernel::strided;
use crate::{Error, Result};

/// `dims[i]` is where operand dimension `i` lands; they are strictly increasing (so a
/// broadcast never transposes), and each operand dimension is 1 or the result's size.
pub(crate) fn check(g: &Graph, x: Value, shape: &Shape, dims: &[usize]) -> Result<TensorType> {
    let t = g.ty(x);
    let err = |m: String| Err(Error::shape("broadcast_in_dim", m));
    if dims.len() != t.rank() {
        return err(format!(
            "operand {t} has rank {} but {} broadcast dimensions were given",
            t.rank(),
            dims.len()
        ));
    }
    for (i, &d) in dims.iter().enumerate() {
        if d >= shape.rank() {
            return err(format!(
                "broadcast dimension {d} out of range for result shape {shape}"
            ));
        }
        if i > 0 && dims[i - 1] >= d {
            return err(format!(
                "broadcast dimensions {dims:?} must be strictly increasing"
            ));
        }
    }
    for (i, &d) in dims.iter().enumerate() {
        let (od, rd) = (t.dims()[i], shape.dims()[d]);
        if od != 1 && od != rd {
            return err(format!(
                "operand {t} dimension {i} (size {od}) cannot broadcast to size {rd} of {shape}"
            ));
        }
    }
    Ok(TensorType::new(t.dtype, shape.clone()))
}

/// Sum the cotangent over every broadcast dimension, then restore the operand's shape.
pub(crate) fn vjp(g: &mut Graph, x: Value, dims: &[usize], ct: Value) -> Result<Value> {
    let xs = g.ty(x).shape.clone();
    let rs = g.ty(ct).shape.clone();
    let mut axes: Vec<usize> = (0..rs.rank()).filter(|d| !dims.contains(d)).collect();
    for (i, &d) in dims.iter().enumerate() {
        if xs.dims()[i] == 1 && rs.dims()[d] != 1 {
            axes.push(d);
        }
    }
    axes.sort_unstable();
    let s = if axes.is_empty() {
        ct
    } else {
        g.sum(ct, &axes)?
    };
    if g.ty(s).shape == xs {
        Ok(s)
    } else {
        g.reshape(s, xs)
    }
}

pub(crate) fn native(
    x: In<'_>,
    dims: &[usize],
    out_ty: &TensorType,
    out: DataMut<'_>,
) -> Result<()> {
    let xs = strided::strides(x.ty.dims());
    let mut st: strided::Strides = [0; crate::ir::MAX_RANK];
    for (i, &d) in dims.iter().enumerate() {
        if x.ty.dims()[i] != 1 {
            st[d] = xs[i];
        }
    }
    let rank = out_ty.rank();
    with_same!("broadcast_in_dim", x.data, out, |a, o| {
        strided::gather(a, 0, &st[..rank], out_ty.dims(), o)
    });
    Ok(())
}

// ---- StableHLO lowering

use crate::hlo::list;
use crate::ops::Emitter;

pub(crate) fn lower(e: &mut Emitter<'_>, x: Value, dims: &[usize], ty: &TensorType) -> String {
    let (n, from) = (e.name(x), e.ty(x).mlir());
    e.emit(format!(
        "stablehlo.broadcast_in_dim {n}, dims = {} : ({from}) -> {}",
        list(dims),
        ty.mlir()
    ))
}
