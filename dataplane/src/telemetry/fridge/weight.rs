//! The fridge's correction factor (section 3.2.1, Eq. 3.1 and Lemma 3.1) and the per-sample
//! variance weight of the multi-fridge estimator (section 4.2, Eq. 4.7).

/// What `x`, the count stamped in a slot and subtracted at the response, counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XMode {
    /// Insertions into this fridge. Each insertion evicts a given entry with probability
    /// `1/M`, so the survival probability is `p (1 - 1/M)^x` and the factor
    /// `p^-1 (1 - 1/M)^-x`. The seed's section 6 prototype (its CTR register counts inserted
    /// requests) and its public Tofino code use this; it is the default.
    #[default]
    Insertions,
    /// Every request offered to the fridge set, entered or not. Each one evicts a given entry
    /// with probability `p/M`: factor `p^-1 (1 - p/M)^-x`, the seed's Eq. 3.1 text.
    Requests,
}

/// The correction factor of one fridge as a function of `x`, precomputed so a sample costs
/// one `exp`: `w(x) = p^-1 exp(-x ln(1 - q))` with `q = 1/M` or `p/M`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weigher {
    inv_p: f64,
    /// `-ln(1 - q)` (>= 0).
    rate: f64,
}

impl Weigher {
    /// For a fridge of `m >= 1` slots entered with probability `p` in `(0, 1]`.
    pub fn new(m: u32, p: f64, mode: XMode) -> Weigher {
        let q = match mode {
            XMode::Insertions => 1.0 / f64::from(m),
            XMode::Requests => p / f64::from(m),
        };
        // M = 1 with q = 1 would make every survivor infinitely heavy: the seed requires
        // M >= 2 (section 3.3); configuration refuses M < 2, this keeps the math finite.
        let q = q.min(0.5);
        Weigher {
            inv_p: 1.0 / p,
            rate: -(-q).ln_1p(),
        }
    }

    /// The correction factor `1/q(x)` of a sample that survived `x` counts.
    #[inline]
    pub fn weight(&self, x: u64) -> f64 {
        self.inv_p * (self.rate * x as f64).exp()
    }

    /// `p^-1` (the factor at x = 0).
    pub fn inv_p(&self) -> f64 {
        self.inv_p
    }

    /// `-ln(1 - q)`: the per-count growth rate of `ln w`.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The largest `x` whose weight stays at or below `cap` (for range tables).
    pub fn x_at_most(&self, cap: f64) -> u64 {
        if cap < self.inv_p {
            return 0;
        }
        if self.rate == 0.0 {
            return u64::MAX;
        }
        let x = ((cap / self.inv_p).ln() / self.rate).floor();
        if x >= u64::MAX as f64 {
            u64::MAX
        } else {
            x as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1.0)
    }

    #[test]
    fn insertions_formula_by_hand() {
        // p = 1/4, M = 8: w(x) = 4 * (7/8)^-x.
        let w = Weigher::new(8, 0.25, XMode::Insertions);
        assert!(close(w.weight(0), 4.0));
        assert!(close(w.weight(1), 4.0 * 8.0 / 7.0)); // 4.571428...
        assert!(close(w.weight(2), 4.0 * 64.0 / 49.0)); // 5.224489...
        assert!(close(w.weight(10), 4.0 * (8.0f64 / 7.0).powi(10)));
        assert!(close(w.weight(10), 15.204_756_208_569_615));
    }

    #[test]
    fn requests_formula_by_hand() {
        // p = 1/4, M = 8: q = p/M = 1/32, w(x) = 4 * (31/32)^-x.
        let w = Weigher::new(8, 0.25, XMode::Requests);
        assert!(close(w.weight(0), 4.0));
        assert!(close(w.weight(1), 4.0 * 32.0 / 31.0)); // 4.129032...
        assert!(close(w.weight(3), 4.0 * (32.0f64 / 31.0).powi(3)));
        // p = 1: both formulas agree.
        let a = Weigher::new(16, 1.0, XMode::Requests);
        let b = Weigher::new(16, 1.0, XMode::Insertions);
        assert!(close(a.weight(37), b.weight(37)));
    }

    #[test]
    fn lifetime_weight_is_about_e_over_p() {
        // Section 3.3: at x = M/p (requests), w ~ e/p for large M.
        let (m, p) = (1u32 << 16, 1.0 / 64.0);
        let w = Weigher::new(m, p, XMode::Requests);
        let x = (f64::from(m) / p) as u64;
        let r = w.weight(x) / (std::f64::consts::E / p);
        assert!((r - 1.0).abs() < 1e-4, "{r}");
    }

    #[test]
    fn x_at_most_inverts_weight() {
        let w = Weigher::new(1 << 10, 0.5, XMode::Insertions);
        for cap in [2.0, 3.0, 100.0, 16_777_216.0] {
            let x = w.x_at_most(cap);
            assert!(w.weight(x) <= cap * (1.0 + 1e-12));
            assert!(w.weight(x + 1) > cap);
        }
        assert_eq!(w.x_at_most(1.0), 0);
    }
}
