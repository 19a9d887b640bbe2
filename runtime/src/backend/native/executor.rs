//! Running a plan.

use super::fuse::{self, FusedKernel};
use super::loop_entry::Entry;
use super::plan::{plan, Loc, LoopPlan, OutputPlan, Plan, PoolIndex, Step};
use crate::backend::{check_args, Buffer, CompileOptions, Executable};
use crate::ir::{DType, Graph, TensorType};
use crate::kernel::data::{Data, DataMut, Storage};
use crate::kernel::KernelCtx;
use crate::ops::{self, In};
use crate::{Error, Result};

pub(crate) struct NativeExecutable {
    plan: Plan,
    frame: Frame,
    ctx: KernelCtx,
    param_types: Vec<TensorType>,
    output_types: Vec<TensorType>,
    /// Time spent in each step, when `STRATA_NATIVE_PROFILE` is set (printed on drop).
    profile: Option<Vec<std::time::Duration>>,
}

/// A profile's rows, the most expensive step first: `p[i]` is the time in step `i` of
/// `plan`, and `whole` what the shares are of.
fn profile_rows(plan: &Plan, p: &[std::time::Duration], whole: std::time::Duration) -> String {
    let mut rows: Vec<(usize, std::time::Duration)> = p.iter().copied().enumerate().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    let lines = plan.describe();
    let lines: Vec<&str> = lines.lines().skip(1).collect();
    let mut out = String::new();
    for (i, d) in rows.iter().take(25) {
        out += &format!(
            "  {:6.2}% {:9.3} ms {}\n",
            100.0 * d.as_secs_f64() / whole.as_secs_f64().max(1e-12),
            d.as_secs_f64() * 1e3,
            lines.get(*i).unwrap_or(&"")
        );
    }
    out
}

impl Drop for NativeExecutable {
    fn drop(&mut self) {
        if let Some(p) = &self.profile {
            let total: std::time::Duration = p.iter().sum();
            let mut out = format!(
                "native profile: {:.3} ms in {} steps\n",
                total.as_secs_f64() * 1e3,
                p.len()
            );
            out += &profile_rows(&self.plan, p, total);
            // Inside each top-level loop: its body's steps, as shares of the whole profile
            // (the loop's own row less its body's is the condition, the entry and exit
            // copies and the gathering of results).
            for (l, (lp, lf)) in self.plan.loops.iter().zip(&self.frame.loops).enumerate() {
                if let Some(body) = &lf.profile {
                    let in_body: std::time::Duration = body.iter().sum();
                    out += &format!(
                        "loop {l} body: {:.3} ms in {} steps\n",
                        in_body.as_secs_f64() * 1e3,
                        body.len()
                    );
                    out += &profile_rows(&lp.body, body, total);
                }
            }
            eprint!("{out}");
        }
    }
}

impl NativeExecutable {
    pub fn new(g: &Graph, options: &CompileOptions) -> Result<NativeExecutable> {
        let plan = plan(g, options);
        if std::env::var_os("STRATA_NATIVE_PLAN").is_some() {
            eprintln!("{}", plan.describe());
        }
        let mut frame = Frame::new(&plan, g.name())?;
        let profile = std::env::var_os("STRATA_NATIVE_PROFILE").map(|_| Vec::new());
        if profile.is_some() {
            for (lp, lf) in plan.loops.iter().zip(&mut frame.loops) {
                lf.profile = Some(vec![Default::default(); lp.body.steps.len()]);
            }
        }
        Ok(NativeExecutable {
            plan,
            frame,
            ctx: KernelCtx::default(),
            param_types: g.param_types(),
            output_types: g.output_types(),
            profile,
        })
    }

    /// The plan, for tests that inspect or alter which kernels it runs.
    #[cfg(test)]
    pub(crate) fn plan_mut(&mut self) -> &mut Plan {
        &mut self.plan
    }

    /// How many times the body of each top-level loop has run since compilation.
    #[cfg(test)]
    pub(crate) fn loop_iterations(&self) -> Vec<usize> {
        self.frame.loops.iter().map(|l| l.iterations).collect()
    }

    /// Makes this executable one replica of a replicated computation.
    pub fn set_replica(&mut self, replica: crate::kernel::ReplicaCtx) {
        self.ctx.replica = replica;
    }
}

