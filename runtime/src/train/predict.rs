//! `predict`: the model's outputs in inference mode.

use super::distribute;
use super::evaluate::{batches_key, batches_of_call};
use super::inference::Purpose;
use super::runner::PREDICT_INPUTS;
use super::staging::with_rows;
use super::step::predict_graph;
use crate::backend::CompileOptions;
use crate::data::{gather_rows, Data, IntoData, IntoTensor};
use crate::ir::TensorType;
use crate::memory::{element_count, vec_with_capacity};
use crate::nn::Architecture;
use crate::Model;
use crate::{Error, Result, Tensor};

impl<A: Architecture> Model<A> {
    /// The model's outputs for `x` (`[samples, input...]`) in inference mode (no dropout,
    /// batch-norm moving statistics), computed in batches of 32.
    ///
    /// Takes `&self`: threads sharing a model (`Model` is `Send + Sync`) may predict at
    /// once, each on weights and compiled graphs of its own (see
    /// [`predict_batched`](Model::predict_batched)), with the results one thread gets.
    ///
    /// A model with several inputs takes one array each, in order or by name; one with
    /// several outputs answers [`predict_outputs`](Model::predict_outputs).
    pub fn predict(&self, x: impl IntoData) -> Result<Tensor> {
        self.predict_batched(x, 32)
    }

    /// Every output of a model for `x`, in the order of
    /// [`output_names`](Model::output_names) (Keras' `predict` of a model with several
    /// outputs), computed in batches of 32.
    pub fn predict_outputs(&self, x: impl IntoData) -> Result<Vec<Tensor>> {
        let packed = self.predict_rows(x.into_data(), 32)?;
        self.unpack_outputs("predict_outputs", packed)
    }

    /// [`predict`](Model::predict) as an array of a static rank (the batch axis first):
    /// `let p: Array2<f32> = model.predict_array(&x)?` for a model whose output is a
    /// vector. A rank that is not the output's is a typed error.
    pub fn predict_array<D: ndarray::Dimension>(
        &self,
        x: impl IntoTensor,
    ) -> Result<ndarray::Array<f32, D>> {
        self.predict(x)?.into_array()
    }

    /// The output for one sample (of the input shape, without a batch axis), without its
    /// batch axis: `model.predict_one(image.view())` gives the 10 class probabilities.
    pub fn predict_one(&self, sample: impl IntoTensor) -> Result<Tensor> {
        self.check_single_io("predict_one")?;
        let sample = sample.into_tensor();
        let want = self.input_shape().ok_or_else(|| {
            Error::invalid(
                "predict_one",
                format!(
                    "model `{}` is not built (no input shape declared and none seen yet)",
                    self.name()
                ),
            )
        })?;
        if sample.dims() != want {
            return Err(Error::InputShape {
                what: "predict_one (one sample, without a batch axis; predict takes batches)"
                    .into(),
                expected: want.iter().map(|&d| Some(d)).collect(),
                got: sample.dims().to_vec(),
            });
        }
        let out = self.predict_batched(
            crate::with_tensor!(sample, a => Tensor::from(
                a.insert_axis(ndarray::Axis(0))
            )),
            1,
        )?;
        Ok(crate::with_tensor!(out, a => Tensor::from(a.index_axis_move(ndarray::Axis(0), 0))))
    }

    /// The outputs for `x` computed as one batch (Keras' `predict_on_batch`): one graph
    /// for all of `x`'s rows, where [`predict`](Model::predict) runs batches of 32.
    pub fn predict_on_batch(&self, x: impl IntoTensor) -> Result<Tensor> {
        let x = x.into_tensor();
        let n = x.dims().first().copied().unwrap_or(0);
        self.predict_batched(x, n.max(1))
    }

    /// [`predict`](Model::predict) with a chosen batch size. Each concurrent call holds
    /// its own copy of the weights on the device (kept for the next call, and uploaded
    /// again after the weights change) and compiles the graph once per batch shape.
    pub fn predict_batched(&self, x: impl IntoData, batch_size: usize) -> Result<Tensor> {
        if self.output_count() > 1 {
            return Err(Error::invalid(
                "predict",
                format!(
                    "model `{}` has {} outputs ({}): call predict_outputs",
                    self.name(),
                    self.output_count(),
                    self.output_names().join(", ")
                ),
            ));
        }
        self.predict_rows(x.into_data(), batch_size)
    }

    /// The predictions' rows (for several outputs, packed) for `x` in batches.
    fn predict_rows(&self, x: Data, batch_size: usize) -> Result<Tensor> {
        let x = self.built_inputs_tensor("predict", x)?;
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
        self.check_built_inputs("predict", &x)?;
        let backend = self.placement.backend("predict")?.clone();
        let mut worker = self
            .inference
            .take(Purpose::Predict, &backend, &self.weights, &[])?;
        let k = self.steps_per_execution();
        let mut parts: Vec<Tensor> = Vec::new();
        let mut start = 0;
        while start < n {
            let (b, calls) = batches_of_call(n - start, batch_size, k);
            let rows: Vec<usize> = (start..start + calls * b).collect();
            let mut xb = Tensor::zeros(&with_rows(&x.ty(), rows.len()))?;
            gather_rows(&x, &rows, &mut xb)?;
            // Under data parallelism each replica predicts its share of each batch.
            let dist = self.dist("predict", b, true)?;
            let x_ty = with_rows(&x.ty(), calls * dist.map_or(b, |d| d.local));
            let types: Vec<TensorType> = self.params().iter().map(|p| p.ty()).collect();
            let out = worker.run(
                &mut [&mut xb],
                PREDICT_INPUTS,
                (calls, dist),
                vec![x_ty.clone(), batches_key(calls)],
                || {
                    Ok((
                        predict_graph(self, &types, calls, &x_ty)?,
                        CompileOptions::default(),
                    ))
                },
            )?;
            parts.push(match dist {
                Some(d) => {
                    distribute::gather_outputs(&backend.download_replicas(&out[0])?, calls, d)?
                }
                None => backend.download(&out[0])?,
            });
            start += rows.len();
        }
        self.inference.give_back(worker);
        concat_rows(&parts)
    }
}

/// Joins batches of outputs along the first axis.
pub(crate) fn concat_rows(parts: &[Tensor]) -> Result<Tensor> {
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

#[cfg(test)]
mod sync_probe {
    fn is_sync<T: Send + Sync>() {}
    #[test]
    fn model_is_send_sync() {
        is_sync::<crate::Model<crate::nn::Sequential>>();
    }
}
