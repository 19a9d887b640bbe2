//! Winograd's minimal filtering F(2×2, 3×3) and F(4×4, 3×3) for the native backend's 3×3,
//! stride-1, undilated, ungrouped two-dimensional convolutions (NHWC input, HWIO kernel),
//! and the kernel gradient of such a convolution by the same algebra transposed.
//!
//! Through im2col every output pixel costs 9 multiply-adds per input and output feature.
//! Here the output is cut into tiles of 2×2 pixels; each tile's 4×4 input window `d` and
//! the kernel `g` are carried by fixed linear maps to 4×4 arrays `V = Bᵀ d B` and
//! `U = G g Gᵀ`, where a tile's outputs are `Aᵀ (U ⊙ V) A`. Summed over the input
//! features, the element-wise products become 16 matrix products per block of tiles
//! (`[tiles, in] · [in, out]`, one per position of the 4×4 array), 16 multiply-adds per
//! four output pixels instead of 36: the products run on the same matrix kernel as the
//! other methods, and the transforms are additions only (and halvings of the kernel).
//! They still read and write every tile's 16 positions (about a third of the time of
//! the `cnn` workload's second layer, timed without them by `time_winograd`), so the
//! method pays only where the products are large enough (`Tiles::pays`).
//!
//! The kernel gradient `dg = Σ_tiles Gᵀ ((A dy Aᵀ) ⊙ (Bᵀ d B)) G` is the same bilinear
//! form read for the kernel (the transpose of the forward's identity): per position of
//! the 4×4 array a product `Vᵀ · W` as deep as the tiles, the cotangent's 2×2 tiles
//! carried to `W = A dy Aᵀ`.
//!
//! Where the products are few enough to pay for heavier transforms (`Tiles::four_pays`:
//! up to 4,096 feature pairs, 64 × 64 or 32 × 128, and tiles that use the output's pixels
//! well), the forward, the scatter form below and the kernel gradient take F(4×4, 3×3)
//! instead (`f4`): 4×4 tiles from 6×6 windows, 36 products per 16 outputs rather than 16
//! per 4, by the same drivers (generic over the [`Form`] of the tiles). What is said here
//! of 2×2 tiles and their 4×4 arrays holds for 4×4 tiles and 6×6 arrays there.
//!
//! The results differ from im2col's in their last bits (other sums in another order); the
//! transforms' sums are bounded by a few times the inputs', so the error stays within a
//! few units in the last place of those sums (some ten times that for F(4×4), whose
//! transforms multiply by up to 8 and by ⅙). (An infinite input becomes NaN in the
//! transforms, `∞ − ∞`, where im2col gives an infinity; with F(4×4) every output of its
//! 4×4 tile can become NaN, and kernel-gradient taps that never read it.) Tiles are cut
//! per image and each tile's sums do not depend on the block it is computed in, nor on
//! the cores (each task's products stay on its core, never split along their depth), so
//! a prediction does not depend on the batch it came in; the kernel gradient's tiles are
//! cut into parts by the shapes alone and the parts' sums added in order, so it does not
//! depend on the thread count.
//!
//! The forward form can also hand each tile's output pixels, still in cache, to a
//! consumer instead of storing them (`conv2d_emitting`): the max pooling after a
//! `Conv2D(relu)` pools the windows inside each tile there (`pool2d::conv_tiles`). The
//! other way round, the kernel gradient and the scatter form can read each tile of their
//! cotangent (input) from a filler instead of an array (`kernel_grad_filled`,
//! `conv2d_filled`): that pooling's gradient fills them from the pooled cotangent
//! (`pool2d::tile_grad`), so the cotangent is never stored.
//!
//! Window positions outside the input (padding) read zeros, and tile outputs past the
//! output's edge are dropped, so any padding, `valid`, `same` or lopsided, takes this path.
//! A convolution with more output tiles than input tiles (the input gradient of a `valid`
//! layer, padded by 2) runs the forward's identity transposed instead (`scatter`): each
//! 2×2 tile of the input adds its 4×4 window of outputs, so the products are the input's
//! tiles' (36 per 11×11 image) rather than the padded output's (49 per 13×13; with 4×4
//! tiles, 9 against 16).

use crate::kernel::crew;
use crate::kernel::gemm::{matmul, Mat};
use crate::kernel::real::Real;
use crate::kernel::simd::{level, Level};
use crate::Result;
use std::ops::Range;

/// Input and output features a convolution needs at least for this method: the products
/// are as deep as the input features and as wide as the output features, too small below
/// this for the matrix kernel's tiles (12 × 32 with AVX-512) to run at speed.
const MIN_FEATURES: usize = 32;
/// Feature pairs a convolution may have at most: beyond, the 16 transformed kernels
/// (16 × pairs) no longer stay in a core's L2 cache while each block of tiles streams
/// through all of them, and im2col's one pass over the kernel is faster.
const MAX_PAIRS: usize = 128 * 128;
/// Elements of one block's transformed tiles (inputs and products): they stay in a
/// core's L2 cache between being written and being read.
const BLOCK_ELEMS: usize = 1 << 17;
/// Tiles per block, at least and at most.
const BLOCK_TILES: (usize, usize) = (12, 384);
/// Parts of a kernel gradient's tiles, at most (each keeps a partial sum).
const MAX_PARTS: usize = 8;
/// Tasks per core, so a core that finishes early takes work from one that started late.
const TASKS_PER_CORE: usize = 4;
/// The 4×4 array of a tile.
const XI: usize = 16;
/// The share of F(2×2)'s products under which a convolution takes F(4×4)'s, as a fraction:
/// where F(4×4) makes 0.73 of the products (a 14×14 or 13×13 output), its heavier
/// transforms cost about what the products save; at 0.56 (11×11, 28×28, 32×32) it is
/// clearly faster.
const FOUR_GAIN: (usize, usize) = (2, 3);
/// Feature pairs F(4×4) may have at most: beyond 64 × 64 its forward was not reliably
/// faster than F(2×2)'s on the shapes timed (`time_winograd`) and its kernel gradient was
/// slower (its 36 transformed kernels, or partial sums, per pair fill a core's L2 cache
/// sooner than 16).
const FOUR_MAX_PAIRS: usize = 64 * 64;

/// One convolution's shapes: batch, input `[h, w]`, features in and out, output `[oh,
/// ow]` and the low padding (top, left; the high padding is implied by the output), and
/// the tiles' edge (2, or 4 for F(4×4, 3×3), `f4`; `conv_native::winograd` makes 2, and
/// the choices among the methods and edges are made from there).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tiles {
    pub batch: usize,
    pub input: [usize; 2],
    pub cin: usize,
    pub cout: usize,
    pub output: [usize; 2],
    pub pad: [i64; 2],
    pub edge: usize,
}

impl Tiles {
    /// Whether this method pays: enough features on both sides but not too many, and
    /// 2×2 tiles (the output's, or the input's where it scatters) no more than 6/16 of
    /// the output's pixels, so that their 16 products per tile and feature pair save at
    /// least a third of im2col's 9 per pixel (4×4 tiles, where they are taken, save more).
    pub(super) fn pays(&self) -> bool {
        let two = Tiles { edge: 2, ..*self };
        self.pays_with(two.forward_tiles().min(two.scatter_tiles()))
    }

    /// Whether the kernel gradient pays (see [`Tiles::pays`]): it always runs over the
    /// output's tiles.
    pub(super) fn gradient_pays(&self) -> bool {
        self.pays_with(Tiles { edge: 2, ..*self }.forward_tiles())
    }

    /// The tiles' edge and whether the scatter form runs: at each edge the scatter form
    /// where it takes fewer tiles than the output's (the input gradient of a `valid`
    /// layer: full padding), and edge 4 where that pays ([`Tiles::four_pays`]).
    fn choice(&self) -> (usize, bool) {
        let way = |edge: usize| {
            let t = Tiles { edge, ..*self };
            let (forward, scatter) = (t.forward_tiles(), t.scatter_tiles());
            (forward.min(scatter), scatter < forward)
        };
        let ((two, scatters_two), (four, scatters_four)) = (way(2), way(4));
        match self.four_pays(four, two) {
            true => (4, scatters_four),
            false => (2, scatters_two),
        }
    }

    /// Whether tiles of edge 4 pay, `four` of them per image against `two` of edge 2:
    /// few enough feature pairs, and products (36 per tile) at most `FOUR_GAIN` of those
    /// of edge 2 (16 per tile), which leaves room for their heavier transforms.
    fn four_pays(&self, four: usize, two: usize) -> bool {
        self.cin * self.cout <= FOUR_MAX_PAIRS && 36 * four * FOUR_GAIN.1 <= 16 * two * FOUR_GAIN.0
    }

