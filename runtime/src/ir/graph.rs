//! The graph: an append-only list of nodes, each producing one value.
//!
//! Operands must exist before the node that reads them, so node order is a topological
//! order. Every builder call checks the op's shape rule and returns an error naming the op
//! and the shapes when it does not hold.

use crate::ir::{
    BinaryOp, Comparison, ConvParams, DType, DotDims, Op, ReduceOp, Region, ScanStep, Shape,
    TensorType, UnaryOp, Value, Window,
};
use crate::{ops, Error, Result, Tensor};

/// One operation and the type of its result.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub op: Op,
    pub ty: TensorType,
}

/// A computation: parameters in, outputs out, primitive ops in between.
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    name: String,
    nodes: Vec<Node>,
    params: Vec<Value>,
    outputs: Vec<Value>,
}

impl Graph {
    pub fn new(name: impl Into<String>) -> Graph {
        Graph {
            name: name.into(),
            nodes: Vec::new(),
            params: Vec::new(),
            outputs: Vec::new(),
        }
    }

    /// Assembles a graph from its parts without checking them (for deserialised or
    /// transformed graphs); run [`Graph::verify`] before using it.
    pub fn from_parts(
        name: impl Into<String>,
        nodes: Vec<Node>,
        params: Vec<Value>,
        outputs: Vec<Value>,
    ) -> Graph {
        Graph {
            name: name.into(),
            nodes,
            params,
            outputs,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn node(&self, v: Value) -> &Node {
        &self.nodes[v.index()]
    }

    /// The type of a value of this graph.
    pub fn ty(&self, v: Value) -> &TensorType {
        &self.nodes[v.index()].ty
    }

    /// Parameter values, by parameter index.
    pub fn params(&self) -> &[Value] {
        &self.params
    }

    pub fn param_types(&self) -> Vec<TensorType> {
        self.params.iter().map(|&p| self.ty(p).clone()).collect()
    }

    pub fn outputs(&self) -> &[Value] {
        &self.outputs
    }

    pub fn output_types(&self) -> Vec<TensorType> {
        self.outputs.iter().map(|&o| self.ty(o).clone()).collect()
    }

    /// Declares the graph's results.
    pub fn set_outputs(&mut self, outputs: Vec<Value>) -> Result<()> {
        for &o in &outputs {
            self.check_value("outputs", o)?;
        }
        self.outputs = outputs;
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The type of `v`, or an error naming `what` if `v` is not a value of this graph.
    pub fn try_ty(&self, what: &'static str, v: Value) -> Result<&TensorType> {
        self.check_value(what, v)?;
        Ok(self.ty(v))
    }

    fn check_value(&self, what: &'static str, v: Value) -> Result<()> {
        if v.index() < self.nodes.len() {
            Ok(())
        } else {
            Err(Error::shape(
                what,
                format!(
                    "operand {v} does not exist in graph `{}` ({} nodes)",
                    self.name,
                    self.nodes.len()
                ),
            ))
        }
    }

    /// Appends `op` after checking its operands and shape rule.
    pub fn push(&mut self, op: Op) -> Result<Value> {
        self.push_typed(op, None)
    }

    /// Appends `op`; `ty` is the result type for ops whose type is not implied by their
    /// operands (iota, random_uniform), and is checked against the rule for the others.
    pub fn push_typed(&mut self, op: Op, ty: Option<TensorType>) -> Result<Value> {
        if let Op::Parameter { .. } = op {
            return Err(Error::shape(
                "parameter",
                "use Graph::parameter to declare inputs",
            ));
        }
        for v in op.operands() {
            self.check_value(op.name(), v)?;
        }
        let ty = ops::check(self, &op, ty.as_ref()).map_err(|e| match e {
            // The rule said what it expected; the types that came are attached here, once
            // for every op.
            Error::Shape {
                op: name,
                message,
                operands,
            } if operands.is_empty() => Error::Shape {
                op: name,
                message,
                operands: op
                    .operands()
                    .into_iter()
                    .map(|v| self.ty(v).clone())
                    .collect(),
            },
            e => e,
        })?;
        Ok(self.push_unchecked(op, ty))
    }

    /// A shape error of `op` over `operands` (values of this graph), carrying their types.
    pub(crate) fn shape_error(
        &self,
        op: &'static str,
        message: impl Into<String>,
        operands: &[Value],
    ) -> Error {
        Error::Shape {
            op,
            message: message.into(),
            operands: operands.iter().map(|&v| self.ty(v).clone()).collect(),
        }
    }

    pub(crate) fn push_unchecked(&mut self, op: Op, ty: TensorType) -> Value {
        let v = Value::from_index(self.nodes.len());
        self.nodes.push(Node { op, ty });
        v
    }

    /// Makes every node and output that reads `from` read `to` instead, a value of the same
    /// type defined before every such reader (`from` is left without readers).
    pub(crate) fn replace_uses(&mut self, from: Value, to: Value) -> Result<()> {
        self.check_value("replace_uses", from)?;
        self.check_value("replace_uses", to)?;
        let reader = self
            .nodes
            .iter()
            .position(|nd| nd.op.operands().contains(&from));
        if self.ty(from) != self.ty(to) || reader.is_some_and(|r| r <= to.index()) {
            return Err(Error::shape(
                "replace_uses",
                format!("{to} cannot stand for {from} in graph `{}`", self.name),
            ));
        }
        let swap = |v: Value| if v == from { to } else { v };
        for nd in &mut self.nodes {
            nd.op = nd.op.map_operands(swap);
        }
        for o in &mut self.outputs {
            *o = swap(*o);
        }
        Ok(())
    }

    /// Declares the next input of the graph.
    pub fn parameter(&mut self, ty: TensorType) -> Value {
        let index = self.params.len();
        let v = self.push_unchecked(Op::Parameter { index }, ty);
        self.params.push(v);
        v
    }

    // ---- one builder per primitive ----------------------------------------------------

    /// A literal tensor.
    pub fn constant(&mut self, value: impl Into<Tensor>) -> Value {
        let value = value.into();
        let ty = value.ty();
        self.push_unchecked(Op::Constant { value }, ty)
    }

    /// Indices along `dim` of a tensor of type `ty`.
    pub fn iota(&mut self, ty: TensorType, dim: usize) -> Result<Value> {
        self.push_typed(Op::Iota { dim }, Some(ty))
    }

    pub fn unary(&mut self, op: UnaryOp, x: Value) -> Result<Value> {
        self.push(Op::Unary { op, x })
    }

    pub fn binary(&mut self, op: BinaryOp, lhs: Value, rhs: Value) -> Result<Value> {
        self.push(Op::Binary { op, lhs, rhs })
    }

    pub fn compare(&mut self, cmp: Comparison, lhs: Value, rhs: Value) -> Result<Value> {
        self.push(Op::Compare { cmp, lhs, rhs })
    }

    pub fn select(&mut self, pred: Value, on_true: Value, on_false: Value) -> Result<Value> {
        self.push(Op::Select {
            pred,
            on_true,
            on_false,
        })
    }

    pub fn convert(&mut self, x: Value, to: DType) -> Result<Value> {
        self.push(Op::Convert { x, to })
    }

    pub fn broadcast_in_dim(
        &mut self,
        x: Value,
        shape: impl Into<Shape>,
        dims: &[usize],
    ) -> Result<Value> {
        self.push(Op::BroadcastInDim {
            x,
            shape: shape.into(),
            dims: dims.to_vec(),
        })
    }

    /// `x`, with no gradient flowing back through it.
    pub fn stop_gradient(&mut self, x: Value) -> Result<Value> {
        self.push(Op::StopGradient { x })
    }

    pub fn reshape(&mut self, x: Value, shape: impl Into<Shape>) -> Result<Value> {
        self.push(Op::Reshape {
            x,
            shape: shape.into(),
        })
    }

    pub fn transpose(&mut self, x: Value, perm: &[usize]) -> Result<Value> {
        self.push(Op::Transpose {
            x,
            perm: perm.to_vec(),
        })
    }

    pub fn reverse(&mut self, x: Value, axes: &[usize]) -> Result<Value> {
        self.push(Op::Reverse {
            x,
            axes: axes.to_vec(),
        })
    }

    pub fn slice(
        &mut self,
        x: Value,
        start: &[usize],
        limit: &[usize],
        stride: &[usize],
    ) -> Result<Value> {
        self.push(Op::Slice {
            x,
            start: start.to_vec(),
            limit: limit.to_vec(),
            stride: stride.to_vec(),
        })
    }

    /// The window of dims `sizes` at `starts` (integer scalars, clamped into range).
    pub fn dynamic_slice(&mut self, x: Value, starts: &[Value], sizes: &[usize]) -> Result<Value> {
        self.push(Op::DynamicSlice {
            x,
            starts: starts.to_vec(),
            sizes: sizes.to_vec(),
        })
    }

    /// `x` with the window at `starts` (clamped into range) replaced by `update`.
    pub fn dynamic_update_slice(
        &mut self,
        x: Value,
        update: Value,
        starts: &[Value],
    ) -> Result<Value> {
        self.push(Op::DynamicUpdateSlice {
            x,
            update,
            starts: starts.to_vec(),
        })
    }

    pub fn concatenate(&mut self, xs: &[Value], axis: usize) -> Result<Value> {
        self.push(Op::Concatenate {
            xs: xs.to_vec(),
            axis,
        })
    }

    pub fn pad(
        &mut self,
        x: Value,
        value: Value,
        low: &[i64],
        high: &[i64],
        interior: &[usize],
    ) -> Result<Value> {
        self.push(Op::Pad {
            x,
            value,
            low: low.to_vec(),
            high: high.to_vec(),
            interior: interior.to_vec(),
        })
    }

    pub fn dot_general(&mut self, lhs: Value, rhs: Value, dims: DotDims) -> Result<Value> {
        self.push(Op::DotGeneral { lhs, rhs, dims })
    }

    pub fn reduce(&mut self, op: ReduceOp, x: Value, axes: &[usize]) -> Result<Value> {
        self.push(Op::Reduce {
            op,
            x,
            axes: axes.to_vec(),
        })
    }

    /// The mean and the biased variance of `x` over `axes`, stacked as `[2, kept dims]`.
    pub fn moments(&mut self, x: Value, axes: &[usize]) -> Result<Value> {
        self.push(Op::Moments {
            x,
            axes: axes.to_vec(),
        })
    }

    pub fn reduce_window(&mut self, op: ReduceOp, x: Value, window: Window) -> Result<Value> {
        self.push(Op::ReduceWindow { op, x, window })
    }

    pub fn select_and_scatter_add(
        &mut self,
        op: ReduceOp,
        source: Value,
        operand: Value,
        window: Window,
    ) -> Result<Value> {
        self.push(Op::SelectAndScatterAdd {
            op,
            source,
            operand,
            window,
        })
    }

    pub fn convolution(&mut self, lhs: Value, rhs: Value, params: ConvParams) -> Result<Value> {
        self.push(Op::Convolution { lhs, rhs, params })
    }

    pub fn gather(
        &mut self,
        operand: Value,
        indices: Value,
        axis: usize,
        batch_dims: usize,
    ) -> Result<Value> {
        self.push(Op::Gather {
            operand,
            indices,
            axis,
            batch_dims,
        })
    }

    pub fn scatter_add(
        &mut self,
        operand: Value,
        indices: Value,
        updates: Value,
        axis: usize,
        batch_dims: usize,
    ) -> Result<Value> {
        self.push(Op::ScatterAdd {
            operand,
            indices,
            updates,
            axis,
            batch_dims,
        })
    }

    /// Uniform samples in `[0, 1)` of type `ty` (f32 or f64) from an `i32[2]` key.
    pub fn random_uniform(&mut self, key: Value, ty: TensorType) -> Result<Value> {
        self.push_typed(Op::RandomUniform { key }, Some(ty))
    }

    /// A loop over the carried values `init` (StableHLO `while`): while `cond` (a graph
    /// from the carried values to one `bool[]`) gives true, they become what `body` (a
    /// graph from the carried values to the same types) returns. Returns the final carried
    /// values, one sibling node each (see [`Op::While`]); the loop runs once whichever of
    /// them are used.
    pub fn while_loop(&mut self, init: &[Value], cond: Graph, body: Graph) -> Result<Vec<Value>> {
        self.while_loop_of(init, cond, body, None)
    }

    /// [`Graph::while_loop`], marked as the loop of a scan when `scan` is given.
    pub(crate) fn while_loop_of(
        &mut self,
        init: &[Value],
        cond: Graph,
        body: Graph,
        scan: Option<ScanStep>,
    ) -> Result<Vec<Value>> {
        let (cond, body) = (Region::new(cond), Region::new(body));
        let mut out = Vec::with_capacity(init.len());
        // The first sibling checks the regions and the operands; the others differ from it
        // only in which carried value they are.
        for result in 0..init.len().max(1) {
            let op = Op::While {
                init: init.to_vec(),
                result,
                cond: cond.clone(),
                body: body.clone(),
                scan: scan.clone(),
            };
            let v = match out.first() {
                None => self.push(op)?,
                Some(_) => {
                    let ty = self.ty(init[result]).clone();
                    self.push_unchecked(op, ty)
                }
            };
            out.push(v);
        }
        Ok(out)
    }

    pub fn all_reduce_sum(&mut self, x: Value) -> Result<Value> {
        self.push(Op::AllReduceSum { x })
    }

    pub fn replica_id(&mut self) -> Value {
        self.push_unchecked(Op::ReplicaId, TensorType::scalar(DType::I32))
    }
}
