//! The per-packet UPF path (TS 23.501 section 5.8.2, TS 29.244 section 5.2) as a runtime
//! stage: GTP-U termination and path management (TS 29.281), PDR lookup, QER gating and
//! MBR metering (RFC 2698 TrTCM), URR volume counting, FAR forwarding with GTP-U
//! encapsulation / decapsulation and N6 routing.
//!
//! # Classification
//! * L2: multicast (ARP broadcasts, IPv6 ND) and ARP go to the control core; unicast to
//!   another MAC is dropped (`l2_not_for_us`) unless the stage is promiscuous.
//! * UDP to port 2152 addressed to one of the tables' `local_v4` / `local_v6` is GTP-U;
//!   anything else to one of our addresses (local or N6) goes to the control core (exception
//!   path), as do outer IPv4 fragments to us (no reassembly on the fast path). All other
//!   traffic is N6 downlink traffic, looked up by destination UE address.
//! * GTP-U: Echo Request is answered in place (Echo Response, Recovery 0); Echo Response and
//!   received Error Indications go to the control core; End Marker is counted and dropped;
//!   G-PDUs are looked up by TEID; an unknown TEID is answered with an Error Indication
//!   (rate-limited, see below).
//!
//! # Forwarding
//! Uplink with Outer Header Removal strips Ethernet / IP / UDP / GTP-U (with extension
//! headers) and either re-encapsulates (N9 relay, UL PDU Session Container, inner TTL left
//! alone: a relay is not an IP hop) or routes the inner packet on N6 (TTL / hop limit
//! decremented, RFC 1812 section 5.3.1). An uplink PDR without Outer Header Removal is not
//! supported and dropped as `ul_without_decap`. Downlink decrements the inner TTL / hop limit
//! and encapsulates toward `far.outer` (DL PDU Session Container with the QER's QFI, else
//! the PDR's); a downlink FAR without an outer header routes the packet on N6. Egress frames
//! are untagged. The outer UDP source port is a hash of the inner 5-tuple (RFC 9300 style
//! entropy for ECMP), in 49152..=65535.
//!
//! # MTU policy
//! `UpfConfig::mtu` bounds the outer IP packet sent. A downlink packet that would exceed it
//! after encapsulation (or, routed on N6, on its own) is not fragmented: an inner IPv6 packet
//! is answered with ICMPv6 Packet Too Big (RFC 4443 section 3.2) and an inner IPv4 packet
//! with DF with ICMPv4 Fragmentation Needed (RFC 1191 section 4), both carrying
//! MTU = `mtu` minus the encapsulation overhead (44 bytes over IPv4, 64 over IPv6), sent
//! from our N6 address (`n6_v4` / `n6_v6`) toward the sender, quoting as much of the packet
//! as fits (576 / 1280 bytes), built in place in the packet's buffer. An inner IPv4 packet
//! without DF, a packet that is itself an ICMP error, a packet when we have no N6 address of
//! its family, and replies over the rate limit are dropped as `mtu_exceeded`. Uplink packets
//! shrink on decapsulation; an uplink packet that would still exceed the MTU (an N9 relay of
//! a full-size packet) is dropped as `mtu_exceeded` without ICMP.
//!
//! # Rate limit
//! Error Indications and ICMP errors share one token bucket per worker filled at
//! `error_indication_pps` with a depth of a tenth of that (at least 1), so a flood of unknown
//! TEIDs costs the peer at most that many replies per second.
//!
//! # Counting
//! Every drop has a named reason. Per direction x QFI, `drops` counts every drop made once
//! the QFI is known (uplink: the PDU Session Container's QFI, else 0; downlink: the QFI to be
//! marked, known after the PDR match). Volumes (URR, QFI bytes, meter) are the inner IP
//! packet length (TS 29.244 section 5.2.2.2: the T-PDU, without GTP-U encapsulation).

