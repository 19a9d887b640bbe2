//! Callbacks: hooks into `fit`, with Keras' built-ins.

use super::{LogValue, Logs};
use crate::optim::LearningRate;
use crate::{Error, Result, Tensor};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a callback may do to the model being trained.
pub(crate) trait ModelAccess: Checkpointing {
    fn weights(&mut self) -> Result<Vec<(String, Tensor)>>;
    fn set_weights(&mut self, w: &[(String, Tensor)]) -> Result<()>;
    fn learning_rate(&self) -> Option<f32>;
    fn iterations(&self) -> u64;
    fn set_learning_rate(&mut self, lr: f32) -> Result<()>;
    /// Whether the optimizer keeps a moving average of the weights (`use_ema`).
    fn uses_ema(&self) -> bool;
    /// Exchanges the weights with their moving averages; `who` is named in errors.
    fn swap_ema_weights(&mut self, who: &str) -> Result<()>;
    /// Copies the weights into their moving averages; `who` is named in errors.
    fn copy_weights_to_ema(&mut self, who: &str) -> Result<()>;
}

/// Saving and restoring the whole training state. The checkpoint module, a layer above
/// `train`, implements it for `Model`: `train` names the operations, never the file format.
pub(crate) trait Checkpointing {
    /// Writes a checkpoint recording `epoch` completed epochs.
    fn save(&mut self, path: &Path, epoch: usize) -> Result<()>;
    /// Restores a checkpoint; returns the epochs it recorded as completed.
    fn restore(&mut self, path: &Path) -> Result<usize>;
}

/// Flags the fit loop reads after each callback.
#[derive(Default)]
pub(crate) struct Flags {
    pub stop: bool,
    pub terminate_on_nan: bool,
    /// The epoch to start at instead of `Fit::initial_epoch` (set while resuming).
    pub resume_epoch: Option<usize>,
    /// `Fit::epochs` (Keras' `params["epochs"]`).
    pub epochs: usize,
}

impl Flags {
    pub fn with<'a>(&'a mut self, model: &'a mut dyn ModelAccess) -> Control<'a> {
        Control { flags: self, model }
    }
}

/// A callback's handle on the training run.
pub struct Control<'a> {
    flags: &'a mut Flags,
    model: &'a mut dyn ModelAccess,
}

impl Control<'_> {
    /// Ends training after the current epoch.
    pub fn stop_training(&mut self) {
        self.flags.stop = true;
    }
    /// The current learning rate (a schedule's value at the current step).
    pub fn learning_rate(&self) -> Option<f32> {
        self.model.learning_rate()
    }
    /// The optimizer steps taken so far (Keras' `optimizer.iterations`).
    pub fn iterations(&self) -> u64 {
        self.model.iterations()
    }
    /// Sets a constant learning rate (an error if the optimizer follows a schedule).
    pub fn set_learning_rate(&mut self, lr: f32) -> Result<()> {
        self.model.set_learning_rate(lr)
    }
    /// The current weights, by name.
    pub fn weights(&mut self) -> Result<Vec<(String, Tensor)>> {
        self.model.weights()
    }
    pub fn set_weights(&mut self, w: &[(String, Tensor)]) -> Result<()> {
        self.model.set_weights(w)
    }
    /// Writes a full checkpoint (weights, optimizer state, progress) atomically.
    pub fn save_checkpoint(&mut self, path: &Path, epoch: usize) -> Result<()> {
        self.model.save(path, epoch)
    }
    /// Restores a checkpoint written by [`save_checkpoint`](Control::save_checkpoint);
    /// returns the epochs it recorded as completed.
    pub fn load_checkpoint(&mut self, path: &Path) -> Result<usize> {
        self.model.restore(path)
    }
    /// From `on_train_begin`: makes `fit` start at `epoch` instead of
    /// `Fit::initial_epoch` (to resume a run, as [`BackupAndRestore`](super::BackupAndRestore) does).
    pub fn resume_at_epoch(&mut self, epoch: usize) {
        self.flags.resume_epoch = Some(epoch);
    }
    /// Makes a non-finite loss end training quietly instead of failing `fit`.
    pub fn terminate_on_nan(&mut self) {
        self.flags.terminate_on_nan = true;
    }
    /// The number of epochs `fit` was asked for (Keras' `params["epochs"]`).
    pub fn epochs(&self) -> usize {
        self.flags.epochs
    }
    /// Whether the optimizer keeps a moving average of the weights (`use_ema`).
    pub fn uses_ema(&self) -> bool {
        self.model.uses_ema()
    }
    /// Exchanges the trainable weights with the optimizer's moving averages of them
    /// (an error naming `who` without `use_ema`).
    pub fn swap_ema_weights(&mut self, who: &str) -> Result<()> {
        self.model.swap_ema_weights(who)
    }
    /// Sets the optimizer's moving averages to the current weights.
    pub fn copy_weights_to_ema(&mut self, who: &str) -> Result<()> {
        self.model.copy_weights_to_ema(who)
    }
}

