//! The recording max pooling of `relu(conv(x, w) + bias)` with the convolution computed
//! here, a tile at a time, by Winograd's forward form (`ops::conv_winograd`).
//!
//! A network's second `Conv2D(relu)` → `MaxPooling2D` (many features in and out, where
//! Winograd's method pays) writes the convolution's output only for the pooling to read it
//! back. Where every window lies inside one of the convolution's output tiles (windows as
//! far apart as they are large, no padding, the tiles' edge a multiple of the windows'),
//! the forward form hands each tile's output pixels, still in the core's cache, to the
//! pooling of the windows in it, and the output never goes to memory. The pixels are
//! those `conv2d` stores, bit for bit, and each window is pooled by the stored pooling's
//! window code ([`Pool2d::reduce_index_bias_relu`]'s) with its elements in the same order,
//! so output and index are that pooling's of the stored convolution.

use super::{bias_relu_window, fill_offsets, BiasRelu, Pool2d};
use crate::ops::conv_winograd::{conv2d_emitting, emitting_edge, Tiles};
use crate::{Error, Result};

impl Pool2d {
    /// Whether every window lies inside the operand and inside one output tile of edge
    /// `edge`: windows as far apart as they are large, no padding, and the edge a multiple
    /// of the window's along both axes.
    pub(super) fn tiles_hold_windows(&self, edge: usize) -> bool {
        let (kh, kw) = (self.kh, self.kw);
        kh > 0
            && kw > 0
            && [self.sh, self.sw] == [kh, kw]
            && [self.ph, self.pw] == [0, 0]
            && edge.is_multiple_of(kh)
            && edge.is_multiple_of(kw)
            && self.oh * kh <= self.h
            && self.ow * kw <= self.w
    }

    /// Whether [`Pool2d::tiles_reduce_index_bias_relu`] computes this pooling of `g`'s
    /// output.
    pub(in crate::ops) fn tiles_fit(&self, g: &Tiles) -> bool {
        self.output_tiles_fit(g, emitting_edge(g))
    }

    /// Whether this pooling pools the output of the convolution `g` by tiles of `edge`
    /// (none: the convolution takes no tiles), each window inside one tile.
    pub(super) fn output_tiles_fit(&self, g: &Tiles, edge: Option<usize>) -> bool {
        g.batch == self.n
            && g.output == [self.h, self.w]
            && g.cout == self.c
            && self.bias_relu_indexable()
            && edge.is_some_and(|edge| self.tiles_hold_windows(edge))
    }

    /// The windows of the tile of edge `edge` at `(b, y, x)` (image, first row and column)
    /// where [`Pool2d::tiles_hold_windows`]: per window, the offset of its first element
    /// in the tile's pixels (row-major, `c` each) and of its outputs in the pooled array.
    /// The windows whose first row and column lie in the tile lie in it whole.
    pub(super) fn tile_windows(
        &self,
        edge: usize,
        (b, y, x): (usize, usize, usize),
    ) -> impl Iterator<Item = (usize, usize)> {
        let p = *self;
        let rows = y / p.kh..((y + edge) / p.kh).min(p.oh);
        let cols = x / p.kw..((x + edge) / p.kw).min(p.ow);
        rows.flat_map(move |a| {
            cols.clone().map(move |q| {
                let first = ((a * p.kh - y) * edge + (q * p.kw - x)) * p.c;
                (first, ((b * p.oh + a) * p.ow + q) * p.c)
            })
        })
    }

    /// [`Pool2d::reduce_index_bias_relu`] of the convolution `g` (Winograd's tiles, as
    /// `conv_native::winograd` makes them) of `x` by `w`, whose output is this pooling's
    /// operand: that output computed a tile at a time and never stored. `scratch` holds
    /// the convolution's transforms and a tile per task.
    pub(in crate::ops) fn tiles_reduce_index_bias_relu(
        &self,
        g: &Tiles,
        (x, w, bias): (&[f32], &[f32], &[f32]),
        (out, index): (&mut [f32], &mut [u8]),
        act: &BiasRelu<f32>,
        scratch: &mut Vec<f32>,
    ) -> Result<()> {
        let p = *self;
        let fits = self.tiles_fit(g)
            && bias.len() == p.c
            && out.len() == p.n * p.oh * p.ow * p.c
            && index.len() == out.len();
        let edge = emitting_edge(g)
            .filter(|_| fits)
            .ok_or_else(|| Error::Backend {
                backend: "native",
                message: "internal: fused convolution and pooling operands do not match".into(),
            })?;
        if out.is_empty() {
            return Ok(());
        }
        // A window's elements from its first, in a tile's pixels (row-major, as the stored
        // pooling walks them).
        let mut offs = [0usize; 256];
        fill_offsets(&mut offs, (0, p.kh, 0, p.kw), edge, p.c, 0);
        let offs = &offs[..p.kh * p.kw];
        let simd = crate::kernel::simd::level();
        let (ob, ib, len) = (
            out.as_mut_ptr() as usize,
            index.as_mut_ptr() as usize,
            out.len(),
        );
        let emit = |tile: &[f32], origin: (usize, usize, usize)| {
            if tile.len() != edge * edge * p.c {
                return false;
            }
            for (first, at) in p.tile_windows(edge, origin) {
                if at + p.c > len {
                    return false;
                }
                // SAFETY: in bounds (checked just above). The window lies in this tile
                // alone and each tile is emitted once, so its `c` outputs are this call's
                // alone; `out` and `index` stay borrowed until `conv2d_emitting` returns.
                let (acc, ix) = unsafe {
                    (
                        std::slice::from_raw_parts_mut((ob as *mut f32).add(at), p.c),
                        std::slice::from_raw_parts_mut((ib as *mut u8).add(at), p.c),
                    )
                };
                // SAFETY: `simd` is what the CPU supports (detected above).
                unsafe { bias_relu_window(simd, (&tile[first..], offs, bias, act), acc, ix) };
            }
            true
        };
        conv2d_emitting(g, x, w, scratch, &emit)
    }
}
