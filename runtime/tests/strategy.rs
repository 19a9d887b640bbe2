//! Data-parallel training under strategies: Mirrored over 1, 2 and 4 native threads and
//! over 1, 2 and 4 XLA CPU devices gives the parameters single-device training gives on
//! the same global batches (relative 1e-5 after 10 steps), with every replica's copy
//! bit-identical; steps_per_execution 1 and 8 agree under Mirrored; uneven global batches
//! are refused unless padded, and padding changes nothing; evaluate and predict split
//! over replicas agree with one device; scopes pick the strategy up.
//!
//! The XLA half needs the CPU plugin (`scripts/install-xla-plugin`, run by `scripts/test`);
//! without it those tests fail with the install command.

use ndarray::{Array1, ArrayD};
use strata_runtime::backend::Device;
use strata_runtime::loss::SparseCategoricalCrossentropy;
use strata_runtime::metrics::Accuracy;
use strata_runtime::nn::{Activation, BatchNormalization, Dense, Dropout, Sequential};
use strata_runtime::optim::Adam;
use strata_runtime::strategy::{MirroredStrategy, OneDeviceStrategy, Strategy, StrategyKind};
use strata_runtime::train::{Fit, History};
use strata_runtime::Model;
use strata_runtime::{random, Error, Tensor};

fn mlp() -> Model<Sequential> {
    Model::new(Sequential::new(
        Some(vec![20]),
        vec![
            Box::new(Dense::new("dense", 32, Activation::Relu)),
            Box::new(Dense::new("dense_1", 16, Activation::Relu)),
            Box::new(Dense::new("dense_2", 4, Activation::Softmax)),
        ],
    ))
}

/// Labels: the index of the largest of the first four features.
fn problem(n: usize, seed: u64) -> (ArrayD<f32>, Array1<i32>) {
    let x = random::normal(&[n, 20], 0.0, 1.0, seed).unwrap();
    let y = x
        .outer_iter()
        .map(|r| (0..4).max_by(|&a, &b| r[a].total_cmp(&r[b])).unwrap() as i32)
        .collect();
    (x, y)
}

fn xla(devices: usize) -> Device {
    Device::XlaCpu {
        devices: Some(devices),
    }
}

fn strategy(s: strata_runtime::Result<Strategy>) -> Strategy {
    s.unwrap_or_else(|e| panic!("the strategy is needed for this test: {e}"))
}

