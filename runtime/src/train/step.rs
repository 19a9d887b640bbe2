//! The step graphs: train (forward, loss, backward, optimizer update and metric
//! accumulation, `k` steps unrolled), evaluate and predict. Every graph takes the state
//! described by [`Layout`] first, then its own inputs.

use super::compile::{Layout, TrainState};
use super::distribute::{self, Dist};
use super::staging::with_rows;
use crate::autodiff;
use crate::backend::CompileOptions;
use crate::ir::{BinaryOp, Comparison, DType, Graph, TensorType, UnaryOp, Value};
use crate::metrics::Metric;
use crate::nn::{Architecture, Forward};
use crate::optim::{
    accumulate_gradients, apply_ema, apply_weight_decay, clip_gradients, settle, Accumulated, Step,
};
use crate::Model;
use crate::{Error, NonFiniteCause, Result};

/// Which step graph, for which shapes. Under data parallelism `x` and `y` are one
/// replica's types and `dist` says how the global batch is split.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum StepKey {
    /// `k` steps of `batch` rows each.
    Train {
        batch: usize,
        k: usize,
        x: TensorType,
        y: TensorType,
        dist: Option<Dist>,
    },
    /// `k` batches.
    Eval {
        k: usize,
        x: TensorType,
        y: TensorType,
        dist: Option<Dist>,
    },
    /// `value_and_grad`'s graph (see `grad::grad_graph`).
    Grad {
        x: TensorType,
        y: TensorType,
        dist: Option<Dist>,
    },
}

/// `x - x == 0`: false for NaN and ±∞.
fn is_finite(g: &mut Graph, x: Value) -> Result<Value> {
    let d = g.sub(x, x)?;
    let z = g.zeros_like(d)?;
    g.compare(Comparison::Eq, d, z)
}

/// Whether every element of every value in `xs` is finite, as one boolean: whether the
/// sum of all their elements is. Any NaN or ±∞ makes the sum NaN or ±∞; finite values
/// make it overflow only when they average beyond `f32::MAX / n`, which this counts as
/// an overflow too. A plain sum reads each value once as a reduction, so it joins no
/// elementwise kernel of the update (natively, Adam's update stays one hand-fused pass).
/// Each value is summed over every axis but its last first: natively that reduction keeps
/// one running sum per element of a row (independent, so vectorised) where a sum over
/// everything at once is one serial chain of additions.
fn all_finite(g: &mut Graph, xs: &[Value]) -> Result<Value> {
    let mut total: Option<Value> = None;
    for &x in xs {
        let rank = g.ty(x).rank();
        let mut s = match rank {
            0 => x,
            1 => g.sum_all(x)?,
            _ => {
                let rows = g.sum(x, &(0..rank - 1).collect::<Vec<_>>())?;
                g.sum_all(rows)?
            }
        };
        if g.ty(s).dtype != DType::F32 {
            s = g.convert(s, DType::F32)?;
        }
        total = Some(match total {
            Some(t) => g.add(t, s)?,
            None => s,
        });
    }
    match total {
        Some(t) => is_finite(g, t),
        None => {
            let zero = g.scalar(0.0, DType::F32);
            g.compare(Comparison::Eq, zero, zero)
        }
    }
}

/// The status a train call takes and returns: `[healthy (1 or 0), cause, value]`, where
/// `cause` is the code of the first failed check of the first bad step (0 while healthy)
/// and `value` that step's loss or learning rate, when one of those is the cause.
pub(crate) const STATUS_LEN: usize = 3;

/// The codes of a step's checks in the status vector, in the order they are checked.
/// (`Parameters` is no device check: the host finds it in the weights, see `train_graph`.)
const CAUSES: [NonFiniteCause; 3] = [
    NonFiniteCause::Loss,
    NonFiniteCause::Gradient,
    NonFiniteCause::LearningRate,
];

fn cause_code(c: NonFiniteCause) -> f64 {
    CAUSES
        .iter()
        .position(|&k| k == c)
        .map_or(0.0, |i| i as f64 + 1.0)
}

