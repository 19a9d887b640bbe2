//! Edge cases of the loop features through `model!`: recurrent layers at their smallest
//! sizes, `steps_per_execution` against one step per call, gradient accumulation
//! inside the loop, and native against XLA CPU.

use std::sync::{Arc, Mutex};
use strata::backend::Device;
use strata::loss::{MeanSquaredError, SparseCategoricalCrossentropy};
use strata::metrics::Accuracy;
use strata::model;
use strata::nn::Architecture;
use strata::optim::{Adam, OptimizerExt, SGD};
use strata::train::{Callback, Control, Fit, Logs};
use strata::{Error, Model, Result, Tensor};

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn seqs(n: usize, t: usize, f: usize, seed: u64) -> Tensor {
    Tensor::from(strata::random::normal(&[n, t, f], 0.0, 1.0, seed).unwrap())
}

fn targets(n: usize, w: usize, seed: u64) -> Tensor {
    Tensor::from(strata::random::normal(&[n, w], 0.0, 1.0, seed).unwrap())
}

#[track_caller]
fn close(a: &[f32], b: &[f32], tol: f32, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    let scale = a.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-3);
    let diff = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
    assert!(
        diff <= tol * scale && a.iter().chain(b).all(|v| v.is_finite()),
        "{what}: max diff {diff} (scale {scale})\n{a:?}\n{b:?}"
    );
}

#[derive(Clone, Default)]
struct Calls(Arc<Mutex<Vec<usize>>>);

impl Callback for Calls {
    fn on_batch_end(&mut self, step: usize, _logs: &Logs, _c: &mut Control<'_>) -> Result<()> {
        self.0.lock().unwrap().push(step);
        Ok(())
    }
}

/// The predictions of a model on native and on XLA CPU (same weights: `make` is
/// deterministic, and the XLA copy is given the native one's weights anyway).
fn predict_both<A: Architecture>(make: impl Fn() -> Model<A>, x: &Tensor) -> (Vec<f32>, Vec<f32>) {
    let m = make();
    let native = values(&m.predict(x).unwrap());
    let mut mx = make();
    mx.set_device(Device::XlaCpu { devices: None }).unwrap();
    mx.set_weights(&m.weights()).unwrap();
    let xla = values(&mx.predict(x).unwrap());
    (native, xla)
}

// ---- edge sizes: timesteps = 1, units = 1, every cell, native ≡ XLA

#[test]
fn one_step_one_unit_cells_agree_on_native_and_xla() {
    let x = seqs(3, 1, 2, 1);
    let (a, b) = predict_both(|| model![Input((1, 2)), LSTM(1)], &x);
    close(&a, &b, 1e-5, "LSTM(1) T=1");
    let (a, b) = predict_both(|| model![Input((1, 2)), GRU(1, reset_after = false)], &x);
    close(&a, &b, 1e-5, "GRU(1, reset_after=false) T=1");
    let (a, b) = predict_both(|| model![Input((1, 2)), GRU(1)], &x);
    close(&a, &b, 1e-5, "GRU(1) T=1");
    let (a, b) = predict_both(
        || model![Input((1, 2)), SimpleRNN(1, return_sequences = true)],
        &x,
    );
    close(&a, &b, 1e-5, "SimpleRNN(1) T=1");
    assert_eq!(a.len(), 3);
}

#[test]
fn one_step_lstm_trains_the_same_on_native_and_xla() {
    let train = |device: Device| {
        let mut m = model![
            Input((1, 3)),
            LSTM(1, return_sequences = true),
            GRU(2, reset_after = false, go_backwards = true),
            Dense(1)
        ];
        m.set_device(device).unwrap();
        m.compile(Adam::new(0.01), MeanSquaredError, ()).unwrap();
        let h = m
            .fit(
                seqs(10, 1, 3, 2),
                targets(10, 1, 3),
                Fit::epochs(3).batch_size(4).shuffle(false).verbose(0),
            )
            .unwrap();
        (h.history["loss"].clone(), m.weights())
    };
    let (ln, wn) = train(Device::Native);
    let (lx, wx) = train(Device::XlaCpu { devices: None });
    for (a, b) in ln.iter().zip(&lx) {
        assert!((a - b).abs() <= 1e-4 * a.abs().max(1e-3), "{ln:?} {lx:?}");
    }
    for ((n, a), (_, b)) in wn.iter().zip(&wx) {
        close(&values(a), &values(b), 1e-4, n);
    }
}

