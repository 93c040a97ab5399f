//! INT in the `upf` pipeline, on the pcap backend (no root): one UPF with a static session,
//! `[int] n6_ports = ["n6"]`, sink before the UPF stage on N6 ingress and source on N6 egress.
//!
//! * Downlink: a remote INT source upstream (our `IntSource`, in this process, node 1) sends
//!   IPv6 with IOAM toward the UE; it enters N6, the UPF's sink reports it on the PUB socket
//!   and strips it before encapsulation: the G-PDU on N3 carries the original inner packet,
//!   byte-identical but for the hop limit the UPF decrements.
//! * Uplink: G-PDUs (with a PDU Session Container, TS 38.415) decapsulated to N6 get INT from
//!   the UPF's source after decap: the first matching packet the in-band request (0x32), the
//!   rest an IOAM trace (0x31) that tshark decodes with the UPF's node ID.

use peregrine_control::config::Config;
use peregrine_control::daemon::{self, RunOptions};
use peregrine_dataplane::io::pcapfile::{PcapWriter, Resolution};
use peregrine_dataplane::runtime::{Batch, Context, Disposition, Publisher, Stage};
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use peregrine_int::namespace::NamespaceTable;
use peregrine_int::request::{Flags, Mode, Protocol, Rule, TraceType};
use peregrine_int::stages::{IntConfig, IntSource, L3Offset};
use peregrine_testkit::frames::ipv6_udp;
use peregrine_testkit::pcap::read_pcap;
use peregrine_testkit::tools::free_tcp_port;
use peregrine_wire::int::TsFormat;
use std::net::Ipv6Addr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const UE: Ipv6Addr = Ipv6Addr::new(0xfd00, 1, 0, 0, 0, 0, 0, 1);
const DN: Ipv6Addr = Ipv6Addr::new(0xfd00, 2, 0, 0, 0, 0, 0, 1);
const FLOW: usize = 12;
const UPF_NODE: u16 = 9;

/// IPv6 (hop limit 64) / UDP 4000 -> `dport` with a valid checksum (RFC 8200 8.1).
fn udp6(src: Ipv6Addr, dst: Ipv6Addr, dport: u16, seq: u16) -> Vec<u8> {
    let payload: Vec<u8> = (0..40u16).map(|i| (i ^ seq) as u8).collect();
    ipv6_udp(src, dst, 4000, dport, &payload)
}

fn eth(dst: [u8; 6], ethertype: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 9, 9]);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

/// Ethernet / IPv4 gNB -> UPF / UDP 2152 / GTP-U G-PDU (TEID 0x100) with a UL PDU Session
/// Container (TS 38.415 5.5.2.2, QFI 9) / `inner`.
fn gpdu(inner: &[u8]) -> Vec<u8> {
    let mut gtp = vec![0x34, 0xff];
    gtp.extend_from_slice(&((8 + inner.len()) as u16).to_be_bytes());
    gtp.extend_from_slice(&0x100u32.to_be_bytes());
    gtp.extend_from_slice(&[0, 0, 0, 0x85, 1, 0x10, 9, 0]);
    gtp.extend_from_slice(inner);
    let mut udp = vec![0xc3, 0x50, 0x08, 0x68];
    udp.extend_from_slice(&((8 + gtp.len()) as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(&gtp);
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&((20 + udp.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 192, 0, 2, 10, 192, 0, 2, 1]);
    let mut sum: u32 = ip
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    ip.extend_from_slice(&udp);
    eth([2, 0, 0, 0, 0, 3], 0x0800, &ip)
}

/// The inner packet of a G-PDU frame (Ethernet / IPv4 / UDP / GTP-U with extension headers).
fn inner_of(f: &[u8]) -> &[u8] {
    assert_eq!(f[12..14], [0x08, 0x00], "outer IPv4");
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let udp = 14 + ihl;
    assert_eq!(f[udp + 2..udp + 4], 2152u16.to_be_bytes(), "to GTP-U");
    let g = udp + 8;
    assert_eq!(f[g + 1], 0xff, "G-PDU");
    let mut at = g + 8;
    if f[g] & 0x07 != 0 {
        let mut next = f[g + 11];
        at = g + 12;
        while next != 0 {
            let len = usize::from(f[at]) * 4;
            next = f[at + len - 1];
            at += len;
        }
    }
    &f[at..]
}

fn req(ep: &str, msg: &str) -> String {
    let ctx = zmq::Context::new();
    let s = ctx.socket(zmq::REQ).unwrap();
    s.set_linger(0).unwrap();
    s.set_rcvtimeo(5000).unwrap();
    s.connect(ep).unwrap();
    s.send(msg, 0).unwrap();
    String::from_utf8(s.recv_bytes(0).expect("manager replies")).unwrap()
}

/// Downlink flow's rule (the remote source's namespace) and the uplink flow's (ours).
const DL_RULE: &str = r#"{"int_request": {"ns_id": 7, "app_id": 1, "src_ip": "fd00:2::1",
    "dst_ip": "fd00:1::1", "src_port": 0, "dst_port": 5000, "protocol": "UDP",
    "trace_type": "0x7000E000", "mode": "count", "mode_setting": 1}}"#;
