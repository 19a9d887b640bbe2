//! Several inputs (or targets, or outputs) carried as one: each sample's elements of every
//! tensor side by side in one f32 row, `[n, Σ elements]`. The data path (batching,
//! shuffling, the split over replicas, staging, the step graphs' signatures) then stays
//! the one for a single tensor; the step graphs split the row back into the tensors, each
//! converted to the element type its consumer takes. Integers travel as f32, which holds
//! every integer up to 2^24 exactly; larger ones are refused. Here are the layout's host
//! and graph halves; `train` packs a model's data with them, `loss` reads its outputs.

use super::{DType, Graph, Value};
use crate::{Error, Result, Tensor};
use ndarray::{ArrayD, Axis, IxDyn};

/// The packed dims of one sample of tensors of `shapes`: the one's own, or the elements of
/// each side by side (`[Σ elements]`).
pub(crate) fn packed_dims(shapes: &[Vec<usize>]) -> Vec<usize> {
    match shapes {
        [one] => one.clone(),
        _ => vec![shapes.iter().map(|s| s.iter().product::<usize>()).sum()],
    }
}

/// The largest integer an f32 holds exactly, and every one below it.
const EXACT: f64 = 16_777_216.0;

/// Packs `parts` (each `[n, ...]`, the same `n`) into one f32 `[n, Σ elements]`; `names`
/// say which part a mistake is in.
pub(crate) fn pack(what: &str, names: &[&str], parts: &[Tensor]) -> Result<Tensor> {
    let Some(first) = parts.first() else {
        return Err(Error::invalid(what, "no tensors to pack"));
    };
    let n = *first.dims().first().unwrap_or(&0);
    let mut columns = Vec::with_capacity(parts.len());
    for (k, p) in parts.iter().enumerate() {
        let name = names.get(k).copied().unwrap_or("?");
        let Some(&rows) = p.dims().first() else {
            return Err(Error::invalid(
                what,
                format!("`{name}` is a scalar; expected an array with one row per sample"),
            ));
        };
        if rows != n {
            return Err(Error::invalid(
                what,
                format!(
                    "every array needs one row per sample: `{}` has {n}, `{name}` has {rows}",
                    names.first().copied().unwrap_or("?")
                ),
            ));
        }
        columns.push(as_f32(what, name, p)?);
    }
    let width: usize = columns.iter().map(|c| c.len() / n.max(1)).sum();
    let total = n
        .checked_mul(width)
        .ok_or_else(|| Error::invalid(what, format!("{n} samples of {width} elements overflow")))?;
    let mut out = Vec::new();
    out.try_reserve_exact(total).map_err(|_| {
        Error::invalid(
            what,
            format!("cannot allocate {n} samples of {width} f32 elements"),
        )
    })?;
    for i in 0..n {
        for c in &columns {
            let w = c.len() / n;
            out.extend_from_slice(&c[i * w..(i + 1) * w]);
        }
    }
    let a = ArrayD::from_shape_vec(IxDyn(&[n, width]), out)
        .map_err(|e| Error::invalid(what, format!("packing: {e}")))?;
    Ok(Tensor::F32(a))
}

/// The f32 elements of `t` in row-major order; integers beyond ±2^24 are refused.
fn as_f32(what: &str, name: &str, t: &Tensor) -> Result<Vec<f32>> {
    let exact = |v: f64| {
        if v.abs() <= EXACT {
            Ok(v as f32)
        } else {
            Err(Error::invalid(
                what,
                format!(
                    "`{name}` holds {v}; a model with several inputs or outputs carries \
                     integers as f32, which holds them exactly up to ±16777216"
                ),
            ))
        }
    };
    Ok(match t {
        Tensor::F32(a) => a.iter().copied().collect(),
        Tensor::F64(a) => a.iter().map(|&v| v as f32).collect(),
        Tensor::BF16(a) => a.iter().map(|&v| v.to_f32()).collect(),
        Tensor::I32(a) => a.iter().map(|&v| exact(v as f64)).collect::<Result<_>>()?,
        Tensor::I64(a) => a.iter().map(|&v| exact(v as f64)).collect::<Result<_>>()?,
        Tensor::Bool(a) => a.iter().map(|&v| f32::from(u8::from(v))).collect(),
    })
}

/// The parts of packed rows (`[n, Σ elements]`, as [`pack`] made them), each `[n, dims...]`
/// as f32.
pub(crate) fn unpack(what: &str, packed: &Tensor, dims: &[Vec<usize>]) -> Result<Vec<Tensor>> {
    let mut offset = 0;
    dims.iter()
        .map(|d| {
            let part = host_columns(what, packed, offset, d)?;
            offset += d.iter().product::<usize>();
            Ok(Tensor::F32(part))
        })
        .collect()
}

