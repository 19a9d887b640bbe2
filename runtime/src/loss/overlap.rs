//! Overlap losses for segmentation-style targets in `[0, 1]`: Dice and Tversky.
//!
//! As in Keras, they reduce over `axis` (every axis, batch included, when `None`), so by
//! default the whole batch gives one value; each sample's share of the batch loss is then
//! that value (see `to_per_sample`). Give `axis: Some(vec![1, 2, ...])` for one value per
//! sample.

use super::{
    check_non_negative_arg, check_unit_targets, resolve_axis, same_shape, to_per_sample, Loss,
    EPSILON,
};
use crate::ir::{Graph, TensorType, Value};
use crate::{Error, Result};

/// The axes to reduce over, resolved against `rank` and checked for repeats.
fn reduced_axes(loss: &str, axis: &Option<Vec<i64>>, rank: usize) -> Result<Vec<usize>> {
    let Some(axes) = axis else {
        return Ok((0..rank).collect());
    };
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let r = resolve_axis(loss, a, rank)?;
        if out.contains(&r) {
            return Err(Error::invalid(
                loss,
                format!("axis {axes:?} names axis {r} twice"),
            ));
        }
        out.push(r);
    }
    out.sort_unstable();
    Ok(out)
}

/// Checks shapes and axes shared by both losses; returns the axes.
fn check_overlap(
    loss: &str,
    axis: &Option<Vec<i64>>,
    t: &TensorType,
    p: &TensorType,
) -> Result<Vec<usize>> {
    same_shape(loss, t, p)?;
    reduced_axes(loss, axis, p.rank())
}

/// `Σ_axes a·b`.
fn sum_prod(g: &mut Graph, a: Value, b: Value, axes: &[usize]) -> Result<Value> {
    let ab = g.mul(a, b)?;
    g.sum(ab, axes)
}

/// `1 - v`, spread to per-sample values.
fn finish(g: &mut Graph, ratio: Value, axes: &[usize], pred: Value) -> Result<Value> {
    let one = g.full_like(1.0, ratio)?;
    let v = g.sub(one, ratio)?;
    let dims = g.ty(pred).dims().to_vec();
    let batch_reduced = dims.is_empty() || axes.contains(&0);
    to_per_sample(g, v, batch_reduced, dims.first().copied())
}

/// `1 - 2·Σ y·p / (Σ y + Σ p + ε)` over `axis` (all axes when `None`, Keras' default).
#[derive(Clone, Debug, Default)]
pub struct Dice {
    pub axis: Option<Vec<i64>>,
}

impl Loss for Dice {
    fn name(&self) -> &'static str {
        "dice"
    }
    fn check(&self, t: &TensorType, p: &TensorType) -> Result<()> {
        check_overlap(self.name(), &self.axis, t, p).map(|_| ())
    }
    fn check_values(&self, target: &crate::Tensor, _pred_dims: &[usize]) -> Result<()> {
        check_unit_targets(self.name(), target)
    }
    fn per_sample(&self, g: &mut Graph, y: Value, p: Value, _l: Option<Value>) -> Result<Value> {
        let axes = check_overlap(self.name(), &self.axis, &g.ty(y).clone(), &g.ty(p).clone())?;
        let inter = sum_prod(g, y, p, &axes)?;
        let sy = g.sum(y, &axes)?;
        let sp = g.sum(p, &axes)?;
        let den = g.add(sy, sp)?;
        let den = g.add_scalar(den, EPSILON)?;
        let num = g.mul_scalar(inter, 2.0)?;
        let r = g.div(num, den)?;
        finish(g, r, &axes, p)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
}

/// `1 - Σ y·p / (Σ y·p + α·Σ y·(1 - p) + β·Σ (1 - y)·p + ε)` over `axis` (all axes when
/// `None`). `α` weighs the target mass the prediction misses and `β` the predicted mass
/// outside the target (Keras' assignment); `α = β = ½` is the Dice loss.
#[derive(Clone, Debug)]
pub struct Tversky {
    pub alpha: f32,
    pub beta: f32,
    pub axis: Option<Vec<i64>>,
}

impl Default for Tversky {
    fn default() -> Tversky {
        Tversky {
            alpha: 0.5,
            beta: 0.5,
            axis: None,
        }
    }
}

impl Loss for Tversky {
    fn name(&self) -> &'static str {
        "tversky"
    }
    fn validate(&self) -> Result<()> {
        check_non_negative_arg(self.name(), "alpha", self.alpha)?;
        check_non_negative_arg(self.name(), "beta", self.beta)
    }
    fn check(&self, t: &TensorType, p: &TensorType) -> Result<()> {
        self.validate()?;
        check_overlap(self.name(), &self.axis, t, p).map(|_| ())
    }
    fn check_values(&self, target: &crate::Tensor, _pred_dims: &[usize]) -> Result<()> {
        check_unit_targets(self.name(), target)
    }
    fn per_sample(&self, g: &mut Graph, y: Value, p: Value, _l: Option<Value>) -> Result<Value> {
        self.check(&g.ty(y).clone(), &g.ty(p).clone())?;
        let axes = reduced_axes(self.name(), &self.axis, g.ty(p).rank())?;
        let inter = sum_prod(g, y, p, &axes)?;
        let one = g.full_like(1.0, p)?;
        let np = g.sub(one, p)?;
        let ny = g.sub(one, y)?;
        let missed = sum_prod(g, y, np, &axes)?;
        let extra = sum_prod(g, ny, p, &axes)?;
        let a = g.mul_scalar(missed, self.alpha as f64)?;
        let b = g.mul_scalar(extra, self.beta as f64)?;
        let den = g.add(inter, a)?;
        let den = g.add(den, b)?;
        let den = g.add_scalar(den, EPSILON)?;
        let r = g.div(inter, den)?;
        finish(g, r, &axes, p)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
}
