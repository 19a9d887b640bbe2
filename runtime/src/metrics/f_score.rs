//! Keras' `FBetaScore` and `F1Score`: the F-score of thresholded predictions against
//! one-hot or multi-hot targets, per class or averaged.

use super::Metric;
use crate::ir::{Comparison, DType, Graph, ReduceOp, Value};
use crate::loss::Loss;
use crate::{Error, Result};

/// Keras' `backend.epsilon()`, which the F-score adds to every denominator.
const EPSILON: f64 = 1e-7;

/// How an F-score combines its classes (Keras' `average`; Keras' `None`, one score per
/// class, is `Option::None` where an `Option<Average>` is asked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Average {
    /// Counts summed over every class first: one score (`"micro"`).
    Micro,
    /// The mean of the per-class scores (`"macro"`).
    Macro,
    /// The per-class scores weighted by each class's (weighted) count of true labels
    /// (`"weighted"`).
    Weighted,
}

impl Average {
    /// Keras' `average` argument: `None` (per class), `"micro"`, `"macro"` or
    /// `"weighted"`; anything else is an error naming `metric`.
    pub fn from_keras(metric: &str, average: Option<&str>) -> Result<Option<Average>> {
        match average {
            None => Ok(None),
            Some("micro") => Ok(Some(Average::Micro)),
            Some("macro") => Ok(Some(Average::Macro)),
            Some("weighted") => Ok(Some(Average::Weighted)),
            Some(other) => Err(Error::invalid(
                metric,
                format!(
                    "average must be one of None, \"micro\", \"macro\", \"weighted\", \
                     got \"{other}\""
                ),
            )),
        }
    }
}

/// What the two F-score metrics share: Keras' class name (for errors), the options, and
/// the class count learnt at build time (0 before).
struct Spec {
    keras: &'static str,
    average: Option<Average>,
    beta: f32,
    threshold: Option<f32>,
    classes: usize,
}

impl Spec {
    fn check(&self) -> Result<()> {
        if !(self.beta.is_finite() && self.beta > 0.0) {
            return Err(Error::invalid(
                self.keras,
                format!("beta must be a finite number > 0, got {}", self.beta),
            ));
        }
        if let Some(t) = self.threshold {
            if !(t > 0.0 && t <= 1.0) {
                return Err(Error::invalid(
                    self.keras,
                    format!("threshold must verify 0 < threshold <= 1, got {t}"),
                ));
            }
        }
        Ok(())
    }

