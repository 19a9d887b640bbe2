//! The recording max pooling of `relu(conv(x, w) + bias)` with the convolution computed
//! here, a band of its rows at a time, by the direct kernel (`kernel::conv_direct`).
//!
//! A network's first `Conv2D(relu)` → `MaxPooling2D` writes the convolution's output (the
//! largest activation of the network) only for the pooling to read it back. Here each
//! output row of the pooling computes the convolution rows its windows cover into a
//! per-task scratch band that stays in cache, and pools that band at once, so the
//! convolution's output never goes to memory. The band's rows are those `conv2d` writes,
//! bit for bit (`conv_direct::conv2d_rows`), and the band is pooled by the same window
//! code as [`Pool2d::reduce_index_bias_relu`] in the same order, so output and index are
//! that pooling's of the convolution's output. Where `conv_pool_direct` takes the layer
//! (2×2 windows of a padding-free convolution, AVX-512), not even a band is stored.

use super::{bias_relu_window, BiasRelu, Pool2d};
use crate::kernel::conv_direct::{self, Direct2d};
use crate::kernel::crew;
use crate::{Error, Result};

/// Tasks per core, as the direct convolution's: a core slowed by another process leaves
/// its later rows to the others.
pub(super) const TASKS_PER_CORE: usize = 4;

impl Pool2d {
    /// Whether no two output rows' windows share an input row (row stride at least the
    /// window's height): then every convolution row is computed at most once.
    pub(in crate::ops) fn rows_disjoint(&self) -> bool {
        self.sh >= self.kh
    }

    /// [`Pool2d::reduce_index_bias_relu`] of the convolution `g` of `x` by `w` (whose output
    /// is this pooling's operand), that output computed band by band and never stored.
    /// `scratch` holds the bands (grown once, to a band per task). Correct for any window;
    /// the planner picks it only for [`Pool2d::rows_disjoint`] ones, where no row is
    /// computed twice.
    pub(in crate::ops) fn conv_reduce_index_bias_relu(
        &self,
        g: &Direct2d,
        (x, w, bias): (&[f32], &[f32], &[f32]),
        (out, index): (&mut [f32], &mut [u8]),
        act: &BiasRelu<f32>,
        scratch: &mut Vec<f32>,
    ) -> Result<()> {
        let p = *self;
        let row = p.ow * p.c;
        let fits = g.batch == p.n
            && g.output == [p.h, p.w]
            && g.cout == p.c
            && bias.len() == p.c
            && out.len() == p.n * p.oh * row
            && index.len() == out.len()
            && self.bias_relu_indexable();
        if !fits {
            return Err(Error::Backend {
                backend: "native",
                message: "internal: fused convolution and pooling operands do not match".into(),
            });
        }
        if out.is_empty() {
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        if p.conv_pool_direct_fits(g, x, w) {
            p.conv_pool_direct(g, (x, w, bias), (out, index), act);
            return Ok(());
        }
        let units = p.n * p.oh;
        let tasks = (crew::width() * TASKS_PER_CORE).min(units).max(1);
        // A band holds the rows one output row's windows cover (at most the window's
        // height, clipped to the operand).
        let band = p.kh.min(p.h) * p.w * p.c;
        if scratch.len() < tasks * band {
            scratch.resize(tasks * band, 0.0);
        }
        let simd = crate::kernel::simd::level();
        let failed = std::sync::atomic::AtomicBool::new(false);
        let (ob, ib, sb) = (
            out.as_mut_ptr() as usize,
            index.as_mut_ptr() as usize,
            scratch.as_mut_ptr() as usize,
        );
        let block = |img: &[f32], offs: &[usize], a: &mut [f32], ix: &mut [u8]| {
            // SAFETY: `simd` is what the CPU supports (detected above).
            unsafe { bias_relu_window(simd, (img, offs, bias, act), a, ix) }
        };
        crew::run(tasks, &|t| {
            let us = crew::part(units, tasks, t);
            if us.is_empty() {
                return;
            }
            let (lo, len) = (us.start * row, us.len() * row);
            // SAFETY: tasks take disjoint runs of output rows of `out` and `index`, and
            // band `t` of the scratch (which holds `tasks` bands); all three stay mutably
            // borrowed (used by no one else) until `run` returns.
            let (o, i, s) = unsafe {
                (
                    std::slice::from_raw_parts_mut((ob as *mut f32).add(lo), len),
                    std::slice::from_raw_parts_mut((ib as *mut u8).add(lo), len),
                    std::slice::from_raw_parts_mut((sb as *mut f32).add(t * band), band),
                )
            };
            let mut offs = [0usize; 256];
            let rows = o.chunks_exact_mut(row).zip(i.chunks_exact_mut(row));
            for (r, (orow, irow)) in us.zip(rows) {
                let (b, oy) = (r / p.oh, r % p.oh);
                let (i0, i1) = Pool2d::span(oy, p.sh, p.kh, p.ph, p.h);
                let img = &mut s[..(i1 - i0) * p.w * p.c];
                if conv_direct::conv2d_rows(g, x, w, b, i0..i1, img).is_err() {
                    failed.store(true, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                let init = f32::NEG_INFINITY;
                p.row_indexed(img, (0, i1 - i0), (orow, irow), &mut offs, init, &block);
            }
        });
        if failed.into_inner() {
            return Err(Error::Backend {
                backend: "native",
                message: "internal: direct convolution operands do not match their geometry".into(),
            });
        }
        Ok(())
    }
}
