//! Allocations whose size comes from user input (a layer's units, a batch size, a shape),
//! made so that one too large is an [`Error::OutOfMemory`] naming it, never an abort:
//! the size is computed with checked arithmetic and the memory is reserved fallibly.
//!
//! A size that fits is then reserved with `try_reserve_exact`. Under Linux's default
//! overcommit that fails for more than the machine's memory and swap, and smaller
//! reservations succeed and are backed lazily; beyond the address space it always fails.

use crate::types::TensorType;
use crate::{Error, Result};
use ndarray::{ArrayD, IxDyn};

/// The error for `what`, which needs `bytes` (`None`: the count overflowed).
pub(crate) fn out_of_memory(what: impl FnOnce() -> String, bytes: Option<u64>) -> Error {
    Error::OutOfMemory {
        what: what(),
        bytes,
    }
}

/// The elements of an array of `dims` with `elem` bytes each, when such an array can
/// exist: its bytes, counting every dimension as at least 1 (what `ndarray` needs to
/// index even an empty array), fit in `isize`. Otherwise the bytes it would need, or
/// `None` when they overflow 64 bits.
fn checked_len(dims: &[usize], elem: usize) -> Result<usize, Option<u64>> {
    let mut extent = elem as u64;
    let mut len = 1usize;
    for &d in dims {
        extent = extent.checked_mul(d.max(1) as u64).ok_or(None)?;
        len = len.saturating_mul(d);
    }
    if extent > isize::MAX as u64 {
        // The bytes the array holds (0 when a dimension is 0 is no help: it cannot be indexed).
        return Err(Some(extent));
    }
    Ok(len)
}

/// The element count of `ty`, checked: an error naming `what` when the tensor could not
/// exist.
pub(crate) fn element_count(what: impl FnOnce() -> String, ty: &TensorType) -> Result<usize> {
    checked_len(ty.dims(), ty.dtype.size_bytes()).map_err(|bytes| out_of_memory(what, bytes))
}

/// An empty vector with room for exactly `n` elements, or the error naming `what`.
pub(crate) fn vec_with_capacity<T>(what: impl FnOnce() -> String, n: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    match v.try_reserve_exact(n) {
        Ok(()) => Ok(v),
        Err(_) => {
            let bytes = (n as u64).checked_mul(std::mem::size_of::<T>() as u64);
            Err(out_of_memory(what, bytes))
        }
    }
}

/// `n` copies of `value`, or the error naming `what`.
pub(crate) fn vec_filled<T: Clone>(
    what: impl FnOnce() -> String,
    n: usize,
    value: T,
) -> Result<Vec<T>> {
    let mut v = vec_with_capacity(what, n)?;
    v.resize(n, value);
    Ok(v)
}

/// An array of `dims` whose elements `f` makes in row-major order, or the error naming
/// `what` when it cannot be allocated.
pub(crate) fn array_from_fn<T>(
    what: impl FnOnce() -> String,
    dims: &[usize],
    f: impl FnMut() -> T,
) -> Result<ArrayD<T>> {
    let n = match checked_len(dims, std::mem::size_of::<T>()) {
        Ok(n) => n,
        Err(bytes) => return Err(out_of_memory(what, bytes)),
    };
    let mut v = vec_with_capacity(what, n)?;
    v.extend(std::iter::repeat_with(f).take(n));
    array_from_vec(dims, v)
}

/// An array of `dims` filled with `value`, or the error naming `what`.
pub(crate) fn array_filled<T: Clone>(
    what: impl FnOnce() -> String,
    dims: &[usize],
    value: T,
) -> Result<ArrayD<T>> {
    array_from_fn(what, dims, || value.clone())
}

/// `v` as an array of `dims`; `v` holds the product of `dims` elements, checked by
/// `checked_len`.
fn array_from_vec<T>(dims: &[usize], v: Vec<T>) -> Result<ArrayD<T>> {
    let len = v.len();
    ArrayD::from_shape_vec(IxDyn(dims), v).map_err(|e| {
        Error::invalid(
            "array",
            format!("{len} elements do not make an array of shape {dims:?}: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::DType;

    #[test]
    fn sizes_that_fit_are_counted() {
        assert_eq!(checked_len(&[3, 4], 4), Ok(12));
        assert_eq!(checked_len(&[], 8), Ok(1));
        assert_eq!(checked_len(&[0, 7], 4), Ok(0));
        assert_eq!(checked_len(&[(1 << 62) - 1], 2), Ok((1 << 62) - 1));
    }

    #[test]
    fn sizes_beyond_the_address_space_are_refused() {
        // The element count wraps to 0 in 64 bits.
        assert_eq!(checked_len(&[1 << 32, 1 << 32], 4), Err(None));
        assert_eq!(checked_len(&[usize::MAX; 3], 1), Err(None));
        // Counted, but more than isize::MAX bytes.
        assert_eq!(checked_len(&[1 << 62], 2), Err(Some(1 << 63)));
        // Empty, but not indexable by ndarray.
        assert_eq!(checked_len(&[0, 1 << 31, 1 << 32], 1), Err(Some(1 << 63)));
        assert_eq!(checked_len(&[0, 1 << 40, 1 << 40], 1), Err(None));
    }

    #[test]
    fn errors_name_what_was_allocated_and_its_size() {
        let ty = TensorType::new(DType::F32, [1 << 40, 1 << 40]);
        let e = element_count(|| format!("weights {ty}"), &ty).unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { bytes: None, .. }));
        assert_eq!(
            e.to_string(),
            "weights f32[1099511627776, 1099511627776] needs more than 2^64 bytes (its size \
             overflows 64 bits), more than any machine can allocate"
        );
        let ty = TensorType::new(DType::F64, [1 << 40, 1 << 20]);
        let e = element_count(|| format!("weights {ty}"), &ty).unwrap_err();
        assert_eq!(
            e.to_string(),
            "weights f64[1099511627776, 1048576] needs 9223372036854775808 bytes (8.00 EB), \
             more than this machine can allocate"
        );
        let e = vec_with_capacity::<u64>(|| "rows".into(), usize::MAX).unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { bytes: None, .. }));
        let e = vec_with_capacity::<u32>(|| "rows".into(), 1 << 60).unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { bytes: Some(b), .. } if b == 1 << 62));
        // Beyond a 47-bit address space: refused on every machine.
        let e = vec_filled(|| "ones".into(), 1 << 48, 1u8).unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { bytes: Some(b), .. } if b == 1 << 48));
    }

    #[test]
    fn arrays_are_made_in_row_major_order() {
        let mut i = 0;
        let a = array_from_fn(String::new, &[2, 3], || {
            i += 1;
            i
        })
        .unwrap();
        assert_eq!(a.as_slice().unwrap(), &[1, 2, 3, 4, 5, 6]);
        assert_eq!(
            array_filled(String::new, &[0, 5], 1.0f32).unwrap().shape(),
            &[0, 5]
        );
        let e = array_filled(|| "big".into(), &[1 << 30, 1 << 30], 0.0f64).unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { bytes: Some(b), .. } if b == 1 << 63));
    }
}
