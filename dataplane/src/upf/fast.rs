//! Pass 3 of a packet whose key has a [`FastPath`] record: the enforce and emit phases of
//! that one shape, without the general path's `Plan` and its
//! branches on rules the record excludes (closed gates, non-forwarding FARs, IPv6 outer
//! headers, shapers). Anything the record does not settle (a meter to create or re-create,
//! a shaped QER, a packet over the MTU, L4 checksum repair on the port) returns `Continue`
//! before any side effect, and the caller runs the general `execute` with the same record;
//! the results are the general path's (`fast_path_matches_general_path` in
//! `dataplane/tests/upf/paths.rs`). A packet pass 1's own classifier took has no record
//! yet (`Pre::meta`): forwarding writes the final one in one go; every other way out
//! writes pass 1's first (`Pre::settle`), so the general path and the drops see the record
//! they always saw.

use crate::buffer::PacketBuf;
use crate::classify::PacketMeta;
use crate::qos::Colour;
use crate::runtime::{Disposition, DropReason};
use crate::upf::emit::{decrement_ttl, flow_port, quick_record_of, Stamp};
use crate::upf::encap::{self, Psc};
use crate::upf::parse::{Flow, Pre};
use crate::upf::stats::qfi_cell;
use crate::upf::tables::{Direction, FastPath, NONE};
use crate::upf::work::Work;
use peregrine_wire::ethernet::{self, ethertype};
use peregrine_wire::{ipv4, ipv6};
use std::net::Ipv4Addr;

