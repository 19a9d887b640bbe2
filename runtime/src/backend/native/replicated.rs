//! Replicated execution on the native backend: one worker thread per replica, each owning
//! its own planned executable (arena, scratch, kernel context), meeting the others at a
//! barrier-based all-reduce. A multi-core CPU gets data parallelism this way: each thread
//! runs the whole step on its share of the batch, and only the all-reduced values (the
//! gradients, the loss and metric increments) cross threads.

use super::data::{Data, DataMut, Storage};
use super::executor::NativeExecutable;
use super::{NativeBackend, ReplicaCtx};
use crate::backend::replicated::{check_replicas, ReplicaBackend, ReplicatedExecutable};
use crate::backend::{Backend, Buffer, CompileOptions};
use crate::ir::{Graph, TensorType};
use crate::{Error, Result, Tensor};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;

/// The native backend runs replicas as threads; more than this is surely a mistake.
pub const MAX_NATIVE_REPLICAS: usize = 256;

impl ReplicaBackend for NativeBackend {
    fn max_replicas(&self) -> usize {
        MAX_NATIVE_REPLICAS
    }

    fn replica_device_kind(&self, _replica: usize) -> String {
        "cpu thread".into()
    }

    /// Every replica's memory is host memory: placing a tensor is uploading it.
    fn upload_to(&self, t: &Tensor, _replica: usize) -> Result<Buffer> {
        self.upload(t)
    }

    fn upload_into_replica(&self, t: &Tensor, b: &mut Buffer, _replica: usize) -> Result<()> {
        self.upload_into(t, b)
    }

    /// Copies the rows straight into the replica's storage: no host tensor in between.
    fn upload_rows_into_replica(
        &self,
        t: &Tensor,
        rows: &[usize],
        b: &mut Buffer,
        _replica: usize,
    ) -> Result<()> {
        let dims = t.dims();
        let (n, row) = match dims.split_first() {
            Some((&n, rest)) => (n, rest.iter().product::<usize>()),
            None => return Err(Error::invalid("upload_rows", "a scalar has no rows")),
        };
        if let Some(&bad) = rows.iter().find(|&&i| i >= n) {
            return Err(Error::invalid(
                "upload_rows",
                format!("row {bad} out of range for {n} rows"),
            ));
        }
        let mut out = dims.to_vec();
        out[0] = rows.len();
        let ty = TensorType::new(t.dtype(), out);
        fn fill<T: Copy>(v: &mut Vec<T>, src: &[T], rows: &[usize], row: usize) {
            v.clear();
            v.reserve(rows.len() * row);
            for &i in rows {
                v.extend_from_slice(&src[i * row..(i + 1) * row]);
            }
        }
        let storage = b.native_storage_mut()?;
        let copied = match (t, &mut *storage) {
            (Tensor::F32(a), Storage::F32(v)) => a.as_slice().map(|s| fill(v, s, rows, row)),
            (Tensor::F64(a), Storage::F64(v)) => a.as_slice().map(|s| fill(v, s, rows, row)),
            (Tensor::I32(a), Storage::I32(v)) => a.as_slice().map(|s| fill(v, s, rows, row)),
            (Tensor::I64(a), Storage::I64(v)) => a.as_slice().map(|s| fill(v, s, rows, row)),
            _ => None,
        };
        if copied.is_none() {
            // Another element type, or a non-contiguous array: through a host tensor.
            *storage = Storage::from_tensor(&crate::backend::replicated::gathered(t, rows)?);
        }
        b.ty = ty;
        Ok(())
    }

    fn compile_replicated(
        &self,
        graph: &Graph,
        options: &CompileOptions,
        replicas: usize,
    ) -> Result<Box<dyn ReplicatedExecutable>> {
        check_replicas("native", replicas, MAX_NATIVE_REPLICAS)?;
        graph.verify()?;
        options.validate(graph)?;
        Ok(Box::new(NativeReplicated::new(graph, options, replicas)?))
    }
}

/// Where the replicas of one executable exchange data: a slot per replica and a barrier
/// that a failing replica can break, so the others return an error instead of waiting
/// forever.
pub(crate) struct Hub {
    replicas: usize,
    slots: Vec<RwLock<Storage>>,
    gate: Mutex<Gate>,
    cv: Condvar,
}

struct Gate {
    arrived: usize,
    generation: u64,
    aborted: bool,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hub({} replicas)", self.replicas)
    }
}

