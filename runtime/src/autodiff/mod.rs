//! Reverse-mode automatic differentiation over the IR.
//!
//! Gradients are new nodes of the same graph, emitted by each op's VJP rule (in
//! `crate::ops`), so a gradient computation runs on every backend like any other graph.

pub mod gradcheck;
mod scan;
mod tiles;

use crate::ir::{Graph, Op, Value};
use crate::{ops, Error, Result};

/// Appends to `g` the vector-Jacobian product of `outputs` (with cotangents `seeds`, one
/// per output, same types) with respect to each of `wrt`; returns one gradient per `wrt`.
/// A `wrt` value the outputs do not depend on gets zeros.
pub fn vjp(g: &mut Graph, outputs: &[Value], seeds: &[Value], wrt: &[Value]) -> Result<Vec<Value>> {
    if outputs.len() != seeds.len() {
        return Err(Error::Autodiff {
            message: format!("{} outputs but {} cotangents", outputs.len(), seeds.len()),
        });
    }
    let n = g.len();
    for (&o, &s) in outputs.iter().zip(seeds) {
        for v in [o, s] {
            if v.index() >= n {
                return Err(Error::Autodiff {
                    message: format!("{v} is not a value of graph `{}`", g.name()),
                });
            }
        }
        if g.ty(o) != g.ty(s) {
            return Err(Error::Autodiff {
                message: format!("cotangent {s} is {} but output {o} is {}", g.ty(s), g.ty(o)),
            });
        }
    }
    for &w in wrt {
        if w.index() >= n {
            return Err(Error::Autodiff {
                message: format!("{w} is not a value of graph `{}`", g.name()),
            });
        }
        if !g.ty(w).dtype.is_differentiable() {
            return Err(Error::Autodiff {
                message: format!(
                    "cannot differentiate with respect to {w} of type {}",
                    g.ty(w)
                ),
            });
        }
    }

    // Values that depend on some `wrt` (only they need cotangents).
    let mut depends = vec![false; n];
    for &w in wrt {
        depends[w.index()] = true;
    }
    for i in 0..n {
        if !depends[i]
            && g.nodes()[i]
                .op
                .operands()
                .iter()
                .any(|v| depends[v.index()])
        {
            depends[i] = true;
        }
    }

    // The nodes of each scan's loop, first to last: they are differentiated together, when
    // the walk reaches the first (every node reading any of them comes later, so all their
    // cotangents are complete by then).
    let mut scans: Vec<Vec<usize>> = Vec::new();
    let mut scan_of: Vec<Option<usize>> = vec![None; n];
    for (i, node) in g.nodes().iter().enumerate() {
        if let Op::While { scan: Some(_), .. } = &node.op {
            let op = &node.op;
            let found = scans
                .iter()
                .position(|s| ops::while_loop::same_loop(&g.nodes()[s[0]].op, op));
            let k = found.unwrap_or_else(|| {
                scans.push(Vec::new());
                scans.len() - 1
            });
            scans[k].push(i);
            scan_of[i] = Some(k);
        }
    }

    let mut ct: Vec<Option<Value>> = vec![None; n];
    for (&o, &s) in outputs.iter().zip(seeds) {
        accumulate(g, &mut ct, o, s)?;
    }
    let start = outputs.iter().map(|o| o.index()).max().unwrap_or(0);
    for i in (0..=start.min(n.saturating_sub(1))).rev() {
        if let Some(k) = scan_of[i] {
            let nodes = &scans[k];
            if nodes[0] == i && depends[i] && nodes.iter().any(|&s| ct[s].is_some()) {
                let siblings: Vec<(Value, Option<Value>)> = nodes
                    .iter()
                    .map(|&s| (Value::from_index(s), ct[s]))
                    .collect();
                let operands = g.nodes()[i].op.operands();
                let needed: Vec<bool> = operands
                    .iter()
                    .map(|v| depends[v.index()] && g.ty(*v).dtype.is_differentiable())
                    .collect();
                let cts = scan::vjp_scan(g, &siblings, &needed)?;
                for (v, d) in operands.into_iter().zip(cts) {
                    if let Some(d) = d {
                        if depends[v.index()] && g.ty(v).dtype.is_differentiable() {
                            accumulate(g, &mut ct, v, d)?;
                        }
                    }
                }
            }
            continue;
        }
        let Some(c) = ct[i] else { continue };
        if !depends[i] || !g.nodes()[i].ty.dtype.is_differentiable() {
            continue;
        }
        let y = Value::from_index(i);
        let operands = g.nodes()[i].op.operands();
        if !operands.iter().any(|v| depends[v.index()]) {
            continue; // a `wrt` value itself, or a source
        }
        let c = tiles::concatenated(g, c)?;
        let cts = ops::vjp(g, y, c)?;
        for (v, d) in operands.into_iter().zip(cts) {
            if let Some(d) = d {
                if depends[v.index()] && g.ty(v).dtype.is_differentiable() {
                    accumulate(g, &mut ct, v, d)?;
                }
            }
        }
    }
    wrt.iter()
        .map(|&w| match ct[w.index()] {
            Some(c) => Ok(c),
            None => g.zeros_like(w),
        })
        .collect()
}

fn accumulate(g: &mut Graph, ct: &mut [Option<Value>], v: Value, d: Value) -> Result<()> {
    if g.ty(d) != g.ty(v) {
        return Err(Error::Autodiff {
            message: format!(
                "internal: the gradient rule of {} produced {} for a value of type {}",
                g.node(v).op.name(),
                g.ty(d),
                g.ty(v)
            ),
        });
    }
    ct[v.index()] = Some(match ct[v.index()] {
        Some(prev) => g.add(prev, d)?,
        None => d,
    });
    Ok(())
}

/// The gradient of the scalar `output` of `graph` with respect to the values `wrt`, as a
/// new graph with the same parameters whose outputs are `graph`'s outputs followed by the
/// gradients.
pub fn grad(graph: &Graph, output: Value, wrt: &[Value]) -> Result<Graph> {
    let mut g = graph.clone();
    if output.index() >= g.len()
        || g.ty(output).rank() != 0
        || !g.ty(output).dtype.is_differentiable()
    {
        return Err(Error::Autodiff {
            message: format!(
                "grad needs a float scalar output, got {}",
                if output.index() < g.len() {
                    g.ty(output).to_string()
                } else {
                    format!("missing {output}")
                }
            ),
        });
    }
    let one = g.scalar(1.0, g.ty(output).dtype);
    let grads = vjp(&mut g, &[output], &[one], wrt)?;
    let mut outs = g.outputs().to_vec();
    outs.extend(grads);
    g.set_outputs(outs)?;
    Ok(g)
}
