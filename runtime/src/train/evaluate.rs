//! `evaluate`.

use super::checks::check_pair;
use super::runner::EVAL_INPUTS;
use super::staging::with_rows;
use super::step::{eval_graph, StepKey};
use super::Logs;
use crate::data::{gather_rows, IntoTensor};
use crate::nn::Architecture;
use crate::Model;
use crate::{Error, Result, Tensor};

impl<A: Architecture> Model<A> {
    /// The loss and metrics over `x`, `y` in inference mode (Keras' `evaluate`), in
    /// batches of 32.
    pub fn evaluate(&mut self, x: impl IntoTensor, y: impl IntoTensor) -> Result<Logs> {
        self.evaluate_batched(x, y, 32)
    }

    /// [`evaluate`](Model::evaluate) with a chosen batch size.
    pub fn evaluate_batched(
        &mut self,
        x: impl IntoTensor,
        y: impl IntoTensor,
        batch_size: usize,
    ) -> Result<Logs> {
        let (x, y) = (x.into_tensor(), y.into_tensor());
        self.check_compiled("evaluate")?;
        let n = check_pair("evaluate", &x, &y)?;
        self.check_inputs("evaluate", &x)?;
        self.check_targets("evaluate", &y, n)?;
        self.ensure_device()?;
        self.evaluate_logs(&x, &y, batch_size)
    }

    /// Evaluation over checked data: batches in order, metric state reset first.
    pub(crate) fn evaluate_logs(
        &mut self,
        x: &Tensor,
        y: &Tensor,
        batch_size: usize,
    ) -> Result<Logs> {
        if batch_size == 0 {
            return Err(Error::invalid("evaluate", "batch_size must be >= 1, got 0"));
        }
        let n = x.dims()[0];
        self.runner_mut()?.reset_metrics()?;
        // The metric state accumulates on the device; only the last call's outputs,
        // which hold the results over every batch, are read.
        let mut outs = None;
        let mut start = 0;
        while start < n {
            let b = batch_size.min(n - start);
            let rows: Vec<usize> = (start..start + b).collect();
            let (x_ty, y_ty) = (with_rows(&x.ty(), b), with_rows(&y.ty(), b));
            let mut xb = Tensor::zeros(&x_ty)?;
            let mut yb = Tensor::zeros(&y_ty)?;
            gather_rows(x, &rows, &mut xb)?;
            gather_rows(y, &rows, &mut yb)?;
            let mut sw = Tensor::F32(ndarray::ArrayD::ones(ndarray::IxDyn(&[b])));
            // Evaluation pads an uneven batch itself: padding weighs nothing and the
            // divisions use the real count, so it cannot change a result.
            let dist = self.dist("evaluate", b, true)?;
            let (x_ty, y_ty) = match dist {
                Some(d) => (with_rows(&x_ty, d.local), with_rows(&y_ty, d.local)),
                None => (x_ty, y_ty),
            };
            let key = StepKey::Eval {
                x: x_ty.clone(),
                y: y_ty.clone(),
                dist,
            };
            self.prepare(&key, |m, t, layout| {
                eval_graph(m, t, layout, dist, &x_ty, &y_ty)
            })?;
            outs = Some(self.runner_mut()?.run(
                &key,
                &mut [&mut xb, &mut yb, &mut sw],
                EVAL_INPUTS,
                dist,
            )?);
            start += b;
        }
        let mut logs = Logs::default();
        let Some(outs) = outs else {
            return Ok(logs);
        };
        let (backend, t) = (self.placement.backend("evaluate")?, self.compiled()?);
        let shapes = &t.runner()?.layout().result_shapes;
        logs.insert("loss", backend.read_scalar(&outs[0])?);
        for ((name, o), shape) in t.metric_names.iter().zip(&outs[1..]).zip(shapes) {
            if shape.is_empty() {
                logs.insert(name.clone(), backend.read_scalar(o)?);
            } else {
                let v = backend.download(o)?.to_vec::<f32>()?;
                logs.insert_vector(name.clone(), v.into_iter().map(f64::from).collect());
            }
        }
        Ok(logs)
    }
}
