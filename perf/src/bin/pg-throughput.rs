//! End-to-end forwarding throughput: Peregrine's worker runtime against `dpdk-testpmd` on the
//! same DPDK vdevs and the same core, in one session.
//!
//! Set-up (both sides identical): two `net_ring` ports (a ring PMD with no arguments loops a
//! port's tx back to its own rx), 32 packets injected per port, forwarding port 0 <-> port 1
//! on one pinned core with bursts of 32; rate = sum over ports of the `rte_eth_stats` rx
//! packet delta over the measurement window. Ours runs the `xconnect` stage (the runtime's
//! equivalent of testpmd's `io` mode, which touches no packet data); rounds alternate between
//! the two to spread drift, and the medians are compared.
//!
//! A counting global allocator reports how many heap allocations happened during our
//! measurement windows (the control thread only sleeps then, so they would be the worker's).

use clap::Parser;
use peregrine_dataplane::io::dpdk::{DpdkBackend, DpdkConfig, DpdkPortConfig};
use peregrine_dataplane::io::{Backend, Burst, PortId, PortInfo, PortStats, WorkerIo};
use peregrine_dataplane::runtime::{
    self, EgressConfig, Pipeline, Reasons, RuntimeConfig, WorkerSpec,
};
use peregrine_dataplane::stages::xconnect::XConnect;
use peregrine_dataplane::PacketBuf;
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
#[command(about = "Peregrine runtime vs dpdk-testpmd io on net_ring, same core, same session")]
struct Args {
    /// Seconds measured per round (after a 1 s warm-up).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Rounds per side (alternating).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Core the forwarding loop runs on (EAL's main lcore is 0).
    #[arg(long, default_value_t = 1)]
    core: usize,
    #[arg(long, default_value_t = 32)]
    burst: usize,
    /// Packets injected per port before forwarding starts (testpmd's tx_first sends one burst).
    #[arg(long, default_value_t = 32)]
    inject: usize,
    #[arg(long, default_value = "dpdk-testpmd")]
    testpmd: String,
    /// Give both ports an egress scheduler (default 8 queues, SP + DRR, no shaper), so every
    /// packet is enqueued and dequeued by the worker: the cost of the scheduled path.
    #[arg(long)]
    egress: bool,
    /// Internal: run one measurement of our side in this process and print `pps allocs`.
    #[arg(long, hide = true)]
    child: bool,
    /// Where to write the JSON results.
    #[arg(long, default_value = "perf/results/throughput-net_ring.json")]
    out: String,
}

const FRAME: [u8; 60] = {
    let mut f = [0u8; 60];
    // Ethernet: dst 02:00:00:00:00:01, src 02:00:00:00:00:02, IPv4.
    f[5] = 1;
    f[0] = 2;
    f[6] = 2;
    f[11] = 2;
    f[12] = 0x08;
    f
};

/// Hands the runtime a worker I/O the harness took earlier (to inject the first packets).
struct Preloaded {
    inner: DpdkBackend,
    io: Option<<DpdkBackend as Backend>::Io>,
}

impl Backend for Preloaded {
    type Io = <DpdkBackend as Backend>::Io;
    fn ports(&self) -> &[PortInfo] {
        self.inner.ports()
    }
    fn worker_io(&mut self, _worker: usize) -> Self::Io {
        self.io.take().expect("one worker")
    }
    fn port_stats(&self, port: PortId) -> PortStats {
        self.inner.port_stats(port)
    }
}

fn ours(mut backend: DpdkBackend, a: &Args) -> (f64, u64) {
    let mut io = backend.worker_io(0);
    for port in 0..2u16 {
        let mut b = Burst::new();
        for _ in 0..a.inject {
            let mut m = io.alloc().expect("mbuf");
            m.append(FRAME.len()).expect("room").copy_from_slice(&FRAME);
            b.push(m);
        }
        io.tx_burst(port, 0, &mut b);
    }
    let mut pre = Preloaded {
        inner: backend,
        io: Some(io),
    };
    let cfg = RuntimeConfig {
        workers: vec![WorkerSpec {
            id: 0,
            core: Some(a.core),
            rx_queues: vec![(0, 0), (1, 0)],
            tx_queue: 0,
        }],
        burst: a.burst,
        stop_after_idle: None,
        control_queue: 16,
        egress: if a.egress {
            vec![Some(EgressConfig::default()); 2]
        } else {
            Vec::new()
        },
    };
    let run = runtime::start(
        &mut pre,
        &|_w: usize, r: &mut Reasons| Pipeline::new(vec![Box::new(XConnect::new(&[(0, 1)], r))]),
        &cfg,
    )
    .expect("start worker");
    std::thread::sleep(Duration::from_secs(1));
    let rx = |p: &Preloaded| p.port_stats(0).ipackets + p.port_stats(1).ipackets;
    let a0 = ALLOCS.load(Ordering::Relaxed);
    let (r0, t0) = (rx(&pre), Instant::now());
    std::thread::sleep(Duration::from_secs_f64(a.seconds));
    let (r1, t1) = (rx(&pre), Instant::now());
    let allocs = ALLOCS.load(Ordering::Relaxed) - a0;
    run.request_stop();
    let c = run.join();
    assert_eq!(c.total_drops(), 0, "no drops on a pure cross-connect");
    ((r1 - r0) as f64 / (t1 - t0).as_secs_f64(), allocs)
}

