//! Flow steering end to end (issue 8 item 5): one session's uplink enters on two N3 ports,
//! each polled by its own worker, and is still metered by one QER MBR.
//!
//! The pcap backend gives port `p` to worker `p % workers`, so with ports `n3` (worker 0),
//! `n3b` (worker 1) and `n6` (worker 0) the session's uplink, split packet by packet between
//! `n3` and `n3b`, arrives on both workers. `Steer` hands every packet of the UE to one
//! worker, whose meter then sees the whole offered rate. Without steering each worker's
//! meter would let through the full MBR of its own half: about twice the MBR in all.

use peregrine_testkit::daemon;
use peregrine_testkit::mbr::{assert_windows_at_mbr, inner_lengths, offered_windows, qfi_row};
use peregrine_testkit::pcap::{read_records, PcapWriter};
use peregrine_testkit::traffic::{self, IpMix, Sizes, TrafficSpec};
use std::path::{Path, PathBuf};
use std::time::Duration;

const MBR_KBPS: u64 = 3840;
const MBR_BYTES: u64 = MBR_KBPS * 1000 / 8;

/// The MAC address of the second N3 port.
const N3B_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];

/// Write every other record of `src` to `a` and the rest to `b` (timestamps kept; frames to
/// `b` addressed to [`N3B_MAC`]), so each file carries half of one session's traffic,
/// interleaved in time with the other.
fn split_alternate(src: &Path, a: &Path, b: &Path) {
    let (mut wa, mut wb) = (
        PcapWriter::create(a).unwrap(),
        PcapWriter::create(b).unwrap(),
    );
    for (i, mut r) in read_records(src).unwrap().into_iter().enumerate() {
        if i % 2 == 0 {
            wa.write(r.ts_ns, &r.data).unwrap();
        } else {
            r.data[..6].copy_from_slice(&N3B_MAC);
            wb.write(r.ts_ns, &r.data).unwrap();
        }
    }
    wa.flush().unwrap();
    wb.flush().unwrap();
}

/// Run the UPF on `ports` (the `[[port]]` tables) with 2 workers over a replay on its
/// recorded clock, until the replay ends; the JSON summary.
fn run_upf(dir: &Path, ports: &str) -> serde_json::Value {
    let cfg = format!(
        r#"
[workers]
count = 2

[backend]
kind = "pcap"
replay = "recorded"
loops = 1
{ports}
[pipeline]
kind = "upf"

{routes}
{upf}
mbr_kbps = {MBR_KBPS}

# The policer this test was written for (10 ms bursts, red dropped); the default is now
# shaping (docs/upf.md, "MBR enforcement").
[upf.qos]
mbr_enforcement = "policing"
pbs = "10ms"
cbs = "10ms"
min_burst_bytes = 3200
"#,
        upf = peregrine_testkit::daemon::UPF_ONE_SESSION,
        routes = peregrine_testkit::netns::gnb_dn_routes(
            &["192.0.2.0/24", "192.168.1.0/24"],
            &["198.51.100.0/24"]
        ),
    );
    let bin = env!("CARGO_BIN_EXE_peregrine");
    daemon::run_to_end(bin, dir, &cfg, Duration::from_secs(60)).1
}

