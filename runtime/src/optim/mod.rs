//! Optimizers. Each emits its update as IR inside the train step, so parameters and
//! optimizer state stay in backend buffers and update in place.
//!
//! The order of one step follows Keras 3: clip the gradients (`clipvalue`, `clipnorm`,
//! `global_clipnorm`), apply decoupled weight decay (`w -= w · wd · lr`), then the
//! optimizer's own rule; the iteration count then advances.

mod adagrad;
mod adam;
#[cfg(test)]
mod fused_adam_tests;
mod lion;
mod rmsprop;
pub mod schedule;
mod sgd;

pub use adagrad::Adagrad;
pub use adam::{Adam, AdamW, Adamax, Nadam};
pub use lion::Lion;
pub use rmsprop::RMSprop;
pub use schedule::{LearningRate, Schedule};
pub use sgd::SGD;

use crate::ir::{DType, Graph, Value};
use crate::{Error, Result};
use std::fmt;

/// Settings every optimizer has.
#[derive(Clone, Debug)]
pub struct OptimizerConfig {
    pub learning_rate: LearningRate,
    /// Decoupled weight decay coefficient.
    pub weight_decay: Option<f32>,
    /// Clip each gradient to this L2 norm.
    pub clipnorm: Option<f32>,
    /// Clip each gradient element to `[-clipvalue, clipvalue]`.
    pub clipvalue: Option<f32>,
    /// Clip all gradients together to this global L2 norm.
    pub global_clipnorm: Option<f32>,
}

impl OptimizerConfig {
    pub fn new(learning_rate: f32) -> OptimizerConfig {
        OptimizerConfig {
            learning_rate: LearningRate::Constant(learning_rate),
            weight_decay: None,
            clipnorm: None,
            clipvalue: None,
            global_clipnorm: None,
        }
    }

    /// Rejects settings Keras rejects: negative or non-finite values, and `clipnorm`
    /// together with `global_clipnorm`.
    pub fn validate(&self, optimizer: &str) -> Result<()> {
        let bad = |what: &str, v: f32| {
            Err(Error::invalid(
                optimizer,
                format!("{what} must be finite and >= 0, got {v}"),
            ))
        };
        for (what, v) in [
            ("weight_decay", self.weight_decay),
            ("clipnorm", self.clipnorm),
            ("clipvalue", self.clipvalue),
            ("global_clipnorm", self.global_clipnorm),
        ] {
            if let Some(v) = v {
                if !v.is_finite() || v < 0.0 {
                    return bad(what, v);
                }
            }
        }
        if self.clipnorm.is_some() && self.global_clipnorm.is_some() {
            return Err(Error::invalid(
                optimizer,
                "set clipnorm or global_clipnorm, not both",
            ));
        }
        self.learning_rate.validate(optimizer)
    }
}

/// What an optimizer's update may read besides the parameter, gradient and slots.
pub struct Step {
    /// The learning rate for this step (f32 scalar).
    pub lr: Value,
    /// The 1-based step number `iterations + 1` (f32 scalar).
    pub t: Value,
    /// The optimizer's global state after [`Optimizer::update_globals`].
    pub globals: Vec<Value>,
}

