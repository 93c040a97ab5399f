//! GTP-U frames the control side sends itself: End Markers for SNDEM (TS 29.244 section
//! 5.2.2.3, TS 29.281 section 7.3.2) and Echo Requests for path supervision (TS 29.281
//! section 7.2.1).
//!
//! When the SMF moves a downlink tunnel with SNDEM set, the N4 node emits
//! `Event::EndMarker` with the old Outer Header Creation; when a path is due a probe it emits
//! `Output::Echo`. [`GtpuFrames`] turns either into a whole frame: the GTP-U message (End
//! Marker with the old TEID and no IE; Echo Request with S = 1 and its sequence number), UDP
//! 2152 -> 2152, outer IPv4 (TTL 64, UDP checksum 0 as RFC 768 allows) or IPv6 (hop limit 64,
//! UDP checksum computed, RFC 8200 section 8.1) from our N3 address of the peer's family to
//! the peer, Ethernet to the route table's next hop for the peer, from that port's MAC. The
//! route table is the daemon's current one (as republished on SIGHUP and when a next hop is
//! resolved by ARP / ND, `crate::nexthop`), read when the frame is built.

use peregrine_dataplane::io::PortId;
use peregrine_dataplane::runtime::Publisher;
use peregrine_dataplane::stages::l3fwd::RouteTable;
use peregrine_pfcp::ie::OuterHeaderCreation;
use peregrine_wire::ethernet::{self, ethertype, Address as Mac};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{gtpu, gtpu_msg, ipv4, ipv6, udp};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// Why no frame could be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("the old Outer Header Creation has no TEID")]
    NoTeid,
    #[error("no N3 address of the peer's family")]
    NoLocalAddress,
    #[error("no route to the peer {0}")]
    NoRoute(IpAddr),
    #[error("the next hop towards the peer {0} is not resolved (ARP / ND)")]
    NextHopUnresolved(IpAddr),
}

/// Builds GTP-U frames from our N3 addresses, the route table and the port MACs.
#[derive(Debug, Clone)]
pub struct GtpuFrames {
    pub n3_v4: Option<Ipv4Addr>,
    pub n3_v6: Option<Ipv6Addr>,
    /// The daemon's route publisher: the current table is read per frame.
    pub routes: Arc<Publisher<RouteTable>>,
    /// Our MAC per port.
    pub macs: Vec<Mac>,
}

impl GtpuFrames {
    /// The port and the End Marker frame for the tunnel `old` (an IPv4 peer is preferred
    /// when the Outer Header Creation carries both and we have an IPv4 N3 address).
    pub fn end_marker(&self, old: &OuterHeaderCreation) -> Result<(PortId, Vec<u8>), FrameError> {
        let teid = old.teid.ok_or(FrameError::NoTeid)?;
        let peer = match (old.ipv4, self.n3_v4, old.ipv6, self.n3_v6) {
            (Some(p), Some(_), _, _) => IpAddr::V4(p),
            (_, _, Some(p), Some(_)) => IpAddr::V6(p),
            _ => return Err(FrameError::NoLocalAddress),
        };
        self.frame(gtpu_msg::Repr::EndMarker { teid }, peer)
    }

    /// The port and the Echo Request frame (sequence number `seq`) to the GTP-U peer `peer`.
    pub fn echo_request(&self, peer: IpAddr, seq: u16) -> Result<(PortId, Vec<u8>), FrameError> {
        self.frame(gtpu_msg::Repr::EchoRequest { seq }, peer)
    }

    fn frame(&self, msg: gtpu_msg::Repr, peer: IpAddr) -> Result<(PortId, Vec<u8>), FrameError> {
        let local = match peer {
            IpAddr::V4(_) => self.n3_v4.map(IpAddr::V4),
            IpAddr::V6(_) => self.n3_v6.map(IpAddr::V6),
        }
        .ok_or(FrameError::NoLocalAddress)?;
        let routes = self.routes.current();
        let nh = match peer {
            IpAddr::V4(a) => routes.v4.lookup(u32::from(a)),
            IpAddr::V6(a) => routes.v6.lookup(u128::from(a)),
        }
        .ok_or(FrameError::NoRoute(peer))?;
        if !nh.is_resolved() {
            return Err(FrameError::NextHopUnresolved(peer));
        }
        let src_mac = self
            .macs
            .get(usize::from(nh.port))
            .copied()
            .unwrap_or_default();
        Ok((nh.port, gtpu_frame(msg, local, peer, nh.mac, src_mac)))
    }
}

