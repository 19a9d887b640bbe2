//! Graph models with several inputs and outputs (the TwoTower, as written): the
//! summary, predictions by position and by name equal to the weights' arithmetic, one loss
//! per output with weights, Keras' log names, training to a stated accuracy on the native
//! backend and on XLA CPU (which CI installs; these tests fail without it), and the typed
//! errors of data that does not fit.

use ndarray::{Array1, Array2, Axis};
use strata::backend::Device;
use strata::data::Data;
use strata::loss::{BinaryCrossentropy, PerOutput, SparseCategoricalCrossentropy};
use strata::metrics::{on_output, Accuracy};
use strata::model;
use strata::optim::Adam;
use strata::train::Fit;
use strata::{Model, Tensor};

model! {
    /// Decides whether two items match, and which kind the pair is.
    pub struct TwoTower {
        let a = Input(32, name = "left");
        let b = Input(32, name = "right");
        let enc = Dense(16, relu);              // a layer bound once and called twice shares its weights
        let ha = enc(a);
        let hb = enc(b);
        let c = Concatenate(axis = -1)([ha, hb]);
        (Dense(1, sigmoid, name = "match")(c), Dense(4, softmax, name = "kind")(c))
    }
}

fn tensor(a: Array2<f32>) -> Tensor {
    Tensor::from(a.into_dyn())
}

/// `n` pairs of 32 features: they match when `left`'s sum exceeds `right`'s, and the kind
/// is which quarter of `left`'s features has the largest sum.
fn pairs(n: usize, seed: u64) -> (Array2<f32>, Array2<f32>, Array2<f32>, Array1<i32>) {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) as f32) / (1u64 << 31) as f32
    };
    let left = Array2::from_shape_fn((n, 32), |_| next());
    let right = Array2::from_shape_fn((n, 32), |_| next());
    let matched = Array2::from_shape_fn((n, 1), |(i, _)| {
        f32::from(u8::from(left.row(i).sum() > right.row(i).sum()))
    });
    let kind = Array1::from_shape_fn(n, |i| {
        let quarter = |q: usize| left.row(i).iter().skip(8 * q).take(8).sum::<f32>();
        (0..4)
            .max_by(|&x, &y| quarter(x).total_cmp(&quarter(y)))
            .unwrap_or(0) as i32
    });
    (left, right, matched, kind)
}

fn compiled(device: Device) -> Model<TwoTower> {
    let mut m = TwoTower::model();
    m.set_device(device).unwrap();
    m.compile(
        Adam::new(0.01),
        PerOutput::new()
            .loss("match", BinaryCrossentropy::default())
            .loss("kind", SparseCategoricalCrossentropy::default())
            .weight("kind", 0.5),
        [on_output("match", Accuracy), on_output("kind", Accuracy)],
    )
    .unwrap();
    m
}

#[test]
fn the_two_tower_summary_names_both_inputs_and_shares_the_encoder() {
    let m = TwoTower::model();
    assert_eq!(m.input_count(), 2);
    assert_eq!(m.output_names(), ["match", "kind"]);
    assert_eq!(m.input_shapes().unwrap(), [vec![32], vec![32]]);
    assert_eq!(m.output_shapes().unwrap(), [vec![1], vec![4]]);
    let s = m.summary();
    assert!(s.contains("left (InputLayer)"), "{s}");
    assert!(s.contains("right (InputLayer)"), "{s}");
    assert!(s.contains("left[0][0]"), "{s}");
    assert!(s.contains("right[0][0]"), "{s}");
    assert!(s.contains("dense[0][0]"), "{s}");
    assert!(s.contains("dense[1][0]"), "{s}");
    // The encoder once (32·16 + 16), match 33·1, kind 33·4... on the concatenation of 32.
    assert!(s.contains("Total params: 693"), "{s}");
}

/// The outputs by the weights' arithmetic: relu(x W + b) per tower, concatenated, then
/// each head.
fn by_hand(
    m: &Model<TwoTower>,
    left: &Array2<f32>,
    right: &Array2<f32>,
) -> (Array2<f32>, Array2<f32>) {
    let w: Vec<Array2<f32>> = m
        .weights()
        .into_iter()
        .map(|(_, t)| {
            let a = t.to_vec::<f32>().unwrap();
            let d = t.dims().to_vec();
            let (r, c) = if d.len() == 2 {
                (d[0], d[1])
            } else {
                (1, d[0])
            };
            Array2::from_shape_vec((r, c), a).unwrap()
        })
        .collect();
    let tower = |x: &Array2<f32>| (x.dot(&w[0]) + &w[1]).mapv(|v| v.max(0.0));
    let c = ndarray::concatenate(Axis(1), &[tower(left).view(), tower(right).view()]).unwrap();
    let matched = (c.dot(&w[2]) + &w[3]).mapv(|v| 1.0 / (1.0 + (-v).exp()));
    let mut kind = c.dot(&w[4]) + &w[5];
    for mut row in kind.rows_mut() {
        let max = row.fold(f32::MIN, |a, &b| a.max(b));
        row.mapv_inplace(|v| (v - max).exp());
        let sum = row.sum();
        row.mapv_inplace(|v| v / sum);
    }
    (matched, kind)
}

