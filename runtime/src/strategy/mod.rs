//! Distribution strategies: where a model's graphs run, and over how many data-parallel
//! replicas — TensorFlow's `tf.distribute` for one machine.
//!
//! - [`OneDeviceStrategy`]: one device, no replication.
//! - [`MirroredStrategy`]: N replicas on N devices of one kind (XLA devices: the CPU
//!   plugin's virtual devices, GPUs, TPU cores; or N worker threads of the native backend),
//!   each training on its share of every global batch, gradients summed by an all-reduce
//!   inside the step.
//! - [`TpuStrategy`]: mirrored over every core of the local TPU, found through a
//!   [`TpuClusterResolver`].
//!
//! A model created inside [`Strategy::scope`] (or given one by `Model::set_strategy`)
//! keeps its parameters, optimizer state and metrics replicated on the strategy's devices;
//! `fit` then takes the GLOBAL batch and splits it over the replicas. [`Strategy::auto`]
//! picks the best strategy present and says what it chose; `STRATA_STRATEGY` forces one.

mod auto;
pub use crate::backend::pjrt::pci;
mod resolver;
mod scope;
mod spec;

pub use pci::TpuChip;
pub use resolver::{ResolverOptions, TpuClusterResolver};
pub use spec::{StrategySpec, STRATEGY_ENV};

use crate::backend::native::NativeBackend;
use crate::backend::pjrt::PjrtBackend;
use crate::backend::{Backend, Device, MirroredBackend, ReplicaBackend};
use crate::{Error, Result};
use std::fmt;
use std::sync::Arc;

/// What kind of strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrategyKind {
    OneDevice,
    Mirrored,
    Tpu,
}

/// A device as TensorFlow's `tf.config.list_logical_devices` lists it.
#[derive(Clone, PartialEq, Eq)]
pub struct LogicalDevice {
    /// E.g. `/job:localhost/replica:0/task:0/device:TPU:0`.
    pub name: String,
    /// `TPU`, `GPU` or `CPU`.
    pub device_type: String,
    /// What the device is, as its backend reports it (`TPU v4`, `cpu`, `cpu thread`).
    pub kind: String,
}

impl fmt::Debug for LogicalDevice {
    /// As TensorFlow prints it, so the tutorial's output reads the same.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LogicalDevice(name='{}', device_type='{}')",
            self.name, self.device_type
        )
    }
}

/// Where a model runs: a backend, its devices, and how many replicas train in sync.
#[derive(Clone)]
pub struct Strategy {
    kind: StrategyKind,
    device: Device,
    replicas: usize,
    backend: Arc<dyn Backend>,
    devices: Vec<LogicalDevice>,
    /// Why `auto` (or the environment) chose it.
    reason: Option<String>,
}

impl fmt::Debug for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Strategy({self})")
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.replicas;
        let what = match self.device {
            Device::Native => "native CPU thread",
            Device::XlaCpu { .. } => "XLA CPU device",
            Device::Cuda => "GPU",
            Device::Tpu => "TPU core",
        };
        let s = if n == 1 { "" } else { "s" };
        match self.kind {
            StrategyKind::OneDevice => write!(f, "OneDeviceStrategy on {}", self.device),
            StrategyKind::Mirrored => write!(f, "MirroredStrategy over {n} {what}{s}"),
            StrategyKind::Tpu => write!(f, "TPUStrategy over {n} {what}{s}"),
        }
    }
}

/// TensorFlow's `TPUStrategy`: mirrored over every core of the local TPU.
pub struct TpuStrategy;

impl TpuStrategy {
    /// The strategy over every core of `resolver`'s TPU, which must be initialized.
    // Named after TensorFlow's class so the tutorial reads the same; it builds a Strategy.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(resolver: &TpuClusterResolver) -> Result<Strategy> {
        if !resolver.is_initialized() {
            return Err(Error::invalid(
                "TpuStrategy::new",
                "the resolver's TPU is not initialized: call resolver.connect() and resolver.initialize() first",
            ));
        }
        let backend = resolver.backend()?;
        let n = backend.device_count();
        Strategy::replicated(StrategyKind::Tpu, Device::Tpu, backend, n)
    }
}

