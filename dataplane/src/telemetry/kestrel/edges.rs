//! Per-QID bin edges, published to the workers by snapshot swap (Kestrel section IV-C: the
//! bin tables are runtime-programmable per QID), and the fine histogram the control side
//! calibrates them from.

use super::layout::{EDGES, MAX_QIDS};

/// The 7 edges of one QID's latency (sojourn) and inter-arrival histograms, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QidEdges {
    pub lat: [u32; EDGES],
    pub iat: [u32; EDGES],
}

impl QidEdges {
    /// Log-spaced defaults: latency 1 us .. 4 ms, inter-arrival 1 us .. 4 ms (x4 per bin).
    pub const DEFAULT: QidEdges = QidEdges {
        lat: [1_000, 4_000, 16_000, 64_000, 256_000, 1_024_000, 4_096_000],
        iat: [1_000, 4_000, 16_000, 64_000, 256_000, 1_024_000, 4_096_000],
    };
}

/// One version of the edges: every QID's edges and which QIDs are calibrating (the worker
/// then also fills the fine histograms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeSet {
    pub version: u64,
    pub qids: [QidEdges; MAX_QIDS],
    pub calibrating: [bool; MAX_QIDS],
}

impl Default for EdgeSet {
    fn default() -> Self {
        EdgeSet {
            version: 1,
            qids: [QidEdges::DEFAULT; MAX_QIDS],
            calibrating: [false; MAX_QIDS],
        }
    }
}

/// What the control side publishes: `current` applies to windows from `from_seq` on,
/// `previous` to those before. A worker picks one when it opens a window, so every worker
/// bins a given window with the same version whenever it saw the table before `from_seq`
/// began (the control side sets `from_seq` two windows ahead of the newest bank it has).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EdgeTable {
    pub from_seq: u64,
    pub current: EdgeSet,
    pub previous: EdgeSet,
}

impl EdgeTable {
    /// The set that applies to window `seq`.
    #[inline]
    pub fn for_seq(&self, seq: u64) -> &EdgeSet {
        if seq >= self.from_seq {
            &self.current
        } else {
            &self.previous
        }
    }

    /// A table whose `next` set applies from `from_seq` (the current one before).
    pub fn next(&self, next: EdgeSet, from_seq: u64) -> EdgeTable {
        EdgeTable {
            from_seq,
            current: next,
            previous: self.current,
        }
    }
}

/// Why an edge list is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EdgeError {
    #[error("{which}: {got} edges, an 8-bin histogram has {EDGES}")]
    Count { which: &'static str, got: usize },
    #[error("{which}: edge {index} is not a number")]
    NotANumber { which: &'static str, index: usize },
    #[error("{which}: edge {index} ({value}) is negative or beyond u32::MAX ns")]
    Range {
        which: &'static str,
        index: usize,
        value: f64,
    },
    #[error(
        "{which}: edges must strictly increase, edge {index} ({value}) is not above the one before"
    )]
    NotIncreasing {
        which: &'static str,
        index: usize,
        value: f64,
    },
    #[error("QID {qid} is not configured (QIDs are 0..{qids})")]
    UnknownQid { qid: usize, qids: usize },
}

/// Validate an edge list given in ns (as floats, from JSON / TOML) into `u32` edges.
pub fn parse_edges(which: &'static str, v: &[f64]) -> Result<[u32; EDGES], EdgeError> {
    if v.len() != EDGES {
        return Err(EdgeError::Count {
            which,
            got: v.len(),
        });
    }
    let mut out = [0u32; EDGES];
    for (i, &x) in v.iter().enumerate() {
        if x.is_nan() {
            return Err(EdgeError::NotANumber { which, index: i });
        }
        if !(0.0..=u32::MAX as f64).contains(&x) {
            return Err(EdgeError::Range {
                which,
                index: i,
                value: x,
            });
        }
        if i > 0 && x <= v[i - 1] {
            return Err(EdgeError::NotIncreasing {
                which,
                index: i,
                value: x,
            });
        }
        out[i] = x as u32;
        if i > 0 && out[i] <= out[i - 1] {
            return Err(EdgeError::NotIncreasing {
                which,
                index: i,
                value: x,
            });
        }
    }
    Ok(out)
}

/// Sub-bins per octave of the fine histogram (relative bin width <= 1/16).
const SUB: u32 = 16;
/// Bins of the fine histogram over u32 ns values: 0..16 exact, then 16 per octave.
pub const FINE_BINS: usize = (SUB + (31 - 3) * SUB) as usize;

/// Fine-histogram bin of `v` (log-linear: HDR-histogram style with 4 mantissa bits).
#[inline]
pub fn fine_bin(v: u32) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 31 - v.leading_zeros(); // >= 4
    (SUB + (e - 4) * SUB + ((v >> (e - 4)) & (SUB - 1))) as usize
}

/// The smallest value in fine bin `b` (the inverse of [`fine_bin`] at bin starts).
pub fn fine_bin_low(b: usize) -> u64 {
    let b = b as u64;
    let sub = u64::from(SUB);
    if b < sub {
        return b;
    }
    let e = (b - sub) / sub + 4;
    let m = (b - sub) % sub;
    (1u64 << e) + (m << (e - 4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fine_bins_cover_u32_monotonically() {
        assert_eq!(fine_bin(u32::MAX), FINE_BINS - 1);
        for v in (0..40u32).chain((5..32).flat_map(|e| [(1u32 << e) - 1, 1 << e, (1 << e) + 1])) {
            let b = fine_bin(v);
            assert!(fine_bin_low(b) <= u64::from(v), "{v} in bin {b}");
            assert!(
                b + 1 == FINE_BINS || fine_bin_low(b + 1) > u64::from(v),
                "{v}"
            );
        }
        for b in 0..FINE_BINS {
            assert_eq!(fine_bin(fine_bin_low(b) as u32), b);
        }
    }

    #[test]
    fn bad_edge_lists_are_refused_by_name() {
        let ok = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
        assert_eq!(parse_edges("lat", &ok), Ok([1, 2, 3, 4, 5, 6, 7]));
        assert_eq!(
            parse_edges("lat", &ok[..6]),
            Err(EdgeError::Count {
                which: "lat",
                got: 6
            })
        );
        let mut nan = ok;
        nan[3] = f64::NAN;
        assert_eq!(
            parse_edges("iat", &nan),
            Err(EdgeError::NotANumber {
                which: "iat",
                index: 3
            })
        );
        let mut down = ok;
        down[5] = 4.0;
        assert!(matches!(
            parse_edges("lat", &down),
            Err(EdgeError::NotIncreasing { index: 5, .. })
        ));
        let mut neg = ok;
        neg[0] = -1.0;
        assert!(matches!(
            parse_edges("lat", &neg),
            Err(EdgeError::Range { index: 0, .. })
        ));
        // 1.2 and 1.7 are distinct floats but the same ns.
        let close = [1.2, 1.7, 3.0, 4.0, 5.0, 6.0, 7.0];
        assert!(matches!(
            parse_edges("lat", &close),
            Err(EdgeError::NotIncreasing { index: 1, .. })
        ));
        let msg = parse_edges("latency", &down).unwrap_err().to_string();
        assert!(msg.contains("latency") && msg.contains("increase"), "{msg}");
    }
}
