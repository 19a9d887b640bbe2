//! Host tensors: `ndarray` arrays tagged with their element type.
//!
//! This is the type at every API boundary: graph constants, inputs and outputs of a
//! backend, weights in checkpoints.

use crate::memory::{array_filled, element_count};
use crate::types::{DType, Shape, TensorType};
use crate::{Error, Result};
use half::bf16;
use ndarray::{ArrayD, IxDyn};

/// A dense host array of any supported element type.
#[derive(Clone, Debug, PartialEq)]
pub enum Tensor {
    F32(ArrayD<f32>),
    F64(ArrayD<f64>),
    BF16(ArrayD<bf16>),
    I32(ArrayD<i32>),
    I64(ArrayD<i64>),
    Bool(ArrayD<bool>),
}

/// A Rust scalar type that has an IR element type.
pub trait Element: Copy + Default + PartialEq + Send + Sync + std::fmt::Debug + 'static {
    const DTYPE: DType;
    fn into_tensor(a: ArrayD<Self>) -> Tensor;
    fn view_tensor(t: &Tensor) -> Option<&ArrayD<Self>>;
    fn take_tensor(t: Tensor) -> Option<ArrayD<Self>>;
}

macro_rules! element {
    ($t:ty, $variant:ident) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            fn into_tensor(a: ArrayD<Self>) -> Tensor {
                Tensor::$variant(a)
            }
            fn view_tensor(t: &Tensor) -> Option<&ArrayD<Self>> {
                match t {
                    Tensor::$variant(a) => Some(a),
                    _ => None,
                }
            }
            fn take_tensor(t: Tensor) -> Option<ArrayD<Self>> {
                match t {
                    Tensor::$variant(a) => Some(a),
                    _ => None,
                }
            }
        }
    };
}
element!(f32, F32);
element!(f64, F64);
element!(bf16, BF16);
element!(i32, I32);
element!(i64, I64);
element!(bool, Bool);

/// Applies `$body` to the array inside a tensor whatever its element type.
#[macro_export]
#[doc(hidden)]
macro_rules! with_tensor {
    ($t:expr, $a:ident => $body:expr) => {
        match $t {
            $crate::Tensor::F32($a) => $body,
            $crate::Tensor::F64($a) => $body,
            $crate::Tensor::BF16($a) => $body,
            $crate::Tensor::I32($a) => $body,
            $crate::Tensor::I64($a) => $body,
            $crate::Tensor::Bool($a) => $body,
        }
    };
}

