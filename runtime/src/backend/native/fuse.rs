//! Elementwise fusion: chains of elementwise ops run as one kernel that walks its
//! elements in chunks of [`CHUNK`], keeping intermediates in small registers (one chunk
//! each, in L1) instead of full tensors in memory.
//!
//! A fused kernel computes in one float type `T` (f32 or f64); booleans live in `T`
//! registers as 0 and 1. Its inputs are read either in full (same element count) or
//! through a broadcast pattern (`x[(i / q) % p]`: scalars, rows, columns), so the scalar
//! constants and bias broadcasts the builders emit never touch memory.

use crate::ir::{BinaryOp, Comparison, DType, Elementwise, FusionClass, Node, UnaryOp, Value};
use crate::kernel::data::{Data, DataMut};
use crate::kernel::real::Real;
use crate::ops::{binary, compare, unary};
use crate::{Error, Result};

/// Elements per register. Small enough that a kernel's registers stay in L1/L2, large
/// enough that each instruction's loop amortises its dispatch.
pub(crate) const CHUNK: usize = 1024;

/// How a fused kernel reads an input: element `i` of the kernel is element
/// `(i / q) % p` of the input. `Full` is `q = 1, p = n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Pattern {
    pub q: usize,
    pub p: usize,
}

impl Pattern {
    pub fn full(n: usize) -> Pattern {
        Pattern { q: 1, p: n.max(1) }
    }
}

/// Where an instruction's operand comes from: a register, or (for a float input read in
/// full) the input itself, with no copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Src {
    Reg(usize),
    In(usize),
}

/// One register-producing instruction; register `k` is written by instruction `k`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Inst {
    /// A patterned or boolean input, converted to `T`.
    Load {
        input: usize,
    },
    Unary {
        op: UnaryOp,
        a: Src,
    },
    Binary {
        op: BinaryOp,
        a: Src,
        b: Src,
    },
    Compare {
        cmp: Comparison,
        a: Src,
        b: Src,
    },
    Select {
        p: Src,
        t: Src,
        f: Src,
    },
    /// `x != 0` as 0/1 (a conversion to bool).
    ToBool {
        a: Src,
    },
    /// `x == 0` as 0/1 (logical not).
    Not {
        a: Src,
    },
}

#[derive(Debug)]
pub(crate) struct FusedKernel {
    /// Elements computed.
    pub n: usize,
    /// The compute type: f32 or f64.
    pub t: DType,
    /// For each input: the node whose value is read, and how.
    pub inputs: Vec<(usize, Pattern)>,
    pub insts: Vec<Inst>,
    /// The register each instruction writes. Registers are reused once their value is
    /// dead, so a kernel touches few of them and they stay in L1.
    pub dst: Vec<usize>,
    /// Registers needed.
    pub nregs: usize,
    /// Values written to memory, and the node each one is.
    pub outputs: Vec<(Src, usize)>,
    /// The members, for error messages.
    pub members: Vec<usize>,
    /// Set when the kernel is Adam's update, run by its hand-written single pass.
    pub adam: Option<Box<super::fused_adam::AdamKernel>>,
}

