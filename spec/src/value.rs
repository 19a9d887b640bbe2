//! Argument types and values: what kind each argument is, the range it must be in, and
//! the checked value it holds. How a value is *written* (tokens) is the macro's business;
//! the ranges are checked here, for the macro's literals and the runtime's fields alike.

use crate::choice::Choice;
use crate::wrapper::Wrapped;
use std::fmt;

/// The type of a layer argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// A whole number >= 1 (units, filters).
    Count,
    /// A size >= 1 for both spatial axes, or a `(height, width)` pair (kernel_size).
    Pair,
    /// `None` or a [`Kind::Pair`] (pooling strides, which default to the pool size).
    OptionalPair,
    /// `None` or a size >= 0 for both spatial axes, or a `(height, width)` pair of them
    /// (a transposed convolution's output padding).
    OptionalPadding,
    /// A size >= 1 for the one axis of a sequence, written `3` or `(3,)` (a 1-D
    /// kernel_size, stride or dilation).
    Size,
    /// `None` or a [`Kind::Size`] (1-D pooling strides).
    OptionalSize,
    /// A fraction in `[0, 1)` (dropout rate).
    Rate,
    /// A fraction in `[0, 1]` (momentum).
    Fraction,
    /// A number > 0 (epsilon).
    Positive,
    Bool,
    Activation,
    Initializer,
    Padding,
    DataFormat,
    /// An axis, counting the batch axis as Keras does (`-1` is the last).
    Axis,
    /// Sizes >= 1: `784` or `(28, 28, 1)`.
    Shape,
    /// Sizes >= 1, at most one of them `-1` (inferred).
    TargetShape,
    /// A layer name, used as a field name: a snake_case identifier.
    Name,
    /// Any finite number (Rescaling's `scale` and `offset`).
    Number,
    /// A number >= 0 (ReLU's `negative_slope` and `threshold`).
    NonNegative,
    /// `None` or a number >= 0 (ReLU's `max_value`).
    OptionalNonNegative,
    /// `None`, one axis or a tuple of axes, each >= 1: Keras' 1-based axes without the
    /// batch (PReLU's `shared_axes`).
    OptionalAxes,
    /// Sizes >= 0 around an image: `1` (all four sides), `(1, 2)` (symmetric height and
    /// width) or `((top, bottom), (left, right))` (ZeroPadding2D, Cropping2D).
    Margins,
    /// How an image is resized (UpSampling2D): `nearest`, `bilinear`.
    Interpolation,
    /// Axes >= 1, 1-based as in Keras (Permute's `dims`); that they form a permutation is
    /// the layer's check.
    Dims,
    /// One axis for both inputs or a `(first, second)` pair, counting the batch axis as
    /// Keras does, never it (Dot's `axes`): `-1` is the last.
    AxisPair,
    /// How Attention scores a query against a key: `dot`, `concat`.
    ScoreMode,
    /// A layer of the catalogue, written as a call (`LSTM(8)`): what a wrapper wraps.
    Layer,
    /// How Bidirectional joins its two outputs: `concat`, `sum`, `mul`, `ave`.
    MergeMode,
}

