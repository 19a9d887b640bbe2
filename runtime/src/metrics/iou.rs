//! Intersection-over-union metrics over a streamed confusion matrix: `IoU`, `MeanIoU`,
//! `BinaryIoU`, `OneHotIoU`, `OneHotMeanIoU`.
//!
//! The state is one `[num_classes, num_classes]` f32 matrix (rows: true class, columns:
//! predicted class) of summed sample weights. Keras keeps it in an integer dtype by default,
//! which truncates fractional sample weights; here weights stay f32, which is Keras with
//! `dtype="float32"`.

use super::{argmax_last, Metric};
use crate::ir::{BinaryOp, Comparison, DType, Graph, UnaryOp, Value};
use crate::loss::Loss;
use crate::{Error, Result, Tensor};

/// Keras' `backend.epsilon()`, added to the IoU denominators.
const EPSILON: f64 = 1e-7;

/// The largest class count whose flattened confusion-matrix index fits an i32.
const MAX_CLASSES: usize = 46_340;

/// How a metric turns predictions into class ids.
#[derive(Clone, Copy, Debug)]
enum PredIds {
    /// Predictions are class ids already (truncated towards zero, as Keras' cast does).
    Sparse,
    /// The argmax along the class axis.
    Dense,
    /// `pred >= threshold` is class 1, anything else class 0.
    Threshold(f32),
}

/// What every IoU metric shares, borrowed from its public form.
struct Core<'a> {
    name: &'a str,
    num_classes: usize,
    /// `None`: every class (the mean IoU).
    target_class_ids: Option<&'a [usize]>,
    ignore_class: Option<i64>,
    sparse_y_true: bool,
    pred: PredIds,
    axis: isize,
}

