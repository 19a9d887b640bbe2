//! `STRATA_DEVICE` chooses the device of a model given none in code (a bad value is a typed
//! error at `compile`, or at `predict` when that comes first; an explicit choice wins), and
//! the messages of calls made in the wrong order or with batches that do not split say what
//! was called, what was expected and what came.
//!
//! The cases that need an environment variable or stderr run in a child process (this
//! binary again, running only [`child`]), so no test here sets the environment of the
//! process the other tests run in.

use std::process::{Command, Output};
use strata::backend::pjrt::{find_plugin, PluginKind};
use strata::backend::DEVICE_ENV;
use strata::data::Dataset;
use strata::nn::Architecture;
use strata::prelude::*;

/// Names the case [`child`] runs.
const CASE_ENV: &str = "STRATA_E2E_CASE";

/// Runs [`child`] with `case` and `STRATA_DEVICE` set to `device` (removed when `None`).
fn run_child(case: &str, device: Option<&str>) -> Output {
    run_child_in(case, device, None)
}

/// [`run_child`] in the directory `dir`.
fn run_child_in(case: &str, device: Option<&str>, dir: Option<&std::path::Path>) -> Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    cmd.args([
        "child",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CASE_ENV, case)
    .env_remove("STRATA_STRATEGY");
    match device {
        Some(d) => cmd.env(DEVICE_ENV, d),
        None => cmd.env_remove(DEVICE_ENV),
    };
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "case {case} with {DEVICE_ENV}={device:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The cases that need their own process; run by the tests below, never on its own.
#[test]
#[ignore = "run by the other tests of this file, in a child process"]
fn child() {
    match std::env::var(CASE_ENV).as_deref() {
        Ok("bad_device") => bad_device(),
        Ok("device_from_env") => device_from_env(),
        Ok("missing_plugin") => missing_plugin(),
        Ok("output_activation") => output_activation(),
        Ok(other) => panic!("no case `{other}`"),
        // Run by hand without a case (`--ignored`): nothing to do.
        Err(_) => {}
    }
}

fn mlp() -> Model<impl Architecture> {
    model![Dense(8, relu, input_shape = 4), Dense(3, softmax)]
}

fn data(n: usize) -> (ndarray::ArrayD<f32>, ndarray::ArrayD<i32>) {
    (
        strata::random::normal(&[n, 4], 0.0, 1.0, 1).unwrap(),
        strata::random::uniform_int(&[n], 0, 3, 2).unwrap(),
    )
}

fn compile(m: &mut Model<impl Architecture>) -> Result<()> {
    m.compile(
        Adam::default(),
        SparseCategoricalCrossentropy::default(),
        (),
    )
}

// ---- STRATA_DEVICE ---------------------------------------------------------------------

#[test]
fn a_bad_device_variable_is_a_typed_error_at_the_first_call_that_needs_the_device() {
    for value in ["banana", "xla-cpu:0", "tpu:1"] {
        run_child("bad_device", Some(value));
    }
}

/// `STRATA_DEVICE` holds a name that is not a device.
fn bad_device() {
    let value = std::env::var(DEVICE_ENV).unwrap();
    let (x, y) = data(12);
    let is_bad_value = |e: &Error, call: &str| match e {
        Error::DeviceParse { input, message } => {
            assert_eq!(input, &value);
            assert!(message.starts_with(call), "{call}: {message}");
            assert!(message.contains(DEVICE_ENV), "{message}");
            let text = e.to_string();
            assert!(text.contains("expected native, xla-cpu"), "{text}");
        }
        e => panic!("{call}: expected a DeviceParse error, got {e:?}"),
    };

    // Creating the model cannot fail; compile is the first call that opens the device,
    // and a failed compile leaves the model uncompiled.
    let mut m = mlp();
    is_bad_value(&compile(&mut m).unwrap_err(), "compile");
    assert!(!m.is_compiled());
    is_bad_value(&compile(&mut m).unwrap_err(), "compile");
    is_bad_value(&m.backend().err().unwrap(), "backend");
    // predict needs no compile, so on an uncompiled model it is the first call.
    is_bad_value(&mlp().predict(&x).unwrap_err(), "predict");

    // An explicit choice in code wins over the variable: a device, a backend, a strategy
    // set later, or the scope the model is created in.
    let mut m = mlp();
    m.set_device(Device::Native).unwrap();
    compile(&mut m).unwrap();
    m.fit(&x, &y, Fit::epochs(1).verbose(0)).unwrap();
    assert_eq!(m.backend().unwrap().name(), "native");

    let one = OneDeviceStrategy::new(Device::Native).unwrap();
    let mut m = mlp();
    m.set_strategy(&one);
    compile(&mut m).unwrap();
    m.evaluate(&x, &y).unwrap();

    let mut m = one.scope(mlp);
    compile(&mut m).unwrap();
    m.fit(&x, &y, Fit::epochs(1).verbose(0)).unwrap();
    assert_eq!(m.predict(&x).unwrap().dims(), &[12, 3]);
}

#[test]
fn the_device_variable_chooses_the_device_of_a_model_given_none() {
    run_child("device_from_env", None);
    run_child("device_from_env", Some(""));
    run_child("device_from_env", Some("native"));
    run_child("device_from_env", Some("xla-cpu"));
    run_child("device_from_env", Some("xla-cpu:2"));
}

/// `STRATA_DEVICE` unset, empty or naming a device: a plain model trains there. (The XLA
/// values need the CPU plugin, `scripts/install-xla-plugin`; without it this fails, naming
/// the install command.)
fn device_from_env() {
    let value = std::env::var(DEVICE_ENV).unwrap_or_default();
    let device = Device::from_env().unwrap();
    let (x, y) = data(32);
    let mut m = mlp();
    compile(&mut m).unwrap_or_else(|e| panic!("{DEVICE_ENV}={value}: {e}"));
    assert_eq!(
        m.backend().unwrap().name(),
        device.to_string(),
        "{DEVICE_ENV}={value}"
    );
    assert!(m.strategy().is_none(), "one device, no strategy");
    let h = m
        .fit(&x, &y, Fit::epochs(2).batch_size(8).verbose(0))
        .unwrap();
    assert!(h.history["loss"].iter().all(|l| l.is_finite()));
    assert_eq!(m.predict(&x).unwrap().dims(), &[32, 3]);
}

#[test]
fn a_device_whose_plugin_is_missing_is_the_plugins_typed_error_at_compile() {
    // Outside the checkout its .strata/plugins is not found.
    let elsewhere = std::env::temp_dir().join(format!("strata-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&elsewhere).unwrap();
    run_child_in("missing_plugin", Some("xla-cpu"), Some(&elsewhere));
    std::fs::remove_dir_all(&elsewhere).unwrap();
}

/// `STRATA_DEVICE=xla-cpu` where no CPU plugin can be found.
fn missing_plugin() {
    if let Ok(found) = find_plugin(PluginKind::Cpu, None) {
        eprintln!("a CPU plugin is installed outside the checkout ({found:?}): nothing to test");
        return;
    }
    let (x, _) = data(4);
    let mut m = mlp();
    for _ in 0..2 {
        match compile(&mut m) {
            Err(Error::PluginNotFound { device, .. }) => assert_eq!(device, "xla-cpu"),
            other => panic!("expected PluginNotFound, got {other:?}"),
        }
        assert!(!m.is_compiled());
    }
    match m.predict(&x) {
        Err(Error::PluginNotFound { .. }) => {}
        other => panic!("expected PluginNotFound, got {other:?}"),
    }
    // Code that chooses the device still runs.
    m.set_device(Device::Native).unwrap();
    compile(&mut m).unwrap();
}

// ---- calls made before compile ----------------------------------------------------------

#[test]
fn calls_before_compile_name_themselves_and_predict_needs_no_compile() {
    let (x, y) = data(20);
    let mut m = mlp();
    let named = |e: Error, call: &str| match e {
        Error::InvalidArgument { what, message } => {
            assert_eq!(what, call);
            assert!(
                message.contains("not compiled") && message.contains(&format!("before {call}")),
                "{message}"
            );
            assert!(message.contains("predict runs without it"), "{message}");
        }
        e => panic!("{call}: expected InvalidArgument, got {e:?}"),
    };
    named(m.evaluate(&x, &y).unwrap_err(), "evaluate");
    named(m.evaluate_batched(&x, &y, 4).unwrap_err(), "evaluate");
    named(m.fit(&x, &y, Fit::epochs(1)).unwrap_err(), "fit");
    let ds = Dataset::from_arrays(x.clone(), y.clone())
        .unwrap()
        .batch(5)
        .unwrap();
    named(
        m.fit_dataset(&ds, Fit::epochs(1)).unwrap_err(),
        "fit_dataset",
    );
    named(
        m.set_steps_per_execution(2).unwrap_err(),
        "set_steps_per_execution",
    );

    // Keras' predict works on an uncompiled model; so does Strata's, with the same
    // outputs as after compile (compile changes no weight).
    let before = m.predict(&x).unwrap();
    assert_eq!(before.dims(), &[20, 3]);
    compile(&mut m).unwrap();
    let after = m.predict(&x).unwrap();
    assert_eq!(
        before.to_vec::<f32>().unwrap(),
        after.to_vec::<f32>().unwrap()
    );
}

// ---- from_logits on an output that holds probabilities ----------------------------------

#[test]
fn from_logits_on_a_softmax_or_sigmoid_output_warns_once() {
    let out = run_child("output_activation", None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The child marks where each case starts; the warnings of a case follow its mark.
    let cases: Vec<(&str, &str)> = stderr
        .split("case: ")
        .skip(1)
        .map(|c| c.split_once('\n').unwrap_or((c, "")))
        .collect();
    let names: Vec<&str> = cases.iter().map(|c| c.0).collect();
    assert_eq!(
        names,
        [
            "sparse_softmax",
            "categorical_softmax",
            "binary_sigmoid",
            "sparse_linear",
            "sparse_probabilities",
            "binary_probabilities"
        ],
        "{stderr}"
    );
    for (name, text) in cases {
        let warnings: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("strata: warning"))
            .collect();
        let (loss, activation) = match name {
            "sparse_softmax" => ("sparse_categorical_crossentropy", "softmax"),
            "categorical_softmax" => ("categorical_crossentropy", "softmax"),
            "binary_sigmoid" => ("binary_crossentropy", "sigmoid"),
            _ => {
                assert!(warnings.is_empty(), "{name}: {warnings:?}");
                continue;
            }
        };
        assert_eq!(warnings.len(), 1, "{name}: one warning per compile: {text}");
        let w = warnings[0];
        for part in [
            "fit: ",
            &format!("`{loss}`"),
            "from_logits: true",
            &format!("a {activation} activation"),
            "probabilities, not logits",
            "from_logits: false",
        ] {
            assert!(w.contains(part), "{name}: `{part}` missing from: {w}");
        }
    }
}

/// Trains models whose output does or does not fit their loss's `from_logits`, marking
/// each case on stderr; each trains for two epochs with validation and evaluates, so a
/// warning given more than once would show.
fn output_activation() {
    let n = 24;
    let x = strata::random::normal(&[n, 4], 0.0, 1.0, 1).unwrap();
    let labels = strata::random::uniform_int(&[n], 0, 3, 2).unwrap();
    let one_hot = ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&[n, 3]), |i| {
        f32::from(u8::from(labels[[i[0]]] == i[1] as i32))
    });
    let binary = labels.mapv(|l| f32::from(u8::from(l == 0)));
    let binary = binary.into_shape_with_order(vec![n, 1]).unwrap();
    let softmax = || model![Dense(8, relu, input_shape = 4), Dense(3, softmax)];
    let linear = || model![Dense(8, relu, input_shape = 4), Dense(3)];
    let sigmoid = || model![Dense(8, relu, input_shape = 4), Dense(1, sigmoid)];
    let sparse = |from_logits| SparseCategoricalCrossentropy { from_logits };
    let categorical = CategoricalCrossentropy {
        from_logits: true,
        ..Default::default()
    };

    train_case("sparse_softmax", softmax(), sparse(true), &x, &labels);
    train_case("categorical_softmax", softmax(), categorical, &x, &one_hot);
    let binary_logits = BinaryCrossentropy {
        from_logits: true,
        ..Default::default()
    };
    train_case("binary_sigmoid", sigmoid(), binary_logits, &x, &binary);
    train_case("sparse_linear", linear(), sparse(true), &x, &labels);
    train_case(
        "sparse_probabilities",
        softmax(),
        sparse(false),
        &x,
        &labels,
    );
    let binary_probs = BinaryCrossentropy {
        from_logits: false,
        ..Default::default()
    };
    train_case("binary_probabilities", sigmoid(), binary_probs, &x, &binary);
}

fn train_case<Y: strata::data::IntoTensor + Copy>(
    case: &str,
    mut m: Model<impl Architecture>,
    loss: impl strata::loss::Loss + 'static,
    x: &ndarray::ArrayD<f32>,
    y: Y,
) {
    eprintln!("case: {case}");
    let opts = Fit::epochs(2)
        .batch_size(8)
        .verbose(0)
        .validation_split(0.25);
    m.compile(Adam::default(), loss, ()).unwrap();
    m.fit(x, y, opts).unwrap_or_else(|e| panic!("{case}: {e}"));
    m.evaluate(x, y).unwrap_or_else(|e| panic!("{case}: {e}"));
}

// ---- batches that do not split over the replicas ----------------------------------------

#[test]
fn an_uneven_batch_is_reported_as_the_caller_passed_it() {
    let three = MirroredStrategy::with_replicas(Device::Native, 3).unwrap();
    let mut m = three.scope(mlp);
    compile(&mut m).unwrap();
    let mut message = |n: usize, batch: usize| {
        let (x, y) = data(n);
        match m.fit(&x, &y, Fit::epochs(1).batch_size(batch).verbose(0)) {
            Err(Error::InvalidArgument { what, message }) => {
                assert_eq!(what, "fit");
                assert!(message.contains("pad_to_replicas(true)"), "{message}");
                message
            }
            other => panic!("{n} samples, batch {batch}: expected an error, got {other:?}"),
        }
    };
    // The case: batches of 33 split over 3, but 1000 samples leave a last one of 10.
    let m1 = message(1000, 33);
    for part in [
        "1000 samples in batches of 33",
        "a last batch of 10",
        "3 replicas",
        "multiple of 3 (such as 999)",
        "drop_remainder(true)",
    ] {
        assert!(m1.contains(part), "`{part}` missing from: {m1}");
    }
    let m2 = message(64, 32);
    assert!(
        m2.contains("batch_size 32 does not split evenly over 3 replicas")
            && m2.contains("multiple of 3 (such as 30 or 33)"),
        "{m2}"
    );
    let m3 = message(20, 32);
    assert!(
        m3.contains("20 samples with batch_size 32 make one batch of 20")
            && m3.contains("(such as 18 or 21)"),
        "{m3}"
    );
    assert_eq!(m.iterations(), 0, "nothing trains before the error");

    // A dataset's batches are only seen as they come: its uneven batch is named by size.
    let (x, y) = data(40);
    let ds = Dataset::from_arrays(x.clone(), y.clone())
        .unwrap()
        .batch(33)
        .unwrap();
    match m.fit_dataset(&ds, Fit::epochs(1).verbose(0)) {
        Err(Error::InvalidArgument { message, .. }) => assert!(
            message.contains("a batch of 7 samples does not split evenly over 3 replicas")
                && message.contains("a multiple of 3"),
            "{message}"
        ),
        other => panic!("expected an error, got {other:?}"),
    }

    // As the messages say, padding trains every sample.
    let (x, y) = data(1000);
    let h = m
        .fit(
            &x,
            &y,
            Fit::epochs(1)
                .batch_size(33)
                .verbose(0)
                .pad_to_replicas(true),
        )
        .unwrap();
    assert!(h.history["loss"][0].is_finite());
}
