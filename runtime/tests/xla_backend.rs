//! The XLA backend's behaviour beyond single ops: state updates by donation, the
//! persistent compilation cache, plugin errors, device counts, buffers of the wrong
//! backend, the StableHLO text and dumps, and agreement with the native backend.
//!
//! Needs the CPU plugin (`scripts/install-xla-plugin`, run by `scripts/test`); without it
//! every test here fails with the install command.

use std::path::{Path, PathBuf};
use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::pjrt::{
    find_plugin_in, stablehlo_text, CacheDir, PjrtBackend, PjrtOptions, PluginKind,
};
use strata_runtime::backend::{Backend, Buffer, CompileOptions, Device};
use strata_runtime::ir::{DType, Graph, TensorType, UnaryOp};
use strata_runtime::{Error, Tensor};

fn open(device: Device, options: PjrtOptions) -> PjrtBackend {
    match PjrtBackend::with_options(&device, options) {
        Ok(b) => b,
        Err(e) => panic!("the XLA CPU plugin is needed for this test: {e}"),
    }
}

fn xla_cpu() -> PjrtBackend {
    open(
        Device::XlaCpu { devices: Some(1) },
        PjrtOptions {
            cache: CacheDir::Disabled,
            ..PjrtOptions::default()
        },
    )
}

/// A fresh, empty directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("strata-xla-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn f32t(dims: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(dims, v.to_vec()).unwrap()
}

/// `loss = sum(w²)`, `w ← w - lr · 2w`: outputs `[loss, new w]`, the second updating `w`.
fn sgd_step() -> (Graph, CompileOptions) {
    let mut g = Graph::new("sgd step");
    let w = g.parameter(TensorType::new(DType::F32, [4]));
    let lr = g.parameter(TensorType::scalar(DType::F32));
    let sq = g.mul(w, w).unwrap();
    let loss = g.sum_all(sq).unwrap();
    let grad = g.mul_scalar(w, 2.0).unwrap();
    let step = g.mul(grad, lr).unwrap();
    let new_w = g.sub(w, step).unwrap();
    g.set_outputs(vec![loss, new_w]).unwrap();
    (
        g,
        CompileOptions {
            updates: vec![(1, 0)],
        },
    )
}

#[test]
fn state_updates_happen_in_place_over_several_executions() {
    let xla = xla_cpu();
    let native = NativeBackend::new();
    let (g, options) = sgd_step();
    let mut on_xla = xla.compile(&g, &options).unwrap();
    let mut on_native = native.compile(&g, &options).unwrap();
    let w0 = f32t(&[4], &[1.0, -2.0, 0.5, 3.0]);
    let lr = Tensor::scalar(0.125f32);
    let mut xa = vec![xla.upload(&w0).unwrap(), xla.upload(&lr).unwrap()];
    let mut na = vec![native.upload(&w0).unwrap(), native.upload(&lr).unwrap()];
    for step in 0..5 {
        let xo = on_xla.execute(&mut xa).unwrap();
        let no = on_native.execute(&mut na).unwrap();
        assert_eq!(
            xo.len(),
            1,
            "only the loss comes back; w is updated in place"
        );
        let (xl, nl) = (
            xla.download(&xo[0]).unwrap(),
            native.download(&no[0]).unwrap(),
        );
        assert_eq!(xl, nl, "loss at step {step}");
        let (xw, nw) = (
            xla.download(&xa[0]).unwrap(),
            native.download(&na[0]).unwrap(),
        );
        assert_eq!(xw, nw, "w after step {step}");
    }
    // w shrinks by (1 - 2 lr) = 0.75 per step.
    let w = xla.download(&xa[0]).unwrap().to_vec::<f32>().unwrap();
    let k = 0.75f32.powi(5);
    assert_eq!(w, vec![k, -2.0 * k, 0.5 * k, 3.0 * k]);
    let stats = xla.execution_stats();
    assert_eq!(stats.executions, 5);
    assert_eq!(
        stats.donated, 5,
        "every update reused the parameter's buffer: {stats:?}"
    );
    assert_eq!(stats.not_donated, 0);
}

