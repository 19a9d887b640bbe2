//! Shape and parameter rules that several layers share.

use crate::entry::{param, Param};
use crate::error::{ArgError, ShapeError};
use crate::shape::{product, Shape};
use crate::value::{Args, Val};

pub(crate) fn reshape(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let target = a.target_shape();
    let sizes: Vec<usize> = target
        .iter()
        .filter(|&&d| d > 0)
        .map(|&d| d as usize)
        .collect();
    // At least 1: only sizes >= 1 are multiplied.
    let known = product(&sizes);
    let inferred = target.contains(&-1);
    let fill = match x.numel() {
        Some(n) if inferred && n % known == 0 => Some(n / known),
        Some(n) if !inferred && n == known => None,
        Some(_) => {
            return Err(ShapeError::Reshape {
                known,
                inferred,
                target: target.to_vec(),
            })
        }
        None => None,
    };
    Ok(Shape {
        open: false,
        dims: target
            .iter()
            .map(|&d| if d == -1 { fill } else { Some(d as usize) })
            .collect(),
    })
}

/// The spatial sizes and the channels of an input with `N` spatial axes: `(steps,
/// channels)` for `N = 1`, `(height, width, channels)` for `N = 2`; unknown leading axes
/// filled in when the shape is open.
fn spatial<const N: usize>(x: &Shape) -> Result<([Option<usize>; N], Option<usize>), ShapeError> {
    let rank = N + 1;
    if x.dims.len() > rank || (!x.open && x.dims.len() != rank) {
        return Err(if N == 1 {
            ShapeError::NotSequence
        } else {
            ShapeError::NotImage
        });
    }
    let mut all = vec![None; rank - x.dims.len()];
    all.extend_from_slice(&x.dims);
    Ok((std::array::from_fn(|i| all[i]), all[N]))
}

/// `spatial` sizes followed by `channels`: a layer's output.
fn with_channels<const N: usize>(spatial: [Option<usize>; N], channels: Option<usize>) -> Shape {
    let mut dims = spatial.to_vec();
    dims.push(channels);
    Shape { open: false, dims }
}

/// One spatial axis of a sliding window: its output size, `Err` when it does not fit (a
/// valid window longer than the axis, or an empty axis).
fn slide(
    input: Option<usize>,
    window: usize,
    stride: usize,
    same: bool,
) -> Result<Option<usize>, ()> {
    let Some(n) = input else { return Ok(None) };
    if n == 0 {
        Err(())
    } else if same {
        Ok(Some(n.div_ceil(stride.max(1))))
    } else if window > n {
        Err(())
    } else {
        Ok(Some((n - window) / stride.max(1) + 1))
    }
}

/// Slides `window` (`kernel` once dilated) over every spatial axis.
fn slide_all<const N: usize>(
    input: [Option<usize>; N],
    kernel: [usize; N],
    window: [usize; N],
    strides: [usize; N],
    same: bool,
    pool: bool,
) -> Result<[Option<usize>; N], ShapeError> {
    let mut out = [None; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = slide(input[i], window[i], strides[i], same).map_err(|()| ShapeError::Window {
            kernel: kernel.to_vec(),
            window: window.to_vec(),
            pool,
            same,
        })?;
    }
    Ok(out)
}

/// The kernel's extent once dilated: `(k - 1) · d + 1` per axis.
fn dilated<const N: usize>(a: &Args) -> [usize; N] {
    let (kernel, dilation) = (a.sizes::<N>("kernel_size"), a.sizes::<N>("dilation_rate"));
    std::array::from_fn(|i| {
        (kernel[i].max(1) - 1)
            .saturating_mul(dilation[i])
            .saturating_add(1)
    })
}

/// The spatial output of the layer's kernel (`kernel_size`, `dilation_rate`, `strides`,
/// `padding`) sliding over `input`.
fn convolved<const N: usize>(
    a: &Args,
    input: [Option<usize>; N],
) -> Result<[Option<usize>; N], ShapeError> {
    slide_all(
        input,
        a.sizes("kernel_size"),
        dilated(a),
        a.sizes("strides"),
        a.same_padding(),
        false,
    )
}

/// Channels split into `groups` (grouped convolution, group normalisation).
fn split_into_groups(channels: Option<usize>, groups: usize) -> Result<(), ShapeError> {
    match channels {
        Some(c) if c % groups.max(1) != 0 => Err(ShapeError::Groups { groups }),
        _ => Ok(()),
    }
}

