//! A full-stack walk over one Ethernet frame, reading it the way the dataplane does:
//! Ethernet -> VLAN tags -> IPv4 / IPv6 (+ extension chain) -> UDP / TCP / ICMP -> GTP-U
//! (+ extension chain, PDU Session Container) -> inner IPv4 / IPv6 -> L4.
//!
//! Shared by the `packet` fuzz target and `tests/no_panic.rs`; it only uses the public API
//! of the crate. Every view is built with `new_checked`
//! and every accessor the dataplane uses is read; a few cross-view invariants are asserted.
//! It must never panic on any input.

use crate::ethernet::{self, ethertype};
use crate::ipv4::ip_protocol;
use crate::{
    arp, gtpu, gtpu_msg, icmpv4, icmpv6, ipv4, ipv6, ipv6ext, pdu_session, tcp, udp, vlan,
};
use core::net::IpAddr;

/// How many IP layers deep we follow tunnels (outer IP, GTP-U inner IP, IP-in-IP once more).
const MAX_DEPTH: usize = 3;

/// Walk one Ethernet frame.
pub fn frame(data: &[u8]) {
    let Ok(eth) = ethernet::Frame::new_checked(data) else {
        return;
    };
    let _ = (eth.dst_addr().is_multicast(), eth.src_addr());
    // Read the tags one by one, then check that `l3_offset` agrees with us.
    let mut ty = eth.ethertype();
    let mut rest = eth.payload();
    let mut tags = 0;
    while vlan::is_tpid(ty) && tags <= vlan::MAX_TAGS {
        let Ok(tag) = vlan::Tag::new_checked(rest) else {
            break;
        };
        let _ = (tag.pcp(), tag.dei(), tag.vid(), vlan::Repr::parse(&tag));
        ty = tag.ethertype();
        rest = rest.get(vlan::HEADER_LEN..).unwrap_or_default();
        tags += 1;
    }
    let Ok((off, l3_type)) = vlan::l3_offset(data) else {
        return;
    };
    assert_eq!((off, l3_type), (data.len() - rest.len(), ty));
    match l3_type {
        ethertype::IPV4 => ip(&data[off..], 0),
        ethertype::IPV6 => ip(&data[off..], 0),
        ethertype::ARP => {
            if let Ok(p) = arp::Packet::new_checked(&data[off..]) {
                if let Ok(r) = arp::Repr::parse(&p) {
                    let _ = r.reply(eth.dst_addr());
                }
            }
        }
        _ => {}
    }
}

/// An IPv4 or IPv6 packet, chosen by its version nibble.
fn ip(data: &[u8], depth: usize) {
    if depth >= MAX_DEPTH {
        return;
    }
    match data.first().map(|b| b >> 4) {
        Some(4) => ipv4_packet(data, depth),
        Some(6) => ipv6_packet(data, depth),
        _ => {}
    }
}

fn ipv4_packet(data: &[u8], depth: usize) {
    let Ok(p) = ipv4::Packet::new_checked(data) else {
        return;
    };
    let _ = (p.verify_checksum(), p.ttl(), p.dscp(), p.options());
    let _ = ipv4::Repr::parse(&p);
    // Only first fragments carry the upper-layer header.
    if p.frag_offset() != 0 {
        return;
    }
    let (src, dst) = (IpAddr::V4(p.src_addr()), IpAddr::V4(p.dst_addr()));
    l4(p.protocol(), src, dst, p.payload(), depth);
}

fn ipv6_packet(data: &[u8], depth: usize) {
    let Ok(p) = ipv6::Packet::new_checked(data) else {
        return;
    };
    let _ = (p.traffic_class(), p.flow_label(), ipv6::Repr::parse(&p));
    let payload = p.payload();
    let mut w = ipv6ext::walk(p.next_header(), payload);
    for h in &mut w {
        let Ok(h) = h else { return };
        ext_header(h.header_type, &payload[h.range()]);
    }
    let Some((upper, off)) = w.upper() else {
        return;
    };
    let chain = ipv6ext::parse_chain(p.next_header(), payload).expect("walk ended cleanly");
    assert_eq!((chain.upper, chain.upper_offset), (upper, off));
    if w.later_fragment() {
        return;
    }
    let (src, dst) = (IpAddr::V6(p.src_addr()), IpAddr::V6(p.dst_addr()));
    l4(upper, src, dst, &payload[off..], depth);
}

