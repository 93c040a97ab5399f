//! In-band telemetry in the daemon (seed 003; RFC 9197 / RFC 9486 IOAM on the wire): the
//! `[int]` section, the `int` pipeline's stages, and the control-core side that joins the
//! workers' INT stages to the [`IntManager`] (ZeroMQ rule API and report PUB socket).
//!
//! ```text
//!  rx -> [int_sink] -> [int_source] -> [int_transit] -> l3fwd -> tx      (pipeline kind "int")
//!           |   ^ piggy-back reports (Piggyback)   |
//!           v   |                                  v in-band requests / extracted reports
//!        IntEvent channel (bounded) ---> control loop ---> IntManager (REP rules, PUB reports)
//!                                                            | TableSnapshot
//!                                                            v Publisher -> every stage's Reader
//! ```
//!
//! In the `upf` pipeline (`[int]` next to `[upf]`) the same elements are placed on N6 around
//! the UPF stage, port-scoped by `runtime::OnIngress` / `runtime::OnEgress`:
//!
//! ```text
//!  rx -> [n6_in: sink, transit, source] -> upf -> [n6_out: sink, transit, source] -> tx
//!        (batches received on n6_ports)           (packets sent on n6_ports: uplink after decap)
//! ```
//!
//! See docs/int.md "In the UPF pipeline" for what runs on the inner IPv6 of GTP-U.
//!
//! In the `int` pipeline every INT stage runs before `l3fwd` (a routed packet's disposition is final: later stages
//! do not see it). The Hop_Lim the source and transit write is the hop limit the packet
//! leaves with (received - 1), as a Linux IOAM transit writes it (`net/ipv6/ioam6.c` fills
//! the trace on input with the decremented value): `IntConfig::hop_limit_after_forward`.
//!
//! Rule encoding: the rule JSON of the seed has no encoding field and we do not add one: the
//! namespaces listed in `seed_namespaces` use the seed's layout, all others IOAM (the same
//! list the stages take, `IntConfig::seed_namespaces`).

use crate::config::{invalid, ConfigError};
use crossbeam_channel::{Receiver, Sender, TrySendError};
use peregrine_dataplane::runtime::Publisher;
use peregrine_int::namespace::TableSnapshot;
use peregrine_int::report::IntReport;
use peregrine_int::stages::{IntConfig, IntEvent, Piggyback};
use peregrine_int_manager::{self as manager, IntManager, ManagerConfig};
use peregrine_wire::int::TsFormat;
use serde::{Deserialize, Serialize};
use std::sync::mpsc::{self, SyncSender};
use std::sync::Arc;

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
            ..IntConfig::default()
        }
    }
}

/// What the control core did with the stages' events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct IntDaemonStats {
    /// Sink reports handed to the manager.
    pub reports: u64,
    /// Piggy-back reports handed to the source.
    pub piggybacks: u64,
    /// In-band (0x33) reports received here and handed to the manager.
    pub inband_reports: u64,
    /// In-band (0x33) reports that did not decode.
    pub inband_malformed: u64,
    /// In-band (0x32) requests seen.
    pub requests: u64,
    /// Events dropped because the manager or source queue was full.
    pub dropped: u64,
    /// The manager's figures: reports in, raw reports published, rules installed.
    pub manager_reports_in: u64,
    pub manager_raw_published: u64,
    pub manager_installs: u64,
}

/// Channel depth between the workers and the control core.
pub const EVENT_QUEUE: usize = 4096;
/// Piggy-back reports waiting for the source.
pub const PIGGYBACK_QUEUE: usize = 256;

/// The control-core side of the INT stages.
#[derive(Debug)]
pub struct IntRuntime {
    /// The rule table the stages read.
    pub tables: Arc<Publisher<TableSnapshot>>,
    /// For the stages: events out (sink, transit) and piggy-back reports in (source).
    pub events_tx: Sender<IntEvent>,
    pub piggyback_rx: Receiver<Piggyback>,
    events_rx: Receiver<IntEvent>,
    piggyback_tx: Sender<Piggyback>,
    reports_tx: SyncSender<IntReport>,
    manager: IntManager,
    stats: IntDaemonStats,
}

