//! `random_uniform`: counter-based uniform samples (Threefry-2x32, 20 rounds).
//!
//! Element `i` (row-major) of the result is computed from the key and the counter
//! `(hi32(i), lo32(i))` alone, so the same key always gives the same tensor on every
//! backend, in any order or split across threads. f32 samples take the top 23 bits of
//! word 0 as the mantissa of a number in `[1, 2)` and subtract 1; f64 samples take 52
//! bits from words 0 and 1 the same way.

use crate::ir::{DType, Graph, TensorType, Value, MAX_RANK};
use crate::kernel::data::{Data, DataMut};
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

// ---- StableHLO lowering

use crate::hlo::{scalar_literal, tensor_type};
use crate::ops::Emitter;
use std::collections::HashMap;

/// Threefry-2x32 written out round by round as `ui32` StableHLO arithmetic over one lane
/// per element, so every backend gives the native kernel's bits exactly (XLA's own
/// `rng_bit_generator` is a different stream).
pub(crate) fn lower(e: &mut Emitter<'_>, key: Value, ty: &TensorType) -> Result<String> {
    let n = ty.numel();
    let (u32t, u64t) = (tensor_type("ui32", &[n]), tensor_type("ui64", &[n]));
    let mut consts: HashMap<(u64, bool), String> = HashMap::new();
    // A splat constant over the lanes (`wide`: ui64), printed once per value.
    let mut c = |e: &mut Emitter<'_>, v: u64, wide: bool| -> String {
        consts
            .entry((v, wide))
            .or_insert_with(|| e.splat(&v.to_string(), if wide { &u64t } else { &u32t }))
            .clone()
    };

    let k = e.name(key);
    let ku = e.emit(format!(
        "stablehlo.bitcast_convert {k} : (tensor<2xi32>) -> tensor<2xui32>"
    ));
    let word = |e: &mut Emitter<'_>, i: usize| {
        let s = e.emit(format!(
            "stablehlo.slice {ku} [{i}:{}] : (tensor<2xui32>) -> tensor<1xui32>",
            i + 1
        ));
        e.emit(format!(
            "stablehlo.broadcast_in_dim {s}, dims = [0] : (tensor<1xui32>) -> {u32t}"
        ))
    };
    let k0 = word(e, 0);
    let k1 = word(e, 1);
    let parity = c(e, 0x1BD1_1BDA, false);
    let k01 = e.binary("xor", &k0, &k1, &u32t);
    let k2 = e.binary("xor", &k01, &parity, &u32t);
    let ks = [k0, k1, k2];

    // The counter of element i is (hi32(i), lo32(i)).
    let i = e.emit(format!("stablehlo.iota dim = 0 : {u64t}"));
    let lo = e.convert(&i, &u64t, &u32t);
    let c32 = c(e, 32, true);
    let shifted = e.binary("shift_right_logical", &i, &c32, &u64t);
    let hi = e.convert(&shifted, &u64t, &u32t);

    let mut x0 = e.binary("add", &hi, &ks[0], &u32t);
    let mut x1 = e.binary("add", &lo, &ks[1], &u32t);
    for round in 0..20 {
        let r = u64::from(ROTATIONS[round % 8]);
        x0 = e.binary("add", &x0, &x1, &u32t);
        let (cl, cr) = (c(e, r, false), c(e, 32 - r, false));
        let left = e.binary("shift_left", &x1, &cl, &u32t);
        let right = e.binary("shift_right_logical", &x1, &cr, &u32t);
        let rotated = e.binary("or", &left, &right, &u32t);
        x1 = e.binary("xor", &rotated, &x0, &u32t);
        if round % 4 == 3 {
            let s = round / 4 + 1;
            x0 = e.binary("add", &x0, &ks[s % 3], &u32t);
            let cs = c(e, s as u64, false);
            let t = e.binary("add", &x1, &ks[(s + 1) % 3], &u32t);
            x1 = e.binary("add", &t, &cs, &u32t);
        }
    }

    // Random mantissa bits under the exponent of 1.0 give a number in [1, 2); minus 1.
    let flat = tensor_type(ty.dtype.mlir_name(), &[n]);
    let sample = match ty.dtype {
        DType::F32 => {
            let c9 = c(e, 9, false);
            let top = e.binary("shift_right_logical", &x0, &c9, &u32t);
            let exp = c(e, 0x3f80_0000, false);
            let bits = e.binary("or", &top, &exp, &u32t);
            e.emit(format!(
                "stablehlo.bitcast_convert {bits} : ({u32t}) -> {flat}"
            ))
        }
        DType::F64 => {
            let w0 = e.convert(&x0, &u32t, &u64t);
            let w1 = e.convert(&x1, &u32t, &u64t);
            let (c20, c12) = (c(e, 20, true), c(e, 12, true));
            let high = e.binary("shift_left", &w0, &c20, &u64t);
            let low = e.binary("shift_right_logical", &w1, &c12, &u64t);
            let mantissa = e.binary("or", &high, &low, &u64t);
            let exp = c(e, 0x3ff0_0000_0000_0000, true);
            let bits = e.binary("or", &mantissa, &exp, &u64t);
            e.emit(format!(
                "stablehlo.bitcast_convert {bits} : ({u64t}) -> {flat}"
            ))
        }
        d => {
            return Err(Error::shape(
                "random_uniform",
                format!("result must be f32 or f64, got {d}"),
            ))
        }
    };
    let one = e.splat(&scalar_literal(ty.dtype, 1.0), &flat);
    let unit = e.binary("subtract", &sample, &one, &flat);
    Ok(e.reshape(&unit, &flat, &ty.mlir()))
}
