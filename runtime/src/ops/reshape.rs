//! `reshape`: shape rule, gradient, native kernel.

use crate::ir::{Graph, Shape, TensorType, Value};
use crate::kernel::data::{with_same, Data, DataMut};
use crate::{Error, Result};

pub(crate) fn check(g: &Graph, x: Value, shape: &Shape) -> Result<TensorType> {
    let t = g.ty(x);
    // The target comes from the caller: its element count may overflow.
    let target = shape.checked_numel();
    if target != Some(t.numel()) {
        return Err(Error::shape(
            "reshape",
            format!(
                "cannot reshape {t} ({} elements) to {shape} ({} elements)",
                t.numel(),
                target.map_or_else(|| "more than 2^64".into(), |n| n.to_string())
            ),
        ));
    }
    Ok(TensorType::new(t.dtype, shape.clone()))
}

pub(crate) fn vjp(g: &mut Graph, x: Value, ct: Value) -> Result<Value> {
    let s = g.ty(x).shape.clone();
    g.reshape(ct, s)
}

/// Row-major data is unchanged by a reshape: a plain copy (the planner aliases instead
/// where it can).
pub(crate) fn native(x: Data<'_>, out: DataMut<'_>) -> Result<()> {
    with_same!("reshape", x, out, |a, o| o.copy_from_slice(a));
    Ok(())
}

// ---- StableHLO lowering

use crate::ops::Emitter;

pub(crate) fn lower(e: &mut Emitter<'_>, x: Value, ty: &TensorType) -> String {
    let (n, from) = (e.name(x), e.ty(x).mlir());
    e.reshape(&n, &from, &ty.mlir())
}
