//! The evaluation's sweeps at a reduced size (Kestrel, Saha et al., section VI): binning
//! strategies (Fig. 6b), sketch size (w, d) against export beside Delta-SMP's deltas (Fig. 4,
//! the Pareto plot) and the anomaly intensity. Each point is one [`evaluate`]: binning, (w, d)
//! and Delta-SMP's deltas are scored per (window, QFI) and, when the configuration's
//! `key_neg_every` is not 0, per (window, TEID, QFI) with the headline per-key features,
//! detectors and training; the intensity sweep too (Kestrel and 3GPP-PM).

use super::eval::evaluate;
use super::features::Mode;
use super::{calibrate, EvalCfg};
use crate::fridge_eval::plot::{lines, Series};
use peregrine_control::kestrel::binning::Strategy;
use peregrine_dataplane::telemetry::kestrel::layout::default_seeds;
use peregrine_dataplane::telemetry::kestrel::{Deltas, Layout};
use std::fmt::Write as _;
use std::path::Path;

/// One binning strategy: mixed AUPRC per seed, per QFI and (when scored) per key.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BinPoint(pub String, pub Vec<f64>, pub Vec<f64>);

/// One sketch layout: (w, d, mixed AUPRC per QFI, Kestrel export Mbit/s, per-key AUPRC).
#[derive(Debug, Clone, serde::Serialize)]
pub struct WdPoint(pub usize, pub usize, pub f64, pub f64, pub Option<f64>);

/// Delta-SMP's deltas times a factor (0: a postcard per packet): (factor, mixed AUPRC per
/// QFI, export Mbit/s, per-key AUPRC).
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeltaPoint(pub f64, pub f64, pub f64, pub Option<f64>);

/// Every anomaly's intensity times `factor`: the mixed AUPRC of each mode in
/// [`INTENSITY_MODES`] order, per QFI and per key.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IntensityPoint {
    pub factor: f64,
    pub per_qfi: [f64; 3],
    pub per_key: [Option<f64>; 3],
}

/// The intensity sweep's modes: (results key, label).
pub const INTENSITY_MODES: [(Mode, &str, &str); 3] = [
    (Mode::Kestrel, "kestrel", "Kestrel"),
    (Mode::DeltaSmp, "delta_smp", "Delta-SMP"),
    (Mode::Pm, "pm", "3GPP-PM"),
];

/// The sweeps' results.
#[derive(Debug, Clone, Default)]
pub struct Sweeps {
    pub binning: Vec<BinPoint>,
    pub wd: Vec<WdPoint>,
    pub intensity: Vec<IntensityPoint>,
    pub deltas: Vec<DeltaPoint>,
}

/// Which sweeps to run.
#[derive(Debug, Clone, Copy)]
pub struct Which {
    pub binning: bool,
    pub wd: bool,
    pub deltas: bool,
    pub intensity: bool,
}

impl Which {
    pub const ALL: Which = Which {
        binning: true,
        wd: true,
        deltas: true,
        intensity: true,
    };
}

/// The binning strategies in table order.
pub const STRATEGIES: [(&str, Strategy); 4] = [
    ("target-occupancy", Strategy::Target),
    ("P90", Strategy::P90),
    ("log", Strategy::Log),
    ("equal-mass", Strategy::EqualMass),
];

/// The (w, d) layouts of the sketch-size sweep.
pub const LAYOUTS: [(usize, usize); 6] =
    [(128, 3), (256, 3), (512, 2), (512, 3), (512, 4), (1024, 3)];

/// Delta-SMP's delta factors.
pub const DELTA_FACTORS: [f64; 5] = [0.0, 1.0, 4.0, 16.0, 64.0];

/// The intensity factors: down to where the anomalies fade into the traffic.
pub const INTENSITY_FACTORS: [f64; 5] = [0.1, 0.25, 0.5, 1.0, 2.0];

