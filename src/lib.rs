//! Strata: neural networks declared inline, checked at compile time, trained anywhere.
//!
//! This facade re-exports the runtime (graph IR, autodiff, backends) and the `model!` macro.

pub use strata_runtime::*;
