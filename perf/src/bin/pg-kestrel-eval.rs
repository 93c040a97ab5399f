//! The Kestrel evaluation (Kestrel, Saha et al., section VI), one command:
//! `cargo run --release -p peregrine-perf --bin pg-kestrel-eval` writes
//! `perf/results/kestrel-eval.md` (+ JSON and SVG plots). Seeded scenarios through the real
//! UPF, egress scheduler and Kestrel tap in virtual time; detectors trained with XGBoost
//! (perf/scripts/kestrel_train.py, pinned by scripts/deps.sh) on training runs and scored
//! online in Rust on held-out test runs. `--quick` is the CI-sized smoke run.

use clap::Parser;
use peregrine_control::kestrel::binning::{DriftRule, Strategy};
use peregrine_dataplane::telemetry::kestrel::Layout;
use peregrine_perf::fridge_eval::plot::{lines, Series};
use peregrine_perf::kestrel_eval::eval::{
    all_modes, evaluate, export_detectors, KeySummary, Score, Summary, Ttfd,
};
use peregrine_perf::kestrel_eval::features::{Mode, MODES};
use peregrine_perf::kestrel_eval::scenario::{Intensity, KINDS};
use peregrine_perf::kestrel_eval::sweeps::{self, Sweeps, Which};
use peregrine_perf::kestrel_eval::{calibrate, EvalCfg, DELTAS};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Parser, Debug)]
struct Args {
    /// Output directory of the results.
    #[arg(long, default_value = "perf/results")]
    out: PathBuf,
    /// Work directory (features, models; not committed).
    #[arg(long, default_value = "target/kestrel-eval")]
    work: PathBuf,
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Small smoke run (CI): scale 0.1, 200 s runs, one training and one test run each.
    #[arg(long)]
    quick: bool,
    /// Skip the sweeps (binning, (w, d), Delta-SMP deltas, intensity).
    #[arg(long, conflicts_with = "sweeps_only")]
    no_sweeps: bool,
    /// Only the sweeps (always at sweep size: scale 0.1, 200 s runs), no main evaluation:
    /// writes `<name>-sweeps.md` / `.json` (the sweep sections, to splice into the results
    /// page) and the sweeps' plots, after each finished sweep.
    #[arg(long)]
    sweeps_only: bool,
    /// Which sweeps to run (comma-separated: binning, wd, deltas, intensity).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "binning,wd,deltas,intensity"
    )]
    sweeps: Vec<String>,
    /// Override the traffic scale (1 = about 1 Gbit/s offered).
    #[arg(long)]
    scale: Option<f64>,
    /// Override the run length, s.
    #[arg(long)]
    secs: Option<u64>,
    /// Override the training / test runs per scenario.
    #[arg(long)]
    runs: Option<usize>,
    /// Every anomaly intensity times this factor.
    #[arg(long, default_value_t = 1.0)]
    intensity: f64,
    /// Also write the Kestrel detectors, their thresholds and bin edges here, for the
    /// daemon's `[kestrel.detect]` (`kestrel.toml` and one model per anomaly type).
    #[arg(long)]
    models_out: Option<PathBuf>,
    /// Only the export: run the test seeds of every scenario (no training, no detectors)
    /// and write `kestrel-export.md` (Mbit/s per mode, Kestrel in both encodings).
    #[arg(long)]
    export_only: bool,
    /// Per-(window, TEID, QFI) unit: keep one in this many negative key rows of the
    /// training runs (weighted by it); 0 skips the per-key unit (main evaluation and the
    /// sweeps too).
    #[arg(long, default_value_t = 8)]
    key_neg_every: u32,
    /// Drift re-binning during every run of the main evaluation (the daemon's rule with its
    /// defaults, `DriftRule::default()`, docs/kestrel.md "Drift").
    #[arg(long)]
    drift: bool,
}

struct Plan {
    scale: f64,
    secs: u64,
    n_train: usize,
    n_test: usize,
}

fn cfg(p: &Plan, layout: Layout, intensity: Intensity, key_neg_every: u32) -> EvalCfg {
    EvalCfg {
        key_neg_every,
        layout,
        intensity,
        ..EvalCfg::paper(p.secs, p.scale)
    }
}

