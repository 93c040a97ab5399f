//! GTP-U End Marker frames for SNDEM (TS 29.244 section 5.2.2.3, TS 29.281 section 7.3.2).
//!
//! When the SMF moves a downlink tunnel with SNDEM set, the N4 node emits
//! `Event::EndMarker` with the old Outer Header Creation; [`EndMarkerBuilder`] turns that
//! into a whole frame: GTP-U type 254 with the old TEID and no IE, UDP 2152 -> 2152, outer
//! IPv4 (TTL 64, UDP checksum 0 as RFC 768 allows) or IPv6 (hop limit 64, UDP checksum
//! computed, RFC 8200 section 8.1) from our N3 address of the peer's family to the old peer,
//! Ethernet to the route table's next hop for the peer, from that port's MAC.

use peregrine_dataplane::io::PortId;
use peregrine_dataplane::stages::l3fwd::RouteTable;
use peregrine_pfcp::ie::OuterHeaderCreation;
use peregrine_wire::ethernet::{self, ethertype, Address as Mac};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{gtpu, gtpu_msg, ipv4, ipv6, udp};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why no End Marker could be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EndMarkerError {
    #[error("the old Outer Header Creation has no TEID")]
    NoTeid,
    #[error("no N3 address of the old peer's family")]
    NoLocalAddress,
    #[error("no route to the old peer {0}")]
    NoRoute(IpAddr),
}

/// Builds End Marker frames from our N3 addresses, the route table and the port MACs.
#[derive(Debug, Clone)]
pub struct EndMarkerBuilder {
    pub n3_v4: Option<Ipv4Addr>,
    pub n3_v6: Option<Ipv6Addr>,
    pub routes: RouteTable,
    /// Our MAC per port.
    pub macs: Vec<Mac>,
}

impl EndMarkerBuilder {
    /// The port to send on and the frame for the tunnel `old` (an IPv4 peer is preferred
    /// when the Outer Header Creation carries both and we have an IPv4 N3 address).
    pub fn frame(&self, old: &OuterHeaderCreation) -> Result<(PortId, Vec<u8>), EndMarkerError> {
        let teid = old.teid.ok_or(EndMarkerError::NoTeid)?;
        let (local, peer) = match (old.ipv4, self.n3_v4, old.ipv6, self.n3_v6) {
            (Some(p), Some(l), _, _) => (IpAddr::V4(l), IpAddr::V4(p)),
            (_, _, Some(p), Some(l)) => (IpAddr::V6(l), IpAddr::V6(p)),
            _ => return Err(EndMarkerError::NoLocalAddress),
        };
        let nh = match peer {
            IpAddr::V4(a) => self.routes.v4.lookup(u32::from(a)),
            IpAddr::V6(a) => self.routes.v6.lookup(u128::from(a)),
        }
        .ok_or(EndMarkerError::NoRoute(peer))?;
        let src_mac = self
            .macs
            .get(usize::from(nh.port))
            .copied()
            .unwrap_or_default();
        Ok((
            nh.port,
            end_marker_frame(teid, local, peer, nh.mac, src_mac),
        ))
    }
}

