//! The step runner: one model's compiled step graphs on one backend and the buffers they
//! run on. It owns the device-resident state (laid out as [`Layout`] says), finds a
//! step's executable by shape, binds a call's inputs after the state, launches the call
//! and reads back what the host asks for. Train calls are chained on the device through
//! their status (see `step::train_graph`), so the host need not read every call's logs.

use super::compile::Layout;
use super::distribute::{self, Dist};
use super::spares::Spares;
use super::step::{cause_of, logs_len, StepKey, STATUS_LEN};
use super::Logs;
use crate::backend::{Backend, Buffer, CompileOptions, Executable, Placement};
use crate::ir::{Graph, TensorType};
use crate::memory::array_filled;
use crate::metrics::Metric;
use crate::nn::ParamSpec;
use crate::optim::Optimizer;
use crate::{Error, NonFiniteCause, Result, Tensor};
use std::collections::HashMap;
use std::sync::Arc;

/// What one train call reports besides the logs: its status (see `step::train_graph`).
pub(crate) struct StepOut {
    pub ok: bool,
    /// Why the first bad step was bad (when not `ok`).
    pub cause: Option<NonFiniteCause>,
    /// That step's loss or learning rate, when that was the cause.
    pub value: f64,
}

impl StepOut {
    /// The status of a call whose steps all passed their checks, read when the weights
    /// they left are found not finite (an overflow in the last update).
    pub fn overflowed() -> StepOut {
        StepOut {
            ok: true,
            cause: None,
            value: f64::NAN,
        }
    }

    /// The error for a bad step, `done` steps having run in all (the model's iteration
    /// count after the call), `in_epoch` of them in `epoch`; `weights_finite` says whether
    /// the weights the bad step read were. Weights that were not were written by the step
    /// before (its update overflowed, which the device does not check: see
    /// `step::train_graph`), and that step is the one named.
    pub fn error(&self, epoch: usize, in_epoch: usize, done: u64, weights_finite: bool) -> Error {
        let cause = match self.cause {
            _ if !weights_finite => NonFiniteCause::Parameters,
            Some(c) => c,
            // A status no check writes cannot come; if it did, "loss" is what the step
            // checked first.
            None => NonFiniteCause::Loss,
        };
        let ran = (cause == NonFiniteCause::Parameters) as u64;
        let scalar = matches!(cause, NonFiniteCause::Loss | NonFiniteCause::LearningRate);
        Error::NonFiniteStep {
            epoch,
            batch: in_epoch.saturating_sub(ran as usize),
            step: done + 1 - ran,
            cause,
            value: scalar.then_some(self.value),
        }
    }
}

/// What one input of a step is to the replicas of a data-parallel step: rows split over
/// them, sample weights split so (padding rows weigh 0), or one value every replica gets
/// whole. On one device every input goes whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bind {
    Rows,
    Weights,
    Whole,
}

/// A train call's inputs after the state: `x`, `y`, the sample weights, the learning rates.
pub(crate) const TRAIN_INPUTS: &[Bind] = &[Bind::Rows, Bind::Rows, Bind::Weights, Bind::Whole];
/// An evaluation call's: `x`, `y`, the sample weights.
pub(crate) const EVAL_INPUTS: &[Bind] = &[Bind::Rows, Bind::Rows, Bind::Weights];
/// A prediction call's: `x`.
pub(crate) const PREDICT_INPUTS: &[Bind] = &[Bind::Rows];

/// The compiled steps of a model and the buffers they run on: the argument list every
/// step graph starts with (the state), followed by the current call's inputs.
pub(crate) struct StepRunner {
    backend: Arc<dyn Backend>,
    args: Vec<Buffer>,
    layout: Layout,
    exes: HashMap<StepKey, Box<dyn Executable>>,
    /// The optimizer's iteration count, mirrored on the host for learning-rate schedules.
    iterations: u64,
    /// The last call's returned outputs, reused by the next call.
    outs: Vec<Buffer>,
    /// The keys of the train executables compiled, and which one the last call ran:
    /// found again by comparing shapes in place, as building a key allocates.
    train_keys: Vec<StepKey>,
    last_train: Option<usize>,
    /// Input buffers of other shapes (the partial batch's, validation's), kept for reuse.
    spare_inputs: Spares<Vec<Buffer>>,
    /// The last train call's logs vector on the host (grown once, read into every step).
    log_values: Vec<f32>,
    /// The last train call's returned outputs (its logs, its status: see
    /// `step::train_graph`), kept while the next call runs, as the host does not read
    /// every call's logs. `chained` says the next call takes its status from them, else
    /// from `status_seed` (healthy); `unread` that the host has not read their logs.
    outs_prev: Vec<Buffer>,
    status_seed: Option<Buffer>,
    chained: bool,
    unread: bool,
}

