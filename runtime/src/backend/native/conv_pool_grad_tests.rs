//! The planner's kernel, input and bias gradients from a pooled convolution's pooled
//! cotangent (`conv_pool_grad`): taken where the convolution output's cotangent has no
//! other reader, left where it has or where the fused kernels do not apply; the pooling's
//! output the same bits as without it, the gradients within rounding of the plan without
//! it and of a direct f64 reference, the kernel gradient the same bits as without it over
//! the same parts (on Winograd's tiles, always, and the input gradient too), the same bits
//! on one thread as on the crew.

use super::bias_relu_pool::Fused;
use super::executor::NativeExecutable;
use super::testing::without_conv_pool_grad;
use super::NativeBackend;
use crate::backend::{Backend, CompileOptions, Executable};
use crate::ir::{BinaryOp, ConvParams, DType, Graph, ReduceOp, TensorType, Window};
use crate::Tensor;

fn window(k: usize, s: usize, pad: [(usize, usize); 2]) -> Window {
    Window {
        dims: vec![1, k, k, 1],
        strides: vec![1, s, s, 1],
        padding: vec![(0, 0), pad[0], pad[1], (0, 0)],
    }
}

/// A convolution of `[n, h, w, cin]` by `k×k` to `cout` features, and its pooling.
#[derive(Clone, Debug)]
struct Case {
    input: [usize; 4],
    k: usize,
    cout: usize,
    params: ConvParams,
    pool: Window,
}

fn case(input: [usize; 4], k: usize, cout: usize, pool: Window) -> Case {
    Case {
        input,
        k,
        cout,
        params: ConvParams::simple(2),
        pool,
    }
}

impl Case {
    fn conv(mut self, s: usize, pad: (i64, i64), d: usize) -> Case {
        self.params.strides = vec![s; 2];
        self.params.padding = vec![pad; 2];
        self.params.rhs_dilation = vec![d; 2];
        self
    }
}

/// What the graph returns besides the pooling and the kernel gradient.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Extra {
    /// Nothing: a first layer without a bias.
    None,
    /// The bias gradient: a first layer.
    Bias,
    /// The bias and input gradients: a later layer.
    Input,
    /// The bias gradient and the convolution output's cotangent itself.
    Cotangent,
}

/// The forward and the gradients of `p = max_pool(relu(conv(x, k) + bias))` as the
/// autodiff chains the ops' VJP rules (the pooling's cotangent a parameter): outputs
/// `p`, `dk`, then `db` and the others `extra` names.
fn graph(c: &Case, extra: Extra, dtype: DType) -> Graph {
    let mut g = Graph::new("conv_pool_grad");
    let x = g.parameter(TensorType::new(dtype, c.input));
    let k = g.parameter(TensorType::new(dtype, [c.k, c.k, c.input[3], c.cout]));
    let y = g.convolution(x, k, c.params.clone()).unwrap();
    let bias = g.parameter(TensorType::new(dtype, [c.cout]));
    let a = g.add(y, bias).unwrap();
    let z = g.zeros_like(a).unwrap();
    let r = g.max(a, z).unwrap();
    let p = g.reduce_window(ReduceOp::Max, r, c.pool.clone()).unwrap();
    let ct = g.parameter(g.ty(p).clone());
    let ct_r = crate::ops::reduce_window::vjp(&mut g, ReduceOp::Max, r, &c.pool, ct).unwrap();
    let (ct_a, _) = crate::ops::binary::vjp(&mut g, BinaryOp::Max, a, z, r, ct_r).unwrap();
    let (dx, dk) = crate::ops::convolution::vjp(&mut g, x, k, &c.params, ct_a).unwrap();
    let mut outs = vec![p, dk];
    if extra != Extra::None {
        outs.push(g.reduce(ReduceOp::Sum, ct_a, &[0, 1, 2]).unwrap());
    }
    match extra {
        Extra::Input => outs.push(dx),
        Extra::Cotangent => outs.push(ct_a),
        Extra::None | Extra::Bias => {}
    }
    g.set_outputs(outs).unwrap();
    g
}

