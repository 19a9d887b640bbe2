//! Adam and its relatives (AdamW, Adamax, Nadam), as Keras 3 defines them.

use super::{
    check_positive, check_rate, one_minus, one_minus_pow, Optimizer, OptimizerConfig, Slot, Step,
};
use crate::ir::{DType, Graph, Value};
use crate::Result;

/// `m += (g - m)(1 - β₁)`, `v += (g² - v)(1 - β₂)`,
/// `w -= lr·√(1 - β₂ᵗ)/(1 - β₁ᵗ) · m / (√v + ε)` (with `amsgrad`, `v` is replaced by its
/// running maximum). Keras defaults: lr 1e-3, β 0.9 / 0.999, ε 1e-7.
#[derive(Clone, Debug)]
pub struct Adam {
    pub config: OptimizerConfig,
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
    pub amsgrad: bool,
}

impl Adam {
    pub fn new(learning_rate: f32) -> Adam {
        Adam {
            config: OptimizerConfig::new(learning_rate),
            beta_1: 0.9,
            beta_2: 0.999,
            epsilon: 1e-7,
            amsgrad: false,
        }
    }

    pub fn betas(mut self, beta_1: f32, beta_2: f32) -> Adam {
        self.beta_1 = beta_1;
        self.beta_2 = beta_2;
        self
    }

    pub fn epsilon(mut self, epsilon: f32) -> Adam {
        self.epsilon = epsilon;
        self
    }

    pub fn amsgrad(mut self, amsgrad: bool) -> Adam {
        self.amsgrad = amsgrad;
        self
    }
}

impl Default for Adam {
    fn default() -> Adam {
        Adam::new(1e-3)
    }
}

/// `m + (g - m)(1 - β)`: an exponential moving average step.
pub(super) fn ema(g: &mut Graph, m: Value, x: Value, beta: f32) -> Result<Value> {
    let d = g.sub(x, m)?;
    let d = g.mul_scalar(d, one_minus(beta))?;
    g.add(m, d)
}

fn check_betas(name: &str, b1: f32, b2: f32, eps: f32) -> Result<()> {
    check_rate(name, "beta_1", b1)?;
    check_rate(name, "beta_2", b2)?;
    check_positive(name, "epsilon", eps)
}

impl Optimizer for Adam {
    fn name(&self) -> &'static str {
        "adam"
    }
    fn config(&self) -> &OptimizerConfig {
        &self.config
    }
    fn config_mut(&mut self) -> &mut OptimizerConfig {
        &mut self.config
    }
    fn slots(&self) -> Vec<Slot> {
        let mut s = vec![Slot::new("m", 0.0), Slot::new("v", 0.0)];
        if self.amsgrad {
            s.push(Slot::new("v_hat", 0.0));
        }
        s
    }
    fn validate(&self) -> Result<()> {
        check_betas("adam", self.beta_1, self.beta_2, self.epsilon)
    }
    fn update(
        &self,
        g: &mut Graph,
        s: &Step,
        w: Value,
        grad: Value,
        slots: &[Value],
    ) -> Result<(Value, Vec<Value>)> {
        adam_update(
            g,
            s,
            w,
            grad,
            slots,
            self.beta_1,
            self.beta_2,
            self.epsilon,
            self.amsgrad,
        )
    }
    fn clone_box(&self) -> Box<dyn Optimizer> {
        Box::new(self.clone())
    }
}

