//! Optimizers. Each emits its update as IR inside the train step, so parameters and
//! optimizer state stay in backend buffers and update in place.
//!
//! The order of one step follows Keras 3: clip the gradients (`clipvalue`, `clipnorm`,
//! `global_clipnorm`), apply decoupled weight decay (`w -= w · wd · lr`), then the
//! optimizer's own rule, then (with `use_ema`) the moving average of the weights; the
//! iteration count then advances.

mod accumulate;
mod adadelta;
mod adafactor;
mod adagrad;
mod adam;
mod ema;
mod ftrl;
#[cfg(test)]
mod fused_adam_tests;
mod lamb;
mod lion;
mod rmsprop;
pub mod schedule;
mod sgd;

pub use accumulate::{accumulate_gradients, Accumulated, ACCUMULATOR_SLOT};
pub use adadelta::Adadelta;
pub use adafactor::Adafactor;
pub use adagrad::Adagrad;
pub use adam::{Adam, AdamW, Adamax, Nadam};
pub use ema::{apply_ema, state_slots, EMA_SLOT};
pub use ftrl::Ftrl;
pub use lamb::Lamb;
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
    /// Keep an exponential moving average of the trainable weights (Keras' `use_ema`).
    pub use_ema: bool,
    /// The average's momentum: `avg = μ·avg + (1 - μ)·w` (Keras' default 0.99).
    pub ema_momentum: f32,
    /// Every this many steps, overwrite the weights with their moving average.
    pub ema_overwrite_frequency: Option<usize>,
    /// Apply the update every this many steps, with the mean of their gradients (Keras'
    /// `gradient_accumulation_steps`, at least 2); the steps between only add their
    /// gradients to an accumulator.
    pub gradient_accumulation_steps: Option<usize>,
}

impl OptimizerConfig {
    pub fn new(learning_rate: f32) -> OptimizerConfig {
        OptimizerConfig {
            learning_rate: LearningRate::Constant(learning_rate),
            weight_decay: None,
            clipnorm: None,
            clipvalue: None,
            global_clipnorm: None,
            use_ema: false,
            ema_momentum: 0.99,
            ema_overwrite_frequency: None,
            gradient_accumulation_steps: None,
        }
    }

    /// Rejects settings Keras rejects: negative or non-finite values, `clipnorm`
    /// together with `global_clipnorm`, an EMA momentum outside `[0, 1]`, an overwrite
    /// frequency of 0. An overwrite frequency without `use_ema`, which Keras ignores, is
    /// rejected too: it can only be a mistake.
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
        if self.use_ema && !(0.0..=1.0).contains(&self.ema_momentum) {
            return Err(Error::invalid(
                optimizer,
                format!("ema_momentum must be in [0, 1], got {}", self.ema_momentum),
            ));
        }
        match self.ema_overwrite_frequency {
            Some(0) => {
                return Err(Error::invalid(
                    optimizer,
                    "ema_overwrite_frequency must be >= 1, got 0",
                ))
            }
            Some(n) if !self.use_ema => {
                return Err(Error::invalid(
                    optimizer,
                    format!(
                        "ema_overwrite_frequency {n} is set but use_ema is off; \
                         expected with_ema(momentum) as well"
                    ),
                ))
            }
            _ => {}
        }
        if let Some(n) = self.gradient_accumulation_steps {
            if n < 2 {
                return Err(Error::invalid(
                    optimizer,
                    format!("gradient_accumulation_steps must be >= 2, got {n}"),
                ));
            }
        }
        self.learning_rate.validate(optimizer)
    }
}

/// One per-parameter state tensor of an optimizer: its name (in checkpoints), initial
/// value, and shape as a function of its parameter's shape.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    pub name: &'static str,
    pub init: f32,
    pub shape: fn(&[usize]) -> Vec<usize>,
}

impl Slot {
    /// A slot of its parameter's shape (most optimizers' only kind).
    pub fn new(name: &'static str, init: f32) -> Slot {
        Slot {
            name,
            init,
            shape: <[usize]>::to_vec,
        }
    }

    /// A slot whose shape `shape` derives from the parameter's (Adafactor's factored
    /// second moments).
    pub fn shaped(name: &'static str, init: f32, shape: fn(&[usize]) -> Vec<usize>) -> Slot {
        Slot { name, init, shape }
    }

