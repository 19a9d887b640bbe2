//! The built-in callbacks and a user callback.

use std::sync::{Arc, Mutex};
use strata_runtime::loss::SparseCategoricalCrossentropy;
use strata_runtime::nn::{Activation, Dense, Sequential};
use strata_runtime::optim::SGD;
use strata_runtime::train::{
    CSVLogger, Callback, Control, EarlyStopping, Fit, LearningRateScheduler, Logs, ModelCheckpoint,
    ReduceLROnPlateau,
};
use strata_runtime::Model;
use strata_runtime::{random, Result, Tensor};

fn model(lr: f32) -> Model<Sequential> {
    let mut m = Model::new(Sequential::new(
        Some(vec![6]),
        vec![Box::new(Dense::new("dense", 3, Activation::Softmax))],
    ));
    m.compile(SGD::new(lr), SparseCategoricalCrossentropy::default(), ())
        .unwrap();
    m
}

fn data() -> (ndarray::ArrayD<f32>, ndarray::ArrayD<i32>) {
    (
        random::normal(&[40, 6], 0.0, 1.0, 1).unwrap(),
        random::uniform_int(&[40], 0, 3, 2).unwrap(),
    )
}

/// Makes the model much worse at the end of epoch `at` (kernels × 50).
struct Saboteur {
    at: usize,
}

impl Callback for Saboteur {
    fn on_epoch_end(&mut self, epoch: usize, _logs: &Logs, c: &mut Control<'_>) -> Result<()> {
        if epoch == self.at {
            let w: Vec<(String, Tensor)> = c
                .weights()?
                .into_iter()
                .map(|(n, t)| {
                    let t = if n.ends_with("kernel") {
                        Tensor::F32(t.array::<f32>().unwrap() * 50.0)
                    } else {
                        t
                    };
                    (n, t)
                })
                .collect();
            c.set_weights(&w)?;
        }
        Ok(())
    }
}

/// Records the learning rate at each epoch start and counts batches.
#[derive(Clone, Default)]
struct Probe {
    lrs: Arc<Mutex<Vec<f32>>>,
    batches: Arc<Mutex<usize>>,
}

impl Callback for Probe {
    fn on_epoch_begin(&mut self, _e: usize, c: &mut Control<'_>) -> Result<()> {
        self.lrs.lock().unwrap().push(c.learning_rate().unwrap());
        Ok(())
    }
    fn on_batch_end(&mut self, _s: usize, _l: &Logs, _c: &mut Control<'_>) -> Result<()> {
        *self.batches.lock().unwrap() += 1;
        Ok(())
    }
}

#[test]
fn early_stopping_restores_the_best_weights() {
    let (x, y) = data();
    let mut m = model(0.0); // weights change only through the saboteur
    let initial = m.weights();
    let fit = Fit::epochs(6)
        .shuffle(false)
        .verbose(0)
        .callback(
            EarlyStopping::new("loss")
                .patience(1)
                .restore_best_weights(true),
        )
        .callback(Saboteur { at: 0 });
    let h = m.fit(&x, &y, fit).unwrap();
    assert_eq!(
        h.epochs,
        vec![0, 1],
        "stopped after the first epoch without improvement"
    );
    assert_eq!(m.weights(), initial);
}

