//! Independent oracle, emit direction: frames built only with our `Repr::emit` (and our
//! checksum fills) are decoded by Wireshark's dissectors (`tshark`), which must report the
//! field values we set, find every IPv4/UDP/TCP/ICMP checksum good, and raise no
//! malformed-packet, warning or error expert info anywhere.
//!
//! Frames: Ethernet/IPv4/UDP; Ethernet/802.1Q/IPv4/TCP; IPv6 with a Hop-by-Hop header
//! holding PadN and an unknown option; IPv6 with Routing (SRH) and Fragment headers;
//! ICMPv4 echo; ICMPv6 echo and Packet Too Big; ARP request and reply; GTP-U G-PDUs over
//! IPv4 and IPv6 with a DL (QFI, RQI, PPI) or UL (QFI) PDU Session Container carrying inner
//! IPv4/UDP or IPv6/TCP; GTP-U Echo Request, Echo Response (Recovery), Error Indication
//! (TEID Data I, IPv4 and IPv6 GTP-U Peer Address) and End Marker.
//!
//! One pcap, one `tshark -T json` run for all frames. Skips (with a message) when `tshark`
//! is not installed, unless `CI` is set, in which case a missing `tshark` is a failure.

use peregrine_wire::ethernet::{ethertype, Address};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::ipv6option::Kind;
use peregrine_wire::{arp, gtpu_msg, icmpv4, icmpv6, ipv6ext, pdu_session, tcp, vlan};
use serde_json::Value;

