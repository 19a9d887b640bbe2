//! Cross-replica ops for data parallelism: `all_reduce_sum` and `replica_id`.

use crate::backend::native::data::{Data, DataMut};
use crate::backend::native::KernelCtx;
use crate::ir::{DType, Graph, TensorType, Value};
use crate::{Error, Result};

pub(crate) fn check_all_reduce(g: &Graph, x: Value) -> Result<TensorType> {
    let t = g.ty(x);
    if !t.dtype.is_numeric() {
        return Err(Error::shape(
            "all_reduce_sum",
            format!("operand must be f32, f64, i32 or i64, got {t}"),
        ));
    }
    Ok(t.clone())
}

pub(crate) fn replica_id_type() -> TensorType {
    TensorType::scalar(DType::I32)
}

/// Every replica's output is the sum over replicas, so each replica's cotangent of its
/// input is the sum of all replicas' cotangents.
pub(crate) fn vjp_all_reduce(g: &mut Graph, ct: Value) -> Result<Value> {
    g.all_reduce_sum(ct)
}

pub(crate) fn native_all_reduce(x: Data<'_>, out: DataMut<'_>, ctx: &mut KernelCtx) -> Result<()> {
    ctx.replica.all_reduce_sum(x, out)
}

pub(crate) fn native_replica_id(out: DataMut<'_>, ctx: &mut KernelCtx) -> Result<()> {
    match out {
        DataMut::I32(o) => {
            o[0] = ctx.replica.id as i32;
            Ok(())
        }
        o => Err(super::unsupported("replica_id", o.dtype())),
    }
}
