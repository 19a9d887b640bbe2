//! The native backend's large kernels, which are split across cores: a matrix product,
//! a fused elementwise chain and an in-place state update, against plain Rust.

use strata_runtime::backend::native::NativeBackend;
use strata_runtime::backend::{Backend, CompileOptions};
use strata_runtime::ir::{DType, DotDims, Graph, TensorType};
use strata_runtime::{random, Tensor};

fn t(dims: &[usize], seed: u64) -> Tensor {
    Tensor::F32(random::normal(dims, 0.0, 1.0, seed).unwrap())
}

#[test]
fn large_matmul_matches_a_plain_loop() {
    let (m, k, n) = (96, 300, 200);
    let (a, b) = (t(&[m, k], 1), t(&[k, n], 2));
    let mut g = Graph::new("mm");
    let (pa, pb) = (g.parameter(a.ty()), g.parameter(b.ty()));
    let c = g.dot_general(pa, pb, DotDims::matmul()).unwrap();
    // A transposed operand too: xT·y with x [k, m].
    let at = t(&[k, m], 3);
    let pt = g.parameter(at.ty());
    let dims = DotDims {
        lhs_batch: vec![],
        rhs_batch: vec![],
        lhs_contract: vec![0],
        rhs_contract: vec![0],
    };
    let d = g.dot_general(pt, pb, dims).unwrap();
    // Few columns: split by rows instead.
    let b_narrow = t(&[k, 3], 6);
    let pn = g.parameter(b_narrow.ty());
    let e = g.dot_general(pa, pn, DotDims::matmul()).unwrap();
    g.set_outputs(vec![c, d, e]).unwrap();
    let out = NativeBackend::new()
        .run(&g, &[a.clone(), b.clone(), at.clone(), b_narrow.clone()])
        .unwrap();
    let (a, b, at, bn) = (
        a.to_vec::<f32>().unwrap(),
        b.to_vec::<f32>().unwrap(),
        at.to_vec::<f32>().unwrap(),
        b_narrow.to_vec::<f32>().unwrap(),
    );
    let (c, d, e) = (
        out[0].to_vec::<f32>().unwrap(),
        out[1].to_vec::<f32>().unwrap(),
        out[2].to_vec::<f32>().unwrap(),
    );
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k)
                .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                .sum();
            let want_t: f64 = (0..k)
                .map(|p| at[p * m + i] as f64 * b[p * n + j] as f64)
                .sum();
            assert!((c[i * n + j] as f64 - want).abs() < 1e-3, "c[{i},{j}]");
            assert!((d[i * n + j] as f64 - want_t).abs() < 1e-3, "d[{i},{j}]");
        }
        for j in 0..3 {
            let want: f64 = (0..k)
                .map(|p| a[i * k + p] as f64 * bn[p * 3 + j] as f64)
                .sum();
            assert!((e[i * 3 + j] as f64 - want).abs() < 1e-3, "e[{i},{j}]");
        }
    }
}

