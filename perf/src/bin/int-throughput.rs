//! INT overhead on a forwarding path (issue 4; Miranda et al. lost 7.27 % at 1/100 in Click).
//!
//! `cargo build --release -p peregrine-perf --bin int-throughput && target/release/int-throughput`
//!
//! In-process, one thread: batches of 32 `OwnedBuf`s (a preallocated pool, refilled from the
//! same 562-byte MGEN frame every batch on every side) through a `Pipeline`:
//! - **off**: `l3fwd` (the path with INT off);
//! - **1/N**: `IntSource` (count mode, 1 in N) -> `IntSink` -> `l3fwd` (source and sink of the
//!   same flow on one box, before the forwarding decision: a stage after `l3fwd` would see no
//!   `Continue` packets), with the sink's reports drained from its channel every batch (the
//!   control core's side, counted against INT).
//!
//! Rounds alternate the sides (rotating the order) and each round's INT rate is divided by the
//! same round's INT-off rate; the median of those paired ratios is the result. A counting
//! global allocator checks that the measurement windows allocate nothing.
//!
//! `--net-ring`: the same comparison through the real worker loop on two DPDK `net_ring`
//! vdevs (as `pg-throughput`: a ring port loops its tx back to its rx; 32 frames injected per
//! port, forwarded 0 <-> 1 on one pinned core, burst 32), so the baseline pays the ring I/O:
//! off = `xconnect`; 1/N = `IntSource` -> `IntSink` -> `xconnect` (the sink strips what the
//! source added, so the looped frame stays valid; `xconnect` rather than `l3fwd`, whose hop
//! limit decrement would expire a looped frame). Each side runs in a fresh process per round,
//! sides alternate (rotating order), rate = `rte_eth_stats` rx delta over the window, the
//! control thread drains the sink's reports meanwhile (on the other core).

use clap::Parser;
use crossbeam_channel::{bounded, Receiver};
use peregrine_dataplane::runtime::{Action, Batch, Context, Pipeline, Publisher, Reasons, Stage};
use peregrine_dataplane::stages::l3fwd::{L3Fwd, NextHop, RouteTable};
use peregrine_dataplane::OwnedBuf;
use peregrine_int::namespace::NamespaceTable;
use peregrine_int::stages::{IntConfig, IntEvent, IntSink, IntSource};
use peregrine_perf::harness::report;
use peregrine_perf::harness::stats::median;
use peregrine_perf::int_accuracy::stages::{frame, rule};
use peregrine_perf::int_accuracy::{Encoding, Strategy};
use peregrine_testkit::alloc::CountingAlloc;
use peregrine_wire::ethernet::Address;
use serde::Serialize;
use std::net::IpAddr;
use std::time::Instant;

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc::new();

#[derive(Parser, Debug)]
#[command(about = "INT source + sink throughput against the same path with INT off")]
struct Args {
    /// Rounds (each runs every side once).
    #[arg(long, default_value_t = 15)]
    rounds: usize,
    /// Batches of 32 per side per round.
    #[arg(long, default_value_t = 20_000)]
    batches: usize,
    /// Wire encoding of the INT rule.
    #[arg(long, default_value = "ioam")]
    encoding: String,
    /// Write the JSON result here.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Measure through the worker runtime on DPDK net_ring vdevs instead of in-process.
    #[arg(long)]
    net_ring: bool,
    /// net_ring: seconds per measurement window.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// net_ring: the worker's core.
    #[arg(long, default_value_t = 1)]
    core: usize,
    /// net_ring child: run one side (0 = INT off, N = sampling 1/N) and print `pps allocs reports`.
    #[arg(long, hide = true)]
    child: Option<u32>,
    /// net_ring: put a MAC-swap stage (reads and rewrites the Ethernet header of every
    /// packet, as any header-touching stage does) first on every side.
    #[arg(long)]
    touch: bool,
}

const BURST: usize = 32;
const OUT_MAC: Address = Address([2, 0, 0, 0, 0, 9]);

struct Side {
    name: String,
    pipe: Pipeline<OwnedBuf>,
    events: Option<Receiver<IntEvent>>,
    _routes: Publisher<RouteTable>,
    _table: Option<Publisher<peregrine_int::namespace::TableSnapshot>>,
}

