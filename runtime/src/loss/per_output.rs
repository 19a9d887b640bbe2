//! Losses of a model with several outputs (Keras' `loss={"match": ..., "kind": ...}` and
//! `loss_weights`): one loss per output, or one for all; the total is the weighted sum of
//! each output's mean loss, as Keras sums them.
//!
//! The step graphs carry such a model's predictions, and its targets, as packed rows
//! (each sample's elements of every output side by side, f32; see `ir::side_by_side`):
//! a [`Head`] says where one output's prediction and target sit in them.

use super::Loss;
use crate::ir::side_by_side::{columns, host_columns};
use crate::ir::{DType, Graph, TensorType, Value};
use crate::{Error, Result, Tensor};

/// One loss per output, by the outputs' names (the names of the layers producing them),
/// and optionally a weight for each (Keras' `loss_weights`; 1 when not given).
#[derive(Debug, Default)]
pub struct PerOutput {
    losses: Vec<(String, Box<dyn Loss>)>,
    weights: Vec<(String, f64)>,
}

impl Clone for PerOutput {
    fn clone(&self) -> PerOutput {
        PerOutput {
            losses: self
                .losses
                .iter()
                .map(|(n, l)| (n.clone(), l.clone_box()))
                .collect(),
            weights: self.weights.clone(),
        }
    }
}

impl PerOutput {
    pub fn new() -> PerOutput {
        PerOutput::default()
    }

    /// The loss of the output named `output`.
    pub fn loss(mut self, output: &str, loss: impl Loss + 'static) -> PerOutput {
        self.losses.push((output.to_string(), Box::new(loss)));
        self
    }

    /// The weight of `output`'s loss in the total (Keras' `loss_weights`).
    pub fn weight(mut self, output: &str, weight: f64) -> PerOutput {
        self.weights.push((output.to_string(), weight));
        self
    }
}

/// Where one output's prediction and target sit in the packed rows of a step graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Head {
    /// The output's name (its layer's).
    pub name: String,
    /// Its prediction's dims, without the batch.
    pub pred: Vec<usize>,
    pub pred_offset: usize,
    /// Its target's dims, without the batch: the prediction's, or without the last axis
    /// for a loss taking class labels.
    pub target: Vec<usize>,
    pub target_offset: usize,
    /// The element type the target's loss takes (f32 in the packed rows).
    pub target_dtype: DType,
}

impl Head {
    /// This output's prediction out of packed predictions `p` (`[batch, Σ]`).
    pub fn prediction(&self, g: &mut Graph, p: Value) -> Result<Value> {
        columns(g, p, self.pred_offset, &self.pred, DType::F32)
    }

    /// This output's target out of packed targets `y` (`[batch, Σ]`), in its loss's type.
    pub fn target_of(&self, g: &mut Graph, y: Value) -> Result<Value> {
        columns(g, y, self.target_offset, &self.target, self.target_dtype)
    }

    /// This output's targets out of packed host targets (`[n, Σ]` f32).
    pub fn host_target(&self, y: &Tensor) -> Result<Tensor> {
        let cols = host_columns("targets", y, self.target_offset, &self.target)?;
        // Packing checked integers were exact in f32.
        Ok(match self.target_dtype {
            DType::I32 => Tensor::I32(cols.mapv(|v| v as i32)),
            _ => Tensor::F32(cols),
        })
    }

    /// This output's prediction dims with the batch `n`.
    pub fn pred_dims(&self, n: usize) -> Vec<usize> {
        std::iter::once(n)
            .chain(self.pred.iter().copied())
            .collect()
    }
}

/// The losses of a model's outputs, laid out: what a compiled model with several outputs
/// trains with.
#[derive(Debug)]
#[doc(hidden)]
pub struct Heads {
    pub parts: Vec<(Head, Box<dyn Loss>, f64)>,
}

impl Clone for Heads {
    fn clone(&self) -> Heads {
        Heads {
            parts: self
                .parts
                .iter()
                .map(|(h, l, w)| (h.clone(), l.clone_box(), *w))
                .collect(),
        }
    }
}

