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

use super::data::{Data, DataMut};
use super::fuse::{FusedKernel, Pattern};
use crate::ir::{BinaryOp, DType, Node, Op, UnaryOp};
use crate::ops::real::Real;

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
    // w' = w - (m' / (√v' + ε))·α
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
    // m' = m + (g - m)(1 - β₁), v' = v + (g·g - v)(1 - β₂)
    let (m, g, s1) = cx.ema(m1, t)?;
    let g = cx.input(g, false, t)?;
    let (v, g2, s2) = cx.ema(v1, t)?;
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

#[cfg(test)]
mod tests {
    use super::super::executor::NativeExecutable;
    use super::super::plan::Step;
    use crate::backend::native::NativeBackend;
    use crate::backend::{Backend, CompileOptions, Executable};
    use crate::ir::{DType, Graph, TensorType};
    use crate::optim::{apply_weight_decay, Adam, AdamW, Optimizer, Step as OptStep};
    use crate::Tensor;

    /// One optimizer update of an `n`-element parameter, built as `train::step` builds
    /// it (weight decay, the update, the guard `select(ok, new, old)`); parameters: w, g, each slot, lr, t, ok. With `in_place`
    /// the outputs update w and the slots in place, as in the train step.
    fn update_graph(
        opt: &dyn Optimizer,
        n: usize,
        in_place: bool,
        guard: bool,
    ) -> (Graph, CompileOptions) {
        let mut g = Graph::new("update");
        let ty = TensorType::new(DType::F32, [n]);
        let w = g.parameter(ty.clone());
        let grad = g.parameter(ty.clone());
        let slots: Vec<_> = opt
            .slots()
            .iter()
            .map(|_| g.parameter(ty.clone()))
            .collect();
        let lr = g.parameter(TensorType::scalar(DType::F32));
        let t = g.parameter(TensorType::scalar(DType::F32));
        let ok = g.parameter(TensorType::scalar(DType::Bool));
        let step = OptStep {
            lr,
            t,
            globals: vec![],
        };
        // As the train step does: weight decay first, then the update.
        let decayed = apply_weight_decay(&mut g, opt.config(), w, lr).unwrap();
        let (new_w, new_slots) = opt.update(&mut g, &step, decayed, grad, &slots).unwrap();
        let mut outs = vec![new_w];
        outs.extend(new_slots);
        if guard {
            let old = std::iter::once(w).chain(slots.iter().copied());
            outs = outs
                .iter()
                .zip(old)
                .map(|(&new, old)| g.select(ok, new, old).unwrap())
                .collect();
        }
        let k = outs.len();
        g.set_outputs(outs).unwrap();
        // Output 0 updates parameter 0 (w); slot i (output i) updates parameter i + 1.
        let updates = if in_place {
            std::iter::once((0, 0))
                .chain((1..k).map(|i| (i, i + 1)))
                .collect()
        } else {
            vec![]
        };
        (g, CompileOptions { updates })
    }

    fn recognised(exe: &mut NativeExecutable) -> usize {
        exe.plan_mut()
            .steps
            .iter()
            .filter(|s| matches!(s, Step::Fused { kernel, .. } if kernel.adam.is_some()))
            .count()
    }

    /// Deterministic values in a range that makes every term of the update matter.
    fn values(n: usize, seed: u32, lo: f32, hi: f32) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let x = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8;
                lo + (hi - lo) * (x as f32 / (1u32 << 24) as f32)
            })
            .collect()
    }

    fn run(exe: &mut NativeExecutable, n: usize, ok: bool) -> Vec<Vec<f32>> {
        let be = NativeBackend::new();
        let mut args = [
            Tensor::from_vec(&[n], values(n, 1, -1.0, 1.0)).unwrap(),
            Tensor::from_vec(&[n], values(n, 2, -0.5, 0.5)).unwrap(),
            Tensor::from_vec(&[n], values(n, 3, -0.1, 0.1)).unwrap(),
            Tensor::from_vec(&[n], values(n, 4, 0.0, 0.01)).unwrap(),
            Tensor::scalar(1e-3f32),
            Tensor::scalar(7.0f32),
            Tensor::scalar(ok),
        ]
        .iter()
        .map(|t| be.upload(t).unwrap())
        .collect::<Vec<_>>();
        let outs = exe.execute(&mut args).unwrap();
        // In place: the results live in the parameters (w, then the slots).
        let (w, m, v) = if outs.is_empty() {
            (&args[0], &args[2], &args[3])
        } else {
            (&outs[0], &outs[1], &outs[2])
        };
        [w, m, v]
            .iter()
            .map(|b| be.download(b).unwrap().to_vec::<f32>().unwrap())
            .collect()
    }

    #[test]
    fn the_single_pass_matches_the_interpreter_bit_for_bit() {
        // Sizes: below the parallel split, not a multiple of the vector width, and split
        // across the crew (the first layer's 784·128).
        for n in [37, 1000, 100_352 + 5] {
            for (in_place, guard) in [(false, true), (true, true), (true, false)] {
                for ok in [true, false].into_iter().filter(|&ok| guard || ok) {
                    let (g, opts) = update_graph(&Adam::default(), n, in_place, guard);
                    let mut fast = NativeExecutable::new(&g, &opts).unwrap();
                    assert_eq!(recognised(&mut fast), 1, "n={n} in_place={in_place}");
                    let mut slow = NativeExecutable::new(&g, &opts).unwrap();
                    for s in slow.plan_mut().steps.iter_mut() {
                        if let Step::Fused { kernel, .. } = s {
                            kernel.adam = None;
                        }
                    }
                    let (a, b) = (run(&mut fast, n, ok), run(&mut slow, n, ok));
                    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
                        let same = x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits());
                        assert!(
                            same,
                            "output {k} differs (n={n} in_place={in_place} ok={ok})"
                        );
                    }
                    if !ok {
                        assert_eq!(a[0], values(n, 1, -1.0, 1.0), "a failed guard keeps w");
                    } else {
                        assert_ne!(a[0], values(n, 1, -1.0, 1.0), "the update changes w");
                    }
                }
            }
        }
    }

    #[test]
    fn other_updates_stay_on_the_generic_path() {
        for opt in [
            Box::new(Adam::default().amsgrad(true)) as Box<dyn Optimizer>,
            Box::new(AdamW::default()),
            Box::new(Adam::default().epsilon(1e-3)), // still Adam: recognised
        ] {
            let (g, opts) = update_graph(opt.as_ref(), 1000, true, true);
            let mut exe = NativeExecutable::new(&g, &opts).unwrap();
            // AdamW's decay joins the group, so the group is more than Adam's update.
            let want = usize::from(opt.name() == "adam" && opt.slots().len() == 2);
            assert_eq!(recognised(&mut exe), want, "{opt:?}");
        }
    }
}
