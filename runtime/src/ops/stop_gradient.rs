//! `stop_gradient`: the identity for values, a barrier for gradients. Its shape rule (the
//! operand's type) is inline in `ops::check`; its gradient rule is "none flows"; the native
//! planner treats it as a view, like reshape.

use crate::kernel::data::{with_same, Data, DataMut};
use crate::Result;

/// Only reached if the planner did not alias the value (it always does today).
pub(crate) fn native(x: Data<'_>, out: DataMut<'_>) -> Result<()> {
    with_same!("stop_gradient", x, out, |a, o| o.copy_from_slice(a));
    Ok(())
}

// ---- StableHLO lowering

/// The identity: the value is the operand's (gradients are a graph-level matter).
pub(crate) fn lower(e: &mut crate::ops::Emitter<'_>, x: crate::ir::Value) -> String {
    e.name(x)
}
