//! One batch's view of the UPF stage's state, shared by the phases ([`parse`](super::parse),
//! [`lookup`](super::lookup), [`enforce`](super::enforce), [`emit`](super::emit)), and the
//! per-worker pieces it points at: the named drop reasons and the meter slots.

use crate::io::PortId;
use crate::qos::TokenBucket;
use crate::runtime::{DropReason, Reasons};
use crate::stages::l3fwd::{NextHop, RouteTable};
use crate::upf::config::UpfConfig;
use crate::upf::encap::eth_addrs;
use crate::upf::frag::FragJob;
use crate::upf::reasm::{Reassembler, Refusal};
use crate::upf::stats::{QfiCells, Total, UpfStats};
use crate::upf::tables::{Direction, UpfTables};
use peregrine_wire::ethernet::Address as MacAddr;

#[derive(Debug, Clone, Copy)]
pub(super) struct Drops {
    pub l2_truncated: DropReason,
    pub l2_not_for_us: DropReason,
    pub unsupported_ethertype: DropReason,
    pub ipv4_truncated: DropReason,
    pub ipv4_malformed: DropReason,
    pub ipv4_bad_checksum: DropReason,
    pub ipv6_truncated: DropReason,
    pub ipv6_malformed: DropReason,
    pub l4_malformed: DropReason,
    pub gtpu_malformed: DropReason,
    pub gtpu_unsupported_message: DropReason,
    pub end_marker: DropReason,
    pub gtpu_unknown_teid: DropReason,
    pub inner_malformed: DropReason,
    pub uplink_no_pdr: DropReason,
    pub downlink_no_session: DropReason,
    pub downlink_no_pdr: DropReason,
    pub gate_closed: DropReason,
    pub mbr_exceeded: DropReason,
    /// A shaped session's queue (time at its MBR) is full.
    pub mbr_queue_full: DropReason,
    pub far_drop: DropReason,
    pub ul_without_decap: DropReason,
    pub no_route: DropReason,
    /// The route's next hop (a gateway resolved by ARP / ND) has no MAC yet or any more.
    pub next_hop_unresolved: DropReason,
    pub ttl_exceeded: DropReason,
    pub mtu_exceeded: DropReason,
    pub encap_failed: DropReason,
    pub reply_failed: DropReason,
    pub frag_no_buffer: DropReason,
    pub reasm: ReasmDrops,
}

/// The reassembly's drop reasons: `reasm_held` (a fragment copied into the table: kept,
/// not lost) and one per [`Refusal`], plus `reasm_no_room` (the completed datagram does not
/// fit the buffer of the fragment that completed it).
#[derive(Debug, Clone, Copy)]
pub(super) struct ReasmDrops {
    pub held: DropReason,
    pub no_room: DropReason,
    refused: [DropReason; 10],
}

impl ReasmDrops {
    fn register(r: &mut Reasons) -> ReasmDrops {
        ReasmDrops {
            held: r.register("reasm_held"),
            no_room: r.register("reasm_no_room"),
            refused: [
                "reasm_malformed",
                "reasm_tiny",
                "reasm_too_big",
                "reasm_table_full",
                "reasm_source_limit",
                "reasm_memory_full",
                "reasm_overlap",
                "reasm_duplicate",
                "reasm_too_many_fragments",
                "reasm_discarded",
            ]
            .map(|n| r.register(n)),
        }
    }

    pub fn refused(&self, e: Refusal) -> DropReason {
        self.refused[match e {
            Refusal::Malformed => 0,
            Refusal::Tiny => 1,
            Refusal::TooBig => 2,
            Refusal::TableFull => 3,
            Refusal::SourceLimit => 4,
            Refusal::MemoryFull => 5,
            Refusal::Overlap => 6,
            Refusal::Duplicate => 7,
            Refusal::TooManyFragments => 8,
            Refusal::Discarded => 9,
        }]
    }
}

impl Drops {
    pub(super) fn register(r: &mut Reasons) -> Drops {
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
            mbr_queue_full: r.register("mbr_queue_full"),
            far_drop: r.register("far_drop"),
            ul_without_decap: r.register("ul_without_decap"),
            no_route: r.register("no_route"),
            next_hop_unresolved: r.register("next_hop_unresolved"),
            ttl_exceeded: r.register("ttl_exceeded"),
            mtu_exceeded: r.register("mtu_exceeded"),
            encap_failed: r.register("encap_failed"),
            reply_failed: r.register("reply_failed"),
            frag_no_buffer: r.register("frag_no_buffer"),
            reasm: ReasmDrops::register(r),
        }
    }
}

