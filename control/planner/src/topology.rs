//! The planner's input: a topology file in JSON (format in `docs/codesign.md`, "Topology file").
//!
//! Parsing is two steps: serde_json turns text into [`TopologyFile`] (a syntax or type error
//! names its line and column), then [`Topology::from_file`] checks the meaning (unknown node,
//! duplicate id, non-positive capacity, no control node, ...) and names the offending entry
//! by its JSON path, e.g. `links[3].b`. Nothing is silently dropped.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One node (switch) as written in the file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Unique name.
    pub id: String,
    /// In P: can run the sketch and the INT source (a measurement point candidate).
    #[serde(default)]
    pub programmable: bool,
    /// In C: a control-plane node (collector).
    #[serde(default)]
    pub control: bool,
}

/// One full-duplex link as written in the file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub a: String,
    pub b: String,
    /// Capacity of each direction, bit/s.
    pub capacity_bps: f64,
    /// Normal (data) load on each direction, bit/s.
    #[serde(default)]
    pub load_bps: f64,
    /// Routing weight (shortest paths and delta(p, c)); hop count by default.
    #[serde(default = "one")]
    pub weight: u32,
}

fn one() -> u32 {
    1
}

/// One flow (an OD pair) as written in the file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    pub src: String,
    pub dst: String,
}

/// Telemetry parameters of the collection-rate model (the draft's gamma_sketch and gamma_INT).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySpec {
    /// S: sketch memory exported per window, bytes.
    pub sketch_bytes: f64,
    /// T: export window, seconds.
    pub window_s: f64,
    /// phi: largest share of a node's capacity that small flows use.
    pub small_flow_share: f64,
    /// mu: mean packet size of small flows, bytes.
    pub small_pkt_bytes: f64,
    /// B_INT: INT bytes each small-flow packet carries out of the node.
    pub int_bytes_per_pkt: f64,
}

impl Default for TelemetrySpec {
    fn default() -> Self {
        // 64 KiB sketch every 100 ms; 10 % small-flow share at 200 B; 12 B of INT per packet
        // (the draft's INT-spec figure).
        TelemetrySpec {
            sketch_bytes: 65536.0,
            window_s: 0.1,
            small_flow_share: 0.1,
            small_pkt_bytes: 200.0,
            int_bytes_per_pkt: 12.0,
        }
    }
}

/// Planner parameters (all optional in the file).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ParamsSpec {
    /// alpha in [0, 1]: weight of the uncovered-flow term against the collection distance.
    pub alpha: f64,
    /// theta: safety threshold, a fraction of each link's capacity.
    pub safety: f64,
    /// K: candidate collection paths per measurement point.
    pub k_paths: usize,
}

impl Default for ParamsSpec {
    fn default() -> Self {
        ParamsSpec {
            alpha: 0.5,
            safety: 0.8,
            k_paths: 3,
        }
    }
}

/// The whole file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TopologyFile {
    pub nodes: Vec<NodeSpec>,
    pub links: Vec<LinkSpec>,
    #[serde(default)]
    pub flows: Vec<FlowSpec>,
    #[serde(default)]
    pub telemetry: TelemetrySpec,
    #[serde(default)]
    pub params: ParamsSpec,
}

/// Why a topology file was refused.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// Not JSON, or not the schema; serde_json's message ends with "at line L column C".
    #[error("topology file: {0}")]
    Syntax(#[from] serde_json::Error),
    /// Valid JSON, wrong meaning: `at` is the JSON path of the entry.
    #[error("topology file: {at}: {reason}")]
    Invalid { at: String, reason: String },
}

fn invalid(at: impl Into<String>, reason: impl Into<String>) -> TopologyError {
    TopologyError::Invalid {
        at: at.into(),
        reason: reason.into(),
    }
}

/// A link direction in the checked topology: `from -> to`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arc {
    pub from: usize,
    pub to: usize,
    pub capacity_bps: f64,
    pub load_bps: f64,
    pub weight: u32,
}

/// A checked topology with dense node indices. Each file link becomes two arcs (2i, 2i+1).
#[derive(Clone, Debug)]
pub struct Topology {
    pub names: Vec<String>,
    pub programmable: Vec<bool>,
    pub control: Vec<bool>,
    pub arcs: Vec<Arc>,
    /// Outgoing arc indices per node.
    pub out: Vec<Vec<usize>>,
    /// (origin, destination) node indices.
    pub flows: Vec<(usize, usize)>,
    pub telemetry: TelemetrySpec,
    pub params: ParamsSpec,
}

