//! NumPy `.npy` files (format versions 1–3).

use crate::{Error, Result, Tensor};
use std::path::Path;

fn bad(path: &Path, message: impl Into<String>) -> Error {
    Error::Data {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// Reads a `.npy` array of f4, f8, i1, i2, i4, i8, u1, u2 or b1, in either byte order
/// and either memory order. Small integer types become `i32`.
pub fn read_npy(path: impl AsRef<Path>) -> Result<Tensor> {
    let path = path.as_ref();
    let b = std::fs::read(path).map_err(|e| Error::Io {
        path: path.display().to_string(),
        source: e,
    })?;
    from_file_bytes(path, &b)
}

/// The array in the bytes of a `.npy` file; `path` only names it in errors.
pub(crate) fn from_file_bytes(path: &Path, b: &[u8]) -> Result<Tensor> {
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err(bad(path, "not a .npy file (bad magic)"));
    }
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10usize),
        2 | 3 if b.len() >= 12 => (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12),
        v => return Err(bad(path, format!("unsupported .npy format version {v}"))),
    };
    let header = start
        .checked_add(hlen)
        .and_then(|end| b.get(start..end))
        .ok_or_else(|| {
            bad(
                path,
                format!(
                    "truncated header: it needs {hlen} bytes after the first {start}, the file has {}",
                    b.len()
                ),
            )
        })
        .and_then(|h| std::str::from_utf8(h).map_err(|_| bad(path, "header is not text")))?;
    let descr = field(header, "descr").ok_or_else(|| bad(path, "header has no 'descr'"))?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    let fortran = field(header, "fortran_order")
        .ok_or_else(|| bad(path, "header has no 'fortran_order'"))?
        == "True";
    let shape_text = field(header, "shape").ok_or_else(|| bad(path, "header has no 'shape'"))?;
    let dims: Vec<usize> = shape_text
        .trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| bad(path, format!("bad shape {shape_text}")))
        })
        .collect::<Result<_>>()?;
    let unsupported = || {
        bad(
            path,
            format!("unsupported dtype {descr:?} (expected a byte order <, >, | or = and one of f4, f8, i1, i2, i4, i8, u1, u2, b1)"),
        )
    };
    // The byte order is one ASCII character, so what follows it starts on a char boundary.
    let (big, kind) = match descr.as_bytes().first() {
        Some(b'>') => (true, &descr[1..]),
        Some(b'<' | b'|' | b'=') => (false, &descr[1..]),
        _ => return Err(unsupported()),
    };
    let size: usize = match kind {
        "i1" | "u1" | "b1" => 1,
        "i2" | "u2" => 2,
        "f4" | "i4" => 4,
        "f8" | "i8" => 8,
        _ => return Err(unsupported()),
    };
    let data = &b[start + hlen..];
    // The file's own claim, checked before anything is allocated for it.
    let need = dims
        .iter()
        .try_fold(size, |a, &d| a.checked_mul(d))
        .ok_or_else(|| bad(path, format!("shape {dims:?} of {descr} overflows")))?;
    if data.len() != need {
        return Err(bad(
            path,
            format!(
                "shape {dims:?} of {descr} needs {need} bytes, the file has {} ({})",
                data.len(),
                if data.len() < need {
                    "truncated"
                } else {
                    "trailing data"
                }
            ),
        ));
    }
    macro_rules! read {
        ($t:ty, $n:literal) => {
            data.chunks_exact($n)
                .map(|c| {
                    let a: [u8; $n] = c.try_into().unwrap_or([0; $n]);
                    if big {
                        <$t>::from_be_bytes(a)
                    } else {
                        <$t>::from_le_bytes(a)
                    }
                })
                .collect::<Vec<$t>>()
        };
    }
    // Fortran order: read with the dimensions reversed, then transpose back.
    let read_dims: Vec<usize> = if fortran {
        dims.iter().rev().copied().collect()
    } else {
        dims.clone()
    };
    let t = match kind {
        "f4" => Tensor::from_vec(&read_dims, read!(f32, 4)),
        "f8" => Tensor::from_vec(&read_dims, read!(f64, 8)),
        "i4" => Tensor::from_vec(&read_dims, read!(i32, 4)),
        "i8" => Tensor::from_vec(&read_dims, read!(i64, 8)),
        "i2" => Tensor::from_vec(
            &read_dims,
            read!(i16, 2)
                .into_iter()
                .map(i32::from)
                .collect::<Vec<i32>>(),
        ),
        "u2" => Tensor::from_vec(
            &read_dims,
            read!(u16, 2)
                .into_iter()
                .map(i32::from)
                .collect::<Vec<i32>>(),
        ),
        "i1" => Tensor::from_vec(
            &read_dims,
            data.iter().map(|&v| v as i8 as i32).collect::<Vec<i32>>(),
        ),
        "u1" => Tensor::from_vec(
            &read_dims,
            data.iter().map(|&v| v as i32).collect::<Vec<i32>>(),
        ),
        "b1" => Tensor::from_vec(
            &read_dims,
            data.iter().map(|&v| v != 0).collect::<Vec<bool>>(),
        ),
        _ => return Err(unsupported()),
    }
    // A shape that no array can have (its non-zero dims overflow) fails here.
    .map_err(|e| bad(path, e.to_string()))?;
    Ok(if fortran { transpose_all(t) } else { t })
}

/// The value text of `'key': value` in a .npy header dict.
fn field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    let end = if rest.starts_with('(') {
        rest.find(')')? + 1
    } else {
        rest.find(',').unwrap_or(rest.len())
    };
    Some(rest[..end].trim())
}

fn transpose_all(t: Tensor) -> Tensor {
    crate::with_tensor!(t, a => {
        let r = a.reversed_axes();
        crate::Element::into_tensor(r.as_standard_layout().into_owned())
    })
}
