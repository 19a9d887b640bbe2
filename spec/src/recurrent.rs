//! The recurrent layers (SimpleRNN, LSTM, GRU): one rule over `(timesteps, features)`,
//! their weights in Keras 3's layouts (gates side by side along the last axis: LSTM
//! `i, f, c, o`, GRU `z, r, h`), their final states (`return_state`), and what they do
//! not take yet.

use crate::entry::{arg, keyword, param, required, ArgDef, Param};
use crate::error::{ArgError, ShapeError};
use crate::shape::Shape;
use crate::value::{Args, Kind};

/// `(timesteps, features)` → `(units,)`, or `(timesteps, units)` with `return_sequences`.
pub(crate) fn recurrent(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let (timesteps, _) = sequence(x)?;
    let units = Some(a.count("units"));
    let dims = if a.flag("return_sequences") {
        vec![timesteps, units]
    } else {
        vec![units]
    };
    Ok(Shape { open: false, dims })
}

/// The final states a layer of `n` of them returns with `return_state`, each `(units,)`.
fn states(a: &Args, n: usize) -> Vec<Shape> {
    if !a.flag("return_state") {
        return Vec::new();
    }
    let state = Shape {
        open: false,
        dims: vec![Some(a.count("units"))],
    };
    vec![state; n]
}

/// SimpleRNN's and GRU's one state `h`, after the output (Keras: `[output, state]`).
pub(crate) fn one_state(a: &Args) -> Vec<Shape> {
    states(a, 1)
}

/// An LSTM's `h` then `c` (Keras: `[output, state_h, state_c]`).
pub(crate) fn lstm_states(a: &Args) -> Vec<Shape> {
    states(a, 2)
}

/// The timesteps and features of a sequence input, `None` where not known yet.
fn sequence(x: &Shape) -> Result<(Option<usize>, Option<usize>), ShapeError> {
    if x.dims.len() > 2 || (!x.open && x.dims.len() != 2) {
        return Err(ShapeError::NotSequence);
    }
    let mut all = vec![None; 2 - x.dims.len()];
    all.extend_from_slice(&x.dims);
    Ok((all[0], all[1]))
}

/// `kernel (features, k·units)`, `recurrent_kernel (units, k·units)`, `bias`: `(k·units,)`,
/// or `(2, 3·units)` for a GRU that resets after the product (an input and a recurrent
/// bias). Named by their Keras 3 paths, under the layer's cell (`lstm/lstm_cell/kernel`).
fn params(k: usize, names: [&'static str; 3], a: &Args, x: &Shape) -> Vec<Param> {
    let features = sequence(x).ok().and_then(|(_, f)| f);
    let units = a.count("units");
    // Unknown where `k · units` overflows (the arguments' check refuses such units; the
    // rule must not fail before that check reports it).
    let width = k.checked_mul(units);
    let mut p = vec![
        param(
            names[0],
            vec![features, width],
            "kernel_initializer",
            [features, width],
        ),
        param(
            names[1],
            vec![Some(units), width],
            "recurrent_initializer",
            [Some(units), width],
        ),
    ];
    if a.flag("use_bias") {
        let (dims, init) = if k == 3 && a.flag("reset_after") {
            (vec![Some(2), width], "bias_initializer")
        } else if k == 4 && a.flag("unit_forget_bias") && a.choice("bias_initializer") == "zeros" {
            // Keras' `unit_forget_bias`: the forget gate's block starts at one.
            (vec![width], "forget_bias_one")
        } else {
            (vec![width], "bias_initializer")
        };
        p.push(param(names[2], dims, init, [width, width]));
    }
    p
}

/// A cell's weight names, as Keras 3's paths below the layer.
macro_rules! cell_names {
    ($cell:literal) => {
        [
            concat!($cell, "/kernel"),
            concat!($cell, "/recurrent_kernel"),
            concat!($cell, "/bias"),
        ]
    };
}

pub(crate) fn simple_rnn_params(a: &Args, x: &Shape) -> Vec<Param> {
    params(1, cell_names!("simple_rnn_cell"), a, x)
}

pub(crate) fn lstm_params(a: &Args, x: &Shape) -> Vec<Param> {
    params(4, cell_names!("lstm_cell"), a, x)
}

pub(crate) fn gru_params(a: &Args, x: &Shape) -> Vec<Param> {
    params(3, cell_names!("gru_cell"), a, x)
}

fn not_yet(errors: &mut Vec<ArgError>, arg: &'static str, why: &str) {
    errors.push(ArgError {
        arg,
        message: format!("`{arg}` is not supported yet: {why}"),
    });
}

/// What the layers take in Keras but not here yet, and units whose `GATES · units`
/// weight columns do not fit a size (no compiler checks a runtime struct's `units`).
pub(crate) fn recurrent_checks<const GATES: usize>(a: &Args) -> Vec<ArgError> {
    let mut errors = Vec::new();
    let units = a.count("units");
    if GATES.checked_mul(units).is_none() {
        errors.push(ArgError {
            arg: "units",
            message: format!(
                "`units` {units} is too large: the weights have {GATES} · units columns, \
                 more than a size can count"
            ),
        });
    }
    // Keras starts the forget gate's bias at one and the rest from `bias_initializer`;
    // here the rest starts at zero (or, with `ones`, at one throughout).
    if a.flag("unit_forget_bias") && !matches!(a.choice("bias_initializer"), "zeros" | "ones" | "")
    {
        not_yet(
            &mut errors,
            "unit_forget_bias",
            "with a `bias_initializer` other than zeros or ones; set `unit_forget_bias = false`",
        );
    }
    errors
}

/// The arguments SimpleRNN, LSTM and GRU share, in Keras' positional order up to the
/// initializers; what follows Keras' regularizers (not taken) is keyword-only.
macro_rules! recurrent_args {
    ($($gated:expr,)* ; $($bias_extra:expr,)* ; $($tail:expr,)*) => {
        &[
            required("units", Kind::Count),
            arg("activation", Kind::Activation, "tanh"),
            $($gated,)*
            arg("use_bias", Kind::Bool, "true"),
            arg("kernel_initializer", Kind::Initializer, "glorot_uniform"),
            arg("recurrent_initializer", Kind::Initializer, "orthogonal"),
            arg("bias_initializer", Kind::Initializer, "zeros"),
            $($bias_extra,)*
            keyword("dropout", Kind::Rate, "0.0"),
            keyword("recurrent_dropout", Kind::Rate, "0.0"),
            keyword("return_sequences", Kind::Bool, "false"),
            keyword("return_state", Kind::Bool, "false"),
            keyword("go_backwards", Kind::Bool, "false"),
            $($tail,)*
        ]
    };
}

pub(crate) static SIMPLE_RNN_ARGS: &[ArgDef] = recurrent_args!(;;);

pub(crate) static LSTM_ARGS: &[ArgDef] = recurrent_args!(
    arg("recurrent_activation", Kind::Activation, "sigmoid"), ;
    arg("unit_forget_bias", Kind::Bool, "true"), ;
);

pub(crate) static GRU_ARGS: &[ArgDef] = recurrent_args!(
    arg("recurrent_activation", Kind::Activation, "sigmoid"), ; ;
    keyword("reset_after", Kind::Bool, "true"),
);
