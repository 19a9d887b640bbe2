//! What the `&self` calls (`predict`, `evaluate`) run on. They may be called from several
//! threads at once on one model, and a compiled executable runs through `&mut`, so each
//! call takes a [`Worker`] of its own out of the model's [`Inference`] pool — its uploaded
//! weights, the call's own state (an evaluation's metric totals), its compiled graphs (one
//! per input types), its input buffers — and puts it back when done. The pool grows to
//! the number of calls that ever ran at once; a call never waits for another.
//!
//! A worker's weights are the model's host weights of one [`HostWeights::version`]; every
//! write to the host weights makes a new version, so a worker uploaded before a `fit`,
//! `set_weights` or `load_checkpoint` uploads again at its next use.

use super::runner::{bind_inputs, Bind};
use super::spares::Spares;
use crate::backend::{Backend, Buffer, CompileOptions, Executable};
use crate::ir::{Graph, TensorType};
use crate::{Result, Tensor};
use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Versions are unique across models, so a worker can never mistake another set of
/// weights for the one it holds.
static NEXT_VERSION: AtomicU64 = AtomicU64::new(1);

fn fresh_version() -> u64 {
    NEXT_VERSION.fetch_add(1, Ordering::Relaxed)
}

/// The host copies of a model's parameters. Reads go through `Deref`; any mutable access
/// (`DerefMut`) or replacement gives them a new version.
#[derive(Debug)]
pub(crate) struct HostWeights {
    values: Vec<Tensor>,
    version: u64,
}

impl HostWeights {
    pub fn new(values: Vec<Tensor>) -> HostWeights {
        HostWeights {
            values,
            version: fresh_version(),
        }
    }

    pub fn version(&self) -> u64 {
        self.version
    }
}

impl Default for HostWeights {
    fn default() -> HostWeights {
        HostWeights::new(Vec::new())
    }
}

impl From<Vec<Tensor>> for HostWeights {
    fn from(values: Vec<Tensor>) -> HostWeights {
        HostWeights::new(values)
    }
}

impl<'a> IntoIterator for &'a HostWeights {
    type Item = &'a Tensor;
    type IntoIter = std::slice::Iter<'a, Tensor>;
    fn into_iter(self) -> Self::IntoIter {
        self.values.iter()
    }
}

impl Deref for HostWeights {
    type Target = Vec<Tensor>;
    fn deref(&self) -> &Vec<Tensor> {
        &self.values
    }
}

impl DerefMut for HostWeights {
    fn deref_mut(&mut self) -> &mut Vec<Tensor> {
        self.version = fresh_version();
        &mut self.values
    }
}

/// What a worker runs: its graphs take different state after the weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    Predict,
    Evaluate,
}

/// The idle workers of one model, by purpose.
#[derive(Default)]
pub(crate) struct Inference {
    predict: Mutex<Vec<Worker>>,
    evaluate: Mutex<Vec<Worker>>,
}

/// One call's means to run its graphs: the weights on `backend` (of `version`), the call's
/// own state, then its input buffers, and the graphs compiled for them.
pub(crate) struct Worker {
    purpose: Purpose,
    backend: Arc<dyn Backend>,
    version: u64,
    /// The weights, the state, then the input buffers of the last call.
    args: Vec<Buffer>,
    weights: usize,
    state: usize,
    exes: HashMap<Vec<TensorType>, Box<dyn Executable>>,
    spare: Spares<Vec<Buffer>>,
}

impl Inference {
    fn pool(&self, purpose: Purpose) -> std::sync::MutexGuard<'_, Vec<Worker>> {
        let pool = match purpose {
            Purpose::Predict => &self.predict,
            Purpose::Evaluate => &self.evaluate,
        };
        // A poisoned pool only means a thread panicked while holding the lock; the workers
        // in it are whole (none is used while in the pool).
        pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A worker holding `weights` on `backend` followed by `state` (values of the same
    /// types on every call of one purpose): an idle one that already holds these weights if
    /// there is one, else an idle one made current, else a new one.
    pub fn take(
        &self,
        purpose: Purpose,
        backend: &Arc<dyn Backend>,
        weights: &HostWeights,
        state: &[Tensor],
    ) -> Result<Worker> {
        let found = {
            let mut idle = self.pool(purpose);
            let current =
                |w: &Worker| Arc::ptr_eq(&w.backend, backend) && w.version == weights.version();
            match idle.iter().position(current) {
                Some(i) => Some(idle.swap_remove(i)),
                None => idle.pop(),
            }
        };
        let mut w = match found {
            Some(w) if Arc::ptr_eq(&w.backend, backend) => w,
            _ => Worker {
                purpose,
                backend: backend.clone(),
                version: 0,
                args: Vec::new(),
                weights: 0,
                state: 0,
                exes: HashMap::new(),
                spare: Spares::default(),
            },
        };
        if w.version != weights.version() {
            w.args.clear();
            for t in weights.iter() {
                w.args.push(backend.upload(t)?);
            }
            w.weights = weights.len();
            w.state = 0;
            w.version = weights.version();
        }
        if w.state == state.len() {
            for (t, b) in state.iter().zip(&mut w.args[w.weights..]) {
                backend.upload_into(t, b)?;
            }
        } else {
            w.args.truncate(w.weights);
            for t in state {
                w.args.push(backend.upload(t)?);
            }
            w.state = state.len();
        }
        Ok(w)
    }

    /// Returns a worker to the pool after a call that succeeded. (A failed call drops its
    /// worker: its buffers may be half bound.)
    pub fn give_back(&self, w: Worker) {
        self.pool(w.purpose).push(w);
    }

    /// Forgets every worker (their weights are on a backend the model no longer uses).
    pub fn clear(&mut self) {
        for pool in [&mut self.predict, &mut self.evaluate] {
            pool.get_mut().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }
}

impl Worker {
    /// Runs the graph `build` makes for inputs of the types `key` names (compiled on first
    /// use), `inputs` bound after the state as `binds` and `dist` say.
    pub fn run(
        &mut self,
        inputs: &mut [&mut Tensor],
        binds: &[Bind],
        calls: (usize, Option<super::distribute::Dist>),
        key: Vec<TensorType>,
        build: impl FnOnce() -> Result<(Graph, CompileOptions)>,
    ) -> Result<Vec<Buffer>> {
        let exe = match self.exes.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let (g, options) = build()?;
                e.insert(self.backend.compile(&g, &options)?)
            }
        };
        bind_inputs(
            self.backend.as_ref(),
            &mut self.args,
            self.weights + self.state,
            inputs,
            binds,
            calls,
            &mut self.spare,
        )?;
        exe.execute(&mut self.args)
    }
}
