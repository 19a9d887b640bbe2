//! The Winograd tiles against the convolution's and the kernel gradient's definitions
//! (f64 and f32) over odd sizes, every kind of padding and feature counts that are not
//! a multiple of the transforms' lanes; and the bits' independence of the batch (for the
//! forward) and of the thread count (for the kernel gradient).

use super::super::conv_native::tests::{geometry, numbers, reference, reference_kernel_grad, Case};
use super::super::conv_native::{self, Geometry, Method};
use super::f4::F4;
use super::F2;
use crate::ir::ConvParams;
use crate::kernel::real::Real;

/// A 3×3, stride-1 convolution of `batch` images `input` with padding `pad` per axis.
fn case(
    batch: usize,
    input: [usize; 2],
    (cin, cout): (usize, usize),
    pad: [(i64, i64); 2],
) -> Option<(Geometry, ConvParams)> {
    geometry(&Case {
        batch,
        input: input.to_vec(),
        kernel: vec![3, 3],
        cin,
        cout,
        groups: 1,
        strides: vec![1; 2],
        padding: pad.to_vec(),
        lhs_dilation: vec![1; 2],
        rhs_dilation: vec![1; 2],
    })
}

fn cases() -> Vec<(Geometry, ConvParams)> {
    let mut all = Vec::new();
    let mut i = 0usize;
    for input in [[1, 1], [2, 3], [4, 4], [5, 7], [8, 9], [13, 6]] {
        for pad in [(0, 0), (1, 1), (2, 2), (1, 0), (0, 2), (-1, 2)] {
            for features in [(1, 1), (3, 5), (16, 16), (17, 9), (9, 20)] {
                i += 1;
                let batch = 1 + i % 3;
                // lopsided per axis too: the second axis takes the next padding
                if let Some(c) = case(batch, input, features, [pad, (pad.1, pad.0)]) {
                    all.push(c);
                }
            }
        }
    }
    all
}

fn to_f32(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

fn abs(v: &[f64]) -> Vec<f64> {
    v.iter().map(|x| x.abs()).collect()
}

/// Whether an f32 result is within rounding of the definition: a few units in the last
/// place of the sum of the terms' magnitudes (`scale`) for F(2×2); for F(4×4) (`four`)
/// ten times that, its transforms' coefficients (up to 8 and 5 per axis, and ⅙ in the
/// kernel's) making its rounding some ten times larger.
fn within(four: bool, got: f32, want: f64, scale: f64) -> bool {
    let tolerance = if four { 1e-5 } else { 1e-6 };
    (got as f64 - want).abs() <= tolerance * (1.0 + scale)
}

/// A way to compute the convolution: the planner's (`Method::Winograd`), or the forward's
/// or the scatter form's tiles of an edge.
#[derive(Clone, Copy, Debug)]
enum Way {
    Chosen,
    Forward(usize),
    Scatter(usize),
}

const WAYS: [Way; 5] = [
    Way::Chosen,
    Way::Forward(2),
    Way::Forward(4),
    Way::Scatter(2),
    Way::Scatter(4),
];

impl Way {
    /// Whether this way takes tiles of edge 4.
    fn four(self, tiles: &super::Tiles) -> bool {
        match self {
            Way::Chosen => tiles.choice().0 == 4,
            Way::Forward(e) | Way::Scatter(e) => e == 4,
        }
    }

    /// `out = conv(x, w)` this way, with a scratch of stale values.
    fn run<T: Real>(
        self,
        geo: &Geometry,
        p: &ConvParams,
        x: &[T],
        w: &[T],
        out: &mut [T],
    ) -> crate::Result<()> {
        self.run_in(geo, p, x, w, out, &mut vec![T::nan(); 5])
    }

    fn run_in<T: Real>(
        self,
        geo: &Geometry,
        p: &ConvParams,
        x: &[T],
        w: &[T],
        out: &mut [T],
        scratch: &mut Vec<T>,
    ) -> crate::Result<()> {
        let two = conv_native::winograd(geo, p).expect("3×3, stride 1");
        let four = super::Tiles { edge: 4, ..two };
        match self {
            Way::Chosen => conv_native::run(Method::Winograd, x, w, geo, p, out, scratch),
            Way::Forward(2) => super::forward::<T, F2>(&two, x, w, out, scratch),
            Way::Forward(_) => super::forward::<T, F4>(&four, x, w, out, scratch),
            Way::Scatter(2) => super::scatter::<T, F2>(&two, x, w, out, scratch),
            Way::Scatter(_) => super::scatter::<T, F4>(&four, x, w, out, scratch),
        }
    }
}

/// The kernel gradient by tiles of `edge`, or as chosen (`None`).
fn kernel_grad<T: Real>(
    edge: Option<usize>,
    tiles: &super::Tiles,
    x: &[T],
    ct: &[T],
    out: &mut [T],
) -> crate::Result<()> {
    kernel_grad_in(edge, tiles, x, ct, out, &mut vec![T::nan(); 3])
}

fn kernel_grad_in<T: Real>(
    edge: Option<usize>,
    tiles: &super::Tiles,
    x: &[T],
    ct: &[T],
    out: &mut [T],
    scratch: &mut Vec<T>,
) -> crate::Result<()> {
    let four = super::Tiles { edge: 4, ..*tiles };
    match edge {
        None => super::kernel_grad(tiles, x, ct, out, scratch),
        Some(2) => super::kernel_grad_by::<T, F2>(tiles, x, ct, out, scratch),
        Some(_) => super::kernel_grad_by::<T, F4>(&four, x, ct, out, scratch),
    }
}

/// Every way (the forward's and the scatter form's tiles of either edge, and the method as
/// the planner runs it) against the definition.
#[test]
fn the_tiles_match_the_convolution() {
    let cases = cases();
    assert!(cases.len() > 120, "only {} cases", cases.len());
    for (i, (geo, p)) in cases.iter().enumerate() {
        let x = numbers(
            geo.batch * geo.in_sp[0] * geo.in_sp[1] * geo.cin,
            2 * i as u64,
        );
        let w = numbers(9 * geo.cin * geo.cout, 2 * i as u64 + 1);
        let want = reference(&x, &w, geo, p);
        let scale = reference(&abs(&x), &abs(&w), geo, p);
        let (x32, w32) = (to_f32(&x), to_f32(&w));
        let tiles = conv_native::winograd(geo, p).unwrap();
        for way in WAYS {
            let mut got = vec![f64::NAN; want.len()];
            way.run(geo, p, &x, &w, &mut got).unwrap();
            for (j, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-12,
                    "case {i} {geo:?} {way:?} element {j}: {a} vs {b}"
                );
            }
            let mut got = vec![f32::NAN; want.len()];
            way.run(geo, p, &x32, &w32, &mut got).unwrap();
            for (j, &a) in got.iter().enumerate() {
                assert!(
                    within(way.four(&tiles), a, want[j], scale[j]),
                    "case {i} {way:?} f32 element {j}: {a} vs {}",
                    want[j]
                );
            }
        }
    }
}