/// One IPv6 extension header, as found by the chain walk.
fn ext_header(ty: u8, data: &[u8]) {
    match ty {
        ip_protocol::HOPOPT | ip_protocol::IPV6_OPTS => {
            let h = ipv6ext::OptionsHeader::new_checked(data).expect("walked header checks");
            for o in h.iter_options().flatten() {
                let _ = (o.action(), o.may_change(), o.data());
            }
            let _ = ipv6ext::OptionsRepr::parse(&h);
        }
        ip_protocol::IPV6_ROUTE => {
            let h = ipv6ext::RoutingHeader::new_checked(data).expect("walked header checks");
            let _ = (h.routing_type(), h.segments_left(), h.data().len());
            let _ = ipv6ext::RoutingRepr::parse(&h);
        }
        ip_protocol::IPV6_FRAG => {
            let h = ipv6ext::FragmentHeader::new_checked(data).expect("walked header checks");
            let r = ipv6ext::FragmentRepr::parse(&h).expect("checked header parses");
            let _ = r.is_atomic();
        }
        _ => {}
    }
}

fn l4(proto: u8, src: IpAddr, dst: IpAddr, data: &[u8], depth: usize) {
    match (proto, src, dst) {
        (ip_protocol::UDP, _, _) => {
            let Ok(u) = udp::Packet::new_checked(data) else {
                return;
            };
            let _ = (u.verify_checksum(src, dst), udp::Repr::parse(&u));
            if u.dst_port() == gtpu::PORT || u.src_port() == gtpu::PORT {
                gtp(u.payload(), depth);
            }
        }
        (ip_protocol::TCP, _, _) => {
            let Ok(t) = tcp::Packet::new_checked(data) else {
                return;
            };
            let _ = (t.verify_checksum(src, dst), t.flags(), t.options().len());
            let r = tcp::Repr::parse(&t).expect("checked segment parses");
            assert_eq!(r.payload_len, t.payload().len());
        }
        (ip_protocol::ICMP, IpAddr::V4(_), _) => {
            if let Ok(m) = icmpv4::Packet::new_checked(data) {
                if let Ok(r) = icmpv4::Repr::parse(&m) {
                    let _ = r.echo_reply();
                }
            }
        }
        (ip_protocol::IPV6_ICMP, IpAddr::V6(s), IpAddr::V6(d)) => {
            if let Ok(m) = icmpv6::Packet::new_checked(data) {
                if let Ok(r) = icmpv6::Repr::parse(s, d, &m) {
                    let _ = (r.echo_reply(), r.is_error());
                }
            }
        }
        (ip_protocol::IPV4 | ip_protocol::IPV6, _, _) => ip(data, depth + 1),
        _ => {}
    }
}

/// A GTP-U message: G-PDU to the inner packet, anything else to the signalling parser.
fn gtp(data: &[u8], depth: usize) {
    let Ok(h) = gtpu::Header::new_checked(data) else {
        return;
    };
    let _ = (h.teid(), h.seq_number(), h.npdu_number(), h.next_ext_type());
    for (ty, content) in h.extensions() {
        let _ = gtpu::ext_type::endpoint_must_comprehend(ty);
        if ty == gtpu::ext_type::PDU_SESSION_CONTAINER {
            if let Ok(c) = pdu_session::Packet::new_checked(content) {
                let _ = (c.qfi(), c.ppi(), c.dl_sending_timestamp(), c.dl_qfi_seq());
                let _ = pdu_session::Repr::parse(&c);
            }
        }
    }
    assert_eq!(h.header_len() + h.payload().len(), h.total_len());
    if h.msg_type() != gtpu::msg_type::G_PDU {
        let _ = gtpu_msg::Repr::parse(&h);
        return;
    }
    let Ok(r) = gtpu::Repr::parse(&h) else {
        return;
    };
    // Re-encapsulating with the parsed header gives the same header fields back.
    let mut out = [0u8; 32];
    if r.emit(&mut out).is_ok() {
        let q = gtpu::Header::new_unchecked(&out[..]);
        assert_eq!(
            (q.teid(), q.msg_type(), q.total_len()),
            (r.teid, r.msg_type, r.buffer_len())
        );
        assert_eq!(q.pdu_session(), Ok(r.ext));
    }
    ip(h.payload(), depth + 1);
}
