use super::*;

/// Spread values with a large common offset, so that a one-pass variance would lose it.
fn values(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let u = ((i as u64).wrapping_mul(2654435761) % 1_000_003) as f32 / 1_000_003.0;
            100.0 + (u - 0.5) * 10f32.powi((i % 5) as i32 - 2)
        })
        .collect()
}

/// The statistics in f64, element by element over the index space.
fn reference(x: &[f32], dims: &[usize], axes: &[usize]) -> (Vec<f64>, Vec<f64>) {
    let keep = kept(dims.len(), axes);
    let k: usize = keep.iter().map(|&d| dims[d]).product();
    let mut sum = vec![0.0f64; k];
    let mut sq = vec![0.0f64; k];
    let mut cnt = vec![0usize; k];
    let at = |i: usize| {
        // The kept multi-index of flat element i, as a flat index into the kept dims.
        let mut rem = i;
        let mut idx = vec![0; dims.len()];
        for d in (0..dims.len()).rev() {
            idx[d] = rem % dims[d];
            rem /= dims[d];
        }
        keep.iter().fold(0, |o, &d| o * dims[d] + idx[d])
    };
    for (i, &v) in x.iter().enumerate() {
        sum[at(i)] += v as f64;
        cnt[at(i)] += 1;
    }
    let mean: Vec<f64> = sum.iter().zip(&cnt).map(|(s, &c)| s / c as f64).collect();
    for (i, &v) in x.iter().enumerate() {
        let d = v as f64 - mean[at(i)];
        sq[at(i)] += d * d;
    }
    let var = sq.iter().zip(&cnt).map(|(s, &c)| s / c as f64).collect();
    (mean, var)
}

fn stats(x: &[f32], dims: &[usize], axes: &[usize]) -> Vec<f32> {
    let k: usize = kept(dims.len(), axes).iter().map(|&d| dims[d]).product();
    let mut out = vec![f32::NAN; 2 * k];
    run(x, dims, axes, &mut out);
    out
}

#[test]
fn every_layout_matches_the_f64_statistics() {
    for (dims, axes) in [
        // Channels last (batch normalization): columns, split in parts, two column blocks.
        (vec![64, 13, 13, 32], vec![0, 1, 2]),
        (vec![4099, 300], vec![0]),
        // Outer runs and inner columns (batch normalization over axis 1 of rank 3).
        (vec![5, 7, 33, 3], vec![1, 2]),
        (vec![5, 700, 33], vec![1]),
        // Channels first: kept, reduced, kept, reduced, so the walk.
        (vec![5, 7, 33, 3], vec![0, 2]),
        // Rows (layer normalization), split over tasks when large.
        (vec![600, 777], vec![1]),
        (vec![3, 5, 6], vec![1, 2]),
        // Neither: the walk.
        (vec![4, 5, 6, 7], vec![0, 2]),
        (vec![2, 3, 4], vec![1]),
        // Everything, and nothing.
        (vec![5000], vec![0]),
        (vec![3, 4], vec![]),
        (vec![1, 9, 1], vec![0, 2]),
    ] {
        let n: usize = dims.iter().product();
        let x = values(n);
        let got = stats(&x, &dims, &axes);
        let (mean, var) = reference(&x, &dims, &axes);
        let k = mean.len();
        for j in 0..k {
            let (m, v) = (got[j] as f64, got[k + j] as f64);
            assert!(
                (m - mean[j]).abs() <= 1e-5 * mean[j].abs(),
                "{dims:?} {axes:?} mean {j}: {m} vs {}",
                mean[j]
            );
            assert!(
                (v - var[j]).abs() <= 1e-3 * var[j] + 1e-9,
                "{dims:?} {axes:?} var {j}: {v} vs {}",
                var[j]
            );
        }
    }
}

#[test]
fn the_bits_do_not_depend_on_the_threads() {
    for (dims, axes) in [
        (vec![128, 26, 26, 32], vec![0, 1, 2]),
        (vec![2000, 300], vec![1]),
    ] {
        let x = values(dims.iter().product());
        let with_crew = stats(&x, &dims, &axes);
        let alone = crew::serial(|| stats(&x, &dims, &axes));
        let bits = |v: &[f32]| v.iter().map(|e| e.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&with_crew), bits(&alone), "{dims:?}");
    }
}

#[test]
fn statistics_over_no_elements_are_nan() {
    let got = stats(&[], &[0, 3], &[0]);
    assert_eq!(got.len(), 6);
    assert!(got.iter().all(|v| v.is_nan()), "{got:?}");
    let got = stats(&[], &[3, 0], &[1]);
    assert!(got.iter().all(|v| v.is_nan()), "{got:?}");
}