impl IntRuntime {
    /// Bind the manager's sockets (errors here, before any worker starts) and start it; its
    /// snapshots are published to the stages' readers.
    pub fn start(section: &IntSection) -> std::io::Result<IntRuntime> {
        let tables = Arc::new(Publisher::new(TableSnapshot::default()));
        let (events_tx, events_rx) = crossbeam_channel::bounded(EVENT_QUEUE);
        let (piggyback_tx, piggyback_rx) = crossbeam_channel::bounded(PIGGYBACK_QUEUE);
        let (reports_tx, reports_rx) = mpsc::sync_channel::<IntReport>(EVENT_QUEUE);
        let mcfg = ManagerConfig {
            rules_endpoint: section.rules.clone(),
            reports_endpoint: section.reports.clone(),
            report_encoding: match section.report_encoding {
                ReportEncoding::Json => manager::Encoding::Json,
                ReportEncoding::Cbor => manager::Encoding::Cbor,
            },
            ..ManagerConfig::default()
        };
        let publish = Arc::clone(&tables);
        let manager = IntManager::spawn(
            mcfg,
            reports_rx,
            Box::new(move |snap: Arc<TableSnapshot>| {
                // Rare (one per rule change): the copy is on the control side.
                publish.publish((*snap).clone());
            }),
            manager::unix_clock(),
        )?;
        tracing::info!(
            rules = %manager.rules_endpoint(),
            reports = %manager.reports_endpoint(),
            node_id = section.node_id,
            roles = ?section.roles,
            "INT manager listening"
        );
        Ok(IntRuntime {
            tables,
            events_tx,
            piggyback_rx,
            events_rx,
            piggyback_tx,
            reports_tx,
            manager,
            stats: IntDaemonStats::default(),
        })
    }

    /// Move the stages' events on: sink reports (and in-band reports received here) to the
    /// manager, piggy-back reports back to the source (seed III-B, III-E).
    pub fn pump(&mut self) {
        while let Ok(ev) = self.events_rx.try_recv() {
            match ev {
                IntEvent::Report {
                    report,
                    transmit,
                    piggyback,
                } => {
                    if piggyback {
                        let p = Piggyback::new(report.src, &report);
                        match self.piggyback_tx.try_send(p) {
                            Ok(()) => self.stats.piggybacks += 1,
                            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                                self.stats.dropped += 1
                            }
                        }
                    }
                    if transmit {
                        self.hand_to_manager(report, false);
                    }
                }
                IntEvent::InBandReport { len, bytes, from } => {
                    match IntReport::decode_compact(&bytes[..len as usize]) {
                        Some(r) => self.hand_to_manager(r, true),
                        None => {
                            self.stats.inband_malformed += 1;
                            tracing::debug!(%from, "in-band report does not decode");
                        }
                    }
                }
                IntEvent::Request { from, len, .. } => {
                    self.stats.requests += 1;
                    tracing::debug!(%from, len, "in-band INT request seen");
                }
            }
        }
        self.tables.reclaim();
    }

    fn hand_to_manager(&mut self, r: IntReport, inband: bool) {
        match self.reports_tx.try_send(r) {
            Ok(()) if inband => self.stats.inband_reports += 1,
            Ok(()) => self.stats.reports += 1,
            Err(_) => self.stats.dropped += 1,
        }
    }

    pub fn stats(&self) -> IntDaemonStats {
        let m = self.manager.counters();
        IntDaemonStats {
            manager_reports_in: m.reports_in,
            manager_raw_published: m.raw_published,
            manager_installs: m.installs,
            ..self.stats
        }
    }

    /// Last pump, then give the manager up to a second to publish what it was handed (the
    /// final reports of a replay arrive after the workers stopped).
    pub fn finish(mut self) -> IntDaemonStats {
        self.pump();
        let handed = self.stats.reports + self.stats.inband_reports;
        let t0 = std::time::Instant::now();
        while self.manager.counters().reports_in < handed
            && t0.elapsed() < std::time::Duration::from_secs(1)
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let s = self.stats();
        tracing::info!(?s, "INT");
        s
    }

    pub fn manager(&self) -> &IntManager {
        &self.manager
    }
}
