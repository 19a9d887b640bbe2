//! The native kernels of `convolution` (NHWC input, HWIO kernel), three ways onto the
//! matrix product:
//!
//! - **pointwise**: a 1×1, stride-1, unpadded, ungrouped convolution is the product of the
//!   input (as `[pixels, features]`) with the kernel;
//! - **im2col**: each output pixel's receptive field is copied into a row of patches and the
//!   patches are multiplied by the kernel (`[kernel positions · in, out]`). The rows are
//!   made and multiplied a cache-sized block at a time on each core, so the patches never
//!   leave the core's cache; only a deep product (a kernel gradient, whose depth is the
//!   batch times the output pixels) builds all patches first, for the product to split;
//! - **gather**: a convolution with more output pixels than input pixels (the input
//!   gradient of a `valid` or strided convolution: a padded and/or input-dilated form)
//!   multiplies each real input pixel by every kernel position once (`[pixels, in] ·
//!   [in, kernel positions · out]`) and sums those products into the outputs they reach.
//!   im2col would multiply the padding and the inserted zeros too;
//! - **direct** (f32 with AVX2): a two-dimensional convolution on one to four input
//!   features adds each kernel tap into the output's registers straight from the input
//!   (`kernel::conv_direct`): its product would be only kernel positions × features deep;
//! - **Winograd**: a 3×3, stride-1, undilated, ungrouped two-dimensional convolution on
//!   32 to 128 features each way computes 2×2 output tiles with 16 products per tile and
//!   feature pair instead of 36, or up to 4,096 feature pairs 4×4 tiles with 36 instead
//!   of 144 (`ops::conv_winograd`), and so does its kernel gradient.
//!
//! A forward layer's method (pointwise, blocks or gather) depends only on the shapes of one
//! image, and each of these computes a sample's outputs in the same order whatever the
//! batch, so a prediction does not depend on the batch it came in. Only a product too deep
//! for blocks (a kernel gradient, or a kernel of thousands of positions × features) picks
//! the depth-split or whole form by the batch's size, as the matrix product itself splits
//! along the depth by size.

use super::conv_winograd::{self, Tiles};
use crate::ir::{ConvParams, MAX_RANK};
use crate::kernel::conv_direct::{self, Direct2d};
use crate::kernel::crew;
use crate::kernel::gemm::{matmul, Mat};
use crate::kernel::real::Real;
use crate::Result;

/// Patches per im2col block (elements): the block and its slice of the output stay in a
/// core's L2 cache between being written and being multiplied.
const BLOCK_ELEMS: usize = 1 << 16;
/// Rows of patches a block needs at least for the product to run at speed; a deeper
/// product builds all its patches first (see the module comment).
const MIN_BLOCK_ROWS: usize = 32;
/// Largest per-image product of the gather form (elements) a core keeps as scratch.
const MAX_GATHER_ELEMS: usize = 1 << 20;
/// Rows (the product's depth) per block of a kernel gradient at least.
const GRAD_BLOCK_ROWS: usize = 256;
/// Tasks per core, so a core that finishes early takes work from one that started late.
const TASKS_PER_CORE: usize = 4;

/// Geometry of one convolution, from its types.
#[derive(Clone, Copy, Debug)]
pub(super) struct Geometry {
    pub n: usize,
    pub batch: usize,
    pub in_sp: [usize; MAX_RANK],
    pub k_sp: [usize; MAX_RANK],
    pub out_sp: [usize; MAX_RANK],
    pub cin: usize,
    pub cig: usize,
    pub cout: usize,
    pub groups: usize,
}

impl Geometry {
    /// From the batch, the spatial dims of input, kernel and output, the features
    /// `(input, input per group, output)` and the groups.
    pub fn new(
        batch: usize,
        in_sp: &[usize],
        k_sp: &[usize],
        out_sp: &[usize],
        (cin, cig, cout): (usize, usize, usize),
        groups: usize,
    ) -> Geometry {
        let n = in_sp.len();
        let mut geo = Geometry {
            n,
            batch,
            in_sp: [0; MAX_RANK],
            k_sp: [0; MAX_RANK],
            out_sp: [0; MAX_RANK],
            cin,
            cig,
            cout,
            groups,
        };
        geo.in_sp[..n].copy_from_slice(in_sp);
        geo.k_sp[..n].copy_from_slice(k_sp);
        geo.out_sp[..n].copy_from_slice(out_sp);
        geo
    }

    fn nin(&self) -> usize {
        self.in_sp[..self.n].iter().product()
    }
    fn nout(&self) -> usize {
        self.out_sp[..self.n].iter().product()
    }
    fn kprod(&self) -> usize {
        self.k_sp[..self.n].iter().product()
    }
    fn cog(&self) -> usize {
        self.cout / self.groups
    }
}

/// How a convolution is computed (see the module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Method {
    Pointwise,
    Im2colBlocks,
    Im2colSplit,
    Im2colWhole,
    Gather,
    /// Falls back to `Im2colBlocks` for a type or CPU the direct kernel is not for.
    Direct,
    /// Falls back to `Im2colBlocks` for a convolution that is not two-dimensional, 3×3,
    /// stride 1, undilated and ungrouped.
    Winograd,
}

/// The fastest method for this geometry.
pub(super) fn choose(geo: &Geometry, p: &ConvParams) -> Method {
    if pointwise(geo, p) {
        return Method::Pointwise;
    }
    if direct(geo, p).is_some() {
        return Method::Direct;
    }
    if winograd(geo, p).is_some_and(|t| t.pays()) {
        return Method::Winograd;
    }
    if geo.nin() < geo.nout() && geo.nin() * geo.kprod() * geo.cog() <= MAX_GATHER_ELEMS {
        return Method::Gather;
    }
    let rows = geo.batch * geo.nout();
    if geo.kprod() * geo.cig * MIN_BLOCK_ROWS <= BLOCK_ELEMS {
        Method::Im2colBlocks
    } else if rows * geo.cig <= BLOCK_ELEMS && geo.kprod() >= 2 {
        Method::Im2colSplit
    } else {
        Method::Im2colWhole
    }
}

/// Whether the convolution is a product of the input's pixels with the kernel.
fn pointwise(geo: &Geometry, p: &ConvParams) -> bool {
    geo.kprod() == 1
        && geo.groups == 1
        && p.strides.iter().all(|&s| s == 1)
        && p.lhs_dilation.iter().all(|&s| s == 1)
        && p.padding.iter().all(|&q| q == (0, 0))
}

/// Whether the direct kernel computes the kernel gradient of a convolution with these
/// parameters on `cin` input features and `taps` kernel positions (`kernel_grad` takes it
/// then, whatever the batch and sizes).
pub(crate) fn direct_kernel_grad(p: &ConvParams, cin: usize, taps: usize) -> bool {
    p.strides.len() == 2
        && p.feature_groups == 1
        && p.lhs_dilation.iter().all(|&d| d == 1)
        && conv_direct::thin(cin, taps)
}