#[test]
fn predictions_by_position_and_by_name_are_the_weights_arithmetic() {
    let m = TwoTower::model();
    let (left, right, _, _) = pairs(40, 1);
    let by_list = m.predict_outputs((left.clone(), right.clone())).unwrap();
    // By name, in the other order.
    let by_name = m
        .predict_outputs(Data::named([
            ("right", right.clone()),
            ("left", left.clone()),
        ]))
        .unwrap();
    assert_eq!(by_list.len(), 2);
    assert_eq!(by_list[0].dims(), [40, 1]);
    assert_eq!(by_list[1].dims(), [40, 4]);
    for (a, b) in by_list.iter().zip(&by_name) {
        assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    }
    let (matched, kind) = by_hand(&m, &left, &right);
    for (got, want) in by_list.iter().zip([matched, kind]) {
        for (g, w) in got.to_vec::<f32>().unwrap().iter().zip(want.iter()) {
            assert!((g - w).abs() < 1e-5, "{g} vs {w}");
        }
    }
}

fn train(device: Device) -> (Model<TwoTower>, strata::train::History) {
    let mut m = compiled(device);
    let (left, right, matched, kind) = pairs(2000, 2);
    let h = m
        .fit(
            Data::named([("left", left), ("right", right)]),
            Data::named([
                ("match", tensor(matched)),
                ("kind", Tensor::from(kind.into_dyn())),
            ]),
            Fit::epochs(8)
                .batch_size(32)
                .validation_split(0.2)
                .verbose(0),
        )
        .unwrap();
    (m, h)
}

fn check_training(device: Device) {
    let (m, h) = train(device);
    let mut keys: Vec<&str> = h.history.keys().map(|k| k.as_str()).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "kind_accuracy",
            "kind_loss",
            "loss",
            "match_accuracy",
            "match_loss",
            "val_kind_accuracy",
            "val_kind_loss",
            "val_loss",
            "val_match_accuracy",
            "val_match_loss"
        ]
    );
    let (left, right, matched, kind) = pairs(500, 3);
    let logs = m
        .evaluate(
            (left, right),
            vec![tensor(matched), Tensor::from(kind.into_dyn())],
        )
        .unwrap();
    let get = |k: &str| logs.get(k).unwrap();
    // The total is the weighted sum of the outputs' losses.
    let total = get("match_loss") + 0.5 * get("kind_loss");
    assert!((get("loss") - total).abs() < 1e-4, "{logs:?}");
    // Both tasks are learnt (each is linear in the inputs; chance is 0.5 and 0.25).
    assert!(get("match_accuracy") >= 0.9, "{logs:?}");
    assert!(get("kind_accuracy") >= 0.8, "{logs:?}");
    let loss = &h.history["loss"];
    assert!(loss[loss.len() - 1] < loss[0], "{loss:?}");
}

#[test]
fn two_tower_trains_natively() {
    check_training(Device::Native);
}

#[test]
fn two_tower_trains_on_xla_cpu() {
    check_training(Device::XlaCpu { devices: None });
}

