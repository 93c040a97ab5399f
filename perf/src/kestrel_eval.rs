//! The Kestrel evaluation (Kestrel, Saha et al., section VI): seeded scenarios with the
//! anomalies of Table I through the real UPF, egress scheduler and Kestrel tap in virtual
//! time ([`sim`]), per-window features of the three telemetry modes ([`features`]), four
//! gradient-boosted-tree detectors per mode trained in Python on separate runs and evaluated
//! online in Rust ([`gbt`]), and the scores ([`metrics`]). `pg-kestrel-eval` runs it all.

pub mod eval;
pub mod features;
pub mod gbt;
pub mod metrics;
pub mod scenario;
pub mod sim;
pub mod sweeps;

use features::{Extractor, Mode, MODES};
use gbt::Model;
use peregrine_control::kestrel::binning::{self, Strategy};
use peregrine_control::kestrel::export::{encode, EdgesRec, Header, PmMsg, PostcardMsg, SketchMsg};
use peregrine_dataplane::telemetry::kestrel::{Deltas, EdgeSet, Layout, MAX_QIDS};
use scenario::{Intensity, Kind, Plan, Scenario, KINDS, S};
use sim::{RunCfg, RunStats};
use std::collections::HashMap;
use std::time::Instant;

/// What every run of one evaluation shares.
#[derive(Debug, Clone)]
pub struct EvalCfg {
    pub duration_s: u64,
    pub scale: f64,
    pub layout: Layout,
    pub deltas: Deltas,
    pub intensity: Intensity,
    pub tick_ns: u64,
    /// Per-key unit, training runs only: keep one in this many negative key rows (every
    /// positive), each kept negative weighted by it in training, so the training set stays
    /// a few hundred thousand rows. Test runs score every key. 0: no per-key unit.
    pub key_neg_every: u32,
    /// Drift re-binning during the runs (none: the calibrated edges stay).
    pub drift: Option<peregrine_control::kestrel::binning::DriftRule>,
}

/// The main evaluation's Delta-SMP deltas: a postcard when the sojourn moved by more
/// than 20 us or the inter-arrival time by more than 200 us.
pub const DELTAS: Deltas = Deltas {
    sojourn_ns: 20_000,
    iat_ns: 200_000,
};

impl EvalCfg {
    /// The main evaluation's settings for runs of `duration_s` s at `scale`: the seed's
    /// layout, [`DELTAS`], the default intensities, 10 us ticks, no per-key unit, static
    /// edges.
    pub fn paper(duration_s: u64, scale: f64) -> EvalCfg {
        EvalCfg {
            duration_s,
            scale,
            layout: Layout::paper(),
            deltas: DELTAS,
            intensity: Intensity::default(),
            tick_ns: 10_000,
            key_neg_every: 0,
            drift: None,
        }
    }

    pub fn run_cfg(&self, edges: EdgeSet) -> RunCfg {
        RunCfg {
            window_ns: S,
            layout: self.layout.clone(),
            edges,
            deltas: self.deltas,
            tick_ns: self.tick_ns,
            drift: self.drift,
        }
    }
}

/// Edges from a baseline run's fine histograms (every QID calibrating), by `strategy`.
pub fn calibrate(c: &EvalCfg, strategy: Strategy, rho: f64, seed: u64, secs: u64) -> EdgeSet {
    let plan = Plan::new(Scenario::Baseline, seed, secs, c.scale, &c.intensity);
    let mut set = EdgeSet {
        calibrating: [true; MAX_QIDS],
        ..EdgeSet::default()
    };
    let fine_len = peregrine_dataplane::telemetry::kestrel::FINE_BINS;
    let mut lat = vec![vec![0u64; fine_len]; c.layout.qids];
    let mut iat = vec![vec![0u64; fine_len]; c.layout.qids];
    let rc = RunCfg {
        drift: None,
        ..c.run_cfg(set)
    };
    sim::run(&plan, &rc, seed, |o| {
        for q in 0..c.layout.qids {
            let (l, i) = o.window.fine_of(0, q);
            for (a, &b) in lat[q].iter_mut().zip(l) {
                *a += b;
            }
            for (a, &b) in iat[q].iter_mut().zip(i) {
                *a += b;
            }
        }
    });
    set.calibrating = [false; MAX_QIDS];
    set.version = 2;
    for q in 0..c.layout.qids {
        if let Some(e) = binning::edges(strategy, rho, &lat[q], &iat[q]) {
            set.qids[q] = e;
        }
    }
    set
}

