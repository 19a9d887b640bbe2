//! Keras' `Dot`: the batched dot product of two inputs along one axis of each
//! (`Dot(axes = -1)([a, b])`), optionally of their L2-normalised rows (cosine proximity).

use crate::ir::{DotDims, Graph, UnaryOp, Value};
use crate::nn::entry::args;
use crate::nn::layer::{bad_config, expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxAttribute, OnnxForward, OnnxValue};
use crate::Result;
use strata_spec::{Args, Val};

/// Keras' `backend.epsilon()`: the smallest norm `normalize` divides by.
const EPSILON: f64 = 1e-7;

#[derive(Clone, Debug, PartialEq)]
pub struct Dot {
    pub name: String,
    /// The axis of each input the product runs along, counting the batch axis as 0 (never
    /// it); `-1` is the last. Keras' single `axes = a` is `[a, a]`.
    pub axes: [isize; 2],
    /// L2-normalise each input along its axis first, so the output is the cosine
    /// proximity.
    pub normalize: bool,
}

impl Dot {
    pub fn new(name: impl Into<String>, axes: isize) -> Dot {
        Dot {
            name: name.into(),
            axes: [axes, axes],
            normalize: false,
        }
    }

    /// The axis of each input (ranks counting the batch axis) the product runs along.
    fn resolved(&self, ranks: [usize; 2]) -> Result<[usize; 2]> {
        let mut out = [0; 2];
        for k in 0..2 {
            let (a, r) = (self.axes[k], ranks[k] as isize);
            let i = if a < 0 { a + r } else { a };
            if i <= 0 || i >= r {
                return Err(bad_config(
                    self,
                    format!("axis {a} is not an axis of input {k} (rank {r}) other than the batch"),
                ));
            }
            out[k] = i as usize;
        }
        Ok(out)
    }
}

/// `x * min(1 / sqrt(Σ x²), 1 / ε)` along `axis`: Keras' `normalize` (order 2).
fn l2_normalize(g: &mut Graph, x: Value, axis: usize) -> Result<Value> {
    let ty = g.try_ty("dot", x)?.clone();
    let sq = g.mul(x, x)?;
    let s = g.sum(sq, &[axis])?;
    let inv = g.unary(UnaryOp::Rsqrt, s)?;
    let cap = g.full_like(1.0 / EPSILON, inv)?;
    let inv = g.min(inv, cap)?;
    let keep: Vec<usize> = (0..ty.rank()).filter(|&d| d != axis).collect();
    let inv = g.broadcast_in_dim(inv, ty.shape.clone(), &keep)?;
    g.mul(x, inv)
}

impl Layer for Dot {
    fn class(&self) -> &'static str {
        "Dot"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([
            ("axes", Val::AxisPair(self.axes.map(|a| a as i64))),
            ("normalize", Val::Bool(self.normalize)),
        ]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        self.call(cx, &[x], params)
    }

    fn call(&self, cx: &mut Forward<'_>, inputs: &[Value], params: &[Value]) -> Result<Value> {
        expect_params::<0>(self, params)?;
        let shapes = super::merge::input_shapes(cx, inputs)?;
        let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
        let out = self.call_output_shape(&refs)?;
        let (mut x, mut y) = (inputs[0], inputs[1]);
        let [i, j] = self.resolved([shapes[0].len() + 1, shapes[1].len() + 1])?;
        let g = &mut *cx.g;
        if self.normalize {
            x = l2_normalize(g, x, i)?;
            y = l2_normalize(g, y, j)?;
        }
        let product = g.dot_general(
            x,
            y,
            DotDims {
                lhs_batch: vec![0],
                rhs_batch: vec![0],
                lhs_contract: vec![i],
                rhs_contract: vec![j],
            },
        )?;
        // Keras gives `(batch, 1)` rather than `(batch,)` when nothing else is left.
        let batch = g.ty(product).dims()[0];
        g.reshape(product, [&[batch][..], &out].concat())
    }

    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        self.call_onnx(cx, &[x], params)
    }

    /// `MatMul` of `[batch, rest of x, k]` and `[batch, k, rest of y]` (each input's dot
    /// axis moved next to the other's, the rest flattened), reshaped back; normalisation
    /// as `forward`'s, by `ReduceSumSquare`, `Sqrt`, `Reciprocal` and `Min`.
    fn call_onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        inputs: &[OnnxValue],
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        cx.params::<0>(params)?;
        let shapes = cx.input_shapes().to_vec();
        let (Some(xs), Some(ys), [x, y]) = (shapes.first(), shapes.get(1), inputs) else {
            return Err(bad_config(self, "takes exactly 2 inputs"));
        };
        let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
        let out = self.call_output_shape(&refs)?;
        let [i, j] = self.resolved([xs.len() + 1, ys.len() + 1])?;
        let mut operands = [x.clone(), y.clone()];
        if self.normalize {
            for (v, axis) in operands.iter_mut().zip([i, j]) {
                let ss = cx.op(
                    "ReduceSumSquare",
                    &[v],
                    vec![
                        ("axes", OnnxAttribute::Ints(vec![axis as i64])),
                        ("keepdims", OnnxAttribute::Int(1)),
                    ],
                );
                let norm = cx.op("Sqrt", &[&ss], vec![]);
                let inv = cx.op("Reciprocal", &[&norm], vec![]);
                let cap = cx.scalar(1.0 / EPSILON);
                let inv = cx.op("Min", &[&inv, &cap], vec![]);
                *v = cx.op("Mul", &[v, &inv], vec![]);
            }
        }
        let k = xs[i - 1] as i64;
        // x: its dot axis last; y: its dot axis right after the batch.
        let mut px: Vec<i64> = (0..=xs.len() as i64).filter(|&d| d != i as i64).collect();
        px.push(i as i64);
        let mut py: Vec<i64> = vec![0, j as i64];
        py.extend((1..=ys.len() as i64).filter(|&d| d != j as i64));
        let xt = cx.transpose(&operands[0], &px);
        let yt = cx.transpose(&operands[1], &py);
        let xshape = cx.ints(&[0, -1, k]);
        let yshape = cx.ints(&[0, k, -1]);
        let x3 = cx.op("Reshape", &[&xt, &xshape], vec![]);
        let y3 = cx.op("Reshape", &[&yt, &yshape], vec![]);
        let product = cx.op("MatMul", &[&x3, &y3], vec![]);
        let dims: Vec<i64> = std::iter::once(0)
            .chain(out.iter().map(|&d| d as i64))
            .collect();
        let shape = cx.ints(&dims);
        Ok(cx.op("Reshape", &[&product, &shape], vec![]))
    }
}
