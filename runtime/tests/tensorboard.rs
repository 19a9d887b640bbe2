//! The TensorBoard callback's event files, read back by TensorBoard's own loaders
//! (scripts/read-tensorboard-logs.py in the project's Python environment), and
//! LambdaCallback.

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use strata_runtime::loss::SparseCategoricalCrossentropy;
use strata_runtime::metrics::Accuracy;
use strata_runtime::nn::{Activation, Dense, Sequential};
use strata_runtime::optim::SGD;
use strata_runtime::train::{
    Fit, History, LambdaCallback, LearningRateScheduler, TensorBoard, UpdateFreq,
};
use strata_runtime::{random, Error, Model};

fn model() -> Model<Sequential> {
    let mut m = Model::new(Sequential::new(
        Some(vec![6]),
        vec![
            Box::new(Dense::new("dense", 5, Activation::Relu)),
            Box::new(Dense::new("dense_1", 3, Activation::Softmax)),
        ],
    ));
    m.compile(
        SGD::new(0.1),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    m
}

type Data = (ndarray::ArrayD<f32>, ndarray::ArrayD<i32>);

fn data(n: usize, seed: u64) -> Data {
    (
        random::normal(&[n, 6], 0.0, 1.0, seed).unwrap(),
        random::uniform_int(&[n], 0, 3, seed + 1).unwrap(),
    )
}

/// A fresh, empty directory for one test's logs (left there to look at after a failure).
fn log_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tensorboard-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_file(&d);
    d
}

/// What TensorBoard's loaders make of `dir` (see the script's docstring).
fn read_logs(dir: &Path) -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join(".strata/python/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/install-python-env (it installs TensorBoard, which this \
         test reads the event files with)",
        python.display()
    );
    let out = Command::new(&python)
        .arg(root.join("scripts/read-tensorboard-logs.py"))
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "read-tensorboard-logs.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// `[step, value]` pairs of one scalar series.
fn series(v: &Value) -> Vec<(i64, f32)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_i64().unwrap(), p[1].as_f64().unwrap() as f32))
        .collect()
}

/// One value per epoch from `history`, at steps 0, 1, … (f32, as the files hold them).
fn per_epoch(history: &History, key: &str) -> Vec<(i64, f32)> {
    let h = history.get(key).unwrap();
    h.iter()
        .enumerate()
        .map(|(i, v)| (i as i64, *v as f32))
        .collect()
}

#[test]
fn epoch_logs_are_history_under_keras_runs_and_tags() {
    let dir = log_dir("epoch");
    let (x, y) = data(40, 1);
    let (vx, vy) = data(12, 3);
    let mut m = model();
    let fit = Fit::epochs(3)
        .batch_size(8)
        .verbose(0)
        .validation_data(vx, vy)
        .callback(LearningRateScheduler::new(|epoch, _| {
            0.1 * 0.5f32.powi(epoch as i32)
        }))
        .callback(TensorBoard::new(&dir));
    let h = m.fit(&x, &y, fit).unwrap();
    let logs = read_logs(&dir);

    // One file per run, named as TensorFlow's summary writers name theirs.
    assert_eq!(keys(&logs["records"]), set(&["train", "validation"]));
    for run in ["train", "validation"] {
        let files = keys(&logs["records"][run]);
        assert_eq!(files.len(), 1, "{run}: {files:?}");
        let f = files.first().unwrap();
        let parts: Vec<&str> = f.split('.').collect();
        assert!(
            f.starts_with("events.out.tfevents.") && f.ends_with(".v2"),
            "{f}"
        );
        assert_eq!(parts[3].len(), 10, "{f}: seconds as 10 digits");
        let pid = std::process::id().to_string();
        assert_eq!(
            parts[parts.len() - 3],
            pid,
            "{f}: the pid third from the end"
        );
    }

    let train = &logs["scalars"]["train"];
    let val = &logs["scalars"]["validation"];
    assert_eq!(
        keys(train),
        set(&["epoch_accuracy", "epoch_learning_rate", "epoch_loss"])
    );
    assert_eq!(
        keys(val),
        set(&[
            "epoch_accuracy",
            "epoch_loss",
            "evaluation_accuracy_vs_iterations",
            "evaluation_loss_vs_iterations",
        ])
    );
    for name in ["loss", "accuracy"] {
        let tag = format!("epoch_{name}");
        assert_eq!(series(&train[&tag]), per_epoch(&h, name), "train {tag}");
        let val_name = format!("val_{name}");
        assert_eq!(
            series(&val[&tag]),
            per_epoch(&h, &val_name),
            "validation {tag}"
        );
        // At the optimizer's step after each epoch: 5 batches an epoch.
        let steps: Vec<(i64, f32)> = per_epoch(&h, &val_name)
            .into_iter()
            .map(|(e, v)| (5 * (e + 1), v))
            .collect();
        let tag = format!("evaluation_{name}_vs_iterations");
        assert_eq!(series(&val[&tag]), steps, "{tag}");
    }
    assert_eq!(
        series(&train["epoch_learning_rate"]),
        vec![(0, 0.1), (1, 0.05), (2, 0.025)]
    );
    // update_freq epoch writes no batch series, histogram_freq 0 no histograms.
    assert_eq!(logs["histograms"], serde_json::json!({}));

    // The older EventAccumulator reads the same series.
    assert_eq!(keys(&logs["legacy"]["train"]), keys(train));
    assert_eq!(keys(&logs["legacy"]["validation"]), keys(val));
    assert_eq!(
        series(&logs["legacy"]["train"]["epoch_loss"]),
        per_epoch(&h, "loss")
    );
}

