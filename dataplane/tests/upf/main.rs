//! The UPF stage end to end on frames built with the wire crate and tables built by hand:
//! every output is parsed back with the wire crate and checked field by field.

use peregrine_dataplane::classify::{classify, HAS_QFI};
use peregrine_dataplane::meta::{flags, Direction as MetaDirection, PacketMeta};
use peregrine_dataplane::qos::{ColourMode, TrTcmConfig};
use peregrine_dataplane::runtime::{Action, Disposition};
use peregrine_dataplane::upf::tables::{
    Direction, FarAction, FarRule, FlowFilter, IpPrefix, OuterHeader,
};
use peregrine_testkit::rng::{self, RngCore};
use peregrine_testkit::upf::*;
use peregrine_wire::ethernet::{self, ethertype};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{gtpu, gtpu_msg, icmpv4, icmpv6, ipv4, ipv6, pdu_session, udp};
use std::net::{IpAddr, Ipv4Addr};

const TEID: u32 = 0x0100_0001;
const DL_TEID: u32 = 0x0200_0001;

/// The inner packet as it must leave after one routing hop: TTL / hop limit - 1.
fn hop(ip: &[u8]) -> Vec<u8> {
    let mut v = ip.to_vec();
    if v[0] >> 4 == 4 {
        ipv4::Packet::new_unchecked(&mut v[..]).decrement_ttl_update_checksum();
    } else {
        let mut p = ipv6::Packet::new_unchecked(&mut v[..]);
        p.set_hop_limit(p.hop_limit() - 1);
    }
    v
}

/// Parse an N3/N9 GTP-U frame: (outer src, outer dst, UDP src port, GTP-U header bytes
/// offset, whole frame); checks the outer checksums.
fn parse_gtpu(f: &[u8]) -> (IpAddr, IpAddr, u16, gtpu::Header<&[u8]>) {
    let eth = ethernet::Frame::new_checked(f).unwrap();
    let l3 = &f[14..];
    let (src, dst, l4) = match eth.ethertype() {
        ethertype::IPV4 => {
            let ip = ipv4::Packet::new_checked(l3).unwrap();
            assert!(ip.verify_checksum());
            assert_eq!(ip.ttl(), 64);
            assert_eq!(ip.total_len() as usize, l3.len());
            (
                IpAddr::V4(ip.src_addr()),
                IpAddr::V4(ip.dst_addr()),
                &l3[20..],
            )
        }
        ethertype::IPV6 => {
            let ip = ipv6::Packet::new_checked(l3).unwrap();
            assert_eq!(ip.hop_limit(), 64);
            assert_eq!(ip.total_len(), l3.len());
            (
                IpAddr::V6(ip.src_addr()),
                IpAddr::V6(ip.dst_addr()),
                &l3[40..],
            )
        }
        e => panic!("ethertype {e:#x}"),
    };
    let u = udp::Packet::new_checked(l4).unwrap();
    assert_eq!(u.dst_port(), gtpu::PORT);
    assert_eq!(u.length() as usize, l4.len());
    match (src, dst) {
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            assert_ne!(u.checksum(), 0, "UDP checksum is mandatory over IPv6");
            assert!(u.verify_checksum_v6(s, d));
        }
        _ => assert_eq!(u.checksum(), 0),
    }
    let g = gtpu::Header::new_checked(&l4[8..]).unwrap();
    (src, dst, u.src_port(), g)
}

#[test]
fn uplink_decap_all_families() {
    for v6_outer in [false, true] {
        for v6_inner in [false, true] {
            let mut tb = TableBuilder::default();
            tb.add(Key::Teid(TEID), &[ul(Some(9))]);
            let mut rig = Rig::new(tb.build(), cfg());
            let inner = if v6_inner {
                udp6(ue_v6(0), server_v6(), 53, 100)
            } else {
                udp4(ue_v4(0), server_v4(), 53, 100)
            };
            let (out, d) = rig.one(ul_frame(v6_outer, TEID, Some(9), &inner), 0, 1);
            assert_eq!(d, Disposition::tx_queue(1, 7), "{v6_outer} {v6_inner}");
            let e = ethernet::Frame::new_checked(&out[..]).unwrap();
            assert_eq!(e.dst_addr(), ROUTER_MAC);
            assert_eq!(e.src_addr(), N6_MAC);
            assert_eq!(
                e.ethertype(),
                if v6_inner {
                    ethertype::IPV6
                } else {
                    ethertype::IPV4
                }
            );
            assert_eq!(&out[14..], &hop(&inner)[..]);
            if !v6_inner {
                assert!(ipv4::Packet::new_checked(&out[14..])
                    .unwrap()
                    .verify_checksum());
            }
        }
    }
}