/// The memory one plan runs in: its arena, its poolings' index buffers and its loops'
/// memory. Allocated once, when the graph is compiled, never while it runs.
struct Frame {
    arena: Vec<Storage>,
    /// The poolings' index buffers (`Plan::indices`).
    indices: Vec<Vec<u8>>,
    /// One per `Plan::loops`.
    loops: Vec<LoopFrame>,
}

/// A loop's memory: its condition's and body's frames, and the carried values (`carried`
/// the current ones, which both regions read as their parameters; `next` where the body's
/// results are gathered before they become current, since a body may return its
/// parameters in another order; empty for the values `LoopPlan::kept` keeps in place).
struct LoopFrame {
    cond: Frame,
    body: Frame,
    carried: Vec<Buffer>,
    next: Vec<Buffer>,
    /// Time in each of the body's steps, with `STRATA_NATIVE_PROFILE` (top-level loops).
    profile: Option<Vec<std::time::Duration>>,
    /// Body runs since compilation, for tests that a loop runs once per execution.
    #[cfg(test)]
    iterations: usize,
}

impl Frame {
    fn new(plan: &Plan, graph: &str) -> Result<Frame> {
        let arena = plan
            .slots
            .iter()
            .enumerate()
            .map(|(i, &(dtype, len))| {
                let what = || {
                    format!(
                        "native backend: buffer {i} of graph `{graph}` ({len} {dtype} elements)"
                    )
                };
                Storage::zeros(what, dtype, len)
            })
            .collect::<Result<_>>()?;
        let indices = plan.indices.iter().map(|&len| vec![0u8; len]).collect();
        let loops = plan
            .loops
            .iter()
            .enumerate()
            .map(|(l, lp)| {
                let inner = format!("{graph}/loop{l}");
                // A value kept in its buffer across iterations has no second one.
                let buffers = |second: bool| {
                    lp.carried
                        .iter()
                        .zip(&lp.kept)
                        .map(|(t, &kept)| {
                            let what = || format!("native backend: a carried {t} of `{inner}`");
                            let n = if second && kept { 0 } else { t.numel() };
                            Storage::zeros(what, t.dtype, n).map(|s| Buffer::native(t.clone(), s))
                        })
                        .collect::<Result<Vec<_>>>()
                };
                Ok(LoopFrame {
                    cond: Frame::new(&lp.cond, &format!("{inner}/cond"))?,
                    body: Frame::new(&lp.body, &format!("{inner}/body"))?,
                    carried: buffers(false)?,
                    next: buffers(true)?,
                    profile: None,
                    #[cfg(test)]
                    iterations: 0,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Frame {
            arena,
            indices,
            loops,
        })
    }
}

/// Operand lists longer than this go through a heap vector: `concatenate`, and the dynamic
/// slices of arrays of rank above 6 (one start per dimension). A scan's stacked rows
/// (`[T, batch, features]`: five operands to write one) stay on the stack, so a loop's
/// iteration allocates nothing.
const INLINE_OPERANDS: usize = 8;

/// The first `n` elements at `loc`, in a frame running `plan`.
fn data_of<'a>(
    loc: Loc,
    params: &'a [Buffer],
    arena: &'a [Storage],
    plan: &'a Plan,
    n: usize,
) -> Data<'a> {
    let Loc::Window(w) = loc else {
        return storage_of(loc, params, arena, &plan.consts).prefix(n);
    };
    let win = &plan.windows[w];
    let mut starts = [EMPTY_IN; crate::types::MAX_RANK];
    for (k, (&l, &v)) in win.starts.iter().zip(&win.start_nodes).enumerate() {
        if let Some(s) = starts.get_mut(k) {
            *s = In {
                data: storage_of(l, params, arena, &plan.consts).prefix(1),
                ty: &plan.nodes[v].ty,
            };
        }
    }
    let (dims, sizes) = (win.of.dims(), win.ty.dims());
    // The verifier made the starts integer scalars, one per dimension, so the clamping
    // cannot fail; were it to, the window's first run is still memory of the operand.
    let at = ops::dynamic_slice::clamped(&starts[..win.starts.len()], dims, sizes)
        .unwrap_or([0; crate::types::MAX_RANK]);
    let strides = crate::kernel::strided::strides(dims);
    let offset: usize = (0..dims.len()).map(|d| at[d] * strides[d] as usize).sum();
    storage_of(win.base, params, arena, &plan.consts)
        .range(offset, n)
        .unwrap_or(Data::F32(&[]))
}

/// Empty storage, standing in for an argument that is not native (which `check_args`
/// has already rejected, so this is never read).
static NO_STORAGE: Storage = Storage::F32(Vec::new());

fn storage_of<'a>(
    loc: Loc,
    params: &'a [Buffer],
    arena: &'a [Storage],
    consts: &'a [Storage],
) -> &'a Storage {
    match loc {
        Loc::Param(i) => params[i].native_storage().unwrap_or(&NO_STORAGE),
        Loc::Slot(i) => &arena[i],
        Loc::Const(i) => &consts[i],
        // Windows are never outputs nor loop results (the planner gives them neither).
        Loc::Window(_) => &NO_STORAGE,
    }
}