/// The part of packed host rows at element `offset`, `[n, dims...]`.
pub(crate) fn host_columns(
    what: &str,
    packed: &Tensor,
    offset: usize,
    dims: &[usize],
) -> Result<ArrayD<f32>> {
    let Tensor::F32(a) = packed else {
        return Err(Error::invalid(what, "internal: packed rows are not f32"));
    };
    let n = a.len_of(Axis(0));
    let w: usize = dims.iter().product();
    if a.ndim() != 2 || offset + w > a.len_of(Axis(1)) {
        return Err(Error::invalid(
            what,
            format!(
                "internal: packed rows {:?} hold no part at {offset}..{}",
                a.shape(),
                offset + w
            ),
        ));
    }
    let shape: Vec<usize> = std::iter::once(n).chain(dims.iter().copied()).collect();
    a.slice_axis(Axis(1), (offset..offset + w).into())
        .to_owned()
        .into_shape_with_order(IxDyn(&shape))
        .map_err(|e| Error::invalid(what, format!("unpacking: {e}")))
}

/// Emits the parts of packed rows `x` (`[batch, Σ elements]`): each `[batch, dims...]`,
/// converted to its `dtypes` entry.
pub(crate) fn split(
    g: &mut Graph,
    x: Value,
    dims: &[Vec<usize>],
    dtypes: &[DType],
) -> Result<Vec<Value>> {
    let mut offset = 0;
    let mut out = Vec::with_capacity(dims.len());
    for (d, &dtype) in dims.iter().zip(dtypes) {
        out.push(columns(g, x, offset, d, dtype)?);
        offset += d.iter().product::<usize>();
    }
    Ok(out)
}

/// Emits the part of packed rows `x` at element `offset`: `[batch, dims...]` as `dtype`.
pub(crate) fn columns(
    g: &mut Graph,
    x: Value,
    offset: usize,
    dims: &[usize],
    dtype: DType,
) -> Result<Value> {
    let batch = g.ty(x).dims().first().copied().unwrap_or(0);
    let w: usize = dims.iter().product();
    let cols = g.slice(x, &[0, offset], &[batch, offset + w], &[1, 1])?;
    let shape: Vec<usize> = std::iter::once(batch).chain(dims.iter().copied()).collect();
    let part = g.reshape(cols, shape)?;
    if dtype == DType::F32 {
        Ok(part)
    } else {
        g.convert(part, dtype)
    }
}

/// Emits packed rows of `parts` (each `[batch, ...]`): their elements side by side, f32.
pub(crate) fn join(g: &mut Graph, parts: &[Value]) -> Result<Value> {
    let mut rows = Vec::with_capacity(parts.len());
    for &p in parts {
        let ty = g.ty(p).clone();
        let batch = ty.dims().first().copied().unwrap_or(0);
        let w: usize = ty.dims().iter().skip(1).product();
        let flat = g.reshape(p, vec![batch, w])?;
        rows.push(if ty.dtype == DType::F32 {
            flat
        } else {
            g.convert(flat, DType::F32)?
        });
    }
    g.concatenate(&rows, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(dims: &[usize], v: Vec<f32>) -> Tensor {
        Tensor::from_vec(dims, v).unwrap()
    }

    #[test]
    fn packing_puts_each_samples_parts_side_by_side_and_unpacking_restores_them() {
        let a = t(&[2, 3], vec![1., 2., 3., 4., 5., 6.]);
        let b = Tensor::from_vec(&[2, 2, 1], vec![7i32, 8, 9, 10]).unwrap();
        let packed = pack("test", &["a", "b"], &[a.clone(), b]).unwrap();
        assert_eq!(packed.dims(), [2, 5]);
        assert_eq!(
            packed.to_vec::<f32>().unwrap(),
            [1., 2., 3., 7., 8., 4., 5., 6., 9., 10.]
        );
        let parts = unpack("test", &packed, &[vec![3], vec![2, 1]]).unwrap();
        assert_eq!(parts[0], a);
        assert_eq!(parts[1].dims(), [2, 2, 1]);
        assert_eq!(parts[1].to_vec::<f32>().unwrap(), [7., 8., 9., 10.]);
    }

    #[test]
    fn integers_beyond_what_f32_holds_and_mismatched_rows_are_refused() {
        let big = Tensor::from_vec(&[1, 1], vec![16_777_217i32]).unwrap();
        let e = pack("fit", &["ids"], &[big]).unwrap_err().to_string();
        assert!(e.contains("`ids` holds 16777217"), "{e}");
        let exact = Tensor::from_vec(&[1, 1], vec![-16_777_216i32]).unwrap();
        assert!(pack("fit", &["ids"], &[exact]).is_ok());
        let e = pack(
            "fit",
            &["a", "b"],
            &[t(&[2, 1], vec![0., 1.]), t(&[3, 1], vec![0.; 3])],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`a` has 2, `b` has 3"), "{e}");
    }
}