#[test]
fn uplink_decap_with_extension_headers_ohr() {
    // PDCP PDU Number (0xc0) then the PDU Session Container: a chain of two.
    let inner = udp4(ue_v4(0), server_v4(), 53, 40);
    let mut g = vec![0x34, 255, 0, 0];
    g.extend_from_slice(&TEID.to_be_bytes());
    g.extend_from_slice(&[0, 0, 0, 0xc0]);
    g.extend_from_slice(&[1, 0x12, 0x34, 0x85]);
    g.extend_from_slice(&[1, 0x10, 5, 0]);
    g.extend_from_slice(&inner);
    let len = (g.len() - 8) as u16;
    g[2..4].copy_from_slice(&len.to_be_bytes());
    let frame = udp_frame(IpAddr::V4(gnb_v4()), IpAddr::V4(upf_v4()), 2152, 2152, &g);
    let mut tb = TableBuilder::default();
    tb.add(Key::Teid(TEID), &[ul(Some(5))]);
    let mut rig = Rig::new(tb.build(), cfg());
    let (out, d) = rig.one(frame.clone(), 0, 1);
    assert_eq!(d.action(), Action::Tx(1));
    assert_eq!(&out[14..], &hop(&inner)[..]);
    // A chain that runs past the packet is a named drop.
    let mut bad = frame;
    let at = 14 + 20 + 8 + 12 + 4;
    bad[at] = 40; // PSC length 160 bytes
    let (_, d) = rig.one(bad, 0, 1);
    assert_eq!(rig.reason(d), "gtpu_malformed");
}

#[test]
fn downlink_encap_ipv4_and_ipv6_outer() {
    for v6_outer in [false, true] {
        for v6_inner in [false, true] {
            let gnb = if v6_outer {
                IpAddr::V6(gnb_v6())
            } else {
                IpAddr::V4(gnb_v4())
            };
            let mut p = dl(DL_TEID, gnb);
            p.qfi = Some(7);
            let mut tb = TableBuilder::default();
            let (inner, key) = if v6_inner {
                (udp6(server_v6(), ue_v6(3), 4000, 300), Key::Ue6(ue_v6(3)))
            } else {
                (udp4(server_v4(), ue_v4(3), 4000, 300), Key::Ue4(ue_v4(3)))
            };
            tb.add(key, &[p]);
            let mut rig = Rig::new(tb.build(), cfg());
            // Ethernet padding behind a short packet must not be carried into the tunnel.
            let mut frame = dl_frame(&inner);
            frame.extend_from_slice(&[0xee; 6]);
            let (out, d) = rig.one(frame, 1, 1);
            assert_eq!(d, Disposition::tx_queue(0, 5), "QFI 7 -> QID 5");
            let e = ethernet::Frame::new_checked(&out[..]).unwrap();
            assert_eq!((e.dst_addr(), e.src_addr()), (GNB_MAC, N3_MAC));
            let (src, dst, sport, g) = parse_gtpu(&out);
            assert_eq!(dst, gnb);
            assert_eq!(
                src,
                if v6_outer {
                    IpAddr::V6(upf_v6())
                } else {
                    IpAddr::V4(upf_v4())
                }
            );
            assert!(sport >= 0xC000);
            assert_eq!(g.msg_type(), gtpu::msg_type::G_PDU);
            assert_eq!(g.teid(), DL_TEID);
            assert!(g.e_flag());
            assert_eq!(
                g.pdu_session().unwrap(),
                Some(pdu_session::Repr::Dl {
                    qfi: 7,
                    rqi: false,
                    ppi: None
                })
            );
            assert_eq!(g.payload(), &hop(&inner)[..]);
        }
    }
}

