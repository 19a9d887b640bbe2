//! Scalar traits the native kernels are generic over.

use crate::backend::native::data::Elem;

/// f32 and f64: the types arithmetic kernels run on.
pub(crate) trait Real: num_traits::Float + Elem + std::iter::Sum {
    fn erf(self) -> Self;
}

impl Real for f32 {
    fn erf(self) -> f32 {
        libm::erff(self)
    }
}

impl Real for f64 {
    fn erf(self) -> f64 {
        libm::erf(self)
    }
}

/// i32 and i64.
pub(crate) trait Int:
    num_traits::PrimInt
    + num_traits::WrappingAdd
    + num_traits::WrappingSub
    + num_traits::WrappingMul
    + num_traits::WrappingNeg
    + num_traits::Signed
    + Elem
{
}
impl Int for i32 {}
impl Int for i64 {}
