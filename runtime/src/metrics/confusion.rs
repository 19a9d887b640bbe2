//! Metrics over confusion counts at thresholds: precision, recall, AUC, and the shared
//! counting that `at_value.rs` uses too.

use super::{ratio, Metric};
use crate::ir::{BinaryOp, Comparison, DType, Graph, ReduceOp, UnaryOp, Value, Window};
use crate::loss::Loss;
use crate::{Error, Result, Tensor};

/// Keras' `backend.epsilon()`.
const EPSILON: f64 = 1e-7;

/// Thresholds, and how predictions are compared with them.
pub(crate) struct Grid {
    pub thresholds: Vec<f32>,
    /// `Some(with_epsilon)` when Keras counts with buckets: evenly spaced thresholds,
    /// predictions clipped to [0, 1], positive at threshold `i` when
    /// `ceil(p · (n - 1)) > i`; with `with_epsilon` (thresholds `-ε` and `1 + ε` at the
    /// ends) every prediction is positive at the first. `None`: positive when `p > t`.
    pub buckets: Option<bool>,
}

impl Grid {
    /// Keras' test for evenly spaced thresholds (`np.allclose` to `i / (n - 1)`, atol ε).
    pub fn evenly_spaced(t: &[f64]) -> bool {
        let n = t.len();
        n >= 3
            && t.iter().enumerate().all(|(i, &v)| {
                let want = (i as f32 / (n - 1) as f32) as f64;
                (v - want).abs() <= EPSILON + 1e-5 * want.abs()
            })
    }
}

/// How the counts are laid out.
pub(crate) struct Counting<'a> {
    /// The metric, for errors.
    pub name: &'a str,
    /// Only the `k` largest predictions along the last axis can be positive (taken
    /// before `class_id`, as Keras does).
    pub top_k: Option<usize>,
    /// Count only this index of the last axis.
    pub class_id: Option<usize>,
    /// Keep labels (the last axis of `[batch, labels]` predictions) apart: counts
    /// `[thresholds, labels]`.
    pub multi_label: Option<usize>,
    /// Per-label weights multiplied into the sample weights (not with `multi_label`).
    pub label_weights: Option<&'a [f32]>,
}

