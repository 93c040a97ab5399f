//! Kestrel per-queue sketch telemetry as a feature (`[kestrel]`; docs/kestrel.md): the
//! workers' post-dequeue taps (`peregrine_dataplane::telemetry::kestrel`) fill per-window
//! banks; here the control side sums them per window, exports each window (sketches and
//! 3GPP-PM counters, versioned CBOR) on a ZeroMQ PUB socket and to a windows file, serves
//! the edge API (ZeroMQ REP, JSON), runs target-occupancy binning with drift re-binning, and
//! adds its Prometheus families. With `[kestrel.detect]` the collector side scores every
//! window with the trained detectors and raises alarms ([`detect`]); it keeps the last
//! windows and answers per-key queries for the keys of the installed PFCP sessions
//! ([`keys`], the edge API).

pub mod api;
pub mod binning;
pub mod collector;
pub mod combine;
mod config;
pub mod detect;
pub mod drift;
pub mod export;
pub mod features;
pub mod gbt;
pub mod keys;

pub use config::{
    EdgesConf, HashConf, KestrelSection, PostcardsConf, DEFAULT_API, DEFAULT_PUBLISH,
};

use crate::error::{invalid, ConfigError, RunError};
use crate::feature::{Build, Configure, Feature, FeatureReport, Taps};
use crate::metrics::{Exposition, Kind};
use crate::platform::Platform;
use binning::{Action, Drift, Strategy};
use export::{EdgesRec, Header, PmMsg, PostcardMsg, SketchMsg};
use peregrine_dataplane::io::PortId;
use peregrine_dataplane::runtime::{Publisher, Running};
use peregrine_dataplane::telemetry::kestrel::{
    parse_edges, tap_pair, Aggregator, EdgeSet, EdgeTable, Layout, Postcard, QidEdges, Window,
    DIRS, MAX_WINDOW_NS,
};
use peregrine_dataplane::PacketBuf;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::Instant;

/// Export figures for the summary and metrics.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KestrelStats {
    pub windows: u64,
    pub late_parts: u64,
    pub packets: u64,
    pub sketch_bytes: u64,
    pub pm_bytes: u64,
    pub postcard_bytes: u64,
    /// Postcards exported by the taps, dropped (ring full), suppressed (under delta).
    pub postcards: (u64, u64, u64),
    pub messages: u64,
    pub rebinnings: u64,
    pub bank_stalls: u64,
    pub publish_errors: u64,
    pub file_errors: u64,
    /// First and last window seq exported.
    pub seq_range: Option<(u64, u64)>,
    /// Packets over the run, `per_qid[qid][dir]` (direction 0 uplink, 1 downlink).
    pub per_qid: Vec<[u64; 2]>,
    /// Mbit/s of each export kind over the windows exported.
    pub sketch_mbps: f64,
    pub pm_mbps: f64,
    pub postcard_mbps: f64,
    /// The online detectors, when configured.
    pub detect: Option<detect::DetectStats>,
    /// Keys of the installed sessions at the end.
    pub session_keys: usize,
}

struct Io {
    _ctx: zmq::Context,
    publ: Option<zmq::Socket>,
    alarms: Option<zmq::Socket>,
    api: Option<zmq::Socket>,
    file: Option<std::io::BufWriter<std::fs::File>>,
}