    /// This slot's dimensions for a parameter of dimensions `param`.
    pub fn dims(&self, param: &[usize]) -> Vec<usize> {
        (self.shape)(param)
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
    /// The predicate under which this step changes the state (bool scalar; none: always).
    /// The train step's checks (finite loss, gradients and learning rate; with gradient
    /// accumulation, whether this step updates) are known before the update runs.
    pub guard: Option<Value>,
}

impl Step {
    /// `new` as this step commits it: `select(guard, new, old)`. The train step settles
    /// every piece of state this way; an update whose rule reads a new slot (Adam's weight
    /// reads m and v) should read it settled, so that the slot is computed once and the
    /// rule reads it where it is written. Read raw, a compiler fusing elementwise work
    /// (XLA) recomputes the slot inside the weight's update from the old slot, which the
    /// slot's own in-place update then has to copy aside first, every step. Settling
    /// twice gives the same value.
    pub fn settle(&self, g: &mut Graph, new: Value, old: Value) -> Result<Value> {
        settle(g, self.guard, new, old)
    }
}

/// [`Step::settle`] for state the update does not own (globals, the weights themselves).
pub(crate) fn settle(g: &mut Graph, guard: Option<Value>, new: Value, old: Value) -> Result<Value> {
    let Some(guard) = guard else {
        return Ok(new);
    };
    if new == old || is_settled(g, guard, new, old) {
        return Ok(new);
    }
    g.select(guard, new, old)
}

/// Whether `v` already is `select(guard, _, old)`.
pub(crate) fn is_settled(g: &Graph, guard: Value, v: Value, old: Value) -> bool {
    matches!(
        g.node(v).op,
        crate::ir::Op::Select { pred, on_false, .. } if pred == guard && on_false == old
    )
}

/// An optimizer's rule.
pub trait Optimizer: Send + Sync + fmt::Debug {
    /// The Keras name, e.g. `adam`.
    fn name(&self) -> &'static str;
    fn config(&self) -> &OptimizerConfig;
    fn config_mut(&mut self) -> &mut OptimizerConfig;
    /// Per-parameter state (e.g. Adam's `m`, `v`). The EMA of the weights, when
    /// configured, is not among these: see [`state_slots`].
    fn slots(&self) -> Vec<Slot>;
    /// Optimizer-wide scalar state and initial values (e.g. Nadam's momentum product).
    fn globals(&self) -> Vec<(&'static str, f32)> {
        Vec::new()
    }
    /// Emits the new global state, before any parameter update reads it.
    fn update_globals(&self, _g: &mut Graph, _t: Value, globals: &[Value]) -> Result<Vec<Value>> {
        Ok(globals.to_vec())
    }
    /// Emits one parameter's update: the new parameter and new slot values. `slots` are
    /// this optimizer's [`slots`](Optimizer::slots), in order and of their declared shapes.
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
    /// Keras' `use_ema=True, ema_momentum=momentum` (Keras' default momentum is 0.99).
    fn with_ema(mut self, momentum: f32) -> Self {
        let c = self.config_mut();
        c.use_ema = true;
        c.ema_momentum = momentum;
        self
    }
    /// Keras' `ema_overwrite_frequency`: every `n` steps the weights take their average.
    fn with_ema_overwrite_frequency(mut self, n: usize) -> Self {
        self.config_mut().ema_overwrite_frequency = Some(n);
        self
    }
    /// Keras' `gradient_accumulation_steps`: the update is applied every `n` steps (n >= 2)
    /// with the mean of their gradients (see [`accumulate_gradients`]).
    fn with_gradient_accumulation_steps(mut self, n: usize) -> Self {
        self.config_mut().gradient_accumulation_steps = Some(n);
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

/// Emits whether the step counted `iterations + 1` (`iterations`: the i32 count of steps
/// before it) is a multiple of `n`, in integers (exact at any step count).
pub(crate) fn every_nth_step(g: &mut Graph, iterations: Value, n: usize) -> Result<Value> {
    let next = g.add_scalar(iterations, 1.0)?;
    let q = g.binary_scalar(crate::ir::BinaryOp::Div, next, n as f64)?;
    let qn = g.mul_scalar(q, n as f64)?;
    let r = g.sub(next, qn)?;
    let zero = g.scalar(0.0, DType::I32);
    g.compare(crate::ir::Comparison::Eq, r, zero)
}

/// Emits `1 - β^t` for a constant β and the step `t`.
pub(crate) fn one_minus_pow(g: &mut Graph, beta: f32, t: Value) -> Result<Value> {
    let b = g.scalar(beta as f64, DType::F32);
    let p = g.pow(b, t)?;
    let one = g.scalar(1.0, DType::F32);
    g.sub(one, p)
}

/// `1 - β` as Keras computes it: in double precision from the number the user wrote (a
/// Python float), then rounded once to f32. The f32 field holds the nearest f32 to that
/// number, whose shortest decimal form is the number itself; `1 - β` in f32 instead would
/// be off by β's rounding (for β₂ = 0.999: 0.00099998713 against 0.001, a relative
/// 1.3e-5 that Adam's second moment carries into every step).
pub(crate) fn one_minus(beta: f32) -> f64 {
    1.0 - beta.to_string().parse::<f64>().unwrap_or(beta as f64)
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

/// Checks a finite constant that must not be negative.
pub(crate) fn check_non_negative(optimizer: &str, what: &str, v: f32) -> Result<()> {
    if !(v.is_finite() && v >= 0.0) {
        return Err(Error::invalid(
            optimizer,
            format!("{what} must be finite and >= 0, got {v}"),
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
