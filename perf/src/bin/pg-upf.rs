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
//! rewrites every received buffer with the next pre-generated frame of the case (cycling over
//! one frame per session, so all `n` sessions' table entries and meters are touched). Its cost
//! (a copy of the frame) is counted on our side, so the ratio is conservative; the `feed`
//! stage alone (no UPF) is also measured and reported.
//!
//! Baseline: testpmd `5tswap` (parses and swaps L2-L4 of every packet) on frames of the same
//! length (`set txpkts`, `start tx_first`). Drops are counted by reason; the run fails if our
//! side dropped anything, and heap allocations in our measurement window are counted.

use clap::Parser;
use peregrine_dataplane::classify::Classify;
use peregrine_dataplane::io::dpdk::DpdkBackend;
use peregrine_dataplane::runtime::OnEgress;
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
use peregrine_perf::harness::testpmd::Testpmd;
use peregrine_perf::harness::{child_failed, fail, report, run_self};
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

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc::new();

#[derive(Parser, Debug, Clone)]
#[command(
    about = "Peregrine UPF stage vs dpdk-testpmd 5tswap on net_ring, same core, same session"
)]
struct Args {
    /// Seconds measured per round (after a 1 s warm-up).
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Rounds per side and case (alternating).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    #[arg(long, default_value_t = 1)]
    core: usize,
    #[arg(long, default_value_t = 32)]
    burst: usize,
    /// Packets injected per port before forwarding starts (testpmd's tx_first sends one burst).
    #[arg(long, default_value_t = 32)]
    inject: usize,
    #[arg(long, default_value = "dpdk-testpmd")]
    testpmd: String,
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
}

/// `--fridge`: UPF + fridge against the UPF alone, alternating rounds in one session.
fn fridge_mode(a: &Args) {
    let mut cases = vec![];
    for n in &a.sessions {
        for dir in &a.dirs {
            for size in &a.sizes {
                let case = format!("{dir},{size},{n}");
                let with = format!("{dir}+fridge,{size},{n}");
                let (mut base, mut fr, mut allocs) = (vec![], vec![], 0u64);
                let mut drops: Vec<(String, u64)> = vec![];
                for round in 0..a.rounds {
                    let m = ours_child(a, &case).unwrap_or_else(|e| fail(&e));
                    let f = ours_child(a, &with).unwrap_or_else(|e| fail(&e));
                    eprintln!(
                        "{case} round {round}: upf {:.2} Mpps | upf + fridge {:.2} Mpps (allocs {}, drops {:?})",
                        m.pps / 1e6,
                        f.pps / 1e6,
                        f.allocs,
                        f.drops
                    );
                    allocs += m.allocs + f.allocs;
                    drops.extend(m.drops.into_iter().chain(f.drops));
                    base.push(m.pps);
                    fr.push(f.pps);
                }
                let pairs = pair_ratios(&fr, &base);
                cases.push(serde_json::json!({
                    "direction": dir,
                    "inner_bytes": size,
                    "sessions": n,
                    "upf_mpps": mpps(&base),
                    "upf_fridge_mpps": mpps(&fr),
                    "round_pair_ratios": pairs,
                    "ratio_median_of_round_pairs": median(&pairs),
                    "drops": drops,
                    "heap_allocations_in_measurement_windows": allocs,
                }));
            }
        }
    }
    let result = serde_json::json!({
        "what": "UPF + fridge stage vs UPF alone, net_ring0 <-> net_ring1, one core, alternating rounds",
        "fridge": "after the Upf stage on every packet sent (OnEgress over both ports): slices dns (N6, M=4096, p=1/16; the uplink frames are DNS queries to port 53) and tcp_handshake (no TCP in the traffic)",
        "goal_ratio": 0.9,
        "rounds": a.rounds,
        "seconds_per_round": a.seconds,
        "cases": cases,
        "machine": format!(
            "{} cores (shared with other engineers' builds), {}",
            report::cores(),
            report::cpu_model().unwrap_or_default()
        ),
    });
    let text = serde_json::to_string_pretty(&result).expect("json");
    std::fs::write(&a.fridge_out, &text)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", a.fridge_out)));
    println!("{text}");
}

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

