//! The IoU and threshold metrics against Keras 3: every case of
//! `tests/reference/metrics_iou.json` (written by `scripts/keras-reference/metrics_iou.py`)
//! streamed through two updates on the native backend and on XLA's CPU plugin; a small
//! fit/evaluate with `MeanIoU` and `AUC(curve PR)` through `compile`; the typed errors for
//! bad arguments and out-of-range labels.

use serde_json::Value as Json;
use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::pjrt::{PjrtBackend, PjrtOptions};
use strata_runtime::backend::{Backend, Device};
use strata_runtime::ir::{DType, Graph, TensorType};
use strata_runtime::loss::{BinaryCrossentropy, SparseCategoricalCrossentropy};
use strata_runtime::metrics::{
    AucCurve, AucSummationMethod, BinaryIoU, IoU, MeanIoU, Metric, OneHotIoU, OneHotMeanIoU,
    Precision, PrecisionAtRecall, Recall, RecallAtPrecision, SensitivityAtSpecificity,
    SpecificityAtSensitivity, AUC,
};
use strata_runtime::nn::{Activation, Dense, Sequential};
use strata_runtime::optim::Adam;
use strata_runtime::train::Fit;
use strata_runtime::{random, Error, Model, Tensor};

fn reference() -> Json {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/reference/metrics_iou.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn tensor(j: &Json) -> Tensor {
    let dims: Vec<usize> = j["dims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let vals = j["values"].as_array().unwrap();
    match j["dtype"].as_str().unwrap() {
        "float32" => Tensor::from_vec(
            &dims,
            vals.iter().map(|v| v.as_f64().unwrap() as f32).collect(),
        ),
        "int32" => Tensor::from_vec(
            &dims,
            vals.iter().map(|v| v.as_i64().unwrap() as i32).collect(),
        ),
        d => panic!("dtype {d}"),
    }
    .unwrap()
}

fn usizes(j: &Json) -> Vec<usize> {
    j.as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect()
}

fn f32s(j: &Json) -> Vec<f32> {
    j.as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect()
}

/// The Strata metric a reference case names, with its Keras arguments.
fn metric(case: &Json) -> Box<dyn Metric> {
    let a = &case["args"];
    let classes = || a["num_classes"].as_u64().unwrap() as usize;
    let ignore = || a.get("ignore_class").map(|v| v.as_i64().unwrap());
    let flag = |k: &str, d: bool| a.get(k).map_or(d, |v| v.as_bool().unwrap());
    let axis = || a.get("axis").map_or(-1, |v| v.as_i64().unwrap() as isize);
    let n = |d: usize| {
        a.get("num_thresholds")
            .map_or(d, |v| v.as_u64().unwrap() as usize)
    };
    let class_id = || a.get("class_id").map(|v| v.as_u64().unwrap() as usize);
    let value = |k: &str| a[k].as_f64().unwrap() as f32;
    match case["metric"].as_str().unwrap() {
        "IoU" => Box::new(IoU {
            ignore_class: ignore(),
            sparse_y_true: flag("sparse_y_true", true),
            sparse_y_pred: flag("sparse_y_pred", true),
            axis: axis(),
            ..IoU::new(classes(), usizes(&a["target_class_ids"]))
        }),
        "MeanIoU" => Box::new(MeanIoU {
            ignore_class: ignore(),
            sparse_y_true: flag("sparse_y_true", true),
            sparse_y_pred: flag("sparse_y_pred", true),
            axis: axis(),
            ..MeanIoU::new(classes())
        }),
        "OneHotIoU" => Box::new(OneHotIoU {
            ignore_class: ignore(),
            sparse_y_pred: flag("sparse_y_pred", false),
            axis: axis(),
            ..OneHotIoU::new(classes(), usizes(&a["target_class_ids"]))
        }),
        "OneHotMeanIoU" => Box::new(OneHotMeanIoU {
            ignore_class: ignore(),
            sparse_y_pred: flag("sparse_y_pred", false),
            axis: axis(),
            ..OneHotMeanIoU::new(classes())
        }),
        "BinaryIoU" => {
            let mut m = BinaryIoU::default();
            if let Some(ids) = a.get("target_class_ids") {
                m.target_class_ids = usizes(ids);
            }
            if let Some(t) = a.get("threshold") {
                m.threshold = t.as_f64().unwrap() as f32;
            }
            Box::new(m)
        }
        "PrecisionAtRecall" => Box::new(PrecisionAtRecall {
            num_thresholds: n(200),
            class_id: class_id(),
            ..PrecisionAtRecall::new(value("recall"))
        }),
        "RecallAtPrecision" => Box::new(RecallAtPrecision {
            num_thresholds: n(200),
            class_id: class_id(),
            ..RecallAtPrecision::new(value("precision"))
        }),
        "SensitivityAtSpecificity" => Box::new(SensitivityAtSpecificity {
            num_thresholds: n(200),
            class_id: class_id(),
            ..SensitivityAtSpecificity::new(value("specificity"))
        }),
        "SpecificityAtSensitivity" => Box::new(SpecificityAtSensitivity {
            num_thresholds: n(200),
            class_id: class_id(),
            ..SpecificityAtSensitivity::new(value("sensitivity"))
        }),
        "Precision" => Box::new(Precision {
            thresholds: a.get("thresholds").map(|v| v.as_f64().unwrap() as f32),
            top_k: a.get("top_k").map(|v| v.as_u64().unwrap() as usize),
            class_id: class_id(),
        }),
        "Recall" => Box::new(Recall {
            thresholds: a.get("thresholds").map(|v| v.as_f64().unwrap() as f32),
            top_k: a.get("top_k").map(|v| v.as_u64().unwrap() as usize),
            class_id: class_id(),
        }),
        "AUC" => Box::new(AUC {
            num_thresholds: n(200),
            curve: match a.get("curve").and_then(Json::as_str) {
                None | Some("ROC") => AucCurve::ROC,
                Some("PR") => AucCurve::PR,
                Some("PRGAIN") => AucCurve::PRGAIN,
                Some(c) => panic!("curve {c}"),
            },
            summation_method: match a.get("summation_method").and_then(Json::as_str) {
                None | Some("interpolation") => AucSummationMethod::Interpolation,
                Some("majoring") => AucSummationMethod::Majoring,
                Some("minoring") => AucSummationMethod::Minoring,
                Some(s) => panic!("summation_method {s}"),
            },
            thresholds: a.get("thresholds").map(f32s),
            multi_label: flag("multi_label", false),
            num_labels: a.get("num_labels").map(|v| v.as_u64().unwrap() as usize),
            label_weights: a.get("label_weights").map(f32s),
            from_logits: flag("from_logits", false),
        }),
        m => panic!("metric {m}"),
    }
}

/// The metric's result after streaming the case's batches through one graph on `backend`.
fn stream(backend: &dyn Backend, m: &dyn Metric, case: &Json) -> f32 {
    let mut g = Graph::new("metric");
    let zeros: Vec<Tensor> = m
        .state()
        .iter()
        .map(|d| Tensor::zeros(&TensorType::new(DType::F32, d.clone())).unwrap())
        .collect();
    let mut cur: Vec<_> = zeros.iter().map(|t| g.parameter(t.ty())).collect();
    let mut inputs = zeros;
    for b in case["batches"].as_array().unwrap() {
        let (y, p) = (tensor(&b["y_true"]), tensor(&b["y_pred"]));
        let n = y.dims()[0];
        let sw = match b["sample_weight"].as_array() {
            Some(_) => f32s(&b["sample_weight"]),
            None => vec![1.0; n],
        };
        let sw = Tensor::from_vec(&[n], sw).unwrap();
        let (yv, pv, wv) = (
            g.parameter(y.ty()),
            g.parameter(p.ty()),
            g.parameter(sw.ty()),
        );
        cur = m.update(&mut g, &cur, yv, pv, wv).unwrap();
        inputs.extend([y, p, sw]);
    }
    let r = m.result(&mut g, &cur).unwrap();
    g.set_outputs(vec![r]).unwrap();
    let out = backend.run(&g, &inputs).unwrap();
    assert_eq!(out[0].dims(), &[] as &[usize], "a scalar result");
    out[0].to_vec::<f32>().unwrap()[0]
}

fn compare_all(backend: &dyn Backend, label: &str) {
    let r = reference();
    let cases = r["cases"].as_array().unwrap();
    assert!(cases.len() >= 40);
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let m = metric(case);
        assert_eq!(m.name(), case["keras_name"].as_str().unwrap(), "{name}");
        let got = stream(backend, m.as_ref(), case) as f64;
        let want = case["result"].as_f64().unwrap();
        if (got - want).abs() > 1e-6 + 1e-5 * want.abs() {
            failures.push(format!("{name}: got {got}, Keras {want}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{label}: {} of {} cases differ from Keras:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn every_case_matches_keras_on_native() {
    compare_all(&NativeBackend::new(), "native");
}

#[test]
fn every_case_matches_keras_on_xla_cpu() {
    let xla = match PjrtBackend::with_options(
        &Device::XlaCpu { devices: Some(1) },
        PjrtOptions::default(),
    ) {
        Ok(b) => b,
        Err(e) => panic!("the XLA CPU plugin is needed for this test: {e}"),
    };
    compare_all(&xla, "xla cpu");
}

fn classifier(inputs: usize, units: usize, act: Activation) -> Model<Sequential> {
    Model::new(Sequential::new(
        Some(vec![inputs]),
        vec![
            Box::new(Dense::new("dense", 16, Activation::Relu)),
            Box::new(Dense::new("dense_1", units, act)),
        ],
    ))
}

/// Labels: the index of the largest of the first three features.
fn three_classes(n: usize, seed: u64) -> (ndarray::ArrayD<f32>, ndarray::Array1<i32>) {
    let x = random::normal(&[n, 8], 0.0, 1.0, seed).unwrap();
    let y = x
        .outer_iter()
        .map(|r| (0..3).max_by(|&a, &b| r[a].total_cmp(&r[b])).unwrap() as i32)
        .collect();
    (x, y)
}

/// The mean IoU of argmax predictions, computed here from `predict`'s output.
fn mean_iou_by_hand(p: &ndarray::ArrayD<f32>, y: &ndarray::Array1<i32>, c: usize) -> f64 {
    let mut cm = vec![vec![0f64; c]; c];
    for (row, &l) in p.outer_iter().zip(y.iter()) {
        let k = (0..c)
            .max_by(|&a, &b| row[a].total_cmp(&row[b]).then(b.cmp(&a)))
            .unwrap();
        cm[l as usize][k] += 1.0;
    }
    let ious: Vec<f64> = (0..c)
        .map(|i| {
            let d: f64 = (0..c).map(|j| cm[i][j] + cm[j][i]).sum::<f64>() - cm[i][i];
            if d > 0.0 {
                cm[i][i] / d
            } else {
                f64::NAN
            }
        })
        .filter(|v| !v.is_nan())
        .collect();
    ious.iter().sum::<f64>() / ious.len() as f64
}

#[test]
fn mean_iou_trains_and_evaluates_through_compile() {
    let (x, y) = three_classes(600, 3);
    let (xt, yt) = three_classes(200, 4);
    let mut m = classifier(8, 3, Activation::Softmax);
    let miou = MeanIoU {
        sparse_y_pred: false,
        ..MeanIoU::new(3)
    };
    m.compile(
        Adam::new(0.02),
        SparseCategoricalCrossentropy::default(),
        [miou],
    )
    .unwrap();
    let h = m
        .fit(
            &x,
            &y,
            Fit::epochs(8)
                .verbose(0)
                .validation_data(xt.clone(), yt.clone()),
        )
        .unwrap();
    let train = h.get("mean_io_u").unwrap();
    assert_eq!(train.len(), 8);
    assert!(h.get("val_mean_io_u").is_some());
    assert!(
        train[7] > train[0] && train[7] > 0.6,
        "mean IoU should grow as the model learns: {train:?}"
    );
    let logs = m.evaluate(&xt, &yt).unwrap();
    let got = logs.get("mean_io_u").unwrap();
    let p = m.predict(&xt).unwrap();
    let want = mean_iou_by_hand(p.array::<f32>().unwrap(), &yt, 3);
    assert!(
        (got - want).abs() < 1e-5,
        "evaluate {got} vs by hand {want}"
    );
}

#[test]
fn pr_auc_through_compile() {
    let x = random::normal(&[400, 4], 0.0, 1.0, 7).unwrap();
    let y: Vec<f32> = x
        .outer_iter()
        .map(|r| if r[0] + 0.5 * r[1] > 0.0 { 1.0 } else { 0.0 })
        .collect();
    let y = Tensor::from_vec(&[400, 1], y).unwrap();
    let mut m = classifier(4, 1, Activation::Sigmoid);
    let pr = AUC {
        curve: AucCurve::PR,
        ..AUC::default()
    };
    m.compile(Adam::new(0.02), BinaryCrossentropy::default(), [pr])
        .unwrap();
    let h = m.fit(&x, &y, Fit::epochs(6).verbose(0)).unwrap();
    let auc = h.get("auc").unwrap();
    assert!(auc[5] > 0.9, "PR AUC of a separable problem: {auc:?}");
    let logs = m.evaluate(&x, &y).unwrap();
    let e = logs.get("auc").unwrap();
    assert!(e > 0.9 && e <= 1.0, "{e}");
}

#[track_caller]
fn invalid(e: Error, metric: &str, needle: &str) {
    let s = e.to_string();
    assert!(
        matches!(e, Error::InvalidArgument { .. }) && s.contains(metric) && s.contains(needle),
        "expected an invalid-argument error naming {metric} and saying {needle:?}, got {s}"
    );
}

/// Streams one batch through `m`, returning the error from building its update.
fn update_err(m: &dyn Metric, y: Tensor, p: Tensor) -> Error {
    let mut g = Graph::new("metric");
    let state: Vec<_> = m
        .state()
        .iter()
        .map(|d| g.parameter(TensorType::new(DType::F32, d.clone())))
        .collect();
    let n = y.dims()[0];
    let yv = g.parameter(y.ty());
    let pv = g.parameter(p.ty());
    let wv = g.parameter(TensorType::new(DType::F32, [n]));
    m.update(&mut g, &state, yv, pv, wv).unwrap_err()
}

#[test]
fn bad_arguments_are_typed_errors_naming_the_metric() {
    let y = Tensor::from_vec(&[4], vec![0i32, 1, 1, 0]).unwrap();
    let p = Tensor::from_vec(&[4, 1], vec![0.2f32, 0.8, 0.6, 0.1]).unwrap();
    let yf = Tensor::from_vec(&[4, 1], vec![0f32, 1.0, 1.0, 0.0]).unwrap();
    invalid(
        update_err(&MeanIoU::new(0), y.clone(), p.clone()),
        "mean_io_u",
        "num_classes",
    );
    invalid(
        update_err(&IoU::new(3, vec![3]), y.clone(), p.clone()),
        "io_u",
        "target class id 3",
    );
    invalid(
        update_err(&IoU::new(3, vec![]), y.clone(), p.clone()),
        "io_u",
        "target_class_ids",
    );
    invalid(
        update_err(
            &BinaryIoU {
                target_class_ids: vec![2],
                ..BinaryIoU::default()
            },
            y.clone(),
            p.clone(),
        ),
        "binary_io_u",
        "out of range",
    );
    // A class axis the tensor does not have.
    invalid(
        update_err(
            &OneHotMeanIoU {
                axis: 3,
                ..OneHotMeanIoU::new(2)
            },
            yf.clone(),
            p.clone(),
        ),
        "one_hot_mean_io_u",
        "axis 3",
    );
    invalid(
        update_err(&PrecisionAtRecall::new(1.5), yf.clone(), p.clone()),
        "precision_at_recall",
        "recall must be in [0, 1], got 1.5",
    );
    invalid(
        update_err(&RecallAtPrecision::new(-0.1), yf.clone(), p.clone()),
        "recall_at_precision",
        "precision must be in [0, 1]",
    );
    invalid(
        update_err(
            &SensitivityAtSpecificity::new(f32::NAN),
            yf.clone(),
            p.clone(),
        ),
        "sensitivity_at_specificity",
        "specificity must be in [0, 1]",
    );
    invalid(
        update_err(
            &SpecificityAtSensitivity {
                num_thresholds: 0,
                ..SpecificityAtSensitivity::new(0.5)
            },
            yf.clone(),
            p.clone(),
        ),
        "specificity_at_sensitivity",
        "num_thresholds must be > 0",
    );
    invalid(
        update_err(
            &PrecisionAtRecall {
                class_id: Some(1),
                ..PrecisionAtRecall::new(0.5)
            },
            yf.clone(),
            p.clone(),
        ),
        "precision_at_recall",
        "class_id 1",
    );
    let auc = |f: fn(&mut AUC)| {
        let mut a = AUC::default();
        f(&mut a);
        a
    };
    invalid(
        update_err(&auc(|a| a.num_thresholds = 1), yf.clone(), p.clone()),
        "auc",
        "num_thresholds must be > 1, got 1",
    );
    invalid(
        update_err(&auc(|a| a.multi_label = true), yf.clone(), p.clone()),
        "auc",
        "num_labels",
    );
    invalid(
        update_err(&auc(|a| a.num_labels = Some(2)), yf.clone(), p.clone()),
        "auc",
        "only when multi_label",
    );
    invalid(
        update_err(
            &auc(|a| {
                a.multi_label = true;
                a.num_labels = Some(2);
            }),
            yf.clone(),
            p.clone(),
        ),
        "auc",
        "multi_label with num_labels 2",
    );
    invalid(
        update_err(
            &auc(|a| a.label_weights = Some(vec![1.0, 2.0])),
            yf.clone(),
            p.clone(),
        ),
        "auc",
        "label_weights has 2 entries",
    );
    invalid(
        update_err(
            &Precision {
                thresholds: Some(1.5),
                ..Precision::default()
            },
            yf.clone(),
            p.clone(),
        ),
        "precision",
        "thresholds must be in [0, 1], got 1.5",
    );
    invalid(
        update_err(
            &Recall {
                top_k: Some(0),
                ..Recall::default()
            },
            yf.clone(),
            p.clone(),
        ),
        "recall",
        "top_k must be >= 1",
    );
    // Class scores against MeanIoU's default sparse predictions: a hint, not a wrong count.
    invalid(
        update_err(
            &MeanIoU::new(2),
            y.clone(),
            Tensor::from_vec(&[4, 2], vec![0.5f32; 8]).unwrap(),
        ),
        "mean_io_u",
        "set sparse_y_pred to false",
    );
    // Invalid arguments never size the state from themselves.
    assert_eq!(MeanIoU::new(usize::MAX).state(), vec![vec![0, 0]]);
}

#[test]
fn a_label_out_of_range_is_a_typed_error_from_fit_and_evaluate() {
    let (x, mut y) = three_classes(64, 5);
    let mut m = classifier(8, 3, Activation::Softmax);
    // The loss accepts labels up to 2 (three outputs); the metric is told two classes.
    m.compile(
        Adam::new(0.01),
        SparseCategoricalCrossentropy::default(),
        [MeanIoU {
            sparse_y_pred: false,
            ..MeanIoU::new(2)
        }],
    )
    .unwrap();
    let pos = y.iter().position(|&v| v == 2).unwrap();
    let e = m.evaluate(&x, &y).unwrap_err();
    invalid(e, "mean_io_u", &format!("label 2 at position {pos}"));
    let e = m.fit(&x, &y, Fit::epochs(1).verbose(0)).unwrap_err();
    invalid(e, "mean_io_u", "label 2");
    // ignore_class makes that label fine; one above it still is not.
    let mut m = classifier(8, 3, Activation::Softmax);
    m.compile(
        Adam::new(0.01),
        SparseCategoricalCrossentropy::default(),
        [MeanIoU {
            sparse_y_pred: false,
            ignore_class: Some(2),
            ..MeanIoU::new(2)
        }],
    )
    .unwrap();
    m.evaluate(&x, &y).unwrap();
    // Validation data is checked too: training labels in range, validation ones not.
    let mut m = classifier(8, 3, Activation::Softmax);
    m.compile(
        Adam::new(0.01),
        SparseCategoricalCrossentropy::default(),
        [MeanIoU {
            sparse_y_pred: false,
            ..MeanIoU::new(2)
        }],
    )
    .unwrap();
    let y_ok = y.mapv(|v| v.min(1));
    m.fit(&x, &y_ok, Fit::epochs(1).verbose(0)).unwrap();
    invalid(
        m.fit(
            &x,
            &y_ok,
            Fit::epochs(1)
                .verbose(0)
                .validation_data(x.clone(), y.clone()),
        )
        .unwrap_err(),
        "mean_io_u",
        &format!("label 2 at position {pos}"),
    );
    // A negative label that is not ignore_class, straight into the metric's check.
    y[0] = -1;
    let e = MeanIoU::new(3)
        .check_values(&Tensor::from(y), &[64, 3])
        .unwrap_err();
    invalid(e, "mean_io_u", "label -1 at position 0");
}

#[test]
fn one_hot_targets_wider_than_num_classes_are_checked() {
    // One-hot targets of three classes against a two-class metric: the argmax 2 has no row.
    let y = Tensor::from_vec(&[2, 3], vec![1f32, 0.0, 0.0, 0.0, 0.0, 1.0]).unwrap();
    let e = OneHotMeanIoU::new(2).check_values(&y, &[2, 3]).unwrap_err();
    invalid(e, "one_hot_mean_io_u", "label 2 at position 1");
    let y = Tensor::from_vec(&[2, 3], vec![1f32, 0.0, 0.0, 0.0, 1.0, 0.0]).unwrap();
    OneHotMeanIoU::new(2).check_values(&y, &[2, 3]).unwrap();
}
