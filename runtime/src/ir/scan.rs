//! `scan` (JAX's `lax.scan`) as a composite: a while loop over the leading axis of
//! stacked inputs, its body slicing input `t` and writing output `t` into stacked
//! outputs (`dynamic_slice` / `dynamic_update_slice`), the step count carried.

use crate::ir::{Comparison, DType, Graph, Op, TensorType, Value};
use crate::{Error, Result, Tensor};

impl Graph {
    /// Runs `step` once per row of `xs` (all with the same leading size `T`): `step` takes
    /// the carried values then one row of each `xs`, and returns the new carried values
    /// then one row of each output. Returns the final carried values and the outputs
    /// stacked along a new leading axis of size `T`.
    pub fn scan(
        &mut self,
        init: &[Value],
        xs: &[Value],
        step: &Graph,
    ) -> Result<(Vec<Value>, Vec<Value>)> {
        let what = "scan";
        let carry: Vec<TensorType> = init
            .iter()
            .map(|&v| Ok(self.try_ty(what, v)?.clone()))
            .collect::<Result<_>>()?;
        let stacked: Vec<TensorType> = xs
            .iter()
            .map(|&v| Ok(self.try_ty(what, v)?.clone()))
            .collect::<Result<_>>()?;
        let Some(length) = stacked.first().map(|t| t.dims().first().copied()) else {
            return Err(Error::shape(
                what,
                "needs at least one stacked input to scan over",
            ));
        };
        let length = length.ok_or_else(|| {
            Error::shape(
                what,
                "a stacked input must have a leading axis to scan over",
            )
        })?;
        let rows: Vec<TensorType> = stacked
            .iter()
            .map(|t| match t.dims().split_first() {
                Some((&n, rest)) if n == length => Ok(TensorType::new(t.dtype, rest.to_vec())),
                _ => Err(Error::shape(
                    what,
                    format!("every stacked input needs a leading axis of {length}, got {t}"),
                )),
            })
            .collect::<Result<_>>()?;
        if length > i32::MAX as usize {
            return Err(Error::shape(
                what,
                format!("{length} steps do not fit an i32 count"),
            ));
        }
        let expected: Vec<TensorType> = carry.iter().chain(&rows).cloned().collect();
        if step.param_types() != expected {
            return Err(Error::shape(
                what,
                format!(
                    "the step must take the carried values then one row of each input, {}, \
                     got {}",
                    types_text(&expected),
                    types_text(&step.param_types())
                ),
            ));
        }
        let outputs = step.output_types();
        if outputs.len() < carry.len() || outputs[..carry.len()] != carry[..] {
            return Err(Error::shape(
                what,
                format!(
                    "the step must return the carried values {} first, got {}",
                    types_text(&carry),
                    types_text(&outputs)
                ),
            ));
        }
        let out_rows = outputs[carry.len()..].to_vec();
        let stacked_out: Vec<TensorType> = out_rows
            .iter()
            .map(|t| TensorType::new(t.dtype, [&[length][..], t.dims()].concat()))
            .collect();

        // No rows: nothing to run (a row slice of an empty axis has no valid shape).
        if length == 0 {
            let ys = stacked_out
                .iter()
                .map(|t| self.full(0.0, t))
                .collect::<Result<_>>()?;
            return Ok((init.to_vec(), ys));
        }

        // The loop carries: the step count, the carried values, the stacked inputs (a
        // region sees only what it carries) and the stacked outputs.
        let count = TensorType::scalar(DType::I32);
        let loop_types: Vec<TensorType> = std::iter::once(count)
            .chain(carry.iter().cloned())
            .chain(stacked.iter().cloned())
            .chain(stacked_out.iter().cloned())
            .collect();
        let (nc, nx) = (carry.len(), stacked.len());

        let mut cond = Graph::new("scan_cond");
        let p: Vec<Value> = loop_types
            .iter()
            .map(|t| cond.parameter(t.clone()))
            .collect();
        let n = cond.constant(Tensor::scalar(length as i32));
        let more = cond.compare(Comparison::Lt, p[0], n)?;
        cond.set_outputs(vec![more])?;

        let mut body = Graph::new("scan_body");
        let p: Vec<Value> = loop_types
            .iter()
            .map(|t| body.parameter(t.clone()))
            .collect();
        let t = p[0];
        let zero = body.constant(Tensor::scalar(0i32));
        let starts = |rank: usize| -> Vec<Value> {
            std::iter::once(t)
                .chain(std::iter::repeat_n(zero, rank))
                .collect()
        };
        let mut args: Vec<Value> = p[1..=nc].to_vec();
        for (j, row) in rows.iter().enumerate() {
            let x = p[1 + nc + j];
            let sizes: Vec<usize> = std::iter::once(1)
                .chain(row.dims().iter().copied())
                .collect();
            let slice = body.dynamic_slice(x, &starts(row.rank()), &sizes)?;
            args.push(body.reshape(slice, row.dims().to_vec())?);
        }
        let results = body.inline(step, &args)?;
        let one = body.constant(Tensor::scalar(1i32));
        let mut next = vec![body.add(t, one)?];
        next.extend(&results[..nc]);
        next.extend(&p[1 + nc..1 + nc + nx]);
        for (k, row) in out_rows.iter().enumerate() {
            let acc = p[1 + nc + nx + k];
            let dims: Vec<usize> = std::iter::once(1)
                .chain(row.dims().iter().copied())
                .collect();
            let y = body.reshape(results[nc + k], dims)?;
            next.push(body.dynamic_update_slice(acc, y, &starts(row.rank()))?);
        }
        body.set_outputs(next)?;

        let mut start = vec![self.constant(Tensor::scalar(0i32))];
        start.extend(init);
        start.extend(xs);
        for t in &stacked_out {
            start.push(self.full(0.0, t)?);
        }
        let out = self.while_loop(&start, cond, body)?;
        Ok((out[1..=nc].to_vec(), out[1 + nc + nx..].to_vec()))
    }

    /// Appends `g`'s computation with its parameters bound to `args`; its outputs' values.
    pub fn inline(&mut self, g: &Graph, args: &[Value]) -> Result<Vec<Value>> {
        if g.params().len() != args.len() {
            return Err(Error::shape(
                "inline",
                format!(
                    "`{}` takes {} values, got {}",
                    g.name(),
                    g.params().len(),
                    args.len()
                ),
            ));
        }
        let mut map: Vec<Value> = Vec::with_capacity(g.len());
        for node in g.nodes() {
            let v = match node.op {
                Op::Parameter { index } => args[index],
                _ => {
                    let op = node.op.map_operands(|v| map[v.index()]);
                    self.push_typed(op, Some(node.ty.clone()))?
                }
            };
            map.push(v);
        }
        Ok(g.outputs().iter().map(|o| map[o.index()]).collect())
    }
}

fn types_text(types: &[TensorType]) -> String {
    let parts: Vec<String> = types.iter().map(|t| t.to_string()).collect();
    format!("({})", parts.join(", "))
}
