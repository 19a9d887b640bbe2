//! `Reshape`: the non-batch axes rearranged into `target_shape` (one entry may be `-1`,
//! inferred from the element count, as in Keras).

use crate::ir::Value;
use crate::nn::layer::{bad_config, bad_input, expect_params, Forward, Layer, ParamSpec};
use crate::Result;

#[derive(Clone, Debug, PartialEq)]
pub struct Reshape {
    pub name: String,
    /// The output shape without batch; `-1` marks the one inferred axis.
    pub target_shape: Vec<isize>,
}

impl Reshape {
    pub fn new(name: impl Into<String>, target_shape: Vec<isize>) -> Reshape {
        Reshape {
            name: name.into(),
            target_shape,
        }
    }
}

impl Layer for Reshape {
    fn class(&self) -> &'static str {
        "Reshape"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn output_shape(&self, input: &[usize]) -> Result<Vec<usize>> {
        let inferred = self.target_shape.iter().filter(|&&d| d == -1).count();
        if inferred > 1 || self.target_shape.iter().any(|&d| d == 0 || d < -1) {
            return Err(bad_config(
                self,
                format!(
                    "target_shape {:?} must hold sizes >= 1 and at most one -1",
                    self.target_shape
                ),
            ));
        }
        let known: usize = self
            .target_shape
            .iter()
            .filter(|&&d| d > 0)
            .map(|&d| d as usize)
            .product();
        let count: usize = input.iter().product();
        let fill = if inferred == 1 { count / known } else { 1 };
        if known * fill != count {
            return Err(bad_input(
                self,
                input,
                &format!(
                    "{} element(s) to reshape to {:?}",
                    if inferred == 1 {
                        format!("a multiple of {known}")
                    } else {
                        known.to_string()
                    },
                    self.target_shape
                ),
            ));
        }
        Ok(self
            .target_shape
            .iter()
            .map(|&d| if d == -1 { fill } else { d as usize })
            .collect())
    }

    fn params(&self, _input: &[usize]) -> Result<Vec<ParamSpec>> {
        Ok(Vec::new())
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let dims = cx.g.try_ty("reshape", x)?.dims().to_vec();
        let (batch, rest) = dims.split_first().unwrap_or((&1, &[]));
        let mut shape = vec![*batch];
        shape.extend(self.output_shape(rest)?);
        cx.g.reshape(x, shape)
    }
}