#[test]
fn the_tiles_match_the_kernel_gradient() {
    for (i, (geo, p)) in cases().iter().enumerate() {
        let x = numbers(
            geo.batch * geo.in_sp[0] * geo.in_sp[1] * geo.cin,
            3 * i as u64,
        );
        let nout = geo.out_sp[0] * geo.out_sp[1];
        let ct = numbers(geo.batch * nout * geo.cout, 3 * i as u64 + 1);
        let want = reference_kernel_grad(&x, &ct, geo, p);
        let scale = reference_kernel_grad(&abs(&x), &abs(&ct), geo, p);
        let tiles = conv_native::winograd(geo, p).expect("3×3, stride 1");
        for edge in [None, Some(2), Some(4)] {
            let mut got = vec![f64::NAN; want.len()];
            kernel_grad(edge, &tiles, &x, &ct, &mut got).unwrap();
            for (j, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-12,
                    "case {i} {geo:?} edge {edge:?} element {j}: {a} vs {b}"
                );
            }
            let four = edge.map_or(tiles.gradient_four(), |e| e == 4);
            let mut got = vec![f32::NAN; want.len()];
            let (x32, ct32) = (to_f32(&x), to_f32(&ct));
            kernel_grad(edge, &tiles, &x32, &ct32, &mut got).unwrap();
            for (j, &a) in got.iter().enumerate() {
                assert!(
                    within(four, a, want[j], scale[j]),
                    "case {i} edge {edge:?} f32 element {j}: {a} vs {}",
                    want[j]
                );
            }
        }
    }
}

