//! The sketch-INT co-design on real packets, bigger than the test
//! (`peregrine_testkit::codesign_emu`: four `peregrine run` processes and a Linux router in
//! network namespaces, two paths, the gate at the source, Zipf flows sent with AF_PACKET).
//! Root. One command, after `cargo build --release -p peregrine && cargo build -p
//! peregrine-ctl`:
//!
//! `cargo run --release -p peregrine-perf --bin pg-codesign-emu`
//!
//! writes the section between `<!-- emu -->` and `<!-- /emu -->` of
//! `perf/results/codesign-eval.md` (pg-codesign-eval keeps it), `codesign-emu.json` and the
//! error CDF `codesign-emu-cdf.svg`.

use clap::Parser;
use peregrine_perf::fridge_eval::plot::{lines, Series};
use peregrine_testkit::codesign_emu::{run, EmuParams, EmuResult};
use peregrine_testkit::intnet::{ctl, target_dir};
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Parser, Debug)]
struct Args {
    /// Output directory.
    #[arg(long, default_value = "perf/results")]
    out: PathBuf,
    /// The `peregrine` binary (default: the workspace's release build).
    #[arg(long)]
    peregrine: Option<PathBuf>,
    #[arg(long, default_value_t = 3000)]
    flows: usize,
    #[arg(long, default_value_t = 1.2)]
    zipf: f64,
    /// Packets of the largest flow.
    #[arg(long, default_value_t = 4000)]
    max_packets: u32,
    #[arg(long, default_value_t = 32)]
    large: u32,
    #[arg(long, default_value_t = 16)]
    small: u32,
    #[arg(long, default_value_t = 2000)]
    window_ms: u64,
    #[arg(long, default_value_t = 3)]
    rows: u8,
    /// Sketch widths to run (one emulation each), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "4096,256")]
    widths: Vec<u32>,
    /// Frames per millisecond from the sender.
    #[arg(long, default_value_t = 4)]
    burst: usize,
    #[arg(long, default_value_t = 13)]
    seed: u64,
}

const BEGIN: &str = "<!-- emu -->";
const END: &str = "<!-- /emu -->";

fn row(p: &EmuParams, r: &EmuResult) -> String {
    let (ig, ip) = r.int_bytes();
    let large: Vec<_> = r
        .flows
        .iter()
        .filter(|f| f.sent >= 4 * u64::from(p.large))
        .collect();
    let max_int_large = large.iter().map(|f| f.int_packets).max().unwrap_or(0);
    let small: Vec<_> = r
        .flows
        .iter()
        .filter(|f| f.sent < u64::from(p.large))
        .collect();
    let misjudged = small.iter().filter(|f| f.sketch > 0).count();
    format!(
        "| {} KiB (d {} x w {}) | {} / {} | {} / {} | {:.1} % | {:.4} | {} ({:.2} %) | {} | {} | {:.0} / {:.0} ({:.0} % saved) | {} / {} / {} B | {}/{}, {}/{} | {} / {} / {} |\n",
        2 * usize::from(p.rows) * p.width as usize * 4 / 1024,
        p.rows,
        p.width,
        r.flows.len(),
        r.frames,
        r.delivered_gate,
        r.delivered_plain,
        100.0 * r.within(0.1),
        r.small_are(p.large),
        misjudged,
        100.0 * misjudged as f64 / small.len().max(1) as f64,
        large.len(),
        max_int_large,
        ig as f64 / 1024.0,
        ip as f64 / 1024.0,
        100.0 * (1.0 - ig as f64 / ip.max(1) as f64),
        r.gate_switched,
        r.gate_skipped,
        r.gate_bytes_saved,
        r.paths[0].with_hop,
        r.paths[0].reports,
        r.paths[1].with_hop,
        r.paths[1].reports,
        r.collector["windows"],
        r.collector["overflow"],
        r.collector["lost"],
    )
}

