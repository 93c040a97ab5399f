//! Independent oracles for `peregrine_wire::ioam` (RFC 9197 / RFC 9486):
//!
//! * emit direction: an IPv6 packet with a Hop-by-Hop header (PadN, then an IOAM
//!   Pre-allocated Trace Option: namespace 123, trace type bits 0-3, 4 entries of which 2
//!   were filled by our `fill_next`) and a UDP datagram, built only with our emitters, is
//!   decoded by Wireshark (`tshark -T json`) to the values we set, with no malformed marker
//!   or warning/error expert info;
//! * parse direction: Scapy (which has no IOAM layer) builds the same option by hand as
//!   `HBHOptUnknown(otype=0x31, optdata=...)`; we parse it to the same fields, and its
//!   bytes equal ours.
//!
//! Each oracle skips (with a message) when its tool is missing, unless `CI` is set, in
//! which case a missing tool is a failure.

mod ioam_frames;

use ioam_frames::{NAMESPACE, TRACE_TYPE};
use peregrine_wire::ethernet::Address;
use peregrine_wire::ioam::{self, NodeData, TraceOption, TraceRepr};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::ipv6;
use peregrine_wire::ipv6option::option_type::IOAM_HBH;

use peregrine_testkit::tools::tool_present;
use peregrine_testkit::tshark::{check_fields, decode_frame};
use std::net::Ipv6Addr;
use std::process::Command;

const SRC: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 1, 0, 0, 0, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 2, 0, 0, 0, 2);

/// The two hops that filled the trace, in the order they filled it.
fn hops() -> [NodeData<'static>; 2] {
    [
        NodeData {
            hop_limit: Some(63),
            node_id: Some(0x0a_0b0c),
            ingress_if_id: Some(5),
            egress_if_id: Some(6),
            timestamp_secs: Some(1_700_000_000),
            timestamp_frac: Some(123_456),
            ..NodeData::default()
        },
        NodeData {
            hop_limit: Some(62),
            node_id: Some(0x0a_0b0d),
            ingress_if_id: Some(0x0102),
            egress_if_id: Some(0x0304),
            timestamp_secs: Some(1_700_000_001),
            timestamp_frac: Some(654_321),
            ..NodeData::default()
        },
    ]
}

/// Hop-by-Hop header with the trace, 4 entries pre-allocated and 2 filled by `fill_next`.
fn hbh() -> Vec<u8> {
    ioam_frames::hbh(&hops())
}

/// Ethernet / IPv6 / HbH / UDP, with our emitters only.
fn frame() -> Vec<u8> {
    let macs = (
        Address([0x02, 0, 0x5e, 0x10, 0, 0x0a]),
        Address([0x02, 0, 0x5e, 0x10, 0, 0x0b]),
    );
    ioam_frames::frame(macs, SRC, DST, &hbh(), 5001, b"peregrine ioam")
}

/// tshark's rendering of a hex field `digits` wide.
fn hex(v: impl Into<u64>, digits: usize) -> String {
    format!("0x{:0digits$x}", v.into())
}

#[test]
fn tshark_decodes_our_ioam_trace() {
    if !tool_present("tshark", &["--version"]) {
        return;
    }
    let (layers, mut fails) = decode_frame(&frame(), "ioam");
    let layers = &layers;
    let [h1, h2] = hops();
    // Most recent hop first in the node data list.
    let want: &[(&str, Vec<String>)] = &[
        ("ipv6.opt.type", vec!["0x01".into(), "0x31".into()]),
        ("ipv6.opt.ioam.opt_type", vec!["0".into()]),
        ("ipv6.opt.ioam.trace.ns", vec!["123".into()]),
        ("ipv6.opt.ioam.trace.nodelen", vec!["4".into()]),
        ("ipv6.opt.ioam.trace.remlen", vec!["8".into()]),
        ("ipv6.opt.ioam.trace.flag.o", vec!["0".into()]),
        ("ipv6.opt.ioam.trace.type.bit0", vec!["1".into()]),
        ("ipv6.opt.ioam.trace.type.bit1", vec!["1".into()]),
        ("ipv6.opt.ioam.trace.type.bit2", vec!["1".into()]),
        ("ipv6.opt.ioam.trace.type.bit3", vec!["1".into()]),
        ("ipv6.opt.ioam.trace.type.bit4", vec!["0".into()]),
        ("ipv6.opt.ioam.trace.type.bit8", vec!["0".into()]),
        ("ipv6.opt.ioam.trace.free_space", vec![]),
        (
            "ipv6.opt.ioam.trace.node.hlim",
            vec![
                h2.hop_limit.unwrap().to_string(),
                h1.hop_limit.unwrap().to_string(),
            ],
        ),
        (
            "ipv6.opt.ioam.trace.node.id",
            vec![hex(h2.node_id.unwrap(), 6), hex(h1.node_id.unwrap(), 6)],
        ),
        (
            "ipv6.opt.ioam.trace.node.iif",
            vec![
                hex(h2.ingress_if_id.unwrap(), 4),
                hex(h1.ingress_if_id.unwrap(), 4),
            ],
        ),
        (
            "ipv6.opt.ioam.trace.node.eif",
            vec![
                hex(h2.egress_if_id.unwrap(), 4),
                hex(h1.egress_if_id.unwrap(), 4),
            ],
        ),
        (
            "ipv6.opt.ioam.trace.node.tss",
            vec![
                hex(h2.timestamp_secs.unwrap(), 8),
                hex(h1.timestamp_secs.unwrap(), 8),
            ],
        ),
        (
            "ipv6.opt.ioam.trace.node.tsf",
            vec![
                hex(h2.timestamp_frac.unwrap(), 8),
                hex(h1.timestamp_frac.unwrap(), 8),
            ],
        ),
        ("udp.checksum.status", vec!["1".into()]),
        ("udp.dstport", vec!["5001".into()]),
    ];
    check_fields(layers, want, &mut fails);
    if !fails.is_empty() || std::env::var_os("PEREGRINE_ORACLE_DUMP").is_some() {
        eprintln!("{}", serde_json::to_string_pretty(&layers["ipv6"]).unwrap());
    }
    assert!(fails.is_empty(), "tshark disagrees:\n{}", fails.join("\n"));
    eprintln!(
        "tshark: {} IOAM fields as we set them, no expert errors",
        want.len()
    );
}