/// The cause a status code names (`None` for 0, healthy, or a code no check has).
pub(crate) fn cause_of(code: f32) -> Option<NonFiniteCause> {
    let i = code as usize;
    (code >= 1.0 && code == i as f32).then(|| CAUSES.get(i - 1).copied())?
}

/// The loss tracker and metric updates for one batch; returns the batch's mean loss.
#[allow(clippy::too_many_arguments)]
fn accumulate(
    g: &mut Graph,
    t: &TrainState,
    layout: &Layout,
    cur: &mut [Value],
    y: Value,
    pred: Value,
    logits: Option<Value>,
    sw: Value,
    batch: usize,
) -> Result<Value> {
    let per = t.loss.per_sample(g, y, pred, logits)?;
    let weighted = g.mul(per, sw)?;
    let total = g.sum_all(weighted)?;
    // Keras' `sum_over_batch_size`: the weighted sum over the number of samples.
    let loss = g.mul_scalar(total, 1.0 / batch as f64)?;
    let ms = layout.metric_state.start;
    let lb = g.mul_scalar(loss, batch as f64)?;
    cur[ms] = g.add(cur[ms], lb)?;
    cur[ms + 1] = g.add_scalar(cur[ms + 1], batch as f64)?;
    for (m, r) in t.metrics.iter().zip(&layout.metric_ranges) {
        let new = m.update(g, &cur[r.clone()], y, pred, sw)?;
        cur[r.clone()].copy_from_slice(&new);
    }
    Ok(loss)
}

/// What a training step computes before its update: the loss, the gradients of the
/// trainable parameters (in [`Layout::trainable`] order) and the layers' state updates
/// (BatchNormalization's moving statistics).
pub(crate) struct LossGrads {
    pub loss: Value,
    pub grads: Vec<Value>,
    pub updates: Vec<(Value, Value)>,
}

/// The one definition of the training loss and its gradients, shared by the train step
/// and `value_and_grad`: the forward pass over `x` in training mode (dropout drawing from
/// `key`, made distinct per replica under `dist`), the loss as Keras'
/// `sum_over_batch_size` scales it (`Σ per-sample loss · weight / batch`; under `dist`
/// each replica's share of the global batch's, all-reduced), the loss tracker and
/// metrics in `new` advanced by the batch, and the gradients of that loss with respect to
/// the trainable entries of `params`. `what` names the call in the output-activation
/// warning. The model adds no regularization losses, so this loss is all the step
/// differentiates.
#[allow(clippy::too_many_arguments)]
pub(crate) fn loss_and_grads<A: Architecture>(
    g: &mut Graph,
    model: &Model<A>,
    t: &TrainState,
    layout: &Layout,
    new: &mut [Value],
    params: &[Value],
    (x, y, sw): (Value, Value, Value),
    key: Value,
    (batch, dist): (usize, Option<Dist>),
    what: &str,
) -> Result<LossGrads> {
    let key = match dist {
        Some(_) => distribute::replica_key(g, key)?,
        None => key,
    };
    let (pred, logits, activation, state_updates) = {
        let mut cx = Forward::new(g, true, Some(key));
        let pred = model.forward(&mut cx, x, params)?;
        let (logits, activation) = (cx.logits_of(pred), cx.activation_of(pred));
        (pred, logits, activation, cx.updates().to_vec())
    };
    t.check_prediction(what, g.ty(y), g.ty(pred), activation)?;
    let trainable: Vec<Value> = layout.trainable.iter().map(|&i| params[i]).collect();
    match dist {
        None => {
            let loss = accumulate(g, t, layout, new, y, pred, logits, sw, batch)?;
            let one = g.scalar(1.0, DType::F32);
            let grads = autodiff::vjp(g, &[loss], &[one], &trainable)?;
            Ok(LossGrads {
                loss,
                grads,
                updates: state_updates,
            })
        }
        Some(d) => {
            let r = distribute::reduce_train_step(
                g,
                t,
                layout,
                new,
                (y, pred, logits, sw),
                &trainable,
                &state_updates,
                d,
            )?;
            Ok(LossGrads {
                loss: r.loss,
                grads: r.grads,
                updates: r.updates,
            })
        }
    }
}

