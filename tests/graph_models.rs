//! The graph form of `model!` (Keras' functional API): skip connections, merge layers,
//! shared layers and nested calls compile, build to the shapes and parameters the macro
//! declared, compute what they say, print Keras' functional summary and train, on the
//! native backend and on XLA CPU (which CI installs; these tests fail without it).

use strata::backend::Device;
use strata::loss::SparseCategoricalCrossentropy;
use strata::metrics::Accuracy;
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
    assert_eq!(m.output_shape(), A::OUTPUT_SHAPE);
    let declared = A::PARAMS.expect("all dims known");
    assert_eq!(declared.len(), m.params().len());
    for (d, p) in declared.iter().zip(m.params()) {
        assert!(d.matches(p), "{d:?} vs {p:?}");
    }
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn the_residual_block_of_the_issue_builds_and_runs() {
    let mut m = model! {
        let x = Input((28, 28, 1));
        let h = Conv2D(16, 3, padding = same, activation = relu)(x);
        let y = Conv2D(16, 3, padding = same)(h);
        let y = Add()([y, h]);
        let y = Activation(relu)(y);
        let z = GlobalAveragePooling2D()(y);
        Dense(10, softmax)(z)
    };
    agrees(&mut m);
    assert_eq!(m.name(), "functional");
    let names: Vec<String> = m.weights().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "conv2d/kernel",
            "conv2d/bias",
            "conv2d_1/kernel",
            "conv2d_1/bias",
            "dense/kernel",
            "dense/bias"
        ]
    );
    let x = strata::random::normal(&[5, 28, 28, 1], 0.0, 1.0, 3).unwrap();
    let p = m.predict(&x).unwrap();
    assert_eq!(p.dims(), [5, 10]);
    for row in values(&p).chunks(10) {
        let sum: f32 = row.iter().sum();
        assert!((sum - 1.0).abs() < 1e-5, "softmax rows sum to 1: {row:?}");
    }
}

/// Every merge of `x` and `s = sum(x)` (a Dense of ones), joined by a Concatenate: the
/// values by hand.
#[test]
fn merge_layers_compute_what_they_say() {
    let mut m = model! {
        let x = Input(3);
        let s = Dense(3, use_bias = false, kernel_initializer = ones)(x);
        Concatenate()([
            Add()([x, s]),
            Subtract()([x, s]),
            Multiply()([x, s]),
            Average()([x, s, s]),
            Maximum()([x, s]),
            Minimum()([s, x]),
        ])
    };
    agrees(&mut m);
    assert_eq!(m.output_shape(), Some(&[18][..]));
    let x = Tensor::from_vec(&[2, 3], vec![1.0f32, -2.0, 4.0, 0.5, 0.25, -1.0]).unwrap();
    let got = values(&m.predict(&x).unwrap());
    let mut want = Vec::new();
    for row in [[1.0f32, -2.0, 4.0], [0.5, 0.25, -1.0]] {
        let s: f32 = row.iter().sum();
        want.extend(row.map(|v| v + s));
        want.extend(row.map(|v| v - s));
        want.extend(row.map(|v| v * s));
        want.extend(row.map(|v| (v + s + s) / 3.0));
        want.extend(row.map(|v| v.max(s)));
        want.extend(row.map(|v| v.min(s)));
    }
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{got:?} vs {want:?}"
        );
    }
}

/// Sizes of 1 broadcast against the others', as in Keras; Concatenate joins any axis.
#[test]
fn merges_broadcast_and_concatenate_along_an_axis() {
    let mut m = model! {
        let x = Input((4, 3));
        let s = Dense(1, use_bias = false, kernel_initializer = ones)(x);
        let y = Multiply()([x, s]);
        Concatenate(axis = 1)([x, y])
    };
    agrees(&mut m);
    assert_eq!(m.output_shape(), Some(&[8, 3][..]));
    let x = Tensor::from_vec(&[1, 4, 3], (1..=12).map(|v| v as f32).collect()).unwrap();
    let got = values(&m.predict(&x).unwrap());
    let mut want: Vec<f32> = (1..=12).map(|v| v as f32).collect();
    for r in 0..4 {
        let row: Vec<f32> = (0..3).map(|c| (3 * r + c + 1) as f32).collect();
        let s: f32 = row.iter().sum();
        want.extend(row.iter().map(|v| v * s));
    }
    assert_eq!(got, want);
}