/// TS 29.244 section 5.4.2 (QER MBR) with two workers: a session offered about twice its
/// MBR of 3,840 kbit/s per direction (1,000-byte frames, 1,000 pps per direction, 4.1 s of
/// trace time), its uplink split packet by packet over two N3 ports on two workers, is
/// delivered at its MBR within 5 % in every full 1 s window of the output capture, both
/// directions; steering handed the packets that arrived on the non-owning worker's port(s)
/// to the owner, and none was lost on the way.
///
/// The replay runs on its recorded clock (as in the 1-worker test of `n4.rs`): each worker's
/// clock follows the capture times of its batches, a batch handed over from the other
/// worker included, and never goes back, so the owner's meter sees the trace's own timing.
#[test]
fn two_workers_meter_one_session_at_its_mbr() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let spec = TrafficSpec {
        ues: 1,
        packets: 8200,
        sizes: Sizes::Fixed(vec![1000]),
        ul_ratio: 0.5,
        inner: IpMix::V4,
        outer: IpMix::V4,
        qfis: vec![9],
        gnbs: 1,
        anomalies: 0,
        rate_pps: Some(2000.0),
        ..TrafficSpec::default()
    };
    let (ul, dl) = (d.join("ul.pcap"), d.join("dl.pcap"));
    traffic::write_pcaps(&spec, &ul, &dl).unwrap();
    let (ul_a, ul_b): (PathBuf, PathBuf) = (d.join("ul-a.pcap"), d.join("ul-b.pcap"));
    split_alternate(&ul, &ul_a, &ul_b);

    let offered_ul = inner_lengths(&ul, true);
    let offered_dl = inner_lengths(&dl, false);
    let (a, b) = (
        inner_lengths(&ul_a, true).len(),
        inner_lengths(&ul_b, true).len(),
    );
    assert!(
        a > 1000 && b > 1000 && a + b == offered_ul.len(),
        "{a} + {b}"
    );
    let windows = 4;
    let t0 = offered_windows(&offered_ul, &offered_dl, windows, MBR_BYTES);

    // Port ids 0, 1, 2: n3 and n6 on worker 0, n3b on worker 1.
    let ports = format!(
        r#"
[[port]]
name = "n3"
mac = "02:00:00:00:00:03"
rx = "{}"
tx = "n3-tx.pcap"

[[port]]
name = "n3b"
mac = "02:00:00:00:00:0b"
rx = "{}"

[[port]]
name = "n6"
mac = "02:00:00:00:00:06"
rx = "{}"
tx = "n6-tx.pcap"
"#,
        ul_a.display(),
        ul_b.display(),
        dl.display()
    );
    let s = run_upf(d, &ports);
    let total_in = (offered_ul.len() + offered_dl.len()) as u64;
    assert_eq!(s["workers"], 2, "{s}");
    // Each packet is counted as received once on its port; a handed-off one once more by
    // the worker that took it over (so `packets_in` counts ports only).
    assert_eq!(s["packets_in"].as_u64(), Some(total_in), "{s}");
    let port_rx = |n: &str| {
        s["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == n)
            .and_then(|p| p["rx"].as_u64())
            .unwrap()
    };
    assert_eq!(port_rx("n3b"), b as u64, "{s}");
    // The UE's packets all go to one worker: every packet that arrived on the other
    // worker's port(s) was handed off, and nothing else (n3 and n6 share worker 0; n3b is
    // worker 1's alone).
    let handed = s["handed_off"].as_u64().unwrap();
    let (w0, w1) = ((a + offered_dl.len()) as u64, b as u64);
    assert!(
        handed == w0 || handed == w1,
        "handed off {handed}, expected {w0} (owner worker 1) or {w1} (owner worker 0): {s}"
    );
    let drop = |r: &str| {
        s["drops"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d[0] == r)
            .and_then(|d| d[1].as_u64())
    };
    assert_eq!(drop("handoff_ring_full"), Some(0), "{s}");
    assert_eq!(drop("bad_handoff"), Some(0), "{s}");
    // Every drop is the meter's: no frame was refused on the way.
    for d in s["drops"].as_array().unwrap() {
        assert!(d[0] == "mbr_exceeded" || d[1] == 0, "dropped {d}: {s}");
    }
    let nombuf: u64 = s["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["stats_rx_nombuf"].as_u64().unwrap())
        .sum();
    assert_eq!(nombuf, 0, "{s}");

    let delivered_ul = inner_lengths(&d.join("n6-tx.pcap"), false);
    let delivered_dl = inner_lengths(&d.join("n3-tx.pcap"), true);
    for (name, o, dlv) in [
        ("uplink", &offered_ul, &delivered_ul),
        ("downlink", &offered_dl, &delivered_dl),
    ] {
        assert_windows_at_mbr(name, dlv, t0, windows, MBR_BYTES);
        let row = qfi_row(&s, name, 9);
        let n = |k: &str| row[k].as_u64().unwrap();
        assert_eq!(n("packets"), dlv.len() as u64, "{row}");
        assert_eq!(n("packets") + n("drops"), o.len() as u64, "{row}");
        assert_eq!(n("red"), n("drops"), "{row}");
    }
}
