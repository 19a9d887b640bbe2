//! Strata's runtime: the graph IR, reverse-mode autodiff and the backends that run graphs.

pub mod autodiff;
pub mod backend;
mod error;
pub mod ir;
pub mod nn;
pub(crate) mod ops;
pub mod random;
mod tensor;

pub use error::{Error, Result};
pub use tensor::{Element, Tensor};

/// The counter-based generator behind `random_uniform`, exposed so host code can produce
/// the same streams.
pub use ops::random::threefry2x32;
