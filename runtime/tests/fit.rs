//! `fit` / `evaluate` / `predict`: learning a synthetic problem to a stated accuracy, the
//! exact arithmetic of a step, Keras' semantics of validation_split, class_weight and the
//! partial last batch, steps_per_execution, and a typed error for every bad input.

use ndarray::{array, Array1, Array2};
use std::collections::HashMap;
use strata_runtime::loss::{MeanSquaredError, SparseCategoricalCrossentropy};
use strata_runtime::metrics::Accuracy;
use strata_runtime::nn::{Activation, Dense, Initializer, Sequential};
use strata_runtime::optim::{Adam, SGD};
use strata_runtime::train::Fit;
use strata_runtime::Model;
use strata_runtime::{random, Error, Tensor};

fn mlp(inputs: usize, classes: usize) -> Model<Sequential> {
    Model::new(Sequential::new(
        Some(vec![inputs]),
        vec![
            Box::new(Dense::new("dense", 32, Activation::Relu)),
            Box::new(Dense::new("dense_1", classes, Activation::Softmax)),
        ],
    ))
}

/// Labels: the index of the largest of the first three features.
fn problem(n: usize, seed: u64) -> (ndarray::ArrayD<f32>, Array1<i32>) {
    let x = random::normal(&[n, 20], 0.0, 1.0, seed).unwrap();
    let y = x
        .outer_iter()
        .map(|r| (0..3).max_by(|&a, &b| r[a].total_cmp(&r[b])).unwrap() as i32)
        .collect();
    (x, y)
}