impl StepRunner {
    /// The state on `backend`: `weights` (one per parameter), fresh optimizer slots and
    /// globals, iteration 0, the random key derived from `seed`, zeroed metric state.
    pub fn new(
        backend: Arc<dyn Backend>,
        params: &[ParamSpec],
        weights: &[Tensor],
        optimizer: &dyn Optimizer,
        metrics: &[Box<dyn Metric>],
        seed: u64,
    ) -> Result<StepRunner> {
        let layout = Layout::new(params, optimizer, metrics);
        let b = backend.as_ref();
        // The state, then a train call's five inputs (see `step::train_graph`).
        let mut args = Vec::with_capacity(layout.len() + 5);
        for w in weights {
            args.push(b.upload(w)?);
        }
        let slots = crate::optim::state_slots(optimizer);
        for &i in &layout.trainable {
            for slot in &slots {
                let p = &params[i];
                let dims = slot.dims(&p.dims);
                let what = || {
                    format!(
                        "optimizer slot `{}` {dims:?} of parameter `{}` {}",
                        slot.name,
                        p.name,
                        p.ty()
                    )
                };
                args.push(b.upload(&Tensor::F32(array_filled(what, &dims, slot.init)?))?);
            }
        }
        for (_, init) in optimizer.globals() {
            args.push(b.upload(&Tensor::scalar(init))?);
        }
        args.push(b.upload(&Tensor::scalar(0i32))?);
        let key = crate::random::Rng::new(seed ^ 0x6b65_795f_7374_7261).next_u64();
        args.push(b.upload(&Tensor::from_vec(
            &[2],
            vec![(key >> 32) as i32, key as i32],
        )?)?);
        for ty in &layout.types[layout.metric_state.clone()] {
            args.push(b.upload(&Tensor::zeros(ty)?)?);
        }
        debug_assert_eq!(args.len(), layout.len());
        Ok(StepRunner {
            backend,
            args,
            layout,
            exes: HashMap::new(),
            iterations: 0,
            outs: Vec::new(),
            train_keys: Vec::new(),
            last_train: None,
            spare_inputs: Spares::default(),
            log_values: Vec::new(),
            outs_prev: Vec::new(),
            status_seed: None,
            chained: false,
            unread: false,
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The host's mirror of the optimizer's iteration count.
    pub fn iterations(&self) -> u64 {
        self.iterations
    }

    pub fn set_iterations(&mut self, n: u64) {
        self.iterations = n;
    }

    /// State entry `i` (see [`Layout`]), read from the device.
    pub fn state(&self, i: usize) -> Result<Tensor> {
        self.backend.download(&self.args[i])
    }

    /// Overwrites state entry `i` with `t` (of its type).
    pub fn set_state(&mut self, i: usize, t: &Tensor) -> Result<()> {
        self.backend.upload_into(t, &mut self.args[i])
    }

    /// Overwrites the parameters on the device with `weights`.
    pub fn upload_weights(&mut self, weights: &[Tensor]) -> Result<()> {
        let start = self.layout.params.start;
        for (i, w) in weights.iter().enumerate() {
            self.backend.upload_into(w, &mut self.args[start + i])?;
        }
        Ok(())
    }

    /// Copies the parameters from the device into `weights`.
    pub fn download_weights(&self, weights: &mut [Tensor]) -> Result<()> {
        let start = self.layout.params.start;
        for (i, w) in weights.iter_mut().enumerate() {
            *w = self.backend.download(&self.args[start + i])?;
        }
        Ok(())
    }

    /// Pairs `(parameter entry, EMA entry)` of every trainable parameter (none without
    /// `use_ema`).
    fn ema_pairs(&self) -> Vec<(usize, usize)> {
        let l = &self.layout;
        l.trainable
            .iter()
            .enumerate()
            .filter_map(|(j, &pi)| Some((l.params.start + pi, l.ema_of(j)?)))
            .collect()
    }

    /// Swaps every trainable parameter with its moving average. Both are state entries of
    /// one type, so this exchanges the buffers themselves: nothing is copied.
    pub fn swap_ema(&mut self) {
        for (w, e) in self.ema_pairs() {
            self.args.swap(w, e);
        }
    }

    /// Copies every trainable parameter into its moving average (`to_weights` false,
    /// Keras' end of `SwapEMAWeights`), or every average into its parameter (`to_weights`
    /// true, Keras' `finalize_variable_values` at the end of `fit`).
    pub fn copy_ema(&mut self, to_weights: bool) -> Result<()> {
        for (w, e) in self.ema_pairs() {
            let (from, to) = if to_weights { (e, w) } else { (w, e) };
            let v = self.backend.download(&self.args[from])?;
            self.backend.upload_into(&v, &mut self.args[to])?;
        }
        Ok(())
    }

    /// Each replica's copy of parameter `i`, read from the devices (one copy on a backend
    /// that does not replicate).
    pub fn param_per_replica(&self, i: usize) -> Result<Vec<Tensor>> {
        self.backend
            .download_replicas(&self.args[self.layout.params.start + i])
    }

    /// Zeroes the loss tracker and every metric's state.
    pub fn reset_metrics(&mut self) -> Result<()> {
        for i in self.layout.metric_state.clone() {
            let z = Tensor::zeros(&self.layout.types[i])?;
            self.backend.upload_into(&z, &mut self.args[i])?;
        }
        Ok(())
    }

    /// Whether the step for `key` is compiled.
    pub fn has(&self, key: &StepKey) -> bool {
        self.exes.contains_key(key)
    }

    /// Compiles `g` as the step for `key`.
    pub fn compile(&mut self, key: StepKey, g: &Graph, opts: &CompileOptions) -> Result<()> {
        let exe = self.backend.compile(g, opts)?;
        self.exes.insert(key, exe);
        Ok(())
    }

    /// The index of the compiled train step for `k` global batches of `batch` rows split
    /// by `dist`, taking `x` and `y` (`k` batches stacked) of these types, the last one run
    /// tried first. Keys are compared in place (building one allocates), so a steady loop,
    /// the partial batch's call included, finds its step without allocating.
    pub fn find_train(
        &self,
        batch: usize,
        k: usize,
        dist: Option<Dist>,
        x: &Tensor,
        y: &Tensor,
    ) -> Option<usize> {
        let rows = k * dist.map_or(batch, |d| d.local);
        let same = |t: &TensorType, v: &Tensor| {
            t.dtype == v.dtype() && t.dims()[0] == rows && t.dims()[1..] == v.dims()[1..]
        };
        let fits = |key: &StepKey| {
            matches!(key, StepKey::Train { batch: b, k: kk, x: xt, y: yt, dist: dd }
                if *b == batch && *kk == k && *dd == dist && same(xt, x) && same(yt, y))
        };
        self.last_train
            .filter(|&i| self.train_keys.get(i).is_some_and(fits))
            .or_else(|| self.train_keys.iter().position(fits))
    }

    /// Remembers `key` (compiled) as a train step; returns its index for `launch_train`.
    pub fn add_train(&mut self, key: StepKey) -> usize {
        self.train_keys.push(key);
        self.train_keys.len() - 1
    }

    /// Starts a chain of train calls, the first one's status healthy; returns the
    /// iteration count it starts from.
    pub fn start_chain(&mut self) -> Result<u64> {
        self.chained = false;
        self.unread = false;
        if self.status_seed.is_none() {
            // Never written: the step only reads it.
            let mut healthy = vec![0.0f32; STATUS_LEN];
            healthy[0] = 1.0;
            self.status_seed = Some(
                self.backend
                    .upload(&Tensor::from_vec(&[STATUS_LEN], healthy)?)?,
            );
        }
        Ok(self.iterations)
    }

    /// Launches train step `index` over `inputs` (see [`TRAIN_INPUTS`]; `k` global batches
    /// stacked), chained to the previous call's status; `read_pending_logs` reads its logs.
    /// The tensors are refilled before the next call: the backend may take their memory
    /// instead of copying it.
    pub fn launch_train(
        &mut self,
        index: usize,
        inputs: &mut [&mut Tensor; 4],
        k: usize,
        dist: Option<Dist>,
    ) -> Result<()> {
        let base = self.layout.len();
        bind_inputs(
            self.backend.as_ref(),
            &mut self.args,
            base,
            inputs,
            TRAIN_INPUTS,
            (k, dist),
            &mut self.spare_inputs,
        )?;
        self.last_train = Some(index);
        let exe = self
            .train_keys
            .get(index)
            .and_then(|key| self.exes.get_mut(key))
            .ok_or_else(|| Error::invalid("fit", "internal: step not compiled"))?;
        // This call's status is the previous call's (the last of its outputs), or the seed.
        let chained = self.chained;
        let status = if chained {
            self.outs_prev.pop()
        } else {
            self.status_seed.take()
        };
        self.args
            .push(status.ok_or_else(|| Error::invalid("fit", "internal: no status input"))?);
        let ran = exe.execute_into(&mut self.args, &mut self.outs);
        if let Some(status) = self.args.pop() {
            if chained {
                self.outs_prev.push(status);
            } else {
                self.status_seed = Some(status);
            }
        }
        ran?;
        // Optimistic: a bad step shows when logs are read, and is corrected there.
        self.iterations += k as u64;
        // This call's outputs wait in `outs_prev` (the next call's status, the logs the
        // host may read); the previous call's buffers take the next call's outputs.
        std::mem::swap(&mut self.outs, &mut self.outs_prev);
        self.chained = true;
        self.unread = true;
        Ok(())
    }

    /// Reads the last train call's logs into `logs` if the host has not yet (waiting for
    /// the call). After a bad step the host's iteration count follows the device: the
    /// steps before it did run, and the calls after it changed nothing.
    pub fn read_pending_logs(
        &mut self,
        metric_names: &[String],
        logs: &mut Logs,
    ) -> Result<Option<StepOut>> {
        if !self.unread {
            return Ok(None);
        }
        self.unread = false;
        let out = read_logs(
            self.backend.as_ref(),
            metric_names,
            &self.layout.result_shapes,
            &mut self.log_values,
            &self.outs_prev,
            logs,
        )?;
        if !out.ok {
            self.iterations =
                self.backend
                    .read_scalar(&self.args[self.layout.iterations])? as u64;
        }
        Ok(Some(out))
    }

    /// Runs the compiled step `key` once over `inputs` (bound as `binds` says, one global
    /// batch split by `dist`) and returns its outputs.
    pub fn run(
        &mut self,
        key: &StepKey,
        inputs: &mut [&mut Tensor],
        binds: &[Bind],
        calls: (usize, Option<Dist>),
    ) -> Result<Vec<Buffer>> {
        let base = self.layout.len();
        bind_inputs(
            self.backend.as_ref(),
            &mut self.args,
            base,
            inputs,
            binds,
            calls,
            &mut self.spare_inputs,
        )?;
        let exe = self.exes.get_mut(key).ok_or_else(|| {
            Error::invalid(
                "training",
                "internal: a step ran before its graph was compiled",
            )
        })?;
        exe.execute(&mut self.args)
    }
}

/// Reads a train call's logs vector (loss, each metric, the status) from its outputs
/// into `logs`, through the host buffer kept for it.
fn read_logs(
    backend: &dyn Backend,
    metric_names: &[String],
    result_shapes: &[Vec<usize>],
    vals: &mut Vec<f32>,
    outs: &[Buffer],
    logs: &mut Logs,
) -> Result<StepOut> {
    // The call's outputs end with the logs vector, then the status.
    let packed = outs
        .len()
        .checked_sub(2)
        .and_then(|i| outs.get(i))
        .ok_or_else(|| Error::invalid("fit", "internal: the step returned no logs"))?;
    let n = logs_len(result_shapes);
    vals.resize(n, 0.0);
    backend.read_f32_into(packed, vals)?;
    logs.set("loss", vals[0] as f64);
    let status = n - STATUS_LEN;
    let mut at = 1;
    for (name, shape) in metric_names.iter().zip(result_shapes) {
        if shape.is_empty() {
            logs.set(name, vals[at] as f64);
            at += 1;
        } else {
            let len: usize = shape.iter().product();
            logs.set_vector(name, vals[at..at + len].iter().map(|&v| v as f64));
            at += len;
        }
    }
    Ok(StepOut {
        ok: vals[status] != 0.0,
        cause: cause_of(vals[status + 1]),
        value: vals[status + 2] as f64,
    })
}

/// Puts a call's `inputs` after the state in `args` (`args[base..]`), each as `binds`
/// says. `(k, dist)`: the tensors stack `k` global batches, split over replicas by `dist`
/// (`None` on one device, where every input is whole). The backend may take the tensors'
/// memory (they keep their shapes, not their values): natively a batch is not copied.
pub(crate) fn bind_inputs(
    backend: &dyn Backend,
    args: &mut Vec<Buffer>,
    base: usize,
    inputs: &mut [&mut Tensor],
    binds: &[Bind],
    (k, dist): (usize, Option<Dist>),
    spare: &mut Spares<Vec<Buffer>>,
) -> Result<()> {
    let Some(d) = dist else {
        let whole = &WHOLE[..inputs.len().min(WHOLE.len())];
        make_room(backend, args, base, inputs, whole, spare);
        return backend.bind_inputs(args, base, inputs, whole);
    };
    let rows = distribute::shard_rows(k, d);
    let weights = inputs
        .iter()
        .zip(binds)
        .filter(|(_, b)| **b == Bind::Weights)
        .map(|(t, _)| distribute::shard_weights(&t.to_vec::<f32>()?, k, d))
        .collect::<Result<Vec<_>>>()?;
    let mut parts = weights.iter();
    let placements = binds
        .iter()
        .map(|b| match b {
            Bind::Rows => Placement::Rows(&rows),
            Bind::Weights => parts
                .next()
                .map_or(Placement::Whole, |w| Placement::Parts(w)),
            Bind::Whole => Placement::Whole,
        })
        .collect::<Vec<_>>();
    make_room(backend, args, base, inputs, &placements, spare);
    backend.bind_inputs(args, base, inputs, &placements)
}

/// Every input of a call on one device: whole (as many as a call has).
const WHOLE: [Placement<'static>; 4] = [Placement::Whole; 4];

/// Makes `args[base..]` a set of buffers that fit `inputs` placed as `placements` when
/// one is at hand: the set there, or one kept in `spare` (keeping the set it replaces),
/// or none (the backend then makes them). Alternating shapes (the partial last batch)
/// so reuse both sets.
fn make_room(
    backend: &dyn Backend,
    args: &mut Vec<Buffer>,
    base: usize,
    inputs: &[&mut Tensor],
    placements: &[Placement<'_>],
    spare: &mut Spares<Vec<Buffer>>,
) {
    let fits = |set: &[Buffer]| {
        set.len() == inputs.len()
            && set
                .iter()
                .zip(inputs)
                .zip(placements)
                .all(|((b, t), p)| backend.input_fits(b, t, p))
    };
    if fits(&args[base.min(args.len())..]) {
        return;
    }
    let mut set = spare.take(|s| fits(s)).unwrap_or_default();
    if !set.is_empty() && args.len() == base + set.len() {
        for (a, s) in args[base..].iter_mut().zip(&mut set) {
            std::mem::swap(a, s);
        }
    } else {
        let old: Vec<Buffer> = args.drain(base.min(args.len())..).collect();
        args.append(&mut set);
        set = old;
    }
    if !set.is_empty() {
        spare.keep(set);
    }
}
