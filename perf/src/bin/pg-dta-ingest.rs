//! DTA ingest rate per core: the translator stage on two `net_ring` vdevs against
//! `dpdk-testpmd --forward-mode=5tswap` on the same vdevs and core, and against a CPU
//! collector that inserts the same reports into hash maps, in one session.
//!
//! Set-up (all sides): two `net_ring` ports (a ring PMD without arguments loops a port's tx
//! back to its own rx), packets preloaded on both ports, one pinned forwarding core, burst
//! 32; rate = rx packets over both ports per second. Every report is a packet: our stage
//! parses it, stores it into the region (the real `dta-translator` main stage,
//! `TranslatorStage`) and, in its benchmark loop-back mode, advances the report's key (so
//! the stream keeps writing new slots, as a real stream would) and sends it back out
//! (testpmd's 5tswap also rewrites and returns every packet). The CPU collector is the same
//! pipeline with `std::collections::HashMap` inserts instead of region writes.
//!
//! `--callgrind` runs the I/O-free part (`Translator::handle`, or the hash-map insert)
//! under `valgrind --tool=callgrind` and reports instructions per report, and the whole
//! worker loop too (rx burst, outer-header parse and checks, store, loop-back, dispatch, tx
//! burst, counters: a `--child` round under callgrind, the worker thread's instructions over
//! the reports it received, `harness::callgrind::whole_loop`). `--only-callgrind` gives
//! both counts for every mode and no wall-clock figure (writes
//! `dta-ingest-callgrind.{json,md}`). A Key-Write query rate (N = 2, one core) is measured
//! in-process.
//!
//! RoCEv2 output (`rdma-*` modes): the same stage in its RoCEv2 mode makes each report's
//! RDMA requests in the worker (spare buffers from the worker's pool) and sends them to a
//! third port, a `net_null` vdev that frees what it is given (the stand-in for an RDMA
//! NIC's link: it costs the core a tx burst per batch, as a real port would); the report
//! itself loops back as above. Rate = RDMA frames sent per second (the stage's counter),
//! against testpmd's packets per second. `--only-rdma` runs testpmd and these modes only
//! and writes `dta-ingest-rdma.{json,md}`.
//!
//! `cargo run --release -p peregrine-perf --bin pg-dta-ingest` writes
//! `perf/results/dta-ingest.json` and `perf/results/dta-ingest.md`.

use clap::Parser;
use peregrine_control::dta::translator_stage::{Loopback, Shared, TranslatorStage};
use peregrine_dataplane::runtime::{self, Batch, Context, Disposition, Pipeline, Reasons, Stage};
use peregrine_dataplane::PacketBuf;
use peregrine_dta::{Collector, Config, Region, Sizes, Store, Translator};
use peregrine_perf::harness::net_ring::{self, Preloaded};
use peregrine_perf::harness::stats::{median, pair_ratios};
use peregrine_perf::harness::testpmd::Testpmd;
use peregrine_perf::harness::{child_failed, fail, report, run_self};
use peregrine_testkit::alloc::CountingAlloc;
use peregrine_wire::dta::{self, FrameAddrs, Primitive, Repr, Variant};
use peregrine_wire::ethernet::Address;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc::new();

#[derive(Parser, Debug)]
#[command(about = "DTA translator ingest rate vs testpmd 5tswap and a hash-map collector")]
struct Args {
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    #[arg(long, default_value_t = 1)]
    core: usize,
    #[arg(long, default_value_t = 32)]
    burst: usize,
    /// Reports in flight per port (one burst: at most the runtime's burst capacity).
    #[arg(long, default_value_t = 32)]
    inject: usize,
    #[arg(long, default_value = "dpdk-testpmd")]
    testpmd: String,
    /// Internal: one measurement of `mode` in this process; prints `pps allocs`.
    #[arg(long, hide = true)]
    child: Option<String>,
    /// Internal: run `mode`'s I/O-free work `count` times (for callgrind).
    #[arg(long, hide = true)]
    count_child: Option<String>,
    #[arg(long, hide = true, default_value_t = 0)]
    count: u64,
    /// Also measure instructions per report under callgrind.
    #[arg(long)]
    callgrind: bool,
    #[arg(long, default_value = "perf/results")]
    out: String,
    /// Only testpmd and the RoCEv2 output modes (writes `dta-ingest-rdma.{json,md}`).
    #[arg(long)]
    only_rdma: bool,
    /// Only the callgrind counts (I/O-free part and whole loop) of every mode.
    #[arg(long)]
    only_callgrind: bool,
}

/// The RoCEv2 output modes: the region mode's stream, each report made into RDMA requests.
const RDMA_MODES: [&str; 5] = [
    "rdma-kw1",
    "rdma-kw2",
    "rdma-ki",
    "rdma-append16",
    "rdma-postcard",
];

/// The measured primitives: (name, Append batch size or 0).
const MODES: [&str; 7] = [
    "kw1", "kw2", "ki", "append1", "append4", "append16", "postcard",
];

