//! Our own declarations of the subset of the PJRT C API (`pjrt_c_api.h`) that Strata uses.
//!
//! Layouts follow the header of PJRT C API 0.113 (the newest we have read). Plugins accept
//! args structs larger than their own version of them and reject smaller ones with
//! INVALID_ARGUMENT ("Unexpected PJRT_Client_Create_Args size: expected 88, got 16"), so
//! every struct must be at least as large as the plugin's. Measured: the CPU plugins
//! (API 0.81 and 0.115) and libtpu 0.0.51 (API 0.116) accept every struct declared here;
//! e.g. `ExecuteOptions` is 144 bytes here and 112 in the 0.115 plugin.
//!
//! Conventions kept from the C header: every args struct starts with `struct_size` (set by
//! the caller to the size of the struct *it* knows) and an `extension_start` pointer (always
//! null here); enums are C `int`s; "out" fields are written by the plugin.
//!
//! Only [`Api`] is read from plugin memory; it is declared as a prefix of the plugin's
//! function table up to the last entry we call, and every entry's offset is checked
//! against the plugin's `struct_size` before the entry is read.

#![allow(dead_code)] // Fields exist for layout; not every one is read.

use std::ffi::{c_char, c_int, c_void};

macro_rules! opaque {
    ($($name:ident),* $(,)?) => {$(
        /// An object owned by the plugin, only ever handled through pointers.
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}
opaque!(
    Error,
    Client,
    Device,
    DeviceDescription,
    Memory,
    Executable,
    LoadedExecutable,
    Buffer,
    Event,
    SerializedExecutable,
    ExtensionBase,
    ExecuteContext,
);

/// Every entry of the table has this shape, with its own args struct.
pub type Entry<A> = unsafe extern "C" fn(args: *mut A) -> *mut Error;

// ---- error codes (absl status codes) --------------------------------------------------

pub const CODE_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

// ---- element types (PJRT_Buffer_Type) --------------------------------------------------

pub const TYPE_PRED: c_int = 1;
pub const TYPE_S32: c_int = 4;
pub const TYPE_S64: c_int = 5;
pub const TYPE_F32: c_int = 11;
pub const TYPE_F64: c_int = 12;
pub const TYPE_BF16: c_int = 13;

// ---- named values ---------------------------------------------------------------------

pub const NAMED_STRING: c_int = 0;
pub const NAMED_INT64: c_int = 1;
pub const NAMED_INT64_LIST: c_int = 2;
pub const NAMED_FLOAT: c_int = 3;
pub const NAMED_BOOL: c_int = 4;

#[repr(C)]
#[derive(Clone, Copy)]
pub union NamedValueData {
    pub string: *const c_char,
    pub int64: i64,
    pub int64_list: *const i64,
    pub float: f32,
    pub boolean: bool,
}

#[repr(C)]
pub struct NamedValue {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub name: *const c_char,
    pub name_size: usize,
    pub kind: c_int,
    pub value: NamedValueData,
    /// Elements of a list or bytes of a string; 1 for scalars.
    pub value_size: usize,
}

// ---- errors ---------------------------------------------------------------------------

#[repr(C)]
pub struct ErrorDestroyArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub error: *mut Error,
}

#[repr(C)]
pub struct ErrorMessageArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub error: *const Error,
    pub message: *const c_char,
    pub message_size: usize,
}

#[repr(C)]
pub struct ErrorGetCodeArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub error: *const Error,
    pub code: c_int,
}

// ---- plugin ---------------------------------------------------------------------------

#[repr(C)]
pub struct PluginInitializeArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
}

#[repr(C)]
pub struct PluginAttributesArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub attributes: *const NamedValue,
    pub num_attributes: usize,
}

// ---- events ---------------------------------------------------------------------------

#[repr(C)]
pub struct EventArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub event: *mut Event,
}

// ---- client ---------------------------------------------------------------------------

#[repr(C)]
pub struct ClientCreateArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub create_options: *const NamedValue,
    pub num_options: usize,
    pub kv_get_callback: *mut c_void,
    pub kv_get_user_arg: *mut c_void,
    pub kv_put_callback: *mut c_void,
    pub kv_put_user_arg: *mut c_void,
    pub client: *mut Client,
    pub kv_try_get_callback: *mut c_void,
    pub kv_try_get_user_arg: *mut c_void,
}

