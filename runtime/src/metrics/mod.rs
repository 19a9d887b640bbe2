//! Metrics, streamed over batches as Keras does: each keeps f32 state tensors that the
//! train (or evaluation) step updates in the same graph, and a result computed from them.

mod accuracy;
mod at_value;
mod confusion;
mod counts;
mod f_score;
mod iou;
mod loss_means;
mod on_output;
mod regression;
mod top_k;

pub use accuracy::{
    Accuracy, BinaryAccuracy, CategoricalAccuracy, SparseCategoricalAccuracy, TopKAccuracy,
};
pub use at_value::{
    PrecisionAtRecall, RecallAtPrecision, SensitivityAtSpecificity, SpecificityAtSensitivity,
};
pub use confusion::{AucCurve, AucSummationMethod, Precision, Recall, AUC};
pub use counts::{FalseNegatives, FalsePositives, TrueNegatives, TruePositives};
pub use f_score::{Average, F1Score, FBetaScore};
pub use iou::{BinaryIoU, IoU, MeanIoU, OneHotIoU, OneHotMeanIoU};
pub use loss_means::{
    BinaryCrossentropy, CategoricalCrossentropy, CategoricalHinge, CosineSimilarity, Hinge,
    KLDivergence, LogCoshError, MeanAbsoluteError, MeanAbsolutePercentageError, MeanSquaredError,
    MeanSquaredLogarithmicError, Poisson, SparseCategoricalCrossentropy, SquaredHinge,
};
pub(crate) use on_output::OutputLoss;
pub use on_output::{on_output, OnOutput};
pub use regression::{ClassAggregation, R2Score, RootMeanSquaredError};
pub use top_k::{SparseTopKCategoricalAccuracy, TopKCategoricalAccuracy};

use crate::ir::{Comparison, DType, Graph, ReduceOp, TensorType, Value};
use crate::loss::Loss;
use crate::Result;
use std::fmt;

/// A streaming metric.
pub trait Metric: Send + Sync + fmt::Debug {
    /// The name in logs and the history, e.g. `accuracy`.
    fn name(&self) -> String;
    /// Shapes of the f32 state tensors (all start at zero).
    fn state(&self) -> Vec<Vec<usize>>;
    /// Emits the new state after one batch; `sw` is the per-sample weight `[batch]`.
    fn update(
        &self,
        g: &mut Graph,
        state: &[Value],
        target: Value,
        pred: Value,
        sw: Value,
    ) -> Result<Vec<Value>>;
    /// Emits the metric's value from its state: an f32 tensor of [`result_shape`].
    ///
    /// [`result_shape`]: Metric::result_shape
    fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value>;
    /// The shape of [`result`](Metric::result): `[]`, a scalar (the default), or `[n]`,
    /// a vector of `n` values (F1 per class, counts per threshold) that the logs, the
    /// history and `evaluate` keep whole. Asked after [`build`](Metric::build).
    fn result_shape(&self) -> Vec<usize> {
        Vec::new()
    }
    /// Learns the model's output shape (without the batch axis) before [`state`] and
    /// [`result_shape`] are asked, when the step's state is laid out: a metric whose
    /// state is per class (Keras sizes it at the first batch) sizes it here, and refuses
    /// an output it cannot measure. Built again, with the same shape, when the device
    /// state is rebuilt.
    ///
    /// [`state`]: Metric::state
    /// [`result_shape`]: Metric::result_shape
    fn build(&mut self, _output: &[usize]) -> Result<()> {
        Ok(())
    }
    /// Replaces a generic metric with the one the loss implies (`accuracy` becomes
    /// sparse categorical accuracy next to a sparse loss, as Keras does).
    fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric>;
    fn clone_box(&self) -> Box<dyn Metric>;
    /// Checks the targets' values on the host before a step sees them (a label the metric
    /// cannot place, say), as [`Loss::check_values`] does; `pred_dims` are the predictions'
    /// dims. Nothing by default.
    fn check_values(&self, _target: &crate::Tensor, _pred_dims: &[usize]) -> Result<()> {
        Ok(())
    }
    /// The output this metric is on, when it is an [`OnOutput`].
    #[doc(hidden)]
    fn on_output(&self) -> Option<&OnOutput> {
        None
    }
}

