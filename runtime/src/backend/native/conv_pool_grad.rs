//! A convolution's kernel, input and bias gradients from its pooling's cotangent.
//!
//! After `bias_relu_pool`, the gradient of `Conv2D(relu)` → `MaxPooling2D` is a fused
//! gradient that writes the convolution output's cotangent `dY` (as large as the
//! convolution's output) from the pooled cotangent `g` and the pooling's record; the
//! kernel gradient (`conv_grad`'s form), the bias gradient (`dY` summed over batch, rows
//! and columns) and, in a later layer, the input gradient (a convolution of `dY`) read it
//! straight back, though `dY` is zero but at one element per pooled output. Where all of
//! its readers can, the planner gives them `g` and the record instead
//! (`Fused::PooledKernelGrad`, `Fused::PooledInputGrad`, `Fused::PooledBiasGrad`), `dY`
//! is never written in full and its node is left dead:
//!
//! - a first layer's (few input features, the direct kernel; the image needs no
//!   gradient): the kernel gradient rebuilds `dY` a band of rows at a time in cache and
//!   runs the direct kernel gradient on each band
//!   (`ops::reduce_window::native_pooled_kernel_grad`);
//! - a later layer's on Winograd's tiles (many features; windows inside the tiles, an
//!   input gradient by the scatter form): the kernel gradient and the input gradient fill
//!   each tile of `dY` where they read it (`ops::pool2d::tile_grad`);
//! - the bias gradient adds the gated pooled cotangent.
//!
//! The results are deterministic (the same on any number of threads). The kernel
//! gradient is the unfused plan's bits where the two cut the batch's rows into the same
//! parts (the direct kernel's unfused parts follow the cores; Winograd's follow the
//! shapes, so there always), the input gradient is its bits; the bias gradient's sum runs
//! in another order, within rounding of the unfused plan's.

use super::bias_relu_pool::Fused;
use crate::ir::{ConvParams, Node, Op, ReduceOp, Value};
use crate::ops::reduce_window::{pooled_input_grad_fusable, pooled_kernel_grad_fusable};

/// Gives the kernel gradient (and the input and bias gradients, if there are) of each fused
/// pooling gradient that they alone read (and that is no graph output) that gradient's
/// pooled cotangent and record to compute from.
pub(crate) fn rewrite(
    nodes: &[Node],
    outputs: &[Value],
    kernel_grads: &[Option<ConvParams>],
    fused: &mut [Option<Fused>],
) {
    #[cfg(test)]
    if super::testing::conv_pool_grad_disabled() {
        return;
    }
    let n = nodes.len();
    let reads = |i: usize, fused: &[Option<Fused>]| match &fused[i] {
        Some(f) => f.reads(&nodes[i].op),
        None => nodes[i].op.operands(),
    };
    let (live, is_output) = super::bias_relu_pool::liveness(n, outputs, |i| reads(i, fused));
    // Live readers of each value (each counted once).
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in (0..n).filter(|&i| live[i]) {
        let mut vs = reads(i, fused);
        vs.sort_unstable_by_key(|v| v.index());
        vs.dedup();
        for v in vs {
            readers[v.index()].push(i);
        }
    }
    for g in (0..n).filter(|&g| live[g] && !is_output[g]) {
        let (pool, f) = match &fused[g] {
            Some(Fused::Gradient { pool, f }) => (*pool, f.clone()),
            _ => continue,
        };
        let Op::SelectAndScatterAdd { source, .. } = nodes[g].op else {
            continue;
        };
        let Some(found) = gradients(nodes, kernel_grads, fused, &readers[g], g) else {
            continue;
        };
        fused[found.kernel] = Some(Fused::PooledKernelGrad {
            pool,
            gradient: g,
            source,
            f: f.clone(),
        });
        if let Some(i) = found.input {
            fused[i] = Some(Fused::PooledInputGrad {
                pool,
                gradient: g,
                source,
                f: f.clone(),
            });
        }
        let bias = found.bias;
        if let Some(b) = bias {
            fused[b] = Some(Fused::PooledBiasGrad {
                pool,
                gradient: g,
                source,
                f,
            });
        }
    }
}

/// The readers of a fused gradient that compute from its pooled cotangent instead.
struct Readers {
    kernel: usize,
    input: Option<usize>,
    bias: Option<usize>,
}

/// The readers of the fused gradient `g`, when they are one kernel gradient of the
/// convolution whose output `g` is the cotangent of (in `conv_grad`'s form, of a
/// geometry the fused kernels take: see `pooled_kernel_grad_fusable`), at most one
/// convolution of `g` (the input gradient, by Winograd's scatter form: see
/// `pooled_input_grad_fusable`) and at most one bias gradient: those nodes.
fn gradients(
    nodes: &[Node],
    kernel_grads: &[Option<ConvParams>],
    fused: &[Option<Fused>],
    readers: &[usize],
    g: usize,
) -> Option<Readers> {
    let (mut kernel, mut input, mut bias) = (None, None, None);
    let y = &nodes[g].ty;
    let Op::SelectAndScatterAdd { source, window, .. } = &nodes[g].op else {
        return None;
    };
    let pooling = (y, window, &nodes[source.index()].ty);
    for &r in readers {
        if fused[r].is_some() {
            return None;
        }
        match &nodes[r].op {
            Op::Convolution { lhs, rhs, .. }
                if kernel.is_none() && rhs.index() == g && lhs.index() != g =>
            {
                let forward = kernel_grads[r].as_ref()?;
                let image = &nodes[lhs.index()].ty;
                if !pooled_kernel_grad_fusable(forward, image, pooling, &nodes[r].ty) {
                    return None;
                }
                kernel = Some(r);
            }
            Op::Convolution { lhs, rhs, params }
                if input.is_none()
                    && lhs.index() == g
                    && rhs.index() != g
                    && kernel_grads[r].is_none() =>
            {
                let k = &nodes[rhs.index()].ty;
                if !pooled_input_grad_fusable(pooling, k, params, &nodes[r].ty) {
                    return None;
                }
                input = Some(r);
            }
            Op::Reduce {
                op: ReduceOp::Sum,
                x,
                axes,
            } if bias.is_none()
                && x.index() == g
                && axes[..] == [0, 1, 2]
                && nodes[r].ty.dims() == &y.dims()[3..]
                && nodes[r].ty.dtype == y.dtype =>
            {
                bias = Some(r)
            }
            _ => return None,
        }
    }
    Some(Readers {
        kernel: kernel?,
        input,
        bias,
    })
}