/// The mixed AUPRC of `mode` per key, if the per-key unit was scored.
fn key_auprc(s: &super::eval::Summary, mode: &str) -> Option<f64> {
    s.key.as_ref().map(|k| k.scores[mode]["mixed"].auprc)
}

/// Run the sweeps of `which` with `cs` (the sweep size; its layout, deltas and intensity are
/// the defaults the sweeps vary), calibration seeds `seeds` for the binning sweep; models and
/// features under `work`. `done` is called after each finished sweep with the results so far.
pub fn run(
    cs: &EvalCfg,
    seeds: &[u64],
    which: Which,
    threads: usize,
    work: &Path,
    mut done: impl FnMut(&Sweeps) -> Result<(), String>,
) -> Result<Sweeps, String> {
    let mut sw = Sweeps::default();
    if which.binning {
        for (name, s) in STRATEGIES {
            let (mut q, mut k) = (Vec::new(), Vec::new());
            for &sd in seeds {
                let e = calibrate(cs, s, 0.01, sd, 30);
                let w = work.join(format!("bin-{name}-{sd}"));
                let r = evaluate(cs, e, &[Mode::Kestrel], 1, 1, threads, &w)?;
                q.push(r.scores["kestrel"]["mixed"].auprc);
                k.extend(key_auprc(&r, "kestrel"));
            }
            eprintln!("binning {name}: per QFI {q:?}, per key {k:?}");
            sw.binning.push(BinPoint(name.to_string(), q, k));
        }
        done(&sw)?;
    }
    let edges = calibrate(cs, Strategy::Target, 0.01, 7, 30);
    if which.wd {
        for (wi, d) in LAYOUTS {
            let l = Layout::new(8, d, wi, default_seeds(8)).map_err(|e| e.to_string())?;
            let cw = EvalCfg {
                layout: l,
                ..cs.clone()
            };
            let dir = work.join(format!("wd-{wi}x{d}"));
            let r = evaluate(&cw, edges, &[Mode::Kestrel], 1, 1, threads, &dir)?;
            sw.wd.push(WdPoint(
                wi,
                d,
                r.scores["kestrel"]["mixed"].auprc,
                r.export_mbps["kestrel"],
                key_auprc(&r, "kestrel"),
            ));
            eprintln!("w {wi} d {d}: {:?}", sw.wd.last());
        }
        done(&sw)?;
    }
    if which.deltas {
        // Delta-SMP's export budget: its deltas scaled (0: a postcard per packet), to set
        // its AUPRC against its export beside Kestrel's (w, d) points.
        for f in DELTA_FACTORS {
            let cd = EvalCfg {
                deltas: Deltas {
                    sojourn_ns: (f64::from(cs.deltas.sojourn_ns) * f) as u32,
                    iat_ns: (f64::from(cs.deltas.iat_ns) * f) as u32,
                },
                ..cs.clone()
            };
            let dir = work.join(format!("delta-{f}"));
            let r = evaluate(&cd, edges, &[Mode::DeltaSmp], 1, 1, threads, &dir)?;
            sw.deltas.push(DeltaPoint(
                f,
                r.scores["delta_smp"]["mixed"].auprc,
                r.export_mbps["delta_smp"],
                key_auprc(&r, "delta_smp"),
            ));
            eprintln!("Delta-SMP deltas x{f}: {:?}", sw.deltas.last());
        }
        done(&sw)?;
    }
    if which.intensity {
        for f in INTENSITY_FACTORS {
            let ci = EvalCfg {
                intensity: cs.intensity.times(f),
                ..cs.clone()
            };
            let w = work.join(format!("int-{f}"));
            let modes = INTENSITY_MODES.map(|m| m.0);
            let r = evaluate(&ci, edges, &modes, 1, 1, threads, &w)?;
            sw.intensity.push(IntensityPoint {
                factor: f,
                per_qfi: INTENSITY_MODES.map(|m| r.scores[m.1]["mixed"].auprc),
                per_key: INTENSITY_MODES.map(|m| key_auprc(&r, m.1)),
            });
            eprintln!("intensity x{f}: {:?}", sw.intensity.last());
        }
        done(&sw)?;
    }
    Ok(sw)
}

