//! The XLA backend: graphs printed as StableHLO, compiled and run by a PJRT plugin — the
//! CPU plugin, the CUDA plugin or libtpu, through one FFI layer written here.
//!
//! Files: `ffi` (our declarations of the C API subset), `api` (a loaded plugin and checked
//! calls into its table), `client` (owned client, buffer and executable handles),
//! `plugin` (discovery), `options` (compile options), `stablehlo` (the module printer),
//! `cache` (the persistent compilation cache), `executable` (running compiled graphs).

mod api;
mod cache;
mod client;
mod executable;
mod ffi;
mod options;
pub mod pci;
pub mod plugin;
mod replicated;
pub(crate) mod stablehlo;

pub(crate) use cache::{encode_entry as encode_cache_entry, parse_entry as parse_cache_entry};
pub use cache::{CacheDir, CacheStats};
pub use executable::ExecutionStats;
pub use plugin::{find_plugin, find_plugin_in, KnownPlugin, PluginKind, KNOWN_PLUGINS};
pub use stablehlo::stablehlo_text;

pub(crate) use client::DeviceBuffer;

use super::{Backend, Buffer, CompileOptions, Device, Executable};
use crate::ir::Graph;
use crate::{Error, Result, Tensor};
use api::Api;
use cache::{Cache, Counters};
use client::{Client, OptionValue};
use executable::ExecutionCounters;
use options::BuildOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The environment variable naming a directory that receives every compiled module's
/// StableHLO text.
pub const DUMP_ENV: &str = "STRATA_DUMP_HLO";

/// How to open an XLA backend beyond the device name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PjrtOptions {
    /// The plugin `.so` to use, bypassing discovery.
    pub plugin: Option<PathBuf>,
    /// The persistent compilation cache.
    pub cache: CacheDir,
    /// A directory that receives every compiled module's StableHLO text; `None` reads
    /// `STRATA_DUMP_HLO` (no dumps when that is unset too).
    pub dump_dir: Option<PathBuf>,
}

/// A PJRT client for one device kind, as a [`Backend`].
pub struct PjrtBackend {
    device: Device,
    client: Arc<Client>,
    cache: Option<Cache>,
    counters: Arc<Counters>,
    executions: Arc<ExecutionCounters>,
    dump_dir: Option<PathBuf>,
}

impl std::fmt::Debug for PjrtBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PjrtBackend({}, {:?})", self.device, self.client)
    }
}

impl PjrtBackend {
    /// The backend for an XLA device, with the plugin found by discovery and the default
    /// compilation cache.
    pub fn new(device: &Device) -> Result<PjrtBackend> {
        PjrtBackend::with_options(device, PjrtOptions::default())
    }

    pub fn with_options(device: &Device, options: PjrtOptions) -> Result<PjrtBackend> {
        let kind = device.plugin_kind().ok_or_else(|| {
            Error::invalid(
                "PjrtBackend",
                "the native device has no PJRT plugin: use NativeBackend (or Device::backend)",
            )
        })?;
        let path = plugin::find_plugin(kind, options.plugin.as_deref())?;
        let api = Api::load(&path)?;
        let mut create = Vec::new();
        if let Device::XlaCpu { devices } = device {
            // Plain `xla-cpu` is one device, as JAX's CPU client. The plugin's own default is
            // four devices; on the 2-core machine measured that also gave its compute pool
            // four workers (two with one device), and a single-device program ran slower.
            // Validated by Device's parser and here again: a wrong option type or value
            // can abort older plugins.
            let count = devices.unwrap_or(1);
            let n = i64::try_from(count)
                .ok()
                .filter(|&n| (1..=super::device::MAX_CPU_DEVICES as i64).contains(&n))
                .ok_or_else(|| {
                    Error::invalid("xla-cpu device count", format!("{count} is out of range"))
                })?;
            create.push(("cpu_device_count".to_string(), OptionValue::Int(n)));
        }
        let client = Client::create(api, &create).map_err(|e| unavailable(device, e))?;
        if client.device_count() == 0 {
            return Err(Error::DeviceUnavailable {
                device: device.to_string(),
                message: format!("the plugin {} sees no devices", path.display()),
            });
        }
        Ok(PjrtBackend {
            device: *device,
            client,
            cache: options.cache.resolve().map(Cache::new),
            counters: Arc::new(Counters::default()),
            executions: Arc::new(ExecutionCounters::default()),
            dump_dir: options.dump_dir.or_else(|| {
                std::env::var_os(DUMP_ENV)
                    .filter(|d| !d.is_empty())
                    .map(PathBuf::from)
            }),
        })
    }

