//! Keras' merge layers, called on a list of inputs (`Add()([a, b])`): the elementwise
//! ones (`Add`, `Subtract`, `Multiply`, `Average`, `Maximum`, `Minimum`), one definition
//! told apart by `OP`, and `Concatenate`. Sizes of 1 broadcast against the others', as in
//! Keras; the shapes a list may have are the catalogue's rules.

use crate::ir::{BinaryOp, Value};
use crate::nn::entry::{args, axis};
use crate::nn::layer::{expect_params, Forward, Layer};
use crate::nn::layers::axis::feature_axis;
use crate::nn::onnx::{OnnxAttribute, OnnxForward, OnnxValue};
use crate::Result;
use strata_spec::Args;

/// The elementwise merges: which one `OP` is.
pub mod op {
    pub const ADD: u8 = 0;
    pub const SUBTRACT: u8 = 1;
    pub const MULTIPLY: u8 = 2;
    pub const AVERAGE: u8 = 3;
    pub const MAXIMUM: u8 = 4;
    pub const MINIMUM: u8 = 5;
}

#[derive(Clone, PartialEq)]
pub struct Elementwise<const OP: u8> {
    pub name: String,
}

/// The sum of the inputs.
pub type Add = Elementwise<{ op::ADD }>;
/// The first of two inputs minus the second.
pub type Subtract = Elementwise<{ op::SUBTRACT }>;
/// The product of the inputs.
pub type Multiply = Elementwise<{ op::MULTIPLY }>;
/// The mean of the inputs.
pub type Average = Elementwise<{ op::AVERAGE }>;
/// The largest of the inputs, elementwise.
pub type Maximum = Elementwise<{ op::MAXIMUM }>;
/// The smallest of the inputs, elementwise.
pub type Minimum = Elementwise<{ op::MINIMUM }>;

/// Printed under the layer's own name (`Add { .. }`), the type a user writes.
impl<const OP: u8> std::fmt::Debug for Elementwise<OP> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(self.class())
            .field("name", &self.name)
            .finish()
    }
}

impl<const OP: u8> Elementwise<OP> {
    pub fn new(name: impl Into<String>) -> Self {
        Elementwise { name: name.into() }
    }

    /// How two inputs combine (the average sums, then divides once).
    fn pairwise(&self) -> BinaryOp {
        match OP {
            op::SUBTRACT => BinaryOp::Sub,
            op::MULTIPLY => BinaryOp::Mul,
            op::MAXIMUM => BinaryOp::Max,
            op::MINIMUM => BinaryOp::Min,
            _ => BinaryOp::Add,
        }
    }
}

impl<const OP: u8> Layer for Elementwise<OP> {
    fn class(&self) -> &'static str {
        match OP {
            op::SUBTRACT => "Subtract",
            op::MULTIPLY => "Multiply",
            op::AVERAGE => "Average",
            op::MAXIMUM => "Maximum",
            op::MINIMUM => "Minimum",
            _ => "Add",
        }
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(Args::default())
    }

    /// A list of one input (Keras 3 accepts it; the merge of one is that input).
    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        self.call(cx, &[x], params)
    }

    fn call(&self, cx: &mut Forward<'_>, inputs: &[Value], params: &[Value]) -> Result<Value> {
        checked(self, cx, inputs, params)?;
        let mut out = inputs[0];
        for &x in &inputs[1..] {
            out = cx.g.binary_bcast(self.pairwise(), out, x)?;
        }
        if OP == op::AVERAGE && inputs.len() > 1 {
            out = cx.g.mul_scalar(out, 1.0 / inputs.len() as f64)?;
        }
        Ok(out)
    }

    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        self.call_onnx(cx, &[x], params)
    }

    /// ONNX's variadic `Sum`, `Mean`, `Max`, `Min`; `Sub` and `Mul` pairwise. All broadcast
    /// as numpy does, which covers Keras' sizes of 1.
    fn call_onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        inputs: &[OnnxValue],
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        let refs: Vec<&OnnxValue> = inputs.iter().collect();
        let variadic = match OP {
            op::SUBTRACT => None,
            op::MULTIPLY => None,
            op::AVERAGE => Some("Mean"),
            op::MAXIMUM => Some("Max"),
            op::MINIMUM => Some("Min"),
            _ => Some("Sum"),
        };
        if let Some(op_type) = variadic {
            return Ok(cx.op(op_type, &refs, vec![]));
        }
        let op_type = if OP == op::SUBTRACT { "Sub" } else { "Mul" };
        let mut out = inputs[0].clone();
        for x in &inputs[1..] {
            out = cx.op(op_type, &[&out, x], vec![]);
        }
        Ok(out)
    }
}

/// The inputs joined along one axis.
#[derive(Clone, Debug, PartialEq)]
pub struct Concatenate {
    pub name: String,
    /// Keras' axis, counting the batch axis as 0 (`-1`: the last).
    pub axis: isize,
}

impl Concatenate {
    pub fn new(name: impl Into<String>) -> Concatenate {
        Concatenate {
            name: name.into(),
            axis: -1,
        }
    }
}

impl Layer for Concatenate {
    fn class(&self) -> &'static str {
        "Concatenate"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([("axis", axis(self.axis))]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        self.call(cx, &[x], params)
    }

    fn call(&self, cx: &mut Forward<'_>, inputs: &[Value], params: &[Value]) -> Result<Value> {
        checked(self, cx, inputs, params)?;
        let rank = cx.g.ty(inputs[0]).rank();
        cx.g.concatenate(inputs, feature_axis(self.axis, rank))
    }

    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        self.call_onnx(cx, &[x], params)
    }

    fn call_onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        inputs: &[OnnxValue],
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        let a = feature_axis(self.axis, cx.input_shape().len() + 1) as i64;
        let refs: Vec<&OnnxValue> = inputs.iter().collect();
        Ok(cx.op("Concat", &refs, vec![("axis", OnnxAttribute::Int(a))]))
    }
}

/// Each input's shape without the batch axis (an empty list is refused by the shape rule
/// before anything reads `inputs[0]`).
pub(super) fn input_shapes(cx: &Forward<'_>, inputs: &[Value]) -> Result<Vec<Vec<usize>>> {
    inputs
        .iter()
        .map(|&x| {
            Ok(cx
                .g
                .try_ty("merge", x)?
                .dims()
                .get(1..)
                .unwrap_or(&[])
                .to_vec())
        })
        .collect()
}

/// Checks a merge's call: no parameters, and inputs whose shapes its rule accepts.
fn checked(layer: &dyn Layer, cx: &Forward<'_>, inputs: &[Value], params: &[Value]) -> Result<()> {
    expect_params::<0>(layer, params)?;
    let shapes = input_shapes(cx, inputs)?;
    let refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    layer.call_output_shape(&refs)?;
    Ok(())
}
