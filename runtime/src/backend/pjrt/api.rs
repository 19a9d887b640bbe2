//! A loaded PJRT plugin: the open library, its function table, and checked access to it.
//!
//! A plugin is opened, its `GetPjrtApi` table read and `PJRT_Plugin_Initialize` called once
//! per process and path; the library then stays loaded for the life of the process (plugins
//! keep global state, such as thread pools and registries, that does not survive unloading).

use super::ffi;
use crate::{Error, Result};
use std::collections::HashMap;
use std::ffi::c_char;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The table entries Strata calls; a plugin lacking any of them is refused when loaded,
/// with a message naming the first one missing.
const REQUIRED: &[(&str, usize)] = &[
    (
        "PJRT_Error_Destroy",
        std::mem::offset_of!(ffi::Api, error_destroy),
    ),
    (
        "PJRT_Client_Compile",
        std::mem::offset_of!(ffi::Api, client_compile),
    ),
    (
        "PJRT_Executable_Serialize",
        std::mem::offset_of!(ffi::Api, executable_serialize),
    ),
    (
        "PJRT_LoadedExecutable_Execute",
        std::mem::offset_of!(ffi::Api, loaded_executable_execute),
    ),
    (
        "PJRT_Buffer_ToHostBuffer",
        std::mem::offset_of!(ffi::Api, buffer_to_host_buffer),
    ),
];

/// Reads one entry of the plugin's table after checking that the plugin's table is long
/// enough to have it. Evaluates to `Result<fn pointer>`.
macro_rules! entry {
    ($api:expr, $field:ident) => {{
        let api: &$crate::backend::pjrt::api::Api = $api;
        api.check_entry(
            std::mem::offset_of!($crate::backend::pjrt::ffi::Api, $field),
            stringify!($field),
        )
        .and_then(|()| {
            // SAFETY: check_entry proved that this field lies inside the plugin's table,
            // which is static data of a library that `api` keeps loaded.
            let f = unsafe { std::ptr::addr_of!((*api.raw()).$field).read() };
            f.ok_or_else(|| api.missing(stringify!($field)))
        })
    }};
}
pub(crate) use entry;

/// One loaded and initialised plugin.
pub(crate) struct Api {
    raw: *const ffi::Api,
    struct_size: usize,
    path: PathBuf,
    version: (i32, i32),
    attributes: Vec<(String, String)>,
    // Last: the table above points into this library.
    _lib: libloading::Library,
}

// SAFETY: the table is immutable static data of the plugin, and the PJRT C API is
// documented as callable from any thread.
unsafe impl Send for Api {}
// SAFETY: as above; `Api` has no interior mutability of its own.
unsafe impl Sync for Api {}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PJRT plugin {} (API {}.{})",
            self.path.display(),
            self.version.0,
            self.version.1
        )
    }
}

