//! The sketch-INT co-design on real packets (issue 13 item 3; `docs/codesign.md`
//! "Emulation"): four `peregrine run` processes and a Linux router in network namespaces, two
//! paths (p1 -> r -> {p2 | p3} -> p4), the gate on at the source p1, a few hundred UDP flows
//! with Zipf sizes sent from a namespace (AF_PACKET), the rules installed only at p1
//! (`peregrine_testkit::codesign_emu` runs it; `pg-codesign-emu` runs it bigger). Checked:
//! reports on both paths carry that path's transit hop; the merged per-flow records
//! (`peregrinectl codesign collect`: INT reports + the gate's exported switch records) are
//! within 10 % of what was sent for >= 90 % of the flows (the goal is 95 %: the margin is
//! for packets a loaded 2-core machine drops between the af_packet ports); large flows stop
//! carrying INT after the threshold (the gate's Prometheus counters and each large flow's
//! INT count); the gate cuts the INT bytes on the wire for the same traffic by what its counter says.
//!
//! Needs root, `ip netns` and python3; outside CI it prints why and passes when they are
//! missing, under `CI` it fails.

use peregrine_testkit::codesign_emu::{run, EmuParams};
use peregrine_testkit::intnet::preflight;
use peregrine_testkit::tools::skip;

#[test]
fn codesign_on_real_packets_in_namespaces() {
    let what = "the co-design emulation";
    if !preflight(what) {
        return;
    }
    let p = EmuParams {
        peregrine: env!("CARGO_BIN_EXE_peregrine").into(),
        flows: 300,
        zipf_s: 1.1,
        max_packets: 400,
        large: 32,
        small: 16,
        window_ms: 2000,
        rows: 3,
        width: 4096,
        burst: 4,
        seed: 13,
        tag: "cse".into(),
    };
    let r = match run(&p) {
        Ok(r) => r,
        Err(e) if e.starts_with("cannot build the namespaces") => return skip(what, &e),
        Err(e) => panic!("{e}"),
    };
    let (int_gate, int_plain) = r.int_bytes();
    let large: Vec<_> = r
        .flows
        .iter()
        .filter(|f| f.sent >= 4 * u64::from(p.large))
        .collect();
    eprintln!(
        "co-design emulation: {} flows, {} frames ({} delivered with the gate, {} without); within 10 %: {:.1} %; small-flow ARE {:.3}; INT bytes {} with the gate, {} without ({} / {} INT packets); gate switched {}, skipped {}, saved {} B; reports via p2 {:?}, via p3 {:?}; collector {}; {:.0} s",
        r.flows.len(),
        r.frames,
        r.delivered_gate,
        r.delivered_plain,
        100.0 * r.within(0.1),
        r.small_are(p.large),
        int_gate,
        int_plain,
        r.int_added_gate,
        r.int_added_plain,
        r.gate_switched,
        r.gate_skipped,
        r.gate_bytes_saved,
        r.paths[0],
        r.paths[1],
        r.collector,
        r.seconds
    );
    // Both paths: every report carries its path's transit hop (the rule went only to p1).
    for pr in r.paths {
        assert!(pr.reports > 0, "{:?}", r.paths);
        assert_eq!(pr.with_hop, pr.reports, "{:?}", r.paths);
    }
    // Large flows stop carrying INT after the threshold: per flow, and in p1's counters.
    assert!(!large.is_empty());
    for f in &large {
        assert!(
            f.int_packets <= 2 * u64::from(p.large) && f.sketch > 0,
            "large flow {f:?}"
        );
    }
    // gate_switched counts crossings of T_hi; a flow pushed past it by a collision is large
    // without one, so the packets skipped are the firmer check: every packet of a large flow
    // past its INT allowance.
    let past: u64 = large
        .iter()
        .map(|f| f.sent.saturating_sub(2 * u64::from(p.large)))
        .sum();
    assert!(r.gate_switched > 0, "{}", r.gate_switched);
    assert!(r.gate_skipped >= past, "{} < {past}", r.gate_skipped);
    assert!(r.gate_bytes_saved > 0);
    assert_eq!(r.collector["windows_refused"], 0, "{}", r.collector);
    // Accuracy of the merged records against what was sent.
    assert!(r.within(0.1) >= 0.9, "within 10 %: {}", r.within(0.1));
    // INT bytes on the wire: the gate removes the large flows' share, byte for byte what its
    // counter says it saved (1 % slack for in-band request packets and a lost frame).
    assert!(
        int_plain > 0 && int_gate < int_plain,
        "{int_gate} vs {int_plain}"
    );
    let saved = (int_plain - int_gate) as f64;
    assert!(
        (saved - r.gate_bytes_saved as f64).abs() <= 0.01 * saved,
        "wire {saved} vs counter {}",
        r.gate_bytes_saved
    );
}
