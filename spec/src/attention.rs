//! The rules of the layers that combine several inputs by products rather than
//! elementwise: `Dot`, `Attention` and `MultiHeadAttention`. As for the merges, an input
//! whose shape is not known (an earlier mistake, a deferred input) makes the output
//! unknown, never an error.

use crate::entry::{param, Param};
use crate::error::MergeError;
use crate::shape::Shape;
use crate::value::Args;

/// Keras' `Dot`: the batched dot product of two inputs along `axes` (one axis each,
/// counting the batch axis as 0). The output is the first input's axes without its dot
/// axis, then the second's without its batch and dot axes; `(1,)` when nothing is left.
pub(crate) fn dot(a: &Args, inputs: &[Shape]) -> Result<Shape, MergeError> {
    if inputs.iter().any(|s| s.open) {
        return Ok(Shape::unknown());
    }
    let axes = a.axis_pair("axes");
    let err = MergeError::DotAxes { axes };
    let (x, y) = (&inputs[0], &inputs[1]);
    let i = x.axis(axes[0]).ok().flatten().ok_or(err.clone())?;
    let j = y.axis(axes[1]).ok().flatten().ok_or(err.clone())?;
    if let (Some(p), Some(q)) = (x.dims[i], y.dims[j]) {
        if p != q {
            return Err(err);
        }
    }
    let rest = |s: &Shape, skip: usize| -> Vec<Option<usize>> {
        s.dims
            .iter()
            .enumerate()
            .filter(|&(k, _)| k != skip)
            .map(|(_, &d)| d)
            .collect()
    };
    let mut dims = rest(x, i);
    dims.extend(rest(y, j));
    if dims.is_empty() {
        dims.push(Some(1));
    }
    Ok(Shape { open: false, dims })
}

/// Each input as `[steps, features]`; `None` when one is not known yet. Attention layers
/// take sequences only: Keras' higher-rank inputs (`attention_axes`) are not supported.
fn sequences(inputs: &[Shape]) -> Result<Option<Vec<[Option<usize>; 2]>>, MergeError> {
    let mut out = Vec::with_capacity(inputs.len());
    let mut open = false;
    for (i, s) in inputs.iter().enumerate() {
        match s.exactly::<2>() {
            Some(d) if !s.open => out.push(d),
            Some(_) => open = true,
            None => return Err(MergeError::NotSequence { input: i }),
        }
    }
    Ok(if open { None } else { Some(out) })
}

/// The value (input 1) and the key (input 2, when given) have one step each.
fn key_as_long_as_value(s: &[[Option<usize>; 2]]) -> Result<(), MergeError> {
    if let Some(k) = s.get(2) {
        if let (Some(v), Some(k)) = (s[1][0], k[0]) {
            if v != k {
                return Err(MergeError::Disagree {
                    first: 1,
                    second: 2,
                    need: "a key with as many steps as the value (one key per value)",
                });
            }
        }
    }
    Ok(())
}

/// Keras' `Attention` on `[query, value]` or `[query, value, key]` (the key defaults to
/// the value): the query and the key have as many features (their dot product or sum
/// is the score); the output has the query's steps and the value's features.
pub(crate) fn attention(_: &Args, inputs: &[Shape]) -> Result<Shape, MergeError> {
    let Some(s) = sequences(inputs)? else {
        return Ok(Shape::unknown());
    };
    key_as_long_as_value(&s)?;
    let key = if s.len() > 2 { 2 } else { 1 };
    if let (Some(q), Some(k)) = (s[0][1], s[key][1]) {
        if q != k {
            return Err(MergeError::Disagree {
                first: 0,
                second: key,
                need: "a key with as many features as the query (each score combines a \
                       query step with a key step)",
            });
        }
    }
    Ok(Shape {
        open: false,
        dims: vec![s[0][0], s[1][1]],
    })
}