// ---- go_backwards with return_sequences: Keras returns the outputs in the order read

#[test]
fn go_backwards_sequence_is_the_forward_layer_on_the_reversed_input() {
    let fwd = model![Input((5, 2)), LSTM(3, return_sequences = true)];
    let w = fwd.weights();
    let bwd = || {
        let mut m = model![
            Input((5, 2)),
            LSTM(3, return_sequences = true, go_backwards = true)
        ];
        m.set_weights(&w).unwrap();
        m
    };
    let x = seqs(2, 5, 2, 4);
    let xv = values(&x);
    // Reverse each example's steps.
    let mut rev = vec![0f32; xv.len()];
    for b in 0..2 {
        for t in 0..5 {
            for f in 0..2 {
                rev[b * 10 + (4 - t) * 2 + f] = xv[b * 10 + t * 2 + f];
            }
        }
    }
    let rev = Tensor::from_vec(&[2, 5, 2], rev).unwrap();
    let a = values(&fwd.predict(&rev).unwrap());
    let (b, bx) = predict_both(bwd, &x);
    close(&a, &b, 1e-6, "go_backwards native");
    close(&a, &bx, 1e-5, "go_backwards xla");
}

// ---- Bidirectional(GRU(reset_after = false)) with return_state, graph form

#[test]
fn bidirectional_gru_reset_before_states_native_and_xla() {
    let make = || {
        model! {
            let x = Input((4, 3));
            let (y, fh, bh) = Bidirectional(GRU(2, reset_after = false, return_state = true,
                return_sequences = true), merge_mode = ave)(x);
            (y, fh, bh)
        }
    };
    let m = make();
    let x = seqs(3, 4, 3, 5);
    let out = m.predict_outputs(&x).unwrap();
    assert_eq!(out[0].dims(), [3, 4, 2]);
    assert_eq!(out[1].dims(), [3, 2]);
    assert_eq!(out[2].dims(), [3, 2]);
    let mut mx = make();
    mx.set_device(Device::XlaCpu { devices: None }).unwrap();
    mx.set_weights(&m.weights()).unwrap();
    let outx = mx.predict_outputs(&x).unwrap();
    for (i, (a, b)) in out.iter().zip(&outx).enumerate() {
        close(&values(a), &values(b), 1e-5, &format!("output {i}"));
    }
    // With `ave`, y[:, T-1] = (fh + backward output at T-1) / 2 and y[:, 0] holds bh.
    let (y, fh, bh) = (values(&out[0]), values(&out[1]), values(&out[2]));
    // The forward copy alone, to separate the halves.
    let fwd = model![
        Input((4, 3)),
        GRU(2, reset_after = false, return_sequences = true)
    ];
    let w = m.weights();
    let fw: Vec<(String, Tensor)> = fwd
        .weights()
        .iter()
        .zip(&w[..3])
        .map(|((n, _), (_, t))| (n.clone(), t.clone()))
        .collect();
    let mut fwd = fwd;
    fwd.set_weights(&fw).unwrap();
    let f = values(&fwd.predict(&x).unwrap());
    for b in 0..3 {
        // last forward step is the forward state
        close(&f[b * 8 + 6..b * 8 + 8], &fh[b * 2..b * 2 + 2], 1e-6, "fh");
        // y at step 0 = (f[0] + bh) / 2, since the backward copy ends at step 0
        let want: Vec<f32> = (0..2)
            .map(|u| (f[b * 8 + u] + bh[b * 2 + u]) / 2.0)
            .collect();
        close(&y[b * 8..b * 8 + 2], &want, 1e-5, "y[0]");
    }
}

// ---- TimeDistributed(Dense) over rank-4 input