fn l3fwd(reasons: &mut Reasons) -> (L3Fwd, Publisher<RouteTable>) {
    let mut rt = RouteTable::default();
    rt.insert(
        IpAddr::V6("2001:db8:2::".parse().expect("prefix")),
        48,
        NextHop {
            port: 1,
            mac: OUT_MAC,
        },
    );
    let routes = Publisher::new(rt);
    let f = L3Fwd::new(
        routes.reader(),
        vec![Address([2, 0, 0, 0, 0, 2]), Address([2, 0, 0, 0, 0, 3])],
        false,
        reasons,
    );
    (f, routes)
}

fn side_off() -> Side {
    let mut reasons = Reasons::new();
    let (f, routes) = l3fwd(&mut reasons);
    Side {
        name: "off".into(),
        pipe: Pipeline::new(vec![Box::new(f)]),
        events: None,
        _routes: routes,
        _table: None,
    }
}

fn side_int(n: u32, encoding: Encoding) -> Side {
    let mut reasons = Reasons::new();
    let (f, routes) = l3fwd(&mut reasons);
    let mut table = NamespaceTable::default();
    let r = rule(Strategy::Count(n));
    let ns = r.ns_id;
    table.install(r).expect("valid rule");
    let publisher = Publisher::new((*table.snapshot()).clone());
    let cfg = |node_id| IntConfig {
        node_id,
        seed_namespaces: if encoding == Encoding::Seed {
            vec![ns]
        } else {
            Vec::new()
        },
        ..IntConfig::default()
    };
    let (tx, rx) = bounded(4096);
    let source = IntSource::new(cfg(1), publisher.reader());
    let sink = IntSink::new(cfg(2), publisher.reader(), tx, &mut reasons);
    let stages: Vec<Box<dyn Stage<OwnedBuf>>> = vec![Box::new(source), Box::new(sink), Box::new(f)];
    Side {
        name: format!("1/{n}"),
        pipe: Pipeline::new(stages),
        events: Some(rx),
        _routes: routes,
        _table: Some(publisher),
    }
}

/// Run `batches` bursts; returns (packets per second, reports seen, packets not sent to tx).
fn run_side(
    s: &mut Side,
    pool: &mut Vec<OwnedBuf>,
    tmpl: &[u8],
    batches: usize,
    epoch: Instant,
) -> (f64, u64, u64) {
    let mut batch = Batch::<OwnedBuf>::new();
    let (mut reports, mut bad) = (0u64, 0u64);
    let t0 = Instant::now();
    for _ in 0..batches {
        while let Some(mut b) = pool.pop() {
            // Every side pays the same refill: a fresh packet per slot.
            let _ = b.set_data(tmpl);
            let _ = batch.push(b, peregrine_dataplane::runtime::Disposition::CONTINUE);
        }
        let cx = Context::fixed(epoch.elapsed().as_nanos() as u64, 0);
        s.pipe.run(&mut batch, &cx);
        for (b, d) in batch.drain() {
            if !matches!(d.action(), Action::Tx(..)) {
                bad += 1;
            }
            pool.push(b);
        }
        if let Some(rx) = &s.events {
            for e in rx.try_iter() {
                if let IntEvent::Report { report, .. } = e {
                    reports += 1;
                    std::hint::black_box(report);
                }
            }
        }
    }
    let dt = t0.elapsed().as_secs_f64();
    ((batches * BURST) as f64 / dt, reports, bad)
}

#[derive(Serialize)]
struct SideResult {
    side: String,
    median_mpps: f64,
    median_ratio_to_off: Option<f64>,
    min_ratio: Option<f64>,
    max_ratio: Option<f64>,
    reports: u64,
    not_forwarded: u64,
}

#[derive(Serialize)]
struct Output {
    machine: String,
    encoding: String,
    rounds: usize,
    packets_per_side_per_round: usize,
    allocations_in_windows: u64,
    sides: Vec<SideResult>,
}

fn machine() -> String {
    let cpu = report::cpu_model().unwrap_or_else(|| "unknown CPU".into());
    format!(
        "{cpu}, {} logical CPUs available (shared with other builds)",
        report::cores()
    )
}

