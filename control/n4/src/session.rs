//! Session state: plain Rust rules converted from the PFCP Create/Update IEs
//! (TS 29.244 section 7.5.2 Create PDR/FAR/URR/QER, section 7.5.4 Update/Remove), kept for
//! the rule compiler, plus the transactional edit logic used by the node.

use crate::rulemap::RuleMap;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use peregrine_pfcp::cause;
use peregrine_pfcp::ie::{
    ie_type as t, BitRate, Bitmap, FSeid, FTeid, FailedRuleId, GateStatus, Grouped, Ie,
    OuterHeaderCreation, OuterHeaderRemoval, SdfFilter, UeIpAddress, Volume,
};

/// Why a rule edit was refused: the Cause (section 8.2.1) and Offending IE (section 8.2.22)
/// to put in the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reject {
    pub cause: u8,
    pub offending_ie: Option<u16>,
    /// Failed Rule ID (section 8.2.80), sent with cause 73 when the failing rule is known.
    pub failed_rule: Option<FailedRuleId>,
}

impl Reject {
    pub(crate) fn new(cause: u8, offending_ie: Option<u16>) -> Reject {
        Reject {
            cause,
            offending_ie,
            failed_rule: None,
        }
    }
    pub(crate) fn rule(ie: u16) -> Reject {
        Reject::new(cause::RULE_CREATION_MODIFICATION_FAILURE, Some(ie))
    }
    pub(crate) fn missing(ie: u16) -> Reject {
        Reject::new(cause::MANDATORY_IE_MISSING, Some(ie))
    }
    pub(crate) fn conditional(ie: u16) -> Reject {
        Reject::new(cause::CONDITIONAL_IE_MISSING, Some(ie))
    }
    /// Name the failing rule; kept only for cause 73 (tables 7.5.3.1-1 / 7.5.5.1-1: Failed
    /// Rule ID is present when the cause is "Rule creation/modification failure").
    pub(crate) fn at(mut self, rule: FailedRuleId) -> Reject {
        if self.cause == cause::RULE_CREATION_MODIFICATION_FAILURE && self.failed_rule.is_none() {
            self.failed_rule = Some(rule);
        }
        self
    }
}

/// A local (UPF-side) F-TEID after CHOOSE resolution (section 8.2.3 with CH = 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LocalFTeid {
    pub teid: u32,
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
}

impl LocalFTeid {
    fn to_ie(self) -> FTeid {
        FTeid::Assigned {
            teid: self.teid,
            ipv4: self.ipv4,
            ipv6: self.ipv6,
        }
    }
}

/// Packet Detection Information (table 7.5.2.2-2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pdi {
    /// Source Interface (section 8.2.2): 0 access, 1 core, 2 SGi-LAN/N6-LAN, 3 CP-function.
    pub source_interface: u8,
    /// Local F-TEID, CHOOSE already resolved.
    pub f_teid: Option<LocalFTeid>,
    /// Network Instance in label encoding.
    pub network_instance: Option<Vec<u8>>,
    pub ue_ip: Option<UeIpAddress>,
    pub sdf_filters: Vec<SdfFilter>,
    pub qfi: Option<u8>,
}

/// Packet Detection Rule (table 7.5.2.2-1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pdr {
    pub id: u16,
    pub precedence: u32,
    pub pdi: Pdi,
    pub outer_header_removal: Option<OuterHeaderRemoval>,
    pub far_id: u32,
    pub qer_ids: Vec<u32>,
    pub urr_ids: Vec<u32>,
}

/// Forwarding Parameters (table 7.5.2.3-2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardingParameters {
    /// Destination Interface (section 8.2.24).
    pub destination_interface: u8,
    pub network_instance: Option<Vec<u8>>,
    pub outer_header_creation: Option<OuterHeaderCreation>,
}

/// Forwarding Action Rule (table 7.5.2.3-1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Far {
    pub id: u32,
    /// Apply Action (section 8.2.26), see [`peregrine_pfcp::ie::apply_action`].
    pub apply_action: Bitmap,
    pub forwarding: Option<ForwardingParameters>,
    /// BAR ID (section 8.2.88): the session's BAR applies while buffering.
    pub bar_id: Option<u8>,
}

