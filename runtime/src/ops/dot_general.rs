//! `dot_general`: shape rule, gradients, native kernel (gemm over strided views).

use super::In;
use crate::ir::{DotDims, Graph, TensorType, Value, MAX_RANK};
use crate::kernel::data::DataMut;
use crate::kernel::gemm::{matmul, Mat};
use crate::kernel::real::Real;
use crate::kernel::{strided, KernelCtx};
use crate::{Error, Result};

/// Dimensions of an operand that are neither batch nor contracting, ascending.
fn free_dims(rank: usize, batch: &[usize], contract: &[usize]) -> Vec<usize> {
    (0..rank)
        .filter(|d| !batch.contains(d) && !contract.contains(d))
        .collect()
}

/// [`free_dims`] written into `buf`, without allocating.
fn free_dims_into<'b>(
    rank: usize,
    batch: &[usize],
    contract: &[usize],
    buf: &'b mut [usize; MAX_RANK],
) -> &'b [usize] {
    let mut n = 0;
    for d in (0..rank).filter(|d| !batch.contains(d) && !contract.contains(d)) {
        buf[n] = d;
        n += 1;
    }
    &buf[..n]
}

pub(crate) fn check(g: &Graph, lhs: Value, rhs: Value, d: &DotDims) -> Result<TensorType> {
    let (a, b) = (g.ty(lhs), g.ty(rhs));
    let err = |m: String| Err(Error::shape("dot_general", format!("{a} · {b}: {m}")));
    if a.dtype != b.dtype || !a.dtype.is_arith_float() {
        return err("operands must both be f32 or both be f64".into());
    }
    if d.lhs_batch.len() != d.rhs_batch.len() || d.lhs_contract.len() != d.rhs_contract.len() {
        return err(format!(
            "batch dims {:?}/{:?} and contracting dims {:?}/{:?} must pair up",
            d.lhs_batch, d.rhs_batch, d.lhs_contract, d.rhs_contract
        ));
    }
    let all_l: Vec<usize> = d.lhs_batch.iter().chain(&d.lhs_contract).copied().collect();
    let all_r: Vec<usize> = d.rhs_batch.iter().chain(&d.rhs_contract).copied().collect();
    super::check_axes("dot_general", &all_l, a.rank())?;
    super::check_axes("dot_general", &all_r, b.rank())?;
    for (&l, &r) in d.lhs_batch.iter().zip(&d.rhs_batch) {
        if a.dims()[l] != b.dims()[r] {
            return err(format!(
                "batch dimension {l} (size {}) does not match {r} (size {})",
                a.dims()[l],
                b.dims()[r]
            ));
        }
    }
    for (&l, &r) in d.lhs_contract.iter().zip(&d.rhs_contract) {
        if a.dims()[l] != b.dims()[r] {
            return err(format!(
                "contracting dimension {l} (size {}) does not match {r} (size {})",
                a.dims()[l],
                b.dims()[r]
            ));
        }
    }
    let mut dims: Vec<usize> = d.lhs_batch.iter().map(|&i| a.dims()[i]).collect();
    dims.extend(
        free_dims(a.rank(), &d.lhs_batch, &d.lhs_contract)
            .iter()
            .map(|&i| a.dims()[i]),
    );
    dims.extend(
        free_dims(b.rank(), &d.rhs_batch, &d.rhs_contract)
            .iter()
            .map(|&i| b.dims()[i]),
    );
    Ok(TensorType::new(a.dtype, dims))
}

/// Transposes `v` so that its dimension `j` is its current dimension `pos[j]`; skips
/// identity permutations.
fn arrange(g: &mut Graph, v: Value, current_to_target: &[usize]) -> Result<Value> {
    // current_to_target[i] = the target dimension held by current dimension i.
    let mut perm = vec![0; current_to_target.len()];
    for (i, &t) in current_to_target.iter().enumerate() {
        perm[t] = i;
    }
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        Ok(v)
    } else {
        g.transpose(v, &perm)
    }
}

