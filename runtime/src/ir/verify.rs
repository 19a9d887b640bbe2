//! The verifier: rejects graphs that could not have come from the builder.

use crate::ir::{Graph, Op};
use crate::{ops, Error, Result};

impl Graph {
    /// Checks every node: operands defined before use, parameters numbered in order,
    /// each result type equal to its op's shape rule, outputs present.
    pub fn verify(&self) -> Result<()> {
        let err = |node: usize, message: String| Error::Verify {
            graph: self.name().to_string(),
            node,
            message,
        };
        let mut seen_params = 0;
        for (i, node) in self.nodes().iter().enumerate() {
            for v in node.op.operands() {
                if v.index() >= i {
                    return Err(err(
                        i,
                        format!(
                            "{} reads {v}, which is not defined before it",
                            node.op.name()
                        ),
                    ));
                }
            }
            if let Op::Parameter { index } = node.op {
                if self.params().get(index).map(|p| p.index()) != Some(i) {
                    return Err(err(
                        i,
                        format!("parameter {index} is not entry {index} of the parameter list"),
                    ));
                }
                seen_params += 1;
            }
            // A parameter's type is declared, not checked when the graph is built.
            crate::memory::element_count(
                || {
                    format!(
                        "graph `{}` node %{i} ({} {})",
                        self.name(),
                        node.op.name(),
                        node.ty
                    )
                },
                &node.ty,
            )?;
            ops::check(self, &node.op, Some(&node.ty)).map_err(|e| err(i, e.to_string()))?;
        }
        if seen_params != self.params().len() {
            return Err(err(
                self.len(),
                format!(
                    "the parameter list has {} entries but {seen_params} parameter nodes exist",
                    self.params().len()
                ),
            ));
        }
        for (k, o) in self.outputs().iter().enumerate() {
            if o.index() >= self.len() {
                return Err(err(
                    self.len(),
                    format!("output {k} refers to missing value {o}"),
                ));
            }
        }
        Ok(())
    }
}
