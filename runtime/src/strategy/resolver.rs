//! `TpuClusterResolver`: finds the libtpu plugin and the local TPU chips, then (explicitly)
//! loads the plugin and opens the TPU — TensorFlow's `TPUClusterResolver`,
//! `experimental_connect_to_cluster` and `initialize_tpu_system`.
//!
//! Every step on a machine without a TPU fails within milliseconds to a second with
//! [`Error::TpuNotFound`] listing what was tried: `new` reads the PCI bus before touching
//! libtpu (whose own probe can block for minutes on cloud-metadata queries), and libtpu
//! itself is only loaded with its metadata queries disabled unless the bus shows chips.

use super::pci::{self, PciScan, TpuChip};
use super::{Strategy, TpuStrategy};
use crate::backend::pjrt::{find_plugin, load_plugin, PjrtBackend, PjrtOptions, PluginKind};
use crate::backend::Device;
use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Where the resolver looks (the defaults are this machine's; tests point them elsewhere).
#[derive(Clone, Debug)]
pub struct ResolverOptions {
    /// The libtpu plugin file; `None` discovers it (see `backend::pjrt::plugin`).
    pub plugin: Option<PathBuf>,
    /// The sysfs PCI device directory to look for TPU chips in.
    pub pci_devices: PathBuf,
}

impl Default for ResolverOptions {
    fn default() -> Self {
        ResolverOptions {
            plugin: None,
            pci_devices: PathBuf::from(pci::PCI_DEVICES),
        }
    }
}

/// The local TPU: its chips, the libtpu plugin, and once initialized the open client.
pub struct TpuClusterResolver {
    plugin: PathBuf,
    chips: Vec<TpuChip>,
    /// What `new` found, repeated in later errors.
    tried: Vec<String>,
    connected: OnceLock<()>,
    backend: OnceLock<Arc<PjrtBackend>>,
}

impl std::fmt::Debug for TpuClusterResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TpuClusterResolver")
            .field("plugin", &self.plugin)
            .field("chips", &self.chips)
            .field("connected", &self.connected.get().is_some())
            .field("initialized", &self.backend.get().is_some())
            .finish()
    }
}

/// One TPU client per process: libtpu owns the chips, and a second client would fight the
/// first for them.
fn process_tpu() -> &'static Mutex<Option<Arc<PjrtBackend>>> {
    static TPU: OnceLock<Mutex<Option<Arc<PjrtBackend>>>> = OnceLock::new();
    TPU.get_or_init(|| Mutex::new(None))
}

impl TpuClusterResolver {
    /// The TPU named `tpu`: `""` (or `"local"`) is this machine's TPU, the only kind
    /// supported so far. Finds the libtpu plugin and the TPU chips on the PCI bus; loads
    /// nothing yet. Without chips (or without libtpu) this is [`Error::TpuNotFound`] saying
    /// what was tried; a TPU name or address is [`Error::Unsupported`].
    pub fn new(tpu: &str) -> Result<TpuClusterResolver> {
        TpuClusterResolver::with_options(tpu, ResolverOptions::default())
    }

    /// [`new`](Self::new) looking in the given places.
    pub fn with_options(tpu: &str, options: ResolverOptions) -> Result<TpuClusterResolver> {
        check_name(tpu)?;
        let plugin = match options.plugin {
            Some(p) if p.is_file() => Ok(p),
            Some(p) => Err(Error::Plugin {
                path: p.display().to_string(),
                message: "libtpu's plugin file does not exist".into(),
            }),
            None => find_plugin(PluginKind::Tpu, None),
        };
        let scan = pci::scan(&options.pci_devices);
        // The bus first: it decides whether there is a TPU at all.
        let tried = vec![
            scan.describe(&options.pci_devices),
            match &plugin {
                Ok(p) => format!("libtpu found at {}", p.display()),
                Err(Error::PluginNotFound { install, .. }) => {
                    format!("libtpu is not installed (`{install}`)")
                }
                Err(e) => e.to_string(),
            },
        ];
        let plugin = match (plugin, &scan) {
            // Chips but no plugin: what is missing is the plugin, with its install command.
            (Err(e), PciScan::Found { chips, .. }) if !chips.is_empty() => return Err(e),
            (Err(_), _) => return Err(Error::TpuNotFound { tried }),
            (Ok(_), PciScan::Found { chips, .. }) if chips.is_empty() => {
                return Err(Error::TpuNotFound { tried })
            }
            // Chips, or a bus that could not be read (then libtpu decides at initialize).
            (Ok(p), _) => p,
        };
        Ok(TpuClusterResolver {
            plugin,
            chips: scan.chips().to_vec(),
            tried,
            connected: OnceLock::new(),
            backend: OnceLock::new(),
        })
    }

