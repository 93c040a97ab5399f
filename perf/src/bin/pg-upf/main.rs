//! UPF forwarding rate per core against `dpdk-testpmd --forward-mode=5tswap` on the same
//! DPDK vdevs and the same core, in one session (alternating rounds, paired ratios).
//!
//! Set-up (as `pg-throughput`): two `net_ring` ports (a ring PMD without arguments loops a
//! port's tx back to its own rx), `--inject` packets per port, one pinned forwarding core,
//! bursts of 32; rate = sum over ports of the `rte_eth_stats` rx-packet delta over the window.
//!
//! Ours: the real worker runtime with the real `Upf` stage (TS 29.244 section 5.2 packet
//! path: PDR lookup, QER gate + TrTCM MBR meter, URR counting, FAR decap / encap), its tables
//! compiled by `peregrine_rules::Compiler` from `synthetic(n)` sessions, every session with a
//! QER whose MBR is far above the offered rate (the meters run, nothing is dropped).
//! Because the UPF changes a packet's shape (uplink decapsulates, downlink encapsulates), a
//! looped packet would not be a valid input twice; a `feed` stage in front of `Upf` therefore
//! rewrites every received buffer with the next frame of the case (cycling over one frame per
//! session, so all `n` sessions' table entries and meters are touched). Its cost (a copy of
//! the whole frame) is counted on our side, so the ratio is conservative; the `feed` stage
//! alone (no UPF) is also measured and reported. Since round 18a the feed keeps one base
//! frame and, per session, only the bytes that differ from it (TEID, QFI, UE address,
//! checksums: 16-byte words, 48 B a session uplink and 32 B downlink, instead of a stored
//! 122-byte frame), as a NIC writes into a few recycled mbufs and pktgen-dpdk / TRex patch
//! one template per flow; the frames are byte-identical to the stored ones (`feed.rs`), and
//! `--feed stored` keeps the old feed.
//!
//! Baseline: testpmd `5tswap` (parses and swaps L2-L4 of every packet) on frames of the same
//! length (`set txpkts`, `start tx_first`). Drops are counted by reason; the run fails if our
//! side dropped anything, and heap allocations in our measurement window are counted.

mod burst;
mod compare;
mod feed;
mod n4;
mod stage;
mod tapdiag;

/// The N4 modes' compiler: the daemon's shard growth unless `--n4-fixed-shards`.
fn n4_compiler(a: &Args, c: Compiler) -> Compiler {
    if a.n4_fixed_shards {
        c
    } else {
        c.grow_shards_above(peregrine_rules::GROW_KEYS_PER_SHARD)
    }
}

use clap::Parser;
use feed::{FeedKind, Frames};
use peregrine_dataplane::classify::Classify;
use peregrine_dataplane::io::dpdk::DpdkBackend;
use peregrine_dataplane::runtime::{
    self, Batch, Context, Disposition, Pipeline, Publisher, Reasons, Stage,
};
use peregrine_dataplane::stages::steer::Steer;
use peregrine_dataplane::telemetry::fridge::matcher::Kind;
use peregrine_dataplane::telemetry::fridge::stage::{
    FridgeStage, SliceSpec, StageSpec, Vantage, WorkerPub,
};
use peregrine_dataplane::telemetry::fridge::{FridgeSpec, XMode};
use peregrine_dataplane::telemetry::kestrel::{tap_pair, EdgeTable, Layout as KestrelLayout};
use peregrine_dataplane::upf::{Upf, UpfConfig, UpfStats};
use peregrine_dataplane::PacketBuf;
use peregrine_perf::harness::net_ring::{self, drops_by_reason, Preloaded};
use peregrine_perf::harness::stats::{median, mpps, pair_ratios};
use peregrine_perf::harness::{child_failed, fail, report, run_self, Forwarding};
use peregrine_rules::static_sessions::{
    synthetic, to_sessions, N3Addresses, OuterMix, SyntheticParams,
};
use peregrine_rules::{Compiler, CompilerConfig};
use peregrine_testkit::alloc::CountingAlloc;
use peregrine_testkit::pfcp::requests as pfcp_msgs;
use peregrine_testkit::upf as upf_support;
use peregrine_wire::ethernet::Address as Mac;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counting in front of the daemon's own allocator (`control/src/main.rs`), so the N4 figures
/// are the daemon's.
#[global_allocator]
static GLOBAL: CountingAlloc<mimalloc::MiMalloc> = CountingAlloc::with(mimalloc::MiMalloc);

