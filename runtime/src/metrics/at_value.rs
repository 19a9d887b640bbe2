//! One rate at the thresholds where another reaches a value: `PrecisionAtRecall`,
//! `RecallAtPrecision`, `SensitivityAtSpecificity`, `SpecificityAtSensitivity`.
//!
//! As in Keras: confusion counts at `num_thresholds` evenly spaced thresholds in [0, 1]
//! (0.5 alone when `num_thresholds` is 1), and the result is the largest value of the
//! dependent rate among thresholds where the constrained rate is `>=` the given value,
//! 0 when there is none.

use super::confusion::{confusion, Counting, Grid};
use super::{ratio, Metric};
use crate::ir::{Comparison, Graph, ReduceOp, Value};
use crate::loss::Loss;
use crate::{Error, Result, Tensor};

/// The rates these metrics pick between.
#[derive(Clone, Copy)]
enum Rate {
    /// `tp / (tp + fp)`.
    Precision,
    /// `tp / (tp + fn)`, also the sensitivity.
    Recall,
    /// `tn / (tn + fp)`.
    Specificity,
}

fn rate(g: &mut Graph, s: &[Value], r: Rate) -> Result<Value> {
    let (tp, fp, tn, fn_) = (s[0], s[1], s[2], s[3]);
    let (num, other) = match r {
        Rate::Precision => (tp, fp),
        Rate::Recall => (tp, fn_),
        Rate::Specificity => (tn, fp),
    };
    let d = g.add(num, other)?;
    ratio(g, num, d)
}

/// What the four metrics share.
struct Core<'a> {
    name: &'a str,
    /// The argument the constrained rate is held to, and its Keras name.
    value: f32,
    value_name: &'a str,
    num_thresholds: usize,
    class_id: Option<usize>,
    constrained: Rate,
    dependent: Rate,
}

impl Core<'_> {
    fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.value) {
            return Err(Error::invalid(
                self.name,
                format!("{} must be in [0, 1], got {}", self.value_name, self.value),
            ));
        }
        if self.num_thresholds == 0 {
            return Err(Error::invalid(
                self.name,
                "num_thresholds must be > 0, got 0",
            ));
        }
        Ok(())
    }

    fn grid(&self) -> Grid {
        let n = self.num_thresholds;
        if n == 1 {
            return Grid {
                thresholds: vec![0.5],
                buckets: None,
            };
        }
        Grid {
            thresholds: (0..n).map(|i| (i as f64 / (n - 1) as f64) as f32).collect(),
            buckets: Some(false),
        }
    }

    fn state(&self) -> Vec<Vec<usize>> {
        let n = if self.validate().is_ok() {
            self.num_thresholds
        } else {
            0
        };
        vec![vec![n]; 4]
    }

    fn update(
        &self,
        g: &mut Graph,
        state: &[Value],
        y: Value,
        p: Value,
        sw: Value,
    ) -> Result<Vec<Value>> {
        self.validate()?;
        let how = Counting {
            class_id: self.class_id,
            ..Counting::new(self.name)
        };
        confusion(g, state, y, p, sw, &self.grid(), &how)
    }

    fn result(&self, g: &mut Graph, s: &[Value]) -> Result<Value> {
        let c = rate(g, s, self.constrained)?;
        let d = rate(g, s, self.dependent)?;
        let v = g.full_like(self.value as f64, c)?;
        let feasible = g.compare(Comparison::Ge, c, v)?;
        let zero = g.zeros_like(d)?;
        let picked = g.select(feasible, d, zero)?;
        let best = g.reduce(ReduceOp::Max, picked, &[0])?;
        let floor = g.zeros_like(best)?;
        g.max(best, floor)
    }
}

macro_rules! at_value_metric {
    ($(#[$doc:meta])* $ty:ident, $name:literal, $field:ident, $constrained:ident, $dependent:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $ty {
            pub $field: f32,
            pub num_thresholds: usize,
            /// Count only this class (index of the predictions' last axis).
            pub class_id: Option<usize>,
        }

        impl $ty {
            /// Keras' defaults: 200 thresholds, every class.
            pub fn new($field: f32) -> $ty {
                $ty {
                    $field,
                    num_thresholds: 200,
                    class_id: None,
                }
            }
            fn core(&self) -> Core<'_> {
                Core {
                    name: $name,
                    value: self.$field,
                    value_name: stringify!($field),
                    num_thresholds: self.num_thresholds,
                    class_id: self.class_id,
                    constrained: Rate::$constrained,
                    dependent: Rate::$dependent,
                }
            }
        }

        impl Metric for $ty {
            fn name(&self) -> String {
                $name.into()
            }
            fn state(&self) -> Vec<Vec<usize>> {
                self.core().state()
            }
            fn update(
                &self,
                g: &mut Graph,
                state: &[Value],
                y: Value,
                p: Value,
                sw: Value,
            ) -> Result<Vec<Value>> {
                self.core().update(g, state, y, p, sw)
            }
            fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value> {
                self.core().result(g, state)
            }
            fn resolve(self: Box<Self>, _loss: &dyn Loss) -> Box<dyn Metric> {
                self
            }
            fn clone_box(&self) -> Box<dyn Metric> {
                Box::new(self.clone())
            }
            fn check_values(&self, _target: &Tensor, _pred_dims: &[usize]) -> Result<()> {
                self.core().validate()
            }
        }
    };
}

at_value_metric!(
    /// The best precision at thresholds where recall is at least `recall`. Keras'
    /// `PrecisionAtRecall`.
    PrecisionAtRecall, "precision_at_recall", recall, Recall, Precision
);
at_value_metric!(
    /// The best recall at thresholds where precision is at least `precision`. Keras'
    /// `RecallAtPrecision`.
    RecallAtPrecision, "recall_at_precision", precision, Precision, Recall
);
at_value_metric!(
    /// The best sensitivity (recall) at thresholds where specificity is at least
    /// `specificity`. Keras' `SensitivityAtSpecificity`.
    SensitivityAtSpecificity, "sensitivity_at_specificity", specificity, Specificity, Recall
);
at_value_metric!(
    /// The best specificity at thresholds where sensitivity (recall) is at least
    /// `sensitivity`. Keras' `SpecificityAtSensitivity`.
    SpecificityAtSensitivity, "specificity_at_sensitivity", sensitivity, Recall, Specificity
);
