//! The compiled UPF rule tables: what the control core's rule compiler builds from PFCP
//! session state (TS 29.244 section 5.2) and publishes to the workers as one immutable
//! snapshot (`runtime::snapshot`).
//!
//! Lookup order (docs/design.md, "Shape"): an exact match picks the candidate rule list,
//! uplink by local TEID (the F-TEID of the PDI), downlink by UE IPv4 address or UE IPv6 /64
//! prefix; the list is ordered by PDR precedence (lower value first, section 5.2.1) and the
//! first PDR whose remaining PDI fields match (source interface, QFI, SDF filters) wins.
//!
//! Indices, not pointers: a PDR names its FAR, QERs and URRs by index into the table's
//! vectors, so the whole snapshot is a handful of flat allocations, cheap to build and to
//! free. Meter and usage-counter *state* is not in the snapshot (it is mutable and per
//! worker); the snapshot carries stable slot numbers ([`MeterRef`], [`UrrRef`]) that the
//! compiler keeps for a rule's whole life, so state survives republishing.

use crate::qos::pacer::PacerConfig;
use crate::qos::trtcm::TrTcmConfig;
pub use crate::upf::keymap::{FastPath, KeyMap, KeySlot};
pub use crate::upf::shards::ShardTable;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// "No entry" in a fixed-size index array.
pub const NONE: u32 = u32::MAX;

/// Most QERs a PDR may reference in a compiled table (a per-flow QER plus a session AMBR
/// QER is the usual case); the compiler rejects more with cause 69 Rule creation failure.
pub const MAX_QERS_PER_PDR: usize = 2;

/// Most URRs a PDR may reference in a compiled table.
pub const MAX_URRS_PER_PDR: usize = 2;

/// Source / Destination Interface values (TS 29.244 section 8.2.2 and 8.2.24).
pub mod iface {
    pub const ACCESS: u8 = 0;
    pub const CORE: u8 = 1;
    pub const SGI_LAN: u8 = 2;
    pub const CP_FUNCTION: u8 = 3;
}

/// Direction of a packet through the UPF; selects the UL or DL half of QER gates and rates
/// and of usage counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the access side (N3/N9 GTP-U in).
    Uplink = 0,
    /// From the core side (N6 IP in, or N9 from a downstream UPF).
    Downlink = 1,
}

/// One IP flow filter of an SDF filter (TS 29.212 section 5.4.2 IPFilterRule, as used by
/// TS 29.244 section 8.2.5 "Flow Description"), in the orientation of the packets it is
/// matched against: `src` is the packet's source address (the UE for uplink, the remote
/// host for downlink; the compiler turns `permit out ... from X to assigned` around for
/// uplink PDRs). Matched against the inner (UE) IP header. Prefixes are (address, length);
/// ports are inclusive ranges; `None` = any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowFilter {
    /// IP protocol number; `None` = `ip` (any).
    pub proto: Option<u8>,
    pub src: Option<IpPrefix>,
    pub dst: Option<IpPrefix>,
    pub src_ports: Option<(u16, u16)>,
    pub dst_ports: Option<(u16, u16)>,
}

/// An address prefix, IPv4 or IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpPrefix {
    V4(Ipv4Addr, u8),
    V6(Ipv6Addr, u8),
}

/// A compiled Packet Detection Rule.
#[derive(Debug, Clone, PartialEq)]
pub struct PdrRule {
    /// PDR ID (section 8.2.36), for counters and reports.
    pub pdr_id: u16,
    /// Index of the owning session in [`Shard::sessions`].
    pub session: u32,
    pub direction: Direction,
    /// PDI QFI (section 8.2.89): the GTP-U PDU Session Container QFI must equal this.
    pub qfi: Option<u8>,
    /// SDF filters: the packet matches if any one matches (an empty list matches all).
    /// Index range into [`Shard::filters`].
    pub filters: (u32, u32),
    /// Outer Header Removal of GTP-U/UDP/IP (descriptions 0, 1 and 6, section 8.2.64).
    pub remove_gtpu: bool,
    /// Index into [`Shard::fars`].
    pub far: u32,
    /// Indices into [`Shard::qers`] for this PDR's direction; [`NONE`] pads.
    pub qers: [u32; MAX_QERS_PER_PDR],
    /// Usage counter slots; [`NONE`] pads.
    pub urrs: [UrrRef; MAX_URRS_PER_PDR],
}

