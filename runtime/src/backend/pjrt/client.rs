//! Owned handles to a plugin's objects — client, device buffers, loaded executables — each
//! freed through the plugin when dropped, each keeping what it depends on alive (a buffer
//! or executable holds its client, a client holds its plugin).

use super::api::{entry, lossy, Api};
use super::ffi;
use crate::ir::{DType, TensorType};
use crate::memory::vec_filled;
use crate::{Error, Result, Tensor};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// A value of a named client-create option (the only kind Strata sends so far).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum OptionValue {
    Int(i64),
}

/// A PJRT client: one plugin's view of the devices on this machine.
pub(crate) struct Client {
    api: Arc<Api>,
    raw: *mut ffi::Client,
    devices: Vec<*mut ffi::Device>,
    device_kinds: Vec<String>,
    /// Each device's global id (what a compile's device assignment names).
    device_ids: Vec<i64>,
    platform_name: String,
    platform_version: String,
}

// SAFETY: PJRT clients are thread-safe objects (the C API may be called from any thread);
// the device pointers are owned by the client and immutable.
unsafe impl Send for Client {}
// SAFETY: as above.
unsafe impl Sync for Client {}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PJRT client {} {} ({} devices) of {:?}",
            self.platform_name,
            self.platform_version,
            self.devices.len(),
            self.api
        )
    }
}

fn size<T>() -> usize {
    std::mem::size_of::<T>()
}

impl Client {
    /// Creates a client with the given named options (validated by the caller: a wrong
    /// option type aborts some plugin versions).
    pub fn create(api: Arc<Api>, options: &[(String, OptionValue)]) -> Result<Arc<Client>> {
        let f = entry!(&api, client_create)?;
        let named: Vec<ffi::NamedValue> = options
            .iter()
            .map(|(name, value)| {
                let (kind, data, value_size) = match value {
                    OptionValue::Int(v) => (ffi::NAMED_INT64, ffi::NamedValueData { int64: *v }, 1),
                };
                ffi::NamedValue {
                    struct_size: size::<ffi::NamedValue>(),
                    extension_start: std::ptr::null_mut(),
                    name: name.as_ptr().cast(),
                    name_size: name.len(),
                    kind,
                    value: data,
                    value_size,
                }
            })
            .collect();
        let mut args = ffi::ClientCreateArgs {
            struct_size: size::<ffi::ClientCreateArgs>(),
            extension_start: std::ptr::null_mut(),
            create_options: named.as_ptr(),
            num_options: named.len(),
            kv_get_callback: std::ptr::null_mut(),
            kv_get_user_arg: std::ptr::null_mut(),
            kv_put_callback: std::ptr::null_mut(),
            kv_put_user_arg: std::ptr::null_mut(),
            client: std::ptr::null_mut(),
            kv_try_get_callback: std::ptr::null_mut(),
            kv_try_get_user_arg: std::ptr::null_mut(),
        };
        // SAFETY: args is fully initialised; `named` and the option strings it points to
        // (lengths given, no NUL needed) outlive the call.
        let err = unsafe { f(&mut args) };
        api.check(err, "PJRT_Client_Create")?;
        let mut client = Client {
            api,
            raw: args.client,
            devices: Vec::new(),
            device_kinds: Vec::new(),
            device_ids: Vec::new(),
            platform_name: String::new(),
            platform_version: String::new(),
        };
        // From here on, dropping `client` destroys the plugin's client.
        client.platform_name = client.string_property(false)?;
        client.platform_version = client.string_property(true)?;
        client.devices = client.addressable_devices()?;
        client.device_kinds = client
            .devices
            .iter()
            .map(|&d| client.device_kind(d))
            .collect::<Result<_>>()?;
        client.device_ids = client
            .devices
            .iter()
            .map(|&d| client.device_id(d))
            .collect::<Result<_>>()?;
        Ok(Arc::new(client))
    }

    fn string_property(&self, version: bool) -> Result<String> {
        let (f, call) = if version {
            (
                entry!(&self.api, client_platform_version)?,
                "PJRT_Client_PlatformVersion",
            )
        } else {
            (
                entry!(&self.api, client_platform_name)?,
                "PJRT_Client_PlatformName",
            )
        };
        let mut args = ffi::ClientStringArgs {
            struct_size: size::<ffi::ClientStringArgs>(),
            extension_start: std::ptr::null_mut(),
            client: self.raw,
            value: std::ptr::null(),
            value_size: 0,
        };
        // SAFETY: self.raw is a live client; the string returned is owned by it.
        let err = unsafe { f(&mut args) };
        self.api.check(err, call)?;
        // SAFETY: the plugin wrote a (pointer, length) pair valid while the client lives.
        Ok(unsafe { lossy(args.value, args.value_size) })
    }

