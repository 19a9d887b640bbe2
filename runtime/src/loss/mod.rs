//! Losses, as Keras defines them, emitted as IR. Each gives a per-sample loss; the train
//! step weights it and divides by the batch size (Keras' `sum_over_batch_size`).
//!
//! One file per family: cross-entropies, focal cross-entropies, regression errors,
//! hinge margins, probabilistic (KL divergence, Poisson) and overlap (Dice, Tversky).
//! The trait and the helpers they share (clipping, reductions, argument and axis checks)
//! are here.

mod crossentropy;
mod focal;
mod hinge;
mod overlap;
mod per_output;
mod probabilistic;
mod regression;

pub use crossentropy::{
    BinaryCrossentropy, CategoricalCrossentropy, SparseCategoricalCrossentropy,
};
pub use focal::{BinaryFocalCrossentropy, CategoricalFocalCrossentropy};
pub use hinge::{CategoricalHinge, Hinge, SquaredHinge};
pub use overlap::{Dice, Tversky};
pub use per_output::Heads;
pub(crate) use per_output::{in_output, unknown_output};
pub use per_output::{Head, PerOutput};
pub use probabilistic::{KLDivergence, Poisson};
pub use regression::{
    CosineSimilarity, Huber, LogCosh, MeanAbsoluteError, MeanAbsolutePercentageError,
    MeanSquaredError, MeanSquaredLogarithmicError,
};

use crate::ir::{Graph, TensorType, Value};
use crate::nn::Activation;
use crate::{Error, Result};
use std::fmt;

/// Keras' fuzz factor for clipping probabilities.
pub const EPSILON: f64 = 1e-7;

/// A loss function.
pub trait Loss: Send + Sync + fmt::Debug {
    /// The Keras name, e.g. `sparse_categorical_crossentropy`.
    fn name(&self) -> &'static str;
    /// The element type targets must have (`i32` for sparse losses).
    fn target_dtype(&self) -> crate::ir::DType {
        crate::ir::DType::F32
    }
    /// Checks the loss's arguments alone (`compile` calls it): a typed error naming the
    /// loss for a value Keras rejects or the math cannot use.
    fn validate(&self) -> Result<()> {
        Ok(())
    }
    /// Checks the loss's arguments and the target and prediction types (without or with
    /// the batch dimension alike), axes included.
    fn check(&self, target: &TensorType, pred: &TensorType) -> Result<()> {
        self.validate()?;
        same_shape(self.name(), target, pred)
    }
    /// Checks target values on the host before training (labels in range, …).
    fn check_values(&self, _target: &crate::Tensor, _pred_dims: &[usize]) -> Result<()> {
        Ok(())
    }
    /// Emits the per-sample loss `[batch]`. `logits` is given when `pred` is known to be
    /// the softmax of it (a model ending in softmax), for a stable and cheaper form.
    fn per_sample(
        &self,
        g: &mut Graph,
        target: Value,
        pred: Value,
        logits: Option<Value>,
    ) -> Result<Value>;
    fn clone_box(&self) -> Box<dyn Loss>;
    /// The output activation this loss, as configured, does not expect: with `from_logits`
    /// it takes logits, and a softmax (for the binary loss a sigmoid) makes probabilities
    /// of them, which the loss would squash again. `None` when any output fits.
    fn unexpected_output_activation(&self) -> Option<Activation> {
        None
    }
    /// The per-output losses this is, when it is a [`PerOutput`] (a model with several
    /// outputs lays them out; see `Heads`).
    #[doc(hidden)]
    fn per_output(&self) -> Option<&PerOutput> {
        None
    }
    /// The laid-out losses of a compiled model's outputs, when this is them.
    #[doc(hidden)]
    fn as_heads(&self) -> Option<&Heads> {
        None
    }
}

fn mismatch(loss: &str, t: &TensorType, p: &TensorType, want: &str) -> Error {
    Error::invalid(
        loss,
        format!("targets {t} do not fit predictions {p}: expected {want}"),
    )
}

/// The default target check: the same shape as the predictions.
fn same_shape(loss: &str, target: &TensorType, pred: &TensorType) -> Result<()> {
    if target.shape != pred.shape {
        return Err(mismatch(
            loss,
            target,
            pred,
            "the same shape as the predictions",
        ));
    }
    Ok(())
}

/// A float argument that must lie in `[0, 1]` (`alpha`, `label_smoothing`, …).
fn check_unit_arg(loss: &str, arg: &str, v: f32) -> Result<()> {
    if !(0.0..=1.0).contains(&v) {
        return Err(Error::invalid(
            loss,
            format!("{arg} must be in [0, 1], got {v}"),
        ));
    }
    Ok(())
}

/// A float argument that must be finite and not negative (`gamma`, …).
fn check_non_negative_arg(loss: &str, arg: &str, v: f32) -> Result<()> {
    if !(v.is_finite() && v >= 0.0) {
        return Err(Error::invalid(
            loss,
            format!("{arg} must be a finite number >= 0, got {v}"),
        ));
    }
    Ok(())
}

/// Resolves a Keras axis (negative counts from the end) against a rank.
fn resolve_axis(loss: &str, axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if r == 0 {
        return Err(Error::invalid(
            loss,
            format!("axis {axis} is out of range for predictions of rank 0 (a scalar): expected predictions with at least one axis"),
        ));
    }
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        return Err(Error::invalid(
            loss,
            format!(
                "axis {axis} is out of range for predictions of rank {rank}: expected an axis in [{}, {r})",
                -r
            ),
        ));
    }
    Ok(a as usize)
}

