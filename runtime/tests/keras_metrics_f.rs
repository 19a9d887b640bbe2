//! The F-scores, R2Score, RootMeanSquaredError, the confusion counts and the top-k
//! accuracies against Keras (`runtime/tests/reference/metrics_f.json`, written by
//! `scripts/keras-reference/metrics_f.py`): each setting streamed over the same two
//! batches, on the native backend and on XLA CPU, within 1e-5 relative. Then a vector
//! metric through `fit`, `evaluate`, the history, CSVLogger and a monitor, and the typed
//! errors for bad arguments and shapes.
//!
//! Needs the XLA CPU plugin (`scripts/install-xla-plugin`); without it the XLA half fails
//! with the install command rather than being skipped.

use serde_json::Value as Json;
use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::pjrt::{CacheDir, PjrtBackend, PjrtOptions};
use strata_runtime::backend::{Backend, Device};
use strata_runtime::ir::{DType, Graph, TensorType};
use strata_runtime::metrics::{
    Average, ClassAggregation, F1Score, FBetaScore, FalseNegatives, FalsePositives, Metric,
    R2Score, RootMeanSquaredError, SparseTopKCategoricalAccuracy, TopKAccuracy,
    TopKCategoricalAccuracy, TrueNegatives, TruePositives,
};
use strata_runtime::Tensor;

fn reference() -> Json {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/reference/metrics_f.json"
    );
    let text = std::fs::read_to_string(path).expect("the committed reference file");
    serde_json::from_str(&text).expect("reference JSON")
}

fn floats(v: &Json) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn dims(v: &Json) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

/// Keras' `average` / `class_aggregation` argument: JSON null or a string.
fn opt_str(args: &Json, key: &str) -> Option<String> {
    args.get(key).and_then(|v| v.as_str()).map(String::from)
}

/// The metric a reference case names, built from its Keras arguments.
fn metric(name: &str, args: &Json) -> Box<dyn Metric> {
    let thresholds = || args.get("thresholds").map(floats);
    let threshold = args.get("threshold").and_then(|t| t.as_f64());
    let k = args.get("k").and_then(|k| k.as_u64()).map(|k| k as usize);
    match name {
        "F1Score" => {
            let mut m = F1Score::new()
                .average_from_keras(opt_str(args, "average").as_deref())
                .unwrap();
            if let Some(t) = threshold {
                m = m.threshold(t as f32);
            }
            Box::new(m)
        }
        "FBetaScore" => {
            let beta = args["beta"].as_f64().unwrap() as f32;
            let mut m = FBetaScore::new(beta)
                .average_from_keras(opt_str(args, "average").as_deref())
                .unwrap();
            if let Some(t) = threshold {
                m = m.threshold(t as f32);
            }
            Box::new(m)
        }
        "R2Score" => {
            let n = args
                .get("num_regressors")
                .and_then(|n| n.as_u64())
                .unwrap_or(0);
            Box::new(
                R2Score::new()
                    .class_aggregation_from_keras(opt_str(args, "class_aggregation").as_deref())
                    .unwrap()
                    .num_regressors(n as usize),
            )
        }
        "RootMeanSquaredError" => Box::new(RootMeanSquaredError),
        "TruePositives" => {
            Box::new(thresholds().map_or_else(TruePositives::default, TruePositives::new))
        }
        "FalsePositives" => {
            Box::new(thresholds().map_or_else(FalsePositives::default, FalsePositives::new))
        }
        "TrueNegatives" => {
            Box::new(thresholds().map_or_else(TrueNegatives::default, TrueNegatives::new))
        }
        "FalseNegatives" => {
            Box::new(thresholds().map_or_else(FalseNegatives::default, FalseNegatives::new))
        }
        "TopKCategoricalAccuracy" => Box::new(k.map_or_else(
            TopKCategoricalAccuracy::default,
            TopKCategoricalAccuracy::new,
        )),
        "SparseTopKCategoricalAccuracy" => Box::new(k.map_or_else(
            SparseTopKCategoricalAccuracy::default,
            SparseTopKCategoricalAccuracy::new,
        )),
        other => panic!("no metric {other} in this test"),
    }
}

