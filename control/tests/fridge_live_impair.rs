//! Fridges on live kernel TCP with a server-side delay made by our own impairment stage in a
//! second `peregrine` process (issue 12's daemon test; `tc netem` is not available here):
//!
//! ```text
//!  gnb netns (UE on TUN, gNB)  =  UPF (peregrine, kind upf)  =  hop (peregrine, kind impair)  =  dn netns
//!                                 N6 vantage: SYN out, SYN-ACK back   125 ms each way
//! ```
//!
//! Both daemons run on DPDK `net_af_packet` ports over veths (`testkit::tcp_rig` with
//! `dn_impair`). The hop delays every frame 125 ms towards the data network and 125 ms back,
//! so each handshake the UE opens takes 250 ms more between the SYN leaving the UPF's N6 and
//! the SYN-ACK coming back: the `tcp_handshake` slice at the N6 vantage must report a median
//! within 10 % of the configured 250 ms.
//!
//! What else is in that median is the wired leg: four veth crossings, the hop's af_packet
//! rx/tx and polling, and the DN kernel's SYN-ACK turnaround (0.2 ms in `fridge_live`, where
//! the same N6 slice sees only that leg), plus how late each poll-mode process and kernel
//! runs under load: 10-19 ms on the shared 2-core VM with two busy-polling daemons (load
//! average 4.8-6.3), whatever the delay (at 15 ms each way the median was 34-46 % above
//! 30 ms), which is why the delay is 125 ms each way, a 25 ms band (docs/fridge.md has the
//! runs). The test bounds it from both sides,
//! pair by pair:
//! - below: every pair took at least 250 ms less two wheel slots (the egress wheel releases a
//!   packet up to one 32.8 us slot early, each way);
//! - above: at most the UE's own `connect` time (the UPF sees the SYN leave after the UE
//!   sent it and the SYN-ACK arrive before the UE gets it);
//!
//! so the medians obey them up to the histogram's bin width (1/64), and then checks the 10 %
//! band against the configured delay. Every handshake is matched (p = 1, M = 1024, one in
//! flight at a time).
//!
//! Needs root, `ip netns`, ethtool and /dev/net/tun; outside CI it prints why and passes when
//! they are missing, under `CI` it fails.

use peregrine_testkit::tcp_rig::{median_ns as median, missing_prerequisite, Dir, Rig, RigConfig};
use peregrine_testkit::tools::skip;
use std::path::PathBuf;
use std::time::Duration;

/// The hop's one-way delay, each way.
const ONE_WAY: Duration = Duration::from_millis(125);
const HANDSHAKES: usize = 60;
/// A median read from the histogram is within one bin (1/64) of the samples' median.
const BIN: f64 = 1.02;
/// The egress wheel's slot: a held packet may leave this much early.
const SLOT_NS: f64 = 32_768.0;

const FRIDGE: &str = r#"
[fridge]
window_ms = 1000

[[fridge.slice]]
name = "n6-handshake"
kind = "tcp_handshake"
vantage = "n6"
m = 1024
p = 1.0
"#;

#[test]
fn n6_handshake_median_is_the_hops_delay() {
    let what = "the netns fridge test through an impair hop";
    if let Some(why) = missing_prerequisite() {
        return skip(what, why);
    }
    let dir = tempfile::tempdir().unwrap();
    let us = ONE_WAY.as_micros();
    let cfg = RigConfig {
        extra: FRIDGE.into(),
        dn_impair: Some(format!(
            "[pipeline.forward]\ndelay_us = {us}\n\n[pipeline.reverse]\ndelay_us = {us}\n"
        )),
        ..RigConfig::new(PathBuf::from(env!("CARGO_BIN_EXE_peregrine")), 100_000)
    };
    let rig = match Rig::start(&cfg, "fri", dir.path()) {
        Ok(r) => r,
        Err(e) => return skip(what, &format!("cannot build the rig: {e}")),
    };
    let from_ue = rig
        .handshakes(Dir::Ul, HANDSHAKES, 443)
        .unwrap_or_else(|e| panic!("UE -> DN handshakes: {e}\n{}", rig.log()));
    let (sum, hop) = rig.finish_all().expect("daemon summaries");
    let hop = hop.expect("the impair hop's summary");

    let configured = 2.0 * ONE_WAY.as_nanos() as f64;
    let ue_client = median(&from_ue);
    let slice = sum["fridge"]["slices"]
        .as_array()
        .unwrap_or_else(|| panic!("no fridge slices: {sum}"))
        .iter()
        .find(|s| s["slice"] == "n6-handshake")
        .unwrap_or_else(|| panic!("no slice n6-handshake: {sum}"))
        .clone();
    let med = slice["quantiles_ns"]["0.5"].as_f64().unwrap();
    eprintln!(
        "configured {:.1} ms; N6 handshake median {:.3} ms (wired leg and lateness {:.3} ms); UE connect median {:.3} ms; events {}; quantiles_ns {}",
        configured / 1e6,
        med / 1e6,
        (med - configured) / 1e6,
        ue_client / 1e6,
        slice["events"],
        slice["quantiles_ns"]
    );
    eprintln!("impair hop: drops {} ports {}", hop["drops"], hop["ports"]);

    assert_eq!(
        slice["events"]["matched"].as_u64(),
        Some(HANDSHAKES as u64),
        "{slice}"
    );
    // The hop ran the impair stage and dropped nothing by its own reasons.
    assert!(
        hop["stages"]
            .as_array()
            .is_some_and(|s| s.iter().any(|n| n == "impair")),
        "{hop}"
    );
    for d in hop["drops"].as_array().expect("drops") {
        if d[0].as_str().is_some_and(|n| n.starts_with("impair_")) {
            assert_eq!(d[1], 0, "impair hop dropped: {hop}");
        }
    }
    // Per-pair bounds, for the median up to a bin.
    let floor = configured - 2.0 * SLOT_NS;
    assert!(
        med * BIN >= floor,
        "N6 handshake median {med} ns below the hop's {configured} ns less two wheel slots: {slice}"
    );
    assert!(
        med <= ue_client * BIN,
        "N6 handshake median {med} ns above the UE's connect median {ue_client} ns: {slice}"
    );
    // Issue 12: within 10 % of the delay configured.
    assert!(
        (med - configured).abs() <= 0.1 * configured,
        "N6 handshake median {med} ns not within 10 % of the configured {configured} ns: {slice}"
    );
}