impl Tensor {
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::F32(_) => DType::F32,
            Tensor::F64(_) => DType::F64,
            Tensor::BF16(_) => DType::BF16,
            Tensor::I32(_) => DType::I32,
            Tensor::I64(_) => DType::I64,
            Tensor::Bool(_) => DType::Bool,
        }
    }

    pub fn dims(&self) -> &[usize] {
        with_tensor!(self, a => a.shape())
    }

    pub fn shape(&self) -> Shape {
        Shape::from(self.dims())
    }

    pub fn ty(&self) -> TensorType {
        TensorType::new(self.dtype(), self.shape())
    }

    pub fn numel(&self) -> usize {
        with_tensor!(self, a => a.len())
    }

    /// A tensor of zeros of the given type; [`Error::OutOfMemory`] when it cannot be
    /// allocated.
    pub fn zeros(ty: &TensorType) -> Result<Tensor> {
        let what = || format!("Tensor::zeros({ty})");
        let d = ty.dims();
        Ok(match ty.dtype {
            DType::F32 => Tensor::F32(array_filled(what, d, 0.0)?),
            DType::F64 => Tensor::F64(array_filled(what, d, 0.0)?),
            DType::BF16 => Tensor::BF16(array_filled(what, d, bf16::ZERO)?),
            DType::I32 => Tensor::I32(array_filled(what, d, 0)?),
            DType::I64 => Tensor::I64(array_filled(what, d, 0)?),
            DType::Bool => Tensor::Bool(array_filled(what, d, false)?),
        })
    }

    /// A rank-0 tensor.
    pub fn scalar<T: Element>(v: T) -> Tensor {
        T::into_tensor(ArrayD::from_elem(IxDyn(&[]), v))
    }

    /// A tensor from row-major data; errors if the element count does not match the shape
    /// ([`Error::OutOfMemory`] when no tensor of that shape could exist).
    pub fn from_vec<T: Element>(dims: &[usize], data: Vec<T>) -> Result<Tensor> {
        let ty = TensorType::new(T::DTYPE, dims);
        let n = element_count(|| format!("Tensor::from_vec({ty})"), &ty)?;
        if n != data.len() {
            return Err(Error::InvalidArgument {
                what: "Tensor::from_vec".into(),
                message: format!(
                    "shape {} needs {n} elements, got {}",
                    Shape::from(dims),
                    data.len()
                ),
            });
        }
        let a = ArrayD::from_shape_vec(IxDyn(dims), data)
            .map_err(|e| Error::invalid("Tensor::from_vec", format!("shape {}: {e}", ty.shape)))?;
        Ok(T::into_tensor(a))
    }

    /// The array, if the element type is `T`.
    pub fn array<T: Element>(&self) -> Result<&ArrayD<T>> {
        T::view_tensor(self).ok_or_else(|| Error::DType {
            what: "Tensor::array".into(),
            expected: T::DTYPE,
            got: self.dtype(),
        })
    }

    /// The array with its static dimension (`Ix2` for a batch of vectors), if the element
    /// type is `T` and the rank is `D`'s: `let p: Array2<f32> = t.into_array()?`.
    pub fn into_array<T: Element, D: ndarray::Dimension>(self) -> Result<ndarray::Array<T, D>> {
        let (dtype, shape) = (self.dtype(), self.shape());
        let a = T::take_tensor(self).ok_or(Error::DType {
            what: "Tensor::into_array".into(),
            expected: T::DTYPE,
            got: dtype,
        })?;
        a.into_dimensionality::<D>().map_err(|_| {
            Error::invalid(
                "Tensor::into_array",
                format!(
                    "an array of rank {} was asked for, the tensor has shape {shape} (rank {})",
                    D::NDIM.map_or("any".to_string(), |n| n.to_string()),
                    shape.rank()
                ),
            )
        })
    }

    /// The elements in row-major order, if the element type is `T`.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        Ok(self.array::<T>()?.iter().copied().collect())
    }

    /// Whether no element is NaN or ±∞ (integer and boolean tensors always are).
    pub fn is_all_finite(&self) -> bool {
        match self {
            Tensor::F32(a) => a.iter().all(|v| v.is_finite()),
            Tensor::F64(a) => a.iter().all(|v| v.is_finite()),
            Tensor::BF16(a) => a.iter().all(|v| v.is_finite()),
            Tensor::I32(_) | Tensor::I64(_) | Tensor::Bool(_) => true,
        }
    }

    /// The single element of a one-element tensor converted to f64 (for losses and metrics).
    pub fn scalar_f64(&self) -> Result<f64> {
        if self.numel() != 1 {
            return Err(Error::InvalidArgument {
                what: "Tensor::scalar_f64".into(),
                message: format!("expected one element, got shape {}", self.shape()),
            });
        }
        Ok(match self {
            Tensor::F32(a) => a.iter().next().copied().unwrap_or_default() as f64,
            Tensor::F64(a) => a.iter().next().copied().unwrap_or_default(),
            Tensor::BF16(a) => a.iter().next().copied().unwrap_or_default().to_f64(),
            Tensor::I32(a) => a.iter().next().copied().unwrap_or_default() as f64,
            Tensor::I64(a) => a.iter().next().copied().unwrap_or_default() as f64,
            Tensor::Bool(a) => a.iter().next().copied().unwrap_or_default() as u8 as f64,
        })
    }
}

impl<T: Element, D: ndarray::Dimension> From<ndarray::Array<T, D>> for Tensor {
    fn from(a: ndarray::Array<T, D>) -> Self {
        T::into_tensor(a.into_dyn())
    }
}

impl Default for Tensor {
    /// An empty f32 vector.
    fn default() -> Tensor {
        Tensor::F32(ArrayD::zeros(IxDyn(&[0])))
    }
}
