//! `BatchNormalization`: normalises each feature by the batch's statistics in training
//! (and folds them into moving averages), by the moving averages in inference.

use super::axis::feature_axis;
use super::axis::onnx_along;
use crate::ir::{Graph, Value};
use crate::nn::entry::{args, axis, initializer};
use crate::nn::layer::{bad_config, Forward, Layer};
use crate::nn::onnx::{OnnxForward, OnnxValue};
use crate::nn::Initializer;
use crate::Result;
use strata_spec::{Args, Val};

#[derive(Clone, Debug, PartialEq)]
pub struct BatchNormalization {
    pub name: String,
    /// The feature axis, counting the batch axis (Keras' `axis`; `-1` is the last).
    pub axis: isize,
    /// The moving averages keep this fraction of their value at each training step.
    pub momentum: f64,
    pub epsilon: f64,
    /// Learn an offset `beta`.
    pub center: bool,
    /// Learn a scale `gamma`.
    pub scale: bool,
    pub beta_initializer: Initializer,
    pub gamma_initializer: Initializer,
    pub moving_mean_initializer: Initializer,
    pub moving_variance_initializer: Initializer,
}

impl BatchNormalization {
    /// Keras' defaults: last axis, momentum 0.99, epsilon 1e-3, learned offset and scale.
    pub fn new(name: impl Into<String>) -> BatchNormalization {
        BatchNormalization {
            name: name.into(),
            axis: -1,
            momentum: 0.99,
            epsilon: 1e-3,
            center: true,
            scale: true,
            beta_initializer: Initializer::Zeros,
            gamma_initializer: Initializer::Ones,
            moving_mean_initializer: Initializer::Zeros,
            moving_variance_initializer: Initializer::Ones,
        }
    }
}

/// `x`'s values along `axis` (`v` has one value per feature) broadcast to x's shape.
fn along(g: &mut Graph, v: Value, x: Value, axis: usize) -> Result<Value> {
    let shape = g.ty(x).shape.clone();
    g.broadcast_in_dim(v, shape, &[axis])
}

/// `(x - mean) / sqrt(var + epsilon) · gamma + beta`, statistics and weights per feature,
/// computed as Keras computes it on every backend: `x · inv + (beta - mean · inv)` with
/// `inv = gamma / sqrt(var + epsilon)`. The per-feature work is on vectors and the full
/// size work one multiply-add, whose gradient needs two per-feature sums (of the cotangent
/// and of the cotangent times `x`). Like Keras', this form cancels more than `(x - mean) ·
/// inv` when a feature's mean is far larger than its spread.
fn normalize(
    g: &mut Graph,
    x: Value,
    axis: usize,
    (mean, var): (Value, Value),
    epsilon: f64,
    (gamma, beta): (Option<Value>, Option<Value>),
) -> Result<Value> {
    let ve = g.add_scalar(var, epsilon)?;
    let mut inv = g.unary(crate::ir::UnaryOp::Rsqrt, ve)?;
    if let Some(gamma) = gamma {
        inv = g.mul(inv, gamma)?;
    }
    let shift = g.mul(mean, inv)?;
    let shift = match beta {
        Some(beta) => g.sub(beta, shift)?,
        None => g.neg(shift)?,
    };
    let inv = along(g, inv, x, axis)?;
    let shift = along(g, shift, x, axis)?;
    let scaled = g.mul(x, inv)?;
    g.add(scaled, shift)
}

