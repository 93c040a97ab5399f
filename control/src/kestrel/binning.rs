//! Bin-edge strategies (Kestrel section IV-C) from a calibration period's fine histograms;
//! the drift controller that re-calibrates a QID whose diagnostic count stays significantly
//! above rho is in `drift` (re-exported here). Pure functions.
//!
//! Diagnostic region T: the latency tail bin (bin 7, sojourn >= edge 6) and the inter-arrival
//! head bin (bin 0, gap < edge 0). Target-occupancy binning puts the latency edge 6 at the
//! (1 - rho) quantile and the inter-arrival edge 0 at the rho quantile, so each holds at most
//! rho of the packets, and spaces the other edges logarithmically.

use peregrine_dataplane::telemetry::kestrel::edges::fine_bin_low;
use peregrine_dataplane::telemetry::kestrel::{QidEdges, EDGES, FINE_BINS};
use serde::{Deserialize, Serialize};

/// How edges are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// The configured (or API-set) edges; no calibration.
    Static,
    /// Target occupancy rho, with drift re-binning (the seed's method).
    Target,
    /// Log-spaced between the smallest and largest values seen.
    Log,
    /// The diagnostic edges at P90 (latency) and P10 (inter-arrival), the rest log-spaced.
    P90,
    /// Equal-mass: edges at the k/8 quantiles.
    EqualMass,
}

/// The smallest value v such that at most `frac` of the samples are >= v (tail edge).
fn tail_edge(h: &[u64], frac: f64) -> u64 {
    let n: u64 = h.iter().sum();
    let keep = ((1.0 - frac) * n as f64).ceil() as u64;
    let mut cum = 0;
    for (b, &c) in h.iter().enumerate() {
        cum += c;
        if cum >= keep {
            return fine_bin_low(b + 1);
        }
    }
    fine_bin_low(FINE_BINS)
}

/// The largest value v such that at most `frac` of the samples are < v (head edge).
fn head_edge(h: &[u64], frac: f64) -> u64 {
    let n: u64 = h.iter().sum();
    let allow = (frac * n as f64).floor() as u64;
    let mut cum = 0;
    for (b, &c) in h.iter().enumerate() {
        if cum + c > allow {
            return fine_bin_low(b);
        }
        cum += c;
    }
    fine_bin_low(FINE_BINS - 1)
}

fn lowest(h: &[u64]) -> u64 {
    h.iter().position(|&c| c > 0).map_or(1, fine_bin_low)
}

fn highest(h: &[u64]) -> u64 {
    h.iter()
        .rposition(|&c| c > 0)
        .map_or(2, |b| fine_bin_low(b + 1))
}

/// `EDGES` log-spaced values from `lo` to `hi` inclusive, made strictly increasing.
fn log_spaced(lo: u64, hi: u64) -> [u32; EDGES] {
    let lo = lo.max(1) as f64;
    let hi = (hi as f64).max(lo * 2.0);
    let mut e = [0u32; EDGES];
    for (i, x) in e.iter_mut().enumerate() {
        let v = lo * (hi / lo).powf(i as f64 / (EDGES - 1) as f64);
        *x = v.round().min(u32::MAX as f64) as u32;
    }
    increasing(e)
}

fn increasing(mut e: [u32; EDGES]) -> [u32; EDGES] {
    e[0] = e[0].max(1);
    for i in 1..EDGES {
        if e[i] <= e[i - 1] {
            e[i] = e[i - 1].saturating_add(1);
        }
    }
    // Saturated at the top: walk down so the list still strictly increases.
    for i in (0..EDGES - 1).rev() {
        if e[i] >= e[i + 1] {
            e[i] = e[i + 1] - 1;
        }
    }
    e
}

/// Edges for one QID from its fine latency and inter-arrival histograms; `None` when the
/// histogram is empty or the strategy is static.
pub fn edges(s: Strategy, rho: f64, lat: &[u64], iat: &[u64]) -> Option<QidEdges> {
    if lat.iter().sum::<u64>() == 0 || s == Strategy::Static {
        return None;
    }
    let clamp = |v: u64| v.min(u64::from(u32::MAX));
    let lat_e = match s {
        Strategy::Target | Strategy::P90 => {
            let frac = if s == Strategy::Target { rho } else { 0.10 };
            let tail = clamp(tail_edge(lat, frac));
            let lo = lowest(lat).min(tail / 2).max(1);
            log_spaced(lo, tail)
        }
        Strategy::Log => log_spaced(lowest(lat), highest(lat)),
        Strategy::EqualMass => equal_mass(lat),
        Strategy::Static => return None,
    };
    let iat_e = if iat.iter().sum::<u64>() == 0 {
        QidEdges::DEFAULT.iat
    } else {
        match s {
            Strategy::Target | Strategy::P90 => {
                let frac = if s == Strategy::Target { rho } else { 0.10 };
                let head = clamp(head_edge(iat, frac)).max(1);
                log_spaced(head, highest(iat).max(head * 2))
            }
            Strategy::Log => log_spaced(lowest(iat), highest(iat)),
            Strategy::EqualMass => equal_mass(iat),
            Strategy::Static => return None,
        }
    };
    Some(QidEdges {
        lat: lat_e,
        iat: iat_e,
    })
}

