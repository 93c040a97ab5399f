//! The "any anomaly" score of a (window, QFI) from its four detectors (Kestrel, Saha et al.,
//! section VI, Fig. 3b scores the mixed scenario as one alarm over every anomaly type).
//! The detectors are trained separately, one per anomaly type, so their probabilities are
//! on different scales: each is first calibrated by Platt scaling (J. Platt, "Probabilistic
//! outputs for support vector machines and comparisons to regularized likelihood methods",
//! 1999: `sigmoid(a * margin + b)` over the model's log-odds, `a` and `b` fitted by logistic
//! regression on the detector's out-of-fold probabilities over the training runs), then the
//! calibrated probabilities are combined by [`Combine`]. Both are fitted or chosen on the
//! training runs only (`perf/scripts/kestrel_train.py`); the evaluation and the daemon's
//! online detector compute the score with this code.

use serde::{Deserialize, Serialize};

/// Platt scaling of one detector: `sigmoid(a * margin + b)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Platt {
    pub a: f64,
    pub b: f64,
}

impl Platt {
    /// No calibration: the model's own probability.
    pub const IDENTITY: Platt = Platt { a: 1.0, b: 0.0 };

    /// `[a, b]`, refused unless both are finite and `a > 0` (a calibration must keep the
    /// detector's ranking).
    pub fn new(ab: [f64; 2]) -> Result<Platt, String> {
        let [a, b] = ab;
        if !(a.is_finite() && b.is_finite() && a > 0.0) {
            return Err(format!(
                "calibration [{a}, {b}]: want finite [a, b] with a > 0"
            ));
        }
        Ok(Platt { a, b })
    }

    /// The calibrated probability of a model margin (log-odds).
    pub fn apply(&self, margin: f64) -> f64 {
        1.0 / (1.0 + (-(self.a * margin + self.b)).exp())
    }
}

/// How the calibrated probabilities of the detectors are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Combine {
    /// The largest.
    Max,
    /// `1 - prod(1 - p)`: the probability that at least one anomaly is present if the
    /// detectors' events were independent.
    NoisyOr,
}

impl Combine {
    /// The name in configs and thresholds files.
    pub fn name(self) -> &'static str {
        match self {
            Combine::Max => "max",
            Combine::NoisyOr => "noisy_or",
        }
    }

    /// Every variant, in declaration order.
    pub const ALL: [Combine; 2] = [Combine::Max, Combine::NoisyOr];

    /// Parse [`Combine::name`].
    pub fn parse(s: &str) -> Result<Combine, String> {
        Self::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                let want: Vec<String> = Self::ALL
                    .iter()
                    .map(|c| format!("`{}`", c.name()))
                    .collect();
                format!("combine: `{s}`, want {}", want.join(" or "))
            })
    }

    /// Combine calibrated probabilities.
    pub fn of(self, p: impl IntoIterator<Item = f64>) -> f64 {
        match self {
            Combine::Max => p.into_iter().fold(0.0, f64::max),
            Combine::NoisyOr => 1.0 - p.into_iter().map(|p| 1.0 - p).product::<f64>(),
        }
    }
}

/// The detectors' calibrations (in detector order) and their combination.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnyScore {
    pub platt: Vec<Platt>,
    pub combine: Combine,
}

impl AnyScore {
    /// The seed's combination before calibration: the largest raw probability.
    pub fn raw_max(n: usize) -> AnyScore {
        AnyScore {
            platt: vec![Platt::IDENTITY; n],
            combine: Combine::Max,
        }
    }

    /// The "any anomaly" score of the detectors' margins (in detector order).
    pub fn of_margins(&self, margins: &[f64]) -> f64 {
        self.combine
            .of(self.platt.iter().zip(margins).map(|(c, &m)| c.apply(m)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platt_and_the_combinations_compute_what_their_docs_say() {
        let c = Platt::new([2.0, -1.0]).unwrap();
        // sigmoid(2 * 0.5 - 1) = 0.5; sigmoid(2 * 1 - 1) = 0.7310585786300049.
        assert!((c.apply(0.5) - 0.5).abs() < 1e-15);
        assert!((c.apply(1.0) - 0.731_058_578_630_004_9).abs() < 1e-15);
        assert!((Platt::IDENTITY.apply(0.0) - 0.5).abs() < 1e-15);
        assert_eq!(Combine::Max.of([0.2, 0.7, 0.1]), 0.7);
        // 1 - 0.8 * 0.3 * 0.9 = 0.784.
        assert!((Combine::NoisyOr.of([0.2, 0.7, 0.1]) - 0.784).abs() < 1e-12);
        let s = AnyScore {
            platt: vec![c, Platt::IDENTITY],
            combine: Combine::NoisyOr,
        };
        // 1 - 0.5 * 0.5.
        assert!((s.of_margins(&[0.5, 0.0]) - 0.75).abs() < 1e-15);
        assert_eq!(AnyScore::raw_max(2).of_margins(&[0.0, -1e9]), 0.5);
    }

    #[test]
    fn a_calibration_that_would_reorder_or_is_not_finite_is_refused() {
        for ab in [
            [0.0, 1.0],
            [-1.0, 0.0],
            [f64::NAN, 0.0],
            [1.0, f64::INFINITY],
        ] {
            assert!(Platt::new(ab).unwrap_err().contains("a > 0"), "{ab:?}");
        }
        assert_eq!(Combine::parse("noisy_or"), Ok(Combine::NoisyOr));
        assert_eq!(Combine::parse(Combine::Max.name()), Ok(Combine::Max));
        assert!(Combine::parse("mean").unwrap_err().contains("`mean`"));
    }

    /// `name` is the one hand-written list: it must agree with serde's names (the config and
    /// thresholds files), and `ALL` must hold every variant.
    #[test]
    fn the_names_are_serdes() {
        for c in Combine::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), c.name());
            assert_eq!(Combine::parse(c.name()), Ok(c));
            match c {
                // A new variant fails to compile here until it is added to `ALL`.
                Combine::Max | Combine::NoisyOr => {}
            }
        }
        assert_eq!(
            Combine::parse("mean"),
            Err("combine: `mean`, want `max` or `noisy_or`".to_string())
        );
    }
}