use peregrine_testkit::tools::tool_present;
use peregrine_testkit::tshark::{decode_frames, find_all, malformed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

mod frames;
use frames::*;

// ---------------------------------------------------------------------------------------
// The frames and what tshark must say about them.

/// What tshark must report: `(layer, occurrence, field, value)`. `occurrence` picks the
/// outer (0) or inner (1) instance of a layer that appears twice (IP in GTP-U); the field
/// is searched for anywhere inside that layer's JSON object.
type Expect = (&'static str, usize, &'static str, String);

struct Case {
    name: &'static str,
    frame: Vec<u8>,
    expect: Vec<Expect>,
}

fn e(layer: &'static str, field: &'static str, value: impl ToString) -> Expect {
    (layer, 0, field, value.to_string())
}

fn inner(layer: &'static str, field: &'static str, value: impl ToString) -> Expect {
    (layer, 1, field, value.to_string())
}

/// Checksum status as tshark reports it when it verified the checksum: 1 = Good.
const GOOD: &str = "1";

fn ipv4_expect(ip: &Ip) -> Vec<Expect> {
    let Ip::V4 {
        src,
        dst,
        ttl,
        tos,
        ident,
        df,
    } = ip
    else {
        unreachable!("v4 only")
    };
    vec![
        e("ip", "ip.src", src),
        e("ip", "ip.dst", dst),
        e("ip", "ip.ttl", ttl),
        e("ip", "ip.dsfield", format!("0x{tos:02x}")),
        e("ip", "ip.id", format!("0x{ident:04x}")),
        e("ip", "ip.flags.df", u8::from(*df)),
        e("ip", "ip.checksum.status", GOOD),
    ]
}

fn ipv6_expect(ip: &Ip) -> Vec<Expect> {
    let Ip::V6 {
        src,
        dst,
        hop_limit,
        tc,
        flow,
        ..
    } = ip
    else {
        unreachable!("v6 only")
    };
    vec![
        e("ipv6", "ipv6.src", src),
        e("ipv6", "ipv6.dst", dst),
        e("ipv6", "ipv6.hlim", hop_limit),
        e("ipv6", "ipv6.tclass", format!("0x{tc:08x}")),
        e("ipv6", "ipv6.flow", format!("0x{flow:06x}")),
    ]
}

fn outer_expect(ip: &Ip) -> Vec<Expect> {
    match ip {
        Ip::V4 { .. } => ipv4_expect(ip),
        Ip::V6 { .. } => ipv6_expect(ip),
    }
}

fn inner_v4_expect(outer_is_v6: bool) -> Vec<Expect> {
    // The inner IPv4 header is the first "ip" layer when the outer header is IPv6.
    let n = usize::from(!outer_is_v6);
    vec![
        ("ip", n, "ip.src", "10.45.0.7".into()),
        ("ip", n, "ip.dst", "198.51.100.20".into()),
        ("ip", n, "ip.ttl", "64".into()),
        ("ip", n, "ip.checksum.status", GOOD.into()),
        inner("udp", "udp.srcport", 41000),
        inner("udp", "udp.dstport", 42000),
        inner("udp", "udp.checksum.status", GOOD),
    ]
}

fn inner_v6_expect(outer_is_v6: bool, sport: u16) -> Vec<Expect> {
    let n = usize::from(outer_is_v6);
    vec![
        ("ipv6", n, "ipv6.src", "2001:db8:45::7".into()),
        ("ipv6", n, "ipv6.dst", "2001:db8:ffff::20".into()),
        ("ipv6", n, "ipv6.flow", "0x054321".into()),
        e("tcp", "tcp.srcport", sport),
        e("tcp", "tcp.dstport", 44321),
        e("tcp", "tcp.seq_raw", 1000),
        e("tcp", "tcp.ack_raw", 2000),
        e("tcp", "tcp.flags", "0x0010"),
        e("tcp", "tcp.checksum.status", GOOD),
    ]
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();

    // Ethernet / IPv4 / UDP.
    let ip = Ip::V4 {
        src: Ipv4Addr::new(192, 168, 1, 10),
        dst: Ipv4Addr::new(198, 51, 100, 1),
        ttl: 63,
        tos: 0xb8,
        ident: 0x1234,
        df: true,
    };
    let mut expect = ipv4_expect(&ip);
    expect.extend([
        e("eth", "eth.src", MAC_A),
        e("eth", "eth.dst", MAC_B),
        e("ip", "ip.len", 20 + 8 + 15),
        e("ip", "ip.proto", 17),
        e("udp", "udp.srcport", 40001),
        e("udp", "udp.dstport", 40002),
        e("udp", "udp.length", 8 + 15),
        e("udp", "udp.checksum.status", GOOD),
    ]);
    cases.push(Case {
        name: "eth_ipv4_udp",
        frame: ip_frame(
            &ip,
            ip_protocol::UDP,
            &udp_datagram(&ip, 40001, 40002, b"hello peregrine"),
        ),
        expect,
    });

    // Ethernet / 802.1Q / IPv4 / TCP.
    let ip = Ip::V4 {
        src: Ipv4Addr::new(10, 1, 0, 1),
        dst: Ipv4Addr::new(10, 1, 0, 2),
        ttl: 128,
        tos: 0,
        ident: 0xbeef,
        df: false,
    };
    let t = tcp::Repr {
        src_port: 40000,
        dst_port: 45000,
        seq_number: 0x1234_5678,
        ack_number: 0x9abc_def0,
        flags: tcp::Flags::PSH | tcp::Flags::ACK,
        window_len: 64240,
        urgent_ptr: 0,
        payload_len: 0,
    };
    let l3 = ip.packet(ip_protocol::TCP, &tcp_segment(&ip, t, b"tagged tcp data"));
    let tag = vlan::Repr {
        pcp: 5,
        dei: true,
        vid: 100,
        ethertype: ethertype::IPV4,
    };
    let mut tagged = vec![0u8; vlan::HEADER_LEN + l3.len()];
    tag.emit(&mut tagged).expect("vlan emit");
    tagged[vlan::HEADER_LEN..].copy_from_slice(&l3);
    let mut expect = ipv4_expect(&ip);
    expect.extend([
        e("eth", "eth.type", "0x8100"),
        e("vlan", "vlan.id", 100),
        e("vlan", "vlan.priority", 5),
        e("vlan", "vlan.dei", 1),
        e("vlan", "vlan.etype", "0x0800"),
        e("tcp", "tcp.srcport", 40000),
        e("tcp", "tcp.dstport", 45000),
        e("tcp", "tcp.seq_raw", 0x1234_5678u32),
        e("tcp", "tcp.ack_raw", 0x9abc_def0u32),
        e("tcp", "tcp.flags", "0x0018"),
        e("tcp", "tcp.window_size_value", 64240),
        e("tcp", "tcp.hdr_len", 20),
        e("tcp", "tcp.len", 15),
        e("tcp", "tcp.checksum.status", GOOD),
    ]);
    cases.push(Case {
        name: "eth_vlan_ipv4_tcp",
        frame: ethernet(MAC_B, ethertype::VLAN, &tagged),
        expect,
    });

    // IPv6 with Hop-by-Hop: PadN + an unknown (experimental, RFC 4727) option, then UDP.
    let mut hbh = vec![0u8; 64];
    let opts = [
        Kind::PadN(2),
        Kind::Unknown {
            option_type: 0x1e,
            data: &[0xaa, 0xbb, 0xcc, 0xdd],
        },
    ];
    let n = ipv6ext::emit_options_header(ip_protocol::UDP, &opts, &mut hbh).expect("hbh emit");
    hbh.truncate(n);
    let ip = Ip::V6 {
        src: "2001:db8::1".parse().expect("addr"),
        dst: "2001:db8::2".parse().expect("addr"),
        hop_limit: 64,
        tc: 0xb8,
        flow: 0x12345,
        ext: Some((ip_protocol::HOPOPT, hbh)),
    };
    let mut expect = ipv6_expect(&ip);
    expect.extend([
        e("ipv6", "ipv6.nxt", 0),
        e("ipv6", "ipv6.plen", 16 + 8 + 3),
        e("ipv6", "ipv6.hopopts.nxt", 17),
        e("ipv6", "ipv6.hopopts.len", 1),
        e("ipv6", "ipv6.opt.type", "0x01"),
        e("ipv6", "ipv6.opt.padn", "00:00"),
        e("ipv6", "ipv6.opt.experimental", "aa:bb:cc:dd"),
        e("udp", "udp.srcport", 1000),
        e("udp", "udp.checksum.status", GOOD),
    ]);
    cases.push(Case {
        name: "ipv6_hbh_padn_unknown",
        frame: ip_frame(
            &ip,
            ip_protocol::UDP,
            &udp_datagram(&ip, 1000, 2000, b"hbh"),
        ),
        expect,
    });

    // IPv6 with a Segment Routing header (type 4, segments left 0) and an atomic Fragment
    // header, then UDP. Segments left 0: the destination is final, so tshark checks the UDP
    // checksum against it.
    let dst: Ipv6Addr = "2001:db8::2".parse().expect("addr");
    let mut seg = [0u8; 20];
    seg[4..].copy_from_slice(&dst.octets());
    let rt = ipv6ext::RoutingRepr {
        next_header: ip_protocol::IPV6_FRAG,
        routing_type: 4,
        segments_left: 0,
        data: &seg,
    };
    let fr = ipv6ext::FragmentRepr {
        next_header: ip_protocol::UDP,
        frag_offset: 0,
        more_frags: false,
        ident: 0xdead_beef,
    };
    let mut ext = vec![0u8; rt.buffer_len() + fr.buffer_len()];
    rt.emit(&mut ext).expect("routing emit");
    fr.emit(&mut ext[rt.buffer_len()..]).expect("fragment emit");
    let ip = Ip::V6 {
        src: "2001:db8::1".parse().expect("addr"),
        dst,
        hop_limit: 17,
        tc: 0,
        flow: 0,
        ext: Some((ip_protocol::IPV6_ROUTE, ext)),
    };
    let mut expect = ipv6_expect(&ip);
    expect.extend([
        e("ipv6", "ipv6.nxt", 43),
        e("ipv6", "ipv6.routing.nxt", 44),
        e("ipv6", "ipv6.routing.type", 4),
        e("ipv6", "ipv6.routing.segleft", 0),
        e("ipv6", "ipv6.routing.len", 2),
        e("ipv6", "ipv6.routing.srh.addr", "2001:db8::2"),
        e("ipv6", "ipv6.fraghdr.nxt", 17),
        e("ipv6", "ipv6.fraghdr.offset", 0),
        e("ipv6", "ipv6.fraghdr.more", 0),
        e("ipv6", "ipv6.fraghdr.ident", "0xdeadbeef"),
        e("udp", "udp.srcport", 40011),
        e("udp", "udp.checksum.status", GOOD),
    ]);
    cases.push(Case {
        name: "ipv6_routing_fragment",
        frame: ip_frame(
            &ip,
            ip_protocol::UDP,
            &udp_datagram(&ip, 40011, 40012, b"atomic fragment"),
        ),
        expect,
    });

    // ICMPv4 echo request.
    let ip = Ip::v4([10, 0, 2, 15], [10, 0, 2, 2], 64);
    let data: Vec<u8> = (0..32).collect();
    let m = icmpv4::Repr::EchoRequest {
        ident: 0xf703,
        seq_no: 9,
        data: &data,
    };
    let mut icmp = vec![0u8; m.buffer_len()];
    m.emit(&mut icmp).expect("icmpv4 emit");
    cases.push(Case {
        name: "icmpv4_echo",
        frame: ip_frame(&ip, ip_protocol::ICMP, &icmp),
        expect: vec![
            e("icmp", "icmp.type", 8),
            e("icmp", "icmp.code", 0),
            e("icmp", "icmp.ident", 0xf703),
            e("icmp", "icmp.seq", 9),
            e("icmp", "icmp.checksum.status", GOOD),
            e("icmp", "data.len", 32),
            e("ip", "ip.checksum.status", GOOD),
        ],
    });

    // ICMPv6 echo request and Packet Too Big (quoting an IPv6/UDP packet).
    let ip = Ip::v6("2003::2", "2003::1", 64);
    let m = icmpv6::Repr::EchoRequest {
        ident: 0xd2ab,
        seq_no: 256,
        data: b"peregrine-echo",
    };
    let mut icmp = vec![0u8; m.buffer_len()];
    m.emit(ip.src6(), ip.dst6(), &mut icmp)
        .expect("icmpv6 emit");
    cases.push(Case {
        name: "icmpv6_echo",
        frame: ip_frame(&ip, ip_protocol::IPV6_ICMP, &icmp),
        expect: vec![
            e("icmpv6", "icmpv6.type", 128),
            e("icmpv6", "icmpv6.code", 0),
            e("icmpv6", "icmpv6.echo.identifier", "0xd2ab"),
            e("icmpv6", "icmpv6.echo.sequence_number", 256),
            e("icmpv6", "icmpv6.checksum.status", GOOD),
            e("icmpv6", "data.len", 14),
        ],
    });
    let quoted_ip = Ip::v6("2001:db8::1", "2001:db8::2", 63);
    let quoted = quoted_ip.packet(
        ip_protocol::UDP,
        &udp_datagram(&quoted_ip, 40007, 40009, &[b'x'; 32]),
    );
    let ip = Ip::v6("2001:db8::fe", "2001:db8::1", 255);
    let m = icmpv6::Repr::PktTooBig {
        mtu: 1400,
        data: icmpv6::quote(&quoted),
    };
    let mut icmp = vec![0u8; m.buffer_len()];
    m.emit(ip.src6(), ip.dst6(), &mut icmp)
        .expect("icmpv6 emit");
    cases.push(Case {
        name: "icmpv6_packet_too_big",
        frame: ip_frame(&ip, ip_protocol::IPV6_ICMP, &icmp),
        expect: vec![
            e("icmpv6", "icmpv6.type", 2),
            e("icmpv6", "icmpv6.code", 0),
            e("icmpv6", "icmpv6.mtu", 1400),
            e("icmpv6", "icmpv6.checksum.status", GOOD),
            // The quoted packet is dissected too, inside the ICMPv6 layer.
            e("icmpv6", "ipv6.dst", "2001:db8::2"),
            e("icmpv6", "udp.dstport", 40009),
        ],
    });

    // ARP request and reply.
    let request = arp::Repr {
        operation: arp::Operation::Request,
        sender_hardware_addr: MAC_A,
        sender_protocol_addr: Ipv4Addr::new(10, 0, 2, 15),
        target_hardware_addr: Address([0; 6]),
        target_protocol_addr: Ipv4Addr::new(10, 0, 2, 2),
    };
    let reply = request.reply(MAC_B).expect("request has a reply");
    for (name, r, dst) in [
        ("arp_request", request, Address::BROADCAST),
        ("arp_reply", reply, MAC_A),
    ] {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut b).expect("arp emit");
        cases.push(Case {
            name,
            frame: ethernet(dst, ethertype::ARP, &b),
            expect: vec![
                e("eth", "eth.dst", dst),
                e("arp", "arp.opcode", u16::from(r.operation)),
                e("arp", "arp.src.hw_mac", r.sender_hardware_addr),
                e("arp", "arp.src.proto_ipv4", r.sender_protocol_addr),
                e("arp", "arp.dst.hw_mac", r.target_hardware_addr),
                e("arp", "arp.dst.proto_ipv4", r.target_protocol_addr),
            ],
        });
    }

    // G-PDUs: {IPv4, IPv6} outer x {DL with QFI/RQI/PPI, UL with QFI} x {IPv4, IPv6} inner.
    let dl = pdu_session::Repr::Dl {
        qfi: 9,
        rqi: true,
        ppi: Some(5),
    };
    let ul = pdu_session::Repr::Ul { qfi: 5 };
    for (name, outer, psc, inner_is_v6, teid) in [
        (
            "gtpu_v4_dl_inner_v4",
            outer_v4(),
            dl,
            false,
            0x1000_000a_u32,
        ),
        ("gtpu_v4_ul_inner_v6", outer_v4(), ul, true, 0x1000_000b),
        ("gtpu_v6_dl_inner_v6", outer_v6(), dl, true, 0x1000_000c),
        ("gtpu_v6_ul_inner_v4", outer_v6(), ul, false, 0x1000_000d),
    ] {
        let inner_pkt = if inner_is_v6 {
            inner_v6(teid as u16)
        } else {
            inner_v4()
        };
        let mut expect = outer_expect(&outer);
        expect.extend([
            e("udp", "udp.srcport", 2152),
            e("udp", "udp.dstport", 2152),
            e("udp", "udp.checksum.status", GOOD),
            e("gtp", "gtp.flags", "0x34"),
            e("gtp", "gtp.message", "0xff"),
            e("gtp", "gtp.teid", format!("0x{teid:08x}")),
            e("gtp", "gtp.ext_hdr.next", "0x85"),
        ]);
        match psc {
            pdu_session::Repr::Dl { qfi, rqi, ppi } => expect.extend([
                e("gtp", "gtp.length", 4 + 8 + inner_pkt.len()),
                e("gtp", "gtp.ext_hdr.length", 2),
                e("gtp", "gtp.ext_hdr.pdu_ses_con.pdu_type", 0),
                e("gtp", "gtp.ext_hdr.pdu_ses_con.qos_flow_id", qfi),
                e("gtp", "gtp.ext_hdr.pdu_ses_cont.rqi", u8::from(rqi)),
                e("gtp", "gtp.ext_hdr.pdu_ses_cont.ppp", 1),
                e("gtp", "gtp.ext_hdr.pdu_ses_cont.ppi", ppi.expect("set")),
            ]),
            pdu_session::Repr::Ul { qfi } => expect.extend([
                e("gtp", "gtp.length", 4 + 4 + inner_pkt.len()),
                e("gtp", "gtp.ext_hdr.length", 1),
                e("gtp", "gtp.ext_hdr.pdu_ses_con.pdu_type", 1),
                e("gtp", "gtp.ext_hdr.pdu_ses_con.qos_flow_id", qfi),
            ]),
        }
        if inner_is_v6 {
            expect.extend(inner_v6_expect(matches!(outer, Ip::V6 { .. }), teid as u16));
        } else {
            expect.extend(inner_v4_expect(matches!(outer, Ip::V6 { .. })));
        }
        cases.push(Case {
            name,
            frame: gtp_frame(&outer, &gpdu(teid, psc, &inner_pkt)),
            expect,
        });
    }

    // GTP-U signalling.
    let gtp_common = |m: gtpu_msg::Repr, flags: &str, ty: u8| {
        vec![
            e("gtp", "gtp.flags", flags),
            e("gtp", "gtp.message", format!("0x{ty:02x}")),
            e("gtp", "gtp.length", m.buffer_len() - 8),
            e("udp", "udp.checksum.status", GOOD),
        ]
    };
    let m = gtpu_msg::Repr::EchoRequest { seq: 0x1234 };
    let mut expect = gtp_common(m, "0x32", 1);
    expect.extend([
        e("gtp", "gtp.teid", "0x00000000"),
        e("gtp", "gtp.seq_number", "0x1234"),
    ]);
    cases.push(Case {
        name: "gtpu_echo_request",
        frame: gtp_frame(&outer_v4(), &gtp_msg(m)),
        expect,
    });
    let m = gtpu_msg::Repr::EchoResponse {
        seq: 0x1234,
        recovery: 7,
    };
    let mut expect = gtp_common(m, "0x32", 2);
    expect.extend([
        e("gtp", "gtp.seq_number", "0x1234"),
        e("gtp", "gtp.recovery", 7),
    ]);
    cases.push(Case {
        name: "gtpu_echo_response",
        frame: gtp_frame(&outer_v4(), &gtp_msg(m)),
        expect,
    });
    for (name, outer, peer, field) in [
        (
            "gtpu_error_indication_v4",
            outer_v4(),
            IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10)),
            "gtp.gsn_ipv4",
        ),
        (
            "gtpu_error_indication_v6",
            outer_v6(),
            IpAddr::V6("2001:db8:1::10".parse().expect("addr")),
            "gtp.gsn_ipv6",
        ),
    ] {
        let m = gtpu_msg::Repr::ErrorIndication {
            teid_data: 0x0bad_c0de,
            peer,
        };
        let mut expect = gtp_common(m, "0x32", 26);
        expect.extend([
            e("gtp", "gtp.teid", "0x00000000"),
            e("gtp", "gtp.teid_data", "0x0badc0de"),
            e("gtp", field, peer),
        ]);
        cases.push(Case {
            name,
            frame: gtp_frame(&outer, &gtp_msg(m)),
            expect,
        });
    }
    let m = gtpu_msg::Repr::EndMarker { teid: 0x2a };
    let mut expect = gtp_common(m, "0x30", 254);
    expect.push(e("gtp", "gtp.teid", "0x0000002a"));
    cases.push(Case {
        name: "gtpu_end_marker",
        frame: gtp_frame(&outer_v4(), &gtp_msg(m)),
        expect,
    });
    cases
}

