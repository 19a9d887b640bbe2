//! Data parallelism on the backend side: one program run as N replicas, replica `r` on
//! device `r` (an XLA device, or a worker thread of the native backend), with the
//! collectives of the program (`all_reduce_sum`, `replica_id`) spanning the replicas.
//!
//! Two layers. [`ReplicaBackend`] is what a concrete backend offers: placing data on a
//! replica's device and compiling a program for N replicas, executed with one argument
//! list per replica. [`MirroredBackend`] turns that into an ordinary [`Backend`] whose
//! buffers hold one buffer per replica, so a model whose backend it is keeps its
//! parameters, optimizer state and metrics replicated on every device without the
//! training code handling lists of buffers (TensorFlow's mirrored variables).

use super::{holds, holds_rows, Backend, Buffer, CompileOptions, Executable, Placement};
use crate::ir::{DType, Graph, TensorType};
use crate::{Error, Result, Tensor};
use std::sync::Arc;

/// A backend that runs one program as several data-parallel replicas.
pub trait ReplicaBackend: Backend {
    /// The most replicas one program can run as (the client's devices for XLA).
    fn max_replicas(&self) -> usize;
    /// What replica `r` runs on, for device listings (`cpu:0`, `TPU v4`, ...).
    fn replica_device_kind(&self, replica: usize) -> String;
    /// Copies a host tensor onto the device replica `replica` runs on.
    fn upload_to(&self, t: &Tensor, replica: usize) -> Result<Buffer>;
    /// Copies a host tensor into an existing buffer of replica `replica` (reusing its
    /// memory where the backend can).
    fn upload_into_replica(&self, t: &Tensor, b: &mut Buffer, replica: usize) -> Result<()> {
        *b = self.upload_to(t, replica)?;
        Ok(())
    }
    /// Copies rows `rows` of `t` (indices along its first axis) into replica `replica`'s
    /// buffer `b`: a replica's share of a batch, taken without building it on the host
    /// first where the backend can.
    fn upload_rows_into_replica(
        &self,
        t: &Tensor,
        rows: &[usize],
        b: &mut Buffer,
        replica: usize,
    ) -> Result<()> {
        let part = gathered(t, rows)?;
        self.upload_into_replica(&part, b, replica)
    }
    /// Compiles `graph`, one replica's program, to run as `replicas` replicas.
    fn compile_replicated(
        &self,
        graph: &Graph,
        options: &CompileOptions,
        replicas: usize,
    ) -> Result<Box<dyn ReplicatedExecutable>>;
}

/// A program compiled for several replicas.
pub trait ReplicatedExecutable: Send + Sync {
    fn replicas(&self) -> usize;
    /// One replica's parameter types (every replica's are the same).
    fn param_types(&self) -> &[TensorType];
    fn output_types(&self) -> &[TensorType];
    /// Runs every replica once. `args[r]` is replica `r`'s argument list, its buffers on
    /// replica `r`'s device; updated parameters are replaced in place in each list.
    /// Returns each replica's other outputs.
    fn execute(&mut self, args: &mut [Vec<Buffer>]) -> Result<Vec<Vec<Buffer>>>;
}

/// Rows `rows` of `t` as a new tensor.
pub(crate) fn gathered(t: &Tensor, rows: &[usize]) -> Result<Tensor> {
    let mut dims = t.dims().to_vec();
    match dims.first_mut() {
        Some(d) => *d = rows.len(),
        None => {
            return Err(Error::invalid(
                "upload_rows",
                "a scalar has no rows to split over replicas",
            ))
        }
    }
    let mut part = Tensor::zeros(&TensorType::new(t.dtype(), dims))?;
    crate::kernel::rows::gather_rows(t, rows, &mut part)?;
    Ok(part)
}