/// The scatter form over paddings that place its windows off the even grid, lopsided,
/// negative, different per axis, and an output larger on one axis only.
#[test]
fn the_scattered_tiles_match_the_convolution() {
    let cases = [
        ([4, 6], [(1, 2), (1, 2)]),
        ([5, 4], [(3, 0), (2, 2)]),
        ([4, 5], [(-1, 4), (3, 1)]),
        ([4, 4], [(2, 2), (1, 1)]),
        ([3, 8], [(2, 3), (0, 0)]),
        ([1, 1], [(2, 2), (2, 2)]),
        ([2, 7], [(4, 1), (2, 2)]),
    ];
    for (i, (input, pad)) in cases.into_iter().enumerate() {
        // features across the vector paths: 16 at a time, then 8, then one
        let (geo, p) = case(2, input, (27, 25), pad).unwrap();
        let tiles = conv_native::winograd(&geo, &p).unwrap();
        assert!(
            tiles.scatter_tiles() < tiles.forward_tiles(),
            "case {i}: {input:?} {pad:?}"
        );
        let x = numbers(geo.batch * input[0] * input[1] * geo.cin, 40 + i as u64);
        let w = numbers(9 * geo.cin * geo.cout, 50 + i as u64);
        let want = reference(&x, &w, &geo, &p);
        let scale = reference(&abs(&x), &abs(&w), &geo, &p);
        let (x32, w32) = (to_f32(&x), to_f32(&w));
        for way in [Way::Chosen, Way::Scatter(2), Way::Scatter(4)] {
            let mut got = vec![f64::NAN; want.len()];
            way.run(&geo, &p, &x, &w, &mut got).unwrap();
            for (j, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-12,
                    "case {i} {way:?} element {j}: {a} vs {b}"
                );
            }
            let mut got = vec![f32::NAN; want.len()];
            way.run(&geo, &p, &x32, &w32, &mut got).unwrap();
            for (j, &a) in got.iter().enumerate() {
                assert!(
                    within(way.four(&tiles), a, want[j], scale[j]),
                    "case {i} {way:?} f32 element {j}: {a} vs {}",
                    want[j]
                );
            }
        }
    }
}

/// The scatter form with blocks that end inside an image, by tiles of either edge: the
/// same bits on one thread as on the crew, and for an image alone as in the batch.
#[test]
fn the_scattered_bits_do_not_depend_on_the_batch_or_the_cores() {
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    for (batch, (cin, cout), four) in [(3, (128, 128), false), (8, (32, 64), true)] {
        let (geo, p) = case(batch, [16, 16], (cin, cout), [(2, 2); 2]).unwrap();
        let tiles = conv_native::winograd(&geo, &p).unwrap();
        let (edge, scatters) = tiles.choice();
        assert!(scatters && tiles.pays());
        assert_eq!(edge == 4, four);
        // the even rows' phase takes several blocks, so several tasks
        let taken = super::Tiles { edge, ..tiles };
        let [ih, iw] = taken.input_grid();
        assert!(batch * ih.div_ceil(2) > taken.block_of(batch * ih * iw) / iw);
        let x = to_f32(&numbers(batch * 256 * cin, 31));
        let w = to_f32(&numbers(9 * cin * cout, 32));
        let image = 18 * 18 * cout;
        let run = |geo: &Geometry, x: &[f32]| {
            let mut y = vec![f32::NAN; geo.batch * image];
            conv_native::run(Method::Winograd, x, &w, geo, &p, &mut y, &mut Vec::new()).unwrap();
            y
        };
        let all = run(&geo, &x);
        let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let wd: Vec<f64> = w.iter().map(|&v| v as f64).collect();
        let (want, scale) = (
            reference(&xd, &wd, &geo, &p),
            reference(&abs(&xd), &abs(&wd), &geo, &p),
        );
        for (j, &a) in all.iter().enumerate() {
            assert!(
                within(four, a, want[j], scale[j]),
                "element {j}: {a} vs {}",
                want[j]
            );
        }
        let serial = crate::kernel::crew::serial(|| run(&geo, &x));
        assert_eq!(bits(&serial), bits(&all), "thread-dependent");
        let mut one = geo;
        one.batch = 1;
        let last = batch - 1;
        let alone = run(&one, &x[last * 256 * cin..]);
        assert_eq!(bits(&alone), bits(&all[last * image..]), "batch-dependent");
    }
}

/// Shapes of several blocks of tiles (and so several tasks, and several parts of a
/// kernel gradient), on which the native planner picks this method; and whether the
/// convolution and its kernel gradient take tiles of edge 4.
fn large() -> Vec<((Geometry, ConvParams), bool, bool)> {
    [
        (case(9, [13, 13], (32, 32), [(1, 1); 2]), false, false),
        (case(4, [11, 12], (64, 48), [(0, 0); 2]), false, false),
        (case(7, [9, 9], (40, 33), [(2, 2); 2]), false, true),
        // the `cnn` workload's second layer and its input gradient
        (case(6, [13, 13], (32, 64), [(0, 0); 2]), true, true),
        (case(16, [11, 11], (64, 32), [(2, 2); 2]), true, false),
    ]
    .into_iter()
    .map(|(c, four, grad_four)| (c.unwrap(), four, grad_four))
    .collect()
}

