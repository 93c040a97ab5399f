//! The `[int]` section of the daemon's configuration (docs/int.md): the node's roles, the
//! report encoding and timestamp format, the rule and report sockets, MTU, re-send interval
//! and IOAM hop budget, and the stage configuration built from it.

use crate::error::{invalid, ConfigError};
use peregrine_int::gate::GateConfig;
use peregrine_int::stages::IntConfig;
use peregrine_int_manager as manager;
use peregrine_wire::int::TsFormat;
use serde::Deserialize;

/// What a node does in the `int` pipeline (seed III-C to III-E).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// INTSource: adds INT to matching flows (and sends piggy-back reports).
    Source,
    /// INTInter: fills this node's hop entry.
    Transit,
    /// INTSink: reports and strips.
    Sink,
}

/// Encoding of published reports.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ReportEncoding {
    #[default]
    Json,
    Cbor,
}

/// IOAM timestamp fraction format (RFC 9197 section 5).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum TimestampFormat {
    /// Microseconds, what Linux writes (the default, so mixed paths agree).
    #[default]
    Posix,
    /// Nanoseconds (PTP truncated).
    Ptp,
}

/// The `[int]` section.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IntSection {
    /// This node's ID (16 bits in the seed layout; the IOAM node_id gets the same value).
    pub node_id: u16,
    /// The INT elements, any of source / transit / sink (`int` pipeline: all run before
    /// l3fwd; `upf` pipeline: placed by `n6_in` / `n6_out`).
    pub roles: Vec<Role>,
    /// ZeroMQ REP endpoint of the rule API.
    #[serde(default = "default_rules")]
    pub rules: String,
    /// ZeroMQ PUB endpoint of the reports.
    #[serde(default = "default_reports")]
    pub reports: String,
    /// Largest IPv6 packet on the egress links; INT is skipped above it (III-C, III-D).
    #[serde(default = "default_mtu")]
    pub mtu: usize,
    /// Namespaces whose rules use the seed's wire layout (docs/int.md); others use IOAM.
    #[serde(default)]
    pub seed_namespaces: Vec<u16>,
    /// Encoding of published reports.
    #[serde(default)]
    pub report_encoding: ReportEncoding,
    /// IOAM timestamp fraction format of every IOAM namespace on this node.
    #[serde(default)]
    pub timestamp: TimestampFormat,
    /// IOAM: pre-allocated entries for transit hops (the source adds one for itself).
    #[serde(default = "default_ioam_hops")]
    pub ioam_hops: u8,
    /// Ports whose received packets the source instruments (the host-facing edge); empty:
    /// all. Needed when a node is both sink and source.
    #[serde(default)]
    pub source_ports: Vec<String>,
    /// `upf` pipeline only: the N6 ports (data network side) the INT stages apply to.
    #[serde(default)]
    pub n6_ports: Vec<String>,
    /// `upf` pipeline only: elements run on packets received on `n6_ports` (downlink), before
    /// the UPF stage encapsulates them. Default: the sink and transit of `roles`.
    pub n6_in: Option<Vec<Role>>,
    /// `upf` pipeline only: elements run on packets leaving on `n6_ports` (uplink, after
    /// decap: the inner IPv6 of the G-PDU), before tx. Default: the source of `roles`.
    pub n6_out: Option<Vec<Role>>,
    /// The source re-sends each namespace's in-band request (0x32) this often, ms (seed
    /// III-B.2: 60 s by default), so nodes newly on the path learn the namespace.
    #[serde(default = "default_resend_ms")]
    pub resend_interval_ms: u64,
    /// `[int.gate]`: the sketch-INT co-design gate at the source (docs/codesign.md).
    #[serde(default)]
    pub gate: Option<GateConfig>,
}

/// Order of the elements at one place: sink first (strips what arrived), then transit, then
/// source (adds ours), so a node never reports or re-instruments its own INT.
const ORDER: [Role; 3] = [Role::Sink, Role::Transit, Role::Source];

fn default_rules() -> String {
    manager::DEFAULT_RULES_ENDPOINT.into()
}
fn default_reports() -> String {
    manager::DEFAULT_REPORTS_ENDPOINT.into()
}
fn default_mtu() -> usize {
    1500
}
fn default_resend_ms() -> u64 {
    60_000
}
fn default_ioam_hops() -> u8 {
    5
}

impl IntSection {
    pub fn has(&self, r: Role) -> bool {
        self.roles.contains(&r)
    }

    /// The elements at N6 ingress (`n6_in`), in pipeline order.
    pub fn n6_in_roles(&self) -> Vec<Role> {
        let v = self.n6_in.clone().unwrap_or_else(|| {
            self.roles
                .iter()
                .copied()
                .filter(|r| *r != Role::Source)
                .collect()
        });
        ORDER.into_iter().filter(|r| v.contains(r)).collect()
    }

