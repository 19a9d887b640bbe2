//! A convolution's kernel gradient as one native kernel.
//!
//! The IR has one convolution layout (NHWC input, HWIO kernel), so the autodiff writes the
//! kernel gradient as a convolution of the transposed input (features as batch, batch as
//! features) with the transposed cotangent as kernel, transposed back
//! (`ops::convolution::vjp`). On the native backend those three transposes move every
//! activation of the layer through memory twice. The planner recognises the pattern and
//! computes the same value from the untransposed input and cotangent, as the forward's
//! patches transposed times the cotangent (`ops::convolution::native_kernel_grad`). It is
//! an identity of the ops, not a guess about where they came from: any graph of this
//! shape is computed exactly this way, and the transposes it no longer reads are dead.

use crate::ir::{ConvParams, Node, Op, Value};

/// Kernel gradients with shorter patch rows keep the transposed form (see `matches`).
const MIN_PATCH_ROW: usize = 32;

/// For each node: the forward parameters when the node is such a kernel gradient, whose
/// op has been rewritten to `Convolution { lhs: input, rhs: cotangent, .. }` (the pattern's
/// parameters kept, for printing).
pub(super) fn rewrite(nodes: &mut [Node]) -> Vec<Option<ConvParams>> {
    let mut found = vec![None; nodes.len()];
    for i in 0..nodes.len() {
        let Some((x, ct, kg)) = matches(nodes, i) else {
            continue;
        };
        found[i] = Some(crate::ops::convolution::forward_of_kernel_grad(&kg));
        nodes[i].op = Op::Convolution {
            lhs: x,
            rhs: ct,
            params: kg,
        };
    }
    found
}

/// `transpose(convolution(transpose(x), transpose(ct), kg), back)` with the permutations
/// of the kernel gradient and one group: `(x, ct, kg)`.
fn matches(nodes: &[Node], i: usize) -> Option<(Value, Value, ConvParams)> {
    let Op::Transpose { x: conv, perm } = &nodes[i].op else {
        return None;
    };
    let Op::Convolution { lhs, rhs, params } = &nodes[conv.index()].op else {
        return None;
    };
    let out = &nodes[i].ty;
    let n = out.rank().checked_sub(2)?;
    // Patch rows of the kernel's positions times its input features: with very few (a
    // first layer on one channel: 9) the product from the untransposed operands is too
    // shallow for the matrix kernel, and the transposed form, deep along the batch, is
    // faster in spite of its transposes (measured on the convnet of the `cnn` workload).
    let patch_row: usize = out.dims()[..=n].iter().product();
    if params.feature_groups != 1 || patch_row < MIN_PATCH_ROW {
        return None;
    }
    // [C, k…, Co] -> [k…, C, Co]
    let back: Vec<usize> = (1..=n).chain([0, n + 1]).collect();
    // x [N, s…, C] -> [C, s…, N]
    let xperm: Vec<usize> = [n + 1].into_iter().chain(1..=n).chain([0]).collect();
    // ct [N, o…, Co] -> [o…, N, Co]
    let cperm = &back;
    let (Op::Transpose { x, perm: xp }, Op::Transpose { x: ct, perm: cp }) =
        (&nodes[lhs.index()].op, &nodes[rhs.index()].op)
    else {
        return None;
    };
    (*perm == back && *xp == xperm && cp == cperm).then(|| (*x, *ct, params.clone()))
}