    fn addressable_devices(&self) -> Result<Vec<*mut ffi::Device>> {
        let f = entry!(&self.api, client_addressable_devices)?;
        let mut args = ffi::ClientDevicesArgs {
            struct_size: size::<ffi::ClientDevicesArgs>(),
            extension_start: std::ptr::null_mut(),
            client: self.raw,
            devices: std::ptr::null(),
            num_devices: 0,
        };
        // SAFETY: self.raw is a live client.
        let err = unsafe { f(&mut args) };
        self.api.check(err, "PJRT_Client_AddressableDevices")?;
        if args.num_devices == 0 {
            return Ok(Vec::new());
        }
        // SAFETY: the plugin returned an array of `num_devices` device pointers owned by
        // the client.
        Ok(unsafe { std::slice::from_raw_parts(args.devices, args.num_devices) }.to_vec())
    }

    fn description(&self, device: *mut ffi::Device) -> Result<*mut ffi::DeviceDescription> {
        let f = entry!(&self.api, device_get_description)?;
        let mut args = ffi::DeviceGetDescriptionArgs {
            struct_size: size::<ffi::DeviceGetDescriptionArgs>(),
            extension_start: std::ptr::null_mut(),
            device,
            device_description: std::ptr::null_mut(),
        };
        // SAFETY: device is one of this live client's devices.
        let err = unsafe { f(&mut args) };
        self.api.check(err, "PJRT_Device_GetDescription")?;
        Ok(args.device_description)
    }

    fn device_id(&self, device: *mut ffi::Device) -> Result<i64> {
        let description = self.description(device)?;
        let f = entry!(&self.api, device_description_id)?;
        let mut args = ffi::DeviceDescriptionIdArgs {
            struct_size: size::<ffi::DeviceDescriptionIdArgs>(),
            extension_start: std::ptr::null_mut(),
            device_description: description,
            id: 0,
        };
        // SAFETY: the description is owned by the device, which the client keeps alive.
        let err = unsafe { f(&mut args) };
        self.api.check(err, "PJRT_DeviceDescription_Id")?;
        Ok(i64::from(args.id))
    }

    fn device_kind(&self, device: *mut ffi::Device) -> Result<String> {
        let f = entry!(&self.api, device_get_description)?;
        let mut args = ffi::DeviceGetDescriptionArgs {
            struct_size: size::<ffi::DeviceGetDescriptionArgs>(),
            extension_start: std::ptr::null_mut(),
            device,
            device_description: std::ptr::null_mut(),
        };
        // SAFETY: device is one of this live client's devices.
        let err = unsafe { f(&mut args) };
        self.api.check(err, "PJRT_Device_GetDescription")?;
        let f = entry!(&self.api, device_description_kind)?;
        let mut kind = ffi::DeviceDescriptionKindArgs {
            struct_size: size::<ffi::DeviceDescriptionKindArgs>(),
            extension_start: std::ptr::null_mut(),
            device_description: args.device_description,
            device_kind: std::ptr::null(),
            device_kind_size: 0,
        };
        // SAFETY: the description is owned by the device, which the client keeps alive.
        let err = unsafe { f(&mut kind) };
        self.api.check(err, "PJRT_DeviceDescription_Kind")?;
        // SAFETY: the plugin wrote a (pointer, length) pair owned by the device.
        Ok(unsafe { lossy(kind.device_kind, kind.device_kind_size) })
    }

    pub fn api(&self) -> &Arc<Api> {
        &self.api
    }

    pub fn platform_name(&self) -> &str {
        &self.platform_name
    }

    pub fn platform_version(&self) -> &str {
        &self.platform_version
    }

    /// The kind of each addressable device, in the plugin's order.
    pub fn device_kinds(&self) -> &[String] {
        &self.device_kinds
    }

    pub fn device_count(&self) -> usize {
        self.devices.len()
    }