/// The compute type a node can be fused under: `Some(Some(t))` for float type `t`,
/// `Some(None)` for a node that only touches booleans (fits any group), `None` if the
/// node is not fusible.
pub(crate) fn fusion_type(nodes: &[Node], i: usize) -> Option<Option<DType>> {
    let node = &nodes[i];
    let f = match node.op.fusion() {
        FusionClass::Elementwise(f) => f,
        FusionClass::Source(_)
        | FusionClass::View(_)
        | FusionClass::Broadcast { .. }
        | FusionClass::Kernel => return None,
    };
    let operands = node.op.operands();
    let ty = |k: usize| nodes[operands[k].index()].ty.dtype;
    let float = |d: DType| d.is_arith_float();
    // All types involved must be one float type or bool.
    let mut t: Option<DType> = None;
    let mut types = vec![node.ty.dtype];
    match f {
        Elementwise::Unary(op) => {
            if op == UnaryOp::Not {
                types.push(ty(0));
            } else if !float(node.ty.dtype) {
                return None;
            }
        }
        Elementwise::Binary(op) => {
            let logical = matches!(op, BinaryOp::And | BinaryOp::Or);
            if !logical && !float(node.ty.dtype) {
                return None;
            }
            types.extend([ty(0), ty(1)]);
        }
        Elementwise::Compare(_) => types.extend([ty(0), ty(1)]),
        Elementwise::Select => types.extend([ty(0), ty(1), ty(2)]),
        Elementwise::Convert(_) => types.push(ty(0)),
    }
    for d in types {
        match d {
            DType::Bool => {}
            d if float(d) => match t {
                None => t = Some(d),
                Some(prev) if prev == d => {}
                Some(_) => return None,
            },
            _ => return None,
        }
    }
    Some(t)
}

/// The operand and broadcast pattern of a `broadcast_in_dim` node, if it has one: the
/// operand's non-unit dimensions must land on one contiguous block of result dimensions.
pub(crate) fn broadcast_pattern(nodes: &[Node], i: usize) -> Option<(Value, Pattern)> {
    let (x, dims) = match nodes[i].op.fusion() {
        FusionClass::Broadcast { x, dims } => (x, dims),
        FusionClass::Source(_)
        | FusionClass::View(_)
        | FusionClass::Elementwise(_)
        | FusionClass::Kernel => return None,
    };
    let xd = nodes[x.index()].ty.dims();
    let od = nodes[i].ty.dims();
    let active: Vec<usize> = dims
        .iter()
        .enumerate()
        .filter(|(j, _)| xd[*j] > 1)
        .map(|(_, &d)| d)
        .collect();
    let p: usize = xd.iter().product();
    let Some((&a, &last)) = active.first().zip(active.last()) else {
        return Some((x, Pattern { q: 1, p: 1 }));
    };
    // Every result dimension in [a, last] must come from an active operand dimension.
    if (a..=last).any(|d| od[d] > 1 && !active.contains(&d)) {
        return None;
    }
    let q: usize = od[last + 1..].iter().product();
    Some((x, Pattern { q, p }))
}

/// Builds the kernel for `members` (in order). `read(v)` resolves an operand to the node
/// whose memory holds it and the pattern to read it with, when it is not a member.
pub(crate) fn build(
    nodes: &[Node],
    members: &[usize],
    t: DType,
    is_output: impl Fn(usize) -> bool,
    read: impl Fn(usize) -> (usize, Pattern),
) -> FusedKernel {
    let n = nodes[members[0]].ty.numel();
    let mut src_of: std::collections::HashMap<usize, Src> = Default::default();
    let mut inputs: Vec<(usize, Pattern)> = Vec::new();
    let mut insts: Vec<Inst> = Vec::new();
    let mut input_of: std::collections::HashMap<(usize, Pattern), Src> = Default::default();
    for &m in members {
        let ops = nodes[m].op.operands();
        let mut a = Vec::with_capacity(ops.len());
        for &v in &ops {
            let (node, pat) = read(v.index());
            let src = match src_of.get(&node) {
                Some(&s) if pat == Pattern::full(n) => s,
                _ => *input_of.entry((node, pat)).or_insert_with(|| {
                    inputs.push((node, pat));
                    let input = inputs.len() - 1;
                    // Float data read in full needs no register: instructions read it in place.
                    if pat == Pattern::full(n) && nodes[node].ty.dtype == t && n > 1 {
                        Src::In(input)
                    } else {
                        insts.push(Inst::Load { input });
                        Src::Reg(insts.len() - 1)
                    }
                }),
            };
            a.push(src);
        }
        let inst = match nodes[m].op.fusion() {
            FusionClass::Elementwise(f) => match f {
                Elementwise::Unary(UnaryOp::Not) => Some(Inst::Not { a: a[0] }),
                Elementwise::Unary(op) => Some(Inst::Unary { op, a: a[0] }),
                Elementwise::Binary(op) => Some(Inst::Binary {
                    op,
                    a: a[0],
                    b: a[1],
                }),
                Elementwise::Compare(cmp) => Some(Inst::Compare {
                    cmp,
                    a: a[0],
                    b: a[1],
                }),
                Elementwise::Select => Some(Inst::Select {
                    p: a[0],
                    t: a[1],
                    f: a[2],
                }),
                Elementwise::Convert(to) => {
                    let from = nodes[ops[0].index()].ty.dtype;
                    if to == DType::Bool && from != DType::Bool {
                        Some(Inst::ToBool { a: a[0] })
                    } else {
                        None // bool -> float, or same type: the value is already right
                    }
                }
            },
            // Members are elementwise (`fusion_type`): nothing else joins a kernel.
            FusionClass::Source(_)
            | FusionClass::View(_)
            | FusionClass::Broadcast { .. }
            | FusionClass::Kernel => None,
        };
        let s = match inst {
            Some(i) => {
                insts.push(i);
                Src::Reg(insts.len() - 1)
            }
            None => a[0],
        };
        src_of.insert(m, s);
    }
    let outputs: Vec<(Src, usize)> = members
        .iter()
        .filter(|&&m| is_output(m))
        .map(|&m| (src_of[&m], m))
        .collect();
    let (insts, dst, nregs, outputs) = allocate_registers(insts, outputs, &inputs);
    FusedKernel {
        n,
        t,
        inputs,
        insts,
        dst,
        nregs,
        outputs,
        members: members.to_vec(),
        adam: None,
    }
}

