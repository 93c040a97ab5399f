//! Local ARP and IPv6 Neighbour Discovery answering and neighbour learning on the control
//! thread (the exception path of DESIGN section 1).
//!
//! The workers hand ARP, multicast and locally addressed non-GTP-U frames to the control
//! thread; [`Responder::handle`] answers, I/O-free:
//! - ARP requests (RFC 826, "Packet Reception") for one of our IPv4 addresses (`[upf] n3`,
//!   `n6`) with an ARP reply from the receiving port's MAC;
//! - Neighbour Solicitations (RFC 4861 section 7.1.1 validation, sections 7.2.3-7.2.4) for one
//!   of our IPv6 addresses with a Neighbour Advertisement: Solicited flag set unless the
//!   solicitation came from the unspecified address (then to all-nodes), Override set, Router
//!   set (the UPF forwards), the Target Link-Layer Address option, hop limit 255, ICMPv6
//!   checksum.
//!
//! The sender of every valid ARP packet, the source of a Neighbour Solicitation with a
//! Source Link-Layer Address option and the target of a Neighbour Advertisement with a Target
//! Link-Layer Address option are learnt into a [`NeighbourTable`] (RFC 826 merge, RFC 4861
//! section 7.2.5 in its simplest form: the last advertised MAC wins). The daemon sends the
//! replies on the receiving port through the runtime's injector and logs what it learns.
//!
//! The Neighbour Discovery message bodies (target address and options, RFC 4861 sections
//! 4.3, 4.4 and 4.6) are read here over the wire crate's ICMPv6 view, which has no ND view.

use peregrine_wire::ethernet::{self, ethertype, Address as Mac};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{arp, icmpv6, ipv6};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// NDP option types (RFC 4861 section 4.6).
const OPT_SOURCE_LL: u8 = 1;
const OPT_TARGET_LL: u8 = 2;
/// NS and NA bodies: 4 octets flags/reserved (the ICMPv6 header's rest) + 16 octets target.
const ND_TARGET_LEN: usize = 16;
/// Neighbour Advertisement flags (RFC 4861 section 4.4), in the ICMPv6 header's rest.
const NA_ROUTER: u32 = 1 << 31;
const NA_SOLICITED: u32 = 1 << 30;
const NA_OVERRIDE: u32 = 1 << 29;
/// ND messages must arrive with hop limit 255 (RFC 4861 sections 7.1.1 and 7.1.2).
const ND_HOP_LIMIT: u8 = 255;

/// Counters of the responder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NeighbourStats {
    pub arp_requests: u64,
    pub arp_replies_sent: u64,
    pub ns_received: u64,
    pub na_sent: u64,
    /// Table entries added or changed.
    pub learned: u64,
    /// ARP / ND frames that failed validation (truncated, bad checksum, hop limit, ...).
    pub malformed: u64,
    /// Valid frames that need no answer (not for our addresses, other ICMPv6, other traffic).
    pub ignored: u64,
}

/// A learnt neighbour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbour {
    pub mac: Mac,
    pub port: u16,
    /// When it was last seen, in the caller's clock (ns).
    pub seen_ns: u64,
}

/// IP address -> MAC and port, as learnt from ARP and ND.
#[derive(Debug, Clone, Default)]
pub struct NeighbourTable {
    entries: BTreeMap<IpAddr, Neighbour>,
}

impl NeighbourTable {
    pub fn get(&self, ip: IpAddr) -> Option<&Neighbour> {
        self.entries.get(&ip)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&IpAddr, &Neighbour)> {
        self.entries.iter()
    }

    /// Insert or refresh; true when the entry is new or its MAC or port changed.
    fn learn(&mut self, ip: IpAddr, mac: Mac, port: u16, now_ns: u64) -> bool {
        let n = Neighbour {
            mac,
            port,
            seen_ns: now_ns,
        };
        match self.entries.insert(ip, n) {
            Some(old) => old.mac != mac || old.port != port,
            None => true,
        }
    }
}

