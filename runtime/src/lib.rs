//! Strata's runtime: the graph IR, reverse-mode autodiff and the backends that run graphs.

pub(crate) mod atomic_file;
pub mod autodiff;
pub mod backend;
pub mod checkpoint;
pub mod data;
mod error;
pub mod export;
pub(crate) mod hlo;
pub mod ir;
pub(crate) mod kernel;
pub mod loss;
pub(crate) mod memory;
pub mod metrics;
pub mod nn;
pub(crate) mod ops;
pub mod optim;
pub mod random;
pub mod strategy;
mod tensor;
pub mod train;
mod types;

pub use error::{Error, NonFiniteCause, Result};
pub use export::Exported;
/// The layer catalogue: every layer's arguments, shape rule and parameters, which
/// `model!` checks at compile time and [`nn::Layer`] applies at build time.
pub use strata_spec as spec;
pub use tensor::{Element, Tensor};
pub use train::Model;

/// The counter-based generator behind `random_uniform`, exposed so host code can produce
/// the same streams.
pub use ops::random::threefry2x32;

/// The file readers' bytes-level entry points, for the fuzz targets in `fuzz/` (outside the
/// workspace). Not an API: each reads the bytes of one file kind exactly as the reader of
/// that file does, and must return (never panic or abort) on any input.
#[doc(hidden)]
pub mod fuzzing {
    use crate::{Result, Tensor};
    use std::path::Path;

    /// The name given in errors.
    const PATH: &str = "<fuzz input>";

    /// What [`data::read_idx`](crate::data::read_idx) makes of a file with these bytes.
    pub fn idx(bytes: &[u8]) -> Result<Tensor> {
        crate::data::idx_from_file_bytes(Path::new(PATH), bytes)
    }

    /// What [`data::read_npy`](crate::data::read_npy) makes of a file with these bytes.
    pub fn npy(bytes: &[u8]) -> Result<Tensor> {
        crate::data::npy_from_file_bytes(Path::new(PATH), bytes)
    }

    /// The model-independent part of [`Model::load_checkpoint`](crate::Model::load_checkpoint):
    /// the file's checks, then every tensor in it read as the model's weights would be.
    pub fn checkpoint(bytes: &[u8]) -> Result<Vec<(String, Tensor)>> {
        let path = Path::new(PATH);
        let contents = crate::checkpoint::parse(path, bytes)?;
        contents
            .tensors
            .iter()
            .map(|(name, v)| {
                Ok((
                    name.to_string(),
                    crate::checkpoint::from_view(path, name, &v)?,
                ))
            })
            .collect()
    }

    /// The key material of the compilation-cache entries the fuzz target reads.
    pub const CACHE_IDENTITY: &[u8] = b"strata fuzz identity";

    /// A compilation-cache entry's payload, when the entry is sound and its stored key
    /// material is [`CACHE_IDENTITY`] (the plugin only ever sees payloads this returns).
    pub fn compile_cache_entry(bytes: &[u8]) -> Option<Vec<u8>> {
        crate::backend::pjrt::parse_cache_entry(bytes, CACHE_IDENTITY)
    }

    /// A sound entry holding `payload` under [`CACHE_IDENTITY`], as the cache writes it: a seed.
    pub fn compile_cache_seed(payload: &[u8]) -> Vec<u8> {
        crate::backend::pjrt::encode_cache_entry(CACHE_IDENTITY, payload)
    }
}