#[test]
fn model_checkpoint_saves_only_improvements() {
    let (x, y) = data();
    let dir = std::env::temp_dir().join(format!("strata-cb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pattern = dir.join("ckpt-{epoch}.safetensors");
    let mut m = model(0.0);
    let fit = Fit::epochs(3)
        .shuffle(false)
        .verbose(0)
        .callback(
            ModelCheckpoint::new(&pattern)
                .monitor("loss")
                .save_best_only(true),
        )
        .callback(Saboteur { at: 0 });
    m.fit(&x, &y, fit).unwrap();
    assert!(dir.join("ckpt-01.safetensors").exists());
    assert!(!dir.join("ckpt-02.safetensors").exists());
    assert!(!dir.join("ckpt-03.safetensors").exists());
    let mut fresh = model(0.0).with_seed(5).unwrap();
    let info = fresh
        .load_checkpoint(dir.join("ckpt-01.safetensors"))
        .unwrap();
    assert_eq!(info.epoch, 1);
}

#[test]
fn learning_rate_callbacks() {
    let (x, y) = data();
    let probe = Probe::default();
    let mut m = model(0.1);
    let fit = Fit::epochs(3)
        .verbose(0)
        .callback(LearningRateScheduler::new(|epoch, _| {
            0.1 / (epoch as f32 + 1.0)
        }))
        .callback(probe.clone());
    m.fit(&x, &y, fit).unwrap();
    assert_eq!(*probe.lrs.lock().unwrap(), vec![0.1, 0.05, 0.1 / 3.0]);
    assert_eq!(
        *probe.batches.lock().unwrap(),
        6,
        "two batches of 32 rows per epoch"
    );

    // A plateau (a learning rate too small to move the loss) halves the rate after each
    // epoch without improvement.
    let probe = Probe::default();
    let mut m = model(1e-12);
    let fit = Fit::epochs(4)
        .shuffle(false)
        .verbose(0)
        .callback(ReduceLROnPlateau::new("loss").patience(1).factor(0.5))
        .callback(probe.clone());
    m.fit(&x, &y, fit).unwrap();
    let lrs = probe.lrs.lock().unwrap().clone();
    assert_eq!(lrs, vec![1e-12, 1e-12, 5e-13, 2.5e-13], "{lrs:?}");
}

#[test]
fn csv_logger_writes_one_row_per_epoch() {
    let (x, y) = data();
    let path = std::env::temp_dir().join(format!("strata-log-{}.csv", std::process::id()));
    let mut m = model(0.1);
    m.fit(
        &x,
        &y,
        Fit::epochs(2).verbose(0).callback(CSVLogger::new(&path)),
    )
    .unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "epoch,loss");
    assert_eq!(lines.len(), 3);
    assert!(
        lines[1].starts_with("0,") && lines[2].starts_with("1,"),
        "{text}"
    );
}

#[test]
fn monitoring_a_missing_log_is_an_error() {
    let (x, y) = data();
    let mut m = model(0.1);
    let e = m
        .fit(
            &x,
            &y,
            Fit::epochs(2)
                .verbose(0)
                .callback(EarlyStopping::new("val_loss")),
        )
        .unwrap_err();
    assert!(e.to_string().contains("val_loss"), "{e}");
}

/// Records the steps its batch ends report, and the loss each time.
#[derive(Clone, Default)]
struct Steps {
    async_safe: bool,
    seen: Arc<Mutex<Vec<(usize, f64)>>>,
}

impl Callback for Steps {
    fn on_batch_end(&mut self, step: usize, logs: &Logs, _c: &mut Control<'_>) -> Result<()> {
        let loss = logs.get("loss").unwrap_or(f64::NAN);
        self.seen.lock().unwrap().push((step, loss));
        Ok(())
    }
    fn async_safe(&self) -> bool {
        self.async_safe
    }
}

#[test]
fn async_safe_callbacks_hear_of_every_call_with_the_epoch_end_fresh() {
    let (x, y) = data();
    let fit = |cb: Steps| {
        let mut m = model(0.1);
        let h = m
            .fit(
                &x,
                &y,
                Fit::epochs(2)
                    .batch_size(4)
                    .shuffle(false)
                    .verbose(0)
                    .callback(cb),
            )
            .unwrap();
        (h, m.weights())
    };
    let every = Steps::default();
    let lagging = Steps {
        async_safe: true,
        ..Steps::default()
    };
    let (h1, w1) = fit(every.clone());
    let (h2, w2) = fit(lagging.clone());
    // The same training either way.
    assert_eq!(h1, h2);
    assert_eq!(w1, w2);
    let every = every.seen.lock().unwrap().clone();
    let lagging = lagging.seen.lock().unwrap().clone();
    // Ten calls per epoch, each reported once, in order, either way...
    let steps = |seen: &[(usize, f64)]| seen.iter().map(|s| s.0).collect::<Vec<_>>();
    let want: Vec<usize> = [(0..10).collect::<Vec<_>>(), (0..10).collect()].concat();
    assert_eq!(steps(&every), want);
    assert_eq!(steps(&lagging), want);
    // ...and the last of each epoch with its own logs; before it an async-safe callback
    // may see older ones.
    let ends = |seen: &[(usize, f64)]| {
        seen.iter()
            .filter(|s| s.0 == 9)
            .map(|s| s.1)
            .collect::<Vec<_>>()
    };
    assert_eq!(ends(&lagging), ends(&every));
}

/// `Monitor::auto` picks Keras' direction for each metric of the catalogue: up for the
/// metrics Keras marks `_direction = "up"`, down for losses and errors.
#[test]
fn monitor_auto_follows_keras_directions() {
    use strata_runtime::train::Monitor;
    for up in [
        "accuracy",
        "val_sparse_top_k_categorical_accuracy",
        "auc",
        "precision_at_recall",
        "recall",
        "f1_score",
        "val_fbeta_score",
        "r2_score",
        "true_positives",
        "true_negatives",
        "mean_io_u",
        "binary_io_u",
        "cosine_similarity",
        "sensitivity_at_specificity",
        "specificity_at_sensitivity",
    ] {
        assert!(Monitor::auto(up).maximize, "{up} should be maximised");
    }
    for down in [
        "loss",
        "val_loss",
        "mean_squared_error",
        "root_mean_squared_error",
        "logcosh",
        "false_positives",
        "false_negatives",
        "kl_divergence",
        "squared_hinge",
        "binary_crossentropy",
    ] {
        assert!(!Monitor::auto(down).maximize, "{down} should be minimised");
    }
}