/// Compiles `g` with the fusion or without: the executable and how many gradients it
/// computes from a pooled cotangent.
fn compile(g: &Graph, fused: bool) -> (NativeExecutable, usize, String) {
    let opts = CompileOptions::default();
    let make = || NativeExecutable::new(g, &opts).unwrap();
    let mut exe = if fused {
        make()
    } else {
        without_conv_pool_grad(make)
    };
    let plan = exe.plan_mut();
    let count = plan
        .fused_pools
        .iter()
        .flatten()
        .filter(|f| {
            matches!(
                f,
                Fused::PooledKernelGrad { .. }
                    | Fused::PooledInputGrad { .. }
                    | Fused::PooledBiasGrad { .. }
            )
        })
        .count();
    let text = plan.describe();
    (exe, count, text)
}

/// Arguments for `g`: values from a small set whose products and sums are exact (ties,
/// exact zeros of the pre-activation) or from a continuum, NaN every `nan_every`-th
/// image element.
fn args(g: &Graph, seed: u64, exact: bool, nan_every: usize) -> Vec<Vec<f64>> {
    let set = [-1.5, -0.0, 0.0, 0.5, 2.0, 2.0, -2.0, 1.0, -0.5];
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s = s
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        s >> 33
    };
    g.param_types()
        .iter()
        .enumerate()
        .map(|(p, t)| {
            (0..t.numel())
                .map(|i| {
                    let v = next();
                    if p == 0 && nan_every > 0 && i % nan_every == 3 {
                        f64::NAN
                    } else if exact {
                        set[(v % set.len() as u64) as usize]
                    } else {
                        (v % 2001) as f64 / 1000.0 - 1.0
                    }
                })
                .collect()
        })
        .collect()
}

fn run(exe: &mut NativeExecutable, g: &Graph, args: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let be = NativeBackend::new();
    let mut bufs: Vec<_> = g
        .param_types()
        .iter()
        .zip(args)
        .map(|(t, v)| {
            let tensor = if t.dtype == DType::F32 {
                let v: Vec<f32> = v.iter().map(|&x| x as f32).collect();
                Tensor::from_vec(t.dims(), v).unwrap()
            } else {
                Tensor::from_vec(t.dims(), v.clone()).unwrap()
            };
            be.upload(&tensor).unwrap()
        })
        .collect();
    exe.execute(&mut bufs)
        .unwrap()
        .iter()
        .map(|b| {
            let t = be.download(b).unwrap();
            match t.dtype() {
                DType::F32 => t
                    .to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|&x| f64::from(x))
                    .collect(),
                _ => t.to_vec::<f64>().unwrap(),
            }
        })
        .collect()
}

/// `got` within `tol` of `want` relative to `want`'s largest magnitude (a sum's rounding
/// follows its terms, not its value, which cancellation can make small), NaN where
/// `want` is.
fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    let scale = want
        .iter()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    for (i, (&x, &y)) in got.iter().zip(want).enumerate() {
        let ok = if y.is_nan() {
            x.is_nan()
        } else {
            (x - y).abs() <= tol * (y.abs() + scale + 1e-30)
        };
        assert!(ok, "{what}: element {i} is {x}, want {y}");
    }
}