/// Checks a replica count against what a backend can run.
pub(crate) fn check_replicas(backend: &str, replicas: usize, max: usize) -> Result<()> {
    if replicas == 0 || replicas > max {
        return Err(Error::invalid(
            format!("{backend} replicas"),
            format!("the replica count must be between 1 and {max}, got {replicas}"),
        ));
    }
    Ok(())
}

/// Every graph compiled by this backend runs as `replicas` data-parallel replicas of an
/// inner [`ReplicaBackend`]. Its buffers hold one buffer per replica: [`Backend::upload`]
/// copies a value to every replica (mirrored state), [`MirroredBackend::upload_per_replica`]
/// gives each replica its own piece (a batch split over replicas). Reading a value reads
/// replica 0's copy: mirrored state is identical on every replica by construction (the
/// step all-reduces what would make it differ).
pub struct MirroredBackend {
    inner: Arc<dyn ReplicaBackend>,
    replicas: usize,
}

impl std::fmt::Debug for MirroredBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MirroredBackend({})", self.name())
    }
}

impl MirroredBackend {
    /// `replicas` replicas of `inner`, replica `r` on its device `r`.
    pub fn new(inner: Arc<dyn ReplicaBackend>, replicas: usize) -> Result<MirroredBackend> {
        check_replicas(&inner.name(), replicas, inner.max_replicas())?;
        Ok(MirroredBackend { inner, replicas })
    }

    pub fn replicas(&self) -> usize {
        self.replicas
    }

    pub fn inner(&self) -> &Arc<dyn ReplicaBackend> {
        &self.inner
    }

    /// One value per replica from one tensor per replica (`parts[r]` to replica `r`).
    /// Every part must have the same type.
    pub fn upload_per_replica(&self, parts: &[Tensor]) -> Result<Buffer> {
        let ty = self.check_parts(parts)?;
        let bufs = parts
            .iter()
            .enumerate()
            .map(|(r, t)| self.inner.upload_to(t, r))
            .collect::<Result<Vec<_>>>()?;
        Ok(Buffer::replicated(ty, bufs))
    }

    /// [`upload_per_replica`](Self::upload_per_replica) into an existing value of the same
    /// type, reusing its memory where the inner backend can.
    pub fn upload_per_replica_into(&self, parts: &[Tensor], b: &mut Buffer) -> Result<()> {
        let ty = self.check_parts(parts)?;
        if b.ty() != &ty || b.replica_parts()?.len() != self.replicas {
            *b = self.upload_per_replica(parts)?;
            return Ok(());
        }
        for (r, (t, part)) in parts.iter().zip(b.replica_parts_mut()?).enumerate() {
            self.inner.upload_into_replica(t, part, r)?;
        }
        Ok(())
    }

    /// One value per replica holding rows `rows[r]` of `t` for replica `r` (a batch split
    /// over the replicas), reusing `b`'s memory when it is such a value already.
    pub fn upload_rows_per_replica_into(
        &self,
        t: &Tensor,
        rows: &[Vec<usize>],
        b: &mut Buffer,
    ) -> Result<()> {
        if rows.len() != self.replicas {
            return Err(Error::invalid(
                "upload_rows_per_replica",
                format!("{} row lists for {} replicas", rows.len(), self.replicas),
            ));
        }
        let reusable = matches!(b.replica_parts(), Ok(p) if p.len() == self.replicas);
        if !reusable {
            let parts = rows
                .iter()
                .enumerate()
                .map(|(r, idx)| self.inner.upload_to(&gathered(t, idx)?, r))
                .collect::<Result<Vec<_>>>()?;
            *b = Buffer::replicated(parts[0].ty().clone(), parts);
            return Ok(());
        }
        for (r, (idx, part)) in rows.iter().zip(b.replica_parts_mut()?).enumerate() {
            self.inner.upload_rows_into_replica(t, idx, part, r)?;
        }
        let ty = b.replica_parts()?[0].ty().clone();
        if b.replica_parts()?.iter().any(|p| p.ty() != &ty) {
            return Err(Error::invalid(
                "upload_rows_per_replica",
                "every replica must get the same number of rows",
            ));
        }
        b.ty = ty;
        Ok(())
    }

