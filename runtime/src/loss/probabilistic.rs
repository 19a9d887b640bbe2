//! Losses between distributions: the Kullback-Leibler divergence and the Poisson loss.

use super::{clip, last_axis, mean_last, mean_to_batch, same_shape, Loss, EPSILON};
use crate::ir::{Graph, Value};
use crate::Result;

/// `Σ y·log(y/p)` over the last axis, both clipped to `[ε, 1]`.
#[derive(Clone, Debug, Default)]
pub struct KLDivergence;

impl Loss for KLDivergence {
    fn name(&self) -> &'static str {
        "kl_divergence"
    }
    fn per_sample(&self, g: &mut Graph, y: Value, p: Value, _l: Option<Value>) -> Result<Value> {
        same_shape(self.name(), &g.ty(y).clone(), &g.ty(p).clone())?;
        let last = last_axis(g, self.name(), p)?;
        let yc = clip(g, y, EPSILON, 1.0)?;
        let pc = clip(g, p, EPSILON, 1.0)?;
        let r = g.div(yc, pc)?;
        let l = g.log(r)?;
        let t = g.mul(yc, l)?;
        let s = g.sum(t, &[last])?;
        mean_to_batch(g, s)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
}

/// `mean(p - y·log(p + ε))` over the last axis: the negative log-likelihood of counts `y`
/// under Poisson rates `p` (up to a term free of `p`).
#[derive(Clone, Debug, Default)]
pub struct Poisson;

impl Loss for Poisson {
    fn name(&self) -> &'static str {
        "poisson"
    }
    fn per_sample(&self, g: &mut Graph, y: Value, p: Value, _l: Option<Value>) -> Result<Value> {
        same_shape(self.name(), &g.ty(y).clone(), &g.ty(p).clone())?;
        let pe = g.add_scalar(p, EPSILON)?;
        let l = g.log(pe)?;
        let yl = g.mul(y, l)?;
        let e = g.sub(p, yl)?;
        mean_last(g, e)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
}