/// What [`Responder::handle`] made of a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// A frame to send back on the receiving port.
    pub reply: Option<Vec<u8>>,
    /// A neighbour added or changed by this frame.
    pub learned: Option<(IpAddr, Mac)>,
    /// What the frame says about its sender (or an advertisement's target), changed or not:
    /// the next-hop resolver's input (`crate::nexthop`).
    pub heard: Option<Heard>,
}

/// A neighbour's sign of life in one ARP / ND frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heard {
    pub ip: IpAddr,
    /// Its link-layer address, when the frame carries one (a solicited Neighbour
    /// Advertisement answering a unicast probe may omit it, RFC 4861 section 7.2.4).
    pub mac: Option<Mac>,
    /// An answer to a solicitation (ARP reply, NA with the Solicited flag): reachability is
    /// confirmed (RFC 4861 section 7.3.1). Other frames only tell the address.
    pub confirmed: bool,
}

/// The I/O-free ARP / ND responder. See the module docs.
#[derive(Debug, Clone)]
pub struct Responder {
    v4: Vec<Ipv4Addr>,
    v6: Vec<Ipv6Addr>,
    /// Our MAC per port index.
    macs: Vec<Mac>,
    table: NeighbourTable,
    stats: NeighbourStats,
}

enum Verdict {
    Malformed,
    Ignored,
}

type Handled = Result<Outcome, Verdict>;

impl Responder {
    /// Answer for `addrs` (our local addresses) on ports whose MACs are `macs`.
    pub fn new(addrs: &[IpAddr], macs: Vec<Mac>) -> Responder {
        let mut v4 = Vec::new();
        let mut v6 = Vec::new();
        for a in addrs {
            match a {
                IpAddr::V4(a) => v4.push(*a),
                IpAddr::V6(a) => v6.push(*a),
            }
        }
        Responder {
            v4,
            v6,
            macs,
            table: NeighbourTable::default(),
            stats: NeighbourStats::default(),
        }
    }

    pub fn stats(&self) -> NeighbourStats {
        self.stats
    }

    pub fn table(&self) -> &NeighbourTable {
        &self.table
    }

    /// Handle one frame received on `port` at `now_ns`. Never panics on any input.
    pub fn handle(&mut self, now_ns: u64, port: u16, frame: &[u8]) -> Outcome {
        let none = Outcome {
            reply: None,
            learned: None,
            heard: None,
        };
        let Some(&our_mac) = self.macs.get(usize::from(port)) else {
            self.stats.ignored += 1;
            return none;
        };
        let r = match ethernet::Frame::new_checked(frame) {
            Err(_) => Err(Verdict::Malformed),
            Ok(f) => match f.ethertype() {
                ethertype::ARP => self.arp(now_ns, port, our_mac, f.payload()),
                ethertype::IPV6 => self.ipv6(now_ns, port, our_mac, f.src_addr(), f.payload()),
                // VLAN-tagged and other frames are not ours to answer.
                _ => Err(Verdict::Ignored),
            },
        };
        match r {
            Ok(o) => {
                if o.learned.is_some() {
                    self.stats.learned += 1;
                }
                if o.reply.is_none() && o.learned.is_none() {
                    self.stats.ignored += 1;
                }
                o
            }
            Err(Verdict::Malformed) => {
                self.stats.malformed += 1;
                none
            }
            Err(Verdict::Ignored) => {
                self.stats.ignored += 1;
                none
            }
        }
    }

