//! Values of other shapes kept for reuse. An epoch whose sample count is not a multiple of
//! the batch size ends with a smaller batch: its tensors, input buffers and executable
//! differ from the full batches', and switching to it and back every epoch would
//! otherwise allocate both sets again each time.

/// Values kept per kind: the full batch's and the partial one's, with room for a
/// validation set's between epochs.
const KEEP: usize = 4;

/// A few values that are not in use now but may fit a later call.
pub(crate) struct Spares<T>(Vec<T>);

impl<T> Default for Spares<T> {
    fn default() -> Self {
        Spares(Vec::new())
    }
}

impl<T> Spares<T> {
    /// Removes and returns a kept value that `fits`.
    pub fn take(&mut self, fits: impl Fn(&T) -> bool) -> Option<T> {
        let i = self.0.iter().position(fits)?;
        Some(self.0.swap_remove(i))
    }

    /// Keeps `v` for later, forgetting the oldest value when full.
    pub fn keep(&mut self, v: T) {
        if self.0.len() == KEEP {
            self.0.remove(0);
        }
        self.0.push(v);
    }

    /// Makes `cur` a value that `fits`: `cur` itself, or a kept value (keeping `cur` in
    /// its place), or, when none fits, `make()`'s (whose error leaves `cur` as it was).
    pub fn fit(
        &mut self,
        cur: &mut T,
        fits: impl Fn(&T) -> bool,
        make: impl FnOnce() -> crate::Result<T>,
    ) -> crate::Result<()> {
        if fits(cur) {
            return Ok(());
        }
        let new = match self.take(&fits) {
            Some(kept) => kept,
            None => make()?,
        };
        let old = std::mem::replace(cur, new);
        self.keep(old);
        Ok(())
    }
}
