//! The wrappers: `Bidirectional` runs a recurrent layer over the sequence forwards and a
//! copy of it backwards (`go_backwards`) and joins the two outputs; and
//! `TimeDistributed` applies a layer at every step of the leading axis, by folding the
//! steps into the batch (one call of the layer, not a loop), as Keras does. Their shapes
//! and weights are the wrapped layer's, by its entry (`strata_spec`'s `wrapper.rs`).

use super::recurrent::{SimpleRNN, GRU, LSTM};
use crate::ir::Value;
use crate::nn::entry::merge_mode;
use crate::nn::layer::{bad_config, one_input, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::{Error, Result};
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use strata_spec::{Args, Val, Wrapped};

/// How Bidirectional joins its forward and backward outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeMode {
    /// Side by side along the last axis (Keras' default): twice the units.
    Concat,
    Sum,
    Mul,
    /// Their mean.
    Ave,
}

impl MergeMode {
    pub const ALL: [MergeMode; 4] = [
        MergeMode::Concat,
        MergeMode::Sum,
        MergeMode::Mul,
        MergeMode::Ave,
    ];

    /// The Keras name.
    pub fn name(self) -> &'static str {
        match self {
            MergeMode::Concat => "concat",
            MergeMode::Sum => "sum",
            MergeMode::Mul => "mul",
            MergeMode::Ave => "ave",
        }
    }

    pub fn from_name(name: &str) -> Option<MergeMode> {
        MergeMode::ALL.into_iter().find(|m| m.name() == name)
    }
}

impl fmt::Display for MergeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A layer Bidirectional can run both ways.
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::upper_case_acronyms)]
pub enum Recurrent {
    SimpleRNN(SimpleRNN),
    LSTM(LSTM),
    GRU(GRU),
}

impl Recurrent {
    pub fn layer(&self) -> &dyn Layer {
        match self {
            Recurrent::SimpleRNN(l) => l,
            Recurrent::LSTM(l) => l,
            Recurrent::GRU(l) => l,
        }
    }

    fn return_sequences(&self) -> bool {
        match self {
            Recurrent::SimpleRNN(l) => l.return_sequences,
            Recurrent::LSTM(l) => l.return_sequences,
            Recurrent::GRU(l) => l.return_sequences,
        }
    }

    /// The backward copy: the same layer reading the sequence from its end (the layer
    /// itself reads forwards; the wrapper's checks refuse one that does not, as Keras).
    fn reversed(&self) -> Recurrent {
        let mut r = self.clone();
        match &mut r {
            Recurrent::SimpleRNN(l) => l.go_backwards = true,
            Recurrent::LSTM(l) => l.go_backwards = true,
            Recurrent::GRU(l) => l.go_backwards = true,
        }
        r
    }
}

impl From<SimpleRNN> for Recurrent {
    fn from(l: SimpleRNN) -> Recurrent {
        Recurrent::SimpleRNN(l)
    }
}

impl From<LSTM> for Recurrent {
    fn from(l: LSTM) -> Recurrent {
        Recurrent::LSTM(l)
    }
}

impl From<GRU> for Recurrent {
    fn from(l: GRU) -> Recurrent {
        Recurrent::GRU(l)
    }
}

/// `layer` as the catalogue's argument: its entry and its arguments, its name among them
/// (the wrapper's weights are named after it); `None` outside the catalogue.
fn as_arg(layer: &dyn Layer) -> Option<Val> {
    let def = strata_spec::layer(layer.class())?;
    let mut args = layer.args()?;
    args.insert("name", Val::Name(layer.name().to_string()));
    Some(Val::Layer(Box::new(Wrapped { def, args })))
}

fn no_onnx(cx: &mut OnnxForward<'_>, why: &str) -> Error {
    cx.unsupported("", why.to_string())
}

/// Keras' `Bidirectional`: `layer` over the sequence, a copy of it with `go_backwards`
/// set over the same sequence (its output sequence put back in time order), the two
/// outputs joined by `merge_mode`. The forward copy's weights come first
/// (`forward_lstm/...`), then the backward copy's (`backward_lstm/...`).
#[derive(Clone, Debug, PartialEq)]
pub struct Bidirectional {
    pub name: String,
    pub layer: Recurrent,
    pub merge_mode: MergeMode,
}

impl Bidirectional {
    /// The wrapper with Keras' default: the outputs concatenated.
    pub fn new(name: impl Into<String>, layer: impl Into<Recurrent>) -> Bidirectional {
        Bidirectional {
            name: name.into(),
            layer: layer.into(),
            merge_mode: MergeMode::Concat,
        }
    }
}

