//! `Model::export_onnx`: models covering every layer of the catalogue and every
//! activation, trained a few steps (so batch normalization's moving statistics and every
//! weight are far from their initial values), exported, checked by `onnx.checker` and run
//! by onnxruntime (scripts/onnx-run.py, with the project's Python environment), whose
//! outputs must match `predict` on the native backend and on XLA CPU at two batch sizes:
//! within 1e-5 absolute plus 1e-5 relative (`|onnx - strata| <= 1e-5 + 1e-5 |strata|`,
//! numpy's `allclose` rule), both with onnxruntime's graph optimizations and without.

mod backends;

use backends::xla_cpu;
use serde_json::Value as Json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::Backend;
use strata_runtime::ir::Value;
use strata_runtime::loss::MeanSquaredError;
use strata_runtime::nn::*;
use strata_runtime::optim::Adam;
use strata_runtime::train::Fit;
use strata_runtime::{random, Error, Model, Tensor};

/// The tolerance, absolute and relative.
const TOL: f32 = 1e-5;

/// A fresh, empty directory for one test's files (left there to look at after a failure).
fn work_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("onnx-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The project's Python interpreter; a missing one fails the test with how to install it.
fn python() -> PathBuf {
    let python = root().join(".strata/python/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/install-python-env (it installs onnxruntime and onnx, \
         which this test checks the exported files with)",
        python.display()
    );
    python
}

/// `t` as a `.npy` file (version 1.0: the header padded to a multiple of 64 bytes).
fn write_npy(path: &Path, t: &Tensor) {
    let (descr, data): (&str, Vec<u8>) = match t {
        Tensor::F32(a) => ("<f4", a.iter().flat_map(|v| v.to_le_bytes()).collect()),
        Tensor::I32(a) => ("<i4", a.iter().flat_map(|v| v.to_le_bytes()).collect()),
        other => panic!("no .npy writer for {:?}", other.dtype()),
    };
    let shape: Vec<String> = t.dims().iter().map(|d| format!("{d},")).collect();
    let mut header = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': ({}), }}",
        shape.join(" ")
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend(data);
    std::fs::write(path, bytes).unwrap();
}

/// What onnxruntime makes of `inputs` with the model at `model`: the script's summary,
/// and per input the outputs with graph optimizations and without.
fn run_onnx(model: &Path, inputs: &[Tensor]) -> (Json, Vec<[Tensor; 2]>) {
    let dir = model.parent().unwrap();
    let paths: Vec<PathBuf> = (0..inputs.len())
        .map(|i| dir.join(format!("x{i}.npy")))
        .collect();
    for (p, x) in paths.iter().zip(inputs) {
        write_npy(p, x);
    }
    let out = Command::new(python())
        .arg(root().join("scripts/onnx-run.py"))
        .arg(model)
        .args(&paths)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "onnx-run.py failed on {}: {}",
        model.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let outputs = (0..inputs.len())
        .map(|i| {
            ["opt", "plain"]
                .map(|s| strata_runtime::data::read_npy(dir.join(format!("x{i}.{s}.npy"))).unwrap())
        })
        .collect();
    (serde_json::from_slice(&out.stdout).unwrap(), outputs)
}

/// `|got - want| <= TOL + TOL |want|` everywhere, same shapes.
fn assert_close(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.dims(), want.dims(), "{what}: shapes");
    let (g, w) = (got.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap());
    let worst = g
        .iter()
        .zip(&w)
        .enumerate()
        .map(|(i, (a, b))| (i, (a - b).abs() - TOL * b.abs()))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((0, 0.0));
    assert!(
        worst.1 <= TOL && g.iter().all(|v| v.is_finite()),
        "{what}: element {} is {} in ONNX, {} in Strata",
        worst.0,
        g[worst.0],
        w[worst.0]
    );
}

/// A model of `layers` on inputs of `input` (f32 normal samples), trained two epochs
/// towards random targets so no weight is at its initial value.
fn trained(input: &[usize], layers: Vec<Box<dyn Layer>>, x: Tensor) -> Model<Sequential> {
    let mut m = Model::new(Sequential::new(Some(input.to_vec()), layers));
    let out = m.output_shape().unwrap().to_vec();
    let n = x.dims()[0];
    let y = random::normal(&[&[n][..], &out].concat(), 0.0, 1.0, 7).unwrap();
    m.compile(Adam::new(0.01), MeanSquaredError, ()).unwrap();
    m.fit(&x, &y, Fit::epochs(2).batch_size(16).verbose(0))
        .unwrap();
    m
}

