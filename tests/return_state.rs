//! Recurrent layers' states (`return_state`, Keras 3's order) in the graph form of
//! `model!`: each output bound by a tuple, states as the model's outputs and as later
//! layers' inputs; the states equal the output where Keras' arithmetic says they must,
//! gradients flow through them (central differences), the summary names each state as
//! Keras' "Connected to" does (`lstm[0][1]`), and such a model trains the same on the
//! native backend and on XLA CPU (which CI installs; these tests fail without it).
//! The states' values against Keras itself are in `runtime/tests/keras_recurrent_layers.rs`.

use strata::backend::Device;
use strata::loss::MeanSquaredError;
use strata::model;
use strata::nn::Architecture;
use strata::optim::Adam;
use strata::train::Fit;
use strata::{Model, Tensor};

/// The model is built, with the shapes and parameters the macro declared.
#[track_caller]
fn agrees<A: Architecture>(m: &mut Model<A>) {
    m.build(A::INPUT_SHAPE.expect("a graph model declares its input"))
        .unwrap();
    // A model of several outputs declares each one's shape apart (`output_shapes`).
    if A::OUTPUT_SHAPE.is_some() {
        assert_eq!(m.output_shape(), A::OUTPUT_SHAPE);
    }
    let declared = A::PARAMS.expect("all dims known");
    assert_eq!(declared.len(), m.params().len());
    for (d, p) in declared.iter().zip(m.params()) {
        assert!(d.matches(p), "{d:?} vs {p:?}");
    }
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

/// `n` sequences of 6 steps of 3 features.
fn sequences(n: usize, seed: u64) -> Tensor {
    Tensor::from(strata::random::normal(&[n, 6, 3], 0.0, 1.0, seed).unwrap())
}

#[test]
fn lstm_states_are_the_last_step_and_its_cell() {
    let mut m = model! {
        let x = Input((6, 3));
        let (seq, h, c) = LSTM(4, return_sequences = true, return_state = true)(x);
        (seq, h, c)
    };
    agrees(&mut m);
    assert_eq!(m.output_shapes().unwrap(), [vec![6, 4], vec![4], vec![4]]);
    let out = m.predict_outputs(sequences(5, 1)).unwrap();
    assert_eq!(out.len(), 3);
    let (seq, h, c) = (values(&out[0]), values(&out[1]), values(&out[2]));
    // Reading forwards, `h` is the sequence's last step.
    for b in 0..5 {
        assert_eq!(
            h[b * 4..b * 4 + 4],
            seq[b * 24 + 20..b * 24 + 24],
            "row {b}"
        );
    }
    // The cell state is not the output, `h = o ⊙ tanh(c)`: |h| < |tanh(c)| ≤ 1.
    assert_ne!(h, c);
    for (h, c) in h.iter().zip(&c) {
        assert!(h.abs() <= c.tanh().abs() + 1e-6, "h {h}, c {c}");
    }
}

#[test]
fn bidirectional_states_are_each_directions_last_step() {
    let mut m = model! {
        let x = Input((6, 3));
        let (y, forward_h, forward_c, backward_h, backward_c) =
            Bidirectional(LSTM(2, return_state = true))(x);
        (y, forward_h, forward_c, backward_h, backward_c)
    };
    agrees(&mut m);
    assert_eq!(
        m.output_shapes().unwrap(),
        [vec![4], vec![2], vec![2], vec![2], vec![2]]
    );
    let out = m.predict_outputs(sequences(3, 2)).unwrap();
    let y = values(&out[0]);
    let (fh, bh) = (values(&out[1]), values(&out[3]));
    // `concat`: the forward copy's last output, then the backward copy's (its state
    // after reading the sequence from the end).
    for b in 0..3 {
        assert_eq!(y[b * 4..b * 4 + 2], fh[b * 2..b * 2 + 2], "row {b}");
        assert_eq!(y[b * 4 + 2..b * 4 + 4], bh[b * 2..b * 2 + 2], "row {b}");
    }
}

model! {
    /// Every state used downstream: an LSTM's, and a bidirectional GRU's per direction.
    pub struct Stateful {
        let x = Input((6, 3));
        let (seq, h, c) = LSTM(4, return_sequences = true, return_state = true)(x);
        let (y, forward_h, backward_h) = Bidirectional(GRU(2, return_state = true))(seq);
        let s = Concatenate()([h, c, forward_h, backward_h]);
        Dense(1)(Concatenate()([y, s]))
    }
}

#[test]
fn the_summary_connects_each_state_as_keras_does() {
    let mut m = Stateful::model();
    agrees(&mut m);
    // Keras 3.15's own summary of this model has the same cells: the output shapes in
    // brackets, each state read as `lstm[0][1]`, `bidirectional[0][2]` (its column widths
    // differ, and it writes the tensors a layer reads comma-separated, as many a line as
    // fit; this table lists one a line, as for any graph).
    let want = "\
Model: \"stateful\"
┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ Layer (type)                 ┃ Output Shape         ┃    Param # ┃ Connected to                     ┃
┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ input_layer (InputLayer)     │ (None, 6, 3)         │          0 │ -                                │
├──────────────────────────────┼──────────────────────┼────────────┼──────────────────────────────────┤
│ lstm (LSTM)                  │ [(None, 6, 4),       │        128 │ input_layer[0][0]                │
│                              │ (None, 4), (None,    │            │                                  │
│                              │ 4)]                  │            │                                  │
├──────────────────────────────┼──────────────────────┼────────────┼──────────────────────────────────┤
│ bidirectional                │ [(None, 4), (None,   │         96 │ lstm[0][0]                       │
│ (Bidirectional)              │ 2), (None, 2)]       │            │                                  │
├──────────────────────────────┼──────────────────────┼────────────┼──────────────────────────────────┤
│ concatenate (Concatenate)    │ (None, 12)           │          0 │ lstm[0][1]                       │
│                              │                      │            │ lstm[0][2]                       │
│                              │                      │            │ bidirectional[0][1]              │
│                              │                      │            │ bidirectional[0][2]              │
├──────────────────────────────┼──────────────────────┼────────────┼──────────────────────────────────┤
│ concatenate_1 (Concatenate)  │ (None, 16)           │          0 │ bidirectional[0][0]              │
│                              │                      │            │ concatenate[0][0]                │
├──────────────────────────────┼──────────────────────┼────────────┼──────────────────────────────────┤
│ dense (Dense)                │ (None, 1)            │         17 │ concatenate_1[0][0]              │
└──────────────────────────────┴──────────────────────┴────────────┴──────────────────────────────────┘
 Total params: 241 (964.00 B)
 Trainable params: 241 (964.00 B)
 Non-trainable params: 0 (0.00 B)
";
    assert_eq!(m.summary(), want);
}

/// Trains `Stateful` to predict each sequence's mean; the losses per epoch and the
/// weights.
fn train(device: Device) -> (Vec<f64>, Vec<(String, Tensor)>) {
    let x = sequences(256, 3);
    let y: Vec<f32> = values(&x)
        .chunks(18)
        .map(|r| r.iter().sum::<f32>() / 18.0)
        .collect();
    let y = Tensor::from_vec(&[256, 1], y).unwrap();
    let mut m = Stateful::model();
    m.set_device(device).unwrap();
    m.compile(Adam::new(0.01), MeanSquaredError, ()).unwrap();
    let h = m
        .fit(
            &x,
            &y,
            Fit::epochs(6).batch_size(32).shuffle(false).verbose(0),
        )
        .unwrap();
    (h.history["loss"].clone(), m.weights())
}

#[test]
fn a_model_reading_states_trains_the_same_on_native_and_xla() {
    let (native, wn) = train(Device::Native);
    let (xla, wx) = train(Device::XlaCpu { devices: None });
    assert!(
        native[native.len() - 1] < 0.5 * native[0],
        "native losses {native:?}"
    );
    for (a, b) in native.iter().zip(&xla) {
        assert!(
            (a - b).abs() <= 1e-3 * a.abs().max(1e-3),
            "{native:?} vs {xla:?}"
        );
    }
    for ((name, a), (_, b)) in wn.iter().zip(&wx) {
        let (a, b) = (values(a), values(b));
        let scale = a.iter().fold(0f32, |m, v| m.max(v.abs()));
        let diff = a
            .iter()
            .zip(&b)
            .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(
            diff <= 1e-3 * scale.max(1e-3),
            "{name}: {diff} (scale {scale})"
        );
    }
}

/// The loss's derivative along a direction of every weight, by central differences,
/// equals the gradient's inner product with it: the gradient reaches the LSTM through its
/// final `h` (also the sequence's last step, which is read too) and its final `c`, which
/// nothing but the state returns.
#[test]
fn gradients_flow_through_the_states() {
    let mut m = model! {
        let x = Input((6, 3));
        let (seq, h, c) = LSTM(3, return_sequences = true, return_state = true)(x);
        let pooled = GlobalAveragePooling1D()(seq);
        Dense(1)(Concatenate()([pooled, h, c]))
    };
    m.compile(Adam::new(0.01), MeanSquaredError, ()).unwrap();
    let x = sequences(8, 4);
    let y = Tensor::from_vec(&[8, 1], (0..8).map(|i| i as f32 / 4.0 - 1.0).collect()).unwrap();
    let (_, grads) = m.value_and_grad(&x, &y).unwrap();
    let weights = m.weights();
    // A fixed direction per weight element, from a seeded normal draw.
    let directions: Vec<Vec<f32>> = weights
        .iter()
        .enumerate()
        .map(|(i, (_, w))| {
            let d = strata::random::normal(&[w.numel()], 0.0, 1.0, 10 + i as u64).unwrap();
            d.iter().copied().collect()
        })
        .collect();
    let along: f64 = grads
        .iter()
        .zip(&directions)
        .map(|((_, g), d)| {
            values(g)
                .iter()
                .zip(d)
                .map(|(g, d)| f64::from(*g) * f64::from(*d))
                .sum::<f64>()
        })
        .sum();
    let eps = 1e-2f32;
    let mut loss_at = |sign: f32| {
        let moved: Vec<(String, Tensor)> = weights
            .iter()
            .zip(&directions)
            .map(|((name, w), d)| {
                let v: Vec<f32> = values(w)
                    .iter()
                    .zip(d)
                    .map(|(w, d)| w + sign * eps * d)
                    .collect();
                (name.clone(), Tensor::from_vec(w.dims(), v).unwrap())
            })
            .collect();
        m.set_weights(&moved).unwrap();
        m.value_and_grad(&x, &y).unwrap().0
    };
    let numeric = (loss_at(1.0) - loss_at(-1.0)) / (2.0 * f64::from(eps));
    assert!(
        (numeric - along).abs() <= 5e-3 * along.abs().max(1e-2),
        "central difference {numeric}, gradient {along}"
    );
    assert!(
        along.abs() > 1e-3,
        "a direction the loss changes along: {along}"
    );
}

/// A graph assembled at run time (`nn::Functional`) reads a state by its output index,
/// and computes what the same graph written in `model!` computes; an index the call does
/// not give is a typed error.
#[test]
fn a_functional_model_reads_a_state_by_its_output_index() {
    use strata::nn::{Call, Dense, Functional, Layer, Port, Topology, LSTM};
    let graph = |output: usize| {
        let layers: Vec<Box<dyn Layer>> = vec![
            Box::new(LSTM {
                return_state: true,
                ..LSTM::new("lstm", 3)
            }),
            Box::new(Dense::new("dense", 2, strata::nn::Activation::Linear)),
        ];
        let topology = Topology {
            calls: vec![
                Call {
                    layer: 0,
                    inputs: vec![Port::Input(0)],
                },
                Call {
                    layer: 1,
                    inputs: vec![Port::Call { call: 0, output }],
                },
            ],
            outputs: vec![Port::call(1)],
        };
        Model::new(Functional::new(Some(vec![6, 3]), layers, topology))
    };
    let written = model! {
        let x = Input((6, 3));
        let (_y, _h, c) = LSTM(3, return_state = true)(x);
        Dense(2)(c)
    };
    let mut built = graph(2);
    built.set_weights(&written.weights()).unwrap();
    let x = sequences(4, 5);
    assert_eq!(
        values(&built.predict(&x).unwrap()),
        values(&written.predict(&x).unwrap())
    );
    let e = graph(3).predict(&x).unwrap_err().to_string();
    assert!(e.contains("output: 3"), "{e}");
}