/// `--export-only`: the export of the held-out test runs of every scenario, per mode.
fn export_only(
    a: &Args,
    p: &Plan,
    c: &EvalCfg,
    edges: peregrine_dataplane::telemetry::kestrel::EdgeSet,
    started: std::time::Instant,
) -> Result<(), Box<dyn std::error::Error>> {
    use peregrine_perf::kestrel_eval::eval::{runs, test_seed};
    let outs = runs(c, edges, p.n_test, a.threads, test_seed, None);
    let secs: f64 = outs.iter().map(|o| o.1.windows as f64).sum();
    let mbps = |b: u64| b as f64 * 8.0 / secs / 1e6;
    let per = |m: Mode| mbps(outs.iter().map(|o| o.1.export_bytes[&m]).sum());
    let dense = mbps(outs.iter().map(|o| o.1.kestrel_dense_bytes).sum());
    let (k, d, pm) = (per(Mode::Kestrel), per(Mode::DeltaSmp), per(Mode::Pm));
    let mut w = String::new();
    writeln!(
        w,
        "# Kestrel export per telemetry mode
"
    )?;
    writeln!(
        w,
        "`cargo run --release -p peregrine-perf --bin pg-kestrel-eval -- --export-only --scale {} --secs {} --runs {}` \
         ({:.0} s on a 2-core VM shared with other builds): the held-out test seeds of the five \
         scenarios ({} runs, {} windows of 1 s, {} s each, scale {}), no training. Same \
         windows, same edges as the evaluation; the sketches 8 QIDs x 3 x 512.\n",
        p.scale,
        p.secs,
        p.n_test,
        started.elapsed().as_secs_f64(),
        outs.len(),
        secs,
        p.secs,
        p.scale
    )?;
    writeln!(w, "| mode | export Mbit/s | / Delta-SMP | seed Mbit/s |")?;
    writeln!(w, "| --- | --- | --- | --- |")?;
    writeln!(
        w,
        "| Kestrel, encoding v2 (non-empty buckets) | {k:.3} | {:.3} | ~6 |",
        k / d
    )?;
    writeln!(
        w,
        "| Kestrel, encoding v1 (every bucket) | {dense:.3} | {:.3} | |",
        dense / d
    )?;
    writeln!(w, "| Delta-SMP | {d:.3} | 1 | 60-80 |")?;
    writeln!(w, "| 3GPP-PM | {pm:.3} | {:.3} | ~1 |", pm / d)?;
    std::fs::create_dir_all(&a.out)?;
    let path = a.out.join("kestrel-export.md");
    std::fs::write(&path, w)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// The sweeps of `--sweeps` (all by default).
fn which(names: &[String]) -> Result<Which, String> {
    let mut w = Which {
        binning: false,
        wd: false,
        deltas: false,
        intensity: false,
    };
    for n in names {
        match n.as_str() {
            "binning" => w.binning = true,
            "wd" => w.wd = true,
            "deltas" => w.deltas = true,
            "intensity" => w.intensity = true,
            _ => {
                return Err(format!(
                    "--sweeps: unknown sweep {n:?} (binning, wd, deltas, intensity)"
                ))
            }
        }
    }
    Ok(w)
}

/// `--sweeps-only`: the sweep sections as `<name>-sweeps.md` / `.json` and the sweeps' plots.
fn write_sweeps(
    a: &Args,
    sw: &Sweeps,
    name: &str,
    took: std::time::Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut md = format!(
        "# Kestrel evaluation: the sweeps only\n\n`cargo run --release -p peregrine-perf --bin \
         pg-kestrel-eval -- {}` ({:.0} s so far on a 2-core VM **shared with other engineers' \
         builds**; every AUPRC and export figure is virtual-time and repeats bit for bit). The \
         sections below are those of `{name}.md`.\n",
        args.join(" "),
        took.as_secs_f64()
    );
    sweeps::markdown(&mut md, sw, name, DELTAS)?;
    std::fs::write(a.out.join(format!("{name}-sweeps.md")), md)?;
    std::fs::write(
        a.out.join(format!("{name}-sweeps.json")),
        serde_json::to_string_pretty(&sweeps::json(sw))?,
    )?;
    sweeps::plots(&a.out, sw, name)?;
    eprintln!(
        "wrote {}",
        a.out.join(format!("{name}-sweeps.md")).display()
    );
    Ok(())
}

/// The seed's numbers (section VI, Fig. 3-5), per mode: (mixed AUPRC, mixed F1, export).
fn paper(m: Mode) -> (&'static str, &'static str, &'static str) {
    match m {
        Mode::Kestrel => ("0.81", "0.82", "~6"),
        Mode::DeltaSmp => ("0.73", "0.76", "60-80"),
        Mode::Pm => ("0.29", "0.42", "~1"),
    }
}

/// Seed Fig. 3a AUPRC per single scenario: (Kestrel, Delta-SMP, 3GPP-PM).
fn paper_single(k: &str) -> (f64, f64, f64) {
    match k {
        "microburst" => (0.87, 0.88, 0.48),
        "congestion" => (1.0, 1.0, 0.5),
        "contention" => (0.75, 0.37, 0.22),
        _ => (0.9, 0.9, 0.19),
    }
}

fn paper_ttfd(k: &str) -> (&'static str, &'static str, &'static str) {
    match k {
        "microburst" => ("0.05", "0.20", "0.50"),
        "congestion" | "contention" => ("0.20-1.05", "0.20-1.20", "several"),
        _ => ("0.55", "-", "4.00"),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = Args::parse();
    let mut p = if a.quick {
        Plan {
            scale: 0.1,
            secs: 200,
            n_train: 1,
            n_test: 1,
        }
    } else {
        Plan {
            scale: 1.0,
            secs: 600,
            n_train: 2,
            n_test: 2,
        }
    };
    p.scale = a.scale.unwrap_or(p.scale);
    p.secs = a.secs.unwrap_or(p.secs);
    if let Some(n) = a.runs {
        (p.n_train, p.n_test) = (n, n);
    }
    std::fs::create_dir_all(&a.out)?;
    let started = std::time::Instant::now();
    let base = Intensity::default().times(a.intensity);
    let mut c = cfg(&p, Layout::paper(), base, a.key_neg_every);
    if a.drift {
        c.drift = Some(DriftRule::default());
    }
    let work = a.work.join(if a.quick { "quick" } else { "full" });
    let name = if a.quick {
        "kestrel-eval-quick"
    } else {
        "kestrel-eval"
    };
    // Sweeps, at a smaller size (scale 0.1, 200 s runs, one training and one test run per
    // scenario): binning strategies and (w, d) for Kestrel, Delta-SMP's deltas, the anomaly
    // intensity (sweeps.rs).
    let sp = Plan {
        scale: 0.1,
        secs: 200,
        n_train: 1,
        n_test: 1,
    };
    let cs = cfg(&sp, Layout::paper(), base, a.key_neg_every);
    let seeds: Vec<u64> = if a.quick {
        vec![11]
    } else {
        (11..16).collect()
    };
    let which = which(&a.sweeps)?;
    if a.sweeps_only {
        sweeps::run(&cs, &seeds, which, a.threads, &work, |sw| {
            write_sweeps(&a, sw, name, started.elapsed()).map_err(|e| e.to_string())
        })?;
        return Ok(());
    }
    let edges = calibrate(&c, Strategy::Target, 0.01, 7, 30);
    if a.export_only {
        let c0 = EvalCfg {
            key_neg_every: 0,
            ..c.clone()
        };
        return export_only(&a, &p, &c0, edges, started);
    }
    let modes = all_modes();
    let sm = evaluate(
        &c,
        edges,
        &modes,
        p.n_train,
        p.n_test,
        a.threads,
        &work.join("main"),
    )?;
    eprintln!("main evaluation done in {:.0?}", started.elapsed());
    if let Some(dir) = &a.models_out {
        let note = format!(
            "Trained by pg-kestrel-eval --scale {} --secs {} --runs {} (training seeds {:?}); \
             mixed AUPRC {:.3} on its held-out test runs.",
            p.scale, p.secs, p.n_train, sm.train_seeds, sm.scores["kestrel"]["mixed"].auprc
        );
        export_detectors(&work.join("main"), &edges, c.layout.qids, dir, &note)?;
        eprintln!("detectors written to {}", dir.display());
    }
    // The main results first (the sweeps take a while), then again with the sweeps.
    report(&a, &p, &sm, &Sweeps::default(), name, started.elapsed())?;
    let sw = if a.no_sweeps {
        Sweeps::default()
    } else {
        sweeps::run(&cs, &seeds, which, a.threads, &work, |_| Ok(()))?
    };
    report(&a, &p, &sm, &sw, name, started.elapsed())?;
    Ok(())
}

fn report(
    a: &Args,
    p: &Plan,
    sm: &Summary,
    sw: &Sweeps,
    name: &str,
    took: std::time::Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut j = sweeps::json(sw);
    j["summary"] = serde_json::to_value(sm)?;
    std::fs::write(
        a.out.join(format!("{name}.json")),
        serde_json::to_string_pretty(&j)?,
    )?;
    let pr: Vec<Series> = MODES
        .iter()
        .map(|m| Series {
            name: m.label().into(),
            points: sm.pr_mixed[m.name()].clone(),
            spread: None,
        })
        .collect();
    lines(
        &a.out.join(format!("{name}-pr-mixed.svg")),
        "Mixed scenario: precision-recall (any anomaly, per (window, QFI))",
        "recall",
        "precision",
        &pr,
    )?;
    if let Some(k) = &sm.key {
        let pr: Vec<Series> = MODES
            .iter()
            .map(|m| Series {
                name: m.label().into(),
                points: k.pr_mixed[m.name()].clone(),
                spread: None,
            })
            .collect();
        lines(
            &a.out.join(format!("{name}-pr-mixed-key.svg")),
            "Mixed scenario: precision-recall (any anomaly, per (window, TEID, QFI))",
            "recall",
            "precision",
            &pr,
        )?;
    }
    sweeps::plots(&a.out, sw, name)?;
    let mut md = String::new();
    let w = &mut md;
    writeln!(
        w,
        "# Kestrel evaluation: anomaly detection per telemetry mode\n"
    )?;
    writeln!(
        w,
        "`cargo run --release -p peregrine-perf --bin pg-kestrel-eval{}` ({:.0} s on a 2-core VM \
         **shared with other engineers' builds**; every figure except the collector times is \
         virtual-time and repeats bit for bit). Seed: Kestrel (Saha et al.), section VI.\n",
        {
            let args: Vec<String> = std::env::args().skip(1).collect();
            if args.is_empty() {
                String::new()
            } else {
                format!(" -- {}", args.join(" "))
            }
        },
        took.as_secs_f64()
    )?;
    writeln!(
        w,
        "Runs: {} training runs and {} held-out test runs ({} test windows of 1 s), {} s each, \
         at scale {} (offered load {:.2} Gbit/s mean over the test runs). Unit of the \
         headline tables: the (1 s window, QFI) pair, the finest unit 3GPP-PM has data for; \
         the per-(window, TEID, QFI) tables are labelled as such. \
         Detectors: XGBoost (binary:logistic, 120 trees of depth 4), one per anomaly type and \
         mode, trained on the training runs only; thresholds: best F1 on out-of-fold \
         predictions over the training runs. Inference: the Rust evaluator over the model's \
         JSON, checked against XGBoost's own probabilities on stored vectors (largest \
         difference {:.1e}).\n",
        sm.train_runs,
        sm.test_runs,
        sm.test_windows,
        p.secs,
        p.scale,
        sm.offered_gbps,
        sm.max_pred_diff
    )?;
    writeln!(
        w,
        "Bin edges: target occupancy (rho 0.01) from one baseline calibration run; {}.\n",
        if a.drift {
            let (r, d) = (DriftRule::default(), sm.drift);
            format!(
                "drift re-binning **on** during every run (the collector's rule, daemon \
                 defaults: a window of at least {} packets whose tail or head count is \
                 significantly above Binomial(n, rho {}) at one-sided z {} adds 1 to the QID's \
                 evidence, another tested window takes {} back; re-calibration at {}, {} \
                 calibration windows, new edges from two windows ahead): \
                 {} calibrations and {} re-binnings over the test runs; {} QID-windows tested, \
                 {} significant, {} under-sampled, highest drift evidence {} (re-calibration at {})",
                r.min_packets,
                r.rho,
                r.z,
                r.penalty,
                r.m,
                r.calibration_windows,
                sm.calibrations,
                sm.rebinnings,
                d.tested,
                d.significant,
                d.under_sampled,
                d.peak,
                r.m
            )
        } else {
            "static during the runs (no drift re-binning)".to_string()
        }
    )?;
    writeln!(w, "## Mixed anomalies (scenario 5; seed Fig. 3b, Fig. 4)\n")?;
    writeln!(
        w,
        "| mode | AUPRC | F1 | precision / recall | export Mbit/s | seed AUPRC / F1 | seed export Mbit/s |"
    )?;
    writeln!(w, "| --- | --- | --- | --- | --- | --- | --- |")?;
    for m in MODES {
        let s = &sm.scores[m.name()]["mixed"];
        let (pa, pf, pe) = paper(m);
        writeln!(
            w,
            "| {} | {:.3} | {:.3} | {:.2} / {:.2} | {:.2} | {pa} / {pf} | {pe} |",
            m.label(),
            s.auprc,
            s.f1,
            s.precision,
            s.recall,
            sm.export_mbps[m.name()]
        )?;
    }
    let ks = sm.scores["kestrel"]["mixed"].auprc;
    let ke = sm.export_mbps["kestrel"];
    let se = sm.export_mbps["delta_smp"];
    writeln!(
        w,
        "\nGoal (Kestrel >= 0.81 mixed AUPRC at <= 1/10 of Delta-SMP's export): AUPRC {ks:.3}, \
         export ratio {:.3} -> **{}**.\n",
        ke / se,
        if ks >= 0.81 && ke * 10.0 <= se {
            "met"
        } else {
            "not met"
        }
    )?;
    writeln!(
        w,
        "Kestrel export in encoding version 2 (non-empty buckets only, docs/kestrel.md); in \
         version 1 (every bucket) the same windows are {:.2} Mbit/s (ratio {:.3}).\n",
        sm.kestrel_dense_mbps,
        sm.kestrel_dense_mbps / se
    )?;
    writeln!(
        w,
        "Mixed AUPRC is for \"any anomaly\" with the mode's any-anomaly score: each detector's \
         probability calibrated by Platt scaling (sigmoid(a x margin + b), a and b fitted by \
         logistic regression on its out-of-fold probabilities over the training runs), then \
         combined by the largest or the noisy-OR (1 - prod(1 - p)); of the largest raw \
         probability (the score before 2026-11-29), the largest and the noisy-OR of the \
         calibrated ones, the one with the best out-of-fold any-anomaly AUPRC over all the \
         training runs is used, the same rule for every mode and unit, fitted on the training \
         runs only (perf/scripts/kestrel_train.py; the daemon computes the same score online, \
         `peregrine_control::kestrel::combine`). F1 for the alarm \"any detector at or over \
         its threshold\" (unchanged by the calibration). Chosen, with the out-of-fold AUPRC of \
         raw max / calibrated max / calibrated noisy-OR: {}.\n",
        combination_text(&sm.combination)
    )?;
    per_kind_table(
        w,
        "Per detector on the mixed runs (its own anomaly's labels):\n",
        &sm.mixed_per_kind,
    )?;
    if let Some(k) = &sm.key {
        key_section(w, k)?;
    }
    writeln!(w, "\n## Single anomaly scenarios 1-4 (seed Fig. 3a)\n")?;
    writeln!(w, "| scenario | Kestrel AUPRC / F1 | Delta-SMP AUPRC / F1 | 3GPP-PM AUPRC / F1 | positives / units | seed AUPRC K / D / PM |")?;
    writeln!(w, "| --- | --- | --- | --- | --- | --- |")?;
    for k in KINDS {
        let (a1, a2, a3) = paper_single(k.name());
        scenario_row(w, k.name(), &sm.scores, &format!("{a1} / {a2} / {a3}"))?;
    }
    writeln!(w, "\n## Time to first detection (seed Fig. 5)\n")?;
    writeln!(w, "Median over the test runs' episodes of (end of the first window in which the detector alarms on an affected QFI) - onset; an episode is missed if no alarm comes by one window after its end. Windows are 1 s and a window is scored when it closes, so our TTFD cannot be below the time left in the onset window (the seed's 0.05 s implies sub-window detection; its measurement point is not described).\n")?;
    ttfd_table(w, &sm.ttfd)?;
    writeln!(w, "\n## Collector time per window (seed Fig. 6a)\n")?;
    writeln!(w, "Feature extraction from the window's sketches / postcards / counters plus the four detectors, wall clock on the shared VM, one thread. Seed medians: 3GPP-PM ~2 ms, Kestrel 53 ms, Delta-SMP 200 ms (including ingestion).\n")?;
    writeln!(w, "| mode | median ms | IQR ms |")?;
    writeln!(w, "| --- | --- | --- |")?;
    for m in MODES {
        let (med, lo, hi) = sm.collector_ms[m.name()];
        writeln!(w, "| {} | {med:.3} | {lo:.3}-{hi:.3} |", m.label())?;
    }
    sweeps::markdown(w, sw, name, DELTAS)?;
    writeln!(w, "\n![PR curves, mixed]({name}-pr-mixed.svg)\n")?;
    let disc = a.out.join("kestrel-eval-discussion.md");
    if let Ok(d) = std::fs::read_to_string(&disc) {
        w.push_str(&d);
    }
    std::fs::write(a.out.join(format!("{name}.md")), md)?;
    eprintln!("wrote {}", a.out.join(format!("{name}.md")).display());
    Ok(())
}

/// The any-anomaly combination chosen per mode, with the out-of-fold AUPRC of each tried.
fn combination_text(c: &serde_json::Value) -> String {
    MODES
        .iter()
        .map(|m| {
            let x = &c[m.name()];
            let o = |n: &str| x["oof_auprc"][n].as_f64().unwrap_or(f64::NAN);
            format!(
                "{} {} ({:.3} / {:.3} / {:.3})",
                m.label(),
                x["chosen"].as_str().unwrap_or("?").replace('_', " "),
                o("raw_max"),
                o("platt_max"),
                o("platt_noisy_or")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A scenario's row: each detector's AUPRC / F1 (`scores`: mode -> scenario -> score),
/// Kestrel's positives / units, and the seed's figures.
fn scenario_row(
    w: &mut String,
    name: &str,
    scores: &HashMap<String, HashMap<String, Score>>,
    seed: &str,
) -> std::fmt::Result {
    let c = |m: &str| {
        let s = &scores[m][name];
        format!("{:.3} / {:.3}", s.auprc, s.f1)
    };
    let s = &scores["kestrel"][name];
    writeln!(
        w,
        "| {name} | {} | {} | {} | {} / {} | {seed} |",
        c("kestrel"),
        c("delta_smp"),
        c("pm"),
        s.positives,
        s.units
    )
}

/// `title`, then per mode its AUPRC / F1 of each anomaly kind on the mixed runs (`per_kind`:
/// mode -> kind -> score; the whole-run and the per-key tables).
fn per_kind_table(
    w: &mut String,
    title: &str,
    per_kind: &HashMap<String, HashMap<String, Score>>,
) -> std::fmt::Result {
    writeln!(w, "{title}")?;
    writeln!(
        w,
        "| mode | microburst | congestion | contention | policy abuse |"
    )?;
    writeln!(w, "| --- | --- | --- | --- | --- |")?;
    for m in MODES {
        let per = &per_kind[m.name()];
        let cell = |k: &str| format!("{:.3} / {:.3}", per[k].auprc, per[k].f1);
        writeln!(
            w,
            "| {} (AUPRC / F1) | {} | {} | {} | {} |",
            m.label(),
            cell("microburst"),
            cell("congestion"),
            cell("contention"),
            cell("policy_abuse")
        )?;
    }
    Ok(())
}

/// A time-to-first-detection table (median seconds, detected / episodes) per anomaly kind.
fn ttfd_table(w: &mut String, t: &HashMap<String, HashMap<String, Ttfd>>) -> std::fmt::Result {
    writeln!(
        w,
        "| anomaly | Kestrel median s (detected) | Delta-SMP | 3GPP-PM | seed K / D / PM |"
    )?;
    writeln!(w, "| --- | --- | --- | --- | --- |")?;
    for k in KINDS {
        let c = |m: &str| {
            let t = &t[m][k.name()];
            match t.detected {
                0 => format!("- (0/{})", t.episodes),
                _ => format!("{:.2} ({}/{})", t.median_s, t.detected, t.episodes),
            }
        };
        let (a1, a2, a3) = paper_ttfd(k.name());
        writeln!(
            w,
            "| {} | {} | {} | {} | {a1} / {a2} / {a3} |",
            k.name(),
            c("kestrel"),
            c("delta_smp"),
            c("pm")
        )?;
    }
    Ok(())
}

/// The per-(window, TEID, QFI) unit's tables.
fn key_section(w: &mut String, k: &KeySummary) -> std::fmt::Result {
    writeln!(
        w,
        "## Per-key unit: (1 s window, TEID, QFI) (seed Fig. 3a, 3b)\n"
    )?;
    writeln!(
        w,
        "The same test runs scored per key: every (TEID, QFI) of a UE that sent at least one \
         packet in the window (arrival time) is a unit. Labels: microburst and policy abuse \
         label the TEIDs they name; congestion and contention label every active key of the \
         affected QFIs. Features per key: Kestrel its Count-Min estimate (minimum over the rows \
         per field, the collector's per-key query) with its change and ratio to its moving \
         average, then its QFI's vector; Delta-SMP its own postcards the same way, then its \
         QFI's; 3GPP-PM has no per-key data, so a key's vector is its QFI's counters (every key \
         of a QFI gets the same score). Detectors trained separately on this unit (XGBoost, \
         hist, same rounds and depth), on the same training runs with one in {} negative key \
         rows kept and weighted by {} ({} training rows per mode); thresholds best F1 on \
         weighted out-of-fold predictions. Mixed: the any-anomaly score as per QFI, fitted and \
         chosen on this unit's (weighted) out-of-fold predictions: {}.\n",
        k.neg_every,
        k.neg_every,
        k.train_rows,
        combination_text(&k.combination)
    )?;
    writeln!(
        w,
        "| scenario (per key) | Kestrel AUPRC / F1 | Delta-SMP AUPRC / F1 | 3GPP-PM AUPRC / F1 | positives / units | seed AUPRC K / D / PM |"
    )?;
    writeln!(w, "| --- | --- | --- | --- | --- | --- |")?;
    for name in [
        "microburst",
        "congestion",
        "contention",
        "policy_abuse",
        "mixed",
    ] {
        let seed = if name == "mixed" {
            "0.81 / 0.73 / 0.29 (F1 0.82 / 0.76 / 0.42)".to_string()
        } else {
            let (a1, a2, a3) = paper_single(name);
            format!("{a1} / {a2} / {a3}")
        };
        scenario_row(w, name, &k.scores, &seed)?;
    }
    per_kind_table(
        w,
        "\nPer detector on the mixed runs, per key (its own anomaly's labels):\n",
        &k.mixed_per_kind,
    )?;
    writeln!(
        w,
        "\nTime to first detection per key: as above, but an alarm counts only on one of the \
         episode's own (TEID, QFI) keys (a microburst's or policy abuse's TEIDs, every key of a \
         congested or contended QFI); the per-key detectors and thresholds. 3GPP-PM's keys carry \
         their QFI's vector, so it alarms on every key of a QFI at once.\n"
    )?;
    ttfd_table(w, &k.ttfd)?;
    writeln!(
        w,
        "\nExtra collector time per window for the per-key vectors and the four per-key \
         detectors (median ms, IQR): {}.\n",
        MODES
            .iter()
            .map(|m| {
                let (a, b, c) = k.collector_ms[m.name()];
                format!("{} {a:.2} ({b:.2}-{c:.2})", m.label())
            })
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    Ok(())
}