/// The error replicas see when another replica failed first (that one reports the cause).
const ABORTED: &str = "another replica failed during this step";

impl Hub {
    fn new(replicas: usize) -> Hub {
        Hub {
            replicas,
            slots: (0..replicas)
                .map(|_| RwLock::new(Storage::F32(Vec::new())))
                .collect(),
            gate: Mutex::new(Gate {
                arrived: 0,
                generation: 0,
                aborted: false,
            }),
            cv: Condvar::new(),
        }
    }

    /// Waits until every replica has arrived; an error if a replica aborted instead.
    fn barrier(&self) -> Result<()> {
        let mut g = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        if g.aborted {
            return Err(aborted());
        }
        let generation = g.generation;
        g.arrived += 1;
        if g.arrived == self.replicas {
            g.arrived = 0;
            g.generation += 1;
            self.cv.notify_all();
            return Ok(());
        }
        // No spinning before sleeping: measured on a loaded 2-core machine, a spinning
        // waiter steals the core the replica it waits for needs (a 120 us spin ping-pong
        // against 12 us through the kernel).
        while g.generation == generation && !g.aborted {
            g = self.cv.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
        if g.generation == generation {
            Err(aborted())
        } else {
            Ok(())
        }
    }

    /// Breaks the barrier for everyone: called by a replica that failed or panicked.
    fn abort(&self) {
        let mut g = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        g.aborted = true;
        self.cv.notify_all();
    }

    /// Re-arms the barrier before an execution (every replica is idle then).
    fn reset(&self) {
        let mut g = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        g.arrived = 0;
        g.aborted = false;
    }

    /// Replica `id`'s part of an all-reduce: publishes `x`, waits for every replica's,
    /// and writes their sum into `out`. Every replica adds the slots in replica order, so
    /// every replica's result is bit-identical (the replicas' parameters stay equal).
    pub fn all_reduce_sum(&self, id: usize, x: Data<'_>, out: DataMut<'_>) -> Result<()> {
        {
            let mut slot = self.slots[id]
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            store(&mut slot, x);
        }
        self.barrier()?;
        let summed = self.sum_slots(out);
        // Nobody may overwrite its slot (the next all-reduce) before all have read it.
        let passed = self.barrier();
        summed.and(passed)
    }

    fn sum_slots(&self, mut out: DataMut<'_>) -> Result<()> {
        for (r, slot) in self.slots.iter().enumerate() {
            let slot = slot.read().unwrap_or_else(PoisonError::into_inner);
            let first = r == 0;
            match (slot.data(), out.reborrow()) {
                (Data::F32(a), DataMut::F32(o)) => accumulate(o, a, first, |x, y| x + y)?,
                (Data::F64(a), DataMut::F64(o)) => accumulate(o, a, first, |x, y| x + y)?,
                (Data::I32(a), DataMut::I32(o)) => accumulate(o, a, first, i32::wrapping_add)?,
                (Data::I64(a), DataMut::I64(o)) => accumulate(o, a, first, i64::wrapping_add)?,
                (a, o) => {
                    return Err(Error::Backend {
                        backend: "native",
                        message: format!(
                            "all_reduce_sum of {} into {} (sums need f32, f64, i32 or i64 on every replica)",
                            a.dtype(),
                            o.dtype()
                        ),
                    })
                }
            }
        }
        Ok(())
    }
}

fn aborted() -> Error {
    Error::Backend {
        backend: "native",
        message: ABORTED.into(),
    }
}

/// `out = a` for the first replica's slot, `out = f(out, a)` for the others.
fn accumulate<T: Copy>(out: &mut [T], a: &[T], first: bool, f: impl Fn(T, T) -> T) -> Result<()> {
    if a.len() != out.len() {
        return Err(Error::Backend {
            backend: "native",
            message: format!(
                "all_reduce_sum: the replicas' operands differ in size ({} and {} elements)",
                a.len(),
                out.len()
            ),
        });
    }
    if first {
        out.copy_from_slice(a);
    } else {
        for (o, &v) in out.iter_mut().zip(a) {
            *o = f(*o, v);
        }
    }
    Ok(())
}

/// Copies `x` into a slot, reusing its memory when the element type is unchanged.
fn store(slot: &mut Storage, x: Data<'_>) {
    match (slot, x) {
        (Storage::F32(v), Data::F32(a)) => replace_with(v, a),
        (Storage::F64(v), Data::F64(a)) => replace_with(v, a),
        (Storage::I32(v), Data::I32(a)) => replace_with(v, a),
        (Storage::I64(v), Data::I64(a)) => replace_with(v, a),
        (slot, x) => *slot = x.to_storage(),
    }
}

fn replace_with<T: Copy>(v: &mut Vec<T>, a: &[T]) {
    v.clear();
    v.extend_from_slice(a);
}

type Job = Vec<Buffer>;
type Done = (Vec<Buffer>, Result<Vec<Buffer>>);

/// A replica's thread: it owns the replica's executable and runs it on each argument
/// list it is sent.
struct Worker {
    jobs: Option<mpsc::Sender<Job>>,
    done: mpsc::Receiver<Done>,
    thread: Option<JoinHandle<()>>,
}

/// Breaks the hub's barrier if the replica's thread unwinds, so the other replicas stop
/// waiting for it.
struct AbortOnUnwind(Arc<Hub>);

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abort();
        }
    }
}

