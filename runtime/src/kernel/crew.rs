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
//! Tasks are dealt, then stolen: thread `h` of `w` owns the contiguous run of tasks
//! `h·tasks/w ..` and claims those first, front to back, so the same part of every
//! job lands on the same core step after step. Kernels split their data with [`part`], so
//! a layer's weights, their gradient and the optimizer's moments stay in the cache of the
//! core that owns that share: with tasks claimed first-come, each core read about half of
//! what the other had just written, and on these virtual machines cross-core traffic is
//! sometimes several times slower than usual (measured: a batch-32 step ran 3× slower for
//! seconds at a time with two threads, never with one). A thread that has finished its own
//! tasks steals others' from the back, so a worker that is descheduled (a busy machine)
//! delays nothing it has not started; the poster simply runs the whole job itself. When
//! that keeps happening, the poster stops posting for a while and runs jobs alone, so an
//! oversubscribed machine does not pay for hand-offs that never help.

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
}

/// Most tasks one job may have (a home's ends are 16-bit).
const MAX_TASKS: usize = u16::MAX as usize;

struct Shared {
    /// Per thread (the poster is 0): `generation << 32 | front << 16 | back`, the tasks of
    /// its home not yet claimed. Claiming one is one compare-and-swap (the owner takes the
    /// front, a thief the back), and a claim for a finished generation always fails.
    homes: Vec<AtomicU64>,
    /// Tasks of the current generation that have finished.
    completed: AtomicUsize,
    /// The side job (see [`side`]) and its generation.
    side_job: Mutex<Option<(u64, SideJob)>>,
    /// `generation << 32 | next piece` of the side job; generation 0 is none.
    side_ticket: AtomicU64,
    /// Pieces of the current side job, and how many have finished.
    side_pieces: AtomicUsize,
    side_done: AtomicUsize,
    side_panicked: AtomicBool,
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
    /// Set while a side job is out; a second one runs in full when it is finished.
    side_busy: AtomicBool,
    /// The last side job's generation.
    side_generation: AtomicU64,
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
        let threads = threads_wanted();
        let shared = Arc::new(Shared {
            homes: (0..threads).map(|_| AtomicU64::new(0)).collect(),
            completed: AtomicUsize::new(0),
            side_job: Mutex::new(None),
            side_ticket: AtomicU64::new(0),
            side_pieces: AtomicUsize::new(0),
            side_done: AtomicUsize::new(0),
            side_panicked: AtomicBool::new(false),
            job: Mutex::new(None),
            posted: AtomicU64::new(0),
            panicked: AtomicBool::new(false),
        });
        let mut workers = Vec::new();
        for i in 1..threads {
            let w = Arc::new(Worker {
                sleeping: AtomicBool::new(false),
                thread: OnceLock::new(),
            });
            let (w2, s2) = (w.clone(), shared.clone());
            match std::thread::Builder::new()
                .name(format!("strata-crew-{i}"))
                .spawn(move || work(&w2, &s2, i))
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
            side_busy: AtomicBool::new(false),
            side_generation: AtomicU64::new(0),
        }
    })
}

/// Claims a task of `generation` for thread `me`: the front of its own home, else the
/// back of another's.
fn claim(s: &Shared, generation: u64, me: usize) -> Option<usize> {
    let homes = s.homes.len();
    for offset in 0..homes {
        let home = &s.homes[(me + offset) % homes];
        let mut word = home.load(Ordering::Acquire);
        loop {
            let (front, back) = ((word >> 16) & 0xFFFF, word & 0xFFFF);
            if word >> 32 != generation & 0xFFFF_FFFF || front >= back {
                break;
            }
            let (next, task) = if offset == 0 {
                (word + (1 << 16), front)
            } else {
                (word - 1, back - 1)
            };
            match home.compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(task as usize),
                Err(now) => word = now,
            }
        }
    }
    None
}

/// Claims and runs tasks of `generation` until none are left; returns how many it ran.
fn claim_and_run(s: &Shared, generation: u64, ptr: JobPtr, me: usize) -> usize {
    let mut ran = 0;
    while let Some(index) = claim(s, generation, me) {
        // SAFETY: the claim succeeded for the live generation, so the poster is still
        // waiting for this task and the function's borrows are alive.
        let f: &Task<'_> = unsafe { &*ptr.0 };
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(index))).is_err() {
            s.panicked.store(true, Ordering::Release);
        }
        s.completed.fetch_add(1, Ordering::AcqRel);
        ran += 1;
    }
    ran
}

