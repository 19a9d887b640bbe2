//! `convolution`: shape rule, gradients, the native kernel's entry (the kernels are in
//! `conv_native`), StableHLO lowering.
//!
//! Layout: input `[batch, spatial…, features]`, kernel `[spatial…, in_features/groups,
//! out_features]`, output `[batch, spatial…, out_features]` (TensorFlow/Keras' NHWC/HWIO).

use super::{conv_native, In};
use crate::ir::{ConvParams, DType, Graph, TensorType, Value};
use crate::kernel::data::{Data, DataMut};
use crate::kernel::KernelCtx;
use crate::{Error, Result};

/// Size of a dimension of `n` elements with `d - 1` zeros inserted between neighbours.
fn dilated(n: usize, d: usize) -> i64 {
    if n == 0 {
        0
    } else {
        ((n - 1) * d + 1) as i64
    }
}

pub(crate) fn check(g: &Graph, lhs: Value, rhs: Value, p: &ConvParams) -> Result<TensorType> {
    let (x, w) = (g.ty(lhs), g.ty(rhs));
    let err = |m: String| {
        Err(Error::shape(
            "convolution",
            format!("input {x}, kernel {w}: {m}"),
        ))
    };
    if x.dtype != w.dtype || !x.dtype.is_arith_float() {
        return err("input and kernel must both be f32 or both be f64".into());
    }
    if x.rank() < 3 || w.rank() != x.rank() {
        return err(
            "input must be [batch, spatial..., features] and kernel [spatial..., in, out] of the same rank >= 3"
                .into(),
        );
    }
    let n = x.rank() - 2;
    if p.strides.len() != n
        || p.padding.len() != n
        || p.lhs_dilation.len() != n
        || p.rhs_dilation.len() != n
    {
        return err(format!(
            "strides, padding and dilations need {n} entries each (one per spatial dimension)"
        ));
    }
    let groups = p.feature_groups;
    let (cin, kin, cout) = (x.dims()[n + 1], w.dims()[n], w.dims()[n + 1]);
    if groups == 0 || cin != kin * groups || cout % groups != 0 {
        return err(format!(
            "with {groups} feature group(s) the input's {cin} features must equal the kernel's {kin} \
             input features times the groups, and the kernel's {cout} output features must divide by the groups"
        ));
    }
    let mut dims = vec![x.dims()[0]];
    for d in 0..n {
        let (s, ld, rd) = (p.strides[d], p.lhs_dilation[d], p.rhs_dilation[d]);
        if s == 0 || ld == 0 || rd == 0 {
            return err(format!(
                "strides and dilations must be >= 1 (spatial dimension {d})"
            ));
        }
        let input = dilated(x.dims()[1 + d], ld) + p.padding[d].0 + p.padding[d].1;
        let k = dilated(w.dims()[d], rd);
        if k == 0 || input < k {
            return err(format!(
                "the (dilated) kernel of size {k} does not fit the padded input of size {input} in spatial dimension {d}"
            ));
        }
        dims.push(((input - k) / s as i64 + 1) as usize);
    }
    dims.push(cout);
    Ok(TensorType::new(x.dtype, dims))
}