/// Maps each instruction's value (named by the instruction's index) to a physical
/// register, reusing registers whose values are dead. Scalar loads (filled once per call)
/// and stored values stay live to the end.
#[allow(clippy::type_complexity)]
fn allocate_registers(
    insts: Vec<Inst>,
    outputs: Vec<(Src, usize)>,
    inputs: &[(usize, Pattern)],
) -> (Vec<Inst>, Vec<usize>, usize, Vec<(Src, usize)>) {
    let n = insts.len();
    let reads = |inst: &Inst| -> [Option<Src>; 3] {
        match *inst {
            Inst::Load { .. } => [None; 3],
            Inst::Unary { a, .. } | Inst::ToBool { a } | Inst::Not { a } => [Some(a), None, None],
            Inst::Binary { a, b, .. } | Inst::Compare { a, b, .. } => [Some(a), Some(b), None],
            Inst::Select { p, t, f } => [Some(p), Some(t), Some(f)],
        }
    };
    let mut last = vec![0usize; n];
    for (i, inst) in insts.iter().enumerate() {
        for s in reads(inst).into_iter().flatten() {
            if let Src::Reg(r) = s {
                last[r] = last[r].max(i);
            }
        }
    }
    for (s, _) in &outputs {
        if let Src::Reg(r) = s {
            last[*r] = usize::MAX;
        }
    }
    let mut phys = vec![0usize; n];
    let mut free: Vec<usize> = Vec::new();
    let mut nregs = 0;
    // Scalar loads are filled before the first chunk, so they are live from the start:
    // they take their own registers before any other value can use (and clobber) them.
    let scalar: Vec<bool> = insts
        .iter()
        .map(|inst| matches!(inst, Inst::Load { input } if inputs[*input].1.p == 1))
        .collect();
    for i in (0..n).filter(|&i| scalar[i]) {
        phys[i] = nregs;
        nregs += 1;
    }
    for i in 0..n {
        if scalar[i] {
            continue;
        }
        phys[i] = free.pop().unwrap_or_else(|| {
            nregs += 1;
            nregs - 1
        });
        // Inputs whose last reader this is are free from the next instruction on (not for
        // this one's own result: the loops read and write separate slices).
        for s in reads(&insts[i]).into_iter().flatten() {
            if let Src::Reg(r) = s {
                if last[r] == i && !scalar[r] && !free.contains(&phys[r]) {
                    free.push(phys[r]);
                }
            }
        }
        if last[i] <= i {
            free.push(phys[i]); // never read
        }
    }
    let map = |s: Src| match s {
        Src::Reg(r) => Src::Reg(phys[r]),
        other => other,
    };
    let insts = insts
        .into_iter()
        .map(|inst| match inst {
            Inst::Load { input } => Inst::Load { input },
            Inst::Unary { op, a } => Inst::Unary { op, a: map(a) },
            Inst::Binary { op, a, b } => Inst::Binary {
                op,
                a: map(a),
                b: map(b),
            },
            Inst::Compare { cmp, a, b } => Inst::Compare {
                cmp,
                a: map(a),
                b: map(b),
            },
            Inst::Select { p, t, f } => Inst::Select {
                p: map(p),
                t: map(t),
                f: map(f),
            },
            Inst::ToBool { a } => Inst::ToBool { a: map(a) },
            Inst::Not { a } => Inst::Not { a: map(a) },
        })
        .collect();
    let outputs = outputs.into_iter().map(|(s, m)| (map(s), m)).collect();
    (insts, phys, nregs, outputs)
}