#[test]
fn data_that_does_not_fit_is_a_typed_error() {
    let mut m = compiled(Device::Native);
    let (left, right, matched, kind) = pairs(8, 4);
    let err = |e: strata::Error| e.to_string();
    let targets = || {
        Data::List(vec![
            tensor(matched.clone()),
            Tensor::from(kind.clone().into_dyn()),
        ])
    };
    // One array for two inputs.
    let e = err(m
        .fit(left.clone(), targets(), Fit::default().verbose(0))
        .unwrap_err());
    assert!(e.contains("2 inputs (left, right)"), "{e}");
    // An unknown name.
    let e = err(m
        .fit(
            Data::named([("left", left.clone()), ("rigth", right.clone())]),
            targets(),
            Fit::default().verbose(0),
        )
        .unwrap_err());
    assert!(e.contains("no input `rigth`"), "{e}");
    // A wrong shape names the input.
    let narrow = Array2::<f32>::zeros((8, 31));
    let e = err(m
        .fit((left.clone(), narrow), targets(), Fit::default().verbose(0))
        .unwrap_err());
    assert!(e.contains("input `right`"), "{e}");
    // Targets: a missing output, and a label out of range named by its output.
    let e = err(m
        .fit(
            (left.clone(), right.clone()),
            Data::named([("match", tensor(matched.clone()))]),
            Fit::default().verbose(0),
        )
        .unwrap_err());
    assert!(e.contains("no array for the output `kind`"), "{e}");
    let bad = Array1::<i32>::from_elem(8, 7);
    let e = err(m
        .fit(
            (left.clone(), right.clone()),
            (matched.clone(), bad),
            Fit::default().verbose(0),
        )
        .unwrap_err());
    assert!(e.contains("kind"), "{e}");
    // A Dataset holds one array of inputs and one of targets.
    let ds = strata::data::Dataset::from_arrays(left.clone(), matched.clone()).unwrap();
    let e = err(m.fit_dataset(&ds, Fit::default().verbose(0)).unwrap_err());
    assert!(e.contains("2 inputs and 2 outputs"), "{e}");
    // One sample of a model of several inputs has no single array.
    let e = err(m.predict_one(left.row(0).to_owned()).unwrap_err());
    assert!(e.contains("predict_one"), "{e}");
    // predict of a model with two outputs points at predict_outputs.
    let e = err(m.predict((left.clone(), right.clone())).unwrap_err());
    assert!(e.contains("predict_outputs"), "{e}");
    // A metric that does not say which output it measures, as Keras refuses it.
    let mut m = TwoTower::model();
    let e = err(m
        .compile(Adam::new(0.01), BinaryCrossentropy::default(), [Accuracy])
        .unwrap_err());
    assert!(e.contains("on_output"), "{e}");
    let e = err(m
        .compile(
            Adam::new(0.01),
            PerOutput::new().loss("match", BinaryCrossentropy::default()),
            (),
        )
        .unwrap_err());
    assert!(e.contains("no loss for the output `kind`"), "{e}");
}

#[test]
fn an_id_input_beside_a_float_input_keeps_its_integers() {
    // Token ids through an Embedding, a float feature vector beside them.
    let m = model! {
        let ids = Input(3, name = "ids");
        let feats = Input(2, name = "feats");
        let e = Flatten()(Embedding(50, 2)(ids));
        Dense(1)(Concatenate()([e, feats]))
    };
    let ids = Array2::from_shape_vec((2, 3), vec![0i32, 49, 7, 3, 3, 12]).unwrap();
    let feats = Array2::from_shape_vec((2, 2), vec![0.5f32, -1.0, 2.0, 0.25]).unwrap();
    let out = m
        .predict_outputs((ids.clone(), feats.clone()))
        .unwrap()
        .remove(0);
    let w: Vec<Vec<f32>> = m
        .weights()
        .into_iter()
        .map(|(_, t)| t.to_vec::<f32>().unwrap())
        .collect();
    let (table, kernel, bias) = (&w[0], &w[1], w[2][0]);
    for i in 0..2 {
        let mut want = bias;
        for j in 0..3 {
            let id = ids[[i, j]] as usize;
            for k in 0..2 {
                want += table[id * 2 + k] * kernel[j * 2 + k];
            }
        }
        want += feats[[i, 0]] * kernel[6] + feats[[i, 1]] * kernel[7];
        let got = out.to_vec::<f32>().unwrap()[i];
        assert!((got - want).abs() < 1e-5, "{got} vs {want}");
    }
    // Floats for the ids are refused, as for a model of one input.
    let e = m
        .predict_outputs((ids.mapv(|v| v as f32), feats))
        .unwrap_err()
        .to_string();
    assert!(e.contains("input `ids`"), "{e}");
}

