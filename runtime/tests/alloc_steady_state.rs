//! Allocations per steady-state training step on the native backend (counted with a
//! global allocator that tallies every allocation).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use strata_runtime::loss::SparseCategoricalCrossentropy;
use strata_runtime::metrics::Accuracy;
use strata_runtime::nn::{Activation, Dense, Model, Sequential};
use strata_runtime::optim::Adam;
use strata_runtime::train::{Callback, Control, Fit, Logs};
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

/// Allocations between consecutive batch ends.
#[derive(Clone, Default)]
struct PerStep(Arc<Mutex<(usize, Vec<usize>)>>);

impl Callback for PerStep {
    fn on_batch_end(&mut self, _s: usize, _l: &Logs, _c: &mut Control<'_>) -> Result<()> {
        let now = ALLOCS.load(Ordering::Relaxed);
        let mut g = self.0.lock().unwrap();
        let d = now - g.0;
        g.1.push(d);
        g.0 = ALLOCS.load(Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn a_steady_state_step_allocates_nothing() {
    let x = random::normal(&[640, 784], 0.0, 1.0, 1).unwrap();
    let y = random::uniform_int(&[640], 0, 10, 2).unwrap();
    let mut m = Model::new(Sequential::new(
        Some(vec![784]),
        vec![
            Box::new(Dense::new("dense", 128, Activation::Relu)),
            Box::new(Dense::new("dense_1", 64, Activation::Relu)),
            Box::new(Dense::new("dense_2", 10, Activation::Softmax)),
        ],
    ));
    m.compile(
        Adam::default(),
        SparseCategoricalCrossentropy::default(),
        [Accuracy],
    )
    .unwrap();
    let probe = PerStep::default();
    m.fit(&x, &y, Fit::epochs(2).verbose(0).callback(probe.clone()))
        .unwrap();
    let counts = probe.0.lock().unwrap().1.clone();
    // The first steps compile and warm buffers; the rest must not allocate.
    let steady = &counts[counts.len() / 2 + 1..];
    eprintln!("allocations per step: {counts:?}");
    assert!(
        steady.iter().all(|&c| c == 0),
        "steady-state steps allocated: {steady:?}"
    );
}
