//! Regression metrics beyond the mean errors: Keras' `RootMeanSquaredError` and
//! `R2Score`.

use super::{mean_update, ratio, Metric};
use crate::ir::{Comparison, DType, Graph, TensorType, Value};
use crate::loss::Loss;
use crate::{Error, Result};

/// The square root of the weighted mean of `(target - pred)²` (each sample's mean over
/// its elements). Logged as `root_mean_squared_error`.
#[derive(Clone, Debug, Default)]
pub struct RootMeanSquaredError;

impl Metric for RootMeanSquaredError {
    fn name(&self) -> String {
        "root_mean_squared_error".into()
    }
    fn state(&self) -> Vec<Vec<usize>> {
        vec![vec![], vec![]]
    }
    fn update(
        &self,
        g: &mut Graph,
        state: &[Value],
        y: Value,
        p: Value,
        sw: Value,
    ) -> Result<Vec<Value>> {
        let y = same_rank(g, "RootMeanSquaredError", y, p)?;
        let d = g.sub(y, p)?;
        let sq = g.mul(d, d)?;
        mean_update(g, state, sq, sw)
    }
    fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value> {
        let m = ratio(g, state[0], state[1])?;
        g.sqrt(m)
    }
    fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric> {
        self
    }
    fn clone_box(&self) -> Box<dyn Metric> {
        Box::new(self.clone())
    }
}

/// The target as an f32 tensor of the prediction's shape: Keras squeezes or expands a
/// trailing axis of size 1 so the two ranks agree; any other difference is an error.
fn same_rank(g: &mut Graph, metric: &str, y: Value, p: Value) -> Result<Value> {
    let (yt, pt) = (g.ty(y).clone(), g.ty(p).clone());
    let y = if yt.dtype == DType::F32 {
        y
    } else {
        g.convert(y, DType::F32)?
    };
    if yt.dims() == pt.dims() {
        return Ok(y);
    }
    let squeeze = |a: &TensorType, b: &TensorType| {
        a.rank() == b.rank() + 1 && a.dims().last() == Some(&1) && a.dims()[..b.rank()] == *b.dims()
    };
    if squeeze(&yt, &pt) || squeeze(&pt, &yt) {
        return g.reshape(y, pt.dims().to_vec());
    }
    Err(Error::invalid(
        metric,
        format!("targets {yt} and predictions {pt} do not have one shape"),
    ))
}

/// How `R2Score` combines the scores of its output columns (Keras' `class_aggregation`;
/// Keras' `None`, one score per column, is `Option::None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassAggregation {
    /// Their mean (`"uniform_average"`, the default).
    UniformAverage,
    /// Their mean weighted by each column's variance (`"variance_weighted_average"`).
    VarianceWeightedAverage,
}

impl ClassAggregation {
    /// Keras' `class_aggregation`: `None`, `"uniform_average"` or
    /// `"variance_weighted_average"`; anything else is an error naming `R2Score`.
    pub fn from_keras(class_aggregation: Option<&str>) -> Result<Option<ClassAggregation>> {
        match class_aggregation {
            None => Ok(None),
            Some("uniform_average") => Ok(Some(ClassAggregation::UniformAverage)),
            Some("variance_weighted_average") => {
                Ok(Some(ClassAggregation::VarianceWeightedAverage))
            }
            Some(other) => Err(Error::invalid(
                "R2Score",
                format!(
                    "class_aggregation must be one of None, \"uniform_average\", \
                     \"variance_weighted_average\", got \"{other}\""
                ),
            )),
        }
    }
}

/// Keras' `R2Score`, the coefficient of determination `1 - SS_res / SS_tot` of each
/// output column over everything seen, for models with 2D outputs; adjusted for
/// `num_regressors` independent variables when that is not 0 (and is below the number of
/// values seen minus one, else plain, as Keras falls back; values of samples weighing
/// exactly 0 are not counted as seen). With `class_aggregation:
/// None` the result is a vector, one score per column. Logged as `r2_score`.
#[derive(Clone, Debug)]
pub struct R2Score {
    pub class_aggregation: Option<ClassAggregation>,
    pub num_regressors: usize,
    columns: usize,
}

impl Default for R2Score {
    fn default() -> Self {
        R2Score {
            class_aggregation: Some(ClassAggregation::UniformAverage),
            num_regressors: 0,
            columns: 0,
        }
    }
}

impl R2Score {
    pub fn new() -> R2Score {
        R2Score::default()
    }

    pub fn class_aggregation(mut self, a: Option<ClassAggregation>) -> Self {
        self.class_aggregation = a;
        self
    }

    /// Sets `class_aggregation` from Keras' string (see [`ClassAggregation::from_keras`]).
    pub fn class_aggregation_from_keras(mut self, a: Option<&str>) -> Result<Self> {
        self.class_aggregation = ClassAggregation::from_keras(a)?;
        Ok(self)
    }