/// One scored unit: a (window, QFI) of a run, or a (window, TEID, QFI) in the per-key unit.
#[derive(Debug, Clone)]
pub struct Row {
    pub seq: u64,
    /// 0 in the per-QFI unit.
    pub teid: u32,
    pub qfi: u8,
    /// Training weight (the per-key unit's negative subsampling; 1 otherwise).
    pub weight: f32,
    /// Anomaly bits (`Kind::bit`).
    pub label: u8,
    pub x: Vec<f32>,
    /// Detector probabilities, when models were given (in `KINDS` order).
    pub score: [f64; 4],
    /// The same detectors' margins (log-odds), for the "any anomaly" score
    /// (`peregrine_control::kestrel::combine`).
    pub margin: [f64; 4],
}

/// Which unit a row set, a model or a score is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// (1 s window, QFI): every mode aggregated per QFI.
    Qfi,
    /// (1 s window, TEID, QFI): the keys that sent in the window.
    Key,
}

impl Unit {
    pub fn name(self) -> &'static str {
        match self {
            Unit::Qfi => "qfi",
            Unit::Key => "key",
        }
    }
}

/// Deterministic 1-in-`n` pick of a negative key row (splitmix64 of its coordinates).
fn keep_negative(seed: u64, seq: u64, teid: u32, qfi: u8, n: u32) -> bool {
    let mut z =
        seed ^ seq.rotate_left(17) ^ (u64::from(teid) << 8 | u64::from(qfi)).rotate_left(40);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    z.is_multiple_of(u64::from(n.max(1)))
}

/// One run's output per mode.
#[derive(Debug, Clone, Default)]
pub struct RunOut {
    pub rows: HashMap<Mode, Vec<Row>>,
    /// The per-key unit's rows (test runs: scores only, `x` empty).
    pub key_rows: HashMap<Mode, Vec<Row>>,
    /// Export bytes per mode, summed over the windows.
    pub export_bytes: HashMap<Mode, u64>,
    /// Kestrel's export in encoding version 1 (dense sketches), summed over the windows.
    pub kestrel_dense_bytes: u64,
    pub windows: u64,
    /// Per-window collector time (feature extraction + inference), ns, per mode.
    pub collector_ns: HashMap<Mode, Vec<u64>>,
    /// The same for the per-key unit (on top of the per-QFI vectors it reuses).
    pub key_collector_ns: HashMap<Mode, Vec<u64>>,
    pub stats: RunStats,
    pub plan_episodes: Vec<scenario::Episode>,
}

/// The detectors of every mode: `models[mode][kind]`.
pub type Detectors = HashMap<Mode, Vec<Model>>;

