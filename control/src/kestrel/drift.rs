//! The drift controller (Kestrel section IV-C "Handling drift"): re-calibrate and re-bin a
//! QID whose diagnostic count stays significantly above rho (docs/kestrel.md "Drift"). A
//! state machine with the windows passed in; `binning` re-exports it.

use super::binning::{edges, Strategy};
use crate::metrics::{Exposition, Kind};
use peregrine_dataplane::telemetry::kestrel::{QidEdges, FINE_BINS};
use serde::Serialize;
use statrs::distribution::{Binomial, DiscreteCDF};
use statrs::function::erf::erfc;

/// The drift rule's parameters (`[kestrel]` `rho`, `drift_windows`, `drift_z`,
/// `drift_min_packets`, `calibration_windows`; docs/kestrel.md "Drift").
///
/// The seed (section IV-C, "Handling drift") re-bins a QID when its diagnostic occupancy
/// stays above rho for M windows. Taken literally (the fraction above rho), a window of a few
/// hundred packets crosses rho by sampling noise alone: at rho = 1 % a QID whose true
/// occupancy is exactly rho has an expected tail count of 3 in 300 packets and exceeds it in
/// about a third of its windows. So a window counts towards M only when its diagnostic count
/// is *significantly* above rho (one-sided exact binomial test at level `alpha(z)`), only
/// windows with at least `min_packets` packets are tested, a tested window that is not
/// significant takes `penalty` back, and M is long enough that the seed's Table I anomalies
/// (the longest, policy abuse, lasts up to 60 s) end before it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriftRule {
    /// Target diagnostic occupancy, (0, 0.5).
    pub rho: f64,
    /// M: the evidence (significant tested windows, less `penalty` per tested window that
    /// is not significant, never below 0) at which the QID is re-calibrated. With every
    /// tested window significant: M consecutive windows.
    pub m: u32,
    /// What a tested window that is not significant takes back (>= 1). The evidence grows
    /// only while more than penalty / (penalty + 1) of the tested windows are significant.
    pub penalty: u32,
    /// One-sided z of the per-window test (the level is the normal tail beyond z:
    /// 2.326 -> 0.01); > 0.
    pub z: f64,
    /// Windows with fewer packets than this are not tested (they neither count nor reset).
    pub min_packets: u64,
    /// Windows (with packets) of a calibration period.
    pub calibration_windows: u32,
}

/// Default M: 90 windows (90 s at 1 s windows), 1.5x the longest anomaly of the seed's
/// Table I (policy abuse, 30-60 s; congestion 25-40 s, contention 12-30 s, microbursts
/// 0.3-1 s), so a Table I episode ends (and the run of significant windows resets) before
/// the rule fires.
pub const DEFAULT_DRIFT_WINDOWS: u32 = 90;
/// Default penalty: 3. The evidence grows only while more than 3/4 of a QID's tested
/// windows are significant; Table I anomalies recur at most 2/3 of the time (congestion,
/// 25-40 s every 60-120 s), so their episodes do not add up, while a shift significant in
/// 95 % of windows re-bins in about M / (4 * 0.95 - 3) = 1.25 M windows.
pub const DEFAULT_DRIFT_PENALTY: u32 = 3;
/// Default calibration period: 30 windows. Two windows of bursty traffic (video on/off
/// periods of seconds) misplace the rho quantile: after the shift of
/// perf/results/kestrel-drift.md, two of the three QIDs that kept being tested stayed
/// significantly above rho in over half of their windows when re-binned from 2 windows and
/// in a few percent when re-binned from 30 (docs/kestrel.md "Drift").
pub const DEFAULT_CALIBRATION_WINDOWS: u32 = 30;
/// Default z: 2.326, a per-window level of 1 %.
pub const DEFAULT_DRIFT_Z: f64 = 2.326;
/// Default minimum packets of a tested window: 200 (an expected diagnostic count of 2 at
/// rho = 1 %; below it a single burst decides the window).
pub const DEFAULT_DRIFT_MIN_PACKETS: u64 = 200;

