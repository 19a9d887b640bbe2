//! Weight initialisers, with Keras' definitions (variance scaling over fan-in / fan-out;
//! the normal variants are truncated at two standard deviations, as in Keras 3).

use crate::ir::Shape;
use crate::memory::{array_filled, array_from_fn};
use crate::random::Rng;
use crate::Result;
use ndarray::ArrayD;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Initializer {
    /// Uniform in `±sqrt(6 / (fan_in + fan_out))` (Keras' default for kernels).
    GlorotUniform,
    /// Truncated normal with stddev `sqrt(2 / (fan_in + fan_out))`.
    GlorotNormal,
    /// Truncated normal with stddev `sqrt(2 / fan_in)`.
    HeNormal,
    /// Uniform in `±sqrt(6 / fan_in)`.
    HeUniform,
    /// Truncated normal with stddev `sqrt(1 / fan_in)`.
    LecunNormal,
    Zeros,
    Ones,
    /// Uniform in `[-0.05, 0.05)`: Keras' `"uniform"`, the default for embeddings.
    RandomUniform,
    /// Keras' `Orthogonal` (gain 1), the default for recurrent kernels: the `Q` of a
    /// standard normal matrix's QR decomposition, the signs fixed so `R`'s diagonal is
    /// positive (the draw is then uniform over orthogonal matrices); flattened to
    /// `(rows, last axis)`, transposed when it has fewer rows than columns.
    Orthogonal,
    /// Zeros with ones in the second quarter of the last axis: an LSTM's bias with Keras'
    /// `unit_forget_bias` (gates `i, f, c, o`; the forget gate starts open). Picked by the
    /// layer, never named by an argument.
    ForgetBiasOne,
}

/// The stddev of a unit normal truncated to ±2, by which Keras divides so the truncated
/// distribution keeps the intended variance.
const TRUNCATED_STDDEV: f64 = 0.879_625_661_034_239_8;

impl Initializer {
    pub const ALL: [Initializer; 10] = [
        Initializer::GlorotUniform,
        Initializer::GlorotNormal,
        Initializer::HeNormal,
        Initializer::HeUniform,
        Initializer::LecunNormal,
        Initializer::Zeros,
        Initializer::Ones,
        Initializer::RandomUniform,
        Initializer::Orthogonal,
        Initializer::ForgetBiasOne,
    ];