/// TensorFlow's `MirroredStrategy`: data parallelism over the devices of one kind.
pub struct MirroredStrategy;

impl MirroredStrategy {
    /// Mirrored over every device of `device`: all GPUs or TPU cores, the CPU plugin's
    /// devices (`xla-cpu:N` makes N; plain `xla-cpu` is one), or for the native backend
    /// one thread per core.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(device: Device) -> Result<Strategy> {
        Strategy::mirrored(device, None)
    }

    /// Mirrored over the first `replicas` devices of `device` (native: `replicas` threads;
    /// `xla-cpu`: a client with `replicas` devices).
    pub fn with_replicas(device: Device, replicas: usize) -> Result<Strategy> {
        Strategy::mirrored(device, Some(replicas))
    }
}

/// TensorFlow's `OneDeviceStrategy`.
pub struct OneDeviceStrategy;

impl OneDeviceStrategy {
    #[allow(clippy::new_ret_no_self)]
    pub fn new(device: Device) -> Result<Strategy> {
        Strategy::one_device(device)
    }
}

/// The native backend's default replica count: the cores, rounded down to a power of
/// two so the usual batch sizes split evenly.
pub fn native_default_replicas() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    1 << (usize::BITS - 1 - cores.max(1).leading_zeros())
}

impl Strategy {
    /// No replication: every graph runs once, on `device`.
    pub fn one_device(device: Device) -> Result<Strategy> {
        let backend: Arc<dyn Backend> = match device {
            Device::Tpu => resolver::local_tpu_backend()?,
            _ => Arc::from(device.backend()?),
        };
        Ok(Strategy {
            kind: StrategyKind::OneDevice,
            device,
            replicas: 1,
            devices: vec![logical(device, 0, device.to_string())],
            backend,
            reason: None,
        })
    }

    /// Data parallelism over `replicas` devices of `device` (all of them when `None`).
    pub fn mirrored(device: Device, replicas: Option<usize>) -> Result<Strategy> {
        match device {
            Device::Native => {
                let n = replicas.unwrap_or_else(native_default_replicas);
                Strategy::replicated(
                    StrategyKind::Mirrored,
                    device,
                    Arc::new(NativeBackend::new()),
                    n,
                )
            }
            Device::XlaCpu { devices } => {
                // The client needs at least as many devices as replicas.
                let devices = match (devices, replicas) {
                    (Some(d), Some(r)) if r > d => {
                        return Err(Error::invalid(
                            "MirroredStrategy",
                            format!("{r} replicas over {d} XLA CPU devices: ask for at most {d}, or for xla-cpu:{r}"),
                        ))
                    }
                    (Some(d), _) => Some(d),
                    (None, r) => r,
                };
                let device = Device::XlaCpu { devices };
                let backend = Arc::new(PjrtBackend::new(&device)?);
                let n = replicas.unwrap_or(backend.device_count());
                Strategy::replicated(StrategyKind::Mirrored, device, backend, n)
            }
            Device::Cuda => {
                let backend = Arc::new(PjrtBackend::new(&device)?);
                let n = replicas.unwrap_or(backend.device_count());
                Strategy::replicated(StrategyKind::Mirrored, device, backend, n)
            }
            Device::Tpu => {
                let backend = resolver::local_tpu_backend()?;
                let n = replicas.unwrap_or(backend.device_count());
                Strategy::replicated(StrategyKind::Mirrored, device, backend, n)
            }
        }
    }

    fn replicated(
        kind: StrategyKind,
        device: Device,
        inner: Arc<dyn ReplicaBackend>,
        replicas: usize,
    ) -> Result<Strategy> {
        let devices = (0..replicas)
            .map(|r| logical(device, r, inner.replica_device_kind(r)))
            .collect();
        let backend = Arc::new(MirroredBackend::new(inner, replicas)?);
        Ok(Strategy {
            kind,
            device,
            replicas,
            backend,
            devices,
            reason: None,
        })
    }

