//! A compiled graph on a PJRT device, run through the narrow `Executable` trait.

use super::client::{Client, LoadedExecutable};
use crate::backend::{check_args, Buffer, CompileOptions, Executable};
use crate::ir::{Graph, TensorType};
use crate::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Counts of what executions did, for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecutionStats {
    /// Completed executions.
    pub executions: u64,
    /// State updates written in place: the parameter's buffer was donated to the program.
    pub donated: u64,
    /// State updates the plugin wrote to a fresh buffer instead (it declined the donation).
    pub not_donated: u64,
}

#[derive(Debug, Default)]
pub(crate) struct ExecutionCounters {
    executions: AtomicU64,
    donated: AtomicU64,
    not_donated: AtomicU64,
}

impl ExecutionCounters {
    /// Counts one state update: written in place (donated) or into a fresh buffer.
    pub fn update(&self, donated: bool) {
        let counter = if donated {
            &self.donated
        } else {
            &self.not_donated
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn executed(&self) {
        self.executions.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> ExecutionStats {
        ExecutionStats {
            executions: self.executions.load(Ordering::Relaxed),
            donated: self.donated.load(Ordering::Relaxed),
            not_donated: self.not_donated.load(Ordering::Relaxed),
        }
    }
}

/// What becomes of each output of the program after a run.
#[derive(Clone, Copy, Debug)]
pub(super) enum Destination {
    /// Returned to the caller as a new device buffer (not downloaded).
    Return,
    /// The new value of this parameter, written into its donated buffer.
    Update(usize),
}

pub(crate) struct PjrtExecutable {
    client: Arc<Client>,
    exe: LoadedExecutable,
    param_types: Vec<TensorType>,
    output_types: Vec<TensorType>,
    destinations: Vec<Destination>,
    counters: Arc<ExecutionCounters>,
}

/// Each output's destination under `options`.
pub(super) fn destinations(g: &Graph, options: &CompileOptions) -> Vec<Destination> {
    let mut destinations = vec![Destination::Return; g.outputs().len()];
    for &(o, p) in &options.updates {
        destinations[o] = Destination::Update(p);
    }
    destinations
}

impl PjrtExecutable {
    pub fn new(
        client: Arc<Client>,
        exe: LoadedExecutable,
        g: &Graph,
        options: &CompileOptions,
        counters: Arc<ExecutionCounters>,
    ) -> PjrtExecutable {
        let destinations = destinations(g, options);
        PjrtExecutable {
            client,
            exe,
            param_types: g.param_types(),
            output_types: g.output_types(),
            destinations,
            counters,
        }
    }

    /// Device 0's argument list. (A replicated variant passes one list per device to
    /// `LoadedExecutable::execute`, which already takes them.)
    fn argument_list(&self, args: &[Buffer]) -> Result<Vec<*mut super::ffi::Buffer>> {
        args.iter()
            .map(|a| {
                let d = a.pjrt_buffer()?;
                if Arc::ptr_eq(d.client(), &self.client) {
                    Ok(d.raw())
                } else {
                    Err(Error::invalid(
                        "xla execute",
                        "an argument belongs to another XLA client: download it and upload it here",
                    ))
                }
            })
            .collect()
    }
}

impl Executable for PjrtExecutable {
    fn param_types(&self) -> &[TensorType] {
        &self.param_types
    }

    fn output_types(&self) -> &[TensorType] {
        &self.output_types
    }

    fn execute(&mut self, args: &mut [Buffer]) -> Result<Vec<Buffer>> {
        check_args("xla", &self.param_types, args)?;
        let list = self.argument_list(args)?;
        let mut per_device = self.exe.execute(&[list])?;
        let outputs = per_device.pop().unwrap_or_default();
        if outputs.len() != self.destinations.len() {
            return Err(Error::Backend {
                backend: "xla",
                message: format!(
                    "the program returned {} outputs, expected {}",
                    outputs.len(),
                    self.destinations.len()
                ),
            });
        }
        let mut returned = Vec::new();
        for ((out, dest), ty) in outputs
            .into_iter()
            .zip(&self.destinations)
            .zip(&self.output_types)
        {
            let b = Buffer::pjrt(ty.clone(), out);
            match *dest {
                Destination::Return => returned.push(b),
                Destination::Update(p) => {
                    // The old handle was donated (its memory now holds the update); only
                    // the handle is left to free, by dropping it.
                    let donated = args[p].pjrt_buffer()?.is_deleted()?;
                    self.counters.update(donated);
                    args[p] = b;
                }
            }
        }
        self.counters.executed();
        Ok(returned)
    }
}
