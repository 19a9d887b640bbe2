//! What the `&self` inference calls run on. `predict` may be called from several threads
//! at once on one model, and a compiled executable runs through `&mut`, so each call takes
//! a [`Worker`] of its own out of the model's [`Inference`] pool — its uploaded weights, its
//! compiled graphs (one per input type), its input buffers — and puts it back when done.
//! The pool grows to the number of calls that ever ran at once; a call never waits for
//! another.
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

/// The idle workers of one model.
#[derive(Default)]
pub(crate) struct Inference {
    idle: Mutex<Vec<Worker>>,
}

/// One call's means to run the inference graph: the weights on `backend` (of `version`)
/// followed by the call's input buffers, and the graphs compiled for them.
pub(crate) struct Worker {
    backend: Arc<dyn Backend>,
    version: u64,
    /// The weights, then the input buffers of the last call.
    args: Vec<Buffer>,
    weights: usize,
    exes: HashMap<TensorType, Box<dyn Executable>>,
    spare: Spares<Vec<Buffer>>,
}

impl Inference {
    /// A worker holding `weights` on `backend`: an idle one that already does if there is
    /// one, else an idle one made current, else a new one.
    pub fn take(&self, backend: &Arc<dyn Backend>, weights: &HostWeights) -> Result<Worker> {
        let found = {
            // A poisoned pool only means a thread panicked while holding the lock; the
            // workers in it are whole (none is used while in the pool).
            let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
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
                backend: backend.clone(),
                version: 0,
                args: Vec::new(),
                weights: 0,
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
            w.version = weights.version();
        }
        Ok(w)
    }

    /// Returns a worker to the pool after a call that succeeded. (A failed call drops its
    /// worker: its buffers may be half bound.)
    pub fn give_back(&self, w: Worker) {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(w);
    }

    /// Forgets every worker (their weights are on a backend the model no longer uses).
    pub fn clear(&mut self) {
        self.idle
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

impl Worker {
    /// Runs the graph `build` makes for `inputs`' types (compiled on first use), `inputs`
    /// bound after the weights as `binds` and `dist` say.
    pub fn run(
        &mut self,
        inputs: &mut [&mut Tensor],
        binds: &[Bind],
        dist: Option<super::distribute::Dist>,
        key: TensorType,
        build: impl FnOnce() -> Result<Graph>,
    ) -> Result<Vec<Buffer>> {
        let exe = match self.exes.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(
                self.backend
                    .compile(&build()?, &CompileOptions::default())?,
            ),
        };
        bind_inputs(
            self.backend.as_ref(),
            &mut self.args,
            self.weights,
            inputs,
            binds,
            (1, dist),
            &mut self.spare,
        )?;
        exe.execute(&mut self.args)
    }
}
