//! Metrics, streamed over batches as Keras does: each keeps f32 state tensors that the
//! train (or evaluation) step updates in the same graph, and a result computed from them.

use crate::ir::{Comparison, DType, Graph, ReduceOp, TensorType, Value};
use crate::loss::Loss;
use crate::{Error, Result};
use std::fmt;

/// A streaming metric.
pub trait Metric: Send + Sync + fmt::Debug {
    /// The name in logs and the history, e.g. `accuracy`.
    fn name(&self) -> String;
    /// Shapes of the f32 state tensors (all start at zero).
    fn state(&self) -> Vec<Vec<usize>>;
    /// Emits the new state after one batch; `sw` is the per-sample weight `[batch]`.
    fn update(
        &self,
        g: &mut Graph,
        state: &[Value],
        target: Value,
        pred: Value,
        sw: Value,
    ) -> Result<Vec<Value>>;
    /// Emits the metric's value (f32 scalar) from its state.
    fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value>;
    /// Replaces a generic metric with the one the loss implies (`accuracy` becomes
    /// sparse categorical accuracy next to a sparse loss, as Keras does).
    fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric>;
    fn clone_box(&self) -> Box<dyn Metric>;
}

/// `total / count` elementwise, 0 where nothing was counted.
pub(crate) fn ratio(g: &mut Graph, total: Value, count: Value) -> Result<Value> {
    let zero = g.zeros_like(count)?;
    let none = g.compare(Comparison::Eq, count, zero)?;
    let one = g.full_like(1.0, count)?;
    let safe = g.select(none, one, count)?;
    let r = g.div(total, safe)?;
    g.select(none, zero, r)
}

/// Reduces a per-element value `[batch, ...]` to per-sample `[batch]` (mean of the rest).
fn per_sample(g: &mut Graph, v: Value) -> Result<Value> {
    let r = g.ty(v).rank();
    if r <= 1 {
        return Ok(v);
    }
    g.mean(v, &(1..r).collect::<Vec<_>>())
}

/// The weighted-mean update shared by mean metrics: `total += Σ v·w`, `count += Σ w`.
fn mean_update(g: &mut Graph, state: &[Value], v: Value, sw: Value) -> Result<Vec<Value>> {
    let v = per_sample(g, v)?;
    let vw = g.mul(v, sw)?;
    let s = g.sum_all(vw)?;
    let c = g.sum_all(sw)?;
    Ok(vec![g.add(state[0], s)?, g.add(state[1], c)?])
}

/// The index of the largest element along the last axis (the first on ties), as f32.
pub(crate) fn argmax_last(g: &mut Graph, x: Value) -> Result<Value> {
    let t = g.ty(x).clone();
    let last = t.rank() - 1;
    let keep: Vec<usize> = (0..last).collect();
    let m = g.reduce(ReduceOp::Max, x, &[last])?;
    let mb = g.broadcast_in_dim(m, t.shape.clone(), &keep)?;
    let is_max = g.compare(Comparison::Eq, x, mb)?;
    let idx = g.iota(TensorType::new(DType::F32, t.shape.clone()), last)?;
    let big = g.full_like(t.dims()[last] as f64, idx)?;
    let cand = g.select(is_max, idx, big)?;
    g.reduce(ReduceOp::Min, cand, &[last])
}

