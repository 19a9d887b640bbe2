//! The primitives' rules, one module per primitive (or family of elementwise ones).
//!
//! Each module holds, side by side: the shape rule (`check`), the reverse-mode gradient
//! rule (`vjp`, emitting IR so gradients run on every backend), the native CPU kernel
//! (`native`), and the StableHLO lowering. This file only dispatches; its matches over
//! [`Op`] have no wildcard arm, so a new primitive makes the compiler list what is missing.

pub(crate) mod binary;
pub(crate) mod broadcast;
pub(crate) mod collective;
pub(crate) mod compare;
pub(crate) mod concatenate;
pub(crate) mod conv_native;
mod conv_winograd;
pub(crate) mod convert;
pub(crate) mod convolution;
pub(crate) mod dot_general;
pub(crate) mod dynamic_slice;
mod emitter;
pub(crate) mod gather;
pub(crate) mod moments;
pub(crate) mod pad;
pub(crate) mod pool2d;
pub(crate) mod random;
pub(crate) mod reduce;
pub(crate) mod reduce_window;
pub(crate) mod reshape;
pub(crate) mod reverse;
pub(crate) mod slice;
pub(crate) mod source;
pub(crate) mod stop_gradient;
pub(crate) mod transpose;
pub(crate) mod unary;
pub(crate) mod while_loop;

pub(crate) use emitter::Emitter;

use crate::ir::{Graph, Op, TensorType, Value};
use crate::kernel::data::{Data, DataMut};
use crate::kernel::KernelCtx;
use crate::{Error, Result};

/// Checks `op`'s operands against its shape rule and returns its result type. `declared`
/// is the result type for ops whose type the operands do not imply (parameter, iota,
/// random_uniform); for the others, if given, it must equal the inferred type.
pub(crate) fn check(g: &Graph, op: &Op, declared: Option<&TensorType>) -> Result<TensorType> {
    let inferred = match op {
        Op::Parameter { .. } => return source::check_declared(op, declared),
        Op::Iota { dim } => return source::check_iota(*dim, declared),
        Op::RandomUniform { key } => return random::check(g, *key, declared),
        Op::Constant { value } => value.ty(),
        Op::ReplicaId => collective::replica_id_type(),
        Op::Unary { op, x } => unary::check(g, *op, *x)?,
        Op::Binary { op, lhs, rhs } => binary::check(g, *op, *lhs, *rhs)?,
        Op::Compare { lhs, rhs, .. } => compare::check_compare(g, *lhs, *rhs)?,
        Op::Select {
            pred,
            on_true,
            on_false,
        } => compare::check_select(g, *pred, *on_true, *on_false)?,
        Op::Convert { x, to } => g.ty(*x).with_dtype(*to),
        Op::BroadcastInDim { x, shape, dims } => broadcast::check(g, *x, shape, dims)?,
        Op::Reshape { x, shape } => reshape::check(g, *x, shape)?,
        Op::StopGradient { x } => g.ty(*x).clone(),
        Op::Transpose { x, perm } => transpose::check(g, *x, perm)?,
        Op::Reverse { x, axes } => reverse::check(g, *x, axes)?,
        Op::Slice {
            x,
            start,
            limit,
            stride,
        } => slice::check(g, *x, start, limit, stride)?,
        Op::DynamicSlice { x, starts, sizes } => dynamic_slice::check_slice(g, *x, starts, sizes)?,
        Op::DynamicUpdateSlice { x, update, starts } => {
            dynamic_slice::check_update(g, *x, *update, starts)?
        }
        Op::Concatenate { xs, axis } => concatenate::check(g, xs, *axis)?,
        Op::Pad {
            x,
            value,
            low,
            high,
            interior,
        } => pad::check(g, *x, *value, low, high, interior)?,
        Op::DotGeneral { lhs, rhs, dims } => dot_general::check(g, *lhs, *rhs, dims)?,
        Op::Reduce { op, x, axes } => reduce::check(g, *op, *x, axes)?,
        Op::Moments { x, axes } => moments::check(g, *x, axes)?,
        Op::ReduceWindow { op, x, window } => reduce_window::check(g, *op, *x, window)?,
        Op::SelectAndScatterAdd {
            op,
            source,
            operand,
            window,
        } => reduce_window::check_select_and_scatter(g, *op, *source, *operand, window)?,
        Op::Convolution { lhs, rhs, params } => convolution::check(g, *lhs, *rhs, params)?,
        Op::Gather {
            operand,
            indices,
            axis,
            batch_dims,
        } => gather::check_gather(g, *operand, *indices, *axis, *batch_dims)?,
        Op::ScatterAdd {
            operand,
            indices,
            updates,
            axis,
            batch_dims,
        } => gather::check_scatter(g, *operand, *indices, *updates, *axis, *batch_dims)?,
        Op::AllReduceSum { x } => collective::check_all_reduce(g, *x)?,
        Op::While {
            init,
            result,
            cond,
            body,
            scan,
        } => while_loop::check(g, init, *result, cond, body, scan.as_ref())?,
    };
    if inferred.rank() > crate::ir::MAX_RANK {
        return Err(Error::shape(
            op.name(),
            format!(
                "result {inferred} has rank above the maximum {}",
                crate::ir::MAX_RANK
            ),
        ));
    }
    // Every value a graph holds fits in memory's arithmetic: its element count and bytes
    // are computed unchecked from here on (planners, kernels, lowerings).
    crate::memory::element_count(|| format!("{}: result {inferred}", op.name()), &inferred)?;
    if let Some(d) = declared {
        if d != &inferred {
            return Err(Error::shape(
                op.name(),
                format!("declared result type {d} differs from the rule's {inferred}"),
            ));
        }
    }
    Ok(inferred)
}