/// The feature.
pub struct KestrelFeature {
    section: KestrelSection,
    layout: Layout,
    workers: usize,
    window_ns: u64,
    table: Publisher<EdgeTable>,
    agg: Mutex<Aggregator>,
    next_source: Mutex<u32>,
    versions: BTreeMap<u64, EdgeSet>,
    drift: Vec<Drift>,
    io: Option<Io>,
    epoch: Instant,
    stats: KestrelStats,
    /// Latest diagnostic occupancy per QID: (latency tail, inter-arrival head).
    occupancy: Vec<(f64, f64)>,
    windows_file: Option<std::path::PathBuf>,
    /// Postcards drained, by window seq, until their window is exported.
    postcards: BTreeMap<u64, Vec<Postcard>>,
    drained: Vec<Postcard>,
    /// The online detectors (`[kestrel.detect]`).
    detector: Option<detect::Detector>,
    /// The installed sessions (rule snapshot) and their keys.
    sessions: Option<crate::feature::Sessions>,
    keys: keys::SessionKeys,
    /// The last windows, for per-key queries.
    collector: collector::Collector,
    alarm_errors: u64,
    /// Per-key estimates of every closed window (and late part) for the telemetry bus,
    /// when a feature asked for them; `in_upf`: there are sessions to key them by.
    tee: Option<Vec<crate::telemetry::Telemetry>>,
    in_upf: bool,
}

impl std::fmt::Debug for KestrelFeature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KestrelFeature")
            .field("layout", &self.layout)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Configure for KestrelFeature {
    const SECTION: &'static str = "kestrel";

    fn configure(section: Option<&toml::Value>, p: &Platform) -> Result<Option<Self>, ConfigError> {
        let Some(v) = section else {
            return Ok(None);
        };
        let s: KestrelSection = v
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| invalid("kestrel", e.message().to_string()))?;
        let window_ns = s.window_ms.saturating_mul(1_000_000);
        if window_ns == 0 || window_ns > MAX_WINDOW_NS {
            return Err(invalid(
                "kestrel.window_ms",
                "1..=10000 ms (the counter widths hold 10 s at 100 Gbit/s)",
            ));
        }
        let rule = s.drift_rule()?;
        let layout = s.layout()?;
        let mut set = s.initial_edges(layout.qids)?;
        let drift: Vec<Drift> = (0..layout.qids)
            .map(|_| {
                let mut d = Drift::with_rule(s.strategy, rule)
                    .map_err(|(k, e)| invalid(format!("kestrel.{k}"), e))?;
                if s.strategy != Strategy::Static {
                    d.calibrate();
                }
                Ok(d)
            })
            .collect::<Result<_, ConfigError>>()?;
        for (q, c) in set.calibrating.iter_mut().enumerate().take(layout.qids) {
            *c = s.strategy != Strategy::Static && q < layout.qids;
        }
        let table = Publisher::new(EdgeTable {
            from_seq: 0,
            current: set,
            previous: set,
        });
        let mut versions = BTreeMap::new();
        versions.insert(set.version, set);
        // The model files are read in `prepare` (paths resolve against the config file's
        // directory, known once the file is loaded); the rest is checked here.
        if let Some(d) = &s.detect {
            d.check().map_err(|e| invalid("kestrel.detect", e))?;
        }
        if s.collector_windows == 0 || s.collector_windows > 64 {
            return Err(invalid("kestrel.collector_windows", "1..=64 windows"));
        }
        Ok(Some(KestrelFeature {
            detector: None,
            sessions: None,
            keys: keys::SessionKeys::default(),
            collector: collector::Collector::new(s.collector_windows),
            alarm_errors: 0,
            tee: None,
            in_upf: matches!(p.pipeline, crate::platform::PipelineConfig::Upf { .. }),
            windows_file: s
                .windows_file
                .as_ref()
                .map(|f| p.resolve(std::path::Path::new(f))),
            workers: p.workers.count,
            window_ns,
            agg: Mutex::new(Aggregator::new(layout.clone(), window_ns)),
            next_source: Mutex::new(0),
            occupancy: vec![(0.0, 0.0); layout.qids],
            stats: KestrelStats {
                per_qid: vec![[0; 2]; layout.qids],
                ..KestrelStats::default()
            },
            layout,
            table,
            versions,
            drift,
            io: None,
            postcards: BTreeMap::new(),
            drained: Vec::new(),
            epoch: Instant::now(),
            section: s,
        }))
    }
}

