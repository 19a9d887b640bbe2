//! Adam's update as one hand-written pass over memory, substituted for the interpreted
//! fused kernel when a fused group computes exactly that update.
//!
//! The generic fused kernel (`fuse`) runs one loop per instruction over a chunk, so each
//! of the update's fifteen operations loads and stores its operands: in a stand-alone
//! measurement of that structure against one loop keeping every intermediate in vector
//! registers, it was 4–5 times slower, and on the tutorial model at batch 32 the update of
//! the first layer's 100,352 weights was 40% of a step (native profile). Without a code generator the way to that single loop is to write it, for
//! the update that matters (PyTorch ships a hand-fused Adam for the same reason).
//!
//! The math is still defined once, by `optim::adam` as graph operations: this module only
//! recognises that graph (every member of the group must be part of the match, so nothing
//! is dropped) and evaluates it with the same operations in the same order, so its results
//! are bit-identical to the interpreter's (tested). Anything else, AMSGrad or AdamW
//! included, stays on the generic path.

use super::fuse::{FusedKernel, Pattern};
use crate::ir::{BinaryOp, DType, Node, Op, UnaryOp};
use crate::kernel::data::{Data, DataMut};
use crate::kernel::real::Real;

/// Where the update's operands are, as indices into the fused kernel's inputs and outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AdamKernel {
    /// The weights, first and second moments, and the gradient (read in full).
    w: usize,
    m: usize,
    v: usize,
    g: usize,
    /// Scalars: `1 - β₁`, `1 - β₂`, `ε`, the step size `α`, and the predicate that keeps
    /// the old state when false (the train step's non-finite-loss guard), if any.
    s1: usize,
    s2: usize,
    eps: usize,
    alpha: usize,
    ok: Option<usize>,
    /// The outputs `w'`, `m'`, `v'`.
    out_w: usize,
    out_m: usize,
    out_v: usize,
}

/// One operand of a member: another member, or an input of the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operand {
    Member(usize),
    Input(usize),
}

struct Matcher<'a> {
    nodes: &'a [Node],
    kernel: &'a FusedKernel,
    /// Resolves an operand value to the node holding it and how it is read.
    read: &'a dyn Fn(usize) -> (usize, Pattern),
    /// Members the match has used.
    used: Vec<usize>,
}

impl Matcher<'_> {
    fn operand(&self, v: crate::ir::Value) -> Option<Operand> {
        let (node, pat) = (self.read)(v.index());
        if pat == Pattern::full(self.kernel.n) && self.kernel.members.contains(&node) {
            return Some(Operand::Member(node));
        }
        self.kernel
            .inputs
            .iter()
            .position(|&i| i == (node, pat))
            .map(Operand::Input)
    }

    fn member(&mut self, o: Operand) -> Option<&Op> {
        let Operand::Member(m) = o else { return None };
        self.used.push(m);
        Some(&self.nodes[m].op)
    }

    fn binary(&mut self, o: Operand, want: BinaryOp) -> Option<(Operand, Operand)> {
        match *self.member(o)? {
            Op::Binary { op, lhs, rhs } if op == want => {
                Some((self.operand(lhs)?, self.operand(rhs)?))
            }
            _ => None,
        }
    }

    /// A commutative operation of one member and one input, in either order.
    fn mixed(&mut self, o: Operand, want: BinaryOp) -> Option<(usize, usize)> {
        match self.binary(o, want)? {
            (Operand::Member(m), Operand::Input(i)) | (Operand::Input(i), Operand::Member(m)) => {
                Some((m, i))
            }
            _ => None,
        }
    }

    fn input(&self, o: Operand, scalar: bool, dtype: DType) -> Option<usize> {
        let Operand::Input(i) = o else { return None };
        let (node, pat) = self.kernel.inputs[i];
        let ok_shape = if scalar {
            pat.p == 1
        } else {
            pat == Pattern::full(self.kernel.n)
        };
        (ok_shape && self.nodes[node].ty.dtype == dtype).then_some(i)
    }

    /// A moment as the weight's rule reads it: the new moment itself, or settled
    /// (`select(ok, new, old)` under the update's guard: the moment's output itself, see
    /// `optim::Step::settle`). Returns the new moment and, if settled, the old one.
    fn settled(
        &mut self,
        o: Operand,
        ok: Option<usize>,
        t: DType,
    ) -> Option<(Operand, Option<usize>)> {
        let Operand::Member(node) = o else {
            return Some((o, None));
        };
        let Op::Select {
            pred,
            on_true,
            on_false,
        } = self.nodes[node].op
        else {
            return Some((o, None));
        };
        (self.input(self.operand(pred)?, true, DType::Bool)? == ok?).then_some(())?;
        self.member(o)?;
        let old = self.input(self.operand(on_false)?, false, t)?;
        Some((self.operand(on_true)?, Some(old)))
    }

    /// `x + (y - x)·s` with `x` an input read in full: returns `(x, y, s)`.
    fn ema(&mut self, o: Operand, t: DType) -> Option<(usize, Operand, usize)> {
        let (d, x) = self.mixed(o, BinaryOp::Add)?;
        let (diff, s) = self.mixed(Operand::Member(d), BinaryOp::Mul)?;
        let (y, x2) = self.binary(Operand::Member(diff), BinaryOp::Sub)?;
        (x2 == Operand::Input(x)).then_some(())?;
        Some((
            self.input(Operand::Input(x), false, t)?,
            y,
            self.input(Operand::Input(s), true, t)?,
        ))
    }
}

