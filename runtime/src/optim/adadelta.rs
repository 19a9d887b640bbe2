//! Adadelta (Zeiler 2012) as Keras 3: `E[g²] = ρE[g²] + (1-ρ)g²`,
//! `Δ = -√(E[Δ²] + ε)·g / √(E[g²] + ε)`, `E[Δ²] = ρE[Δ²] + (1-ρ)Δ²`, `w += lr·Δ`.
//! Keras defaults: lr 1e-3, ρ 0.95, ε 1e-7.

use super::{check_positive, check_rate, one_minus, Optimizer, OptimizerConfig, Slot, Step};
use crate::ir::{Graph, Value};
use crate::Result;

#[derive(Clone, Debug)]
pub struct Adadelta {
    pub config: OptimizerConfig,
    pub rho: f32,
    pub epsilon: f32,
}

impl Adadelta {
    pub fn new(learning_rate: f32) -> Adadelta {
        Adadelta {
            config: OptimizerConfig::new(learning_rate),
            rho: 0.95,
            epsilon: 1e-7,
        }
    }

    pub fn rho(mut self, rho: f32) -> Adadelta {
        self.rho = rho;
        self
    }

    pub fn epsilon(mut self, epsilon: f32) -> Adadelta {
        self.epsilon = epsilon;
        self
    }
}

impl Default for Adadelta {
    fn default() -> Adadelta {
        Adadelta::new(1e-3)
    }
}

/// `ρ·a + (1-ρ)·x`.
fn decay(g: &mut Graph, a: Value, x: Value, rho: f32) -> Result<Value> {
    let a = g.mul_scalar(a, rho as f64)?;
    let x = g.mul_scalar(x, one_minus(rho))?;
    g.add(a, x)
}

impl Optimizer for Adadelta {
    fn name(&self) -> &'static str {
        "adadelta"
    }
    fn config(&self) -> &OptimizerConfig {
        &self.config
    }
    fn config_mut(&mut self) -> &mut OptimizerConfig {
        &mut self.config
    }
    fn slots(&self) -> Vec<Slot> {
        vec![
            Slot::new("accumulated_grad", 0.0),
            Slot::new("accumulated_delta_var", 0.0),
        ]
    }
    fn validate(&self) -> Result<()> {
        check_rate("adadelta", "rho", self.rho)?;
        check_positive("adadelta", "epsilon", self.epsilon)
    }
    fn update(
        &self,
        g: &mut Graph,
        s: &Step,
        w: Value,
        grad: Value,
        slots: &[Value],
    ) -> Result<(Value, Vec<Value>)> {
        let eps = self.epsilon as f64;
        let g2 = g.mul(grad, grad)?;
        let acc_g = decay(g, slots[0], g2, self.rho)?;
        let acc_g = s.settle(g, acc_g, slots[0])?;
        let num = g.add_scalar(slots[1], eps)?;
        let num = g.sqrt(num)?;
        let num = g.mul(num, grad)?;
        let den = g.add_scalar(acc_g, eps)?;
        let den = g.sqrt(den)?;
        let delta = g.div(num, den)?;
        let delta = g.neg(delta)?;
        let d2 = g.mul(delta, delta)?;
        let acc_d = decay(g, slots[1], d2, self.rho)?;
        let step = g.mul(s.lr, delta)?;
        Ok((g.add(w, step)?, vec![acc_g, acc_d]))
    }
    fn clone_box(&self) -> Box<dyn Optimizer> {
        Box::new(self.clone())
    }
}
