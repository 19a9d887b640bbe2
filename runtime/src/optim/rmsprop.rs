//! RMSprop as Keras 3: `v = ρv + (1-ρ)g²`; centred variants subtract the squared mean
//! gradient; the step `lr·g/√(v + ε)` goes through momentum when it is set.

use super::{check_positive, check_rate, one_minus, Optimizer, OptimizerConfig, Slot, Step};
use crate::ir::{Graph, Value};
use crate::Result;

#[derive(Clone, Debug)]
pub struct RMSprop {
    pub config: OptimizerConfig,
    pub rho: f32,
    pub momentum: f32,
    pub epsilon: f32,
    pub centered: bool,
}

impl RMSprop {
    pub fn new(learning_rate: f32) -> RMSprop {
        RMSprop {
            config: OptimizerConfig::new(learning_rate),
            rho: 0.9,
            momentum: 0.0,
            epsilon: 1e-7,
            centered: false,
        }
    }

    pub fn momentum(mut self, momentum: f32) -> RMSprop {
        self.momentum = momentum;
        self
    }

    pub fn centered(mut self, centered: bool) -> RMSprop {
        self.centered = centered;
        self
    }
}

impl Default for RMSprop {
    fn default() -> RMSprop {
        RMSprop::new(1e-3)
    }
}

impl Optimizer for RMSprop {
    fn name(&self) -> &'static str {
        "rmsprop"
    }
    fn config(&self) -> &OptimizerConfig {
        &self.config
    }
    fn config_mut(&mut self) -> &mut OptimizerConfig {
        &mut self.config
    }
    fn slots(&self) -> Vec<Slot> {
        let mut s = vec![Slot::new("velocity", 0.0)];
        if self.momentum > 0.0 {
            s.push(Slot::new("momentum", 0.0));
        }
        if self.centered {
            s.push(Slot::new("average_gradient", 0.0));
        }
        s
    }
    fn validate(&self) -> Result<()> {
        check_rate("rmsprop", "rho", self.rho)?;
        check_rate("rmsprop", "momentum", self.momentum)?;
        check_positive("rmsprop", "epsilon", self.epsilon)
    }
    fn update(
        &self,
        g: &mut Graph,
        s: &Step,
        w: Value,
        grad: Value,
        slots: &[Value],
    ) -> Result<(Value, Vec<Value>)> {
        let rho = self.rho as f64;
        let rv = g.mul_scalar(slots[0], rho)?;
        let g2 = g.mul(grad, grad)?;
        let g2 = g.mul_scalar(g2, one_minus(self.rho))?;
        let v = g.add(rv, g2)?;
        let v = s.settle(g, v, slots[0])?;
        let mut new = vec![v];
        let mom_index = 1;
        let avg_index = if self.momentum > 0.0 { 2 } else { 1 };
        let mut denom = v;
        let mut avg_new = None;
        if self.centered {
            let ra = g.mul_scalar(slots[avg_index], rho)?;
            let ga = g.mul_scalar(grad, one_minus(self.rho))?;
            let a = g.add(ra, ga)?;
            let a = s.settle(g, a, slots[avg_index])?;
            let a2 = g.mul(a, a)?;
            denom = g.sub(v, a2)?;
            avg_new = Some(a);
        }
        let denom = g.add_scalar(denom, self.epsilon as f64)?;
        let denom = g.sqrt(denom)?;
        let inc = g.mul(grad, s.lr)?;
        let inc = g.div(inc, denom)?;
        let w = if self.momentum > 0.0 {
            let mm = g.mul_scalar(slots[mom_index], self.momentum as f64)?;
            let m = g.add(mm, inc)?;
            let m = s.settle(g, m, slots[mom_index])?;
            new.push(m);
            g.sub(w, m)?
        } else {
            g.sub(w, inc)?
        };
        new.extend(avg_new);
        Ok((w, new))
    }
    fn clone_box(&self) -> Box<dyn Optimizer> {
        Box::new(self.clone())
    }
}
