//! `scan` (JAX's `lax.scan`) as a composite: a while loop over the leading axis of
//! stacked inputs, its body slicing input `t` and writing output `t` into stacked
//! outputs (`dynamic_slice` / `dynamic_update_slice`), the step count carried. The loop
//! also stacks each carried value that changes at the start of every step and each product
//! of changing values: the residuals reverse mode reads (`autodiff::scan`), which the
//! loop's [`ScanStep`] marker lays out.

use crate::ir::{Comparison, DType, Graph, Op, Region, ScanStep, TensorType, Value};
use crate::{Error, Result, Tensor};

impl Graph {
    /// Runs `step` once per row of `xs` (all with the same leading size `T`): `step` takes
    /// the carried values then one row of each `xs`, and returns the new carried values
    /// then one row of each output. Returns the final carried values and the outputs
    /// stacked along a new leading axis of size `T`.
    ///
    /// Differentiable (see [`ScanStep`]): cotangents reach the initial carried values and
    /// `xs`, through carried values the step returns unchanged (weights) too.
    pub fn scan(
        &mut self,
        init: &[Value],
        xs: &[Value],
        step: &Graph,
    ) -> Result<(Vec<Value>, Vec<Value>)> {
        self.scan_with(init, xs, step, false)
    }

    /// [`Graph::scan`] visiting the rows from the last (`lax.scan(reverse=True)`): row `t`
    /// of the outputs is still the step's output for row `t` of the inputs.
    pub fn scan_reverse(
        &mut self,
        init: &[Value],
        xs: &[Value],
        step: &Graph,
    ) -> Result<(Vec<Value>, Vec<Value>)> {
        self.scan_with(init, xs, step, true)
    }

    pub(crate) fn scan_with(
        &mut self,
        init: &[Value],
        xs: &[Value],
        step: &Graph,
        reverse: bool,
    ) -> Result<(Vec<Value>, Vec<Value>)> {
        self.scan_of(init, xs, step, reverse, true)
    }

    /// [`Graph::scan`] as a plain loop that is never differentiated (the training loop of
    /// `steps_per_execution`): it stacks no residuals, which would copy every changing
    /// carried value per step, and reverse mode refuses it as it refuses any `while`.
    pub(crate) fn scan_undifferentiated(
        &mut self,
        init: &[Value],
        xs: &[Value],
        step: &Graph,
    ) -> Result<(Vec<Value>, Vec<Value>)> {
        self.scan_of(init, xs, step, false, false)
    }

