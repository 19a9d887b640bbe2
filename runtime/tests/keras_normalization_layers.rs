//! `BatchNormalization` against Keras 3 (`tests/reference/normalization_layers.json`,
//! written by `scripts/keras-reference/normalization_layers.py`): the same arguments and
//! weights in Keras' order; in training the same output, the same moving mean and
//! variance after the step, and the same gradients of `sum(y · w)` with respect to the
//! input, gamma and beta; in inference the same output; on the native backend and on XLA
//! CPU.

mod backends;

mod keras_reference;

use keras_reference::tensor;
use serde_json::Value as Json;
use strata_runtime::autodiff::grad;
use strata_runtime::ir::Graph;
use strata_runtime::nn::*;
use strata_runtime::Tensor;

fn reference() -> Json {
    keras_reference::load("normalization_layers")
}

/// The Strata layer for Keras' arguments (Keras' defaults otherwise).
fn layer(a: &Json) -> BatchNormalization {
    let flag = |k: &str, d: bool| a.get(k).and_then(Json::as_bool).unwrap_or(d);
    let float = |k: &str, d: f64| a.get(k).and_then(Json::as_f64).unwrap_or(d);
    BatchNormalization {
        axis: a.get("axis").and_then(Json::as_i64).unwrap_or(-1) as isize,
        momentum: float("momentum", 0.99),
        epsilon: float("epsilon", 1e-3),
        center: flag("center", true),
        scale: flag("scale", true),
        ..BatchNormalization::new("batch_normalization")
    }
}

/// The last part of a weight's path (`gamma`, `moving_mean`, ...).
fn leaf(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, l)| l)
}

/// One case's layer graph and inputs, and what Keras gives for each of its outputs, by
/// name, in the graph's output order.
struct Case {
    what: String,
    graph: Graph,
    inputs: Vec<Tensor>,
    keras: Vec<(String, Tensor)>,
}

