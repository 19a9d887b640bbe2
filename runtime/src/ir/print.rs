//! A graph's text form (for debugging, snapshots, error reports and exported models),
//! which [`Graph::parse`] reads back; the format is described in `text.rs`.

use super::text::{write_name, write_op};
use crate::ir::{Graph, Op};
use crate::ops::while_loop::same_loop;
use std::fmt::{self, Write};

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::from("graph ");
        write_name(&mut s, self.name());
        s.push('(');
        for (i, &p) in self.params().iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            let _ = write!(s, "{p}: {}", self.ty(p));
        }
        s.push_str(") -> (");
        for (i, o) in self.outputs().iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            let _ = write!(s, "{o}");
        }
        s.push_str(") {\n");
        f.write_str(&s)?;
        // The first sibling of each loop printed: the others name it instead of
        // repeating its regions.
        let mut loops: Vec<usize> = Vec::new();
        for (i, node) in self.nodes().iter().enumerate() {
            if let Op::Parameter { .. } = node.op {
                continue;
            }
            s.clear();
            if let Op::While { init, result, .. } = &node.op {
                let same = |&&j: &&usize| same_loop(&self.nodes()[j].op, &node.op);
                if let Some(&first) = loops.iter().find(same) {
                    let init: Vec<String> = init.iter().map(|v| v.to_string()).collect();
                    let _ = writeln!(
                        s,
                        "  %{i} = while({}) result={result} regions_of=%{first} : {}",
                        init.join(", "),
                        node.ty
                    );
                    f.write_str(&s)?;
                    continue;
                }
                loops.push(i);
            }
            let _ = write!(s, "  %{i} = ");
            write_op(&mut s, &node.op);
            let _ = writeln!(s, " : {}", node.ty);
            f.write_str(&s)?;
        }
        f.write_str("}\n")
    }
}