/// A hook into `fit`. Every method has a do-nothing default.
pub trait Callback: Send {
    fn on_train_begin(&mut self, _c: &mut Control<'_>) -> Result<()> {
        Ok(())
    }
    fn on_epoch_begin(&mut self, _epoch: usize, _c: &mut Control<'_>) -> Result<()> {
        Ok(())
    }
    /// After each backend call (every `steps_per_execution` steps); `step` counts from 0.
    /// When every callback is [`async_safe`](Callback::async_safe), once the next call is
    /// launched (or the epoch ends), with the logs `fit` last read: those are read every
    /// 50 ms or so, and at the end of an epoch.
    fn on_batch_end(&mut self, _step: usize, _logs: &Logs, _c: &mut Control<'_>) -> Result<()> {
        Ok(())
    }
    /// Whether the callback can do with hearing of a batch's end after the next batch was
    /// launched, with logs that may be a few batches old (Keras' `async_safe`). When every
    /// callback can, `fit` does not wait for the device after each call: that wait is most
    /// of the cost of a small step on XLA. The default is no: `on_batch_end` after every
    /// call, before the next, with that call's logs.
    fn async_safe(&self) -> bool {
        false
    }
    fn on_epoch_end(&mut self, _epoch: usize, _logs: &Logs, _c: &mut Control<'_>) -> Result<()> {
        Ok(())
    }
    fn on_train_end(&mut self, _logs: &Logs, _c: &mut Control<'_>) -> Result<()> {
        Ok(())
    }
    /// Before `fit` evaluates the validation data (Keras' `on_test_begin`; `evaluate`
    /// outside `fit` takes no callbacks).
    fn on_test_begin(&mut self, _c: &mut Control<'_>) -> Result<()> {
        Ok(())
    }
    /// After `fit` evaluated the validation data, with its logs (without the `val_`
    /// prefix, as Keras gives them).
    fn on_test_end(&mut self, _logs: &Logs, _c: &mut Control<'_>) -> Result<()> {
        Ok(())
    }
}

/// Keras' `SwapEMAWeights`: validation runs on the optimizer's moving average of the
/// weights instead of the weights themselves, and with `swap_on_epoch` the model holds
/// the averages from each epoch's end to the next epoch's start (so a `ModelCheckpoint`
/// listed after it saves them). Needs an optimizer with `use_ema`.
#[derive(Debug, Default)]
pub struct SwapEMAWeights {
    pub swap_on_epoch: bool,
    ema_in_model: bool,
}

impl SwapEMAWeights {
    pub fn new(swap_on_epoch: bool) -> SwapEMAWeights {
        SwapEMAWeights {
            swap_on_epoch,
            ema_in_model: false,
        }
    }
}

const SWAP_EMA: &str = "SwapEMAWeights";