    /// Whether the kernel gradient takes tiles of edge 4 ([`Tiles::four_pays`]).
    fn gradient_four(&self) -> bool {
        let tiles = |edge: usize| Tiles { edge, ..*self }.forward_tiles();
        self.four_pays(tiles(4), tiles(2))
    }

    /// The output's tiles per image, at this edge.
    fn forward_tiles(&self) -> usize {
        self.per_image()
    }

    /// The input's tiles per image, which the scatter form runs over, at this edge.
    fn scatter_tiles(&self) -> usize {
        let [ih, iw] = self.input_grid();
        ih * iw
    }

    /// Output tiles per image.
    fn per_image(&self) -> usize {
        let [gh, gw] = self.grid();
        gh * gw
    }

    fn pays_with(&self, tiles: usize) -> bool {
        let pixels = self.output[0] * self.output[1];
        self.cin >= MIN_FEATURES
            && self.cout >= MIN_FEATURES
            && self.cin * self.cout <= MAX_PAIRS
            && 16 * tiles <= 6 * pixels
    }

    /// Tiles per image along each axis over the input, for the scatter form.
    fn input_grid(&self) -> [usize; 2] {
        [
            self.input[0].div_ceil(self.edge),
            self.input[1].div_ceil(self.edge),
        ]
    }

    /// Tiles per image along each axis.
    fn grid(&self) -> [usize; 2] {
        [
            self.output[0].div_ceil(self.edge),
            self.output[1].div_ceil(self.edge),
        ]
    }

    /// Positions of a tile's transformed array: its window's pixels.
    fn positions(&self) -> usize {
        (self.edge + 2) * (self.edge + 2)
    }

    fn count(&self) -> usize {
        let [gh, gw] = self.grid();
        self.batch * gh * gw
    }

    /// Tiles per block: the block's transformed inputs and products fit `BLOCK_ELEMS`
    /// (for the features `pays` allows).
    fn block(&self) -> usize {
        self.block_of(self.count())
    }

    /// Tiles per block when there are `tiles` in all (see [`Tiles::block`]).
    fn block_of(&self, tiles: usize) -> usize {
        (BLOCK_ELEMS / (self.positions() * (self.cin + self.cout)).max(1))
            .clamp(BLOCK_TILES.0, BLOCK_TILES.1)
            .min(tiles.max(1))
    }

    /// The image and the top-left output pixel of tile `t`.
    fn origin(&self, t: usize) -> (usize, usize, usize) {
        let [gh, gw] = self.grid();
        let (b, r) = (t / (gh * gw), t % (gh * gw));
        (b, self.edge * (r / gw), self.edge * (r % gw))
    }

    /// The input row (along `axis`) under window position `k` of the tile at output
    /// position `o`, if it is not padding and not read only for outputs past the edge
    /// (position `k > 2` feeds the tile's outputs `k − 2` on alone: a kernel gradient
    /// would multiply it by those outputs' zero cotangent, and an infinity there, which
    /// the definition never reads, would make a NaN).
    fn at(&self, axis: usize, o: usize, k: usize) -> Option<usize> {
        if k > 2 && o + k - 2 >= self.output[axis] {
            return None;
        }
        let q = (o + k) as i64 - self.pad[axis];
        (q >= 0 && q < self.input[axis] as i64).then_some(q as usize)
    }

    fn fits<T>(&self, x: &[T], y: &[T]) -> bool {
        self.fits_input(x) && self.fits_output(y)
    }

    fn fits_output<T>(&self, y: &[T]) -> bool {
        let [oh, ow] = self.output;
        y.len() >= self.batch * oh * ow * self.cout
    }

    fn fits_input<T>(&self, x: &[T]) -> bool {
        let [h, w] = self.input;
        x.len() >= self.batch * h * w * self.cin
    }
}

fn mismatch() -> crate::Error {
    crate::Error::Backend {
        backend: "native",
        message: "internal: Winograd convolution operands do not match their shapes".into(),
    }
}

/// Grows `scratch` to at least `len` elements (once; later calls of the same shapes find
/// it large enough).
fn grow<T: Real>(scratch: &mut Vec<T>, len: usize) {
    if scratch.len() < len {
        scratch.resize(len, T::zero());
    }
}

/// `out = conv(x, w)` for tiles of edge 2 (`conv_native::winograd`), by the edge and form
/// that [`Tiles::choice`] picks.
pub(super) fn conv2d<T: Real>(
    g: &Tiles,
    x: &[T],
    w: &[T],
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    if g.edge != 2 || !g.fits(x, out) || w.len() < 9 * g.cin * g.cout {
        return Err(mismatch());
    }
    let four = Tiles { edge: 4, ..*g };
    match g.choice() {
        (4, true) => scatter::<T, f4::F4>(&four, x, w, out, scratch),
        (4, false) => forward::<T, f4::F4>(&four, x, w, out, scratch),
        (_, true) => scatter::<T, F2>(g, x, w, out, scratch),
        (_, false) => forward::<T, F2>(g, x, w, out, scratch),
    }
}

/// The tiles' edge where [`conv2d_emitting`] computes `g`'s convolution (`g` of edge 2, as
/// `conv_native::winograd` makes it): where [`conv2d`] takes the forward form, not the
/// scatter form.
pub(super) fn emitting_edge(g: &Tiles) -> Option<usize> {
    match (g.edge, g.choice()) {
        (2, (edge, false)) => Some(edge),
        _ => None,
    }
}

/// `conv(x, w)` as [`conv2d`] computes it where [`emitting_edge`] is some, each tile's
/// output handed to `emit` rather than stored (see [`forward_emitting`]; the tiles are of
/// that edge).
pub(super) fn conv2d_emitting<T: Real>(
    g: &Tiles,
    x: &[T],
    w: &[T],
    scratch: &mut Vec<T>,
    emit: &EmitTile<'_, T>,
) -> Result<()> {
    match emitting_edge(g) {
        Some(4) => forward_emitting::<T, f4::F4>(&Tiles { edge: 4, ..*g }, x, w, scratch, emit),
        Some(_) => forward_emitting::<T, F2>(g, x, w, scratch, emit),
        None => Err(mismatch()),
    }
}

/// The tiles' edge where [`conv2d_filled`] computes `g`'s convolution (`g` of edge 2):
/// where [`conv2d`] takes the scatter form, whose tiles are the input's, from its first
/// pixel on.
pub(super) fn filled_edge(g: &Tiles) -> Option<usize> {
    match (g.edge, g.choice()) {
        (2, (edge, true)) => Some(edge),
        _ => None,
    }
}

/// `out = conv(x, w)` as [`conv2d`] computes it where [`filled_edge`] is some, each tile
/// of the input `x` (of that edge) filled by `fill` where it is read instead of stored.
pub(super) fn conv2d_filled<T: Real>(
    g: &Tiles,
    fill: &FillTile<'_, T>,
    w: &[T],
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    let x = Tiled::Filled(fill);
    match filled_edge(g) {
        Some(4) => scatter_from::<T, f4::F4>(&Tiles { edge: 4, ..*g }, x, w, out, scratch),
        Some(_) => scatter_from::<T, F2>(g, x, w, out, scratch),
        None => Err(mismatch()),
    }
}

/// The tiles' edge [`kernel_grad`] takes for `g` (of edge 2); its tiles are the output's,
/// from its first pixel on.
pub(super) fn gradient_edge(g: &Tiles) -> Option<usize> {
    (g.edge == 2).then(|| if g.gradient_four() { 4 } else { 2 })
}

/// [`kernel_grad`] with each tile of the cotangent (of the edge [`gradient_edge`] says)
/// filled by `fill` where it is read instead of stored.
pub(super) fn kernel_grad_filled<T: Real>(
    g: &Tiles,
    x: &[T],
    fill: &FillTile<'_, T>,
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    kernel_grad_tiled(g, x, Tiled::Filled(fill), out, scratch)
}

/// [`kernel_grad`] of the cotangent `ct`, stored or filled, by the tiles' edge
/// [`gradient_edge`] says.
fn kernel_grad_tiled<T: Real>(
    g: &Tiles,
    x: &[T],
    ct: Tiled<'_, T>,
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    match gradient_edge(g) {
        Some(4) => kernel_grad_from::<T, f4::F4>(&Tiles { edge: 4, ..*g }, x, ct, out, scratch),
        Some(_) => kernel_grad_from::<T, F2>(g, x, ct, out, scratch),
        None => Err(mismatch()),
    }
}

