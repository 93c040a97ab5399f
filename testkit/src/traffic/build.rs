//! Flows and frame building: the header stacks of generated frames, written with the wire
//! crate's Reprs, every checksum filled.

use super::*;
use peregrine_wire::ethernet::ethertype;
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{arp, gtpu, gtpu_msg, ipv4, ipv6, pdu_session, tcp, udp};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum L4 {
    Udp,
    Tcp,
}

impl L4 {
    const fn header_len(self) -> usize {
        match self {
            L4::Udp => udp::HEADER_LEN,
            L4::Tcp => tcp::HEADER_LEN,
        }
    }

    const fn protocol(self) -> u8 {
        match self {
            L4::Udp => ip_protocol::UDP,
            L4::Tcp => ip_protocol::TCP,
        }
    }
}

/// Server ports and their transport: web over TCP and QUIC, RTP media, SIP, STUN, a game
/// server. (Ports whose payload Wireshark would dissect, such as DNS, are avoided: the
/// payload is a pattern, not a valid message.)
pub(super) const SERVICES: [(u16, L4); 8] = [
    (443, L4::Tcp),
    (443, L4::Udp),
    (80, L4::Tcp),
    (5004, L4::Udp),
    (5060, L4::Udp),
    (8080, L4::Tcp),
    (3478, L4::Udp),
    (27015, L4::Udp),
];

/// One transport flow of a UE.
#[derive(Debug, Clone, Copy)]
pub(super) struct Flow {
    pub(super) v6: bool,
    pub(super) l4: L4,
    pub(super) ue_port: u16,
    pub(super) server_port: u16,
    pub(super) server: u32,
    pub(super) qfi: u8,
    pub(super) flow_label: u32,
    pub(super) isn: u32,
}

/// An IP packet to write: addresses, TTL and transport.
#[derive(Debug, Clone, Copy)]
pub(super) struct IpSpec {
    pub(super) src: IpAddr,
    pub(super) dst: IpAddr,
    pub(super) ttl: u8,
    pub(super) l4: L4,
    pub(super) src_port: u16,
    pub(super) dst_port: u16,
    pub(super) ident: u16,
    pub(super) flow_label: u32,
    pub(super) seq: u32,
    pub(super) ack: u32,
    /// Written at the start of the payload when there is room.
    pub(super) tag: u64,
}

pub(super) const fn ip_header_len(a: IpAddr) -> usize {
    match a {
        IpAddr::V4(_) => ipv4::HEADER_LEN,
        IpAddr::V6(_) => ipv6::HEADER_LEN,
    }
}

pub(super) const fn ethertype_of(a: IpAddr) -> u16 {
    match a {
        IpAddr::V4(_) => ethertype::IPV4,
        IpAddr::V6(_) => ethertype::IPV6,
    }
}

/// GTP-U header length of a G-PDU with a UL PDU Session Container: 8 + 4 + 4.
pub(super) const GTPU_UL_HEADER_LEN: usize = gtpu::OPT_HEADER_LEN + 4;

/// A zeroed frame of `len` bytes with its Ethernet header.
pub(super) fn new_frame(len: usize, dst: MacAddr, src: MacAddr, ethertype: u16) -> Vec<u8> {
    let mut f = vec![0u8; len];
    ethernet::Repr {
        src,
        dst,
        ethertype,
    }
    .emit(&mut f)
    .expect("frames are longer than the Ethernet header");
    f
}

/// Write an IP header (no options, checksum filled) in front of the payload already in
/// `pkt[header..]`; `pkt` is exactly the IP packet.
pub(super) fn write_ip_header(
    pkt: &mut [u8],
    src: IpAddr,
    dst: IpAddr,
    protocol: u8,
    ttl: u8,
    ident: u16,
    flow_label: u32,
) {
    let payload_len = pkt.len() - ip_header_len(src);
    let r = match (src, dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => ipv4::Repr {
            src,
            dst,
            protocol,
            payload_len,
            ttl,
            dscp_ecn: 0,
            ident,
            dont_frag: true,
        }
        .emit(pkt),
        (IpAddr::V6(src), IpAddr::V6(dst)) => ipv6::Repr {
            src,
            dst,
            next_header: protocol,
            payload_len,
            hop_limit: ttl,
            traffic_class: 0,
            flow_label: flow_label & ipv6::FLOW_LABEL_MAX,
        }
        .emit(pkt),
        _ => panic!("address families differ: {src} -> {dst}"),
    };
    r.expect("IP header fits and lengths are in range");
}

/// Payload: the tag (big-endian) if it fits, then a counting pattern.
pub(super) fn fill_payload(p: &mut [u8], tag: u64) {
    let t = tag.to_be_bytes();
    let n = if p.len() >= t.len() { t.len() } else { 0 };
    p[..n].copy_from_slice(&t[..n]);
    for (i, b) in p[n..].iter_mut().enumerate() {
        *b = i as u8;
    }
}