/// The direct kernel's geometry, when it computes this convolution (two spatial dims,
/// one group, no input dilation, few input features) on this CPU.
pub(super) fn direct(geo: &Geometry, p: &ConvParams) -> Option<Direct2d> {
    if geo.n != 2 || geo.groups != 1 || p.lhs_dilation.iter().any(|&d| d != 1) {
        return None;
    }
    let d = Direct2d {
        batch: geo.batch,
        input: [geo.in_sp[0], geo.in_sp[1]],
        cin: geo.cin,
        kernel: [geo.k_sp[0], geo.k_sp[1]],
        cout: geo.cout,
        output: [geo.out_sp[0], geo.out_sp[1]],
        strides: [p.strides[0], p.strides[1]],
        dilation: [p.rhs_dilation[0], p.rhs_dilation[1]],
        pad: [p.padding[0].0, p.padding[1].0],
    };
    d.supported().then_some(d)
}

/// The Winograd tiles' shapes, when this convolution is 3×3, stride 1, undilated and
/// ungrouped in two dimensions (whether the method pays is `Tiles::pays`).
pub(super) fn winograd(geo: &Geometry, p: &ConvParams) -> Option<Tiles> {
    let plain = |v: &[usize]| v.iter().all(|&s| s == 1);
    (geo.n == 2
        && geo.groups == 1
        && geo.k_sp[..2] == [3, 3]
        && plain(&p.strides)
        && plain(&p.lhs_dilation)
        && plain(&p.rhs_dilation))
    .then(|| Tiles {
        batch: geo.batch,
        input: [geo.in_sp[0], geo.in_sp[1]],
        cin: geo.cin,
        cout: geo.cout,
        output: [geo.out_sp[0], geo.out_sp[1]],
        pad: [p.padding[0].0, p.padding[1].0],
        edge: 2,
    })
}

/// The Winograd tiles of the kernel gradient of a convolution of this geometry, where
/// [`kernel_grad`] takes them (the direct kernel, where it applies, first).
pub(super) fn winograd_gradient(geo: &Geometry, p: &ConvParams) -> Option<Tiles> {
    winograd(geo, p).filter(|t| t.gradient_pays())
}

/// The forward's geometry of the one-group convolution whose kernel gradient `od` comes
/// from its input `xd` and its output's cotangent `cd` (the gradient's spatial dims are
/// the kernel's); none where they do not match.
pub(super) fn kernel_grad_geometry(xd: &[usize], cd: &[usize], od: &[usize]) -> Option<Geometry> {
    let n = xd.len().checked_sub(2)?;
    let fits = cd.len() == n + 2
        && od.len() == n + 2
        && cd[0] == xd[0]
        && od[n] == xd[n + 1]
        && od[n + 1] == cd[n + 1];
    fits.then(|| {
        Geometry::new(
            xd[0],
            &xd[1..=n],
            &od[..n],
            &cd[1..=n],
            (xd[n + 1], xd[n + 1], cd[n + 1]),
            1,
        )
    })
}

/// `out = conv(x, w)` by `method` (any method computes any convolution; `choose` picks).
pub(super) fn run<T: Real>(
    method: Method,
    x: &[T],
    w: &[T],
    geo: &Geometry,
    p: &ConvParams,
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    match method {
        Method::Pointwise if pointwise(geo, p) => {
            let rows = geo.batch * geo.nout();
            let a = Mat {
                data: x,
                off: 0,
                rs: geo.cin as isize,
                cs: 1,
            };
            let b = Mat {
                data: w,
                off: 0,
                rs: geo.cout as isize,
                cs: 1,
            };
            matmul(rows, geo.cout, geo.cin, a, b, out, geo.cout, false)
        }
        Method::Pointwise | Method::Im2colWhole => im2col_whole(x, w, geo, p, out, scratch),
        Method::Im2colBlocks => im2col_blocks(x, w, geo, p, out, scratch),
        Method::Im2colSplit => im2col_split(x, w, geo, p, out, scratch),
        Method::Gather => gather(x, w, geo, p, out, scratch),
        Method::Direct => match direct(geo, p) {
            Some(d) if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() => {
                // SAFETY: T is f32 (checked just above): the same memory, the same type.
                let (x, w, out) = unsafe {
                    (
                        std::slice::from_raw_parts(x.as_ptr() as *const f32, x.len()),
                        std::slice::from_raw_parts(w.as_ptr() as *const f32, w.len()),
                        std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut f32, out.len()),
                    )
                };
                conv_direct::conv2d(&d, x, w, out)
            }
            _ => im2col_blocks(x, w, geo, p, out, scratch),
        },
        Method::Winograd => match winograd(geo, p) {
            Some(t) => conv_winograd::conv2d(&t, x, w, out, scratch),
            None => im2col_blocks(x, w, geo, p, out, scratch),
        },
    }
}

/// The error for a kernel's own inconsistency (a view out of bounds): unreachable for
/// verified graphs, reported rather than panicking.
fn internal(what: &str) -> crate::Error {
    crate::Error::Backend {
        backend: "native",
        message: format!("internal: {what}"),
    }
}

/// Whether any task of a kernel split over the cores met an internal error; checked
/// once every task is done.
#[derive(Default)]
struct Failure(std::sync::atomic::AtomicBool);

impl Failure {
    fn set(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn check(self, what: &str) -> Result<()> {
        if self.0.into_inner() {
            Err(internal(what))
        } else {
            Ok(())
        }
    }
}

thread_local! {
    /// The gather form's table of which input pixel each (output pixel, kernel position)
    /// reads, grown once per thread like the scratch (a step allocates nothing).
    static REACH: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Marks a kernel position that lies on padding or an inserted zero in [`REACH`].
const NO_PIXEL: usize = usize::MAX;

/// Grows `scratch` to at least `len` elements (once; later calls of the same shapes find
/// it large enough).
fn grow<T: Real>(scratch: &mut Vec<T>, len: usize) {
    if scratch.len() < len {
        scratch.resize(len, T::zero());
    }
}

/// The kernel of group `grp` as a `[kernel positions · cig, cog]` matrix.
fn kernel_mat<'a, T>(w: &'a [T], geo: &Geometry, grp: usize) -> Mat<'a, T> {
    Mat {
        data: w,
        off: grp * geo.cog(),
        rs: geo.cout as isize,
        cs: 1,
    }
}

