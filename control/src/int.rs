//! In-band telemetry in the daemon (Miranda et al.; RFC 9197 / RFC 9486 IOAM on the wire): the
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

mod inband;
pub use inband::InBandRejects;

use crate::error::{invalid, ConfigError, RunError};
use crate::feature::{Build, Configure, Feature, FeatureReport, Place, Stages};
use crate::int_stage::{Element, IntStage, StageCounters};
use crate::metrics::{Exposition, Kind};
use crate::platform::{PipelineConfig, Platform};
use crossbeam_channel::{Receiver, Sender, TrySendError};
use peregrine_dataplane::runtime::{self, OnEgress, OnIngress, Publisher, Running};
use peregrine_dataplane::PacketBuf;
use peregrine_int::gate::{FlowGate, GateConfig};
use peregrine_int::namespace::TableSnapshot;
use peregrine_int::report::IntReport;
use peregrine_int::request::Rule;
use peregrine_int::stages::{IntConfig, IntEvent, IntSink, IntSource, IntTransit, Piggyback};
use peregrine_int_manager::{self as manager, InBandCounters, IntManager, ManagerConfig};
use peregrine_wire::int::TsFormat;
use serde::{Deserialize, Serialize};
use std::sync::mpsc::{self, SyncSender};
use std::sync::Arc;
use std::time::Instant;

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

/// What the control core did with the stages' events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    /// In-band requests that failed decoding or validation, by reason; they change nothing.
    pub requests_rejected: InBandRejects,
    /// Valid in-band requests dropped because the manager's queue was full.
    pub requests_dropped: u64,
    /// Events dropped because the manager or source queue was full.
    pub dropped: u64,
    /// The manager's figures: reports in, raw reports published, rules installed.
    pub manager_reports_in: u64,
    pub manager_raw_published: u64,
    pub manager_installs: u64,
    /// What the manager did with the valid in-band requests, by outcome.
    pub manager_inband: InBandCounters,
    /// Co-design gate windows published on `[int.gate] export`, and the ones that could not
    /// be sent (no subscriber keeps up: ZeroMQ's high-water mark).
    pub gate_windows_published: u64,
    pub gate_publish_failed: u64,
}

/// Channel depth between the workers and the control core.
pub const EVENT_QUEUE: usize = 4096;
/// Valid in-band requests waiting for the manager (one per flow per re-send interval is the
/// normal rate; a burst beyond this is dropped and counted, `requests_dropped`).
pub const INBAND_QUEUE: usize = 256;
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
    inband_tx: SyncSender<Rule>,
    manager: IntManager,
    stats: IntDaemonStats,
    gate_export: Option<GateExport>,
    /// The sink reports handed to the manager, also kept for the telemetry bus when a
    /// feature asked for them (`crate::telemetry::Kind::IntSink`).
    pub tee: Option<Vec<IntReport>>,
}

/// The co-design gate's export (`docs/codesign.md` "Export"): the workers' closed windows,
/// assembled from their `GateFlow` / `GateWindow` events, published as CBOR on a PUB socket.
struct GateExport {
    _ctx: zmq::Context,
    sock: zmq::Socket,
    node_id: u32,
    cfg: GateConfig,
    /// Switch records of windows whose end has not arrived yet, by (worker, start).
    open: std::collections::HashMap<(u16, u64), Vec<[u32; 3]>>,
}

impl std::fmt::Debug for GateExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GateExport")
            .field("node_id", &self.node_id)
            .field("open", &self.open.len())
            .finish_non_exhaustive()
    }
}

impl GateExport {
    fn bind(endpoint: &str, node_id: u32, cfg: GateConfig) -> std::io::Result<GateExport> {
        let e = |what: &str, err: zmq::Error| {
            std::io::Error::other(format!("int.gate.export {endpoint}: {what}: {err}"))
        };
        let ctx = zmq::Context::new();
        let sock = ctx.socket(zmq::PUB).map_err(|x| e("socket", x))?;
        sock.set_linger(1000).map_err(|x| e("linger", x))?;
        sock.bind(endpoint).map_err(|x| e("bind", x))?;
        Ok(GateExport {
            _ctx: ctx,
            sock,
            node_id,
            cfg,
            open: Default::default(),
        })
    }

