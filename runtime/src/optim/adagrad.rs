//! Adagrad as Keras 3: `acc += g²`, `w -= lr·g/√(acc + ε)`, the accumulator starting at 0.1.

use super::{check_positive, Optimizer, OptimizerConfig, Slot, Step};
use crate::ir::{Graph, Value};
use crate::{Error, Result};

#[derive(Clone, Debug)]
pub struct Adagrad {
    pub config: OptimizerConfig,
    pub initial_accumulator_value: f32,
    pub epsilon: f32,
}

impl Adagrad {
    pub fn new(learning_rate: f32) -> Adagrad {
        Adagrad {
            config: OptimizerConfig::new(learning_rate),
            initial_accumulator_value: 0.1,
            epsilon: 1e-7,
        }
    }
}

impl Default for Adagrad {
    fn default() -> Adagrad {
        Adagrad::new(1e-3)
    }
}

impl Optimizer for Adagrad {
    fn name(&self) -> &'static str {
        "adagrad"
    }
    fn config(&self) -> &OptimizerConfig {
        &self.config
    }
    fn config_mut(&mut self) -> &mut OptimizerConfig {
        &mut self.config
    }
    fn slots(&self) -> Vec<Slot> {
        vec![Slot::new("accumulator", self.initial_accumulator_value)]
    }
    fn validate(&self) -> Result<()> {
        if !(self.initial_accumulator_value.is_finite() && self.initial_accumulator_value >= 0.0) {
            return Err(Error::invalid(
                "adagrad",
                format!(
                    "initial_accumulator_value must be >= 0, got {}",
                    self.initial_accumulator_value
                ),
            ));
        }
        check_positive("adagrad", "epsilon", self.epsilon)
    }
    fn update(
        &self,
        g: &mut Graph,
        s: &Step,
        w: Value,
        grad: Value,
        slots: &[Value],
    ) -> Result<(Value, Vec<Value>)> {
        let g2 = g.mul(grad, grad)?;
        let acc = g.add(slots[0], g2)?;
        let acc = s.settle(g, acc, slots[0])?;
        let d = g.add_scalar(acc, self.epsilon as f64)?;
        let d = g.sqrt(d)?;
        let inc = g.mul(grad, s.lr)?;
        let inc = g.div(inc, d)?;
        Ok((g.sub(w, inc)?, vec![acc]))
    }
    fn clone_box(&self) -> Box<dyn Optimizer> {
        Box::new(self.clone())
    }
}
