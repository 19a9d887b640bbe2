//! One measured configuration, run in its own process (`strata-bench one ...` for the
//! seed workload, `strata-bench cnn-one ...` for the convnet, `strata-bench bncnn-one ...`
//! for the batch-normalized convnet, `strata-bench rnn-one ...` for the LSTM): the
//! workload's model and
//! data, a cold `fit` through the public API, and what each epoch cost. The process
//! boundary makes peak RSS, thread pools and the allocator's state belong to this
//! configuration alone, as each peer runs in its own process too.

use crate::alloc;
use crate::sys;
use ndarray::{ArrayD, Axis, IxDyn};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use strata::backend::pjrt::{CacheDir, PjrtBackend, PjrtOptions};
use strata::backend::{Backend, Buffer, CompileOptions, Device, Executable};
use strata::ir::{Graph, TensorType};
use strata::loss::SparseCategoricalCrossentropy;
use strata::metrics::Accuracy;
use strata::optim::Adam;
use strata::train::{Callback, Control, Fit, Logs};
use strata::{model, Result, Tensor};

/// The tutorial's data: 10,000 samples of 784 standard-normal features, labels 0..10.
pub const SAMPLES: usize = 10_000;
pub const FEATURES: usize = 784;
pub const CLASSES: i32 = 10;
pub const EPOCHS: usize = 5;

/// Fashion-MNIST's training set: the most `--train-size` can ask for.
pub const MNIST_TRAIN: usize = 60_000;

/// Steps in one epoch of `samples` (the partial last batch is a step too, as in Keras).
pub fn steps_per_epoch(samples: usize, batch: usize) -> usize {
    samples.div_ceil(batch)
}

/// What is trained: the seed tutorial's MLP on random data, or a network on the first
/// `train_size` images of Fashion-MNIST.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Workload {
    Seed,
    /// `data`: an MNIST-format directory (Debian's Fashion-MNIST by default).
    Mnist {
        net: Net,
        train_size: usize,
        data: PathBuf,
    },
}

/// The networks trained on Fashion-MNIST.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Net {
    /// Keras' "simple MNIST convnet", each image `(28, 28, 1)`.
    Cnn,
    /// The same convnet with each convolution's bias replaced by `BatchNormalization` before
    /// its ReLU (the usual Conv → BN → ReLU block), each image `(28, 28, 1)`.
    BnCnn,
    /// `LSTM(128)` then `Dense(10, softmax)`, each image read row by row: 28 steps of 28
    /// pixels (`examples/lstm_fashion_mnist.rs`).
    Rnn,
}

impl Net {
    /// The command's name (`cnn`, `rnn`), also the workload's in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Net::Cnn => "cnn",
            Net::BnCnn => "bncnn",
            Net::Rnn => "rnn",
        }
    }

    /// Training FLOPs per example of the products that dominate the step (2·MACs each):
    /// the convolutions' (see `conv::step_flop`; both convnets have the same convolution
    /// shapes, and batch normalization's few FLOPs per element are left out, as the
    /// pooling's are), or the LSTM's input and recurrent
    /// products, forward and both gradients (3× the forward's 28 × 2·(28 + 128)·512),
    /// with the dense layer's.
    pub fn flop_per_example(self) -> f64 {
        match self {
            Net::Cnn | Net::BnCnn => crate::conv::step_flop(1),
            Net::Rnn => 3.0 * (28.0 * 2.0 * (28.0 + 128.0) * 512.0 + 2.0 * 128.0 * 10.0),
        }
    }

    /// Whether the step's products are `conv::shapes`' convolutions, so the convolution line
    /// (each of them timed alone) describes this network's step.
    pub fn convolutional(self) -> bool {
        match self {
            Net::Cnn | Net::BnCnn => true,
            Net::Rnn => false,
        }
    }

    /// One example's shape.
    pub fn image_dims(self) -> &'static [usize] {
        match self {
            Net::Cnn | Net::BnCnn => &[28, 28, 1],
            Net::Rnn => &[28, 28],
        }
    }
}

