//! Allocations per steady-state training step on the native backend (counted with a
//! global allocator that tallies every allocation).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use strata_runtime::loss::{CategoricalCrossentropy, SparseCategoricalCrossentropy};
use strata_runtime::metrics::{Accuracy, F1Score, Metric, TruePositives};
use strata_runtime::nn::{Activation, Dense, Sequential};
use strata_runtime::optim::Adam;
use strata_runtime::train::{Callback, Control, Fit, Logs};
use strata_runtime::Model;
use strata_runtime::{random, Result};

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations between consecutive batch ends, per epoch: an epoch's first interval
/// would include the epoch's own set-up, so each epoch starts a new list.
#[derive(Clone, Default)]
struct PerStep(Arc<Mutex<(usize, Vec<Vec<usize>>)>>);

impl Callback for PerStep {
    fn on_epoch_begin(&mut self, _e: usize, _c: &mut Control<'_>) -> Result<()> {
        let mut g = self.0.lock().unwrap();
        g.1.push(Vec::with_capacity(64));
        g.0 = ALLOCS.load(Ordering::Relaxed);
        Ok(())
    }

    fn on_batch_end(&mut self, _s: usize, _l: &Logs, _c: &mut Control<'_>) -> Result<()> {
        let now = ALLOCS.load(Ordering::Relaxed);
        let mut g = self.0.lock().unwrap();
        let d = now - g.0;
        if let Some(epoch) = g.1.last_mut() {
            epoch.push(d);
        }
        g.0 = ALLOCS.load(Ordering::Relaxed);
        Ok(())
    }
}

/// The counter is process-wide: the tests here run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Trains the tutorial's model on `samples` random samples at batch 32 and returns the
/// allocations of each step, per epoch (a step's count runs from the previous batch end,
/// so an epoch's first step also carries the epoch's set-up). With `vectors`, one-hot
/// targets and metrics whose results are vectors (read into the logs every step).
fn per_step_allocations(samples: usize, epochs: usize, vectors: bool) -> Vec<Vec<usize>> {
    let x = random::normal(&[samples, 784], 0.0, 1.0, 1).unwrap();
    let labels = random::uniform_int(&[samples], 0, 10, 2).unwrap();
    let mut m = Model::new(Sequential::new(
        Some(vec![784]),
        vec![
            Box::new(Dense::new("dense", 128, Activation::Relu)),
            Box::new(Dense::new("dense_1", 64, Activation::Relu)),
            Box::new(Dense::new("dense_2", 10, Activation::Softmax)),
        ],
    ));
    let probe = PerStep::default();
    let fit = Fit::epochs(epochs).verbose(0).callback(probe.clone());
    if vectors {
        let mut y = ndarray::Array2::<f32>::zeros((samples, 10));
        for (i, &l) in labels.iter().enumerate() {
            y[[i, l as usize]] = 1.0;
        }
        let metrics: Vec<Box<dyn Metric>> = vec![
            Box::new(Accuracy),
            Box::new(F1Score::new()),
            Box::new(TruePositives::new(vec![0.3, 0.5, 0.7])),
        ];
        m.compile(Adam::default(), CategoricalCrossentropy::default(), metrics)
            .unwrap();
        m.fit(&x, &y, fit).unwrap();
    } else {
        m.compile(
            Adam::default(),
            SparseCategoricalCrossentropy::default(),
            [Accuracy],
        )
        .unwrap();
        m.fit(&x, &labels, fit).unwrap();
    }
    let counts = probe.0.lock().unwrap().1.clone();
    eprintln!("allocations per step, per epoch: {counts:?}");
    counts
}

#[test]
fn a_steady_state_step_allocates_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let counts = per_step_allocations(640, 2, false);
    assert_eq!(counts.len(), 2);
    assert_eq!(counts[1].len(), 20);
    // The first steps compile and warm buffers; the second epoch's steps after its first
    // must not allocate.
    let steady = &counts[1][1..];
    assert!(
        steady.iter().all(|&c| c == 0),
        "steady-state steps allocated: {steady:?}"
    );
}

#[test]
fn the_partial_last_batch_reuses_its_buffers() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 20 batches of 32 and one of 10: each epoch switches shapes for its last step and
    // back for the next epoch's first. Once both shapes have run, neither allocates.
    let counts = per_step_allocations(650, 3, false);
    assert_eq!(counts.len(), 3);
    for (e, epoch) in counts.iter().enumerate().skip(1) {
        assert_eq!(epoch.len(), 21);
        let steps = &epoch[1..];
        assert!(
            steps.iter().all(|&c| c == 0),
            "epoch {e}: steps allocated {steps:?}"
        );
    }
}

#[test]
fn vector_metrics_are_read_without_allocating() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // F1 per class and counts per threshold come back into the logs after every step
    // (the probe is not async-safe), into the vectors the first read made.
    let counts = per_step_allocations(640, 2, true);
    let steady = &counts[1][1..];
    assert!(
        steady.iter().all(|&c| c == 0),
        "steady-state steps allocated: {steady:?}"
    );
}

