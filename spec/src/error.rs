//! Why a layer cannot take its input or its arguments, as data. The macro and the runtime
//! word shape errors differently (the macro names both layers and shows the input's
//! shape with its batch axis; the runtime names the one layer and its real input), and
//! each wording is tested byte for byte; both are written here, once per kind of error.

/// Why a layer cannot take an input shape.
#[derive(Clone, Debug, PartialEq)]
pub enum ShapeError {
    /// Dense and the like act on the last axis; there is none.
    NoAxis,
    /// Image layers take `(height, width, channels)`.
    NotImage,
    /// Sequence layers (1-D convolution and pooling) take `(steps, channels)`.
    NotSequence,
    /// A `window` (the `kernel` or pool dilated; `pool` says which; one size per spatial
    /// axis) that does not fit a spatial axis with valid padding, or any window over an
    /// empty axis.
    Window {
        kernel: Vec<usize>,
        window: Vec<usize>,
        pool: bool,
        same: bool,
    },
    /// Conv2D's input channels must split into its groups.
    Groups { groups: usize },
    /// The element count does not fit `target` (`known`: the product of its given sizes).
    Reshape {
        known: usize,
        inferred: bool,
        target: Vec<i64>,
    },
    /// The `axis` argument names an axis the input does not have.
    Axis { axis: i64 },
    /// RepeatVector takes `(features,)`.
    NotVector,
    /// Cropping2D must leave at least one row and one column.
    Crop { cropping: [[usize; 2]; 2] },
    /// Permute's `dims` permute `rank` axes; the input has another number.
    Permute { rank: usize },
    /// A PReLU `shared_axes` entry (1-based, without the batch) the input does not have.
    SharedAxis { axis: usize },
    /// TimeDistributed takes `(timesteps, ...)`: a leading axis and at least one more.
    NotTimeSteps,
    /// TimeDistributed's wrapped layer cannot take one step of the input.
    Step(Box<ShapeError>),
}

impl ShapeError {
    /// The argument behind the error, for the macro to point at.
    pub fn arg(&self) -> Option<&'static str> {
        match self {
            ShapeError::NoAxis
            | ShapeError::NotImage
            | ShapeError::NotVector
            | ShapeError::NotSequence
            | ShapeError::NotTimeSteps => None,
            ShapeError::Step(_) => Some("layer"),
            ShapeError::Crop { .. } => Some("cropping"),
            ShapeError::Permute { .. } => Some("dims"),
            ShapeError::SharedAxis { .. } => Some("shared_axes"),
            ShapeError::Window { pool: true, .. } => Some("pool_size"),
            ShapeError::Window { pool: false, .. } => Some("kernel_size"),
            ShapeError::Groups { .. } => Some("groups"),
            ShapeError::Reshape { .. } => Some("target_shape"),
            ShapeError::Axis { .. } => Some("axis"),
        }
    }

    /// What the layer needs, as the macro says it: "`conv2d` (Conv2D) needs {this}, but
    /// the input is (None, 784)".
    pub fn need(&self) -> String {
        match self {
            ShapeError::NoAxis => "an input with at least one axis".into(),
            ShapeError::NotImage => "a rank-3 input (height, width, channels)".into(),
            ShapeError::NotSequence => "a rank-2 input (steps, channels)".into(),
            ShapeError::Window {
                kernel,
                window,
                pool,
                ..
            } => {
                // `3x3` over an image's height x width; `3-step` along a sequence.
                let (k, w) = (sizes(kernel), sizes(window));
                let (k, at_least) = if window.len() == 1 {
                    (format!("{k}-step"), format!("{w} steps"))
                } else {
                    (k, format!("{w} (height x width)"))
                };
                let what = if *pool {
                    format!("{k} pool")
                } else if kernel == window {
                    format!("{k} kernel")
                } else {
                    format!("{k} kernel dilated to {w}")
                };
                format!("an input of at least {at_least} for its {what} with valid padding")
            }
            ShapeError::Groups { groups } => {
                format!("input channels divisible by `groups` ({groups})")
            }
            ShapeError::Reshape {
                known,
                inferred,
                target,
            } => {
                let written = crate::Val::TargetShape(target.clone());
                if *inferred {
                    format!("a multiple of {known} elements to reshape to {written}")
                } else {
                    format!("{known} elements to reshape to {written}")
                }
            }
            ShapeError::Axis { axis } => {
                format!("an input with axis {axis} (counting the batch axis as 0)")
            }
            ShapeError::NotVector => "a rank-1 input (features,)".into(),
            ShapeError::Crop { cropping } => format!(
                "an input larger than its cropping {} in height and width",
                crate::Val::Margins(*cropping)
            ),
            ShapeError::Permute { rank } => {
                format!("a rank-{rank} input, one axis per entry of `dims`")
            }
            ShapeError::SharedAxis { axis } => {
                format!(
                    "an input with axis {axis} for `shared_axes` (counting the batch axis as 0)"
                )
            }
            ShapeError::NotTimeSteps => {
                "an input of rank 2 or more (timesteps, ...) to apply its layer at every step"
                    .into()
            }
            ShapeError::Step(e) => format!("{} at every timestep", e.need()),
        }
    }

    /// The input shape the layer expected, as the runtime says it: "dense (Dense):
    /// expected input of shape {this}, got (784)".
    pub fn expected(&self) -> String {
        match self {
            ShapeError::NoAxis => "[..., features] (rank >= 1)".into(),
            ShapeError::NotImage => "(height, width, channels) (rank 3)".into(),
            ShapeError::NotSequence => "(steps, channels) (rank 2)".into(),
            ShapeError::Window { window, same, .. } => {
                let padding = if *same { "same" } else { "valid" };
                let w = sizes(window);
                let axes = if window.len() == 1 {
                    "steps"
                } else {
                    "height and width"
                };
                format!("at least {w} in {axes} for a {w} window with {padding} padding")
            }
            ShapeError::Groups { groups } => format!("channels divisible by groups ({groups})"),
            ShapeError::Reshape {
                known,
                inferred,
                target,
            } => format!(
                "{} element(s) to reshape to {target:?}",
                if *inferred {
                    format!("a multiple of {known}")
                } else {
                    known.to_string()
                }
            ),
            ShapeError::Axis { axis } => format!(
                "a feature axis {axis} (rank >= {})",
                axis.unsigned_abs().max(1)
            ),
            ShapeError::NotVector => "(features,) (rank 1)".into(),
            ShapeError::Crop {
                cropping: [[t, b], [l, r]],
            } => format!(
                "more than {} rows and {} columns to crop {t}+{b} and {l}+{r} from",
                t.saturating_add(*b),
                l.saturating_add(*r)
            ),
            ShapeError::Permute { rank } => format!("rank {rank}, as many axes as `dims`"),
            ShapeError::SharedAxis { axis } => format!("rank >= {axis} for shared axis {axis}"),
            ShapeError::NotTimeSteps => "(timesteps, ...) (rank >= 2)".into(),
            ShapeError::Step(e) => format!("(timesteps, ...), each step {}", e.expected()),
        }
    }
}

