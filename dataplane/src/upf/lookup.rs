//! Lookup phase of the UPF stage (TS 29.244 section 5.2.1): the candidate PDRs by exact key
//! (uplink: the local TEID; downlink: the UE IPv4 address or IPv6 /64 prefix), then the
//! first in precedence order whose QFI and SDF filters (TS 29.212 section 5.4.2) match; or
//! the key's fast-path record when it has one.

use crate::buffer::PacketBuf;
use crate::runtime::Disposition;
use crate::upf::enforce::Plan;
use crate::upf::keymap::{prefetch_home_in, slot_from_in};
use crate::upf::parse::{Flow, Pre, KIND_DL4, KIND_DL6, KIND_UL};
use crate::upf::prefetch::{prefetch, prefetch_addr, prefetch_obj};
use crate::upf::tables::{
    Direction, FarAction, FastPath, FlowFilter, IpPrefix, KeySlot, PdrRule, Shard, NONE,
};
use crate::upf::work::Work;

impl<'a> Work<'a> {
    /// End of pass 1: the shard holding the key's map (`None` for a slow packet), and the
    /// key's map slots and home slot in `probe`, whose line (and the next) start loading
    /// at once: the slot array comes from the shard directory's own entry
    /// ([`ShardTable::teid_slots`](crate::upf::shards::ShardTable::teid_slots)), so no
    /// line of the shard itself is read. Each chunked packet's shard is computed here once,
    /// for [`Self::lookup`] and pass 3.
    #[inline(always)]
    pub fn key_shard(&self, pre: &Pre, probe: &mut Probe<'a>) -> Option<&'a Shard> {
        let t = self.t;
        // `pre.key` is the map's key as its `u64` (see `Pre::key`): one shard pick for
        // every kind (`teid_shard`, `ue_v4_shard` and `ue_v6_shard` are the same one).
        // The pick is repeated in each arm on purpose: one pick before a second match on the
        // kind measured +12 instructions a packet (callgrind `--stage`, UL and DL 10k).
        let (s, slots) = match pre.kind {
            KIND_UL => {
                let i = t.shard_index(pre.key);
                // A paged TEID's slot is at its index (`upf::pages`): one line, no probe.
                if let Some((page, home)) = t.shards.teid_page(pre.key) {
                    prefetch_addr(page.as_ptr().wrapping_add(home).cast());
                    *probe = Probe { slots: page, home };
                    return Some(t.shards.at(i));
                }
                (t.shards.at(i), t.shards.teid_slots(i))
            }
            KIND_DL4 => {
                let i = t.shard_index(pre.key);
                (t.shards.at(i), t.shards.ue_v4_slots(i))
            }
            KIND_DL6 => {
                let i = t.shard_index(pre.key);
                (t.shards.at(i), t.shards.ue_v6_slots(i))
            }
            _ => return None,
        };
        *probe = Probe {
            slots,
            home: prefetch_home_in(slots, pre.key),
        };
        Some(s)
    }

    /// Pass 2: the key's slot in shard `s` from `probe` (its home slot's line was
    /// prefetched in pass 1), and a prefetch of the meter and usage-counter lines its
    /// fast-path record names; a slot without one sets bit `k` of `slow` (for
    /// [`Self::prefetch_rules`]). `None` for a key without rules (pass 3 then runs the full
    /// path, which reports it).
    #[inline(always)]
    pub fn lookup(
        &self,
        pre: &Pre,
        s: &'a Shard,
        probe: &Probe<'a>,
        slow: &mut u32,
        k: usize,
    ) -> Option<&'a KeySlot> {
        let slot = slot_from_in(probe.slots, probe.home, pre.key)?;
        if let Some(f) = slot.fast() {
            // No bounds check: a hint never faults (a slot past the array, rare, is found
            // out in pass 3). A meter slot is one cache line. Hints only, so the padding test
            // is the sign bit (one test of the loaded word; `NONE` is `u32::MAX`, and a slot
            // at 2^31 or above, which no table reaches, gets no hint).
            for m in f.meters {
                if (m.slot as i32) >= 0 {
                    prefetch_addr(self.meters.as_ptr().wrapping_add(m.slot as usize).cast());
                }
            }
            for u in f.urrs {
                if (u as i32) >= 0 {
                    self.stats.urr_prefetch(u);
                }
            }
        } else {
            // The general path's first reads: the shard's rule tables (for
            // [`Self::prefetch_rules`]).
            prefetch(&s.pdr_order);
            prefetch(&s.pdrs);
            prefetch(&s.fars);
            prefetch(&s.qers);
            prefetch(&s.filters);
            *slow |= 1 << k;
        }
        Some(slot)
    }

