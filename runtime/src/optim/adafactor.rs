//! Adafactor (Shazeer & Stern 2018) as Keras 3. Parameters of rank ≥ 2 keep the second
//! moment factored over their last two axes: a row statistic `r` (the last axis
//! averaged away) and a column statistic `c` (the second-to-last averaged away), from
//! which `v = (r / mean(r)) ⊗ c`; smaller parameters keep `v` whole (their `r` and `c`
//! are unused scalars, as Keras keeps placeholders). With `t` the step:
//! `β₂ₜ = 1 - t^beta_2_decay`, `ρₜ = min(lr, 1/√t)`, `αₜ = max(ε₂, rms(w))·ρₜ`,
//! `u = g/√v` clipped to `u / max(1, rms(u)/clip_threshold)`, `w -= αₜ·u`, where the
//! statistics average `g² + ε₁`. Keras defaults: lr 1e-3, beta_2_decay -0.8, ε₁ 1e-30,
//! ε₂ 1e-3, clip_threshold 1, relative_step on.
//!
//! Keras 3 applies `min(lr, 1/√t)` whether or not `relative_step` is set (the flag only
//! repeats that same bound), so `relative_step` changes nothing here either; it is kept
//! for the name's sake.

use super::{check_non_negative, check_positive, Optimizer, OptimizerConfig, Slot, Step};
use crate::ir::{DType, Graph, Value};
use crate::{Error, Result};

#[derive(Clone, Debug)]
pub struct Adafactor {
    pub config: OptimizerConfig,
    pub beta_2_decay: f32,
    pub epsilon_1: f32,
    pub epsilon_2: f32,
    pub clip_threshold: f32,
    pub relative_step: bool,
}

impl Adafactor {
    pub fn new(learning_rate: f32) -> Adafactor {
        Adafactor {
            config: OptimizerConfig::new(learning_rate),
            beta_2_decay: -0.8,
            epsilon_1: 1e-30,
            epsilon_2: 1e-3,
            clip_threshold: 1.0,
            relative_step: true,
        }
    }

    pub fn beta_2_decay(mut self, v: f32) -> Adafactor {
        self.beta_2_decay = v;
        self
    }

    pub fn epsilons(mut self, epsilon_1: f32, epsilon_2: f32) -> Adafactor {
        self.epsilon_1 = epsilon_1;
        self.epsilon_2 = epsilon_2;
        self
    }

    pub fn clip_threshold(mut self, v: f32) -> Adafactor {
        self.clip_threshold = v;
        self
    }

    pub fn relative_step(mut self, on: bool) -> Adafactor {
        self.relative_step = on;
        self
    }
}

impl Default for Adafactor {
    fn default() -> Adafactor {
        Adafactor::new(1e-3)
    }
}

/// Whether a parameter of these dimensions keeps its second moment factored.
fn factored(dims: &[usize]) -> bool {
    dims.len() >= 2
}

/// `r`'s shape: the parameter's without its last axis (a scalar when not factored).
fn row_shape(dims: &[usize]) -> Vec<usize> {
    if factored(dims) {
        dims[..dims.len() - 1].to_vec()
    } else {
        Vec::new()
    }
}

/// `c`'s shape: the parameter's without its second-to-last axis (a scalar when not
/// factored).
fn col_shape(dims: &[usize]) -> Vec<usize> {
    if factored(dims) {
        let n = dims.len();
        let mut d = dims[..n - 2].to_vec();
        d.push(dims[n - 1]);
        d
    } else {
        Vec::new()
    }
}

/// `√(mean(x²))` (f32 scalar).
fn rms(g: &mut Graph, x: Value) -> Result<Value> {
    let sq = g.mul(x, x)?;
    let axes: Vec<usize> = (0..g.ty(x).rank()).collect();
    let m = g.mean(sq, &axes)?;
    g.sqrt(m)
}

/// `β·a + (1-β)·x` for a scalar value `β`.
fn decay(g: &mut Graph, beta: Value, a: Value, x: Value) -> Result<Value> {
    let one = g.scalar(1.0, DType::F32);
    let keep = g.sub(one, beta)?;
    let a = g.mul(beta, a)?;
    let x = g.mul(keep, x)?;
    g.add(a, x)
}

