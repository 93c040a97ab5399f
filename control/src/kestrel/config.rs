//! The `[kestrel]` configuration section (docs/kestrel.md, "Configuration"): layout,
//! export endpoints, baselines, binning and drift, initial edges, detectors.

use super::{binning, detect};
use crate::error::{invalid, ConfigError};
use binning::Strategy;
use peregrine_dataplane::telemetry::kestrel::{
    layout, parse_edges, Deltas, EdgeSet, IndexHash, Layout, QidEdges,
};
use serde::Deserialize;

pub const DEFAULT_PUBLISH: &str = "tcp://127.0.0.1:5571";
pub const DEFAULT_API: &str = "tcp://127.0.0.1:5572";

/// `[[kestrel.edges]]`: one QID's edges, ns.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EdgesConf {
    pub qid: usize,
    pub lat: Vec<f64>,
    pub iat: Vec<f64>,
}

/// `[kestrel.postcards]`: the Delta-SMP baseline; both deltas 0 = full postcards.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PostcardsConf {
    /// A postcard when the sojourn moved by more than this since the flow's last one, ns.
    pub sojourn_ns: u32,
    /// ... or the inter-arrival time did, ns (a colour change always exports).
    pub iat_ns: u32,
}

impl PostcardsConf {
    pub fn deltas(&self) -> Deltas {
        Deltas {
            sojourn_ns: self.sojourn_ns,
            iat_ns: self.iat_ns,
        }
    }
}

/// The `[kestrel]` section.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KestrelSection {
    #[serde(default = "d_window_ms")]
    pub window_ms: u64,
    #[serde(default = "d_qids")]
    pub qids: usize,
    #[serde(default = "d_rows")]
    pub rows: usize,
    #[serde(default = "d_width")]
    pub width: usize,
    /// One hash seed per QID (default: splitmix64 of the QID; its top 32 bits for crc32).
    pub seeds: Option<Vec<u64>>,
    /// Index hash: `splitmix64` (default) or `crc32`, the one the P4 twin computes.
    #[serde(default)]
    pub hash: HashConf,
    /// ZeroMQ PUB endpoint of the exports; "" for none.
    #[serde(default = "d_publish")]
    pub publish: String,
    /// ZeroMQ REP endpoint of the edge API; "" for none.
    #[serde(default = "d_api")]
    pub api: String,
    /// Append every export to this file (a CBOR sequence).
    pub windows_file: Option<String>,
    /// Export the 3GPP-PM per-QFI counters too.
    #[serde(default = "d_true")]
    pub pm: bool,
    /// Delta-SMP postcards (off without the table).
    pub postcards: Option<PostcardsConf>,
    /// Edge placement.
    #[serde(default = "d_strategy")]
    pub strategy: Strategy,
    /// Target diagnostic occupancy.
    #[serde(default = "d_rho")]
    pub rho: f64,
    /// Drift (`drift::DriftRule`): M, the evidence (significant tested windows less
    /// `drift_penalty` per other tested window) at which a QID is re-calibrated.
    #[serde(default = "d_m")]
    pub drift_windows: u32,
    #[serde(default = "d_penalty")]
    pub drift_penalty: u32,
    /// One-sided z of the per-window test of the diagnostic count against Binomial(n, rho).
    #[serde(default = "d_z")]
    pub drift_z: f64,
    /// Windows of a QID with fewer packets are not tested.
    #[serde(default = "d_min_packets")]
    pub drift_min_packets: u64,
    /// Windows with packets a calibration period lasts.
    #[serde(default = "d_cal")]
    pub calibration_windows: u32,
    /// Initial per-QID edges (else the defaults until calibrated).
    #[serde(default)]
    pub edges: Vec<EdgesConf>,
    /// The online detectors (off without the table).
    pub detect: Option<detect::DetectConf>,
    /// Windows the daemon's collector keeps for queries (the edge API's `key` and `top`).
    #[serde(default = "d_keep")]
    pub collector_windows: usize,
}

fn d_keep() -> usize {
    8
}

fn d_window_ms() -> u64 {
    1000
}
fn d_qids() -> usize {
    8
}
fn d_rows() -> usize {
    3
}
fn d_width() -> usize {
    512
}
fn d_publish() -> String {
    DEFAULT_PUBLISH.into()
}
fn d_api() -> String {
    DEFAULT_API.into()
}
fn d_true() -> bool {
    true
}
fn d_strategy() -> Strategy {
    Strategy::Target
}
fn d_rho() -> f64 {
    0.01
}
fn d_m() -> u32 {
    binning::DEFAULT_DRIFT_WINDOWS
}
fn d_penalty() -> u32 {
    binning::DEFAULT_DRIFT_PENALTY
}
fn d_z() -> f64 {
    binning::DEFAULT_DRIFT_Z
}
fn d_min_packets() -> u64 {
    binning::DEFAULT_DRIFT_MIN_PACKETS
}
fn d_cal() -> u32 {
    binning::DEFAULT_CALIBRATION_WINDOWS
}

