//! `reverse`: shape rule, gradient, native kernel.

use super::In;
use crate::ir::{Graph, TensorType, Value};
use crate::kernel::data::{with_same, DataMut};
use crate::kernel::strided;
use crate::Result;

pub(crate) fn check(g: &Graph, x: Value, axes: &[usize]) -> Result<TensorType> {
    let t = g.ty(x);
    super::check_axes("reverse", axes, t.rank())?;
    Ok(t.clone())
}

pub(crate) fn vjp(g: &mut Graph, axes: &[usize], ct: Value) -> Result<Value> {
    g.reverse(ct, axes)
}

pub(crate) fn native(x: In<'_>, axes: &[usize], out: DataMut<'_>) -> Result<()> {
    let dims = x.ty.dims();
    let mut st = strided::strides(dims);
    let mut base = 0isize;
    for &a in axes {
        base += (dims[a] as isize - 1).max(0) * st[a];
        st[a] = -st[a];
    }
    let r = dims.len();
    with_same!("reverse", x.data, out, |a, o| {
        strided::gather(a, base, &st[..r], dims, o)
    });
    Ok(())
}

// ---- StableHLO lowering

use crate::hlo::list;
use crate::ops::Emitter;

pub(crate) fn lower(e: &mut Emitter<'_>, x: Value, axes: &[usize]) -> String {
    let (n, t) = (e.name(x), e.ty(x).mlir());
    e.emit(format!(
        "stablehlo.reverse {n}, dims = {} : {t}",
        list(axes)
    ))
}
