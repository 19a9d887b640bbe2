//! Strategies by name, as `STRATA_STRATEGY` spells them: `auto`, `tpu`, `one:DEVICE`
//! (`one:native`, `one:xla-cpu`, ...), `mirrored:native[:N]`, `mirrored:xla-cpu[:N]`,
//! `mirrored:cuda[:N]`, `mirrored:tpu[:N]`.

use super::Strategy;
use crate::backend::{Device, DEVICE_ENV};
use crate::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// The environment variable that forces a strategy on any program using
/// [`Strategy::auto`].
pub const STRATEGY_ENV: &str = "STRATA_STRATEGY";

/// A strategy by name, before anything is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrategySpec {
    /// Whatever [`Strategy::auto`] finds.
    Auto,
    /// Every core of the local TPU.
    Tpu,
    /// One device, no replication.
    One(Device),
    /// `replicas` replicas over devices of `device`'s kind (all of them when `None`;
    /// `xla-cpu` without a count has one device, `xla-cpu:N` has N).
    Mirrored {
        device: Device,
        replicas: Option<usize>,
    },
}

impl StrategySpec {
    /// Opens the devices and builds the strategy.
    pub fn build(&self) -> Result<Strategy> {
        match *self {
            StrategySpec::Auto => super::auto::probe(),
            StrategySpec::Tpu => super::resolver::local_tpu(),
            StrategySpec::One(d) => Strategy::one_device(d),
            StrategySpec::Mirrored { device, replicas } => Strategy::mirrored(device, replicas),
        }
    }
}

/// The strategy `STRATA_STRATEGY` forces, if set.
pub(super) fn from_env() -> Result<Option<Strategy>> {
    match std::env::var(STRATEGY_ENV) {
        Ok(s) if !s.trim().is_empty() => {
            let spec: StrategySpec = s.parse()?;
            let strategy = spec.build()?;
            let why = match strategy.reason() {
                Some(r) => format!("{STRATEGY_ENV}={}: {r}", s.trim()),
                None => format!("{STRATEGY_ENV}={}", s.trim()),
            };
            Ok(Some(strategy.with_reason(why)))
        }
        Ok(_) | Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(s)) => Err(Error::StrategyParse {
            input: s.to_string_lossy().into_owned(),
            message: format!("{STRATEGY_ENV} is not valid UTF-8"),
        }),
    }
}

/// `STRATA_STRATEGY`, else the best strategy on `STRATA_DEVICE`'s device, if either is set.
pub(super) fn forced() -> Result<Option<Strategy>> {
    if let Some(s) = from_env()? {
        return Ok(Some(s));
    }
    if std::env::var_os(DEVICE_ENV).is_some_and(|d| !d.is_empty()) {
        let device = Device::from_env()?;
        let s = super::auto::default_for(device)?;
        return Ok(Some(s.with_reason(format!("{DEVICE_ENV}={device}"))));
    }
    Ok(None)
}

/// Most replicas a name may ask for (a guard against typos, as for `xla-cpu:N`).
const MAX_REPLICAS: usize = crate::backend::native::MAX_NATIVE_REPLICAS;

impl FromStr for StrategySpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<StrategySpec> {
        let err = |message: String| Error::StrategyParse {
            input: s.to_string(),
            message,
        };
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "auto" => return Ok(StrategySpec::Auto),
            "tpu" => return Ok(StrategySpec::Tpu),
            _ => {}
        }
        if let Some(d) = t.strip_prefix("one:") {
            let device = d.parse::<Device>().map_err(|e| err(e.to_string()))?;
            return Ok(StrategySpec::One(device));
        }
        let Some(rest) = t.strip_prefix("mirrored:") else {
            return Err(err("not a strategy name".into()));
        };
        let (kind, count) = match rest.split_once(':') {
            Some((k, n)) => {
                let n: usize = n
                    .parse()
                    .map_err(|_| err(format!("`{n}` is not a replica count")))?;
                if n == 0 || n > MAX_REPLICAS {
                    return Err(err(format!(
                        "the replica count must be between 1 and {MAX_REPLICAS}, got {n}"
                    )));
                }
                (k, Some(n))
            }
            None => (rest, None),
        };
        let device = match kind {
            "native" => Device::Native,
            // `xla-cpu:N` opens the CPU plugin with N devices, one per replica.
            "xla-cpu" => Device::XlaCpu { devices: count },
            "cuda" => Device::Cuda,
            "tpu" => Device::Tpu,
            k => {
                return Err(err(format!(
                    "`{k}` is not a device kind to mirror over (native, xla-cpu, cuda or tpu)"
                )))
            }
        };
        Ok(StrategySpec::Mirrored {
            device,
            replicas: count,
        })
    }
}

impl fmt::Display for StrategySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StrategySpec::Auto => f.write_str("auto"),
            StrategySpec::Tpu => f.write_str("tpu"),
            StrategySpec::One(d) => write!(f, "one:{d}"),
            StrategySpec::Mirrored { device, replicas } => {
                let kind = match device {
                    Device::Native => "native",
                    Device::XlaCpu { .. } => "xla-cpu",
                    Device::Cuda => "cuda",
                    Device::Tpu => "tpu",
                };
                match replicas {
                    Some(n) => write!(f, "mirrored:{kind}:{n}"),
                    None => write!(f, "mirrored:{kind}"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in [
            "auto",
            "tpu",
            "one:native",
            "one:xla-cpu",
            "one:xla-cpu:2",
            "one:cuda",
            "mirrored:native",
            "mirrored:native:2",
            "mirrored:xla-cpu:4",
            "mirrored:cuda:8",
            "mirrored:tpu",
        ] {
            let spec: StrategySpec = s.parse().unwrap();
            assert_eq!(spec.to_string(), s);
        }
        assert_eq!(
            " Mirrored:XLA-CPU:4 ".parse::<StrategySpec>().unwrap(),
            StrategySpec::Mirrored {
                device: Device::XlaCpu { devices: Some(4) },
                replicas: Some(4)
            }
        );
    }

    #[test]
    fn bad_names_are_typed_errors() {
        for s in [
            "",
            "gpu",
            "one:",
            "one:gpu",
            "mirrored",
            "mirrored:",
            "mirrored:gpu:2",
            "mirrored:native:0",
            "mirrored:native:x",
            "mirrored:xla-cpu:99999",
        ] {
            match s.parse::<StrategySpec>() {
                Err(Error::StrategyParse { input, .. }) => assert_eq!(input, s),
                other => panic!("{s:?}: expected a StrategyParse error, got {other:?}"),
            }
        }
    }
}
