//! `predict`: the model's outputs in inference mode.

use super::distribute;
use super::runner::{bind_inputs, PREDICT_INPUTS};
use super::spares::Spares;
use super::staging::with_rows;
use super::step::{predict_graph, StepKey};
use crate::backend::{Buffer, CompileOptions};
use crate::data::{gather_rows, IntoTensor};
use crate::ir::TensorType;
use crate::memory::{element_count, vec_with_capacity};
use crate::nn::Architecture;
use crate::Model;
use crate::{Error, Result, Tensor};
use std::collections::hash_map::Entry;

impl<A: Architecture> Model<A> {
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