#[test]
fn n9_relay_reencapsulates_uplink() {
    let mut p = ul(Some(9));
    p.far.outer = Some(OuterHeader {
        teid: 0x0900_0001,
        peer: IpAddr::V4(peer_upf_v4()),
        local: IpAddr::V4(upf_v4()),
    });
    let mut tb = TableBuilder::default();
    tb.add(Key::Teid(TEID), &[p]);
    let mut rig = Rig::new(tb.build(), cfg());
    let inner = udp4(ue_v4(0), server_v4(), 53, 64);
    let (out, d) = rig.one(ul_frame(false, TEID, Some(9), &inner), 0, 1);
    assert_eq!(d, Disposition::tx_queue(2, 7));
    let e = ethernet::Frame::new_checked(&out[..]).unwrap();
    assert_eq!((e.dst_addr(), e.src_addr()), (PEER_UPF_MAC, N9_MAC));
    let (src, dst, _, g) = parse_gtpu(&out);
    assert_eq!(
        (src, dst),
        (IpAddr::V4(upf_v4()), IpAddr::V4(peer_upf_v4()))
    );
    assert_eq!(g.teid(), 0x0900_0001);
    assert_eq!(
        g.pdu_session().unwrap(),
        Some(pdu_session::Repr::Ul { qfi: 9 })
    );
    // A relay is not an IP hop: the user packet is unchanged.
    assert_eq!(g.payload(), &inner[..]);
}

#[test]
fn echo_request_answered_in_place() {
    for v6 in [false, true] {
        let mut req = vec![0u8; 12];
        gtpu_msg::Repr::EchoRequest { seq: 0x4242 }
            .emit(&mut req)
            .unwrap();
        let (s, d) = if v6 {
            (IpAddr::V6(gnb_v6()), IpAddr::V6(upf_v6()))
        } else {
            (IpAddr::V4(gnb_v4()), IpAddr::V4(upf_v4()))
        };
        let mut rig = Rig::new(TableBuilder::default().build(), cfg());
        let (out, disp) = rig.one(udp_frame(s, d, 40001, 2152, &req), 0, 1);
        assert_eq!(disp, Disposition::tx(0));
        let e = ethernet::Frame::new_checked(&out[..]).unwrap();
        assert_eq!((e.dst_addr(), e.src_addr()), (GNB_MAC, N3_MAC));
        let off = if v6 { 14 + 40 } else { 14 + 20 };
        if v6 {
            let ip = ipv6::Packet::new_checked(&out[14..]).unwrap();
            assert_eq!((ip.src_addr(), ip.dst_addr()), (upf_v6(), gnb_v6()));
            assert_eq!(ip.total_len(), out.len() - 14);
        } else {
            let ip = ipv4::Packet::new_checked(&out[14..]).unwrap();
            assert!(ip.verify_checksum());
            assert_eq!((ip.src_addr(), ip.dst_addr()), (upf_v4(), gnb_v4()));
            assert_eq!(ip.total_len() as usize, out.len() - 14);
        }
        let u = udp::Packet::new_checked(&out[off..]).unwrap();
        assert_eq!((u.src_port(), u.dst_port()), (2152, 40001));
        assert!(u.verify_checksum(d, s));
        let g = gtpu::Header::new_checked(&out[off + 8..]).unwrap();
        assert_eq!(
            gtpu_msg::Repr::parse(&g).unwrap(),
            gtpu_msg::Repr::EchoResponse {
                seq: 0x4242,
                recovery: 0
            }
        );
        // Exact bytes: flags (v1, PT, S), type 2, length 6, TEID 0, seq, 0, 0, Recovery 14/0.
        assert_eq!(
            &out[off + 8..],
            &[0x32, 2, 0, 6, 0, 0, 0, 0, 0x42, 0x42, 0, 0, 14, 0]
        );
        assert_eq!(rig.stats.totals().echo_replies, 1);
    }
}

