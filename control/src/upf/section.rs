//! `[upf]`: the UPF's addresses, N4, limits, QoS, egress schedulers and static sessions,
//! and what the daemon derives from them (compiler, egress configuration).

use crate::error::{invalid, ConfigError};
use peregrine_dataplane::qos::scheduler::{QfiMap, SchedulerConfig, ShaperConfig, NUM_QFI};
use peregrine_dataplane::runtime::egress::EgressConfig;
use peregrine_dataplane::upf::reasm::{ReasmConfig, MAX_DATAGRAM};
use peregrine_n4::Session;
use peregrine_pfcp::ie::NodeId;
use peregrine_rules::static_sessions::{
    self, N3Addresses, OuterMix, StaticSession, SyntheticParams,
};
use peregrine_rules::{Compiler, CompilerConfig};
use serde::Deserialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Static sessions get SEIDs with the top bit set, so they never meet the SEIDs the N4 node
/// allocates (which count up from 1).
pub const STATIC_SEID_BIT: u64 = 1 << 63;

/// `[upf]`: the UPF's addresses, N4, limits, QoS and static sessions.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UpfSection {
    /// PFCP Node ID: an IP address or an FQDN.
    pub node_id: String,
    /// Local GTP-U (N3/N9) addresses, at most one per family.
    pub n3: Vec<IpAddr>,
    /// N6 addresses: sources of ICMP errors sent toward data-network hosts.
    #[serde(default)]
    pub n6: Vec<IpAddr>,
    /// PFCP listen addresses (UDP, usually port 8805); empty: static sessions only.
    #[serde(default)]
    pub pfcp: Vec<SocketAddr>,
    #[serde(default = "default_max_sessions")]
    pub max_sessions: usize,
    /// Largest outer IP packet sent; bigger ones get ICMP errors (see the UPF stage docs).
    #[serde(default = "default_mtu")]
    pub mtu: u16,
    #[serde(default = "default_ei_pps")]
    pub error_indication_pps: u32,
    /// How often URR usage is collected from the workers and checked against triggers.
    #[serde(default = "default_usage_ms")]
    pub usage_interval_ms: u64,
    /// Heartbeat Requests to each associated SMF, seconds.
    #[serde(default = "default_heartbeat_s")]
    pub heartbeat_interval_s: u64,
    /// GTP-U Echo Request to each peer in use (TS 29.281 section 7.2.1), seconds; 0 = off.
    #[serde(default = "default_echo_interval_s")]
    pub echo_interval_s: u64,
    /// Unanswered Echo Requests are repeated after `echo_t3_s` up to `echo_n3` times, then
    /// the path has failed (reported to the SMF in a Node Report Request).
    #[serde(default = "default_echo_t3_s")]
    pub echo_t3_s: u64,
    #[serde(default = "default_echo_n3")]
    pub echo_n3: u32,
    /// F-TEID CHOOSE reuses a released TEID only this long after its release, seconds: late
    /// G-PDUs of the old session must not reach the new one (docs/upf.md, N4).
    #[serde(default = "default_teid_reuse_after_s")]
    pub teid_reuse_after_s: u64,
    /// Overrides of the default QFI -> egress queue map: `[[qfi, qid], ...]`.
    #[serde(default)]
    pub qfi_to_qid: Vec<[u8; 2]>,
    /// Ports whose received TCP/UDP checksums are recomputed (peers with checksum offload,
    /// e.g. veths, leave them partial; `upf::offload`).
    #[serde(default)]
    pub fix_l4_checksums: Vec<String>,
    /// MBR enforcement: policing bursts or shaping, per QFI (`upf::qos`).
    #[serde(default)]
    pub qos: super::qos::QosSection,
    /// Ports with the 8-queue egress scheduler (SP + WRR) and optional shaper.
    #[serde(default)]
    pub egress: Vec<EgressPort>,
    /// Statically configured sessions (no SMF needed).
    #[serde(default)]
    pub session: Vec<StaticSession>,
    /// Generated sessions numbered like `pg-gen`'s traffic.
    pub synthetic: Option<Synthetic>,
    /// Limits of the per-worker reassembly of outer fragments to our N3/N9 addresses.
    #[serde(default)]
    pub reassembly: Reassembly,
}

