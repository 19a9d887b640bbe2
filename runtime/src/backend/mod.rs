//! Backends compile and execute whole graphs. The trait is deliberately narrow — compile,
//! move data in and out, execute — so every backend runs the same op test list.

mod device;
mod factory;
pub mod native;
pub mod pjrt;
mod replicated;

pub use device::{Device, DEVICE_ENV};
pub use factory::backend_from_env;
pub use replicated::{MirroredBackend, ReplicaBackend, ReplicatedExecutable};

use crate::ir::{DType, Graph, TensorType};
// Host memory, which the native kernels work on in place: a kernel-level type (it moves
// below the backends with the rest of `native::data`).
use crate::kernel::Storage;
use crate::{Error, Result, Tensor};

/// How a graph is compiled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompileOptions {
    /// State updates: `(output, param)` makes graph output `output` the new value of
    /// parameter `param` after each execution. The parameter's buffer is donated to the
    /// computation, so the update happens in place with no copy where the backend can.
    pub updates: Vec<(usize, usize)>,
}

impl CompileOptions {
    /// Checks the update pairs against a graph: indices in range, types equal, each
    /// output and parameter used at most once.
    pub fn validate(&self, g: &Graph) -> Result<()> {
        let (np, no) = (g.params().len(), g.outputs().len());
        let mut seen_o = vec![false; no];
        let mut seen_p = vec![false; np];
        for &(o, p) in &self.updates {
            if o >= no || p >= np {
                return Err(Error::invalid(
                    "CompileOptions::updates",
                    format!("pair (output {o}, param {p}) out of range: the graph has {no} outputs and {np} params"),
                ));
            }
            if std::mem::replace(&mut seen_o[o], true) || std::mem::replace(&mut seen_p[p], true) {
                return Err(Error::invalid(
                    "CompileOptions::updates",
                    format!("output {o} or param {p} appears in more than one update"),
                ));
            }
            let (to, tp) = (g.ty(g.outputs()[o]), g.ty(g.params()[p]));
            if to != tp {
                return Err(Error::invalid(
                    "CompileOptions::updates",
                    format!("output {o} is {to} but param {p} is {tp}"),
                ));
            }
        }
        Ok(())
    }
}

/// Data owned by a backend: host memory, or memory a backend keeps elsewhere (a device)
/// behind a handle only that backend reads.
#[derive(Debug)]
pub struct Buffer {
    ty: TensorType,
    repr: Repr,
}

#[derive(Debug)]
pub(crate) enum Repr {
    /// Host memory, read and written in place by the native backend's kernels.
    Host(Storage),
    /// A handle on memory outside the host, opaque here: the backend named `backend` made
    /// it and downcasts it (see [`Buffer::device_memory`]).
    Device {
        backend: &'static str,
        memory: Box<dyn DeviceMemory>,
    },
    /// One buffer per replica of a [`MirroredBackend`], each of this buffer's type: copies
    /// of one value (mirrored state) or each replica's own piece of a batch.
    Replicated(Vec<Buffer>),
}

/// What a backend keeps in a [`Buffer`] for memory outside the host (a PJRT device
/// buffer): any type of its own, which it gets back by downcasting.
pub(crate) trait DeviceMemory: std::any::Any + Send + Sync + std::fmt::Debug {
    /// Called on the `dyn DeviceMemory` itself, not on a `Box` of it (which is one too).
    fn as_any(&self) -> &dyn std::any::Any;
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any;
}

impl<T: std::any::Any + Send + Sync + std::fmt::Debug> DeviceMemory for T {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

impl Buffer {
    pub fn ty(&self) -> &TensorType {
        &self.ty
    }

    pub(crate) fn native(ty: TensorType, s: Storage) -> Buffer {
        Buffer {
            ty,
            repr: Repr::Host(s),
        }
    }

    /// A buffer of backend `backend` holding `memory` outside the host.
    pub(crate) fn device(
        ty: TensorType,
        backend: &'static str,
        memory: impl DeviceMemory,
    ) -> Buffer {
        Buffer {
            ty,
            repr: Repr::Device {
                backend,
                memory: Box::new(memory),
            },
        }
    }

