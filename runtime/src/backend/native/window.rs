//! A `dynamic_slice` read where its window lies instead of copied out.
//!
//! A scan slices row `t` of each stacked input every iteration (the batches of a
//! `steps_per_execution` loop, a recurrent layer's projected inputs and the products its
//! backward pass saved), and the slice's only use is to be read once by the next kernel:
//! the copy is a pass over a batch-sized block for nothing. When the window is one
//! contiguous run of its operand's row-major memory and that memory cannot change while
//! the plan runs (an argument the plan does not update in place, or a constant), the
//! planner gives the slice no kernel and no slot but a location naming the operand and
//! the start indices (`Loc::Window`); a kernel reading it gets the run that the starts,
//! clamped as `dynamic_slice` clamps them, select. The starts' values stay in memory
//! until the window's last reader has run.

use super::plan::Loc;
use crate::ir::{Node, Op, TensorType};

/// A window of `base` (of type `of`), `ty` in size, at `starts` (scalar locations).
#[derive(Debug)]
pub(crate) struct Window {
    pub base: Loc,
    pub of: TensorType,
    pub ty: TensorType,
    pub starts: Vec<Loc>,
    /// The start values' nodes, for their types.
    pub start_nodes: Vec<usize>,
}

/// Whether a window of `sizes` in an array of `dims` is one contiguous run of its
/// row-major memory: every axis before the first one of size above 1 has size 1, every
/// axis after it is whole.
pub(crate) fn contiguous(dims: &[usize], sizes: &[usize]) -> bool {
    let first = sizes.iter().position(|&s| s != 1).unwrap_or(sizes.len());
    dims.len() == sizes.len() && sizes.iter().zip(dims).skip(first + 1).all(|(s, d)| s == d)
}

/// The operand and starts of node `i` when it is a `dynamic_slice` whose window is
/// contiguous (see the module's comment for the other conditions, which the planner
/// checks).
pub(crate) fn candidate(nodes: &[Node], i: usize) -> Option<(usize, Vec<usize>)> {
    let Op::DynamicSlice { x, starts, .. } = &nodes[i].op else {
        return None;
    };
    let of = &nodes[x.index()].ty;
    contiguous(of.dims(), nodes[i].ty.dims())
        .then(|| (x.index(), starts.iter().map(|s| s.index()).collect()))
}