/// `[upf.reassembly]`: per-worker limits of outer-fragment reassembly
/// (`peregrine_dataplane::upf::reasm`).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Reassembly {
    /// Datagrams in reassembly at once.
    pub max_datagrams: usize,
    /// Largest reassembled datagram, bytes after its IP header.
    pub max_datagram_bytes: usize,
    /// Fragment bytes held at once.
    pub max_bytes: usize,
    /// Datagrams one source may have in reassembly.
    pub max_per_source: usize,
    /// Give a datagram up this long after its first fragment.
    pub timeout_ms: u64,
}

impl Default for Reassembly {
    fn default() -> Self {
        let d = ReasmConfig::default();
        Reassembly {
            max_datagrams: d.max_datagrams,
            max_datagram_bytes: d.max_datagram,
            max_bytes: d.max_bytes,
            max_per_source: d.max_per_source,
            timeout_ms: d.timeout_ns / 1_000_000,
        }
    }
}

impl Reassembly {
    /// The stage's form.
    pub fn config(&self) -> ReasmConfig {
        ReasmConfig {
            max_datagrams: self.max_datagrams,
            max_datagram: self.max_datagram_bytes,
            max_bytes: self.max_bytes,
            max_per_source: self.max_per_source,
            timeout_ns: self.timeout_ms.saturating_mul(1_000_000),
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let f = |k: &str| format!("upf.reassembly.{k}");
        if self.max_datagrams > 4096 {
            return Err(invalid(
                f("max_datagrams"),
                "must be 0..=4096 (0: refuse every fragment)",
            ));
        }
        if !(8..=MAX_DATAGRAM).contains(&self.max_datagram_bytes) {
            return Err(invalid(
                f("max_datagram_bytes"),
                format!(
                    "must be 8..={MAX_DATAGRAM}, got {}",
                    self.max_datagram_bytes
                ),
            ));
        }
        if self.max_per_source == 0 {
            return Err(invalid(f("max_per_source"), "must be positive"));
        }
        if self.timeout_ms == 0 || self.timeout_ms > 120_000 {
            return Err(invalid(f("timeout_ms"), "must be 1..=120000"));
        }
        Ok(())
    }
}

fn default_echo_interval_s() -> u64 {
    60
}

fn default_echo_t3_s() -> u64 {
    3
}

fn default_echo_n3() -> u32 {
    3
}

fn default_teid_reuse_after_s() -> u64 {
    60
}

fn default_max_sessions() -> usize {
    100_000
}
fn default_mtu() -> u16 {
    1500
}
fn default_ei_pps() -> u32 {
    100
}
fn default_usage_ms() -> u64 {
    100
}
fn default_heartbeat_s() -> u64 {
    10
}

/// One scheduled egress port.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EgressPort {
    pub port: String,
    /// Port shaper rate, Mbit/s (none: as fast as the port takes).
    pub shaper_mbps: Option<u64>,
}

/// `[upf.synthetic]`: `sessions` sessions as `pg-gen` numbers its UEs.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Synthetic {
    pub sessions: usize,
    #[serde(default = "one")]
    pub seed: u64,
    #[serde(default = "default_qfis")]
    pub qfis: Vec<u8>,
    #[serde(default = "default_gnbs")]
    pub gnbs: u32,
    /// "v4", "v6" or "mixed", as `pg-gen --outer`.
    #[serde(default = "mixed")]
    pub outer: String,
    pub mbr_kbps: Option<u64>,
}

fn one() -> u64 {
    1
}
fn default_qfis() -> Vec<u8> {
    vec![1, 5, 9]
}
fn default_gnbs() -> u32 {
    4
}
fn mixed() -> String {
    "mixed".into()
}

impl UpfSection {
    pub fn n3_v4(&self) -> Option<Ipv4Addr> {
        self.n3.iter().find_map(|a| match a {
            IpAddr::V4(a) => Some(*a),
            _ => None,
        })
    }

    pub fn n3_v6(&self) -> Option<Ipv6Addr> {
        self.n3.iter().find_map(|a| match a {
            IpAddr::V6(a) => Some(*a),
            _ => None,
        })
    }

