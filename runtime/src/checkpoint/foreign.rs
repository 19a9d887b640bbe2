//! Weights from a safetensors file another framework wrote (PyTorch, JAX/flax, Keras),
//! through a map from its tensor names to the model's parameters, with the axis order
//! each tensor needs.
//!
//! The model's layouts are Keras': a `Dense` kernel is `[in, out]`, a `Conv2D` kernel
//! `[kh, kw, in / groups, filters]`; biases, normalisation parameters and statistics are
//! vectors, an `Embedding` table is `[vocabulary, dim]`. PyTorch stores `nn.Linear.weight`
//! as `[out, in]` ([`Layout::TorchLinear`]) and `nn.Conv2d.weight` as
//! `[out, in / groups, kh, kw]` ([`Layout::TorchConv2d`]); its biases, `nn.Embedding`,
//! `nn.LayerNorm` and `nn.BatchNorm2d` tensors are already in our order. flax's `Dense`
//! kernel is `[in, out]` and its `Conv` kernel `[kh, kw, in, out]`, as ours.

use super::{directory, size_mismatch};
use crate::ir::{DType, TensorType};
use crate::nn::Architecture;
use crate::Model;
use crate::{Error, Result, Tensor};
use ndarray::{ArrayD, IxDyn};
use safetensors::tensor::{Dtype, TensorView};
use safetensors::SafeTensors;
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

/// How a tensor of the file is laid out relative to the parameter it loads into.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// The same axis order as the parameter: biases, Keras and flax kernels, PyTorch
    /// `nn.Embedding`, `nn.LayerNorm` and `nn.BatchNorm*` tensors.
    Same,
    /// PyTorch `nn.Linear.weight`, `[out, in]`, into a `Dense` kernel `[in, out]`: a
    /// transpose (`Permute(vec![1, 0])`).
    TorchLinear,
    /// PyTorch `nn.Conv2d.weight`, `[out, in / groups, kh, kw]`, into a `Conv2D` kernel
    /// `[kh, kw, in / groups, out]` (`Permute(vec![2, 3, 1, 0])`).
    TorchConv2d,
    /// Any axis order: axis `i` of the parameter is axis `axes[i]` of the file's tensor,
    /// as `numpy.transpose(theirs, axes)` and `torch.permute(theirs, axes)` count.
    Permute(Vec<usize>),
}

impl Layout {
    /// The axes as [`Layout::Permute`] gives them, for a tensor of `rank` axes; `None`
    /// when the layout does not apply to that rank or is not a permutation.
    fn axes(&self, rank: usize) -> Option<Vec<usize>> {
        let axes = match self {
            Layout::Same => (0..rank).collect(),
            Layout::TorchLinear => vec![1, 0],
            Layout::TorchConv2d => vec![2, 3, 1, 0],
            Layout::Permute(a) => a.clone(),
        };
        let mut seen = vec![false; rank];
        let permutation = axes.len() == rank
            && axes
                .iter()
                .all(|&a| a < rank && !std::mem::replace(&mut seen[a], true));
        permutation.then_some(axes)
    }
}

/// Where a tensor of the file goes: the parameter (its name as
/// [`Model::weights`] gives it, e.g. `dense/kernel`) and the layout to undo.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Mapping {
    /// The model's parameter, e.g. `dense/kernel`.
    pub param: String,
    /// How the file's tensor is laid out relative to it.
    pub layout: Layout,
}

impl Mapping {
    /// Into `param` as it is (`Layout::Same`).
    pub fn same(param: impl Into<String>) -> Mapping {
        Mapping::new(param, Layout::Same)
    }

    /// A PyTorch `nn.Linear.weight` into the `Dense` kernel `param`:
    /// `Mapping::torch_linear("dense/kernel")`.
    pub fn torch_linear(param: impl Into<String>) -> Mapping {
        Mapping::new(param, Layout::TorchLinear)
    }

    /// A PyTorch `nn.Conv2d.weight` into the `Conv2D` kernel `param`.
    pub fn torch_conv2d(param: impl Into<String>) -> Mapping {
        Mapping::new(param, Layout::TorchConv2d)
    }

    /// Into `param` with its axes permuted (see [`Layout::Permute`]).
    pub fn permute(param: impl Into<String>, axes: &[usize]) -> Mapping {
        Mapping::new(param, Layout::Permute(axes.to_vec()))
    }

    /// Into `param` from a tensor laid out as `layout`.
    pub fn new(param: impl Into<String>, layout: Layout) -> Mapping {
        Mapping {
            param: param.into(),
            layout,
        }
    }
}

impl From<&str> for Mapping {
    fn from(param: &str) -> Mapping {
        Mapping::same(param)
    }
}

impl From<String> for Mapping {
    fn from(param: String) -> Mapping {
        Mapping::same(param)
    }
}

