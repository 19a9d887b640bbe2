//! `Dropout`: in training, zeroes each input with probability `rate` and scales the rest
//! by `1 / (1 - rate)` (inverted dropout, so inference is the identity).

use crate::ir::{Comparison, Value};
use crate::nn::layer::{bad_config, expect_params, Forward, Layer, ParamSpec};
use crate::Result;

#[derive(Clone, Debug, PartialEq)]
pub struct Dropout {
    pub name: String,
    /// The fraction of inputs dropped, in `[0, 1)`.
    pub rate: f64,
}

impl Dropout {
    pub fn new(name: impl Into<String>, rate: f64) -> Dropout {
        Dropout {
            name: name.into(),
            rate,
        }
    }
}

impl Layer for Dropout {
    fn class(&self) -> &'static str {
        "Dropout"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn output_shape(&self, input: &[usize]) -> Result<Vec<usize>> {
        if !(0.0..1.0).contains(&self.rate) {
            return Err(bad_config(
                self,
                format!("rate must be in [0, 1), got {}", self.rate),
            ));
        }
        Ok(input.to_vec())
    }

    fn params(&self, _input: &[usize]) -> Result<Vec<ParamSpec>> {
        Ok(Vec::new())
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let ty = cx.g.try_ty("dropout", x)?.clone();
        self.output_shape(ty.dims())?;
        if !cx.training || self.rate == 0.0 {
            return Ok(x);
        }
        let u = cx.random_uniform(ty)?;
        let rate = cx.g.full_like(self.rate, u)?;
        let keep = cx.g.compare(Comparison::Ge, u, rate)?;
        let scaled = cx.g.mul_scalar(x, 1.0 / (1.0 - self.rate))?;
        let zero = cx.g.zeros_like(x)?;
        cx.g.select(keep, scaled, zero)
    }
}
