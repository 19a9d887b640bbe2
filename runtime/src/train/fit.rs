//! `fit`: the epoch and batch loop, with its callbacks; the step runner runs the calls.

use super::callbacks::{Flags, ModelAccess};
use super::checks::{apply_class_weight, check_pair, take_rows};
use super::progress::Progress;
use super::runner::StepOut;
use super::spares::Spares;
use super::staging::{with_rows, Staging};
use super::step::{train_graph, StepKey};
use super::{Fit, History, Logs};
use crate::data::{Batch, Data, Dataset, Groups, IntoData};
use crate::nn::Architecture;
use crate::Model;
use crate::{Error, Result, Tensor};
use std::time::Instant;

impl<A: Architecture> Model<A> {
    /// Trains the model on `x` and `y` (Keras' `fit`).
    /// A model with several inputs or outputs takes one array each, in order or by name
    /// (see [`Data`](crate::data::Data)).
    pub fn fit(&mut self, x: impl IntoData, y: impl IntoData, mut opts: Fit) -> Result<History> {
        self.check_compiled("fit")?;
        let x = self.inputs_tensor("fit", x.into_data())?;
        let y = self.targets_tensor("fit", y.into_data())?;
        if opts.class_weight.is_some() && self.output_count() > 1 {
            return Err(Error::invalid(
                "fit",
                "class_weight is for a model with one output (as in Keras); weigh samples \
                 with sample_weight",
            ));
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
            let val = opts.validation_data.take();
            (x, y, sw, self.validation_tensors(val)?)
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
        self.check_compiled("fit_dataset")?;
        if self.input_count() > 1 || self.output_count() > 1 {
            return Err(Error::invalid(
                "fit_dataset",
                format!(
                    "model `{}` has {} inputs and {} outputs; a Dataset holds one array of \
                     each so far: pass the arrays to fit",
                    self.name(),
                    self.input_count(),
                    self.output_count()
                ),
            ));
        }
        if opts.sample_weight.is_some() || opts.validation_split > 0.0 {
            return Err(Error::invalid(
                "fit_dataset",
                "sample_weight and validation_split apply to arrays; give the dataset its weights \
                 (Dataset::with_sample_weight) and pass validation_data",
            ));
        }
        let val = opts.validation_data.take();
        let val = self.validation_tensors(val)?;
        if let Some((vx, vy)) = &val {
            let vn = check_pair("fit validation_data", vx, vy)?;
            self.check_inputs("fit validation_data", vx)?;
            self.check_targets("fit validation_data", vy, vn)?;
        }
        self.run_fit(ds, val, opts, false)
    }

    /// `validation_data` as the step graphs take it (see `inputs_tensor`).
    fn validation_tensors(
        &mut self,
        val: Option<(Data, Data)>,
    ) -> Result<Option<(Tensor, Tensor)>> {
        let what = "fit validation_data";
        match val {
            Some((vx, vy)) => Ok(Some((
                self.inputs_tensor(what, vx)?,
                self.targets_tensor(what, vy)?,
            ))),
            None => Ok(None),
        }
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
        let k = self.steps_per_execution();
        let steps = ds.num_batches();
        let mut history = History::default();
        let mut callbacks = std::mem::take(&mut opts.callbacks);
        let mut control = Flags {
            epochs: opts.epochs,
            ..Flags::default()
        };
        let every_call = callbacks.iter().any(|c| !c.async_safe());
        for cb in &mut callbacks {
            cb.on_train_begin(&mut control.with(self))?;
        }
        let first_epoch = control.resume_epoch.unwrap_or(opts.initial_epoch);
        let mut stage = Staging::default();
        // The call's batches, stacked, reused from call to call (and epoch to epoch);
        // those of another size (the partial last call's, or the full ones' while it
        // runs) wait in `spare`.
        let mut group = Batch::default();
        let mut spare: Spares<Batch> = Spares::default();
        let mut logs = Logs::default();
        // The last epoch that ran to its end, and whether TerminateOnNaN stopped training.
        let (mut finished, mut terminated) = (None, false);
        'epochs: for epoch in first_epoch..opts.epochs {
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
            let mut calls = Groups::new(ds.iter(epoch));
            let mut first = true;
            let mut epoch_start = 0u64;
            let mut last_read = Instant::now();
            // The last call whose batch end the callbacks have not heard of.
            let mut unreported: Option<usize> = None;
            loop {
                if let Some(n) = calls.next_rows(k) {
                    spare.fit(
                        &mut group,
                        // An empty (new) buffer is filled in place, not kept.
                        |b| b.x.dims().first().is_some_and(|&r| r == n || r == 0),
                        || Ok(Batch::default()),
                    )?;
                }
                // A call runs up to k batches of one size: a batch of another size (the
                // partial last one) starts a call of its own.
                let run = match calls.next_into(&mut group, k) {
                    Some(r) => r?,
                    None => 0,
                };
                if run > 0 {
                    let b = &mut group;
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
                        let r = self.runner_mut()?;
                        r.reset_metrics()?;
                        epoch_start = r.start_chain()?;
                        first = false;
                    }
                    // Callbacks that are not async-safe hear of each call at once, with
                    // its logs (read below); async-safe ones once the next call is
                    // launched, or at the end of the epoch, with the logs as last read.
                    if !every_call {
                        let due = unreported.take();
                        batch_end(&mut callbacks, due, &logs, &mut control, self)?;
                    }
                    self.train_call(&mut group, run, &mut stage, opts.pad_to_replicas)?;
                    done += run;
                    unreported = Some(done - 1);
                }
                let end = run == 0;
                // Reading a call's logs makes the host wait for the device (and on XLA
                // costs a transfer), and the device chain stops on a bad step by itself,
                // so logs are read for the progress bar now and then and at the end of
                // the epoch; after every call for callbacks that are not async-safe (they
                // may look at the model between calls, as in Keras), which then hear of
                // the call at once.
                let read_now = end || every_call || last_read.elapsed() >= READ_EVERY;
                if let Some(out) = read_now
                    .then(|| self.compiled_mut()?.read_pending_logs(&mut logs))
                    .transpose()?
                    .flatten()
                {
                    last_read = Instant::now();
                    if !out.ok {
                        progress.abandon();
                        self.sync_weights()?;
                        // The chain stopped at the first bad step: the good ones counted.
                        let done = self.runner()?.iterations();
                        let finite = self.weights.iter().all(Tensor::is_all_finite);
                        let e = out.error(epoch, (done - epoch_start) as usize, done, finite);
                        if let (true, Error::NonFiniteStep { batch, cause, .. }) =
                            (control.terminate_on_nan, &e)
                        {
                            println!("Batch {batch}: Invalid {cause}, terminating training");
                            terminated = true;
                            break 'epochs;
                        }
                        return Err(e);
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
                for cb in &mut callbacks {
                    cb.on_test_begin(&mut control.with(self))?;
                }
                let vl = self.evaluate_logs(vx, vy, opts.batch_size)?;
                for cb in &mut callbacks {
                    cb.on_test_end(&vl, &mut control.with(self))?;
                }
                for (key, v) in vl.0 {
                    epoch_logs.insert(format!("val_{key}"), v);
                }
                for (key, v) in vl.1 {
                    epoch_logs.insert_vector(format!("val_{key}"), v);
                }
            }
            progress.finish(steps, &epoch_logs, started.elapsed());
            history.push(epoch, &epoch_logs);
            finished = Some(epoch);
            for cb in &mut callbacks {
                cb.on_epoch_end(epoch, &epoch_logs, &mut control.with(self))?;
            }
        }
        let last = history.last();
        // Keras' `finalize_variable_values`: with `use_ema` the weights end as their
        // moving averages. Before any step the averages are still their initial zeros,
        // which would wipe the weights, so a fit that ran no step leaves them as they are.
        if self.uses_ema() && self.iterations() > 0 {
            self.copy_ema_weights("fit", true)?;
        }
        for cb in &mut callbacks {
            cb.on_train_end(&last, &mut control.with(self))?;
        }
        self.sync_weights()?;
        // The device does not check what an update writes (see `step::train_graph`): an
        // overflow in the last step has no next step whose loss would show it.
        if let (Some(epoch), false) = (finished, terminated) {
            if !self.weights.iter().all(Tensor::is_all_finite) {
                let done = self.runner()?.iterations();
                return Err(StepOut::overflowed().error(epoch, steps, done, false));
            }
        }
        Ok(history)
    }

    /// Launches one train call of `k` steps over `group` (`k` batches of one size,
    /// stacked), chained to the previous call's status. Under a data-parallel strategy
    /// each batch is the global one, split over the replicas (padded when `pad`).
    pub(super) fn train_call(
        &mut self,
        group: &mut Batch,
        k: usize,
        stage: &mut Staging,
        pad: bool,
    ) -> Result<()> {
        let rows = group.x.dims().first().copied().unwrap_or(0);
        if k == 0 || rows % k != 0 {
            return Err(Error::invalid(
                "fit",
                format!("internal: {rows} rows are not {k} batches of one size"),
            ));
        }
        let batch = rows / k;
        stage.fill(group)?;
        {
            let t = self.compiled()?;
            let at = t.runner()?.iterations();
            stage.set_lr(k, |i| t.optimizer.config().learning_rate.at(at + i as u64))?;
        }
        let mut inputs = stage.inputs(group);
        let [x, y, ..] = &inputs;
        // The step graph sees one replica's rows of each batch (all of them on one device).
        let dist = self.dist("fit", batch, pad)?;
        let rows = dist.map_or(batch, |d| d.local);
        let index = match self.runner()?.find_train(batch, k, dist, x, y) {
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
                self.runner_mut()?.add_train(key)
            }
        };
        let r = self.runner_mut()?;
        r.launch_train(index, &mut inputs, k, dist)
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
