//! The UPF side of N4 (3GPP TS 29.244): PFCP associations, heartbeats and sessions, as an
//! I/O-free state machine in the quinn-proto style.
//!
//! [`Node::handle`] takes one received datagram, the peer address and the current time, and
//! returns what to send and what happened ([`Output`]); [`Node::poll_timers`] drives the
//! heartbeats we send (section 6.2.2). Nothing here reads a clock or a socket, so every
//! behaviour is deterministic and testable with a fake clock.
//!
//! Behaviour, by section of TS 29.244:
//! * 6.2.2 Heartbeat: answered with our stable Recovery Time Stamp (7.4.2), from any peer. We
//!   send a Heartbeat Request to each associated peer every `heartbeat_interval`; after
//!   `heartbeat_retries` unanswered ones the peer is declared down and its association and
//!   sessions are released. Any Heartbeat Response from the peer clears the counter.
//! * 6.2.6 / 6.2.7 / 6.2.8 Association Setup / Update / Release (7.4.4). A repeated Setup from
//!   an associated peer with a new Recovery Time Stamp means the CP function restarted: its
//!   sessions are deleted. Update / Release from a peer without association: cause 72.
//! * 6.3.2 / 6.3.3 / 6.3.4 Session Establishment / Modification / Deletion (7.5.2 - 7.5.7):
//!   validated completely before any state changes (see [`session`]); causes 65, 72, 73, 75,
//!   71 as documented on each handler.
//! * 6.4 Reliable delivery: a request repeating the (peer, sequence number, type) of one
//!   answered within `response_retention` gets the cached response bytes again and is not
//!   re-applied. The cache is bounded by `response_cache_capacity` (oldest evicted first).
//! * 7.6 Error handling: undecodable messages follow [`peregrine_pfcp::DecodeError::action`]:
//!   discard, Version Not Supported Response (7.4.4.7), or a response of the request's type
//!   with the Cause and Offending IE, when the header (type and sequence number) is readable.
//!   Malformed Heartbeat Requests are discarded (the response has no Cause IE), as are
//!   malformed responses.
//! * 5.2.2 Usage reporting (see [`usage`]): the daemon feeds cumulative usage per URR with
//!   [`Node::update_usage`]; volume threshold / quota crossings, time thresholds and periodic
//!   reports become Session Report Requests (7.5.8, Report Type USAR) sent from our own
//!   sequence space and retransmitted every `t1` up to `n1` times (6.4). Session Deletion
//!   Responses carry a final Usage Report per URR (7.5.7, trigger TERMR); Modification
//!   Responses carry one per removed (TERMR) or queried (IMMER) URR (7.5.5). Responses get the
//!   latest usage from a [`UsageSource`] ([`Node::handle_with`]).
//! * 5.2.3 Buffering: [`Node::downlink_data`] sends one Session Report Request with a
//!   Downlink Data Report per buffering episode of a FAR with BUFF and NOCP; Create / Update /
//!   Remove BAR keep the session's BAR ([`Bar`]).
//! * Rejections with cause 73 name the rule at fault in a Failed Rule ID (8.2.80).
//! * [`Node::stats`]: message, cause, decode-error and report counters for Prometheus.
#![forbid(unsafe_code)]

mod compact;
pub mod rulemap;
pub mod session;
pub mod usage;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use peregrine_pfcp::cause;
use peregrine_pfcp::ie::{
    apply_action, ie_type as t, report_type, smreq_flags, usage_report_trigger as urt, Bitmap,
    FSeid, FailedRuleId, Grouped, Ie, NodeId, OuterHeaderCreation,
};
use peregrine_pfcp::message::{
    msg_type as mt, AssociationRequest, AssociationResponse, Heartbeat,
    SessionEstablishmentRequest, SessionEstablishmentResponse, SessionModificationRequest,
    SessionReportRequest, SessionResponse,
};
use peregrine_pfcp::{Action, Body, Message};

pub use rulemap::RuleMap;
pub use session::{
    Bar, Far, ForwardingParameters, LocalFTeid, Pdi, Pdr, Qer, Reject, Session, Urr,
};
use session::{Edits, TeidAlloc};
use usage::Meter;
pub use usage::{LastFed, Usage, UsageSource};

/// UP Function Features bits (section 8.2.25), octet 5 in bits 0-7 as in
/// [`peregrine_pfcp::ie::Bitmap`].
pub mod up_features {
    /// Octet 5 bit 5: F-TEID allocation / release in the UP function.
    pub const FTUP: u64 = 0x10;
}

/// Time in nanoseconds since an arbitrary origin chosen by the caller (monotonic).
pub type Nanos = u64;

/// Static configuration of a [`Node`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfig {
    /// Our Node ID (section 8.2.38). When it is an IP address it is also the address of our
    /// UP F-SEID; otherwise the N3 addresses are used.
    pub node_id: NodeId,
    /// Our Recovery Time Stamp (section 8.2.65), NTP seconds; stable for the node's lifetime.
    pub recovery_time_stamp: u32,
    /// N3 addresses for F-TEID allocation (CHOOSE), by family.
    pub n3_addresses: (Option<Ipv4Addr>, Option<Ipv6Addr>),
    /// Size of the session table; beyond it Establishment gets cause 75.
    pub max_sessions: usize,
    /// UP Function Features advertised in Association Setup Response; FTUP enables CHOOSE.
    pub up_features: Bitmap,
    pub heartbeat_interval: Duration,
    /// Unanswered Heartbeat Requests after which the peer is declared down.
    pub heartbeat_retries: u32,
    /// How long answered requests are remembered for duplicate detection (section 6.4).
    pub response_retention: Duration,
    /// Most responses remembered.
    pub response_cache_capacity: usize,
    /// T1: retransmission timer of our Session Report Requests (section 6.4).
    pub t1: Duration,
    /// N1: retransmissions before a report is given up.
    pub n1: u32,
    /// NTP seconds at node time 0, for Start / End Time and Time of First / Last Packet.
    pub ntp_origin: u32,
}