/// An End Marker (TS 29.281 section 7.3.2) for `teid` from `local` to `peer` in an Ethernet
/// frame; `local` and `peer` must be of one family (else the IPv6 branch is taken with the
/// IPv4 addresses mapped, which callers avoid).
pub fn end_marker_frame(teid: u32, local: IpAddr, peer: IpAddr, dst: Mac, src: Mac) -> Vec<u8> {
    let msg = gtpu_msg::Repr::EndMarker { teid };
    let gtp_len = msg.buffer_len();
    let v6 = matches!((local, peer), (IpAddr::V6(_), _) | (_, IpAddr::V6(_)));
    let ihl = if v6 {
        ipv6::HEADER_LEN
    } else {
        ipv4::HEADER_LEN
    };
    let l4 = ethernet::HEADER_LEN + ihl;
    let mut f = vec![0u8; l4 + udp::HEADER_LEN + gtp_len];
    let _ = ethernet::Repr {
        src,
        dst,
        ethertype: if v6 { ethertype::IPV6 } else { ethertype::IPV4 },
    }
    .emit(&mut f);
    let _ = msg.emit(&mut f[l4 + udp::HEADER_LEN..]);
    let _ = udp::Repr {
        src_port: gtpu::PORT,
        dst_port: gtpu::PORT,
        payload_len: gtp_len,
    }
    .emit(&mut f[l4..]);
    let to6 = |a: IpAddr| match a {
        IpAddr::V6(a) => a,
        IpAddr::V4(a) => a.to_ipv6_mapped(),
    };
    match (local, peer) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let _ = ipv4::Repr {
                src: s,
                dst: d,
                protocol: ip_protocol::UDP,
                payload_len: udp::HEADER_LEN + gtp_len,
                ttl: 64,
                dscp_ecn: 0,
                ident: 0,
                dont_frag: true,
            }
            .emit(&mut f[ethernet::HEADER_LEN..]);
        }
        (s, d) => {
            let (s, d) = (to6(s), to6(d));
            let _ = ipv6::Repr {
                src: s,
                dst: d,
                next_header: ip_protocol::UDP,
                payload_len: udp::HEADER_LEN + gtp_len,
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
            }
            .emit(&mut f[ethernet::HEADER_LEN..]);
            udp::Packet::new_unchecked(&mut f[l4..]).fill_checksum_v6(s, d);
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use peregrine_dataplane::stages::l3fwd::NextHop;
    use peregrine_pfcp::ie::ohc;

    const OURS: Mac = Mac([2, 0, 0, 0, 0, 3]);
    const GNB_MAC: Mac = Mac([2, 0, 0, 0, 3, 1]);

    fn builder() -> EndMarkerBuilder {
        let mut routes = RouteTable::default();
        let nh = NextHop {
            port: 1,
            mac: GNB_MAC,
        };
        routes.insert("192.0.2.0".parse().unwrap(), 24, nh);
        routes.insert("2001:db8:3::".parse().unwrap(), 48, nh);
        EndMarkerBuilder {
            n3_v4: Some("192.0.2.1".parse().unwrap()),
            n3_v6: Some("2001:db8:3::1".parse().unwrap()),
            routes,
            macs: vec![Mac([2, 0, 0, 0, 0, 6]), OURS],
        }
    }

    fn parse(f: &[u8]) -> (IpAddr, IpAddr, u32, u8) {
        let eth = ethernet::Frame::new_checked(f).unwrap();
        assert_eq!((eth.dst_addr(), eth.src_addr()), (GNB_MAC, OURS));
        let (s, d, l4): (IpAddr, IpAddr, usize) = match eth.ethertype() {
            ethertype::IPV4 => {
                let ip = ipv4::Packet::new_checked(eth.payload()).unwrap();
                assert!(ip.verify_checksum());
                assert_eq!(ip.protocol(), ip_protocol::UDP);
                (ip.src_addr().into(), ip.dst_addr().into(), 14 + 20)
            }
            _ => {
                let ip = ipv6::Packet::new_checked(eth.payload()).unwrap();
                assert_eq!(ip.next_header(), ip_protocol::UDP);
                let u = udp::Packet::new_checked(ip.payload()).unwrap();
                assert!(u.verify_checksum_v6(ip.src_addr(), ip.dst_addr()));
                (ip.src_addr().into(), ip.dst_addr().into(), 14 + 40)
            }
        };
        let u = udp::Packet::new_checked(&f[l4..]).unwrap();
        assert_eq!((u.src_port(), u.dst_port()), (2152, 2152));
        let g = gtpu::Header::new_checked(u.payload()).unwrap();
        assert_eq!(
            gtpu_msg::Repr::parse(&g).unwrap(),
            gtpu_msg::Repr::EndMarker { teid: g.teid() }
        );
        (s, d, g.teid(), g.msg_type())
    }

    #[test]
    fn ipv4_and_ipv6_end_markers_parse_back() {
        let b = builder();
        let old = OuterHeaderCreation {
            description: ohc::GTPU_UDP_IPV4,
            teid: Some(0x100),
            ipv4: Some("192.0.2.10".parse().unwrap()),
            ..Default::default()
        };
        let (port, f) = b.frame(&old).unwrap();
        assert_eq!(port, 1);
        assert_eq!(f.len(), 14 + 20 + 8 + 8, "GTP-U header only, no IE");
        assert_eq!(
            parse(&f),
            (
                "192.0.2.1".parse().unwrap(),
                "192.0.2.10".parse().unwrap(),
                0x100,
                254
            )
        );
        let old6 = OuterHeaderCreation {
            description: ohc::GTPU_UDP_IPV6,
            teid: Some(0xdead_beef),
            ipv6: Some("2001:db8:3::10".parse().unwrap()),
            ..Default::default()
        };
        let (_, f) = b.frame(&old6).unwrap();
        assert_eq!(
            parse(&f),
            (
                "2001:db8:3::1".parse().unwrap(),
                "2001:db8:3::10".parse().unwrap(),
                0xdead_beef,
                254
            )
        );
    }

    #[test]
    fn no_teid_no_address_or_no_route_is_an_error() {
        let b = builder();
        let mut old = OuterHeaderCreation {
            description: ohc::GTPU_UDP_IPV4,
            teid: None,
            ipv4: Some("192.0.2.10".parse().unwrap()),
            ..Default::default()
        };
        assert_eq!(b.frame(&old), Err(EndMarkerError::NoTeid));
        old.teid = Some(1);
        old.ipv4 = Some("203.0.113.1".parse().unwrap());
        assert_eq!(
            b.frame(&old),
            Err(EndMarkerError::NoRoute("203.0.113.1".parse().unwrap()))
        );
        let b4 = EndMarkerBuilder {
            n3_v4: None,
            ..builder()
        };
        old.ipv4 = Some("192.0.2.10".parse().unwrap());
        assert_eq!(b4.frame(&old), Err(EndMarkerError::NoLocalAddress));
    }
}