/// The honest paragraph, with this run's figures.
fn discussion(runs: &[(EmuParams, EmuResult)]) -> String {
    let (p, r) = &runs[0];
    let (pl, rl) = runs.last().expect("one run");
    let misjudged = |p: &EmuParams, r: &EmuResult| {
        let small: Vec<_> = r
            .flows
            .iter()
            .filter(|f| f.sent < u64::from(p.large))
            .collect();
        (small.iter().filter(|f| f.sketch > 0).count(), small.len())
    };
    let ((m0, n0), (ml, nl)) = (misjudged(p, r), misjudged(pl, rl));
    let max_int = r
        .flows
        .iter()
        .filter(|f| f.sent >= 4 * u64::from(p.large))
        .map(|f| f.int_packets)
        .max()
        .unwrap_or(0);
    let (ig, ip) = r.int_bytes();
    let large_share = r
        .flows
        .iter()
        .filter(|f| f.sent >= u64::from(p.large))
        .map(|f| f.sent - u64::from(p.large))
        .sum::<u64>() as f64
        / r.frames.max(1) as f64;
    let lost =
        r.frames.saturating_sub(r.delivered_gate) + r.frames.saturating_sub(r.delivered_plain);
    format!(
        "### Discussion (emulation)\n\n\
On real packets the merged records are within 10 % of what was sent for {:.1} % of flows at \
{} KiB and {:.1} % at {} KiB, above our 95 % goal. This traffic is light next to the \
simulation's (10,000 flows, 480,169 packets): {} flows and {} packets, most flows of a few \
packets, keep a small flow's counters below T_hi unless all of them are shared with large \
flows, so collisions are rare: {m0} of {n0} small flows got a sketch part at w = {} and \
{ml} of {nl} at w = {} (collisions, or T_lo to T_hi packets just before a window boundary: \
the hysteresis), where the simulation's 32 KiB case misjudges 19 %. {} frames of {} \
were lost between the nodes over both runs (the sender is paced at {} frames per ms; \
faster, the af_packet rings drop and the INT part under-counts). Large flows carried at most \
{max_int} INT packets (T_hi = {}){}. INT bytes on the wire fall by {:.0} % \
({:.0} KiB against {:.0} KiB), less than the simulation's 84 % because this Zipf tail \
is shorter (largest flow {} packets, not 100,000): only {:.0} % of the packets are past T_hi \
in large flows. The wire difference matches the gate's `gate_bytes_saved` ({} B) to within \
the few in-band request packets. Not exercised here: several workers per node, byte \
thresholds, loss.\n\n",
        100.0 * r.within(0.1),
        2 * usize::from(p.rows) * p.width as usize * 4 / 1024,
        100.0 * rl.within(0.1),
        2 * usize::from(pl.rows) * pl.width as usize * 4 / 1024,
        r.flows.len(),
        r.frames,
        p.width,
        pl.width,
        lost,
        2 * r.frames,
        p.burst,
        p.large,
        if max_int > u64::from(p.large) {
            ": the gate's windows are aligned to the first packet, and a flow that sent fewer \
than T_lo packets before a window boundary gets up to T_hi more INT packets after it"
        } else {
            ""
        },
        100.0 * (1.0 - ig as f64 / ip.max(1) as f64),
        ig as f64 / 1024.0,
        ip as f64 / 1024.0,
        p.max_packets,
        100.0 * large_share,
        r.gate_bytes_saved,
    )
}

