//! `Model::export` and `Exported`: an exported model predicts the same bits as the model
//! on the native backend and on XLA CPU, at several batch sizes; the IR text reads back
//! to the same graph (every op test graph, every graph a model compiles for fit, evaluate
//! and predict); and a damaged export is a typed error, never a panic.

mod common;

mod backends;

use backends::backends;
use ndarray::{Array1, ArrayD};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::{Backend, Buffer, CompileOptions, Executable};
use strata_runtime::ir::{DType, Graph, Value};
use strata_runtime::loss::SparseCategoricalCrossentropy;
use strata_runtime::metrics::Accuracy;
use strata_runtime::nn::{
    Activation, BatchNormalization, Conv2D, Dense, Dropout, Flatten, MaxPooling2D, Sequential,
};
use strata_runtime::optim::Adam;
use strata_runtime::train::Fit;
use strata_runtime::{random, Error, Exported, Model, Result, Tensor};

/// The tutorial's model.
fn mlp() -> Model<Sequential> {
    Model::new(Sequential::new(
        Some(vec![784]),
        vec![
            Box::new(Dense::new("dense", 128, Activation::Relu)),
            Box::new(Dense::new("dense_1", 64, Activation::Relu)),
            Box::new(Dense::new("dense_2", 10, Activation::Softmax)),
        ],
    ))
}

fn cnn() -> Model<Sequential> {
    Model::new(Sequential::new(
        Some(vec![10, 10, 1]),
        vec![
            Box::new(Conv2D::new("conv2d", 4, [3, 3], Activation::Relu)),
            Box::new(BatchNormalization::new("batch_normalization")),
            Box::new(MaxPooling2D::new("max_pooling2d", [2, 2])),
            Box::new(Flatten::new("flatten")),
            Box::new(Dropout::new("dropout", 0.3)),
            Box::new(Dense::new("dense", 5, Activation::Softmax)),
        ],
    ))
}

/// A fresh directory for one test.
fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("strata-export-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

fn inputs(n: usize, sample: &[usize], seed: u64) -> ArrayD<f32> {
    let mut dims = vec![n];
    dims.extend_from_slice(sample);
    random::normal(&dims, 0.0, 1.0, seed).unwrap()
}

/// Exports `model` (trained a little, so that batch norm's statistics move), loads it on
/// every backend and compares its outputs with the model's, bit for bit, for inputs of
/// two sizes (one a whole number of batches of 32, one not) and a batch size of 5.
fn same_bits_everywhere(name: &str, mut model: Model<Sequential>, sample: &[usize]) {
    let dir = scratch(name).join("model");
    let x = inputs(40, sample, 1);
    let y: Array1<i32> = (0..40).map(|i| i % 5).collect();
    model
        .compile(
            Adam::new(0.01),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )
        .unwrap();
    model.fit(&x, &y, Fit::epochs(1).verbose(0)).unwrap();
    model.export(&dir).unwrap();
    for (backend_name, backend) in backends() {
        model.set_backend(backend.clone());
        let exported = Exported::load(&dir).unwrap().with_backend(backend);
        assert_eq!(exported.input_shape(), model.input_shape().unwrap());
        assert_eq!(exported.output_shape(), model.output_shape().unwrap());
        assert_eq!(exported.name(), model.name());
        for n in [64, 13] {
            let x = inputs(n, sample, 7 + n as u64);
            let want = model.predict(&x).unwrap();
            let got = exported.predict(&x).unwrap();
            assert_eq!(
                got.dims(),
                want.dims(),
                "{name} on {backend_name}, {n} rows"
            );
            assert_eq!(
                bits(&got),
                bits(&want),
                "{name} on {backend_name}, {n} rows"
            );
            let want = model.predict_batched(&x, 5).unwrap();
            let got = exported.predict_batched(&x, 5).unwrap();
            assert_eq!(
                bits(&got),
                bits(&want),
                "{name} on {backend_name}, batches of 5"
            );
        }
    }
}

#[test]
fn the_tutorial_mlp_exported_predicts_the_same_bits_on_every_backend() {
    same_bits_everywhere("mlp", mlp(), &[784]);
}

#[test]
fn a_cnn_exported_predicts_the_same_bits_on_every_backend() {
    same_bits_everywhere("cnn", cnn(), &[10, 10, 1]);
}

#[test]
fn an_export_holds_its_files_and_a_manifest_that_describes_them() {
    let dir = scratch("files").join("mlp");
    mlp().export(&dir).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "manifest.json",
            "model.ir",
            "model.mlir",
            "weights.safetensors"
        ]
    );
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["format"], "strata.export");
    assert_eq!(m["input"]["shape"], serde_json::json!([null, 784]));
    assert_eq!(m["input"]["dtype"], "f32");
    assert_eq!(m["output"]["shape"], serde_json::json!([null, 10]));
    assert_eq!(m["parameters"][0]["name"], "dense/kernel");
    assert_eq!(m["parameters"][0]["shape"], serde_json::json!([784, 128]));
    let ir = std::fs::read_to_string(dir.join("model.ir")).unwrap();
    assert!(ir.contains("f32[N, 784]"), "{ir}");
    let mlir = std::fs::read_to_string(dir.join("model.mlir")).unwrap();
    assert!(mlir.contains("func.func public @main"), "{mlir}");
    assert!(mlir.contains("tensor<32x784xf32>"), "{mlir}");
    // Nothing left beside it.
    let beside: Vec<_> = std::fs::read_dir(dir.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, [std::ffi::OsString::from("mlp")]);
}