    fn scan_of(
        &mut self,
        init: &[Value],
        xs: &[Value],
        step: &Graph,
        reverse: bool,
        differentiable: bool,
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
        let stack = |t: &TensorType| TensorType::new(t.dtype, [&[length][..], t.dims()].concat());
        let stacked_out: Vec<TensorType> = out_rows.iter().map(stack).collect();

        // No rows: nothing to run (a row slice of an empty axis has no valid shape).
        if length == 0 {
            let ys = stacked_out
                .iter()
                .map(|t| self.full(0.0, t))
                .collect::<Result<_>>()?;
            return Ok((init.to_vec(), ys));
        }

        let mut layout = ScanLayout::of(step, carry.len())?;
        if !differentiable {
            layout = layout.undifferentiated();
        }
        let residuals: Vec<TensorType> = layout
            .residuals
            .iter()
            .map(|&k| stack(&carry[k]))
            .chain(layout.saved.iter().map(|&i| stack(&step.nodes()[i].ty)))
            .collect();
        // The loop carries: the step count, the carried values, the stacked inputs (a
        // region sees only what it carries), the stacked outputs and the residuals.
        let count = TensorType::scalar(DType::I32);
        let loop_types: Vec<TensorType> = std::iter::once(count)
            .chain(carry.iter().cloned())
            .chain(stacked.iter().cloned())
            .chain(stacked_out.iter().cloned())
            .chain(residuals.iter().cloned())
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
        // The row this step reads and writes.
        let row = if reverse {
            let last = body.constant(Tensor::scalar(length as i32 - 1));
            body.sub(last, t)?
        } else {
            t
        };
        let zero = body.constant(Tensor::scalar(0i32));
        let starts = |rank: usize| -> Vec<Value> {
            std::iter::once(row)
                .chain(std::iter::repeat_n(zero, rank))
                .collect()
        };
        let with_unit_axis = |t: &TensorType| -> Vec<usize> { [&[1][..], t.dims()].concat() };
        let mut args: Vec<Value> = p[1..=nc].to_vec();
        for (j, r) in rows.iter().enumerate() {
            let x = layout.x(j);
            let slice = body.dynamic_slice(p[x], &starts(r.rank()), &with_unit_axis(r))?;
            args.push(body.reshape(slice, r.dims().to_vec())?);
        }
        let values = body.inline_values(step, &args)?;
        let results: Vec<Value> = step.outputs().iter().map(|o| values[o.index()]).collect();
        let one = body.constant(Tensor::scalar(1i32));
        let mut next = vec![body.add(t, one)?];
        next.extend(&results[..nc]);
        next.extend(&p[1 + nc..1 + nc + nx]);
        for (k, r) in out_rows.iter().enumerate() {
            let y = body.reshape(results[nc + k], with_unit_axis(r))?;
            next.push(body.dynamic_update_slice(p[layout.y(k)], y, &starts(r.rank()))?);
        }
        for (i, &k) in layout.residuals.iter().enumerate() {
            let c = body.reshape(p[layout.carry(k)], with_unit_axis(&carry[k]))?;
            let at = starts(carry[k].rank());
            next.push(body.dynamic_update_slice(p[layout.residual(i)], c, &at)?);
        }
        for (i, &node) in layout.saved.iter().enumerate() {
            let ty = &step.nodes()[node].ty;
            let v = body.reshape(values[node], with_unit_axis(ty))?;
            let at = starts(ty.rank());
            next.push(body.dynamic_update_slice(p[layout.saved_at(i)], v, &at)?);
        }
        body.set_outputs(next)?;

        let mut start = vec![self.constant(Tensor::scalar(0i32))];
        start.extend(init);
        start.extend(xs);
        for t in stacked_out.iter().chain(&residuals) {
            start.push(self.full(0.0, t)?);
        }
        let scan = differentiable.then(|| ScanStep {
            step: Region::new(step.clone()),
            carries: nc,
            reverse,
        });
        let out = self.while_loop_of(&start, cond, body, scan)?;
        let ys = (0..layout.ys).map(|k| out[layout.y(k)]).collect();
        Ok((out[1..=nc].to_vec(), ys))
    }

    /// Appends `g`'s computation with its parameters bound to `args`; its outputs' values.
    pub fn inline(&mut self, g: &Graph, args: &[Value]) -> Result<Vec<Value>> {
        let values = self.inline_values(g, args)?;
        Ok(g.outputs().iter().map(|o| values[o.index()]).collect())
    }

    /// [`Graph::inline`], returning the value here of every node of `g`.
    pub(crate) fn inline_values(&mut self, g: &Graph, args: &[Value]) -> Result<Vec<Value>> {
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
        Ok(map)
    }
}

fn types_text(types: &[TensorType]) -> String {
    let parts: Vec<String> = types.iter().map(|t| t.to_string()).collect();
    format!("({})", parts.join(", "))
}

/// Where a scan's values sit among its loop's carried values: the count, the `carries`
/// carried values, the `xs` stacked inputs, the `ys` stacked outputs, then a residual stack
/// for each carried value in `residuals` (those the step does not return unchanged), then
/// a stack for each product in `saved`.
#[derive(Clone, Debug)]
pub(crate) struct ScanLayout {
    pub carries: usize,
    pub xs: usize,
    pub ys: usize,
    /// Per carried value: whether the step returns its parameter unchanged (a weight), so
    /// its value at every step is the initial one and no residual is stacked.
    pub passed: Vec<bool>,
    /// The carried values with a residual stack, in order.
    pub residuals: Vec<usize>,
    /// The step's nodes whose value at every step is stacked as well: its products
    /// (`dot_general`, `convolution`) of values that change from step to step. The
    /// backward step reads them instead of recomputing them, as a product costs far more
    /// than moving its result; everything else it recomputes from the residuals.
    pub saved: Vec<usize>,
}

