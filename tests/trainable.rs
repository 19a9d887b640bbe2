//! `trainable = false` (Keras' frozen layers), declared in `model!` or set with
//! `Model::set_trainable`: no gradient, no optimizer state, non-trainable in the summary,
//! and a frozen batch normalisation runs in inference mode.

use strata::loss::SparseCategoricalCrossentropy;
use strata::metrics::Accuracy;
use strata::model;
use strata::nn::Architecture;
use strata::optim::Adam;
use strata::train::Fit;
use strata::{random, Model, Tensor};

fn data() -> (ndarray::ArrayD<f32>, ndarray::ArrayD<i32>) {
    let x = random::normal(&[256, 4], 0.0, 1.0, 1).unwrap();
    let y = random::uniform_int(&[256], 0, 2, 2).unwrap();
    (x, y)
}

fn fit<A: Architecture>(m: &mut Model<A>) {
    let (x, y) = data();
    m.compile(
        Adam::new(0.01),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    m.fit(&x, &y, Fit::epochs(2).batch_size(32).verbose(0))
        .unwrap();
}

fn declared<A: Architecture>(_: &Model<A>) -> Option<&'static [strata::nn::ParamDecl]> {
    A::PARAMS
}

fn weight(m: &Model<impl Architecture>, name: &str) -> Tensor {
    m.weights().into_iter().find(|(n, _)| n == name).unwrap().1
}

/// The names in a checkpoint's safetensors header.
fn checkpoint_header(m: &mut Model<impl Architecture>, name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("strata-trainable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    m.save_checkpoint(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    String::from_utf8(bytes[8..8 + n].to_vec()).unwrap()
}

#[test]
fn a_frozen_layer_keeps_its_weights_and_gets_no_optimizer_state() {
    let mut m = model![
        Input(4),
        Dense(8, relu, trainable = false),
        Dense(2, softmax),
    ];
    // The expansion declares the frozen weights non-trainable (checked by `build`).
    let declared = declared(&m).unwrap();
    assert!(
        !declared[0].trainable && declared[2].trainable,
        "{declared:?}"
    );
    let before = (weight(&m, "dense/kernel"), weight(&m, "dense_1/kernel"));
    let summary = m.summary();
    assert!(
        summary.contains("Trainable params: 18 (72.00 B)"),
        "{summary}"
    );
    assert!(
        summary.contains("Non-trainable params: 40 (160.00 B)"),
        "{summary}"
    );
    fit(&mut m);
    assert_eq!(weight(&m, "dense/kernel"), before.0, "frozen weights move");
    assert_ne!(
        weight(&m, "dense_1/kernel"),
        before.1,
        "trainable weights stay"
    );
    let header = checkpoint_header(&mut m, "frozen.safetensors");
    assert!(header.contains("optimizer/m/dense_1/kernel"), "{header}");
    for slot in ["optimizer/m/dense/", "optimizer/v/dense/"] {
        assert!(
            !header.contains(slot),
            "optimizer state for a frozen layer: {header}"
        );
    }
}

#[test]
fn set_trainable_freezes_and_unfreezes_before_compile() {
    let mut m = model![Input(4), Dense(8, relu), Dense(2, softmax)];
    m.set_trainable("dense", false).unwrap();
    assert!(m.summary().contains("Non-trainable params: 40"));
    let before = weight(&m, "dense/kernel");
    fit(&mut m);
    assert_eq!(weight(&m, "dense/kernel"), before);
    // Compiled: refused, as Keras would need a compile for it to take effect.
    let e = m.set_trainable("dense", true).unwrap_err().to_string();
    assert!(e.contains("compile"), "{e}");
    let e = model![Input(4), Dense(2)]
        .set_trainable("dense_9", false)
        .unwrap_err();
    assert!(e.to_string().contains("no layer `dense_9`"), "{e}");
    // Unfrozen again before compile: trains.
    let mut m = model![
        Input(4),
        Dense(8, relu, trainable = false),
        Dense(2, softmax)
    ];
    m.set_trainable("dense", true).unwrap();
    let before = weight(&m, "dense/kernel");
    fit(&mut m);
    assert_ne!(weight(&m, "dense/kernel"), before);
}

/// A frozen batch normalisation uses and keeps its moving statistics in training.
#[test]
fn a_frozen_batch_norm_runs_in_inference_mode() {
    let mut m = model![
        Input(4),
        BatchNormalization(trainable = false),
        Dense(2, softmax),
    ];
    let mean = weight(&m, "batch_normalization/moving_mean");
    let summary = m.summary();
    assert!(summary.contains("Non-trainable params: 16"), "{summary}");
    fit(&mut m);
    assert_eq!(weight(&m, "batch_normalization/moving_mean"), mean);
    let mut unfrozen = model![Input(4), BatchNormalization(), Dense(2, softmax)];
    fit(&mut unfrozen);
    assert_ne!(weight(&unfrozen, "batch_normalization/moving_mean"), mean);
}