// ---------------------------------------------------------------------------------------
// pcap writing and tshark JSON reading.

/// Check one packet's dissection against its expectations; returns the failures.
fn check(case: &Case, packet: &Value) -> Vec<String> {
    let mut fails = Vec::new();
    let layers = &packet["_source"]["layers"];
    malformed(layers, "", &mut fails);
    for (layer, occurrence, field, want) in &case.expect {
        let instances: Vec<&Value> = match &layers[*layer] {
            Value::Array(xs) => xs.iter().collect(),
            Value::Null => Vec::new(),
            x => vec![x],
        };
        let Some(instance) = instances.get(*occurrence) else {
            fails.push(format!(
                "{layer}[{occurrence}] missing (wanted {field} = {want})"
            ));
            continue;
        };
        let mut found = Vec::new();
        find_all(instance, field, &mut found);
        let got: Vec<&str> = found.iter().filter_map(|v| v.as_str()).collect();
        if !got.contains(&want.as_str()) {
            fails.push(format!(
                "{layer}[{occurrence}] {field}: want {want}, tshark says {got:?}"
            ));
        }
    }
    fails
        .into_iter()
        .map(|f| format!("{}: {f}", case.name))
        .collect()
}

/// Frames we emit decode in Wireshark to the values we set, with good checksums and no
/// malformed, warning- or error-severity expert info (the frames are listed in the module docs).
#[test]
fn tshark_decodes_what_we_emit() {
    if !tool_present("tshark", &["--version"]) {
        return;
    }
    let cases = cases();
    let frames: Vec<&[u8]> = cases.iter().map(|c| c.frame.as_slice()).collect();
    // `PEREGRINE_ORACLE_PCAP=path` keeps the capture for a look in Wireshark.
    let packets = decode_frames(&frames, "oracle");
    assert_eq!(packets.len(), cases.len(), "one dissection per frame");
    let fails: Vec<String> = cases
        .iter()
        .zip(&packets)
        .flat_map(|(c, p)| check(c, p))
        .collect();
    let checked: usize = cases.iter().map(|c| c.expect.len()).sum();
    eprintln!(
        "tshark oracle: {} frames, {checked} field checks, {} failures",
        cases.len(),
        fails.len()
    );
    assert!(fails.is_empty(), "tshark disagrees:\n{}", fails.join("\n"));
}

