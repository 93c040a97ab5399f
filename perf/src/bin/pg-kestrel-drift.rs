//! The Kestrel drift rule (`peregrine_control::kestrel::drift::DriftRule`, docs/kestrel.md
//! "Drift"; Kestrel, Saha et al., section IV-C) on the evaluation's traffic through the real
//! UPF, egress scheduler and Kestrel tap, in virtual time, with the daemon's defaults:
//!
//! - a long baseline run (no anomaly) with the rule on: re-binnings (target 0) and what the
//!   per-window test saw per QID;
//! - a persistent shift: the same traffic after the egress shaper's rate dropped for good
//!   (edges calibrated at the old rate): the window of each QID's re-binning against the
//!   bound M + C.
//!
//! Edges: the evaluation's (target occupancy rho 0.01 from a 30 s baseline calibration run,
//! seed 7). Writes `kestrel-drift.md` in `--out`.

use clap::Parser;
use peregrine_control::kestrel::binning::{DriftCounts, DriftRule, Strategy};
use peregrine_perf::kestrel_eval::scenario::{Plan, Scenario};
use peregrine_perf::kestrel_eval::sim::{self, RunStats};
use peregrine_perf::kestrel_eval::{calibrate, EvalCfg};
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Parser, Debug)]
struct Args {
    /// Output directory.
    #[arg(long, default_value = "perf/results")]
    out: PathBuf,
    /// Length of the baseline run, s.
    #[arg(long, default_value_t = 3600)]
    secs: u64,
    /// Length of the shifted run, s.
    #[arg(long, default_value_t = 600)]
    shift_secs: u64,
    /// The shaper's rate after the shift, times the calibrated one.
    #[arg(long, default_value_t = 0.8)]
    shaper: f64,
    /// Traffic scale (the quick evaluation's 0.1: about 0.1 Gbit/s offered).
    #[arg(long, default_value_t = 0.1)]
    scale: f64,
    /// Override the rule's calibration windows (C).
    #[arg(long)]
    calibration_windows: Option<u32>,
    /// Seed of both runs (not a seed the evaluation trains or tests on).
    #[arg(long, default_value_t = 4242)]
    seed: u64,
}

fn per_qid(w: &mut String, st: &RunStats, qids: usize, gap_after: bool) -> std::fmt::Result {
    writeln!(
        w,
        "| QID | tested windows | significant | under-sampled | highest evidence | re-calibrations | first re-binning (window) |"
    )?;
    writeln!(w, "| --- | --- | --- | --- | --- | --- | --- |")?;
    for q in 0..qids {
        let c: DriftCounts = st.drift[q];
        if c.tested + c.under_sampled == 0 {
            continue;
        }
        let first = st.first_rebin[q].map_or("-".to_string(), |s| s.to_string());
        writeln!(
            w,
            "| {q} | {} | {} | {} | {} | {} | {first} |",
            c.tested, c.significant, c.under_sampled, c.peak, c.fired
        )?;
    }
    if gap_after {
        writeln!(w)?;
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = Args::parse();
    let started = std::time::Instant::now();
    let mut rule = DriftRule::default();
    if let Some(c) = a.calibration_windows {
        rule.calibration_windows = c;
    }
    rule.check().map_err(|(k, e)| format!("{k}: {e}"))?;
    let c = EvalCfg {
        drift: Some(rule),
        ..EvalCfg::paper(a.secs, a.scale)
    };
    let edges = calibrate(&c, Strategy::Target, rule.rho, 7, 30);
    let rc = c.run_cfg(edges);
    let plan = Plan::new(Scenario::Baseline, a.seed, a.secs, a.scale, &c.intensity);
    let base = sim::run(&plan, &rc, a.seed, |_| {});
    eprintln!(
        "baseline: {} s, {} calibrations, {} re-binnings ({:.0?})",
        a.secs,
        base.calibrations,
        base.rebinnings,
        started.elapsed()
    );
    // The shift: the same flows (generated at the calibrated scale) through a shaper at
    // `shaper` times the rate. The plan's scale sets the shaper (and the gaming QER and
    // frame size, which move with it).
    let mut shifted = Plan::new(
        Scenario::Baseline,
        a.seed,
        a.shift_secs,
        a.scale,
        &c.intensity,
    );
    shifted.scale = a.scale * a.shaper;
    let shift = sim::run(&shifted, &rc, a.seed, |_| {});
    eprintln!(
        "shift: {} s, {} calibrations, {} re-binnings ({:.0?})",
        a.shift_secs,
        shift.calibrations,
        shift.rebinnings,
        started.elapsed()
    );

    let mut w = String::new();
    writeln!(w, "# Kestrel drift rule on the evaluation's traffic\n")?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    writeln!(
        w,
        "`cargo run --release -p peregrine-perf --bin pg-kestrel-drift{}` ({:.0} s wall on a \
         2-core AMD EPYC VM shared with other engineers' builds, load average {} at the end; \
         every figure is virtual-time and repeats bit for bit). The rule: \
         `DriftRule::default()` unless overridden (docs/kestrel.md \"Drift\"): rho {}; a tested window (at \
         least {} packets) is significant when its diagnostic count (latency tail or \
         inter-arrival head, row 0) is above Binomial(n, rho) at one-sided z {} (level {:.4}, \
         exact binomial tail); evidence +1 per significant tested window, -{} per other one \
         (floor 0); re-calibration at evidence M = {}, {} calibration windows. Edges: \
         the evaluation's (target occupancy from a 30 s baseline calibration run, seed 7). \
         Traffic: the evaluation's baseline scenario (no anomaly), scale {}, seed {}.\n",
        if args.is_empty() {
            String::new()
        } else {
            format!(" -- {}", args.join(" "))
        },
        started.elapsed().as_secs_f64(),
        load.split_whitespace().next().unwrap_or("?"),
        rule.rho,
        rule.min_packets,
        rule.z,
        rule.alpha(),
        rule.penalty,
        rule.m,
        rule.calibration_windows,
        a.scale,
        a.seed
    )?;
    writeln!(
        w,
        "## Stationary: {} s of baseline traffic\n\n**{} calibrations, {} re-binnings** \
         (target 0; {} packets forwarded).\n",
        a.secs, base.calibrations, base.rebinnings, base.forwarded
    )?;
    per_qid(&mut w, &base, c.layout.qids, true)?;
    writeln!(
        w,
        "## Persistent shift: the shaper at {} x the calibrated rate, {} s\n\n\
         The flows of the baseline scenario through a shaper at {} x the rate the edges were \
         calibrated at (the gaming QER and frame sizes scale with it), from window 0: \
         {} calibrations, {} re-binnings. Bound: a QID whose every tested window after the \
         shift is significant asks for calibration at the close of window M - 1 and is \
         re-binned C + 2 windows later (calibration, like every edge change, applies from \
         two windows ahead), at the close of window M + C + 1 = {} (new edges from window \
         {}); under-sampled windows add to that; a QID significant in a fraction pi > 3/4 \
         of its windows needs about M / (4 pi - 3) windows instead of M.\n",
        a.shaper,
        a.shift_secs,
        a.shaper,
        shift.calibrations,
        shift.rebinnings,
        rule.m + rule.calibration_windows + 1,
        rule.m + rule.calibration_windows + 3
    )?;
    per_qid(&mut w, &shift, c.layout.qids, false)?;
    std::fs::create_dir_all(&a.out)?;
    let path = a.out.join("kestrel-drift.md");
    std::fs::write(&path, w)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
