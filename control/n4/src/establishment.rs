//! Session establishment and deletion (TS 29.244 sections 6.3.2, 6.3.4; 7.5.2, 7.5.6):
//! validation, SEID and TEID allocation, and committing a session's state.

use super::*;

impl Node {
    /// Remove session `seid` at `now`; its TEIDs are released to the pool.
    pub(crate) fn remove_session(&mut self, now: Nanos, seid: u64) -> Option<Session> {
        let st = self.sessions.remove(&seid)?;
        for (&id, m) in st.meters.iter() {
            self.urr_index.remove(seid, id, m);
        }
        let s = compact::decode(seid, &st.rules)?;
        self.pending.retain(|_, p| p.seid != seid);
        let episodes: Vec<(u64, u32)> = self
            .dldr_reported
            .range((seid, 0)..=(seid, u32::MAX))
            .copied()
            .collect();
        for k in episodes {
            self.dldr_reported.remove(&k);
        }
        for teid in s.teids() {
            if self.teids.get(&teid) == Some(&seid) {
                self.teids.remove(&teid);
                self.teid_pool.release(now, teid, &self.teids);
            }
        }
        for peer in Node::gtpu_peers(&s) {
            self.paths.remove(peer);
        }
        if let Some(a) = self.associations.get_mut(&s.peer) {
            a.sessions.remove(&seid);
        }
        Some(s)
    }