#[derive(Parser, Debug, Clone)]
#[command(
    about = "Peregrine UPF stage vs dpdk-testpmd 5tswap on net_ring, same core, same session"
)]
struct Args {
    /// Seconds measured per round (after a 1 s warm-up).
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    #[command(flatten)]
    fwd: Forwarding,
    /// Session counts to test.
    #[arg(long, value_delimiter = ',', default_values_t = [10_000usize, 100_000])]
    sessions: Vec<usize>,
    /// Inner IP packet sizes to test.
    #[arg(long, value_delimiter = ',', default_values_t = [64usize, 512])]
    sizes: Vec<usize>,
    /// Directions to test (ul, dl).
    #[arg(long, value_delimiter = ',', default_values_t = ["ul".to_string(), "dl".to_string()])]
    dirs: Vec<String>,
    /// Internal: run one measurement of our side (`--case dir,size,sessions` or
    /// `--case feed,...` for the feed stage alone) and print `pps allocs drops`.
    #[arg(long, hide = true)]
    case: Option<String>,
    #[arg(long, default_value = "perf/results/upf-forwarding.json")]
    out: String,
    /// Control-plane mode: establish this many sessions through the real N4 endpoint over
    /// UDP (pipelined), while one worker forwards uplink traffic of `--sessions[0]` static
    /// sessions; report establishments/s, publish latency, drops and memory per session.
    #[arg(long)]
    n4: Option<usize>,
    /// Session Establishment Requests in flight (N4 mode).
    #[arg(long, default_value_t = 256)]
    window: usize,
    #[arg(long, default_value = "perf/results/upf-n4.json")]
    n4_out: String,
    /// N4 mode: an earlier run's JSON whose establishments/s per tenth the plot shows beside
    /// this run's (labelled "before").
    #[arg(long)]
    n4_before: Option<String>,
    /// Redraw the per-tenth plot of `--n4-out` (with `--n4-before`) from the JSON alone.
    #[arg(long)]
    n4_replot: bool,
    /// In-process probe: what one N4 burst of 128 establishments costs the N4 thread, phase
    /// by phase, at each tenth of a table of this many sessions (no UDP, no worker).
    #[arg(long)]
    n4_burst: Option<usize>,
    /// Bursts measured at each tenth (`--n4-burst`).
    #[arg(long, default_value_t = 100)]
    n4_burst_count: usize,
    /// Checkpoints measured (`--n4-burst`): the last this many tenths (10: every tenth).
    #[arg(long, default_value_t = 10)]
    n4_burst_points: usize,
    /// Seconds to wait before each checkpoint's bursts (`--n4-burst`), for a profiler to
    /// attach.
    #[arg(long, default_value_t = 0.0)]
    n4_burst_pause: f64,
    /// N4 modes: keep the shard count the capacity gives (the compiler before the fourth
    /// round) instead of letting it follow the sessions (`Compiler::grow_shards_above`), for
    /// A/B runs.
    #[arg(long)]
    n4_fixed_shards: bool,

