//! IDX files (the MNIST / Fashion-MNIST format), plain or gzipped.

use crate::{Error, Result, Tensor};
use std::io::Read;
use std::path::Path;

fn bad(path: &Path, message: impl Into<String>) -> Error {
    Error::Data {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// Reads an IDX file (`.gz` or not, recognised by content). Unsigned bytes and the
/// integer types become `i32`; `f32`/`f64` stay as they are. A truncated or foreign file
/// is a [`Error::Data`] naming what was wrong.
pub fn read_idx(path: impl AsRef<Path>) -> Result<Tensor> {
    let path = path.as_ref();
    let raw = std::fs::read(path).map_err(|e| Error::Io {
        path: path.display().to_string(),
        source: e,
    })?;
    from_file_bytes(path, &raw)
}

/// The tensor in the bytes of an IDX file, gzipped or not; `path` only names it in errors.
pub(crate) fn from_file_bytes(path: &Path, raw: &[u8]) -> Result<Tensor> {
    let unzipped;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(raw)
            .read_to_end(&mut out)
            .map_err(|e| bad(path, format!("corrupt gzip stream: {e}")))?;
        unzipped = out;
        &unzipped
    } else {
        raw
    };
    parse(path, bytes)
}

fn parse(path: &Path, b: &[u8]) -> Result<Tensor> {
    if b.len() < 4 || b[0] != 0 || b[1] != 0 {
        return Err(bad(
            path,
            "not an IDX file (the magic number must start with two zero bytes)",
        ));
    }
    let (ty, ndim) = (b[2], b[3] as usize);
    let size = match ty {
        0x08 | 0x09 => 1,
        0x0B => 2,
        0x0C | 0x0D => 4,
        0x0E => 8,
        t => return Err(bad(path, format!("unknown IDX element type 0x{t:02x}"))),
    };
    let header = 4 + 4 * ndim;
    if b.len() < header {
        return Err(bad(
            path,
            format!(
                "truncated header: {ndim} dimensions need {header} bytes, the file has {}",
                b.len()
            ),
        ));
    }
    let dims: Vec<usize> = (0..ndim)
        .map(|i| {
            u32::from_be_bytes([b[4 + 4 * i], b[5 + 4 * i], b[6 + 4 * i], b[7 + 4 * i]]) as usize
        })
        .collect();
    let n = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad(path, format!("dimensions {dims:?} overflow")))?;
    let need = n
        .checked_mul(size)
        .and_then(|v| v.checked_add(header))
        .ok_or_else(|| bad(path, "size overflows"))?;
    if b.len() != need {
        return Err(bad(
            path,
            format!(
                "shape {dims:?} needs {need} bytes but the file has {} ({})",
                b.len(),
                if b.len() < need {
                    "truncated"
                } else {
                    "trailing data"
                }
            ),
        ));
    }
    let d = &b[header..];
    let t = match ty {
        0x08 => Tensor::from_vec(&dims, d.iter().map(|&v| v as i32).collect::<Vec<i32>>()),
        0x09 => Tensor::from_vec(
            &dims,
            d.iter().map(|&v| v as i8 as i32).collect::<Vec<i32>>(),
        ),
        0x0B => Tensor::from_vec(
            &dims,
            d.chunks_exact(2)
                .map(|c| i16::from_be_bytes([c[0], c[1]]) as i32)
                .collect::<Vec<i32>>(),
        ),
        0x0C => Tensor::from_vec(
            &dims,
            d.chunks_exact(4)
                .map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                .collect::<Vec<i32>>(),
        ),
        0x0D => Tensor::from_vec(
            &dims,
            d.chunks_exact(4)
                .map(|c| f32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                .collect::<Vec<f32>>(),
        ),
        _ => Tensor::from_vec(
            &dims,
            d.chunks_exact(8)
                .map(|c| f64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect::<Vec<f64>>(),
        ),
    }
    // A shape that no array can have (its non-zero dims overflow) fails here.
    .map_err(|e| bad(path, e.to_string()))?;
    Ok(t)
}
