//! Metrics of one output of a model with several (Keras' `metrics={"kind": [...]}`),
//! logged as `kind_accuracy`, and each output's own loss (`kind_loss`).

use super::{mean_update, ratio, Metric};
use crate::ir::{Graph, Value};
use crate::loss::{in_output, Head, Loss};
use crate::{Error, Result, Tensor};

/// `metric` measured on the output named `output` (the name of the layer producing it).
pub fn on_output(output: &str, metric: impl Metric + 'static) -> OnOutput {
    OnOutput {
        output: output.to_string(),
        metric: Box::new(metric),
        head: None,
    }
}

/// A metric of one output; see [`on_output`].
#[derive(Debug)]
pub struct OnOutput {
    output: String,
    metric: Box<dyn Metric>,
    /// Where the output sits in the step's packed rows, once compiled.
    head: Option<Head>,
}

impl OnOutput {
    /// This metric laid out on `head` (which must be its output), its generic metric
    /// resolved by that output's loss.
    pub(crate) fn bound(&self, head: &Head, loss: &dyn Loss) -> OnOutput {
        OnOutput {
            output: self.output.clone(),
            metric: self.metric.clone_box().resolve(loss),
            head: Some(head.clone()),
        }
    }

    /// The name of the output it measures.
    pub fn output(&self) -> &str {
        &self.output
    }

    fn head(&self) -> Result<&Head> {
        self.head.as_ref().ok_or_else(|| {
            Error::invalid(
                format!("metric {}", self.name()),
                "on_output is for a model with several outputs; this one has one: pass the \
                 metric itself",
            )
        })
    }
}

impl Metric for OnOutput {
    fn name(&self) -> String {
        format!("{}_{}", self.output, self.metric.name())
    }
    fn state(&self) -> Vec<Vec<usize>> {
        self.metric.state()
    }
    fn update(
        &self,
        g: &mut Graph,
        state: &[Value],
        target: Value,
        pred: Value,
        sw: Value,
    ) -> Result<Vec<Value>> {
        let h = self.head()?;
        let y = h.target_of(g, target)?;
        let p = h.prediction(g, pred)?;
        self.metric.update(g, state, y, p, sw)
    }
    fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value> {
        self.metric.result(g, state)
    }
    fn result_shape(&self) -> Vec<usize> {
        self.metric.result_shape()
    }
    fn build(&mut self, _output: &[usize]) -> Result<()> {
        let pred = self.head()?.pred.clone();
        self.metric.build(&pred)
    }
    fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric> {
        self
    }
    fn clone_box(&self) -> Box<dyn Metric> {
        Box::new(OnOutput {
            output: self.output.clone(),
            metric: self.metric.clone_box(),
            head: self.head.clone(),
        })
    }
    fn check_values(&self, target: &Tensor, pred_dims: &[usize]) -> Result<()> {
        let h = self.head()?;
        let n = pred_dims.first().copied().unwrap_or(0);
        self.metric
            .check_values(&h.host_target(target)?, &h.pred_dims(n))
            .map_err(|e| in_output(e, &self.output))
    }
    fn on_output(&self) -> Option<&OnOutput> {
        Some(self)
    }
}

/// One output's loss, unweighted, averaged over the samples: Keras' `{output}_loss`.
#[derive(Debug)]
pub(crate) struct OutputLoss {
    pub head: Head,
    pub loss: Box<dyn Loss>,
}

impl Metric for OutputLoss {
    fn name(&self) -> String {
        format!("{}_loss", self.head.name)
    }
    fn state(&self) -> Vec<Vec<usize>> {
        vec![vec![], vec![]]
    }
    fn update(
        &self,
        g: &mut Graph,
        state: &[Value],
        target: Value,
        pred: Value,
        sw: Value,
    ) -> Result<Vec<Value>> {
        let y = self.head.target_of(g, target)?;
        let p = self.head.prediction(g, pred)?;
        let v = self.loss.per_sample(g, y, p, None)?;
        mean_update(g, state, v, sw)
    }
    fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value> {
        ratio(g, state[0], state[1])
    }
    fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric> {
        self
    }
    fn clone_box(&self) -> Box<dyn Metric> {
        Box::new(OutputLoss {
            head: self.head.clone(),
            loss: self.loss.clone_box(),
        })
    }
}