fn work(w: &Worker, s: &Shared, me: usize) {
    IN_CREW.with(|c| c.set(true));
    // A worker may take its first task of some kernel many steps into training (tasks go
    // to whoever claims them first): its scratch space is made whole now instead.
    super::sgemm::reserve_panels();
    super::real::reserve_regs();
    let mut seen = 0u64;
    loop {
        let mut spins = 0u32;
        loop {
            let p = s.posted.load(Ordering::Acquire);
            if p != seen {
                seen = p;
                break;
            }
            // Between jobs, a piece of the side job, if there is one (side work does not
            // prolong the spinning: a worker spins only after jobs).
            if let Some((job, piece)) = side_claim(s) {
                let run = std::panic::AssertUnwindSafe(|| (job.f)(job.ctx, piece));
                if std::panic::catch_unwind(run).is_err() {
                    s.side_panicked.store(true, Ordering::Release);
                }
                s.side_done.fetch_add(1, Ordering::AcqRel);
                continue;
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
            .and_then(|j| j.as_ref().map(|j| (j.generation, j.ptr)));
        if let Some((generation, ptr)) = job {
            let _ = claim_and_run(s, generation, ptr, me);
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

/// Work for the crew's idle workers: `f(ctx, piece)` for `piece` in `0..pieces`, each
/// short (a piece is taken between jobs, so a job never waits long for a worker).
#[derive(Clone, Copy)]
pub(crate) struct SideJob {
    pub ctx: usize,
    pub f: fn(usize, usize),
    pub pieces: usize,
}

/// Claims a piece of the current side job, if any is left.
fn side_claim(s: &Shared) -> Option<(SideJob, usize)> {
    let word = s.side_ticket.load(Ordering::Acquire);
    let (generation, next) = (word >> 32, (word & 0xFFFF_FFFF) as usize);
    // Checked before taking the lock: idle workers look here on every spin.
    if generation == 0 || next >= s.side_pieces.load(Ordering::Acquire) {
        return None;
    }
    let job = s
        .side_job
        .lock()
        .ok()
        .and_then(|j| j.filter(|&(g, _)| g == generation).map(|(_, job)| job))?;
    if next >= job.pieces {
        return None;
    }
    s.side_ticket
        .compare_exchange(word, word + 1, Ordering::AcqRel, Ordering::Acquire)
        .ok()
        .map(|_| (job, next))
}

/// A side job handed to the crew; [`Side::finish`] (or dropping it) runs what the
/// workers have not taken and waits for what they have; [`Side::abandon`] only waits.
pub(crate) struct Side {
    /// Whether the workers were given the job (this handle then holds `side_busy`).
    given: bool,
    job: SideJob,
    finished: bool,
}

/// Hands `job` to the crew's idle workers, to be run while this thread does other work,
/// and returns at once. Only workers already awake take pieces (waking a parked one would
/// have it spin beside whatever else is using the cores, another backend's threads say);
/// with no workers awake, or another side job out, the pieces all run in
/// [`Side::finish`], or not at all with [`Side::abandon`].
///
/// # Safety
/// `job.f(job.ctx, piece)` must be safe to call from any thread, for each piece once and
/// concurrently with the caller's work, until the handle is finished, abandoned or
/// dropped (whatever `ctx` points to must stay alive and untouched by the caller until
/// then).
pub(crate) unsafe fn side(job: SideJob) -> Side {
    let crew = crew();
    let given = !IN_CREW.with(|c| c.get())
        && job.pieces > 0
        && job.pieces <= u32::MAX as usize
        && !crew.workers.is_empty()
        && crew
            .side_busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
    if given {
        // Generations are 32-bit and never 0.
        let generation = crew.side_generation.fetch_add(1, Ordering::Relaxed) % 0xFFFF_FFFF + 1;
        let s = &crew.shared;
        s.side_done.store(0, Ordering::Release);
        s.side_pieces.store(job.pieces, Ordering::Release);
        if let Ok(mut j) = s.side_job.lock() {
            *j = Some((generation, job));
        }
        s.side_ticket.store(generation << 32, Ordering::Release);
    }
    Side {
        given,
        job,
        finished: false,
    }
}

impl Side {
    /// Runs the pieces no worker has taken, and returns when every piece is done.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn finish(mut self) {
        self.complete(true);
    }

    /// Drops the pieces no worker has taken (for work that only helps, a prefetch), and
    /// returns when the pieces under way are done.
    pub(crate) fn abandon(mut self) {
        self.complete(false);
    }

    fn complete(&mut self, run_rest: bool) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        if !self.given {
            if run_rest {
                for piece in 0..self.job.pieces {
                    (self.job.f)(self.job.ctx, piece);
                }
            }
            return;
        }
        let crew = crew();
        let s = &crew.shared;
        while let Some((job, piece)) = side_claim(s) {
            if run_rest {
                (job.f)(job.ctx, piece);
            }
            s.side_done.fetch_add(1, Ordering::AcqRel);
        }
        let mut spins = 0u32;
        while s.side_done.load(Ordering::Acquire) < self.job.pieces {
            if spins < WAIT_SPIN {
                spins += 1;
                std::hint::spin_loop();
            } else {
                // A worker running a piece may share this core with us: let it run.
                std::thread::yield_now();
            }
        }
        s.side_ticket.store(0, Ordering::Release);
        if let Ok(mut j) = s.side_job.lock() {
            *j = None;
        }
        crew.side_busy.store(false, Ordering::Release);
        if s.side_panicked.swap(false, Ordering::AcqRel) {
            panic!("a piece of a side job panicked on a crew worker");
        }
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        self.complete(true);
    }
}

/// Task `t`'s share of `units` split `tasks` ways: shares differ by at most one unit, and
/// since threads own contiguous runs of tasks, kernels that split the same extent this way
/// give each core the same part of it whatever their task counts (a multiple of the
/// crew's width apart).
pub(crate) fn part(units: usize, tasks: usize, t: usize) -> std::ops::Range<usize> {
    let tasks = tasks.max(1);
    t * units / tasks..(t + 1) * units / tasks
}

/// Runs `f(start, chunk)` over `tasks` contiguous, disjoint chunks of `data` (each a
/// multiple of `align` long but the last; `start` is the chunk's offset), split by
/// [`part`] and spread as [`run`] spreads tasks.
pub(crate) fn run_chunks<T: Send>(
    data: &mut [T],
    tasks: usize,
    align: usize,
    f: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    let len = data.len();
    let align = align.max(1);
    let units = len.div_ceil(align);
    // An address, not a pointer, so the closure may be shared between threads.
    let base = data.as_mut_ptr() as usize;
    run(tasks, &|t| {
        let r = part(units, tasks, t);
        let (lo, hi) = ((r.start * align).min(len), (r.end * align).min(len));
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
    let guard = if IN_CREW.with(|c| c.get())
        || !(2..=MAX_TASKS).contains(&tasks)
        || crew.workers.is_empty()
    {
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
        });
    }
    let threads = s.homes.len();
    for (h, home) in s.homes.iter().enumerate() {
        let (front, back) = (h * tasks / threads, (h + 1) * tasks / threads);
        let word = (generation_id & 0xFFFF_FFFF) << 32 | (front as u64) << 16 | back as u64;
        home.store(word, Ordering::Release);
    }
    s.posted.store(generation_id, Ordering::SeqCst);
    for w in &crew.workers {
        if w.sleeping.load(Ordering::SeqCst) {
            if let Some(t) = w.thread.get() {
                t.unpark();
            }
        }
    }
    let mine = claim_and_run(s, generation_id, ptr, 0);
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

#[cfg(test)]
mod tests {
    use super::{part, run, run_chunks, side, SideJob};
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn count_piece(ctx: usize, k: usize) {
        // SAFETY: the tests pass a live `Vec<AtomicUsize>` with a slot per piece.
        let hits = unsafe { &*(ctx as *const Vec<AtomicUsize>) };
        hits[k].fetch_add(1, Ordering::Relaxed);
    }

    fn job(hits: &Vec<AtomicUsize>) -> SideJob {
        SideJob {
            ctx: hits as *const Vec<AtomicUsize> as usize,
            f: count_piece,
            pieces: hits.len(),
        }
    }

    #[test]
    fn side_pieces_run_once_beside_jobs_whether_finished_or_dropped() {
        for round in 0..50 {
            let hits: Vec<AtomicUsize> = (0..200).map(|_| AtomicUsize::new(0)).collect();
            // SAFETY: `hits` outlives the side job, which ends below.
            let s = unsafe { side(job(&hits)) };
            // Jobs come and go while the workers take pieces between them.
            let ran = AtomicUsize::new(0);
            for _ in 0..5 {
                run(6, &|_| {
                    ran.fetch_add(1, Ordering::Relaxed);
                });
            }
            if round % 2 == 0 {
                s.finish();
            } else {
                drop(s);
            }
            assert_eq!(ran.load(Ordering::Relaxed), 30);
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
    }

    #[test]
    fn an_abandoned_side_job_runs_each_piece_at_most_once_and_none_after() {
        for _ in 0..50 {
            let hits: Vec<AtomicUsize> = (0..200).map(|_| AtomicUsize::new(0)).collect();
            // SAFETY: `hits` outlives the side job, which ends below.
            let s = unsafe { side(job(&hits)) };
            run(6, &|_| {});
            s.abandon();
            let seen: Vec<usize> = hits.iter().map(|h| h.load(Ordering::Relaxed)).collect();
            assert!(seen.iter().all(|&h| h <= 1));
            // Nothing runs once `abandon` has returned.
            run(6, &|_| {});
            assert!(hits
                .iter()
                .zip(&seen)
                .all(|(h, &s)| h.load(Ordering::Relaxed) == s));
        }
    }

    #[test]
    fn a_second_side_job_runs_in_full_when_finished() {
        let (a, b): (Vec<AtomicUsize>, Vec<AtomicUsize>) = (
            (0..64).map(|_| AtomicUsize::new(0)).collect(),
            (0..64).map(|_| AtomicUsize::new(0)).collect(),
        );
        // SAFETY: both vectors outlive their side jobs, which end below.
        let first = unsafe { side(job(&a)) };
        let second = unsafe { side(job(&b)) };
        second.finish();
        assert!(b.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        first.finish();
        assert!(a.iter().all(|h| h.load(Ordering::Relaxed) == 1));
    }

    #[test]
    fn parts_tile_the_extent_in_order_and_differ_by_at_most_one() {
        for units in [0, 1, 5, 98, 196, 1000] {
            for tasks in 1..12 {
                let shares: Vec<_> = (0..tasks).map(|t| part(units, tasks, t)).collect();
                assert_eq!(shares[0].start, 0);
                assert_eq!(shares[tasks - 1].end, units);
                for w in shares.windows(2) {
                    assert_eq!(w[0].end, w[1].start);
                }
                let (lo, hi) = (
                    shares.iter().map(|r| r.len()).min().unwrap(),
                    shares.iter().map(|r| r.len()).max().unwrap(),
                );
                assert!(hi - lo <= 1, "{units} units in {tasks}: {shares:?}");
            }
        }
        // Splits of one extent a multiple of the width apart agree on each thread's share:
        // 98 chunks in 8 tasks and 196 units in 6 (two threads: tasks 0..4 and 0..3).
        assert_eq!(part(98, 8, 3).end * 2, part(196, 6, 2).end);
    }

    #[test]
    fn every_task_runs_once_whoever_claims_it() {
        for tasks in [1, 2, 3, 7, 64, 1000] {
            for _ in 0..20 {
                let runs: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                run(tasks, &|t| {
                    runs[t].fetch_add(1, Ordering::Relaxed);
                });
                assert!(runs.iter().all(|r| r.load(Ordering::Relaxed) == 1));
            }
        }
    }

    #[test]
    fn chunks_cover_the_slice_once_in_aligned_pieces() {
        let mut data = vec![0u32; 1003];
        run_chunks(&mut data, 6, 10, &|start, chunk| {
            assert_eq!(start % 10, 0);
            for (i, x) in chunk.iter_mut().enumerate() {
                *x += (start + i) as u32 + 1;
            }
        });
        assert!(data.iter().enumerate().all(|(i, &x)| x == i as u32 + 1));
    }
}