/// A form of the tiles: their edge, and its transforms for the forward, the scatter form
/// and the kernel gradient.
pub(super) trait Form {
    /// The output tiles' edge.
    const EDGE: usize;
    /// The transformed kernel `U = G g Gᵀ` of every (in, out) pair: `w` is `[3, 3,
    /// pairs]`, `u` `[positions, pairs]`; with `flip`, of the kernel turned by 180°.
    fn kernel<T: Real>(w: &[T], pairs: usize, flip: bool, u: &mut [T]);
    /// The kernel gradient `Gᵀ M G` of every (in, out) pair's summed products: `m` is
    /// `[positions, pairs]`, `out` `[3, 3, pairs]`.
    fn kernel_grad<T: Real>(m: &[T], pairs: usize, out: &mut [T]);
    /// `W = A dy Aᵀ` of the cotangent `ct`'s output tile `t` (`zeros` past the edge) into
    /// `dst[p · stride + at ..]` for each position `p`; false when it does not fit.
    #[allow(clippy::too_many_arguments)]
    fn cotangent<T: Real>(
        g: &Tiles,
        simd: Level,
        ct: &[T],
        t: usize,
        zeros: &[T],
        dst: &mut [T],
        stride: usize,
        at: usize,
    ) -> bool;
    /// `A y Aᵀ` of the scatter form's input tile `t` of `x`, as [`Form::cotangent`].
    #[allow(clippy::too_many_arguments)]
    fn spread<T: Real>(
        g: &Tiles,
        simd: Level,
        x: &[T],
        t: usize,
        zeros: &[T],
        dst: &mut [T],
        stride: usize,
        at: usize,
    ) -> bool;
    /// `B M Bᵀ` of the scatter form's tile `t`'s products added into its window's output
    /// pixels; false when they do not fit.
    ///
    /// # Safety
    /// As for [`Tiles::scatter_pixels`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn scatter<T: Real>(
        g: &Tiles,
        simd: Level,
        m: &[T],
        stride: usize,
        at: usize,
        t: usize,
        out_at: usize,
        out_len: usize,
    ) -> bool;
    /// `V = Bᵀ d B` of tile `t`'s window in `x` (`zeros` on padding) into `dst[p ·
    /// stride + at ..]` for each position `p`; false when it does not fit.
    #[allow(clippy::too_many_arguments)]
    fn input<T: Real>(
        g: &Tiles,
        simd: Level,
        x: &[T],
        t: usize,
        zeros: &[T],
        dst: &mut [T],
        stride: usize,
        at: usize,
    ) -> bool;
    /// `y = Aᵀ M A` of tile `t`'s products (`m[p · stride + at ..]`) into its output
    /// pixels; false when they do not fit.
    ///
    /// # Safety
    /// As for [`Tiles::output_pixels`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn output<T: Real>(
        g: &Tiles,
        simd: Level,
        m: &[T],
        stride: usize,
        at: usize,
        t: usize,
        out_at: usize,
        out_len: usize,
    ) -> bool;
    /// `A y Aᵀ` of a tile's pixels (`tile`: row-major, `EDGE` a row, `features` each) into
    /// `dst[p · stride + at ..]` for each position `p`, as [`Form::cotangent`] and
    /// [`Form::spread`] transform theirs; false when they do not fit.
    fn tile_cotangent<T: Real>(
        simd: Level,
        tile: &[T],
        features: usize,
        dst: (&mut [T], usize, usize),
    ) -> bool;
    /// `y = Aᵀ M A` of tile `t`'s products into `tile`, its pixels row-major (`EDGE` a
    /// row, `out` features each; those past the output's edge are left as they are); false
    /// when they do not fit.
    fn output_tile<T: Real>(
        g: &Tiles,
        simd: Level,
        m: Products<'_, T>,
        t: usize,
        tile: &mut [T],
    ) -> bool;
}

/// `impl Form for $form` with tiles of edge `$edge`, by the transforms named
/// `transform_kernel`, `transform_kernel_grad`, `transform_input`, `transform_cotangent`,
/// `transform_output` and `transform_scatter` where it is invoked (each form's module
/// defines its own).
macro_rules! impl_form {
    ($form:ident, $edge:literal) => {
        impl Form for $form {
            const EDGE: usize = $edge;

            fn kernel<T: Real>(w: &[T], pairs: usize, flip: bool, u: &mut [T]) {
                transform_kernel(w, pairs, flip, u)
            }

            fn kernel_grad<T: Real>(m: &[T], pairs: usize, out: &mut [T]) {
                transform_kernel_grad(m, pairs, out)
            }

            fn input<T: Real>(
                g: &Tiles,
                simd: Level,
                x: &[T],
                t: usize,
                zeros: &[T],
                dst: &mut [T],
                stride: usize,
                at: usize,
            ) -> bool {
                transform_input(simd, &g.input_rows(x, t, zeros), dst, stride, at)
            }

            fn cotangent<T: Real>(
                g: &Tiles,
                simd: Level,
                ct: &[T],
                t: usize,
                zeros: &[T],
                dst: &mut [T],
                stride: usize,
                at: usize,
            ) -> bool {
                transform_cotangent(simd, &g.cotangent_rows(ct, t, zeros), dst, stride, at)
            }

            fn spread<T: Real>(
                g: &Tiles,
                simd: Level,
                x: &[T],
                t: usize,
                zeros: &[T],
                dst: &mut [T],
                stride: usize,
                at: usize,
            ) -> bool {
                transform_cotangent(simd, &g.scatter_rows(x, t, zeros), dst, stride, at)
            }

            unsafe fn output<T: Real>(
                g: &Tiles,
                simd: Level,
                m: &[T],
                stride: usize,
                at: usize,
                t: usize,
                out_at: usize,
                out_len: usize,
            ) -> bool {
                // SAFETY: the caller's.
                let pixels = unsafe { g.output_pixels(t, out_at, out_len) };
                transform_output(simd, m, stride, at, pixels)
            }

            fn tile_cotangent<T: Real>(
                simd: Level,
                tile: &[T],
                features: usize,
                (dst, stride, at): (&mut [T], usize, usize),
            ) -> bool {
                match tile_rows(tile, features) {
                    Some(rows) => transform_cotangent(simd, &rows, dst, stride, at),
                    None => false,
                }
            }

            fn output_tile<T: Real>(
                g: &Tiles,
                simd: Level,
                (m, stride, at): Products<'_, T>,
                t: usize,
                tile: &mut [T],
            ) -> bool {
                match g.tile_pixels(t, tile) {
                    Some(pixels) => transform_output(simd, m, stride, at, pixels),
                    None => false,
                }
            }

            unsafe fn scatter<T: Real>(
                g: &Tiles,
                simd: Level,
                m: &[T],
                stride: usize,
                at: usize,
                t: usize,
                out_at: usize,
                out_len: usize,
            ) -> bool {
                // SAFETY: the caller's.
                let pixels = unsafe { g.scatter_pixels(t, out_at, out_len) };
                transform_scatter(simd, m, stride, at, pixels)
            }
        }
    };
}

/// F(2×2, 3×3): the transforms of this module.
pub(super) struct F2;

impl_form!(F2, 2);

/// `out = conv(x, w)` by tiles of form `F` (whose edge `g` has): blocks of tiles split
/// over the cores, each block's inputs transformed, multiplied and transformed back while
/// they are in the core's cache.
pub(super) fn forward<T: Real, F: Form>(
    g: &Tiles,
    x: &[T],
    w: &[T],
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    if !g.fits(x, out) {
        return Err(mismatch());
    }
    let (out_at, out_len) = (out.as_mut_ptr() as usize, out.len());
    forward_tiles::<T, F>(g, x, w, scratch, 0, &|simd, (m, stride, at), t, _| {
        // SAFETY: the output (`fits`, checked above) stays borrowed until this returns;
        // each tile writes its own pixels, and `forward_tiles` emits each tile once.
        unsafe { F::output(g, simd, m, stride, at, t, out_at, out_len) }
    })
}

/// The forward of `g` by tiles of form `F` (see [`forward`]) where each tile's output
/// goes to `emit` rather than to memory: `emit(pixels, image, top, left)` gets the tile's
/// pixels (row-major, `F::EDGE` a row, `cout` features each; those past the output's edge
/// hold whatever they held), the image they are in and their first row and column, and
/// returns false where it cannot take them. `emit` runs on every core at once, never twice
/// for a tile.
fn forward_emitting<T: Real, F: Form>(
    g: &Tiles,
    x: &[T],
    w: &[T],
    scratch: &mut Vec<T>,
    emit: &EmitTile<'_, T>,
) -> Result<()> {
    let tile = F::EDGE * F::EDGE * g.cout;
    forward_tiles::<T, F>(g, x, w, scratch, tile, &|simd, m, t, pixels| {
        F::output_tile(g, simd, m, t, pixels) && emit(pixels, g.origin(t))
    })
}

/// A tile's products as `Form::output` reads them: `m[p · stride + at ..]` for each
/// position `p`.
type Products<'a, T> = (&'a [T], usize, usize);