/// The graph that streams `batches` through `m` from zero state, and its inputs.
fn streamed(m: &dyn Metric, batches: &[Json]) -> (Graph, Vec<Tensor>) {
    let mut g = Graph::new("metric");
    let types: Vec<TensorType> = m
        .state()
        .into_iter()
        .map(|d| TensorType::new(DType::F32, d))
        .collect();
    let mut cur: Vec<_> = types.iter().map(|t| g.parameter(t.clone())).collect();
    let mut inputs: Vec<Tensor> = types.iter().map(|t| Tensor::zeros(t).unwrap()).collect();
    for b in batches {
        let yd = dims(&b["y_true"]["shape"]);
        let yv = floats(&b["y_true"]["data"]);
        let y = if b["y_true"]["dtype"] == "int32" {
            Tensor::from_vec(&yd, yv.iter().map(|&v| v as i32).collect()).unwrap()
        } else {
            Tensor::from_vec(&yd, yv).unwrap()
        };
        let p =
            Tensor::from_vec(&dims(&b["y_pred"]["shape"]), floats(&b["y_pred"]["data"])).unwrap();
        let n = p.dims()[0];
        let w = match &b["sample_weight"] {
            Json::Null => vec![1.0; n],
            w => floats(w),
        };
        let w = Tensor::from_vec(&[n], w).unwrap();
        let (yv, pv, wv) = (
            g.parameter(y.ty()),
            g.parameter(p.ty()),
            g.parameter(w.ty()),
        );
        cur = m.update(&mut g, &cur, yv, pv, wv).unwrap();
        inputs.extend([y, p, w]);
    }
    let r = m.result(&mut g, &cur).unwrap();
    g.set_outputs(vec![r]).unwrap();
    (g, inputs)
}

fn xla_cpu() -> PjrtBackend {
    let options = PjrtOptions {
        cache: CacheDir::Disabled,
        ..PjrtOptions::default()
    };
    PjrtBackend::with_options(&Device::XlaCpu { devices: Some(1) }, options)
        .unwrap_or_else(|e| panic!("the XLA CPU plugin is needed for this test: {e}"))
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-6 + 1e-5 * want.abs()
}