impl Callback for SwapEMAWeights {
    fn on_train_begin(&mut self, c: &mut Control<'_>) -> Result<()> {
        // Checked at once, where Keras finds out at the first swap.
        if !c.uses_ema() {
            return Err(Error::invalid(
                SWAP_EMA,
                "needs an optimizer with use_ema set (e.g. Adam::default().with_ema(0.99)); \
                 the model's optimizer has none",
            ));
        }
        self.ema_in_model = false;
        Ok(())
    }
    fn on_epoch_begin(&mut self, _epoch: usize, c: &mut Control<'_>) -> Result<()> {
        if self.swap_on_epoch && self.ema_in_model {
            c.swap_ema_weights(SWAP_EMA)?;
            self.ema_in_model = false;
        }
        Ok(())
    }
    fn on_epoch_end(&mut self, epoch: usize, _logs: &Logs, c: &mut Control<'_>) -> Result<()> {
        if self.swap_on_epoch && !self.ema_in_model {
            c.swap_ema_weights(SWAP_EMA)?;
            self.ema_in_model = true;
            // The end of `fit` writes the averages into the weights; after the last epoch
            // the averages must therefore hold what the model now holds, as in Keras.
            if epoch + 1 == c.epochs() {
                c.copy_weights_to_ema(SWAP_EMA)?;
            }
        }
        Ok(())
    }
    fn on_test_begin(&mut self, c: &mut Control<'_>) -> Result<()> {
        if !self.ema_in_model {
            c.swap_ema_weights(SWAP_EMA)?;
            self.ema_in_model = true;
        }
        Ok(())
    }
    fn on_test_end(&mut self, _logs: &Logs, c: &mut Control<'_>) -> Result<()> {
        if self.ema_in_model {
            c.swap_ema_weights(SWAP_EMA)?;
            self.ema_in_model = false;
        }
        Ok(())
    }
}

/// Which quantity a callback watches, and which direction is better.
#[derive(Clone, Debug)]
pub struct Monitor {
    pub key: String,
    /// `true` when larger is better. Keras' `auto`: accuracy-like names, and the metrics
    /// Keras marks as growing with quality (F-scores, R², true counts, IoU, cosine
    /// similarity, the at-value rates), maximise.
    pub maximize: bool,
}

impl Monitor {
    /// Keras' `mode="auto"`.
    pub fn auto(key: &str) -> Monitor {
        let k = key.trim_start_matches("val_");
        let maximize = [
            "acc",
            "auc",
            "precision",
            "recall",
            "f1_score",
            "fbeta_score",
            "r2_score",
            "true_positives",
            "true_negatives",
            "io_u",
            "cosine_similarity",
            "sensitivity",
            "specificity",
        ]
        .iter()
        .any(|m| k.contains(m));
        Monitor {
            key: key.to_string(),
            maximize,
        }
    }

    fn value(&self, logs: &Logs, who: &str) -> Result<f64> {
        if let Some(v) = logs.get_vector(&self.key) {
            // Keras would compare arrays here and fail; which class to watch is the
            // user's choice, so it is refused by name.
            return Err(Error::invalid(
                who,
                format!(
                    "monitors `{}`, a vector of {} values (a metric with one result per \
                     class or threshold); expected a scalar log: monitor a metric that \
                     averages them (e.g. F1Score with average \"macro\")",
                    self.key,
                    v.len()
                ),
            ));
        }
        logs.get(&self.key).ok_or_else(|| {
            let have = logs.keys();
            Error::invalid(
                who,
                format!(
                    "monitors `{}`, which is not among the logs {have:?}",
                    self.key
                ),
            )
        })
    }

    /// Whether `v` beats `best` by more than `min_delta`.
    fn improved(&self, v: f64, best: f64, min_delta: f64) -> bool {
        if self.maximize {
            v - min_delta > best
        } else {
            v + min_delta < best
        }
    }

    fn worst(&self) -> f64 {
        if self.maximize {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        }
    }
}