impl Topology {
    /// Parse and check JSON text.
    pub fn from_json(text: &str) -> Result<Topology, TopologyError> {
        let file: TopologyFile = serde_json::from_str(text)?;
        Topology::from_file(&file)
    }

    /// Check a parsed file.
    pub fn from_file(f: &TopologyFile) -> Result<Topology, TopologyError> {
        if f.nodes.is_empty() {
            return Err(invalid("nodes", "no nodes"));
        }
        let mut index = HashMap::new();
        for (i, n) in f.nodes.iter().enumerate() {
            if n.id.is_empty() {
                return Err(invalid(format!("nodes[{i}].id"), "empty id"));
            }
            if index.insert(n.id.as_str(), i).is_some() {
                return Err(invalid(
                    format!("nodes[{i}].id"),
                    format!("duplicate node id {:?}", n.id),
                ));
            }
        }
        if !f.nodes.iter().any(|n| n.control) {
            return Err(invalid(
                "nodes",
                "no control node (set \"control\": true on one)",
            ));
        }
        let node = |at: String, id: &str| {
            index
                .get(id)
                .copied()
                .ok_or_else(|| invalid(at, format!("unknown node {id:?}")))
        };
        let n = f.nodes.len();
        let mut arcs = Vec::with_capacity(2 * f.links.len());
        let mut out = vec![Vec::new(); n];
        let mut seen = HashMap::new();
        for (i, l) in f.links.iter().enumerate() {
            let a = node(format!("links[{i}].a"), &l.a)?;
            let b = node(format!("links[{i}].b"), &l.b)?;
            if a == b {
                return Err(invalid(format!("links[{i}]"), "link from a node to itself"));
            }
            if let Some(j) = seen.insert((a.min(b), a.max(b)), i) {
                return Err(invalid(
                    format!("links[{i}]"),
                    format!("duplicate of links[{j}] ({} - {})", l.a, l.b),
                ));
            }
            if !(l.capacity_bps.is_finite() && l.capacity_bps > 0.0) {
                return Err(invalid(
                    format!("links[{i}].capacity_bps"),
                    "must be a positive number",
                ));
            }
            if !(l.load_bps.is_finite() && l.load_bps >= 0.0) {
                return Err(invalid(format!("links[{i}].load_bps"), "must be >= 0"));
            }
            if l.weight == 0 {
                return Err(invalid(format!("links[{i}].weight"), "must be >= 1"));
            }
            for (from, to) in [(a, b), (b, a)] {
                out[from].push(arcs.len());
                arcs.push(Arc {
                    from,
                    to,
                    capacity_bps: l.capacity_bps,
                    load_bps: l.load_bps,
                    weight: l.weight,
                });
            }
        }
        let mut flows = Vec::with_capacity(f.flows.len());
        for (i, fl) in f.flows.iter().enumerate() {
            let o = node(format!("flows[{i}].src"), &fl.src)?;
            let d = node(format!("flows[{i}].dst"), &fl.dst)?;
            flows.push((o, d));
        }
        check_telemetry(&f.telemetry)?;
        let p = &f.params;
        if !(0.0..=1.0).contains(&p.alpha) {
            return Err(invalid("params.alpha", "must be in [0, 1]"));
        }
        if !(p.safety > 0.0 && p.safety <= 1.0) {
            return Err(invalid("params.safety", "must be in (0, 1]"));
        }
        if p.k_paths == 0 || p.k_paths > 64 {
            return Err(invalid("params.k_paths", "must be in 1..=64"));
        }
        Ok(Topology {
            names: f.nodes.iter().map(|n| n.id.clone()).collect(),
            programmable: f.nodes.iter().map(|n| n.programmable).collect(),
            control: f.nodes.iter().map(|n| n.control).collect(),
            arcs,
            out,
            flows,
            telemetry: f.telemetry.clone(),
            params: f.params.clone(),
        })
    }

    pub fn node_count(&self) -> usize {
        self.names.len()
    }
}

