//! A compiled graph on PJRT devices, run through the narrow `Executable` trait (one
//! device) or as replicas (see `replicated`).

use super::client::{Client, LoadedExecutable};
use super::{device_buffer, device_buffer_mut, xla_buffer};
use crate::backend::{check_args, Buffer, CompileOptions, Executable, ReplicatedExecutable};
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
enum Destination {
    /// Returned to the caller as a new device buffer (not downloaded).
    Return,
    /// The new value of this parameter, written into its donated buffer.
    Update(usize),
}

/// A compiled program of one or more replicas, run through the narrow [`Executable`]
/// (one replica) or [`ReplicatedExecutable`] (one argument list per replica): a
/// single-device program is the one-replica case, with one path for the arguments'
/// checks and the outputs' routing.
pub(crate) struct PjrtExecutable {
    client: Arc<Client>,
    exe: LoadedExecutable,
    replicas: usize,
    /// The program was compiled with a device per replica (replica `r` on the client's
    /// device `r`), so each argument must sit on its replica's device.
    assigned: bool,
    param_types: Vec<TensorType>,
    output_types: Vec<TensorType>,
    destinations: Vec<Destination>,
    counters: Arc<ExecutionCounters>,
}

/// Each output's destination under `options`.
fn destinations(g: &Graph, options: &CompileOptions) -> Vec<Destination> {
    let mut destinations = vec![Destination::Return; g.outputs().len()];
    for &(o, p) in &options.updates {
        destinations[o] = Destination::Update(p);
    }
    destinations
}

impl PjrtExecutable {
    /// `exe`, compiled from `g` for `replicas` replicas; `assigned`: with a device per
    /// replica.
    pub fn new(
        client: Arc<Client>,
        exe: LoadedExecutable,
        g: &Graph,
        options: &CompileOptions,
        counters: Arc<ExecutionCounters>,
        (replicas, assigned): (usize, bool),
    ) -> PjrtExecutable {
        PjrtExecutable {
            client,
            exe,
            replicas,
            assigned,
            param_types: g.param_types(),
            output_types: g.output_types(),
            destinations: destinations(g, options),
            counters,
        }
    }

    /// Replica `r`'s raw argument list: every buffer this client's (and on the replica's
    /// device when assigned), so the plugin is never handed a buffer it would have to
    /// move or could misread.
    fn argument_list(&self, r: usize, list: &[Buffer]) -> Result<Vec<*mut super::ffi::Buffer>> {
        check_args("xla", &self.param_types, list)?;
        list.iter()
            .enumerate()
            .map(|(i, a)| {
                let d = device_buffer(a)?;
                if !Arc::ptr_eq(d.client(), &self.client) {
                    return Err(if self.assigned {
                        Error::invalid(
                            "xla replicated execute",
                            format!("replica {r}'s argument {i} belongs to another XLA client"),
                        )
                    } else {
                        Error::invalid(
                            "xla execute",
                            "an argument belongs to another XLA client: download it and upload it here",
                        )
                    });
                }
                if self.assigned && d.device() != r {
                    return Err(Error::invalid(
                        "xla replicated execute",
                        format!(
                            "replica {r}'s argument {i} is on device {}, not the replica's device {r}",
                            d.device()
                        ),
                    ));
                }
                Ok(d.raw())
            })
            .collect()
    }

    /// Runs every replica once: `args[r]` is replica `r`'s argument list, whose updated
    /// parameters are replaced in place. Returns each replica's other outputs.
    fn run(&mut self, args: &mut [&mut [Buffer]]) -> Result<Vec<Vec<Buffer>>> {
        if args.len() != self.replicas {
            return Err(Error::invalid(
                "xla replicated execute",
                format!(
                    "{} argument lists for {} replicas",
                    args.len(),
                    self.replicas
                ),
            ));
        }
        let lists = args
            .iter()
            .enumerate()
            .map(|(r, list)| self.argument_list(r, list))
            .collect::<Result<Vec<_>>>()?;
        let per_device = self.exe.execute(&lists)?;
        if per_device.len() != self.replicas {
            return Err(Error::Backend {
                backend: "xla",
                message: format!(
                    "the program ran on {} devices, expected {}",
                    per_device.len(),
                    self.replicas
                ),
            });
        }
        let mut returned = Vec::with_capacity(self.replicas);
        for (r, outputs) in per_device.into_iter().enumerate() {
            if outputs.len() != self.destinations.len() {
                return Err(Error::Backend {
                    backend: "xla",
                    message: format!(
                        "replica {r} returned {} outputs, expected {}",
                        outputs.len(),
                        self.destinations.len()
                    ),
                });
            }
            let mut mine = Vec::new();
            for ((out, dest), ty) in outputs
                .into_iter()
                .zip(&self.destinations)
                .zip(&self.output_types)
            {
                match *dest {
                    Destination::Return => mine.push(xla_buffer(ty.clone(), out)),
                    Destination::Update(p) => {
                        // The old handle was donated (its memory now holds the update);
                        // only the handle is left to free, by replacing it. The parameter
                        // keeps its buffer (its type is the output's), so an update
                        // allocates nothing here.
                        let slot = device_buffer_mut(&mut args[r][p])?;
                        self.counters.update(slot.is_deleted()?);
                        *slot = out;
                    }
                }
            }
            returned.push(mine);
        }
        self.counters.executed();
        Ok(returned)
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
        let mut outs = self.run(&mut [args])?;
        Ok(outs.pop().unwrap_or_default())
    }
}

impl ReplicatedExecutable for PjrtExecutable {
    fn replicas(&self) -> usize {
        self.replicas
    }

    fn param_types(&self) -> &[TensorType] {
        &self.param_types
    }

    fn output_types(&self) -> &[TensorType] {
        &self.output_types
    }

    fn execute(&mut self, args: &mut [Vec<Buffer>]) -> Result<Vec<Vec<Buffer>>> {
        let mut lists: Vec<&mut [Buffer]> = args.iter_mut().map(Vec::as_mut_slice).collect();
        self.run(&mut lists)
    }
}