#[test]
fn every_setting_matches_keras_on_native_and_xla_cpu() {
    let r = reference();
    let backends: Vec<(&str, Box<dyn Backend>)> = vec![
        ("native", Box::new(NativeBackend::new())),
        ("xla-cpu", Box::new(xla_cpu())),
    ];
    let mut failures = Vec::new();
    let cases = r["cases"].as_array().unwrap();
    assert!(cases.len() >= 30, "the reference holds every setting");
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let mut m = metric(c["metric"].as_str().unwrap(), &c["args"]);
        let batches = c["batches"].as_array().unwrap();
        // As `fit` does: the metric learns the model's output shape first.
        let out = dims(&batches[0]["y_pred"]["shape"])[1..].to_vec();
        m.build(&out).unwrap();
        assert_eq!(
            m.name(),
            c["log_name"].as_str().unwrap(),
            "{name}: log name"
        );
        let want_shape = dims(&c["result_shape"]);
        assert_eq!(m.result_shape(), want_shape, "{name}: result shape");
        let want = floats(&c["result"]);
        let (g, inputs) = streamed(m.as_ref(), batches);
        for (b, backend) in &backends {
            let out = backend.run(&g, &inputs).unwrap();
            assert_eq!(out[0].dims(), want_shape.as_slice(), "{name} on {b}");
            let got = out[0].to_vec::<f32>().unwrap();
            if !got
                .iter()
                .zip(&want)
                .all(|(&g, &w)| close(g as f64, w as f64))
            {
                failures.push(format!("{name} on {b}: got {got:?}, Keras {want:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn top_k_accuracy_stays_as_the_general_form() {
    // TopKAccuracy (kept from before the Keras names) logs under the same names.
    assert_eq!(
        TopKAccuracy::categorical(5).name(),
        TopKCategoricalAccuracy::default().name()
    );
    assert_eq!(
        TopKAccuracy::sparse(3).name(),
        SparseTopKCategoricalAccuracy::new(3).name()
    );
    assert_eq!(TopKCategoricalAccuracy::default().k, 5);
    assert_eq!(SparseTopKCategoricalAccuracy::default().k, 5);
}

fn err_text(e: strata_runtime::Error) -> String {
    assert!(
        matches!(e, strata_runtime::Error::InvalidArgument { .. }),
        "a typed InvalidArgument, got {e:?}"
    );
    e.to_string()
}

#[test]
fn bad_arguments_are_typed_errors_naming_the_metric() {
    let e = err_text(
        F1Score::new()
            .average_from_keras(Some("macor"))
            .unwrap_err(),
    );
    assert!(
        e.contains("F1Score") && e.contains("\"macro\"") && e.contains("macor"),
        "{e}"
    );
    let e = err_text(
        FBetaScore::new(2.0)
            .average_from_keras(Some("Micro"))
            .unwrap_err(),
    );
    assert!(e.contains("FBetaScore"), "{e}");
    assert_eq!(
        Average::from_keras("F1Score", Some("weighted")).unwrap(),
        Some(Average::Weighted)
    );
    let e = err_text(
        R2Score::new()
            .class_aggregation_from_keras(Some("variance_weighted"))
            .unwrap_err(),
    );
    assert!(
        e.contains("R2Score") && e.contains("variance_weighted_average"),
        "{e}"
    );
    assert_eq!(
        ClassAggregation::from_keras(None).unwrap(),
        None::<ClassAggregation>
    );
    // Values checked where the metric is first used: build (compile's first step).
    let e = err_text(FBetaScore::new(0.0).build(&[3]).unwrap_err());
    assert!(e.contains("FBetaScore") && e.contains("beta"), "{e}");
    let e = err_text(F1Score::new().threshold(1.5).build(&[3]).unwrap_err());
    assert!(e.contains("F1Score") && e.contains("threshold"), "{e}");
    let e = err_text(F1Score::new().build(&[4, 4]).unwrap_err());
    assert!(e.contains("F1Score") && e.contains("2D"), "{e}");
    let e = err_text(R2Score::new().build(&[]).unwrap_err());
    assert!(e.contains("R2Score") && e.contains("2D"), "{e}");
    let e = err_text(TruePositives::new(vec![0.5, 1.2]).build(&[1]).unwrap_err());
    assert!(e.contains("TruePositives") && e.contains("1.2"), "{e}");
    let e = err_text(FalseNegatives::new(vec![]).build(&[1]).unwrap_err());
    assert!(e.contains("FalseNegatives"), "{e}");
    let e = err_text(TopKCategoricalAccuracy::new(0).build(&[5]).unwrap_err());
    assert!(
        e.contains("TopKCategoricalAccuracy") && e.contains("k"),
        "{e}"
    );
}

#[test]
fn mismatched_shapes_are_typed_errors_when_the_graph_is_built() {
    let mut f1 = F1Score::new();
    f1.build(&[3]).unwrap();
    let mut g = Graph::new("bad");
    let state: Vec<_> = f1
        .state()
        .into_iter()
        .map(|d| g.parameter(TensorType::new(DType::F32, d)))
        .collect();
    let y = g.parameter(TensorType::new(DType::F32, [4, 2]));
    let p = g.parameter(TensorType::new(DType::F32, [4, 3]));
    let w = g.parameter(TensorType::new(DType::F32, [4]));
    let e = err_text(f1.update(&mut g, &state, y, p, w).unwrap_err());
    assert!(e.contains("F1Score") && e.contains("2D"), "{e}");

    let mut r2 = R2Score::new();
    r2.build(&[3]).unwrap();
    let state: Vec<_> = r2
        .state()
        .into_iter()
        .map(|d| g.parameter(TensorType::new(DType::F32, d)))
        .collect();
    let e = err_text(r2.update(&mut g, &state, y, p, w).unwrap_err());
    assert!(e.contains("R2Score"), "{e}");

    let tp = TruePositives::default();
    let acc = g.parameter(TensorType::new(DType::F32, [1]));
    let e = err_text(tp.update(&mut g, &[acc], y, p, w).unwrap_err());
    assert!(e.contains("TruePositives"), "{e}");
}

mod through_fit {
    use super::*;
    use strata_runtime::loss::CategoricalCrossentropy;
    use strata_runtime::metrics::Accuracy;
    use strata_runtime::nn::{Activation, Dense, Sequential};
    use strata_runtime::optim::Adam;
    use strata_runtime::train::{CSVLogger, EarlyStopping, Fit, LogValue};
    use strata_runtime::{random, Model};

    const CLASSES: usize = 3;

    /// One-hot labels: the largest of the first three features.
    fn data(n: usize, seed: u64) -> (Tensor, Tensor) {
        let x = random::normal(&[n, 6], 0.0, 1.0, seed).unwrap();
        let mut y = vec![0.0f32; n * CLASSES];
        for (i, r) in x.outer_iter().enumerate() {
            let c = (0..CLASSES).max_by(|&a, &b| r[a].total_cmp(&r[b])).unwrap();
            y[i * CLASSES + c] = 1.0;
        }
        (Tensor::F32(x), Tensor::from_vec(&[n, CLASSES], y).unwrap())
    }

    fn model() -> Model<Sequential> {
        let mut m = Model::new(Sequential::new(
            Some(vec![6]),
            vec![Box::new(Dense::new("dense", CLASSES, Activation::Softmax))],
        ));
        m.compile(
            Adam::new(0.05),
            CategoricalCrossentropy::default(),
            (
                F1Score::new(),
                TruePositives::new(vec![0.3, 0.5, 0.7]),
                Accuracy,
            ),
        )
        .unwrap();
        m
    }

    /// Keras' per-class F1 without a threshold (each row's largest prediction is the
    /// positive), computed on the host from predictions.
    fn host_f1(pred: &[f32], y: &[f32]) -> Vec<f64> {
        let eps = 1e-7f64;
        let (mut tp, mut fp, mut fn_) = ([0.0f64; CLASSES], [0.0; CLASSES], [0.0; CLASSES]);
        for (p, t) in pred.chunks(CLASSES).zip(y.chunks(CLASSES)) {
            let max = p.iter().cloned().fold(f32::MIN, f32::max);
            for c in 0..CLASSES {
                let on = p[c] >= max && p[c].abs() > 1e-9;
                match (on, t[c] == 1.0) {
                    (true, true) => tp[c] += 1.0,
                    (true, false) => fp[c] += 1.0,
                    (false, true) => fn_[c] += 1.0,
                    _ => {}
                }
            }
        }
        (0..CLASSES)
            .map(|c| {
                let p = tp[c] / (tp[c] + fp[c] + eps);
                let r = tp[c] / (tp[c] + fn_[c] + eps);
                2.0 * p * r / (p + r + eps)
            })
            .collect()
    }

    #[test]
    fn a_vector_metric_is_kept_whole_in_history_and_evaluate() {
        let (x, y) = data(240, 7);
        let mut m = model();
        let path = std::env::temp_dir().join(format!("strata-f1-{}.csv", std::process::id()));
        let h = m
            .fit(
                &x,
                &y,
                Fit::epochs(3)
                    .verbose(0)
                    .validation_split(0.25)
                    .callback(CSVLogger::new(&path)),
            )
            .unwrap();
        // Whole vectors, one per epoch, for training and validation; scalars unchanged.
        for key in [
            "f1_score",
            "val_f1_score",
            "true_positives",
            "val_true_positives",
        ] {
            let v = h
                .get_vector(key)
                .unwrap_or_else(|| panic!("{key} in {h:?}"));
            assert_eq!(v.len(), 3, "{key}");
            assert!(v.iter().all(|e| e.len() == CLASSES), "{key}: {v:?}");
            assert!(h.get(key).is_none(), "{key} is no scalar");
        }
        assert_eq!(h.get("accuracy").unwrap().len(), 3);
        assert_eq!(h.get("val_loss").unwrap().len(), 3);
        let f1 = &h.get_vector("f1_score").unwrap()[2];
        assert!(f1.iter().all(|v| (0.0..=1.0).contains(v)), "{f1:?}");
        // The thresholds are ascending, so the counts of positives predicted are not.
        let tp = &h.get_vector("true_positives").unwrap()[2];
        assert!(tp[0] >= tp[1] && tp[1] >= tp[2], "{tp:?}");

        // evaluate's F1 is Keras' formula over the model's own predictions.
        let logs = m.evaluate(&x, &y).unwrap();
        let got = logs.get_vector("f1_score").unwrap().to_vec();
        let pred = m.predict(&x).unwrap().to_vec::<f32>().unwrap();
        let want = host_f1(&pred, &y.to_vec::<f32>().unwrap());
        assert_eq!(got.len(), CLASSES);
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-5 + 1e-5 * w.abs(),
                "{got:?} vs {want:?}"
            );
        }
        assert!(logs.get("f1_score").is_none());
        assert!(matches!(logs.value("f1_score"), Some(LogValue::Vector(_))));
        assert!(logs.keys().contains(&"f1_score"));
        // The epoch line shows a vector as Keras' progress bar does: its mean.
        let mean = got.iter().sum::<f64>() / CLASSES as f64;
        let line = logs.to_string();
        assert!(line.contains(&format!("f1_score: {mean:.4}")), "{line}");

        // CSVLogger writes a vector as Keras does: quoted, in brackets.
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).ok();
        let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
        assert!(
            header.contains(&"f1_score") && header.contains(&"val_f1_score"),
            "{text}"
        );
        let row = text.lines().nth(3).unwrap();
        let last = h.get_vector("f1_score").unwrap()[2]
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        assert!(row.contains(&format!("\"[{last}]\"")), "{row}");
    }

    #[test]
    fn monitoring_a_vector_metric_is_a_typed_error_naming_it() {
        let (x, y) = data(64, 8);
        let mut m = model();
        let e = m
            .fit(
                &x,
                &y,
                Fit::epochs(2)
                    .verbose(0)
                    .callback(EarlyStopping::new("f1_score")),
            )
            .unwrap_err();
        let text = err_text(e);
        assert!(
            text.contains("`f1_score`") && text.contains("vector of 3"),
            "{text}"
        );
    }

    #[test]
    fn a_model_output_the_metric_cannot_measure_is_a_typed_error() {
        // A model whose output is (batch, 2, 4): not F1Score's 2D predictions.
        let mut m = Model::new(Sequential::new(
            Some(vec![2, 3]),
            vec![Box::new(Dense::new("dense", 4, Activation::Linear))],
        ));
        m.compile(
            Adam::new(0.01),
            strata_runtime::loss::MeanSquaredError,
            [F1Score::new().average(Some(Average::Macro))],
        )
        .unwrap();
        let x = random::normal(&[8, 2, 3], 0.0, 1.0, 1).unwrap();
        let y = Tensor::from_vec(&[8, 2, 4], vec![0.0f32; 64]).unwrap();
        let e = m.fit(&x, &y, Fit::epochs(1).verbose(0)).unwrap_err();
        let text = err_text(e);
        assert!(text.contains("F1Score"), "{text}");
    }

    #[test]
    fn vector_metrics_agree_under_mirrored_replicas() {
        use strata_runtime::backend::Device;
        use strata_runtime::strategy::{MirroredStrategy, OneDeviceStrategy, Strategy};
        let (x, y) = data(96, 9);
        let run = |s: Strategy| {
            let mut m = s.scope(model);
            let fit = Fit::epochs(2).batch_size(16).shuffle(false).verbose(0);
            let h = m.fit(&x, &y, fit).unwrap();
            (h, m.evaluate(&x, &y).unwrap())
        };
        let (h1, e1) = run(OneDeviceStrategy::new(Device::Native).unwrap());
        let (h2, e2) = run(MirroredStrategy::with_replicas(Device::Native, 2).unwrap());
        for key in ["f1_score", "true_positives"] {
            let (a, b) = (h1.get_vector(key).unwrap(), h2.get_vector(key).unwrap());
            let (c, d) = (e1.get_vector(key).unwrap(), e2.get_vector(key).unwrap());
            let pairs = a.iter().flatten().zip(b.iter().flatten());
            for (p, q) in pairs.chain(c.iter().zip(d)) {
                assert!(
                    (p - q).abs() <= 1e-4 * p.abs().max(1.0),
                    "{key}: {a:?} vs {b:?}"
                );
            }
        }
    }
}
