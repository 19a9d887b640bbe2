//! `fit`: the training loop.

use super::callbacks::{Flags, ModelAccess};
use super::compile::not_compiled;
use super::progress::Progress;
use super::spares::Spares;
use super::step::{train_graph, StepKey};
use super::{Fit, History, Logs};
use crate::backend::Buffer;
use crate::data::{check_pair, copy_rows_into, gather_rows, Batch, Dataset, IntoTensor};
use crate::ir::{DType, TensorType};
use crate::nn::Architecture;
use crate::Model;
use crate::{Error, Result, Tensor};
use std::time::Instant;

/// What one train call reports besides the logs.
pub(crate) struct StepOut {
    pub ok: bool,
    pub batch_loss: f64,
}

/// Every row of `t` from `range`, as a new tensor.
pub(crate) fn take_rows(t: &Tensor, range: std::ops::Range<usize>) -> Result<Tensor> {
    let idx: Vec<usize> = range.collect();
    let mut dims = t.dims().to_vec();
    dims[0] = idx.len();
    let mut out = Tensor::zeros(&TensorType::new(t.dtype(), dims));
    gather_rows(t, &idx, &mut out)?;
    Ok(out)
}

impl<A: Architecture> Model<A> {
    /// Checks inputs against the model (building it from their shape if needed).
    pub(crate) fn check_inputs(&mut self, what: &str, x: &Tensor) -> Result<()> {
        let sample: Vec<usize> = x.dims().get(1..).unwrap_or(&[]).to_vec();
        if !self.is_built() {
            self.build(&sample)?;
        }
        let want = self.input_shape().unwrap_or(&[]).to_vec();
        if sample != want {
            return Err(Error::invalid(
                what,
                format!(
                    "the model takes inputs of shape [batch, {}], got {}",
                    want.iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    x.shape()
                ),
            ));
        }
        if x.dtype() != self.input_dtype() {
            return Err(Error::DType {
                what: format!("{what} inputs"),
                expected: self.input_dtype(),
                got: x.dtype(),
            });
        }
        Ok(())
    }

    /// Checks targets against the loss and the model's predictions.
    pub(crate) fn check_targets(&self, what: &str, y: &Tensor, n: usize) -> Result<()> {
        let t = self.train.as_ref().ok_or_else(not_compiled)?;
        let mut pred = vec![n];
        pred.extend_from_slice(self.output_shape().unwrap_or(&[]));
        let want = t.loss.target_dtype();
        if y.dtype() != want && !(want == DType::I32 && y.dtype() == DType::I64) {
            return Err(Error::DType {
                what: format!("{what} targets for {}", t.loss.name()),
                expected: want,
                got: y.dtype(),
            });
        }
        t.loss
            .check(&y.ty(), &TensorType::new(DType::F32, pred.clone()))?;
        t.loss.check_values(y, &pred)
    }

