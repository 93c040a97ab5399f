//! Independent oracle, parse direction: frames built by Scapy (`tests/oracle/scapy_build.py`)
//! parse in our code to the field values Scapy itself decodes from the same bytes, and the
//! checksums Scapy computed verify in our code.
//!
//! Where we have an emitter, re-emitting what we parsed must also reproduce Scapy's bytes
//! exactly (IPv4 header, ARP, ICMP echo, the GTP-U header with its PDU Session Container,
//! and the GTP-U signalling messages with their IEs).
//!
//! One Python run for all frames. Skips (with a message) when `python3` with Scapy is not
//! installed, unless `CI` is set, in which case that is a failure.

use peregrine_wire::ethernet::{self, ethertype};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{
    arp, gtpu, gtpu_msg, icmpv4, icmpv6, ipv4, ipv6, ipv6ext, pdu_session, tcp, udp, vlan,
};
use serde_json::{json, Map, Value};
use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;
use std::process::Command;

/// What our parsers say about one frame, in the key namespace of `scapy_build.py`, plus
/// any disagreement between our re-emitted bytes and Scapy's.
#[derive(Default)]
struct Decoded {
    fields: Map<String, Value>,
    problems: Vec<String>,
}

impl Decoded {
    fn set(&mut self, pre: &str, key: &str, v: impl Into<Value>) {
        self.fields.insert(format!("{pre}{key}"), v.into());
    }

    fn problem(&mut self, p: impl Into<String>) {
        self.problems.push(p.into());
    }

