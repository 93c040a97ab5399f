//! `[fridge]`: unbiased request/response delay distributions per slice (Zheng, Chen,
//! Braverman, Rexford, "Unbiased Delay Measurement in the Data Plane"). The estimator and the
//! stage are the dataplane's (`peregrine_dataplane::telemetry::fridge`); this module parses
//! the section, places one stage per worker after the main stage (it sees every packet about
//! to be sent, with the UPF's direction and QFI), and on the control thread merges the
//! workers' windows, exports them on ZeroMQ (CBOR) and on the metrics page, and writes raw
//! samples to a file when asked (`raw`). See `docs/fridge.md`.

mod export;
mod raw;

use crate::error::{invalid, ConfigError, RunError};
use crate::feature::{Build, Configure, Feature, FeatureReport, Place, Stages};
use crate::metrics::Exposition;
use crate::platform::{PipelineConfig, Platform};
use export::Aggregator;
use peregrine_dataplane::runtime::{EgressConfig, Running};
use peregrine_dataplane::telemetry::fridge::matcher::Kind;
use peregrine_dataplane::telemetry::fridge::stage::{
    raw_ring, FridgeStage, SliceSpec, StageSpec, Vantage, WorkerPub,
};
use peregrine_dataplane::telemetry::fridge::{FridgeSet, FridgeSpec, XMode};
use peregrine_dataplane::PacketBuf;
use serde::Deserialize;
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use export::{WindowReport, CBOR_VERSION};
use raw::RawSink;
pub use raw::{RawConfig, RAW_HEADER};
use std::path::PathBuf;

/// `[fridge]`: the window, what x counts, the samples' outputs and the slices (the P4
/// generator, `peregrine-p4`, reads it with this type too).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FridgeSection {
    /// Window length, ms.
    #[serde(default = "default_window")]
    pub window_ms: u64,
    /// What x counts: "insertions" (default) or "requests".
    #[serde(default = "default_x")]
    pub x_counts: String,
    /// Hash seed (each worker mixes in its index).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Ports whose received packets are uplink when no UPF sets a direction.
    #[serde(default)]
    pub uplink_ports: Vec<String>,
    /// ZeroMQ PUB endpoint for window reports (CBOR), e.g. "tcp://127.0.0.1:5600".
    pub zmq_pub: Option<String>,
    /// Raw (delay, x, fridge) samples to this CSV file (relative to the config's directory).
    pub raw_file: Option<PathBuf>,
    /// Per-worker ring to the control thread, samples.
    #[serde(default = "default_raw_ring")]
    pub raw_ring: usize,
    /// Lines written at most.
    #[serde(default = "default_raw_max")]
    pub raw_max_samples: u64,
    #[serde(rename = "slice")]
    pub slices: Vec<SliceSection>,
}

/// `[[fridge.slice]]`: one kind of exchange, where it is watched, its filters and fridges.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SliceSection {
    pub name: String,
    pub kind: String,
    #[serde(default = "default_vantage")]
    pub vantage: String,
    #[serde(default)]
    pub qfi: Vec<u8>,
    #[serde(default)]
    pub ports: Vec<u16>,
    /// `gtp_echo` only: the GTP-U peers (gNB addresses) whose echoes this slice takes.
    #[serde(default)]
    pub peers: Vec<String>,
    /// One fridge: `m` and `p`; several: `fridges = [{ m, p }, ...]`.
    pub m: Option<u32>,
    pub p: Option<f64>,
    #[serde(default)]
    pub fridges: Vec<FridgeEntry>,
}

/// One fridge(M, p) of a slice's `fridges = [...]`.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FridgeEntry {
    pub m: u32,
    pub p: f64,
}

fn default_window() -> u64 {
    1000
}
fn default_x() -> String {
    "insertions".into()
}
fn default_seed() -> u64 {
    0x6672_6964_6765
}
fn default_vantage() -> String {
    "n6".into()
}
fn default_raw_ring() -> usize {
    8192
}
fn default_raw_max() -> u64 {
    10_000_000
}

/// `raw_file`, `raw_ring`, `raw_max_samples`.
fn raw_config(s: &FridgeSection, p: &Platform) -> Result<Option<RawConfig>, ConfigError> {
    let Some(path) = &s.raw_file else {
        return Ok(None);
    };
    if !(1..=1 << 24).contains(&s.raw_ring) {
        return Err(invalid("fridge.raw_ring", "must be 1..=16777216 samples"));
    }
    if s.raw_max_samples == 0 {
        return Err(invalid("fridge.raw_max_samples", "must be at least 1"));
    }
    Ok(Some(RawConfig {
        path: p.resolve(path),
        ring: s.raw_ring,
        max_samples: s.raw_max_samples,
    }))
}

/// The fridge feature.
#[derive(Debug)]
pub struct FridgeFeature {
    spec: StageSpec,
    zmq_pub: Option<String>,
    workers: Mutex<Vec<Arc<WorkerPub>>>,
    agg: Option<Aggregator>,
    raw_cfg: Option<RawConfig>,
    /// Made in `prepare`; each worker's ring is added as its stage is built.
    raw: Mutex<Option<RawSink>>,
    /// The raw samples also feed the telemetry bus (a consumer asked); ring size without
    /// a raw file: `raw_ring`.
    tee: bool,
    tee_ring: usize,
}