    /// Trains the model on `x` and `y` (Keras' `fit`).
    pub fn fit(
        &mut self,
        x: impl IntoTensor,
        y: impl IntoTensor,
        mut opts: Fit,
    ) -> Result<History> {
        let (x, y) = (x.into_tensor(), y.into_tensor());
        if self.train.is_none() {
            return Err(not_compiled());
        }
        if opts.batch_size == 0 {
            return Err(Error::invalid("fit", "batch_size must be >= 1, got 0"));
        }
        if !(0.0..1.0).contains(&opts.validation_split) {
            return Err(Error::invalid(
                "fit",
                format!(
                    "validation_split must be in [0, 1), got {}",
                    opts.validation_split
                ),
            ));
        }
        let n = check_pair("fit", &x, &y)?;
        self.check_inputs("fit", &x)?;
        self.check_targets("fit", &y, n)?;
        let mut sw = match opts.sample_weight.take() {
            Some(w) if w.len() != n => {
                return Err(Error::invalid(
                    "fit",
                    format!("sample_weight has {} entries for {n} samples", w.len()),
                ))
            }
            Some(w) => w,
            None => vec![1.0; n],
        };
        if let Some(cw) = &opts.class_weight {
            apply_class_weight(cw, &y, &mut sw)?;
        }
        if let Some(bad) = sw.iter().find(|w| !w.is_finite() || **w < 0.0) {
            return Err(Error::invalid(
                "fit",
                format!("sample weights must be finite and >= 0, got {bad}"),
            ));
        }

        // Keras' validation_split: the last fraction, before any shuffling.
        let (x, y, sw, val) = if opts.validation_split > 0.0 {
            let split = ((n as f64) * (1.0 - opts.validation_split)).floor() as usize;
            if split == 0 || split == n {
                return Err(Error::invalid(
                    "fit",
                    format!("validation_split {} of {n} samples leaves an empty training or validation set", opts.validation_split),
                ));
            }
            let val = (take_rows(&x, split..n)?, take_rows(&y, split..n)?);
            (
                take_rows(&x, 0..split)?,
                take_rows(&y, 0..split)?,
                sw[..split].to_vec(),
                Some(val),
            )
        } else {
            (x, y, sw, opts.validation_data.take())
        };
        if let Some((vx, vy)) = &val {
            let vn = check_pair("fit validation_data", vx, vy)?;
            self.check_inputs("fit validation_data", vx)?;
            self.check_targets("fit validation_data", vy, vn)?;
        }
        self.check_replica_split("fit", x.dims()[0], opts.batch_size, opts.pad_to_replicas)?;
        let mut ds = Dataset::from_arrays(x, y)?
            .with_sample_weight(sw)?
            .batch(opts.batch_size)?;
        if opts.shuffle {
            ds = ds.shuffle(opts.seed);
        }
        opts.class_weight = None; // already folded into the sample weights
        self.run_fit(&ds, val, opts, true)
    }

    /// Trains the model on a [`Dataset`] (its batching, shuffling, maps and prefetching
    /// apply; `Fit::batch_size`, `shuffle` and `seed` do not). Per-sample weights come from
    /// the dataset; `class_weight` and `validation_data` work as with arrays.
    pub fn fit_dataset(&mut self, ds: &Dataset, mut opts: Fit) -> Result<History> {
        if self.train.is_none() {
            return Err(not_compiled());
        }
        if opts.sample_weight.is_some() || opts.validation_split > 0.0 {
            return Err(Error::invalid(
                "fit_dataset",
                "sample_weight and validation_split apply to arrays; give the dataset its weights \
                 (Dataset::with_sample_weight) and pass validation_data",
            ));
        }
        let val = opts.validation_data.take();
        if let Some((vx, vy)) = &val {
            let vn = check_pair("fit validation_data", vx, vy)?;
            self.check_inputs("fit validation_data", vx)?;
            self.check_targets("fit validation_data", vy, vn)?;
        }
        self.run_fit(ds, val, opts, false)
    }

