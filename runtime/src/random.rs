//! Seeded host-side random tensors (the tutorial's `tf.random.normal` / `tf.random.uniform`),
//! and the generator behind weight initialisers and data shuffling.
//!
//! The host generator is xoshiro256++ (Blackman and Vigna) seeded through SplitMix64: a
//! seed gives the same numbers on every machine. `normal` fills blocks of 65,536 values
//! from streams seeded by (seed, block), on every core, so the tutorial's 7.8 million
//! normals cost little next to training and still do not depend on the thread count.
//! (The IR's `random_uniform` is counter-based instead, so every backend produces the
//! same bits.)

use crate::memory::{array_filled, array_from_fn, vec_with_capacity};
use crate::types::Shape;
use crate::{Error, Result};
use ndarray::ArrayD;

/// A seeded stream of random numbers.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
    /// The second normal of the last polar-method pair.
    spare: Option<f64>,
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        Rng {
            s: [
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
            ],
            spare: None,
        }
    }

    /// An independent stream derived from this one (for per-layer or per-epoch streams).
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in `[0, n)` without modulo bias (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        // Lemire's multiply-shift with rejection.
        let mut x = self.next_u64();
        let mut m = (x as u128) * (n as u128);
        let mut l = m as u64;
        if l < n {
            let t = n.wrapping_neg() % n;
            while l < t {
                x = self.next_u64();
                m = (x as u128) * (n as u128);
                l = m as u64;
            }
        }
        (m >> 64) as u64
    }

    /// Standard normal (Marsaglia's polar method; both numbers of each pair are used).
    pub fn normal(&mut self) -> f64 {
        if let Some(v) = self.spare.take() {
            return v;
        }
        loop {
            let u = 2.0 * self.next_f64() - 1.0;
            let v = 2.0 * self.next_f64() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                let f = (-2.0 * s.ln() / s).sqrt();
                self.spare = Some(v * f);
                return u * f;
            }
        }
    }

    /// A random permutation of `0..n` (Fisher–Yates); [`Error::OutOfMemory`] when `n`
    /// indices cannot be allocated.
    pub fn permutation(&mut self, n: usize) -> Result<Vec<usize>> {
        let mut p = vec_with_capacity(|| format!("Rng::permutation of {n} indices"), n)?;
        p.extend(0..n);
        for i in (1..n).rev() {
            let j = self.below(i as u64 + 1) as usize;
            p.swap(i, j);
        }
        Ok(p)
    }
}

fn check_finite(what: &str, v: &[(&str, f64)]) -> Result<()> {
    for (name, x) in v {
        if !x.is_finite() {
            return Err(Error::invalid(
                what,
                format!("{name} must be finite, got {x}"),
            ));
        }
    }
    Ok(())
}

/// Samples from a normal distribution with the given mean and standard deviation.
pub fn normal(shape: &[usize], mean: f32, stddev: f32, seed: u64) -> Result<ArrayD<f32>> {
    check_finite(
        "random::normal",
        &[("mean", mean as f64), ("stddev", stddev as f64)],
    )?;
    if stddev < 0.0 {
        return Err(Error::invalid(
            "random::normal",
            format!("stddev must be >= 0, got {stddev}"),
        ));
    }
    let mut out = array_filled(
        || format!("random::normal({})", Shape::from(shape)),
        shape,
        0.0,
    )?;
    if let Some(v) = out.as_slice_mut() {
        fill_blocks(v, seed, |rng, x| {
            *x = (mean as f64 + stddev as f64 * rng.normal()) as f32
        });
    }
    Ok(out)
}

/// Elements per block of [`fill_blocks`].
const BLOCK: usize = 1 << 16;

/// Fills `v` block by block, block `b` from its own stream `Rng::new(block_seed(seed, b))`,
/// the blocks spread over the machine's cores: the values depend on the seed and the
/// length only, not on how many threads made them (the tutorial's 7.8 million normals
/// take a tenth of a second on one core).
fn fill_blocks<T: Send>(v: &mut [T], seed: u64, f: impl Fn(&mut Rng, &mut T) + Sync) {
    let mut blocks: Vec<(usize, &mut [T])> = v.chunks_mut(BLOCK).enumerate().collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(blocks.len());
    let run = |part: &mut [(usize, &mut [T])]| {
        for (b, block) in part.iter_mut() {
            let mut rng = Rng::new(block_seed(seed, *b));
            for x in block.iter_mut() {
                f(&mut rng, x);
            }
        }
    };
    if threads <= 1 {
        run(&mut blocks);
        return;
    }
    let per = blocks.len().div_ceil(threads);
    std::thread::scope(|s| {
        for part in blocks.chunks_mut(per) {
            s.spawn(|| run(part));
        }
    });
}

/// The seed of block `b`'s stream: SplitMix64 of the seed and the block index, so
/// neighbouring blocks' streams are unrelated.
fn block_seed(seed: u64, b: usize) -> u64 {
    let mut x = seed ^ (b as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
    splitmix64(&mut x)
}

/// Samples uniformly from `[low, high)`.
pub fn uniform(shape: &[usize], low: f32, high: f32, seed: u64) -> Result<ArrayD<f32>> {
    check_finite(
        "random::uniform",
        &[("low", low as f64), ("high", high as f64)],
    )?;
    if low >= high {
        return Err(Error::invalid(
            "random::uniform",
            format!("need low < high, got [{low}, {high})"),
        ));
    }
    let mut rng = Rng::new(seed);
    let span = high as f64 - low as f64;
    let what = || format!("random::uniform({})", Shape::from(shape));
    array_from_fn(what, shape, || {
        // Rounding to f32 can land on `high`; step back inside the interval.
        let v = (low as f64 + span * rng.next_f64()) as f32;
        if v >= high {
            low.max(f32::from_bits(high.to_bits() - 1))
        } else {
            v
        }
    })
}

/// Integers drawn uniformly from `[low, high)` (`tf.random.uniform(..., maxval=high, dtype=int32)`).
pub fn uniform_int(shape: &[usize], low: i32, high: i32, seed: u64) -> Result<ArrayD<i32>> {
    if low >= high {
        return Err(Error::invalid(
            "random::uniform_int",
            format!("need low < high, got [{low}, {high})"),
        ));
    }
    let mut rng = Rng::new(seed);
    let span = (high as i64 - low as i64) as u64;
    let what = || format!("random::uniform_int({})", Shape::from(shape));
    array_from_fn(what, shape, || (low as i64 + rng.below(span) as i64) as i32)
}
