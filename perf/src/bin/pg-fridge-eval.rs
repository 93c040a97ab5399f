//! The fridge paper's section 5 evaluation, one command:
//! `cargo run --release -p peregrine-perf --bin pg-fridge-eval` writes
//! `perf/results/fridge-eval.md` (+ JSON and SVG plots). Virtual time, fixed seeds: the
//! output is the same on every run. `--quick` runs a smaller version (shorter traces, three
//! seeds) to check the pipeline.

use clap::Parser;
use peregrine_dataplane::telemetry::fridge::{FridgeSpec, XMode};
use peregrine_perf::fridge_eval::plot::{lines, Series};
use peregrine_perf::fridge_eval::runs::{par_map, run, score, seeds, Algo};
use peregrine_perf::fridge_eval::{Errors, Truth};
use peregrine_testkit::delay_trace::{synthetic, tcp_like, TcpShape, Trace};
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Parser, Debug)]
struct Args {
    /// Output directory.
    #[arg(long, default_value = "perf/results")]
    out: PathBuf,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Smaller traces and 3 seeds (a smoke run).
    #[arg(long)]
    quick: bool,
}

const MODE: XMode = XMode::Insertions;

struct Ctx {
    final_seeds: Vec<u64>,
    search_seeds: Vec<u64>,
    threads: usize,
}

fn p_of(k: f64) -> f64 {
    (-k).exp2()
}

/// Result of one algorithm at its chosen parameters over the final seeds.
#[derive(Debug, Clone, serde::Serialize)]
struct Row {
    algo: String,
    mean: Errors,
    sd: Errors,
    pooled: Errors,
}

fn final_row(a: &Algo, t: &Trace, truth: &Truth, c: &Ctx) -> Row {
    let (per, pooled) = seeds(a, t, truth, &c.final_seeds, MODE);
    let (mean, sd) = Errors::mean_sd(&per);
    Row {
        algo: a.label(),
        mean,
        sd,
        pooled,
    }
}

