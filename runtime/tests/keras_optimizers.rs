//! Adadelta, Adafactor, Ftrl, Lamb and `use_ema` (with `ema_overwrite_frequency` and
//! `SwapEMAWeights`) against Keras: `scripts/keras-reference/optimizers.py` trains a tiny
//! Dense model full-batch from fixed weights with each optimizer and records the weights,
//! the moving averages and the history in `reference/optimizers.json`; here the same
//! training runs on the native backend and on XLA CPU and must agree within 1e-5
//! relative (with a 1e-6 absolute floor for values near 0). Also: a `SwapEMAWeights`
//! without `use_ema` is a typed error, and the averages survive a checkpoint.
//!
//! The XLA half needs the CPU plugin (`scripts/install-xla-plugin`).

use serde_json::Value as Json;
use std::sync::{Arc, Mutex};
use strata_runtime::backend::Device;
use strata_runtime::loss::MeanSquaredError;
use strata_runtime::nn::{Activation, Dense, Sequential};
use strata_runtime::optim::{
    Adadelta, Adafactor, Adam, Ftrl, Lamb, Optimizer, OptimizerExt, SGD,
};
use strata_runtime::strategy::Strategy;
use strata_runtime::train::{Callback, Control, Fit, Logs, SwapEMAWeights};
use strata_runtime::{Error, Model, Tensor};

const RTOL: f64 = 1e-5;
const ATOL: f64 = 1e-6;

