//! Checkpoints: weights, optimizer state and training progress in one safetensors file,
//! written atomically (a temporary file in the same directory, synced, then renamed over
//! the target), so a crash never leaves a half-written checkpoint behind.

use crate::ir::DType;
use crate::nn::Architecture;
use crate::Model;
use crate::{Error, Result, Tensor};
use safetensors::tensor::{Dtype, View};
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

mod checkpointing;
mod directory;
mod foreign;
mod learning_rate;

pub use foreign::{Layout, LoadReport, Mapping, WeightMap};

const FORMAT: &str = "strata.checkpoint";
const VERSION: &str = "1";

/// What a checkpoint recorded besides the tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointInfo {
    /// Epochs completed when it was written: pass it as `Fit::initial_epoch` to resume.
    pub epoch: usize,
    /// Optimizer steps taken.
    pub iterations: u64,
    /// Whether optimizer state was stored (and restored).
    pub has_optimizer: bool,
    /// The constant learning rate restored (one a callback set included); `None` when the
    /// checkpoint or the compiled optimizer follows a schedule, which the restored
    /// `iterations` then place.
    pub learning_rate: Option<f32>,
}

pub(crate) struct Bytes {
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl View for &Bytes {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.data)
    }
    fn data_len(&self) -> usize {
        self.data.len()
    }
}

pub(crate) fn to_bytes(t: &Tensor) -> Result<Bytes> {
    let (dtype, data) = match t {
        Tensor::F32(a) => (Dtype::F32, a.iter().flat_map(|v| v.to_le_bytes()).collect()),
        Tensor::I32(a) => (Dtype::I32, a.iter().flat_map(|v| v.to_le_bytes()).collect()),
        t => {
            return Err(Error::DType {
                what: "checkpoint tensor".into(),
                expected: DType::F32,
                got: t.dtype(),
            });
        }
    };
    Ok(Bytes {
        dtype,
        shape: t.dims().to_vec(),
        data,
    })
}

pub(crate) fn from_view(
    path: &Path,
    name: &str,
    v: &safetensors::tensor::TensorView<'_>,
) -> Result<Tensor> {
    let bad = |m: String| Error::Checkpoint {
        path: path.display().to_string(),
        message: format!("`{name}`: {m}"),
    };
    let d = v.data();
    match v.dtype() {
        Dtype::F32 => Tensor::from_vec(
            v.shape(),
            d.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect::<Vec<_>>(),
        ),
        Dtype::I32 => Tensor::from_vec(
            v.shape(),
            d.chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect::<Vec<_>>(),
        ),
        other => Err(bad(format!("unsupported element type {other:?}"))),
    }
    .map_err(|e| match e {
        Error::Checkpoint { .. } => e,
        // A shape that safetensors accepted but no array can have.
        e => bad(e.to_string()),
    })
}

/// What a checkpoint file holds, checked as far as the bytes alone allow: a whole
/// safetensors file carrying Strata's format tags. The model decides the rest.
pub(crate) struct Contents<'a> {
    pub tensors: safetensors::SafeTensors<'a>,
    /// The metadata strings Strata wrote.
    pub info: HashMap<String, String>,
    pub epoch: usize,
}

/// Reads the bytes of a checkpoint file; `path` only names it in errors.
pub(crate) fn parse<'a>(path: &Path, bytes: &'a [u8]) -> Result<Contents<'a>> {
    let err = |m: String| Error::Checkpoint {
        path: path.display().to_string(),
        message: m,
    };
    let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| {
        err(size_mismatch(bytes)
            .unwrap_or_else(|| format!("not a readable safetensors file ({e})")))
    })?;
    let (_, meta) = safetensors::SafeTensors::read_metadata(bytes)
        .map_err(|e| err(format!("not a readable safetensors file ({e})")))?;
    let info = meta.metadata().clone().unwrap_or_default();
    if info.get("format").map(String::as_str) != Some(FORMAT) {
        return Err(err("not a Strata checkpoint (missing format tag)".into()));
    }
    if info.get("version").map(String::as_str) != Some(VERSION) {
        return Err(err(format!(
            "unsupported checkpoint version {:?}",
            info.get("version")
        )));
    }
    let epoch: usize = info
        .get("epoch")
        .and_then(|e| e.parse().ok())
        .ok_or_else(|| err("bad epoch".into()))?;
    Ok(Contents {
        tensors: st,
        info,
        epoch,
    })
}

