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
}

/// The stddev of a unit normal truncated to ±2, by which Keras divides so the truncated
/// distribution keeps the intended variance.
const TRUNCATED_STDDEV: f64 = 0.879_625_661_034_239_8;

impl Initializer {
    pub const ALL: [Initializer; 8] = [
        Initializer::GlorotUniform,
        Initializer::GlorotNormal,
        Initializer::HeNormal,
        Initializer::HeUniform,
        Initializer::LecunNormal,
        Initializer::Zeros,
        Initializer::Ones,
        Initializer::RandomUniform,
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
        }
    }
}

impl fmt::Display for Initializer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
