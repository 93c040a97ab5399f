//! Statistics for Prometheus ([`N4Stats`], counted per datagram) and the consistency checks
//! the tests run after every step.

use super::*;

/// Counters for Prometheus, counted in [`Node::handle`], [`Node::poll_timers`],
/// [`Node::update_usage`] and [`Node::downlink_data`]. Keys are PFCP message types (table
/// 7.3-1) and causes (section 8.2.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct N4Stats {
    /// Datagrams received, by message type (when the header is readable).
    pub rx: BTreeMap<u8, u64>,
    /// Datagrams sent, by message type (retransmissions included).
    pub tx: BTreeMap<u8, u64>,
    /// Responses sent, by (response message type, cause).
    pub responses: BTreeMap<(u8, u8), u64>,
    /// Undecodable datagrams, by [`peregrine_pfcp::DecodeError::kind`].
    pub decode_errors: BTreeMap<&'static str, u64>,
    /// IEs of session requests discarded as section 7.6.1 requires (a type beyond what we
    /// know, or vendor-specific: enterprise bit kept), by IE type; see [`crate::audit`].
    pub ies_discarded: BTreeMap<u16, u64>,
    /// Retransmitted requests answered from the response cache (section 6.4).
    pub duplicates: u64,
    /// Session Report Requests sent (first transmissions).
    pub reports_sent: u64,
    pub reports_retransmitted: u64,
    /// Answered with an acceptance cause.
    pub reports_acknowledged: u64,
    /// Answered with a rejection cause.
    pub reports_rejected: u64,
    /// Given up after N1 retransmissions.
    pub reports_timed_out: u64,
    /// Session Report Responses matching no outstanding request.
    pub reports_unexpected_responses: u64,
    /// Node Report Requests sent (first transmissions; retransmissions count in
    /// `reports_retransmitted`), and their answers.
    pub node_reports_sent: u64,
    pub node_reports_acknowledged: u64,
    pub node_reports_rejected: u64,
    /// GTP-U path supervision (see [`crate::path`]).
    pub paths: crate::path::PathStats,
    /// Gauges, as of the last call.
    pub sessions: u64,
    pub associations: u64,
    /// GTP-U paths in use, and of those the failed ones.
    pub gtpu_paths: u64,
    pub gtpu_paths_failed: u64,
}

pub(crate) fn bump<K: Ord>(m: &mut BTreeMap<K, u64>, k: K) {
    *m.entry(k).or_insert(0) += 1;
}

impl Node {
    /// Count what we send and refresh the gauges.
    pub(crate) fn account(&mut self, out: &[Output]) {
        for o in out {
            if let Output::Send { bytes, .. } = o {
                if let Some(&ty) = bytes.get(1) {
                    bump(&mut self.stats.tx, ty);
                }
            }
        }
        self.stats.sessions = self.sessions.len() as u64;
        self.stats.associations = self.associations.len() as u64;
        let (paths, failed) = self.paths.counts();
        self.stats.gtpu_paths = paths as u64;
        self.stats.gtpu_paths_failed = failed as u64;
        self.stats.paths = self.paths.stats();
    }

    /// A textual dump of all protocol state (associations, sessions, TEID table), excluding the
    /// response cache: equal dumps mean equal state.
    pub fn debug_snapshot(&self) -> String {
        let sessions: Vec<Session> = self.sessions().collect();
        let meters: Vec<(u64, &RuleMap<u32, Meter>)> = self
            .sessions
            .iter()
            .map(|(&k, st)| (k, &st.meters))
            .collect();
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
            self.associations,
            sessions,
            self.teids,
            meters,
            self.dldr_reported,
            self.paths,
            self.teid_pool
        )
    }

    /// Check the cross-table invariants; `Err` names the first broken one.
    pub fn check_consistency(&self) -> Result<(), String> {
        if self.sessions.len() > self.config.max_sessions {
            return Err("session table over capacity".into());
        }
        // Meters with a timer filed, and volume-watched ones: the index must hold no others.
        let (mut a, mut w) = (0, 0);
        for (&seid, st) in &self.sessions {
            let s = compact::decode(seid, &st.rules)
                .ok_or(format!("session {seid} does not decode"))?;
            if seid == 0 {
                return Err("session with SEID 0".into());
            }
            if !st.meters.keys().eq(s.urrs.keys()) {
                return Err(format!(
                    "usage meters of session {seid} do not match its URRs"
                ));
            }
            for (id, m) in st.meters.iter() {
                let u = s.urrs.get(id).ok_or(format!("meter {id} without URR"))?;
                if !self.urr_index.filed_right(seid, *id, m, u) {
                    return Err(format!(
                        "URR {id} of session {seid} mis-filed in the timers"
                    ));
                }
                a += usize::from(m.armed().is_some());
                w += usize::from(m.watches_volume(u));
            }
            s.check_refs()
                .map_err(|e| format!("session {seid} dangling ref {e:?}"))?;
            let a = self
                .associations
                .get(&s.peer)
                .ok_or(format!("session {seid} without association"))?;
            if !a.sessions.contains(&seid) {
                return Err(format!("session {seid} not listed by its association"));
            }
            for teid in s.teids() {
                if self.teids.get(&teid) != Some(&seid) {
                    return Err(format!("teid {teid} of session {seid} not owned"));
                }
            }
        }
        let (armed, watched) = self.urr_index_sizes();
        if (a, w) != (armed, watched) {
            return Err(format!(
                "URR index holds {armed} timers / {watched} watched, meters say {a} / {w}"
            ));
        }
        self.teid_pool.check(&self.teids)?;
        for (&teid, &seid) in &self.teids {
            let s = self
                .session(seid)
                .ok_or(format!("teid {teid} owned by missing session {seid}"))?;
            if !s.teids().contains(&teid) {
                return Err(format!("teid {teid} not used by session {seid}"));
            }
        }
        for (peer, a) in &self.associations {
            for seid in &a.sessions {
                match self.session(*seid) {
                    Some(s) if s.peer == *peer => {}
                    _ => return Err(format!("association {peer} lists bad session {seid}")),
                }
            }
        }
        if let Some(p) = self
            .pending
            .values()
            .find(|p| !p.node && !self.sessions.contains_key(&p.seid))
        {
            return Err(format!("report pending for missing session {}", p.seid));
        }
        if let Some((seid, far)) = self
            .dldr_reported
            .iter()
            .find(|(s, f)| !self.session(*s).is_some_and(|s| s.fars.contains_key(f)))
        {
            return Err(format!(
                "DLDR episode of missing FAR {far} of session {seid}"
            ));
        }
        Ok(())
    }
}
