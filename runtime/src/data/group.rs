//! An epoch's batches taken a call at a time: under `steps_per_execution = k` one train
//! call runs up to `k` batches of one size, stacked along the first axis.
//!
//! From in-memory arrays with no maps, a call's rows are gathered straight into the
//! stacked tensor, each row copied once; the rows of the next call are fetched into cache
//! while this one runs ([`Lookahead`](super::Lookahead)). Otherwise (maps, a prefetch
//! thread) the batches are made one by one as before and stacked.

use super::{copy_rows_into, Batch, Batches};
use crate::{Error, Result, Tensor};

/// [`Batches`] grouped into calls (see the module's comment).
pub struct Groups {
    batches: Batches,
    /// A batch of another size than the call before it had (the partial last one): it
    /// starts the next call.
    held: Option<Batch>,
}

impl Groups {
    pub fn new(batches: Batches) -> Groups {
        Groups {
            batches,
            held: None,
        }
    }

    /// The sample count of the next call of up to `k` batches, where it is known before
    /// the call is made (not from a prefetch thread or through maps): lets a loop hand
    /// [`next_into`](Groups::next_into) a buffer of that size.
    pub fn next_rows(&self, k: usize) -> Option<usize> {
        match &self.batches {
            Batches::Inline {
                ds, ranges, next, ..
            } if ds.maps.is_empty() => call(ranges, *next, k).map(|(_, lo, hi)| hi - lo),
            _ => None,
        }
    }

    /// The next call's batches, up to `k` of one size, stacked in `b` (reusing its memory
    /// when the sizes fit), and how many there are; `None` at the end of the epoch.
    pub fn next_into(&mut self, b: &mut Batch, k: usize) -> Option<Result<usize>> {
        let k = k.max(1);
        if let Batches::Inline {
            ds,
            order,
            ranges,
            next,
            ahead,
        } = &mut self.batches
        {
            if ds.maps.is_empty() {
                let (m, lo, hi) = call(ranges, *next, k)?;
                ahead.finish();
                *next += m;
                let made = ds.make_batch_into(&order[lo..hi], b);
                if let Some((_, lo, hi)) = call(ranges, *next, k) {
                    ahead.start(ds, &order[lo..hi]);
                }
                return Some(made.map(|()| m));
            }
        }
        self.stack_next(b, k)
    }

    /// The batches made one by one, up to `k` of the first one's size, stacked.
    fn stack_next(&mut self, b: &mut Batch, k: usize) -> Option<Result<usize>> {
        let first = match self.held.take() {
            Some(h) => h,
            None => match self.batches.next()? {
                Ok(first) => first,
                Err(e) => return Some(Err(e)),
            },
        };
        Some(self.stack_after(first, b, k))
    }

    fn stack_after(&mut self, first: Batch, b: &mut Batch, k: usize) -> Result<usize> {
        let mut parts: Vec<Batch> = Vec::with_capacity(k);
        let n = first.x.dims().first().copied();
        parts.push(first);
        while parts.len() < k {
            match self.batches.next() {
                None => break,
                Some(r) => {
                    let next = r?;
                    if next.x.dims().first().copied() == n {
                        parts.push(next);
                    } else {
                        self.held = Some(next);
                        break;
                    }
                }
            }
        }
        let m = parts.len();
        if m == 1 {
            *b = parts.remove(0);
            return Ok(1);
        }
        stack_into(parts.iter().map(|p| &p.x), &mut b.x)?;
        stack_into(parts.iter().map(|p| &p.y), &mut b.y)?;
        b.sample_weight = if parts.iter().any(|p| p.sample_weight.is_some()) {
            let mut w = Vec::new();
            for p in &parts {
                let rows = p.x.dims().first().copied().unwrap_or(0);
                match &p.sample_weight {
                    Some(t) => w.extend(t.to_vec::<f32>()?),
                    None => w.extend(std::iter::repeat_n(1.0f32, rows)),
                }
            }
            Some(Tensor::from_vec(&[w.len()], w)?)
        } else {
            None
        };
        Ok(m)
    }
}

/// The call starting at batch `next`: how many batches (up to `k`, all of the first one's
/// size) and the span of the epoch's order their rows take. Batch `i`'s rows follow
/// batch `i - 1`'s, so a call's rows are one span.
fn call(ranges: &[(usize, usize)], next: usize, k: usize) -> Option<(usize, usize, usize)> {
    let &(lo, hi) = ranges.get(next)?;
    let n = hi - lo;
    let m = ranges[next..]
        .iter()
        .take(k)
        .take_while(|&&(a, b)| b - a == n)
        .count();
    Some((m, lo, ranges[next + m - 1].1))
}

/// Tensors of one row shape and type, one after another along the first axis, in `out`
/// (reused when it has that shape).
fn stack_into<'a>(parts: impl Iterator<Item = &'a Tensor> + Clone, out: &mut Tensor) -> Result<()> {
    let rows_of = |t: &Tensor| t.dims().first().copied().unwrap_or(0);
    let first = parts
        .clone()
        .next()
        .ok_or_else(|| Error::invalid("fit", "no batches"))?;
    let rows: usize = parts.clone().map(rows_of).sum();
    let fits = out.dtype() == first.dtype()
        && out.dims().first() == Some(&rows)
        && out.dims().get(1..) == first.dims().get(1..);
    if !fits {
        *out = Tensor::zeros(&super::with_first(&first.ty(), rows))?;
    }
    let mut at = 0;
    for p in parts {
        copy_rows_into(p, out, at)?;
        at += rows_of(p);
    }
    Ok(())
}