/// What a FAR does (Apply Action, section 8.2.26).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FarAction {
    /// FORW: forward per the forwarding parameters.
    Forward,
    /// DROP.
    Drop,
    /// BUFF: hand to the control core, which buffers and, with NOCP, notifies the CP
    /// (Downlink Data Report).
    Buffer { notify_cp: bool },
}

/// GTP-U outer header to add (Outer Header Creation, section 8.2.56).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OuterHeader {
    /// Remote TEID.
    pub teid: u32,
    /// Remote (gNB / peer UPF) address; selects an IPv4 or IPv6 outer header.
    pub peer: std::net::IpAddr,
    /// Our own address of the same family (an N3/N9 address), the outer source.
    pub local: std::net::IpAddr,
}

/// A compiled Forwarding Action Rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FarRule {
    pub far_id: u32,
    pub action: FarAction,
    /// Destination Interface (section 8.2.24), for counters.
    pub dst_iface: u8,
    /// GTP-U encapsulation to apply (downlink to the gNB, or N9 to a peer UPF).
    pub outer: Option<OuterHeader>,
}

/// Where a QER's meter state lives in each worker: a stable slot plus the generation the
/// compiler gave it. A worker whose slot holds another generation re-creates the meter from
/// the config (a new QER in a reused slot, or an MBR change).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MeterRef {
    pub slot: u32,
    pub generation: u32,
}

impl MeterRef {
    /// No meter (a padding entry).
    pub const NONE: MeterRef = MeterRef {
        slot: NONE,
        generation: 0,
    };
}

/// A compiled QoS Enforcement Rule for one direction (a PFCP QER becomes up to two).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QerRule {
    pub qer_id: u32,
    /// Gate Status for this direction (section 8.2.7): closed drops everything.
    pub gate_open: bool,
    /// TrTCM for this direction's MBR (PIR) and GBR (CIR), bytes and bytes/s; `None` = no
    /// MBR = no limit.
    pub meter_cfg: Option<TrTcmConfig>,
    /// Shaping instead of policing the MBR (`qos::policy`): the session's pacer. The
    /// TrTCM above then only colours.
    pub pacer: Option<PacerConfig>,
    pub meter: MeterRef,
    /// QFI to mark (downlink PDU Session Container), section 8.2.89.
    pub qfi: Option<u8>,
}

/// A usage counter slot (per worker; the control core sums the workers) for one URR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UrrRef {
    pub slot: u32,
}

impl UrrRef {
    pub const NONE: UrrRef = UrrRef { slot: NONE };
}

/// Per-session facts the stages need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionInfo {
    /// Our SEID, for reports.
    pub up_seid: u64,
}

/// log2 of the default number of shards.
pub const SHARD_BITS: u32 = 10;
/// Default number of shards a [`UpfTables`] is split into.
pub const NUM_SHARDS: usize = 1 << SHARD_BITS;
/// Most shard bits a table may use ([`UpfTables::with_shard_bits`]): the compiler picks more
/// shards for larger session tables, so that a shard (what one rule change rebuilds) holds
/// about the same number of keys at any scale.
pub const MAX_SHARD_BITS: u32 = 18;

/// The shard a lookup key lives in among `1 << bits` (Fibonacci hashing of the key). Uplink
/// keys are the local TEID, downlink keys the UE IPv4 address or the UE IPv6 /64 prefix; the
/// compiler files a session's uplink PDRs in its TEIDs' shards and its downlink PDRs in its
/// UE addresses' shards, so one lookup touches one shard.
#[inline]
pub fn shard_of_in(key: u64, bits: u32) -> usize {
    shard_in(key, 1 << bits)
}

