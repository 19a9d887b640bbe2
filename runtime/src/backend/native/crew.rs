//! A small crew of worker threads for splitting one kernel across the machine's cores.
//!
//! A training step at small batch is a sequence of kernels that each take tens of
//! microseconds, so handing part of one to another core must cost well under a
//! microsecond. A general pool puts idle workers to sleep, and waking one costs a futex
//! round trip (we measured rayon spending more time in `sched_yield` and wake-ups than in
//! the kernels). Here a worker that has just finished spins for a while waiting for the
//! next job, which in a training loop arrives within microseconds, and parks when nothing
//! has come for a while.
//!
//! Tasks are claimed, not assigned: the posting thread claims tasks too, so a worker that
//! is descheduled (a busy machine) delays nothing it has not started; the poster simply
//! runs the whole job itself. When that keeps happening, the poster stops posting for a
//! while and runs jobs alone, so an oversubscribed machine does not pay for hand-offs that
//! never help.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;

/// Spin iterations before a waiting worker parks (roughly a hundred microseconds: jobs
/// within a training step come faster, and a busy machine loses little to the spinning).
const SPIN: u32 = 1 << 12;
/// Spin iterations before the poster, waiting for claimed tasks, yields its core.
const WAIT_SPIN: u32 = 1 << 12;

type Task<'a> = dyn Fn(usize) + Sync + 'a;

/// A job's task function, its lifetime erased. It is only called by whoever claims a task
/// of the job's generation, and the poster waits for every claimed task to finish before
/// the borrow ends.
#[derive(Clone, Copy)]
struct JobPtr(*const Task<'static>);
// SAFETY: the pointee is `Sync`; see the type's comment for its lifetime.
unsafe impl Send for JobPtr {}

struct Job {
    generation: u64,
    ptr: JobPtr,
    tasks: usize,
}

struct Shared {
    /// `generation << 32 | next task index`: claiming a task is one compare-and-swap, and
    /// a claim for a finished generation always fails.
    ticket: AtomicU64,
    /// Tasks of the current generation that have finished.
    completed: AtomicUsize,
    job: Mutex<Option<Job>>,
    /// The generation workers wait for.
    posted: AtomicU64,
    panicked: AtomicBool,
}

struct Worker {
    sleeping: AtomicBool,
    thread: OnceLock<Thread>,
}

/// The poster's bookkeeping, behind the `busy` lock.
struct Posting {
    generation: u64,
    /// Consecutive jobs the workers took no task of.
    unhelped: u32,
    /// Jobs still to run alone before trying the workers again.
    alone: u32,
}

/// After this many consecutive jobs without help, run alone for `ALONE` jobs.
const UNHELPED_LIMIT: u32 = 8;
const ALONE: u32 = 512;

struct Crew {
    shared: Arc<Shared>,
    workers: Vec<Arc<Worker>>,
    /// Held while a job is out: a second thread runs its tasks itself.
    busy: Mutex<Posting>,
}

thread_local! {
    /// Whether this thread is one of the crew (a task that splits again runs serially).
    static IN_CREW: Cell<bool> = const { Cell::new(false) };
}

fn threads_wanted() -> usize {
    if let Some(n) = std::env::var("STRATA_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        return n.max(1);
    }
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn crew() -> &'static Crew {
    static CREW: OnceLock<Crew> = OnceLock::new();
    CREW.get_or_init(|| {
        let shared = Arc::new(Shared {
            ticket: AtomicU64::new(0),
            completed: AtomicUsize::new(0),
            job: Mutex::new(None),
            posted: AtomicU64::new(0),
            panicked: AtomicBool::new(false),
        });
        let mut workers = Vec::new();
        for i in 1..threads_wanted() {
            let w = Arc::new(Worker {
                sleeping: AtomicBool::new(false),
                thread: OnceLock::new(),
            });
            let (w2, s2) = (w.clone(), shared.clone());
            match std::thread::Builder::new()
                .name(format!("strata-crew-{i}"))
                .spawn(move || work(&w2, &s2))
            {
                Ok(h) => {
                    let _ = w.thread.set(h.thread().clone());
                    workers.push(w);
                }
                // Fewer workers is slower, never wrong.
                Err(_) => break,
            }
        }
        Crew {
            shared,
            workers,
            busy: Mutex::new(Posting {
                generation: 0,
                unhelped: 0,
                alone: 0,
            }),
        }
    })
}

/// Claims and runs tasks of `generation` until none are left; returns how many it ran.
fn claim_and_run(s: &Shared, generation: u64, ptr: JobPtr, tasks: usize) -> usize {
    let mut ran = 0;
    loop {
        let t = s.ticket.load(Ordering::Acquire);
        let index = (t & 0xFFFF_FFFF) as usize;
        if t >> 32 != generation || index >= tasks {
            return ran;
        }
        if s.ticket
            .compare_exchange_weak(t, t + 1, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        // SAFETY: the claim succeeded for the live generation, so the poster is still
        // waiting for this task and the function's borrows are alive.
        let f: &Task<'_> = unsafe { &*ptr.0 };
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(index))).is_err() {
            s.panicked.store(true, Ordering::Release);
        }
        s.completed.fetch_add(1, Ordering::AcqRel);
        ran += 1;
    }
}