/// Fills a tile of a cotangent (or of the scatter form's input) where a driver reads it:
/// the tile's pixels (row-major, the edge a row, their features each, zeros past the
/// array's edge) into the buffer, for the tile of image `b` whose first pixel is row `y`,
/// column `x` (`(b, y, x)`); false where it cannot.
pub(super) type FillTile<'a, T> = dyn Fn(&mut [T], (usize, usize, usize)) -> bool + Sync + 'a;

/// An array the drivers read tile by tile: stored, or each tile filled where it is read.
#[derive(Clone, Copy)]
enum Tiled<'a, T> {
    Stored(&'a [T]),
    Filled(&'a FillTile<'a, T>),
}

/// The `P` pixel rows (`features` each) of a tile held row-major in `tile`; `None`
/// unless it holds exactly `P` of them.
fn tile_rows<T, const P: usize>(tile: &[T], features: usize) -> Option<[&[T]; P]> {
    (tile.len() == P * features)
        .then(|| std::array::from_fn(|p| &tile[p * features..(p + 1) * features]))
}

/// A consumer of the forward's output tiles ([`forward_emitting`]): a tile's pixels and
/// its image, top row and left column in, false out where it cannot take them.
pub(super) type EmitTile<'a, T> = dyn Fn(&[T], (usize, usize, usize)) -> bool + Sync + 'a;

/// [`forward_tiles`]' step per tile: the instructions, the tile's products, the tile and
/// the task's `extra` elements in, false out where it failed.
type TileStep<'a, T> = dyn Fn(Level, Products<'_, T>, usize, &mut [T]) -> bool + Sync + 'a;

