//! Input data: conversions from `ndarray`, the [`Dataset`] pipeline (shuffle, batch, map,
//! prefetch on a background thread; without one, the next batch's rows fetched into cache
//! by the native crew's idle worker, see [`Lookahead`]) and readers for IDX and `.npy`
//! files.

mod group;
mod idx;
mod lookahead;
mod many;
mod mnist;
mod npy;

pub use group::Groups;
pub(crate) use idx::from_file_bytes as idx_from_file_bytes;
pub use idx::read_idx;
pub use lookahead::Lookahead;
pub use many::{Data, IntoData};
pub use mnist::{load_mnist, Mnist, FASHION_MNIST_DIR};
pub(crate) use npy::from_file_bytes as npy_from_file_bytes;
pub use npy::read_npy;

pub use crate::kernel::rows::gather_rows;

use crate::ir::TensorType;
use crate::random::Rng;
use crate::{Element, Error, Result, Tensor};
use std::sync::mpsc;
use std::sync::Arc;

/// Anything `fit`, `evaluate` and `predict` accept as data: `ndarray` arrays (owned or
/// borrowed) and tensors.
pub trait IntoTensor {
    fn into_tensor(self) -> Tensor;
}

impl IntoTensor for Tensor {
    fn into_tensor(self) -> Tensor {
        self
    }
}

impl IntoTensor for &Tensor {
    fn into_tensor(self) -> Tensor {
        self.clone()
    }
}

impl<T: Element, D: ndarray::Dimension> IntoTensor for ndarray::Array<T, D> {
    fn into_tensor(self) -> Tensor {
        T::into_tensor(self.into_dyn())
    }
}

impl<S, T, D> IntoTensor for &ndarray::ArrayBase<S, D>
where
    S: ndarray::Data<Elem = T>,
    T: Element,
    D: ndarray::Dimension,
{
    fn into_tensor(self) -> Tensor {
        T::into_tensor(self.to_owned().into_dyn())
    }
}

/// Checks that `x` and `y` are non-empty and have the same number of samples.
pub(crate) fn check_pair(what: &str, x: &Tensor, y: &Tensor) -> Result<usize> {
    let (nx, ny) = (x.dims().first().copied(), y.dims().first().copied());
    match (nx, ny) {
        (Some(0), _) | (None, _) => Err(Error::invalid(
            what,
            format!("x must hold at least one sample, got shape {}", x.shape()),
        )),
        (Some(a), Some(b)) if a == b => Ok(a),
        _ => Err(Error::invalid(
            what,
            format!(
                "x and y must have the same number of samples, got {} and {}",
                x.shape(),
                y.shape()
            ),
        )),
    }
}

/// Copies every row of `src` into `dst` starting at row `at` (same row shape and type).
pub fn copy_rows_into(src: &Tensor, dst: &mut Tensor, at: usize) -> Result<()> {
    fn rows<T: Clone>(s: &ndarray::ArrayD<T>, d: &mut ndarray::ArrayD<T>, at: usize) -> Result<()> {
        let n = s.shape().first().copied().unwrap_or(0);
        let rows = d.shape().first().copied().unwrap_or(0);
        // Scalars have no rows; `at` comes from the caller and may be anything.
        if s.ndim() == 0
            || s.shape().get(1..) != d.shape().get(1..)
            || at.checked_add(n).is_none_or(|end| end > rows)
        {
            return Err(Error::invalid(
                "copy_rows_into",
                format!(
                    "cannot place {:?} at row {at} of {:?}",
                    s.shape(),
                    d.shape()
                ),
            ));
        }
        d.slice_axis_mut(ndarray::Axis(0), ndarray::Slice::from(at..at + n))
            .assign(s);
        Ok(())
    }
    match (src, dst) {
        (Tensor::F32(s), Tensor::F32(d)) => rows(s, d, at),
        (Tensor::F64(s), Tensor::F64(d)) => rows(s, d, at),
        (Tensor::BF16(s), Tensor::BF16(d)) => rows(s, d, at),
        (Tensor::I32(s), Tensor::I32(d)) => rows(s, d, at),
        (Tensor::I64(s), Tensor::I64(d)) => rows(s, d, at),
        (Tensor::Bool(s), Tensor::Bool(d)) => rows(s, d, at),
        (s, d) => Err(Error::DType {
            what: "copy_rows_into".into(),
            expected: s.dtype(),
            got: d.dtype(),
        }),
    }
}

