//! `Model::export` and [`Exported`]: a model's inference function as a directory that runs
//! without the model's Rust type.
//!
//! ```text
//! dir/manifest.json        format and version, names, input/output shapes and dtypes
//!                          (batch dimension `null`), the parameters in order, the files
//! dir/model.ir             the inference graph in IR text, its batch size written `N`
//! dir/model.mlir           the StableHLO module the XLA backend compiles for it (batch 32)
//! dir/weights.safetensors  the parameters, by their `Model::weights` names
//! ```
//!
//! The batch size: the IR is statically shaped, so `model.ir` states the graph for every
//! batch size at once. Export builds the inference graph at two batch sizes, and every
//! number that differs between the two texts becomes an expression in `N` (`N`, `4*N`);
//! it then reads that text back at other batch sizes and refuses to export unless each is
//! exactly the graph the model itself builds there. [`Exported`] reads it at each batch
//! size it meets and compiles that graph on any backend, as `predict` does, so the two
//! give bit-identical outputs. `model.mlir` is for tools outside Strata (one batch size,
//! [`MLIR_BATCH`]); Strata itself never reads it back.
//!
//! Writing is atomic: everything goes to a temporary directory beside the target, which is
//! renamed into place. An existing export at the target is replaced (Keras' `overwrite`
//! default); anything else there (a file, a directory that is not an export and not empty)
//! is refused.

use crate::backend::{Backend, Buffer, CompileOptions, Device, Executable};
use crate::checkpoint::{from_view, size_mismatch, to_bytes, Bytes};
use crate::data::{gather_rows, IntoTensor};
use crate::ir::{DType, Graph, TensorType};
use crate::nn::Architecture;
use crate::train::{concat_rows, predict_graph};
use crate::{Error, Model, Result, Tensor};
use serde_json::{json, Value as Json};
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The `format` field of every manifest.
pub const FORMAT: &str = "strata.export";
/// The manifest version this Strata writes and reads.
pub const VERSION: u64 = 1;
/// The batch size `model.mlir` is written for.
pub const MLIR_BATCH: usize = 32;

const MANIFEST: &str = "manifest.json";
const IR: &str = "model.ir";
const MLIR: &str = "model.mlir";
const WEIGHTS: &str = "weights.safetensors";

/// The batch sizes whose graphs are compared to find the batch-dependent numbers.
const TRACES: [usize; 2] = [2, 3];
/// The batch sizes at which the generalised graph must equal the model's own.
const CHECKS: [usize; 3] = [1, 5, 32];
/// Rows per compiled batch in [`Exported::predict`], as in `Model::predict`.
const PREDICT_BATCH: usize = 32;
/// A manifest larger than this is not one.
const MAX_MANIFEST_BYTES: u64 = 16 << 20;

fn export_error(path: &Path, message: impl Into<String>) -> Error {
    Error::Export {
        path: path.display().to_string(),
        message: message.into(),
    }
}

