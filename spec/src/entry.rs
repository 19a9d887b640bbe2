//! What an entry of the catalogue holds: its names, its arguments, and its rules.

use crate::error::{ArgError, MergeError, ShapeError};
use crate::shape::Shape;
use crate::value::{Args, Kind};

/// An argument's default.
#[derive(Clone, Copy, Debug)]
pub enum ArgDefault {
    /// Must be given.
    Required,
    /// The default, written as in a call (and read by the same code as a user's value).
    Is(&'static str),
    /// Optional, with no value when not given (`name`, `input_shape`).
    Absent,
}

#[derive(Debug)]
pub struct ArgDef {
    pub name: &'static str,
    pub kind: Kind,
    pub default: ArgDefault,
    /// Whether it may be given by position (the common arguments are keyword-only).
    pub positional: bool,
    /// Whether the runtime struct has a field of this name.
    pub field: bool,
}

pub(crate) const fn arg(name: &'static str, kind: Kind, default: &'static str) -> ArgDef {
    ArgDef {
        name,
        kind,
        default: ArgDefault::Is(default),
        positional: true,
        field: true,
    }
}

pub(crate) const fn required(name: &'static str, kind: Kind) -> ArgDef {
    ArgDef {
        name,
        kind,
        default: ArgDefault::Required,
        positional: true,
        field: true,
    }
}

/// Keras' `data_format`: accepted, not stored.
pub(crate) const DATA_FORMAT: ArgDef = ArgDef {
    name: "data_format",
    kind: Kind::DataFormat,
    default: ArgDefault::Is("channels_last"),
    positional: true,
    field: false,
};

/// Keyword arguments every layer takes: its name (default: Keras' `dense`, `dense_1`, …),
/// whether it is trainable, and, on the first layer only, the model's input shape.
pub static COMMON: &[ArgDef] = &[
    ArgDef {
        name: "name",
        kind: Kind::Name,
        default: ArgDefault::Absent,
        positional: false,
        field: false,
    },
    ArgDef {
        name: "input_shape",
        kind: Kind::Shape,
        default: ArgDefault::Absent,
        positional: false,
        field: false,
    },
    // `trainable = false` freezes the layer: no gradient, no optimizer state.
    ArgDef {
        name: "trainable",
        kind: Kind::Bool,
        default: ArgDefault::Absent,
        positional: false,
        field: false,
    },
];

/// One weight or state tensor, as the runtime layer creates it.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Its name within the layer: `kernel` (the weight is `dense_1/kernel`).
    pub suffix: &'static str,
    pub dims: Vec<Option<usize>>,
    /// The argument holding its initializer.
    pub init_arg: &'static str,
    /// `(fan_in, fan_out)` for variance-scaling initializers, as Keras counts them.
    pub fans: [Option<usize>; 2],
    /// Trainable weights get gradients; the others (batch-norm moving statistics) are
    /// state the forward pass may update in training.
    pub trainable: bool,
}

pub(crate) fn param(
    suffix: &'static str,
    dims: Vec<Option<usize>>,
    init_arg: &'static str,
    fans: [Option<usize>; 2],
) -> Param {
    Param {
        suffix,
        dims,
        init_arg,
        fans,
        trainable: true,
    }
}

pub type ShapeRule = fn(&Args, &Shape) -> Result<Shape, ShapeError>;
/// The output shape for the shapes of a list of inputs (a merge).
pub type ListRule = fn(&Args, &[Shape]) -> Result<Shape, MergeError>;
pub type ParamRule = fn(&Args, &Shape) -> Vec<Param>;
pub type Validate = fn(&Args) -> Vec<ArgError>;

