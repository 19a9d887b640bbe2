//! Bias and ReLU fused into max pooling, and the ReLU's gradient into the pooling's.
//!
//! `Conv2D(relu)` then `MaxPooling2D` is `p = reduce_window(max, max(x + b, 0))` in the
//! IR, and the autodiff writes its gradient as the pooling's `select_and_scatter_add`
//! times the ReLU's `select(a > 0, 1, select(a == 0, ½, 0))` (`a = x + b`). Unfused, the
//! add and the max are a pass that writes two full-size tensors, the pooling reads one,
//! the gradient writes one and the gate reads two and writes one: memory-bound passes over
//! the largest activations of a convnet. The planner recognises the pattern and runs it
//! as two kernels: the pooling reads `x` and the bias and computes each element's
//! activation exactly as the unfused add and max do, recording per output the selected
//! window position and the gate's two comparisons of the selected element's `a`; the
//! gradient writes `x`'s cotangent straight from the pooling's cotangent and that record
//! (`ops::reduce_window::BiasReluPool`). Like `conv_grad`, an identity of the ops, bit for
//! bit, whatever produced them: the nodes absorbed are left dead.

use crate::ir::{
    BinaryOp, Comparison, FusionClass, Node, Op, ReduceOp, Source, TensorType, Value, Window,
};
use crate::ops::convolution::PooledConv;
use crate::ops::reduce_window::{bias_relu_fusable, BiasReluPool};

/// A node the rewrite gave a fused kernel.
#[derive(Clone, Debug)]
pub(crate) enum Fused {
    /// The pooling, rewritten to pool `x` (the add's other operand); it also reads `bias`
    /// (the broadcast's operand, one value per channel).
    Pool { bias: Value, f: BiasReluPool },
    /// A `Pool` whose `x` is a convolution of `image` by `kernel` that the pooling's
    /// kernel computes itself, a part at a time (see `conv_pool`): `x` is not computed,
    /// the node reads `image`, `kernel` and `bias`.
    ConvPool {
        image: Value,
        kernel: Value,
        bias: Value,
        f: BiasReluPool,
        conv: PooledConv,
    },
    /// The gated gradient (the product), rewritten to `select_and_scatter_add` over `x`,
    /// which reads the index its pooling (node `pool`) records.
    Gradient { pool: usize, f: BiasReluPool },
    /// A convolution's kernel gradient (`conv_grad`'s form: the image and the cotangent
    /// `dY`) where `dY` is a fused `Gradient` that only it and the other pooled
    /// gradients below read: computed from that gradient's pooled cotangent `source` and
    /// its pooling's record (see `conv_pool_grad`); reads the image and `source`.
    PooledKernelGrad {
        pool: usize,
        gradient: usize,
        source: Value,
        f: BiasReluPool,
    },
    /// A convolution of `dY` (by a kernel: the input gradient of the convolution whose
    /// output's cotangent `dY` is) beside a `PooledKernelGrad`, likewise: each tile of
    /// `dY` filled from `source` and the record where it is read (see `conv_pool_grad`);
    /// reads the kernel and `source`.
    PooledInputGrad {
        pool: usize,
        gradient: usize,
        source: Value,
        f: BiasReluPool,
    },
    /// The bias gradient (`dY` summed over all but its channels) beside a
    /// `PooledKernelGrad`, likewise; reads `source`.
    PooledBiasGrad {
        pool: usize,
        gradient: usize,
        source: Value,
        f: BiasReluPool,
    },
}

impl Fused {
    /// The values the node's kernel reads, its op being `op`: a fused pooling's operand
    /// (or the convolution's operands) and bias; a fused gradient's cotangent alone (the
    /// pooling's record stands for the operand, of which only the type is used); a
    /// gradient from the pooled cotangent, that cotangent and the convolution's other
    /// operand (the image, or the kernel).
    pub(crate) fn reads(&self, op: &Op) -> Vec<Value> {
        match (self, op) {
            (Fused::Pool { bias, .. }, _) => {
                let mut v = op.operands();
                v.push(*bias);
                v
            }
            (
                Fused::ConvPool {
                    image,
                    kernel,
                    bias,
                    ..
                },
                _,
            ) => vec![*image, *kernel, *bias],
            (Fused::Gradient { .. }, Op::SelectAndScatterAdd { source, .. }) => vec![*source],
            (Fused::Gradient { .. }, _) => op.operands(),
            (Fused::PooledKernelGrad { source, .. }, Op::Convolution { lhs, .. }) => {
                vec![*lhs, *source]
            }
            (Fused::PooledInputGrad { source, .. }, Op::Convolution { rhs, .. }) => {
                vec![*rhs, *source]
            }
            (
                Fused::PooledKernelGrad { source, .. }
                | Fused::PooledInputGrad { source, .. }
                | Fused::PooledBiasGrad { source, .. },
                _,
            ) => vec![*source],
        }
    }

