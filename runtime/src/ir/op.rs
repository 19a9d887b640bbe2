//! The primitive operations of the IR.
//!
//! Each variant follows the semantics of the StableHLO op of the same name (static shapes,
//! explicit broadcasting). Layers, losses, activations and optimizers are compositions of
//! these; the rules of each primitive (shape, gradient, native kernel, StableHLO lowering)
//! live side by side in `crate::ops`; what the IR itself says about each one (name,
//! operands, fusion class) is declared once, in the `primitives!` list below.

use super::fusion::{Elementwise, FusionClass, Source};
use super::text::{self, Field, Role};
use crate::ir::{DType, Shape};
use crate::Tensor;
use std::fmt;
use std::sync::Arc;

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

/// Declares an enum of elementwise functions with each one's printed name (the StableHLO
/// op's) and the list of them all, from one entry per function.
macro_rules! functions {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $printed:literal,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// The op's name as printed (the StableHLO op name).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $printed,)*
                }
            }

            /// Every function, in declaration order.
            pub const ALL: [$name; [$($printed),*].len()] = [$($name::$variant),*];
        }
    };
}

functions! {
    /// Elementwise functions of one operand.
    UnaryOp {
        /// `-x`.
        Neg => "negate",
        /// `|x|`.
        Abs => "abs",
        /// `-1`, `0` or `1` by the sign of `x` (`0` for ±0, NaN for NaN).
        Sign => "sign",
        /// `e^x`.
        Exp => "exponential",
        /// `e^x - 1`, accurate near 0.
        Expm1 => "exponential_minus_one",
        /// Natural logarithm.
        Log => "log",
        /// `ln(1 + x)`, accurate near 0.
        Log1p => "log_plus_one",
        /// Hyperbolic tangent.
        Tanh => "tanh",
        /// The logistic sigmoid `1 / (1 + e^-x)`.
        Logistic => "logistic",
        /// Square root.
        Sqrt => "sqrt",
        /// `1 / sqrt(x)`.
        Rsqrt => "rsqrt",
        /// Largest integer not greater than `x`.
        Floor => "floor",
        /// Smallest integer not less than `x`.
        Ceil => "ceil",
        /// Nearest integer, halves away from zero (StableHLO `round_nearest_afz`).
        Round => "round_nearest_afz",
        /// The Gauss error function.
        Erf => "erf",
        /// Logical not (bool only).
        Not => "not",
    }
}

functions! {
    /// Elementwise functions of two operands of the same type and shape.
    BinaryOp {
        /// `a + b`.
        Add => "add",
        /// `a - b`.
        Sub => "subtract",
        /// `a * b`.
        Mul => "multiply",
        /// `a / b`; integer division truncates toward zero.
        Div => "divide",
        /// Elementwise maximum (NaN if either is NaN).
        Max => "maximum",
        /// Elementwise minimum (NaN if either is NaN).
        Min => "minimum",
        /// `a ^ b`.
        Pow => "power",
        /// Logical and (bool only).
        And => "and",
        /// Logical or (bool only).
        Or => "or",
    }
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

/// A sub-computation owned by an op (a loop's condition or body): a whole [`Graph`] whose
/// parameters are the values the op hands it. Shared, not copied, when the op is cloned
/// (every sibling of a loop holds the same two regions), and compared by identity first.
///
/// [`Graph`]: crate::ir::Graph
#[derive(Clone, Debug)]
pub struct Region(pub Arc<crate::ir::Graph>);

impl Region {
    pub fn new(g: crate::ir::Graph) -> Region {
        Region(Arc::new(g))
    }

    pub fn graph(&self) -> &crate::ir::Graph {
        &self.0
    }
}

impl PartialEq for Region {
    fn eq(&self, other: &Region) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || *self.0 == *other.0
    }
}

