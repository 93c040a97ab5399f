//! The `int` pipeline wired in the daemon, on the pcap backend (no root needed): node A
//! (INT source + transit) replays a flow into a pcap, node B (INT sink) replays A's output.
//! Rules go in over ZeroMQ (the seed's Listing 1 JSON) while the replay waits; the sink's
//! reports come out of B's PUB socket. Checked: A adds the in-band request to the first
//! packet and IOAM to every other, B reports every hop with A's node ID, Hop_Lim and a
//! POSIX (microsecond) wall-clock timestamp, and B's output is A's input byte for byte but
//! for the hop limit (two l3fwd hops) and the MACs.

use peregrine_control::config::Config;
use peregrine_control::daemon::{self, RunOptions};
use peregrine_dataplane::io::pcapfile::{PcapWriter, Resolution};
use peregrine_testkit::intpcap::{self, frame};
use peregrine_testkit::pcap::read_pcap;
use peregrine_testkit::tools::free_tcp_port;
use std::net::Ipv6Addr;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const SRC: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 1);
const OTHER: Ipv6Addr = Ipv6Addr::new(0xfd00, 9, 0, 0, 0, 0, 0, 1);
const FLOW: usize = 20;

fn config(dir: &Path, rx: &str, tx: &str, int: &str) -> Config {
    let mut c = Config::parse(&intpcap::config(rx, tx, int, "")).unwrap();
    c.base_dir = dir.to_path_buf();
    c
}

fn req(ep: &str, msg: &str) -> serde_json::Value {
    let ctx = zmq::Context::new();
    let s = ctx.socket(zmq::REQ).unwrap();
    s.set_linger(0).unwrap();
    s.set_rcvtimeo(5000).unwrap();
    s.connect(ep).unwrap();
    s.send(msg, 0).unwrap();
    let r = s.recv_bytes(0).expect("manager replies");
    serde_json::from_slice(&r).unwrap()
}

const RULE: &str = r#"{"int_request": {"ns_id": 7, "app_id": 1, "src_ip": "fd00:1::1",
    "dst_ip": "fd00:2::1", "src_port": 0, "dst_port": 5000, "protocol": "UDP",
    "trace_type": "0x7000E000", "mode": "count", "mode_setting": 1}}"#;

/// Run a node in a thread after installing the rule; the replay's first matching packet
/// comes 1.5 s after a non-matching one, so the rule is in place by then.
fn run_node(cfg: Config, rules: &str) {
    let h = std::thread::spawn(move || daemon::run(&cfg, &RunOptions::default()).expect("run"));
    let reply = req(rules, RULE);
    assert!(
        reply.to_string().contains("installed") || reply.to_string().contains("ok"),
        "{reply}"
    );
    let summary = h.join().unwrap();
    let int = summary
        .feature::<peregrine_control::int::IntDaemonStats>("int")
        .expect("int summary");
    eprintln!("{int:?}");
}

#[test]
fn int_pipeline_source_transit_then_sink_over_pcap() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    let mut w = PcapWriter::create(&input, Resolution::Nano).unwrap();
    let mut sent = vec![frame(SRC, OTHER, 5000, 999)];
    w.write(1_000_000_000, &sent[0]).unwrap();
    for i in 0..FLOW {
        let f = frame(SRC, DST, 5000, i as u16);
        w.write(2_500_000_000 + i as u64 * 1_000_000, &f).unwrap();
        sent.push(f);
    }
    w.flush().unwrap();

    let (ra, pa, rb, pb) = (
        free_tcp_port(),
        free_tcp_port(),
        free_tcp_port(),
        free_tcp_port(),
    );
    let ep = |p: u16| format!("tcp://127.0.0.1:{p}");
    let a = config(
        dir.path(),
        "in.pcap",
        "a.pcap",
        &format!(
            "node_id = 1\nroles = [\"source\", \"transit\"]\nrules = \"{}\"\nreports = \"{}\"",
            ep(ra),
            ep(pa)
        ),
    );
    run_node(a, &ep(ra));
    let mid = read_pcap(dir.path().join("a.pcap"));
    assert_eq!(mid.len(), FLOW + 1);
    // The first matching packet carries the in-band request (0x32), the rest IOAM (0x31).
    assert_eq!(mid[1][20], 0, "next header is Hop-by-Hop");
    assert_eq!(mid[1][54 + 2], 0x32, "{:02x?}", &mid[1][54..70]);
    for f in &mid[2..] {
        assert_eq!(f[20], 0);
        assert_eq!(f[54 + 4], 0x31, "{:02x?}", &f[54..70]);
    }

    // Node B: the sink. Subscribe before its replay reaches the INT packets.
    let b = config(
        dir.path(),
        "a.pcap",
        "b.pcap",
        &format!(
            "node_id = 3\nroles = [\"sink\"]\nrules = \"{}\"\nreports = \"{}\"",
            ep(rb),
            ep(pb)
        ),
    );
    let ctx = zmq::Context::new();
    let sub = ctx.socket(zmq::SUB).unwrap();
    sub.set_subscribe(b"raw/").unwrap();
    sub.set_rcvtimeo(200).unwrap();
    sub.connect(&ep(pb)).unwrap();
    let collector = std::thread::spawn(move || {
        let mut got = vec![];
        let t0 = std::time::Instant::now();
        // The loop ends at the last expected report; the deadline only bounds a failing run
        // (8 s was too short for a daemon start on a loaded 2-core machine).
        while t0.elapsed() < Duration::from_secs(30) && got.len() < FLOW - 1 {
            if let Ok(m) = sub.recv_multipart(0) {
                got.push(serde_json::from_slice::<serde_json::Value>(&m[1]).unwrap());
            }
        }
        got
    });
    let before = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    run_node(b, &ep(rb));
    let reports = collector.join().unwrap();
    let out = read_pcap(dir.path().join("b.pcap"));
    assert_eq!(out.len(), FLOW + 1);
    for (o, s) in out.iter().zip(&sent) {
        assert_eq!(o.len(), s.len(), "INT headers stripped");
        assert_eq!(o[14 + 7], s[14 + 7] - 2, "two l3fwd hops");
        assert_eq!(o[14..21], s[14..21]);
        assert_eq!(o[22..], s[22..], "byte-identical but for the hop limit");
    }
    assert_eq!(reports.len(), FLOW - 1, "{reports:?}");
    for r in &reports {
        assert_eq!(r["ns_id"], 7);
        assert_eq!(r["app_id"], 1);
        assert_eq!(r["sink_node_id"], 3);
        let hops = r["hops"].as_array().unwrap();
        assert_eq!(hops.len(), 1, "{r}");
        assert_eq!(hops[0]["node_id"], 1);
        assert_eq!(
            hops[0]["hop_limit"], 63,
            "the transit writes the egress hop limit"
        );
        let ts = hops[0]["timestamp_ns"].as_u64().unwrap();
        assert_eq!(ts % 1000, 0, "POSIX timestamps: microseconds");
        let src_ts = r["e2e"]["timestamp_ns"].as_u64().unwrap();
        assert!(src_ts <= ts + 1000 && ts < before, "{src_ts} {ts} {before}");
        assert!(
            before - src_ts < 60_000_000_000,
            "wall clock, not the worker clock"
        );
        assert!(r["e2e"]["tx_packets"].as_u64().unwrap() >= 2);
        assert!(r["arrival_ns"].as_u64().unwrap() > before);
    }
}