    /// The global id of each addressable device, in the plugin's order.
    pub fn device_ids(&self) -> &[i64] {
        &self.device_ids
    }

    /// The position of a device among the client's addressable devices.
    pub fn device_index(&self, device: *mut ffi::Device) -> Option<usize> {
        self.devices.iter().position(|&d| d == device)
    }

    fn device(&self, index: usize) -> Result<*mut ffi::Device> {
        self.devices.get(index).copied().ok_or_else(|| {
            Error::invalid(
                "PJRT device",
                format!(
                    "device {index} does not exist: the client has {} devices",
                    self.devices.len()
                ),
            )
        })
    }

    /// Compiles StableHLO text with serialized `CompileOptionsProto` bytes, which the
    /// caller built with `options::encode` (unvalidated bytes can abort the process).
    pub fn compile(
        self: &Arc<Self>,
        mlir: &str,
        compile_options: &[u8],
    ) -> Result<LoadedExecutable> {
        let f = entry!(&self.api, client_compile)?;
        let format = "mlir";
        let program = ffi::Program {
            struct_size: size::<ffi::Program>(),
            extension_start: std::ptr::null_mut(),
            // The plugin only reads the code; the C header's `char*` is not const.
            code: mlir.as_ptr().cast_mut().cast(),
            code_size: mlir.len(),
            format: format.as_ptr().cast(),
            format_size: format.len(),
        };
        let mut args = ffi::ClientCompileArgs {
            struct_size: size::<ffi::ClientCompileArgs>(),
            extension_start: std::ptr::null_mut(),
            client: self.raw,
            program: &program,
            compile_options: compile_options.as_ptr().cast(),
            compile_options_size: compile_options.len(),
            executable: std::ptr::null_mut(),
        };
        // SAFETY: args, the program and the option bytes outlive the call; the plugin
        // copies what it keeps.
        let err = unsafe { f(&mut args) };
        self.api.check(err, "PJRT_Client_Compile")?;
        LoadedExecutable::wrap(self.clone(), args.executable)
    }

    /// Loads an executable serialized by [`LoadedExecutable::serialize`] with the same
    /// plugin build.
    pub fn deserialize(self: &Arc<Self>, bytes: &[u8]) -> Result<LoadedExecutable> {
        let f = entry!(&self.api, executable_deserialize_and_load)?;
        let mut args = ffi::ExecutableDeserializeAndLoadArgs {
            struct_size: size::<ffi::ExecutableDeserializeAndLoadArgs>(),
            extension_start: std::ptr::null_mut(),
            client: self.raw,
            serialized_executable: bytes.as_ptr().cast(),
            serialized_executable_size: bytes.len(),
            loaded_executable: std::ptr::null_mut(),
            overridden_serialized_compile_options: std::ptr::null(),
            overridden_serialized_compile_options_size: 0,
            load_options: std::ptr::null_mut(),
        };
        // SAFETY: args and bytes outlive the call. The bytes come from our cache; the
        // plugin parses them as a serialized executable and reports malformed input as an
        // error (a corrupt entry is additionally caught by the cache's checksum first).
        let err = unsafe { f(&mut args) };
        self.api.check(err, "PJRT_Executable_DeserializeAndLoad")?;
        LoadedExecutable::wrap(self.clone(), args.loaded_executable)
    }