fn check_telemetry(t: &TelemetrySpec) -> Result<(), TopologyError> {
    let positive = [
        ("telemetry.window_s", t.window_s),
        ("telemetry.small_pkt_bytes", t.small_pkt_bytes),
    ];
    for (at, v) in positive {
        if !(v.is_finite() && v > 0.0) {
            return Err(invalid(at, "must be a positive number"));
        }
    }
    let non_negative = [
        ("telemetry.sketch_bytes", t.sketch_bytes),
        ("telemetry.int_bytes_per_pkt", t.int_bytes_per_pkt),
    ];
    for (at, v) in non_negative {
        if !(v.is_finite() && v >= 0.0) {
            return Err(invalid(at, "must be >= 0"));
        }
    }
    if !(0.0..=1.0).contains(&t.small_flow_share) {
        return Err(invalid("telemetry.small_flow_share", "must be in [0, 1]"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{
  "nodes": [
    {"id": "a", "programmable": true},
    {"id": "b", "control": true},
    {"id": "c", "programmable": true}
  ],
  "links": [
    {"a": "a", "b": "b", "capacity_bps": 1e9},
    {"a": "b", "b": "c", "capacity_bps": 1e9, "load_bps": 1e8, "weight": 2}
  ],
  "flows": [{"src": "a", "dst": "c"}]
}"#;

    #[test]
    fn good_file_parses() {
        let t = Topology::from_json(GOOD).unwrap();
        assert_eq!(t.node_count(), 3);
        assert_eq!(t.arcs.len(), 4);
        assert_eq!(t.flows, vec![(0, 2)]);
        assert_eq!(t.arcs[2].weight, 2);
        assert_eq!(t.params.safety, 0.8);
    }

    fn err(text: &str) -> String {
        Topology::from_json(text).unwrap_err().to_string()
    }

    #[test]
    fn syntax_error_names_the_line() {
        let bad = GOOD.replace("\"capacity_bps\": 1e9}", "\"capacity_bps\": 1e9,}");
        let e = err(&bad);
        assert!(e.contains("line 8"), "{e}");
        let typo = GOOD.replace("\"programmable\": true}", "\"programable\": true}");
        let e = err(&typo);
        assert!(
            e.contains("unknown field `programable`") && e.contains("line 3"),
            "{e}"
        );
        let wrong_type = GOOD.replace("1e8", "\"fast\"");
        assert!(err(&wrong_type).contains("line 9"), "{}", err(&wrong_type));
    }

    #[test]
    fn meaning_errors_name_the_entry() {
        let cases = [
            (
                GOOD.replace("\"b\": \"c\"", "\"b\": \"z\""),
                "links[1].b: unknown node \"z\"",
            ),
            (
                GOOD.replace("\"id\": \"c\"", "\"id\": \"a\""),
                "nodes[2].id: duplicate",
            ),
            (
                GOOD.replace("\"control\": true", "\"control\": false"),
                "no control node",
            ),
            (
                GOOD.replace("\"dst\": \"c\"", "\"dst\": \"q\""),
                "flows[0].dst",
            ),
            (GOOD.replace("1e9}", "-1}"), "links[0].capacity_bps"),
            (
                GOOD.replace("\"weight\": 2", "\"weight\": 0"),
                "links[1].weight",
            ),
            (
                GOOD.replace("\"b\": \"c\"", "\"b\": \"b\""),
                "links[1]: link from a node to itself",
            ),
            (
                GOOD.replace("\"flows\"", "\"params\": {\"alpha\": 1.5}, \"flows\""),
                "params.alpha",
            ),
        ];
        for (text, want) in cases {
            let e = err(&text);
            assert!(e.contains(want), "{e} does not contain {want}");
        }
    }

    /// Seeded byte mutations of a good file (flip, delete, duplicate, insert JSON
    /// punctuation) never panic: each is refused with a message, or parsed and planned.
    #[test]
    fn mutated_files_are_refused_or_parsed_never_panic() {
        let mut rng = crate::gen::Rng::new(9);
        let base = GOOD.as_bytes();
        let tokens: &[&[u8]] = &[
            b"{", b"}", b"[", b"]", b",", b":", b"\"", b"-1", b"1e999", b"null", b"0",
        ];
        let (mut ok, mut refused) = (0, 0);
        for _ in 0..3000 {
            let mut b = base.to_vec();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(b.len());
                match rng.below(4) {
                    0 => b[at] ^= 1 << rng.below(8),
                    1 => {
                        b.remove(at);
                    }
                    2 => {
                        let end = (at + rng.below(16)).min(b.len());
                        let dup = b[at..end].to_vec();
                        b.splice(at..at, dup);
                    }
                    _ => {
                        let t = tokens[rng.below(tokens.len())];
                        b.splice(at..at, t.iter().copied());
                    }
                }
            }
            let text = String::from_utf8_lossy(&b);
            match Topology::from_json(&text) {
                Ok(t) => {
                    // A file that parses plans (or reports an LP error) without panicking.
                    let _ = crate::plan(&t);
                    ok += 1;
                }
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    refused += 1;
                }
            }
        }
        assert!(ok > 0 && refused > 0, "ok {ok}, refused {refused}");
    }
}