    /// Fridge mode: per case, alternating rounds of the UPF alone and the UPF followed by the
    /// fridge stage (`fridge_spec`); paired ratios to `--fridge-out` (goal >= 0.9).
    #[arg(long)]
    fridge: bool,
    #[arg(long, default_value = "perf/results/upf-fridge.json")]
    fridge_out: String,
    /// Worker-scaling mode: the daemon's UPF pipeline (classify, steer, UPF) with this many
    /// workers (pinned to cores 0..N, a queue pair per worker on each port, flow steering
    /// handing packets to the UE's worker) against the same pipeline with one worker
    /// (classify, UPF) on `--core`, alternating rounds; reports the rate ratio and the
    /// fraction of packets handed off.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    #[arg(long, default_value = "perf/results/upf-workers.json")]
    workers_out: String,
    /// Internal (child runs): use the daemon's pipeline (classify first) even with one
    /// worker.
    #[arg(long, hide = true)]
    daemon_pipeline: bool,
    /// Internal (child runs): attach the Kestrel tap (8 QIDs x d=3 x w=512 sketches with
    /// the PM counters, 1 s windows) to both ports.
    #[arg(long, hide = true)]
    kestrel: bool,
    /// Kestrel mode: for each case, the UPF with the Kestrel tap against the UPF alone,
    /// alternating rounds; reports the paired rate ratios (goal >= 0.9).
    #[arg(long)]
    kestrel_compare: bool,
    #[arg(long, default_value = "perf/results/kestrel-upf.json")]
    kestrel_out: String,
    /// Worker-scaling mode without the steer stage: each worker forwards what arrives on
    /// its own queues (no hand-off), to separate the hand-off's cost from the cost of
    /// running N busy workers on the machine.
    #[arg(long)]
    no_steer: bool,
    /// Stage mode: the Upf stage alone in this process (`dir,size,sessions`), no DPDK, for
    /// ns/packet and instruction profiles (see `stage.rs`).
    #[arg(long)]
    stage: Option<String>,
    /// Batches of 32 packets in stage mode.
    #[arg(long, default_value_t = 20_000)]
    batches: usize,
    /// Stage mode: alternate the batches' rx port between the two ports, as the forwarding
    /// modes receive them (each port's looped packets in turn), instead of one fixed port.
    #[arg(long)]
    alternate_rx: bool,
    /// Where the feed's frames come from: `patched` (one base frame plus, per session, the
    /// 16-byte words that hold its differing bytes, 48 / 32 B a session uplink / downlink) or
    /// `stored` (one stored frame per session, as before round 18a); the frames are
    /// byte-identical (`feed.rs`). Forwarding, `--case`, `--stage` and `--n4` modes.
    #[arg(long, value_enum, default_value_t = FeedKind::Patched)]
    feed: FeedKind,
    /// How the sessions' uplink (local) TEIDs are numbered: `upf` as the UPF's own F-TEID
    /// CHOOSE allocator hands them out (1, 2, 3, ...: paged, `upf::pages`), or `smf` as an
    /// SMF that picks them itself at random would (the synthetic sessions' keyed 24-bit
    /// permutation, `0x01xxxxxx`: looked up in the hash maps). The `--n4` modes' static
    /// sessions take `smf` (their node allocates from 1 for its own sessions): `--teids upf`
    /// is refused there. Default `upf`.
    #[arg(long, value_enum)]
    teids: Option<Teids>,
    /// The order the feed visits the sessions in: `session` (establishment order: the
    /// sessions' meter, usage and paged TEID slots are then read in address order, which the
    /// hardware prefetcher follows) or `shuffled` (a fixed random permutation, seed 1, as
    /// traffic from many UEs arrives: every session's state is a random read). Default
    /// `session`; the `--n4` modes refuse `shuffled`.
    #[arg(long, value_enum)]
    order: Option<Order>,
}

/// `--order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Order {
    Session,
    Shuffled,
}

/// `--order` of this run, set once by `main`.
static ORDER: std::sync::OnceLock<Order> = std::sync::OnceLock::new();

/// `--teids`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Teids {
    Upf,
    Smf,
}

/// `--teids` of this run, set once by `main` (the session lists are built in many places).
static TEIDS: std::sync::OnceLock<Teids> = std::sync::OnceLock::new();

/// Port MACs the stage answers to (frames are rewritten to the rx port's).
const PORT_MACS: [Mac; 2] = [upf_support::N3_MAC, upf_support::N6_MAC];
/// Headroom the feed restores before writing a frame (room for downlink encapsulation).
const HEADROOM: usize = 128;
/// MBR of every QER: far above what one core can offer, so the meters run but never drop.
const MBR_KBPS: u64 = 400_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Ul,
    Dl,
}

/// One frame per synthetic session for the case, in session order (or `--order shuffled`).
fn frames(dir: Dir, size: usize, n: usize) -> Vec<Vec<u8>> {
    let server = upf_support::server_v4();
    let mut sessions = params_sessions(n);
    if ORDER.get().copied().unwrap_or(Order::Session) == Order::Shuffled {
        // Fisher-Yates with the workspace's seeded generator: the same order every run.
        let mut rng = peregrine_testkit::rng::seeded(1);
        for i in (1..sessions.len()).rev() {
            let j = peregrine_testkit::rng::below(&mut rng, i as u64 + 1) as usize;
            sessions.swap(i, j);
        }
    }
    sessions
        .iter()
        .map(|s| {
            let ue = s.ue_ipv4.expect("synthetic UEs have IPv4");
            match dir {
                Dir::Ul => upf_support::ul_frame(
                    false,
                    s.ul_teid,
                    Some(s.qfi),
                    &upf_support::udp4(ue, server, 53, size - 28),
                ),
                Dir::Dl => upf_support::dl_frame(&upf_support::udp4(server, ue, 80, size - 28)),
            }
        })
        .collect()
}