pub(super) use crate::upf::meter::MeterSlot;

/// One batch's view of the stage state, shared by the phases.
pub(super) struct Work<'a> {
    pub t: &'a UpfTables,
    pub r: &'a RouteTable,
    pub macs: &'a [MacAddr],
    pub cfg: &'a UpfConfig,
    pub stats: &'a UpfStats,
    /// `stats.qfi_cells()`, read once per batch (the fast path's counters).
    pub qfi: &'a QfiCells,
    pub d: Drops,
    pub meters: &'a mut [MeterSlot],
    pub replies: &'a mut TokenBucket,
    pub reasm: &'a mut Reassembler,
    pub now: u64,
    pub rx: PortId,
    /// The receiving port repairs L4 checksums (`cfg.fix_l4_checksums` has bit `rx`): read
    /// once per batch.
    pub fix_l4: bool,
    /// `cfg.mtu`, widened once per batch; 0 when `fix_l4` (every packet then takes the
    /// general path, which repairs L4 checksums): the fast path's one test of both.
    pub fast_mtu: usize,
    /// The receiving port's MAC as the 6 bytes read little-endian into the top 48 bits of
    /// a `u64` (a frame's first 8 bytes little-endian, shifted left 16), `u64::MAX` (no
    /// frame's) if it has none: [`Self::for_us_unicast`] with one compare.
    pub rx_mac: u64,
    /// Our own IPv4 addresses for the quick classifier's N6 shape, read once per batch: the
    /// tables' one local address (`t.local_v4` holds exactly one, the usual configuration),
    /// then `cfg.n6_v4` (the local address again if none); `None` with any other number of
    /// local addresses (the quick classifier then tests `is_local` and `is_n6_own`).
    pub own_v4: Option<[u32; 2]>,
    /// Recent routes of this worker, valid for the route table `r`.
    pub routes: &'a mut RouteCache,
    /// Set by the emit phase instead of a disposition when the packet must be fragmented;
    /// the stage finishes it with the batch in hand (`Work::fragment`).
    pub frag: Option<FragJob>,
}

impl Work<'_> {
    #[inline]
    pub fn drop_q(&self, dir: Direction, qfi: u8, r: DropReason) -> crate::runtime::Disposition {
        self.stats.qfi_drop(dir, qfi);
        crate::runtime::Disposition::drop_as(r)
    }

    pub fn our_mac(&self, port: PortId) -> MacAddr {
        self.macs.get(port as usize).copied().unwrap_or_default()
    }

    /// Take a reply token (Error Indication, ICMP error).
    pub fn take_reply_token(&mut self) -> bool {
        self.replies.refill(self.now);
        if self.replies.has(1) {
            self.replies.take(1);
            true
        } else {
            self.stats.count(Total::RepliesRateLimited);
            false
        }
    }

    /// The next hop towards `dst`, or the drop reason: `no_route`, or `next_hop_unresolved`
    /// while the route's gateway has no MAC (see `NextHop::UNRESOLVED`). A hit in the route
    /// cache is inlined into the caller; the table lookup of a miss is not.
    #[inline(always)]
    pub fn route(&mut self, v6: bool, dst: u128) -> Result<NextHop, DropReason> {
        let (port, i) = self.route_entry(v6, dst)?;
        Ok(NextHop {
            port,
            mac: MacAddr(eth_mac(self.eth_of(i))),
        })
    }

    /// [`Self::route`] as the fast path uses it: the next hop's port and the index of the
    /// route cache's entry that holds the answer (filled from the table first if it held
    /// another destination), whose Ethernet addresses [`Self::eth_of`] reads where the
    /// header is written.
    #[inline(always)]
    pub fn route_entry(&mut self, v6: bool, dst: u128) -> Result<(PortId, usize), DropReason> {
        // An IPv4 destination by its 32 bits (the table's key): an IPv4 entry's `dst` has
        // nothing above them, so its low 64 bits and the family decide a hit.
        let dst = if v6 { dst } else { u128::from(dst as u32) };
        let i = RouteCache::index(dst);
        let e = &self.routes.e[i];
        let same = if v6 {
            e.dst == dst
        } else {
            e.dst as u64 == dst as u64
        };
        let hit = e.fam == u8::from(v6) && same;
        // A hit with an answer (the common case) without reading the entry again.
        if hit && e.ok {
            return Ok((e.port, i));
        }
        if !hit {
            self.route_miss(v6, dst, i);
        }
        let e = &self.routes.e[i];
        if e.ok {
            Ok((e.port, i))
        } else {
            Err(DropReason(e.port))
        }
    }

    /// The Ethernet addresses of a packet to the next hop of route cache entry `i` (an
    /// answer `Ok` of [`Self::route_entry`]): the next hop's MAC, then ours on its port
    /// ([`Self::our_mac`]; `encap::eth_addrs`).
    #[inline(always)]
    pub fn eth_of(&self, i: usize) -> &[u8; 12] {
        &self.routes.e[i].eth
    }

    /// [`Self::route_entry`] past the cache: the table's answer, kept in entry `i`.
    #[inline(never)]
    fn route_miss(&mut self, v6: bool, dst: u128, i: usize) {
        let nh = if v6 {
            self.r.v6.lookup(dst)
        } else {
            self.r.v4.lookup(dst as u32)
        };
        let res = match nh {
            Some(nh) if nh.is_resolved() => {
                let eth = eth_addrs(nh.mac, self.our_mac(nh.port));
                Ok((nh.port, eth))
            }
            Some(_) => Err(self.d.next_hop_unresolved),
            None => Err(self.d.no_route),
        };
        self.routes.e[i] = RouteEntry::new(v6, dst, res);
    }
}