/// Write a whole IP packet (header, transport header, payload, all checksums) filling
/// `pkt`.
pub(super) fn write_ip_packet(pkt: &mut [u8], s: &IpSpec) {
    let hl = ip_header_len(s.src);
    let seg = &mut pkt[hl..];
    let l4_hl = s.l4.header_len();
    let payload_len = seg.len() - l4_hl;
    match s.l4 {
        L4::Udp => udp::Repr {
            src_port: s.src_port,
            dst_port: s.dst_port,
            payload_len,
        }
        .emit(seg),
        L4::Tcp => tcp::Repr {
            src_port: s.src_port,
            dst_port: s.dst_port,
            seq_number: s.seq,
            ack_number: s.ack,
            flags: tcp::Flags::ACK | tcp::Flags::PSH,
            window_len: 65535,
            urgent_ptr: 0,
            payload_len,
        }
        .emit(seg),
    }
    .expect("transport header fits");
    fill_payload(&mut seg[l4_hl..], s.tag);
    let filled = match s.l4 {
        L4::Udp => udp::Packet::new_unchecked(&mut *seg).fill_checksum(s.src, s.dst),
        L4::Tcp => tcp::Packet::new_unchecked(&mut *seg).fill_checksum(s.src, s.dst),
    };
    filled.expect("same address family");
    write_ip_header(
        pkt,
        s.src,
        s.dst,
        s.l4.protocol(),
        s.ttl,
        s.ident,
        s.flow_label,
    );
}

/// Write UDP and IP headers in front of a UDP payload already in place at
/// `pkt[ip header + 8..]`; `pkt` is exactly the IP packet. The UDP checksum is filled.
pub(super) fn write_ip_udp(
    pkt: &mut [u8],
    src: IpAddr,
    dst: IpAddr,
    ttl: u8,
    port: u16,
    ident: u16,
    flow_label: u32,
) {
    let hl = ip_header_len(src);
    let seg = &mut pkt[hl..];
    udp::Repr {
        src_port: port,
        dst_port: port,
        payload_len: seg.len() - udp::HEADER_LEN,
    }
    .emit(seg)
    .expect("UDP header fits");
    udp::Packet::new_unchecked(&mut *seg)
        .fill_checksum(src, dst)
        .expect("same address family");
    write_ip_header(pkt, src, dst, ip_protocol::UDP, ttl, ident, flow_label);
}

/// The pieces of an uplink G-PDU.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tunnel {
    pub(super) outer_src: IpAddr,
    pub(super) outer_dst: IpAddr,
    pub(super) teid: u32,
    pub(super) qfi: u8,
}

/// An uplink G-PDU frame of `len` bytes (clamped to its header stack and 60).
pub(super) fn build_ul(len: usize, a: &Addressing, t: &Tunnel, inner: &IpSpec) -> Vec<u8> {
    let ohl = ip_header_len(t.outer_src);
    let inner_off = ETH_LEN + ohl + udp::HEADER_LEN + GTPU_UL_HEADER_LEN;
    let min = inner_off + ip_header_len(inner.src) + inner.l4.header_len();
    let len = len.max(min).max(MIN_FRAME_LEN);
    let mut f = new_frame(len, a.upf_n3_mac, a.gnb_peer_mac, ethertype_of(t.outer_src));
    write_ip_packet(&mut f[inner_off..], inner);
    let gtp_off = ETH_LEN + ohl + udp::HEADER_LEN;
    gtpu::Repr {
        msg_type: gtpu::msg_type::G_PDU,
        teid: t.teid,
        seq: None,
        npdu: None,
        ext: Some(pdu_session::Repr::Ul { qfi: t.qfi }),
        payload_len: len - inner_off,
    }
    .emit(&mut f[gtp_off..])
    .expect("GTP-U header fits");
    write_ip_udp(
        &mut f[ETH_LEN..],
        t.outer_src,
        t.outer_dst,
        DEFAULT_TTL,
        gtpu::PORT,
        inner.ident,
        inner.flow_label,
    );
    f
}

/// A downlink frame of `len` bytes (clamped to its header stack and 60).
pub(super) fn build_dl(len: usize, a: &Addressing, p: &IpSpec) -> Vec<u8> {
    let min = ETH_LEN + ip_header_len(p.src) + p.l4.header_len();
    let len = len.max(min).max(MIN_FRAME_LEN);
    let mut f = new_frame(len, a.upf_n6_mac, a.n6_router_mac, ethertype_of(p.src));
    write_ip_packet(&mut f[ETH_LEN..], p);
    f
}

/// A GTP-U Echo Request from `src` to the UPF, padded to 60 bytes.
pub(super) fn build_echo(a: &Addressing, src: IpAddr, dst: IpAddr, seq: u16) -> Vec<u8> {
    let msg = gtpu_msg::Repr::EchoRequest { seq };
    let ip_len = ip_header_len(src) + udp::HEADER_LEN + msg.buffer_len();
    let len = (ETH_LEN + ip_len).max(MIN_FRAME_LEN);
    let mut f = new_frame(len, a.upf_n3_mac, a.gnb_peer_mac, ethertype_of(src));
    let pkt = &mut f[ETH_LEN..ETH_LEN + ip_len];
    msg.emit(&mut pkt[ip_header_len(src) + udp::HEADER_LEN..])
        .expect("echo fits");
    write_ip_udp(pkt, src, dst, DEFAULT_TTL, gtpu::PORT, seq, 0);
    f
}

/// A broadcast ARP request from gNB `gnb` for the UPF's N3 IPv4 address.
pub(super) fn build_arp(a: &Addressing, gnb: u32) -> Vec<u8> {
    let mut f = new_frame(
        MIN_FRAME_LEN,
        MacAddr::BROADCAST,
        a.gnb_peer_mac,
        ethertype::ARP,
    );
    arp::Repr {
        operation: arp::Operation::Request,
        sender_hardware_addr: a.gnb_peer_mac,
        sender_protocol_addr: a.gnb_v4(gnb),
        target_hardware_addr: MacAddr([0; 6]),
        target_protocol_addr: a.upf_n3_v4,
    }
    .emit(&mut f[ETH_LEN..])
    .expect("ARP fits");
    f
}
