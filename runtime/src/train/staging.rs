//! The host side of a train call's inputs: the batches of one call stacked, their sample
//! weights and the steps' learning rates, in tensors kept from call to call.

use super::spares::Spares;
use crate::data::{copy_rows_into, Batch};
use crate::ir::TensorType;
use crate::{Error, Result, Tensor};

/// The type of `t` with `n` rows.
pub(crate) fn with_rows(t: &TensorType, n: usize) -> TensorType {
    let mut dims = t.dims().to_vec();
    dims[0] = n;
    TensorType::new(t.dtype, dims)
}

/// Host-side inputs of one call beyond the batch itself (`k` batches stacked when a call
/// runs several steps), kept from step to step so their memory is reused; those of
/// another size (the partial last call's) wait in `spare`.
#[derive(Default)]
pub(crate) struct Staging {
    x: Tensor,
    y: Tensor,
    sw: Tensor,
    lr: Tensor,
    spare: Spares<Tensor>,
}

impl Staging {
    pub fn fill(&mut self, batches: &[Batch]) -> Result<()> {
        let rows: usize = batches.iter().map(|b| b.x.dims()[0]).sum();
        refit(&mut self.sw, rows, &mut self.spare)?;
        let Tensor::F32(sw) = &mut self.sw else {
            unreachable!("refit makes f32")
        };
        let mut at = 0;
        for b in batches {
            let n = b.x.dims()[0];
            let dst = &mut sw.as_slice_mut().unwrap_or(&mut [])[at..at + n];
            match &b.sample_weight {
                Some(t) => dst.copy_from_slice(t.array::<f32>()?.as_slice().unwrap_or(&[])),
                None => dst.fill(1.0),
            }
            at += n;
        }
        if batches.len() > 1 {
            stack_into(batches.iter().map(|b| &b.x), &mut self.x, &mut self.spare)?;
            stack_into(batches.iter().map(|b| &b.y), &mut self.y, &mut self.spare)?;
        }
        Ok(())
    }

    /// A call's inputs `x`, `y`, `sw`, `lr` over `batches` (as filled): one batch's own
    /// tensors, else the stacked ones.
    pub fn inputs<'a>(&'a mut self, batches: &'a mut [Batch]) -> [&'a mut Tensor; 4] {
        let (x, y) = match batches {
            [one] => (&mut one.x, &mut one.y),
            _ => (&mut self.x, &mut self.y),
        };
        [x, y, &mut self.sw, &mut self.lr]
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

/// Concatenates tensors along the first axis into `out` (reusing it, or a kept tensor,
/// when it fits).
fn stack_into<'a>(
    parts: impl Iterator<Item = &'a Tensor> + Clone,
    out: &mut Tensor,
    spare: &mut Spares<Tensor>,
) -> Result<()> {
    let first = parts
        .clone()
        .next()
        .ok_or_else(|| Error::invalid("fit", "no batches"))?;
    let rows: usize = parts.clone().map(|t| t.dims()[0]).sum();
    // Compared in place: building the type allocates.
    spare.fit(
        out,
        |o| {
            o.dtype() == first.dtype()
                && o.dims().first() == Some(&rows)
                && o.dims().get(1..) == first.dims().get(1..)
        },
        || Tensor::zeros(&with_rows(&first.ty(), rows)),
    )?;
    let mut at = 0;
    for p in parts {
        copy_rows_into(p, out, at)?;
        at += p.dims()[0];
    }
    Ok(())
}
