//! Common-subexpression elimination: which nodes compute exactly what an earlier node
//! computes.
//!
//! Graphs are built layer by layer and parameter by parameter, so the same small
//! computation is often written several times: each parameter's Adam update builds its own
//! bias-corrected step size from the same step count, for one. XLA merges such nodes
//! itself; the native backend runs every node it is given, and on the tutorial model the
//! five duplicate step sizes were five scalar kernels per training step.

use super::{Node, Op};
use std::collections::HashMap;

/// A bucket of candidates: op name and canonical operands.
type Key = (&'static str, Vec<usize>);

/// For each node, the first node that computes the same value (itself if none): the same
/// op with the same attributes, on operands that are themselves the same, and the same
/// result type. Ops declared `distinct` (parameters, collectives) are never merged.
pub(crate) fn canonical(nodes: &[Node]) -> Vec<usize> {
    let mut canon: Vec<usize> = (0..nodes.len()).collect();
    // Candidates by op name and canonical operands, each kept with its op rewritten onto
    // canonical operands; equality of that op (attributes, constants' values) and of the
    // type decides within a bucket.
    let mut seen: HashMap<Key, Vec<(usize, Op)>> = HashMap::new();
    for (i, node) in nodes.iter().enumerate() {
        if node.op.is_distinct() {
            continue;
        }
        let operands: Vec<usize> = node
            .op
            .operands()
            .iter()
            .map(|v| canon[v.index()])
            .collect();
        let op = node
            .op
            .map_operands(|v| super::Value::from_index(canon[v.index()]));
        let bucket = seen.entry((node.op.name(), operands)).or_default();
        match bucket
            .iter()
            .find(|(j, other)| nodes[*j].ty == node.ty && *other == op)
        {
            Some(&(j, _)) => canon[i] = j,
            None => bucket.push((i, op)),
        }
    }
    canon
}

#[cfg(test)]
mod tests {
    use super::canonical;
    use crate::ir::{DType, Graph, TensorType};

    #[test]
    fn merges_repeated_computations_and_keeps_different_ones() {
        let mut g = Graph::new("cse");
        let ty = TensorType::new(DType::F32, [4]);
        let x = g.parameter(ty.clone());
        let y = g.parameter(ty.clone());
        let a = g.add(x, y).unwrap();
        let b = g.add(x, y).unwrap(); // same as a
        let c = g.add(y, x).unwrap(); // operands swapped: a different node
        let ea = g.exp(a).unwrap();
        let eb = g.exp(b).unwrap(); // same as ea once a and b are one
        let s1 = g.mul_scalar(a, 2.0).unwrap();
        let s2 = g.mul_scalar(a, 3.0).unwrap(); // another constant
        let s3 = g.mul_scalar(b, 2.0).unwrap(); // same as s1
        let out = [ea, eb, c, s1, s2, s3];
        g.set_outputs(out.to_vec()).unwrap();
        let canon = canonical(g.nodes());
        let at = |v: crate::ir::Value| canon[v.index()];
        assert_eq!(at(b), a.index());
        assert_eq!(at(eb), ea.index());
        assert_eq!(at(c), c.index());
        assert_eq!(at(s3), at(s1));
        assert_ne!(at(s2), at(s1));
        // Parameters of the same type are different inputs.
        assert_eq!(at(y), y.index());
    }

    #[test]
    fn keeps_a_loops_siblings_apart_and_merges_a_repeated_loop() {
        use crate::ir::{Comparison, Value};
        let ts = [
            TensorType::scalar(DType::I32),
            TensorType::scalar(DType::I32),
        ];
        let region = |cond: bool| {
            let mut r = Graph::new("region");
            let p: Vec<Value> = ts.iter().map(|t| r.parameter(t.clone())).collect();
            let out = if cond {
                vec![r.compare(Comparison::Lt, p[0], p[1]).unwrap()]
            } else {
                let one = r.scalar(1.0, DType::I32);
                vec![r.add(p[0], one).unwrap(), p[1]]
            };
            r.set_outputs(out).unwrap();
            r
        };
        let mut g = Graph::new("loops");
        let init: Vec<Value> = ts.iter().map(|t| g.parameter(t.clone())).collect();
        let a = g.while_loop(&init, region(true), region(false)).unwrap();
        // The same loop built again from equal (not shared) regions.
        let b = g.while_loop(&init, region(true), region(false)).unwrap();
        g.set_outputs([a.clone(), b.clone()].concat()).unwrap();
        let canon = canonical(g.nodes());
        // Siblings have the same type, operands and regions: only `result` tells them
        // apart, and it does.
        assert_ne!(canon[a[1].index()], canon[a[0].index()]);
        assert_eq!(canon[b[0].index()], a[0].index());
        assert_eq!(canon[b[1].index()], a[1].index());
    }
}