/// One batch of a [`Dataset`].
#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub x: Tensor,
    pub y: Tensor,
    /// Per-sample loss weights, `[batch]` f32.
    pub sample_weight: Option<Tensor>,
}

type MapFn = Arc<dyn Fn(Batch) -> Result<Batch> + Send + Sync>;

/// A pipeline over in-memory arrays: optional per-epoch shuffle, batching (the last
/// partial batch kept unless dropped), per-batch maps, and prefetching of the next
/// batches on a background thread while the current step runs.
#[derive(Clone)]
pub struct Dataset {
    x: Arc<Tensor>,
    y: Arc<Tensor>,
    sample_weight: Option<Arc<Vec<f32>>>,
    shuffle: Option<u64>,
    batch: usize,
    drop_remainder: bool,
    maps: Vec<MapFn>,
    prefetch: usize,
}

impl Dataset {
    /// A dataset of `(x[i], y[i])` pairs; both must hold the same number of samples.
    pub fn from_arrays(x: impl IntoTensor, y: impl IntoTensor) -> Result<Dataset> {
        let (x, y) = (x.into_tensor(), y.into_tensor());
        check_pair("Dataset::from_arrays", &x, &y)?;
        Ok(Dataset {
            x: Arc::new(x),
            y: Arc::new(y),
            sample_weight: None,
            shuffle: None,
            batch: 32,
            drop_remainder: false,
            maps: Vec::new(),
            prefetch: 0,
        })
    }

    /// Per-sample loss weights (one per sample, finite, >= 0).
    pub fn with_sample_weight(mut self, w: Vec<f32>) -> Result<Dataset> {
        if w.len() != self.len() {
            return Err(Error::invalid(
                "Dataset::with_sample_weight",
                format!("{} weights for {} samples", w.len(), self.len()),
            ));
        }
        if let Some(bad) = w.iter().find(|v| !v.is_finite() || **v < 0.0) {
            return Err(Error::invalid(
                "Dataset::with_sample_weight",
                format!("weights must be finite and >= 0, got {bad}"),
            ));
        }
        self.sample_weight = Some(Arc::new(w));
        Ok(self)
    }

    /// Reshuffles every epoch; epoch `e`'s order depends only on `(seed, e)`.
    pub fn shuffle(mut self, seed: u64) -> Dataset {
        self.shuffle = Some(seed);
        self
    }

    /// Groups samples into batches of `n` (the last one smaller unless dropped).
    pub fn batch(mut self, n: usize) -> Result<Dataset> {
        if n == 0 {
            return Err(Error::invalid(
                "Dataset::batch",
                "batch size must be >= 1, got 0",
            ));
        }
        self.batch = n;
        Ok(self)
    }

    /// Drops the last batch if it is smaller than the batch size.
    pub fn drop_remainder(mut self, on: bool) -> Dataset {
        self.drop_remainder = on;
        self
    }

    /// Applies `f` to every batch (on the prefetch thread, if there is one).
    pub fn map(mut self, f: impl Fn(Batch) -> Result<Batch> + Send + Sync + 'static) -> Dataset {
        self.maps.push(Arc::new(f));
        self
    }