    /// The F-TEID allocation of one request for session `seid` at `now` (establishment and
    /// modification alike): the TEIDs in use, the released ones and the counter, our N3
    /// addresses, FTUP.
    pub(crate) fn teid_alloc(&self, now: Nanos, seid: u64) -> TeidAlloc<'_> {
        let ftup = self.config.up_features.contains(up_features::FTUP);
        TeidAlloc::new(
            &self.teids,
            &self.teid_pool,
            now,
            seid,
            self.config.n3_addresses,
            ftup,
        )
        .with_reserved(&self.config.reserved_teids)
    }

    /// TEIDs of `s` must not belong to another session (cause 73, Offending IE F-TEID).
    pub(crate) fn check_teids(&self, s: &Session) -> Result<(), Reject> {
        for teid in s.teids() {
            if self.teids.get(&teid).is_some_and(|&o| o != s.up_seid)
                || self.config.reserved_teids.contains(&teid)
            {
                let r = Reject::rule(t::F_TEID);
                return Err(match s.pdr_with_teid(teid) {
                    Some(p) => r.at(FailedRuleId::Pdr(p)),
                    None => r,
                });
            }
        }
        Ok(())
    }

    /// Bring the usage meters and DLDR episodes of session `seid` in line with its rules
    /// after a commit: new URRs start measuring now, removed ones are dropped, updated ones
    /// re-arm; an updated or removed FAR ends its buffering episode.
    pub(crate) fn sync_session_state(
        &mut self,
        now: Nanos,
        s: &Session,
        updated_urr: &[(u32, QuotaUpdate)],
        updated_far: &[u32],
    ) {
        let seid = s.up_seid;
        let Some(st) = self.sessions.get_mut(&seid) else {
            return;
        };
        let meters = &mut st.meters;
        let gone: Vec<u32> = meters
            .keys()
            .filter(|id| !s.urrs.contains_key(*id))
            .copied()
            .collect();
        for id in gone {
            if let Some(m) = meters.remove(&id) {
                self.urr_index.remove(seid, id, &m);
            }
        }
        for (id, u) in &s.urrs {
            if !meters.contains_key(id) {
                meters.insert(*id, Meter::new(u, now));
            }
        }
        for &(id, quota) in updated_urr {
            if let (Some(u), Some(m)) = (s.urrs.get(&id), meters.get_mut(&id)) {
                m.rearm(u, quota, now);
            }
        }
        // The session's rules may have changed any of its URRs (Update URR): file each
        // again. O(URRs of this session x log n).
        for (id, m) in meters.iter_mut() {
            self.urr_index.update(seid, *id, m, s.urrs.get(id));
        }
        let stale: Vec<(u64, u32)> = self
            .dldr_reported
            .range((seid, 0)..=(seid, u32::MAX))
            .filter(|(_, far)| !s.fars.contains_key(far) || updated_far.contains(far))
            .copied()
            .collect();
        for k in stale {
            self.dldr_reported.remove(&k);
        }
    }

    /// Install a validated session (new or replacing its previous version), keeping the
    /// meters it had; [`Node::sync_session_state`] then brings them in line.
    pub(crate) fn commit(&mut self, now: Nanos, s: &Session) {
        let seid = s.up_seid;
        let teids = s.teids();
        // TEIDs the new version no longer uses (PDR removed, F-TEID changed): released to
        // the pool once the table holds the new version's.
        let mut dropped = Vec::new();
        let meters = match self.sessions.remove(&seid) {
            Some(old) => {
                if let Some(o) = compact::decode(seid, &old.rules) {
                    for teid in o.teids() {
                        self.teids.remove(&teid);
                        if !teids.contains(&teid) {
                            dropped.push(teid);
                        }
                    }
                    for peer in Node::gtpu_peers(&o) {
                        self.paths.remove(peer);
                    }
                }
                old.meters
            }
            None => RuleMap::new(),
        };
        for peer in Node::gtpu_peers(s) {
            self.paths.add(peer, now);
        }
        for &teid in &teids {
            self.teids.insert(teid, seid);
            self.teid_pool.taken(teid);
        }
        for teid in dropped {
            self.teid_pool.release(now, teid, &self.teids);
        }
        self.teid_pool.settle(now, &self.teids);
        if let Some(a) = self.associations.get_mut(&s.peer) {
            a.sessions.insert(seid);
        }
        let rules = compact::encode(s);
        self.sessions.insert(seid, Stored { rules, meters });
    }

    pub(crate) fn up_f_seid(&self, seid: u64) -> FSeid {
        let (ipv4, ipv6) = match &self.config.node_id {
            NodeId::Ipv4(a) => (Some(*a), None),
            NodeId::Ipv6(a) => (None, Some(*a)),
            NodeId::Fqdn(_) => self.config.n3_addresses,
        };
        FSeid { seid, ipv4, ipv6 }
    }

    pub(crate) fn alloc_seid(&mut self) -> u64 {
        loop {
            let s = self.next_seid;
            self.next_seid = self.next_seid.wrapping_add(1).max(1);
            if s != 0 && !self.sessions.contains_key(&s) {
                return s;
            }
        }
    }

    /// Validate an establishment for SEID `seid` at `now`: the session, its Created PDRs and
    /// the TEID counter (next, wrapped) to store.
    pub(crate) fn validate_establishment(
        &self,
        now: Nanos,
        peer: SocketAddr,
        seid: u64,
        r: &SessionEstablishmentRequest,
    ) -> Result<(Session, Vec<Grouped>, teid_pool::Counter), Reject> {
        if !self.associations.contains_key(&peer) {
            return Err(Reject::new(cause::NO_ESTABLISHED_PFCP_ASSOCIATION, None));
        }
        if self.sessions.len() >= self.config.max_sessions {
            return Err(Reject::new(cause::NO_RESOURCES_AVAILABLE, None));
        }
        let mut s = Session::new(seid, r.cp_f_seid, peer);
        let mut alloc = self.teid_alloc(now, seid);
        alloc.reserve_assigned(&r.create_pdr);
        let edits = Edits {
            create_pdr: &r.create_pdr,
            create_far: &r.create_far,
            create_urr: &r.create_urr,
            create_qer: &r.create_qer,
            create_bar: r.create_bar.as_ref(),
            ..Edits::default()
        };
        s.apply(&edits, &mut alloc)?;
        self.check_teids(&s)?;
        let counter = alloc.counter();
        Ok((s, alloc.created, counter))
    }

    /// Session Establishment (section 6.3.2, 7.5.2 / 7.5.3). Rejections: 72 without
    /// association, 75 when the session table is full, 73 for a rule that cannot be created
    /// (duplicate ID, dangling FAR / QER / URR reference, TEID clash, unserved F-TEID family),
    /// 71 for CHOOSE without FTUP, 66 / 67 for missing IEs, `audited`'s refusal (73 for an
    /// IE of a rule we do not implement, 76 for such an IE at the top; see [`audit`]).
    /// Nothing changes on rejection.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn establish(
        &mut self,
        now: Nanos,
        peer: SocketAddr,
        seq: u32,
        r: SessionEstablishmentRequest,
        audited: Result<(), Reject>,
        env: &mut dyn UsageSource,
        out: &mut Vec<Output>,
    ) {
        let hdr = r.cp_f_seid.seid;
        let candidate = {
            let mut s = self.next_seid.max(1);
            while self.sessions.contains_key(&s) {
                s = s.wrapping_add(1).max(1);
            }
            s
        };
        let checked = self
            .validate_establishment(now, peer, candidate, &r)
            .and_then(|v| audited.map(|()| v))
            .and_then(|v| env.check_rules(&v.0).map(|()| v));
        let body = match checked {
            Ok((s, created, counter)) => {
                let seid = self.alloc_seid();
                debug_assert_eq!(seid, candidate);
                (self.teid_pool.next, self.teid_pool.wrapped) = counter;
                self.commit(now, &s);
                self.sync_session_state(now, &s, &[], &[]);
                out.push(Output::Event(Event::SessionCreated { seid }));
                SessionEstablishmentResponse {
                    node_id: self.config.node_id.clone(),
                    cause: cause::REQUEST_ACCEPTED,
                    offending_ie: None,
                    up_f_seid: Some(self.up_f_seid(seid)),
                    created_pdr: created,
                    extra: Vec::new(),
                }
            }
            Err(rej) => SessionEstablishmentResponse {
                node_id: self.config.node_id.clone(),
                cause: rej.cause,
                offending_ie: rej.offending_ie,
                up_f_seid: None,
                created_pdr: Vec::new(),
                extra: failed_rule_ie(&rej),
            },
        };
        self.respond(
            now,
            peer,
            seq,
            Some(hdr),
            Body::SessionEstablishmentResponse(body),
            out,
        );
    }
}