fn normal(dims: &[usize], seed: u64) -> Tensor {
    Tensor::F32(random::normal(dims, 0.0, 1.0, seed).unwrap())
}

/// Exports `m`, checks the file's declarations, and compares onnxruntime's outputs with
/// `predict` on both backends for `inputs` (two batch sizes, one file). Returns the
/// operator types the graph uses.
fn check<A: Architecture>(name: &str, m: &mut Model<A>, inputs: &[Tensor]) -> Vec<String> {
    let dir = work_dir(name);
    let path = dir.join(format!("{name}.onnx"));
    m.export_onnx(&path).unwrap();
    let (summary, outputs) = run_onnx(&path, inputs);

    assert_eq!(summary["ir_version"], 8, "{name}");
    assert_eq!(summary["opsets"][""], ONNX_OPSET, "{name}");
    let dims = |v: &Json| v["dims"].as_array().unwrap().clone();
    let declared = |shape: &[usize]| {
        std::iter::once(Json::from("batch"))
            .chain(shape.iter().map(|&d| Json::from(d)))
            .collect::<Vec<_>>()
    };
    let input = &summary["inputs"][0];
    assert_eq!(input["name"], "input");
    assert_eq!(dims(input), declared(m.input_shape().unwrap()), "{name}");
    let output = &summary["outputs"][0];
    assert_eq!(output["name"], "output");
    assert_eq!(output["elem_type"], "FLOAT");
    assert_eq!(dims(output), declared(m.output_shape().unwrap()), "{name}");
    let initializers: Vec<&str> = summary["initializers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for (w, _) in m.weights() {
        assert!(initializers.contains(&w.as_str()), "{name}: weight {w}");
    }

    let native: Arc<dyn Backend> = Arc::new(NativeBackend::new());
    for (backend, b) in [("native", native), ("xla-cpu", xla_cpu())] {
        m.set_backend(b);
        for (x, [opt, plain]) in inputs.iter().zip(&outputs) {
            let want = m.predict(x).unwrap();
            let what = format!("{name} on {backend}, batch {}", x.dims()[0]);
            assert_close(&format!("{what}, optimized"), opt, &want);
            assert_close(&format!("{what}, unoptimized"), plain, &want);
        }
    }
    summary["op_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_tutorial_mlp_matches_predict() {
    let x = normal(&[64, 784], 1);
    let mut m = trained(
        &[784],
        vec![
            Box::new(Dense::new("dense", 128, Activation::Relu)),
            Box::new(Dense::new("dense_1", 64, Activation::Relu)),
            Box::new(Dense::new("dense_2", 10, Activation::Softmax)),
        ],
        x,
    );
    let ops = check(
        "mlp",
        &mut m,
        &[normal(&[5, 784], 2), normal(&[40, 784], 3)],
    );
    assert_eq!(
        ops,
        ["MatMul", "Add", "Relu", "Softmax"]
            .map(String::from)
            .sorted()
    );
}

trait Sorted {
    fn sorted(self) -> Vec<String>;
}

impl<const N: usize> Sorted for [String; N] {
    fn sorted(self) -> Vec<String> {
        let mut v = self.to_vec();
        v.sort();
        v
    }
}

#[test]
fn every_activation_matches_predict() {
    // Each activation in a Dense layer and as an Activation layer, a Dropout between.
    let mut layers: Vec<Box<dyn Layer>> = Vec::new();
    for (i, a) in Activation::ALL.into_iter().enumerate() {
        layers.push(Box::new(Dense::new(format!("dense_{i}"), 12, a)));
        layers.push(Box::new(ActivationLayer::new(format!("activation_{i}"), a)));
    }
    layers.push(Box::new(Dropout::new("dropout", 0.4)));
    layers.push(Box::new(Dense::new("out", 6, Activation::Linear)));
    // Wide inputs, so the activations see large negative and positive values.
    let x = Tensor::F32(random::normal(&[64, 10], 0.0, 4.0, 4).unwrap());
    let mut m = trained(&[10], layers, x);
    let inputs = [
        Tensor::F32(random::normal(&[3, 10], 0.0, 4.0, 5).unwrap()),
        Tensor::F32(random::normal(&[33, 10], 0.0, 4.0, 6).unwrap()),
    ];
    let ops = check("activations", &mut m, &inputs);
    for op in [
        "Relu",
        "Sigmoid",
        "Tanh",
        "Softmax",
        "Erf",
        "Elu",
        "Selu",
        "LeakyRelu",
    ] {
        assert!(ops.iter().any(|o| o == op), "{op} not in {ops:?}");
    }
}

fn conv(name: &str, filters: usize, k: [usize; 2], a: Activation) -> Conv2D {
    Conv2D::new(name, filters, k, a)
}

#[test]
fn a_cnn_with_same_and_valid_padding_strides_pools_and_batch_norm_matches_predict() {
    let same_strided = Conv2D {
        strides: [2, 1],
        padding: Padding::Same,
        ..conv("conv_same", 8, [3, 2], Activation::Relu)
    };
    let valid_dilated_grouped = Conv2D {
        dilation_rate: [2, 1],
        groups: 2,
        use_bias: false,
        ..conv("conv_grouped", 6, [2, 3], Activation::Gelu)
    };
    let max_same = MaxPooling2D {
        strides: Some([1, 2]),
        padding: Padding::Same,
        ..MaxPooling2D::new("max_same", [3, 2])
    };
    let avg_same = AveragePooling2D {
        strides: Some([2, 1]),
        padding: Padding::Same,
        ..AveragePooling2D::new("avg_same", [3, 3])
    };
    let bn = BatchNormalization {
        momentum: 0.5,
        ..BatchNormalization::new("bn")
    };
    let layers: Vec<Box<dyn Layer>> = vec![
        Box::new(same_strided),
        Box::new(bn),
        Box::new(max_same),
        Box::new(valid_dilated_grouped),
        Box::new(avg_same),
        Box::new(conv("conv_valid", 4, [2, 2], Activation::Tanh)),
        Box::new(AveragePooling2D::new("avg_valid", [2, 2])),
        Box::new(Flatten::new("flatten")),
        Box::new(Dense::new("dense", 5, Activation::Softmax)),
    ];
    let mut m = trained(&[17, 15, 3], layers, normal(&[48, 17, 15, 3], 8));
    // The moving statistics moved from their initial zeros and ones.
    let weights = m.weights();
    let stat = |n: &str| {
        weights
            .iter()
            .find(|(w, _)| w == n)
            .unwrap()
            .1
            .to_vec::<f32>()
            .unwrap()
    };
    assert!(stat("bn/moving_mean").iter().any(|v| v.abs() > 1e-2));
    assert!(stat("bn/moving_variance")
        .iter()
        .any(|v| (v - 1.0).abs() > 1e-2));
    let ops = check(
        "cnn",
        &mut m,
        &[normal(&[2, 17, 15, 3], 9), normal(&[35, 17, 15, 3], 10)],
    );
    for op in ["Conv", "MaxPool", "AveragePool", "Flatten", "Transpose"] {
        assert!(ops.iter().any(|o| o == op), "{op} not in {ops:?}");
    }
}

#[test]
fn global_pools_max_pool_valid_and_batch_norm_on_another_axis_match_predict() {
    let bn_axis1 = BatchNormalization {
        axis: 1,
        momentum: 0.6,
        center: false,
        ..BatchNormalization::new("bn_rows")
    };
    let bn_unscaled = BatchNormalization {
        momentum: 0.6,
        scale: false,
        ..BatchNormalization::new("bn_channels")
    };
    let gap = GlobalAveragePooling2D {
        keepdims: true,
        ..GlobalAveragePooling2D::new("gap")
    };
    let layers: Vec<Box<dyn Layer>> = vec![
        Box::new(bn_axis1),
        Box::new(conv("conv", 6, [3, 3], Activation::Swish)),
        Box::new(bn_unscaled),
        Box::new(MaxPooling2D::new("max_valid", [2, 2])),
        Box::new(gap),
        Box::new(Reshape::new("reshape", vec![-1])),
        Box::new(Dense::new("dense", 4, Activation::Sigmoid)),
    ];
    let mut m = trained(&[9, 11, 2], layers, normal(&[40, 9, 11, 2], 11));
    let ops = check(
        "global_avg",
        &mut m,
        &[normal(&[1, 9, 11, 2], 12), normal(&[19, 9, 11, 2], 13)],
    );
    assert!(ops.iter().any(|o| o == "ReduceMean"), "{ops:?}");

    let layers: Vec<Box<dyn Layer>> = vec![
        Box::new(conv("conv", 5, [2, 2], Activation::Elu)),
        Box::new(GlobalMaxPooling2D::new("gmp")),
        Box::new(Dense::new("dense", 3, Activation::Linear)),
    ];
    let mut m = trained(&[6, 7, 3], layers, normal(&[40, 6, 7, 3], 14));
    let ops = check(
        "global_max",
        &mut m,
        &[normal(&[4, 6, 7, 3], 15), normal(&[33, 6, 7, 3], 16)],
    );
    assert!(ops.iter().any(|o| o == "ReduceMax"), "{ops:?}");
}

#[test]
fn embeddings_layer_norm_and_reshape_match_predict() {
    let ln_rows = LayerNormalization {
        axis: 1,
        epsilon: 1e-5,
        ..LayerNormalization::new("ln_rows")
    };
    let ln_plain = LayerNormalization {
        center: false,
        scale: false,
        ..LayerNormalization::new("ln_plain")
    };
    let layers: Vec<Box<dyn Layer>> = vec![
        Box::new(Embedding::new("embedding", 20, 8)),
        Box::new(LayerNormalization::new("ln")),
        Box::new(Reshape::new("reshape", vec![12, -1])),
        Box::new(ln_rows),
        Box::new(Dense::new("dense", 6, Activation::Softplus)),
        Box::new(ln_plain),
        Box::new(Flatten::new("flatten")),
        Box::new(Dense::new("out", 3, Activation::Selu)),
    ];
    let ids = |n: usize, seed: u64| Tensor::I32(random::uniform_int(&[n, 6], 0, 20, seed).unwrap());
    let mut m = trained(&[6], layers, ids(64, 17));
    let ops = check("embedding", &mut m, &[ids(3, 18), ids(37, 19)]);
    assert!(ops.iter().any(|o| o == "Gather"), "{ops:?}");
    // The input is int32 ids, as predict takes them.
    let dir = work_dir("embedding-summary");
    m.export_onnx(dir.join("m.onnx")).unwrap();
    let (summary, _) = run_onnx(&dir.join("m.onnx"), &[ids(2, 20)]);
    assert_eq!(summary["inputs"][0]["elem_type"], "INT32");
}

// Issue 14: shape and activation layers.
#[test]
fn shape_and_activation_layers_match_predict() {
    let rescaling = Rescaling {
        offset: -1.0,
        ..Rescaling::new("rescaling", 0.5)
    };
    let padding = ZeroPadding2D {
        padding: [[1, 0], [2, 1]],
        ..ZeroPadding2D::new("pad")
    };
    let cropping = Cropping2D {
        cropping: [[1, 1], [2, 2]],
        ..Cropping2D::new("crop")
    };
    let upsampling = UpSampling2D {
        size: [2, 1],
        ..UpSampling2D::new("up")
    };
    let bilinear = UpSampling2D {
        size: [1, 2],
        interpolation: Interpolation::Bilinear,
        ..UpSampling2D::new("bilinear")
    };
    let prelu = PReLU {
        shared_axes: Some(vec![1, 2]),
        ..PReLU::new("prelu")
    };
    let relu = ReLU {
        max_value: Some(6.0),
        negative_slope: 0.1,
        threshold: 0.2,
        ..ReLU::new("relu")
    };
    let softmax_rows = Softmax {
        axis: 1,
        ..Softmax::new("softmax_rows")
    };
    let layers: Vec<Box<dyn Layer>> = vec![
        Box::new(rescaling),
        Box::new(padding),
        Box::new(cropping),
        Box::new(upsampling),
        Box::new(bilinear),
        Box::new(prelu),
        Box::new(LeakyReLU::new("leaky")),
        Box::new(relu),
        Box::new(conv("conv", 2, [1, 1], Activation::Linear)),
        Box::new(Reshape::new("reshape", vec![36, 2])),
        Box::new(Permute::new("permute", vec![2, 1])),
        Box::new(softmax_rows),
        Box::new(Flatten::new("flatten")),
        Box::new(Dense::new("dense", 4, Activation::Linear)),
        Box::new(RepeatVector::new("repeat", 3)),
        Box::new(Softmax::new("softmax")),
    ];
    let mut m = trained(&[4, 4, 3], layers, normal(&[40, 4, 4, 3], 21));
    let ops = check(
        "shape_layers",
        &mut m,
        &[normal(&[3, 4, 4, 3], 22), normal(&[17, 4, 4, 3], 23)],
    );
    for op in [
        "Pad",
        "Slice",
        "Expand",
        "MatMul",
        "PRelu",
        "LeakyRelu",
        "Softmax",
    ] {
        assert!(ops.iter().any(|o| o == op), "{op}: {ops:?}");
    }
}

// Issue 14: products and attention, in a graph.
#[test]
fn dot_attention_and_multi_head_attention_match_predict() {
    use Port::Input as I;
    let c = Port::call;
    let call = |layer: usize, inputs: Vec<Port>| strata_runtime::nn::Call { layer, inputs };
    let layers: Vec<Box<dyn Layer>> = vec![
        // 0: causal self-attention over x (4 steps, 6 features), with dropout in training.
        Box::new(MultiHeadAttention {
            use_causal_mask: true,
            dropout: 0.2,
            ..MultiHeadAttention::new("mha", 2, 3)
        }),
        // 1: a value of other features.
        Box::new(Dense::new("dense_v", 5, Activation::Tanh)),
        // 2: query, value and key of three sizes, value_dim and output_shape, no bias.
        Box::new(MultiHeadAttention {
            value_dim: Some(4),
            output_shape: Some(7),
            use_bias: false,
            ..MultiHeadAttention::new("mha_wide", 3, 2)
        }),
        // 3: Luong attention with a key, scaled and causal.
        Box::new(Attention {
            use_scale: true,
            use_causal_mask: true,
            ..Attention::new("attention")
        }),
        // 4: the concat score.
        Box::new(Attention {
            use_scale: true,
            score_mode: ScoreMode::Concat,
            dropout: 0.1,
            ..Attention::new("attention_concat")
        }),
        // 5: along the steps, normalized: (7, 5).
        Box::new(Dot {
            axes: [1, 1],
            normalize: true,
            ..Dot::new("dot_steps", 1)
        }),
        // 6: along the last axes: (4, 4).
        Box::new(Dot::new("dot_last", -1)),
        // 7: rows of one axis: one number per example, (1,).
        Box::new(Dot::new("dot_rows", 1)),
        Box::new(Flatten::new("flatten")),
        Box::new(Flatten::new("flatten_1")),
        Box::new(Concatenate::new("concatenate")),
        Box::new(Dense::new("dense", 3, Activation::Linear)),
        // 12..: the merges, between attention outputs of one shape.
        Box::new(Add::new("add")),
        Box::new(Subtract::new("subtract")),
        Box::new(Multiply::new("multiply")),
        Box::new(Average::new("average")),
        Box::new(Maximum::new("maximum")),
        Box::new(Minimum::new("minimum")),
    ];
    let topology = Topology {
        calls: vec![
            call(0, vec![I(0), I(0)]),           // 0: (4, 6)
            call(1, vec![I(0)]),                 // 1: (4, 5)
            call(2, vec![c(0), c(1), I(0)]),     // 2: (4, 7)
            call(3, vec![c(0), c(1), c(0)]),     // 3: (4, 5)
            call(4, vec![c(3), c(3)]),           // 4: (4, 5)
            call(12, vec![c(3), c(4), c(1)]),    // 5: add
            call(13, vec![c(5), c(4)]),          // 6: subtract
            call(14, vec![c(6), c(3)]),          // 7: multiply
            call(15, vec![c(7), c(1)]),          // 8: average
            call(16, vec![c(8), c(4)]),          // 9: maximum
            call(17, vec![c(9), c(3)]),          // 10: minimum, (4, 5)
            call(5, vec![c(2), c(10)]),          // 11: (7, 5)
            call(6, vec![c(10), c(1)]),          // 12: (4, 4)
            call(8, vec![c(11)]),                // 13: (35,)
            call(9, vec![c(12)]),                // 14: (16,)
            call(7, vec![c(14), c(14)]),         // 15: (1,)
            call(10, vec![c(13), c(14), c(15)]), // 16: (52,)
            call(11, vec![c(16)]),               // 17: (3,)
        ],
        outputs: vec![c(17)],
    };
    let mut m = Model::new(Functional::new(Some(vec![4, 6]), layers, topology));
    let x = normal(&[40, 4, 6], 41);
    let y = random::normal(&[40, 3], 0.0, 1.0, 42).unwrap();
    m.compile(Adam::new(0.01), MeanSquaredError, ()).unwrap();
    m.fit(&x, &y, Fit::epochs(2).batch_size(16).verbose(0))
        .unwrap();
    let ops = check(
        "attention",
        &mut m,
        &[normal(&[2, 4, 6], 43), normal(&[9, 4, 6], 44)],
    );
    for op in [
        "MatMul",
        "Softmax",
        "Tanh",
        "ReduceSum",
        "ReduceSumSquare",
        "Sum",
        "Sub",
        "Mul",
        "Mean",
        "Max",
        "Min",
        "Concat",
    ] {
        assert!(ops.iter().any(|o| o == op), "{op}: {ops:?}");
    }
}

/// Every catalogue layer the tests above export (each in a model checked against
/// onnxruntime).
const EXPORTED: &[&str] = &[
    "Activation",
    "Add",
    "Attention",
    "Average",
    "AveragePooling1D",
    "AveragePooling2D",
    "BatchNormalization",
    "Concatenate",
    "Conv1D",
    "Conv2D",
    "Conv2DTranspose",
    "Cropping2D",
    "Dense",
    "DepthwiseConv2D",
    "Dot",
    "Dropout",
    "Embedding",
    "Flatten",
    "GlobalAveragePooling1D",
    "GlobalAveragePooling2D",
    "GlobalMaxPooling1D",
    "GlobalMaxPooling2D",
    "GroupNormalization",
    "LayerNormalization",
    "LeakyReLU",
    "MaxPooling1D",
    "MaxPooling2D",
    "Maximum",
    "Minimum",
    "MultiHeadAttention",
    "Multiply",
    "PReLU",
    "Permute",
    "ReLU",
    "RepeatVector",
    "Rescaling",
    "Reshape",
    "SeparableConv2D",
    "Softmax",
    "Subtract",
    "UpSampling2D",
    "ZeroPadding2D",
];

#[test]
fn sequence_layers_match_predict() {
    let same = Conv1D {
        padding: Padding::Same,
        strides: 2,
        ..Conv1D::new("conv_same", 4, 3, Activation::Relu)
    };
    let causal = Conv1D {
        padding: Padding::Causal,
        dilation_rate: 2,
        groups: 2,
        ..Conv1D::new("conv_causal", 6, 3, Activation::Tanh)
    };
    let max_same = MaxPooling1D {
        padding: Padding::Same,
        ..MaxPooling1D::new("max_same", 2)
    };
    let avg_same = AveragePooling1D {
        padding: Padding::Same,
        strides: Some(1),
        ..AveragePooling1D::new("avg_same", 3)
    };
    let gap = GlobalAveragePooling1D {
        keepdims: true,
        ..GlobalAveragePooling1D::new("gap")
    };
    let layers: Vec<Box<dyn Layer>> = vec![
        Box::new(same),
        Box::new(causal),
        Box::new(max_same),
        Box::new(avg_same),
        Box::new(gap),
        Box::new(Flatten::new("flatten")),
        Box::new(Dense::new("dense", 3, Activation::Linear)),
    ];
    let mut m = trained(&[13, 3], layers, normal(&[40, 13, 3], 21));
    let ops = check(
        "sequence",
        &mut m,
        &[normal(&[1, 13, 3], 22), normal(&[17, 13, 3], 23)],
    );
    for op in ["Conv", "MaxPool", "AveragePool", "ReduceMean"] {
        assert!(ops.iter().any(|o| o == op), "{op} not in {ops:?}");
    }

    let layers: Vec<Box<dyn Layer>> = vec![
        Box::new(Conv1D::new("conv", 5, 2, Activation::Elu)),
        Box::new(MaxPooling1D::new("max_valid", 2)),
        Box::new(GlobalMaxPooling1D::new("gmp")),
        Box::new(Dense::new("dense", 2, Activation::Linear)),
    ];
    let mut m = trained(&[9, 2], layers, normal(&[40, 9, 2], 24));
    let ops = check(
        "sequence_max",
        &mut m,
        &[normal(&[3, 9, 2], 25), normal(&[20, 9, 2], 26)],
    );
    assert!(ops.iter().any(|o| o == "ReduceMax"), "{ops:?}");
}

#[test]
fn depthwise_separable_transposed_and_group_norm_match_predict() {
    let depthwise = DepthwiseConv2D {
        padding: Padding::Same,
        strides: [2, 1],
        depth_multiplier: 2,
        ..DepthwiseConv2D::new("depthwise", [3, 2], Activation::Relu)
    };
    let separable = SeparableConv2D {
        depth_multiplier: 2,
        dilation_rate: [1, 2],
        ..SeparableConv2D::new("separable", 6, [2, 2], Activation::Tanh)
    };
    let group_norm = GroupNormalization {
        groups: 3,
        ..GroupNormalization::new("group_norm")
    };
    let up_same = Conv2DTranspose {
        strides: [2, 3],
        padding: Padding::Same,
        output_padding: Some([1, 0]),
        ..Conv2DTranspose::new("up_same", 3, [4, 3], Activation::Linear)
    };
    let up_valid = Conv2DTranspose {
        strides: [3, 1],
        use_bias: false,
        ..Conv2DTranspose::new("up_valid", 2, [2, 2], Activation::Gelu)
    };
    let layers: Vec<Box<dyn Layer>> = vec![
        Box::new(depthwise),
        Box::new(separable),
        Box::new(group_norm),
        Box::new(up_same),
        Box::new(up_valid),
        Box::new(Flatten::new("flatten")),
        Box::new(Dense::new("dense", 3, Activation::Linear)),
    ];
    let mut m = trained(&[9, 7, 2], layers, normal(&[40, 9, 7, 2], 31));
    let ops = check(
        "depthwise_transposed",
        &mut m,
        &[normal(&[1, 9, 7, 2], 32), normal(&[18, 9, 7, 2], 33)],
    );
    for op in ["Conv", "ConvTranspose", "Reshape", "ReduceMean"] {
        assert!(ops.iter().any(|o| o == op), "{op} not in {ops:?}");
    }

    // Group normalisation on another axis, unscaled.
    let group_rows = GroupNormalization {
        groups: 2,
        axis: 1,
        scale: false,
        ..GroupNormalization::new("group_rows")
    };
    let layers: Vec<Box<dyn Layer>> = vec![
        Box::new(group_rows),
        Box::new(Dense::new("dense", 2, Activation::Linear)),
    ];
    let mut m = trained(&[4, 3], layers, normal(&[40, 4, 3], 34));
    check(
        "group_rows",
        &mut m,
        &[normal(&[2, 4, 3], 35), normal(&[9, 4, 3], 36)],
    );
}

/// Catalogue layers with no ONNX mapping yet: exporting one is a typed error naming it
/// (the test below).
const NOT_EXPORTED_YET: &[&str] = &[
    "GRU",
    "LSTM",
    "SimpleRNN",
    "Bidirectional",
    "TimeDistributed",
];

#[test]
fn every_layer_of_the_catalogue_is_exported_by_a_test() {
    let mut catalogue: Vec<&str> = strata_runtime::spec::LAYERS
        .iter()
        .filter(|d| !d.runtime.is_empty() && !NOT_EXPORTED_YET.contains(&d.class))
        .map(|d| d.class)
        .collect();
    catalogue.sort();
    assert_eq!(
        catalogue, EXPORTED,
        "a new layer needs Layer::onnx (beside its forward) and a model in these tests"
    );
}

#[test]
fn recurrent_layers_are_not_exportable_yet_a_typed_error_naming_each() {
    let layers: Vec<Box<dyn Layer>> = vec![
        Box::new(SimpleRNN::new("simple_rnn", 2)),
        Box::new(LSTM::new("lstm", 2)),
        Box::new(GRU::new("gru", 2)),
        Box::new(Bidirectional::new("bidirectional", LSTM::new("lstm", 2))),
        Box::new(TimeDistributed::new(
            "time_distributed",
            Dense::new("dense", 2, Activation::Linear),
        )),
    ];
    assert_eq!(layers.len(), NOT_EXPORTED_YET.len());
    for layer in layers {
        let class = layer.class();
        assert!(NOT_EXPORTED_YET.contains(&class), "{class}");
        let name = format!("{} ({class})", layer.name());
        let m = Model::new(Sequential::new(Some(vec![3, 4]), vec![layer]));
        let dir = work_dir(&format!("recurrent_{class}"));
        let path = dir.join("m.onnx");
        match m.export_onnx(&path).unwrap_err() {
            Error::OnnxUnsupported { layer, message, .. } => {
                assert_eq!(layer, name);
                assert!(message.contains("not exportable to ONNX yet"), "{message}");
            }
            other => panic!("expected OnnxUnsupported, got {other:?}"),
        }
        assert!(!path.exists());
    }
}

#[test]
fn a_call_with_states_is_a_typed_error() {
    // Read through its state: the export refuses the call of several outputs itself.
    let layers: Vec<Box<dyn Layer>> = vec![
        Box::new(LSTM {
            return_state: true,
            ..LSTM::new("lstm", 2)
        }),
        Box::new(Dense::new("dense", 1, Activation::Linear)),
    ];
    let topology = Topology {
        calls: vec![
            Call {
                layer: 0,
                inputs: vec![Port::Input(0)],
            },
            Call {
                layer: 1,
                inputs: vec![Port::Call { call: 0, output: 2 }],
            },
        ],
        outputs: vec![Port::call(1)],
    };
    let m = Model::new(Functional::new(Some(vec![3, 4]), layers, topology));
    let dir = work_dir("return_state");
    let path = dir.join("m.onnx");
    match m.export_onnx(&path).unwrap_err() {
        Error::OnnxUnsupported { layer, message, .. } => {
            assert_eq!(layer, "lstm (LSTM)");
            assert!(message.contains("several outputs"), "{message}");
        }
        other => panic!("expected OnnxUnsupported, got {other:?}"),
    }
    assert!(!path.exists());
}

/// A layer outside the catalogue, with a forward pass but no ONNX mapping.
#[derive(Debug)]
struct Doubler;

impl Layer for Doubler {
    fn class(&self) -> &'static str {
        "Doubler"
    }
    fn name(&self) -> &str {
        "my_doubler"
    }
    fn output_shape(&self, input: &[usize]) -> strata_runtime::Result<Vec<usize>> {
        Ok(input.to_vec())
    }
    fn params(&self, _: &[usize]) -> strata_runtime::Result<Vec<ParamSpec>> {
        Ok(vec![])
    }
    fn forward(
        &self,
        cx: &mut Forward<'_>,
        x: Value,
        _: &[Value],
    ) -> strata_runtime::Result<Value> {
        cx.g.add(x, x)
    }
}