/// One round of our side in a fresh process (vdev ports cannot be re-probed in a process).
fn ours_child(a: &Args) -> Result<(f64, u64), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .args([
            "--child",
            "--seconds",
            &a.seconds.to_string(),
            "--core",
            &a.core.to_string(),
        ])
        .args([
            "--burst",
            &a.burst.to_string(),
            "--inject",
            &a.inject.to_string(),
        ])
        .args(a.egress.then_some("--egress"))
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace();
    match (
        it.next().and_then(|x| x.parse().ok()),
        it.next().and_then(|x| x.parse().ok()),
    ) {
        (Some(p), Some(al)) if out.status.success() => Ok((p, al)),
        _ => Err(format!(
            "our child run failed: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

/// Runs testpmd interactively: start tx_first, warm up, two `show port stats all` a window
/// apart; testpmd's own Rx-pps of the second call covers exactly that window.
fn testpmd(a: &Args, round: usize) -> Result<f64, String> {
    let mut child = Command::new(&a.testpmd)
        .args([
            "-l",
            &format!("0,{}", a.core),
            "--no-huge",
            "--no-pci",
            "-m",
            "512",
            "--no-shconf",
            "--no-telemetry",
            &format!("--file-prefix=pg-tpmd-{}-{round}", std::process::id()),
            "--vdev=net_ring0",
            "--vdev=net_ring1",
            "--",
            "-i",
            "--forward-mode=io",
            "--nb-cores=1",
            &format!("--burst={}", a.burst),
            "--total-num-mbufs=8192",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", a.testpmd))?;
    let mut stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut lines = vec![];
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            lines.push(l);
        }
        lines
    });
    let mut say = |s: &str| stdin.write_all(s.as_bytes()).and_then(|_| stdin.flush());
    std::thread::sleep(Duration::from_millis(500));
    say("start tx_first\n").map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_secs(1));
    say("show port stats all\n").map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_secs_f64(a.seconds));
    say("show port stats all\nstop\nquit\n").map_err(|e| e.to_string())?;
    drop(stdin);
    let status = child.wait().map_err(|e| e.to_string())?;
    let lines = reader.join().map_err(|_| "reader thread")?;
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let pps: Vec<f64> = lines
        .iter()
        .filter_map(|l| l.trim().strip_prefix("Rx-pps:"))
        .filter_map(|r| r.split_whitespace().next()?.parse().ok())
        .collect();
    if !status.success() || pps.len() < 4 {
        return Err(format!(
            "testpmd failed ({status}): {}\n{}",
            lines.join("\n"),
            err
        ));
    }
    Ok(pps[pps.len() - 2] + pps[pps.len() - 1])
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

fn main() {
    let a = Args::parse();
    if a.child {
        let cfg = DpdkConfig {
            eal_args: [
                "-l",
                "0",
                "--no-huge",
                "--no-pci",
                "-m",
                "512",
                "--no-shconf",
                "--no-telemetry",
                "--log-level=lib.eal:error",
                "--vdev=net_ring0",
                "--vdev=net_ring1",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            ports: vec![
                DpdkPortConfig::new("r0", "net_ring0"),
                DpdkPortConfig::new("r1", "net_ring1"),
            ],
            workers: 1,
            mbufs_per_worker: 8191,
            mbuf_cache: 256,
            data_room: DpdkConfig::DEFAULT_DATA_ROOM,
        };
        let backend = DpdkBackend::new(cfg).expect("DPDK backend on net_ring vdevs");
        let (pps, allocs) = ours(backend, &a);
        println!("{pps} {allocs}");
        return;
    }
    let (mut ours_pps, mut tpmd_pps, mut allocs) = (vec![], vec![], 0u64);
    for round in 0..a.rounds {
        let (pps, al) = ours_child(&a).unwrap_or_else(|e| fail(&e));
        eprintln!(
            "round {round}: peregrine xconnect {:.1} Mpps (heap allocations in window: {al})",
            pps / 1e6
        );
        ours_pps.push(pps);
        allocs += al;
        let p = testpmd(&a, round).unwrap_or_else(|e| fail(&e));
        eprintln!("round {round}: testpmd io        {:.1} Mpps", p / 1e6);
        tpmd_pps.push(p);
    }
    let (o, t) = (median(&ours_pps), median(&tpmd_pps));
    // Adjacent rounds share the host's state of the moment: their ratio is steadier than
    // the ratio of two medians when the host drifts.
    let pair_ratios: Vec<f64> = ours_pps.iter().zip(&tpmd_pps).map(|(a, b)| a / b).collect();
    let best =
        ours_pps.iter().cloned().fold(0.0, f64::max) / tpmd_pps.iter().cloned().fold(0.0, f64::max);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let result = serde_json::json!({
        "what": "forwarding rate per core, net_ring0 <-> net_ring1, 32 packets in flight per port, burst 32",
        "ours": "peregrine worker runtime (rx -> xconnect stage -> dispatch -> tx), one pinned worker",
        "baseline": "dpdk-testpmd --forward-mode=io, one forwarding core",
        "core": a.core,
        "seconds_per_round": a.seconds,
        "ours_mpps": ours_pps.iter().map(|p| p / 1e6).collect::<Vec<_>>(),
        "testpmd_mpps": tpmd_pps.iter().map(|p| p / 1e6).collect::<Vec<_>>(),
        "ours_median_mpps": o / 1e6,
        "testpmd_median_mpps": t / 1e6,
        "ratio": o / t,
        "ratio_median_of_round_pairs": median(&pair_ratios),
        "round_pair_ratios": pair_ratios,
        "ratio_of_best_rounds": best,
        "goal": 0.9,
        "heap_allocations_in_measurement_windows": allocs,
        "machine": format!(
            "{} cores, {}",
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            cpu
        ),
        "dpdk": "Debian libdpdk 22.11",
    });
    let text = serde_json::to_string_pretty(&result).expect("json");
    println!("{text}");
    if let Err(e) = std::fs::write(&a.out, text) {
        eprintln!("cannot write {}: {e}", a.out);
    }
}

fn fail(e: &str) -> ! {
    eprintln!("{e}");
    std::process::exit(1)
}