/// The position among `positions` of lookup key `key`: the high word of its Fibonacci hash
/// times the count, which is [`shard_of_in`] when `positions` is `1 << bits`.
#[inline(always)]
pub fn shard_in(key: u64, positions: usize) -> usize {
    ((u128::from(key.wrapping_mul(FIB)) * positions as u128) >> 64) as usize
}

/// 2^64 / the golden ratio, odd: the multiplier of the shard pick's Fibonacci hashing.
const FIB: u64 = 0x9E37_79B9_7F4A_7C15;

/// [`shard_of_in`] with the default [`SHARD_BITS`].
#[inline]
pub fn shard_of(key: u64) -> usize {
    shard_of_in(key, SHARD_BITS)
}

/// One shard of the rule tables. Indices in it (PDR, filter, FAR, QER, session) are local to
/// the shard.
#[derive(Debug, Clone, Default)]
pub struct Shard {
    /// Uplink candidates by local TEID: range into [`Self::pdr_order`]. The compiler files
    /// here only TEIDs without a direct page slot ([`super::pages`]); those with one are in
    /// [`Self::paged_teids`].
    pub by_teid: KeyMap<u32>,
    /// Uplink candidates of TEIDs with a direct page slot, (TEID, range), in no order: the
    /// packet path reads their page slots, built from these, so they need no hash map.
    pub paged_teids: Vec<(u32, (u32, u32))>,
    /// How many leading entries of [`Self::paged_teids`] have, with their rules, the same
    /// page slots as in the shard this one was made from, which is the one its table
    /// position held (the compiler's append path, which copies the old entries and rules
    /// whole): their slots are not made again when the position is updated
    /// ([`super::pages::page_changes`]), which would read every entry's rules. 0 when not
    /// known.
    pub paged_settled: u32,
    /// Downlink candidates by UE IPv4 address.
    pub by_ue_v4: KeyMap<u32>,
    /// Downlink candidates by UE IPv6 /64 prefix (the upper 64 bits).
    pub by_ue_v6: KeyMap<u64>,
    /// PDR indices, each candidate range sorted by precedence.
    pub pdr_order: Vec<u32>,
    pub pdrs: Vec<PdrRule>,
    pub filters: Vec<FlowFilter>,
    pub fars: Vec<FarRule>,
    pub qers: Vec<QerRule>,
    pub sessions: Vec<SessionInfo>,
}

impl Shard {
    /// Fill the [`FastPath`] record of every key whose candidate list is the common case
    /// (see [`FastPath`]); call once the shard's rules are in place. Without it every packet
    /// takes the general path, which gives the same result.
    pub fn index_fast(&mut self) {
        let mut teid = std::mem::take(&mut self.by_teid);
        teid.fill_fast(|r| self.fast_for(r, Direction::Uplink));
        self.by_teid = teid;
        let mut v4 = std::mem::take(&mut self.by_ue_v4);
        v4.fill_fast(|r| self.fast_for(r, Direction::Downlink));
        self.by_ue_v4 = v4;
        let mut v6 = std::mem::take(&mut self.by_ue_v6);
        v6.fill_fast(|r| self.fast_for(r, Direction::Downlink));
        self.by_ue_v6 = v6;
    }

    /// [`Self::index_fast`] for the given keys only (`(key as u64)` of each map): a shard
    /// that only gained keys keeps the records of the others.
    pub fn index_fast_of(&mut self, teid: &[u64], v4: &[u64], v6: &[u64]) {
        let mut m = std::mem::take(&mut self.by_teid);
        m.fill_fast_of(teid, |r| self.fast_for(r, Direction::Uplink));
        self.by_teid = m;
        let mut m = std::mem::take(&mut self.by_ue_v4);
        m.fill_fast_of(v4, |r| self.fast_for(r, Direction::Downlink));
        self.by_ue_v4 = m;
        let mut m = std::mem::take(&mut self.by_ue_v6);
        m.fill_fast_of(v6, |r| self.fast_for(r, Direction::Downlink));
        self.by_ue_v6 = m;
    }