    fn arp(&mut self, now_ns: u64, port: u16, our_mac: Mac, body: &[u8]) -> Handled {
        let p = arp::Packet::new_checked(body).map_err(|_| Verdict::Malformed)?;
        let req = arp::Repr::parse(&p).map_err(|_| Verdict::Malformed)?;
        let spa = req.sender_protocol_addr;
        // A probe (sender 0.0.0.0, RFC 5227) teaches nothing; a multicast sender is bogus.
        let learned = (!spa.is_unspecified() && !req.sender_hardware_addr.is_multicast())
            .then(|| {
                self.table
                    .learn(IpAddr::V4(spa), req.sender_hardware_addr, port, now_ns)
                    .then_some((IpAddr::V4(spa), req.sender_hardware_addr))
            })
            .flatten();
        let heard =
            (!spa.is_unspecified() && !req.sender_hardware_addr.is_multicast()).then_some(Heard {
                ip: IpAddr::V4(spa),
                mac: Some(req.sender_hardware_addr),
                confirmed: req.operation == arp::Operation::Reply,
            });
        let reply = match req.reply(our_mac) {
            Some(rep) if self.v4.contains(&req.target_protocol_addr) => {
                self.stats.arp_requests += 1;
                let mut f = vec![0u8; ethernet::HEADER_LEN + arp::HEADER_LEN];
                ethernet::Repr {
                    src: our_mac,
                    dst: req.sender_hardware_addr,
                    ethertype: ethertype::ARP,
                }
                .emit(&mut f)
                .map_err(|_| Verdict::Malformed)?;
                rep.emit(&mut f[ethernet::HEADER_LEN..])
                    .map_err(|_| Verdict::Malformed)?;
                self.stats.arp_replies_sent += 1;
                Some(f)
            }
            _ => None,
        };
        if reply.is_none() && heard.is_none() {
            return Err(Verdict::Ignored);
        }
        Ok(Outcome {
            reply,
            learned,
            heard,
        })
    }

    fn ipv6(&mut self, now_ns: u64, port: u16, our_mac: Mac, eth_src: Mac, l3: &[u8]) -> Handled {
        let ip = ipv6::Packet::new_checked(l3).map_err(|_| Verdict::Malformed)?;
        if ip.next_header() != ip_protocol::IPV6_ICMP {
            return Err(Verdict::Ignored);
        }
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let icmp = icmpv6::Packet::new_checked(ip.payload()).map_err(|_| Verdict::Malformed)?;
        let ty = icmp.msg_type();
        if ty != icmpv6::msg_type::NEIGHBOR_SOLICIT && ty != icmpv6::msg_type::NEIGHBOR_ADVERT {
            return Err(Verdict::Ignored);
        }
        // RFC 4861 sections 7.1.1 / 7.1.2: hop limit 255, valid checksum, code 0, 24+ octets.
        if ip.hop_limit() != ND_HOP_LIMIT || !icmp.verify_checksum(src, dst) || icmp.msg_code() != 0
        {
            return Err(Verdict::Malformed);
        }
        let data = icmp.data();
        let target: [u8; 16] = data
            .get(..ND_TARGET_LEN)
            .and_then(|t| t.try_into().ok())
            .ok_or(Verdict::Malformed)?;
        let target = Ipv6Addr::from(target);
        if target.is_multicast() {
            return Err(Verdict::Malformed);
        }
        let opts = parse_ll_options(&data[ND_TARGET_LEN..]).ok_or(Verdict::Malformed)?;
        if ty == icmpv6::msg_type::NEIGHBOR_ADVERT {
            // Section 7.1.2: a solicited advertisement is never to a multicast address.
            if dst.is_multicast() && icmp.rest_of_header() & NA_SOLICITED != 0 {
                return Err(Verdict::Malformed);
            }
            let learned = opts.target.and_then(|mac| {
                self.table
                    .learn(IpAddr::V6(target), mac, port, now_ns)
                    .then_some((IpAddr::V6(target), mac))
            });
            let confirmed = icmp.rest_of_header() & NA_SOLICITED != 0;
            if opts.target.is_none() && !confirmed {
                return Err(Verdict::Ignored);
            }
            return Ok(Outcome {
                reply: None,
                learned,
                heard: Some(Heard {
                    ip: IpAddr::V6(target),
                    mac: opts.target,
                    confirmed,
                }),
            });
        }
        self.stats.ns_received += 1;
        let dad = src.is_unspecified();
        // Section 7.1.1: from the unspecified address only to a solicited-node address and
        // without a Source Link-Layer Address option.
        if dad && (!is_solicited_node(dst) || opts.source.is_some()) {
            return Err(Verdict::Malformed);
        }
        let learned = match opts.source {
            Some(mac) if !dad => self
                .table
                .learn(IpAddr::V6(src), mac, port, now_ns)
                .then_some((IpAddr::V6(src), mac)),
            _ => None,
        };
        let heard = opts.source.filter(|_| !dad).map(|mac| Heard {
            ip: IpAddr::V6(src),
            mac: Some(mac),
            confirmed: false,
        });
        if !self.v6.contains(&target) {
            return match heard {
                Some(_) => Ok(Outcome {
                    reply: None,
                    learned,
                    heard,
                }),
                None => Err(Verdict::Ignored),
            };
        }
        // Section 7.2.4: to the solicitation's source, or to all-nodes for DAD (S clear).
        let (to, to_mac, flags) = if dad {
            let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
            (all_nodes, multicast_mac(all_nodes), NA_ROUTER | NA_OVERRIDE)
        } else {
            (
                src,
                opts.source.unwrap_or(eth_src),
                NA_ROUTER | NA_SOLICITED | NA_OVERRIDE,
            )
        };
        let reply = neighbour_advert(our_mac, to_mac, target, to, flags);
        self.stats.na_sent += 1;
        Ok(Outcome {
            reply: Some(reply),
            learned,
            heard,
        })
    }
}