impl Core<'_> {
    fn validate(&self) -> Result<()> {
        let c = self.num_classes;
        if c == 0 || c > MAX_CLASSES {
            return Err(Error::invalid(
                self.name,
                format!("num_classes must be in [1, {MAX_CLASSES}], got {c}"),
            ));
        }
        if let Some(ids) = self.target_class_ids {
            if ids.is_empty() {
                return Err(Error::invalid(
                    self.name,
                    "target_class_ids must name at least one class, got an empty list",
                ));
            }
            if let Some(bad) = ids.iter().find(|&&i| i >= c) {
                return Err(Error::invalid(
                    self.name,
                    format!("target class id {bad} is out of range [0, {c})"),
                ));
            }
        }
        if let PredIds::Threshold(t) = self.pred {
            if t.is_nan() {
                return Err(Error::invalid(
                    self.name,
                    "threshold must be a number, got NaN",
                ));
            }
        }
        Ok(())
    }

    /// The class axis of a dense tensor of rank `rank`, Python-style negative from the end.
    fn class_axis(&self, rank: usize) -> Result<usize> {
        let r = rank as isize;
        let a = if self.axis < 0 {
            self.axis + r
        } else {
            self.axis
        };
        if rank == 0 || !(0..r).contains(&a) {
            return Err(Error::invalid(
                self.name,
                format!(
                    "axis {} is out of range for a tensor of rank {rank}",
                    self.axis
                ),
            ));
        }
        Ok(a as usize)
    }

    /// Class ids `[elements]` (f32) of a dense tensor: the argmax along the class axis.
    fn argmax_ids(&self, g: &mut Graph, x: Value) -> Result<Value> {
        let ty = g.ty(x).clone();
        let a = self.class_axis(ty.rank())?;
        let last = ty.rank() - 1;
        let x = if a == last {
            x
        } else {
            let mut perm: Vec<usize> = (0..ty.rank()).filter(|&d| d != a).collect();
            perm.push(a);
            g.transpose(x, &perm)?
        };
        let x = g.convert(x, DType::F32)?;
        let ids = argmax_last(g, x)?;
        let n = g.ty(ids).numel();
        g.reshape(ids, [n])
    }

    fn flat_f32(g: &mut Graph, x: Value) -> Result<Value> {
        let n = g.ty(x).numel();
        let x = g.convert(x, DType::F32)?;
        g.reshape(x, [n])
    }

    fn update(
        &self,
        g: &mut Graph,
        state: &[Value],
        y: Value,
        p: Value,
        sw: Value,
    ) -> Result<Vec<Value>> {
        self.validate()?;
        let c = self.num_classes;
        let yid = if self.sparse_y_true {
            Self::flat_f32(g, y)?
        } else {
            self.argmax_ids(g, y)?
        };
        let pid = match self.pred {
            PredIds::Sparse => Self::flat_f32(g, p)?,
            PredIds::Dense => self.argmax_ids(g, p)?,
            PredIds::Threshold(t) => {
                let pf = Self::flat_f32(g, p)?;
                let th = g.full_like(t as f64, pf)?;
                let one = g.compare(Comparison::Ge, pf, th)?;
                g.convert(one, DType::F32)?
            }
        };
        let n = g.ty(yid).numel();
        if g.ty(pid).numel() != n {
            let hint = match self.pred {
                PredIds::Sparse => " (for class scores, set sparse_y_pred to false)",
                _ => "",
            };
            return Err(Error::invalid(
                self.name,
                format!(
                    "targets {} give {n} class ids but predictions {} give {}; they must match one to one{hint}",
                    g.ty(y),
                    g.ty(p),
                    g.ty(pid).numel()
                ),
            ));
        }
        // Each sample's weight, repeated over its elements (pixels, say).
        let batch = g.ty(sw).numel();
        if batch == 0 || !n.is_multiple_of(batch) {
            return Err(Error::invalid(
                self.name,
                format!("{n} class ids do not split evenly over {batch} samples"),
            ));
        }
        let w = g.broadcast_in_dim(sw, [batch, n / batch], &[0])?;
        let w = g.reshape(w, [n])?;
        // Keras leaves out (weight 0) any pair whose label or prediction is not a class,
        // and labels equal to ignore_class.
        let in_range = |g: &mut Graph, v: Value| -> Result<Value> {
            let zero = g.zeros_like(v)?;
            let top = g.full_like(c as f64, v)?;
            let lo = g.compare(Comparison::Ge, v, zero)?;
            let hi = g.compare(Comparison::Lt, v, top)?;
            g.binary(BinaryOp::And, lo, hi)
        };
        let ok_y = in_range(g, yid)?;
        let ok_p = in_range(g, pid)?;
        let mut ok = g.binary(BinaryOp::And, ok_y, ok_p)?;
        if let Some(ic) = self.ignore_class {
            let icv = g.full_like(ic as f64, yid)?;
            let keep = g.compare(Comparison::Ne, yid, icv)?;
            ok = g.binary(BinaryOp::And, ok, keep)?;
        }
        let zero = g.zeros_like(yid)?;
        let yid = g.select(ok, yid, zero)?;
        let pid = g.select(ok, pid, zero)?;
        let w = g.select(ok, w, zero)?;
        // Class ids are truncated to integers (they are >= 0 here, so floor), then each
        // pair adds its weight at `true · C + pred` of the flattened matrix.
        let yi = g.unary(UnaryOp::Floor, yid)?;
        let pi = g.unary(UnaryOp::Floor, pid)?;
        let yi = g.convert(yi, DType::I32)?;
        let pi = g.convert(pi, DType::I32)?;
        let cc = g.full_like(c as f64, yi)?;
        let row = g.mul(yi, cc)?;
        let idx = g.add(row, pi)?;
        let flat = g.reshape(state[0], [c * c])?;
        let flat = g.scatter_add(flat, idx, w, 0, 0)?;
        Ok(vec![g.reshape(flat, [c, c])?])
    }

    fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value> {
        let c = self.num_classes;
        let cm = state[0];
        let predicted = g.sum(cm, &[0])?;
        let actual = g.sum(cm, &[1])?;
        let mut eye = vec![0f32; c * c];
        for i in 0..c {
            eye[i * c + i] = 1.0;
        }
        let eye = g.constant(Tensor::from_vec(&[c, c], eye)?);
        let diag = g.mul(cm, eye)?;
        let tp = g.sum(diag, &[1])?;
        let both = g.add(predicted, actual)?;
        let denom = g.sub(both, tp)?;
        // The target classes (repeats count twice, as in Keras), picked with a 0/1 matrix.
        let all: Vec<usize> = (0..c).collect();
        let ids = self.target_class_ids.unwrap_or(&all);
        let k = ids.len();
        let mut pick = vec![0f32; k * c];
        for (r, &i) in ids.iter().enumerate() {
            pick[r * c + i] = 1.0;
        }
        let pick = g.constant(Tensor::from_vec(&[k, c], pick)?);
        let select = |g: &mut Graph, v: Value| -> Result<Value> {
            let vb = g.broadcast_in_dim(v, [k, c], &[1])?;
            let m = g.mul(vb, pick)?;
            g.sum(m, &[1])
        };
        let tp = select(g, tp)?;
        let denom = select(g, denom)?;
        let tiny = g.full_like(1e-9, denom)?;
        let valid = g.compare(Comparison::Gt, denom, tiny)?;
        let validf = g.convert(valid, DType::F32)?;
        let nvalid = g.sum_all(validf)?;
        let d = g.add_scalar(denom, EPSILON)?;
        let iou = g.div(tp, d)?;
        let zero = g.zeros_like(iou)?;
        let iou = g.select(valid, iou, zero)?;
        let total = g.sum_all(iou)?;
        let nv = g.add_scalar(nvalid, EPSILON)?;
        g.div(total, nv)
    }

    /// Every label must be a class or `ignore_class`: Keras would silently leave others
    /// out, which hides a wrong `num_classes`.
    fn check_values(&self, target: &Tensor) -> Result<()> {
        self.validate()?;
        let c = self.num_classes as f64;
        let ignored = |v: f64| self.ignore_class.is_some_and(|ic| ic as f64 == v);
        let bad = |v: f64| !((0.0..c).contains(&v) || ignored(v));
        let found: Option<(usize, f64)> = if self.sparse_y_true {
            let first = |it: &mut dyn Iterator<Item = f64>| it.enumerate().find(|&(_, v)| bad(v));
            match target {
                Tensor::I32(a) => first(&mut a.iter().map(|&v| v as f64)),
                Tensor::I64(a) => first(&mut a.iter().map(|&v| v as f64)),
                Tensor::F32(a) => first(&mut a.iter().map(|&v| v as f64)),
                Tensor::F64(a) => first(&mut a.iter().copied()),
                t => {
                    return Err(Error::DType {
                        what: format!("{} targets", self.name),
                        expected: DType::I32,
                        got: t.dtype(),
                    })
                }
            }
        } else {
            let a = match target {
                Tensor::F32(a) => a.mapv(|v| v as f64),
                Tensor::F64(a) => a.clone(),
                Tensor::I32(a) => a.mapv(|v| v as f64),
                Tensor::I64(a) => a.mapv(|v| v as f64),
                t => {
                    return Err(Error::DType {
                        what: format!("{} targets", self.name),
                        expected: DType::F32,
                        got: t.dtype(),
                    })
                }
            };
            let axis = self.class_axis(a.ndim())?;
            if a.shape()[axis] as f64 <= c {
                return Ok(());
            }
            a.lanes(ndarray::Axis(axis))
                .into_iter()
                .map(|lane| {
                    lane.iter()
                        .enumerate()
                        .fold((0usize, f64::NEG_INFINITY), |(bi, bv), (i, &v)| {
                            if v > bv {
                                (i, v)
                            } else {
                                (bi, bv)
                            }
                        })
                        .0 as f64
                })
                .enumerate()
                .find(|&(_, v)| bad(v))
        };
        match found {
            Some((i, v)) => Err(Error::invalid(
                self.name,
                format!(
                    "label {v} at position {i} is out of range: num_classes is {}, so labels must be in [0, {}){}",
                    self.num_classes,
                    self.num_classes,
                    match self.ignore_class {
                        Some(ic) => format!(" or equal ignore_class {ic}"),
                        None => String::new(),
                    }
                ),
            )),
            None => Ok(()),
        }
    }
}

