//! Regression losses: squared, absolute, percentage, logarithmic, Huber, log-cosh errors,
//! and the cosine similarity.

use super::{mean_last, resolve_axis, same_shape, sum_keep, to_per_sample, Loss, EPSILON};
use crate::ir::{Comparison, Graph, TensorType, UnaryOp, Value};
use crate::nn::Activation;
use crate::{Error, Result};

/// A loss that is the mean over the last axis of a function of target and prediction.
macro_rules! elementwise_loss {
    ($(#[$doc:meta])* $name:ident, $kname:literal, |$g:ident, $y:ident, $p:ident| $body:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default)]
        pub struct $name;

        impl Loss for $name {
            fn name(&self) -> &'static str {
                $kname
            }
            fn per_sample(&self, $g: &mut Graph, $y: Value, $p: Value, _logits: Option<Value>) -> Result<Value> {
                same_shape(self.name(), &$g.ty($y).clone(), &$g.ty($p).clone())?;
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
    MeanSquaredError, "mean_squared_error", |g, y, p| {
        let d = g.sub(y, p)?;
        g.mul(d, d)?
    }
);
elementwise_loss!(
    /// `mean(|y - p|)` over the last axis.
    MeanAbsoluteError, "mean_absolute_error", |g, y, p| {
        let d = g.sub(y, p)?;
        g.abs(d)?
    }
);
elementwise_loss!(
    /// `100 · mean(|y - p| / max(|y|, ε))` over the last axis.
    MeanAbsolutePercentageError, "mean_absolute_percentage_error", |g, y, p| {
        let d = g.sub(y, p)?;
        let ay = g.abs(y)?;
        let eps = g.full_like(EPSILON, ay)?;
        let den = g.max(ay, eps)?;
        let r = g.div(d, den)?;
        let a = g.abs(r)?;
        g.mul_scalar(a, 100.0)?
    }
);
elementwise_loss!(
    /// `mean((log(1 + max(p, ε)) - log(1 + max(y, ε)))²)` over the last axis.
    MeanSquaredLogarithmicError, "mean_squared_logarithmic_error", |g, y, p| {
        let lp = log1p_of_positive(g, p)?;
        let ly = log1p_of_positive(g, y)?;
        let d = g.sub(lp, ly)?;
        g.mul(d, d)?
    }
);
elementwise_loss!(
    /// `mean(log(cosh(p - y)))` over the last axis, as `x + softplus(-2x) - log 2`, which
    /// does not overflow for large errors.
    LogCosh, "log_cosh", |g, y, p| {
        let x = g.sub(p, y)?;
        let m2 = g.mul_scalar(x, -2.0)?;
        let sp = Activation::Softplus.apply(g, m2)?;
        let s = g.add(x, sp)?;
        g.add_scalar(s, -std::f64::consts::LN_2)?
    }
);

/// `log(1 + max(x, ε))`.
fn log1p_of_positive(g: &mut Graph, x: Value) -> Result<Value> {
    let eps = g.full_like(EPSILON, x)?;
    let m = g.max(x, eps)?;
    g.unary(UnaryOp::Log1p, m)
}

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
        "huber_loss"
    }
    fn validate(&self) -> Result<()> {
        if !(self.delta.is_finite() && self.delta > 0.0) {
            return Err(Error::invalid(
                self.name(),
                format!("delta must be a finite number > 0, got {}", self.delta),
            ));
        }
        Ok(())
    }
    fn per_sample(&self, g: &mut Graph, y: Value, p: Value, _l: Option<Value>) -> Result<Value> {
        self.check(&g.ty(y).clone(), &g.ty(p).clone())?;
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

/// `-Σ ŷ·p̂` along `axis`, with both L2-normalised along it (Keras' loss sign: -1 for
/// equal directions, so minimising it aligns them).
#[derive(Clone, Debug)]
pub struct CosineSimilarity {
    pub axis: i64,
}

impl Default for CosineSimilarity {
    fn default() -> CosineSimilarity {
        CosineSimilarity { axis: -1 }
    }
}

impl Loss for CosineSimilarity {
    fn name(&self) -> &'static str {
        "cosine_similarity"
    }
    fn check(&self, t: &TensorType, p: &TensorType) -> Result<()> {
        same_shape(self.name(), t, p)?;
        resolve_axis(self.name(), self.axis, p.rank()).map(|_| ())
    }
    fn per_sample(&self, g: &mut Graph, y: Value, p: Value, _l: Option<Value>) -> Result<Value> {
        self.check(&g.ty(y).clone(), &g.ty(p).clone())?;
        let axis = resolve_axis(self.name(), self.axis, g.ty(p).rank())?;
        let yn = l2_normalize(g, y, axis)?;
        let pn = l2_normalize(g, p, axis)?;
        let prod = g.mul(yn, pn)?;
        let s = g.sum(prod, &[axis])?;
        let v = g.neg(s)?;
        let batch = g.ty(p).dims().first().copied();
        to_per_sample(g, v, axis == 0, batch)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
}

/// `x · min(1/‖x‖, 1/ε)` along `axis` (Keras' L2 normalisation: zero vectors stay zero).
fn l2_normalize(g: &mut Graph, x: Value, axis: usize) -> Result<Value> {
    let sq = g.mul(x, x)?;
    let ss = sum_keep(g, sq, axis)?;
    let inv = g.unary(UnaryOp::Rsqrt, ss)?;
    let cap = g.full_like(1.0 / EPSILON, inv)?;
    let inv = g.min(inv, cap)?;
    g.mul(x, inv)
}