impl KestrelFeature {
    fn now_ns(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// The edge set in force (newest published).
    pub fn current_edges(&self) -> EdgeSet {
        self.table.current().current
    }

    /// Publish a changed edge set; it applies from two windows after the newest bank.
    fn publish_set(&mut self, f: impl FnOnce(&mut EdgeSet)) -> (u64, u64) {
        let cur = *self.table.current();
        let mut next = cur.current;
        f(&mut next);
        next.version = cur.current.version + 1;
        let from = self
            .agg
            .lock()
            .expect("not poisoned")
            .newest_seq()
            .map_or(0, |s| s + 2);
        self.table.publish(cur.next(next, from));
        self.table.reclaim();
        self.versions.insert(next.version, next);
        while self.versions.len() > 64 {
            self.versions.pop_first();
        }
        (next.version, from)
    }

    /// Set one QID's edges (the API and tests): refused with a message, nothing changed,
    /// when the QID or the lists are bad.
    pub fn set_edges(
        &mut self,
        qid: usize,
        lat: &[f64],
        iat: &[f64],
    ) -> Result<(u64, u64), String> {
        if qid >= self.layout.qids {
            return Err(format!(
                "QID {qid} is not configured (QIDs are 0..{})",
                self.layout.qids
            ));
        }
        let lat = parse_edges("lat", lat).map_err(|e| e.to_string())?;
        let iat = parse_edges("iat", iat).map_err(|e| e.to_string())?;
        let old = self.current_edges().qids[qid];
        let r = self.publish_set(|s| {
            s.qids[qid] = QidEdges { lat, iat };
            s.calibrating[qid] = false;
        });
        self.drift[qid].phase = binning::Phase::Steady { over: 0 };
        tracing::info!(qid, ?old, new = ?QidEdges { lat, iat }, version = r.0, "kestrel: edges set");
        Ok(r)
    }

    fn header(&self, w: &Window, kind: &str) -> Header {
        Header {
            v: export::VERSION,
            kind: kind.into(),
            seq: w.seq,
            window_ns: self.window_ns,
            workers: self.workers as u32,
            sources: w.sources.clone(),
            late: w.late,
        }
    }

    fn emit(&mut self, topic: &str, bytes: &[u8]) {
        self.stats.messages += 1;
        if let Some(io) = &mut self.io {
            if let Some(p) = &io.publ {
                if p.send_multipart([topic.as_bytes(), bytes], zmq::DONTWAIT)
                    .is_err()
                {
                    self.stats.publish_errors += 1;
                }
            }
            if let Some(f) = &mut io.file {
                if f.write_all(bytes).is_err() {
                    self.stats.file_errors += 1;
                }
            }
        }
    }

    fn on_window(&mut self, w: &Window) {
        let version = w.edges_versions.first().copied().unwrap_or(1);
        let set = self.versions.get(&version).copied().unwrap_or_default();
        let edges = (0..self.layout.qids)
            .map(|q| EdgesRec {
                qid: q,
                lat: set.qids[q].lat.to_vec(),
                iat: set.qids[q].iat.to_vec(),
            })
            .collect();
        let msg = SketchMsg::of(w, self.header(w, "kestrel"), edges);
        self.tee_keys(&msg);
        let m = export::encode(&msg);
        self.stats.sketch_bytes += m.len() as u64;
        self.emit("kestrel", &m);
        if !w.late {
            self.detect(&msg);
        }
        // The daemon's own collector: what the edge API's per-key queries read.
        if let Err(e) = self.collector.add(export::Msg::Sketch(msg)) {
            tracing::warn!(seq = w.seq, %e, "kestrel: window not kept");
        }
        if self.section.pm {
            let p = export::encode(&PmMsg::of(w, self.header(w, "pm")));
            self.stats.pm_bytes += p.len() as u64;
            self.emit("pm", &p);
        }
        self.stats.packets += w.packets;
        if w.late {
            self.stats.late_parts += 1;
        } else {
            self.stats.windows += 1;
            let (a, b) = self.stats.seq_range.unwrap_or((w.seq, w.seq));
            self.stats.seq_range = Some((a.min(w.seq), b.max(w.seq)));
        }
        for q in 0..self.layout.qids {
            let mut packets = 0;
            let mut diag = (0, 0);
            let mut lat = vec![0u64; peregrine_dataplane::telemetry::kestrel::FINE_BINS];
            let mut iat = lat.clone();
            for d in 0..DIRS {
                let r = w.row_sum(d, q, 0);
                self.stats.per_qid[q][d] += r.packets;
                packets += r.packets;
                diag.0 += r.lat[7];
                diag.1 += r.iat[0];
                let (fl, fi) = w.fine_of(d, q);
                lat.iter_mut().zip(fl).for_each(|(a, b)| *a += b);
                iat.iter_mut().zip(fi).for_each(|(a, b)| *a += b);
            }
            if packets > 0 {
                self.occupancy[q] = (
                    diag.0 as f64 / packets as f64,
                    diag.1 as f64 / packets as f64,
                );
            }
            if w.late {
                continue;
            }
            match self.drift[q].window(q, packets, diag, (&lat, &iat)) {
                None => {}
                Some(Action::Calibrate { qid, reason }) => {
                    tracing::info!(qid, %reason, "kestrel: re-calibrating");
                    self.publish_set(|s| s.calibrating[qid] = true);
                }
                Some(Action::Rebin { qid, edges }) => {
                    let old = self.current_edges().qids[qid];
                    let (version, from) = self.publish_set(|s| {
                        s.qids[qid] = edges;
                        s.calibrating[qid] = false;
                    });
                    self.stats.rebinnings += 1;
                    tracing::info!(qid, ?old, new = ?edges, version, from_seq = from, "kestrel: re-binned");
                }
            }
        }
    }

    /// The telemetry bus's per-key records of a window: every installed session key's
    /// estimate (the Count-Min query the edge API answers), zeros left out.
    fn tee_keys(&mut self, msg: &SketchMsg) {
        if self.tee.is_none() {
            return;
        }
        self.refresh_keys();
        let map = self
            .sessions
            .as_ref()
            .map(|s| s.qfi_map)
            .unwrap_or_default();
        let Some(tee) = self.tee.as_mut() else { return };
        for (dir, teid, qfi) in self.keys.all() {
            let qid = usize::from(map.qid(qfi));
            let Some(b) = msg.query(usize::from(dir), qid, teid, qfi) else {
                continue;
            };
            if b.packets > 0 {
                tee.push(crate::telemetry::Telemetry::KestrelKey {
                    seq: msg.h.seq,
                    dir,
                    teid,
                    qfi,
                    packets: b.packets,
                    bytes: b.bytes,
                });
            }
        }
    }

    /// Re-read the installed sessions' keys if the rule snapshot changed.
    fn refresh_keys(&mut self) {
        if let Some(s) = &self.sessions {
            let g = s.tables.generation();
            let t = s.tables.current();
            if self.keys.update(g, &t) {
                tracing::debug!(
                    keys = self.keys.len(),
                    unkeyed = self.keys.unkeyed,
                    "kestrel: session keys"
                );
            }
        }
    }

    /// Score the window with the online detectors; publish, log and count its alarms.
    fn detect(&mut self, msg: &SketchMsg) {
        self.refresh_keys();
        let Some(d) = self.detector.as_mut() else {
            return;
        };
        let alarms = match d.on_message(msg, &self.keys) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(seq = msg.h.seq, %e, "kestrel: window not scored");
                return;
            }
        };
        for a in &alarms {
            tracing::warn!(
                seq = a.seq,
                detector = %a.detector,
                dir = a.dir,
                qfi = a.qfi,
                qid = a.qid,
                score = a.score,
                threshold = a.threshold,
                teids = ?a.teids,
                "kestrel: alarm"
            );
            let bytes = detect::encode(a);
            if let Some(s) = self.io.as_ref().and_then(|io| io.alarms.as_ref()) {
                if s.send_multipart([b"alarm".as_slice(), &bytes], zmq::DONTWAIT)
                    .is_err()
                {
                    self.alarm_errors += 1;
                }
            }
        }
    }

    fn pump(&mut self, now_ns: u64, flush: bool) {
        let ws = {
            let mut a = self.agg.lock().expect("not poisoned");
            let ws = if flush {
                a.flush(now_ns)
            } else {
                a.poll(now_ns)
            };
            self.stats.bank_stalls = a.tap_stats().1;
            self.stats.postcards = a.drain_postcards(&mut self.drained);
            ws
        };
        let mut drained = std::mem::take(&mut self.drained);
        for p in drained.drain(..) {
            self.postcards
                .entry(p.t_ns / self.window_ns)
                .or_default()
                .push(p);
        }
        self.drained = drained;
        for w in &ws {
            self.on_window(w);
            if !w.late {
                self.emit_postcards(Some(w.seq));
            }
        }
        if flush {
            self.emit_postcards(None);
        }
    }

    /// Export the postcards of windows up to `upto` (all with `None`).
    fn emit_postcards(&mut self, upto: Option<u64>) {
        while let Some((&seq, _)) = self.postcards.first_key_value() {
            if upto.is_some_and(|u| seq > u) {
                break;
            }
            let ps = self.postcards.remove(&seq).unwrap_or_default();
            let h = Header {
                v: export::VERSION,
                kind: "postcards".into(),
                seq,
                window_ns: self.window_ns,
                workers: self.workers as u32,
                sources: Vec::new(),
                late: false,
            };
            let m = export::encode(&PostcardMsg::of(h, &ps));
            self.stats.postcard_bytes += m.len() as u64;
            self.emit("postcards", &m);
        }
    }

    fn finish_stats(&mut self) {
        let secs = self.stats.windows.max(1) as f64 * self.window_ns as f64 / 1e9;
        self.stats.sketch_mbps = self.stats.sketch_bytes as f64 * 8.0 / secs / 1e6;
        self.stats.pm_mbps = self.stats.pm_bytes as f64 * 8.0 / secs / 1e6;
        self.stats.postcard_mbps = self.stats.postcard_bytes as f64 * 8.0 / secs / 1e6;
    }
}

