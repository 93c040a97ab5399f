//! The compiled UPF rule tables: what the control core's rule compiler builds from PFCP
//! session state (TS 29.244 section 5.2) and publishes to the workers as one immutable
//! snapshot (`runtime::snapshot`).
//!
//! Lookup order (DESIGN.md section 1): an exact match picks the candidate rule list,
//! uplink by local TEID (the F-TEID of the PDI), downlink by UE IPv4 address or UE IPv6 /64
//! prefix; the list is ordered by PDR precedence (lower value first, section 5.2.1) and the
//! first PDR whose remaining PDI fields match (source interface, QFI, SDF filters) wins.
//!
//! Indices, not pointers: a PDR names its FAR, QERs and URRs by index into the table's
//! vectors, so the whole snapshot is a handful of flat allocations, cheap to build and to
//! free. Meter and usage-counter *state* is not in the snapshot (it is mutable and per
//! worker); the snapshot carries stable slot numbers ([`MeterRef`], [`UrrRef`]) that the
//! compiler keeps for a rule's whole life, so state survives republishing.

use crate::qos::trtcm::TrTcmConfig;
use rustc_hash::FxHashMap;
use std::net::{Ipv4Addr, Ipv6Addr};
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

/// A compiled QoS Enforcement Rule for one direction (a PFCP QER becomes up to two).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QerRule {
    pub qer_id: u32,
    /// Gate Status for this direction (section 8.2.7): closed drops everything.
    pub gate_open: bool,
    /// TrTCM for this direction's MBR (PIR) and GBR (CIR), bytes and bytes/s; `None` = no
    /// MBR = no limit.
    pub meter_cfg: Option<TrTcmConfig>,
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

/// log2 of the number of shards.
pub const SHARD_BITS: u32 = 8;
/// Number of shards a [`UpfTables`] is split into.
pub const NUM_SHARDS: usize = 1 << SHARD_BITS;

/// The shard a lookup key lives in (Fibonacci hashing of the key). Uplink keys are the local
/// TEID, downlink keys the UE IPv4 address or the UE IPv6 /64 prefix; the compiler files a
/// session's uplink PDRs in its TEIDs' shards and its downlink PDRs in its UE addresses'
/// shards, so one lookup touches one shard.
#[inline]
pub fn shard_of(key: u64) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SHARD_BITS)) as usize
}

/// One shard of the rule tables. Indices in it (PDR, filter, FAR, QER, session) are local to
/// the shard.
#[derive(Debug, Clone, Default)]
pub struct Shard {
    /// Uplink candidates by local TEID: range into [`Self::pdr_order`].
    pub by_teid: FxHashMap<u32, (u32, u32)>,
    /// Downlink candidates by UE IPv4 address.
    pub by_ue_v4: FxHashMap<u32, (u32, u32)>,
    /// Downlink candidates by UE IPv6 /64 prefix (the upper 64 bits).
    pub by_ue_v6: FxHashMap<u64, (u32, u32)>,
    /// PDR indices, each candidate range sorted by precedence.
    pub pdr_order: Vec<u32>,
    pub pdrs: Vec<PdrRule>,
    pub filters: Vec<FlowFilter>,
    pub fars: Vec<FarRule>,
    pub qers: Vec<QerRule>,
    pub sessions: Vec<SessionInfo>,
}

/// Everything a UPF worker reads, published as one snapshot. Republishing after a PFCP
/// message rebuilds only the shards it touched and shares the rest (`Arc`), so publish cost
/// does not grow with the number of sessions.
#[derive(Debug, Clone)]
pub struct UpfTables {
    /// Local GTP-U endpoint addresses (N3/N9): UDP 2152 to any other address is not ours.
    pub local_v4: Vec<Ipv4Addr>,
    pub local_v6: Vec<Ipv6Addr>,
    /// Exactly [`NUM_SHARDS`] shards.
    pub shards: Vec<Arc<Shard>>,
    /// Highest meter slot + 1 and URR slot + 1 in use: workers size their state arrays.
    pub meter_slots: u32,
    pub urr_slots: u32,
}

impl Default for UpfTables {
    fn default() -> Self {
        let empty = Arc::new(Shard::default());
        UpfTables {
            local_v4: Vec::new(),
            local_v6: Vec::new(),
            shards: vec![empty; NUM_SHARDS],
            meter_slots: 0,
            urr_slots: 0,
        }
    }
}

impl UpfTables {
    /// The shard holding uplink rules for `teid`.
    #[inline]
    pub fn teid_shard(&self, teid: u32) -> &Shard {
        &self.shards[shard_of(u64::from(teid))]
    }

    /// The shard holding downlink rules for UE IPv4 address `ue`.
    #[inline]
    pub fn ue_v4_shard(&self, ue: u32) -> &Shard {
        &self.shards[shard_of(u64::from(ue))]
    }

    /// The shard holding downlink rules for UE IPv6 /64 prefix `prefix64`.
    #[inline]
    pub fn ue_v6_shard(&self, prefix64: u64) -> &Shard {
        &self.shards[shard_of(prefix64)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