/// A copy of the first `n` elements (outputs are exact-size buffers).
fn exact_copy(s: &Storage, ty: &TensorType) -> Storage {
    s.prefix(ty.numel()).to_storage()
}

impl Executable for NativeExecutable {
    fn param_types(&self) -> &[TensorType] {
        &self.param_types
    }

    fn output_types(&self) -> &[TensorType] {
        &self.output_types
    }

    fn execute(&mut self, args: &mut [Buffer]) -> Result<Vec<Buffer>> {
        let mut outputs = Vec::new();
        self.execute_into(args, &mut outputs)?;
        Ok(outputs)
    }

    fn execute_into(&mut self, args: &mut [Buffer], outputs: &mut Vec<Buffer>) -> Result<()> {
        check_args("native", &self.param_types, args)?;
        crate::kernel::crew::wake();
        // In-place parameters live in their arena slot while the plan runs.
        for &(p, slot) in &self.plan.homes {
            std::mem::swap(args[p].native_storage_mut()?, &mut self.frame.arena[slot]);
        }
        let result = self.run(args, outputs);
        // Always move them back, so an error never strands a caller's data in the arena.
        for &(p, slot) in &self.plan.homes {
            std::mem::swap(args[p].native_storage_mut()?, &mut self.frame.arena[slot]);
        }
        let copied_updates = result?;
        for out in &self.plan.outputs {
            if let OutputPlan::Update {
                loc: Loc::Slot(s),
                param,
                swap: true,
            } = *out
            {
                std::mem::swap(args[param].native_storage_mut()?, &mut self.frame.arena[s]);
            }
        }
        for (param, s) in copied_updates {
            *args[param].native_storage_mut()? = s;
        }
        Ok(())
    }
}

impl NativeExecutable {
    /// Runs every step and copies out what is returned (into `outputs`, reusing its
    /// buffers) or copied into parameters (before any swap replaces what the copies read).
    fn run(
        &mut self,
        args: &mut [Buffer],
        outputs: &mut Vec<Buffer>,
    ) -> Result<Vec<(usize, Storage)>> {
        let params = args;
        let plan = &self.plan;
        if let Some(p) = &mut self.profile {
            p.resize(plan.steps.len(), Default::default());
        }
        run_steps(
            plan,
            &mut self.frame,
            params,
            &mut self.ctx,
            self.profile.as_mut(),
        )?;
        let mut copied_updates = Vec::new();
        let mut returned = 0;
        for (k, out) in plan.outputs.iter().enumerate() {
            let ty = &self.output_types[k];
            match *out {
                OutputPlan::Return { loc } => {
                    let src =
                        storage_of(loc, params, &self.frame.arena, &plan.consts).prefix(ty.numel());
                    // Reuse the caller's buffer from the last call when it fits.
                    let reused = outputs
                        .get_mut(returned)
                        .filter(|b| b.ty() == ty)
                        .and_then(|b| b.native_storage_mut().ok());
                    match reused {
                        Some(dst) => {
                            crate::kernel::data::with_same!(
                                "output",
                                src,
                                dst.data_mut(),
                                |a, d| d.copy_from_slice(a)
                            )
                        }
                        None => {
                            let b = Buffer::native(ty.clone(), src.to_storage());
                            if returned < outputs.len() {
                                outputs[returned] = b;
                            } else {
                                outputs.push(b);
                            }
                        }
                    }
                    returned += 1;
                }
                OutputPlan::Update {
                    loc,
                    param,
                    swap: false,
                } => {
                    let s =
                        exact_copy(storage_of(loc, params, &self.frame.arena, &plan.consts), ty);
                    copied_updates.push((param, s));
                }
                OutputPlan::Update { swap: true, .. } | OutputPlan::InPlace => {}
            }
        }
        outputs.truncate(returned);
        Ok(copied_updates)
    }
}

