//! Keras' batch calls and `value_and_grad`: `train_on_batch` is one epoch of `fit` over
//! the batch taken whole, each batch call reports its own batch (Keras 3 resets the
//! metrics at the start of each), `test_on_batch` is `evaluate` on the batch, and
//! `value_and_grad` gives the loss `evaluate` gives and the gradients that finite
//! differences and JAX (`tests/reference/value_and_grad.json`) give; bad input is a typed
//! error. Every test runs on the native backend and on XLA CPU.

mod backends;

use backends::backends;
use ndarray::{Array1, Array2, ArrayD};
use serde_json::Value as Json;
use std::sync::Arc;
use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::{Backend, Device};
use strata_runtime::loss::SparseCategoricalCrossentropy;
use strata_runtime::metrics::Accuracy;
use strata_runtime::nn::{Activation, Dense, Dropout, Sequential};
use strata_runtime::optim::{Adam, SGD};
use strata_runtime::strategy::MirroredStrategy;
use strata_runtime::train::{Fit, Logs};
use strata_runtime::{random, Error, Model, Tensor};

/// 12 inputs, 4 classes; with `dropout`, a Dropout layer between the two Dense ones.
fn mlp(backend: &Arc<dyn Backend>, dropout: bool) -> Model<Sequential> {
    let mut m = layers(dropout);
    m.set_backend(backend.clone());
    m
}

/// `mlp` on whatever device the model is created for (a strategy's scope).
fn layers(dropout: bool) -> Model<Sequential> {
    let mut layers: Vec<Box<dyn strata_runtime::nn::Layer>> =
        vec![Box::new(Dense::new("dense", 16, Activation::Tanh))];
    if dropout {
        layers.push(Box::new(Dropout::new("dropout", 0.5)));
    }
    layers.push(Box::new(Dense::new("dense_1", 4, Activation::Softmax)));
    Model::new(Sequential::new(Some(vec![12]), layers))
}

