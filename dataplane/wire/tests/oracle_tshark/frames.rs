//! Frame building for the tshark oracle, with our emitters (`Repr::emit`) and checksum fills only.

use peregrine_wire::ethernet::{self, ethertype, Address};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{gtpu, gtpu_msg, ipv4, ipv6, pdu_session, tcp, udp};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub(crate) const MAC_A: Address = Address([0x02, 0x00, 0x5e, 0x10, 0x00, 0x0a]);
pub(crate) const MAC_B: Address = Address([0x02, 0x00, 0x5e, 0x10, 0x00, 0x0b]);

/// Outer IP header parameters.
#[derive(Clone)]
pub(crate) enum Ip {
    V4 {
        src: Ipv4Addr,
        dst: Ipv4Addr,
        ttl: u8,
        tos: u8,
        ident: u16,
        df: bool,
    },
    V6 {
        src: Ipv6Addr,
        dst: Ipv6Addr,
        hop_limit: u8,
        tc: u8,
        flow: u32,
        /// Extension headers, already emitted, and the Next Header of the fixed header.
        ext: Option<(u8, Vec<u8>)>,
    },
}

impl Ip {
    pub(crate) fn v4(src: [u8; 4], dst: [u8; 4], ttl: u8) -> Ip {
        Ip::V4 {
            src: src.into(),
            dst: dst.into(),
            ttl,
            tos: 0,
            ident: 0x0100,
            df: false,
        }
    }

    pub(crate) fn v6(src: &str, dst: &str, hop_limit: u8) -> Ip {
        Ip::V6 {
            src: src.parse().expect("addr"),
            dst: dst.parse().expect("addr"),
            hop_limit,
            tc: 0,
            flow: 0,
            ext: None,
        }
    }

    pub(crate) fn src(&self) -> IpAddr {
        match self {
            Ip::V4 { src, .. } => IpAddr::V4(*src),
            Ip::V6 { src, .. } => IpAddr::V6(*src),
        }
    }

    pub(crate) fn dst(&self) -> IpAddr {
        match self {
            Ip::V4 { dst, .. } => IpAddr::V4(*dst),
            Ip::V6 { dst, .. } => IpAddr::V6(*dst),
        }
    }

    pub(crate) fn src6(&self) -> Ipv6Addr {
        match self {
            Ip::V6 { src, .. } => *src,
            Ip::V4 { .. } => unreachable!("IPv6 only"),
        }
    }

    pub(crate) fn dst6(&self) -> Ipv6Addr {
        match self {
            Ip::V6 { dst, .. } => *dst,
            Ip::V4 { .. } => unreachable!("IPv6 only"),
        }
    }

    pub(crate) fn ethertype(&self) -> u16 {
        match self {
            Ip::V4 { .. } => ethertype::IPV4,
            Ip::V6 { .. } => ethertype::IPV6,
        }
    }

    /// The IP packet carrying `l4` (protocol `proto`).
    pub(crate) fn packet(&self, proto: u8, l4: &[u8]) -> Vec<u8> {
        match self {
            Ip::V4 {
                src,
                dst,
                ttl,
                tos,
                ident,
                df,
            } => {
                let r = ipv4::Repr {
                    src: *src,
                    dst: *dst,
                    protocol: proto,
                    payload_len: l4.len(),
                    ttl: *ttl,
                    dscp_ecn: *tos,
                    ident: *ident,
                    dont_frag: *df,
                };
                let mut b = vec![0u8; r.buffer_len()];
                r.emit(&mut b).expect("ipv4 emit");
                b[r.header_len()..].copy_from_slice(l4);
                b
            }
            Ip::V6 {
                src,
                dst,
                hop_limit,
                tc,
                flow,
                ext,
            } => {
                let (first, ext) = match ext {
                    Some((first, bytes)) => (*first, bytes.as_slice()),
                    None => (proto, &[][..]),
                };
                let r = ipv6::Repr {
                    src: *src,
                    dst: *dst,
                    next_header: first,
                    payload_len: ext.len() + l4.len(),
                    hop_limit: *hop_limit,
                    traffic_class: *tc,
                    flow_label: *flow,
                };
                let mut b = vec![0u8; r.buffer_len()];
                r.emit(&mut b).expect("ipv6 emit");
                b[ipv6::HEADER_LEN..][..ext.len()].copy_from_slice(ext);
                b[ipv6::HEADER_LEN + ext.len()..].copy_from_slice(l4);
                b
            }
        }
    }
}