/// One worker's next hops of recent destinations for one version of the route table: a
/// direct-mapped cache (most packets of a burst go to a few N6 servers or gNBs; a
/// one-entry memo missed on three packets in four towards four gNBs). The routes are an
/// immutable snapshot, so the cache is exact for the version it was filled from and is
/// emptied when the worker picks up another ([`Self::sync`]).
#[derive(Debug, Clone)]
pub(super) struct RouteCache {
    generation: u64,
    e: [RouteEntry; ROUTE_CACHE],
}

/// Entries of a [`RouteCache`] (a power of two).
const ROUTE_CACHE: usize = 16;

/// 32 bytes (two entries a cache line): the answer packed beside the key.
#[derive(Debug, Clone, Copy)]
struct RouteEntry {
    /// IPv4 in the low 32 bits, nothing above them.
    dst: u128,
    /// An answer `Ok`: the Ethernet addresses of a packet to the next hop (its MAC, then
    /// ours on its port: `encap::eth_addrs`).
    eth: [u8; 12],
    /// The next hop's port (`ok`), else the drop reason's number.
    port: u16,
    /// 0 IPv4, 1 IPv6, 2 empty.
    fam: u8,
    /// What [`Work::route_entry`] answers for it is `Ok` (the drop reasons are the worker's,
    /// fixed).
    ok: bool,
}

impl RouteEntry {
    #[inline(always)]
    fn new(v6: bool, dst: u128, res: Result<(PortId, [u8; 12]), DropReason>) -> RouteEntry {
        let (eth, port, ok) = match res {
            Ok((port, eth)) => (eth, port, true),
            Err(r) => ([0; 12], r.0, false),
        };
        RouteEntry {
            dst,
            eth,
            port,
            fam: u8::from(v6),
            ok,
        }
    }
}

/// The destination address of an `encap::eth_addrs` pair.
#[inline(always)]
fn eth_mac(eth: &[u8; 12]) -> [u8; 6] {
    let mut m = [0u8; 6];
    m.copy_from_slice(&eth[..6]);
    m
}

const _: () = assert!(std::mem::size_of::<RouteEntry>() == 32);

impl RouteCache {
    const EMPTY: RouteEntry = RouteEntry {
        dst: 0,
        // Never read: an empty entry matches no family.
        eth: [0; 12],
        port: 0,
        fam: 2,
        ok: false,
    };

    pub fn new() -> RouteCache {
        RouteCache {
            generation: 0,
            e: [Self::EMPTY; ROUTE_CACHE],
        }
    }

    /// Keep the entries if they were filled from route table version `generation`, else
    /// empty them.
    #[inline]
    pub fn sync(&mut self, generation: u64) {
        if generation != self.generation {
            self.e = [Self::EMPTY; ROUTE_CACHE];
            self.generation = generation;
        }
    }

    /// The entry of `dst`: a multiplicative hash of both halves (consecutive addresses,
    /// as gNBs and servers often have, take different entries).
    #[inline(always)]
    fn index(dst: u128) -> usize {
        let x = (dst as u64) ^ ((dst >> 64) as u64);
        (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - ROUTE_CACHE.trailing_zeros())) as usize
    }
}
