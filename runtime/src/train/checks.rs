//! Checks of what `fit`, `evaluate` and `predict` are given, before anything runs.

pub(crate) use crate::data::check_pair;
use crate::data::gather_rows;
use crate::ir::{DType, TensorType};
use crate::nn::Architecture;
use crate::Model;
use crate::{Error, Result, Tensor};

/// Every row of `t` from `range`, as a new tensor.
pub(crate) fn take_rows(t: &Tensor, range: std::ops::Range<usize>) -> Result<Tensor> {
    let idx: Vec<usize> = range.collect();
    let mut dims = t.dims().to_vec();
    dims[0] = idx.len();
    let mut out = Tensor::zeros(&TensorType::new(t.dtype(), dims))?;
    gather_rows(t, &idx, &mut out)?;
    Ok(out)
}

impl<A: Architecture> Model<A> {
    /// Checks inputs against the model (building it from their shape if needed).
    pub(crate) fn check_inputs(&mut self, what: &str, x: &Tensor) -> Result<()> {
        if !self.is_built() {
            self.build(x.dims().get(1..).unwrap_or(&[]))?;
        }
        self.check_built_inputs(what, x)
    }

    /// Checks inputs against a built model (`&self` calls cannot build one).
    pub(crate) fn check_built_inputs(&self, what: &str, x: &Tensor) -> Result<()> {
        if !self.is_built() {
            if let Some(declared) = self.arch().input_shapes() {
                // The declared input was built at creation and failed: say why again.
                self.initial_state(&declared)?;
                return Err(Error::invalid(
                    what,
                    format!(
                        "model `{}` is not built (building it for its declared input {:?} \
                         failed earlier); call build(&{:?}) and handle its error",
                        self.name(),
                        declared,
                        declared
                    ),
                ));
            }
            return Err(Error::invalid(
                what,
                format!(
                    "model `{}` is not built: its input shape is not declared (Input(...) or \
                     input_shape) and no data has fixed it yet; call build(&{:?}) (the shape \
                     of one sample of these inputs), compile and fit, or declare the input",
                    self.name(),
                    x.dims().get(1..).unwrap_or(&[])
                ),
            ));
        }
        let sample = x.dims().get(1..).unwrap_or(&[]);
        let want = self.input_shape().unwrap_or(&[]).to_vec();
        if sample != want.as_slice() {
            return Err(Error::InputShape {
                what: what.into(),
                expected: std::iter::once(None)
                    .chain(want.into_iter().map(Some))
                    .collect(),
                got: x.dims().to_vec(),
            });
        }
        if x.dtype() != self.input_dtype() {
            return Err(Error::DType {
                what: format!("{what} inputs"),
                expected: self.input_dtype(),
                got: x.dtype(),
            });
        }
        Ok(())
    }

    /// Checks targets against the loss, the metrics and the model's predictions.
    pub(crate) fn check_targets(&self, what: &str, y: &Tensor, n: usize) -> Result<()> {
        let t = self.compiled()?;
        let mut pred = vec![n];
        pred.extend_from_slice(self.output_shape().unwrap_or(&[]));
        let want = t.loss.target_dtype();
        if y.dtype() != want && !(want == DType::I32 && y.dtype() == DType::I64) {
            return Err(Error::DType {
                what: format!("{what} targets for {}", t.loss.name()),
                expected: want,
                got: y.dtype(),
            });
        }
        t.loss
            .check(&y.ty(), &TensorType::new(DType::F32, pred.clone()))?;
        t.loss.check_values(y, &pred)?;
        for m in &t.metrics {
            m.check_values(y, &pred)?;
        }
        Ok(())
    }
}

/// Multiplies each sample's weight by its class's weight (integer labels, or the argmax
/// of one-hot targets). Classes missing from the map weigh 1, as in Keras.
pub(crate) fn apply_class_weight(
    cw: &std::collections::HashMap<i64, f32>,
    y: &Tensor,
    sw: &mut [f32],
) -> Result<()> {
    let labels: Vec<i64> = match y {
        Tensor::I32(a) => a.iter().map(|&v| v as i64).collect(),
        Tensor::I64(a) => a.iter().copied().collect(),
        Tensor::F32(a) if a.ndim() == 2 => a
            .outer_iter()
            .map(|row| {
                row.iter()
                    .enumerate()
                    .fold((0usize, f32::NEG_INFINITY), |(bi, bv), (i, &v)| {
                        if v > bv {
                            (i, v)
                        } else {
                            (bi, bv)
                        }
                    })
                    .0 as i64
            })
            .collect(),
        t => {
            return Err(Error::invalid(
                "fit class_weight",
                format!("needs integer labels or one-hot targets, got {}", t.ty()),
            ))
        }
    };
    if labels.len() != sw.len() {
        return Err(Error::invalid(
            "fit class_weight",
            "integer labels must have one entry per sample",
        ));
    }
    for (w, l) in sw.iter_mut().zip(labels) {
        *w *= cw.get(&l).copied().unwrap_or(1.0);
    }
    Ok(())
}
