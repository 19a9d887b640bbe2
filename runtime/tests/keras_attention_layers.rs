//! `Dot`, `Attention` and `MultiHeadAttention` against Keras 3
//! (`tests/reference/attention_layers.json`, written by
//! `scripts/keras-reference/attention_layers.py`): the same arguments, the same weights
//! in Keras' order, names and layouts, the same outputs, on the native backend; and on
//! XLA CPU the same outputs and, through the VJPs, the same gradients as native.

mod backends;

mod keras_reference;

use keras_reference::tensor;
use serde_json::Value as Json;
use strata_runtime::autodiff::grad;
use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::Backend;
use strata_runtime::ir::Graph;
use strata_runtime::nn::*;
use strata_runtime::Tensor;

fn reference() -> Json {
    keras_reference::load("attention_layers")
}

/// The Strata layer for a Keras class, its arguments and its call's (Keras' defaults
/// otherwise).
fn layer(class: &str, a: &Json, call: &Json) -> Box<dyn Layer> {
    let n = |k: &str| a.get(k).and_then(Json::as_u64).map(|v| v as usize);
    let flag = |j: &Json, k: &str, d: bool| j.get(k).and_then(Json::as_bool).unwrap_or(d);
    let causal = flag(call, "use_causal_mask", false);
    match class {
        "Dot" => {
            let axes = match &a["axes"] {
                Json::Array(v) => [0, 1].map(|i| v[i].as_i64().unwrap() as isize),
                v => [v.as_i64().unwrap() as isize; 2],
            };
            Box::new(Dot {
                axes,
                normalize: flag(a, "normalize", false),
                ..Dot::new("dot", -1)
            })
        }
        "Attention" => Box::new(Attention {
            use_scale: flag(a, "use_scale", false),
            score_mode: ScoreMode::from_name(
                a.get("score_mode").and_then(Json::as_str).unwrap_or("dot"),
            )
            .unwrap(),
            use_causal_mask: causal,
            ..Attention::new("attention")
        }),
        "MultiHeadAttention" => Box::new(MultiHeadAttention {
            value_dim: n("value_dim"),
            output_shape: n("output_shape"),
            use_bias: flag(a, "use_bias", true),
            use_causal_mask: causal,
            ..MultiHeadAttention::new(
                "multi_head_attention",
                n("num_heads").unwrap(),
                n("key_dim").unwrap(),
            )
        }),
        other => panic!("no layer for {other}"),
    }
}

/// One inference call of `layer` on `xs` with `params`.
fn infer(layer: &dyn Layer, xs: Vec<Tensor>, params: Vec<Tensor>) -> Tensor {
    let mut g = Graph::new("layer");
    let xv: Vec<_> = xs.iter().map(|x| g.parameter(x.ty())).collect();
    let pv: Vec<_> = params.iter().map(|p| g.parameter(p.ty())).collect();
    let mut cx = Forward::new(&mut g, false, None);
    let y = layer.call(&mut cx, &xv, &pv).unwrap();
    g.set_outputs(vec![y]).unwrap();
    let mut inputs = xs;
    inputs.extend(params);
    NativeBackend::new().run(&g, &inputs).unwrap().remove(0)
}

#[test]
fn every_case_matches_keras() {
    let reference = reference();
    let cases = reference["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for (i, case) in cases.iter().enumerate() {
        let class = case["class"].as_str().unwrap();
        let what = format!("case {i}: {class} {} {}", case["args"], case["call"]);
        let layer = layer(class, &case["args"], &case["call"]);
        let xs: Vec<Tensor> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(tensor)
            .collect();
        let weights: Vec<Tensor> = case["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(tensor)
            .collect();
        // The weights Keras holds are the ones this layer declares: order, names, layout.
        let shapes: Vec<&[usize]> = xs.iter().map(|x| &x.dims()[1..]).collect();
        let specs = layer.call_params(&shapes).unwrap();
        let declared: Vec<(String, &[usize])> = specs
            .iter()
            .map(|p| {
                (
                    p.name.split_once('/').unwrap().1.to_string(),
                    p.dims.as_slice(),
                )
            })
            .collect();
        let given: Vec<(String, &[usize])> = case["weight_paths"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&weights)
            .map(|(p, w)| {
                let path = p.as_str().unwrap();
                (path.split_once('/').unwrap().1.to_string(), w.dims())
            })
            .collect();
        assert_eq!(declared, given, "{what}");
        let want = tensor(&case["output"]);
        assert_eq!(
            layer.call_output_shape(&shapes).unwrap(),
            &want.dims()[1..],
            "{what}"
        );
        let got = infer(layer.as_ref(), xs, weights);
        assert_eq!(got.dims(), want.dims(), "{what}");
        let (g, w) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
        for (k, (a, b)) in g.iter().zip(&w).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 + 1e-5 * b.abs(),
                "{what}: element {k} is {a}, Keras gives {b}"
            );
        }
    }
}

