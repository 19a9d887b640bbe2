//! Planning: from a verified graph to an ordered list of kernel calls over an arena.
//!
//! Each node is treated by its op's fusion class (`ir::FusionClass`, declared with the op).
//!
//! 1. Merge nodes that repeat a computation (`ir::canonical`) and drop dead nodes;
//!    sources (parameters, constants) and views (reshapes, stop-gradients) need no kernel
//!    (views share their operand's memory).
//! 2. Group elementwise nodes into fused kernels (see `fuse`), scheduling each group just
//!    before the first node outside it that reads it. Broadcasts whose readers are all
//!    fused become read patterns and are never materialised.
//! 3. Give every value that some later step reads a slot in an arena, reusing a slot as
//!    soon as its value is dead.

use super::bias_relu_pool::Fused;
use super::fuse::{self, FusedKernel, Pattern};
use super::fused_adam;
use super::loop_entry::{self, Entry};
use super::window::{self, Window};
use crate::backend::CompileOptions;
use crate::ir::{DType, FusionClass, Graph, Node, Op, Source, Value};
use crate::kernel::data::Storage;

/// Where a value lives while the plan runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    /// Execution argument `i`.
    Param(usize),
    /// Arena slot `i`.
    Slot(usize),
    /// Constant `i`, materialised at compile time.
    Const(usize),
    /// `Plan::windows[i]`: a run of an argument's or constant's memory (see `window`).
    Window(usize),
}

/// One kernel call.
#[derive(Debug)]
pub(crate) enum Step {
    /// Node `node` writes arena slot `out`, reading `ins` (the values of nodes `in_nodes`).
    Kernel {
        node: usize,
        out: usize,
        ins: Vec<Loc>,
        in_nodes: Vec<usize>,
        /// A max/min pooling and its gradient paired (see [`pair_pools`]).
        index: Option<PoolIndex>,
    },
    /// A while loop (all its live siblings): starts the loop's carried values from `ins`
    /// (the values of `in_nodes`, the carried values' initial ones) as `entry` says, runs
    /// `Plan::loops[looped]` until its condition is false, and writes carried value `k`
    /// into arena slot `s` for each `(k, s)` of `outs`. `node` is the first live sibling.
    Loop {
        node: usize,
        looped: usize,
        ins: Vec<Loc>,
        in_nodes: Vec<usize>,
        outs: Vec<(usize, usize)>,
        entry: Vec<Entry>,
    },
    /// A fused elementwise kernel: reads `ins` (one per kernel input), writes `outs`
    /// (one slot per kernel output); `alias[i]` is the output an input shares storage with.
    Fused {
        kernel: FusedKernel,
        ins: Vec<Loc>,
        outs: Vec<usize>,
        alias: Vec<Option<usize>>,
    },
}

/// How a graph output reaches the caller.
#[derive(Debug)]
pub(crate) enum OutputPlan {
    /// Becomes the new value of parameter `param`; `swap` if the value owns an exact-size
    /// slot no other output shares (then the slot and the parameter exchange storage, no
    /// copy), else it is copied.
    Update { loc: Loc, param: usize, swap: bool },
    /// Already written where parameter `param` lives (its home slot moves back).
    InPlace,
    /// Returned to the caller as a new buffer.
    Return { loc: Loc },
}

/// How a pooling step shares its selections with its gradient: through index buffer `i`
/// of the plan (`Plan::indices`), which the pooling writes and the gradient reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PoolIndex {
    Record(usize),
    Use(usize),
}

#[derive(Debug)]
pub(crate) struct Plan {
    pub nodes: Vec<Node>,
    pub steps: Vec<Step>,
    /// Element type and length of each arena slot.
    pub slots: Vec<(DType, usize)>,
    pub consts: Vec<Storage>,
    pub outputs: Vec<OutputPlan>,
    /// `(param, slot)`: donated parameters whose storage moves into `slot` for the
    /// execution and back afterwards.
    pub homes: Vec<(usize, usize)>,
    /// Per node: the forward parameters when the node is a convolution's kernel gradient
    /// computed from the untransposed input and cotangent (see `conv_grad`).
    pub kernel_grads: Vec<Option<crate::ir::ConvParams>>,
    /// Per node: the leading axes summed when the node is a sum of a product computed
    /// without writing the product (see `sum_of_products`).
    pub sums_of_products: Vec<Option<usize>>,
    /// Byte length of each pooling index buffer.
    pub indices: Vec<usize>,
    /// The loops' condition and body, planned once, each run by its `Step::Loop`.
    pub loops: Vec<LoopPlan>,
    /// Per node: the max pooling with a bias and ReLU fused in, or its gradient with the
    /// ReLU's (see `bias_relu_pool`).
    pub fused_pools: Vec<Option<Fused>>,
    /// The dynamic slices read where they lie (`Loc::Window`).
    pub windows: Vec<Window>,
}