impl ScanLayout {
    /// The layout of a scan of `step` carrying `carries` values.
    pub(crate) fn of(step: &Graph, carries: usize) -> Result<ScanLayout> {
        let (params, outputs) = (step.params(), step.outputs());
        if params.len() <= carries || outputs.len() < carries {
            return Err(Error::shape(
                "scan",
                format!(
                    "a step carrying {carries} values takes them and at least one row, and \
                     returns them first; it takes {} and returns {}",
                    params.len(),
                    outputs.len()
                ),
            ));
        }
        let passed: Vec<bool> = (0..carries).map(|k| outputs[k] == params[k]).collect();
        Ok(ScanLayout {
            carries,
            xs: params.len() - carries,
            ys: outputs.len() - carries,
            residuals: (0..carries).filter(|&k| !passed[k]).collect(),
            saved: saved_products(step, &passed),
            passed,
        })
    }

    /// The layout without residuals or saved products: a loop nothing differentiates.
    pub(crate) fn undifferentiated(mut self) -> ScanLayout {
        self.residuals.clear();
        self.saved.clear();
        self
    }

    pub(crate) fn carry(&self, k: usize) -> usize {
        1 + k
    }

    pub(crate) fn x(&self, j: usize) -> usize {
        1 + self.carries + j
    }

    pub(crate) fn y(&self, j: usize) -> usize {
        1 + self.carries + self.xs + j
    }

    pub(crate) fn residual(&self, i: usize) -> usize {
        1 + self.carries + self.xs + self.ys + i
    }

    pub(crate) fn saved_at(&self, i: usize) -> usize {
        self.residual(self.residuals.len()) + i
    }

    /// How many values the loop carries.
    pub(crate) fn len(&self) -> usize {
        self.saved_at(self.saved.len())
    }

    /// Checks that a loop carrying `types` is laid out as a scan of `step` (the `while`
    /// shape rule, for loops that say they are scans): returns the number of rows.
    pub(crate) fn check(&self, step: &Graph, types: &[TensorType]) -> Result<usize> {
        let bad = |why: String| Err(Error::shape("while", format!("a scan's loop {why}")));
        if types.len() != self.len() {
            return bad(format!(
                "of this step carries {} values, got {}",
                self.len(),
                types.len()
            ));
        }
        if types[0] != TensorType::scalar(DType::I32) {
            return bad(format!("counts in an i32[], got {}", types[0]));
        }
        let Some(&length) = types[self.x(0)].dims().first() else {
            return bad(format!("scans a leading axis, got {}", types[self.x(0)]));
        };
        let stack = |t: &TensorType| TensorType::new(t.dtype, [&[length][..], t.dims()].concat());
        let params = step.param_types();
        let outputs = step.output_types();
        let mut want: Vec<TensorType> = vec![types[0].clone()];
        want.extend(params[..self.carries].iter().cloned());
        want.extend(params[self.carries..].iter().map(stack));
        want.extend(outputs[self.carries..].iter().map(stack));
        want.extend(self.residuals.iter().map(|&k| stack(&params[k])));
        want.extend(self.saved.iter().map(|&i| stack(&step.nodes()[i].ty)));
        if outputs[..self.carries] != params[..self.carries] || want != types {
            return bad(format!(
                "of this step carries {}, got {}",
                types_text(&want),
                types_text(types)
            ));
        }
        Ok(length)
    }
}

/// The products of `step` (see [`ScanLayout::saved`]) that read, through any chain of
/// nodes, a carried value the step changes or a row of an input: a product of weights
/// alone is the same at every step and is recomputed.
fn saved_products(step: &Graph, passed: &[bool]) -> Vec<usize> {
    let mut varies = vec![false; step.len()];
    let mut saved = Vec::new();
    for (i, node) in step.nodes().iter().enumerate() {
        varies[i] = match node.op {
            Op::Parameter { index } => passed.get(index).is_none_or(|&p| !p),
            _ => node.op.operands().iter().any(|v| varies[v.index()]),
        };
        let product = matches!(node.op, Op::DotGeneral { .. } | Op::Convolution { .. });
        if product && varies[i] && node.ty.dtype.is_differentiable() {
            saved.push(i);
        }
    }
    saved
}