/// Runs every step of `plan` in `frame`, its parameters bound to `params`; with `profile`,
/// adds each step's time to its entry.
fn run_steps(
    plan: &Plan,
    frame: &mut Frame,
    params: &mut [Buffer],
    ctx: &mut KernelCtx,
    mut profile: Option<&mut Vec<std::time::Duration>>,
) -> Result<()> {
    for (index, step) in plan.steps.iter().enumerate() {
        let started = profile.as_ref().map(|_| std::time::Instant::now());
        let result = match step {
            Step::Kernel {
                node,
                out,
                ins,
                in_nodes,
                index: None,
            } => run_kernel(
                plan,
                &mut frame.arena,
                params,
                ctx,
                *node,
                *out,
                ins,
                in_nodes,
            ),
            Step::Kernel {
                node,
                out,
                ins,
                in_nodes,
                index: Some(index),
            } => run_pool_indexed(
                plan,
                &mut frame.arena,
                params,
                &mut frame.indices,
                (*node, *out, *index),
                (ins, in_nodes),
                &mut ctx.scratch_f32[0],
            ),
            Step::Loop {
                looped,
                ins,
                in_nodes,
                outs,
                entry,
                ..
            } => run_loop(
                plan,
                frame,
                params,
                ctx,
                *looped,
                (ins, in_nodes),
                outs,
                entry,
            ),
            Step::Fused {
                kernel,
                ins,
                outs,
                alias,
            } => run_fused(plan, &mut frame.arena, params, kernel, ins, outs, alias),
        };
        result.map_err(|e| match e {
            Error::Backend { backend, message } => {
                let what = match step {
                    Step::Kernel { node, .. } | Step::Loop { node, .. } => {
                        format!("node %{node} ({})", plan.nodes[*node].op.name())
                    }
                    Step::Fused { kernel, .. } => format!("fused nodes {:?}", kernel.members),
                };
                Error::Backend {
                    backend,
                    message: format!("{what}: {message}"),
                }
            }
            e => e,
        })?;
        if let (Some(p), Some(t)) = (profile.as_deref_mut(), started) {
            p[index] += t.elapsed();
        }
    }
    Ok(())
}

/// Copies `src` over `dst` (same type and length).
fn copy_into(what: &str, src: Data<'_>, dst: DataMut<'_>) -> Result<()> {
    crate::kernel::data::with_same!(what, src, dst, |a, d| d.copy_from_slice(a));
    Ok(())
}