    /// Every uplink TEID with its candidate range: [`Self::by_teid`]'s, then
    /// [`Self::paged_teids`].
    pub fn teids(&self) -> impl Iterator<Item = (u64, (u32, u32))> + '_ {
        self.by_teid
            .iter()
            .chain(self.paged_teids.iter().map(|&(t, r)| (u64::from(t), r)))
    }

    /// The key slot of uplink TEID `teid` with candidate range `range` in this shard, with
    /// its fast-path record: what its page slot holds.
    pub fn uplink_slot(&self, teid: u32, range: (u32, u32)) -> KeySlot {
        KeySlot::new(
            u64::from(teid),
            range,
            self.fast_for(range, Direction::Uplink),
        )
    }

    /// The flattened rules of candidate range `range` if it is one PDR of direction `dir`
    /// without SDF filters, whose QER gates are open and whose FAR forwards (IPv4 outer
    /// header or none); uplink PDRs must remove the GTP-U header.
    fn fast_for(&self, range: (u32, u32), dir: Direction) -> Option<FastPath> {
        if range.1.checked_sub(range.0) != Some(1) {
            return None;
        }
        let pdr = self
            .pdrs
            .get(*self.pdr_order.get(range.0 as usize)? as usize)?;
        if pdr.direction != dir || pdr.filters.0 != pdr.filters.1 {
            return None;
        }
        if dir == Direction::Uplink && !pdr.remove_gtpu {
            return None;
        }
        let far = self.fars.get(pdr.far as usize)?;
        if far.action != FarAction::Forward {
            return None;
        }
        let mut f = FastPath {
            pdr_qfi: pdr.qfi.unwrap_or(FastPath::NO_QFI),
            mark_qfi: pdr.qfi.unwrap_or(0),
            ..FastPath::EMPTY
        };
        if let Some(o) = far.outer {
            match (o.peer, o.local) {
                (IpAddr::V4(peer), IpAddr::V4(local)) => {
                    f.outer_teid = o.teid;
                    f.outer_peer = u32::from(peer);
                    f.outer_local = local.octets();
                    f.flags |= FastPath::OUTER_V4;
                }
                _ => return None,
            }
        }
        let mut k = 0;
        let mut qfi_marked = false;
        for &qi in pdr.qers.iter().filter(|&&i| i != NONE) {
            let q = self.qers.get(qi as usize)?;
            if !q.gate_open {
                return None;
            }
            if let (Some(qfi), false) = (q.qfi, qfi_marked) {
                if dir == Direction::Downlink {
                    f.mark_qfi = qfi;
                }
                qfi_marked = true;
            }
            if q.meter_cfg.is_some() {
                f.meters[k] = q.meter;
                f.meter_qers[k] = qi;
                k += 1;
            }
        }
        // A QFI is 6 bits (TS 38.415 5.5.3.3): a larger one to mark takes the general path,
        // which refuses it, so the fast path's encapsulation need not test it.
        if f.mark_qfi > 63 {
            return None;
        }
        for (d, u) in f.urrs.iter_mut().zip(&pdr.urrs) {
            *d = u.slot;
        }
        Some(f)
    }
}

/// Everything a UPF worker reads, published as one snapshot. Republishing after a PFCP
/// message rebuilds only the shards it touched and shares the rest (`Arc`), and the shard
/// array is an earlier version's brought up to date rather than a copy ([`ShardTable`]), so
/// publish cost does not grow with the number of sessions.
#[derive(Debug, Clone)]
pub struct UpfTables {
    /// Local GTP-U endpoint addresses (N3/N9): UDP 2152 to any other address is not ours.
    pub local_v4: Vec<Ipv4Addr>,
    pub local_v6: Vec<Ipv6Addr>,
    /// Exactly `1 << shard_bits` shards.
    pub shards: ShardTable,
    /// log2 of the number of shards (at most [`MAX_SHARD_BITS`]).
    pub shard_bits: u32,
    /// Highest meter slot + 1 and URR slot + 1 in use: workers size their state arrays.
    pub meter_slots: u32,
    pub urr_slots: u32,
}

impl Default for UpfTables {
    fn default() -> Self {
        UpfTables::with_shard_bits(SHARD_BITS)
    }
}

