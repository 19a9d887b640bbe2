//! What an entry of the catalogue holds: its names, its arguments, and its rules.

use crate::choice::{initializer_named, Choice};
use crate::error::{ArgError, MergeError, ShapeError};
use crate::shape::Shape;
use crate::value::{Args, Kind, Val};
use std::borrow::Cow;

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

/// A keyword-only argument: one Keras takes by keyword, or one it takes when the layer
/// is called (`use_causal_mask`), which `model!` takes with the layer's arguments.
pub(crate) const fn keyword(name: &'static str, kind: Kind, default: &'static str) -> ArgDef {
    ArgDef {
        positional: false,
        ..arg(name, kind, default)
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
    /// Its name within the layer: `kernel` (the weight is `dense_1/kernel`); a wrapper's
    /// weights are its wrapped layer's, under that layer's name (`forward_lstm/...`).
    pub suffix: Cow<'static, str>,
    pub dims: Vec<Option<usize>>,
    /// The argument holding its initializer, or, for a weight Keras always starts the
    /// same way (Attention's `scale`: `ones`), that initializer's name.
    pub init_arg: &'static str,
    /// `(fan_in, fan_out)` for variance-scaling initializers, as Keras counts them.
    pub fans: [Option<usize>; 2],
    /// Trainable weights get gradients; the others (batch-norm moving statistics) are
    /// state the forward pass may update in training.
    pub trainable: bool,
}

impl Param {
    /// Its initializer: the one its argument holds, or the one `init_arg` names.
    pub fn initializer(&self, args: &Args) -> Option<&'static Choice> {
        match args.get(self.init_arg) {
            Some(Val::Initializer(c)) => Some(c),
            Some(_) => None,
            None => initializer_named(self.init_arg),
        }
    }
}

pub(crate) fn param(
    suffix: &'static str,
    dims: Vec<Option<usize>>,
    init_arg: &'static str,
    fans: [Option<usize>; 2],
) -> Param {
    Param {
        suffix: Cow::Borrowed(suffix),
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
/// The parameters created for the shapes of all of a call's inputs (MultiHeadAttention's
/// projections are sized by the query's features and the value's and key's).
pub type ListParamRule = fn(&Args, &[Shape]) -> Vec<Param>;
pub type Validate = fn(&Args) -> Vec<ArgError>;
/// The shapes of the outputs a call gives after its first, for the layer's arguments:
/// a recurrent layer's final states with `return_state` (Keras' order), none for most.
pub type StatesRule = fn(&Args) -> Vec<Shape>;

/// What a layer is called on, and the rule giving its output shape.
#[derive(Clone, Copy, Debug)]
pub enum Rule {
    /// One input, `Dense(10)(x)`: every layer a sequential model can hold.
    One(ShapeRule),
    /// A list of inputs, `Add()([a, b])`, at least `min` and at most `max` of them;
    /// `params` sizes the weights from every input's shape.
    List {
        min: usize,
        max: Option<usize>,
        rule: ListRule,
        params: ListParamRule,
    },
    /// Named inputs given by position, `MultiHeadAttention(...)(query, value)`: the
    /// first `required` of `inputs` must be given, the rest may be; `keywords` are inputs
    /// given by name only (`attention_mask = m`), which come after all of `inputs` (the
    /// optional ones filled with their defaults); `params` sizes the weights from every
    /// input's shape.
    Positional {
        inputs: &'static [&'static str],
        required: usize,
        keywords: &'static [&'static str],
        rule: ListRule,
        params: ListParamRule,
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
    /// Called only for inputs `shape` accepts. A layer of several inputs
    /// ([`Rule::List`], [`Rule::Positional`]) has its rule in `shape`, which sees every
    /// input, and `no_params` here (a test checks); read both through
    /// [`LayerDef::call_params`].
    pub params: ParamRule,
    /// How arguments combine, beyond each one's range.
    pub validate: Validate,
    /// Takes integer ids, so it can only be the first layer.
    pub takes_ids: bool,
    /// The outputs after the first (see [`LayerDef::outputs`]); `no_states` for a layer
    /// of one output.
    pub states: StatesRule,
}

impl LayerDef {
    pub fn is_input(&self) -> bool {
        self.runtime.is_empty()
    }

    /// The inputs a call takes by name only (`attention_mask`); none for most layers.
    pub fn keyword_inputs(&self) -> &'static [&'static str] {
        match self.shape {
            Rule::Positional { keywords, .. } => keywords,
            _ => &[],
        }
    }

    /// How many inputs a call takes by position at most.
    pub fn positional_inputs(&self) -> usize {
        match self.shape {
            Rule::Positional { inputs, .. } => inputs.len(),
            Rule::One(_) => 1,
            Rule::List { .. } => 1,
        }
    }

    /// Whether the layer is called on a list of inputs (a merge).
    pub fn takes_list(&self) -> bool {
        matches!(self.shape, Rule::List { .. })
    }

    /// Whether a call may take more than one input (a list, or several by position).
    pub fn takes_many(&self) -> bool {
        !matches!(self.shape, Rule::One(_))
    }

    /// The inputs a positional call takes, as both readers name them after a wrong count:
    /// ` (query, value[, key])`; empty for other layers.
    pub fn inputs_text(&self) -> String {
        match self.shape {
            Rule::Positional {
                inputs, required, ..
            } => {
                let (given, optional) = inputs.split_at(required.min(inputs.len()));
                let optional: String = optional.iter().map(|n| format!("[, {n}]")).collect();
                format!(" ({}{optional})", given.join(", "))
            }
            _ => String::new(),
        }
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
            Rule::List { min, max, rule, .. } => {
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
                keywords,
                rule,
                ..
            } => {
                if inputs.len() < required || inputs.len() > names.len() + keywords.len() {
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

    /// Every output of one call on `inputs`, in Keras' order: [`output`](LayerDef::output)
    /// first, then the states its arguments ask for (`return_state`). The one rule both
    /// the macro's checks and the runtime's build read for a call's outputs.
    pub fn outputs(&self, args: &Args, inputs: &[Shape]) -> Result<Vec<Shape>, CallError> {
        let mut all = vec![self.output(args, inputs)?];
        all.extend((self.states)(args));
        Ok(all)
    }

    /// How many outputs a call gives with these arguments (one for most layers).
    pub fn output_count(&self, args: &Args) -> usize {
        1 + (self.states)(args).len()
    }

    /// The parameters one call on `inputs` creates (shapes its `output` accepted): a
    /// one-input layer's from its input, a layer of several inputs' from all of them.
    pub fn call_params(&self, args: &Args, inputs: &[Shape]) -> Vec<Param> {
        match self.shape {
            Rule::One(_) => match inputs.first() {
                Some(x) => (self.params)(args, x),
                None => (self.params)(args, &Shape::unknown()),
            },
            Rule::List { params, .. } | Rule::Positional { params, .. } => params(args, inputs),
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

pub(crate) fn no_states(_: &Args) -> Vec<Shape> {
    Vec::new()
}

pub(crate) fn no_list_params(_: &Args, _: &[Shape]) -> Vec<Param> {
    Vec::new()
}

pub(crate) fn no_checks(_: &Args) -> Vec<ArgError> {
    Vec::new()
}

pub(crate) fn same_shape(_: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    Ok(x.clone())
}