    /// The pooling whose record the node reads, for a node that reads one.
    pub(crate) fn reads_index_of(&self) -> Option<usize> {
        match self {
            Fused::Gradient { pool, .. }
            | Fused::PooledKernelGrad { pool, .. }
            | Fused::PooledInputGrad { pool, .. }
            | Fused::PooledBiasGrad { pool, .. } => Some(*pool),
            Fused::Pool { .. } | Fused::ConvPool { .. } => None,
        }
    }

    /// Whether the node is a fused pooling (which records its index).
    pub(crate) fn is_pool(&self) -> bool {
        matches!(self, Fused::Pool { .. } | Fused::ConvPool { .. })
    }
}

/// Which of `n` nodes `outputs` need (through `reads(i)`, what node `i` reads), and which
/// are outputs themselves: what a planner rewrite may absorb is live and no output.
pub(super) fn liveness(
    n: usize,
    outputs: &[Value],
    reads: impl Fn(usize) -> Vec<Value>,
) -> (Vec<bool>, Vec<bool>) {
    let mut live = vec![false; n];
    let mut is_output = vec![false; n];
    for o in outputs {
        live[o.index()] = true;
        is_output[o.index()] = true;
    }
    for i in (0..n).rev() {
        if live[i] {
            for v in reads(i) {
                live[v.index()] = true;
            }
        }
    }
    (live, is_output)
}

/// Rewrites each pattern found among the nodes that `outputs` need; returns per node
/// what it became.
pub(crate) fn rewrite(nodes: &mut [Node], outputs: &[Value]) -> Vec<Option<Fused>> {
    let n = nodes.len();
    let mut found: Vec<Option<Fused>> = vec![None; n];
    #[cfg(test)]
    if super::testing::bias_relu_pool_disabled() {
        return found;
    }
    let (live, is_output) = liveness(n, outputs, |i| nodes[i].op.operands());
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in (0..n).filter(|&i| live[i]) {
        for v in nodes[i].op.operands() {
            if !users[v.index()].contains(&i) {
                users[v.index()].push(i);
            }
        }
    }
    for p in (0..n).filter(|&p| live[p]) {
        let Some(m) = matches(nodes, &users, &is_output, p) else {
            continue;
        };
        nodes[p].op = Op::ReduceWindow {
            op: ReduceOp::Max,
            x: m.x,
            window: m.window.clone(),
        };
        found[p] = Some(Fused::Pool {
            bias: m.bias,
            f: m.f.clone(),
        });
        if let Some((grad, source)) = m.gradient {
            nodes[grad].op = Op::SelectAndScatterAdd {
                op: ReduceOp::Max,
                source,
                operand: m.x,
                window: m.window,
            };
            found[grad] = Some(Fused::Gradient { pool: p, f: m.f });
        }
    }
    found
}

struct Match {
    x: Value,
    bias: Value,
    window: Window,
    f: BiasReluPool,
    /// The gated gradient's node and the pooling's cotangent.
    gradient: Option<(usize, Value)>,
}

/// The value of a one-element constant, read through broadcasts and views.
fn constant(nodes: &[Node], v: Value) -> Option<f64> {
    let mut i = v.index();
    loop {
        match nodes[i].op.fusion() {
            FusionClass::Broadcast { x, .. } | FusionClass::View(x) => i = x.index(),
            FusionClass::Source(Source::Literal(t)) => return t.scalar_f64().ok(),
            FusionClass::Source(Source::Argument(_))
            | FusionClass::Elementwise(_)
            | FusionClass::Kernel => return None,
        }
    }
}

/// `v` broadcast over the last dimension of `ty` from one value per channel: that vector.
fn channel_bias(nodes: &[Node], v: Value, ty: &TensorType) -> Option<Value> {
    let (b, pat) = super::fuse::broadcast_pattern(nodes, v.index())?;
    let c = *ty.dims().last()?;
    let bt = &nodes[b.index()].ty;
    (pat.q == 1 && pat.p == c && bt.numel() == c && bt.dtype == ty.dtype).then_some(b)
}

/// A finite gate value that is not negative (not even `-0`): a zero cotangent times it is
/// `+0`, as the fused gradient writes for unselected elements.
fn plain(v: f64) -> Option<f64> {
    (v.is_finite() && v.is_sign_positive()).then_some(v)
}

/// Whether `v`'s only live user is `u` and `v` is not a graph output.
fn only_user(users: &[Vec<usize>], is_output: &[bool], v: usize, u: usize) -> bool {
    users[v] == [u] && !is_output[v]
}