fn params_sessions(n: usize) -> Vec<peregrine_rules::static_sessions::StaticSession> {
    let mut v = synthetic(
        n,
        &SyntheticParams {
            // One outer family, so every frame of a case has testpmd's single frame length.
            outer: OuterMix::V4,
            mbr_kbps: Some(MBR_KBPS),
            // A pool with room for 2^24 /64s (the default /48 holds 65,536; beyond that the
            // numbering carries into the prefix, distinct but outside the pool).
            ue_pool_v6: std::net::Ipv6Addr::new(0x2001, 0xdb8, 0x4500, 0, 0, 0, 0, 0),
            ..SyntheticParams::default()
        },
    );
    if TEIDS.get().copied().unwrap_or(Teids::Upf) == Teids::Upf {
        // The node's CHOOSE allocator starts at 1 and hands TEIDs out in turn.
        for (i, s) in v.iter_mut().enumerate() {
            s.ul_teid = u32::try_from(i + 1).expect("at most 2^24 sessions");
        }
    }
    v
}

fn compiled(n: usize) -> (Publisher<peregrine_dataplane::upf::UpfTables>, u32) {
    let slots = u32::try_from(4 * n).expect("slots");
    (Publisher::new(compiler(n, slots, 0).build()), slots)
}

/// A compiler holding `n` synthetic sessions (their UP F-SEIDs OR-ed with `seid_bits`), with
/// room for `slots` meters and URRs.
fn compiler(n: usize, slots: u32, seid_bits: u64) -> Compiler {
    let mut c = Compiler::new(CompilerConfig {
        local_v4: vec![upf_support::upf_v4()],
        local_v6: vec![upf_support::upf_v6()],
        max_meter_slots: slots,
        max_urr_slots: slots,
        qos: peregrine_dataplane::qos::QosPolicies::new(
            peregrine_dataplane::qos::QerPolicy::legacy_policing(),
        ),
    });
    let n3 = N3Addresses {
        v4: Some(upf_support::upf_v4()),
        v6: Some(upf_support::upf_v6()),
    };
    for mut s in to_sessions(&params_sessions(n), n3).expect("synthetic sessions") {
        s.up_seid |= seid_bits;
        c.upsert(&s).expect("compiles");
    }
    c
}

/// The traffic source inside the worker: rewrites each received buffer with the next
/// session's frame (dst MAC set to the rx port's), restoring the headroom first. The frame
/// is written whole: the stored frame, or the base frame and the session's patch
/// (`--feed`, `feed.rs`).
struct Feed {
    frames: Frames,
    next: usize,
    bad: peregrine_dataplane::runtime::DropReason,
}

impl Feed {
    /// The feed of worker `w`: its own copy of the frames, starting `w` frames in (workers
    /// do not walk the sessions in lock step).
    fn new(frames: &Frames, w: usize, r: &mut Reasons) -> Self {
        Feed {
            frames: frames.clone(),
            next: w % frames.count(),
            bad: r.register("feed_refill_failed"),
        }
    }
}

/// The stage's configuration: `slots` meters, the N6 address of the test topology.
fn upf_config(slots: u32) -> UpfConfig {
    UpfConfig {
        max_meter_slots: slots,
        n6_v4: Some(upf_support::n6_v4()),
        ..UpfConfig::default()
    }
}

impl<B: PacketBuf> Stage<B> for Feed {
    fn name(&self) -> &'static str {
        "feed"
    }
    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        let mac = PORT_MACS[usize::from(batch.rx_port) & 1];
        let Feed { frames, next, bad } = self;
        let n = frames.count();
        frames.with_fill(FeedBatch {
            batch,
            next,
            n,
            bad: *bad,
            mac,
        });
    }
}

/// One batch of [`Feed`] with the feed's writer as a type (`feed::WithFill`).
struct FeedBatch<'a, B: PacketBuf> {
    batch: &'a mut Batch<B>,
    next: &'a mut usize,
    n: usize,
    bad: peregrine_dataplane::runtime::DropReason,
    mac: Mac,
}