/// Input gradient: a convolution of the cotangent with the spatially reversed kernel
/// (features swapped within each group), strides and input dilation exchanged.
/// Kernel gradient: per group, a convolution of the input (batch and features swapped)
/// with the cotangent as kernel.
pub(crate) fn vjp(
    g: &mut Graph,
    x: Value,
    w: Value,
    p: &ConvParams,
    ct: Value,
) -> Result<(Value, Value)> {
    let (xd, wd, cd) = (
        g.ty(x).dims().to_vec(),
        g.ty(w).dims().to_vec(),
        g.ty(ct).dims().to_vec(),
    );
    let n = xd.len() - 2;
    let groups = p.feature_groups;
    let (cig, co) = (wd[n], wd[n + 1]);
    let cog = co / groups;
    let spatial: Vec<usize> = (0..n).collect();

    // ---- input gradient
    let mut wt = w;
    if groups > 1 {
        let mut split = wd[..n].to_vec();
        split.extend([cig, groups, cog]);
        wt = g.reshape(wt, split)?;
        let mut perm = spatial.clone();
        perm.extend([n + 2, n + 1, n]);
        wt = g.transpose(wt, &perm)?;
        let mut merged = wd[..n].to_vec();
        merged.extend([cog, groups * cig]);
        wt = g.reshape(wt, merged)?;
    } else {
        let mut perm = spatial.clone();
        perm.extend([n + 1, n]);
        wt = g.transpose(wt, &perm)?;
    }
    let wt = g.reverse(wt, &spatial)?;
    let mut padding = Vec::with_capacity(n);
    for d in 0..n {
        let k = dilated(wd[d], p.rhs_dilation[d]);
        let in_dil = dilated(xd[1 + d], p.lhs_dilation[d]);
        let out_dil = dilated(cd[1 + d], p.strides[d]);
        let before = k - 1 - p.padding[d].0;
        padding.push((before, in_dil + k - 1 - out_dil - before));
    }
    let dx = g.convolution(
        ct,
        wt,
        ConvParams {
            strides: p.lhs_dilation.clone(),
            padding,
            lhs_dilation: p.strides.clone(),
            rhs_dilation: p.rhs_dilation.clone(),
            feature_groups: groups,
        },
    )?;

    // ---- kernel gradient
    let mut padding = Vec::with_capacity(n);
    for d in 0..n {
        let k = dilated(wd[d], p.rhs_dilation[d]);
        let in_dil = dilated(xd[1 + d], p.lhs_dilation[d]);
        let out_dil = dilated(cd[1 + d], p.strides[d]);
        let lo = p.padding[d].0;
        padding.push((lo, (out_dil - in_dil) + (k - lo - 1)));
    }
    let params = ConvParams {
        strides: p.rhs_dilation.clone(),
        padding,
        lhs_dilation: p.lhs_dilation.clone(),
        rhs_dilation: p.strides.clone(),
        feature_groups: 1,
    };
    // [C, spatial…, N] and [spatial…, N, Co]
    let mut xperm = vec![n + 1];
    xperm.extend(1..=n);
    xperm.push(0);
    let mut cperm: Vec<usize> = (1..=n).collect();
    cperm.extend([0, n + 1]);
    // [C, k…, Co] -> [k…, C, Co]
    let mut back: Vec<usize> = (1..=n).collect();
    back.extend([0, n + 1]);
    let mut parts = Vec::with_capacity(groups);
    for grp in 0..groups {
        let (xg, cg) = if groups == 1 {
            (x, ct)
        } else {
            let mut s = vec![0; n + 2];
            let mut l = xd.clone();
            s[n + 1] = grp * cig;
            l[n + 1] = (grp + 1) * cig;
            let xg = g.slice(x, &s, &l, &vec![1; n + 2])?;
            let mut l = cd.clone();
            s[n + 1] = grp * cog;
            l[n + 1] = (grp + 1) * cog;
            (xg, g.slice(ct, &s, &l, &vec![1; n + 2])?)
        };
        let lt = g.transpose(xg, &xperm)?;
        let rt = g.transpose(cg, &cperm)?;
        let dw = g.convolution(lt, rt, params.clone())?;
        parts.push(g.transpose(dw, &back)?);
    }
    let dw = if parts.len() == 1 {
        parts[0]
    } else {
        g.concatenate(&parts, n + 1)?
    };
    Ok((dx, dw))
}

pub(crate) fn native(
    lhs: In<'_>,
    rhs: In<'_>,
    p: &ConvParams,
    out_ty: &TensorType,
    out: DataMut<'_>,
    ctx: &mut KernelCtx,
) -> Result<()> {
    let (xd, wd, od) = (lhs.ty.dims(), rhs.ty.dims(), out_ty.dims());
    let n = xd.len() - 2;
    let geo = conv_native::Geometry::new(
        xd[0],
        &xd[1..=n],
        &wd[..n],
        &od[1..=n],
        (xd[n + 1], wd[n], wd[n + 1]),
        p.feature_groups,
    );
    let method = conv_native::choose(&geo, p);
    match (lhs.data, rhs.data, out) {
        (Data::F32(x), Data::F32(w), DataMut::F32(o)) => {
            conv_native::run(method, x, w, &geo, p, o, &mut ctx.scratch_f32[0])
        }
        (Data::F64(x), Data::F64(w), DataMut::F64(o)) => {
            conv_native::run(method, x, w, &geo, p, o, &mut ctx.scratch_f64[0])
        }
        (a, _, _) => Err(super::unsupported("convolution", a.dtype())),
    }
}