impl NodeConfig {
    /// Defaults: FTUP, 100k sessions, heartbeat every 10 s with 3 retries, 30 s / 4096
    /// response cache, T1 3 s / N1 3, NTP origin = the Recovery Time Stamp.
    pub fn new(node_id: NodeId, recovery_time_stamp: u32, n3_ipv4: Option<Ipv4Addr>) -> Self {
        NodeConfig {
            node_id,
            recovery_time_stamp,
            n3_addresses: (n3_ipv4, None),
            max_sessions: 100_000,
            up_features: Bitmap(up_features::FTUP),
            heartbeat_interval: Duration::from_secs(10),
            heartbeat_retries: 3,
            response_retention: Duration::from_secs(30),
            response_cache_capacity: 4096,
            t1: Duration::from_secs(3),
            n1: 3,
            // The caller's clock origin is taken to be the node's start.
            ntp_origin: recovery_time_stamp,
        }
    }
}

/// Something for the caller to do or know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Send `bytes` as one UDP datagram to `to`.
    Send {
        to: SocketAddr,
        bytes: Vec<u8>,
    },
    Event(Event),
}

/// Why an association ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DownReason {
    /// Association Release Request from the peer.
    Released,
    /// `heartbeat_retries` Heartbeat Requests went unanswered.
    HeartbeatTimeout,
}

/// State changes, for the rule compiler and for logging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    AssociationUp {
        peer: SocketAddr,
        node_id: NodeId,
    },
    AssociationDown {
        peer: SocketAddr,
        reason: DownReason,
    },
    SessionCreated {
        seid: u64,
    },
    SessionModified {
        seid: u64,
    },
    SessionDeleted {
        seid: u64,
    },
    /// The URR's Volume Quota is used up: stop forwarding its traffic (section 5.2.2.2).
    QuotaExhausted {
        seid: u64,
        urr_id: u32,
    },
    /// A Session Modification moved a FAR's GTP-U tunnel (new Outer Header Creation) with
    /// SNDEM set in its Update Forwarding Parameters (sections 5.2.2.3 and 8.2.58): send a
    /// GTP-U End Marker (TS 29.281 section 7.3.2) down the old tunnel `old` once the new rules
    /// are in force. Emitted before the `SessionModified` of the same request.
    EndMarker {
        seid: u64,
        far_id: u32,
        old: OuterHeaderCreation,
    },
    /// A Session Report Request went unanswered after N1 retransmissions.
    ReportTimedOut {
        seid: u64,
        seq: u32,
    },
}

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
    /// Gauges, as of the last call.
    pub sessions: u64,
    pub associations: u64,
}

fn bump<K: Ord>(m: &mut BTreeMap<K, u64>, k: K) {
    *m.entry(k).or_insert(0) += 1;
}

/// An outstanding Session Report Request (section 6.4).
#[derive(Debug, Clone, PartialEq, Eq)]
struct PendingReport {
    peer: SocketAddr,
    seid: u64,
    bytes: Vec<u8>,
    next_at: Nanos,
    retransmissions: u32,
}

/// Heartbeat bookkeeping of one association.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HeartbeatState {
    next_at: Nanos,
    unanswered: u32,
}

/// A PFCP association with a CP function (section 6.2.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Association {
    pub peer: SocketAddr,
    pub node_id: NodeId,
    /// CP Function Features if the peer sent them (kept as received).
    pub cp_features: Option<Bitmap>,
    pub recovery_time_stamp: Option<u32>,
    /// Our SEIDs of the sessions the peer owns.
    pub sessions: BTreeSet<u64>,
    hb: HeartbeatState,
}

/// A session as the node keeps it: its rules in the compact encoding (see [`compact`]:
/// a typed [`Session`] is ~7x larger) and the usage meters of its URRs (section 5.2.2) by
/// URR ID, exactly the session's URRs.
#[derive(Debug)]
struct Stored {
    rules: Box<[u8]>,
    meters: RuleMap<u32, Meter>,
}

#[derive(Debug)]
struct Cached {
    msg_type: u8,
    at: Nanos,
    bytes: Vec<u8>,
}

/// The UPF's N4 endpoint.
#[derive(Debug)]
pub struct Node {
    config: NodeConfig,
    associations: BTreeMap<SocketAddr, Association>,
    sessions: BTreeMap<u64, Stored>,
    /// Local TEID -> owning session.
    teids: BTreeMap<u32, u64>,
    next_seid: u64,
    next_teid: u32,
    next_seq: u32,
    cache: HashMap<(SocketAddr, u32), Cached>,
    cache_order: VecDeque<(Nanos, SocketAddr, u32)>,
    /// A lower bound of the earliest URR due time, cached: recomputing it walks every meter,
    /// and the N4 loop asks after every burst. `None` = stale. Requests only move a meter's
    /// due time earlier in `sync_session_state` (new meter, Update URR), which lowers the
    /// bound; everything else (reports, removals) only moves due times later, so the bound
    /// stays valid (at worst the timer fires early, and `poll_timers` recomputes). The other
    /// `&mut self` entry points clear it.
    urr_due: std::cell::Cell<Option<Option<Nanos>>>,
    /// Our outstanding Session Report Requests by sequence number.
    pending: BTreeMap<u32, PendingReport>,
    /// (UP SEID, FAR ID) whose buffering episode has been reported (DLDR).
    dldr_reported: BTreeSet<(u64, u32)>,
    stats: N4Stats,
}

