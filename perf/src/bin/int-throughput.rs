//! INT overhead on a forwarding path (issue 4; seed 003 lost 7.27 % at 1/100 in Click).
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

use clap::Parser;
use crossbeam_channel::{bounded, Receiver};
use peregrine_dataplane::runtime::{Action, Batch, Context, Pipeline, Publisher, Reasons, Stage};
use peregrine_dataplane::stages::l3fwd::{L3Fwd, NextHop, RouteTable};
use peregrine_dataplane::OwnedBuf;
use peregrine_int::namespace::NamespaceTable;
use peregrine_int::stages::{IntConfig, IntEvent, IntSink, IntSource};
use peregrine_perf::int_accuracy::stages::{frame, rule};
use peregrine_perf::int_accuracy::{Encoding, Strategy};
use peregrine_wire::ethernet::Address;
use serde::Serialize;
use std::alloc::{GlobalAlloc, Layout, System};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

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

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let n = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {n} logical CPUs available (shared with other builds)")
}

fn main() {
    let args = Args::parse();
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
            let a0 = ALLOCS.load(Ordering::Relaxed);
            let (pps, rep, b) = run_side(&mut sides[i], &mut pool, &tmpl, args.batches, epoch);
            allocs += ALLOCS.load(Ordering::Relaxed) - a0;
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
                    median_mpps: median(&mut rates[i].clone()) / 1e6,
                    median_ratio_to_off: (i > 0).then(|| median(&mut ratios[i].clone())),
                    min_ratio: (i > 0).then(|| q[0]),
                    max_ratio: (i > 0).then(|| q[q.len() - 1]),
                    reports: reports[i],
                    not_forwarded: bad[i],
                }
            })
            .collect(),
    };
    let json = serde_json::to_string_pretty(&out).expect("serialise");
    if let Some(p) = &args.json {
        std::fs::write(p, &json).expect("write json");
    }
    println!("{json}");
}