impl<B: PacketBuf + 'static> Feature<B> for KestrelFeature {
    fn name(&self) -> &'static str {
        "kestrel"
    }

    fn prepare(
        &mut self,
        p: &Platform,
        _egress: &mut [Option<peregrine_dataplane::runtime::EgressConfig>],
    ) -> Result<(), RunError> {
        if let Some(d) = &self.section.detect {
            let det = detect::Detector::load(d, &p.base_dir)
                .map_err(|e| RunError::Config(invalid("kestrel.detect", e)))?;
            tracing::info!(detectors = ?det.kinds(), "kestrel: online detectors loaded");
            self.detector = Some(det);
        }
        let ctx = zmq::Context::new();
        let bind = |kind: zmq::SocketType, ep: &str| -> Result<Option<zmq::Socket>, RunError> {
            if ep.is_empty() {
                return Ok(None);
            }
            let s = ctx
                .socket(kind)
                .map_err(|e| RunError::Backend(format!("kestrel socket: {e}")))?;
            s.bind(ep)
                .map_err(|e| RunError::Backend(format!("kestrel: cannot bind {ep}: {e}")))?;
            Ok(Some(s))
        };
        let publ = bind(zmq::PUB, &self.section.publish)?;
        let alarms = match &self.section.detect {
            Some(d) => bind(zmq::PUB, &d.publish)?,
            None => None,
        };
        let api = bind(zmq::REP, &self.section.api)?;
        let file = match &self.windows_file {
            None => None,
            Some(p) => Some(std::io::BufWriter::new(std::fs::File::create(p).map_err(
                |e| RunError::Backend(format!("kestrel.windows_file {}: {e}", p.display())),
            )?)),
        };
        self.io = Some(Io {
            _ctx: ctx,
            publ,
            alarms,
            api,
            file,
        });
        self.epoch = Instant::now();
        Ok(())
    }

    fn telemetry_produces(&self) -> Vec<crate::telemetry::Kind> {
        match self.in_upf {
            true => vec![crate::telemetry::Kind::KestrelKeys],
            false => Vec::new(),
        }
    }

    fn telemetry_request(&mut self, k: crate::telemetry::Kind) {
        if k == crate::telemetry::Kind::KestrelKeys {
            self.tee.get_or_insert_with(Vec::new);
        }
    }

    fn telemetry_out(&mut self, out: &mut Vec<crate::telemetry::Telemetry>) {
        if let Some(t) = self.tee.as_mut() {
            out.append(t);
        }
    }

    fn use_sessions(&mut self, s: &crate::feature::Sessions) {
        if let Some(d) = self.detector.as_mut() {
            d.set_qfi_map(s.qfi_map);
        }
        self.sessions = Some(s.clone());
        self.refresh_keys();
    }

    fn taps(&self, _port: PortId, _b: &mut Build<'_>, out: &mut Taps<B>) {
        let mut n = self.next_source.lock().expect("not poisoned");
        let (tap, ends) = tap_pair(
            *n,
            &self.layout,
            self.window_ns,
            self.table.reader(),
            self.section.postcards.as_ref().map(|p| p.deltas()),
        );
        *n += 1;
        self.agg.lock().expect("not poisoned").add_source(ends);
        out.push(Box::new(tap));
    }

    fn tick(&mut self, now: Instant, _running: &Running) {
        let ns = self.now_ns(now);
        self.pump(ns, false);
        self.serve_api();
    }

    /// The workers' taps handed over their last banks: close every window now.
    fn drain(&mut self, now: Instant, _running: &Running) {
        let ns = self.now_ns(now);
        self.pump(ns, true);
    }

    fn metrics(&self, e: &mut Exposition) {
        let s = &self.stats;
        e.one(
            "peregrine_kestrel_windows_total",
            Kind::Counter,
            "Sketch windows exported (late parts not counted).",
            s.windows as f64,
        );
        e.one(
            "peregrine_kestrel_late_parts_total",
            Kind::Counter,
            "Parts of windows exported after their window (banks handed over late).",
            s.late_parts as f64,
        );
        e.family(
            "peregrine_kestrel_export_bytes_total",
            Kind::Counter,
            "Bytes of CBOR exported, by message kind.",
        );
        e.sample(
            "peregrine_kestrel_export_bytes_total",
            &[("kind", "kestrel")],
            s.sketch_bytes as f64,
        );
        e.sample(
            "peregrine_kestrel_export_bytes_total",
            &[("kind", "pm")],
            s.pm_bytes as f64,
        );
        e.one(
            "peregrine_kestrel_rebinnings_total",
            Kind::Counter,
            "Per-QID re-binnings pushed (calibration ends and drift).",
            s.rebinnings as f64,
        );
        drift::metrics(e, &self.drift);
        e.one(
            "peregrine_kestrel_bank_stalls_total",
            Kind::Counter,
            "Window edges at which a tap had no spare bank back (it kept filling the old one).",
            s.bank_stalls as f64,
        );
        if let Some(d) = &self.detector {
            detect_metrics(e, &d.stats, self.alarm_errors);
        }
        e.one(
            "peregrine_kestrel_session_keys",
            Kind::Gauge,
            "(direction, TEID, QFI) keys of the installed PFCP sessions the collector knows.",
            self.keys.len() as f64,
        );
        e.family(
            "peregrine_kestrel_diagnostic_occupancy",
            Kind::Gauge,
            "Fraction of a QID's packets in a diagnostic bin in the latest window.",
        );
        for (q, (l, i)) in self.occupancy.iter().enumerate() {
            let qs = q.to_string();
            e.sample(
                "peregrine_kestrel_diagnostic_occupancy",
                &[("qid", &qs), ("bin", "latency_tail")],
                *l,
            );
            e.sample(
                "peregrine_kestrel_diagnostic_occupancy",
                &[("qid", &qs), ("bin", "iat_head")],
                *i,
            );
        }
    }

    fn finish(mut self: Box<Self>) -> FeatureReport {
        // The workers have stopped: their taps handed over their last banks.
        let ns = self.now_ns(Instant::now());
        self.pump(ns, true);
        if let Some(io) = &mut self.io {
            if let Some(f) = &mut io.file {
                if f.flush().is_err() {
                    self.stats.file_errors += 1;
                }
            }
        }
        self.finish_stats();
        self.stats.detect = self.detector.as_ref().map(|d| d.stats.clone());
        self.stats.session_keys = self.keys.len();
        let s = &self.stats;
        let mut text = format!(
            "kestrel: {} windows ({} late parts), {} packets; export {:.3} Mbit/s sketches, {:.3} Mbit/s pm, {:.3} Mbit/s postcards ({} sent, {} dropped, {} under delta); {} re-binnings, {} bank stalls\n",
            s.windows, s.late_parts, s.packets, s.sketch_mbps, s.pm_mbps, s.postcard_mbps, s.postcards.0, s.postcards.1, s.postcards.2, s.rebinnings, s.bank_stalls
        );
        for (q, [ul, dl]) in s.per_qid.iter().enumerate() {
            if ul + dl > 0 {
                let (l, i) = self.occupancy[q];
                text += &format!(
                    "kestrel qid {q}: {ul} uplink, {dl} downlink packets; last window latency-tail {l:.4}, iat-head {i:.4}\n"
                );
            }
        }
        if let Some(d) = &s.detect {
            text += &format!(
                "kestrel detect: {} windows scored, {} alarms, scoring {:.3} ms mean / {:.3} ms max per window\n",
                d.windows_scored,
                d.alarms_total,
                1e3 * d.scoring_s_total / d.windows_scored.max(1) as f64,
                1e3 * d.scoring_s_max
            );
            for ((k, q), n) in &d.alarms {
                text += &format!("kestrel alarm {k} qfi {q}: {n} windows\n");
            }
        }
        FeatureReport::new("kestrel", s, text)
    }
}

