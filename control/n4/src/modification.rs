//! Session modification (TS 29.244 section 6.3.3, 7.5.4), with the End Marker tunnels of
//! SNDEM (section 5.2.2.3).

use super::*;

/// The IDs (URR ID or FAR ID, by `ie`) of a list of grouped IEs.
fn ids_of(gs: &[Grouped], ie: u16) -> impl Iterator<Item = u32> + '_ {
    gs.iter().filter_map(move |g| match g.get(ie) {
        Some(Ie::UrrId(x) | Ie::FarId(x)) => Some(*x),
        _ => None,
    })
}

/// The FARs of `cur` whose Update FAR carries Update Forwarding Parameters with SNDEM set
/// (section 8.2.58) and an Outer Header Creation, with their current GTP-U tunnel (section
/// 5.2.2.3: End Marker packets go to the old tunnel when the SMF switches the path).
fn sndem_tunnels(cur: &Session, update_far: &[Grouped]) -> Vec<(u32, OuterHeaderCreation)> {
    update_far
        .iter()
        .filter_map(|g| {
            let id = g.far_id()?;
            let u = g.group(t::UPDATE_FORWARDING_PARAMETERS)?;
            let sndem = u
                .ies
                .iter()
                .any(|i| matches!(i, Ie::PfcpsmReqFlags(f) if f.contains(smreq_flags::SNDEM)));
            if !sndem || u.get(t::OUTER_HEADER_CREATION).is_none() {
                return None;
            }
            let old = cur
                .fars
                .get(&id)?
                .forwarding
                .as_ref()?
                .outer_header_creation?;
            old.teid.is_some().then_some((id, old))
        })
        .collect()
}

