//! Elementwise functions of two operands: shape rule, gradients, native kernels.

use crate::ir::{BinaryOp, Comparison, DType, Graph, TensorType, UnaryOp, Value};
use crate::kernel::data::{Data, DataMut};
use crate::kernel::real::{Int, Real};
use crate::{Error, Result};

/// The element types each function accepts, and how an error names them.
fn domain(op: BinaryOp) -> (fn(DType) -> bool, &'static str) {
    match op {
        BinaryOp::And | BinaryOp::Or => (|d| d == DType::Bool, "bool"),
        BinaryOp::Add
        | BinaryOp::Sub
        | BinaryOp::Mul
        | BinaryOp::Div
        | BinaryOp::Max
        | BinaryOp::Min
        | BinaryOp::Pow => (DType::is_numeric, "f32, f64, i32 or i64"),
    }
}

/// Both operands have the same type, which is the result's. (NumPy broadcasting is the
/// job of [`Graph::add`] and friends, which insert `broadcast_in_dim`.)
pub(crate) fn check(g: &Graph, op: BinaryOp, lhs: Value, rhs: Value) -> Result<TensorType> {
    let (a, b) = (g.ty(lhs), g.ty(rhs));
    if a != b {
        return Err(Error::shape(
            op.name(),
            format!("operands must have the same type, got {a} and {b}"),
        ));
    }
    let (accepts, want) = domain(op);
    if !accepts(a.dtype) {
        return Err(Error::shape(
            op.name(),
            format!("operands must be {want}, got {a}"),
        ));
    }
    Ok(a.clone())
}

/// Cotangents of (lhs, rhs).
pub(crate) fn vjp(
    g: &mut Graph,
    op: BinaryOp,
    a: Value,
    b: Value,
    y: Value,
    ct: Value,
) -> Result<(Value, Value)> {
    Ok(match op {
        BinaryOp::Add => (ct, ct),
        BinaryOp::Sub => (ct, g.neg(ct)?),
        BinaryOp::Mul => (g.mul(ct, b)?, g.mul(ct, a)?),
        BinaryOp::Div => {
            let da = g.div(ct, b)?;
            // -ct * a / b² = -(ct / b) * y
            let t = g.mul(da, y)?;
            (da, g.neg(t)?)
        }
        BinaryOp::Max | BinaryOp::Min => {
            // The gradient goes to the selected operand; ties split it evenly (as JAX).
            let win = if op == BinaryOp::Max {
                Comparison::Gt
            } else {
                Comparison::Lt
            };
            let a_wins = g.compare(win, a, b)?;
            let tie = g.compare(Comparison::Eq, a, b)?;
            let one = g.full_like(1.0, a)?;
            let half = g.full_like(0.5, a)?;
            let zero = g.zeros_like(a)?;
            let tie_share = g.select(tie, half, zero)?;
            let wa = g.select(a_wins, one, tie_share)?;
            let wb = g.sub(one, wa)?;
            (g.mul(ct, wa)?, g.mul(ct, wb)?)
        }
        BinaryOp::Pow => {
            // d/da = b a^(b-1); d/db = y ln a (taking ln 1 = 0 where a = 0, as JAX)
            let bm1 = g.add_scalar(b, -1.0)?;
            let p = g.pow(a, bm1)?;
            let da = g.mul(b, p)?;
            let da = g.mul(ct, da)?;
            let zero = g.zeros_like(a)?;
            let one = g.full_like(1.0, a)?;
            let is0 = g.compare(Comparison::Eq, a, zero)?;
            let safe = g.select(is0, one, a)?;
            let ln = g.unary(UnaryOp::Log, safe)?;
            let db = g.mul(y, ln)?;
            (da, g.mul(ct, db)?)
        }
        BinaryOp::And | BinaryOp::Or => {
            return Err(Error::Autodiff {
                message: format!("logical {} has no gradient", op.name()),
            })
        }
    })
}

/// The float semantics, over slices (one tight loop per function).
#[inline(always)]
pub(crate) fn apply_real<T: Real>(op: BinaryOp, a: &[T], b: &[T], out: &mut [T]) {
    macro_rules! each {
        ($f:expr) => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = $f(x, y);
            }
        };
    }
    match op {
        BinaryOp::Add => each!(|x: T, y: T| x + y),
        BinaryOp::Sub => each!(|x: T, y: T| x - y),
        BinaryOp::Mul => each!(|x: T, y: T| x * y),
        BinaryOp::Div => each!(|x: T, y: T| x / y),
        BinaryOp::Max => each!(|x: T, y: T| if x.is_nan() || x > y { x } else { y }),
        BinaryOp::Min => each!(|x: T, y: T| if x.is_nan() || x < y { x } else { y }),
        BinaryOp::Pow => each!(|x: T, y: T| x.powf(y)),
        BinaryOp::And | BinaryOp::Or => {} // unreachable: bool only
    }
}