fn compiled(backend: &Arc<dyn Backend>, dropout: bool) -> Model<Sequential> {
    let mut m = mlp(backend, dropout);
    m.compile(
        Adam::new(0.01),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    m
}

fn data(n: usize, seed: u64) -> (ArrayD<f32>, Array1<i32>) {
    let x = random::normal(&[n, 12], 0.0, 1.0, seed).unwrap();
    let y = x
        .outer_iter()
        .map(|r| (0..4).max_by(|&a, &b| r[a].total_cmp(&r[b])).unwrap() as i32)
        .collect();
    (x, y)
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn all_weights(m: &Model<Sequential>) -> Vec<(String, Vec<f32>)> {
    m.weights()
        .iter()
        .map(|(n, t)| (n.clone(), values(t)))
        .collect()
}

fn assert_close(name: &str, got: f64, want: f64, rtol: f64) {
    assert!(
        (got - want).abs() <= rtol * want.abs().max(1e-6),
        "{name}: got {got}, want {want}"
    );
}

fn assert_logs_close(name: &str, got: &Logs, want: &Logs, rtol: f64) {
    assert_eq!(got.keys(), want.keys(), "{name}: log names");
    for k in got.keys() {
        assert_close(
            &format!("{name} {k}"),
            got.get(k).unwrap(),
            want.get(k).unwrap(),
            rtol,
        );
    }
}

fn assert_invalid(what: &str, r: Result<impl std::fmt::Debug, Error>) {
    match r {
        Err(Error::InvalidArgument { what: w, .. }) => assert_eq!(w, what),
        other => panic!("{what}: expected InvalidArgument, got {other:?}"),
    }
}

#[test]
fn train_on_batch_is_one_epoch_of_fit_over_the_whole_batch() {
    for (name, backend) in backends() {
        // Dropout included: both draw their masks from the same step key.
        let (x, y) = data(40, 1);
        let mut a = compiled(&backend, true);
        let mut b = compiled(&backend, true);
        let logs = a.train_on_batch(&x, &y).unwrap();
        let h = b
            .fit(
                &x,
                &y,
                Fit::epochs(1).batch_size(40).shuffle(false).verbose(0),
            )
            .unwrap();
        assert_eq!(a.iterations(), 1, "{name}");
        assert_eq!(b.iterations(), 1, "{name}");
        assert_close(
            name,
            logs.get("loss").unwrap(),
            h.get("loss").unwrap()[0],
            1e-6,
        );
        assert_close(
            name,
            logs.get("accuracy").unwrap(),
            h.get("accuracy").unwrap()[0],
            1e-6,
        );
        // The host weights are the updated ones, and they equal fit's bit for bit.
        let (wa, wb) = (all_weights(&a), all_weights(&b));
        assert_eq!(wa, wb, "{name}: weights after one step");
        assert_ne!(wa, all_weights(&compiled(&backend, true)), "{name}");
        // predict(&self) sees the update too.
        let (pa, pb) = (a.predict(&x).unwrap(), b.predict(&x).unwrap());
        assert_eq!(values(&pa), values(&pb), "{name}: predictions");
    }
}

#[test]
fn each_train_on_batch_reports_its_own_batch() {
    // Keras 3 resets the metrics at the start of train_on_batch (keras-team/keras#22617):
    // a second call's loss and accuracy are its batch's, not a mean over both calls. With
    // no dropout, the step's loss is the inference loss of the weights before it.
    for (name, backend) in backends() {
        let (x1, y1) = data(24, 2);
        let (x2, y2) = data(8, 3);
        let mut m = compiled(&backend, false);
        let first = m.train_on_batch(&x1, &y1).unwrap();
        let before = m.evaluate_batched(&x2, &y2, 8).unwrap();
        let second = m.train_on_batch(&x2, &y2).unwrap();
        assert_logs_close(name, &second, &before, 1e-5);
        assert_ne!(first.get("loss"), second.get("loss"), "{name}");
        assert_eq!(m.iterations(), 2, "{name}");
    }
}

#[test]
fn reset_metrics_needs_no_state_and_batch_calls_start_from_zero() {
    for (name, backend) in backends() {
        let (x, y) = data(32, 4);
        let mut m = mlp(&backend, false);
        // Not compiled: Keras' reset_metrics resets nothing and succeeds.
        m.reset_metrics().unwrap();
        m.compile(
            SGD::new(0.1),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )
        .unwrap();
        m.reset_metrics().unwrap();
        // After fit the state holds its last epoch's totals; the next batch call does not
        // add to them, with or without reset_metrics.
        m.fit(
            &x,
            &y,
            Fit::epochs(1).batch_size(8).shuffle(false).verbose(0),
        )
        .unwrap();
        let want = m.evaluate_batched(&x, &y, 32).unwrap();
        let t1 = m.test_on_batch(&x, &y).unwrap();
        m.reset_metrics().unwrap();
        let t2 = m.test_on_batch(&x, &y).unwrap();
        assert_logs_close(name, &t1, &want, 1e-5);
        assert_logs_close(name, &t2, &want, 1e-5);
    }
}

#[test]
fn test_on_batch_is_evaluate_on_the_batch_and_changes_nothing() {
    for (name, backend) in backends() {
        let (x, y) = data(20, 5);
        let mut m = compiled(&backend, true);
        m.train_on_batch(&x, &y).unwrap();
        let w = all_weights(&m);
        let want = m.evaluate_batched(&x, &y, 20).unwrap();
        let got = m.test_on_batch(&x, &y).unwrap();
        // Called again: the same, as nothing accumulates across calls.
        let again = m.test_on_batch(&x, &y).unwrap();
        assert_logs_close(name, &got, &want, 1e-6);
        assert_eq!(got, again, "{name}");
        assert_eq!(all_weights(&m), w, "{name}");
        assert_eq!(m.iterations(), 1, "{name}");
        // And evaluate over batches of 32 (here one) agrees too.
        assert_logs_close(name, &got, &m.evaluate(&x, &y).unwrap(), 1e-6);
    }
}

#[test]
fn value_and_grad_matches_evaluate_and_finite_differences() {
    for (name, backend) in backends() {
        let (x, y) = data(10, 6);
        let mut m = compiled(&backend, false);
        let w = all_weights(&m);
        let (loss, grads) = m.value_and_grad(&x, &y).unwrap();
        // The loss evaluate gives; nothing changed.
        let eval = m.evaluate_batched(&x, &y, 10).unwrap();
        assert_close(name, loss, eval.get("loss").unwrap(), 1e-6);
        assert_eq!(all_weights(&m), w, "{name}");
        assert_eq!(m.iterations(), 0, "{name}");
        let names: Vec<&str> = grads.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "dense/kernel",
                "dense/bias",
                "dense_1/kernel",
                "dense_1/bias"
            ],
            "{name}"
        );
        for ((gn, g), (wn, wv)) in grads.iter().zip(&w) {
            assert_eq!(gn, wn);
            assert_eq!(g.dims().iter().product::<usize>(), wv.len(), "{name} {gn}");
        }
        // Central differences (f64 arithmetic on the f32 loss) on a few coordinates of
        // every parameter. With eps 1e-2 the truncation error (eps² · f''') and the
        // loss's f32 rounding over 2·eps (1e-7 / 2e-2) both stay under 1e-3.
        let eps = 1e-2f64;
        for (p, (pname, g)) in grads.iter().enumerate() {
            let g = values(g);
            for &i in &[0, g.len() / 3, g.len() - 1] {
                let at = |m: &mut Model<Sequential>, delta: f64| -> f64 {
                    let mut v = w[p].1.clone();
                    v[i] = (v[i] as f64 + delta) as f32;
                    let dims = m.weights()[p].1.dims().to_vec();
                    m.set_weights(&[(pname.clone(), Tensor::from_vec(&dims, v).unwrap())])
                        .unwrap();
                    m.value_and_grad(&x, &y).unwrap().0
                };
                let (up, down) = (at(&mut m, eps), at(&mut m, -eps));
                // The step actually taken, after rounding to f32.
                let h = ((w[p].1[i] as f64 + eps) as f32) as f64
                    - ((w[p].1[i] as f64 - eps) as f32) as f64;
                let fd = (up - down) / h;
                let got = g[i] as f64;
                assert!(
                    (fd - got).abs() <= 1e-3 + 1e-2 * got.abs(),
                    "{name} {pname}[{i}]: gradient {got}, finite difference {fd}"
                );
            }
            let dims = m.weights()[p].1.dims().to_vec();
            m.set_weights(&[(
                pname.clone(),
                Tensor::from_vec(&dims, w[p].1.clone()).unwrap(),
            )])
            .unwrap();
        }
        assert_eq!(all_weights(&m), w, "{name}");
    }
}