/// Both cotangents are dot_generals of the cotangent with the other operand, arranged so
/// the common matmul cases need no transpose (`dW = xᵀ·ct`, `dx = ct·Wᵀ`).
pub(crate) fn vjp(
    g: &mut Graph,
    x: Value,
    w: Value,
    d: &DotDims,
    ct: Value,
) -> Result<(Value, Value)> {
    let (xr, wr) = (g.ty(x).rank(), g.ty(w).rank());
    let nb = d.lhs_batch.len();
    let x_free = free_dims(xr, &d.lhs_batch, &d.lhs_contract);
    let w_free = free_dims(wr, &d.rhs_batch, &d.rhs_contract);
    let nxf = x_free.len();
    let batch: Vec<usize> = (0..nb).collect();
    let ct_xf: Vec<usize> = (nb..nb + nxf).collect();
    let ct_wf: Vec<usize> = (nb + nxf..nb + nxf + w_free.len()).collect();

    // dx = ct · w, contracting ct's w-free dims with w's free dims.
    // Result: [batch, x_free, w's contracting dims ascending].
    let dx = g.dot_general(
        ct,
        w,
        DotDims {
            lhs_batch: batch.clone(),
            rhs_batch: d.rhs_batch.clone(),
            lhs_contract: ct_wf.clone(),
            rhs_contract: w_free.clone(),
        },
    )?;
    let mut wc_sorted: Vec<(usize, usize)> = d
        .rhs_contract
        .iter()
        .zip(&d.lhs_contract)
        .map(|(&wc, &xc)| (wc, xc))
        .collect();
    wc_sorted.sort_unstable();
    let dx_to_x: Vec<usize> = d
        .lhs_batch
        .iter()
        .copied()
        .chain(x_free.iter().copied())
        .chain(wc_sorted.iter().map(|&(_, xc)| xc))
        .collect();
    let dx = arrange(g, dx, &dx_to_x)?;

    // dw = x · ct, contracting x's free dims with ct's x-free dims.
    // Result: [batch, x's contracting dims ascending, w_free].
    let dw = g.dot_general(
        x,
        ct,
        DotDims {
            lhs_batch: d.lhs_batch.clone(),
            rhs_batch: batch,
            lhs_contract: x_free,
            rhs_contract: ct_xf,
        },
    )?;
    let mut xc_sorted: Vec<(usize, usize)> = d
        .lhs_contract
        .iter()
        .zip(&d.rhs_contract)
        .map(|(&xc, &wc)| (xc, wc))
        .collect();
    xc_sorted.sort_unstable();
    let dw_to_w: Vec<usize> = d
        .rhs_batch
        .iter()
        .copied()
        .chain(xc_sorted.iter().map(|&(_, wc)| wc))
        .chain(w_free.iter().copied())
        .collect();
    let dw = arrange(g, dw, &dw_to_w)?;
    Ok((dx, dw))
}

/// How an operand is read as a batch of matrices `[B, rows, cols]` where rows are its
/// `first` group and columns its `second` group of dimensions.
struct View {
    batch_stride: usize,
    rs: isize,
    cs: isize,
}

/// Whether `dims` are exactly the consecutive positions `from, from+1, …`.
fn consecutive(dims: &[usize], from: usize) -> bool {
    dims.iter().enumerate().all(|(i, &d)| d == from + i)
}

/// A zero-copy view of an operand with batch dims leading and the two groups (each
/// consecutive, in order) in either order; `None` means it must be copied first.
fn view(
    batch: &[usize],
    rows: &[usize],
    cols: &[usize],
    nrows: usize,
    ncols: usize,
) -> Option<View> {
    let nb = batch.len();
    if !consecutive(batch, 0) {
        return None;
    }
    let bs = nrows * ncols;
    if consecutive(rows, nb) && consecutive(cols, nb + rows.len()) {
        Some(View {
            batch_stride: bs,
            rs: ncols as isize,
            cs: 1,
        })
    } else if consecutive(cols, nb) && consecutive(rows, nb + cols.len()) {
        Some(View {
            batch_stride: bs,
            rs: 1,
            cs: nrows as isize,
        })
    } else {
        None
    }
}

/// Copies an operand into `scratch` as row-major `[batch, rows, cols]`.
fn pack<T: Real>(x: &[T], dims: &[usize], order: &[usize], scratch: &mut Vec<T>) {
    let xs = strided::strides(dims);
    let mut st: strided::Strides = [0; MAX_RANK];
    let mut od = [0usize; MAX_RANK];
    for (i, &p) in order.iter().enumerate() {
        st[i] = xs[p];
        od[i] = dims[p];
    }
    let n: usize = dims.iter().product();
    if scratch.len() < n {
        scratch.resize(n, T::zero());
    }
    strided::gather(
        x,
        0,
        &st[..order.len()],
        &od[..order.len()],
        &mut scratch[..n],
    );
}

