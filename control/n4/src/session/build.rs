//! Rules from the PFCP Create IEs (TS 29.244 section 7.5.2) and the F-TEID allocation of one
//! request (section 5.5.3).

use super::*;

/// F-TEID resolution for one request (section 5.5.3 "F-TEID allocation in the UP function").
///
/// Reads the node's TEID table and [`TeidPool`] without changing them and works on a copy of
/// the counter; [`TeidAlloc::counter`] hands back what the node stores on success.
pub(crate) struct TeidAlloc<'a> {
    /// TEIDs in use by all sessions, with their owner SEID.
    in_use: &'a BTreeMap<u32, u64>,
    /// TEIDs of sessions the node does not manage (the daemon's static sessions):
    /// never handed out, and refused when assigned.
    reserved: Option<&'a BTreeSet<u32>>,
    /// Released TEIDs: in quarantine, or free for reuse.
    pool: &'a TeidPool,
    now: Nanos,
    seid: u64,
    n3: (Option<Ipv4Addr>, Option<Ipv6Addr>),
    ftup: bool,
    /// The counter (next, wrapped).
    next: u32,
    wrapped: bool,
    /// Where the search of the free TEIDs resumes (None: none left).
    free_from: Option<u32>,
    /// Where the read of the quarantine queue resumes.
    queue_at: usize,
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
        pool: &'a TeidPool,
        now: Nanos,
        seid: u64,
        n3: (Option<Ipv4Addr>, Option<Ipv6Addr>),
        ftup: bool,
    ) -> Self {
        TeidAlloc {
            in_use,
            reserved: None,
            pool,
            now,
            seid,
            n3,
            ftup,
            next: pool.next,
            wrapped: pool.wrapped,
            free_from: Some(1),
            queue_at: 0,
            fresh: BTreeSet::new(),
            assigned: BTreeSet::new(),
            chid: BTreeMap::new(),
            created: Vec::new(),
        }
    }

    /// Set aside the CP-assigned TEIDs (CH = 0) of the request's Create / Update PDRs
    /// before any F-TEID is resolved, so that CHOOSE for a PDR listed earlier does not pick
    /// a TEID a later PDR of the same request assigns.
    pub(crate) fn reserve_assigned(&mut self, pdrs: &[Grouped]) {
        for g in pdrs {
            if let Some(FTeid::Assigned { teid, .. }) =
                g.group(t::PDI).and_then(|p| find!(p, Ie::FTeid))
            {
                self.assigned.insert(teid);
            }
        }
    }

    /// The counter (next, wrapped) to store after a successful commit.
    pub(crate) fn counter(&self) -> crate::teid_pool::Counter {
        (self.next, self.wrapped)
    }

    /// The same allocation with `reserved` (TEIDs of sessions outside the node) never
    /// handed out and refused when assigned.
    pub(crate) fn with_reserved(mut self, reserved: &'a BTreeSet<u32>) -> Self {
        self.reserved = Some(reserved).filter(|r| !r.is_empty());
        self
    }

    fn is_reserved(&self, teid: u32) -> bool {
        self.reserved.is_some_and(|r| r.contains(&teid))
    }

    fn taken(&self, teid: u32) -> bool {
        self.fresh.contains(&teid)
            || self.in_use.get(&teid).is_some_and(|&o| o != self.seid)
            || self.is_reserved(teid)
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

    fn usable(&self, t: u32) -> bool {
        t != 0
            && !self.fresh.contains(&t)
            && !self.assigned.contains(&t)
            && !self.in_use.contains_key(&t)
            && !self.is_reserved(t)
    }

    /// A fresh TEID, densest first: the lowest free one (released, its quarantine over),
    /// else a released one whose quarantine ended since the pool was last settled (oldest
    /// first), else the counter's next one that is not in use, in quarantine nor taken in
    /// this request. Nothing here scans the TEID table or the pool: the free TEIDs are
    /// ranges read from the lowest, the queue is read from its oldest entry and stops at the
    /// first still in quarantine; what is skipped is this request's own TEIDs.
    fn alloc(&mut self) -> Option<u32> {
        while let Some(t) = self.free_from.and_then(|f| self.pool.free_from(f)) {
            self.free_from = t.checked_add(1);
            if self.usable(t) {
                self.fresh.insert(t);
                return Some(t);
            }
        }
        let q = self.pool.quarantine();
        while let Some((at, t)) = self.pool.queued_entry(self.queue_at) {
            if self.now < at.saturating_add(q) {
                break;
            }
            self.queue_at += 1;
            // Released again since it was queued (its quarantine restarted), or beyond the
            // counter (not ours to hand out out of turn): left to the settling.
            if self.pool.released_at(t) == Some(at) && self.pool.passed(t) && self.usable(t) {
                self.fresh.insert(t);
                return Some(t);
            }
        }
        let tries = self.in_use.len()
            + self.reserved.map_or(0, BTreeSet::len)
            + self.fresh.len()
            + self.assigned.len()
            + self.pool.in_quarantine()
            + 2;
        for _ in 0..tries {
            let c = self.next;
            self.next = self.next.wrapping_add(1);
            if self.next == 0 {
                self.next = 1;
                self.wrapped = true;
            }
            if self.usable(c) && self.pool.released_at(c).is_none() {
                self.fresh.insert(c);
                return Some(c);
            }
        }
        None
    }
}