/// Why a file is not the size its own header gives, when that is why safetensors refused
/// it: its messages for a cut-off file ("incomplete metadata") do not say so.
pub(crate) fn size_mismatch(bytes: &[u8]) -> Option<String> {
    const LEN: usize = std::mem::size_of::<u64>();
    let Some((n, rest)) = bytes.split_first_chunk::<LEN>() else {
        return Some(format!(
            "truncated: a safetensors file starts with an {LEN}-byte header length, the file has {} bytes",
            bytes.len()
        ));
    };
    let n = usize::try_from(u64::from_le_bytes(*n)).ok()?;
    let Some(header) = rest.get(..n) else {
        return Some(format!(
            "truncated: its header needs {} bytes, the file has {}",
            LEN.checked_add(n)?,
            bytes.len()
        ));
    };
    let meta: safetensors::tensor::Metadata = serde_json::from_slice(header).ok()?;
    let need = meta.data_len().checked_add(LEN + n)?;
    match bytes.len().cmp(&need) {
        std::cmp::Ordering::Less => Some(format!(
            "truncated: its header describes {need} bytes, the file has {}",
            bytes.len()
        )),
        std::cmp::Ordering::Greater => Some(format!(
            "its header describes {need} bytes, the file has {} (trailing data)",
            bytes.len()
        )),
        std::cmp::Ordering::Equal => None,
    }
}

impl<A: Architecture> Model<A> {
    /// Writes the weights, and when compiled the optimizer state, iteration count and
    /// random key, with `epoch` as the completed epoch count.
    pub fn save_checkpoint_at(&mut self, path: impl AsRef<Path>, epoch: usize) -> Result<()> {
        let path = path.as_ref();
        directory::refuse("save_checkpoint", path)?;
        self.sync_weights()?;
        let built = self
            .built
            .as_ref()
            .ok_or_else(|| Error::invalid("save_checkpoint", "the model is not built yet"))?;
        let mut tensors: Vec<(String, Bytes)> = Vec::new();
        for (p, w) in built.params.iter().zip(&self.weights) {
            tensors.push((format!("model/{}", p.name), to_bytes(w)?));
        }
        let mut meta = HashMap::new();
        meta.insert("format".to_string(), FORMAT.to_string());
        meta.insert("version".to_string(), VERSION.to_string());
        meta.insert("epoch".to_string(), epoch.to_string());
        meta.insert("model".to_string(), self.name().to_string());
        if let Some(t) = &self.train {
            if let Some(r) = &t.runner {
                let layout = r.layout();
                meta.insert("optimizer".to_string(), t.optimizer.name().to_string());
                learning_rate::record(&mut meta, &t.optimizer.config().learning_rate);
                let slots = crate::optim::state_slots(t.optimizer.as_ref());
                for (j, &pi) in layout.trainable.iter().enumerate() {
                    for (s, slot) in layout.slots_of(j).zip(&slots) {
                        let v = r.state(s)?;
                        tensors.push((
                            format!("optimizer/{}/{}", slot.name, built.params[pi].name),
                            to_bytes(&v)?,
                        ));
                    }
                }
                for (i, (g, _)) in layout.globals.clone().zip(t.optimizer.globals()) {
                    tensors.push((format!("optimizer/global/{g}"), to_bytes(&r.state(i)?)?));
                }
                tensors.push((
                    "state/iterations".into(),
                    to_bytes(&r.state(layout.iterations)?)?,
                ));
                tensors.push(("state/rng_key".into(), to_bytes(&r.state(layout.key)?)?));
            }
        }
        let bytes =
            safetensors::serialize(tensors.iter().map(|(n, b)| (n.as_str(), b)), Some(meta))
                .map_err(|e| Error::Checkpoint {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })?;
        crate::atomic_file::write_atomic(path, |f| f.write_all(&bytes)).map_err(|e| Error::Io {
            path: path.display().to_string(),
            source: e,
        })
    }

    /// Writes a checkpoint with epoch 0 (weights and, when compiled, optimizer state).
    pub fn save_checkpoint(&mut self, path: impl AsRef<Path>) -> Result<()> {
        self.save_checkpoint_at(path, 0)
    }

