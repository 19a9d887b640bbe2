//! `transpose`: shape rule, gradient, native kernel.

use super::In;
use crate::ir::{Graph, TensorType, Value, MAX_RANK};
use crate::kernel::data::{with_same, DataMut};
use crate::kernel::strided;
use crate::{Error, Result};

pub(crate) fn check(g: &Graph, x: Value, perm: &[usize]) -> Result<TensorType> {
    let t = g.ty(x);
    let mut seen = vec![false; t.rank()];
    let ok = perm.len() == t.rank()
        && perm
            .iter()
            .all(|&p| p < t.rank() && !std::mem::replace(&mut seen[p], true));
    if !ok {
        return Err(Error::shape(
            "transpose",
            format!(
                "{perm:?} is not a permutation of the {} dimensions of {t}",
                t.rank()
            ),
        ));
    }
    let dims: Vec<usize> = perm.iter().map(|&p| t.dims()[p]).collect();
    Ok(TensorType::new(t.dtype, dims))
}

pub(crate) fn vjp(g: &mut Graph, perm: &[usize], ct: Value) -> Result<Value> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    g.transpose(ct, &inv)
}

pub(crate) fn native(x: In<'_>, perm: &[usize], out: DataMut<'_>) -> Result<()> {
    let xs = strided::strides(x.ty.dims());
    let mut st: strided::Strides = [0; MAX_RANK];
    let mut od = [0usize; MAX_RANK];
    for (i, &p) in perm.iter().enumerate() {
        st[i] = xs[p];
        od[i] = x.ty.dims()[p];
    }
    let r = perm.len();
    with_same!("transpose", x.data, out, |a, o| {
        strided::permute(a, &st[..r], &od[..r], o)
    });
    Ok(())
}

// ---- StableHLO lowering

use crate::hlo::list;
use crate::ops::Emitter;

pub(crate) fn lower(e: &mut Emitter<'_>, x: Value, perm: &[usize], ty: &TensorType) -> String {
    let (n, from) = (e.name(x), e.ty(x).mlir());
    e.emit(format!(
        "stablehlo.transpose {n}, dims = {} : ({from}) -> {}",
        list(perm),
        ty.mlir()
    ))
}