/// The driver of [`forward`] and [`forward_emitting`]: per task a slot of `extra`
/// elements beside its transforms, and `emit(simd, products, t, extra)` per tile `t`.
fn forward_tiles<T: Real, F: Form>(
    g: &Tiles,
    x: &[T],
    w: &[T],
    scratch: &mut Vec<T>,
    extra: usize,
    emit: &TileStep<'_, T>,
) -> Result<()> {
    let (cin, cout) = (g.cin, g.cout);
    if !g.fits_input(x) || w.len() < 9 * cin * cout || g.edge != F::EDGE {
        return Err(mismatch());
    }
    let (tiles, block, positions) = (g.count(), g.block(), g.positions());
    if tiles == 0 || cout == 0 {
        return Ok(());
    }
    let blocks = tiles.div_ceil(block);
    let tasks = (crew::width() * TASKS_PER_CORE).min(blocks).max(1);
    // The transformed kernel, then per task: its transformed inputs, products, a row of
    // zeros for the padding and the `extra` elements.
    let kernel = positions * cin * cout;
    let slot = positions * block * (cin + cout) + cin + extra;
    grow(scratch, kernel + tasks * slot);
    let (u, slots) = scratch.split_at_mut(kernel);
    F::kernel(w, cin * cout, false, u);
    let u = &*u;
    let slots_at = slots.as_mut_ptr() as usize;
    // Read here: a test's cap on the instructions holds on this thread only.
    let simd = level();
    let failed = std::sync::atomic::AtomicBool::new(false);
    crew::run(tasks, &|t| {
        crew::serial(|| {
            // SAFETY: task `t` alone uses slot `t` (the scratch holds `tasks` slots after the
            // kernel).
            let slot =
                unsafe { std::slice::from_raw_parts_mut((slots_at as *mut T).add(t * slot), slot) };
            let (v, rest) = slot.split_at_mut(positions * block * cin);
            let (m, rest) = rest.split_at_mut(positions * block * cout);
            let (zeros, extra) = rest.split_at_mut(cin);
            zeros.fill(T::zero());
            for b in crew::part(blocks, tasks, t) {
                let first = b * block;
                let n = block.min(tiles - first);
                if !(0..n).all(|i| F::input(g, simd, x, first + i, zeros, v, block * cin, i * cin))
                {
                    failed.store(true, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                for xi in 0..positions {
                    let a = Mat {
                        data: &*v,
                        off: xi * block * cin,
                        rs: cin as isize,
                        cs: 1,
                    };
                    let b = Mat {
                        data: u,
                        off: xi * cin * cout,
                        rs: cout as isize,
                        cs: 1,
                    };
                    let c = &mut m[xi * block * cout..(xi + 1) * block * cout];
                    if matmul(n, cout, cin, a, b, c, cout, false).is_err() {
                        failed.store(true, std::sync::atomic::Ordering::Relaxed);
                        return;
                    }
                }
                // This block's tiles are this task's alone: each is emitted once.
                if !(0..n).all(|i| emit(simd, (m, block * cout, i * cout), first + i, extra)) {
                    failed.store(true, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
            }
        })
    });
    if failed.into_inner() {
        return Err(mismatch());
    }
    Ok(())
}

/// `out = conv(x, w)` for a convolution with more output tiles than input tiles, by the
/// forward's identity transposed: each tile of the input (2×2, or 4×4) adds its window
/// of outputs (4×4, or 6×6), `B [(A y Aᵀ) ⊙ (G f Gᵀ)] Bᵀ` with `f` the kernel turned by
/// 180° (the window of input tile `q` starts at output `q + pad − 2`). Windows of
/// neighbouring tiles overlap, windows two tile rows apart do not: the even tile rows of
/// every image add theirs first, split over the cores a block of whole rows at a time (a
/// row's tiles in order on one core), then the odd rows. Each output's sum so runs in an
/// order fixed by the shapes, whatever the batch and the cores.
pub(super) fn scatter<T: Real, F: Form>(
    g: &Tiles,
    x: &[T],
    w: &[T],
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    scatter_from::<T, F>(g, Tiled::Stored(x), w, out, scratch)
}

/// [`scatter`] of the input `x`, stored or each tile filled where it is read.
fn scatter_from<T: Real, F: Form>(
    g: &Tiles,
    x: Tiled<'_, T>,
    w: &[T],
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    let (cin, cout, positions) = (g.cin, g.cout, g.positions());
    let fits = match x {
        Tiled::Stored(x) => g.fits(x, out),
        Tiled::Filled(_) => g.fits_output(out),
    };
    if !fits || w.len() < 9 * cin * cout || g.edge != F::EDGE {
        return Err(mismatch());
    }
    // A filled tile's room per task.
    let filled = match x {
        Tiled::Stored(_) => 0,
        Tiled::Filled(_) => F::EDGE * F::EDGE * cin,
    };
    let [ih, iw] = g.input_grid();
    let image_out = g.output[0] * g.output[1] * cout;
    let out = &mut out[..g.batch * image_out];
    let lanes = (crew::width() * TASKS_PER_CORE).max(1);
    crew::run_chunks(out, lanes, image_out.max(1), &|_, chunk| {
        chunk.fill(T::zero())
    });
    if iw == 0 || cout == 0 {
        return Ok(());
    }
    // Blocks of whole tile rows; the even rows' count bounds the tasks of both phases.
    let rows_per_block = (g.block_of(g.batch * ih * iw) / iw).max(1);
    let block = rows_per_block * iw;
    let phase_rows = |parity: usize| ih.saturating_sub(parity).div_ceil(2);
    let tasks = lanes
        .min((g.batch * phase_rows(0)).div_ceil(rows_per_block))
        .max(1);
    let kernel = positions * cin * cout;
    let slot = positions * block * (cin + cout) + cin + filled;
    grow(scratch, kernel + tasks * slot);
    let (u, slots) = scratch.split_at_mut(kernel);
    F::kernel(w, cin * cout, true, u);
    let u = &*u;
    let (slots_at, out_at, out_len) = (
        slots.as_mut_ptr() as usize,
        out.as_mut_ptr() as usize,
        out.len(),
    );
    // Read here: a test's cap on the instructions holds on this thread only.
    let simd = level();
    let failed = std::sync::atomic::AtomicBool::new(false);
    for parity in 0..2 {
        let per_image = phase_rows(parity);
        let blocks = (g.batch * per_image).div_ceil(rows_per_block);
        // The block's `i`th tile: row `k` of this parity over all images, column `c`.
        let tile = |k: usize, c: usize| {
            let (b, r) = (k / per_image, 2 * (k % per_image) + parity);
            (b * ih + r) * iw + c
        };
        crew::run(tasks.min(blocks).max(1), &|t| {
            crew::serial(|| {
                // SAFETY: task `t` alone uses slot `t` (the scratch holds `tasks` slots after
                // the kernel).
                let slot = unsafe {
                    std::slice::from_raw_parts_mut((slots_at as *mut T).add(t * slot), slot)
                };
                let (v, rest) = slot.split_at_mut(positions * block * cin);
                let (m, rest) = rest.split_at_mut(positions * block * cout);
                let (zeros, pixels) = rest.split_at_mut(cin);
                zeros.fill(T::zero());
                for blk in crew::part(blocks, tasks.min(blocks).max(1), t) {
                    let k0 = blk * rows_per_block;
                    let k1 = (k0 + rows_per_block).min(g.batch * per_image);
                    let n = (k1 - k0) * iw;
                    let at = |i: usize| tile(k0 + i / iw, i % iw);
                    let fit = (0..n).all(|i| match x {
                        Tiled::Stored(x) => {
                            F::spread(g, simd, x, at(i), zeros, v, block * cin, i * cin)
                        }
                        Tiled::Filled(fill) => {
                            fill(pixels, g.scatter_origin(at(i)))
                                && F::tile_cotangent(simd, pixels, cin, (v, block * cin, i * cin))
                        }
                    });
                    if !fit {
                        failed.store(true, std::sync::atomic::Ordering::Relaxed);
                        return;
                    }
                    for xi in 0..positions {
                        let a = Mat {
                            data: &*v,
                            off: xi * block * cin,
                            rs: cin as isize,
                            cs: 1,
                        };
                        let b = Mat {
                            data: u,
                            off: xi * cin * cout,
                            rs: cout as isize,
                            cs: 1,
                        };
                        let c = &mut m[xi * block * cout..(xi + 1) * block * cout];
                        if matmul(n, cout, cin, a, b, c, cout, false).is_err() {
                            failed.store(true, std::sync::atomic::Ordering::Relaxed);
                            return;
                        }
                    }
                    for i in 0..n {
                        // SAFETY: the output stays borrowed until `run` returns; a window's
                        // pixels are its tile's alone while it adds into them (a row's tiles
                        // run in order on this task, and rows of one parity have disjoint
                        // windows).
                        let done = unsafe {
                            F::scatter(g, simd, m, block * cout, i * cout, at(i), out_at, out_len)
                        };
                        if !done {
                            failed.store(true, std::sync::atomic::Ordering::Relaxed);
                            return;
                        }
                    }
                }
            })
        });
    }
    if failed.into_inner() {
        return Err(mismatch());
    }
    Ok(())
}

/// The kernel gradient `[3, 3, in, out]` of the convolution from its input `x` and the
/// cotangent `ct` of its output: per part of the tiles a partial sum of the products
/// `Vᵀ · W` (one per position of the tiles' array), the parts added in order, then carried
/// back to the kernel's 3×3; by tiles of edge 4 where [`Tiles::gradient_four`].
pub(super) fn kernel_grad<T: Real>(
    g: &Tiles,
    x: &[T],
    ct: &[T],
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    kernel_grad_tiled(g, x, Tiled::Stored(ct), out, scratch)
}

/// The kernel gradient by tiles of form `F` (whose edge `g` has), whatever edge
/// [`gradient_edge`] would take (the tests compare the edges).
#[cfg(test)]
pub(super) fn kernel_grad_by<T: Real, F: Form>(
    g: &Tiles,
    x: &[T],
    ct: &[T],
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    kernel_grad_from::<T, F>(g, x, Tiled::Stored(ct), out, scratch)
}

/// [`kernel_grad_by`] of the cotangent `ct`, stored or each tile filled where it is read.
fn kernel_grad_from<T: Real, F: Form>(
    g: &Tiles,
    x: &[T],
    ct: Tiled<'_, T>,
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    let (cin, cout, positions) = (g.cin, g.cout, g.positions());
    let sums = positions * cin * cout;
    let (fits, filled) = match ct {
        Tiled::Stored(ct) => (g.fits(x, ct), 0),
        Tiled::Filled(_) => (g.fits_input(x), F::EDGE * F::EDGE * cout),
    };
    if g.edge != F::EDGE || !fits || out.len() < 9 * cin * cout {
        return Err(mismatch());
    }
    if sums == 0 {
        return Ok(());
    }
    let (tiles, block) = (g.count(), g.block());
    let blocks = tiles.div_ceil(block);
    let parts = blocks.clamp(1, MAX_PARTS);
    // Per part: its partial sums, transformed inputs and cotangents, a row of zeros and
    // room for a filled tile.
    let slot = sums + positions * block * (cin + cout) + cin.max(cout) + filled;
    grow(scratch, parts * slot);
    let slots_at = scratch.as_mut_ptr() as usize;
    // Read here: a test's cap on the instructions holds on this thread only.
    let simd = level();
    let failed = std::sync::atomic::AtomicBool::new(false);
    crew::run(parts, &|t| {
        crew::serial(|| {
            // SAFETY: part `t` alone uses slot `t`.
            let slot =
                unsafe { std::slice::from_raw_parts_mut((slots_at as *mut T).add(t * slot), slot) };
            let (acc, rest) = slot.split_at_mut(sums);
            let (v, rest) = rest.split_at_mut(positions * block * cin);
            let (wt, rest) = rest.split_at_mut(positions * block * cout);
            let (zeros, pixels) = rest.split_at_mut(cin.max(cout));
            zeros.fill(T::zero());
            acc.fill(T::zero());
            for b in crew::part(blocks, parts, t) {
                let first = b * block;
                let n = block.min(tiles - first);
                let fit = (0..n).all(|i| {
                    let (t, zi, zo) = (first + i, &zeros[..cin], &zeros[..cout]);
                    F::input(g, simd, x, t, zi, v, block * cin, i * cin)
                        && match ct {
                            Tiled::Stored(ct) => {
                                F::cotangent(g, simd, ct, t, zo, wt, block * cout, i * cout)
                            }
                            Tiled::Filled(fill) => {
                                fill(pixels, g.origin(t))
                                    && F::tile_cotangent(
                                        simd,
                                        pixels,
                                        cout,
                                        (wt, block * cout, i * cout),
                                    )
                            }
                        }
                });
                if !fit {
                    failed.store(true, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                for xi in 0..positions {
                    // Vᵀ read in place: the block's inputs are `[tiles, in]` row-major.
                    let a = Mat {
                        data: &*v,
                        off: xi * block * cin,
                        rs: 1,
                        cs: cin as isize,
                    };
                    let b = Mat {
                        data: &*wt,
                        off: xi * block * cout,
                        rs: cout as isize,
                        cs: 1,
                    };
                    let c = &mut acc[xi * cin * cout..(xi + 1) * cin * cout];
                    if matmul(cin, cout, n, a, b, c, cout, true).is_err() {
                        failed.store(true, std::sync::atomic::Ordering::Relaxed);
                        return;
                    }
                }
            }
        })
    });
    if failed.into_inner() {
        return Err(mismatch());
    }
    let (first, rest) = scratch.split_at_mut(slot);
    let total = &mut first[..sums];
    for part in rest.chunks_exact(slot).take(parts - 1) {
        for (s, &p) in total.iter_mut().zip(&part[..sums]) {
            *s = *s + p;
        }
    }
    F::kernel_grad(total, cin * cout, out);
    Ok(())
}

/// `G g` of a kernel column: `G = [[1, 0, 0], [½, ½, ½], [½, −½, ½], [0, 0, 1]]`.
fn g4<T: Real>(a: T, b: T, c: T) -> [T; 4] {
    let half = T::one() / (T::one() + T::one());
    [a, (a + b + c) * half, (a - b + c) * half, c]
}

/// `Gᵀ v` of four values along one axis (the kernel gradient's transform).
fn gt4<T: Real>(v: [T; 4]) -> [T; 3] {
    let half = T::one() / (T::one() + T::one());
    let s = (v[1] + v[2]) * half;
    [v[0] + s, (v[1] - v[2]) * half, s + v[3]]
}

/// `U = G g Gᵀ` for every (in, out) pair: `w` is `[3, 3, pairs]`, `u` `[16, pairs]`.
/// With `flip`, of the kernel turned by 180° (`g[2 − kh, 2 − kw]`).
fn transform_kernel<T: Real>(w: &[T], pairs: usize, flip: bool, u: &mut [T]) {
    kernel_lanes(w, pairs, flip, u, g4)
}

/// `dg = Gᵀ M G` for every (in, out) pair: `m` is `[16, pairs]`, `out` `[3, 3, pairs]`.
fn transform_kernel_grad<T: Real>(m: &[T], pairs: usize, out: &mut [T]) {
    kernel_grad_lanes(m, pairs, out, gt4)
}

/// Feature pairs the kernel's transforms take at a time: their loops over them run on
/// contiguous lanes, which the compiler turns into vector instructions.
const LANES: usize = 16;

/// `U = G g Gᵀ` for every (in, out) pair, `g` being `G` applied to a kernel column: `w` is
/// `[3, 3, pairs]`, `u` `[N², pairs]`; with `flip`, of the kernel turned by 180° (`g[2 −
/// kh, 2 − kw]`). The same operations per pair as one pair at a time, so the same bits.
fn kernel_lanes<T: Real, const N: usize>(
    w: &[T],
    pairs: usize,
    flip: bool,
    u: &mut [T],
    g: impl Fn(T, T, T) -> [T; N],
) {
    for j0 in (0..pairs).step_by(LANES) {
        let n = LANES.min(pairs - j0);
        let mut taps = [[[T::zero(); LANES]; 3]; 3];
        for (kh, row) in taps.iter_mut().enumerate() {
            for (kw, lanes) in row.iter_mut().enumerate() {
                let t = match flip {
                    false => kh * 3 + kw,
                    true => (2 - kh) * 3 + 2 - kw,
                };
                lanes[..n].copy_from_slice(&w[t * pairs + j0..][..n]);
            }
        }
        // G applied down the kernel's columns, then along the rows.
        let mut cols = [[[T::zero(); LANES]; N]; 3];
        for (kw, col) in cols.iter_mut().enumerate() {
            for l in 0..LANES {
                let c = g(taps[0][kw][l], taps[1][kw][l], taps[2][kw][l]);
                for (a, &v) in c.iter().enumerate() {
                    col[a][l] = v;
                }
            }
        }
        for a in 0..N {
            let mut row = [[T::zero(); LANES]; N];
            for l in 0..LANES {
                let r = g(cols[0][a][l], cols[1][a][l], cols[2][a][l]);
                for (b, &v) in r.iter().enumerate() {
                    row[b][l] = v;
                }
            }
            for (b, lanes) in row.iter().enumerate() {
                u[(a * N + b) * pairs + j0..][..n].copy_from_slice(&lanes[..n]);
            }
        }
    }
}

/// `dg = Gᵀ M G` for every (in, out) pair, `gt` being `Gᵀ` applied along one axis: `m` is
/// `[N², pairs]`, `out` `[3, 3, pairs]`; [`LANES`] pairs at a time, as [`kernel_lanes`].
fn kernel_grad_lanes<T: Real, const N: usize>(
    m: &[T],
    pairs: usize,
    out: &mut [T],
    gt: impl Fn([T; N]) -> [T; 3],
) {
    for j0 in (0..pairs).step_by(LANES) {
        let n = LANES.min(pairs - j0);
        // Gᵀ along each row of the array, then down the columns.
        let mut rows = [[[T::zero(); LANES]; 3]; N];
        for (a, row) in rows.iter_mut().enumerate() {
            let mut lanes = [[T::zero(); LANES]; N];
            for (b, lane) in lanes.iter_mut().enumerate() {
                lane[..n].copy_from_slice(&m[(a * N + b) * pairs + j0..][..n]);
            }
            for l in 0..LANES {
                let r = gt(std::array::from_fn(|b| lanes[b][l]));
                for (kw, &v) in r.iter().enumerate() {
                    row[kw][l] = v;
                }
            }
        }
        for kw in 0..3 {
            let mut col = [[T::zero(); LANES]; 3];
            for l in 0..LANES {
                let c = gt(std::array::from_fn(|a| rows[a][kw][l]));
                for (kh, &v) in c.iter().enumerate() {
                    col[kh][l] = v;
                }
            }
            for (kh, lanes) in col.iter().enumerate() {
                out[(kh * 3 + kw) * pairs + j0..][..n].copy_from_slice(&lanes[..n]);
            }
        }
    }
}

/// `Bᵀ d` of four values along one axis of a window: `Bᵀ = [[1, 0, −1, 0], [0, 1, 1, 0],
/// [0, −1, 1, 0], [0, 1, 0, −1]]`. (Every transform here has vector twins, in `narrow`
/// and `wide`, that compute the same operations in the same order, so the same bits.)
#[inline(always)]
fn bt<T: Real>([d0, d1, d2, d3]: [T; 4]) -> [T; 4] {
    [d0 - d2, d1 + d2, d2 - d1, d1 - d3]
}

/// `A y` of two values along one axis of a cotangent's tile: `A = [[1, 0], [1, 1], [1,
/// −1], [0, −1]]`.
#[inline(always)]
fn a2<T: Real>(y0: T, y1: T) -> [T; 4] {
    [y0, y0 + y1, y0 - y1, T::zero() - y1]
}

/// `Aᵀ m` of four values along one axis of a product's tile: `Aᵀ = [[1, 1, 1, 0], [0,
/// 1, −1, −1]]`.
#[inline(always)]
fn at2<T: Real>([m0, m1, m2, m3]: [T; 4]) -> [T; 2] {
    [m0 + m1 + m2, m1 - m2 - m3]
}

/// `B z` of four values along one axis of a scattered window: `B = [[1, 0, 0, 0], [0,
/// 1, −1, 1], [−1, 1, 1, 0], [0, 0, 0, −1]]`.
#[inline(always)]
fn b4<T: Real>([z0, z1, z2, z3]: [T; 4]) -> [T; 4] {
    [z0, z1 - z2 + z3, z1 + z2 - z0, T::zero() - z3]
}

impl Tiles {
    /// The `P` input pixels (`in` features each) of tile `t`'s window (`P` its
    /// positions), row-major, `zeros` where it lies on padding.
    fn input_rows<'a, T, const P: usize>(
        &self,
        x: &'a [T],
        t: usize,
        zeros: &'a [T],
    ) -> [&'a [T]; P] {
        let (b, oy, ox) = self.origin(t);
        let ([h, w], cin, n) = (self.input, self.cin, self.edge + 2);
        // Each row's and column's input once, not once per position.
        let cols: [Option<usize>; 6] = std::array::from_fn(|k| self.at(1, ox, k));
        let mut rows = [zeros; P];
        for r in 0..n {
            let y = self.at(0, oy, r);
            for (c, &xx) in cols.iter().take(n).enumerate() {
                if let (Some(y), Some(xx), Some(row)) = (y, xx, rows.get_mut(r * n + c)) {
                    *row = &x[((b * h + y) * w + xx) * cin..][..cin];
                }
            }
        }
        rows
    }

    /// The cotangent's `P` pixels (`out` features each; `P` the edge squared) of tile
    /// `t`, `zeros` past the output's edge.
    fn cotangent_rows<'a, T, const P: usize>(
        &self,
        ct: &'a [T],
        t: usize,
        zeros: &'a [T],
    ) -> [&'a [T]; P] {
        let (b, oy, ox) = self.origin(t);
        let ([oh, ow], cout, e) = (self.output, self.cout, self.edge);
        std::array::from_fn(|p| {
            let (y, xx) = (oy + p / e, ox + p % e);
            if y < oh && xx < ow {
                &ct[((b * oh + y) * ow + xx) * cout..][..cout]
            } else {
                zeros
            }
        })
    }

    /// The input's `P` pixels (`in` features each; `P` the edge squared) of the scatter
    /// form's tile `t`, `zeros` past the input's edge.
    fn scatter_rows<'a, T, const P: usize>(
        &self,
        x: &'a [T],
        t: usize,
        zeros: &'a [T],
    ) -> [&'a [T]; P] {
        let (b, iy, ix) = self.scatter_origin(t);
        let ([h, w], cin, e) = (self.input, self.cin, self.edge);
        std::array::from_fn(|p| {
            let (y, xx) = (iy + p / e, ix + p % e);
            if y < h && xx < w {
                &x[((b * h + y) * w + xx) * cin..][..cin]
            } else {
                zeros
            }
        })
    }

    /// The image and the first input pixel of the scatter form's tile `t`.
    fn scatter_origin(&self, t: usize) -> (usize, usize, usize) {
        let ([ih, iw], e) = (self.input_grid(), self.edge);
        let (b, r) = (t / (ih * iw), t % (ih * iw));
        (b, e * (r / iw), e * (r % iw))
    }

    /// The `P` output pixels (`out` features each) of the scatter form's tile `t`'s
    /// window (`P` its positions) that lie inside the output.
    ///
    /// # Safety
    /// As for [`Tiles::output_pixels`], for the window's pixels.
    unsafe fn scatter_pixels<'a, T, const P: usize>(
        &self,
        t: usize,
        out_at: usize,
        out_len: usize,
    ) -> [Option<&'a mut [T]>; P] {
        let (b, iy, ix) = self.scatter_origin(t);
        let n = self.edge + 2;
        let ([oh, ow], cout) = (self.output, self.cout);
        std::array::from_fn(|p| {
            let y = (iy + p / n) as i64 + self.pad[0] - 2;
            let xx = (ix + p % n) as i64 + self.pad[1] - 2;
            if y < 0 || xx < 0 || y >= oh as i64 || xx >= ow as i64 {
                return None;
            }
            let at = ((b * oh + y as usize) * ow + xx as usize) * cout;
            // SAFETY: in bounds (checked here), and this tile's pixel alone (the caller).
            (at + cout <= out_len).then(|| unsafe {
                std::slice::from_raw_parts_mut((out_at as *mut T).add(at), cout)
            })
        })
    }

    /// Tile `t`'s `Q` output pixels (`Q` the edge squared) that lie inside the output, as
    /// rows of `tile` (row-major, `out` features each); `None` unless `tile` holds exactly
    /// `Q` of them.
    fn tile_pixels<'a, T, const Q: usize>(
        &self,
        t: usize,
        tile: &'a mut [T],
    ) -> Option<[Option<&'a mut [T]>; Q]> {
        let (_, oy, ox) = self.origin(t);
        let ([oh, ow], cout, e) = (self.output, self.cout, self.edge);
        if cout == 0 || e * e != Q || tile.len() != Q * cout {
            return None;
        }
        let mut rows = tile.chunks_exact_mut(cout);
        Some(std::array::from_fn(|p| {
            let row = rows.next();
            (oy + p / e < oh && ox + p % e < ow)
                .then_some(row)
                .flatten()
        }))
    }

    /// Tile `t`'s `Q` output pixels (`out` features each; `Q` the edge squared) that lie
    /// inside the output.
    ///
    /// # Safety
    /// `out_at` holds `out_len` elements, borrowed for as long as the pixels are used,
    /// and no one else reads or writes tile `t`'s pixels meanwhile.
    unsafe fn output_pixels<'a, T, const Q: usize>(
        &self,
        t: usize,
        out_at: usize,
        out_len: usize,
    ) -> [Option<&'a mut [T]>; Q] {
        let (b, oy, ox) = self.origin(t);
        let ([oh, ow], cout, e) = (self.output, self.cout, self.edge);
        std::array::from_fn(|p| {
            let (y, xx) = (oy + p / e, ox + p % e);
            let at = ((b * oh + y) * ow + xx) * cout;
            // SAFETY: in bounds (checked here), and this tile's pixel alone (the caller).
            (y < oh && xx < ow && at + cout <= out_len).then(|| unsafe {
                std::slice::from_raw_parts_mut((out_at as *mut T).add(at), cout)
            })
        })
    }
}