fn sizes(mode: &str) -> Sizes {
    let batch = match mode {
        "append4" => 4,
        "append16" => 16,
        _ => 1,
    };
    Sizes {
        ap_batch: batch,
        ap_lists: 8,
        ap_list_len: 1 << 16,
        ..Sizes::default()
    }
}

/// The `i`-th report of `mode`'s stream (before loop-back changes it).
fn primitive(mode: &str, i: u32) -> Primitive {
    let key = i.wrapping_mul(0x9e37_79b9);
    match mode {
        "kw1" => Primitive::key_write(1, key, &[i]).unwrap(),
        "kw2" => Primitive::key_write(2, key, &[i]).unwrap(),
        "ki" => Primitive::KeyIncrement {
            redundancy: 2,
            key,
            counter: 1,
        },
        "postcard" => Primitive::Postcard {
            key: (i / 5).wrapping_mul(0x9e37_79b9),
            hop: (i % 5) as u8,
            data: i & 0xffff,
        },
        _ => Primitive::Append {
            list: i % 8,
            data: i,
        },
    }
}

fn frames(mode: &str, n: usize) -> Vec<Vec<u8>> {
    let a = FrameAddrs {
        eth_src: Address([2, 0, 0, 0, 0, 2]),
        eth_dst: Address([2, 0, 0, 0, 0, 1]),
        ip_src: Ipv4Addr::new(10, 0, 0, 200),
        ip_dst: Ipv4Addr::new(10, 0, 0, 51),
        src_port: 40041,
        dst_port: dta::UDP_PORT,
    };
    (0..n as u32)
        .map(|i| {
            let r = Repr {
                variant: Variant::Tracked,
                seqnum: 0,
                immediate: false,
                retransmittable: false,
                primitive: primitive(mode, i),
            };
            let mut b = vec![0u8; 96];
            let len = r.emit(&mut b[dta::FRAME_OVERHEAD..]).unwrap();
            let n = dta::emit_frame(&mut b, &a, len).unwrap();
            b.truncate(n.max(60));
            b
        })
        .collect()
}

/// The CPU collector: the same parse, then hash-map inserts.
#[derive(Debug, Default)]
struct HashCollector {
    kw: HashMap<u32, u32>,
    ki: HashMap<u32, u64>,
    lists: Vec<Vec<u32>>,
    pc: HashMap<u32, [u32; 5]>,
}

impl HashCollector {
    fn handle(&mut self, payload: &[u8]) -> bool {
        let Ok(p) = dta::Packet::new_checked(payload, Variant::Tracked) else {
            return false;
        };
        let Ok(r) = Repr::parse(&p) else { return false };
        match r.primitive {
            Primitive::KeyWrite { key, data, .. } => {
                self.kw.insert(key, data[0]);
            }
            Primitive::KeyIncrement { key, counter, .. } => {
                *self.ki.entry(key).or_default() += counter;
            }
            Primitive::Append { list, data } => {
                if self.lists.len() <= list as usize {
                    self.lists.resize_with(list as usize + 1, Vec::new);
                }
                let l = &mut self.lists[list as usize];
                // A bounded list, like the ring: keep the newest 64 Ki entries.
                if l.len() >= 1 << 16 {
                    l.clear();
                }
                l.push(data);
            }
            Primitive::Postcard { key, hop, data } => {
                if let Some(v) = self
                    .pc
                    .entry(key)
                    .or_insert([u32::MAX; 5])
                    .get_mut(hop as usize)
                {
                    *v = data;
                }
            }
        }
        true
    }
}

/// The hash-map collector as a stage, with the same loop-back as the translator's.
struct HashStage {
    c: HashCollector,
    lb: Loopback,
}

impl<B: PacketBuf> Stage<B> for HashStage {
    fn name(&self) -> &'static str {
        "hash_collector"
    }
    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        let rx = batch.rx_port;
        batch.for_each_active(|p| {
            let d = p.data_mut();
            let at = dta::FRAME_OVERHEAD;
            let end = d.len().min(at + 32);
            let payload_len = u16::from_be_bytes([d[38], d[39]]) as usize - 8;
            let ok = self.c.handle(&d[at..(at + payload_len).min(end)]);
            debug_assert!(ok);
            self.lb.advance(&mut d[at..]);
            Disposition::tx(rx ^ 1)
        });
    }
}

/// (reports/s in the window, allocations in it, reports the worker received in the run).
fn ours(mode: &str, a: &Args) -> (f64, u64, u64) {
    let hash = mode.starts_with("hash-");
    let prim = mode.trim_start_matches("hash-").to_string();
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let region = Arc::new(Region::create(dir.path().join("r"), sizes(&prim)).expect("region"));
    let mut pre = Preloaded::inject(
        net_ring::backend(512),
        &frames(&prim, 2 * a.inject),
        a.inject,
    );
    let shared = Arc::new(Shared::new(1));
    let run = runtime::start(
        &mut pre,
        &|w: usize, r: &mut Reasons| {
            let lb = Loopback::new(Variant::Tracked);
            let stage: Box<dyn Stage<_>> = if hash {
                Box::new(HashStage {
                    c: HashCollector::default(),
                    lb,
                })
            } else {
                let t = Translator::new(Store::new(region.clone()), Config::default());
                Box::new(
                    TranslatorStage::new(t, Variant::Tracked, None, 1, w, shared.clone(), r)
                        .with_loopback(lb),
                )
            };
            Pipeline::new(vec![stage])
        },
        &net_ring::one_worker(a.core, a.burst, false),
    )
    .expect("start worker");
    let (pps, allocs) = net_ring::measure(&pre, &GLOBAL, a.seconds);
    run.request_stop();
    let c = run.join();
    assert_eq!(c.total_drops(), 0, "every report stored and looped back");
    (pps, allocs, c.rx_pkts.iter().sum())
}

