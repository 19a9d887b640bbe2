//! The primitive operations of the IR.
//!
//! Each variant follows the semantics of the StableHLO op of the same name (static shapes,
//! explicit broadcasting). Layers, losses, activations and optimizers are compositions of
//! these; the rules of each primitive (shape, gradient, native kernel, StableHLO lowering)
//! live side by side in `crate::ops`.

use crate::ir::{DType, Shape};
use crate::Tensor;
use std::fmt;

/// A handle to a value (the single result of one node) in a [`Graph`](crate::ir::Graph).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value(pub(crate) u32);

impl Value {
    /// The index of the node that produces this value.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    pub(crate) fn from_index(i: usize) -> Value {
        Value(i as u32)
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// Elementwise functions of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// `-1`, `0` or `1` by the sign of `x` (`0` for ±0, NaN for NaN).
    Sign,
    /// `e^x`.
    Exp,
    /// `e^x - 1`, accurate near 0.
    Expm1,
    /// Natural logarithm.
    Log,
    /// `ln(1 + x)`, accurate near 0.
    Log1p,
    /// Hyperbolic tangent.
    Tanh,
    /// The logistic sigmoid `1 / (1 + e^-x)`.
    Logistic,
    /// Square root.
    Sqrt,
    /// `1 / sqrt(x)`.
    Rsqrt,
    /// Largest integer not greater than `x`.
    Floor,
    /// Smallest integer not less than `x`.
    Ceil,
    /// Nearest integer, halves away from zero (StableHLO `round_nearest_afz`).
    Round,
    /// The Gauss error function.
    Erf,
    /// Logical not (bool only).
    Not,
}

impl UnaryOp {
    /// The op's name as printed (the StableHLO op name).
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "negate",
            UnaryOp::Abs => "abs",
            UnaryOp::Sign => "sign",
            UnaryOp::Exp => "exponential",
            UnaryOp::Expm1 => "exponential_minus_one",
            UnaryOp::Log => "log",
            UnaryOp::Log1p => "log_plus_one",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Logistic => "logistic",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "round_nearest_afz",
            UnaryOp::Erf => "erf",
            UnaryOp::Not => "not",
        }
    }

    pub const ALL: [UnaryOp; 16] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sign,
        UnaryOp::Exp,
        UnaryOp::Expm1,
        UnaryOp::Log,
        UnaryOp::Log1p,
        UnaryOp::Tanh,
        UnaryOp::Logistic,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::Erf,
        UnaryOp::Not,
    ];
}

/// Elementwise functions of two operands of the same type and shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`; integer division truncates toward zero.
    Div,
    /// Elementwise maximum (NaN if either is NaN).
    Max,
    /// Elementwise minimum (NaN if either is NaN).
    Min,
    /// `a ^ b`.
    Pow,
    /// Logical and (bool only).
    And,
    /// Logical or (bool only).
    Or,
}

impl BinaryOp {
    /// The op's name as printed (the StableHLO op name).
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "subtract",
            BinaryOp::Mul => "multiply",
            BinaryOp::Div => "divide",
            BinaryOp::Max => "maximum",
            BinaryOp::Min => "minimum",
            BinaryOp::Pow => "power",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
        }
    }

    pub const ALL: [BinaryOp; 9] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Pow,
        BinaryOp::And,
        BinaryOp::Or,
    ];
}

/// The relation tested by `Compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Comparison {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// The combining function of `Reduce` and `ReduceWindow`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

/// Dimension numbers of `DotGeneral`: which dimensions are batch and which are contracted.
/// The result's dimensions are the batch dimensions, then the lhs's free dimensions, then
/// the rhs's free dimensions, each in operand order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct DotDims {
    pub lhs_batch: Vec<usize>,
    pub rhs_batch: Vec<usize>,
    pub lhs_contract: Vec<usize>,
    pub rhs_contract: Vec<usize>,
}

impl DotDims {
    /// A plain matrix product `[m, k] x [k, n]`.
    pub fn matmul() -> DotDims {
        DotDims {
            lhs_batch: vec![],
            rhs_batch: vec![],
            lhs_contract: vec![1],
            rhs_contract: vec![0],
        }
    }
}

/// A sliding window over every dimension of the operand (`ReduceWindow`, `SelectAndScatterAdd`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Window {
    /// Window size per operand dimension.
    pub dims: Vec<usize>,
    /// Step per operand dimension.
    pub strides: Vec<usize>,
    /// Implicit padding `(low, high)` per dimension, filled with the reduction's identity.
    pub padding: Vec<(usize, usize)>,
}

