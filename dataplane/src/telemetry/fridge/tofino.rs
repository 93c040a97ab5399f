//! The Tofino-compatible approximation of a fridge (section 6.2), for the P4 twin: the entry
//! probability is a power of two (a compare of a random number's top bits), the correction
//! factor comes from a prefix-match table on `x` whose integer factors start at `1/p` and grow
//! in 1.1x steps (capped at 2^24; beyond the cap the factor is 0: the sample is invalid and
//! counted, not tallied), and delays go into 32 bins by `floor(log2(delay_ns))`.
//!
//! [`RangeTable::generate`] builds the table from `(M, p, XMode)`; `peregrinectl fridge
//! p4-table` prints it for the P4 program. Boundaries between factors sit exactly where the
//! exact factor crosses the geometric mean of the two neighbouring factors, and each range is
//! expanded into its minimal prefix cover. (The seed's example rules, `[0, 7*2^11)` -> 2 and
//! `[7*2^11, 9*2^12)` -> 3, round boundaries to a few significant bits to save TCAM entries;
//! at large `x` that rounding merges neighbouring 1.1x levels, so we keep exact boundaries
//! and pay with more prefixes, about 20 per range.)

use super::weight::{Weigher, XMode};

/// Largest factor the table emits (the seed's cap).
pub const FACTOR_CAP: u32 = 1 << 24;
/// Step between successive factors.
pub const STEP: f64 = 1.1;
/// Delay bins of the prototype's histogram.
pub const LOG2_BINS: usize = 32;

/// `p` rounded to the nearest power of two (in log space), as the data plane can compare
/// against; the exponent `e` with `p = 2^-e`, `e` in 0..=31.
pub fn pow2_p(p: f64) -> u32 {
    (-p.log2()).round().clamp(0.0, 31.0) as u32
}

/// The 32-bin log2 histogram index of a delay.
#[inline]
pub const fn log2_bin(delay_ns: u64) -> usize {
    if delay_ns == 0 {
        return 0;
    }
    let b = 63 - delay_ns.leading_zeros() as usize;
    if b >= LOG2_BINS {
        LOG2_BINS - 1
    } else {
        b
    }
}

/// One ternary rule: `x` matches when its top `len` bits (of 32) equal `value`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub value: u32,
    pub len: u8,
    pub factor: u32,
}

/// A contiguous range of x with its factor (before prefix expansion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// `[lo, hi]` inclusive.
    pub lo: u32,
    pub hi: u32,
    pub factor: u32,
}

/// The generated correction-factor table for one fridge.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeTable {
    pub p_exp: u32,
    pub m: u32,
    pub ranges: Vec<Range>,
    pub rules: Vec<Rule>,
}

/// The minimal prefix cover of `[lo, hi]` (inclusive) in 32-bit space.
pub fn prefixes(lo: u32, hi: u32, factor: u32, out: &mut Vec<Rule>) {
    let (mut lo, hi) = (u64::from(lo), u64::from(hi));
    while lo <= hi {
        // Largest aligned block starting at lo that fits.
        let mut size = if lo == 0 {
            1u64 << 32
        } else {
            lo & lo.wrapping_neg()
        };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        out.push(Rule {
            value: lo as u32,
            len: (32 - size.trailing_zeros()) as u8,
            factor,
        });
        lo += size;
    }
}

impl RangeTable {
    /// The table for a fridge of `m` slots entered with probability `2^-p_exp`.
    pub fn generate(m: u32, p_exp: u32, mode: XMode) -> RangeTable {
        let p = (-(f64::from(p_exp))).exp2();
        let w = Weigher::new(m, p, mode);
        let mut levels = vec![1u64 << p_exp];
        while let Some(&c) = levels.last() {
            let next = ((c as f64 * STEP).round() as u64).max(c + 1);
            if next > u64::from(FACTOR_CAP) {
                break;
            }
            levels.push(next);
        }
        let mut ranges = Vec::new();
        let mut lo = 0u64;
        for (j, &c) in levels.iter().enumerate() {
            // Up to where the exact factor is nearer (in log) to c than to the next level;
            // the last level runs to where the exact factor passes the cap.
            let edge = match levels.get(j + 1) {
                Some(&n) => w.x_at_most(((c * n) as f64).sqrt()).saturating_add(1),
                None => w.x_at_most(f64::from(FACTOR_CAP)).saturating_add(1),
            }
            .min(1 << 32);
            if edge > lo {
                ranges.push(Range {
                    lo: lo as u32,
                    hi: (edge - 1) as u32,
                    factor: c as u32,
                });
                lo = edge;
            }
            if lo >= 1 << 32 {
                break;
            }
        }
        if lo < 1 << 32 {
            ranges.push(Range {
                lo: lo as u32,
                hi: u32::MAX,
                factor: 0,
            });
        }
        let mut rules = Vec::new();
        for r in &ranges {
            prefixes(r.lo, r.hi, r.factor, &mut rules);
        }
        RangeTable {
            p_exp,
            m,
            ranges,
            rules,
        }
    }