    /// The name of the backend that made this buffer.
    pub fn backend(&self) -> &'static str {
        match self.repr {
            Repr::Host(_) => "native",
            Repr::Device { backend, .. } => backend,
            Repr::Replicated(_) => "mirrored",
        }
    }

    fn wrong_backend(&self, expected: &str) -> Error {
        Error::WrongBackend {
            expected: expected.into(),
            got: self.backend().into(),
        }
    }

    /// The host storage of a native buffer; a typed error for any other.
    pub(crate) fn native_storage(&self) -> Result<&Storage> {
        match &self.repr {
            Repr::Host(s) => Ok(s),
            Repr::Device { .. } | Repr::Replicated(_) => Err(self.wrong_backend("native")),
        }
    }

    pub(crate) fn native_storage_mut(&mut self) -> Result<&mut Storage> {
        match self.repr {
            Repr::Host(ref mut s) => Ok(s),
            // The error is built only on this path: the native one runs every step.
            Repr::Device { .. } | Repr::Replicated(_) => Err(self.wrong_backend("native")),
        }
    }

    /// The memory that backend `backend` keeps in this buffer, as its type `T`; a typed
    /// error for a buffer of any other backend.
    pub(crate) fn device_memory<T: std::any::Any>(&self, backend: &'static str) -> Result<&T> {
        match &self.repr {
            Repr::Device { backend: b, memory } if *b == backend => (**memory)
                .as_any()
                .downcast_ref::<T>()
                .ok_or_else(|| self.wrong_backend(backend)),
            _ => Err(self.wrong_backend(backend)),
        }
    }

    /// [`device_memory`](Buffer::device_memory), to change in place.
    pub(crate) fn device_memory_mut<T: std::any::Any>(
        &mut self,
        backend: &'static str,
    ) -> Result<&mut T> {
        let got = self.backend();
        match &mut self.repr {
            Repr::Device { backend: b, memory } if *b == backend => {
                (**memory).as_any_mut().downcast_mut::<T>()
            }
            _ => None,
        }
        .ok_or_else(|| Error::WrongBackend {
            expected: backend.into(),
            got: got.into(),
        })
    }

    pub(crate) fn replicated(ty: TensorType, parts: Vec<Buffer>) -> Buffer {
        Buffer {
            ty,
            repr: Repr::Replicated(parts),
        }
    }

    /// The per-replica buffers of a [`MirroredBackend`] value; a typed error for any other.
    pub(crate) fn replica_parts(&self) -> Result<&[Buffer]> {
        match &self.repr {
            Repr::Replicated(parts) => Ok(parts),
            Repr::Host(_) | Repr::Device { .. } => Err(self.wrong_backend("mirrored")),
        }
    }

    pub(crate) fn replica_parts_mut(&mut self) -> Result<&mut Vec<Buffer>> {
        match self.repr {
            Repr::Replicated(ref mut parts) => Ok(parts),
            Repr::Host(_) | Repr::Device { .. } => Err(self.wrong_backend("mirrored")),
        }
    }
}

