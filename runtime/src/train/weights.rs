//! The weights in and out of a model: by name, and (with the checkpoints) to files.

use crate::nn::Architecture;
use crate::Model;
use crate::{Error, Result, Tensor};

impl<A: Architecture> Model<A> {
    /// `(name, value)` of every parameter.
    pub fn weights(&self) -> Vec<(String, Tensor)> {
        self.params()
            .iter()
            .zip(&self.weights)
            .map(|(p, w)| (p.name.clone(), w.clone()))
            .collect()
    }

    /// Replaces the weights; every name must be a parameter and every shape must match.
    pub fn set_weights(&mut self, weights: &[(String, Tensor)]) -> Result<()> {
        let built = self.built.as_ref().ok_or_else(|| {
            Error::invalid("set_weights", "the model is not built yet (no input shape)")
        })?;
        let mut new = self.weights.clone();
        for (name, t) in weights {
            let i = built
                .params
                .iter()
                .position(|p| &p.name == name)
                .ok_or_else(|| {
                    Error::invalid(
                        "set_weights",
                        format!("the model has no parameter `{name}`"),
                    )
                })?;
            if t.ty() != built.params[i].ty() {
                return Err(Error::invalid(
                    "set_weights",
                    format!(
                        "`{name}` is {} but {} was given",
                        built.params[i].ty(),
                        t.ty()
                    ),
                ));
            }
            new[i] = t.clone();
        }
        self.weights = new.into();
        if let Some(t) = &mut self.train {
            t.upload_weights(&self.weights)?;
        }
        Ok(())
    }
}