/// Buffering Action Rule (table 7.5.2.6-1), the basic form: buffering itself is the
/// dataplane's; the N4 node keeps the rule and reports the first downlink packet (see
/// [`crate::Node::downlink_data`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bar {
    pub id: u8,
    /// Suggested Buffering Packets Count (section 8.2.112), for the dataplane's buffer.
    pub suggested_buffering_packets_count: Option<u8>,
}

/// QoS Enforcement Rule (table 7.5.2.5-1). No MBR means no limit (section 5.4.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qer {
    pub id: u32,
    pub gate: GateStatus,
    pub mbr: Option<BitRate>,
    pub gbr: Option<BitRate>,
    pub qfi: Option<u8>,
}

/// Usage Reporting Rule (table 7.5.2.4-1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Urr {
    pub id: u32,
    /// Measurement Method (section 8.2.40).
    pub measurement_method: Bitmap,
    /// Reporting Triggers (section 8.2.19).
    pub reporting_triggers: Bitmap,
    pub volume_threshold: Option<Volume>,
    /// Seconds.
    pub time_threshold: Option<u32>,
    pub volume_quota: Option<Volume>,
    /// Seconds.
    pub measurement_period: Option<u32>,
}

/// One PFCP session (section 5.2) as seen by the rule compiler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Our (UP) SEID; the key of the session table.
    pub up_seid: u64,
    /// The CP F-SEID; its SEID goes in the header of our responses (section 7.2.2.4.2).
    pub cp_f_seid: FSeid,
    /// The CP function that owns the session (its association).
    pub peer: SocketAddr,
    // Sorted `Vec`s, not `BTreeMap`s: a session has a few rules and a B-tree leaf per map
    // made a session cost ~6.5 KiB.
    pub pdrs: RuleMap<u16, Pdr>,
    pub fars: RuleMap<u32, Far>,
    pub qers: RuleMap<u32, Qer>,
    pub urrs: RuleMap<u32, Urr>,
    /// At most one BAR per session (Create BAR appears once, table 7.5.2.1-1).
    pub bar: Option<Bar>,
}

macro_rules! find {
    ($g:expr, $pat:path) => {
        $g.ies.iter().find_map(|i| match i {
            $pat(v) => Some(v.clone()),
            _ => None,
        })
    };
}

