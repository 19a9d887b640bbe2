//! `compare` and `select`: shape rules, gradients, native kernels.

use crate::ir::{Comparison, DType, Graph, TensorType, Value};
use crate::kernel::data::{with_same, Data, DataMut, Elem};
use crate::{Error, Result};

/// Same-typed operands; the result is bool of their shape.
pub(crate) fn check_compare(g: &Graph, lhs: Value, rhs: Value) -> Result<TensorType> {
    let (a, b) = (g.ty(lhs), g.ty(rhs));
    if a != b {
        return Err(Error::shape(
            "compare",
            format!("operands must have the same type, got {a} and {b}"),
        ));
    }
    if a.dtype == DType::BF16 {
        return Err(Error::shape(
            "compare",
            "bf16 is storage only: convert to f32 first",
        ));
    }
    Ok(a.with_dtype(DType::Bool))
}

/// `pred` is bool with the branches' shape, or a bool scalar; the branches have one type.
pub(crate) fn check_select(
    g: &Graph,
    pred: Value,
    on_true: Value,
    on_false: Value,
) -> Result<TensorType> {
    let (p, t, f) = (g.ty(pred), g.ty(on_true), g.ty(on_false));
    if t != f {
        return Err(Error::shape(
            "select",
            format!("branches must have the same type, got {t} and {f}"),
        ));
    }
    if p.dtype != DType::Bool || (p.rank() != 0 && p.shape != t.shape) {
        return Err(Error::shape(
            "select",
            format!(
                "predicate must be bool with the branches' shape {} or a bool scalar, got {p}",
                t.shape
            ),
        ));
    }
    Ok(t.clone())
}

pub(crate) fn vjp_select(
    g: &mut Graph,
    pred: Value,
    on_true: Value,
    on_false: Value,
    ct: Value,
) -> Result<Vec<Option<Value>>> {
    let _ = on_false;
    let zero = g.zeros_like(on_true)?;
    let dt = g.select(pred, ct, zero)?;
    let df = g.select(pred, zero, ct)?;
    Ok(vec![None, Some(dt), Some(df)])
}

/// Evaluates the relation; partial-order semantics so NaN compares unequal.
#[inline(always)]
pub(crate) fn holds<T: PartialOrd>(cmp: Comparison, x: T, y: T) -> bool {
    match cmp {
        Comparison::Eq => x == y,
        Comparison::Ne => x != y,
        Comparison::Lt => x < y,
        Comparison::Le => x <= y,
        Comparison::Gt => x > y,
        Comparison::Ge => x >= y,
    }
}

/// The relation as 1 or 0 in a float type (for fused kernels, which keep booleans in
/// float registers).
#[inline(always)]
pub(crate) fn apply_real<T: crate::kernel::real::Real>(
    cmp: Comparison,
    a: &[T],
    b: &[T],
    out: &mut [T],
) {
    macro_rules! each {
        ($c:expr) => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = if holds($c, x, y) { T::one() } else { T::zero() };
            }
        };
    }
    match cmp {
        Comparison::Eq => each!(Comparison::Eq),
        Comparison::Ne => each!(Comparison::Ne),
        Comparison::Lt => each!(Comparison::Lt),
        Comparison::Le => each!(Comparison::Le),
        Comparison::Gt => each!(Comparison::Gt),
        Comparison::Ge => each!(Comparison::Ge),
    }
}

fn compare_slices<T: PartialOrd + Copy>(cmp: Comparison, a: &[T], b: &[T], out: &mut [bool]) {
    macro_rules! each {
        ($c:expr) => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = holds($c, x, y);
            }
        };
    }
    // One loop per relation so each is branch-free.
    match cmp {
        Comparison::Eq => each!(Comparison::Eq),
        Comparison::Ne => each!(Comparison::Ne),
        Comparison::Lt => each!(Comparison::Lt),
        Comparison::Le => each!(Comparison::Le),
        Comparison::Gt => each!(Comparison::Gt),
        Comparison::Ge => each!(Comparison::Ge),
    }
}

pub(crate) fn native_compare(
    cmp: Comparison,
    a: Data<'_>,
    b: Data<'_>,
    out: DataMut<'_>,
) -> Result<()> {
    let DataMut::Bool(o) = out else {
        return Err(super::unsupported("compare", out.dtype()));
    };
    match (a, b) {
        (Data::F32(a), Data::F32(b)) => compare_slices(cmp, a, b, o),
        (Data::F64(a), Data::F64(b)) => compare_slices(cmp, a, b, o),
        (Data::I32(a), Data::I32(b)) => compare_slices(cmp, a, b, o),
        (Data::I64(a), Data::I64(b)) => compare_slices(cmp, a, b, o),
        (Data::Bool(a), Data::Bool(b)) => compare_slices(cmp, a, b, o),
        (a, _) => return Err(super::unsupported("compare", a.dtype())),
    }
    Ok(())
}

pub(crate) fn native_select(
    pred: Data<'_>,
    t: Data<'_>,
    f: Data<'_>,
    out: DataMut<'_>,
) -> Result<()> {
    let Data::Bool(p) = pred else {
        return Err(super::unsupported("select", pred.dtype()));
    };
    fn sel<T: Elem>(p: &[bool], t: &[T], f: Data<'_>, out: &mut [T]) -> Result<()> {
        let f = T::of(f).ok_or_else(|| super::unsupported("select", f.dtype()))?;
        if p.len() == 1 {
            out.copy_from_slice(if p[0] { t } else { f });
            return Ok(());
        }
        for (((o, &c), &x), &y) in out.iter_mut().zip(p).zip(t).zip(f) {
            *o = if c { x } else { y };
        }
        Ok(())
    }
    with_same!("select", t, out, |t, o| sel(p, t, f, o))
}

// ---- StableHLO lowering

use crate::hlo::compare_type;
use crate::ops::Emitter;

pub(crate) fn lower_compare(
    e: &mut Emitter<'_>,
    cmp: Comparison,
    lhs: Value,
    rhs: Value,
) -> String {
    let dir = match cmp {
        Comparison::Eq => "EQ",
        Comparison::Ne => "NE",
        Comparison::Lt => "LT",
        Comparison::Le => "LE",
        Comparison::Gt => "GT",
        Comparison::Ge => "GE",
    };
    let t = e.ty(lhs);
    // FLOAT comparisons are IEEE's: NaN is unequal to everything, as in the native kernel.
    let (kind, ti, to) = (
        compare_type(t.dtype),
        t.mlir(),
        t.with_dtype(DType::Bool).mlir(),
    );
    let (a, b) = (e.name(lhs), e.name(rhs));
    e.emit(format!(
        "stablehlo.compare {dir}, {a}, {b}, {kind} : ({ti}, {ti}) -> {to}"
    ))
}

pub(crate) fn lower_select(
    e: &mut Emitter<'_>,
    pred: Value,
    on_true: Value,
    on_false: Value,
) -> String {
    // StableHLO's select takes a scalar predicate too, as the IR's does.
    let (tp, tv) = (e.ty(pred).mlir(), e.ty(on_true).mlir());
    let (p, t, f) = (e.name(pred), e.name(on_true), e.name(on_false));
    e.emit(format!(
        "stablehlo.select {p}, {t}, {f} : ({tp}, {tv}, {tv}) -> {tv}"
    ))
}
