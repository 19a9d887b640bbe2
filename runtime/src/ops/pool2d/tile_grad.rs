//! A convolution's kernel and input gradients by Winograd's tiles straight from the pooled
//! cotangent of the fused bias, ReLU and max pooling after it, without the convolution
//! output's cotangent `dY` in memory (see the native planner's `conv_pool_grad`).
//!
//! A network's second `Conv2D(relu)` → `MaxPooling2D` has a gradient that writes `dY` (as
//! large as the convolution's output, zero but at one element per pooled output) for the
//! kernel gradient and the input gradient to read it back, both by Winograd's tiles of
//! `dY` (the kernel gradient's output tiles, the scatter form's input tiles, from the
//! first pixel on). Where every pooling window lies inside one tile (`conv_tiles`' test),
//! each tile of `dY` follows from its windows' pooled cotangents and index alone: the
//! drivers fill it where they read it, in a buffer that stays in cache, with the very
//! code that writes `dY` in full (`disjoint::write_selected`: the selected element's gated
//! cotangent, `+0` elsewhere, and zeros where no window reaches). The tiles hold the
//! unfused plan's values and the drivers transform them as they transform the stored
//! ones, so both gradients are its bits.

use super::disjoint::write_selected;
use super::{Pool2d, ReluGate, POS};
use crate::ops::conv_winograd::{
    conv2d_filled, filled_edge, gradient_edge, kernel_grad_filled, Tiles,
};
use crate::{Error, Result};

impl Pool2d {
    /// Whether [`Pool2d::tiles_kernel_grad`] computes the kernel gradient of `g`'s
    /// convolution, whose output this pooling pooled.
    pub(in crate::ops) fn tiles_kernel_grad_fit(&self, g: &Tiles) -> bool {
        self.output_tiles_fit(g, gradient_edge(g))
    }

    /// Whether [`Pool2d::tiles_input_grad`] computes the convolution `g` of this pooling's
    /// operand's cotangent.
    pub(in crate::ops) fn tiles_input_grad_fit(&self, g: &Tiles) -> bool {
        g.batch == self.n
            && g.input == [self.h, self.w]
            && g.cin == self.c
            && self.bias_relu_indexable()
            && filled_edge(g).is_some_and(|edge| self.tiles_hold_windows(edge))
    }

    /// The kernel gradient of the convolution `g` (Winograd's tiles, as
    /// `conv_native::winograd` makes them) of `image`, whose output this pooling pooled,
    /// from the pooling's cotangent `src` and the `index` `reduce_index_bias_relu`
    /// recorded (the ReLU's gradient `gate`).
    pub(in crate::ops) fn tiles_kernel_grad(
        &self,
        g: &Tiles,
        image: &[f32],
        (src, index): (&[f32], &[u8]),
        gate: &ReluGate<f32>,
        out: &mut [f32],
        scratch: &mut Vec<f32>,
    ) -> Result<()> {
        let edge = gradient_edge(g)
            .filter(|_| self.tiles_kernel_grad_fit(g) && self.cotangent_fits(src, index))
            .ok_or_else(mismatch)?;
        let fill = self.tile_filler(edge, (src, index), gate);
        kernel_grad_filled(g, image, &fill, out, scratch)
    }

    /// The convolution `g` (Winograd's tiles, as `conv_native::winograd` makes them, in
    /// the scatter form) of this pooling's operand's cotangent by `kernel`: the input
    /// gradient of the convolution whose output it pooled, from the pooling's cotangent
    /// `src`, its `index` and the `gate`, as [`Pool2d::tiles_kernel_grad`].
    pub(in crate::ops) fn tiles_input_grad(
        &self,
        g: &Tiles,
        kernel: &[f32],
        (src, index): (&[f32], &[u8]),
        gate: &ReluGate<f32>,
        out: &mut [f32],
        scratch: &mut Vec<f32>,
    ) -> Result<()> {
        let edge = filled_edge(g)
            .filter(|_| self.tiles_input_grad_fit(g) && self.cotangent_fits(src, index))
            .ok_or_else(mismatch)?;
        let fill = self.tile_filler(edge, (src, index), gate);
        conv2d_filled(g, &fill, kernel, out, scratch)
    }

    /// Whether `src` and `index` are this pooling's output and record.
    fn cotangent_fits(&self, src: &[f32], index: &[u8]) -> bool {
        let len = self.n * self.oh * self.ow * self.c;
        src.len() == len && index.len() == len
    }

    /// Fills the tile of edge `edge` of the operand's gated cotangent at `(b, y, x)` (see
    /// `conv_winograd::FillTile`) from `src`, `index` and `gate`, for windows that
    /// [`Pool2d::tiles_hold_windows`] of that edge.
    fn tile_filler<'a>(
        &'a self,
        edge: usize,
        (src, index): (&'a [f32], &'a [u8]),
        gate: &'a ReluGate<f32>,
    ) -> impl Fn(&mut [f32], (usize, usize, usize)) -> bool + Sync + 'a {
        let p = *self;
        let simd = crate::kernel::simd::level();
        // A window's elements from its first: their places in a tile, their positions
        // (a window of more than the index's positions fills nothing).
        let mut elements = [(0usize, 0u8); 64];
        let cells = p.kh * p.kw;
        let fits = cells <= elements.len();
        for i in (0..p.kh).filter(|_| fits) {
            for j in 0..p.kw {
                elements[i * p.kw + j] = ((i * edge + j) * p.c, (i * p.kw + j) as u8);
            }
        }
        move |tile: &mut [f32], origin: (usize, usize, usize)| {
            if !fits || tile.len() != edge * edge * p.c {
                return false;
            }
            tile.fill(0.0);
            let mut targets = elements;
            for (first, so) in p.tile_windows(edge, origin) {
                for (t, e) in targets.iter_mut().zip(&elements).take(cells) {
                    t.0 = first + e.0;
                }
                let Some(window) = src.get(so..so + p.c).zip(index.get(so..so + p.c)) else {
                    return false;
                };
                write_selected(simd, tile, &targets[..cells], window, POS, Some(gate));
            }
            true
        }
    }
}

fn mismatch() -> Error {
    Error::Backend {
        backend: "native",
        message: "internal: a pooled convolution gradient's operands do not match".into(),
    }
}
