//! `concatenate`: shape rule, gradient, native kernel.

use super::In;
use crate::ir::{Graph, TensorType, Value};
use crate::kernel::data::{with_same, DataMut};
use crate::{Error, Result};

pub(crate) fn check(g: &Graph, xs: &[Value], axis: usize) -> Result<TensorType> {
    let first = g.ty(*xs
        .first()
        .ok_or_else(|| Error::shape("concatenate", "needs at least one operand"))?);
    if axis >= first.rank() {
        return Err(Error::shape(
            "concatenate",
            format!("axis {axis} out of range for {first}"),
        ));
    }
    let mut dims = first.dims().to_vec();
    dims[axis] = 0;
    for &x in xs {
        let t = g.ty(x);
        let same_other = t.rank() == first.rank()
            && (0..t.rank()).all(|d| d == axis || t.dims()[d] == first.dims()[d]);
        if t.dtype != first.dtype || !same_other {
            return Err(Error::shape(
                "concatenate",
                format!("operands must match except along axis {axis}: {first} and {t}"),
            ));
        }
        dims[axis] += t.dims()[axis];
    }
    Ok(TensorType::new(first.dtype, dims))
}

pub(crate) fn vjp(
    g: &mut Graph,
    xs: &[Value],
    axis: usize,
    ct: Value,
) -> Result<Vec<Option<Value>>> {
    let cd = g.ty(ct).dims().to_vec();
    let mut offset = 0;
    let mut out = Vec::with_capacity(xs.len());
    for &x in xs {
        let n = g.ty(x).dims()[axis];
        let mut start = vec![0; cd.len()];
        let mut limit = cd.clone();
        start[axis] = offset;
        limit[axis] = offset + n;
        out.push(Some(g.slice(ct, &start, &limit, &vec![1; cd.len()])?));
        offset += n;
    }
    Ok(out)
}

pub(crate) fn native(ins: &[In<'_>], axis: usize, mut out: DataMut<'_>) -> Result<()> {
    let Some(first) = ins.first() else {
        return Ok(());
    };
    let outer: usize = first.ty.dims()[..axis].iter().product();
    let inner: usize = first.ty.dims()[axis + 1..].iter().product();
    let total: usize = ins.iter().map(|x| x.ty.dims()[axis]).sum::<usize>() * inner;
    let mut col = 0;
    for x in ins {
        let w = x.ty.dims()[axis] * inner;
        with_same!("concatenate", x.data, out.reborrow(), |a, o| {
            for r in 0..outer {
                o[r * total + col..r * total + col + w].copy_from_slice(&a[r * w..(r + 1) * w]);
            }
        });
        col += w;
    }
    Ok(())
}

// ---- StableHLO lowering

use crate::ops::Emitter;

pub(crate) fn lower(e: &mut Emitter<'_>, xs: &[Value], axis: usize, ty: &TensorType) -> String {
    let names: Vec<String> = xs.iter().map(|&x| e.name(x)).collect();
    let types: Vec<String> = xs.iter().map(|&x| e.ty(x).mlir()).collect();
    e.emit(format!(
        "stablehlo.concatenate {}, dim = {axis} : ({}) -> {}",
        names.join(", "),
        types.join(", "),
        ty.mlir()
    ))
}