    /// Copies a host tensor to device `device`.
    pub fn upload(self: &Arc<Self>, t: &Tensor, device: usize) -> Result<DeviceBuffer> {
        let index = device;
        let device = self.device(device)?;
        let f = entry!(&self.api, client_buffer_from_host_buffer)?;
        let ty = t.ty();
        let dims = dims_i64(&ty)?;
        with_host_bytes(t, |bytes| {
            let expected = ty.numel() * ty.dtype.size_bytes();
            if bytes.len() != expected {
                return Err(Error::invalid(
                    "PJRT upload",
                    format!(
                        "{ty} needs {expected} bytes, the tensor has {}",
                        bytes.len()
                    ),
                ));
            }
            // A zero-element tensor still needs a valid pointer.
            let placeholder = [0u8; 1];
            let data: *const c_void = if bytes.is_empty() {
                placeholder.as_ptr().cast()
            } else {
                bytes.as_ptr().cast()
            };
            let mut args = ffi::ClientBufferFromHostBufferArgs {
                struct_size: size::<ffi::ClientBufferFromHostBufferArgs>(),
                extension_start: std::ptr::null_mut(),
                client: self.raw,
                data,
                element_type: buffer_type(ty.dtype),
                dims: dims.as_ptr(),
                num_dims: dims.len(),
                byte_strides: std::ptr::null(),
                num_byte_strides: 0,
                host_buffer_semantics: ffi::HOST_BUFFER_IMMUTABLE_ONLY_DURING_CALL,
                device,
                memory: std::ptr::null_mut(),
                device_layout: std::ptr::null_mut(),
                done_with_host_buffer: std::ptr::null_mut(),
                buffer: std::ptr::null_mut(),
            };
            // SAFETY: `data` points to `expected` bytes of dense row-major elements of the
            // declared type, alive for the call (the semantics promise no longer); dims
            // outlive the call; device belongs to this client.
            let err = unsafe { f(&mut args) };
            self.api.check(err, "PJRT_Client_BufferFromHostBuffer")?;
            let buffer = DeviceBuffer {
                client: self.clone(),
                raw: args.buffer,
                device: index,
            };
            self.api.await_event(
                args.done_with_host_buffer,
                "PJRT_Client_BufferFromHostBuffer (transfer)",
            )?;
            Ok(buffer)
        })
    }

    /// Copies a device buffer of type `ty` to the host, as a dense row-major tensor.
    pub fn download(&self, b: &DeviceBuffer, ty: &TensorType) -> Result<Tensor> {
        let n = ty.numel();
        let dims = ty.dims();
        // The host may hold less than the device: a buffer too large is an error here.
        let host = || format!("the host copy of a PJRT buffer {ty}");
        let t = match ty.dtype {
            DType::F32 => {
                Tensor::from_vec(dims, self.read_into(b, ty, vec_filled(host, n, 0f32)?)?)?
            }
            DType::F64 => {
                Tensor::from_vec(dims, self.read_into(b, ty, vec_filled(host, n, 0f64)?)?)?
            }
            DType::BF16 => Tensor::from_vec(
                dims,
                self.read_into(b, ty, vec_filled(host, n, half::bf16::ZERO)?)?,
            )?,
            DType::I32 => {
                Tensor::from_vec(dims, self.read_into(b, ty, vec_filled(host, n, 0i32)?)?)?
            }
            DType::I64 => {
                Tensor::from_vec(dims, self.read_into(b, ty, vec_filled(host, n, 0i64)?)?)?
            }
            DType::Bool => {
                // Read bytes, not `bool`s: only 0 and 1 are valid bools in Rust.
                let bytes = self.read_into(b, ty, vec_filled(host, n, 0u8)?)?;
                Tensor::from_vec(dims, bytes.into_iter().map(|v| v != 0).collect())?
            }
        };
        Ok(t)
    }

    /// Copies the buffer into `dst` (elements of any bit pattern are valid in `T`).
    fn read_into<T: Copy>(
        &self,
        b: &DeviceBuffer,
        ty: &TensorType,
        mut dst: Vec<T>,
    ) -> Result<Vec<T>> {
        self.read_slice(b, ty, &mut dst)?;
        Ok(dst)
    }

