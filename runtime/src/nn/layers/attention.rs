//! Keras' attention layers over sequences `(steps, features)`: `Attention` (Luong-style,
//! on a list `[query, value]` or `[query, value, key]`) and `MultiHeadAttention` (on
//! `(query, value)` or `(query, value, key)`, with its query, key, value and output
//! projections). Both compose products (`dot_general`), the softmax and, in training,
//! dropout of the attention weights; `use_causal_mask`, an argument of Keras' call, is
//! one of the layer here.

use crate::ir::{BinaryOp, Comparison, DType, DotDims, Graph, TensorType, Value};
use crate::nn::activation::softmax;
use crate::nn::entry::{args, initializer, score_mode};
use crate::nn::layer::{bad_config, expect_params, Forward, Layer};
use crate::nn::onnx::{OnnxAttribute, OnnxData, OnnxForward, OnnxValue};
use crate::nn::Initializer;
use crate::Result;
use std::fmt;
use strata_spec::{Args, Val};

/// What a masked score becomes, as in Keras: far below any real one, so its weight is 0.
const MASKED: f64 = -1e9;

/// How `Attention` scores a query step against a key step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScoreMode {
    /// Their dot product.
    Dot,
    /// The sum over features of `tanh(query + key)`, times a learned weight.
    Concat,
}

impl ScoreMode {
    pub const ALL: [ScoreMode; 2] = [ScoreMode::Dot, ScoreMode::Concat];

    /// The Keras name.
    pub fn name(self) -> &'static str {
        match self {
            ScoreMode::Dot => "dot",
            ScoreMode::Concat => "concat",
        }
    }

    pub fn from_name(name: &str) -> Option<ScoreMode> {
        ScoreMode::ALL.into_iter().find(|m| m.name() == name)
    }
}

impl fmt::Display for ScoreMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `scores` (`[..., query steps, key steps]`) with every score of a later key than its
/// query step pushed down to [`MASKED`] (Keras' causal mask: step `i` sees `j <= i`).
fn causal(g: &mut Graph, scores: Value) -> Result<Value> {
    let seen = causal_seen(g, scores)?;
    masked(g, scores, seen)
}

/// Where a query step may see a key step under the causal mask (`j <= i`), as `scores`'
/// shape.
fn causal_seen(g: &mut Graph, scores: Value) -> Result<Value> {
    let ty = g.try_ty("attention", scores)?.clone();
    let r = ty.rank();
    let index = TensorType::new(DType::I32, ty.shape.clone());
    let rows = g.iota(index.clone(), r - 2)?;
    let cols = g.iota(index, r - 1)?;
    g.compare(Comparison::Ge, rows, cols)
}

/// `scores` pushed down to [`MASKED`] where `seen` is false (Keras adds the large
/// negative number where its mask is 0).
fn masked(g: &mut Graph, scores: Value, seen: Value) -> Result<Value> {
    let down = g.add_scalar(scores, MASKED)?;
    g.select(seen, scores, down)
}

/// Inverted dropout of the attention weights in training, as Keras' (and the Dropout
/// layer's): each dropped with probability `rate`, the rest scaled by `1 / (1 - rate)`.
fn dropout(cx: &mut Forward<'_>, weights: Value, rate: f64) -> Result<Value> {
    if !cx.training || rate == 0.0 {
        return Ok(weights);
    }
    let ty = cx.g.try_ty("attention", weights)?.clone();
    let u = cx.random_uniform(ty)?;
    let r = cx.g.full_like(rate, u)?;
    let keep = cx.g.compare(Comparison::Ge, u, r)?;
    let scaled = cx.g.mul_scalar(weights, 1.0 / (1.0 - rate))?;
    let zero = cx.g.zeros_like(weights)?;
    cx.g.select(keep, scaled, zero)
}

/// ONNX: `[query steps, key steps]` of 0 where a step may be seen and [`MASKED`] where
/// not, added to the scores (the same values `causal`'s select gives).
fn onnx_causal(cx: &mut OnnxForward<'_>, steps: usize, keys: usize) -> OnnxValue {
    let data = (0..steps)
        .flat_map(|i| (0..keys).map(move |j| if j <= i { 0.0 } else { MASKED as f32 }))
        .collect();
    cx.constant(&[steps, keys], OnnxData::F32(data))
}

/// `[batch, steps, features]` inputs of a call, from the shapes without the batch axis.
fn steps(shapes: &[Vec<usize>], i: usize) -> [usize; 2] {
    let s = shapes.get(i).map_or(&[][..], |s| s.as_slice());
    [0, 1].map(|k| s.get(k).copied().unwrap_or(1))
}