/// `total / count` elementwise, 0 where nothing was counted.
pub(crate) fn ratio(g: &mut Graph, total: Value, count: Value) -> Result<Value> {
    let zero = g.zeros_like(count)?;
    let none = g.compare(Comparison::Eq, count, zero)?;
    let one = g.full_like(1.0, count)?;
    let safe = g.select(none, one, count)?;
    let r = g.div(total, safe)?;
    g.select(none, zero, r)
}

/// Reduces a per-element value `[batch, ...]` to per-sample `[batch]` (mean of the rest).
pub(crate) fn per_sample(g: &mut Graph, v: Value) -> Result<Value> {
    let r = g.ty(v).rank();
    if r <= 1 {
        return Ok(v);
    }
    g.mean(v, &(1..r).collect::<Vec<_>>())
}

/// The weighted-mean update shared by mean metrics: `total += Σ v·w`, `count += Σ w`.
pub(crate) fn mean_update(
    g: &mut Graph,
    state: &[Value],
    v: Value,
    sw: Value,
) -> Result<Vec<Value>> {
    let v = per_sample(g, v)?;
    let vw = g.mul(v, sw)?;
    let s = g.sum_all(vw)?;
    let c = g.sum_all(sw)?;
    Ok(vec![g.add(state[0], s)?, g.add(state[1], c)?])
}

/// The index of the largest element along the last axis (the first on ties), as f32.
pub(crate) fn argmax_last(g: &mut Graph, x: Value) -> Result<Value> {
    let t = g.ty(x).clone();
    let last = t.rank() - 1;
    let keep: Vec<usize> = (0..last).collect();
    let m = g.reduce(ReduceOp::Max, x, &[last])?;
    let mb = g.broadcast_in_dim(m, t.shape.clone(), &keep)?;
    let is_max = g.compare(Comparison::Eq, x, mb)?;
    let idx = g.iota(TensorType::new(DType::F32, t.shape.clone()), last)?;
    let big = g.full_like(t.dims()[last] as f64, idx)?;
    let cand = g.select(is_max, idx, big)?;
    g.reduce(ReduceOp::Min, cand, &[last])
}

/// Anything that can be the metrics argument of `compile`: an array or vector of metrics,
/// a tuple of up to four, or `()` for none.
pub trait IntoMetrics {
    fn into_metrics(self) -> Vec<Box<dyn Metric>>;
}

impl IntoMetrics for () {
    fn into_metrics(self) -> Vec<Box<dyn Metric>> {
        Vec::new()
    }
}

impl<M: Metric + 'static, const N: usize> IntoMetrics for [M; N] {
    fn into_metrics(self) -> Vec<Box<dyn Metric>> {
        self.into_iter()
            .map(|m| Box::new(m) as Box<dyn Metric>)
            .collect()
    }
}

impl IntoMetrics for Vec<Box<dyn Metric>> {
    fn into_metrics(self) -> Vec<Box<dyn Metric>> {
        self
    }
}

macro_rules! tuple_metrics {
    ($($t:ident),+) => {
        impl<$($t: Metric + 'static),+> IntoMetrics for ($($t,)+) {
            #[allow(non_snake_case)]
            fn into_metrics(self) -> Vec<Box<dyn Metric>> {
                let ($($t,)+) = self;
                vec![$(Box::new($t) as Box<dyn Metric>),+]
            }
        }
    };
}
tuple_metrics!(A);
tuple_metrics!(A, B);
tuple_metrics!(A, B, C);
tuple_metrics!(A, B, C, D);
