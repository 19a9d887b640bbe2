//! Replicated programs on XLA: one compile with `num_replicas = N` (replica `r` assigned
//! to the client's device `r`), one execute over N argument lists. The collectives of the
//! program lower to `stablehlo.all_reduce` over the group of every replica (see
//! `ops::collective`); XLA runs them between the devices: the CPU plugin's virtual devices
//! (`xla-cpu:N`), GPUs or TPU cores.

use super::client::{Client, LoadedExecutable};
use super::executable::{destinations, Destination, ExecutionCounters};
use super::options::BuildOptions;
use super::{stablehlo, PjrtBackend};
use crate::backend::replicated::{check_replicas, ReplicaBackend, ReplicatedExecutable};
use crate::backend::{check_args, Buffer, CompileOptions};
use crate::ir::{Graph, TensorType};
use crate::{Error, Result, Tensor};
use std::sync::Arc;

impl ReplicaBackend for PjrtBackend {
    fn max_replicas(&self) -> usize {
        self.client.device_count()
    }

    fn replica_device_kind(&self, replica: usize) -> String {
        self.client
            .device_kinds()
            .get(replica)
            .cloned()
            .unwrap_or_default()
    }

    fn upload_to(&self, t: &Tensor, replica: usize) -> Result<Buffer> {
        Ok(Buffer::pjrt(t.ty(), self.client.upload(t, replica)?))
    }

    fn compile_replicated(
        &self,
        graph: &Graph,
        options: &CompileOptions,
        replicas: usize,
    ) -> Result<Box<dyn ReplicatedExecutable>> {
        let devices = self.client.device_count();
        check_replicas(&self.device.to_string(), replicas, devices)?;
        // Validation first (inside the printer): nothing unchecked reaches the plugin.
        let text = stablehlo::module_text(graph, options, replicas)?;
        if let Some(dir) = &self.dump_dir {
            super::dump(dir, graph, &text)?;
        }
        let build = BuildOptions {
            num_replicas: replicas,
            num_partitions: 1,
        }
        .encode_assigned(devices, &self.client.device_ids()[..replicas])?;
        let exe = self.compile_text(&text, &build)?;
        if exe.num_outputs() != graph.outputs().len() {
            return Err(Error::Backend {
                backend: "xla",
                message: format!(
                    "the compiled program has {} outputs, the graph {}",
                    exe.num_outputs(),
                    graph.outputs().len()
                ),
            });
        }
        // Arguments are placed by replica index before the program exists, so the
        // program must run replica r on the client's device r, as assigned.
        let placed = exe.addressable_device_indices()?;
        if placed != (0..replicas).collect::<Vec<_>>() {
            return Err(Error::Backend {
                backend: "xla",
                message: format!(
                    "the plugin placed the {replicas} replicas on devices {placed:?}, not the assigned 0..{replicas}"
                ),
            });
        }
        Ok(Box::new(PjrtReplicated {
            client: self.client.clone(),
            exe,
            replicas,
            param_types: graph.param_types(),
            output_types: graph.output_types(),
            destinations: destinations(graph, options),
            counters: self.executions.clone(),
        }))
    }
}

struct PjrtReplicated {
    client: Arc<Client>,
    exe: LoadedExecutable,
    replicas: usize,
    param_types: Vec<TensorType>,
    output_types: Vec<TensorType>,
    destinations: Vec<Destination>,
    counters: Arc<ExecutionCounters>,
}

impl ReplicatedExecutable for PjrtReplicated {
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
        // Every buffer must be this client's, on its replica's device: the plugin is never
        // handed a buffer it would have to move or could misread.
        let mut lists = Vec::with_capacity(self.replicas);
        for (r, list) in args.iter().enumerate() {
            check_args("xla", &self.param_types, list)?;
            let raw = list
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let d = a.pjrt_buffer()?;
                    if !Arc::ptr_eq(d.client(), &self.client) {
                        return Err(Error::invalid(
                            "xla replicated execute",
                            format!("replica {r}'s argument {i} belongs to another XLA client"),
                        ));
                    }
                    if d.device() != r {
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
                .collect::<Result<Vec<_>>>()?;
            lists.push(raw);
        }
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
                let b = Buffer::pjrt(ty.clone(), out);
                match *dest {
                    Destination::Return => mine.push(b),
                    Destination::Update(p) => {
                        let donated = args[r][p].pjrt_buffer()?.is_deleted()?;
                        self.counters.update(donated);
                        args[r][p] = b;
                    }
                }
            }
            returned.push(mine);
        }
        self.counters.executed();
        Ok(returned)
    }
}