/// What a loop built by [`Graph::scan`] computes, kept on its `while` for reverse mode:
/// the loop's carried values are the step count, the `carries` carried values, the stacked
/// inputs, the stacked outputs, then one stack per carried value that `step` does not pass
/// through unchanged (that value at the start of each step, the residuals its gradient
/// reads), then one stack per product of `step` that changes from step to step (its
/// value at each step, which the gradient reads instead of multiplying again; see
/// `ScanLayout`). `reverse` visits rows from the last. The backends run the loop as any other and
/// never read this; autodiff differentiates the loop through `step` (a scan's VJP is the
/// reverse scan of `step`'s VJP), where a plain `while` has no gradient.
///
/// [`Graph::scan`]: crate::ir::Graph::scan
#[derive(Clone, Debug, PartialEq)]
pub struct ScanStep {
    /// The step: carried values then one row of each stacked input, to the new carried
    /// values then one row of each stacked output.
    pub step: Region,
    /// How many values the step carries.
    pub carries: usize,
    /// Whether the rows are visited from the last (`lax.scan(reverse=True)`).
    pub reverse: bool,
}

impl std::ops::Deref for Region {
    type Target = crate::ir::Graph;
    fn deref(&self) -> &crate::ir::Graph {
        &self.0
    }
}

/// Declares [`Op`] and everything it says about each primitive, from one entry per
/// primitive: its [`OpKind`], its printed name, which fields are its operands (in order),
/// its [`FusionClass`], and whether common-subexpression elimination must keep its nodes
/// apart (`distinct`). The rules (shape, gradient, kernel, lowering) live in `crate::ops`,
/// whose matches over `Op` are exhaustive: a new entry here makes the compiler list them.
///
/// `name` is a literal, or the field whose own name is the op's (`Unary`'s `op`: the
/// printed name says which function). `fusion` is an expression over the entry's fields
/// (bound by reference). The IR text form of each op (printing and parsing, in
/// [`super::text`]) comes from the same entry: the name, the operands in order, then every
/// other field in declaration order, each written by its type's [`Field`] impl.
macro_rules! primitives {
    // An optional flag: its value, or false.
    (@flag) => { false };
    (@flag $value:expr) => { $value };
    // The printed name of an entry, its fields bound by reference.
    (@name $name:literal) => { $name };
    (@name $field:ident) => { $field.name() };
    // Whether `printed` is the name of an entry whose fields have these types.
    (@named $printed:ident, $name:literal $(, $ty:ty)*) => { $printed == $name };
    (@named $printed:ident, $field:ident $(, $ty:ty)*) => {
        false $(|| <$ty as Field>::from_name($printed).is_some())*
    };
    ($(
        $(#[$doc:meta])*
        $variant:ident $({ $($field:ident: $ty:ty),* $(,)? })? => {
            name: $name:tt,
            operands: [$($operand:ident),*],
            fusion: $fusion:expr,
            $(distinct: $distinct:expr,)?
        }
    ),* $(,)?) => {
        /// One node's operation. Every node has exactly one result.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Op {
            $($(#[$doc])* $variant $({ $($field: $ty),* })?,)*
        }

        /// The name of each primitive, without operands: for tables that must cover them all.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum OpKind {
            $($variant),*
        }

        impl OpKind {
            /// Every primitive.
            pub const ALL: &'static [OpKind] = &[$(OpKind::$variant),*];
        }

        // The entries' expressions use only some of the fields they bind.
        #[allow(unused_variables)]
        impl Op {
            /// The primitive, without operands or attributes.
            pub fn kind(&self) -> OpKind {
                match self {
                    $(Op::$variant { .. } => OpKind::$variant,)*
                }
            }

            /// The op's name as printed (snake case, as in StableHLO where one exists).
            pub fn name(&self) -> &'static str {
                match self {
                    $(Op::$variant $({ $($field),* })? => primitives!(@name $name),)*
                }
            }

            /// The values this op reads, in order.
            pub fn operands(&self) -> Vec<Value> {
                match self {
                    $(Op::$variant { $($operand,)* .. } => {
                        <[&[Value]]>::concat(&[$(Operands::values($operand)),*])
                    })*
                }
            }

            /// The same op with every operand passed through `f` (for copying between graphs).
            pub fn map_operands(&self, mut f: impl FnMut(Value) -> Value) -> Op {
                let mut op = self.clone();
                match &mut op {
                    $(Op::$variant { $($operand,)* .. } => {
                        $(for v in Operands::values_mut($operand) {
                            *v = f(*v);
                        })*
                    })*
                }
                op
            }

            /// How the op combines with its neighbours in fused kernels.
            pub(crate) fn fusion(&self) -> FusionClass<'_> {
                match self {
                    $(Op::$variant $({ $($field),* })? => $fusion,)*
                }
            }

            /// Whether each node of this op is a value of its own, even beside a node with
            /// the same op, attributes and operands: an input, or a collective, whose calls
            /// the replicas of a program pair up one to one. Such nodes are never merged.
            pub(crate) fn is_distinct(&self) -> bool {
                match self {
                    $(Op::$variant { .. } => primitives!(@flag $($distinct)?),)*
                }
            }

            /// Appends the op's attributes (the fields that are neither operands nor its
            /// name) in the IR text form, each preceded by a space.
            pub(crate) fn write_attributes(&self, out: &mut String) {
                match self {
                    $(Op::$variant $({ $($field),* })? => {
                        $($(text::write_field($field, stringify!($field), out);)*)?
                    })*
                }
            }

            /// The op printed as `printed` with `operands`, its attributes read from `r`
            /// (the inverse of [`Op::name`], [`Op::operands`] and [`Op::write_attributes`]).
            pub(crate) fn parse_text(
                printed: &str,
                operands: &[Value],
                r: &mut text::Reader<'_>,
            ) -> crate::Result<Op> {
                $(
                    if primitives!(@named printed, $name $($(, $ty)*)?) {
                        let fields: &[(&str, Role)] =
                            &[$($((stringify!($field), <$ty as Field>::ROLE)),*)?];
                        let slots = text::OperandSlots::new(
                            fields,
                            &[$(stringify!($operand)),*],
                            operands,
                            r,
                        )?;
                        return Ok(Op::$variant $({ $(
                            $field: text::read_field::<$ty>(r, printed, stringify!($field), &slots)?
                        ),* })?);
                    }
                )*
                Err(r.error_at_start(format!("unknown op `{printed}`")))
            }
        }
    };
}

