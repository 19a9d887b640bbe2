//! Metrics over confusion counts at thresholds: precision, recall, AUC.

use super::{ratio, Metric};
use crate::ir::{Comparison, DType, Graph, Value};
use crate::loss::Loss;
use crate::{Error, Result};

/// Weighted true/false positive/negative counts of `pred > threshold` against 0/1
/// targets, per threshold: state `[tp, fp, tn, fn]`, each `[thresholds]`.
pub(super) fn confusion(
    g: &mut Graph,
    state: &[Value],
    y: Value,
    p: Value,
    sw: Value,
    thresholds: &[f32],
) -> Result<Vec<Value>> {
    let n = thresholds.len();
    let pt = g.ty(p).clone();
    let numel = pt.numel();
    let batch = pt.dims().first().copied().unwrap_or(1);
    // Flatten to [elements] with each element weighted by its sample's weight.
    let pf = g.reshape(p, [numel])?;
    let yf = g.reshape(y, [numel])?;
    let per = numel / batch.max(1);
    let w = g.broadcast_in_dim(sw, [batch, per], &[0])?;
    let w = g.reshape(w, [numel])?;
    let th = g.constant(crate::Tensor::from_vec(&[n], thresholds.to_vec())?);
    let pb = g.broadcast_in_dim(pf, [n, numel], &[1])?;
    let tb = g.broadcast_in_dim(th, [n, numel], &[0])?;
    let above = g.compare(Comparison::Gt, pb, tb)?;
    let above = g.convert(above, DType::F32)?;
    let yb = g.broadcast_in_dim(yf, [n, numel], &[1])?;
    let wb = g.broadcast_in_dim(w, [n, numel], &[1])?;
    let one = g.full_like(1.0, above)?;
    let below = g.sub(one, above)?;
    let neg = g.sub(one, yb)?;
    let count = |g: &mut Graph, a: Value, b: Value| -> Result<Value> {
        let m = g.mul(a, b)?;
        let m = g.mul(m, wb)?;
        g.sum(m, &[1])
    };
    let tp = count(g, above, yb)?;
    let fp = count(g, above, neg)?;
    let tn = count(g, below, neg)?;
    let fn_ = count(g, below, yb)?;
    Ok(vec![
        g.add(state[0], tp)?,
        g.add(state[1], fp)?,
        g.add(state[2], tn)?,
        g.add(state[3], fn_)?,
    ])
}

pub(super) fn check_threshold(what: &str, t: f32) -> Result<()> {
    if !(0.0..=1.0).contains(&t) {
        return Err(Error::invalid(
            what,
            format!("threshold must be in [0, 1], got {t}"),
        ));
    }
    Ok(())
}

/// `tp / (tp + fp)` of `pred > threshold` (default 0.5) against 0/1 targets.
#[derive(Clone, Debug)]
pub struct Precision {
    pub threshold: f32,
}

impl Default for Precision {
    fn default() -> Self {
        Precision { threshold: 0.5 }
    }
}

/// `tp / (tp + fn)` of `pred > threshold` (default 0.5) against 0/1 targets.
#[derive(Clone, Debug)]
pub struct Recall {
    pub threshold: f32,
}

impl Default for Recall {
    fn default() -> Self {
        Recall { threshold: 0.5 }
    }
}

macro_rules! pr_metric {
    ($ty:ident, $name:literal, |$g:ident, $s:ident| $res:expr) => {
        impl Metric for $ty {
            fn name(&self) -> String {
                $name.into()
            }
            fn state(&self) -> Vec<Vec<usize>> {
                vec![vec![1]; 4]
            }
            fn update(
                &self,
                g: &mut Graph,
                state: &[Value],
                y: Value,
                p: Value,
                sw: Value,
            ) -> Result<Vec<Value>> {
                check_threshold($name, self.threshold)?;
                confusion(g, state, y, p, sw, &[self.threshold])
            }
            fn result(&self, $g: &mut Graph, $s: &[Value]) -> Result<Value> {
                let r = $res;
                $g.reshape(r, [])
            }
            fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric> {
                self
            }
            fn clone_box(&self) -> Box<dyn Metric> {
                Box::new(self.clone())
            }
        }
    };
}

pr_metric!(Precision, "precision", |g, s| {
    let d = g.add(s[0], s[1])?;
    ratio(g, s[0], d)?
});
pr_metric!(Recall, "recall", |g, s| {
    let d = g.add(s[0], s[3])?;
    ratio(g, s[0], d)?
});

/// Area under the ROC curve, approximated over `num_thresholds` evenly spaced thresholds
/// with trapezoids (Keras' default `AUC()`).
#[derive(Clone, Debug)]
pub struct AUC {
    pub num_thresholds: usize,
}

impl Default for AUC {
    fn default() -> Self {
        AUC {
            num_thresholds: 200,
        }
    }
}

impl AUC {
    /// Keras' thresholds: `0 - ε`, the interior points `i / (n - 1)`, and `1 + ε`, so
    /// predictions of exactly 0 or 1 still fall on the right side.
    fn thresholds(&self) -> Vec<f32> {
        let n = self.num_thresholds;
        let eps = 1e-7f32;
        (0..n)
            .map(|i| match i {
                0 => -eps,
                i if i == n - 1 => 1.0 + eps,
                i => i as f32 / (n - 1) as f32,
            })
            .collect()
    }
}

impl Metric for AUC {
    fn name(&self) -> String {
        "auc".into()
    }
    fn state(&self) -> Vec<Vec<usize>> {
        vec![vec![self.num_thresholds]; 4]
    }
    fn update(
        &self,
        g: &mut Graph,
        state: &[Value],
        y: Value,
        p: Value,
        sw: Value,
    ) -> Result<Vec<Value>> {
        if self.num_thresholds < 2 {
            return Err(Error::invalid(
                "auc",
                format!("num_thresholds must be > 1, got {}", self.num_thresholds),
            ));
        }
        confusion(g, state, y, p, sw, &self.thresholds())
    }
    fn result(&self, g: &mut Graph, s: &[Value]) -> Result<Value> {
        // TPR and FPR per threshold, then Σ (fpr[i] - fpr[i+1]) · (tpr[i] + tpr[i+1]) / 2.
        let n = self.num_thresholds;
        let rate = |g: &mut Graph, a: Value, b: Value| -> Result<Value> {
            let d = g.add(a, b)?;
            ratio(g, a, d)
        };
        let tpr = rate(g, s[0], s[3])?;
        let fpr = rate(g, s[1], s[2])?;
        let head = |g: &mut Graph, v: Value| g.slice(v, &[0], &[n - 1], &[1]);
        let tail = |g: &mut Graph, v: Value| g.slice(v, &[1], &[n], &[1]);
        let f0 = head(g, fpr)?;
        let f1 = tail(g, fpr)?;
        let t0 = head(g, tpr)?;
        let t1 = tail(g, tpr)?;
        let dx = g.sub(f0, f1)?;
        let h = g.add(t0, t1)?;
        let a = g.mul(dx, h)?;
        let a = g.sum_all(a)?;
        g.mul_scalar(a, 0.5)
    }
    fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric> {
        self
    }
    fn clone_box(&self) -> Box<dyn Metric> {
        Box::new(self.clone())
    }
}