#[test]
fn large_convolutions_take_the_tiles_and_match() {
    for (i, ((geo, p), four, grad_four)) in large().iter().enumerate() {
        assert_eq!(conv_native::choose(geo, p), Method::Winograd, "case {i}");
        let tiles = conv_native::winograd(geo, p).unwrap();
        assert!(tiles.count() > tiles.block(), "case {i}: one block only");
        let (edge, scatters) = tiles.choice();
        assert_eq!(edge == 4, *four, "case {i}");
        assert_eq!(tiles.gradient_four(), *grad_four, "case {i}");
        // the full padding of an input gradient scatters from the input's tiles
        assert_eq!(scatters, p.padding[0] == (2, 2), "case {i}");
        // several blocks at the edge taken, and several parts of the kernel gradient
        let chosen = super::Tiles { edge, ..tiles };
        assert!(chosen.count() > chosen.block(), "case {i}: one block only");
        let grad = super::Tiles {
            edge: if *grad_four { 4 } else { 2 },
            ..tiles
        };
        assert!(grad.count() > grad.block(), "case {i}: one part only");
        let x = to_f32(&numbers(
            geo.batch * geo.in_sp[0] * geo.in_sp[1] * geo.cin,
            5 + i as u64,
        ));
        let w = to_f32(&numbers(9 * geo.cin * geo.cout, 6 + i as u64));
        let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let wd: Vec<f64> = w.iter().map(|&v| v as f64).collect();
        let want = reference(&xd, &wd, geo, p);
        let scale = reference(&abs(&xd), &abs(&wd), geo, p);
        let mut got = vec![f32::NAN; want.len()];
        conv_native::run(Method::Winograd, &x, &w, geo, p, &mut got, &mut Vec::new()).unwrap();
        for (j, &a) in got.iter().enumerate() {
            assert!(
                within(*four, a, want[j], scale[j]),
                "case {i} element {j}: {a} vs {}",
                want[j]
            );
        }
        // Each image's outputs are its own, whatever else is in the batch.
        let image = geo.in_sp[0] * geo.in_sp[1] * geo.cin;
        let out_image = want.len() / geo.batch;
        let mut one = *geo;
        one.batch = 1;
        let mut alone = vec![f32::NAN; out_image];
        let last = geo.batch - 1;
        let x_last = &x[last * image..(last + 1) * image];
        conv_native::run(
            Method::Winograd,
            x_last,
            &w,
            &one,
            p,
            &mut alone,
            &mut Vec::new(),
        )
        .unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&alone),
            bits(&got[last * out_image..]),
            "case {i}: batch-dependent"
        );

        // The kernel gradient through `conv_native::kernel_grad`, the same bits on one
        // thread as on the crew.
        let nout = geo.out_sp[0] * geo.out_sp[1];
        let ct = to_f32(&numbers(geo.batch * nout * geo.cout, 7 + i as u64));
        let ctd: Vec<f64> = ct.iter().map(|&v| v as f64).collect();
        let want = reference_kernel_grad(&xd, &ctd, geo, p);
        let scale = reference_kernel_grad(&abs(&xd), &abs(&ctd), geo, p);
        let mut got = vec![f32::NAN; want.len()];
        conv_native::kernel_grad(&x, &ct, geo, p, &mut got, &mut Vec::new()).unwrap();
        for (j, &a) in got.iter().enumerate() {
            assert!(
                within(*grad_four, a, want[j], scale[j]),
                "case {i} dw {j}: {a} vs {}",
                want[j]
            );
        }
        let mut serial = vec![f32::NAN; want.len()];
        crate::kernel::crew::serial(|| {
            conv_native::kernel_grad(&x, &ct, geo, p, &mut serial, &mut Vec::new())
        })
        .unwrap();
        assert_eq!(bits(&serial), bits(&got), "case {i}: thread-dependent");
    }
}