    /// Every replica's copy (or piece) of a value.
    pub fn download_per_replica(&self, b: &Buffer) -> Result<Vec<Tensor>> {
        self.parts(b)?
            .iter()
            .map(|p| self.inner.download(p))
            .collect()
    }

    fn check_parts(&self, parts: &[Tensor]) -> Result<TensorType> {
        if parts.len() != self.replicas {
            return Err(Error::invalid(
                "upload_per_replica",
                format!(
                    "{} tensors for {} replicas: give one per replica",
                    parts.len(),
                    self.replicas
                ),
            ));
        }
        let ty = parts[0].ty();
        if let Some((r, t)) = parts.iter().enumerate().find(|(_, t)| t.ty() != ty) {
            return Err(Error::invalid(
                "upload_per_replica",
                format!(
                    "every replica's piece must have one type: replica 0's is {ty}, replica {r}'s {}",
                    t.ty()
                ),
            ));
        }
        Ok(ty)
    }

    /// The per-replica buffers of a value of this backend.
    fn parts<'b>(&self, b: &'b Buffer) -> Result<&'b [Buffer]> {
        let parts = b.replica_parts()?;
        if parts.len() != self.replicas {
            return Err(Error::invalid(
                self.name(),
                format!(
                    "a value of {} replicas was given to a backend of {}",
                    parts.len(),
                    self.replicas
                ),
            ));
        }
        Ok(parts)
    }
}

impl Backend for MirroredBackend {
    fn name(&self) -> String {
        format!("mirrored({} x{})", self.inner.name(), self.replicas)
    }

    fn compile(&self, graph: &Graph, options: &CompileOptions) -> Result<Box<dyn Executable>> {
        let inner = self
            .inner
            .compile_replicated(graph, options, self.replicas)?;
        Ok(Box::new(MirroredExecutable {
            inner,
            name: self.name(),
        }))
    }

    fn upload(&self, t: &Tensor) -> Result<Buffer> {
        let parts = (0..self.replicas)
            .map(|r| self.inner.upload_to(t, r))
            .collect::<Result<Vec<_>>>()?;
        Ok(Buffer::replicated(t.ty(), parts))
    }

    fn upload_into(&self, t: &Tensor, b: &mut Buffer) -> Result<()> {
        self.parts(b)?;
        for (r, part) in b.replica_parts_mut()?.iter_mut().enumerate() {
            self.inner.upload_into_replica(t, part, r)?;
        }
        b.ty = t.ty();
        Ok(())
    }

    fn download(&self, b: &Buffer) -> Result<Tensor> {
        self.inner.download(&self.parts(b)?[0])
    }

    fn read_scalar(&self, b: &Buffer) -> Result<f64> {
        self.inner.read_scalar(&self.parts(b)?[0])
    }

    fn read_f32_into(&self, b: &Buffer, out: &mut [f32]) -> Result<()> {
        self.inner.read_f32_into(&self.parts(b)?[0], out)
    }

    fn replicas(&self) -> Option<usize> {
        Some(self.replicas)
    }

    fn input_fits(&self, b: &Buffer, t: &Tensor, p: &Placement<'_>) -> bool {
        let n = self.replicas;
        matches!(b.replica_parts(), Ok(parts) if parts.len() == n)
            && match p {
                Placement::Whole => holds(b.ty(), t),
                Placement::Rows(rows) => rows.len() == n && holds_rows(b.ty(), t, rows[0].len()),
                Placement::Parts(parts) => parts.len() == n && holds(b.ty(), &parts[0]),
            }
    }