impl Default for DriftRule {
    fn default() -> DriftRule {
        DriftRule {
            rho: 0.01,
            m: DEFAULT_DRIFT_WINDOWS,
            penalty: DEFAULT_DRIFT_PENALTY,
            z: DEFAULT_DRIFT_Z,
            min_packets: DEFAULT_DRIFT_MIN_PACKETS,
            calibration_windows: DEFAULT_CALIBRATION_WINDOWS,
        }
    }
}

impl DriftRule {
    /// Refuse values the rule cannot work with: (config key, problem).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if !(self.rho > 0.0 && self.rho < 0.5) {
            return Err(("rho", format!("{} is not a fraction in (0, 0.5)", self.rho)));
        }
        if self.m == 0 {
            return Err(("drift_windows", "must be at least 1".into()));
        }
        if self.penalty == 0 {
            return Err((
                "drift_penalty",
                "must be at least 1 (0 would let noise add up without bound)".into(),
            ));
        }
        if !(self.z.is_finite() && self.z > 0.0) {
            return Err((
                "drift_z",
                format!(
                    "{} is not a positive finite z (one-sided; 2.326 is a 1 % level)",
                    self.z
                ),
            ));
        }
        if self.min_packets == 0 {
            return Err(("drift_min_packets", "must be at least 1".into()));
        }
        if self.calibration_windows == 0 {
            return Err(("calibration_windows", "must be at least 1".into()));
        }
        Ok(())
    }

    /// The per-window test's level: P(N(0, 1) > z).
    pub fn alpha(&self) -> f64 {
        0.5 * erfc(self.z / std::f64::consts::SQRT_2)
    }
}

/// Whether `k` of `n` is significantly above `rho`: P(X >= k) <= `alpha` for X ~
/// Binomial(n, rho) (statrs: the regularized incomplete beta function).
pub fn significant(k: u64, n: u64, rho: f64, alpha: f64) -> bool {
    let k = k.min(n);
    if n == 0 || k as f64 <= n as f64 * rho {
        // At or below the mean: P(X >= k) >= 1/2 (the median is at least floor(n rho)).
        return false;
    }
    // k >= 1 here: P(X >= k) is the survival function at k - 1.
    Binomial::new(rho, n).is_ok_and(|b| b.sf(k - 1) <= alpha)
}

/// Where one QID is in the drift cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Binning with its edges; `over`: the evidence of drift so far ([`DriftRule::m`]).
    Steady { over: u32 },
    /// Collecting fine histograms for `left` more windows.
    Calibrating {
        left: u32,
        lat: Vec<u64>,
        iat: Vec<u64>,
    },
}

/// What the controller asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Turn calibration on for the QID (the workers fill fine histograms).
    Calibrate { qid: usize, reason: String },
    /// Push new edges (calibration off).
    Rebin { qid: usize, edges: QidEdges },
}

/// What the rule saw of one QID's steady windows (Prometheus and the eval's report).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DriftCounts {
    /// Windows tested (at least `min_packets` packets).
    pub tested: u64,
    /// Tested windows significantly above rho.
    pub significant: u64,
    /// Windows with packets but fewer than `min_packets` (not tested).
    pub under_sampled: u64,
    /// The highest evidence reached (consecutive significant windows, less the penalties).
    pub peak: u32,
    /// Calibration periods the rule started (not counting the start or an API request).
    pub fired: u64,
}

/// The drift controller of one QID (Kestrel section IV-C "Handling drift", with the test
/// and persistence of [`DriftRule`]).
#[derive(Debug, Clone)]
pub struct Drift {
    pub strategy: Strategy,
    pub rule: DriftRule,
    /// The per-window level, from `rule.z`.
    pub alpha: f64,
    pub phase: Phase,
    pub counts: DriftCounts,
}

impl Drift {
    /// A controller with rho, M and the calibration length given and the default test
    /// (z, minimum packets); M and the calibration length are at least 1, and a rho out of
    /// (0, 0.5) falls back to the default rule (the config path uses [`Drift::with_rule`],
    /// which refuses it).
    pub fn new(strategy: Strategy, rho: f64, m: u32, calibration_windows: u32) -> Drift {
        let rule = DriftRule {
            rho,
            m: m.max(1),
            calibration_windows: calibration_windows.max(1),
            ..DriftRule::default()
        };
        Drift::with_rule(strategy, rule).unwrap_or_else(|_| {
            Drift::with_rule(strategy, DriftRule::default()).expect("the defaults are valid")
        })
    }