fn parse(s: FridgeSection, p: &Platform) -> Result<(StageSpec, Option<String>), ConfigError> {
    if s.window_ms == 0 {
        return Err(invalid("fridge.window_ms", "must be at least 1"));
    }
    let mode = match s.x_counts.as_str() {
        "insertions" => XMode::Insertions,
        "requests" => XMode::Requests,
        o => {
            return Err(invalid(
                "fridge.x_counts",
                format!("\"{o}\": expected \"insertions\" or \"requests\""),
            ))
        }
    };
    let mut uplink_ports = Vec::new();
    for n in &s.uplink_ports {
        uplink_ports.push(
            p.port_index(n)
                .ok_or_else(|| invalid("fridge.uplink_ports", format!("no port named \"{n}\"")))?,
        );
    }
    if s.slices.is_empty() {
        return Err(invalid(
            "fridge.slice",
            "at least one [[fridge.slice]] is needed",
        ));
    }
    let mut slices = Vec::new();
    for (i, sl) in s.slices.iter().enumerate() {
        let key = |k: &str| format!("fridge.slice[{i}].{k}");
        if sl.name.is_empty() || slices.iter().any(|x: &SliceSpec| x.name == sl.name) {
            return Err(invalid(
                key("name"),
                format!("\"{}\" is empty or used twice", sl.name),
            ));
        }
        let kind = Kind::from_name(&sl.kind).ok_or_else(|| {
            invalid(
                key("kind"),
                format!(
                    "\"{}\": expected one of {}",
                    sl.kind,
                    Kind::ALL.map(Kind::name).join(", ")
                ),
            )
        })?;
        let vantage = match sl.vantage.as_str() {
            "n6" => Vantage::N6,
            "n3" => Vantage::N3,
            o => {
                return Err(invalid(
                    key("vantage"),
                    format!("\"{o}\": expected \"n6\" or \"n3\""),
                ))
            }
        };
        let mut peers = Vec::new();
        for a in &sl.peers {
            peers.push(a.parse::<std::net::IpAddr>().map_err(|_| {
                invalid(
                    key("peers"),
                    format!("\"{a}\" is not an IPv4 or IPv6 address"),
                )
            })?);
        }
        if !peers.is_empty() && kind != Kind::GtpEcho {
            return Err(invalid(
                key("peers"),
                "keys gtp_echo slices by GTP-U peer; other kinds have no peer",
            ));
        }
        if let Some(q) = sl.qfi.iter().find(|&&q| q > 63) {
            return Err(invalid(key("qfi"), format!("{q} is not a QFI (0..=63)")));
        }
        let fridges: Vec<FridgeSpec> = match (sl.m, sl.p, sl.fridges.is_empty()) {
            (Some(m), Some(p), true) => vec![FridgeSpec { m, p }],
            (None, None, false) => sl
                .fridges
                .iter()
                .map(|f| FridgeSpec { m: f.m, p: f.p })
                .collect(),
            _ => {
                return Err(invalid(
                    key("fridges"),
                    "give either m and p (one fridge) or fridges = [{ m, p }, ...]",
                ))
            }
        };
        if let Some(f) = fridges.iter().find(|f| f.m > 1 << 24) {
            return Err(invalid(
                key("m"),
                format!("{} slots: at most 2^24 per fridge", f.m),
            ));
        }
        FridgeSet::new(&fridges, mode, 0).map_err(|e| invalid(key("fridges"), e.to_string()))?;
        slices.push(SliceSpec {
            name: sl.name.clone(),
            kind,
            vantage,
            qfi: sl.qfi.clone(),
            ports: sl.ports.clone(),
            peers,
            fridges,
        });
    }
    Ok((
        StageSpec {
            slices,
            mode,
            window_ns: s.window_ms * 1_000_000,
            seed: s.seed,
            uplink_ports,
        },
        s.zmq_pub,
    ))
}

impl Configure for FridgeFeature {
    const SECTION: &'static str = "fridge";

    fn configure(section: Option<&toml::Value>, p: &Platform) -> Result<Option<Self>, ConfigError> {
        let Some(v) = section else {
            return Ok(None);
        };
        if matches!(p.pipeline, PipelineConfig::Int { .. }) {
            return Err(invalid(
                "fridge",
                "the fridge runs in the upf, l3fwd and xconnect pipelines",
            ));
        }
        let s: FridgeSection = v
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| invalid("fridge", e.message().to_string()))?;
        let raw_cfg = raw_config(&s, p)?;
        let tee_ring = s.raw_ring.clamp(1, 1 << 24);
        let (spec, zmq_pub) = parse(s, p)?;
        Ok(Some(FridgeFeature {
            spec,
            zmq_pub,
            workers: Mutex::new(Vec::new()),
            agg: None,
            raw_cfg,
            raw: Mutex::new(None),
            tee: false,
            tee_ring,
        }))
    }
}