const UL_RULE: &str = r#"{"int_request": {"ns_id": 8, "app_id": 2, "src_ip": "fd00:1::1",
    "dst_ip": "fd00:2::1", "src_port": 0, "dst_port": 6000, "protocol": "UDP",
    "trace_type": "0x7000E000", "mode": "count", "mode_setting": 1}}"#;

/// The remote source upstream of N6: the frames of `plain` with INT added by an `IntSource`
/// (node 1) holding the downlink rule, as the daemon configures it (POSIX wall clock).
fn remote_source(plain: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut table = NamespaceTable::default();
    table
        .install(Rule {
            ns_id: 7,
            app_id: 1,
            src_ip: DN,
            dst_ip: UE,
            src_port: 0,
            dst_port: 5000,
            protocol: Protocol::Udp,
            trace_type: TraceType(0x7000_E000),
            mode: Mode::Count(1),
            flags: Flags::default(),
        })
        .unwrap();
    let publisher = Publisher::new((*table.snapshot()).clone());
    let mut src = IntSource::new(
        IntConfig {
            node_id: 1,
            l3: L3Offset::Raw,
            ioam_timestamp: TsFormat::Posix,
            wall_clock: true,
            hop_limit_after_forward: true,
            ..IntConfig::default()
        },
        publisher.reader(),
    );
    plain
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut b = Batch::<OwnedBuf>::new();
            b.push(OwnedBuf::from_slice(f), Disposition::CONTINUE)
                .unwrap();
            src.process(&mut b, &Context::fixed(i as u64 * 1_000_000, 0));
            let out = b.drain().next().unwrap().0.data().to_vec();
            out
        })
        .collect()
}

fn config(dir: &Path, rules: &str, reports: &str) -> Config {
    let text = format!(
        r#"
[backend]
kind = "pcap"
replay = "timed"

[[port]]
name = "n3"
mac = "02:00:00:00:00:03"
rx = "n3-in.pcap"
tx = "n3-out.pcap"

[[port]]
name = "n6"
mac = "02:00:00:00:00:06"
rx = "n6-in.pcap"
tx = "n6-out.pcap"

[pipeline]
kind = "upf"
promiscuous = true

[upf]
node_id = "192.0.2.1"
n3 = ["192.0.2.1"]

[[upf.session]]
seid = 1
ue_ipv6 = "fd00:1::1"
ul_teid = 256
gnb = "192.0.2.10"
dl_teid = 512
qfi = 9

[[route]]
prefix = "192.0.2.0/24"
port = "n3"
next_hop_mac = "02:00:00:00:03:01"

[[route]]
prefix = "fd00:2::/32"
port = "n6"
next_hop_mac = "02:00:00:00:06:01"

[int]
node_id = {UPF_NODE}
roles = ["sink", "source"]
rules = "{rules}"
reports = "{reports}"
n6_ports = ["n6"]
n6_in = ["sink"]
n6_out = ["source"]
"#
    );
    let mut c = Config::parse(&text).unwrap();
    c.base_dir = dir.to_path_buf();
    c
}