fn equal_mass(h: &[u64]) -> [u32; EDGES] {
    let mut e = [0u32; EDGES];
    for (k, x) in e.iter_mut().enumerate() {
        *x = tail_edge(h, 1.0 - (k + 1) as f64 / 8.0).min(u64::from(u32::MAX)) as u32;
    }
    increasing(e)
}

pub use super::drift::{
    significant, Action, Drift, DriftCounts, DriftRule, Phase, DEFAULT_CALIBRATION_WINDOWS,
    DEFAULT_DRIFT_MIN_PACKETS, DEFAULT_DRIFT_PENALTY, DEFAULT_DRIFT_WINDOWS, DEFAULT_DRIFT_Z,
};

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use peregrine_dataplane::telemetry::kestrel::edges::fine_bin;

    /// A fine histogram of `values` (shared with the drift tests).
    pub(crate) fn hist(values: impl IntoIterator<Item = u32>) -> Vec<u64> {
        let mut h = vec![0; FINE_BINS];
        for v in values {
            h[fine_bin(v)] += 1;
        }
        h
    }

    #[test]
    fn target_occupancy_caps_the_diagnostic_bins_at_rho() {
        // Sojourn 1..=100_000 ns uniformly; inter-arrival 1_000..=101_000.
        let lat = hist((1..=100_000u32).step_by(7));
        let iat = hist((1_000..=101_000u32).step_by(7));
        let n: u64 = lat.iter().sum();
        let e = edges(Strategy::Target, 0.01, &lat, &iat).unwrap();
        let tail: u64 = (1..=100_000u32)
            .step_by(7)
            .filter(|&v| v >= e.lat[6])
            .count() as u64;
        let head: u64 = (1_000..=101_000u32)
            .step_by(7)
            .filter(|&v| v < e.iat[0])
            .count() as u64;
        assert!(tail as f64 <= 0.01 * n as f64, "{tail} of {n}, {e:?}");
        assert!(head as f64 <= 0.01 * n as f64, "{head} of {n}, {e:?}");
        // The fine bins are 1/16 octave wide: the edge is near the true quantile.
        assert!((95_000..=102_400).contains(&e.lat[6]), "{e:?}");
        assert!(e.lat.windows(2).all(|p| p[0] < p[1]) && e.iat.windows(2).all(|p| p[0] < p[1]));
    }

    #[test]
    fn other_strategies_are_increasing_and_placed() {
        let lat = hist((1..=100_000u32).step_by(3));
        let iat = hist((1..=100_000u32).step_by(3));
        for s in [Strategy::Log, Strategy::P90, Strategy::EqualMass] {
            let e = edges(s, 0.01, &lat, &iat).unwrap();
            assert!(e.lat.windows(2).all(|p| p[0] < p[1]), "{s:?} {e:?}");
            assert!(e.iat.windows(2).all(|p| p[0] < p[1]), "{s:?} {e:?}");
        }
        let em = edges(Strategy::EqualMass, 0.01, &lat, &iat).unwrap();
        assert!((45_000..=55_000).contains(&em.lat[3]), "median edge {em:?}");
        let p90 = edges(Strategy::P90, 0.01, &lat, &iat).unwrap();
        assert!((85_000..=95_000).contains(&p90.lat[6]), "{p90:?}");
        assert_eq!(edges(Strategy::Static, 0.01, &lat, &iat), None);
        assert_eq!(
            edges(Strategy::Target, 0.01, &vec![0; FINE_BINS], &iat),
            None
        );
    }

    #[test]
    fn drift_recalibrates_after_m_windows_above_rho() {
        let mut d = Drift::new(Strategy::Target, 0.01, 3, 2);
        let z = vec![0u64; FINE_BINS];
        assert_eq!(d.window(2, 1000, (50, 0), (&z, &z)), None);
        assert_eq!(
            d.window(2, 1000, (5, 0), (&z, &z)),
            None,
            "back under rho: reset"
        );
        assert_eq!(d.window(2, 1000, (50, 0), (&z, &z)), None);
        assert_eq!(d.window(2, 1000, (0, 20), (&z, &z)), None);
        assert!(matches!(
            d.window(2, 1000, (50, 0), (&z, &z)),
            Some(Action::Calibrate { qid: 2, .. })
        ));
        let lat = hist(1..5000);
        let iat = hist(1..5000);
        assert_eq!(d.window(2, 1000, (0, 0), (&lat, &iat)), None);
        match d.window(2, 1000, (0, 0), (&lat, &iat)) {
            Some(Action::Rebin { qid: 2, edges }) => assert!(edges.lat[6] > 4000),
            o => panic!("{o:?}"),
        }
        assert_eq!(d.phase, Phase::Steady { over: 0 });
    }
}