    /// The epoch loop. `checked` says the dataset's arrays were validated already;
    /// otherwise every batch is (a map may change anything).
    fn run_fit(
        &mut self,
        ds: &Dataset,
        val: Option<(Tensor, Tensor)>,
        mut opts: Fit,
        checked: bool,
    ) -> Result<History> {
        let k = self
            .train
            .as_ref()
            .map(|t| t.steps_per_execution)
            .unwrap_or(1);
        let steps = ds.num_batches();
        let mut history = History::default();
        let mut callbacks = std::mem::take(&mut opts.callbacks);
        let mut control = Flags::default();
        let every_call = callbacks.iter().any(|c| !c.async_safe());
        for cb in &mut callbacks {
            cb.on_train_begin(&mut control.with(self))?;
        }
        let mut stage = Staging::default();
        // Batch buffers, reused from step to step (and epoch to epoch); those of another
        // size (the partial last batch's, or the full ones' while it runs) wait in `spare`.
        let mut pool: Vec<Batch> = Vec::new();
        let mut spare: Spares<Batch> = Spares::default();
        let mut logs = Logs::default();
        'epochs: for epoch in opts.initial_epoch..opts.epochs {
            if control.stop {
                break;
            }
            for cb in &mut callbacks {
                cb.on_epoch_begin(epoch, &mut control.with(self))?;
            }
            if opts.verbose == 1 {
                println!("Epoch {}/{}", epoch + 1, opts.epochs);
            }
            let mut progress = Progress::new(opts.verbose, steps);
            let started = Instant::now();
            let mut done = 0;
            let mut batches = ds.iter(epoch);
            let mut first = true;
            let mut epoch_start = 0u64;
            let mut last_read = Instant::now();
            // The last call whose batch end the callbacks have not heard of.
            let mut unreported: Option<usize> = None;
            // `pool[..count]` are batches waiting to run as one call of up to k steps.
            let mut count = 0;
            loop {
                if pool.len() <= count {
                    pool.push(Batch::default());
                }
                if let Some(n) = batches.next_rows() {
                    spare.fit(
                        &mut pool[count],
                        // An empty (new) buffer is filled in place, not kept.
                        |b| b.x.dims().first().is_some_and(|&r| r == n || r == 0),
                        Batch::default,
                    );
                }
                let more = match batches.next_into(&mut pool[count]) {
                    Some(r) => {
                        r?;
                        true
                    }
                    None => false,
                };
                if more {
                    let b = &mut pool[count];
                    if !checked {
                        let n = check_pair("fit_dataset batch", &b.x, &b.y)?;
                        self.check_inputs("fit_dataset batch", &b.x)?;
                        self.check_targets("fit_dataset batch", &b.y, n)?;
                        if let Some(cw) = &opts.class_weight {
                            let mut w = match &b.sample_weight {
                                Some(t) => t.to_vec::<f32>()?,
                                None => vec![1.0; n],
                            };
                            apply_class_weight(cw, &b.y, &mut w)?;
                            b.sample_weight = Some(Tensor::from_vec(&[n], w)?);
                        }
                    }
                    if first {
                        self.ensure_device()?;
                        self.reset_metrics()?;
                        epoch_start = self.start_chain()?;
                        first = false;
                    }
                }
                // Run what is pending when k equal batches are there, when a batch of
                // another size (the partial last one) arrives, or at the end of the epoch.
                let differs = more && count > 0 && pool[count].x.dims()[0] != pool[0].x.dims()[0];
                let run = if differs {
                    count
                } else if more {
                    count + 1
                } else {
                    count
                };
                let ready = run > 0 && (run == k || differs || !more);
                if !more || !differs {
                    count += more as usize;
                }
                // Callbacks that are not async-safe hear of each call at once, with its
                // logs (read below); async-safe ones once the next call is launched, or at
                // the end of the epoch, with the logs as last read.
                if ready {
                    if !every_call {
                        let due = unreported.take();
                        batch_end(&mut callbacks, due, &logs, &mut control, self)?;
                    }
                    self.train_call(&mut pool[..run], &mut stage, opts.pad_to_replicas)?;
                    done += run;
                    unreported = Some(done - 1);
                    if differs {
                        pool.swap(0, run);
                        count = 1;
                    } else {
                        count = 0;
                    }
                }
                let end = !more && count == 0;
                // Reading a call's logs makes the host wait for the device (and on XLA
                // costs a transfer), and the device chain stops on a bad step by itself,
                // so logs are read for the progress bar now and then and at the end of
                // the epoch; after every call for callbacks that are not async-safe (they
                // may look at the model between calls, as in Keras), which then hear of
                // the call at once.
                let read_now = end || (ready && (every_call || last_read.elapsed() >= READ_EVERY));
                if let Some(out) = read_now
                    .then(|| self.read_pending_logs(&mut logs))
                    .transpose()?
                    .flatten()
                {
                    last_read = Instant::now();
                    if !out.ok {
                        progress.abandon();
                        self.sync_weights()?;
                        // The chain stopped at the first bad step: the good ones counted.
                        let step = (self.host_iterations()? - epoch_start) as usize;
                        if control.terminate_on_nan {
                            println!("Batch {step}: Invalid loss, terminating training");
                            break 'epochs;
                        }
                        return Err(Error::NonFiniteLoss {
                            epoch,
                            step,
                            value: out.batch_loss,
                        });
                    }
                    progress.update(done, &logs, started.elapsed());
                }
                if every_call || end {
                    batch_end(&mut callbacks, unreported.take(), &logs, &mut control, self)?;
                }
                if end {
                    break;
                }
            }
            if first {
                return Err(Error::invalid("fit", "the dataset produced no batches"));
            }
            let mut epoch_logs = logs.clone();
            if let Some((vx, vy)) = &val {
                let vl = self.evaluate_logs(vx, vy, opts.batch_size)?;
                for (key, v) in vl.0 {
                    epoch_logs.insert(format!("val_{key}"), v);
                }
            }
            progress.finish(steps, &epoch_logs, started.elapsed());
            history.push(epoch, &epoch_logs);
            for cb in &mut callbacks {
                cb.on_epoch_end(epoch, &epoch_logs, &mut control.with(self))?;
            }
        }
        let last = Logs(
            history
                .history
                .iter()
                .map(|(k, v)| (k.clone(), v.last().copied().unwrap_or(f64::NAN)))
                .collect(),
        );
        for cb in &mut callbacks {
            cb.on_train_end(&last, &mut control.with(self))?;
        }
        self.sync_weights()?;
        Ok(history)
    }

    /// Zeroes the loss tracker and every metric's state.
    pub(crate) fn reset_metrics(&mut self) -> Result<()> {
        let backend = self.backend.clone();
        let t = self.train.as_mut().ok_or_else(not_compiled)?;
        let d = t.device.as_mut().ok_or_else(not_compiled)?;
        for i in d.layout.metric_state.clone() {
            let z = Tensor::zeros(&d.layout.types[i]);
            backend.upload_into(&z, &mut d.args[i])?;
        }
        Ok(())
    }

    /// Launches one train call over `batches` (equal-sized; one step each), chained to
    /// the previous call's status; `read_pending_logs` reads its logs. Under a
    /// data-parallel strategy each batch is the global one, split over the replicas
    /// (padded when `pad`).
    fn train_call(&mut self, batches: &mut [Batch], stage: &mut Staging, pad: bool) -> Result<()> {
        let k = batches.len();
        let batch = batches[0].x.dims()[0];
        stage.fill(batches)?;
        {
            let t = self.train.as_ref().ok_or_else(not_compiled)?;
            let d = t.device.as_ref().ok_or_else(not_compiled)?;
            stage.set_lr(k, |i| {
                t.optimizer
                    .config()
                    .learning_rate
                    .at(d.iterations + i as u64)
            });
        }
        let (x, y) = match batches {
            [one] => (&mut one.x, &mut one.y),
            _ => (&mut stage.x, &mut stage.y),
        };
        // The step graph sees one replica's rows of each batch (all of them on one device).
        let dist = self.dist("fit", batch, pad)?;
        let rows = dist.map_or(batch, |d| d.local);
        // Keys are compared in place (building one allocates), so a steady loop, the
        // partial batch's call included, finds its executable without allocating.
        let same = |t: &TensorType, v: &Tensor| {
            t.dtype == v.dtype() && t.dims()[0] == k * rows && t.dims()[1..] == v.dims()[1..]
        };
        let fits = |key: &StepKey| matches!(key, StepKey::Train { batch: b, k: kk, x: xt, y: yt, dist: dd } if *b == batch && *kk == k && *dd == dist && same(xt, x) && same(yt, y));
        let found = self
            .train
            .as_ref()
            .and_then(|t| t.device.as_ref())
            .and_then(|d| {
                d.last_train
                    .filter(|&i| d.train_keys.get(i).is_some_and(fits))
                    .or_else(|| d.train_keys.iter().position(fits))
            });
        let index = match found {
            Some(i) => i,
            None => {
                let (x_ty, y_ty) = (with_rows(&x.ty(), k * rows), with_rows(&y.ty(), k * rows));
                let key = StepKey::Train {
                    batch,
                    k,
                    x: x_ty.clone(),
                    y: y_ty.clone(),
                    dist,
                };
                self.prepare(&key, |m, t, layout| {
                    train_graph(m, t, layout, rows, k, dist, &x_ty, &y_ty)
                })?;
                let d = self
                    .train
                    .as_mut()
                    .and_then(|t| t.device.as_mut())
                    .ok_or_else(not_compiled)?;
                d.train_keys.push(key);
                d.train_keys.len() - 1
            }
        };
        let backend = self.backend.clone();
        let t = self.train.as_mut().ok_or_else(not_compiled)?;
        let d = t.device.as_mut().ok_or_else(not_compiled)?;
        let base = d.layout.len();
        match (dist, backend.as_mirrored()) {
            (Some(dist), Some(m)) => super::distribute::set_batch_inputs(
                m,
                &mut d.args,
                base,
                (x, y, &stage.sw, &stage.lr),
                k,
                dist,
            )?,
            // The batch tensors are refilled before the next call: the backend may take
            // their memory instead of copying it.
            _ => set_inputs_taking(
                backend.as_ref(),
                &mut d.args,
                base,
                &mut [x, y, &mut stage.sw, &mut stage.lr],
                &mut d.spare_inputs,
            )?,
        }
        d.last_train = Some(index);
        let exe = d
            .train_keys
            .get(index)
            .and_then(|key| d.exes.get_mut(key))
            .ok_or_else(|| Error::invalid("fit", "internal: step not compiled"))?;
        // This call's status is the previous call's (the last of its outputs), or the seed.
        let chained = d.chained;
        let status = if chained {
            d.outs_prev.pop()
        } else {
            d.status_seed.take()
        };
        d.args
            .push(status.ok_or_else(|| Error::invalid("fit", "internal: no status input"))?);
        let ran = exe.execute_into(&mut d.args, &mut d.outs);
        if let Some(status) = d.args.pop() {
            if chained {
                d.outs_prev.push(status);
            } else {
                d.status_seed = Some(status);
            }
        }
        ran?;
        // Optimistic: a bad step shows when logs are read, and is corrected there.
        d.iterations += k as u64;
        // This call's outputs wait in `outs_prev` (the next call's status, the logs the
        // host may read); the previous call's buffers take the next call's outputs.
        std::mem::swap(&mut d.outs, &mut d.outs_prev);
        d.chained = true;
        d.unread = true;
        Ok(())
    }

    /// Reads the last train call's logs if the host has not yet (waiting for the call).
    fn read_pending_logs(&mut self, logs: &mut Logs) -> Result<Option<StepOut>> {
        let backend = self.backend.clone();
        let t = self.train.as_mut().ok_or_else(not_compiled)?;
        let Some(d) = t.device.as_mut().filter(|d| d.unread) else {
            return Ok(None);
        };
        d.unread = false;
        let out = read_logs(
            backend.as_ref(),
            &t.metric_names,
            &mut d.log_values,
            &d.outs_prev,
            logs,
        )?;
        if !out.ok {
            self.resync_iterations()?;
        }
        Ok(Some(out))
    }

    /// The host's mirror of the optimizer's iteration count.
    fn host_iterations(&self) -> Result<u64> {
        let t = self.train.as_ref().ok_or_else(not_compiled)?;
        Ok(t.device.as_ref().ok_or_else(not_compiled)?.iterations)
    }

    /// After a bad step: the steps before it did run, and the calls after it changed
    /// nothing; the host mirror of the iteration count follows the device.
    fn resync_iterations(&mut self) -> Result<()> {
        let backend = self.backend.clone();
        let t = self.train.as_mut().ok_or_else(not_compiled)?;
        let d = t.device.as_mut().ok_or_else(not_compiled)?;
        d.iterations = backend.read_scalar(&d.args[d.layout.iterations])? as u64;
        Ok(())
    }

    /// Starts a chain of train calls, the first one's status healthy; returns the
    /// iteration count it starts from.
    fn start_chain(&mut self) -> Result<u64> {
        let backend = self.backend.clone();
        let t = self.train.as_mut().ok_or_else(not_compiled)?;
        let d = t.device.as_mut().ok_or_else(not_compiled)?;
        d.chained = false;
        d.unread = false;
        if d.status_seed.is_none() {
            // Never written: the step only reads it.
            d.status_seed = Some(backend.upload(&Tensor::from_vec(&[2], vec![1.0f32, 0.0])?)?);
        }
        Ok(d.iterations)
    }

    /// Compiles the graph for `key` unless it is cached; `build` gets the model, what
    /// `compile` set up and the state's layout.
    pub(crate) fn prepare(
        &mut self,
        key: &StepKey,
        build: impl FnOnce(
            &Self,
            &super::compile::TrainState,
            &super::compile::Layout,
        ) -> Result<(crate::ir::Graph, crate::backend::CompileOptions)>,
    ) -> Result<()> {
        let t = self.train.as_ref().ok_or_else(not_compiled)?;
        let d = t.device.as_ref().ok_or_else(not_compiled)?;
        if d.exes.contains_key(key) {
            return Ok(());
        }
        let (g, opts) = build(self, t, &d.layout)?;
        let exe = self.backend.compile(&g, &opts)?;
        let d = self
            .train
            .as_mut()
            .and_then(|t| t.device.as_mut())
            .ok_or_else(not_compiled)?;
        d.exes.insert(key.clone(), exe);
        Ok(())
    }
}