/// Run `scenario` with `seed` and extract every mode's rows in both units; with `det` (per
/// unit), score them online (a test run); without, subsample the negative key rows (a
/// training run, `EvalCfg::key_neg_every`).
pub fn collect(
    c: &EvalCfg,
    edges: EdgeSet,
    scenario: Scenario,
    seed: u64,
    det: Option<&HashMap<Unit, Detectors>>,
) -> RunOut {
    let plan = Plan::new(scenario, seed, c.duration_s, c.scale, &c.intensity);
    let keys = plan.keys();
    // Delta-SMP's "short gap" is the IAT head edge Kestrel uses for best effort.
    let short = edges.qids[7].iat[0];
    let mut ex: Vec<Extractor> = MODES
        .iter()
        .map(|&m| Extractor::new(m, &keys, short))
        .collect();
    let mut out = RunOut {
        plan_episodes: plan.episodes.clone(),
        ..RunOut::default()
    };
    let rc = c.run_cfg(edges);
    let edges_rec: Vec<EdgesRec> = (0..c.layout.qids)
        .map(|q| EdgesRec {
            qid: q,
            lat: edges.qids[q].lat.to_vec(),
            iat: edges.qids[q].iat.to_vec(),
        })
        .collect();
    let stats = sim::run(&plan, &rc, seed, |o| {
        let w = o.window;
        if w.late || w.seq * S >= plan.duration_ns {
            return;
        }
        out.windows += 1;
        let h = |kind: &str| Header {
            v: peregrine_control::kestrel::export::VERSION,
            kind: kind.into(),
            seq: w.seq,
            window_ns: S,
            workers: 1,
            sources: w.sources.clone(),
            late: false,
        };
        let sk = SketchMsg::of(w, h("kestrel"), edges_rec.clone());
        let kb = encode(&sk).len();
        // The same window in encoding version 1 (every bucket), for the export comparison.
        let dense = SketchMsg {
            h: Header {
                v: 1,
                ..sk.h.clone()
            },
            ..sk
        };
        out.kestrel_dense_bytes += encode(&dense).len() as u64;
        let pb = encode(&PmMsg::of(w, h("pm"))).len();
        let sb = if o.postcards.is_empty() {
            0
        } else {
            encode(&PostcardMsg::of(h("postcards"), o.postcards)).len()
        };
        for (m, b) in [(Mode::Kestrel, kb), (Mode::Pm, pb), (Mode::DeltaSmp, sb)] {
            *out.export_bytes.entry(m).or_default() += b as u64;
        }
        let labels = plan.labels(w.seq, S);
        for e in ex.iter_mut() {
            let t0 = Instant::now();
            let vs = e.window(w, o.postcards);
            let mut rows: Vec<Row> = vs
                .iter()
                .map(|(q, x)| Row {
                    seq: w.seq,
                    teid: 0,
                    qfi: *q,
                    weight: 1.0,
                    label: labels.qfi.get(q).copied().unwrap_or(0),
                    x: x.clone(),
                    score: [0.0; 4],
                    margin: [0.0; 4],
                })
                .collect();
            let mode = e.mode;
            let score = |rows: &mut [Row], unit: Unit| {
                if let Some(ms) = det.and_then(|d| d.get(&unit)).and_then(|d| d.get(&mode)) {
                    for r in rows.iter_mut() {
                        for (k, m) in ms.iter().enumerate() {
                            r.margin[k] = m.margin(&r.x);
                            r.score[k] = gbt::probability(r.margin[k]);
                        }
                    }
                }
            };
            score(&mut rows, Unit::Qfi);
            let dt = t0.elapsed().as_nanos() as u64;
            out.collector_ns.entry(e.mode).or_default().push(dt);
            out.rows.entry(e.mode).or_default().extend(rows);
            // The per-key unit: every key that sent in the window.
            if c.key_neg_every == 0 {
                continue;
            }
            let t1 = Instant::now();
            let mut krows: Vec<Row> = Vec::new();
            for ((t, q), x) in e.keys_window(w, o.postcards, o.active, &vs) {
                let label = labels.key.get(&(t, q)).copied().unwrap_or(0);
                let mut weight = 1.0;
                if det.is_none() && label == 0 {
                    if !keep_negative(seed, w.seq, t, q, c.key_neg_every) {
                        continue;
                    }
                    weight = c.key_neg_every as f32;
                }
                krows.push(Row {
                    seq: w.seq,
                    teid: t,
                    qfi: q,
                    weight,
                    label,
                    x,
                    score: [0.0; 4],
                    margin: [0.0; 4],
                });
            }
            if det.is_some() {
                score(&mut krows, Unit::Key);
                for r in &mut krows {
                    r.x = Vec::new();
                }
            }
            let dt = t1.elapsed().as_nanos() as u64;
            out.key_collector_ns.entry(e.mode).or_default().push(dt);
            out.key_rows.entry(e.mode).or_default().extend(krows);
        }
    });
    out.stats = stats;
    out
}

/// The anomaly kinds a scenario is scored on.
pub fn scored_kinds(s: Scenario) -> Vec<Kind> {
    match s {
        Scenario::Single(k) => vec![k],
        _ => KINDS.to_vec(),
    }
}