/// A convolution over `N` spatial axes (Conv1D, Conv2D, SeparableConv2D): `filters`
/// output channels.
fn conv<const N: usize>(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let (input, c) = spatial::<N>(x)?;
    if a.get("groups").is_some() {
        split_into_groups(c, a.count("groups"))?;
    }
    Ok(with_channels(
        convolved(a, input)?,
        Some(a.count("filters")),
    ))
}

pub(crate) fn conv1d(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    conv::<1>(a, x)
}

pub(crate) fn conv2d(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    conv::<2>(a, x)
}

/// A depthwise convolution: each input channel convolved with `depth_multiplier` kernels
/// of its own.
pub(crate) fn depthwise_conv2d(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let (input, c) = spatial::<2>(x)?;
    let out = c.map(|c| c.saturating_mul(a.count("depth_multiplier")));
    Ok(with_channels(convolved(a, input)?, out))
}

/// One axis of a transposed convolution's output, as Keras' `deconv_output_length`
/// computes it from the input length `n` and the dilated kernel `window`.
fn deconv_length(
    n: usize,
    window: usize,
    stride: usize,
    same: bool,
    output_padding: Option<usize>,
) -> usize {
    match output_padding {
        None if same => n.saturating_mul(stride),
        None => n
            .saturating_mul(stride)
            .saturating_add(window.saturating_sub(stride)),
        Some(p) => {
            let pad = if same { window / 2 } else { 0 };
            (n - 1)
                .saturating_mul(stride)
                .saturating_add(window)
                .saturating_add(p)
                .saturating_sub(2 * pad)
        }
    }
}

pub(crate) fn conv2d_transpose(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let (input, _) = spatial::<2>(x)?;
    let kernel = a.sizes::<2>("kernel_size");
    let window = dilated::<2>(a);
    let strides = a.sizes::<2>("strides");
    let output_padding = a.optional_sizes::<2>("output_padding");
    let same = a.same_padding();
    let mut out = [None; 2];
    for (i, o) in out.iter_mut().enumerate() {
        let Some(n) = input[i] else { continue };
        let len = match n {
            0 => 0,
            n => deconv_length(n, window[i], strides[i], same, output_padding.map(|p| p[i])),
        };
        // Only an empty input, or one pixel under `same` with an even (dilated) kernel
        // and an output padding of 0, leaves nothing.
        if len == 0 {
            return Err(ShapeError::Window {
                kernel: kernel.to_vec(),
                window: window.to_vec(),
                pool: false,
                same,
            });
        }
        *o = Some(len);
    }
    Ok(with_channels(out, Some(a.count("filters"))))
}

/// A kernel parameter with Keras' fans: the receptive field (every axis but the last two)
/// times the second-to-last axis in, times the last axis out.
fn kernel(suffix: &'static str, dims: Vec<Option<usize>>, init_arg: &'static str) -> Param {
    let n = dims.len();
    let field = dims[..n.saturating_sub(2)]
        .iter()
        .try_fold(1usize, |f, d| d.map(|d| f.saturating_mul(d)));
    let fan = |axis: Option<&Option<usize>>| {
        field
            .zip(axis.copied().flatten())
            .map(|(f, d)| f.saturating_mul(d))
    };
    let fans = [fan(dims.get(n.wrapping_sub(2))), fan(dims.last())];
    param(suffix, dims, init_arg, fans)
}

/// `kernel`, then a bias of `units` (on `use_bias`) with the kernel's fans.
fn kernel_and_bias(a: &Args, kernel: Param, units: Option<usize>) -> Vec<Param> {
    let fans = kernel.fans;
    let mut p = vec![kernel];
    if a.flag("use_bias") {
        p.push(param("bias", vec![units], "bias_initializer", fans));
    }
    p
}

/// The sizes of `name` over `N` axes, as kernel dims.
fn known<const N: usize>(a: &Args, name: &str) -> Vec<Option<usize>> {
    a.sizes::<N>(name).iter().map(|&k| Some(k)).collect()
}

/// A convolution's kernel `[spatial..., in / groups, filters]` and bias.
fn conv_params<const N: usize>(a: &Args, x: &Shape) -> Vec<Param> {
    let filters = Some(a.count("filters"));
    let c = spatial::<N>(x).ok().and_then(|(_, c)| c);
    let mut dims = known::<N>(a, "kernel_size");
    dims.extend([c.map(|c| c / a.count("groups").max(1)), filters]);
    kernel_and_bias(a, kernel("kernel", dims, "kernel_initializer"), filters)
}

pub(crate) fn conv1d_params(a: &Args, x: &Shape) -> Vec<Param> {
    conv_params::<1>(a, x)
}

pub(crate) fn conv2d_params(a: &Args, x: &Shape) -> Vec<Param> {
    conv_params::<2>(a, x)
}