fn io_error(path: &Path, source: io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

impl<A: Architecture> Model<A> {
    /// Writes the model's inference function to directory `dir`, which
    /// [`Exported::load`] reads back: `manifest.json` (names, input and output shapes and
    /// dtypes with a `null` batch dimension, the parameters, the files), `model.ir` (the
    /// graph as IR text, for every batch size: its batch size is written `N`),
    /// `model.mlir` (StableHLO at batch size 32, for tools outside Strata) and
    /// `weights.safetensors`. The model must be built.
    ///
    /// Atomic: the files are written to a temporary directory beside `dir`, then renamed.
    /// An earlier export at `dir` is replaced (as Keras overwrites); anything else there
    /// that is not an empty directory is refused.
    pub fn export(&self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        self.check_single_io("export")?;
        let input = self.input_shape().ok_or_else(|| {
            Error::invalid(
                "export",
                format!(
                    "model `{}` is not built: build it (or declare its input) before exporting",
                    self.name()
                ),
            )
        })?;
        let types: Vec<TensorType> = self.params().iter().map(|p| p.ty()).collect();
        let x_dtype = self.input_dtype();
        let graph_at = |batch: usize| {
            let mut dims = vec![batch];
            dims.extend_from_slice(input);
            predict_graph(self, &types, 1, &TensorType::new(x_dtype, dims))
        };
        let texts = TRACES
            .iter()
            .map(|&b| graph_at(b).map(|g| g.to_string()))
            .collect::<Result<Vec<_>>>()?;
        let unsupported = |why: String| Error::Unsupported {
            what: format!("exporting model `{}`", self.name()),
            message: why,
        };
        let ir = generalise(&texts[0], TRACES[0], &texts[1], TRACES[1]).ok_or_else(|| {
            unsupported("its inference graph changes with the batch size beyond its sizes".into())
        })?;
        for b in CHECKS {
            let want = graph_at(b)?;
            match Graph::parse_with_batch(&ir, b) {
                Ok(g) if g == want => {}
                Ok(_) => {
                    return Err(unsupported(format!(
                        "its inference graph at batch size {b} is not the one its other \
                         batch sizes imply"
                    )))
                }
                Err(e) => return Err(unsupported(format!("internal: {e}"))),
            }
        }
        let mlir_graph = graph_at(MLIR_BATCH)?;
        let mlir = crate::backend::pjrt::stablehlo_text(&mlir_graph, &CompileOptions::default())?;
        let output = mlir_graph.output_types();
        let [out_ty] = output.as_slice() else {
            return Err(unsupported(format!("{} outputs", output.len())));
        };

        let weights = self.weights();
        let mut tensors: Vec<(String, Bytes)> = Vec::new();
        for (name, t) in &weights {
            tensors.push((name.clone(), to_bytes(t)?));
        }
        let mut meta = HashMap::new();
        meta.insert("format".to_string(), format!("{FORMAT}.weights"));
        let weights_bytes =
            safetensors::serialize(tensors.iter().map(|(n, b)| (n.as_str(), b)), Some(meta))
                .map_err(|e| export_error(dir, e.to_string()))?;

        let batch_free = |dims: &[usize]| {
            std::iter::once(Json::Null)
                .chain(dims.iter().map(|&d| json!(d)))
                .collect::<Vec<_>>()
        };
        let manifest = json!({
            "format": FORMAT,
            "version": VERSION,
            "strata_version": env!("CARGO_PKG_VERSION"),
            "name": self.name(),
            "input": { "shape": batch_free(input), "dtype": x_dtype.to_string() },
            "output": {
                "shape": batch_free(&out_ty.dims()[1..]),
                "dtype": out_ty.dtype.to_string(),
            },
            "parameters": weights.iter().map(|(n, t)| json!({
                "name": n,
                "shape": t.dims(),
                "dtype": t.dtype().to_string(),
            })).collect::<Vec<_>>(),
            "batch_symbol": "N",
            "mlir_batch_size": MLIR_BATCH,
            "files": { "ir": IR, "mlir": MLIR, "weights": WEIGHTS },
        });
        let manifest = serde_json::to_string_pretty(&manifest)
            .map_err(|e| export_error(dir, e.to_string()))?;
        write_dir(
            dir,
            &[
                (IR, ir.as_bytes()),
                (MLIR, mlir.as_bytes()),
                (WEIGHTS, &weights_bytes),
                // Last: a directory with a manifest is a whole export.
                (MANIFEST, manifest.as_bytes()),
            ],
        )
    }
}

/// The text of graph `a` (built at batch size `ba`) with every number that is different in
/// `b` (built at `bb`) written in terms of `N`; `None` when the texts differ in anything
/// but such numbers, or a number is not a whole affine function of the batch size.
fn generalise(a: &str, ba: usize, b: &str, bb: usize) -> Option<String> {
    let (ta, tb) = (tokens(a), tokens(b));
    if ta.len() != tb.len() {
        return None;
    }
    let mut out = String::with_capacity(a.len());
    for (i, (x, y)) in ta.iter().zip(&tb).enumerate() {
        if x == y {
            out.push_str(x);
            continue;
        }
        let number = |t: &str| t.bytes().all(|c| c.is_ascii_digit());
        let before = if i > 0 { ta[i - 1] } else { "" };
        let after = ta.get(i + 1).copied().unwrap_or("");
        // Part of a float, a negative number, a value number or a name: not a size.
        let plain = !before.ends_with(['.', 'e', 'E', '-', '%', '_', 'x'])
            && !before.ends_with(|c: char| c.is_ascii_alphabetic())
            && !after.starts_with(['.', 'e', 'E', '_'])
            && !after.starts_with(|c: char| c.is_ascii_alphabetic());
        if !(number(x) && number(y) && plain) {
            return None;
        }
        let (va, vb): (i128, i128) = (x.parse().ok()?, y.parse().ok()?);
        let (ba, bb) = (ba as i128, bb as i128);
        let slope = vb - va;
        if slope % (bb - ba) != 0 || slope / (bb - ba) <= 0 {
            return None;
        }
        let k = slope / (bb - ba);
        let c = va - k * ba;
        if k != 1 {
            out.push_str(&format!("{k}*"));
        }
        out.push('N');
        match c {
            0 => {}
            c if c > 0 => out.push_str(&format!("+{c}")),
            c => out.push_str(&format!("{c}")),
        }
    }
    Some(out)
}

/// `s` cut into runs of digits and runs of anything else.
fn tokens(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = s.as_bytes();
    for i in 1..=bytes.len() {
        if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
            out.push(&s[start..i]);
            start = i;
        }
    }
    out
}