/// A while loop's iterations allocate nothing: an execution of 1000 iterations allocates
/// no more than one of 10 (none, once warm), with a matrix product and fused elementwise
/// kernels in the body and a body that returns a parameter as it came.
#[test]
fn while_loop_iterations_allocate_nothing() {
    use strata_runtime::backend::native::NativeBackend;
    use strata_runtime::backend::{Backend, CompileOptions};
    use strata_runtime::ir::{Comparison, DType, DotDims, Graph, TensorType, Value};
    use strata_runtime::Tensor;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let i = TensorType::scalar(DType::I32);
    let m = TensorType::new(DType::F32, [8, 8]);
    let ts = [i.clone(), i, m.clone(), m];
    let region = |name: &str, f: &dyn Fn(&mut Graph, &[Value]) -> Vec<Value>| {
        let mut g = Graph::new(name);
        let p: Vec<Value> = ts.iter().map(|t| g.parameter(t.clone())).collect();
        let outs = f(&mut g, &p);
        g.set_outputs(outs).unwrap();
        g
    };
    // (i, n, acc, w): while i < n { acc = tanh(acc . w) * 0.5 + acc; i += 1 }
    let cond = region("cond", &|g, p| {
        vec![g.compare(Comparison::Lt, p[0], p[1]).unwrap()]
    });
    let body = region("body", &|g, p| {
        let one = g.scalar(1.0, DType::I32);
        let d = g.dot_general(p[2], p[3], DotDims::matmul()).unwrap();
        let t = g.tanh(d).unwrap();
        let h = g.mul_scalar(t, 0.5).unwrap();
        vec![
            g.add(p[0], one).unwrap(),
            p[1],
            g.add(h, p[2]).unwrap(),
            p[3],
        ]
    });
    let mut g = Graph::new("loop");
    let init: Vec<Value> = ts.iter().map(|t| g.parameter(t.clone())).collect();
    let w = g.while_loop(&init, cond, body).unwrap();
    g.set_outputs(vec![w[0], w[2]]).unwrap();

    let backend = NativeBackend::new();
    let mut exe = backend.compile(&g, &CompileOptions::default()).unwrap();
    let args = |n: i32| {
        let acc = random::normal(&[8, 8], 0.0, 0.1, 3).unwrap();
        let w = random::normal(&[8, 8], 0.0, 0.1, 4).unwrap();
        [
            Tensor::from_vec(&[], vec![0i32]).unwrap(),
            Tensor::from_vec(&[], vec![n]).unwrap(),
            Tensor::from(acc),
            Tensor::from(w),
        ]
        .iter()
        .map(|t| backend.upload(t).unwrap())
        .collect::<Vec<_>>()
    };
    let (mut short, mut long) = (args(10), args(1000));
    let mut outputs = Vec::new();
    // Warms the output buffers, and each worker's GEMM packing buffer (the `gemm` crate
    // allocates one per thread the first time that thread multiplies, whichever
    // iteration that is).
    exe.execute_into(&mut short, &mut outputs).unwrap();
    exe.execute_into(&mut long, &mut outputs).unwrap();
    let mut count = |a: &mut Vec<_>| {
        let before = ALLOCS.load(Ordering::Relaxed);
        exe.execute_into(a, &mut outputs).unwrap();
        ALLOCS.load(Ordering::Relaxed) - before
    };
    // The count is process-wide, so the test harness's own thread (printing another
    // test's result) can land in a window: the fewest over a few tries is the loop's. A
    // loop that allocated per iteration would show it in every try.
    let (a10, a1000) = (0..5)
        .map(|_| (count(&mut short), count(&mut long)))
        .min()
        .unwrap_or_default();
    let steps = backend.download(&outputs[0]).unwrap();
    assert_eq!(steps, Tensor::from_vec(&[], vec![1000i32]).unwrap());
    assert_eq!(
        (a10, a1000),
        (0, 0),
        "allocations in a run of 10 and of 1000 iterations"
    );
}