fn reference() -> Json {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/reference/optimizers.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A nested JSON array of numbers as a tensor.
fn tensor(v: &Json) -> Tensor {
    fn walk(v: &Json, depth: usize, dims: &mut Vec<usize>, out: &mut Vec<f32>) {
        match v {
            Json::Array(items) => {
                if dims.len() == depth {
                    dims.push(items.len());
                }
                for i in items {
                    walk(i, depth + 1, dims, out);
                }
            }
            n => out.push(n.as_f64().unwrap() as f32),
        }
    }
    let (mut dims, mut out) = (Vec::new(), Vec::new());
    walk(v, 0, &mut dims, &mut out);
    Tensor::from_vec(&dims, out).unwrap()
}

fn f(args: &Json, key: &str) -> Option<f32> {
    args.get(key).map(|v| v.as_f64().unwrap() as f32)
}

/// The case's optimizer, from Keras' class name and arguments.
fn optimizer(class: &str, a: &Json) -> Box<dyn Optimizer> {
    let lr = f(a, "learning_rate").unwrap();
    let mut o: Box<dyn Optimizer> = match class {
        "Adadelta" => {
            let mut o = Adadelta::new(lr);
            o.rho = f(a, "rho").unwrap_or(o.rho);
            o.epsilon = f(a, "epsilon").unwrap_or(o.epsilon);
            Box::new(o)
        }
        "Adafactor" => {
            let mut o = Adafactor::new(lr);
            o.beta_2_decay = f(a, "beta_2_decay").unwrap_or(o.beta_2_decay);
            o.epsilon_1 = f(a, "epsilon_1").unwrap_or(o.epsilon_1);
            o.epsilon_2 = f(a, "epsilon_2").unwrap_or(o.epsilon_2);
            o.clip_threshold = f(a, "clip_threshold").unwrap_or(o.clip_threshold);
            Box::new(o)
        }
        "Ftrl" => {
            let mut o = Ftrl::new(lr);
            o.learning_rate_power = f(a, "learning_rate_power").unwrap_or(o.learning_rate_power);
            o.initial_accumulator_value =
                f(a, "initial_accumulator_value").unwrap_or(o.initial_accumulator_value);
            o.l1_regularization_strength =
                f(a, "l1_regularization_strength").unwrap_or(o.l1_regularization_strength);
            o.l2_regularization_strength =
                f(a, "l2_regularization_strength").unwrap_or(o.l2_regularization_strength);
            o.l2_shrinkage_regularization_strength = f(a, "l2_shrinkage_regularization_strength")
                .unwrap_or(o.l2_shrinkage_regularization_strength);
            o.beta = f(a, "beta").unwrap_or(o.beta);
            Box::new(o)
        }
        "Lamb" => {
            let mut o = Lamb::new(lr);
            o.beta_1 = f(a, "beta_1").unwrap_or(o.beta_1);
            o.beta_2 = f(a, "beta_2").unwrap_or(o.beta_2);
            o.epsilon = f(a, "epsilon").unwrap_or(o.epsilon);
            Box::new(o)
        }
        "Adam" => Box::new(Adam::new(lr)),
        "SGD" => Box::new(SGD::new(lr).momentum(f(a, "momentum").unwrap_or(0.0))),
        other => panic!("no case for {other}"),
    };
    let c = o.config_mut();
    c.weight_decay = f(a, "weight_decay");
    if a.get("use_ema") == Some(&Json::Bool(true)) {
        c.use_ema = true;
        c.ema_momentum = f(a, "ema_momentum").unwrap_or(0.99);
        c.ema_overwrite_frequency = a
            .get("ema_overwrite_frequency")
            .map(|v| v.as_u64().unwrap() as usize);
    }
    o
}

fn device(xla: bool) -> Device {
    if xla {
        Device::XlaCpu { devices: Some(1) }
    } else {
        Device::Native
    }
}

/// The reference's model, with its initial weights, on `device`.
fn model(r: &Json, device: Device) -> Model<Sequential> {
    let s = Strategy::one_device(device)
        .unwrap_or_else(|e| panic!("the device is needed for this test: {e}"));
    let mut m = s.scope(|| {
        Model::new(Sequential::new(
            Some(vec![4]),
            vec![
                Box::new(Dense::new("dense", 3, Activation::Tanh)),
                Box::new(Dense::new("dense_1", 2, Activation::Linear)),
            ],
        ))
    });
    let init: Vec<(String, Tensor)> = names(r)
        .into_iter()
        .zip(r["init"].as_array().unwrap().iter().map(tensor))
        .collect();
    m.set_weights(&init).unwrap();
    m
}

fn names(r: &Json) -> Vec<String> {
    r["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

/// Records the weights at every epoch's end (the last one's remain).
struct LastEpochWeights(Arc<Mutex<Vec<(String, Tensor)>>>);

impl Callback for LastEpochWeights {
    fn on_epoch_end(&mut self, _epoch: usize, _logs: &Logs, c: &mut Control<'_>) -> strata_runtime::Result<()> {
        *self.0.lock().unwrap() = c.weights()?;
        Ok(())
    }
}

#[track_caller]
fn assert_close(what: &str, got: &[(String, Tensor)], want: &Json, names: &[String]) {
    let want = want.as_array().unwrap();
    assert_eq!(got.len(), want.len(), "{what}: tensor count");
    for ((name, g), (w, wn)) in got.iter().zip(want.iter().zip(names)) {
        assert_eq!(name, wn, "{what}: order");
        let w = tensor(w);
        assert_eq!(g.dims(), w.dims(), "{what} {name}: shape");
        let (g, w) = (g.to_vec::<f32>().unwrap(), w.to_vec::<f32>().unwrap());
        for (i, (a, b)) in g.iter().zip(&w).enumerate() {
            let (a, b) = (*a as f64, *b as f64);
            assert!(
                (a - b).abs() <= ATOL + RTOL * b.abs(),
                "{what} {name}[{i}]: got {a}, Keras {b}\n got  {g:?}\n want {w:?}"
            );
        }
    }
}

#[track_caller]
fn assert_history(what: &str, got: &[f64], want: &Json) {
    let want: Vec<f64> = want
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(got.len(), want.len(), "{what}");
    for (a, b) in got.iter().zip(&want) {
        assert!(
            (a - b).abs() <= ATOL + RTOL * b.abs(),
            "{what}: got {got:?}, Keras {want:?}"
        );
    }
}

fn run_case(r: &Json, case: &Json, xla: bool) {
    let name = format!(
        "{} on {}",
        case["name"].as_str().unwrap(),
        if xla { "XLA CPU" } else { "native" }
    );
    let names = names(r);
    let mut m = model(r, device(xla));
    let opt = optimizer(case["optimizer"].as_str().unwrap(), &case["args"]);
    m.compile_boxed(opt, Box::new(MeanSquaredError), Vec::new())
        .unwrap();
    let epochs = case["epochs"].as_u64().unwrap() as usize;
    let last = Arc::new(Mutex::new(Vec::new()));
    let mut fit = Fit::epochs(epochs).batch_size(8).shuffle(false).verbose(0);
    if let Some(swap) = case["swap_ema"].as_object() {
        fit = fit
            .callback(SwapEMAWeights::new(swap["swap_on_epoch"].as_bool().unwrap()))
            .validation_data(tensor(&r["val_x"]), tensor(&r["val_y"]));
    }
    let fit = fit.callback(LastEpochWeights(last.clone()));
    let h = m
        .fit(tensor(&r["x"]), tensor(&r["y"]), fit)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_close(
        &format!("{name}: weights at the last epoch's end"),
        &last.lock().unwrap(),
        &case["weights_at_last_epoch_end"],
        &names,
    );
    assert_close(
        &format!("{name}: weights after fit"),
        &m.weights(),
        &case["weights_after_fit"],
        &names,
    );
    if let Some(ema) = case.get("ema") {
        assert_close(
            &format!("{name}: moving averages"),
            &m.ema_weights().unwrap(),
            ema,
            &names,
        );
    }
    for (key, want) in case["history"].as_object().unwrap() {
        let got = h.get(key).unwrap_or_else(|| panic!("{name}: no `{key}` in the history"));
        assert_history(&format!("{name}: history `{key}`"), got, want);
    }
}

fn run_all(xla: bool) {
    let r = reference();
    for case in r["cases"].as_array().unwrap() {
        run_case(&r, case, xla);
    }
}

#[test]
fn new_optimizers_and_ema_match_keras_natively() {
    run_all(false);
}

#[test]
fn new_optimizers_and_ema_match_keras_on_xla_cpu() {
    run_all(true);
}