/// A field that holds operands: one value, or a list of them.
trait Operands {
    fn values(&self) -> &[Value];
    fn values_mut(&mut self) -> &mut [Value];
}

impl Operands for Value {
    fn values(&self) -> &[Value] {
        std::slice::from_ref(self)
    }
    fn values_mut(&mut self) -> &mut [Value] {
        std::slice::from_mut(self)
    }
}

impl Operands for Vec<Value> {
    fn values(&self) -> &[Value] {
        self
    }
    fn values_mut(&mut self) -> &mut [Value] {
        self
    }
}

primitives! {
    /// Graph input number `index` (its type is the node's type).
    Parameter { index: usize } => {
        name: "parameter",
        operands: [],
        fusion: FusionClass::Source(Source::Argument(*index)),
        distinct: true,
    },
    /// A literal tensor.
    Constant { value: Tensor } => {
        name: "constant",
        operands: [],
        fusion: FusionClass::Source(Source::Literal(value)),
    },
    /// Indices along `dim`, broadcast over the node's shape (StableHLO `iota`).
    Iota { dim: usize } => {
        name: "iota",
        operands: [],
        fusion: FusionClass::Kernel,
    },
    /// An elementwise function of one operand.
    Unary { op: UnaryOp, x: Value } => {
        name: op,
        operands: [x],
        fusion: FusionClass::Elementwise(Elementwise::Unary(*op)),
    },
    /// An elementwise function of two operands with equal types.
    Binary {
        op: BinaryOp,
        lhs: Value,
        rhs: Value,
    } => {
        name: op,
        operands: [lhs, rhs],
        fusion: FusionClass::Elementwise(Elementwise::Binary(*op)),
    },
    /// Elementwise comparison giving bool; NaN compares unequal to everything.
    Compare {
        cmp: Comparison,
        lhs: Value,
        rhs: Value,
    } => {
        name: "compare",
        operands: [lhs, rhs],
        fusion: FusionClass::Elementwise(Elementwise::Compare(*cmp)),
    },
    /// `pred ? on_true : on_false` elementwise (`pred` bool of the same shape, or a scalar).
    Select {
        pred: Value,
        on_true: Value,
        on_false: Value,
    } => {
        name: "select",
        operands: [pred, on_true, on_false],
        fusion: FusionClass::Elementwise(Elementwise::Select),
    },
    /// Elementwise conversion to `to` (float to int truncates toward zero and saturates).
    Convert { x: Value, to: DType } => {
        name: "convert",
        operands: [x],
        fusion: FusionClass::Elementwise(Elementwise::Convert(*to)),
    },
    /// Broadcast `x` to `shape`; operand dimension `i` becomes result dimension `dims[i]`
    /// and must have size 1 or the result's size there.
    BroadcastInDim {
        x: Value,
        shape: Shape,
        dims: Vec<usize>,
    } => {
        name: "broadcast_in_dim",
        operands: [x],
        fusion: FusionClass::Broadcast { x: *x, dims },
    },
    /// `x` unchanged, but autodiff passes no gradient through it (JAX's `stop_gradient`).
    StopGradient { x: Value } => {
        name: "stop_gradient",
        operands: [x],
        fusion: FusionClass::View(*x),
    },
    /// Same elements, row-major order, new shape with the same element count.
    Reshape { x: Value, shape: Shape } => {
        name: "reshape",
        operands: [x],
        fusion: FusionClass::View(*x),
    },
    /// Result dimension `i` is operand dimension `perm[i]`.
    Transpose { x: Value, perm: Vec<usize> } => {
        name: "transpose",
        operands: [x],
        fusion: FusionClass::Kernel,
    },
    /// The elements in reverse order along each of `axes`.
    Reverse { x: Value, axes: Vec<usize> } => {
        name: "reverse",
        operands: [x],
        fusion: FusionClass::Kernel,
    },
    /// Elements `start[i] + k * stride[i] < limit[i]` of every dimension.
    Slice {
        x: Value,
        start: Vec<usize>,
        limit: Vec<usize>,
        stride: Vec<usize>,
    } => {
        name: "slice",
        operands: [x],
        fusion: FusionClass::Kernel,
    },
    /// The window of dims `sizes` starting at `starts` (integer scalars, one per
    /// dimension, computed at run time), each start clamped to `[0, dim - size]`.
    DynamicSlice {
        x: Value,
        starts: Vec<Value>,
        sizes: Vec<usize>,
    } => {
        name: "dynamic_slice",
        operands: [x, starts],
        fusion: FusionClass::Kernel,
    },
    /// `x` with the window at `starts` (clamped as in `DynamicSlice`) replaced by `update`.
    DynamicUpdateSlice {
        x: Value,
        update: Value,
        starts: Vec<Value>,
    } => {
        name: "dynamic_update_slice",
        operands: [x, update, starts],
        fusion: FusionClass::Kernel,
    },
    /// Operands joined along `axis`; all other dimensions equal.
    Concatenate { xs: Vec<Value>, axis: usize } => {
        name: "concatenate",
        operands: [xs],
        fusion: FusionClass::Kernel,
    },
    /// Padding with the scalar `value`: `low`/`high` per dimension (negative crops) and
    /// `interior` elements between neighbours.
    Pad {
        x: Value,
        value: Value,
        low: Vec<i64>,
        high: Vec<i64>,
        interior: Vec<usize>,
    } => {
        name: "pad",
        operands: [x, value],
        fusion: FusionClass::Kernel,
    },
    /// Generalised matrix product over batch and contracting dimensions.
    DotGeneral {
        lhs: Value,
        rhs: Value,
        dims: DotDims,
    } => {
        name: "dot_general",
        operands: [lhs, rhs],
        fusion: FusionClass::Kernel,
    },
    /// Reduction of `x` over `axes` (removed from the shape).
    Reduce {
        op: ReduceOp,
        x: Value,
        axes: Vec<usize>,
    } => {
        name: "reduce",
        operands: [x],
        fusion: FusionClass::Kernel,
    },
    /// The mean and the (biased) variance of `x` over `axes`, stacked: `[2, kept dims]`,
    /// row 0 the mean, row 1 the mean squared deviation from it. A primitive, not a
    /// composition of reductions, because then normalization's training step reads its
    /// activation twice for both statistics without writing the deviations out, and the
    /// gradient of the statistics is elementwise, with no reduction of its own.
    Moments {
        x: Value,
        axes: Vec<usize>,
    } => {
        name: "moments",
        operands: [x],
        fusion: FusionClass::Kernel,
    },
    /// Reduction over sliding windows (pooling).
    ReduceWindow {
        op: ReduceOp,
        x: Value,
        window: Window,
    } => {
        name: "reduce_window",
        operands: [x],
        fusion: FusionClass::Kernel,
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
    } => {
        name: "select_and_scatter_add",
        operands: [source, operand],
        fusion: FusionClass::Kernel,
    },
    /// N-dimensional convolution; see [`ConvParams`] for the layout.
    Convolution {
        lhs: Value,
        rhs: Value,
        params: ConvParams,
    } => {
        name: "convolution",
        operands: [lhs, rhs],
        fusion: FusionClass::Kernel,
    },
    /// `take` along `axis` with `batch_dims` leading batch dimensions (as `tf.gather`):
    /// result shape `operand[..axis] ++ indices[batch_dims..] ++ operand[axis+1..]`.
    /// Out-of-range indices are clamped into range.
    Gather {
        operand: Value,
        indices: Value,
        axis: usize,
        batch_dims: usize,
    } => {
        name: "gather",
        operands: [operand, indices],
        fusion: FusionClass::Kernel,
    },
    /// The transpose of `Gather`: `operand` plus `updates` added at the gathered positions
    /// (repeated indices accumulate). Indices are clamped as in `Gather`.
    ScatterAdd {
        operand: Value,
        indices: Value,
        updates: Value,
        axis: usize,
        batch_dims: usize,
    } => {
        name: "scatter_add",
        operands: [operand, indices, updates],
        fusion: FusionClass::Kernel,
    },
    /// Uniform f32 or f64 samples in `[0, 1)` of the node's shape from the counter-based
    /// Threefry-2x32 generator: element `i` (row-major) is `threefry2x32(key, (hi32(i), lo32(i)))`
    /// word 0, top 23 (f32) or 32 (f64) bits used as the mantissa. `key` is `i32[2]`.
    RandomUniform { key: Value } => {
        name: "random_uniform",
        operands: [key],
        fusion: FusionClass::Kernel,
    },
    /// Carried value `result` of a loop (StableHLO `while`): starting from `init`, while
    /// `cond` (carried values in, one `bool[]` out) gives true, the carried values become
    /// what `body` (carried values in, the same types out) returns. A loop over N values is
    /// N sibling nodes with the same `init`, `cond` and `body`, one per `result`: one
    /// computation, which every backend runs once however many of its siblings are used.
    ///
    /// `scan` is set on loops that [`Graph::scan`](crate::ir::Graph::scan) builds (see
    /// [`ScanStep`]): what makes them differentiable.
    While {
        init: Vec<Value>,
        result: usize,
        cond: Region,
        body: Region,
        scan: Option<ScanStep>,
    } => {
        name: "while",
        operands: [init],
        fusion: FusionClass::Kernel,
    },
    /// Sum of `x` over all replicas of a replicated computation.
    AllReduceSum { x: Value } => {
        name: "all_reduce_sum",
        operands: [x],
        fusion: FusionClass::Kernel,
        distinct: true,
    },
    /// This replica's index (i32 scalar).
    ReplicaId => {
        name: "replica_id",
        operands: [],
        fusion: FusionClass::Kernel,
        distinct: true,
    },
}

impl Op {
    /// Whether the op is a pure elementwise function of same-shaped operands.
    pub fn is_elementwise(&self) -> bool {
        match self.fusion() {
            FusionClass::Elementwise(_) => true,
            FusionClass::Source(_)
            | FusionClass::View(_)
            | FusionClass::Broadcast { .. }
            | FusionClass::Kernel => false,
        }
    }
}