/// The direct f64 reference of `graph`'s outputs `[p, dk, db]` for finite arguments:
/// the first of equal maxima selected, the ReLU's gradient ½ at zero.
fn reference(c: &Case, a: &[Vec<f64>]) -> [Vec<f64>; 3] {
    let [n, h, w, cin] = c.input;
    let (k, co) = (c.k, c.cout);
    let (x, kw, bias, ct) = (&a[0], &a[1], &a[2], &a[3]);
    let p = &c.params;
    let out = |len: usize, d: usize| {
        let span = (len as i64 + p.padding[d].0 + p.padding[d].1
            - ((k - 1) * p.rhs_dilation[d] + 1) as i64)
            .div_euclid(p.strides[d] as i64)
            + 1;
        span.max(0) as usize
    };
    let (oh, ow) = (out(h, 0), out(w, 1));
    let pos = |o: usize, t: usize, d: usize| {
        (o * p.strides[d] + t * p.rhs_dilation[d]) as i64 - p.padding[d].0
    };
    // The pre-activation `a = conv + bias`.
    let mut pre = vec![0.0; n * oh * ow * co];
    for b in 0..n {
        for (i, j) in (0..oh).flat_map(|i| (0..ow).map(move |j| (i, j))) {
            for o in 0..co {
                let mut s = 0.0;
                for (ky, kx, ci) in
                    (0..k).flat_map(|a| (0..k).flat_map(move |b| (0..cin).map(move |c| (a, b, c))))
                {
                    let (py, px) = (pos(i, ky, 0), pos(j, kx, 1));
                    if py < 0 || px < 0 || py >= h as i64 || px >= w as i64 {
                        continue;
                    }
                    let xi = ((b * h + py as usize) * w + px as usize) * cin + ci;
                    s += x[xi] * kw[((ky * k + kx) * cin + ci) * co + o];
                }
                pre[((b * oh + i) * ow + j) * co + o] = s + bias[o];
            }
        }
    }
    let pw = &c.pool;
    let pdims = [n, oh, ow, co];
    let pooled = |len: usize, d: usize| {
        (len + pw.padding[d].0 + pw.padding[d].1 - pw.dims[d]) / pw.strides[d] + 1
    };
    let (ph, pwid) = (pooled(oh, 1), pooled(ow, 2));
    let mut pool = vec![f64::NEG_INFINITY; n * ph * pwid * co];
    let mut dy = vec![0.0; pre.len()];
    for b in 0..n {
        for (o, q) in (0..ph).flat_map(|o| (0..pwid).map(move |q| (o, q))) {
            for ch in 0..co {
                let mut best: Option<(f64, usize)> = None;
                for (di, dj) in (0..pw.dims[1]).flat_map(|a| (0..pw.dims[2]).map(move |b| (a, b))) {
                    let i = (o * pw.strides[1] + di) as i64 - pw.padding[1].0 as i64;
                    let j = (q * pw.strides[2] + dj) as i64 - pw.padding[2].0 as i64;
                    if i < 0 || j < 0 || i >= pdims[1] as i64 || j >= pdims[2] as i64 {
                        continue;
                    }
                    let at = ((b * oh + i as usize) * ow + j as usize) * co + ch;
                    let r = pre[at].max(0.0);
                    if best.is_none_or(|(v, _)| r > v) {
                        best = Some((r, at));
                    }
                }
                let po = ((b * ph + o) * pwid + q) * co + ch;
                if let Some((v, at)) = best {
                    pool[po] = v;
                    dy[at] += ct[po];
                }
            }
        }
    }
    for (d, &a) in dy.iter_mut().zip(&pre) {
        *d *= if a > 0.0 {
            1.0
        } else if a == 0.0 {
            0.5
        } else {
            0.0
        };
    }
    let mut dk = vec![0.0; k * k * cin * co];
    let mut db = vec![0.0; co];
    for b in 0..n {
        for (i, j) in (0..oh).flat_map(|i| (0..ow).map(move |j| (i, j))) {
            for o in 0..co {
                let d = dy[((b * oh + i) * ow + j) * co + o];
                db[o] += d;
                for (ky, kx, ci) in
                    (0..k).flat_map(|a| (0..k).flat_map(move |b| (0..cin).map(move |c| (a, b, c))))
                {
                    let (py, px) = (pos(i, ky, 0), pos(j, kx, 1));
                    if py < 0 || px < 0 || py >= h as i64 || px >= w as i64 {
                        continue;
                    }
                    let xi = ((b * h + py as usize) * w + px as usize) * cin + ci;
                    dk[((ky * k + kx) * cin + ci) * co + o] += x[xi] * d;
                }
            }
        }
    }
    [pool, dk, db]
}

/// Keras' `same` padding of a pooling.
fn same(len: usize, k: usize, s: usize) -> (usize, usize) {
    let out = len.div_ceil(s);
    let total = ((out - 1) * s + k).saturating_sub(len);
    (total / 2, total - total / 2)
}

fn cases() -> Vec<Case> {
    let two = window(2, 2, [(0, 0); 2]);
    vec![
        // The `cnn` workload's first layer, on fewer images (parallel).
        case([16, 28, 28, 1], 3, 32, two.clone()),
        // One image; odd sizes (a row and a column no window covers).
        case([1, 9, 11, 1], 3, 8, two.clone()),
        // An odd batch, two to four input features, features past the vectors.
        case([3, 10, 9, 2], 3, 13, two.clone()),
        case([5, 8, 8, 3], 2, 40, two.clone()),
        case([3, 9, 10, 4], 3, 6, two.clone()),
        // 3×3 windows of stride 3 (disjoint, not 2×2).
        case([2, 13, 14, 1], 3, 8, window(3, 3, [(0, 0); 2])),
        // `same` convolution and `same` pooling on odd sizes.
        case(
            [3, 11, 12, 2],
            3,
            5,
            window(2, 2, [same(11, 2, 2), same(12, 2, 2)]),
        )
        .conv(1, (1, 1), 1),
        // A strided, dilated, padded convolution; a padded pooling.
        case([2, 17, 15, 1], 3, 7, window(2, 2, [(1, 1), (1, 1)])).conv(2, (1, 2), 2),
        // A cropping (negative) padding.
        case([2, 12, 12, 1], 3, 9, two.clone()).conv(1, (-1, 0), 1),
        // One feature, 3×3, whole vectors of sixteen output features (the cotangent made
        // in registers): odd sizes with two and one vectors, a strided and dilated
        // convolution under a padded pooling, and gaps between the windows.
        case([3, 10, 13, 1], 3, 48, two),
        case([2, 17, 15, 1], 3, 16, window(2, 2, [(1, 1), (1, 1)])).conv(2, (0, 0), 2),
        case([2, 14, 14, 1], 3, 32, window(2, 3, [(0, 0); 2])),
    ]
}