use crate::buffer::PacketBuf;
use crate::io::PortId;
use crate::qos::{Colour, QfiMap, TokenBucket, TrTcm};
use crate::runtime::{Batch, Context, Disposition, DropReason, Reader, Reasons, Stage};
use crate::stages::l3fwd::{NextHop, RouteTable};
use crate::upf::encap::{self, Psc};
use crate::upf::stats::{Total, UpfStats};
use crate::upf::tables::{
    Direction, FarAction, FastPath, FlowFilter, IpPrefix, KeySlot, MeterRef, OuterHeader, PdrRule,
    Shard, UpfTables, MAX_QERS_PER_PDR, MAX_URRS_PER_PDR, NONE,
};
use peregrine_wire::ethernet::{self, ethertype, Address as MacAddr};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{
    gtpu, gtpu_msg, icmpv4, ipv4, ipv6, ipv6ext, tcp, udp, vlan, Error as WireError,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// Configuration of one UPF stage (the same for every worker).
#[derive(Debug, Clone)]
pub struct UpfConfig {
    /// Largest outer IP packet sent on egress (default 1500).
    pub mtu: u16,
    /// Per-worker rate limit for Error Indications and ICMP errors, per second (default 100).
    pub error_indication_pps: u32,
    /// Our N6 address: the source of ICMP errors toward N6 hosts.
    pub n6_v4: Option<Ipv4Addr>,
    pub n6_v6: Option<Ipv6Addr>,
    /// QFI -> egress queue.
    pub qfi_map: QfiMap,
    /// Route frames whatever their destination MAC (replays of foreign captures).
    pub promiscuous: bool,
    /// Per-worker meter array size, fixed at construction.
    pub max_meter_slots: u32,
}

impl Default for UpfConfig {
    fn default() -> Self {
        UpfConfig {
            mtu: 1500,
            error_indication_pps: 100,
            n6_v4: None,
            n6_v6: None,
            qfi_map: QfiMap::default(),
            promiscuous: false,
            max_meter_slots: 4096,
        }
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
    l4_malformed: DropReason,
    gtpu_malformed: DropReason,
    gtpu_unsupported_message: DropReason,
    end_marker: DropReason,
    gtpu_unknown_teid: DropReason,
    inner_malformed: DropReason,
    uplink_no_pdr: DropReason,
    downlink_no_session: DropReason,
    downlink_no_pdr: DropReason,
    gate_closed: DropReason,
    mbr_exceeded: DropReason,
    far_drop: DropReason,
    ul_without_decap: DropReason,
    no_route: DropReason,
    ttl_exceeded: DropReason,
    mtu_exceeded: DropReason,
    encap_failed: DropReason,
    reply_failed: DropReason,
}

impl Drops {
    fn register(r: &mut Reasons) -> Drops {
        Drops {
            l2_truncated: r.register("l2_truncated"),
            l2_not_for_us: r.register("l2_not_for_us"),
            unsupported_ethertype: r.register("unsupported_ethertype"),
            ipv4_truncated: r.register("ipv4_truncated"),
            ipv4_malformed: r.register("ipv4_malformed"),
            ipv4_bad_checksum: r.register("ipv4_bad_checksum"),
            ipv6_truncated: r.register("ipv6_truncated"),
            ipv6_malformed: r.register("ipv6_malformed"),
            l4_malformed: r.register("l4_malformed"),
            gtpu_malformed: r.register("gtpu_malformed"),
            gtpu_unsupported_message: r.register("gtpu_unsupported_message"),
            end_marker: r.register("end_marker"),
            gtpu_unknown_teid: r.register("gtpu_unknown_teid"),
            inner_malformed: r.register("inner_malformed"),
            uplink_no_pdr: r.register("uplink_no_pdr"),
            downlink_no_session: r.register("downlink_no_session"),
            downlink_no_pdr: r.register("downlink_no_pdr"),
            gate_closed: r.register("gate_closed"),
            mbr_exceeded: r.register("mbr_exceeded"),
            far_drop: r.register("far_drop"),
            ul_without_decap: r.register("ul_without_decap"),
            no_route: r.register("no_route"),
            ttl_exceeded: r.register("ttl_exceeded"),
            mtu_exceeded: r.register("mtu_exceeded"),
            encap_failed: r.register("encap_failed"),
            reply_failed: r.register("reply_failed"),
        }
    }
}

/// Per-worker meter state of one slot.
#[derive(Debug, Clone)]
struct MeterSlot {
    live: bool,
    generation: u32,
    tcm: TrTcm,
}

/// The UPF stage. See the module docs.
#[derive(Debug)]
pub struct Upf {
    tables: Reader<UpfTables>,
    routes: Reader<RouteTable>,
    port_macs: Vec<MacAddr>,
    cfg: UpfConfig,
    stats: Arc<UpfStats>,
    drops: Drops,
    meters: Vec<MeterSlot>,
    replies: TokenBucket,
}

impl Upf {
    /// `port_macs[p]` is port `p`'s own MAC address. `stats` is this worker's counters.
    pub fn new(
        tables: Reader<UpfTables>,
        routes: Reader<RouteTable>,
        port_macs: Vec<MacAddr>,
        cfg: UpfConfig,
        stats: Arc<UpfStats>,
        reasons: &mut Reasons,
    ) -> Upf {
        let pps = u64::from(cfg.error_indication_pps);
        let burst = if pps == 0 { 0 } else { (pps / 10).max(1) };
        let meters = vec![
            MeterSlot {
                live: false,
                generation: 0,
                tcm: TrTcm::unlimited(),
            };
            cfg.max_meter_slots as usize
        ];
        Upf {
            tables,
            routes,
            port_macs,
            stats,
            drops: Drops::register(reasons),
            meters,
            replies: TokenBucket::new(pps, burst, 0),
            cfg,
        }
    }

    /// This worker's counters.
    pub fn stats(&self) -> &Arc<UpfStats> {
        &self.stats
    }
}

impl<B: PacketBuf> Stage<B> for Upf {
    fn name(&self) -> &'static str {
        "upf"
    }

    fn idle(&mut self) {
        self.tables.get();
        self.routes.get();
    }

    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        let now = cx.now_ns();
        let rx = batch.rx_port;
        let Upf {
            tables,
            routes,
            port_macs,
            cfg,
            stats,
            drops,
            meters,
            replies,
        } = self;
        let mut w = Work {
            t: tables.get(),
            r: routes.get(),
            macs: port_macs,
            cfg,
            stats,
            d: *drops,
            meters,
            replies,
            now,
            rx,
            memo_fam: 2,
            memo_dst: 0,
            memo_nh: None,
        };
        // Three passes per chunk of the batch so the chunk's cache misses overlap instead of
        // queueing behind one packet at a time: parse every packet and prefetch its key's
        // table slot; look the slots up and prefetch the meter and usage lines they name;
        // then apply. Anything unusual takes the full per-packet path in pass 3.
        let n = batch.len();
        let mut base = 0;
        while base < n {
            let end = (base + CHUNK).min(n);
            let mut pre = [Pre::SLOW; CHUNK];
            for (i, pr) in (base..end).zip(pre.iter_mut()) {
                if batch.disposition(i).is_continue() {
                    *pr = w.pre(batch.pkts[i].data());
                }
            }
            // The shard headers were prefetched in pass 1; now their slots.
            for pr in pre.iter().take(end - base) {
                w.prefetch_slot(pr);
            }
            let mut hit: [Option<(&Shard, &KeySlot)>; CHUNK] = [None; CHUNK];
            for (pr, h) in pre.iter().zip(hit.iter_mut()).take(end - base) {
                *h = w.lookup(pr);
            }
            for i in base..end {
                if !batch.disposition(i).is_continue() {
                    continue;
                }
                let p = &mut batch.pkts[i];
                let d = match hit[i - base] {
                    Some((s, slot)) => w.resolved(p, &pre[i - base], s, slot),
                    None => w.packet(p),
                };
                batch.set_disposition(i, d);
            }
            base = end;
        }
    }
}

/// Packets per pass of [`Upf::process`]: enough in flight to overlap the misses, few enough
/// that the lines fetched in pass 1 are still cached in pass 3.
const CHUNK: usize = 32;

/// Ask the CPU to start loading the cache line holding `r`. A hint only: a prefetch never
/// faults and changes no architectural state.
#[inline(always)]
pub(crate) fn prefetch<T>(r: &T) {
    prefetch_addr((r as *const T).cast());
}

/// [`prefetch`] of a raw address (any address: it is never dereferenced).
#[inline(always)]
fn prefetch_addr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of the x86_64 baseline, and a prefetch only hints the cache:
        // it never faults (whatever the address) and reads or writes no program state.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// [`prefetch`] every cache line of `*r`.
#[inline(always)]
fn prefetch_all<T>(r: &T) {
    let p = (r as *const T).cast::<u8>();
    let mut off = 0;
    while off < std::mem::size_of::<T>() {
        prefetch_addr(p.wrapping_add(off));
        off += 64;
    }
}

/// What pass 1 learned about a packet that the common path can finish: the lookup key
/// (which map by `kind`), the received QFI and the inner (user) IP packet's offset and facts.
#[derive(Debug, Clone, Copy)]
struct Pre {
    kind: u8,
    qfi: Option<u8>,
    inner_off: usize,
    key: u64,
    inner: Flow,
}