fn main() {
    let a = Args::parse();
    let peregrine = a
        .peregrine
        .clone()
        .unwrap_or_else(|| target_dir().join("release/peregrine"));
    for (bin, how) in [
        (&peregrine, "cargo build --release -p peregrine"),
        (&ctl(), "cargo build -p peregrine-ctl"),
    ] {
        if !bin.exists() {
            eprintln!("pg-codesign-emu: {} missing: {how}", bin.display());
            std::process::exit(2);
        }
    }
    std::fs::create_dir_all(&a.out).expect("create output directory");
    let mut runs = Vec::new();
    for &width in &a.widths {
        let p = EmuParams {
            peregrine: peregrine.clone(),
            flows: a.flows,
            zipf_s: a.zipf,
            max_packets: a.max_packets,
            large: a.large,
            small: a.small,
            window_ms: a.window_ms,
            rows: a.rows,
            width,
            burst: a.burst,
            seed: a.seed,
            tag: "cem".into(),
        };
        eprintln!("pg-codesign-emu: width {width} ...");
        match run(&p) {
            Ok(r) => runs.push((p, r)),
            Err(e) => {
                eprintln!("pg-codesign-emu: {e}");
                std::process::exit(1);
            }
        }
    }
    let (p0, r0) = &runs[0];
    let sizes: Vec<u64> = r0.flows.iter().map(|f| f.sent).collect();
    let mut md = format!(
        "{BEGIN}\n## On real packets: the emulation\n\n\
Generated by `cargo run --release -p peregrine-perf --bin pg-codesign-emu` (root; \
`peregrine_testkit::codesign_emu`): four `peregrine run` processes (release build, DPDK \
`net_af_packet` ports on veths, one worker each) and a Linux router in network namespaces, \
two paths p1 -> r -> {{p2 | p3}} -> p4, the gate at the source p1 (T_hi = {}, T_lo = {}, \
{} ms windows), rules installed only at p1 (count 1: every packet of a small flow carries \
INT), {} UDP flows with Zipf sizes (s = {}, largest {} packets, {} packets in all, \
{} flows of at least T_hi packets), shuffled and sent from a namespace at about {} frames \
per ms, odd ranks via p2, even via p3. Merged records from `peregrinectl codesign collect` \
(the sink's INT reports + p1's exported switch records, `docs/codesign.md` \"Merge\") are \
compared with what was sent. INT bytes are measured on the wire (the router's receive \
counter on the p1 link minus the frames' own bytes) for the same frames with the gate and \
after restarting p1 without it. The machine is a 2-core VM shared with other engineers' \
builds; four busy-polling daemons share its two cores.\n\n\
| gate memory | flows / frames | delivered gate / plain | within 10 % | small-flow MRE | small flows with a sketch part (share) | flows >= 4 T_hi | max INT packets of those | INT KiB gate / plain | gate switched / skipped / saved | reports with the path's hop (p2, p3) | windows / overflow / lost |\n\
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
        p0.large,
        p0.small,
        p0.window_ms,
        p0.flows,
        p0.zipf_s,
        p0.max_packets,
        sizes.iter().sum::<u64>(),
        sizes.iter().filter(|&&n| n >= u64::from(p0.large)).count(),
        p0.burst,
    );
    for (p, r) in &runs {
        md += &row(p, r);
    }
    // CDF of the relative error per run.
    let series: Vec<Series> = runs
        .iter()
        .map(|(p, r)| {
            let mut e: Vec<f64> = r.flows.iter().map(|f| f.rel_err()).collect();
            e.sort_by(f64::total_cmp);
            let n = e.len() as f64;
            Series {
                name: format!("w = {}", p.width),
                points: e
                    .iter()
                    .enumerate()
                    .map(|(i, &x)| ((x + 1e-3).log10(), (i + 1) as f64 / n))
                    .collect(),
                spread: None,
            }
        })
        .collect();
    if let Err(e) = lines(
        &a.out.join("codesign-emu-cdf.svg"),
        "Emulation: per-flow relative error of the merged records",
        "log10(relative error + 0.001)",
        "fraction of flows",
        &series,
    ) {
        eprintln!("pg-codesign-emu: plot: {e}");
    }
    md += "\n![emulation error CDF](codesign-emu-cdf.svg)\n\n";
    md += &discussion(&runs);
    let _ = writeln!(
        md,
        "Run time: {} s in all (wall clock).\n\n{END}",
        runs.iter().map(|(_, r)| r.seconds).sum::<f64>().round()
    );
    let json: Vec<serde_json::Value> = runs
        .iter()
        .map(|(p, r)| {
            serde_json::json!({
                "width": p.width, "rows": p.rows, "large": p.large, "small": p.small,
                "flows": r.flows.len(), "frames": r.frames,
                "delivered_gate": r.delivered_gate, "delivered_plain": r.delivered_plain,
                "within_10pct": r.within(0.1), "small_mre": r.small_are(p.large),
                "int_bytes_gate": r.int_bytes().0, "int_bytes_plain": r.int_bytes().1,
                "int_added_gate": r.int_added_gate, "int_added_plain": r.int_added_plain,
                "gate_switched": r.gate_switched, "gate_skipped": r.gate_skipped,
                "gate_bytes_saved": r.gate_bytes_saved, "collector": r.collector,
                "per_flow": r.flows.iter().map(|f| [f.sent, f.int_packets, f.sketch, f.merged]).collect::<Vec<_>>(),
            })
        })
        .collect();
    std::fs::write(
        a.out.join("codesign-emu.json"),
        serde_json::to_string(&json).expect("json"),
    )
    .expect("write json");
    let path = a.out.join("codesign-eval.md");
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let new = match (old.find(BEGIN), old.find(END)) {
        (Some(b), Some(e)) if b < e => format!("{}{}{}", &old[..b], md, &old[e + END.len()..]),
        _ => format!("{old}\n{md}"),
    };
    std::fs::write(&path, new).expect("write md");
    println!("wrote the emulation section of {}", path.display());
    print!("{md}");
}