/// Whether `dst` holds the `positions` rows of a tile's transform: `features` elements
/// at `at` plus each multiple of `stride` below `positions`.
fn rows_fit<T>(dst: &[T], positions: usize, stride: usize, at: usize, features: usize) -> bool {
    at + (positions - 1) * stride + features <= dst.len()
}

/// The features `0..n` that the vector paths transform, by width: `(..n16, ..n8)`, 16 at a
/// time with AVX-512 up to `n16`, then 8 at a time with AVX2 up to `n8`, the rest one at a
/// time. None for a type other than f32. No wider than the CPU allows, whatever `simd`
/// says: the transforms are safe functions that take their level from their callers.
fn vector_features<T: 'static>(simd: Level, features: usize) -> (usize, usize) {
    if std::any::TypeId::of::<T>() != std::any::TypeId::of::<f32>() {
        return (0, 0);
    }
    let simd = crate::kernel::simd::at_most(simd);
    let n16 = if simd >= Level::Avx512 {
        features / 16 * 16
    } else {
        0
    };
    let n8 = if simd.avx2() {
        n16 + (features - n16) / 8 * 8
    } else {
        n16
    };
    (n16, n8)
}

/// A transform's vector paths from a tile's `P` pixel rows: AVX-512 (16 lanes), AVX2 (8).
type FromRows<const P: usize> =
    Option<[unsafe fn(&[*const f32; P], Range<usize>, *mut f32, usize); 2]>;