#[test]
fn time_distributed_dense_over_rank4_is_dense_on_the_last_axis() {
    let make = || model![Input((3, 4, 5)), TimeDistributed(Dense(2))];
    let m = make();
    let x = Tensor::from(strata::random::normal(&[2, 3, 4, 5], 0.0, 1.0, 6).unwrap());
    let out = m.predict(&x).unwrap();
    assert_eq!(out.dims(), [2, 3, 4, 2]);
    let w = m.weights();
    let (k, bias) = (values(&w[0].1), values(&w[1].1));
    let xv = values(&x);
    let got = values(&out);
    for r in 0..24 {
        for o in 0..2 {
            let want: f32 = (0..5).map(|i| xv[r * 5 + i] * k[i * 2 + o]).sum::<f32>() + bias[o];
            assert!((got[r * 2 + o] - want).abs() < 1e-5, "row {r}");
        }
    }
    let (a, b) = predict_both(make, &x);
    close(&a, &b, 1e-5, "TimeDistributed rank 4");
}

// ---- stacked return_sequences layers, steps_per_execution K=1 vs K>1

fn stacked() -> Model<impl Architecture> {
    model![
        Input((4, 3)),
        LSTM(
            5,
            return_sequences = true,
            dropout = 0.2,
            recurrent_dropout = 0.3
        ),
        GRU(
            4,
            return_sequences = true,
            reset_after = false,
            recurrent_dropout = 0.1
        ),
        Bidirectional(SimpleRNN(3, return_sequences = true), merge_mode = mul),
        TimeDistributed(Dense(2)),
        Flatten(),
        Dense(3, softmax)
    ]
}

fn labels(n: usize, seed: u64) -> Tensor {
    Tensor::from(strata::random::uniform_int(&[n], 0, 3, seed).unwrap())
}

type Run = (
    Vec<(String, Tensor)>,
    Vec<f64>,
    Vec<usize>,
    Vec<f64>,
    Vec<f32>,
);

fn fit_k(device: Device, k: usize, n: usize, batch: usize, accumulate: Option<usize>) -> Run {
    let mut m = stacked();
    m.set_device(device).unwrap();
    let opt = match accumulate {
        Some(a) => Adam::new(0.01).with_gradient_accumulation_steps(a),
        None => Adam::new(0.01),
    };
    m.compile(opt, SparseCategoricalCrossentropy::default(), [Accuracy])
        .unwrap();
    m.set_steps_per_execution(k).unwrap();
    let calls = Calls::default();
    let x = seqs(n, 4, 3, 7);
    let y = labels(n, 8);
    let h = m
        .fit(
            &x,
            &y,
            Fit::epochs(2)
                .batch_size(batch)
                .shuffle(false)
                .verbose(0)
                .callback(calls.clone()),
        )
        .unwrap();
    let ev = m.evaluate_batched(&x, &y, batch).unwrap();
    let ev: Vec<f64> = ["loss", "accuracy"]
        .iter()
        .map(|k| ev.get(k).unwrap())
        .collect();
    let pred = values(&m.predict_batched(&x, batch).unwrap());
    let c = calls.0.lock().unwrap().clone();
    (m.weights(), h.history["loss"].clone(), c, ev, pred)
}

#[test]
fn stacked_recurrent_k32_is_k1_with_partial_batch_natively() {
    // 10 samples at batch 4: 2 full batches and a partial one, K larger than the batches.
    let (w1, l1, c1, e1, p1) = fit_k(Device::Native, 1, 10, 4, None);
    let (w32, l32, c32, e32, p32) = fit_k(Device::Native, 32, 10, 4, None);
    assert_eq!(c1, [0, 1, 2, 0, 1, 2]);
    // Callbacks hear of each call: steps 0-1 in one call, the partial batch alone.
    assert_eq!(c32, [1, 2, 1, 2]);
    assert_eq!(w1, w32);
    assert_eq!(l1, l32);
    assert_eq!(e1, e32);
    assert_eq!(p1, p32);
}

#[test]
fn dataset_smaller_than_one_batch_with_k() {
    let (w1, l1, _, e1, p1) = fit_k(Device::Native, 1, 3, 8, None);
    let (w4, l4, c4, e4, p4) = fit_k(Device::Native, 4, 3, 8, None);
    assert_eq!(c4, [0, 0]);
    assert_eq!(w1, w4);
    assert_eq!(l1, l4);
    assert_eq!(e1, e4);
    assert_eq!(p1, p4);
}