    /// Copies the buffer into `dst`, which must hold exactly its elements (checked against
    /// the plugin's own size). Allocates nothing for rank ≤ 8: the fit loop reads the
    /// step's logs this way every step.
    pub fn read_slice<T: Copy>(
        &self,
        b: &DeviceBuffer,
        ty: &TensorType,
        dst: &mut [T],
    ) -> Result<()> {
        let f = entry!(&self.api, buffer_to_host_buffer)?;
        let rank = ty.rank();
        // Ask for row-major explicitly: a device's own layout may be tiled or permuted.
        let mut small = [0i64; 8];
        let large: Vec<i64>;
        let minor_to_major: &[i64] = if rank <= small.len() {
            for (i, v) in small[..rank].iter_mut().enumerate() {
                *v = (rank - 1 - i) as i64;
            }
            &small[..rank]
        } else {
            large = (0..rank as i64).rev().collect();
            &large
        };
        let mut layout = ffi::BufferMemoryLayout {
            struct_size: size::<ffi::BufferMemoryLayout>(),
            extension_start: std::ptr::null_mut(),
            data: ffi::BufferMemoryLayoutData {
                tiled: ffi::BufferMemoryLayoutTiled {
                    struct_size: size::<ffi::BufferMemoryLayoutTiled>(),
                    extension_start: std::ptr::null_mut(),
                    minor_to_major: minor_to_major.as_ptr(),
                    minor_to_major_size: minor_to_major.len(),
                    tile_dims: std::ptr::null(),
                    tile_dim_sizes: std::ptr::null(),
                    num_tiles: 0,
                },
            },
            kind: ffi::LAYOUT_TILED,
        };
        let want = std::mem::size_of_val(dst);
        // First ask the size the plugin will write, to never let it overrun `dst`.
        let mut args = ffi::BufferToHostBufferArgs {
            struct_size: size::<ffi::BufferToHostBufferArgs>(),
            extension_start: std::ptr::null_mut(),
            src: b.raw,
            host_layout: &mut layout,
            dst: std::ptr::null_mut(),
            dst_size: 0,
            event: std::ptr::null_mut(),
        };
        // SAFETY: b.raw is a live buffer of this client; a null dst only queries the size.
        let err = unsafe { f(&mut args) };
        self.api.check(err, "PJRT_Buffer_ToHostBuffer (size)")?;
        if args.dst_size != want {
            return Err(Error::Backend {
                backend: "xla",
                message: format!(
                    "a {ty} buffer needs {want} bytes on the host, the plugin reports {}",
                    args.dst_size
                ),
            });
        }
        let mut dummy = [0u8; 1];
        args.dst = if want == 0 {
            dummy.as_mut_ptr().cast()
        } else {
            dst.as_mut_ptr().cast()
        };
        args.dst_size = want;
        args.event = std::ptr::null_mut();
        // SAFETY: dst has room for exactly the `want` bytes the plugin said it writes, and
        // stays alive (not moved) until the event below has completed.
        let err = unsafe { f(&mut args) };
        self.api.check(err, "PJRT_Buffer_ToHostBuffer")?;
        self.api
            .await_event(args.event, "PJRT_Buffer_ToHostBuffer (transfer)")?;
        Ok(())
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Ok(f) = entry!(&self.api, client_destroy) {
            let mut args = ffi::ClientDestroyArgs {
                struct_size: size::<ffi::ClientDestroyArgs>(),
                extension_start: std::ptr::null_mut(),
                client: self.raw,
            };
            // SAFETY: every buffer and executable holds an Arc to this client, so none is
            // left when it drops; the client is not used after this.
            let err = unsafe { f(&mut args) };
            let _ = self.api.check(err, "PJRT_Client_Destroy");
        }
    }
}

fn dims_i64(ty: &TensorType) -> Result<Vec<i64>> {
    ty.dims()
        .iter()
        .map(|&d| {
            i64::try_from(d)
                .map_err(|_| Error::invalid("PJRT", format!("dimension {d} of {ty} is too large")))
        })
        .collect()
}

fn buffer_type(d: DType) -> c_int {
    match d {
        DType::F32 => ffi::TYPE_F32,
        DType::F64 => ffi::TYPE_F64,
        DType::BF16 => ffi::TYPE_BF16,
        DType::I32 => ffi::TYPE_S32,
        DType::I64 => ffi::TYPE_S64,
        DType::Bool => ffi::TYPE_PRED,
    }
}

/// Calls `f` with the tensor's elements as dense row-major bytes (no copy when the array
/// already is in standard layout).
fn with_host_bytes<R>(t: &Tensor, f: impl FnOnce(&[u8]) -> R) -> R {
    fn bytes_of<T: crate::Element>(s: &[T]) -> &[u8] {
        // SAFETY: every Element type (f32, f64, bf16, i32, i64, bool) is plain data without
        // padding, so its memory is valid to read as bytes; u8 has alignment 1.
        unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
    }
    crate::with_tensor!(t, a => {
        let std = a.as_standard_layout();
        f(std.as_slice().map(bytes_of).unwrap_or(&[]))
    })
}

/// A buffer on one device.
pub(crate) struct DeviceBuffer {
    client: Arc<Client>,
    raw: *mut ffi::Buffer,
    /// The index of its device among the client's addressable devices.
    device: usize,
}

