//! Data parallelism in the step graphs: each replica runs the step on its share of the
//! global batch, and one all-reduce per step sums what must agree across replicas.
//!
//! A replica's loss is `Σ per-sample loss · weight` over its rows divided by the GLOBAL
//! batch (TensorFlow's `compute_average_loss`), so the all-reduced (summed) gradients are
//! exactly the gradients of the global batch's mean loss: every replica applies the same
//! update and the replicas' parameters stay identical — and equal, up to rounding, to
//! single-device training on the same global batches. The loss tracker and every metric
//! take the all-reduced increments, so each replica's metric state is the global one (the
//! host reads replica 0). BatchNormalization normalizes with each replica's own batch
//! statistics (TensorFlow's non-synchronized batch norm); its moving averages are averaged
//! over replicas, which keeps them identical on every replica.
//!
//! Host side: a global batch is split into contiguous per-replica blocks. A global batch
//! that does not divide evenly is padded (when asked for) by repeating its last sample
//! with weight 0; the divisions still use the real sample count, so padding changes no
//! loss, gradient or metric (BatchNormalization's batch statistics do see the repeats).

use crate::autodiff;
use crate::data::gather_rows;
use crate::ir::{DType, Graph, TensorType, Value};
use crate::metrics::Metric;
use crate::nn::Architecture;
use crate::train::compile::{Layout, TrainState};
use crate::Model;
use crate::{Error, Result, Tensor};

/// How one step is split over replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Dist {
    pub replicas: usize,
    /// Real samples in one global batch: what the loss and the counts divide by.
    pub global: usize,
    /// Rows each replica gets per step (the global batch, padded to a multiple of the
    /// replica count, over the replicas).
    pub local: usize,
}

impl Dist {
    /// The split of a global batch of `global` samples over `replicas`; one that does not
    /// divide evenly is an error unless `pad`.
    pub fn new(what: &str, replicas: usize, global: usize, pad: bool) -> Result<Dist> {
        if replicas == 0 || global == 0 {
            return Err(Error::invalid(
                what,
                format!("cannot split a batch of {global} over {replicas} replicas"),
            ));
        }
        if !global.is_multiple_of(replicas) && !pad {
            return Err(indivisible(what, global, replicas));
        }
        Ok(Dist {
            replicas,
            global,
            local: global.div_ceil(replicas),
        })
    }
}

/// The error for a global batch that does not split evenly over the replicas (one of a
/// dataset's; [`Model::check_replica_split`] words it in the caller's terms when it can).
pub(crate) fn indivisible(what: &str, global: usize, replicas: usize) -> Error {
    Error::invalid(
        what,
        format!(
            "a batch of {global} samples does not split evenly over {replicas} replicas: \
             expected batches of a multiple of {replicas} samples, or \
             Fit::pad_to_replicas(true) to pad each uneven batch with zero-weight samples"
        ),
    )
}

/// The multiples of `replicas` around `n` (not 0), as a suggestion: `32 or 34`, `2`.
fn multiples_near(n: usize, replicas: usize) -> String {
    let below = n - n % replicas;
    let above = below + replicas;
    if below == 0 {
        above.to_string()
    } else {
        format!("{below} or {above}")
    }
}

// ---- graph side ------------------------------------------------------------------------

/// The step's random key made distinct per replica (its second word offset by the replica
/// id), so dropout masks differ between replicas as their samples do. Replica 0 keeps the
/// key unchanged.
pub(crate) fn replica_key(g: &mut Graph, key: Value) -> Result<Value> {
    let id = g.replica_id();
    let spread = g.constant(Tensor::scalar(0x2545_F491i32));
    let word = g.mul(id, spread)?;
    let word = g.reshape(word, [1usize])?;
    let zero = g.constant(Tensor::from_vec(&[1], vec![0i32])?);
    let offset = g.concatenate(&[zero, word], 0)?;
    g.add(key, offset)
}

/// One replica's share of the global mean loss: `Σ loss · weight` over its rows, divided
/// by the global batch.
fn local_loss(
    g: &mut Graph,
    t: &TrainState,
    y: Value,
    pred: Value,
    logits: Option<Value>,
    sw: Value,
    d: Dist,
) -> Result<Value> {
    let per = t.loss.per_sample(g, y, pred, logits)?;
    let weighted = g.mul(per, sw)?;
    let total = g.sum_all(weighted)?;
    g.mul_scalar(total, 1.0 / d.global as f64)
}