/// All patches of group `grp` built at once (rows split over the cores), then one product.
fn im2col_whole<T: Real>(
    x: &[T],
    w: &[T],
    geo: &Geometry,
    p: &ConvParams,
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    let rows = geo.batch * geo.nout();
    let depth = geo.kprod() * geo.cig;
    grow(scratch, rows * depth);
    let patches = &mut scratch[..rows * depth];
    for grp in 0..geo.groups {
        let tasks = (crew::width() * TASKS_PER_CORE).min(rows).max(1);
        crew::run_chunks(patches, tasks, depth, &|start, chunk| {
            let r0 = start / depth;
            im2col_rows(x, geo, p, grp, r0..r0 + chunk.len() / depth, chunk);
        });
        let a = Mat {
            data: &*patches,
            off: 0,
            rs: depth as isize,
            cs: 1,
        };
        matmul(
            rows,
            geo.cog(),
            depth,
            a,
            kernel_mat(w, geo, grp),
            &mut out[grp * geo.cog()..],
            geo.cout,
            false,
        )?;
    }
    Ok(())
}

/// Blocks of patch rows, each built and multiplied on one core while it is in cache.
fn im2col_blocks<T: Real>(
    x: &[T],
    w: &[T],
    geo: &Geometry,
    p: &ConvParams,
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    let rows = geo.batch * geo.nout();
    let depth = geo.kprod() * geo.cig;
    let block = (BLOCK_ELEMS / depth).max(MIN_BLOCK_ROWS).min(rows.max(1));
    let blocks = rows.div_ceil(block);
    let tasks = (crew::width() * TASKS_PER_CORE).min(blocks).max(1);
    grow(scratch, tasks * block * depth);
    let (cout, cog) = (geo.cout, geo.cog());
    // Addresses, so the task closure may be shared between threads.
    let (patches_at, out_at, out_len) = (
        scratch.as_mut_ptr() as usize,
        out.as_mut_ptr() as usize,
        out.len(),
    );
    let failed = Failure::default();
    crew::run(tasks, &|t| {
        // SAFETY: task `t` alone uses patch slot `t` (the scratch holds `tasks` slots).
        let slot = unsafe {
            std::slice::from_raw_parts_mut(
                (patches_at as *mut T).add(t * block * depth),
                block * depth,
            )
        };
        for b in crew::part(blocks, tasks, t) {
            let r = b * block..((b + 1) * block).min(rows);
            let m = r.len();
            for grp in 0..geo.groups {
                im2col_rows(x, geo, p, grp, r.clone(), &mut slot[..m * depth]);
                let at = r.start * cout + grp * cog;
                let len = (m - 1) * cout + cog;
                if at + len > out_len {
                    failed.set();
                    return;
                }
                // SAFETY: rows `r` of the output (in bounds, checked just above) belong to
                // this block alone; `out` stays borrowed until `run` returns.
                let c = unsafe { std::slice::from_raw_parts_mut((out_at as *mut T).add(at), len) };
                let a = Mat {
                    data: &slot[..m * depth],
                    off: 0,
                    rs: depth as isize,
                    cs: 1,
                };
                if matmul(m, cog, depth, a, kernel_mat(w, geo, grp), c, cout, false).is_err() {
                    failed.set();
                }
            }
        }
    });
    failed.check("convolution block out of bounds")?;
    Ok(())
}

/// A deep product with few rows (a kernel gradient: the rows are the kernel's positions
/// and input features, the depth the cotangent's pixels times the batch) split along the
/// depth: each core takes a share of the kernel positions, builds their patches a
/// cache-sized chunk at a time and adds their product into a partial result of its own;
/// the partials are added in task order, so the result does not depend on which thread
/// ran which share.
fn im2col_split<T: Real>(
    x: &[T],
    w: &[T],
    geo: &Geometry,
    p: &ConvParams,
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    let rows = geo.batch * geo.nout();
    let (kprod, cig, cog, cout) = (geo.kprod(), geo.cig, geo.cog(), geo.cout);
    // Kernel positions per chunk.
    let per = (BLOCK_ELEMS / (rows * cig).max(1)).clamp(1, kprod);
    let chunks = kprod.div_ceil(per);
    let tasks = crew::width().min(chunks).max(1);
    let (slot, partial) = (rows * per * cig, rows * cout);
    grow(scratch, tasks * slot + (tasks - 1) * partial);
    let (slots, partials) = scratch.split_at_mut(tasks * slot);
    let partials = &mut partials[..(tasks - 1) * partial];
    if out.len() < partial {
        return Err(internal("convolution output smaller than its type"));
    }
    let (slots_at, partials_at, out_at) = (
        slots.as_mut_ptr() as usize,
        partials.as_mut_ptr() as usize,
        out.as_mut_ptr() as usize,
    );
    let failed = Failure::default();
    crew::run(tasks, &|t| {
        // SAFETY: task `t` alone uses patch slot `t` and partial `t - 1` (task 0 writes
        // the output, which stays borrowed until `run` returns).
        let (patches, dst) = unsafe {
            let dst = if t == 0 {
                out_at as *mut T
            } else {
                (partials_at as *mut T).add((t - 1) * partial)
            };
            (
                std::slice::from_raw_parts_mut((slots_at as *mut T).add(t * slot), slot),
                std::slice::from_raw_parts_mut(dst, partial),
            )
        };
        for (i, c) in crew::part(chunks, tasks, t).enumerate() {
            let kps = c * per..((c + 1) * per).min(kprod);
            let depth = kps.len() * cig;
            for grp in 0..geo.groups {
                im2col_taps(x, geo, p, grp, kps.clone(), &mut patches[..rows * depth]);
                let a = Mat {
                    data: &patches[..rows * depth],
                    off: 0,
                    rs: depth as isize,
                    cs: 1,
                };
                let b = Mat {
                    data: w,
                    off: kps.start * cig * cout + grp * cog,
                    rs: cout as isize,
                    cs: 1,
                };
                if matmul(rows, cog, depth, a, b, &mut dst[grp * cog..], cout, i > 0).is_err() {
                    failed.set();
                    return;
                }
            }
        }
    });
    failed.check("convolution product out of bounds")?;
    for part in partials.chunks_exact(partial) {
        for (o, &v) in out[..partial].iter_mut().zip(part) {
            *o = *o + v;
        }
    }
    Ok(())
}

