//! The tutorial's training on XLA (CPU plugin) against the native backend: the same loss
//! after each of 20 steps, and the same weights after them. Needs the XLA CPU plugin
//! (`scripts/install-xla-plugin`, which `scripts/test` runs); fails without it.

use std::sync::{Arc, Mutex};
use strata::backend::Device;
use strata::loss::SparseCategoricalCrossentropy;
use strata::metrics::Accuracy;
use strata::optim::Adam;
use strata::train::{Callback, Control, Fit, Logs};
use strata::{random, Result};

#[derive(Clone, Default)]
struct Losses(Arc<Mutex<Vec<f64>>>);

impl Callback for Losses {
    fn on_batch_end(&mut self, _step: usize, logs: &Logs, _c: &mut Control<'_>) -> Result<()> {
        self.0.lock().unwrap().push(logs.get("loss").unwrap());
        Ok(())
    }
}

fn train(device: Device) -> (Vec<f64>, Vec<(String, strata::Tensor)>) {
    let x = random::normal(&[640, 784], 0.0, 1.0, 1).unwrap();
    let y = random::uniform_int(&[640], 0, 10, 2).unwrap();
    let mut model = strata::model![
        Dense(128, relu, input_shape = 784),
        Dense(64, relu),
        Dense(10, softmax)
    ];
    model
        .set_device(device)
        .unwrap_or_else(|e| panic!("{device:?}: {e}"));
    model
        .compile(
            Adam::default(),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )
        .unwrap();
    let losses = Losses::default();
    model
        .fit(
            &x,
            &y,
            Fit::epochs(1)
                .batch_size(32)
                .shuffle(false)
                .verbose(0)
                .callback(losses.clone()),
        )
        .unwrap();
    let l = losses.0.lock().unwrap().clone();
    (l, model.weights())
}

#[test]
fn tutorial_step_matches_native_for_20_steps() {
    let (native, wn) = train(Device::Native);
    let (xla, wx) = train(Device::XlaCpu { devices: None });
    assert_eq!(native.len(), 20);
    assert_eq!(xla.len(), 20);
    for (i, (a, b)) in native.iter().zip(&xla).enumerate() {
        assert!(
            (a - b).abs() <= 1e-4 * a.abs(),
            "step {i}: native loss {a}, xla loss {b}"
        );
    }
    for ((name, a), (_, b)) in wn.iter().zip(&wx) {
        let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        let scale = a.iter().fold(0f32, |m, v| m.max(v.abs()));
        let diff = a
            .iter()
            .zip(&b)
            .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(
            diff <= 1e-4 * scale.max(1e-3),
            "{name}: max difference {diff} (scale {scale})"
        );
    }
}
