//! A convolution computed inside the bias and ReLU max pooling that alone reads it.
//!
//! After `bias_relu_pool`, a network's `Conv2D(relu)` → `MaxPooling2D` is a convolution
//! whose output only the fused pooling reads: the convolution writes one of the network's
//! largest activations and the pooling reads it straight back, two memory-bound passes.
//! The planner gives such a pooling the convolution's operands instead
//! (`Fused::ConvPool`), and its kernel computes the convolution a part at a time in cache
//! and pools each part at once (`ops::reduce_window::native_recording_conv_bias_relu`):
//! a band of rows by the direct kernel (a first layer: few input features), or a tile by
//! Winograd's forward form (many features, windows inside the tiles). The convolution's
//! node is left dead. The parts are the kernel's own, bit for bit, pooled by the same
//! code, so like the other fusions this is an identity of the ops, whatever produced them.
//!
//! The fused gradient reads only the cotangent and the recorded index (`Fused::reads`),
//! so a training step's convolution output has no other reader either.

use super::bias_relu_pool::Fused;
use crate::ir::{ConvParams, Node, Op, Value};
use crate::ops::convolution::pooled_forward;
use crate::ops::reduce_window::conv_bias_relu_fusable;

/// Turns each fused pooling of a convolution's output that nothing else reads
/// (nor is it a graph output) into one that computes the convolution itself. A
/// convolution node that `conv_grad` made a kernel gradient (`kernel_grads`) is not the
/// convolution of its operands and stays as it is.
pub(crate) fn rewrite(
    nodes: &[Node],
    outputs: &[Value],
    kernel_grads: &[Option<ConvParams>],
    fused: &mut [Option<Fused>],
) {
    #[cfg(test)]
    if super::testing::conv_pool_disabled() {
        return;
    }
    let n = nodes.len();
    let reads = |i: usize, fused: &[Option<Fused>]| match &fused[i] {
        Some(f) => f.reads(&nodes[i].op),
        None => nodes[i].op.operands(),
    };
    let (live, is_output) = super::bias_relu_pool::liveness(n, outputs, |i| reads(i, fused));
    // Live readers of each value (each counted once).
    let mut readers = vec![0usize; n];
    for i in (0..n).filter(|&i| live[i]) {
        let mut vs = reads(i, fused);
        vs.sort_unstable_by_key(|v| v.index());
        vs.dedup();
        for v in vs {
            readers[v.index()] += 1;
        }
    }
    for p in (0..n).filter(|&p| live[p]) {
        let (bias, f) = match &fused[p] {
            Some(Fused::Pool { bias, f }) => (*bias, f.clone()),
            _ => continue,
        };
        let Op::ReduceWindow { x, window, .. } = &nodes[p].op else {
            continue;
        };
        let xi = x.index();
        if is_output[xi] || readers[xi] != 1 || kernel_grads.get(xi).is_none_or(|k| k.is_some()) {
            continue;
        }
        let Op::Convolution { lhs, rhs, params } = &nodes[xi].op else {
            continue;
        };
        let ty = |v: &Value| &nodes[v.index()].ty;
        let Some(conv) = pooled_forward(ty(lhs), ty(rhs), params, ty(x)) else {
            continue;
        };
        if !conv_bias_relu_fusable(&conv, &nodes[p].ty, window) {
            continue;
        }
        fused[p] = Some(Fused::ConvPool {
            image: *lhs,
            kernel: *rhs,
            bias,
            f,
            conv,
        });
    }
}