/// Tells every callback that call `step` (if any) has ended.
fn batch_end(
    callbacks: &mut [Box<dyn super::Callback>],
    step: Option<usize>,
    logs: &Logs,
    control: &mut Flags,
    model: &mut dyn ModelAccess,
) -> Result<()> {
    if let Some(step) = step {
        for cb in callbacks.iter_mut() {
            cb.on_batch_end(step, logs, &mut control.with(model))?;
        }
    }
    Ok(())
}

/// How often `fit` reads the logs when nothing needs every call's (the progress bar's
/// refresh, about Keras' own).
const READ_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// Reads a train call's logs vector (loss, each metric, the finite flag, the last batch's
/// loss) from its outputs into `logs`, through the host buffer kept for it.
fn read_logs(
    backend: &dyn crate::backend::Backend,
    metric_names: &[String],
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
    let n = super::step::logs_len(metric_names.len());
    vals.resize(n, 0.0);
    backend.read_f32_into(packed, vals)?;
    logs.set("loss", vals[0] as f64);
    for (name, v) in metric_names.iter().zip(&vals[1..n - 2]) {
        logs.set(name, *v as f64);
    }
    Ok(StepOut {
        ok: vals[n - 2] != 0.0,
        batch_loss: vals[n - 1] as f64,
    })
}