/// `kestrel.hash`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum HashConf {
    #[default]
    Splitmix64,
    Crc32,
}

impl HashConf {
    pub fn index_hash(self) -> IndexHash {
        match self {
            HashConf::Splitmix64 => IndexHash::Splitmix64,
            HashConf::Crc32 => IndexHash::Crc32,
        }
    }
}

impl KestrelSection {
    pub fn layout(&self) -> Result<Layout, ConfigError> {
        let h = self.hash.index_hash();
        let seeds = self.seeds.clone().unwrap_or_else(|| match h {
            IndexHash::Splitmix64 => layout::default_seeds(self.qids),
            IndexHash::Crc32 => layout::default_crc_seeds(self.qids),
        });
        Layout::new(self.qids, self.rows, self.width, seeds)
            .and_then(|l| l.with_hash(h))
            .map_err(|e| invalid("kestrel", e.to_string()))
    }

    /// The drift rule, refused with the key named when a value is out of range.
    pub fn drift_rule(&self) -> Result<binning::DriftRule, ConfigError> {
        let r = binning::DriftRule {
            rho: self.rho,
            m: self.drift_windows,
            penalty: self.drift_penalty,
            z: self.drift_z,
            min_packets: self.drift_min_packets,
            calibration_windows: self.calibration_windows,
        };
        r.check()
            .map_err(|(k, e)| invalid(format!("kestrel.{k}"), e))?;
        Ok(r)
    }

    /// The `[[kestrel.edges]]` as an edge set (defaults for QIDs not named).
    pub fn initial_edges(&self, qids: usize) -> Result<EdgeSet, ConfigError> {
        let mut set = EdgeSet::default();
        for (i, e) in self.edges.iter().enumerate() {
            if e.qid >= qids {
                return Err(invalid(
                    format!("kestrel.edges[{i}].qid"),
                    format!("QID {} is not configured (QIDs are 0..{qids})", e.qid),
                ));
            }
            let f = |w: &'static str, v: &[f64]| {
                parse_edges(w, v)
                    .map_err(|x| invalid(format!("kestrel.edges[{i}].{w}"), x.to_string()))
            };
            set.qids[e.qid] = QidEdges {
                lat: f("lat", &e.lat)?,
                iat: f("iat", &e.iat)?,
            };
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(extra: &str) -> KestrelSection {
        toml::from_str(&format!("qids = 2\n{extra}")).unwrap()
    }

    #[test]
    fn kestrel_hash_selects_the_index_hash_and_its_seeds() {
        assert_eq!(section("").layout().unwrap().hash, IndexHash::Splitmix64);
        let l = section("hash = \"crc32\"").layout().unwrap();
        assert_eq!(l.hash, IndexHash::Crc32);
        assert_eq!(l.seeds, layout::default_crc_seeds(2));
        let e = section("hash = \"crc32\"\nseeds = [1, 4294967296]")
            .layout()
            .unwrap_err()
            .to_string();
        assert!(e.contains("kestrel") && e.contains("32-bit seed"), "{e}");
        let e = section("hash = \"crc32\"\nrows = 4")
            .layout()
            .unwrap_err()
            .to_string();
        assert!(e.contains("crc32 index hash gives 32"), "{e}");
        assert!(toml::from_str::<KestrelSection>("hash = \"md5\"").is_err());
    }

    #[test]
    fn kestrel_drift_rule_defaults_and_bad_values_are_refused_by_key() {
        let r = section("").drift_rule().unwrap();
        assert_eq!(r, binning::DriftRule::default());
        for (extra, says) in [
            ("drift_z = 0.0", "kestrel.drift_z"),
            ("drift_z = -2.0", "kestrel.drift_z"),
            ("drift_z = nan", "kestrel.drift_z"),
            ("drift_min_packets = 0", "kestrel.drift_min_packets"),
            ("drift_windows = 0", "kestrel.drift_windows"),
            ("drift_penalty = 0", "kestrel.drift_penalty"),
            ("rho = 0.0", "kestrel.rho"),
        ] {
            let e = section(extra).drift_rule().unwrap_err().to_string();
            assert!(e.contains(says), "{extra}: {e}");
        }
    }
}