/// Header fields readable without a full decode.
#[derive(Debug, Clone, Copy)]
struct Peek {
    version: u8,
    msg_type: u8,
    seq: u32,
    seid: Option<u64>,
}

fn peek(b: &[u8]) -> Option<Peek> {
    let f = *b.first()?;
    let msg_type = *b.get(1)?;
    let s = f & 1 != 0;
    let (seq_at, seid) = if s {
        let v = b.get(4..12)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(v);
        (12, Some(u64::from_be_bytes(a)))
    } else {
        (4, None)
    };
    let q = b.get(seq_at..seq_at + 3)?;
    Some(Peek {
        version: f >> 5,
        msg_type,
        seq: u32::from_be_bytes([0, q[0], q[1], q[2]]),
        seid,
    })
}

fn is_answered_request(m: u8) -> bool {
    matches!(
        m,
        mt::HEARTBEAT_REQUEST
            | mt::ASSOCIATION_SETUP_REQUEST
            | mt::ASSOCIATION_UPDATE_REQUEST
            | mt::ASSOCIATION_RELEASE_REQUEST
            | mt::SESSION_ESTABLISHMENT_REQUEST
            | mt::SESSION_MODIFICATION_REQUEST
            | mt::SESSION_DELETION_REQUEST
    )
}

fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Node {
    pub fn new(config: NodeConfig) -> Node {
        Node {
            config,
            associations: BTreeMap::new(),
            sessions: BTreeMap::new(),
            teids: BTreeMap::new(),
            next_seid: 1,
            next_teid: 1,
            next_seq: 1,
            cache: HashMap::new(),
            cache_order: VecDeque::new(),
            urr_due: std::cell::Cell::new(None),
            pending: BTreeMap::new(),
            dldr_reported: BTreeSet::new(),
            stats: N4Stats::default(),
        }
    }

    /// Message and report counters.
    pub fn stats(&self) -> &N4Stats {
        &self.stats
    }

    /// Outstanding Session Report Requests.
    pub fn pending_reports(&self) -> usize {
        self.pending.len()
    }

    /// Count what we send and refresh the gauges.
    fn account(&mut self, out: &[Output]) {
        for o in out {
            if let Output::Send { bytes, .. } = o {
                if let Some(&ty) = bytes.get(1) {
                    bump(&mut self.stats.tx, ty);
                }
            }
        }
        self.stats.sessions = self.sessions.len() as u64;
        self.stats.associations = self.associations.len() as u64;
    }

    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// Session snapshot for the rule compiler, in SEID order (decoded from the stored form).
    pub fn sessions(&self) -> impl Iterator<Item = Session> + '_ {
        self.sessions
            .iter()
            .filter_map(|(&seid, st)| compact::decode(seid, &st.rules))
    }

    /// One session, decoded from the stored form.
    pub fn session(&self, up_seid: u64) -> Option<Session> {
        compact::decode(up_seid, &self.sessions.get(&up_seid)?.rules)
    }

    /// (UP SEID, URR ID) of every URR of every session, in order, without decoding rules.
    pub fn urr_keys(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.sessions
            .iter()
            .flat_map(|(&seid, st)| st.meters.keys().map(move |&id| (seid, id)))
    }

    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    pub fn associations(&self) -> impl Iterator<Item = &Association> {
        self.associations.values()
    }

    pub fn association(&self, peer: SocketAddr) -> Option<&Association> {
        self.associations.get(&peer)
    }

    /// Entries of the duplicate-detection cache (for tests and metrics).
    pub fn cached_responses(&self) -> usize {
        self.cache.len()
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
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
            self.associations, sessions, self.teids, meters, self.dldr_reported
        )
    }

    /// Check the cross-table invariants; `Err` names the first broken one.
    pub fn check_consistency(&self) -> Result<(), String> {
        if self.sessions.len() > self.config.max_sessions {
            return Err("session table over capacity".into());
        }
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
            .find(|p| !self.sessions.contains_key(&p.seid))
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

    /// When [`Node::poll_timers`] next has something to do. Scans every URR: O(URRs).
    pub fn next_timer(&self) -> Option<Nanos> {
        let hb = self.associations.values().map(|a| a.hb.next_at);
        let rtx = self.pending.values().map(|p| p.next_at);
        let urr = match self.urr_due.get() {
            Some(d) => d,
            None => {
                let d = self
                    .sessions
                    .values()
                    .flat_map(|st| {
                        st.meters
                            .iter()
                            .filter_map(|(&id, m)| m.next_due(&compact::find_urr(&st.rules, id)?))
                    })
                    .min();
                self.urr_due.set(Some(d));
                d
            }
        };
        hb.chain(rtx).chain(urr).min()
    }

    /// Heartbeats to associated peers (section 6.2.2): a Heartbeat Request every
    /// `heartbeat_interval`; when `heartbeat_retries` requests are unanswered at the next due
    /// time, the association and its sessions are released (`AssociationDown`).
    pub fn poll_timers(&mut self, now: Nanos) -> Vec<Output> {
        self.urr_due.set(None);
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
                self.release(peer, DownReason::HeartbeatTimeout, &mut out);
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
        self.retransmit_reports(now, &mut out);
        let due: Vec<(u64, u32)> = self
            .sessions
            .iter()
            .flat_map(|(&seid, st)| {
                st.meters.iter().filter_map(move |(&id, m)| {
                    let at = m.next_due(&compact::find_urr(&st.rules, id)?)?;
                    (at <= now).then_some((seid, id))
                })
            })
            .collect();
        for (seid, urr_id) in due {
            self.check_urr(now, seid, urr_id, &mut out);
        }
        self.account(&out);
        out
    }

    /// Section 6.4: resend unanswered Session Report Requests every T1; after N1
    /// retransmissions give up (`ReportTimedOut`).
    fn retransmit_reports(&mut self, now: Nanos, out: &mut Vec<Output>) {
        let t1 = nanos(self.config.t1);
        let due: Vec<u32> = self
            .pending
            .iter()
            .filter(|(_, p)| p.next_at <= now)
            .map(|(&s, _)| s)
            .collect();
        for seq in due {
            let Some(p) = self.pending.get_mut(&seq) else {
                continue;
            };
            if p.retransmissions >= self.config.n1 {
                let seid = p.seid;
                self.pending.remove(&seq);
                self.stats.reports_timed_out += 1;
                out.push(Output::Event(Event::ReportTimedOut { seid, seq }));
                continue;
            }
            p.retransmissions += 1;
            p.next_at = now.saturating_add(t1);
            self.stats.reports_retransmitted += 1;
            out.push(Output::Send {
                to: p.peer,
                bytes: p.bytes.clone(),
            });
        }
    }

    /// Feed the cumulative usage of a URR (see [`Usage`]) and send the Session Report Request
    /// its volume threshold or quota calls for, if any (section 5.2.2.2). Unknown session or
    /// URR: nothing.
    pub fn update_usage(
        &mut self,
        now: Nanos,
        up_seid: u64,
        urr_id: u32,
        usage: Usage,
    ) -> Vec<Output> {
        self.urr_due.set(None);
        let mut out = Vec::new();
        let meter = self.sessions.get_mut(&up_seid);
        if let Some(m) = meter.and_then(|st| st.meters.get_mut(&urr_id)) {
            m.feed(usage);
            self.check_urr(now, up_seid, urr_id, &mut out);
        }
        self.account(&out);
        out
    }

    /// Evaluate the URR's triggers and report if one holds.
    fn check_urr(&mut self, now: Nanos, seid: u64, urr_id: u32, out: &mut Vec<Output>) {
        let Some(st) = self.sessions.get_mut(&seid) else {
            return;
        };
        let Some(urr) = compact::find_urr(&st.rules, urr_id) else {
            return;
        };
        let Some(m) = st.meters.get_mut(&urr_id) else {
            return;
        };
        let bits = m.due(&urr, now);
        if bits == 0 {
            return;
        }
        let g = m.report(&urr, t::USAGE_REPORT_SRR, bits, now, self.config.ntp_origin);
        if bits & urt::VOLQU != 0 {
            out.push(Output::Event(Event::QuotaExhausted { seid, urr_id }));
        }
        self.send_report(
            now,
            seid,
            SessionReportRequest {
                report_type: Bitmap(report_type::USAR),
                downlink_data_report: None,
                usage_report: vec![g],
                extra: Vec::new(),
            },
            out,
        );
    }

    /// Send a Session Report Request (section 7.5.8) for session `seid` to its CP function
    /// and keep it for retransmission.
    fn send_report(
        &mut self,
        now: Nanos,
        seid: u64,
        r: SessionReportRequest,
        out: &mut Vec<Output>,
    ) {
        let Some((peer, cp)) = self
            .sessions
            .get(&seid)
            .and_then(|st| compact::peer(&st.rules))
        else {
            return;
        };
        let hdr = cp.seid;
        let seq = self.alloc_seq();
        let msg = Message {
            seq,
            seid: Some(hdr),
            priority: None,
            fo: false,
            body: Body::SessionReportRequest(r),
        };
        let Ok(bytes) = msg.to_vec() else { return };
        self.pending.insert(
            seq,
            PendingReport {
                peer,
                seid,
                bytes: bytes.clone(),
                next_at: now.saturating_add(nanos(self.config.t1)),
                retransmissions: 0,
            },
        );
        self.stats.reports_sent += 1;
        out.push(Output::Send { to: peer, bytes });
    }

    /// The dataplane buffered the first downlink packet for `pdr_id` (section 5.2.3.1). If
    /// the PDR's FAR buffers and asks to notify the CP function (BUFF and NOCP), send one
    /// Session Report Request with a Downlink Data Report; further packets of the same
    /// buffering episode send nothing. The episode ends when the FAR is updated or removed
    /// (e.g. to FORW after paging). The BAR's Suggested Buffering Packets Count sizes the
    /// dataplane's buffer and does not change reporting.
    pub fn downlink_data(&mut self, now: Nanos, up_seid: u64, pdr_id: u16) -> Vec<Output> {
        self.urr_due.set(None);
        let mut out = Vec::new();
        let far = self.session(up_seid).and_then(|s| {
            let f = s.fars.get(&s.pdrs.get(&pdr_id)?.far_id)?;
            let notify = f
                .apply_action
                .contains(apply_action::BUFF | apply_action::NOCP);
            notify.then_some(f.id)
        });
        if let Some(far) = far {
            if self.dldr_reported.insert((up_seid, far)) {
                let r = SessionReportRequest {
                    report_type: Bitmap(report_type::DLDR),
                    downlink_data_report: Some(Grouped::new(
                        t::DOWNLINK_DATA_REPORT,
                        vec![Ie::PdrId(pdr_id)],
                    )),
                    usage_report: Vec::new(),
                    extra: Vec::new(),
                };
                self.send_report(now, up_seid, r, &mut out);
            }
        }
        self.account(&out);
        out
    }

    fn alloc_seq(&mut self) -> u32 {
        let s = self.next_seq;
        self.next_seq = (self.next_seq + 1) & 0x00ff_ffff;
        if self.next_seq == 0 {
            self.next_seq = 1;
        }
        s
    }

    fn expire_cache(&mut self, now: Nanos) {
        let keep = nanos(self.config.response_retention);
        while let Some(&(at, peer, seq)) = self.cache_order.front() {
            let expired = at.saturating_add(keep) <= now;
            if !expired && self.cache.len() <= self.config.response_cache_capacity {
                break;
            }
            self.cache_order.pop_front();
            if self.cache.get(&(peer, seq)).is_some_and(|c| c.at == at) {
                self.cache.remove(&(peer, seq));
            }
        }
    }

    /// Process one datagram from `peer` received at `now`; responses that carry usage
    /// report the usage last fed with [`Node::update_usage`].
    pub fn handle(&mut self, now: Nanos, peer: SocketAddr, datagram: &[u8]) -> Vec<Output> {
        self.handle_with(now, peer, datagram, &mut LastFed)
    }

    /// [`Node::handle`], asking `usage` for the latest usage of each URR a response reports
    /// (Session Deletion, Remove / Query URR), after the request has been validated.
    pub fn handle_with(
        &mut self,
        now: Nanos,
        peer: SocketAddr,
        datagram: &[u8],
        usage: &mut dyn UsageSource,
    ) -> Vec<Output> {
        let mut out = Vec::new();
        self.handle_inner(now, peer, datagram, usage, &mut out);
        self.account(&out);
        out
    }

    fn handle_inner(
        &mut self,
        now: Nanos,
        peer: SocketAddr,
        datagram: &[u8],
        usage: &mut dyn UsageSource,
        out: &mut Vec<Output>,
    ) {
        self.expire_cache(now);
        let pk = peek(datagram);
        if let Some(p) = pk {
            bump(&mut self.stats.rx, p.msg_type);
        }
        // Section 6.4: a retransmitted request gets the same answer, not a second execution.
        if let Some(p) = pk.filter(|p| p.version == 1 && is_answered_request(p.msg_type)) {
            if let Some(c) = self.cache.get(&(peer, p.seq)) {
                if c.msg_type == p.msg_type {
                    out.push(Output::Send {
                        to: peer,
                        bytes: c.bytes.clone(),
                    });
                    self.stats.duplicates += 1;
                    return;
                }
            }
        }
        let parsed = Message::parse(datagram);
        if let Err(e) = &parsed {
            bump(&mut self.stats.decode_errors, e.kind());
        }
        match parsed {
            Ok(m) => self.dispatch(now, peer, m, usage, out),
            Err(e) => match e.action() {
                Action::Discard => {}
                Action::VersionNotSupported => {
                    // Section 7.4.4.7: header only, echoing the sequence number if readable.
                    let msg = Message {
                        seq: pk.map_or(0, |p| p.seq),
                        seid: None,
                        priority: None,
                        fo: false,
                        body: Body::VersionNotSupportedResponse,
                    };
                    if let Ok(bytes) = msg.to_vec() {
                        out.push(Output::Send { to: peer, bytes });
                    }
                }
                Action::Reject {
                    cause,
                    offending_ie,
                } => {
                    if let Some(p) = pk.filter(|p| {
                        p.version == 1
                            && is_answered_request(p.msg_type)
                            && p.msg_type != mt::HEARTBEAT_REQUEST
                    }) {
                        let rej = Reject::new(cause, offending_ie);
                        let cp_seid = p
                            .seid
                            .and_then(|s| self.sessions.get(&s))
                            .and_then(|st| compact::peer(&st.rules))
                            .map_or(0, |(_, cp)| cp.seid);
                        if let Some(body) = self.reject_body(p.msg_type, rej) {
                            let seid = mt::is_session(p.msg_type).then_some(cp_seid);
                            self.respond(now, peer, p.seq, seid, body, out);
                        }
                    }
                }
            },
        }
    }

    /// Response body of the request type `req` carrying a rejection.
    fn reject_body(&self, req: u8, r: Reject) -> Option<Body> {
        let assoc = |rts| AssociationResponse {
            node_id: self.config.node_id.clone(),
            cause: r.cause,
            recovery_time_stamp: rts,
            up_function_features: None,
            extra: Vec::new(),
        };
        let sess = SessionResponse {
            cause: r.cause,
            offending_ie: r.offending_ie,
            created_pdr: Vec::new(),
            usage_report: Vec::new(),
            extra: failed_rule_ie(&r),
        };
        Some(match req {
            mt::ASSOCIATION_SETUP_REQUEST => {
                Body::AssociationSetupResponse(assoc(Some(self.config.recovery_time_stamp)))
            }
            mt::ASSOCIATION_UPDATE_REQUEST => Body::AssociationUpdateResponse(assoc(None)),
            mt::ASSOCIATION_RELEASE_REQUEST => Body::AssociationReleaseResponse(assoc(None)),
            mt::SESSION_ESTABLISHMENT_REQUEST => {
                Body::SessionEstablishmentResponse(SessionEstablishmentResponse {
                    node_id: self.config.node_id.clone(),
                    cause: r.cause,
                    offending_ie: r.offending_ie,
                    up_f_seid: None,
                    created_pdr: Vec::new(),
                    extra: failed_rule_ie(&r),
                })
            }
            mt::SESSION_MODIFICATION_REQUEST => Body::SessionModificationResponse(sess),
            mt::SESSION_DELETION_REQUEST => Body::SessionDeletionResponse(sess),
            _ => return None,
        })
    }

    /// Emit, cache (section 6.4) and queue a response.
    fn respond(
        &mut self,
        now: Nanos,
        peer: SocketAddr,
        seq: u32,
        seid: Option<u64>,
        body: Body,
        out: &mut Vec<Output>,
    ) {
        let req_type = body.msg_type() - 1;
        if let Some(c) = response_cause(&body) {
            bump(&mut self.stats.responses, (body.msg_type(), c));
        }
        let msg = Message {
            seq,
            seid,
            priority: None,
            fo: false,
            body,
        };
        let Ok(bytes) = msg.to_vec() else { return };
        self.cache.insert(
            (peer, seq),
            Cached {
                msg_type: req_type,
                at: now,
                bytes: bytes.clone(),
            },
        );
        self.cache_order.push_back((now, peer, seq));
        self.expire_cache(now);
        out.push(Output::Send { to: peer, bytes });
    }

    fn dispatch(
        &mut self,
        now: Nanos,
        peer: SocketAddr,
        m: Message,
        usage: &mut dyn UsageSource,
        out: &mut Vec<Output>,
    ) {
        let seq = m.seq;
        match m.body {
            Body::HeartbeatRequest(_) => {
                let body = Body::HeartbeatResponse(Heartbeat {
                    recovery_time_stamp: self.config.recovery_time_stamp,
                    extra: Vec::new(),
                });
                self.respond(now, peer, seq, None, body, out);
            }
            Body::HeartbeatResponse(_) => {
                if let Some(a) = self.associations.get_mut(&peer) {
                    a.hb.unanswered = 0;
                }
            }
            Body::AssociationSetupRequest(r) => self.association_setup(now, peer, seq, r, out),
            Body::AssociationUpdateRequest(r) => {
                let cause = match self.associations.get_mut(&peer) {
                    Some(a) => {
                        if r.up_function_features.is_some() {
                            a.cp_features = r.up_function_features;
                        }
                        cause::REQUEST_ACCEPTED
                    }
                    None => cause::NO_ESTABLISHED_PFCP_ASSOCIATION,
                };
                let body = self.assoc_response(cause, false);
                self.respond(
                    now,
                    peer,
                    seq,
                    None,
                    Body::AssociationUpdateResponse(body),
                    out,
                );
            }
            Body::AssociationReleaseRequest(_) => {
                let cause = if self.associations.contains_key(&peer) {
                    self.release(peer, DownReason::Released, out);
                    cause::REQUEST_ACCEPTED
                } else {
                    cause::NO_ESTABLISHED_PFCP_ASSOCIATION
                };
                let body = self.assoc_response(cause, false);
                self.respond(
                    now,
                    peer,
                    seq,
                    None,
                    Body::AssociationReleaseResponse(body),
                    out,
                );
            }
            Body::SessionEstablishmentRequest(r) => self.establish(now, peer, seq, r, usage, out),
            Body::SessionModificationRequest(r) => {
                self.modify(now, peer, seq, m.seid.unwrap_or(0), r, usage, out)
            }
            Body::SessionDeletionRequest(_) => {
                let seid = m.seid.unwrap_or(0);
                // Section 7.5.7: a final Usage Report per URR (trigger TERMR).
                let ids: Vec<u32> = self
                    .sessions
                    .get(&seid)
                    .map(|st| st.meters.keys().copied().collect())
                    .unwrap_or_default();
                let reports = self.final_reports(now, seid, &ids, t::USAGE_REPORT_SDR, usage);
                let (cause, hdr) = match self.remove_session(seid) {
                    Some(s) => {
                        out.push(Output::Event(Event::SessionDeleted { seid }));
                        (cause::REQUEST_ACCEPTED, s.cp_f_seid.seid)
                    }
                    None => (cause::SESSION_CONTEXT_NOT_FOUND, 0),
                };
                let body = Body::SessionDeletionResponse(SessionResponse {
                    cause,
                    offending_ie: None,
                    created_pdr: Vec::new(),
                    usage_report: reports,
                    extra: Vec::new(),
                });
                self.respond(now, peer, seq, Some(hdr), body, out);
            }
            Body::SessionReportResponse(r) => self.report_answered(peer, seq, r.cause),
            // Responses to requests we never send, Session Report Request (UP -> CP only),
            // Version Not Supported: nothing to do.
            _ => {}
        }
    }

    /// Session Report Response (section 7.5.9) to one of our requests: accepted completes
    /// it; 65 (the CP function has no such session) drops every report of the session;
    /// other rejections complete it too (counted). Retransmitted responses match nothing.
    fn report_answered(&mut self, peer: SocketAddr, seq: u32, c: u8) {
        let Some(p) = self.pending.get(&seq).filter(|p| p.peer == peer) else {
            self.stats.reports_unexpected_responses += 1;
            return;
        };
        let seid = p.seid;
        self.pending.remove(&seq);
        if cause::is_accepted(c) {
            self.stats.reports_acknowledged += 1;
        } else {
            self.stats.reports_rejected += 1;
            if c == cause::SESSION_CONTEXT_NOT_FOUND {
                self.pending.retain(|_, p| p.seid != seid);
            }
        }
    }

    /// Usage Reports of type `ie_type` with trigger TERMR (removed URR, deleted session) for
    /// `ids` of session `seid`, after asking `usage` for the latest counters.
    fn final_reports(
        &mut self,
        now: Nanos,
        seid: u64,
        ids: &[u32],
        ie_type: u16,
        usage: &mut dyn UsageSource,
    ) -> Vec<Grouped> {
        self.usage_reports(now, seid, ids, ie_type, urt::TERMR, usage)
    }

    fn usage_reports(
        &mut self,
        now: Nanos,
        seid: u64,
        ids: &[u32],
        ie_type: u16,
        trigger: u64,
        usage: &mut dyn UsageSource,
    ) -> Vec<Grouped> {
        let mut v = Vec::new();
        let Some(st) = self.sessions.get_mut(&seid) else {
            return v;
        };
        for id in ids {
            let u = compact::find_urr(&st.rules, *id);
            let (Some(u), Some(m)) = (u, st.meters.get_mut(id)) else {
                continue;
            };
            if let Some(x) = usage.usage(seid, *id) {
                m.feed(x);
            }
            v.push(m.report(&u, ie_type, trigger, now, self.config.ntp_origin));
        }
        v
    }

    fn assoc_response(&self, cause: u8, setup: bool) -> AssociationResponse {
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
    fn association_setup(
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
                self.remove_session(seid);
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

    fn release(&mut self, peer: SocketAddr, reason: DownReason, out: &mut Vec<Output>) {
        let Some(a) = self.associations.get(&peer) else {
            return;
        };
        let seids: Vec<u64> = a.sessions.iter().copied().collect();
        for seid in seids {
            self.remove_session(seid);
            out.push(Output::Event(Event::SessionDeleted { seid }));
        }
        self.associations.remove(&peer);
        out.push(Output::Event(Event::AssociationDown { peer, reason }));
    }

    fn remove_session(&mut self, seid: u64) -> Option<Session> {
        let st = self.sessions.remove(&seid)?;
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
            }
        }
        if let Some(a) = self.associations.get_mut(&s.peer) {
            a.sessions.remove(&seid);
        }
        Some(s)
    }

    /// TEIDs of `s` must not belong to another session (cause 73, Offending IE F-TEID).
    fn check_teids(&self, s: &Session) -> Result<(), Reject> {
        for teid in s.teids() {
            if self.teids.get(&teid).is_some_and(|&o| o != s.up_seid) {
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
    fn sync_session_state(
        &mut self,
        now: Nanos,
        s: &Session,
        updated_urr: &[(u32, bool)],
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
            meters.remove(&id);
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
        if let Some(bound) = self.urr_due.get() {
            let mine = meters
                .iter()
                .filter_map(|(id, m)| m.next_due(s.urrs.get(id)?))
                .min();
            let lower = match (bound, mine) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            self.urr_due.set(Some(lower));
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
    fn commit(&mut self, s: &Session) {
        let seid = s.up_seid;
        let meters = match self.sessions.remove(&seid) {
            Some(old) => {
                for teid in compact::decode(seid, &old.rules)
                    .map(|o| o.teids())
                    .unwrap_or_default()
                {
                    self.teids.remove(&teid);
                }
                old.meters
            }
            None => RuleMap::new(),
        };
        for teid in s.teids() {
            self.teids.insert(teid, seid);
        }
        if let Some(a) = self.associations.get_mut(&s.peer) {
            a.sessions.insert(seid);
        }
        let rules = compact::encode(s);
        self.sessions.insert(seid, Stored { rules, meters });
    }

    fn up_f_seid(&self, seid: u64) -> FSeid {
        let (ipv4, ipv6) = match &self.config.node_id {
            NodeId::Ipv4(a) => (Some(*a), None),
            NodeId::Ipv6(a) => (None, Some(*a)),
            NodeId::Fqdn(_) => self.config.n3_addresses,
        };
        FSeid { seid, ipv4, ipv6 }
    }

    fn alloc_seid(&mut self) -> u64 {
        loop {
            let s = self.next_seid;
            self.next_seid = self.next_seid.wrapping_add(1).max(1);
            if s != 0 && !self.sessions.contains_key(&s) {
                return s;
            }
        }
    }

    fn validate_establishment(
        &self,
        peer: SocketAddr,
        seid: u64,
        r: &SessionEstablishmentRequest,
    ) -> Result<(Session, Vec<Grouped>, u32), Reject> {
        if !self.associations.contains_key(&peer) {
            return Err(Reject::new(cause::NO_ESTABLISHED_PFCP_ASSOCIATION, None));
        }
        if self.sessions.len() >= self.config.max_sessions {
            return Err(Reject::new(cause::NO_RESOURCES_AVAILABLE, None));
        }
        let mut s = Session::new(seid, r.cp_f_seid, peer);
        let ftup = self.config.up_features.contains(up_features::FTUP);
        let mut alloc = TeidAlloc::new(
            &self.teids,
            seid,
            self.config.n3_addresses,
            ftup,
            self.next_teid,
        );
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
        let next = alloc.next_teid();
        Ok((s, alloc.created, next))
    }

    /// Session Establishment (section 6.3.2, 7.5.2 / 7.5.3). Rejections: 72 without
    /// association, 75 when the session table is full, 73 for a rule that cannot be created
    /// (duplicate ID, dangling FAR / QER / URR reference, TEID clash, unserved F-TEID family),
    /// 71 for CHOOSE without FTUP, 66 / 67 for missing IEs. Nothing changes on rejection.
    fn establish(
        &mut self,
        now: Nanos,
        peer: SocketAddr,
        seq: u32,
        r: SessionEstablishmentRequest,
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
            .validate_establishment(peer, candidate, &r)
            .and_then(|v| env.check_rules(&v.0).map(|()| v));
        let body = match checked {
            Ok((s, created, next_teid)) => {
                let seid = self.alloc_seid();
                debug_assert_eq!(seid, candidate);
                self.next_teid = next_teid;
                self.commit(&s);
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

    /// Session Modification (section 6.3.3, 7.5.4 / 7.5.5): unknown SEID gets 65 with header
    /// SEID 0 (section 7.2.2.4.2); the edits are applied to a scratch copy and committed only
    /// if all succeed (removing or updating a missing rule, creating a duplicate, or leaving a
    /// PDR with a dangling reference: 73). A CP F-SEID in the request replaces the stored one.
    /// On success the response carries a Usage Report (SMR) per removed URR (TERMR, measured
    /// up to the removal) and per queried URR (IMMER); querying an unknown URR is 73.
    #[allow(clippy::too_many_arguments)]
    fn modify(
        &mut self,
        now: Nanos,
        peer: SocketAddr,
        seq: u32,
        seid: u64,
        r: SessionModificationRequest,
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
        let ftup = self.config.up_features.contains(up_features::FTUP);
        let mut alloc = TeidAlloc::new(
            &self.teids,
            seid,
            self.config.n3_addresses,
            ftup,
            self.next_teid,
        );
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
        let queried: Vec<u32> = ids_of(&r.query_urr, t::URR_ID).collect();
        let sndem = sndem_tunnels(&cur, &r.update_far);
        let result = s
            .apply(&edits, &mut alloc)
            .and_then(|()| self.check_teids(&s))
            .and_then(
                |()| match queried.iter().find(|id| !s.urrs.contains_key(id)) {
                    Some(&id) => Err(Reject::rule(t::URR_ID).at(FailedRuleId::Urr(id))),
                    None => Ok(()),
                },
            )
            .and_then(|()| usage.check_rules(&s));
        let next_teid = alloc.next_teid();
        let created = std::mem::take(&mut alloc.created);
        let resp = match result {
            Ok(()) => {
                let hdr = s.cp_f_seid.seid;
                // Removed URRs report while their meters still exist.
                let mut reports =
                    self.final_reports(now, seid, &removed_urrs, t::USAGE_REPORT_SMR, usage);
                self.next_teid = next_teid;
                self.commit(&s);
                // A URR removed and re-created by the same request measures afresh.
                if let Some(st) = self.sessions.get_mut(&seid) {
                    for id in &removed_urrs {
                        st.meters.remove(id);
                    }
                }
                let updated_urr: Vec<(u32, bool)> = r
                    .update_urr
                    .iter()
                    .filter_map(|g| match g.get(t::URR_ID) {
                        Some(Ie::UrrId(id)) => Some((*id, g.get(t::VOLUME_QUOTA).is_some())),
                        _ => None,
                    })
                    .collect();
                let updated_far: Vec<u32> = ids_of(&r.update_far, t::FAR_ID).collect();
                self.sync_session_state(now, &s, &updated_urr, &updated_far);
                reports.extend(self.usage_reports(
                    now,
                    seid,
                    &queried,
                    t::USAGE_REPORT_SMR,
                    urt::IMMER,
                    usage,
                ));
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

/// The Failed Rule ID IE of a rejection, if it names one.
fn failed_rule_ie(r: &Reject) -> Vec<Ie> {
    r.failed_rule.map(Ie::FailedRuleId).into_iter().collect()
}

/// The Cause of a response body, for the statistics.
fn response_cause(b: &Body) -> Option<u8> {
    match b {
        Body::AssociationSetupResponse(r)
        | Body::AssociationUpdateResponse(r)
        | Body::AssociationReleaseResponse(r) => Some(r.cause),
        Body::SessionEstablishmentResponse(r) => Some(r.cause),
        Body::SessionModificationResponse(r)
        | Body::SessionDeletionResponse(r)
        | Body::SessionReportResponse(r) => Some(r.cause),
        _ => None,
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peek_reads_what_it_can() {
        assert!(peek(&[]).is_none());
        assert!(peek(&[0x20, 1, 0, 0]).is_none());
        let p = peek(&[0x20, 5, 0, 4, 0, 1, 2, 0]).unwrap();
        assert_eq!((p.version, p.msg_type, p.seq, p.seid), (1, 5, 0x102, None));
        let mut s = vec![0x21, 52, 0, 12, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 3, 0];
        let p = peek(&s).unwrap();
        assert_eq!((p.seq, p.seid), (3, Some(9)));
        s.truncate(14);
        assert!(peek(&s).is_none());
    }

    #[test]
    fn sequence_numbers_stay_24_bit_and_nonzero() {
        let mut n = Node::new(NodeConfig::new(NodeId::Ipv4(Ipv4Addr::LOCALHOST), 1, None));
        n.next_seq = 0x00ff_ffff;
        assert_eq!(n.alloc_seq(), 0x00ff_ffff);
        assert_eq!(n.alloc_seq(), 1);
    }
}