/// The type of `t` with `n` rows.
pub(crate) fn with_rows(t: &TensorType, n: usize) -> TensorType {
    let mut dims = t.dims().to_vec();
    dims[0] = n;
    TensorType::new(t.dtype, dims)
}

/// Puts `inputs` after the state in `args`, reusing the buffers already there when the
/// types match (no allocation in steady state on the native backend). Buffers of other
/// types are swapped with a set from `spare` that fits, or made, and the ones they
/// replace are kept there: alternating shapes (the partial last batch) reuse both sets.
pub(crate) fn set_inputs(
    backend: &dyn crate::backend::Backend,
    args: &mut Vec<Buffer>,
    base: usize,
    inputs: &[&Tensor],
    spare: &mut Spares<Vec<Buffer>>,
) -> Result<()> {
    make_room(backend, args, base, inputs.len(), |i| inputs[i], spare)?;
    for (b, t) in args[base..].iter_mut().zip(inputs) {
        backend.upload_into(t, b)?;
    }
    Ok(())
}

/// As [`set_inputs`], letting the backend take the tensors' memory (they keep their
/// shapes, not their values): the native backend then copies no batch.
fn set_inputs_taking(
    backend: &dyn crate::backend::Backend,
    args: &mut Vec<Buffer>,
    base: usize,
    inputs: &mut [&mut Tensor],
    spare: &mut Spares<Vec<Buffer>>,
) -> Result<()> {
    make_room(backend, args, base, inputs.len(), |i| &*inputs[i], spare)?;
    for (b, t) in args[base..].iter_mut().zip(inputs.iter_mut()) {
        backend.upload_taking(t, b)?;
    }
    Ok(())
}