#[allow(clippy::too_many_arguments)]
fn adam_update(
    g: &mut Graph,
    s: &Step,
    w: Value,
    grad: Value,
    slots: &[Value],
    b1: f32,
    b2: f32,
    eps: f32,
    amsgrad: bool,
) -> Result<(Value, Vec<Value>)> {
    // Scalar factor lr·√(1-β₂ᵗ)/(1-β₁ᵗ), computed once per parameter on scalars.
    let c1 = one_minus_pow(g, b1, s.t)?;
    let c2 = one_minus_pow(g, b2, s.t)?;
    let c2 = g.sqrt(c2)?;
    let f = g.div(c2, c1)?;
    let alpha = g.mul(s.lr, f)?;

    let m = ema(g, slots[0], grad, b1)?;
    let m = s.settle(g, m, slots[0])?;
    let g2 = g.mul(grad, grad)?;
    let v = ema(g, slots[1], g2, b2)?;
    let v = s.settle(g, v, slots[1])?;
    let mut new_slots = vec![m, v];
    let denom_v = if amsgrad {
        let vh = g.max(slots[2], v)?;
        let vh = s.settle(g, vh, slots[2])?;
        new_slots.push(vh);
        vh
    } else {
        v
    };
    let sq = g.sqrt(denom_v)?;
    let den = g.add_scalar(sq, eps as f64)?;
    let r = g.div(m, den)?;
    let r = g.mul(r, alpha)?;
    Ok((g.sub(w, r)?, new_slots))
}

/// Adam with decoupled weight decay on by default (Keras' AdamW: weight_decay 0.004).
#[derive(Clone, Debug)]
pub struct AdamW(pub Adam);

impl AdamW {
    pub fn new(learning_rate: f32) -> AdamW {
        let mut a = Adam::new(learning_rate);
        a.config.weight_decay = Some(0.004);
        AdamW(a)
    }
}

impl Default for AdamW {
    fn default() -> AdamW {
        AdamW::new(1e-3)
    }
}

impl Optimizer for AdamW {
    fn name(&self) -> &'static str {
        "adamw"
    }
    fn config(&self) -> &OptimizerConfig {
        &self.0.config
    }
    fn config_mut(&mut self) -> &mut OptimizerConfig {
        &mut self.0.config
    }
    fn slots(&self) -> Vec<Slot> {
        self.0.slots()
    }
    fn validate(&self) -> Result<()> {
        check_betas("adamw", self.0.beta_1, self.0.beta_2, self.0.epsilon)
    }
    fn update(
        &self,
        g: &mut Graph,
        s: &Step,
        w: Value,
        grad: Value,
        slots: &[Value],
    ) -> Result<(Value, Vec<Value>)> {
        self.0.update(g, s, w, grad, slots)
    }
    fn clone_box(&self) -> Box<dyn Optimizer> {
        Box::new(self.clone())
    }
}

/// Adam on the infinity norm: `u = max(β₂·u, |g|)`, `w -= lr/(1-β₁ᵗ) · m/(u + ε)`.
#[derive(Clone, Debug)]
pub struct Adamax {
    pub config: OptimizerConfig,
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
}

impl Adamax {
    pub fn new(learning_rate: f32) -> Adamax {
        Adamax {
            config: OptimizerConfig::new(learning_rate),
            beta_1: 0.9,
            beta_2: 0.999,
            epsilon: 1e-7,
        }
    }
}

impl Default for Adamax {
    fn default() -> Adamax {
        Adamax::new(1e-3)
    }
}

impl Optimizer for Adamax {
    fn name(&self) -> &'static str {
        "adamax"
    }
    fn config(&self) -> &OptimizerConfig {
        &self.config
    }
    fn config_mut(&mut self) -> &mut OptimizerConfig {
        &mut self.config
    }
    fn slots(&self) -> Vec<Slot> {
        vec![Slot::new("m", 0.0), Slot::new("u", 0.0)]
    }
    fn validate(&self) -> Result<()> {
        check_betas("adamax", self.beta_1, self.beta_2, self.epsilon)
    }
    fn update(
        &self,
        g: &mut Graph,
        s: &Step,
        w: Value,
        grad: Value,
        slots: &[Value],
    ) -> Result<(Value, Vec<Value>)> {
        let m = ema(g, slots[0], grad, self.beta_1)?;
        let m = s.settle(g, m, slots[0])?;
        let bu = g.mul_scalar(slots[1], self.beta_2 as f64)?;
        let ag = g.abs(grad)?;
        let u = g.max(bu, ag)?;
        let u = s.settle(g, u, slots[1])?;
        let c1 = one_minus_pow(g, self.beta_1, s.t)?;
        let ue = g.add_scalar(u, self.epsilon as f64)?;
        let den = g.mul(ue, c1)?;
        let r = g.div(m, den)?;
        let r = g.mul(r, s.lr)?;
        Ok((g.sub(w, r)?, vec![m, u]))
    }
    fn clone_box(&self) -> Box<dyn Optimizer> {
        Box::new(self.clone())
    }
}