    /// A window ended: publish it with its records. `true` when sent.
    fn publish(&mut self, worker: u16, w: peregrine_int::gate::ClosedWindow, lost: u32) -> bool {
        let flows = self.open.remove(&(worker, w.start_ns)).unwrap_or_default();
        let m = crate::codesign::GateWindowMsg {
            v: crate::codesign::GATE_EXPORT_VERSION,
            node_id: self.node_id,
            worker,
            start_ns: w.start_ns,
            window_ns: self.cfg.window_ms * 1_000_000,
            unit: crate::codesign::GateWindowMsg::unit_of(self.cfg.unit).into(),
            large: self.cfg.large,
            small: self.cfg.small,
            packets: w.packets,
            overflow: w.overflow,
            lost,
            flows,
        };
        let topic = format!("{}{}/{worker}", crate::codesign::GATE_TOPIC, self.node_id);
        self.sock
            .send_multipart([topic.as_bytes(), &m.encode()], zmq::DONTWAIT)
            .is_ok()
    }
}

impl IntRuntime {
    /// Bind the manager's sockets (errors here, before any worker starts) and start it; its
    /// snapshots are published to the stages' readers.
    pub fn start(section: &IntSection) -> std::io::Result<IntRuntime> {
        let tables = Arc::new(Publisher::new(TableSnapshot::default()));
        let (events_tx, events_rx) = crossbeam_channel::bounded(EVENT_QUEUE);
        let (piggyback_tx, piggyback_rx) = crossbeam_channel::bounded(PIGGYBACK_QUEUE);
        let (reports_tx, reports_rx) = mpsc::sync_channel::<IntReport>(EVENT_QUEUE);
        let (inband_tx, inband_rx) = mpsc::sync_channel::<Rule>(INBAND_QUEUE);
        let mcfg = ManagerConfig {
            rules_endpoint: section.rules.clone(),
            reports_endpoint: section.reports.clone(),
            report_encoding: match section.report_encoding {
                ReportEncoding::Json => manager::Encoding::Json,
                ReportEncoding::Cbor => manager::Encoding::Cbor,
            },
            ..ManagerConfig::default()
        };
        let gate_export = match section.gate.as_ref() {
            Some(g) => match &g.export {
                Some(ep) => Some(GateExport::bind(ep, section.node_id.into(), g.clone())?),
                None => None,
            },
            None => None,
        };
        let publish = Arc::clone(&tables);
        let manager = IntManager::spawn_with_inband(
            mcfg,
            reports_rx,
            inband_rx,
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
            inband_tx,
            manager,
            stats: IntDaemonStats::default(),
            gate_export,
            tee: None,
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
                        if let Some(t) = &mut self.tee {
                            t.push(report);
                        }
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
                IntEvent::Request { from, len, cbor } => {
                    self.stats.requests += 1;
                    self.on_request(from, &cbor[..len as usize]);
                }
                IntEvent::GateFlow {
                    worker,
                    start_ns,
                    record: r,
                } => {
                    if let Some(g) = &mut self.gate_export {
                        g.open.entry((worker, start_ns)).or_default().push([
                            r.hash,
                            r.at_switch,
                            r.at_end,
                        ]);
                    }
                }
                IntEvent::GateWindow {
                    worker,
                    window,
                    lost,
                } => {
                    if let Some(g) = &mut self.gate_export {
                        match g.publish(worker, window, lost) {
                            true => self.stats.gate_windows_published += 1,
                            false => self.stats.gate_publish_failed += 1,
                        }
                    }
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
            manager_inband: m.inband,
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

/// INT as a feature: in the `int` pipeline its elements run at ingress, before `l3fwd`;
/// in the `upf` pipeline they are placed on N6 around the UPF (`n6_in` at ingress, scoped
/// to packets received on `n6_ports`; `n6_out` after the UPF, scoped to packets sent there).
#[derive(Debug)]
pub struct IntFeature {
    section: IntSection,
    /// `Some(n6 ports)` in the upf pipeline, `None` in the int pipeline.
    n6: Option<Vec<u16>>,
    stage_config: IntConfig,
    runtime: Option<IntRuntime>,
    /// The elements' counters, one slot per element of every worker.
    counters: StageCounters,
    /// Put the sink's reports on the telemetry bus.
    tee: bool,
}

impl Configure for IntFeature {
    const SECTION: &'static str = "int";

    fn configure(section: Option<&toml::Value>, p: &Platform) -> Result<Option<Self>, ConfigError> {
        let value =
            match (&p.pipeline, section) {
                (PipelineConfig::Int { .. }, None) => {
                    return Err(invalid("int", "the int pipeline needs an [int] section"))
                }
                (PipelineConfig::Int { .. } | PipelineConfig::Upf { .. }, Some(v)) => v,
                (_, None) => return Ok(None),
                (_, Some(_)) => return Err(invalid(
                    "int",
                    "INT runs in the int pipeline, or on N6 in the upf pipeline ([pipeline] kind)",
                )),
            };
        let s: IntSection = value
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| crate::error::section_error("int", &e))?;
        let port_index = |n: &str| p.port_index(n);
        let n6 = if matches!(p.pipeline, PipelineConfig::Upf { .. }) {
            // `[int]` next to `[upf]`: INT on N6 around the UPF stage.
            s.validate_upf(port_index)?;
            Some(s.n6_port_ids(port_index))
        } else {
            s.validate(port_index)?;
            if !s.n6_ports.is_empty() || s.n6_in.is_some() || s.n6_out.is_some() {
                return Err(invalid(
                    "int.n6_ports",
                    "n6_ports / n6_in / n6_out place INT in the upf pipeline; the int pipeline uses roles",
                ));
            }
            None
        };
        Ok(Some(IntFeature {
            stage_config: s.stage_config(port_index),
            section: s,
            n6,
            runtime: None,
            counters: StageCounters::default(),
            tee: false,
        }))
    }
}

impl IntFeature {
    /// The elements `roles` names, in that order, for one place; each reports its counters
    /// into a slot of `self.counters`.
    fn elements(&self, roles: &[Role], c: &IntConfig, b: &mut Build<'_>) -> Vec<IntStage> {
        let Some(ir) = &self.runtime else {
            return Vec::new();
        };
        roles
            .iter()
            .map(|role| {
                let (r, trust) = (&mut *b.reasons, b.classified);
                let elem = match role {
                    Role::Sink => {
                        let s =
                            IntSink::new(c.clone(), ir.tables.reader(), ir.events_tx.clone(), r);
                        Element::Sink(if trust { s.after_classifier() } else { s })
                    }
                    Role::Transit => {
                        let s = IntTransit::new(c.clone(), ir.tables.reader(), r)
                            .with_events(ir.events_tx.clone());
                        Element::Transit(if trust { s.after_classifier() } else { s })
                    }
                    Role::Source => {
                        let s = IntSource::new(c.clone(), ir.tables.reader())
                            .with_piggyback(ir.piggyback_rx.clone())
                            .with_events(ir.events_tx.clone());
                        let s = match c.gate.clone().map(FlowGate::new) {
                            Some(Ok(g)) => s.with_gate(g),
                            // Refused at load by IntSection::validate: not reached.
                            Some(Err(_)) | None => s,
                        };
                        Element::Source(if trust { s.after_classifier() } else { s })
                    }
                };
                IntStage::new(elem, &self.counters)
            })
            .collect()
    }
}

impl<B: PacketBuf + 'static> Feature<B> for IntFeature {
    fn name(&self) -> &'static str {
        Self::SECTION
    }

    /// The manager binds first: a port in use fails the run before workers start.
    fn prepare(
        &mut self,
        _p: &Platform,
        _egress: &mut [Option<runtime::EgressConfig>],
    ) -> Result<(), RunError> {
        let mut rt = IntRuntime::start(&self.section).map_err(RunError::IntManager)?;
        rt.tee = self.tee.then(Vec::new);
        self.runtime = Some(rt);
        Ok(())
    }

    fn telemetry_produces(&self) -> Vec<crate::telemetry::Kind> {
        match self.section.has(Role::Sink) {
            true => vec![crate::telemetry::Kind::IntSink],
            false => Vec::new(),
        }
    }

    fn telemetry_request(&mut self, k: crate::telemetry::Kind) {
        self.tee |= k == crate::telemetry::Kind::IntSink;
    }

    fn telemetry_out(&mut self, out: &mut Vec<crate::telemetry::Telemetry>) {
        if let Some(t) = self.runtime.as_mut().and_then(|r| r.tee.as_mut()) {
            out.extend(
                t.drain(..)
                    .map(|r| crate::telemetry::Telemetry::IntSink(Box::new(r))),
            );
        }
    }

    /// The elements read the flow from the classifier's record, and keep its offsets true
    /// when they insert or remove headers.
    fn reads_packet_meta(&self) -> bool {
        true
    }

    fn stages(&self, place: Place, b: &mut Build<'_>, out: &mut Stages<B>) {
        match (&self.n6, place) {
            // The int pipeline: sink, source, transit, all before l3fwd.
            (None, Place::Ingress) => {
                let roles: Vec<Role> = [Role::Sink, Role::Source, Role::Transit]
                    .into_iter()
                    .filter(|r| self.section.has(*r))
                    .collect();
                for st in self.elements(&roles, &self.stage_config, b) {
                    out.push(Box::new(st));
                }
            }
            (None, Place::AfterUpf) => {}
            (Some(n6), Place::Ingress) => {
                // Before the UPF stage, which decrements the hop limit.
                let c = IntConfig {
                    hop_limit_after_forward: true,
                    ..self.stage_config.clone()
                };
                for st in self.elements(&self.section.n6_in_roles(), &c, b) {
                    out.push(Box::new(OnIngress::new(n6, st)));
                }
            }
            (Some(n6), Place::AfterUpf) => {
                // After decap: the UPF stage has decremented it already.
                let c = IntConfig {
                    hop_limit_after_forward: false,
                    ..self.stage_config.clone()
                };
                for st in self.elements(&self.section.n6_out_roles(), &c, b) {
                    out.push(Box::new(OnEgress::new(n6, st)));
                }
            }
        }
    }

    fn tick(&mut self, _now: Instant, _running: &Running) {
        if let Some(ir) = &mut self.runtime {
            ir.pump();
        }
    }

    fn metrics(&self, e: &mut Exposition) {
        let Some(ir) = &self.runtime else {
            return;
        };
        let s = ir.stats();
        let c = Kind::Counter;
        for (name, help, v) in [
            (
                "peregrine_int_reports_total",
                "Sink reports handed to the INT manager.",
                s.reports,
            ),
            (
                "peregrine_int_piggybacks_total",
                "Piggy-back reports handed to the source.",
                s.piggybacks,
            ),
            (
                "peregrine_int_inband_reports_total",
                "In-band (0x33) reports received and handed to the manager.",
                s.inband_reports,
            ),
            (
                "peregrine_int_inband_malformed_total",
                "In-band (0x33) reports that did not decode.",
                s.inband_malformed,
            ),
            (
                "peregrine_int_requests_total",
                "In-band (0x32) requests seen.",
                s.requests,
            ),
            (
                "peregrine_int_events_dropped_total",
                "INT events dropped: the manager or source queue was full.",
                s.dropped,
            ),
            (
                "peregrine_int_manager_reports_total",
                "Reports the INT manager received.",
                s.manager_reports_in,
            ),
            (
                "peregrine_int_manager_raw_published_total",
                "Raw reports the INT manager published.",
                s.manager_raw_published,
            ),
            (
                "peregrine_int_manager_installs_total",
                "Rules the INT manager installed.",
                s.manager_installs,
            ),
            (
                "peregrine_int_gate_windows_published_total",
                "Co-design gate windows published on int.gate.export.",
                s.gate_windows_published,
            ),
            (
                "peregrine_int_gate_publish_failed_total",
                "Co-design gate windows that could not be published.",
                s.gate_publish_failed,
            ),
        ] {
            e.one(name, c, help, v as f64);
        }
        inband::write_metrics(&s, e);
        self.counters.write_metrics(e);
    }

    fn finish(self: Box<Self>) -> FeatureReport {
        let i = self.runtime.map(IntRuntime::finish).unwrap_or_default();
        let text = format!(
            "int: {} reports, {} piggy-backed, {} in-band reports received, {} requests seen ({} installed, {} refreshed, {} replaced, {} conflict, {} refused), {} dropped\n",
            i.reports,
            i.piggybacks,
            i.inband_reports,
            i.requests,
            i.manager_inband.installed,
            i.manager_inband.refreshed,
            i.manager_inband.replaced,
            i.manager_inband.conflict,
            i.requests_rejected.total(),
            i.dropped
        );
        let mut r = FeatureReport::new(Self::SECTION, &i, text);
        // The elements' totals next to the control side's figures.
        if let serde_json::Value::Object(m) = &mut r.json {
            m.insert("stages".into(), self.counters.totals_json());
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const GOOD: &str = r#"
[backend]
kind = "pcap"

[[port]]
name = "n3"
mac = "02:00:00:00:00:03"
tx = "out3.pcap"

[[port]]
name = "n6"
mac = "02:00:00:00:00:06"
tx = "out.pcap"

[pipeline]
kind = "l3fwd"

[[route]]
prefix = "10.45.0.0/16"
port = "n6"
next_hop_mac = "02:00:00:00:01:06"
"#;

    fn err(text: &str) -> String {
        Config::parse(text).unwrap_err().to_string()
    }

    fn section(c: &Config) -> super::IntSection {
        c.sections["int"].clone().try_into().unwrap()
    }

    /// `GOOD` as a UPF with `[int]` lines.
    fn upf_int(int: &str) -> String {
        GOOD.replace("kind = \"l3fwd\"", "kind = \"upf\"")
            + "[upf]\nnode_id = \"192.0.2.1\"\nn3 = [\"192.0.2.1\"]\n[int]\nnode_id = 9\n"
            + int
    }

    #[test]
    fn int_in_the_upf_pipeline_places_roles_on_n6() {
        let c = Config::parse(&upf_int(
            "roles = [\"source\", \"sink\", \"transit\"]\nn6_ports = [\"n6\"]\n",
        ))
        .unwrap();
        let s = &section(&c);
        // Defaults: sink and transit on N6 ingress, the source on N6 egress.
        assert_eq!(
            s.n6_in_roles(),
            [crate::int::Role::Sink, crate::int::Role::Transit]
        );
        assert_eq!(s.n6_out_roles(), [crate::int::Role::Source]);
        assert_eq!(s.n6_port_ids(|n| c.port_index(n)), [1]);
        // Listed order does not matter: sink, transit, source.
        let c = Config::parse(&upf_int(
            "roles = [\"source\", \"sink\"]\nn6_ports = [\"n6\"]\nn6_in = []\nn6_out = [\"source\", \"sink\"]\n",
        ))
        .unwrap();
        let s = &section(&c);
        assert!(s.n6_in_roles().is_empty());
        assert_eq!(
            s.n6_out_roles(),
            [crate::int::Role::Sink, crate::int::Role::Source]
        );
        for (int, field) in [
            ("roles = [\"sink\"]\n", "int.n6_ports"),
            (
                "roles = [\"sink\"]\nn6_ports = [\"n9\"]\n",
                "int.n6_ports[0]",
            ),
            (
                "roles = [\"sink\"]\nn6_ports = [\"n6\"]\nn6_out = [\"source\"]\n",
                "int.n6_out",
            ),
            (
                "roles = [\"sink\"]\nn6_ports = [\"n6\"]\nn6_in = []\n",
                "int.n6_in",
            ),
            ("roles = []\nn6_ports = [\"n6\"]\n", "int.roles"),
        ] {
            let e = err(&upf_int(int));
            assert!(e.contains(field), "{int}: {e}");
        }
        // The int pipeline places by roles only.
        let e = err(&(GOOD.replace("kind = \"l3fwd\"", "kind = \"int\"")
            + "[int]\nnode_id = 9\nroles = [\"sink\"]\nn6_ports = [\"n6\"]\n"));
        assert!(e.contains("int.n6_ports"), "{e}");
    }

    #[test]
    fn gate_section_is_read_and_checked() {
        let int = |extra: &str| {
            GOOD.replace("kind = \"l3fwd\"", "kind = \"int\"")
                + "[int]\nnode_id = 9\nroles = [\"source\"]\n"
                + extra
        };
        let c = Config::parse(&int("[int.gate]\nlarge = 64\nsmall = 16\n")).unwrap();
        let g = section(&c).gate.unwrap();
        assert_eq!(
            (g.large, g.small, g.rows, g.width, g.window_ms),
            (64, 16, 3, 4096, 1000)
        );
        for (extra, want) in [
            ("[int.gate]\nlarge = 8\nsmall = 16\n", "small <= large"),
            (
                "[int.gate]\nlarge = 8\nsmall = 4\nwidth = 1000\n",
                "power of two",
            ),
            (
                "[int.gate]\nlarge = 8\nsmall = 4\nunit = \"flows\"\n",
                "unknown variant `flows`",
            ),
            ("[int.gate]\nlarge = 8\nsmall = 4\nwindow = 3\n", "window"),
        ] {
            let e = err(&int(extra));
            assert!(e.contains(want), "{extra}: {e}");
        }
        let int_only = |extra: &str| {
            GOOD.replace("kind = \"l3fwd\"", "kind = \"int\"")
                + "[int]\nnode_id = 9\nroles = [\"sink\"]\n"
                + extra
        };
        let c = Config::parse(&int_only("")).unwrap();
        assert_eq!(section(&c).resend_interval_ms, 60_000);
        let c = Config::parse(&int_only("resend_interval_ms = 2000\n")).unwrap();
        assert_eq!(
            section(&c).stage_config(|_| None).resend_interval_ns,
            2_000_000_000
        );
        for bad in ["resend_interval_ms = 0\n", "resend_interval_ms = 3600001\n"] {
            assert!(
                err(&int_only(bad)).contains("int.resend_interval_ms"),
                "{bad}"
            );
        }
        let e = err(&(GOOD.replace("kind = \"l3fwd\"", "kind = \"int\"")
            + "[int]\nnode_id = 9\nroles = [\"sink\"]\n[int.gate]\nlarge = 8\nsmall = 4\n"));
        assert!(e.contains("int.gate") && e.contains("source"), "{e}");
    }
}
