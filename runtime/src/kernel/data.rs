//! Typed host storage for the native backend, and the slice views kernels work on.

use crate::memory::vec_filled;
use crate::types::{DType, TensorType};
use crate::{Error, Result, Tensor};
use half::bf16;
use ndarray::{ArrayD, IxDyn};

/// Owned, dense, row-major elements of one type.
#[derive(Clone, Debug, PartialEq)]
pub enum Storage {
    F32(Vec<f32>),
    F64(Vec<f64>),
    BF16(Vec<bf16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

/// A read-only typed view.
#[derive(Clone, Copy, Debug)]
pub enum Data<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    BF16(&'a [bf16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    Bool(&'a [bool]),
}

/// The parts of a [`DataMut`], to rebuild views of disjoint ranges on several threads.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawMut {
    ptr: *mut u8,
    len: usize,
    dtype: DType,
}

// SAFETY: a RawMut is only turned back into views of disjoint ranges (see `range`), each
// used by one thread, while the view it came from is not used.
unsafe impl Send for RawMut {}
unsafe impl Sync for RawMut {}

impl RawMut {
    /// Elements `lo..hi` as a writable view.
    ///
    /// # Safety
    /// `lo <= hi <= len`, the view this came from must outlive the result and not be used
    /// meanwhile, and no two live results may overlap.
    pub unsafe fn range<'a>(self, lo: usize, hi: usize) -> DataMut<'a> {
        debug_assert!(lo <= hi && hi <= self.len);
        let n = hi - lo;
        // SAFETY: guaranteed by the caller, per the contract above.
        unsafe {
            match self.dtype {
                DType::F32 => DataMut::F32(std::slice::from_raw_parts_mut(
                    (self.ptr as *mut f32).add(lo),
                    n,
                )),
                DType::F64 => DataMut::F64(std::slice::from_raw_parts_mut(
                    (self.ptr as *mut f64).add(lo),
                    n,
                )),
                DType::BF16 => DataMut::BF16(std::slice::from_raw_parts_mut(
                    (self.ptr as *mut bf16).add(lo),
                    n,
                )),
                DType::I32 => DataMut::I32(std::slice::from_raw_parts_mut(
                    (self.ptr as *mut i32).add(lo),
                    n,
                )),
                DType::I64 => DataMut::I64(std::slice::from_raw_parts_mut(
                    (self.ptr as *mut i64).add(lo),
                    n,
                )),
                DType::Bool => DataMut::Bool(std::slice::from_raw_parts_mut(
                    (self.ptr as *mut bool).add(lo),
                    n,
                )),
            }
        }
    }
}

