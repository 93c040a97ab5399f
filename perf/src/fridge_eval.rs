//! The fridge paper's evaluation (section 5) on our kernel: error metrics, runners for the
//! fridge, two fridges with IVW, the Tofino approximation and the baselines, and the sweeps
//! behind Figures 2-5. `pg-fridge-eval` runs them and writes `perf/results/fridge-eval.md`.

pub mod plot;
pub mod runs;

use peregrine_dataplane::telemetry::fridge::Cdf;

/// `|log2(estimate / truth)|` at the seed's percentile queries (section 5, "Distance metric").
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Errors {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    /// Largest error over every percentile in [5%, 95%] (step 0.5%).
    pub max: f64,
}

impl Errors {
    /// Component-wise mean and sample standard deviation of several runs.
    pub fn mean_sd(v: &[Errors]) -> (Errors, Errors) {
        let n = v.len() as f64;
        let pick = |f: fn(&Errors) -> f64| {
            let m = v.iter().map(f).sum::<f64>() / n;
            let var = v.iter().map(|e| (f(e) - m).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
            (m, var.sqrt())
        };
        let (a, b, c, d) = (
            pick(|e| e.p50),
            pick(|e| e.p95),
            pick(|e| e.p99),
            pick(|e| e.max),
        );
        (
            Errors {
                p50: a.0,
                p95: b.0,
                p99: c.0,
                max: d.0,
            },
            Errors {
                p50: a.1,
                p95: b.1,
                p99: c.1,
                max: d.1,
            },
        )
    }
}

/// The truth: sorted delays, read with linear interpolation between order statistics.
#[derive(Debug, Clone)]
pub struct Truth {
    sorted: Vec<u64>,
}

impl Truth {
    pub fn new(mut delays: Vec<u64>) -> Truth {
        delays.sort_unstable();
        Truth { sorted: delays }
    }

    pub fn quantile(&self, q: f64) -> f64 {
        let s = &self.sorted;
        let pos = q.clamp(0.0, 1.0) * (s.len() - 1) as f64;
        let i = pos.floor() as usize;
        let j = (i + 1).min(s.len() - 1);
        s[i] as f64 + (pos - i as f64) * (s[j] as f64 - s[i] as f64)
    }

    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// The empirical CDF at `t` (fraction of delays <= t).
    pub fn cdf(&self, t: f64) -> f64 {
        self.sorted.partition_point(|&d| d as f64 <= t) as f64 / self.sorted.len() as f64
    }
}

/// Errors of an estimated quantile function against the truth.
pub fn errors(truth: &Truth, est: impl Fn(f64) -> f64) -> Errors {
    let e = |q: f64| {
        let (a, b) = (est(q).max(1.0), truth.quantile(q).max(1.0));
        (a / b).log2().abs()
    };
    let max = (10..=190)
        .map(|i| e(f64::from(i) / 200.0))
        .fold(0.0, f64::max);
    Errors {
        p50: e(0.5),
        p95: e(0.95),
        p99: e(0.99),
        max,
    }
}

/// Errors of a histogram CDF (an estimate with no mass at all counts as error 10 everywhere).
pub fn cdf_errors(truth: &Truth, cdf: Option<&Cdf>) -> Errors {
    match cdf {
        Some(c) => errors(truth, |q| c.quantile(q)),
        None => Errors {
            p50: 10.0,
            p95: 10.0,
            p99: 10.0,
            max: 10.0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_estimate_has_no_error_and_doubling_has_one() {
        let t = Truth::new((1..=1000).collect());
        let e = errors(&t, |q| t.quantile(q));
        assert_eq!(e, Errors::default());
        let d = errors(&t, |q| 2.0 * t.quantile(q));
        assert!((d.max - 1.0).abs() < 1e-12 && (d.p50 - 1.0).abs() < 1e-12);
        assert_eq!(t.quantile(0.5), 500.5);
        let (m, s) = Errors::mean_sd(&[e, d]);
        assert!((m.p99 - 0.5).abs() < 1e-12);
        assert!((s.p99 - 0.5f64.sqrt()).abs() < 1e-12);
    }
}
