//! Measures the XLA backend: compile time (cold and from the persistent cache),
//! per-execute overhead of a tiny program, and an MLP training step (784-128-64-10, SGD,
//! state updated in place) on XLA CPU next to the native backend.
//!
//!     scripts/install-xla-plugin && cargo run --release -p strata-runtime --example xla_timings

use std::time::{Duration, Instant};
use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::pjrt::{CacheDir, PjrtBackend, PjrtOptions};
use strata_runtime::backend::{Backend, CompileOptions, Device};
use strata_runtime::ir::{DType, Graph, TensorType};
use strata_runtime::{Result, Tensor};

/// One SGD step of a 784-128-64-10 ReLU network with softmax cross-entropy: outputs the
/// loss, then the six updated parameters, each updating its parameter in place.
fn train_step(batch: usize) -> Result<(Graph, CompileOptions)> {
    let mut g = Graph::new(format!("mlp_step_b{batch}"));
    let sizes = [784, 128, 64, 10];
    let mut params = Vec::new();
    for l in 0..3 {
        params.push(g.parameter(TensorType::new(DType::F32, [sizes[l], sizes[l + 1]])));
        params.push(g.parameter(TensorType::new(DType::F32, [sizes[l + 1]])));
    }
    let x = g.parameter(TensorType::new(DType::F32, [batch, 784]));
    let y = g.parameter(TensorType::new(DType::I32, [batch]));
    let lr = g.parameter(TensorType::scalar(DType::F32));
    let mut h = x;
    for l in 0..3 {
        h = g.matmul(h, params[2 * l])?;
        h = g.add(h, params[2 * l + 1])?;
        if l < 2 {
            let zero = g.zeros_like(h)?;
            h = g.max(h, zero)?;
        }
    }
    let e = g.exp(h)?;
    let s = g.sum(e, &[1])?;
    let lse = g.log(s)?;
    let picked = g.gather(h, y, 1, 1)?;
    let per = g.sub(lse, picked)?;
    let loss = g.mean(per, &[0])?;
    g.set_outputs(vec![loss])?;
    let mut g = strata_runtime::autodiff::grad(&g, loss, &params)?;
    let grads = g.outputs()[1..].to_vec();
    let mut outs = vec![loss];
    for (&p, &d) in params.iter().zip(&grads) {
        let step = g.mul(d, lr)?;
        outs.push(g.sub(p, step)?);
    }
    g.set_outputs(outs)?;
    let updates = (0..6).map(|k| (k + 1, k)).collect();
    Ok((g, CompileOptions { updates }))
}

fn inputs(g: &Graph, batch: usize) -> Result<Vec<Tensor>> {
    let mut v = Vec::new();
    for (i, ty) in g.param_types().iter().enumerate() {
        v.push(match ty.dtype {
            DType::I32 => Tensor::from(strata_runtime::random::uniform_int(
                ty.dims(),
                0,
                10,
                i as u64,
            )?),
            _ if ty.rank() == 0 => Tensor::scalar(0.01f32),
            _ => Tensor::from(strata_runtime::random::uniform(
                ty.dims(),
                -0.05,
                0.05,
                i as u64,
            )?),
        });
    }
    let _ = batch;
    Ok(v)
}

fn per_step(
    b: &dyn Backend,
    g: &Graph,
    opts: &CompileOptions,
    batch: usize,
    steps: u32,
) -> Result<Duration> {
    let mut exe = b.compile(g, opts)?;
    let mut args = inputs(g, batch)?
        .iter()
        .map(|t| b.upload(t))
        .collect::<Result<Vec<_>>>()?;
    for _ in 0..3 {
        exe.execute(&mut args)?;
    }
    let t = Instant::now();
    for _ in 0..steps {
        exe.execute(&mut args)?;
    }
    Ok(t.elapsed() / steps)
}

fn main() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("strata-xla-timings-{}", std::process::id()));
    let cached = |d: &std::path::Path| PjrtOptions {
        cache: CacheDir::At(d.to_path_buf()),
        ..PjrtOptions::default()
    };
    let device = Device::XlaCpu { devices: Some(1) };
    let t = Instant::now();
    let xla = PjrtBackend::with_options(&device, cached(&dir))?;
    println!(
        "plugin load + client: {:?} ({})",
        t.elapsed(),
        xla.plugin_path().display()
    );

    let (g, opts) = train_step(32)?;
    let t = Instant::now();
    xla.compile(&g, &opts)?;
    println!("compile MLP train step, cold:        {:?}", t.elapsed());
    let t = Instant::now();
    let text = strata_runtime::backend::pjrt::stablehlo_text(&g, &opts)?;
    println!(
        "  of which StableHLO printing:        {:?} ({} lines)",
        t.elapsed(),
        text.lines().count()
    );
    let again = PjrtBackend::with_options(&device, cached(&dir))?;
    let t = Instant::now();
    again.compile(&g, &opts)?;
    println!(
        "compile MLP train step, cache hit:   {:?} ({:?})",
        t.elapsed(),
        again.cache_stats()
    );

    // A tiny program: the per-execute cost of the whole path (checks, FFI, await).
    let mut tiny = Graph::new("tiny");
    let x = tiny.parameter(TensorType::new(DType::F32, [1]));
    let y = tiny.add_scalar(x, 1.0)?;
    tiny.set_outputs(vec![y])?;
    let upd = CompileOptions {
        updates: vec![(0, 0)],
    };
    let mut exe = xla.compile(&tiny, &upd)?;
    let mut args = vec![xla.upload(&Tensor::from_vec(&[1], vec![0f32])?)?];
    for _ in 0..100 {
        exe.execute(&mut args)?;
    }
    let n = 20_000;
    let t = Instant::now();
    for _ in 0..n {
        exe.execute(&mut args)?;
    }
    println!("execute, tiny program (in place):    {:?}", t.elapsed() / n);
    let t = Instant::now();
    for _ in 0..2000 {
        xla.download(&args[0])?;
    }
    println!(
        "download f32[1]:                     {:?}",
        t.elapsed() / 2000
    );
    let batch = Tensor::from(strata_runtime::random::uniform(&[32, 784], 0.0, 1.0, 1)?);
    let t = Instant::now();
    for _ in 0..1000 {
        xla.upload(&batch)?;
    }
    println!(
        "upload f32[32, 784]:                 {:?}",
        t.elapsed() / 1000
    );

    let native = NativeBackend::new();
    for &b in &[32usize, 1024] {
        let (g, opts) = train_step(b)?;
        let steps = if b == 32 { 300 } else { 30 };
        let x = per_step(&xla, &g, &opts, b, steps)?;
        let n = per_step(&native, &g, &opts, b, steps)?;
        println!("MLP SGD step, batch {b:4}:  xla-cpu {x:?}   native {n:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}
