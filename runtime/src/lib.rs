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
pub(crate) mod memory;
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
/// The layer catalogue: every layer's arguments, shape rule and parameters, which
/// `model!` checks at compile time and [`nn::Layer`] applies at build time.
pub use strata_spec as spec;
pub use tensor::{Element, Tensor};
pub use train::Model;

/// The counter-based generator behind `random_uniform`, exposed so host code can produce
/// the same streams.
pub use ops::random::threefry2x32;