pub(super) fn pdi_from(g: &Grouped, pdr_id: u16, alloc: &mut TeidAlloc<'_>) -> Result<Pdi, Reject> {
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

pub(super) fn fwd_from(g: &Grouped) -> Result<ForwardingParameters, Reject> {
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
        time_quota: find!(g, Ie::TimeQuota),
        measurement_period: find!(g, Ie::MeasurementPeriod),
    })
}

pub(super) fn insert_new<K: Ord, V>(
    m: &mut RuleMap<K, V>,
    k: K,
    v: V,
    ie: u16,
) -> Result<(), Reject> {
    if m.contains_key(&k) {
        return Err(Reject::rule(ie));
    }
    m.insert(k, v);
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::session) fn choose(chid: Option<u8>) -> FTeid {
        FTeid::Choose {
            v4: true,
            v6: false,
            choose_id: chid,
        }
    }

    pub(in crate::session) const N3: (Option<Ipv4Addr>, Option<Ipv6Addr>) =
        (Some(Ipv4Addr::new(192, 0, 2, 1)), None);

    #[test]
    fn allocator_skips_used_zero_and_wraps() {
        let used: BTreeMap<u32, u64> = [(u32::MAX, 9), (1, 9)].into();
        let mut pool = TeidPool::new(0);
        pool.next = u32::MAX;
        let mut a = TeidAlloc::new(&used, &pool, 0, 5, N3, true);
        // u32::MAX used, wraps past 0, 1 used -> 2.
        assert_eq!(a.resolve(1, choose(None)).unwrap().teid, 2);
        assert_eq!(a.resolve(2, choose(None)).unwrap().teid, 3);
        assert_eq!(a.created.len(), 2);
        assert_eq!(a.counter(), (4, true));
    }

    #[test]
    fn wrapped_counter_skips_teids_in_use_and_in_quarantine() {
        let used: BTreeMap<u32, u64> = [(1, 9)].into();
        let mut pool = TeidPool::new(60);
        pool.next = u32::MAX;
        pool.wrapped = true;
        pool.release(0, 2, &used);
        let mut a = TeidAlloc::new(&used, &pool, 59, 5, N3, true);
        // u32::MAX, then past 0: 1 in use, 2 in quarantine -> 3.
        assert_eq!(a.resolve(1, choose(None)).unwrap().teid, u32::MAX);
        assert_eq!(a.resolve(2, choose(None)).unwrap().teid, 3);
        assert_eq!(a.counter(), (4, true));
        // Its quarantine over, 2 comes first (the counter has wrapped, so it had passed 2).
        let mut a = TeidAlloc::new(&used, &pool, 60, 5, N3, true);
        assert_eq!(a.resolve(1, choose(None)).unwrap().teid, 2);
        pool.settle(60, &used);
        let mut a = TeidAlloc::new(&used, &pool, 60, 5, N3, true);
        assert_eq!(a.resolve(1, choose(None)).unwrap().teid, 2);
        pool.check(&used).unwrap();
    }

    #[test]
    fn chid_shared_and_assigned_rules() {
        let used: BTreeMap<u32, u64> = [(7, 9), (8, 5)].into();
        let pool = TeidPool::new(0);
        let mut a = TeidAlloc::new(&used, &pool, 0, 5, N3, true);
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
}
