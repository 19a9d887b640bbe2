//! Losses, as Keras defines them, emitted as IR. Each gives a per-sample loss; the train
//! step weights it and divides by the batch size (Keras' `sum_over_batch_size`).

use crate::ir::{BinaryOp, Comparison, DType, Graph, ReduceOp, TensorType, UnaryOp, Value};
use crate::nn::{log_softmax, Activation};
use crate::{Error, Result};
use std::fmt;

/// Keras' fuzz factor for clipping probabilities.
pub const EPSILON: f64 = 1e-7;

/// A loss function.
pub trait Loss: Send + Sync + fmt::Debug {
    /// The Keras name, e.g. `sparse_categorical_crossentropy`.
    fn name(&self) -> &'static str;
    /// The element type targets must have (`i32` for sparse losses).
    fn target_dtype(&self) -> DType {
        DType::F32
    }
    /// Checks target and prediction types (without or with the batch dimension alike).
    fn check(&self, target: &TensorType, pred: &TensorType) -> Result<()> {
        if target.shape != pred.shape {
            return Err(mismatch(
                self.name(),
                target,
                pred,
                "the same shape as the predictions",
            ));
        }
        Ok(())
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
}

fn mismatch(loss: &str, t: &TensorType, p: &TensorType, want: &str) -> Error {
    Error::invalid(
        loss,
        format!("targets {t} do not fit predictions {p}: expected {want}"),
    )
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

/// `clip(p, ε, 1 - ε)`.
fn clip_probs(g: &mut Graph, p: Value) -> Result<Value> {
    let lo = g.full_like(EPSILON, p)?;
    let hi = g.full_like(1.0 - EPSILON, p)?;
    let m = g.max(p, lo)?;
    g.min(m, hi)
}

/// `log` of probabilities renormalised over the last axis and clipped (Keras' form).
fn log_probs(g: &mut Graph, pred: Value) -> Result<Value> {
    let t = g.ty(pred).clone();
    let last = t.rank() - 1;
    let s = g.sum(pred, &[last])?;
    let keep: Vec<usize> = (0..last).collect();
    let s = g.broadcast_in_dim(s, t.shape.clone(), &keep)?;
    let p = g.div(pred, s)?;
    let p = clip_probs(g, p)?;
    g.log(p)
}

/// Integer labels against class probabilities (or logits with `from_logits`).
#[derive(Clone, Debug, Default)]
pub struct SparseCategoricalCrossentropy {
    pub from_logits: bool,
}

impl Loss for SparseCategoricalCrossentropy {
    fn name(&self) -> &'static str {
        "sparse_categorical_crossentropy"
    }
    fn target_dtype(&self) -> DType {
        DType::I32
    }
    fn check(&self, t: &TensorType, p: &TensorType) -> Result<()> {
        let lead = &p.dims()[..p.rank().saturating_sub(1)];
        let ok = p.rank() >= 1
            && t.dtype.is_int()
            && (t.dims() == lead || (t.dims().split_last() == Some((&1, lead))));
        if !ok {
            return Err(mismatch(
                self.name(),
                t,
                p,
                &format!("integer labels of shape {:?} (or with a trailing 1)", lead),
            ));
        }
        Ok(())
    }
    fn check_values(&self, target: &crate::Tensor, pred_dims: &[usize]) -> Result<()> {
        let classes = *pred_dims.last().unwrap_or(&0) as i64;
        check_label_range(self.name(), target, classes)
    }
    fn per_sample(
        &self,
        g: &mut Graph,
        target: Value,
        pred: Value,
        logits: Option<Value>,
    ) -> Result<Value> {
        let pt = g.ty(pred).clone();
        let lead: Vec<usize> = pt.dims()[..pt.rank() - 1].to_vec();
        let labels = g.reshape(target, lead.clone())?;
        let logp = match (self.from_logits, logits) {
            (true, _) => log_softmax(g, pred)?,
            (false, Some(l)) => log_softmax(g, l)?,
            (false, None) => log_probs(g, pred)?,
        };
        // -log p[label], picked with a batched gather over every leading axis.
        let picked = g.gather(logp, labels, lead.len(), lead.len())?;
        let nll = g.neg(picked)?;
        mean_to_batch(g, nll)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
    fn unexpected_output_activation(&self) -> Option<Activation> {
        self.from_logits.then_some(Activation::Softmax)
    }
}

/// Labels must lie in `[0, classes)`; anything else is a typed error naming the first bad
/// label and where it is.
pub(crate) fn check_label_range(loss: &str, target: &crate::Tensor, classes: i64) -> Result<()> {
    let bad = match target {
        crate::Tensor::I32(a) => a
            .iter()
            .enumerate()
            .find(|(_, &v)| (v as i64) < 0 || v as i64 >= classes)
            .map(|(i, &v)| (i, v as i64)),
        crate::Tensor::I64(a) => a
            .iter()
            .enumerate()
            .find(|(_, &v)| v < 0 || v >= classes)
            .map(|(i, &v)| (i, v)),
        t => {
            return Err(Error::DType {
                what: format!("{loss} targets"),
                expected: DType::I32,
                got: t.dtype(),
            })
        }
    };
    match bad {
        Some((i, v)) => Err(Error::invalid(
            loss,
            format!("label {v} at position {i} is out of range: the model predicts {classes} classes, so labels must be in [0, {classes})"),
        )),
        None => Ok(()),
    }
}

/// One-hot (or probability) targets against class probabilities or logits.
#[derive(Clone, Debug, Default)]
pub struct CategoricalCrossentropy {
    pub from_logits: bool,
    pub label_smoothing: f32,
}

impl Loss for CategoricalCrossentropy {
    fn name(&self) -> &'static str {
        "categorical_crossentropy"
    }
    fn per_sample(
        &self,
        g: &mut Graph,
        target: Value,
        pred: Value,
        logits: Option<Value>,
    ) -> Result<Value> {
        let classes = *g.ty(pred).dims().last().unwrap_or(&1) as f64;
        let mut y = target;
        if self.label_smoothing > 0.0 {
            let ls = self.label_smoothing as f64;
            let a = g.mul_scalar(y, 1.0 - ls)?;
            y = g.add_scalar(a, ls / classes)?;
        }
        let logp = match (self.from_logits, logits) {
            (true, _) => log_softmax(g, pred)?,
            (false, Some(l)) => log_softmax(g, l)?,
            (false, None) => log_probs(g, pred)?,
        };
        let yl = g.mul(y, logp)?;
        let last = g.ty(yl).rank() - 1;
        let s = g.sum(yl, &[last])?;
        let nll = g.neg(s)?;
        mean_to_batch(g, nll)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
    fn unexpected_output_activation(&self) -> Option<Activation> {
        self.from_logits.then_some(Activation::Softmax)
    }
}

/// Targets in `[0, 1]` against probabilities (or logits), averaged over the last axis.
#[derive(Clone, Debug, Default)]
pub struct BinaryCrossentropy {
    pub from_logits: bool,
}

impl Loss for BinaryCrossentropy {
    fn name(&self) -> &'static str {
        "binary_crossentropy"
    }
    fn per_sample(
        &self,
        g: &mut Graph,
        z: Value,
        pred: Value,
        _logits: Option<Value>,
    ) -> Result<Value> {
        let e = if self.from_logits {
            // max(x, 0) - x·z + log(1 + e^-|x|): no overflow for any x.
            let x = pred;
            let zero = g.zeros_like(x)?;
            let m = g.max(x, zero)?;
            let xz = g.mul(x, z)?;
            let a = g.sub(m, xz)?;
            let ax = g.abs(x)?;
            let nax = g.neg(ax)?;
            let ex = g.exp(nax)?;
            let l = g.unary(UnaryOp::Log1p, ex)?;
            g.add(a, l)?
        } else {
            let p = clip_probs(g, pred)?;
            let lp = g.log(p)?;
            let one = g.full_like(1.0, p)?;
            let q = g.sub(one, p)?;
            let lq = g.log(q)?;
            let nz = g.sub(one, z)?;
            let a = g.mul(z, lp)?;
            let b = g.mul(nz, lq)?;
            let s = g.add(a, b)?;
            g.neg(s)?
        };
        mean_last(g, e)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
    fn unexpected_output_activation(&self) -> Option<Activation> {
        self.from_logits.then_some(Activation::Sigmoid)
    }
}

/// Mean over the last axis, then over any others but the batch.
fn mean_last(g: &mut Graph, x: Value) -> Result<Value> {
    let r = g.ty(x).rank();
    let x = if r >= 2 { g.mean(x, &[r - 1])? } else { x };
    mean_to_batch(g, x)
}

macro_rules! elementwise_loss {
    ($(#[$doc:meta])* $name:ident, $kname:literal, |$g:ident, $d:ident, $y:ident, $p:ident| $body:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default)]
        pub struct $name;

        impl Loss for $name {
            fn name(&self) -> &'static str {
                $kname
            }
            fn per_sample(&self, $g: &mut Graph, $y: Value, $p: Value, _logits: Option<Value>) -> Result<Value> {
                let $d = $g.sub($y, $p)?;
                let e = $body;
                mean_last($g, e)
            }
            fn clone_box(&self) -> Box<dyn Loss> {
                Box::new(self.clone())
            }
        }
    };
}

elementwise_loss!(
    /// `mean((y - p)²)` over the last axis.
    MeanSquaredError, "mean_squared_error", |g, d, _y, _p| g.mul(d, d)?
);
elementwise_loss!(
    /// `mean(|y - p|)` over the last axis.
    MeanAbsoluteError, "mean_absolute_error", |g, d, _y, _p| g.abs(d)?
);

/// `½x²` for `|x| ≤ δ`, else `δ(|x| - ½δ)`, averaged over the last axis.
#[derive(Clone, Debug)]
pub struct Huber {
    pub delta: f32,
}

impl Default for Huber {
    fn default() -> Huber {
        Huber { delta: 1.0 }
    }
}

impl Loss for Huber {
    fn name(&self) -> &'static str {
        "huber"
    }
    fn per_sample(&self, g: &mut Graph, y: Value, p: Value, _l: Option<Value>) -> Result<Value> {
        let d = self.delta as f64;
        let e = g.sub(y, p)?;
        let a = g.abs(e)?;
        let dv = g.full_like(d, a)?;
        let small = g.compare(Comparison::Le, a, dv)?;
        let sq = g.mul(e, e)?;
        let quad = g.mul_scalar(sq, 0.5)?;
        let lin = g.add_scalar(a, -0.5 * d)?;
        let lin = g.mul_scalar(lin, d)?;
        let v = g.select(small, quad, lin)?;
        mean_last(g, v)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
}

/// `Σ y·log(y/p)` over the last axis, both clipped to `[ε, 1]`.
#[derive(Clone, Debug, Default)]
pub struct KLDivergence;

impl Loss for KLDivergence {
    fn name(&self) -> &'static str {
        "kl_divergence"
    }
    fn per_sample(&self, g: &mut Graph, y: Value, p: Value, _l: Option<Value>) -> Result<Value> {
        let clip = |g: &mut Graph, v: Value| -> Result<Value> {
            let lo = g.full_like(EPSILON, v)?;
            let hi = g.full_like(1.0, v)?;
            let m = g.max(v, lo)?;
            g.min(m, hi)
        };
        let yc = clip(g, y)?;
        let pc = clip(g, p)?;
        let r = g.div(yc, pc)?;
        let l = g.log(r)?;
        let t = g.mul(yc, l)?;
        let last = g.ty(t).rank() - 1;
        let s = g.sum(t, &[last])?;
        mean_to_batch(g, s)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
}

/// `mean(max(1 - y·p, 0))` over the last axis; targets of 0/1 are mapped to -1/1 first
/// (as Keras does when every target is 0 or 1).
#[derive(Clone, Debug, Default)]
pub struct Hinge;

impl Loss for Hinge {
    fn name(&self) -> &'static str {
        "hinge"
    }
    fn per_sample(&self, g: &mut Graph, y: Value, p: Value, _l: Option<Value>) -> Result<Value> {
        let zero = g.zeros_like(y)?;
        let one = g.full_like(1.0, y)?;
        let is0 = g.compare(Comparison::Eq, y, zero)?;
        let is1 = g.compare(Comparison::Eq, y, one)?;
        let bin = g.binary(BinaryOp::Or, is0, is1)?;
        let binf = g.convert(bin, DType::F32)?;
        let all = g.reduce(
            ReduceOp::Min,
            binf,
            &(0..g.ty(binf).rank()).collect::<Vec<_>>(),
        )?;
        let half = g.scalar(0.5, DType::F32);
        let all_binary = g.compare(Comparison::Gt, all, half)?;
        let two_y = g.mul_scalar(y, 2.0)?;
        let mapped = g.add_scalar(two_y, -1.0)?;
        let y = g.select(all_binary, mapped, y)?;
        let yp = g.mul(y, p)?;
        let m = g.sub(one, yp)?;
        let h = g.max(m, zero)?;
        mean_last(g, h)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
}