/// The depthwise kernel `[kh, kw, in, depth_multiplier]`, stored as `suffix`.
fn depthwise_kernel(a: &Args, x: &Shape, suffix: &'static str) -> (Param, Option<usize>) {
    let c = spatial::<2>(x).ok().and_then(|(_, c)| c);
    let m = a.count("depth_multiplier");
    let mut dims = known::<2>(a, "kernel_size");
    dims.extend([c, Some(m)]);
    let init = "depthwise_initializer";
    (kernel(suffix, dims, init), c.map(|c| c.saturating_mul(m)))
}

pub(crate) fn depthwise_conv2d_params(a: &Args, x: &Shape) -> Vec<Param> {
    let (k, out) = depthwise_kernel(a, x, "kernel");
    kernel_and_bias(a, k, out)
}

/// Keras' order: `depthwise_kernel`, `pointwise_kernel` `[1, 1, in · depth_multiplier,
/// filters]`, `bias`.
pub(crate) fn separable_conv2d_params(a: &Args, x: &Shape) -> Vec<Param> {
    let (depthwise, mid) = depthwise_kernel(a, x, "depthwise_kernel");
    let filters = Some(a.count("filters"));
    let dims = vec![Some(1), Some(1), mid, filters];
    let pointwise = kernel("pointwise_kernel", dims, "pointwise_initializer");
    let mut p = vec![depthwise];
    p.extend(kernel_and_bias(a, pointwise, filters));
    p
}

/// Keras stores a transposed convolution's kernel as `[kh, kw, filters, in]`.
pub(crate) fn conv2d_transpose_params(a: &Args, x: &Shape) -> Vec<Param> {
    let filters = Some(a.count("filters"));
    let c = spatial::<2>(x).ok().and_then(|(_, c)| c);
    let mut dims = known::<2>(a, "kernel_size");
    dims.extend([filters, c]);
    kernel_and_bias(a, kernel("kernel", dims, "kernel_initializer"), filters)
}

/// Pooling over `N` spatial axes: the channels kept.
fn pooling<const N: usize>(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let (input, c) = spatial::<N>(x)?;
    let pool = a.sizes::<N>("pool_size");
    let strides = a.optional_sizes::<N>("strides").unwrap_or(pool);
    let out = slide_all(input, pool, pool, strides, a.same_padding(), true)?;
    Ok(with_channels(out, c))
}

pub(crate) fn pooling1d(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    pooling::<1>(a, x)
}

pub(crate) fn pooling2d(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    pooling::<2>(a, x)
}

/// Global pooling: one value per channel, the pooled axes kept as size 1 on `keepdims`.
fn global_pooling<const N: usize>(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let (_, c) = spatial::<N>(x)?;
    Ok(if a.flag("keepdims") {
        with_channels([Some(1); N], c)
    } else {
        with_channels([], c)
    })
}

pub(crate) fn global_pooling1d(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    global_pooling::<1>(a, x)
}

pub(crate) fn global_pooling2d(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    global_pooling::<2>(a, x)
}

/// The normalised features' count: the size of `axis`, when known.
pub(crate) fn features(a: &Args, x: &Shape) -> Option<usize> {
    x.axis(a.axis()).ok().flatten().and_then(|i| x.dims[i])
}

pub(crate) fn normalization(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    match x.axis(a.axis()) {
        Ok(_) => Ok(x.clone()),
        Err(_) => Err(ShapeError::Axis { axis: a.axis() }),
    }
}

/// Group normalisation: the features along `axis` split into `groups`.
pub(crate) fn group_normalization(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let out = normalization(a, x)?;
    split_into_groups(features(a, x), a.count("groups"))?;
    Ok(out)
}

/// Learned scale and offset, one per feature (batch and layer normalisation), in Keras'
/// order: `gamma`, then `beta`.
pub(crate) fn gamma_beta(a: &Args, x: &Shape) -> Vec<Param> {
    let c = features(a, x);
    let mut p = Vec::new();
    if a.flag("scale") {
        p.push(param("gamma", vec![c], "gamma_initializer", [c, c]));
    }
    if a.flag("center") {
        p.push(param("beta", vec![c], "beta_initializer", [c, c]));
    }
    p
}

/// Keras' fans of a weight of `dims` (its `compute_fans`): a vector's size both ways, a
/// matrix's rows and columns, and for more axes the last two times the receptive field.
pub(crate) fn keras_fans(dims: &[Option<usize>]) -> [Option<usize>; 2] {
    let field = || {
        dims[..dims.len().saturating_sub(2)]
            .iter()
            .try_fold(1usize, |n, d| d.map(|d| n.saturating_mul(d)))
    };
    match dims {
        [] => [Some(1), Some(1)],
        [n] => [*n, *n],
        [a, b] => [*a, *b],
        [.., a, b] => {
            let f = field();
            let times = |d: Option<usize>| Some(d?.saturating_mul(f?));
            [times(*a), times(*b)]
        }
    }
}