impl Pre {
    /// Not for the common path (or not active): pass 3 runs [`Work::packet`].
    const SLOW: Pre = Pre {
        kind: KIND_SLOW,
        qfi: None,
        inner_off: 0,
        key: 0,
        inner: Flow {
            v6: false,
            src: 0,
            dst: 0,
            proto: 0,
            ports: None,
            icmp_type: None,
            l4: 0,
            len: 0,
            df: false,
            frag: false,
        },
    };
}

const KIND_SLOW: u8 = 0;
/// G-PDU by TEID.
const KIND_UL: u8 = 1;
/// N6 packet by UE IPv4 address.
const KIND_DL4: u8 = 2;
/// N6 packet by UE IPv6 /64 prefix.
const KIND_DL6: u8 = 3;

/// An IP packet's header facts, from its checked views.
#[derive(Debug, Clone, Copy)]
struct Flow {
    v6: bool,
    /// Addresses; IPv4 in the low 32 bits.
    src: u128,
    dst: u128,
    /// Upper-layer protocol.
    proto: u8,
    /// Ports for TCP/UDP in a first (or no) fragment.
    ports: Option<(u16, u16)>,
    /// ICMP / ICMPv6 type, if the packet is one (and not a later fragment).
    icmp_type: Option<u8>,
    /// Offset of the upper-layer header from the IP header.
    l4: usize,
    /// Whole IP packet length (from the header).
    len: usize,
    df: bool,
    /// A fragment (IPv4 MF or offset; IPv6 Fragment header).
    frag: bool,
}

#[derive(Debug, Clone, Copy)]
enum IpErr {
    V4Truncated,
    V4Malformed,
    V4Checksum,
    V6Truncated,
    V6Malformed,
    L4,
}

/// Parse the IP packet at the start of `b` (IPv6 if `v6`), with its extension chain and
/// upper-layer ports.
fn parse_ip(b: &[u8], v6: bool, verify_csum: bool) -> Result<Flow, IpErr> {
    let (mut f, l4_end) = if v6 {
        let ip = match ipv6::Packet::new_checked(b) {
            Ok(p) => p,
            Err(WireError::Truncated) => return Err(IpErr::V6Truncated),
            Err(_) => return Err(IpErr::V6Malformed),
        };
        let len = ip.total_len();
        let payload = &b[ipv6::HEADER_LEN..len];
        let (proto, off, frag, later) =
            if ip.next_header() == ip_protocol::UDP || ip.next_header() == ip_protocol::TCP {
                (ip.next_header(), 0, false, false)
            } else {
                let c = ipv6ext::parse_chain(ip.next_header(), payload)
                    .map_err(|_| IpErr::V6Malformed)?;
                (
                    c.upper,
                    c.upper_offset,
                    c.fragment.is_some(),
                    c.later_fragment,
                )
            };
        let f = Flow {
            v6: true,
            src: u128::from(ip.src_addr()),
            dst: u128::from(ip.dst_addr()),
            proto,
            ports: None,
            icmp_type: None,
            l4: ipv6::HEADER_LEN + off,
            len,
            df: true,
            frag,
        };
        (f, if later { None } else { Some(len) })
    } else {
        let ip = match ipv4::Packet::new_checked(b) {
            Ok(p) => p,
            Err(WireError::Truncated) => return Err(IpErr::V4Truncated),
            Err(_) => return Err(IpErr::V4Malformed),
        };
        if verify_csum && !ip.verify_checksum() {
            return Err(IpErr::V4Checksum);
        }
        let len = ip.total_len() as usize;
        let f = Flow {
            v6: false,
            src: u128::from(u32::from(ip.src_addr())),
            dst: u128::from(u32::from(ip.dst_addr())),
            proto: ip.protocol(),
            ports: None,
            icmp_type: None,
            l4: ip.header_len(),
            len,
            df: ip.dont_frag(),
            frag: ip.is_fragment(),
        };
        (f, (ip.frag_offset() == 0).then_some(len))
    };
    if let Some(end) = l4_end {
        let l4 = b.get(f.l4..end).unwrap_or_default();
        match f.proto {
            ip_protocol::UDP => {
                let u = udp::Packet::new_checked(l4).map_err(|_| IpErr::L4)?;
                f.ports = Some((u.src_port(), u.dst_port()));
            }
            ip_protocol::TCP => {
                let t = tcp::Packet::new_checked(l4).map_err(|_| IpErr::L4)?;
                f.ports = Some((t.src_port(), t.dst_port()));
            }
            ip_protocol::ICMP | ip_protocol::IPV6_ICMP => f.icmp_type = l4.first().copied(),
            _ => {}
        }
    }
    Ok(f)
}

/// Whether `f` is an ICMP error message (never answered with another, RFC 1122 section
/// 3.2.2, RFC 4443 section 2.4 (e)).
fn is_icmp_error(f: &Flow) -> bool {
    match (f.v6, f.proto, f.icmp_type) {
        (false, ip_protocol::ICMP, Some(t)) => matches!(
            t,
            icmpv4::msg_type::DST_UNREACHABLE
                | icmpv4::msg_type::REDIRECT
                | icmpv4::msg_type::TIME_EXCEEDED
                | icmpv4::msg_type::PARAM_PROBLEM
                | 4
        ),
        (true, ip_protocol::IPV6_ICMP, Some(t)) => t < 128,
        _ => false,
    }
}

#[inline]
fn prefix_match(p: &IpPrefix, v6: bool, a: u128) -> bool {
    match *p {
        IpPrefix::V4(net, len) => {
            if v6 {
                return false;
            }
            let len = u32::from(len.min(32));
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            (a as u32) & mask == u32::from(net) & mask
        }
        IpPrefix::V6(net, len) => {
            if !v6 {
                return false;
            }
            let len = u32::from(len.min(128));
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            a & mask == u128::from(net) & mask
        }
    }
}

/// TS 29.212 section 5.4.2 IP filter match against the inner 5-tuple; a filter with port
/// ranges never matches a packet without ports (ICMP, later fragments).
fn filter_match(f: &FlowFilter, fl: &Flow) -> bool {
    if f.proto.is_some_and(|p| p != fl.proto) {
        return false;
    }
    if f.src.is_some_and(|p| !prefix_match(&p, fl.v6, fl.src))
        || f.dst.is_some_and(|p| !prefix_match(&p, fl.v6, fl.dst))
    {
        return false;
    }
    if f.src_ports.is_none() && f.dst_ports.is_none() {
        return true;
    }
    let Some((sp, dp)) = fl.ports else {
        return false;
    };
    f.src_ports.is_none_or(|(lo, hi)| (lo..=hi).contains(&sp))
        && f.dst_ports.is_none_or(|(lo, hi)| (lo..=hi).contains(&dp))
}

