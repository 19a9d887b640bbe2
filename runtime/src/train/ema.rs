//! The optimizer's moving average of the weights (`use_ema`) seen from the model: read,
//! swapped in and out of the weights (for `SwapEMAWeights`), and written into the
//! weights at the end of `fit`, as Keras' `finalize_variable_values` does.

use super::compile::not_compiled;
use crate::nn::Architecture;
use crate::Model;
use crate::{Error, Result, Tensor};

impl<A: Architecture> Model<A> {
    /// Whether the compiled optimizer keeps a moving average of the weights.
    pub fn uses_ema(&self) -> bool {
        self.train
            .as_ref()
            .is_some_and(|t| t.optimizer.config().use_ema)
    }

    /// The optimizer's moving average of each trainable weight, by parameter name (Keras'
    /// `optimizer._model_variables_moving_average`). Before the first step they are 0.
    pub fn ema_weights(&mut self) -> Result<Vec<(String, Tensor)>> {
        self.check_ema("ema_weights")?;
        self.ensure_device()?;
        let r = self.runner()?;
        let l = r.layout();
        let params = self.params();
        let mut out = Vec::with_capacity(l.trainable.len());
        for (j, &pi) in l.trainable.iter().enumerate() {
            if let Some(e) = l.ema_of(j) {
                out.push((params[pi].name.clone(), r.state(e)?));
            }
        }
        Ok(out)
    }

    /// Exchanges the trainable weights with their moving averages on the device, for
    /// `who` (the caller named in errors).
    pub(crate) fn swap_ema_weights(&mut self, who: &str) -> Result<()> {
        self.check_ema(who)?;
        self.ensure_device()?;
        self.runner_mut()?.swap_ema();
        Ok(())
    }

    /// Copies the weights into their averages (`to_weights` false) or the averages into
    /// the weights (`to_weights` true), for `who`.
    pub(crate) fn copy_ema_weights(&mut self, who: &str, to_weights: bool) -> Result<()> {
        self.check_ema(who)?;
        self.ensure_device()?;
        self.runner_mut()?.copy_ema(to_weights)
    }

    /// The error for `who` when the model is not compiled with `use_ema`.
    fn check_ema(&self, who: &str) -> Result<()> {
        let t = self.train.as_ref().ok_or_else(|| not_compiled(who))?;
        if t.optimizer.config().use_ema {
            return Ok(());
        }
        Err(Error::invalid(
            who,
            format!(
                "needs an optimizer with use_ema set (e.g. `{}` with .with_ema(0.99)); \
                 the model is compiled with `{}` without it",
                t.optimizer.name(),
                t.optimizer.name()
            ),
        ))
    }
}
