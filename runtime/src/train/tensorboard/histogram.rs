//! Histogram buckets as TensorBoard's `tf.summary.histogram` makes them.

/// TensorBoard's default bucket count.
pub(crate) const DEFAULT_BUCKETS: usize = 30;

/// `count` rows of `[left edge, right edge, count]`: equal-width buckets from the least to
/// the greatest value, the greatest counted in the last bucket. With no data every row is
/// zeros; when all values are equal every edge is that value and the last bucket holds
/// them all (TensorBoard's edge cases).
pub(crate) fn buckets(data: &[f64], count: usize) -> Vec<[f64; 3]> {
    let mut rows = vec![[0.0; 3]; count];
    if count == 0 || data.is_empty() {
        return rows;
    }
    let (min, max) = data
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    let range = max - min;
    if range == 0.0 {
        rows.fill([min, min, 0.0]);
        rows[count - 1][2] = data.len() as f64;
        return rows;
    }
    let width = range / count as f64;
    for &v in data {
        let i = (((v - min) / width).floor() as usize).min(count - 1);
        rows[i][2] += 1.0;
    }
    // numpy's linspace: min + i·step, the last edge exactly max.
    let step = range / count as f64;
    for (i, r) in rows.iter_mut().enumerate() {
        r[0] = min + i as f64 * step;
        r[1] = if i + 1 == count {
            max
        } else {
            min + (i + 1) as f64 * step
        };
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_the_range_and_count_every_value() {
        let data: Vec<f64> = (0..10).map(f64::from).collect();
        // As TensorBoard's `histogram_pb` gives them.
        let want = vec![[0.0, 3.0, 3.0], [3.0, 6.0, 3.0], [6.0, 9.0, 4.0]];
        assert_eq!(buckets(&data, 3), want);
    }

    #[test]
    fn edge_cases_as_tensorboard() {
        assert_eq!(buckets(&[], 2), vec![[0.0; 3]; 2]);
        assert_eq!(
            buckets(&[1.5, 1.5], 2),
            vec![[1.5, 1.5, 0.0], [1.5, 1.5, 2.0]]
        );
    }
}