impl UpfTables {
    /// Empty tables with `1 << bits` shards (`bits` clamped to 1..=[`MAX_SHARD_BITS`]).
    pub fn with_shard_bits(bits: u32) -> Self {
        let bits = bits.clamp(1, MAX_SHARD_BITS);
        let empty = Arc::new(Shard::default());
        UpfTables {
            local_v4: Vec::new(),
            local_v6: Vec::new(),
            shards: ShardTable::new(1 << bits, empty),
            shard_bits: bits,
            meter_slots: 0,
            urr_slots: 0,
        }
    }

    /// The shard index of lookup key `key` in these tables: [`shard_of_in`] with
    /// `shard_bits`, computed as the high word of the same Fibonacci hash times the shard
    /// count (`1 << shard_bits`: `h >> (64 - bits)` is `(h * 2^bits) >> 64`), so the packet
    /// path multiplies by the count the directory's bounds check loads anyway instead of
    /// shifting by a count derived from `shard_bits` (`tests::shard_index_is_shard_of_in`).
    #[inline]
    pub fn shard_index(&self, key: u64) -> usize {
        debug_assert_eq!(self.shards.len(), 1 << self.shard_bits);
        shard_in(key, self.shards.len())
    }

    /// The shard holding uplink rules for `teid`.
    #[inline]
    pub fn teid_shard(&self, teid: u32) -> &Shard {
        self.shards.at(self.shard_index(u64::from(teid)))
    }

    /// The shard holding uplink rules for `teid` and their candidate range, if it has any:
    /// from its page slot, else its shard's map.
    #[inline]
    pub fn teid_candidates(&self, teid: u32) -> Option<(&Shard, (u32, u32))> {
        let shard = self.teid_shard(teid);
        if let Some((page, i)) = self.shards.teid_page(u64::from(teid)) {
            let s = &page[i];
            if s.is_used() && s.key() == u64::from(teid) {
                return Some((shard, s.range()));
            }
        }
        shard.by_teid.get(&teid).map(|&r| (shard, r))
    }

    /// The shard holding downlink rules for UE IPv4 address `ue`.
    #[inline]
    pub fn ue_v4_shard(&self, ue: u32) -> &Shard {
        self.shards.at(self.shard_index(u64::from(ue)))
    }

