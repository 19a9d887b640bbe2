//! Which vector instructions the kernels with several paths may use: what the CPU has,
//! and in tests no more than the calling thread's cap, so that each narrower path is
//! tested (against the wider one, bit for bit) on a CPU that has the wider ones.

/// A set of vector instructions, narrowest first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum Level {
    Baseline,
    /// AVX2 and FMA.
    Avx2,
    /// AVX-512F besides AVX2 and FMA.
    Avx512,
}

impl Level {
    /// Whether AVX2 and FMA may be used (true for `Avx512` too).
    pub(crate) fn avx2(self) -> bool {
        self >= Level::Avx2
    }
}

/// The widest level the kernels may use on this thread.
pub(crate) fn level() -> Level {
    #[cfg(test)]
    {
        cpu().min(CAP.get())
    }
    #[cfg(not(test))]
    cpu()
}

/// `simd`, but no wider than [`level`]: a safe function that takes its level from its
/// caller clamps it so, and runs no instruction the CPU lacks whatever it was given.
pub(crate) fn at_most(simd: Level) -> Level {
    simd.min(level())
}

fn cpu() -> Level {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return if std::arch::is_x86_feature_detected!("avx512f") {
                Level::Avx512
            } else {
                Level::Avx2
            };
        }
    }
    Level::Baseline
}

#[cfg(test)]
thread_local! {
    static CAP: std::cell::Cell<Level> = const { std::cell::Cell::new(Level::Avx512) };
}

/// Runs `f` once for each level the CPU has, widest first, with this thread's kernels
/// capped at it.
#[cfg(test)]
pub(crate) fn for_each_level(mut f: impl FnMut(Level)) {
    for l in [Level::Avx512, Level::Avx2, Level::Baseline] {
        if l <= cpu() {
            CAP.set(l);
            f(l);
        }
    }
    CAP.set(Level::Avx512);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_from_a_caller_is_clamped_to_what_this_thread_may_use() {
        for_each_level(|l| {
            assert_eq!(at_most(Level::Avx512), l);
            assert_eq!(at_most(Level::Baseline), Level::Baseline);
        });
    }
}
