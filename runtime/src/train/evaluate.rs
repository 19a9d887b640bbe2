//! `evaluate`.

use super::checks::check_pair;
use super::compile::Layout;
use super::distribute::Dist;
use super::inference::Purpose;
use super::runner::EVAL_INPUTS;
use super::staging::with_rows;
use super::step::{eval_graph, StepKey};
use super::Logs;
use crate::backend::{Backend, Buffer};
use crate::data::{gather_rows, IntoData};
use crate::ir::TensorType;
use crate::nn::Architecture;
use crate::Model;
use crate::{Error, Result, Tensor};

impl<A: Architecture> Model<A> {
    /// The loss and metrics over `x`, `y` in inference mode (Keras' `evaluate`), in
    /// batches of 32.
    ///
    /// Takes `&self`: the totals accumulate in state of the call's own (see
    /// [`predict`](Model::predict) for how concurrent calls share a model), so the
    /// model's weights and training state are only read.
    ///
    /// A model with several inputs or outputs takes one array each, in order or by name;
    /// its logs hold each output's loss and metrics (`kind_loss`, `kind_accuracy`).
    pub fn evaluate(&self, x: impl IntoData, y: impl IntoData) -> Result<Logs> {
        self.evaluate_batched(x, y, 32)
    }

    /// [`evaluate`](Model::evaluate) with a chosen batch size.
    pub fn evaluate_batched(
        &self,
        x: impl IntoData,
        y: impl IntoData,
        batch_size: usize,
    ) -> Result<Logs> {
        self.check_compiled("evaluate")?;
        let x = self.built_inputs_tensor("evaluate", x.into_data())?;
        let y = self.targets_tensor("evaluate", y.into_data())?;
        let n = check_pair("evaluate", &x, &y)?;
        self.check_built_inputs("evaluate", &x)?;
        self.check_targets("evaluate", &y, n)?;
        let t = self.compiled()?;
        let layout = Layout::evaluation(self.params(), &t.metrics);
        // Iteration 0, key 0 (no evaluation reads either) and zeroed totals.
        let fresh = layout.types[self.params().len()..]
            .iter()
            .map(Tensor::zeros)
            .collect::<Result<Vec<_>>>()?;
        let backend = self.placement.backend("evaluate")?.clone();
        let mut worker = self
            .inference
            .take(Purpose::Evaluate, &backend, &self.weights, &fresh)?;
        let calls = (t.steps_per_execution, self.replicas());
        let outs = eval_batches(&x, &y, batch_size, calls, |inputs, (k, dist), tys| {
            let key = vec![tys.0.clone(), tys.1.clone(), batches_key(k)];
            worker.run(inputs, EVAL_INPUTS, (k, dist), key, || {
                eval_graph(self, t, &layout, (k, dist), tys.0, tys.1)
            })
        })?;
        let logs = read_logs(
            backend.as_ref(),
            &t.metric_names,
            &layout.result_shapes,
            outs,
        )?;
        self.inference.give_back(worker);
        Ok(logs)
    }

    /// Evaluation over checked data on the training state (fit's validation, where the
    /// current weights are the device's): batches in order, the state's metric totals
    /// reset first.
    pub(crate) fn evaluate_logs(
        &mut self,
        x: &Tensor,
        y: &Tensor,
        batch_size: usize,
    ) -> Result<Logs> {
        self.runner_mut()?.reset_metrics()?;
        let calls = (self.steps_per_execution(), self.replicas());
        let outs = eval_batches(
            x,
            y,
            batch_size,
            calls,
            |inputs, (k, dist), (x_ty, y_ty)| {
                let key = StepKey::Eval {
                    k,
                    x: x_ty.clone(),
                    y: y_ty.clone(),
                    dist,
                };
                self.prepare(&key, |m, t, layout| {
                    eval_graph(m, t, layout, (k, dist), x_ty, y_ty)
                })?;
                self.runner_mut()?.run(&key, inputs, EVAL_INPUTS, (k, dist))
            },
        )?;
        let (backend, t) = (self.placement.backend("evaluate")?, self.compiled()?);
        let shapes = &t.runner()?.layout().result_shapes;
        read_logs(backend.as_ref(), &t.metric_names, shapes, outs)
    }
}