#[test]
fn gradients_from_the_pooled_cotangent_match_the_unfused_plan() {
    for c in cases() {
        for extra in [Extra::Bias, Extra::None] {
            let g = graph(&c, extra, DType::F32);
            let (mut fused, count, text) = compile(&g, true);
            let (mut plain, none, _) = compile(&g, false);
            let want_count = if extra == Extra::Bias { 2 } else { 1 };
            assert_eq!(count, want_count, "{c:?} {extra:?}\n{text}");
            assert_eq!(none, 0);
            // The cotangent of the convolution's output is not computed.
            assert!(!text.contains("select_and_scatter_add"), "{text}");
            for (seed, exact, nan_every) in
                [(1, true, 0), (2, false, 0), (3, true, 7), (4, false, 0)]
            {
                let a = args(&g, seed, exact, nan_every);
                let (got, want) = (run(&mut fused, &g, &a), run(&mut plain, &g, &a));
                let what = format!("{c:?} {extra:?} seed {seed}");
                // The pooling is the same kernel either way.
                assert_eq!(
                    got[0].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    want[0].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{what}"
                );
                for k in 1..got.len() {
                    close(&got[k], &want[k], 1e-5, &format!("{what} output {k}"));
                }
            }
        }
    }
}

/// The fused kernels against the f64 reference, from the same (rounded) arguments.
#[test]
fn f32_gradients_from_the_pooled_cotangent_match_a_direct_f64_reference() {
    for c in cases() {
        let g = graph(&c, Extra::Bias, DType::F32);
        let (mut fused, count, text) = compile(&g, true);
        assert_eq!(count, 2, "{c:?}\n{text}");
        for (seed, exact) in [(10, true), (11, false)] {
            let a: Vec<Vec<f64>> = args(&g, seed, exact, 0)
                .into_iter()
                .map(|v| v.into_iter().map(|x| f64::from(x as f32)).collect())
                .collect();
            let got = run(&mut fused, &g, &a);
            let want = reference(&c, &a);
            for k in 1..3 {
                close(
                    &got[k],
                    &want[k],
                    1e-5,
                    &format!("{c:?} seed {seed} output {k}"),
                );
            }
        }
    }
}

#[test]
fn gradients_from_the_pooled_cotangent_are_the_same_on_one_thread() {
    for c in cases() {
        let g = graph(&c, Extra::Bias, DType::F32);
        let (mut fused, _, _) = compile(&g, true);
        let a = args(&g, 8, false, 0);
        let crew = run(&mut fused, &g, &a);
        let alone = crate::kernel::crew::serial(|| run(&mut fused, &g, &a));
        let bits = |v: &[Vec<f64>]| -> Vec<Vec<u64>> {
            v.iter()
                .map(|t| t.iter().map(|x| x.to_bits()).collect())
                .collect()
        };
        assert_eq!(bits(&crew), bits(&alone), "{c:?}");
    }
}