/// The link-layer address options of an ND message.
#[derive(Debug, Default)]
struct LlOptions {
    source: Option<Mac>,
    target: Option<Mac>,
}

/// Walk the options (RFC 4861 section 4.6: type, length in 8-octet units, never 0); `None`
/// if one is malformed. Other options are skipped.
fn parse_ll_options(mut opts: &[u8]) -> Option<LlOptions> {
    let mut out = LlOptions::default();
    while !opts.is_empty() {
        let ty = *opts.first()?;
        let len = usize::from(*opts.get(1)?) * 8;
        if len == 0 {
            return None;
        }
        let opt = opts.get(..len)?;
        if ty == OPT_SOURCE_LL || ty == OPT_TARGET_LL {
            let mac: [u8; 6] = opt.get(2..8)?.try_into().ok()?;
            if ty == OPT_SOURCE_LL {
                out.source = Some(Mac(mac));
            } else {
                out.target = Some(Mac(mac));
            }
        }
        opts = &opts[len..];
    }
    Some(out)
}

/// ff02::1:ffXX:XXXX (RFC 4291 section 2.7.1).
fn is_solicited_node(a: Ipv6Addr) -> bool {
    let s = a.segments();
    s[..6] == [0xff02, 0, 0, 0, 0, 1] && s[6] >> 8 == 0xff
}

