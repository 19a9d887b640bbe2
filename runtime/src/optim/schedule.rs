//! Learning-rate schedules (Keras' definitions), evaluated on the host each step and fed to
//! the train step as a scalar, so a schedule never forces a recompile.

use crate::{Error, Result};
use std::fmt;
use std::sync::Arc;

/// A learning rate as a function of the optimizer's iteration count (0 before the first
/// update).
pub trait Schedule: Send + Sync + fmt::Debug {
    fn lr(&self, step: u64) -> f32;
    fn validate(&self) -> Result<()> {
        Ok(())
    }
}

/// A constant or a schedule.
#[derive(Clone, Debug)]
pub enum LearningRate {
    Constant(f32),
    Schedule(Arc<dyn Schedule>),
}

impl LearningRate {
    pub fn at(&self, step: u64) -> f32 {
        match self {
            LearningRate::Constant(v) => *v,
            LearningRate::Schedule(s) => s.lr(step),
        }
    }

    pub(crate) fn validate(&self, optimizer: &str) -> Result<()> {
        match self {
            LearningRate::Constant(v) if !(v.is_finite() && *v >= 0.0) => Err(Error::invalid(
                optimizer,
                format!("learning_rate must be finite and >= 0, got {v}"),
            )),
            LearningRate::Constant(_) => Ok(()),
            LearningRate::Schedule(s) => s.validate(),
        }
    }
}

impl From<f32> for LearningRate {
    fn from(v: f32) -> Self {
        LearningRate::Constant(v)
    }
}

impl<S: Schedule + 'static> From<S> for LearningRate {
    fn from(s: S) -> Self {
        LearningRate::Schedule(Arc::new(s))
    }
}

fn positive(what: &str, v: f64) -> Result<()> {
    if !(v.is_finite() && v > 0.0) {
        return Err(Error::invalid(
            "schedule",
            format!("{what} must be finite and > 0, got {v}"),
        ));
    }
    Ok(())
}

/// `initial · rate^(step / decay_steps)`, the exponent floored when `staircase`.
#[derive(Clone, Debug)]
pub struct ExponentialDecay {
    pub initial: f32,
    pub decay_steps: u64,
    pub decay_rate: f32,
    pub staircase: bool,
}

impl Schedule for ExponentialDecay {
    fn lr(&self, step: u64) -> f32 {
        let mut p = step as f64 / self.decay_steps as f64;
        if self.staircase {
            p = p.floor();
        }
        (self.initial as f64 * (self.decay_rate as f64).powf(p)) as f32
    }
    fn validate(&self) -> Result<()> {
        positive("decay_steps", self.decay_steps as f64)?;
        positive("decay_rate", self.decay_rate as f64)
    }
}

/// Linear warm-up from `initial` to `warmup_target` over `warmup_steps`, then cosine decay
/// to `alpha · peak` over `decay_steps`.
#[derive(Clone, Debug)]
pub struct CosineDecay {
    pub initial: f32,
    pub decay_steps: u64,
    pub alpha: f32,
    pub warmup_target: Option<f32>,
    pub warmup_steps: u64,
}

impl CosineDecay {
    pub fn new(initial: f32, decay_steps: u64) -> CosineDecay {
        CosineDecay {
            initial,
            decay_steps,
            alpha: 0.0,
            warmup_target: None,
            warmup_steps: 0,
        }
    }

    pub fn with_warmup(mut self, target: f32, steps: u64) -> CosineDecay {
        self.warmup_target = Some(target);
        self.warmup_steps = steps;
        self
    }
}

impl Schedule for CosineDecay {
    fn lr(&self, step: u64) -> f32 {
        let peak = self.warmup_target.unwrap_or(self.initial) as f64;
        if step < self.warmup_steps {
            let f = step as f64 / self.warmup_steps as f64;
            return (self.initial as f64 + (peak - self.initial as f64) * f) as f32;
        }
        let s = (step - self.warmup_steps).min(self.decay_steps) as f64;
        let cos = 0.5 * (1.0 + (std::f64::consts::PI * s / self.decay_steps as f64).cos());
        let decayed = (1.0 - self.alpha as f64) * cos + self.alpha as f64;
        (peak * decayed) as f32
    }
    fn validate(&self) -> Result<()> {
        positive("decay_steps", self.decay_steps as f64)
    }
}

/// `values[i]` while `step <= boundaries[i]` (the last value after the last boundary).
#[derive(Clone, Debug)]
pub struct PiecewiseConstantDecay {
    pub boundaries: Vec<u64>,
    pub values: Vec<f32>,
}

impl Schedule for PiecewiseConstantDecay {
    fn lr(&self, step: u64) -> f32 {
        let i = self
            .boundaries
            .iter()
            .position(|&b| step <= b)
            .unwrap_or(self.boundaries.len());
        self.values.get(i).copied().unwrap_or(0.0)
    }
    fn validate(&self) -> Result<()> {
        if self.values.len() != self.boundaries.len() + 1 {
            return Err(Error::invalid(
                "PiecewiseConstantDecay",
                format!(
                    "needs one more value than boundaries, got {} values for {} boundaries",
                    self.values.len(),
                    self.boundaries.len()
                ),
            ));
        }
        if self.boundaries.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Error::invalid(
                "PiecewiseConstantDecay",
                "boundaries must increase",
            ));
        }
        Ok(())
    }
}

/// `(initial - end) · (1 - step / decay_steps)^power + end`; with `cycle`, the horizon
/// grows to the next multiple of `decay_steps` instead of stopping.
#[derive(Clone, Debug)]
pub struct PolynomialDecay {
    pub initial: f32,
    pub decay_steps: u64,
    pub end: f32,
    pub power: f32,
    pub cycle: bool,
}

impl Schedule for PolynomialDecay {
    fn lr(&self, step: u64) -> f32 {
        let mut horizon = self.decay_steps as f64;
        let mut s = step as f64;
        if self.cycle {
            let k = if step == 0 { 1.0 } else { (s / horizon).ceil() };
            horizon *= k;
        } else {
            s = s.min(horizon);
        }
        let frac = 1.0 - s / horizon;
        ((self.initial - self.end) as f64 * frac.powf(self.power as f64) + self.end as f64) as f32
    }
    fn validate(&self) -> Result<()> {
        positive("decay_steps", self.decay_steps as f64)
    }
}