    pub fn device(&self) -> Device {
        self.device
    }

    /// The plugin file in use.
    pub fn plugin_path(&self) -> &Path {
        self.client.api().path()
    }

    /// The plugin's self-description: `xla_version`, `stablehlo_current_version`, ...
    pub fn plugin_attributes(&self) -> &[(String, String)] {
        self.client.api().attributes()
    }

    /// The PJRT C API version the plugin speaks.
    pub fn api_version(&self) -> (i32, i32) {
        self.client.api().version()
    }

    /// The platform's name (`cpu`, `cuda`, `tpu`) and version.
    pub fn platform(&self) -> (&str, &str) {
        (self.client.platform_name(), self.client.platform_version())
    }

    /// The kind of each addressable device, in the plugin's order.
    pub fn device_kinds(&self) -> &[String] {
        self.client.device_kinds()
    }

    pub fn device_count(&self) -> usize {
        self.client.device_count()
    }

    /// What the persistent compilation cache did for this backend so far.
    pub fn cache_stats(&self) -> CacheStats {
        self.counters.snapshot()
    }

    /// What the executables compiled by this backend did so far.
    pub fn execution_stats(&self) -> ExecutionStats {
        self.executions.snapshot()
    }

    /// The cache directory, when the cache is enabled.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache.as_ref().map(Cache::dir)
    }

    /// Everything besides the program that determines the compiled executable.
    fn identity(&self, compile_options: &[u8], text: &str) -> Vec<u8> {
        let api = self.client.api();
        let meta = std::fs::metadata(api.path()).ok();
        let mtime = meta
            .as_ref()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let mut id = format!(
            "plugin={}\nsize={}\nmtime={mtime}\napi={}.{}\nattributes={:?}\nplatform={} {}\ndevices={}\n",
            api.path().display(),
            meta.map_or(0, |m| m.len()),
            api.version().0,
            api.version().1,
            api.attributes(),
            self.client.platform_name(),
            self.client.platform_version(),
            self.client.device_count(),
        )
        .into_bytes();
        id.extend_from_slice(b"options=");
        id.extend_from_slice(compile_options);
        id.extend_from_slice(b"\nprogram=\n");
        id.extend_from_slice(text.as_bytes());
        id
    }

    fn compile_text(&self, text: &str, compile_options: &[u8]) -> Result<client::LoadedExecutable> {
        let Some(cache) = &self.cache else {
            self.counters.miss();
            return self.client.compile(text, compile_options);
        };
        let identity = self.identity(compile_options, text);
        match cache.load(&identity) {
            Some(Ok(bytes)) => match self.client.deserialize(&bytes) {
                Ok(exe) => {
                    self.counters.hit();
                    return Ok(exe);
                }
                Err(_) => self.counters.reject(),
            },
            Some(Err(())) => self.counters.reject(),
            None => {}
        }
        self.counters.miss();
        let exe = self.client.compile(text, compile_options)?;
        // An executable that cannot be serialized still runs; it is just not cached.
        if let Ok(bytes) = exe.serialize() {
            cache.store(&identity, &bytes, &self.counters);
        }
        Ok(exe)
    }

    fn own<'b>(&self, b: &'b Buffer) -> Result<&'b DeviceBuffer> {
        let d = device_buffer(b)?;
        if !Arc::ptr_eq(d.client(), &self.client) {
            return Err(Error::invalid(
                format!("{} backend", self.device),
                "the buffer belongs to another XLA client: download it and upload it here",
            ));
        }
        Ok(d)
    }
}