/// The cotangent of each operand of node `y` given the cotangent `ct` of its result, as
/// new nodes of `g`. `None` means "no gradient flows" (integer operands, zero rules).
pub(crate) fn vjp(g: &mut Graph, y: Value, ct: Value) -> Result<Vec<Option<Value>>> {
    let op = g.node(y).op.clone();
    Ok(match op {
        Op::Parameter { .. } | Op::Constant { .. } | Op::Iota { .. } | Op::ReplicaId => vec![],
        Op::Unary { op, x } => vec![Some(unary::vjp(g, op, x, y, ct)?)],
        Op::Binary { op, lhs, rhs } => {
            let (a, b) = binary::vjp(g, op, lhs, rhs, y, ct)?;
            vec![Some(a), Some(b)]
        }
        Op::Compare { .. } => vec![None, None],
        Op::Select {
            pred,
            on_true,
            on_false,
        } => compare::vjp_select(g, pred, on_true, on_false, ct)?,
        Op::Convert { x, .. } => vec![convert::vjp(g, x, ct)?],
        Op::BroadcastInDim { x, dims, .. } => vec![Some(broadcast::vjp(g, x, &dims, ct)?)],
        Op::Reshape { x, .. } => vec![Some(reshape::vjp(g, x, ct)?)],
        Op::StopGradient { .. } => vec![None],
        Op::Transpose { perm, .. } => vec![Some(transpose::vjp(g, &perm, ct)?)],
        Op::Reverse { axes, .. } => vec![Some(reverse::vjp(g, &axes, ct)?)],
        Op::Slice {
            x, start, stride, ..
        } => vec![Some(slice::vjp(g, x, &start, &stride, ct)?)],
        Op::DynamicSlice { x, starts, .. } => dynamic_slice::vjp_slice(g, x, &starts, ct)?,
        Op::DynamicUpdateSlice { update, starts, .. } => {
            dynamic_slice::vjp_update(g, update, &starts, ct)?
        }
        Op::Concatenate { xs, axis } => concatenate::vjp(g, &xs, axis, ct)?,
        Op::Pad {
            x,
            low,
            high,
            interior,
            ..
        } => pad::vjp(g, x, &low, &high, &interior, ct)?,
        Op::DotGeneral { lhs, rhs, dims } => {
            let (a, b) = dot_general::vjp(g, lhs, rhs, &dims, ct)?;
            vec![Some(a), Some(b)]
        }
        Op::Reduce { op, x, axes } => vec![Some(reduce::vjp(g, op, x, &axes, y, ct)?)],
        Op::Moments { x, axes } => vec![Some(moments::vjp(g, x, &axes, y, ct)?)],
        Op::ReduceWindow { op, x, window } => {
            vec![Some(reduce_window::vjp(g, op, x, &window, ct)?)]
        }
        Op::SelectAndScatterAdd { .. } => {
            return Err(Error::Autodiff {
                message: "select_and_scatter_add (the gradient of max pooling) has no \
                          gradient rule: second derivatives of pooling are not supported"
                    .into(),
            })
        }
        Op::Convolution { lhs, rhs, params } => {
            let (a, b) = convolution::vjp(g, lhs, rhs, &params, ct)?;
            vec![Some(a), Some(b)]
        }
        Op::Gather {
            operand,
            indices,
            axis,
            batch_dims,
        } => gather::vjp_gather(g, operand, indices, axis, batch_dims, ct)?,
        Op::ScatterAdd {
            indices,
            axis,
            batch_dims,
            ..
        } => gather::vjp_scatter(g, indices, axis, batch_dims, ct)?,
        Op::RandomUniform { .. } => vec![None],
        Op::AllReduceSum { .. } => vec![Some(collective::vjp_all_reduce(g, ct)?)],
        Op::While { .. } => while_loop::vjp()?,
    })
}

