//! Elementwise functions of one operand: shape rule, gradients, native kernels.

use crate::ir::{DType, Graph, TensorType, UnaryOp, Value};
use crate::kernel::data::{Data, DataMut};
use crate::kernel::real::{Int, Real};
use crate::{Error, Result};

/// The element types each function accepts, and how an error names them.
fn domain(op: UnaryOp) -> (fn(DType) -> bool, &'static str) {
    match op {
        UnaryOp::Not => (|d| d == DType::Bool, "bool"),
        UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sign => (DType::is_numeric, "f32, f64, i32 or i64"),
        UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Tanh
        | UnaryOp::Logistic
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::Erf => (DType::is_arith_float, "f32 or f64"),
    }
}

/// Result type: the operand's.
pub(crate) fn check(g: &Graph, op: UnaryOp, x: Value) -> Result<TensorType> {
    let t = g.ty(x);
    let (accepts, want) = domain(op);
    if !accepts(t.dtype) {
        return Err(Error::shape(
            op.name(),
            format!("operand must be {want}, got {t}"),
        ));
    }
    Ok(t.clone())
}

/// d/dx of each function, times the cotangent.
pub(crate) fn vjp(g: &mut Graph, op: UnaryOp, x: Value, y: Value, ct: Value) -> Result<Value> {
    match op {
        UnaryOp::Neg => g.neg(ct),
        UnaryOp::Abs => {
            let s = g.unary(UnaryOp::Sign, x)?;
            g.mul(ct, s)
        }
        // Piecewise constant: zero almost everywhere, as in JAX.
        UnaryOp::Sign | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round => g.zeros_like(x),
        UnaryOp::Exp => g.mul(ct, y),
        UnaryOp::Expm1 => {
            let e = g.add_scalar(y, 1.0)?;
            g.mul(ct, e)
        }
        UnaryOp::Log => g.div(ct, x),
        UnaryOp::Log1p => {
            let d = g.add_scalar(x, 1.0)?;
            g.div(ct, d)
        }
        UnaryOp::Tanh => {
            // 1 - y²
            let y2 = g.mul(y, y)?;
            let one = g.full_like(1.0, y)?;
            let d = g.sub(one, y2)?;
            g.mul(ct, d)
        }
        UnaryOp::Logistic => {
            // y (1 - y)
            let one = g.full_like(1.0, y)?;
            let om = g.sub(one, y)?;
            let d = g.mul(y, om)?;
            g.mul(ct, d)
        }
        UnaryOp::Sqrt => {
            // 1 / (2 y)
            let t = g.div(ct, y)?;
            g.mul_scalar(t, 0.5)
        }
        UnaryOp::Rsqrt => {
            // -y / (2 x)
            let t = g.div(y, x)?;
            let t = g.mul(ct, t)?;
            g.mul_scalar(t, -0.5)
        }
        UnaryOp::Erf => {
            // 2/√π e^{-x²}
            let x2 = g.mul(x, x)?;
            let nx2 = g.neg(x2)?;
            let e = g.exp(nx2)?;
            let d = g.mul_scalar(e, std::f64::consts::FRAC_2_SQRT_PI)?;
            g.mul(ct, d)
        }
        UnaryOp::Not => Err(Error::Autodiff {
            message: "logical not has no gradient".into(),
        }),
    }
}

/// The float semantics of every function, over a slice (vectorises per arm).
#[inline(always)]
pub(crate) fn apply_real<T: Real>(op: UnaryOp, x: &[T], out: &mut [T]) {
    let one = T::one();
    // A macro, not a helper taking a closure, so every arm is its own tight loop.
    macro_rules! each {
        ($f:expr) => {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = $f(v);
            }
        };
    }
    match op {
        UnaryOp::Neg => each!(|v: T| -v),
        UnaryOp::Abs => each!(|v: T| v.abs()),
        UnaryOp::Sign => each!(|v: T| {
            if v > T::zero() {
                one
            } else if v < T::zero() {
                -one
            } else {
                v // ±0 and NaN pass through
            }
        }),
        UnaryOp::Exp => each!(|v: T| v.exp_k()),
        UnaryOp::Expm1 => each!(|v: T| v.exp_m1()),
        UnaryOp::Log => each!(|v: T| v.ln()),
        UnaryOp::Log1p => each!(|v: T| v.ln_1p()),
        UnaryOp::Tanh => each!(|v: T| v.tanh_k()),
        UnaryOp::Logistic => each!(|v: T| v.logistic_k()),
        UnaryOp::Sqrt => each!(|v: T| v.sqrt()),
        UnaryOp::Rsqrt => each!(|v: T| one / v.sqrt()),
        UnaryOp::Floor => each!(|v: T| v.floor()),
        UnaryOp::Ceil => each!(|v: T| v.ceil()),
        UnaryOp::Round => each!(|v: T| v.round()),
        UnaryOp::Erf => each!(|v: T| v.erf()),
        UnaryOp::Not => out.copy_from_slice(x), // unreachable: bool only
    }
}

fn apply_int<T: Int>(op: UnaryOp, x: &[T], out: &mut [T]) -> Result<()> {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = match op {
            UnaryOp::Neg => v.wrapping_neg(),
            UnaryOp::Abs => {
                if v < T::zero() {
                    v.wrapping_neg()
                } else {
                    v
                }
            }
            UnaryOp::Sign => v.signum(),
            // Float or bool only (`domain`): verified graphs never get here.
            UnaryOp::Exp
            | UnaryOp::Expm1
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Tanh
            | UnaryOp::Logistic
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Round
            | UnaryOp::Erf
            | UnaryOp::Not => return Err(super::unsupported(op.name(), DType::I64)),
        };
    }
    Ok(())
}

pub(crate) fn native(op: UnaryOp, x: Data<'_>, out: DataMut<'_>) -> Result<()> {
    match (x, out) {
        (Data::F32(a), DataMut::F32(o)) => apply_real(op, a, o),
        (Data::F64(a), DataMut::F64(o)) => apply_real(op, a, o),
        (Data::I32(a), DataMut::I32(o)) => apply_int(op, a, o)?,
        (Data::I64(a), DataMut::I64(o)) => apply_int(op, a, o)?,
        (Data::Bool(a), DataMut::Bool(o)) if op == UnaryOp::Not => {
            for (o, &v) in o.iter_mut().zip(a) {
                *o = !v;
            }
        }
        (x, _) => return Err(super::unsupported(op.name(), x.dtype())),
    }
    Ok(())
}

// ---- StableHLO lowering

use crate::ops::Emitter;

pub(crate) fn lower(e: &mut Emitter<'_>, op: UnaryOp, x: Value, ty: &TensorType) -> String {
    let (x, t) = (e.name(x), ty.mlir());
    match op {
        // StableHLO has no erf; CHLO's is decomposed by every plugin's compiler (it is what
        // jax.lax.erf exports as).
        UnaryOp::Erf => e.emit(format!("chlo.erf {x} : {t} -> {t}")),
        // These names are StableHLO's (listed, not defaulted, so a new function has to
        // choose its lowering).
        UnaryOp::Neg
        | UnaryOp::Abs
        | UnaryOp::Sign
        | UnaryOp::Exp
        | UnaryOp::Expm1
        | UnaryOp::Log
        | UnaryOp::Log1p
        | UnaryOp::Tanh
        | UnaryOp::Logistic
        | UnaryOp::Sqrt
        | UnaryOp::Rsqrt
        | UnaryOp::Floor
        | UnaryOp::Ceil
        | UnaryOp::Round
        | UnaryOp::Not => e.unary(op.name(), &x, &t),
    }
}