#[test]
fn exporting_again_replaces_an_export_but_nothing_else() {
    let root = scratch("replace");
    let dir = root.join("m");
    let mut a = mlp().with_seed(1).unwrap();
    a.export(&dir).unwrap();
    a = mlp().with_seed(2).unwrap();
    a.export(&dir).unwrap();
    let loaded = Exported::load(&dir).unwrap();
    for ((n, t), (m, u)) in loaded.weights().iter().zip(a.weights()) {
        assert_eq!((n, bits(t)), (&m, bits(&u)));
    }
    // A directory of something else, or a file, is left alone.
    let other = root.join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    assert!(matches!(a.export(&other), Err(Error::Export { .. })));
    assert_eq!(
        std::fs::read_to_string(other.join("notes.txt")).unwrap(),
        "mine"
    );
    let file = root.join("file");
    std::fs::write(&file, "mine").unwrap();
    assert!(matches!(a.export(&file), Err(Error::Export { .. })));
    // An empty directory is filled.
    let empty = root.join("empty");
    std::fs::create_dir(&empty).unwrap();
    a.export(&empty).unwrap();
    Exported::load(&empty).unwrap();
}

#[test]
fn an_unbuilt_model_is_not_exported() {
    let m = Model::new(Sequential::new(
        None,
        vec![Box::new(Dense::new("dense", 3, Activation::Linear))],
    ));
    let dir = scratch("unbuilt").join("m");
    assert!(matches!(m.export(&dir), Err(Error::InvalidArgument { .. })));
    assert!(!dir.exists());
}

#[test]
fn predict_checks_its_input() {
    let dir = scratch("input").join("m");
    mlp().export(&dir).unwrap();
    let e = Exported::load(&dir).unwrap();
    assert!(matches!(
        e.predict(inputs(3, &[783], 0)),
        Err(Error::InputShape { .. })
    ));
    assert!(matches!(
        e.predict(ndarray::Array2::<i32>::zeros((2, 784))),
        Err(Error::DType { .. })
    ));
    assert!(e.predict(inputs(0, &[784], 0)).is_err());
    assert!(e.predict_batched(inputs(2, &[784], 0), 0).is_err());
}

/// An export in a fresh directory, for damaging.
fn damaged(test: &str) -> PathBuf {
    let dir = scratch(test).join("m");
    cnn().export(&dir).unwrap();
    dir
}

fn load_error(dir: &Path) -> Error {
    match Exported::load(dir) {
        Ok(_) => panic!(
            "{} loaded; manifest: {}",
            dir.display(),
            std::fs::read_to_string(dir.join("manifest.json")).unwrap_or_default()
        ),
        Err(e) => e,
    }
}

#[test]
fn a_missing_file_is_named() {
    for file in [
        "weights.safetensors",
        "model.ir",
        "model.mlir",
        "manifest.json",
    ] {
        let dir = damaged(&format!("missing-{file}"));
        std::fs::remove_file(dir.join(file)).unwrap();
        match load_error(&dir) {
            Error::Export { path, message } => {
                assert!(path.ends_with(file), "{file}: {path}: {message}")
            }
            e => panic!("{file}: {e}"),
        }
    }
    assert!(matches!(
        load_error(&scratch("nothing").join("absent")),
        Error::Export { .. }
    ));
}