impl<B: PacketBuf> feed::WithFill for FeedBatch<'_, B> {
    fn run<F: feed::Fill>(self, f: &F) {
        let FeedBatch {
            batch,
            next,
            n,
            bad,
            mac,
        } = self;
        // `decide_each`: a batch the feed leaves wholly `Continue` stays uniform, as a batch
        // fresh from rx is when the UPF is the first stage (`for_each_active` wrote the
        // per-packet array, and the UPF then read it, ~5 instructions a packet).
        batch.decide_each(
            |b| match feed::write_next(f, next, n, b, Some(&mac.0), refill) {
                Ok(()) => Disposition::CONTINUE,
                Err(_) => Disposition::drop_as(bad),
            },
        );
    }
}

fn refill<B: PacketBuf>(b: &mut B, f: &[u8]) -> Result<(), peregrine_dataplane::buffer::BufError> {
    let h = b.headroom();
    if h > HEADROOM {
        b.prepend(h - HEADROOM)?;
    } else if h < HEADROOM {
        let k = HEADROOM - h;
        if b.len() < k {
            b.append(k - b.len())?;
        }
        b.adj(k)?;
    }
    let len = b.len();
    if len < f.len() {
        b.append(f.len() - len)?;
    } else {
        b.trim(len - f.len())?;
    }
    b.data_mut().copy_from_slice(f);
    Ok(())
}

/// Forwards port 0 <-> port 1 unchanged (after the feed): the feed's own cost.
struct Cross;
impl<B: PacketBuf> Stage<B> for Cross {
    fn name(&self) -> &'static str {
        "cross"
    }
    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        let out = 1 - (batch.rx_port & 1);
        batch.set_active(Disposition::tx(out));
    }
}

/// What one child run measured.
struct Measured {
    pps: f64,
    allocs: u64,
    drops: Vec<(String, u64)>,
    /// Packets handed to another worker, and packets received from the ports, over the
    /// whole run (warm-up included).
    handed_off: u64,
    rx: u64,
}

fn parse_case(s: &str) -> (Option<Dir>, usize, usize) {
    let v: Vec<&str> = s.split(',').collect();
    let dir = match v[0]
        .trim_end_matches("+fridge")
        .trim_end_matches("+kestrel")
        .trim_end_matches("+tapnull")
        .trim_end_matches("+cms")
    {
        "ul" => Some(Dir::Ul),
        "dl" => Some(Dir::Dl),
        _ => None,
    };
    (
        dir,
        v[1].parse().expect("size"),
        v[2].parse().expect("sessions"),
    )
}

/// The bench fridge's sampling probability: 1/16, or `PG_UPF_FRIDGE_P` when set; a value
/// that is not a probability in (0, 1] is refused (exit 2), not replaced by the default.
fn fridge_p() -> f64 {
    match std::env::var("PG_UPF_FRIDGE_P") {
        Err(std::env::VarError::NotPresent) => 1.0 / 16.0,
        Ok(v) => match v.parse::<f64>() {
            Ok(p) if p > 0.0 && p <= 1.0 => p,
            _ => {
                eprintln!("pg-upf: PG_UPF_FRIDGE_P={v:?} is not a probability in (0, 1]");
                std::process::exit(2)
            }
        },
        Err(e) => {
            eprintln!("pg-upf: PG_UPF_FRIDGE_P: {e}");
            std::process::exit(2)
        }
    }
}

/// The fridge slices of the `+fridge` cases: the uplink frames are UDP to port 53 with a
/// zeroed payload, i.e. DNS queries (QR = 0), so the `dns` slice inserts with p = 1/16 and
/// looks up nothing; a `tcp_handshake` slice sees no TCP. Every packet is matched.
/// `PG_UPF_FRIDGE_P` replaces the 1/16 (read once here, in every mode and child): what the
/// entering requests cost, by comparison with a `p` near 0 (perf/results/fridge-bench.md,
/// round 11). Not for figures of record.
fn fridge_spec() -> StageSpec {
    let slice = |name: &str, kind| SliceSpec {
        name: name.into(),
        kind,
        vantage: Vantage::N6,
        qfi: vec![],
        ports: vec![],
        peers: vec![],
        fridges: vec![FridgeSpec {
            m: 4096,
            p: fridge_p(),
        }],
    };
    StageSpec {
        slices: vec![slice("dns", Kind::Dns), slice("hs", Kind::TcpHandshake)],
        mode: XMode::Insertions,
        window_ns: 1_000_000_000,
        seed: 1,
        uplink_ports: vec![],
    }
}