/// The loss and each metric's result from the current state.
fn results(
    g: &mut Graph,
    metrics: &[Box<dyn Metric>],
    layout: &Layout,
    cur: &[Value],
) -> Result<Vec<Value>> {
    let ms = layout.metric_state.start;
    let mut out = vec![crate::metrics::ratio(g, cur[ms], cur[ms + 1])?];
    for ((m, r), shape) in metrics
        .iter()
        .zip(&layout.metric_ranges)
        .zip(&layout.result_shapes)
    {
        let v = m.result(g, &cur[r.clone()])?;
        let ty = g.ty(v);
        if ty.dtype != DType::F32 || ty.dims() != shape.as_slice() {
            return Err(Error::invalid(
                m.name(),
                format!("internal: the metric's result is {ty}, but it declared f32{shape:?}"),
            ));
        }
        out.push(v);
    }
    Ok(out)
}

/// Scalars and vectors of any type as one flat f32 vector, in order.
fn pack_f32(g: &mut Graph, values: &[Value]) -> Result<Value> {
    let mut parts = Vec::with_capacity(values.len());
    for &s in values {
        let f = if g.ty(s).dtype == DType::F32 {
            s
        } else {
            g.convert(s, DType::F32)?
        };
        let n = g.ty(f).numel();
        parts.push(g.reshape(f, [n])?);
    }
    g.concatenate(&parts, 0)
}

pub(super) fn declare_state(g: &mut Graph, layout: &Layout) -> Vec<Value> {
    layout
        .types
        .iter()
        .map(|t| g.parameter(t.clone()))
        .collect()
}

/// The number of values in a train call's logs vector (see `train_graph`): the loss,
/// each metric's result (one value for a scalar, `n` for a vector of `n`: see
/// [`Layout::result_shapes`]), then the call's status.
pub(crate) fn logs_len(result_shapes: &[Vec<usize>]) -> usize {
    let values: usize = result_shapes
        .iter()
        .map(|s| s.iter().product::<usize>())
        .sum();
    1 + values + STATUS_LEN
}