    /// A controller with `rule`, refused with the config key and the problem when invalid.
    pub fn with_rule(strategy: Strategy, rule: DriftRule) -> Result<Drift, (&'static str, String)> {
        rule.check()?;
        Ok(Drift {
            strategy,
            rule,
            alpha: rule.alpha(),
            phase: Phase::Steady { over: 0 },
            counts: DriftCounts::default(),
        })
    }

    /// Start a calibration period now (at start, or on request).
    pub fn calibrate(&mut self) {
        self.phase = Phase::Calibrating {
            left: self.rule.calibration_windows,
            lat: vec![0; FINE_BINS],
            iat: vec![0; FINE_BINS],
        };
    }

    /// One finished window of this QID: its packets, diagnostic counts (latency tail bin,
    /// inter-arrival head bin, row 0) and fine histograms (zero unless calibrating).
    pub fn window(
        &mut self,
        qid: usize,
        packets: u64,
        diag: (u64, u64),
        fine: (&[u64], &[u64]),
    ) -> Option<Action> {
        if self.strategy == Strategy::Static {
            return None;
        }
        match &mut self.phase {
            Phase::Calibrating { left, lat, iat } => {
                for (a, b) in lat.iter_mut().zip(fine.0) {
                    *a += b;
                }
                for (a, b) in iat.iter_mut().zip(fine.1) {
                    *a += b;
                }
                if fine.0.iter().sum::<u64>() > 0 {
                    *left = left.saturating_sub(1);
                }
                if *left > 0 {
                    return None;
                }
                let e = edges(self.strategy, self.rule.rho, lat, iat)?;
                self.phase = Phase::Steady { over: 0 };
                Some(Action::Rebin { qid, edges: e })
            }
            Phase::Steady { over } => {
                if self.strategy != Strategy::Target || packets == 0 {
                    return None;
                }
                let c = &mut self.counts;
                if packets < self.rule.min_packets {
                    // Too few packets to tell noise from drift: the run neither grows nor
                    // resets.
                    c.under_sampled += 1;
                    return None;
                }
                c.tested += 1;
                // Both diagnostic bins are tested against the same Binomial(packets, rho):
                // the larger count decides.
                let k = diag.0.max(diag.1);
                if significant(k, packets, self.rule.rho, self.alpha) {
                    c.significant += 1;
                    *over += 1;
                    c.peak = c.peak.max(*over);
                } else {
                    *over = over.saturating_sub(self.rule.penalty);
                }
                if *over < self.rule.m {
                    return None;
                }
                let reason = format!(
                    "diagnostic count {k} of {packets} packets ({:.4}) significantly above rho {} \
                     (z {}): evidence {} (significant tested windows less {} per other one)",
                    k as f64 / packets as f64,
                    self.rule.rho,
                    self.rule.z,
                    over,
                    self.rule.penalty
                );
                c.fired += 1;
                self.calibrate();
                Some(Action::Calibrate { qid, reason })
            }
        }
    }

    /// The evidence of drift so far (0 while calibrating).
    pub fn run(&self) -> u32 {
        match self.phase {
            Phase::Steady { over } => over,
            Phase::Calibrating { .. } => 0,
        }
    }
}

