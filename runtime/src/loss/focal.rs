//! Focal cross-entropies (Lin et al., 2017): cross-entropy scaled down where the model is
//! already confident, so training attends to the hard examples.

use super::{
    binary_crossentropy_of_probs, check_non_negative_arg, check_unit_arg, last_axis, mean_last,
    mean_to_batch, renormalised_probs, same_shape, smooth_labels, Loss,
};
use crate::ir::{Graph, TensorType, UnaryOp, Value};
use crate::nn::{softmax, Activation};
use crate::Result;

/// `x^γ`; `x^0` is 1 without a `pow`, whose gradient at `x = 0` would be `0·∞`.
fn focal_factor(g: &mut Graph, x: Value, gamma: f32) -> Result<Value> {
    if gamma == 0.0 {
        return g.full_like(1.0, x);
    }
    let e = g.full_like(gamma as f64, x)?;
    g.pow(x, e)
}

/// Binary cross-entropy times `(1 - p_t)^γ`, where `p_t` is the probability given to the
/// target (`p` for 1, `1 - p` for 0); with `apply_class_balancing`, also times `α` for
/// positives and `1 - α` for negatives. Averaged over the last axis.
#[derive(Clone, Debug)]
pub struct BinaryFocalCrossentropy {
    pub apply_class_balancing: bool,
    pub alpha: f32,
    pub gamma: f32,
    pub from_logits: bool,
    pub label_smoothing: f32,
}

impl Default for BinaryFocalCrossentropy {
    fn default() -> Self {
        BinaryFocalCrossentropy {
            apply_class_balancing: false,
            alpha: 0.25,
            gamma: 2.0,
            from_logits: false,
            label_smoothing: 0.0,
        }
    }
}

impl Loss for BinaryFocalCrossentropy {
    fn name(&self) -> &'static str {
        "binary_focal_crossentropy"
    }
    fn validate(&self) -> Result<()> {
        check_unit_arg(self.name(), "alpha", self.alpha)?;
        check_non_negative_arg(self.name(), "gamma", self.gamma)?;
        check_unit_arg(self.name(), "label_smoothing", self.label_smoothing)
    }
    fn check(&self, t: &TensorType, p: &TensorType) -> Result<()> {
        self.validate()?;
        same_shape(self.name(), t, p)
    }
    fn per_sample(&self, g: &mut Graph, y: Value, x: Value, _l: Option<Value>) -> Result<Value> {
        self.check(&g.ty(y).clone(), &g.ty(x).clone())?;
        let y = smooth_labels(g, y, self.label_smoothing, 0.5)?;
        let p = if self.from_logits {
            g.unary(UnaryOp::Logistic, x)?
        } else {
            x
        };
        let bce = binary_crossentropy_of_probs(g, y, p)?;
        // 1 - p_t = 1 - (y·p + (1 - y)(1 - p)) = y + p - 2·y·p
        let yp = g.mul(y, p)?;
        let s = g.add(y, p)?;
        let yp2 = g.mul_scalar(yp, 2.0)?;
        let miss = g.sub(s, yp2)?;
        let f = focal_factor(g, miss, self.gamma)?;
        let mut v = g.mul(f, bce)?;
        if self.apply_class_balancing {
            // α·y + (1 - α)(1 - y) = (1 - α) + (2α - 1)·y
            let a = self.alpha as f64;
            let w = g.mul_scalar(y, 2.0 * a - 1.0)?;
            let w = g.add_scalar(w, 1.0 - a)?;
            v = g.mul(w, v)?;
        }
        mean_last(g, v)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
    fn unexpected_output_activation(&self) -> Option<Activation> {
        self.from_logits.then_some(Activation::Sigmoid)
    }
}

/// Categorical cross-entropy with each class's term scaled by `α·(1 - p)^γ`, summed over
/// the last axis. Keras applies `α` to every class (it has no `apply_class_balancing` here).
#[derive(Clone, Debug)]
pub struct CategoricalFocalCrossentropy {
    pub alpha: f32,
    pub gamma: f32,
    pub from_logits: bool,
    pub label_smoothing: f32,
}

impl Default for CategoricalFocalCrossentropy {
    fn default() -> Self {
        CategoricalFocalCrossentropy {
            alpha: 0.25,
            gamma: 2.0,
            from_logits: false,
            label_smoothing: 0.0,
        }
    }
}

impl Loss for CategoricalFocalCrossentropy {
    fn name(&self) -> &'static str {
        "categorical_focal_crossentropy"
    }
    fn validate(&self) -> Result<()> {
        check_unit_arg(self.name(), "alpha", self.alpha)?;
        check_non_negative_arg(self.name(), "gamma", self.gamma)?;
        check_unit_arg(self.name(), "label_smoothing", self.label_smoothing)
    }
    fn check(&self, t: &TensorType, p: &TensorType) -> Result<()> {
        self.validate()?;
        same_shape(self.name(), t, p)?;
        super::resolve_axis(self.name(), -1, p.rank()).map(|_| ())
    }
    fn per_sample(&self, g: &mut Graph, y: Value, x: Value, _l: Option<Value>) -> Result<Value> {
        self.check(&g.ty(y).clone(), &g.ty(x).clone())?;
        let last = last_axis(g, self.name(), x)?;
        let classes = g.ty(x).dims()[last] as f64;
        let y = smooth_labels(g, y, self.label_smoothing, 1.0 / classes)?;
        let p = if self.from_logits { softmax(g, x)? } else { x };
        let p = renormalised_probs(g, p, last)?;
        let lp = g.log(p)?;
        let ce = g.mul(y, lp)?;
        let one = g.full_like(1.0, p)?;
        let q = g.sub(one, p)?;
        let f = focal_factor(g, q, self.gamma)?;
        let fa = g.mul_scalar(f, self.alpha as f64)?;
        let v = g.mul(fa, ce)?;
        let s = g.sum(v, &[last])?;
        let s = g.neg(s)?;
        mean_to_batch(g, s)
    }
    fn clone_box(&self) -> Box<dyn Loss> {
        Box::new(self.clone())
    }
    fn unexpected_output_activation(&self) -> Option<Activation> {
        self.from_logits.then_some(Activation::Softmax)
    }
}
