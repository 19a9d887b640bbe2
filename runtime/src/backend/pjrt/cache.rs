//! The persistent compilation cache: serialized executables on disk, keyed by everything
//! that determines them — the StableHLO text, the compile options, and the plugin (path,
//! size, modification time, API version, self-reported versions).
//!
//! An entry is written atomically (`atomic_file`), so readers never see a half-written one. Each entry repeats its full key material and carries a checksum of
//! the executable bytes; an entry whose key differs (a hash collision), that is truncated
//! or corrupt, or that the plugin then refuses to load, is ignored and overwritten by a
//! fresh compile — never an error.

use crate::atomic_file::write_atomic;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

const MAGIC: &[u8; 16] = b"strata-xla-exe1\n";

/// Counts of what the cache did, for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Compiles answered by a cached executable.
    pub hits: u64,
    /// Compiles that found no usable entry and ran the compiler.
    pub misses: u64,
    /// Entries written.
    pub writes: u64,
    /// Entries found but ignored: corrupt, truncated, foreign, or refused by the plugin.
    pub rejected: u64,
    /// Entries that could not be written (the compile itself still succeeded).
    pub write_failures: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    writes: AtomicU64,
    rejected: AtomicU64,
    write_failures: AtomicU64,
}

impl Counters {
    pub fn snapshot(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            write_failures: self.write_failures.load(Ordering::Relaxed),
        }
    }

    pub fn hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    pub fn miss(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }

    pub fn reject(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }
}

/// Where the cache lives, when enabled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CacheDir {
    /// `$STRATA_CACHE_DIR`, else `$XDG_CACHE_HOME/strata/xla`, else `~/.cache/strata/xla`.
    #[default]
    Default,
    /// No persistent cache: every compile runs the compiler.
    Disabled,
    /// This directory.
    At(PathBuf),
}

impl CacheDir {
    pub(crate) fn resolve(&self) -> Option<PathBuf> {
        match self {
            CacheDir::Disabled => None,
            CacheDir::At(p) => Some(p.clone()),
            CacheDir::Default => {
                let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
                if let Some(d) = env("STRATA_CACHE_DIR") {
                    return Some(PathBuf::from(d));
                }
                if let Some(d) = env("XDG_CACHE_HOME") {
                    return Some(PathBuf::from(d).join("strata").join("xla"));
                }
                env("HOME").map(|h| PathBuf::from(h).join(".cache").join("strata").join("xla"))
            }
        }
    }
}

/// A directory of cached executables.
#[derive(Debug)]
pub(crate) struct Cache {
    dir: PathBuf,
}

impl Cache {
    pub fn new(dir: PathBuf) -> Cache {
        Cache { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, identity: &[u8]) -> PathBuf {
        self.dir.join(format!("{}.xla", hash128_hex(identity)))
    }

    /// The executable bytes stored for exactly this key material, if a sound entry exists.
    /// `Err(())` means an entry existed but was unusable.
    pub fn load(&self, identity: &[u8]) -> Option<Result<Vec<u8>, ()>> {
        let bytes = std::fs::read(self.path(identity)).ok()?;
        Some(parse_entry(&bytes, identity).ok_or(()))
    }

    /// Stores an entry atomically (temporary file, then rename).
    pub fn store(&self, identity: &[u8], payload: &[u8], counters: &Counters) {
        match self.try_store(identity, payload) {
            Ok(()) => counters.writes.fetch_add(1, Ordering::Relaxed),
            Err(_) => counters.write_failures.fetch_add(1, Ordering::Relaxed),
        };
    }

    fn try_store(&self, identity: &[u8], payload: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        write_atomic(&self.path(identity), |f| {
            f.write_all(&encode_entry(identity, payload))
        })
    }
}

/// An entry's bytes, as [`parse_entry`] reads them back.
pub(crate) fn encode_entry(identity: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(MAGIC.len() + identity.len() + payload.len() + 24);
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&(identity.len() as u64).to_le_bytes());
    b.extend_from_slice(identity);
    b.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    b.extend_from_slice(payload);
    b.extend_from_slice(&fnv1a64(payload, FNV_OFFSET).to_le_bytes());
    b
}

/// The payload of an entry whose key material is `identity` and whose checksum holds.
pub(crate) fn parse_entry(bytes: &[u8], identity: &[u8]) -> Option<Vec<u8>> {
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    let (id, rest) = take_block(rest)?;
    if id != identity {
        return None;
    }
    let (payload, rest) = take_block(rest)?;
    let sum: [u8; 8] = rest.try_into().ok()?;
    (u64::from_le_bytes(sum) == fnv1a64(payload, FNV_OFFSET)).then(|| payload.to_vec())
}

/// A little-endian u64 length, then that many bytes.
fn take_block(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = b.split_first_chunk::<8>()?;
    let len = usize::try_from(u64::from_le_bytes(*len)).ok()?;
    (rest.len() >= len).then(|| rest.split_at(len))
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a: a fixed, dependency-free hash, stable across Rust versions (unlike `std`'s).
fn fnv1a64(bytes: &[u8], offset: u64) -> u64 {
    let mut h = offset;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// 128 bits from two differently seeded FNV-1a passes: file names that do not collide in
/// practice (and a collision is caught by the stored key material anyway).
pub(crate) fn hash128_hex(bytes: &[u8]) -> String {
    format!(
        "{:016x}{:016x}",
        fnv1a64(bytes, FNV_OFFSET),
        fnv1a64(bytes, 0x6c62_272e_07bb_0142)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("strata-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn round_trip_and_corruption() {
        let dir = temp_dir("rt");
        let c = Cache::new(dir.clone());
        let counters = Counters::default();
        assert!(c.load(b"key").is_none());
        c.store(b"key", b"executable", &counters);
        assert_eq!(c.load(b"key"), Some(Ok(b"executable".to_vec())));
        assert_eq!(counters.snapshot().writes, 1);

        // Flip a payload byte: the checksum no longer holds.
        let p = c.path(b"key");
        let mut bytes = std::fs::read(&p).unwrap();
        let n = bytes.len();
        bytes[n - 9] ^= 0xff;
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(c.load(b"key"), Some(Err(())));

        // Truncated, and garbage.
        std::fs::write(&p, &bytes[..20]).unwrap();
        assert_eq!(c.load(b"key"), Some(Err(())));
        std::fs::write(&p, b"not an entry").unwrap();
        assert_eq!(c.load(b"key"), Some(Err(())));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn another_key_in_the_same_file_is_not_returned() {
        let dir = temp_dir("collide");
        let c = Cache::new(dir.clone());
        c.store(b"a", b"A", &Counters::default());
        // Pretend "b" hashed to "a"'s file.
        std::fs::rename(c.path(b"a"), c.path(b"b")).unwrap();
        assert_eq!(c.load(b"b"), Some(Err(())));
        let _ = std::fs::remove_dir_all(dir);
    }
}