#[test]
fn batch_logs_and_weight_histograms() {
    let dir = log_dir("batch");
    let (x, y) = data(40, 5);
    let (vx, vy) = data(12, 7);
    // The logs each batch end hears, to compare with the batch series.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let probe = LambdaCallback::new().on_batch_end(move |_, logs, _| {
        record.lock().unwrap().push(logs.clone());
        Ok(())
    });
    let mut m = model();
    let fit = Fit::epochs(2)
        .batch_size(8)
        .verbose(0)
        .validation_data(vx, vy)
        .callback(probe)
        .callback(
            TensorBoard::new(&dir)
                .update_freq("batch".parse::<UpdateFreq>().unwrap())
                .histogram_freq(1),
        );
    let h = m.fit(&x, &y, fit).unwrap();
    let logs = read_logs(&dir);
    let train = &logs["scalars"]["train"];
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 10);
    for name in ["loss", "accuracy"] {
        // Keras' global train batch: 1, 2, … across epochs.
        let want: Vec<(i64, f32)> = seen
            .iter()
            .enumerate()
            .map(|(i, l)| (i as i64 + 1, l.get(name).unwrap() as f32))
            .collect();
        assert_eq!(
            series(&train[format!("batch_{name}")]),
            want,
            "batch_{name}"
        );
        assert_eq!(series(&train[format!("epoch_{name}")]), per_epoch(&h, name));
    }

    // One histogram per weight and epoch, tagged `<weight>/histogram`, 30 buckets that
    // count every element; the last epoch's spans the final weights.
    let hist = &logs["histograms"]["train"];
    let weights = m.weights();
    let tags: BTreeSet<String> = weights
        .iter()
        .map(|(n, _)| format!("{n}/histogram"))
        .collect();
    assert_eq!(
        tags,
        set(&[
            "dense/bias/histogram",
            "dense/kernel/histogram",
            "dense_1/bias/histogram",
            "dense_1/kernel/histogram",
        ])
    );
    assert_eq!(keys(hist), tags);
    assert_eq!(keys(&logs["histograms"]), set(&["train"]));
    for (name, w) in &weights {
        let s = hist[format!("{name}/histogram")].as_array().unwrap();
        assert_eq!(s.len(), 2, "{name}");
        for (epoch, point) in s.iter().enumerate() {
            assert_eq!(point[0].as_i64().unwrap(), epoch as i64);
            let rows = point[1].as_array().unwrap();
            assert_eq!(rows.len(), 30, "{name}");
            let count: f64 = rows.iter().map(|r| r[2].as_f64().unwrap()).sum();
            assert_eq!(count, w.numel() as f64, "{name}");
        }
        let last = s[1][1].as_array().unwrap();
        let v = w.to_vec::<f32>().unwrap();
        let lo = v.iter().copied().fold(f32::INFINITY, f32::min) as f64;
        let hi = v.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        assert_eq!(last[0][0].as_f64().unwrap(), lo, "{name}");
        assert_eq!(last[29][1].as_f64().unwrap(), hi, "{name}");
        // The legacy accumulator sees the same histograms.
        assert_eq!(
            logs["legacy"]["train"][format!("{name}/histogram")],
            hist[format!("{name}/histogram")]
        );
    }
}

#[test]
fn every_n_batches_counts_across_epochs() {
    let dir = log_dir("every3");
    let (x, y) = data(40, 9);
    let mut m = model();
    let fit = Fit::epochs(2)
        .batch_size(8)
        .verbose(0)
        .callback(TensorBoard::new(&dir).update_freq(3));
    m.fit(&x, &y, fit).unwrap();
    let logs = read_logs(&dir);
    let steps: Vec<i64> = series(&logs["scalars"]["train"]["batch_loss"])
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(steps, vec![3, 6, 9]);
    // No validation data: no validation run.
    assert_eq!(keys(&logs["records"]), set(&["train"]));
}

