//! The checkpoint file behind `train`'s [`Checkpointing`]: what callbacks (`ModelCheckpoint`,
//! `BackupAndRestore`, a user's) save and restore through their `Control`. The trait lives in
//! `train` and its implementation here, so the fit loop reaches the file format without
//! importing a layer above it.

use crate::nn::Architecture;
use crate::train::Checkpointing;
use crate::{Model, Result};
use std::path::Path;

impl<A: Architecture> Checkpointing for Model<A> {
    fn save(&mut self, path: &Path, epoch: usize) -> Result<()> {
        self.save_checkpoint_at(path, epoch)
    }
    fn restore(&mut self, path: &Path) -> Result<usize> {
        Ok(self.load_checkpoint(path)?.epoch)
    }
}
