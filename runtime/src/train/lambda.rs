//! `LambdaCallback`: a callback made of closures, one per hook, each optional.

use super::callbacks::{Callback, Control};
use super::Logs;
use crate::Result;

type TrainBegin = Box<dyn FnMut(&mut Control<'_>) -> Result<()> + Send>;
type EpochBegin = Box<dyn FnMut(usize, &mut Control<'_>) -> Result<()> + Send>;
type WithLogs = Box<dyn FnMut(usize, &Logs, &mut Control<'_>) -> Result<()> + Send>;
type TrainEnd = Box<dyn FnMut(&Logs, &mut Control<'_>) -> Result<()> + Send>;

/// Keras' `LambdaCallback`: each hook runs its closure if one was given. The closures take
/// what the [`Callback`] method of the same name takes (the epoch or batch, the logs, the
/// [`Control`]) and may fail `fit` by returning an error.
///
/// ```
/// # use strata_runtime::train::LambdaCallback;
/// let print_loss = LambdaCallback::new().on_epoch_end(|epoch, logs, _c| {
///     println!("epoch {epoch}: loss {:?}", logs.get("loss"));
///     Ok(())
/// });
/// ```
#[derive(Default)]
pub struct LambdaCallback {
    train_begin: Option<TrainBegin>,
    epoch_begin: Option<EpochBegin>,
    batch_end: Option<WithLogs>,
    epoch_end: Option<WithLogs>,
    train_end: Option<TrainEnd>,
    /// Whether the batch-end closure can hear of a batch late (see
    /// [`Callback::async_safe`]); without a batch-end closure there is nothing to wait for.
    batch_end_async_safe: bool,
}

impl LambdaCallback {
    pub fn new() -> LambdaCallback {
        LambdaCallback::default()
    }
    pub fn on_train_begin(
        mut self,
        f: impl FnMut(&mut Control<'_>) -> Result<()> + Send + 'static,
    ) -> Self {
        self.train_begin = Some(Box::new(f));
        self
    }
    pub fn on_epoch_begin(
        mut self,
        f: impl FnMut(usize, &mut Control<'_>) -> Result<()> + Send + 'static,
    ) -> Self {
        self.epoch_begin = Some(Box::new(f));
        self
    }
    /// Called with the 0-based step within the epoch and the logs so far.
    pub fn on_batch_end(
        mut self,
        f: impl FnMut(usize, &Logs, &mut Control<'_>) -> Result<()> + Send + 'static,
    ) -> Self {
        self.batch_end = Some(Box::new(f));
        self
    }
    /// Lets `fit` run ahead of the batch-end closure (see [`Callback::async_safe`]).
    pub fn async_safe(mut self, on: bool) -> Self {
        self.batch_end_async_safe = on;
        self
    }
    pub fn on_epoch_end(
        mut self,
        f: impl FnMut(usize, &Logs, &mut Control<'_>) -> Result<()> + Send + 'static,
    ) -> Self {
        self.epoch_end = Some(Box::new(f));
        self
    }
    pub fn on_train_end(
        mut self,
        f: impl FnMut(&Logs, &mut Control<'_>) -> Result<()> + Send + 'static,
    ) -> Self {
        self.train_end = Some(Box::new(f));
        self
    }
}

impl Callback for LambdaCallback {
    fn on_train_begin(&mut self, c: &mut Control<'_>) -> Result<()> {
        self.train_begin.as_mut().map_or(Ok(()), |f| f(c))
    }
    fn on_epoch_begin(&mut self, epoch: usize, c: &mut Control<'_>) -> Result<()> {
        self.epoch_begin.as_mut().map_or(Ok(()), |f| f(epoch, c))
    }
    fn on_batch_end(&mut self, step: usize, logs: &Logs, c: &mut Control<'_>) -> Result<()> {
        self.batch_end.as_mut().map_or(Ok(()), |f| f(step, logs, c))
    }
    fn async_safe(&self) -> bool {
        self.batch_end.is_none() || self.batch_end_async_safe
    }
    fn on_epoch_end(&mut self, epoch: usize, logs: &Logs, c: &mut Control<'_>) -> Result<()> {
        self.epoch_end
            .as_mut()
            .map_or(Ok(()), |f| f(epoch, logs, c))
    }
    fn on_train_end(&mut self, logs: &Logs, c: &mut Control<'_>) -> Result<()> {
        self.train_end.as_mut().map_or(Ok(()), |f| f(logs, c))
    }
}