fn run<T: Real>(
    a: &[T],
    b: &[T],
    ad: &[usize],
    bd: &[usize],
    d: &DotDims,
    out: &mut [T],
    scratch: &mut [Vec<T>; 2],
) -> Result<()> {
    let size = |dims: &[usize], of: &[usize]| of.iter().map(|&i| dims[i]).product::<usize>();
    // Free dimensions on the stack: this runs every step.
    let (mut af, mut bf) = ([0usize; MAX_RANK], [0usize; MAX_RANK]);
    let a_free = free_dims_into(ad.len(), &d.lhs_batch, &d.lhs_contract, &mut af);
    let b_free = free_dims_into(bd.len(), &d.rhs_batch, &d.rhs_contract, &mut bf);
    let nbatch = size(ad, &d.lhs_batch);
    let (m, k, n) = (
        size(ad, a_free),
        size(ad, &d.lhs_contract),
        size(bd, b_free),
    );
    let [sa, sb] = scratch;

    let (a, av) = match view(&d.lhs_batch, a_free, &d.lhs_contract, m, k) {
        Some(v) => (a, v),
        None => {
            let order: Vec<usize> = d
                .lhs_batch
                .iter()
                .chain(a_free)
                .chain(&d.lhs_contract)
                .copied()
                .collect();
            pack(a, ad, &order, sa);
            (
                &sa[..],
                View {
                    batch_stride: m * k,
                    rs: k as isize,
                    cs: 1,
                },
            )
        }
    };
    let (b, bv) = match view(&d.rhs_batch, &d.rhs_contract, b_free, k, n) {
        Some(v) => (b, v),
        None => {
            let order: Vec<usize> = d
                .rhs_batch
                .iter()
                .chain(&d.rhs_contract)
                .chain(b_free)
                .copied()
                .collect();
            pack(b, bd, &order, sb);
            (
                &sb[..],
                View {
                    batch_stride: k * n,
                    rs: n as isize,
                    cs: 1,
                },
            )
        }
    };
    for i in 0..nbatch {
        matmul(
            m,
            n,
            k,
            Mat {
                data: a,
                off: i * av.batch_stride,
                rs: av.rs,
                cs: av.cs,
            },
            Mat {
                data: b,
                off: i * bv.batch_stride,
                rs: bv.rs,
                cs: bv.cs,
            },
            &mut out[i * m * n..(i + 1) * m * n],
            n,
            false,
        )?;
    }
    Ok(())
}

pub(crate) fn native(
    lhs: In<'_>,
    rhs: In<'_>,
    d: &DotDims,
    _out_ty: &TensorType,
    out: DataMut<'_>,
    ctx: &mut KernelCtx,
) -> Result<()> {
    use crate::kernel::data::Data;
    match (lhs.data, rhs.data, out) {
        (Data::F32(a), Data::F32(b), DataMut::F32(o)) => run(
            a,
            b,
            lhs.ty.dims(),
            rhs.ty.dims(),
            d,
            o,
            &mut ctx.scratch_f32,
        ),
        (Data::F64(a), Data::F64(b), DataMut::F64(o)) => run(
            a,
            b,
            lhs.ty.dims(),
            rhs.ty.dims(),
            d,
            o,
            &mut ctx.scratch_f64,
        ),
        (a, _, _) => Err(super::unsupported("dot_general", a.dtype())),
    }
}

// ---- StableHLO lowering

use crate::hlo::list;
use crate::ops::Emitter;

/// StableHLO orders the result as the IR does: batch, lhs free, rhs free dimensions.
/// Precision is left at the default, as JAX and TensorFlow do (full f32 on CPU; on TPU the
/// default trades mantissa bits for speed).
pub(crate) fn lower(
    e: &mut Emitter<'_>,
    lhs: Value,
    rhs: Value,
    dims: &DotDims,
    ty: &TensorType,
) -> String {
    let (a, b) = (e.name(lhs), e.name(rhs));
    let (ta, tb) = (e.ty(lhs).mlir(), e.ty(rhs).mlir());
    let batching = if dims.lhs_batch.is_empty() {
        String::new()
    } else {
        format!(
            "batching_dims = {} x {}, ",
            list(&dims.lhs_batch),
            list(&dims.rhs_batch)
        )
    };
    e.emit(format!(
        "stablehlo.dot_general {a}, {b}, {batching}contracting_dims = {} x {} : ({ta}, {tb}) -> {}",
        list(&dims.lhs_contract),
        list(&dims.rhs_contract),
        ty.mlir()
    ))
}