/// A checked argument value.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Usize(usize),
    Pair([usize; 2]),
    OptionalPair(Option<[usize; 2]>),
    OptionalUsize(Option<usize>),
    Float(f64),
    Bool(bool),
    Activation(&'static Choice),
    Initializer(&'static Choice),
    Padding(&'static Choice),
    DataFormat(&'static Choice),
    Axis(i64),
    Shape(Vec<usize>),
    TargetShape(Vec<i64>),
    Name(String),
    OptionalFloat(Option<f64>),
    Axes(Option<Vec<usize>>),
    /// `[[top, bottom], [left, right]]`.
    Margins([[usize; 2]; 2]),
    Interpolation(&'static Choice),
    Dims(Vec<usize>),
    AxisPair([i64; 2]),
    ScoreMode(&'static Choice),
    Layer(Box<Wrapped>),
    MergeMode(&'static Choice),
}

/// A size argument (or one size of a pair or shape) must be at least 1.
pub fn check_size(arg: &str, v: i64) -> Result<(), String> {
    if v < 1 {
        return Err(format!("`{arg}` must be at least 1, got {v}"));
    }
    Ok(())
}

/// One size of a `Shape` (`inferred: false`) or `TargetShape` (`inferred: true`).
pub fn check_sizes_item(arg: &str, v: i64, inferred: bool) -> Result<(), String> {
    if v < 1 && !(inferred && v == -1) {
        let what = if inferred { ">= 1 or -1" } else { ">= 1" };
        return Err(format!("`{arg}` sizes must be {what}, got {v}"));
    }
    Ok(())
}

/// A `TargetShape` infers at most one size.
pub fn check_inferred(arg: &str, sizes: &[i64]) -> Result<(), String> {
    if sizes.iter().filter(|&&d| d == -1).count() > 1 {
        return Err(format!("`{arg}` may infer only one size: at most one -1"));
    }
    Ok(())
}

/// An axis that counts the batch axis as 0 must not be it (Dot's `axes`).
pub fn check_not_batch(arg: &str, axis: i64) -> Result<(), String> {
    if axis == 0 {
        return Err(format!(
            "`{arg}` cannot include axis 0, the batch axis: count the others from 1, or from \
             the end with -1"
        ));
    }
    Ok(())
}

impl Kind {
    /// A number of this kind must be in range (`Rate`, `Fraction`, `Positive`,
    /// `NonNegative`, `Number`; any other kind takes any number).
    pub fn check_float(self, arg: &str, v: f64) -> Result<(), String> {
        let (ok, range) = match self {
            Kind::Rate => ((0.0..1.0).contains(&v), "in [0, 1)"),
            Kind::Fraction => ((0.0..=1.0).contains(&v), "in [0, 1]"),
            Kind::Positive => (v > 0.0, "> 0"),
            Kind::NonNegative | Kind::OptionalNonNegative => (v >= 0.0, ">= 0"),
            Kind::Number => (v.is_finite(), "a finite number"),
            _ => return Ok(()),
        };
        if !ok {
            return Err(format!("`{arg}` must be {range}, got {v:?}"));
        }
        Ok(())
    }

    /// Whether `v`, a value of this kind, is in its range (the runtime's fields, which no
    /// compiler checked); the message names `arg` as the macro's errors do.
    pub fn check(self, arg: &str, v: &Val) -> Result<(), String> {
        let size = |n: usize| check_size(arg, i64::try_from(n).unwrap_or(i64::MAX));
        match v {
            Val::Usize(n) if matches!(self, Kind::Count | Kind::Size) => size(*n),
            Val::OptionalUsize(Some(n)) => size(*n),
            Val::Pair(p) | Val::OptionalPair(Some(p)) if self != Kind::OptionalPadding => {
                p.iter().try_for_each(|&n| size(n))
            }
            Val::Float(f) | Val::OptionalFloat(Some(f)) => self.check_float(arg, *f),
            Val::Axes(Some(axes)) | Val::Dims(axes) => axes.iter().try_for_each(|&n| size(n)),
            Val::Shape(dims) => dims.iter().try_for_each(|&n| {
                check_sizes_item(arg, i64::try_from(n).unwrap_or(i64::MAX), false)
            }),
            Val::TargetShape(dims) => {
                dims.iter()
                    .try_for_each(|&d| check_sizes_item(arg, d, true))?;
                check_inferred(arg, dims)
            }
            Val::AxisPair(axes) => axes.iter().try_for_each(|&a| check_not_batch(arg, a)),
            // The wrapped layer's own arguments, by its own entry.
            Val::Layer(w) => w
                .def
                .check_args(&w.args)
                .map_err(|e| format!("`{arg}` {}: {}", w.def.class, e.message)),
            _ => Ok(()),
        }
    }
}

/// Keras' notation, for docs and messages: `(3, 3)`, `relu`, `0.2`.
impl fmt::Display for Val {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tuple = |f: &mut fmt::Formatter<'_>, items: Vec<String>| {
            if items.len() == 1 {
                write!(f, "({},)", items[0])
            } else {
                write!(f, "({})", items.join(", "))
            }
        };
        match self {
            Val::Usize(n) => write!(f, "{n}"),
            Val::Pair([a, b]) | Val::OptionalPair(Some([a, b])) => write!(f, "({a}, {b})"),
            Val::OptionalUsize(Some(n)) => write!(f, "{n}"),
            Val::OptionalPair(None) | Val::OptionalUsize(None) => f.write_str("None"),
            Val::Float(v) => write!(f, "{v:?}"),
            Val::Bool(b) => write!(f, "{b}"),
            Val::Activation(c) | Val::Initializer(c) | Val::Padding(c) | Val::DataFormat(c) => {
                f.write_str(c.name)
            }
            Val::Axis(a) => write!(f, "{a}"),
            Val::Shape(d) => tuple(f, d.iter().map(|d| d.to_string()).collect()),
            Val::TargetShape(d) => tuple(f, d.iter().map(|d| d.to_string()).collect()),
            Val::Name(n) => write!(f, "{n:?}"),
            Val::OptionalFloat(Some(v)) => write!(f, "{v:?}"),
            Val::OptionalFloat(None) | Val::Axes(None) => f.write_str("None"),
            Val::Axes(Some(d)) | Val::Dims(d) => {
                tuple(f, d.iter().map(|d| d.to_string()).collect())
            }
            Val::Margins([[t, b], [l, r]]) => write!(f, "(({t}, {b}), ({l}, {r}))"),
            Val::Interpolation(c) | Val::ScoreMode(c) | Val::MergeMode(c) => f.write_str(c.name),
            Val::Layer(w) => write!(f, "{w}"),
            Val::AxisPair([a, b]) => write!(f, "({a}, {b})"),
        }
    }
}

/// The arguments of one layer, by name: at compile time every argument of its entry,
/// given or defaulted; at build time what the runtime struct's fields hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Args(Vec<(&'static str, Val)>);

impl Args {
    pub fn insert(&mut self, name: &'static str, v: Val) {
        self.0.retain(|(n, _)| *n != name);
        self.0.push((name, v));
    }

    pub fn get(&self, name: &str) -> Option<&Val> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    // Typed reads for the rules. Every argument a rule reads is in its entry with a
    // default (and a runtime field), so the fallbacks are never taken; they only keep
    // rules panic-free.

    pub(crate) fn count(&self, name: &str) -> usize {
        match self.get(name) {
            Some(Val::Usize(n)) => *n,
            _ => 1,
        }
    }

    /// A per-axis size of a layer over `N` spatial axes: a `Size` (one axis) or a `Pair`
    /// (two), given or optional.
    pub(crate) fn sizes<const N: usize>(&self, name: &str) -> [usize; N] {
        let given: &[usize] = match self.get(name) {
            Some(Val::Usize(n) | Val::OptionalUsize(Some(n))) => std::slice::from_ref(n),
            Some(Val::Pair(p) | Val::OptionalPair(Some(p))) => p,
            _ => &[],
        };
        std::array::from_fn(|i| given.get(i).or(given.first()).copied().unwrap_or(1))
    }

    /// [`Args::sizes`] of an optional argument: `None` when it is `None`.
    pub(crate) fn optional_sizes<const N: usize>(&self, name: &str) -> Option<[usize; N]> {
        match self.get(name) {
            Some(Val::OptionalPair(None) | Val::OptionalUsize(None)) | None => None,
            Some(_) => Some(self.sizes(name)),
        }
    }

    pub(crate) fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some(Val::Bool(true)))
    }

    /// Padding that keeps every position (`same`, and `causal`, which pads only the
    /// start): the output has `ceil(input / stride)` positions.
    pub(crate) fn same_padding(&self) -> bool {
        matches!(self.get("padding"), Some(Val::Padding(p)) if p.name == "same" || p.name == "causal")
    }

    pub(crate) fn causal_padding(&self) -> bool {
        matches!(self.get("padding"), Some(Val::Padding(p)) if p.name == "causal")
    }

    pub(crate) fn axis(&self) -> i64 {
        match self.get("axis") {
            Some(Val::Axis(a)) => *a,
            _ => -1,
        }
    }

    pub fn shape(&self, name: &str) -> Option<&[usize]> {
        match self.get(name) {
            Some(Val::Shape(s)) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn margins(&self, name: &str) -> [[usize; 2]; 2] {
        match self.get(name) {
            Some(Val::Margins(m)) => *m,
            _ => [[0, 0], [0, 0]],
        }
    }

    pub(crate) fn axes(&self, name: &str) -> &[usize] {
        match self.get(name) {
            Some(Val::Axes(Some(a)) | Val::Dims(a)) => a,
            _ => &[],
        }
    }

    /// Dot's `axes`, one per input.
    pub(crate) fn axis_pair(&self, name: &str) -> [i64; 2] {
        match self.get(name) {
            Some(Val::AxisPair(a)) => *a,
            _ => [-1, -1],
        }
    }

    /// The name of a choice argument (`score_mode`), `""` when absent.
    pub(crate) fn choice(&self, name: &str) -> &'static str {
        match self.get(name) {
            Some(
                Val::ScoreMode(c)
                | Val::MergeMode(c)
                | Val::Activation(c)
                | Val::Initializer(c)
                | Val::Padding(c)
                | Val::Interpolation(c),
            ) => c.name,
            _ => "",
        }
    }

    /// An optional size (`value_dim`), `None` when not given.
    pub(crate) fn optional_count(&self, name: &str) -> Option<usize> {
        match self.get(name) {
            Some(Val::OptionalUsize(n)) => *n,
            _ => None,
        }
    }

    pub(crate) fn target_shape(&self) -> &[i64] {
        match self.get("target_shape") {
            Some(Val::TargetShape(s)) => s,
            _ => &[],
        }
    }
}
