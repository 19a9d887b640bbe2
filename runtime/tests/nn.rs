//! The model runtime: build, summary, weights, forward passes of layers and activations.

use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::Backend;
use strata_runtime::ir::{DType, Graph, TensorType};
use strata_runtime::nn::{Activation, Dense, Forward, Layer, Sequential};
use strata_runtime::Model;
use strata_runtime::Tensor;

fn tutorial() -> Model<Sequential> {
    Model::new(Sequential::new(
        Some(vec![784]),
        vec![
            Box::new(Dense::new("dense", 128, Activation::Relu)),
            Box::new(Dense::new("dense_1", 64, Activation::Relu)),
            Box::new(Dense::new("dense_2", 10, Activation::Softmax)),
        ],
    ))
}

#[test]
fn summary_matches_keras() {
    let s = tutorial().summary();
    let want = "\
Model: \"sequential\"
┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━┓
┃ Layer (type)                    ┃ Output Shape           ┃       Param # ┃
┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━┩
│ dense (Dense)                   │ (None, 128)            │       100,480 │
├─────────────────────────────────┼────────────────────────┼───────────────┤
│ dense_1 (Dense)                 │ (None, 64)             │         8,256 │
├─────────────────────────────────┼────────────────────────┼───────────────┤
│ dense_2 (Dense)                 │ (None, 10)             │           650 │
└─────────────────────────────────┴────────────────────────┴───────────────┘
 Total params: 109,386 (427.29 KB)
 Trainable params: 109,386 (427.29 KB)
 Non-trainable params: 0 (0.00 B)
";
    assert_eq!(s, want, "\n{s}");
}

#[test]
fn weights_are_seeded_named_and_checked() {
    let m = tutorial();
    let w = m.weights();
    let names: Vec<&str> = w.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "dense/kernel",
            "dense/bias",
            "dense_1/kernel",
            "dense_1/bias",
            "dense_2/kernel",
            "dense_2/bias"
        ]
    );
    // glorot_uniform: limit sqrt(6 / (784 + 128))
    let k = w[0].1.array::<f32>().unwrap();
    let limit = (6.0f32 / 912.0).sqrt();
    assert!(k.iter().all(|v| v.abs() <= limit));
    assert!(k.iter().any(|v| v.abs() > 0.9 * limit));
    assert!(w[1].1.array::<f32>().unwrap().iter().all(|&v| v == 0.0));
    assert_eq!(tutorial().weights(), w, "same seed, same weights");
    let other = tutorial().with_seed(7).unwrap().weights();
    assert_ne!(other[0], w[0]);

    let mut m = tutorial();
    let bad = vec![(
        "dense/kernel".to_string(),
        Tensor::zeros(&TensorType::new(DType::F32, [3, 3])).unwrap(),
    )];
    assert!(m
        .set_weights(&bad)
        .unwrap_err()
        .to_string()
        .contains("f32[784, 128]"));
    let unknown = vec![("nope".to_string(), Tensor::scalar(1.0f32))];
    assert!(m
        .set_weights(&unknown)
        .unwrap_err()
        .to_string()
        .contains("nope"));
}

#[test]
fn deferred_build_takes_the_first_shape_and_rejects_others() {
    let mut m = Model::new(Sequential::new(
        None,
        vec![Box::new(Dense::new("dense", 4, Activation::Linear))],
    ));
    assert!(!m.is_built());
    assert!(m.summary().contains("0 (unbuilt)"));
    m.build(&[3]).unwrap();
    assert_eq!(m.output_shape(), Some(&[4][..]));
    m.build(&[3]).unwrap();
    assert!(m.build(&[5]).is_err());
}

/// Runs one layer's forward pass on the native backend.
fn run_layer(layer: &dyn Layer, x: Tensor, params: Vec<Tensor>) -> Tensor {
    let mut g = Graph::new("layer");
    let xv = g.parameter(x.ty());
    let pv: Vec<_> = params.iter().map(|p| g.parameter(p.ty())).collect();
    let mut cx = Forward::new(&mut g, false, None);
    let y = layer.forward(&mut cx, xv, &pv).unwrap();
    g.set_outputs(vec![y]).unwrap();
    let mut inputs = vec![x];
    inputs.extend(params);
    NativeBackend::new().run(&g, &inputs).unwrap().remove(0)
}

fn t(dims: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(dims, v.to_vec()).unwrap()
}

#[test]
fn dense_forward_by_hand() {
    let d = Dense::new("d", 2, Activation::Relu);
    // x = [[1, 2]], W = [[1, -1], [0.5, -2]], b = [0.25, 1] -> [2.25, -4] -> relu [2.25, 0]
    let y = run_layer(
        &d,
        t(&[1, 2], &[1.0, 2.0]),
        vec![t(&[2, 2], &[1.0, -1.0, 0.5, -2.0]), t(&[2], &[0.25, 1.0])],
    );
    assert_eq!(y, t(&[1, 2], &[2.25, 0.0]));
    // Rank-3 input: acts on the last axis.
    assert_eq!(d.output_shape(&[5, 2]).unwrap(), vec![5, 2]);
    let y = run_layer(
        &d,
        t(&[1, 2, 2], &[1.0, 2.0, 0.0, 1.0]),
        vec![t(&[2, 2], &[1.0, -1.0, 0.5, -2.0]), t(&[2], &[0.0, 0.0])],
    );
    assert_eq!(y, t(&[1, 2, 2], &[2.0, 0.0, 0.5, 0.0]));
}