macro_rules! find_all {
    ($g:expr, $pat:path) => {
        $g.ies
            .iter()
            .filter_map(|i| match i {
                $pat(v) => Some(v.clone()),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
}

/// F-TEID resolution for one request (section 5.5.3 "F-TEID allocation in the UP function").
///
/// Works on copies; [`TeidAlloc::finish`] hands back what the node commits on success.
pub(crate) struct TeidAlloc<'a> {
    /// TEIDs in use by all sessions, with their owner SEID.
    in_use: &'a BTreeMap<u32, u64>,
    seid: u64,
    n3: (Option<Ipv4Addr>, Option<Ipv6Addr>),
    ftup: bool,
    next: u32,
    fresh: BTreeSet<u32>,
    /// CP-assigned TEIDs seen in this request (may repeat across PDRs of the session).
    assigned: BTreeSet<u32>,
    /// CHOOSE ID -> allocation, scoped to the request.
    chid: BTreeMap<u8, LocalFTeid>,
    /// Created PDR IEs for the response (table 7.5.3.2-1).
    pub(crate) created: Vec<Grouped>,
}

impl<'a> TeidAlloc<'a> {
    pub(crate) fn new(
        in_use: &'a BTreeMap<u32, u64>,
        seid: u64,
        n3: (Option<Ipv4Addr>, Option<Ipv6Addr>),
        ftup: bool,
        next: u32,
    ) -> Self {
        TeidAlloc {
            in_use,
            seid,
            n3,
            ftup,
            next,
            fresh: BTreeSet::new(),
            assigned: BTreeSet::new(),
            chid: BTreeMap::new(),
            created: Vec::new(),
        }
    }

    /// The next-TEID counter to store after a successful commit.
    pub(crate) fn next_teid(&self) -> u32 {
        self.next
    }

    fn taken(&self, teid: u32) -> bool {
        self.fresh.contains(&teid) || self.in_use.get(&teid).is_some_and(|&o| o != self.seid)
    }

    /// Resolve the F-TEID of a PDR being created.
    ///
    /// * CH = 0: accepted as given unless another session already uses the TEID (cause 73,
    ///   Offending IE F-TEID).
    /// * CH = 1 without FTUP in our UP Function Features: cause 71 "Invalid F-TEID allocation
    ///   option" (section 8.2.1).
    /// * CH = 1: a fresh TEID on our N3 address(es) of the flagged families. If none of the
    ///   flagged families is served, cause 73 "Rule creation/modification failure" with Offending
    ///   IE F-TEID: the section 5.5.3 procedure names no cause for this case, the request is
    ///   well formed (so not 69), and the failure is the PDR's creation.
    /// * CHID: PDRs of the request with the same CHOOSE ID share one allocation.
    fn resolve(&mut self, pdr_id: u16, f: FTeid) -> Result<LocalFTeid, Reject> {
        match f {
            FTeid::Assigned { teid, ipv4, ipv6 } => {
                if teid == 0 || self.taken(teid) {
                    return Err(Reject::rule(t::F_TEID));
                }
                self.assigned.insert(teid);
                Ok(LocalFTeid { teid, ipv4, ipv6 })
            }
            FTeid::Choose { v4, v6, choose_id } => {
                if !self.ftup {
                    return Err(Reject::new(
                        cause::INVALID_F_TEID_ALLOCATION_OPTION,
                        Some(t::F_TEID),
                    ));
                }
                let shared = choose_id.and_then(|c| self.chid.get(&c).copied());
                let local = match shared {
                    Some(l) => l,
                    None => {
                        let ipv4 = if v4 { self.n3.0 } else { None };
                        let ipv6 = if v6 { self.n3.1 } else { None };
                        if ipv4.is_none() && ipv6.is_none() {
                            return Err(Reject::rule(t::F_TEID));
                        }
                        let teid = self
                            .alloc()
                            .ok_or(Reject::new(cause::NO_RESOURCES_AVAILABLE, Some(t::F_TEID)))?;
                        let l = LocalFTeid { teid, ipv4, ipv6 };
                        if let Some(c) = choose_id {
                            self.chid.insert(c, l);
                        }
                        l
                    }
                };
                self.created.push(Grouped::new(
                    t::CREATED_PDR,
                    vec![Ie::PdrId(pdr_id), Ie::FTeid(local.to_ie())],
                ));
                Ok(local)
            }
        }
    }

    fn alloc(&mut self) -> Option<u32> {
        let tries = self.in_use.len() + self.fresh.len() + self.assigned.len() + 2;
        for _ in 0..tries {
            let c = self.next;
            self.next = self.next.wrapping_add(1).max(1);
            if c != 0
                && !self.fresh.contains(&c)
                && !self.assigned.contains(&c)
                && !self.in_use.contains_key(&c)
            {
                self.fresh.insert(c);
                return Some(c);
            }
        }
        None
    }
}

fn pdi_from(g: &Grouped, pdr_id: u16, alloc: &mut TeidAlloc<'_>) -> Result<Pdi, Reject> {
    let f_teid = match find!(g, Ie::FTeid) {
        Some(f) => Some(alloc.resolve(pdr_id, f)?),
        None => None,
    };
    let ue_ip = find!(g, Ie::UeIpAddress);
    if ue_ip.is_some_and(|u| u.chv4 || u.chv6) {
        // UE IP allocation by the UP function (UEIP feature) is not offered.
        return Err(Reject::rule(t::UE_IP_ADDRESS));
    }
    Ok(Pdi {
        source_interface: find!(g, Ie::SourceInterface)
            .ok_or(Reject::missing(t::SOURCE_INTERFACE))?,
        f_teid,
        network_instance: find!(g, Ie::NetworkInstance),
        ue_ip,
        sdf_filters: find_all!(g, Ie::SdfFilter),
        qfi: find!(g, Ie::Qfi),
    })
}

/// Create PDR (table 7.5.2.2-1). A missing FAR ID is cause 67 (its condition, no predefined
/// rules activated, always holds here).
pub(crate) fn pdr_from_create(g: &Grouped, alloc: &mut TeidAlloc<'_>) -> Result<Pdr, Reject> {
    let id = g.pdr_id().ok_or(Reject::missing(t::PDR_ID))?;
    let pdi_g = g.group(t::PDI).ok_or(Reject::missing(t::PDI))?;
    Ok(Pdr {
        id,
        precedence: find!(g, Ie::Precedence).ok_or(Reject::missing(t::PRECEDENCE))?,
        pdi: pdi_from(pdi_g, id, alloc)?,
        outer_header_removal: find!(g, Ie::OuterHeaderRemoval),
        far_id: g.far_id().ok_or(Reject::conditional(t::FAR_ID))?,
        qer_ids: find_all!(g, Ie::QerId),
        urr_ids: find_all!(g, Ie::UrrId),
    })
}

fn fwd_from(g: &Grouped) -> Result<ForwardingParameters, Reject> {
    Ok(ForwardingParameters {
        destination_interface: find!(g, Ie::DestinationInterface)
            .ok_or(Reject::missing(t::DESTINATION_INTERFACE))?,
        network_instance: find!(g, Ie::NetworkInstance),
        outer_header_creation: find!(g, Ie::OuterHeaderCreation),
    })
}

/// Create FAR (table 7.5.2.3-1).
pub(crate) fn far_from_create(g: &Grouped) -> Result<Far, Reject> {
    Ok(Far {
        id: g.far_id().ok_or(Reject::missing(t::FAR_ID))?,
        apply_action: find!(g, Ie::ApplyAction).ok_or(Reject::missing(t::APPLY_ACTION))?,
        forwarding: match g.group(t::FORWARDING_PARAMETERS) {
            Some(f) => Some(fwd_from(f)?),
            None => None,
        },
        bar_id: find!(g, Ie::BarId),
    })
}

/// Create BAR (table 7.5.2.6-1) / Update BAR (table 7.5.4.14-1).
pub(crate) fn bar_from(g: &Grouped) -> Result<Bar, Reject> {
    Ok(Bar {
        id: find!(g, Ie::BarId).ok_or(Reject::missing(t::BAR_ID))?,
        suggested_buffering_packets_count: find!(g, Ie::SuggestedBufferingPacketsCount),
    })
}

/// Create QER (table 7.5.2.5-1).
pub(crate) fn qer_from_create(g: &Grouped) -> Result<Qer, Reject> {
    Ok(Qer {
        id: find!(g, Ie::QerId).ok_or(Reject::missing(t::QER_ID))?,
        gate: find!(g, Ie::GateStatus).ok_or(Reject::missing(t::GATE_STATUS))?,
        mbr: find!(g, Ie::Mbr),
        gbr: find!(g, Ie::Gbr),
        qfi: find!(g, Ie::Qfi),
    })
}

/// Create URR (table 7.5.2.4-1).
pub(crate) fn urr_from_create(g: &Grouped) -> Result<Urr, Reject> {
    Ok(Urr {
        id: find!(g, Ie::UrrId).ok_or(Reject::missing(t::URR_ID))?,
        measurement_method: find!(g, Ie::MeasurementMethod)
            .ok_or(Reject::missing(t::MEASUREMENT_METHOD))?,
        reporting_triggers: find!(g, Ie::ReportingTriggers)
            .ok_or(Reject::missing(t::REPORTING_TRIGGERS))?,
        volume_threshold: find!(g, Ie::VolumeThreshold),
        time_threshold: find!(g, Ie::TimeThreshold),
        volume_quota: find!(g, Ie::VolumeQuota),
        measurement_period: find!(g, Ie::MeasurementPeriod),
    })
}

fn insert_new<K: Ord, V>(m: &mut RuleMap<K, V>, k: K, v: V, ie: u16) -> Result<(), Reject> {
    if m.contains_key(&k) {
        return Err(Reject::rule(ie));
    }
    m.insert(k, v);
    Ok(())
}

/// The rule edits of one request (Establishment: only creates).
#[derive(Debug, Default)]
pub(crate) struct Edits<'a> {
    pub remove_pdr: &'a [Grouped],
    pub remove_far: &'a [Grouped],
    pub remove_urr: &'a [Grouped],
    pub remove_qer: &'a [Grouped],
    pub create_pdr: &'a [Grouped],
    pub create_far: &'a [Grouped],
    pub create_urr: &'a [Grouped],
    pub create_qer: &'a [Grouped],
    pub update_pdr: &'a [Grouped],
    pub update_far: &'a [Grouped],
    pub update_urr: &'a [Grouped],
    pub update_qer: &'a [Grouped],
    pub remove_bar: Option<&'a Grouped>,
    pub create_bar: Option<&'a Grouped>,
    pub update_bar: Option<&'a Grouped>,
}

impl Session {
    pub(crate) fn new(up_seid: u64, cp_f_seid: FSeid, peer: SocketAddr) -> Session {
        Session {
            up_seid,
            cp_f_seid,
            peer,
            pdrs: RuleMap::new(),
            fars: RuleMap::new(),
            qers: RuleMap::new(),
            urrs: RuleMap::new(),
            bar: None,
        }
    }

    /// Local TEIDs used by the session's PDRs.
    pub fn teids(&self) -> BTreeSet<u32> {
        self.pdrs
            .values()
            .filter_map(|p| p.pdi.f_teid.map(|f| f.teid))
            .collect()
    }

    /// Apply `e` to this (scratch) session: removes, then creates, then updates, then check
    /// that every PDR's FAR / QER / URR references resolve (section 7.5.4: the request is
    /// applied as a whole or rejected). Any error leaves the caller to drop the scratch copy.
    pub(crate) fn apply(&mut self, e: &Edits<'_>, alloc: &mut TeidAlloc<'_>) -> Result<(), Reject> {
        use FailedRuleId as R;
        for g in e.remove_pdr {
            let id = g.pdr_id().ok_or(Reject::missing(t::PDR_ID))?;
            self.pdrs
                .remove(&id)
                .ok_or(Reject::rule(t::PDR_ID).at(R::Pdr(id)))?;
        }
        for g in e.remove_far {
            let id = g.far_id().ok_or(Reject::missing(t::FAR_ID))?;
            self.fars
                .remove(&id)
                .ok_or(Reject::rule(t::FAR_ID).at(R::Far(id)))?;
        }
        for g in e.remove_urr {
            let id = find!(g, Ie::UrrId).ok_or(Reject::missing(t::URR_ID))?;
            self.urrs
                .remove(&id)
                .ok_or(Reject::rule(t::URR_ID).at(R::Urr(id)))?;
        }
        for g in e.remove_qer {
            let id = find!(g, Ie::QerId).ok_or(Reject::missing(t::QER_ID))?;
            self.qers
                .remove(&id)
                .ok_or(Reject::rule(t::QER_ID).at(R::Qer(id)))?;
        }
        if let Some(g) = e.remove_bar {
            let id = find!(g, Ie::BarId).ok_or(Reject::missing(t::BAR_ID))?;
            if self.bar.as_ref().map(|b| b.id) != Some(id) {
                return Err(Reject::rule(t::BAR_ID).at(R::Bar(id)));
            }
            self.bar = None;
        }
        for g in e.create_far {
            let f = far_from_create(g)?;
            let id = f.id;
            insert_new(&mut self.fars, id, f, t::FAR_ID).map_err(|r| r.at(R::Far(id)))?;
        }
        for g in e.create_qer {
            let q = qer_from_create(g)?;
            let id = q.id;
            insert_new(&mut self.qers, id, q, t::QER_ID).map_err(|r| r.at(R::Qer(id)))?;
        }
        for g in e.create_urr {
            let u = urr_from_create(g)?;
            let id = u.id;
            insert_new(&mut self.urrs, id, u, t::URR_ID).map_err(|r| r.at(R::Urr(id)))?;
        }
        if let Some(g) = e.create_bar {
            let b = bar_from(g)?;
            if self.bar.is_some() {
                return Err(Reject::rule(t::BAR_ID).at(R::Bar(b.id)));
            }
            self.bar = Some(b);
        }
        for g in e.create_pdr {
            let at = |r: Reject| match g.pdr_id() {
                Some(id) => r.at(R::Pdr(id)),
                None => r,
            };
            // Reject a duplicate before resolving its F-TEID.
            if g.pdr_id().is_some_and(|id| self.pdrs.contains_key(&id)) {
                return Err(at(Reject::rule(t::PDR_ID)));
            }
            let p = pdr_from_create(g, alloc).map_err(at)?;
            insert_new(&mut self.pdrs, p.id, p, t::PDR_ID).map_err(at)?;
        }
        for g in e.update_pdr {
            self.update_pdr(g)
                .map_err(|r| g.pdr_id().map_or(r, |id| r.at(R::Pdr(id))))?;
        }
        for g in e.update_far {
            self.update_far(g)
                .map_err(|r| g.far_id().map_or(r, |id| r.at(R::Far(id))))?;
        }
        if let Some(g) = e.update_bar {
            let b = bar_from(g)?;
            match &mut self.bar {
                Some(cur) if cur.id == b.id => {
                    if b.suggested_buffering_packets_count.is_some() {
                        cur.suggested_buffering_packets_count = b.suggested_buffering_packets_count;
                    }
                }
                _ => return Err(Reject::rule(t::BAR_ID).at(R::Bar(b.id))),
            }
        }
        for g in e.update_qer {
            let id = find!(g, Ie::QerId).ok_or(Reject::missing(t::QER_ID))?;
            let q = self
                .qers
                .get_mut(&id)
                .ok_or(Reject::rule(t::QER_ID).at(R::Qer(id)))?;
            if let Some(v) = find!(g, Ie::GateStatus) {
                q.gate = v;
            }
            if let Some(v) = find!(g, Ie::Mbr) {
                q.mbr = Some(v);
            }
            if let Some(v) = find!(g, Ie::Gbr) {
                q.gbr = Some(v);
            }
            if let Some(v) = find!(g, Ie::Qfi) {
                q.qfi = Some(v);
            }
        }
        for g in e.update_urr {
            let id = find!(g, Ie::UrrId).ok_or(Reject::missing(t::URR_ID))?;
            let u = self
                .urrs
                .get_mut(&id)
                .ok_or(Reject::rule(t::URR_ID).at(R::Urr(id)))?;
            if let Some(v) = find!(g, Ie::MeasurementMethod) {
                u.measurement_method = v;
            }
            if let Some(v) = find!(g, Ie::ReportingTriggers) {
                u.reporting_triggers = v;
            }
            if let Some(v) = find!(g, Ie::VolumeThreshold) {
                u.volume_threshold = Some(v);
            }
            if let Some(v) = find!(g, Ie::TimeThreshold) {
                u.time_threshold = Some(v);
            }
            if let Some(v) = find!(g, Ie::VolumeQuota) {
                u.volume_quota = Some(v);
            }
            if let Some(v) = find!(g, Ie::MeasurementPeriod) {
                u.measurement_period = Some(v);
            }
        }
        self.check_refs()
    }

    /// Update PDR (table 7.5.4.2-1): present members replace the stored ones; QER / URR IDs,
    /// when any is present, replace the whole list. A PDI whose F-TEID has CH = 1 keeps the
    /// PDR's current local F-TEID (no Updated PDR IE is sent); if the PDR has none, cause 73.
    fn update_pdr(&mut self, g: &Grouped) -> Result<(), Reject> {
        let id = g.pdr_id().ok_or(Reject::missing(t::PDR_ID))?;
        let seid = self.up_seid;
        let p = self.pdrs.get_mut(&id).ok_or(Reject::rule(t::PDR_ID))?;
        if let Some(v) = find!(g, Ie::Precedence) {
            p.precedence = v;
        }
        if let Some(pg) = g.group(t::PDI) {
            let f_teid = match find!(pg, Ie::FTeid) {
                None => None,
                Some(FTeid::Choose { .. }) => Some(p.pdi.f_teid.ok_or(Reject::rule(t::F_TEID))?),
                Some(FTeid::Assigned { teid, ipv4, ipv6 }) => Some(LocalFTeid { teid, ipv4, ipv6 }),
            };
            // Reuse the creation path without allocation: strip the F-TEID first.
            let mut stripped = pg.clone();
            stripped.ies.retain(|i| i.ie_type() != t::F_TEID);
            let empty = BTreeMap::new();
            let mut none = TeidAlloc::new(&empty, seid, (None, None), false, 1);
            let mut pdi = pdi_from(&stripped, id, &mut none)?;
            pdi.f_teid = f_teid;
            p.pdi = pdi;
        }
        if let Some(v) = find!(g, Ie::OuterHeaderRemoval) {
            p.outer_header_removal = Some(v);
        }
        if let Some(v) = g.far_id() {
            p.far_id = v;
        }
        let q = find_all!(g, Ie::QerId);
        if !q.is_empty() {
            p.qer_ids = q;
        }
        let u = find_all!(g, Ie::UrrId);
        if !u.is_empty() {
            p.urr_ids = u;
        }
        Ok(())
    }

    /// Update FAR (table 7.5.4.3-1) with Update Forwarding Parameters (table 7.5.4.3-2).
    fn update_far(&mut self, g: &Grouped) -> Result<(), Reject> {
        let id = g.far_id().ok_or(Reject::missing(t::FAR_ID))?;
        let f = self.fars.get_mut(&id).ok_or(Reject::rule(t::FAR_ID))?;
        if let Some(v) = find!(g, Ie::ApplyAction) {
            f.apply_action = v;
        }
        if let Some(u) = g.group(t::UPDATE_FORWARDING_PARAMETERS) {
            let dest = find!(u, Ie::DestinationInterface);
            let fp = match (&mut f.forwarding, dest) {
                (Some(fp), _) => fp,
                (None, Some(d)) => f.forwarding.insert(ForwardingParameters {
                    destination_interface: d,
                    network_instance: None,
                    outer_header_creation: None,
                }),
                (None, None) => return Err(Reject::conditional(t::DESTINATION_INTERFACE)),
            };
            if let Some(d) = dest {
                fp.destination_interface = d;
            }
            if let Some(v) = find!(u, Ie::NetworkInstance) {
                fp.network_instance = Some(v);
            }
            if let Some(v) = find!(u, Ie::OuterHeaderCreation) {
                fp.outer_header_creation = Some(v);
            }
        }
        if let Some(v) = find!(g, Ie::BarId) {
            f.bar_id = Some(v);
        }
        Ok(())
    }

    /// Every PDR's FAR, QER and URR IDs and every FAR's BAR ID name rules of this session
    /// (cause 73, Offending IE the dangling ID's type, Failed Rule ID the referring rule).
    pub(crate) fn check_refs(&self) -> Result<(), Reject> {
        for p in self.pdrs.values() {
            let at = FailedRuleId::Pdr(p.id);
            if !self.fars.contains_key(&p.far_id) {
                return Err(Reject::rule(t::FAR_ID).at(at));
            }
            if p.qer_ids.iter().any(|q| !self.qers.contains_key(q)) {
                return Err(Reject::rule(t::QER_ID).at(at));
            }
            if p.urr_ids.iter().any(|u| !self.urrs.contains_key(u)) {
                return Err(Reject::rule(t::URR_ID).at(at));
            }
        }
        for f in self.fars.values() {
            if f.bar_id.is_some() && f.bar_id != self.bar.as_ref().map(|b| b.id) {
                return Err(Reject::rule(t::BAR_ID).at(FailedRuleId::Far(f.id)));
            }
        }
        Ok(())
    }

    /// The PDR using local TEID `teid`, if any.
    pub(crate) fn pdr_with_teid(&self, teid: u32) -> Option<u16> {
        self.pdrs
            .values()
            .find(|p| p.pdi.f_teid.is_some_and(|f| f.teid == teid))
            .map(|p| p.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choose(chid: Option<u8>) -> FTeid {
        FTeid::Choose {
            v4: true,
            v6: false,
            choose_id: chid,
        }
    }

    const N3: (Option<Ipv4Addr>, Option<Ipv6Addr>) = (Some(Ipv4Addr::new(192, 0, 2, 1)), None);

    #[test]
    fn allocator_skips_used_zero_and_wraps() {
        let used: BTreeMap<u32, u64> = [(u32::MAX, 9), (1, 9)].into();
        let mut a = TeidAlloc::new(&used, 5, N3, true, u32::MAX);
        // u32::MAX used, wraps past 0, 1 used -> 2.
        assert_eq!(a.resolve(1, choose(None)).unwrap().teid, 2);
        assert_eq!(a.resolve(2, choose(None)).unwrap().teid, 3);
        assert_eq!(a.created.len(), 2);
        assert_eq!(a.next_teid(), 4);
    }

    #[test]
    fn chid_shared_and_assigned_rules() {
        let used: BTreeMap<u32, u64> = [(7, 9), (8, 5)].into();
        let mut a = TeidAlloc::new(&used, 5, N3, true, 1);
        let x = a.resolve(1, choose(Some(3))).unwrap();
        assert_eq!(a.resolve(2, choose(Some(3))).unwrap(), x);
        assert_ne!(a.resolve(3, choose(Some(4))).unwrap(), x);
        // TEID of another session, TEID 0, or one we just allocated: 73.
        for teid in [7, 0, x.teid] {
            let e = a.resolve(
                4,
                FTeid::Assigned {
                    teid,
                    ipv4: N3.0,
                    ipv6: None,
                },
            );
            assert_eq!(e, Err(Reject::rule(t::F_TEID)), "teid {teid}");
        }
        // Our own session's TEID, twice (PDRs sharing a CP-assigned F-TEID): fine.
        for pdr in [5, 6] {
            a.resolve(
                pdr,
                FTeid::Assigned {
                    teid: 8,
                    ipv4: N3.0,
                    ipv6: None,
                },
            )
            .unwrap();
        }
        // IPv6 not served.
        let v6 = FTeid::Choose {
            v4: false,
            v6: true,
            choose_id: None,
        };
        assert_eq!(a.resolve(7, v6), Err(Reject::rule(t::F_TEID)));
    }

    #[test]
    fn update_pdr_choose_keeps_current_fteid() {
        let peer = "10.0.0.1:8805".parse().unwrap();
        let fseid = FSeid {
            seid: 1,
            ipv4: None,
            ipv6: None,
        };
        let mut s = Session::new(1, fseid, peer);
        let used = BTreeMap::new();
        let mut a = TeidAlloc::new(&used, 1, N3, true, 10);
        let pdi = |f: FTeid| {
            Ie::Grouped(Grouped::new(
                t::PDI,
                vec![Ie::SourceInterface(0), Ie::FTeid(f)],
            ))
        };
        let far = Grouped::new(
            t::CREATE_FAR,
            vec![Ie::FarId(1), Ie::ApplyAction(Bitmap(2))],
        );
        let pdr = Grouped::new(
            t::CREATE_PDR,
            vec![
                Ie::PdrId(1),
                Ie::Precedence(1),
                pdi(choose(None)),
                Ie::FarId(1),
            ],
        );
        let (c, f) = ([pdr], [far]);
        s.apply(
            &Edits {
                create_pdr: &c,
                create_far: &f,
                ..Edits::default()
            },
            &mut a,
        )
        .unwrap();
        let teid = s.pdrs[&1].pdi.f_teid.unwrap().teid;
        let upd = [Grouped::new(
            t::UPDATE_PDR,
            vec![Ie::PdrId(1), pdi(choose(None))],
        )];
        s.apply(
            &Edits {
                update_pdr: &upd,
                ..Edits::default()
            },
            &mut a,
        )
        .unwrap();
        assert_eq!(s.pdrs[&1].pdi.f_teid.unwrap().teid, teid);
    }
}
