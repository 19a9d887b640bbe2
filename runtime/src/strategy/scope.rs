//! `Strategy::scope`: the strategy models created on this thread pick up.

use super::Strategy;
use std::cell::RefCell;

thread_local! {
    /// Entered scopes, innermost last.
    static SCOPES: RefCell<Vec<Strategy>> = const { RefCell::new(Vec::new()) };
}

/// Leaves the scope when dropped, also when the scope's closure panics.
pub(super) struct Entered(());

impl Drop for Entered {
    fn drop(&mut self) {
        SCOPES.with(|s| {
            s.borrow_mut().pop();
        });
    }
}

pub(super) fn enter(strategy: Strategy) -> Entered {
    SCOPES.with(|s| s.borrow_mut().push(strategy));
    Entered(())
}

pub(super) fn current() -> Option<Strategy> {
    SCOPES.with(|s| s.borrow().last().cloned())
}