/// An optimizer's rule.
pub trait Optimizer: Send + Sync + fmt::Debug {
    /// The Keras name, e.g. `adam`.
    fn name(&self) -> &'static str;
    fn config(&self) -> &OptimizerConfig;
    fn config_mut(&mut self) -> &mut OptimizerConfig;
    /// Per-parameter state: names and initial fill values (e.g. Adam's `m`, `v`).
    fn slots(&self) -> Vec<(&'static str, f32)>;
    /// Optimizer-wide scalar state and initial values (e.g. Nadam's momentum product).
    fn globals(&self) -> Vec<(&'static str, f32)> {
        Vec::new()
    }
    /// Emits the new global state, before any parameter update reads it.
    fn update_globals(&self, _g: &mut Graph, _t: Value, globals: &[Value]) -> Result<Vec<Value>> {
        Ok(globals.to_vec())
    }
    /// Emits one parameter's update: the new parameter and new slot values.
    fn update(
        &self,
        g: &mut Graph,
        s: &Step,
        w: Value,
        grad: Value,
        slots: &[Value],
    ) -> Result<(Value, Vec<Value>)>;
    /// Checks the optimizer's own hyper-parameters (the shared ones are checked by
    /// [`OptimizerConfig::validate`]).
    fn validate(&self) -> Result<()> {
        Ok(())
    }
    /// A boxed copy.
    fn clone_box(&self) -> Box<dyn Optimizer>;
}

/// The shared settings as builder methods, for every optimizer.
pub trait OptimizerExt: Optimizer + Sized {
    fn with_learning_rate(mut self, lr: impl Into<LearningRate>) -> Self {
        self.config_mut().learning_rate = lr.into();
        self
    }
    fn with_weight_decay(mut self, wd: f32) -> Self {
        self.config_mut().weight_decay = Some(wd);
        self
    }
    fn with_clipnorm(mut self, c: f32) -> Self {
        self.config_mut().clipnorm = Some(c);
        self
    }
    fn with_clipvalue(mut self, c: f32) -> Self {
        self.config_mut().clipvalue = Some(c);
        self
    }
    fn with_global_clipnorm(mut self, c: f32) -> Self {
        self.config_mut().global_clipnorm = Some(c);
        self
    }
}

impl<T: Optimizer + Sized> OptimizerExt for T {}

/// `sqrt(Σ g²)` over one tensor (f32 scalar).
fn l2_norm(g: &mut Graph, x: Value) -> Result<Value> {
    let sq = g.mul(x, x)?;
    let s = g.sum_all(sq)?;
    g.sqrt(s)
}

/// Applies the configured clipping to all gradients (emitted as IR).
pub fn clip_gradients(g: &mut Graph, c: &OptimizerConfig, grads: &[Value]) -> Result<Vec<Value>> {
    let mut out = grads.to_vec();
    if let Some(v) = c.clipvalue {
        for x in &mut out {
            let hi = g.full_like(v as f64, *x)?;
            let lo = g.full_like(-v as f64, *x)?;
            let m = g.min(*x, hi)?;
            *x = g.max(m, lo)?;
        }
    }
    if let Some(n) = c.clipnorm {
        for x in &mut out {
            let norm = l2_norm(g, *x)?;
            *x = scale_to_norm(g, *x, norm, n)?;
        }
    }
    if let Some(n) = c.global_clipnorm {
        let mut total = g.scalar(0.0, DType::F32);
        for x in &out {
            let sq = g.mul(*x, *x)?;
            let s = g.sum_all(sq)?;
            total = g.add(total, s)?;
        }
        let norm = g.sqrt(total)?;
        for x in &mut out {
            *x = scale_to_norm(g, *x, norm, n)?;
        }
    }
    Ok(out)
}

/// `x · limit / max(norm, limit)`: unchanged inside the ball, scaled onto it outside.
fn scale_to_norm(g: &mut Graph, x: Value, norm: Value, limit: f32) -> Result<Value> {
    let l = g.scalar(limit as f64, DType::F32);
    let d = g.max(norm, l)?;
    let f = g.div(l, d)?;
    g.mul(x, f)
}

/// Decoupled weight decay `w - w · wd · lr` when configured (emitted as IR).
pub fn apply_weight_decay(
    g: &mut Graph,
    c: &OptimizerConfig,
    w: Value,
    lr: Value,
) -> Result<Value> {
    match c.weight_decay {
        Some(wd) if wd != 0.0 => {
            let k = g.mul_scalar(lr, wd as f64)?;
            let d = g.mul(w, k)?;
            g.sub(w, d)
        }
        _ => Ok(w),
    }
}

/// Emits `1 - β^t` for a constant β and the step `t`.
pub(crate) fn one_minus_pow(g: &mut Graph, beta: f32, t: Value) -> Result<Value> {
    let b = g.scalar(beta as f64, DType::F32);
    let p = g.pow(b, t)?;
    let one = g.scalar(1.0, DType::F32);
    g.sub(one, p)
}

/// Checks that a decay rate lies in `[0, 1)`.
pub(crate) fn check_rate(optimizer: &str, what: &str, v: f32) -> Result<()> {
    if !(0.0..1.0).contains(&v) {
        return Err(Error::invalid(
            optimizer,
            format!("{what} must be in [0, 1), got {v}"),
        ));
    }
    Ok(())
}

/// Checks a positive finite constant such as epsilon.
pub(crate) fn check_positive(optimizer: &str, what: &str, v: f32) -> Result<()> {
    if !(v.is_finite() && v > 0.0) {
        return Err(Error::invalid(
            optimizer,
            format!("{what} must be finite and > 0, got {v}"),
        ));
    }
    Ok(())
}
