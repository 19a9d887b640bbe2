//! Where a model's graphs run. An explicit choice wins: the backend given in code
//! (`set_device`, `set_backend`, `set_strategy`) or the strategy scope the model was created
//! in. Without one, the device `STRATA_DEVICE` named when the model was created, else the
//! native backend.
//!
//! `model!` returns a `Model`, not a `Result`, and opening a device can fail (a name that
//! is not a device, a missing plugin, no TPU), so the variable is read when the model is
//! created (as a scope is) and the device it names is opened at the first call that needs
//! it: `compile`, or `predict` on a model never compiled. A bad value is a typed error
//! there.

use crate::backend::native::NativeBackend;
use crate::backend::{Backend, Device, DEVICE_ENV};
use crate::strategy::Strategy;
use crate::{Error, Result};
use std::env::VarError;
use std::sync::{Arc, OnceLock};

pub(crate) struct Placement {
    /// The backend, once chosen or opened.
    backend: OnceLock<Arc<dyn Backend>>,
    /// `STRATA_DEVICE` as it was when the model was created (unused once `backend` is set).
    env: std::result::Result<String, VarError>,
}

impl Placement {
    /// A backend chosen in code or by a strategy scope.
    pub fn chosen(backend: Arc<dyn Backend>) -> Placement {
        Placement {
            backend: OnceLock::from(backend),
            env: Err(VarError::NotPresent),
        }
    }

    /// The placement of a model given no backend: the device `STRATA_DEVICE` names, opened
    /// later; the native backend at once when the variable is unset or empty.
    pub fn from_env() -> Placement {
        match std::env::var(DEVICE_ENV) {
            Err(VarError::NotPresent) => Placement::chosen(Arc::new(NativeBackend::new())),
            Ok(s) if s.trim().is_empty() => Placement::chosen(Arc::new(NativeBackend::new())),
            env => Placement {
                backend: OnceLock::new(),
                env,
            },
        }
    }

    /// The backend, if chosen or opened already.
    pub fn ready(&self) -> Option<&Arc<dyn Backend>> {
        self.backend.get()
    }

    /// The backend, opening the device `STRATA_DEVICE` named if that is not done yet;
    /// `what` is the call that needs it (its errors name it).
    pub fn backend(&self, what: &str) -> Result<&Arc<dyn Backend>> {
        if let Some(b) = self.backend.get() {
            return Ok(b);
        }
        let device = Device::from_var(self.env.clone()).map_err(|e| match e {
            Error::DeviceParse { input, message } => Error::DeviceParse {
                input,
                message: format!(
                    "{what} opens the device {DEVICE_ENV} names (for a model created outside \
                     any strategy scope and given no device in code): {message}"
                ),
            },
            e => e,
        })?;
        // One device, as a model given `Device` in code; a strategy (`STRATA_STRATEGY`,
        // `Strategy::auto`) is what replicates. Through the strategy so that a TPU is
        // opened as the resolver opens it: the one client libtpu allows, shared.
        let opened = Strategy::one_device(device)?.backend();
        Ok(self.backend.get_or_init(|| opened))
    }
}