/// Stops training when the monitored value stops improving.
pub struct EarlyStopping {
    pub monitor: Monitor,
    pub min_delta: f64,
    pub patience: usize,
    pub baseline: Option<f64>,
    pub restore_best_weights: bool,
    pub start_from_epoch: usize,
    wait: usize,
    best: f64,
    best_weights: Option<Vec<(String, Tensor)>>,
    /// The epoch training stopped at, if it did.
    pub stopped_epoch: Option<usize>,
}

impl EarlyStopping {
    /// Keras' defaults: patience 0, min_delta 0, mode auto.
    pub fn new(monitor: &str) -> EarlyStopping {
        EarlyStopping {
            monitor: Monitor::auto(monitor),
            min_delta: 0.0,
            patience: 0,
            baseline: None,
            restore_best_weights: false,
            start_from_epoch: 0,
            wait: 0,
            best: 0.0,
            best_weights: None,
            stopped_epoch: None,
        }
    }
    pub fn patience(mut self, p: usize) -> Self {
        self.patience = p;
        self
    }
    pub fn min_delta(mut self, d: f64) -> Self {
        self.min_delta = d.abs();
        self
    }
    pub fn restore_best_weights(mut self, on: bool) -> Self {
        self.restore_best_weights = on;
        self
    }
    pub fn baseline(mut self, b: f64) -> Self {
        self.baseline = Some(b);
        self
    }
}

impl Callback for EarlyStopping {
    fn on_train_begin(&mut self, _c: &mut Control<'_>) -> Result<()> {
        self.wait = 0;
        self.best = self.monitor.worst();
        self.best_weights = None;
        self.stopped_epoch = None;
        Ok(())
    }
    fn on_epoch_end(&mut self, epoch: usize, logs: &Logs, c: &mut Control<'_>) -> Result<()> {
        if epoch < self.start_from_epoch {
            return Ok(());
        }
        let v = self.monitor.value(logs, "EarlyStopping")?;
        if self.restore_best_weights && self.best_weights.is_none() {
            self.best_weights = Some(c.weights()?);
        }
        self.wait += 1;
        if self.monitor.improved(v, self.best, self.min_delta) {
            self.best = v;
            if self.restore_best_weights {
                self.best_weights = Some(c.weights()?);
            }
            // Below a baseline, an improvement does not reset the patience (as Keras).
            if self
                .baseline
                .is_none_or(|b| self.monitor.improved(v, b, self.min_delta))
            {
                self.wait = 0;
            }
            return Ok(());
        }
        if self.wait >= self.patience && epoch > 0 {
            self.stopped_epoch = Some(epoch);
            c.stop_training();
            if let Some(w) = &self.best_weights {
                c.set_weights(w)?;
            }
        }
        Ok(())
    }
}

/// Saves a checkpoint every epoch, or only when the monitored value improves.
/// `{epoch}` in the path is replaced by the 1-based epoch number.
pub struct ModelCheckpoint {
    pub path: PathBuf,
    pub monitor: Monitor,
    pub save_best_only: bool,
    best: f64,
}

impl ModelCheckpoint {
    pub fn new(path: impl Into<PathBuf>) -> ModelCheckpoint {
        let monitor = Monitor::auto("val_loss");
        let best = monitor.worst();
        ModelCheckpoint {
            path: path.into(),
            monitor,
            save_best_only: false,
            best,
        }
    }
    pub fn monitor(mut self, key: &str) -> Self {
        self.monitor = Monitor::auto(key);
        self.best = self.monitor.worst();
        self
    }
    pub fn save_best_only(mut self, on: bool) -> Self {
        self.save_best_only = on;
        self
    }
}

impl Callback for ModelCheckpoint {
    fn on_epoch_end(&mut self, epoch: usize, logs: &Logs, c: &mut Control<'_>) -> Result<()> {
        if self.save_best_only {
            let v = self.monitor.value(logs, "ModelCheckpoint")?;
            if !self.monitor.improved(v, self.best, 0.0) {
                return Ok(());
            }
            self.best = v;
        }
        let p = self
            .path
            .to_string_lossy()
            .replace("{epoch}", &format!("{:02}", epoch + 1));
        c.save_checkpoint(Path::new(&p), epoch + 1)
    }
}

