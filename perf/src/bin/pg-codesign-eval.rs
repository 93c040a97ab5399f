//! The sketch-INT co-design evaluation, one command:
//! `cargo run --release -p peregrine-perf --bin pg-codesign-eval` writes
//! `perf/results/codesign-eval.md` (+ JSON and SVG plots). Planner results are deterministic
//! except the run times (wall clock). `--quick` runs a smaller version.

use clap::Parser;
use peregrine_perf::codesign_eval::accuracy::{self, Outcome, Setup};
use peregrine_perf::codesign_eval::planner::{
    cases, collection, gaps, sweep, CollectRow, GapStats, SweepRow,
};
use peregrine_perf::fridge_eval::plot::{lines, Series};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[derive(Parser, Debug)]
struct Args {
    /// Output directory.
    #[arg(long, default_value = "perf/results")]
    out: PathBuf,
    /// Fewer seeds and alphas (a smoke run).
    #[arg(long)]
    quick: bool,
}

#[derive(Debug, serde::Serialize)]
struct Results {
    sweep: Vec<SweepRow>,
    gaps: GapStats,
    collection: Vec<CollectRow>,
    accuracy: Vec<Outcome>,
}

/// Sketch memory per scheme swept in the accuracy experiment, KiB.
const MEMORY_KIB: [usize; 6] = [8, 16, 32, 64, 128, 256];

fn accuracy_runs(quick: bool) -> Vec<Outcome> {
    let seeds: &[u64] = if quick { &[1] } else { &[1, 2, 3] };
    let mut out = Vec::new();
    for &kib in &MEMORY_KIB {
        for &seed in seeds {
            out.push(accuracy::run(&Setup {
                flows: 10_000,
                zipf: 1.2,
                top: 100_000.0,
                memory_bytes: kib * 1024,
                rows: 4,
                large: 32,
                int_bytes: 12,
                seed,
            }));
        }
    }
    out
}

/// Mean of a field over the seeds of one memory size.
fn mean_at(r: &[Outcome], kib: usize, f: impl Fn(&Outcome) -> f64) -> f64 {
    let v: Vec<f64> = r
        .iter()
        .filter(|o| o.setup.memory_bytes == kib * 1024)
        .map(f)
        .collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn series_by_topology(rows: &[SweepRow], y: impl Fn(&SweepRow) -> f64) -> Vec<Series> {
    let mut names: Vec<&str> = rows.iter().map(|r| r.topology.as_str()).collect();
    names.dedup();
    names
        .into_iter()
        .map(|n| Series {
            name: n.to_string(),
            points: rows
                .iter()
                .filter(|r| r.topology == n)
                .map(|r| (r.alpha, y(r)))
                .collect(),
            spread: None,
        })
        .collect()
}

fn plot(out: &Path, file: &str, title: &str, x: &str, y: &str, s: &[Series]) {
    if let Err(e) = lines(&out.join(file), title, x, y, s) {
        eprintln!("pg-codesign-eval: plot {file}: {e}");
    }
}

fn main() {
    let a = Args::parse();
    std::fs::create_dir_all(&a.out).expect("create output directory");
    let alphas: Vec<f64> = if a.quick {
        vec![0.0, 0.5, 1.0]
    } else {
        (0..=20).map(|i| f64::from(i) / 20.0).collect()
    };
    let cs = cases();
    let mut sw = Vec::new();
    for c in &cs {
        // The exact MILP on fat-tree k=4 and the WANs; k=8 too (it is quick for this shape).
        sw.extend(sweep(c, &alphas, true));
    }
    let g = gaps(if a.quick { 2 } else { 20 });
    let factors = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0];
    let col: Vec<CollectRow> = cs.iter().flat_map(|c| collection(c, &factors)).collect();
    let res = Results {
        sweep: sw,
        gaps: g,
        collection: col,
        accuracy: accuracy_runs(a.quick),
    };
    let acc_series = |name: &str, f: &dyn Fn(&Outcome) -> f64| Series {
        name: name.to_string(),
        points: MEMORY_KIB
            .iter()
            .map(|&k| ((k as f64).log2(), mean_at(&res.accuracy, k, f)))
            .collect(),
        spread: None,
    };
    plot(
        &a.out,
        "codesign-accuracy.svg",
        "Flows with relative error < 10 % (10,000 Zipf flows)",
        "log2(sketch memory, KiB)",
        "fraction of flows",
        &[
            acc_series("sketch only (CM-CU)", &|o| o.sketch_only.within_10pct),
            acc_series("co-design (gate, T_hi = 32)", &|o| o.codesign.within_10pct),
            acc_series("INT sampled at the co-design's INT budget", &|o| {
                o.int_sampled.within_10pct
            }),
            acc_series("INT only (every packet)", &|o| o.int_only.within_10pct),
        ],
    );
    plot(
        &a.out,
        "codesign-coverage.svg",
        "Flow coverage vs alpha",
        "alpha",
        "coverage",
        &series_by_topology(&res.sweep, |r| r.coverage),
    );
    plot(
        &a.out,
        "codesign-distance.svg",
        "Mean collection distance vs alpha",
        "alpha",
        "mean delta(p, c(p)) (link weight)",
        &series_by_topology(&res.sweep, |r| r.mean_distance),
    );
    let mut names: Vec<&str> = res.collection.iter().map(|r| r.topology.as_str()).collect();
    names.dedup();
    let mut util = Vec::new();
    for n in names {
        let rows: Vec<&CollectRow> = res.collection.iter().filter(|r| r.topology == n).collect();
        util.push(Series {
            name: format!("{n}, single path"),
            points: rows
                .iter()
                .map(|r| (r.load_factor.log2(), r.max_util_single))
                .collect(),
            spread: None,
        });
        util.push(Series {
            name: format!("{n}, split LP"),
            points: rows
                .iter()
                .map(|r| (r.load_factor.log2(), r.max_util_split))
                .collect(),
            spread: None,
        });
    }
    plot(
        &a.out,
        "codesign-maxutil.svg",
        "Max link utilisation (threshold 0.8)",
        "log2(sketch size / 1 MB)",
        "max utilisation",
        &util,
    );
    std::fs::write(
        a.out.join("codesign-eval.json"),
        serde_json::to_string_pretty(&res).expect("json"),
    )
    .expect("write json");
    let mut md = report(&res, a.quick);
    // Keep the emulation's section (pg-codesign-emu writes it; it needs root and takes minutes).
    let path = a.out.join("codesign-eval.md");
    if let Ok(old) = std::fs::read_to_string(&path) {
        if let (Some(b), Some(e)) = (old.find("<!-- emu -->"), old.find("<!-- /emu -->")) {
            if b < e {
                md = format!("{md}\n{}\n", &old[b..e + "<!-- /emu -->".len()]);
            }
        }
    }
    std::fs::write(&path, md).expect("write md");
    println!("wrote {}", a.out.join("codesign-eval.md").display());
}