/// The best of `cands` by mean max-error over the search seeds.
fn best(cands: Vec<Algo>, t: &Trace, truth: &Truth, c: &Ctx) -> Algo {
    let s = par_map(&cands, c.threads, |a| {
        score(a, t, truth, &c.search_seeds, MODE)
    });
    let i = (0..cands.len())
        .min_by(|&a, &b| s[a].total_cmp(&s[b]))
        .expect("non-empty grid");
    cands[i].clone()
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn row_md(r: &Row) -> String {
    format!(
        "| {} | {} ± {} | {} ± {} | {} ± {} | {} ± {} | {} |\n",
        r.algo,
        pct(r.mean.p50),
        pct(r.sd.p50),
        pct(r.mean.p95),
        pct(r.sd.p95),
        pct(r.mean.p99),
        pct(r.sd.p99),
        pct(r.mean.max),
        pct(r.sd.max),
        pct(r.pooled.max)
    )
}

const HEADER: &str =
    "| algorithm | p50 | p95 | p99 | max p5-p95 | max, pooled CDF |\n|---|---|---|---|---|---|\n";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = Args::parse();
    std::fs::create_dir_all(&a.out)?;
    let nseeds = if a.quick { 3 } else { 10 };
    let c = Ctx {
        final_seeds: (0..nseeds).collect(),
        search_seeds: vec![1000, 1001],
        threads: a.threads,
    };
    let mut md = String::new();
    let mut json = serde_json::Map::new();
    let started = std::time::Instant::now();

    // ---- Figure 3: best p on synthetic traces, M = 2^12 ----
    let n_req = if a.quick { 200_000 } else { 1_250_000 };
    let mut fig3 = Vec::new();
    let mut fig3_md = String::new();
    for (t_exp, name) in [(12u32, "T = 2^12 ms"), (6, "T = 2^6 ms")] {
        let t = synthetic(7, n_req, 1e6, 0.4, 1_000, (1u64 << t_exp) * 1_000_000);
        let truth = Truth::new(t.delays.clone());
        let ks: Vec<f64> = (0..=16).map(f64::from).collect();
        let rows = par_map(&ks, c.threads, |&k| {
            let algo = Algo::Fridge(vec![FridgeSpec {
                m: 1 << 12,
                p: p_of(k),
            }]);
            let (per, _) = seeds(&algo, &t, &truth, &c.final_seeds, MODE);
            Errors::mean_sd(&per)
        });
        let (ib, _) = rows
            .iter()
            .enumerate()
            .min_by(|x, y| x.1 .0.max.total_cmp(&y.1 .0.max))
            .expect("grid");
        let kb = ks[ib];
        let near: Vec<String> = [-1.0, 1.0]
            .iter()
            .filter_map(|d| ks.iter().position(|&k| k == kb + d))
            .map(|i| format!("p = 2^-{}: {}", ks[i], pct(rows[i].0.max)))
            .collect();
        let lifetime = f64::from(1u32 << 12) / p_of(kb);
        let max_insertions = (1u64 << t_exp) as f64 * 1e3; // 1 M requests/s
        writeln!(
            fig3_md,
            "| {name} | 2^-{kb} | {:.2e} | {:.2e} | {} ± {} | {} |",
            lifetime,
            max_insertions,
            pct(rows[ib].0.max),
            pct(rows[ib].1.max),
            near.join(", ")
        )?;
        fig3.push(Series {
            name: name.into(),
            points: ks.iter().zip(&rows).map(|(&k, r)| (-k, r.0.max)).collect(),
            spread: Some(rows.iter().map(|r| r.1.max).collect()),
        });
        json.insert(
            format!("fig3_t{t_exp}"),
            serde_json::json!({"log2_p": ks.iter().map(|k| -k).collect::<Vec<_>>(),
                "max_mean": rows.iter().map(|r| r.0.max).collect::<Vec<_>>(),
                "max_sd": rows.iter().map(|r| r.1.max).collect::<Vec<_>>(), "best_log2_p": -kb}),
        );
    }
    lines(
        &a.out.join("fridge-fig3-best-p.svg"),
        "Fig 3 analog: fridge M=2^12, synthetic traces (10 seeds, mean ± sd)",
        "log2 p",
        "max |log2 err| over p5-p95",
        &fig3,
    )?;
    eprintln!("fig 3 done at {:?}", started.elapsed());

    // ---- The TCP trace: Figures 2, 4, 5 ----
    let shape = TcpShape {
        duration_ns: if a.quick {
            1_000_000_000
        } else {
            5_000_000_000
        },
        flows_per_s: 20_000.0,
        ..TcpShape::default()
    };
    let t = tcp_like(11, &shape);
    let truth = Truth::new(t.delays.clone());
    let reqs = t.requests();
    let tcp_facts = format!(
        "{} packets over {:.1} s: {:.0}% requests, {:.1}% of requests answered, {} pairs, mean delay {:.1} ms, p50 {:.1} ms, p99 {:.0} ms",
        t.events.len(),
        shape.duration_ns as f64 / 1e9,
        100.0 * reqs as f64 / t.events.len() as f64,
        100.0 * truth.len() as f64 / reqs as f64,
        truth.len(),
        t.delays.iter().sum::<u64>() as f64 / truth.len() as f64 / 1e6,
        truth.quantile(0.5) / 1e6,
        truth.quantile(0.99) / 1e6
    );
    eprintln!("tcp trace: {tcp_facts}");
    let mems: Vec<u32> = if a.quick {
        vec![8, 10, 12]
    } else {
        vec![6, 8, 10, 12, 14, 16]
    };
    let mut table5 = Vec::new();
    for &me in &mems {
        let m = 1u32 << me;
        let single = best(
            (0..=40)
                .map(|h| {
                    Algo::Fridge(vec![FridgeSpec {
                        m,
                        p: p_of(f64::from(h) / 2.0),
                    }])
                })
                .collect(),
            &t,
            &truth,
            &c,
        );
        let kb = match &single {
            Algo::Fridge(s) => -s[0].p.log2(),
            _ => unreachable!("a fridge"),
        };
        let mut pairs = Vec::new();
        for d1 in 0..=3 {
            for d2 in 1..=5 {
                let (k1, k2) = ((kb - f64::from(d1)).max(1.0), kb + f64::from(d2));
                pairs.push(Algo::Fridge(vec![
                    FridgeSpec {
                        m: m / 2,
                        p: p_of(k1),
                    },
                    FridgeSpec {
                        m: m / 2,
                        p: p_of(k2),
                    },
                ]));
            }
        }
        let two = best(pairs, &t, &truth, &c);
        let expiry = |stages| {
            best(
                (0..=12)
                    .map(|j| Algo::Expiry {
                        m,
                        stages,
                        t_ns: (1u64 << j) * 1_000_000,
                    })
                    .collect(),
                &t,
                &truth,
                &c,
            )
        };
        let (e1, e4) = (expiry(1), expiry(4));
        let algos = [single, two, e1, e4, Algo::Simple(m)];
        let rows = par_map(&algos, c.threads, |al| final_row(al, &t, &truth, &c));
        eprintln!("M = 2^{me} done at {:?}", started.elapsed());
        table5.push((me, algos.to_vec(), rows));
    }

    // Figure 2: M = 2^10.
    let (_, algos2, rows2) = table5
        .iter()
        .find(|r| r.0 == 10)
        .expect("M = 2^10 is in the sweep");
    let mut fig2 = vec![Series {
        name: "ground truth".into(),
        points: (0..=200)
            .map(|i| f64::from(i) / 200.0)
            .map(|q| ((truth.quantile(q).max(1.0) / 1e6).log2(), q))
            .collect(),
        spread: None,
    }];
    for (al, name) in [
        (&algos2[0], "fridge"),
        (&algos2[2], "simple, expiry T"),
        (&algos2[4], "simple, always overwrite"),
    ] {
        let mut pooled: Vec<f64> = Vec::new();
        for &s in &c.final_seeds {
            let n = run(al, &t, s, MODE).normalised();
            if pooled.is_empty() {
                pooled = n;
            } else {
                pooled.iter_mut().zip(&n).for_each(|(a, b)| *a += b);
            }
        }
        let cdf = peregrine_dataplane::telemetry::fridge::Cdf::from_mass(&pooled).expect("samples");
        fig2.push(Series {
            name: format!("{name} (pooled over seeds)"),
            points: (0..=200)
                .map(|i| f64::from(i) / 200.0)
                .map(|q| ((cdf.quantile(q).max(1.0) / 1e6).log2(), q))
                .collect(),
            spread: None,
        });
    }
    lines(
        &a.out.join("fridge-fig2-cdf.svg"),
        "Fig 2 analog: delay CDF, M = 2^10, TCP trace",
        "log2 delay (ms)",
        "CDF",
        &fig2,
    )?;

    // Figures 4 and 5.
    let series = |idx: usize, name: &str, f: fn(&Errors) -> f64| Series {
        name: name.into(),
        points: table5
            .iter()
            .map(|(me, _, r)| (f64::from(*me), f(&r[idx].mean)))
            .collect(),
        spread: Some(table5.iter().map(|(_, _, r)| f(&r[idx].sd)).collect()),
    };
    lines(
        &a.out.join("fridge-fig4-two-vs-one.svg"),
        "Fig 4 analog: one vs two fridges (IVW), TCP trace",
        "log2 M (slots in total)",
        "max |log2 err| over p5-p95",
        &[
            series(0, "one fridge", |e| e.max),
            series(1, "two fridges + IVW", |e| e.max),
        ],
    )?;
    for (q, f, file) in [
        (
            "p50",
            (|e: &Errors| e.p50) as fn(&Errors) -> f64,
            "fridge-fig5-p50.svg",
        ),
        ("p95", |e: &Errors| e.p95, "fridge-fig5-p95.svg"),
        ("p99", |e: &Errors| e.p99, "fridge-fig5-p99.svg"),
    ] {
        lines(
            &a.out.join(file),
            &format!("Fig 5 analog: {q} error vs memory, TCP trace"),
            "log2 M (slots)",
            &format!("|log2 err| at {q}"),
            &[
                series(0, "one fridge", f),
                series(1, "two fridges", f),
                series(2, "simple 1 stage, best T", f),
                series(3, "simple 4 stages, best T", f),
            ],
        )?;
    }
    // Memory saving: for each M of the better simple variant, the smallest M (interpolated in
    // log2 M, scanning up from the smallest size) at which two fridges reach the same max
    // error; on the per-seed mean and on the pooled CDF.
    let mut saving_md = String::new();
    for pooled in [false, true] {
        let err = |r: &Row| if pooled { r.pooled.max } else { r.mean.max };
        let two: Vec<(f64, f64)> = table5
            .iter()
            .map(|(me, _, r)| (f64::from(*me), err(&r[1])))
            .collect();
        for (me, _, r) in &table5 {
            let target = err(&r[2]).min(err(&r[3]));
            let reach = if two[0].1 <= target {
                Some((two[0].0, true))
            } else {
                two.windows(2).find(|w| w[1].1 <= target).map(|w| {
                    let ((m0, e0), (m1, e1)) = (w[0], w[1]);
                    (m0 + (e0 - target) / (e0 - e1) * (m1 - m0), false)
                })
            };
            let how = if pooled { "pooled" } else { "mean" };
            match reach {
                Some((mf, at_min)) => writeln!(
                    saving_md,
                    "| {how} | 2^{me} | {} | {}2^{mf:.2} | {}{:.2}x |",
                    pct(target),
                    if at_min { "<= " } else { "" },
                    if at_min { ">= " } else { "" },
                    (f64::from(*me) - mf).exp2()
                )?,
                None => writeln!(
                    saving_md,
                    "| {how} | 2^{me} | {} | not reached in the sweep | - |",
                    pct(target)
                )?,
            }
        }
    }

    // Tofino approximation at M = 2^12 (or the largest swept in quick mode).
    let (me_t, algos_t, _) = table5.iter().rev().find(|r| r.0 <= 12).expect("a size");
    let kb = match &algos_t[0] {
        Algo::Fridge(s) => (-s[0].p.log2()).round() as u32,
        _ => unreachable!("a fridge"),
    };
    let m = 1u32 << me_t;
    let tof = [
        Algo::Fridge(vec![FridgeSpec {
            m,
            p: p_of(f64::from(kb)),
        }]),
        Algo::Tofino {
            m,
            p_exp: kb,
            log2_bins: false,
        },
        Algo::Tofino {
            m,
            p_exp: kb,
            log2_bins: true,
        },
    ];
    let tof_rows = par_map(&tof, c.threads, |al| final_row(al, &t, &truth, &c));
    let mut extra = Vec::new();
    for &s in &c.final_seeds {
        let e0 = run(&tof[0], &t, s, MODE).errors(&truth).max;
        let e1 = run(&tof[1], &t, s, MODE).errors(&truth).max;
        extra.push(e1 - e0);
    }
    let extra_mean = extra.iter().sum::<f64>() / extra.len() as f64;
    let extra_absmax = extra.iter().fold(0.0f64, |a, &b| a.max(b.abs()));

    // ---- Write the report ----
    writeln!(
        md,
        "# Fridge evaluation (seed paper section 5, Figures 2-5)\n"
    )?;
    writeln!(md, "Generated by `cargo run --release -p peregrine-perf --bin pg-fridge-eval{}` in {:.0} s (2-core VM shared with other engineers' builds; the results do not depend on timing: virtual time, fixed seeds). x counts insertions (`XMode::Insertions`). Errors are `|log2(estimate / truth)|` (0.25 = the seed's \"25%\"), mean ± sd over {} hash seeds; \"pooled\" is the error of the seeds' averaged CDF, the seed's way of combining ten runs. Parameters (p, T) are grid-searched on two other seeds, then evaluated on the final seeds.\n", if a.quick { " -- --quick" } else { "" }, started.elapsed().as_secs_f64(), c.final_seeds.len())?;
    writeln!(md, "## Traces\n\n* Synthetic (section 5): {} requests at 1 M/s, 40% answered, delays log-uniform in [1 us, T) (the seed writes (0, T); a log-uniform needs a lower end).\n* TCP (our stand-in for the seed's ISP trace, `testkit::delay_trace::tcp_like`): {tcp_facts}. Data segments are requests; ACKs every 2 (60% of flows), 4 or 8 segments match only the segment whose end they acknowledge; a trailing segment waits up to 40 ms for the delayed-ACK timer; 1% of ACKs lost; scan orphans and unmatched responses. RTTs: log-normal (median 35 ms, sigma 0.8) with a 5% Pareto tail. The seed's trace: 10 M packets in 11.4 s, 61% requests, 13% answered, mean 57.8 ms.\n", n_req)?;
    write!(md, "## Figure 2 analog: fridge vs simple at M = 2^10\n\nSeed (real trace): fridge max error 25%, simple (expiry T = 2^9 ms) 36%.\n\n{HEADER}")?;
    for r in rows2 {
        md.push_str(&row_md(r));
    }
    writeln!(md, "\n![CDF](fridge-fig2-cdf.svg)\n")?;
    writeln!(md, "## Figure 3 analog: best p vs average lifetime M/p (M = 2^12)\n\nSeed: for T = 2^12 ms the best p is near M/p = 4e6 (the insertions under the largest delay), for T = 2^6 ms near p = 2^-4; accuracy is flat within 0.5x-2x of the best p.\n\n| trace | best p | M/p | requests under the max delay | max error at best p | neighbours (2x, 0.5x) |\n|---|---|---|---|---|---|\n{fig3_md}\n![best p](fridge-fig3-best-p.svg)\n")?;
    writeln!(md, "## Figures 4 and 5: error vs memory on the TCP trace\n\nPer memory size M (slots in total): one fridge (best p), two fridges of M/2 each (best pair near the single best p, IVW-combined), the expiry-T table with 1 and 4 stages (best T in 2^0..2^12 ms), and the always-overwrite table.\n")?;
    for (me, _, rows) in &table5 {
        write!(md, "### M = 2^{me}\n\n{HEADER}")?;
        for r in rows {
            md.push_str(&row_md(r));
        }
        md.push('\n');
    }
    writeln!(md, "![two vs one](fridge-fig4-two-vs-one.svg)\n\n![p50](fridge-fig5-p50.svg) ![p95](fridge-fig5-p95.svg) ![p99](fridge-fig5-p99.svg)\n")?;
    writeln!(md, "### Memory saving (Figure 5; seed: 2x-4x)\n\nFor each M, the better simple variant's max error, and the memory at which two fridges reach it (interpolated in log2 M; below 1x the fridges need more memory), on the per-seed mean error and on the pooled CDF.\n\n| error | simple at M | its max error | two fridges reach it at | saving |\n|---|---|---|---|---|\n{saving_md}\nDiscussion of the differences from the seed: [fridge-eval-discussion.md](fridge-eval-discussion.md).\n")?;
    write!(md, "## Tofino-compatible mode (section 6.2)\n\nM = 2^{me_t}, p = 2^-{kb} (the best single p rounded to a power of two), factors from the generated range table (1.1x steps, cap 2^24). Seed: the table adds 0.2%-0.9% to the max relative error.\n\n{HEADER}")?;
    for r in &tof_rows {
        md.push_str(&row_md(r));
    }
    writeln!(md, "\nExtra max error from the range table alone (paired by seed): mean {:+.2} percentage points, largest {:.2}.\n", 100.0 * extra_mean, 100.0 * extra_absmax)?;
    json.insert("tcp_trace".into(), serde_json::json!(tcp_facts));
    json.insert(
        "memory_sweep".into(),
        serde_json::json!(table5
            .iter()
            .map(|(me, _, r)| serde_json::json!({"log2_m": me, "rows": r}))
            .collect::<Vec<_>>()),
    );
    json.insert("tofino".into(), serde_json::json!({"rows": tof_rows, "extra_mean": extra_mean, "extra_absmax": extra_absmax}));
    let name = if a.quick {
        "fridge-eval-quick"
    } else {
        "fridge-eval"
    };
    std::fs::write(a.out.join(format!("{name}.md")), &md)?;
    std::fs::write(
        a.out.join(format!("{name}.json")),
        serde_json::to_string_pretty(&json)?,
    )?;
    println!("{md}");
    Ok(())
}