/// The vector paths (16 features at a time, then 8, then one) give the scalar path's
/// bits, on every level this CPU has.
#[test]
fn every_level_gives_the_same_bits() {
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    for (geo, p) in [
        case(2, [7, 8], (29, 27), [(1, 1), (0, 2)]),
        case(3, [6, 5], (40, 27), [(2, 2); 2]),
    ]
    .into_iter()
    .flatten()
    {
        let x = to_f32(&numbers(
            geo.batch * geo.in_sp[0] * geo.in_sp[1] * geo.cin,
            11,
        ));
        let w = to_f32(&numbers(9 * geo.cin * geo.cout, 12));
        let nout = geo.out_sp[0] * geo.out_sp[1];
        let ct = to_f32(&numbers(geo.batch * nout * geo.cout, 13));
        let tiles = conv_native::winograd(&geo, &p).unwrap();
        let mut first: Option<Vec<Vec<u32>>> = None;
        crate::kernel::simd::for_each_level(|level| {
            let mut got = Vec::new();
            for way in WAYS {
                let mut y = vec![f32::NAN; geo.batch * nout * geo.cout];
                way.run(&geo, &p, &x, &w, &mut y).unwrap();
                got.push(bits(&y));
            }
            for edge in [2, 4] {
                let mut dw = vec![f32::NAN; w.len()];
                kernel_grad(Some(edge), &tiles, &x, &ct, &mut dw).unwrap();
                got.push(bits(&dw));
            }
            match &first {
                None => first = Some(got),
                Some(f) => assert!(*f == got, "{level:?}: other bits than the widest level"),
            }
        });
    }
}

/// The forward by each edge of tiles, stored (`forward`) and emitted tile by tile
/// (`forward_emitting`, the tiles' pixels inside the output put back in place): every
/// tile emitted once, the same bits, at every level, in f32 and f64.
#[test]
fn emitted_tiles_are_the_stored_forward() {
    fn check<T: Real + Send + Sync>(geo: &Geometry, p: &ConvParams, key: fn(T) -> u64) {
        let x: Vec<T> = numbers(geo.batch * geo.in_sp[0] * geo.in_sp[1] * geo.cin, 21)
            .iter()
            .map(|&v| T::from(v).unwrap())
            .collect();
        let w: Vec<T> = numbers(9 * geo.cin * geo.cout, 22)
            .iter()
            .map(|&v| T::from(v).unwrap())
            .collect();
        let two = conv_native::winograd(geo, p).expect("3×3, stride 1");
        let ([oh, ow], cout) = (two.output, two.cout);
        let len = geo.batch * oh * ow * cout;
        for edge in [2, 4] {
            let tiles = super::Tiles { edge, ..two };
            crate::kernel::simd::for_each_level(|level| {
                let mut want = vec![T::nan(); len];
                let mut scratch = vec![T::nan(); 5];
                match edge {
                    2 => super::forward::<T, F2>(&tiles, &x, &w, &mut want, &mut scratch),
                    _ => super::forward::<T, F4>(&tiles, &x, &w, &mut want, &mut scratch),
                }
                .unwrap();
                let got = std::sync::Mutex::new((vec![T::nan(); len], Vec::new()));
                let emit = |pixels: &[T], (b, oy, ox): (usize, usize, usize)| {
                    let mut got = got.lock().unwrap();
                    got.1.push((b, oy, ox));
                    for (i, px) in pixels.chunks_exact(cout).enumerate() {
                        let (y, xx) = (oy + i / edge, ox + i % edge);
                        if y < oh && xx < ow {
                            let at = ((b * oh + y) * ow + xx) * cout;
                            got.0[at..at + cout].copy_from_slice(px);
                        }
                    }
                    true
                };
                let mut scratch = vec![T::nan(); 5];
                match edge {
                    2 => super::forward_emitting::<T, F2>(&tiles, &x, &w, &mut scratch, &emit),
                    _ => super::forward_emitting::<T, F4>(&tiles, &x, &w, &mut scratch, &emit),
                }
                .unwrap();
                let (got, mut origins) = got.into_inner().unwrap();
                let count = origins.len();
                origins.sort_unstable();
                origins.dedup();
                assert_eq!((count, origins.len()), (tiles.count(), tiles.count()));
                let (got, want): (Vec<u64>, Vec<u64>) = (
                    got.into_iter().map(key).collect(),
                    want.into_iter().map(key).collect(),
                );
                assert!(got == want, "{level:?} edge {edge} {geo:?}: other bits");
            });
        }
    }
    for (geo, p) in [
        // Odd sizes, tiles past the edge, features past the vectors.
        case(3, [13, 11], (33, 37), [(0, 0); 2]),
        // Lopsided padding; many tiles, over every core.
        case(5, [12, 9], (16, 24), [(1, 0), (2, 1)]),
    ]
    .into_iter()
    .flatten()
    {
        check::<f32>(&geo, &p, |v| u64::from(v.to_bits()));
        check::<f64>(&geo, &p, f64::to_bits);
    }
}