/// Replica 0 runs on the calling thread; the others on threads of their own.
pub(crate) struct NativeReplicated {
    first: Box<NativeExecutable>,
    workers: Vec<Worker>,
    hub: Option<Arc<Hub>>,
    count: usize,
    /// Whether the replicas fill the cores, so each keeps its kernels on its own thread
    /// (the crew's threads would only compete with the other replicas for the cores).
    serial: bool,
    param_types: Vec<TensorType>,
    output_types: Vec<TensorType>,
}

impl NativeReplicated {
    fn new(g: &Graph, options: &CompileOptions, count: usize) -> Result<NativeReplicated> {
        let serial = count > 1 && count >= super::crew::width();
        let mut first = Box::new(NativeExecutable::new(g, options)?);
        let (hub, mut workers) = (None, Vec::new());
        if count == 1 {
            return Ok(NativeReplicated {
                first,
                workers,
                hub,
                count,
                serial,
                param_types: g.param_types(),
                output_types: g.output_types(),
            });
        }
        let hub = Arc::new(Hub::new(count));
        let replica = |id: usize| ReplicaCtx {
            id,
            count,
            hub: Some(hub.clone()),
        };
        first.set_replica(replica(0));
        for id in 1..count {
            let mut exe = NativeExecutable::new(g, options)?;
            exe.set_replica(replica(id));
            workers.push(spawn(id, exe, hub.clone(), serial)?);
        }
        Ok(NativeReplicated {
            first,
            workers,
            hub: Some(hub),
            count,
            serial,
            param_types: g.param_types(),
            output_types: g.output_types(),
        })
    }
}

/// Runs one replica's execution, breaking the barrier for the others if it fails.
fn run_replica(
    exe: &mut NativeExecutable,
    args: &mut [Buffer],
    hub: &Arc<Hub>,
    serial: bool,
) -> Result<Vec<Buffer>> {
    let guard = AbortOnUnwind(hub.clone());
    let result = if serial {
        super::crew::serial(|| crate::backend::Executable::execute(exe, args))
    } else {
        crate::backend::Executable::execute(exe, args)
    };
    if result.is_err() {
        hub.abort();
    }
    drop(guard);
    result
}