/// Fills `out` with elements `start..start + out.len()` of an input read with `pat`.
#[inline(always)]
fn load<T: Real>(src: Data<'_>, pat: Pattern, start: usize, out: &mut [T]) -> Result<()> {
    macro_rules! read {
        ($a:expr, $conv:expr) => {{
            let a = $a;
            if pat.p == 1 {
                out.fill($conv(a[0]));
            } else if pat.q == 1 && (start % pat.p) + out.len() <= pat.p {
                let (s, len) = (start % pat.p, out.len());
                for (o, &v) in out.iter_mut().zip(&a[s..s + len]) {
                    *o = $conv(v);
                }
            } else if pat.q == 1 {
                // A row repeated (a bias over a batch): whole runs of it, each a plain copy.
                let (mut j, mut o) = (start % pat.p, 0);
                while o < out.len() {
                    let len = (pat.p - j).min(out.len() - o);
                    for (d, &v) in out[o..o + len].iter_mut().zip(&a[j..j + len]) {
                        *d = $conv(v);
                    }
                    o += len;
                    j = 0;
                }
            } else {
                // Each value repeated `q` times (a column broadcast): runs of one value.
                let (mut j, mut r, mut o) = ((start / pat.q) % pat.p, start % pat.q, 0);
                while o < out.len() {
                    let len = (pat.q - r).min(out.len() - o);
                    out[o..o + len].fill($conv(a[j]));
                    o += len;
                    r = 0;
                    j += 1;
                    if j == pat.p {
                        j = 0;
                    }
                }
            }
        }};
    }
    match src {
        Data::Bool(a) => read!(a, |v: bool| if v { T::one() } else { T::zero() }),
        d => match T::of(d) {
            Some(a) => read!(a, |v: T| v),
            None => return Err(fused_type_error(d.dtype())),
        },
    }
    Ok(())
}

fn fused_type_error(d: DType) -> Error {
    Error::Backend {
        backend: "native",
        message: format!("internal: fused kernel given {d} data"),
    }
}

/// Kernels this large are split across the crew (see `crew`): below it a hand-off costs
/// more than it saves.
const PARALLEL_MIN: usize = 1 << 14;

