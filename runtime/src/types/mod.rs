//! Element types and shapes: the vocabulary every other module speaks, from the kernels up
//! to the IR (which re-exports it as `ir::DType`, `ir::TensorType`, ...).

mod dtype;
mod shape;

pub use dtype::DType;
pub use shape::{strides_of, Shape, TensorType};

/// The largest rank a tensor may have. Kernels keep index arrays of this length on the
/// stack; every op's result is checked against it.
pub const MAX_RANK: usize = 16;