/// A backend as `Model::set_backend` takes it.
pub(crate) type Shared = Arc<dyn Backend + Send + Sync>;

/// What the harness asks one child to measure.
pub struct Config {
    pub device: Device,
    pub batch: usize,
    /// The XLA compilation cache directory (fresh and empty: the fit compiles cold).
    pub cache_dir: Option<PathBuf>,
    pub steps_per_execution: usize,
    /// 5, as the tutorial; more only to give a profiler a longer steady state.
    pub epochs: usize,
    pub workload: Workload,
}

/// Counters kept by [`Timed`]: how long compiles and executes took, and what executes
/// allocated.
#[derive(Default)]
struct Stats {
    compiles: AtomicU64,
    compile_ns: AtomicU64,
    executes: AtomicU64,
    execute_ns: AtomicU64,
    execute_allocs: AtomicU64,
}

#[derive(Clone, Copy, Default)]
struct StatsSnap {
    compiles: u64,
    compile_ns: u64,
    executes: u64,
    execute_ns: u64,
    execute_allocs: u64,
}

impl Stats {
    fn snap(&self) -> StatsSnap {
        StatsSnap {
            compiles: self.compiles.load(Ordering::Relaxed),
            compile_ns: self.compile_ns.load(Ordering::Relaxed),
            executes: self.executes.load(Ordering::Relaxed),
            execute_ns: self.execute_ns.load(Ordering::Relaxed),
            execute_allocs: self.execute_allocs.load(Ordering::Relaxed),
        }
    }
}

impl StatsSnap {
    fn since(self, e: StatsSnap) -> StatsSnap {
        StatsSnap {
            compiles: self.compiles - e.compiles,
            compile_ns: self.compile_ns - e.compile_ns,
            executes: self.executes - e.executes,
            execute_ns: self.execute_ns - e.execute_ns,
            execute_allocs: self.execute_allocs - e.execute_allocs,
        }
    }
}

/// The model's backend, wrapped to time `compile` directly (rather than inferring it from
/// the first epoch) and to split a step into the backend's `execute` and the fit loop
/// around it. The wrapper adds two clock reads per call, well under a microsecond.
struct Timed {
    inner: Shared,
    stats: Arc<Stats>,
}

struct TimedExe {
    inner: Box<dyn Executable>,
    stats: Arc<Stats>,
}

impl Executable for TimedExe {
    fn param_types(&self) -> &[TensorType] {
        self.inner.param_types()
    }
    fn output_types(&self) -> &[TensorType] {
        self.inner.output_types()
    }
    fn execute(&mut self, args: &mut [Buffer]) -> Result<Vec<Buffer>> {
        let mut outputs = Vec::new();
        self.execute_into(args, &mut outputs)?;
        Ok(outputs)
    }
    // The fit loop calls this one (reusing its output buffers): forward it, or the
    // default would reallocate the outputs and the counts would be the wrapper's.
    fn execute_into(&mut self, args: &mut [Buffer], outputs: &mut Vec<Buffer>) -> Result<()> {
        let a = alloc::Snapshot::now();
        let t = Instant::now();
        let r = self.inner.execute_into(args, outputs);
        let ns = t.elapsed().as_nanos() as u64;
        let allocs = alloc::Snapshot::now().since(a).allocs;
        self.stats.executes.fetch_add(1, Ordering::Relaxed);
        self.stats.execute_ns.fetch_add(ns, Ordering::Relaxed);
        self.stats
            .execute_allocs
            .fetch_add(allocs, Ordering::Relaxed);
        r
    }
}