/// The kernel gradient and the scatter form reading their cotangent's (input's) tiles
/// as a filler hands them over (here: copied from the stored array, zeros past its
/// edge) against reading the stored array: the same bits, at every level, in f32 and
/// f64, over several blocks and parts.
#[test]
fn filled_tiles_are_the_stored_cotangent() {
    /// A filler of `a` (`[batch, h, w, features]`) by tiles of `edge`.
    fn filler<T: Real>(
        a: &[T],
        [h, w, features]: [usize; 3],
        edge: usize,
    ) -> impl Fn(&mut [T], (usize, usize, usize)) -> bool + Sync + '_ {
        move |tile: &mut [T], (b, y0, x0): (usize, usize, usize)| {
            if tile.len() != edge * edge * features {
                return false;
            }
            for (p, px) in tile.chunks_exact_mut(features).enumerate() {
                let (y, x) = (y0 + p / edge, x0 + p % edge);
                match y < h && x < w {
                    true => px.copy_from_slice(&a[((b * h + y) * w + x) * features..][..features]),
                    false => px.fill(T::zero()),
                }
            }
            true
        }
    }
    fn check<T: Real + Send + Sync>(geo: &Geometry, p: &ConvParams, key: fn(T) -> u64) {
        let data = |len: usize, seed: u64| -> Vec<T> {
            numbers(len, seed)
                .iter()
                .map(|&v| T::from(v).unwrap())
                .collect()
        };
        let (nin, nout) = (geo.in_sp[0] * geo.in_sp[1], geo.out_sp[0] * geo.out_sp[1]);
        let x = data(geo.batch * nin * geo.cin, 31);
        let w = data(9 * geo.cin * geo.cout, 32);
        let ct = data(geo.batch * nout * geo.cout, 33);
        let tiles = conv_native::winograd(geo, p).expect("3×3, stride 1");
        let keys = |v: Vec<T>| v.into_iter().map(key).collect::<Vec<_>>();
        crate::kernel::simd::for_each_level(|level| {
            let what = format!("{level:?} {geo:?}");
            if let Some(edge) = super::gradient_edge(&tiles) {
                let (mut want, mut got) = (vec![T::nan(); w.len()], vec![T::nan(); w.len()]);
                super::kernel_grad(&tiles, &x, &ct, &mut want, &mut vec![T::nan(); 5]).unwrap();
                let [oh, ow] = tiles.output;
                let fill = filler(&ct, [oh, ow, geo.cout], edge);
                let s = &mut vec![T::nan(); 5];
                super::kernel_grad_filled(&tiles, &x, &fill, &mut got, s).unwrap();
                assert!(keys(got) == keys(want), "kernel gradient {what}");
            }
            if let Some(edge) = super::filled_edge(&tiles) {
                let len = geo.batch * nout * geo.cout;
                let (mut want, mut got) = (vec![T::nan(); len], vec![T::nan(); len]);
                super::conv2d(&tiles, &x, &w, &mut want, &mut vec![T::nan(); 5]).unwrap();
                let fill = filler(&x, [geo.in_sp[0], geo.in_sp[1], geo.cin], edge);
                super::conv2d_filled(&tiles, &fill, &w, &mut got, &mut vec![T::nan(); 5]).unwrap();
                assert!(keys(got) == keys(want), "scatter form {what}");
            }
        });
    }
    let cases = [
        // The `cnn` workload's second layer's gradients (4×4 tiles, several blocks and
        // tasks): its input gradient's convolution (full padding, the scatter form) and
        // its kernel gradient.
        case(16, [11, 11], (64, 32), [(2, 2); 2]),
        case(16, [13, 13], (32, 64), [(0, 0); 2]),
        // 2×2 tiles (too many feature pairs for 4×4), odd sizes, features past the
        // vectors.
        case(3, [10, 9], (160, 33), [(2, 2); 2]),
        case(3, [12, 11], (33, 160), [(0, 0); 2]),
    ];
    for (geo, p) in cases.into_iter().flatten() {
        check::<f32>(&geo, &p, |v| u64::from(v.to_bits()));
        check::<f64>(&geo, &p, f64::to_bits);
    }
}