/// Scapy builds the option by hand (struct.pack of RFC 9197's layout) as an unknown
/// Hop-by-Hop option; we parse every field, and the header equals ours byte for byte.
#[test]
fn we_parse_what_scapy_builds() {
    if !tool_present("python3", &["-c", "import scapy.all"]) {
        return;
    }
    let script = r#"
import struct
from scapy.all import IPv6, IPv6ExtHdrHopByHop, HBHOptUnknown, PadN, UDP, Raw, raw
def entry(hl, nid, iif, eif, s, f):
    return struct.pack(">IHHII", (hl << 24) | nid, iif, eif, s, f)
# Namespace-ID | NodeLen(5) Flags(4) RemainingLen(7) | Trace-Type(24) Reserved(8)
hdr = struct.pack(">HHI", 123, (4 << 11) | (0 << 7) | 8, 0xf00000 << 8)
data = bytes(32) + entry(62, 0x0a0b0d, 0x0102, 0x0304, 1700000001, 654321) \
     + entry(63, 0x0a0b0c, 5, 6, 1700000000, 123456)
opt = HBHOptUnknown(otype=0x31, optdata=bytes([0, 0]) + hdr + data)
p = IPv6(src="fd00:0:0:1::1", dst="fd00:0:0:2::2", hlim=64) / \
    IPv6ExtHdrHopByHop(options=[PadN(optdata=b""), opt]) / \
    UDP(sport=40000, dport=5001) / Raw(b"peregrine ioam")
print(raw(p).hex())
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "scapy failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hex = String::from_utf8(out.stdout).expect("utf8");
    let hex = hex.trim();
    let pkt: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    let ip = ipv6::Packet::new_checked(&pkt[..]).expect("ipv6");
    assert_eq!(ip.next_header(), ip_protocol::HOPOPT);
    let ext = &pkt[ipv6::HEADER_LEN..];
    let found = ioam::find_in_header(ext, IOAM_HBH)
        .expect("parses")
        .expect("has IOAM");
    assert_eq!(found.ioam_type, ioam::option_type::PRE_ALLOCATED_TRACE);
    assert!(
        found.is_aligned(),
        "scapy put the option at {}",
        found.offset
    );
    let t = TraceOption::new_checked(&ext[found.body.clone()]).expect("trace");
    let r = TraceRepr::parse(&t).expect("repr");
    assert_eq!(
        r,
        TraceRepr {
            namespace_id: NAMESPACE,
            node_len: 4,
            flags: 0,
            remaining_len: 8,
            trace_type: TRACE_TYPE,
            data_len: 64,
        }
    );
    let entries: Vec<NodeData> = t.entries().collect::<Result<_, _>>().expect("entries");
    let [h1, h2] = hops();
    assert_eq!(entries, [h2, h1]);
    // Our Hop-by-Hop header (emit + 2 x fill_next) is byte-identical to Scapy's.
    let ours = hbh();
    assert_eq!(&ext[..ours.len()], &ours[..]);
    eprintln!(
        "scapy: {} byte HbH with IOAM trace parsed and matched",
        ours.len()
    );
}
