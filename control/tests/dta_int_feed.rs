//! The INT sink feeding the DTA reporter (`[dta.int]`), end to end through real daemons on
//! the pcap backend: node A (INT source + transit, node ID 1) adds IOAM to a UDP flow; node
//! B (INT sink, node ID 3) strips it, hands its reports to the INT manager and, through the
//! telemetry bus, to its `[dta]` reporter, which sends one Postcarding report per hop keyed
//! by the flow's 5-tuple hash; a `dta-translator` daemon writes them into its region, and
//! the collector's path query of that key answers the hop values the sink reported (A's
//! node ID, then the Hop_Lim A wrote).

mod dta_common;

use dta_common::{dta_head, l3fwd_reporter, parse, reports, translate, COLLECTOR};
use peregrine_control::daemon::{self, RunOptions};
use peregrine_control::dta::feeds::int_flow_key;
use peregrine_control::dta::reporter::DtaReporterStats;
use peregrine_control::int::IntDaemonStats;
use peregrine_dataplane::io::pcapfile::{PcapWriter, Resolution};
use peregrine_dta::PathAnswer;
use peregrine_int::report::IntReport;
use peregrine_testkit::intpcap::{self, frame};
use peregrine_testkit::pcap::read_pcap;
use peregrine_testkit::tools::free_tcp_port;
use peregrine_wire::dta::Primitive;
use std::net::Ipv6Addr;
use std::path::Path;

const SRC: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 1);
const OTHER: Ipv6Addr = Ipv6Addr::new(0xfd00, 9, 0, 0, 0, 0, 0, 1);
const FLOW: usize = 20;

fn node(dir: &Path, rx: &str, tx: &str, int: &str, dta: &str) -> peregrine_control::config::Config {
    parse(&intpcap::config(rx, tx, int, dta), dir)
}

const RULE: &str = r#"{"int_request": {"ns_id": 7, "app_id": 1, "src_ip": "fd00:1::1",
    "dst_ip": "fd00:2::1", "src_port": 0, "dst_port": 5000, "protocol": "UDP",
    "trace_type": "0x7000E000", "mode": "count", "mode_setting": 1}}"#;

/// Run a node in a thread after installing the rule (the first matching packet comes 1.5 s
/// after the first one, so the rule is in place by then).
fn run_node(
    cfg: peregrine_control::config::Config,
    rules: &str,
) -> peregrine_control::summary::Summary {
    let h = std::thread::spawn(move || daemon::run(&cfg, &RunOptions::default()).expect("run"));
    let ctx = zmq::Context::new();
    let s = ctx.socket(zmq::REQ).unwrap();
    s.set_linger(0).unwrap();
    s.set_rcvtimeo(5000).unwrap();
    s.connect(rules).unwrap();
    s.send(RULE, 0).unwrap();
    let reply = String::from_utf8(s.recv_bytes(0).expect("manager replies")).unwrap();
    assert!(
        reply.contains("installed") || reply.contains("ok"),
        "{reply}"
    );
    h.join().unwrap()
}

