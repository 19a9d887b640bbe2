//! What a native kernel may use beyond its operands: scratch memory and which replica it
//! runs as.

use super::data::{self, Data, DataMut};
use super::hub::Hub;
use crate::{Error, Result};

/// Per-executable state kernels may use: scratch memory that grows once and is reused,
/// and the replica this execution is.
#[derive(Debug, Default)]
pub(crate) struct KernelCtx {
    pub scratch_f32: [Vec<f32>; 2],
    pub scratch_f64: [Vec<f64>; 2],
    pub replica: ReplicaCtx,
}

/// Which replica of a replicated computation is running, and how it reaches the others.
/// A lone executable is replica 0 of 1, where `all_reduce_sum` is the identity.
#[derive(Debug)]
pub(crate) struct ReplicaCtx {
    pub id: usize,
    pub count: usize,
    /// Where the replicas of a replicated executable meet (see `replicated`).
    pub hub: Option<std::sync::Arc<Hub>>,
}

impl Default for ReplicaCtx {
    fn default() -> Self {
        ReplicaCtx {
            id: 0,
            count: 1,
            hub: None,
        }
    }
}

impl ReplicaCtx {
    pub fn all_reduce_sum(&self, x: Data<'_>, out: DataMut<'_>) -> Result<()> {
        match &self.hub {
            Some(hub) => hub.all_reduce_sum(self.id, x, out),
            None if self.count == 1 => {
                data::with_same!("all_reduce_sum", x, out, |a, o| o.copy_from_slice(a));
                Ok(())
            }
            None => Err(Error::Backend {
                backend: "native",
                message: format!(
                    "all_reduce_sum over {} replicas needs a replicated executable",
                    self.count
                ),
            }),
        }
    }
}