    pub fn num_regressors(mut self, n: usize) -> Self {
        self.num_regressors = n;
        self
    }
}

impl Metric for R2Score {
    fn name(&self) -> String {
        "r2_score".into()
    }
    /// Per column: weighted sum of targets, of squared targets, of squared residuals,
    /// and the weight; then the count of values seen.
    fn state(&self) -> Vec<Vec<usize>> {
        let c = vec![self.columns];
        vec![c.clone(), c.clone(), c.clone(), c, vec![]]
    }
    fn build(&mut self, output: &[usize]) -> Result<()> {
        self.columns = match output {
            [c] if *c > 0 => *c,
            _ => {
                return Err(Error::invalid(
                    "R2Score",
                    format!(
                        "expects 2D predictions (batch_size, output_dim), got a model \
                         output of shape (batch_size, {})",
                        output
                            .iter()
                            .map(|d| d.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ))
            }
        };
        Ok(())
    }
    fn result_shape(&self) -> Vec<usize> {
        match self.class_aggregation {
            None => vec![self.columns],
            Some(_) => vec![],
        }
    }
    fn update(
        &self,
        g: &mut Graph,
        state: &[Value],
        y: Value,
        p: Value,
        sw: Value,
    ) -> Result<Vec<Value>> {
        let y = same_rank(g, "R2Score", y, p)?;
        let pt = g.ty(p).clone();
        if pt.rank() != 2 || pt.dims()[1] != self.columns {
            return Err(Error::invalid(
                "R2Score",
                format!(
                    "expects 2D inputs (batch_size, {}) (see Metric::build), got \
                     predictions {pt}",
                    self.columns
                ),
            ));
        }
        let w = g.broadcast_in_dim(sw, pt.shape.clone(), &[0])?;
        let wy = g.mul(y, w)?;
        let ysq = g.mul(y, wy)?;
        let d = g.sub(y, p)?;
        let d2 = g.mul(d, d)?;
        let res = g.mul(d2, w)?;
        let mut out = Vec::with_capacity(5);
        for (s, v) in state.iter().zip([wy, ysq, res, w]) {
            let inc = g.sum(v, &[0])?;
            out.push(g.add(*s, inc)?);
        }
        // Keras counts every value seen; values of samples weighing exactly 0 are left
        // out here, so the rows that pad an uneven batch over replicas (weight 0) do not
        // change the adjusted score. Without zero weights the two counts agree.
        let zero = g.zeros_like(sw)?;
        let real = g.compare(Comparison::Ne, sw, zero)?;
        let real = g.convert(real, DType::F32)?;
        let rows = g.sum_all(real)?;
        let seen = g.mul_scalar(rows, pt.dims()[1] as f64)?;
        out.push(g.add(state[4], seen)?);
        Ok(out)
    }
    fn result(&self, g: &mut Graph, s: &[Value]) -> Result<Value> {
        let (sum, squares, residual, count, n) = (s[0], s[1], s[2], s[3], s[4]);
        let mean = g.div(sum, count)?;
        let sm = g.mul(sum, mean)?;
        let total = g.sub(squares, sm)?;
        let q = g.div(residual, total)?;
        let one = g.full_like(1.0, q)?;
        let raw = g.sub(one, q)?;
        // A column without variance but with residuals scores 0, not -∞.
        let a = g.abs(raw)?;
        let inf = g.full_like(f64::INFINITY, a)?;
        let infinite = g.compare(Comparison::Eq, a, inf)?;
        let zero = g.zeros_like(raw)?;
        let raw = g.select(infinite, zero, raw)?;
        let r2 = match self.class_aggregation {
            None => return Ok(raw),
            Some(ClassAggregation::UniformAverage) => g.mean(raw, &[0])?,
            Some(ClassAggregation::VarianceWeightedAverage) => {
                let tr = g.mul(total, raw)?;
                let num = g.sum_all(tr)?;
                let den = g.sum_all(total)?;
                g.div(num, den)?
            }
        };
        if self.num_regressors == 0 {
            return Ok(r2);
        }
        // 1 - (1 - r2)·(n - 1) / (n - p - 1), only while p < n - 1.
        let p = self.num_regressors as f64;
        let n1 = g.add_scalar(n, -1.0)?;
        let one = g.full_like(1.0, r2)?;
        let miss = g.sub(one, r2)?;
        let num = g.mul(miss, n1)?;
        let den = g.add_scalar(n1, -p)?;
        let q = g.div(num, den)?;
        let adjusted = g.sub(one, q)?;
        let pv = g.full_like(p, n1)?;
        let enough = g.compare(Comparison::Gt, n1, pv)?;
        g.select(enough, adjusted, r2)
    }
    fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric> {
        self
    }
    fn clone_box(&self) -> Box<dyn Metric> {
        Box::new(self.clone())
    }
}
