//! Inference through a shared model: `predict(&self)` and `evaluate(&self)` from several
//! threads at once (the results one thread gets, and fit's validation), weights changed
//! between calls (never a stale copy), typed outputs, one sample, one batch; on the native
//! backend and on XLA CPU.

mod backends;

use backends::backends;
use ndarray::{Array1, Array2, Array3, ArrayD};
use std::sync::Arc;
use strata_runtime::backend::Backend;
use strata_runtime::loss::SparseCategoricalCrossentropy;
use strata_runtime::metrics::Accuracy;
use strata_runtime::nn::{Activation, Dense, Dropout, Sequential};
use strata_runtime::optim::Adam;
use strata_runtime::train::Fit;
use strata_runtime::{random, Error, Model, Tensor};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn a_model_is_send_and_sync() {
    assert_send_sync::<Model<Sequential>>();
}

fn mlp(backend: Arc<dyn Backend>) -> Model<Sequential> {
    let mut m = Model::new(Sequential::new(
        Some(vec![12]),
        vec![
            Box::new(Dense::new("dense", 16, Activation::Relu)),
            Box::new(Dropout::new("dropout", 0.5)),
            Box::new(Dense::new("dense_1", 4, Activation::Softmax)),
        ],
    ));
    m.set_backend(backend);
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

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn threads_predicting_at_once_get_what_one_thread_gets() {
    for (name, backend) in backends() {
        let mut m = mlp(backend);
        m.compile(
            Adam::new(0.01),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )
        .unwrap();
        let (x, y) = data(300, 1);
        m.fit(&x, &y, Fit::epochs(2).verbose(0)).unwrap();
        // Inputs of three sizes: full batches, a partial last batch, fewer rows than a batch.
        let inputs: Vec<ArrayD<f32>> = [(100, 2), (77, 3), (5, 4)]
            .iter()
            .map(|&(n, s)| data(n, s).0)
            .collect();
        let alone: Vec<Vec<f32>> = inputs
            .iter()
            .map(|x| f32s(&m.predict(x).unwrap()))
            .collect();
        let shared = &m;
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..6)
                .map(|t| {
                    let inputs = &inputs;
                    s.spawn(move || {
                        let mut got = Vec::new();
                        for round in 0..4 {
                            let i = (t + round) % inputs.len();
                            got.push((i, f32s(&shared.predict(&inputs[i]).unwrap())));
                        }
                        got
                    })
                })
                .collect();
            for h in handles {
                for (i, got) in h.join().unwrap() {
                    assert_eq!(got, alone[i], "{name}: input {i} predicted from a thread");
                }
            }
        });
    }
}

#[test]
fn threads_evaluating_at_once_get_what_fit_and_one_thread_get() {
    for (name, backend) in backends() {
        let mut m = mlp(backend);
        m.compile(
            Adam::new(0.01),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )
        .unwrap();
        let (x, y) = data(200, 11);
        let (xv, yv) = data(70, 12);
        let h = m
            .fit(
                &x,
                &y,
                Fit::epochs(2)
                    .verbose(0)
                    .validation_data(Tensor::from(xv.clone()), Tensor::from(yv.clone())),
            )
            .unwrap();
        // The shared evaluation is fit's validation on the same weights.
        let alone = m.evaluate(&xv, &yv).unwrap();
        for key in ["loss", "accuracy"] {
            let val = *h.get(&format!("val_{key}")).unwrap().last().unwrap();
            let got = alone.get(key).unwrap();
            assert!(
                (got - val).abs() <= 1e-6 * val.abs().max(1.0),
                "{name}: {key} {got} vs {val}"
            );
        }
        let shared = &m;
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| shared.evaluate_batched(&xv, &yv, 16).unwrap()))
                .collect();
            for h in handles {
                let got = h.join().unwrap();
                for key in ["loss", "accuracy"] {
                    let (a, b) = (got.get(key).unwrap(), alone.get(key).unwrap());
                    assert!(
                        (a - b).abs() <= 1e-6 * b.abs().max(1.0),
                        "{name}: {key} {a} vs {b}"
                    );
                }
            }
        });
        // Evaluating only reads the model.
        let before = m.weights();
        m.evaluate(&x, &y).unwrap();
        assert_eq!(
            format!("{:?}", m.weights()),
            format!("{before:?}"),
            "{name}: evaluate changed the weights"
        );
    }
}

