//! The cross-entropies: sparse (integer labels), categorical (one-hot or probability
//! targets) and binary.

use super::{
    binary_crossentropy_of_probs, check_unit_arg, last_axis, mean_last, mean_to_batch, mismatch,
    renormalised_probs, same_shape, smooth_labels, Loss,
};
use crate::ir::{DType, Graph, TensorType, UnaryOp, Value};
use crate::nn::{log_softmax, Activation};
use crate::{Error, Result};

/// `log` of probabilities: from the logits when known, else renormalised and clipped.
fn log_probs(
    g: &mut Graph,
    loss: &str,
    pred: Value,
    from_logits: bool,
    logits: Option<Value>,
) -> Result<Value> {
    let last = last_axis(g, loss, pred)?;
    match (from_logits, logits) {
        (true, _) => log_softmax(g, pred),
        (false, Some(l)) => log_softmax(g, l),
        (false, None) => {
            let p = renormalised_probs(g, pred, last)?;
            g.log(p)
        }
    }
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
        self.check(&g.ty(target).clone(), &g.ty(pred).clone())?;
        let last = last_axis(g, self.name(), pred)?;
        let lead: Vec<usize> = g.ty(pred).dims()[..last].to_vec();
        let labels = g.reshape(target, lead.clone())?;
        let logp = log_probs(g, self.name(), pred, self.from_logits, logits)?;
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
/// `label_smoothing` in `[0, 1]` moves targets towards `1 / classes`.
#[derive(Clone, Debug, Default)]
pub struct CategoricalCrossentropy {
    pub from_logits: bool,
    pub label_smoothing: f32,
}

impl Loss for CategoricalCrossentropy {
    fn name(&self) -> &'static str {
        "categorical_crossentropy"
    }
    fn validate(&self) -> Result<()> {
        check_unit_arg(self.name(), "label_smoothing", self.label_smoothing)
    }
    fn check(&self, t: &TensorType, p: &TensorType) -> Result<()> {
        self.validate()?;
        same_shape(self.name(), t, p)?;
        super::resolve_axis(self.name(), -1, p.rank()).map(|_| ())
    }
    fn per_sample(
        &self,
        g: &mut Graph,
        target: Value,
        pred: Value,
        logits: Option<Value>,
    ) -> Result<Value> {
        self.check(&g.ty(target).clone(), &g.ty(pred).clone())?;
        let last = last_axis(g, self.name(), pred)?;
        let classes = g.ty(pred).dims()[last] as f64;
        let y = smooth_labels(g, target, self.label_smoothing, 1.0 / classes)?;
        let logp = log_probs(g, self.name(), pred, self.from_logits, logits)?;
        let yl = g.mul(y, logp)?;
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
/// `label_smoothing` in `[0, 1]` moves targets towards ½.
///
/// Build it with the fields you need and `..Default::default()`:
/// `BinaryCrossentropy { from_logits: true, ..Default::default() }`.
#[derive(Clone, Debug, Default)]
pub struct BinaryCrossentropy {
    pub from_logits: bool,
    pub label_smoothing: f32,
}

impl Loss for BinaryCrossentropy {
    fn name(&self) -> &'static str {
        "binary_crossentropy"
    }
    fn validate(&self) -> Result<()> {
        check_unit_arg(self.name(), "label_smoothing", self.label_smoothing)
    }
    fn check(&self, t: &TensorType, p: &TensorType) -> Result<()> {
        self.validate()?;
        same_shape(self.name(), t, p)
    }
    fn per_sample(
        &self,
        g: &mut Graph,
        z: Value,
        pred: Value,
        _logits: Option<Value>,
    ) -> Result<Value> {
        self.check(&g.ty(z).clone(), &g.ty(pred).clone())?;
        let z = smooth_labels(g, z, self.label_smoothing, 0.5)?;
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
            binary_crossentropy_of_probs(g, z, pred)?
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