#[test]
fn the_compile_cache_is_hit_on_the_second_compile() {
    let dir = temp_dir("cache-hit");
    let options = || PjrtOptions {
        cache: CacheDir::At(dir.clone()),
        ..PjrtOptions::default()
    };
    let (g, opts) = sgd_step();
    let a = open(Device::XlaCpu { devices: Some(1) }, options());
    a.compile(&g, &opts).unwrap();
    let s = a.cache_stats();
    assert_eq!((s.hits, s.misses, s.writes), (0, 1, 1), "{s:?}");
    a.compile(&g, &opts).unwrap();
    assert_eq!(a.cache_stats().hits, 1, "{:?}", a.cache_stats());

    // A new client (as in a new process) finds the entry too, and its executable runs.
    let b = open(Device::XlaCpu { devices: Some(1) }, options());
    let mut exe = b.compile(&g, &opts).unwrap();
    assert_eq!(b.cache_stats().hits, 1, "{:?}", b.cache_stats());
    let mut args = vec![
        b.upload(&f32t(&[4], &[1.0, 2.0, 3.0, 4.0])).unwrap(),
        b.upload(&Tensor::scalar(0.5f32)).unwrap(),
    ];
    let out = exe.execute(&mut args).unwrap();
    assert_eq!(b.download(&out[0]).unwrap(), Tensor::scalar(30.0f32));
    assert_eq!(b.download(&args[0]).unwrap(), f32t(&[4], &[0.0; 4]));

    // A different program is a different entry.
    let mut other = Graph::new("other");
    let x = other.parameter(TensorType::new(DType::F32, [2]));
    let y = other.unary(UnaryOp::Exp, x).unwrap();
    other.set_outputs(vec![y]).unwrap();
    b.compile(&other, &CompileOptions::default()).unwrap();
    assert_eq!(b.cache_stats().misses, 1, "{:?}", b.cache_stats());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_corrupt_cache_entry_is_recompiled_not_an_error() {
    let dir = temp_dir("cache-corrupt");
    let (g, opts) = sgd_step();
    let backend = || {
        open(
            Device::XlaCpu { devices: Some(1) },
            PjrtOptions {
                cache: CacheDir::At(dir.clone()),
                ..PjrtOptions::default()
            },
        )
    };
    backend().compile(&g, &opts).unwrap();
    let entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        entries.len(),
        1,
        "one entry, no temporary files left: {entries:?}"
    );
    let entry = &entries[0];
    let good = std::fs::read(entry).unwrap();

    for (what, bytes) in [
        ("garbage", b"not an executable".to_vec()),
        ("truncated", good[..good.len() / 2].to_vec()),
        ("flipped", {
            let mut b = good.clone();
            let mid = b.len() - 100;
            b[mid] ^= 0x55;
            b
        }),
    ] {
        std::fs::write(entry, &bytes).unwrap();
        let b = backend();
        let mut exe = b
            .compile(&g, &opts)
            .unwrap_or_else(|e| panic!("{what} entry: {e}"));
        let s = b.cache_stats();
        assert_eq!(
            (s.hits, s.rejected, s.misses, s.writes),
            (0, 1, 1, 1),
            "{what}: {s:?}"
        );
        let mut args = vec![
            b.upload(&f32t(&[4], &[1.0, 1.0, 1.0, 1.0])).unwrap(),
            b.upload(&Tensor::scalar(0.25f32)).unwrap(),
        ];
        let out = exe.execute(&mut args).unwrap();
        assert_eq!(b.download(&out[0]).unwrap(), Tensor::scalar(4.0f32));
    }
    // The last recompile rewrote a sound entry.
    let b = backend();
    b.compile(&g, &opts).unwrap();
    assert_eq!(b.cache_stats().hits, 1);
    let _ = std::fs::remove_dir_all(dir);
}