/// Per-axis sizes as the messages write them: `3x3`, or `3` for one axis.
fn sizes(s: &[usize]) -> String {
    let parts: Vec<String> = s.iter().map(|v| v.to_string()).collect();
    parts.join("x")
}

/// A mistake in how arguments combine, pointed at `arg`.
#[derive(Clone, Debug, PartialEq)]
pub struct ArgError {
    pub arg: &'static str,
    pub message: String,
}

/// Why a layer cannot be called on a list of inputs: their number, or how their shapes
/// combine. `first` and `second` index the list, so each reader names the operands its
/// own way (the macro by the user's bindings, the runtime by position).
#[derive(Clone, Debug, PartialEq)]
pub enum MergeError {
    /// The layer takes from `min` to `max` inputs (`max` `None`: no limit); `Some(1)` with
    /// `min` 1 is a one-input layer.
    Count {
        min: usize,
        max: Option<usize>,
        got: usize,
    },
    /// Inputs `first` and `second` do not combine: elementwise merges need equal sizes (or
    /// 1) on every axis; a concatenation along `concat_axis` needs them on every other.
    Incompatible {
        first: usize,
        second: usize,
        concat_axis: Option<i64>,
    },
    /// The concatenation axis is not an axis of the inputs (or is the batch axis).
    Axis { axis: i64 },
    /// Dot's two inputs lack the axes `axes` (one each, counting the batch axis as 0), or
    /// differ in size along them.
    DotAxes { axes: [i64; 2] },
    /// Input `input` of an attention layer is not a sequence `(steps, features)`.
    NotSequence { input: usize },
    /// Inputs `first` and `second` of an attention layer do not agree; `need` says how
    /// they must ("a key with the query's features").
    Disagree {
        first: usize,
        second: usize,
        need: &'static str,
    },
}

impl MergeError {
    /// The argument behind the error, for the macro to point at.
    pub fn arg(&self) -> Option<&'static str> {
        match self {
            MergeError::Axis { .. } => Some("axis"),
            MergeError::DotAxes { .. } => Some("axes"),
            MergeError::Count { .. }
            | MergeError::Incompatible { .. }
            | MergeError::NotSequence { .. }
            | MergeError::Disagree { .. } => None,
        }
    }

    /// How many inputs a layer takes, as both readers say it: `one input`, `exactly 2
    /// inputs`, `a list of at least 1 input`.
    pub fn count_text(min: usize, max: Option<usize>) -> String {
        let plural = |n: usize| if n == 1 { "input" } else { "inputs" };
        match max {
            Some(1) if min == 1 => "one input".into(),
            Some(m) if m == min => format!("exactly {m} {}", plural(m)),
            Some(m) => format!("{min} to {m} inputs"),
            None => format!("a list of at least {min} {}", plural(min)),
        }
    }

    /// What the layer needs of its inputs' shapes.
    pub fn need(&self) -> String {
        match self {
            MergeError::Count { min, max, .. } => MergeError::count_text(*min, *max),
            MergeError::Incompatible {
                concat_axis: None, ..
            } => "inputs of one rank with equal sizes (or 1) on every axis".into(),
            MergeError::Incompatible {
                concat_axis: Some(axis),
                ..
            } => format!(
                "inputs of one rank with equal sizes on every axis but the concatenation \
                 axis {axis}"
            ),
            MergeError::Axis { axis } => format!(
                "inputs with axis {axis} (counting the batch axis as 0, which cannot be joined)"
            ),
            MergeError::DotAxes { axes: [a, b] } => format!(
                "two inputs of equal sizes along axis {a} of the first and axis {b} of the \
                 second (counting the batch axis as 0)"
            ),
            MergeError::NotSequence { .. } => {
                "sequences (steps, features) as inputs, each of rank 2 after the batch axis".into()
            }
            MergeError::Disagree { need, .. } => (*need).into(),
        }
    }
}
