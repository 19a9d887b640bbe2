//! Cross-replica ops for data parallelism: `all_reduce_sum` and `replica_id`.

use crate::ir::{DType, Graph, TensorType, Value};
use crate::kernel::data::{Data, DataMut};
use crate::kernel::KernelCtx;
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

// ---- StableHLO lowering

use crate::ops::Emitter;

/// One group of every replica of the computation (one replica when compiled for a single
/// device, where the all-reduce is the identity).
pub(crate) fn lower_all_reduce(e: &mut Emitter<'_>, x: Value, ty: &TensorType) -> String {
    let n = e.num_replicas();
    let ids: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    let st = TensorType::scalar(ty.dtype).mlir();
    let region = e.combiner("add", &st, false);
    let (xn, t) = (e.name(x), ty.mlir());
    e.emit(format!(
        "\"stablehlo.all_reduce\"({xn}) ({region}) {{replica_groups = dense<[[{}]]> : tensor<1x{n}xi64>}} : ({t}) -> {t}",
        ids.join(", ")
    ))
}

pub(crate) fn lower_replica_id(e: &mut Emitter<'_>) -> String {
    let id = e.emit("stablehlo.replica_id : tensor<ui32>");
    e.convert(&id, "tensor<ui32>", "tensor<i32>")
}