pub(crate) fn udp_datagram(ip: &Ip, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let r = udp::Repr {
        src_port: sport,
        dst_port: dport,
        payload_len: payload.len(),
    };
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut b).expect("udp emit");
    b[udp::HEADER_LEN..].copy_from_slice(payload);
    udp::Packet::new_checked(&mut b[..])
        .expect("udp checks")
        .fill_checksum(ip.src(), ip.dst())
        .expect("same family");
    b
}

pub(crate) fn tcp_segment(ip: &Ip, r: tcp::Repr, payload: &[u8]) -> Vec<u8> {
    let r = tcp::Repr {
        payload_len: payload.len(),
        ..r
    };
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut b).expect("tcp emit");
    b[tcp::HEADER_LEN..].copy_from_slice(payload);
    tcp::Packet::new_checked(&mut b[..])
        .expect("tcp checks")
        .fill_checksum(ip.src(), ip.dst())
        .expect("same family");
    b
}

pub(crate) fn ethernet(dst: Address, ty: u16, payload: &[u8]) -> Vec<u8> {
    let r = ethernet::Repr {
        src: MAC_A,
        dst,
        ethertype: ty,
    };
    let mut b = vec![0u8; ethernet::HEADER_LEN + payload.len()];
    r.emit(&mut b).expect("ethernet emit");
    b[ethernet::HEADER_LEN..].copy_from_slice(payload);
    b
}

pub(crate) fn ip_frame(ip: &Ip, proto: u8, l4: &[u8]) -> Vec<u8> {
    ethernet(MAC_B, ip.ethertype(), &ip.packet(proto, l4))
}

/// Ethernet / `outer` / UDP 2152 / `gtp`.
pub(crate) fn gtp_frame(outer: &Ip, gtp: &[u8]) -> Vec<u8> {
    ip_frame(
        outer,
        ip_protocol::UDP,
        &udp_datagram(outer, gtpu::PORT, gtpu::PORT, gtp),
    )
}

/// A G-PDU: our GTP-U header with a PDU Session Container, then `inner`.
pub(crate) fn gpdu(teid: u32, psc: pdu_session::Repr, inner: &[u8]) -> Vec<u8> {
    let r = gtpu::Repr {
        msg_type: gtpu::msg_type::G_PDU,
        teid,
        seq: None,
        npdu: None,
        ext: Some(psc),
        payload_len: inner.len(),
    };
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut b).expect("gtpu emit");
    b[r.header_len()..].copy_from_slice(inner);
    b
}

pub(crate) fn gtp_msg(m: gtpu_msg::Repr) -> Vec<u8> {
    let mut b = vec![0u8; m.buffer_len()];
    m.emit(&mut b).expect("gtpu_msg emit");
    b
}

/// Inner packets carried in G-PDUs: UDP over IPv4, TCP over IPv6.
pub(crate) fn inner_v4() -> Vec<u8> {
    let ip = Ip::V4 {
        src: Ipv4Addr::new(10, 45, 0, 7),
        dst: Ipv4Addr::new(198, 51, 100, 20),
        ttl: 64,
        tos: 0,
        ident: 7,
        df: false,
    };
    ip.packet(
        ip_protocol::UDP,
        &udp_datagram(&ip, 41000, 42000, b"inner udp"),
    )
}

/// `sport` differs per frame so that tshark's TCP analysis sees separate streams.
pub(crate) fn inner_v6(sport: u16) -> Vec<u8> {
    let ip = Ip::V6 {
        src: "2001:db8:45::7".parse().expect("addr"),
        dst: "2001:db8:ffff::20".parse().expect("addr"),
        hop_limit: 64,
        tc: 0x20,
        flow: 0x54321,
        ext: None,
    };
    let t = tcp::Repr {
        src_port: sport,
        dst_port: 44321,
        seq_number: 1000,
        ack_number: 2000,
        flags: tcp::Flags::ACK,
        window_len: 512,
        urgent_ptr: 0,
        payload_len: 0,
    };
    ip.packet(ip_protocol::TCP, &tcp_segment(&ip, t, b"inner tcp over v6"))
}

pub(crate) fn outer_v4() -> Ip {
    Ip::V4 {
        src: Ipv4Addr::new(192, 0, 2, 10),
        dst: Ipv4Addr::new(192, 0, 2, 1),
        ttl: 61,
        tos: 0x48,
        ident: 0x4242,
        df: true,
    }
}

pub(crate) fn outer_v6() -> Ip {
    Ip::V6 {
        src: "2001:db8:1::10".parse().expect("addr"),
        dst: "2001:db8:1::1".parse().expect("addr"),
        hop_limit: 61,
        tc: 0x48,
        flow: 0x2a2a,
        ext: None,
    }
}