/// The dot-product (Luong-style) attention of Keras' `Attention`, on a list `[query,
/// value]` or `[query, value, key]` (the key defaults to the value).
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    pub name: String,
    /// Multiply the scores by a learned scalar `scale` (starting at 1).
    pub use_scale: bool,
    pub score_mode: ScoreMode,
    /// The fraction of attention weights dropped in training, in `[0, 1)`.
    pub dropout: f64,
    /// Each query step sees only the value steps up to its own (decoder self-attention).
    pub use_causal_mask: bool,
}

impl Attention {
    pub fn new(name: impl Into<String>) -> Attention {
        Attention {
            name: name.into(),
            use_scale: false,
            score_mode: ScoreMode::Dot,
            dropout: 0.0,
            use_causal_mask: false,
        }
    }
}

impl Layer for Attention {
    fn class(&self) -> &'static str {
        "Attention"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([
            ("use_scale", Val::Bool(self.use_scale)),
            ("score_mode", score_mode(self.score_mode)),
            ("dropout", Val::Float(self.dropout)),
            ("use_causal_mask", Val::Bool(self.use_causal_mask)),
        ]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        self.call(cx, &[x], params)
    }

    fn call(&self, cx: &mut Forward<'_>, inputs: &[Value], params: &[Value]) -> Result<Value> {
        let shapes = super::merge::input_shapes(cx, inputs)?;
        let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
        self.call_output_shape(&refs)?;
        let (scale, concat_weight) = self.weights(params)?;
        let (q, v) = (inputs[0], inputs[1]);
        let k = inputs.get(2).copied().unwrap_or(v);
        let g = &mut *cx.g;
        let mut scores = match self.score_mode {
            ScoreMode::Dot => {
                let s = g.dot_general(q, k, batched(&[2], &[2]))?;
                match scale {
                    Some(c) => g.mul(s, c)?,
                    None => s,
                }
            }
            ScoreMode::Concat => {
                // [b, Tq, 1, d] + [b, 1, Tv, d], broadcast to [b, Tq, Tv, d].
                let ([b, tq, d], tv) = (dims3(g, q)?, dims3(g, k)?[1]);
                let to = vec![b, tq, tv, d];
                let qe = g.broadcast_in_dim(q, to.clone(), &[0, 1, 3])?;
                let ke = g.broadcast_in_dim(k, to, &[0, 2, 3])?;
                let mut sum = g.add(qe, ke)?;
                if let Some(c) = scale {
                    sum = g.mul(c, sum)?;
                }
                let t = g.tanh(sum)?;
                let s = g.sum(t, &[3])?;
                match concat_weight {
                    Some(w) => g.mul(w, s)?,
                    None => s,
                }
            }
        };
        if self.use_causal_mask {
            scores = causal(g, scores)?;
        }
        let weights = softmax(g, scores)?;
        let weights = dropout(cx, weights, self.dropout)?;
        cx.g.dot_general(weights, v, batched(&[2], &[1]))
    }

    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        self.call_onnx(cx, &[x], params)
    }

    /// `MatMul` of the query and the transposed key (or, for `concat`, `Tanh` of their
    /// broadcast sum, `ReduceSum`med), the additive causal mask, `Softmax`, `MatMul` with
    /// the value. Dropout is inference's identity.
    fn call_onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        inputs: &[OnnxValue],
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        let shapes = cx.input_shapes().to_vec();
        let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
        self.call_output_shape(&refs)?;
        let n = self.use_scale as usize + (self.score_mode == ScoreMode::Concat) as usize;
        if params.len() != n {
            return Err(bad_config(
                self,
                format!(
                    "the ONNX mapping expects {n} weight(s), got {}",
                    params.len()
                ),
            ));
        }
        let scale = self.use_scale.then(|| &params[0]);
        let concat_weight = (self.score_mode == ScoreMode::Concat).then(|| &params[n - 1]);
        let (q, v) = (&inputs[0], &inputs[1]);
        let k = inputs.get(2).unwrap_or(v);
        let key = if inputs.len() > 2 { 2 } else { 1 };
        let [tq, d] = steps(&shapes, 0);
        let tv = steps(&shapes, key)[0];
        let mut scores = match self.score_mode {
            ScoreMode::Dot => {
                let kt = cx.transpose(k, &[0, 2, 1]);
                let s = cx.op("MatMul", &[q, &kt], vec![]);
                match scale {
                    Some(c) => cx.op("Mul", &[&s, c], vec![]),
                    None => s,
                }
            }
            ScoreMode::Concat => {
                let (qs, ks) = (
                    cx.ints(&[0, tq as i64, 1, d as i64]),
                    cx.ints(&[0, 1, tv as i64, d as i64]),
                );
                let qe = cx.op("Reshape", &[q, &qs], vec![]);
                let ke = cx.op("Reshape", &[k, &ks], vec![]);
                let mut sum = cx.op("Add", &[&qe, &ke], vec![]);
                if let Some(c) = scale {
                    sum = cx.op("Mul", &[c, &sum], vec![]);
                }
                let t = cx.op("Tanh", &[&sum], vec![]);
                let axes = cx.ints(&[3]);
                let s = cx.op(
                    "ReduceSum",
                    &[&t, &axes],
                    vec![("keepdims", OnnxAttribute::Int(0))],
                );
                match concat_weight {
                    Some(w) => cx.op("Mul", &[w, &s], vec![]),
                    None => s,
                }
            }
        };
        if self.use_causal_mask {
            let mask = onnx_causal(cx, tq, tv);
            scores = cx.op("Add", &[&scores, &mask], vec![]);
        }
        let weights = cx.op(
            "Softmax",
            &[&scores],
            vec![("axis", OnnxAttribute::Int(-1))],
        );
        Ok(cx.op("MatMul", &[&weights, v], vec![]))
    }
}