#[test]
fn activations_by_hand() {
    let x = [-2.0f32, -0.5, 0.0, 1.5];
    let cases: Vec<(Activation, Vec<f32>)> = vec![
        (Activation::Linear, x.to_vec()),
        (Activation::Relu, vec![0.0, 0.0, 0.0, 1.5]),
        (
            Activation::Sigmoid,
            x.iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect(),
        ),
        (Activation::Tanh, x.iter().map(|v| v.tanh()).collect()),
        (
            Activation::Gelu,
            vec![-0.045_500_26, -0.154_268_77, 0.0, 1.399_789_2],
        ),
        (
            Activation::Elu,
            vec![(-2.0f32).exp_m1(), (-0.5f32).exp_m1(), 0.0, 1.5],
        ),
        (
            Activation::Selu,
            vec![
                1.050_701 * 1.673_263_2 * (-2.0f32).exp_m1(),
                1.050_701 * 1.673_263_2 * (-0.5f32).exp_m1(),
                0.0,
                1.050_701 * 1.5,
            ],
        ),
        (Activation::LeakyRelu, vec![-0.4, -0.1, 0.0, 1.5]),
        (
            Activation::Swish,
            x.iter().map(|v| v / (1.0 + (-v).exp())).collect(),
        ),
        (
            Activation::Softplus,
            x.iter().map(|v| (1.0 + v.exp()).ln()).collect(),
        ),
    ];
    for (a, want) in cases {
        let mut g = Graph::new("act");
        let p = g.parameter(TensorType::new(DType::F32, [4]));
        let y = a.apply(&mut g, p).unwrap();
        g.set_outputs(vec![y]).unwrap();
        let got = NativeBackend::new()
            .run(&g, &[t(&[4], &x)])
            .unwrap()
            .remove(0)
            .to_vec::<f32>()
            .unwrap();
        for (gv, wv) in got.iter().zip(&want) {
            assert!(
                (gv - wv).abs() <= 1e-6 + 1e-5 * wv.abs(),
                "{a}: got {got:?}, want {want:?}"
            );
        }
    }
    // Softmax over the last axis, stable for large logits.
    let mut g = Graph::new("softmax");
    let p = g.parameter(TensorType::new(DType::F32, [2, 3]));
    let y = Activation::Softmax.apply(&mut g, p).unwrap();
    g.set_outputs(vec![y]).unwrap();
    let got = NativeBackend::new()
        .run(&g, &[t(&[2, 3], &[1.0, 2.0, 3.0, 1000.0, 1000.0, 1000.0])])
        .unwrap()
        .remove(0)
        .to_vec::<f32>()
        .unwrap();
    let want = [
        0.090_030_57,
        0.244_728_48,
        0.665_240_94,
        1.0 / 3.0,
        1.0 / 3.0,
        1.0 / 3.0,
    ];
    for (gv, wv) in got.iter().zip(want) {
        assert!((gv - wv).abs() < 1e-6, "{got:?}");
    }
    assert_eq!(Activation::from_name("silu"), Some(Activation::Swish));
    assert_eq!(Activation::from_name("relu6"), None);
}

/// A hand-written architecture declaring what `model!` would; `WRONG` flips one dim.
struct Declared<const WRONG: bool>(Dense);

impl<const WRONG: bool> strata_runtime::nn::Architecture for Declared<WRONG> {
    const INPUT_SHAPE: Option<&'static [usize]> = Some(&[3]);
    const OUTPUT_SHAPE: Option<&'static [usize]> = Some(&[2]);
    const PARAMS: Option<&'static [strata_runtime::nn::ParamDecl]> = Some(&[
        strata_runtime::nn::ParamDecl {
            name: "dense/kernel",
            dims: if WRONG { &[2, 3] } else { &[3, 2] },
            init: strata_runtime::nn::Initializer::GlorotUniform,
            trainable: true,
        },
        strata_runtime::nn::ParamDecl {
            name: "dense/bias",
            dims: &[2],
            init: strata_runtime::nn::Initializer::Zeros,
            trainable: true,
        },
    ]);

    fn layers(&self) -> Vec<&dyn Layer> {
        vec![&self.0]
    }
}

#[test]
fn build_checks_the_declared_parameters() {
    let dense = || Dense::new("dense", 2, Activation::Linear);
    assert!(Model::new(Declared::<false>(dense())).is_built());
    let mut wrong = Model::new(Declared::<true>(dense()));
    assert!(!wrong.is_built());
    let e = wrong.build(&[3]).unwrap_err().to_string();
    assert!(e.contains("dense/kernel") && e.contains("[2, 3]"), "{e}");
}
