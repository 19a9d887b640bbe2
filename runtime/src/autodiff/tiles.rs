//! A cotangent that is a sum of zero pads, each covering its own block of one axis and
//! together all of it, is their concatenate: what the slices of a fused product get back
//! (a recurrent cell's gates, one pad each), written once instead of padded per block and
//! added up.

use crate::ir::{BinaryOp, Graph, Op, Value};
use crate::Result;

/// `c` as one concatenate where it is such a sum of pads, else `c` itself.
pub(super) fn concatenated(g: &mut Graph, c: Value) -> Result<Value> {
    let Some((axis, xs)) = blocks(g, c) else {
        return Ok(c);
    };
    g.concatenate(&xs, axis)
}

/// The axis and the blocks, first to last, of a sum of two or more zero pads tiling it.
fn blocks(g: &Graph, c: Value) -> Option<(usize, Vec<Value>)> {
    let mut leaves = Vec::new();
    let mut pending = vec![c];
    while let Some(v) = pending.pop() {
        match g.node(v).op {
            Op::Binary {
                op: BinaryOp::Add,
                lhs,
                rhs,
            } => pending.extend([lhs, rhs]),
            _ => leaves.push(v),
        }
    }
    if leaves.len() < 2 {
        return None;
    }
    let dims = g.ty(c).dims().to_vec();
    let mut axis = None;
    let mut blocks: Vec<(i64, Value)> = Vec::with_capacity(leaves.len());
    for v in leaves {
        let Op::Pad {
            x,
            value,
            ref low,
            ref high,
            ref interior,
        } = g.node(v).op
        else {
            return None;
        };
        if g.ty(v) != g.ty(c) || interior.iter().any(|&i| i != 0) || !is_zero(g, value) {
            return None;
        }
        let padded: Vec<usize> = (0..dims.len())
            .filter(|&d| low[d] != 0 || high[d] != 0)
            .collect();
        let &[d] = padded.as_slice() else {
            return None;
        };
        if low[d] < 0 || high[d] < 0 || *axis.get_or_insert(d) != d {
            return None;
        }
        blocks.push((low[d], x));
    }
    let axis = axis?;
    blocks.sort_by_key(|b| b.0);
    // Each block starts where the one before ends, and the last ends at the axis' end.
    let mut at = 0;
    for &(low, x) in &blocks {
        if low != at {
            return None;
        }
        at += g.ty(x).dims()[axis] as i64;
    }
    (at == dims[axis] as i64).then(|| (axis, blocks.into_iter().map(|b| b.1).collect()))
}

fn is_zero(g: &Graph, v: Value) -> bool {
    match &g.node(v).op {
        Op::Constant { value } => value.scalar_f64().is_ok_and(|z| z == 0.0),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, TensorType};

    /// A sum of pads of `[2, w]` blocks of a `[2, total]` value along axis 1, the blocks
    /// starting at `starts`, padded with `fill`.
    fn sum_of_pads(blocks: &[(i64, usize)], total: usize, fill: f64) -> (Graph, Value) {
        let mut g = Graph::new("pads");
        let fill = g.scalar(fill, DType::F32);
        let mut sum = None;
        for &(start, width) in blocks {
            let x = g.parameter(TensorType::new(DType::F32, vec![2, width]));
            let high = total as i64 - start - width as i64;
            let p = g.pad(x, fill, &[0, start], &[0, high], &[0, 0]).unwrap();
            sum = Some(match sum {
                Some(s) => g.add(s, p).unwrap(),
                None => p,
            });
        }
        (g, sum.unwrap())
    }

    #[test]
    fn zero_pads_tiling_an_axis_in_any_order_are_one_concatenate() {
        let (mut g, c) = sum_of_pads(&[(3, 4), (0, 1), (1, 2), (7, 3)], 10, 0.0);
        let params = g.params().to_vec();
        assert_eq!(
            blocks(&g, c),
            Some((1, vec![params[1], params[2], params[0], params[3]]))
        );
        let cat = concatenated(&mut g, c).unwrap();
        assert!(matches!(g.node(cat).op, Op::Concatenate { axis: 1, .. }));
        assert_eq!(g.ty(cat), g.ty(c));
    }

    #[test]
    fn pads_that_overlap_leave_a_gap_or_fill_with_non_zero_stay_a_sum() {
        for (blocks_, total, fill) in [
            (&[(0, 2), (1, 2)][..], 3, 0.0),
            (&[(0, 1), (2, 1)][..], 3, 0.0),
            (&[(0, 1), (1, 2)][..], 4, 0.0),
            (&[(0, 1), (1, 2)][..], 3, 1.0),
            (&[(0, 3)][..], 3, 0.0),
        ] {
            let (mut g, c) = sum_of_pads(blocks_, total, fill);
            assert_eq!(blocks(&g, c), None, "{blocks_:?} of {total}, {fill}");
            assert_eq!(concatenated(&mut g, c).unwrap(), c);
        }
    }
}