    /// Restores a checkpoint: every weight must be present with its exact shape; optimizer
    /// state is restored when present and the model is compiled with the same optimizer.
    /// Nothing changes if any check fails.
    pub fn load_checkpoint(&mut self, path: impl AsRef<Path>) -> Result<CheckpointInfo> {
        let path = path.as_ref();
        directory::refuse("load_checkpoint", path)?;
        let err = |m: String| Error::Checkpoint {
            path: path.display().to_string(),
            message: m,
        };
        let bytes = std::fs::read(path).map_err(|e| Error::Io {
            path: path.display().to_string(),
            source: e,
        })?;
        let Contents {
            tensors: st,
            info,
            epoch,
        } = parse(path, &bytes)?;
        let has_optimizer = info.contains_key("optimizer");
        if has_optimizer {
            self.ensure_device_if_compiled()?;
        }
        let built = self
            .built
            .as_ref()
            .ok_or_else(|| Error::invalid("load_checkpoint", "the model is not built yet"))?;
        let get = |name: &str, ty: &crate::ir::TensorType| -> Result<Tensor> {
            let v = st
                .tensor(name)
                .map_err(|_| err(format!("missing tensor `{name}`")))?;
            let t = from_view(path, name, &v)?;
            if &t.ty() != ty {
                return Err(err(format!(
                    "`{name}` is {} but the model needs {ty}",
                    t.ty()
                )));
            }
            Ok(t)
        };
        let weights: Vec<Tensor> = built
            .params
            .iter()
            .map(|p| get(&format!("model/{}", p.name), &p.ty()))
            .collect::<Result<_>>()?;
        let expected_model = built.params.len();
        let n_model = st
            .names()
            .iter()
            .filter(|n| n.starts_with("model/"))
            .count();
        if n_model != expected_model {
            return Err(err(format!(
                "holds {n_model} model tensors, the model has {expected_model} parameters"
            )));
        }
        // Optimizer state, checked completely before anything is changed.
        let mut restore: Vec<(usize, Tensor)> = Vec::new();
        let mut iterations = 0u64;
        let mut lr = None;
        if has_optimizer {
            if let Some(t) = &self.train {
                let layout = t
                    .runner
                    .as_ref()
                    .ok_or_else(|| err("internal: no device state".into()))?
                    .layout();
                if info.get("optimizer").map(String::as_str) != Some(t.optimizer.name()) {
                    return Err(err(format!(
                        "was written by optimizer {:?} but the model is compiled with {}",
                        info.get("optimizer"),
                        t.optimizer.name()
                    )));
                }
                let slots = crate::optim::state_slots(t.optimizer.as_ref());
                for (j, &pi) in layout.trainable.iter().enumerate() {
                    for (s, slot) in layout.slots_of(j).zip(&slots) {
                        restore.push((
                            s,
                            get(
                                &format!("optimizer/{}/{}", slot.name, built.params[pi].name),
                                &layout.types[s],
                            )?,
                        ));
                    }
                }
                for (i, (g, _)) in layout.globals.clone().zip(t.optimizer.globals()) {
                    restore.push((i, get(&format!("optimizer/global/{g}"), &layout.types[i])?));
                }
                let it = get("state/iterations", &layout.types[layout.iterations])?;
                iterations = it.scalar_f64()? as u64;
                restore.push((layout.iterations, it));
                restore.push((layout.key, get("state/rng_key", &layout.types[layout.key])?));
                lr = learning_rate::recorded(&info).map_err(err)?;
            }
        }
        // Everything checked: apply.
        self.weights = weights.into();
        let restored_optimizer = !restore.is_empty();
        if let Some(r) = self.train.as_mut().and_then(|t| t.runner.as_mut()) {
            r.upload_weights(&self.weights)?;
            for (i, v) in &restore {
                r.set_state(*i, v)?;
            }
            if restored_optimizer {
                r.set_iterations(iterations);
            }
        }
        let learning_rate = match (&mut self.train, lr) {
            (Some(t), Some(lr)) if restored_optimizer => learning_rate::restore(t, lr),
            _ => None,
        };
        Ok(CheckpointInfo {
            epoch,
            iterations,
            has_optimizer: restored_optimizer,
            learning_rate,
        })
    }

    fn ensure_device_if_compiled(&mut self) -> Result<()> {
        if self.train.is_some() {
            self.ensure_device()?;
        }
        Ok(())
    }
}
