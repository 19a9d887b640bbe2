//! Seeded host-side random tensors (the tutorial's `tf.random.normal` / `tf.random.uniform`),
//! and the generator behind weight initialisers and data shuffling.
//!
//! Everything is derived from Threefry-2x32 (the same counter-based generator as the IR's
//! `random_uniform`) keyed by the seed, so a seed gives the same numbers on every machine.

use crate::ops::random::threefry2x32;
use crate::{Error, Result};
use ndarray::{ArrayD, IxDyn};

/// A seeded stream of random numbers.
#[derive(Clone, Debug)]
pub struct Rng {
    key: [u32; 2],
    counter: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng {
            key: [(seed >> 32) as u32, seed as u32],
            counter: 0,
        }
    }

    /// An independent stream derived from this one (for per-layer or per-epoch streams).
    pub fn fork(&mut self) -> Rng {
        let [a, b] = self.next_pair();
        Rng {
            key: [a, b],
            counter: 0,
        }
    }

    fn next_pair(&mut self) -> [u32; 2] {
        let c = self.counter;
        self.counter += 1;
        threefry2x32(self.key, [(c >> 32) as u32, c as u32])
    }

    pub fn next_u64(&mut self) -> u64 {
        let [a, b] = self.next_pair();
        ((a as u64) << 32) | b as u64
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

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64(); // (0, 1]
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// A random permutation of `0..n` (Fisher–Yates).
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.below(i as u64 + 1) as usize;
            p.swap(i, j);
        }
        p
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
    let mut rng = Rng::new(seed);
    Ok(ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        (mean as f64 + stddev as f64 * rng.normal()) as f32
    }))
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
    Ok(ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        // Rounding to f32 can land on `high`; step back inside the interval.
        let v = (low as f64 + span * rng.next_f64()) as f32;
        if v >= high {
            low.max(f32::from_bits(high.to_bits() - 1))
        } else {
            v
        }
    }))
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
    Ok(ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        (low as i64 + rng.below(span) as i64) as i32
    }))
}
