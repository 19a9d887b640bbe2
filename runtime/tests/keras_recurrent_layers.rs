//! `SimpleRNN`, `LSTM` and `GRU`, and the wrappers `Bidirectional` and `TimeDistributed`,
//! against Keras 3 (`tests/reference/recurrent_layers.json`,
//! written by `scripts/keras-reference/recurrent_layers.py`): the same arguments, the same
//! weights in Keras' order, paths and layouts, the same parameter count, and the same
//! outputs (with `return_state`, every state too, in Keras' order), on the native backend
//! and on XLA CPU.

mod backends;

mod keras_reference;

use keras_reference::tensor;
use serde_json::Value as Json;
use strata_runtime::ir::Graph;
use strata_runtime::nn::*;
use strata_runtime::Tensor;

fn reference() -> Json {
    keras_reference::load("recurrent_layers")
}

/// The Strata layer for a Keras class and its arguments (Keras' defaults otherwise); a
/// wrapper's `layer` is `{"class", "args"}`.
fn layer(class: &str, a: &Json) -> Box<dyn Layer> {
    let inner = &a["layer"];
    let inner_class = inner["class"].as_str().unwrap_or("");
    match class {
        "Bidirectional" => Box::new(Bidirectional {
            merge_mode: a
                .get("merge_mode")
                .and_then(Json::as_str)
                .map_or(MergeMode::Concat, |m| MergeMode::from_name(m).unwrap()),
            ..Bidirectional::new("bidirectional", recurrent(inner_class, &inner["args"]))
        }),
        "TimeDistributed" => {
            let a = &inner["args"];
            let activation = a
                .get("activation")
                .and_then(Json::as_str)
                .map_or(Activation::Linear, |n| Activation::from_name(n).unwrap());
            let size = |k: &str| a[k].as_u64().unwrap() as usize;
            let stepped: Stepped = match inner_class {
                "Dense" => Dense::new("dense", size("units"), activation).into(),
                "Conv2D" => {
                    let k = size("kernel_size");
                    Conv2D::new("conv2d", size("filters"), [k, k], activation).into()
                }
                other => panic!("no wrapped layer for {other}"),
            };
            Box::new(TimeDistributed::new("time_distributed", stepped))
        }
        _ => match recurrent(class, a) {
            Recurrent::SimpleRNN(l) => Box::new(l),
            Recurrent::LSTM(l) => Box::new(l),
            Recurrent::GRU(l) => Box::new(l),
        },
    }
}

/// The recurrent layer for a Keras class and its arguments.
fn recurrent(class: &str, a: &Json) -> Recurrent {
    let units = a["units"].as_u64().unwrap() as usize;
    let flag = |k: &str, d: bool| a.get(k).and_then(Json::as_bool).unwrap_or(d);
    let act = |k: &str, d: Activation| {
        a.get(k)
            .and_then(Json::as_str)
            .map_or(d, |n| Activation::from_name(n).unwrap())
    };
    let activation = act("activation", Activation::Tanh);
    let recurrent_activation = act("recurrent_activation", Activation::Sigmoid);
    let (use_bias, return_sequences, return_state, go_backwards) = (
        flag("use_bias", true),
        flag("return_sequences", false),
        flag("return_state", false),
        flag("go_backwards", false),
    );
    match class {
        "SimpleRNN" => Recurrent::SimpleRNN(SimpleRNN {
            activation,
            use_bias,
            return_sequences,
            return_state,
            go_backwards,
            ..SimpleRNN::new("simple_rnn", units)
        }),
        "LSTM" => Recurrent::LSTM(LSTM {
            activation,
            recurrent_activation,
            use_bias,
            return_sequences,
            return_state,
            go_backwards,
            ..LSTM::new("lstm", units)
        }),
        "GRU" => Recurrent::GRU(GRU {
            activation,
            recurrent_activation,
            use_bias,
            return_sequences,
            return_state,
            go_backwards,
            reset_after: flag("reset_after", true),
            ..GRU::new("gru", units)
        }),
        other => panic!("no layer for {other}"),
    }
}

/// Each case's layer, input and weights, its graph, and Keras' outputs (the output, then
/// any states).
struct Case {
    what: String,
    layer: Box<dyn Layer>,
    inputs: Vec<Tensor>,
    graph: Graph,
    keras: Vec<Tensor>,
}

fn cases() -> Vec<Case> {
    let reference = reference();
    let cases = reference["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    cases
        .iter()
        .enumerate()
        .map(|(i, case)| {
            let class = case["class"].as_str().unwrap();
            let what = format!("case {i}: {class} {}", case["args"]);
            let layer = layer(class, &case["args"]);
            let mut inputs: Vec<Tensor> = vec![tensor(&case["inputs"][0])];
            let weights: Vec<Tensor> = case["weights"]
                .as_array()
                .unwrap()
                .iter()
                .map(tensor)
                .collect();
            // The weights Keras holds are the ones this layer declares: order, paths (the
            // layer's own name aside), layout.
            let shape = inputs[0].dims()[1..].to_vec();
            let specs = layer.params(&shape).unwrap();
            let declared: Vec<(&str, &[usize])> = specs
                .iter()
                .map(|p| (p.name.split_once('/').unwrap().1, p.dims.as_slice()))
                .collect();
            let given: Vec<(&str, &[usize])> = case["weight_paths"]
                .as_array()
                .unwrap()
                .iter()
                .zip(&weights)
                .map(|(p, w)| (p.as_str().unwrap().split_once('/').unwrap().1, w.dims()))
                .collect();
            assert_eq!(declared, given, "{what}");
            let count: usize = specs.iter().map(ParamSpec::numel).sum();
            assert_eq!(count as u64, case["params"].as_u64().unwrap(), "{what}");
            let mut keras = vec![tensor(&case["output"])];
            if let Some(states) = case.get("states").and_then(Json::as_array) {
                keras.extend(states.iter().map(tensor));
            }
            assert_eq!(
                layer.output_shape(&shape).unwrap(),
                &keras[0].dims()[1..],
                "{what}"
            );
            let all: Vec<&[usize]> = keras.iter().map(|k| &k.dims()[1..]).collect();
            assert_eq!(layer.call_output_shapes(&[&shape]).unwrap(), all, "{what}");

            inputs.extend(weights);
            let mut g = Graph::new("layer");
            let vs: Vec<_> = inputs.iter().map(|x| g.parameter(x.ty())).collect();
            let mut cx = Forward::new(&mut g, false, None);
            let ys = layer.call_all(&mut cx, &vs[..1], &vs[1..]).unwrap();
            g.set_outputs(ys).unwrap();
            Case {
                what,
                layer,
                inputs,
                graph: g,
                keras,
            }
        })
        .collect()
}

#[test]
fn every_case_matches_keras_on_native_and_xla_cpu() {
    for (backend, b) in backends::backends() {
        for case in cases() {
            let got = b.run(&case.graph, &case.inputs).unwrap();
            let what = format!("{backend}, {} ({})", case.what, case.layer.name());
            assert_eq!(got.len(), case.keras.len(), "{what}");
            for (i, (got, keras)) in got.iter().zip(&case.keras).enumerate() {
                assert_eq!(got.dims(), keras.dims(), "{what}: output {i}");
                let (g, w) = (got.to_vec::<f32>().unwrap(), keras.to_vec::<f32>().unwrap());
                for (k, (a, b)) in g.iter().zip(&w).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-5 + 1e-5 * b.abs(),
                        "{what}: output {i}, element {k} is {a}, Keras gives {b}"
                    );
                }
            }
        }
    }
}