/// Each metric's state increment from this replica's rows, in metric-state order: the
/// metric's update from a zero state (every metric state is a running sum).
fn metric_increments(
    g: &mut Graph,
    metrics: &[Box<dyn Metric>],
    layout: &Layout,
    cur: &[Value],
    y: Value,
    pred: Value,
    sw: Value,
) -> Result<Vec<Value>> {
    let mut incs = Vec::new();
    for (m, r) in metrics.iter().zip(&layout.metric_ranges) {
        let zeros = cur[r.clone()]
            .iter()
            .map(|&v| g.zeros_like(v))
            .collect::<Result<Vec<_>>>()?;
        incs.extend(m.update(g, &zeros, y, pred, sw)?);
    }
    Ok(incs)
}

/// Sums every value over the replicas with one all-reduce: f32 values are flattened into
/// one vector (one barrier on the native backend, one collective on XLA), others go alone.
/// Over one replica the sum is the value itself.
fn all_reduce_all(g: &mut Graph, values: &[Value], d: Dist) -> Result<Vec<Value>> {
    if d.replicas == 1 {
        return Ok(values.to_vec());
    }
    let packable: Vec<usize> = (0..values.len())
        .filter(|&i| g.ty(values[i]).dtype == DType::F32)
        .collect();
    let mut out: Vec<Option<Value>> = vec![None; values.len()];
    if packable.len() > 1 {
        let flat = packable
            .iter()
            .map(|&i| {
                let n = g.ty(values[i]).numel();
                g.reshape(values[i], [n])
            })
            .collect::<Result<Vec<_>>>()?;
        let packed = g.concatenate(&flat, 0)?;
        let summed = g.all_reduce_sum(packed)?;
        let mut at = 0;
        for &i in &packable {
            let ty = g.ty(values[i]).clone();
            let n = ty.numel();
            let part = g.slice(summed, &[at], &[at + n], &[1])?;
            out[i] = Some(g.reshape(part, ty.shape.clone())?);
            at += n;
        }
    }
    values
        .iter()
        .zip(out)
        .map(|(&v, o)| match o {
            Some(o) => Ok(o),
            None => g.all_reduce_sum(v),
        })
        .collect()
}

/// The loss tracker and metric state after a step, from the all-reduced global loss and
/// metric increments.
fn apply_reduced(
    g: &mut Graph,
    layout: &Layout,
    new: &mut [Value],
    loss: Value,
    incs: &[Value],
    d: Dist,
) -> Result<()> {
    let ms = layout.metric_state.start;
    let lb = g.mul_scalar(loss, d.global as f64)?;
    new[ms] = g.add(new[ms], lb)?;
    new[ms + 1] = g.add_scalar(new[ms + 1], d.global as f64)?;
    let first = layout.metric_ranges.first().map_or(ms + 2, |r| r.start);
    for (k, &inc) in incs.iter().enumerate() {
        new[first + k] = g.add(new[first + k], inc)?;
    }
    Ok(())
}

/// What a replicated train step agrees on across replicas.
pub(crate) struct Reduced {
    /// The global batch's mean loss.
    pub loss: Value,
    /// The global gradients of the trainable parameters.
    pub grads: Vec<Value>,
    /// State updates (BatchNormalization's moving statistics), averaged over replicas.
    pub updates: Vec<(Value, Value)>,
}

/// One replica's train step up to the optimizer: its share of the loss, its gradients,
/// metric increments and state updates, all summed over replicas in one all-reduce; the
/// loss tracker and metrics in `new` are advanced by the global increments.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce_train_step(
    g: &mut Graph,
    t: &TrainState,
    layout: &Layout,
    new: &mut [Value],
    (y, pred, logits, sw): (Value, Value, Option<Value>, Value),
    trainable: &[Value],
    updates: &[(Value, Value)],
    d: Dist,
) -> Result<Reduced> {
    let local = local_loss(g, t, y, pred, logits, sw, d)?;
    let one = g.scalar(1.0, DType::F32);
    let grads = autodiff::vjp(g, &[local], &[one], trainable)?;
    let incs = metric_increments(g, &t.metrics, layout, new, y, pred, sw)?;
    let mut packed = vec![local];
    packed.extend(&incs);
    packed.extend(&grads);
    packed.extend(updates.iter().map(|&(_, v)| v));
    let summed = all_reduce_all(g, &packed, d)?;
    let (loss, rest) = (summed[0], &summed[1..]);
    let (incs_sum, rest) = rest.split_at(incs.len());
    let (grads_sum, updates_sum) = rest.split_at(grads.len());
    apply_reduced(g, layout, new, loss, incs_sum, d)?;
    let mean = 1.0 / d.replicas as f64;
    let updates = updates
        .iter()
        .zip(updates_sum)
        .map(|(&(p, _), &s)| Ok((p, g.mul_scalar(s, mean)?)))
        .collect::<Result<Vec<_>>>()?;
    Ok(Reduced {
        loss,
        grads: grads_sum.to_vec(),
        updates,
    })
}