/// A writable typed view.
#[derive(Debug)]
pub enum DataMut<'a> {
    F32(&'a mut [f32]),
    F64(&'a mut [f64]),
    BF16(&'a mut [bf16]),
    I32(&'a mut [i32]),
    I64(&'a mut [i64]),
    Bool(&'a mut [bool]),
}

/// Runs `$body` with `$a` bound to the typed slice, whatever the element type.
macro_rules! with_data {
    ($d:expr, $a:ident => $body:expr) => {
        match $d {
            $crate::kernel::data::Data::F32($a) => $body,
            $crate::kernel::data::Data::F64($a) => $body,
            $crate::kernel::data::Data::BF16($a) => $body,
            $crate::kernel::data::Data::I32($a) => $body,
            $crate::kernel::data::Data::I64($a) => $body,
            $crate::kernel::data::Data::Bool($a) => $body,
        }
    };
}

/// Runs `$body` with a source and destination of the same element type (data movement).
/// A type mismatch is an internal error: graphs are verified before they run.
macro_rules! with_same {
    ($what:expr, $x:expr, $out:expr, |$a:ident, $b:ident| $body:expr) => {{
        use $crate::kernel::data::{Data as D, DataMut as M};
        match ($x, $out) {
            (D::F32($a), M::F32($b)) => $body,
            (D::F64($a), M::F64($b)) => $body,
            (D::BF16($a), M::BF16($b)) => $body,
            (D::I32($a), M::I32($b)) => $body,
            (D::I64($a), M::I64($b)) => $body,
            (D::Bool($a), M::Bool($b)) => $body,
            (x, out) => {
                return Err($crate::kernel::data::type_mismatch(
                    $what,
                    x.dtype(),
                    out.dtype(),
                ))
            }
        }
    }};
}

pub(crate) use {with_data, with_same};

/// A Rust element type of the native backend, with checked access to typed views.
pub(crate) trait Elem: Copy + Default + Send + Sync + std::fmt::Debug + 'static {
    fn of(d: Data<'_>) -> Option<&[Self]>;
    fn of_mut(d: DataMut<'_>) -> Option<&mut [Self]>;
}

macro_rules! elem {
    ($t:ty, $v:ident) => {
        impl Elem for $t {
            fn of(d: Data<'_>) -> Option<&[Self]> {
                match d {
                    Data::$v(a) => Some(a),
                    _ => None,
                }
            }
            fn of_mut(d: DataMut<'_>) -> Option<&mut [Self]> {
                match d {
                    DataMut::$v(a) => Some(a),
                    _ => None,
                }
            }
        }
    };
}
elem!(f32, F32);
elem!(f64, F64);
elem!(bf16, BF16);
elem!(i32, I32);
elem!(i64, I64);
elem!(bool, Bool);

pub(crate) fn type_mismatch(what: &str, a: DType, b: DType) -> Error {
    Error::Backend {
        backend: "native",
        message: format!("{what}: internal element type mismatch {a} vs {b}"),
    }
}

impl Storage {
    /// `n` zeros, or the error naming `what` when they cannot be allocated.
    pub fn zeros(what: impl FnOnce() -> String, dtype: DType, n: usize) -> Result<Storage> {
        Ok(match dtype {
            DType::F32 => Storage::F32(vec_filled(what, n, 0.0)?),
            DType::F64 => Storage::F64(vec_filled(what, n, 0.0)?),
            DType::BF16 => Storage::BF16(vec_filled(what, n, bf16::ZERO)?),
            DType::I32 => Storage::I32(vec_filled(what, n, 0)?),
            DType::I64 => Storage::I64(vec_filled(what, n, 0)?),
            DType::Bool => Storage::Bool(vec_filled(what, n, false)?),
        })
    }

    pub fn dtype(&self) -> DType {
        self.data().dtype()
    }

    pub fn len(&self) -> usize {
        with_data!(self.data(), a => a.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn data(&self) -> Data<'_> {
        match self {
            Storage::F32(v) => Data::F32(v),
            Storage::F64(v) => Data::F64(v),
            Storage::BF16(v) => Data::BF16(v),
            Storage::I32(v) => Data::I32(v),
            Storage::I64(v) => Data::I64(v),
            Storage::Bool(v) => Data::Bool(v),
        }
    }

    /// The first `n` elements, read-only.
    pub fn prefix(&self, n: usize) -> Data<'_> {
        match self {
            Storage::F32(v) => Data::F32(&v[..n]),
            Storage::F64(v) => Data::F64(&v[..n]),
            Storage::BF16(v) => Data::BF16(&v[..n]),
            Storage::I32(v) => Data::I32(&v[..n]),
            Storage::I64(v) => Data::I64(&v[..n]),
            Storage::Bool(v) => Data::Bool(&v[..n]),
        }
    }

    /// `n` elements from `start`, read-only; `None` past the end.
    pub fn range(&self, start: usize, n: usize) -> Option<Data<'_>> {
        let r = start..start.checked_add(n)?;
        Some(match self {
            Storage::F32(v) => Data::F32(v.get(r)?),
            Storage::F64(v) => Data::F64(v.get(r)?),
            Storage::BF16(v) => Data::BF16(v.get(r)?),
            Storage::I32(v) => Data::I32(v.get(r)?),
            Storage::I64(v) => Data::I64(v.get(r)?),
            Storage::Bool(v) => Data::Bool(v.get(r)?),
        })
    }

    /// The first `n` elements, writable.
    pub fn prefix_mut(&mut self, n: usize) -> DataMut<'_> {
        match self {
            Storage::F32(v) => DataMut::F32(&mut v[..n]),
            Storage::F64(v) => DataMut::F64(&mut v[..n]),
            Storage::BF16(v) => DataMut::BF16(&mut v[..n]),
            Storage::I32(v) => DataMut::I32(&mut v[..n]),
            Storage::I64(v) => DataMut::I64(&mut v[..n]),
            Storage::Bool(v) => DataMut::Bool(&mut v[..n]),
        }
    }

    pub fn data_mut(&mut self) -> DataMut<'_> {
        let n = self.len();
        self.prefix_mut(n)
    }

    /// Copies a host tensor's elements (row-major).
    pub fn from_tensor(t: &Tensor) -> Storage {
        fn v<T: Clone>(a: &ArrayD<T>) -> Vec<T> {
            match a.as_slice() {
                Some(s) => s.to_vec(),
                None => a.iter().cloned().collect(),
            }
        }
        match t {
            Tensor::F32(a) => Storage::F32(v(a)),
            Tensor::F64(a) => Storage::F64(v(a)),
            Tensor::BF16(a) => Storage::BF16(v(a)),
            Tensor::I32(a) => Storage::I32(v(a)),
            Tensor::I64(a) => Storage::I64(v(a)),
            Tensor::Bool(a) => Storage::Bool(v(a)),
        }
    }

    /// Overwrites this storage with a tensor's elements, reusing the allocation when the
    /// element type matches.
    pub fn assign_from_tensor(&mut self, t: &Tensor) {
        fn fill<T: Clone>(dst: &mut Vec<T>, a: &ArrayD<T>) {
            dst.clear();
            match a.as_slice() {
                Some(s) => dst.extend_from_slice(s),
                None => dst.extend(a.iter().cloned()),
            }
        }
        match (self, t) {
            (Storage::F32(d), Tensor::F32(a)) => fill(d, a),
            (Storage::F64(d), Tensor::F64(a)) => fill(d, a),
            (Storage::BF16(d), Tensor::BF16(a)) => fill(d, a),
            (Storage::I32(d), Tensor::I32(a)) => fill(d, a),
            (Storage::I64(d), Tensor::I64(a)) => fill(d, a),
            (Storage::Bool(d), Tensor::Bool(a)) => fill(d, a),
            (s, t) => *s = Storage::from_tensor(t),
        }
    }

    /// Exchanges this storage's memory with `t`'s when they hold as many elements of one
    /// type and `t` is contiguous: `t` keeps its shape and takes this storage's old values.
    /// Returns whether it did (otherwise nothing changed). A step's input then costs no
    /// copy: the caller refills `t` for the next step anyway.
    pub fn swap_with_tensor(&mut self, t: &mut Tensor) -> bool {
        fn swap<T: Clone>(dst: &mut Vec<T>, a: &mut ArrayD<T>) -> bool {
            let n = a.len();
            if !a.is_standard_layout() || n != dst.len() {
                return false;
            }
            let shape = a.raw_dim();
            // An empty placeholder: no allocation (small shapes live inline).
            let Ok(empty) = ArrayD::from_shape_vec(IxDyn(&[0]), Vec::new()) else {
                return false;
            };
            let (mut v, offset) = std::mem::replace(a, empty).into_raw_vec_and_offset();
            let offset = offset.unwrap_or(0);
            let swapped = offset == 0 && v.len() == n;
            if swapped {
                std::mem::swap(dst, &mut v);
            } else {
                // A view into a larger vector (never made by the data pipeline): keep the
                // values, copied out.
                v = v[offset..offset + n].to_vec();
            }
            match ArrayD::from_shape_vec(shape, v) {
                Ok(back) => {
                    *a = back;
                    swapped
                }
                Err(_) => false, // lengths match: not reached
            }
        }
        match (self, t) {
            (Storage::F32(d), Tensor::F32(a)) => swap(d, a),
            (Storage::F64(d), Tensor::F64(a)) => swap(d, a),
            (Storage::BF16(d), Tensor::BF16(a)) => swap(d, a),
            (Storage::I32(d), Tensor::I32(a)) => swap(d, a),
            (Storage::I64(d), Tensor::I64(a)) => swap(d, a),
            (Storage::Bool(d), Tensor::Bool(a)) => swap(d, a),
            _ => false,
        }
    }

    /// The first `ty.numel()` elements as a host tensor of type `ty`.
    pub fn to_tensor(&self, ty: &TensorType) -> Result<Tensor> {
        let n = ty.numel();
        if self.dtype() != ty.dtype || self.len() < n {
            return Err(Error::Backend {
                backend: "native",
                message: format!(
                    "buffer of {} {} elements cannot hold {ty}",
                    self.len(),
                    self.dtype()
                ),
            });
        }
        let d = IxDyn(ty.dims());
        fn arr<T: Clone>(d: IxDyn, s: &[T]) -> ArrayD<T> {
            ArrayD::from_shape_vec(d, s.to_vec()).expect("length checked by caller")
        }
        Ok(match self.prefix(n) {
            Data::F32(s) => Tensor::F32(arr(d, s)),
            Data::F64(s) => Tensor::F64(arr(d, s)),
            Data::BF16(s) => Tensor::BF16(arr(d, s)),
            Data::I32(s) => Tensor::I32(arr(d, s)),
            Data::I64(s) => Tensor::I64(arr(d, s)),
            Data::Bool(s) => Tensor::Bool(arr(d, s)),
        })
    }
}

impl Data<'_> {
    pub fn dtype(&self) -> DType {
        match self {
            Data::F32(_) => DType::F32,
            Data::F64(_) => DType::F64,
            Data::BF16(_) => DType::BF16,
            Data::I32(_) => DType::I32,
            Data::I64(_) => DType::I64,
            Data::Bool(_) => DType::Bool,
        }
    }

    pub fn len(&self) -> usize {
        with_data!(self, a => a.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An owned copy.
    pub fn to_storage(self) -> Storage {
        match self {
            Data::F32(a) => Storage::F32(a.to_vec()),
            Data::F64(a) => Storage::F64(a.to_vec()),
            Data::BF16(a) => Storage::BF16(a.to_vec()),
            Data::I32(a) => Storage::I32(a.to_vec()),
            Data::I64(a) => Storage::I64(a.to_vec()),
            Data::Bool(a) => Storage::Bool(a.to_vec()),
        }
    }

    /// Index values as `i64`, for gather/scatter (indices are i32 or i64).
    pub fn index(&self, i: usize) -> i64 {
        match self {
            Data::I32(a) => a[i] as i64,
            Data::I64(a) => a[i],
            _ => 0,
        }
    }
}

impl<'a> DataMut<'a> {
    pub fn dtype(&self) -> DType {
        match self {
            DataMut::F32(_) => DType::F32,
            DataMut::F64(_) => DType::F64,
            DataMut::BF16(_) => DType::BF16,
            DataMut::I32(_) => DType::I32,
            DataMut::I64(_) => DType::I64,
            DataMut::Bool(_) => DType::Bool,
        }
    }

    /// A read-only view of the same elements.
    pub fn as_data(&self) -> Data<'_> {
        match self {
            DataMut::F32(a) => Data::F32(a),
            DataMut::F64(a) => Data::F64(a),
            DataMut::BF16(a) => Data::BF16(a),
            DataMut::I32(a) => Data::I32(a),
            DataMut::I64(a) => Data::I64(a),
            DataMut::Bool(a) => Data::Bool(a),
        }
    }

    /// The view's parts, so disjoint ranges of it can be written from different threads.
    pub(crate) fn raw(&mut self) -> RawMut {
        let len = self.as_data().len();
        let dtype = self.dtype();
        let ptr = match self {
            DataMut::F32(a) => a.as_mut_ptr() as *mut u8,
            DataMut::F64(a) => a.as_mut_ptr() as *mut u8,
            DataMut::BF16(a) => a.as_mut_ptr() as *mut u8,
            DataMut::I32(a) => a.as_mut_ptr() as *mut u8,
            DataMut::I64(a) => a.as_mut_ptr() as *mut u8,
            DataMut::Bool(a) => a.as_mut_ptr() as *mut u8,
        };
        RawMut { ptr, len, dtype }
    }

    /// Splits into `[..mid]` and `[mid..]`.
    pub fn split_at_mut(self, mid: usize) -> (DataMut<'a>, DataMut<'a>) {
        match self {
            DataMut::F32(a) => {
                let (x, y) = a.split_at_mut(mid);
                (DataMut::F32(x), DataMut::F32(y))
            }
            DataMut::F64(a) => {
                let (x, y) = a.split_at_mut(mid);
                (DataMut::F64(x), DataMut::F64(y))
            }
            DataMut::BF16(a) => {
                let (x, y) = a.split_at_mut(mid);
                (DataMut::BF16(x), DataMut::BF16(y))
            }
            DataMut::I32(a) => {
                let (x, y) = a.split_at_mut(mid);
                (DataMut::I32(x), DataMut::I32(y))
            }
            DataMut::I64(a) => {
                let (x, y) = a.split_at_mut(mid);
                (DataMut::I64(x), DataMut::I64(y))
            }
            DataMut::Bool(a) => {
                let (x, y) = a.split_at_mut(mid);
                (DataMut::Bool(x), DataMut::Bool(y))
            }
        }
    }

    /// Reborrows as a shorter-lived writable view.
    pub fn reborrow(&mut self) -> DataMut<'_> {
        match self {
            DataMut::F32(a) => DataMut::F32(a),
            DataMut::F64(a) => DataMut::F64(a),
            DataMut::BF16(a) => DataMut::BF16(a),
            DataMut::I32(a) => DataMut::I32(a),
            DataMut::I64(a) => DataMut::I64(a),
            DataMut::Bool(a) => DataMut::Bool(a),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swapping_with_a_tensor_exchanges_values_and_keeps_shapes() {
        let mut s = Storage::F32(vec![1.0, 2.0, 3.0, 4.0]);
        let mut t = Tensor::from_vec(&[2, 2], vec![5.0f32, 6.0, 7.0, 8.0]).unwrap();
        assert!(s.swap_with_tensor(&mut t));
        assert!(matches!(&s, Storage::F32(v) if v == &[5.0, 6.0, 7.0, 8.0]));
        assert_eq!(t.dims(), &[2, 2]);
        assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
        // Another length or type: nothing changes.
        let mut short = Tensor::from_vec(&[3], vec![9.0f32, 9.0, 9.0]).unwrap();
        assert!(!s.swap_with_tensor(&mut short));
        assert_eq!(short.to_vec::<f32>().unwrap(), [9.0, 9.0, 9.0]);
        let mut ints = Tensor::from_vec(&[4], vec![1i32, 2, 3, 4]).unwrap();
        assert!(!s.swap_with_tensor(&mut ints));
        assert!(matches!(&s, Storage::F32(v) if v == &[5.0, 6.0, 7.0, 8.0]));
    }
}