    /// The class count from the model's output `[classes]`.
    fn classes(&self, output: &[usize]) -> Result<usize> {
        self.check()?;
        match output {
            [c] if *c > 0 => Ok(*c),
            _ => Err(Error::invalid(
                self.keras,
                format!(
                    "expects 2D predictions (batch_size, output_dim), got a model output \
                     of shape (batch_size, {})",
                    output
                        .iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    /// Each count's shape: per class, or one for `micro`.
    fn state_shape(&self) -> Vec<usize> {
        match self.average {
            Some(Average::Micro) => vec![],
            _ => vec![self.classes],
        }
    }

    fn result_shape(&self) -> Vec<usize> {
        match self.average {
            None => vec![self.classes],
            Some(_) => vec![],
        }
    }

    /// State `[tp, fp, fn, true-label weight]`, each summed over the batch (and over the
    /// classes for `micro`).
    fn update(
        &self,
        g: &mut Graph,
        state: &[Value],
        y: Value,
        p: Value,
        sw: Value,
    ) -> Result<Vec<Value>> {
        self.check()?;
        let pt = g.ty(p).clone();
        let yt = g.ty(y).clone();
        if pt.rank() != 2 || yt.dims() != pt.dims() {
            return Err(Error::invalid(
                self.keras,
                format!(
                    "expects 2D inputs of one shape (batch_size, output_dim), got targets \
                     {yt} and predictions {pt}"
                ),
            ));
        }
        let (batch, classes) = (pt.dims()[0], pt.dims()[1]);
        if classes != self.classes {
            return Err(Error::invalid(
                self.keras,
                format!(
                    "was built for {} classes (see Metric::build), got predictions {pt}",
                    self.classes
                ),
            ));
        }
        let on = match self.threshold {
            // Without a threshold the row's largest prediction(s) count as positive,
            // unless that is (about) zero.
            None => {
                let m = g.reduce(ReduceOp::Max, p, &[1])?;
                let m = g.broadcast_in_dim(m, [batch, classes], &[0])?;
                let top = g.compare(Comparison::Ge, p, m)?;
                let a = g.abs(p)?;
                let tiny = g.full_like(1e-9, a)?;
                let nonzero = g.compare(Comparison::Gt, a, tiny)?;
                let top = g.convert(top, DType::F32)?;
                let nonzero = g.convert(nonzero, DType::F32)?;
                g.mul(top, nonzero)?
            }
            Some(t) => {
                let t = g.full_like(t as f64, p)?;
                let above = g.compare(Comparison::Gt, p, t)?;
                g.convert(above, DType::F32)?
            }
        };
        let y = if yt.dtype == DType::F32 {
            y
        } else {
            g.convert(y, DType::F32)?
        };
        let w = g.broadcast_in_dim(sw, [batch, classes], &[0])?;
        let axes: &[usize] = match self.average {
            Some(Average::Micro) => &[0, 1],
            _ => &[0],
        };
        let weighted_sum = |g: &mut Graph, v: Value| -> Result<Value> {
            let v = g.mul(v, w)?;
            g.sum(v, axes)
        };
        let one = g.full_like(1.0, on)?;
        let off = g.sub(one, on)?;
        let neg = g.sub(one, y)?;
        let tp = g.mul(on, y)?;
        let fp = g.mul(on, neg)?;
        let fn_ = g.mul(off, y)?;
        let incs = [
            weighted_sum(g, tp)?,
            weighted_sum(g, fp)?,
            weighted_sum(g, fn_)?,
            weighted_sum(g, y)?,
        ];
        incs.iter().zip(state).map(|(&i, &s)| g.add(s, i)).collect()
    }

    /// Keras' formula: precision and recall with ε in their denominators, then
    /// `(1 + β²)·p·r / (β²·p + r + ε)`, averaged as asked.
    fn result(&self, g: &mut Graph, s: &[Value]) -> Result<Value> {
        let (tp, fp, fn_, weights) = (s[0], s[1], s[2], s[3]);
        let over = |g: &mut Graph, other: Value| -> Result<Value> {
            let d = g.add(tp, other)?;
            let d = g.add_scalar(d, EPSILON)?;
            g.div(tp, d)
        };
        let precision = over(g, fp)?;
        let recall = over(g, fn_)?;
        let b2 = (self.beta as f64) * (self.beta as f64);
        let num = g.mul(precision, recall)?;
        let den = g.mul_scalar(precision, b2)?;
        let den = g.add(den, recall)?;
        let den = g.add_scalar(den, EPSILON)?;
        let f = g.div(num, den)?;
        let f = g.mul_scalar(f, 1.0 + b2)?;
        match self.average {
            None => Ok(f),
            Some(Average::Weighted) => {
                let total = g.sum_all(weights)?;
                let total = g.add_scalar(total, EPSILON)?;
                let share = g.div(weights, total)?;
                let fw = g.mul(f, share)?;
                g.sum_all(fw)
            }
            Some(Average::Micro) => Ok(f),
            Some(Average::Macro) => {
                let r = g.ty(f).rank();
                g.mean(f, &(0..r).collect::<Vec<_>>())
            }
        }
    }
}

/// Keras' `FBetaScore`: the F-β score of `pred > threshold` (or, without a threshold, of
/// each row's largest prediction) against one-hot or multi-hot targets, for models with
/// 2D outputs. With `average: None` (the default) the result is a vector, one score per
/// class. Logged as `fbeta_score`.
#[derive(Clone, Debug)]
pub struct FBetaScore {
    pub average: Option<Average>,
    pub beta: f32,
    pub threshold: Option<f32>,
    classes: usize,
}

impl Default for FBetaScore {
    fn default() -> Self {
        FBetaScore {
            average: None,
            beta: 1.0,
            threshold: None,
            classes: 0,
        }
    }
}

/// Keras' `F1Score`: [`FBetaScore`] with `beta = 1`. Logged as `f1_score`.
#[derive(Clone, Debug, Default)]
pub struct F1Score {
    pub average: Option<Average>,
    pub threshold: Option<f32>,
    classes: usize,
}

impl FBetaScore {
    /// Per-class F-β scores without a threshold, as Keras' `FBetaScore(beta=beta)`.
    pub fn new(beta: f32) -> FBetaScore {
        FBetaScore {
            beta,
            ..FBetaScore::default()
        }
    }
}

impl F1Score {
    /// Per-class F1 scores without a threshold, as Keras' `F1Score()`.
    pub fn new() -> F1Score {
        F1Score::default()
    }
}

macro_rules! f_score_metric {
    ($ty:ident, $keras:literal, $name:literal, |$m:ident| $beta:expr) => {
        impl $ty {
            /// Sets how classes combine.
            pub fn average(mut self, average: Option<Average>) -> Self {
                self.average = average;
                self
            }

            /// Sets `average` from Keras' string (`None`, `"micro"`, `"macro"` or
            /// `"weighted"`); another string is an error naming the metric and these.
            pub fn average_from_keras(mut self, average: Option<&str>) -> Result<Self> {
                self.average = Average::from_keras($keras, average)?;
                Ok(self)
            }

            /// Counts `pred > threshold` as positive (`0 < threshold <= 1`).
            pub fn threshold(mut self, threshold: f32) -> Self {
                self.threshold = Some(threshold);
                self
            }

            fn spec(&self) -> Spec {
                let $m = self;
                Spec {
                    keras: $keras,
                    average: self.average,
                    beta: $beta,
                    threshold: self.threshold,
                    classes: self.classes,
                }
            }
        }

        impl Metric for $ty {
            fn name(&self) -> String {
                $name.into()
            }
            fn state(&self) -> Vec<Vec<usize>> {
                vec![self.spec().state_shape(); 4]
            }
            fn update(
                &self,
                g: &mut Graph,
                state: &[Value],
                y: Value,
                p: Value,
                sw: Value,
            ) -> Result<Vec<Value>> {
                self.spec().update(g, state, y, p, sw)
            }
            fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value> {
                self.spec().result(g, state)
            }
            fn result_shape(&self) -> Vec<usize> {
                self.spec().result_shape()
            }
            fn build(&mut self, output: &[usize]) -> Result<()> {
                self.classes = self.spec().classes(output)?;
                Ok(())
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

f_score_metric!(FBetaScore, "FBetaScore", "fbeta_score", |m| m.beta);
f_score_metric!(F1Score, "F1Score", "f1_score", |_m| 1.0);