    /// The Keras name.
    pub fn name(self) -> &'static str {
        match self {
            Initializer::GlorotUniform => "glorot_uniform",
            Initializer::GlorotNormal => "glorot_normal",
            Initializer::HeNormal => "he_normal",
            Initializer::HeUniform => "he_uniform",
            Initializer::LecunNormal => "lecun_normal",
            Initializer::Zeros => "zeros",
            Initializer::Ones => "ones",
            Initializer::RandomUniform => "random_uniform",
            Initializer::Orthogonal => "orthogonal",
            Initializer::ForgetBiasOne => "forget_bias_one",
        }
    }

    /// Looks an initializer up by its Keras name (`uniform` is an alias of `random_uniform`).
    pub fn from_name(name: &str) -> Option<Initializer> {
        if name == "uniform" {
            return Some(Initializer::RandomUniform);
        }
        Initializer::ALL.into_iter().find(|i| i.name() == name)
    }

    /// Samples a tensor of `dims` for a weight with the given fans;
    /// [`Error::OutOfMemory`](crate::Error::OutOfMemory) when it cannot be allocated.
    pub fn sample(
        self,
        dims: &[usize],
        fan_in: usize,
        fan_out: usize,
        rng: &mut Rng,
    ) -> Result<ArrayD<f32>> {
        let what = || format!("{self} initializer: f32{}", Shape::from(dims));
        self.sample_named(what, dims, fan_in, fan_out, rng)
    }

    /// [`sample`](Initializer::sample) with the error naming `what` (the parameter).
    pub(crate) fn sample_named(
        self,
        what: impl FnOnce() -> String + Copy,
        dims: &[usize],
        fan_in: usize,
        fan_out: usize,
        rng: &mut Rng,
    ) -> Result<ArrayD<f32>> {
        let (fi, fo) = (fan_in.max(1) as f64, fan_out.max(1) as f64);
        let uniform = |limit: f64, rng: &mut Rng| {
            array_from_fn(what, dims, || ((rng.next_f64() * 2.0 - 1.0) * limit) as f32)
        };
        let truncated = |stddev: f64, rng: &mut Rng| {
            array_from_fn(what, dims, || loop {
                let z = rng.normal();
                if z.abs() <= 2.0 {
                    break (z * stddev / TRUNCATED_STDDEV) as f32;
                }
            })
        };
        match self {
            Initializer::GlorotUniform => uniform((6.0 / (fi + fo)).sqrt(), rng),
            Initializer::GlorotNormal => truncated((2.0 / (fi + fo)).sqrt(), rng),
            Initializer::HeNormal => truncated((2.0 / fi).sqrt(), rng),
            Initializer::HeUniform => uniform((6.0 / fi).sqrt(), rng),
            Initializer::LecunNormal => truncated((1.0 / fi).sqrt(), rng),
            Initializer::Zeros => array_filled(what, dims, 0.0),
            Initializer::Ones => array_filled(what, dims, 1.0),
            Initializer::RandomUniform => uniform(0.05, rng),
            Initializer::Orthogonal => orthogonal(what, dims, rng),
            Initializer::ForgetBiasOne => {
                let mut a = array_filled(what, dims, 0.0f32)?;
                let width = dims.last().copied().unwrap_or(0);
                let units = width / 4;
                for (k, v) in a.iter_mut().enumerate() {
                    let j = k % width.max(1);
                    if (units..2 * units).contains(&j) {
                        *v = 1.0;
                    }
                }
                Ok(a)
            }
        }
    }
}

/// Keras' `Orthogonal(gain=1)` for `dims` (rank >= 2; a smaller rank is flattened to one
/// row, which Keras refuses: a weight no catalogue layer has).
fn orthogonal(
    what: impl FnOnce() -> String + Copy,
    dims: &[usize],
    rng: &mut Rng,
) -> Result<ArrayD<f32>> {
    let cols = dims.last().copied().unwrap_or(1);
    let rows: usize = dims[..dims.len().saturating_sub(1)].iter().product();
    let (m, n) = (rows.max(cols), rows.min(cols));
    // Columns of an m x n standard normal matrix, orthonormalised by modified Gram-Schmidt
    // (run twice, for the precision Householder would give): Q with R's diagonal positive,
    // which is numpy's QR with Keras' sign fix.
    let mut q: Vec<Vec<f64>> = Vec::new();
    q.try_reserve_exact(n)
        .map_err(|_| crate::memory::out_of_memory(what, Some(n as u64 * 8)))?;
    for _ in 0..n {
        let mut v: Vec<f64> = Vec::new();
        v.try_reserve_exact(m)
            .map_err(|_| crate::memory::out_of_memory(what, Some(m as u64 * 8)))?;
        v.extend((0..m).map(|_| rng.normal()));
        q.push(v);
    }
    for j in 0..n {
        let (done, rest) = q.split_at_mut(j);
        let v = &mut rest[0];
        for _ in 0..2 {
            for u in done.iter() {
                let d: f64 = u.iter().zip(v.iter()).map(|(a, b)| a * b).sum();
                v.iter_mut().zip(u).for_each(|(x, a)| *x -= d * a);
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        }
    }
    // Q is m x n (column j is q[j]); the weight is Q, or its transpose when rows < cols.
    let mut k = 0usize;
    array_from_fn(what, dims, || {
        let (r, c) = (k / cols.max(1), k % cols.max(1));
        k += 1;
        (if rows >= cols { q[c][r] } else { q[r][c] }) as f32
    })
}

impl fmt::Display for Initializer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