/// Prometheus: the rule's windows per QID by outcome, and its current evidence.
pub fn metrics(e: &mut Exposition, drift: &[Drift]) {
    let name = "peregrine_kestrel_drift_windows_total";
    e.family(name, Kind::Counter, "Steady windows the drift rule saw per QID: tested and significantly above rho, tested and not, or under-sampled (fewer than drift_min_packets packets, not tested).");
    for (q, d) in drift.iter().enumerate() {
        let (qs, c) = (q.to_string(), d.counts);
        for (o, v) in [
            ("significant", c.significant),
            ("not_significant", c.tested - c.significant),
            ("under_sampled", c.under_sampled),
        ] {
            e.sample(name, &[("qid", &qs), ("outcome", o)], v as f64);
        }
    }
    let name = "peregrine_kestrel_drift_run";
    e.family(name, Kind::Gauge, "A QID's drift evidence: significant tested windows less drift_penalty per other tested window (re-calibration at drift_windows).");
    for (q, d) in drift.iter().enumerate() {
        e.sample(name, &[("qid", &q.to_string())], f64::from(d.run()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kestrel::binning::tests::hist;
    use peregrine_testkit::rng::{below, seeded, unit_f64, Xoshiro256PlusPlus};

    /// `windows` windows of `n(i)` packets each landing in the tail bin with probability
    /// `occ(i)` (window i), through `d`: the windows at which it asked to calibrate.
    fn stream(
        d: &mut Drift,
        windows: usize,
        seed: u64,
        n: impl Fn(usize, &mut Xoshiro256PlusPlus) -> u64,
        occ: impl Fn(usize) -> f64,
    ) -> Vec<usize> {
        let mut r = seeded(seed);
        let z = vec![0u64; FINE_BINS];
        let fine = hist(1..5000);
        let mut fired = Vec::new();
        for i in 0..windows {
            let packets = n(i, &mut r);
            let p = occ(i);
            let k = (0..packets).filter(|_| unit_f64(&mut r) < p).count() as u64;
            let f: &[u64] = if matches!(d.phase, Phase::Calibrating { .. }) {
                &fine
            } else {
                &z
            };
            if let Some(Action::Calibrate { .. }) = d.window(1, packets, (k, 0), (f, f)) {
                fired.push(i);
            }
        }
        fired
    }

    fn uniform_n(lo: u64, hi: u64) -> impl Fn(usize, &mut Xoshiro256PlusPlus) -> u64 {
        move |_, r| lo + below(r, hi - lo + 1)
    }

    #[test]
    fn the_test_is_the_exact_binomial_tail() {
        // Against the tail summed from the pmf by recurrence from (1 - rho)^n.
        for n in [1u64, 50, 200, 1000, 3000] {
            let (rho, q) = (0.01f64, 0.99f64);
            let mut pmf = vec![q.powi(n as i32)];
            for j in 0..n {
                pmf.push(pmf[j as usize] * (n - j) as f64 / (j + 1) as f64 * rho / q);
            }
            for alpha in [0.05, 0.01, 0.001] {
                for k in 0..=n.min(80) {
                    let tail: f64 = pmf[k as usize..].iter().sum();
                    // Away from the boundary (the two sums round differently).
                    if (tail - alpha).abs() > 1e-9 * alpha {
                        assert_eq!(
                            significant(k, n, rho, alpha),
                            tail <= alpha,
                            "{k} of {n}, {alpha}"
                        );
                    }
                }
            }
        }
        // Large windows: a few steps, and the normal approximation's answer far from the edge.
        let n = 10_000_000u64;
        let sd = (n as f64 * 0.01 * 0.99).sqrt();
        assert!(!significant(100_000 + (2.0 * sd) as u64, n, 0.01, 0.01));
        assert!(significant(100_000 + (2.7 * sd) as u64, n, 0.01, 0.01));
        assert!(significant(n, n, 0.01, 0.01) && !significant(0, n, 0.01, 0.01));
        for (z, a) in [(1.645, 0.05), (2.326, 0.01), (3.090, 0.001)] {
            let r = DriftRule {
                z,
                ..DriftRule::default()
            };
            assert!((r.alpha() - a).abs() < 0.002 * a, "{z}: {}", r.alpha());
        }
    }

    #[test]
    fn stationary_occupancy_at_or_below_rho_never_fires() {
        let rule = DriftRule::default();
        let mut fraction_rule_fires = 0;
        for (seed, occ) in [(1u64, 0.01), (2, 0.009)] {
            let mut d = Drift::with_rule(Strategy::Target, rule).unwrap();
            let fired = stream(&mut d, 5000, seed, uniform_n(100, 1500), |_| occ);
            assert_eq!(
                fired,
                Vec::<usize>::new(),
                "occupancy {occ}: {:?}",
                d.counts
            );
            let c = d.counts;
            assert!(c.tested > 4000 && c.under_sampled > 300, "{c:?}");
            // The per-window test holds its level (exact test: at most alpha on average).
            assert!(
                (c.significant as f64) < 1.5 * d.alpha * c.tested as f64,
                "{c:?}"
            );
            assert!(c.peak < 3, "{c:?}");
            // The seed's rule taken literally (fraction above rho for 3 windows) on the same
            // stream fires again and again.
            let mut r = seeded(seed);
            let mut over = 0;
            for _ in 0..5000 {
                let n = 100 + below(&mut r, 1401);
                let k = (0..n).filter(|_| unit_f64(&mut r) < occ).count() as f64;
                over = if k / n as f64 > 0.01 { over + 1 } else { 0 };
                if over >= 3 {
                    fraction_rule_fires += 1;
                    over = 0;
                }
            }
        }
        assert!(fraction_rule_fires > 100, "{fraction_rule_fires}");
    }

    #[test]
    fn a_persistent_shift_rebins_within_m_plus_calibration_windows() {
        let rule = DriftRule::default();
        let bound = (rule.m + rule.calibration_windows) as usize;
        // The tail occupancy goes from rho to 5 rho (say the shaper rate dropped for good)
        // at window 1000, with 500-1500 packets a window.
        for (seed, after) in [(3u64, 0.05), (4, 0.30)] {
            let mut d = Drift::with_rule(Strategy::Target, rule).unwrap();
            let mut r = seeded(seed);
            let z = vec![0u64; FINE_BINS];
            let fine = hist(1..5000);
            let mut rebinned = None;
            for i in 0..2000usize {
                let n = 500 + below(&mut r, 1001);
                let p = if i < 1000 { 0.01 } else { after };
                let k = (0..n).filter(|_| unit_f64(&mut r) < p).count() as u64;
                let f: &[u64] = if matches!(d.phase, Phase::Calibrating { .. }) {
                    &fine
                } else {
                    &z
                };
                match d.window(1, n, (0, k), (f, f)) {
                    Some(Action::Rebin { .. }) => {
                        rebinned = Some(i);
                        break;
                    }
                    Some(Action::Calibrate { .. }) => assert!(i >= 1000, "fired at {i}"),
                    None => {}
                }
            }
            let at = rebinned.expect("re-binned") + 1 - 1000;
            assert!(
                at <= bound,
                "{after}: re-binned {at} windows after the shift"
            );
            assert!(at >= rule.m as usize, "{after}: {at}");
        }
    }

    #[test]
    fn table_one_anomalies_are_not_absorbed() {
        // A 60 s anomaly (the longest of Table I, policy abuse) putting 20 % of the QID's
        // packets in the tail, then two 40 s congestion episodes 20 s apart: no re-binning.
        let mut d = Drift::with_rule(Strategy::Target, DriftRule::default()).unwrap();
        let anomalous = |i: usize| {
            (200..260).contains(&i) || (400..440).contains(&i) || (460..500).contains(&i)
        };
        let fired = stream(&mut d, 800, 5, uniform_n(300, 1000), |i| {
            if anomalous(i) {
                0.2
            } else {
                0.01
            }
        });
        assert_eq!(fired, Vec::<usize>::new(), "{:?}", d.counts);
        assert!((60..90).contains(&d.counts.peak), "{:?}", d.counts);
        // Congestion at its most frequent (40 s every 60 s, the top of Table I's ranges) for
        // 20 minutes: 2/3 of the windows, under the rule's 3/4.
        let mut d = Drift::with_rule(Strategy::Target, DriftRule::default()).unwrap();
        let fired = stream(&mut d, 1200, 6, uniform_n(300, 1000), |i| {
            if i % 60 < 40 {
                0.2
            } else {
                0.01
            }
        });
        assert_eq!(fired, Vec::<usize>::new(), "{:?}", d.counts);
        assert!((40..60).contains(&d.counts.peak), "{:?}", d.counts);
    }

    #[test]
    fn a_shift_significant_in_most_windows_rebins_in_about_m_over_4pi_minus_3() {
        // 600 packets a window at 3 rho: significant (P(X >= 13) <= 0.01 at n rho = 6) in
        // about 90 % of windows; expected windows to fire M / (4 pi - 3) = 90 / 0.6 ~ 150.
        let rule = DriftRule::default();
        let mut d = Drift::with_rule(Strategy::Target, rule).unwrap();
        let fired = stream(&mut d, 2000, 7, |_, _| 600, |_| 0.03);
        let c = d.counts;
        let pi = c.significant as f64 / c.tested as f64;
        assert!((0.8..0.95).contains(&pi), "{c:?}");
        let first = *fired.first().expect("fired");
        assert!((90..400).contains(&first), "{first} {c:?}");
        // The consecutive rule (penalty = M) would wait for 90 significant windows in a row.
        let strict = DriftRule {
            penalty: rule.m,
            ..rule
        };
        let mut d = Drift::with_rule(Strategy::Target, strict).unwrap();
        let fired = stream(&mut d, 2000, 7, |_, _| 600, |_| 0.03);
        assert!(fired.first().is_none_or(|&f| f > first), "{fired:?}");
    }

    #[test]
    fn under_sampled_windows_neither_count_nor_reset() {
        let rule = DriftRule {
            m: 3,
            ..DriftRule::default()
        };
        let mut d = Drift::with_rule(Strategy::Target, rule).unwrap();
        let z = vec![0u64; FINE_BINS];
        assert_eq!(d.window(0, 1000, (60, 0), (&z, &z)), None);
        assert_eq!(d.window(0, 150, (150, 0), (&z, &z)), None);
        assert_eq!(d.window(0, 1000, (60, 0), (&z, &z)), None);
        assert_eq!(d.run(), 2);
        assert_eq!(d.counts.under_sampled, 1);
        assert!(matches!(
            d.window(0, 1000, (60, 0), (&z, &z)),
            Some(Action::Calibrate { qid: 0, .. })
        ));
        assert_eq!((d.counts.tested, d.counts.fired), (3, 1));
    }

    #[test]
    fn bad_rules_are_refused_with_the_key_and_the_problem() {
        let ok = DriftRule::default();
        assert_eq!(ok.check(), Ok(()));
        for (bad, key, says) in [
            (DriftRule { z: 0.0, ..ok }, "drift_z", "positive"),
            (DriftRule { z: -1.0, ..ok }, "drift_z", "positive"),
            (DriftRule { z: f64::NAN, ..ok }, "drift_z", "NaN"),
            (
                DriftRule {
                    z: f64::INFINITY,
                    ..ok
                },
                "drift_z",
                "finite",
            ),
            (
                DriftRule {
                    min_packets: 0,
                    ..ok
                },
                "drift_min_packets",
                "at least 1",
            ),
            (DriftRule { m: 0, ..ok }, "drift_windows", "at least 1"),
            (
                DriftRule { penalty: 0, ..ok },
                "drift_penalty",
                "at least 1",
            ),
            (
                DriftRule {
                    rho: f64::NAN,
                    ..ok
                },
                "rho",
                "(0, 0.5)",
            ),
            (DriftRule { rho: 0.5, ..ok }, "rho", "(0, 0.5)"),
            (
                DriftRule {
                    calibration_windows: 0,
                    ..ok
                },
                "calibration_windows",
                "at least 1",
            ),
        ] {
            let (k, msg) = Drift::with_rule(Strategy::Target, bad).unwrap_err();
            assert_eq!(k, key, "{bad:?}");
            assert!(msg.contains(says), "{key}: {msg}");
        }
    }

    #[test]
    fn windows_and_evidence_are_exposed_per_qid() {
        let mut d = Drift::with_rule(Strategy::Target, DriftRule::default()).unwrap();
        let z = vec![0u64; FINE_BINS];
        d.window(0, 1000, (60, 0), (&z, &z));
        d.window(0, 1000, (60, 0), (&z, &z));
        d.window(0, 1000, (5, 0), (&z, &z));
        d.window(0, 10, (5, 0), (&z, &z));
        let mut e = Exposition::new();
        metrics(&mut e, &[d]);
        let t = e.finish();
        for line in [
            "peregrine_kestrel_drift_windows_total{qid=\"0\",outcome=\"significant\"} 2",
            "peregrine_kestrel_drift_windows_total{qid=\"0\",outcome=\"not_significant\"} 1",
            "peregrine_kestrel_drift_windows_total{qid=\"0\",outcome=\"under_sampled\"} 1",
            "peregrine_kestrel_drift_run{qid=\"0\"} 0",
        ] {
            assert!(t.contains(line), "{line} in\n{t}");
        }
    }
}