    pub fn node_id(&self) -> NodeId {
        match self.node_id.parse::<IpAddr>() {
            Ok(IpAddr::V4(a)) => NodeId::Ipv4(a),
            Ok(IpAddr::V6(a)) => NodeId::Ipv6(a),
            Err(_) => NodeId::fqdn(&self.node_id),
        }
    }

    /// Meter and URR slots: two metered directions and two URRs per session on average.
    pub fn slots(&self) -> u32 {
        u32::try_from(self.max_sessions.saturating_mul(2)).unwrap_or(u32::MAX)
    }

    pub fn qfi_map(&self) -> QfiMap {
        let mut m = QfiMap::default();
        for [q, id] in &self.qfi_to_qid {
            m.set(*q, *id);
        }
        m
    }

    /// Static and synthetic sessions as n4 sessions (SEIDs tagged with [`STATIC_SEID_BIT`]).
    pub fn static_sessions(&self) -> Result<Vec<Session>, ConfigError> {
        let mut all = self.session.clone();
        if let Some(s) = &self.synthetic {
            let p = SyntheticParams {
                seed: s.seed,
                qfis: s.qfis.clone(),
                gnbs: s.gnbs,
                outer: match s.outer.as_str() {
                    "v4" => OuterMix::V4,
                    "v6" => OuterMix::V6,
                    _ => OuterMix::Mixed,
                },
                mbr_kbps: s.mbr_kbps,
                ..SyntheticParams::default()
            };
            let base = all.iter().map(|s| s.seid).max().unwrap_or(0);
            all.extend(
                static_sessions::synthetic(s.sessions, &p)
                    .into_iter()
                    .map(|mut s| {
                        s.seid += base;
                        s
                    }),
            );
        }
        let n3 = N3Addresses {
            v4: self.n3_v4(),
            v6: self.n3_v6(),
        };
        let mut sessions =
            static_sessions::to_sessions(&all, n3).map_err(|e| invalid("upf.session", e))?;
        for s in &mut sessions {
            s.up_seid |= STATIC_SEID_BIT;
        }
        Ok(sessions)
    }

    pub fn validate(&self, port_index: impl Fn(&str) -> Option<u16>) -> Result<(), ConfigError> {
        if self.node_id.is_empty() {
            return Err(invalid("upf.node_id", "must not be empty"));
        }
        if self.n3.is_empty() {
            return Err(invalid("upf.n3", "needs at least one local GTP-U address"));
        }
        if self.n3.iter().filter(|a| a.is_ipv4()).count() > 1
            || self.n3.iter().filter(|a| a.is_ipv6()).count() > 1
        {
            return Err(invalid("upf.n3", "at most one address per family"));
        }
        if self.max_sessions == 0 || self.max_sessions > 10_000_000 {
            return Err(invalid("upf.max_sessions", "must be 1..=10000000"));
        }
        if !(576..=9000).contains(&self.mtu) {
            return Err(invalid(
                "upf.mtu",
                format!("must be 576..=9000, got {}", self.mtu),
            ));
        }
        self.reassembly.validate()?;
        if self.usage_interval_ms == 0 {
            return Err(invalid("upf.usage_interval_ms", "must be positive"));
        }
        if self.heartbeat_interval_s == 0 {
            return Err(invalid("upf.heartbeat_interval_s", "must be positive"));
        }
        if self.echo_interval_s > 0 && self.echo_t3_s == 0 {
            return Err(invalid("upf.echo_t3_s", "must be positive"));
        }
        if !(1..=3600).contains(&self.teid_reuse_after_s) {
            return Err(invalid(
                "upf.teid_reuse_after_s",
                format!(
                    "must be 1..=3600 (a released TEID is reused only after it), got {}",
                    self.teid_reuse_after_s
                ),
            ));
        }
        for (i, [q, id]) in self.qfi_to_qid.iter().enumerate() {
            if *q as usize >= NUM_QFI || *id >= 8 {
                return Err(invalid(
                    format!("upf.qfi_to_qid[{i}]"),
                    format!("[{q}, {id}]: QFI must be 0..=63 and queue 0..=7"),
                ));
            }
        }
        self.qos.policies()?;
        for (i, n) in self.fix_l4_checksums.iter().enumerate() {
            match port_index(n) {
                None => {
                    return Err(invalid(
                        format!("upf.fix_l4_checksums[{i}]"),
                        format!("no port named `{n}`"),
                    ))
                }
                Some(p) if p >= 64 => {
                    return Err(invalid(
                        format!("upf.fix_l4_checksums[{i}]"),
                        format!("`{n}` is port {p}: only ports 0..64 can be listed"),
                    ))
                }
                Some(_) => {}
            }
        }
        for (i, e) in self.egress.iter().enumerate() {
            if port_index(&e.port).is_none() {
                return Err(invalid(
                    format!("upf.egress[{i}].port"),
                    format!("no port named `{}`", e.port),
                ));
            }
            if e.shaper_mbps == Some(0) {
                return Err(invalid(
                    format!("upf.egress[{i}].shaper_mbps"),
                    "must be positive",
                ));
            }
        }
        if let Some(s) = &self.synthetic {
            if !["v4", "v6", "mixed"].contains(&s.outer.as_str()) {
                return Err(invalid(
                    "upf.synthetic.outer",
                    format!("`{}`: v4, v6 or mixed", s.outer),
                ));
            }
            if s.qfis.is_empty() || s.qfis.iter().any(|q| *q > 63) {
                return Err(invalid("upf.synthetic.qfis", "QFIs 0..=63, at least one"));
            }
            if s.gnbs == 0 {
                return Err(invalid("upf.synthetic.gnbs", "must be positive"));
            }
        }
        let n = self.static_sessions()?.len();
        if n > self.max_sessions {
            return Err(invalid(
                "upf.session",
                format!(
                    "{n} static sessions exceed max_sessions {}",
                    self.max_sessions
                ),
            ));
        }
        // Compile them now, so a bad static rule is a config error, not a run-time surprise.
        self.compiler_with_static_sessions()?;
        Ok(())
    }