/// One RoCEv2-mode measurement: (RDMA frames/s, allocations, reports/s).
fn rdma(mode: &str, a: &Args) -> (f64, u64, f64) {
    use peregrine_control::dta::translator_stage::RdmaOut;
    use peregrine_dta::rdma::{Qp, Target};
    let prim = mode.trim_start_matches("rdma-").to_string();
    let dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let s = sizes(&prim);
    let region = Arc::new(Region::create(dir.path().join("r"), s).expect("region"));
    let layout = *region.layout();
    let mut pre = Preloaded::inject(
        net_ring::backend_with(512, 1, &[("nic", "net_null0")]),
        &frames(&prim, 2 * a.inject),
        a.inject,
    );
    let shared = Arc::new(Shared::new(1));
    let addrs = FrameAddrs {
        eth_src: Address([2, 0, 0, 0, 0, 1]),
        eth_dst: Address([2, 0, 0, 0, 0, 0x99]),
        ip_src: Ipv4Addr::new(10, 0, 0, 1),
        ip_dst: Ipv4Addr::new(10, 0, 0, 99),
        src_port: 49152,
        dst_port: peregrine_wire::roce::UDP_PORT,
    };
    let run = runtime::start(
        &mut pre,
        &|w: usize, r: &mut Reasons| {
            let t = Translator::new(Store::new(region.clone()), Config::default());
            let qp = Qp::new(
                Target {
                    qp: 0x42,
                    local_qp: 0x100,
                    rkey: 7,
                    base_va: 0x7f00_0000_0000,
                },
                layout,
                addrs,
                0,
                Config::default().pc_cache_slots,
            );
            let out = RdmaOut::new(qp, 2, vec![0x100].into(), r);
            let stage: Box<dyn Stage<_>> = Box::new(
                TranslatorStage::new(t, Variant::Tracked, None, 1, w, shared.clone(), r)
                    .with_loopback(Loopback::new(Variant::Tracked))
                    .with_rdma(out),
            );
            Pipeline::new(vec![stage])
        },
        &net_ring::one_worker(a.core, a.burst, false),
    )
    .expect("start worker");
    std::thread::sleep(Duration::from_secs(1));
    let sent = || shared.totals_rdma().3.sent;
    let (s0, w) = (sent(), net_ring::Window::open(&pre, &GLOBAL));
    std::thread::sleep(Duration::from_secs_f64(a.seconds));
    let (s1, secs) = (sent(), w.elapsed().as_secs_f64());
    let (rps, allocs) = w.close(&pre, &GLOBAL);
    run.request_stop();
    run.join();
    let (_, _, _, r) = shared.totals_rdma();
    assert_eq!(r.no_buffer, 0, "every report's frames found buffers");
    ((s1 - s0) as f64 / secs, allocs, rps)
}