impl<'a> Counting<'a> {
    /// Every element counted, labels pooled: the plain counts most metrics want.
    pub fn new(name: &'a str) -> Counting<'a> {
        Counting {
            name,
            top_k: None,
            class_id: None,
            multi_label: None,
            label_weights: None,
        }
    }
}

/// Weighted true/false positive/negative counts of predictions against targets (any
/// non-zero target is positive), per threshold: `[tp, fp, tn, fn]`, each `[thresholds]`
/// or `[thresholds, labels]`, added to `state`.
pub(crate) fn confusion(
    g: &mut Graph,
    state: &[Value],
    y: Value,
    p: Value,
    sw: Value,
    grid: &Grid,
    how: &Counting,
) -> Result<Vec<Value>> {
    let name = how.name;
    let (yt, pt) = (g.ty(y).clone(), g.ty(p).clone());
    if yt.numel() != pt.numel() {
        return Err(Error::invalid(
            name,
            format!("targets {yt} do not fit predictions {pt}: expected as many values"),
        ));
    }
    let batch = g.ty(sw).numel();
    if pt.rank() == 0 || pt.dims()[0] != batch {
        return Err(Error::invalid(
            name,
            format!("predictions {pt} must have the batch ({batch} samples) as their first axis"),
        ));
    }
    let y = g.reshape(y, pt.shape.clone())?;
    let y = g.convert(y, DType::F32)?;
    let (mut y, mut p) = (y, p);
    if let Some(k) = how.top_k {
        p = keep_top_k(g, p, k)?;
    }
    if let Some(c) = how.class_id {
        let last = pt.rank() - 1;
        if pt.rank() < 2 || c >= pt.dims()[last] {
            return Err(Error::invalid(
                name,
                format!("class_id {c} needs predictions [batch, classes] with more than {c} classes, got {pt}"),
            ));
        }
        let mut lo = vec![0; pt.rank()];
        let mut hi = pt.dims().to_vec();
        lo[last] = c;
        hi[last] = c + 1;
        let st = vec![1; pt.rank()];
        y = g.slice(y, &lo, &hi, &st)?;
        p = g.slice(p, &lo, &hi, &st)?;
    }
    let dims = g.ty(p).dims().to_vec();
    // Any non-zero target counts as positive.
    let zero = g.zeros_like(y)?;
    let pos = g.compare(Comparison::Ne, y, zero)?;
    let yb = g.convert(pos, DType::F32)?;
    let mut w = g.broadcast_in_dim(sw, dims.clone(), &[0])?;
    if let Some(lw) = how.label_weights {
        let last = dims.len() - 1;
        if lw.len() != dims[last] {
            return Err(Error::invalid(
                name,
                format!(
                    "label_weights has {} entries but predictions have {} labels",
                    lw.len(),
                    dims[last]
                ),
            ));
        }
        let lwv = g.constant(Tensor::from_vec(&[lw.len()], lw.to_vec())?);
        let lwb = g.broadcast_in_dim(lwv, dims.clone(), &[last])?;
        w = g.mul(w, lwb)?;
    }
    // Per-element values: `[elements]`, or `[batch, labels]` kept apart.
    let (y, p, w) = match how.multi_label {
        Some(l) => {
            if dims.len() != 2 || dims[1] != l {
                return Err(Error::invalid(
                    name,
                    format!(
                        "multi_label with num_labels {l} needs predictions [batch, {l}], got {}",
                        g.ty(p)
                    ),
                ));
            }
            (yb, p, w)
        }
        None => {
            let e: usize = dims.iter().product();
            (g.reshape(yb, [e])?, g.reshape(p, [e])?, g.reshape(w, [e])?)
        }
    };
    let one = g.full_like(1.0, y)?;
    let neg = g.sub(one, y)?;
    let tw = g.mul(y, w)?;
    let fw = g.mul(neg, w)?;
    let counts = match grid.buckets {
        Some(with_eps) => bucket_counts(g, p, tw, fw, grid.thresholds.len(), with_eps, how)?,
        None => compare_counts(g, p, tw, fw, &grid.thresholds)?,
    };
    counts
        .iter()
        .zip(state)
        .map(|(&c, &s)| g.add(s, c))
        .collect()
}

/// Keras' value for predictions outside the top k, and the default threshold with `top_k`.
const NEG_INF: f64 = -1e10;

/// `p` with everything but the `k` largest along the last axis (the first on ties, as
/// `top_k` orders them) replaced by [`NEG_INF`]. An element's place is the number of
/// elements above it plus the equal ones before it.
fn keep_top_k(g: &mut Graph, p: Value, k: usize) -> Result<Value> {
    let dims = g.ty(p).dims().to_vec();
    let r = dims.len();
    let mut pair = dims.clone();
    pair.push(dims[r - 1]);
    let lead: Vec<usize> = (0..r - 1).collect();
    let mut as_i = lead.clone();
    as_i.push(r - 1);
    let mut as_j = lead;
    as_j.push(r);
    let pi = g.broadcast_in_dim(p, pair.clone(), &as_i)?;
    let pj = g.broadcast_in_dim(p, pair.clone(), &as_j)?;
    let above = g.compare(Comparison::Gt, pj, pi)?;
    let tie = g.compare(Comparison::Eq, pj, pi)?;
    let it = crate::ir::TensorType::new(DType::F32, pair);
    let ii = g.iota(it.clone(), r - 1)?;
    let jj = g.iota(it, r)?;
    let before = g.compare(Comparison::Lt, jj, ii)?;
    let tie_before = g.binary(BinaryOp::And, tie, before)?;
    let ahead = g.binary(BinaryOp::Or, above, tie_before)?;
    let ahead = g.convert(ahead, DType::F32)?;
    let place = g.sum(ahead, &[r])?;
    let kk = g.full_like(k as f64, place)?;
    let keep = g.compare(Comparison::Lt, place, kk)?;
    let low = g.full_like(NEG_INF, p)?;
    g.select(keep, p, low)
}

/// Counts by buckets, as Keras does for evenly spaced thresholds: each prediction's weight
/// lands in bucket `k = ceil(clip(p) · (n - 1))` (at least 1 with the ε ends), and the
/// positives at threshold `i` are the buckets above `i`.
fn bucket_counts(
    g: &mut Graph,
    p: Value,
    tw: Value,
    fw: Value,
    n: usize,
    with_eps: bool,
    how: &Counting,
) -> Result<[Value; 4]> {
    let lo = g.zeros_like(p)?;
    let hi = g.full_like(1.0, p)?;
    let pc = g.max(p, lo)?;
    let pc = g.min(pc, hi)?;
    let scaled = g.mul_scalar(pc, (n - 1) as f64)?;
    let mut k = g.unary(UnaryOp::Ceil, scaled)?;
    if with_eps {
        let first = g.full_like(1.0, k)?;
        k = g.max(k, first)?;
    }
    let k = g.convert(k, DType::I32)?;
    let labels = how.multi_label.unwrap_or(1);
    let kt = g.ty(k).clone();
    // Bucket and label as one index into `[n · labels]`.
    let idx = if how.multi_label.is_some() {
        let l = g.full_like(labels as f64, k)?;
        let row = g.mul(k, l)?;
        let col = g.iota(kt.clone(), 1)?;
        let i = g.add(row, col)?;
        let e = kt.numel();
        g.reshape(i, [e])?
    } else {
        k
    };
    let e = g.ty(idx).numel();
    let suffix = |g: &mut Graph, v: Value| -> Result<Value> {
        let v = g.reshape(v, [e])?;
        let z = g.constant(Tensor::zeros(&crate::ir::TensorType::new(
            DType::F32,
            [n * labels],
        ))?);
        let b = g.scatter_add(z, idx, v, 0, 0)?;
        let b = g.reshape(b, [n, labels])?;
        // Σ_{k > i} b[k]: shift down by one, then a window of n summing to the end.
        let above = g.slice(b, &[1, 0], &[n, labels], &[1, 1])?;
        let zero = g.scalar(0.0, DType::F32);
        let shifted = g.pad(above, zero, &[0, 0], &[1, 0], &[0, 0])?;
        g.reduce_window(
            ReduceOp::Sum,
            shifted,
            Window {
                dims: vec![n, 1],
                strides: vec![1, 1],
                padding: vec![(0, n - 1), (0, 0)],
            },
        )
    };
    let tp = suffix(g, tw)?;
    let fp = suffix(g, fw)?;
    // Totals per label (`[1, labels]`), less the positives: Keras' arithmetic.
    let total = |g: &mut Graph, v: Value| -> Result<Value> {
        let s = if how.multi_label.is_some() {
            g.sum(v, &[0])?
        } else {
            g.sum_all(v)?
        };
        let s = g.reshape(s, [1, labels])?;
        g.broadcast_in_dim(s, [n, labels], &[0, 1])
    };
    let tt = total(g, tw)?;
    let ft = total(g, fw)?;
    let tn = g.sub(ft, fp)?;
    let fn_ = g.sub(tt, tp)?;
    let shape: Vec<usize> = match how.multi_label {
        Some(l) => vec![n, l],
        None => vec![n],
    };
    let mut out = [tp, fp, tn, fn_];
    for v in &mut out {
        *v = g.reshape(*v, shape.clone())?;
    }
    Ok(out)
}

/// Counts by comparing every prediction with every threshold (`p > t`).
fn compare_counts(
    g: &mut Graph,
    p: Value,
    tw: Value,
    fw: Value,
    thresholds: &[f32],
) -> Result<[Value; 4]> {
    let n = thresholds.len();
    let pd = g.ty(p).dims().to_vec();
    let mut full = vec![n];
    full.extend_from_slice(&pd);
    let rest: Vec<usize> = (1..=pd.len()).collect();
    let th = g.constant(Tensor::from_vec(&[n], thresholds.to_vec())?);
    let pb = g.broadcast_in_dim(p, full.clone(), &rest)?;
    let tb = g.broadcast_in_dim(th, full.clone(), &[0])?;
    let above = g.compare(Comparison::Gt, pb, tb)?;
    let above = g.convert(above, DType::F32)?;
    let one = g.full_like(1.0, above)?;
    let below = g.sub(one, above)?;
    let twb = g.broadcast_in_dim(tw, full.clone(), &rest)?;
    let fwb = g.broadcast_in_dim(fw, full, &rest)?;
    // Sum over the elements (the batch when labels are kept apart).
    let count = |g: &mut Graph, a: Value, w: Value| -> Result<Value> {
        let m = g.mul(a, w)?;
        g.sum(m, &[1])
    };
    Ok([
        count(g, above, twb)?,
        count(g, above, fwb)?,
        count(g, below, fwb)?,
        count(g, below, twb)?,
    ])
}

macro_rules! pr_struct {
    ($(#[$doc:meta])* $ty:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default)]
        pub struct $ty {
            /// `pred > thresholds` is positive; `None`: 0.5, or with `top_k` any prediction
            /// among the top k. (Keras also takes a list, giving one result per threshold;
            /// here there is one.)
            pub thresholds: Option<f32>,
            /// Only the `k` largest predictions of each sample's last axis can be positive.
            pub top_k: Option<usize>,
            /// Count only this index of the predictions' last axis.
            pub class_id: Option<usize>,
        }
    };
}

pr_struct!(
    /// `tp / (tp + fp)` of `pred > threshold` against targets (non-zero is positive).
    /// Keras' `Precision`.
    Precision
);
pr_struct!(
    /// `tp / (tp + fn)` of `pred > threshold` against targets (non-zero is positive).
    /// Keras' `Recall`.
    Recall
);

macro_rules! pr_metric {
    ($ty:ident, $name:literal, |$g:ident, $s:ident| $res:expr) => {
        impl $ty {
            fn validate(&self) -> Result<()> {
                if let Some(t) = self.thresholds {
                    if !(0.0..=1.0).contains(&t) {
                        return Err(Error::invalid(
                            $name,
                            format!("thresholds must be in [0, 1], got {t}"),
                        ));
                    }
                }
                if self.top_k == Some(0) {
                    return Err(Error::invalid($name, "top_k must be >= 1, got 0"));
                }
                Ok(())
            }
        }

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
                self.validate()?;
                let default = if self.top_k.is_some() { NEG_INF } else { 0.5 };
                let grid = Grid {
                    thresholds: vec![self.thresholds.map_or(default as f32, |t| t)],
                    buckets: None,
                };
                let how = Counting {
                    top_k: self.top_k,
                    class_id: self.class_id,
                    ..Counting::new($name)
                };
                confusion(g, state, y, p, sw, &grid, &how)
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
            fn check_values(&self, _target: &Tensor, _pred_dims: &[usize]) -> Result<()> {
                self.validate()
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

/// The curve [`AUC`] integrates (Keras' `curve`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AucCurve {
    /// True positive rate against false positive rate.
    #[default]
    ROC,
    /// Precision against recall.
    PR,
    /// Precision gain against recall gain (Flach & Kull).
    PRGAIN,
}

/// How [`AUC`] sums the area between thresholds (Keras' `summation_method`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AucSummationMethod {
    /// Trapezoids; for the PR curve, Davis & Goadrich's interpolation of precision.
    #[default]
    Interpolation,
    /// The larger of each interval's two heights.
    Majoring,
    /// The smaller of each interval's two heights.
    Minoring,
}

/// Area under the ROC (default) or PR curve, approximated over `num_thresholds` evenly
/// spaced thresholds (or the given `thresholds`, with `-ε` and `1 + ε` added). Keras' `AUC`.
#[derive(Clone, Debug)]
pub struct AUC {
    pub num_thresholds: usize,
    pub curve: AucCurve,
    pub summation_method: AucSummationMethod,
    /// Explicit thresholds in place of `num_thresholds` evenly spaced ones.
    pub thresholds: Option<Vec<f32>>,
    /// One curve per label (the last axis of `[batch, labels]` predictions), averaged.
    pub multi_label: bool,
    /// The number of labels, needed with `multi_label` (the state is sized at compile).
    pub num_labels: Option<usize>,
    /// Per-label weights: of each label's area with `multi_label`, otherwise of each
    /// label's predictions in the counts.
    pub label_weights: Option<Vec<f32>>,
    /// Predictions are logits: a sigmoid makes probabilities of them.
    pub from_logits: bool,
}

impl Default for AUC {
    fn default() -> Self {
        AUC {
            num_thresholds: 200,
            curve: AucCurve::ROC,
            summation_method: AucSummationMethod::Interpolation,
            thresholds: None,
            multi_label: false,
            num_labels: None,
            label_weights: None,
            from_logits: false,
        }
    }
}

impl AUC {
    /// The state's threshold count: `num_thresholds`, or the given thresholds and two ends.
    fn count(&self) -> usize {
        match &self.thresholds {
            Some(t) => t.len() + 2,
            None => self.num_thresholds,
        }
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::invalid("auc", m));
        match &self.thresholds {
            Some(t) => {
                if let Some(v) = t.iter().find(|v| !v.is_finite()) {
                    return bad(format!("thresholds must be finite, got {v}"));
                }
            }
            None if self.num_thresholds <= 1 => {
                return bad(format!(
                    "num_thresholds must be > 1, got {}",
                    self.num_thresholds
                ))
            }
            None => {}
        }
        match (self.multi_label, self.num_labels) {
            (false, Some(_)) => return bad("num_labels is needed only when multi_label is true".into()),
            (true, None) => return bad("multi_label needs num_labels: the per-label state is sized when the model is compiled".into()),
            (true, Some(0)) => return bad("num_labels must be >= 1, got 0".into()),
            _ => {}
        }
        if let (true, Some(l), Some(w)) = (self.multi_label, self.num_labels, &self.label_weights) {
            if w.len() != l {
                return bad(format!(
                    "label_weights has {} entries but num_labels is {l}",
                    w.len()
                ));
            }
        }
        if let Some(w) = &self.label_weights {
            if let Some(v) = w.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
                return bad(format!("label_weights must be finite and >= 0, got {v}"));
            }
        }
        Ok(())
    }

    /// Keras' grid: `-ε`, the thresholds (given, sorted; or `i / (n - 1)`), `1 + ε`.
    fn grid(&self) -> Grid {
        let (inner, even): (Vec<f64>, bool) = match &self.thresholds {
            Some(t) => {
                let mut s: Vec<f64> = t.iter().map(|&v| v as f64).collect();
                s.sort_by(f64::total_cmp);
                let mut all = vec![0.0];
                all.extend(&s);
                all.push(1.0);
                let even = Grid::evenly_spaced(&all);
                (s, even)
            }
            None => {
                let n = self.num_thresholds;
                (
                    (1..n - 1).map(|i| i as f64 / (n - 1) as f64).collect(),
                    true,
                )
            }
        };
        let mut th = vec![(0.0 - EPSILON) as f32];
        th.extend(inner.iter().map(|&v| v as f32));
        th.push((1.0 + EPSILON) as f32);
        Grid {
            thresholds: th,
            buckets: even.then_some(true),
        }
    }
}

impl Metric for AUC {
    fn name(&self) -> String {
        "auc".into()
    }
    fn state(&self) -> Vec<Vec<usize>> {
        if self.validate().is_err() {
            return vec![vec![0]; 4];
        }
        match (self.multi_label, self.num_labels) {
            (true, Some(l)) => vec![vec![self.count(), l]; 4],
            _ => vec![vec![self.count()]; 4],
        }
    }
    fn update(
        &self,
        g: &mut Graph,
        state: &[Value],
        y: Value,
        p: Value,
        sw: Value,
    ) -> Result<Vec<Value>> {
        self.validate()?;
        let p = if self.from_logits {
            g.unary(UnaryOp::Logistic, p)?
        } else {
            p
        };
        let how = Counting {
            multi_label: if self.multi_label {
                self.num_labels
            } else {
                None
            },
            label_weights: if self.multi_label {
                None
            } else {
                self.label_weights.as_deref()
            },
            ..Counting::new("auc")
        };
        confusion(g, state, y, p, sw, &self.grid(), &how)
    }
    fn result(&self, g: &mut Graph, s: &[Value]) -> Result<Value> {
        self.validate()?;
        let n = self.count();
        let (tp, fp, tn, fn_) = (s[0], s[1], s[2], s[3]);
        let rank = g.ty(tp).rank();
        // Slices `[0, n-1)` and `[1, n)` along the thresholds.
        let part = |g: &mut Graph, v: Value, from: usize| -> Result<Value> {
            let dims = g.ty(v).dims().to_vec();
            let mut lo = vec![0; rank];
            let mut hi = dims;
            lo[0] = from;
            hi[0] = from + n - 1;
            g.slice(v, &lo, &hi, &vec![1; rank])
        };
        let terms = if self.curve == AucCurve::PR
            && self.summation_method == AucSummationMethod::Interpolation
        {
            interpolated_pr(g, tp, fp, fn_, &part)?
        } else {
            let (x, y) = match self.curve {
                AucCurve::ROC => {
                    let d = g.add(fp, tn)?;
                    let fpr = ratio(g, fp, d)?;
                    let d = g.add(tp, fn_)?;
                    (fpr, ratio(g, tp, d)?)
                }
                AucCurve::PR => {
                    let d = g.add(tp, fn_)?;
                    let recall = ratio(g, tp, d)?;
                    let d = g.add(tp, fp)?;
                    (recall, ratio(g, tp, d)?)
                }
                AucCurve::PRGAIN => pr_gain(g, tp, fp, tn, fn_)?,
            };
            let (y0, y1) = (part(g, y, 0)?, part(g, y, 1)?);
            let heights = match self.summation_method {
                AucSummationMethod::Interpolation => {
                    let s = g.add(y0, y1)?;
                    g.mul_scalar(s, 0.5)?
                }
                AucSummationMethod::Minoring => g.min(y0, y1)?,
                AucSummationMethod::Majoring => g.max(y0, y1)?,
            };
            let (x0, x1) = (part(g, x, 0)?, part(g, x, 1)?);
            let dx = g.sub(x0, x1)?;
            g.mul(dx, heights)?
        };
        if !self.multi_label {
            return g.sum_all(terms);
        }
        let by_label = g.sum(terms, &[0])?;
        match &self.label_weights {
            None => g.mean(by_label, &[0]),
            Some(w) => {
                let wv = g.constant(Tensor::from_vec(&[w.len()], w.clone())?);
                let m = g.mul(by_label, wv)?;
                let num = g.sum_all(m)?;
                let den = g.sum_all(wv)?;
                ratio(g, num, den)
            }
        }
    }
    fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric> {
        self
    }
    fn clone_box(&self) -> Box<dyn Metric> {
        Box::new(self.clone())
    }
    fn check_values(&self, _target: &Tensor, _pred_dims: &[usize]) -> Result<()> {
        self.validate()
    }
}

/// The PR area by Davis & Goadrich's interpolation (Keras' `interpolate_pr_auc`): between
/// two thresholds precision is interpolated along the true positives, which integrates to
/// `slope · (Δtp + intercept · ln(p0 / p1)) / (tp1 + fn1)` per interval.
fn interpolated_pr(
    g: &mut Graph,
    tp: Value,
    fp: Value,
    fn_: Value,
    part: &dyn Fn(&mut Graph, Value, usize) -> Result<Value>,
) -> Result<Value> {
    let (tp0, tp1) = (part(g, tp, 0)?, part(g, tp, 1)?);
    let dtp = g.sub(tp0, tp1)?;
    let pp = g.add(tp, fp)?;
    let (p0, p1) = (part(g, pp, 0)?, part(g, pp, 1)?);
    let dp = g.sub(p0, p1)?;
    let zero = g.zeros_like(dp)?;
    let dp_pos = g.max(dp, zero)?;
    let slope = ratio(g, dtp, dp_pos)?;
    let sp1 = g.mul(slope, p1)?;
    let intercept = g.sub(tp1, sp1)?;
    let both = {
        let a = g.compare(Comparison::Gt, p0, zero)?;
        let b = g.compare(Comparison::Gt, p1, zero)?;
        g.binary(BinaryOp::And, a, b)?
    };
    let p1_pos = g.max(p1, zero)?;
    let pr = ratio(g, p0, p1_pos)?;
    let one = g.full_like(1.0, pr)?;
    let safe = g.select(both, pr, one)?;
    let lg = g.log(safe)?;
    let il = g.mul(intercept, lg)?;
    let inner = g.add(dtp, il)?;
    let num = g.mul(slope, inner)?;
    let fn1 = part(g, fn_, 1)?;
    let d = g.add(tp1, fn1)?;
    let d = g.max(d, zero)?;
    ratio(g, num, d)
}

/// Recall gain and precision gain (Keras' PRGAIN curve).
fn pr_gain(g: &mut Graph, tp: Value, fp: Value, tn: Value, fn_: Value) -> Result<(Value, Value)> {
    let pos = g.add(tp, fn_)?;
    let negs = g.add(tn, fp)?;
    let scale = ratio(g, pos, negs)?;
    let gain = |g: &mut Graph, v: Value| -> Result<Value> {
        let r = ratio(g, v, tp)?;
        let s = g.mul(scale, r)?;
        let one = g.full_like(1.0, s)?;
        g.sub(one, s)
    };
    let rg = gain(g, fn_)?;
    let pg = gain(g, fp)?;
    let zero = g.zeros_like(tp)?;
    let one = g.full_like(1.0, tp)?;
    let none = g.compare(Comparison::Eq, tp, zero)?;
    let rg = g.select(none, zero, rg)?;
    let pg = g.select(none, one, pg)?;
    let rg = g.max(rg, zero)?;
    Ok((rg, pg))
}