#[test]
fn a_layer_without_a_mapping_is_a_typed_error_naming_it_and_writes_nothing() {
    let m = Model::new(Sequential::new(
        Some(vec![4]),
        vec![
            Box::new(Dense::new("dense", 3, Activation::Relu)),
            Box::new(Doubler),
        ],
    ));
    let dir = work_dir("unsupported");
    let path = dir.join("m.onnx");
    let e = m.export_onnx(&path).unwrap_err();
    match &e {
        Error::OnnxUnsupported { layer, .. } => assert_eq!(layer, "my_doubler (Doubler)"),
        other => panic!("expected OnnxUnsupported, got {other:?}"),
    }
    assert!(e.to_string().contains("my_doubler (Doubler)"), "{e}");
    assert!(!path.exists());
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "no temporary file left"
    );
}

/// The same layer with a mapping of its own: a layer outside the catalogue exports by
/// implementing `Layer::onnx`.
#[derive(Debug)]
struct MappedDoubler;

impl Layer for MappedDoubler {
    fn class(&self) -> &'static str {
        "MappedDoubler"
    }
    fn name(&self) -> &str {
        "doubler"
    }
    fn output_shape(&self, input: &[usize]) -> strata_runtime::Result<Vec<usize>> {
        Ok(input.to_vec())
    }
    fn params(&self, _: &[usize]) -> strata_runtime::Result<Vec<ParamSpec>> {
        Ok(vec![])
    }
    fn forward(
        &self,
        cx: &mut Forward<'_>,
        x: Value,
        _: &[Value],
    ) -> strata_runtime::Result<Value> {
        cx.g.add(x, x)
    }
    fn onnx(
        &self,
        cx: &mut OnnxForward<'_>,
        x: OnnxValue,
        _: &[OnnxValue],
    ) -> strata_runtime::Result<OnnxValue> {
        Ok(cx.op("Add", &[&x, &x], vec![]))
    }
}