/// A transform's vector paths into a tile's `Q` pixels: AVX-512 (16 lanes), AVX2 (8).
type ToPixels<const Q: usize> =
    Option<[unsafe fn(*const f32, usize, Range<usize>, &[*mut f32; Q]); 2]>;

/// The vector paths of transform `$f` (the functions of that name in the `wide` and
/// `narrow` modules in scope), or none off x86-64.
#[cfg(target_arch = "x86_64")]
macro_rules! vector_paths {
    ($f:ident) => {
        Some([wide::$f, narrow::$f])
    };
}
#[cfg(not(target_arch = "x86_64"))]
macro_rules! vector_paths {
    ($f:ident) => {
        None
    };
}

/// One tile's separable transform from its `I×I` pixel rows (`rows`, `P = I²` of them)
/// into `dst[p · stride + at ..]` for each position `p` of its `O×O` array (`Q = O²`): the
/// 1-D map `t` down each column of the tile, then along each row; `vector` the same
/// operations in the same order on f32 lanes, where `simd` allows.
///
/// # Safety
/// `vector`'s paths are this transform's: they read the `P` rows and write `Q` rows of
/// `cs.end` elements, `stride` apart (the lengths checked here).
unsafe fn from_rows<T: Real, const P: usize, const Q: usize, const I: usize, const O: usize>(
    simd: Level,
    rows: &[&[T]; P],
    dst: &mut [T],
    (stride, at): (usize, usize),
    t: impl Fn([T; I]) -> [T; O],
    vector: FromRows<P>,
) -> bool {
    const { assert!(P == I * I && Q == O * O) };
    let features = rows[0].len();
    if !rows_fit(dst, Q, stride, at, features) || rows.iter().any(|r| r.len() != features) {
        return false;
    }
    let (n16, n8) = vector_features::<T>(simd, features);
    if let (true, Some([wide, narrow])) = (n8 > 0, vector) {
        let ptrs = rows.map(|r| r.as_ptr() as *const f32);
        let dst = dst[at..].as_mut_ptr() as *mut f32;
        // SAFETY: T is f32 and the CPU has the paths' instructions (`vector_features`);
        // each row holds `features` elements and `dst` the `Q` rows the paths write
        // (checked above; the caller's).
        unsafe {
            if n16 > 0 {
                wide(&ptrs, 0..n16, dst, stride);
            }
            narrow(&ptrs, n16..n8, dst, stride);
        }
    }
    for c in n8..features {
        let cols: [[T; O]; I] =
            std::array::from_fn(|j| t(std::array::from_fn(|r| rows[I * r + j][c])));
        for r in 0..O {
            let row = t(std::array::from_fn(|j| cols[j][r]));
            for (k, val) in row.into_iter().enumerate() {
                dst[(O * r + k) * stride + at + c] = val;
            }
        }
    }
    true
}

/// One tile's separable transform from its `I×I` products (`m[p · stride + at ..]` for
/// each position `p`, `P = I²`) into its `O×O` output pixels (`Q = O²`; `None` outside the
/// output), stored, or added where `add`: as [`from_rows`] the other way round.
///
/// # Safety
/// `vector`'s paths are this transform's: they read `P` rows of `cs.end` elements,
/// `stride` apart (the length checked here), and write the `Q` pixels.
#[allow(clippy::too_many_arguments)]
unsafe fn to_pixels<T: Real, const P: usize, const Q: usize, const I: usize, const O: usize>(
    simd: Level,
    m: &[T],
    (stride, at): (usize, usize),
    mut pixels: [Option<&mut [T]>; Q],
    add: bool,
    t: impl Fn([T; I]) -> [T; O],
    vector: ToPixels<Q>,
) -> bool {
    const { assert!(P == I * I && Q == O * O) };
    let Some(features) = window_features(m, P, stride, at, &pixels) else {
        return false;
    };
    let (n16, n8) = vector_features::<T>(simd, features);
    if let (true, Some([wide, narrow])) = (n8 > 0, vector) {
        let ptrs = pixels.each_mut().map(|p| {
            p.as_mut()
                .map_or(std::ptr::null_mut(), |p| p.as_mut_ptr() as *mut f32)
        });
        let m = m[at..].as_ptr() as *const f32;
        // SAFETY: T is f32 and the CPU has the paths' instructions (`vector_features`);
        // `m` holds the `P` rows the paths read (`window_features`; the caller's), each
        // pixel `features` elements or null.
        unsafe {
            if n16 > 0 {
                wide(m, stride, 0..n16, &ptrs);
            }
            narrow(m, stride, n16..n8, &ptrs);
        }
    }
    for c in n8..features {
        let cols: [[T; O]; I] =
            std::array::from_fn(|j| t(std::array::from_fn(|r| m[(I * r + j) * stride + at + c])));
        for r in 0..O {
            let row = t(std::array::from_fn(|j| cols[j][r]));
            for (k, val) in row.into_iter().enumerate() {
                if let Some(px) = &mut pixels[O * r + k] {
                    px[c] = if add { px[c] + val } else { val };
                }
            }
        }
    }
    true
}