fn with_plugin(path: &Path) -> Result<PjrtBackend, Error> {
    PjrtBackend::with_options(
        &Device::XlaCpu { devices: None },
        PjrtOptions {
            plugin: Some(path.to_path_buf()),
            cache: CacheDir::Disabled,
            ..PjrtOptions::default()
        },
    )
}

#[test]
fn a_missing_plugin_file_is_a_typed_error() {
    let p = Path::new("/nonexistent/strata/pjrt_plugin.so");
    match with_plugin(p) {
        Err(Error::Plugin { path, message }) => {
            assert_eq!(path, p.display().to_string());
            assert!(message.contains("cannot be read"), "{message}");
        }
        other => panic!("expected Error::Plugin, got {other:?}"),
    }
}

#[test]
fn a_file_that_is_not_a_plugin_is_a_typed_error() {
    let dir = temp_dir("not-a-plugin");
    let text = dir.join("plugin.so");
    std::fs::write(&text, "this is not a shared library").unwrap();
    match with_plugin(&text) {
        Err(Error::Plugin { message, .. }) => {
            assert!(
                message.contains("not a loadable shared library"),
                "{message}"
            )
        }
        other => panic!("expected Error::Plugin, got {other:?}"),
    }

    // A real shared library without GetPjrtApi: the C library this test runs on.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let libc = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
        .expect("the C library is mapped");
    match with_plugin(Path::new(libc)) {
        Err(Error::Plugin { message, .. }) => {
            assert!(message.contains("not a PJRT plugin"), "{message}")
        }
        other => panic!("expected Error::Plugin, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_plugin_nowhere_to_be_found_names_the_install_command() {
    let empty = temp_dir("no-plugins");
    let dirs = [empty.clone()];
    let err = find_plugin_in(PluginKind::Cpu, &dirs, &dirs).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::PluginNotFound { .. }), "{err:?}");
    assert!(text.contains("pip install"), "{text}");
    assert!(text.contains("lammps-jax-pjrt-cpu==0.11.2"), "{text}");
    let _ = std::fs::remove_dir_all(empty);
}

#[test]
fn several_cpu_device_counts_create_clients() {
    let mut g = Graph::new("double");
    let x = g.parameter(TensorType::new(DType::F32, [2]));
    let y = g.add(x, x).unwrap();
    g.set_outputs(vec![y]).unwrap();
    for n in [1, 2, 4, 8] {
        let b = open(
            Device::XlaCpu { devices: Some(n) },
            PjrtOptions {
                cache: CacheDir::Disabled,
                ..PjrtOptions::default()
            },
        );
        assert_eq!(b.device_count(), n);
        assert!(
            b.device_kinds().iter().all(|k| k == "cpu"),
            "{:?}",
            b.device_kinds()
        );
        assert_eq!(b.platform().0, "cpu");
        let out = b.run(&g, &[f32t(&[2], &[1.5, -2.0])]).unwrap();
        assert_eq!(out[0], f32t(&[2], &[3.0, -4.0]));
    }
    // Plain `xla-cpu` is one device, as JAX's CPU client (the plugin's own default is four).
    let default = open(Device::XlaCpu { devices: None }, PjrtOptions::default());
    assert_eq!(default.device_count(), 1);
}