impl Backend for Timed {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn compile(&self, graph: &Graph, options: &CompileOptions) -> Result<Box<dyn Executable>> {
        let t = Instant::now();
        let inner = self.inner.compile(graph, options)?;
        let ns = t.elapsed().as_nanos() as u64;
        self.stats.compiles.fetch_add(1, Ordering::Relaxed);
        self.stats.compile_ns.fetch_add(ns, Ordering::Relaxed);
        Ok(Box::new(TimedExe {
            inner,
            stats: self.stats.clone(),
        }))
    }
    fn upload(&self, t: &Tensor) -> Result<Buffer> {
        self.inner.upload(t)
    }
    fn upload_into(&self, t: &Tensor, b: &mut Buffer) -> Result<()> {
        self.inner.upload_into(t, b)
    }
    fn upload_taking(&self, t: &mut Tensor, b: &mut Buffer) -> Result<()> {
        self.inner.upload_taking(t, b)
    }
    fn download(&self, b: &Buffer) -> Result<Tensor> {
        self.inner.download(b)
    }
    fn read_scalar(&self, b: &Buffer) -> Result<f64> {
        self.inner.read_scalar(b)
    }
    fn read_f32_into(&self, b: &Buffer, out: &mut [f32]) -> Result<()> {
        self.inner.read_f32_into(b, out)
    }
}

/// One epoch as the probe saw it.
#[derive(Clone, Copy, Default)]
struct Epoch {
    secs: f64,
    /// Everything the epoch allocated, its set-up (shuffle order, progress, logs) included.
    allocs: u64,
    /// What the steps allocated: counted from one batch's end to the next, so each
    /// interval is exactly one call's work (next batch, upload, execute, logs, callbacks).
    step_allocs: u64,
    step_bytes: u64,
    /// The steps those intervals cover (an epoch's first call has no interval before it).
    steps_counted: u64,
    minor_faults: u64,
    backend: StatsSnap,
}

/// A callback that timestamps each epoch and reads the counters at its edges. It runs
/// where Keras' callbacks run (the peers time epochs the same way).
struct Probe {
    stats: Arc<Stats>,
    epochs: Arc<Mutex<Vec<Epoch>>>,
    at: Option<(Instant, alloc::Snapshot, u64, StatsSnap)>,
    /// The last batch end this epoch (its step index and the counters then), and the
    /// step allocations summed so far.
    last_batch: Option<(usize, alloc::Snapshot)>,
    steps: alloc::Snapshot,
    steps_counted: u64,
}

impl Callback for Probe {
    fn on_epoch_begin(&mut self, _epoch: usize, _c: &mut Control<'_>) -> Result<()> {
        // Reading /proc allocates: do it before the allocation snapshot, and read the clock
        // last, so the probe's own work stays outside the epoch it measures.
        let faults = sys::minor_faults();
        let stats = self.stats.snap();
        self.last_batch = None;
        self.steps = alloc::Snapshot::default();
        self.steps_counted = 0;
        let allocs = alloc::Snapshot::now();
        self.at = Some((Instant::now(), allocs, faults, stats));
        Ok(())
    }

    fn on_batch_end(&mut self, step: usize, _logs: &Logs, _c: &mut Control<'_>) -> Result<()> {
        // Atomic loads only: the probe itself allocates nothing here.
        let now = alloc::Snapshot::now();
        if let Some((prev, at)) = self.last_batch {
            let d = now.since(at);
            self.steps.allocs += d.allocs;
            self.steps.bytes += d.bytes;
            self.steps_counted += step.saturating_sub(prev) as u64;
        }
        self.last_batch = Some((step, now));
        Ok(())
    }

    /// Batch ends are only the probe's allocation marks: measuring must not make `fit`
    /// wait for the device after every call.
    fn async_safe(&self) -> bool {
        true
    }

    fn on_epoch_end(&mut self, _epoch: usize, _logs: &Logs, _c: &mut Control<'_>) -> Result<()> {
        // The mirror image of `on_epoch_begin`: clock first, /proc last.
        let secs_end = Instant::now();
        let a = alloc::Snapshot::now();
        let s = self.stats.snap();
        let f = sys::minor_faults();
        if let Some((t0, a0, f0, s0)) = self.at.take() {
            let d = a.since(a0);
            if let Ok(mut v) = self.epochs.lock() {
                v.push(Epoch {
                    secs: (secs_end - t0).as_secs_f64(),
                    allocs: d.allocs,
                    minor_faults: f - f0,
                    step_allocs: self.steps.allocs,
                    step_bytes: self.steps.bytes,
                    steps_counted: self.steps_counted,
                    backend: s.since(s0),
                });
            }
        }
        Ok(())
    }
}

