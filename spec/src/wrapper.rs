//! The wrappers: `Bidirectional` (a recurrent layer run forwards and backwards over a
//! sequence, its two outputs joined) and `TimeDistributed` (a one-input layer applied at
//! every step of the leading axis). The wrapped layer is an argument of kind
//! [`Kind::Layer`](crate::Kind::Layer): its own entry and arguments, read by its own rules,
//! so a wrapper knows no layer in particular.

use crate::entry::{ArgDefault, Param, Rule};
use crate::error::{ArgError, ShapeError};
use crate::shape::Shape;
use crate::value::{Args, Val};
use crate::LayerDef;
use std::borrow::Cow;
use std::fmt;

/// A wrapped layer: its entry and its arguments (its `name` among them when given).
#[derive(Clone, Debug)]
pub struct Wrapped {
    pub def: &'static LayerDef,
    pub args: Args,
}

impl PartialEq for Wrapped {
    fn eq(&self, other: &Wrapped) -> bool {
        self.def.class == other.def.class && self.args == other.args
    }
}

impl Wrapped {
    /// Its name: the one given, else its class' (`lstm`). The wrapper's weights are named
    /// after it, as Keras names them (`bidirectional/forward_lstm/lstm_cell/kernel`).
    pub fn name(&self) -> &str {
        match self.args.get("name") {
            Some(Val::Name(n)) => n,
            _ => self.def.base_name,
        }
    }

    /// Its output for one input; a layer of several inputs is refused by the wrapper's
    /// checks, and gives an unknown shape here so nothing else fails.
    fn output(&self, x: &Shape) -> Result<Shape, ShapeError> {
        match self.def.shape {
            Rule::One(rule) => rule(&self.args, x),
            _ => Ok(Shape::unknown()),
        }
    }

    /// Its parameters for input `x`, under `{prefix}{name}/`.
    fn params(&self, x: &Shape, prefix: &str) -> Vec<Param> {
        (self.def.params)(&self.args, x)
            .into_iter()
            .map(|p| Param {
                suffix: Cow::Owned(format!("{prefix}{}/{}", self.name(), p.suffix)),
                // Read against the wrapper's arguments: name the initializer itself.
                init_arg: p.initializer(&self.args).map_or(p.init_arg, |c| c.name),
                ..p
            })
            .collect()
    }
}

/// `LSTM(8, return_sequences = true)`: the required arguments by position, the others
/// that differ from their defaults by keyword.
impl fmt::Display for Wrapped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for a in self.def.args {
            let Some(v) = self.args.get(a.name) else {
                continue;
            };
            let v = v.to_string();
            match a.default {
                ArgDefault::Required => parts.push(v),
                ArgDefault::Is(default) if default == v => {}
                _ => parts.push(format!("{} = {v}", a.name)),
            }
        }
        if let Some(n @ Val::Name(_)) = self.args.get("name") {
            parts.push(format!("name = {n}"));
        }
        write!(f, "{}({})", self.def.class, parts.join(", "))
    }
}

fn wrapped(a: &Args) -> Option<&Wrapped> {
    match a.get("layer") {
        Some(Val::Layer(w)) => Some(w),
        _ => None,
    }
}

/// The layers Bidirectional can run both ways.
const RECURRENT: [&str; 3] = ["SimpleRNN", "LSTM", "GRU"];

fn recurrent(a: &Args) -> Option<&Wrapped> {
    wrapped(a).filter(|w| RECURRENT.contains(&w.def.class))
}

/// The wrapped recurrent layer's output, its last axis doubled when the two are
/// concatenated (`merge_mode = concat`, the default).
pub(crate) fn bidirectional(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let Some(w) = recurrent(a) else {
        return Ok(Shape::unknown());
    };
    let y = w.output(x)?;
    match y.dims.last() {
        Some(&Some(units)) if a.choice("merge_mode") == "concat" => {
            Ok(y.with_last(units.saturating_mul(2)).unwrap_or(y))
        }
        _ => Ok(y),
    }
}

/// The wrapped layer's states for each direction, the forward copy's first (Keras 3:
/// `[output, forward_h, (forward_c,) backward_h, (backward_c)]`); `merge_mode` joins the
/// outputs only.
pub(crate) fn bidirectional_states(a: &Args) -> Vec<Shape> {
    match recurrent(a) {
        Some(w) => [(w.def.states)(&w.args), (w.def.states)(&w.args)].concat(),
        None => Vec::new(),
    }
}