#[test]
fn value_and_grad_is_what_one_sgd_step_applies() {
    // Plain SGD updates w - lr · g: the step and value_and_grad share their loss.
    for (name, backend) in backends() {
        let (x, y) = data(16, 7);
        let mut m = mlp(&backend, false);
        let lr = 0.5f32;
        m.compile(SGD::new(lr), SparseCategoricalCrossentropy::default(), ())
            .unwrap();
        let w = all_weights(&m);
        let (loss, grads) = m.value_and_grad(&x, &y).unwrap();
        let logs = m.train_on_batch(&x, &y).unwrap();
        assert_close(name, logs.get("loss").unwrap(), loss, 1e-6);
        for (((gn, g), (_, before)), (_, after)) in grads.iter().zip(&w).zip(all_weights(&m)) {
            for ((g, b), a) in values(g).iter().zip(before).zip(&after) {
                let want = b - lr * g;
                assert!(
                    (a - want).abs() <= 1e-6 * (1.0 + want.abs()),
                    "{name} {gn}: after the step {a}, w - lr·g {want}"
                );
            }
        }
    }
}

#[test]
fn batch_calls_refuse_bad_input_with_typed_errors() {
    for (name, backend) in backends() {
        let (x, y) = data(8, 8);
        let mut m = mlp(&backend, false);
        // Not compiled.
        assert_invalid("train_on_batch", m.train_on_batch(&x, &y));
        assert_invalid("test_on_batch", m.test_on_batch(&x, &y));
        assert_invalid("value_and_grad", m.value_and_grad(&x, &y));
        m.compile(
            SGD::new(0.1),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )
        .unwrap();
        // Rows that do not match, and no rows at all.
        let (_, y5) = data(5, 9);
        assert_invalid("train_on_batch", m.train_on_batch(&x, &y5));
        assert_invalid("test_on_batch", m.test_on_batch(&x, &y5));
        assert_invalid("value_and_grad", m.value_and_grad(&x, &y5));
        let empty = Array2::<f32>::zeros((0, 12));
        let none = Array1::<i32>::zeros(0);
        assert_invalid("train_on_batch", m.train_on_batch(&empty, &none));
        // A sample of the wrong shape.
        let wide = Array2::<f32>::zeros((8, 13));
        for r in [
            m.train_on_batch(&wide, &y).map(|_| ()),
            m.test_on_batch(&wide, &y).map(|_| ()),
            m.value_and_grad(&wide, &y).map(|_| ()),
        ] {
            assert!(matches!(r, Err(Error::InputShape { .. })), "{name}: {r:?}");
        }
        // Targets of the wrong type, and labels out of range.
        let floats = Array1::<f32>::zeros(8);
        assert!(
            matches!(m.train_on_batch(&x, &floats), Err(Error::DType { .. })),
            "{name}"
        );
        let out_of_range = Array1::from_elem(8, 4i32);
        assert!(m.train_on_batch(&x, &out_of_range).is_err(), "{name}");
        assert!(m.test_on_batch(&x, &out_of_range).is_err(), "{name}");
        assert!(m.value_and_grad(&x, &out_of_range).is_err(), "{name}");
        // None of it ran a step or changed a weight.
        assert_eq!(m.iterations(), 0, "{name}");
        assert_eq!(
            all_weights(&m),
            all_weights(&mlp(&backend, false)),
            "{name}"
        );
    }
}