fn work(w: &Worker, s: &Shared) {
    IN_CREW.with(|c| c.set(true));
    let mut seen = 0u64;
    loop {
        let mut spins = 0u32;
        loop {
            let p = s.posted.load(Ordering::Acquire);
            if p != seen {
                seen = p;
                break;
            }
            if spins < SPIN {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            // Announce the sleep, then look again so a post in between is not missed.
            w.sleeping.store(true, Ordering::SeqCst);
            if s.posted.load(Ordering::SeqCst) == seen {
                std::thread::park();
            }
            w.sleeping.store(false, Ordering::SeqCst);
            spins = 0;
        }
        let job = s
            .job
            .lock()
            .ok()
            .and_then(|j| j.as_ref().map(|j| (j.generation, j.ptr, j.tasks)));
        if let Some((generation, ptr, tasks)) = job {
            let _ = claim_and_run(s, generation, ptr, tasks);
        }
    }
}

/// Wakes parked workers, so they are spinning by the time the next job comes (called
/// when an execution starts: its first big kernel then finds them ready).
pub(crate) fn wake() {
    if IN_CREW.with(|c| c.get()) {
        return;
    }
    for w in &crew().workers {
        // Unparked with no new job, the worker just spins again for a while.
        if w.sleeping.load(Ordering::SeqCst) {
            if let Some(t) = w.thread.get() {
                t.unpark();
            }
        }
    }
}

/// Runs `f` with this thread's kernels kept on it, as inside a crew task: for a thread
/// that is itself one of several replicas filling the cores (`replicated`), where the
/// crew's threads would only compete with the other replicas for them.
pub(crate) fn serial<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            IN_CREW.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(IN_CREW.with(|c| c.replace(true)));
    f()
}

/// How many tasks [`run`] can run at once from this thread (1 inside a crew task).
pub(crate) fn width() -> usize {
    if IN_CREW.with(|c| c.get()) {
        1
    } else {
        crew().workers.len() + 1
    }
}

/// Runs `f(start, chunk)` over `tasks` contiguous, disjoint chunks of `data` (each a
/// multiple of `align` long but the last; `start` is the chunk's offset), spread as
/// [`run`] spreads tasks.
pub(crate) fn run_chunks<T: Send>(
    data: &mut [T],
    tasks: usize,
    align: usize,
    f: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    let len = data.len();
    let align = align.max(1);
    let per = len.div_ceil(tasks.max(1)).div_ceil(align) * align;
    // An address, not a pointer, so the closure may be shared between threads.
    let base = data.as_mut_ptr() as usize;
    run(tasks, &|t| {
        let (lo, hi) = ((t * per).min(len), ((t + 1) * per).min(len));
        if lo < hi {
            // SAFETY: tasks take disjoint ranges of `data`, which stays mutably borrowed
            // (unused by anyone else) until `run` returns with every task done.
            let chunk =
                unsafe { std::slice::from_raw_parts_mut((base as *mut T).add(lo), hi - lo) };
            f(lo, chunk);
        }
    });
}

/// Runs `task(0)`, …, `task(tasks - 1)`, spread over the calling thread and the crew, and
/// returns when all are done.
pub(crate) fn run(tasks: usize, task: &(dyn Fn(usize) + Sync)) {
    let crew = crew();
    let guard = if IN_CREW.with(|c| c.get()) || tasks < 2 || crew.workers.is_empty() {
        None
    } else {
        crew.busy.try_lock().ok()
    };
    let serial = |task: &(dyn Fn(usize) + Sync)| {
        for i in 0..tasks {
            task(i);
        }
    };
    let Some(mut posting) = guard else {
        return serial(task);
    };
    if posting.alone > 0 {
        posting.alone -= 1;
        return serial(task);
    }
    posting.generation += 1;
    let generation_id = posting.generation;
    let s = &crew.shared;
    // SAFETY (of the erasure): see `JobPtr`; this function returns only after every
    // claimed task of this generation has completed, and later claims fail.
    let ptr = JobPtr(unsafe { std::mem::transmute::<*const Task<'_>, *const Task<'static>>(task) });
    s.completed.store(0, Ordering::Release);
    if let Ok(mut j) = s.job.lock() {
        *j = Some(Job {
            generation: generation_id,
            ptr,
            tasks,
        });
    }
    s.ticket.store(generation_id << 32, Ordering::Release);
    s.posted.store(generation_id, Ordering::SeqCst);
    for w in &crew.workers {
        if w.sleeping.load(Ordering::SeqCst) {
            if let Some(t) = w.thread.get() {
                t.unpark();
            }
        }
    }
    let mine = claim_and_run(s, generation_id, ptr, tasks);
    if mine == tasks {
        posting.unhelped += 1;
        if posting.unhelped >= UNHELPED_LIMIT {
            posting.unhelped = 0;
            posting.alone = ALONE;
        }
    } else {
        posting.unhelped = 0;
    }
    let mut spins = 0u32;
    while s.completed.load(Ordering::Acquire) < tasks {
        if spins < WAIT_SPIN {
            spins += 1;
            std::hint::spin_loop();
        } else {
            // A claimed task's worker may share this core with us: let it run.
            std::thread::yield_now();
        }
    }
    if let Ok(mut j) = s.job.lock() {
        *j = None;
    }
    if s.panicked.swap(false, Ordering::AcqRel) {
        panic!("a crew task panicked");
    }
}