impl Node {
    /// Session Modification (section 6.3.3, 7.5.4 / 7.5.5): unknown SEID gets 65 with header
    /// SEID 0 (section 7.2.2.4.2); the edits are applied to a scratch copy and committed only
    /// if all succeed (removing or updating a missing rule, creating a duplicate, or leaving a
    /// PDR with a dangling reference: 73). A CP F-SEID in the request replaces the stored one.
    /// On success the response carries a Usage Report (SMR) per removed URR (TERMR, measured
    /// up to the removal) and per queried URR (IMMER); querying an unknown URR is 73.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn modify(
        &mut self,
        now: Nanos,
        peer: SocketAddr,
        seq: u32,
        seid: u64,
        r: SessionModificationRequest,
        audited: Result<(), Reject>,
        usage: &mut dyn UsageSource,
        out: &mut Vec<Output>,
    ) {
        let Some(cur) = self.session(seid) else {
            let body = self.reject_body(
                mt::SESSION_MODIFICATION_REQUEST,
                Reject::new(cause::SESSION_CONTEXT_NOT_FOUND, None),
            );
            if let Some(b) = body {
                self.respond(now, peer, seq, Some(0), b, out);
            }
            return;
        };
        let hdr = cur.cp_f_seid.seid;
        let mut s = cur.clone();
        if let Some(f) = r.cp_f_seid {
            s.cp_f_seid = f;
        }
        let mut alloc = self.teid_alloc(now, seid);
        alloc.reserve_assigned(&r.create_pdr);
        alloc.reserve_assigned(&r.update_pdr);
        let edits = Edits {
            remove_pdr: &r.remove_pdr,
            remove_far: &r.remove_far,
            remove_urr: &r.remove_urr,
            remove_qer: &r.remove_qer,
            create_pdr: &r.create_pdr,
            create_far: &r.create_far,
            create_urr: &r.create_urr,
            create_qer: &r.create_qer,
            update_pdr: &r.update_pdr,
            update_far: &r.update_far,
            update_urr: &r.update_urr,
            update_qer: &r.update_qer,
            remove_bar: r.remove_bar.as_ref(),
            create_bar: r.create_bar.as_ref(),
            update_bar: r.update_bar.as_ref(),
        };
        let removed_urrs: Vec<u32> = ids_of(&r.remove_urr, t::URR_ID)
            .filter(|id| cur.urrs.contains_key(id))
            .collect();
        let mut queried: Vec<u32> = ids_of(&r.query_urr, t::URR_ID).collect();
        let qaurr = r
            .pfcpsm_req_flags
            .is_some_and(|f| f.contains(smreq_flags::QAURR));
        let sndem = sndem_tunnels(&cur, &r.update_far);
        let result = audited
            .and_then(|()| s.apply(&edits, &mut alloc))
            .and_then(|()| self.check_teids(&s))
            .and_then(
                |()| match queried.iter().find(|id| !s.urrs.contains_key(id)) {
                    Some(&id) => Err(Reject::rule(t::URR_ID).at(FailedRuleId::Urr(id))),
                    None => Ok(()),
                },
            )
            .and_then(|()| usage.check_rules(&s));
        let counter = alloc.counter();
        let created = std::mem::take(&mut alloc.created);
        let resp = match result {
            Ok(()) => {
                let hdr = s.cp_f_seid.seid;
                // QAURR (section 8.2.58): every URR the session had and still has.
                if qaurr {
                    queried.extend(cur.urrs.keys().filter(|id| s.urrs.contains_key(*id)));
                    queried.sort_unstable();
                    queried.dedup();
                }
                // Removed URRs report while their meters still exist.
                let mut reports =
                    self.final_reports(now, seid, &removed_urrs, t::USAGE_REPORT_SMR, usage);
                (self.teid_pool.next, self.teid_pool.wrapped) = counter;
                self.commit(now, &s);
                // A URR removed and re-created by the same request measures afresh.
                if let Some(st) = self.sessions.get_mut(&seid) {
                    for id in &removed_urrs {
                        if let Some(m) = st.meters.remove(id) {
                            self.urr_index.remove(seid, *id, &m);
                        }
                    }
                }
                let updated_urr: Vec<(u32, QuotaUpdate)> = r
                    .update_urr
                    .iter()
                    .filter_map(|g| match g.get(t::URR_ID) {
                        Some(Ie::UrrId(id)) => Some((
                            *id,
                            QuotaUpdate {
                                volume: g.get(t::VOLUME_QUOTA).is_some(),
                                time: g.get(t::TIME_QUOTA).is_some(),
                            },
                        )),
                        _ => None,
                    })
                    .collect();
                let updated_far: Vec<u32> = ids_of(&r.update_far, t::FAR_ID).collect();
                self.sync_session_state(now, &s, &updated_urr, &updated_far);
                let mut answers =
                    self.usage_reports(now, seid, &queried, t::USAGE_REPORT_SMR, urt::IMMER, usage);
                // Table 7.5.5.2-1: the reports that answer a query carry its reference.
                if let Some(x) = r.query_urr_reference {
                    for g in &mut answers {
                        g.ies.push(Ie::QueryUrrReference(x));
                    }
                }
                reports.extend(answers);
                for (far_id, old) in sndem {
                    let new = s
                        .fars
                        .get(&far_id)
                        .and_then(|f| f.forwarding.as_ref())
                        .and_then(|f| f.outer_header_creation);
                    if new != Some(old) {
                        out.push(Output::Event(Event::EndMarker { seid, far_id, old }));
                    }
                }
                out.push(Output::Event(Event::SessionModified { seid }));
                (
                    hdr,
                    SessionResponse {
                        cause: cause::REQUEST_ACCEPTED,
                        offending_ie: None,
                        created_pdr: created,
                        usage_report: reports,
                        extra: Vec::new(),
                    },
                )
            }
            Err(rej) => (
                hdr,
                SessionResponse {
                    cause: rej.cause,
                    offending_ie: rej.offending_ie,
                    created_pdr: Vec::new(),
                    usage_report: Vec::new(),
                    extra: failed_rule_ie(&rej),
                },
            ),
        };
        self.respond(
            now,
            peer,
            seq,
            Some(resp.0),
            Body::SessionModificationResponse(resp.1),
            out,
        );
    }
}