    /// Pass 2b, for the chunk's keys without a fast-path record (bit `k` of `slow`: chunk
    /// index `k`, with its shard and slot): start loading the lines the general path will
    /// read, one dependent level per sweep over the chunk so each level's misses overlap
    /// across packets (the first candidate's PDR order entry, then the PDR, then its FAR,
    /// QERs, SDF filters and usage counters, then its meters). Hints only: every read is
    /// bounds-checked and nothing is written.
    #[inline(never)]
    pub fn prefetch_rules(
        &self,
        slow: u32,
        shard: &[Option<&'a Shard>],
        hit: &[Option<&'a KeySlot>],
    ) {
        let each = |f: &dyn Fn(&'a Shard, &'a KeySlot)| each_slow(slow, shard, hit, f);
        let first = |s: &'a Shard, slot: &KeySlot| {
            let (lo, hi) = slot.range();
            (lo < hi).then(|| s.pdr_order.get(lo as usize)).flatten()
        };
        let pdr = |s: &'a Shard, slot: &KeySlot| s.pdrs.get(*first(s, slot)? as usize);
        each(&|s, slot| {
            let (lo, hi) = slot.range();
            if lo < hi {
                prefetch_addr(s.pdr_order.as_ptr().wrapping_add(lo as usize).cast());
            }
        });
        each(&|s, slot| {
            if let Some(&i) = first(s, slot) {
                prefetch_obj(s.pdrs.as_ptr().wrapping_add(i as usize));
            }
        });
        each(&|s, slot| {
            let Some(p) = pdr(s, slot) else { return };
            prefetch_obj(s.fars.as_ptr().wrapping_add(p.far as usize));
            for &q in p.qers.iter().filter(|&&q| q != NONE) {
                prefetch_obj(s.qers.as_ptr().wrapping_add(q as usize));
            }
            if p.filters.0 < p.filters.1 {
                prefetch_obj(s.filters.as_ptr().wrapping_add(p.filters.0 as usize));
            }
            for u in p.urrs.iter().filter(|u| u.slot != NONE) {
                self.stats.urr_prefetch(u.slot);
            }
        });
        each(&|s, slot| {
            let Some(p) = pdr(s, slot) else { return };
            for &qi in p.qers.iter().filter(|&&q| q != NONE) {
                if let Some(q) = s.qers.get(qi as usize) {
                    if q.meter_cfg.is_some() && q.meter.slot != NONE {
                        let m = self.meters.as_ptr().wrapping_add(q.meter.slot as usize);
                        prefetch_addr(m.cast());
                    }
                }
            }
        });
    }

    /// Pass 3 of a packet pass 1 classified and pass 2 found rules for, its fast path: the
    /// key's fast-path record applied if it has one (and, uplink, the PDR's QFI matches);
    /// [`Disposition::CONTINUE`] (nothing changed): [`Self::resolved`] decides it.
    #[inline(always)]
    pub fn resolved_fast<B: PacketBuf>(
        &mut self,
        p: &mut B,
        pre: &Pre,
        slot: &KeySlot,
    ) -> Disposition {
        let Some(f) = slot.fast() else {
            return Disposition::CONTINUE;
        };
        let Some((dir, qfi)) = fast_takes(pre, f) else {
            return Disposition::CONTINUE;
        };
        // One inlined copy of the fast path for each common shape, its direction, outer
        // header and inner version constants there (its counters, meter colour and header
        // choices fold): an IPv4 uplink decapsulated to N6, an IPv4 downlink encapsulated;
        // the rest (an N9 relay, a downlink routed on N6, an IPv6 inner packet) out of line.
        let outer = f.flags & FastPath::OUTER_V4 != 0;
        match (dir, outer, pre.v6) {
            (Direction::Uplink, false, false) => {
                self.fast_apply(p, pre, f, Direction::Uplink, qfi, false, false)
            }
            (Direction::Downlink, true, false) => {
                self.fast_apply(p, pre, f, Direction::Downlink, qfi, true, false)
            }
            _ => self.fast_apply_other(p, pre, f, dir, qfi, outer),
        }
    }

    /// Pass 3 of a packet pass 1 classified and pass 2 found rules for, after
    /// [`Self::resolved_fast`] answered `Continue`: the general `execute` with the fast-path
    /// record's plan if the record takes the packet (its fast path declined it), else the
    /// PDR selection of the general path (the packet's record written first if pass 1 left
    /// it, `Pre::settle`). `flow` is the inner flow pass 1 kept if `pre.flow` says so.
    #[inline(never)]
    pub fn resolved<B: PacketBuf>(
        &mut self,
        p: &mut B,
        pre: &Pre,
        flow: &Flow,
        s: &Shard,
        slot: &KeySlot,
    ) -> Disposition {
        let dir = if pre.kind == KIND_UL {
            Direction::Uplink
        } else {
            Direction::Downlink
        };
        if let Some((f, (dir, qfi))) = slot.fast().and_then(|f| Some((f, fast_takes(pre, f)?))) {
            pre.settle(p);
            // Unchanged by `fast_apply`: the flow pass 1 read.
            let inner = pre_flow(p, pre, flow);
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
            return self.execute(p, s, &plan, dir, usize::from(pre.inner_off), &inner);
        }
        pre.settle(p);
        // The flow pass 1 read (pass 2 changed nothing).
        let inner = pre_flow(p, pre, flow);
        let inner_off = usize::from(pre.inner_off);
        match select_pdr(s, slot.range(), dir, pre.qfi, &inner) {
            Some(pdr) => self.apply(p, s, pdr, dir, pre.qfi, inner_off, &inner),
            None if dir == Direction::Uplink => {
                self.drop_q(dir, pre.qfi.unwrap_or(0), self.d.uplink_no_pdr)
            }
            None => Disposition::drop_as(self.d.downlink_no_pdr),
        }
    }

    /// General path, downlink: the N6 packet `f` at `l3` by its UE address.
    pub fn downlink<B: PacketBuf>(&mut self, p: &mut B, l3: usize, f: &Flow) -> Disposition {
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

    /// General path, uplink: a G-PDU (outer `f`, UDP at `l4`, GTP-U at `gtp_off`) by its
    /// TEID; an unknown TEID is answered with an Error Indication.
    #[allow(clippy::too_many_arguments)]
    pub fn uplink<B: PacketBuf>(
        &mut self,
        p: &mut B,
        l3: usize,
        l4: usize,
        f: &Flow,
        gtp_off: usize,
        teid: u32,
        qfi: Option<u8>,
        inner: &Flow,
    ) -> Disposition {
        let sq = qfi.unwrap_or(0);
        let Some((shard, range)) = self.t.teid_candidates(teid) else {
            return self.error_indication(p, l3, l4, f, gtp_off, teid, sq);
        };
        let Some(pdr) = select_pdr(shard, range, Direction::Uplink, qfi, inner) else {
            return self.drop_q(Direction::Uplink, sq, self.d.uplink_no_pdr);
        };
        let inner_off = usize::from(p.pkt_meta().inner_l3_off);
        self.apply(p, shard, pdr, Direction::Uplink, qfi, inner_off, inner)
    }
}

/// Whether fast-path record `f` takes the packet `pre` describes, with the direction and
/// the QFI the general path derives: uplink, a PDR with a QFI takes only packets carrying
/// it, and then the packet's QFI is the one (else 0: neither has one); downlink, always,
/// the QFI to mark.
#[inline(always)]
fn fast_takes(pre: &Pre, f: &FastPath) -> Option<(Direction, u8)> {
    if pre.kind == KIND_UL {
        (f.pdr_qfi == FastPath::NO_QFI || f.pdr_qfi == pre.qfi.unwrap_or(FastPath::NO_QFI))
            .then_some((Direction::Uplink, pre.qfi.unwrap_or(0)))
    } else {
        Some((Direction::Downlink, f.mark_qfi))
    }
}

/// Where pass 2 looks a chunked packet's key up: its map's slots and its home slot there
/// (pass 1, `Work::key_shard`).
#[derive(Debug, Clone, Copy)]
pub struct Probe<'a> {
    pub slots: &'a [KeySlot],
    pub home: usize,
}

impl Probe<'_> {
    /// No slots: a packet pass 1 found no shard for.
    pub const NONE: Probe<'static> = Probe {
        slots: &[],
        home: 0,
    };
}

/// `f` of the shard and slot of each chunk index set in `slow`.
#[inline(always)]
fn each_slow<'a>(
    slow: u32,
    shard: &[Option<&'a Shard>],
    hit: &[Option<&'a KeySlot>],
    f: &dyn Fn(&'a Shard, &'a KeySlot),
) {
    let mut m = slow;
    while m != 0 {
        let k = m.trailing_zeros() as usize;
        m &= m - 1;
        if let (Some(Some(s)), Some(Some(slot))) = (shard.get(k), hit.get(k)) {
            f(s, slot);
        }
    }
}

/// The inner flow of the packet `pre` describes: the one pass 1 kept (`flow`, if `pre.flow`),
/// else read again from the packet and its record, unchanged since pass 1.
#[inline]
fn pre_flow<B: PacketBuf>(p: &B, pre: &Pre, flow: &Flow) -> Flow {
    if pre.flow {
        *flow
    } else {
        Flow::inner(p.data(), p.pkt_meta())
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
pub(super) fn filter_match(f: &FlowFilter, fl: &Flow) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upf::parse::test_flow as flow;
    use peregrine_wire::ipv4::ip_protocol;
    use std::net::{Ipv4Addr, Ipv6Addr};

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
}
