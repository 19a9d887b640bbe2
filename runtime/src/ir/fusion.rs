//! How a primitive combines with its neighbours when a backend fuses kernels: each op's
//! class is declared with the op (`op.rs`), and the native planner and fuser decide from
//! the class alone, so a new primitive is placed by its declaration, never by a default.

use super::{BinaryOp, Comparison, DType, UnaryOp, Value};
use crate::Tensor;

/// What a fusing backend may do with a node of this op. The classes are the cases the
/// native planner treats differently.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum FusionClass<'a> {
    /// The value exists before any kernel runs. No kernel.
    Source(Source<'a>),
    /// Operand `0`'s elements, same order, same type (`reshape`, `stop_gradient`): the
    /// node shares its operand's memory. No kernel.
    View(Value),
    /// `x` repeated along new or unit dimensions, operand dimension `i` becoming result
    /// dimension `dims[i]`: fused kernels read `x` through an index pattern instead of a
    /// materialised copy, where the dimensions allow one.
    Broadcast { x: Value, dims: &'a [usize] },
    /// A function of the operands' elements at the same index (operands of the result's
    /// shape, or scalars): joins fused kernels, where its types allow.
    Elementwise(Elementwise),
    /// Anything else: a kernel of its own, reading its operands from memory.
    Kernel,
}

/// Where a [`FusionClass::Source`] value comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Source<'a> {
    /// Execution argument `i`.
    Argument(usize),
    /// A literal, materialised once when the graph is compiled.
    Literal(&'a Tensor),
}

/// The function an elementwise op computes; its operands are the op's operands, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elementwise {
    Unary(UnaryOp),
    Binary(BinaryOp),
    /// Gives bool.
    Compare(Comparison),
    /// `pred ? on_true : on_false`.
    Select,
    /// Conversion to the type.
    Convert(DType),
}