impl Attention {
    /// `scale` (with `use_scale`) and `concat_score_weight` (with the concat score), in
    /// the order the catalogue lists them.
    fn weights(&self, params: &[Value]) -> Result<(Option<Value>, Option<Value>)> {
        let concat = self.score_mode == ScoreMode::Concat;
        Ok(match (self.use_scale, concat) {
            (false, false) => {
                expect_params::<0>(self, params)?;
                (None, None)
            }
            (true, false) => {
                let [s] = expect_params(self, params)?;
                (Some(s), None)
            }
            (false, true) => {
                let [w] = expect_params(self, params)?;
                (None, Some(w))
            }
            (true, true) => {
                let [s, w] = expect_params(self, params)?;
                (Some(s), Some(w))
            }
        })
    }
}

/// A product batched over axis 0 (and `extra` batch axes), contracting `lhs` with `rhs`.
fn batched(lhs: &[usize], rhs: &[usize]) -> DotDims {
    DotDims {
        lhs_batch: vec![0],
        rhs_batch: vec![0],
        lhs_contract: lhs.to_vec(),
        rhs_contract: rhs.to_vec(),
    }
}

/// The dims of a `[batch, steps, features]` value.
fn dims3(g: &Graph, x: Value) -> Result<[usize; 3]> {
    let d = g.try_ty("attention", x)?.dims().to_vec();
    d.try_into()
        .map_err(|d: Vec<usize>| crate::Error::invalid("attention", format!("rank of {d:?}")))
}

/// Keras' `MultiHeadAttention` over sequences: the query, key and value projected to
/// `num_heads` heads of `key_dim` (`value_dim`) features, scaled dot-product attention in
/// each head, and the heads projected back to `output_shape` features (default: the
/// query's).
#[derive(Clone, Debug, PartialEq)]
pub struct MultiHeadAttention {
    pub name: String,
    pub num_heads: usize,
    pub key_dim: usize,
    /// Features per head of the value projection; `None`: `key_dim`.
    pub value_dim: Option<usize>,
    /// The fraction of attention weights dropped in training, in `[0, 1)`.
    pub dropout: f64,
    pub use_bias: bool,
    /// The output's features; `None`: the query's.
    pub output_shape: Option<usize>,
    pub kernel_initializer: Initializer,
    pub bias_initializer: Initializer,
    /// Each query step sees only the value steps up to its own (decoder self-attention).
    pub use_causal_mask: bool,
}

impl MultiHeadAttention {
    pub fn new(name: impl Into<String>, num_heads: usize, key_dim: usize) -> MultiHeadAttention {
        MultiHeadAttention {
            name: name.into(),
            num_heads,
            key_dim,
            value_dim: None,
            dropout: 0.0,
            use_bias: true,
            output_shape: None,
            kernel_initializer: Initializer::GlorotUniform,
            bias_initializer: Initializer::Zeros,
            use_causal_mask: false,
        }
    }