/// The features of a tile's output pixels (0 when none lies inside the output), or
/// `None` when the pixels differ in length or the `positions` products of that many
/// features (`m[p · stride + at ..]`) do not fit `m`.
fn window_features<T, const N: usize>(
    m: &[T],
    positions: usize,
    stride: usize,
    at: usize,
    pixels: &[Option<&mut [T]>; N],
) -> Option<usize> {
    let features = pixels.iter().flatten().map(|p| p.len()).next().unwrap_or(0);
    let same = pixels.iter().flatten().all(|p| p.len() == features);
    let fits = features == 0 || rows_fit(m, positions, stride, at, features);
    (same && fits).then_some(features)
}

/// `V = Bᵀ d B` of one tile's 4×4 window (`rows`) into `dst[p · stride + at ..]` for each
/// position `p` of the 4×4 array, with the vectors `simd` allows.
fn transform_input<T: Real>(
    simd: Level,
    rows: &[&[T]; XI],
    dst: &mut [T],
    stride: usize,
    at: usize,
) -> bool {
    // SAFETY: the vector paths are this transform's.
    unsafe { from_rows::<T, XI, XI, 4, 4>(simd, rows, dst, (stride, at), bt, vector_paths!(input)) }
}

/// `W = A dy Aᵀ` of one 2×2 tile (`rows`: a cotangent's, or the scatter form's input's)
/// into `dst[p · stride + at ..]` for each position `p` of the 4×4 array.
fn transform_cotangent<T: Real>(
    simd: Level,
    rows: &[&[T]; 4],
    dst: &mut [T],
    stride: usize,
    at: usize,
) -> bool {
    let a = |[y0, y1]: [T; 2]| a2(y0, y1);
    // SAFETY: the vector paths are this transform's.
    unsafe {
        from_rows::<T, 4, XI, 2, 4>(simd, rows, dst, (stride, at), a, vector_paths!(cotangent))
    }
}

/// `y = Aᵀ M A` of one tile's 16 products (`m[p · stride + at ..]` for each position `p`)
/// into its output pixels (`None` past the output's edge).
fn transform_output<T: Real>(
    simd: Level,
    m: &[T],
    stride: usize,
    at: usize,
    pixels: [Option<&mut [T]>; 4],
) -> bool {
    let paths = vector_paths!(output);
    // SAFETY: the vector paths are this transform's.
    unsafe { to_pixels::<T, XI, 4, 4, 2>(simd, m, (stride, at), pixels, false, at2, paths) }
}

/// `z = B M Bᵀ` of one tile's 16 products (`m[p · stride + at ..]` for each position `p`)
/// added into its window's output pixels (`None` outside the output).
fn transform_scatter<T: Real>(
    simd: Level,
    m: &[T],
    stride: usize,
    at: usize,
    pixels: [Option<&mut [T]>; XI],
) -> bool {
    let paths = vector_paths!(scatter);
    // SAFETY: the vector paths are this transform's.
    unsafe { to_pixels::<T, XI, XI, 4, 4>(simd, m, (stride, at), pixels, true, b4, paths) }
}

/// The transforms on f32 features a vector at a time, for one instruction set: the
/// scalar transforms' operations in the same order, so the same bits.
#[cfg(target_arch = "x86_64")]
macro_rules! vector_transforms {
    ($name:ident, $feature:literal, $lanes:literal, $v:ty, $load:ident, $store:ident,
     $add:ident, $sub:ident, $zero:ident) => {
        mod $name {
            use std::arch::x86_64::*;
            use std::ops::Range;

            #[inline]
            #[target_feature(enable = $feature)]
            fn bt([d0, d1, d2, d3]: [$v; 4]) -> [$v; 4] {
                [$sub(d0, d2), $add(d1, d2), $sub(d2, d1), $sub(d1, d3)]
            }

            #[inline]
            #[target_feature(enable = $feature)]
            fn a2(y0: $v, y1: $v) -> [$v; 4] {
                [y0, $add(y0, y1), $sub(y0, y1), $sub($zero(), y1)]
            }

            #[inline]
            #[target_feature(enable = $feature)]
            fn at2([m0, m1, m2, m3]: [$v; 4]) -> [$v; 2] {
                [$add($add(m0, m1), m2), $sub($sub(m1, m2), m3)]
            }

            #[inline]
            #[target_feature(enable = $feature)]
            fn b4([z0, z1, z2, z3]: [$v; 4]) -> [$v; 4] {
                [
                    z0,
                    $add($sub(z1, z2), z3),
                    $sub($add(z1, z2), z0),
                    $sub($zero(), z3),
                ]
            }

            /// `super::transform_scatter` on features `cs`.
            ///
            /// # Safety
            /// As for [`output`], with 16 pixels.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn scatter(
                m: *const f32,
                stride: usize,
                cs: Range<usize>,
                pixels: &[*mut f32; 16],
            ) {
                for c in cs.step_by($lanes) {
                    let v = |p: usize| unsafe { $load(m.add(p * stride + c)) };
                    let c0 = b4([v(0), v(4), v(8), v(12)]);
                    let c1 = b4([v(1), v(5), v(9), v(13)]);
                    let c2 = b4([v(2), v(6), v(10), v(14)]);
                    let c3 = b4([v(3), v(7), v(11), v(15)]);
                    for r in 0..4 {
                        let row = b4([c0[r], c1[r], c2[r], c3[r]]);
                        for (k, val) in row.into_iter().enumerate() {
                            let px = pixels[4 * r + k];
                            if !px.is_null() {
                                unsafe { $store(px.add(c), $add($load(px.add(c)), val)) };
                            }
                        }
                    }
                }
            }

            /// `super::transform_input` on features `cs` (a multiple of the lanes long).
            ///
            /// # Safety
            /// The CPU has the instructions; each row holds `cs.end` elements, and `dst`
            /// the 16 rows of as many, `stride` apart.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn input(
                rows: &[*const f32; 16],
                cs: Range<usize>,
                dst: *mut f32,
                stride: usize,
            ) {
                for c in cs.step_by($lanes) {
                    let d = |p: usize| unsafe { $load(rows[p].add(c)) };
                    let c0 = bt([d(0), d(4), d(8), d(12)]);
                    let c1 = bt([d(1), d(5), d(9), d(13)]);
                    let c2 = bt([d(2), d(6), d(10), d(14)]);
                    let c3 = bt([d(3), d(7), d(11), d(15)]);
                    for r in 0..4 {
                        let row = bt([c0[r], c1[r], c2[r], c3[r]]);
                        for (k, val) in row.into_iter().enumerate() {
                            unsafe { $store(dst.add((4 * r + k) * stride + c), val) };
                        }
                    }
                }
            }

            /// `super::transform_cotangent` on features `cs`.
            ///
            /// # Safety
            /// As for [`input`], with 4 rows.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn cotangent(
                rows: &[*const f32; 4],
                cs: Range<usize>,
                dst: *mut f32,
                stride: usize,
            ) {
                for c in cs.step_by($lanes) {
                    let d = |p: usize| unsafe { $load(rows[p].add(c)) };
                    let c0 = a2(d(0), d(2));
                    let c1 = a2(d(1), d(3));
                    for r in 0..4 {
                        for (k, val) in a2(c0[r], c1[r]).into_iter().enumerate() {
                            unsafe { $store(dst.add((4 * r + k) * stride + c), val) };
                        }
                    }
                }
            }

            /// `super::transform_output` on features `cs`.
            ///
            /// # Safety
            /// The CPU has the instructions; `m` holds the 16 rows of `cs.end` elements,
            /// `stride` apart; each pixel is null or holds `cs.end` elements.
            #[target_feature(enable = $feature)]
            pub(super) unsafe fn output(
                m: *const f32,
                stride: usize,
                cs: Range<usize>,
                pixels: &[*mut f32; 4],
            ) {
                for c in cs.step_by($lanes) {
                    let v = |p: usize| unsafe { $load(m.add(p * stride + c)) };
                    let c0 = at2([v(0), v(4), v(8), v(12)]);
                    let c1 = at2([v(1), v(5), v(9), v(13)]);
                    let c2 = at2([v(2), v(6), v(10), v(14)]);
                    let c3 = at2([v(3), v(7), v(11), v(15)]);
                    for r in 0..2 {
                        let row = at2([c0[r], c1[r], c2[r], c3[r]]);
                        for (k, val) in row.into_iter().enumerate() {
                            let px = pixels[2 * r + k];
                            if !px.is_null() {
                                unsafe { $store(px.add(c), val) };
                            }
                        }
                    }
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
vector_transforms!(
    narrow,
    "avx2",
    8,
    __m256,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_add_ps,
    _mm256_sub_ps,
    _mm256_setzero_ps
);

#[cfg(target_arch = "x86_64")]
vector_transforms!(
    wide,
    "avx512f",
    16,
    __m512,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_add_ps,
    _mm512_sub_ps,
    _mm512_setzero_ps
);

#[path = "conv_winograd_f4.rs"]
mod f4;

#[cfg(test)]
#[path = "conv_winograd_tests.rs"]
mod tests;