    pub fn kind(&self) -> StrategyKind {
        self.kind
    }

    /// The device kind the strategy runs on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The devices replicas run on (TensorFlow's `list_logical_devices`).
    pub fn devices(&self) -> &[LogicalDevice] {
        &self.devices
    }

    /// How many replicas train in sync: each takes `batch / replicas` of a global batch.
    pub fn num_replicas_in_sync(&self) -> usize {
        self.replicas
    }

    /// The backend a model under this strategy runs on (a [`MirroredBackend`] when the
    /// strategy replicates).
    pub fn backend(&self) -> Arc<dyn Backend> {
        self.backend.clone()
    }

    /// Why [`auto`](Self::auto) or the environment chose this strategy.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// The `STRATA_STRATEGY` spelling of this strategy.
    pub fn spec(&self) -> StrategySpec {
        match self.kind {
            StrategyKind::OneDevice => StrategySpec::One(self.device),
            StrategyKind::Tpu => StrategySpec::Tpu,
            StrategyKind::Mirrored => {
                let device = match self.device {
                    Device::XlaCpu { .. } => Device::XlaCpu { devices: None },
                    d => d,
                };
                StrategySpec::Mirrored {
                    device,
                    replicas: Some(self.replicas),
                }
            }
        }
    }

    /// Runs `f` with this strategy current on this thread: models created inside live on
    /// its devices (`strategy.scope(|| model![...])`, TensorFlow's `with strategy.scope()`).
    /// Scopes nest; the innermost wins.
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        let _entered = scope::enter(self.clone());
        f()
    }

    /// The strategy of the innermost [`scope`](Self::scope) running on this thread.
    pub fn current() -> Option<Strategy> {
        scope::current()
    }

    /// The best strategy this machine offers: the TPU if present, else every GPU, else
    /// the native backend (on a CPU faster than XLA: 2.6× at batch 32, 1.3× at 1024 in the
    /// README's run). What the environment forces comes first (see
    /// [`from_env`](Self::from_env)). Prints one line to stderr saying what it chose and
    /// why; [`reason`](Self::reason) holds the same.
    pub fn auto() -> Result<Strategy> {
        let s = match spec::forced()? {
            Some(s) => s,
            None => auto::probe()?,
        };
        s.announce();
        Ok(s)
    }

    /// The strategy the environment forces, if it does: `STRATA_STRATEGY` (a
    /// [`StrategySpec`]: `tpu`, `mirrored:xla-cpu:4`, `one:native`, ...), else the best
    /// strategy on `STRATA_DEVICE`'s device. Prints one line to stderr when it does.
    pub fn from_env() -> Result<Option<Strategy>> {
        let s = spec::forced()?;
        if let Some(s) = &s {
            s.announce();
        }
        Ok(s)
    }

    fn announce(&self) {
        eprintln!(
            "strata: using {self} ({})",
            self.reason().unwrap_or("chosen by Strategy::auto")
        );
    }

    /// What `auto` would pick on `device` alone: every TPU core or GPU, mirrored; on the
    /// CPU one device (`xla-cpu:N`: mirrored over its N devices). The measurements behind
    /// the CPU choice are in `strategy/auto.rs`.
    pub fn default_for(device: Device) -> Result<Strategy> {
        auto::default_for(device)
    }

    pub(crate) fn with_reason(mut self, reason: impl Into<String>) -> Strategy {
        self.reason = Some(reason.into());
        self
    }
}

/// TensorFlow's name for replica `r`'s device.
fn logical(device: Device, r: usize, kind: String) -> LogicalDevice {
    let device_type = match device {
        Device::Tpu => "TPU",
        Device::Cuda => "GPU",
        Device::Native | Device::XlaCpu { .. } => "CPU",
    };
    LogicalDevice {
        name: format!("/job:localhost/replica:0/task:0/device:{device_type}:{r}"),
        device_type: device_type.into(),
        kind,
    }
}