/// How `native` computes an `f32` convolution that the native planner may fuse into the
/// pooling that alone reads it: that pooling then computes the convolution's output
/// itself, by the same kernel, a part at a time, and never stores it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum PooledConv {
    /// Rows at a time by the direct kernel (`kernel::conv_direct`).
    Direct(crate::kernel::conv_direct::Direct2d),
    /// Tiles at a time by Winograd's forward form (`conv_winograd::conv2d_emitting`).
    Winograd(super::conv_winograd::Tiles),
}

impl PooledConv {
    /// The convolution's output shape, NHWC.
    pub(super) fn output(&self) -> [usize; 4] {
        match self {
            PooledConv::Direct(d) => [d.batch, d.output[0], d.output[1], d.cout],
            PooledConv::Winograd(t) => [t.batch, t.output[0], t.output[1], t.cout],
        }
    }
}

/// The geometry of the two-dimensional `f32` convolution of `lhs` (NHWC) by `rhs` (HWIO)
/// to `out`, the method `native` computes it by, and `out`'s shape.
fn f32_method_2d(
    lhs: &TensorType,
    rhs: &TensorType,
    p: &ConvParams,
    out: &TensorType,
) -> Option<(conv_native::Geometry, conv_native::Method, [usize; 4])> {
    let (xd, wd, od) = (lhs.dims(), rhs.dims(), out.dims());
    let f32s = [lhs, rhs, out].iter().all(|t| t.dtype == DType::F32);
    if !f32s || xd.len() != 4 || wd.len() != 4 || od.len() != 4 || p.strides.len() != 2 {
        return None;
    }
    let geo = conv_native::Geometry::new(
        xd[0],
        &xd[1..=2],
        &wd[..2],
        &od[1..=2],
        (xd[3], wd[2], wd[3]),
        p.feature_groups,
    );
    let method = conv_native::choose(&geo, p);
    Some((geo, method, [od[0], od[1], od[2], od[3]]))
}

/// How `native` computes the `f32` convolution of `lhs` by `rhs` to `out`, where a pooling
/// may compute it part by part ([`PooledConv`]): by the direct kernel, or by Winograd's
/// tiles in the forward form. The fused kernels compute the parts as `native` would.
pub(crate) fn pooled_forward(
    lhs: &TensorType,
    rhs: &TensorType,
    p: &ConvParams,
    out: &TensorType,
) -> Option<PooledConv> {
    let (geo, method, od) = f32_method_2d(lhs, rhs, p, out)?;
    let conv = match method {
        conv_native::Method::Direct => conv_native::direct(&geo, p).map(PooledConv::Direct),
        conv_native::Method::Winograd => conv_native::winograd(&geo, p)
            .filter(|t| super::conv_winograd::emitting_edge(t).is_some())
            .map(PooledConv::Winograd),
        _ => None,
    }?;
    (conv.output() == od).then_some(conv)
}

/// Winograd's tiles when `native` computes the `f32` convolution of `lhs` by `rhs` to
/// `out` by their scatter form (`conv_winograd::conv2d_filled`: tiles of the input from
/// its first pixel on), where the native planner may have a pooling's gradient fill the
/// input's tiles instead of storing it.
pub(super) fn winograd_scatter(
    lhs: &TensorType,
    rhs: &TensorType,
    p: &ConvParams,
    out: &TensorType,
) -> Option<super::conv_winograd::Tiles> {
    let (geo, method, od) = f32_method_2d(lhs, rhs, p, out)?;
    if method != conv_native::Method::Winograd {
        return None;
    }
    let tiles = conv_native::winograd(&geo, p)?;
    let scatters = super::conv_winograd::filled_edge(&tiles).is_some();
    (scatters && PooledConv::Winograd(tiles).output() == od).then_some(tiles)
}

