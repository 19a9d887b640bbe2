//! `random_uniform`: counter-based uniform samples (Threefry-2x32, 20 rounds).
//!
//! Element `i` (row-major) of the result is computed from the key and the counter
//! `(hi32(i), lo32(i))` alone, so the same key always gives the same tensor on every
//! backend, in any order or split across threads. f32 samples take the top 23 bits of
//! word 0 as the mantissa of a number in `[1, 2)` and subtract 1; f64 samples take 52
//! bits from words 0 and 1 the same way.

use crate::backend::native::data::{Data, DataMut};
use crate::ir::{DType, Graph, TensorType, Value, MAX_RANK};
use crate::{Error, Result};

pub(crate) fn check(g: &Graph, key: Value, declared: Option<&TensorType>) -> Result<TensorType> {
    let k = g.ty(key);
    if k != &TensorType::new(DType::I32, [2]) {
        return Err(Error::shape(
            "random_uniform",
            format!("key must be i32[2], got {k}"),
        ));
    }
    let ty = declared.ok_or_else(|| Error::shape("random_uniform", "needs a result type"))?;
    if !ty.dtype.is_arith_float() || ty.rank() > MAX_RANK {
        return Err(Error::shape(
            "random_uniform",
            format!("result must be f32 or f64 of rank <= {MAX_RANK}, got {ty}"),
        ));
    }
    Ok(ty.clone())
}

const ROTATIONS: [u32; 8] = [13, 15, 26, 6, 17, 29, 16, 24];

/// Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as
/// 1, 2, 3", SC 2011), the generator JAX uses for its PRNG keys.
pub fn threefry2x32(key: [u32; 2], counter: [u32; 2]) -> [u32; 2] {
    let ks = [key[0], key[1], 0x1BD1_1BDA ^ key[0] ^ key[1]];
    let mut x0 = counter[0].wrapping_add(ks[0]);
    let mut x1 = counter[1].wrapping_add(ks[1]);
    for round in 0..20 {
        x0 = x0.wrapping_add(x1);
        x1 = x1.rotate_left(ROTATIONS[round % 8]);
        x1 ^= x0;
        if round % 4 == 3 {
            let s = round / 4 + 1;
            x0 = x0.wrapping_add(ks[s % 3]);
            x1 = x1.wrapping_add(ks[(s + 1) % 3]).wrapping_add(s as u32);
        }
    }
    [x0, x1]
}

pub(crate) fn native(key: Data<'_>, out: DataMut<'_>) -> Result<()> {
    let Data::I32(k) = key else {
        return Err(super::unsupported("random_uniform key", key.dtype()));
    };
    let key = [k[0] as u32, k[1] as u32];
    let ctr = |i: usize| [((i as u64) >> 32) as u32, i as u32];
    match out {
        DataMut::F32(o) => {
            for (i, v) in o.iter_mut().enumerate() {
                let w = threefry2x32(key, ctr(i))[0];
                *v = f32::from_bits((w >> 9) | 0x3f80_0000) - 1.0;
            }
        }
        DataMut::F64(o) => {
            for (i, v) in o.iter_mut().enumerate() {
                let [w0, w1] = threefry2x32(key, ctr(i));
                let mantissa = ((w0 as u64) << 20) | ((w1 as u64) >> 12);
                *v = f64::from_bits(mantissa | 0x3ff0_0000_0000_0000) - 1.0;
            }
        }
        o => return Err(super::unsupported("random_uniform", o.dtype())),
    }
    Ok(())
}
