//! The losses and the loss-mean metrics against Keras 3 (`tests/reference/losses.json`,
//! written by `scripts/keras-reference/losses.py`), on the native backend and on XLA's CPU
//! plugin; gradient checks of every loss; and a typed error for each kind of bad argument
//! or target.

use serde_json::Value as Json;
use strata_runtime::autodiff::gradcheck::GradCheck;
use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::pjrt::{CacheDir, PjrtBackend, PjrtOptions};
use strata_runtime::backend::{Backend, Device};
use strata_runtime::ir::{DType, Graph, TensorType};
use strata_runtime::loss::{self, Loss};
use strata_runtime::metrics::{self, Metric};
use strata_runtime::random::Rng;
use strata_runtime::{Error, Tensor};

fn reference() -> Json {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/reference/losses.json");
    let text = std::fs::read_to_string(path).expect("the Keras reference file");
    serde_json::from_str(&text).expect("valid JSON")
}

fn tensor(j: &Json) -> Tensor {
    let dims: Vec<usize> = j["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let data = j["data"].as_array().unwrap();
    match j["dtype"].as_str().unwrap() {
        "f32" => Tensor::from_vec(
            &dims,
            data.iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect::<Vec<_>>(),
        ),
        "i32" => Tensor::from_vec(
            &dims,
            data.iter()
                .map(|v| v.as_i64().unwrap() as i32)
                .collect::<Vec<_>>(),
        ),
        d => panic!("dtype {d}"),
    }
    .unwrap()
}

fn arg_f32(args: &Json, key: &str, default: f32) -> f32 {
    args.get(key)
        .and_then(Json::as_f64)
        .map_or(default, |v| v as f32)
}
fn arg_bool(args: &Json, key: &str) -> bool {
    args.get(key).and_then(Json::as_bool).unwrap_or(false)
}
fn arg_axes(args: &Json) -> Option<Vec<i64>> {
    args.get("axis")
        .and_then(Json::as_array)
        .map(|a| a.iter().map(|v| v.as_i64().unwrap()).collect())
}

/// The Strata loss for a Keras class name and its arguments.
fn make_loss(class: &str, args: &Json) -> Box<dyn Loss> {
    let from_logits = arg_bool(args, "from_logits");
    let label_smoothing = arg_f32(args, "label_smoothing", 0.0);
    match class {
        "MeanSquaredError" => Box::new(loss::MeanSquaredError),
        "MeanAbsoluteError" => Box::new(loss::MeanAbsoluteError),
        "Huber" => Box::new(loss::Huber {
            delta: arg_f32(args, "delta", 1.0),
        }),
        "MeanAbsolutePercentageError" => Box::new(loss::MeanAbsolutePercentageError),
        "MeanSquaredLogarithmicError" => Box::new(loss::MeanSquaredLogarithmicError),
        "LogCosh" => Box::new(loss::LogCosh),
        "CosineSimilarity" => Box::new(loss::CosineSimilarity {
            axis: args.get("axis").and_then(Json::as_i64).unwrap_or(-1),
        }),
        "KLDivergence" => Box::new(loss::KLDivergence),
        "Poisson" => Box::new(loss::Poisson),
        "Hinge" => Box::new(loss::Hinge),
        "SquaredHinge" => Box::new(loss::SquaredHinge),
        "CategoricalHinge" => Box::new(loss::CategoricalHinge),
        "BinaryCrossentropy" => Box::new(loss::BinaryCrossentropy {
            from_logits,
            label_smoothing,
        }),
        "CategoricalCrossentropy" => Box::new(loss::CategoricalCrossentropy {
            from_logits,
            label_smoothing,
        }),
        "SparseCategoricalCrossentropy" => {
            Box::new(loss::SparseCategoricalCrossentropy { from_logits })
        }
        "BinaryFocalCrossentropy" => Box::new(loss::BinaryFocalCrossentropy {
            apply_class_balancing: arg_bool(args, "apply_class_balancing"),
            alpha: arg_f32(args, "alpha", 0.25),
            gamma: arg_f32(args, "gamma", 2.0),
            from_logits,
            label_smoothing,
        }),
        "CategoricalFocalCrossentropy" => Box::new(loss::CategoricalFocalCrossentropy {
            alpha: arg_f32(args, "alpha", 0.25),
            gamma: arg_f32(args, "gamma", 2.0),
            from_logits,
            label_smoothing,
        }),
        "Dice" => Box::new(loss::Dice {
            axis: arg_axes(args),
        }),
        "Tversky" => Box::new(loss::Tversky {
            alpha: arg_f32(args, "alpha", 0.5),
            beta: arg_f32(args, "beta", 0.5),
            axis: arg_axes(args),
        }),
        c => panic!("no Strata loss for Keras' {c}"),
    }
}

/// The Strata metric for a Keras class name and its arguments.
fn make_metric(class: &str, args: &Json) -> Box<dyn Metric> {
    let from_logits = arg_bool(args, "from_logits");
    let label_smoothing = arg_f32(args, "label_smoothing", 0.0);
    match class {
        "MeanSquaredError" => Box::new(metrics::MeanSquaredError),
        "MeanAbsoluteError" => Box::new(metrics::MeanAbsoluteError),
        "MeanAbsolutePercentageError" => Box::new(metrics::MeanAbsolutePercentageError),
        "MeanSquaredLogarithmicError" => Box::new(metrics::MeanSquaredLogarithmicError),
        "CosineSimilarity" => Box::new(metrics::CosineSimilarity {
            axis: args.get("axis").and_then(Json::as_i64).unwrap_or(-1),
        }),
        "LogCoshError" => Box::new(metrics::LogCoshError),
        "Poisson" => Box::new(metrics::Poisson),
        "KLDivergence" => Box::new(metrics::KLDivergence),
        "Hinge" => Box::new(metrics::Hinge),
        "SquaredHinge" => Box::new(metrics::SquaredHinge),
        "CategoricalHinge" => Box::new(metrics::CategoricalHinge),
        "BinaryCrossentropy" => Box::new(metrics::BinaryCrossentropy {
            from_logits,
            label_smoothing,
        }),
        "CategoricalCrossentropy" => Box::new(metrics::CategoricalCrossentropy {
            from_logits,
            label_smoothing,
        }),
        "SparseCategoricalCrossentropy" => {
            Box::new(metrics::SparseCategoricalCrossentropy { from_logits })
        }
        c => panic!("no Strata metric for Keras' {c}"),
    }
}

fn backends() -> Vec<(&'static str, Box<dyn Backend>)> {
    let options = PjrtOptions {
        cache: CacheDir::Disabled,
        ..PjrtOptions::default()
    };
    let xla = match PjrtBackend::with_options(&Device::XlaCpu { devices: Some(1) }, options) {
        Ok(b) => b,
        Err(e) => panic!("the XLA CPU plugin is needed for this test: {e}"),
    };
    vec![
        ("native", Box::new(NativeBackend::new())),
        ("xla cpu", Box::new(xla)),
    ]
}

/// Within 1e-5 relative, with a floor of 1e-6 for values near 0.
fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-6 + 1e-5 * want.abs()
}