#[test]
fn predict_sees_every_change_of_the_weights() {
    for (name, backend) in backends() {
        let mut m = mlp(backend);
        let (x, y) = data(64, 5);
        let before = f32s(&m.predict(&x).unwrap());
        // set_weights: doubled kernels give other outputs at once.
        let doubled: Vec<(String, Tensor)> = m
            .weights()
            .into_iter()
            .map(|(n, t)| {
                let a = t.array::<f32>().unwrap().mapv(|v| v * 2.0);
                (n, Tensor::from(a))
            })
            .collect();
        m.set_weights(&doubled).unwrap();
        let after_set = f32s(&m.predict(&x).unwrap());
        assert_ne!(before, after_set, "{name}: predict after set_weights");
        // fit: the trained weights.
        m.compile(
            Adam::new(0.05),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )
        .unwrap();
        m.fit(&x, &y, Fit::epochs(1).verbose(0)).unwrap();
        let after_fit = f32s(&m.predict(&x).unwrap());
        assert_ne!(after_set, after_fit, "{name}: predict after fit");
        // The same weights again give the first outputs exactly.
        let mut fresh = mlp(m.backend().unwrap().clone());
        fresh.set_weights(&m.weights()).unwrap();
        assert_eq!(f32s(&fresh.predict(&x).unwrap()), after_fit, "{name}");
    }
}

#[test]
fn typed_outputs_one_sample_and_one_batch() {
    for (name, backend) in backends() {
        let m = mlp(backend);
        let (x, _) = data(40, 9);
        let p = m.predict(&x).unwrap();
        let a: Array2<f32> = m.predict_array(&x).unwrap();
        assert_eq!(a.shape(), &[40, 4]);
        assert_eq!(a.iter().copied().collect::<Vec<_>>(), f32s(&p), "{name}");
        match m.predict_array::<ndarray::Ix3>(&x) {
            Err(Error::InvalidArgument { message, .. }) => {
                assert!(
                    message.contains("rank 3") && message.contains("(rank 2)"),
                    "{message}"
                )
            }
            other => panic!("{name}: {other:?}"),
        }
        let bad: Result<Array3<i32>, _> = p.clone().into_array();
        assert!(matches!(bad, Err(Error::DType { .. })), "{name}");

        // One sample: the row of the batch's outputs.
        let row = x.index_axis(ndarray::Axis(0), 7).to_owned();
        let one = m.predict_one(&row).unwrap();
        assert_eq!(one.dims(), &[4]);
        let batch_row: Vec<f32> = a.row(7).to_vec();
        let one = f32s(&one);
        for (o, b) in one.iter().zip(&batch_row) {
            assert!(
                (o - b).abs() <= 1e-6 * b.abs().max(1.0),
                "{name}: {one:?} {batch_row:?}"
            );
        }
        match m.predict_one(&x) {
            Err(Error::InputShape { expected, got, .. }) => {
                assert_eq!(expected, vec![Some(12)]);
                assert_eq!(got, vec![40, 12]);
            }
            other => panic!("{name}: {other:?}"),
        }

        // One batch: every row in one graph, the same outputs.
        let on_batch = m.predict_on_batch(&x).unwrap();
        for (o, b) in f32s(&on_batch).iter().zip(f32s(&p).iter()) {
            assert!((o - b).abs() <= 1e-6 * b.abs().max(1.0), "{name}");
        }
        assert!(m
            .predict_on_batch(ArrayD::<f32>::zeros(ndarray::IxDyn(&[0, 12])))
            .is_err());
    }
}

#[test]
fn an_unbuilt_model_says_how_to_build_it() {
    let m = Model::new(Sequential::new(
        None,
        vec![Box::new(Dense::new("dense", 3, Activation::Linear))],
    ));
    let x = ArrayD::<f32>::zeros(ndarray::IxDyn(&[2, 5]));
    let e = m.predict(&x).unwrap_err().to_string();
    assert!(e.contains("not built") && e.contains("build(&[5])"), "{e}");
}
