//! `value_and_grad`: the training loss of one batch and its gradients, with no update.

use super::checks::check_pair;
use super::compile::{Layout, TrainState};
use super::distribute::Dist;
use super::runner::EVAL_INPUTS;
use super::staging::with_rows;
use super::step::{declare_state, loss_and_grads, StepKey};
use crate::backend::CompileOptions;
use crate::data::IntoData;
use crate::ir::{DType, Graph, TensorType};
use crate::nn::Architecture;
use crate::Model;
use crate::{Result, Tensor};

impl<A: Architecture> Model<A> {
    /// The compiled loss of `x`, `y` as one batch and the gradient of that loss with
    /// respect to every trainable parameter, named as [`weights`](Model::weights) names
    /// them, in the same order; the weights, the optimizer state and the metrics are left
    /// as they are. Keras has no such call on a model; this is JAX's `value_and_grad` of
    /// what Keras' `train_step` differentiates (`compute_loss` in training mode, the mean
    /// over the batch as `fit` takes it), computed by the same graph code as the train
    /// step, so it is exactly the loss and the gradients one step of
    /// [`train_on_batch`](Model::train_on_batch) would use (before gradient clipping).
    /// Dropout draws the masks the next training step would draw.
    pub fn value_and_grad(
        &mut self,
        x: impl IntoData,
        y: impl IntoData,
    ) -> Result<(f64, Vec<(String, Tensor)>)> {
        let what = "value_and_grad";
        self.check_compiled(what)?;
        let x = self.inputs_tensor(what, x.into_data())?;
        let y = self.targets_tensor(what, y.into_data())?;
        let n = check_pair(what, &x, &y)?;
        self.check_inputs(what, &x)?;
        self.check_targets(what, &y, n)?;
        self.ensure_device()?;
        // As evaluation does, a batch that does not split over the replicas is padded
        // with samples that weigh nothing (the loss divides by the real count).
        let dist = self
            .replicas()
            .map(|r| Dist::new(what, r, n, true))
            .transpose()?;
        let rows = dist.map_or(n, |d| d.local);
        let (x_ty, y_ty) = (with_rows(&x.ty(), rows), with_rows(&y.ty(), rows));
        let key = StepKey::Grad {
            x: x_ty.clone(),
            y: y_ty.clone(),
            dist,
        };
        self.prepare(&key, |m, t, layout| {
            grad_graph(m, t, layout, dist, &x_ty, &y_ty)
        })?;
        let (mut x, mut y) = (x, y);
        let mut sw = Tensor::F32(ndarray::ArrayD::ones(ndarray::IxDyn(&[n])));
        let outs =
            self.runner_mut()?
                .run(&key, &mut [&mut x, &mut y, &mut sw], EVAL_INPUTS, (1, dist))?;
        let backend = self.placement.backend(what)?;
        let loss = backend.read_scalar(&outs[0])?;
        let trainable = self.runner()?.layout().trainable.clone();
        let grads = trainable
            .iter()
            .zip(&outs[1..])
            .map(|(&i, b)| Ok((self.params()[i].name.clone(), backend.download(b)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok((loss, grads))
    }
}

/// `value_and_grad`'s graph: the state (as [`Layout`] lays it out), then `x`, `y`, `sw`
/// (one replica's rows under `dist`); outputs the loss, then the gradient of each
/// trainable parameter. It writes no state: the metric updates [`loss_and_grads`] makes
/// and the layers' state updates are not among its outputs.
pub(crate) fn grad_graph<A: Architecture>(
    model: &Model<A>,
    t: &TrainState,
    layout: &Layout,
    dist: Option<Dist>,
    x_ty: &TensorType,
    y_ty: &TensorType,
) -> Result<(Graph, CompileOptions)> {
    let mut g = Graph::new("value_and_grad");
    let state = declare_state(&mut g, layout);
    let x = g.parameter(x_ty.clone());
    let y = g.parameter(y_ty.clone());
    let batch = x_ty.dims()[0];
    let sw = g.parameter(TensorType::new(DType::F32, [batch]));
    let params = state[layout.params.clone()].to_vec();
    let mut new = state.clone();
    let r = loss_and_grads(
        &mut g,
        model,
        t,
        layout,
        &mut new,
        &params,
        (x, y, sw),
        state[layout.key],
        (batch, dist),
        "value_and_grad",
    )?;
    let mut outputs = vec![r.loss];
    outputs.extend(r.grads);
    g.set_outputs(outputs)?;
    Ok((g, CompileOptions::default()))
}