/// The train step: inputs `x [k·b, …]`, `y [k·b, …]`, `sw [k·b]`, `lr [k]` and `status
/// [STATUS_LEN]` (see [`STATUS_LEN`]); outputs the new state (updating the state
/// parameters in place), one f32 vector of logs (the running loss and metric results,
/// then the new status: one vector so the host reads one buffer per call, as on XLA each
/// read is a device round trip), and the new status for the next call.
///
/// With `k > 1` the steps run as one loop over the `k` batches (Keras'
/// `steps_per_execution`): the graph holds one step whatever `k` is, and the state, the
/// health and the dropout key are carried from step to step.
///
/// A step is healthy when its loss, its gradients (before clipping) and its learning rate
/// are finite. A step that is not changes nothing, nor do the steps after it, in this
/// call or in the calls it hands its status: so the host need not read every call's logs
/// to stop with the last good state (a read costs a round trip to the device, and the
/// device waits while the host reads). With `dist` this is one replica's program: `b` is
/// its share of each global batch, and one all-reduce per step makes every replica take
/// the global step (see `distribute`); the loss and gradients are then the same on every
/// replica, and so is the verdict.
#[allow(clippy::too_many_arguments)]
pub(crate) fn train_graph<A: Architecture>(
    model: &Model<A>,
    t: &TrainState,
    layout: &Layout,
    batch: usize,
    k: usize,
    dist: Option<Dist>,
    x_ty: &TensorType,
    y_ty: &TensorType,
) -> Result<(Graph, CompileOptions)> {
    let mut g = Graph::new("train_step");
    let state = declare_state(&mut g, layout);
    let x = g.parameter(x_ty.clone());
    let y = g.parameter(y_ty.clone());
    let sw = g.parameter(TensorType::new(DType::F32, [k * batch]));
    let lr = g.parameter(TensorType::new(DType::F32, [k]));
    let status = g.parameter(TensorType::new(DType::F32, [STATUS_LEN]));
    let entry = |g: &mut Graph, i: usize| -> Result<Value> {
        let v = g.slice(status, &[i], &[i + 1], &[1])?;
        g.reshape(v, [])
    };
    let healthy = entry(&mut g, 0)?;
    let zero = g.scalar(0.0, DType::F32);
    let go = g.compare(Comparison::Ne, healthy, zero)?;
    let health = [go, entry(&mut g, 1)?, entry(&mut g, 2)?];
    let lr = if k == 1 { g.reshape(lr, [])? } else { lr };
    let one_row = |t: &TensorType| with_rows(t, batch);
    let batches = [
        (x, one_row(x_ty)),
        (y, one_row(y_ty)),
        (sw, TensorType::new(DType::F32, [batch])),
        (lr, TensorType::scalar(DType::F32)),
    ];
    let mut carried = state.clone();
    carried.extend(health);
    let (finals, _) = over_batches(
        &mut g,
        k,
        "train_step_body",
        &carried,
        &batches,
        |g, c, rows| {
            let (state, h) = c.split_at_mut(layout.len());
            let h: &mut [Value; 3] = h.try_into().map_err(|_| {
                Error::invalid("train step", "internal: the health is three values")
            })?;
            let rows = StepIn {
                x: rows[0],
                y: rows[1],
                sw: rows[2],
                lr: rows[3],
            };
            train_step(g, model, t, layout, (batch, dist), state, h, rows)?;
            Ok(Vec::new())
        },
    )?;
    let (mut cur, health) = (finals[..layout.len()].to_vec(), &finals[layout.len()..]);
    // The key moves on by the steps run when the call started healthy.
    cur[layout.key] = g.select(go, cur[layout.key], state[layout.key])?;
    let (ok, bad_cause, bad_value) = (health[0], health[1], health[2]);
    let logs = results(&mut g, &t.metrics, layout, &cur)?;
    if logs.len() != 1 + t.metric_names.len() {
        return Err(Error::invalid(
            "train step",
            format!(
                "internal: {} logs, expected {}",
                logs.len(),
                1 + t.metric_names.len()
            ),
        ));
    }
    // The status packed once and appended whole: a concatenation of few operands (the
    // native executor keeps up to four on the stack).
    let status_out = pack_f32(&mut g, &[ok, bad_cause, bad_value])?;
    let logs = pack_f32(&mut g, &logs)?;
    let mut outputs = cur.clone();
    outputs.push(g.concatenate(&[logs, status_out], 0)?);
    outputs.push(status_out);
    g.set_outputs(outputs)?;
    let updates = (0..layout.len()).map(|i| (i, i)).collect();
    Ok((g, CompileOptions { updates }))
}