/// The first PDR of the candidate range (precedence order, TS 29.244 section 5.2.1) whose
/// direction, QFI and SDF filters match.
fn select_pdr<'s>(
    s: &'s Shard,
    range: (u32, u32),
    dir: Direction,
    qfi: Option<u8>,
    fl: &Flow,
) -> Option<&'s PdrRule> {
    let order = s.pdr_order.get(range.0 as usize..range.1 as usize)?;
    order.iter().find_map(|&i| {
        let pdr = s.pdrs.get(i as usize)?;
        if pdr.direction != dir {
            return None;
        }
        // Only GTP-U packets carry a QFI to match; a downlink PDR's QFI is the one to mark.
        if dir == Direction::Uplink && pdr.qfi.is_some() && pdr.qfi != qfi {
            return None;
        }
        let (lo, hi) = pdr.filters;
        if lo == hi {
            return Some(pdr);
        }
        let fs = s.filters.get(lo as usize..hi as usize)?;
        fs.iter().any(|f| filter_match(f, fl)).then_some(pdr)
    })
}

/// Outer UDP source port from the inner 5-tuple: entropy for ECMP / RSS on the path to the
/// peer (as RFC 9300 section 5.3 does for LISP), kept in the dynamic range 49152..=65535.
#[inline]
fn flow_port(fl: &Flow) -> u16 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let (sp, dp) = fl.ports.unwrap_or((0, 0));
    let mut h = (fl.src as u64 ^ (fl.src >> 64) as u64).wrapping_mul(K);
    h = (h ^ fl.dst as u64 ^ (fl.dst >> 64) as u64).wrapping_mul(K);
    h = (h ^ (u64::from(fl.proto) << 32 | u64::from(sp) << 16 | u64::from(dp))).wrapping_mul(K);
    0xC000 | ((h >> 50) as u16 & 0x3FFF)
}

/// One batch's view of the stage state.
struct Work<'a> {
    t: &'a UpfTables,
    r: &'a RouteTable,
    macs: &'a [MacAddr],
    cfg: &'a UpfConfig,
    stats: &'a UpfStats,
    d: Drops,
    meters: &'a mut [MeterSlot],
    replies: &'a mut TokenBucket,
    now: u64,
    rx: PortId,
    /// The last route looked up in this batch (the route table cannot change within one):
    /// family (0 IPv4, 1 IPv6, 2 none yet), destination, result.
    memo_fam: u8,
    memo_dst: u128,
    memo_nh: Option<NextHop>,
}

/// The flattened actions for one packet: from a [`FastPath`] record or from a matched PDR
/// with its QERs and FAR.
#[derive(Debug, Clone, Copy)]
struct Plan {
    qfi: u8,
    gate_closed: bool,
    meters: [MeterRef; MAX_QERS_PER_PDR],
    meter_qers: [u32; MAX_QERS_PER_PDR],
    urrs: [u32; MAX_URRS_PER_PDR],
    /// `None`: the FAR index was dangling (dropped as `far_drop`).
    action: Option<FarAction>,
    remove_gtpu: bool,
    outer: Option<OuterHeader>,
}

impl<'a> Work<'a> {
    #[inline]
    fn drop_q(&self, dir: Direction, qfi: u8, r: DropReason) -> Disposition {
        self.stats.qfi_drop(dir, qfi);
        Disposition::drop_as(r)
    }

    fn our_mac(&self, port: PortId) -> MacAddr {
        self.macs.get(port as usize).copied().unwrap_or_default()
    }

    /// Take a reply token (Error Indication, ICMP error).
    fn take_reply_token(&mut self) -> bool {
        self.replies.refill(self.now);
        if self.replies.has(1) {
            self.replies.take(1);
            true
        } else {
            self.stats.count(Total::RepliesRateLimited);
            false
        }
    }

    fn route(&mut self, v6: bool, dst: u128) -> Option<NextHop> {
        // One-entry memo: most packets of a burst go to one N6 server or one gNB.
        if self.memo_fam == u8::from(v6) && self.memo_dst == dst {
            return self.memo_nh;
        }
        let nh = if v6 {
            self.r.v6.lookup(dst)
        } else {
            self.r.v4.lookup(dst as u32)
        };
        self.memo_fam = u8::from(v6);
        self.memo_dst = dst;
        self.memo_nh = nh;
        nh
    }

    fn outer_err(&self, e: IpErr) -> Disposition {
        let d = &self.d;
        Disposition::drop_as(match e {
            IpErr::V4Truncated => d.ipv4_truncated,
            IpErr::V4Malformed => d.ipv4_malformed,
            IpErr::V4Checksum => d.ipv4_bad_checksum,
            IpErr::V6Truncated => d.ipv6_truncated,
            IpErr::V6Malformed => d.ipv6_malformed,
            IpErr::L4 => d.l4_malformed,
        })
    }