/// A map from the file's tensor names to [`Mapping`]s: a closure
/// `|theirs: &str| -> Option<Mapping>` (`None` leaves the tensor out), or a table of
/// `(theirs, ours)` pairs — a slice, array, `Vec` or `HashMap` of `(&str, &str)` (same
/// layout) or of `(&str, Mapping)` — every entry of which the file must hold.
///
/// ```ignore
/// model.load_safetensors("mlp.safetensors", &[("fc1.weight", Mapping::torch_linear("dense/kernel")), /* … */])?;
/// ```
pub trait WeightMap {
    /// Where the file's tensor `theirs` goes; `None` leaves it out.
    fn map(&self, theirs: &str) -> Option<Mapping>;

    /// The names the map expects the file to hold (a table's keys); a file lacking one
    /// is an error, which catches a misspelt name. Empty for a closure.
    fn expected(&self) -> Vec<String> {
        Vec::new()
    }
}

impl<F: Fn(&str) -> Option<Mapping>> WeightMap for F {
    fn map(&self, theirs: &str) -> Option<Mapping> {
        self(theirs)
    }
}

fn table_map<'a, K, V>(mut table: impl Iterator<Item = &'a (K, V)>, theirs: &str) -> Option<Mapping>
where
    K: AsRef<str> + 'a,
    V: Clone + Into<Mapping> + 'a,
{
    table
        .find(|(k, _)| k.as_ref() == theirs)
        .map(|(_, v)| v.clone().into())
}

impl<K: AsRef<str>, V: Clone + Into<Mapping>> WeightMap for &[(K, V)] {
    fn map(&self, theirs: &str) -> Option<Mapping> {
        table_map(self.iter(), theirs)
    }
    fn expected(&self) -> Vec<String> {
        self.iter().map(|(k, _)| k.as_ref().to_string()).collect()
    }
}

impl<K: AsRef<str>, V: Clone + Into<Mapping>, const N: usize> WeightMap for &[(K, V); N] {
    fn map(&self, theirs: &str) -> Option<Mapping> {
        self.as_slice().map(theirs)
    }
    fn expected(&self) -> Vec<String> {
        self.as_slice().expected()
    }
}

impl<K: AsRef<str>, V: Clone + Into<Mapping>> WeightMap for &Vec<(K, V)> {
    fn map(&self, theirs: &str) -> Option<Mapping> {
        self.as_slice().map(theirs)
    }
    fn expected(&self) -> Vec<String> {
        self.as_slice().expected()
    }
}

impl<K, V, S> WeightMap for &HashMap<K, V, S>
where
    K: std::borrow::Borrow<str> + std::hash::Hash + Eq,
    V: Clone + Into<Mapping>,
    S: std::hash::BuildHasher,
{
    fn map(&self, theirs: &str) -> Option<Mapping> {
        self.get(theirs).map(|v| v.clone().into())
    }
    fn expected(&self) -> Vec<String> {
        let mut k: Vec<String> = self.keys().map(|k| k.borrow().to_string()).collect();
        k.sort();
        k
    }
}

/// What a [`Model::load_safetensors`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// `(theirs, ours)` for every tensor loaded, in the file's name order.
    pub loaded: Vec<(String, String)>,
    /// The file's tensors the map left out.
    pub unused: Vec<String>,
    /// The model's parameters no tensor loaded into, which kept their values (only
    /// [`Model::load_safetensors_partial`] leaves any).
    pub unset: Vec<String>,
    /// The file's tensors converted to f32 from f16, bf16 or f64 (f64 rounds).
    pub converted: Vec<String>,
}

/// One tensor of the file, checked against its parameter, not yet read.
struct Planned<'a> {
    theirs: &'a str,
    view: TensorView<'a>,
    param: usize,
    axes: Vec<usize>,
}

impl<A: Architecture> Model<A> {
    /// Loads the weights from a safetensors file another framework wrote, through `map`
    /// (see [`WeightMap`]); every parameter must be loaded. Element types f32, f16, bf16
    /// and f64 load (converted to f32). Nothing changes on an error; a compiled model's
    /// device copy is updated.
    ///
    /// ```ignore
    /// model.load_safetensors(path, |n: &str| (n == "fc1.weight").then(|| Mapping::torch_linear("dense/kernel")))?;
    /// ```
    pub fn load_safetensors(
        &mut self,
        path: impl AsRef<Path>,
        map: impl WeightMap,
    ) -> Result<LoadReport> {
        self.load_foreign("load_safetensors", path.as_ref(), &map, false)
    }

    /// As [`load_safetensors`](Model::load_safetensors), but parameters no tensor maps
    /// to keep their values (listed in [`LoadReport::unset`]).
    pub fn load_safetensors_partial(
        &mut self,
        path: impl AsRef<Path>,
        map: impl WeightMap,
    ) -> Result<LoadReport> {
        self.load_foreign("load_safetensors_partial", path.as_ref(), &map, true)
    }