/// 33:33 + the low 32 bits of an IPv6 multicast address (RFC 2464 section 7).
fn multicast_mac(a: Ipv6Addr) -> Mac {
    let o = a.octets();
    Mac([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// Ethernet + IPv6 (hop limit 255) + Neighbour Advertisement for `target` with `flags` and
/// the Target Link-Layer Address option (RFC 4861 section 4.4).
fn neighbour_advert(
    our_mac: Mac,
    to_mac: Mac,
    target: Ipv6Addr,
    to: Ipv6Addr,
    flags: u32,
) -> Vec<u8> {
    let icmp_len = icmpv6::HEADER_LEN + ND_TARGET_LEN + 8;
    let l4 = ethernet::HEADER_LEN + ipv6::HEADER_LEN;
    let mut f = vec![0u8; l4 + icmp_len];
    let _ = ethernet::Repr {
        src: our_mac,
        dst: to_mac,
        ethertype: ethertype::IPV6,
    }
    .emit(&mut f);
    let _ = ipv6::Repr {
        src: target,
        dst: to,
        next_header: ip_protocol::IPV6_ICMP,
        payload_len: icmp_len,
        hop_limit: ND_HOP_LIMIT,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut f[ethernet::HEADER_LEN..]);
    let mut icmp = icmpv6::Packet::new_unchecked(&mut f[l4..]);
    icmp.set_msg_type(icmpv6::msg_type::NEIGHBOR_ADVERT);
    icmp.set_msg_code(0);
    icmp.set_rest_of_header(flags);
    let d = icmp.data_mut();
    d[..ND_TARGET_LEN].copy_from_slice(&target.octets());
    d[ND_TARGET_LEN] = OPT_TARGET_LL;
    d[ND_TARGET_LEN + 1] = 1;
    d[ND_TARGET_LEN + 2..ND_TARGET_LEN + 8].copy_from_slice(&our_mac.0);
    icmp.fill_checksum(target, to);
    f
}

/// A Neighbour Solicitation frame for `target` from `src` (with a Source Link-Layer Address
/// option unless `src` is unspecified), to the target's solicited-node address (RFC 4861
/// section 7.2.2, address resolution).
pub fn neighbour_solicit(src_mac: Mac, src: Ipv6Addr, target: Ipv6Addr) -> Vec<u8> {
    neighbour_solicit_to(src_mac, src, target, None)
}

/// [`neighbour_solicit`], or with `unicast` the unicast probe of a known neighbour (RFC 4861
/// section 7.3.3, PROBE): to `target` itself at that MAC.
pub fn neighbour_solicit_to(
    src_mac: Mac,
    src: Ipv6Addr,
    target: Ipv6Addr,
    unicast: Option<Mac>,
) -> Vec<u8> {
    let t = target.octets();
    let dst = match unicast {
        Some(_) => target,
        None => Ipv6Addr::from([
            0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, t[13], t[14], t[15],
        ]),
    };
    let opt = if src.is_unspecified() { 0 } else { 8 };
    let icmp_len = icmpv6::HEADER_LEN + ND_TARGET_LEN + opt;
    let l4 = ethernet::HEADER_LEN + ipv6::HEADER_LEN;
    let mut f = vec![0u8; l4 + icmp_len];
    let _ = ethernet::Repr {
        src: src_mac,
        dst: unicast.unwrap_or_else(|| multicast_mac(dst)),
        ethertype: ethertype::IPV6,
    }
    .emit(&mut f);
    let _ = ipv6::Repr {
        src,
        dst,
        next_header: ip_protocol::IPV6_ICMP,
        payload_len: icmp_len,
        hop_limit: ND_HOP_LIMIT,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut f[ethernet::HEADER_LEN..]);
    let mut icmp = icmpv6::Packet::new_unchecked(&mut f[l4..]);
    icmp.set_msg_type(icmpv6::msg_type::NEIGHBOR_SOLICIT);
    icmp.set_msg_code(0);
    icmp.set_rest_of_header(0);
    let d = icmp.data_mut();
    d[..ND_TARGET_LEN].copy_from_slice(&t);
    if opt > 0 {
        d[ND_TARGET_LEN] = OPT_SOURCE_LL;
        d[ND_TARGET_LEN + 1] = 1;
        d[ND_TARGET_LEN + 2..ND_TARGET_LEN + 8].copy_from_slice(&src_mac.0);
    }
    icmp.fill_checksum(src, dst);
    f
}

/// An ARP request frame (broadcast) from `sha`/`spa` asking for `tpa` (RFC 826).
pub fn arp_request(sha: Mac, spa: Ipv4Addr, tpa: Ipv4Addr) -> Vec<u8> {
    arp_request_to(sha, spa, tpa, Mac::BROADCAST)
}

/// [`arp_request`] sent to `dst`: broadcast to resolve, unicast to the known MAC to probe.
pub fn arp_request_to(sha: Mac, spa: Ipv4Addr, tpa: Ipv4Addr, dst: Mac) -> Vec<u8> {
    let mut f = vec![0u8; ethernet::HEADER_LEN + arp::HEADER_LEN];
    let _ = ethernet::Repr {
        src: sha,
        dst,
        ethertype: ethertype::ARP,
    }
    .emit(&mut f);
    let _ = arp::Repr {
        operation: arp::Operation::Request,
        sender_hardware_addr: sha,
        sender_protocol_addr: spa,
        target_hardware_addr: Mac([0; 6]),
        target_protocol_addr: tpa,
    }
    .emit(&mut f[ethernet::HEADER_LEN..]);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: Mac = Mac([0x02, 0, 0, 0, 0, 0x03]);
    const N6: Mac = Mac([0x02, 0, 0, 0, 0, 0x06]);
    const PEER: Mac = Mac([0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee]);
    const N3_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    const PEER_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);

    fn n3_v6() -> Ipv6Addr {
        "2001:db8::1".parse().unwrap()
    }
    fn peer_v6() -> Ipv6Addr {
        "2001:db8::10".parse().unwrap()
    }

    fn responder() -> Responder {
        Responder::new(&[N3_V4.into(), n3_v6().into()], vec![OURS, N6])
    }

    #[test]
    fn arp_request_for_our_address_gets_a_reply_byte_by_byte() {
        let mut r = responder();
        let o = r.handle(5, 0, &arp_request(PEER, PEER_V4, N3_V4));
        let f = o.reply.expect("reply");
        let mut want = Vec::new();
        want.extend_from_slice(&PEER.0); // to the requester
        want.extend_from_slice(&OURS.0); // from port 0's MAC
        want.extend_from_slice(&[0x08, 0x06]);
        want.extend_from_slice(&[0, 1, 0x08, 0, 6, 4, 0, 2]); // Ethernet/IPv4, reply
        want.extend_from_slice(&OURS.0);
        want.extend_from_slice(&N3_V4.octets());
        want.extend_from_slice(&PEER.0);
        want.extend_from_slice(&PEER_V4.octets());
        assert_eq!(f, want);
        assert_eq!(o.learned, Some((PEER_V4.into(), PEER)));
        assert_eq!(r.table().get(PEER_V4.into()).unwrap().port, 0);
        // The same request on port 1 answers with port 1's MAC; the port change is learnt.
        let o = r.handle(6, 1, &arp_request(PEER, PEER_V4, N3_V4));
        assert_eq!(&o.reply.unwrap()[6..12], &N6.0);
        assert!(o.learned.is_some());
        let s = r.stats();
        assert_eq!((s.arp_requests, s.arp_replies_sent, s.learned), (2, 2, 2));
    }

    #[test]
    fn arp_for_another_address_is_not_answered_but_learnt() {
        let mut r = responder();
        let o = r.handle(
            0,
            0,
            &arp_request(PEER, PEER_V4, Ipv4Addr::new(192, 0, 2, 99)),
        );
        assert_eq!(o.reply, None);
        assert_eq!(o.learned, Some((PEER_V4.into(), PEER)));
        // Seen again unchanged: nothing new, nothing to say.
        let o = r.handle(
            1,
            0,
            &arp_request(PEER, PEER_V4, Ipv4Addr::new(192, 0, 2, 99)),
        );
        assert_eq!(o.learned, None);
        assert_eq!(r.stats().ignored, 1);
        // A probe (sender 0.0.0.0) for our address is answered and teaches nothing.
        let o = r.handle(2, 0, &arp_request(PEER, Ipv4Addr::UNSPECIFIED, N3_V4));
        assert!(o.reply.is_some());
        assert_eq!(o.learned, None);
        assert_eq!(r.table().len(), 1);
    }

    #[test]
    fn neighbour_solicitation_gets_a_solicited_advertisement() {
        let mut r = responder();
        let ns = neighbour_solicit(PEER, peer_v6(), n3_v6());
        let o = r.handle(1, 0, &ns);
        let f = o.reply.expect("NA");
        assert_eq!(o.learned, Some((peer_v6().into(), PEER)));
        let eth = ethernet::Frame::new_checked(&f[..]).unwrap();
        assert_eq!((eth.dst_addr(), eth.src_addr()), (PEER, OURS));
        let ip = ipv6::Packet::new_checked(eth.payload()).unwrap();
        assert_eq!((ip.src_addr(), ip.dst_addr()), (n3_v6(), peer_v6()));
        assert_eq!(ip.hop_limit(), 255);
        assert_eq!(ip.next_header(), ip_protocol::IPV6_ICMP);
        let icmp = icmpv6::Packet::new_checked(ip.payload()).unwrap();
        assert!(icmp.verify_checksum(n3_v6(), peer_v6()));
        let mut want = vec![136, 0];
        want.extend_from_slice(&icmp.checksum().to_be_bytes());
        want.extend_from_slice(&[0xe0, 0, 0, 0]); // R, S, O
        want.extend_from_slice(&n3_v6().octets());
        want.extend_from_slice(&[2, 1]);
        want.extend_from_slice(&OURS.0);
        assert_eq!(ip.payload(), &want[..]);
        assert_eq!(r.stats().na_sent, 1);
    }

    #[test]
    fn dad_solicitation_is_answered_to_all_nodes_without_solicited_flag() {
        let mut r = responder();
        let ns = neighbour_solicit(PEER, Ipv6Addr::UNSPECIFIED, n3_v6());
        let o = r.handle(0, 1, &ns);
        let f = o.reply.expect("NA");
        assert_eq!(o.learned, None);
        assert_eq!(&f[..6], &[0x33, 0x33, 0, 0, 0, 1]);
        assert_eq!(&f[6..12], &N6.0);
        let ip = ipv6::Packet::new_checked(&f[14..]).unwrap();
        assert_eq!(ip.dst_addr(), "ff02::1".parse::<Ipv6Addr>().unwrap());
        let icmp = icmpv6::Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(icmp.rest_of_header(), NA_ROUTER | NA_OVERRIDE);
    }

    #[test]
    fn advertisement_is_learnt_and_bad_nd_is_counted_malformed() {
        let mut r = responder();
        // Our own NA builder makes a valid unsolicited NA from the peer.
        let na = neighbour_advert(PEER, OURS, peer_v6(), n3_v6(), NA_OVERRIDE);
        let o = r.handle(0, 0, &na);
        assert_eq!(o.reply, None);
        assert_eq!(o.learned, Some((peer_v6().into(), PEER)));
        let ns = neighbour_solicit(PEER, peer_v6(), n3_v6());
        // Wrong hop limit, bad checksum, zero-length option: malformed, no reply.
        let mut bad_hl = ns.clone();
        bad_hl[14 + 7] = 64;
        let mut bad_sum = ns.clone();
        bad_sum[14 + 40 + 2] ^= 1;
        let mut zero_opt = ns.clone();
        let n = zero_opt.len();
        zero_opt[n - 7] = 0;
        for f in [&bad_hl, &bad_sum, &zero_opt] {
            assert_eq!(r.handle(0, 0, f).reply, None);
        }
        assert_eq!(r.stats().malformed, 3);
        // Every prefix of every frame, and a port we do not have: no panic, no reply.
        let arp = arp_request(PEER, PEER_V4, N3_V4);
        for f in [&ns, &na, &arp] {
            for i in 0..f.len() {
                assert_eq!(r.handle(0, 0, &f[..i]).reply, None, "prefix {i}");
            }
        }
        assert_eq!(r.handle(0, 9, &arp).reply, None);
        // NS for an address that is not ours: learnt, not answered.
        let o = r.handle(
            0,
            0,
            &neighbour_solicit(PEER, peer_v6(), "2001:db8::99".parse().unwrap()),
        );
        assert_eq!(o.reply, None);
    }
}