/// Multiplies the learning rate by `factor` when the monitored value stalls for
/// `patience` epochs (Keras defaults: val_loss, factor 0.1, patience 10, min_delta 1e-4).
pub struct ReduceLROnPlateau {
    pub monitor: Monitor,
    pub factor: f32,
    pub patience: usize,
    pub min_delta: f64,
    pub cooldown: usize,
    pub min_lr: f32,
    wait: usize,
    cooldown_left: usize,
    best: f64,
}

impl ReduceLROnPlateau {
    pub fn new(monitor: &str) -> ReduceLROnPlateau {
        let monitor = Monitor::auto(monitor);
        let best = monitor.worst();
        ReduceLROnPlateau {
            monitor,
            factor: 0.1,
            patience: 10,
            min_delta: 1e-4,
            cooldown: 0,
            min_lr: 0.0,
            wait: 0,
            cooldown_left: 0,
            best,
        }
    }
    pub fn factor(mut self, f: f32) -> Self {
        self.factor = f;
        self
    }
    pub fn patience(mut self, p: usize) -> Self {
        self.patience = p;
        self
    }
    pub fn min_lr(mut self, v: f32) -> Self {
        self.min_lr = v;
        self
    }
    pub fn cooldown(mut self, c: usize) -> Self {
        self.cooldown = c;
        self
    }
}