/// Every size class of the f32 product: below and above the register tile, the packing
/// blocks (k past 256, m past 144, n past 2048) and the thread splits (by rows, by columns,
/// and along k for a short product through a deep operand), with each operand
/// read row- and column-major (B in place or packed).
#[test]
fn matmul_shapes_sweep() {
    let shapes = [
        (1, 1, 1),
        (5, 3, 7),
        (12, 8, 32),
        (13, 300, 33),
        (150, 513, 70),
        (31, 64, 129),
        (200, 40, 3),
        (32, 784, 128),
        (20, 1001, 60),
        (150, 20, 2100),
    ];
    for (i, &(m, k, n)) in shapes.iter().enumerate() {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            // Stored transposed when t: A as [k, m], B as [n, k].
            let a = t(&if ta { [k, m] } else { [m, k] }, 10 + i as u64);
            let b = t(&if tb { [n, k] } else { [k, n] }, 20 + i as u64);
            let mut g = Graph::new("mm");
            let (pa, pb) = (g.parameter(a.ty()), g.parameter(b.ty()));
            let dims = DotDims {
                lhs_batch: vec![],
                rhs_batch: vec![],
                lhs_contract: vec![if ta { 0 } else { 1 }],
                rhs_contract: vec![if tb { 1 } else { 0 }],
            };
            let c = g.dot_general(pa, pb, dims).unwrap();
            g.set_outputs(vec![c]).unwrap();
            let out = NativeBackend::new()
                .run(&g, &[a.clone(), b.clone()])
                .unwrap();
            let (av, bv, cv) = (
                a.to_vec::<f32>().unwrap(),
                b.to_vec::<f32>().unwrap(),
                out[0].to_vec::<f32>().unwrap(),
            );
            for r in 0..m {
                for col in 0..n {
                    let want: f64 = (0..k)
                        .map(|p| {
                            let x = if ta { av[p * m + r] } else { av[r * k + p] };
                            let y = if tb { bv[col * k + p] } else { bv[p * n + col] };
                            x as f64 * y as f64
                        })
                        .sum();
                    let got = cv[r * n + col] as f64;
                    assert!(
                        (got - want).abs() < 1e-4 * (k as f64).sqrt().max(1.0),
                        "{m}x{k}x{n} ta={ta} tb={tb} [{r},{col}]: {got} vs {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn large_fused_chain_and_in_place_update() {
    let n = 100_003; // not a multiple of the chunk size or of the number of cores
    let (w, gr) = (t(&[n], 4), t(&[n], 5));
    let mut g = Graph::new("update");
    let pw = g.parameter(w.ty());
    let pg = g.parameter(gr.ty());
    let lr = g.parameter(TensorType::scalar(DType::F32));
    // max(w - lr * g / sqrt(g^2 + 1e-3), -1) updates w in place; |w| is read beside it.
    let g2 = g.mul(pg, pg).unwrap();
    let e = g.add_scalar(g2, 1e-3).unwrap();
    let s = g.sqrt(e).unwrap();
    let r = g.div(pg, s).unwrap();
    let step = g.mul(r, lr).unwrap();
    let nw = g.sub(pw, step).unwrap();
    let floor = g.full_like(-1.0, nw).unwrap();
    let nw = g.max(nw, floor).unwrap();
    let aw = g.abs(pw).unwrap();
    g.set_outputs(vec![nw, aw]).unwrap();
    let b = NativeBackend::new();
    let mut exe = b
        .compile(
            &g,
            &CompileOptions {
                updates: vec![(0, 0)],
            },
        )
        .unwrap();
    let mut args = vec![
        b.upload(&w).unwrap(),
        b.upload(&gr).unwrap(),
        b.upload(&Tensor::scalar(0.5f32)).unwrap(),
    ];
    let mut wv = w.to_vec::<f32>().unwrap();
    let gv = gr.to_vec::<f32>().unwrap();
    for _ in 0..3 {
        let out = exe.execute(&mut args).unwrap();
        let abs = b.download(&out[0]).unwrap().to_vec::<f32>().unwrap();
        for i in 0..n {
            assert_eq!(
                abs[i],
                wv[i].abs(),
                "|w|[{i}] must be read before the in-place write"
            );
            wv[i] = (wv[i] - gv[i] / (gv[i] * gv[i] + 1e-3).sqrt() * 0.5).max(-1.0);
        }
        let got = b.download(&args[0]).unwrap().to_vec::<f32>().unwrap();
        for i in 0..n {
            assert!(
                (got[i] - wv[i]).abs() <= 1e-6 * (1.0 + wv[i].abs()),
                "w[{i}]: {} vs {}",
                got[i],
                wv[i]
            );
        }
        wv = got;
    }
}

/// A batch-32 forward product is split along k across the cores; its shares are added in
/// task order, so the result is the same bits on every call, whichever thread ran (or
/// stole) which share.
#[test]
fn a_product_split_along_k_gives_the_same_bits_every_call() {
    let (a, b) = (t(&[32, 784], 7), t(&[784, 128], 8));
    let mut g = Graph::new("mm");
    let (pa, pb) = (g.parameter(a.ty()), g.parameter(b.ty()));
    let c = g.dot_general(pa, pb, DotDims::matmul()).unwrap();
    g.set_outputs(vec![c]).unwrap();
    let be = NativeBackend::new();
    let mut exe = be.compile(&g, &CompileOptions::default()).unwrap();
    let mut args = vec![be.upload(&a).unwrap(), be.upload(&b).unwrap()];
    let first = be
        .download(&exe.execute(&mut args).unwrap()[0])
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    for _ in 0..200 {
        let again = be
            .download(&exe.execute(&mut args).unwrap()[0])
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert!(
            first
                .iter()
                .zip(&again)
                .all(|(x, y)| x.to_bits() == y.to_bits()),
            "a call's product differs from the first call's"
        );
    }
}