/// The collector the seed compares against (its Figure 7 CPU baselines): reports arrive
/// through the kernel's UDP socket path, `recvmmsg` (32 per call) into the same hash-map
/// collector, on the pinned core. The sender is a thread on the other core(s) blasting the
/// same stream (keys advanced as the loop-back does) with `sendmmsg` over loopback: on
/// loopback the kernel's transmit path also delivers into the receiving socket, in the
/// *sender's* context, so the receiver's core pays only the receive syscalls, the copy-out
/// and the inserts (a favourable set-up for this collector). Rate = reports the collector
/// handled per second of its thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`: user and
/// kernel, not the time it slept waiting for a sender that a shared machine slows down);
/// datagrams the kernel dropped for a full socket buffer are not counted.
fn kernel_udp(mode: &str, a: &Args) -> (f64, u64) {
    use nix::sys::socket::{
        recvmmsg, sendmmsg, setsockopt, sockopt, MsgFlags, MultiHeaders, SockaddrIn,
    };
    use std::io::{IoSlice, IoSliceMut};
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    let prim = mode.trim_start_matches("udp-").to_string();
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let _ = setsockopt(&rx, sockopt::RcvBuf, &(8 << 20));
    rx.set_read_timeout(Some(Duration::from_millis(100))).ok();
    let to = SockaddrIn::from(match rx.local_addr().expect("addr") {
        std::net::SocketAddr::V4(v) => v,
        _ => unreachable!("bound to IPv4"),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let stop = stop.clone();
        let prim = prim.clone();
        let others: Vec<usize> = (0..report::cores()).filter(|&c| c != a.core).collect();
        std::thread::spawn(move || {
            let _ = peregrine_control::pinning::pin_current(&others);
            let tx = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
            let lb = Loopback::new(Variant::Tracked);
            let mut payloads: Vec<Vec<u8>> = frames(&prim, 32)
                .iter()
                .map(|f| {
                    let n = u16::from_be_bytes([f[38], f[39]]) as usize - 8;
                    f[dta::FRAME_OVERHEAD..dta::FRAME_OVERHEAD + n].to_vec()
                })
                .collect();
            let addrs = [Some(to); 32];
            let mut hdrs = MultiHeaders::<SockaddrIn>::preallocate(32, None);
            while !stop.load(Ordering::Relaxed) {
                {
                    let iovs: Vec<[IoSlice<'_>; 1]> =
                        payloads.iter().map(|p| [IoSlice::new(p)]).collect();
                    let _ = sendmmsg(
                        tx.as_raw_fd(),
                        &mut hdrs,
                        &iovs,
                        addrs,
                        [],
                        MsgFlags::empty(),
                    );
                }
                for p in payloads.iter_mut() {
                    lb.advance(p);
                }
            }
        })
    };
    let _ = peregrine_control::pinning::pin_current(&[a.core]);
    let mut c = HashCollector::default();
    let mut bufs = [[0u8; 64]; 32];
    let mut hdrs = MultiHeaders::<SockaddrIn>::preallocate(32, None);
    let mut lens = [0usize; 32];
    let cpu = || {
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
            .map_or(0.0, |t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
    };
    let (mut n, mut t0, mut cpu0) = (0u64, None, 0.0);
    let warm = Instant::now() + Duration::from_millis(300);
    let allocs0 = peregrine_testkit::alloc::thread_allocs();
    loop {
        let got = {
            let mut it = bufs.iter_mut();
            let mut iovs: [[IoSliceMut<'_>; 1]; 32] =
                std::array::from_fn(|_| [IoSliceMut::new(&mut it.next().expect("32 buffers")[..])]);
            match recvmmsg(
                rx.as_raw_fd(),
                &mut hdrs,
                iovs.iter_mut(),
                MsgFlags::empty(),
                None,
            ) {
                Ok(r) => {
                    let mut k = 0;
                    for (m, l) in r.zip(lens.iter_mut()) {
                        *l = m.bytes;
                        k += 1;
                    }
                    k
                }
                Err(_) => 0,
            }
        };
        for (b, &l) in bufs.iter().zip(&lens).take(got) {
            std::hint::black_box(c.handle(&b[..l]));
        }
        let now = Instant::now();
        match t0 {
            None if now >= warm => {
                t0 = Some(now);
                cpu0 = cpu();
            }
            None => {}
            Some(t) => {
                n += got as u64;
                if now.duration_since(t).as_secs_f64() >= a.seconds {
                    break;
                }
            }
        }
    }
    let secs = (cpu() - cpu0).max(1e-9);
    let allocs = peregrine_testkit::alloc::thread_allocs() - allocs0;
    stop.store(true, Ordering::Relaxed);
    let _ = sender.join();
    (n as f64 / secs, allocs)
}

/// The arguments of a `--child` measuring `mode` with the run's settings.
fn child_args(mode: &str, a: &Args) -> Vec<String> {
    [
        "--child",
        mode,
        "--seconds",
        &a.seconds.to_string(),
        "--core",
        &a.core.to_string(),
        "--burst",
        &a.burst.to_string(),
        "--inject",
        &a.inject.to_string(),
    ]
    .map(String::from)
    .to_vec()
}

/// This binary again as a `--child` measuring `mode` with the run's settings.
fn run_child(mode: &str, a: &Args) -> Result<std::process::Output, String> {
    run_self(child_args(mode, a))
}

/// The whole worker loop's instructions per report of `mode` (a 2 s child round under
/// callgrind; see `harness::callgrind`).
fn callgrind_loop(mode: &str, a: &Args) -> Option<f64> {
    let exe = std::env::current_exe().ok()?;
    let mut args = child_args(mode, a);
    args[3] = "2".into();
    peregrine_perf::harness::callgrind::whole_loop(&exe, &args, mode).map(|(ir, _)| ir)
}

/// `--only-callgrind`: both counts of every mode, translator and hash map.
fn callgrind_main(a: &Args) {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# DTA ingest: instructions per report (callgrind)\n\n\
         Generated by `pg-dta-ingest --only-callgrind`. I/O-free: parse + store (or the \
         hash-map insert), 200 000 reports. Whole loop: the worker thread of a 2 s `--child` \
         round on the `net_ring` vdevs under callgrind, over the reports it received (rx \
         burst, outer headers, store, loop-back, dispatch, tx burst, counters).\n\n\
         | mode | translator: I/O-free instr, D1 miss, LL miss | translator: whole loop instr | \
         hash map: I/O-free instr, D1 miss, LL miss | hash map: whole loop instr |\n\
         |---|---|---|---|---|"
    );
    let fmt = |x: Option<[f64; 3]>| {
        x.map(|v| format!("{:.0}, {:.2}, {:.2}", v[0], v[1], v[2]))
            .unwrap_or_else(|| "-".into())
    };
    let f1 = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.0}"));
    let mut rows = Vec::new();
    for m in MODES {
        let h = format!("hash-{m}");
        let (ci, cl, hi, hl) = (
            callgrind(m),
            callgrind_loop(m, a),
            callgrind(&h),
            callgrind_loop(&h, a),
        );
        eprintln!(
            "{m:9} translator {} / loop {}; hash map {} / loop {}",
            fmt(ci),
            f1(cl),
            fmt(hi),
            f1(hl)
        );
        let _ = writeln!(
            md,
            "| {m} | {} | {} | {} | {} |",
            fmt(ci),
            f1(cl),
            fmt(hi),
            f1(hl)
        );
        rows.push(serde_json::json!({
            "mode": m, "io_free_ir_d1miss_llmiss": ci, "whole_loop_ir": cl,
            "hash_map_io_free_ir_d1miss_llmiss": hi, "hash_map_whole_loop_ir": hl,
        }));
    }
    let result = serde_json::json!({ "rows": rows, "machine": machine() });
    write_results(a, "dta-ingest-callgrind", &result, &md);
}

fn child(mode: &str, a: &Args) -> Result<(f64, u64), String> {
    let out = run_child(mode, a)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace();
    match (
        it.next().and_then(|x| x.parse().ok()),
        it.next().and_then(|x| x.parse().ok()),
    ) {
        (Some(p), Some(al)) if out.status.success() => Ok((p, al)),
        _ => Err(child_failed(mode, &out)),
    }
}

/// An `rdma-*` child: (RDMA frames/s, reports/s).
fn rdma_child(mode: &str, a: &Args) -> Result<(f64, f64), String> {
    let out = run_child(mode, a)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Vec<f64> = text
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    match v[..] {
        [f, _, r] if out.status.success() => Ok((f, r)),
        _ => Err(child_failed(mode, &out)),
    }
}

/// RoCEv2 rows: mode, RDMA frames/s and reports/s per round.
type RdmaRow = (String, Vec<f64>, Vec<f64>);

fn rdma_round(a: &Args, round: usize, rows: &mut [RdmaRow]) {
    for (m, f, r) in rows.iter_mut() {
        let (fps, rps) = rdma_child(m, a).unwrap_or_else(|e| fail(&e));
        eprintln!(
            "round {round}: {m:13} {:.2} M RDMA frames/s ({:.2} M reports/s)",
            fps / 1e6,
            rps / 1e6
        );
        f.push(fps);
        r.push(rps);
    }
}

fn rdma_rows() -> Vec<RdmaRow> {
    RDMA_MODES
        .iter()
        .map(|m| (m.to_string(), Vec::new(), Vec::new()))
        .collect()
}

/// The RoCEv2 table (markdown) and its JSON rows.
fn rdma_table(rows: &[RdmaRow], tpmd: &[f64], cg: bool) -> (String, Vec<serde_json::Value>) {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n## RoCEv2 output, made in the worker\n\n\
         Reports as above; each becomes its RDMA requests in the worker (spare buffers from \
         its mbuf pool) sent to a `net_null` port, the report looping back. Same core, same \
         session, alternating with testpmd.\n\n\
         | mode | RDMA frames/s (M) | reports/s (M) | frames per report | frames/s / testpmd pps (median of rounds) | instr, D1 miss, LL miss per report (callgrind: parse, check, requests) |\n\
         |---|---|---|---|---|---|"
    );
    let mut json = Vec::new();
    for (m, f, r) in rows {
        let (fm, rm) = (median(f), median(r));
        let ratio = median(&pair_ratios(f, tpmd));
        let c = cg.then(|| callgrind(m)).flatten();
        let _ = writeln!(
            md,
            "| {m} | {:.2} | {:.2} | {:.3} | {:.2} | {} |",
            fm / 1e6,
            rm / 1e6,
            fm / rm.max(1.0),
            ratio,
            c.map(|v| format!("{:.0}, {:.2}, {:.2}", v[0], v[1], v[2]))
                .unwrap_or_else(|| "-".into())
        );
        json.push(serde_json::json!({
            "mode": m, "rdma_frames_per_s": f, "reports_per_s": r,
            "frames_median": fm, "reports_median": rm, "frames_vs_testpmd_median_of_pairs": ratio,
            "callgrind_per_report_ir_d1miss_llmiss": c,
        }));
    }
    (md, json)
}

/// `--only-rdma`: testpmd and the RoCEv2 modes, alternating per round.
fn rdma_main(a: &Args) {
    let mut tpmd = Vec::new();
    let mut rows = rdma_rows();
    for round in 0..a.rounds {
        let p = testpmd(a, round).unwrap_or_else(|e| fail(&e));
        eprintln!("round {round}: testpmd 5tswap {:.2} Mpps", p / 1e6);
        tpmd.push(p);
        rdma_round(a, round, &mut rows);
    }
    let (table, json) = rdma_table(&rows, &tpmd, a.callgrind);
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# DTA RoCEv2 output rate per core\n\n\
         Generated by `cargo run --release -p peregrine-perf --bin pg-dta-ingest -- \
         --only-rdma{}` (source `perf/src/bin/pg-dta-ingest.rs`). One pinned core, {} reports \
         in flight per port, burst {}, {} rounds of {} s. Machine: {}. testpmd 5tswap, same \
         vdevs and core: median {:.2} Mpps (rounds: {}).",
        if a.callgrind { " --callgrind" } else { "" },
        a.inject,
        a.burst,
        a.rounds,
        a.seconds,
        machine(),
        median(&tpmd) / 1e6,
        tpmd.iter()
            .map(|p| format!("{:.2}", p / 1e6))
            .collect::<Vec<_>>()
            .join(", ")
    );
    md.push_str(&table);
    let result = serde_json::json!({
        "testpmd_5tswap_pps": tpmd, "rows": json,
        "core": a.core, "burst": a.burst, "inject": a.inject, "seconds": a.seconds,
        "machine": machine(),
    });
    write_results(a, "dta-ingest-rdma", &result, &md);
}

/// The machine line of the JSON results.
fn machine() -> String {
    report::machine()
}

/// Print `result` and write it to `<out>/<stem>.json`, and `md` to `<out>/<stem>.md`; a file
/// that cannot be written is said on stderr (the run's figures are printed either way).
fn write_results(a: &Args, stem: &str, result: &serde_json::Value, md: &str) {
    let out = std::path::Path::new(&a.out);
    if let Err(e) = report::print_and_write(result, Some(&out.join(format!("{stem}.json")))) {
        eprintln!("{e}");
    }
    let path = out.join(format!("{stem}.md"));
    if let Err(e) = std::fs::write(&path, md) {
        eprintln!("cannot write {}: {e}", path.display());
    }
}

fn testpmd(a: &Args, round: usize) -> Result<f64, String> {
    Testpmd {
        program: &a.testpmd,
        core: a.core,
        burst: a.burst,
        forward_mode: "5tswap",
        file_prefix: format!("pg-dta-tpmd-{}-{round}", std::process::id()),
        setup: String::new(),
        seconds: a.seconds,
    }
    .run()
}

/// `count` reports of `mode` through the I/O-free path (for callgrind): bursts of 32, each
/// report advanced after it is stored as the benchmark's loop-back does (so keys keep
/// changing and the region's working set is the real run's).
fn count_child(mode: &str, count: u64) {
    if let Some(prim) = mode.strip_prefix("rdma-") {
        return rdma_count_child(prim, count);
    }
    let hash = mode.starts_with("hash-");
    let prim = mode.trim_start_matches("hash-");
    let mut payloads: Vec<Vec<u8>> = frames(prim, 64)
        .iter()
        .map(|f| {
            let n = u16::from_be_bytes([f[38], f[39]]) as usize - 8;
            f[dta::FRAME_OVERHEAD..dta::FRAME_OVERHEAD + n].to_vec()
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let region = Arc::new(Region::create(dir.path().join("r"), sizes(prim)).unwrap());
    let mut t = Translator::new(Store::new(region), Config::default());
    let mut h = HashCollector::default();
    let lb = Loopback::new(Variant::Tracked);
    let mut done = 0u64;
    while done < count {
        for burst in payloads.chunks_mut(32) {
            for p in burst.iter_mut().take((count - done) as usize) {
                if hash {
                    std::hint::black_box(h.handle(p));
                } else {
                    std::hint::black_box(t.handle(p).is_ok());
                }
                lb.advance(p);
                done += 1;
            }
        }
    }
}

/// The RoCEv2 modes' I/O-free part for callgrind: parse, check, and the queue pair making
/// the requests (each copied out, as into an mbuf), as the stage does per report.
fn rdma_count_child(prim: &str, count: u64) {
    use peregrine_dta::rdma::{check, Qp, Target};
    let mut payloads: Vec<Vec<u8>> = frames(prim, 64)
        .iter()
        .map(|f| {
            let n = u16::from_be_bytes([f[38], f[39]]) as usize - 8;
            f[dta::FRAME_OVERHEAD..dta::FRAME_OVERHEAD + n].to_vec()
        })
        .collect();
    let layout = peregrine_dta::Layout::new(sizes(prim)).unwrap();
    let addrs = FrameAddrs {
        eth_src: Address([2, 0, 0, 0, 0, 1]),
        eth_dst: Address([2, 0, 0, 0, 0, 0x99]),
        ip_src: Ipv4Addr::new(10, 0, 0, 1),
        ip_dst: Ipv4Addr::new(10, 0, 0, 99),
        src_port: 49152,
        dst_port: peregrine_wire::roce::UDP_PORT,
    };
    let t = Target {
        qp: 0x42,
        local_qp: 0x100,
        rkey: 7,
        base_va: 0x7f00_0000_0000,
    };
    let mut qp = Qp::new(t, layout, addrs, 0, Config::default().pc_cache_slots);
    let mut out = [0u8; peregrine_dta::rdma::MAX_FRAME];
    let lb = Loopback::new(Variant::Tracked);
    let mut done = 0u64;
    while done < count {
        for p in payloads.iter_mut().take((count - done) as usize) {
            // As the stage: the one-word fast decode, else the full parse; one check.
            let prim = dta::parse_one_word(&p[..], Variant::Tracked)
                .map(|(prim, _)| prim)
                .unwrap_or_else(|| {
                    dta::Packet::new_checked(&p[..], Variant::Tracked)
                        .and_then(|x| Repr::parse(&x))
                        .expect("valid report")
                        .primitive
                });
            if check(&layout, &prim).is_ok() {
                let _ = qp.handle_checked(&prim, |f| {
                    out[..f.len()].copy_from_slice(f);
                    std::hint::black_box(&out);
                });
            }
            lb.advance(p);
            done += 1;
        }
    }
}

/// Per report under callgrind with its cache simulation: (instructions, D1 misses, LL data
/// misses), each the difference of a `count` and a 0-report run over `count`.
fn callgrind(mode: &str) -> Option<[f64; 3]> {
    let exe = std::env::current_exe().ok()?;
    let run = |n: u64| -> Option<[f64; 3]> {
        let f = std::env::temp_dir().join(format!("pg-dta-cg-{}-{mode}-{n}", std::process::id()));
        let o = std::process::Command::new("valgrind")
            .args(["--tool=callgrind", "--cache-sim=yes"])
            .arg(format!("--callgrind-out-file={}", f.display()))
            .arg(&exe)
            .args(["--count-child", mode, "--count", &n.to_string()])
            .output()
            .ok()?;
        let _ = std::fs::remove_file(&f);
        let err = String::from_utf8_lossy(&o.stderr);
        // "==pid== Collected : Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw"
        let v: Vec<f64> = err
            .lines()
            .find_map(|l| l.split("Collected :").nth(1))?
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        (v.len() == 9).then(|| [v[0], v[4] + v[5], v[7] + v[8]])
    };
    let n = 200_000;
    let (a, b) = (run(n)?, run(0)?);
    Some([0, 1, 2].map(|i| (a[i] - b[i]) / n as f64))
}

/// Key-Write queries per second on one core (N = 2, random keys, 2^20 written).
fn query_rate() -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let region = Arc::new(Region::create(dir.path().join("q"), Sizes::default()).unwrap());
    let s = Store::new(region.clone());
    for i in 0..1u32 << 20 {
        s.key_write(2, i.wrapping_mul(0x9e37_79b9), &[i]).unwrap();
    }
    let c = Collector::new(region);
    let t0 = Instant::now();
    let mut n = 0u64;
    let mut found = 0u64;
    while t0.elapsed() < Duration::from_secs(2) {
        for _ in 0..1024 {
            let k = (n as u32).wrapping_mul(0x9e37_79b9);
            if matches!(
                c.key_write(k, Some(2), 1),
                Ok(peregrine_dta::KwAnswer::Found { .. })
            ) {
                found += 1;
            }
            n += 1;
        }
    }
    std::hint::black_box(found);
    n as f64 / t0.elapsed().as_secs_f64()
}

/// A primitive's measurements: name, translator, DPDK-fed hash map and kernel-UDP hash map
/// rates per round, heap allocations in the measured windows.
type Row = (String, Vec<f64>, Vec<f64>, Vec<f64>, u64);

fn main() {
    let a = Args::parse();
    if let Some(m) = &a.count_child {
        count_child(m, a.count);
        return;
    }
    if let Some(m) = &a.child {
        if m.starts_with("rdma-") {
            let (fps, allocs, rps) = rdma(m, &a);
            println!("{fps} {allocs} {rps}");
            return;
        }
        let (pps, allocs, rx) = match m.starts_with("udp-") {
            true => {
                let (p, al) = kernel_udp(m, &a);
                (p, al, 0)
            }
            false => ours(m, &a),
        };
        println!("{pps} {allocs} {rx}");
        return;
    }
    if a.only_callgrind {
        callgrind_main(&a);
        return;
    }
    if a.only_rdma {
        rdma_main(&a);
        return;
    }
    let mut tpmd = Vec::new();
    let mut rows: Vec<Row> = MODES
        .iter()
        .map(|m| (m.to_string(), Vec::new(), Vec::new(), Vec::new(), 0))
        .collect();
    let mut rdma = rdma_rows();
    for round in 0..a.rounds {
        let p = testpmd(&a, round).unwrap_or_else(|e| fail(&e));
        eprintln!("round {round}: testpmd 5tswap {:.2} Mpps", p / 1e6);
        tpmd.push(p);
        for (m, dta_pps, hash_pps, udp_pps, allocs) in rows.iter_mut() {
            let (p, al) = child(m, &a).unwrap_or_else(|e| fail(&e));
            let (h, _) = child(&format!("hash-{m}"), &a).unwrap_or_else(|e| fail(&e));
            let (u, _) = child(&format!("udp-{m}"), &a).unwrap_or_else(|e| fail(&e));
            eprintln!(
                "round {round}: {m:9} translator {:.2} M/s, hash map {:.2} M/s, kernel UDP + hash map {:.2} M/s",
                p / 1e6,
                h / 1e6,
                u / 1e6
            );
            dta_pps.push(p);
            hash_pps.push(h);
            udp_pps.push(u);
            *allocs += al;
        }
        rdma_round(&a, round, &mut rdma);
    }
    let q = query_rate();
    eprintln!("key-write queries (N=2): {:.2} M/s", q / 1e6);
    let t = median(&tpmd);
    let goal = |m: &str| match m {
        "append4" | "append16" => Some(0.5),
        "kw2" | "postcard" => Some(0.3),
        _ => None,
    };
    let mut json_rows = Vec::new();
    let mut md = String::new();
    let _ = writeln!(md, "# DTA ingest rate per core\n");
    let _ = writeln!(
        md,
        "Generated by `cargo run --release -p peregrine-perf --bin pg-dta-ingest{}` \
         (source `perf/src/bin/pg-dta-ingest.rs`). One pinned core, two `net_ring` vdevs, \
         {} reports in flight per port, burst {}, {} rounds of {} s, alternating testpmd / \
         translator / hash map within each round. Machine: {} (on a shared machine rates move \
         between rounds; the ratios of adjacent runs are steadier than the absolute \
         numbers).\n",
        if a.callgrind { " -- --callgrind" } else { "" },
        a.inject,
        a.burst,
        a.rounds,
        a.seconds,
        machine()
    );
    let _ = writeln!(
        md,
        "Yardstick: `dpdk-testpmd --forward-mode=5tswap` on the same vdevs and core: median \
         {:.2} Mpps (rounds: {}).\n",
        t / 1e6,
        tpmd.iter()
            .map(|p| format!("{:.2}", p / 1e6))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(md, "| primitive | translator M reports/s | / testpmd | goal | met | hash-map collector (DPDK-fed) M/s | translator / it (goal 4) | kernel-UDP (`recvmmsg`) hash-map collector M/s | translator / it (goal 4) | instr, D1 miss, LL miss per report (translator) | the same (hash map) | whole-loop instr per report (translator; hash map) |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (m, d, h, u, allocs) in &rows {
        let (dm, hm, um) = (median(d), median(h), median(u));
        let ratio_t = median(&pair_ratios(d, &tpmd));
        let cg = a
            .callgrind
            .then(|| (callgrind(m), callgrind(&format!("hash-{m}"))));
        let (ci, ch) = cg.unwrap_or((None, None));
        let loops = a.callgrind.then(|| {
            (
                callgrind_loop(m, &a),
                callgrind_loop(&format!("hash-{m}"), &a),
            )
        });
        let (li, lh) = loops.unwrap_or((None, None));
        let f1 = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.0}"));
        let fmt = |x: Option<[f64; 3]>| {
            x.map(|v| format!("{:.0}, {:.2}, {:.2}", v[0], v[1], v[2]))
                .unwrap_or_else(|| "-".into())
        };
        let _ = writeln!(
            md,
            "| {m} | {:.2} | {:.2} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} | {}; {} |",
            dm / 1e6,
            ratio_t,
            goal(m)
                .map(|g| format!(">= {g}"))
                .unwrap_or_else(|| "-".into()),
            match goal(m) {
                Some(g) if ratio_t >= g => "yes",
                Some(_) => "no",
                None => "-",
            },
            hm / 1e6,
            dm / hm,
            um / 1e6,
            dm / um,
            fmt(ci),
            fmt(ch),
            f1(li),
            f1(lh)
        );
        json_rows.push(serde_json::json!({
            "primitive": m, "translator_pps": d, "hash_map_pps": h,
            "translator_median": dm, "hash_map_median": hm,
            "vs_testpmd_median_of_pairs": ratio_t, "goal_vs_testpmd": goal(m),
            "vs_hash_map": dm / hm, "heap_allocations_in_windows": allocs,
            "kernel_udp_hash_map_pps": u, "kernel_udp_hash_map_median": um, "vs_kernel_udp_hash_map": dm / um,
            "callgrind_per_report_ir_d1miss_llmiss": ci, "hash_map_callgrind_per_report": ch,
            "whole_loop_ir_per_report": li, "hash_map_whole_loop_ir_per_report": lh,
        }));
    }
    let _ = writeln!(
        md,
        "\nKey-Write query rate, one core, N = 2, 2^20 keys written into 2^20 slots: {:.2} M \
         queries/s (the seed: ~1.8 M/s per core at N = 2).\n",
        q / 1e6
    );
    let (rdma_md, rdma_json) = rdma_table(&rdma, &tpmd, a.callgrind);
    md.push_str(&rdma_md);
    md.push('\n');
    md.push_str(include_str!("dta-ingest-discussion.md"));
    let result = serde_json::json!({
        "testpmd_5tswap_pps": tpmd, "rows": json_rows, "kw_query_per_s": q, "rdma_rows": rdma_json,
        "core": a.core, "burst": a.burst, "inject": a.inject, "seconds": a.seconds,
        "machine": machine(),
    });
    write_results(&a, "dta-ingest", &result, &md);
}
