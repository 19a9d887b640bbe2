//! How a loop's carried values get their initial values and hand back their results.
//!
//! Copying every initial value into the loop's own buffers, and every result back out,
//! passes over all the carried memory twice per execution: for a train loop over `k`
//! stacked batches that is the whole stack and all the weights, every call, where one
//! step without the loop touches each batch once and updates its weights in place. So
//! a value the body only reads is read where it already is, and a value whose memory
//! dies at the loop and receives the loop's result moves in and back out.

use super::plan::{Loc, LoopPlan};

/// How carried value `k` of a loop step starts and ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// Nothing reads it (`LoopPlan::unread`): no initial value.
    Unread,
    /// Its initial value is copied into the loop's buffer (and a result copied out).
    Copy,
    /// The body returns it as it came and writes nothing into it: the storage at its
    /// initial location moves into the loop's buffer for the loop and back afterwards,
    /// unchanged.
    Borrow,
    /// Its initial value lives in the arena slot that receives its result (the planner
    /// gives a donated parameter whose last reader is the loop a home there): the storage
    /// moves in, the loop updates it, and it moves back holding the result.
    Move,
}

/// Each carried value's entry, given where the initial values are (`ins`) and where the
/// results go (`outs`, `(k, slot)`). A location moves or is borrowed at most once (the
/// other values starting from it are copied, before anything moves); constants are
/// always copied, since their storage belongs to the plan and may be shared.
pub(crate) fn entries(lp: &LoopPlan, ins: &[Loc], outs: &[(usize, usize)]) -> Vec<Entry> {
    let mut entry: Vec<Entry> = (0..ins.len())
        .map(|k| match lp.unread.get(k) {
            Some(true) => Entry::Unread,
            _ => Entry::Copy,
        })
        .collect();
    let mut claimed: Vec<Loc> = Vec::new();
    for &(k, slot) in outs {
        if entry.get(k) == Some(&Entry::Copy)
            && ins[k] == Loc::Slot(slot)
            && !claimed.contains(&ins[k])
        {
            entry[k] = Entry::Move;
            claimed.push(ins[k]);
        }
    }
    for (k, &l) in ins.iter().enumerate() {
        let read_only = lp.read_only.get(k).copied().unwrap_or(false);
        let movable = matches!(l, Loc::Param(_) | Loc::Slot(_));
        if entry[k] == Entry::Copy && read_only && movable && !claimed.contains(&l) {
            entry[k] = Entry::Borrow;
            claimed.push(l);
        }
    }
    entry
}
