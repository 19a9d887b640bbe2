//! Replicated execution on the native backend: one worker thread per replica, each owning
//! its own planned executable (arena, scratch, kernel context), meeting the others at a
//! barrier-based all-reduce. A multi-core CPU gets data parallelism this way: each thread
//! runs the whole step on its share of the batch, and only the all-reduced values (the
//! gradients, the loss and metric increments) cross threads.

use super::executor::NativeExecutable;
use super::NativeBackend;
use crate::backend::replicated::{check_replicas, ReplicaBackend, ReplicatedExecutable};
use crate::backend::{Backend, Buffer, CompileOptions};
use crate::ir::{Graph, TensorType};
use crate::kernel::hub::{Hub, ABORTED};
use crate::kernel::{ReplicaCtx, Storage};
use crate::{Error, Result, Tensor};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
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

type Job = Vec<Buffer>;
type Done = (Vec<Buffer>, Result<Vec<Buffer>>);

/// A replica's thread: it owns the replica's executable and runs it on each argument
/// list it is sent.
struct Worker {
    jobs: Option<mpsc::Sender<Job>>,
    /// Behind a mutex only so the executable is `Sync` (a receiver is not): it is read
    /// through `&mut self`, which never locks.
    done: Mutex<mpsc::Receiver<Done>>,
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
        let serial = count > 1 && count >= crate::kernel::crew::width();
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
        crate::kernel::crew::serial(|| crate::backend::Executable::execute(exe, args))
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
        done: Mutex::new(done),
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
        for (i, w) in self.workers.iter_mut().enumerate() {
            let r = i + 1;
            if !sent[i] {
                note(died(r), &mut first_error);
                continue;
            }
            let done = w.done.get_mut().unwrap_or_else(|e| e.into_inner());
            match done.recv() {
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
}