/// Writes `files` into a fresh directory beside `dir` and renames it to `dir`, replacing
/// an earlier export there.
fn write_dir(dir: &Path, files: &[(&str, &[u8])]) -> Result<()> {
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = dir
        .file_name()
        .ok_or_else(|| export_error(dir, "the path names no directory (it ends in `..`)"))?
        .to_string_lossy()
        .into_owned();
    let existing = match fs::symlink_metadata(dir) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_error(dir, e)),
    };
    if let Some(m) = &existing {
        if !m.is_dir() || !(is_export(dir) || is_empty_dir(dir)) {
            return Err(export_error(
                dir,
                "exists and is not a Strata export (nor an empty directory): refusing to \
                 replace it",
            ));
        }
    }
    let tmp = TempDir::create(parent, &name).map_err(|e| io_error(parent, e))?;
    for (file, bytes) in files {
        let path = tmp.path.join(file);
        let write = || -> io::Result<()> {
            let mut f = File::create(&path)?;
            f.write_all(bytes)?;
            f.sync_all()
        };
        write().map_err(|e| io_error(&path, e))?;
    }
    sync_dir(&tmp.path);
    if existing.is_some() {
        let old = TempDir::name(parent, &name, "old");
        fs::rename(dir, &old).map_err(|e| io_error(dir, e))?;
        if let Err(e) = fs::rename(&tmp.path, dir) {
            let _ = fs::rename(&old, dir);
            return Err(io_error(dir, e));
        }
        let _ = fs::remove_dir_all(&old);
    } else {
        fs::rename(&tmp.path, dir).map_err(|e| io_error(dir, e))?;
    }
    tmp.keep();
    sync_dir(parent);
    Ok(())
}

fn sync_dir(dir: &Path) {
    // Directories cannot be opened for syncing on every platform: best effort.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

fn is_empty_dir(dir: &Path) -> bool {
    fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
}

/// Whether `dir` holds a manifest of this format (any version).
fn is_export(dir: &Path) -> bool {
    read_manifest(&dir.join(MANIFEST))
        .is_ok_and(|m| m.get("format").and_then(Json::as_str) == Some(FORMAT))
}

/// A directory being written, removed unless kept.
struct TempDir {
    path: PathBuf,
    kept: bool,
}

impl TempDir {
    fn name(parent: &Path, name: &str, what: &str) -> PathBuf {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        parent.join(format!(
            ".{name}.export-{what}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ))
    }

    fn create(parent: &Path, name: &str) -> io::Result<TempDir> {
        let path = TempDir::name(parent, name, "tmp");
        fs::create_dir(&path)?;
        Ok(TempDir { path, kept: false })
    }

    fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.kept {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>> {
    let f = File::open(path).map_err(|e| io_error(path, e))?;
    let mut bytes = Vec::new();
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, e))?;
    if bytes.len() as u64 > limit {
        return Err(export_error(path, format!("larger than {limit} bytes")));
    }
    Ok(bytes)
}

fn read_manifest(path: &Path) -> Result<Json> {
    let bytes = read_limited(path, MAX_MANIFEST_BYTES)?;
    serde_json::from_slice(&bytes)
        .map_err(|e| export_error(path, format!("not a readable manifest: {e}")))
}

/// A model exported by [`Model::export`], read back: its inference function runs on any
/// backend without the model's Rust type, with the outputs `Model::predict` gives.
///
/// ```no_run
/// # fn main() -> strata_runtime::Result<()> {
/// # let x = ndarray::Array2::<f32>::zeros((4, 784));
/// let model = strata_runtime::export::Exported::load("exported/mnist")?;
/// let probabilities = model.predict(&x)?;
/// # Ok(()) }
/// ```
pub struct Exported {
    name: String,
    input: Vec<usize>,
    input_dtype: DType,
    output: Vec<usize>,
    output_dtype: DType,
    /// The graph's text with the batch size as `N`.
    ir: String,
    weights: Vec<(String, Tensor)>,
    run: Mutex<Run>,
}

/// The backend, the weights on it and the graphs compiled for it, by batch size.
struct Run {
    backend: Arc<dyn Backend>,
    weights: Option<Vec<Buffer>>,
    exes: HashMap<usize, Box<dyn Executable>>,
}

impl std::fmt::Debug for Exported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exported")
            .field("name", &self.name)
            .field("input", &self.input)
            .field("output", &self.output)
            .finish_non_exhaustive()
    }
}

/// Reads a manifest's field, or says which one is missing or wrong.
struct Fields<'a> {
    path: &'a Path,
}

