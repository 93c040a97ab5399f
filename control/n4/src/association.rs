//! Associations and heartbeats (TS 29.244 sections 6.2.2, 6.2.6 - 6.2.8): Association
//! Setup / Update / Release and the heartbeat timers.

use super::*;

impl Node {
    /// When [`Node::poll_timers`] next has something to do. O(associations + outstanding
    /// reports + GTP-U paths + log URRs): the URR timers are an ordered index (see
    /// `timers`).
    pub fn next_timer(&self) -> Option<Nanos> {
        let hb = self.associations.values().map(|a| a.hb.next_at);
        let rtx = self.pending.values().map(|p| p.next_at);
        hb.chain(rtx)
            .chain(self.urr_index.next())
            .chain(self.paths.next_due())
            .min()
    }

    /// Heartbeats to associated peers (section 6.2.2): a Heartbeat Request every
    /// `heartbeat_interval`; when `heartbeat_retries` requests are unanswered at the next due
    /// time, the association and its sessions are released (`AssociationDown`).
    ///
    /// URR timers due (periods, Time Thresholds, Time Quotas) are checked with the usage
    /// last fed; [`Node::poll_timers_with`] reads it fresh first.
    pub fn poll_timers(&mut self, now: Nanos) -> Vec<Output> {
        self.poll_timers_with(now, &mut LastFed)
    }

    /// [`Node::poll_timers`], feeding each due URR the latest usage from `usage` before its
    /// triggers are checked (the daemon's usage poll covers only volume-watched URRs).
    pub fn poll_timers_with(&mut self, now: Nanos, usage: &mut dyn UsageSource) -> Vec<Output> {
        let mut out = Vec::new();
        let due: Vec<SocketAddr> = self
            .associations
            .values()
            .filter(|a| a.hb.next_at <= now)
            .map(|a| a.peer)
            .collect();
        let interval = nanos(self.config.heartbeat_interval);
        for peer in due {
            let exhausted = self
                .associations
                .get(&peer)
                .is_some_and(|a| a.hb.unanswered >= self.config.heartbeat_retries);
            if exhausted {
                self.release(now, peer, DownReason::HeartbeatTimeout, &mut out);
                continue;
            }
            let seq = self.alloc_seq();
            let msg = Message {
                seq,
                seid: None,
                priority: None,
                fo: false,
                body: Body::HeartbeatRequest(Heartbeat {
                    recovery_time_stamp: self.config.recovery_time_stamp,
                    extra: Vec::new(),
                }),
            };
            if let Some(a) = self.associations.get_mut(&peer) {
                a.hb.unanswered += 1;
                a.hb.next_at = now.saturating_add(interval);
            }
            if let Ok(bytes) = msg.to_vec() {
                out.push(Output::Send { to: peer, bytes });
            }
        }
        self.teid_pool.settle(now, &self.teids);
        self.retransmit_reports(now, &mut out);
        self.poll_paths(now, &mut out);
        let due = self.urr_index.due(now);
        for (seid, urr_id) in due {
            if let Some(u) = usage.usage(seid, urr_id) {
                if let Some(m) = self
                    .sessions
                    .get_mut(&seid)
                    .and_then(|st| st.meters.get_mut(&urr_id))
                {
                    m.feed(u);
                }
            }
            self.check_urr(now, seid, urr_id, &mut out);
        }
        self.account(&out);
        out
    }

    pub(crate) fn assoc_response(&self, cause: u8, setup: bool) -> AssociationResponse {
        let ok = setup && cause::is_accepted(cause);
        AssociationResponse {
            node_id: self.config.node_id.clone(),
            cause,
            recovery_time_stamp: setup.then_some(self.config.recovery_time_stamp),
            up_function_features: ok.then_some(self.config.up_features),
            extra: Vec::new(),
        }
    }

    /// Association Setup (section 6.2.6.2): accepted, answered with our Node ID, Recovery Time
    /// Stamp and UP Function Features. A repeated setup from the same peer with a different
    /// Recovery Time Stamp means the CP function restarted: its sessions are deleted.
    pub(crate) fn association_setup(
        &mut self,
        now: Nanos,
        peer: SocketAddr,
        seq: u32,
        r: AssociationRequest,
        out: &mut Vec<Output>,
    ) {
        let restarted = self
            .associations
            .get(&peer)
            .is_some_and(|a| a.recovery_time_stamp != r.recovery_time_stamp);
        if restarted {
            let seids: Vec<u64> = self.associations[&peer].sessions.iter().copied().collect();
            for seid in seids {
                self.remove_session(now, seid);
                out.push(Output::Event(Event::SessionDeleted { seid }));
            }
        }
        let next_at = now.saturating_add(nanos(self.config.heartbeat_interval));
        let a = self
            .associations
            .entry(peer)
            .or_insert_with(|| Association {
                peer,
                node_id: r.node_id.clone(),
                cp_features: None,
                recovery_time_stamp: None,
                sessions: BTreeSet::new(),
                hb: HeartbeatState {
                    next_at,
                    unanswered: 0,
                },
            });
        a.node_id = r.node_id.clone();
        a.cp_features = r.up_function_features;
        a.recovery_time_stamp = r.recovery_time_stamp;
        a.hb = HeartbeatState {
            next_at,
            unanswered: 0,
        };
        out.push(Output::Event(Event::AssociationUp {
            peer,
            node_id: r.node_id,
        }));
        let body = self.assoc_response(cause::REQUEST_ACCEPTED, true);
        self.respond(
            now,
            peer,
            seq,
            None,
            Body::AssociationSetupResponse(body),
            out,
        );
    }

    pub(crate) fn release(
        &mut self,
        now: Nanos,
        peer: SocketAddr,
        reason: DownReason,
        out: &mut Vec<Output>,
    ) {
        let Some(a) = self.associations.get(&peer) else {
            return;
        };
        let seids: Vec<u64> = a.sessions.iter().copied().collect();
        for seid in seids {
            self.remove_session(now, seid);
            out.push(Output::Event(Event::SessionDeleted { seid }));
        }
        self.associations.remove(&peer);
        out.push(Output::Event(Event::AssociationDown { peer, reason }));
    }
}