// SAFETY: PJRT buffers may be used and freed from any thread; we never alias the handle
// mutably (execution donates it by consuming the `DeviceBuffer`).
unsafe impl Send for DeviceBuffer {}
// SAFETY: shared access only reads (downloads), which PJRT allows concurrently.
unsafe impl Sync for DeviceBuffer {}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer({:p} on {})",
            self.raw, self.client.platform_name
        )
    }
}

impl DeviceBuffer {
    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    pub fn raw(&self) -> *mut ffi::Buffer {
        self.raw
    }

    /// The index of the buffer's device among the client's addressable devices.
    pub fn device(&self) -> usize {
        self.device
    }

    /// Whether the plugin has deleted the buffer's memory: true after it was donated to
    /// an execution.
    pub fn is_deleted(&self) -> Result<bool> {
        let api = &self.client.api;
        let f = entry!(api, buffer_is_deleted)?;
        let mut args = ffi::BufferIsDeletedArgs {
            struct_size: size::<ffi::BufferIsDeletedArgs>(),
            extension_start: std::ptr::null_mut(),
            buffer: self.raw,
            is_deleted: false,
        };
        // SAFETY: the handle is live (deleted memory still has a live handle).
        let err = unsafe { f(&mut args) };
        api.check(err, "PJRT_Buffer_IsDeleted")?;
        Ok(args.is_deleted)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if let Ok(f) = entry!(&self.client.api, buffer_destroy) {
            let mut args = ffi::BufferDestroyArgs {
                struct_size: size::<ffi::BufferDestroyArgs>(),
                extension_start: std::ptr::null_mut(),
                buffer: self.raw,
            };
            // SAFETY: we own this handle (donated ones too: PJRT marks them deleted but
            // the handle must still be destroyed); it is not used after this.
            let err = unsafe { f(&mut args) };
            let _ = self.client.api.check(err, "PJRT_Buffer_Destroy");
        }
    }
}

/// A compiled program loaded on the client's devices.
pub(crate) struct LoadedExecutable {
    client: Arc<Client>,
    raw: *mut ffi::LoadedExecutable,
    num_outputs: usize,
    /// The last execution's completion events, awaited once the next execution is
    /// launched, or on drop (see `execute`).
    pending: std::sync::Mutex<Vec<*mut ffi::Event>>,
}

// SAFETY: PJRT loaded executables may be executed and freed from any thread.
unsafe impl Send for LoadedExecutable {}
// SAFETY: as above; execution through a shared handle is allowed by PJRT.
unsafe impl Sync for LoadedExecutable {}

impl LoadedExecutable {
    fn wrap(client: Arc<Client>, raw: *mut ffi::LoadedExecutable) -> Result<LoadedExecutable> {
        let mut exe = LoadedExecutable {
            client,
            raw,
            num_outputs: 0,
            pending: std::sync::Mutex::new(Vec::new()),
        };
        exe.num_outputs = exe.with_executable(|api, e| {
            let f = entry!(api, executable_num_outputs)?;
            let mut args = ffi::ExecutableNumOutputsArgs {
                struct_size: size::<ffi::ExecutableNumOutputsArgs>(),
                extension_start: std::ptr::null_mut(),
                executable: e,
                num_outputs: 0,
            };
            // SAFETY: e is a live executable owned by with_executable.
            let err = unsafe { f(&mut args) };
            api.check(err, "PJRT_Executable_NumOutputs")?;
            Ok(args.num_outputs)
        })?;
        Ok(exe)
    }

    /// Runs `f` on the (unloaded) executable behind this one, freed afterwards.
    fn with_executable<R>(
        &self,
        f: impl FnOnce(&Api, *mut ffi::Executable) -> Result<R>,
    ) -> Result<R> {
        let api = &self.client.api;
        let get = entry!(api, loaded_executable_get_executable)?;
        let mut args = ffi::LoadedExecutableGetExecutableArgs {
            struct_size: size::<ffi::LoadedExecutableGetExecutableArgs>(),
            extension_start: std::ptr::null_mut(),
            loaded_executable: self.raw,
            executable: std::ptr::null_mut(),
        };
        // SAFETY: self.raw is live.
        let err = unsafe { get(&mut args) };
        api.check(err, "PJRT_LoadedExecutable_GetExecutable")?;
        let result = f(api, args.executable);
        if let Ok(destroy) = entry!(api, executable_destroy) {
            let mut d = ffi::ExecutableDestroyArgs {
                struct_size: size::<ffi::ExecutableDestroyArgs>(),
                extension_start: std::ptr::null_mut(),
                executable: args.executable,
            };
            // SAFETY: the executable handle was created for us above and is not used
            // after this.
            let err = unsafe { destroy(&mut d) };
            let _ = api.check(err, "PJRT_Executable_Destroy");
        }
        result
    }

