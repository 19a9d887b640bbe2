use super::*;

/// A sum over `[red, inner]`'s rows as the single pass computes it.
fn serial_rows(x: &[f32], inner: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; inner];
    for row in x.chunks_exact(inner) {
        for (a, &v) in out.iter_mut().zip(row) {
            *a += v;
        }
    }
    out
}

fn values(n: usize) -> Vec<f32> {
    // Magnitudes spread over six decades, both signs, so the order of the additions shows.
    (0..n)
        .map(|i| {
            let u = ((i as u64).wrapping_mul(2654435761) % 1_000_003) as f32 / 1_000_003.0;
            (u - 0.5) * 10f32.powi((i % 7) as i32 - 3)
        })
        .collect()
}

#[test]
fn a_large_sum_is_split_in_parts_fixed_by_its_shape() {
    for (red, inner) in [(86_528, 32), (4_099, 64), (70_000, 3), (1 << 14, 256)] {
        let x = values(red * inner);
        let dims = [red, inner];
        let mut out = vec![f32::NAN; inner];
        run(ReduceOp::Sum, &x, &dims, &[0], &mut out);
        // The same bits with the crew as on one thread.
        let mut alone = vec![f32::NAN; inner];
        crate::kernel::crew::serial(|| run(ReduceOp::Sum, &x, &dims, &[0], &mut alone));
        assert_eq!(
            out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            alone.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "[{red}, {inner}]"
        );
        // The parts: each summed alone, then added in order.
        let parts = (red * inner / SPLIT_MIN).min(SPLIT_PARTS).min(red);
        assert!(parts >= 2, "[{red}, {inner}] is not split");
        let mut want = vec![0.0f32; inner];
        for p in 0..parts {
            let r = crate::kernel::crew::part(red, parts, p);
            let sums = serial_rows(&x[r.start * inner..r.end * inner], inner);
            for (a, s) in want.iter_mut().zip(sums) {
                *a += s;
            }
        }
        assert_eq!(out, want, "[{red}, {inner}]");
        // And close to the exact sum.
        for (j, &o) in out.iter().enumerate() {
            let exact: f64 = (0..red).map(|i| f64::from(x[i * inner + j])).sum();
            let scale: f64 = (0..red).map(|i| f64::from(x[i * inner + j]).abs()).sum();
            assert!(
                (f64::from(o) - exact).abs() <= 1e-5 * scale,
                "[{red}, {inner}] {j}"
            );
        }
    }
}

#[test]
fn small_or_wide_sums_stay_one_pass() {
    for (red, inner) in [(100, 32), (1 << 12, 512), (1 << 17, 1)] {
        let x = values(red * inner);
        let mut out = vec![f32::NAN; inner];
        assert!(!split_sum(&x, red, inner, &mut out));
        run(ReduceOp::Sum, &x, &[red, inner], &[0], &mut out);
        if inner > 1 {
            assert_eq!(out, serial_rows(&x, inner));
        }
    }
}

#[test]
fn integer_sums_split_exactly() {
    let (red, inner) = (50_000, 8);
    let x: Vec<i64> = (0..red * inner)
        .map(|i| (i as i64 * 7919) % 1000 - 500)
        .collect();
    let mut out = vec![0i64; inner];
    run(ReduceOp::Sum, &x, &[red, inner], &[0], &mut out);
    for (j, &o) in out.iter().enumerate() {
        assert_eq!(o, (0..red).map(|i| x[i * inner + j]).sum::<i64>());
    }
}

#[test]
fn nan_and_infinity_reach_a_split_sum() {
    let (red, inner) = (40_000, 16);
    let mut x = values(red * inner);
    x[12_345 * inner + 3] = f32::NAN;
    x[39_999 * inner + 5] = f32::INFINITY;
    let mut out = vec![0.0f32; inner];
    run(ReduceOp::Sum, &x, &[red, inner], &[0], &mut out);
    assert!(out[3].is_nan());
    assert_eq!(out[5], f32::INFINITY);
    assert!(out
        .iter()
        .enumerate()
        .all(|(j, v)| j == 3 || j == 5 || v.is_finite()));
}