#[test]
fn upf_n6_sink_strips_downlink_int_and_source_instruments_decapsulated_uplink() {
    let dir = tempfile::tempdir().unwrap();
    // Downlink on N6: one packet of another flow first (sent before the rules are in), then
    // the instrumented flow 1.5 s later.
    let dl_plain: Vec<Vec<u8>> = std::iter::once(udp6(DN, UE, 7000, 999))
        .chain((0..FLOW).map(|i| udp6(DN, UE, 5000, i as u16)))
        .collect();
    let dl_int = remote_source(&dl_plain);
    assert_eq!(dl_int[0], dl_plain[0], "not the remote source's flow");
    assert_eq!(
        dl_int[1][6], 0,
        "the remote source adds a Hop-by-Hop header"
    );
    let mut w = PcapWriter::create(dir.path().join("n6-in.pcap"), Resolution::Nano).unwrap();
    for (i, p) in dl_int.iter().enumerate() {
        let t = if i == 0 {
            1_000_000_000
        } else {
            2_500_000_000 + i as u64 * 1_000_000
        };
        w.write(t, &eth([2, 0, 0, 0, 0, 6], 0x86dd, p)).unwrap();
    }
    w.flush().unwrap();
    // Uplink G-PDUs on N3, same timing.
    let ul_plain: Vec<Vec<u8>> = std::iter::once(udp6(UE, DN, 7000, 999))
        .chain((0..FLOW).map(|i| udp6(UE, DN, 6000, i as u16)))
        .collect();
    let mut w = PcapWriter::create(dir.path().join("n3-in.pcap"), Resolution::Nano).unwrap();
    for (i, p) in ul_plain.iter().enumerate() {
        let t = if i == 0 {
            1_000_000_000
        } else {
            2_500_000_000 + i as u64 * 1_000_000
        };
        w.write(t, &gpdu(p)).unwrap();
    }
    w.flush().unwrap();

    let (rules, reports) = (
        format!("tcp://127.0.0.1:{}", free_tcp_port()),
        format!("tcp://127.0.0.1:{}", free_tcp_port()),
    );
    let cfg = config(dir.path(), &rules, &reports);
    cfg.validate().expect("valid config");
    let ctx = zmq::Context::new();
    let sub = ctx.socket(zmq::SUB).unwrap();
    sub.set_subscribe(b"raw/").unwrap();
    sub.set_rcvtimeo(200).unwrap();
    sub.connect(&reports).unwrap();
    let collector = std::thread::spawn(move || {
        let mut got = vec![];
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_secs(10) && got.len() < FLOW - 1 {
            if let Ok(m) = sub.recv_multipart(0) {
                got.push(serde_json::from_slice::<serde_json::Value>(&m[1]).unwrap());
            }
        }
        got
    });
    let h = std::thread::spawn(move || daemon::run(&cfg, &RunOptions::default()).expect("run"));
    for r in [DL_RULE, UL_RULE] {
        let reply = req(&rules, r);
        assert!(
            reply.contains("installed") || reply.contains("ok"),
            "{reply}"
        );
    }
    let summary = h.join().unwrap();
    // The elements' own counters, summed over places: the sink's match what was published.
    // The daemon's order: the shared classifier, INT on N6 ingress, the UPF, INT on N6 egress.
    assert_eq!(
        summary.stages,
        ["classify", "int_sink", "upf", "int_source"],
        "pipeline order"
    );
    let stages = summary.features["int"]["stages"].clone();
    let int = summary
        .feature::<peregrine_control::int::IntDaemonStats>("int")
        .expect("int summary");
    let reports = collector.join().unwrap();

    // Downlink: every packet encapsulated on N3, the inner packet the remote source's input
    // byte for byte but for the hop limit (the UPF's decrement).
    let n3 = read_pcap(dir.path().join("n3-out.pcap"));
    assert_eq!(n3.len(), FLOW + 1, "{int:?}");
    for (o, s) in n3.iter().zip(&dl_plain) {
        let inner = inner_of(o);
        assert_eq!(inner.len(), s.len(), "INT stripped before encapsulation");
        assert_eq!(inner[7], s[7] - 1, "hop limit decremented once");
        assert_eq!(inner[..7], s[..7]);
        assert_eq!(inner[8..], s[8..], "byte-identical but for the hop limit");
    }
    // The sink's reports on the PUB socket: the in-band request (first packet) is not one.
    assert_eq!(reports.len(), FLOW - 1, "{reports:?} {int:?}");
    assert_eq!(int.requests, 1, "the remote source's in-band request seen");
    assert_eq!(stages["sink"]["reports"], reports.len(), "{stages}");
    assert_eq!(stages["sink"]["requests"], 1, "{stages}");
    for (i, r) in reports.iter().enumerate() {
        assert_eq!(r["ns_id"], 7, "{r}");
        assert_eq!(r["app_id"], 1);
        assert_eq!(r["sink_node_id"], UPF_NODE, "{r}");
        assert_eq!(r["src"], DN.to_string());
        // No transit between: the only trace entry is the source's own (E2E data,
        // docs/int.md), its TX count that of the packet (the request was the first).
        assert_eq!(r["hops"].as_array().map(Vec::len), Some(0), "{r}");
        assert_eq!(r["e2e"]["tx_packets"], i as u64 + 2, "{r}");
        assert_eq!(r["packet_len"], dl_plain[i + 2].len(), "{r}");
    }

    // Uplink: decapsulated to N6, INT added by the UPF (the source after decap).
    let n6 = read_pcap(dir.path().join("n6-out.pcap"));
    assert_eq!(n6.len(), FLOW + 1, "{int:?}");
    assert_eq!(n6[0][14..14 + 7], ul_plain[0][..7], "other flow: untouched");
    assert_eq!(n6[0][14 + 8..], ul_plain[0][8..]);
    assert_eq!(n6[1][20], 0, "next header is Hop-by-Hop");
    assert_eq!(
        n6[1][54 + 2],
        0x32,
        "in-band request first: {:02x?}",
        &n6[1][54..70]
    );
    for f in &n6[2..] {
        assert_eq!(f[20], 0, "next header is Hop-by-Hop");
        assert_eq!(f[54 + 4], 0x31, "IOAM: {:02x?}", &f[54..70]);
    }
    assert_eq!(stages["source"]["requests_sent"], 1, "{stages}");
    assert_eq!(stages["source"]["int_added"], n6.len() - 2, "{stages}");
    let pcap = dir.path().join("n6-out.pcap");
    match Command::new("tshark")
        .arg("-r")
        .arg(&pcap)
        .args(["-T", "fields", "-e", "ipv6.opt.ioam.trace.ns"])
        .args([
            "-e",
            "ipv6.opt.ioam.trace.node.id",
            "-e",
            "ipv6.opt.ioam.trace.node.hlim",
        ])
        .output()
    {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), FLOW + 1, "{text}");
            for l in &lines[2..] {
                // Namespace 8, the trace's filled entry is the UPF's (node 9, hop limit 63:
                // the inner packet's 64 less the UPF's decrement).
                let cols: Vec<&str> = l.split('\t').collect();
                assert_eq!(cols[0], "8", "{l}");
                let id = |n: &str| match n.strip_prefix("0x") {
                    Some(h) => u32::from_str_radix(h, 16).ok(),
                    None => n.parse().ok(),
                };
                assert!(
                    cols[1].split(',').any(|n| id(n) == Some(UPF_NODE.into())),
                    "{l}"
                );
                assert!(cols[2].split(',').any(|n| n == "63"), "{l}");
            }
        }
        _ => eprintln!("tshark not available: IOAM decode not checked"),
    }
}
