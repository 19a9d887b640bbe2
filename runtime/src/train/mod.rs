//! The [`Model`] and its training: `compile`, `fit`, `evaluate`, `predict`.
//!
//! One graph per (step kind, batch shape) holds the forward pass, the loss, the backward
//! pass, the optimizer update and the metric accumulation; parameters, optimizer state and
//! metric state live in backend buffers and are updated in place. Per step only the
//! scalars the progress bar shows come back to the host.

mod backup;
mod callbacks;
mod checks;
mod compile;
mod distribute;
mod evaluate;
mod fit;
mod lambda;
mod model;
mod placement;
#[cfg(test)]
mod plan_tests;
mod progress;
mod runner;
mod spares;
mod staging;
mod step;
mod tensorboard;

pub use backup::{BackupAndRestore, SaveFreq};
pub(crate) use callbacks::Checkpointing;
pub use callbacks::{
    CSVLogger, Callback, Control, EarlyStopping, LearningRateScheduler, ModelCheckpoint, Monitor,
    ReduceLROnPlateau, TerminateOnNaN,
};
pub(crate) use compile::TrainState;
pub use lambda::LambdaCallback;
pub use model::Model;
pub use tensorboard::{TensorBoard, UpdateFreq};

use crate::Tensor;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// Metric values by name (`loss`, `accuracy`, `val_loss`, …).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Logs(pub BTreeMap<String, f64>);

impl Logs {
    pub fn get(&self, key: &str) -> Option<f64> {
        self.0.get(key).copied()
    }

    pub fn insert(&mut self, key: impl Into<String>, v: f64) {
        self.0.insert(key.into(), v);
    }

    /// Sets `key` without allocating when it is already there (the per-step path).
    pub fn set(&mut self, key: &str, v: f64) {
        match self.0.get_mut(key) {
            Some(slot) => *slot = v,
            None => {
                self.0.insert(key.to_string(), v);
            }
        }
    }

    /// Training entries first, then validation ones, each in name order (as Keras shows
    /// them).
    pub fn ordered(&self) -> Vec<(&str, f64)> {
        let mut v: Vec<(&str, f64)> = self.0.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        v.sort_by_key(|(k, _)| (k.starts_with("val_"), *k));
        v
    }
}

impl fmt::Display for Logs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (k, v)) in self.ordered().into_iter().enumerate() {
            if i > 0 {
                f.write_str(" - ")?;
            }
            write!(f, "{k}: {v:.4}")?;
        }
        Ok(())
    }
}

/// What `fit` returns: each metric's value at the end of every epoch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    /// The epochs that ran (0-based, offset by `initial_epoch`).
    pub epochs: Vec<usize>,
    pub history: BTreeMap<String, Vec<f64>>,
}

impl History {
    pub(crate) fn push(&mut self, epoch: usize, logs: &Logs) {
        self.epochs.push(epoch);
        for (k, v) in &logs.0 {
            self.history.entry(k.clone()).or_default().push(*v);
        }
    }

    /// The values of one metric, one per epoch.
    pub fn get(&self, key: &str) -> Option<&[f64]> {
        self.history.get(key).map(|v| v.as_slice())
    }
}

/// Options of `fit`, with Keras' defaults.
pub struct Fit {
    pub epochs: usize,
    pub batch_size: usize,
    /// Reshuffle the training data every epoch (seeded by `seed`).
    pub shuffle: bool,
    pub seed: u64,
    /// The last fraction of the data (before shuffling) held out for validation.
    pub validation_split: f64,
    pub validation_data: Option<(Tensor, Tensor)>,
    /// Per-class loss weights (integer labels, or the argmax of one-hot targets).
    pub class_weight: Option<HashMap<i64, f32>>,
    /// Per-sample loss weights.
    pub sample_weight: Option<Vec<f32>>,
    /// The epoch to start at (to resume training).
    pub initial_epoch: usize,
    pub callbacks: Vec<Box<dyn Callback>>,
    /// 0 silent, 1 progress bar, 2 one line per epoch.
    pub verbose: u8,
    /// Under a data-parallel strategy, pad a global batch that does not split evenly over
    /// the replicas with zero-weight samples instead of refusing it.
    pub pad_to_replicas: bool,
}

impl Default for Fit {
    fn default() -> Fit {
        Fit {
            epochs: 1,
            batch_size: 32,
            shuffle: true,
            seed: 0,
            validation_split: 0.0,
            validation_data: None,
            class_weight: None,
            sample_weight: None,
            initial_epoch: 0,
            callbacks: Vec::new(),
            verbose: 1,
            pad_to_replicas: false,
        }
    }
}

impl Fit {
    /// `epochs` epochs with every other option at its default.
    pub fn epochs(epochs: usize) -> Fit {
        Fit {
            epochs,
            ..Fit::default()
        }
    }

    pub fn batch_size(mut self, n: usize) -> Fit {
        self.batch_size = n;
        self
    }
    pub fn shuffle(mut self, on: bool) -> Fit {
        self.shuffle = on;
        self
    }
    pub fn seed(mut self, seed: u64) -> Fit {
        self.seed = seed;
        self
    }
    pub fn validation_split(mut self, fraction: f64) -> Fit {
        self.validation_split = fraction;
        self
    }
    pub fn validation_data(mut self, x: impl Into<Tensor>, y: impl Into<Tensor>) -> Fit {
        self.validation_data = Some((x.into(), y.into()));
        self
    }
    pub fn class_weight(mut self, w: HashMap<i64, f32>) -> Fit {
        self.class_weight = Some(w);
        self
    }
    pub fn sample_weight(mut self, w: Vec<f32>) -> Fit {
        self.sample_weight = Some(w);
        self
    }
    pub fn initial_epoch(mut self, e: usize) -> Fit {
        self.initial_epoch = e;
        self
    }
    pub fn callback(mut self, c: impl Callback + 'static) -> Fit {
        self.callbacks.push(Box::new(c));
        self
    }
    pub fn verbose(mut self, v: u8) -> Fit {
        self.verbose = v;
        self
    }
    /// See [`Fit::pad_to_replicas`](Fit#structfield.pad_to_replicas).
    pub fn pad_to_replicas(mut self, on: bool) -> Fit {
        self.pad_to_replicas = on;
        self
    }
}