/// An operand as a native kernel sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct In<'a> {
    pub data: Data<'a>,
    pub ty: &'a TensorType,
}

/// Runs one node on the native backend: reads `ins` (the node's operands in order) and
/// writes every element of `out`.
pub(crate) fn native(
    op: &Op,
    ins: &[In<'_>],
    out: DataMut<'_>,
    out_ty: &TensorType,
    ctx: &mut KernelCtx,
) -> Result<()> {
    match op {
        Op::Parameter { .. } => Err(Error::Backend {
            backend: "native",
            message: "parameters are bound, not computed".into(),
        }),
        Op::Constant { value } => source::native_constant(value, out),
        Op::Iota { dim } => source::native_iota(*dim, out_ty, out),
        Op::Unary { op, .. } => unary::native(*op, ins[0].data, out),
        Op::Binary { op, .. } => binary::native(*op, ins[0].data, ins[1].data, out),
        Op::Compare { cmp, .. } => compare::native_compare(*cmp, ins[0].data, ins[1].data, out),
        Op::Select { .. } => compare::native_select(ins[0].data, ins[1].data, ins[2].data, out),
        Op::Convert { .. } => convert::native(ins[0].data, out),
        Op::BroadcastInDim { dims, .. } => broadcast::native(ins[0], dims, out_ty, out),
        Op::Reshape { .. } => reshape::native(ins[0].data, out),
        Op::StopGradient { .. } => stop_gradient::native(ins[0].data, out),
        Op::Transpose { perm, .. } => transpose::native(ins[0], perm, out),
        Op::Reverse { axes, .. } => reverse::native(ins[0], axes, out),
        Op::Slice { start, stride, .. } => slice::native(ins[0], start, stride, out_ty, out),
        Op::DynamicSlice { .. } => dynamic_slice::native_slice(ins[0], &ins[1..], out_ty, out),
        Op::DynamicUpdateSlice { .. } => {
            dynamic_slice::native_update(ins[0], ins[1], &ins[2..], out)
        }
        Op::Concatenate { axis, .. } => concatenate::native(ins, *axis, out),
        Op::Pad { low, interior, .. } => {
            pad::native(ins[0], ins[1].data, low, interior, out_ty, out)
        }
        Op::DotGeneral { dims, .. } => dot_general::native(ins[0], ins[1], dims, out_ty, out, ctx),
        Op::Reduce { op, axes, .. } => reduce::native(*op, ins[0], axes, out),
        Op::Moments { axes, .. } => moments::native(ins[0], axes, out),
        Op::ReduceWindow { op, window, .. } => {
            reduce_window::native(*op, ins[0], window, out_ty, out)
        }
        Op::SelectAndScatterAdd { op, window, .. } => {
            reduce_window::native_select_and_scatter(*op, ins[0], ins[1], window, out)
        }
        Op::Convolution { params, .. } => {
            convolution::native(ins[0], ins[1], params, out_ty, out, ctx)
        }
        Op::Gather {
            axis, batch_dims, ..
        } => gather::native_gather(ins[0], ins[1], *axis, *batch_dims, out),
        Op::ScatterAdd {
            axis, batch_dims, ..
        } => gather::native_scatter(ins[0], ins[1], ins[2], *axis, *batch_dims, out),
        Op::RandomUniform { .. } => random::native(ins[0].data, out),
        Op::AllReduceSum { .. } => collective::native_all_reduce(ins[0].data, out, ctx),
        Op::ReplicaId => collective::native_replica_id(out, ctx),
        Op::While { .. } => while_loop::native(),
    }
}

/// The error for a dtype a kernel does not handle; unreachable for verified graphs.
pub(crate) fn unsupported(op: &str, d: crate::ir::DType) -> Error {
    Error::Backend {
        backend: "native",
        message: format!("{op} has no native kernel for element type {d}"),
    }
}

/// Shared shape-rule helper: axes must be distinct and in range.
pub(crate) fn check_axes(op: &'static str, axes: &[usize], rank: usize) -> Result<()> {
    let mut seen = vec![false; rank];
    for &a in axes {
        if a >= rank {
            return Err(Error::shape(
                op,
                format!("axis {a} out of range for rank {rank}"),
            ));
        }
        if seen[a] {
            return Err(Error::shape(op, format!("axis {a} listed twice")));
        }
        seen[a] = true;
    }
    Ok(())
}

// ---- StableHLO lowering

/// Prints node `v` (whose operands are already printed) as StableHLO into `e` and returns
/// the SSA name of its result.
pub(crate) fn lower(e: &mut Emitter<'_>, v: Value) -> Result<String> {
    let node = e.graph().node(v);
    let ty = &node.ty;
    Ok(match &node.op {
        Op::Parameter { index } => format!("%arg{index}"),
        Op::Constant { value } => source::lower_constant(e, value),
        Op::Iota { dim } => source::lower_iota(e, *dim, ty),
        Op::Unary { op, x } => unary::lower(e, *op, *x, ty),
        Op::Binary { op, lhs, rhs } => binary::lower(e, *op, *lhs, *rhs, ty),
        Op::Compare { cmp, lhs, rhs } => compare::lower_compare(e, *cmp, *lhs, *rhs),
        Op::Select {
            pred,
            on_true,
            on_false,
        } => compare::lower_select(e, *pred, *on_true, *on_false),
        Op::Convert { x, .. } => convert::lower(e, *x, ty),
        Op::BroadcastInDim { x, dims, .. } => broadcast::lower(e, *x, dims, ty),
        Op::Reshape { x, .. } => reshape::lower(e, *x, ty),
        Op::StopGradient { x } => stop_gradient::lower(e, *x),
        Op::Transpose { x, perm } => transpose::lower(e, *x, perm, ty),
        Op::Reverse { x, axes } => reverse::lower(e, *x, axes),
        Op::Slice {
            x,
            start,
            limit,
            stride,
        } => slice::lower(e, *x, start, limit, stride, ty),
        Op::DynamicSlice { x, starts, sizes } => {
            dynamic_slice::lower_slice(e, *x, starts, sizes, ty)
        }
        Op::DynamicUpdateSlice { x, update, starts } => {
            dynamic_slice::lower_update(e, *x, *update, starts, ty)
        }
        Op::Concatenate { xs, axis } => concatenate::lower(e, xs, *axis, ty),
        Op::Pad {
            x,
            value,
            low,
            high,
            interior,
        } => pad::lower(e, *x, *value, low, high, interior, ty),
        Op::DotGeneral { lhs, rhs, dims } => dot_general::lower(e, *lhs, *rhs, dims, ty),
        Op::Reduce { op, x, axes } => reduce::lower(e, *op, *x, axes, ty),
        Op::Moments { x, axes } => moments::lower(e, *x, axes, ty),
        Op::ReduceWindow { op, x, window } => reduce_window::lower(e, *op, *x, window, ty),
        Op::SelectAndScatterAdd {
            op,
            source,
            operand,
            window,
        } => reduce_window::lower_select_and_scatter(e, *op, *source, *operand, window, ty)?,
        Op::Convolution { lhs, rhs, params } => convolution::lower(e, *lhs, *rhs, params, ty),
        Op::Gather {
            operand,
            indices,
            axis,
            batch_dims,
        } => gather::lower_gather(e, *operand, *indices, *axis, *batch_dims, ty),
        Op::ScatterAdd {
            operand,
            indices,
            updates,
            axis,
            batch_dims,
        } => gather::lower_scatter(e, *operand, *indices, *updates, *axis, *batch_dims, ty),
        Op::RandomUniform { key } => random::lower(e, *key, ty)?,
        Op::AllReduceSum { x } => collective::lower_all_reduce(e, *x, ty),
        Op::ReplicaId => collective::lower_replica_id(e),
        Op::While {
            init,
            result,
            cond,
            body,
            ..
        } => while_loop::lower(e, v, init, *result, cond, body)?,
    })
}