    /// Pass 1 (read-only): the checks of [`Self::packet`] up to the table lookup for the
    /// common cases (a G-PDU to one of our addresses; an N6 packet to a UE), with the
    /// lookup key, and a prefetch of the key's slot. Anything else (errors, path
    /// management, control traffic) is [`Pre::SLOW`].
    fn pre(&self, data: &[u8]) -> Pre {
        let Ok(frame) = ethernet::Frame::new_checked(data) else {
            return Pre::SLOW;
        };
        let dst = frame.dst_addr();
        if dst.is_multicast()
            || (!self.cfg.promiscuous && self.macs.get(self.rx as usize) != Some(&dst))
        {
            return Pre::SLOW;
        }
        let Ok((l3, et)) = vlan::l3_offset(data) else {
            return Pre::SLOW;
        };
        let v6 = match et {
            ethertype::IPV4 => false,
            ethertype::IPV6 => true,
            _ => return Pre::SLOW,
        };
        let Ok(f) = parse_ip(&data[l3..], v6, true) else {
            return Pre::SLOW;
        };
        let local = if v6 {
            self.t.local_v6.contains(&Ipv6Addr::from(f.dst))
        } else {
            self.t.local_v4.contains(&Ipv4Addr::from(f.dst as u32))
        };
        let pre = if local {
            if f.frag || f.proto != ip_protocol::UDP || f.ports.map(|p| p.1) != Some(gtpu::PORT) {
                return Pre::SLOW;
            }
            let l4 = l3 + f.l4;
            let ulen = udp::Packet::new_unchecked(&data[l4..]).length() as usize;
            let gtp_off = l4 + udp::HEADER_LEN;
            let Some(Ok(g)) = data.get(gtp_off..l4 + ulen).map(gtpu::Header::new_checked) else {
                return Pre::SLOW;
            };
            if g.msg_type() != gtpu::msg_type::G_PDU {
                return Pre::SLOW;
            }
            let qfi = match g.pdu_session() {
                Ok(r) => r.map(|r| r.qfi()),
                Err(WireError::Unsupported) => None,
                Err(_) => return Pre::SLOW,
            };
            let inner_off = gtp_off + g.header_len();
            let Some(inner_bytes) = data.get(inner_off..gtp_off + g.total_len()) else {
                return Pre::SLOW;
            };
            let inner = match inner_bytes.first().map(|b| b >> 4) {
                Some(4) => parse_ip(inner_bytes, false, false),
                Some(6) => parse_ip(inner_bytes, true, false),
                _ => return Pre::SLOW,
            };
            let Ok(inner) = inner else {
                return Pre::SLOW;
            };
            let teid = g.teid();
            prefetch(&self.t.teid_shard(teid).by_teid);
            Pre {
                kind: KIND_UL,
                qfi,
                inner_off,
                key: u64::from(teid),
                inner,
            }
        } else {
            let n6_own = if v6 {
                self.cfg.n6_v6.map(u128::from) == Some(f.dst)
            } else {
                self.cfg.n6_v4.map(|a| u128::from(u32::from(a))) == Some(f.dst)
            };
            if n6_own || (v6 && Ipv6Addr::from(f.dst).is_multicast()) {
                return Pre::SLOW;
            }
            // Encapsulation writes up to 78 bytes in front of the frame: a line the feed
            // did not touch. Start loading it now.
            prefetch_addr(data.as_ptr().wrapping_sub(1));
            prefetch_addr(data.as_ptr().wrapping_sub(80));
            let (kind, key) = if v6 {
                let key = (f.dst >> 64) as u64;
                prefetch(&self.t.ue_v6_shard(key).by_ue_v6);
                (KIND_DL6, key)
            } else {
                let key = f.dst as u32;
                prefetch(&self.t.ue_v4_shard(key).by_ue_v4);
                (KIND_DL4, u64::from(key))
            };
            Pre {
                kind,
                qfi: None,
                inner_off: l3,
                key,
                inner: f,
            }
        };
        pre
    }

    /// Pass 1b: start loading the key's slot (the shard header was prefetched in pass 1).
    fn prefetch_slot(&self, pre: &Pre) {
        let t = self.t;
        match pre.kind {
            KIND_UL => t
                .teid_shard(pre.key as u32)
                .by_teid
                .prefetch(pre.key as u32),
            KIND_DL4 => t
                .ue_v4_shard(pre.key as u32)
                .by_ue_v4
                .prefetch(pre.key as u32),
            KIND_DL6 => t.ue_v6_shard(pre.key).by_ue_v6.prefetch(pre.key),
            _ => {}
        }
    }

    /// Pass 2: the key's slot (its line was prefetched in pass 1), and a prefetch of the
    /// meter and usage-counter lines its fast-path record names. `None` for a slow packet
    /// or a key without rules (pass 3 then runs the full path, which reports it).
    fn lookup(&self, pre: &Pre) -> Option<(&'a Shard, &'a KeySlot)> {
        let t = self.t;
        let (s, slot) = match pre.kind {
            KIND_UL => {
                let s = t.teid_shard(pre.key as u32);
                (s, s.by_teid.slot(pre.key as u32)?)
            }
            KIND_DL4 => {
                let s = t.ue_v4_shard(pre.key as u32);
                (s, s.by_ue_v4.slot(pre.key as u32)?)
            }
            KIND_DL6 => {
                let s = t.ue_v6_shard(pre.key);
                (s, s.by_ue_v6.slot(pre.key)?)
            }
            _ => return None,
        };
        if let Some(f) = slot.fast() {
            for m in f.meters.iter().filter(|m| m.slot != NONE) {
                if let Some(m) = self.meters.get(m.slot as usize) {
                    prefetch_all(m);
                }
            }
            for &u in f.urrs.iter().filter(|&&u| u != NONE) {
                self.stats.urr_prefetch(u);
            }
        }
        Some((s, slot))
    }

    /// Pass 3 of a packet pass 1 classified and pass 2 found rules for: the fast-path
    /// record if the key has one (and, uplink, the PDR's QFI matches), else the PDR
    /// selection of the general path.
    fn resolved<B: PacketBuf>(
        &mut self,
        p: &mut B,
        pre: &Pre,
        s: &Shard,
        slot: &KeySlot,
    ) -> Disposition {
        let dir = if pre.kind == KIND_UL {
            Direction::Uplink
        } else {
            Direction::Downlink
        };
        if let Some(f) = slot.fast() {
            let pdr_qfi = (f.pdr_qfi != FastPath::NO_QFI).then_some(f.pdr_qfi);
            let qfi = match dir {
                Direction::Uplink => pre.qfi.or(pdr_qfi).unwrap_or(0),
                Direction::Downlink => f.mark_qfi,
            };
            if dir == Direction::Downlink || pdr_qfi.is_none() || pdr_qfi == pre.qfi {
                let plan = Plan {
                    qfi,
                    gate_closed: false,
                    meters: f.meters,
                    meter_qers: f.meter_qers,
                    urrs: f.urrs,
                    action: Some(FarAction::Forward),
                    remove_gtpu: dir == Direction::Uplink,
                    outer: f.outer(),
                };
                return self.execute(p, s, &plan, dir, pre.inner_off, &pre.inner);
            }
        }
        match select_pdr(s, slot.range(), dir, pre.qfi, &pre.inner) {
            Some(pdr) => self.apply(p, s, pdr, dir, pre.qfi, pre.inner_off, &pre.inner),
            None if dir == Direction::Uplink => {
                self.drop_q(dir, pre.qfi.unwrap_or(0), self.d.uplink_no_pdr)
            }
            None => Disposition::drop_as(self.d.downlink_no_pdr),
        }
    }

