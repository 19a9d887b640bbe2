//! Files replaced atomically: the bytes go to a temporary file beside the target, which is
//! synced and then renamed over it, so a reader sees the old file or the new one, never a
//! part. Checkpoints and the compile cache both write this way.
//!
//! A writer killed mid-write leaves its temporary file behind. The next write to the same
//! path removes such leftovers, and tells them from the temporary file of a writer still at
//! work (another thread or process saving to the same path) by an advisory lock: each
//! writer holds an exclusive lock on its temporary file until it is renamed or removed, and
//! the operating system drops the lock when the process dies, however it dies. A file whose
//! lock can be taken therefore has no live writer. A process id would not do: ids are
//! reused, and a writer in another PID namespace (a container sharing the directory) has
//! an id that means nothing here. Where locks are unsupported nothing is removed, since
//! nothing can be told apart.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `path` through `write`, atomically: `write` fills a fresh temporary file in the
/// same directory. Leftover temporary files of dead writers to `path` are removed first; the
/// writer's own temporary file is removed on every error path (and on a panic in `write`).
pub(crate) fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path names no file (it ends in `..` or is a root)",
        )
    })?;
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    remove_stale(dir, &prefix);
    let mut tmp = Temp::create(dir, &prefix)?;
    write(&mut tmp.file)?;
    tmp.file.sync_all()?;
    std::fs::rename(&tmp.path, path)?;
    tmp.renamed = true;
    // Make the rename itself durable (directories cannot be opened on every platform).
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Removes the files in `dir` named `prefix…` whose writer is gone: those whose lock can
/// be taken. Best effort: a leftover that cannot be removed must not fail the write.
fn remove_stale(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let path = entry.path();
        let Ok(f) = File::open(&path) else {
            continue;
        };
        // Removed while locked, so no writer can be between creating and locking it
        // unnoticed: one that was finds its file gone (`Temp::create`) and starts over.
        if f.try_lock().is_ok() {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// A writer's temporary file, locked for as long as it exists; removed on drop unless it
/// was renamed over the target.
struct Temp {
    file: File,
    path: PathBuf,
    renamed: bool,
}

impl Temp {
    fn create(dir: &Path, prefix: &str) -> io::Result<Temp> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let mut last = None;
        for _ in 0..ATTEMPTS {
            let path = dir.join(format!(
                "{prefix}{}-{}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            ));
            // `create_new`: a leftover of a dead process that had this id is never reused.
            let file = match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    last = Some(e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let tmp = Temp {
                file,
                path,
                renamed: false,
            };
            match tmp.file.try_lock() {
                Ok(()) => {}
                // Without locks, no other writer removes anything either.
                Err(TryLockError::Error(e)) if e.kind() == io::ErrorKind::Unsupported => {}
                // Another writer took it for a leftover in the instant before our lock.
                Err(TryLockError::WouldBlock) => {
                    last = Some(io::Error::from(io::ErrorKind::WouldBlock));
                    continue;
                }
                Err(TryLockError::Error(e)) => return Err(e),
            }
            if tmp.still_named() {
                return Ok(tmp);
            }
            last = Some(io::Error::from(io::ErrorKind::NotFound));
        }
        Err(io::Error::other(format!(
            "could not create a temporary file `{prefix}…` in {} after {ATTEMPTS} attempts (last: {})",
            dir.display(),
            last.map_or_else(String::new, |e| e.to_string())
        )))
    }

    /// Whether the path still names this file: another writer may have removed it as a
    /// leftover between its creation and the lock.
    fn still_named(&self) -> bool {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            match (self.file.metadata(), std::fs::symlink_metadata(&self.path)) {
                (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
                _ => false,
            }
        }
        #[cfg(not(unix))]
        {
            // Names are unique to this process (pid and sequence number, created new), so
            // a file still at the path is this one.
            self.path.exists()
        }
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if !self.renamed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// How many fresh names a writer tries before giving up (each try loses only to a leftover
/// of the same name or to a concurrent cleaner, both rare).
const ATTEMPTS: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("strata-atomic-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn writes_and_replaces() {
        let d = scratch("replace");
        let p = d.join("a.bin");
        write_atomic(&p, |f| f.write_all(b"one")).unwrap();
        write_atomic(&p, |f| f.write_all(b"two")).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(names(&d), ["a.bin"]);
    }

    #[test]
    fn a_dead_writers_leftover_is_removed_and_a_live_one_kept() {
        let d = scratch("stale");
        let p = d.join("a.bin");
        // A leftover nobody holds (its writer died) …
        std::fs::write(d.join(".a.bin.tmp-999999-0"), b"half").unwrap();
        // … one a live writer holds (locked) …
        let live_path = d.join(".a.bin.tmp-999999-1");
        let live = File::create(&live_path).unwrap();
        live.lock().unwrap();
        // … and another target's leftover, which is not this write's business.
        std::fs::write(d.join(".b.bin.tmp-999999-0"), b"half").unwrap();
        write_atomic(&p, |f| f.write_all(b"whole")).unwrap();
        assert_eq!(
            names(&d),
            [".a.bin.tmp-999999-1", ".b.bin.tmp-999999-0", "a.bin"]
        );
        drop(live);
        write_atomic(&p, |f| f.write_all(b"again")).unwrap();
        assert_eq!(names(&d), [".b.bin.tmp-999999-0", "a.bin"]);
    }

    #[test]
    fn the_writers_own_temp_file_goes_on_error_and_panic() {
        let d = scratch("error");
        let p = d.join("a.bin");
        let e = write_atomic(&p, |f| {
            f.write_all(b"part")?;
            Err(io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "disk full");
        assert!(names(&d).is_empty(), "{:?}", names(&d));
        let panicked = std::panic::catch_unwind(|| {
            let _ = write_atomic(&p, |_| panic!("in the writer"));
        });
        assert!(panicked.is_err());
        assert!(names(&d).is_empty(), "{:?}", names(&d));
        // A target that is a directory: the rename fails, the temp file goes.
        std::fs::create_dir(d.join("dir")).unwrap();
        assert!(write_atomic(&d.join("dir"), |f| f.write_all(b"x")).is_err());
        assert_eq!(names(&d), ["dir"]);
    }

    #[test]
    fn concurrent_writers_to_one_path_all_succeed() {
        let d = scratch("concurrent");
        let p = d.join("a.bin");
        std::thread::scope(|s| {
            for i in 0..8u8 {
                let p = &p;
                s.spawn(move || {
                    for _ in 0..20 {
                        write_atomic(p, |f| f.write_all(&[i; 4096])).unwrap();
                    }
                });
            }
        });
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(bytes.len(), 4096);
        assert!(bytes.iter().all(|&b| b == bytes[0]));
        assert_eq!(names(&d), ["a.bin"]);
    }
}