/// The image grown by its `padding` on each side (ZeroPadding2D).
pub(crate) fn zero_padding2d(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let ([h, w], c) = spatial::<2>(x)?;
    let [[t, b], [l, r]] = a.margins("padding");
    let grow =
        |n: Option<usize>, lo: usize, hi: usize| n.map(|n| n.saturating_add(lo).saturating_add(hi));
    Ok(Shape {
        open: false,
        dims: vec![grow(h, t, b), grow(w, l, r), c],
    })
}

/// The image less its `cropping` on each side, at least one row and column left
/// (Cropping2D; Keras refuses an empty result too).
pub(crate) fn cropping2d(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let ([h, w], c) = spatial::<2>(x)?;
    let cropping = a.margins("cropping");
    let crop = |n: Option<usize>, [lo, hi]: [usize; 2]| match n {
        None => Ok(None),
        Some(n) => n
            .checked_sub(lo.saturating_add(hi))
            .filter(|&k| k > 0)
            .map(Some)
            .ok_or(ShapeError::Crop { cropping }),
    };
    Ok(Shape {
        open: false,
        dims: vec![crop(h, cropping[0])?, crop(w, cropping[1])?, c],
    })
}

/// Each pixel repeated `size` times along each spatial axis (UpSampling2D).
pub(crate) fn upsampling2d(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let ([h, w], c) = spatial::<2>(x)?;
    let [sh, sw] = a.sizes::<2>("size");
    Ok(Shape {
        open: false,
        dims: vec![
            h.map(|h| h.saturating_mul(sh)),
            w.map(|w| w.saturating_mul(sw)),
            c,
        ],
    })
}

/// The input's axes reordered by `dims` (1-based, as Keras counts them without the
/// batch): output axis `i` is input axis `dims[i]`.
pub(crate) fn permute(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let dims = a.axes("dims");
    let rank = dims.len();
    let len = x.dims.len();
    if len > rank || (!x.open && len != rank) {
        return Err(ShapeError::Permute { rank });
    }
    // An open input's leading axes are the unknown ones.
    let mut full = vec![None; rank - len];
    full.extend_from_slice(&x.dims);
    Ok(Shape {
        open: false,
        dims: dims
            .iter()
            .map(|&d| full.get(d.wrapping_sub(1)).copied().flatten())
            .collect(),
    })
}

/// `dims` names each axis `1..=dims.len()` once.
pub(crate) fn check_permutation(a: &Args) -> Vec<ArgError> {
    let dims = a.axes("dims");
    let mut sorted = dims.to_vec();
    sorted.sort_unstable();
    if !dims.is_empty() && sorted.iter().copied().eq(1..=dims.len()) {
        return Vec::new();
    }
    let message = if dims.is_empty() {
        "`dims` must name at least one axis".to_string()
    } else {
        format!(
            "`dims` must name each of the axes 1..={} once (a permutation, counted from 1 \
             without the batch axis, as in Keras), got {}",
            dims.len(),
            Val::Dims(dims.to_vec())
        )
    };
    vec![ArgError {
        arg: "dims",
        message,
    }]
}

/// `(features,)` repeated `n` times: `(n, features)` (RepeatVector).
pub(crate) fn repeat_vector(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let [f] = x.exactly::<1>().ok_or(ShapeError::NotVector)?;
    Ok(Shape {
        open: false,
        dims: vec![Some(a.count("n")), f],
    })
}

/// PReLU keeps the shape; each shared axis must be one of the input's.
pub(crate) fn prelu(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    if !x.open {
        if let Some(&axis) = a.axes("shared_axes").iter().find(|&&ax| ax > x.dims.len()) {
            return Err(ShapeError::SharedAxis { axis });
        }
    }
    Ok(x.clone())
}

/// PReLU's `alpha`: one per input element, shared (size 1) along `shared_axes`; unknown
/// while the input's rank is.
pub(crate) fn prelu_params(a: &Args, x: &Shape) -> Vec<Param> {
    let dims: Vec<Option<usize>> = if x.open {
        vec![None]
    } else {
        let shared = a.axes("shared_axes");
        x.dims
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                if shared.contains(&(i + 1)) {
                    Some(1)
                } else {
                    d
                }
            })
            .collect()
    };
    let fans = keras_fans(&dims);
    vec![param("alpha", dims, "alpha_initializer", fans)]
}
