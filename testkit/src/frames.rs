//! Frames for tests, built with the wire crate's Reprs (checksums filled): user IP packets
//! (UDP, TCP, ICMP echo), Ethernet around them, IP/UDP datagrams, and GTP-U G-PDUs with a
//! PDU Session Container (TS 29.281 section 5.2, TS 38.415 section 5.5.2).

use peregrine_wire::ethernet::{self, ethertype, Address as Mac};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{gtpu, ipv4, ipv6, pdu_session, udp};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Source MAC of [`udp_frame`] frames.
pub const SRC_MAC: Mac = Mac([2, 0, 0, 0, 0, 1]);
/// Destination MAC of [`udp_frame`] frames.
pub const DST_MAC: Mac = Mac([2, 0, 0, 0, 0, 2]);

/// A user IP packet: UDP (valid checksum), TCP (20-byte header) or ICMP echo, `payload`
/// bytes after the L4 header.
pub fn ip_packet(
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    ports: (u16, u16),
    payload: usize,
    ttl: u8,
) -> Vec<u8> {
    let l4h = match proto {
        ip_protocol::UDP | ip_protocol::ICMP | ip_protocol::IPV6_ICMP => 8,
        ip_protocol::TCP => 20,
        _ => 0,
    };
    let l4len = l4h + payload;
    let (hl, mut v) = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut v = vec![0u8; 20 + l4len];
            ipv4::Repr {
                src: s,
                dst: d,
                protocol: proto,
                payload_len: l4len,
                ttl,
                dscp_ecn: 0,
                ident: 0x1234,
                dont_frag: true,
            }
            .emit(&mut v)
            .unwrap();
            (20, v)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut v = vec![0u8; 40 + l4len];
            ipv6::Repr {
                src: s,
                dst: d,
                next_header: proto,
                payload_len: l4len,
                hop_limit: ttl,
                traffic_class: 0,
                flow_label: 0,
            }
            .emit(&mut v)
            .unwrap();
            (40, v)
        }
        _ => panic!("mixed families"),
    };
    for (i, b) in v[hl + l4h..].iter_mut().enumerate() {
        *b = i as u8;
    }
    match proto {
        ip_protocol::UDP => {
            udp::Repr {
                src_port: ports.0,
                dst_port: ports.1,
                payload_len: payload,
            }
            .emit(&mut v[hl..])
            .unwrap();
            udp::Packet::new_unchecked(&mut v[hl..])
                .fill_checksum(src, dst)
                .unwrap();
        }
        ip_protocol::TCP => {
            v[hl..hl + 2].copy_from_slice(&ports.0.to_be_bytes());
            v[hl + 2..hl + 4].copy_from_slice(&ports.1.to_be_bytes());
            v[hl + 12] = 5 << 4;
        }
        ip_protocol::ICMP => v[hl] = 8,
        ip_protocol::IPV6_ICMP => v[hl] = 128,
        _ => {}
    }
    v
}

/// A TCP segment with no payload: [`ip_packet`]'s 20-byte TCP header with `seq`, `ack`, a
/// data offset of 5 words and `flags` (RFC 9293 section 3.1; checksum left zero, as
/// [`ip_packet`] leaves it).
pub fn tcp_segment(
    src: IpAddr,
    dst: IpAddr,
    ports: (u16, u16),
    seq: u32,
    ack: u32,
    flags: u8,
) -> Vec<u8> {
    let mut ip = ip_packet(src, dst, ip_protocol::TCP, ports, 0, 64);
    let hl = if src.is_ipv4() { 20 } else { 40 };
    ip[hl + 4..hl + 8].copy_from_slice(&seq.to_be_bytes());
    ip[hl + 8..hl + 12].copy_from_slice(&ack.to_be_bytes());
    ip[hl + 12] = 5 << 4;
    ip[hl + 13] = flags;
    ip
}

pub fn udp4(src: Ipv4Addr, dst: Ipv4Addr, dport: u16, payload: usize) -> Vec<u8> {
    ip_packet(
        IpAddr::V4(src),
        IpAddr::V4(dst),
        ip_protocol::UDP,
        (40000, dport),
        payload,
        64,
    )
}
pub fn udp6(src: Ipv6Addr, dst: Ipv6Addr, dport: u16, payload: usize) -> Vec<u8> {
    ip_packet(
        IpAddr::V6(src),
        IpAddr::V6(dst),
        ip_protocol::UDP,
        (40000, dport),
        payload,
        64,
    )
}

