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
    from_file_bytes(path, &read_file(path)?)
}

fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::Io {
        path: path.display().to_string(),
        source: e,
    })
}

/// The tensor in the bytes of an IDX file, gzipped or not; `path` only names it in errors.
pub(crate) fn from_file_bytes(path: &Path, raw: &[u8]) -> Result<Tensor> {
    with_unzipped(path, raw, |b| parse(path, b))
}

/// An IDX file of unsigned bytes (images) as `f32` in [0, 1] (each byte / 255), made
/// straight from the bytes: no `i32` copy of the file in between, so loading 60,000
/// images peaks at their bytes plus their floats.
pub(crate) fn read_idx_unit_f32(path: &Path) -> Result<ndarray::ArrayD<f32>> {
    with_unzipped(path, &read_file(path)?, |b| {
        let (ty, dims, header) = layout(path, b)?;
        if ty != 0x08 {
            return Err(bad(
                path,
                format!("expected unsigned bytes (IDX type 0x08), got type 0x{ty:02x}"),
            ));
        }
        let v: Vec<f32> = b[header..].iter().map(|&v| v as f32 / 255.0).collect();
        ndarray::ArrayD::from_shape_vec(dims, v).map_err(|e| bad(path, e.to_string()))
    })
}

/// `f` of the file's bytes, gunzipped first when they are a gzip stream.
fn with_unzipped<R>(path: &Path, raw: &[u8], f: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(raw)
            .read_to_end(&mut out)
            .map_err(|e| bad(path, format!("corrupt gzip stream: {e}")))?;
        f(&out)
    } else {
        f(raw)
    }
}

fn parse(path: &Path, b: &[u8]) -> Result<Tensor> {
    let (ty, dims, header) = layout(path, b)?;
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

/// The element type, dimensions and header length of an IDX file's bytes, checked
/// against the file's length.
fn layout(path: &Path, b: &[u8]) -> Result<(u8, Vec<usize>, usize)> {
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
    Ok((ty, dims, header))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("strata-idx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn unit_f32_images_equal_the_bytes_over_255() {
        // 2 images of 2x3 unsigned bytes
        let mut b = vec![0, 0, 0x08, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3];
        b.extend([0u8, 1, 2, 3, 254, 255, 10, 20, 30, 40, 50, 60]);
        let p = write("images.idx", &b);
        let got = read_idx_unit_f32(&p).unwrap();
        let want = read_idx(&p)
            .unwrap()
            .array::<i32>()
            .unwrap()
            .mapv(|v| v as f32 / 255.0);
        assert_eq!(got, want);
        assert_eq!(got.shape(), &[2, 2, 3]);

        let mut gz = Vec::new();
        {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(&mut gz, flate2::Compression::fast());
            e.write_all(&b).unwrap();
            e.finish().unwrap();
        }
        assert_eq!(
            read_idx_unit_f32(&write("images.idx.gz", &gz)).unwrap(),
            want
        );

        // not bytes, or truncated: typed errors naming the file
        let mut f = b[..16].to_vec();
        f[2] = 0x0D;
        f.extend([0u8; 48]);
        let e = read_idx_unit_f32(&write("floats.idx", &f))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("expected unsigned bytes") && e.contains("floats.idx"),
            "{e}"
        );
        let e = read_idx_unit_f32(&write("short.idx", &b[..b.len() - 1]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("truncated"), "{e}");
    }
}
