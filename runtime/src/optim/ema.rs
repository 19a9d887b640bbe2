//! Keras' `use_ema`: a moving average of every trainable weight, kept as one more
//! per-parameter slot and updated in the step graph after the optimizer's own update;
//! with `ema_overwrite_frequency`, the weights periodically take their average.

use super::{Optimizer, OptimizerConfig, Slot};
use crate::ir::{Comparison, DType, Graph, Value};
use crate::Result;

/// The EMA slot's name (in checkpoints: `optimizer/average/<parameter>`), Keras' own.
pub const EMA_SLOT: &str = "average";

/// Every per-parameter state tensor the train step keeps for `opt`: the optimizer's own
/// slots, then the gradient accumulator when `gradient_accumulation_steps` is set, then
/// the weights' moving average when `use_ema` is set (always last; the optimizer's update
/// sees exactly its declared slots).
pub fn state_slots(opt: &dyn Optimizer) -> Vec<Slot> {
    let mut s = opt.slots();
    if opt.config().gradient_accumulation_steps.is_some() {
        s.push(Slot::new(super::ACCUMULATOR_SLOT, 0.0));
    }
    if opt.config().use_ema {
        s.push(Slot::new(EMA_SLOT, 0.0));
    }
    s
}

/// Emits the moving-average update of one weight after its optimizer update, as Keras:
/// `avg = μ·avg + (1 - μ)·w` with `μ = 0` on the first step (so the average starts as the
/// weight itself), then, with an overwrite frequency `n`, `w = avg` on every step whose
/// count `iterations + 1` is a multiple of `n`. `iterations` is the (i32) count of steps
/// before this one; `w` the updated weight. Returns the weight and the new average.
pub fn apply_ema(
    g: &mut Graph,
    c: &OptimizerConfig,
    iterations: Value,
    w: Value,
    average: Value,
) -> Result<(Value, Value)> {
    let zero = g.scalar(0.0, DType::I32);
    let first = g.compare(Comparison::Eq, iterations, zero)?;
    let mu = g.scalar(c.ema_momentum as f64, DType::F32);
    let none = g.scalar(0.0, DType::F32);
    let mu = g.select(first, none, mu)?;
    let one = g.scalar(1.0, DType::F32);
    let keep_w = g.sub(one, mu)?;
    let a = g.mul(mu, average)?;
    let b = g.mul(keep_w, w)?;
    let avg = g.add(a, b)?;
    let w = match c.ema_overwrite_frequency {
        Some(n) => {
            let due = super::every_nth_step(g, iterations, n)?;
            g.select(due, avg, w)?
        }
        None => w,
    };
    Ok((w, avg))
}