impl Callback for ReduceLROnPlateau {
    fn on_train_begin(&mut self, _c: &mut Control<'_>) -> Result<()> {
        if !(self.factor > 0.0 && self.factor < 1.0) {
            return Err(Error::invalid(
                "ReduceLROnPlateau",
                format!("factor must be in (0, 1), got {}", self.factor),
            ));
        }
        self.wait = 0;
        self.cooldown_left = 0;
        self.best = self.monitor.worst();
        Ok(())
    }
    fn on_epoch_end(&mut self, _epoch: usize, logs: &Logs, c: &mut Control<'_>) -> Result<()> {
        let v = self.monitor.value(logs, "ReduceLROnPlateau")?;
        if self.cooldown_left > 0 {
            self.cooldown_left -= 1;
            self.wait = 0;
        }
        if self.monitor.improved(v, self.best, self.min_delta) {
            self.best = v;
            self.wait = 0;
        } else if self.cooldown_left == 0 {
            self.wait += 1;
            if self.wait >= self.patience {
                if let Some(lr) = c.learning_rate() {
                    if lr > self.min_lr {
                        c.set_learning_rate((lr * self.factor).max(self.min_lr))?;
                        self.cooldown_left = self.cooldown;
                        self.wait = 0;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Sets the learning rate at the start of each epoch from `f(epoch, current_lr)`.
pub struct LearningRateScheduler {
    f: Box<dyn FnMut(usize, f32) -> f32 + Send>,
}

impl LearningRateScheduler {
    pub fn new(f: impl FnMut(usize, f32) -> f32 + Send + 'static) -> LearningRateScheduler {
        LearningRateScheduler { f: Box::new(f) }
    }
}

impl Callback for LearningRateScheduler {
    fn on_epoch_begin(&mut self, epoch: usize, c: &mut Control<'_>) -> Result<()> {
        let lr = c.learning_rate().unwrap_or(0.0);
        c.set_learning_rate((self.f)(epoch, lr))
    }
}

/// Writes one CSV row per epoch (`epoch` then every log, in name order).
pub struct CSVLogger {
    pub path: PathBuf,
    pub separator: char,
    pub append: bool,
    file: Option<std::fs::File>,
    keys: Vec<String>,
}

impl CSVLogger {
    pub fn new(path: impl Into<PathBuf>) -> CSVLogger {
        CSVLogger {
            path: path.into(),
            separator: ',',
            append: false,
            file: None,
            keys: Vec::new(),
        }
    }
    pub fn append(mut self, on: bool) -> Self {
        self.append = on;
        self
    }
}

impl Callback for CSVLogger {
    fn on_train_begin(&mut self, _c: &mut Control<'_>) -> Result<()> {
        let io = |e| Error::Io {
            path: self.path.display().to_string(),
            source: e,
        };
        let has_header = self.append
            && self.path.exists()
            && std::fs::metadata(&self.path)
                .map(|m| m.len() > 0)
                .unwrap_or(false);
        let f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(self.append)
            .truncate(!self.append)
            .open(&self.path)
            .map_err(io)?;
        self.file = Some(f);
        self.keys.clear();
        if has_header {
            self.keys = vec!["-".into()]; // keep the existing header
        }
        Ok(())
    }
    fn on_epoch_end(&mut self, epoch: usize, logs: &Logs, _c: &mut Control<'_>) -> Result<()> {
        let path = self.path.display().to_string();
        let Some(f) = self.file.as_mut() else {
            return Ok(());
        };
        let io = |e| Error::Io {
            path: path.clone(),
            source: e,
        };
        let sep = self.separator.to_string();
        if self.keys.is_empty() {
            self.keys = logs.keys().into_iter().map(String::from).collect();
            writeln!(f, "epoch{sep}{}", self.keys.join(&sep)).map_err(io)?;
        } else if self.keys == ["-"] {
            self.keys = logs.keys().into_iter().map(String::from).collect();
        }
        let vals: Vec<String> = self
            .keys
            .iter()
            .map(|k| match logs.value(k) {
                Some(LogValue::Scalar(v)) => v.to_string(),
                // As Keras writes an array: quoted, in brackets, comma-separated.
                Some(LogValue::Vector(v)) => {
                    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
                    format!("\"[{}]\"", items.join(", "))
                }
                None => String::new(),
            })
            .collect();
        writeln!(f, "{epoch}{sep}{}", vals.join(&sep)).map_err(io)?;
        f.flush().map_err(io)
    }
    fn on_train_end(&mut self, _logs: &Logs, _c: &mut Control<'_>) -> Result<()> {
        self.file = None;
        Ok(())
    }
}

/// Ends training quietly when a step's loss, gradient, learning rate or update stops
/// being finite (instead of `fit` returning [`Error::NonFiniteStep`]); the weights from
/// before the bad step are kept either way.
#[derive(Default)]
pub struct TerminateOnNaN;

impl Callback for TerminateOnNaN {
    fn on_train_begin(&mut self, c: &mut Control<'_>) -> Result<()> {
        c.terminate_on_nan();
        Ok(())
    }
}

impl<A: crate::nn::Architecture> ModelAccess for crate::Model<A> {
    fn weights(&mut self) -> Result<Vec<(String, Tensor)>> {
        self.sync_weights()?;
        Ok(crate::Model::weights(self))
    }
    fn set_weights(&mut self, w: &[(String, Tensor)]) -> Result<()> {
        crate::Model::set_weights(self, w)
    }
    fn learning_rate(&self) -> Option<f32> {
        let t = self.train.as_ref()?;
        match &t.optimizer.config().learning_rate {
            LearningRate::Constant(v) => Some(*v),
            LearningRate::Schedule(s) => Some(s.lr(self.iterations())),
        }
    }
    fn iterations(&self) -> u64 {
        crate::Model::iterations(self)
    }
    fn set_learning_rate(&mut self, lr: f32) -> Result<()> {
        let t = self.compiled_mut()?;
        if let LearningRate::Schedule(_) = t.optimizer.config().learning_rate {
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
        t.optimizer.config_mut().learning_rate = LearningRate::Constant(lr);
        Ok(())
    }
    fn uses_ema(&self) -> bool {
        crate::Model::uses_ema(self)
    }
    fn swap_ema_weights(&mut self, who: &str) -> Result<()> {
        crate::Model::swap_ema_weights(self, who)
    }
    fn copy_weights_to_ema(&mut self, who: &str) -> Result<()> {
        self.copy_ema_weights(who, false)
    }
}
