//! `convert`: element type conversion. (Its shape rule, the operand's shape with the new
//! element type, is inline in `ops::check`.)

use crate::ir::Graph;
use crate::ir::Value;
use crate::kernel::data::{with_data, Data, DataMut, Elem};
use crate::Result;
use half::bf16;

/// Float-to-float conversions pass the gradient back converted; others pass none.
pub(crate) fn vjp(g: &mut Graph, x: Value, ct: Value) -> Result<Option<Value>> {
    let from = g.ty(x).dtype;
    if from.is_differentiable() && g.ty(ct).dtype.is_differentiable() {
        Ok(Some(g.convert(ct, from)?))
    } else {
        Ok(None)
    }
}

/// How one element type converts to another: floats round to nearest, float to integer
/// truncates toward zero and saturates (NaN gives 0), integer narrowing wraps, anything
/// to bool is `!= 0`, bool to a number is 0 or 1.
trait Cast: Elem {
    const FLOAT: bool;
    fn to_f64(self) -> f64;
    fn to_i64(self) -> i64;
    fn from_f64(v: f64) -> Self;
    fn from_i64(v: i64) -> Self;
}

macro_rules! cast_float {
    ($t:ty) => {
        impl Cast for $t {
            const FLOAT: bool = true;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn to_i64(self) -> i64 {
                self as i64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn from_i64(v: i64) -> Self {
                v as $t
            }
        }
    };
}
macro_rules! cast_int {
    ($t:ty) => {
        impl Cast for $t {
            const FLOAT: bool = false;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn to_i64(self) -> i64 {
                self as i64
            }
            fn from_f64(v: f64) -> Self {
                v as $t // saturating; NaN -> 0
            }
            fn from_i64(v: i64) -> Self {
                v as $t // wrapping
            }
        }
    };
}
cast_float!(f32);
cast_float!(f64);
cast_int!(i32);
cast_int!(i64);

impl Cast for bf16 {
    const FLOAT: bool = true;
    fn to_f64(self) -> f64 {
        bf16::to_f64(self)
    }
    fn to_i64(self) -> i64 {
        bf16::to_f64(self) as i64
    }
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
    fn from_i64(v: i64) -> Self {
        bf16::from_f64(v as f64)
    }
}

impl Cast for bool {
    const FLOAT: bool = false;
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn from_i64(v: i64) -> Self {
        v != 0
    }
}

fn cast_into<S: Cast, T: Cast>(x: &[S], out: &mut [T]) {
    if S::FLOAT {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = T::from_f64(v.to_f64());
        }
    } else {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = T::from_i64(v.to_i64());
        }
    }
}

pub(crate) fn native(x: Data<'_>, out: DataMut<'_>) -> Result<()> {
    fn to<T: Cast>(x: Data<'_>, out: &mut [T]) {
        with_data!(x, a => cast_into(a, out))
    }
    match out {
        DataMut::F32(o) => to(x, o),
        DataMut::F64(o) => to(x, o),
        DataMut::BF16(o) => to(x, o),
        DataMut::I32(o) => to(x, o),
        DataMut::I64(o) => to(x, o),
        DataMut::Bool(o) => to(x, o),
    }
    Ok(())
}

// ---- StableHLO lowering

use crate::ir::TensorType;
use crate::ops::Emitter;

/// XLA's convert matches the native rules: float to integer truncates and saturates with
/// NaN giving 0, narrowing wraps, to-bool is `!= 0` (measured on the CPU plugin).
pub(crate) fn lower(e: &mut Emitter<'_>, x: Value, ty: &TensorType) -> String {
    let (n, from) = (e.name(x), e.ty(x).mlir());
    e.convert(&n, &from, &ty.mlir())
}