/// Recognises Adam's update (with or without the guard) in a fused kernel built from
/// `nodes`; `read` is the resolution the kernel was built with.
pub(crate) fn detect(
    nodes: &[Node],
    kernel: &FusedKernel,
    read: &dyn Fn(usize) -> (usize, Pattern),
) -> Option<Box<AdamKernel>> {
    if kernel.outputs.len() != 3 || kernel.n < 2 {
        return None;
    }
    let t = kernel.t;
    let out_node = |o: usize| kernel.outputs[o].1;
    for out_w in 0..3 {
        let mut cx = Matcher {
            nodes,
            kernel,
            read,
            used: Vec::new(),
        };
        let Some(found) = match_from(&mut cx, out_w, t, &out_node) else {
            continue;
        };
        let mut used = cx.used;
        used.sort_unstable();
        used.dedup();
        let mut members = kernel.members.clone();
        members.sort_unstable();
        return (used == members).then_some(Box::new(found));
    }
    None
}

fn match_from(
    cx: &mut Matcher<'_>,
    out_w: usize,
    t: DType,
    out_node: &dyn Fn(usize) -> usize,
) -> Option<AdamKernel> {
    // The guard, if there is one: `select(ok, new, old)`.
    let guarded = |cx: &mut Matcher<'_>, node: usize| -> Option<(Option<usize>, Operand, usize)> {
        let o = Operand::Member(node);
        let Op::Select {
            pred,
            on_true,
            on_false,
        } = cx.nodes[node].op
        else {
            return Some((None, o, usize::MAX));
        };
        cx.member(o)?;
        let ok = cx.input(cx.operand(pred)?, true, DType::Bool)?;
        let old = cx.input(cx.operand(on_false)?, false, t)?;
        Some((Some(ok), cx.operand(on_true)?, old))
    };
    // w' = w - (m' / (√v' + ε))·α, m' and v' raw or settled
    let (ok, new_w, old_w) = guarded(cx, out_node(out_w))?;
    let (w, r) = cx.binary(new_w, BinaryOp::Sub)?;
    let w = cx.input(w, false, t)?;
    let (q, alpha) = cx.mixed(r, BinaryOp::Mul)?;
    let alpha = cx.input(Operand::Input(alpha), true, t)?;
    let (m1, den) = cx.binary(Operand::Member(q), BinaryOp::Div)?;
    let (sq, eps) = cx.mixed(den, BinaryOp::Add)?;
    let eps = cx.input(Operand::Input(eps), true, t)?;
    let v1 = match *cx.member(Operand::Member(sq))? {
        Op::Unary {
            op: UnaryOp::Sqrt,
            x,
        } => cx.operand(x)?,
        _ => return None,
    };
    let (m1, m_old) = cx.settled(m1, ok, t)?;
    let (v1, v_old) = cx.settled(v1, ok, t)?;
    // m' = m + (g - m)(1 - β₁), v' = v + (g·g - v)(1 - β₂)
    let (m, g, s1) = cx.ema(m1, t)?;
    let g = cx.input(g, false, t)?;
    let (v, g2, s2) = cx.ema(v1, t)?;
    (m_old.unwrap_or(m) == m && v_old.unwrap_or(v) == v).then_some(())?;
    let (ga, gb) = cx.binary(g2, BinaryOp::Mul)?;
    (ga == Operand::Input(g) && gb == Operand::Input(g)).then_some(())?;
    if ok.is_some() && old_w != w {
        return None;
    }
    // The other two outputs: m' and v', guarded by the same predicate.
    let mut out_m = None;
    let mut out_v = None;
    for o in (0..3).filter(|&o| o != out_w) {
        let (p, new, old) = guarded(cx, out_node(o))?;
        (p == ok).then_some(())?;
        if new == m1 && (ok.is_none() || old == m) {
            out_m = Some(o);
        } else if new == v1 && (ok.is_none() || old == v) {
            out_v = Some(o);
        } else {
            return None;
        }
    }
    Some(AdamKernel {
        w,
        m,
        v,
        g,
        s1,
        s2,
        eps,
        alpha,
        ok,
        out_w,
        out_m: out_m?,
        out_v: out_v?,
    })
}