/// The IoU of the classes in `target_class_ids` (their mean when several), from integer
/// labels and predictions (or, with `sparse_y_true` / `sparse_y_pred` false, the argmax
/// along `axis`). Keras' `IoU`; log name `io_u`.
#[derive(Clone, Debug)]
pub struct IoU {
    pub num_classes: usize,
    pub target_class_ids: Vec<usize>,
    /// A label left out of the matrix (a "void" class such as -1 or 255).
    pub ignore_class: Option<i64>,
    pub sparse_y_true: bool,
    pub sparse_y_pred: bool,
    /// The class axis of dense targets or predictions, negative from the end.
    pub axis: isize,
}

impl IoU {
    pub fn new(num_classes: usize, target_class_ids: impl Into<Vec<usize>>) -> IoU {
        IoU {
            num_classes,
            target_class_ids: target_class_ids.into(),
            ignore_class: None,
            sparse_y_true: true,
            sparse_y_pred: true,
            axis: -1,
        }
    }
    fn core(&self) -> Core<'_> {
        Core {
            name: "io_u",
            num_classes: self.num_classes,
            target_class_ids: Some(&self.target_class_ids),
            ignore_class: self.ignore_class,
            sparse_y_true: self.sparse_y_true,
            pred: sparse_or_dense(self.sparse_y_pred),
            axis: self.axis,
        }
    }
}

/// The mean IoU over every class. Keras' `MeanIoU`; log name `mean_io_u`.
#[derive(Clone, Debug)]
pub struct MeanIoU {
    pub num_classes: usize,
    pub ignore_class: Option<i64>,
    pub sparse_y_true: bool,
    pub sparse_y_pred: bool,
    pub axis: isize,
}

