//! Paired comparisons of our own pipelines, alternating rounds in fresh processes:
//! `--fridge` and `--kestrel-compare` (UPF + a telemetry feature against the UPF alone) and
//! `--workers N` (the daemon's pipeline with N workers against one).

use super::*;

/// `--fridge`: UPF + fridge against the UPF alone, alternating rounds in one session.
pub(crate) fn fridge_mode(a: &Args) {
    let cases = each_case(a, |case, dir, size, n| {
        let with = format!("{dir}+fridge,{size},{n}");
        let r = paired_rounds(
            a,
            case,
            ["upf", "upf + fridge"],
            || ours_child(a, case),
            || ours_child(a, &with),
        );
        let mut row = r.row(dir, size, n, ["upf_mpps", "upf_fridge_mpps"]);
        row["drops"] = serde_json::json!(r.drops);
        row
    });
    let result = serde_json::json!({
        "what": "UPF + fridge stage vs UPF alone, net_ring0 <-> net_ring1, one core, alternating rounds",
        "fridge": "after the Upf stage on every packet sent (as the daemon places it: the stage observes every Tx packet): slices dns (N6, M=4096, p=1/16; the uplink frames are DNS queries to port 53) and tcp_handshake (no TCP in the traffic)",
        "goal_ratio": 0.9,
        "rounds": a.fwd.rounds,
        "seconds_per_round": a.seconds,
        "cases": cases,
        "machine": report::machine(),
    });
    let text = serde_json::to_string_pretty(&result).expect("json");
    std::fs::write(&a.fridge_out, &text)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", a.fridge_out)));
    println!("{text}");
}

/// `--kestrel-compare`: UPF + Kestrel tap against the UPF alone, same core, alternating
/// rounds in fresh processes; the paired ratios per case.
pub(crate) fn kestrel_mode(a: &Args) {
    let cases = each_case(a, |case, dir, size, n| {
        let r = paired_rounds(
            a,
            case,
            ["upf alone", "upf + kestrel"],
            || ours_child_opts(a, case, 1, false, false),
            || ours_child_opts(a, case, 1, false, true),
        );
        r.row(dir, size, n, ["upf_alone_mpps", "upf_kestrel_mpps"])
    });
    let result = serde_json::json!({
        "what": "UPF + Kestrel tap vs UPF alone, one worker, net_ring0 <-> net_ring1, alternating rounds in fresh processes",
        "kestrel": "tap on both ports: 2 directions x 8 QIDs x d=3 x w=512 hot buckets of 64 B (u16 counters spilling into 88 B wide buckets), bursts hashed and prefetched before the updates, 3GPP-PM counters, 1 s windows, no postcards",
        "goal_ratio": 0.9,
        "seconds_per_round": a.seconds,
        "rounds": a.fwd.rounds,
        "core": a.fwd.core,
        "cases": cases,
        "machine": report::machine(),
    });
    if let Err(e) = report::print_and_write(&result, Some(a.kestrel_out.as_ref())) {
        eprintln!("{e}");
    }
}

/// `--workers N`: the daemon's pipeline with N workers against one worker, alternating
/// rounds per case; see [`Args::workers`].
pub(crate) fn workers_mode(a: &Args) {
    let n = a.workers;
    let mut all_ok = true;
    let cases = each_case(a, |case, dir, size, s| {
        let (mut one, mut many, mut frac) = (vec![], vec![], vec![]);
        let mut drops: Vec<(String, u64)> = vec![];
        let mut allocs = 0;
        for round in 0..a.fwd.rounds {
            let run = |w: usize| ours_child_with(a, case, w, true).unwrap_or_else(|e| fail(&e));
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
        serde_json::json!({
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
        })
    });
    let result = serde_json::json!({
        "what": format!("the daemon's UPF pipeline with {n} workers vs 1 worker, net_ring0/net_ring1, alternating rounds"),
        "ours": "rx -> feed (next pre-generated frame, one per session) -> classify -> steer (N workers: by UE, hand-off over SPSC rings) -> Upf (reads the record) -> tx; each worker polls and sends on its own queue of both ports (a net_ring queue loops back to itself)",
        "workers": n,
        "steer": !a.no_steer,
        "one_worker_core": a.fwd.core,
        "worker_cores": (0..n).collect::<Vec<_>>(),
        "burst": a.fwd.burst,
        "inject_per_port_per_worker": a.fwd.inject,
        "seconds_per_round": a.seconds,
        "rounds": a.fwd.rounds,
        "cases": cases,
        "all_forwarded_zero_allocations": all_ok,
        "machine": format!(
            "{} (with 2 workers on 2 cores the EAL main thread, the measuring thread and everything else share them)",
            report::machine()
        ),
        "dpdk": "Debian libdpdk 22.11",
    });
    if let Err(e) = report::print_and_write(&result, Some(a.workers_out.as_ref())) {
        eprintln!("{e}");
    }
}

/// Each case of `--sessions` x `--dirs` x `--sizes` (in that nesting) as `dir,size,sessions`,
/// and `row`'s JSON for it.
fn each_case(
    a: &Args,
    mut row: impl FnMut(&str, &str, usize, usize) -> serde_json::Value,
) -> Vec<serde_json::Value> {
    let mut cases = vec![];
    for &n in &a.sessions {
        for dir in &a.dirs {
            for &size in &a.sizes {
                cases.push(row(&format!("{dir},{size},{n}"), dir, size, n));
            }
        }
    }
    cases
}

/// What [`paired_rounds`] measured: both sides' rates, and the allocations and drops of both.
struct Paired {
    base: Vec<f64>,
    with: Vec<f64>,
    allocs: u64,
    drops: Vec<(String, u64)>,
}

impl Paired {
    /// The case's JSON row: its direction, size and sessions, both sides' rates (Mpps, under
    /// `keys`: base, with), the round pairs' ratios (with / base) and their median, and the
    /// allocations in the measurement windows.
    fn row(&self, dir: &str, size: usize, n: usize, keys: [&str; 2]) -> serde_json::Value {
        let pairs = pair_ratios(&self.with, &self.base);
        let mut row = serde_json::json!({
            "direction": dir,
            "inner_bytes": size,
            "sessions": n,
            "round_pair_ratios": pairs,
            "ratio_median_of_round_pairs": median(&pairs),
            "heap_allocations_in_measurement_windows": self.allocs,
        });
        row[keys[0]] = serde_json::json!(mpps(&self.base));
        row[keys[1]] = serde_json::json!(mpps(&self.with));
        row
    }
}

/// `--rounds` rounds of `base` then `with` (fresh child processes), each round logged with
/// the sides' `names`.
fn paired_rounds(
    a: &Args,
    case: &str,
    names: [&str; 2],
    base: impl Fn() -> Result<Measured, String>,
    with: impl Fn() -> Result<Measured, String>,
) -> Paired {
    let mut r = Paired {
        base: vec![],
        with: vec![],
        allocs: 0,
        drops: vec![],
    };
    for round in 0..a.fwd.rounds {
        let m = base().unwrap_or_else(|e| fail(&e));
        let f = with().unwrap_or_else(|e| fail(&e));
        eprintln!(
            "{case} round {round}: {} {:.2} Mpps | {} {:.2} Mpps (allocs {}, drops {:?})",
            names[0],
            m.pps / 1e6,
            names[1],
            f.pps / 1e6,
            f.allocs,
            f.drops
        );
        r.allocs += m.allocs + f.allocs;
        r.drops.extend(m.drops.into_iter().chain(f.drops));
        r.base.push(m.pps);
        r.with.push(f.pps);
    }
    r
}