/// Runs loop `looped` of `plan`: the carried buffers start as the values at `ins` (as
/// `entry` says: see `loop_entry`), the condition and body run over them (each plan in
/// its own frame, allocated at compile time, so an iteration allocates nothing) until the
/// condition gives false, and each `(k, slot)` of `outs` gets the final carried value `k`.
#[allow(clippy::too_many_arguments)]
fn run_loop(
    plan: &Plan,
    frame: &mut Frame,
    params: &mut [Buffer],
    ctx: &mut KernelCtx,
    looped: usize,
    (ins, in_nodes): (&[Loc], &[usize]),
    outs: &[(usize, usize)],
    entry: &[Entry],
) -> Result<()> {
    let lp = &plan.loops[looped];
    let Frame { arena, loops, .. } = frame;
    let lf = &mut loops[looped];
    // Copies first: one of them may read a location whose storage then moves in.
    for (k, (&l, &v)) in ins.iter().zip(in_nodes).enumerate() {
        if entry.get(k) != Some(&Entry::Copy) {
            continue;
        }
        let src = data_of(l, params, arena, plan, plan.nodes[v].ty.numel());
        copy_into(
            "while init",
            src,
            lf.carried[k].native_storage_mut()?.data_mut(),
        )?;
    }
    // The moves are their own inverse: the same exchange hands each storage back, even
    // when the loop fails (so no caller's data is stranded in the loop).
    let exchange = |params: &mut [Buffer], arena: &mut [Storage], lf: &mut LoopFrame| {
        let mut result = Ok(());
        for (k, &l) in ins.iter().enumerate() {
            if !matches!(entry.get(k), Some(Entry::Borrow | Entry::Move)) {
                continue;
            }
            let outer = match l {
                Loc::Param(i) => params[i].native_storage_mut(),
                Loc::Slot(i) => Ok(&mut arena[i]),
                Loc::Const(_) | Loc::Window(_) => Err(internal_loop(
                    "a constant or a window cannot move into a loop",
                )),
            };
            match (outer, lf.carried[k].native_storage_mut()) {
                (Ok(outer), Ok(inner)) => std::mem::swap(outer, inner),
                (Err(e), _) | (_, Err(e)) => result = Err(e),
            }
        }
        result
    };
    if let Err(e) = exchange(params, arena, lf) {
        // The same exchanges fail again: this moves back exactly those that were made.
        let _ = exchange(params, arena, lf);
        return Err(e);
    }
    let ran = iterate(lp, lf, ctx);
    // Results the loop leaves elsewhere than where they started, read before any storage
    // moves back.
    let copied = ran.and_then(|()| {
        for &(k, slot) in outs {
            if entry.get(k) == Some(&Entry::Move) {
                continue;
            }
            let n = lp.carried[k].numel();
            let src = lf.carried[k].native_storage()?.prefix(n);
            copy_into("while result", src, arena[slot].prefix_mut(n))?;
        }
        Ok(())
    });
    let back = exchange(params, arena, lf);
    copied.and(back)
}

fn internal_loop(what: &str) -> Error {
    Error::Backend {
        backend: "native",
        message: format!("internal: {what}"),
    }
}

/// Runs a loop's condition and body over its carried values until the condition gives
/// false.
fn iterate(lp: &LoopPlan, lf: &mut LoopFrame, ctx: &mut KernelCtx) -> Result<()> {
    loop {
        run_steps(&lp.cond, &mut lf.cond, &mut lf.carried, ctx, None)?;
        let Some(OutputPlan::Return { loc }) = lp.cond.outputs.first() else {
            return Err(internal_loop(
                "the loop's condition plan returns an output it cannot place",
            ));
        };
        match storage_of(*loc, &lf.carried, &lf.cond.arena, &lp.cond.consts).prefix(1) {
            Data::Bool([go]) => {
                if !*go {
                    break;
                }
            }
            other => {
                return Err(crate::kernel::data::type_mismatch(
                    "while condition",
                    DType::Bool,
                    other.dtype(),
                ))
            }
        }
        // The values the body changes in place live in its arena while it runs and its
        // results are gathered (an output may read such a value where it was written);
        // their buffers move back even when that fails.
        for &(p, slot) in &lp.body.homes {
            std::mem::swap(
                lf.carried[p].native_storage_mut()?,
                &mut lf.body.arena[slot],
            );
        }
        let ran = run_steps(
            &lp.body,
            &mut lf.body,
            &mut lf.carried,
            ctx,
            lf.profile.as_mut(),
        )
        .and_then(|()| gather(lp, &mut lf.body.arena, &lf.carried, &mut lf.next));
        for &(p, slot) in &lp.body.homes {
            std::mem::swap(
                lf.carried[p].native_storage_mut()?,
                &mut lf.body.arena[slot],
            );
        }
        ran?;
        for (k, (c, n)) in lf.carried.iter_mut().zip(&mut lf.next).enumerate() {
            if !lp.kept[k] {
                std::mem::swap(c, n);
            }
        }
        #[cfg(test)]
        {
            lf.iterations += 1;
        }
    }
    Ok(())
}

/// Gathers a loop body's results into the `next` buffers of the carried values the body
/// does not keep where they are.
fn gather(
    lp: &LoopPlan,
    arena: &mut [Storage],
    carried: &[Buffer],
    next: &mut [Buffer],
) -> Result<()> {
    for (k, out) in lp.body.outputs.iter().enumerate() {
        let loc = match *out {
            _ if lp.kept[k] => continue,
            OutputPlan::Return { loc } | OutputPlan::Update { loc, .. } => loc,
            OutputPlan::InPlace => {
                return Err(Error::Backend {
                    backend: "native",
                    message: "internal: a loop body's value written in place is not kept".into(),
                })
            }
        };
        let next = next[k].native_storage_mut()?;
        match loc {
            // Its own exact-size slot: the storage changes hands, nothing is copied.
            Loc::Slot(s) if lp.swap[k] => std::mem::swap(&mut arena[s], next),
            Loc::Slot(_) | Loc::Param(_) | Loc::Const(_) | Loc::Window(_) => {
                let src =
                    storage_of(loc, carried, arena, &lp.body.consts).prefix(lp.carried[k].numel());
                copy_into("while body", src, next.data_mut())?;
            }
        }
    }
    Ok(())
}

