//! Weights in and out: `set_weights_list` (by position, Keras' list form) and
//! `load_safetensors` (a file another framework wrote, through a name map). Each error is
//! typed, says what was expected and what came, and leaves the model as it was.
//!
//! No Python library that writes safetensors is in the test environment (and no PyTorch),
//! so the "foreign" files are written here byte by byte, as the format's specification
//! and PyTorch's `safetensors.torch.save_file` lay them out: an 8-byte little-endian
//! header length, a JSON header (`dtype`, `shape`, `data_offsets` per tensor, a
//! `__metadata__` of `{"format": "pt"}`), then the little-endian data.

use ndarray::{ArrayD, IxDyn};
use std::collections::HashMap;
use std::path::PathBuf;
use strata_runtime::checkpoint::{Layout, Mapping};
use strata_runtime::ir::{DType, TensorType};
use strata_runtime::loss::SparseCategoricalCrossentropy;
use strata_runtime::metrics::Accuracy;
use strata_runtime::nn::{Activation, Conv2D, Dense, Sequential};
use strata_runtime::optim::SGD;
use strata_runtime::train::Fit;
use strata_runtime::{random, Error, Model, Tensor};

/// The tutorial's model: 784 → Dense(128, relu) → Dense(10, softmax).
fn tutorial(seed: u64) -> Model<Sequential> {
    Model::new(Sequential::new(
        Some(vec![784]),
        vec![
            Box::new(Dense::new("dense", 128, Activation::Relu)),
            Box::new(Dense::new("dense_1", 10, Activation::Softmax)),
        ],
    ))
    .with_seed(seed)
    .unwrap()
}

fn small(seed: u64) -> Model<Sequential> {
    Model::new(Sequential::new(
        Some(vec![6]),
        vec![
            Box::new(Dense::new("dense", 5, Activation::Relu)),
            Box::new(Dense::new("dense_1", 3, Activation::Softmax)),
        ],
    ))
    .with_seed(seed)
    .unwrap()
}

fn values(m: &Model<Sequential>) -> Vec<Tensor> {
    m.weights().into_iter().map(|(_, t)| t).collect()
}

