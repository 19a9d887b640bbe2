//! FTRL-Proximal (McMahan et al. 2013) as Keras 3, with its L2 shrinkage and `beta`:
//! `n' = n + g²`, `z += g + 2λ₂ₛw - (n'^-p - n^-p)/lr · w`,
//! `w = (clip(z, ±λ₁) - z) / (n'^-p/lr + 2(λ₂ + β/(2lr)))`, where `p` is
//! `learning_rate_power`. Keras defaults: lr 1e-3, p -0.5, initial accumulator 0.1,
//! every regularisation 0, β 0.

use super::{check_non_negative, Optimizer, OptimizerConfig, Slot, Step};
use crate::ir::{DType, Graph, Value};
use crate::{Error, Result};

#[derive(Clone, Debug)]
pub struct Ftrl {
    pub config: OptimizerConfig,
    pub learning_rate_power: f32,
    pub initial_accumulator_value: f32,
    pub l1_regularization_strength: f32,
    pub l2_regularization_strength: f32,
    pub l2_shrinkage_regularization_strength: f32,
    pub beta: f32,
}

impl Ftrl {
    pub fn new(learning_rate: f32) -> Ftrl {
        Ftrl {
            config: OptimizerConfig::new(learning_rate),
            learning_rate_power: -0.5,
            initial_accumulator_value: 0.1,
            l1_regularization_strength: 0.0,
            l2_regularization_strength: 0.0,
            l2_shrinkage_regularization_strength: 0.0,
            beta: 0.0,
        }
    }

    pub fn learning_rate_power(mut self, p: f32) -> Ftrl {
        self.learning_rate_power = p;
        self
    }

    pub fn initial_accumulator_value(mut self, v: f32) -> Ftrl {
        self.initial_accumulator_value = v;
        self
    }

    pub fn l1_regularization_strength(mut self, v: f32) -> Ftrl {
        self.l1_regularization_strength = v;
        self
    }

    pub fn l2_regularization_strength(mut self, v: f32) -> Ftrl {
        self.l2_regularization_strength = v;
        self
    }

    pub fn l2_shrinkage_regularization_strength(mut self, v: f32) -> Ftrl {
        self.l2_shrinkage_regularization_strength = v;
        self
    }

    pub fn beta(mut self, beta: f32) -> Ftrl {
        self.beta = beta;
        self
    }
}

impl Default for Ftrl {
    fn default() -> Ftrl {
        Ftrl::new(1e-3)
    }
}

impl Optimizer for Ftrl {
    fn name(&self) -> &'static str {
        "ftrl"
    }
    fn config(&self) -> &OptimizerConfig {
        &self.config
    }
    fn config_mut(&mut self) -> &mut OptimizerConfig {
        &mut self.config
    }
    fn slots(&self) -> Vec<Slot> {
        vec![
            Slot::new("accumulator", self.initial_accumulator_value),
            Slot::new("linear", 0.0),
        ]
    }
    fn validate(&self) -> Result<()> {
        let p = self.learning_rate_power;
        if !(p.is_finite() && p <= 0.0) {
            return Err(Error::invalid(
                "ftrl",
                format!("learning_rate_power must be finite and <= 0, got {p}"),
            ));
        }
        for (what, v) in [
            ("initial_accumulator_value", self.initial_accumulator_value),
            (
                "l1_regularization_strength",
                self.l1_regularization_strength,
            ),
            (
                "l2_regularization_strength",
                self.l2_regularization_strength,
            ),
            (
                "l2_shrinkage_regularization_strength",
                self.l2_shrinkage_regularization_strength,
            ),
            ("beta", self.beta),
        ] {
            check_non_negative("ftrl", what, v)?;
        }
        Ok(())
    }
    fn update(
        &self,
        g: &mut Graph,
        s: &Step,
        w: Value,
        grad: Value,
        slots: &[Value],
    ) -> Result<(Value, Vec<Value>)> {
        let (accum, linear) = (slots[0], slots[1]);
        let lr = s.lr;
        let power = g.scalar(-self.learning_rate_power as f64, DType::F32);
        // λ₂ + β/(2·lr), a scalar of the step.
        let two_lr = g.mul_scalar(lr, 2.0)?;
        let beta = g.scalar(self.beta as f64, DType::F32);
        let l2 = g.div(beta, two_lr)?;
        let l2 = g.add_scalar(l2, self.l2_regularization_strength as f64)?;
        let shrink = g.mul_scalar(w, 2.0 * self.l2_shrinkage_regularization_strength as f64)?;
        let grad_to_use = g.add(grad, shrink)?;
        let g2 = g.mul(grad, grad)?;
        let new_accum = g.add(accum, g2)?;
        let new_accum = s.settle(g, new_accum, accum)?;
        let p_new = g.pow(new_accum, power)?;
        let p_old = g.pow(accum, power)?;
        let sigma = g.sub(p_new, p_old)?;
        let sigma = g.div(sigma, lr)?;
        let sigma = g.mul(sigma, w)?;
        let inc = g.sub(grad_to_use, sigma)?;
        let linear_new = g.add(linear, inc)?;
        let linear = s.settle(g, linear_new, linear)?;
        let quadratic = g.div(p_new, lr)?;
        let l2x2 = g.mul_scalar(l2, 2.0)?;
        let quadratic = g.add(quadratic, l2x2)?;
        let l1 = self.l1_regularization_strength as f64;
        let hi = g.full_like(l1, linear)?;
        let lo = g.full_like(-l1, linear)?;
        let clipped = g.min(linear, hi)?;
        let clipped = g.max(clipped, lo)?;
        let num = g.sub(clipped, linear)?;
        let w = g.div(num, quadratic)?;
        Ok((w, vec![new_accum, linear]))
    }
    fn clone_box(&self) -> Box<dyn Optimizer> {
        Box::new(self.clone())
    }
}