/// The last axis of `v`, or a typed error naming the loss when `v` is a scalar.
fn last_axis(g: &Graph, loss: &str, v: Value) -> Result<usize> {
    resolve_axis(loss, -1, g.ty(v).rank())
}

/// Mean over every axis but the first: per-element losses to per-sample ones.
fn mean_to_batch(g: &mut Graph, x: Value) -> Result<Value> {
    let r = g.ty(x).rank();
    if r <= 1 {
        return Ok(x);
    }
    let axes: Vec<usize> = (1..r).collect();
    g.mean(x, &axes)
}

/// Mean over the last axis, then over any others but the batch.
fn mean_last(g: &mut Graph, x: Value) -> Result<Value> {
    let r = g.ty(x).rank();
    let x = if r >= 2 { g.mean(x, &[r - 1])? } else { x };
    mean_to_batch(g, x)
}

/// Sum over `axis` (kept as a size-1 axis re-broadcast to `x`'s shape), for normalising.
fn sum_keep(g: &mut Graph, x: Value, axis: usize) -> Result<Value> {
    let t = g.ty(x).clone();
    let s = g.sum(x, &[axis])?;
    let keep: Vec<usize> = (0..t.rank()).filter(|&i| i != axis).collect();
    g.broadcast_in_dim(s, t.shape.clone(), &keep)
}

/// Per-sample values `[batch]` from a loss reduced over `reduced` axes of a tensor whose
/// first axis is the batch. When the batch axis was among them the loss couples the
/// samples (Keras then gives one value for the batch, or one per remaining position):
/// its mean is every sample's value, which leaves the batch mean Keras reports unchanged.
/// `batch` is `None` for scalar predictions, which have no batch axis to spread over.
fn to_per_sample(
    g: &mut Graph,
    v: Value,
    batch_reduced: bool,
    batch: Option<usize>,
) -> Result<Value> {
    if !batch_reduced {
        return mean_to_batch(g, v);
    }
    let r = g.ty(v).rank();
    let m = if r == 0 {
        v
    } else {
        g.mean(v, &(0..r).collect::<Vec<_>>())?
    };
    match batch {
        Some(b) => g.broadcast_in_dim(m, vec![b], &[]),
        None => Ok(m),
    }
}

/// `clip(p, lo, hi)`.
fn clip(g: &mut Graph, p: Value, lo: f64, hi: f64) -> Result<Value> {
    let l = g.full_like(lo, p)?;
    let h = g.full_like(hi, p)?;
    let m = g.max(p, l)?;
    g.min(m, h)
}

/// `clip(p, ε, 1 - ε)`.
fn clip_probs(g: &mut Graph, p: Value) -> Result<Value> {
    clip(g, p, EPSILON, 1.0 - EPSILON)
}

/// `-(z·log p + (1 - z)·log(1 - p))` with `p` clipped to `[ε, 1 - ε]` (Keras' form).
fn binary_crossentropy_of_probs(g: &mut Graph, z: Value, p: Value) -> Result<Value> {
    let p = clip_probs(g, p)?;
    let lp = g.log(p)?;
    let one = g.full_like(1.0, p)?;
    let q = g.sub(one, p)?;
    let lq = g.log(q)?;
    let nz = g.sub(one, z)?;
    let a = g.mul(z, lp)?;
    let b = g.mul(nz, lq)?;
    let s = g.add(a, b)?;
    g.neg(s)
}

/// Probabilities renormalised over the last axis and clipped to `[ε, 1 - ε]` (Keras' form).
fn renormalised_probs(g: &mut Graph, pred: Value, last: usize) -> Result<Value> {
    let s = sum_keep(g, pred, last)?;
    let p = g.div(pred, s)?;
    clip_probs(g, p)
}

/// `y·(1 - s) + s·c` for label smoothing towards the constant `c`.
fn smooth_labels(g: &mut Graph, y: Value, smoothing: f32, toward: f64) -> Result<Value> {
    if smoothing <= 0.0 {
        return Ok(y);
    }
    let s = smoothing as f64;
    let a = g.mul_scalar(y, 1.0 - s)?;
    g.add_scalar(a, s * toward)
}

/// Float targets must lie in `[0, 1]`; anything else is a typed error naming the first bad
/// value and where it is.
fn check_unit_targets(loss: &str, target: &crate::Tensor) -> Result<()> {
    let bad = match target {
        crate::Tensor::F32(a) => a
            .iter()
            .enumerate()
            .find(|(_, v)| !(0.0..=1.0).contains(*v))
            .map(|(i, &v)| (i, v as f64)),
        crate::Tensor::F64(a) => a
            .iter()
            .enumerate()
            .find(|(_, v)| !(0.0..=1.0).contains(*v))
            .map(|(i, &v)| (i, v)),
        t => {
            return Err(Error::DType {
                what: format!("{loss} targets"),
                expected: crate::ir::DType::F32,
                got: t.dtype(),
            })
        }
    };
    match bad {
        Some((i, v)) => Err(Error::invalid(
            loss,
            format!("target {v} at position {i} is out of range: targets must be in [0, 1]"),
        )),
        None => Ok(()),
    }
}