#[test]
fn batch_calls_over_two_replicas_agree_with_one_device() {
    // The global batch split over two replicas: the same loss and gradients (an odd batch
    // padded with samples that weigh nothing), and train_on_batch the same step; an odd
    // batch there is refused, as fit refuses it without pad_to_replicas.
    for (name, device) in [
        ("native", Device::Native),
        ("xla-cpu", Device::XlaCpu { devices: Some(2) }),
    ] {
        let s = MirroredStrategy::with_replicas(device, 2)
            .unwrap_or_else(|e| panic!("{name}: the strategy is needed for this test: {e}"));
        let compile = |m: &mut Model<Sequential>| {
            m.compile(
                SGD::new(0.1),
                SparseCategoricalCrossentropy::default(),
                [Accuracy],
            )
            .unwrap()
        };
        let mut one = layers(false);
        one.set_backend(Arc::new(NativeBackend::new()));
        let mut two = s.scope(|| layers(false));
        compile(&mut one);
        compile(&mut two);
        for n in [10, 9] {
            let (x, y) = data(n, 10 + n as u64);
            let (l1, g1) = one.value_and_grad(&x, &y).unwrap();
            let (l2, g2) = two.value_and_grad(&x, &y).unwrap();
            assert_close(&format!("{name} {n} loss"), l2, l1, 1e-5);
            for ((gn, a), (_, b)) in g1.iter().zip(&g2) {
                for (a, b) in values(a).iter().zip(values(b)) {
                    assert!((a - b).abs() <= 1e-5 * (1.0 + a.abs()), "{name} {n} {gn}");
                }
            }
        }
        let (x, y) = data(9, 20);
        assert_invalid("train_on_batch", two.train_on_batch(&x, &y));
        let (x, y) = data(10, 21);
        let (a, b) = (
            one.train_on_batch(&x, &y).unwrap(),
            two.train_on_batch(&x, &y).unwrap(),
        );
        assert_logs_close(name, &b, &a, 1e-5);
        for ((wn, a), (_, b)) in all_weights(&one).iter().zip(all_weights(&two)) {
            for (a, b) in a.iter().zip(&b) {
                assert!((a - b).abs() <= 1e-5 * (1.0 + a.abs()), "{name} {wn}");
            }
        }
    }
}

// ---- the JAX reference -------------------------------------------------------------------

/// `v` in f64, then rounded to f32: the script's `f32(...)` of the same expression.
fn f32_of(v: f64) -> f32 {
    v as f32
}

