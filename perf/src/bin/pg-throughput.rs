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
use peregrine_dataplane::runtime::{self, Pipeline, Reasons};
use peregrine_dataplane::stages::xconnect::XConnect;
use peregrine_perf::harness::net_ring::{self, Preloaded};
use peregrine_perf::harness::stats::{best, median, mpps, pair_ratios};
use peregrine_perf::harness::{child_failed, fail, report, run_self, Forwarding};
use peregrine_testkit::alloc::CountingAlloc;

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc::new();

#[derive(Parser, Debug)]
#[command(about = "Peregrine runtime vs dpdk-testpmd io on net_ring, same core, same session")]
struct Args {
    /// Seconds measured per round (after a 1 s warm-up).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    #[command(flatten)]
    fwd: Forwarding,
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

fn ours(a: &Args) -> (f64, u64) {
    let mut pre = Preloaded::inject(net_ring::backend(512), &[FRAME], a.fwd.inject);
    let run = runtime::start(
        &mut pre,
        &|_w: usize, r: &mut Reasons| Pipeline::new(vec![Box::new(XConnect::new(&[(0, 1)], r))]),
        &net_ring::one_worker(a.fwd.core, a.fwd.burst, a.egress),
    )
    .expect("start worker");
    let (pps, allocs) = net_ring::measure(&pre, &GLOBAL, a.seconds);
    run.request_stop();
    let c = run.join();
    assert_eq!(c.total_drops(), 0, "no drops on a pure cross-connect");
    (pps, allocs)
}

/// One round of our side in a fresh process (vdev ports cannot be re-probed in a process).
fn ours_child(a: &Args) -> Result<(f64, u64), String> {
    let out = run_self(
        ["--child".to_string()]
            .into_iter()
            .chain(a.fwd.child_args(a.seconds))
            .chain(a.egress.then(|| "--egress".to_string())),
    )?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace();
    match (
        it.next().and_then(|x| x.parse().ok()),
        it.next().and_then(|x| x.parse().ok()),
    ) {
        (Some(p), Some(al)) if out.status.success() => Ok((p, al)),
        _ => Err(child_failed("our child run", &out)),
    }
}

/// testpmd `io` forwarding on the same vdevs and core.
fn testpmd(a: &Args, round: usize) -> Result<f64, String> {
    a.fwd
        .testpmd("io", "pg-tpmd", round, String::new(), a.seconds)
}

fn main() {
    let a = Args::parse();
    if a.child {
        let (pps, allocs) = ours(&a);
        println!("{pps} {allocs}");
        return;
    }
    let (mut ours_pps, mut tpmd_pps, mut allocs) = (vec![], vec![], 0u64);
    for round in 0..a.fwd.rounds {
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
    let pairs = pair_ratios(&ours_pps, &tpmd_pps);
    let result = serde_json::json!({
        "what": "forwarding rate per core, net_ring0 <-> net_ring1, 32 packets in flight per port, burst 32",
        "ours": "peregrine worker runtime (rx -> xconnect stage -> dispatch -> tx), one pinned worker",
        "baseline": "dpdk-testpmd --forward-mode=io, one forwarding core",
        "core": a.fwd.core,
        "seconds_per_round": a.seconds,
        "ours_mpps": mpps(&ours_pps),
        "testpmd_mpps": mpps(&tpmd_pps),
        "ours_median_mpps": o / 1e6,
        "testpmd_median_mpps": t / 1e6,
        "ratio": o / t,
        "ratio_median_of_round_pairs": median(&pairs),
        "round_pair_ratios": pairs,
        "ratio_of_best_rounds": best(&ours_pps) / best(&tpmd_pps),
        "goal": 0.9,
        "heap_allocations_in_measurement_windows": allocs,
        "machine": format!("{} cores, {}", report::cores(), report::cpu_model().unwrap_or_default()),
        "dpdk": "Debian libdpdk 22.11",
    });
    if let Err(e) = report::print_and_write(&result, Some(a.out.as_ref())) {
        eprintln!("{e}");
    }
}
