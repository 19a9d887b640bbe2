//! The graph IR: element types, shapes, primitive ops, the graph builder, the verifier
//! and the text printer.

mod compose;
mod cse;
mod dtype;
mod fusion;
mod graph;
mod op;
mod print;
mod shape;
mod verify;

pub(crate) use cse::canonical;
pub use dtype::DType;
pub(crate) use fusion::{Elementwise, FusionClass, Source};
pub use graph::{Graph, Node};
pub use op::{
    BinaryOp, Comparison, ConvParams, DotDims, Op, OpKind, ReduceOp, UnaryOp, Value, Window,
};
pub use shape::{strides_of, Shape, TensorType};

/// The largest rank a tensor may have. Kernels keep index arrays of this length on the
/// stack; every op's result is checked against it.
pub const MAX_RANK: usize = 16;