impl Work<'_> {
    /// Apply fast-path record `f` to the packet `pre` describes (direction `dir`, QFI `qfi`
    /// as the general path derives them; `outer`: `f` has an outer header; `v6`: `pre.v6`,
    /// the inner packet's version); [`Disposition::CONTINUE`] (which it never decides
    /// otherwise): take the general path (nothing changed). Always inlined: the caller has
    /// one call for each common shape, the direction and `outer` constants there (see
    /// [`Self::fast_apply_other`]).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn fast_apply<B: PacketBuf>(
        &mut self,
        p: &mut B,
        pre: &Pre,
        f: &FastPath,
        dir: Direction,
        qfi: u8,
        outer: bool,
        v6: bool,
    ) -> Disposition {
        debug_assert_eq!(outer, f.flags & FastPath::OUTER_V4 != 0);
        debug_assert_eq!(v6, pre.v6);
        let inner_len = pre.len as usize;
        let inner_off = usize::from(pre.inner_off);
        // Preconditions, read only.
        let overhead = if outer { encap::overhead(false) } else { 0 };
        // Over the MTU, or L4 checksum repair on the port (`fast_mtu` 0: an IPv4 packet is
        // at least 20 bytes).
        if inner_len + overhead > self.fast_mtu {
            return Disposition::CONTINUE;
        }
        let len = pre.len as u64;
        // QERs (RFC 2698 TrTCM, colour-blind as the QER meters are), then URRs. Every meter
        // is checked before any is marked (one the record does not settle: the general path).
        let [a, b] = f.meters;
        // This packet's direction x QFI counters, addressed once (its colour when metered,
        // its bytes when sent).
        let cell = qfi_cell(self.qfi, dir, qfi);
        // The colour a meter gave (counted, a red packet dropped), else green (not counted).
        let colour = if a.slot != NONE && b.slot == NONE {
            // One meter (the common case): checked and marked in one step.
            let now = self.now;
            let c = match self.meters.get_mut(a.slot as usize) {
                Some(m) => match m.police(a.generation, now, len) {
                    Some(c) => c,
                    None => return Disposition::CONTINUE,
                },
                None => return Disposition::CONTINUE,
            };
            cell.colour(c);
            if c == Colour::Red {
                return self.fast_drop(p, pre, dir, qfi, self.d.mbr_exceeded);
            }
            c
        } else if a.slot != NONE {
            for mr in [a, b] {
                match self.meters.get(mr.slot as usize) {
                    Some(m) if m.is(mr.generation) && !m.shapes() => {}
                    _ => return Disposition::CONTINUE,
                }
            }
            let mut colour = Colour::Green;
            for mr in [a, b] {
                let c = self.meters[mr.slot as usize].mark(self.now, len);
                colour = colour.max(c);
                if c == Colour::Red {
                    break;
                }
            }
            cell.colour(colour);
            if colour == Colour::Red {
                return self.fast_drop(p, pre, dir, qfi, self.d.mbr_exceeded);
            }
            colour
        } else {
            Colour::Green
        };
        for &u in f.urrs.iter().filter(|&&u| u != NONE) {
            self.stats.urr_add(u, dir, len, self.now);
        }
        // The outer UDP source port, unless pass 1 computed it (uplink: only a relay needs
        // it), from the packet before its headers go.
        let port = if outer && pre.port == 0 {
            flow_port(&Flow::inner(p.data(), &record(p, pre)))
        } else {
            pre.port
        };
        // FAR: forward. Keep exactly the user packet, then encapsulate or route it.
        // (`adj` then `encap::set_len`, in one.) Routed, with the 14 bytes before it, where
        // its Ethernet header is written (as if prepended: the same window; the inner packet
        // is at least 14 bytes into the frame, past the Ethernet header it came with).
        let eth_room = if outer { 0 } else { ethernet::HEADER_LEN };
        if p.keep(inner_off.wrapping_sub(eth_room), inner_len + eth_room)
            .is_err()
        {
            return self.fast_drop(p, pre, dir, qfi, self.d.inner_malformed);
        }
        let qid = self.cfg.qfi_map.qid(qfi);
        let stamp = Stamp {
            dir,
            qfi,
            qid,
            colour,
            session: f.urrs[0],
            inner_off,
        };
        if outer {
            let (tx, ri) = match self.route_entry(false, u128::from(f.outer_peer)) {
                Ok(r) => r,
                Err(r) => return self.fast_drop(p, pre, dir, qfi, r),
            };
            let psc = if dir == Direction::Downlink {
                if !decrement_ttl(p.data_mut(), v6) {
                    return self.fast_drop(p, pre, dir, qfi, self.d.ttl_exceeded);
                }
                Psc::Dl
            } else {
                Psc::Ul
            };
            if encap::encap_gtpu_v4(
                p,
                f.outer_teid,
                Ipv4Addr::from(f.outer_local),
                Ipv4Addr::from(f.outer_peer),
                qfi,
                psc,
                port,
                self.eth_of(ri),
            )
            .is_err()
            {
                return self.fast_drop(p, pre, dir, qfi, self.d.encap_failed);
            }
            if pre.meta {
                // The record written once (pass 1 left it to here).
                *p.pkt_meta_mut() =
                    quick_record_of(pre, &stamp, Some(f.outer_teid), dir == Direction::Uplink);
            } else {
                stamp.encapsulated(p.pkt_meta_mut(), false, f.outer_teid);
            }
            cell.sent(len);
            return Disposition::tx_queue(tx, qid);
        }
        let (tx, ri) = match self.route_entry(v6, pre.dst) {
            Ok(r) => r,
            Err(r) => return self.fast_drop(p, pre, dir, qfi, r),
        };
        let et = if v6 { ethertype::IPV6 } else { ethertype::IPV4 };
        // The window kept above: the Ethernet header's room, then the packet, whose IP
        // header is taken with it in one bounds check. A packet shorter than its header is
        // malformed (`inner_malformed`, not `ttl_exceeded`); unreachable here today: pass 1
        // describes a packet (`Pre`) only once it has parsed its whole inner IP header (the
        // quick shapes' `plain_len`, the shared classifier's), whose total length `keep`
        // kept.
        let hl = if v6 {
            ipv6::HEADER_LEN
        } else {
            ipv4::HEADER_LEN
        };
        let Some((h, ip)) = p
            .data_mut()
            .get_mut(..ethernet::HEADER_LEN + hl)
            .and_then(|d| d.split_first_chunk_mut::<{ ethernet::HEADER_LEN }>())
        else {
            return self.fast_drop(p, pre, dir, qfi, self.d.inner_malformed);
        };
        if !decrement_ttl(ip, v6) {
            return self.fast_drop(p, pre, dir, qfi, self.d.ttl_exceeded);
        }
        encap::write_eth_addrs(h, *self.eth_of(ri), et);
        if pre.meta {
            *p.pkt_meta_mut() = quick_record_of(pre, &stamp, None, dir == Direction::Uplink);
        } else {
            stamp.routed(p.pkt_meta_mut());
        }
        cell.sent(len);
        Disposition::tx_queue(tx, qid)
    }

    /// [`Self::fast_apply`] for the shapes the stage's inlined copies leave out: an uplink
    /// relayed over N9 (an outer header) and a downlink routed on N6 (none).
    #[inline(never)]
    pub fn fast_apply_other<B: PacketBuf>(
        &mut self,
        p: &mut B,
        pre: &Pre,
        f: &FastPath,
        dir: Direction,
        qfi: u8,
        outer: bool,
    ) -> Disposition {
        self.fast_apply(p, pre, f, dir, qfi, outer, pre.v6)
    }

    /// A drop on the fast path: the packet's record written first if pass 1 left it
    /// (`Pre::settle`), as on every way out but forwarding.
    #[inline(always)]
    fn fast_drop<B: PacketBuf>(
        &self,
        p: &mut B,
        pre: &Pre,
        dir: Direction,
        qfi: u8,
        r: DropReason,
    ) -> Disposition {
        pre.settle(p);
        self.drop_q(dir, qfi, r)
    }
}

/// The packet's record as pass 1 left it: [`Pre::quick_meta`] if pass 1 left it to pass 3
/// (`pre.meta`), else the one in the packet.
#[inline(always)]
fn record<B: PacketBuf>(p: &B, pre: &Pre) -> PacketMeta {
    if pre.meta {
        pre.quick_meta()
    } else {
        *p.pkt_meta()
    }
}
