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

/// `(height, width, channels)` of an image input.
pub(crate) fn image(x: &Shape) -> Result<[Option<usize>; 3], ShapeError> {
    x.exactly::<3>().ok_or(ShapeError::NotImage)
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

/// Slides `window` (`kernel` once dilated) over both spatial axes.
fn slide2(
    [h, w]: [Option<usize>; 2],
    kernel: [usize; 2],
    window: [usize; 2],
    strides: [usize; 2],
    same: bool,
    pool: bool,
) -> Result<[Option<usize>; 2], ShapeError> {
    match (
        slide(h, window[0], strides[0], same),
        slide(w, window[1], strides[1], same),
    ) {
        (Ok(oh), Ok(ow)) => Ok([oh, ow]),
        _ => Err(ShapeError::Window {
            kernel,
            window,
            pool,
            same,
        }),
    }
}

pub(crate) fn conv2d(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let [h, w, c] = image(x)?;
    let groups = a.count("groups");
    if let Some(c) = c {
        if c % groups.max(1) != 0 {
            return Err(ShapeError::Groups { groups });
        }
    }
    let kernel = a.pair("kernel_size");
    let [dh, dw] = a.pair("dilation_rate");
    let dilated = |k: usize, d: usize| (k.max(1) - 1).saturating_mul(d).saturating_add(1);
    let window = [dilated(kernel[0], dh), dilated(kernel[1], dw)];
    let [oh, ow] = slide2(
        [h, w],
        kernel,
        window,
        a.pair("strides"),
        a.same_padding(),
        false,
    )?;
    Ok(Shape {
        open: false,
        dims: vec![oh, ow, Some(a.count("filters"))],
    })
}

pub(crate) fn conv2d_params(a: &Args, x: &Shape) -> Vec<Param> {
    let [kh, kw] = a.pair("kernel_size");
    let filters = a.count("filters");
    let groups = a.count("groups").max(1);
    let c = x.exactly::<3>().and_then(|[_, _, c]| c);
    // Keras' fans for convolution kernels: channels times the receptive field.
    let field = kh.saturating_mul(kw);
    let fans = [
        c.map(|c| field.saturating_mul(c) / groups),
        Some(field.saturating_mul(filters)),
    ];
    let mut p = vec![param(
        "kernel",
        vec![Some(kh), Some(kw), c.map(|c| c / groups), Some(filters)],
        "kernel_initializer",
        fans,
    )];
    if a.flag("use_bias") {
        p.push(param("bias", vec![Some(filters)], "bias_initializer", fans));
    }
    p
}

pub(crate) fn pooling2d(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let [h, w, c] = image(x)?;
    let pool = a.pair("pool_size");
    let strides = a.optional_pair("strides").unwrap_or(pool);
    let [oh, ow] = slide2([h, w], pool, pool, strides, a.same_padding(), true)?;
    Ok(Shape {
        open: false,
        dims: vec![oh, ow, c],
    })
}

/// Global pooling: one value per channel, the pooled axes kept as size 1 on `keepdims`.
pub(crate) fn global_pooling2d(a: &Args, x: &Shape) -> Result<Shape, ShapeError> {
    let [_, _, c] = image(x)?;
    Ok(Shape {
        open: false,
        dims: if a.flag("keepdims") {
            vec![Some(1), Some(1), c]
        } else {
            vec![c]
        },
    })
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
    let [h, w, c] = image(x)?;
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
    let [h, w, c] = image(x)?;
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
    let [h, w, c] = image(x)?;
    let [sh, sw] = a.pair("size");
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