/// `x` with a unit axis inserted at `axis`.
fn expand(g: &mut Graph, x: Value, axis: usize) -> Result<Value> {
    let mut d = g.ty(x).dims().to_vec();
    d.insert(axis, 1);
    g.reshape(x, d)
}

impl Optimizer for Adafactor {
    fn name(&self) -> &'static str {
        "adafactor"
    }
    fn config(&self) -> &OptimizerConfig {
        &self.config
    }
    fn config_mut(&mut self) -> &mut OptimizerConfig {
        &mut self.config
    }
    fn slots(&self) -> Vec<Slot> {
        vec![
            Slot::shaped("r", 0.0, row_shape),
            Slot::shaped("c", 0.0, col_shape),
            Slot::new("v", 0.0),
        ]
    }
    fn validate(&self) -> Result<()> {
        if !(self.beta_2_decay.is_finite() && self.beta_2_decay <= 0.0) {
            return Err(Error::invalid(
                "adafactor",
                format!(
                    "beta_2_decay must be finite and <= 0 (the second moment's decay \
                     1 - t^beta_2_decay must stay in [0, 1)), got {}",
                    self.beta_2_decay
                ),
            ));
        }
        check_non_negative("adafactor", "epsilon_1", self.epsilon_1)?;
        check_non_negative("adafactor", "epsilon_2", self.epsilon_2)?;
        check_positive("adafactor", "clip_threshold", self.clip_threshold)
    }
    fn update(
        &self,
        g: &mut Graph,
        s: &Step,
        w: Value,
        grad: Value,
        slots: &[Value],
    ) -> Result<(Value, Vec<Value>)> {
        let (r, c, v) = (slots[0], slots[1], slots[2]);
        let one = g.scalar(1.0, DType::F32);
        let sqrt_t = g.sqrt(s.t)?;
        let inv_sqrt_t = g.div(one, sqrt_t)?;
        let mut lr = s.lr;
        if self.relative_step {
            lr = g.min(lr, inv_sqrt_t)?;
        }
        let rho_t = g.min(lr, inv_sqrt_t)?;
        let eps2 = g.scalar(self.epsilon_2 as f64, DType::F32);
        let w_rms = rms(g, w)?;
        let alpha = g.max(eps2, w_rms)?;
        let alpha = g.mul(alpha, rho_t)?;
        let g2 = g.mul(grad, grad)?;
        let reg = g.add_scalar(g2, self.epsilon_1 as f64)?;
        let decay_exp = g.scalar(self.beta_2_decay as f64, DType::F32);
        let tp = g.pow(s.t, decay_exp)?;
        let beta = g.sub(one, tp)?;
        let dims = g.ty(w).dims().to_vec();
        let (r, c, v) = if factored(&dims) {
            let n = dims.len();
            let row_mean = g.mean(reg, &[n - 1])?;
            let r = decay(g, beta, r, row_mean)?;
            let col_mean = g.mean(reg, &[n - 2])?;
            let c = decay(g, beta, c, col_mean)?;
            let r_mean = g.mean(r, &[n - 2])?;
            let r_mean = expand(g, r_mean, n - 2)?;
            let r_rel = g.div(r, r_mean)?;
            let r_rel = expand(g, r_rel, n - 1)?;
            let c_row = expand(g, c, n - 2)?;
            let v = g.mul(r_rel, c_row)?;
            (r, c, v)
        } else {
            (r, c, decay(g, beta, v, reg)?)
        };
        let sv = g.sqrt(v)?;
        let u = g.div(grad, sv)?;
        let u_rms = rms(g, u)?;
        let clip = g.scalar(self.clip_threshold as f64, DType::F32);
        let u_rms = g.div(u_rms, clip)?;
        let den = g.max(one, u_rms)?;
        let u = g.div(u, den)?;
        let step = g.mul(alpha, u)?;
        Ok((g.sub(w, step)?, vec![r, c, v]))
    }
    fn clone_box(&self) -> Box<dyn Optimizer> {
        Box::new(self.clone())
    }
}
