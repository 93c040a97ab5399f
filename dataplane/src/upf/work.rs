//! One batch's view of the UPF stage's state, shared by the phases ([`parse`](super::parse),
//! [`lookup`](super::lookup), [`enforce`](super::enforce), [`emit`](super::emit)), and the
//! per-worker pieces it points at: the named drop reasons and the meter slots.

use crate::io::PortId;
use crate::qos::TokenBucket;
use crate::runtime::{DropReason, Reasons};
use crate::stages::l3fwd::{NextHop, RouteTable};
use crate::upf::config::UpfConfig;
use crate::upf::frag::FragJob;
use crate::upf::reasm::{Reassembler, Refusal};
use crate::upf::stats::{Total, UpfStats};
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
    pub d: Drops,
    pub meters: &'a mut [MeterSlot],
    pub replies: &'a mut TokenBucket,
    pub reasm: &'a mut Reassembler,
    pub now: u64,
    pub rx: PortId,
    /// The last route looked up in this batch (the route table cannot change within one):
    /// family (0 IPv4, 1 IPv6, 2 none yet), destination, result.
    pub memo_fam: u8,
    pub memo_dst: u128,
    pub memo_nh: Option<NextHop>,
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
    /// while the route's gateway has no MAC (see `NextHop::UNRESOLVED`).
    #[inline]
    pub fn route(&mut self, v6: bool, dst: u128) -> Result<NextHop, DropReason> {
        // One-entry memo: most packets of a burst go to one N6 server or one gNB.
        let nh = if self.memo_fam == u8::from(v6) && self.memo_dst == dst {
            self.memo_nh
        } else {
            let nh = if v6 {
                self.r.v6.lookup(dst)
            } else {
                self.r.v4.lookup(dst as u32)
            };
            self.memo_fam = u8::from(v6);
            self.memo_dst = dst;
            self.memo_nh = nh;
            nh
        };
        match nh {
            Some(nh) if nh.is_resolved() => Ok(nh),
            Some(_) => Err(self.d.next_hop_unresolved),
            None => Err(self.d.no_route),
        }
    }
}