/// Runs one node's kernel into its slot.
#[allow(clippy::too_many_arguments)]
fn run_kernel(
    plan: &Plan,
    arena: &mut [Storage],
    params: &[Buffer],
    ctx: &mut KernelCtx,
    node: usize,
    out: usize,
    ins: &[Loc],
    in_nodes: &[usize],
) -> Result<()> {
    let kernel_grad = plan.kernel_grads[node].as_ref();
    let sum_of_products = plan.sums_of_products[node];
    if plan.fused_pools[node].is_some() {
        return Err(Error::Backend {
            backend: "native",
            message: "internal: a fused pooling step without its index".into(),
        });
    }
    let node = &plan.nodes[node];
    // Take the output out of the arena so the inputs can be borrowed beside it.
    let mut storage = std::mem::replace(&mut arena[out], Storage::F32(Vec::new()));
    let result = {
        let make = |k: usize| {
            let ty = &plan.nodes[in_nodes[k]].ty;
            In {
                data: data_of(ins[k], params, arena, plan, ty.numel()),
                ty,
            }
        };
        let out_view = storage.prefix_mut(node.ty.numel());
        // The planner gives an operand its reader's slot only for a window written in
        // place: the operand is already there.
        let in_place = ins.iter().position(|&l| l == Loc::Slot(out));
        if let Some(k) = in_place {
            match (&node.op, k, ins.len()) {
                (crate::ir::Op::DynamicUpdateSlice { .. }, 0, 2..=INLINE_OPERANDS) => {
                    let mut v = [EMPTY_IN; INLINE_OPERANDS];
                    for (k, x) in v.iter_mut().enumerate().take(ins.len()).skip(1) {
                        *x = make(k);
                    }
                    ops::dynamic_slice::native_update_in_place(
                        &node.ty,
                        v[1],
                        &v[2..ins.len()],
                        out_view,
                    )
                }
                (crate::ir::Op::DynamicUpdateSlice { .. }, 0, _) => {
                    let v: Vec<In<'_>> = (1..ins.len()).map(make).collect();
                    match v.split_first() {
                        Some((update, starts)) => ops::dynamic_slice::native_update_in_place(
                            &node.ty, *update, starts, out_view,
                        ),
                        None => Err(internal_in_place(node)),
                    }
                }
                _ => Err(internal_in_place(node)),
            }
        } else if let Some(lead) = sum_of_products {
            match ins.len() {
                2 => ops::reduce::native_sum_of_products(make(0), make(1), lead, out_view),
                n => Err(Error::Backend {
                    backend: "native",
                    message: format!("internal: a sum of products of {n} operands"),
                }),
            }
        } else if let (Some(p), 2) = (kernel_grad, ins.len()) {
            ops::convolution::native_kernel_grad(make(0), make(1), p, &node.ty, out_view, ctx)
        } else if ins.len() <= INLINE_OPERANDS {
            let mut v = [EMPTY_IN; INLINE_OPERANDS];
            for (k, x) in v.iter_mut().enumerate().take(ins.len()) {
                *x = make(k);
            }
            ops::native(&node.op, &v[..ins.len()], out_view, &node.ty, ctx)
        } else {
            let v: Vec<In<'_>> = (0..ins.len()).map(make).collect();
            ops::native(&node.op, &v, out_view, &node.ty, ctx)
        }
    };
    arena[out] = storage;
    result
}

/// A kernel that finds an operand in its own output slot but cannot write over it.
fn internal_in_place(node: &crate::ir::Node) -> Error {
    Error::Backend {
        backend: "native",
        message: format!(
            "internal: {} was planned to write over one of its operands",
            node.op.name()
        ),
    }
}