/// One replica's evaluation step: the loss tracker and metrics in `cur` advanced by the
/// increments of every replica's rows.
pub(crate) fn reduce_eval_step(
    g: &mut Graph,
    t: &TrainState,
    layout: &Layout,
    cur: &mut [Value],
    (y, pred, logits, sw): (Value, Value, Option<Value>, Value),
    d: Dist,
) -> Result<()> {
    let local = local_loss(g, t, y, pred, logits, sw, d)?;
    let incs = metric_increments(g, &t.metrics, layout, cur, y, pred, sw)?;
    let mut packed = vec![local];
    packed.extend(&incs);
    let summed = all_reduce_all(g, &packed, d)?;
    apply_reduced(g, layout, cur, summed[0], &summed[1..], d)
}

// ---- host side -------------------------------------------------------------------------

impl<A: Architecture> Model<A> {
    /// The number of data-parallel replicas this model's graphs run as, under a strategy
    /// that replicates them.
    pub(crate) fn replicas(&self) -> Option<usize> {
        // A device STRATA_DEVICE names is opened as one device, so before it is opened
        // the answer is already known.
        self.placement.ready().and_then(|b| b.replicas())
    }

    /// How a global batch of `global` samples splits over this model's replicas (`None`
    /// when the model runs on one device).
    pub(crate) fn dist(&self, what: &str, global: usize, pad: bool) -> Result<Option<Dist>> {
        self.replicas()
            .map(|n| Dist::new(what, n, global, pad))
            .transpose()
    }

    /// Each replica's copy of the weights (`[replica][parameter]`, as
    /// [`weights`](Model::weights) names them), read from the devices. Under a strategy
    /// every replica's copy is the same, bit for bit; without one there is one copy.
    pub fn weights_per_replica(&mut self) -> Result<Vec<Vec<(String, Tensor)>>> {
        let replicas = self.replicas();
        let runner = self.train.as_ref().and_then(|t| t.runner.as_ref());
        let (Some(n), Some(r)) = (replicas, runner) else {
            self.sync_weights()?;
            return Ok(vec![self.weights()]);
        };
        let names: Vec<String> = self.params().iter().map(|p| p.name.clone()).collect();
        let mut out = vec![Vec::with_capacity(names.len()); n];
        for (i, name) in names.iter().enumerate() {
            for (r, t) in r.param_per_replica(i)?.into_iter().enumerate() {
                out[r].push((name.clone(), t));
            }
        }
        Ok(out)
    }

    /// Checks before training that every batch of `n` samples in batches of `batch` (the
    /// full ones and the partial last one) splits over the replicas, so an uneven batch
    /// is refused before any step runs rather than at the end of the first epoch.
    pub(crate) fn check_replica_split(
        &self,
        what: &str,
        n: usize,
        batch: usize,
        pad: bool,
    ) -> Result<()> {
        let Some(replicas) = self.replicas() else {
            return Ok(());
        };
        if pad || replicas == 0 || batch == 0 {
            return Ok(());
        }
        let fail = |message: String| Err(Error::invalid(what, message));
        let pad_hint = "Fit::pad_to_replicas(true) to pad it with zero-weight samples";
        if n < batch && !n.is_multiple_of(replicas) {
            return fail(format!(
                "{n} samples with batch_size {batch} make one batch of {n}, which does not \
                 split evenly over {replicas} replicas: expected a sample count that is a \
                 multiple of {replicas} (such as {}), or {pad_hint}",
                multiples_near(n, replicas)
            ));
        }
        if n >= batch && !batch.is_multiple_of(replicas) {
            return fail(format!(
                "batch_size {batch} does not split evenly over {replicas} replicas (each \
                 replica trains on an equal share of every batch): expected a multiple of \
                 {replicas} (such as {}), or {pad_hint}",
                multiples_near(batch, replicas)
            ));
        }
        let last = n % batch;
        if n > batch && !last.is_multiple_of(replicas) {
            return fail(format!(
                "{n} samples in batches of {batch} leave a last batch of {last}, which does \
                 not split evenly over {replicas} replicas: expected a sample count whose last \
                 batch is a multiple of {replicas} (such as {}), {pad_hint}, or a Dataset \
                 with drop_remainder(true) to leave it out",
                n - last % replicas
            ));
        }
        Ok(())
    }
}

/// The source row of each of replica `r`'s rows, for `k` global batches stacked in one
/// tensor: for step `s`, the global batch's rows `[r·local, (r+1)·local)`, rows past its
/// end (padding) repeating its last sample. The flag says whether the row is real.
fn replica_rows(k: usize, d: Dist, r: usize) -> impl Iterator<Item = (usize, bool)> {
    (0..k).flat_map(move |s| {
        (r * d.local..(r + 1) * d.local)
            .map(move |j| (s * d.global + j.min(d.global - 1), j < d.global))
    })
}

