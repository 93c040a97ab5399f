//! IPv4/IPv6 forwarding (RFC 1812 section 5.2/5.3; RFC 8200 for the hop limit).
//!
//! Longest-prefix match over a route table published as a snapshot, TTL/hop-limit
//! decrement with an incremental IPv4 checksum update (RFC 1624), Ethernet rewrite to the
//! next hop. ARP, IPv6 multicast (neighbour discovery) and expiring packets go to the control
//! thread, which owns the exception path.

use crate::buffer::PacketBuf;
use crate::io::PortId;
use crate::runtime::{Batch, Context, Disposition, DropReason, Reader, Reasons, Stage};
use peregrine_wire::ethernet::{self, ethertype, Address as MacAddr};
use peregrine_wire::{ipv4, ipv6, vlan, Error as WireError};
use rustc_hash::FxHashMap;
use std::net::IpAddr;

/// Where a route sends packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    pub port: PortId,
    pub mac: MacAddr,
}

impl NextHop {
    /// The MAC of a next hop not resolved yet (a route by gateway address whose neighbour
    /// entry is INCOMPLETE or FAILED): packets routed to it are dropped as
    /// `next_hop_unresolved`. The all-zero address is never a valid destination.
    pub const UNRESOLVED: MacAddr = MacAddr([0; 6]);

    /// False while the next hop's MAC is unknown.
    #[inline]
    pub fn is_resolved(&self) -> bool {
        self.mac != Self::UNRESOLVED
    }
}

/// Longest-prefix match as one exact-match hash table per prefix length in use, probed from
/// the longest length down. Lookups cost one hash probe per distinct length (a handful in
/// practice) whatever the number of routes.
#[derive(Debug, Clone, Default)]
pub struct Lpm<K> {
    /// (length, mask, table), longest length first.
    levels: Vec<(u8, K, FxHashMap<K, NextHop>)>,
}

macro_rules! lpm_impl {
    ($k:ty, $bits:expr) => {
        impl Lpm<$k> {
            fn mask(len: u8) -> $k {
                if len == 0 {
                    0
                } else {
                    <$k>::MAX << ($bits - len as u32)
                }
            }

            /// Add or replace a route.
            pub fn insert(&mut self, addr: $k, len: u8, nh: NextHop) {
                let len = len.min($bits as u8);
                let mask = Self::mask(len);
                let i = match self.levels.iter().position(|(l, _, _)| *l == len) {
                    Some(i) => i,
                    None => {
                        self.levels.push((len, mask, FxHashMap::default()));
                        self.levels.sort_by(|a, b| b.0.cmp(&a.0));
                        self.levels
                            .iter()
                            .position(|(l, _, _)| *l == len)
                            .expect("just inserted")
                    }
                };
                self.levels[i].2.insert(addr & mask, nh);
            }

            #[inline]
            pub fn lookup(&self, addr: $k) -> Option<NextHop> {
                self.levels
                    .iter()
                    .find_map(|(_, mask, t)| t.get(&(addr & mask)).copied())
            }

            pub fn len(&self) -> usize {
                self.levels.iter().map(|(_, _, t)| t.len()).sum()
            }

            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }
        }
    };
}
lpm_impl!(u32, 32u32);
lpm_impl!(u128, 128u32);

/// The route table workers read; rebuilt and republished whole on every change.
#[derive(Debug, Clone, Default)]
pub struct RouteTable {
    pub v4: Lpm<u32>,
    pub v6: Lpm<u128>,
}

/// A route as given by configuration.
pub trait RouteSpec {
    fn prefix(&self) -> (IpAddr, u8);
    fn next_hop(&self) -> NextHop;
}

impl RouteTable {
    pub fn insert(&mut self, addr: IpAddr, len: u8, nh: NextHop) {
        match addr {
            IpAddr::V4(a) => self.v4.insert(u32::from(a), len, nh),
            IpAddr::V6(a) => self.v6.insert(u128::from(a), len, nh),
        }
    }

    pub fn from_routes<R: RouteSpec>(routes: &[R]) -> RouteTable {
        let mut t = RouteTable::default();
        for r in routes {
            let (a, l) = r.prefix();
            t.insert(a, l, r.next_hop());
        }
        t
    }
}

#[derive(Debug, Clone, Copy)]
struct Drops {
    l2_truncated: DropReason,
    l2_not_for_us: DropReason,
    unsupported_ethertype: DropReason,
    ipv4_truncated: DropReason,
    ipv4_malformed: DropReason,
    ipv4_bad_checksum: DropReason,
    ipv6_truncated: DropReason,
    ipv6_malformed: DropReason,
    ttl_exceeded: DropReason,
    no_route: DropReason,
    next_hop_unresolved: DropReason,
}

/// The forwarding stage. See the module docs.
#[derive(Debug)]
pub struct L3Fwd {
    routes: Reader<RouteTable>,
    port_macs: Vec<MacAddr>,
    promiscuous: bool,
    drops: Drops,
}

impl L3Fwd {
    /// `port_macs[p]` is port `p`'s own address; with `promiscuous`, frames to any unicast
    /// address are routed (replays of foreign captures).
    pub fn new(
        routes: Reader<RouteTable>,
        port_macs: Vec<MacAddr>,
        promiscuous: bool,
        r: &mut Reasons,
    ) -> L3Fwd {
        let drops = Drops {
            l2_truncated: r.register("l2_truncated"),
            l2_not_for_us: r.register("l2_not_for_us"),
            unsupported_ethertype: r.register("unsupported_ethertype"),
            ipv4_truncated: r.register("ipv4_truncated"),
            ipv4_malformed: r.register("ipv4_malformed"),
            ipv4_bad_checksum: r.register("ipv4_bad_checksum"),
            ipv6_truncated: r.register("ipv6_truncated"),
            ipv6_malformed: r.register("ipv6_malformed"),
            ttl_exceeded: r.register("ttl_exceeded"),
            no_route: r.register("no_route"),
            next_hop_unresolved: r.register("next_hop_unresolved"),
        };
        L3Fwd {
            routes,
            port_macs,
            promiscuous,
            drops,
        }
    }
}