#[test]
fn a_custom_layer_with_a_mapping_exports() {
    let mut m = Model::new(Sequential::new(
        Some(vec![4]),
        vec![
            Box::new(Dense::new("dense", 3, Activation::Relu)),
            Box::new(MappedDoubler),
        ],
    ));
    check(
        "custom",
        &mut m,
        &[normal(&[2, 4], 21), normal(&[9, 4], 22)],
    );
}

#[test]
fn an_identity_model_exports_with_an_output_node() {
    let mut m = Model::new(Sequential::new(
        Some(vec![3, 2]),
        vec![Box::new(ActivationLayer::new("linear", Activation::Linear))],
    ));
    check(
        "identity",
        &mut m,
        &[normal(&[1, 3, 2], 23), normal(&[6, 3, 2], 24)],
    );
}

#[test]
fn an_unbuilt_model_is_an_error() {
    let m = Model::new(Sequential::new(
        None,
        vec![Box::new(Dense::new("dense", 3, Activation::Relu))],
    ));
    let dir = work_dir("unbuilt");
    let e = m.export_onnx(dir.join("m.onnx")).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
    assert!(e.to_string().contains("not built"), "{e}");
}

#[test]
fn generated_code_matches_the_proto() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/export/onnx");
    let fds = protox::compile(["onnx.proto"], [&dir]).unwrap();
    let out = work_dir("protogen");
    prost_build::Config::new()
        .out_dir(&out)
        .compile_fds(fds)
        .unwrap();
    let fresh = std::fs::read_to_string(out.join("onnx.rs")).unwrap();
    let checked_in = dir.join("generated.rs");
    if std::env::var_os("STRATA_REGENERATE_PROTO").is_some() {
        std::fs::write(&checked_in, &fresh).unwrap();
    }
    assert!(
        std::fs::read_to_string(&checked_in).unwrap_or_default() == fresh,
        "{} is not prost-build's output for onnx.proto: rerun this test with \
         STRATA_REGENERATE_PROTO=1",
        checked_in.display()
    );
}