/// Parameters of `Convolution`.
///
/// Layout (fixed, as Keras/TensorFlow's default): the input is `[batch, spatial..., in_features]`,
/// the kernel `[spatial..., in_features / feature_groups, out_features]`, the output
/// `[batch, spatial..., out_features]`. Any number of spatial dimensions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvParams {
    /// Step of the window over the (dilated, padded) input, per spatial dimension.
    pub strides: Vec<usize>,
    /// Padding `(low, high)` per spatial dimension; negative values crop.
    pub padding: Vec<(i64, i64)>,
    /// Input dilation (zeros inserted between input elements), per spatial dimension.
    pub lhs_dilation: Vec<usize>,
    /// Kernel dilation (atrous convolution), per spatial dimension.
    pub rhs_dilation: Vec<usize>,
    /// Number of groups the input and output features are split into.
    pub feature_groups: usize,
}

impl ConvParams {
    /// Stride 1, no padding, no dilation, one group, for `spatial` dimensions.
    pub fn simple(spatial: usize) -> ConvParams {
        ConvParams {
            strides: vec![1; spatial],
            padding: vec![(0, 0); spatial],
            lhs_dilation: vec![1; spatial],
            rhs_dilation: vec![1; spatial],
            feature_groups: 1,
        }
    }
}

/// One node's operation. Every node has exactly one result.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Graph input number `index` (its type is the node's type).
    Parameter { index: usize },
    /// A literal tensor.
    Constant { value: Tensor },
    /// Indices along `dim`, broadcast over the node's shape (StableHLO `iota`).
    Iota { dim: usize },
    /// An elementwise function of one operand.
    Unary { op: UnaryOp, x: Value },
    /// An elementwise function of two operands with equal types.
    Binary {
        op: BinaryOp,
        lhs: Value,
        rhs: Value,
    },
    /// Elementwise comparison giving bool; NaN compares unequal to everything.
    Compare {
        cmp: Comparison,
        lhs: Value,
        rhs: Value,
    },
    /// `pred ? on_true : on_false` elementwise (`pred` bool of the same shape, or a scalar).
    Select {
        pred: Value,
        on_true: Value,
        on_false: Value,
    },
    /// Elementwise conversion to `to` (float to int truncates toward zero and saturates).
    Convert { x: Value, to: DType },
    /// Broadcast `x` to `shape`; operand dimension `i` becomes result dimension `dims[i]`
    /// and must have size 1 or the result's size there.
    BroadcastInDim {
        x: Value,
        shape: Shape,
        dims: Vec<usize>,
    },
    /// `x` unchanged, but autodiff passes no gradient through it (JAX's `stop_gradient`).
    StopGradient { x: Value },
    /// Same elements, row-major order, new shape with the same element count.
    Reshape { x: Value, shape: Shape },
    /// Result dimension `i` is operand dimension `perm[i]`.
    Transpose { x: Value, perm: Vec<usize> },
    /// The elements in reverse order along each of `axes`.
    Reverse { x: Value, axes: Vec<usize> },
    /// Elements `start[i] + k * stride[i] < limit[i]` of every dimension.
    Slice {
        x: Value,
        start: Vec<usize>,
        limit: Vec<usize>,
        stride: Vec<usize>,
    },
    /// Operands joined along `axis`; all other dimensions equal.
    Concatenate { xs: Vec<Value>, axis: usize },
    /// Padding with the scalar `value`: `low`/`high` per dimension (negative crops) and
    /// `interior` elements between neighbours.
    Pad {
        x: Value,
        value: Value,
        low: Vec<i64>,
        high: Vec<i64>,
        interior: Vec<usize>,
    },
    /// Generalised matrix product over batch and contracting dimensions.
    DotGeneral {
        lhs: Value,
        rhs: Value,
        dims: DotDims,
    },
    /// Reduction of `x` over `axes` (removed from the shape).
    Reduce {
        op: ReduceOp,
        x: Value,
        axes: Vec<usize>,
    },
    /// Reduction over sliding windows (pooling).
    ReduceWindow {
        op: ReduceOp,
        x: Value,
        window: Window,
    },
    /// The gradient of max (or min) pooling: for each window of `operand`, adds the matching
    /// element of `source` at the position of the window's first maximum (`op` = `Max`) or
    /// minimum (`Min`); the result has the operand's shape (StableHLO `select_and_scatter`
    /// with `ge`/`le` and `add`). Padding positions are never selected.
    SelectAndScatterAdd {
        op: ReduceOp,
        source: Value,
        operand: Value,
        window: Window,
    },
    /// N-dimensional convolution; see [`ConvParams`] for the layout.
    Convolution {
        lhs: Value,
        rhs: Value,
        params: ConvParams,
    },
    /// `take` along `axis` with `batch_dims` leading batch dimensions (as `tf.gather`):
    /// result shape `operand[..axis] ++ indices[batch_dims..] ++ operand[axis+1..]`.
    /// Out-of-range indices are clamped into range.
    Gather {
        operand: Value,
        indices: Value,
        axis: usize,
        batch_dims: usize,
    },
    /// The transpose of `Gather`: `operand` plus `updates` added at the gathered positions
    /// (repeated indices accumulate). Indices are clamped as in `Gather`.
    ScatterAdd {
        operand: Value,
        indices: Value,
        updates: Value,
        axis: usize,
        batch_dims: usize,
    },
    /// Uniform f32 or f64 samples in `[0, 1)` of the node's shape from the counter-based
    /// Threefry-2x32 generator: element `i` (row-major) is `threefry2x32(key, (hi32(i), lo32(i)))`
    /// word 0, top 23 (f32) or 32 (f64) bits used as the mantissa. `key` is `i32[2]`.
    RandomUniform { key: Value },
    /// Sum of `x` over all replicas of a replicated computation.
    AllReduceSum { x: Value },
    /// This replica's index (i32 scalar).
    ReplicaId,
}

