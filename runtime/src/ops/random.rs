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
    match out {
        DataMut::F32(o) => fill(key, o, |[w, _]| {
            f32::from_bits((w >> 9) | 0x3f80_0000) - 1.0
        }),
        DataMut::F64(o) => fill(key, o, |[w0, w1]| {
            let mantissa = ((w0 as u64) << 20) | ((w1 as u64) >> 12);
            f64::from_bits(mantissa | 0x3ff0_0000_0000_0000) - 1.0
        }),
        o => return Err(super::unsupported("random_uniform", o.dtype())),
    }
    Ok(())
}

/// Elements generated together: the rounds run over a lane array the compiler keeps in
/// vector registers (u32 adds, xors and shifts), instead of one dependent chain per element.
const LANES: usize = 8;
/// Below this many elements a hand-off to the crew costs more than it saves.
const PARALLEL_MIN: usize = 1 << 14;

/// `out[i] = sample(threefry2x32(key, ctr(i)))`, split over the crew (each element depends
/// on its index alone, so the split cannot change a bit).
fn fill<T: Copy + Send, S: Fn([u32; 2]) -> T + Copy + Sync>(
    key: [u32; 2],
    out: &mut [T],
    sample: S,
) {
    let tasks = if out.len() >= PARALLEL_MIN {
        crate::kernel::crew::width()
    } else {
        1
    };
    crate::kernel::crew::run_chunks(out, tasks, LANES, &|start, chunk| {
        fill_chunk(key, start, chunk, sample)
    });
}

fn fill_chunk<T: Copy, S: Fn([u32; 2]) -> T + Copy>(
    key: [u32; 2],
    start: usize,
    out: &mut [T],
    sample: S,
) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::kernel::simd::{level, Level};
        match level() {
            // SAFETY: the CPU supports the features the functions are compiled for.
            Level::Avx512 => return unsafe { fill_avx512(key, start, out, sample) },
            Level::Avx2 => return unsafe { fill_avx2(key, start, out, sample) },
            Level::Baseline => {}
        }
    }
    fill_lanes::<LANES, T, S>(key, start, out, sample)
}

