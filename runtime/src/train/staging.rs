//! The host side of a train call's inputs beyond its stacked batches (`data::Groups`):
//! their sample weights and the steps' learning rates, in tensors kept from call to call.

use super::spares::Spares;
use crate::data::Batch;
use crate::ir::TensorType;
use crate::{Error, Result, Tensor};

/// The type of `t` with `n` rows.
pub(crate) fn with_rows(t: &TensorType, n: usize) -> TensorType {
    let mut dims = t.dims().to_vec();
    dims[0] = n;
    TensorType::new(t.dtype, dims)
}

/// Host-side inputs of one call beyond its stacked batches (their sample weights and the
/// steps' learning rates), kept from call to call so their memory is reused; those of
/// another size (the partial last call's) wait in `spare`.
#[derive(Default)]
pub(crate) struct Staging {
    sw: Tensor,
    lr: Tensor,
    spare: Spares<Tensor>,
}

impl Staging {
    pub fn fill(&mut self, group: &Batch) -> Result<()> {
        let rows = group.x.dims().first().copied().unwrap_or(0);
        refit(&mut self.sw, rows, &mut self.spare)?;
        let Tensor::F32(sw) = &mut self.sw else {
            unreachable!("refit makes f32")
        };
        let dst = sw.as_slice_mut().unwrap_or(&mut []);
        match &group.sample_weight {
            Some(t) => {
                let w = t.array::<f32>()?;
                let w = w.as_slice().unwrap_or(&[]);
                if w.len() != dst.len() {
                    return Err(Error::invalid(
                        "fit",
                        format!("{} sample weights for {} samples", w.len(), dst.len()),
                    ));
                }
                dst.copy_from_slice(w);
            }
            None => dst.fill(1.0),
        }
        Ok(())
    }

    /// A call's inputs `x`, `y`, `sw`, `lr` over `group` (as filled).
    pub fn inputs<'a>(&'a mut self, group: &'a mut Batch) -> [&'a mut Tensor; 4] {
        [&mut group.x, &mut group.y, &mut self.sw, &mut self.lr]
    }

    pub fn set_lr(&mut self, k: usize, lr: impl Fn(usize) -> f32) -> Result<()> {
        refit(&mut self.lr, k, &mut self.spare)?;
        if let Tensor::F32(a) = &mut self.lr {
            for (i, v) in a.iter_mut().enumerate() {
                *v = lr(i);
            }
        }
        Ok(())
    }
}

/// Makes `t` an f32 vector of `n` elements: itself when it already is one, else a kept one.
fn refit(t: &mut Tensor, n: usize, spare: &mut Spares<Tensor>) -> Result<()> {
    spare.fit(
        t,
        |t| matches!(t, Tensor::F32(a) if a.ndim() == 1 && a.len() == n),
        || Tensor::zeros(&TensorType::new(crate::ir::DType::F32, [n])),
    )
}
