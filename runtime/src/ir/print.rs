//! A graph's text form (for debugging, snapshots, error reports and exported models),
//! which [`Graph::parse`] reads back; the format is described in `text.rs`.

use super::text::{write_name, write_op};
use crate::ir::{Graph, Op};
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
        for (i, node) in self.nodes().iter().enumerate() {
            if let Op::Parameter { .. } = node.op {
                continue;
            }
            s.clear();
            let _ = write!(s, "  %{i} = ");
            write_op(&mut s, &node.op);
            let _ = writeln!(s, " : {}", node.ty);
            f.write_str(&s)?;
        }
        f.write_str("}\n")
    }
}