fn plugin_error(path: &Path, message: impl Into<String>) -> Error {
    Error::Plugin {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// Plugins already loaded in this process, by canonical path.
fn loaded() -> &'static Mutex<HashMap<PathBuf, Arc<Api>>> {
    static LOADED: OnceLock<Mutex<HashMap<PathBuf, Arc<Api>>>> = OnceLock::new();
    LOADED.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Api {
    /// Loads (once per process) and initialises the plugin at `path`.
    pub fn load(path: &Path) -> Result<Arc<Api>> {
        let meta = std::fs::metadata(path)
            .map_err(|e| plugin_error(path, format!("cannot be read: {e}")))?;
        if !meta.is_file() {
            return Err(plugin_error(path, "is not a file"));
        }
        let canonical = path
            .canonicalize()
            .map_err(|e| plugin_error(path, format!("cannot be resolved: {e}")))?;
        // Holding the lock while loading makes concurrent first uses initialise once.
        let mut map = loaded().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(api) = map.get(&canonical) {
            return Ok(api.clone());
        }
        let api = Arc::new(Api::open(&canonical)?);
        map.insert(canonical, api.clone());
        Ok(api)
    }

    fn open(path: &Path) -> Result<Api> {
        if is_libtpu(path)
            && std::env::var_os("TPU_SKIP_MDS_QUERY").is_none()
            && !super::pci::tpu_chips_present()
        {
            // Without this, libtpu's initialisation queries cloud metadata for ~10 minutes
            // on a machine that is not a Cloud TPU VM (measured); with it, ~0.5 s. libtpu
            // reads it during PJRT_Plugin_Initialize below, on this thread. A machine whose
            // PCI bus shows TPU chips is a TPU VM, where the metadata answers at once and
            // libtpu is left to use it, as under JAX. (std's own environment lock orders
            // this with Rust readers; a C library reading the environment on another
            // thread at this instant is the remaining, accepted, risk of setting it here
            // rather than asking every user to.)
            std::env::set_var("TPU_SKIP_MDS_QUERY", "1");
        }
        // SAFETY: loading runs the library's initialisers. The path was chosen by the user
        // or by discovery of a known plugin package; a PJRT plugin's initialisers only set
        // up its own state.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| plugin_error(path, format!("is not a loadable shared library: {e}")))?;
        type GetApi = unsafe extern "C" fn() -> *const ffi::Api;
        // SAFETY: `GetPjrtApi` has this signature in every PJRT plugin; the symbol's type is
        // only trusted because of its name.
        let get: libloading::Symbol<'_, GetApi> = unsafe { lib.get(b"GetPjrtApi\0") }
            .map_err(|_| plugin_error(path, "exports no GetPjrtApi: it is not a PJRT plugin"))?;
        // SAFETY: GetPjrtApi takes no arguments and returns a pointer to static data.
        let raw = unsafe { get() };
        if raw.is_null() {
            return Err(plugin_error(path, "GetPjrtApi returned no function table"));
        }
        // SAFETY: every PJRT_Api starts with struct_size, an extension pointer and the
        // version struct, which exist in every API version.
        let (struct_size, version) = unsafe {
            let v = &(*raw).version;
            ((*raw).struct_size, (v.major_version, v.minor_version))
        };
        let api = Api {
            raw,
            struct_size,
            path: path.to_path_buf(),
            version,
            attributes: Vec::new(),
            _lib: lib,
        };
        if version.0 != 0 {
            return Err(plugin_error(
                path,
                format!(
                    "speaks PJRT C API {}.{}; Strata speaks 0.x",
                    version.0, version.1
                ),
            ));
        }
        for &(name, offset) in REQUIRED {
            if offset + std::mem::size_of::<usize>() > struct_size {
                return Err(plugin_error(
                    path,
                    format!(
                        "PJRT C API {}.{} is too old: its function table ({struct_size} bytes) \
                         has no {name}",
                        version.0, version.1
                    ),
                ));
            }
        }
        let mut api = api;
        api.initialize()?;
        api.attributes = api.read_attributes()?;
        Ok(api)
    }

    fn initialize(&self) -> Result<()> {
        let f = entry!(self, plugin_initialize)?;
        let mut args = ffi::PluginInitializeArgs {
            struct_size: std::mem::size_of::<ffi::PluginInitializeArgs>(),
            extension_start: std::ptr::null_mut(),
        };
        // SAFETY: args is fully initialised and lives across the call.
        let err = unsafe { f(&mut args) };
        self.check(err, "PJRT_Plugin_Initialize")
    }

    fn read_attributes(&self) -> Result<Vec<(String, String)>> {
        let f = entry!(self, plugin_attributes)?;
        let mut args = ffi::PluginAttributesArgs {
            struct_size: std::mem::size_of::<ffi::PluginAttributesArgs>(),
            extension_start: std::ptr::null_mut(),
            attributes: std::ptr::null(),
            num_attributes: 0,
        };
        // SAFETY: args is fully initialised; the plugin fills the two out fields.
        let err = unsafe { f(&mut args) };
        self.check(err, "PJRT_Plugin_Attributes")?;
        let mut out = Vec::with_capacity(args.num_attributes);
        for i in 0..args.num_attributes {
            // SAFETY: the plugin returned an array of `num_attributes` named values that
            // live as long as the process.
            let nv = unsafe { &*args.attributes.add(i) };
            // SAFETY: the plugin owns these strings for the life of the process.
            let name = unsafe { lossy(nv.name, nv.name_size) };
            // SAFETY: `kind` says which union member the plugin wrote; list and string
            // pointers cover `value_size` elements.
            let value = unsafe {
                match nv.kind {
                    ffi::NAMED_STRING => lossy(nv.value.string, nv.value_size),
                    ffi::NAMED_INT64 => nv.value.int64.to_string(),
                    ffi::NAMED_INT64_LIST => {
                        let s = if nv.value_size == 0 {
                            &[][..]
                        } else {
                            std::slice::from_raw_parts(nv.value.int64_list, nv.value_size)
                        };
                        s.iter()
                            .map(|v| v.to_string())
                            .collect::<Vec<_>>()
                            .join(".")
                    }
                    ffi::NAMED_FLOAT => nv.value.float.to_string(),
                    ffi::NAMED_BOOL => nv.value.boolean.to_string(),
                    k => format!("<value of unknown kind {k}>"),
                }
            };
            out.push((name, value));
        }
        Ok(out)
    }

    pub fn raw(&self) -> *const ffi::Api {
        self.raw
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// The plugin's self-description (`xla_version`, `stablehlo_current_version`, ...).
    pub fn attributes(&self) -> &[(String, String)] {
        &self.attributes
    }

    /// The plugin's name in messages: its file path.
    pub fn name(&self) -> String {
        self.path.display().to_string()
    }

    /// Errors unless the entry at `offset` lies inside this plugin's table.
    pub fn check_entry(&self, offset: usize, field: &str) -> Result<()> {
        if offset + std::mem::size_of::<usize>() <= self.struct_size {
            Ok(())
        } else {
            Err(self.missing(field))
        }
    }

    pub fn missing(&self, field: &str) -> Error {
        plugin_error(
            &self.path,
            format!(
                "its PJRT C API {}.{} table ({} bytes) has no entry `{field}`",
                self.version.0, self.version.1, self.struct_size
            ),
        )
    }

    /// Turns a plugin's returned error (null for success) into ours, freeing it.
    pub fn check(&self, err: *mut ffi::Error, call: &'static str) -> Result<()> {
        if err.is_null() {
            return Ok(());
        }
        let (code, message) = self.read_error(err);
        Err(Error::Pjrt {
            plugin: self.name(),
            call,
            code,
            message,
        })
    }

    /// Reads an error's code and message and frees it.
    pub fn read_error(&self, err: *mut ffi::Error) -> (String, String) {
        let mut message = String::from("(no message)");
        if let Ok(f) = entry!(self, error_message) {
            let mut args = ffi::ErrorMessageArgs {
                struct_size: std::mem::size_of::<ffi::ErrorMessageArgs>(),
                extension_start: std::ptr::null_mut(),
                error: err,
                message: std::ptr::null(),
                message_size: 0,
            };
            // SAFETY: err is a live error the plugin returned; the message it writes lives
            // until the error is destroyed below.
            unsafe { f(&mut args) };
            // SAFETY: as above.
            message = unsafe { lossy(args.message, args.message_size) };
        }
        let mut code = String::from("UNKNOWN");
        if let Ok(f) = entry!(self, error_get_code) {
            let mut args = ffi::ErrorGetCodeArgs {
                struct_size: std::mem::size_of::<ffi::ErrorGetCodeArgs>(),
                extension_start: std::ptr::null_mut(),
                error: err,
                code: 0,
            };
            // SAFETY: err is live; the call only writes `code`. Its own error, if any,
            // is ignored: we are already reporting one.
            let e2 = unsafe { f(&mut args) };
            if e2.is_null() {
                code = usize::try_from(args.code)
                    .ok()
                    .and_then(|c| ffi::CODE_NAMES.get(c))
                    .map_or_else(|| format!("code {}", args.code), |s| s.to_string());
            } else {
                self.destroy_error(e2);
            }
        }
        self.destroy_error(err);
        (code, message)
    }

    fn destroy_error(&self, err: *mut ffi::Error) {
        if let Ok(f) = entry!(self, error_destroy) {
            let mut args = ffi::ErrorDestroyArgs {
                struct_size: std::mem::size_of::<ffi::ErrorDestroyArgs>(),
                extension_start: std::ptr::null_mut(),
                error: err,
            };
            // SAFETY: err is a live error owned by us; it is not used after this.
            unsafe { f(&mut args) };
        }
    }

    /// Blocks until `event` is ready, then frees it; returns its error, if any.
    pub fn await_event(&self, event: *mut ffi::Event, call: &'static str) -> Result<()> {
        if event.is_null() {
            return Ok(());
        }
        let waited = entry!(self, event_await).and_then(|f| {
            let mut args = ffi::EventArgs {
                struct_size: std::mem::size_of::<ffi::EventArgs>(),
                extension_start: std::ptr::null_mut(),
                event,
            };
            // SAFETY: event is a live event the plugin handed us.
            let err = unsafe { f(&mut args) };
            self.check(err, call)
        });
        self.destroy_event(event);
        waited
    }

    pub fn destroy_event(&self, event: *mut ffi::Event) {
        if let Ok(f) = entry!(self, event_destroy) {
            let mut args = ffi::EventArgs {
                struct_size: std::mem::size_of::<ffi::EventArgs>(),
                extension_start: std::ptr::null_mut(),
                event,
            };
            // SAFETY: event is live and owned by us; it is not used after this.
            let err = unsafe { f(&mut args) };
            let _ = self.check(err, "PJRT_Event_Destroy");
        }
    }
}

fn is_libtpu(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("libtpu"))
}

/// Copies a (pointer, length) string from the plugin; invalid UTF-8 is replaced.
///
/// # Safety
/// `ptr` must be null or point to `len` readable bytes.
pub(crate) unsafe fn lossy(ptr: *const c_char, len: usize) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: guaranteed by the caller.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    String::from_utf8_lossy(bytes).into_owned()
}