    fn load_foreign(
        &mut self,
        what: &str,
        path: &Path,
        map: &dyn WeightMap,
        partial: bool,
    ) -> Result<LoadReport> {
        directory::refuse(what, path)?;
        let bytes = std::fs::read(path).map_err(|e| Error::Io {
            path: path.display().to_string(),
            source: e,
        })?;
        let file = |m: String| Error::Checkpoint {
            path: path.display().to_string(),
            message: m,
        };
        // The crate checks every offset and size against the file before anything is
        // allocated from what the header claims.
        let st = SafeTensors::deserialize(&bytes).map_err(|e| {
            file(
                size_mismatch(&bytes)
                    .unwrap_or_else(|| format!("not a readable safetensors file ({e})")),
            )
        })?;
        let params = self
            .built
            .as_ref()
            .map(|b| b.params.as_slice())
            .ok_or_else(|| Error::invalid(what, "the model is not built yet (no input shape)"))?;
        let what = format!("{what} {}", path.display());

        let mut names = st.names();
        names.sort_unstable();
        let absent: Vec<String> = map
            .expected()
            .into_iter()
            .filter(|n| st.tensor(n).is_err())
            .collect();
        if !absent.is_empty() {
            return Err(file(format!(
                "the map names tensors the file does not hold: {} (it holds: {})",
                quoted(&absent),
                quoted(&names)
            )));
        }

        let mut report = LoadReport::default();
        let mut unknown = Vec::new();
        let mut target: Vec<Option<&str>> = vec![None; params.len()];
        let mut planned = Vec::new();
        for &theirs in &names {
            let Some(m) = map.map(theirs) else {
                report.unused.push(theirs.to_string());
                continue;
            };
            let Some(i) = params.iter().position(|p| p.name == m.param) else {
                unknown.push(m.param);
                continue;
            };
            if let Some(first) = target[i].replace(theirs) {
                return Err(Error::invalid(
                    &what,
                    format!(
                        "`{first}` and `{theirs}` both map to parameter `{}`",
                        params[i].name
                    ),
                ));
            }
            let view = st
                .tensor(theirs)
                .map_err(|e| file(format!("`{theirs}`: {e}")))?;
            let dims = view.shape();
            let axes = m.layout.axes(dims.len()).ok_or_else(|| {
                Error::invalid(
                    &what,
                    format!(
                        "`{theirs}` {dims:?} into `{}`: {:?} does not permute the axes of a rank-{} tensor",
                        params[i].name,
                        m.layout,
                        dims.len()
                    ),
                )
            })?;
            let permuted: Vec<usize> = axes.iter().map(|&a| dims[a]).collect();
            if permuted != params[i].dims {
                return Err(Error::WeightType {
                    what: format!("{what}: `{theirs}` {dims:?} with layout {:?}", m.layout),
                    name: params[i].name.clone(),
                    expected: params[i].ty(),
                    got: TensorType::new(DType::F32, permuted),
                });
            }
            if !matches!(
                view.dtype(),
                Dtype::F32 | Dtype::F16 | Dtype::BF16 | Dtype::F64
            ) {
                return Err(file(format!(
                    "`{theirs}` holds {:?} elements; parameter `{}` is f32, which loads from F32, F16, BF16 or F64",
                    view.dtype(),
                    params[i].name
                )));
            }
            report
                .loaded
                .push((theirs.to_string(), params[i].name.clone()));
            planned.push(Planned {
                theirs,
                view,
                param: i,
                axes,
            });
        }
        report.unset = params
            .iter()
            .zip(&target)
            .filter(|(_, t)| t.is_none())
            .map(|(p, _)| p.name.clone())
            .collect();
        if !unknown.is_empty() || (!partial && !report.unset.is_empty()) {
            return Err(Error::WeightNames {
                what,
                unknown,
                missing: if partial { Vec::new() } else { report.unset },
                known: params.iter().map(|p| p.name.clone()).collect(),
            });
        }

        // Every name, shape and element type checked: read the data.
        let mut updates = Vec::with_capacity(planned.len());
        for p in planned {
            if p.view.dtype() != Dtype::F32 {
                report.converted.push(p.theirs.to_string());
            }
            let a = to_f32(&p.view)
                .map_err(|m| file(format!("`{}`: {m}", p.theirs)))?
                .permuted_axes(IxDyn(&p.axes))
                .as_standard_layout()
                .into_owned();
            updates.push((p.param, Cow::Owned(Tensor::F32(a))));
        }
        self.assign_weights(&what, updates)?;
        Ok(report)
    }
}

/// The tensor's elements as f32, of its own shape, for the element types
/// [`Model::load_safetensors`] accepts (safetensors checked the data's length).
fn to_f32(v: &TensorView<'_>) -> std::result::Result<ArrayD<f32>, String> {
    let d = v.data();
    let values: Vec<f32> = match v.dtype() {
        Dtype::F32 => d
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        Dtype::F16 => d
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        Dtype::BF16 => d
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        Dtype::F64 => d
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as f32)
            .collect(),
        other => {
            return Err(format!(
                "internal: {other:?} elements reached the conversion"
            ))
        }
    };
    ArrayD::from_shape_vec(IxDyn(v.shape()), values).map_err(|e| e.to_string())
}

fn quoted<S: AsRef<str>>(names: &[S]) -> String {
    names
        .iter()
        .map(|n| format!("`{}`", n.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}