/// A while loop's regions, each planned as a graph of its own (with its own arena when it
/// runs), their parameters bound to the loop's carried values.
///
/// The body is planned with each of its outputs as the update of the parameter of the same
/// place, so a carried value the body writes part of (`dynamic_update_slice`, a scan's
/// stacked outputs) or updates element by element after its last read is changed where it
/// lives (the parameter's home, `Plan::homes`, into which the loop moves the carried
/// buffer for each run of the body).
#[derive(Debug)]
pub(crate) struct LoopPlan {
    pub cond: Plan,
    pub body: Plan,
    /// The carried values' types.
    pub carried: Vec<crate::ir::TensorType>,
    /// Per body output: whether it owns an arena slot of exactly its size that no other
    /// output shares, so that slot and the carried buffer can exchange storage instead of
    /// being copied (the body writes every slot afresh each iteration).
    pub swap: Vec<bool>,
    /// Per carried value: whether it stays in its buffer from one iteration to the next,
    /// because the body returns it as it came (a scan's weights and stacked inputs) or
    /// changes it in place. Nothing is copied or exchanged for it, and it needs no second
    /// buffer.
    pub kept: Vec<bool>,
    /// Per carried value: whether nothing reads it (see [`unread`]), so it needs no
    /// initial value either.
    pub unread: Vec<bool>,
    /// Per carried value: whether the body returns it as it came and never writes it (a
    /// scan's stacked inputs), so its buffer may be borrowed from where the loop's initial
    /// value lives (`Entry::Borrow`).
    pub read_only: Vec<bool>,
}

/// The carried values of a loop that nothing reads: not among the loop's results the graph
/// uses (`used`), not read by the condition, and in the body feeding nothing but their own
/// next value. A scan stacks its carried values for reverse mode (the residuals), which
/// only a loop differentiated again reads, and a backward scan carries the stacked
/// cotangents of its weights, which nothing reads.
fn unread(cond: &Graph, body: &Graph, used: &[bool]) -> Vec<bool> {
    // Whether parameter `k` of `g` reaches any output but (with `own`) output `k`.
    let reaches = |g: &Graph, k: usize, own: bool| -> bool {
        let Some(&p) = g.params().get(k) else {
            return true;
        };
        let mut hit = vec![false; g.nodes().len()];
        hit[p.index()] = true;
        for (i, nd) in g.nodes().iter().enumerate().skip(p.index() + 1) {
            hit[i] = nd.op.operands().iter().any(|v| hit[v.index()]);
        }
        g.outputs()
            .iter()
            .enumerate()
            .any(|(j, o)| hit[o.index()] && !(own && j == k))
    };
    used.iter()
        .enumerate()
        .map(|(k, &u)| !u && !reaches(cond, k, false) && !reaches(body, k, true))
        .collect()
}

impl LoopPlan {
    /// `used`: per carried value, whether the graph reads the loop's final value of it.
    fn new(
        cond: &Graph,
        body: &Graph,
        carried: Vec<crate::ir::TensorType>,
        used: &[bool],
    ) -> LoopPlan {
        let unread = unread(cond, body, used);
        let cond = plan(cond, &CompileOptions::default());
        let in_place = CompileOptions {
            updates: (0..carried.len()).map(|k| (k, k)).collect(),
        };
        // The body returns an unread value as it came: its update is dead, and the value is
        // kept in its buffer.
        let mut pruned = body.clone();
        let outputs: Vec<Value> = pruned
            .outputs()
            .iter()
            .enumerate()
            .map(|(k, &o)| match pruned.params().get(k) {
                Some(&p) if unread[k] => p,
                _ => o,
            })
            .collect();
        let body = match pruned.set_outputs(outputs) {
            Ok(()) => plan(&pruned, &in_place),
            Err(_) => plan(body, &in_place),
        };
        let slot_of = |o: &OutputPlan| match o {
            OutputPlan::Return {
                loc: Loc::Slot(s), ..
            }
            | OutputPlan::Update {
                loc: Loc::Slot(s), ..
            } => Some(*s),
            OutputPlan::Return { .. } | OutputPlan::Update { .. } | OutputPlan::InPlace => None,
        };
        // A home slot holds a carried buffer only while the body runs: never exchanged.
        let slots: Vec<Option<usize>> = body
            .outputs
            .iter()
            .map(|o| slot_of(o).filter(|s| !body.homes.iter().any(|h| h.1 == *s)))
            .collect();
        let swap = slots
            .iter()
            .zip(&carried)
            .map(|(s, t)| {
                s.is_some_and(|s| {
                    body.slots[s].1 == t.numel()
                        && slots.iter().filter(|&&o| o == Some(s)).count() == 1
                })
            })
            .collect();
        let kept = body
            .outputs
            .iter()
            .enumerate()
            .map(|(k, o)| match *o {
                OutputPlan::InPlace => true,
                OutputPlan::Return { loc } | OutputPlan::Update { loc, .. } => loc == Loc::Param(k),
            })
            .collect();
        // The body's steps never write a parameter outside its homes, nor does the
        // condition (planned with no updates, so it has none).
        let read_only = body
            .outputs
            .iter()
            .enumerate()
            .map(|(k, o)| match *o {
                OutputPlan::InPlace => false,
                OutputPlan::Return { loc } | OutputPlan::Update { loc, .. } => {
                    loc == Loc::Param(k) && !body.homes.iter().any(|&(p, _)| p == k)
                }
            })
            .collect();
        LoopPlan {
            cond,
            body,
            carried,
            swap,
            kept,
            unread,
            read_only,
        }
    }
}

/// A scheduled unit of work.
enum Unit {
    Kernel(usize),
    Group(usize),
}

struct Group {
    members: Vec<usize>,
    n: usize,
    t: Option<DType>,
    open: bool,
}