    fn packet<B: PacketBuf>(&mut self, p: &mut B) -> Disposition {
        let d = self.d;
        let data = p.data();
        let Ok(frame) = ethernet::Frame::new_checked(data) else {
            return Disposition::drop_as(d.l2_truncated);
        };
        let dst = frame.dst_addr();
        if dst.is_multicast() {
            return Disposition::TO_CONTROL;
        }
        if !self.cfg.promiscuous && self.macs.get(self.rx as usize) != Some(&dst) {
            return Disposition::drop_as(d.l2_not_for_us);
        }
        let Ok((l3, et)) = vlan::l3_offset(data) else {
            return Disposition::drop_as(d.l2_truncated);
        };
        let v6 = match et {
            ethertype::IPV4 => false,
            ethertype::IPV6 => true,
            ethertype::ARP => return Disposition::TO_CONTROL,
            _ => return Disposition::drop_as(d.unsupported_ethertype),
        };
        let f = match parse_ip(&data[l3..], v6, true) {
            Ok(f) => f,
            Err(e) => return self.outer_err(e),
        };
        let local = if v6 {
            let a = Ipv6Addr::from(f.dst);
            self.t.local_v6.contains(&a)
        } else {
            let a = Ipv4Addr::from(f.dst as u32);
            self.t.local_v4.contains(&a)
        };
        if local {
            if f.proto == ip_protocol::UDP && !f.frag {
                if let Some((_, gtpu::PORT)) = f.ports {
                    return self.gtpu(p, l3, &f);
                }
            }
            return Disposition::TO_CONTROL;
        }
        let n6_own = if v6 {
            self.cfg.n6_v6.map(u128::from) == Some(f.dst)
        } else {
            self.cfg.n6_v4.map(|a| u128::from(u32::from(a))) == Some(f.dst)
        };
        if n6_own || (v6 && Ipv6Addr::from(f.dst).is_multicast()) {
            return Disposition::TO_CONTROL;
        }
        self.downlink(p, l3, &f)
    }

    fn downlink<B: PacketBuf>(&mut self, p: &mut B, l3: usize, f: &Flow) -> Disposition {
        let (shard, range) = if f.v6 {
            let key = (f.dst >> 64) as u64;
            let s = self.t.ue_v6_shard(key);
            (s, s.by_ue_v6.get(&key).copied())
        } else {
            let key = f.dst as u32;
            let s = self.t.ue_v4_shard(key);
            (s, s.by_ue_v4.get(&key).copied())
        };
        let Some(range) = range else {
            return Disposition::drop_as(self.d.downlink_no_session);
        };
        let Some(pdr) = select_pdr(shard, range, Direction::Downlink, None, f) else {
            return Disposition::drop_as(self.d.downlink_no_pdr);
        };
        self.apply(p, shard, pdr, Direction::Downlink, None, l3, f)
    }

    fn gtpu<B: PacketBuf>(&mut self, p: &mut B, l3: usize, f: &Flow) -> Disposition {
        let d = self.d;
        let l4 = l3 + f.l4;
        let data = p.data();
        let ulen = udp::Packet::new_unchecked(&data[l4..]).length() as usize;
        let gtp_off = l4 + udp::HEADER_LEN;
        let Some(msg) = data.get(gtp_off..l4 + ulen) else {
            return Disposition::drop_as(d.l4_malformed);
        };
        let Ok(g) = gtpu::Header::new_checked(msg) else {
            return Disposition::drop_as(d.gtpu_malformed);
        };
        match g.msg_type() {
            gtpu::msg_type::G_PDU => {}
            gtpu::msg_type::ECHO_REQUEST => {
                let seq = g.seq_number().unwrap_or(0);
                return self.echo_reply(p, l3, l4, f, seq);
            }
            gtpu::msg_type::ECHO_RESPONSE | gtpu::msg_type::SUPPORTED_EXT_HEADERS_NOTIFICATION => {
                return Disposition::TO_CONTROL
            }
            gtpu::msg_type::ERROR_INDICATION => {
                self.stats.count(Total::ErrorIndicationsReceived);
                return Disposition::TO_CONTROL;
            }
            gtpu::msg_type::END_MARKER => {
                self.stats.count(Total::EndMarkersReceived);
                return Disposition::drop_as(d.end_marker);
            }
            _ => return Disposition::drop_as(d.gtpu_unsupported_message),
        }
        let teid = g.teid();
        let qfi = match g.pdu_session() {
            Ok(r) => r.map(|r| r.qfi()),
            // An unknown PDU type: no QFI.
            Err(WireError::Unsupported) => None,
            Err(_) => return Disposition::drop_as(d.gtpu_malformed),
        };
        let sq = qfi.unwrap_or(0);
        let inner_off = gtp_off + g.header_len();
        let inner_end = gtp_off + g.total_len();
        let shard = self.t.teid_shard(teid);
        let Some(&range) = shard.by_teid.get(&teid) else {
            return self.error_indication(p, l3, l4, f, gtp_off, teid, sq);
        };
        let inner_bytes = &data[inner_off..inner_end];
        let inner = match inner_bytes.first().map(|b| b >> 4) {
            Some(4) => parse_ip(inner_bytes, false, false),
            Some(6) => parse_ip(inner_bytes, true, false),
            _ => Err(IpErr::V4Malformed),
        };
        let Ok(inner) = inner else {
            return self.drop_q(Direction::Uplink, sq, d.inner_malformed);
        };
        let Some(pdr) = select_pdr(shard, range, Direction::Uplink, qfi, &inner) else {
            return self.drop_q(Direction::Uplink, sq, d.uplink_no_pdr);
        };
        self.apply(p, shard, pdr, Direction::Uplink, qfi, inner_off, &inner)
    }

    /// Echo Response in place (TS 29.281 section 7.2.2): same sequence number, Recovery IE
    /// with restart counter 0, to the request's source port from 2152 (section 4.4.2.2).
    fn echo_reply<B: PacketBuf>(
        &mut self,
        p: &mut B,
        l3: usize,
        l4: usize,
        f: &Flow,
        seq: u16,
    ) -> Disposition {
        let msg = gtpu_msg::Repr::echo_response(seq);
        let gtp_off = l4 + udp::HEADER_LEN;
        let n = msg.buffer_len();
        if encap::set_len(p, gtp_off + n).is_err()
            || msg.emit(&mut p.data_mut()[gtp_off..]).is_err()
        {
            return Disposition::drop_as(self.d.reply_failed);
        }
        let peer_port = f.ports.map_or(gtpu::PORT, |(s, _)| s);
        let mac = self.our_mac(self.rx);
        encap::reply_udp_in_place(p.data_mut(), l3, l4, f.v6, n, (gtpu::PORT, peer_port), mac);
        self.stats.count(Total::EchoReplies);
        Disposition::tx(self.rx)
    }