/// One measurement of our side in this process. `dir == None` runs the feed alone.
fn ours(backend: DpdkBackend, a: &Args, case: &str) -> Measured {
    let (dir, size, n) = parse_case(case);
    let with_fridge = case
        .split(',')
        .next()
        .is_some_and(|d| d.ends_with("+fridge"));
    let fridge_spec = fridge_spec();
    let fr = frames(dir.unwrap_or(Dir::Ul), size, n);
    let (tables, slots) = compiled(n);
    let stats = Arc::new(UpfStats::new(slots));
    let routes = Publisher::new(upf_support::routes());
    let ucfg = upf_config(slots);
    let workers = a.workers.max(1);
    let mut pre = Preloaded::inject_workers(backend, &fr, a.fwd.inject, workers);
    let fr = Frames::new(fr, a.feed);
    let cfg = if workers == 1 {
        net_ring::one_worker(a.fwd.core, a.fwd.burst, false)
    } else {
        net_ring::workers_on(&(0..workers).collect::<Vec<_>>(), a.fwd.burst)
    };
    // The daemon's order (control/src/daemon.rs): classify, steer with 2+ workers, the UPF
    // reading the record.
    let daemon = a.daemon_pipeline || workers > 1;
    // Kestrel: the banks' control ends are kept but not polled (the aggregator allocates,
    // and allocations are counted process-wide): after its two spares a tap keeps filling
    // its bank, which costs the same per packet.
    let edge_table = Publisher::new(EdgeTable::default());
    let kestrel_ends = std::sync::Mutex::new(Vec::new());
    let with_kestrel = |p: Pipeline<_>| {
        if !a.kestrel {
            return p;
        }
        let mut p = p;
        for port in 0..2u16 {
            let mut ends = kestrel_ends.lock().expect("not poisoned");
            let (tap, e) = tap_pair(
                ends.len() as u32,
                &KestrelLayout::paper(),
                1_000_000_000,
                edge_table.reader(),
                None,
            );
            ends.push(e);
            p = p.with_tap(port, Box::new(tap));
        }
        p
    };
    let run = runtime::start(
        &mut pre,
        &|w: usize, r: &mut Reasons| {
            let mut stages: Vec<Box<dyn Stage<_>>> = vec![Box::new(Feed::new(&fr, w, r))];
            let Some(_) = dir else {
                stages.push(Box::new(Cross));
                return Pipeline::new(stages);
            };
            let upf = Upf::new(
                tables.reader(),
                routes.reader(),
                PORT_MACS.to_vec(),
                ucfg.clone(),
                stats.clone(),
                r,
            );
            // As the daemon places the fridge: after the main stage, on every packet sent.
            let fridge = |w: usize| -> Box<dyn Stage<_>> {
                let publ = Arc::new(WorkerPub::new(&fridge_spec));
                Box::new(FridgeStage::new(&fridge_spec, w, publ).expect("valid spec"))
            };
            if !daemon {
                stages.push(Box::new(upf));
                if with_fridge {
                    stages.push(fridge(w));
                }
                return with_kestrel(Pipeline::new(stages));
            }
            stages.push(Box::new(Classify::new()));
            if workers > 1 && !a.no_steer {
                let resume_at = u8::try_from(stages.len() + 1).expect("few stages");
                stages.push(Box::new(Steer::new(workers, resume_at)));
            }
            stages.push(Box::new(upf.after_classifier()));
            if with_fridge {
                stages.push(fridge(w));
            }
            with_kestrel(Pipeline::new(stages))
        },
        &cfg,
    )
    .expect("start worker");
    let (pps, allocs) = net_ring::measure(&pre, &GLOBAL, a.seconds);
    run.request_stop();
    let names: Vec<&'static str> = run.reasons().names().to_vec();
    let c = run.join();
    Measured {
        pps,
        allocs,
        drops: drops_by_reason(&names, &c.drops),
        handed_off: c.handed_off,
        rx: c.rx_pkts.iter().sum(),
    }
}

/// One round of our side in a fresh process (vdev ports cannot be re-probed in a process).
fn ours_child(a: &Args, case: &str) -> Result<Measured, String> {
    ours_child_with(a, case, 1, false)
}

