//! Keras' `gradient_accumulation_steps`: each step adds its gradients to a per-parameter
//! accumulator; every `n`-th step (by the iteration count, which advances on every step)
//! the optimizer updates with the mean of the `n` gradients, and the accumulators restart
//! from zero. As in Keras 3, the mean is what gets clipped, weight decay and the update
//! apply on those steps only, and schedules and bias corrections see the iteration count
//! of every step.

use super::OptimizerConfig;
use crate::ir::{Graph, Value};
use crate::Result;

/// The accumulator slot's name (in checkpoints: `optimizer/accumulated_gradient/<parameter>`).
pub const ACCUMULATOR_SLOT: &str = "accumulated_gradient";

/// One step's part in gradient accumulation.
pub struct Accumulated {
    /// Whether this step updates (bool scalar).
    pub due: Value,
    /// The gradients the update uses: the mean of the accumulated ones and this step's.
    pub means: Vec<Value>,
    /// The accumulators' new values (zero after an update).
    pub kept: Vec<Value>,
}

/// With accumulation configured, emits this step's [`Accumulated`] (`iterations`: the i32
/// count of steps before it); `None` without accumulation.
pub fn accumulate_gradients(
    g: &mut Graph,
    c: &OptimizerConfig,
    iterations: Value,
    grads: &[Value],
    accumulators: &[Value],
) -> Result<Option<Accumulated>> {
    let Some(n) = c.gradient_accumulation_steps else {
        return Ok(None);
    };
    let due = super::every_nth_step(g, iterations, n)?;
    let mut means = Vec::with_capacity(grads.len());
    let mut kept = Vec::with_capacity(grads.len());
    for (&grad, &acc) in grads.iter().zip(accumulators) {
        let sum = g.add(grad, acc)?;
        let zeros = g.zeros_like(sum)?;
        kept.push(g.select(due, zeros, sum)?);
        means.push(g.binary_scalar(crate::ir::BinaryOp::Div, sum, n as f64)?);
    }
    Ok(Some(Accumulated { due, means, kept }))
}