    pub fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    /// The client-device index of each device the executable runs on, in the order
    /// `execute` takes argument lists.
    pub fn addressable_device_indices(&self) -> Result<Vec<usize>> {
        let api = &self.client.api;
        let f = entry!(api, loaded_executable_addressable_devices)?;
        let mut args = ffi::LoadedExecutableAddressableDevicesArgs {
            struct_size: size::<ffi::LoadedExecutableAddressableDevicesArgs>(),
            extension_start: std::ptr::null_mut(),
            executable: self.raw,
            addressable_devices: std::ptr::null(),
            num_addressable_devices: 0,
        };
        // SAFETY: self.raw is a live executable.
        let err = unsafe { f(&mut args) };
        api.check(err, "PJRT_LoadedExecutable_AddressableDevices")?;
        if args.num_addressable_devices == 0 {
            return Ok(Vec::new());
        }
        // SAFETY: the plugin returned an array of that many device pointers, owned by the
        // executable (which outlives this call).
        let devices = unsafe {
            std::slice::from_raw_parts(args.addressable_devices, args.num_addressable_devices)
        };
        devices
            .iter()
            .map(|&d| {
                self.client.device_index(d).ok_or_else(|| Error::Backend {
                    backend: "xla",
                    message: "the executable runs on a device the client does not list".into(),
                })
            })
            .collect()
    }

    /// The plugin's serialization of the executable (for the persistent cache).
    pub fn serialize(&self) -> Result<Vec<u8>> {
        self.with_executable(|api, e| {
            let f = entry!(api, executable_serialize)?;
            let mut args = ffi::ExecutableSerializeArgs {
                struct_size: size::<ffi::ExecutableSerializeArgs>(),
                extension_start: std::ptr::null_mut(),
                executable: e,
                serialized_bytes: std::ptr::null(),
                serialized_bytes_size: 0,
                serialized_executable: std::ptr::null_mut(),
                serialized_executable_deleter: None,
            };
            // SAFETY: e is live for the call.
            let err = unsafe { f(&mut args) };
            api.check(err, "PJRT_Executable_Serialize")?;
            let bytes = if args.serialized_bytes.is_null() {
                Vec::new()
            } else {
                // SAFETY: the plugin wrote a (pointer, length) pair backed by
                // `serialized_executable`, freed just below.
                unsafe {
                    std::slice::from_raw_parts(
                        args.serialized_bytes.cast::<u8>(),
                        args.serialized_bytes_size,
                    )
                }
                .to_vec()
            };
            if let Some(deleter) = args.serialized_executable_deleter {
                // SAFETY: called once, as the header requires, after the bytes were copied.
                unsafe { deleter(args.serialized_executable) };
            }
            Ok(bytes)
        })
    }

    /// The last execution's events (a panic elsewhere cannot leave them half written).
    fn pending(&self) -> std::sync::MutexGuard<'_, Vec<*mut ffi::Event>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Awaits the last execution's completion, returning its error if it failed.
    fn settle(&self) -> Result<()> {
        let events = std::mem::take(&mut *self.pending());
        self.settle_events(events)
    }

    fn settle_events(&self, events: Vec<*mut ffi::Event>) -> Result<()> {
        let mut status = Ok(());
        for e in events {
            let r = self
                .client
                .api
                .await_event(e, "PJRT_LoadedExecutable_Execute (device)");
            if status.is_ok() {
                status = r;
            }
        }
        status
    }