/// Where the unfused direct kernel gradient cuts the rows into the same parts (on one
/// thread, four tasks: at most four rows here), the kernel gradient is its bits, infinities
/// and NaNs of the image included.
#[test]
fn the_kernel_gradient_is_the_unfused_plans_bits_over_the_same_parts() {
    let two = window(2, 2, [(0, 0); 2]);
    for c in [
        case([1, 6, 9, 1], 3, 32, two.clone()),
        case([2, 4, 7, 3], 3, 13, two.clone()),
        case([1, 4, 6, 2], 3, 40, two.clone()).conv(1, (1, 1), 1),
        // The cotangent made in registers: two and one vectors of features and a column
        // no window covers; gaps and rows no window covers; a strided convolution under a
        // padded pooling (clipped windows); a dilated one.
        case([1, 6, 13, 1], 3, 48, two.clone()),
        case([1, 6, 14, 1], 3, 16, window(2, 3, [(0, 0); 2])),
        case([1, 9, 12, 1], 3, 16, window(2, 2, [(1, 1), (1, 1)])).conv(2, (0, 0), 1),
        case([1, 8, 12, 1], 3, 32, two).conv(1, (0, 0), 2),
    ] {
        let g = graph(&c, Extra::Bias, DType::F32);
        let (mut fused, count, text) = compile(&g, true);
        let (mut plain, _, _) = compile(&g, false);
        assert_eq!(count, 2, "{c:?}\n{text}");
        for (seed, exact, nan_every) in [(12, true, 0), (13, false, 0), (14, true, 5)] {
            let a = args(&g, seed, exact, nan_every);
            let got = crate::kernel::crew::serial(|| run(&mut fused, &g, &a));
            let want = crate::kernel::crew::serial(|| run(&mut plain, &g, &a));
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got[0]), bits(&want[0]), "{c:?} seed {seed}");
            assert_eq!(bits(&got[1]), bits(&want[1]), "{c:?} seed {seed}");
            close(&got[2], &want[2], 1e-5, &format!("{c:?} seed {seed} bias"));
        }
    }
}

/// An infinity that only pixels no window covers read (a gap between windows, a row
/// below the last window) multiplies their `+0` cotangent into NaN in the unfused plan's
/// kernel gradient; the fused one must make the same NaN, not skip those pixels.
#[test]
fn infinities_read_only_outside_the_windows_give_the_unfused_plans_nan() {
    // Conv output 4×12 under 2×2 windows of stride 3: rows 2 and 3 and columns 2, 5, 8
    // and 11 lie outside every window.
    let c = case([1, 6, 14, 1], 3, 16, window(2, 3, [(0, 0); 2]));
    let g = graph(&c, Extra::Bias, DType::F32);
    let (mut fused, count, text) = compile(&g, true);
    let (mut plain, _, _) = compile(&g, false);
    assert_eq!(count, 2, "{c:?}\n{text}");
    // Image column 2 of row 0 is tap (0, 0)'s input only at output pixel (0, 2), a gap;
    // image row 5 is kernel row 2's input only for output row 3, below the windows.
    for at in [2, 5 * 14 + 7] {
        let mut a = args(&g, 15, true, 0);
        a[0][at] = f64::INFINITY;
        let got = crate::kernel::crew::serial(|| run(&mut fused, &g, &a));
        let want = crate::kernel::crew::serial(|| run(&mut plain, &g, &a));
        assert!(want[1].iter().any(|v| v.is_nan()), "the case tests nothing");
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got[1]), bits(&want[1]), "infinity at {at}");
    }
}

#[test]
fn a_cotangent_read_elsewhere_is_still_computed() {
    let c = case([2, 10, 10, 1], 3, 8, window(2, 2, [(0, 0); 2]));
    // A later layer (the input gradient reads it), the cotangent returned, too many input
    // features, overlapping windows (their cotangent is no row's alone), `f64` (no direct
    // kernel gradient).
    let many = case([2, 10, 10, 8], 3, 8, window(2, 2, [(0, 0); 2]));
    let overlapping = case([2, 13, 13, 1], 3, 8, window(3, 2, [(0, 0); 2]));
    let dense = case([3, 9, 10, 4], 3, 6, window(3, 1, [(0, 0); 2]));
    for (c, extra, dtype) in [
        (&c, Extra::Input, DType::F32),
        (&c, Extra::Cotangent, DType::F32),
        (&many, Extra::Bias, DType::F32),
        (&overlapping, Extra::Bias, DType::F32),
        (&dense, Extra::Bias, DType::F32),
        (&c, Extra::Bias, DType::F64),
    ] {
        let g = graph(c, extra, dtype);
        let (mut fused, count, text) = compile(&g, true);
        assert_eq!(count, 0, "{c:?} {extra:?}\n{text}");
        assert!(text.contains("select_and_scatter_add"), "{text}");
        let (mut plain, _, _) = compile(&g, false);
        let a = args(&g, 9, false, 0);
        let (got, want) = (run(&mut fused, &g, &a), run(&mut plain, &g, &a));
        for (x, y) in got.iter().zip(&want) {
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(x), bits(y), "{c:?} {extra:?}");
        }
    }
}