#[test]
fn gradient_accumulation_with_k_is_k1() {
    // 7 batches of 2 and one of 1 per epoch, accumulation every 3, K = 3.
    let (w1, l1, _, e1, p1) = fit_k(Device::Native, 1, 15, 2, Some(3));
    let (w3, l3, _, e3, p3) = fit_k(Device::Native, 3, 15, 2, Some(3));
    assert_eq!(w1, w3);
    assert_eq!(l1, l3);
    assert_eq!(e1, e3);
    assert_eq!(p1, p3);
}

#[test]
fn stacked_recurrent_k_on_xla_matches_native() {
    let (wn, ln, _, en, pn) = fit_k(Device::Native, 3, 10, 4, Some(2));
    let (wx, lx, _, ex, px) = fit_k(Device::XlaCpu { devices: None }, 3, 10, 4, Some(2));
    for (a, b) in ln.iter().zip(&lx) {
        assert!((a - b).abs() <= 1e-3 * a.abs(), "{ln:?} {lx:?}");
    }
    for (a, b) in en.iter().zip(&ex) {
        assert!((a - b).abs() <= 1e-3 * a.abs().max(1e-3), "{en:?} {ex:?}");
    }
    for ((n, a), (_, b)) in wn.iter().zip(&wx) {
        close(&values(a), &values(b), 1e-3, n);
    }
    close(&pn, &px, 1e-3, "predictions");
}

// ---- bad input: typed errors, no panics

#[test]
fn empty_and_misshapen_inputs_are_typed_errors() {
    let mut m = model![Input((4, 3)), LSTM(2), Dense(1)];
    m.compile(SGD::new(0.1), MeanSquaredError, ()).unwrap();
    m.set_steps_per_execution(4).unwrap();
    let empty = Tensor::from_vec(&[0, 4, 3], Vec::<f32>::new()).unwrap();
    let ey = Tensor::from_vec(&[0, 1], Vec::<f32>::new()).unwrap();
    assert!(m.predict(&empty).is_err());
    assert!(m.evaluate(&empty, &ey).is_err());
    assert!(m.fit(&empty, &ey, Fit::epochs(1).verbose(0)).is_err());
    // Wrong number of timesteps, wrong rank.
    let wrong = seqs(2, 5, 3, 1);
    let e = m.predict(&wrong).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::InputShape { what, expected, got }
                if what == "predict"
                    && expected[..] == [None, Some(4), Some(3)]
                    && got[..] == [2, 5, 3]
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "predict: the model takes inputs of shape [batch, 4, 3], got [2, 5, 3]"
    );
    let flat = Tensor::from(strata::random::normal(&[2, 12], 0.0, 1.0, 1).unwrap());
    assert!(m.predict(&flat).is_err());
    // Zero timesteps declared by data.
    let zero_t = Tensor::from_vec(&[2, 0, 3], Vec::<f32>::new()).unwrap();
    assert!(m.predict(&zero_t).is_err());
    assert!(m.set_steps_per_execution(0).is_err());
}