/// Ethernet frame around an IP packet.
pub fn eth(dst: Mac, src: Mac, ip: &[u8]) -> Vec<u8> {
    let et = if ip[0] >> 4 == 6 {
        ethertype::IPV6
    } else {
        ethertype::IPV4
    };
    let mut f = vec![0u8; 14];
    ethernet::Repr {
        src,
        dst,
        ethertype: et,
    }
    .emit(&mut f)
    .unwrap();
    f.extend_from_slice(ip);
    f
}

/// A G-PDU with a UL PDU Session Container (if `qfi`) around `inner`.
pub fn gpdu(teid: u32, qfi: Option<u8>, inner: &[u8]) -> Vec<u8> {
    let r = gtpu::Repr {
        msg_type: gtpu::msg_type::G_PDU,
        teid,
        seq: None,
        npdu: None,
        ext: qfi.map(|q| pdu_session::Repr::Ul { qfi: q }),
        payload_len: inner.len(),
    };
    let mut v = vec![0u8; r.buffer_len()];
    r.emit(&mut v).unwrap();
    let hl = r.header_len();
    v[hl..].copy_from_slice(inner);
    v
}

/// An IP/UDP datagram (hop limit / TTL 64, valid UDP checksum) carrying `body`.
pub fn ip_udp(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, body: &[u8]) -> Vec<u8> {
    let mut ip = ip_packet(src, dst, ip_protocol::UDP, (sport, dport), body.len(), 64);
    let hl = if src.is_ipv4() {
        ipv4::HEADER_LEN
    } else {
        ipv6::HEADER_LEN
    };
    ip[hl + udp::HEADER_LEN..].copy_from_slice(body);
    udp::Packet::new_unchecked(&mut ip[hl..])
        .fill_checksum(src, dst)
        .unwrap();
    ip
}

/// IPv6 / UDP `sport` -> `dport` carrying `payload`, valid UDP checksum (RFC 8200 section
/// 8.1).
pub fn ipv6_udp(src: Ipv6Addr, dst: Ipv6Addr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    ip_udp(IpAddr::V6(src), IpAddr::V6(dst), sport, dport, payload)
}

/// Ethernet ([`SRC_MAC`] -> [`DST_MAC`]) / IP / UDP carrying `body`.
pub fn udp_frame(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, body: &[u8]) -> Vec<u8> {
    eth(DST_MAC, SRC_MAC, &ip_udp(src, dst, sport, dport, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use peregrine_wire::checksum;

    #[test]
    fn udp_frames_parse_with_valid_checksums() {
        for (s, d) in [
            (
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            ),
            (
                IpAddr::V6("2001:db8::1".parse().unwrap()),
                IpAddr::V6("2001:db8::2".parse().unwrap()),
            ),
        ] {
            let f = udp_frame(s, d, 1000, 2000, b"hello");
            let ip = &f[ethernet::HEADER_LEN..];
            let (hl, l4) = match s {
                IpAddr::V4(_) => {
                    assert_eq!(checksum::checksum(&ip[..20]), 0);
                    (20, ipv4::Packet::new_checked(ip).unwrap().payload().len())
                }
                IpAddr::V6(_) => (40, ipv6::Packet::new_checked(ip).unwrap().payload().len()),
            };
            assert_eq!(l4, 8 + 5);
            let u = udp::Packet::new_checked(&ip[hl..]).unwrap();
            assert!(u.verify_checksum(s, d));
            assert_eq!(
                (u.src_port(), u.dst_port(), u.payload()),
                (1000, 2000, &b"hello"[..])
            );
        }
    }

    #[test]
    fn gpdu_carries_the_qfi() {
        let inner = udp4(
            Ipv4Addr::new(10, 45, 0, 1),
            Ipv4Addr::new(198, 51, 100, 1),
            53,
            10,
        );
        let g = gpdu(7, Some(9), &inner);
        let p = gtpu::Repr::parse(&gtpu::Header::new_checked(&g[..]).unwrap()).unwrap();
        assert_eq!((p.teid, p.ext), (7, Some(pdu_session::Repr::Ul { qfi: 9 })));
        assert_eq!(&g[p.header_len()..], &inner[..]);
    }
}
