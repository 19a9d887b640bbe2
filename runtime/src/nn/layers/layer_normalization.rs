//! `LayerNormalization`: normalises each example over its feature axis, then scales and
//! offsets per feature; the same in training and inference.

use super::axis::feature_axis;
use crate::ir::{UnaryOp, Value};
use crate::nn::layer::{bad_config, Forward, Layer, ParamSpec};
use crate::nn::Initializer;
use crate::Result;

#[derive(Clone, Debug, PartialEq)]
pub struct LayerNormalization {
    pub name: String,
    /// The normalised axis, counting the batch axis (Keras' `axis`; `-1` is the last).
    pub axis: isize,
    pub epsilon: f64,
    /// Learn an offset `beta`.
    pub center: bool,
    /// Learn a scale `gamma`.
    pub scale: bool,
    pub beta_initializer: Initializer,
    pub gamma_initializer: Initializer,
}

impl LayerNormalization {
    /// Keras' defaults: last axis, epsilon 1e-3, learned offset and scale.
    pub fn new(name: impl Into<String>) -> LayerNormalization {
        LayerNormalization {
            name: name.into(),
            axis: -1,
            epsilon: 1e-3,
            center: true,
            scale: true,
            beta_initializer: Initializer::Zeros,
            gamma_initializer: Initializer::Ones,
        }
    }

    fn features(&self, input: &[usize]) -> Result<(usize, usize)> {
        if self.epsilon <= 0.0 {
            return Err(bad_config(
                self,
                format!("epsilon must be > 0, got {}", self.epsilon),
            ));
        }
        let a = feature_axis(self, self.axis, input)?;
        Ok((a, input[a - 1]))
    }
}

impl Layer for LayerNormalization {
    fn class(&self) -> &'static str {
        "LayerNormalization"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn output_shape(&self, input: &[usize]) -> Result<Vec<usize>> {
        self.features(input)?;
        Ok(input.to_vec())
    }

    /// `gamma` then `beta` (when scaled / centred), as Keras orders them.
    fn params(&self, input: &[usize]) -> Result<Vec<ParamSpec>> {
        let (_, c) = self.features(input)?;
        let spec = |suffix: &str, init| ParamSpec {
            name: format!("{}/{suffix}", self.name),
            dims: vec![c],
            init,
            fan_in: c,
            fan_out: c,
            trainable: true,
        };
        let mut p = Vec::new();
        if self.scale {
            p.push(spec("gamma", self.gamma_initializer));
        }
        if self.center {
            p.push(spec("beta", self.beta_initializer));
        }
        Ok(p)
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        let shape = cx.g.try_ty("layer_normalization", x)?.shape.clone();
        let (axis, _) = self.features(shape.dims().get(1..).unwrap_or(&[]))?;
        let (gamma, beta) = match (self.scale, self.center, params) {
            (true, true, &[g, b]) => (Some(g), Some(b)),
            (true, false, &[g]) => (Some(g), None),
            (false, true, &[b]) => (None, Some(b)),
            (false, false, &[]) => (None, None),
            _ => {
                return Err(bad_config(
                    self,
                    format!("forward got {} parameter value(s)", params.len()),
                ))
            }
        };
        let g = &mut *cx.g;
        // Statistics have one value per position off the axis; weights one per feature.
        let others: Vec<usize> = (0..shape.rank()).filter(|&a| a != axis).collect();
        let mean = g.mean(x, &[axis])?;
        let mean = g.broadcast_in_dim(mean, shape.clone(), &others)?;
        let centered = g.sub(x, mean)?;
        let sq = g.mul(centered, centered)?;
        let var = g.mean(sq, &[axis])?;
        let ve = g.add_scalar(var, self.epsilon)?;
        let inv = g.unary(UnaryOp::Rsqrt, ve)?;
        let inv = g.broadcast_in_dim(inv, shape.clone(), &others)?;
        let mut y = g.mul(centered, inv)?;
        if let Some(gamma) = gamma {
            let gb = g.broadcast_in_dim(gamma, shape.clone(), &[axis])?;
            y = g.mul(y, gb)?;
        }
        if let Some(beta) = beta {
            let bb = g.broadcast_in_dim(beta, shape, &[axis])?;
            y = g.add(y, bb)?;
        }
        Ok(y)
    }
}