/// The kernel gradient of a convolution with the forward geometry `geo` and parameters
/// `p` (one group): `dw[k…, ci, co] = Σ_{b, o} x_padded[b, o·s + k·d, ci] · ct[b, o, co]`,
/// the forward's patches transposed times the cotangent. Each core takes a share of the
/// patch rows (the cotangent's pixels), builds them a block at a time and adds their
/// product into a partial result of its own; the partials are added in task order.
pub(super) fn kernel_grad<T: Real>(
    x: &[T],
    ct: &[T],
    geo: &Geometry,
    p: &ConvParams,
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    let rows = geo.batch * geo.nout();
    let depth = geo.kprod() * geo.cin;
    let cout = geo.cout;
    let partial = depth * cout;
    if geo.groups != 1 || out.len() < partial || ct.len() < rows * cout {
        return Err(internal(
            "kernel gradient operands do not match their geometry",
        ));
    }
    if rows == 0 {
        out[..partial].fill(T::zero());
        return Ok(());
    }
    if let Some(d) = direct(geo, p) {
        if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() {
            // SAFETY: T is f32 (checked just above): the same memory, the same type; the
            // scratch is only resized, never read before it is written.
            let (x, ct, out, scratch) = unsafe {
                (
                    std::slice::from_raw_parts(x.as_ptr() as *const f32, x.len()),
                    std::slice::from_raw_parts(ct.as_ptr() as *const f32, ct.len()),
                    std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut f32, out.len()),
                    &mut *(scratch as *mut Vec<T> as *mut Vec<f32>),
                )
            };
            return conv_direct::kernel_grad2d(&d, x, ct, out, scratch);
        }
    }
    if let Some(t) = winograd_gradient(geo, p) {
        return conv_winograd::kernel_grad(&t, x, ct, out, scratch);
    }
    kernel_grad_blocks(x, ct, geo, p, out, scratch)
}

/// The kernel gradient from blocks of patch rows (see [`kernel_grad`]), for operands that
/// match the geometry and at least one row.
pub(super) fn kernel_grad_blocks<T: Real>(
    x: &[T],
    ct: &[T],
    geo: &Geometry,
    p: &ConvParams,
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    let rows = geo.batch * geo.nout();
    let depth = geo.kprod() * geo.cin;
    let cout = geo.cout;
    let partial = depth * cout;
    if geo.groups != 1 || out.len() < partial || ct.len() < rows * cout || rows == 0 {
        return Err(internal(
            "kernel gradient operands do not match their geometry",
        ));
    }
    // Deep enough blocks for the product to run at speed, cache-sized when the patch rows
    // are short.
    let block = (BLOCK_ELEMS / depth).max(GRAD_BLOCK_ROWS).min(rows);
    let blocks = rows.div_ceil(block);
    let tasks = crew::width().min(blocks).max(1);
    let slot = block * depth;
    grow(scratch, tasks * (slot + partial));
    let (slots, partials) = scratch.split_at_mut(tasks * slot);
    let partials = &mut partials[..tasks * partial];
    let (slots_at, partials_at) = (slots.as_mut_ptr() as usize, partials.as_mut_ptr() as usize);
    let failed = Failure::default();
    crew::run(tasks, &|t| {
        // SAFETY: task `t` alone uses patch slot `t` and partial `t`.
        let (patches, dst) = unsafe {
            (
                std::slice::from_raw_parts_mut((slots_at as *mut T).add(t * slot), slot),
                std::slice::from_raw_parts_mut((partials_at as *mut T).add(t * partial), partial),
            )
        };
        for (i, b) in crew::part(blocks, tasks, t).enumerate() {
            let r = b * block..((b + 1) * block).min(rows);
            let m = r.len();
            im2col_rows(x, geo, p, 0, r.clone(), &mut patches[..m * depth]);
            // `dwᵀ += ctᵀ · patches`: the patches are read in place (row-major), only the
            // block of the cotangent is transposed while it is packed.
            let a = Mat {
                data: ct,
                off: r.start * cout,
                rs: 1,
                cs: cout as isize,
            };
            let b = Mat {
                data: &patches[..m * depth],
                off: 0,
                rs: depth as isize,
                cs: 1,
            };
            if matmul(cout, depth, m, a, b, dst, depth, i > 0).is_err() {
                failed.set();
                return;
            }
        }
    });
    failed.check("kernel gradient product out of bounds")?;
    // The partials (each `[cout, depth]`) added in task order, transposed into `out`.
    for (j, row) in out[..partial].chunks_exact_mut(cout).enumerate() {
        for (co, o) in row.iter_mut().enumerate() {
            let mut acc = partials[co * depth + j];
            for part in partials.chunks_exact(partial).skip(1) {
                acc = acc + part[co * depth + j];
            }
            *o = acc;
        }
    }
    Ok(())
}

/// Fills `dst` with the patches of rows `rows` for kernel positions `kps` only (one run of
/// `cig` features per position), for group `grp`.
fn im2col_taps<T: Real>(
    x: &[T],
    geo: &Geometry,
    p: &ConvParams,
    grp: usize,
    kps: std::ops::Range<usize>,
    dst: &mut [T],
) {
    let n = geo.n;
    let (cin, cig) = (geo.cin, geo.cig);
    let depth = kps.len() * cig;
    let nout = geo.nout();
    let image = geo.nin() * cin;
    let k0 = unflatten(kps.start, &geo.k_sp[..n]);
    let mut o = [0usize; MAX_RANK];
    for row in 0..geo.batch * nout {
        let b = row / nout;
        let dst_row = &mut dst[row * depth..(row + 1) * depth];
        let mut k = k0;
        for j in 0..kps.len() {
            let cell = &mut dst_row[j * cig..(j + 1) * cig];
            match input_at(geo, p, &o, &k) {
                Some(at) => {
                    let off = b * image + at * cin + grp * cig;
                    cell.copy_from_slice(&x[off..off + cig]);
                }
                None => cell.fill(T::zero()),
            }
            step(&mut k, &geo.k_sp[..n]);
        }
        step(&mut o, &geo.out_sp[..n]);
    }
}

