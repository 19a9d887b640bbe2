//! From a device's name to a backend: the one place that knows every backend, above
//! them all (the trait module and the backends themselves know only the name).

use super::native::NativeBackend;
use super::pjrt::{PjrtBackend, PluginKind};
use super::{Backend, Device};
use crate::Result;

impl Device {
    /// The PJRT plugin kind this device needs (`None` for the native backend).
    pub fn plugin_kind(&self) -> Option<PluginKind> {
        match self {
            Device::Native => None,
            Device::XlaCpu { .. } => Some(PluginKind::Cpu),
            Device::Cuda => Some(PluginKind::Cuda),
            Device::Tpu => Some(PluginKind::Tpu),
        }
    }

    /// A backend for this device: the native backend, or a PJRT client of the plugin found
    /// by discovery (see [`crate::backend::pjrt::plugin`]).
    pub fn backend(&self) -> Result<Box<dyn Backend>> {
        match self {
            Device::Native => Ok(Box::new(NativeBackend::new())),
            _ => Ok(Box::new(PjrtBackend::new(self)?)),
        }
    }
}

/// The backend for the device named by `STRATA_DEVICE` (native when unset).
pub fn backend_from_env() -> Result<Box<dyn Backend>> {
    Device::from_env()?.backend()
}
