//! Reverse mode through a scan: the VJP of a loop that `Graph::scan` built is a scan too,
//! over the rows in the other order, whose step is the VJP of the forward step.
//!
//! The forward loop stacks each carried value that changes at the start of every step
//! (its residuals, `ScanLayout`) and each product of changing values; a value the step
//! returns unchanged (a weight) is the initial one at every step and is carried into the
//! backward loop instead. The backward step recomputes the forward step from the carried
//! values at its start and that step's rows, reading the saved products instead of
//! multiplying again, and pulls back the cotangents of its new carried values and of its
//! output rows: it carries the cotangents of the carried values (from those of the final
//! ones, zeros where none came) and stacks those of the input rows. Integer carried
//! values and inputs get no cotangent; the loop's count is not differentiated.
//!
//! The backward loop is built by `Graph::scan` as well, so it is differentiable in turn,
//! and a scan inside a step is differentiated by the same walk over the step's graph.

use super::vjp;
use crate::ir::{Graph, Op, ScanLayout, TensorType, Value};
use crate::{Error, Result};

/// The cotangent of each operand of a scan's loop (its `init`: the count, the initial
/// carried values, the stacked inputs, the stacked outputs' and residuals' initial zeros),
/// `None` where none flows. `siblings` are the loop's nodes with the cotangent each
/// received; `needed` says, per operand, whether its cotangent is wanted.
pub(super) fn vjp_scan(
    g: &mut Graph,
    siblings: &[(Value, Option<Value>)],
    needed: &[bool],
) -> Result<Vec<Option<Value>>> {
    let internal = |message: String| Error::Autodiff {
        message: format!("internal: scan: {message}"),
    };
    let Some(&(first, _)) = siblings.first() else {
        return Err(internal("a loop without nodes".into()));
    };
    let op = g.node(first).op.clone();
    let Op::While {
        init,
        cond,
        body,
        scan: Some(scan),
        ..
    } = &op
    else {
        return Err(internal(format!("{first} is not a scan's loop")));
    };
    let step = scan.step.graph();
    let layout = ScanLayout::of(step, scan.carries)?;
    let types: Vec<TensorType> = init.iter().map(|&v| g.ty(v).clone()).collect();
    layout.check(step, &types)?;
    let nc = layout.carries;
    let n = layout.len();

    // The cotangent of each carried value of the loop (summed over duplicate siblings),
    // and the node of each result, made where the graph lacks one.
    let mut ct: Vec<Option<Value>> = vec![None; n];
    let mut node_of: Vec<Option<Value>> = vec![None; n];
    for &(v, c) in siblings {
        let Op::While { result, .. } = g.node(v).op else {
            return Err(internal(format!("{v} is not a loop's node")));
        };
        if result >= n {
            return Err(internal(format!("result {result} of a loop carrying {n}")));
        }
        node_of[result] = Some(v);
        if let Some(c) = c {
            ct[result] = Some(match ct[result] {
                Some(prev) => g.add(prev, c)?,
                None => c,
            });
        }
    }
    let mut result_node = |g: &mut Graph, r: usize| -> Result<Value> {
        if let Some(v) = node_of[r] {
            return Ok(v);
        }
        let sibling = Op::While {
            init: init.clone(),
            result: r,
            cond: cond.clone(),
            body: body.clone(),
            scan: Some(scan.clone()),
        };
        let v = g.push_typed(sibling, Some(types[r].clone()))?;
        node_of[r] = Some(v);
        Ok(v)
    };

    let diff = |t: &TensorType| t.dtype.is_differentiable();
    let params = step.param_types();
    // Carried values whose cotangents the backward loop carries; inputs whose cotangents
    // it stacks; outputs and residuals whose cotangents it reads.
    let dcarries: Vec<usize> = (0..nc).filter(|&k| diff(&params[k])).collect();
    let passed: Vec<usize> = (0..nc).filter(|&k| layout.passed[k]).collect();
    let dxs: Vec<usize> = (0..layout.xs)
        .filter(|&j| diff(&params[nc + j]) && needed[layout.x(j)])
        .collect();
    let dys: Vec<usize> = (0..layout.ys)
        .filter(|&j| ct[layout.y(j)].is_some())
        .collect();
    let dres: Vec<usize> = (0..layout.residuals.len())
        .filter(|&i| ct[layout.residual(i)].is_some())
        .collect();
    let dsaved: Vec<usize> = (0..layout.saved.len())
        .filter(|&i| ct[layout.saved_at(i)].is_some())
        .collect();

    let mut out: Vec<Option<Value>> = vec![None; n];
    // The stacked inputs come out of the loop unchanged: their cotangents go straight back.
    for j in 0..layout.xs {
        out[layout.x(j)] = ct[layout.x(j)];
    }
    let anything_in = dcarries.iter().any(|&k| ct[layout.carry(k)].is_some())
        || !dys.is_empty()
        || !dres.is_empty()
        || !dsaved.is_empty();
    if !anything_in || (dcarries.is_empty() && dxs.is_empty()) {
        return Ok(out);
    }

    // The backward step: the carried cotangents and the passed-through values, then the
    // rows of the residuals, the inputs, and the cotangents read.
    let mut bw = Graph::new(format!("{}_vjp", step.name()));
    let d_carry: Vec<Value> = dcarries
        .iter()
        .map(|&k| bw.parameter(params[k].clone()))
        .collect();
    let kept: Vec<Value> = passed
        .iter()
        .map(|&k| bw.parameter(params[k].clone()))
        .collect();
    let res_rows: Vec<Value> = layout
        .residuals
        .iter()
        .map(|&k| bw.parameter(params[k].clone()))
        .collect();
    let node_ty = |i: usize| step.nodes()[i].ty.clone();
    let saved_rows: Vec<Value> = layout
        .saved
        .iter()
        .map(|&i| bw.parameter(node_ty(i)))
        .collect();
    let x_rows: Vec<Value> = params[nc..]
        .iter()
        .map(|t| bw.parameter(t.clone()))
        .collect();
    let outputs = step.output_types();
    let dy_rows: Vec<Value> = dys
        .iter()
        .map(|&j| bw.parameter(outputs[nc + j].clone()))
        .collect();
    let dres_rows: Vec<Value> = dres
        .iter()
        .map(|&i| bw.parameter(params[layout.residuals[i]].clone()))
        .collect();
    let dsaved_rows: Vec<Value> = dsaved
        .iter()
        .map(|&i| bw.parameter(node_ty(layout.saved[i])))
        .collect();
    let mut args: Vec<Value> = Vec::with_capacity(params.len());
    let (mut p, mut r) = (0, 0);
    for k in 0..nc {
        if layout.passed[k] {
            args.push(kept[p]);
            p += 1;
        } else {
            args.push(res_rows[r]);
            r += 1;
        }
    }
    args.extend(&x_rows);
    let values = bw.inline_values(step, &args)?;
    let results: Vec<Value> = step.outputs().iter().map(|o| values[o.index()]).collect();
    let mut pulled: Vec<Value> = dcarries.iter().map(|&k| results[k]).collect();
    pulled.extend(dys.iter().map(|&j| results[nc + j]));
    // A saved product's cotangent (when the backward loop is differentiated in turn) is
    // pulled back from that product.
    pulled.extend(dsaved.iter().map(|&i| values[layout.saved[i]]));
    let mut seeds = d_carry.clone();
    seeds.extend(&dy_rows);
    seeds.extend(&dsaved_rows);
    let mut wrt: Vec<Value> = dcarries.iter().map(|&k| args[k]).collect();
    wrt.extend(dxs.iter().map(|&j| x_rows[j]));
    let grads = vjp(&mut bw, &pulled, &seeds, &wrt)?;
    let mut d_start: Vec<Value> = grads[..dcarries.len()].to_vec();
    // A residual's cotangent is one more on its carried value at the start of the step.
    for (&i, &row) in dres.iter().zip(&dres_rows) {
        let k = layout.residuals[i];
        if let Some(at) = dcarries.iter().position(|&c| c == k) {
            d_start[at] = bw.add(d_start[at], row)?;
        }
    }
    let mut bw_outputs = d_start;
    bw_outputs.extend(&kept);
    bw_outputs.extend(&grads[dcarries.len()..]);
    bw.set_outputs(bw_outputs)?;
    // The recomputed products are read from their stacks instead; their recomputation is
    // left without readers (the gradients of a product read its operands, not it).
    for (&i, &row) in layout.saved.iter().zip(&saved_rows) {
        bw.replace_uses(values[i], row)?;
    }

    // The backward loop, over the rows in the other order.
    let mut start: Vec<Value> = Vec::with_capacity(dcarries.len() + passed.len());
    for &k in &dcarries {
        start.push(match ct[layout.carry(k)] {
            Some(c) => c,
            None => g.zeros_like(init[layout.carry(k)])?,
        });
    }
    start.extend(passed.iter().map(|&k| init[layout.carry(k)]));
    let mut rows: Vec<Value> = Vec::new();
    for i in 0..layout.residuals.len() {
        rows.push(result_node(g, layout.residual(i))?);
    }
    for i in 0..layout.saved.len() {
        rows.push(result_node(g, layout.saved_at(i))?);
    }
    rows.extend((0..layout.xs).map(|j| init[layout.x(j)]));
    rows.extend(dys.iter().filter_map(|&j| ct[layout.y(j)]));
    rows.extend(dres.iter().filter_map(|&i| ct[layout.residual(i)]));
    rows.extend(dsaved.iter().filter_map(|&i| ct[layout.saved_at(i)]));
    let (finals, stacked) = g.scan_with(&start, &rows, &bw, !scan.reverse)?;

    for (at, &k) in dcarries.iter().enumerate() {
        out[layout.carry(k)] = Some(finals[at]);
    }
    for (at, &j) in dxs.iter().enumerate() {
        let x = layout.x(j);
        out[x] = Some(match out[x] {
            Some(prev) => g.add(prev, stacked[at])?,
            None => stacked[at],
        });
    }
    Ok(out)
}