/// Fills `dst` with the patch rows `rows` of group `grp`: row `b · out pixels + o` holds
/// the input under the kernel at output pixel `o` of image `b`, kernel position major,
/// features minor (zeros where the kernel lies on padding or an inserted zero).
fn im2col_rows<T: Real>(
    x: &[T],
    geo: &Geometry,
    p: &ConvParams,
    grp: usize,
    rows: std::ops::Range<usize>,
    dst: &mut [T],
) {
    let n = geo.n;
    let last = n - 1;
    let (cin, cig) = (geo.cin, geo.cig);
    let depth = geo.kprod() * cig;
    let mut in_strides = [0usize; MAX_RANK];
    let mut acc = cin;
    for d in (0..n).rev() {
        in_strides[d] = acc;
        acc *= geo.in_sp[d];
    }
    let image = acc;
    let nout = geo.nout();
    let kl = geo.k_sp[last];
    let outer = geo.kprod() / kl;
    let (sl, rdl, ldl, lol) = (
        p.strides[last] as i64,
        p.rhs_dilation[last] as i64,
        p.lhs_dilation[last] as i64,
        p.padding[last].0,
    );
    let in_l = geo.in_sp[last] as i64;
    // With no dilation on the last axis and one group, the kernel's taps along it read one
    // contiguous run of the input row.
    let contiguous = rdl == 1 && ldl == 1 && geo.groups == 1;
    let mut o = unflatten(rows.start % nout.max(1), &geo.out_sp[..n]);
    for (i, row) in rows.enumerate() {
        let b = row / nout;
        let dst_row = &mut dst[i * depth..(i + 1) * depth];
        let mut k = [0usize; MAX_RANK];
        for ko in 0..outer {
            let seg = &mut dst_row[ko * kl * cig..(ko + 1) * kl * cig];
            let mut off = b * image + grp * cig;
            let mut inside = true;
            for d in 0..last {
                let pos = (o[d] * p.strides[d] + k[d] * p.rhs_dilation[d]) as i64 - p.padding[d].0;
                let Some(q) = undilate(pos, p.lhs_dilation[d], geo.in_sp[d]) else {
                    inside = false;
                    break;
                };
                off += q * in_strides[d];
            }
            if !inside {
                seg.fill(T::zero());
            } else if contiguous {
                let base = o[last] as i64 * sl - lol;
                let t0 = (-base).clamp(0, kl as i64) as usize;
                let t1 = (in_l - base).clamp(t0 as i64, kl as i64) as usize;
                seg[..t0 * cig].fill(T::zero());
                if t1 > t0 {
                    let from = off + (base + t0 as i64) as usize * cin;
                    seg[t0 * cig..t1 * cig].copy_from_slice(&x[from..from + (t1 - t0) * cin]);
                }
                seg[t1 * cig..].fill(T::zero());
            } else {
                for t in 0..kl {
                    let cell = &mut seg[t * cig..(t + 1) * cig];
                    let pos = o[last] as i64 * sl + t as i64 * rdl - lol;
                    match undilate(pos, p.lhs_dilation[last], geo.in_sp[last]) {
                        Some(q) => {
                            let from = off + q * cin;
                            cell.copy_from_slice(&x[from..from + cig]);
                        }
                        None => cell.fill(T::zero()),
                    }
                }
            }
            step(&mut k, &geo.k_sp[..last]);
        }
        step(&mut o, &geo.out_sp[..n]);
    }
}

/// The gather form: per image and group, `G = x_image · W` (`[input pixels, kernel
/// positions · cog]`), then each output pixel sums the rows of `G` its kernel positions
/// reach. Images are split over the cores; each core keeps its `G` in cache.
fn gather<T: Real>(
    x: &[T],
    w: &[T],
    geo: &Geometry,
    p: &ConvParams,
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> Result<()> {
    let (nin, nout, kprod, cog, cig) = (geo.nin(), geo.nout(), geo.kprod(), geo.cog(), geo.cig);
    let kc = kprod * cog;
    let tasks = (crew::width() * TASKS_PER_CORE).min(geo.batch).max(1);
    // The kernel rearranged per group to `[cig, kernel positions, cog]`, then one product
    // slot per task.
    let wlen = geo.groups * cig * kc;
    grow(scratch, wlen + tasks * nin * kc);
    let (wr, slots) = scratch.split_at_mut(wlen);
    for grp in 0..geo.groups {
        for ci in 0..cig {
            for kp in 0..kprod {
                let src = &w[(kp * cig + ci) * geo.cout + grp * cog..][..cog];
                wr[(grp * cig + ci) * kc + kp * cog..][..cog].copy_from_slice(src);
            }
        }
    }
    let wr = &*wr;
    let (slots_at, out_at) = (slots.as_mut_ptr() as usize, out.as_mut_ptr() as usize);
    if out.len() < geo.batch * nout * geo.cout || x.len() < geo.batch * nin * geo.cin {
        return Err(internal("convolution operands smaller than their types"));
    }
    REACH.with(|reach| {
        let mut reach = reach.borrow_mut();
        // Which input pixel each output pixel's kernel positions reach is the same for
        // every image: worked out once here, not per image and position (its index
        // arithmetic cost more than the additions it places).
        reach.clear();
        let (mut o, mut k) = ([0usize; MAX_RANK], [0usize; MAX_RANK]);
        for _ in 0..nout {
            for _ in 0..kprod {
                reach.push(input_at(geo, p, &o, &k).unwrap_or(NO_PIXEL));
                step(&mut k, &geo.k_sp[..geo.n]);
            }
            step(&mut o, &geo.out_sp[..geo.n]);
        }
        gather_images(x, geo, (wr, slots_at, out_at), tasks, &reach)
    })
}

/// The gather form's products and sums, the batch's images split over `tasks` (see
/// [`gather`]); `reach` says which input pixel each output pixel's kernel positions read.
fn gather_images<T: Real>(
    x: &[T],
    geo: &Geometry,
    (wr, slots_at, out_at): (&[T], usize, usize),
    tasks: usize,
    reach: &[usize],
) -> Result<()> {
    let (nin, nout, kc, cig) = (geo.nin(), geo.nout(), geo.kprod() * geo.cog(), geo.cig);
    let failed = Failure::default();
    crew::run(tasks, &|t| {
        // SAFETY: task `t` alone uses slot `t` (the scratch holds `tasks` slots after the
        // rearranged kernel).
        let g = unsafe {
            std::slice::from_raw_parts_mut((slots_at as *mut T).add(t * nin * kc), nin * kc)
        };
        for b in crew::part(geo.batch, tasks, t) {
            // SAFETY: image `b` of the output (in bounds, checked above) is this task's
            // alone; `out` stays borrowed until `run` returns.
            let out_img = unsafe {
                std::slice::from_raw_parts_mut(
                    (out_at as *mut T).add(b * nout * geo.cout),
                    nout * geo.cout,
                )
            };
            for grp in 0..geo.groups {
                let a = Mat {
                    data: x,
                    off: b * nin * geo.cin + grp * cig,
                    rs: geo.cin as isize,
                    cs: 1,
                };
                let wm = Mat {
                    data: wr,
                    off: grp * cig * kc,
                    rs: kc as isize,
                    cs: 1,
                };
                if matmul(nin, kc, cig, a, wm, g, kc, false).is_err() {
                    failed.set();
                    return;
                }
                gather_image(g, geo, reach, grp, out_img);
            }
        }
    });
    failed.check("convolution product out of bounds")?;
    Ok(())
}

/// Sums, for each output pixel of one image, the rows of `g` (`[input pixels, kernel
/// positions · cog]`) that its kernel positions reach (`reach`, see [`gather`]), into the
/// group's output features, kernel positions in order.
fn gather_image<T: Real>(g: &[T], geo: &Geometry, reach: &[usize], grp: usize, out: &mut [T]) {
    let (kprod, cog, cout) = (geo.kprod(), geo.cog(), geo.cout);
    let kc = kprod * cog;
    for (op, taps) in reach.chunks_exact(kprod).enumerate() {
        let dst = &mut out[op * cout + grp * cog..op * cout + (grp + 1) * cog];
        dst.fill(T::zero());
        for (kp, &at) in taps.iter().enumerate() {
            if at != NO_PIXEL {
                let src = &g[at * kc + kp * cog..at * kc + (kp + 1) * cog];
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d = *d + s;
                }
            }
        }
    }
}