    /// Error Indication in place (TS 29.281 section 7.3.1): TEID 0, Tunnel Endpoint
    /// Identifier Data I = the unknown TEID, GTP-U Peer Address = the address the G-PDU was
    /// sent to (ours), to port 2152 of the sender (section 4.4.2.3). Rate-limited.
    #[allow(clippy::too_many_arguments)]
    fn error_indication<B: PacketBuf>(
        &mut self,
        p: &mut B,
        l3: usize,
        l4: usize,
        f: &Flow,
        gtp_off: usize,
        teid: u32,
        qfi: u8,
    ) -> Disposition {
        if !self.take_reply_token() {
            return self.drop_q(Direction::Uplink, qfi, self.d.gtpu_unknown_teid);
        }
        let ours = if f.v6 {
            IpAddr::V6(Ipv6Addr::from(f.dst))
        } else {
            IpAddr::V4(Ipv4Addr::from(f.dst as u32))
        };
        let msg = gtpu_msg::Repr::ErrorIndication {
            teid_data: teid,
            peer: ours,
        };
        let n = msg.buffer_len();
        if encap::set_len(p, gtp_off + n).is_err()
            || msg.emit(&mut p.data_mut()[gtp_off..]).is_err()
        {
            return Disposition::drop_as(self.d.reply_failed);
        }
        let mac = self.our_mac(self.rx);
        encap::reply_udp_in_place(p.data_mut(), l3, l4, f.v6, n, (gtpu::PORT, gtpu::PORT), mac);
        self.stats.count(Total::ErrorIndicationsSent);
        Disposition::tx(self.rx)
    }

    /// QERs, URRs and the FAR of the matched PDR. `inner_off` is where the user IP packet
    /// (`inner`) starts in the frame.
    #[allow(clippy::too_many_arguments)]
    fn apply<B: PacketBuf>(
        &mut self,
        p: &mut B,
        s: &Shard,
        pdr: &PdrRule,
        dir: Direction,
        pkt_qfi: Option<u8>,
        inner_off: usize,
        inner: &Flow,
    ) -> Disposition {
        // QFI: marked downlink (QER, else PDR), as received uplink.
        let mut qfi = match dir {
            Direction::Uplink => pkt_qfi.or(pdr.qfi).unwrap_or(0),
            Direction::Downlink => pdr.qfi.unwrap_or(0),
        };
        if dir == Direction::Downlink {
            if let Some(q) = pdr
                .qers
                .iter()
                .filter(|&&i| i != NONE)
                .find_map(|&i| s.qers.get(i as usize).and_then(|q| q.qfi))
            {
                qfi = q;
            }
        }
        let mut plan = Plan {
            qfi,
            gate_closed: false,
            meters: [MeterRef {
                slot: NONE,
                generation: 0,
            }; MAX_QERS_PER_PDR],
            meter_qers: [NONE; MAX_QERS_PER_PDR],
            urrs: [NONE; MAX_URRS_PER_PDR],
            action: None,
            remove_gtpu: pdr.remove_gtpu,
            outer: None,
        };
        let mut k = 0;
        for &qi in pdr.qers.iter().filter(|&&i| i != NONE) {
            let Some(q) = s.qers.get(qi as usize) else {
                continue;
            };
            plan.gate_closed |= !q.gate_open;
            if q.meter_cfg.is_some() {
                plan.meters[k] = q.meter;
                plan.meter_qers[k] = qi;
                k += 1;
            }
        }
        for (d, u) in plan.urrs.iter_mut().zip(&pdr.urrs) {
            *d = u.slot;
        }
        if let Some(far) = s.fars.get(pdr.far as usize) {
            plan.action = Some(far.action);
            plan.outer = far.outer;
        }
        self.execute(p, s, &plan, dir, inner_off, inner)
    }

    /// Gate, meters (TS 29.244 section 5.2.1: QERs), usage counting (URRs) and the FAR
    /// action of a resolved plan.
    fn execute<B: PacketBuf>(
        &mut self,
        p: &mut B,
        s: &Shard,
        plan: &Plan,
        dir: Direction,
        inner_off: usize,
        inner: &Flow,
    ) -> Disposition {
        let d = self.d;
        let len = inner.len as u64;
        let qfi = plan.qfi;
        if plan.gate_closed {
            return self.drop_q(dir, qfi, d.gate_closed);
        }
        let mut colour = None;
        for (mr, &qi) in plan.meters.iter().zip(&plan.meter_qers) {
            if mr.slot == NONE {
                break;
            }
            let Some(m) = self.meters.get_mut(mr.slot as usize) else {
                self.stats.count(Total::MeterSlotsExceeded);
                continue;
            };
            if !m.live || m.generation != mr.generation {
                // A new QER in this slot, or a new MBR: start from full buckets.
                let Some(cfg) = s.qers.get(qi as usize).and_then(|q| q.meter_cfg) else {
                    continue;
                };
                m.tcm = TrTcm::new(cfg, self.now).unwrap_or_else(|_| TrTcm::unlimited());
                m.generation = mr.generation;
                m.live = true;
            }
            let c = m.tcm.mark(self.now, len, Colour::Green);
            colour = colour.max(Some(c));
            if c == Colour::Red {
                break;
            }
        }
        if let Some(c) = colour {
            self.stats.qfi_colour(dir, qfi, c);
            if c == Colour::Red {
                return self.drop_q(dir, qfi, d.mbr_exceeded);
            }
        }
        for &u in plan.urrs.iter().filter(|&&u| u != NONE) {
            self.stats.urr_add(u, dir, len, self.now);
        }
        match plan.action {
            None | Some(FarAction::Drop) => return self.drop_q(dir, qfi, d.far_drop),
            Some(FarAction::Buffer { .. }) => {
                self.stats.count(Total::Buffered);
                return Disposition::TO_CONTROL;
            }
            Some(FarAction::Forward) => {}
        }
        if dir == Direction::Uplink && !plan.remove_gtpu {
            return self.drop_q(dir, qfi, d.ul_without_decap);
        }
        // Keep exactly the user packet: strip everything in front and any padding behind.
        if p.adj(inner_off).is_err() || encap::set_len(p, inner.len).is_err() {
            return self.drop_q(dir, qfi, d.inner_malformed);
        }
        let mtu = usize::from(self.cfg.mtu);
        if let Some(outer) = plan.outer {
            let ov6 = outer.peer.is_ipv6();
            let peer = match outer.peer {
                IpAddr::V4(a) => u128::from(u32::from(a)),
                IpAddr::V6(a) => u128::from(a),
            };
            let Some(nh) = self.route(ov6, peer) else {
                return self.drop_q(dir, qfi, d.no_route);
            };
            let overhead = encap::overhead(ov6);
            if inner.len + overhead > mtu {
                return self.too_big(p, dir, qfi, inner, mtu.saturating_sub(overhead));
            }
            let psc = if dir == Direction::Downlink {
                if !decrement_ttl(p.data_mut(), inner.v6) {
                    return self.drop_q(dir, qfi, d.ttl_exceeded);
                }
                Psc::Dl
            } else {
                Psc::Ul
            };
            let src_mac = self.our_mac(nh.port);
            if encap::encap_gtpu(p, &outer, qfi, psc, flow_port(inner), nh.mac, src_mac).is_err() {
                return self.drop_q(dir, qfi, d.encap_failed);
            }
            self.stats.qfi_sent(dir, qfi, len);
            Disposition::tx_queue(nh.port, self.cfg.qfi_map.qid(qfi))
        } else {
            let Some(nh) = self.route(inner.v6, inner.dst) else {
                return self.drop_q(dir, qfi, d.no_route);
            };
            if inner.len > mtu {
                return self.too_big(p, dir, qfi, inner, mtu);
            }
            if !decrement_ttl(p.data_mut(), inner.v6) {
                return self.drop_q(dir, qfi, d.ttl_exceeded);
            }
            let src_mac = self.our_mac(nh.port);
            let et = if inner.v6 {
                ethertype::IPV6
            } else {
                ethertype::IPV4
            };
            match p.prepend(ethernet::HEADER_LEN) {
                Ok(h) => encap::write_eth(h, nh.mac, src_mac, et),
                Err(_) => return self.drop_q(dir, qfi, d.encap_failed),
            }
            self.stats.qfi_sent(dir, qfi, len);
            Disposition::tx_queue(nh.port, self.cfg.qfi_map.qid(qfi))
        }
    }