    /// The libtpu plugin file in use.
    pub fn plugin(&self) -> &Path {
        &self.plugin
    }

    /// The TPU chips the PCI bus shows (empty when the bus could not be read).
    pub fn chips(&self) -> &[TpuChip] {
        &self.chips
    }

    /// Loads and initialises libtpu (once per process; a second call returns at once).
    pub fn connect(&self) -> Result<()> {
        if self.connected.get().is_some() {
            return Ok(());
        }
        load_plugin(&self.plugin)?;
        let _ = self.connected.set(());
        Ok(())
    }

    pub fn is_connected(&self) -> bool {
        self.connected.get().is_some()
    }

    /// Opens the TPU: creates libtpu's client over every local TPU core (once per process;
    /// a second call returns at once). Needs [`connect`](Self::connect) first. Without a
    /// usable TPU this is [`Error::TpuNotFound`] with libtpu's own answer.
    pub fn initialize(&self) -> Result<()> {
        if self.backend.get().is_some() {
            return Ok(());
        }
        if !self.is_connected() {
            return Err(Error::invalid(
                "TpuClusterResolver::initialize",
                "call connect() first: it loads libtpu",
            ));
        }
        let mut tpu = process_tpu().lock().unwrap_or_else(PoisonError::into_inner);
        let backend = match tpu.as_ref() {
            Some(b) => b.clone(),
            None => {
                let options = PjrtOptions {
                    plugin: Some(self.plugin.clone()),
                    ..PjrtOptions::default()
                };
                let b = PjrtBackend::with_options(&Device::Tpu, options).map_err(|e| match e {
                    Error::DeviceUnavailable { message, .. } => {
                        let mut tried = self.tried.clone();
                        tried.push(format!("libtpu found no usable TPU: {message}"));
                        Error::TpuNotFound { tried }
                    }
                    e => e,
                })?;
                let b = Arc::new(b);
                *tpu = Some(b.clone());
                b
            }
        };
        let _ = self.backend.set(backend);
        Ok(())
    }

    pub fn is_initialized(&self) -> bool {
        self.backend.get().is_some()
    }

    /// The TPU client, after [`initialize`](Self::initialize).
    pub fn backend(&self) -> Result<Arc<PjrtBackend>> {
        self.backend.get().cloned().ok_or_else(|| {
            Error::invalid(
                "TpuClusterResolver",
                "the TPU is not initialized: call connect() and initialize() first",
            )
        })
    }
}

/// Only this machine's TPU can be used so far.
fn check_name(tpu: &str) -> Result<()> {
    let t = tpu.trim();
    if t.is_empty() || t == "local" {
        return Ok(());
    }
    let remote = t.contains("://") || t.contains(':') || t.contains('/');
    Err(Error::Unsupported {
        what: format!("the TPU `{t}`"),
        message: if remote {
            "remote TPU addresses are not supported yet; run on the TPU VM and pass \"\" for its local TPU".into()
        } else {
            "named TPUs (Cloud TPU nodes reached by name) are not supported yet; run on the TPU VM and pass \"\" for its local TPU".into()
        },
    })
}

/// The tutorial's steps: resolver, connect, initialize, strategy.
pub(super) fn local_tpu() -> Result<Strategy> {
    let resolver = TpuClusterResolver::new("")?;
    resolver.connect()?;
    resolver.initialize()?;
    TpuStrategy::new(&resolver)
}

/// The process's TPU client, through the resolver: it fails fast without a TPU, and it
/// shares the one client libtpu allows with every other user in the process.
pub(super) fn local_tpu_backend() -> Result<Arc<PjrtBackend>> {
    let resolver = TpuClusterResolver::new("")?;
    resolver.connect()?;
    resolver.initialize()?;
    resolver.backend()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_addresses_are_not_supported_yet() {
        for name in [
            "my-tpu",
            "grpc://10.0.0.2:8470",
            "10.0.0.2:8470",
            "projects/p/tpus/t",
        ] {
            match TpuClusterResolver::new(name) {
                Err(Error::Unsupported { what, message }) => {
                    assert!(what.contains(name), "{what}");
                    assert!(message.contains("not supported yet"), "{message}");
                }
                other => panic!("{name}: expected Unsupported, got {other:?}"),
            }
        }
    }
}