impl Layer for BatchNormalization {
    fn class(&self) -> &'static str {
        "BatchNormalization"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([
            ("axis", axis(self.axis)),
            ("momentum", Val::Float(self.momentum)),
            ("epsilon", Val::Float(self.epsilon)),
            ("center", Val::Bool(self.center)),
            ("scale", Val::Bool(self.scale)),
            ("beta_initializer", initializer(self.beta_initializer)),
            ("gamma_initializer", initializer(self.gamma_initializer)),
            (
                "moving_mean_initializer",
                initializer(self.moving_mean_initializer),
            ),
            (
                "moving_variance_initializer",
                initializer(self.moving_variance_initializer),
            ),
        ]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let dims = cx.g.try_ty("batch_normalization", x)?.dims().to_vec();
        self.output_shape(dims.get(1..).unwrap_or(&[]))?;
        let axis = feature_axis(self.axis, dims.len());
        let (gamma, beta, moving_mean, moving_var) = match (self.scale, self.center, params) {
            (true, true, &[g, b, m, v]) => (Some(g), Some(b), m, v),
            (true, false, &[g, m, v]) => (Some(g), None, m, v),
            (false, true, &[b, m, v]) => (None, Some(b), m, v),
            (false, false, &[m, v]) => (None, None, m, v),
            _ => {
                return Err(bad_config(
                    self,
                    format!("forward got {} parameter value(s)", params.len()),
                ))
            }
        };
        // Frozen, it uses and keeps its moving statistics (Keras' rule for BatchNorm).
        let training = cx.training && !cx.is_frozen(&self.name);
        let g = &mut *cx.g;
        if !training {
            return normalize(
                g,
                x,
                axis,
                (moving_mean, moving_var),
                self.epsilon,
                (gamma, beta),
            );
        }
        // Biased, as Keras.
        let axes: Vec<usize> = (0..dims.len()).filter(|&a| a != axis).collect();
        let (mean, var) = g.mean_and_variance(x, &axes)?;
        let y = normalize(g, x, axis, (mean, var), self.epsilon, (gamma, beta))?;
        // The moving averages are state, not part of the loss: no gradient flows into them.
        let mut averaged = |old: Value, batch: Value| -> Result<Value> {
            let batch = g.stop_gradient(batch)?;
            let kept = g.mul_scalar(old, self.momentum)?;
            let new = g.mul_scalar(batch, 1.0 - self.momentum)?;
            g.add(kept, new)
        };
        let new_mean = averaged(moving_mean, mean)?;
        let new_var = averaged(moving_var, var)?;
        cx.update(moving_mean, new_mean);
        cx.update(moving_var, new_var);
        Ok(y)
    }

    /// The inference branch of `forward`, operator by operator: `x · inv + (beta - mean ·
    /// inv)` with `inv = gamma / sqrt(var + epsilon)` and the moving statistics, each
    /// per-feature vector reshaped to broadcast along the feature axis. (ONNX's
    /// BatchNormalization would need the features on axis 1, so transposes around it, for
    /// no gain.)
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        let input = cx.input_shape().to_vec();
        self.output_shape(&input)?;
        let rank = input.len() + 1;
        let axis = feature_axis(self.axis, rank);
        let (gamma, beta, mean, var) = match (self.scale, self.center, params) {
            (true, true, [g, b, m, v]) => (Some(g), Some(b), m, v),
            (true, false, [g, m, v]) => (Some(g), None, m, v),
            (false, true, [b, m, v]) => (None, Some(b), m, v),
            (false, false, [m, v]) => (None, None, m, v),
            _ => {
                return Err(bad_config(
                    self,
                    format!("the ONNX mapping got {} weight(s)", params.len()),
                ))
            }
        };
        let eps = cx.scalar(self.epsilon);
        let ve = cx.op("Add", &[var, &eps], vec![]);
        let sd = cx.op("Sqrt", &[&ve], vec![]);
        let mut inv = cx.op("Reciprocal", &[&sd], vec![]);
        if let Some(gamma) = gamma {
            inv = cx.op("Mul", &[&inv, gamma], vec![]);
        }
        let shift = cx.op("Mul", &[mean, &inv], vec![]);
        let shift = match beta {
            Some(beta) => cx.op("Sub", &[beta, &shift], vec![]),
            None => cx.op("Neg", &[&shift], vec![]),
        };
        let inv = onnx_along(cx, &inv, axis, rank);
        let shift = onnx_along(cx, &shift, axis, rank);
        let scaled = cx.op("Mul", &[&x, &inv], vec![]);
        let y = cx.op("Add", &[&scaled, &shift], vec![]);
        Ok(y)
    }
}