fn report(r: &Results, quick: bool) -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(w, "# Sketch-INT co-design: evaluation\n");
    let _ = writeln!(
        w,
        "Generated by `cargo run --release -p peregrine-perf --bin pg-codesign-eval`{}.",
        if quick { " -- --quick (smoke run)" } else { "" }
    );
    let _ = writeln!(w, "Formulation and every parameter: `docs/codesign.md`. Topologies from `peregrine_planner::gen`");
    let _ = writeln!(
        w,
        "(fat-tree: 4k² edge-to-edge flows; WAN: 40 nodes, 300 flows, half programmable, two"
    );
    let _ = writeln!(w, "control nodes). Everything but the run times is deterministic. Run times are wall clock on");
    let _ = writeln!(
        w,
        "a 2-core VM shared with other engineers' builds: read them as orders of magnitude.\n"
    );
    let _ = writeln!(w, "The draft (Zhu et al.) reports no planner figures; its only number is for accuracy (below).");
    let _ = writeln!(
        w,
        "The gate's per-packet cost is in `codesign-gate-bench.md`.\n"
    );
    let _ = writeln!(w, "## Coverage and collection distance vs alpha\n");
    let _ = writeln!(
        w,
        "![coverage](codesign-coverage.svg) ![distance](codesign-distance.svg)\n"
    );
    let _ = writeln!(w, "| topology | alpha | points | coverage | mean distance | UB (Lagrangian) | LB | OPT (MILP) | iterations | Lagrangian ms | MILP ms |");
    let _ = writeln!(
        w,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for x in &r.sweep {
        let _ = writeln!(
            w,
            "| {} | {:.2} | {} | {:.3} | {:.2} | {:.5} | {:.5} | {} | {} | {:.2} | {} |",
            x.topology,
            x.alpha,
            x.points,
            x.coverage,
            x.mean_distance,
            x.upper,
            x.lower,
            x.optimum.map_or("-".into(), |o| format!("{o:.5}")),
            x.iterations,
            x.lagrangian_ms,
            x.exact_ms.map_or("-".into(), |o| format!("{o:.1}"))
        );
    }
    let g = &r.gaps;
    let _ = writeln!(
        w,
        "\n## Lagrangian gap to the exact optimum (small instances)\n"
    );
    let _ = writeln!(
        w,
        "{} random WANs (10, 16 and 24 nodes, 60 flows, alpha 0.2 / 0.5 / 0.8), exact optimum from",
        g.instances
    );
    let _ = writeln!(w, "good_lp + microlp (branch and bound).\n");
    let _ = writeln!(w, "| mean (UB-OPT)/OPT | max (UB-OPT)/OPT | Lagrangian plan optimal | mean (OPT-LB)/OPT | LB <= OPT everywhere | Lagrangian ms (mean) | MILP ms (mean) |");
    let _ = writeln!(w, "| --- | --- | --- | --- | --- | --- | --- |");
    let _ = writeln!(
        w,
        "| {:.4} % | {:.4} % | {} / {} | {:.4} % | {} | {:.2} | {:.2} |\n",
        100.0 * g.mean_gap,
        100.0 * g.max_gap,
        g.optimal,
        g.instances,
        100.0 * g.mean_bound_gap,
        g.bound_holds,
        g.mean_lagrangian_ms,
        g.mean_exact_ms
    );
    let _ = writeln!(
        w,
        "## Collection: max link utilisation with and without the split LP\n"
    );
    let _ = writeln!(w, "Points selected at alpha = 0.8; the sketch size S is scaled from 0.5 MB to 16 MB per 10 ms");
    let _ = writeln!(w, "window (worst-case rates 0.4 to 12.8 Gbit/s per point plus the INT term). \"single path\": every");
    let _ = writeln!(w, "point sends on its shortest path to its control node; \"split LP\": K = 3 candidate paths,");
    let _ = writeln!(w, "ratios minimising the max utilisation under the 80 % threshold; scale < 1 means no split fits");
    let _ = writeln!(
        w,
        "and every point must cut its telemetry to that fraction.\n"
    );
    let _ = writeln!(w, "![max utilisation](codesign-maxutil.svg)\n");
    let _ = writeln!(w, "| topology | S (MB) | points | telemetry Gbit/s | max util single path | links > 80 % single path | max util split LP | scale | LP ms |");
    let _ = writeln!(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for x in &r.collection {
        let _ = writeln!(
            w,
            "| {} | {} | {} | {:.2} | {:.3} | {} | {:.3} | {:.3} | {:.1} |",
            x.topology,
            x.load_factor,
            x.points,
            x.telemetry_gbps,
            x.max_util_single,
            x.over_threshold_single,
            x.max_util_split,
            x.scale,
            x.lp_ms
        );
    }
    let _ = writeln!(
        w,
        "\n## Per-flow accuracy: sketch-only vs INT-only vs co-design\n"
    );
    let o0 = &r.accuracy[0];
    let _ = writeln!(w, "Virtual time, one window: {} flows with Zipf (rank-size, s = {}) sizes, largest {} packets,", o0.setup.flows, o0.setup.zipf, o0.setup.top);
    let _ = writeln!(
        w,
        "{} packets in all, interleaved at random; {} flows are small (< T_hi = {} packets). Every",
        o0.packets, o0.small_flows, o0.setup.large
    );
    let _ = writeln!(w, "sketch is the gate's Count-Min with conservative update, d = {} rows; at each memory size the", o0.setup.rows);
    let _ = writeln!(w, "sketch-only run has d x w counters and the co-design the same bytes as two windows of d x w/2");
    let _ = writeln!(w, "(the gate's hysteresis copy). INT bytes at the draft's 12 B per instrumented packet and switch.");
    let _ = writeln!(w, "\"INT sampled\": every packet carries INT with probability q, q set so its INT packets equal the");
    let _ = writeln!(
        w,
        "co-design's; estimate = sampled / q. Means over {} seeds.\n",
        r.accuracy
            .iter()
            .filter(|o| o.setup.memory_bytes == o0.setup.memory_bytes)
            .count()
    );
    let _ = writeln!(w, "Draft (Zhu et al., \"Limitations of Sketch-Only Measurement\"): fewer than 50 % of flows within 10 %");
    let _ = writeln!(w, "with state-of-the-art sketches at 10 MB per switch (traces with millions of flows; no other");
    let _ = writeln!(w, "numbers). Our goal for the co-design: >= 95 %.\n");
    let _ = writeln!(w, "![accuracy](codesign-accuracy.svg)\n");
    let _ = writeln!(w, "| memory KiB | < 10 % sketch-only | < 10 % co-design | < 10 % INT sampled | < 10 % INT-only | small-flow MRE sketch-only | small-flow MRE co-design | small-flow MRE INT sampled | large-flow MRE sketch / co-design | INT MB co-design / INT-only | small flows misclassified (share) | their MRE | small-flow packets without INT |");
    let _ = writeln!(
        w,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for &k in &MEMORY_KIB {
        let m = |f: &dyn Fn(&Outcome) -> f64| mean_at(&r.accuracy, k, f);
        let small = m(&|o| o.small_flows as f64);
        let _ = writeln!(w, "| {k} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.4} | {:.3} | {:.4} / {:.4} | {:.2} / {:.2} | {:.0} ({:.2} %) | {:.2} | {:.0} |",
            m(&|o| o.sketch_only.within_10pct), m(&|o| o.codesign.within_10pct),
            m(&|o| o.int_sampled.within_10pct), m(&|o| o.int_only.within_10pct),
            m(&|o| o.sketch_only.small_mre), m(&|o| o.codesign.small_mre), m(&|o| o.int_sampled.small_mre),
            m(&|o| o.sketch_only.large_mre), m(&|o| o.codesign.large_mre),
            m(&|o| o.codesign.int_bytes as f64) / 1e6, m(&|o| o.int_only.int_bytes as f64) / 1e6,
            m(&|o| o.small_misclassified as f64), 100.0 * m(&|o| o.small_misclassified as f64) / small,
            m(&|o| o.misclassified_mre), m(&|o| o.small_packets_gated as f64));
    }
    let _ = writeln!(w, "\n## Discussion (accuracy)\n");
    let _ = writeln!(w, "{}", ACCURACY_DISCUSSION);
    let _ = writeln!(w, "\n## Discussion (planner)\n");
    let _ = writeln!(w, "{}", PLANNER_DISCUSSION);
    s
}

const PLANNER_DISCUSSION: &str = "\
The draft gives no planner numbers to compare with, so these are ours alone. On every tested
instance the Lagrangian lower bound stayed below the exact optimum, as weak duality requires,
and the repaired Lagrangian plan matched the MILP optimum (the gap table). These instances are
easy: the LP relaxation of this set cover with penalties is nearly integral here (the mean
LB gap is a fraction of a percent), so the MILP solver finishes in about a millisecond and is
not slower than the subgradient loop at these sizes; the Lagrangian's merit is that it needs
no solver and its per-iteration cost is linear in the size of the P_f sets. On fat-trees the
control nodes (core c0 and an edge switch) cost nothing to select and already cover most
flows, so coverage jumps to above 0.9 at the smallest alpha > 0 and reaches 1 with 4 (k=4) or
8 (k=8) points; on the WANs only half the nodes are programmable and some flows have no
programmable switch on any shortest path, so coverage saturates below 1 (0.91-0.93 at
alpha = 1) and the collection distance grows with alpha as farther points are added. The
split LP keeps every link under the 80 % threshold while a single shortest path per point
exceeds it once the worst-case telemetry reaches a few Gbit/s per point (and already at
0.5 MB on two of the WANs, where several points share a path to their control node); past
what K = 3 paths can carry, the plan reports the scale every point must cut its telemetry to.
Alpha = 0 selects nothing, even the zero-cost control nodes: coverage then has no weight and
we break the tie towards fewer points.";

const ACCURACY_DISCUSSION: &str = "\
The draft's only figure is that fewer than 50 % of flows are within 10 % with sketches alone
at 10 MB per switch, on traces with millions of flows; we have 10,000 flows, so the regime is
set by counters per flow, not bytes. Sketch-only reaches the draft's \"about half\" at 64 KiB
(16k counters for 10k flows); at that memory the co-design has 99.4 % of flows within 10 %,
above our 95 % goal, while carrying INT on about 16 % of the packets (0.93 MB against 5.76 MB
for INT on every packet). The goal is met from 64 KiB up, and missed below: at 32 KiB the
co-design has 88 % (sketch-only 18 %), and at 8-16 KiB it is no better than the sketch,
sometimes worse. The cause is the misclassification the table quantifies: a small flow whose
counters are already at T_hi through collisions with large flows is judged large from its
first packet, gets no INT, and its count is the sketch's (noisy) growth; with half the
counters per window (the hysteresis copy costs half the memory at equal bytes) that happens to
19 % of small flows at 32 KiB and to nearly all of them at 8 KiB. Large flows are measured a
little worse by the co-design at small memory (its sketch is half as wide) and equally well
from 64 KiB. INT sampled at the same INT budget is poor for every flow (it estimates a flow
from about 16 % of its packets), which is the draft's argument for giving INT to small flows
rather than to a sample of all packets. One window, uniformly interleaved packets and
packet-count thresholds are our choices; real traffic with flow arrivals spread over windows
would exercise the hysteresis, which only the unit tests do here.";
