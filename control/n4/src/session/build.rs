//! Rules from the PFCP Create IEs (TS 29.244 section 7.5.2) and the F-TEID allocation of one
//! request (section 5.5.3).

use super::*;

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
}