pub(crate) fn plan(g: &Graph, options: &CompileOptions) -> Plan {
    // Nodes that repeat an earlier computation read (and are) that computation instead;
    // the repeats are left dead.
    let canon = crate::ir::canonical(g.nodes());
    let same = |v: Value| Value::from_index(canon[v.index()]);
    let mut nodes: Vec<Node> = g
        .nodes()
        .iter()
        .map(|nd| Node {
            op: nd.op.map_operands(same),
            ty: nd.ty.clone(),
        })
        .collect();
    // Before liveness, so the transposes a kernel gradient no longer reads are dead.
    let kernel_grads = super::conv_grad::rewrite(&mut nodes);
    let graph_outputs: Vec<Value> = g.outputs().iter().map(|&o| same(o)).collect();
    // Likewise the activations and gates a fused pooling and its gradient absorb.
    let mut fused_pools = super::bias_relu_pool::rewrite(&mut nodes, &graph_outputs);
    // And the convolutions computed inside their fused poolings.
    super::conv_pool::rewrite(&nodes, &graph_outputs, &kernel_grads, &mut fused_pools);
    // And the gated cotangents whose kernel, input and bias gradients come from the pooled
    // one.
    super::conv_pool_grad::rewrite(&nodes, &graph_outputs, &kernel_grads, &mut fused_pools);
    // And the products summed where they are computed.
    let sums_of_products =
        super::sum_of_products::rewrite(&mut nodes, &graph_outputs, &fused_pools);
    let n = nodes.len();
    // What a node reads: its op's operands, or what its fused kernel reads instead.
    let operands = |i: usize| -> Vec<Value> {
        match &fused_pools[i] {
            Some(f) => f.reads(&nodes[i].op),
            None => nodes[i].op.operands(),
        }
    };

    // Live nodes and their live consumers.
    let mut live = vec![false; n];
    for &o in &graph_outputs {
        live[o.index()] = true;
    }
    for i in (0..n).rev() {
        if live[i] {
            for v in operands(i) {
                live[v.index()] = true;
            }
        }
    }
    // The live siblings of each loop are one step, led by the first of them: `siblings`
    // lists a leader's siblings (itself first), `follower` marks the others.
    let mut siblings: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut follower = vec![false; n];
    let mut leaders: Vec<usize> = Vec::new();
    for i in (0..n).filter(|&i| live[i]) {
        if let Op::While { .. } = nodes[i].op {
            match leaders
                .iter()
                .find(|&&l| crate::ops::while_loop::same_loop(&nodes[l].op, &nodes[i].op))
            {
                Some(&l) => {
                    siblings[l].push(i);
                    follower[i] = true;
                }
                None => {
                    siblings[i].push(i);
                    leaders.push(i);
                }
            }
        }
    }
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in (0..n).filter(|&i| live[i]) {
        for v in operands(i) {
            users[v.index()].push(i);
        }
    }

    // What each node is to the planner: its op's fusion class.
    let class: Vec<FusionClass<'_>> = nodes.iter().map(|nd| nd.op.fusion()).collect();
    // Views share their operand's memory.
    let mut root: Vec<usize> = (0..n).collect();
    for i in 0..n {
        match class[i] {
            FusionClass::View(x) => root[i] = root[x.index()],
            FusionClass::Source(_)
            | FusionClass::Broadcast { .. }
            | FusionClass::Elementwise(_)
            | FusionClass::Kernel => {}
        }
    }
    // Sources and views need no kernel.
    let no_kernel = |i: usize| match class[i] {
        FusionClass::Source(_) | FusionClass::View(_) => true,
        FusionClass::Broadcast { .. } | FusionClass::Elementwise(_) | FusionClass::Kernel => false,
    };
    let is_view = |i: usize| match class[i] {
        FusionClass::View(_) => true,
        FusionClass::Source(_)
        | FusionClass::Broadcast { .. }
        | FusionClass::Elementwise(_)
        | FusionClass::Kernel => false,
    };
    let fusion: Vec<Option<Option<DType>>> = (0..n).map(|i| fuse::fusion_type(&nodes, i)).collect();
    // A broadcast is a read pattern when everything that reads it (through views) fuses:
    // its operand, read with the pattern.
    let mut pattern: Vec<Option<(Value, Pattern)>> = vec![None; n];
    for i in (0..n).filter(|&i| live[i]) {
        if let Some(p) = fuse::broadcast_pattern(&nodes, i) {
            let mut readers = Vec::new();
            let mut stack = vec![i];
            while let Some(v) = stack.pop() {
                for &u in &users[v] {
                    if is_view(u) {
                        stack.push(u);
                    } else {
                        readers.push(u);
                    }
                }
            }
            let x_type = nodes[i].ty.dtype;
            let fits = x_type == DType::Bool || x_type.is_arith_float();
            let is_output = graph_outputs.iter().any(|o| root[o.index()] == i);
            if fits
                && !is_output
                && !readers.is_empty()
                && readers.iter().all(|&u| fusion[u].is_some())
            {
                pattern[i] = Some(p);
            }
        }
    }
    // What memory an operand is read from, and how, by a fused kernel of `len` elements.
    let source = |v: usize, len: usize| -> (usize, Pattern) {
        let r = root[v];
        match pattern[r] {
            Some((x, p)) => (root[x.index()], p),
            None if nodes[r].ty.numel() == 1 => (r, Pattern { q: 1, p: 1 }),
            None => (r, Pattern::full(len)),
        }
    };

    // ---- schedule
    let mut groups: Vec<Group> = Vec::new();
    let mut group_of: Vec<Option<usize>> = vec![None; n];
    let mut units: Vec<Unit> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    let close =
        |gid: usize, groups: &mut Vec<Group>, open: &mut Vec<usize>, units: &mut Vec<Unit>| {
            if groups[gid].open {
                groups[gid].open = false;
                open.retain(|&o| o != gid);
                units.push(Unit::Group(gid));
            }
        };
    for i in (0..n).filter(|&i| live[i]) {
        if no_kernel(i) || pattern[i].is_some() || follower[i] {
            continue;
        }
        let len = nodes[i].ty.numel();
        match fusion[i] {
            Some(t) => {
                // Open groups this node can extend (its operands read whole, same size and
                // type); open groups it reads any other way must finish first.
                let mut join: Vec<usize> = Vec::new();
                let mut to_close = Vec::new();
                for v in nodes[i].op.operands() {
                    let (src, pat) = source(v.index(), len);
                    let Some(gid) = group_of[src].filter(|&gid| groups[gid].open) else {
                        continue;
                    };
                    let compatible = pat == Pattern::full(len)
                        && groups[gid].n == len
                        && (t.is_none() || groups[gid].t.is_none() || groups[gid].t == t);
                    if compatible {
                        if !join.contains(&gid) {
                            join.push(gid);
                        }
                    } else {
                        to_close.push(gid);
                    }
                }
                for gid in to_close {
                    close(gid, &mut groups, &mut open, &mut units);
                }
                join.retain(|&g| groups[g].open);
                // Two open groups never read each other (a read would have closed the one
                // read), so the node can merge all it extends into one.
                let types: Vec<Option<DType>> = join.iter().map(|&g| groups[g].t).collect();
                let mergeable = types
                    .iter()
                    .flatten()
                    .all(|ty| Some(*ty) == types.iter().flatten().next().copied());
                let gid = match join.first() {
                    Some(&first) if mergeable => {
                        for &other in &join[1..] {
                            let moved = std::mem::take(&mut groups[other].members);
                            for &m in &moved {
                                group_of[m] = Some(first);
                            }
                            groups[first].members.extend(moved);
                            groups[first].t = groups[first].t.or(groups[other].t);
                            groups[other].open = false;
                            open.retain(|&o| o != other);
                        }
                        groups[first].members.sort_unstable();
                        first
                    }
                    _ => {
                        for gid in join {
                            close(gid, &mut groups, &mut open, &mut units);
                        }
                        groups.push(Group {
                            members: Vec::new(),
                            n: len,
                            t: None,
                            open: true,
                        });
                        open.push(groups.len() - 1);
                        groups.len() - 1
                    }
                };
                groups[gid].members.push(i);
                if groups[gid].t.is_none() {
                    groups[gid].t = t;
                }
                group_of[i] = Some(gid);
            }
            None => {
                for v in operands(i) {
                    if let Some(gid) = group_of[root[v.index()]] {
                        close(gid, &mut groups, &mut open, &mut units);
                    }
                }
                units.push(Unit::Kernel(i));
            }
        }
    }
    for gid in open.clone() {
        close(gid, &mut groups, &mut open, &mut units);
    }

    // ---- what each unit reads, and which values must be in memory
    let mut is_output = vec![false; n];
    for &o in &graph_outputs {
        is_output[root[o.index()]] = true;
    }
    let reads: Vec<Vec<usize>> = units
        .iter()
        .map(|u| match u {
            Unit::Kernel(i) => operands(*i).iter().map(|v| root[v.index()]).collect(),
            Unit::Group(gid) => groups[*gid]
                .members
                .iter()
                .flat_map(|&m| nodes[m].op.operands())
                .map(|v| source(v.index(), groups[*gid].n).0)
                .filter(|&src| group_of[src] != Some(*gid))
                .collect(),
        })
        .collect();
    let mut materialize = is_output.clone();
    for r in reads.iter().flatten() {
        materialize[*r] = true;
    }
    for u in &units {
        if let Unit::Kernel(i) = u {
            materialize[*i] = true;
            for &s in &siblings[*i] {
                materialize[s] = true;
            }
        }
    }
    // Dynamic slices read in place (see `window`): of an argument or a constant, not an
    // output, their starts not windows themselves.
    let mut window_of: Vec<Option<(usize, Vec<usize>)>> = vec![None; n];
    #[cfg(test)]
    let units_read_in_place: &[Unit] = if super::testing::windows_disabled() {
        &[]
    } else {
        &units
    };
    #[cfg(not(test))]
    let units_read_in_place: &[Unit] = &units;
    for u in units_read_in_place {
        let Unit::Kernel(i) = *u else { continue };
        let plain = siblings[i].is_empty()
            && !is_output[i]
            && fused_pools[i].is_none()
            && kernel_grads[i].is_none();
        let Some((x, starts)) = window::candidate(&nodes, i).filter(|_| plain) else {
            continue;
        };
        let base = root[x];
        let starts: Vec<usize> = starts.iter().map(|&v| root[v]).collect();
        let stable = matches!(
            class[base],
            FusionClass::Source(Source::Argument(_) | Source::Literal(_))
        );
        if stable && starts.iter().all(|&v| window_of[v].is_none()) {
            window_of[i] = Some((base, starts));
        }
    }
    let mut last_use = vec![0usize; n];
    for (pos, r) in reads.iter().enumerate() {
        for &v in r {
            last_use[v] = last_use[v].max(pos);
        }
    }
    for i in 0..n {
        if is_output[i] {
            last_use[i] = usize::MAX;
        }
    }

    // ---- in-place updates
    // A donated parameter whose new value a fused kernel computes, when that kernel is the
    // last to read the parameter and reads it only element by element, is updated where
    // it lives: the parameter's storage moves into an arena slot for the execution and the
    // kernel writes the new value over the old one, chunk by chunk after reading it.
    // Likewise when its new value is a `dynamic_update_slice` of it that is the last to
    // read it: only the window is written (a scan's stacked outputs, one row per
    // iteration of its loop).
    let mut position: Vec<Option<usize>> = vec![None; groups.len()];
    let mut kernel_position: Vec<Option<usize>> = vec![None; n];
    for (pos, u) in units.iter().enumerate() {
        match u {
            Unit::Group(gid) => position[*gid] = Some(pos),
            Unit::Kernel(i) => kernel_position[*i] = Some(pos),
        }
    }
    // Whether node `v` is a `dynamic_update_slice` of the memory of node `x` that reads
    // that memory as its operand only (so it may write its window into that memory).
    let updates_window_of = |v: usize, x: usize| match &nodes[v].op {
        Op::DynamicUpdateSlice {
            x: operand,
            update,
            starts,
        } => {
            root[operand.index()] == x
                && root[update.index()] != x
                && starts.iter().all(|s| root[s.index()] != x)
        }
        _ => false,
    };
    // Likewise when its new value is a loop's result whose initial value is the parameter
    // (read by no other of that loop's initial values): the loop starts from the
    // parameter's storage and leaves its result there (`Entry::Move`).
    let loop_position = |v: usize, x: usize| match &nodes[v].op {
        Op::While { init, result, .. } => {
            let from_x = |u: &Value| root[u.index()] == x;
            let own = init.get(*result).is_some_and(from_x);
            let leader = (0..n).find(|&l| siblings[l].contains(&v));
            leader
                .and_then(|l| kernel_position[l])
                .filter(|_| own && init.iter().filter(|u| from_x(u)).count() == 1)
        }
        _ => None,
    };
    let mut in_place: Vec<(usize, usize)> = Vec::new(); // (param index, value node)
    for &(o, p) in &options.updates {
        let v = root[graph_outputs[o].index()];
        let pnode = g.params()[p].index();
        let pos = match group_of[v] {
            Some(gid) => {
                let grp = &groups[gid];
                let reads_whole_only = grp.members.iter().all(|&m| {
                    nodes[m].op.operands().iter().all(|u| {
                        let (src, pat) = source(u.index(), grp.n);
                        src != pnode || pat == Pattern::full(grp.n)
                    })
                });
                position[gid].filter(|_| reads_whole_only)
            }
            None => kernel_position[v]
                .filter(|_| updates_window_of(v, pnode))
                .or_else(|| loop_position(v, pnode)),
        };
        let Some(pos) = pos else { continue };
        let value_taken = in_place.iter().any(|&(_, w)| w == v);
        if live[pnode] && !is_output[pnode] && last_use[pnode] <= pos && !value_taken {
            in_place.push((p, v));
        }
    }

    // An argument updated in place changes while the plan runs: a window of it, or at
    // starts read from it, is copied (the update was placed as if every slice were).
    // The others keep their operand and starts in memory until their last reader.
    let updated = |v: usize| in_place.iter().any(|&(p, _)| g.params()[p].index() == v);
    for w in window_of.iter_mut() {
        if w.as_ref()
            .is_some_and(|(base, starts)| std::iter::once(base).chain(starts).any(|&v| updated(v)))
        {
            *w = None;
        }
    }
    for (pos, r) in reads.iter().enumerate() {
        for &v in r {
            if let Some((base, starts)) = &window_of[v] {
                for &u in std::iter::once(base).chain(starts) {
                    last_use[u] = last_use[u].max(pos);
                }
            }
        }
    }

    // ---- locations, slots and steps
    let mut loc: Vec<Option<Loc>> = vec![None; n];
    let mut windows: Vec<Window> = Vec::new();
    let mut consts = Vec::new();
    for i in (0..n).filter(|&i| live[i]) {
        match class[i] {
            FusionClass::Source(Source::Argument(index)) => loc[i] = Some(Loc::Param(index)),
            FusionClass::Source(Source::Literal(value)) => {
                loc[i] = Some(Loc::Const(consts.len()));
                consts.push(Storage::from_tensor(value));
            }
            FusionClass::View(_)
            | FusionClass::Broadcast { .. }
            | FusionClass::Elementwise(_)
            | FusionClass::Kernel => {}
        }
    }
    let mut slots: Vec<(DType, usize)> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut busy: Vec<(usize, usize)> = Vec::new();
    let mut steps = Vec::with_capacity(units.len());
    let mut loops = Vec::new();
    // Homes of in-place parameters: their slot is theirs for the whole execution.
    let mut homes: Vec<(usize, usize)> = Vec::new(); // (param index, slot)
    let mut home_of_value: Vec<Option<usize>> = vec![None; n];
    for &(p, v) in &in_place {
        let pnode = g.params()[p].index();
        slots.push((nodes[pnode].ty.dtype, 0));
        let slot = slots.len() - 1;
        homes.push((p, slot));
        loc[pnode] = Some(Loc::Slot(slot));
        home_of_value[v] = Some(slot);
    }
    let resolve = |loc: &[Option<Loc>], v: usize| {
        loc[root[v]].expect("values are placed before they are read")
    };
    for (pos, unit) in units.iter().enumerate() {
        busy.retain(|&(slot, v)| {
            if last_use[v] < pos {
                free.push(slot);
                false
            } else {
                true
            }
        });
        if let (Unit::Kernel(i), Some((base, starts))) = (unit, window_of_unit(unit, &window_of)) {
            let Op::DynamicSlice { x, .. } = &nodes[*i].op else {
                unreachable!("windows are dynamic slices")
            };
            loc[*i] = Some(Loc::Window(windows.len()));
            windows.push(Window {
                base: resolve(&loc, *base),
                of: nodes[x.index()].ty.clone(),
                ty: nodes[*i].ty.clone(),
                starts: starts.iter().map(|&v| resolve(&loc, v)).collect(),
                start_nodes: starts.clone(),
            });
            continue;
        }
        let written: Vec<usize> = match unit {
            Unit::Kernel(i) if !siblings[*i].is_empty() => siblings[*i].clone(),
            Unit::Kernel(i) => vec![*i],
            Unit::Group(gid) => groups[*gid]
                .members
                .iter()
                .copied()
                .filter(|&m| materialize[m])
                .collect(),
        };
        // A `dynamic_update_slice` whose operand dies here writes its window into the
        // operand's slot (no other unit reads that memory after this one, and this unit
        // reads it as its operand only).
        let takes_over = match unit {
            Unit::Kernel(i) if siblings[*i].is_empty() && home_of_value[*i].is_none() => {
                match &nodes[*i].op {
                    Op::DynamicUpdateSlice { x, .. } => {
                        let x = root[x.index()];
                        let dies = !is_output[x] && last_use[x] == pos;
                        busy.iter()
                            .position(|&(_, b)| b == x)
                            .filter(|_| dies && updates_window_of(*i, x))
                    }
                    _ => None,
                }
            }
            Unit::Kernel(_) | Unit::Group(_) => None,
        };
        let mut outs = Vec::new();
        for &v in &written {
            let slot = match (home_of_value[v], takes_over) {
                (Some(home), _) => home,
                (None, Some(at)) => {
                    busy[at].1 = v;
                    busy[at].0
                }
                (None, None) => {
                    let (dtype, len) = (nodes[v].ty.dtype, nodes[v].ty.numel());
                    let slot = pick_slot(&mut slots, &mut free, dtype, len, is_output[v]);
                    busy.push((slot, v));
                    slot
                }
            };
            loc[v] = Some(Loc::Slot(slot));
            outs.push(slot);
        }
        steps.push(match unit {
            Unit::Kernel(i) if !siblings[*i].is_empty() => {
                let Op::While {
                    init, cond, body, ..
                } = &nodes[*i].op
                else {
                    unreachable!("only loops have siblings")
                };
                let in_nodes: Vec<usize> = init.iter().map(|v| v.index()).collect();
                let ins: Vec<Loc> = in_nodes.iter().map(|&v| resolve(&loc, v)).collect();
                let outs: Vec<(usize, usize)> = siblings[*i]
                    .iter()
                    .zip(&outs)
                    .map(|(&s, &slot)| {
                        let Op::While { result, .. } = nodes[s].op else {
                            unreachable!("siblings are loops")
                        };
                        (result, slot)
                    })
                    .collect();
                let carried: Vec<_> = init.iter().map(|v| nodes[v.index()].ty.clone()).collect();
                let mut used = vec![false; carried.len()];
                for &(k, _) in &outs {
                    if let Some(u) = used.get_mut(k) {
                        *u = true;
                    }
                }
                let lp = LoopPlan::new(cond.graph(), body.graph(), carried, &used);
                let entry = loop_entry::entries(&lp, &ins, &outs);
                loops.push(lp);
                Step::Loop {
                    node: *i,
                    looped: loops.len() - 1,
                    ins,
                    in_nodes,
                    outs,
                    entry,
                }
            }
            Unit::Kernel(i) => {
                let in_nodes: Vec<usize> = operands(*i).iter().map(|v| v.index()).collect();
                let ins = in_nodes.iter().map(|&v| resolve(&loc, v)).collect();
                Step::Kernel {
                    node: *i,
                    out: outs[0],
                    ins,
                    in_nodes,
                    index: None,
                }
            }
            Unit::Group(gid) => {
                let grp = &groups[*gid];
                let mut kernel = fuse::build(
                    &nodes,
                    &grp.members,
                    grp.t.unwrap_or(DType::F32),
                    |m| materialize[m],
                    |v| source(v, grp.n),
                );
                kernel.adam = fused_adam::detect(&nodes, &kernel, &|v| source(v, grp.n));
                let ins: Vec<Loc> = kernel
                    .inputs
                    .iter()
                    .map(|&(src, _)| resolve(&loc, src))
                    .collect();
                // An input living in one of the kernel's own output slots (an in-place
                // update) is read from that output, before each chunk is stored.
                let alias = ins
                    .iter()
                    .map(|l| match l {
                        Loc::Slot(s) => outs.iter().position(|o| o == s),
                        _ => None,
                    })
                    .collect();
                // Outputs in the kernel's order (its members' order) match `written`.
                Step::Fused {
                    kernel,
                    ins,
                    outs,
                    alias,
                }
            }
        });
    }
    for i in 0..n {
        if live[i] && loc[i].is_none() && loc[root[i]].is_some() {
            loc[i] = loc[root[i]];
        }
    }

    // ---- outputs
    let mut claimed = vec![false; slots.len()];
    let mut outputs = Vec::with_capacity(graph_outputs.len());
    for (k, &o) in graph_outputs.iter().enumerate() {
        let l = resolve(&loc, o.index());
        let update = options
            .updates
            .iter()
            .find(|&&(out, _)| out == k)
            .map(|&(_, p)| p);
        outputs.push(match update {
            Some(param) if homes.iter().any(|&(p, _)| p == param) => OutputPlan::InPlace,
            Some(param) => {
                let swap = match l {
                    Loc::Slot(s) => {
                        let exact = slots[s].1 == nodes[o.index()].ty.numel();
                        exact && !std::mem::replace(&mut claimed[s], true)
                    }
                    Loc::Param(_) | Loc::Const(_) | Loc::Window(_) => false,
                };
                OutputPlan::Update {
                    loc: l,
                    param,
                    swap,
                }
            }
            None => OutputPlan::Return { loc: l },
        });
    }

    let indices = pair_pools(&nodes, &root, &fused_pools, &mut steps);
    let plan = Plan {
        nodes,
        steps,
        slots,
        consts,
        outputs,
        homes,
        kernel_grads,
        sums_of_products,
        indices,
        loops,
        fused_pools,
        windows,
    };
    #[cfg(test)]
    super::testing::record(g.name(), &plan);
    plan
}