/// In training the graph's outputs are y, the moving mean and variance the step writes
/// back, the loss `sum(y · w)` (`w` the case's `loss_weights`, an input) and its gradients
/// with respect to x and each trainable weight; in inference y alone.
fn case(i: usize, c: &Json) -> Case {
    let what = format!("case {i}: {} training={}", c["args"], c["training"]);
    let bn = layer(&c["args"]);
    let training = c["training"].as_bool().unwrap();
    let x = tensor(&c["input"]);
    let weights: Vec<Tensor> = c["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(tensor)
        .collect();
    // The weights Keras holds are the ones this layer declares, in the same order, with the
    // same trainability (gamma and beta learn; the moving statistics are state).
    let specs = bn.params(&x.dims()[1..]).unwrap();
    let paths: Vec<&str> = c["weight_paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| leaf(p.as_str().unwrap()))
        .collect();
    let declared: Vec<(&str, &[usize])> = specs
        .iter()
        .map(|p| (leaf(&p.name), p.dims.as_slice()))
        .collect();
    let given: Vec<(&str, &[usize])> = paths
        .iter()
        .copied()
        .zip(weights.iter().map(Tensor::dims))
        .collect();
    assert_eq!(declared, given, "{what}");
    for p in &specs {
        assert_eq!(
            p.trainable,
            !leaf(&p.name).starts_with("moving_"),
            "{what}: {}",
            p.name
        );
    }

    let mut g = Graph::new("batch_normalization");
    let xv = g.parameter(x.ty());
    let wv: Vec<_> = weights.iter().map(|w| g.parameter(w.ty())).collect();
    let mut cx = Forward::new(&mut g, training, None);
    let y = bn.forward(&mut cx, xv, &wv).unwrap();
    let updates = cx.updates().to_vec();
    let mut inputs = vec![x];
    inputs.extend(weights);
    let mut keras = vec![("y".to_string(), tensor(&c["output"]))];
    if !training {
        assert!(updates.is_empty(), "{what}: inference updates nothing");
        g.set_outputs(vec![y]).unwrap();
        return Case {
            what,
            graph: g,
            inputs,
            keras,
        };
    }
    let at = |name: &str| wv[paths.iter().position(|&p| p == name).unwrap()];
    let updated = |param| {
        let found = updates.iter().find(|&&(p, _)| p == param);
        found.expect("a moving statistic's update").1
    };
    assert_eq!(updates.len(), 2, "{what}: the two moving statistics");
    let (mean, var) = (updated(at("moving_mean")), updated(at("moving_variance")));
    let w = tensor(&c["loss_weights"]);
    let w_v = g.parameter(w.ty());
    inputs.push(w);
    let yw = g.mul(y, w_v).unwrap();
    let loss = g.sum_all(yw).unwrap();
    g.set_outputs(vec![y, mean, var, loss]).unwrap();
    keras.push(("moving_mean".into(), tensor(&c["moving_mean"])));
    keras.push(("moving_variance".into(), tensor(&c["moving_variance"])));
    let mut wrt = vec![xv];
    keras.push(("d/dx".into(), tensor(&c["gradients"]["x"])));
    for (p, spec) in specs.iter().enumerate() {
        if spec.trainable {
            let name = leaf(&spec.name);
            wrt.push(wv[p]);
            keras.push((format!("d/d{name}"), tensor(&c["gradients"][name])));
        }
    }
    let n_grads = c["gradients"].as_object().unwrap().len();
    assert_eq!(
        wrt.len(),
        n_grads,
        "{what}: a gradient for x and each trainable weight"
    );
    let graph = grad(&g, loss, &wrt).unwrap();
    Case {
        what,
        graph,
        inputs,
        keras,
    }
}

/// Elementwise `|strata - keras| <= 1e-5 + 1e-5 · |keras|`: both sides compute in f32, so
/// they part by rounding alone, a few ulps of the values summed or multiplied (a mean or
/// variance over up to 100 elements summed in another order, `x · inv` well above the `y`
/// the shift brings it to, a gradient's per-feature sums); 1e-5 is tens of ulps of such
/// values, and far below what a wrong formula does on these inputs (a missing epsilon or
/// the unbiased variance moves `y` by 1e-3 or more; a momentum applied the wrong way round
/// moves the moving statistics by far more).
fn close(a: f32, b: f32) -> bool {
    (a - b).abs() <= 1e-5 + 1e-5 * b.abs()
}

#[test]
fn batch_normalization_matches_keras_in_training_and_inference_on_native_and_xla_cpu() {
    let reference = reference();
    let cases: Vec<Case> = reference["cases"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, c)| case(i, c))
        .collect();
    assert!(cases.iter().any(|c| c.keras.len() > 1), "a training case");
    assert!(
        cases.iter().any(|c| c.keras.len() == 1),
        "an inference case"
    );
    for (backend, b) in backends::backends() {
        for c in &cases {
            let got = b.run(&c.graph, &c.inputs).unwrap();
            // The loss sits between the moving statistics and the gradients; Keras' loss is
            // not written (its gradients say more).
            let got: Vec<&Tensor> = if got.len() == 1 {
                vec![&got[0]]
            } else {
                got.iter().take(3).chain(got.iter().skip(4)).collect()
            };
            assert_eq!(got.len(), c.keras.len(), "{backend}, {}", c.what);
            for (got, (name, keras)) in got.iter().zip(&c.keras) {
                let what = format!("{backend}, {}: {name}", c.what);
                assert_eq!(got.dims(), keras.dims(), "{what}");
                let (g, k) = (got.to_vec::<f32>().unwrap(), keras.to_vec::<f32>().unwrap());
                let (mut abs, mut rel) = (0f32, 0f32);
                for (e, (&a, &b)) in g.iter().zip(&k).enumerate() {
                    assert!(close(a, b), "{what}, element {e} is {a}, Keras gives {b}");
                    abs = abs.max((a - b).abs());
                    rel = rel.max((a - b).abs() / b.abs().max(f32::MIN_POSITIVE));
                }
                eprintln!("{what}: max |diff| {abs:.3e}, max relative {rel:.3e}");
            }
        }
    }
}