impl Fields<'_> {
    fn err(&self, m: impl Into<String>) -> Error {
        export_error(self.path, m)
    }

    fn get<'j>(&self, j: &'j Json, key: &str) -> Result<&'j Json> {
        j.get(key)
            .ok_or_else(|| self.err(format!("the manifest has no `{key}`")))
    }

    fn str<'j>(&self, j: &'j Json, key: &str) -> Result<&'j str> {
        self.get(j, key)?
            .as_str()
            .ok_or_else(|| self.err(format!("`{key}` is not a string")))
    }

    fn dtype(&self, j: &Json, key: &str) -> Result<DType> {
        let s = self.str(j, key)?;
        DType::ALL
            .into_iter()
            .find(|d| d.to_string() == s)
            .ok_or_else(|| self.err(format!("`{key}` is `{s}`, not an element type")))
    }

    /// A list of sizes; with `batch`, the first entry must be `null` (the batch).
    fn dims(&self, j: &Json, key: &str, batch: bool) -> Result<Vec<usize>> {
        let bad = || {
            self.err(format!(
                "`{key}` is not a list of sizes{}",
                if batch { " after a null batch" } else { "" }
            ))
        };
        let list = self.get(j, key)?.as_array().ok_or_else(bad)?;
        let list = if batch {
            match list.split_first() {
                Some((Json::Null, rest)) => rest,
                _ => return Err(bad()),
            }
        } else {
            list
        };
        list.iter()
            .map(|d| {
                d.as_u64()
                    .and_then(|d| usize::try_from(d).ok())
                    .ok_or_else(bad)
            })
            .collect()
    }

    /// A file name listed under `files`: a plain name inside the directory.
    fn file(&self, dir: &Path, files: &Json, key: &str) -> Result<PathBuf> {
        let name = self.str(files, key)?;
        let plain = !name.is_empty()
            && name != "."
            && name != ".."
            && !name.contains(['/', '\\'])
            && Path::new(name).file_name().is_some();
        if !plain {
            return Err(self.err(format!("file `{name}` is not a plain file name")));
        }
        let path = dir.join(name);
        if !path.is_file() {
            return Err(export_error(
                &path,
                format!("missing (the manifest lists it as `{key}`)"),
            ));
        }
        Ok(path)
    }
}

impl Exported {
    /// Reads the export in `dir`, checked completely (manifest, files, weights, graph),
    /// to run on the native backend.
    pub fn load(dir: impl AsRef<Path>) -> Result<Exported> {
        Exported::load_on(dir, Device::Native)
    }

    /// [`load`](Exported::load), to run on `device`.
    pub fn load_on(dir: impl AsRef<Path>, device: Device) -> Result<Exported> {
        let backend: Arc<dyn Backend> = Arc::from(device.backend()?);
        Exported::read(dir.as_ref(), backend)
    }

    /// The same export, to run on `backend` from now on.
    pub fn with_backend(self, backend: Arc<dyn Backend>) -> Exported {
        let run = Run {
            backend,
            weights: None,
            exes: HashMap::new(),
        };
        Exported {
            run: Mutex::new(run),
            ..self
        }
    }

    /// The same export, to run on `device` from now on.
    pub fn on(self, device: Device) -> Result<Exported> {
        let backend: Arc<dyn Backend> = Arc::from(device.backend()?);
        Ok(self.with_backend(backend))
    }