impl<B: PacketBuf + 'static> Feature<B> for FridgeFeature {
    fn name(&self) -> &'static str {
        Self::SECTION
    }

    /// The exporter binds before workers start: a bad endpoint fails the run early.
    fn prepare(&mut self, _p: &Platform, _e: &mut [Option<EgressConfig>]) -> Result<(), RunError> {
        self.agg = Some(
            Aggregator::new(&self.spec, self.zmq_pub.as_deref())
                .map_err(|e| RunError::Backend(format!("fridge.zmq_pub: {e}")))?,
        );
        if let Some(c) = &self.raw_cfg {
            let names = self.spec.slices.iter().map(|s| s.name.clone()).collect();
            let sink = RawSink::create(c, names).map_err(|e| {
                RunError::Config(invalid(
                    "fridge.raw_file",
                    format!("cannot create {}: {e}", c.path.display()),
                ))
            })?;
            *lock(&self.raw) = Some(sink);
        }
        if self.tee {
            let mut raw = lock(&self.raw);
            match raw.as_mut() {
                Some(sink) => sink.tee = Some(Vec::new()),
                None => {
                    let names = self.spec.slices.iter().map(|s| s.name.clone()).collect();
                    *raw = Some(RawSink::tee_only(names));
                }
            }
        }
        Ok(())
    }

    fn telemetry_produces(&self) -> Vec<crate::telemetry::Kind> {
        vec![crate::telemetry::Kind::FridgeSamples]
    }

    fn telemetry_request(&mut self, k: crate::telemetry::Kind) {
        self.tee |= k == crate::telemetry::Kind::FridgeSamples;
    }

    fn telemetry_out(&mut self, out: &mut Vec<crate::telemetry::Telemetry>) {
        if let Some(t) = lock(&self.raw).as_mut().and_then(|s| s.tee.as_mut()) {
            out.extend(
                t.drain(..)
                    .map(|s| crate::telemetry::Telemetry::FridgeSample {
                        slice: s.slice,
                        fridge: u16::from(s.fridge),
                        delay_ns: s.delay_ns,
                    }),
            );
        }
    }

    fn reads_packet_meta(&self) -> bool {
        true
    }

    /// After the main stage, on every packet about to be sent (any port).
    fn stages(&self, place: Place, b: &mut Build<'_>, out: &mut Stages<B>) {
        if place != Place::AfterUpf {
            return;
        }
        let publ = Arc::new(WorkerPub::new(&self.spec));
        let mut st = FridgeStage::new(&self.spec, b.worker, publ.clone())
            .expect("validated when the section was parsed");
        if let Some(sink) = lock(&self.raw).as_mut() {
            let ring = self.raw_cfg.as_ref().map_or(self.tee_ring, |c| c.ring);
            let (tx, rx) = raw_ring(ring);
            sink.add_ring(rx);
            st = st.with_raw(tx);
        }
        match self.workers.lock() {
            Ok(mut w) => w.push(publ),
            Err(p) => p.into_inner().push(publ),
        }
        // Every packet about to be sent, any port: the stage scopes itself (see its
        // `process`), as `OnEgress` over every port would, without rewriting dispositions.
        out.push(Box::new(st));
    }

    fn tick(&mut self, _now: Instant, _running: &Running) {
        let workers = match self.workers.lock() {
            Ok(w) => w.clone(),
            Err(p) => p.into_inner().clone(),
        };
        if let Some(a) = &mut self.agg {
            a.poll(&workers);
        }
        if let Some(sink) = lock(&self.raw).as_mut() {
            sink.drain();
        }
    }

    fn metrics(&self, e: &mut Exposition) {
        if let Some(a) = &self.agg {
            a.metrics(e);
        }
        if let Some(sink) = lock(&self.raw).as_ref().filter(|_| self.raw_cfg.is_some()) {
            sink.metrics(&lock(&self.workers), e);
        }
    }

    fn finish(self: Box<Self>) -> FeatureReport {
        let workers = match self.workers.lock() {
            Ok(w) => w.clone(),
            Err(p) => p.into_inner().clone(),
        };
        let mut raw = lock(&self.raw).take().filter(|_| self.raw_cfg.is_some());
        let mut r = match self.agg {
            Some(mut a) => {
                a.poll(&workers);
                a.finish(&workers)
            }
            None => FeatureReport::new("fridge", &serde_json::json!({}), String::new()),
        };
        if let Some(sink) = raw.as_mut() {
            sink.drain();
            let j = sink.report(&workers);
            r.text.push_str(&format!(
                "fridge raw samples: {} written to {} ({} ring full, {} file full)\n",
                j["written"],
                sink.path().display(),
                j["ring_full"],
                j["file_full"]
            ));
            if let Some(o) = r.json.as_object_mut() {
                o.insert("raw".into(), j);
            }
        }
        r
    }
}

/// The lock, poisoned or not (the control thread is its only user after start).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests;
