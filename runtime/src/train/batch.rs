//! Keras' batch calls: `train_on_batch`, `test_on_batch` and `reset_metrics`
//! (`predict_on_batch` is in `predict.rs`).
//!
//! Keras 3 (3.15, every backend's trainer, since keras-team/keras#22617) resets the
//! model's metrics at the start of `train_on_batch` and of `test_on_batch`, so each call
//! reports its own batch's loss and metrics, not a running average over the calls before
//! it; these calls do the same.

use super::checks::check_pair;
use super::runner::StepOut;
use super::staging::Staging;
use super::Logs;
use crate::data::{Batch, IntoData};
use crate::nn::Architecture;
use crate::Model;
use crate::{Error, Result, Tensor};

impl<A: Architecture> Model<A> {
    /// One optimizer step on `x`, `y` taken whole as one batch (Keras' `train_on_batch`):
    /// no shuffling, no splitting, no callbacks; the iteration count advances by one and
    /// the weights ([`weights`](Model::weights), [`predict`](Model::predict), checkpoints)
    /// are the updated ones when it returns. Returns the batch's loss and metrics, as
    /// Keras 3 does (the metrics are reset first, so nothing of earlier calls is in them).
    /// A step whose loss or gradients are not finite changes nothing and is an
    /// [`Error::NonFiniteStep`].
    pub fn train_on_batch(&mut self, x: impl IntoData, y: impl IntoData) -> Result<Logs> {
        let what = "train_on_batch";
        self.check_compiled(what)?;
        let x = self.inputs_tensor(what, x.into_data())?;
        let y = self.targets_tensor(what, y.into_data())?;
        let n = check_pair(what, &x, &y)?;
        self.check_inputs(what, &x)?;
        self.check_targets(what, &y, n)?;
        self.check_replica_split(what, n, n, false)?;
        self.ensure_device()?;
        {
            let r = self.runner_mut()?;
            r.reset_metrics()?;
            r.start_chain()?;
        }
        let mut batch = Batch {
            x,
            y,
            sample_weight: None,
        };
        self.train_call(&mut batch, 1, &mut Staging::default(), false)?;
        let mut logs = Logs::default();
        let out = self.compiled_mut()?.read_pending_logs(&mut logs)?;
        self.sync_weights()?;
        let finite = self.weights.iter().all(Tensor::is_all_finite);
        let done = self.runner()?.iterations();
        match out {
            Some(out) if !out.ok => Err(out.error(0, 0, done, finite)),
            // The device does not check what an update writes (see `step::train_graph`).
            _ if !finite => Err(StepOut::overflowed().error(0, 1, done, false)),
            Some(_) => Ok(logs),
            None => Err(Error::invalid(
                what,
                "internal: the train step returned no logs",
            )),
        }
    }

    /// The loss and metrics of `x`, `y` as one batch in inference mode, with no update
    /// (Keras' `test_on_batch`): what [`evaluate`](Model::evaluate) gives for the same
    /// data in one batch. As in Keras 3 it runs on the model's own metric state, reset
    /// first, so each call reports its own batch alone; it takes `&mut self` because it
    /// runs on the training state (and builds a model whose input is not declared).
    pub fn test_on_batch(&mut self, x: impl IntoData, y: impl IntoData) -> Result<Logs> {
        let what = "test_on_batch";
        self.check_compiled(what)?;
        let x = self.inputs_tensor(what, x.into_data())?;
        let y = self.targets_tensor(what, y.into_data())?;
        let n = check_pair(what, &x, &y)?;
        self.check_inputs(what, &x)?;
        self.check_targets(what, &y, n)?;
        self.ensure_device()?;
        // `evaluate_logs` resets the metric state first, as Keras' `test_on_batch` does.
        self.evaluate_logs(&x, &y, n)
    }

    /// Resets the loss tracker and every metric's state (Keras' `reset_metrics`): the
    /// state [`train_on_batch`](Model::train_on_batch) and
    /// [`test_on_batch`](Model::test_on_batch) write, and `fit` accumulates over an
    /// epoch. Those calls reset it themselves, as Keras 3's do; a model that is not
    /// compiled, or has not run a step, has no metric state, and this does nothing.
    pub fn reset_metrics(&mut self) -> Result<()> {
        match self.train.as_mut().and_then(|t| t.runner.as_mut()) {
            Some(r) => r.reset_metrics(),
            None => Ok(()),
        }
    }
}