    /// The MTU policy of the module docs. The packet holds exactly the user IP packet.
    fn too_big<B: PacketBuf>(
        &mut self,
        p: &mut B,
        dir: Direction,
        qfi: u8,
        inner: &Flow,
        report_mtu: usize,
    ) -> Disposition {
        let d = self.d;
        if dir == Direction::Uplink || (!inner.v6 && !inner.df) || is_icmp_error(inner) {
            return self.drop_q(dir, qfi, d.mtu_exceeded);
        }
        let from = if inner.v6 {
            self.cfg.n6_v6.map(IpAddr::V6)
        } else {
            self.cfg.n6_v4.map(IpAddr::V4)
        };
        let Some(from) = from else {
            return self.drop_q(dir, qfi, d.mtu_exceeded);
        };
        let Some(nh) = self.route(inner.v6, inner.src) else {
            return self.drop_q(dir, qfi, d.mtu_exceeded);
        };
        if !self.take_reply_token() {
            return self.drop_q(dir, qfi, d.mtu_exceeded);
        }
        let src_mac = self.our_mac(nh.port);
        let ok = match from {
            IpAddr::V4(a) => encap::icmpv4_frag_needed(
                p,
                a,
                Ipv4Addr::from(inner.src as u32),
                report_mtu.min(usize::from(u16::MAX)) as u16,
                nh.mac,
                src_mac,
            ),
            IpAddr::V6(a) => encap::icmpv6_too_big(
                p,
                a,
                Ipv6Addr::from(inner.src),
                report_mtu as u32,
                nh.mac,
                src_mac,
            ),
        };
        if ok.is_err() {
            return self.drop_q(dir, qfi, d.reply_failed);
        }
        // The user packet itself is not sent: count it as dropped for its QFI.
        self.stats.qfi_drop(dir, qfi);
        self.stats.count(Total::IcmpErrorsSent);
        Disposition::tx(nh.port)
    }
}

/// Decrement the TTL / hop limit of the IP packet at the start of `data` (RFC 1812 section
/// 5.3.1, RFC 8200 section 3); `false` if it would reach 0 (the packet must not be sent).
fn decrement_ttl(data: &mut [u8], v6: bool) -> bool {
    if v6 {
        let mut ip = ipv6::Packet::new_unchecked(data);
        if ip.hop_limit() <= 1 {
            return false;
        }
        ip.set_hop_limit(ip.hop_limit() - 1);
    } else {
        let mut ip = ipv4::Packet::new_unchecked(data);
        if ip.ttl() <= 1 {
            return false;
        }
        ip.decrement_ttl_update_checksum();
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(v6: bool, src: u128, dst: u128, proto: u8, ports: Option<(u16, u16)>) -> Flow {
        Flow {
            v6,
            src,
            dst,
            proto,
            ports,
            icmp_type: None,
            l4: 20,
            len: 100,
            df: true,
            frag: false,
        }
    }

    #[test]
    fn filters_match_prefixes_ports_and_protocol() {
        let ue = u128::from(u32::from(Ipv4Addr::new(10, 45, 0, 7)));
        let srv = u128::from(u32::from(Ipv4Addr::new(198, 51, 100, 9)));
        let f = FlowFilter {
            proto: Some(ip_protocol::UDP),
            src: Some(IpPrefix::V4(Ipv4Addr::new(10, 45, 0, 0), 16)),
            dst: Some(IpPrefix::V4(Ipv4Addr::new(198, 51, 100, 0), 24)),
            src_ports: None,
            dst_ports: Some((5000, 5010)),
        };
        assert!(filter_match(&f, &flow(false, ue, srv, 17, Some((1, 5005)))));
        assert!(!filter_match(
            &f,
            &flow(false, ue, srv, 17, Some((1, 5011)))
        ));
        assert!(!filter_match(&f, &flow(false, ue, srv, 6, Some((1, 5005)))));
        assert!(!filter_match(
            &f,
            &flow(false, srv, ue, 17, Some((1, 5005)))
        ));
        // ICMP has no ports: a filter with ports does not match it.
        let icmp = FlowFilter { proto: None, ..f };
        assert!(!filter_match(&icmp, &flow(false, ue, srv, 1, None)));
        // Family mismatch never matches; /0 matches all of its family.
        let any6 = FlowFilter {
            proto: None,
            src: Some(IpPrefix::V6(Ipv6Addr::UNSPECIFIED, 0)),
            dst: None,
            src_ports: None,
            dst_ports: None,
        };
        assert!(!filter_match(&any6, &flow(false, ue, srv, 17, None)));
        assert!(filter_match(&any6, &flow(true, 5, 6, 17, None)));
    }

    #[test]
    fn flow_port_is_dynamic_and_spreads() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..256u128 {
            let p = flow_port(&flow(false, i, 7, 17, Some((1000, 80))));
            assert!(p >= 0xC000);
            seen.insert(p);
        }
        assert!(seen.len() > 200, "{}", seen.len());
    }

    #[test]
    fn parse_ip_never_panics_on_prefixes() {
        let mut b = [0u8; 60];
        b[0] = 0x45;
        b[3] = 60;
        b[9] = 17;
        b[24] = 0; // UDP length 0: malformed
        for n in 0..b.len() {
            let _ = parse_ip(&b[..n], false, false);
            let _ = parse_ip(&b[..n], true, false);
        }
    }
}