/// The input pixel (row-major over the input's spatial dims) under kernel position `k` at
/// output pixel `o`, or `None` where the kernel lies on padding or an inserted zero.
fn input_at(
    geo: &Geometry,
    p: &ConvParams,
    o: &[usize; MAX_RANK],
    k: &[usize; MAX_RANK],
) -> Option<usize> {
    let mut at = 0usize;
    for d in 0..geo.n {
        let q = (o[d] * p.strides[d] + k[d] * p.rhs_dilation[d]) as i64 - p.padding[d].0;
        at = at * geo.in_sp[d] + undilate(q, p.lhs_dilation[d], geo.in_sp[d])?;
    }
    Some(at)
}

/// The input element at position `pos` of an axis of `len` elements dilated by `ld`
/// (`ld - 1` zeros inserted between elements), or `None` on an inserted zero or outside.
/// Most convolutions have no input dilation, and then no division is made: per patch
/// row, divisions cost more than the copy they place.
#[inline(always)]
fn undilate(pos: i64, ld: usize, len: usize) -> Option<usize> {
    if pos < 0 {
        return None;
    }
    let q = if ld == 1 {
        pos as usize
    } else if !(pos as usize).is_multiple_of(ld) {
        return None;
    } else {
        pos as usize / ld
    };
    (q < len).then_some(q)
}

/// The row-major multi-index of flat position `flat` in `dims`.
fn unflatten(mut flat: usize, dims: &[usize]) -> [usize; MAX_RANK] {
    let mut idx = [0usize; MAX_RANK];
    for d in (0..dims.len()).rev() {
        idx[d] = flat % dims[d];
        flat /= dims[d];
    }
    idx
}