#[test]
fn a_corrupted_manifest_is_a_typed_error() {
    let dir = damaged("manifest");
    let path = dir.join("manifest.json");
    let good = std::fs::read_to_string(&path).unwrap();
    let cases = [
        "not json at all".to_string(),
        good[..good.len() / 2].to_string(),
        good.replace("\"version\": 1", "\"version\": 99"),
        good.replace("strata.export", "something.else"),
        good.replace("\"dtype\": \"f32\"", "\"dtype\": \"f128\""),
        good.replace("null", "-1"),
        good.replace("\"model.ir\"", "\"../model.ir\""),
        "{}".to_string(),
    ];
    let huge = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut m: serde_json::Value = serde_json::from_str(&good).unwrap();
        edit(&mut m);
        m.to_string()
    };
    let cases = cases.into_iter().chain([
        huge(&|m| m["parameters"][0]["shape"][0] = serde_json::json!(300_000_000_000_000_000u64)),
        huge(&|m| m["input"]["shape"][1] = serde_json::json!(u64::MAX)),
        huge(&|m| m["parameters"][0]["dtype"] = serde_json::json!("i32")),
        huge(&|m| m["parameters"] = serde_json::json!([])),
    ]);
    for (i, bad) in cases.enumerate() {
        std::fs::write(&path, &bad).unwrap();
        match load_error(&dir) {
            Error::Export { .. } => {}
            e => panic!("case {i}: {e}"),
        }
    }
}

#[test]
fn weights_of_the_wrong_shape_are_refused() {
    let dir = damaged("weights");
    // Same names, other sizes.
    let other = scratch("weights-other").join("m");
    Model::new(Sequential::new(
        Some(vec![12, 12, 1]),
        vec![
            Box::new(Conv2D::new("conv2d", 4, [3, 3], Activation::Relu)),
            Box::new(BatchNormalization::new("batch_normalization")),
            Box::new(MaxPooling2D::new("max_pooling2d", [2, 2])),
            Box::new(Flatten::new("flatten")),
            Box::new(Dropout::new("dropout", 0.3)),
            Box::new(Dense::new("dense", 5, Activation::Softmax)),
        ],
    ))
    .export(&other)
    .unwrap();
    let weights = dir.join("weights.safetensors");
    std::fs::copy(other.join("weights.safetensors"), &weights).unwrap();
    match load_error(&dir) {
        Error::Export { message, .. } => assert!(message.contains("dense/kernel"), "{message}"),
        e => panic!("{e}"),
    }
    // Cut short, or not safetensors at all.
    let good = std::fs::read(other.join("weights.safetensors")).unwrap();
    for bad in [&good[..good.len() - 7], &good[..5], b"garbage".as_slice()] {
        std::fs::write(&weights, bad).unwrap();
        assert!(matches!(load_error(&dir), Error::Export { .. }));
    }
}

#[test]
fn a_truncated_or_altered_ir_is_refused() {
    let dir = damaged("ir");
    let path = dir.join("model.ir");
    let good = std::fs::read_to_string(&path).unwrap();
    // Cut at a line end: the graph has no closing brace.
    let cut = &good[..good[..good.len() / 2].rfind('\n').unwrap() + 1];
    std::fs::write(&path, cut).unwrap();
    match load_error(&dir) {
        Error::IrText { message, .. } => assert!(message.contains("truncated"), "{message}"),
        e => panic!("{e}"),
    }
    // Cut mid-line.
    std::fs::write(&path, &good[..good.len() / 2]).unwrap();
    assert!(matches!(load_error(&dir), Error::IrText { .. }));
    // Readable, but not the graph the manifest describes.
    std::fs::write(
        &path,
        good.replacen("f32[N, 10, 10, 1]", "f32[N, 10, 10, 2]", 1),
    )
    .unwrap();
    assert!(load_error(&dir).to_string().contains("10, 10"));
    std::fs::write(&path, [0xff, 0xfe, 0x00]).unwrap();
    assert!(matches!(load_error(&dir), Error::Export { .. }));
}

