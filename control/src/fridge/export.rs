//! The control thread's side: merge the workers' finished windows per slice, combine each
//! slice's fridges by inverse-variance weighting, and export (ZeroMQ PUB with one CBOR map per
//! slice and window; the metrics page; the end-of-run summary).

use crate::feature::FeatureReport;
use crate::metrics::{Exposition, Kind as MKind};
use peregrine_dataplane::telemetry::fridge::hist::{bin_bounds, combine_ivw, IVW_GROUP};
use peregrine_dataplane::telemetry::fridge::matcher::Skip;
use peregrine_dataplane::telemetry::fridge::stage::{SliceSpec, StageSpec, WorkerPub};
use peregrine_dataplane::telemetry::fridge::window::STAT_NAMES;
use peregrine_dataplane::telemetry::fridge::{Cdf, LogHist, NBINS};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

/// Version of the CBOR window report (`v`).
pub const CBOR_VERSION: u32 = 1;

/// The quantiles reported everywhere.
const QUANTILES: [(f64, &str); 4] = [(0.5, "0.5"), (0.9, "0.9"), (0.95, "0.95"), (0.99, "0.99")];

/// One slice's window as published on ZeroMQ (topic `fridge.<slice>`), CBOR-encoded. The
/// schema is in `docs/fridge.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowReport {
    pub v: u32,
    pub slice: String,
    pub kind: String,
    pub vantage: String,
    /// Window start, ns of the workers' clock (`index * window_ns`); `u64::MAX` marks the
    /// cumulative report sent at the end of a run.
    pub window_start_ns: u64,
    pub window_ns: u64,
    /// Delay samples (matched responses) in the window, all fridges.
    pub samples: u64,
    /// Estimated request/response pairs (sum of the IVW-combined f over bins).
    pub estimated_pairs: f64,
    /// (quantile, delay ns): 0.5, 0.9, 0.95, 0.99; empty without samples.
    pub quantiles: Vec<(f64, f64)>,
    /// Non-empty bins: (lower edge ns, upper edge ns, estimated pairs).
    pub bins: Vec<(u64, u64, f64)>,
    /// Per fridge: (M, p, samples).
    pub fridges: Vec<(u32, f64, u64)>,
    /// A `gtp_echo` slice's GTP-U peers (empty: any, and for other kinds). Added after v1's
    /// first fields; absent in older reports.
    #[serde(default)]
    pub peers: Vec<String>,
}

#[derive(Debug)]
struct SliceAgg {
    spec: SliceSpec,
    /// Finished windows not yet exported, by index.
    pending: BTreeMap<u64, Vec<LogHist>>,
    /// The last exported window.
    last: Option<WindowReport>,
    /// Per worker: the last `done` generation taken.
    taken: Vec<u64>,
    /// Per worker: cumulative set counters.
    stats: Vec<[u64; 7]>,
    windows: u64,
    missed: u64,
}

/// Merges and exports; lives on the control thread.
pub struct Aggregator {
    window_ns: u64,
    slices: Vec<SliceAgg>,
    zmq: Option<(zmq::Context, zmq::Socket)>,
    sent: u64,
    send_errors: u64,
}

impl std::fmt::Debug for Aggregator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aggregator")
            .field("slices", &self.slices.len())
            .field("sent", &self.sent)
            .finish()
    }
}

/// The IVW-combined mass of per-fridge histograms.
fn combined(h: &[LogHist]) -> Vec<f64> {
    let mut out = vec![0.0; NBINS];
    combine_ivw(&h.iter().collect::<Vec<_>>(), IVW_GROUP, &mut out);
    out
}

fn report(spec: &SliceSpec, window_ns: u64, start: u64, h: &[LogHist]) -> WindowReport {
    let mass = combined(h);
    let cdf = Cdf::from_mass(&mass);
    WindowReport {
        v: CBOR_VERSION,
        slice: spec.name.clone(),
        kind: spec.kind.name().into(),
        vantage: spec.vantage.name().into(),
        window_start_ns: start,
        window_ns,
        samples: h.iter().map(LogHist::samples).sum(),
        estimated_pairs: cdf.as_ref().map_or(0.0, Cdf::total),
        quantiles: cdf
            .as_ref()
            .map(|c| QUANTILES.iter().map(|&(q, _)| (q, c.quantile(q))).collect())
            .unwrap_or_default(),
        bins: mass
            .iter()
            .enumerate()
            .filter(|(_, &m)| m > 0.0)
            .map(|(b, &m)| {
                let (lo, hi) = bin_bounds(b);
                (lo, hi, m)
            })
            .collect(),
        fridges: spec
            .fridges
            .iter()
            .zip(h)
            .map(|(f, x)| (f.m, f.p, x.samples()))
            .collect(),
        peers: spec.peers.iter().map(ToString::to_string).collect(),
    }
}