/// [`ours_child`] with `workers` workers, and the daemon's pipeline when `daemon`.
fn ours_child_with(a: &Args, case: &str, workers: usize, daemon: bool) -> Result<Measured, String> {
    ours_child_opts(a, case, workers, daemon, false)
}

/// [`ours_child_with`], with the Kestrel tap when `kestrel`.
fn ours_child_opts(
    a: &Args,
    case: &str,
    workers: usize,
    daemon: bool,
    kestrel: bool,
) -> Result<Measured, String> {
    let mut args: Vec<String> = ["--case".to_string(), case.to_string()]
        .into_iter()
        .chain(a.fwd.child_args(a.seconds))
        .chain([
            "--workers".to_string(),
            workers.to_string(),
            "--feed".to_string(),
            feed_name(a.feed).to_string(),
            "--order".to_string(),
            match ORDER.get() {
                Some(Order::Shuffled) => "shuffled",
                _ => "session",
            }
            .to_string(),
            "--teids".to_string(),
            match TEIDS.get() {
                Some(Teids::Smf) => "smf",
                _ => "upf",
            }
            .to_string(),
        ])
        .collect();
    if daemon {
        args.push("--daemon-pipeline".into());
    }
    if kestrel {
        args.push("--kestrel".into());
    }
    if a.no_steer {
        args.push("--no-steer".into());
    }
    let out = run_self(&args)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace();
    let pps = it.next().and_then(|x| x.parse().ok());
    let allocs = it.next().and_then(|x| x.parse().ok());
    let handed_off = it.next().and_then(|x| x.parse().ok());
    let rx = it.next().and_then(|x| x.parse().ok());
    let drops = it
        .filter_map(|d| {
            let (n, c) = d.split_once('=')?;
            Some((n.to_string(), c.parse().ok()?))
        })
        .collect();
    match (pps, allocs, handed_off, rx) {
        (Some(pps), Some(allocs), Some(handed_off), Some(rx)) if out.status.success() => {
            Ok(Measured {
                pps,
                allocs,
                drops,
                handed_off,
                rx,
            })
        }
        _ => Err(child_failed("our child run", &out)),
    }
}

/// `--feed`'s value for `kind`.
fn feed_name(kind: FeedKind) -> &'static str {
    match kind {
        FeedKind::Stored => "stored",
        FeedKind::Patched => "patched",
    }
}

/// testpmd 5tswap on frames of `frame_len` bytes: start tx_first, warm up, two
/// `show port stats all` a window apart; the second call's Rx-pps covers that window.
fn testpmd(a: &Args, frame_len: usize, round: usize) -> Result<f64, String> {
    // tx_first sends `burst` packets per port built by txonly (Ether/IPv4/UDP).
    let setup = format!("set txpkts {frame_len}\n");
    a.fwd.testpmd("5tswap", "pg-upf", round, setup, a.seconds)
}

/// The backend of a child run (more memory than testpmd's: 100k sessions' tables).
fn child_backend(workers: usize) -> DpdkBackend {
    net_ring::backend_for(1024, workers.max(1))
}