/// Where one input of a call goes when the call runs as data-parallel replicas (see
/// [`Backend::bind_inputs`]). On a backend that runs graphs once, on one device, every
/// input is whole (the one replica's share is all of it).
#[derive(Clone, Copy, Debug)]
pub enum Placement<'a> {
    /// Replica `r` gets rows `rows[r]` of the tensor (its share of a batch).
    Rows(&'a [Vec<usize>]),
    /// Replica `r` gets `parts[r]` (one tensor per replica, all of one type).
    Parts(&'a [Tensor]),
    /// Every replica gets the whole tensor.
    Whole,
}

/// Whether a buffer of type `ty` holds `t`'s type with `rows` rows, compared in place
/// (building a type allocates, and the fit loop asks every step).
pub(crate) fn holds_rows(ty: &TensorType, t: &Tensor, rows: usize) -> bool {
    ty.dtype == t.dtype()
        && ty.dims().first() == Some(&rows)
        && ty.dims().get(1..) == t.dims().get(1..)
}

/// Whether a buffer of type `ty` holds `t`'s type, compared in place.
pub(crate) fn holds(ty: &TensorType, t: &Tensor) -> bool {
    ty.dtype == t.dtype() && ty.dims() == t.dims()
}

/// A compiled graph, ready to run many times.
pub trait Executable: Send + Sync {
    fn param_types(&self) -> &[TensorType];
    fn output_types(&self) -> &[TensorType];

    /// Runs the graph once. `args` holds one buffer per parameter; parameters named in
    /// [`CompileOptions::updates`] receive their new values in place. Returns the other
    /// outputs, in output order.
    fn execute(&mut self, args: &mut [Buffer]) -> Result<Vec<Buffer>>;

    /// [`execute`](Executable::execute) writing the returned outputs into `outputs`,
    /// reusing the buffers already there where the backend can: a training loop that keeps
    /// `outputs` between steps allocates nothing for them once warm.
    fn execute_into(&mut self, args: &mut [Buffer], outputs: &mut Vec<Buffer>) -> Result<()> {
        *outputs = self.execute(args)?;
        Ok(())
    }
}

/// A place graphs run.
/// Backends are shared between a model and its executables, possibly across threads.
pub trait Backend: Send + Sync {
    fn name(&self) -> String;
    fn compile(&self, graph: &Graph, options: &CompileOptions) -> Result<Box<dyn Executable>>;
    /// Copies a host tensor into a new backend buffer.
    fn upload(&self, t: &Tensor) -> Result<Buffer>;
    /// Copies a host tensor into an existing buffer of the same type (reusing its memory
    /// where the backend can).
    fn upload_into(&self, t: &Tensor, b: &mut Buffer) -> Result<()> {
        *b = self.upload(t)?;
        Ok(())
    }
    /// As [`upload_into`](Backend::upload_into), but the backend may take `t`'s memory
    /// instead of copying it, leaving `t` its shape and unspecified values (the fit loop
    /// refills its batch tensors every step). The native backend swaps the two.
    fn upload_taking(&self, t: &mut Tensor, b: &mut Buffer) -> Result<()> {
        self.upload_into(t, b)
    }
    /// Copies a buffer to the host.
    fn download(&self, b: &Buffer) -> Result<Tensor>;

    /// The single element of a one-element buffer as f64 (losses, metrics, flags); the
    /// fit loop reads these every step, so backends avoid building a host tensor.
    fn read_scalar(&self, b: &Buffer) -> Result<f64> {
        self.download(b)?.scalar_f64()
    }

    /// The elements of an f32 vector buffer, written into `out` (as long as the buffer):
    /// the fit loop reads a step's losses, metrics and flags this way, in one transfer and
    /// without allocating.
    fn read_f32_into(&self, b: &Buffer, out: &mut [f32]) -> Result<()> {
        check_f32_vector(b, out.len())?;
        let t = self.download(b)?;
        out.copy_from_slice(t.array::<f32>()?.as_slice().unwrap_or(&[]));
        Ok(())
    }

    /// How many data-parallel replicas every graph compiled here runs as; `None` for a
    /// backend that runs each graph once, on one device.
    fn replicas(&self) -> Option<usize> {
        None
    }

    /// Whether `b` holds an input like `t` placed as `p`, so that binding `t` there (see
    /// [`bind_inputs`](Backend::bind_inputs)) reuses it.
    fn input_fits(&self, b: &Buffer, t: &Tensor, p: &Placement<'_>) -> bool {
        match p {
            Placement::Whole => holds(b.ty(), t),
            Placement::Rows([rows]) => holds_rows(b.ty(), t, rows.len()),
            Placement::Parts([part]) => holds(b.ty(), part),
            Placement::Rows(_) | Placement::Parts(_) => false,
        }
    }

    /// Puts a call's inputs after the first `base` arguments: `inputs[i]` becomes
    /// `args[base + i]`, placed on the replicas as `placements[i]` says. The buffers there
    /// are reused (their memory where the backend can; it may also take a whole input's
    /// memory, leaving the tensor its shape and unspecified values: callers refill their
    /// batch tensors every call); missing ones are made.
    fn bind_inputs(
        &self,
        args: &mut Vec<Buffer>,
        base: usize,
        inputs: &mut [&mut Tensor],
        placements: &[Placement<'_>],
    ) -> Result<()> {
        check_placements(inputs.len(), placements.len())?;
        args.truncate(base + inputs.len());
        for (i, (t, p)) in inputs.iter_mut().zip(placements).enumerate() {
            let mut gathered;
            let t: &mut Tensor = match p {
                Placement::Whole => t,
                Placement::Rows([rows]) => {
                    gathered = replicated::gathered(t, rows)?;
                    &mut gathered
                }
                Placement::Parts([part]) => {
                    gathered = part.clone();
                    &mut gathered
                }
                Placement::Rows(r) => return Err(one_replica(&self.name(), r.len())),
                Placement::Parts(p) => return Err(one_replica(&self.name(), p.len())),
            };
            match args.get_mut(base + i) {
                Some(b) => self.upload_taking(t, b)?,
                None => args.push(self.upload(t)?),
            }
        }
        Ok(())
    }

    /// Every replica's copy (or piece) of a value: one on a backend that does not
    /// replicate.
    fn download_replicas(&self, b: &Buffer) -> Result<Vec<Tensor>> {
        Ok(vec![self.download(b)?])
    }

    /// Compiles, uploads, runs once and downloads: the convenience for tests and one-off
    /// evaluations.
    fn run(&self, graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let mut exe = self.compile(graph, &CompileOptions::default())?;
        let mut args = inputs
            .iter()
            .map(|t| self.upload(t))
            .collect::<Result<Vec<_>>>()?;
        let outs = exe.execute(&mut args)?;
        outs.iter().map(|b| self.download(b)).collect()
    }
}

/// Checks that [`Backend::bind_inputs`] has one placement per input.
pub(crate) fn check_placements(inputs: usize, placements: usize) -> Result<()> {
    if inputs != placements {
        return Err(Error::invalid(
            "bind_inputs",
            format!("{inputs} inputs with {placements} placements: give one per input"),
        ));
    }
    Ok(())
}

/// The error for a placement over several replicas given to a backend that runs one.
fn one_replica(backend: &str, replicas: usize) -> Error {
    Error::invalid(
        "bind_inputs",
        format!(
            "{backend} runs graphs on one device; an input was placed over {replicas} replicas"
        ),
    )
}

/// Checks that `b` is an f32 vector of `n` elements, for [`Backend::read_f32_into`].
pub(crate) fn check_f32_vector(b: &Buffer, n: usize) -> Result<()> {
    let ty = b.ty();
    if ty.dtype != DType::F32 || ty.rank() != 1 || ty.numel() != n {
        return Err(Error::invalid(
            "read_f32_into",
            format!("expected an f32[{n}] buffer, got {ty}"),
        ));
    }
    Ok(())
}

/// Checks that execution arguments match the compiled parameter types.
pub(crate) fn check_args(
    backend: &'static str,
    params: &[TensorType],
    args: &[Buffer],
) -> Result<()> {
    if args.len() != params.len() {
        return Err(Error::invalid(
            format!("{backend} execute"),
            format!("expected {} arguments, got {}", params.len(), args.len()),
        ));
    }
    for (i, (p, a)) in params.iter().zip(args).enumerate() {
        if a.backend() != backend {
            return Err(a.wrong_backend(backend));
        }
        if p != a.ty() {
            return Err(Error::invalid(
                format!("{backend} execute"),
                format!("argument {i}: expected {p}, got {}", a.ty()),
            ));
        }
    }
    Ok(())
}