/// A later layer whose convolution Winograd's tiles compute (many features): its kernel
/// and input gradients fill the tiles of the cotangent from the pooled one where they
/// read them, the unfused plan's bits (the same parts, the same transforms), on every
/// instruction set; the bias gradient within rounding.
#[test]
fn winograd_gradients_from_the_pooled_cotangent_are_the_unfused_plans_bits() {
    let pool = |k: usize| window(k, k, [(0, 0); 2]);
    let cases = [
        // The `cnn` workload's second layer: 4×4 tiles for both gradients, a row and a
        // column no window covers, several blocks and tasks.
        case([16, 13, 13, 32], 3, 64, pool(2)),
        // Windows as large as the tiles, features past the vectors (36: 32 and 4).
        case([2, 14, 14, 32], 3, 36, pool(4)),
        // Too many feature pairs for 4×4 tiles: 2×2 ones.
        case([2, 12, 11, 32], 3, 160, pool(2)),
    ];
    let check = |c: &Case, extra: Extra, want_count: usize| {
        let g = graph(c, extra, DType::F32);
        let (mut fused, count, text) = compile(&g, true);
        let (mut plain, _, _) = compile(&g, false);
        assert_eq!(count, want_count, "{c:?} {extra:?}\n{text}");
        assert!(!text.contains("select_and_scatter_add"), "{text}");
        for (seed, exact, nan_every) in [(16, true, 0), (17, false, 0), (18, true, 7)] {
            let a = args(&g, seed, exact, nan_every);
            let (got, want) = (run(&mut fused, &g, &a), run(&mut plain, &g, &a));
            let what = format!("{c:?} {extra:?} seed {seed}");
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for k in 0..got.len() {
                if k == 2 {
                    close(&got[k], &want[k], 1e-5, &format!("{what} bias"));
                } else {
                    assert_eq!(bits(&got[k]), bits(&want[k]), "{what} output {k}");
                }
            }
        }
    };
    for c in &cases {
        check(c, Extra::Input, 3);
        check(c, Extra::Bias, 2);
    }
    crate::kernel::simd::for_each_level(|_| check(&cases[1], Extra::Input, 3));
    // A `same` convolution without its input gradient (the kernel gradient's padded
    // input transform, the cotangent's tiles filled).
    let same = case([2, 12, 12, 32], 3, 48, pool(2)).conv(1, (1, 1), 1);
    check(&same, Extra::Bias, 2);
}

/// Where the input gradient does not run on the tiles of the cotangent (a `same`
/// convolution's: the forward form, over padded windows), or windows cross the tiles,
/// the cotangent is stored for it and the kernel gradient reads it too.
#[test]
fn winograd_gradients_across_the_tiles_read_the_stored_cotangent() {
    let two = window(2, 2, [(0, 0); 2]);
    let layer = case([2, 13, 13, 32], 3, 48, two.clone());
    for (c, extra, dtype) in [
        (
            case([2, 12, 12, 32], 3, 48, two.clone()).conv(1, (1, 1), 1),
            Extra::Input,
            DType::F32,
        ),
        (
            case([2, 13, 13, 32], 3, 48, window(3, 3, [(0, 0); 2])),
            Extra::Input,
            DType::F32,
        ),
        (
            case([2, 13, 13, 32], 3, 48, window(2, 2, [(1, 0), (1, 0)])),
            Extra::Input,
            DType::F32,
        ),
        // Gaps between the windows.
        (
            case([2, 13, 13, 32], 3, 48, window(2, 3, [(0, 0); 2])),
            Extra::Input,
            DType::F32,
        ),
        // The cotangent returned; f64.
        (layer.clone(), Extra::Cotangent, DType::F32),
        (layer, Extra::Input, DType::F64),
    ] {
        let g = graph(&c, extra, dtype);
        let (mut fused, count, text) = compile(&g, true);
        assert_eq!(count, 0, "{c:?} {extra:?} {dtype}\n{text}");
        assert!(text.contains("select_and_scatter_add"), "{text}");
        let (mut plain, _, _) = compile(&g, false);
        let a = args(&g, 19, false, 0);
        let (got, want) = (run(&mut fused, &g, &a), run(&mut plain, &g, &a));
        for (x, y) in got.iter().zip(&want) {
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(x), bits(y), "{c:?} {extra:?} {dtype}");
        }
    }
}