fn apply_int<T: Int>(op: BinaryOp, a: &[T], b: &[T], out: &mut [T]) -> Result<()> {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = match op {
            BinaryOp::Add => x.wrapping_add(&y),
            BinaryOp::Sub => x.wrapping_sub(&y),
            BinaryOp::Mul => x.wrapping_mul(&y),
            // Division by zero gives -1 and MIN / -1 gives MIN, as XLA's CPU backend.
            BinaryOp::Div => {
                if y == T::zero() {
                    -T::one()
                } else if y == -T::one() {
                    x.wrapping_neg()
                } else {
                    x / y
                }
            }
            BinaryOp::Max => x.max(y),
            BinaryOp::Min => x.min(y),
            BinaryOp::Pow => int_pow(x, y),
            BinaryOp::And | BinaryOp::Or => return Err(super::unsupported(op.name(), DType::I64)),
        };
    }
    Ok(())
}

/// Integer power by squaring; a negative exponent gives 0 unless |base| is 1.
fn int_pow<T: Int>(base: T, exp: T) -> T {
    if exp < T::zero() {
        return if base == T::one() {
            T::one()
        } else if base == -T::one() {
            if (exp & T::one()) == T::zero() {
                T::one()
            } else {
                -T::one()
            }
        } else {
            T::zero()
        };
    }
    let (mut r, mut b, mut e) = (T::one(), base, exp);
    while e > T::zero() {
        if (e & T::one()) == T::one() {
            r = r.wrapping_mul(&b);
        }
        b = b.wrapping_mul(&b);
        e = e >> 1;
    }
    r
}

pub(crate) fn native(op: BinaryOp, a: Data<'_>, b: Data<'_>, out: DataMut<'_>) -> Result<()> {
    match (a, b, out) {
        (Data::F32(a), Data::F32(b), DataMut::F32(o)) => apply_real(op, a, b, o),
        (Data::F64(a), Data::F64(b), DataMut::F64(o)) => apply_real(op, a, b, o),
        (Data::I32(a), Data::I32(b), DataMut::I32(o)) => apply_int(op, a, b, o)?,
        (Data::I64(a), Data::I64(b), DataMut::I64(o)) => apply_int(op, a, b, o)?,
        (Data::Bool(a), Data::Bool(b), DataMut::Bool(o)) => {
            for ((o, &x), &y) in o.iter_mut().zip(a).zip(b) {
                *o = match op {
                    BinaryOp::And => x && y,
                    BinaryOp::Or => x || y,
                    // Numeric only (`domain`): verified graphs never get here.
                    BinaryOp::Add
                    | BinaryOp::Sub
                    | BinaryOp::Mul
                    | BinaryOp::Div
                    | BinaryOp::Max
                    | BinaryOp::Min
                    | BinaryOp::Pow => return Err(super::unsupported(op.name(), DType::Bool)),
                };
            }
        }
        (a, _, _) => return Err(super::unsupported(op.name(), a.dtype())),
    }
    Ok(())
}

// ---- StableHLO lowering

use crate::ops::Emitter;

/// Every binary op is the StableHLO op of the same name; integer division by zero and
/// integer powers follow XLA's CPU semantics, which the native kernels copy. Float max and
/// min are spelled out so that NaN propagates on every plugin.
pub(crate) fn lower(
    e: &mut Emitter<'_>,
    op: BinaryOp,
    lhs: Value,
    rhs: Value,
    ty: &TensorType,
) -> String {
    let (a, b, t) = (e.name(lhs), e.name(rhs), ty.mlir());
    match op {
        BinaryOp::Max | BinaryOp::Min if ty.dtype.is_float() => {
            let bool_ty = ty.with_dtype(DType::Bool).mlir();
            e.nan_min_max(op.name(), &a, &b, &t, &bool_ty)
        }
        BinaryOp::Add
        | BinaryOp::Sub
        | BinaryOp::Mul
        | BinaryOp::Div
        | BinaryOp::Max
        | BinaryOp::Min
        | BinaryOp::Pow
        | BinaryOp::And
        | BinaryOp::Or => e.binary(op.name(), &a, &b, &t),
    }
}