    /// The elements at N6 egress (`n6_out`), in pipeline order.
    pub fn n6_out_roles(&self) -> Vec<Role> {
        let v = self.n6_out.clone().unwrap_or_else(|| {
            self.roles
                .iter()
                .copied()
                .filter(|r| *r == Role::Source)
                .collect()
        });
        ORDER.into_iter().filter(|r| v.contains(r)).collect()
    }

    /// The N6 ports' indices.
    pub fn n6_port_ids(&self, port_index: impl Fn(&str) -> Option<u16>) -> Vec<u16> {
        self.n6_ports.iter().filter_map(|p| port_index(p)).collect()
    }

    /// The `upf` pipeline's extra checks: N6 ports named and existing, every placed element
    /// listed in `roles`, something placed.
    pub fn validate_upf(
        &self,
        port_index: impl Fn(&str) -> Option<u16>,
    ) -> Result<(), ConfigError> {
        self.validate(&port_index)?;
        if self.n6_ports.is_empty() {
            return Err(invalid(
                "int.n6_ports",
                "the upf pipeline needs the N6 port names INT applies to",
            ));
        }
        for (i, p) in self.n6_ports.iter().enumerate() {
            if port_index(p).is_none() {
                return Err(invalid(
                    format!("int.n6_ports[{i}]"),
                    format!("no port named `{p}`"),
                ));
            }
        }
        for (f, l) in [("int.n6_in", &self.n6_in), ("int.n6_out", &self.n6_out)] {
            for r in l.iter().flatten() {
                if !self.has(*r) {
                    return Err(invalid(f, format!("{r:?} is not in int.roles")));
                }
            }
        }
        if self.n6_in_roles().is_empty() && self.n6_out_roles().is_empty() {
            return Err(invalid(
                "int.n6_in",
                "no INT element placed: name one in int.n6_in or int.n6_out",
            ));
        }
        Ok(())
    }

    pub fn validate(&self, port_index: impl Fn(&str) -> Option<u16>) -> Result<(), ConfigError> {
        if self.roles.is_empty() {
            return Err(invalid(
                "int.roles",
                "name at least one of \"source\", \"transit\", \"sink\"",
            ));
        }
        for (i, r) in self.roles.iter().enumerate() {
            if self.roles[..i].contains(r) {
                return Err(invalid("int.roles", format!("{r:?} is listed twice")));
            }
        }
        if !(1280..=9216).contains(&self.mtu) {
            return Err(invalid(
                "int.mtu",
                format!(
                    "must be 1280..=9216 (IPv6 minimum MTU to jumbo), got {}",
                    self.mtu
                ),
            ));
        }
        if self.ioam_hops == 0 || self.ioam_hops > 32 {
            return Err(invalid(
                "int.ioam_hops",
                format!("must be 1..=32, got {}", self.ioam_hops),
            ));
        }
        for (f, ep) in [("int.rules", &self.rules), ("int.reports", &self.reports)] {
            if !ep.contains("://") {
                return Err(invalid(
                    f,
                    format!("`{ep}` is not a ZeroMQ endpoint like tcp://127.0.0.1:5555"),
                ));
            }
        }
        if !(100..=3_600_000).contains(&self.resend_interval_ms) {
            return Err(invalid(
                "int.resend_interval_ms",
                format!(
                    "must be 100..=3600000 (0.1 s to an hour), got {}",
                    self.resend_interval_ms
                ),
            ));
        }
        if let Some(g) = &self.gate {
            g.validate()
                .map_err(|e| invalid("int.gate", e.to_string()))?;
            if !self.roles.contains(&Role::Source) {
                return Err(invalid(
                    "int.gate",
                    "the gate acts at the source: add \"source\" to int.roles",
                ));
            }
        }
        if self.rules == self.reports {
            return Err(invalid("int.reports", "must differ from int.rules"));
        }
        for (i, p) in self.source_ports.iter().enumerate() {
            if port_index(p).is_none() {
                return Err(invalid(
                    format!("int.source_ports[{i}]"),
                    format!("no port named `{p}`"),
                ));
            }
        }
        Ok(())
    }

    /// The stages' configuration.
    pub fn stage_config(&self, port_index: impl Fn(&str) -> Option<u16>) -> IntConfig {
        let mut seed = self.seed_namespaces.clone();
        seed.sort_unstable();
        seed.dedup();
        IntConfig {
            node_id: self.node_id,
            mtu: self.mtu,
            seed_namespaces: seed,
            ioam_hops: self.ioam_hops,
            ioam_timestamp: match self.timestamp {
                TimestampFormat::Posix => TsFormat::Posix,
                TimestampFormat::Ptp => TsFormat::Ptp,
            },
            // Reports compare timestamps of different nodes (and Linux's): wall clock.
            wall_clock: true,
            hop_limit_after_forward: true,
            source_ports: self
                .source_ports
                .iter()
                .filter_map(|p| port_index(p))
                .collect(),
            gate: self.gate.clone(),
            resend_interval_ns: self.resend_interval_ms * 1_000_000,
            ..IntConfig::default()
        }
    }
}
