//! Margin losses: hinge, squared hinge and categorical hinge.

use super::{last_axis, mean_last, mean_to_batch, same_shape, Loss};
use crate::ir::{BinaryOp, Comparison, Graph, ReduceOp, Value};
use crate::Result;

/// Targets of 0/1 mapped to -1/1 when every target in the batch is 0 or 1 (as Keras does),
/// else left as they are.
fn hinge_labels(g: &mut Graph, y: Value) -> Result<Value> {
    let zero = g.zeros_like(y)?;
    let one = g.full_like(1.0, y)?;
    let is0 = g.compare(Comparison::Eq, y, zero)?;
    let is1 = g.compare(Comparison::Eq, y, one)?;
    let bin = g.binary(BinaryOp::Or, is0, is1)?;
    let binf = g.convert(bin, g.ty(y).dtype)?;
    let all_axes: Vec<usize> = (0..g.ty(binf).rank()).collect();
    let all = g.reduce(ReduceOp::Min, binf, &all_axes)?;
    let half = g.full_like(0.5, all)?;
    let all_binary = g.compare(Comparison::Gt, all, half)?;
    let all_binary = if g.ty(y).rank() == 0 {
        all_binary
    } else {
        g.broadcast_in_dim(all_binary, g.ty(y).shape.clone(), &[])?
    };
    let two_y = g.mul_scalar(y, 2.0)?;
    let mapped = g.add_scalar(two_y, -1.0)?;
    g.select(all_binary, mapped, y)
}

/// `max(1 - y·p, 0)` elementwise, with targets mapped by [`hinge_labels`].
fn margin(g: &mut Graph, y: Value, p: Value) -> Result<Value> {
    let y = hinge_labels(g, y)?;
    let yp = g.mul(y, p)?;
    let one = g.full_like(1.0, yp)?;
    let m = g.sub(one, yp)?;
    let zero = g.zeros_like(m)?;
    g.max(m, zero)
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
        same_shape(self.name(), &g.ty(y).clone(), &g.ty(p).clone())?;
        let h = margin(g, y, p)?;
        mean_last(g, h)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
}

/// `mean(max(1 - y·p, 0)²)` over the last axis, targets mapped as for [`Hinge`].
#[derive(Clone, Debug, Default)]
pub struct SquaredHinge;

impl Loss for SquaredHinge {
    fn name(&self) -> &'static str {
        "squared_hinge"
    }
    fn per_sample(&self, g: &mut Graph, y: Value, p: Value, _l: Option<Value>) -> Result<Value> {
        same_shape(self.name(), &g.ty(y).clone(), &g.ty(p).clone())?;
        let h = margin(g, y, p)?;
        let h2 = g.mul(h, h)?;
        mean_last(g, h2)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
}

/// `max(neg - pos + 1, 0)` with `pos = Σ y·p` and `neg = max((1 - y)·p)` over the last
/// axis: the margin of the true class over the best wrong one (one-hot targets).
#[derive(Clone, Debug, Default)]
pub struct CategoricalHinge;

impl Loss for CategoricalHinge {
    fn name(&self) -> &'static str {
        "categorical_hinge"
    }
    fn per_sample(&self, g: &mut Graph, y: Value, p: Value, _l: Option<Value>) -> Result<Value> {
        same_shape(self.name(), &g.ty(y).clone(), &g.ty(p).clone())?;
        let last = last_axis(g, self.name(), p)?;
        let yp = g.mul(y, p)?;
        let pos = g.sum(yp, &[last])?;
        let one = g.full_like(1.0, y)?;
        let ny = g.sub(one, y)?;
        let nyp = g.mul(ny, p)?;
        let neg = g.reduce(ReduceOp::Max, nyp, &[last])?;
        let d = g.sub(neg, pos)?;
        let d1 = g.add_scalar(d, 1.0)?;
        let zero = g.zeros_like(d1)?;
        let v = g.max(d1, zero)?;
        mean_to_batch(g, v)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
}
