//! The weights in and out of a model: by name, by position, and (with the checkpoints) to
//! files. Every form ends in [`Model::assign_weights`], the one place that checks new values
//! against the parameters and swaps them in.

use crate::nn::Architecture;
use crate::Model;
use crate::{Error, Result, Tensor};
use std::borrow::Cow;

impl<A: Architecture> Model<A> {
    /// `(name, value)` of every parameter.
    pub fn weights(&self) -> Vec<(String, Tensor)> {
        self.params()
            .iter()
            .zip(&self.weights)
            .map(|(p, w)| (p.name.clone(), w.clone()))
            .collect()
    }

    /// Replaces the named weights (any subset); every name must be a parameter and every
    /// value must have its parameter's shape and element type. Nothing changes on an error.
    pub fn set_weights(&mut self, weights: &[(String, Tensor)]) -> Result<()> {
        const WHAT: &str = "set_weights";
        let params = self.built_params(WHAT)?;
        let mut unknown = Vec::new();
        let mut updates = Vec::with_capacity(weights.len());
        for (name, t) in weights {
            match params.iter().position(|p| &p.name == name) {
                Some(i) => updates.push((i, Cow::Borrowed(t))),
                None => unknown.push(name.clone()),
            }
        }
        if !unknown.is_empty() {
            return Err(Error::WeightNames {
                what: WHAT.into(),
                unknown,
                missing: Vec::new(),
                known: params.iter().map(|p| p.name.clone()).collect(),
            });
        }
        self.assign_weights(WHAT, updates)
    }

    /// Replaces every weight by position, in [`weights`](Model::weights) order (Keras'
    /// `set_weights(list)`): one value per parameter, each of its parameter's shape and
    /// element type. Nothing changes on an error.
    ///
    /// ```ignore
    /// model.set_weights_list(&[kernel, bias, kernel_1, bias_1])?;
    /// ```
    pub fn set_weights_list(&mut self, values: &[Tensor]) -> Result<()> {
        const WHAT: &str = "set_weights_list";
        let params = self.built_params(WHAT)?;
        if values.len() != params.len() {
            return Err(Error::WeightCount {
                what: WHAT.into(),
                expected: params.len(),
                got: values.len(),
                names: params.iter().map(|p| p.name.clone()).collect(),
            });
        }
        self.assign_weights(WHAT, values.iter().map(Cow::Borrowed).enumerate().collect())
    }

    fn built_params(&self, what: &str) -> Result<&[crate::nn::ParamSpec]> {
        self.built
            .as_ref()
            .map(|b| b.params.as_slice())
            .ok_or_else(|| Error::invalid(what, "the model is not built yet (no input shape)"))
    }

    /// Checks `(parameter index, new value)` pairs (each index at most once, each value of
    /// its parameter's type), then swaps them in and, when compiled, uploads the weights to
    /// the device. Nothing changes unless every pair is valid. `what` names the caller.
    pub(crate) fn assign_weights(
        &mut self,
        what: &str,
        updates: Vec<(usize, Cow<'_, Tensor>)>,
    ) -> Result<()> {
        let params = self.built_params(what)?;
        let mut new: Vec<Option<Tensor>> = vec![None; params.len()];
        let mut given = vec![false; params.len()];
        for (i, t) in &updates {
            let p = params.get(*i).ok_or_else(|| {
                Error::invalid(what, format!("internal: no parameter number {i}"))
            })?;
            if std::mem::replace(&mut given[*i], true) {
                return Err(Error::invalid(
                    what,
                    format!("parameter `{}` is given more than once", p.name),
                ));
            }
            if t.ty() != p.ty() {
                return Err(Error::WeightType {
                    what: what.into(),
                    name: p.name.clone(),
                    expected: p.ty(),
                    got: t.ty(),
                });
            }
        }
        // Everything checked: only now copy (borrowed values) or move (owned ones).
        for (i, t) in updates {
            new[i] = Some(t.into_owned());
        }
        let weights: Vec<Tensor> = new
            .into_iter()
            .zip(&self.weights)
            .map(|(n, old)| n.unwrap_or_else(|| old.clone()))
            .collect();
        self.weights = weights.into();
        if let Some(t) = &mut self.train {
            t.upload_weights(&self.weights)?;
        }
        Ok(())
    }
}
