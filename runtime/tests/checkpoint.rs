//! Checkpoints: round trip, bit-identical resume on the native backend, and clear errors
//! for truncated, foreign or mismatched files (leaving the model untouched).

use strata_runtime::loss::SparseCategoricalCrossentropy;
use strata_runtime::metrics::Accuracy;
use strata_runtime::nn::{Activation, Dense, Sequential};
use strata_runtime::optim::{Adam, SGD};
use strata_runtime::train::Fit;
use strata_runtime::Model;
use strata_runtime::{random, Error};

fn mlp(hidden: usize, seed: u64) -> Model<Sequential> {
    Model::new(Sequential::new(
        Some(vec![8]),
        vec![
            Box::new(Dense::new("dense", hidden, Activation::Relu)),
            Box::new(Dense::new("dense_1", 3, Activation::Softmax)),
        ],
    ))
    .with_seed(seed)
    .unwrap()
}

fn data() -> (ndarray::ArrayD<f32>, ndarray::ArrayD<i32>) {
    (
        random::normal(&[50, 8], 0.0, 1.0, 3).unwrap(),
        random::uniform_int(&[50], 0, 3, 4).unwrap(),
    )
}

fn compiled(seed: u64) -> Model<Sequential> {
    let mut m = mlp(16, seed);
    m.compile(
        Adam::default(),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    m
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("strata-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn resume_is_bit_identical() {
    let (x, y) = data();
    let fit = |epochs: usize, initial: usize| {
        Fit::epochs(epochs)
            .batch_size(8)
            .seed(11)
            .initial_epoch(initial)
            .verbose(0)
    };
    let mut straight = compiled(1);
    straight.fit(&x, &y, fit(4, 0)).unwrap();

    let path = tmp("resume.safetensors");
    let mut first = compiled(1);
    first.fit(&x, &y, fit(2, 0)).unwrap();
    first.save_checkpoint_at(&path, 2).unwrap();

    let mut resumed = compiled(99); // different initial weights: all must come from the file
    let info = resumed.load_checkpoint(&path).unwrap();
    assert_eq!(info.epoch, 2);
    assert_eq!(info.iterations, 14);
    assert!(info.has_optimizer);
    resumed.fit(&x, &y, fit(4, info.epoch)).unwrap();
    assert_eq!(resumed.weights(), straight.weights());
    assert_eq!(resumed.iterations(), straight.iterations());
}

#[test]
fn weights_only_round_trip_and_optimizer_mismatch() {
    let path = tmp("weights.safetensors");
    let mut a = mlp(16, 5);
    a.save_checkpoint(&path).unwrap();
    let mut b = mlp(16, 6);
    assert_ne!(a.weights(), b.weights());
    let info = b.load_checkpoint(&path).unwrap();
    assert!(!info.has_optimizer);
    assert_eq!(a.weights(), b.weights());

    // Optimizer state written by Adam cannot go into an SGD-compiled model.
    let (x, y) = data();
    let mut c = compiled(1);
    c.fit(&x, &y, Fit::epochs(1).verbose(0)).unwrap();
    c.save_checkpoint(&path).unwrap();
    let mut d = mlp(16, 1);
    d.compile(SGD::default(), SparseCategoricalCrossentropy::default(), ())
        .unwrap();
    let before = d.weights();
    let e = d.load_checkpoint(&path).unwrap_err();
    assert!(
        e.to_string().contains("adam") && e.to_string().contains("sgd"),
        "{e}"
    );
    assert_eq!(d.weights(), before, "a failed load changed the model");
}

#[test]
fn bad_files_are_rejected_without_touching_the_model() {
    let path = tmp("good.safetensors");
    let mut a = compiled(1);
    a.save_checkpoint(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let mut m = compiled(2);
    let before = m.weights();

    let truncated = tmp("truncated.safetensors");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let e = m.load_checkpoint(&truncated).unwrap_err();
    assert!(matches!(e, Error::Checkpoint { .. }), "{e}");

    let garbage = tmp("garbage.safetensors");
    std::fs::write(&garbage, b"definitely not a checkpoint").unwrap();
    assert!(matches!(
        m.load_checkpoint(&garbage).unwrap_err(),
        Error::Checkpoint { .. }
    ));

    // A valid safetensors file without our format tag.
    let foreign = tmp("foreign.safetensors");
    let v: Vec<u8> = 1.0f32.to_le_bytes().to_vec();
    let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![1], &v).unwrap();
    safetensors::serialize_to_file([("x", view)], None, &foreign).unwrap();
    let e = m.load_checkpoint(&foreign).unwrap_err();
    assert!(e.to_string().contains("not a Strata checkpoint"), "{e}");

    // Same names, other shapes.
    let mut wide = mlp(32, 1);
    let e = wide.load_checkpoint(&path).unwrap_err();
    assert!(
        e.to_string().contains("dense/kernel") && e.to_string().contains("f32[8, 32]"),
        "{e}"
    );

    let missing = tmp("does-not-exist.safetensors");
    assert!(matches!(
        m.load_checkpoint(&missing).unwrap_err(),
        Error::Io { .. }
    ));
    assert_eq!(m.weights(), before);
}

#[test]
fn writes_are_atomic() {
    let dir = tmp("atomic");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model.safetensors");
    let mut m = compiled(1);
    m.save_checkpoint(&path).unwrap();
    // Overwriting leaves no temporary file behind.
    m.save_checkpoint(&path).unwrap();
    let first = std::fs::read(&path).unwrap();
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    // A write that cannot happen leaves the old file as it was.
    let bad = dir.join("no-such-dir").join("model.safetensors");
    assert!(matches!(
        m.save_checkpoint(&bad).unwrap_err(),
        Error::Io { .. }
    ));
    assert!(
        std::fs::read(&path).unwrap() == first,
        "the existing checkpoint changed"
    );
}