#[test]
fn unknown_teid_gets_rate_limited_error_indication() {
    let c = UpfConfigExt::with_pps(20); // burst 2, 20 per second
    let mut rig = Rig::new(TableBuilder::default().build(), c);
    let inner = udp4(ue_v4(0), server_v4(), 53, 20);
    let frames: Vec<_> = (0..5)
        .map(|_| ul_frame(false, 0xdead_beef, Some(9), &inner))
        .collect();
    let out = rig.run(&frames, 0, 1_000);
    let sent: Vec<_> = out
        .iter()
        .filter(|(_, d)| *d == Disposition::tx(0))
        .collect();
    assert_eq!(sent.len(), 2);
    assert_eq!(
        out.iter()
            .filter(|(_, d)| rig.reason(*d) == "gtpu_unknown_teid")
            .count(),
        3
    );
    let f = &sent[0].0;
    let ip = ipv4::Packet::new_checked(&f[14..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!((ip.src_addr(), ip.dst_addr()), (upf_v4(), gnb_v4()));
    let u = udp::Packet::new_checked(&f[34..]).unwrap();
    assert_eq!((u.src_port(), u.dst_port()), (2152, 2152));
    let g = gtpu::Header::new_checked(&f[42..]).unwrap();
    assert_eq!((g.msg_type(), g.teid()), (26, 0));
    assert_eq!(
        gtpu_msg::Repr::parse(&g).unwrap(),
        gtpu_msg::Repr::ErrorIndication {
            teid_data: 0xdead_beef,
            peer: IpAddr::V4(upf_v4())
        }
    );
    assert_eq!(
        &f[42..],
        &[
            0x32, 26, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 16, 0xde, 0xad, 0xbe, 0xef, 133, 0, 4, 192, 0,
            2, 1
        ]
    );
    // 100 ms later two more tokens.
    let out = rig.run(&frames[..3], 0, 100_001_000);
    assert_eq!(
        out.iter().filter(|(_, d)| *d == Disposition::tx(0)).count(),
        2
    );
    let t = rig.stats.totals();
    assert_eq!((t.error_indications_sent, t.replies_rate_limited), (4, 4));
    assert_eq!(rig.stats.qfi(Direction::Uplink, 9).drops, 4);
}

#[test]
fn signalling_messages_counted() {
    let mut rig = Rig::new(TableBuilder::default().build(), cfg());
    let s = IpAddr::V4(gnb_v4());
    let d = IpAddr::V4(upf_v4());
    let mut em = vec![0u8; 8];
    gtpu_msg::Repr::EndMarker { teid: TEID }
        .emit(&mut em)
        .unwrap();
    let mut ei = vec![0u8; 24];
    gtpu_msg::Repr::ErrorIndication {
        teid_data: 5,
        peer: s,
    }
    .emit(&mut ei)
    .unwrap();
    let out = rig.run(
        &[
            udp_frame(s, d, 2152, 2152, &em),
            udp_frame(s, d, 2152, 2152, &ei),
        ],
        0,
        1,
    );
    assert_eq!(rig.reason(out[0].1), "end_marker");
    assert_eq!(out[1].1, Disposition::TO_CONTROL);
    let t = rig.stats.totals();
    assert_eq!(
        (t.end_markers_received, t.error_indications_received),
        (1, 1)
    );
    // GTP version 2 / PT 0 are malformed for us.
    let mut v2 = gpdu(TEID, None, &udp4(ue_v4(0), server_v4(), 1, 1));
    v2[0] = 0x50;
    let (_, dd) = rig.one(udp_frame(s, d, 2152, 2152, &v2), 0, 1);
    assert_eq!(rig.reason(dd), "gtpu_malformed");
    v2[0] = 0x20;
    let (_, dd) = rig.one(udp_frame(s, d, 2152, 2152, &v2), 0, 1);
    assert_eq!(rig.reason(dd), "gtpu_malformed");
}

#[test]
fn gtpu_to_foreign_address_is_not_decapsulated() {
    let mut tb = TableBuilder::default();
    tb.add(Key::Teid(TEID), &[ul(None)]);
    let mut rig = Rig::new(tb.build(), cfg());
    let body = gpdu(TEID, None, &udp4(ue_v4(0), server_v4(), 1, 10));
    let f = udp_frame(
        IpAddr::V4(gnb_v4()),
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 99)),
        2152,
        2152,
        &body,
    );
    let (out, d) = rig.one(f.clone(), 0, 1);
    assert_eq!(rig.reason(d), "downlink_no_session");
    assert_eq!(out, f, "untouched");
    // Non-GTP traffic to our own address goes to the exception path.
    let ping = ip_packet(
        IpAddr::V4(gnb_v4()),
        IpAddr::V4(upf_v4()),
        ip_protocol::ICMP,
        (0, 0),
        8,
        64,
    );
    assert_eq!(
        rig.one(eth(N3_MAC, GNB_MAC, &ping), 0, 1).1,
        Disposition::TO_CONTROL
    );
    // Frames for another MAC are dropped; broadcasts go to control.
    let mut other = f.clone();
    other[5] = 0x77;
    assert_eq!(rig.why(other, 0, 1), "l2_not_for_us");
    let mut bc = f;
    bc[..6].copy_from_slice(&[0xff; 6]);
    assert_eq!(rig.one(bc, 0, 1).1, Disposition::TO_CONTROL);
}