/// Makes `args[base..]` a set of `n` buffers of `input(i)`'s types (see `set_inputs`).
fn make_room<'t>(
    backend: &dyn crate::backend::Backend,
    args: &mut Vec<Buffer>,
    base: usize,
    n: usize,
    input: impl Fn(usize) -> &'t Tensor,
    spare: &mut Spares<Vec<Buffer>>,
) -> Result<()> {
    let fits = |set: &[Buffer]| {
        set.len() == n
            && set.iter().enumerate().all(|(i, b)| {
                let t = input(i);
                b.ty().dtype == t.dtype() && b.ty().dims() == t.dims()
            })
    };
    if !fits(&args[base.min(args.len())..]) {
        let mut set = match spare.take(|s| fits(s)) {
            Some(s) => s,
            None => (0..n)
                .map(|i| backend.upload(input(i)))
                .collect::<Result<Vec<_>>>()?,
        };
        if args.len() == base + set.len() {
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
    Ok(())
}

/// Host-side inputs of one call beyond the batch itself (`k` batches stacked when a call
/// runs several steps), kept from step to step so their memory is reused; those of
/// another size (the partial last call's) wait in `spare`.
#[derive(Default)]
struct Staging {
    x: Tensor,
    y: Tensor,
    sw: Tensor,
    lr: Tensor,
    spare: Spares<Tensor>,
}

impl Staging {
    fn fill(&mut self, batches: &[Batch]) -> Result<()> {
        let rows: usize = batches.iter().map(|b| b.x.dims()[0]).sum();
        refit(&mut self.sw, rows, &mut self.spare);
        let Tensor::F32(sw) = &mut self.sw else {
            unreachable!("refit makes f32")
        };
        let mut at = 0;
        for b in batches {
            let n = b.x.dims()[0];
            let dst = &mut sw.as_slice_mut().unwrap_or(&mut [])[at..at + n];
            match &b.sample_weight {
                Some(t) => dst.copy_from_slice(t.array::<f32>()?.as_slice().unwrap_or(&[])),
                None => dst.fill(1.0),
            }
            at += n;
        }
        if batches.len() > 1 {
            stack_into(batches.iter().map(|b| &b.x), &mut self.x, &mut self.spare)?;
            stack_into(batches.iter().map(|b| &b.y), &mut self.y, &mut self.spare)?;
        }
        Ok(())
    }

    fn set_lr(&mut self, k: usize, lr: impl Fn(usize) -> f32) {
        refit(&mut self.lr, k, &mut self.spare);
        if let Tensor::F32(a) = &mut self.lr {
            for (i, v) in a.iter_mut().enumerate() {
                *v = lr(i);
            }
        }
    }
}

/// Makes `t` an f32 vector of `n` elements: itself when it already is one, else a kept one.
fn refit(t: &mut Tensor, n: usize, spare: &mut Spares<Tensor>) {
    spare.fit(
        t,
        |t| matches!(t, Tensor::F32(a) if a.ndim() == 1 && a.len() == n),
        || Tensor::F32(ndarray::ArrayD::zeros(ndarray::IxDyn(&[n]))),
    );
}

/// Concatenates tensors along the first axis into `out` (reusing it, or a kept tensor,
/// when it fits).
fn stack_into<'a>(
    parts: impl Iterator<Item = &'a Tensor> + Clone,
    out: &mut Tensor,
    spare: &mut Spares<Tensor>,
) -> Result<()> {
    let first = parts
        .clone()
        .next()
        .ok_or_else(|| Error::invalid("fit", "no batches"))?;
    let rows: usize = parts.clone().map(|t| t.dims()[0]).sum();
    // Compared in place: building the type allocates.
    spare.fit(
        out,
        |o| {
            o.dtype() == first.dtype()
                && o.dims().first() == Some(&rows)
                && o.dims().get(1..) == first.dims().get(1..)
        },
        || Tensor::zeros(&with_rows(&first.ty(), rows)),
    );
    let mut at = 0;
    for p in parts {
        copy_rows_into(p, out, at)?;
        at += p.dims()[0];
    }
    Ok(())
}

/// Multiplies each sample's weight by its class's weight (integer labels, or the argmax
/// of one-hot targets). Classes missing from the map weigh 1, as in Keras.
fn apply_class_weight(
    cw: &std::collections::HashMap<i64, f32>,
    y: &Tensor,
    sw: &mut [f32],
) -> Result<()> {
    let labels: Vec<i64> = match y {
        Tensor::I32(a) => a.iter().map(|&v| v as i64).collect(),
        Tensor::I64(a) => a.iter().copied().collect(),
        Tensor::F32(a) if a.ndim() == 2 => a
            .outer_iter()
            .map(|row| {
                row.iter()
                    .enumerate()
                    .fold((0usize, f32::NEG_INFINITY), |(bi, bv), (i, &v)| {
                        if v > bv {
                            (i, v)
                        } else {
                            (bi, bv)
                        }
                    })
                    .0 as i64
            })
            .collect(),
        t => {
            return Err(Error::invalid(
                "fit class_weight",
                format!("needs integer labels or one-hot targets, got {}", t.ty()),
            ))
        }
    };
    if labels.len() != sw.len() {
        return Err(Error::invalid(
            "fit class_weight",
            "integer labels must have one entry per sample",
        ));
    }
    for (w, l) in sw.iter_mut().zip(labels) {
        *w *= cw.get(&l).copied().unwrap_or(1.0);
    }
    Ok(())
}

impl<A: Architecture> ModelAccess for Model<A> {
    fn weights(&mut self) -> Result<Vec<(String, Tensor)>> {
        self.sync_weights()?;
        Ok(Model::weights(self))
    }
    fn set_weights(&mut self, w: &[(String, Tensor)]) -> Result<()> {
        Model::set_weights(self, w)
    }
    fn learning_rate(&self) -> Option<f32> {
        let t = self.train.as_ref()?;
        match &t.optimizer.config().learning_rate {
            crate::optim::LearningRate::Constant(v) => Some(*v),
            crate::optim::LearningRate::Schedule(s) => {
                Some(s.lr(t.device.as_ref().map(|d| d.iterations).unwrap_or(0)))
            }
        }
    }
    fn set_learning_rate(&mut self, lr: f32) -> Result<()> {
        let t = self.train.as_mut().ok_or_else(not_compiled)?;
        if let crate::optim::LearningRate::Schedule(_) = t.optimizer.config().learning_rate {
            return Err(Error::invalid(
                "set_learning_rate",
                "the optimizer uses a learning-rate schedule; it cannot also be set directly",
            ));
        }
        if !(lr.is_finite() && lr >= 0.0) {
            return Err(Error::invalid(
                "set_learning_rate",
                format!("must be finite and >= 0, got {lr}"),
            ));
        }
        t.optimizer.config_mut().learning_rate = crate::optim::LearningRate::Constant(lr);
        Ok(())
    }
    fn save(&mut self, path: &std::path::Path, epoch: usize) -> Result<()> {
        self.save_checkpoint_at(path, epoch)
    }
}
