//! A readable text form of a graph (for debugging, snapshots and error reports).

use crate::ir::{Graph, Op};
use std::fmt::{self, Write};

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "graph {}(", self.name())?;
        for (i, &p) in self.params().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{p}: {}", self.ty(p))?;
        }
        f.write_str(") -> (")?;
        for (i, o) in self.outputs().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{o}")?;
        }
        f.write_str(") {\n")?;
        for (i, node) in self.nodes().iter().enumerate() {
            if let Op::Parameter { .. } = node.op {
                continue;
            }
            writeln!(f, "  %{i} = {} : {}", describe(&node.op), node.ty)?;
        }
        f.write_str("}\n")
    }
}

/// `name(operands) attributes`.
fn describe(op: &Op) -> String {
    let mut s = String::from(op.name());
    s.push('(');
    for (i, v) in op.operands().iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{v}");
    }
    s.push(')');
    let attrs = match op {
        Op::Parameter { index } => format!("index={index}"),
        Op::Constant { value } => {
            if value.numel() <= 8 {
                crate::with_tensor!(value, a => format!("{:?}", a.iter().collect::<Vec<_>>()))
            } else {
                format!("<{} elements>", value.numel())
            }
        }
        Op::Iota { dim } => format!("dim={dim}"),
        Op::Compare { cmp, .. } => format!("{cmp:?}").to_lowercase(),
        Op::Convert { to, .. } => format!("to={to}"),
        Op::BroadcastInDim { dims, .. } => format!("dims={dims:?}"),
        Op::Transpose { perm, .. } => format!("perm={perm:?}"),
        Op::Reverse { axes, .. } => format!("axes={axes:?}"),
        Op::Slice {
            start,
            limit,
            stride,
            ..
        } => {
            format!("start={start:?} limit={limit:?} stride={stride:?}")
        }
        Op::Concatenate { axis, .. } => format!("axis={axis}"),
        Op::Pad {
            low,
            high,
            interior,
            ..
        } => {
            format!("low={low:?} high={high:?} interior={interior:?}")
        }
        Op::DotGeneral { dims, .. } => format!(
            "batch={:?}/{:?} contract={:?}/{:?}",
            dims.lhs_batch, dims.rhs_batch, dims.lhs_contract, dims.rhs_contract
        ),
        Op::Reduce { op, axes, .. } => format!("{op:?} axes={axes:?}").to_lowercase(),
        Op::ReduceWindow { op, window, .. } | Op::SelectAndScatterAdd { op, window, .. } => {
            format!(
                "{} window={:?} strides={:?} padding={:?}",
                format!("{op:?}").to_lowercase(),
                window.dims,
                window.strides,
                window.padding
            )
        }
        Op::Convolution { params, .. } => format!(
            "strides={:?} padding={:?} lhs_dilation={:?} rhs_dilation={:?} groups={}",
            params.strides,
            params.padding,
            params.lhs_dilation,
            params.rhs_dilation,
            params.feature_groups
        ),
        Op::Gather {
            axis, batch_dims, ..
        }
        | Op::ScatterAdd {
            axis, batch_dims, ..
        } => {
            format!("axis={axis} batch_dims={batch_dims}")
        }
        Op::Unary { .. }
        | Op::Binary { .. }
        | Op::Select { .. }
        | Op::Reshape { .. }
        | Op::StopGradient { .. }
        | Op::RandomUniform { .. }
        | Op::AllReduceSum { .. }
        | Op::ReplicaId => String::new(),
    };
    if !attrs.is_empty() {
        s.push(' ');
        s.push_str(&attrs);
    }
    s
}