/// Trains a fresh model under `s` for `epochs` over `n` samples in batches of `batch`
/// (no shuffling, so every run sees the same global batches).
fn train(s: &Strategy, n: usize, batch: usize, k: usize, fit: Fit) -> (Model<Sequential>, History) {
    let (x, y) = problem(n, 3);
    let mut m = s.scope(mlp);
    m.compile(
        Adam::new(0.01),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    m.set_steps_per_execution(k).unwrap();
    let h = m
        .fit(&x, &y, fit.batch_size(batch).shuffle(false).verbose(0))
        .unwrap_or_else(|e| panic!("{s}: {e}"));
    (m, h)
}

/// Max |a - b| over max |a|, per tensor.
fn assert_close(a: &[(String, Tensor)], b: &[(String, Tensor)], rtol: f32, what: &str) {
    assert_eq!(a.len(), b.len());
    for ((name, a), (_, b)) in a.iter().zip(b) {
        let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        let scale = a.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
        let diff = a
            .iter()
            .zip(&b)
            .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(
            diff <= rtol * scale,
            "{what}: {name} differs by {diff} (relative {}, scale {scale})",
            diff / scale
        );
    }
}

/// Every replica's copy is the same, bit for bit.
fn assert_replicas_identical(m: &mut Model<Sequential>, replicas: usize, what: &str) {
    let copies = m.weights_per_replica().unwrap();
    assert_eq!(copies.len(), replicas, "{what}");
    for (r, c) in copies.iter().enumerate().skip(1) {
        for ((name, a), (_, b)) in copies[0].iter().zip(c) {
            let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
            assert!(
                a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
                "{what}: replica {r}'s {name} differs from replica 0's"
            );
        }
    }
}

fn mirrored_matches(one: Strategy, mirrored: impl Fn(usize) -> Strategy) {
    // 10 steps of a global batch of 32.
    let (single, hs) = train(&one, 320, 32, 1, Fit::epochs(1));
    for replicas in [1, 2, 4] {
        let s = mirrored(replicas);
        assert_eq!(s.kind(), StrategyKind::Mirrored);
        assert_eq!(s.num_replicas_in_sync(), replicas);
        assert_eq!(s.devices().len(), replicas);
        let (mut m, h) = train(&s, 320, 32, 1, Fit::epochs(1));
        assert_eq!(m.iterations(), 10);
        let what = s.to_string();
        assert_close(&single.weights(), &m.weights(), 1e-5, &what);
        assert_replicas_identical(&mut m, replicas, &what);
        // The host reads replica 0's metrics, which are the global ones.
        for key in ["loss", "accuracy"] {
            let (a, b) = (hs.get(key).unwrap()[0], h.get(key).unwrap()[0]);
            assert!(
                (a - b).abs() <= 1e-5 * a.abs().max(1.0),
                "{what}: {key} {a} vs {b}"
            );
        }
    }
}

#[test]
fn mirrored_native_threads_match_one_device() {
    mirrored_matches(strategy(OneDeviceStrategy::new(Device::Native)), |n| {
        strategy(MirroredStrategy::with_replicas(Device::Native, n))
    });
}

#[test]
fn mirrored_xla_cpu_devices_match_one_device() {
    mirrored_matches(strategy(OneDeviceStrategy::new(xla(1))), |n| {
        strategy(MirroredStrategy::with_replicas(xla(4), n))
    });
}

#[test]
fn steps_per_execution_1_and_8_agree_under_mirrored() {
    for s in [
        strategy(MirroredStrategy::with_replicas(Device::Native, 2)),
        strategy(MirroredStrategy::with_replicas(xla(2), 2)),
    ] {
        // 20 steps per epoch, 2 epochs: calls of 8, 8, 4 steps.
        let (mut a, ha) = train(&s, 160, 8, 1, Fit::epochs(2));
        let (mut b, hb) = train(&s, 160, 8, 8, Fit::epochs(2));
        assert_eq!(a.iterations(), 40);
        assert_eq!(b.iterations(), 40);
        let what = format!("{s}, steps_per_execution 1 vs 8");
        if s.device() == Device::Native {
            // The same kernels on the same rows: exactly the same result.
            assert_eq!(a.weights(), b.weights(), "{what}");
            assert_eq!(ha, hb, "{what}");
        } else {
            assert_close(&a.weights(), &b.weights(), 1e-5, &what);
        }
        assert_replicas_identical(&mut a, 2, &what);
        assert_replicas_identical(&mut b, 2, &what);
    }
}

#[test]
fn an_uneven_global_batch_is_refused_unless_padded() {
    let s = strategy(MirroredStrategy::with_replicas(Device::Native, 4));
    let (x, y) = problem(62, 4);
    let mut m = s.scope(mlp);
    m.compile(
        Adam::new(0.01),
        SparseCategoricalCrossentropy::default(),
        (),
    )
    .unwrap();
    // A batch of 10 does not split over 4 replicas; neither does the last batch of 2
    // (62 samples in batches of 20).
    for batch in [10, 20] {
        match m.fit(&x, &y, Fit::epochs(1).batch_size(batch).verbose(0)) {
            Err(Error::InvalidArgument { message, .. }) => {
                assert!(message.contains("pad_to_replicas"), "{message}")
            }
            other => panic!("batch {batch}: expected an error, got {other:?}"),
        }
    }
    assert_eq!(m.iterations(), 0, "nothing may train before the error");

    // Padded, the batches of 10 (and the last of 6 with batch 9) train exactly as on one
    // device: the padding weighs nothing and the divisions use the real counts.
    let one = strategy(OneDeviceStrategy::new(Device::Native));
    for batch in [10, 9] {
        let (a, ha) = train(&one, 60, batch, 1, Fit::epochs(2));
        let (mut b, hb) = train(&s, 60, batch, 1, Fit::epochs(2).pad_to_replicas(true));
        let what = format!("padded batch {batch}");
        assert_close(&a.weights(), &b.weights(), 1e-5, &what);
        assert_replicas_identical(&mut b, 4, &what);
        let (la, lb) = (ha.get("loss").unwrap()[1], hb.get("loss").unwrap()[1]);
        assert!((la - lb).abs() <= 1e-5 * la, "{what}: loss {la} vs {lb}");
    }
}

#[test]
fn evaluate_and_predict_split_over_replicas_agree_with_one_device() {
    let (x, y) = problem(50, 5);
    let one = strategy(OneDeviceStrategy::new(Device::Native));
    for s in [
        strategy(MirroredStrategy::with_replicas(Device::Native, 4)),
        strategy(MirroredStrategy::with_replicas(xla(4), 4)),
    ] {
        let (a, _) = train(&one, 64, 16, 1, Fit::epochs(1));
        let (mut b, _) = train(&s, 64, 16, 1, Fit::epochs(1));
        // 50 samples in batches of 32: the last batch of 18 does not split over 4, and
        // evaluate/predict pad it themselves.
        let la = a.evaluate(&x, &y).unwrap();
        let lb = b.evaluate(&x, &y).unwrap();
        for key in ["loss", "accuracy"] {
            let (p, q) = (la.get(key).unwrap(), lb.get(key).unwrap());
            assert!(
                (p - q).abs() <= 1e-5 * p.abs().max(1.0),
                "{s}: {key} {p} vs {q}"
            );
        }
        let pa = a.predict(&x).unwrap();
        let pb = b.predict(&x).unwrap();
        assert_eq!(pb.dims(), &[50, 4]);
        let (pa, pb) = (pa.to_vec::<f32>().unwrap(), pb.to_vec::<f32>().unwrap());
        let diff = pa
            .iter()
            .zip(&pb)
            .fold(0f32, |m, (p, q)| m.max((p - q).abs()));
        assert!(diff <= 1e-5, "{s}: predictions differ by {diff}");
        // Three batches of 6 per call (each padded to 8 over the replicas), then 2, then
        // the last 2 samples alone.
        b.set_steps_per_execution(3).unwrap();
        let lk = b.evaluate_batched(&x, &y, 6).unwrap();
        let l1 = a.evaluate_batched(&x, &y, 6).unwrap();
        for key in ["loss", "accuracy"] {
            let (p, q) = (l1.get(key).unwrap(), lk.get(key).unwrap());
            assert!(
                (p - q).abs() <= 1e-5 * p.abs().max(1.0),
                "{s}, k = 3: {key} {p} vs {q}"
            );
        }
        let pk = b.predict_batched(&x, 6).unwrap().to_vec::<f32>().unwrap();
        let diff = pa
            .iter()
            .zip(&pk)
            .fold(0f32, |m, (p, q)| m.max((p - q).abs()));
        assert!(diff <= 1e-5, "{s}, k = 3: predictions differ by {diff}");
    }
}

#[test]
fn replicas_stay_identical_with_dropout_and_batch_norm() {
    // Per-replica batch statistics and dropout masks differ between replicas; the
    // all-reduced gradients and the averaged moving statistics keep the state equal.
    for s in [
        strategy(MirroredStrategy::with_replicas(Device::Native, 2)),
        strategy(MirroredStrategy::with_replicas(xla(2), 2)),
    ] {
        let (x, y) = problem(64, 6);
        let mut m = s.scope(|| {
            Model::new(Sequential::new(
                Some(vec![20]),
                vec![
                    Box::new(Dense::new("dense", 16, Activation::Relu)),
                    Box::new(BatchNormalization::new("batch_normalization")),
                    Box::new(Dropout::new("dropout", 0.3)),
                    Box::new(Dense::new("dense_1", 4, Activation::Softmax)),
                ],
            ))
        });
        m.compile(
            Adam::new(0.01),
            SparseCategoricalCrossentropy::default(),
            (),
        )
        .unwrap();
        m.fit(&x, &y, Fit::epochs(2).batch_size(16).verbose(0))
            .unwrap();
        assert_replicas_identical(&mut m, 2, &s.to_string());
        let moving = m
            .weights()
            .into_iter()
            .find(|(n, _)| n.ends_with("moving_mean"))
            .unwrap();
        assert!(moving.1.to_vec::<f32>().unwrap().iter().any(|v| *v != 0.0));
    }
}

#[test]
fn scopes_give_models_their_strategy() {
    let s = strategy(MirroredStrategy::with_replicas(Device::Native, 2));
    assert!(Strategy::current().is_none());
    let inside = s.scope(|| {
        assert_eq!(Strategy::current().unwrap().num_replicas_in_sync(), 2);
        let one = strategy(OneDeviceStrategy::new(Device::Native));
        // The innermost scope wins.
        let nested = one.scope(mlp);
        assert!(nested.backend().unwrap().replicas().is_none());
        mlp()
    });
    assert!(Strategy::current().is_none());
    assert_eq!(inside.backend().unwrap().replicas(), Some(2));
    assert_eq!(inside.strategy().unwrap().num_replicas_in_sync(), 2);
    let outside = mlp();
    assert!(outside.strategy().is_none());
    // Outside any scope: the device STRATA_DEVICE names, else the native backend.
    if std::env::var_os(strata_runtime::backend::DEVICE_ENV).is_none_or(|d| d.is_empty()) {
        assert_eq!(outside.backend().unwrap().name(), "native");
    }

    let mut later = mlp();
    later.set_strategy(&s);
    assert_eq!(later.strategy().unwrap().num_replicas_in_sync(), 2);
    later.set_device(Device::Native).unwrap();
    assert!(later.strategy().is_none());

    let devices = format!("{:?}", s.devices());
    assert!(
        devices.contains(
            "LogicalDevice(name='/job:localhost/replica:0/task:0/device:CPU:1', device_type='CPU')"
        ),
        "{devices}"
    );
}
