//! The next call's rows of an inline [`Groups`](super::Groups) iterator, fetched into
//! cache by the native crew's idle workers while the caller runs the current call.
//!
//! Gathering a batch's rows from a shuffled data set is bound by memory latency (32 rows of
//! 784 floats from a 31 MB set took ~15 µs on one core, a tenth of a batch-32 step), and
//! during a step the crew's worker waits between the kernels it shares (~35% of the step on
//! the tutorial model). So when `next_into` has made call `i`'s batches, it hands the rows
//! of call `i + 1` to the crew as a side job of prefetches, one row per piece, which the
//! worker issues between kernels; the gather of call `i + 1` then reads cached lines
//! (a call's batches are gathered at once: a fetch started between two of them would only
//! be abandoned). Prefetching
//! and not copying: a copy waits on memory, and a worker busy with a row when a kernel's
//! tasks are dealt lets the other core steal its share, which moves the first layer's data
//! off its core (measured in one pair of runs: copying the rows this way made the time
//! inside the steps 76% longer).

use super::Dataset;
use crate::kernel::crew;
use crate::Tensor;
use std::sync::Arc;

/// What the pieces fetch: row `rows[k]` of each source (addresses, so the plan can be
/// read from the crew's threads).
struct Plan {
    rows: Vec<usize>,
    /// `(source, bytes per row)` for the features, the targets and the sample weights
    /// (0 bytes when there are none).
    sources: [(usize, usize); 3],
}

/// One piece of the side job: a prefetch of each cache line of one sample's data.
fn fetch_row(ctx: usize, k: usize) {
    // SAFETY: `ctx` is the plan of a live `Lookahead`, which finishes its side job before
    // the plan changes or goes (see `Lookahead::start`).
    let plan = unsafe { &*(ctx as *const Plan) };
    let Some(&i) = plan.rows.get(k) else { return };
    for &(src, row) in &plan.sources {
        for line in (0..row).step_by(64) {
            let address = src + i * row + line;
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the address lies inside a source the plan's owner holds (a prefetch
            // never faults, and reads nothing the program sees).
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(address as *const i8);
            }
            // Elsewhere the gather simply reads from memory.
            #[cfg(not(target_arch = "x86_64"))]
            let _ = address;
        }
    }
}

/// A data set's features, targets and sample weights, kept alive.
struct Held {
    _x: Arc<Tensor>,
    _y: Arc<Tensor>,
    _w: Option<Arc<Vec<f32>>>,
}

/// The next batch's rows on their way into cache (see the module's comment).
pub struct Lookahead {
    plan: Box<Plan>,
    /// The sources the side job reads, held until it is finished.
    held: Option<Held>,
    side: Option<crew::Side>,
}

/// A contiguous tensor's first byte and its bytes per sample.
fn rows_of(t: &Tensor, n: usize) -> Option<(usize, usize)> {
    crate::with_tensor!(t, a => a
        .as_slice()
        .map(|s| (s.as_ptr() as usize, std::mem::size_of_val(s) / n.max(1))))
}

impl Lookahead {
    /// Room for batches of `batch` samples, allocated with the epoch's order; a call of
    /// several batches (`data::Groups`) grows it once, at the epoch's first call, before
    /// that call's steps run.
    pub(super) fn new(batch: usize) -> Lookahead {
        Lookahead {
            plan: Box::new(Plan {
                rows: Vec::with_capacity(batch),
                sources: [(0, 0); 3],
            }),
            held: None,
            side: None,
        }
    }

    /// Starts fetching the samples `rows` of `ds` on the crew, where that can run beside
    /// the caller (a crew of two or more threads, contiguous data); otherwise does nothing.
    pub(super) fn start(&mut self, ds: &Dataset, rows: &[usize]) {
        self.finish();
        let n = ds.len();
        if crew::width() < 2 || n == 0 || rows.iter().any(|&r| r >= n) {
            return;
        }
        let (Some(x), Some(y)) = (rows_of(&ds.x, n), rows_of(&ds.y, n)) else {
            return;
        };
        let w = match &ds.sample_weight {
            Some(w) if w.len() == n => (w.as_ptr() as usize, 4),
            _ => (0, 0),
        };
        self.plan.rows.clear();
        self.plan.rows.extend_from_slice(rows);
        self.plan.sources = [x, y, w];
        self.held = Some(Held {
            _x: ds.x.clone(),
            _y: ds.y.clone(),
            _w: ds.sample_weight.clone(),
        });
        let job = crew::SideJob {
            ctx: &*self.plan as *const Plan as usize,
            f: fetch_row,
            pieces: rows.len(),
        };
        // SAFETY: `fetch_row` only issues prefetches, inside the sources held in `held`;
        // the plan (boxed) stays as it is until `finish` returns, which `start` and `Drop`
        // call first.
        self.side = Some(unsafe { crew::side(job) });
    }

    /// Drops what the workers have not fetched (the gather is about to read it anyway),
    /// and waits for what they are fetching.
    pub(super) fn finish(&mut self) {
        if let Some(side) = self.side.take() {
            side.abandon();
        }
        self.held = None;
    }
}

impl Drop for Lookahead {
    fn drop(&mut self) {
        // Before the plan the side job reads is freed.
        self.finish();
    }
}
