//! The [`Model`] and its training: `compile`, `fit`, `evaluate`, `predict`.
//!
//! One graph per (step kind, batch shape) holds the forward pass, the loss, the backward
//! pass, the optimizer update and the metric accumulation; parameters, optimizer state and
//! metric state live in backend buffers and are updated in place. Per step only the
//! scalars the progress bar shows come back to the host.

mod backup;
mod batch;
mod callbacks;
mod checks;
mod compile;
mod distribute;
mod ema;
mod evaluate;
mod fit;
mod grad;
mod inference;
mod inputs_targets;
mod lambda;
mod model;
mod placement;
#[cfg(test)]
mod plan_tests;
mod predict;
mod progress;
mod runner;
mod spares;
mod staging;
mod step;
mod tensorboard;
mod weights;

pub use backup::{BackupAndRestore, SaveFreq};
pub(crate) use callbacks::Checkpointing;
pub use callbacks::{
    CSVLogger, Callback, Control, EarlyStopping, LearningRateScheduler, ModelCheckpoint, Monitor,
    ReduceLROnPlateau, SwapEMAWeights, TerminateOnNaN,
};
pub(crate) use compile::TrainState;
pub use lambda::LambdaCallback;
pub use model::Model;
pub(crate) use predict::concat_rows;
pub(crate) use step::predict_graph;
pub use tensorboard::{TensorBoard, UpdateFreq};

use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// Metric values by name (`loss`, `accuracy`, `val_loss`, …): scalars in `.0`, and in
/// `.1` the vector-valued ones (a metric whose [`result_shape`] is `[n]`, such as
/// `F1Score` per class), kept whole as Keras keeps them. A name is in one map or the
/// other.
///
/// [`result_shape`]: crate::metrics::Metric::result_shape
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Logs(pub BTreeMap<String, f64>, pub BTreeMap<String, Vec<f64>>);

/// One entry of [`Logs`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LogValue<'a> {
    Scalar(f64),
    Vector(&'a [f64]),
}

impl Logs {
    /// A scalar entry (`None` for a vector one: see [`get_vector`](Logs::get_vector)).
    pub fn get(&self, key: &str) -> Option<f64> {
        self.0.get(key).copied()
    }

    /// A vector entry, e.g. `f1_score` with `average: None`, one value per class.
    pub fn get_vector(&self, key: &str) -> Option<&[f64]> {
        self.1.get(key).map(|v| v.as_slice())
    }

    /// Either kind of entry.
    pub fn value(&self, key: &str) -> Option<LogValue<'_>> {
        match self.0.get(key) {
            Some(v) => Some(LogValue::Scalar(*v)),
            None => self.get_vector(key).map(LogValue::Vector),
        }
    }

    pub fn insert(&mut self, key: impl Into<String>, v: f64) {
        self.0.insert(key.into(), v);
    }

    pub fn insert_vector(&mut self, key: impl Into<String>, v: Vec<f64>) {
        self.1.insert(key.into(), v);
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

    /// Sets vector `key` without allocating when it is already there with room for
    /// `values` (the per-step path, where its length does not change).
    pub fn set_vector(&mut self, key: &str, values: impl IntoIterator<Item = f64>) {
        match self.1.get_mut(key) {
            Some(slot) => {
                slot.clear();
                slot.extend(values);
            }
            None => {
                self.1.insert(key.to_string(), values.into_iter().collect());
            }
        }
    }

    /// Every name, scalar or vector, in name order.
    pub fn keys(&self) -> Vec<&str> {
        let mut k: Vec<&str> = self
            .0
            .keys()
            .chain(self.1.keys())
            .map(|k| k.as_str())
            .collect();
        k.sort_unstable();
        k
    }

    /// Every entry: training entries first, then validation ones, each in name order (as
    /// Keras shows them).
    pub fn ordered(&self) -> Vec<(&str, LogValue<'_>)> {
        let mut v: Vec<(&str, LogValue<'_>)> = self
            .0
            .iter()
            .map(|(k, v)| (k.as_str(), LogValue::Scalar(*v)))
            .chain(
                self.1
                    .iter()
                    .map(|(k, v)| (k.as_str(), LogValue::Vector(v))),
            )
            .collect();
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
            match v {
                LogValue::Scalar(v) => write!(f, "{k}: {v:.4}")?,
                LogValue::Vector(v) => write!(f, "{k}: {}", vector_summary(v))?,
            }
        }
        Ok(())
    }
}

/// How Keras' progress bar shows a vector: the mean of its values, with four decimals,
/// or in Python's scientific notation (`1.2340e-04`) when its size is 1e-3 or below.
fn vector_summary(v: &[f64]) -> String {
    let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    if mean.abs() > 1e-3 || !mean.is_finite() {
        return format!("{mean:.4}");
    }
    let s = format!("{mean:.4e}");
    // Rust writes `1.2340e-4`; Python pads the exponent to two digits with a sign.
    match s.split_once('e') {
        Some((m, e)) => {
            let (sign, digits) = match e.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', e),
            };
            format!("{m}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

/// What `fit` returns: each metric's value at the end of every epoch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    /// The epochs that ran (0-based, offset by `initial_epoch`).
    pub epochs: Vec<usize>,
    /// The scalar entries, one value per epoch.
    pub history: BTreeMap<String, Vec<f64>>,
    /// The vector entries (see [`Logs`]), one whole vector per epoch.
    pub vectors: BTreeMap<String, Vec<Vec<f64>>>,
}

impl History {
    pub(crate) fn push(&mut self, epoch: usize, logs: &Logs) {
        self.epochs.push(epoch);
        for (k, v) in &logs.0 {
            self.history.entry(k.clone()).or_default().push(*v);
        }
        for (k, v) in &logs.1 {
            self.vectors.entry(k.clone()).or_default().push(v.clone());
        }
    }

    /// The values of one scalar metric, one per epoch.
    pub fn get(&self, key: &str) -> Option<&[f64]> {
        self.history.get(key).map(|v| v.as_slice())
    }

    /// The values of one vector metric, one vector per epoch.
    pub fn get_vector(&self, key: &str) -> Option<&[Vec<f64>]> {
        self.vectors.get(key).map(|v| v.as_slice())
    }

    /// The last epoch's entries.
    pub(crate) fn last(&self) -> Logs {
        Logs(
            self.history
                .iter()
                .map(|(k, v)| (k.clone(), v.last().copied().unwrap_or(f64::NAN)))
                .collect(),
            self.vectors
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.last()?.clone())))
                .collect(),
        )
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
    /// Validation inputs and targets (`Data::from(tensor)` for a model with one input and
    /// one output).
    pub validation_data: Option<(crate::data::Data, crate::data::Data)>,
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
    pub fn validation_data(
        mut self,
        x: impl crate::data::IntoData,
        y: impl crate::data::IntoData,
    ) -> Fit {
        self.validation_data = Some((x.into_data(), y.into_data()));
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
