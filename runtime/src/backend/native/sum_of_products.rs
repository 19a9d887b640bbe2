//! A sum over leading axes of a product, as one pass that never writes the product.
//!
//! The gradient of a per-channel scale (batch normalization's `x · inv`, any
//! `x · broadcast(w)`) is `reduce(sum, ct · x)` over every axis but the channels': the
//! product, as large as the activation, is written by one pass and read back by the next.
//! The planner recognises a sum over leading axes whose operand is a product that nothing
//! else reads, and rewrites it to the `dot_general` it equals (the leading axes
//! contracted, the rest batch), which the executor runs as
//! `ops::reduce::native_sum_of_products`: the same products, summed in the same parts
//! and order as the reduction, so the same bits. The product's node is left dead.

use super::bias_relu_pool::Fused;
use crate::ir::{BinaryOp, DotDims, FusionClass, Node, Op, ReduceOp, Source, Value};

/// For each node: the number of leading axes summed when the node is such a sum, whose op
/// has been rewritten to `DotGeneral { lhs: x, rhs: y, .. }`.
pub(super) fn rewrite(
    nodes: &mut [Node],
    outputs: &[Value],
    fused: &[Option<Fused>],
) -> Vec<Option<usize>> {
    let n = nodes.len();
    let mut found = vec![None; n];
    #[cfg(test)]
    if super::testing::sum_of_products_disabled() {
        return found;
    }
    let reads = |nodes: &[Node], i: usize| match &fused[i] {
        Some(f) => f.reads(&nodes[i].op),
        None => nodes[i].op.operands(),
    };
    let (live, is_output) = super::bias_relu_pool::liveness(n, outputs, |i| reads(nodes, i));
    // Live readers of each value, a graph output counting as one.
    let mut readers: Vec<usize> = is_output.iter().map(|&o| usize::from(o)).collect();
    for i in (0..n).filter(|&i| live[i]) {
        for v in reads(nodes, i) {
            readers[v.index()] += 1;
        }
    }
    for i in (0..n).filter(|&i| live[i]) {
        let Some((x, y, lead)) = matches(nodes, &readers, fused, i) else {
            continue;
        };
        let rank = nodes[x.index()].ty.rank();
        nodes[i].op = Op::DotGeneral {
            lhs: x,
            rhs: y,
            dims: DotDims {
                lhs_batch: (lead..rank).collect(),
                rhs_batch: (lead..rank).collect(),
                lhs_contract: (0..lead).collect(),
                rhs_contract: (0..lead).collect(),
            },
        };
        found[i] = Some(lead);
    }
    found
}

/// Whether `v` is in memory whatever its readers are: a kernel's result or an argument.
/// (An elementwise value read here instead of inside its fused group would have to be
/// written out for this reader alone.) Run after the other rewrites, so that a product
/// they made a kernel (a pooling's gated gradient) counts as one.
fn materialized(nodes: &[Node], v: Value) -> bool {
    matches!(
        nodes[v.index()].op.fusion(),
        FusionClass::Kernel | FusionClass::Source(Source::Argument(_))
    )
}

/// `reduce(sum, x · y, [0, .., lead))` of floats, `x · y` read by nothing else: `(x, y,
/// lead)`.
fn matches(
    nodes: &[Node],
    readers: &[usize],
    fused: &[Option<Fused>],
    i: usize,
) -> Option<(Value, Value, usize)> {
    if fused[i].is_some() {
        return None;
    }
    let Op::Reduce {
        op: ReduceOp::Sum,
        x: m,
        axes,
    } = &nodes[i].op
    else {
        return None;
    };
    let lead = axes.len();
    if lead == 0 || axes.iter().enumerate().any(|(k, &a)| a != k) || readers[m.index()] != 1 {
        return None;
    }
    let Op::Binary {
        op: BinaryOp::Mul,
        lhs,
        rhs,
    } = nodes[m.index()].op
    else {
        return None;
    };
    let ty = &nodes[m.index()].ty;
    let float = matches!(ty.dtype, crate::ir::DType::F32 | crate::ir::DType::F64);
    let plain = |v: Value| nodes[v.index()].ty == *ty && materialized(nodes, v);
    (float && plain(lhs) && plain(rhs)).then_some((lhs, rhs, lead))
}