/// Without `Input`, `predict` does not fix the shape (a typed "not built" error: `fit` or
/// `build` does). Built from samples of zero timesteps, a recurrent layer returns its
/// initial state, zeros, so `Dense` gives its bias; Keras 3.15 raises instead (its rnn reads
/// the last step of an empty sequence: "index is out of bounds for axis 1 with size 0").
/// Built from zero features, the kernel has no rows and the recurrence runs on the
/// recurrent kernel alone: from a zero state with the initial zero bias a GRU stays at
/// zero, as Keras' GRU does (kernel (0, 6), recurrent kernel (2, 6), bias (2, 6) in both).
/// Rank-2 data is refused by the layer.
#[test]
fn deferred_input_recurrent_model_with_odd_data_is_typed() {
    let not_built = |e: Error, shape: &str| match e {
        Error::InvalidArgument { what, message } => {
            assert_eq!(what, "predict");
            assert!(
                message.starts_with("model `sequential` is not built")
                    && message.contains(&format!("call build(&{shape})")),
                "{message}"
            );
        }
        e => panic!("{e:?}"),
    };

    // Zero timesteps.
    let zero_t = Tensor::from_vec(&[2, 0, 3], Vec::<f32>::new()).unwrap();
    let mut m = model![LSTM(2), Dense(1)];
    not_built(m.predict(&zero_t).unwrap_err(), "[0, 3]");
    m.build(&[0, 3]).unwrap();
    let mut w = m.weights();
    let bias = w.iter_mut().find(|(n, _)| n == "dense/bias").unwrap();
    bias.1 = Tensor::from_vec(&[1], vec![0.25f32]).unwrap();
    m.set_weights(&w).unwrap();
    let p = m.predict(&zero_t).unwrap();
    assert_eq!(p.dims(), [2, 1]);
    assert_eq!(values(&p), [0.25, 0.25]);

    // Rank-2 data.
    let flat = Tensor::from(strata::random::normal(&[2, 12], 0.0, 1.0, 1).unwrap());
    let mut m = model![LSTM(2), Dense(1)];
    not_built(m.predict(&flat).unwrap_err(), "[12]");
    match m.build(&[12]).unwrap_err() {
        Error::InvalidArgument { what, message } => {
            assert_eq!(what, "lstm (LSTM)");
            assert_eq!(
                message,
                "expected input of shape (steps, channels) (rank 2), got [12]"
            );
        }
        e => panic!("{e:?}"),
    }

    // Zero features.
    let zero_f = Tensor::from_vec(&[2, 3, 0], Vec::<f32>::new()).unwrap();
    let mut m = model![GRU(2)];
    not_built(m.predict(&zero_f).unwrap_err(), "[3, 0]");
    m.build(&[3, 0]).unwrap();
    let shapes: Vec<Vec<usize>> = m.weights().iter().map(|(_, w)| w.dims().to_vec()).collect();
    assert_eq!(shapes, [vec![0, 6], vec![2, 6], vec![2, 6]]);
    let p = m.predict(&zero_f).unwrap();
    assert_eq!(p.dims(), [2, 2]);
    assert_eq!(values(&p), [0.0; 4]);
}

// ---- a graph model with states as outputs: predict_outputs and fit with K > 1

model! {
    /// Bidirectional GRU (reset before) states beside its sequence, a second output.
    pub struct TwoHeads {
        let x = Input((4, 3));
        let (y, fh, bh) = Bidirectional(GRU(3, reset_after = false, return_state = true,
            return_sequences = true))(x);
        let s = Concatenate()([fh, bh]);
        let p = GlobalAveragePooling1D()(y);
        (Dense(1, name = "a")(s), Dense(2, name = "b")(p))
    }
}

/// Losses per epoch, each output's predictions, the weights.
type Heads = (Vec<f64>, Vec<Vec<f32>>, Vec<(String, Tensor)>);

fn two_heads(k: usize, device: Device) -> Heads {
    let mut m = TwoHeads::model();
    m.set_device(device).unwrap();
    m.compile(Adam::new(0.01), MeanSquaredError, ()).unwrap();
    m.set_steps_per_execution(k).unwrap();
    let x = seqs(11, 4, 3, 20);
    let ya = targets(11, 1, 21);
    let yb = targets(11, 2, 22);
    let h = m
        .fit(
            &x,
            (ya, yb),
            Fit::epochs(2).batch_size(3).shuffle(false).verbose(0),
        )
        .unwrap();
    let p: Vec<Vec<f32>> = m.predict_outputs(&x).unwrap().iter().map(values).collect();
    (h.history["loss"].clone(), p, m.weights())
}

#[test]
fn graph_model_with_states_k4_is_k1() {
    let (l1, p1, w1) = two_heads(1, Device::Native);
    let (l4, p4, w4) = two_heads(4, Device::Native);
    assert_eq!(l1, l4);
    assert_eq!(p1, p4);
    assert_eq!(w1, w4);
    let (lx, px, wx) = two_heads(4, Device::XlaCpu { devices: None });
    for (a, b) in l1.iter().zip(&lx) {
        assert!((a - b).abs() <= 1e-3 * a.abs(), "{l1:?} {lx:?}");
    }
    for (a, b) in p1.iter().zip(&px) {
        close(a, b, 1e-3, "predict_outputs");
    }
    for ((n, a), (_, b)) in w1.iter().zip(&wx) {
        close(&values(a), &values(b), 1e-3, n);
    }
}

