//! Keras' `TopKCategoricalAccuracy` and `SparseTopKCategoricalAccuracy` (`k` defaults to
//! 5), over the shared [`TopKAccuracy`].

use super::{Metric, TopKAccuracy};
use crate::ir::{Graph, Value};
use crate::loss::Loss;
use crate::{Error, Result};

macro_rules! top_k_metric {
    ($(#[$doc:meta])* $ty:ident, $keras:literal, $sparse:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $ty {
            pub k: usize,
        }

        impl Default for $ty {
            fn default() -> Self {
                $ty { k: 5 }
            }
        }

        impl $ty {
            pub fn new(k: usize) -> $ty {
                $ty { k }
            }

            fn inner(&self) -> Result<TopKAccuracy> {
                if self.k == 0 {
                    return Err(Error::invalid($keras, "k must be >= 1, got 0"));
                }
                Ok(TopKAccuracy {
                    k: self.k,
                    sparse: $sparse,
                })
            }
        }

        impl Metric for $ty {
            fn name(&self) -> String {
                TopKAccuracy {
                    k: self.k,
                    sparse: $sparse,
                }
                .name()
            }
            fn state(&self) -> Vec<Vec<usize>> {
                vec![vec![], vec![]]
            }
            fn build(&mut self, _output: &[usize]) -> Result<()> {
                self.inner().map(|_| ())
            }
            fn update(
                &self,
                g: &mut Graph,
                state: &[Value],
                y: Value,
                p: Value,
                sw: Value,
            ) -> Result<Vec<Value>> {
                self.inner()?.update(g, state, y, p, sw)
            }
            fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value> {
                self.inner()?.result(g, state)
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

top_k_metric!(
    /// How often the argmax of the one-hot target is among the `k` highest predictions.
    /// Logged as `top_k_categorical_accuracy`.
    TopKCategoricalAccuracy, "TopKCategoricalAccuracy", false
);
top_k_metric!(
    /// How often the integer label is among the `k` highest predictions. Logged as
    /// `sparse_top_k_categorical_accuracy`.
    SparseTopKCategoricalAccuracy, "SparseTopKCategoricalAccuracy", true
);