    /// The compiler's configuration (`validate` has checked `[upf.qos]`; a bad one here
    /// falls back to the defaults).
    pub fn compiler_config(&self) -> CompilerConfig {
        CompilerConfig {
            qos: self.qos.policies().unwrap_or_default(),
            local_v4: self.n3_v4().into_iter().collect(),
            local_v6: self.n3_v6().into_iter().collect(),
            max_meter_slots: self.slots(),
            max_urr_slots: self.slots(),
        }
    }

    /// A compiler holding the static sessions.
    pub fn compiler_with_static_sessions(&self) -> Result<Compiler, ConfigError> {
        // The shard count follows the sessions present, so that what a PFCP request costs
        // does not grow with the table.
        let mut c = Compiler::new(self.compiler_config())
            .grow_shards_above(peregrine_rules::GROW_KEYS_PER_SHARD);
        for s in self.static_sessions()? {
            c.upsert(&s).map_err(|e| {
                invalid(
                    "upf.session",
                    format!("static session {:#x}: {e}", s.up_seid & !STATIC_SEID_BIT),
                )
            })?;
        }
        Ok(c)
    }

    /// Egress scheduler per port index. When a QoS policy shapes, every port gets one (the
    /// default scheduler where `[[upf.egress]]` names none): shaped packets wait on the
    /// scheduler's timing wheel.
    pub fn egress_configs(
        &self,
        nports: usize,
        port_index: impl Fn(&str) -> Option<u16>,
    ) -> Vec<Option<EgressConfig>> {
        let mut v = vec![None; nports];
        let default_qid = self.qfi_map().qid(9);
        if self.qos.policies().is_ok_and(|p| p.any_shaping()) {
            for c in v.iter_mut() {
                *c = Some(EgressConfig {
                    scheduler: SchedulerConfig::default(),
                    default_qid,
                });
            }
        }
        for e in &self.egress {
            if let Some(p) = port_index(&e.port) {
                let scheduler = SchedulerConfig {
                    shaper: e.shaper_mbps.map(|m| ShaperConfig {
                        rate_bytes_per_s: m * 125_000,
                        // 2 ms of line rate, and at least 16 full-size frames.
                        burst_bytes: (m * 250).max(16 * 1514),
                    }),
                    ..SchedulerConfig::default()
                };
                v[p as usize] = Some(EgressConfig {
                    scheduler,
                    default_qid,
                });
            }
        }
        v
    }
}