/// Sixteen lanes fill one 512-bit register, and AVX-512 rotates a register by a constant
/// in one instruction (AVX2 needs two shifts and an or).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fill_avx512<T: Copy, S: Fn([u32; 2]) -> T + Copy>(
    key: [u32; 2],
    start: usize,
    out: &mut [T],
    sample: S,
) {
    fill_lanes::<{ 2 * LANES }, T, S>(key, start, out, sample)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn fill_avx2<T: Copy, S: Fn([u32; 2]) -> T + Copy>(
    key: [u32; 2],
    start: usize,
    out: &mut [T],
    sample: S,
) {
    fill_lanes::<LANES, T, S>(key, start, out, sample)
}

#[inline(always)]
fn lane_round<const N: usize, const R: u32>(x0: &mut [u32; N], x1: &mut [u32; N]) {
    for l in 0..N {
        x0[l] = x0[l].wrapping_add(x1[l]);
        x1[l] = x1[l].rotate_left(R) ^ x0[l];
    }
}

#[inline(always)]
fn fill_lanes<const N: usize, T: Copy, S: Fn([u32; 2]) -> T + Copy>(
    key: [u32; 2],
    start: usize,
    out: &mut [T],
    sample: S,
) {
    let ks = [key[0], key[1], 0x1BD1_1BDA ^ key[0] ^ key[1]];
    let mut chunks = out.chunks_exact_mut(N);
    let mut i = start;
    for chunk in &mut chunks {
        let mut x0 = [0u32; N];
        let mut x1 = [0u32; N];
        for l in 0..N {
            let c = (i + l) as u64;
            x0[l] = ((c >> 32) as u32).wrapping_add(ks[0]);
            x1[l] = (c as u32).wrapping_add(ks[1]);
        }
        // The rounds written out, so every rotation is by a constant (two shifts and an
        // or per lane vector); the schedule is `threefry2x32`'s.
        for s in 1..=5 {
            if s % 2 == 1 {
                lane_round::<N, 13>(&mut x0, &mut x1);
                lane_round::<N, 15>(&mut x0, &mut x1);
                lane_round::<N, 26>(&mut x0, &mut x1);
                lane_round::<N, 6>(&mut x0, &mut x1);
            } else {
                lane_round::<N, 17>(&mut x0, &mut x1);
                lane_round::<N, 29>(&mut x0, &mut x1);
                lane_round::<N, 16>(&mut x0, &mut x1);
                lane_round::<N, 24>(&mut x0, &mut x1);
            }
            for l in 0..N {
                x0[l] = x0[l].wrapping_add(ks[s % 3]);
                x1[l] = x1[l].wrapping_add(ks[(s + 1) % 3]).wrapping_add(s as u32);
            }
        }
        for l in 0..N {
            chunk[l] = sample([x0[l], x1[l]]);
        }
        i += N;
    }
    for v in chunks.into_remainder() {
        *v = sample(threefry2x32(key, [((i as u64) >> 32) as u32, i as u32]));
        i += 1;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The lane-wise, crew-split kernel gives each element the scalar definition's bits,
    /// across the lane tail and the parallel threshold.
    #[test]
    fn native_fill_matches_the_definition() {
        let key = [0x1234_5678u32, 0x9abc_def0];
        let keyd = [key[0] as i32, key[1] as i32];
        for n in [0, 1, 7, 8, 9, 63, PARALLEL_MIN - 3, PARALLEL_MIN + 13] {
            let mut f = vec![0f32; n];
            native(Data::I32(&keyd), DataMut::F32(&mut f)).unwrap();
            let mut d = vec![0f64; n];
            native(Data::I32(&keyd), DataMut::F64(&mut d)).unwrap();
            for i in 0..n {
                let [w0, w1] = threefry2x32(key, [((i as u64) >> 32) as u32, i as u32]);
                assert_eq!(
                    f[i].to_bits(),
                    (f32::from_bits((w0 >> 9) | 0x3f80_0000) - 1.0).to_bits(),
                    "f32 {i} of {n}"
                );
                let m = ((w0 as u64) << 20) | ((w1 as u64) >> 12);
                assert_eq!(
                    d[i].to_bits(),
                    (f64::from_bits(m | 0x3ff0_0000_0000_0000) - 1.0).to_bits(),
                    "f64 {i} of {n}"
                );
                assert!((0.0..1.0).contains(&f[i]) && (0.0..1.0).contains(&d[i]));
            }
        }
    }

    /// Every lane width the CPU can run gives the scalar definition's bits, over lane
    /// tails and counters that carry into the high word.
    #[test]
    fn each_lane_width_matches_the_definition() {
        let key = [0x0bad_f00du32, 0x7777_1234];
        let s = |[w, _]: [u32; 2]| (w >> 9) | 0x3f80_0000;
        type Fill = fn([u32; 2], usize, &mut [u32]);
        let mut widths: Vec<(&str, Fill)> = vec![("portable", |k, i, o| {
            fill_lanes::<LANES, u32, _>(k, i, o, |[w, _]| (w >> 9) | 0x3f80_0000)
        })];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the feature was detected.
                widths.push(("avx2", |k, i, o| unsafe {
                    fill_avx2(k, i, o, |[w, _]| (w >> 9) | 0x3f80_0000)
                }));
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the feature was detected.
                widths.push(("avx512", |k, i, o| unsafe {
                    fill_avx512(k, i, o, |[w, _]| (w >> 9) | 0x3f80_0000)
                }));
            }
        }
        for (name, fill) in widths {
            for (start, n) in [
                (0, 0),
                (0, 1),
                (3, 15),
                (0, 16),
                (5, 17),
                (0, 47),
                ((1 << 32) - 20, 41),
            ] {
                let mut got = vec![0u32; n];
                fill(key, start, &mut got);
                for (j, g) in got.iter().enumerate() {
                    let i = (start + j) as u64;
                    let want = s(threefry2x32(key, [(i >> 32) as u32, i as u32]));
                    assert_eq!(*g, want, "{name}: element {i} (start {start}, n {n})");
                }
            }
        }
    }

    /// The counter's high word matters: an index past 2^32 is not an index below it.
    #[test]
    fn high_counter_word_is_used() {
        let ks = [3u32, 5];
        let mut lanes = [0f32; LANES];
        fill_chunk(ks, 1 << 32, &mut lanes, |[w, _]| {
            f32::from_bits((w >> 9) | 0x3f80_0000) - 1.0
        });
        let want = threefry2x32(ks, [1, 0])[0];
        assert_eq!(
            lanes[0].to_bits(),
            (f32::from_bits((want >> 9) | 0x3f80_0000) - 1.0).to_bits()
        );
        assert_ne!(threefry2x32(ks, [1, 0]), threefry2x32(ks, [0, 0]));
    }
}
