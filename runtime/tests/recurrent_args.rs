//! Recurrent layers built at run time: arguments no
//! compiler checked (sizes that overflow, rates out of range, a wrapped layer that already
//! reads backwards), weights of the wrong shape, and `TimeDistributed` of a recurrent
//! layer. Each must be a typed error or the right answer, never a panic.

use strata_runtime::backend::Device;
use strata_runtime::loss::MeanSquaredError;
use strata_runtime::nn::*;
use strata_runtime::optim::SGD;
use strata_runtime::train::Fit;
use strata_runtime::{Model, Tensor};

fn seqs(dims: &[usize], seed: u64) -> Tensor {
    Tensor::from(strata_runtime::random::normal(dims, 0.0, 1.0, seed).unwrap())
}

fn one(input: Vec<usize>, layer: Box<dyn Layer>) -> Model<Sequential> {
    Model::new(Sequential::new(Some(input), vec![layer]))
}

/// Building and predicting: a typed error, and no panic.
#[track_caller]
fn refused(mut m: Model<Sequential>, x: &Tensor, what: &str) -> String {
    let input = x.dims()[1..].to_vec();
    let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.build(&input)));
    let e = match built {
        Ok(Err(e)) => e.to_string(),
        Ok(Ok(())) => {
            let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.predict(x)));
            match p {
                Ok(Err(e)) => e.to_string(),
                Ok(Ok(t)) => panic!("{what}: accepted, predicted {:?}", t.dims()),
                Err(_) => panic!("{what}: predict panicked"),
            }
        }
        Err(_) => panic!("{what}: build panicked"),
    };
    assert!(!e.is_empty(), "{what}");
    e
}

/// `refused`, and its message names what was refused and why.
#[track_caller]
fn refused_saying(m: Model<Sequential>, x: &Tensor, what: &str, parts: &[&str]) {
    let e = refused(m, x, what);
    for part in parts {
        assert!(e.contains(part), "{what}: `{part}` missing from: {e}");
    }
}

#[test]
fn units_whose_weights_overflow_are_typed_errors() {
    let x = seqs(&[2, 3, 4], 1);
    let huge = usize::MAX / 2;
    // Several gates: the weights' columns (gates · units) overflow; the layer's own check
    // says so before any shape is computed.
    let columns = |gates: &str| {
        [
            "`units` 9223372036854775807 is too large",
            &format!("{gates} · units columns"),
        ]
        .map(str::to_string)
    };
    let lstm = columns("4");
    let lstm: Vec<&str> = lstm.iter().map(String::as_str).collect();
    let gru = columns("3");
    let gru: Vec<&str> = gru.iter().map(String::as_str).collect();
    refused_saying(
        one(vec![3, 4], Box::new(LSTM::new("lstm", huge))),
        &x,
        "LSTM(usize::MAX / 2)",
        &lstm,
    );
    refused_saying(
        one(vec![3, 4], Box::new(GRU::new("gru", huge))),
        &x,
        "GRU(usize::MAX / 2)",
        &gru,
    );
    refused_saying(
        one(
            vec![3, 4],
            Box::new(Bidirectional::new("bidirectional", LSTM::new("lstm", huge))),
        ),
        &x,
        "Bidirectional(LSTM(usize::MAX / 2))",
        &lstm,
    );
    refused_saying(
        one(
            vec![3, 4],
            Box::new(TimeDistributed::new(
                "time_distributed",
                GRU::new("gru", huge),
            )),
        ),
        &x,
        "TimeDistributed(GRU(usize::MAX / 2))",
        &gru,
    );
    // One gate: the columns fit, the weights' element counts do not; the first weight's
    // size is the error, before anything is allocated.
    let overflow = "needs more than 2^64 bytes";
    refused_saying(
        one(vec![3, 4], Box::new(SimpleRNN::new("simple_rnn", huge))),
        &x,
        "SimpleRNN(usize::MAX / 2)",
        &[
            "simple_rnn_cell/kernel` f32[4, 9223372036854775807]",
            overflow,
        ],
    );
    refused_saying(
        one(
            vec![3, 4],
            Box::new(TimeDistributed::new(
                "time_distributed",
                Dense::new("dense", huge, Activation::Linear),
            )),
        ),
        &x,
        "TimeDistributed(Dense(usize::MAX / 2))",
        &["dense/kernel` f32[4, 9223372036854775807]", overflow],
    );
}

#[test]
fn weights_too_large_to_allocate_are_refused_before_any_is_sampled() {
    let x = seqs(&[2, 3, 4], 1);
    // The kernel alone (4 × 2^33 f32, 128 GiB) could be reserved on a large machine or
    // under overcommit; the recurrent kernel (2^66 elements) cannot exist. Every size is
    // checked before the kernel is sampled, so this fails at once on any machine.
    refused_saying(
        one(vec![3, 4], Box::new(SimpleRNN::new("simple_rnn", 1 << 33))),
        &x,
        "SimpleRNN(2^33)",
        &[
            "simple_rnn_cell/recurrent_kernel` f32[8589934592, 8589934592]",
            "2^64 bytes",
        ],
    );
    // Each weight alone fits an address space (the kernel (2^31 - 1) × 2^30 f32 is
    // 2^63 - 2^32 bytes, the recurrent kernel 2^62), their sum does not: the parameters
    // as a whole are refused, before either is sampled.
    let features = (1usize << 31) - 1;
    let mut m = one(
        vec![3, features],
        Box::new(SimpleRNN::new("simple_rnn", 1 << 30)),
    );
    let e = m.build(&[3, features]).unwrap_err().to_string();
    assert!(e.contains("its parameters"), "{e}");
}