#[repr(C)]
pub struct ClientDestroyArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub client: *mut Client,
}

#[repr(C)]
pub struct ClientStringArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub client: *mut Client,
    pub value: *const c_char,
    pub value_size: usize,
}

#[repr(C)]
pub struct ClientDevicesArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub client: *mut Client,
    pub devices: *const *mut Device,
    pub num_devices: usize,
}

#[repr(C)]
pub struct Program {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub code: *mut c_char,
    pub code_size: usize,
    pub format: *const c_char,
    pub format_size: usize,
}

#[repr(C)]
pub struct ClientCompileArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub client: *mut Client,
    pub program: *const Program,
    pub compile_options: *const c_char,
    pub compile_options_size: usize,
    pub executable: *mut LoadedExecutable,
}

pub const HOST_BUFFER_IMMUTABLE_ONLY_DURING_CALL: c_int = 0;

#[repr(C)]
pub struct ClientBufferFromHostBufferArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub client: *mut Client,
    pub data: *const c_void,
    pub element_type: c_int,
    pub dims: *const i64,
    pub num_dims: usize,
    pub byte_strides: *const i64,
    pub num_byte_strides: usize,
    pub host_buffer_semantics: c_int,
    pub device: *mut Device,
    pub memory: *mut Memory,
    pub device_layout: *mut BufferMemoryLayout,
    pub done_with_host_buffer: *mut Event,
    pub buffer: *mut Buffer,
}

// ---- devices --------------------------------------------------------------------------

#[repr(C)]
pub struct DeviceGetDescriptionArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub device: *mut Device,
    pub device_description: *mut DeviceDescription,
}

#[repr(C)]
pub struct DeviceDescriptionIdArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub device_description: *mut DeviceDescription,
    pub id: c_int,
}

#[repr(C)]
pub struct DeviceDescriptionKindArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub device_description: *mut DeviceDescription,
    pub device_kind: *const c_char,
    pub device_kind_size: usize,
}

// ---- executables ----------------------------------------------------------------------

#[repr(C)]
pub struct ExecutableDestroyArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub executable: *mut Executable,
}

#[repr(C)]
pub struct ExecutableNumOutputsArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub executable: *mut Executable,
    pub num_outputs: usize,
}

#[repr(C)]
pub struct ExecutableSerializeArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub executable: *const Executable,
    pub serialized_bytes: *const c_char,
    pub serialized_bytes_size: usize,
    pub serialized_executable: *mut SerializedExecutable,
    pub serialized_executable_deleter: Option<unsafe extern "C" fn(*mut SerializedExecutable)>,
}

#[repr(C)]
pub struct LoadOptions {
    pub struct_size: usize,
    pub computation_origin: *const i32,
    pub computation_origin_size: usize,
    pub multi_slice_config: *mut c_void,
}

#[repr(C)]
pub struct ExecutableDeserializeAndLoadArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub client: *mut Client,
    pub serialized_executable: *const c_char,
    pub serialized_executable_size: usize,
    pub loaded_executable: *mut LoadedExecutable,
    pub overridden_serialized_compile_options: *const c_char,
    pub overridden_serialized_compile_options_size: usize,
    pub load_options: *mut LoadOptions,
}

#[repr(C)]
pub struct LoadedExecutableDestroyArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub executable: *mut LoadedExecutable,
}

#[repr(C)]
pub struct LoadedExecutableGetExecutableArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub loaded_executable: *mut LoadedExecutable,
    pub executable: *mut Executable,
}

#[repr(C)]
pub struct LoadedExecutableAddressableDevicesArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub executable: *mut LoadedExecutable,
    pub addressable_devices: *const *mut Device,
    pub num_addressable_devices: usize,
}

#[repr(C)]
pub struct ExecuteOptions {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub send_callbacks: *mut *mut c_void,
    pub recv_callbacks: *mut *mut c_void,
    pub num_send_ops: usize,
    pub num_recv_ops: usize,
    pub launch_id: c_int,
    pub non_donatable_input_indices: *const i64,
    pub num_non_donatable_input_indices: usize,
    pub context: *mut ExecuteContext,
    pub call_location: *const c_char,
    pub num_tasks: usize,
    pub task_ids: *mut c_int,
    pub incarnation_ids: *mut i64,
    pub multi_slice_config: *mut c_void,
    pub use_major_to_minor_data_layout_for_callbacks: bool,
    pub hlo_output_callbacks: *mut c_void,
    pub num_hlo_output_callbacks: usize,
}

