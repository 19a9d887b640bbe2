//! Replicated programs on XLA: one compile with `num_replicas = N` (replica `r` assigned
//! to the client's device `r`), one execute over N argument lists. The collectives of the
//! program lower to `stablehlo.all_reduce` over the group of every replica (see
//! `ops::collective`); XLA runs them between the devices: the CPU plugin's virtual devices
//! (`xla-cpu:N`), GPUs or TPU cores.

use super::executable::PjrtExecutable;
use super::options::BuildOptions;
use super::xla_buffer;
use super::{stablehlo, PjrtBackend};
use crate::backend::replicated::{check_replicas, ReplicaBackend, ReplicatedExecutable};
use crate::backend::{Buffer, CompileOptions};
use crate::ir::Graph;
use crate::{Error, Result, Tensor};

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
        Ok(xla_buffer(t.ty(), self.client.upload(t, replica)?))
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
        Ok(Box::new(PjrtExecutable::new(
            self.client.clone(),
            exe,
            graph,
            options,
            self.executions.clone(),
            (replicas, true),
        )))
    }
}