/// A layer bound once and called twice is one layer: one set of weights, counted once in
/// the summary, used by both calls.
#[test]
fn a_shared_layer_has_one_set_of_weights() {
    model! {
        /// The same Dense applied twice.
        pub struct Twice {
            let x = Input(2, name = "features");
            let enc = Dense(2, use_bias = false, kernel_initializer = ones);
            let h = enc(x);
            enc(h)
        }
    }
    let mut m = Twice::model();
    agrees(&mut m);
    assert_eq!(m.params().len(), 1);
    let x = Tensor::from_vec(&[1, 2], vec![1.0f32, 2.0]).unwrap();
    // Ones twice: each output is the sum of the inputs, then of those sums.
    assert_eq!(values(&m.predict(&x).unwrap()), [6.0, 6.0]);
    let s = m.summary();
    assert!(s.contains("Model: \"twice\""), "{s}");
    assert!(s.contains("features (InputLayer)"), "{s}");
    assert!(s.contains("Total params: 4 (16.00 B)"), "{s}");
}

#[test]
fn the_summary_of_a_graph_is_keras_functional_table() {
    let m = model! {
        let x = Input(8);
        let h = Dense(4, relu)(x);
        let y = Add()([Dense(4)(h), h]);
        Dense(2, softmax)(y)
    };
    let want = "\
Model: \"functional\"
┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ Layer (type)                 ┃ Output Shape         ┃    Param # ┃ Connected to                     ┃
┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ input_layer (InputLayer)     │ (None, 8)            │          0 │ -                                │
├──────────────────────────────┼──────────────────────┼────────────┼──────────────────────────────────┤
│ dense (Dense)                │ (None, 4)            │         36 │ input_layer[0][0]                │
├──────────────────────────────┼──────────────────────┼────────────┼──────────────────────────────────┤
│ dense_1 (Dense)              │ (None, 4)            │         20 │ dense[0][0]                      │
├──────────────────────────────┼──────────────────────┼────────────┼──────────────────────────────────┤
│ add (Add)                    │ (None, 4)            │          0 │ dense_1[0][0]                    │
│                              │                      │            │ dense[0][0]                      │
├──────────────────────────────┼──────────────────────┼────────────┼──────────────────────────────────┤
│ dense_2 (Dense)              │ (None, 2)            │         10 │ add[0][0]                        │
└──────────────────────────────┴──────────────────────┴────────────┴──────────────────────────────────┘
 Total params: 66 (264.00 B)
 Trainable params: 66 (264.00 B)
 Non-trainable params: 0 (0.00 B)
";
    assert_eq!(m.summary(), want);
}

/// A residual MLP learns a task a linear model cannot (the sign of the product of two
/// inputs), on both backends, to the same losses.
fn train_residual(device: Device) -> (f64, Vec<(String, Tensor)>) {
    let n = 2048;
    let x = strata::random::normal(&[n, 2], 0.0, 1.0, 5).unwrap();
    let y: Vec<i32> = x
        .outer_iter()
        .map(|r| i32::from(r[0] * r[1] > 0.0))
        .collect();
    let y = ndarray::Array1::from(y);
    let mut m = model! {
        let x = Input(2);
        let h = Dense(32, relu)(x);
        let r = Dense(32, relu)(h);
        let h = Add()([h, r]);
        Dense(2, softmax)(h)
    };
    m.set_device(device).unwrap();
    m.compile(
        Adam::new(0.01),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    let history = m
        .fit(
            &x,
            &y,
            Fit::epochs(20).batch_size(64).shuffle(false).verbose(0),
        )
        .unwrap();
    let acc = *history.get("accuracy").unwrap().last().unwrap();
    (acc, m.weights())
}

#[test]
fn a_residual_model_trains_the_same_on_native_and_xla() {
    let (native, wn) = train_residual(Device::Native);
    let (xla, wx) = train_residual(Device::XlaCpu { devices: None });
    assert!(native >= 0.95, "native accuracy {native}");
    assert!((native - xla).abs() <= 0.01, "native {native}, xla {xla}");
    for ((name, a), (_, b)) in wn.iter().zip(&wx) {
        let (a, b) = (values(a), values(b));
        let scale = a.iter().fold(0f32, |m, v| m.max(v.abs()));
        let diff = a
            .iter()
            .zip(&b)
            .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(
            diff <= 1e-2 * scale.max(1e-3),
            "{name}: {diff} (scale {scale})"
        );
    }
}