/// The malformed detector flags what tshark 4.0 prints for a frame it could not dissect
/// (here: a non-DNS payload on UDP port 53), and passes a warning-free layer.
#[test]
fn malformed_detector_flags_tshark_output() {
    let bad: Value = serde_json::from_str(
        r#"{"dns": {"dns.id": "0x6865"}, "_ws.malformed": {"_ws.expert": {
            "_ws.malformed.expert": "", "_ws.expert.message": "Malformed Packet (Exception occurred)",
            "_ws.expert.severity": "8388608", "_ws.expert.group": "117440512"},
            "_ws.malformed": "Malformed Packet"}}"#,
    )
    .expect("json");
    let mut out = Vec::new();
    malformed(&bad, "", &mut out);
    assert!(!out.is_empty());
    // A warning-severity expert item on its own, in an array (duplicate keys merged).
    let err: Value = serde_json::from_str(
        r#"{"udp": {"_ws.expert": [{"_ws.expert.severity": "4194304", "_ws.expert.group": "1"},
            {"_ws.expert.severity": "6291456", "_ws.expert.group": "16777216"}]}}"#,
    )
    .expect("json");
    out.clear();
    malformed(&err, "", &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    // A note (severity 0x00400000) is not a failure.
    let note: Value = serde_json::from_str(
        r#"{"ipv6": {"_ws.expert": {"_ws.expert.severity": "4194304", "_ws.expert.group": "234881024"}}}"#,
    )
    .expect("json");
    out.clear();
    malformed(&note, "", &mut out);
    assert!(out.is_empty(), "{out:?}");
}