/// Keras' `Attention` weights: a learned scalar scale (`use_scale`) and, for the concat
/// score, a scalar weight of the summed `tanh`; both start at one, as in Keras.
pub(crate) fn attention_params(a: &Args, _: &[Shape]) -> Vec<Param> {
    let one = [Some(1), Some(1)];
    let mut p = Vec::new();
    if a.flag("use_scale") {
        p.push(param("scale", vec![], "ones", one));
    }
    if a.choice("score_mode") == "concat" {
        p.push(param("concat_score_weight", vec![], "ones", one));
    }
    p
}

/// Keras' `MultiHeadAttention` on `(query, value)` or `(query, value, key)`: the value
/// and the key have as many steps; the output has the query's steps and `output_shape`
/// features (default: the query's).
/// An `attention_mask` (input 3) is `(query steps, value steps)`, as Keras' `(B, T, S)`.
pub(crate) fn multi_head_attention(a: &Args, inputs: &[Shape]) -> Result<Shape, MergeError> {
    let Some(s) = sequences(inputs)? else {
        return Ok(Shape::unknown());
    };
    key_as_long_as_value(&s)?;
    if let Some(mask) = s.get(3) {
        let fits = |m: Option<usize>, d: Option<usize>| m.zip(d).is_none_or(|(m, d)| m == d);
        if !fits(mask[0], s[0][0]) || !fits(mask[1], s[1][0]) {
            return Err(MergeError::Disagree {
                first: 3,
                second: 0,
                need: "an attention_mask of (query steps, value steps)",
            });
        }
    }
    let features = a.optional_count("output_shape").map_or(s[0][1], Some);
    Ok(Shape {
        open: false,
        dims: vec![s[0][0], features],
    })
}

/// Keras' fans of a kernel of rank 3 or more (`compute_fans`): the axes before the last
/// two are a receptive field multiplying both.
fn fans(dims: &[Option<usize>]) -> [Option<usize>; 2] {
    let n = dims.len();
    let field = dims[..n - 2]
        .iter()
        .try_fold(1usize, |f, d| d.map(|d| f.saturating_mul(d)));
    [dims[n - 2], dims[n - 1]].map(|d| d.zip(field).map(|(d, f)| d.saturating_mul(f)))
}

/// `MultiHeadAttention`'s weights in Keras 3's order, names and layouts: the query, key
/// and value projections (`[features, num_heads, key_dim or value_dim]` kernels,
/// `[num_heads, ...]` biases), then the output projection `[num_heads, value_dim,
/// output features]`.
pub(crate) fn multi_head_attention_params(a: &Args, inputs: &[Shape]) -> Vec<Param> {
    let last = |i: usize| inputs.get(i).and_then(|s| s.last().ok().flatten());
    let (query, value) = (last(0), last(1));
    let key = if inputs.len() > 2 { last(2) } else { value };
    let heads = Some(a.count("num_heads"));
    let key_dim = a.count("key_dim");
    let value_dim = Some(a.optional_count("value_dim").unwrap_or(key_dim));
    let out = a.optional_count("output_shape").map_or(query, Some);
    let use_bias = a.flag("use_bias");
    let mut p = Vec::new();
    let projections: [(&'static str, &'static str, Option<usize>, Option<usize>); 4] = [
        ("query/kernel", "query/bias", query, Some(key_dim)),
        ("key/kernel", "key/bias", key, Some(key_dim)),
        ("value/kernel", "value/bias", value, value_dim),
        (
            "attention_output/kernel",
            "attention_output/bias",
            None,
            out,
        ),
    ];
    for (kernel, bias, features, size) in projections {
        let (dims, bias_dims) = if kernel.starts_with("attention_output") {
            (vec![heads, value_dim, size], vec![size])
        } else {
            (vec![features, heads, size], vec![heads, size])
        };
        let f = fans(&dims);
        p.push(param(kernel, dims, "kernel_initializer", f));
        if use_bias {
            p.push(param(bias, bias_dims, "bias_initializer", f));
        }
    }
    p
}