    /// The four projections' kernels and biases (`None` without `use_bias`), in the
    /// catalogue's order: query, key, value, output.
    fn projections(&self, params: &[Value]) -> Result<[(Value, Option<Value>); 4]> {
        let per = if self.use_bias { 2 } else { 1 };
        if params.len() != 4 * per {
            return Err(bad_config(
                self,
                format!(
                    "forward expects {} parameter value(s), got {}",
                    4 * per,
                    params.len()
                ),
            ));
        }
        Ok(std::array::from_fn(|i| {
            (params[i * per], self.use_bias.then(|| params[i * per + 1]))
        }))
    }
}

impl Layer for MultiHeadAttention {
    fn class(&self) -> &'static str {
        "MultiHeadAttention"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn args(&self) -> Option<Args> {
        Some(args([
            ("num_heads", Val::Usize(self.num_heads)),
            ("key_dim", Val::Usize(self.key_dim)),
            ("value_dim", Val::OptionalUsize(self.value_dim)),
            ("dropout", Val::Float(self.dropout)),
            ("use_bias", Val::Bool(self.use_bias)),
            ("output_shape", Val::OptionalUsize(self.output_shape)),
            ("kernel_initializer", initializer(self.kernel_initializer)),
            ("bias_initializer", initializer(self.bias_initializer)),
            ("use_causal_mask", Val::Bool(self.use_causal_mask)),
        ]))
    }

    fn forward(&self, cx: &mut Forward<'_>, x: Value, params: &[Value]) -> Result<Value> {
        self.call(cx, &[x], params)
    }