/// Loads and initialises the plugin at `path` (once per process: later calls return at
/// once) without creating a client.
pub(crate) fn load_plugin(path: &Path) -> Result<()> {
    Api::load(path).map(|_| ())
}

/// A client that cannot start because its device is absent is a `DeviceUnavailable`:
/// libtpu says NOT_FOUND ("No jellyfish device found"), the CUDA plugin
/// FAILED_PRECONDITION ("No visible GPU devices"). Other failures (a malformed request,
/// an internal error) stay plugin errors.
fn unavailable(device: &Device, e: Error) -> Error {
    match e {
        Error::Pjrt { code, message, .. }
            if matches!(device, Device::Cuda | Device::Tpu)
                && matches!(
                    code.as_str(),
                    "NOT_FOUND" | "FAILED_PRECONDITION" | "UNAVAILABLE"
                ) =>
        {
            Error::DeviceUnavailable {
                device: device.to_string(),
                message: format!("{code}: {message}"),
            }
        }
        e => e,
    }
}

/// Writes the module text into `dir`, named after the graph and a hash of the text.
fn dump(dir: &Path, g: &Graph, text: &str) -> Result<()> {
    let name: String = g
        .name()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!(
        "{name}-{}.mlir",
        &cache::hash128_hex(text.as_bytes())[..16]
    ));
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, text))
        .map_err(|e| {
            Error::invalid(
                "StableHLO dump",
                format!("cannot write {}: {e}", path.display()),
            )
        })
}

impl Backend for PjrtBackend {
    fn name(&self) -> String {
        self.device.to_string()
    }

    fn compile(&self, graph: &Graph, options: &CompileOptions) -> Result<Box<dyn Executable>> {
        // Validation first (inside the printer): nothing unchecked reaches the plugin.
        let text = stablehlo::module_text(graph, options, 1)?;
        if let Some(dir) = &self.dump_dir {
            dump(dir, graph, &text)?;
        }
        let build = BuildOptions::single_device().encode(self.client.device_count())?;
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
        Ok(Box::new(executable::PjrtExecutable::new(
            self.client.clone(),
            exe,
            graph,
            options,
            self.executions.clone(),
            (1, false),
        )))
    }

    fn upload(&self, t: &Tensor) -> Result<Buffer> {
        Ok(xla_buffer(t.ty(), self.client.upload(t, 0)?))
    }

    fn upload_into(&self, t: &Tensor, b: &mut Buffer) -> Result<()> {
        self.own(b)?;
        *b = self.upload(t)?;
        Ok(())
    }

    fn download(&self, b: &Buffer) -> Result<Tensor> {
        self.client.download(self.own(b)?, b.ty())
    }

    fn read_f32_into(&self, b: &Buffer, out: &mut [f32]) -> Result<()> {
        crate::backend::check_f32_vector(b, out.len())?;
        self.client.read_slice(self.own(b)?, b.ty(), out)
    }
}

/// What this backend's buffers are called in errors (and `Buffer::backend`).
const NAME: &str = "xla";

/// A buffer of this backend holding device buffer `d`.
pub(crate) fn xla_buffer(ty: crate::ir::TensorType, d: DeviceBuffer) -> Buffer {
    Buffer::device(ty, NAME, d)
}

/// The device buffer of one of this backend's buffers; a typed error for any other.
pub(crate) fn device_buffer(b: &Buffer) -> Result<&DeviceBuffer> {
    b.device_memory::<DeviceBuffer>(NAME)
}

/// [`device_buffer`], to replace in place.
pub(crate) fn device_buffer_mut(b: &mut Buffer) -> Result<&mut DeviceBuffer> {
    b.device_memory_mut::<DeviceBuffer>(NAME)
}