macro_rules! op_kinds {
    ($($kind:ident),* $(,)?) => {
        /// The name of each primitive, without operands: for tables that must cover them all.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum OpKind { $($kind),* }

        impl OpKind {
            /// Every primitive.
            pub const ALL: &'static [OpKind] = &[$(OpKind::$kind),*];
        }
    };
}

op_kinds!(
    Parameter,
    Constant,
    Iota,
    Unary,
    Binary,
    Compare,
    Select,
    Convert,
    BroadcastInDim,
    StopGradient,
    Reshape,
    Transpose,
    Reverse,
    Slice,
    Concatenate,
    Pad,
    DotGeneral,
    Reduce,
    ReduceWindow,
    SelectAndScatterAdd,
    Convolution,
    Gather,
    ScatterAdd,
    RandomUniform,
    AllReduceSum,
    ReplicaId,
);

impl Op {
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Parameter { .. } => OpKind::Parameter,
            Op::Constant { .. } => OpKind::Constant,
            Op::Iota { .. } => OpKind::Iota,
            Op::Unary { .. } => OpKind::Unary,
            Op::Binary { .. } => OpKind::Binary,
            Op::Compare { .. } => OpKind::Compare,
            Op::Select { .. } => OpKind::Select,
            Op::Convert { .. } => OpKind::Convert,
            Op::BroadcastInDim { .. } => OpKind::BroadcastInDim,
            Op::StopGradient { .. } => OpKind::StopGradient,
            Op::Reshape { .. } => OpKind::Reshape,
            Op::Transpose { .. } => OpKind::Transpose,
            Op::Reverse { .. } => OpKind::Reverse,
            Op::Slice { .. } => OpKind::Slice,
            Op::Concatenate { .. } => OpKind::Concatenate,
            Op::Pad { .. } => OpKind::Pad,
            Op::DotGeneral { .. } => OpKind::DotGeneral,
            Op::Reduce { .. } => OpKind::Reduce,
            Op::ReduceWindow { .. } => OpKind::ReduceWindow,
            Op::SelectAndScatterAdd { .. } => OpKind::SelectAndScatterAdd,
            Op::Convolution { .. } => OpKind::Convolution,
            Op::Gather { .. } => OpKind::Gather,
            Op::ScatterAdd { .. } => OpKind::ScatterAdd,
            Op::RandomUniform { .. } => OpKind::RandomUniform,
            Op::AllReduceSum { .. } => OpKind::AllReduceSum,
            Op::ReplicaId => OpKind::ReplicaId,
        }
    }

    /// The op's name as printed (snake case, as in StableHLO where one exists).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Parameter { .. } => "parameter",
            Op::Constant { .. } => "constant",
            Op::Iota { .. } => "iota",
            Op::Unary { op, .. } => op.name(),
            Op::Binary { op, .. } => op.name(),
            Op::Compare { .. } => "compare",
            Op::Select { .. } => "select",
            Op::Convert { .. } => "convert",
            Op::BroadcastInDim { .. } => "broadcast_in_dim",
            Op::StopGradient { .. } => "stop_gradient",
            Op::Reshape { .. } => "reshape",
            Op::Transpose { .. } => "transpose",
            Op::Reverse { .. } => "reverse",
            Op::Slice { .. } => "slice",
            Op::Concatenate { .. } => "concatenate",
            Op::Pad { .. } => "pad",
            Op::DotGeneral { .. } => "dot_general",
            Op::Reduce { .. } => "reduce",
            Op::ReduceWindow { .. } => "reduce_window",
            Op::SelectAndScatterAdd { .. } => "select_and_scatter_add",
            Op::Convolution { .. } => "convolution",
            Op::Gather { .. } => "gather",
            Op::ScatterAdd { .. } => "scatter_add",
            Op::RandomUniform { .. } => "random_uniform",
            Op::AllReduceSum { .. } => "all_reduce_sum",
            Op::ReplicaId => "replica_id",
        }
    }

    /// The values this op reads, in order.
    pub fn operands(&self) -> Vec<Value> {
        match self {
            Op::Parameter { .. } | Op::Constant { .. } | Op::Iota { .. } | Op::ReplicaId => vec![],
            Op::Unary { x, .. }
            | Op::Convert { x, .. }
            | Op::BroadcastInDim { x, .. }
            | Op::Reshape { x, .. }
            | Op::StopGradient { x }
            | Op::Transpose { x, .. }
            | Op::Reverse { x, .. }
            | Op::Slice { x, .. }
            | Op::Reduce { x, .. }
            | Op::ReduceWindow { x, .. }
            | Op::AllReduceSum { x } => vec![*x],
            Op::RandomUniform { key } => vec![*key],
            Op::Binary { lhs, rhs, .. }
            | Op::Compare { lhs, rhs, .. }
            | Op::DotGeneral { lhs, rhs, .. }
            | Op::Convolution { lhs, rhs, .. } => vec![*lhs, *rhs],
            Op::Select {
                pred,
                on_true,
                on_false,
            } => vec![*pred, *on_true, *on_false],
            Op::Concatenate { xs, .. } => xs.clone(),
            Op::Pad { x, value, .. } => vec![*x, *value],
            Op::SelectAndScatterAdd {
                source, operand, ..
            } => vec![*source, *operand],
            Op::Gather {
                operand, indices, ..
            } => vec![*operand, *indices],
            Op::ScatterAdd {
                operand,
                indices,
                updates,
                ..
            } => vec![*operand, *indices, *updates],
        }
    }

    /// The same op with every operand passed through `f` (for copying between graphs).
    pub fn map_operands(&self, mut f: impl FnMut(Value) -> Value) -> Op {
        let mut op = self.clone();
        match &mut op {
            Op::Parameter { .. } | Op::Constant { .. } | Op::Iota { .. } | Op::ReplicaId => {}
            Op::Unary { x, .. }
            | Op::Convert { x, .. }
            | Op::BroadcastInDim { x, .. }
            | Op::Reshape { x, .. }
            | Op::StopGradient { x }
            | Op::Transpose { x, .. }
            | Op::Reverse { x, .. }
            | Op::Slice { x, .. }
            | Op::Reduce { x, .. }
            | Op::ReduceWindow { x, .. }
            | Op::AllReduceSum { x } => *x = f(*x),
            Op::RandomUniform { key } => *key = f(*key),
            Op::Binary { lhs, rhs, .. }
            | Op::Compare { lhs, rhs, .. }
            | Op::DotGeneral { lhs, rhs, .. }
            | Op::Convolution { lhs, rhs, .. } => {
                *lhs = f(*lhs);
                *rhs = f(*rhs);
            }
            Op::Select {
                pred,
                on_true,
                on_false,
            } => {
                *pred = f(*pred);
                *on_true = f(*on_true);
                *on_false = f(*on_false);
            }
            Op::Concatenate { xs, .. } => {
                for x in xs {
                    *x = f(*x);
                }
            }
            Op::Pad { x, value, .. } => {
                *x = f(*x);
                *value = f(*value);
            }
            Op::SelectAndScatterAdd {
                source, operand, ..
            } => {
                *source = f(*source);
                *operand = f(*operand);
            }
            Op::Gather {
                operand, indices, ..
            } => {
                *operand = f(*operand);
                *indices = f(*indices);
            }
            Op::ScatterAdd {
                operand,
                indices,
                updates,
                ..
            } => {
                *operand = f(*operand);
                *indices = f(*indices);
                *updates = f(*updates);
            }
        }
        op
    }

    /// Whether the op is a pure elementwise function of same-shaped operands.
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            Op::Unary { .. }
                | Op::Binary { .. }
                | Op::Compare { .. }
                | Op::Select { .. }
                | Op::Convert { .. }
        )
    }
}
