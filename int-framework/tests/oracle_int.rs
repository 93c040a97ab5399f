//! Independent oracles for the INT elements:
//!
//! * Wireshark (`tshark -T json`) decodes a packet our IntSource built and two IntTransit
//!   nodes filled, IOAM encoding: namespace, NodeLen, the three entries (transit 2, transit
//!   1, the source's own) with their node IDs, hop limits and timestamps, a UDP checksum
//!   that still verifies, no malformed marker or expert error;
//! * Scapy builds a seed-encoded packet by hand (`HBHOptUnknown` for 0x31 and 0x11, as it
//!   has no such layer) and the same packet without INT; our IntSink reports the values set
//!   in Python and its output equals Scapy's INT-free packet byte for byte.
//!
//! Each oracle skips (with a message) when its tool is missing, unless `CI` is set.

use crossbeam_channel::bounded;
use peregrine_dataplane::runtime::{Batch, Context, Disposition, Publisher, Reasons, Stage};
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use peregrine_int::namespace::{NamespaceTable, TableSnapshot};
use peregrine_int::report::Encoding;
use peregrine_int::request::{Flags, Mode, Protocol, Rule, TraceType};
use peregrine_int::stages::{IntConfig, IntEvent, IntSink, IntSource, IntTransit, L3Offset};
use peregrine_wire::udp;
use std::net::{IpAddr, Ipv6Addr};
use std::process::Command;

// The test kit's tshark helpers.
use peregrine_testkit::tools::tool_present;
use peregrine_testkit::tshark::{check_fields, decode_frame};

const SRC: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 1, 0, 0, 0, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 2, 0, 0, 0, 2);

fn publisher(ns: u16, tt: u32) -> Publisher<TableSnapshot> {
    let mut t = NamespaceTable::default();
    t.install(Rule {
        ns_id: ns,
        app_id: 1,
        src_ip: SRC,
        dst_ip: DST,
        src_port: 0,
        dst_port: 0,
        protocol: Protocol::Udp,
        trace_type: TraceType(tt),
        mode: Mode::Count(1),
        flags: Flags::default(),
    })
    .unwrap();
    Publisher::new((*t.snapshot()).clone())
}