/// The operand and starts of the window that unit `u` is, if it is one.
fn window_of_unit<'a>(
    u: &Unit,
    window_of: &'a [Option<(usize, Vec<usize>)>],
) -> Option<&'a (usize, Vec<usize>)> {
    match u {
        Unit::Kernel(i) => window_of[*i].as_ref(),
        Unit::Group(_) => None,
    }
}

/// Pairs each max/min pooling with the `select_and_scatter_add` (its gradient) that
/// scheduled after it selects from the same operand (the same memory, same shape) by the
/// same window: the pooling records which element of each window the gradient selects,
/// and the gradient reads that instead of the operand (oneDNN's "workspace"). Both steps
/// are in this one plan, which runs every step in order, so the record is always written
/// first in the same execution; a gradient with no such pooling keeps its own kernel.
/// A fused pooling (`bias_relu_pool`) pairs only with its own fused gradient (or the
/// kernel, input and bias gradients computed from its cotangent instead,
/// `conv_pool_grad`), and records its index even without one (its kernel is the one that
/// applies the bias and ReLU). Returns the index buffers' lengths.
fn pair_pools(
    nodes: &[Node],
    root: &[usize],
    fused: &[Option<Fused>],
    steps: &mut [Step],
) -> Vec<usize> {
    use crate::ir::{Op, ReduceOp, Window};
    use crate::ops::reduce_window::indexable;
    let mut indices = Vec::new();
    // (operand's memory, op, window, operand node, pooling's step, its index buffer,
    // its node)
    #[allow(clippy::type_complexity)]
    let mut pools: Vec<(usize, ReduceOp, &Window, usize, usize, Option<usize>, usize)> = Vec::new();
    for (s, step) in steps.iter_mut().enumerate() {
        let Step::Kernel { node, .. } = *step else {
            continue;
        };
        let nd = &nodes[node];
        let reads_index = fused[node].as_ref().and_then(Fused::reads_index_of);
        let found =
            match &nd.op {
                // A fused pooling's gradient, or a gradient computed from its cotangent.
                _ if reads_index.is_some() => pools
                    .iter_mut()
                    .find(|p| Some(p.6) == reads_index)
                    .map(|p| {
                        *p.5.get_or_insert_with(|| {
                            indices.push(0); // the pooling's output length, set below
                            indices.len() - 1
                        })
                    }),
                Op::ReduceWindow { op, x, window } => {
                    let fused_pool = fused[node].as_ref().is_some_and(Fused::is_pool);
                    if fused_pool || indexable(*op, &nodes[x.index()].ty, &nd.ty, window) {
                        pools.push((root[x.index()], *op, window, x.index(), s, None, node));
                    }
                    None
                }
                Op::SelectAndScatterAdd {
                    op,
                    operand,
                    window,
                    ..
                } => pools
                    .iter_mut()
                    .find(|p| {
                        fused[p.6].is_none()
                            && p.0 == root[operand.index()]
                            && p.1 == *op
                            && p.2 == window
                            && nodes[p.3].ty == nodes[operand.index()].ty
                    })
                    .map(|p| {
                        *p.5.get_or_insert_with(|| {
                            indices.push(0); // the pooling's output length, set below
                            indices.len() - 1
                        })
                    }),
                _ => None,
            };
        if let (Some(i), Step::Kernel { index, .. }) = (found, step) {
            *index = Some(PoolIndex::Use(i));
        }
    }
    for (_, _, _, _, s, i, p) in pools {
        let i = match i {
            None if fused[p].is_some() => {
                indices.push(0);
                Some(indices.len() - 1)
            }
            i => i,
        };
        if let (Some(i), Step::Kernel { node, index, .. }) = (i, &mut steps[s]) {
            indices[i] = nodes[*node].ty.numel();
            *index = Some(PoolIndex::Record(i));
        }
    }
    indices
}