/// Runs a fused kernel. `alias[i]` names the output input `i` shares storage with (an
/// in-place update): it is read from that output, each chunk before the chunk is stored.
///
/// Large kernels are split into contiguous ranges that the crew's cores claim. The loops are compiled
/// three times, for AVX-512, AVX2+FMA and the baseline, and the best the CPU supports is
/// picked at run time: one binary runs everywhere and still uses the wide vectors where
/// they exist.
pub(crate) fn run<T: Real>(
    k: &FusedKernel,
    inputs: &[Data<'_>],
    alias: &[Option<usize>],
    outputs: &mut [DataMut<'_>],
) -> Result<()> {
    // A few ranges per core (split by `crew::part`, so each core updates the same elements
    // every call): a core that finishes early steals from one that started late.
    let width = crate::kernel::crew::width();
    let tasks = if k.n >= PARALLEL_MIN && width > 1 {
        (width * 4).min(k.n / CHUNK).max(1)
    } else {
        1
    };
    if tasks == 1 {
        return T::with_regs(|regs| run_range(k, inputs, alias, outputs, regs, 0));
    }
    // Each task rebuilds its range of every output from the raw parts (on the stack: this
    // runs every step, and should not allocate).
    const MAX_OUTPUTS: usize = 16;
    if outputs.len() > MAX_OUTPUTS {
        return T::with_regs(|regs| run_range(k, inputs, alias, outputs, regs, 0));
    }
    let mut raw = [None; MAX_OUTPUTS];
    for (r, o) in raw.iter_mut().zip(outputs.iter_mut()) {
        *r = Some(o.raw());
    }
    let nout = outputs.len();
    let chunks = k.n.div_ceil(CHUNK);
    let error: std::sync::Mutex<Option<Error>> = std::sync::Mutex::new(None);
    crate::kernel::crew::run(tasks, &|t| {
        let r = crate::kernel::crew::part(chunks, tasks, t);
        let (lo, hi) = ((r.start * CHUNK).min(k.n), (r.end * CHUNK).min(k.n));
        if lo == hi {
            return;
        }
        let mut outs: [DataMut<'_>; MAX_OUTPUTS] = std::array::from_fn(|_| DataMut::F32(&mut []));
        for (o, r) in outs.iter_mut().zip(raw.iter().take(nout)) {
            if let Some(r) = r {
                // SAFETY: tasks cover disjoint ranges of every output, and `outputs` is not
                // used until `crew::run` returns with every task done.
                *o = unsafe { r.range(lo, hi) };
            }
        }
        let r = T::with_regs(|regs| run_range(k, inputs, alias, &mut outs[..nout], regs, lo));
        if let Err(e) = r {
            if let Ok(mut slot) = error.lock() {
                *slot = Some(e);
            }
        }
    });
    match error.into_inner() {
        Ok(Some(e)) => Err(e),
        _ => Ok(()),
    }
}

/// Runs elements `base .. base + outputs[..].len()` (every output is that range's slice).
fn run_range<T: Real>(
    k: &FusedKernel,
    inputs: &[Data<'_>],
    alias: &[Option<usize>],
    outputs: &mut [DataMut<'_>],
    regs: &mut Vec<T>,
    base: usize,
) -> Result<()> {
    // Registers are per thread, and a thread may meet a plan's widest kernel for the first
    // time many steps in: growing straight to the usual room keeps that from allocating.
    let need = (k.nregs * CHUNK).max(crate::kernel::real::REGS_RESERVE);
    if regs.len() < need {
        regs.resize(need, T::zero());
    }
    let end = (base
        + outputs
            .first()
            .map(|o| o.as_data().len())
            .unwrap_or(k.n - base))
    .min(k.n);
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports the features the function is compiled for.
            return unsafe { run_avx512(k, inputs, alias, outputs, regs, base, end) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: as above.
            return unsafe { run_avx2(k, inputs, alias, outputs, regs, base, end) };
        }
    }
    run_generic(k, inputs, alias, outputs, regs, base, end)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn run_avx512<T: Real>(
    k: &FusedKernel,
    inputs: &[Data<'_>],
    alias: &[Option<usize>],
    outputs: &mut [DataMut<'_>],
    regs: &mut [T],
    base: usize,
    end: usize,
) -> Result<()> {
    run_generic(k, inputs, alias, outputs, regs, base, end)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_avx2<T: Real>(
    k: &FusedKernel,
    inputs: &[Data<'_>],
    alias: &[Option<usize>],
    outputs: &mut [DataMut<'_>],
    regs: &mut [T],
    base: usize,
    end: usize,
) -> Result<()> {
    run_generic(k, inputs, alias, outputs, regs, base, end)
}

/// An input's data: its own, or the output it is an alias of.
#[inline(always)]
fn input<'a>(
    inputs: &[Data<'a>],
    alias: &[Option<usize>],
    outputs: &'a [DataMut<'_>],
    i: usize,
) -> Data<'a> {
    match alias[i] {
        Some(o) => outputs[o].as_data(),
        None => inputs[i],
    }
}

/// Whether an instruction loads a scalar (the same value for every element): such loads
/// fill their register once per call instead of once per chunk.
fn is_scalar_load(k: &FusedKernel, inst: &Inst) -> bool {
    matches!(inst, Inst::Load { input } if k.inputs[*input].1.p == 1)
}

/// Element `g` (global) of input `i`: aliased inputs live in this range's outputs, whose
/// element 0 is global element `base`.
#[inline(always)]
fn in_slice<'a, T: Real>(
    inputs: &[Data<'a>],
    alias: &[Option<usize>],
    outs: &'a [DataMut<'_>],
    i: usize,
    g: usize,
    len: usize,
    base: usize,
) -> &'a [T] {
    match alias[i] {
        Some(o) => T::of(outs[o].as_data())
            .map(|a| &a[g - base..g - base + len])
            .unwrap_or(&[]),
        None => T::of(inputs[i]).map(|a| &a[g..g + len]).unwrap_or(&[]),
    }
}

#[inline(always)]
fn run_generic<T: Real>(
    k: &FusedKernel,
    inputs: &[Data<'_>],
    alias: &[Option<usize>],
    outputs: &mut [DataMut<'_>],
    regs: &mut [T],
    base: usize,
    end: usize,
) -> Result<()> {
    if let Some(a) = &k.adam {
        return super::fused_adam::run::<T>(a, inputs, alias, outputs, base)
            .ok_or_else(|| fused_type_error(k.t));
    }
    let one = T::one();
    for (r, inst) in k.insts.iter().enumerate() {
        if let (true, Inst::Load { input: i }) = (is_scalar_load(k, inst), inst) {
            let data = input(inputs, alias, outputs, *i);
            load(
                data,
                k.inputs[*i].1,
                0,
                &mut regs[k.dst[r] * CHUNK..(k.dst[r] + 1) * CHUNK],
            )?;
        }
    }
    let mut start = base;
    while start < end {
        let len = CHUNK.min(end - start);
        {
            let outs: &[DataMut<'_>] = outputs;
            for (r, inst) in k.insts.iter().enumerate() {
                // The result register and the (distinct) registers it reads.
                let d = k.dst[r];
                let (below, rest) = regs.split_at_mut(d * CHUNK);
                let (out, above) = rest.split_at_mut(CHUNK);
                let out = &mut out[..len];
                let get = |s: Src| -> &[T] {
                    match s {
                        Src::Reg(i) if i < d => &below[i * CHUNK..i * CHUNK + len],
                        Src::Reg(i) => &above[(i - d - 1) * CHUNK..(i - d - 1) * CHUNK + len],
                        // Checked when the kernel was built: full inputs of type T.
                        Src::In(i) => in_slice(inputs, alias, outs, i, start, len, base),
                    }
                };
                match *inst {
                    Inst::Load { .. } if is_scalar_load(k, inst) => {}
                    Inst::Load { input: i } => match alias[i] {
                        // A bool updated in place (a flag a loop carries) is stored as
                        // bools, not as `T`: it converts as any bool input's load does.
                        Some(o) if outs[o].dtype() == DType::Bool => {
                            let flags = outs[o].as_data();
                            load(flags, Pattern::full(flags.len()), start - base, out)?
                        }
                        // An aliased input is read in full: the range's own slice.
                        Some(_) => {
                            out.copy_from_slice(in_slice(inputs, alias, outs, i, start, len, base))
                        }
                        None => load(inputs[i], k.inputs[i].1, start, out)?,
                    },
                    Inst::Unary { op, a } => unary::apply_real(op, get(a), out),
                    Inst::Binary {
                        op: BinaryOp::And,
                        a,
                        b,
                    } => binary::apply_real(BinaryOp::Mul, get(a), get(b), out),
                    Inst::Binary {
                        op: BinaryOp::Or,
                        a,
                        b,
                    } => binary::apply_real(BinaryOp::Max, get(a), get(b), out),
                    Inst::Binary { op, a, b } => binary::apply_real(op, get(a), get(b), out),
                    Inst::Compare { cmp, a, b } => compare::apply_real(cmp, get(a), get(b), out),
                    Inst::Select { p, t, f } => {
                        for (((o, &c), &x), &y) in
                            out.iter_mut().zip(get(p)).zip(get(t)).zip(get(f))
                        {
                            *o = if c != T::zero() { x } else { y };
                        }
                    }
                    Inst::ToBool { a } => {
                        for (o, &x) in out.iter_mut().zip(get(a)) {
                            *o = if x != T::zero() { one } else { T::zero() };
                        }
                    }
                    Inst::Not { a } => {
                        for (o, &x) in out.iter_mut().zip(get(a)) {
                            *o = if x == T::zero() { one } else { T::zero() };
                        }
                    }
                }
            }
        }
        for o in 0..outputs.len() {
            let src = k.outputs[o].0;
            store(inputs, alias, outputs, regs, o, src, start, len, base)?;
        }
        start += len;
    }
    Ok(())
}

/// Writes output `o`'s chunk (global elements `start..start + len`) from its register,
/// or from an input it merely renames.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn store<T: Real>(
    inputs: &[Data<'_>],
    alias: &[Option<usize>],
    outputs: &mut [DataMut<'_>],
    regs: &[T],
    o: usize,
    src: Src,
    start: usize,
    len: usize,
    base: usize,
) -> Result<()> {
    let renamed: Option<Vec<T>>;
    let src: &[T] = match src {
        Src::Reg(r) => &regs[r * CHUNK..r * CHUNK + len],
        Src::In(i) => match alias[i] {
            // The output renames an input that lives in an output: copy before writing.
            Some(a) => {
                renamed = T::of(outputs[a].as_data())
                    .map(|d| d[start - base..start - base + len].to_vec());
                renamed.as_deref().unwrap_or(&[])
            }
            None => T::of(inputs[i])
                .map(|a| &a[start..start + len])
                .unwrap_or(&[]),
        },
    };
    let local = start - base;
    match &mut outputs[o] {
        DataMut::Bool(out) => {
            for (d, &v) in out[local..local + len].iter_mut().zip(src) {
                *d = v != T::zero();
            }
        }
        d => match T::of_mut(d.reborrow()) {
            Some(out) => out[local..local + len].copy_from_slice(src),
            None => return Err(fused_type_error(d.dtype())),
        },
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterned_loads_match_their_definition() {
        // Element `i` of the kernel is element `(i / q) % p` of the input, for rows (q = 1),
        // columns (q > 1), scalars, starting anywhere, across wrap-arounds.
        let src: Vec<f32> = (0..60).map(|v| v as f32).collect();
        for (q, p) in [(1, 1), (1, 7), (1, 60), (3, 5), (4, 15), (60, 1), (2, 30)] {
            for start in [0, 1, 6, 13, 59, 1000] {
                for len in [1, 5, 16, 100] {
                    let mut out = vec![-1.0f32; len];
                    load(Data::F32(&src[..p]), Pattern { q, p }, start, &mut out).unwrap();
                    let want: Vec<f32> = (start..start + len).map(|i| src[(i / q) % p]).collect();
                    assert_eq!(out, want, "q={q} p={p} start={start} len={len}");
                }
            }
        }
        // Booleans become 0 and 1.
        let mut out = vec![-1.0f32; 5];
        load(
            Data::Bool(&[true, false]),
            Pattern { q: 2, p: 2 },
            1,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [1.0, 0.0, 0.0, 1.0, 1.0]);
    }
}