#[test]
fn bad_arguments_and_file_errors_are_typed() {
    let (x, y) = data(16, 11);
    let mut m = model();
    let e = m
        .fit(
            &x,
            &y,
            Fit::epochs(1)
                .verbose(0)
                .callback(TensorBoard::new(log_dir("zero")).update_freq(0)),
        )
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument { .. }) && e.to_string().contains("update_freq"),
        "{e}"
    );
    let e = "weekly".parse::<UpdateFreq>().unwrap_err();
    assert!(e.to_string().contains("\"weekly\""), "{e}");

    // A log directory under a regular file cannot be made: the error names the path.
    let file = log_dir("blocker");
    std::fs::write(&file, b"not a directory").unwrap();
    let e = m
        .fit(
            &x,
            &y,
            Fit::epochs(1)
                .verbose(0)
                .callback(TensorBoard::new(file.join("logs"))),
        )
        .unwrap_err();
    assert!(
        matches!(&e, Error::Io { path, .. } if path.contains("blocker")),
        "{e}"
    );
}

#[test]
fn lambda_callback_runs_each_given_closure_in_order() {
    let (x, y) = data(16, 13);
    let events = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = |e: &Arc<Mutex<Vec<String>>>, s: String| e.lock().unwrap().push(s);
    let (a, b, c, d, f) = (
        events.clone(),
        events.clone(),
        events.clone(),
        events.clone(),
        events.clone(),
    );
    let cb = LambdaCallback::new()
        .on_train_begin(move |_| {
            log(&a, "train_begin".into());
            Ok(())
        })
        .on_epoch_begin(move |e, _| {
            log(&b, format!("epoch_begin {e}"));
            Ok(())
        })
        .on_batch_end(move |s, _, _| {
            log(&c, format!("batch_end {s}"));
            Ok(())
        })
        .on_epoch_end(move |e, logs, ctl| {
            assert!(logs.get("loss").is_some());
            log(&d, format!("epoch_end {e} lr {:?}", ctl.learning_rate()));
            if e == 1 {
                ctl.stop_training();
            }
            Ok(())
        })
        .on_train_end(move |logs, _| {
            log(&f, format!("train_end {}", logs.get("loss").is_some()));
            Ok(())
        });
    let mut m = model();
    let h = m
        .fit(&x, &y, Fit::epochs(5).batch_size(8).verbose(0).callback(cb))
        .unwrap();
    assert_eq!(h.epochs, vec![0, 1], "stop_training from the closure");
    assert_eq!(
        *events.lock().unwrap(),
        [
            "train_begin",
            "epoch_begin 0",
            "batch_end 0",
            "batch_end 1",
            "epoch_end 0 lr Some(0.1)",
            "epoch_begin 1",
            "batch_end 0",
            "batch_end 1",
            "epoch_end 1 lr Some(0.1)",
            "train_end true",
        ]
    );

    // A closure's error ends `fit` with that error; hooks left out do nothing.
    let failing = LambdaCallback::new().on_epoch_end(|_, _, _| {
        Err(Error::InvalidArgument {
            what: "my callback".into(),
            message: "gave up".into(),
        })
    });
    let e = m
        .fit(&x, &y, Fit::epochs(2).verbose(0).callback(failing))
        .unwrap_err();
    assert!(e.to_string().contains("gave up"), "{e}");
    m.fit(
        &x,
        &y,
        Fit::epochs(1).verbose(0).callback(LambdaCallback::new()),
    )
    .unwrap();
}

/// `generated.rs` is what prost-build makes of `event.proto` (protox stands in for
/// protoc, so this needs nothing installed). After editing the .proto, run this test with
/// STRATA_REGENERATE_PROTO=1 to rewrite the generated file.
#[test]
fn generated_code_matches_the_proto() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/train/tensorboard");
    let fds = protox::compile(["event.proto"], [&dir]).unwrap();
    let out = log_dir("protogen");
    std::fs::create_dir_all(&out).unwrap();
    prost_build::Config::new()
        .out_dir(&out)
        .compile_fds(fds)
        .unwrap();
    let fresh = std::fs::read_to_string(out.join("tensorboard.rs")).unwrap();
    let checked_in = dir.join("generated.rs");
    if std::env::var_os("STRATA_REGENERATE_PROTO").is_some() {
        std::fs::write(&checked_in, &fresh).unwrap();
    }
    assert!(
        std::fs::read_to_string(&checked_in).unwrap() == fresh,
        "{} is not prost-build's output for event.proto: rerun this test with \
         STRATA_REGENERATE_PROTO=1",
        checked_in.display()
    );
}
