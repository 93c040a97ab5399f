//! Statistics over alternating rounds: medians and paired ratios. Adjacent rounds share the
//! host's state of the moment, so the ratio of a round pair is steadier than the ratio of two
//! medians when the host drifts.

/// The median (upper median for even lengths) of `v`; `v` must not be empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

/// `ours[i] / base[i]` for every round both have.
pub fn pair_ratios(ours: &[f64], base: &[f64]) -> Vec<f64> {
    ours.iter().zip(base).map(|(a, b)| a / b).collect()
}

/// The largest value of `v`, or 0 for an empty `v`.
pub fn best(v: &[f64]) -> f64 {
    v.iter().cloned().fold(0.0, f64::max)
}

/// Values in packets per second as millions.
pub fn mpps(v: &[f64]) -> Vec<f64> {
    v.iter().map(|p| p / 1e6).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_is_the_middle_of_the_sorted_values() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 3.0);
        assert_eq!(median(&[5.0]), 5.0);
    }

    #[test]
    fn pairs_divide_round_by_round() {
        assert_eq!(pair_ratios(&[2.0, 9.0], &[4.0, 3.0]), vec![0.5, 3.0]);
        assert_eq!(pair_ratios(&[2.0, 9.0], &[4.0]), vec![0.5]);
        assert_eq!(best(&[1.0, 7.0, 3.0]), 7.0);
        assert_eq!(best(&[]), 0.0);
        assert_eq!(mpps(&[2.5e6]), vec![2.5]);
    }
}