fn spawn(id: usize, mut exe: NativeExecutable, hub: Arc<Hub>, serial: bool) -> Result<Worker> {
    let (jobs, job_rx) = mpsc::channel::<Job>();
    let (done_tx, done) = mpsc::channel::<Done>();
    let thread = std::thread::Builder::new()
        .name(format!("strata-replica-{id}"))
        .spawn(move || {
            while let Ok(mut args) = job_rx.recv() {
                let result = run_replica(&mut exe, &mut args, &hub, serial);
                if done_tx.send((args, result)).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| Error::Backend {
            backend: "native",
            message: format!("cannot start the thread of replica {id}: {e}"),
        })?;
    Ok(Worker {
        jobs: Some(jobs),
        done,
        thread: Some(thread),
    })
}

impl Drop for NativeReplicated {
    fn drop(&mut self) {
        // Closing the job channels ends the workers' loops.
        for w in self.workers.iter_mut() {
            w.jobs = None;
        }
        for w in self.workers.iter_mut() {
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// Keeps the first error, but prefers a cause over a replica that only saw the barrier
/// break because of it.
fn note(e: Error, first_error: &mut Option<Error>) {
    let is_abort = |e: &Error| matches!(e, Error::Backend { message, .. } if message == ABORTED);
    match first_error {
        Some(f) if is_abort(f) && !is_abort(&e) => *first_error = Some(e),
        None => *first_error = Some(e),
        Some(_) => {}
    }
}

fn died(replica: usize) -> Error {
    Error::Backend {
        backend: "native",
        message: format!("the thread of replica {replica} stopped (it panicked)"),
    }
}

impl ReplicatedExecutable for NativeReplicated {
    fn replicas(&self) -> usize {
        self.count
    }

    fn param_types(&self) -> &[TensorType] {
        &self.param_types
    }

    fn output_types(&self) -> &[TensorType] {
        &self.output_types
    }

    fn execute(&mut self, args: &mut [Vec<Buffer>]) -> Result<Vec<Vec<Buffer>>> {
        if args.len() != self.count {
            return Err(Error::invalid(
                "native replicated execute",
                format!("{} argument lists for {} replicas", args.len(), self.count),
            ));
        }
        let Some(hub) = &self.hub else {
            let out = crate::backend::Executable::execute(self.first.as_mut(), &mut args[0])?;
            return Ok(vec![out]);
        };
        hub.reset();
        let (mine, theirs) = args.split_at_mut(1);
        let mut sent = vec![false; self.workers.len()];
        for (i, (w, a)) in self.workers.iter().zip(theirs.iter_mut()).enumerate() {
            let job = std::mem::take(a);
            match w.jobs.as_ref().map(|j| j.send(job)) {
                Some(Ok(())) => sent[i] = true,
                Some(Err(mpsc::SendError(job))) => {
                    *a = job;
                    hub.abort();
                }
                None => hub.abort(),
            }
        }
        let mut outs = Vec::with_capacity(self.count);
        let mut first_error: Option<Error> = None;
        match run_replica(&mut self.first, &mut mine[0], hub, self.serial) {
            Ok(o) => outs.push(o),
            Err(e) => note(e, &mut first_error),
        }
        for (i, w) in self.workers.iter().enumerate() {
            let r = i + 1;
            if !sent[i] {
                note(died(r), &mut first_error);
                continue;
            }
            match w.done.recv() {
                Ok((a, result)) => {
                    theirs[i] = a;
                    match result {
                        Ok(o) => outs.push(o),
                        Err(e) => note(e, &mut first_error),
                    }
                }
                Err(_) => {
                    hub.abort();
                    note(died(r), &mut first_error);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(outs),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_aborting_replica_releases_the_others() {
        let hub = Arc::new(Hub::new(2));
        let h = hub.clone();
        let waiting = std::thread::spawn(move || h.barrier());
        std::thread::sleep(Duration::from_millis(20));
        hub.abort();
        assert!(waiting.join().unwrap().is_err());
        // Re-armed, the barrier works again.
        hub.reset();
        let h = hub.clone();
        let other = std::thread::spawn(move || h.barrier());
        assert!(hub.barrier().is_ok());
        assert!(other.join().unwrap().is_ok());
    }

    #[test]
    fn a_panicking_replica_breaks_the_barrier() {
        let hub = Arc::new(Hub::new(2));
        let h = hub.clone();
        let dead = std::thread::spawn(move || {
            let _guard = AbortOnUnwind(h);
            panic!("a replica's bug");
        });
        assert!(dead.join().is_err());
        // The surviving replica does not wait for the dead one.
        assert!(hub.barrier().is_err());
    }

    #[test]
    fn sums_are_in_replica_order_on_every_replica() {
        let hub = Arc::new(Hub::new(3));
        // Values whose sum depends on the order of additions in f32.
        let xs = [1.0e8f32, 1.0, -1.0e8];
        let threads: Vec<_> = (0..3)
            .map(|id| {
                let h = hub.clone();
                std::thread::spawn(move || {
                    let mut out = [0f32];
                    h.all_reduce_sum(id, Data::F32(&[xs[id]]), DataMut::F32(&mut out))
                        .unwrap();
                    out[0]
                })
            })
            .collect();
        let sums: Vec<f32> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let ordered = (xs[0] + xs[1]) + xs[2];
        assert!(
            sums.iter().all(|s| s.to_bits() == ordered.to_bits()),
            "{sums:?}"
        );
    }
}