/// Adam with Nesterov momentum (Dozat), with Keras 3's momentum schedule
/// `μₜ = β₁(1 - ½·0.96ᵗ)` and its running product kept as optimizer state.
#[derive(Clone, Debug)]
pub struct Nadam {
    pub config: OptimizerConfig,
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
}

impl Nadam {
    pub fn new(learning_rate: f32) -> Nadam {
        Nadam {
            config: OptimizerConfig::new(learning_rate),
            beta_1: 0.9,
            beta_2: 0.999,
            epsilon: 1e-7,
        }
    }

    /// `β₁(1 - ½·0.96^step)`.
    fn mu(&self, g: &mut Graph, step: Value) -> Result<Value> {
        let d = g.scalar(0.96, DType::F32);
        let p = g.pow(d, step)?;
        let h = g.mul_scalar(p, -0.5)?;
        let h = g.add_scalar(h, 1.0)?;
        g.mul_scalar(h, self.beta_1 as f64)
    }
}

impl Default for Nadam {
    fn default() -> Nadam {
        Nadam::new(1e-3)
    }
}

impl Optimizer for Nadam {
    fn name(&self) -> &'static str {
        "nadam"
    }
    fn config(&self) -> &OptimizerConfig {
        &self.config
    }
    fn config_mut(&mut self) -> &mut OptimizerConfig {
        &mut self.config
    }
    fn slots(&self) -> Vec<Slot> {
        vec![Slot::new("m", 0.0), Slot::new("v", 0.0)]
    }
    fn globals(&self) -> Vec<(&'static str, f32)> {
        vec![("u_product", 1.0)]
    }
    fn update_globals(&self, g: &mut Graph, t: Value, globals: &[Value]) -> Result<Vec<Value>> {
        let mu = self.mu(g, t)?;
        Ok(vec![g.mul(globals[0], mu)?])
    }
    fn validate(&self) -> Result<()> {
        check_betas("nadam", self.beta_1, self.beta_2, self.epsilon)
    }
    fn update(
        &self,
        g: &mut Graph,
        s: &Step,
        w: Value,
        grad: Value,
        slots: &[Value],
    ) -> Result<(Value, Vec<Value>)> {
        let u_t = self.mu(g, s.t)?;
        let t1 = g.add_scalar(s.t, 1.0)?;
        let u_t1 = self.mu(g, t1)?;
        let prod_t = s.globals[0];
        let prod_t1 = g.mul(prod_t, u_t1)?;
        let m = ema(g, slots[0], grad, self.beta_1)?;
        let m = s.settle(g, m, slots[0])?;
        let g2 = g.mul(grad, grad)?;
        let v = ema(g, slots[1], g2, self.beta_2)?;
        let v = s.settle(g, v, slots[1])?;
        // m̂ = μₜ₊₁ m / (1 - Πₜ₊₁) + (1 - μₜ) g / (1 - Πₜ)
        let one = g.scalar(1.0, DType::F32);
        let a = g.sub(one, prod_t1)?;
        let a = g.div(u_t1, a)?;
        let a = g.mul(m, a)?;
        let b = g.sub(one, u_t)?;
        let c = g.sub(one, prod_t)?;
        let b = g.div(b, c)?;
        let b = g.mul(grad, b)?;
        let m_hat = g.add(a, b)?;
        let c2 = one_minus_pow(g, self.beta_2, s.t)?;
        let v_hat = g.div(v, c2)?;
        let sq = g.sqrt(v_hat)?;
        let den = g.add_scalar(sq, self.epsilon as f64)?;
        let r = g.div(m_hat, den)?;
        let r = g.mul(r, s.lr)?;
        Ok((g.sub(w, r)?, vec![m, v]))
    }
    fn clone_box(&self) -> Box<dyn Optimizer> {
        Box::new(self.clone())
    }
}