/// The forward copy's weights, then the backward copy's: `forward_lstm/...`,
/// `backward_lstm/...`.
pub(crate) fn bidirectional_params(a: &Args, x: &Shape) -> Vec<Param> {
    match recurrent(a) {
        Some(w) => [w.params(x, "forward_"), w.params(x, "backward_")].concat(),
        None => Vec::new(),
    }
}

pub(crate) fn bidirectional_checks(a: &Args) -> Vec<ArgError> {
    let mut errors = Vec::new();
    if let Some(w) = wrapped(a).filter(|w| !RECURRENT.contains(&w.def.class)) {
        let hint = if matches!(w.def.shape, Rule::One(_)) && !w.def.is_input() {
            format!("; to apply it at every step, write `TimeDistributed({w})`")
        } else {
            String::new()
        };
        errors.push(ArgError {
            arg: "layer",
            message: format!(
                "`layer` must be a recurrent layer (SimpleRNN, LSTM or GRU) to run over the \
                 sequence both ways, got {}{hint}",
                w.def.class
            ),
        });
    }
    // Keras' backward copy reads backwards; a layer that already does would make two.
    if recurrent(a).is_some_and(|w| w.args.flag("go_backwards")) {
        errors.push(ArgError {
            arg: "layer",
            message: "the wrapped layer must read forwards (`go_backwards = false`): \
                      Bidirectional runs its copy backwards itself"
                .into(),
        });
    }
    if a.get("backward_layer").is_some() {
        errors.push(ArgError {
            arg: "backward_layer",
            message: "`backward_layer` is not supported yet: the backward copy is `layer` \
                      reading backwards (`go_backwards = true`); leave it out"
                .into(),
        });
    }
    errors
}

/// The leading axis (`None` when unknown) and the shape of each step under it.
fn steps(x: &Shape) -> Result<(Option<usize>, Shape), ShapeError> {
    if x.open {
        // The time axis is the first of `dims` or comes before them; either way a step
        // ends with the rest of them.
        let rest = x.dims.get(1..).unwrap_or_default().to_vec();
        return Ok((
            None,
            Shape {
                open: true,
                dims: rest,
            },
        ));
    }
    match x.dims.split_first() {
        Some((&time, rest)) if !rest.is_empty() => Ok((
            time,
            Shape {
                open: false,
                dims: rest.to_vec(),
            },
        )),
        _ => Err(ShapeError::NotTimeSteps),
    }
}

/// `(timesteps, ...)` → `(timesteps, ...)` with every step through the wrapped layer.
pub(crate) fn time_distributed(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let (time, step) = steps(x)?;
    let Some(w) = wrapped(a) else {
        return Ok(Shape::unknown());
    };
    let y = w.output(&step).map_err(|e| ShapeError::Step(Box::new(e)))?;
    if y.open {
        return Ok(y);
    }
    let mut dims = vec![time];
    dims.extend(y.dims);
    Ok(Shape { open: false, dims })
}

/// The wrapped layer's weights, sized by one step: `dense/kernel`.
pub(crate) fn time_distributed_params(a: &Args, x: &Shape) -> Vec<Param> {
    match (wrapped(a), steps(x)) {
        (Some(w), Ok((_, step))) => w.params(&step, ""),
        _ => Vec::new(),
    }
}

pub(crate) fn time_distributed_checks(a: &Args) -> Vec<ArgError> {
    match wrapped(a) {
        Some(w) if !matches!(w.def.shape, Rule::One(_)) || w.def.is_input() => vec![ArgError {
            arg: "layer",
            message: format!(
                "`layer` must be a layer of one input to apply at every step, got {}",
                w.def.class
            ),
        }],
        // Each step's output is one value; a layer's states would have no step axis.
        Some(w) if w.def.output_count(&w.args) > 1 => vec![ArgError {
            arg: "layer",
            message: format!(
                "`layer` must give one output to apply at every step; {} with \
                 `return_state` gives its states too: leave it false",
                w.def.class
            ),
        }],
        _ => Vec::new(),
    }
}