    /// Prepares up to `n` batches ahead on a background thread.
    pub fn prefetch(mut self, n: usize) -> Dataset {
        self.prefetch = n;
        self
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.x.dims()[0]
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn batch_size(&self) -> usize {
        self.batch
    }

    /// Batches per epoch.
    pub fn num_batches(&self) -> usize {
        if self.drop_remainder {
            self.len() / self.batch
        } else {
            self.len().div_ceil(self.batch)
        }
    }

    /// The sample order of epoch `epoch`.
    pub(crate) fn order(&self, epoch: usize) -> Result<Vec<usize>> {
        match self.shuffle {
            Some(seed) => Rng::new(seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
                .permutation(self.len()),
            None => Ok((0..self.len()).collect()),
        }
    }

    fn make_batch(&self, rows: &[usize]) -> Result<Batch> {
        let mut b = Batch::default();
        self.make_batch_into(rows, &mut b)?;
        Ok(b)
    }

    /// Fills `b` with the batch of `rows`, reusing its tensors when their shapes fit (so
    /// a training loop allocates nothing for batches once warm, unless maps do).
    fn make_batch_into(&self, rows: &[usize], b: &mut Batch) -> Result<()> {
        let n = rows.len();
        // Shapes compared in place: building types would allocate every batch.
        let fits = |t: &Tensor, like: &Tensor| {
            t.dtype() == like.dtype()
                && t.dims().first() == Some(&n)
                && t.dims().get(1..) == like.dims().get(1..)
        };
        if !fits(&b.x, &self.x) {
            b.x = Tensor::zeros(&with_first(&self.x.ty(), n))?;
        }
        gather_rows(&self.x, rows, &mut b.x)?;
        if !fits(&b.y, &self.y) {
            b.y = Tensor::zeros(&with_first(&self.y.ty(), n))?;
        }
        gather_rows(&self.y, rows, &mut b.y)?;
        match &self.sample_weight {
            Some(w) => {
                let fits = matches!(&b.sample_weight, Some(Tensor::F32(a)) if a.len() == n && a.ndim() == 1);
                if !fits {
                    let ty = TensorType::new(crate::ir::DType::F32, [n]);
                    b.sample_weight = Some(Tensor::zeros(&ty)?);
                }
                if let Some(Tensor::F32(a)) = &mut b.sample_weight {
                    for (d, &r) in a.iter_mut().zip(rows) {
                        *d = w[r];
                    }
                }
            }
            None => b.sample_weight = None,
        }
        if !self.maps.is_empty() {
            let mut owned = std::mem::take(b);
            for f in &self.maps {
                owned = f(owned)?;
            }
            *b = owned;
        }
        Ok(())
    }

    /// The batches of epoch `epoch`, in order.
    pub fn iter(&self, epoch: usize) -> Batches {
        let order = match self.order(epoch) {
            Ok(order) => order,
            Err(e) => return Batches::Failed(Some(e)),
        };
        let nb = self.num_batches();
        // A batch size may be anything up to usize::MAX: a batch is at most every row.
        let ranges: Vec<(usize, usize)> = (0..nb)
            .map(|i| {
                let end = (i + 1).saturating_mul(self.batch).min(self.len());
                (i * self.batch, end)
            })
            .collect();
        if self.prefetch == 0 {
            return Batches::Inline {
                ds: self.clone(),
                order,
                ranges,
                next: 0,
                ahead: Lookahead::new(self.batch.min(self.len())),
            };
        }
        let (tx, rx) = mpsc::sync_channel(self.prefetch);
        let ds = self.clone();
        let handle = std::thread::Builder::new()
            .name("strata-prefetch".into())
            .spawn(move || {
                for (a, b) in ranges {
                    // A closed channel means the consumer stopped early: just end.
                    if tx.send(ds.make_batch(&order[a..b])).is_err() {
                        return;
                    }
                }
            });
        match handle {
            Ok(_) => Batches::Prefetched { rx },
            Err(e) => Batches::Failed(Some(Error::invalid(
                "Dataset::prefetch",
                format!("cannot start the prefetch thread: {e}"),
            ))),
        }
    }
}

fn with_first(t: &TensorType, n: usize) -> TensorType {
    let mut d = t.dims().to_vec();
    d[0] = n;
    TensorType::new(t.dtype, d)
}

/// An epoch's batches.
pub enum Batches {
    Inline {
        ds: Dataset,
        order: Vec<usize>,
        ranges: Vec<(usize, usize)>,
        next: usize,
        /// The next batch's rows, fetched into cache meanwhile (see [`Lookahead`]).
        ahead: Lookahead,
    },
    Prefetched {
        rx: mpsc::Receiver<Result<Batch>>,
    },
    Failed(Option<Error>),
}

impl Iterator for Batches {
    type Item = Result<Batch>;
    fn next(&mut self) -> Option<Result<Batch>> {
        match self {
            Batches::Inline {
                ds,
                order,
                ranges,
                next,
                ahead,
            } => {
                let &(a, b) = ranges.get(*next)?;
                ahead.finish();
                *next += 1;
                Some(ds.make_batch(&order[a..b]))
            }
            Batches::Prefetched { rx } => rx.recv().ok(),
            Batches::Failed(e) => e.take().map(Err),
        }
    }
}