#[test]
fn gate_far_drop_and_buffer() {
    let mut gated = dl(DL_TEID, IpAddr::V4(gnb_v4()));
    gated.qfi = Some(9);
    gated.qers = vec![qer(None, false, None)];
    let mut dropper = dl(DL_TEID, IpAddr::V4(gnb_v4()));
    dropper.qfi = Some(9);
    dropper.far = FarRule {
        action: FarAction::Drop,
        ..dropper.far
    };
    let mut buffered = dl(DL_TEID, IpAddr::V4(gnb_v4()));
    buffered.far = FarRule {
        action: FarAction::Buffer { notify_cp: true },
        ..buffered.far
    };
    let mut tb = TableBuilder::default();
    tb.add(Key::Ue4(ue_v4(1)), &[gated])
        .add(Key::Ue4(ue_v4(2)), &[dropper])
        .add(Key::Ue4(ue_v4(3)), &[buffered]);
    let mut rig = Rig::new(tb.build(), cfg());
    let frames: Vec<_> = (1..=4)
        .map(|i| dl_frame(&udp4(server_v4(), ue_v4(i), 80, 10)))
        .collect();
    let out = rig.run(&frames, 1, 1);
    assert_eq!(rig.reason(out[0].1), "gate_closed");
    assert_eq!(rig.reason(out[1].1), "far_drop");
    assert_eq!(out[2].1, Disposition::TO_CONTROL);
    assert_eq!(rig.reason(out[3].1), "downlink_no_session");
    assert_eq!(rig.stats.totals().buffered, 1);
    assert_eq!(rig.stats.qfi(Direction::Downlink, 9).drops, 2);
}

