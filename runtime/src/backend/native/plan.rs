//! Planning: from a verified graph to an ordered list of kernel calls over an arena.

use super::data::Storage;
use crate::backend::CompileOptions;
use crate::ir::{DType, Graph, Node, Op};

/// Where a value lives while the plan runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    /// Execution argument `i`.
    Param(usize),
    /// Arena slot `i`.
    Slot(usize),
    /// Constant `i`, materialised at compile time.
    Const(usize),
}

/// One kernel call: node `node` writes arena slot `out`, reading `ins` (the values of
/// nodes `in_nodes`).
#[derive(Debug)]
pub(crate) struct Step {
    pub node: usize,
    pub out: usize,
    pub ins: Vec<Loc>,
    pub in_nodes: Vec<usize>,
}

/// How a graph output reaches the caller.
#[derive(Debug)]
pub(crate) enum OutputPlan {
    /// Becomes the new value of parameter `param`; `swap` if the value owns an exact-size
    /// slot no other output shares (then the slot and the parameter exchange storage, no
    /// copy), else it is copied.
    Update { loc: Loc, param: usize, swap: bool },
    /// Returned to the caller as a new buffer.
    Return { loc: Loc },
}

#[derive(Debug)]
pub(crate) struct Plan {
    pub nodes: Vec<Node>,
    pub steps: Vec<Step>,
    /// Element type and length of each arena slot.
    pub slots: Vec<(DType, usize)>,
    pub consts: Vec<Storage>,
    pub outputs: Vec<OutputPlan>,
}

pub(crate) fn plan(g: &Graph, options: &CompileOptions) -> Plan {
    let nodes = g.nodes().to_vec();
    let n = nodes.len();

    // Live nodes: those the outputs depend on.
    let mut live = vec![false; n];
    for &o in g.outputs() {
        live[o.index()] = true;
    }
    for i in (0..n).rev() {
        if live[i] {
            for v in nodes[i].op.operands() {
                live[v.index()] = true;
            }
        }
    }

    // Reshapes are views of their operand: follow them to the value that owns the data.
    let mut root: Vec<usize> = (0..n).collect();
    for i in 0..n {
        if let Op::Reshape { x, .. } | Op::StopGradient { x } = nodes[i].op {
            root[i] = root[x.index()];
        }
    }

    // Which step last reads each root; outputs live to the end.
    let mut step_of = vec![usize::MAX; n];
    let mut count = 0;
    for i in 0..n {
        if live[i] && computes(&nodes[i].op) {
            step_of[i] = count;
            count += 1;
        }
    }
    let mut last_use = vec![0usize; n];
    for i in 0..n {
        if step_of[i] == usize::MAX {
            continue;
        }
        for v in nodes[i].op.operands() {
            let r = root[v.index()];
            last_use[r] = last_use[r].max(step_of[i]);
        }
    }
    let mut is_output = vec![false; n];
    for &o in g.outputs() {
        let r = root[o.index()];
        is_output[r] = true;
        last_use[r] = usize::MAX;
    }

    // Assign locations and slots in order, reusing slots whose value is dead.
    let mut loc: Vec<Option<Loc>> = vec![None; n];
    let mut consts = Vec::new();
    let mut slots: Vec<(DType, usize)> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    // (slot, root value) pairs still holding a live value.
    let mut busy: Vec<(usize, usize)> = Vec::new();
    let mut steps = Vec::with_capacity(count);
    for i in 0..n {
        if !live[i] {
            continue;
        }
        match &nodes[i].op {
            Op::Parameter { index } => loc[i] = Some(Loc::Param(*index)),
            Op::Constant { value } => {
                loc[i] = Some(Loc::Const(consts.len()));
                consts.push(Storage::from_tensor(value));
            }
            Op::Reshape { x, .. } | Op::StopGradient { x } => loc[i] = loc[x.index()],
            op => {
                let s = step_of[i];
                // Values last read before this step are dead: their slots are free.
                busy.retain(|&(slot, r)| {
                    if last_use[r] < s {
                        free.push(slot);
                        false
                    } else {
                        true
                    }
                });
                let (dtype, len) = (nodes[i].ty.dtype, nodes[i].ty.numel());
                let slot = pick_slot(&mut slots, &mut free, dtype, len, is_output[i]);
                busy.push((slot, i));
                loc[i] = Some(Loc::Slot(slot));
                let in_nodes: Vec<usize> = op.operands().iter().map(|v| v.index()).collect();
                let ins = in_nodes
                    .iter()
                    .map(|&v| loc[v].expect("operands are planned before their users"))
                    .collect();
                steps.push(Step {
                    node: i,
                    out: slot,
                    ins,
                    in_nodes,
                });
            }
        }
    }

    // Outputs.
    let mut claimed = vec![false; slots.len()];
    let mut outputs = Vec::with_capacity(g.outputs().len());
    for (k, &o) in g.outputs().iter().enumerate() {
        let l = loc[o.index()].expect("outputs are live");
        let update = options
            .updates
            .iter()
            .find(|&&(out, _)| out == k)
            .map(|&(_, p)| p);
        outputs.push(match update {
            Some(param) => {
                let swap = match l {
                    Loc::Slot(s) => {
                        let exact = slots[s].1 == nodes[o.index()].ty.numel();
                        exact && !std::mem::replace(&mut claimed[s], true)
                    }
                    Loc::Param(_) | Loc::Const(_) => false,
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
    Plan {
        nodes,
        steps,
        slots,
        consts,
        outputs,
    }
}

/// Ops that run a kernel (everything but parameters, constants and reshape views).
fn computes(op: &Op) -> bool {
    !matches!(
        op,
        Op::Parameter { .. } | Op::Constant { .. } | Op::Reshape { .. }
    )
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
