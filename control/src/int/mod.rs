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
mod config;
pub use config::{IntSection, ReportEncoding, Role, TimestampFormat};

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
use serde::{Deserialize, Serialize};
use std::sync::mpsc::{self, SyncSender};
use std::sync::Arc;
use std::time::Instant;

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
mod tests;