    /// Executes once per device: `args[d]` is device `d`'s argument list (in the order of
    /// `PJRT_LoadedExecutable_AddressableDevices`). Arguments the program aliases to outputs
    /// are donated: their handles are dead afterwards and must only be dropped. Returns
    /// each device's outputs as soon as the run is launched: reading an output waits for
    /// it, and the host does not pay a second wake-up per call to learn what the read
    /// tells it anyway. The previous run's completion is awaited once this one is
    /// launched (so the device has this run queued while the host waits: the fit loop
    /// does not read every call's results), which reports a failed run; the last run is
    /// awaited before the executable is freed.
    /// Dropping an input while the run uses it is safe: PJRT frees a buffer's memory only
    /// once the work using it is done.
    pub fn execute(&self, args: &[Vec<*mut ffi::Buffer>]) -> Result<Vec<Vec<DeviceBuffer>>> {
        let api = &self.client.api;
        let f = entry!(api, loaded_executable_execute)?;
        let num_args = args.first().map_or(0, Vec::len);
        if args.iter().any(|a| a.len() != num_args) {
            return Err(Error::invalid(
                "PJRT execute",
                "every device needs the same number of arguments",
            ));
        }
        let mut options = ffi::ExecuteOptions {
            struct_size: size::<ffi::ExecuteOptions>(),
            extension_start: std::ptr::null_mut(),
            send_callbacks: std::ptr::null_mut(),
            recv_callbacks: std::ptr::null_mut(),
            num_send_ops: 0,
            num_recv_ops: 0,
            launch_id: 0,
            non_donatable_input_indices: std::ptr::null(),
            num_non_donatable_input_indices: 0,
            context: std::ptr::null_mut(),
            call_location: std::ptr::null(),
            num_tasks: 0,
            task_ids: std::ptr::null_mut(),
            incarnation_ids: std::ptr::null_mut(),
            multi_slice_config: std::ptr::null_mut(),
            use_major_to_minor_data_layout_for_callbacks: false,
            hlo_output_callbacks: std::ptr::null_mut(),
            num_hlo_output_callbacks: 0,
        };
        let arg_lists: Vec<*const *mut ffi::Buffer> = args.iter().map(|a| a.as_ptr()).collect();
        let mut outputs: Vec<Vec<*mut ffi::Buffer>> =
            vec![vec![std::ptr::null_mut(); self.num_outputs]; args.len()];
        let output_lists: Vec<*mut *mut ffi::Buffer> =
            outputs.iter_mut().map(|o| o.as_mut_ptr()).collect();
        let mut events: Vec<*mut ffi::Event> = vec![std::ptr::null_mut(); args.len()];
        let mut exec = ffi::LoadedExecutableExecuteArgs {
            struct_size: size::<ffi::LoadedExecutableExecuteArgs>(),
            extension_start: std::ptr::null_mut(),
            executable: self.raw,
            options: &mut options,
            argument_lists: arg_lists.as_ptr(),
            num_devices: args.len(),
            num_args,
            output_lists: output_lists.as_ptr(),
            device_complete_events: events.as_mut_ptr(),
            execute_device: std::ptr::null_mut(),
        };
        // SAFETY: every argument is a live buffer of this client (checked by the caller);
        // the output arrays have num_outputs slots per device, as the plugin writes; all
        // arrays outlive the call.
        let err = unsafe { f(&mut exec) };
        api.check(err, "PJRT_LoadedExecutable_Execute")?;
        // Own the outputs first, so they are freed even if a device reports failure.
        // Argument list `d` runs on the executable's `d`-th device, which compilation made
        // the client's `d`-th (a single-device program runs on device 0; a replicated one
        // is checked by `addressable_device_indices`).
        let owned: Vec<Vec<DeviceBuffer>> = outputs
            .into_iter()
            .enumerate()
            .map(|(device, o)| {
                o.into_iter()
                    .map(|raw| DeviceBuffer {
                        client: self.client.clone(),
                        raw,
                        device,
                    })
                    .collect()
            })
            .collect();
        let events: Vec<*mut ffi::Event> = events.into_iter().filter(|e| !e.is_null()).collect();
        let previous = std::mem::replace(&mut *self.pending(), events);
        self.settle_events(previous)?;
        Ok(owned)
    }
}

impl Drop for LoadedExecutable {
    fn drop(&mut self) {
        let _ = self.settle();
        if let Ok(f) = entry!(&self.client.api, loaded_executable_destroy) {
            let mut args = ffi::LoadedExecutableDestroyArgs {
                struct_size: size::<ffi::LoadedExecutableDestroyArgs>(),
                extension_start: std::ptr::null_mut(),
                executable: self.raw,
            };
            // SAFETY: we own the handle; its last run was awaited just above.
            let err = unsafe { f(&mut args) };
            let _ = self.client.api.check(err, "PJRT_LoadedExecutable_Destroy");
        }
    }
}