/// Runs a pooling that records its selections, or the gradient that reads them.
fn run_pool_indexed(
    plan: &Plan,
    arena: &mut [Storage],
    params: &[Buffer],
    indices: &mut [Vec<u8>],
    (node, out, index): (usize, usize, PoolIndex),
    (ins, in_nodes): (&[Loc], &[usize]),
    scratch: &mut Vec<f32>,
) -> Result<()> {
    use super::bias_relu_pool::Fused;
    use crate::ir::Op;
    use crate::ops::reduce_window;
    let fused = plan.fused_pools[node].as_ref();
    let forward = plan.kernel_grads[node].as_ref();
    let node = &plan.nodes[node];
    // The window and operand type (the convolution's output) of a fused gradient.
    let gradient_of = |g: usize| match &plan.nodes[g].op {
        Op::SelectAndScatterAdd { window, .. } => Ok((&plan.nodes[g].ty, window)),
        op => Err(Error::Backend {
            backend: "native",
            message: format!("internal: {} is no pooling gradient", op.name()),
        }),
    };
    let mut storage = std::mem::replace(&mut arena[out], Storage::F32(Vec::new()));
    let result = {
        let input = |k: usize| {
            let ty = &plan.nodes[in_nodes[k]].ty;
            In {
                data: data_of(ins[k], params, arena, plan, ty.numel()),
                ty,
            }
        };
        let out_view = storage.prefix_mut(node.ty.numel());
        match (&node.op, index, fused) {
            (
                Op::ReduceWindow { window, .. },
                PoolIndex::Record(i),
                Some(Fused::Pool { f, .. }),
            ) => {
                let index = &mut indices[i];
                reduce_window::native_recording_bias_relu(
                    input(0),
                    input(1),
                    window,
                    f,
                    &node.ty,
                    out_view,
                    index,
                )
            }
            (
                Op::ReduceWindow { window, .. },
                PoolIndex::Record(i),
                Some(Fused::ConvPool { f, conv, .. }),
            ) => reduce_window::native_recording_conv_bias_relu(
                [input(0), input(1), input(2)],
                conv,
                window,
                f,
                &node.ty,
                out_view,
                &mut indices[i],
                scratch,
            ),
            (
                Op::SelectAndScatterAdd {
                    window, operand, ..
                },
                PoolIndex::Use(i),
                Some(Fused::Gradient { f, .. }),
            ) => {
                // Not read (see `Fused::reads`): its type is the gradient's.
                let operand = &plan.nodes[operand.index()].ty;
                reduce_window::native_select_and_scatter_bias_relu(
                    input(0),
                    operand,
                    window,
                    f,
                    &indices[i],
                    out_view,
                )
            }
            (
                Op::Convolution { .. },
                PoolIndex::Use(i),
                Some(Fused::PooledKernelGrad { gradient, f, .. }),
            ) => match (gradient_of(*gradient), forward) {
                (Ok((operand, window)), Some(forward)) => reduce_window::native_pooled_kernel_grad(
                    input(0),
                    input(1),
                    (operand, window, f),
                    forward,
                    &indices[i],
                    &node.ty,
                    out_view,
                    scratch,
                ),
                (Err(e), _) => Err(e),
                (_, None) => Err(Error::Backend {
                    backend: "native",
                    message: "internal: a pooled kernel gradient without its convolution".into(),
                }),
            },
            (
                Op::Convolution { params, .. },
                PoolIndex::Use(i),
                Some(Fused::PooledInputGrad { gradient, f, .. }),
            ) => gradient_of(*gradient).and_then(|(operand, window)| {
                reduce_window::native_pooled_input_grad(
                    input(0),
                    input(1),
                    (operand, window, f),
                    params,
                    &indices[i],
                    &node.ty,
                    out_view,
                    scratch,
                )
            }),
            (
                Op::Reduce { .. },
                PoolIndex::Use(i),
                Some(Fused::PooledBiasGrad { gradient, f, .. }),
            ) => gradient_of(*gradient).and_then(|(operand, window)| {
                reduce_window::native_pooled_bias_grad(
                    input(0),
                    (operand, window, f),
                    &indices[i],
                    out_view,
                    scratch,
                )
            }),
            (Op::ReduceWindow { op, window, .. }, PoolIndex::Record(i), None) => {
                let index = &mut indices[i];
                reduce_window::native_recording(*op, input(0), window, &node.ty, out_view, index)
            }
            (Op::SelectAndScatterAdd { window, .. }, PoolIndex::Use(i), None) => {
                let operand = &plan.nodes[in_nodes[1]].ty;
                let index = &indices[i];
                reduce_window::native_select_and_scatter_indexed(
                    input(0),
                    operand,
                    window,
                    index,
                    out_view,
                )
            }
            (op, _, _) => Err(Error::Backend {
                backend: "native",
                message: format!("{} has no pooling index", op.name()),
            }),
        }
    };
    arena[out] = storage;
    result
}