fn main() {
    let args = Args::parse();
    if let Some(n) = args.child {
        let (pps, allocs, reports) = ring::child(&args, n);
        println!("{pps} {allocs} {reports}");
        return;
    }
    if args.net_ring {
        ring::main(&args);
        return;
    }
    let encoding = match args.encoding.as_str() {
        "seed" => Encoding::Seed,
        _ => Encoding::Ioam,
    };
    let tmpl = frame(1);
    let mut sides = [
        side_off(),
        side_int(100, encoding),
        side_int(1000, encoding),
    ];
    let mut pool: Vec<OwnedBuf> = (0..BURST).map(|_| OwnedBuf::new()).collect();
    let epoch = Instant::now();
    // Warm-up: first packets carry the in-band request; caches and maps settle.
    for s in sides.iter_mut() {
        run_side(s, &mut pool, &tmpl, 2_000, epoch);
    }
    let k = sides.len();
    let mut rates = vec![Vec::new(); k];
    let mut ratios = vec![Vec::new(); k];
    let mut reports = vec![0u64; k];
    let mut bad = vec![0u64; k];
    let mut allocs = 0;
    for round in 0..args.rounds {
        let mut r = vec![0.0; k];
        for j in 0..k {
            let i = (round + j) % k;
            let a0 = GLOBAL.allocs();
            let (pps, rep, b) = run_side(&mut sides[i], &mut pool, &tmpl, args.batches, epoch);
            allocs += GLOBAL.allocs() - a0;
            r[i] = pps;
            reports[i] += rep;
            bad[i] += b;
        }
        for i in 0..k {
            rates[i].push(r[i]);
            ratios[i].push(r[i] / r[0]);
        }
        eprintln!(
            "round {round}: {}",
            (0..k)
                .map(|i| format!(
                    "{} {:.2} Mpps ({:.4})",
                    sides[i].name,
                    r[i] / 1e6,
                    r[i] / r[0]
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let out = Output {
        machine: machine(),
        encoding: args.encoding.clone(),
        rounds: args.rounds,
        packets_per_side_per_round: args.batches * BURST,
        allocations_in_windows: allocs,
        sides: (0..k)
            .map(|i| {
                let mut q = ratios[i].clone();
                q.sort_by(|a, b| a.total_cmp(b));
                SideResult {
                    side: sides[i].name.clone(),
                    median_mpps: median(&rates[i]) / 1e6,
                    median_ratio_to_off: (i > 0).then(|| median(&ratios[i])),
                    min_ratio: (i > 0).then(|| q[0]),
                    max_ratio: (i > 0).then(|| q[q.len() - 1]),
                    reports: reports[i],
                    not_forwarded: bad[i],
                }
            })
            .collect(),
    };
    report::print_and_write(&out, args.json.as_deref()).expect("write json");
}

/// The `--net-ring` mode: the worker runtime on DPDK `net_ring` vdevs.
mod ring {
    use super::*;
    use peregrine_dataplane::runtime;
    use peregrine_dataplane::stages::xconnect::XConnect;
    use peregrine_dataplane::PacketBuf;
    use peregrine_perf::harness::net_ring::{self, Preloaded, Window};
    use peregrine_perf::harness::stats::{mpps, pair_ratios};
    use peregrine_perf::harness::{child_failed, fail, run_self};
    use std::time::Duration;

    /// Frames in flight per port (as `pg-throughput`).
    const INJECT: usize = 32;

    /// Swaps the Ethernet source and destination addresses: a minimal stage that touches
    /// every packet's header (the first touch of the mbuf data) and keeps it loopable.
    struct MacSwap;

    impl<B: PacketBuf> Stage<B> for MacSwap {
        fn name(&self) -> &'static str {
            "mac_swap"
        }
        fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
            batch.for_each_active(|b| {
                if let Some(h) = b.data_mut().get_mut(..12) {
                    let (d, s) = h.split_at_mut(6);
                    d.swap_with_slice(s);
                }
                peregrine_dataplane::runtime::Disposition::CONTINUE
            });
        }
    }

    /// One side in this process: `n == 0` is INT off. Returns (pps, allocations, reports).
    pub fn child(a: &Args, n: u32) -> (f64, u64, u64) {
        let mut pre = Preloaded::inject(net_ring::backend(512), &[frame(1)], INJECT);
        let mut table = NamespaceTable::default();
        if n > 0 {
            table.install(rule(Strategy::Count(n))).expect("valid rule");
        }
        let publisher = Publisher::new((*table.snapshot()).clone());
        let (tx, rx) = bounded(4096);
        let factory = |_w: usize, r: &mut Reasons| {
            // The swap goes first on both sides: the first touch of the data is common cost.
            let mut stages: Vec<Box<dyn Stage<_>>> = Vec::new();
            if a.touch {
                stages.push(Box::new(MacSwap));
            }
            let xc = Box::new(XConnect::new(&[(0, 1)], r));
            if n == 0 {
                stages.push(xc);
                return Pipeline::new(stages);
            }
            let cfg = |node_id| IntConfig {
                node_id,
                ..IntConfig::default()
            };
            let source = IntSource::new(cfg(1), publisher.reader());
            let sink = IntSink::new(cfg(2), publisher.reader(), tx.clone(), r);
            stages.extend([Box::new(source) as Box<dyn Stage<_>>, Box::new(sink), xc]);
            Pipeline::new(stages)
        };
        let rcfg = net_ring::one_worker(a.core, BURST, false);
        let run = runtime::start(&mut pre, &factory, &rcfg).expect("start worker");
        let drain = |reports: &mut u64| {
            for e in rx.try_iter() {
                if let IntEvent::Report { report, .. } = e {
                    *reports += 1;
                    std::hint::black_box(report);
                }
            }
        };
        let mut reports = 0u64;
        let warm = Instant::now();
        while warm.elapsed() < Duration::from_secs(1) {
            drain(&mut reports);
            std::thread::sleep(Duration::from_millis(1));
        }
        let w = Window::open(&pre, &GLOBAL);
        reports = 0;
        while w.elapsed().as_secs_f64() < a.seconds {
            drain(&mut reports);
            std::thread::sleep(Duration::from_millis(1));
        }
        let (pps, allocs) = w.close(&pre, &GLOBAL);
        run.request_stop();
        let c = run.join();
        assert_eq!(c.total_drops(), 0, "no drops: INT must not lose packets");
        (pps, allocs, reports)
    }

    fn run_child(a: &Args, n: u32) -> Result<(f64, u64, u64), String> {
        let out = run_self(
            [
                "--child",
                &n.to_string(),
                "--seconds",
                &a.seconds.to_string(),
                "--core",
                &a.core.to_string(),
            ]
            .into_iter()
            .chain(a.touch.then_some("--touch")),
        )?;
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Vec<f64> = text
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        match v[..] {
            [p, al, rep] if out.status.success() => Ok((p, al as u64, rep as u64)),
            _ => Err(child_failed("child run", &out)),
        }
    }

    #[derive(Serialize)]
    struct RingSide {
        side: String,
        mpps: Vec<f64>,
        median_mpps: f64,
        round_ratios_to_off: Vec<f64>,
        median_ratio_to_off: Option<f64>,
        reports_per_second: f64,
    }

    pub fn main(a: &Args) {
        let sides = [0u32, 100, 1000];
        let k = sides.len();
        let mut rates = vec![Vec::new(); k];
        let mut reports = vec![0u64; k];
        let mut allocs = 0;
        for round in 0..a.rounds {
            let mut r = vec![0.0; k];
            for j in 0..k {
                let i = (round + j) % k;
                let (pps, al, rep) = run_child(a, sides[i]).unwrap_or_else(|e| fail(&e));
                r[i] = pps;
                allocs += al;
                reports[i] += rep;
            }
            eprintln!(
                "round {round}: off {:.2} Mpps, 1/100 {:.2} ({:.4}), 1/1000 {:.2} ({:.4})",
                r[0] / 1e6,
                r[1] / 1e6,
                r[1] / r[0],
                r[2] / 1e6,
                r[2] / r[0]
            );
            for i in 0..k {
                rates[i].push(r[i]);
            }
        }
        let out = serde_json::json!({
            "what": "INT source + sink vs INT off through the worker runtime, net_ring0 <-> net_ring1, 32 frames in flight per port, burst 32, 562-byte IPv6/UDP frames",
            "off": if a.touch { "mac_swap -> xconnect" } else { "xconnect" },
            "int_inserted": "IntSource -> IntSink right before xconnect",
            "int": "IntSource (count 1/N, IOAM) -> IntSink -> xconnect, reports drained by the control thread",
            "machine": machine(),
            "core": a.core,
            "seconds_per_window": a.seconds,
            "rounds": a.rounds,
            "heap_allocations_in_windows": allocs,
            "sides": (0..k).map(|i| {
                let ratios = pair_ratios(&rates[i], &rates[0]);
                RingSide {
                    side: if sides[i] == 0 { "off".into() } else { format!("1/{}", sides[i]) },
                    mpps: mpps(&rates[i]),
                    median_mpps: median(&rates[i]) / 1e6,
                    median_ratio_to_off: (i > 0).then(|| median(&ratios)),
                    round_ratios_to_off: ratios,
                    reports_per_second: reports[i] as f64 / (a.rounds as f64 * a.seconds),
                }
            }).collect::<Vec<_>>(),
        });
        report::print_and_write(&out, a.json.as_deref()).expect("write json");
    }
}