/// The `cnn` workload's second convolution, its input gradient and its kernel gradient,
/// and layers of other shapes, by each method and each edge of tiles, fastest of 20
/// (`cargo test --release -p strata-runtime --lib time_winograd -- --ignored --nocapture`).
#[test]
#[ignore]
fn time_winograd() {
    let time = |f: &mut dyn FnMut()| {
        f();
        (0..20)
            .map(|_| {
                let t = std::time::Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            })
            .fold(f64::INFINITY, f64::min)
    };
    for (name, geo, p) in [
        ("forward", case(128, [13, 13], (32, 64), [(0, 0); 2])),
        ("input gradient", case(128, [11, 11], (64, 32), [(2, 2); 2])),
        (
            "same 32x32x16->16",
            case(32, [32, 32], (16, 16), [(1, 1); 2]),
        ),
        (
            "same 28x28x32->32",
            case(32, [28, 28], (32, 32), [(1, 1); 2]),
        ),
        (
            "same 14x14x64->64",
            case(32, [14, 14], (64, 64), [(1, 1); 2]),
        ),
        (
            "same 28x28x64->64",
            case(16, [28, 28], (64, 64), [(1, 1); 2]),
        ),
        (
            "same 16x16x96->96",
            case(16, [16, 16], (96, 96), [(1, 1); 2]),
        ),
        ("same 8x8x64->128", case(32, [8, 8], (64, 128), [(1, 1); 2])),
        (
            "same 7x7x128->128",
            case(32, [7, 7], (128, 128), [(1, 1); 2]),
        ),
        (
            "same 4x4x256->256",
            case(32, [4, 4], (256, 256), [(1, 1); 2]),
        ),
        (
            "valid 6x6x16->128",
            case(64, [6, 6], (16, 128), [(0, 0); 2]),
        ),
    ]
    .map(|(n, c)| {
        let (g, p) = c.unwrap();
        (n, g, p)
    }) {
        let x = to_f32(&numbers(
            geo.batch * geo.in_sp[0] * geo.in_sp[1] * geo.cin,
            1,
        ));
        let w = to_f32(&numbers(9 * geo.cin * geo.cout, 2));
        let mut out = vec![0f32; geo.batch * geo.out_sp[0] * geo.out_sp[1] * geo.cout];
        let mut scratch = Vec::new();
        for method in [Method::Winograd, Method::Im2colBlocks, Method::Gather] {
            if method == Method::Gather && geo.out_sp[0] <= geo.in_sp[0] {
                continue;
            }
            let ms = time(&mut || {
                conv_native::run(method, &x, &w, &geo, &p, &mut out, &mut scratch).unwrap()
            });
            println!("{name} {method:?}: {ms:.3} ms");
        }
        let tiles = conv_native::winograd(&geo, &p).unwrap();
        for edge in [2, 4] {
            let way = match tiles.choice().1 {
                true => Way::Scatter(edge),
                false => Way::Forward(edge),
            };
            let ms = time(&mut || {
                way.run_in(&geo, &p, &x, &w, &mut out, &mut scratch)
                    .unwrap()
            });
            println!("{name} {way:?}: {ms:.3} ms");
        }
        if name.starts_with("same") || name == "forward" {
            let ct = to_f32(&numbers(out.len(), 3));
            let mut dw = vec![0f32; 9 * geo.cin * geo.cout];
            for edge in [2, 4] {
                let ms = time(&mut || {
                    kernel_grad_in(Some(edge), &tiles, &x, &ct, &mut dw, &mut scratch).unwrap()
                });
                println!("{name} kernel gradient, tiles of edge {edge}: {ms:.3} ms");
            }
            let ms = time(&mut || {
                conv_native::kernel_grad_blocks(&x, &ct, &geo, &p, &mut dw, &mut scratch).unwrap()
            });
            println!("{name} kernel gradient im2col: {ms:.3} ms");
        }
    }
}

