//! Printing a graph as a StableHLO module (MLIR text), the program format every PJRT plugin
//! accepts and the same kind of artifact as `jax.export`.
//!
//! The module has one function, `@main`, whose arguments are the graph's parameters and
//! whose results are its outputs (a tuple of results comes back from PJRT as separate
//! buffers). Nodes no output depends on are not printed. A parameter that a state update
//! overwrites carries `tf.aliasing_output`, which makes XLA write that output into the
//! parameter's (donated) buffer. Each op's own lowering lives at the end of its module in
//! `crate::ops`; this file holds the printer; the vocabulary they share is `crate::hlo`.

use crate::backend::CompileOptions;
use crate::ir::{Graph, Value};
use crate::ops::Emitter;
use crate::{ops, Result};
use std::fmt::Write;

/// The StableHLO text of `g` as the XLA backend compiles it (one replica), after the same
/// checks compilation makes.
pub fn stablehlo_text(g: &Graph, options: &CompileOptions) -> Result<String> {
    module_text(g, options, 1)
}

/// The module for a computation replicated `num_replicas` times (collectives span all).
pub(crate) fn module_text(
    g: &Graph,
    options: &CompileOptions,
    num_replicas: usize,
) -> Result<String> {
    g.verify()?;
    options.validate(g)?;
    let live = live_nodes(g);
    let mut e = Emitter::new(g, num_replicas);
    for i in (0..g.nodes().len()).filter(|&i| live[i]) {
        let v = Value::from_index(i);
        let name = ops::lower(&mut e, v)?;
        e.set_name(v, name);
    }

    let mut aliased = vec![None; g.params().len()];
    for &(o, p) in &options.updates {
        aliased[p] = Some(o);
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "module @{} attributes {{mhlo.num_partitions = 1 : i32, mhlo.num_replicas = {num_replicas} : i32}} {{",
        symbol(g.name())
    );
    s.push_str("  func.func public @main(");
    for (k, &p) in g.params().iter().enumerate() {
        if k > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "%arg{k}: {}", g.ty(p).mlir());
        if let Some(o) = aliased[k] {
            let _ = write!(s, " {{tf.aliasing_output = {o} : i32}}");
        }
    }
    let out_types: Vec<String> = g.outputs().iter().map(|&o| g.ty(o).mlir()).collect();
    let _ = writeln!(s, ") -> ({}) {{", out_types.join(", "));
    s.push_str(e.body());
    if g.outputs().is_empty() {
        s.push_str("    return\n");
    } else {
        let names: Vec<String> = g.outputs().iter().map(|&o| e.name(o)).collect();
        let _ = writeln!(
            s,
            "    return {} : {}",
            names.join(", "),
            out_types.join(", ")
        );
    }
    s.push_str("  }\n}\n");
    Ok(s)
}

/// Which nodes some output depends on.
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

/// A valid MLIR symbol name for a graph name.
fn symbol(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    match s.chars().next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => s,
        _ => format!("g_{s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_are_sanitised() {
        assert_eq!(symbol("train step"), "train_step");
        assert_eq!(symbol("1x"), "g_1x");
    }
}
