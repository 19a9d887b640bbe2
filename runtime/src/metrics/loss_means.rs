//! Metrics that are the weighted mean of a loss's per-sample value (Keras'
//! `MeanMetricWrapper` around a loss function). Each builds the loss it averages and
//! reuses its `per_sample`, so a metric and its loss cannot drift apart.

use super::{mean_update, ratio, Metric};
use crate::ir::{Graph, Value};
use crate::loss::{self, Loss};
use crate::Result;

/// The update every metric here shares: `sign · loss.per_sample`, weighted into the mean.
fn loss_mean_update(
    g: &mut Graph,
    state: &[Value],
    loss: &dyn Loss,
    sign: f64,
    y: Value,
    p: Value,
    sw: Value,
) -> Result<Vec<Value>> {
    loss.check(&g.ty(y).clone(), &g.ty(p).clone())?;
    let v = loss.per_sample(g, y, p, None)?;
    let v = if sign < 0.0 { g.neg(v)? } else { v };
    mean_update(g, state, v, sw)
}

/// Implements [`Metric`] for a struct whose `loss()` gives the loss it averages.
macro_rules! loss_mean_metric {
    ($ty:ident, $name:literal, sign = $sign:expr) => {
        impl Metric for $ty {
            fn name(&self) -> String {
                $name.into()
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
                loss_mean_update(g, state, &self.loss(), $sign, y, p, sw)
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

/// Declares a metric without arguments averaging the loss `$loss`.
macro_rules! plain_loss_mean {
    ($(#[$doc:meta])* $ty:ident, $name:literal, $loss:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default)]
        pub struct $ty;

        impl $ty {
            fn loss(&self) -> impl Loss {
                $loss
            }
        }

        loss_mean_metric!($ty, $name, sign = 1.0);
    };
}

plain_loss_mean!(
    /// The mean of [`loss::MeanSquaredError`].
    MeanSquaredError,
    "mean_squared_error",
    loss::MeanSquaredError
);
plain_loss_mean!(
    /// The mean of [`loss::MeanAbsoluteError`].
    MeanAbsoluteError,
    "mean_absolute_error",
    loss::MeanAbsoluteError
);
plain_loss_mean!(
    /// The mean of [`loss::MeanAbsolutePercentageError`].
    MeanAbsolutePercentageError,
    "mean_absolute_percentage_error",
    loss::MeanAbsolutePercentageError
);
plain_loss_mean!(
    /// The mean of [`loss::MeanSquaredLogarithmicError`].
    MeanSquaredLogarithmicError,
    "mean_squared_logarithmic_error",
    loss::MeanSquaredLogarithmicError
);
plain_loss_mean!(
    /// The mean of [`loss::LogCosh`] (Keras' `LogCoshError`, logged as `logcosh`).
    LogCoshError,
    "logcosh",
    loss::LogCosh
);
plain_loss_mean!(
    /// The mean of [`loss::Poisson`].
    Poisson,
    "poisson",
    loss::Poisson
);
plain_loss_mean!(
    /// The mean of [`loss::KLDivergence`].
    KLDivergence,
    "kl_divergence",
    loss::KLDivergence
);
plain_loss_mean!(
    /// The mean of [`loss::Hinge`].
    Hinge,
    "hinge",
    loss::Hinge
);
plain_loss_mean!(
    /// The mean of [`loss::SquaredHinge`].
    SquaredHinge,
    "squared_hinge",
    loss::SquaredHinge
);
plain_loss_mean!(
    /// The mean of [`loss::CategoricalHinge`].
    CategoricalHinge,
    "categorical_hinge",
    loss::CategoricalHinge
);

/// The mean cosine similarity along `axis`: +1 for equal directions. Keras' metric has
/// the opposite sign of its loss ([`loss::CosineSimilarity`]), which is minimised.
#[derive(Clone, Debug)]
pub struct CosineSimilarity {
    pub axis: i64,
}

impl Default for CosineSimilarity {
    fn default() -> Self {
        CosineSimilarity { axis: -1 }
    }
}

impl CosineSimilarity {
    fn loss(&self) -> impl Loss {
        loss::CosineSimilarity { axis: self.axis }
    }
}

loss_mean_metric!(CosineSimilarity, "cosine_similarity", sign = -1.0);

/// The mean of [`loss::BinaryCrossentropy`].
#[derive(Clone, Debug, Default)]
pub struct BinaryCrossentropy {
    pub from_logits: bool,
    pub label_smoothing: f32,
}

impl BinaryCrossentropy {
    fn loss(&self) -> impl Loss {
        loss::BinaryCrossentropy {
            from_logits: self.from_logits,
            label_smoothing: self.label_smoothing,
        }
    }
}

loss_mean_metric!(BinaryCrossentropy, "binary_crossentropy", sign = 1.0);

/// The mean of [`loss::CategoricalCrossentropy`].
#[derive(Clone, Debug, Default)]
pub struct CategoricalCrossentropy {
    pub from_logits: bool,
    pub label_smoothing: f32,
}

impl CategoricalCrossentropy {
    fn loss(&self) -> impl Loss {
        loss::CategoricalCrossentropy {
            from_logits: self.from_logits,
            label_smoothing: self.label_smoothing,
        }
    }
}

loss_mean_metric!(
    CategoricalCrossentropy,
    "categorical_crossentropy",
    sign = 1.0
);

/// The mean of [`loss::SparseCategoricalCrossentropy`] (integer labels).
#[derive(Clone, Debug, Default)]
pub struct SparseCategoricalCrossentropy {
    pub from_logits: bool,
}

impl SparseCategoricalCrossentropy {
    fn loss(&self) -> impl Loss {
        loss::SparseCategoricalCrossentropy {
            from_logits: self.from_logits,
        }
    }
}

loss_mean_metric!(
    SparseCategoricalCrossentropy,
    "sparse_categorical_crossentropy",
    sign = 1.0
);
