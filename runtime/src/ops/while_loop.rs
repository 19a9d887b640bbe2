//! `while`: a loop over carried values (StableHLO `while`). A loop over N values is N
//! sibling nodes that share `init`, `cond` and `body` and differ in `result`, the carried
//! value each one is; every backend runs the loop once for all of them.
//!
//! The regions are closed graphs: their parameters are the carried values, in order, and
//! they read nothing else of the enclosing graph (a value the body needs is carried).

use crate::ir::{DType, Graph, Op, Region, ScanLayout, ScanStep, TensorType, Value};
use crate::{Error, Result};

const NAME: &str = "while";

/// The shape rule: regions whose parameters are the carried types, a condition giving one
/// `bool[]`, a body giving the carried types back, and a result that is one of them.
pub(crate) fn check(
    g: &Graph,
    init: &[Value],
    result: usize,
    cond: &Region,
    body: &Region,
    scan: Option<&ScanStep>,
) -> Result<TensorType> {
    let carried: Vec<TensorType> = init.iter().map(|&v| g.ty(v).clone()).collect();
    if carried.is_empty() {
        return Err(Error::shape(
            NAME,
            "a loop carries at least one value, got none",
        ));
    }
    if result >= carried.len() {
        return Err(Error::shape(
            NAME,
            format!(
                "result {result} names no carried value: the loop carries {}",
                carried.len()
            ),
        ));
    }
    for (what, region) in [("condition", cond), ("body", body)] {
        let params = region.param_types();
        if params != carried {
            return Err(Error::shape(
                NAME,
                format!(
                    "the {what}'s parameters must be the carried types {}, got {}",
                    types_text(&carried),
                    types_text(&params)
                ),
            ));
        }
        region.verify().map_err(|e| {
            Error::shape(NAME, format!("the {what} is not a well-formed graph: {e}"))
        })?;
    }
    let pred = TensorType::scalar(DType::Bool);
    let cond_out = cond.output_types();
    if cond_out != [pred.clone()] {
        return Err(Error::shape(
            NAME,
            format!(
                "the condition must return one {pred}, got {}",
                types_text(&cond_out)
            ),
        ));
    }
    let body_out = body.output_types();
    if body_out != carried {
        return Err(Error::shape(
            NAME,
            format!(
                "the body must return the carried types {}, got {}",
                types_text(&carried),
                types_text(&body_out)
            ),
        ));
    }
    if let Some(s) = scan {
        s.step.verify().map_err(|e| {
            Error::shape(
                NAME,
                format!("the scan's step is not a well-formed graph: {e}"),
            )
        })?;
        ScanLayout::of(&s.step, s.carries)?.check(&s.step, &carried)?;
    }
    Ok(carried[result].clone())
}

fn types_text(types: &[TensorType]) -> String {
    let items: Vec<String> = types.iter().map(|t| t.to_string()).collect();
    format!("({})", items.join(", "))
}

/// Whether two ops are siblings of one loop (the same loop, whichever value each is).
pub(crate) fn same_loop(a: &Op, b: &Op) -> bool {
    match (a, b) {
        (
            Op::While {
                init: i1,
                cond: c1,
                body: b1,
                scan: s1,
                ..
            },
            Op::While {
                init: i2,
                cond: c2,
                body: b2,
                scan: s2,
                ..
            },
        ) => i1 == i2 && c1 == c2 && b1 == b2 && s1 == s2,
        _ => false,
    }
}

/// Reverse mode through a loop whose trip count is only known at run time would have to
/// keep every iteration's carried values; like JAX's `while_loop`, it is refused. A loop
/// built by `Graph::scan` (a fixed trip count, marked with its step) is the differentiable
/// form: autodiff differentiates all its siblings at once through the step
/// (`autodiff::scan`) and never asks this rule.
pub(crate) fn vjp() -> Result<Vec<Option<Value>>> {
    Err(Error::Autodiff {
        message: "while has no gradient rule: reverse mode through a loop with a run-time \
                  trip count is not defined (as in JAX's while_loop); build the loop with \
                  Graph::scan (a fixed trip count) to differentiate it"
            .into(),
    })
}

/// Loops are not a kernel: the native planner makes each one a step of its own, with the
/// condition and body planned inside it (`backend::native`).
pub(crate) fn native() -> Result<()> {
    Err(Error::Backend {
        backend: "native",
        message: "a while loop runs as a planned loop step, not as a kernel".into(),
    })
}

// ---- StableHLO lowering

use crate::ops::Emitter;

/// The first sibling lowered prints the loop, `%w:N = "stablehlo.while"(init...)` with
/// its two regions; every sibling is `%w#result`.
pub(crate) fn lower(
    e: &mut Emitter<'_>,
    v: Value,
    init: &[Value],
    result: usize,
    cond: &Region,
    body: &Region,
) -> Result<String> {
    let op = &e.graph().node(v).op;
    if let Some(name) = e.loop_name(op) {
        return Ok(format!("{name}#{result}"));
    }
    let names: Vec<String> = init.iter().map(|&v| e.name(v)).collect();
    let types: Vec<String> = init.iter().map(|&v| e.ty(v).mlir()).collect();
    let cond_text = region_text(e, cond)?;
    let body_text = region_text(e, body)?;
    let n = init.len();
    let w = e.emit_results(
        n,
        format!(
            "\"stablehlo.while\"({}) ({{\n{cond_text}    }}, {{\n{body_text}    }}) : ({}) -> ({})",
            names.join(", "),
            types.join(", "),
            types.join(", "),
        ),
    );
    e.set_loop_name(op.clone(), w.clone());
    Ok(format!("{w}#{result}"))
}

/// A region's block: `^bb0(args):`, its live nodes, `stablehlo.return outputs`. Names come
/// from the enclosing function's counter: MLIR regions of `while` see the values around
/// them, so a name may not be reused inside.
fn region_text(e: &mut Emitter<'_>, region: &Region) -> Result<String> {
    let g = region.graph();
    let args: Vec<String> = g.params().iter().map(|_| e.fresh()).collect();
    let (text, outputs) = e.nested(g, |inner| {
        let live = live_nodes(g);
        for i in (0..g.len()).filter(|&i| live[i]) {
            let v = Value::from_index(i);
            let name = match &g.node(v).op {
                Op::Parameter { index } => args[*index].clone(),
                _ => crate::ops::lower(inner, v)?,
            };
            inner.set_name(v, name);
        }
        Ok(g.outputs()
            .iter()
            .map(|&o| inner.name(o))
            .collect::<Vec<String>>())
    })?;
    let params: Vec<String> = g
        .params()
        .iter()
        .zip(&args)
        .map(|(&p, a)| format!("{a}: {}", g.ty(p).mlir()))
        .collect();
    let out_types: Vec<String> = g.output_types().iter().map(|t| t.mlir()).collect();
    // The region's lines, two spaces further in than the loop's.
    let text: String = text.lines().map(|l| format!("  {l}\n")).collect();
    Ok(format!(
        "    ^bb0({}):\n{text}      stablehlo.return {} : {}\n",
        params.join(", "),
        outputs.join(", "),
        out_types.join(", ")
    ))
}

/// Which nodes of `g` its outputs depend on.
fn live_nodes(g: &Graph) -> Vec<bool> {
    let mut live = vec![false; g.len()];
    for &o in g.outputs() {
        live[o.index()] = true;
    }
    for i in (0..g.len()).rev() {
        if live[i] {
            for v in g.nodes()[i].op.operands() {
                live[v.index()] = true;
            }
        }
    }
    live
}