impl MeanIoU {
    pub fn new(num_classes: usize) -> MeanIoU {
        MeanIoU {
            num_classes,
            ignore_class: None,
            sparse_y_true: true,
            sparse_y_pred: true,
            axis: -1,
        }
    }
    fn core(&self) -> Core<'_> {
        Core {
            name: "mean_io_u",
            num_classes: self.num_classes,
            target_class_ids: None,
            ignore_class: self.ignore_class,
            sparse_y_true: self.sparse_y_true,
            pred: sparse_or_dense(self.sparse_y_pred),
            axis: self.axis,
        }
    }
}

/// The IoU of classes 0 and/or 1 with predictions `>= threshold` counted as class 1.
/// Keras' `BinaryIoU` (default: both classes, threshold 0.5); log name `binary_io_u`.
#[derive(Clone, Debug)]
pub struct BinaryIoU {
    pub target_class_ids: Vec<usize>,
    pub threshold: f32,
}

impl Default for BinaryIoU {
    fn default() -> Self {
        BinaryIoU {
            target_class_ids: vec![0, 1],
            threshold: 0.5,
        }
    }
}

impl BinaryIoU {
    fn core(&self) -> Core<'_> {
        Core {
            name: "binary_io_u",
            num_classes: 2,
            target_class_ids: Some(&self.target_class_ids),
            ignore_class: None,
            sparse_y_true: true,
            pred: PredIds::Threshold(self.threshold),
            axis: -1,
        }
    }
}

/// [`IoU`] with one-hot targets (their argmax along `axis` is the label). Keras'
/// `OneHotIoU`; log name `one_hot_io_u`.
#[derive(Clone, Debug)]
pub struct OneHotIoU {
    pub num_classes: usize,
    pub target_class_ids: Vec<usize>,
    pub ignore_class: Option<i64>,
    pub sparse_y_pred: bool,
    pub axis: isize,
}

impl OneHotIoU {
    pub fn new(num_classes: usize, target_class_ids: impl Into<Vec<usize>>) -> OneHotIoU {
        OneHotIoU {
            num_classes,
            target_class_ids: target_class_ids.into(),
            ignore_class: None,
            sparse_y_pred: false,
            axis: -1,
        }
    }
    fn core(&self) -> Core<'_> {
        Core {
            name: "one_hot_io_u",
            num_classes: self.num_classes,
            target_class_ids: Some(&self.target_class_ids),
            ignore_class: self.ignore_class,
            sparse_y_true: false,
            pred: sparse_or_dense(self.sparse_y_pred),
            axis: self.axis,
        }
    }
}

/// [`MeanIoU`] with one-hot targets. Keras' `OneHotMeanIoU`; log name `one_hot_mean_io_u`.
#[derive(Clone, Debug)]
pub struct OneHotMeanIoU {
    pub num_classes: usize,
    pub ignore_class: Option<i64>,
    pub sparse_y_pred: bool,
    pub axis: isize,
}

impl OneHotMeanIoU {
    pub fn new(num_classes: usize) -> OneHotMeanIoU {
        OneHotMeanIoU {
            num_classes,
            ignore_class: None,
            sparse_y_pred: false,
            axis: -1,
        }
    }
    fn core(&self) -> Core<'_> {
        Core {
            name: "one_hot_mean_io_u",
            num_classes: self.num_classes,
            target_class_ids: None,
            ignore_class: self.ignore_class,
            sparse_y_true: false,
            pred: sparse_or_dense(self.sparse_y_pred),
            axis: self.axis,
        }
    }
}

fn sparse_or_dense(sparse: bool) -> PredIds {
    if sparse {
        PredIds::Sparse
    } else {
        PredIds::Dense
    }
}

macro_rules! iou_metric {
    ($($ty:ident),+) => {$(
        impl Metric for $ty {
            fn name(&self) -> String {
                self.core().name.into()
            }
            fn state(&self) -> Vec<Vec<usize>> {
                // Arguments that fail validation get an empty matrix, so the layout is
                // never sized from them; the first call reports them.
                let core = self.core();
                let c = if core.validate().is_ok() { core.num_classes } else { 0 };
                vec![vec![c, c]]
            }
            fn update(
                &self,
                g: &mut Graph,
                state: &[Value],
                y: Value,
                p: Value,
                sw: Value,
            ) -> Result<Vec<Value>> {
                self.core().update(g, state, y, p, sw)
            }
            fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value> {
                self.core().result(g, state)
            }
            fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric> {
                self
            }
            fn clone_box(&self) -> Box<dyn Metric> {
                Box::new(self.clone())
            }
            fn check_values(&self, target: &Tensor, _pred_dims: &[usize]) -> Result<()> {
                self.core().check_values(target)
            }
        }
    )+};
}

iou_metric!(IoU, MeanIoU, BinaryIoU, OneHotIoU, OneHotMeanIoU);