pub(crate) fn backend_for(cfg: &Config) -> Result<(Shared, Option<Arc<PjrtBackend>>)> {
    match cfg.device {
        Device::Native => Ok((
            Arc::new(strata::backend::native::NativeBackend::new()),
            None,
        )),
        d => {
            let cache = match &cfg.cache_dir {
                Some(dir) => CacheDir::At(dir.clone()),
                None => CacheDir::Disabled,
            };
            let b = Arc::new(PjrtBackend::with_options(
                &d,
                PjrtOptions {
                    cache,
                    ..PjrtOptions::default()
                },
            )?);
            Ok((b.clone(), Some(b)))
        }
    }
}

/// `m` compiled as the tutorial compiles its MLP (Adam, sparse categorical cross-entropy,
/// accuracy), on `backend`, `spe` steps per execution.
fn compiled<A: strata::nn::Architecture>(
    mut m: strata::Model<A>,
    backend: Shared,
    spe: usize,
) -> Result<strata::Model<A>> {
    m.compile(
        Adam::default(),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )?;
    m.set_steps_per_execution(spe)?;
    m.set_backend(backend);
    Ok(m)
}

/// The tutorial's model, compiled as the tutorial compiles it.
pub(crate) fn tutorial_model(
    backend: Shared,
    spe: usize,
) -> Result<strata::Model<impl strata::nn::Architecture>> {
    let m = model![
        Input(784),
        Dense(128, relu),
        Dense(64, relu),
        Dense(10, softmax)
    ];
    compiled(m, backend, spe)
}

/// Keras' "simple MNIST convnet" (keras.io/examples/vision/mnist_convnet), compiled as the
/// tutorial compiles its MLP.
pub(crate) fn cnn_model(
    backend: Shared,
    spe: usize,
) -> Result<strata::Model<impl strata::nn::Architecture>> {
    let m = model![
        Input((28, 28, 1)),
        Conv2D(32, 3, activation = relu),
        MaxPooling2D(2),
        Conv2D(64, 3, activation = relu),
        MaxPooling2D(2),
        Flatten(),
        Dropout(0.5),
        Dense(10, softmax)
    ];
    compiled(m, backend, spe)
}

/// The convnet above with batch normalization: each convolution without its bias (the
/// normalization's `beta` takes its place), then `BatchNormalization` with Keras'
/// defaults, then the ReLU; compiled as the tutorial compiles its MLP.
pub(crate) fn bncnn_model(
    backend: Shared,
    spe: usize,
) -> Result<strata::Model<impl strata::nn::Architecture>> {
    let m = model![
        Input((28, 28, 1)),
        Conv2D(32, 3, use_bias = false),
        BatchNormalization(),
        Activation(relu),
        MaxPooling2D(2),
        Conv2D(64, 3, use_bias = false),
        BatchNormalization(),
        Activation(relu),
        MaxPooling2D(2),
        Flatten(),
        Dropout(0.5),
        Dense(10, softmax)
    ];
    compiled(m, backend, spe)
}

/// The LSTM of `examples/lstm_fashion_mnist.rs`, compiled as the tutorial compiles its MLP.
pub(crate) fn rnn_model(
    backend: Shared,
    spe: usize,
) -> Result<strata::Model<impl strata::nn::Architecture>> {
    let m = model![Input((28, 28)), LSTM(128), Dense(10, softmax)];
    compiled(m, backend, spe)
}