fn matches(nodes: &[Node], users: &[Vec<usize>], is_output: &[bool], p: usize) -> Option<Match> {
    let Op::ReduceWindow {
        op: ReduceOp::Max,
        x: r,
        window,
    } = &nodes[p].op
    else {
        return None;
    };
    let r = r.index();
    if !bias_relu_fusable(&nodes[r].ty, &nodes[p].ty, window) || is_output[r] {
        return None;
    }
    // r = max(a, floor): the ReLU, in the operand order `Activation::Relu` writes.
    let Op::Binary {
        op: BinaryOp::Max,
        lhs: a,
        rhs: floor,
    } = nodes[r].op
    else {
        return None;
    };
    // Not NaN: the fused kernel's ReLU is one comparison, equal to the unfused max then.
    let floor = constant(nodes, floor).filter(|f| !f.is_nan())?;
    let ai = a.index();
    if is_output[ai] {
        return None;
    }
    // a = x + bias (or bias + x), the bias per channel.
    let Op::Binary {
        op: BinaryOp::Add,
        lhs,
        rhs,
    } = nodes[ai].op
    else {
        return None;
    };
    let ty = &nodes[ai].ty;
    let (x, bias, bias_first) = match (channel_bias(nodes, lhs, ty), channel_bias(nodes, rhs, ty)) {
        (_, Some(b)) => (lhs, b, false),
        (Some(b), None) => (rhs, b, true),
        (None, None) => return None,
    };
    let mut f = BiasReluPool {
        bias_first,
        floor,
        gt: floor,
        eq: floor,
        one: 1.0,
        half: 0.5,
        zero: 0.0,
        ct_first: true,
    };
    let others: Vec<usize> = users[r].iter().copied().filter(|&u| u != p).collect();
    let gradient = match others[..] {
        // Inference: the pooling alone reads the activation.
        [] => {
            if users[ai] != [r] {
                return None;
            }
            None
        }
        [s] => {
            let grad = gated_gradient(nodes, users, is_output, (ai, r, s), window, &mut f)?;
            Some((grad, source_of(nodes, s)?))
        }
        _ => return None,
    };
    // The gradient must run after the pooling records its index (kernels run in node order).
    if gradient.is_some_and(|(grad, _)| grad < p) {
        return None;
    }
    Some(Match {
        x,
        bias,
        window: window.clone(),
        f,
        gradient,
    })
}

fn source_of(nodes: &[Node], s: usize) -> Option<Value> {
    match nodes[s].op {
        Op::SelectAndScatterAdd { source, .. } => Some(source),
        _ => None,
    }
}

/// `ct_a = select_and_scatter_add(max, ct, r, window) · select(a > gt, one, select(a == eq,
/// half, zero))` (as `binary::vjp` writes max's gradient), with `a` and `r` read by
/// nothing else: the product's node, its constants into `f`.
fn gated_gradient(
    nodes: &[Node],
    users: &[Vec<usize>],
    is_output: &[bool],
    (a, r, s): (usize, usize, usize),
    window: &Window,
    f: &mut BiasReluPool,
) -> Option<usize> {
    let Op::SelectAndScatterAdd {
        op: ReduceOp::Max,
        source,
        operand,
        window: w,
    } = &nodes[s].op
    else {
        return None;
    };
    if operand.index() != r || source.index() == r || w != window {
        return None;
    }
    let &[m] = users[s].as_slice() else {
        return None;
    };
    if is_output[s] {
        return None;
    }
    let Op::Binary {
        op: BinaryOp::Mul,
        lhs,
        rhs,
    } = nodes[m].op
    else {
        return None;
    };
    let (gate, ct_first) = match (lhs.index() == s, rhs.index() == s) {
        (true, false) => (rhs.index(), true),
        (false, true) => (lhs.index(), false),
        _ => return None,
    };
    let Op::Select {
        pred: gt,
        on_true: one,
        on_false: inner,
    } = nodes[gate].op
    else {
        return None;
    };
    let Op::Select {
        pred: eq,
        on_true: half,
        on_false: zero,
    } = nodes[inner.index()].op
    else {
        return None;
    };
    let compare = |v: Value, want: Comparison| match nodes[v.index()].op {
        Op::Compare { cmp, lhs, rhs } if cmp == want && lhs.index() == a => constant(nodes, rhs),
        _ => None,
    };
    f.gt = compare(gt, Comparison::Gt)?;
    f.eq = compare(eq, Comparison::Eq)?;
    f.one = plain(constant(nodes, one)?)?;
    f.half = plain(constant(nodes, half)?)?;
    f.zero = plain(constant(nodes, zero)?)?;
    f.ct_first = ct_first;
    let mut a_users = users[a].clone();
    a_users.sort_unstable();
    let mut want = vec![r, gt.index(), eq.index()];
    want.sort_unstable();
    let alone = only_user(users, is_output, gate, m)
        && only_user(users, is_output, inner.index(), gate)
        && only_user(users, is_output, gt.index(), gate)
        && only_user(users, is_output, eq.index(), inner.index())
        && users[r].len() == 2
        && a_users == want
        && nodes[m].ty == nodes[a].ty;
    alone.then_some(m)
}