/// What a layer is called on, and the rule giving its output shape.
#[derive(Clone, Copy, Debug)]
pub enum Rule {
    /// One input, `Dense(10)(x)`: every layer a sequential model can hold.
    One(ShapeRule),
    /// A list of inputs, `Add()([a, b])`, at least `min` and at most `max` of them. The
    /// parameters (none, for the merges) are asked for with the first input's shape.
    List {
        min: usize,
        max: Option<usize>,
        rule: ListRule,
    },
    /// Named inputs given by position, `MultiHeadAttention(...)(query, value)`: the
    /// first `required` of `inputs` must be given, the rest may be.
    Positional {
        inputs: &'static [&'static str],
        required: usize,
        rule: ListRule,
    },
}

#[derive(Debug)]
pub struct LayerDef {
    /// The Keras class name, also the runtime layer's `class()`.
    pub class: &'static str,
    pub aliases: &'static [&'static str],
    /// Keras' automatic name: `dense`, then `dense_1`, ….
    pub base_name: &'static str,
    /// The struct in `strata::nn`; empty for `Input`, which is no runtime layer.
    pub runtime: &'static str,
    pub args: &'static [ArgDef],
    /// How many inputs the layer takes, and its output shape for their shapes (all
    /// without the batch axis).
    pub shape: Rule,
    /// The parameters created for an input shape, in the order `forward` receives them.
    /// Called only for inputs `shape` accepts.
    pub params: ParamRule,
    /// How arguments combine, beyond each one's range.
    pub validate: Validate,
    /// Takes integer ids, so it can only be the first layer.
    pub takes_ids: bool,
}

impl LayerDef {
    pub fn is_input(&self) -> bool {
        self.runtime.is_empty()
    }

    /// Whether the layer is called on a list of inputs (a merge).
    pub fn takes_list(&self) -> bool {
        matches!(self.shape, Rule::List { .. })
    }

    /// Whether a call may take more than one input (a list, or several by position).
    pub fn takes_many(&self) -> bool {
        !matches!(self.shape, Rule::One(_))
    }

    /// The output shape of one call on `inputs` (one shape, or the list's): the count
    /// checked against the entry, then its rule.
    pub fn output(&self, args: &Args, inputs: &[Shape]) -> Result<Shape, CallError> {
        match self.shape {
            Rule::One(rule) => match inputs {
                [x] => rule(args, x).map_err(CallError::Shape),
                _ => Err(CallError::Merge(MergeError::Count {
                    min: 1,
                    max: Some(1),
                    got: inputs.len(),
                })),
            },
            Rule::List { min, max, rule } => {
                if inputs.len() < min || max.is_some_and(|m| inputs.len() > m) {
                    return Err(CallError::Merge(MergeError::Count {
                        min,
                        max,
                        got: inputs.len(),
                    }));
                }
                rule(args, inputs).map_err(CallError::Merge)
            }
            Rule::Positional {
                inputs: names,
                required,
                rule,
            } => {
                if inputs.len() < required || inputs.len() > names.len() {
                    return Err(CallError::Merge(MergeError::Count {
                        min: required,
                        max: Some(names.len()),
                        got: inputs.len(),
                    }));
                }
                rule(args, inputs).map_err(CallError::Merge)
            }
        }
    }

    /// Every argument in its range, then how they combine: what the macro checks while
    /// reading a call, for values no compiler saw (a runtime struct built by hand).
    pub fn check_args(&self, args: &Args) -> Result<(), ArgError> {
        for a in self.args {
            if let Some(v) = args.get(a.name) {
                a.kind.check(a.name, v).map_err(|message| ArgError {
                    arg: a.name,
                    message,
                })?;
            }
        }
        match (self.validate)(args).into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Why one call of a layer cannot take its inputs.
#[derive(Clone, Debug, PartialEq)]
pub enum CallError {
    /// A one-input layer's rule refused the input.
    Shape(ShapeError),
    /// The inputs' count, or how their shapes combine.
    Merge(MergeError),
}

pub(crate) fn no_params(_: &Args, _: &Shape) -> Vec<Param> {
    Vec::new()
}

pub(crate) fn no_checks(_: &Args) -> Vec<ArgError> {
    Vec::new()
}

pub(crate) fn same_shape(_: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    Ok(x.clone())
}