    fn bind_inputs(
        &self,
        args: &mut Vec<Buffer>,
        base: usize,
        inputs: &mut [&mut Tensor],
        placements: &[Placement<'_>],
    ) -> Result<()> {
        super::check_placements(inputs.len(), placements.len())?;
        args.truncate(base + inputs.len());
        while args.len() < base + inputs.len() {
            // A placeholder of no replicas: every upload below replaces it.
            args.push(Buffer::replicated(
                TensorType::scalar(DType::F32),
                Vec::new(),
            ));
        }
        for ((b, t), p) in args[base..].iter_mut().zip(inputs.iter()).zip(placements) {
            match p {
                Placement::Rows(rows) => self.upload_rows_per_replica_into(t, rows, b)?,
                Placement::Parts(parts) => self.upload_per_replica_into(parts, b)?,
                Placement::Whole => {
                    let placed = matches!(b.replica_parts(), Ok(p) if p.len() == self.replicas);
                    if placed && holds(b.ty(), t) {
                        self.upload_into(t, b)?;
                    } else {
                        *b = self.upload(t)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn download_replicas(&self, b: &Buffer) -> Result<Vec<Tensor>> {
        self.download_per_replica(b)
    }
}

/// A replicated program behind the single-device [`Executable`] interface: each argument
/// is a per-replica value, each output comes back as one.
struct MirroredExecutable {
    inner: Box<dyn ReplicatedExecutable>,
    name: String,
}

impl Executable for MirroredExecutable {
    fn param_types(&self) -> &[TensorType] {
        self.inner.param_types()
    }

    fn output_types(&self) -> &[TensorType] {
        self.inner.output_types()
    }

    fn execute(&mut self, args: &mut [Buffer]) -> Result<Vec<Buffer>> {
        let n = self.inner.replicas();
        let params = self.inner.param_types();
        if args.len() != params.len() {
            return Err(Error::invalid(
                format!("{} execute", self.name),
                format!("expected {} arguments, got {}", params.len(), args.len()),
            ));
        }
        for (i, (a, p)) in args.iter().zip(params).enumerate() {
            let parts = a.replica_parts()?;
            if parts.len() != n {
                return Err(Error::invalid(
                    format!("{} execute", self.name),
                    format!(
                        "argument {i} holds {} replicas' values, not {n}",
                        parts.len()
                    ),
                ));
            }
            if a.ty() != p {
                return Err(Error::invalid(
                    format!("{} execute", self.name),
                    format!("argument {i}: expected {p}, got {}", a.ty()),
                ));
            }
        }
        // Argument-major (one value, every replica) to replica-major (one replica, every
        // value) and back: moves of handles, no copies.
        let mut per_replica: Vec<Vec<Buffer>> =
            (0..n).map(|_| Vec::with_capacity(args.len())).collect();
        for a in args.iter_mut() {
            let parts = std::mem::take(a.replica_parts_mut()?);
            for (list, part) in per_replica.iter_mut().zip(parts) {
                list.push(part);
            }
        }
        let result = self.inner.execute(&mut per_replica);
        let mut lists: Vec<std::vec::IntoIter<Buffer>> =
            per_replica.into_iter().map(Vec::into_iter).collect();
        for a in args.iter_mut() {
            let parts = a.replica_parts_mut()?;
            for list in &mut lists {
                parts.extend(list.next());
            }
        }
        let outs = result?;
        let types = self.inner.output_types();
        let returned = outs.first().map_or(0, Vec::len);
        let mut outs: Vec<std::vec::IntoIter<Buffer>> =
            outs.into_iter().map(Vec::into_iter).collect();
        let mut merged = Vec::with_capacity(returned);
        for _ in 0..returned {
            let parts: Vec<Buffer> = outs.iter_mut().filter_map(Iterator::next).collect();
            if parts.len() != n {
                return Err(Error::Backend {
                    backend: "mirrored",
                    message: "the replicas returned different numbers of outputs".into(),
                });
            }
            let ty = parts[0].ty().clone();
            debug_assert!(types.contains(&ty));
            merged.push(Buffer::replicated(ty, parts));
        }
        Ok(merged)
    }
}
