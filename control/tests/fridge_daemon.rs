//! The fridge through the daemon: the UPF with two workers replays TCP handshakes on its
//! recorded clock. UE SYNs arrive as G-PDUs split over two N3 ports (one per worker), the
//! server's SYN-ACKs come back on N6 a configured delay later (30 ms, +-5% jitter), so a
//! request and its response arrive on different workers and only meet because steering
//! hands every packet of the UE to one worker. The `[fridge]` slices at the N6 vantage then
//! report, in the summary, every handshake matched and a median within 10% of the delay.

mod one_session;

use one_session::one_session;
use peregrine_testkit::daemon;
use peregrine_testkit::frames::tcp_segment as tcp;
use peregrine_testkit::pcap::PcapWriter;
use peregrine_testkit::upf as upf_support;
use std::path::Path;
use std::time::Duration;

const DELAY_NS: u64 = 30_000_000;
const FLOWS: u32 = 300;

fn run(dir: &Path, cfg: &str) -> serde_json::Value {
    let bin = env!("CARGO_BIN_EXE_peregrine");
    let (stdout, summary) = daemon::run_to_end(bin, dir, cfg, Duration::from_secs(60));
    eprintln!("{stdout}");
    summary
}

#[test]
fn handshake_rtt_median_through_the_daemon_with_two_workers() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (s, ue, server) = one_session();
    let (mut n3a, mut n3b, mut n6) = (
        PcapWriter::create(d.join("n3a.pcap")).unwrap(),
        PcapWriter::create(d.join("n3b.pcap")).unwrap(),
        PcapWriter::create(d.join("n6.pcap")).unwrap(),
    );
    let mut dl = Vec::new();
    let mut delays = Vec::new();
    for i in 0..FLOWS {
        let t = 1_000_000_000 + u64::from(i) * 10_000_000;
        let port = 40_000 + i as u16;
        let isn = 1_000 * i;
        let syn = tcp(ue, server, (port, 443), isn, 0, 0x02);
        let f = upf_support::ul_frame(false, s.ul_teid, Some(9), &syn);
        if i % 2 == 0 { &mut n3a } else { &mut n3b }
            .write(t, &f)
            .unwrap();
        // +-5% jitter, deterministic.
        let jitter = (i64::from(i % 21) - 10) * (DELAY_NS as i64 / 200);
        let delay = (DELAY_NS as i64 + jitter) as u64;
        delays.push(delay);
        let sa = tcp(server, ue, (443, port), 7, isn + 1, 0x12);
        dl.push((t + delay, upf_support::dl_frame(&sa)));
    }
    for (t, f) in dl {
        n6.write(t, &f).unwrap();
    }
    n3a.flush().unwrap();
    n3b.flush().unwrap();
    n6.flush().unwrap();
    delays.sort_unstable();
    let truth = delays[delays.len() / 2] as f64;

    let cfg = format!(
        r#"
[workers]
count = 2

[backend]
kind = "pcap"
replay = "recorded"
loops = 1

[[port]]
name = "n3"
mac = "02:00:00:00:00:03"
rx = "{a}"
tx = "n3-tx.pcap"

[[port]]
name = "n3b"
mac = "02:00:00:00:00:0b"
rx = "{b}"

[[port]]
name = "n6"
mac = "02:00:00:00:00:06"
rx = "{c}"
tx = "n6-tx.pcap"

[pipeline]
kind = "upf"
promiscuous = true

{routes}
{upf}

[fridge]
window_ms = 1000
raw_file = "raw.csv"

[[fridge.slice]]
name = "https"
kind = "tcp_handshake"
vantage = "n6"
qfi = [9]
ports = [443]
m = 1024
p = 1.0

[[fridge.slice]]
name = "small"
kind = "tcp_handshake"
vantage = "n6"
fridges = [{{ m = 4, p = 0.5 }}, {{ m = 4, p = 0.25 }}]
"#,
        a = d.join("n3a.pcap").display(),
        b = d.join("n3b.pcap").display(),
        c = d.join("n6.pcap").display(),
        routes = peregrine_testkit::daemon::n3_n6_routes(),
        upf = peregrine_testkit::daemon::UPF_ONE_SESSION,
    );
    let sum = run(d, &cfg);
    let f = &sum["fridge"];
    let slice = |n: &str| {
        f["slices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["slice"] == n)
            .unwrap_or_else(|| panic!("no slice {n}: {f}"))
            .clone()
    };
    let https = slice("https");
    // p = 1 and about three handshakes in flight in 1,024 slots: every SYN-ACK found its SYN
    // unless a colliding SYN overwrote it (rare, and the weights make up for it), although
    // half the SYNs arrived on the other worker. Without steering half would be unmatched.
    let ev = |k: &str| https["events"][k].as_u64().unwrap();
    assert_eq!(ev("requests"), u64::from(FLOWS), "{f}");
    assert_eq!(ev("responses"), u64::from(FLOWS), "{f}");
    assert_eq!(ev("matched") + ev("overwrote"), u64::from(FLOWS), "{f}");
    assert!(ev("overwrote") <= 5, "{f}");
    assert_eq!(https["samples"].as_u64(), Some(ev("matched")), "{f}");
    let med = https["quantiles_ns"]["0.5"].as_f64().unwrap();
    assert!(
        (med / truth - 1.0).abs() < 0.10,
        "median {med} ns vs {truth}: {f}"
    );
    let pairs = https["estimated_pairs"].as_f64().unwrap();
    assert!((pairs / f64::from(FLOWS) - 1.0).abs() < 0.02, "{f}");
    // The first slice takes every role: nothing left for the second.
    assert_eq!(slice("small")["samples"].as_u64(), Some(0), "{f}");
    assert!(sum["handed_off"].as_u64().unwrap() > 0, "{sum}");
    // Raw samples: one CSV line per matched SYN-ACK, read back.
    let raw = &f["raw"];
    assert_eq!(raw["written"].as_u64(), Some(ev("matched")), "{f}");
    assert_eq!(
        (raw["ring_full"].as_u64(), raw["file_full"].as_u64()),
        (Some(0), Some(0))
    );
    let text = std::fs::read_to_string(d.join("raw.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(peregrine_control::fridge::RAW_HEADER));
    let mut raw_delays = Vec::new();
    for l in lines {
        let c: Vec<&str> = l.split(',').collect();
        assert_eq!(c.len(), 7, "{l}");
        assert!(c[0] == "0" || c[0] == "1", "worker: {l}");
        assert_eq!((c[1], c[2]), ("https", "0"), "{l}");
        let delay: u64 = c[4].parse().unwrap();
        let x: u64 = c[5].parse().unwrap();
        let w: f64 = c[6].parse().unwrap();
        // About 3 handshakes in flight, 10 ms apart: few insertions in between.
        assert!(delay > 0 && x <= 10 && w >= 1.0, "{l}");
        raw_delays.push(delay);
    }
    let n = raw_delays.len() as u64;
    // The samples are the ones tallied: their median is the estimate's (p = 1, weights ~1),
    // to the histogram's 1% bins.
    raw_delays.sort_unstable();
    let raw_med = raw_delays[raw_delays.len() / 2] as f64;
    assert!(
        (raw_med / med - 1.0).abs() < 0.02,
        "raw median {raw_med} vs {med}"
    );
    assert_eq!(n, ev("matched"));
}