/// Reverse mode through a scan allocates nothing per iteration either: the gradient of a
/// tanh recurrence (its weight carried) over 1000 rows allocates no more than over 10, in
/// the forward loop (which stacks its residuals) and in the backward loop.
#[test]
fn scan_gradient_iterations_allocate_nothing() {
    use strata_runtime::autodiff;
    use strata_runtime::backend::native::NativeBackend;
    use strata_runtime::backend::{Backend, CompileOptions};
    use strata_runtime::ir::{DType, Graph, TensorType};
    use strata_runtime::Tensor;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let m = TensorType::new(DType::F32, [8, 8]);
    let mut step = Graph::new("cell");
    let h = step.parameter(m.clone());
    let w = step.parameter(m.clone());
    let x = step.parameter(m.clone());
    let hw = step.matmul(h, w).unwrap();
    let pre = step.add(hw, x).unwrap();
    let next = step.tanh(pre).unwrap();
    step.set_outputs(vec![next, w, next]).unwrap();
    let backend = NativeBackend::new();
    let count = |rows: usize| {
        let mut g = Graph::new("rnn");
        let h0 = g.parameter(m.clone());
        let w0 = g.parameter(m.clone());
        let xs = g.parameter(TensorType::new(DType::F32, [rows, 8, 8]));
        let (c, ys) = g.scan(&[h0, w0], &[xs], &step).unwrap();
        let a = g.sum_all(c[0]).unwrap();
        let b = g.sum_all(ys[0]).unwrap();
        let loss = g.add(a, b).unwrap();
        g.set_outputs(vec![loss]).unwrap();
        let grad = autodiff::grad(&g, loss, &[h0, w0, xs]).unwrap();
        let mut exe = backend.compile(&grad, &CompileOptions::default()).unwrap();
        let mut args: Vec<_> = [
            Tensor::from(random::normal(&[8, 8], 0.0, 0.1, 3).unwrap()),
            Tensor::from(random::normal(&[8, 8], 0.0, 0.1, 4).unwrap()),
            Tensor::from(random::normal(&[rows, 8, 8], 0.0, 0.1, 5).unwrap()),
        ]
        .iter()
        .map(|t| backend.upload(t).unwrap())
        .collect();
        let mut outputs = Vec::new();
        exe.execute_into(&mut args, &mut outputs).unwrap();
        exe.execute_into(&mut args, &mut outputs).unwrap();
        (0..5)
            .map(|_| {
                let before = ALLOCS.load(Ordering::Relaxed);
                exe.execute_into(&mut args, &mut outputs).unwrap();
                ALLOCS.load(Ordering::Relaxed) - before
            })
            .min()
            .unwrap_or_default()
    };
    let (a10, a1000) = (count(10), count(1000));
    assert_eq!(
        (a10, a1000),
        (0, 0),
        "allocations in a gradient through a scan of 10 and of 1000 rows"
    );
}

/// A scan's forward loop allocates nothing per iteration: a tanh recurrence stacking its
/// outputs over 1000 rows allocates no more than over 10 (none, once warm), with its
/// weight and its stacked input carried unchanged and its stacked output written a row at
/// a time.
#[test]
fn scan_with_stacked_outputs_iterations_allocate_nothing() {
    use strata_runtime::backend::native::NativeBackend;
    use strata_runtime::backend::{Backend, CompileOptions};
    use strata_runtime::ir::{DType, Graph, TensorType};
    use strata_runtime::Tensor;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let m = TensorType::new(DType::F32, [8, 8]);
    let mut step = Graph::new("cell");
    let h = step.parameter(m.clone());
    let w = step.parameter(m.clone());
    let x = step.parameter(m.clone());
    let hw = step.matmul(h, w).unwrap();
    let pre = step.add(hw, x).unwrap();
    let next = step.tanh(pre).unwrap();
    let doubled = step.mul_scalar(next, 2.0).unwrap();
    step.set_outputs(vec![next, w, next, doubled]).unwrap();
    let backend = NativeBackend::new();
    let count = |rows: usize| {
        let mut g = Graph::new("rnn");
        let h0 = g.parameter(m.clone());
        let w0 = g.parameter(m.clone());
        let xs = g.parameter(TensorType::new(DType::F32, [rows, 8, 8]));
        let (c, ys) = g.scan(&[h0, w0], &[xs], &step).unwrap();
        g.set_outputs(vec![c[0], ys[0], ys[1]]).unwrap();
        let mut exe = backend.compile(&g, &CompileOptions::default()).unwrap();
        let mut args: Vec<_> = [
            Tensor::from(random::normal(&[8, 8], 0.0, 0.1, 3).unwrap()),
            Tensor::from(random::normal(&[8, 8], 0.0, 0.1, 4).unwrap()),
            Tensor::from(random::normal(&[rows, 8, 8], 0.0, 0.1, 5).unwrap()),
        ]
        .iter()
        .map(|t| backend.upload(t).unwrap())
        .collect();
        let mut outputs = Vec::new();
        exe.execute_into(&mut args, &mut outputs).unwrap();
        exe.execute_into(&mut args, &mut outputs).unwrap();
        (0..5)
            .map(|_| {
                let before = ALLOCS.load(Ordering::Relaxed);
                exe.execute_into(&mut args, &mut outputs).unwrap();
                ALLOCS.load(Ordering::Relaxed) - before
            })
            .min()
            .unwrap_or_default()
    };
    let (a10, a1000) = (count(10), count(1000));
    assert_eq!(
        (a10, a1000),
        (0, 0),
        "allocations in a scan stacking its outputs over 10 and over 1000 rows"
    );
}