/// The detectors' families: alarms by detector and QFI, windows scored, scoring time.
fn detect_metrics(e: &mut Exposition, d: &detect::DetectStats, alarm_errors: u64) {
    e.family(
        "peregrine_kestrel_alarms_total",
        Kind::Counter,
        "Alarms raised by the online detectors, by detector and QFI.",
    );
    for ((k, q), n) in &d.alarms {
        let qs = q.to_string();
        e.sample(
            "peregrine_kestrel_alarms_total",
            &[("detector", k), ("qfi", &qs)],
            *n as f64,
        );
    }
    e.family(
        "peregrine_kestrel_detector_score",
        Kind::Gauge,
        "The latest window's probability, by detector and QFI (detector `any`: the any-anomaly score).",
    );
    for ((k, q), p) in &d.last_score {
        let qs = q.to_string();
        e.sample(
            "peregrine_kestrel_detector_score",
            &[("detector", k), ("qfi", &qs)],
            *p,
        );
    }
    e.one(
        "peregrine_kestrel_windows_scored_total",
        Kind::Counter,
        "Windows the online detectors scored.",
        d.windows_scored as f64,
    );
    e.one(
        "peregrine_kestrel_scoring_seconds_total",
        Kind::Counter,
        "Feature extraction plus inference time, summed over the windows scored.",
        d.scoring_s_total,
    );
    e.one(
        "peregrine_kestrel_scoring_seconds_max",
        Kind::Gauge,
        "The longest feature extraction plus inference of one window.",
        d.scoring_s_max,
    );
    e.one(
        "peregrine_kestrel_alarm_publish_errors_total",
        Kind::Counter,
        "Alarms the ZeroMQ PUB socket did not take.",
        alarm_errors as f64,
    );
}