/// Runs `step` on `x`, `y` in batches of `batch_size` (each with its sample weights, and
/// under data parallelism split over `replicas`, `step` given one replica's input types),
/// up to `k` batches of `batch_size` per call (a partial last batch alone), and returns the
/// last call's outputs: the metric state accumulates on the device, so only the last
/// call's results, which cover every batch, are read.
fn eval_batches(
    x: &Tensor,
    y: &Tensor,
    batch_size: usize,
    (k, replicas): (usize, Option<usize>),
    mut step: impl FnMut(
        &mut [&mut Tensor],
        (usize, Option<Dist>),
        (&TensorType, &TensorType),
    ) -> Result<Vec<Buffer>>,
) -> Result<Option<Vec<Buffer>>> {
    if batch_size == 0 {
        return Err(Error::invalid("evaluate", "batch_size must be >= 1, got 0"));
    }
    let n = x.dims()[0];
    let mut outs = None;
    let mut start = 0;
    while start < n {
        let (b, calls) = batches_of_call(n - start, batch_size, k);
        let rows: Vec<usize> = (start..start + calls * b).collect();
        let (x_ty, y_ty) = (
            with_rows(&x.ty(), rows.len()),
            with_rows(&y.ty(), rows.len()),
        );
        let mut xb = Tensor::zeros(&x_ty)?;
        let mut yb = Tensor::zeros(&y_ty)?;
        gather_rows(x, &rows, &mut xb)?;
        gather_rows(y, &rows, &mut yb)?;
        let mut sw = Tensor::F32(ndarray::ArrayD::ones(ndarray::IxDyn(&[rows.len()])));
        // Evaluation pads an uneven batch itself: padding weighs nothing and the
        // divisions use the real count, so it cannot change a result.
        let dist = replicas
            .map(|r| Dist::new("evaluate", r, b, true))
            .transpose()?;
        let (x_ty, y_ty) = match dist {
            Some(d) => (
                with_rows(&x_ty, calls * d.local),
                with_rows(&y_ty, calls * d.local),
            ),
            None => (x_ty, y_ty),
        };
        outs = Some(step(
            &mut [&mut xb, &mut yb, &mut sw],
            (calls, dist),
            (&x_ty, &y_ty),
        )?);
        start += rows.len();
    }
    Ok(outs)
}

/// The next call's batches when `left` rows remain, in batches of `batch_size`, up to `k`
/// per call: the batch size and how many batches (a partial last batch runs alone).
pub(crate) fn batches_of_call(left: usize, batch_size: usize, k: usize) -> (usize, usize) {
    match left / batch_size {
        0 => (left, 1),
        full => (batch_size, full.min(k.max(1))),
    }
}

/// The part of an inference worker's cache key that says how many batches a call runs
/// (its inputs' types give only their product with the batch size).
pub(crate) fn batches_key(k: usize) -> TensorType {
    TensorType::new(crate::ir::DType::F32, [k])
}

/// The logs in an evaluation's results: the loss, then each metric's value.
fn read_logs(
    backend: &dyn Backend,
    names: &[String],
    shapes: &[Vec<usize>],
    outs: Option<Vec<Buffer>>,
) -> Result<Logs> {
    let mut logs = Logs::default();
    let Some(outs) = outs else {
        return Ok(logs);
    };
    logs.insert("loss", backend.read_scalar(&outs[0])?);
    for ((name, o), shape) in names.iter().zip(&outs[1..]).zip(shapes) {
        if shape.is_empty() {
            logs.insert(name.clone(), backend.read_scalar(o)?);
        } else {
            let v = backend.download(o)?.to_vec::<f32>()?;
            logs.insert_vector(name.clone(), v.into_iter().map(f64::from).collect());
        }
    }
    Ok(logs)
}
