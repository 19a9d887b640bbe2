//! The `TensorBoard` callback: Keras' event files, written without TensorFlow.
//!
//! Layout and names as Keras 3: `log_dir/train/` and `log_dir/validation/` runs;
//! `epoch_<name>` per epoch (the validation logs under the validation run without their
//! `val_` prefix, the learning rate as `epoch_learning_rate` in the train run),
//! `evaluation_<name>_vs_iterations` in the validation run at the optimizer's step,
//! `batch_<name>` every `update_freq` batches, and `<weight>/histogram` every
//! `histogram_freq` epochs.

#[rustfmt::skip]
#[allow(dead_code, clippy::all, clippy::pedantic)]
mod generated;
mod histogram;
mod record;
mod writer;

use super::callbacks::{Callback, Control};
use super::Logs;
use crate::{Error, Result, Tensor};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use writer::EventWriter;

/// How often [`TensorBoard`] writes the training logs: once an epoch (`"epoch"`), or every
/// `n` batches as `batch_<name>` as well (`"batch"` is every batch). An integer converts
/// into `Batches`; `"epoch"` and `"batch"` parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateFreq {
    Epoch,
    Batches(usize),
}

impl From<usize> for UpdateFreq {
    fn from(n: usize) -> UpdateFreq {
        UpdateFreq::Batches(n)
    }
}

impl FromStr for UpdateFreq {
    type Err = Error;
    fn from_str(s: &str) -> Result<UpdateFreq> {
        match s {
            "epoch" => Ok(UpdateFreq::Epoch),
            "batch" => Ok(UpdateFreq::Batches(1)),
            _ => Err(Error::invalid(
                "TensorBoard",
                format!(
                    "update_freq must be \"epoch\", \"batch\" or a number of batches, got {s:?}"
                ),
            )),
        }
    }
}

/// Writes the logs, the learning rate and (every `histogram_freq` epochs) weight
/// histograms as TensorBoard event files; view them with `tensorboard --logdir <log_dir>`.
/// Keras' defaults: `log_dir` `logs`, `histogram_freq` 0 (none), `update_freq` epoch.
/// Each `fit` starts new files in the two runs.
pub struct TensorBoard {
    pub log_dir: PathBuf,
    /// Weight histograms every this many epochs (from the first); 0 for none.
    pub histogram_freq: usize,
    pub update_freq: UpdateFreq,
    train: Option<EventWriter>,
    validation: Option<EventWriter>,
    /// Train batches seen this `fit` (Keras' global train batch: steps count from 1).
    batches: u64,
}

impl Default for TensorBoard {
    fn default() -> TensorBoard {
        TensorBoard::new("logs")
    }
}

impl TensorBoard {
    pub fn new(log_dir: impl Into<PathBuf>) -> TensorBoard {
        TensorBoard {
            log_dir: log_dir.into(),
            histogram_freq: 0,
            update_freq: UpdateFreq::Epoch,
            train: None,
            validation: None,
            batches: 0,
        }
    }
    pub fn histogram_freq(mut self, epochs: usize) -> Self {
        self.histogram_freq = epochs;
        self
    }
    /// `UpdateFreq::Epoch`, a number of batches, or `"batch"`/`"epoch"` parsed.
    pub fn update_freq(mut self, f: impl Into<UpdateFreq>) -> Self {
        self.update_freq = f.into();
        self
    }

    /// The event file of the train run, opened on first use (as Keras' writers are).
    fn train(&mut self) -> Result<&mut EventWriter> {
        open(&mut self.train, &self.log_dir.join("train"))
    }
    fn validation(&mut self) -> Result<&mut EventWriter> {
        open(&mut self.validation, &self.log_dir.join("validation"))
    }

    /// The event files written so far (the train run's, then the validation run's).
    pub fn files(&self) -> Vec<&Path> {
        [&self.train, &self.validation]
            .into_iter()
            .flatten()
            .map(|w| w.path())
            .collect()
    }

    fn close(&mut self) -> Result<()> {
        // Both are closed even when the first fails.
        let t = self.train.take().map_or(Ok(()), EventWriter::close);
        let v = self.validation.take().map_or(Ok(()), EventWriter::close);
        t.and(v)
    }
}