/// Winograd's tiles when `native` computes the `f32` kernel gradient `dw` of the
/// convolution `forward` of an image of type `image` (its output of type `y`) by them
/// (`conv_native::kernel_grad`'s choice), where the native planner may have a pooling's
/// gradient fill the cotangent's tiles instead of storing it.
pub(super) fn winograd_kernel_grad(
    forward: &ConvParams,
    image: &TensorType,
    y: &TensorType,
    dw: &TensorType,
) -> Option<super::conv_winograd::Tiles> {
    let (xd, cd) = (image.dims(), y.dims());
    let f32s = [image, y, dw].iter().all(|t| t.dtype == DType::F32);
    if !f32s || xd.len() != 4 || forward.strides.len() != 2 || forward.feature_groups != 1 {
        return None;
    }
    // As `native_kernel_grad` makes it, and as `conv_native::kernel_grad` chooses.
    let geo = conv_native::kernel_grad_geometry(xd, cd, dw.dims())?;
    if cd[0] * cd[1] * cd[2] == 0 || conv_native::direct(&geo, forward).is_some() {
        return None;
    }
    conv_native::winograd_gradient(&geo, forward)
}

/// The forward parameters of a convolution whose kernel gradient `vjp` expresses as the
/// convolution `kg` of the transposed input and cotangent (see `vjp`): the native planner
/// computes that gradient from the untransposed operands (`native_kernel_grad`).
pub(crate) fn forward_of_kernel_grad(kg: &ConvParams) -> ConvParams {
    ConvParams {
        strides: kg.rhs_dilation.clone(),
        padding: kg.padding.clone(),
        lhs_dilation: kg.lhs_dilation.clone(),
        rhs_dilation: kg.strides.clone(),
        feature_groups: 1,
    }
}

/// The kernel gradient `[spatial…, in, out]` of a one-group convolution with parameters
/// `p`, from its input `x` `[batch, spatial…, in]` and the cotangent `ct` of its output
/// `[batch, spatial…, out]`.
pub(crate) fn native_kernel_grad(
    x: In<'_>,
    ct: In<'_>,
    p: &ConvParams,
    out_ty: &TensorType,
    out: DataMut<'_>,
    ctx: &mut KernelCtx,
) -> Result<()> {
    let (xd, cd, od) = (x.ty.dims(), ct.ty.dims(), out_ty.dims());
    let Some(geo) = conv_native::kernel_grad_geometry(xd, cd, od) else {
        return Err(Error::Backend {
            backend: "native",
            message: format!(
                "internal: kernel gradient of input {} and cotangent {} cannot be {out_ty}",
                x.ty, ct.ty
            ),
        });
    };
    match (x.data, ct.data, out) {
        (Data::F32(x), Data::F32(c), DataMut::F32(o)) => {
            conv_native::kernel_grad(x, c, &geo, p, o, &mut ctx.scratch_f32[0])
        }
        (Data::F64(x), Data::F64(c), DataMut::F64(o)) => {
            conv_native::kernel_grad(x, c, &geo, p, o, &mut ctx.scratch_f64[0])
        }
        (a, _, _) => Err(super::unsupported("convolution", a.dtype())),
    }
}

// ---- StableHLO lowering

use crate::hlo::list;
use crate::ops::Emitter;

/// The fixed layout as StableHLO dimension numbers: `[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]`.
pub(crate) fn lower(
    e: &mut Emitter<'_>,
    lhs: Value,
    rhs: Value,
    p: &ConvParams,
    ty: &TensorType,
) -> String {
    let spatial: Vec<String> = (0..p.strides.len()).map(|d| d.to_string()).collect();
    let sp = spatial.join(", ");
    let pads: Vec<String> = p
        .padding
        .iter()
        .map(|(l, h)| format!("[{l}, {h}]"))
        .collect();
    let (a, b) = (e.name(lhs), e.name(rhs));
    let (ta, tb) = (e.ty(lhs).mlir(), e.ty(rhs).mlir());
    e.emit(format!(
        "stablehlo.convolution({a}, {b}) dim_numbers = [b, {sp}, f]x[{sp}, i, o]->[b, {sp}, f], \
         window = {{stride = {}, pad = [{}], lhs_dilate = {}, rhs_dilate = {}}} \
         {{batch_group_count = 1 : i64, feature_group_count = {} : i64}} : ({ta}, {tb}) -> {}",
        list(&p.strides),
        pads.join(", "),
        list(&p.lhs_dilation),
        list(&p.rhs_dilation),
        p.feature_groups,
        ty.mlir()
    ))
}