    /// Our emitter must produce exactly the bytes Scapy built.
    fn same_bytes(&mut self, what: &str, ours: &[u8], scapy: &[u8]) {
        if ours != scapy {
            self.problem(format!(
                "re-emitted {what} differs: ours {} scapy {}",
                hex(ours),
                hex(scapy)
            ));
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn decode(frame: &[u8]) -> Decoded {
    let mut d = Decoded::default();
    let eth = match ethernet::Frame::new_checked(frame) {
        Ok(f) => f,
        Err(e) => {
            d.problem(format!("ethernet: {e}"));
            return d;
        }
    };
    d.set("", "eth.dst", eth.dst_addr().to_string());
    d.set("", "eth.src", eth.src_addr().to_string());
    d.set("", "eth.type", eth.ethertype());
    let (mut ty, mut l3) = (eth.ethertype(), eth.payload());
    if vlan::is_tpid(ty) {
        match vlan::Tag::new_checked(l3).and_then(|t| vlan::Repr::parse(&t)) {
            Ok(r) => {
                d.set("", "vlan.vid", r.vid);
                d.set("", "vlan.pcp", r.pcp);
                d.set("", "vlan.dei", r.dei);
                d.set("", "vlan.type", r.ethertype);
                ty = r.ethertype;
                l3 = &l3[vlan::HEADER_LEN..];
            }
            Err(e) => d.problem(format!("vlan: {e}")),
        }
        let off = vlan::l3_offset(frame).map(|(o, _)| o);
        if off != Ok(frame.len() - l3.len()) {
            d.problem(format!("vlan::l3_offset says {off:?}"));
        }
    }
    match ty {
        ethertype::ARP => arp_fields(&mut d, l3),
        ethertype::IPV4 | ethertype::IPV6 => ip(&mut d, "", l3),
        other => d.problem(format!("unexpected EtherType {other:#06x}")),
    }
    d
}

fn arp_fields(d: &mut Decoded, b: &[u8]) {
    let r = match arp::Packet::new_checked(b).and_then(|p| arp::Repr::parse(&p)) {
        Ok(r) => r,
        Err(e) => return d.problem(format!("arp: {e}")),
    };
    d.set("", "arp.op", u16::from(r.operation));
    d.set("", "arp.hwsrc", r.sender_hardware_addr.to_string());
    d.set("", "arp.psrc", r.sender_protocol_addr.to_string());
    d.set("", "arp.hwdst", r.target_hardware_addr.to_string());
    d.set("", "arp.pdst", r.target_protocol_addr.to_string());
    let mut out = [0u8; arp::HEADER_LEN];
    r.emit(&mut out).expect("arp fits");
    d.same_bytes("arp", &out, &b[..arp::HEADER_LEN]);
}

/// An IPv4 or IPv6 packet and what it carries; `pre` is "" or "inner.".
fn ip(d: &mut Decoded, pre: &str, b: &[u8]) {
    match b.first().map(|v| v >> 4) {
        Some(4) => ipv4_packet(d, pre, b),
        Some(6) => ipv6_packet(d, pre, b),
        v => d.problem(format!("{pre}ip: version {v:?}")),
    }
}

fn ipv4_packet(d: &mut Decoded, pre: &str, b: &[u8]) {
    let p = match ipv4::Packet::new_checked(b) {
        Ok(p) => p,
        Err(e) => return d.problem(format!("{pre}ipv4: {e}")),
    };
    d.set(pre, "ip.src", p.src_addr().to_string());
    d.set(pre, "ip.dst", p.dst_addr().to_string());
    d.set(pre, "ip.ttl", p.ttl());
    d.set(pre, "ip.proto", p.protocol());
    d.set(pre, "ip.id", p.ident());
    d.set(pre, "ip.tos", p.dscp_ecn());
    d.set(pre, "ip.len", p.total_len());
    d.set(pre, "ip.df", p.dont_frag());
    d.set(pre, "ip.checksum", p.checksum());
    d.set(pre, "ip.checksum_ok", p.verify_checksum());
    match ipv4::Repr::parse(&p) {
        Ok(r) => {
            let mut out = [0u8; ipv4::HEADER_LEN];
            r.emit(&mut out).expect("header fits");
            d.same_bytes(&format!("{pre}ipv4 header"), &out, p.header());
        }
        Err(e) => d.problem(format!("{pre}ipv4 repr: {e}")),
    }
    let (src, dst) = (IpAddr::V4(p.src_addr()), IpAddr::V4(p.dst_addr()));
    l4(d, pre, p.protocol(), src, dst, p.payload());
}

fn ipv6_packet(d: &mut Decoded, pre: &str, b: &[u8]) {
    let p = match ipv6::Packet::new_checked(b) {
        Ok(p) => p,
        Err(e) => return d.problem(format!("{pre}ipv6: {e}")),
    };
    d.set(pre, "ipv6.src", p.src_addr().to_string());
    d.set(pre, "ipv6.dst", p.dst_addr().to_string());
    d.set(pre, "ipv6.hlim", p.hop_limit());
    d.set(pre, "ipv6.nh", p.next_header());
    d.set(pre, "ipv6.tc", p.traffic_class());
    d.set(pre, "ipv6.fl", p.flow_label());
    d.set(pre, "ipv6.plen", p.payload_len());
    let payload = p.payload();
    // RFC 8200 section 8.1: with a Routing header, the upper-layer checksum uses the final
    // destination. For type 0 (which Scapy builds) that is the last address listed.
    let mut final_dst = p.dst_addr();
    let mut chain = Vec::new();
    let mut w = ipv6ext::walk(p.next_header(), payload);
    for h in &mut w {
        let h = match h {
            Ok(h) => h,
            Err(e) => return d.problem(format!("{pre}ipv6 ext chain: {e}")),
        };
        chain.push(h.header_type);
        let hb = &payload[h.range()];
        match h.header_type {
            ip_protocol::HOPOPT => {
                let hdr = ipv6ext::OptionsHeader::new_checked(hb).expect("walked");
                let area = hdr.options();
                let mut opts = Vec::new();
                for o in hdr.iter_options() {
                    match o {
                        Ok(o) => {
                            let data = &area[o.data_offset()..o.offset + o.len()];
                            opts.push(json!([o.option_type(), hex(data)]));
                        }
                        Err(e) => d.problem(format!("hbh option: {e}")),
                    }
                }
                if let Err(e) = ipv6ext::OptionsRepr::parse(&hdr) {
                    d.problem(format!("hbh repr: {e}"));
                }
                d.set(pre, "hbh.options", opts);
                d.set(pre, "hbh.nh", hdr.next_header());
                d.set(pre, "hbh.len", hdr.hdr_ext_len());
            }
            ip_protocol::IPV6_ROUTE => {
                let hdr = ipv6ext::RoutingHeader::new_checked(hb).expect("walked");
                let r = ipv6ext::RoutingRepr::parse(&hdr).expect("checked");
                d.set(pre, "rt.type", r.routing_type);
                d.set(pre, "rt.segleft", r.segments_left);
                d.set(pre, "rt.len", hdr.hdr_ext_len());
                d.set(pre, "rt.nh", r.next_header);
                if r.routing_type == 0 && r.segments_left > 0 && r.data.len() >= 20 {
                    let last: [u8; 16] = r.data[r.data.len() - 16..].try_into().expect("16");
                    final_dst = Ipv6Addr::from(last);
                }
            }
            ip_protocol::IPV6_FRAG => {
                let hdr = ipv6ext::FragmentHeader::new_checked(hb).expect("walked");
                let r = ipv6ext::FragmentRepr::parse(&hdr).expect("checked");
                d.set(pre, "frag.offset", r.frag_offset);
                d.set(pre, "frag.m", r.more_frags);
                d.set(pre, "frag.id", r.ident);
                d.set(pre, "frag.nh", r.next_header);
            }
            other => d.problem(format!("unexpected extension header {other}")),
        }
    }
    d.set(pre, "ipv6.ext", chain);
    let Some((upper, off)) = w.upper() else {
        return d.problem(format!("{pre}ipv6 ext chain did not end"));
    };
    if w.later_fragment() {
        return; // fragment data, no upper-layer header
    }
    let (src, dst) = (IpAddr::V6(p.src_addr()), IpAddr::V6(final_dst));
    l4(d, pre, upper, src, dst, &payload[off..]);
}

fn l4(d: &mut Decoded, pre: &str, proto: u8, src: IpAddr, dst: IpAddr, b: &[u8]) {
    match proto {
        ip_protocol::UDP => {
            let u = match udp::Packet::new_checked(b) {
                Ok(u) => u,
                Err(e) => return d.problem(format!("{pre}udp: {e}")),
            };
            d.set(pre, "udp.sport", u.src_port());
            d.set(pre, "udp.dport", u.dst_port());
            d.set(pre, "udp.len", u.length());
            d.set(pre, "udp.checksum", u.checksum());
            d.set(pre, "udp.checksum_ok", u.verify_checksum(src, dst));
            if u.dst_port() == gtpu::PORT && pre.is_empty() {
                gtp(d, u.payload());
            }
        }
        ip_protocol::TCP => {
            let t = match tcp::Packet::new_checked(b) {
                Ok(t) => t,
                Err(e) => return d.problem(format!("{pre}tcp: {e}")),
            };
            let r = tcp::Repr::parse(&t).expect("checked");
            d.set(pre, "tcp.sport", r.src_port);
            d.set(pre, "tcp.dport", r.dst_port);
            d.set(pre, "tcp.seq", r.seq_number);
            d.set(pre, "tcp.ack", r.ack_number);
            d.set(pre, "tcp.flags", r.flags.0);
            d.set(pre, "tcp.window", r.window_len);
            d.set(pre, "tcp.checksum", t.checksum());
            d.set(pre, "tcp.checksum_ok", t.verify_checksum(src, dst));
        }
        ip_protocol::ICMP => {
            let m = match icmpv4::Packet::new_checked(b) {
                Ok(m) => m,
                Err(e) => return d.problem(format!("icmp: {e}")),
            };
            d.set(pre, "icmp.type", m.msg_type());
            d.set(pre, "icmp.code", m.msg_code());
            d.set(pre, "icmp.checksum", m.checksum());
            d.set(pre, "icmp.checksum_ok", m.verify_checksum());
            match icmpv4::Repr::parse(&m) {
                Ok(
                    r @ icmpv4::Repr::EchoRequest {
                        ident,
                        seq_no,
                        data,
                    },
                ) => {
                    d.set(pre, "icmp.id", ident);
                    d.set(pre, "icmp.seq", seq_no);
                    d.set(pre, "icmp.data", hex(data));
                    let mut out = vec![0u8; r.buffer_len()];
                    r.emit(&mut out).expect("fits");
                    d.same_bytes("icmp echo", &out, b);
                }
                other => d.problem(format!("icmp repr: {other:?}")),
            }
        }
        ip_protocol::IPV6_ICMP => {
            let (IpAddr::V6(s), IpAddr::V6(t)) = (src, dst) else {
                return d.problem("icmpv6 over IPv4");
            };
            let m = match icmpv6::Packet::new_checked(b) {
                Ok(m) => m,
                Err(e) => return d.problem(format!("icmpv6: {e}")),
            };
            d.set(pre, "icmpv6.type", m.msg_type());
            d.set(pre, "icmpv6.code", m.msg_code());
            d.set(pre, "icmpv6.checksum", m.checksum());
            d.set(pre, "icmpv6.checksum_ok", m.verify_checksum(s, t));
            let r = match icmpv6::Repr::parse(s, t, &m) {
                Ok(r) => r,
                Err(e) => return d.problem(format!("icmpv6 repr: {e}")),
            };
            match r {
                icmpv6::Repr::EchoRequest { ident, seq_no, .. } => {
                    d.set(pre, "icmpv6.id", ident);
                    d.set(pre, "icmpv6.seq", seq_no);
                }
                icmpv6::Repr::PktTooBig { mtu, .. } => d.set(pre, "icmpv6.mtu", mtu),
                other => d.problem(format!("icmpv6 repr: {other:?}")),
            }
            d.set(pre, "icmpv6.data", hex(r.data()));
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(s, t, &mut out).expect("fits");
            d.same_bytes("icmpv6", &out, b);
        }
        other => d.problem(format!("{pre}unexpected protocol {other}")),
    }
}

fn gtp(d: &mut Decoded, b: &[u8]) {
    let h = match gtpu::Header::new_checked(b) {
        Ok(h) => h,
        Err(e) => return d.problem(format!("gtpu: {e}")),
    };
    d.set("", "gtp.type", h.msg_type());
    d.set("", "gtp.teid", h.teid());
    d.set("", "gtp.len", h.length());
    if let Some(seq) = h.seq_number() {
        d.set("", "gtp.seq", seq);
    }
    if let Some(npdu) = h.npdu_number() {
        d.set("", "gtp.npdu", npdu);
    }
    let exts: Vec<u8> = h.extensions().map(|(t, _)| t).collect();
    d.set("", "gtp.exts", exts.clone());
    if let Some(&[a, b]) = h.find_extension(gtpu::ext_type::UDP_PORT) {
        d.set("", "gtp.udp_port", u16::from_be_bytes([a, b]));
    }
    if let Some(c) = h.find_extension(gtpu::ext_type::PDU_SESSION_CONTAINER) {
        match pdu_session::Packet::new_checked(c) {
            Ok(p) => {
                d.set("", "pdu.type", p.pdu_type());
                d.set("", "pdu.qfi", p.qfi());
                d.set("", "pdu.qmp", p.qmp());
                if p.pdu_type() == pdu_session::pdu_type::DL {
                    d.set("", "pdu.rqi", p.rqi());
                    d.set("", "pdu.ppp", p.ppp());
                    d.set("", "pdu.snp", p.snp());
                    if let Some(ppi) = p.ppi() {
                        d.set("", "pdu.ppi", ppi);
                    }
                    if let Some(ts) = p.dl_sending_timestamp() {
                        d.set("", "pdu.dl_send_time", ts);
                    }
                    if let Some(sn) = p.dl_qfi_seq() {
                        d.set("", "pdu.dl_qfi_seq", sn);
                    }
                }
            }
            Err(e) => d.problem(format!("pdu session container: {e}")),
        }
    }
    if h.msg_type() == gtpu::msg_type::G_PDU {
        match gtpu::Repr::parse(&h) {
            // `gtpu::Repr` holds the PDU Session Container only, and of it only QFI, RQI
            // and PPI: compare bytes when that is all the header has.
            Ok(r) if r.header_len() == h.header_len() && exts.iter().all(|&t| t == 0x85) => {
                let mut out = vec![0u8; r.header_len()];
                r.emit(&mut out).expect("fits");
                d.same_bytes("gtp-u header", &out, &b[..h.header_len()]);
            }
            Ok(_) => {}
            Err(e) => d.problem(format!("gtpu repr: {e}")),
        }
        ip(d, "inner.", h.payload());
        return;
    }
    let m = match gtpu_msg::Repr::parse(&h) {
        Ok(m) => m,
        Err(e) => return d.problem(format!("gtpu_msg: {e}")),
    };
    match m {
        gtpu_msg::Repr::EchoResponse { recovery, .. } => d.set("", "gtpmsg.recovery", recovery),
        gtpu_msg::Repr::ErrorIndication { teid_data, peer } => {
            d.set("", "gtpmsg.teid_data", teid_data);
            d.set("", "gtpmsg.peer", peer.to_string());
        }
        gtpu_msg::Repr::EchoRequest { .. } | gtpu_msg::Repr::EndMarker { .. } => {}
    }
    let mut out = vec![0u8; m.buffer_len()];
    m.emit(&mut out).expect("fits");
    d.same_bytes("gtp-u message", &out, &b[..h.total_len()]);
}

/// Whether `python3` can import Scapy. When not: `false` (skip), or a panic under `CI`.
fn scapy_present() -> bool {
    peregrine_testkit::tools::tool_present("python3", &["-c", "import scapy"])
}

/// Frames Scapy builds parse in our code to the values Scapy decodes from them (every
/// expected field present and equal, every checksum verifying), and our emitters rebuild
/// Scapy's bytes exactly.
#[test]
fn we_parse_what_scapy_builds() {
    if !scapy_present() {
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/scapy_build.py");
    let out = Command::new("python3")
        .arg(&script)
        .output()
        .expect("run scapy_build.py");
    assert!(
        out.status.success(),
        "scapy_build.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let mut fails = Vec::new();
    let (mut frames, mut checked) = (0, 0);
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let pkt: Value = serde_json::from_str(line).expect("one JSON object per line");
        let name = pkt["name"].as_str().expect("name");
        let frame = unhex(pkt["hex"].as_str().expect("hex"));
        let expect = pkt["expect"].as_object().expect("expect");
        let d = decode(&frame);
        frames += 1;
        for p in &d.problems {
            fails.push(format!("{name}: {p}"));
        }
        for (k, want) in expect {
            checked += 1;
            match d.fields.get(k) {
                None => fails.push(format!(
                    "{name}: {k}: Scapy says {want}, we found no such field"
                )),
                Some(got) if got != want => {
                    fails.push(format!("{name}: {k}: Scapy says {want}, we say {got}"))
                }
                Some(_) => {}
            }
        }
    }
    eprintln!(
        "scapy oracle: {frames} frames, {checked} field checks, {} failures",
        fails.len()
    );
    assert!(
        frames >= 21,
        "expected the full set of Scapy frames, got {frames}"
    );
    assert!(fails.is_empty(), "Scapy disagrees:\n{}", fails.join("\n"));
}
