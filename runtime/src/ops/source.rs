//! Ops with no operands that produce data: parameter, constant, iota.

use crate::ir::{Op, TensorType, MAX_RANK};
use crate::kernel::data::{with_same, DataMut, Storage};
use crate::{Error, Result, Tensor};

/// A parameter's type is whatever it was declared with (within the rank limit).
pub(crate) fn check_declared(op: &Op, declared: Option<&TensorType>) -> Result<TensorType> {
    let ty = declared.ok_or_else(|| Error::shape(op.name(), "needs a declared result type"))?;
    if ty.rank() > MAX_RANK {
        return Err(Error::shape(
            op.name(),
            format!("type {ty} has rank above the maximum {MAX_RANK}"),
        ));
    }
    Ok(ty.clone())
}

/// Iota counts along `dim` of its declared numeric type.
pub(crate) fn check_iota(dim: usize, declared: Option<&TensorType>) -> Result<TensorType> {
    let ty = check_declared(&Op::Iota { dim }, declared)?;
    if dim >= ty.rank() {
        return Err(Error::shape(
            "iota",
            format!("dimension {dim} out of range for shape {}", ty.shape),
        ));
    }
    if !ty.dtype.is_numeric() {
        return Err(Error::shape(
            "iota",
            format!(
                "element type must be f32, f64, i32 or i64, got {}",
                ty.dtype
            ),
        ));
    }
    Ok(ty)
}

pub(crate) fn native_constant(value: &Tensor, out: DataMut<'_>) -> Result<()> {
    let s = Storage::from_tensor(value);
    with_same!("constant", s.data(), out, |a, o| o.copy_from_slice(a));
    Ok(())
}

pub(crate) fn native_iota(dim: usize, ty: &TensorType, out: DataMut<'_>) -> Result<()> {
    let dims = ty.dims();
    let inner: usize = dims[dim + 1..].iter().product();
    let n = dims[dim];
    // Element i has index (i / inner) % n along `dim`.
    macro_rules! fill {
        ($o:expr, $t:ty) => {
            for (i, v) in $o.iter_mut().enumerate() {
                *v = ((i / inner.max(1)) % n.max(1)) as $t;
            }
        };
    }
    match out {
        DataMut::F32(o) => fill!(o, f32),
        DataMut::F64(o) => fill!(o, f64),
        DataMut::I32(o) => fill!(o, i32),
        DataMut::I64(o) => fill!(o, i64),
        o => return Err(super::unsupported("iota", o.dtype())),
    }
    Ok(())
}

// ---- StableHLO lowering

use crate::hlo::tensor_literal;
use crate::ops::Emitter;

pub(crate) fn lower_constant(e: &mut Emitter<'_>, value: &Tensor) -> String {
    e.emit(format!(
        "stablehlo.constant {} : {}",
        tensor_literal(value),
        value.ty().mlir()
    ))
}

pub(crate) fn lower_iota(e: &mut Emitter<'_>, dim: usize, ty: &TensorType) -> String {
    e.emit(format!("stablehlo.iota dim = {dim} : {}", ty.mlir()))
}