/// One frame per synthetic session for the case, in session order, and the compiled tables.
fn frames(dir: Dir, size: usize, n: usize) -> Vec<Vec<u8>> {
    let server = upf_support::server_v4();
    params_sessions(n)
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
    synthetic(
        n,
        &SyntheticParams {
            // One outer family, so every frame of a case has testpmd's single frame length.
            outer: OuterMix::V4,
            mbr_kbps: Some(MBR_KBPS),
            // The default IPv6 pool (2001:db8:45::/48) has bits set where UE indexes >= 2^16
            // are OR-ed in, so 100k UEs would collide; this pool keeps bits 64..88 zero.
            ue_pool_v6: std::net::Ipv6Addr::new(0x2001, 0xdb8, 0x4500, 0, 0, 0, 0, 0),
            ..SyntheticParams::default()
        },
    )
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
/// pre-generated frame (dst MAC set to the rx port's), restoring the headroom first.
struct Feed {
    frames: Vec<Vec<u8>>,
    next: usize,
    bad: peregrine_dataplane::runtime::DropReason,
}

impl Feed {
    /// The feed of worker `w`: its own copy of the frames, starting `w` frames in (workers
    /// do not walk the sessions in lock step).
    fn new(frames: &[Vec<u8>], w: usize, r: &mut Reasons) -> Self {
        Feed {
            frames: frames.to_vec(),
            next: w % frames.len(),
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
        batch.for_each_active(|b| {
            let f = &frames[*next];
            *next = if *next + 1 == frames.len() {
                0
            } else {
                *next + 1
            };
            if refill(b, f).is_err() {
                return Disposition::drop_as(*bad);
            }
            b.data_mut()[..6].copy_from_slice(&mac.0);
            Disposition::CONTINUE
        });
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
    let dir = match v[0].trim_end_matches("+fridge") {
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

/// The fridge slices of the `+fridge` cases: the uplink frames are UDP to port 53 with a
/// zeroed payload, i.e. DNS queries (QR = 0), so the `dns` slice inserts with p = 1/16 and
/// looks up nothing; a `tcp_handshake` slice sees no TCP. Every packet is matched.
fn fridge_spec() -> StageSpec {
    let slice = |name: &str, kind| SliceSpec {
        name: name.into(),
        kind,
        vantage: Vantage::N6,
        qfi: vec![],
        ports: vec![],
        fridges: vec![FridgeSpec {
            m: 4096,
            p: 1.0 / 16.0,
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
    let mut pre = Preloaded::inject_workers(backend, &fr, a.inject, workers);
    let cfg = if workers == 1 {
        net_ring::one_worker(a.core, a.burst, false)
    } else {
        net_ring::workers_on(&(0..workers).collect::<Vec<_>>(), a.burst)
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
                let st = FridgeStage::new(&fridge_spec, w, publ).expect("valid spec");
                Box::new(OnEgress::new(&[0, 1], st))
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
    let mut args: Vec<String> = [
        "--case",
        case,
        "--seconds",
        &a.seconds.to_string(),
        "--core",
        &a.core.to_string(),
        "--burst",
        &a.burst.to_string(),
        "--inject",
        &a.inject.to_string(),
        "--workers",
        &workers.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
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

/// testpmd 5tswap on frames of `frame_len` bytes: start tx_first, warm up, two
/// `show port stats all` a window apart; the second call's Rx-pps covers that window.
fn testpmd(a: &Args, frame_len: usize, round: usize) -> Result<f64, String> {
    Testpmd {
        program: &a.testpmd,
        core: a.core,
        burst: a.burst,
        forward_mode: "5tswap",
        file_prefix: format!("pg-upf-{}-{round}", std::process::id()),
        // tx_first sends `burst` packets per port built by txonly (Ether/IPv4/UDP).
        setup: format!("set txpkts {frame_len}\n"),
        seconds: a.seconds,
    }
    .run()
}

/// The backend of a child run (more memory than testpmd's: 100k sessions' tables).
fn child_backend(workers: usize) -> DpdkBackend {
    net_ring::backend_for(1024, workers.max(1))
}

fn main() {
    let a = Args::parse();
    if let Some(n) = a.n4 {
        n4_mode(&a, n);
        return;
    }
    if a.fridge && a.case.is_none() {
        fridge_mode(&a);
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
    if a.workers > 1 {
        workers_mode(&a);
        return;
    }
    if a.kestrel_compare {
        kestrel_mode(&a);
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
                for round in 0..a.rounds {
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
        "ours": "peregrine worker runtime: rx -> feed (rewrites the buffer with the next pre-generated frame, one per session) -> Upf stage (tables compiled from synthetic() sessions, QER with MBR on every session) -> tx",
        "baseline": "dpdk-testpmd --forward-mode=5tswap, one forwarding core, txonly frames of the same length",
        "inject_per_port": a.inject,
        "burst": a.burst,
        "core": a.core,
        "seconds_per_round": a.seconds,
        "rounds": a.rounds,
        "goal_ratio": 0.5,
        "cases": cases,
        "all_forwarded_zero_allocations": all_ok,
        "machine": format!(
            "{} cores (shared with other engineers' builds), {}",
            report::cores(),
            report::cpu_model().unwrap_or_default()
        ),
        "dpdk": "Debian libdpdk 22.11",
    });
    if let Err(e) = report::print_and_write(&result, Some(a.out.as_ref())) {
        eprintln!("{e}");
    }
}

/// A Session Establishment Request for UE `k` of the load: UL PDR (F-TEID CHOOSE, the UPF
/// allocates), DL PDR on the UE's own IPv4 address, N6 and N3 FARs, a QER with MBR and a
/// volume URR (TS 29.244 section 7.5.2).
/// `--workers N`: the daemon's pipeline with N workers against one worker, alternating
/// rounds per case; see [`Args::workers`].
fn workers_mode(a: &Args) {
    let n = a.workers;
    let mut cases = vec![];
    let mut all_ok = true;
    for s in &a.sessions {
        for dir in &a.dirs {
            for size in &a.sizes {
                let case = format!("{dir},{size},{s}");
                let (mut one, mut many, mut frac) = (vec![], vec![], vec![]);
                let mut drops: Vec<(String, u64)> = vec![];
                let mut allocs = 0;
                for round in 0..a.rounds {
                    let run =
                        |w: usize| ours_child_with(a, &case, w, true).unwrap_or_else(|e| fail(&e));
                    let (m1, mn) = if round % 2 == 0 {
                        let m1 = run(1);
                        (m1, run(n))
                    } else {
                        let mn = run(n);
                        (run(1), mn)
                    };
                    let f = mn.handed_off as f64 / mn.rx.max(1) as f64;
                    eprintln!(
                        "{case} round {round}: 1 worker {:.2} Mpps | {n} workers {:.2} Mpps, {:.1} % handed off (drops {:?})",
                        m1.pps / 1e6,
                        mn.pps / 1e6,
                        100.0 * f,
                        mn.drops
                    );
                    allocs += m1.allocs + mn.allocs;
                    drops.extend(m1.drops);
                    drops.extend(mn.drops);
                    one.push(m1.pps);
                    many.push(mn.pps);
                    frac.push(f);
                }
                let pairs = pair_ratios(&many, &one);
                all_ok &= drops.is_empty() && allocs == 0;
                cases.push(serde_json::json!({
                    "direction": dir,
                    "inner_bytes": size,
                    "sessions": s,
                    "one_worker_mpps": mpps(&one),
                    "workers_mpps": mpps(&many),
                    "handed_off_fraction": frac,
                    "ratio_median_of_round_pairs": median(&pairs),
                    "round_pair_ratios": pairs,
                    "drops": drops,
                    "heap_allocations_in_measurement_windows": allocs,
                }));
            }
        }
    }
    let result = serde_json::json!({
        "what": format!("the daemon's UPF pipeline with {n} workers vs 1 worker, net_ring0/net_ring1, alternating rounds"),
        "ours": "rx -> feed (next pre-generated frame, one per session) -> classify -> steer (N workers: by UE, hand-off over SPSC rings) -> Upf (reads the record) -> tx; each worker polls and sends on its own queue of both ports (a net_ring queue loops back to itself)",
        "workers": n,
        "steer": !a.no_steer,
        "one_worker_core": a.core,
        "worker_cores": (0..n).collect::<Vec<_>>(),
        "burst": a.burst,
        "inject_per_port_per_worker": a.inject,
        "seconds_per_round": a.seconds,
        "rounds": a.rounds,
        "cases": cases,
        "all_forwarded_zero_allocations": all_ok,
        "machine": format!(
            "{} cores (shared with other engineers' builds; with 2 workers on 2 cores the EAL main thread, the measuring thread and everything else share them), {}",
            report::cores(),
            report::cpu_model().unwrap_or_default()
        ),
        "dpdk": "Debian libdpdk 22.11",
    });
    if let Err(e) = report::print_and_write(&result, Some(a.workers_out.as_ref())) {
        eprintln!("{e}");
    }
}

/// The `q` quantile of `v` (nearest rank; sorts `v`), 0 when empty.
fn quantile(v: &mut [u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

fn est_request(seq: u32, k: u32) -> Vec<u8> {
    use peregrine_pfcp::ie::{ie_type as t, FTeid, Ie, OuterHeaderRemoval, UeIpAddress};
    // A pool disjoint from the static synthetic sessions (10.45/16 onwards).
    let ue = std::net::Ipv4Addr::from(u32::from(std::net::Ipv4Addr::new(10, 128, 0, 0)) + k);
    let pdi_ul = pfcp_msgs::g(
        t::PDI,
        vec![
            Ie::SourceInterface(0),
            Ie::FTeid(FTeid::Choose {
                v4: true,
                v6: false,
                choose_id: Some(1),
            }),
            Ie::UeIpAddress(UeIpAddress {
                ipv4: Some(ue),
                ..Default::default()
            }),
            Ie::Qfi(9),
        ],
    );
    let ul = pfcp_msgs::g(
        t::CREATE_PDR,
        vec![
            Ie::PdrId(1),
            Ie::Precedence(200),
            Ie::Grouped(pdi_ul),
            Ie::OuterHeaderRemoval(OuterHeaderRemoval {
                description: 0,
                ext_header_deletion: None,
            }),
            Ie::FarId(1),
            Ie::UrrId(1),
            Ie::QerId(1),
        ],
    );
    let pdi_dl = pfcp_msgs::g(
        t::PDI,
        vec![
            Ie::SourceInterface(1),
            Ie::UeIpAddress(UeIpAddress {
                sd: true,
                ipv4: Some(ue),
                ..Default::default()
            }),
        ],
    );
    let dl = pfcp_msgs::g(
        t::CREATE_PDR,
        vec![
            Ie::PdrId(2),
            Ie::Precedence(100),
            Ie::Grouped(pdi_dl),
            Ie::FarId(2),
            Ie::UrrId(1),
            Ie::QerId(1),
        ],
    );
    let r = peregrine_pfcp::message::SessionEstablishmentRequest {
        create_pdr: vec![ul, dl],
        create_far: vec![pfcp_msgs::far_n6(1), pfcp_msgs::far_n3(2, 0x0300_0000 | k)],
        ..pfcp_msgs::est(u64::from(k) + 1)
    };
    pfcp_msgs::est_bytes(seq, r)
}

/// (sequence number, cause) of a Session Establishment Response, if `d` is one.
fn est_answer(d: &[u8]) -> Option<(u32, u8)> {
    let m = peregrine_pfcp::Message::parse(d).ok()?;
    match m.body {
        peregrine_pfcp::message::Body::SessionEstablishmentResponse(r) => Some((m.seq, r.cause)),
        _ => None,
    }
}

/// Bytes per session of the N4 node alone, and of the compiler + one published table
/// version alone, for `n` sessions established in-process (no UDP, no traffic).
fn memory_breakdown(n: usize) -> (f64, f64, usize, u32, u32) {
    let mut cfg = peregrine_n4::NodeConfig::new(
        peregrine_pfcp::ie::NodeId::Ipv4(std::net::Ipv4Addr::LOCALHOST),
        0xe6f0_0001,
        Some(upf_support::upf_v4()),
    );
    cfg.max_sessions = n + 16;
    let peer: std::net::SocketAddr = "127.0.0.1:8805".parse().expect("addr");
    let reqs: Vec<Vec<u8>> = (0..n as u32).map(|k| est_request(k + 2, k)).collect();
    let l0 = GLOBAL.live();
    let mut node = peregrine_n4::Node::new(cfg);
    drop(node.handle(0, peer, &pfcp_msgs::setup_req(1, 1000)));
    for r in &reqs {
        drop(node.handle(1, peer, r));
    }
    // Responses are cached for retransmissions for a while (TS 29.244 section 6.4); let the
    // cache expire so only the sessions remain.
    drop(node.poll_timers(3_600_000_000_000));
    let l1 = GLOBAL.live();
    let sessions: Vec<peregrine_n4::Session> = node.sessions().collect();
    let l2 = GLOBAL.live();
    let mut c = Compiler::new(CompilerConfig {
        local_v4: vec![upf_support::upf_v4()],
        local_v6: vec![],
        max_meter_slots: 4 * n as u32,
        max_urr_slots: 4 * n as u32,
    });
    for s in &sessions {
        c.upsert(s).expect("compiles");
    }
    let t = c.build();
    let l3 = GLOBAL.live();
    let st = c.stats();
    drop((t, c, sessions));
    let cached = node.cached_responses();
    drop(node);
    (
        (l1 - l0) as f64 / n as f64,
        (l3 - l2) as f64 / n as f64,
        cached,
        st.meter_slots_used,
        st.urr_slots_used,
    )
}

/// Session establishment rate, publish latency and memory per session, under traffic.
fn n4_mode(a: &Args, n: usize) {
    let (node_b, compiler_b, cached, meter_slots, urr_slots) = memory_breakdown(n);
    eprintln!("node {node_b:.0} B/session (cached responses left {cached}), compiler + tables {compiler_b:.0} B/session");
    use peregrine_control::n4::{N4Config, N4Endpoint};
    use peregrine_control::upf::DaemonRules;
    use std::net::UdpSocket;
    let statics = a.sessions.first().copied().unwrap_or(10_000);
    let size = a.sizes.first().copied().unwrap_or(64);
    let slots = u32::try_from(4 * (statics + n)).expect("slots");
    // Compiler holding the static sessions the traffic belongs to; as the daemon does,
    // static SEIDs never collide with the ones N4 hands out.
    let mut compiler = compiler(statics, slots, peregrine_control::upf::STATIC_SEID_BIT);
    let publisher = Arc::new(Publisher::new(compiler.build()));
    let stats = Arc::new(UpfStats::new(slots));
    let routes = Publisher::new(upf_support::routes());
    let ucfg = upf_config(slots);

    // One worker forwarding uplink traffic of the static sessions (as the forwarding test).
    let fr = frames(Dir::Ul, size, statics);
    // At most one of each frame in flight, as many as `--inject` allows.
    let mut pre = Preloaded::inject(child_backend(1), &fr, fr.len().min(a.inject));
    let cfg = net_ring::one_worker(a.core, a.burst, false);
    let run = runtime::start(
        &mut pre,
        &|w: usize, r: &mut Reasons| {
            let feed = Feed::new(&fr, w, r);
            Pipeline::new(vec![
                Box::new(feed),
                Box::new(Upf::new(
                    publisher.reader(),
                    routes.reader(),
                    PORT_MACS.to_vec(),
                    ucfg.clone(),
                    stats.clone(),
                    r,
                )),
            ])
        },
        &cfg,
    )
    .expect("start worker");
    std::thread::sleep(Duration::from_millis(500));
    // The generator and the N4 thread (which inherits this affinity) stay off the worker's
    // core, as the daemon's control core would.
    if let Some(c) = (0..2).find(|c| *c != a.core) {
        core_affinity::set_for_current(core_affinity::CoreId { id: c });
    }

    let mut node = peregrine_n4::NodeConfig::new(
        peregrine_pfcp::ie::NodeId::Ipv4(std::net::Ipv4Addr::LOCALHOST),
        0xe6f0_0001,
        Some(upf_support::upf_v4()),
    );
    node.max_sessions = n + 16;
    node.heartbeat_interval = Duration::from_secs(3600);
    let rules = DaemonRules::new(compiler, publisher.clone(), vec![stats.clone()]);
    let ep = N4Endpoint::start(
        N4Config {
            listen: vec!["127.0.0.1:0".parse().expect("addr")],
            node,
            usage_interval: Duration::from_secs(1),
        },
        rules,
    )
    .expect("N4 endpoint");
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.connect(ep.local_addrs()[0]).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    let mut buf = vec![0u8; 65536];
    sock.send(&pfcp_msgs::setup_req(1, 1000)).expect("send");
    sock.recv(&mut buf).expect("association setup response");
    // Pre-build the requests so the generator measures the endpoint, not itself.
    let reqs: Vec<Vec<u8>> = (0..n as u32).map(|k| est_request(k + 2, k)).collect();

    let live0 = GLOBAL.live();
    let (r0, t0) = (pre.rx_packets(), Instant::now());
    let (mut sent, mut ok, mut rejected, mut got) = (0usize, 0usize, 0usize, 0usize);
    let (mut answered, mut retransmits, mut quiet) = (vec![false; n], 0usize, 0u32);
    // Request -> response time as the client sees it, from the first send of each request
    // (with `--window 1`: a lone request, as an SMF waiting for each answer sees it).
    let mut sent_at: Vec<Option<Instant>> = vec![None; n];
    let mut rtt_us: Vec<u64> = Vec::with_capacity(n);
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    while got < n {
        while sent < n && sent - got < a.window {
            sent_at[sent] = Some(Instant::now());
            sock.send(&reqs[sent]).expect("send");
            sent += 1;
        }
        match sock.recv(&mut buf) {
            Ok(len) => {
                let Some((seq, cause)) = est_answer(&buf[..len]) else {
                    continue;
                };
                let k = seq.wrapping_sub(2) as usize;
                if k >= n || answered[k] {
                    continue;
                }
                answered[k] = true;
                if let Some(t) = sent_at[k] {
                    rtt_us.push(t.elapsed().as_micros() as u64);
                }
                got += 1;
                quiet = 0;
                if cause == 1 {
                    ok += 1;
                } else {
                    rejected += 1;
                }
            }
            // UDP may lose a request or a response under a full window: retransmit what is
            // unanswered, as an SMF does on T1 expiry (the node answers duplicates from its
            // response cache, TS 29.244 section 6.4).
            Err(_) => {
                quiet += 1;
                if quiet > 10 {
                    fail(&format!("N4 endpoint stopped answering after {got}"));
                }
                for k in (0..sent).filter(|k| !answered[*k]) {
                    sock.send(&reqs[k]).expect("send");
                    retransmits += 1;
                }
            }
        }
    }
    let elapsed = t0.elapsed();
    let (r1, t1) = (pre.rx_packets(), Instant::now());
    drop(reqs);
    let st = ep.status();
    let live1 = GLOBAL.live();
    std::thread::sleep(Duration::from_millis(200));
    run.request_stop();
    let names: Vec<&'static str> = run.reasons().names().to_vec();
    let c = run.join();
    let drops = drops_by_reason(&names, &c.drops);

    // Per-worker state the new sessions need: their URR counters and meter slots (the
    // counts the compiler allocated for them).
    let per_worker = {
        let (urr, meters) = (urr_slots, meter_slots);
        let before = GLOBAL.live();
        let mut reasons = Reasons::new();
        let st = Arc::new(UpfStats::new(urr));
        let stage = Upf::new(
            publisher.reader(),
            routes.reader(),
            PORT_MACS.to_vec(),
            UpfConfig {
                max_meter_slots: meters,
                ..UpfConfig::default()
            },
            st,
            &mut reasons,
        );
        let b = GLOBAL.live() - before;
        drop(stage);
        b
    };
    let n4_bytes = live1 - live0;
    let result = serde_json::json!({
        "what": "PFCP Session Establishment through the real N4 endpoint (UDP, pipelined) while one worker forwards uplink traffic",
        "sessions_established": ok,
        "rejected": rejected,
        "window": a.window,
        "retransmissions": retransmits,
        "seconds": elapsed.as_secs_f64(),
        "establishments_per_second": ok as f64 / elapsed.as_secs_f64(),
        "goal_establishments_per_second": 20000,
        "publishes": st.counts.publishes,
        "window": a.window,
        "request_rtt_us_p50": quantile(&mut rtt_us, 0.5),
        "request_rtt_us_p99": quantile(&mut rtt_us, 0.99),
        "request_rtt_us_max": quantile(&mut rtt_us, 1.0),
        "goal_lone_request_rtt_us": {"p50": 200, "p99": 1000, "with": "--window 1"},
        "publish_latency_us_p50": st.publish_latency_quantile(0.5),
        "publish_latency_us_p99": st.publish_latency_quantile(0.99),
        "publish_latency_us_max": st.publish_latency_quantile(1.0),
        "publish_latency_samples": st.publish_latency_us.len(),
        "goal_publish_latency_us_p99": 1000,
        "traffic": format!("uplink, {size} B inner, {statics} static synthetic sessions, one worker on core {}", a.core),
        "traffic_mpps_during_load": (r1 - r0) as f64 / (t1 - t0).as_secs_f64() / 1e6,
        "traffic_drops_by_reason": drops,
        "memory": {
            "n4_node_compiler_tables_bytes": n4_bytes,
            "per_worker_state_bytes": per_worker,
            "workers": 1,
            "meter_slots_per_session": f64::from(meter_slots) / n as f64,
            "urr_slots_per_session": f64::from(urr_slots) / n as f64,
            "breakdown_node_only_bytes_per_session": node_b,
            "breakdown_compiler_and_tables_bytes_per_session": compiler_b,
            "bytes_per_session": (n4_bytes + per_worker) as f64 / n as f64,
            "goal_bytes_per_session": 2048,
        },
        "machine": format!(
            "{} cores (shared with other engineers' builds)",
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0)
        ),
    });
    let text = serde_json::to_string_pretty(&result).expect("json");
    println!("{text}");
    if let Err(e) = std::fs::write(&a.n4_out, text) {
        eprintln!("cannot write {}: {e}", a.n4_out);
    }
    drop(ep);
}

/// `--kestrel-compare`: UPF + Kestrel tap against the UPF alone, same core, alternating
/// rounds in fresh processes; the paired ratios per case.
fn kestrel_mode(a: &Args) {
    let mut cases = vec![];
    for n in &a.sessions {
        for dir in &a.dirs {
            for size in &a.sizes {
                let case = format!("{dir},{size},{n}");
                let (mut with, mut alone, mut allocs) = (vec![], vec![], 0u64);
                for round in 0..a.rounds {
                    let u = ours_child_opts(a, &case, 1, false, false).unwrap_or_else(|e| fail(&e));
                    let k = ours_child_opts(a, &case, 1, false, true).unwrap_or_else(|e| fail(&e));
                    eprintln!(
                        "{case} round {round}: upf alone {:.2} Mpps | upf + kestrel {:.2} Mpps (allocs {}, drops {:?})",
                        u.pps / 1e6,
                        k.pps / 1e6,
                        k.allocs,
                        k.drops
                    );
                    allocs += k.allocs + u.allocs;
                    alone.push(u.pps);
                    with.push(k.pps);
                }
                let pairs = pair_ratios(&with, &alone);
                cases.push(serde_json::json!({
                    "direction": dir,
                    "inner_bytes": size,
                    "sessions": n,
                    "upf_alone_mpps": mpps(&alone),
                    "upf_kestrel_mpps": mpps(&with),
                    "round_pair_ratios": pairs,
                    "ratio_median_of_round_pairs": median(&pairs),
                    "heap_allocations_in_measurement_windows": allocs,
                }));
            }
        }
    }
    let result = serde_json::json!({
        "what": "UPF + Kestrel tap vs UPF alone, one worker, net_ring0 <-> net_ring1, alternating rounds in fresh processes",
        "kestrel": "tap on both ports: 2 directions x 8 QIDs x d=3 x w=512 buckets of 128 B, 3GPP-PM counters, 1 s windows, no postcards",
        "goal_ratio": 0.9,
        "seconds_per_round": a.seconds,
        "rounds": a.rounds,
        "core": a.core,
        "cases": cases,
        "machine": format!(
            "{} cores (shared with other engineers' builds), {}",
            report::cores(),
            report::cpu_model().unwrap_or_default()
        ),
    });
    if let Err(e) = report::print_and_write(&result, Some(a.kestrel_out.as_ref())) {
        eprintln!("{e}");
    }
}