/// Advances a row-major multi-index.
fn step(idx: &mut [usize; MAX_RANK], dims: &[usize]) {
    let mut d = dims.len();
    while d > 0 {
        d -= 1;
        idx[d] += 1;
        if idx[d] < dims[d] {
            return;
        }
        idx[d] = 0;
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The convolution by its definition, in f64.
    pub(in crate::ops) fn reference(
        x: &[f64],
        w: &[f64],
        geo: &Geometry,
        p: &ConvParams,
    ) -> Vec<f64> {
        let n = geo.n;
        let (nout, kprod, cog) = (geo.nout(), geo.kprod(), geo.cog());
        let mut out = vec![0.0; geo.batch * nout * geo.cout];
        for b in 0..geo.batch {
            let mut o = [0usize; MAX_RANK];
            for op in 0..nout {
                let mut k = [0usize; MAX_RANK];
                for kp in 0..kprod {
                    if let Some(at) = input_at(geo, p, &o, &k) {
                        for co in 0..geo.cout {
                            let grp = co / cog;
                            for ci in 0..geo.cig {
                                let xv = x[(b * geo.nin() + at) * geo.cin + grp * geo.cig + ci];
                                let wv = w[(kp * geo.cig + ci) * geo.cout + co];
                                out[(b * nout + op) * geo.cout + co] += xv * wv;
                            }
                        }
                    }
                    step(&mut k, &geo.k_sp[..n]);
                }
                step(&mut o, &geo.out_sp[..n]);
            }
        }
        out
    }

    /// A small deterministic generator (no dependency for a test's numbers).
    pub(in crate::ops) fn numbers(len: usize, seed: u64) -> Vec<f64> {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..len)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 33) as f64 / (1u64 << 31) as f64) - 0.5
            })
            .collect()
    }

    pub(in crate::ops) struct Case {
        pub batch: usize,
        pub input: Vec<usize>,
        pub kernel: Vec<usize>,
        pub cin: usize,
        pub cout: usize,
        pub groups: usize,
        pub strides: Vec<usize>,
        pub padding: Vec<(i64, i64)>,
        pub lhs_dilation: Vec<usize>,
        pub rhs_dilation: Vec<usize>,
    }

    pub(in crate::ops) fn geometry(c: &Case) -> Option<(Geometry, ConvParams)> {
        let n = c.input.len();
        let p = ConvParams {
            strides: c.strides.clone(),
            padding: c.padding.clone(),
            lhs_dilation: c.lhs_dilation.clone(),
            rhs_dilation: c.rhs_dilation.clone(),
            feature_groups: c.groups,
        };
        let mut geo = Geometry {
            n,
            batch: c.batch,
            in_sp: [0; MAX_RANK],
            k_sp: [0; MAX_RANK],
            out_sp: [0; MAX_RANK],
            cin: c.cin,
            cig: c.cin / c.groups,
            cout: c.cout,
            groups: c.groups,
        };
        for d in 0..n {
            let dil = |len: usize, by: usize| ((len - 1) * by + 1) as i64;
            let input = dil(c.input[d], c.lhs_dilation[d]) + c.padding[d].0 + c.padding[d].1;
            let k = dil(c.kernel[d], c.rhs_dilation[d]);
            if input < k {
                return None;
            }
            geo.in_sp[d] = c.input[d];
            geo.k_sp[d] = c.kernel[d];
            geo.out_sp[d] = ((input - k) / c.strides[d] as i64 + 1) as usize;
        }
        Some((geo, p))
    }

    /// Every method on every case agrees with the definition, in f64 and f32.
    #[test]
    fn every_method_matches_the_definition() {
        let mut cases = Vec::new();
        let mut seed = 1u64;
        for (input, kernel) in [
            (vec![7, 6], vec![3, 3]),
            (vec![5, 9], vec![2, 3]),
            (vec![4, 4], vec![1, 1]),
            (vec![11], vec![3]),
            (vec![3, 4, 5], vec![2, 2, 2]),
        ] {
            for &(cin, cout, groups) in &[(1, 3, 1), (3, 4, 1), (4, 6, 2), (6, 6, 3)] {
                for variant in 0..6 {
                    seed += 1;
                    let n = input.len();
                    let pick = |a: usize, b: usize| {
                        if (seed as usize + variant).is_multiple_of(2) {
                            a
                        } else {
                            b
                        }
                    };
                    let (strides, padding, ld, rd) = match variant {
                        0 => (vec![1; n], vec![(0, 0); n], vec![1; n], vec![1; n]),
                        1 => (vec![1; n], vec![(1, 1); n], vec![1; n], vec![1; n]),
                        2 => (vec![2; n], vec![(1, 0); n], vec![1; n], vec![1; n]),
                        3 => (vec![1; n], vec![(2, 2); n], vec![1; n], vec![pick(2, 1); n]),
                        // an input gradient's form: full padding, input dilated
                        4 => (vec![1; n], vec![(2, 3); n], vec![2; n], vec![1; n]),
                        _ => (
                            vec![pick(1, 3); n],
                            vec![(0, 2); n],
                            vec![pick(2, 1); n],
                            vec![2; n],
                        ),
                    };
                    cases.push(Case {
                        batch: 3,
                        input: input.clone(),
                        kernel: kernel.clone(),
                        cin,
                        cout,
                        groups,
                        strides,
                        padding,
                        lhs_dilation: ld,
                        rhs_dilation: rd,
                    });
                }
            }
        }
        let mut checked = 0;
        for (i, c) in cases.iter().enumerate() {
            let Some((geo, p)) = geometry(c) else {
                continue;
            };
            let kn: usize = c.kernel.iter().product();
            let x = numbers(c.batch * geo.nin() * c.cin, i as u64 * 2 + 1);
            let w = numbers(kn * geo.cig * c.cout, i as u64 * 2 + 2);
            let want = reference(&x, &w, &geo, &p);
            for method in [
                Method::Pointwise,
                Method::Im2colBlocks,
                Method::Im2colWhole,
                Method::Gather,
                Method::Direct,
                Method::Winograd,
            ] {
                let mut got = vec![f64::NAN; want.len()];
                run(method, &x, &w, &geo, &p, &mut got, &mut Vec::new()).unwrap();
                for (j, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-12,
                        "case {i} {method:?} element {j}: {a} vs {b}"
                    );
                }
                let (x32, w32): (Vec<f32>, Vec<f32>) = (
                    x.iter().map(|&v| v as f32).collect(),
                    w.iter().map(|&v| v as f32).collect(),
                );
                let mut got = vec![f32::NAN; want.len()];
                run(method, &x32, &w32, &geo, &p, &mut got, &mut Vec::new()).unwrap();
                for (j, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (*a as f64 - b).abs() <= 1e-5,
                        "case {i} {method:?} f32 element {j}: {a} vs {b}"
                    );
                }
            }
            checked += 1;
        }
        assert!(checked > 100, "only {checked} cases had a valid geometry");
    }

    /// Thin two-dimensional convolutions for the direct kernel: one to four input
    /// features, strides, `valid`, `same` and lopsided padding, kernel dilation, odd sizes,
    /// output features that are not a multiple of the vector width, batch 1. Those this
    /// CPU's direct kernel does not take are checked to be the ones it should not.
    fn thin_cases() -> Vec<(Geometry, ConvParams)> {
        let mut cases = Vec::new();
        let same = |k: usize, d: usize| {
            let e = ((k - 1) * d) as i64;
            (e / 2, e - e / 2)
        };
        for (batch, input, kernel) in [
            (2, [28, 28], [3, 3]),
            (1, [7, 5], [3, 3]),
            (3, [5, 9], [2, 3]),
            (1, [1, 1], [1, 1]),
            (2, [9, 8], [5, 5]),
        ] {
            for cin in 1..=4 {
                for cout in [1, 7, 8, 13, 24, 32, 41, 64] {
                    for variant in 0..6 {
                        let (strides, dilation) = match variant {
                            0 | 1 => ([1, 1], [1, 1]),
                            2 => ([2, 2], [1, 1]),
                            3 => ([1, 2], [2, 1]),
                            4 => ([3, 1], [1, 1]),
                            _ => ([1, 1], [2, 2]),
                        };
                        let padding = match variant {
                            0 | 4 => vec![(0, 0); 2],
                            1 | 5 => (0..2).map(|d| same(kernel[d], dilation[d])).collect(),
                            2 => vec![same(kernel[0], 1), same(kernel[1], 1)],
                            _ => vec![(2, 0), (0, 2)],
                        };
                        let Some((geo, p)) = geometry(&Case {
                            batch,
                            input: input.to_vec(),
                            kernel: kernel.to_vec(),
                            cin,
                            cout,
                            groups: 1,
                            strides: strides.to_vec(),
                            padding,
                            lhs_dilation: vec![1; 2],
                            rhs_dilation: dilation.to_vec(),
                        }) else {
                            continue;
                        };
                        if direct(&geo, &p).is_none() {
                            assert!(
                                crate::kernel::sgemm::isa().is_none()
                                    || kernel[0] * kernel[1] * cin > 64,
                                "the direct kernel should take {geo:?}"
                            );
                            continue;
                        }
                        cases.push((geo, p));
                    }
                }
            }
        }
        if crate::kernel::sgemm::isa().is_some() {
            assert!(cases.len() > 500, "only {} thin cases", cases.len());
        }
        cases
    }

    fn to_f32(v: &[f64]) -> Vec<f32> {
        v.iter().map(|&v| v as f32).collect()
    }

    /// The direct kernel (where this CPU runs it) equals the im2col product bit for bit
    /// (up to the sign of a zero) and the definition within rounding.
    #[test]
    fn the_direct_kernel_matches_the_product_and_the_definition() {
        crate::kernel::simd::for_each_level(the_direct_kernel_matches_on_this_level);
    }

    fn the_direct_kernel_matches_on_this_level(level: crate::kernel::simd::Level) {
        for (i, (geo, p)) in thin_cases().into_iter().enumerate() {
            if !pointwise(&geo, &p) {
                assert_eq!(choose(&geo, &p), Method::Direct);
            }
            let i = i as u64;
            let x = numbers(geo.batch * geo.nin() * geo.cin, i * 2 + 1);
            let w = numbers(geo.kprod() * geo.cin * geo.cout, i * 2 + 2);
            let want = reference(&x, &w, &geo, &p);
            let (x, w) = (to_f32(&x), to_f32(&w));
            let mut product = vec![f32::NAN; want.len()];
            let mut got = vec![f32::NAN; want.len()];
            let blocks = Method::Im2colBlocks;
            run(blocks, &x, &w, &geo, &p, &mut product, &mut Vec::new()).unwrap();
            run(Method::Direct, &x, &w, &geo, &p, &mut got, &mut Vec::new()).unwrap();
            for (j, ((a, b), c)) in got.iter().zip(&product).zip(&want).enumerate() {
                assert!(
                    a == b,
                    "{level:?} case {i} element {j}: {a} vs the product's {b}"
                );
                assert!((*a as f64 - c).abs() <= 1e-5, "case {i} element {j}");
            }
        }
    }

    /// The direct kernel gradient (f32 takes it where this CPU runs it) equals the
    /// definition within f32 rounding of its sums (each term below 1/4 in magnitude).
    #[test]
    fn the_direct_kernel_gradient_matches_the_definition() {
        for (i, (geo, p)) in thin_cases().into_iter().enumerate() {
            let i = i as u64;
            let x = numbers(geo.batch * geo.nin() * geo.cin, i * 2 + 1);
            let ct = numbers(geo.batch * geo.nout() * geo.cout, i * 2 + 2);
            let want = reference_kernel_grad(&x, &ct, &geo, &p);
            let (x, ct) = (to_f32(&x), to_f32(&ct));
            // Every instruction level the CPU has gives the same bits (each sum runs in
            // the same order), within rounding of the definition.
            let mut first: Option<Vec<u32>> = None;
            crate::kernel::simd::for_each_level(|level| {
                let mut got = vec![f32::NAN; want.len()];
                let mut scratch = vec![f32::NAN; 5];
                kernel_grad(&x, &ct, &geo, &p, &mut got, &mut scratch).unwrap();
                let terms = (geo.batch * geo.nout()) as f64;
                for (j, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (*a as f64 - b).abs() <= 1e-6 + 1e-7 * terms,
                        "{level:?} case {i} element {j}: {a} vs {b}"
                    );
                }
                let bits: Vec<u32> = got.iter().map(|v| v.to_bits()).collect();
                match &first {
                    None => first = Some(bits),
                    Some(f) => assert!(f == &bits, "{level:?} case {i}: other bits"),
                }
            });
        }
    }

    /// The kernel gradient by its definition, in f64: `dw[k, ci, co] = Σ x_at · ct`.
    pub(in crate::ops) fn reference_kernel_grad(
        x: &[f64],
        ct: &[f64],
        geo: &Geometry,
        p: &ConvParams,
    ) -> Vec<f64> {
        let n = geo.n;
        let (nout, kprod) = (geo.nout(), geo.kprod());
        let mut dw = vec![0.0; kprod * geo.cin * geo.cout];
        for b in 0..geo.batch {
            let mut o = [0usize; MAX_RANK];
            for op in 0..nout {
                let mut k = [0usize; MAX_RANK];
                for kp in 0..kprod {
                    if let Some(at) = input_at(geo, p, &o, &k) {
                        for ci in 0..geo.cin {
                            for co in 0..geo.cout {
                                dw[(kp * geo.cin + ci) * geo.cout + co] += x
                                    [(b * geo.nin() + at) * geo.cin + ci]
                                    * ct[(b * nout + op) * geo.cout + co];
                            }
                        }
                    }
                    step(&mut k, &geo.k_sp[..n]);
                }
                step(&mut o, &geo.out_sp[..n]);
            }
        }
        dw
    }

    #[test]
    fn the_kernel_gradient_matches_its_definition() {
        let mut checked = 0;
        let mut i = 0u64;
        for (input, kernel) in [
            (vec![7, 6], vec![3, 3]),
            (vec![28, 28], vec![3, 3]),
            (vec![11], vec![3]),
            (vec![3, 4, 5], vec![2, 2, 2]),
        ] {
            for &(cin, cout, batch) in &[(1, 3, 2), (3, 4, 5), (5, 2, 1)] {
                for variant in 0..4 {
                    i += 1;
                    let n = input.len();
                    let (strides, padding, ld, rd) = match variant {
                        0 => (vec![1; n], vec![(0, 0); n], vec![1; n], vec![1; n]),
                        1 => (vec![2; n], vec![(1, 1); n], vec![1; n], vec![1; n]),
                        2 => (vec![1; n], vec![(2, 0); n], vec![1; n], vec![2; n]),
                        _ => (vec![2; n], vec![(1, -1); n], vec![2; n], vec![1; n]),
                    };
                    let Some((geo, p)) = geometry(&Case {
                        batch,
                        input: input.clone(),
                        kernel: kernel.clone(),
                        cin,
                        cout,
                        groups: 1,
                        strides,
                        padding,
                        lhs_dilation: ld,
                        rhs_dilation: rd,
                    }) else {
                        continue;
                    };
                    let x = numbers(batch * geo.nin() * cin, i * 2 + 1);
                    let ct = numbers(batch * geo.nout() * cout, i * 2 + 2);
                    let want = reference_kernel_grad(&x, &ct, &geo, &p);
                    let mut got = vec![f64::NAN; want.len()];
                    kernel_grad(&x, &ct, &geo, &p, &mut got, &mut Vec::new()).unwrap();
                    for (j, (a, b)) in got.iter().zip(&want).enumerate() {
                        assert!((a - b).abs() <= 1e-11, "case {i} element {j}: {a} vs {b}");
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 30, "only {checked} cases had a valid geometry");
    }

    #[test]
    fn the_choice_follows_the_shapes() {
        let case = |input: usize, kernel: usize, pad: i64, cin: usize, cout: usize| {
            geometry(&Case {
                batch: 128,
                input: vec![input; 2],
                kernel: vec![kernel; 2],
                cin,
                cout,
                groups: 1,
                strides: vec![1; 2],
                padding: vec![(pad, pad); 2],
                lhs_dilation: vec![1; 2],
                rhs_dilation: vec![1; 2],
            })
            .unwrap()
        };
        // a 3×3 forward `valid` convolution and its input gradient (full padding): Winograd
        // tiles, but not on few features, nor where the tiles would be mostly waste
        let (g, p) = case(13, 3, 0, 32, 64);
        assert_eq!(choose(&g, &p), Method::Winograd);
        let (g, p) = case(11, 3, 2, 64, 32);
        assert_eq!(choose(&g, &p), Method::Winograd);
        let (g, p) = case(13, 3, 0, 16, 64);
        assert_eq!(choose(&g, &p), Method::Im2colBlocks);
        let (g, p) = case(13, 3, 1, 256, 256);
        assert_ne!(choose(&g, &p), Method::Winograd);
        let (g, p) = case(3, 3, 0, 32, 64);
        assert_eq!(choose(&g, &p), Method::Im2colBlocks);
        // a 5×5 forward `valid` convolution: blocks of patches
        let (g, p) = case(13, 5, 0, 32, 64);
        assert_eq!(choose(&g, &p), Method::Im2colBlocks);
        // its input gradient (full padding): the gather form
        let (g, p) = case(9, 5, 4, 64, 32);
        assert_eq!(choose(&g, &p), Method::Gather);
        // its kernel gradient (batch as features, the cotangent as kernel, the input's
        // features as batch): split along the depth
        let (mut g, p) = case(13, 11, 0, 128, 64);
        g.batch = 32;
        assert_eq!(choose(&g, &p), Method::Im2colSplit);
        // the same with a batch too large for a chunk: all patches first
        g.batch = 256;
        assert_eq!(choose(&g, &p), Method::Im2colWhole);
        let (g, p) = case(13, 1, 0, 32, 64);
        assert_eq!(choose(&g, &p), Method::Pointwise);
    }
}