    fn read(dir: &Path, backend: Arc<dyn Backend>) -> Result<Exported> {
        let manifest_path = dir.join(MANIFEST);
        if !dir.is_dir() {
            return Err(export_error(dir, "not a directory"));
        }
        if !manifest_path.is_file() {
            return Err(export_error(
                &manifest_path,
                "missing: not an export directory",
            ));
        }
        let m = read_manifest(&manifest_path)?;
        let f = Fields {
            path: &manifest_path,
        };
        if f.str(&m, "format")? != FORMAT {
            return Err(f.err(format!("`format` is not `{FORMAT}`")));
        }
        let version = f
            .get(&m, "version")?
            .as_u64()
            .ok_or_else(|| f.err("`version` is not a number"))?;
        if version != VERSION {
            return Err(f.err(format!(
                "version {version}: this Strata reads version {VERSION} (written by Strata {})",
                m.get("strata_version")
                    .and_then(Json::as_str)
                    .unwrap_or("?")
            )));
        }
        let name = f.str(&m, "name")?.to_string();
        let (input_j, output_j) = (f.get(&m, "input")?, f.get(&m, "output")?);
        let input = f.dims(input_j, "shape", true)?;
        let input_dtype = f.dtype(input_j, "dtype")?;
        let output = f.dims(output_j, "shape", true)?;
        let output_dtype = f.dtype(output_j, "dtype")?;
        if f.str(&m, "batch_symbol")? != "N" {
            return Err(f.err("`batch_symbol` is not `N`"));
        }
        let params = f
            .get(&m, "parameters")?
            .as_array()
            .ok_or_else(|| f.err("`parameters` is not a list"))?
            .iter()
            .map(|p| {
                let dims = f.dims(p, "shape", false)?;
                let ty = TensorType::new(f.dtype(p, "dtype")?, dims);
                Ok((f.str(p, "name")?.to_string(), ty))
            })
            .collect::<Result<Vec<_>>>()?;
        let files = f.get(&m, "files")?;
        let ir_path = f.file(dir, files, "ir")?;
        f.file(dir, files, "mlir")?;
        let weights_path = f.file(dir, files, "weights")?;

        // The weights: exactly the manifest's, by name, type and order.
        let bytes = fs::read(&weights_path).map_err(|e| io_error(&weights_path, e))?;
        let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| {
            export_error(
                &weights_path,
                size_mismatch(&bytes)
                    .unwrap_or_else(|| format!("not a readable safetensors file ({e})")),
            )
        })?;
        if st.len() != params.len() {
            return Err(export_error(
                &weights_path,
                format!(
                    "holds {} tensors, the manifest lists {} parameters",
                    st.len(),
                    params.len()
                ),
            ));
        }
        let mut weights = Vec::with_capacity(params.len());
        for (pname, ty) in &params {
            let v = st
                .tensor(pname)
                .map_err(|_| export_error(&weights_path, format!("missing tensor `{pname}`")))?;
            let t = from_view(&weights_path, pname, &v).map_err(|e| match e {
                Error::Checkpoint { message, .. } => export_error(&weights_path, message),
                e => e,
            })?;
            if &t.ty() != ty {
                return Err(export_error(
                    &weights_path,
                    format!("`{pname}` is {} but the manifest says {ty}", t.ty()),
                ));
            }
            weights.push((pname.clone(), t));
        }
        drop(st);
        drop(bytes);