#[repr(C)]
pub struct LoadedExecutableExecuteArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub executable: *mut LoadedExecutable,
    pub options: *mut ExecuteOptions,
    /// `[num_devices][num_args]`.
    pub argument_lists: *const *const *mut Buffer,
    pub num_devices: usize,
    pub num_args: usize,
    /// `[num_devices][num_outputs]`, allocated by the caller, filled by the plugin.
    pub output_lists: *const *mut *mut Buffer,
    /// `[num_devices]`, filled by the plugin when not null.
    pub device_complete_events: *mut *mut Event,
    pub execute_device: *mut Device,
}

// ---- buffers --------------------------------------------------------------------------

#[repr(C)]
pub struct BufferDestroyArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub buffer: *mut Buffer,
}

#[repr(C)]
pub struct BufferIsDeletedArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub buffer: *mut Buffer,
    pub is_deleted: bool,
}

pub const LAYOUT_TILED: c_int = 0;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct BufferMemoryLayoutTiled {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub minor_to_major: *const i64,
    pub minor_to_major_size: usize,
    pub tile_dims: *const i64,
    pub tile_dim_sizes: *const usize,
    pub num_tiles: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct BufferMemoryLayoutStrides {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub byte_strides: *const i64,
    pub num_byte_strides: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union BufferMemoryLayoutData {
    pub tiled: BufferMemoryLayoutTiled,
    pub strides: BufferMemoryLayoutStrides,
}

#[repr(C)]
pub struct BufferMemoryLayout {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub data: BufferMemoryLayoutData,
    pub kind: c_int,
}

#[repr(C)]
pub struct BufferToHostBufferArgs {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub src: *mut Buffer,
    pub host_layout: *mut BufferMemoryLayout,
    pub dst: *mut c_void,
    pub dst_size: usize,
    pub event: *mut Event,
}

// ---- the function table ---------------------------------------------------------------

#[repr(C)]
pub struct ApiVersion {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub major_version: c_int,
    pub minor_version: c_int,
}

/// An entry of the table that Strata never calls; kept so the later offsets are right.
pub type Unused = Option<unsafe extern "C" fn()>;

/// The plugin's function table (`PJRT_Api`), up to the last entry we call. Entries only
/// ever grow at the end, so a prefix is valid for every plugin whose `struct_size` covers it.
#[repr(C)]
pub struct Api {
    pub struct_size: usize,
    pub extension_start: *mut ExtensionBase,
    pub version: ApiVersion,

    pub error_destroy: Option<unsafe extern "C" fn(*mut ErrorDestroyArgs)>,
    pub error_message: Option<unsafe extern "C" fn(*mut ErrorMessageArgs)>,
    pub error_get_code: Option<Entry<ErrorGetCodeArgs>>,

    pub plugin_initialize: Option<Entry<PluginInitializeArgs>>,
    pub plugin_attributes: Option<Entry<PluginAttributesArgs>>,

    pub event_destroy: Option<Entry<EventArgs>>,
    pub event_is_ready: Unused,
    pub event_error: Unused,
    pub event_await: Option<Entry<EventArgs>>,
    pub event_on_ready: Unused,

    pub client_create: Option<Entry<ClientCreateArgs>>,
    pub client_destroy: Option<Entry<ClientDestroyArgs>>,
    pub client_platform_name: Option<Entry<ClientStringArgs>>,
    pub client_process_index: Unused,
    pub client_platform_version: Option<Entry<ClientStringArgs>>,
    pub client_devices: Unused,
    pub client_addressable_devices: Option<Entry<ClientDevicesArgs>>,
    pub client_lookup_device: Unused,
    pub client_lookup_addressable_device: Unused,
    pub client_addressable_memories: Unused,
    pub client_compile: Option<Entry<ClientCompileArgs>>,
    pub client_default_device_assignment: Unused,
    pub client_buffer_from_host_buffer: Option<Entry<ClientBufferFromHostBufferArgs>>,

    pub device_description_id: Option<Entry<DeviceDescriptionIdArgs>>,
    pub device_description_process_index: Unused,
    pub device_description_attributes: Unused,
    pub device_description_kind: Option<Entry<DeviceDescriptionKindArgs>>,
    pub device_description_debug_string: Unused,
    pub device_description_to_string: Unused,

    pub device_get_description: Option<Entry<DeviceGetDescriptionArgs>>,
    pub device_is_addressable: Unused,
    pub device_local_hardware_id: Unused,
    pub device_addressable_memories: Unused,
    pub device_default_memory: Unused,
    pub device_memory_stats: Unused,

    pub memory_id: Unused,
    pub memory_kind: Unused,
    pub memory_debug_string: Unused,
    pub memory_to_string: Unused,
    pub memory_addressable_by_devices: Unused,

    pub executable_destroy: Option<Entry<ExecutableDestroyArgs>>,
    pub executable_name: Unused,
    pub executable_num_replicas: Unused,
    pub executable_num_partitions: Unused,
    pub executable_num_outputs: Option<Entry<ExecutableNumOutputsArgs>>,
    pub executable_size_of_generated_code_in_bytes: Unused,
    pub executable_get_cost_analysis: Unused,
    pub executable_output_memory_kinds: Unused,
    pub executable_optimized_program: Unused,
    pub executable_serialize: Option<Entry<ExecutableSerializeArgs>>,

    pub loaded_executable_destroy: Option<Entry<LoadedExecutableDestroyArgs>>,
    pub loaded_executable_get_executable: Option<Entry<LoadedExecutableGetExecutableArgs>>,
    pub loaded_executable_addressable_devices:
        Option<Entry<LoadedExecutableAddressableDevicesArgs>>,
    pub loaded_executable_delete: Unused,
    pub loaded_executable_is_deleted: Unused,
    pub loaded_executable_execute: Option<Entry<LoadedExecutableExecuteArgs>>,
    pub executable_deserialize_and_load: Option<Entry<ExecutableDeserializeAndLoadArgs>>,
    pub loaded_executable_fingerprint: Unused,

    pub buffer_destroy: Option<Entry<BufferDestroyArgs>>,
    pub buffer_element_type: Unused,
    pub buffer_dimensions: Unused,
    pub buffer_unpadded_dimensions: Unused,
    pub buffer_dynamic_dimension_indices: Unused,
    pub buffer_get_memory_layout: Unused,
    pub buffer_on_device_size_in_bytes: Unused,
    pub buffer_device: Unused,
    pub buffer_memory: Unused,
    pub buffer_delete: Unused,
    pub buffer_is_deleted: Option<Entry<BufferIsDeletedArgs>>,
    pub buffer_copy_to_device: Unused,
    pub buffer_to_host_buffer: Option<Entry<BufferToHostBufferArgs>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    // Offsets and sizes the C header implies on 64-bit targets; a wrong field here would
    // make the plugin read garbage, so pin them.
    #[test]
    fn layouts_match_the_c_header() {
        assert_eq!(size_of::<NamedValue>(), 56);
        assert_eq!(size_of::<ClientCreateArgs>(), 88);
        assert_eq!(size_of::<ClientBufferFromHostBufferArgs>(), 120);
        assert_eq!(size_of::<ClientCompileArgs>(), 56);
        assert_eq!(size_of::<BufferMemoryLayout>(), 80);
        assert_eq!(size_of::<LoadedExecutableExecuteArgs>(), 80);
        // Plugin 0.115 wants at least 112 (measured); ours has the fields up to 0.113's end.
        assert_eq!(size_of::<ExecuteOptions>(), 144);
        assert_eq!(offset_of!(Api, error_destroy), 40);
        assert_eq!(offset_of!(Api, client_create), 40 + 10 * 8);
        assert_eq!(offset_of!(Api, client_compile), 40 + 20 * 8);
        assert_eq!(offset_of!(Api, executable_serialize), 40 + 49 * 8);
        assert_eq!(offset_of!(Api, loaded_executable_execute), 40 + 55 * 8);
        assert_eq!(offset_of!(Api, buffer_to_host_buffer), 40 + 70 * 8);
    }
}
