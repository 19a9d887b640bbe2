//! Lion (Chen et al. 2023) as Keras 3: `w -= lr·sign(β₁m + (1-β₁)g)`,
//! then `m = β₂m + (1-β₂)g`. Keras defaults: lr 1e-3, β 0.9 / 0.99.

use super::{check_rate, one_minus, Optimizer, OptimizerConfig, Slot, Step};
use crate::ir::{Graph, UnaryOp, Value};
use crate::Result;

#[derive(Clone, Debug)]
pub struct Lion {
    pub config: OptimizerConfig,
    pub beta_1: f32,
    pub beta_2: f32,
}

impl Lion {
    pub fn new(learning_rate: f32) -> Lion {
        Lion {
            config: OptimizerConfig::new(learning_rate),
            beta_1: 0.9,
            beta_2: 0.99,
        }
    }
}

impl Default for Lion {
    fn default() -> Lion {
        Lion::new(1e-3)
    }
}

impl Optimizer for Lion {
    fn name(&self) -> &'static str {
        "lion"
    }
    fn config(&self) -> &OptimizerConfig {
        &self.config
    }
    fn config_mut(&mut self) -> &mut OptimizerConfig {
        &mut self.config
    }
    fn slots(&self) -> Vec<Slot> {
        vec![Slot::new("momentum", 0.0)]
    }
    fn validate(&self) -> Result<()> {
        check_rate("lion", "beta_1", self.beta_1)?;
        check_rate("lion", "beta_2", self.beta_2)
    }
    fn update(
        &self,
        g: &mut Graph,
        s: &Step,
        w: Value,
        grad: Value,
        slots: &[Value],
    ) -> Result<(Value, Vec<Value>)> {
        let m = slots[0];
        let a = g.mul_scalar(m, self.beta_1 as f64)?;
        let b = g.mul_scalar(grad, one_minus(self.beta_1))?;
        let c = g.add(a, b)?;
        let sign = g.unary(UnaryOp::Sign, c)?;
        let step = g.mul(sign, s.lr)?;
        let w = g.sub(w, step)?;
        let a = g.mul_scalar(m, self.beta_2 as f64)?;
        let b = g.mul_scalar(grad, one_minus(self.beta_2))?;
        Ok((w, vec![g.add(a, b)?]))
    }
    fn clone_box(&self) -> Box<dyn Optimizer> {
        Box::new(self.clone())
    }
}
