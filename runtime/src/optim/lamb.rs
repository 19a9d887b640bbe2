//! LAMB (You et al. 2019) as Keras 3: Adam's bias-corrected direction
//! `u = m̂ / (√v̂ + ε)`, scaled per parameter by the trust ratio `‖w‖ / ‖u‖` (1 when
//! either norm is 0): `w -= ratio·lr·u`. Keras defaults: lr 1e-3, β 0.9 / 0.999, ε 1e-7.

use super::adam::ema;
use super::{check_positive, check_rate, one_minus_pow, Optimizer, OptimizerConfig, Slot, Step};
use crate::ir::{Comparison, DType, Graph, Value};
use crate::Result;

#[derive(Clone, Debug)]
pub struct Lamb {
    pub config: OptimizerConfig,
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
}

impl Lamb {
    pub fn new(learning_rate: f32) -> Lamb {
        Lamb {
            config: OptimizerConfig::new(learning_rate),
            beta_1: 0.9,
            beta_2: 0.999,
            epsilon: 1e-7,
        }
    }

    pub fn betas(mut self, beta_1: f32, beta_2: f32) -> Lamb {
        self.beta_1 = beta_1;
        self.beta_2 = beta_2;
        self
    }

    pub fn epsilon(mut self, epsilon: f32) -> Lamb {
        self.epsilon = epsilon;
        self
    }
}

impl Default for Lamb {
    fn default() -> Lamb {
        Lamb::new(1e-3)
    }
}

/// `√(Σ x²)` (f32 scalar).
fn norm(g: &mut Graph, x: Value) -> Result<Value> {
    let sq = g.mul(x, x)?;
    let s = g.sum_all(sq)?;
    g.sqrt(s)
}

impl Optimizer for Lamb {
    fn name(&self) -> &'static str {
        "lamb"
    }
    fn config(&self) -> &OptimizerConfig {
        &self.config
    }
    fn config_mut(&mut self) -> &mut OptimizerConfig {
        &mut self.config
    }
    fn slots(&self) -> Vec<Slot> {
        vec![Slot::new("momentum", 0.0), Slot::new("velocity", 0.0)]
    }
    fn validate(&self) -> Result<()> {
        check_rate("lamb", "beta_1", self.beta_1)?;
        check_rate("lamb", "beta_2", self.beta_2)?;
        check_positive("lamb", "epsilon", self.epsilon)
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
        let g2 = g.mul(grad, grad)?;
        let v = ema(g, slots[1], g2, self.beta_2)?;
        let v = s.settle(g, v, slots[1])?;
        let c1 = one_minus_pow(g, self.beta_1, s.t)?;
        let c2 = one_minus_pow(g, self.beta_2, s.t)?;
        let m_hat = g.div(m, c1)?;
        let v_hat = g.div(v, c2)?;
        let v_sqrt = g.sqrt(v_hat)?;
        let v_sqrt = g.add_scalar(v_sqrt, self.epsilon as f64)?;
        let u = g.div(m_hat, v_sqrt)?;
        let w_norm = norm(g, w)?;
        let u_norm = norm(g, u)?;
        let zero = g.scalar(0.0, DType::F32);
        let one = g.scalar(1.0, DType::F32);
        let w_pos = g.compare(Comparison::Gt, w_norm, zero)?;
        let u_pos = g.compare(Comparison::Gt, u_norm, zero)?;
        let r = g.div(w_norm, u_norm)?;
        let r = g.select(u_pos, r, one)?;
        let ratio = g.select(w_pos, r, one)?;
        let k = g.mul(ratio, s.lr)?;
        let step = g.mul(k, u)?;
        Ok((g.sub(w, step)?, vec![m, v]))
    }
    fn clone_box(&self) -> Box<dyn Optimizer> {
        Box::new(self.clone())
    }
}