/// A free slot of the same element type: exactly `len` long for outputs (so they can be
/// swapped into parameters), else the smallest that fits or the largest (grown).
fn pick_slot(
    slots: &mut Vec<(DType, usize)>,
    free: &mut Vec<usize>,
    dtype: DType,
    len: usize,
    exact: bool,
) -> usize {
    let candidates = free
        .iter()
        .enumerate()
        .filter(|&(_, &s)| slots[s].0 == dtype);
    let choice = if exact {
        candidates
            .filter(|&(_, &s)| slots[s].1 == len)
            .map(|(i, _)| i)
            .next()
    } else {
        let fits = candidates
            .clone()
            .filter(|&(_, &s)| slots[s].1 >= len)
            .min_by_key(|&(_, &s)| slots[s].1)
            .map(|(i, _)| i);
        fits.or_else(|| candidates.max_by_key(|&(_, &s)| slots[s].1).map(|(i, _)| i))
    };
    match choice {
        Some(i) => {
            let s = free.swap_remove(i);
            slots[s].1 = slots[s].1.max(len);
            s
        }
        None => {
            slots.push((dtype, len));
            slots.len() - 1
        }
    }
}

impl Plan {
    /// One line per step (set `STRATA_NATIVE_PLAN` to print it when a graph compiles).
    pub fn describe(&self) -> String {
        let mut out = format!(
            "native plan: {} steps, {} slots\n",
            self.steps.len(),
            self.slots.len()
        );
        for step in &self.steps {
            match step {
                Step::Kernel { node, index, .. } => {
                    let nd = &self.nodes[*node];
                    let paired = match index {
                        None => "",
                        Some(PoolIndex::Record(_)) => " (records index)",
                        Some(PoolIndex::Use(_)) => " (from index)",
                    };
                    let fused = match self.fused_pools[*node] {
                        None if self.sums_of_products[*node].is_some() => " (sum of products)",
                        None => "",
                        Some(Fused::Pool { .. }) => " (bias+relu fused)",
                        Some(Fused::ConvPool { .. }) => " (bias+relu fused) (convolution fused)",
                        Some(Fused::Gradient { .. }) => " (relu gradient fused)",
                        Some(
                            Fused::PooledKernelGrad { .. }
                            | Fused::PooledInputGrad { .. }
                            | Fused::PooledBiasGrad { .. },
                        ) => " (from the pooled cotangent)",
                    };
                    out += &format!(
                        "  kernel %{node} {}{paired}{fused} -> {}\n",
                        nd.op.name(),
                        nd.ty
                    );
                }
                Step::Loop {
                    node,
                    looped,
                    outs,
                    entry,
                    ..
                } => {
                    let count = |e: Entry| entry.iter().filter(|&&x| x == e).count();
                    out += &format!(
                        "  loop {looped} (%{node} while) -> {} of {} carried values \
                         ({} copied in, {} borrowed, {} moved)\n",
                        outs.len(),
                        self.loops[*looped].carried.len(),
                        count(Entry::Copy),
                        count(Entry::Borrow),
                        count(Entry::Move),
                    );
                }
                Step::Fused { kernel, .. } => {
                    out += &format!(
                        "  fused{} n={} insts={} inputs={} outputs={} members={:?}\n",
                        if kernel.adam.is_some() { " (adam)" } else { "" },
                        kernel.n,
                        kernel.insts.len(),
                        kernel.inputs.len(),
                        kernel.outputs.len(),
                        kernel.members
                    );
                    if std::env::var_os("STRATA_NATIVE_PLAN_INSTS").is_some() {
                        out += &format!("      inputs {:?}\n", kernel.inputs);
                        for (r, inst) in kernel.insts.iter().enumerate() {
                            out += &format!("      r{} = {inst:?}\n", kernel.dst[r]);
                        }
                        out += &format!("      outputs {:?}\n", kernel.outputs);
                    }
                }
            }
        }
        // The loops' own plans after every step's line (the profile finds a step's line
        // by its index).
        for (i, l) in self.loops.iter().enumerate() {
            for (what, p) in [("cond", &l.cond), ("body", &l.body)] {
                out += &format!("  loop {i} {what}:\n");
                for line in p.describe().lines() {
                    out += &format!("    {line}\n");
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Step;

    #[test]
    fn every_elementwise_function_joins_one_fused_kernel() {
        use crate::backend::CompileOptions;
        use crate::ir::{BinaryOp, Comparison, DType, Graph, TensorType, UnaryOp};
        let mut g = Graph::new("elementwise");
        let (f, b) = (
            TensorType::new(DType::F32, [64]),
            TensorType::new(DType::Bool, [64]),
        );
        let (x, y, p) = (g.parameter(f.clone()), g.parameter(f), g.parameter(b));
        let mut acc = x;
        for op in UnaryOp::ALL.into_iter().filter(|&op| op != UnaryOp::Not) {
            let u = g.unary(op, acc).unwrap();
            acc = g.add(u, y).unwrap();
        }
        for op in BinaryOp::ALL {
            acc = match op {
                BinaryOp::And | BinaryOp::Or => {
                    let c = g.compare(Comparison::Lt, acc, y).unwrap();
                    let l = g.binary(op, c, p).unwrap();
                    let n = g.unary(UnaryOp::Not, l).unwrap();
                    g.select(n, acc, y).unwrap()
                }
                _ => g.binary(op, acc, y).unwrap(),
            };
        }
        let c = g.convert(acc, DType::Bool).unwrap();
        let out = g.convert(c, DType::F32).unwrap();
        g.set_outputs(vec![out]).unwrap();
        let plan = super::plan(&g, &CompileOptions::default());
        let kinds: Vec<&str> = plan
            .steps
            .iter()
            .map(|s| match s {
                Step::Kernel { node, .. } | Step::Loop { node, .. } => plan.nodes[*node].op.name(),
                Step::Fused { .. } => "fused",
            })
            .collect();
        assert_eq!(kinds, ["fused"], "{}", plan.describe());
    }
}