macro_rules! mean_metric {
    ($(#[$doc:meta])* $ty:ident, $name:literal, |$g:ident, $y:ident, $p:ident| $value:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default)]
        pub struct $ty;

        impl Metric for $ty {
            fn name(&self) -> String {
                $name.into()
            }
            fn state(&self) -> Vec<Vec<usize>> {
                vec![vec![], vec![]]
            }
            fn update(&self, $g: &mut Graph, state: &[Value], $y: Value, $p: Value, sw: Value) -> Result<Vec<Value>> {
                let v = $value;
                mean_update($g, state, v, sw)
            }
            fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value> {
                ratio(g, state[0], state[1])
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

mean_metric!(
    /// How often the predicted class (argmax) equals the integer label.
    SparseCategoricalAccuracy, "sparse_categorical_accuracy", |g, y, p| {
        let lead: Vec<usize> = g.ty(p).dims()[..g.ty(p).rank() - 1].to_vec();
        let y = g.reshape(y, lead)?;
        let yf = g.convert(y, DType::F32)?;
        let am = argmax_last(g, p)?;
        let hit = g.compare(Comparison::Eq, am, yf)?;
        g.convert(hit, DType::F32)?
    }
);
mean_metric!(
    /// How often the predicted class equals the argmax of the one-hot target.
    CategoricalAccuracy, "categorical_accuracy", |g, y, p| {
        let a = argmax_last(g, y)?;
        let b = argmax_last(g, p)?;
        let hit = g.compare(Comparison::Eq, a, b)?;
        g.convert(hit, DType::F32)?
    }
);
mean_metric!(
    /// How often `pred > 0.5` equals the 0/1 target, per element.
    BinaryAccuracy, "binary_accuracy", |g, y, p| {
        let t = g.full_like(0.5, p)?;
        let ph = g.compare(Comparison::Gt, p, t)?;
        let ph = g.convert(ph, DType::F32)?;
        let hit = g.compare(Comparison::Eq, ph, y)?;
        g.convert(hit, DType::F32)?
    }
);
mean_metric!(
    /// Mean squared error.
    MeanSquaredError, "mean_squared_error", |g, y, p| {
        let d = g.sub(y, p)?;
        g.mul(d, d)?
    }
);
mean_metric!(
    /// Mean absolute error.
    MeanAbsoluteError, "mean_absolute_error", |g, y, p| {
        let d = g.sub(y, p)?;
        g.abs(d)?
    }
);

/// Keras' `"accuracy"`: becomes sparse categorical, categorical or binary accuracy
/// according to the loss; next to another loss, exact equality of target and prediction.
#[derive(Clone, Debug, Default)]
pub struct Accuracy;

impl Metric for Accuracy {
    fn name(&self) -> String {
        "accuracy".into()
    }
    fn state(&self) -> Vec<Vec<usize>> {
        vec![vec![], vec![]]
    }
    fn update(
        &self,
        g: &mut Graph,
        state: &[Value],
        y: Value,
        p: Value,
        sw: Value,
    ) -> Result<Vec<Value>> {
        let hit = g.compare(Comparison::Eq, y, p)?;
        let v = g.convert(hit, DType::F32)?;
        mean_update(g, state, v, sw)
    }
    fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value> {
        ratio(g, state[0], state[1])
    }
    fn resolve(self: Box<Self>, loss: &dyn Loss) -> Box<dyn Metric> {
        let inner: Box<dyn Metric> = match loss.name() {
            "sparse_categorical_crossentropy" => Box::new(SparseCategoricalAccuracy),
            "categorical_crossentropy" => Box::new(CategoricalAccuracy),
            "binary_crossentropy" => Box::new(BinaryAccuracy),
            _ => return self,
        };
        Box::new(Renamed {
            name: "accuracy".into(),
            inner,
        })
    }
    fn clone_box(&self) -> Box<dyn Metric> {
        Box::new(self.clone())
    }
}

/// A metric shown under another name (Keras keeps the name the user asked for).
#[derive(Debug)]
struct Renamed {
    name: String,
    inner: Box<dyn Metric>,
}

impl Metric for Renamed {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn state(&self) -> Vec<Vec<usize>> {
        self.inner.state()
    }
    fn update(
        &self,
        g: &mut Graph,
        s: &[Value],
        y: Value,
        p: Value,
        sw: Value,
    ) -> Result<Vec<Value>> {
        self.inner.update(g, s, y, p, sw)
    }
    fn result(&self, g: &mut Graph, s: &[Value]) -> Result<Value> {
        self.inner.result(g, s)
    }
    fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric> {
        self
    }
    fn clone_box(&self) -> Box<dyn Metric> {
        Box::new(Renamed {
            name: self.name.clone(),
            inner: self.inner.clone_box(),
        })
    }
}

/// Whether the target class is among the `k` highest predictions. `sparse` targets are
/// integer labels, else one-hot.
#[derive(Clone, Debug)]
pub struct TopKAccuracy {
    pub k: usize,
    pub sparse: bool,
}

impl TopKAccuracy {
    pub fn sparse(k: usize) -> TopKAccuracy {
        TopKAccuracy { k, sparse: true }
    }
    pub fn categorical(k: usize) -> TopKAccuracy {
        TopKAccuracy { k, sparse: false }
    }
}

impl Metric for TopKAccuracy {
    fn name(&self) -> String {
        if self.sparse {
            "sparse_top_k_categorical_accuracy"
        } else {
            "top_k_categorical_accuracy"
        }
        .into()
    }
    fn state(&self) -> Vec<Vec<usize>> {
        vec![vec![], vec![]]
    }
    fn update(
        &self,
        g: &mut Graph,
        state: &[Value],
        y: Value,
        p: Value,
        sw: Value,
    ) -> Result<Vec<Value>> {
        let pt = g.ty(p).clone();
        let last = pt.rank() - 1;
        let lead: Vec<usize> = pt.dims()[..last].to_vec();
        let label = if self.sparse {
            g.reshape(y, lead.clone())?
        } else {
            let a = argmax_last(g, y)?;
            g.convert(a, DType::I32)?
        };
        // The target is in the top k when fewer than k classes score strictly higher.
        let score = g.gather(p, label, last, last)?;
        let keep: Vec<usize> = (0..last).collect();
        let sb = g.broadcast_in_dim(score, pt.shape.clone(), &keep)?;
        let higher = g.compare(Comparison::Gt, p, sb)?;
        let hf = g.convert(higher, DType::F32)?;
        let n = g.sum(hf, &[last])?;
        let k = g.full_like(self.k as f64, n)?;
        let hit = g.compare(Comparison::Lt, n, k)?;
        let v = g.convert(hit, DType::F32)?;
        mean_update(g, state, v, sw)
    }
    fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value> {
        ratio(g, state[0], state[1])
    }
    fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric> {
        self
    }
    fn clone_box(&self) -> Box<dyn Metric> {
        Box::new(self.clone())
    }
}

/// Weighted true/false positive/negative counts of `pred > threshold` against 0/1
/// targets, per threshold: state `[tp, fp, tn, fn]`, each `[thresholds]`.
fn confusion(
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

fn check_threshold(what: &str, t: f32) -> Result<()> {
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

/// Anything that can be the metrics argument of `compile`: an array or vector of metrics,
/// a tuple of up to four, or `()` for none.
pub trait IntoMetrics {
    fn into_metrics(self) -> Vec<Box<dyn Metric>>;
}

impl IntoMetrics for () {
    fn into_metrics(self) -> Vec<Box<dyn Metric>> {
        Vec::new()
    }
}

impl<M: Metric + 'static, const N: usize> IntoMetrics for [M; N] {
    fn into_metrics(self) -> Vec<Box<dyn Metric>> {
        self.into_iter()
            .map(|m| Box::new(m) as Box<dyn Metric>)
            .collect()
    }
}

impl IntoMetrics for Vec<Box<dyn Metric>> {
    fn into_metrics(self) -> Vec<Box<dyn Metric>> {
        self
    }
}

macro_rules! tuple_metrics {
    ($($t:ident),+) => {
        impl<$($t: Metric + 'static),+> IntoMetrics for ($($t,)+) {
            #[allow(non_snake_case)]
            fn into_metrics(self) -> Vec<Box<dyn Metric>> {
                let ($($t,)+) = self;
                vec![$(Box::new($t) as Box<dyn Metric>),+]
            }
        }
    };
}
tuple_metrics!(A);
tuple_metrics!(A, B);
tuple_metrics!(A, B, C);
tuple_metrics!(A, B, C, D);