        // The graph, checked at batch size 1 against the manifest.
        let ir = fs::read(&ir_path).map_err(|e| io_error(&ir_path, e))?;
        let ir = String::from_utf8(ir).map_err(|_| export_error(&ir_path, "not UTF-8 text"))?;
        let exported = Exported {
            name,
            input,
            input_dtype,
            output,
            output_dtype,
            ir,
            weights,
            run: Mutex::new(Run {
                backend,
                weights: None,
                exes: HashMap::new(),
            }),
        };
        exported.graph(1).map_err(|e| match e {
            // Where in the text, or which node: typed as they are.
            Error::IrText { .. } | Error::Verify { .. } => e,
            e => export_error(&ir_path, e.to_string()),
        })?;
        Ok(exported)
    }

    /// The graph at batch size `batch`, checked against the manifest: the weights' types
    /// then the input's as parameters, one output of the output's type.
    fn graph(&self, batch: usize) -> Result<Graph> {
        let g = Graph::parse_with_batch(&self.ir, batch)?;
        let with_batch = |dims: &[usize]| {
            let mut d = vec![batch];
            d.extend_from_slice(dims);
            d
        };
        let want: Vec<TensorType> = self
            .weights
            .iter()
            .map(|(_, t)| t.ty())
            .chain(std::iter::once(TensorType::new(
                self.input_dtype,
                with_batch(&self.input),
            )))
            .collect();
        if g.param_types() != want {
            return Err(Error::invalid(
                "exported graph",
                format!(
                    "its parameters are {:?} but the manifest describes {:?}",
                    g.param_types(),
                    want
                ),
            ));
        }
        let out = TensorType::new(self.output_dtype, with_batch(&self.output));
        if g.output_types() != [out.clone()] {
            return Err(Error::invalid(
                "exported graph",
                format!(
                    "its outputs are {:?} but the manifest describes [{out}]",
                    g.output_types()
                ),
            ));
        }
        Ok(g)
    }

    /// The model's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The shape of one input sample (without the batch dimension).
    pub fn input_shape(&self) -> &[usize] {
        &self.input
    }

    /// The element type of the inputs.
    pub fn input_dtype(&self) -> DType {
        self.input_dtype
    }

    /// The shape of one output sample (without the batch dimension).
    pub fn output_shape(&self) -> &[usize] {
        &self.output
    }

    /// The element type of the outputs.
    pub fn output_dtype(&self) -> DType {
        self.output_dtype
    }

    /// The parameters, by name, in the graph's order.
    pub fn weights(&self) -> &[(String, Tensor)] {
        &self.weights
    }

    /// The graph's IR text, its batch size written `N`.
    pub fn ir_text(&self) -> &str {
        &self.ir
    }

    /// The outputs for `x` (`[samples, input...]`), computed in batches of 32 as
    /// `Model::predict` computes them, so they are the same bits.
    pub fn predict(&self, x: impl IntoTensor) -> Result<Tensor> {
        self.predict_batched(x, PREDICT_BATCH)
    }

    /// [`predict`](Exported::predict) with a chosen batch size (`Model::predict_batched`).
    pub fn predict_batched(&self, x: impl IntoTensor, batch_size: usize) -> Result<Tensor> {
        let x = x.into_tensor();
        if batch_size == 0 {
            return Err(Error::invalid("predict", "batch_size must be >= 1, got 0"));
        }
        if x.dims().get(1..) != Some(self.input.as_slice()) {
            return Err(Error::InputShape {
                what: format!("predict (exported model `{}`)", self.name),
                expected: std::iter::once(None)
                    .chain(self.input.iter().map(|&d| Some(d)))
                    .collect(),
                got: x.dims().to_vec(),
            });
        }
        if x.dtype() != self.input_dtype {
            return Err(Error::DType {
                what: format!("predict (exported model `{}`) inputs", self.name),
                expected: self.input_dtype,
                got: x.dtype(),
            });
        }
        let n = x.dims()[0];
        if n == 0 {
            return Err(Error::invalid(
                "predict",
                format!("x must hold at least one sample, got shape {}", x.shape()),
            ));
        }
        // A poisoned lock only means a call panicked; a failed call leaves nothing half
        // made in `Run` (a compiled graph or the weights are stored whole or not at all).
        let mut run = self.run.lock().unwrap_or_else(|e| e.into_inner());
        let run = &mut *run;
        if run.weights.is_none() {
            let uploaded = self
                .weights
                .iter()
                .map(|(_, t)| run.backend.upload(t))
                .collect::<Result<Vec<_>>>()?;
            run.weights = Some(uploaded);
        }
        let mut parts = Vec::new();
        let mut start = 0;
        while start < n {
            let b = batch_size.min(n - start);
            let mut dims = x.dims().to_vec();
            dims[0] = b;
            let mut xb = Tensor::zeros(&TensorType::new(x.dtype(), dims))?;
            let rows: Vec<usize> = (start..start + b).collect();
            gather_rows(&x, &rows, &mut xb)?;
            if !run.exes.contains_key(&b) {
                let exe = run
                    .backend
                    .compile(&self.graph(b)?, &CompileOptions::default())?;
                run.exes.insert(b, exe);
            }
            let exe = run.exes.get_mut(&b).expect("compiled above");
            let args = run.weights.as_mut().expect("uploaded above");
            // A call that panicked mid-way may have left its input behind.
            args.truncate(self.weights.len());
            args.push(run.backend.upload(&xb)?);
            let out = exe.execute(args);
            args.pop();
            let out = out?;
            let first = out.first().ok_or_else(|| {
                Error::invalid("predict", "the exported graph returned no output")
            })?;
            parts.push(run.backend.download(first)?);
            start += b;
        }
        concat_rows(&parts)
    }
}