    /// The shard holding downlink rules for UE IPv6 /64 prefix `prefix64`.
    #[inline]
    pub fn ue_v6_shard(&self, prefix64: u64) -> &Shard {
        self.shards.at(self.shard_index(prefix64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_index_is_shard_of_in() {
        let mut rng = peregrine_testkit::rng::seeded(0x5a4d);
        for bits in 1..=MAX_SHARD_BITS {
            let t = UpfTables::with_shard_bits(bits);
            let keys = (0..2000u64)
                .map(|_| rand_core::RngCore::next_u64(&mut rng))
                .chain([0, 1, u64::MAX, u64::from(u32::MAX)]);
            for k in keys {
                assert_eq!(t.shard_index(k), shard_of_in(k, bits), "{bits} {k:#x}");
                // Both are the top `bits` bits of the Fibonacci hash.
                let top = (k.wrapping_mul(FIB) >> (64 - bits)) as usize;
                assert_eq!(shard_of_in(k, bits), top, "{bits} {k:#x}");
            }
        }
    }

    #[test]
    fn shards_spread_consecutive_keys() {
        // Consecutive TEIDs and UE addresses (what allocators hand out) must not pile up.
        let mut hits = [0u32; NUM_SHARDS];
        for k in 0..(NUM_SHARDS as u64 * 64) {
            hits[shard_of(k)] += 1;
        }
        let (min, max) = (hits.iter().min().unwrap(), hits.iter().max().unwrap());
        assert!(*min >= 48 && *max <= 80, "min {min} max {max}");
        assert_eq!(UpfTables::default().shards.len(), NUM_SHARDS);
        // More shards for big tables: consecutive keys still spread evenly.
        let t = UpfTables::with_shard_bits(15);
        assert_eq!(t.shards.len(), 1 << 15);
        let mut hits = vec![0u32; 1 << 15];
        for k in 0..(64u64 << 15) {
            hits[t.shard_index(k)] += 1;
        }
        let (min, max) = (hits.iter().min().unwrap(), hits.iter().max().unwrap());
        assert!(*min >= 48 && *max <= 80, "min {min} max {max}");
    }

    fn shard_one(far: FarRule, qers: Vec<QerRule>, filters: Vec<FlowFilter>) -> Shard {
        let mut s = Shard::default();
        s.pdr_order.push(0);
        s.filters = filters;
        s.pdrs.push(PdrRule {
            pdr_id: 1,
            session: 0,
            direction: Direction::Downlink,
            qfi: None,
            filters: (0, s.filters.len() as u32),
            remove_gtpu: false,
            far: 0,
            qers: [0, if qers.len() > 1 { 1 } else { NONE }],
            urrs: [UrrRef { slot: 7 }, UrrRef::NONE],
        });
        s.fars.push(far);
        s.qers = qers;
        s.by_ue_v4.insert(42, (0, 1));
        s.index_fast();
        s
    }

    #[test]
    fn fast_path_only_for_the_common_case() {
        let v4 = |a: [u8; 4]| IpAddr::V4(Ipv4Addr::from(a));
        let fwd = FarRule {
            far_id: 1,
            action: FarAction::Forward,
            dst_iface: iface::ACCESS,
            outer: Some(OuterHeader {
                teid: 0x55,
                peer: v4([192, 0, 2, 1]),
                local: v4([192, 0, 2, 2]),
            }),
        };
        let cfg = TrTcmConfig {
            cir: 0,
            cbs: 0,
            pir: 1000,
            pbs: 1000,
            mode: crate::qos::ColourMode::Blind,
        };
        let qer = QerRule {
            qer_id: 1,
            gate_open: true,
            meter_cfg: Some(cfg),
            pacer: None,
            meter: MeterRef {
                slot: 3,
                generation: 2,
            },
            qfi: Some(9),
        };
        let s = shard_one(fwd, vec![qer], vec![]);
        let f = *s.by_ue_v4.slot(42).unwrap().fast().unwrap();
        assert_eq!(f.mark_qfi, 9);
        assert_eq!(f.meters[0].slot, 3);
        assert_eq!(f.meter_qers, [0, NONE]);
        assert_eq!(f.urrs, [7, NONE]);
        assert_eq!(f.outer(), fwd.outer);
        // A closed gate, a dropping FAR, an IPv6 outer header or an SDF filter: general path.
        let closed = QerRule {
            gate_open: false,
            ..qer
        };
        assert!(shard_one(fwd, vec![closed], vec![])
            .by_ue_v4
            .slot(42)
            .unwrap()
            .fast()
            .is_none());
        let drop = FarRule {
            action: FarAction::Drop,
            ..fwd
        };
        assert!(shard_one(drop, vec![qer], vec![])
            .by_ue_v4
            .slot(42)
            .unwrap()
            .fast()
            .is_none());
        let v6 = FarRule {
            outer: Some(OuterHeader {
                teid: 1,
                peer: IpAddr::V6(Ipv6Addr::LOCALHOST),
                local: IpAddr::V6(Ipv6Addr::LOCALHOST),
            }),
            ..fwd
        };
        assert!(shard_one(v6, vec![qer], vec![])
            .by_ue_v4
            .slot(42)
            .unwrap()
            .fast()
            .is_none());
        let any = FlowFilter {
            proto: None,
            src: None,
            dst: None,
            src_ports: None,
            dst_ports: None,
        };
        assert!(shard_one(fwd, vec![qer], vec![any])
            .by_ue_v4
            .slot(42)
            .unwrap()
            .fast()
            .is_none());
        // Re-inserting a key clears its record until the shard is indexed again.
        let mut s = shard_one(fwd, vec![qer], vec![]);
        s.by_ue_v4.insert(42, (0, 1));
        assert!(s.by_ue_v4.slot(42).unwrap().fast().is_none());
    }
}