#[test]
fn losses_match_keras_per_sample_on_native_and_xla() {
    let r = reference();
    let cases = r["losses"].as_array().unwrap();
    let mut failures = Vec::new();
    for (bname, backend) in backends() {
        for c in cases {
            let name = c["name"].as_str().unwrap();
            let loss = make_loss(c["loss"].as_str().unwrap(), &c["args"]);
            let (y, p) = (tensor(&c["y_true"]), tensor(&c["y_pred"]));
            let mut g = Graph::new("loss");
            let yv = g.parameter(y.ty());
            let pv = g.parameter(p.ty());
            loss.check(&y.ty(), &p.ty()).unwrap();
            let l = loss.per_sample(&mut g, yv, pv, None).unwrap();
            g.set_outputs(vec![l]).unwrap();
            let got = backend.run(&g, &[y, p]).unwrap()[0]
                .to_vec::<f32>()
                .unwrap();
            let want: Vec<f64> = c["per_sample"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            let ok =
                got.len() == want.len() && got.iter().zip(&want).all(|(&a, &b)| close(a as f64, b));
            if !ok {
                failures.push(format!("{bname}: {name}: got {got:?}, Keras {want:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Streams the case's batches through the metric's update and returns the result.
fn stream(backend: &dyn Backend, m: &dyn Metric, batches: &[Json]) -> f32 {
    let mut g = Graph::new("metric");
    let mut cur: Vec<_> = m
        .state()
        .iter()
        .map(|d| g.parameter(TensorType::new(DType::F32, d.clone())))
        .collect();
    let mut inputs: Vec<Tensor> = m
        .state()
        .iter()
        .map(|d| Tensor::zeros(&TensorType::new(DType::F32, d.clone())).unwrap())
        .collect();
    for b in batches {
        let (y, p) = (tensor(&b["y_true"]), tensor(&b["y_pred"]));
        let n = p.ty().dims()[0];
        let w: Vec<f32> = match b["sample_weight"].as_array() {
            Some(a) => a.iter().map(|v| v.as_f64().unwrap() as f32).collect(),
            None => vec![1.0; n],
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
    backend.run(&g, &inputs).unwrap()[0]
        .to_vec::<f32>()
        .unwrap()[0]
}

#[test]
fn loss_mean_metrics_match_keras_on_native_and_xla() {
    let r = reference();
    let cases = r["metrics"].as_array().unwrap();
    let mut failures = Vec::new();
    for (bname, backend) in backends() {
        for c in cases {
            let name = c["name"].as_str().unwrap();
            let m = make_metric(c["metric"].as_str().unwrap(), &c["args"]);
            assert_eq!(m.name(), c["keras_name"].as_str().unwrap(), "{name}");
            let got = stream(
                backend.as_ref(),
                m.as_ref(),
                c["batches"].as_array().unwrap(),
            );
            let want = c["result"].as_f64().unwrap();
            if !close(got as f64, want) {
                failures.push(format!("{bname}: {name}: got {got}, Keras {want}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn loss_names_are_keras_names() {
    let r = reference();
    for c in r["losses"].as_array().unwrap() {
        let class = c["loss"].as_str().unwrap();
        let keras = match class {
            "MeanSquaredError" => "mean_squared_error",
            "MeanAbsoluteError" => "mean_absolute_error",
            "Huber" => "huber_loss",
            "MeanAbsolutePercentageError" => "mean_absolute_percentage_error",
            "MeanSquaredLogarithmicError" => "mean_squared_logarithmic_error",
            "LogCosh" => "log_cosh",
            "CosineSimilarity" => "cosine_similarity",
            "KLDivergence" => "kl_divergence",
            "Poisson" => "poisson",
            "Hinge" => "hinge",
            "SquaredHinge" => "squared_hinge",
            "CategoricalHinge" => "categorical_hinge",
            "BinaryCrossentropy" => "binary_crossentropy",
            "CategoricalCrossentropy" => "categorical_crossentropy",
            "SparseCategoricalCrossentropy" => "sparse_categorical_crossentropy",
            "BinaryFocalCrossentropy" => "binary_focal_crossentropy",
            "CategoricalFocalCrossentropy" => "categorical_focal_crossentropy",
            "Dice" => "dice",
            "Tversky" => "tversky",
            c => panic!("{c}"),
        };
        assert_eq!(make_loss(class, &c["args"]).name(), keras);
    }
}

/// Random f64 tensor with entries in `[lo, hi)`.
fn rand(dims: &[usize], lo: f64, hi: f64, seed: u64) -> Tensor {
    let mut r = Rng::new(seed);
    let n: usize = dims.iter().product();
    Tensor::from_vec(
        dims,
        (0..n)
            .map(|_| lo + (hi - lo) * r.next_f64())
            .collect::<Vec<f64>>(),
    )
    .unwrap()
}

/// 0/1 f64 targets.
fn bits(dims: &[usize], seed: u64) -> Tensor {
    let t = rand(dims, 0.0, 1.0, seed);
    Tensor::F64(t.array::<f64>().unwrap().mapv(|v| v.round()))
}

/// One-hot f64 targets over the last axis.
fn one_hot(batch: usize, classes: usize, seed: u64) -> Tensor {
    let mut r = Rng::new(seed);
    let mut v = vec![0.0f64; batch * classes];
    for i in 0..batch {
        v[i * classes + (r.next_f64() * classes as f64) as usize % classes] = 1.0;
    }
    Tensor::from_vec(&[batch, classes], v).unwrap()
}

/// Every loss's per-sample value is differentiable in the predictions (the gradient the
/// train step takes) by the numeric check, away from the kinks of clips and maxima.
#[test]
fn every_loss_passes_gradcheck_in_its_predictions() {
    let json = |s: &str| serde_json::from_str::<Json>(s).unwrap();
    let reg = || rand(&[3, 4], -1.5, 1.5, 1);
    let pos = || rand(&[3, 4], 0.2, 2.5, 2);
    let prob = || rand(&[3, 4], 0.05, 0.95, 3);
    let cases: Vec<(&str, &str, Tensor, Tensor)> = vec![
        (
            "MeanAbsolutePercentageError",
            "{}",
            reg(),
            rand(&[3, 4], -1.5, 1.5, 4),
        ),
        (
            "MeanSquaredLogarithmicError",
            "{}",
            pos(),
            rand(&[3, 4], 0.2, 2.5, 5),
        ),
        ("LogCosh", "{}", reg(), rand(&[3, 4], -3.0, 3.0, 6)),
        (
            "Poisson",
            "{}",
            rand(&[3, 4], 0.0, 4.0, 7)
                .array::<f64>()
                .map(|a| Tensor::F64(a.mapv(f64::round)))
                .unwrap(),
            pos(),
        ),
        ("CosineSimilarity", "{}", reg(), rand(&[3, 4], -1.5, 1.5, 8)),
        (
            "CosineSimilarity",
            r#"{"axis": 0}"#,
            reg(),
            rand(&[3, 4], -1.5, 1.5, 9),
        ),
        ("SquaredHinge", "{}", bits(&[3, 4], 10), reg()),
        ("CategoricalHinge", "{}", one_hot(3, 4, 11), reg()),
        (
            "BinaryCrossentropy",
            r#"{"label_smoothing": 0.2}"#,
            bits(&[3, 4], 12),
            prob(),
        ),
        (
            "BinaryCrossentropy",
            r#"{"from_logits": true, "label_smoothing": 0.2}"#,
            bits(&[3, 4], 13),
            reg(),
        ),
        ("BinaryFocalCrossentropy", "{}", bits(&[3, 4], 14), prob()),
        (
            "BinaryFocalCrossentropy",
            r#"{"apply_class_balancing": true, "alpha": 0.3, "gamma": 1.5, "from_logits": true, "label_smoothing": 0.1}"#,
            bits(&[3, 4], 15),
            reg(),
        ),
        (
            "CategoricalFocalCrossentropy",
            "{}",
            one_hot(3, 4, 16),
            prob(),
        ),
        (
            "CategoricalFocalCrossentropy",
            r#"{"from_logits": true, "label_smoothing": 0.1}"#,
            one_hot(3, 4, 17),
            reg(),
        ),
        ("Dice", "{}", bits(&[3, 4], 18), prob()),
        ("Dice", r#"{"axis": [1]}"#, bits(&[3, 4], 19), prob()),
        (
            "Tversky",
            r#"{"alpha": 0.3, "beta": 0.7}"#,
            bits(&[3, 4], 20),
            prob(),
        ),
        ("Tversky", r#"{"axis": [-1]}"#, bits(&[3, 4], 21), prob()),
    ];
    let mut failures = Vec::new();
    for (class, args, y, p) in cases {
        let loss = make_loss(class, &json(args));
        let res =
            GradCheck::default().run(&[y, p], &[1], |g, v| loss.per_sample(g, v[0], v[1], None));
        if let Err(e) = res {
            failures.push(format!("{class} {args}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn f32t(dims: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(dims, v.to_vec()).unwrap()
}
fn ty(dims: &[usize]) -> TensorType {
    TensorType::new(DType::F32, dims.to_vec())
}

#[track_caller]
fn invalid(e: Error, loss: &str, says: &[&str]) {
    let s = e.to_string();
    assert!(
        matches!(&e, Error::InvalidArgument { what, .. } if what == loss),
        "expected an invalid-argument error naming {loss}, got {s}"
    );
    for w in says {
        assert!(s.contains(w), "{s:?} does not say {w:?}");
    }
}

#[test]
fn negative_gamma_is_a_typed_error() {
    let l = loss::BinaryFocalCrossentropy {
        gamma: -1.0,
        ..Default::default()
    };
    invalid(
        l.validate().unwrap_err(),
        "binary_focal_crossentropy",
        &["gamma", "-1"],
    );
    let l = loss::CategoricalFocalCrossentropy {
        gamma: f32::NAN,
        ..Default::default()
    };
    invalid(
        l.check(&ty(&[2, 3]), &ty(&[2, 3])).unwrap_err(),
        "categorical_focal_crossentropy",
        &["gamma"],
    );
}

#[test]
fn alpha_outside_the_unit_interval_is_a_typed_error() {
    let l = loss::BinaryFocalCrossentropy {
        alpha: 1.5,
        apply_class_balancing: true,
        ..Default::default()
    };
    invalid(
        l.validate().unwrap_err(),
        "binary_focal_crossentropy",
        &["alpha", "[0, 1]", "1.5"],
    );
    let l = loss::CategoricalFocalCrossentropy {
        alpha: -0.1,
        ..Default::default()
    };
    invalid(
        l.validate().unwrap_err(),
        "categorical_focal_crossentropy",
        &["alpha"],
    );
    let l = loss::Tversky {
        beta: -1.0,
        ..Default::default()
    };
    invalid(l.validate().unwrap_err(), "tversky", &["beta"]);
}

#[test]
fn label_smoothing_outside_the_unit_interval_is_a_typed_error() {
    for (l, name) in [
        (
            Box::new(loss::BinaryCrossentropy {
                label_smoothing: 1.5,
                ..Default::default()
            }) as Box<dyn Loss>,
            "binary_crossentropy",
        ),
        (
            Box::new(loss::CategoricalCrossentropy {
                label_smoothing: -0.5,
                ..Default::default()
            }),
            "categorical_crossentropy",
        ),
        (
            Box::new(loss::BinaryFocalCrossentropy {
                label_smoothing: 2.0,
                ..Default::default()
            }),
            "binary_focal_crossentropy",
        ),
    ] {
        invalid(
            l.validate().unwrap_err(),
            name,
            &["label_smoothing", "[0, 1]"],
        );
        // Building the graph (a metric's first use) reports it too.
        let mut g = Graph::new("g");
        let y = g.parameter(ty(&[2, 3]));
        let p = g.parameter(ty(&[2, 3]));
        invalid(
            l.per_sample(&mut g, y, p, None).unwrap_err(),
            name,
            &["label_smoothing"],
        );
    }
    // The metric, at its first update.
    let m = metrics::BinaryCrossentropy {
        label_smoothing: -1.0,
        ..Default::default()
    };
    let mut g = Graph::new("g");
    let s: Vec<_> = (0..2).map(|_| g.parameter(ty(&[]))).collect();
    let (y, p, w) = (
        g.parameter(ty(&[2, 3])),
        g.parameter(ty(&[2, 3])),
        g.parameter(ty(&[2])),
    );
    invalid(
        m.update(&mut g, &s, y, p, w).unwrap_err(),
        "binary_crossentropy",
        &["label_smoothing"],
    );
}

#[test]
fn an_axis_out_of_range_is_a_typed_error() {
    let l = loss::CosineSimilarity { axis: 2 };
    invalid(
        l.check(&ty(&[4, 3]), &ty(&[4, 3])).unwrap_err(),
        "cosine_similarity",
        &["axis 2", "rank 2"],
    );
    let l = loss::CosineSimilarity { axis: -3 };
    assert!(l.check(&ty(&[4, 3]), &ty(&[4, 3])).is_err());
    let l = loss::Dice {
        axis: Some(vec![1, 5]),
    };
    invalid(
        l.check(&ty(&[4, 3]), &ty(&[4, 3])).unwrap_err(),
        "dice",
        &["axis 5"],
    );
    let l = loss::Tversky {
        axis: Some(vec![1, -1]),
        ..Default::default()
    };
    invalid(
        l.check(&ty(&[4, 3]), &ty(&[4, 3])).unwrap_err(),
        "tversky",
        &["twice"],
    );
    let m = metrics::CosineSimilarity { axis: 3 };
    let mut g = Graph::new("g");
    let s: Vec<_> = (0..2).map(|_| g.parameter(ty(&[]))).collect();
    let (y, p, w) = (
        g.parameter(ty(&[2, 3])),
        g.parameter(ty(&[2, 3])),
        g.parameter(ty(&[2])),
    );
    invalid(
        m.update(&mut g, &s, y, p, w).unwrap_err(),
        "cosine_similarity",
        &["axis 3"],
    );
}

#[test]
fn overlap_targets_outside_the_unit_interval_are_a_typed_error() {
    let y = f32t(&[2, 2], &[0.0, 1.0, 1.5, 0.0]);
    for (l, name) in [
        (Box::new(loss::Dice::default()) as Box<dyn Loss>, "dice"),
        (Box::new(loss::Tversky::default()), "tversky"),
    ] {
        invalid(
            l.check_values(&y, &[2, 2]).unwrap_err(),
            name,
            &["target 1.5 at position 2", "[0, 1]"],
        );
        assert!(l.check_values(&f32t(&[2], &[0.0, 0.25]), &[2]).is_ok());
    }
}

#[test]
fn shapes_that_do_not_fit_are_a_typed_error() {
    let l = loss::CategoricalHinge;
    let mut g = Graph::new("g");
    let y = g.parameter(ty(&[2, 3]));
    let p = g.parameter(ty(&[2, 4]));
    invalid(
        l.per_sample(&mut g, y, p, None).unwrap_err(),
        "categorical_hinge",
        &["f32[2, 3]", "f32[2, 4]"],
    );
}

/// Scalar (rank-0) predictions have no class axis: losses that need one say so, and none
/// panics.
#[test]
fn scalar_predictions_never_panic() {
    let classes = [
        "MeanSquaredError",
        "MeanAbsoluteError",
        "Huber",
        "MeanAbsolutePercentageError",
        "MeanSquaredLogarithmicError",
        "LogCosh",
        "CosineSimilarity",
        "KLDivergence",
        "Poisson",
        "Hinge",
        "SquaredHinge",
        "CategoricalHinge",
        "BinaryCrossentropy",
        "CategoricalCrossentropy",
        "SparseCategoricalCrossentropy",
        "BinaryFocalCrossentropy",
        "CategoricalFocalCrossentropy",
        "Dice",
        "Tversky",
    ];
    let needs_axis = [
        "CosineSimilarity",
        "KLDivergence",
        "CategoricalHinge",
        "CategoricalCrossentropy",
        "SparseCategoricalCrossentropy",
        "CategoricalFocalCrossentropy",
    ];
    for class in classes {
        let l = make_loss(class, &Json::Null);
        let mut g = Graph::new("g");
        let y = g.parameter(TensorType::new(l.target_dtype(), Vec::<usize>::new()));
        let p = g.parameter(ty(&[]));
        let r = l.per_sample(&mut g, y, p, None);
        if needs_axis.contains(&class) {
            let e = r.expect_err(class);
            assert!(e.to_string().contains(l.name()), "{class}: {e}");
        }
    }
}

/// A bad argument is reported by `compile`, before any data is seen.
#[test]
fn compile_rejects_bad_loss_arguments() {
    use strata_runtime::nn::{Activation, Dense, Sequential};
    use strata_runtime::optim::SGD;
    use strata_runtime::Model;
    let mut m = Model::new(Sequential::new(
        Some(vec![2]),
        vec![Box::new(Dense::new("dense", 1, Activation::Sigmoid))],
    ));
    let e = m
        .compile(
            SGD::new(0.1),
            loss::BinaryFocalCrossentropy {
                gamma: -2.0,
                ..Default::default()
            },
            (),
        )
        .unwrap_err();
    invalid(e, "binary_focal_crossentropy", &["gamma"]);
}

/// The new losses train: a few steps of `fit` lower each one on a small problem.
#[test]
fn new_losses_lower_in_training() {
    use ndarray::Array2;
    use strata_runtime::nn::{Activation, Dense, Sequential};
    use strata_runtime::optim::Adam;
    use strata_runtime::train::Fit;
    use strata_runtime::Model;
    let x = strata_runtime::random::normal(&[64, 4], 0.0, 1.0, 7).unwrap();
    // Targets: whether each of the first two features is positive.
    let y = Array2::from_shape_fn((64, 2), |(i, j)| (x[[i, j]] > 0.0) as u8 as f32);
    let cases: Vec<(Box<dyn Loss>, Activation)> = vec![
        (
            Box::new(loss::BinaryFocalCrossentropy::default()),
            Activation::Sigmoid,
        ),
        (Box::new(loss::Dice::default()), Activation::Sigmoid),
        (
            Box::new(loss::Tversky {
                axis: Some(vec![1]),
                ..Default::default()
            }),
            Activation::Sigmoid,
        ),
        (Box::new(loss::SquaredHinge), Activation::Tanh),
        (Box::new(loss::LogCosh), Activation::Linear),
        (
            Box::new(loss::CosineSimilarity::default()),
            Activation::Linear,
        ),
    ];
    for (l, act) in cases {
        let name = l.name();
        let mut m = Model::new(Sequential::new(
            Some(vec![4]),
            vec![Box::new(Dense::new("dense", 2, act))],
        ));
        m.compile_boxed(Box::new(Adam::new(0.05)), l, Vec::new())
            .unwrap();
        let h = m
            .fit(&x, &y, Fit::epochs(8).batch_size(16).verbose(0))
            .unwrap();
        let losses = h.get("loss").unwrap();
        let (first, last) = (losses[0], *losses.last().unwrap());
        assert!(last.is_finite() && last < first, "{name}: {losses:?}");
    }
}

/// With `from_logits`, the new losses expect logits: a sigmoid (binary) or softmax
/// (categorical) output is the activation they warn about, as the existing ones do.
#[test]
fn focal_losses_with_from_logits_name_the_activation_they_do_not_expect() {
    use strata_runtime::nn::Activation;
    let b = loss::BinaryFocalCrossentropy {
        from_logits: true,
        ..Default::default()
    };
    assert_eq!(b.unexpected_output_activation(), Some(Activation::Sigmoid));
    let c = loss::CategoricalFocalCrossentropy {
        from_logits: true,
        ..Default::default()
    };
    assert_eq!(c.unexpected_output_activation(), Some(Activation::Softmax));
    assert_eq!(
        loss::BinaryFocalCrossentropy::default().unexpected_output_activation(),
        None
    );
}
