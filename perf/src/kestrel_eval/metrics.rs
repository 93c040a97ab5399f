//! Scores: AUPRC (average precision: the precision at each positive, averaged over the
//! positives, ties taken together), F1 at a threshold, the best-F1 threshold.

/// Average precision of `scores` against `labels` (scikit-learn's `average_precision_score`):
/// `sum_n (R_n - R_{n-1}) P_n` over the distinct thresholds, highest first.
pub fn auprc(scores: &[f64], labels: &[bool]) -> f64 {
    let pos = labels.iter().filter(|&&l| l).count();
    if pos == 0 {
        return f64::NAN;
    }
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let (mut tp, mut fp, mut ap, mut last_r) = (0usize, 0usize, 0.0, 0.0);
    let mut i = 0;
    while i < idx.len() {
        let s = scores[idx[i]];
        while i < idx.len() && scores[idx[i]] == s {
            if labels[idx[i]] {
                tp += 1;
            } else {
                fp += 1;
            }
            i += 1;
        }
        let r = tp as f64 / pos as f64;
        let p = tp as f64 / (tp + fp) as f64;
        ap += (r - last_r) * p;
        last_r = r;
    }
    ap
}

/// (precision, recall, F1) of `score >= thr`.
pub fn f1_at(scores: &[f64], labels: &[bool], thr: f64) -> (f64, f64, f64) {
    let (mut tp, mut fp, mut fneg) = (0f64, 0f64, 0f64);
    for (&s, &l) in scores.iter().zip(labels) {
        match (s >= thr, l) {
            (true, true) => tp += 1.0,
            (true, false) => fp += 1.0,
            (false, true) => fneg += 1.0,
            _ => {}
        }
    }
    let p = if tp + fp > 0.0 { tp / (tp + fp) } else { 0.0 };
    let r = if tp + fneg > 0.0 {
        tp / (tp + fneg)
    } else {
        0.0
    };
    let f = if p + r > 0.0 {
        2.0 * p * r / (p + r)
    } else {
        0.0
    };
    (p, r, f)
}

/// Precision-recall curve points (recall, precision), highest threshold first.
pub fn pr_curve(scores: &[f64], labels: &[bool]) -> Vec<(f64, f64)> {
    let pos = labels.iter().filter(|&&l| l).count().max(1) as f64;
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let (mut tp, mut fp) = (0f64, 0f64);
    let mut out = Vec::new();
    for (n, &i) in idx.iter().enumerate() {
        if labels[i] {
            tp += 1.0;
        } else {
            fp += 1.0;
        }
        let last = n + 1 == idx.len() || scores[idx[n + 1]] != scores[i];
        if last {
            out.push((tp / pos, tp / (tp + fp)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_precision_matches_a_hand_computed_case() {
        // sklearn: average_precision_score([0,0,1,1], [0.1,0.4,0.35,0.8]) = 0.8333...
        let ap = auprc(&[0.1, 0.4, 0.35, 0.8], &[false, false, true, true]);
        assert!((ap - 0.833_333_333_333_333_4).abs() < 1e-12, "{ap}");
        let (p, r, f) = f1_at(&[0.1, 0.4, 0.35, 0.8], &[false, false, true, true], 0.35);
        assert_eq!((p, r), (2.0 / 3.0, 1.0));
        assert!((f - 0.8).abs() < 1e-12);
    }
}