    /// The factor for `x` (0: invalid, past the cap), as the match-action table answers.
    pub fn lookup(&self, x: u64) -> u32 {
        let x = u32::try_from(x).unwrap_or(u32::MAX);
        let i = self.ranges.partition_point(|r| r.hi < x);
        self.ranges.get(i).map_or(0, |r| r.factor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pow2_and_log2_bins() {
        assert_eq!(pow2_p(0.5), 1);
        assert_eq!(pow2_p(2f64.powf(-10.4)), 10);
        assert_eq!(pow2_p(2f64.powf(-10.6)), 11);
        assert_eq!(pow2_p(1.0), 0);
        assert_eq!(log2_bin(0), 0);
        assert_eq!(log2_bin(1), 0);
        assert_eq!(log2_bin(1023), 9);
        assert_eq!(log2_bin(1024), 10);
        assert_eq!(log2_bin(u64::MAX), 31);
    }

    #[test]
    fn prefix_cover_is_exact() {
        let mut r = Vec::new();
        prefixes(3, 12, 9, &mut r);
        // [3], [4..7], [8..11], [12]
        let want = [(3, 32), (4, 30), (8, 30), (12, 32)];
        assert_eq!(r.iter().map(|x| (x.value, x.len)).collect::<Vec<_>>(), want);
        r.clear();
        prefixes(0, u32::MAX, 1, &mut r);
        assert_eq!(
            r,
            vec![Rule {
                value: 0,
                len: 0,
                factor: 1
            }]
        );
    }

    #[test]
    fn seed_example_shape_p_half_m_2_16() {
        // Section 6.2: p = 0.5, M = 2^16, x counts requests: first factor 2 from x = 0, then 3.
        let t = RangeTable::generate(1 << 16, 1, XMode::Requests);
        assert_eq!(t.ranges[0].lo, 0);
        assert_eq!(t.ranges[0].factor, 2);
        assert_eq!(t.ranges[1].factor, 3);
        // The boundary is where 2 e^(x p / M) reaches sqrt(6), to three significant bits.
        let exact = (65536.0 / 0.5) * (6f64.sqrt() / 2.0).ln();
        let b = f64::from(t.ranges[1].lo);
        assert!((b - exact).abs() <= 1.0, "{b} vs {exact}");
        // Factors rise by at most 1.1x (rounded) or 1, end at the cap, then invalid.
        for w in t.ranges.windows(2) {
            assert_eq!(w[0].hi + 1, w[1].lo);
            if w[1].factor != 0 {
                assert!(w[1].factor > w[0].factor);
                assert!(
                    f64::from(w[1].factor)
                        <= (f64::from(w[0].factor) * 1.1)
                            .round()
                            .max(f64::from(w[0].factor) + 1.0)
                );
            }
        }
        let last = t.ranges.last().unwrap();
        assert_eq!((last.factor, last.hi), (0, u32::MAX));
        assert!(t.ranges[t.ranges.len() - 2].factor <= FACTOR_CAP);
    }

    #[test]
    fn lookup_agrees_with_rules_and_tracks_the_exact_factor() {
        let t = RangeTable::generate(1 << 12, 9, XMode::Insertions);
        let w = Weigher::new(1 << 12, 2f64.powi(-9), XMode::Insertions);
        for x in (0..200_000u64).step_by(997) {
            let f = t.lookup(x);
            // Longest-prefix-match over the rules gives the same factor.
            let lpm = t
                .rules
                .iter()
                .filter(|r| r.len == 0 || (x as u32) >> (32 - r.len) == r.value >> (32 - r.len))
                .max_by_key(|r| r.len)
                .unwrap();
            assert_eq!(lpm.factor, f, "x = {x}");
            if f != 0 {
                let r = (f64::from(f) / w.weight(x)).ln().abs();
                assert!(r < 0.2, "x = {x}: {f} vs {}", w.weight(x));
            }
        }
    }
}