/// Central differences of the loss along a random direction against the gradient, for
/// cells and options the existing check does not reach: GRU resetting before the product
/// read backwards, SimpleRNN with relu, LSTM without bias and a softplus gate.
#[test]
fn gradients_of_other_cells_match_central_differences() {
    let mut m = model![
        Input((5, 3)),
        GRU(
            3,
            reset_after = false,
            go_backwards = true,
            return_sequences = true
        ),
        SimpleRNN(2, activation = relu, return_sequences = true),
        Bidirectional(
            LSTM(2, use_bias = false, recurrent_activation = softplus),
            merge_mode = sum
        ),
        Dense(1)
    ];
    m.compile(Adam::new(0.01), MeanSquaredError, ()).unwrap();
    let x = seqs(6, 5, 3, 30);
    let y = targets(6, 1, 31);
    let (_, grads) = m.value_and_grad(&x, &y).unwrap();
    let weights = m.weights();
    let names = |v: &[(String, Tensor)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&grads), names(&weights));
    let dirs: Vec<Vec<f32>> = weights
        .iter()
        .enumerate()
        .map(|(i, (_, w))| {
            strata::random::normal(&[w.numel()], 0.0, 1.0, 40 + i as u64)
                .unwrap()
                .iter()
                .copied()
                .collect()
        })
        .collect();
    // Small: at 1e-2 the difference is off by 1% (relu's kinks, curvature); at 2.5e-3 and
    // 1e-3 it agrees with the gradient to 1e-5.
    let eps = 2.5e-3f32;
    // The weights moved by ±eps along the direction, rounded to f32 as the model holds them.
    let moved = |s: f32| -> Vec<(String, Tensor)> {
        weights
            .iter()
            .zip(&dirs)
            .map(|((n, w), d)| {
                let v: Vec<f32> = values(w)
                    .iter()
                    .zip(d)
                    .map(|(w, d)| w + s * eps * d)
                    .collect();
                (n.clone(), Tensor::from_vec(w.dims(), v).unwrap())
            })
            .collect()
    };
    let (plus, minus) = (moved(1.0), moved(-1.0));
    // The gradient along the displacement the difference really takes (the f32 weights'
    // rounding included), in f64.
    let along: f64 = grads
        .iter()
        .zip(plus.iter().zip(&minus))
        .map(|((_, g), ((_, p), (_, q)))| {
            let (g, p, q) = (values(g), values(p), values(q));
            g.iter()
                .zip(p.iter().zip(&q))
                .map(|(g, (p, q))| f64::from(*g) * (f64::from(*p) - f64::from(*q)))
                .sum::<f64>()
        })
        .sum::<f64>()
        / (2.0 * f64::from(eps));
    let mut loss_at = |w: &[(String, Tensor)]| {
        m.set_weights(w).unwrap();
        m.value_and_grad(&x, &y).unwrap().0
    };
    let (lp, lm) = (loss_at(&plus), loss_at(&minus));
    let numeric = (lp - lm) / (2.0 * f64::from(eps));
    // The loss is computed in f32: each value is off by some ulps of itself (the second
    // differences of the loss at 1e-4 apart along this direction are at most 3 ulps, 1.8e-7
    // at 0.76). Allow 16 ε|L| per value, so the quotient's rounding error is at most
    // 2 · 16 ε|L| / (2 eps), about 6e-4 here.
    let noise = 16.0 * f64::from(f32::EPSILON) * lp.abs().max(lm.abs()) / f64::from(eps);
    // The derivative must stand far above that noise (it is about 1.9, 3000 times it), so
    // the comparison below is not one of rounding errors...
    assert!(
        along.abs() >= 100.0 * noise,
        "the directional derivative {along} is within 100x of the rounding noise {noise}"
    );
    // ... which allows the rounding noise twice over plus 0.1% of the derivative: the
    // truncation error (eps² times the third derivative) is 3e-6 of it here, and a wrong
    // gradient (a missed term, a wrong sign on one weight) moves a random direction's
    // derivative by far more than 0.1%.
    assert!(
        (numeric - along).abs() <= 2.0 * noise + 1e-3 * along.abs(),
        "central difference {numeric}, gradient {along} (rounding noise {noise})"
    );
}
