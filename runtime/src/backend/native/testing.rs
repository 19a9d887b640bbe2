//! Hooks for tests above the backend (the optimizers' own tests check that the native
//! planner recognises their updates).

use super::executor::NativeExecutable;
use super::plan::Step;
use crate::backend::{CompileOptions, Executable};
use crate::ir::Graph;

/// Compiles `g` natively, with the single-pass Adam kernel enabled or not, and says how
/// many fused groups it recognised as Adam's update.
pub(crate) fn compile_fused_adam(
    g: &Graph,
    options: &CompileOptions,
    enabled: bool,
) -> (Box<dyn Executable>, usize) {
    let mut exe = NativeExecutable::new(g, options).expect("the test graph compiles");
    let mut recognised = 0;
    for s in exe.plan_mut().steps.iter_mut() {
        if let Step::Fused { kernel, .. } = s {
            if !enabled {
                kernel.adam = None;
            }
            recognised += usize::from(kernel.adam.is_some());
        }
    }
    (Box::new(exe), recognised)
}
