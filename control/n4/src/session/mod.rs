//! Session state: plain Rust rules converted from the PFCP Create/Update IEs
//! (TS 29.244 section 7.5.2 Create PDR/FAR/URR/QER, section 7.5.4 Update/Remove), kept for
//! the rule compiler, plus the transactional edit logic used by the node.

use crate::rulemap::RuleMap;
use crate::teid_pool::TeidPool;
use crate::Nanos;
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
    /// Time Quota (section 8.2.51), seconds.
    pub time_quota: Option<u32>,
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

mod build;

pub(crate) use build::*;

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
            if let Some(v) = find!(g, Ie::TimeQuota) {
                u.time_quota = Some(v);
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
            let (empty, pool) = (BTreeMap::new(), TeidPool::new(0));
            let mut none = TeidAlloc::new(&empty, &pool, 0, seid, (None, None), false);
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

    use super::build::tests::{choose, N3};

    #[test]
    fn update_pdr_choose_keeps_current_fteid() {
        let peer = "10.0.0.1:8805".parse().unwrap();
        let fseid = FSeid {
            seid: 1,
            ipv4: None,
            ipv6: None,
        };
        let mut s = Session::new(1, fseid, peer);
        let (used, mut pool) = (BTreeMap::new(), TeidPool::new(0));
        pool.next = 10;
        let mut a = TeidAlloc::new(&used, &pool, 0, 1, N3, true);
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