/// Mean and population standard deviation.
fn mean_sd(v: &[f64]) -> (f64, f64) {
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
    (mean, sd)
}

/// A per-key cell: the value or "-" when the per-key unit was not scored.
fn cell(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.3}"))
}

/// The sweeps' JSON fields (merged into the results JSON).
pub fn json(sw: &Sweeps) -> serde_json::Value {
    serde_json::json!({
        "binning": sw.binning, "w_d_sweep": sw.wd, "intensity_sweep": sw.intensity,
        "delta_smp_sweep": sw.deltas,
    })
}

/// The sweeps' sections of the results page (`name`: the page's file stem, for the plots).
pub fn markdown(w: &mut String, sw: &Sweeps, name: &str, deltas: Deltas) -> std::fmt::Result {
    if !sw.binning.is_empty() {
        writeln!(
            w,
            "\n## Binning strategies (seed Fig. 6b), Kestrel mixed AUPRC per QFI and per key\n"
        )?;
        writeln!(w, "Sweep size: scale 0.1, 200 s runs; each seed its own calibration run, one training and one test run per scenario. Per key: the (window, TEID, QFI) unit of the per-key section above (its features, detectors and training, on the same runs). Seed: target-occupancy 0.810, P90 0.796, log 0.795, quantile 0.774.\n")?;
        writeln!(
            w,
            "| strategy | mean | sd | per-key mean | per-key sd | seeds |"
        )?;
        writeln!(w, "| --- | --- | --- | --- | --- | --- |")?;
        for BinPoint(n, q, k) in &sw.binning {
            let (m, s) = mean_sd(q);
            let (km, ks) = if k.is_empty() {
                ("-".to_string(), "-".to_string())
            } else {
                let (a, b) = mean_sd(k);
                (format!("{a:.3}"), format!("{b:.3}"))
            };
            writeln!(w, "| {n} | {m:.3} | {s:.3} | {km} | {ks} | {} |", q.len())?;
        }
    }
    if !sw.wd.is_empty() {
        writeln!(
            w,
            "\n## Sketch size (w, d) sweep (seed Fig. 4), Kestrel mixed AUPRC against export\n"
        )?;
        writeln!(w, "Sweep size: scale 0.1, 200 s runs, one training and one test run per scenario; edges from one calibration. AUPRC per (window, QFI); per key as in the binning sweep. Seed: AUPRC 0.75-0.82 at 5-10 Mbit/s, best at w = 512, d = 3.\n")?;
        writeln!(w, "| w | d | AUPRC | export Mbit/s | per-key AUPRC |")?;
        writeln!(w, "| --- | --- | --- | --- | --- |")?;
        for WdPoint(wi, d, au, ex, k) in &sw.wd {
            writeln!(w, "| {wi} | {d} | {au:.3} | {ex:.2} | {} |", cell(*k))?;
        }
        if !sw.deltas.is_empty() {
            writeln!(
                w,
                "\nDelta-SMP at the same sweep size, its deltas ({} us sojourn, {} us gap in the \
                 main evaluation) times a factor; 0 sends a postcard for every packet. Seed: \
                 Delta-SMP 0.73 at 60-80 Mbit/s against Kestrel's 0.81 at about 6.\n",
                deltas.sojourn_ns / 1000,
                deltas.iat_ns / 1000
            )?;
            writeln!(
                w,
                "| deltas x | Delta-SMP AUPRC | export Mbit/s | per-key AUPRC |"
            )?;
            writeln!(w, "| --- | --- | --- | --- |")?;
            for DeltaPoint(f, au, ex, k) in &sw.deltas {
                writeln!(w, "| {f} | {au:.3} | {ex:.2} | {} |", cell(*k))?;
            }
        }
        writeln!(w, "\n![Pareto]({name}-pareto.svg)")?;
    }
    if !sw.intensity.is_empty() {
        writeln!(
            w,
            "\n## Intensity sweep (mixed AUPRC; every anomaly's intensity times the factor; sweep size)\n"
        )?;
        writeln!(w, "Per QFI and, as in the binning sweep, per key; one training and one test run per scenario at each factor, edges from one calibration at the default intensity.\n")?;
        let labels = INTENSITY_MODES.map(|m| m.2);
        writeln!(
            w,
            "| factor | {} | {} per key |",
            labels.join(" | "),
            labels.join(" per key | ")
        )?;
        writeln!(w, "|{}", " --- |".repeat(7))?;
        for p in &sw.intensity {
            let q = p.per_qfi.map(|x| format!("{x:.3}"));
            let k = p.per_key.map(cell);
            writeln!(
                w,
                "| {} | {} | {} |",
                p.factor,
                q.join(" | "),
                k.join(" | ")
            )?;
        }
        writeln!(w, "\n![intensity]({name}-intensity.svg)")?;
    }
    Ok(())
}