impl Heads {
    /// Lays out `outputs` (name, prediction dims) with `loss`: a [`PerOutput`] names each
    /// output's loss; any other loss is every output's, weighted 1.
    pub(crate) fn new(loss: &dyn Loss, outputs: &[(String, Vec<usize>)]) -> Result<Heads> {
        let names: Vec<&str> = outputs.iter().map(|(n, _)| n.as_str()).collect();
        let per: Vec<(Box<dyn Loss>, f64)> = match loss.per_output() {
            Some(p) => {
                let given = p.losses.iter().map(|(n, _)| n);
                for n in given.chain(p.weights.iter().map(|(n, _)| n)) {
                    if !names.contains(&n.as_str()) {
                        return Err(unknown_output("compile", n, &names));
                    }
                }
                outputs
                    .iter()
                    .map(|(name, _)| {
                        let mut found = p.losses.iter().filter(|(n, _)| n == name);
                        let l = found.next().ok_or_else(|| {
                            Error::invalid(
                                "compile",
                                format!(
                                    "no loss for the output `{name}`: give one per output ({})",
                                    names.join(", ")
                                ),
                            )
                        })?;
                        if found.next().is_some() {
                            return Err(Error::invalid(
                                "compile",
                                format!("two losses for the output `{name}`"),
                            ));
                        }
                        let w = p
                            .weights
                            .iter()
                            .rev()
                            .find(|(n, _)| n == name)
                            .map_or(1.0, |(_, w)| *w);
                        if !w.is_finite() || w < 0.0 {
                            return Err(Error::invalid(
                                "compile",
                                format!(
                                    "the loss weight of `{name}` must be finite and >= 0, got {w}"
                                ),
                            ));
                        }
                        l.1.validate()?;
                        Ok((l.1.clone_box(), w))
                    })
                    .collect::<Result<_>>()?
            }
            None => outputs.iter().map(|_| (loss.clone_box(), 1.0)).collect(),
        };
        let (mut po, mut to) = (0, 0);
        let parts = outputs
            .iter()
            .zip(per)
            .map(|((name, pred), (loss, w))| {
                let target_dtype = loss.target_dtype();
                let target = if target_dtype == DType::F32 {
                    pred.clone()
                } else {
                    pred[..pred.len().saturating_sub(1)].to_vec()
                };
                let head = Head {
                    name: name.clone(),
                    pred: pred.clone(),
                    pred_offset: po,
                    target: target.clone(),
                    target_offset: to,
                    target_dtype,
                };
                po += pred.iter().product::<usize>();
                to += target.iter().product::<usize>();
                (head, loss, w)
            })
            .collect();
        Ok(Heads { parts })
    }

    /// Each output's target dims, in order (how targets passed to `fit` are packed).
    pub(crate) fn target_dims(&self) -> Vec<Vec<usize>> {
        self.parts
            .iter()
            .map(|(h, _, _)| h.target.clone())
            .collect()
    }
}

pub(crate) fn unknown_output(what: &str, name: &str, names: &[&str]) -> Error {
    Error::invalid(
        what,
        format!(
            "the model has no output `{name}`; its outputs: {}",
            names.join(", ")
        ),
    )
}

impl Loss for PerOutput {
    fn name(&self) -> &'static str {
        "per_output"
    }

    fn validate(&self) -> Result<()> {
        if self.losses.is_empty() {
            return Err(Error::invalid(
                "PerOutput",
                "no losses: give one per output with .loss(name, loss)",
            ));
        }
        self.losses.iter().try_for_each(|(_, l)| l.validate())
    }

    /// Only a model with several outputs takes one loss per output.
    fn check(&self, _target: &TensorType, _pred: &TensorType) -> Result<()> {
        Err(Error::invalid(
            "PerOutput",
            "the model has one output: compile it with that output's loss",
        ))
    }

    fn per_sample(
        &self,
        _g: &mut Graph,
        target: Value,
        pred: Value,
        _logits: Option<Value>,
    ) -> Result<Value> {
        let _ = (target, pred);
        Err(Error::invalid(
            "PerOutput",
            "the model has one output: compile it with that output's loss",
        ))
    }

    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }

    fn per_output(&self) -> Option<&PerOutput> {
        Some(self)
    }
}

impl Loss for Heads {
    fn name(&self) -> &'static str {
        "loss"
    }

    fn check(&self, target: &TensorType, pred: &TensorType) -> Result<()> {
        let width = |dims: &[usize]| dims.last().copied().unwrap_or(0);
        let (tw, pw): (usize, usize) = self.parts.iter().fold((0, 0), |(t, p), (h, _, _)| {
            (
                t + h.target.iter().product::<usize>(),
                p + h.pred.iter().product::<usize>(),
            )
        });
        if width(target.dims()) != tw || width(pred.dims()) != pw {
            return Err(Error::invalid(
                "loss",
                format!(
                    "internal: packed targets {target} and predictions {pred}, expected {tw} \
                     and {pw} elements per sample"
                ),
            ));
        }
        Ok(())
    }

    fn check_values(&self, target: &Tensor, pred_dims: &[usize]) -> Result<()> {
        let n = pred_dims.first().copied().unwrap_or(0);
        for (h, loss, _) in &self.parts {
            loss.check_values(&h.host_target(target)?, &h.pred_dims(n))
                .map_err(|e| in_output(e, &h.name))?;
        }
        Ok(())
    }

    fn per_sample(
        &self,
        g: &mut Graph,
        target: Value,
        pred: Value,
        _logits: Option<Value>,
    ) -> Result<Value> {
        let mut total: Option<Value> = None;
        for (h, loss, w) in &self.parts {
            let y = h.target_of(g, target)?;
            let p = h.prediction(g, pred)?;
            let l = loss.per_sample(g, y, p, None)?;
            let l = if *w == 1.0 { l } else { g.mul_scalar(l, *w)? };
            total = Some(match total {
                Some(t) => g.add(t, l)?,
                None => l,
            });
        }
        total.ok_or_else(|| Error::invalid("loss", "a model with no outputs"))
    }

    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }

    fn as_heads(&self) -> Option<&Heads> {
        Some(self)
    }
}

/// `e`, said of the output `name`.
pub(crate) fn in_output(e: Error, name: &str) -> Error {
    match e {
        Error::InvalidArgument { what, message } => Error::InvalidArgument {
            what: format!("{what} (output `{name}`)"),
            message,
        },
        other => other,
    }
}