/// The tutorial model with the script's weights, and its batch.
fn tutorial(backend: &Arc<dyn Backend>) -> (Model<Sequential>, ArrayD<f32>, Array1<i32>) {
    let sizes = [784usize, 128, 64, 10];
    let mut m = Model::new(Sequential::new(
        Some(vec![784]),
        vec![
            Box::new(Dense::new("dense", 128, Activation::Relu)),
            Box::new(Dense::new("dense_1", 64, Activation::Relu)),
            Box::new(Dense::new("dense_2", 10, Activation::Softmax)),
        ],
    ));
    m.set_backend(backend.clone());
    let scales = [0.18, 0.45, 1.5];
    let mut weights = Vec::new();
    for (l, layer) in ["dense", "dense_1", "dense_2"].iter().enumerate() {
        let (fan_in, fan_out) = (sizes[l], sizes[l + 1]);
        let mut k = Vec::with_capacity(fan_in * fan_out);
        for i in 0..fan_in {
            for j in 0..fan_out {
                let h = (7919 * i + 104_729 * j + 31 * i * j + 97 * l) % 1009;
                k.push(f32_of((h as f64 / 1009.0 - 0.5) * scales[l]));
            }
        }
        let b = (0..fan_out)
            .map(|j| f32_of((((3 * j + l) % 7) as f64 - 3.0) / 70.0))
            .collect::<Vec<_>>();
        weights.push((
            format!("{layer}/kernel"),
            Tensor::from_vec(&[fan_in, fan_out], k).unwrap(),
        ));
        weights.push((
            format!("{layer}/bias"),
            Tensor::from_vec(&[fan_out], b).unwrap(),
        ));
    }
    m.set_weights(&weights).unwrap();
    let batch = 16;
    let x = ArrayD::from_shape_fn(ndarray::IxDyn(&[batch, 784]), |d| {
        let (s, k) = (d[0], d[1]);
        f32_of(((31 * s + 17 * k + 5 * s * k) % 23) as f64 / 23.0)
    });
    let y = Array1::from_shape_fn(batch, |s| ((7 * s + 3) % 10) as i32);
    (m, x, y)
}

fn norm(v: impl Iterator<Item = f64>) -> f64 {
    v.map(|x| x * x).sum::<f64>().sqrt()
}

#[test]
fn value_and_grad_matches_jax_on_the_tutorial_model() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/reference/value_and_grad.json"
    );
    let r: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let f = |v: &Json| v.as_f64().unwrap();
    for (name, backend) in backends() {
        let (mut m, x, y) = tutorial(&backend);
        // The formulas are the script's: the same inputs and weights (sums in f64 of the
        // f32 values, which differ only by summation order, far below any changed value).
        let x_sum = x.iter().map(|&v| v as f64).sum::<f64>();
        assert_close(&format!("{name} x sum"), x_sum, f(&r["x_sum"]), 1e-12);
        assert_eq!(y.iter().sum::<i32>() as i64, r["y_sum"].as_i64().unwrap());
        m.compile(
            Adam::new(0.001),
            SparseCategoricalCrossentropy::default(),
            (),
        )
        .unwrap();
        let (loss, grads) = m.value_and_grad(&x, &y).unwrap();
        assert_close(&format!("{name} loss"), loss, f(&r["loss"]), 1e-5);
        let weights = m.weights();
        let params = r["params"].as_array().unwrap();
        assert_eq!(grads.len(), params.len(), "{name}");
        for ((gname, g), p) in grads.iter().zip(params) {
            let pname = p["name"].as_str().unwrap();
            assert_eq!(gname, pname, "{name}");
            let (_, w) = weights.iter().find(|(n, _)| n == pname).unwrap();
            let w_sum: f64 = values(w).iter().map(|&v| v as f64).sum();
            assert_close(
                &format!("{name} {pname} weight sum"),
                w_sum,
                f(&p["weight_sum"]),
                1e-12,
            );
            let dims: Vec<usize> = p["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as usize)
                .collect();
            assert_eq!(g.dims(), dims.as_slice(), "{name} {pname}");
            // Norm-relative: ‖got − want‖ / ‖want‖ over the tensor (here: over the rows
            // the file holds). Element-wise relative error would be dominated by
            // gradients near zero, whose f32 rounding is large relative to themselves
            // but negligible for any step; the norm weighs every coordinate by its size.
            let row = dims[1..].iter().product::<usize>().max(1);
            let got = values(g);
            let want: Vec<f64> = p["grad"].as_array().unwrap().iter().map(f).collect();
            let rows: Vec<usize> = p["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap() as usize)
                .collect();
            let kept: Vec<f64> = rows
                .iter()
                .flat_map(|&i| got[i * row..(i + 1) * row].iter().map(|&v| v as f64))
                .collect();
            assert_eq!(kept.len(), want.len(), "{name} {pname}");
            let err = norm(kept.iter().zip(&want).map(|(a, b)| a - b)) / norm(want.iter().copied());
            assert!(err <= 1e-5, "{name} {pname}: relative error {err:e}");
            // The whole tensor's norm, every row included.
            let whole = norm(got.iter().map(|&v| v as f64));
            assert_close(
                &format!("{name} {pname} norm"),
                whole,
                f(&p["grad_norm"]),
                1e-5,
            );
        }
    }
}