impl Layer for Bidirectional {
    fn class(&self) -> &'static str {
        "Bidirectional"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        let mut args = Args::default();
        args.insert("layer", as_arg(self.layer.layer())?);
        args.insert("merge_mode", merge_mode(self.merge_mode));
        Some(args)
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let all = self.call_all(cx, &[x], params)?;
        all.into_iter()
            .next()
            .ok_or_else(|| bad_config(self, "the wrapped layer gave no output"))
    }

    /// The joined output, then (the wrapped layer returning states) the forward copy's
    /// states and the backward copy's, as Keras 3 orders them; `merge_mode` joins the
    /// outputs only.
    fn call_all(
        &self,
        cx: &mut Forward<'_>,
        inputs: &[Value],
        params: &[Value],
    ) -> Result<Vec<Value>> {
        let x = *one_input(self, inputs)?;
        // The wrapped layer and the input, by the catalogue's rules (a layer built by hand
        // that reads backwards already is refused here, as in `model!`).
        let dims = cx.g.try_ty("bidirectional", x)?.dims().to_vec();
        self.output_shape(dims.get(1..).unwrap_or(&[]))?;
        if !params.len().is_multiple_of(2) {
            return Err(bad_config(
                self,
                format!(
                    "forward expects its layer's parameter values twice (forward, then \
                     backward), got {}",
                    params.len()
                ),
            ));
        }
        let (forward, backward) = params.split_at(params.len() / 2);
        let mut ys = self.layer.layer().call_all(cx, &[x], forward)?;
        let reversed = self.layer.reversed();
        let mut ys_rev = reversed.layer().call_all(cx, &[x], backward)?;
        if ys.is_empty() || ys_rev.is_empty() {
            return Err(bad_config(self, "the wrapped layer gave no output"));
        }
        let (y, mut y_rev) = (ys.remove(0), ys_rev.remove(0));
        let g = &mut *cx.g;
        if self.layer.return_sequences() {
            y_rev = g.reverse(y_rev, &[1])?;
        }
        let joined = match self.merge_mode {
            MergeMode::Concat => {
                let last = g.try_ty("bidirectional", y)?.rank().saturating_sub(1);
                g.concatenate(&[y, y_rev], last)
            }
            MergeMode::Sum => g.add(y, y_rev),
            MergeMode::Mul => g.mul(y, y_rev),
            MergeMode::Ave => {
                let sum = g.add(y, y_rev)?;
                let half = g.full_like(0.5, sum)?;
                g.mul(sum, half)
            }
        }?;
        let mut all = vec![joined];
        all.extend(ys);
        all.extend(ys_rev);
        Ok(all)
    }

    fn onnx(&self, cx: &mut OnnxForward<'_>, _: OnnxValue, _: &[OnnxValue]) -> Result<OnnxValue> {
        Err(no_onnx(
            cx,
            "Bidirectional wraps a recurrent layer, and recurrent layers are not exportable \
             to ONNX yet",
        ))
    }
}

/// The layer TimeDistributed applies: any layer, shared (a model's `Clone` copies the
/// pointer; layers are immutable configurations).
#[derive(Clone, Debug)]
pub struct Stepped(pub Arc<dyn Layer>);

impl<L: Layer + 'static> From<L> for Stepped {
    fn from(l: L) -> Stepped {
        Stepped(Arc::new(l))
    }
}

impl Deref for Stepped {
    type Target = dyn Layer;

    fn deref(&self) -> &(dyn Layer + 'static) {
        &*self.0
    }
}

/// Keras' `TimeDistributed`: `layer` applied to every step of the leading axis, `(timesteps,
/// ...in)` → `(timesteps, ...out)`; its weights are `layer`'s (`time_distributed/dense/
/// kernel`), one set for every step.
#[derive(Clone, Debug)]
pub struct TimeDistributed {
    pub name: String,
    pub layer: Stepped,
}

impl TimeDistributed {
    pub fn new(name: impl Into<String>, layer: impl Into<Stepped>) -> TimeDistributed {
        TimeDistributed {
            name: name.into(),
            layer: layer.into(),
        }
    }
}

impl Layer for TimeDistributed {
    fn class(&self) -> &'static str {
        "TimeDistributed"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        let mut args = Args::default();
        args.insert("layer", as_arg(&*self.layer)?);
        Some(args)
    }

    /// The wrapped layer's (integer ids for an Embedding at every step).
    fn input_dtype(&self) -> crate::ir::DType {
        self.layer.input_dtype()
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let dims = cx.g.try_ty("time_distributed", x)?.dims().to_vec();
        // The input's rank and the layer's shape at every step, by the catalogue's rules.
        let out = self.output_shape(dims.get(1..).unwrap_or(&[]))?;
        let (batch, steps) = (dims[0], dims[1]);
        let folded = batch.checked_mul(steps).ok_or_else(|| {
            bad_config(self, format!("batch {batch} times {steps} steps overflows"))
        })?;
        let mut inner = vec![folded];
        inner.extend_from_slice(&dims[2..]);
        let xs = cx.g.reshape(x, inner)?;
        let ys = self.layer.forward(cx, xs, params)?;
        let mut unfolded = vec![batch];
        unfolded.extend(out);
        cx.g.reshape(ys, unfolded)
    }

    fn onnx(&self, cx: &mut OnnxForward<'_>, _: OnnxValue, _: &[OnnxValue]) -> Result<OnnxValue> {
        Err(no_onnx(
            cx,
            "TimeDistributed is not exportable to ONNX yet (its layer folded over the steps \
             is not mapped)",
        ))
    }
}