/// Each case on XLA CPU: Keras' output, and the gradient of `Σ y²` with respect to every
/// input and weight equal to the native backend's (each product and softmax differentiated
/// by the IR's VJPs, lowered to StableHLO).
#[test]
fn every_case_and_its_gradient_agree_on_xla() {
    let xla = backends::xla_cpu();
    let native = NativeBackend::new();
    let reference = reference();
    for (i, case) in reference["cases"].as_array().unwrap().iter().enumerate() {
        let class = case["class"].as_str().unwrap();
        let what = format!("case {i}: {class} {} {}", case["args"], case["call"]);
        let layer = layer(class, &case["args"], &case["call"]);
        let mut inputs: Vec<Tensor> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(tensor)
            .collect();
        let n_in = inputs.len();
        inputs.extend(case["weights"].as_array().unwrap().iter().map(tensor));
        let mut g = Graph::new("layer");
        let vs: Vec<_> = inputs.iter().map(|x| g.parameter(x.ty())).collect();
        let mut cx = Forward::new(&mut g, false, None);
        let y = layer.call(&mut cx, &vs[..n_in], &vs[n_in..]).unwrap();
        let sq = g.mul(y, y).unwrap();
        let loss = g.sum_all(sq).unwrap();
        g.set_outputs(vec![y, loss]).unwrap();
        let g = grad(&g, loss, &vs).unwrap();
        let want = native.run(&g, &inputs).unwrap();
        let got = xla.run(&g, &inputs).unwrap();
        assert_eq!(got.len(), want.len(), "{what}");
        let keras = tensor(&case["output"]);
        for (k, (a, b)) in got.iter().zip(&want).enumerate() {
            let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
            let scale = b.iter().fold(1f32, |m, v| m.max(v.abs()));
            for (e, (x, y)) in a.iter().zip(&b).enumerate() {
                assert!(
                    (x - y).abs() <= 1e-4 * scale,
                    "{what}: output {k}, element {e}: XLA {x}, native {y}"
                );
            }
        }
        let y = got[0].to_vec::<f32>().unwrap();
        for (e, (a, b)) in y.iter().zip(keras.to_vec::<f32>().unwrap()).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 + 1e-5 * b.abs(),
                "{what}: element {e} is {a} on XLA, Keras gives {b}"
            );
        }
    }
}

/// Dropout of the attention weights in training draws the same mask on XLA as natively
/// (the step's key, one stream per layer), and the gradient flows through it alike.
#[test]
fn attention_dropout_in_training_agrees_on_xla() {
    use strata_runtime::ir::{DType, TensorType};
    let xla = backends::xla_cpu();
    let layers: Vec<(Box<dyn Layer>, usize)> = vec![
        (
            Box::new(Attention {
                dropout: 0.4,
                use_causal_mask: true,
                ..Attention::new("attention")
            }),
            0,
        ),
        (
            Box::new(MultiHeadAttention {
                dropout: 0.3,
                ..MultiHeadAttention::new("mha", 2, 3)
            }),
            8,
        ),
    ];
    for (layer, n_params) in layers {
        let x = Tensor::F32(strata_runtime::random::normal(&[3, 5, 4], 0.0, 1.0, 9).unwrap());
        let shapes: Vec<&[usize]> = vec![&[5, 4], &[5, 4]];
        let specs = layer.call_params(&shapes).unwrap();
        assert_eq!(specs.len(), n_params);
        let mut inputs = vec![x.clone(), x];
        inputs.extend(specs.iter().enumerate().map(|(k, p)| {
            Tensor::F32(strata_runtime::random::normal(&p.dims, 0.0, 1.0, 20 + k as u64).unwrap())
        }));
        inputs.push(Tensor::from_vec(&[2], vec![5i32, 6]).unwrap());
        let mut g = Graph::new("train");
        let vs: Vec<_> = inputs[..2 + n_params]
            .iter()
            .map(|t| g.parameter(t.ty()))
            .collect();
        let key = g.parameter(TensorType::new(DType::I32, [2]));
        let mut cx = Forward::new(&mut g, true, Some(key));
        let y = layer.call(&mut cx, &vs[..2], &vs[2..]).unwrap();
        let sq = g.mul(y, y).unwrap();
        let loss = g.sum_all(sq).unwrap();
        g.set_outputs(vec![y, loss]).unwrap();
        let g = grad(&g, loss, &vs).unwrap();
        let want = NativeBackend::new().run(&g, &inputs).unwrap();
        let got = xla.run(&g, &inputs).unwrap();
        let inference = infer(
            layer.as_ref(),
            inputs[..2].to_vec(),
            inputs[2..2 + n_params].to_vec(),
        );
        assert_ne!(
            want[0],
            inference,
            "{}: dropout is active in training",
            layer.name()
        );
        // One scale for every output but the loss: the key bias's gradient is 0 but for rounding (a
        // constant added to a row of scores leaves its softmax as it was).
        let scale = want
            .iter()
            .enumerate()
            .filter(|&(k, _)| k != 1)
            .flat_map(|(_, t)| t.to_vec::<f32>().unwrap())
            .fold(1f32, |m, v| m.max(v.abs()));
        for (k, (a, b)) in got.iter().zip(&want).enumerate() {
            let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
            for (e, (x, y)) in a.iter().zip(&b).enumerate() {
                assert!(
                    (x - y).abs() <= 1e-5 * scale,
                    "{}: output {k}, element {e}: XLA {x}, native {y}",
                    layer.name()
                );
            }
        }
    }
}
