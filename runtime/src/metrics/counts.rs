//! Keras' weighted confusion counts: `TruePositives`, `FalsePositives`, `TrueNegatives`,
//! `FalseNegatives`, of `pred > threshold` against 0/1 targets, every element counted.

use super::confusion::{confusion, Counting, Grid};
use super::Metric;
use crate::ir::{DType, Graph, Value};
use crate::loss::Loss;
use crate::{Error, Result};

/// The counts share everything but which entry of the confusion state they keep.
macro_rules! count_metric {
    ($(#[$doc:meta])* $ty:ident, $keras:literal, $name:literal, $entry:expr) => {
        $(#[$doc])*
        ///
        /// `thresholds` defaults to `[0.5]`; with one threshold the result is a scalar,
        /// with several a vector, one count per threshold (as Keras returns them).
        #[derive(Clone, Debug)]
        pub struct $ty {
            pub thresholds: Vec<f32>,
        }

        impl Default for $ty {
            fn default() -> Self {
                $ty {
                    thresholds: vec![0.5],
                }
            }
        }

        impl $ty {
            /// Counts at each of `thresholds` (each in `[0, 1]`).
            pub fn new(thresholds: impl Into<Vec<f32>>) -> $ty {
                $ty {
                    thresholds: thresholds.into(),
                }
            }
        }

        impl Metric for $ty {
            fn name(&self) -> String {
                $name.into()
            }
            fn state(&self) -> Vec<Vec<usize>> {
                vec![vec![self.thresholds.len()]]
            }
            fn result_shape(&self) -> Vec<usize> {
                result_shape(&self.thresholds)
            }
            fn build(&mut self, _output: &[usize]) -> Result<()> {
                check_thresholds($keras, &self.thresholds)
            }
            fn update(
                &self,
                g: &mut Graph,
                state: &[Value],
                y: Value,
                p: Value,
                sw: Value,
            ) -> Result<Vec<Value>> {
                count_update(g, $keras, &self.thresholds, $entry, state[0], y, p, sw)
            }
            fn result(&self, g: &mut Graph, state: &[Value]) -> Result<Value> {
                count_result(g, &self.thresholds, state[0])
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

fn check_thresholds(keras: &str, thresholds: &[f32]) -> Result<()> {
    if thresholds.is_empty() {
        return Err(Error::invalid(
            keras,
            "thresholds must hold at least one value in [0, 1], got none",
        ));
    }
    match thresholds.iter().find(|t| !(0.0..=1.0).contains(*t)) {
        Some(t) => Err(Error::invalid(
            keras,
            format!("thresholds must be in [0, 1], got {t}"),
        )),
        None => Ok(()),
    }
}

fn result_shape(thresholds: &[f32]) -> Vec<usize> {
    match thresholds.len() {
        1 => vec![],
        n => vec![n],
    }
}

/// Adds the batch's count (entry `entry` of `confusion`'s `[tp, fp, tn, fn]`) to `acc`.
#[allow(clippy::too_many_arguments)]
fn count_update(
    g: &mut Graph,
    keras: &str,
    thresholds: &[f32],
    entry: usize,
    acc: Value,
    y: Value,
    p: Value,
    sw: Value,
) -> Result<Vec<Value>> {
    check_thresholds(keras, thresholds)?;
    let (yt, pt) = (g.ty(y).clone(), g.ty(p).clone());
    if yt.numel() != pt.numel() || yt.dims().first() != pt.dims().first() {
        return Err(Error::invalid(
            keras,
            format!("targets {yt} and predictions {pt} do not hold the same elements"),
        ));
    }
    let y = if yt.dtype == DType::F32 {
        y
    } else {
        g.convert(y, DType::F32)?
    };
    let p = if pt.dtype == DType::F32 {
        p
    } else {
        g.convert(p, DType::F32)?
    };
    // `confusion` updates all four counts; this metric keeps one (the others are dead
    // code to the compiler).
    // Evenly spaced thresholds are counted by buckets, as Keras does (the results can
    // differ from `p > t` where a prediction falls exactly on a threshold).
    let even: Vec<f64> = thresholds.iter().map(|&t| t as f64).collect();
    let grid = Grid {
        thresholds: thresholds.to_vec(),
        buckets: Grid::evenly_spaced(&even).then_some(false),
    };
    let counts = confusion(g, &[acc; 4], y, p, sw, &grid, &Counting::new(keras))?;
    Ok(vec![counts[entry]])
}

fn count_result(g: &mut Graph, thresholds: &[f32], acc: Value) -> Result<Value> {
    match thresholds.len() {
        1 => g.reshape(acc, []),
        _ => Ok(acc),
    }
}

count_metric!(
    /// Keras' `TruePositives`: the weighted count of positive targets predicted
    /// positive (`pred > threshold`). Logged as `true_positives`.
    TruePositives, "TruePositives", "true_positives", 0
);
count_metric!(
    /// Keras' `FalsePositives`: the weighted count of negative targets predicted
    /// positive. Logged as `false_positives`.
    FalsePositives, "FalsePositives", "false_positives", 1
);
count_metric!(
    /// Keras' `TrueNegatives`: the weighted count of negative targets predicted
    /// negative. Logged as `true_negatives`.
    TrueNegatives, "TrueNegatives", "true_negatives", 2
);
count_metric!(
    /// Keras' `FalseNegatives`: the weighted count of positive targets predicted
    /// negative. Logged as `false_negatives`.
    FalseNegatives, "FalseNegatives", "false_negatives", 3
);