/// The sweeps' plots in `out`: `<name>-pareto.svg` (AUPRC against log10 export, per QFI and
/// per key) and `<name>-intensity.svg`.
pub fn plots(out: &Path, sw: &Sweeps, name: &str) -> Result<(), Box<dyn std::error::Error>> {
    if !sw.wd.is_empty() {
        // Exports span decades (a few hundred kbit/s to tens of Mbit/s): log10 on x.
        let series = |label: &str, mut v: Vec<(f64, f64)>| {
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                name: label.into(),
                points: v,
                spread: None,
            }
        };
        let lx = |x: f64| x.max(1e-3).log10();
        let mut s = vec![series(
            "Kestrel (w, d) configurations, per QFI",
            sw.wd.iter().map(|x| (lx(x.3), x.2)).collect(),
        )];
        if !sw.deltas.is_empty() {
            s.push(series(
                "Delta-SMP, deltas x 0 (every packet) .. x 64, per QFI",
                sw.deltas.iter().map(|x| (lx(x.2), x.1)).collect(),
            ));
        }
        let wk: Vec<(f64, f64)> = sw.wd.iter().filter_map(|x| Some((lx(x.3), x.4?))).collect();
        if !wk.is_empty() {
            s.push(series("Kestrel (w, d) configurations, per key", wk));
        }
        let dk: Vec<(f64, f64)> = sw
            .deltas
            .iter()
            .filter_map(|x| Some((lx(x.2), x.3?)))
            .collect();
        if !dk.is_empty() {
            s.push(series("Delta-SMP deltas, per key", dk));
        }
        lines(
            &out.join(format!("{name}-pareto.svg")),
            "Mixed AUPRC against export (Kestrel w x d, Delta-SMP deltas)",
            "log10 export Mbit/s",
            "AUPRC",
            &s,
        )?;
    }
    if !sw.intensity.is_empty() {
        let mut s = Vec::new();
        for (m, (_, _, label)) in INTENSITY_MODES.iter().enumerate() {
            for (unit, key) in [("per QFI", false), ("per key", true)] {
                let points: Vec<(f64, f64)> = sw
                    .intensity
                    .iter()
                    .filter_map(|p| {
                        let y = if key { p.per_key[m]? } else { p.per_qfi[m] };
                        Some((p.factor, y))
                    })
                    .collect();
                if !points.is_empty() {
                    s.push(Series {
                        name: format!("{label}, {unit}"),
                        points,
                        spread: None,
                    });
                }
            }
        }
        lines(
            &out.join(format!("{name}-intensity.svg")),
            "Mixed AUPRC against anomaly intensity (x the default)",
            "intensity factor",
            "AUPRC",
            &s,
        )?;
    }
    Ok(())
}
