//! `BackupAndRestore` (Keras): a fit that is killed and started again with the same call
//! resumes from the last finished epoch, and ends with the weights of a run never stopped.

use super::callbacks::{Callback, Control};
use super::Logs;
use crate::{Error, Result};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// When [`BackupAndRestore`] writes its backup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaveFreq {
    /// At the end of every epoch (Keras' `"epoch"`).
    Epoch,
    /// At the end of every `n`-th epoch. Keras' integer `save_freq` counts batches and
    /// restores such a backup at the start of its unfinished epoch, replaying batches that
    /// were already applied; counting epochs keeps a resumed run equal to an unbroken one.
    Epochs(usize),
}

/// Backs up the whole training state at the end of epochs and, when `fit` starts again
/// after an interruption (an error, a kill, a power cut), restores it and resumes at the
/// first unfinished epoch (Keras' `BackupAndRestore`). A completed `fit` deletes the backup
/// (unless [`delete_checkpoint`](Self::delete_checkpoint) is off); a failed one keeps it.
///
/// Restored: the weights (non-trainable ones such as batch-norm statistics included), the
/// optimizer's slots and step count, a constant learning rate (one set by a callback
/// included; a schedule follows from the step count), the random key behind dropout and
/// random layers, and the epoch count. Shuffling depends only on `Fit::seed` and the epoch,
/// so nothing of it needs saving. With these the resumed epochs compute exactly what an
/// unbroken run computes. Not restored: other callbacks' own state (`EarlyStopping`'s and
/// `ReduceLROnPlateau`'s patience counters and best values, a `CSVLogger`'s file position),
/// and the `History` of the epochs before the interruption, which the resumed `fit` does
/// not return.
///
/// The backup is written atomically (a kill during the write leaves the previous backup
/// whole, and the next write removes the dead writer's temporary file). `backup_dir` is
/// this run's alone: another run or callback must not write there.
pub struct BackupAndRestore {
    pub backup_dir: PathBuf,
    pub save_freq: SaveFreq,
    /// Keep the backup before the latest one too, and restore it when the latest cannot be
    /// read (a disk that lost it: a kill cannot, since writes are atomic).
    pub double_checkpoint: bool,
    /// Delete the backups when `fit` completes (Keras' default).
    pub delete_checkpoint: bool,
}

impl BackupAndRestore {
    /// Keras' defaults: a backup every epoch, one file, deleted at the end.
    pub fn new(backup_dir: impl Into<PathBuf>) -> BackupAndRestore {
        BackupAndRestore {
            backup_dir: backup_dir.into(),
            save_freq: SaveFreq::Epoch,
            double_checkpoint: false,
            delete_checkpoint: true,
        }
    }
    pub fn save_freq(mut self, f: SaveFreq) -> Self {
        self.save_freq = f;
        self
    }
    pub fn double_checkpoint(mut self, on: bool) -> Self {
        self.double_checkpoint = on;
        self
    }
    pub fn delete_checkpoint(mut self, on: bool) -> Self {
        self.delete_checkpoint = on;
        self
    }

    /// The latest backup.
    pub fn latest(&self) -> PathBuf {
        self.backup_dir.join("latest.ckpt")
    }

    /// The one before it (with `double_checkpoint`).
    pub fn previous(&self) -> PathBuf {
        self.backup_dir.join("previous.ckpt")
    }

    fn io(path: &Path, e: std::io::Error) -> Error {
        Error::Io {
            path: path.display().to_string(),
            source: e,
        }
    }

    /// Restores the latest backup there is; the epochs it completed, or `None` without one.
    fn restore(&self, c: &mut Control<'_>) -> Result<Option<usize>> {
        let (latest, previous) = (self.latest(), self.previous());
        if latest.exists() {
            match c.load_checkpoint(&latest) {
                Ok(epoch) => return Ok(Some(epoch)),
                Err(e) if !(self.double_checkpoint && previous.exists()) => return Err(e),
                Err(_) => {}
            }
        }
        if self.double_checkpoint && previous.exists() {
            return c.load_checkpoint(&previous).map(Some);
        }
        Ok(None)
    }

    fn backup(&self, completed: usize, c: &mut Control<'_>) -> Result<()> {
        let latest = self.latest();
        if self.double_checkpoint {
            // A rename, so a kill here leaves `previous` for `restore` to find.
            match std::fs::rename(&latest, self.previous()) {
                Err(e) if e.kind() != ErrorKind::NotFound => return Err(Self::io(&latest, e)),
                _ => {}
            }
        }
        c.save_checkpoint(&latest, completed)
    }
}

impl Callback for BackupAndRestore {
    fn on_train_begin(&mut self, c: &mut Control<'_>) -> Result<()> {
        if self.save_freq == SaveFreq::Epochs(0) {
            return Err(Error::invalid(
                "BackupAndRestore",
                "save_freq must be at least 1 epoch, got SaveFreq::Epochs(0)",
            ));
        }
        if self.backup_dir.exists() && !self.backup_dir.is_dir() {
            return Err(Error::invalid(
                "BackupAndRestore",
                format!(
                    "backup_dir `{}` is a file; expected a directory (created when missing)",
                    self.backup_dir.display()
                ),
            ));
        }
        std::fs::create_dir_all(&self.backup_dir).map_err(|e| Self::io(&self.backup_dir, e))?;
        if let Some(epoch) = self.restore(c)? {
            c.resume_at_epoch(epoch);
        }
        Ok(())
    }

    fn on_epoch_end(&mut self, epoch: usize, _logs: &Logs, c: &mut Control<'_>) -> Result<()> {
        let completed = epoch + 1;
        let due = match self.save_freq {
            SaveFreq::Epoch => true,
            SaveFreq::Epochs(n) => completed.is_multiple_of(n),
        };
        if due {
            self.backup(completed, c)?;
        }
        Ok(())
    }

    fn on_train_end(&mut self, _logs: &Logs, _c: &mut Control<'_>) -> Result<()> {
        if self.delete_checkpoint {
            for p in [self.latest(), self.previous()] {
                match std::fs::remove_file(&p) {
                    Err(e) if e.kind() != ErrorKind::NotFound => return Err(Self::io(&p, e)),
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// It looks at the model only at the ends of epochs.
    fn async_safe(&self) -> bool {
        true
    }
}