#[test]
fn int_sink_hops_become_postcards_the_collector_decodes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut w = PcapWriter::create(d.join("in.pcap"), Resolution::Nano).unwrap();
    w.write(1_000_000_000, &frame(SRC, OTHER, 5000, 999))
        .unwrap();
    let at = |i: usize| 2_500_000_000 + i as u64 * 20_000_000;
    for i in 0..FLOW {
        w.write(at(i), &frame(SRC, DST, 5000, i as u16)).unwrap();
    }
    let t = at(FLOW - 1);
    // Packets of another flow (no rule: no INT) keep B's replay going while its last
    // reports leave.
    for k in 1..=6u64 {
        w.write(t + k * 60_000_000, &frame(SRC, OTHER, 6000, k as u16))
            .unwrap();
    }
    w.flush().unwrap();
    let ep = |p: u16| format!("tcp://127.0.0.1:{p}");
    let (ra, pa, rb, pb) = (
        free_tcp_port(),
        free_tcp_port(),
        free_tcp_port(),
        free_tcp_port(),
    );
    let a = node(
        d,
        "in.pcap",
        "a.pcap",
        &format!(
            "node_id = 1\nroles = [\"source\", \"transit\"]\nrules = \"{}\"\nreports = \"{}\"",
            ep(ra),
            ep(pa)
        ),
        "",
    );
    run_node(a, &ep(ra));

    let dta = |value: &str| {
        format!(
            r#"
{head}sojourn = false

[dta.int]
value = "{value}"
"#,
            head = dta_head("p")
        )
    };
    let sink = format!(
        "node_id = 3\nroles = [\"sink\"]\nrules = \"{}\"\nreports = \"{}\"",
        ep(rb),
        ep(pb)
    );
    let summary = run_node(node(d, "a.pcap", "b.pcap", &sink, &dta("node_id")), &ep(rb));
    let int: IntDaemonStats = summary.feature("int").unwrap();
    let rs: DtaReporterStats = summary.feature("dta").unwrap();
    eprintln!("{int:?}\n{rs:?}");
    assert_eq!(
        int.reports,
        FLOW as u64 - 1,
        "the first packet carries the request"
    );
    assert_eq!((rs.int_paths, rs.int_skipped), (int.reports, 0));

    let key = int_flow_key(&IntReport {
        src: SRC,
        dst: DST,
        proto: 17,
        sport: 4000,
        dport: 5000,
        ..IntReport::default()
    });
    let reps = reports(&read_pcap(d.join("b.pcap")), COLLECTOR);
    assert_eq!(reps.len() as u64, rs.postcard);
    assert_eq!(rs.postcard, int.reports, "one hop per path");
    for (_, r) in &reps {
        assert_eq!(
            r.primitive,
            Primitive::Postcard {
                key,
                hop: 0,
                data: 1
            }
        );
    }
    let frames: Vec<Vec<u8>> = reps.into_iter().map(|(f, _)| f).collect();
    let (ts, c) = translate(d, &frames, "pc_chunks = 4093");
    assert_eq!(ts.refused.values().sum::<u64>(), 0, "{ts:?}");
    match c.path(key).unwrap() {
        PathAnswer::Found { hops, .. } => assert_eq!(hops, vec![1]),
        other => panic!("{other:?}"),
    }

    // The Hop_Lim instead (A writes the egress hop limit, 63) on the same INT input.
    let (rb, pb) = (free_tcp_port(), free_tcp_port());
    let sink = format!(
        "node_id = 3\nroles = [\"sink\"]\nrules = \"{}\"\nreports = \"{}\"",
        ep(rb),
        ep(pb)
    );
    run_node(
        node(d, "a.pcap", "b2.pcap", &sink, &dta("hop_limit")),
        &ep(rb),
    );
    let reps = reports(&read_pcap(d.join("b2.pcap")), COLLECTOR);
    assert!(!reps.is_empty());
    assert!(reps.iter().all(
        |(_, r)| matches!(r.primitive, Primitive::Postcard { key: k, hop: 0, data: 63 } if k == key)
    ));
}

#[test]
fn a_feed_without_its_producer_or_with_a_bad_key_is_refused_by_name() {
    let base = format!(
        "[backend]\nkind = \"pcap\"\n[[port]]\nname = \"p\"\nmac = \"02:00:00:00:00:01\"\n\
         tx = \"out.pcap\"\n{}",
        l3fwd_reporter()
    );
    for (extra, key, words) in [
        ("[dta.kestrel]\n", "dta.kestrel", "[kestrel]"),
        ("[dta.int]\n", "dta.int", "sink"),
        ("[dta.fridge]\nlist = 1\n", "dta.fridge", "[fridge]"),
        ("[dta.int]\nvalue = \"queue\"\n", "dta", "queue"),
        (
            "[dta.int]\nvalue_bits = 40\n",
            "dta.int.value_bits",
            "1..=32",
        ),
        ("[dta.fridge]\nlist = 1\nbogus = 2\n", "bogus", "bogus"),
        ("[dta.fridge]\n", "dta", "list"),
        ("[kestrel]\n[dta.kestrel]\n", "dta.kestrel", "upf"),
    ] {
        let text = format!("{base}{extra}");
        let e = peregrine_control::config::Config::parse(&text)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains(key) && e.contains(words), "{extra}: {e}");
    }
}