#[test]
fn buffers_of_another_backend_are_typed_errors() {
    let xla = xla_cpu();
    let native = NativeBackend::new();
    let t = f32t(&[2], &[1.0, 2.0]);
    let on_xla = xla.upload(&t).unwrap();
    let on_native = native.upload(&t).unwrap();
    let wrong = |r: Result<Tensor, Error>| matches!(r, Err(Error::WrongBackend { .. }));
    assert!(wrong(native.download(&on_xla)));
    assert!(wrong(xla.download(&on_native)));

    let mut g = Graph::new("neg");
    let x = g.parameter(TensorType::new(DType::F32, [2]));
    let y = g.neg(x).unwrap();
    g.set_outputs(vec![y]).unwrap();
    let mut args: Vec<Buffer> = vec![on_native];
    let r = xla
        .compile(&g, &CompileOptions::default())
        .unwrap()
        .execute(&mut args);
    assert!(matches!(r, Err(Error::WrongBackend { .. })), "{r:?}");
    let mut args: Vec<Buffer> = vec![on_xla];
    let r = native
        .compile(&g, &CompileOptions::default())
        .unwrap()
        .execute(&mut args);
    assert!(matches!(r, Err(Error::WrongBackend { .. })), "{r:?}");
    let mut b = native.upload(&t).unwrap();
    assert!(matches!(
        xla.upload_into(&t, &mut b),
        Err(Error::WrongBackend { .. })
    ));

    // A buffer of another XLA client is refused too, not handed to the plugin.
    let other = xla_cpu();
    let foreign = other.upload(&t).unwrap();
    assert!(matches!(
        xla.download(&foreign),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn the_stablehlo_text_is_public_and_dumped() {
    let (mut g, opts) = sgd_step();
    // A node no output depends on is not printed.
    let w = g.params()[0];
    g.unary(UnaryOp::Tanh, w).unwrap();
    let text = stablehlo_text(&g, &opts).unwrap();
    assert!(text.contains("func.func public @main("), "{text}");
    assert!(text.contains("{tf.aliasing_output = 1 : i32}"), "{text}");
    assert!(!text.contains("tanh"), "{text}");

    let dir = temp_dir("dump");
    let b = open(
        Device::XlaCpu { devices: Some(1) },
        PjrtOptions {
            cache: CacheDir::Disabled,
            dump_dir: Some(dir.clone()),
            ..PjrtOptions::default()
        },
    );
    b.compile(&g, &opts).unwrap();
    let dumped: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dumped.len(), 1, "{dumped:?}");
    let name = dumped[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with("sgd_step-") && name.ends_with(".mlir"),
        "{name}"
    );
    assert_eq!(std::fs::read_to_string(&dumped[0]).unwrap(), text);
    let _ = std::fs::remove_dir_all(dir);

    // Invalid graphs and options are refused before any text exists.
    let bad = CompileOptions {
        updates: vec![(0, 0)], // the loss is f32[], w is f32[4]
    };
    assert!(matches!(
        stablehlo_text(&g, &bad),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn random_uniform_is_bit_identical_to_native() {
    let xla = xla_cpu();
    let native = NativeBackend::new();
    let mut g = Graph::new("uniform");
    let key = g.parameter(TensorType::new(DType::I32, [2]));
    let a = g
        .random_uniform(key, TensorType::new(DType::F32, [1000]))
        .unwrap();
    let b = g
        .random_uniform(key, TensorType::new(DType::F64, [7, 9]))
        .unwrap();
    let c = g
        .random_uniform(key, TensorType::scalar(DType::F32))
        .unwrap();
    g.set_outputs(vec![a, b, c]).unwrap();
    for k in [[0, 0], [123, -7], [i32::MIN, i32::MAX]] {
        let key = Tensor::from_vec(&[2], k.to_vec()).unwrap();
        let x = xla.run(&g, std::slice::from_ref(&key)).unwrap();
        let n = native.run(&g, &[key]).unwrap();
        // Tensor equality on floats compares values; the bits are equal too when all are
        // equal and none is NaN (samples are in [0, 1)).
        assert_eq!(x, n, "key {k:?}");
    }
}

/// A two-layer network's loss and gradients, from primitives and autodiff.
fn mlp_grad() -> Graph {
    let mut g = Graph::new("mlp");
    let x = g.parameter(TensorType::new(DType::F32, [16, 8]));
    let w1 = g.parameter(TensorType::new(DType::F32, [8, 32]));
    let b1 = g.parameter(TensorType::new(DType::F32, [32]));
    let w2 = g.parameter(TensorType::new(DType::F32, [32, 4]));
    let h = g.matmul(x, w1).unwrap();
    let h = g.add(h, b1).unwrap();
    let h = g.tanh(h).unwrap();
    let logits = g.matmul(h, w2).unwrap();
    // log-sum-exp minus the first logit: a softmax cross-entropy with label 0.
    let e = g.exp(logits).unwrap();
    let s = g.sum(e, &[1]).unwrap();
    let lse = g.log(s).unwrap();
    let first = g.slice(logits, &[0, 0], &[16, 1], &[1, 1]).unwrap();
    let first = g.reshape(first, [16]).unwrap();
    let per = g.sub(lse, first).unwrap();
    let loss = g.mean(per, &[0]).unwrap();
    g.set_outputs(vec![loss]).unwrap();
    strata_runtime::autodiff::grad(&g, loss, &[w1, b1, w2]).unwrap()
}

#[test]
fn a_training_step_graph_matches_native() {
    let g = mlp_grad();
    let inputs: Vec<Tensor> = g
        .param_types()
        .iter()
        .enumerate()
        .map(|(i, ty)| {
            let a = strata_runtime::random::uniform(ty.dims(), -0.5, 0.5, 7 + i as u64).unwrap();
            Tensor::from(a)
        })
        .collect();
    let x = xla_cpu().run(&g, &inputs).unwrap();
    let n = NativeBackend::new().run(&g, &inputs).unwrap();
    assert_eq!(x.len(), 4);
    for (k, (a, b)) in x.iter().zip(&n).enumerate() {
        let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
        for (i, (p, q)) in a.iter().zip(&b).enumerate() {
            // Summation order differs between XLA's and the native kernels.
            assert!(
                (p - q).abs() <= 1e-5 + 1e-5 * q.abs(),
                "output {k} element {i}: xla {p}, native {q}"
            );
        }
    }
}

#[test]
fn device_names_give_backends() {
    let b = "xla-cpu:2".parse::<Device>().unwrap().backend().unwrap();
    assert_eq!(b.name(), "xla-cpu:2");
    let mut g = Graph::new("id");
    let x = g.parameter(TensorType::new(DType::I64, [3]));
    g.set_outputs(vec![x]).unwrap();
    let t = Tensor::from_vec(&[3], vec![1i64, -2, 1 << 40]).unwrap();
    assert_eq!(b.run(&g, std::slice::from_ref(&t)).unwrap()[0], t);
    assert_eq!(Device::Native.backend().unwrap().name(), "native");
}

#[test]
fn every_element_type_round_trips_through_device_buffers() {
    use half::bf16;
    let xla = xla_cpu();
    let tensors = vec![
        f32t(&[2, 3], &[1.0, -0.0, f32::INFINITY, f32::NAN, 1e-40, 3.5]),
        Tensor::from_vec(&[2], vec![f64::MIN_POSITIVE, -1.25]).unwrap(),
        Tensor::from_vec(
            &[3],
            vec![bf16::from_f32(1.5), bf16::MIN, bf16::NEG_INFINITY],
        )
        .unwrap(),
        Tensor::from_vec(&[2, 1], vec![i32::MIN, i32::MAX]).unwrap(),
        Tensor::from_vec(&[1], vec![i64::MIN]).unwrap(),
        Tensor::from_vec(&[4], vec![true, false, false, true]).unwrap(),
        Tensor::scalar(7i32),
        Tensor::scalar(true),
        Tensor::from_vec::<f32>(&[0], vec![]).unwrap(),
        Tensor::from_vec::<bool>(&[2, 0, 3], vec![]).unwrap(),
    ];
    for t in &tensors {
        let back = xla.download(&xla.upload(t).unwrap()).unwrap();
        assert_eq!(back.ty(), t.ty());
        // Compare bits, so NaN and -0.0 count.
        assert_eq!(format!("{back:?}"), format!("{t:?}"), "{}", t.ty());
    }
    // A transposed (non-standard layout) array goes up in logical order.
    let a = ndarray::Array2::from_shape_vec((2, 3), vec![1f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let t = Tensor::from(a.reversed_axes().into_dyn());
    let back = xla.download(&xla.upload(&t).unwrap()).unwrap();
    assert_eq!(
        back.to_vec::<f32>().unwrap(),
        vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );

    // Programs over empty tensors compile and run too.
    let mut g = Graph::new("empty");
    let x = g.parameter(TensorType::new(DType::F32, [0, 4]));
    let s = g.sum(x, &[0]).unwrap();
    g.set_outputs(vec![x, s]).unwrap();
    let out = xla
        .run(&g, &[Tensor::from_vec::<f32>(&[0, 4], vec![]).unwrap()])
        .unwrap();
    assert_eq!(out[1], f32t(&[4], &[0.0; 4]));

    // Wrong arguments are refused before the plugin sees them.
    let mut exe = xla.compile(&g, &CompileOptions::default()).unwrap();
    let mut wrong = vec![xla.upload(&f32t(&[4], &[0.0; 4])).unwrap()];
    assert!(matches!(
        exe.execute(&mut wrong),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        exe.execute(&mut []),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn unusual_output_lists_compile_and_run() {
    let xla = xla_cpu();
    let native = NativeBackend::new();
    let mut g = Graph::new("outputs");
    let w = g.parameter(TensorType::new(DType::F32, [2]));
    let d = g.add(w, w).unwrap();
    // The old w, the new w (an update of w), the same value twice.
    g.set_outputs(vec![w, d, d]).unwrap();
    let opts = CompileOptions {
        updates: vec![(1, 0)],
    };
    for b in [&xla as &dyn Backend, &native] {
        let mut exe = b.compile(&g, &opts).unwrap();
        let mut args = vec![b.upload(&f32t(&[2], &[1.0, -3.0])).unwrap()];
        for step in 1..=3 {
            let out = exe.execute(&mut args).unwrap();
            let old = 2f32.powi(step - 1);
            let new = 2f32.powi(step);
            assert_eq!(b.download(&out[0]).unwrap(), f32t(&[2], &[old, -3.0 * old]));
            assert_eq!(b.download(&out[1]).unwrap(), f32t(&[2], &[new, -3.0 * new]));
            assert_eq!(
                b.download(&args[0]).unwrap(),
                f32t(&[2], &[new, -3.0 * new])
            );
        }
    }

    let mut none = Graph::new("no outputs");
    none.parameter(TensorType::scalar(DType::F32));
    none.set_outputs(vec![]).unwrap();
    assert!(xla.run(&none, &[Tensor::scalar(1f32)]).unwrap().is_empty());
}

#[test]
fn f32_vectors_read_into_a_slice_on_both_backends() {
    let t = f32t(&[3], &[1.5, -2.0, 7.25]);
    let backends: [Box<dyn Backend>; 2] = [Box::new(NativeBackend::new()), Box::new(xla_cpu())];
    for b in &backends {
        let buf = b.upload(&t).unwrap();
        let mut out = [0f32; 3];
        b.read_f32_into(&buf, &mut out).unwrap();
        assert_eq!(out, [1.5, -2.0, 7.25]);
        // A slice of the wrong length, or a buffer that is not an f32 vector, is refused.
        let short = b.read_f32_into(&buf, &mut [0f32; 2]);
        assert!(
            matches!(&short, Err(Error::InvalidArgument { .. })),
            "{short:?}"
        );
        let matrix = b.upload(&f32t(&[1, 3], &[0.0; 3])).unwrap();
        let r = b.read_f32_into(&matrix, &mut out);
        assert!(matches!(&r, Err(Error::InvalidArgument { .. })), "{r:?}");
        let ints = b
            .upload(&Tensor::from_vec(&[3], vec![1i32, 2, 3]).unwrap())
            .unwrap();
        let r = b.read_f32_into(&ints, &mut out);
        assert!(matches!(&r, Err(Error::InvalidArgument { .. })), "{r:?}");
    }
}