fn frame() -> Vec<u8> {
    let payload = b"peregrine int";
    let plen = 8 + payload.len();
    let mut f = vec![
        2, 0, 0x5e, 0x10, 0, 0x0b, 2, 0, 0x5e, 0x10, 0, 0x0a, 0x86, 0xdd,
    ];
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(plen as u16).to_be_bytes());
    f.extend_from_slice(&[17, 64]);
    f.extend_from_slice(&SRC.octets());
    f.extend_from_slice(&DST.octets());
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&5001u16.to_be_bytes());
    f.extend_from_slice(&(plen as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    udp::Packet::new_checked(&mut f[54..])
        .unwrap()
        .fill_checksum(IpAddr::V6(SRC), IpAddr::V6(DST))
        .unwrap();
    f
}

#[test]
fn tshark_decodes_the_ioam_trace_our_stages_built() {
    if !tool_present("tshark", &["--version"]) {
        return;
    }
    let p = publisher(7, 0x7000_e000);
    let cfg = |node_id| IntConfig {
        node_id,
        ..IntConfig::default()
    };
    let mut reasons = Reasons::new();
    let mut source = IntSource::new(cfg(0x10), p.reader());
    let mut t1 = IntTransit::new(cfg(0x11), p.reader(), &mut reasons);
    let mut t2 = IntTransit::new(cfg(0x12), p.reader(), &mut reasons);
    let s = 1_700_000_000_000_000_000u64;
    let mut out = Vec::new();
    for (i, t) in [s, s + 1_000_000].into_iter().enumerate() {
        let mut b = Batch::<OwnedBuf>::new();
        b.push(OwnedBuf::from_slice(&frame()), Disposition::CONTINUE)
            .unwrap();
        source.process(&mut b, &Context::fixed(t, 0));
        t1.process(&mut b, &Context::fixed(t + 1_000, 0));
        t2.process(&mut b, &Context::fixed(t + 2_000, 0));
        if i == 1 {
            out = b.drain().next().unwrap().0.data().to_vec();
        }
    }
    let (layers, mut fails) = decode_frame(&out, "int");
    let layers = &layers;
    let t = s + 1_000_000;
    let tss = |t: u64| format!("0x{:08x}", t / 1_000_000_000);
    let tsf = |t: u64| format!("0x{:08x}", t % 1_000_000_000);
    let want: &[(&str, Vec<String>)] = &[
        ("ipv6.opt.ioam.trace.ns", vec!["7".into()]),
        ("ipv6.opt.ioam.trace.nodelen", vec!["6".into()]),
        // 5 + 1 entries of 6 units, 3 filled.
        ("ipv6.opt.ioam.trace.remlen", vec!["18".into()]),
        ("ipv6.opt.ioam.trace.flag.o", vec!["0".into()]),
        ("ipv6.opt.ioam.trace.type.bit0", vec!["1".into()]),
        ("ipv6.opt.ioam.trace.type.bit2", vec!["1".into()]),
        ("ipv6.opt.ioam.trace.type.bit3", vec!["1".into()]),
        ("ipv6.opt.ioam.trace.type.bit5", vec!["1".into()]),
        ("ipv6.opt.ioam.trace.type.bit10", vec!["1".into()]),
        (
            "ipv6.opt.ioam.trace.node.id",
            vec!["0x000012".into(), "0x000011".into(), "0x000010".into()],
        ),
        (
            "ipv6.opt.ioam.trace.node.hlim",
            vec!["64".into(), "64".into(), "64".into()],
        ),
        (
            "ipv6.opt.ioam.trace.node.tss",
            vec![tss(t + 2_000), tss(t + 1_000), tss(t)],
        ),
        (
            "ipv6.opt.ioam.trace.node.tsf",
            vec![tsf(t + 2_000), tsf(t + 1_000), tsf(t)],
        ),
        // The UDP checksum still verifies with the INT headers in the chain.
        ("udp.checksum.status", vec!["1".into()]),
        ("udp.dstport", vec!["5001".into()]),
    ];
    check_fields(layers, want, &mut fails);
    if !fails.is_empty() {
        eprintln!("{}", serde_json::to_string_pretty(&layers["ipv6"]).unwrap());
    }
    assert!(fails.is_empty(), "tshark disagrees:\n{}", fails.join("\n"));
}

#[test]
fn our_sink_reads_seed_options_scapy_builds() {
    if !tool_present("python3", &["-c", "import scapy.all"]) {
        return;
    }
    let script = r#"
import struct
from scapy.all import IPv6, IPv6ExtHdrHopByHop, HBHOptUnknown, PadN, UDP, Raw, raw
main = struct.pack(">HI", 9, 0x7000E000)
hop2 = struct.pack(">HH", 22, 0xE000) + struct.pack(">HH", 300, 301) + struct.pack(">Q", 2000000123) + struct.pack(">II", 70000, 70001)
hop1 = struct.pack(">HH", 21, 0x4000) + struct.pack(">Q", 1000000456)
e2e = struct.pack(">H", 0x7000) + struct.pack(">QII", 999, 5, 4242)
opts = [PadN(optdata=b""), HBHOptUnknown(otype=0x31, optdata=main + hop2 + hop1),
        HBHOptUnknown(otype=0x11, optdata=e2e)]
l4 = UDP(sport=40000, dport=5001) / Raw(b"peregrine int")
plain = IPv6(src="fd00:0:0:1::1", dst="fd00:0:0:2::2", hlim=64) / l4
withint = IPv6(src="fd00:0:0:1::1", dst="fd00:0:0:2::2", hlim=64) / IPv6ExtHdrHopByHop(options=opts) / l4
print(raw(withint).hex())
print(raw(plain).hex())
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let hex = |s: &str| -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    };
    let with_int = hex(lines.next().unwrap());
    let plain = hex(lines.next().unwrap());
    let p = publisher(9, 0x7000_e000);
    let cfg = IntConfig {
        node_id: 30,
        l3: L3Offset::Raw,
        seed_namespaces: vec![9],
        ..IntConfig::default()
    };
    let (tx, rx) = bounded(4);
    let mut reasons = Reasons::new();
    let mut sink = IntSink::new(cfg, p.reader(), tx, &mut reasons);
    let mut b = Batch::<OwnedBuf>::new();
    b.push(OwnedBuf::from_slice(&with_int), Disposition::CONTINUE)
        .unwrap();
    sink.process(&mut b, &Context::fixed(5_000_000_000, 0));
    let got = b.drain().next().unwrap().0.data().to_vec();
    assert_eq!(got, plain, "not Scapy's INT-free packet");
    let IntEvent::Report { report, .. } = rx.try_recv().unwrap() else {
        panic!("no report");
    };
    assert_eq!(report.encoding, Encoding::Seed);
    assert_eq!(report.ns_id, 9);
    assert_eq!(report.trace_type, 0x7000_e000);
    assert_eq!(report.e2e.timestamp_ns, Some(999));
    assert_eq!(report.e2e.tx_packets, Some(5));
    assert_eq!(report.e2e.tx_bytes, Some(4242));
    assert_eq!(report.e2e.int_counter, None);
    let h = report.hops();
    assert_eq!(h.len(), 2);
    // Path order: hop 21 (older, last on the wire) first.
    assert_eq!(h[0].node_id, 21);
    assert_eq!(h[0].entry_trace_type, 0x4000);
    assert_eq!(h[0].timestamp_ns, Some(1_000_000_456));
    assert_eq!(h[0].tx_packets, None);
    assert_eq!(h[1].node_id, 22);
    assert_eq!(h[1].tx_packets, Some(300));
    assert_eq!(h[1].rx_packets, Some(301));
    assert_eq!(h[1].timestamp_ns, Some(2_000_000_123));
    assert_eq!(h[1].tx_bytes, Some(70000));
    assert_eq!(h[1].rx_bytes, Some(70001));
    assert_eq!(report.packet_len as usize, plain.len());
}
