//! The graph IR: element types, shapes, primitive ops, the graph builder, the verifier
//! and the text form (printed and parsed).

mod compose;
mod cse;
mod fusion;
mod graph;
mod op;
mod print;
mod scan;
pub(crate) mod side_by_side;
mod text;
mod verify;

pub use crate::types::{strides_of, DType, Shape, TensorType, MAX_RANK};
pub(crate) use cse::canonical;
pub(crate) use fusion::{Elementwise, FusionClass, Source};
pub use graph::{Graph, Node};
pub use op::{
    BinaryOp, Comparison, ConvParams, DotDims, Op, OpKind, ReduceOp, Region, ScanStep, UnaryOp,
    Value, Window,
};
pub(crate) use scan::ScanLayout;
