//! Where a program runs, by name: `native`, `xla-cpu`, `xla-cpu:N`, `cuda`, `tpu`.

use crate::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// The environment variable that picks the device when a program does not.
pub const DEVICE_ENV: &str = "STRATA_DEVICE";

/// A device to run graphs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Device {
    /// The embedded CPU backend: nothing to install.
    #[default]
    Native,
    /// XLA on the CPU through a PJRT plugin. `devices` is the number of CPU devices the
    /// client exposes (`xla-cpu:N`, for multi-device programs without accelerators);
    /// `None` (plain `xla-cpu`) is one device, as JAX's CPU client.
    XlaCpu { devices: Option<usize> },
    /// An NVIDIA GPU through the CUDA PJRT plugin.
    Cuda,
    /// A Cloud TPU through libtpu.
    Tpu,
}

/// `xla-cpu:N` accepts at most this many devices (a guard against typos creating
/// thousands of thread pools).
pub const MAX_CPU_DEVICES: usize = 1024;

impl Device {
    /// The device named by `STRATA_DEVICE`, or [`Device::Native`] when it is unset or empty.
    pub fn from_env() -> Result<Device> {
        Device::from_var(std::env::var(DEVICE_ENV))
    }

    /// The device a value of `STRATA_DEVICE` names (as `std::env::var` reads it), so that a
    /// value read earlier can be parsed later.
    pub fn from_var(value: std::result::Result<String, std::env::VarError>) -> Result<Device> {
        match value {
            Ok(s) if !s.trim().is_empty() => s.parse(),
            Ok(_) | Err(std::env::VarError::NotPresent) => Ok(Device::Native),
            Err(std::env::VarError::NotUnicode(s)) => Err(Error::DeviceParse {
                input: s.to_string_lossy().into_owned(),
                message: format!("{DEVICE_ENV} is not valid UTF-8"),
            }),
        }
    }
}

impl FromStr for Device {
    type Err = Error;

    fn from_str(s: &str) -> Result<Device> {
        let err = |message: String| Error::DeviceParse {
            input: s.to_string(),
            message,
        };
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "native" => return Ok(Device::Native),
            "xla-cpu" => return Ok(Device::XlaCpu { devices: None }),
            "cuda" => return Ok(Device::Cuda),
            "tpu" => return Ok(Device::Tpu),
            _ => {}
        }
        if let Some(n) = t.strip_prefix("xla-cpu:") {
            let n: usize = n
                .parse()
                .map_err(|_| err(format!("`{n}` is not a device count")))?;
            if n == 0 || n > MAX_CPU_DEVICES {
                return Err(err(format!(
                    "the CPU device count must be between 1 and {MAX_CPU_DEVICES}, got {n}"
                )));
            }
            return Ok(Device::XlaCpu { devices: Some(n) });
        }
        Err(err("not a device name".into()))
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Native => f.write_str("native"),
            Device::XlaCpu { devices: None } => f.write_str("xla-cpu"),
            Device::XlaCpu { devices: Some(n) } => write!(f, "xla-cpu:{n}"),
            Device::Cuda => f.write_str("cuda"),
            Device::Tpu => f.write_str("tpu"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in ["native", "xla-cpu", "xla-cpu:4", "cuda", "tpu"] {
            let d: Device = s.parse().unwrap();
            assert_eq!(d.to_string(), s);
        }
        assert_eq!(
            " XLA-CPU:2 ".parse::<Device>().unwrap(),
            Device::XlaCpu { devices: Some(2) }
        );
    }

    #[test]
    fn the_variable_names_the_device() {
        // Through the value, not the process environment: every model created in this
        // binary reads STRATA_DEVICE, so setting it here would race with them.
        use std::env::VarError;
        let var = |s: &str| Device::from_var(Ok(s.to_string()));
        assert_eq!(
            var("xla-cpu:3").unwrap(),
            Device::XlaCpu { devices: Some(3) }
        );
        assert!(matches!(var("quantum"), Err(Error::DeviceParse { .. })));
        assert_eq!(var("").unwrap(), Device::Native);
        assert_eq!(var("  ").unwrap(), Device::Native);
        assert_eq!(
            Device::from_var(Err(VarError::NotPresent)).unwrap(),
            Device::Native
        );
        let not_unicode = std::ffi::OsString::from("x");
        match Device::from_var(Err(VarError::NotUnicode(not_unicode))) {
            Err(Error::DeviceParse { message, .. }) => assert!(message.contains(DEVICE_ENV)),
            other => panic!("expected a DeviceParse error, got {other:?}"),
        }
    }

    #[test]
    fn bad_names_are_typed_errors() {
        for s in [
            "",
            "gpu",
            "xla-cpu:",
            "xla-cpu:0",
            "xla-cpu:x",
            "xla-cpu:99999",
            "tpu:1",
        ] {
            match s.parse::<Device>() {
                Err(Error::DeviceParse { input, .. }) => assert_eq!(input, s),
                other => panic!("{s:?}: expected a DeviceParse error, got {other:?}"),
            }
        }
    }
}