    fn call(&self, cx: &mut Forward<'_>, inputs: &[Value], params: &[Value]) -> Result<Value> {
        let shapes = super::merge::input_shapes(cx, inputs)?;
        let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
        self.call_output_shape(&refs)?;
        let [pq, pk, pv, po] = self.projections(params)?;
        let (q, v) = (inputs[0], inputs[1]);
        let k = inputs.get(2).copied().unwrap_or(v);
        let g = &mut *cx.g;
        // [b, T, d] · [d, heads, size] → [b, T, heads, size], plus [heads, size].
        let project = |g: &mut Graph, x: Value, (kernel, bias): (Value, Option<Value>)| {
            let y = g.dot_general(
                x,
                kernel,
                DotDims {
                    lhs_batch: vec![],
                    rhs_batch: vec![],
                    lhs_contract: vec![2],
                    rhs_contract: vec![0],
                },
            )?;
            match bias {
                Some(b) => g.add(y, b),
                None => Ok(y),
            }
        };
        let query = project(g, q, pq)?;
        let key = project(g, k, pk)?;
        let value = project(g, v, pv)?;
        // As Keras: the query scaled by 1/sqrt(key_dim) before the product.
        let query = g.mul_scalar(query, 1.0 / (self.key_dim as f64).sqrt())?;
        // [b, T, h, k] · [b, S, h, k] over (b, h) → [b, h, T, S].
        let mut scores = g.dot_general(
            query,
            key,
            DotDims {
                lhs_batch: vec![0, 2],
                rhs_batch: vec![0, 2],
                lhs_contract: vec![3],
                rhs_contract: vec![3],
            },
        )?;
        // Keras' attention mask `[b, T, S]` (nonzero: the query step sees the key step),
        // the same for every head, and with the causal mask both must allow a score.
        let mut seen = match inputs.get(3) {
            Some(&mask) => {
                let zero = g.zeros_like(mask)?;
                let allowed = g.compare(Comparison::Ne, mask, zero)?;
                let shape = g.ty(scores).shape.clone();
                Some(g.broadcast_in_dim(allowed, shape, &[0, 2, 3])?)
            }
            None => None,
        };
        if self.use_causal_mask {
            let causal = causal_seen(g, scores)?;
            seen = Some(match seen {
                Some(s) => g.binary(BinaryOp::And, s, causal)?,
                None => causal,
            });
        }
        if let Some(seen) = seen {
            scores = masked(g, scores, seen)?;
        }
        let weights = softmax(g, scores)?;
        let weights = dropout(cx, weights, self.dropout)?;
        let g = &mut *cx.g;
        // [b, h, T, S] · [b, S, h, v] over (b, h) → [b, h, T, v].
        let heads = g.dot_general(
            weights,
            value,
            DotDims {
                lhs_batch: vec![0, 1],
                rhs_batch: vec![0, 2],
                lhs_contract: vec![3],
                rhs_contract: vec![1],
            },
        )?;
        // [b, h, T, v] · [h, v, out] over (h, v) → [b, T, out].
        let (kernel, bias) = po;
        let y = g.dot_general(
            heads,
            kernel,
            DotDims {
                lhs_batch: vec![],
                rhs_batch: vec![],
                lhs_contract: vec![1, 3],
                rhs_contract: vec![0, 1],
            },
        )?;
        match bias {
            Some(b) => g.add(y, b),
            None => Ok(y),
        }
    }

    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        self.call_onnx(cx, &[x], params)
    }

    /// Each projection a `MatMul` with its kernel reshaped to a matrix (and an `Add` of
    /// the bias), the heads split by `Reshape` and `Transpose`, `MatMul`s for the scores
    /// and the weighted values, the additive causal mask, `Softmax`, and the heads joined
    /// back for the output projection.
    fn call_onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        inputs: &[OnnxValue],
        params: &[OnnxValue],
    ) -> Result<OnnxValue> {
        if inputs.len() > 3 {
            return Err(bad_config(
                self,
                "an attention_mask has no ONNX mapping yet",
            ));
        }
        let shapes = cx.input_shapes().to_vec();
        let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
        let out = self.call_output_shape(&refs)?;
        let per = if self.use_bias { 2 } else { 1 };
        if params.len() != 4 * per {
            return Err(bad_config(
                self,
                format!(
                    "the ONNX mapping expects {} weight(s), got {}",
                    4 * per,
                    params.len()
                ),
            ));
        }
        let w = |i: usize| {
            (
                &params[i * per],
                self.use_bias.then(|| &params[i * per + 1]),
            )
        };
        let (q, v) = (&inputs[0], &inputs[1]);
        let key_input = if inputs.len() > 2 { 2 } else { 1 };
        let k = inputs.get(2).unwrap_or(v);
        let h = self.num_heads as i64;
        let kd = self.key_dim as i64;
        let vd = self.value_dim.unwrap_or(self.key_dim) as i64;
        let [t, dq] = steps(&shapes, 0);
        let [s, dv] = steps(&shapes, 1);
        let dk = steps(&shapes, key_input)[1];
        // [b, T, d] → [b, T, h·size] → [b, T, h, size] → `perm`.
        let project = |cx: &mut OnnxForward<'_>,
                       x: &OnnxValue,
                       (kernel, bias): (&OnnxValue, Option<&OnnxValue>),
                       d: usize,
                       steps: usize,
                       size: i64,
                       perm: &[i64]| {
            let matrix = cx.ints(&[d as i64, h * size]);
            let kernel = cx.op("Reshape", &[kernel, &matrix], vec![]);
            let mut y = cx.op("MatMul", &[x, &kernel], vec![]);
            if let Some(b) = bias {
                let flat = cx.ints(&[h * size]);
                let b = cx.op("Reshape", &[b, &flat], vec![]);
                y = cx.op("Add", &[&y, &b], vec![]);
            }
            let split = cx.ints(&[0, steps as i64, h, size]);
            let y = cx.op("Reshape", &[&y, &split], vec![]);
            cx.transpose(&y, perm)
        };
        let query = project(cx, q, w(0), dq, t, kd, &[0, 2, 1, 3]);
        let key = project(cx, k, w(1), dk, s, kd, &[0, 2, 3, 1]);
        let value = project(cx, v, w(2), dv, s, vd, &[0, 2, 1, 3]);
        let scale = cx.scalar(1.0 / (self.key_dim as f64).sqrt());
        let query = cx.op("Mul", &[&query, &scale], vec![]);
        let mut scores = cx.op("MatMul", &[&query, &key], vec![]);
        if self.use_causal_mask {
            let mask = onnx_causal(cx, t, s);
            scores = cx.op("Add", &[&scores, &mask], vec![]);
        }
        let weights = cx.op(
            "Softmax",
            &[&scores],
            vec![("axis", OnnxAttribute::Int(-1))],
        );
        let heads = cx.op("MatMul", &[&weights, &value], vec![]);
        let heads = cx.transpose(&heads, &[0, 2, 1, 3]);
        let joined = cx.ints(&[0, t as i64, h * vd]);
        let heads = cx.op("Reshape", &[&heads, &joined], vec![]);
        let (kernel, bias) = w(3);
        let dout = out.last().copied().unwrap_or(dq) as i64;
        let matrix = cx.ints(&[h * vd, dout]);
        let kernel = cx.op("Reshape", &[kernel, &matrix], vec![]);
        let y = cx.op("MatMul", &[&heads, &kernel], vec![]);
        Ok(match bias {
            Some(b) => cx.op("Add", &[&y, b], vec![]),
            None => y,
        })
    }
}
