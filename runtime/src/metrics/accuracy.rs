//! Mean metrics over per-sample values: the accuracies, and Keras' generic `"accuracy"`
//! that the loss resolves.

use super::{argmax_last, mean_update, ratio, Metric};
use crate::ir::{Comparison, DType, Graph, Value};
use crate::loss::Loss;
use crate::Result;

macro_rules! mean_metric {
    ($(#[$doc:meta])* $ty:ident, $name:literal, |$g:ident, $y:ident, $p:ident| $value:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default)]
        pub struct $ty;

        impl Metric for $ty {
            fn name(&self) -> String {
                $name.into()
            }
            fn state(&self) -> Vec<Vec<usize>> {
                vec![vec![], vec![]]
            }
            fn update(&self, $g: &mut Graph, state: &[Value], $y: Value, $p: Value, sw: Value) -> Result<Vec<Value>> {
                let v = $value;
                mean_update($g, state, v, sw)
            }
            fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value> {
                ratio(g, state[0], state[1])
            }
            fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric> {
                self
            }
            fn clone_box(&self) -> Box<dyn Metric> {
                Box::new(self.clone())
            }
        }
    };
}

mean_metric!(
    /// How often the predicted class (argmax) equals the integer label.
    SparseCategoricalAccuracy, "sparse_categorical_accuracy", |g, y, p| {
        let lead: Vec<usize> = g.ty(p).dims()[..g.ty(p).rank() - 1].to_vec();
        let y = g.reshape(y, lead)?;
        let yf = g.convert(y, DType::F32)?;
        let am = argmax_last(g, p)?;
        let hit = g.compare(Comparison::Eq, am, yf)?;
        g.convert(hit, DType::F32)?
    }
);
mean_metric!(
    /// How often the predicted class equals the argmax of the one-hot target.
    CategoricalAccuracy, "categorical_accuracy", |g, y, p| {
        let a = argmax_last(g, y)?;
        let b = argmax_last(g, p)?;
        let hit = g.compare(Comparison::Eq, a, b)?;
        g.convert(hit, DType::F32)?
    }
);
mean_metric!(
    /// How often `pred > 0.5` equals the 0/1 target, per element.
    BinaryAccuracy, "binary_accuracy", |g, y, p| {
        let t = g.full_like(0.5, p)?;
        let ph = g.compare(Comparison::Gt, p, t)?;
        let ph = g.convert(ph, DType::F32)?;
        let hit = g.compare(Comparison::Eq, ph, y)?;
        g.convert(hit, DType::F32)?
    }
);
/// Keras' `"accuracy"`: becomes sparse categorical, categorical or binary accuracy
/// according to the loss; next to another loss, exact equality of target and prediction.
#[derive(Clone, Debug, Default)]
pub struct Accuracy;

impl Metric for Accuracy {
    fn name(&self) -> String {
        "accuracy".into()
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
        let hit = g.compare(Comparison::Eq, y, p)?;
        let v = g.convert(hit, DType::F32)?;
        mean_update(g, state, v, sw)
    }
    fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value> {
        ratio(g, state[0], state[1])
    }
    fn resolve(self: Box<Self>, loss: &dyn Loss) -> Box<dyn Metric> {
        let inner: Box<dyn Metric> = match loss.name() {
            "sparse_categorical_crossentropy" => Box::new(SparseCategoricalAccuracy),
            "categorical_crossentropy" => Box::new(CategoricalAccuracy),
            "binary_crossentropy" => Box::new(BinaryAccuracy),
            _ => return self,
        };
        Box::new(Renamed {
            name: "accuracy".into(),
            inner,
        })
    }
    fn clone_box(&self) -> Box<dyn Metric> {
        Box::new(self.clone())
    }
}

/// A metric shown under another name (Keras keeps the name the user asked for).
#[derive(Debug)]
struct Renamed {
    name: String,
    inner: Box<dyn Metric>,
}

impl Metric for Renamed {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn state(&self) -> Vec<Vec<usize>> {
        self.inner.state()
    }
    fn update(
        &self,
        g: &mut Graph,
        s: &[Value],
        y: Value,
        p: Value,
        sw: Value,
    ) -> Result<Vec<Value>> {
        self.inner.update(g, s, y, p, sw)
    }
    fn result(&self, g: &mut Graph, s: &[Value]) -> Result<Value> {
        self.inner.result(g, s)
    }
    fn result_shape(&self) -> Vec<usize> {
        self.inner.result_shape()
    }
    fn build(&mut self, output: &[usize]) -> Result<()> {
        self.inner.build(output)
    }
    fn check_values(&self, target: &crate::Tensor, pred_dims: &[usize]) -> Result<()> {
        self.inner.check_values(target, pred_dims)
    }
    fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric> {
        self
    }
    fn clone_box(&self) -> Box<dyn Metric> {
        Box::new(Renamed {
            name: self.name.clone(),
            inner: self.inner.clone_box(),
        })
    }
}

/// Whether the target class is among the `k` highest predictions. `sparse` targets are
/// integer labels, else one-hot.
#[derive(Clone, Debug)]
pub struct TopKAccuracy {
    pub k: usize,
    pub sparse: bool,
}

impl TopKAccuracy {
    pub fn sparse(k: usize) -> TopKAccuracy {
        TopKAccuracy { k, sparse: true }
    }
    pub fn categorical(k: usize) -> TopKAccuracy {
        TopKAccuracy { k, sparse: false }
    }
}

impl Metric for TopKAccuracy {
    fn name(&self) -> String {
        if self.sparse {
            "sparse_top_k_categorical_accuracy"
        } else {
            "top_k_categorical_accuracy"
        }
        .into()
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
        let pt = g.ty(p).clone();
        let last = pt.rank() - 1;
        let lead: Vec<usize> = pt.dims()[..last].to_vec();
        let label = if self.sparse {
            g.reshape(y, lead.clone())?
        } else {
            let a = argmax_last(g, y)?;
            g.convert(a, DType::I32)?
        };
        // The target is in the top k when fewer than k classes score strictly higher.
        let score = g.gather(p, label, last, last)?;
        let keep: Vec<usize> = (0..last).collect();
        let sb = g.broadcast_in_dim(score, pt.shape.clone(), &keep)?;
        let higher = g.compare(Comparison::Gt, p, sb)?;
        let hf = g.convert(higher, DType::F32)?;
        let n = g.sum(hf, &[last])?;
        let k = g.full_like(self.k as f64, n)?;
        let hit = g.compare(Comparison::Lt, n, k)?;
        let v = g.convert(hit, DType::F32)?;
        mean_update(g, state, v, sw)
    }
    fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value> {
        ratio(g, state[0], state[1])
    }
    fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric> {
        self
    }
    fn clone_box(&self) -> Box<dyn Metric> {
        Box::new(self.clone())
    }
}