fn main() {
    let a = Args::parse();
    // The N4 modes' node hands out CHOOSE TEIDs from 1 itself: their static sessions (the
    // traffic) keep theirs out of its way.
    let n4 = a.n4.is_some() || a.n4_burst.is_some();
    if n4 && a.teids == Some(Teids::Upf) {
        fail("--teids upf: the --n4 modes' node hands out TEIDs from 1 to its own sessions; their static sessions take --teids smf");
    }
    if n4 && a.order == Some(Order::Shuffled) {
        fail("--order shuffled: the --n4 modes feed their static sessions in session order only");
    }
    let teids = a.teids.unwrap_or(if n4 { Teids::Smf } else { Teids::Upf });
    TEIDS.set(teids).expect("set once");
    ORDER
        .set(a.order.unwrap_or(Order::Session))
        .expect("set once");
    if let Some(case) = &a.stage {
        stage::stage_mode(case, a.batches, a.alternate_rx, a.feed);
        return;
    }
    if a.n4_replot {
        n4::replot(&a);
        return;
    }
    if let Some(n) = a.n4_burst {
        burst::burst_mode(&a, n);
        return;
    }
    if let Some(n) = a.n4 {
        n4::n4_mode(&a, n);
        return;
    }
    if a.fridge && a.case.is_none() {
        compare::fridge_mode(&a);
        return;
    }
    if let Some(case) = &a.case {
        let m = ours(child_backend(a.workers), &a, case);
        let drops: Vec<String> = m.drops.iter().map(|(n, d)| format!("{n}={d}")).collect();
        println!(
            "{} {} {} {} {}",
            m.pps,
            m.allocs,
            m.handed_off,
            m.rx,
            drops.join(" ")
        );
        return;
    }
    if a.no_steer && a.workers < 2 && a.case.is_none() {
        fail("--no-steer compares workers without hand-off: it needs --workers 2 or more");
    }
    if a.workers > 1 {
        compare::workers_mode(&a);
        return;
    }
    if a.kestrel_compare {
        compare::kestrel_mode(&a);
        return;
    }
    let mut cases = vec![];
    let mut all_ok = true;
    for n in &a.sessions {
        for dir in &a.dirs {
            for size in &a.sizes {
                let d = if dir == "ul" { Dir::Ul } else { Dir::Dl };
                let frame_len = frames(d, *size, 1)[0].len();
                let case = format!("{dir},{size},{n}");
                let (mut o, mut t, mut f, mut allocs) = (vec![], vec![], vec![], 0u64);
                let mut drops: Vec<(String, u64)> = vec![];
                for round in 0..a.fwd.rounds {
                    let m = ours_child(&a, &case).unwrap_or_else(|e| fail(&e));
                    let p = testpmd(&a, frame_len, round).unwrap_or_else(|e| fail(&e));
                    let fe =
                        ours_child(&a, &format!("feed,{size},{n}")).unwrap_or_else(|e| fail(&e));
                    eprintln!(
                        "{case} round {round}: upf {:.2} Mpps (allocs {}, drops {:?}) | testpmd 5tswap {:.2} Mpps | feed alone {:.2} Mpps",
                        m.pps / 1e6, m.allocs, m.drops, p / 1e6, fe.pps / 1e6
                    );
                    allocs += m.allocs;
                    drops.extend(m.drops);
                    o.push(m.pps);
                    t.push(p);
                    f.push(fe.pps);
                }
                let pairs = pair_ratios(&o, &t);
                all_ok &= drops.is_empty() && allocs == 0;
                cases.push(serde_json::json!({
                    "direction": dir,
                    "inner_bytes": size,
                    "frame_bytes": frame_len,
                    "sessions": n,
                    "ours_mpps": mpps(&o),
                    "testpmd_5tswap_mpps": mpps(&t),
                    "feed_alone_mpps": mpps(&f),
                    "ours_median_mpps": median(&o) / 1e6,
                    "testpmd_median_mpps": median(&t) / 1e6,
                    "ratio_of_medians": median(&o) / median(&t),
                    "round_pair_ratios": pairs,
                    "ratio_median_of_round_pairs": median(&pairs),
                    "drops": drops,
                    "heap_allocations_in_measurement_windows": allocs,
                }));
            }
        }
    }
    let result = serde_json::json!({
        "what": "UPF forwarding rate per core vs dpdk-testpmd 5tswap, net_ring0 <-> net_ring1, same core, alternating rounds",
        "ours": "peregrine worker runtime: rx -> feed (rewrites the buffer with the next session's frame, written whole: with --feed patched a base frame and the session's differing bytes, byte-identical to the stored frames of --feed stored) -> Upf stage (tables compiled from synthetic() sessions, QER with MBR on every session) -> tx",
        "baseline": "dpdk-testpmd --forward-mode=5tswap, one forwarding core, txonly frames of the same length",
        "feed": feed_name(a.feed),
        "teids": format!("{:?}", TEIDS.get().copied().unwrap_or(Teids::Upf)).to_lowercase(),
        "order": format!("{:?}", ORDER.get().copied().unwrap_or(Order::Session)).to_lowercase(),
        "inject_per_port": a.fwd.inject,
        "burst": a.fwd.burst,
        "core": a.fwd.core,
        "seconds_per_round": a.seconds,
        "rounds": a.fwd.rounds,
        "goal_ratio": 0.5,
        "cases": cases,
        "all_forwarded_zero_allocations": all_ok,
        "machine": report::machine(),
        "dpdk": "Debian libdpdk 22.11",
    });
    if let Err(e) = report::print_and_write(&result, Some(a.out.as_ref())) {
        eprintln!("{e}");
    }
}