#[inline]
fn forward_one(
    data: &mut [u8],
    rx_port: PortId,
    t: &RouteTable,
    macs: &[MacAddr],
    promisc: bool,
    d: &Drops,
) -> Disposition {
    let Ok(frame) = ethernet::Frame::new_checked(&*data) else {
        return Disposition::drop_as(d.l2_truncated);
    };
    let dst = frame.dst_addr();
    if dst.is_multicast() {
        // Broadcast ARP, IPv6 neighbour discovery and other link-local chatter.
        return Disposition::TO_CONTROL;
    }
    if !promisc && macs.get(rx_port as usize) != Some(&dst) {
        return Disposition::drop_as(d.l2_not_for_us);
    }
    let Ok((l3, et)) = vlan::l3_offset(data) else {
        return Disposition::drop_as(d.l2_truncated);
    };
    let nh = match et {
        ethertype::IPV4 => {
            let mut ip = match ipv4::Packet::new_checked(&mut data[l3..]) {
                Ok(p) => p,
                Err(WireError::Truncated) => return Disposition::drop_as(d.ipv4_truncated),
                Err(_) => return Disposition::drop_as(d.ipv4_malformed),
            };
            if !ip.verify_checksum() {
                return Disposition::drop_as(d.ipv4_bad_checksum);
            }
            if ip.ttl() <= 1 {
                // Time Exceeded is generated on the exception path.
                return Disposition::drop_as(d.ttl_exceeded);
            }
            let Some(nh) = t.v4.lookup(u32::from(ip.dst_addr())) else {
                return Disposition::drop_as(d.no_route);
            };
            if !nh.is_resolved() {
                return Disposition::drop_as(d.next_hop_unresolved);
            }
            ip.decrement_ttl_update_checksum();
            nh
        }
        ethertype::IPV6 => {
            let mut ip = match ipv6::Packet::new_checked(&mut data[l3..]) {
                Ok(p) => p,
                Err(WireError::Truncated) => return Disposition::drop_as(d.ipv6_truncated),
                Err(_) => return Disposition::drop_as(d.ipv6_malformed),
            };
            let dst = ip.dst_addr();
            if dst.is_multicast() {
                return Disposition::TO_CONTROL;
            }
            if ip.hop_limit() <= 1 {
                return Disposition::drop_as(d.ttl_exceeded);
            }
            let Some(nh) = t.v6.lookup(u128::from(dst)) else {
                return Disposition::drop_as(d.no_route);
            };
            if !nh.is_resolved() {
                return Disposition::drop_as(d.next_hop_unresolved);
            }
            ip.set_hop_limit(ip.hop_limit() - 1);
            nh
        }
        ethertype::ARP => return Disposition::TO_CONTROL,
        _ => return Disposition::drop_as(d.unsupported_ethertype),
    };
    let mut frame = ethernet::Frame::new_unchecked(&mut data[..]);
    frame.set_dst_addr(nh.mac);
    frame.set_src_addr(macs.get(nh.port as usize).copied().unwrap_or_default());
    Disposition::tx(nh.port)
}

impl<B: PacketBuf> Stage<B> for L3Fwd {
    fn name(&self) -> &'static str {
        "l3fwd"
    }

    fn idle(&mut self) {
        self.routes.get();
    }

    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        let rx = batch.rx_port;
        let (macs, promisc, d) = (&self.port_macs, self.promiscuous, self.drops);
        let t = self.routes.get();
        batch.for_each_active(|p| forward_one(p.data_mut(), rx, t, macs, promisc, &d));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lpm_prefers_longest_prefix() {
        let nh = |p| NextHop {
            port: p,
            mac: MacAddr([0, 0, 0, 0, 0, p as u8]),
        };
        let mut t = Lpm::<u32>::default();
        t.insert(0, 0, nh(9));
        t.insert(u32::from(std::net::Ipv4Addr::new(10, 0, 0, 0)), 8, nh(1));
        t.insert(u32::from(std::net::Ipv4Addr::new(10, 45, 0, 0)), 16, nh(2));
        t.insert(u32::from(std::net::Ipv4Addr::new(10, 45, 1, 7)), 32, nh(3));
        let l = |a: [u8; 4]| {
            t.lookup(u32::from(std::net::Ipv4Addr::from(a)))
                .map(|n| n.port)
        };
        assert_eq!(l([10, 45, 1, 7]), Some(3));
        assert_eq!(l([10, 45, 1, 8]), Some(2));
        assert_eq!(l([10, 46, 0, 1]), Some(1));
        assert_eq!(l([192, 0, 2, 1]), Some(9));
        let mut v6 = Lpm::<u128>::default();
        v6.insert(
            u128::from("2001:db8::".parse::<std::net::Ipv6Addr>().unwrap()),
            32,
            nh(4),
        );
        assert_eq!(
            v6.lookup(u128::from(
                "2001:db8:1::1".parse::<std::net::Ipv6Addr>().unwrap()
            ))
            .map(|n| n.port),
            Some(4)
        );
        assert_eq!(
            v6.lookup(u128::from(
                "2001:db9::1".parse::<std::net::Ipv6Addr>().unwrap()
            )),
            None
        );
        assert_eq!(v6.len(), 1);
    }
}
