//! `exp`, `tanh` and the logistic function of an f32 without a call into libm: straight-line
//! code (range reduction, a polynomial, a scaling by bits, the special cases as selects),
//! so a loop over a slice of them vectorises, in the fused kernels' AVX-512 and AVX2
//! copies as well as in the baseline one. libm's `expf` / `tanhf` are scalar calls, and
//! were half of a native LSTM step (an LSTM cell is three logistics and two tanh per unit).
//!
//! Accuracy: within 2 ulp of the correctly rounded result for every finite input (the
//! tests sweep every 997th f32 bit pattern, [-200, 200] in steps of 1e-3, and the edges), the special values exactly
//! (NaN, ±inf, ±0, overflow to inf, underflow through the subnormals to 0). The
//! polynomials are Cephes' `expf` and `tanhf` ones.

/// 1.5·2²³: adding it to a float of magnitude below 2²² rounds it to an integer (to
/// nearest, ties to even) held in the low bits of the sum's mantissa.
const ROUND: f32 = 12_582_912.0;
/// The bits of [`ROUND`]: subtracted from the sum's bits, they leave that integer.
const ROUND_BITS: i32 = 0x4B40_0000;

/// `e^x`.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    // x = n·ln 2 + r, |r| ≤ ln2/2, and e^x = 2^n · e^r. Below -104 the result rounds to 0,
    // above 89 it overflows: clamped there, the scaling below produces exactly those.
    // (A NaN stays one through the arithmetic below, wrapping, and is put back at the end.)
    let xc = x.clamp(-104.0, 89.0);
    let big = xc * std::f32::consts::LOG2_E + ROUND;
    let k = big - ROUND;
    let n = (big.to_bits() as i32).wrapping_sub(ROUND_BITS);
    // ln 2 in two parts, the first with few enough bits that k·LN2_HI is exact.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let r = xc - k * LN2_HI - k * LN2_LO;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 0.166_666_65;
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    // 2^n in two factors, each a normal float for every n in -150..=128: the first product
    // is exact, the second rounds once (into the subnormals, or to inf).
    let n1 = n >> 1;
    let n2 = n.wrapping_sub(n1);
    let s1 = f32::from_bits((n1.wrapping_add(127) << 23) as u32);
    let s2 = f32::from_bits((n2.wrapping_add(127) << 23) as u32);
    let e = y * s1 * s2;
    if x.is_nan() {
        x
    } else {
        e
    }
}

/// `tanh x`.
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    // Computed for |x|, its sign put back (tanh is odd; -0 stays -0, NaN stays NaN).
    let a = x.abs();
    // Near 0, an odd polynomial (a itself for the tiniest: a·a underflows to 0).
    let z = a * a;
    let mut p = -5.704_988_7e-3;
    p = p * z + 2.063_909e-2;
    p = p * z - 5.373_971_6e-2;
    p = p * z + 0.133_314_42;
    p = p * z - 0.333_332_8;
    let small = p * z * a + a;
    // Elsewhere 1 - 2/(e^{2a} + 1): 1 for large a (e^{2a} = inf included).
    let large = 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
    let t = if a < 0.625 { small } else { large };
    f32::from_bits(t.to_bits() | (x.to_bits() & 0x8000_0000))
}

/// `1 / (1 + e^-x)`, as `e^x / (1 + e^x)` for negative x: no overflow of `e^-x` there, so
/// the results down to the subnormals are right, then 0.
#[inline(always)]
pub(crate) fn logistic(x: f32) -> f32 {
    let e = exp(-x.abs());
    let num = if x < 0.0 { e } else { 1.0 };
    num / (1.0 + e)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The distance in representable f32 values between `a` and `b` (the same sign
    /// assumed; 0 for two NaNs, u32::MAX for one).
    fn ulps(a: f32, b: f32) -> u32 {
        if a.is_nan() || b.is_nan() {
            return if a.is_nan() && b.is_nan() {
                0
            } else {
                u32::MAX
            };
        }
        if a == b {
            return 0;
        }
        // Order the bit patterns monotonically over the whole line.
        let key = |v: f32| {
            let b = v.to_bits() as i64;
            if b & 0x8000_0000 != 0 {
                -(b & 0x7fff_ffff)
            } else {
                b
            }
        };
        (key(a) - key(b)).unsigned_abs().min(u32::MAX as u64) as u32
    }

    /// The correctly rounded reference: the f64 function rounded to f32.
    fn check(name: &str, f: fn(f32) -> f32, reference: fn(f64) -> f64, max_ulps: u32) {
        let mut worst = (0u32, 0.0f32);
        let mut probe = |x: f32| {
            let want = reference(x as f64) as f32;
            let got = f(x);
            let d = ulps(got, want);
            assert!(
                d <= max_ulps,
                "{name}({x:e}) = {got:e}, want {want:e} ({d} ulps)"
            );
            if d > worst.0 {
                worst = (d, x);
            }
        };
        // Every 997th bit pattern, both signs, subnormals, infinities and NaNs included.
        for bits in (0..=u32::MAX).step_by(997) {
            probe(f32::from_bits(bits));
        }
        for x in [
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            f32::from_bits(1),
            f32::from_bits(0x8000_0001),
            f32::MAX,
            f32::MIN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            88.72,
            88.7228,
            88.7229,
            89.0,
            -87.33,
            -103.0,
            -103.97,
            -104.0,
            -150.0,
            0.625,
            -0.625,
            0.624_999_94,
            9.0,
            -9.02,
        ] {
            probe(x);
        }
        eprintln!("{name}: worst {} ulps at {:e}", worst.0, worst.1);
    }

    #[test]
    fn exp_is_within_two_ulps_everywhere() {
        check("exp", exp, f64::exp, 2);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(100.0), f32::INFINITY);
        assert_eq!(exp(-110.0), 0.0);
        assert_eq!(exp(0.0), 1.0);
        assert!(
            exp(-100.0) > 0.0 && exp(-100.0) < f32::MIN_POSITIVE,
            "subnormal"
        );
    }

    #[test]
    fn tanh_is_within_two_ulps_everywhere() {
        check("tanh", tanh, f64::tanh, 2);
        assert_eq!(tanh(f32::INFINITY), 1.0);
        assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
        assert_eq!(tanh(50.0), 1.0);
        assert_eq!(tanh(-0.0).to_bits(), (-0.0f32).to_bits());
        let tiny = f32::from_bits(3);
        assert_eq!(tanh(tiny), tiny);
    }

    #[test]
    fn logistic_is_within_two_ulps_everywhere() {
        check("logistic", logistic, |x| 1.0 / (1.0 + (-x).exp()), 2);
        assert!(logistic(-100.0) > 0.0, "a subnormal, not 0");
        assert_eq!(logistic(f32::NEG_INFINITY), 0.0);
        assert_eq!(logistic(f32::INFINITY), 1.0);
        assert_eq!(logistic(-200.0), 0.0);
        assert_eq!(logistic(0.0), 0.5);
    }

    /// Agrees with libm (std's f32 functions) as closely as with the exact result.
    #[test]
    fn agrees_with_libm() {
        for i in -200_000..=200_000 {
            let x = i as f32 * 1e-3;
            assert!(ulps(exp(x), x.exp()) <= 2, "exp({x})");
            assert!(ulps(tanh(x), x.tanh()) <= 2, "tanh({x})");
        }
    }
}