#[test]
fn arguments_out_of_range_are_typed_errors() {
    let x = seqs(&[2, 3, 4], 1);
    let mut cases: Vec<(&str, Box<dyn Layer>)> = vec![
        ("units 0", Box::new(LSTM::new("lstm", 0))),
        (
            "dropout 1.0",
            Box::new(LSTM {
                dropout: 1.0,
                ..LSTM::new("lstm", 2)
            }),
        ),
        (
            "recurrent_dropout NaN",
            Box::new(GRU {
                recurrent_dropout: f64::NAN,
                ..GRU::new("gru", 2)
            }),
        ),
        (
            "dropout -0.1",
            Box::new(SimpleRNN {
                dropout: -0.1,
                ..SimpleRNN::new("simple_rnn", 2)
            }),
        ),
        (
            "Bidirectional of a layer reading backwards",
            Box::new(Bidirectional::new(
                "bidirectional",
                GRU {
                    go_backwards: true,
                    ..GRU::new("gru", 2)
                },
            )),
        ),
        (
            "Bidirectional of units 0",
            Box::new(Bidirectional::new("bidirectional", SimpleRNN::new("s", 0))),
        ),
        (
            "TimeDistributed of units 0",
            Box::new(TimeDistributed::new(
                "time_distributed",
                Dense::new("dense", 0, Activation::Linear),
            )),
        ),
    ];
    for (what, layer) in cases.drain(..) {
        let e = refused(one(vec![3, 4], layer), &x, what);
        eprintln!("{what}: {e}");
    }
    // Rank-2 input to a recurrent layer, and to TimeDistributed.
    let flat = seqs(&[2, 4], 2);
    refused(
        one(vec![4], Box::new(LSTM::new("lstm", 2))),
        &flat,
        "LSTM on rank 1",
    );
    refused(
        one(
            vec![4],
            Box::new(TimeDistributed::new(
                "time_distributed",
                Dense::new("dense", 2, Activation::Linear),
            )),
        ),
        &flat,
        "TimeDistributed on rank 1",
    );
}

#[test]
fn recurrent_weights_of_the_wrong_shape_are_typed_errors() {
    let m = one(vec![3, 4], Box::new(GRU::new("gru", 2)));
    let w = m.weights();
    for (i, (name, t)) in w.iter().enumerate() {
        let mut bad = w.clone();
        let mut dims = t.dims().to_vec();
        dims[0] += 1;
        bad[i] = (
            name.clone(),
            Tensor::zeros(&strata_runtime::ir::TensorType::new(t.dtype(), dims)).unwrap(),
        );
        let mut m2 = one(vec![3, 4], Box::new(GRU::new("gru", 2)));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m2.set_weights(&bad)));
        match r {
            Ok(Err(_)) => {}
            Ok(Ok(())) => {
                let p = m2.predict(seqs(&[2, 3, 4], 3));
                assert!(p.is_err(), "{name}: wrong shape accepted");
            }
            Err(_) => panic!("{name}: set_weights panicked"),
        }
    }
}

/// `TimeDistributed(LSTM(3))` over `(batch, 2, 5, 4)`: an LSTM over each of the 2 sequences
/// of 5 steps, the same as running the LSTM on each slice; native ≡ XLA CPU; it trains.
#[test]
fn time_distributed_lstm_is_the_lstm_on_every_slice() {
    let td = || {
        Model::new(Sequential::new(
            Some(vec![2, 5, 4]),
            vec![Box::new(TimeDistributed::new(
                "time_distributed",
                LSTM {
                    return_sequences: false,
                    ..LSTM::new("lstm", 3)
                },
            ))],
        ))
    };
    let m = td();
    let x = seqs(&[3, 2, 5, 4], 4);
    let y = m.predict(&x).unwrap();
    assert_eq!(y.dims(), [3, 2, 3]);
    let inner = Model::new(Sequential::new(
        Some(vec![5, 4]),
        vec![Box::new(LSTM::new("lstm", 3))],
    ));
    let mut inner = inner;
    let tw = m.weights();
    let iw: Vec<(String, Tensor)> = inner
        .weights()
        .iter()
        .zip(&tw)
        .map(|((n, _), (_, t))| (n.clone(), t.clone()))
        .collect();
    inner.set_weights(&iw).unwrap();
    let xv = x.to_vec::<f32>().unwrap();
    let slices = Tensor::from_vec(&[6, 5, 4], xv).unwrap();
    let want = inner.predict(&slices).unwrap().to_vec::<f32>().unwrap();
    let got = y.to_vec::<f32>().unwrap();
    for (a, b) in got.iter().zip(&want) {
        assert!((a - b).abs() < 1e-6, "{got:?} vs {want:?}");
    }
    let mut mx = td();
    mx.set_device(Device::XlaCpu { devices: None }).unwrap();
    mx.set_weights(&m.weights()).unwrap();
    let gx = mx.predict(&x).unwrap().to_vec::<f32>().unwrap();
    for (a, b) in got.iter().zip(&gx) {
        assert!((a - b).abs() < 1e-5, "{got:?} vs {gx:?}");
    }
    let mut t = td();
    t.compile(SGD::new(0.1), MeanSquaredError, ()).unwrap();
    t.set_steps_per_execution(2).unwrap();
    let target = seqs(&[3, 2, 3], 5);
    let h = t
        .fit(&x, &target, Fit::epochs(2).batch_size(2).verbose(0))
        .unwrap();
    assert!(h.history["loss"].iter().all(|l| l.is_finite()));
}