#[test]
fn sdf_filter_precedence_and_qfi_match() {
    // Downlink: a filtered PDR for UDP to port 5000 (QFI 5) before a catch-all (QFI 9).
    let mut voice = dl(DL_TEID, IpAddr::V4(gnb_v4()));
    voice.filters = vec![FlowFilter {
        proto: Some(ip_protocol::UDP),
        src: Some(IpPrefix::V4(Ipv4Addr::new(198, 51, 100, 0), 24)),
        dst: None,
        src_ports: None,
        dst_ports: Some((5000, 5000)),
    }];
    voice.qers = vec![qer(Some(5), true, None)];
    let mut rest = dl(DL_TEID, IpAddr::V4(gnb_v4()));
    rest.qfi = Some(9);
    let mut tb = TableBuilder::default();
    tb.add(Key::Ue4(ue_v4(0)), &[voice, rest]);
    // Uplink: QFI 5 forwarded, QFI 9 dropped by its FAR, other QFIs match nothing.
    let mut drop9 = ul(Some(9));
    drop9.far.action = FarAction::Drop;
    tb.add(Key::Teid(TEID), &[ul(Some(5)), drop9]);
    let mut rig = Rig::new(tb.build(), cfg());
    let out = rig.run(
        &[
            dl_frame(&udp4(server_v4(), ue_v4(0), 5000, 20)),
            dl_frame(&udp4(server_v4(), ue_v4(0), 5001, 20)),
            dl_frame(&udp4(Ipv4Addr::new(203, 0, 113, 1), ue_v4(0), 5000, 20)),
        ],
        1,
        1,
    );
    let qfis: Vec<u8> = out
        .iter()
        .map(|(f, _)| parse_gtpu(f).3.pdu_session().unwrap().unwrap().qfi())
        .collect();
    assert_eq!(qfis, vec![5, 9, 9]);
    assert_eq!(out[0].1, Disposition::tx_queue(0, 0));
    let inner = udp4(ue_v4(0), server_v4(), 53, 20);
    let out = rig.run(
        &[
            ul_frame(false, TEID, Some(5), &inner),
            ul_frame(false, TEID, Some(9), &inner),
            ul_frame(false, TEID, Some(7), &inner),
            ul_frame(false, TEID, None, &inner),
        ],
        0,
        1,
    );
    assert_eq!(out[0].1.action(), Action::Tx(1));
    assert_eq!(rig.reason(out[1].1), "far_drop");
    assert_eq!(rig.reason(out[2].1), "uplink_no_pdr");
    assert_eq!(rig.reason(out[3].1), "uplink_no_pdr");
}

#[test]
fn ttl_expiry_both_directions() {
    let mut tb = TableBuilder::default();
    tb.add(Key::Teid(TEID), &[ul(None)]);
    tb.add(Key::Ue6(ue_v6(0)), &[dl(DL_TEID, IpAddr::V4(gnb_v4()))]);
    let mut rig = Rig::new(tb.build(), cfg());
    let ul_in = ip_packet(
        IpAddr::V4(ue_v4(0)),
        IpAddr::V4(server_v4()),
        ip_protocol::UDP,
        (1, 2),
        10,
        1,
    );
    let dl_in = ip_packet(
        IpAddr::V6(server_v6()),
        IpAddr::V6(ue_v6(0)),
        ip_protocol::TCP,
        (80, 1000),
        10,
        1,
    );
    let (_, d) = rig.one(ul_frame(false, TEID, None, &ul_in), 0, 1);
    assert_eq!(rig.reason(d), "ttl_exceeded");
    let (_, d) = rig.one(dl_frame(&dl_in), 1, 1);
    assert_eq!(rig.reason(d), "ttl_exceeded");
    // TTL 2 goes through with 1.
    let mut ok = dl_in.clone();
    ok[7] = 2;
    let (out, d) = rig.one(dl_frame(&ok), 1, 1);
    assert_eq!(d.action(), Action::Tx(0));
    assert_eq!(parse_gtpu(&out).3.payload()[7], 1);
}

