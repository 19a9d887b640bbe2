//! Strata's runtime: the graph IR, reverse-mode autodiff and the backends that run graphs.

pub mod autodiff;
pub mod backend;
pub mod checkpoint;
pub mod data;
mod error;
pub(crate) mod hlo;
pub mod ir;
pub(crate) mod kernel;
pub mod loss;
pub mod metrics;
pub mod nn;
pub(crate) mod ops;
pub mod optim;
pub mod random;
pub mod strategy;
mod tensor;
pub mod train;
mod types;

pub use error::{Error, Result};
pub use tensor::{Element, Tensor};
pub use train::Model;

/// The counter-based generator behind `random_uniform`, exposed so host code can produce
/// the same streams.
pub use ops::random::threefry2x32;