fn normal(dims: &[usize], seed: u64) -> ArrayD<f32> {
    random::normal(dims, 0.0, 0.5, seed).unwrap()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("strata-weight-maps-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// One tensor of a hand-written safetensors file.
struct Raw {
    name: &'static str,
    dtype: &'static str,
    shape: Vec<usize>,
    data: Vec<u8>,
}

fn raw_f32(name: &'static str, a: &ArrayD<f32>) -> Raw {
    Raw {
        name,
        dtype: "F32",
        shape: a.shape().to_vec(),
        data: a
            .as_standard_layout()
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    }
}

/// The bytes of a safetensors file holding `tensors`, in order, as PyTorch writes one.
fn safetensors_bytes(tensors: &[Raw]) -> Vec<u8> {
    let mut entries = vec![r#""__metadata__":{"format":"pt"}"#.to_string()];
    let mut offset = 0;
    for t in tensors {
        entries.push(format!(
            r#""{}":{{"dtype":"{}","shape":{:?},"data_offsets":[{},{}]}}"#,
            t.name,
            t.dtype,
            t.shape,
            offset,
            offset + t.data.len()
        ));
        offset += t.data.len();
    }
    header_and_data(
        &format!("{{{}}}", entries.join(",")),
        &tensors
            .iter()
            .flat_map(|t| t.data.clone())
            .collect::<Vec<_>>(),
    )
}

fn header_and_data(header: &str, data: &[u8]) -> Vec<u8> {
    let mut header = header.as_bytes().to_vec();
    // The format pads the header with spaces to a multiple of 8 bytes.
    while !header.len().is_multiple_of(8) {
        header.push(b' ');
    }
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header);
    out.extend(data);
    out
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let p = tmp(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A PyTorch `nn.Sequential(Linear(784, 128), ReLU(), Linear(128, 10))` state dict, as
/// `[out, in]` weights, and the same values in our `[in, out]` order.
struct TorchMlp {
    file: Vec<Raw>,
    ours: Vec<Tensor>,
}

fn torch_mlp() -> TorchMlp {
    let w1 = normal(&[128, 784], 1);
    let b1 = normal(&[128], 2);
    let w2 = normal(&[10, 128], 3);
    let b2 = normal(&[10], 4);
    let t = |a: &ArrayD<f32>| Tensor::F32(a.t().as_standard_layout().into_owned());
    TorchMlp {
        ours: vec![
            t(&w1),
            Tensor::F32(b1.clone()),
            t(&w2),
            Tensor::F32(b2.clone()),
        ],
        file: vec![
            raw_f32("0.bias", &b1),
            raw_f32("0.weight", &w1),
            raw_f32("2.bias", &b2),
            raw_f32("2.weight", &w2),
        ],
    }
}

/// The map for [`torch_mlp`], as a table.
fn torch_mlp_map() -> Vec<(&'static str, Mapping)> {
    vec![
        ("0.weight", Mapping::torch_linear("dense/kernel")),
        ("0.bias", Mapping::same("dense/bias")),
        ("2.weight", Mapping::torch_linear("dense_1/kernel")),
        ("2.bias", Mapping::same("dense_1/bias")),
    ]
}

fn assert_unchanged(m: &Model<Sequential>, before: &[Tensor]) {
    assert_eq!(values(m), before, "a failed call changed the weights");
}

// ---- set_weights_list ----

#[test]
fn positional_round_trips_with_weights() {
    let source = small(1);
    let mut m = small(2);
    assert_ne!(values(&m), values(&source));
    m.set_weights_list(&values(&source)).unwrap();
    assert_eq!(m.weights(), source.weights());
    let x = normal(&[4, 6], 9);
    assert_eq!(
        f32s(&m.predict(&x).unwrap()),
        f32s(&source.predict(&x).unwrap())
    );
}

#[test]
fn positional_wrong_count_says_what_the_model_has() {
    let mut m = small(1);
    let before = values(&m);
    let mut short = values(&small(2));
    short.pop();
    let e = m.set_weights_list(&short).unwrap_err();
    match &e {
        Error::WeightCount {
            expected,
            got,
            names,
            ..
        } => {
            assert_eq!((*expected, *got), (4, 3));
            assert_eq!(names[3], "dense_1/bias");
        }
        e => panic!("expected WeightCount, got {e:?}"),
    }
    assert!(e.to_string().contains("`dense/kernel`"), "{e}");
    assert_unchanged(&m, &before);
    let mut long = values(&small(2));
    long.push(Tensor::scalar(1.0f32));
    assert!(matches!(
        m.set_weights_list(&long),
        Err(Error::WeightCount {
            expected: 4,
            got: 5,
            ..
        })
    ));
    assert_unchanged(&m, &before);
}

#[test]
fn positional_wrong_shape_names_the_parameter() {
    let mut m = small(1);
    let before = values(&m);
    let mut v = values(&small(2));
    // The last value wrong: the earlier, valid ones must not be applied either.
    v[3] = Tensor::F32(ArrayD::zeros(IxDyn(&[4])));
    let e = m.set_weights_list(&v).unwrap_err();
    match &e {
        Error::WeightType {
            name,
            expected,
            got,
            ..
        } => {
            assert_eq!(name, "dense_1/bias");
            assert_eq!(expected, &TensorType::new(DType::F32, [3]));
            assert_eq!(got, &TensorType::new(DType::F32, [4]));
        }
        e => panic!("expected WeightType, got {e:?}"),
    }
    assert!(e.to_string().contains("f32[3]"), "{e}");
    assert_unchanged(&m, &before);
}

#[test]
fn positional_wrong_dtype_names_the_parameter() {
    let mut m = small(1);
    let before = values(&m);
    let mut v = values(&small(2));
    v[0] = Tensor::F64(ArrayD::zeros(IxDyn(&[6, 5])));
    match m.set_weights_list(&v).unwrap_err() {
        Error::WeightType {
            name,
            expected,
            got,
            ..
        } => {
            assert_eq!(name, "dense/kernel");
            assert_eq!(expected.dtype, DType::F32);
            assert_eq!(got.dtype, DType::F64);
        }
        e => panic!("expected WeightType, got {e:?}"),
    }
    assert_unchanged(&m, &before);
}

#[test]
fn by_name_shares_the_checks_and_rejects_unknown_and_repeated_names() {
    let mut m = small(1);
    let before = values(&m);
    let other = small(2).weights();
    let e = m
        .set_weights(&[other[0].clone(), ("nope".into(), Tensor::scalar(1.0f32))])
        .unwrap_err();
    assert!(
        matches!(&e, Error::WeightNames { unknown, .. } if unknown == &["nope"]),
        "{e:?}"
    );
    assert!(e.to_string().contains("`dense_1/kernel`"), "{e}");
    assert_unchanged(&m, &before);
    let e = m
        .set_weights(&[other[1].clone(), other[1].clone()])
        .unwrap_err();
    assert!(e.to_string().contains("more than once"), "{e}");
    assert_unchanged(&m, &before);
    // A subset by name is fine.
    m.set_weights(&other[..1]).unwrap();
    assert_eq!(values(&m)[0], other[0].1);
    assert_eq!(values(&m)[1], before[1]);
}

/// Trains one step (so the device holds the weights), sets new ones, and reads the
/// device's copy back (a checkpoint downloads it first).
fn device_copy_after(
    name: &str,
    set: impl FnOnce(&mut Model<Sequential>),
) -> (Vec<Tensor>, Vec<Tensor>) {
    let mut m = small(1);
    m.compile(
        SGD::default(),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    let x = normal(&[4, 6], 5);
    let y = random::uniform_int(&[4], 0, 3, 6).unwrap();
    m.fit(&x, &y, Fit::epochs(1).batch_size(4).verbose(0))
        .unwrap();
    set(&mut m);
    let host = values(&m);
    m.save_checkpoint(tmp(name)).unwrap();
    (host, values(&m))
}

#[test]
fn positional_updates_a_compiled_models_device_copy() {
    let new = values(&small(3));
    let expected = new.clone();
    let (host, device) =
        device_copy_after("positional.ckpt", |m| m.set_weights_list(&new).unwrap());
    assert_eq!(host, expected);
    assert_eq!(device, expected);
}

// ---- load_safetensors ----

#[test]
fn torch_linear_file_loads_like_the_transposed_values() {
    let t = torch_mlp();
    let path = write("torch_mlp.safetensors", &safetensors_bytes(&t.file));
    let mut loaded = tutorial(1);
    let report = loaded.load_safetensors(&path, &torch_mlp_map()).unwrap();
    assert_eq!(report.loaded.len(), 4);
    assert!(report.unused.is_empty() && report.unset.is_empty() && report.converted.is_empty());
    assert!(report
        .loaded
        .contains(&("0.weight".to_string(), "dense/kernel".to_string())));

    let mut direct = tutorial(2);
    direct.set_weights_list(&t.ours).unwrap();
    assert_eq!(values(&loaded), values(&direct));
    let x = normal(&[5, 784], 7);
    let (a, b) = (loaded.predict(&x).unwrap(), direct.predict(&x).unwrap());
    assert_eq!(a.dims(), &[5, 10]);
    assert_eq!(f32s(&a), f32s(&b));
}

#[test]
fn every_form_of_map_loads_the_same() {
    let t = torch_mlp();
    let path = write("forms.safetensors", &safetensors_bytes(&t.file));
    let table = torch_mlp_map();
    let run = |f: &dyn Fn(&mut Model<Sequential>)| {
        let mut m = tutorial(3);
        f(&mut m);
        values(&m)
    };
    let want = t.ours.clone();
    // A slice, an array, a Vec, a HashMap, a closure.
    assert_eq!(
        run(&|m| {
            m.load_safetensors(&path, table.as_slice()).unwrap();
        }),
        want
    );
    let array: [(&str, Mapping); 4] = table.clone().try_into().unwrap();
    assert_eq!(
        run(&|m| {
            m.load_safetensors(&path, &array).unwrap();
        }),
        want
    );
    let hash: HashMap<String, Mapping> = table
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    assert_eq!(
        run(&|m| {
            m.load_safetensors(&path, &hash).unwrap();
        }),
        want
    );
    let closure = |n: &str| {
        let (layer, kind) = n.split_once('.')?;
        let ours = match layer {
            "0" => "dense",
            "2" => "dense_1",
            _ => return None,
        };
        Some(match kind {
            "weight" => Mapping::torch_linear(format!("{ours}/kernel")),
            _ => Mapping::same(format!("{ours}/bias")),
        })
    };
    assert_eq!(
        run(&|m| {
            m.load_safetensors(&path, closure).unwrap();
        }),
        want
    );
    // The explicit permutation is the transpose.
    let permuted: Vec<(&str, Mapping)> = table
        .iter()
        .map(|(k, v)| {
            let v = match v.layout {
                Layout::TorchLinear => Mapping::permute(v.param.clone(), &[1, 0]),
                _ => v.clone(),
            };
            (*k, v)
        })
        .collect();
    assert_eq!(
        run(&|m| {
            m.load_safetensors(&path, &permuted).unwrap();
        }),
        want
    );
}

#[test]
fn same_layout_table_of_names_loads_a_keras_style_file() {
    let k = normal(&[6, 5], 1);
    let b = normal(&[5], 2);
    let k1 = normal(&[5, 3], 3);
    let b1 = normal(&[3], 4);
    let file = [
        raw_f32("layers/dense/vars/0", &k),
        raw_f32("layers/dense/vars/1", &b),
        raw_f32("layers/dense_1/vars/0", &k1),
        raw_f32("layers/dense_1/vars/1", &b1),
    ];
    let path = write("keras_style.safetensors", &safetensors_bytes(&file));
    let mut m = small(1);
    m.load_safetensors(
        &path,
        &[
            ("layers/dense/vars/0", "dense/kernel"),
            ("layers/dense/vars/1", "dense/bias"),
            ("layers/dense_1/vars/0", "dense_1/kernel"),
            ("layers/dense_1/vars/1", "dense_1/bias"),
        ],
    )
    .unwrap();
    assert_eq!(values(&m), [k, b, k1, b1].map(Tensor::F32));
}

#[test]
fn torch_conv2d_layout_permutes_to_ours() {
    // PyTorch Conv2d(2, 3, kernel_size=(2, 4)): weight [out 3, in 2, kh 2, kw 4].
    let w = normal(&[3, 2, 2, 4], 1);
    let b = normal(&[3], 2);
    let conv = |seed| {
        Model::new(Sequential::new(
            Some(vec![5, 6, 2]),
            vec![Box::new(Conv2D::new(
                "conv2d",
                3,
                [2, 4],
                Activation::Linear,
            ))],
        ))
        .with_seed(seed)
        .unwrap()
    };
    let path = write(
        "conv.safetensors",
        &safetensors_bytes(&[raw_f32("conv.weight", &w), raw_f32("conv.bias", &b)]),
    );
    let mut loaded = conv(1);
    loaded
        .load_safetensors(
            &path,
            &[
                ("conv.weight", Mapping::torch_conv2d("conv2d/kernel")),
                ("conv.bias", Mapping::same("conv2d/bias")),
            ],
        )
        .unwrap();
    // ours[h, w, i, o] = theirs[o, i, h, w]
    let ours = ArrayD::from_shape_fn(IxDyn(&[2, 4, 2, 3]), |ix| w[[ix[3], ix[2], ix[0], ix[1]]]);
    let mut direct = conv(2);
    direct
        .set_weights_list(&[Tensor::F32(ours), Tensor::F32(b)])
        .unwrap();
    assert_eq!(values(&loaded), values(&direct));
    let x = normal(&[2, 5, 6, 2], 3);
    assert_eq!(
        f32s(&loaded.predict(&x).unwrap()),
        f32s(&direct.predict(&x).unwrap())
    );
}

#[test]
fn half_bfloat_and_double_convert_to_f32() {
    let k: Vec<f32> = (0..30).map(|i| i as f32 * 0.25 - 3.0).collect();
    let b: Vec<f32> = vec![0.5, -1.5, 2.0, 1e-3, -7.0];
    let k1: Vec<f64> = (0..15).map(|i| i as f64 / 3.0).collect();
    let file = [
        Raw {
            name: "k",
            dtype: "F16",
            shape: vec![5, 6],
            data: k
                .iter()
                .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                .collect(),
        },
        Raw {
            name: "b",
            dtype: "BF16",
            shape: vec![5],
            data: b
                .iter()
                .flat_map(|&v| half::bf16::from_f32(v).to_le_bytes())
                .collect(),
        },
        Raw {
            name: "k1",
            dtype: "F64",
            shape: vec![5, 3],
            data: k1.iter().flat_map(|v| v.to_le_bytes()).collect(),
        },
    ];
    let path = write("dtypes.safetensors", &safetensors_bytes(&file));
    let mut m = small(1);
    let before = values(&m);
    let report = m
        .load_safetensors_partial(
            &path,
            &[
                ("k", Mapping::torch_linear("dense/kernel")),
                ("b", "dense/bias".into()),
                ("k1", Mapping::same("dense_1/kernel")),
            ],
        )
        .unwrap();
    assert_eq!(report.converted, ["b", "k", "k1"]);
    assert_eq!(report.unset, ["dense_1/bias"]);
    let v = values(&m);
    // Every value above is exact in f16 and bf16; the f64s round to nearest.
    let kt: Vec<f32> = (0..30).map(|i| k[(i % 5) * 6 + i / 5]).collect();
    assert_eq!(f32s(&v[0]), kt);
    assert_eq!(
        f32s(&v[1]),
        b.iter()
            .map(|&x| half::bf16::from_f32(x).to_f32())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        f32s(&v[2]),
        k1.iter().map(|&x| x as f32).collect::<Vec<_>>()
    );
    assert_eq!(v[3], before[3], "the unset parameter keeps its value");
}

#[test]
fn load_updates_a_compiled_models_device_copy() {
    let k = normal(&[5, 6], 11);
    let path = write(
        "device.safetensors",
        &safetensors_bytes(&[raw_f32("fc.weight", &k)]),
    );
    let (host, device) = device_copy_after("load.ckpt", |m| {
        m.load_safetensors_partial(
            &path,
            &[("fc.weight", Mapping::torch_linear("dense/kernel"))],
        )
        .unwrap();
    });
    let kt = Tensor::F32(k.t().as_standard_layout().into_owned());
    assert_eq!(host[0], kt);
    assert_eq!(device, host);
}

// ---- load_safetensors: errors, each leaving the model unchanged ----

fn load_err(bytes: &[u8], name: &str, map: &[(&str, Mapping)], partial: bool) -> Error {
    let path = write(name, bytes);
    let mut m = tutorial(1);
    let before = values(&m);
    let r = if partial {
        m.load_safetensors_partial(&path, map)
    } else {
        m.load_safetensors(&path, map)
    };
    let e = r.expect_err("the load should fail");
    assert_unchanged(&m, &before);
    e
}

#[test]
fn a_parameter_left_unset_is_an_error_unless_partial() {
    let t = torch_mlp();
    let bytes = safetensors_bytes(&t.file);
    let map = &torch_mlp_map()[..3];
    match load_err(&bytes, "partial.safetensors", map, false) {
        Error::WeightNames {
            unknown, missing, ..
        } => {
            assert!(unknown.is_empty());
            assert_eq!(missing, ["dense_1/bias"]);
        }
        e => panic!("expected WeightNames, got {e:?}"),
    }
    let path = write("partial_ok.safetensors", &bytes);
    let mut m = tutorial(1);
    let before = values(&m);
    let r = m.load_safetensors_partial(&path, map).unwrap();
    assert_eq!(r.unset, ["dense_1/bias"]);
    assert_eq!(r.unused, ["2.bias"]);
    assert_eq!(values(&m)[3], before[3]);
    assert_eq!(values(&m)[0], t.ours[0]);
}

#[test]
fn a_name_mapped_to_no_parameter_is_an_error_even_when_partial() {
    let bytes = safetensors_bytes(&torch_mlp().file);
    let mut map = torch_mlp_map();
    map[3].1 = Mapping::same("dense_2/bias");
    for partial in [false, true] {
        let e = load_err(&bytes, "unknown.safetensors", &map, partial);
        match &e {
            Error::WeightNames { unknown, .. } => assert_eq!(unknown, &["dense_2/bias"]),
            e => panic!("expected WeightNames, got {e:?}"),
        }
        assert!(e.to_string().contains("dense_2/bias"), "{e}");
    }
}

#[test]
fn a_table_entry_the_file_lacks_is_an_error() {
    let bytes = safetensors_bytes(&torch_mlp().file);
    let mut map = torch_mlp_map();
    map[0].0 = "0.weigth";
    for partial in [false, true] {
        let e = load_err(&bytes, "absent.safetensors", &map, partial);
        assert!(matches!(e, Error::Checkpoint { .. }), "{e:?}");
        assert!(e.to_string().contains("`0.weigth`"), "{e}");
    }
}

#[test]
fn a_forgotten_transpose_is_a_shape_error_naming_both_sides() {
    let bytes = safetensors_bytes(&torch_mlp().file);
    let mut map = torch_mlp_map();
    map[0].1 = Mapping::same("dense/kernel");
    let e = load_err(&bytes, "no_transpose.safetensors", &map, false);
    match &e {
        Error::WeightType {
            name,
            expected,
            got,
            ..
        } => {
            assert_eq!(name, "dense/kernel");
            assert_eq!(expected.dims(), &[784, 128]);
            assert_eq!(got.dims(), &[128, 784]);
        }
        e => panic!("expected WeightType, got {e:?}"),
    }
    assert!(e.to_string().contains("0.weight"), "{e}");
}

#[test]
fn a_layout_that_is_no_permutation_is_an_error() {
    let bytes = safetensors_bytes(&torch_mlp().file);
    for layout in [
        Layout::TorchConv2d,
        Layout::Permute(vec![0, 0]),
        Layout::Permute(vec![1, 2]),
        Layout::Permute(vec![1]),
    ] {
        let mut map = torch_mlp_map();
        map[0].1 = Mapping::new("dense/kernel", layout.clone());
        let e = load_err(&bytes, "bad_layout.safetensors", &map, false);
        assert!(
            matches!(e, Error::InvalidArgument { .. }),
            "{layout:?}: {e:?}"
        );
    }
}

#[test]
fn two_tensors_into_one_parameter_is_an_error() {
    let bytes = safetensors_bytes(&torch_mlp().file);
    let mut map = torch_mlp_map();
    map[3].1 = Mapping::same("dense/bias");
    let e = load_err(&bytes, "twice.safetensors", &map, true);
    assert!(e.to_string().contains("both map to"), "{e}");
}

#[test]
fn an_integer_tensor_is_a_typed_error() {
    let mut file = torch_mlp().file;
    file[0] = Raw {
        name: "0.bias",
        dtype: "I64",
        shape: vec![128],
        data: vec![0; 128 * 8],
    };
    let e = load_err(
        &safetensors_bytes(&file),
        "int.safetensors",
        &torch_mlp_map(),
        false,
    );
    assert!(matches!(e, Error::Checkpoint { .. }), "{e:?}");
    assert!(e.to_string().contains("I64"), "{e}");
}

#[test]
fn every_truncation_is_an_error_never_a_panic() {
    // A small file, so that every cut can be tried.
    let file = [
        raw_f32("w", &normal(&[3, 2], 1)),
        raw_f32("b", &normal(&[3], 2)),
    ];
    let bytes = safetensors_bytes(&file);
    let path = tmp("cut.safetensors");
    let mut m = small(1);
    let before = values(&m);
    for len in 0..bytes.len() {
        std::fs::write(&path, &bytes[..len]).unwrap();
        let e = m
            .load_safetensors_partial(&path, |_: &str| None)
            .unwrap_err();
        assert!(matches!(e, Error::Checkpoint { .. }), "cut at {len}: {e:?}");
        assert_unchanged(&m, &before);
    }
    let mut longer = bytes.clone();
    longer.extend([0; 4]);
    std::fs::write(&path, &longer).unwrap();
    let e = m
        .load_safetensors_partial(&path, |_: &str| None)
        .unwrap_err();
    assert!(e.to_string().contains("trailing"), "{e}");
    // The whole file reads (nothing mapped, nothing changed).
    std::fs::write(&path, &bytes).unwrap();
    let r = m.load_safetensors_partial(&path, |_: &str| None).unwrap();
    assert_eq!(r.unused, ["b", "w"]);
    assert_unchanged(&m, &before);
}

#[test]
fn headers_with_wrong_offsets_or_huge_sizes_are_errors() {
    let data = vec![0u8; 24];
    let headers = [
        // Overlapping and out-of-order offsets.
        r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}}"#,
        // Offsets not matching the shape's size.
        r#"{"a":{"dtype":"F32","shape":[5],"data_offsets":[0,24]}}"#,
        // A shape of 2^62 elements over 24 bytes.
        r#"{"a":{"dtype":"F32","shape":[2147483648,2147483648],"data_offsets":[0,24]}}"#,
        // Sizes whose product overflows.
        r#"{"a":{"dtype":"F64","shape":[18446744073709551615,4],"data_offsets":[0,18446744073709551615]}}"#,
        // An end offset far past the file.
        r#"{"a":{"dtype":"F32","shape":[1073741824],"data_offsets":[0,4294967296]}}"#,
        // Not JSON, not the right JSON.
        r#"{"a":{"dtype":"F32","shape":[6]"#,
        r#"["a"]"#,
        r#"{"a":{"dtype":"Q7","shape":[6],"data_offsets":[0,24]}}"#,
    ];
    for (i, h) in headers.iter().enumerate() {
        let e = load_err(
            &header_and_data(h, &data),
            &format!("header{i}.safetensors"),
            &[],
            true,
        );
        assert!(matches!(e, Error::Checkpoint { .. }), "header {i}: {e:?}");
    }
    // A header length of 2^63 in an 8-byte file.
    let e = load_err(
        &(1u64 << 63).to_le_bytes(),
        "hugeheader.safetensors",
        &[],
        true,
    );
    assert!(matches!(e, Error::Checkpoint { .. }), "{e:?}");
}

#[test]
fn a_missing_file_or_a_directory_is_an_error() {
    let mut m = small(1);
    let e = m
        .load_safetensors(tmp("does-not-exist.safetensors"), |_: &str| None)
        .unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    let e = m
        .load_safetensors(std::env::temp_dir(), |_: &str| None)
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
}