#[test]
fn learns_a_synthetic_problem_to_95_percent() {
    let (x, y) = problem(2000, 1);
    let (xt, yt) = problem(500, 2);
    let mut m = mlp(20, 3);
    m.compile(
        Adam::new(0.01),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    let h = m.fit(&x, &y, Fit::epochs(15).verbose(0)).unwrap();
    assert_eq!(h.get("loss").unwrap().len(), 15);
    let logs = m.evaluate(&xt, &yt).unwrap();
    assert!(
        logs.get("accuracy").unwrap() >= 0.95,
        "test accuracy {logs}"
    );
    // predict agrees with evaluate's accuracy.
    let p = m.predict(&xt).unwrap();
    let p = p.array::<f32>().unwrap();
    assert_eq!(p.shape(), &[500, 3]);
    let hits = p
        .outer_iter()
        .zip(yt.iter())
        .filter(|(r, &l)| (0..3).max_by(|&a, &b| r[a].total_cmp(&r[b])).unwrap() as i32 == l)
        .count();
    assert!((hits as f64 / 500.0 - logs.get("accuracy").unwrap()).abs() < 1e-6);
}

/// A linear model `y = x·w + b` with known starting weights.
fn linear() -> Model<Sequential> {
    let mut d = Dense::new("dense", 1, Activation::Linear);
    d.kernel_initializer = Initializer::Zeros;
    let mut m = Model::new(Sequential::new(Some(vec![2]), vec![Box::new(d)]));
    m.set_weights(&[(
        "dense/kernel".into(),
        Tensor::from_vec(&[2, 1], vec![0.5f32, -1.0]).unwrap(),
    )])
    .unwrap();
    m
}

fn weights(m: &Model<Sequential>) -> Vec<f32> {
    m.weights()
        .iter()
        .flat_map(|(_, t)| t.to_vec::<f32>().unwrap())
        .collect()
}

#[test]
fn one_sgd_step_by_hand() {
    let x: Array2<f32> = array![[1.0, 2.0], [3.0, -1.0], [0.0, 1.0], [2.0, 2.0]];
    let y: Array2<f32> = array![[1.0], [0.0], [-1.0], [2.0]];
    let sw = vec![1.0f32, 2.0, 1.0, 0.5];
    let mut m = linear();
    m.compile(SGD::new(0.1), MeanSquaredError, ()).unwrap();
    let h = m
        .fit(
            &x,
            &y,
            Fit::epochs(1)
                .batch_size(4)
                .shuffle(false)
                .sample_weight(sw.clone())
                .verbose(0),
        )
        .unwrap();
    // By hand: residual r = x·w + b - y; loss = Σ sw r² / 4; dL/dw = Σ 2 sw r x / 4.
    let w = [0.5f64, -1.0];
    let mut gw = [0.0f64; 2];
    let mut gb = 0.0;
    let mut loss = 0.0;
    for i in 0..4 {
        let r = x[[i, 0]] as f64 * w[0] + x[[i, 1]] as f64 * w[1] - y[[i, 0]] as f64;
        loss += sw[i] as f64 * r * r / 4.0;
        for j in 0..2 {
            gw[j] += 2.0 * sw[i] as f64 * r * x[[i, j]] as f64 / 4.0;
        }
        gb += 2.0 * sw[i] as f64 * r / 4.0;
    }
    let want = [w[0] - 0.1 * gw[0], w[1] - 0.1 * gw[1], -0.1 * gb];
    let got = weights(&m);
    for (g, w) in got.iter().zip(want) {
        assert!((*g as f64 - w).abs() < 1e-6, "{got:?} vs {want:?}");
    }
    assert!((h.get("loss").unwrap()[0] - loss).abs() < 1e-5);
    assert_eq!(m.iterations(), 1);
}

#[test]
fn partial_last_batch_counts_with_its_true_size() {
    let (x, y) = problem(10, 3);
    let mut m = mlp(20, 3);
    m.compile(SGD::new(0.0), SparseCategoricalCrossentropy::default(), ())
        .unwrap();
    let h = m
        .fit(&x, &y, Fit::epochs(1).batch_size(4).verbose(0))
        .unwrap();
    assert_eq!(
        m.iterations(),
        3,
        "4 + 4 + 2 rows: three steps, nothing dropped"
    );
    // With a learning rate of 0 the weights never move, so the epoch's loss is the mean
    // over all ten samples, which evaluate computes too.
    let e = m.evaluate(&x, &y).unwrap();
    assert!((h.get("loss").unwrap()[0] - e.get("loss").unwrap()).abs() < 1e-6);
}

#[test]
fn validation_split_holds_out_the_last_samples() {
    let (x, y) = problem(100, 4);
    let mut m = mlp(20, 3);
    m.compile(
        Adam::default(),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    let h = m
        .fit(&x, &y, Fit::epochs(2).validation_split(0.2).verbose(0))
        .unwrap();
    // 80 training samples at batch 32: 3 steps per epoch.
    assert_eq!(m.iterations(), 6);
    let xv = x.slice(ndarray::s![80.., ..]).to_owned();
    let yv = y.slice(ndarray::s![80..]).to_owned();
    let e = m.evaluate(&xv, &yv).unwrap();
    assert!(
        (h.get("val_loss").unwrap()[1] - e.get("loss").unwrap()).abs() < 1e-6,
        "{:?} {e}",
        h.history
    );
    assert!((h.get("val_accuracy").unwrap()[1] - e.get("accuracy").unwrap()).abs() < 1e-6);
}

#[test]
fn class_weight_is_a_per_label_sample_weight() {
    let (x, y) = problem(64, 5);
    let cw: HashMap<i64, f32> = [(0, 3.0), (2, 0.5)].into_iter().collect();
    let sw: Vec<f32> = y
        .iter()
        .map(|&l| *cw.get(&(l as i64)).unwrap_or(&1.0))
        .collect();
    let mut a = mlp(20, 3);
    a.compile(SGD::new(0.1), SparseCategoricalCrossentropy::default(), ())
        .unwrap();
    a.fit(&x, &y, Fit::epochs(2).class_weight(cw).verbose(0))
        .unwrap();
    let mut b = mlp(20, 3);
    b.compile(SGD::new(0.1), SparseCategoricalCrossentropy::default(), ())
        .unwrap();
    b.fit(&x, &y, Fit::epochs(2).sample_weight(sw).verbose(0))
        .unwrap();
    assert_eq!(a.weights(), b.weights());
}

/// `m` compiled with Adam, sparse categorical cross-entropy and accuracy, fitted on `x`,
/// `y` as `fit` says with `k` steps per execution: its weights, history and iterations.
fn fit_k<A: strata_runtime::nn::Architecture>(
    mut m: Model<A>,
    (x, y): (&ndarray::ArrayD<f32>, &Array1<i32>),
    fit: Fit,
    k: usize,
) -> (Vec<(String, Tensor)>, strata_runtime::train::History, u64) {
    m.compile(
        Adam::default(),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    m.set_steps_per_execution(k).unwrap();
    let h = m.fit(x, y, fit.verbose(0)).unwrap();
    (m.weights(), h, m.iterations())
}

#[test]
fn steps_per_execution_does_not_change_the_result() {
    let (x, y) = problem(40, 6);
    let run = |k| fit_k(mlp(20, 3), (&x, &y), Fit::epochs(2).batch_size(4), k);
    let (w1, h1, i1) = run(1);
    let (w8, h8, i8) = run(8);
    assert_eq!(i1, 20);
    assert_eq!(i8, 20);
    assert_eq!(w1, w8, "weights differ between steps_per_execution 1 and 8");
    assert_eq!(h1, h8);
}

/// A loop of steps carries what each step changes besides the weights: the dropout key
/// (each step draws its own masks), batch normalization's moving statistics, and a
/// recurrent layer's own scan runs inside the loop's body. Natively the same bits as one
/// step per call, the partial group and the partial last batch included.
#[test]
fn steps_per_execution_carries_dropout_keys_batch_norm_and_inner_scans() {
    use strata_runtime::nn::{BatchNormalization, Dropout, Reshape, LSTM};
    let (x, y) = problem(50, 9);
    let model = || {
        Model::new(Sequential::new(
            Some(vec![20]),
            vec![
                Box::new(Reshape::new("reshape", vec![5, 4])),
                Box::new(LSTM::new("lstm", 6)),
                Box::new(BatchNormalization::new("batch_normalization")),
                Box::new(Dropout::new("dropout", 0.5)),
                Box::new(Dense::new("dense", 3, Activation::Softmax)),
            ],
        ))
    };
    // 50 samples, 5 held out for validation: 11 batches of 4 and one of 1 per epoch, in
    // calls of 3, 3, 3, 2 and 1 steps for k = 3 (validation: a batch of 4, one of 1).
    let fit = || Fit::epochs(2).batch_size(4).validation_split(0.1);
    let (w1, h1, i1) = fit_k(model(), (&x, &y), fit(), 1);
    let (w3, h3, i3) = fit_k(model(), (&x, &y), fit(), 3);
    assert_eq!((i1, i3), (24, 24));
    assert_eq!(w1, w3, "weights differ between steps_per_execution 1 and 3");
    assert_eq!(h1, h3);
}

/// `evaluate` and `predict` run `steps_per_execution` batches per call as well: groups of
/// 3 batches of 4, a group of 2 and the partial last batch alone give the results of one
/// batch per call (natively the same bits, on XLA CPU within rounding).
#[test]
fn steps_per_execution_evaluates_and_predicts_as_batch_by_batch() {
    let (x, y) = problem(45, 8);
    for device in [
        strata_runtime::backend::Device::Native,
        strata_runtime::backend::Device::XlaCpu { devices: None },
    ] {
        let mut m = mlp(20, 3);
        m.set_device(device).unwrap();
        m.compile(
            Adam::default(),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )
        .unwrap();
        m.fit(&x, &y, Fit::epochs(1).batch_size(8).verbose(0))
            .unwrap();
        let one = (
            m.evaluate_batched(&x, &y, 4).unwrap(),
            m.predict_batched(&x, 4).unwrap(),
        );
        m.set_steps_per_execution(3).unwrap();
        assert_eq!(m.steps_per_execution(), 3);
        let three = (
            m.evaluate_batched(&x, &y, 4).unwrap(),
            m.predict_batched(&x, 4).unwrap(),
        );
        assert_eq!(three.1.dims(), &[45, 3]);
        if device == strata_runtime::backend::Device::Native {
            assert_eq!(one, three);
        } else {
            for key in ["loss", "accuracy"] {
                let (a, b) = (one.0.get(key).unwrap(), three.0.get(key).unwrap());
                assert!(
                    (a - b).abs() <= 1e-6 * a.abs().max(1.0),
                    "{key}: {a} vs {b}"
                );
            }
            let (a, b) = (
                one.1.to_vec::<f32>().unwrap(),
                three.1.to_vec::<f32>().unwrap(),
            );
            let diff = a
                .iter()
                .zip(&b)
                .fold(0f32, |d, (p, q)| d.max((p - q).abs()));
            assert!(diff <= 1e-6, "predictions differ by {diff}");
        }
    }
}

#[test]
fn a_non_finite_loss_stops_training_and_keeps_the_last_good_weights() {
    let (mut x, y) = problem(8, 7);
    x[[5, 3]] = f32::NAN; // in the third batch of two
    let mut m = mlp(20, 3);
    m.compile(SGD::new(0.1), SparseCategoricalCrossentropy::default(), ())
        .unwrap();
    let e = m
        .fit(
            &x,
            &y,
            Fit::epochs(1).batch_size(2).shuffle(false).verbose(0),
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::NonFiniteStep {
                epoch: 0,
                batch: 2,
                step: 3,
                cause: strata_runtime::NonFiniteCause::Loss,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("kept"), "{e}");
    // The loss reported is the bad step's, though the host read the logs after later
    // steps had run (as no-ops): no callback asked for every call.
    assert!(
        matches!(e, Error::NonFiniteStep { value: Some(v), .. } if v.is_nan()),
        "{e}"
    );
    // The same two good steps alone give the same weights.
    let mut r = mlp(20, 3);
    r.compile(SGD::new(0.1), SparseCategoricalCrossentropy::default(), ())
        .unwrap();
    let x4 = x.slice(ndarray::s![..4, ..]).to_owned();
    let y4 = y.slice(ndarray::s![..4]).to_owned();
    r.fit(
        &x4,
        &y4,
        Fit::epochs(1).batch_size(2).shuffle(false).verbose(0),
    )
    .unwrap();
    assert_eq!(m.weights(), r.weights());
    assert_eq!(m.iterations(), 2);
    // TerminateOnNaN turns the error into a quiet stop.
    let mut q = mlp(20, 3);
    q.compile(SGD::new(0.1), SparseCategoricalCrossentropy::default(), ())
        .unwrap();
    let h = q
        .fit(
            &x,
            &y,
            Fit::epochs(3)
                .batch_size(2)
                .shuffle(false)
                .verbose(0)
                .callback(strata_runtime::train::TerminateOnNaN),
        )
        .unwrap();
    assert!(h.epochs.is_empty());
    assert_eq!(q.weights(), r.weights());
}

#[test]
fn bad_inputs_are_typed_errors() {
    let (x, y) = problem(16, 8);
    let mut m = mlp(20, 3);
    // Not compiled.
    let e = m.fit(&x, &y, Fit::epochs(1)).unwrap_err();
    assert!(e.to_string().contains("not compiled"), "{e}");
    m.compile(
        Adam::default(),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    let quiet = || Fit::epochs(1).verbose(0);
    // Wrong input shape.
    let bad_x = random::normal(&[16, 21], 0.0, 1.0, 0).unwrap();
    let e = m.fit(&bad_x, &y, quiet()).unwrap_err();
    assert!(
        e.to_string().contains("[batch, 20]") && e.to_string().contains("[16, 21]"),
        "{e}"
    );
    // Wrong input type.
    let e = m.fit(x.mapv(|v| v as f64), &y, quiet()).unwrap_err();
    assert!(matches!(e, Error::DType { .. }), "{e}");
    // Labels out of range.
    let mut y_bad = y.clone();
    y_bad[7] = 3;
    let e = m.fit(&x, &y_bad, quiet()).unwrap_err();
    assert!(e.to_string().contains("label 3 at position 7"), "{e}");
    // Float labels for a sparse loss.
    let e = m.fit(&x, y.mapv(|v| v as f32), quiet()).unwrap_err();
    assert!(matches!(e, Error::DType { .. }), "{e}");
    // Empty data.
    let empty = ndarray::ArrayD::<f32>::zeros(ndarray::IxDyn(&[0, 20]));
    let e = m.fit(&empty, Array1::<i32>::zeros(0), quiet()).unwrap_err();
    assert!(e.to_string().contains("at least one sample"), "{e}");
    // Mismatched sample counts.
    let e = m
        .fit(&x, y.slice(ndarray::s![..8]).to_owned(), quiet())
        .unwrap_err();
    assert!(e.to_string().contains("same number of samples"), "{e}");
    // Zero batch size.
    let e = m.fit(&x, &y, quiet().batch_size(0)).unwrap_err();
    assert!(e.to_string().contains("batch_size"), "{e}");
    // Bad validation split, sample weights.
    assert!(m.fit(&x, &y, quiet().validation_split(1.0)).is_err());
    assert!(m.fit(&x, &y, quiet().sample_weight(vec![1.0; 3])).is_err());
    assert!(m
        .fit(&x, &y, quiet().sample_weight(vec![-1.0; 16]))
        .is_err());
    // Nothing was trained by any failed call.
    assert_eq!(m.iterations(), 0);
    // predict: wrong shape and empty.
    assert!(m.predict(&bad_x).is_err());
    assert!(m.predict(&empty).is_err());
    assert!(m.evaluate(&x, &y_bad).is_err());
}

#[test]
fn predict_works_without_compile_and_in_batches() {
    let (x, _) = problem(70, 9);
    let m = mlp(20, 3);
    let a = m.predict(&x).unwrap();
    let b = m.predict_batched(&x, 7).unwrap();
    assert_eq!(a.dims(), &[70, 3]);
    let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    for (u, v) in a.iter().zip(&b) {
        assert!((u - v).abs() < 1e-6);
    }
    // Rows are probability distributions.
    for row in a.chunks(3) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }
}