impl Aggregator {
    pub fn new(spec: &StageSpec, zmq_pub: Option<&str>) -> Result<Aggregator, String> {
        let zmq = match zmq_pub {
            Some(ep) => {
                let ctx = zmq::Context::new();
                let s = ctx
                    .socket(zmq::PUB)
                    .map_err(|e| format!("PUB socket: {e}"))?;
                s.set_sndhwm(1000).map_err(|e| e.to_string())?;
                s.set_linger(0).map_err(|e| e.to_string())?;
                s.bind(ep).map_err(|e| format!("bind {ep}: {e}"))?;
                Some((ctx, s))
            }
            None => None,
        };
        Ok(Aggregator {
            window_ns: spec.window_ns,
            slices: spec
                .slices
                .iter()
                .map(|s| SliceAgg {
                    spec: s.clone(),
                    pending: BTreeMap::new(),
                    last: None,
                    taken: Vec::new(),
                    stats: Vec::new(),
                    windows: 0,
                    missed: 0,
                })
                .collect(),
            zmq,
            sent: 0,
            send_errors: 0,
        })
    }

    fn send(&mut self, r: &WindowReport) {
        let Some((_, s)) = &self.zmq else {
            return;
        };
        let mut buf = Vec::new();
        if ciborium::into_writer(r, &mut buf).is_err() {
            self.send_errors += 1;
            return;
        }
        let topic = format!("fridge.{}", r.slice);
        match s.send_multipart([topic.as_bytes(), &buf[..]], zmq::DONTWAIT) {
            Ok(()) => self.sent += 1,
            Err(_) => self.send_errors += 1,
        }
    }

    /// Take every worker's newly finished windows; export the windows some worker has moved
    /// past.
    pub fn poll(&mut self, workers: &[std::sync::Arc<WorkerPub>]) {
        let mut out = Vec::new();
        for s in self.slices.iter_mut() {
            s.taken.resize(workers.len(), 0);
            s.stats.resize(workers.len(), [0; 7]);
        }
        for (si, s) in self.slices.iter_mut().enumerate() {
            let mut newest = None;
            for (w, wp) in workers.iter().enumerate() {
                let Some(p) = wp.slices.get(si) else { continue };
                if p.done.generation() == s.taken[w] {
                    continue;
                }
                let Some(snap) = p.done.read() else { continue };
                if snap.gen <= s.taken[w] {
                    continue;
                }
                s.missed += snap.gen - s.taken[w] - 1;
                s.taken[w] = snap.gen;
                s.stats[w] = snap.stats;
                match s.pending.get_mut(&snap.index) {
                    Some(v) => v.iter_mut().zip(&snap.hists).for_each(|(a, b)| a.merge(b)),
                    None => {
                        s.pending.insert(snap.index, snap.hists);
                    }
                }
                newest = newest.max(Some(snap.index));
            }
            // Windows older than the newest finished one are complete (workers roll at the
            // same boundaries); a straggler's late part only reaches the whole-run totals.
            if let Some(n) = newest {
                let ready: Vec<u64> = s.pending.range(..n).map(|(&i, _)| i).collect();
                for i in ready.into_iter().chain(std::iter::once(n)) {
                    if let Some(h) = s.pending.remove(&i) {
                        let r = report(&s.spec, self.window_ns, i * self.window_ns, &h);
                        s.windows += 1;
                        s.last = Some(r.clone());
                        out.push(r);
                    }
                }
            }
        }
        for r in &out {
            self.send(r);
        }
    }

    /// The whole run so far: every worker's totals (exact even when windows were missed).
    fn totals(&self, si: usize, workers: &[std::sync::Arc<WorkerPub>]) -> Vec<LogHist> {
        let mut h: Vec<LogHist> = self.slices[si]
            .spec
            .fridges
            .iter()
            .map(|_| LogHist::new())
            .collect();
        for wp in workers {
            if let Some(t) = wp.slices.get(si).and_then(|p| p.total.read()) {
                h.iter_mut().zip(&t.hists).for_each(|(a, b)| a.merge(b));
            }
        }
        h
    }