#[test]
fn an_attention_mask_input_hides_the_value_steps_it_masks() {
    let m = model! {
        let x = Input((4, 6), name = "tokens");
        let mask = Input((4, 4), name = "mask");
        let a = MultiHeadAttention(num_heads = 2, key_dim = 3)(x, x, attention_mask = mask);
        Add()([x, a])
    };
    let plain = model! {
        let x = Input((4, 6), name = "tokens");
        let a = MultiHeadAttention(num_heads = 2, key_dim = 3)(x, x);
        Add()([x, a])
    };
    assert_eq!(m.input_count(), 2);
    let mut plain = plain;
    plain.set_weights(&m.weights()).unwrap();
    let x = ndarray::Array3::from_shape_fn((2, 4, 6), |(b, t, f)| {
        ((b * 24 + t * 6 + f) as f32 * 0.37).sin()
    });
    let ones = ndarray::Array3::<f32>::ones((2, 4, 4));
    let masked = m.predict((x.clone(), ones)).unwrap();
    let unmasked = plain.predict(x.clone()).unwrap();
    for (a, b) in masked
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .zip(unmasked.to_vec::<f32>().unwrap())
    {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
    // Every query step sees only steps 0 and 1: changing steps 2 and 3 changes only
    // their own rows (the residual and their queries), not what steps 0 and 1 attend to.
    let mut seen = ndarray::Array3::<f32>::zeros((2, 4, 4));
    seen.slice_mut(ndarray::s![.., .., ..2]).fill(1.0);
    let mut other = x.clone();
    other
        .slice_mut(ndarray::s![.., 2.., ..])
        .mapv_inplace(|v| v * -3.0 + 1.0);
    let a = m.predict((x, seen.clone())).unwrap();
    let b = m.predict((other, seen)).unwrap();
    let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    for batch in 0..2 {
        for t in 0..2 {
            for f in 0..6 {
                let i = batch * 24 + t * 6 + f;
                assert!((a[i] - b[i]).abs() < 1e-5, "step {t}: {} vs {}", a[i], b[i]);
            }
        }
    }
}

#[test]
fn a_functional_model_assembled_at_run_time_takes_several_inputs() {
    use strata::nn::{Call, Concatenate, Dense, Functional, Layer, Port, Topology};
    let layers: Vec<Box<dyn Layer>> = vec![
        Box::new(Concatenate::new("concatenate")),
        Box::new(Dense::new("head", 3, strata::nn::Activation::Linear)),
    ];
    let topology = Topology {
        calls: vec![
            Call {
                layer: 0,
                inputs: vec![Port::Input(0), Port::Input(1)],
            },
            Call {
                layer: 1,
                inputs: vec![Port::call(0)],
            },
        ],
        outputs: vec![Port::call(1), Port::call(0)],
    };
    let f = Functional::with_inputs(
        vec![("a".into(), vec![2]), ("b".into(), vec![3])],
        layers,
        topology,
    );
    let m = Model::new(f);
    assert_eq!(m.input_shapes().unwrap(), [vec![2], vec![3]]);
    assert_eq!(m.output_names(), ["head", "concatenate"]);
    let a = Array2::from_shape_vec((1, 2), vec![1f32, 2.]).unwrap();
    let b = Array2::from_shape_vec((1, 3), vec![3f32, 4., 5.]).unwrap();
    let out = m
        .predict_outputs(Data::named([("b", b), ("a", a)]))
        .unwrap();
    assert_eq!(out[0].dims(), [1, 3]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), [1., 2., 3., 4., 5.]);
}

#[test]
fn value_and_grad_of_several_outputs_is_the_weighted_loss_evaluate_reports() {
    let mut m = compiled(Device::Native);
    let (left, right, matched, kind) = pairs(16, 5);
    let targets = || {
        Data::List(vec![
            tensor(matched.clone()),
            Tensor::from(kind.clone().into_dyn()),
        ])
    };
    let logs = m
        .evaluate((left.clone(), right.clone()), targets())
        .unwrap();
    let (loss, grads) = m.value_and_grad((left, right), targets()).unwrap();
    assert!(
        (loss - logs.get("loss").unwrap()).abs() < 1e-5,
        "{loss} vs {logs:?}"
    );
    assert_eq!(grads.len(), 6);
    assert!(grads.iter().all(|(_, g)| g.is_all_finite()));
}

#[test]
fn one_loss_for_all_outputs_sums_each_outputs_loss() {
    use strata::loss::MeanSquaredError;
    let mut m = TwoTower::model();
    m.compile(Adam::new(0.01), MeanSquaredError, ()).unwrap();
    let (left, right, matched, _) = pairs(16, 6);
    let onehot = Array2::from_shape_fn((16, 4), |(i, j)| f32::from(u8::from(i % 4 == j)));
    let logs = m.evaluate((left, right), (matched, onehot)).unwrap();
    let mut keys: Vec<&str> = logs.keys();
    keys.sort();
    assert_eq!(keys, ["kind_loss", "loss", "match_loss"]);
    let sum = logs.get("match_loss").unwrap() + logs.get("kind_loss").unwrap();
    assert!((logs.get("loss").unwrap() - sum).abs() < 1e-5, "{logs:?}");
}
