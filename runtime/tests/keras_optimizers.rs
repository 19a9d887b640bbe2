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
use strata_runtime::optim::{Adadelta, Adafactor, Adam, Ftrl, Lamb, Optimizer, OptimizerExt, SGD};
use strata_runtime::strategy::Strategy;
use strata_runtime::train::{Callback, Control, Fit, Logs, SwapEMAWeights};
use strata_runtime::{Error, Model, Tensor};

const RTOL: f64 = 1e-5;
const ATOL: f64 = 1e-6;

fn reference() -> Json {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/reference/optimizers.json"
    );
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
    c.clipnorm = f(a, "clipnorm");
    c.gradient_accumulation_steps = a
        .get("gradient_accumulation_steps")
        .map(|v| v.as_u64().unwrap() as usize);
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
    fn on_epoch_end(
        &mut self,
        _epoch: usize,
        _logs: &Logs,
        c: &mut Control<'_>,
    ) -> strata_runtime::Result<()> {
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
            .callback(SwapEMAWeights::new(
                swap["swap_on_epoch"].as_bool().unwrap(),
            ))
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
        let got = h
            .get(key)
            .unwrap_or_else(|| panic!("{name}: no `{key}` in the history"));
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

/// A small model of the reference's shape with its initial weights, compiled with `opt`.
fn compiled(r: &Json, device: Device, opt: impl Optimizer + 'static) -> Model<Sequential> {
    let mut m = model(r, device);
    m.compile(opt, MeanSquaredError, ()).unwrap();
    m
}

fn xy(r: &Json) -> (Tensor, Tensor, Tensor, Tensor) {
    (
        tensor(&r["x"]),
        tensor(&r["y"]),
        tensor(&r["val_x"]),
        tensor(&r["val_y"]),
    )
}

fn flat(w: &[(String, Tensor)]) -> Vec<f32> {
    w.iter()
        .flat_map(|(_, t)| t.to_vec::<f32>().unwrap())
        .collect()
}

/// With `SwapEMAWeights` the validation loss is the loss of the averages; `fit` then
/// leaves the averages in the model, so `evaluate` after it gives the last epoch's
/// `val_loss` exactly. Without the callback, validation sees the raw weights.
#[test]
fn swap_ema_weights_makes_validation_use_the_averages() {
    let r = reference();
    let (x, y, vx, vy) = xy(&r);
    let fit = |swap: bool| {
        let mut m = compiled(&r, Device::Native, Adam::new(0.05).with_ema(0.6));
        let mut f = Fit::epochs(2)
            .batch_size(8)
            .shuffle(false)
            .verbose(0)
            .validation_data(vx.clone(), vy.clone());
        if swap {
            f = f.callback(SwapEMAWeights::new(false));
        }
        let h = m.fit(x.clone(), y.clone(), f).unwrap();
        let last = *h.get("val_loss").unwrap().last().unwrap();
        let after = m
            .evaluate(vx.clone(), vy.clone())
            .unwrap()
            .get("loss")
            .unwrap();
        (last, after)
    };
    let (with_swap, after) = fit(true);
    assert!(
        (with_swap - after).abs() <= 1e-6 * after.abs(),
        "val_loss {with_swap} against the averages' loss {after}"
    );
    let (without, after) = fit(false);
    assert!(
        (without - after).abs() > 1e-4 * after.abs(),
        "without SwapEMAWeights validation used the averages: {without} vs {after}"
    );
}

#[test]
fn swap_ema_weights_without_use_ema_is_a_typed_error() {
    let r = reference();
    let (x, y, ..) = xy(&r);
    let mut m = compiled(&r, Device::Native, Adam::new(0.05));
    let e = m
        .fit(
            x,
            y,
            Fit::epochs(1)
                .verbose(0)
                .callback(SwapEMAWeights::new(true)),
        )
        .unwrap_err();
    match &e {
        Error::InvalidArgument { what, message } => {
            assert_eq!(what, "SwapEMAWeights");
            assert!(message.contains("use_ema"), "{e}");
        }
        other => panic!("expected InvalidArgument, got {other}"),
    }
    assert!(matches!(
        m.ema_weights(),
        Err(Error::InvalidArgument { what, .. }) if what == "ema_weights"
    ));
}

/// The averages (and Adafactor's factored slots, of other shapes than their
/// parameters) are saved and restored: training on from the checkpoint matches training
/// on without it.
#[test]
fn ema_and_factored_slots_survive_a_checkpoint() {
    let r = reference();
    let (x, y, ..) = xy(&r);
    let dir = std::env::temp_dir().join(format!("strata-ema-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ckpt.safetensors");
    let opt = || {
        Adafactor::new(0.05)
            .with_ema(0.7)
            .with_ema_overwrite_frequency(3)
    };
    let fit = |m: &mut Model<Sequential>, epochs: usize| {
        m.fit(
            x.clone(),
            y.clone(),
            Fit::epochs(epochs).batch_size(8).shuffle(false).verbose(0),
        )
        .unwrap();
    };
    let mut a = compiled(&r, Device::Native, opt());
    fit(&mut a, 2);
    a.save_checkpoint(&path).unwrap();
    let saved_ema = a.ema_weights().unwrap();

    let mut b = compiled(&r, Device::Native, opt());
    let info = b.load_checkpoint(&path).unwrap();
    assert!(info.has_optimizer);
    assert_eq!(info.iterations, 2);
    assert_eq!(flat(&b.ema_weights().unwrap()), flat(&saved_ema));
    assert_eq!(flat(&b.weights()), flat(&a.weights()));

    fit(&mut a, 2);
    fit(&mut b, 2);
    assert_eq!(
        flat(&b.ema_weights().unwrap()),
        flat(&a.ema_weights().unwrap())
    );
    assert_eq!(flat(&b.weights()), flat(&a.weights()));

    // A checkpoint of a model without EMA lacks the averages: restoring it into one with
    // EMA is a checkpoint error naming the missing tensor.
    let mut plain = compiled(&r, Device::Native, Adafactor::new(0.05));
    fit(&mut plain, 1);
    plain.save_checkpoint(&path).unwrap();
    let e = b.load_checkpoint(&path).unwrap_err();
    assert!(e.to_string().contains("optimizer/average/"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Two native replicas take the same steps as one device, factored slots and averages
/// included.
#[test]
fn factored_slots_and_averages_train_the_same_replicated() {
    let r = reference();
    let (x, y, ..) = xy(&r);
    let run = |s: Strategy| {
        let mut m = s.scope(|| model(&r, Device::Native));
        m.compile(Adafactor::new(0.05).with_ema(0.7), MeanSquaredError, ())
            .unwrap();
        m.fit(
            x.clone(),
            y.clone(),
            Fit::epochs(3).batch_size(8).shuffle(false).verbose(0),
        )
        .unwrap();
        (flat(&m.weights()), flat(&m.ema_weights().unwrap()))
    };
    let one = run(Strategy::one_device(Device::Native).unwrap());
    let two =
        run(strata_runtime::strategy::MirroredStrategy::with_replicas(Device::Native, 2).unwrap());
    for (a, b) in one.0.iter().chain(&one.1).zip(two.0.iter().chain(&two.1)) {
        assert!((a - b).abs() <= 1e-6 + 1e-5 * b.abs(), "{one:?}\n{two:?}");
    }
}

#[test]
fn bad_hyper_parameters_are_typed_errors() {
    let r = reference();
    let bad: Vec<(Box<dyn Optimizer>, &str, &str)> = vec![
        (Box::new(Adadelta::default().rho(1.5)), "adadelta", "rho"),
        (
            Box::new(Adadelta::default().epsilon(0.0)),
            "adadelta",
            "epsilon",
        ),
        (
            Box::new(Adafactor::default().beta_2_decay(0.5)),
            "adafactor",
            "beta_2_decay",
        ),
        (
            Box::new(Adafactor::default().clip_threshold(0.0)),
            "adafactor",
            "clip_threshold",
        ),
        (
            Box::new(Adafactor::default().epsilons(-1.0, 1e-3)),
            "adafactor",
            "epsilon_1",
        ),
        (
            Box::new(Ftrl::default().learning_rate_power(0.5)),
            "ftrl",
            "learning_rate_power",
        ),
        (
            Box::new(Ftrl::default().initial_accumulator_value(-0.1)),
            "ftrl",
            "initial_accumulator_value",
        ),
        (
            Box::new(Ftrl::default().l1_regularization_strength(-1.0)),
            "ftrl",
            "l1_regularization_strength",
        ),
        (
            Box::new(Ftrl::default().l2_regularization_strength(f32::NAN)),
            "ftrl",
            "l2_regularization_strength",
        ),
        (
            Box::new(Ftrl::default().l2_shrinkage_regularization_strength(-1.0)),
            "ftrl",
            "l2_shrinkage_regularization_strength",
        ),
        (Box::new(Ftrl::default().beta(-1.0)), "ftrl", "beta"),
        (Box::new(Lamb::default().betas(0.9, 1.0)), "lamb", "beta_2"),
        (Box::new(Lamb::default().epsilon(-1.0)), "lamb", "epsilon"),
        (
            Box::new(SGD::default().with_ema(1.5)),
            "sgd",
            "ema_momentum",
        ),
        (
            Box::new(
                Adam::default()
                    .with_ema(0.9)
                    .with_ema_overwrite_frequency(0),
            ),
            "adam",
            "ema_overwrite_frequency",
        ),
        (
            Box::new(Lamb::default().with_ema_overwrite_frequency(2)),
            "lamb",
            "use_ema",
        ),
        (
            Box::new(Adam::default().with_gradient_accumulation_steps(1)),
            "adam",
            "gradient_accumulation_steps must be >= 2, got 1",
        ),
    ];
    for (opt, name, field) in bad {
        let mut m = model(&r, Device::Native);
        match m.compile_boxed(opt, Box::new(MeanSquaredError), Vec::new()) {
            Err(Error::InvalidArgument { what, message }) => {
                assert_eq!(what, name, "{message}");
                assert!(message.contains(field), "{name}: {message}");
            }
            other => panic!("{name} {field}: expected InvalidArgument, got {other:?}"),
        }
    }
}

#[test]
fn defaults_are_keras() {
    assert_eq!(Adadelta::default().config.learning_rate.at(0), 1e-3);
    let a = Adadelta::default();
    assert_eq!((a.rho, a.epsilon), (0.95, 1e-7));
    let a = Adafactor::default();
    assert_eq!(
        (
            a.beta_2_decay,
            a.epsilon_1,
            a.epsilon_2,
            a.clip_threshold,
            a.relative_step
        ),
        (-0.8, 1e-30, 1e-3, 1.0, true)
    );
    let f = Ftrl::default();
    assert_eq!(
        (
            f.learning_rate_power,
            f.initial_accumulator_value,
            f.l1_regularization_strength,
            f.l2_regularization_strength,
            f.l2_shrinkage_regularization_strength,
            f.beta
        ),
        (-0.5, 0.1, 0.0, 0.0, 0.0, 0.0)
    );
    let l = Lamb::default();
    assert_eq!((l.beta_1, l.beta_2, l.epsilon), (0.9, 0.999, 1e-7));
    let c = &Adam::default().config;
    assert_eq!(
        (c.use_ema, c.ema_momentum, c.ema_overwrite_frequency),
        (false, 0.99, None)
    );
}

/// `gradient_accumulation_steps = n` at batch `b` is one update with the mean gradient of
/// `n` batches: on a mean loss, the update of one step at batch `n·b` (with Adam too: its
/// bias correction counts updates, as Keras'), on both backends; between updates the
/// weights do not move.
#[test]
fn accumulating_n_batches_is_one_step_on_n_times_the_batch() {
    let r = reference();
    let (x, y) = (tensor(&r["x"]), tensor(&r["y"]));
    let rows = |v: &Json, n: usize| tensor(&Json::Array(v.as_array().unwrap()[..n].to_vec()));
    let (x6, y6) = (rows(&r["x"], 6), rows(&r["y"], 6));
    let same = |what: &str, got: &[(String, Tensor)], want: &[(String, Tensor)]| {
        assert_eq!(got.len(), want.len(), "{what}");
        for ((n, g), (_, w)) in got.iter().zip(want) {
            let (g, w) = (g.to_vec::<f32>().unwrap(), w.to_vec::<f32>().unwrap());
            for (a, b) in g.iter().zip(&w) {
                let (a, b) = (*a as f64, *b as f64);
                assert!(
                    (a - b).abs() <= ATOL + RTOL * b.abs(),
                    "{what} {n}: {g:?} vs {w:?}"
                );
            }
        }
    };
    for xla in [false, true] {
        let fit = |opt: Box<dyn Optimizer>, x: &Tensor, y: &Tensor, batch: usize, epochs: usize| {
            let mut m = model(&r, device(xla));
            m.compile_boxed(opt, Box::new(MeanSquaredError), Vec::new())
                .unwrap();
            let plan = Fit::epochs(epochs)
                .batch_size(batch)
                .shuffle(false)
                .verbose(0);
            m.fit(x, y, plan).unwrap();
            m.weights()
        };
        for epochs in [1, 3] {
            let what = format!("adam, {epochs} epochs, xla={xla}");
            let whole = fit(Box::new(Adam::new(0.05)), &x, &y, 8, epochs);
            let steps4 = Adam::new(0.05).with_gradient_accumulation_steps(4);
            same(&what, &fit(Box::new(steps4), &x, &y, 2, epochs), &whole);
            let what = format!("sgd, {epochs} epochs, xla={xla}");
            let whole = fit(Box::new(SGD::new(0.1).momentum(0.5)), &x, &y, 8, epochs);
            let steps2 = SGD::new(0.1)
                .momentum(0.5)
                .with_gradient_accumulation_steps(2);
            same(&what, &fit(Box::new(steps2), &x, &y, 4, epochs), &whole);
        }
        // Three batches of a four-step cycle: no update yet.
        let steps4 = Adam::new(0.05).with_gradient_accumulation_steps(4);
        let after = fit(Box::new(steps4), &x6, &y6, 2, 1);
        assert_eq!(after, model(&r, device(xla)).weights(), "xla={xla}");
    }
}