/// Fused kernels with at most this many inputs and outputs keep their views on the stack.
const INLINE_FUSED: usize = 16;
/// Up to this many inputs still stay on the stack, in an array set up only when needed
/// (a train step's last scalar kernel reads every check's partial sum).
const INLINE_FUSED_WIDE: usize = 64;

/// Runs a fused elementwise kernel into its output slots.
fn run_fused(
    plan: &Plan,
    arena: &mut [Storage],
    params: &[Buffer],
    k: &FusedKernel,
    ins: &[Loc],
    outs: &[usize],
    alias: &[Option<usize>],
) -> Result<()> {
    // Nothing to compute, and the kernel's loads assume an element to read.
    if k.n == 0 {
        return Ok(());
    }
    let mut taken_inline: [Storage; INLINE_FUSED] =
        std::array::from_fn(|_| Storage::F32(Vec::new()));
    let mut taken_heap: Vec<Storage>;
    let taken: &mut [Storage] = if outs.len() <= INLINE_FUSED {
        &mut taken_inline[..outs.len()]
    } else {
        taken_heap = (0..outs.len()).map(|_| Storage::F32(Vec::new())).collect();
        &mut taken_heap
    };
    for (t, &o) in taken.iter_mut().zip(outs) {
        *t = std::mem::replace(&mut arena[o], Storage::F32(Vec::new()));
    }
    let result = {
        let data = |i: usize| {
            if alias[i].is_some() {
                return Data::F32(&[]); // read from the output it shares storage with
            }
            data_of(
                ins[i],
                params,
                arena,
                plan,
                plan.nodes[k.inputs[i].0].ty.numel(),
            )
        };
        let mut in_inline = [Data::F32(&[]); INLINE_FUSED];
        let mut in_wide: [Data<'_>; INLINE_FUSED_WIDE];
        let in_heap: Vec<Data<'_>>;
        let inputs: &[Data<'_>] = if ins.len() <= INLINE_FUSED {
            for (i, d) in in_inline.iter_mut().enumerate().take(ins.len()) {
                *d = data(i);
            }
            &in_inline[..ins.len()]
        } else if ins.len() <= INLINE_FUSED_WIDE {
            in_wide = [Data::F32(&[]); INLINE_FUSED_WIDE];
            for (i, d) in in_wide.iter_mut().enumerate().take(ins.len()) {
                *d = data(i);
            }
            &in_wide[..ins.len()]
        } else {
            in_heap = (0..ins.len()).map(data).collect();
            &in_heap
        };
        let mut out_inline: [DataMut<'_>; INLINE_FUSED] =
            std::array::from_fn(|_| DataMut::F32(&mut []));
        let mut out_heap: Vec<DataMut<'_>>;
        let outputs: &mut [DataMut<'_>] = if taken.len() <= INLINE_FUSED {
            for (o, s) in out_inline.iter_mut().zip(taken.iter_mut()) {
                *o = s.prefix_mut(k.n);
            }
            &mut out_inline[..outs.len()]
        } else {
            out_heap = taken.iter_mut().map(|s| s.prefix_mut(k.n)).collect();
            &mut out_heap
        };
        match k.t {
            DType::F64 => fuse::run::<f64>(k, inputs, alias, outputs),
            _ => fuse::run::<f32>(k, inputs, alias, outputs),
        }
    };
    for (t, &o) in taken.iter_mut().zip(outs) {
        arena[o] = std::mem::replace(t, Storage::F32(Vec::new()));
    }
    result
}

static EMPTY_TY: TensorType = TensorType {
    dtype: crate::ir::DType::F32,
    shape: crate::ir::Shape(Vec::new()),
};

const EMPTY_IN: In<'static> = In {
    data: Data::F32(&[]),
    ty: &EMPTY_TY,
};
