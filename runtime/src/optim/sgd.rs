//! Stochastic gradient descent with optional (Nesterov) momentum, as Keras 3:
//! `m = μ·m - lr·g`, then `w += m` (or `w += μ·m - lr·g` with Nesterov).

use super::{check_rate, Optimizer, OptimizerConfig, Slot, Step};
use crate::ir::{Graph, Value};
use crate::Result;

#[derive(Clone, Debug)]
pub struct SGD {
    pub config: OptimizerConfig,
    pub momentum: f32,
    pub nesterov: bool,
}

impl SGD {
    pub fn new(learning_rate: f32) -> SGD {
        SGD {
            config: OptimizerConfig::new(learning_rate),
            momentum: 0.0,
            nesterov: false,
        }
    }

    pub fn momentum(mut self, momentum: f32) -> SGD {
        self.momentum = momentum;
        self
    }

    pub fn nesterov(mut self, nesterov: bool) -> SGD {
        self.nesterov = nesterov;
        self
    }
}

impl Default for SGD {
    /// Keras' default learning rate, 0.01.
    fn default() -> SGD {
        SGD::new(0.01)
    }
}

impl Optimizer for SGD {
    fn name(&self) -> &'static str {
        "sgd"
    }
    fn config(&self) -> &OptimizerConfig {
        &self.config
    }
    fn config_mut(&mut self) -> &mut OptimizerConfig {
        &mut self.config
    }
    fn slots(&self) -> Vec<Slot> {
        if self.momentum > 0.0 {
            vec![Slot::new("momentum", 0.0)]
        } else {
            vec![]
        }
    }
    fn validate(&self) -> Result<()> {
        check_rate("sgd", "momentum", self.momentum)
    }
    fn update(
        &self,
        g: &mut Graph,
        s: &Step,
        w: Value,
        grad: Value,
        slots: &[Value],
    ) -> Result<(Value, Vec<Value>)> {
        let step = g.mul(grad, s.lr)?; // lr·g
        if self.momentum == 0.0 {
            return Ok((g.sub(w, step)?, vec![]));
        }
        let mm = g.mul_scalar(slots[0], self.momentum as f64)?;
        let m = g.sub(mm, step)?;
        let m = s.settle(g, m, slots[0])?;
        let w = if self.nesterov {
            let a = g.mul_scalar(m, self.momentum as f64)?;
            let a = g.sub(a, step)?;
            g.add(w, a)?
        } else {
            g.add(w, m)?
        };
        Ok((w, vec![m]))
    }
    fn clone_box(&self) -> Box<dyn Optimizer> {
        Box::new(self.clone())
    }
}
