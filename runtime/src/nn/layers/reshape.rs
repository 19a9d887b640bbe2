//! `Reshape`: the non-batch axes rearranged into `target_shape` (one entry may be `-1`,
//! inferred from the element count, as in Keras).

use crate::ir::Value;
use crate::nn::entry::args;
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::Result;
use strata_spec::{Args, Val};

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

    fn args(&self) -> Option<Args> {
        let target = self.target_shape.iter().map(|&d| d as i64).collect();
        Some(args([("target_shape", Val::TargetShape(target))]))
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