/// The sender and sequence number of a GTP-U Echo Response (TS 29.281 section 7.2.2) in an
/// untagged Ethernet frame (IPv4 without fragmentation, or IPv6 without extension headers,
/// UDP to port 2152); `None` for anything else.
pub fn echo_response(frame: &[u8]) -> Option<(IpAddr, u16)> {
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    let l3 = eth.payload();
    let (src, l4): (IpAddr, &[u8]) = match eth.ethertype() {
        ethertype::IPV4 => {
            let ip = ipv4::Packet::new_checked(l3).ok()?;
            if ip.protocol() != ip_protocol::UDP || ip.more_frags() || ip.frag_offset() != 0 {
                return None;
            }
            let l4 = l3.get(ip.header_len()..usize::from(ip.total_len()))?;
            (ip.src_addr().into(), l4)
        }
        ethertype::IPV6 => {
            let ip = ipv6::Packet::new_checked(l3).ok()?;
            if ip.next_header() != ip_protocol::UDP {
                return None;
            }
            (
                ip.src_addr().into(),
                l3.get(ipv6::HEADER_LEN..ip.total_len())?,
            )
        }
        _ => return None,
    };
    let u = udp::Packet::new_checked(l4).ok()?;
    if u.dst_port() != gtpu::PORT {
        return None;
    }
    let g = gtpu::Header::new_checked(u.payload()).ok()?;
    match gtpu_msg::Repr::parse(&g).ok()? {
        gtpu_msg::Repr::EchoResponse { seq, .. } => Some((src, seq)),
        _ => None,
    }
}

/// A GTP-U message from `local` to `peer` (one family) in an Ethernet frame.
fn gtpu_frame(msg: gtpu_msg::Repr, local: IpAddr, peer: IpAddr, dst: Mac, src: Mac) -> Vec<u8> {
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

    fn builder() -> GtpuFrames {
        let mut routes = RouteTable::default();
        let nh = NextHop {
            port: 1,
            mac: GNB_MAC,
        };
        routes.insert("192.0.2.0".parse().unwrap(), 24, nh);
        routes.insert("2001:db8:3::".parse().unwrap(), 48, nh);
        GtpuFrames {
            n3_v4: Some("192.0.2.1".parse().unwrap()),
            n3_v6: Some("2001:db8:3::1".parse().unwrap()),
            routes: Arc::new(Publisher::new(routes)),
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
        if g.msg_type() == 254 {
            assert_eq!(
                gtpu_msg::Repr::parse(&g).unwrap(),
                gtpu_msg::Repr::EndMarker { teid: g.teid() }
            );
        }
        (s, d, g.teid(), g.msg_type())
    }

    #[test]
    fn echo_requests_to_v4_and_v6_peers_parse_back() {
        let b = builder();
        for (peer, local, seq) in [
            ("192.0.2.10", "192.0.2.1", 7),
            ("2001:db8:3::10", "2001:db8:3::1", 8),
        ] {
            let (port, f) = b.echo_request(peer.parse().unwrap(), seq).unwrap();
            assert_eq!(port, 1);
            let (s, d, teid, ty) = parse(&f);
            assert_eq!(
                (s, d, teid, ty),
                (local.parse().unwrap(), peer.parse().unwrap(), 0, 1)
            );
            let l4 = if peer.contains(':') { 14 + 40 } else { 14 + 20 };
            let u = udp::Packet::new_checked(&f[l4..]).unwrap();
            let g = gtpu::Header::new_checked(u.payload()).unwrap();
            assert_eq!(
                gtpu_msg::Repr::parse(&g).unwrap(),
                gtpu_msg::Repr::EchoRequest { seq }
            );
            // Our own request is not a response; the peer's answer is, by its source.
            assert_eq!(echo_response(&f), None);
            let answer = gtpu_frame(
                gtpu_msg::Repr::echo_response(seq),
                peer.parse().unwrap(),
                local.parse().unwrap(),
                OURS,
                GNB_MAC,
            );
            assert_eq!(echo_response(&answer), Some((peer.parse().unwrap(), seq)));
            for cut in [0, 13, 20, answer.len() - 1] {
                assert_eq!(echo_response(&answer[..cut]), None, "cut at {cut}");
            }
        }
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
        let (port, f) = b.end_marker(&old).unwrap();
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
        let (_, f) = b.end_marker(&old6).unwrap();
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
        assert_eq!(b.end_marker(&old), Err(FrameError::NoTeid));
        old.teid = Some(1);
        old.ipv4 = Some("203.0.113.1".parse().unwrap());
        assert_eq!(
            b.end_marker(&old),
            Err(FrameError::NoRoute("203.0.113.1".parse().unwrap()))
        );
        // A republished table is used by the same builder: a new next hop, then none yet.
        let b = builder();
        let mut t = RouteTable::default();
        let moved = Mac([2, 0, 0, 0, 3, 2]);
        t.insert(
            "192.0.2.0".parse().unwrap(),
            24,
            NextHop {
                port: 1,
                mac: moved,
            },
        );
        b.routes.publish(t.clone());
        old.ipv4 = Some("192.0.2.10".parse().unwrap());
        let (_, f) = b.end_marker(&old).unwrap();
        assert_eq!(&f[..6], &moved.0);
        let unresolved = NextHop {
            port: 1,
            mac: NextHop::UNRESOLVED,
        };
        t.insert("192.0.2.0".parse().unwrap(), 24, unresolved);
        b.routes.publish(t);
        assert_eq!(
            b.end_marker(&old),
            Err(FrameError::NextHopUnresolved("192.0.2.10".parse().unwrap()))
        );
        let b4 = GtpuFrames {
            n3_v4: None,
            ..builder()
        };
        old.ipv4 = Some("192.0.2.10".parse().unwrap());
        assert_eq!(b4.end_marker(&old), Err(FrameError::NoLocalAddress));
        assert_eq!(
            b4.echo_request("192.0.2.10".parse().unwrap(), 1),
            Err(FrameError::NoLocalAddress)
        );
    }
}
