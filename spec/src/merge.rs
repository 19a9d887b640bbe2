//! The merge layers' rules: how the shapes of a list of inputs combine. An input whose
//! shape is not known (an earlier mistake) makes the output unknown, never an error.

use crate::error::MergeError;
use crate::shape::Shape;
use crate::value::Args;

/// Add, Subtract, Multiply, Average, Maximum, Minimum: one rank, each axis of equal size
/// or 1 (broadcast, as Keras does between equal ranks); an unknown size stays unknown.
pub(crate) fn elementwise(_: &Args, inputs: &[Shape]) -> Result<Shape, MergeError> {
    if inputs.iter().any(|s| s.open) {
        return Ok(Shape::unknown());
    }
    let mut out = inputs[0].dims.clone();
    for (i, s) in inputs.iter().enumerate().skip(1) {
        let clash = MergeError::Incompatible {
            first: first_clash(inputs, i, |a, b| elementwise_pair(a, b).is_none()),
            second: i,
            concat_axis: None,
        };
        out = elementwise_pair(&out, &s.dims).ok_or(clash)?;
    }
    Ok(Shape {
        open: false,
        dims: out,
    })
}

/// The broadcast of two shapes of one rank, `None` when they do not combine.
fn elementwise_pair(a: &[Option<usize>], b: &[Option<usize>]) -> Option<Vec<Option<usize>>> {
    if a.len() != b.len() {
        return None;
    }
    a.iter()
        .zip(b)
        .map(|(&x, &y)| match (x, y) {
            (Some(1), y) => Some(y),
            (x, Some(1)) => Some(x),
            (Some(x), Some(y)) if x != y => None,
            (Some(x), _) | (_, Some(x)) => Some(Some(x)),
            (None, None) => Some(None),
        })
        .collect()
}

/// The earliest input before `i` that `clashes` with input `i` (the one to name beside
/// it), or input 0 when only their combination does.
fn first_clash(
    inputs: &[Shape],
    i: usize,
    clashes: impl Fn(&[Option<usize>], &[Option<usize>]) -> bool,
) -> usize {
    (0..i)
        .find(|&j| clashes(&inputs[j].dims, &inputs[i].dims))
        .unwrap_or(0)
}

/// Concatenate along `axis` (Keras': the batch axis is 0): one rank, equal sizes on every
/// other axis; the joined axis is the sum of the inputs' sizes.
pub(crate) fn concatenate(a: &Args, inputs: &[Shape]) -> Result<Shape, MergeError> {
    if inputs.iter().any(|s| s.open) {
        return Ok(Shape::unknown());
    }
    let axis = a.axis();
    let Ok(Some(k)) = inputs[0].axis(axis) else {
        return Err(MergeError::Axis { axis });
    };
    let clashes = |x: &[Option<usize>], y: &[Option<usize>]| {
        x.len() != y.len()
            || x.iter()
                .zip(y)
                .enumerate()
                .any(|(d, (p, q))| d != k && matches!((p, q), (Some(p), Some(q)) if p != q))
    };
    let mut out = inputs[0].dims.clone();
    for (i, s) in inputs.iter().enumerate().skip(1) {
        if clashes(&inputs[0].dims, &s.dims) {
            return Err(MergeError::Incompatible {
                first: first_clash(inputs, i, clashes),
                second: i,
                concat_axis: Some(axis),
            });
        }
        for (d, size) in s.dims.iter().enumerate() {
            out[d] = if d == k {
                out[d].zip(*size).map(|(p, q)| p.saturating_add(q))
            } else {
                out[d].or(*size)
            };
        }
    }
    Ok(Shape {
        open: false,
        dims: out,
    })
}