/// Vector width of the loop: sixteen values are one AVX-512 register of f32.
const LANES: usize = 16;

/// Runs the update over this range's outputs (global elements `base..base + len`).
/// Inputs aliased to outputs (updated in place) are read from them; each element is read
/// in full before any output element at that index is written, so any aliasing among
/// same-index slots is safe.
#[inline(always)]
pub(crate) fn run<T: Real>(
    a: &AdamKernel,
    inputs: &[Data<'_>],
    alias: &[Option<usize>],
    outputs: &mut [DataMut<'_>],
    base: usize,
) -> Option<()> {
    let scalar = |i: usize| -> Option<T> {
        match alias[i] {
            Some(_) => None,
            None => T::of(inputs[i]).and_then(|d| d.first().copied()),
        }
    };
    let (s1, s2, eps, alpha) = (
        scalar(a.s1)?,
        scalar(a.s2)?,
        scalar(a.eps)?,
        scalar(a.alpha)?,
    );
    let ok = match a.ok {
        Some(i) => match inputs.get(i)? {
            Data::Bool(b) if alias[i].is_none() => *b.first()?,
            _ => return None,
        },
        None => true,
    };
    let len = outputs.get(a.out_w)?.as_data().len();
    // Raw pointers: an input and an output may be the same memory (in-place updates).
    let src = |i: usize, outputs: &mut [DataMut<'_>]| -> Option<*const T> {
        match alias[i] {
            Some(o) => T::of_mut(outputs.get_mut(o)?.reborrow()).map(|d| d.as_ptr()),
            None => T::of(inputs[i])
                .and_then(|d| d.get(base..base + len))
                .map(|d| d.as_ptr()),
        }
    };
    let dst = |o: usize, outputs: &mut [DataMut<'_>]| -> Option<*mut T> {
        let d = T::of_mut(outputs.get_mut(o)?.reborrow())?;
        (d.len() == len).then_some(d.as_mut_ptr())
    };
    let (w, m, v, g) = (
        src(a.w, outputs)?,
        src(a.m, outputs)?,
        src(a.v, outputs)?,
        src(a.g, outputs)?,
    );
    let (ow, om, ov) = (
        dst(a.out_w, outputs)?,
        dst(a.out_m, outputs)?,
        dst(a.out_v, outputs)?,
    );
    // The same operations, in the same order, as the graph `optim::adam` builds.
    let step = |w: T, m: T, v: T, g: T| -> (T, T, T) {
        let m1 = m + (g - m) * s1;
        let v1 = v + (g * g - v) * s2;
        (w - m1 / (v1.sqrt() + eps) * alpha, m1, v1)
    };
    let mut i = 0;
    // SAFETY: every pointer addresses `len` elements (checked above); each block is read
    // whole into registers before its outputs are written.
    unsafe {
        if !ok {
            // The guard failed: the state stays as it was.
            for (from, to) in [(w, ow), (m, om), (v, ov)] {
                if !std::ptr::eq(from, to) {
                    std::ptr::copy(from, to, len);
                }
            }
            return Some(());
        }
        while i + LANES <= len {
            let rd = |p: *const T| std::ptr::read_unaligned(p.add(i) as *const [T; LANES]);
            let (bw, bm, bv, bg) = (rd(w), rd(m), rd(v), rd(g));
            let (mut nw, mut nm, mut nv) =
                ([T::zero(); LANES], [T::zero(); LANES], [T::zero(); LANES]);
            for l in 0..LANES {
                (nw[l], nm[l], nv[l]) = step(bw[l], bm[l], bv[l], bg[l]);
            }
            std::ptr::write_unaligned(ow.add(i) as *mut [T; LANES], nw);
            std::ptr::write_unaligned(om.add(i) as *mut [T; LANES], nm);
            std::ptr::write_unaligned(ov.add(i) as *mut [T; LANES], nv);
            i += LANES;
        }
        while i < len {
            let (nw, nm, nv) = step(*w.add(i), *m.add(i), *v.add(i), *g.add(i));
            (*ow.add(i), *om.add(i), *ov.add(i)) = (nw, nm, nv);
            i += 1;
        }
    }
    Some(())
}