#[test]
fn mtu_exceeded_answers_with_icmp() {
    let mut tb = TableBuilder::default();
    tb.add(Key::Ue4(ue_v4(0)), &[dl(DL_TEID, IpAddr::V4(gnb_v4()))]);
    tb.add(Key::Ue6(ue_v6(0)), &[dl(DL_TEID, IpAddr::V6(gnb_v6()))]);
    let mut rig = Rig::new(tb.build(), cfg());
    // IPv4 with DF: 1480 + 44 > 1500.
    let big4 = udp4(server_v4(), ue_v4(0), 80, 1480 - 28);
    let (out, d) = rig.one(dl_frame(&big4), 1, 1);
    assert_eq!(d.action(), Action::Tx(1));
    let e = ethernet::Frame::new_checked(&out[..]).unwrap();
    assert_eq!((e.dst_addr(), e.src_addr()), (ROUTER_MAC, N6_MAC));
    let ip = ipv4::Packet::new_checked(&out[14..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!((ip.src_addr(), ip.dst_addr()), (n6_v4(), server_v4()));
    assert_eq!(ip.protocol(), ip_protocol::ICMP);
    assert_eq!(ip.total_len(), 576);
    let icmp = icmpv4::Packet::new_checked(&out[34..]).unwrap();
    assert!(icmp.verify_checksum());
    assert_eq!((icmp.msg_type(), icmp.msg_code()), (3, 4));
    assert_eq!(icmp.next_hop_mtu(), 1500 - 44);
    assert_eq!(icmp.data(), &big4[..548]);
    // Fits exactly: 1456 + 44 = 1500.
    let fits = udp4(server_v4(), ue_v4(0), 80, 1456 - 28);
    assert_eq!(rig.one(dl_frame(&fits), 1, 1).1.action(), Action::Tx(0));
    // IPv4 without DF: fragmented (tests/upf_frag.rs), no ICMP.
    let mut nodf = big4.clone();
    {
        let mut p = ipv4::Packet::new_unchecked(&mut nodf[..]);
        p.set_dont_frag(false);
        p.fill_checksum();
    }
    let out = rig.run(&[dl_frame(&nodf)], 1, 1);
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|(_, d)| d.action() == Action::Tx(0)));
    // IPv6: Packet Too Big with 1500 - 64.
    let big6 = udp6(server_v6(), ue_v6(0), 80, 1480 - 48);
    let (out, d) = rig.one(dl_frame(&big6), 1, 1);
    assert_eq!(d.action(), Action::Tx(1));
    let ip = ipv6::Packet::new_checked(&out[14..]).unwrap();
    assert_eq!((ip.src_addr(), ip.dst_addr()), (n6_v6(), server_v6()));
    assert_eq!(ip.next_header(), ip_protocol::IPV6_ICMP);
    assert_eq!(ip.total_len(), 1280.min(40 + 8 + big6.len()));
    let icmp = icmpv6::Packet::new_checked(&out[54..]).unwrap();
    assert!(icmp.verify_checksum(n6_v6(), server_v6()));
    assert_eq!((icmp.msg_type(), icmp.msg_code()), (2, 0));
    assert_eq!(icmp.mtu(), 1500 - 64);
    assert_eq!(icmp.data(), &big6[..1232]);
    assert_eq!(rig.stats.totals().icmp_errors_sent, 2);
}

fn mbr(pir: u64, pbs: u64) -> TrTcmConfig {
    TrTcmConfig {
        cir: 0,
        cbs: 0,
        pir,
        pbs,
        mode: ColourMode::Blind,
    }
}

#[test]
fn mbr_enforced_within_five_percent() {
    // MBR 1 Mbit/s = 125 000 B/s; offered 250 000 B/s of 1000-byte packets for 2 s.
    let rate = 125_000u64;
    let mut p = dl(DL_TEID, IpAddr::V4(gnb_v4()));
    p.qers = vec![qer(Some(9), true, Some((mbr(rate, 3_200), 3, 1)))];
    let mut tb = TableBuilder::default();
    tb.add(Key::Ue4(ue_v4(0)), &[p]);
    let mut rig = Rig::new(tb.build(), cfg());
    let frame = dl_frame(&udp4(server_v4(), ue_v4(0), 80, 1000 - 28));
    let mut per_second = [0u64; 2];
    let (mut green, mut yellow, mut red) = (0, 0, 0);
    for i in 0..500u64 {
        let t = i * 4_000_000;
        let (_, d) = rig.one(frame.clone(), 1, t);
        match d.action() {
            Action::Tx(0) => per_second[(t / 1_000_000_000) as usize] += 1000,
            _ => assert_eq!(rig.reason(d), "mbr_exceeded"),
        }
    }
    let q = rig.stats.qfi(Direction::Downlink, 9);
    green += q.green;
    yellow += q.yellow;
    red += q.red;
    let lo = rate * 95 / 100;
    let hi = rate * 105 / 100;
    assert!(
        (lo..=hi).contains(&per_second[1]),
        "second 2 delivered {} B, MBR {rate}",
        per_second[1]
    );
    let total = per_second[0] + per_second[1];
    assert!(total <= 2 * rate + 3_200 && total >= 2 * lo, "{total}");
    // CIR 0: everything passed is yellow.
    assert_eq!((green, yellow + red), (0, 500));
    assert_eq!(yellow * 1000, total);
    assert_eq!(q.pkts, yellow);
}

