//! `evaluate` and `predict`.

use super::checks::check_pair;
use super::distribute;
use super::runner::{bind_inputs, EVAL_INPUTS, PREDICT_INPUTS};
use super::spares::Spares;
use super::staging::with_rows;
use super::step::{eval_graph, predict_graph, StepKey};
use super::Logs;
use crate::backend::{Buffer, CompileOptions};
use crate::data::{gather_rows, IntoTensor};
use crate::ir::TensorType;
use crate::memory::{element_count, vec_with_capacity};
use crate::nn::Architecture;
use crate::Model;
use crate::{Error, Result, Tensor};
use std::collections::hash_map::Entry;

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

    /// The model's outputs for `x` in inference mode (no dropout, batch-norm moving
    /// statistics), computed in batches of 32.
    pub fn predict(&mut self, x: impl IntoTensor) -> Result<Tensor> {
        self.predict_batched(x, 32)
    }

    /// [`predict`](Model::predict) with a chosen batch size.
    pub fn predict_batched(&mut self, x: impl IntoTensor, batch_size: usize) -> Result<Tensor> {
        let x = x.into_tensor();
        if batch_size == 0 {
            return Err(Error::invalid("predict", "batch_size must be >= 1, got 0"));
        }
        let n = match x.dims().first() {
            Some(&n) if n > 0 => n,
            _ => {
                return Err(Error::invalid(
                    "predict",
                    format!("x must hold at least one sample, got shape {}", x.shape()),
                ))
            }
        };
        self.check_inputs("predict", &x)?;
        let backend = self.placement.backend("predict")?.clone();
        let compiled = self.train.is_some();
        if compiled {
            self.ensure_device()?;
        }
        // Uncompiled models run a parameters-only graph on freshly uploaded weights.
        let mut own_args: Vec<Buffer> = Vec::new();
        let mut own_spare = Spares::default();
        let mut own_exes: std::collections::HashMap<
            TensorType,
            Box<dyn crate::backend::Executable>,
        > = Default::default();
        if !compiled {
            for w in &self.weights {
                own_args.push(backend.upload(w)?);
            }
        }
        let mut parts: Vec<Tensor> = Vec::new();
        let mut start = 0;
        while start < n {
            let b = batch_size.min(n - start);
            let rows: Vec<usize> = (start..start + b).collect();
            let mut xb = Tensor::zeros(&with_rows(&x.ty(), b))?;
            gather_rows(&x, &rows, &mut xb)?;
            // Under data parallelism each replica predicts its share of the batch.
            let dist = self.dist("predict", b, true)?;
            let x_ty = with_rows(&x.ty(), dist.map_or(b, |d| d.local));
            let out = if compiled {
                let key = StepKey::Predict { x: x_ty.clone() };
                self.prepare(&key, |m, _, layout| {
                    Ok((
                        predict_graph(m, &layout.types, &x_ty)?,
                        CompileOptions::default(),
                    ))
                })?;
                self.runner_mut()?
                    .run(&key, &mut [&mut xb], PREDICT_INPUTS, dist)?
            } else {
                let exe = match own_exes.entry(x_ty.clone()) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(e) => {
                        let types: Vec<TensorType> = self.params().iter().map(|p| p.ty()).collect();
                        let g = predict_graph(self, &types, &x_ty)?;
                        e.insert(backend.compile(&g, &CompileOptions::default())?)
                    }
                };
                let base = self.weights.len();
                bind_inputs(
                    backend.as_ref(),
                    &mut own_args,
                    base,
                    &mut [&mut xb],
                    PREDICT_INPUTS,
                    (1, dist),
                    &mut own_spare,
                )?;
                exe.execute(&mut own_args)?
            };
            parts.push(match dist {
                Some(_) => distribute::gather_outputs(&backend.download_replicas(&out[0])?, b)?,
                None => backend.download(&out[0])?,
            });
            start += b;
        }
        concat_rows(&parts)
    }
}

/// Joins batches of outputs along the first axis.
fn concat_rows(parts: &[Tensor]) -> Result<Tensor> {
    let first = parts
        .first()
        .ok_or_else(|| Error::invalid("predict", "no batches"))?;
    let mut dims = first.dims().to_vec();
    dims[0] = parts.iter().map(|p| p.dims()[0]).sum();
    match first {
        Tensor::F32(_) => {
            let ty = TensorType::new(crate::ir::DType::F32, dims.clone());
            let what = || format!("predict output {ty}");
            let mut v: Vec<f32> = vec_with_capacity(what, element_count(what, &ty)?)?;
            for p in parts {
                v.extend(p.array::<f32>()?.iter());
            }
            Tensor::from_vec(&dims, v)
        }
        t => Err(Error::DType {
            what: "predict output".into(),
            expected: crate::ir::DType::F32,
            got: t.dtype(),
        }),
    }
}