    pub fn metrics(&self, e: &mut Exposition) {
        e.family(
            "peregrine_fridge_delay_seconds",
            MKind::Gauge,
            "Estimated request/response delay quantiles of the slice's last window (fridge estimator, IVW-combined).",
        );
        e.family(
            "peregrine_fridge_delay_cdf",
            MKind::Gauge,
            "Estimated fraction of the last window's pairs with delay <= le seconds.",
        );
        e.family(
            "peregrine_fridge_estimated_pairs",
            MKind::Gauge,
            "Estimated request/response pairs in the slice's last window.",
        );
        e.family(
            "peregrine_fridge_events_total",
            MKind::Counter,
            "Fridge set counters per slice (requests, inserted, overwrote, responses, not_sampled, matched, unmatched).",
        );
        e.family(
            "peregrine_fridge_windows_total",
            MKind::Counter,
            "Windows merged and exported per slice.",
        );
        const LE: [f64; 12] = [
            1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.5, 1.0,
        ];
        for s in &self.slices {
            let name = s.spec.name.as_str();
            if let Some(r) = &s.last {
                for &(q, d) in &r.quantiles {
                    let qs = QUANTILES.iter().find(|x| x.0 == q).map_or("?", |x| x.1);
                    e.sample(
                        "peregrine_fridge_delay_seconds",
                        &[("slice", name), ("quantile", qs)],
                        d / 1e9,
                    );
                }
                let mass: f64 = r.bins.iter().map(|b| b.2).sum();
                if mass > 0.0 {
                    for le in LE {
                        let below: f64 = r
                            .bins
                            .iter()
                            .map(|&(lo, hi, m)| {
                                let t = le * 1e9;
                                m * ((t - lo as f64) / (hi - lo) as f64).clamp(0.0, 1.0)
                            })
                            .sum();
                        e.sample(
                            "peregrine_fridge_delay_cdf",
                            &[("slice", name), ("le", &format!("{le}"))],
                            below / mass,
                        );
                    }
                }
                e.sample(
                    "peregrine_fridge_estimated_pairs",
                    &[("slice", name)],
                    r.estimated_pairs,
                );
            }
            for (i, what) in STAT_NAMES.iter().enumerate() {
                let v: u64 = s.stats.iter().map(|x| x[i]).sum();
                e.sample(
                    "peregrine_fridge_events_total",
                    &[("slice", name), ("event", what)],
                    v as f64,
                );
            }
            e.sample(
                "peregrine_fridge_windows_total",
                &[("slice", name)],
                s.windows as f64,
            );
        }
        e.one(
            "peregrine_fridge_reports_sent_total",
            MKind::Counter,
            "Window reports published on ZeroMQ.",
            self.sent as f64,
        );
        e.one(
            "peregrine_fridge_report_errors_total",
            MKind::Counter,
            "Window reports not published (encoding failed or the PUB queue was full).",
            self.send_errors as f64,
        );
    }

    fn skips(workers: &[std::sync::Arc<WorkerPub>]) -> BTreeMap<&'static str, u64> {
        let mut m = BTreeMap::new();
        for (i, n) in Skip::NAMES.iter().enumerate() {
            m.insert(
                *n,
                workers
                    .iter()
                    .map(|w| w.skips.counts[i].load(Ordering::Relaxed))
                    .sum(),
            );
        }
        m.insert(
            "unsliced",
            workers
                .iter()
                .map(|w| w.skips.unsliced.load(Ordering::Relaxed))
                .sum(),
        );
        m
    }

    /// The end-of-run report: per slice the whole run's distribution (the workers' totals), also sent on ZeroMQ with `window_start_ns = u64::MAX`.
    pub fn finish(mut self, workers: &[std::sync::Arc<WorkerPub>]) -> FeatureReport {
        let mut text = String::new();
        let mut slices = Vec::new();
        for si in 0..self.slices.len() {
            let h = self.totals(si, workers);
            let s = &self.slices[si];
            let r = report(&s.spec, self.window_ns, u64::MAX, &h);
            let q = |x: f64| {
                r.quantiles
                    .iter()
                    .find(|p| p.0 == x)
                    .map_or("-".to_string(), |p| format!("{:.3} ms", p.1 / 1e6))
            };
            text.push_str(&format!(
                "fridge {}: {} samples, ~{:.0} pairs, p50 {} p90 {} p99 {}\n",
                s.spec.name,
                r.samples,
                r.estimated_pairs,
                q(0.5),
                q(0.9),
                q(0.99)
            ));
            let mut events = BTreeMap::new();
            for (i, name) in STAT_NAMES.iter().enumerate() {
                let v: u64 = workers
                    .iter()
                    .filter_map(|w| w.slices.get(si).and_then(|p| p.total.read()))
                    .map(|t| t.stats[i])
                    .sum();
                events.insert(*name, v);
            }
            slices.push(serde_json::json!({
                "events": events,
                "slice": r.slice, "kind": r.kind, "vantage": r.vantage,
                "samples": r.samples, "estimated_pairs": r.estimated_pairs,
                "quantiles_ns": r.quantiles.iter().map(|p| (format!("{}", p.0), p.1)).collect::<BTreeMap<_, _>>(),
                "windows": s.windows, "windows_missed": s.missed,
            }));
            self.send(&r);
        }
        let json = serde_json::json!({
            "slices": slices,
            "skipped": Self::skips(workers),
            "reports_sent": self.sent,
            "report_errors": self.send_errors,
        });
        FeatureReport::new("fridge", &json, text)
    }
}