/// The first `n` training images of the MNIST-format directory `dir` (Fashion-MNIST) as
/// `(n, ..dims)` in [0, 1] (`dims` holds 784 pixels: `[28, 28, 1]`, `[28, 28]`), and their
/// labels.
pub fn fashion_mnist(
    dir: &std::path::Path,
    n: usize,
    dims: &[usize],
) -> Result<(ArrayD<f32>, ArrayD<i32>)> {
    // The test split is dropped at once and the images are reshaped in place when all are
    // used: the peak RSS the workload reports is then the fit's, not this loader's copies.
    let strata::data::Mnist {
        x_train, y_train, ..
    } = strata::data::load_mnist(dir)?;
    let have = x_train.shape()[0];
    if n == 0 || n > have {
        return Err(strata::Error::InvalidArgument {
            what: "fashion-mnist workload".into(),
            message: format!("train size must be in 1..={have}, got {n}"),
        });
    }
    let bad = |e: ndarray::ShapeError| strata::Error::InvalidArgument {
        what: "fashion-mnist workload".into(),
        message: format!("images: {e}"),
    };
    let shape: Vec<usize> = std::iter::once(n).chain(dims.iter().copied()).collect();
    let x = if n == have {
        x_train.into_shape_with_order(IxDyn(&shape)).map_err(bad)?
    } else {
        x_train
            .slice_axis(Axis(0), (0..n).into())
            .to_shape(IxDyn(&shape))
            .map_err(bad)?
            .to_owned()
    };
    let y = y_train.slice(ndarray::s![..n]).to_owned().into_dyn();
    Ok((x, y))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Measures one configuration; the result is one JSON object (see `report` for the
/// fields' meaning).
pub fn run(cfg: &Config) -> Result<Value> {
    let spe = cfg.steps_per_execution;
    let t = Instant::now();
    match &cfg.workload {
        Workload::Seed => {
            let x = strata::random::normal(&[SAMPLES, FEATURES], 0.0, 1.0, 0)?.into_dyn();
            let y = strata::random::uniform_int(&[SAMPLES], 0, CLASSES, 1)?.into_dyn();
            let data_s = t.elapsed().as_secs_f64();
            measure(cfg, x, y, data_s, |b| tutorial_model(b, spe))
        }
        Workload::Mnist {
            net,
            train_size,
            data,
        } => {
            let (x, y) = fashion_mnist(data, *train_size, net.image_dims())?;
            let data_s = t.elapsed().as_secs_f64();
            match net {
                Net::Cnn => measure(cfg, x, y, data_s, |b| cnn_model(b, spe)),
                Net::BnCnn => measure(cfg, x, y, data_s, |b| bncnn_model(b, spe)),
                Net::Rnn => measure(cfg, x, y, data_s, |b| rnn_model(b, spe)),
            }
        }
    }
}

/// The measurement itself, for any model: a cold fit with the probe, then (XLA) the same
/// compiles answered by the persistent cache.
fn measure<A: strata::nn::Architecture>(
    cfg: &Config,
    x: ArrayD<f32>,
    y: ArrayD<i32>,
    data_s: f64,
    build: impl Fn(Shared) -> Result<strata::Model<A>>,
) -> Result<Value> {
    let samples = x.shape()[0];
    let t = Instant::now();
    let (inner, pjrt) = backend_for(cfg)?;
    let backend_init_s = t.elapsed().as_secs_f64();
    let stats = Arc::new(Stats::default());
    let timed: Shared = Arc::new(Timed {
        inner: inner.clone(),
        stats: stats.clone(),
    });

    let mut m = build(timed.clone())?;
    let epochs = Arc::new(Mutex::new(Vec::new()));
    let probe = Probe {
        stats: stats.clone(),
        epochs: epochs.clone(),
        at: None,
        last_batch: None,
        steps: alloc::Snapshot::default(),
        steps_counted: 0,
    };
    // The cache-hit measurement below fits one full and one partial batch: taken now,
    // so `x` itself can be moved into the fit (a borrowed array is copied once by `fit`,
    // which would count in the peak RSS reported as the fit's).
    let rem = samples % cfg.batch;
    let n = (cfg.batch + rem).min(samples);
    let small = pjrt.as_ref().map(|_| {
        (
            x.slice_axis(ndarray::Axis(0), (0..n).into()).to_owned(),
            y.slice_axis(ndarray::Axis(0), (0..n).into()).to_owned(),
        )
    });
    let before = stats.snap();
    let t = Instant::now();
    let history = m.fit(
        x,
        &y,
        Fit::epochs(cfg.epochs)
            .batch_size(cfg.batch)
            .verbose(0)
            .callback(probe),
    )?;
    let fit_s = t.elapsed().as_secs_f64();
    let during_fit = stats.snap().since(before);
    // Read now, before the cache-hit measurement below adds anything.
    let peak_rss_mib = sys::peak_rss_mib();
    let epochs: Vec<Epoch> = epochs.lock().map(|v| v.clone()).unwrap_or_default();

    // The compile again, now answered by the persistent cache the fit just filled: a new
    // model fitted for one epoch on exactly one full and one partial batch needs the same
    // two graphs (full batch and remainder) as the fit above.
    let mut cached = Value::Null;
    if let (Some(p), Some((xs, ys))) = (&pjrt, small) {
        let hits_before = p.cache_stats().hits;
        let mut m2 = build(timed.clone())?;
        let s0 = stats.snap();
        m2.fit(
            &xs,
            &ys,
            Fit::epochs(1)
                .batch_size(cfg.batch)
                .verbose(0)
                .shuffle(false),
        )?;
        let d = stats.snap().since(s0);
        cached = json!({
            "compile_s": d.compile_ns as f64 * 1e-9,
            "compiles": d.compiles,
            "cache_hits": p.cache_stats().hits - hits_before,
        });
    }

    let steps = steps_per_epoch(samples, cfg.batch);
    let steady = epochs.get(1..).unwrap_or(&[]);
    let mut steady_s: Vec<f64> = steady.iter().map(|e| e.secs).collect();
    let steady_steps = (steps * steady.len()).max(1) as f64;
    let sum = |f: fn(&Epoch) -> u64| steady.iter().map(f).sum::<u64>() as f64;
    let first = epochs.first().copied().unwrap_or_default();
    let last = |k: &str| history.get(k).and_then(|v| v.last().copied());
    let steady_median = median(&mut steady_s);
    let per_step = sum(|e| e.step_allocs) / sum(|e| e.steps_counted).max(1.0);
    Ok(json!({
        "backend": cfg.device.to_string(),
        "workload": match cfg.workload {
            Workload::Seed => "seed",
            Workload::Mnist { net, .. } => net.name(),
        },
        "samples": samples,
        "batch": cfg.batch,
        "steps_per_execution": cfg.steps_per_execution,
        "steps_per_epoch": steps,
        "epoch_s": epochs.iter().map(|e| e.secs).collect::<Vec<_>>(),
        // Of each epoch, the time inside the backend's `execute` (the rest is the fit
        // loop: batching, uploads, reading the logs back, callbacks).
        "epoch_execute_s": epochs
            .iter()
            .map(|e| e.backend.execute_ns as f64 * 1e-9)
            .collect::<Vec<_>>(),
        "fit_s": fit_s,
        "backend_init_s": backend_init_s,
        "data_s": data_s,
        "compile_s": during_fit.compile_ns as f64 * 1e-9,
        "compiles": during_fit.compiles,
        "compile_cached": cached,
        // What epoch 1 took beyond a steady epoch: compiles, building the train graph,
        // first-touch page faults, thread-pool start.
        "first_epoch_extra_s": first.secs - steady_median,
        // Allocations per steady-state step, measured between batch ends; what an epoch
        // allocates beyond that rate times its steps (its set-up) is reported per epoch.
        // (The probe is async-safe, so batch ends come now and then, not after every
        // call: the steps before the first one are counted at the measured rate.)
        "allocs_per_step": per_step,
        "alloc_bytes_per_step": sum(|e| e.step_bytes) / sum(|e| e.steps_counted).max(1.0),
        "epoch_allocs": steady
            .iter()
            .map(|e| (e.allocs as f64 - per_step * steps as f64).max(0.0))
            .sum::<f64>()
            / (steady.len().max(1) as f64),
        "execute_allocs_per_step": sum(|e| e.backend.execute_allocs) / steady_steps,
        "minor_faults_per_step": sum(|e| e.minor_faults) / steady_steps,
        "executes_per_epoch": steady.first().map(|e| e.backend.executes),
        "peak_rss_mib": peak_rss_mib,
        "loss": last("loss"),
        "accuracy": last("accuracy"),
    }))
}
