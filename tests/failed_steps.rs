//! A failed train step — a non-finite loss, gradient, learning rate or update — stops
//! `fit` with a typed error naming the step and the cause, and the model keeps the
//! finite weights of the step before it: exactly those of a run that stopped there. On
//! the native backend and on XLA (CPU plugin: `scripts/install-xla-plugin`; these tests
//! fail without it), with several steps per call and with data-parallel replicas.

use ndarray::Array2;
use strata::backend::Device;
use strata::loss::MeanSquaredError;
use strata::nn::Architecture;
use strata::optim::{OptimizerExt, Schedule, SGD};
use strata::strategy::MirroredStrategy;
use strata::train::{Fit, TerminateOnNaN};
use strata::{Error, Model, NonFiniteCause, Tensor};

const BATCH: usize = 2;

/// A learning rate of 0.01 for the first two steps, then `then`.
#[derive(Debug)]
struct FromStep3(f32);

impl Schedule for FromStep3 {
    fn lr(&self, iterations: u64) -> f32 {
        // `iterations` counts the updates done: step 3 (from 1) runs at 2.
        if iterations >= 2 {
            self.0
        } else {
            0.01
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Case {
    /// The schedule gives NaN from step 3.
    LearningRate,
    /// Step 3's batch has a finite loss whose gradient overflows.
    Gradient,
    /// Step 3's loss and gradient are finite, but its learning rate (1e30) makes the
    /// update overflow: found when step 4 reads what it wrote, or at the end of `fit`
    /// (see `an_update_that_overflows_stops_at_that_step`).
    Parameters,
}

impl Case {
    /// Eight rows (four steps); step 3 is rows 4 and 5.
    fn data(self) -> (Array2<f32>, Array2<f32>) {
        let mut x = Array2::from_elem((8, 1), 1.0f32);
        let y = Array2::from_elem((8, 1), 1.0f32);
        match self {
            Case::LearningRate => {}
            // w ≈ 0.13 by then: a residual ≈ 1.3e19 (squared, finite), times x: ∞.
            Case::Gradient => x[[4, 0]] = 1e20,
            // A gradient ≈ 1.3e9, times 1e30: ∞.
            Case::Parameters => x[[4, 0]] = 1e5,
        }
        (x, y)
    }

    fn optimizer(self) -> SGD {
        let sgd = SGD::new(0.01);
        match self {
            Case::LearningRate => sgd.with_learning_rate(FromStep3(f32::NAN)),
            Case::Gradient => sgd,
            Case::Parameters => sgd.with_learning_rate(FromStep3(1e30)),
        }
    }

    fn cause(self) -> NonFiniteCause {
        match self {
            Case::LearningRate => NonFiniteCause::LearningRate,
            Case::Gradient => NonFiniteCause::Gradient,
            Case::Parameters => NonFiniteCause::Parameters,
        }
    }
}

fn xla(devices: usize) -> Device {
    Device::XlaCpu {
        devices: Some(devices),
    }
}

/// Where a run trains: a device, steps per call, and replicas (1: no strategy).
#[derive(Clone, Copy, Debug)]
struct Setup {
    device: Device,
    k: usize,
    replicas: usize,
}

const SETUPS: [Setup; 6] = [
    Setup {
        device: Device::Native,
        k: 1,
        replicas: 1,
    },
    Setup {
        device: Device::Native,
        k: 4,
        replicas: 1,
    },
    Setup {
        device: Device::Native,
        k: 1,
        replicas: 2,
    },
    Setup {
        device: Device::XlaCpu { devices: None },
        k: 1,
        replicas: 1,
    },
    Setup {
        device: Device::XlaCpu { devices: None },
        k: 4,
        replicas: 1,
    },
    Setup {
        device: Device::XlaCpu { devices: None },
        k: 1,
        replicas: 2,
    },
];

/// One linear unit `y = w·x + b` (w = 0.1, b = 0), trained with mean squared error.
fn line(case: Case, s: Setup) -> Model<impl Architecture> {
    let build = || strata::model![Dense(1, input_shape = 1)];
    let mut m = if s.replicas > 1 {
        let device = match s.device {
            Device::Native => Device::Native,
            _ => xla(s.replicas),
        };
        let st = MirroredStrategy::with_replicas(device, s.replicas)
            .unwrap_or_else(|e| panic!("{s:?}: the strategy is needed for this test: {e}"));
        st.scope(build)
    } else {
        let mut m = build();
        m.set_device(s.device)
            .unwrap_or_else(|e| panic!("{s:?}: {e}"));
        m
    };
    // w = 0.1, b = 0.
    let w: Vec<(String, Tensor)> = m
        .weights()
        .into_iter()
        .map(|(name, t)| {
            let v = if t.dims().len() == 2 { 0.1f32 } else { 0.0 };
            let filled = Tensor::from_vec(t.dims(), vec![v; t.dims().iter().product()]).unwrap();
            (name, filled)
        })
        .collect();
    m.set_weights(&w).unwrap();
    m.compile(case.optimizer(), MeanSquaredError, ()).unwrap();
    m.set_steps_per_execution(s.k).unwrap();
    m
}

fn fit<A: Architecture>(
    m: &mut Model<A>,
    x: &Array2<f32>,
    y: &Array2<f32>,
    rows: usize,
    fit: Fit,
) -> strata::Result<()> {
    let x = x.slice(ndarray::s![..rows, ..]).to_owned();
    let y = y.slice(ndarray::s![..rows, ..]).to_owned();
    m.fit(&x, &y, fit.batch_size(BATCH).shuffle(false).verbose(0))
        .map(|_| ())
}

fn values<A: Architecture>(m: &Model<A>) -> Vec<Vec<f32>> {
    m.weights()
        .iter()
        .map(|(_, t)| t.to_vec::<f32>().unwrap())
        .collect()
}

fn assert_all_finite<A: Architecture>(m: &Model<A>, what: &str) {
    for (name, t) in m.weights() {
        let v = t.to_vec::<f32>().unwrap();
        assert!(v.iter().all(|x| x.is_finite()), "{what}: {name} = {v:?}");
    }
}

/// Fits `case`'s eight rows: step 3 must fail, naming its cause; returns the error text.
fn fit_until_step_3<A: Architecture>(case: Case, s: Setup, m: &mut Model<A>) -> String {
    let what = format!("{case:?} on {s:?}");
    let (x, y) = case.data();
    let e = fit(m, &x, &y, 8, Fit::epochs(1)).unwrap_err();
    match &e {
        Error::NonFiniteStep {
            epoch: 0,
            batch: 2,
            step: 3,
            cause,
            value,
        } => {
            assert_eq!(*cause, case.cause(), "{what}: {e}");
            match case {
                Case::LearningRate => assert!(value.is_some_and(f64::is_nan), "{what}: {e}"),
                Case::Gradient | Case::Parameters => assert_eq!(*value, None, "{what}: {e}"),
            }
        }
        other => panic!("{what}: expected a failed step 3, got {other:?}"),
    }
    let text = e.to_string();
    assert!(text.contains("step 3 (epoch 1, batch 3"), "{what}: {text}");
    text
}

/// Step 3 fails for `case`'s reason before its update; the model keeps exactly the
/// weights of a run of two steps, and goes on from them.
fn step_3_fails(case: Case, s: Setup) {
    let what = format!("{case:?} on {s:?}");
    let (x, y) = case.data();
    let mut m = line(case, s);
    let text = fit_until_step_3(case, s, &mut m);
    let named = case.cause().to_string();
    assert!(
        text.contains(&named) && text.contains("kept the weights from after step 2"),
        "{what}: {text}"
    );
    assert_eq!(m.iterations(), 2, "{what}");
    assert_all_finite(&m, &what);
    let mut two = line(case, s);
    fit(&mut two, &x, &y, 4, Fit::epochs(1)).unwrap();
    assert_eq!(values(&m), values(&two), "{what}: the weights after step 2");
    // The model trains on from there: rows without the bad step (a finite rate for the
    // schedules from step 3 on is not to be had; the gradient case has one).
    if let Case::Gradient = case {
        fit(&mut m, &x, &y, 4, Fit::epochs(1)).unwrap();
        assert_eq!(m.iterations(), 4, "{what}");
        assert_all_finite(&m, &what);
    }
}

#[test]
fn a_nan_learning_rate_from_step_3_keeps_the_weights_after_step_2() {
    for s in SETUPS {
        step_3_fails(Case::LearningRate, s);
    }
}

#[test]
fn a_non_finite_gradient_keeps_the_weights_after_step_2() {
    for s in SETUPS {
        step_3_fails(Case::Gradient, s);
    }
}

/// An overflow in the update shows only in what the update wrote (guarding the update by
/// it would need a second copy of the state): the next step's loss is not finite, the
/// chain stops there, and the error names the step that overflowed.
#[test]
fn an_update_that_overflows_stops_at_that_step() {
    for s in SETUPS {
        let what = format!("{s:?}");
        let mut m = line(Case::Parameters, s);
        let text = fit_until_step_3(Case::Parameters, s, &mut m);
        assert!(
            text.contains("overflowed") && text.contains("not finite"),
            "{what}: {text}"
        );
        assert_eq!(m.iterations(), 3, "{what}");
        let w = values(&m);
        assert!(w.iter().flatten().any(|v| !v.is_finite()), "{what}: {w:?}");
    }
}

/// An overflow in the last step of `fit` has no next step to show it: `fit` finds it in
/// the weights it ends with.
#[test]
fn an_update_that_overflows_in_the_last_step_is_an_error() {
    for s in SETUPS {
        let what = format!("{s:?}");
        let (x, y) = Case::Parameters.data();
        let mut m = line(Case::Parameters, s);
        let e = fit(&mut m, &x, &y, 6, Fit::epochs(1)).unwrap_err();
        assert!(
            matches!(
                e,
                Error::NonFiniteStep {
                    epoch: 0,
                    batch: 2,
                    step: 3,
                    cause: NonFiniteCause::Parameters,
                    value: None,
                }
            ),
            "{what}: {e:?}"
        );
        assert_eq!(m.iterations(), 3, "{what}");
    }
}

#[test]
fn terminate_on_nan_stops_quietly_on_any_cause_with_the_same_weights() {
    for case in [Case::LearningRate, Case::Gradient] {
        let s = SETUPS[0];
        let (x, y) = case.data();
        let mut m = line(case, s);
        fit(&mut m, &x, &y, 8, Fit::epochs(2).callback(TerminateOnNaN)).unwrap();
        let mut two = line(case, s);
        fit(&mut two, &x, &y, 4, Fit::epochs(1)).unwrap();
        assert_eq!(m.iterations(), 2, "{case:?}");
        assert_eq!(values(&m), values(&two), "{case:?}");
    }
}

/// The tutorial's model with SGD(1e6) on random data: the weights grow each step until
/// something stops being finite. Whatever fails first, the model keeps the finite
/// weights of the step before, exactly as a run of that many steps leaves them.
fn a_huge_learning_rate_on(device: Device) -> (u64, NonFiniteCause) {
    let x = strata::random::normal(&[640, 784], 0.0, 1.0, 1).unwrap();
    let y = strata::random::uniform_int(&[640], 0, 10, 2).unwrap();
    let build = || {
        let mut m = strata::model![
            Dense(128, relu, input_shape = 784),
            Dense(64, relu),
            Dense(10, softmax)
        ];
        m.set_device(device)
            .unwrap_or_else(|e| panic!("{device:?}: {e}"));
        m.compile(
            SGD::new(1e6),
            strata::loss::SparseCategoricalCrossentropy::default(),
            (),
        )
        .unwrap();
        m
    };
    let quiet = || Fit::epochs(1).batch_size(32).shuffle(false).verbose(0);
    let mut m = build();
    let e = m.fit(&x, &y, quiet()).unwrap_err();
    let Error::NonFiniteStep { step, cause, .. } = e else {
        panic!("{device:?}: expected a failed step, got {e:?}");
    };
    eprintln!("{device:?}: {e}");
    assert_eq!(m.iterations(), step - 1);
    for (name, t) in m.weights() {
        let v = t.to_vec::<f32>().unwrap();
        assert!(v.iter().all(|x| x.is_finite()), "{device:?}: {name}");
    }
    let mut before = build();
    let rows = (step as usize - 1) * 32;
    before
        .fit(
            x.slice(ndarray::s![..rows, ..]).to_owned(),
            y.slice(ndarray::s![..rows]).to_owned(),
            quiet(),
        )
        .unwrap();
    assert_eq!(m.weights(), before.weights(), "{device:?}");
    (step, cause)
}

#[test]
fn a_huge_learning_rate_stops_with_finite_weights() {
    let native = a_huge_learning_rate_on(Device::Native);
    let xla = a_huge_learning_rate_on(Device::XlaCpu { devices: None });
    // The same arithmetic up to rounding: the same step fails, for the same reason.
    assert_eq!(native, xla);
}
