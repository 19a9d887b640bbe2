//! Scalar traits the native kernels are generic over.

use crate::kernel::data::Elem;

/// f32 and f64: the types arithmetic kernels run on.
pub(crate) trait Real: num_traits::Float + Elem + std::iter::Sum {
    fn erf(self) -> Self;
    /// `e^x`, `tanh x` and `1 / (1 + e^-x)` as the kernels compute them: for f32 without
    /// a libm call, so that a loop over them vectorises (see `fastmath`), for f64 libm's.
    fn exp_k(self) -> Self;
    fn tanh_k(self) -> Self;
    fn logistic_k(self) -> Self;
    /// Runs `f` with this thread's scratch registers for fused kernels (grown as needed,
    /// kept for the thread's life, so steady-state kernels allocate nothing).
    fn with_regs<R>(f: impl FnOnce(&mut Vec<Self>) -> R) -> R;
}

/// The register space (elements) a thread makes room for at once: enough for the fused
/// kernels of ordinary plans, so that none grows it in a steady state.
pub(crate) const REGS_RESERVE: usize = 32 * 1024;

/// Sizes this thread's f32 registers (the crew's workers call this when they start; see
/// [`REGS_RESERVE`]).
pub(crate) fn reserve_regs() {
    REGS_F32.with(|r| {
        let mut r = r.borrow_mut();
        if r.len() < REGS_RESERVE {
            r.resize(REGS_RESERVE, 0.0);
        }
    });
}

thread_local! {
    static REGS_F32: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
    static REGS_F64: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Real for f32 {
    fn erf(self) -> f32 {
        libm::erff(self)
    }
    #[inline(always)]
    fn exp_k(self) -> f32 {
        super::fastmath::exp(self)
    }
    #[inline(always)]
    fn tanh_k(self) -> f32 {
        super::fastmath::tanh(self)
    }
    #[inline(always)]
    fn logistic_k(self) -> f32 {
        super::fastmath::logistic(self)
    }
    fn with_regs<R>(f: impl FnOnce(&mut Vec<f32>) -> R) -> R {
        REGS_F32.with(|r| f(&mut r.borrow_mut()))
    }
}

impl Real for f64 {
    fn erf(self) -> f64 {
        libm::erf(self)
    }
    #[inline(always)]
    fn exp_k(self) -> f64 {
        self.exp()
    }
    #[inline(always)]
    fn tanh_k(self) -> f64 {
        self.tanh()
    }
    /// exp(-x) overflowing to inf for very negative x gives exactly 0, as it should.
    #[inline(always)]
    fn logistic_k(self) -> f64 {
        1.0 / (1.0 + (-self).exp())
    }
    fn with_regs<R>(f: impl FnOnce(&mut Vec<f64>) -> R) -> R {
        REGS_F64.with(|r| f(&mut r.borrow_mut()))
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