/// Empty batches, outputs and feature counts compute empty or zero results, never
/// panicking; an infinity only a dropped output would read leaves the kernel gradient
/// finite.
#[test]
fn edge_shapes() {
    let near = |a: f32, b: f32| (a - b).abs() <= 1e-5 * (1.0 + b.abs());
    // Every form of tiles on all-ones operands: the forward and the scatter form give 9
    // per input feature everywhere; the kernel gradients of both edges agree.
    let run = |t: super::Tiles| {
        let x = vec![1.0f32; t.batch * t.input[0] * t.input[1] * t.cin];
        let w = vec![1.0f32; 9 * t.cin * t.cout];
        let ct = vec![1.0f32; t.batch * t.output[0] * t.output[1] * t.cout];
        let mut grads: Vec<Vec<f32>> = Vec::new();
        for edge in [2, 4] {
            let g = super::Tiles { edge, ..t };
            let s = &mut Vec::new();
            let (mut y, mut z) = (vec![f32::NAN; ct.len()], vec![f32::NAN; ct.len()]);
            let mut dw = vec![f32::NAN; w.len()];
            match edge {
                2 => {
                    super::forward::<_, F2>(&g, &x, &w, &mut y, s).unwrap();
                    super::scatter::<_, F2>(&g, &x, &w, &mut z, s).unwrap();
                    super::kernel_grad_by::<_, F2>(&g, &x, &ct, &mut dw, s).unwrap();
                }
                _ => {
                    super::forward::<_, F4>(&g, &x, &w, &mut y, s).unwrap();
                    super::scatter::<_, F4>(&g, &x, &w, &mut z, s).unwrap();
                    super::kernel_grad_by::<_, F4>(&g, &x, &ct, &mut dw, s).unwrap();
                }
            }
            let nine = 9.0 * t.cin as f32;
            assert!(y.iter().all(|&v| near(v, nine)), "{g:?}: {y:?}");
            assert!(z.iter().all(|&v| near(v, nine)), "{g:?}: {z:?}");
            grads.push(dw);
        }
        assert_eq!(grads[0].len(), grads[1].len());
        assert!(grads[0].iter().zip(&grads[1]).all(|(&a, &b)| near(b, a)));
        let mut dw = vec![f32::NAN; w.len()];
        super::kernel_grad(&t, &x, &ct, &mut dw, &mut Vec::new()).unwrap();
        dw
    };
    let t = |batch, cin, cout, input: [usize; 2]| super::Tiles {
        batch,
        input,
        cin,
        cout,
        output: [input[0] - 2, input[1] - 2],
        pad: [0, 0],
        edge: 2,
    };
    assert_eq!(run(t(0, 3, 4, [5, 5])), vec![0.0; 108]);
    assert!(run(t(2, 0, 4, [5, 5])).is_empty());
    assert!(run(t(2, 3, 0, [5, 5])).is_empty());
    assert!(run(t(0, 0, 0, [5, 5])).is_empty());
    assert_eq!(
        run(t(1, 2, 2, [2, 3])),
        Vec::<f32>::new()
            .into_iter()
            .chain([0.0; 36])
            .collect::<Vec<_>>()
    );
    assert!(run(t(2, 2, 3, [7, 9])).iter().all(|&v| v == 70.0));

    // A 5-wide output of an 8-wide input cut one column short (high padding −1): the
    // last tile's window (of either edge) holds input column 7, which no kept output
    // reads.
    let g = super::Tiles {
        batch: 1,
        input: [3, 8],
        cin: 1,
        cout: 1,
        output: [1, 5],
        pad: [0, 0],
        edge: 2,
    };
    let mut x = vec![1.0f32; 24];
    for row in 0..3 {
        x[row * 8 + 7] = f32::INFINITY;
    }
    let mut dw = vec![f32::NAN; 9];
    super::kernel_grad_by::<_, F2>(&g, &x, &[1.0; 5], &mut dw, &mut Vec::new()).unwrap();
    assert_eq!(dw, vec![5.0; 9]);
    let g = super::Tiles { edge: 4, ..g };
    super::kernel_grad_by::<_, F4>(&g, &x, &[1.0; 5], &mut dw, &mut Vec::new()).unwrap();
    assert!(dw.iter().all(|&v| near(v, 5.0)), "{dw:?}");
}

#[test]
fn the_vector_paths_take_whole_vectors() {
    use crate::kernel::simd::Level;
    assert_eq!(super::vector_features::<f32>(Level::Avx512, 61), (48, 56));
    assert_eq!(super::vector_features::<f32>(Level::Avx2, 61), (0, 56));
    assert_eq!(super::vector_features::<f32>(Level::Baseline, 61), (0, 0));
    assert_eq!(super::vector_features::<f64>(Level::Avx512, 61), (0, 0));
}

/// One block's products deep enough for the matrix product to split them along their
/// depth over the cores (when run off the crew) still give each image's own bits.
#[test]
fn a_single_block_does_not_depend_on_the_batch() {
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    let (geo, p) = case(4, [6, 6], (256, 256), [(0, 0); 2]).unwrap();
    let tiles = conv_native::winograd(&geo, &p).unwrap();
    assert!(tiles.count() <= tiles.block(), "one block");
    let x = to_f32(&numbers(4 * 36 * 256, 21));
    let w = to_f32(&numbers(9 * 256 * 256, 22));
    let mut all = vec![f32::NAN; 4 * 16 * 256];
    conv_native::run(
        Method::Winograd,
        &x,
        &w,
        &geo,
        &p,
        &mut all,
        &mut Vec::new(),
    )
    .unwrap();
    let mut one = geo;
    one.batch = 1;
    let mut alone = vec![f32::NAN; 16 * 256];
    let last = &x[3 * 36 * 256..];
    conv_native::run(
        Method::Winograd,
        last,
        &w,
        &one,
        &p,
        &mut alone,
        &mut Vec::new(),
    )
    .unwrap();
    assert_eq!(bits(&alone), bits(&all[3 * 16 * 256..]));
}