/// Runs `body` once per batch of `k` (the calls of `steps_per_execution`): `batches`
/// holds each input of all `k` batches in order with the type of one batch's, and
/// `carried` the values each batch advances. With `k = 1` `body` appends to `g` itself;
/// otherwise it builds one batch's graph, run as a loop over the `k` batches (one graph
/// whatever `k` is). `body` advances the carried values it is given and returns one
/// batch's outputs; returns the final carried values and the outputs of all `k`
/// batches, each joined along its first axis as the inputs were.
fn over_batches(
    g: &mut Graph,
    k: usize,
    name: &str,
    carried: &[Value],
    batches: &[(Value, TensorType)],
    body: impl FnOnce(&mut Graph, &mut [Value], &[Value]) -> Result<Vec<Value>>,
) -> Result<(Vec<Value>, Vec<Value>)> {
    if k == 1 {
        let mut c = carried.to_vec();
        let rows: Vec<Value> = batches.iter().map(|&(v, _)| v).collect();
        let outs = body(g, &mut c, &rows)?;
        return Ok((c, outs));
    }
    let mut sg = Graph::new(name);
    let mut c: Vec<Value> = carried
        .iter()
        .map(|&v| sg.parameter(g.ty(v).clone()))
        .collect();
    let rows: Vec<Value> = batches
        .iter()
        .map(|(_, t)| sg.parameter(t.clone()))
        .collect();
    let outs = body(&mut sg, &mut c, &rows)?;
    let out_types: Vec<TensorType> = outs.iter().map(|&o| sg.ty(o).clone()).collect();
    c.extend(outs);
    sg.set_outputs(c)?;
    let xs = batches
        .iter()
        .map(|&(v, ref t)| g.reshape(v, [&[k][..], t.dims()].concat()))
        .collect::<Result<Vec<_>>>()?;
    let (finals, ys) = g.scan_undifferentiated(carried, &xs, &sg)?;
    let ys = ys
        .into_iter()
        .zip(&out_types)
        .map(|(y, t)| match t.dims().split_first() {
            Some((&m, rest)) => g.reshape(y, [&[k * m][..], rest].concat()),
            None => Ok(y),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((finals, ys))
}

/// What one training step reads besides the state: its batch's rows, their sample
/// weights and its learning rate (a scalar).
struct StepIn {
    x: Value,
    y: Value,
    sw: Value,
    lr: Value,
}

/// Appends one training step to `g`: the forward pass, loss and gradients, the
/// optimizer's update (with accumulation, clipping, weight decay and EMA as configured)
/// and the metrics, on the state `cur`, which it advances (the dropout key by one step
/// whatever happens; the rest only when the step commits). `health` is `[ok, cause,
/// value]`: the step commits when `ok` and its own checks hold, and the first failing
/// step records its cause and value there.
#[allow(clippy::too_many_arguments)]
fn train_step<A: Architecture>(
    g: &mut Graph,
    model: &Model<A>,
    t: &TrainState,
    layout: &Layout,
    (batch, dist): (usize, Option<Dist>),
    cur: &mut [Value],
    health: &mut [Value; 3],
    StepIn { x, y, sw, lr }: StepIn,
) -> Result<()> {
    let opt = t.optimizer.as_ref();
    let cfg = opt.config();
    let [ok, bad_cause, bad_value] = *health;
    let code = |g: &mut Graph, c: NonFiniteCause| g.scalar(cause_code(c), DType::F32);
    let (c_loss, c_grad, c_lr) = (
        code(g, NonFiniteCause::Loss),
        code(g, NonFiniteCause::Gradient),
        code(g, NonFiniteCause::LearningRate),
    );
    let key = cur[layout.key];
    let params: Vec<Value> = cur[layout.params.clone()].to_vec();
    let mut new = cur.to_vec();
    let LossGrads {
        loss,
        grads,
        updates: state_updates,
    } = loss_and_grads(
        g,
        model,
        t,
        layout,
        &mut new,
        &params,
        (x, y, sw),
        key,
        (batch, dist),
        "fit",
    )?;
    let grads_ok = all_finite(g, &grads)?;
    let it = cur[layout.iterations];
    let accumulators: Vec<Value> = (0..layout.trainable.len())
        .filter_map(|j| Some(cur[layout.accumulator_of(j)?]))
        .collect();
    let (due, grads) = match accumulate_gradients(g, cfg, it, &grads, &accumulators)? {
        Some(Accumulated { due, means, kept }) => {
            for (j, acc) in kept.into_iter().enumerate() {
                if let Some(a) = layout.accumulator_of(j) {
                    new[a] = acc;
                }
            }
            (Some(due), means)
        }
        None => (None, grads),
    };
    let grads = clip_gradients(g, cfg, &grads)?;
    // The checks known before the update guard it: a step whose loss, gradients or
    // learning rate are not finite changes nothing, and the update stays one pass
    // that writes the state in place.
    let loss_ok = is_finite(g, loss)?;
    let lr_ok = is_finite(g, lr)?;
    let inputs_ok = g.binary(BinaryOp::And, loss_ok, grads_ok)?;
    let inputs_ok = g.binary(BinaryOp::And, inputs_ok, lr_ok)?;
    let commit = g.binary(BinaryOp::And, ok, inputs_ok)?;
    // With accumulation, the optimizer's state moves on update steps only. The weights,
    // slots and globals are settled under this guard as they are computed (see
    // `Step::settle`); the rest of the state under `commit` at the end.
    let guard = match due {
        Some(due) => g.binary(BinaryOp::And, commit, due)?,
        None => commit,
    };
    let mut settled = vec![false; cur.len()];
    let next = g.add_scalar(it, 1.0)?;
    // What the optimizer's rule, its globals and the EMA count: the steps, or with
    // accumulation the updates so far (Keras' `iterations`), so that bias corrections
    // run as on one step of the combined batch.
    let (updates_before, counted) = match cfg.gradient_accumulation_steps {
        Some(n) => {
            let before = g.binary_scalar(BinaryOp::Div, it, n as f64)?;
            (before, g.add_scalar(before, 1.0)?)
        }
        None => (it, next),
    };
    let tf = g.convert(counted, DType::F32)?;
    let globals = opt.update_globals(g, tf, &cur[layout.globals.clone()])?;
    for (i, &v) in layout.globals.clone().zip(&globals) {
        new[i] = settle(g, Some(guard), v, cur[i])?;
        settled[i] = true;
    }
    let s = Step {
        lr,
        t: tf,
        globals,
        guard: Some(guard),
    };
    for (j, &pi) in layout.trainable.iter().enumerate() {
        let w = apply_weight_decay(g, cfg, params[pi], lr)?;
        let sr = layout.update_slots_of(j);
        let (mut w, slots) = opt.update(g, &s, w, grads[j], &cur[sr.clone()])?;
        if slots.len() != sr.len() {
            return Err(Error::invalid(
                opt.name(),
                format!(
                    "internal: the update gives {} slots, the optimizer declares {}",
                    slots.len(),
                    sr.len()
                ),
            ));
        }
        for (i, &v) in sr.zip(&slots) {
            new[i] = s.settle(g, v, cur[i])?;
            settled[i] = true;
        }
        w = s.settle(g, w, params[pi])?;
        settled[layout.params.start + pi] = true;
        if let Some(e) = layout.ema_of(j) {
            let (ew, avg) = apply_ema(g, cfg, updates_before, w, cur[e])?;
            // An overwrite by the average is guarded with the rest of the state.
            if ew != w {
                settled[layout.params.start + pi] = false;
            }
            w = ew;
            new[e] = avg;
        }
        new[layout.params.start + pi] = w;
    }
    for (param, value) in state_updates {
        let i = params.iter().position(|&p| p == param).ok_or_else(|| {
            Error::invalid(
                "train step",
                "a layer updated a value that is not one of its parameters",
            )
        })?;
        if g.ty(value) != g.ty(param) {
            return Err(Error::invalid(
                "train step",
                format!("state update of {} gives {}", g.ty(param), g.ty(value)),
            ));
        }
        new[layout.params.start + i] = value;
        settled[layout.params.start + i] = false;
    }
    new[layout.iterations] = next;

    for i in 0..cur.len() {
        if settled[i] {
            cur[i] = new[i];
        } else if new[i] != cur[i] {
            cur[i] = g.select(commit, new[i], cur[i])?;
        }
    }
    // An update that overflows shows only in what it wrote. Guarding the update by it
    // would need the new state beside the old one until the check is done (a second
    // copy of the state), and even checking it costs a reduction over every updated
    // tensor per step; a non-finite weight makes the next step's loss non-finite
    // instead, and the host, reading the weights then, names the overflow.
    // The first failed check, in `CAUSES` order, and its scalar.
    let cause = g.select(grads_ok, c_lr, c_grad)?;
    let cause = g.select(loss_ok, cause, c_loss)?;
    let value = g.select(loss_ok, lr, loss)?;
    let step_bad = g.unary(UnaryOp::Not, inputs_ok)?;
    let first_bad = g.binary(BinaryOp::And, ok, step_bad)?;
    // Each step draws its dropout masks from its own key.
    let offset = g.constant(crate::Tensor::from_vec(&[2], vec![1i32, 0])?);
    cur[layout.key] = g.add(key, offset)?;
    *health = [
        commit,
        g.select(first_bad, cause, bad_cause)?,
        g.select(first_bad, value, bad_value)?,
    ];
    Ok(())
}

/// The evaluation step: inputs `x`, `y`, `sw` of `k` batches; accumulates the loss and
/// metrics (inference behaviour) over each batch in turn and outputs their state and
/// results. With `dist`, one replica's program over its share of each batch, the
/// increments summed over replicas.
pub(crate) fn eval_graph<A: Architecture>(
    model: &Model<A>,
    t: &TrainState,
    layout: &Layout,
    (k, dist): (usize, Option<Dist>),
    x_ty: &TensorType,
    y_ty: &TensorType,
) -> Result<(Graph, CompileOptions)> {
    let mut g = Graph::new("eval_step");
    let state = declare_state(&mut g, layout);
    let x = g.parameter(x_ty.clone());
    let y = g.parameter(y_ty.clone());
    let batch = per_batch("evaluate", x_ty, k)?;
    let sw = g.parameter(TensorType::new(DType::F32, [k * batch]));
    let batches = [
        (x, with_rows(x_ty, batch)),
        (y, with_rows(y_ty, batch)),
        (sw, TensorType::new(DType::F32, [batch])),
    ];
    let (cur, _) = over_batches(
        &mut g,
        k,
        "eval_step_body",
        &state,
        &batches,
        |g, cur, rows| {
            let (x, y, sw) = (rows[0], rows[1], rows[2]);
            let params: Vec<Value> = cur[layout.params.clone()].to_vec();
            let (pred, logits, activation) = {
                let mut cx = Forward::new(g, false, None);
                let pred = model.forward(&mut cx, x, &params)?;
                (pred, cx.logits_of(pred), cx.activation_of(pred))
            };
            t.check_prediction("evaluate", g.ty(y), g.ty(pred), activation)?;
            match dist {
                None => {
                    accumulate(g, t, layout, cur, y, pred, logits, sw, batch)?;
                }
                Some(d) => {
                    distribute::reduce_eval_step(g, t, layout, cur, (y, pred, logits, sw), d)?
                }
            }
            Ok(Vec::new())
        },
    )?;
    let ms = layout.metric_state.clone();
    let mut outputs: Vec<Value> = cur[ms.clone()].to_vec();
    outputs.extend(results(&mut g, &t.metrics, layout, &cur)?);
    g.set_outputs(outputs)?;
    let updates = ms.clone().enumerate().collect();
    Ok((g, CompileOptions { updates }))
}

/// The rows of one of the `k` batches an input of type `t` holds.
fn per_batch(what: &str, t: &TensorType, k: usize) -> Result<usize> {
    match t.dims().first() {
        Some(&n) if k > 0 && n % k == 0 => Ok(n / k),
        _ => Err(Error::invalid(
            what,
            format!("internal: {t} does not hold {k} batches of equal size"),
        )),
    }
}

/// The inference forward pass of `x`, `k` batches of its rows in turn. The graph first
/// takes `state` (whose leading entries are the model's parameters), then `x`.
pub(crate) fn predict_graph<A: Architecture>(
    model: &Model<A>,
    state: &[TensorType],
    k: usize,
    x_ty: &TensorType,
) -> Result<Graph> {
    let mut g = Graph::new("predict_step");
    let state: Vec<Value> = state.iter().map(|t| g.parameter(t.clone())).collect();
    let x = g.parameter(x_ty.clone());
    let batch = per_batch("predict", x_ty, k)?;
    let n = model.params().len();
    let (_, pred) = over_batches(
        &mut g,
        k,
        "predict_step_body",
        &state,
        &[(x, with_rows(x_ty, batch))],
        |g, state, rows| {
            let mut cx = Forward::new(g, false, None);
            Ok(vec![model.forward(&mut cx, rows[0], &state[..n])?])
        },
    )?;
    g.set_outputs(pred)?;
    Ok(g)
}