/// Each replica's source rows in a tensor stacking `k` global batches of `d.global` rows.
pub(crate) fn shard_rows(k: usize, d: Dist) -> Vec<Vec<usize>> {
    (0..d.replicas)
        .map(|r| replica_rows(k, d, r).map(|(i, _)| i).collect())
        .collect()
}

/// Each replica's rows of `t`, which stacks `k` global batches of `d.global` rows.
#[cfg(test)]
fn shard(t: &Tensor, k: usize, d: Dist) -> Result<Vec<Tensor>> {
    shard_rows(k, d)
        .iter()
        .map(|rows| {
            let mut dims = t.dims().to_vec();
            dims[0] = rows.len();
            let mut out = Tensor::zeros(&TensorType::new(t.dtype(), dims))?;
            gather_rows(t, rows, &mut out)?;
            Ok(out)
        })
        .collect()
}

/// Each replica's sample weights: as [`shard`], with padding rows weighing 0.
pub(crate) fn shard_weights(sw: &[f32], k: usize, d: Dist) -> Result<Vec<Tensor>> {
    if sw.len() != k * d.global {
        return Err(Error::invalid(
            "shard",
            format!("expected {} sample weights, got {}", k * d.global, sw.len()),
        ));
    }
    (0..d.replicas)
        .map(|r| {
            let w: Vec<f32> = replica_rows(k, d, r)
                .map(|(i, real)| if real { sw[i] } else { 0.0 })
                .collect();
            Tensor::from_vec(&[w.len()], w)
        })
        .collect()
}

/// The rows of every replica's output for `k` global batches split as `d` says
/// (`parts[r]` holds replica `r`'s `local` rows of each batch in turn), put back in the
/// order of the samples without the padding: `k · global` rows.
pub(crate) fn gather_outputs(parts: &[Tensor], k: usize, d: Dist) -> Result<Tensor> {
    let first = parts
        .first()
        .ok_or_else(|| Error::invalid("predict", "no replica outputs"))?;
    let total: usize = parts.iter().map(|p| p.dims()[0]).sum();
    if parts.len() != d.replicas || total != k * d.replicas * d.local {
        return Err(Error::invalid(
            "predict",
            format!(
                "{} replicas returned {total} rows, expected {} replicas of {} rows",
                parts.len(),
                d.replicas,
                k * d.local
            ),
        ));
    }
    let mut dims = first.dims().to_vec();
    dims[0] = total;
    let mut all = Tensor::zeros(&TensorType::new(first.dtype(), dims.clone()))?;
    // Where in `all` each sample's row is.
    let mut from = vec![0; k * d.global];
    let mut at = 0;
    for (r, p) in parts.iter().enumerate() {
        crate::data::copy_rows_into(p, &mut all, at)?;
        for (pos, (i, real)) in replica_rows(k, d, r).enumerate() {
            if real {
                from[i] = at + pos;
            }
        }
        at += p.dims()[0];
    }
    dims[0] = k * d.global;
    let mut out = Tensor::zeros(&TensorType::new(first.dtype(), dims))?;
    gather_rows(&all, &from, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_split_per_step_and_padded_with_the_last_sample() {
        let d = Dist::new("t", 2, 3, true).unwrap();
        assert_eq!(d.local, 2);
        // Two steps of three rows: replica 0 gets rows 0,1 and 3,4; replica 1 gets 2,(2)
        // and 5,(5), the repeats weighing nothing.
        let r0: Vec<_> = replica_rows(2, d, 0).collect();
        let r1: Vec<_> = replica_rows(2, d, 1).collect();
        assert_eq!(r0, [(0, true), (1, true), (3, true), (4, true)]);
        assert_eq!(r1, [(2, true), (2, false), (5, true), (5, false)]);
        assert!(Dist::new("t", 2, 3, false).is_err());
        let w = shard_weights(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2, d).unwrap();
        assert_eq!(w[1].to_vec::<f32>().unwrap(), [3.0, 0.0, 6.0, 0.0]);
        let x = Tensor::from_vec(&[6, 1], vec![0f32, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        let s = shard(&x, 2, d).unwrap();
        assert_eq!(s[0].to_vec::<f32>().unwrap(), [0.0, 1.0, 3.0, 4.0]);
        assert_eq!(s[1].to_vec::<f32>().unwrap(), [2.0, 2.0, 5.0, 5.0]);
        let back = gather_outputs(&[s[0].clone(), s[1].clone()], 2, d).unwrap();
        assert_eq!(
            back.to_vec::<f32>().unwrap(),
            [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        );
    }
}