#[test]
fn a_parse_error_says_where() {
    let text =
        "graph g(%0: f32[2]) -> (%1) {\n  %1 = negate(%0) : f32[2]\n  %2 = bogus(%1) : f32[2]\n}\n";
    match Graph::parse(text) {
        Err(Error::IrText {
            line,
            column,
            message,
        }) => {
            assert_eq!((line, column), (3, 8), "{message}");
            assert!(message.contains("bogus"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let text = "graph g(%0: f32[2]) -> (%1) {\n  %1 = reduce(%0) sum axes=[0 : f32[]\n}\n";
    match Graph::parse(text) {
        Err(Error::IrText { line, column, .. }) => assert_eq!((line, column), (2, 30)),
        other => panic!("{other:?}"),
    }
    // A shape rule broken: the verifier's error.
    let text = "graph g(%0: f32[2]) -> (%1) {\n  %1 = negate(%0) : f32[3]\n}\n";
    assert!(matches!(Graph::parse(text), Err(Error::Verify { .. })));
    // The batch size, only where one is given.
    let text = "graph g(%0: f32[N, 2]) -> (%1) {\n  %1 = negate(%0) : f32[N, 2]\n}\n";
    assert!(matches!(Graph::parse(text), Err(Error::IrText { .. })));
    let g = Graph::parse_with_batch(text, 6).unwrap();
    assert_eq!(g.ty(g.outputs()[0]).dims(), [6, 2]);
    for bad in ["", "graph", "}", "graph g() -> () {\n}\n}\n"] {
        assert!(Graph::parse(bad).is_err(), "{bad:?}");
    }
}

fn round_trips(g: &Graph) {
    let text = g.to_string();
    match Graph::parse(&text) {
        Ok(back) => assert!(back == *g, "{} reads back differently:\n{text}", g.name()),
        Err(e) => panic!("{} does not read back: {e}\n{text}", g.name()),
    }
}

#[test]
fn every_op_test_graph_reads_back_from_its_text() {
    for case in common::cases() {
        let mut g = Graph::new(case.name.clone());
        let params: Vec<Value> = case.inputs.iter().map(|t| g.parameter(t.ty())).collect();
        let outs = (case.build)(&mut g, &params).unwrap();
        g.set_outputs(outs).unwrap();
        round_trips(&g);
    }
}

#[test]
fn odd_names_and_constants_read_back() {
    let mut g = Graph::new("a \"quoted\" name\twith é and \u{7}");
    let x = g.parameter(strata_runtime::ir::TensorType::new(DType::F32, [4]));
    let c = g.constant(Tensor::from_vec(&[4], vec![f32::NAN, -0.0, 1e-45, f32::INFINITY]).unwrap());
    let s = g.binary(strata_runtime::ir::BinaryOp::Add, x, c).unwrap();
    let b = g.constant(Tensor::from_vec(&[2], vec![true, false]).unwrap());
    let i = g.constant(Tensor::from_vec(&[2], vec![i64::MIN, i64::MAX]).unwrap());
    g.set_outputs(vec![s, b, i]).unwrap();
    let back = Graph::parse(&g.to_string()).unwrap();
    // NaN is not equal to itself: compare the texts, and the rest.
    assert_eq!(back.to_string(), g.to_string());
    assert_eq!(back.name(), g.name());
}

/// The native backend, checking that every graph it is given reads back from its text.
struct RoundTrip(NativeBackend, std::sync::atomic::AtomicUsize);

impl Backend for RoundTrip {
    fn name(&self) -> String {
        self.0.name()
    }
    fn compile(&self, graph: &Graph, options: &CompileOptions) -> Result<Box<dyn Executable>> {
        round_trips(graph);
        self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.0.compile(graph, options)
    }
    fn upload(&self, t: &Tensor) -> Result<Buffer> {
        self.0.upload(t)
    }
    fn upload_into(&self, t: &Tensor, b: &mut Buffer) -> Result<()> {
        self.0.upload_into(t, b)
    }
    fn download(&self, b: &Buffer) -> Result<Tensor> {
        self.0.download(b)
    }
}

#[test]
fn every_graph_a_model_compiles_reads_back_from_its_text() {
    for (name, mut model, sample) in [("mlp", mlp(), vec![784]), ("cnn", cnn(), vec![10, 10, 1])] {
        let backend = Arc::new(RoundTrip(
            NativeBackend::new(),
            std::sync::atomic::AtomicUsize::new(0),
        ));
        model.set_backend(backend.clone());
        model
            .compile(
                Adam::new(0.01),
                SparseCategoricalCrossentropy::default(),
                [Accuracy],
            )
            .unwrap();
        let x = inputs(20, &sample, 3);
        let y: Array1<i32> = (0..20).map(|i| i % 5).collect();
        model.fit(&x, &y, Fit::epochs(1).verbose(0)).unwrap();
        model.evaluate(&x, &y).unwrap();
        model.predict(&x).unwrap();
        let compiled = backend.1.load(std::sync::atomic::Ordering::Relaxed);
        assert!(compiled >= 3, "{name}: {compiled} graphs");
    }
}

#[test]
fn an_exported_model_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Exported>();
}