#[test]
fn new_meter_generation_recreates_the_meter() {
    let cfg_m = mbr(1_000, 1_500);
    let mk = |generation| {
        let mut p = dl(DL_TEID, IpAddr::V4(gnb_v4()));
        p.qers = vec![qer(Some(9), true, Some((cfg_m, 0, generation)))];
        let mut tb = TableBuilder::default();
        tb.add(Key::Ue4(ue_v4(0)), &[p]);
        tb.build()
    };
    let mut rig = Rig::new(mk(1), cfg());
    let f = dl_frame(&udp4(server_v4(), ue_v4(0), 80, 1000 - 28));
    let out = rig.run(&[f.clone(), f.clone()], 1, 10);
    assert_eq!(out[0].1.action(), Action::Tx(0));
    assert_eq!(rig.reason(out[1].1), "mbr_exceeded");
    // Same generation republished: state kept, still red.
    rig.tables.publish(mk(1));
    assert_eq!(rig.why(f.clone(), 1, 20), "mbr_exceeded");
    // New generation in the same slot: a fresh, full meter.
    rig.tables.publish(mk(2));
    assert_eq!(rig.one(f.clone(), 1, 30).1.action(), Action::Tx(0));
    assert_eq!(rig.why(f, 1, 40), "mbr_exceeded");
}

#[test]
fn urr_and_qfi_counters_exact() {
    let mut u = ul(Some(9));
    u.urrs = vec![4, 5];
    let mut d = dl(DL_TEID, IpAddr::V4(gnb_v4()));
    d.qfi = Some(9);
    d.urrs = vec![4];
    let mut over = ul(Some(1));
    over.urrs = vec![1000];
    let mut tb = TableBuilder::default();
    tb.add(Key::Teid(TEID), &[u, over]);
    tb.add(Key::Ue4(ue_v4(0)), &[d]);
    let mut rig = Rig::new(tb.build(), cfg());
    let ul_in = [100usize, 200, 300].map(|n| udp4(ue_v4(0), server_v4(), 53, n));
    for (i, p) in ul_in.iter().enumerate() {
        let (_, d) = rig.one(ul_frame(i % 2 == 0, TEID, Some(9), p), 0, 1_000 + i as u64);
        assert_eq!(d.action(), Action::Tx(1));
    }
    let dl_in = [50usize, 60].map(|n| udp4(server_v4(), ue_v4(0), 53, n));
    for (i, p) in dl_in.iter().enumerate() {
        let (_, d) = rig.one(dl_frame(p), 1, 5_000 + i as u64);
        assert_eq!(d.action(), Action::Tx(0));
    }
    let ulb: u64 = ul_in.iter().map(|p| p.len() as u64).sum();
    let dlb: u64 = dl_in.iter().map(|p| p.len() as u64).sum();
    let s4 = rig.stats.urr(4);
    assert_eq!(
        (s4.ul_pkts, s4.ul_bytes, s4.dl_pkts, s4.dl_bytes),
        (3, ulb, 2, dlb)
    );
    assert_eq!((s4.first_pkt_ns, s4.last_pkt_ns), (1_000, 5_001));
    let s5 = rig.stats.urr(5);
    assert_eq!((s5.ul_pkts, s5.ul_bytes, s5.dl_pkts), (3, ulb, 0));
    let q = rig.stats.qfi(Direction::Uplink, 9);
    assert_eq!((q.pkts, q.bytes, q.drops), (3, ulb, 0));
    let q = rig.stats.qfi(Direction::Downlink, 9);
    assert_eq!((q.pkts, q.bytes), (2, dlb));
    // A URR slot beyond the stats capacity is not counted, and counted as such.
    let (_, d) = rig.one(ul_frame(false, TEID, Some(1), &ul_in[0]), 0, 9);
    assert_eq!(d.action(), Action::Tx(1));
    assert_eq!(rig.stats.totals().urr_slots_exceeded, 1);
}

mod paths;