fn open<'a>(slot: &'a mut Option<EventWriter>, dir: &Path) -> Result<&'a mut EventWriter> {
    if slot.is_none() {
        *slot = Some(EventWriter::create(dir)?);
    }
    Ok(slot.as_mut().expect("opened above"))
}

impl Callback for TensorBoard {
    fn on_train_begin(&mut self, _c: &mut Control<'_>) -> Result<()> {
        if self.update_freq == UpdateFreq::Batches(0) {
            return Err(Error::invalid(
                "TensorBoard",
                "update_freq must be \"epoch\" or at least 1 batch, got 0",
            ));
        }
        self.close()?;
        self.batches = 0;
        Ok(())
    }

    fn on_batch_end(&mut self, _step: usize, logs: &Logs, _c: &mut Control<'_>) -> Result<()> {
        self.batches += 1;
        let UpdateFreq::Batches(n) = self.update_freq else {
            return Ok(());
        };
        if !self.batches.is_multiple_of(n as u64) {
            return Ok(());
        }
        let step = self.batches as i64;
        let w = self.train()?;
        for (name, v) in &logs.0 {
            w.scalar(&format!("batch_{name}"), *v as f32, step)?;
        }
        Ok(())
    }

    /// Batch logs are written as they come, so only epoch-level logging can hear of a
    /// batch late.
    fn async_safe(&self) -> bool {
        self.update_freq == UpdateFreq::Epoch
    }

    fn on_epoch_end(&mut self, epoch: usize, logs: &Logs, c: &mut Control<'_>) -> Result<()> {
        let step = epoch as i64;
        let val: Vec<(&str, f64)> = logs
            .0
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("val_")?, *v)))
            .collect();
        if !val.is_empty() {
            // Keras writes these as its validation pass ends, at the optimizer's step.
            let iterations = c.iterations() as i64;
            let w = self.validation()?;
            for (name, v) in &val {
                w.scalar(
                    &format!("evaluation_{name}_vs_iterations"),
                    *v as f32,
                    iterations,
                )?;
            }
            for (name, v) in &val {
                w.scalar(&format!("epoch_{name}"), *v as f32, step)?;
            }
        }
        let lr = c.learning_rate();
        let histograms = self.histogram_freq > 0 && epoch.is_multiple_of(self.histogram_freq);
        let w = self.train()?;
        for (name, v) in logs.0.iter().filter(|(k, _)| !k.starts_with("val_")) {
            w.scalar(&format!("epoch_{name}"), *v as f32, step)?;
        }
        if let Some(lr) = lr {
            w.scalar("epoch_learning_rate", lr, step)?;
        }
        if histograms {
            for (name, t) in c.weights()? {
                // Keras' tag: the weight's path, `:` made `_`, with a suffix that keeps it
                // apart from other summaries of the same weight.
                let tag = format!("{}/histogram", name.replace(':', "_"));
                w.histogram(&tag, &values(&t), step)?;
            }
        }
        w.flush()?;
        if let Some(v) = self.validation.as_mut() {
            v.flush()?;
        }
        Ok(())
    }

    fn on_train_end(&mut self, _logs: &Logs, _c: &mut Control<'_>) -> Result<()> {
        self.close()
    }
}

/// A weight's elements as f64, whatever its element type.
fn values(t: &Tensor) -> Vec<f64> {
    match t {
        Tensor::F32(a) => a.iter().map(|&v| v as f64).collect(),
        Tensor::F64(a) => a.iter().copied().collect(),
        Tensor::BF16(a) => a.iter().map(|v| v.to_f64()).collect(),
        Tensor::I32(a) => a.iter().map(|&v| v as f64).collect(),
        Tensor::I64(a) => a.iter().map(|&v| v as f64).collect(),
        Tensor::Bool(a) => a.iter().map(|&v| v as u8 as f64).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_freq_parses_keras_words_and_refuses_others() {
        assert_eq!("epoch".parse::<UpdateFreq>().unwrap(), UpdateFreq::Epoch);
        assert_eq!(
            "batch".parse::<UpdateFreq>().unwrap(),
            UpdateFreq::Batches(1)
        );
        let e = "batches".parse::<UpdateFreq>().unwrap_err().to_string();
        assert!(
            e.contains("TensorBoard") && e.contains("\"batches\""),
            "{e}"
        );
    }
}
