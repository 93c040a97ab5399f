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

mod association;
pub mod audit;
mod compact;
mod dispatch;
mod establishment;
mod modification;
pub mod path;
mod reports;
pub mod rulemap;
pub mod session;
mod stats;
mod teid_pool;
mod timers;
pub use stats::N4Stats;
pub mod usage;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use peregrine_pfcp::cause;
use peregrine_pfcp::ie::{
    apply_action, ie_type as t, node_report_type, report_type, smreq_flags,
    usage_report_trigger as urt, Bitmap, FSeid, FailedRuleId, Grouped, Ie, NodeId,
    OuterHeaderCreation, RemoteGtpuPeer,
};
use peregrine_pfcp::message::{
    msg_type as mt, AssociationRequest, AssociationResponse, Heartbeat, NodeReportRequest,
    SessionEstablishmentRequest, SessionEstablishmentResponse, SessionModificationRequest,
    SessionReportRequest, SessionResponse,
};
use peregrine_pfcp::{Action, Body, Message};

use dispatch::failed_rule_ie;
pub use rulemap::RuleMap;
pub use session::{
    Bar, Far, ForwardingParameters, LocalFTeid, Pdi, Pdr, Qer, Reject, Session, Urr,
};
use session::{Edits, TeidAlloc};
use stats::bump;
pub use usage::{LastFed, Usage, UsageSource};
use usage::{Meter, QuotaUpdate};

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
    /// GTP-U path supervision (TS 29.281 section 7.2.1, see [`path`]): an Echo Request to
    /// each peer in use every `echo_interval` (zero: off), repeated after `echo_t3` up to
    /// `echo_n3` times before the path is declared failed.
    pub echo_interval: Duration,
    pub echo_t3: Duration,
    pub echo_n3: u32,
    /// F-TEID CHOOSE reuses a released TEID (oldest first) only this long after its release
    /// (see `teid_pool`): late G-PDUs of the old session must not reach the new one.
    pub teid_reuse_after: Duration,
    /// Local TEIDs of sessions the node does not manage (the daemon's static sessions):
    /// F-TEID CHOOSE never hands one out, and a CP-assigned one is refused (cause 73,
    /// Offending IE F-TEID), as a TEID of another session is.
    pub reserved_teids: BTreeSet<u32>,
}

impl NodeConfig {
    /// Defaults: FTUP, 100k sessions, heartbeat every 10 s with 3 retries, 30 s / 4096
    /// response cache, T1 3 s / N1 3, NTP origin = the Recovery Time Stamp, GTP-U Echo every
    /// 60 s (T3 3 s, N3 3), released TEIDs reused after 60 s.
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
            echo_interval: Duration::from_secs(60),
            echo_t3: Duration::from_secs(3),
            echo_n3: 3,
            teid_reuse_after: Duration::from_secs(60),
            reserved_teids: BTreeSet::new(),
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
    /// Send a GTP-U Echo Request (TS 29.281 section 7.2.1) with `seq` to the GTP-U peer;
    /// feed its Echo Response to [`Node::echo_response`].
    Echo {
        peer: IpAddr,
        seq: u16,
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
    /// The URR's Volume or Time Quota is used up: stop forwarding its traffic (section
    /// 5.2.2.2).
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
    /// A Session Report Request (or, with `seid` 0, a Node Report Request) went unanswered
    /// after N1 retransmissions.
    ReportTimedOut {
        seid: u64,
        seq: u32,
    },
    /// The GTP-U path to `peer` failed (no Echo Response): reported in a Node Report Request.
    PathFailed {
        peer: IpAddr,
    },
    /// The failed path to `peer` answered again: reported in a Node Report Request.
    PathRecovered {
        peer: IpAddr,
    },
}

/// An outstanding Session Report Request (section 6.4).
#[derive(Debug, Clone, PartialEq, Eq)]
struct PendingReport {
    peer: SocketAddr,
    /// The session reported on; 0 for a Node Report Request.
    seid: u64,
    /// A Node Report Request (section 7.4.5.1) rather than a Session Report Request.
    node: bool,
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
    /// The TEID counter and the released TEIDs waiting for reuse (F-TEID CHOOSE).
    teid_pool: teid_pool::TeidPool,
    next_seid: u64,
    next_seq: u32,
    cache: HashMap<(SocketAddr, u32), Cached>,
    cache_order: VecDeque<(Nanos, SocketAddr, u32)>,
    /// URR timers by deadline and the URRs whose counters need polling (see [`timers`]).
    urr_index: timers::UrrIndex,
    /// Our outstanding Session Report Requests by sequence number.
    pending: BTreeMap<u32, PendingReport>,
    /// (UP SEID, FAR ID) whose buffering episode has been reported (DLDR).
    dldr_reported: BTreeSet<(u64, u32)>,
    /// GTP-U paths in use and their supervision.
    paths: path::Paths,
    stats: N4Stats,
}

fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Node {
    pub fn new(config: NodeConfig) -> Node {
        Node {
            associations: BTreeMap::new(),
            sessions: BTreeMap::new(),
            teids: BTreeMap::new(),
            teid_pool: teid_pool::TeidPool::new(nanos(config.teid_reuse_after)),
            next_seid: 1,
            next_seq: 1,
            cache: HashMap::new(),
            cache_order: VecDeque::new(),
            urr_index: timers::UrrIndex::default(),
            pending: BTreeMap::new(),
            dldr_reported: BTreeSet::new(),
            paths: path::Paths::new(path::EchoConfig {
                interval: nanos(config.echo_interval),
                t3: nanos(config.echo_t3),
                n3: config.echo_n3,
            }),
            stats: N4Stats::default(),
            config,
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
    /// O(URRs): for audits and tests; the usage poll wants [`Node::watched_urrs`].
    pub fn urr_keys(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.sessions
            .iter()
            .flat_map(|(&seid, st)| st.meters.keys().map(move |&id| (seid, id)))
    }

    /// (UP SEID, URR ID) of the URRs whose triggers depend on counted volume (a Volume
    /// Threshold, an unreported Volume Quota), in order: the only ones whose usage the daemon
    /// needs to feed with [`Node::update_usage`] between requests. Time-based triggers are
    /// timers ([`Node::poll_timers_with`] reads those URRs' usage when they fire), and the
    /// final reports of deletions and modifications ask the [`UsageSource`].
    pub fn watched_urrs(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.urr_index.watched()
    }

    /// (URRs with an armed timer, URRs watched for volume), for metrics and tests.
    pub fn urr_index_sizes(&self) -> (usize, usize) {
        (self.urr_index.armed_len(), self.urr_index.watched_len())
    }

    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// (local TEIDs in use, the highest of them, released TEIDs in quarantine): how dense
    /// F-TEID CHOOSE keeps the TEIDs (see `teid_pool`), for metrics and tests.
    pub fn teid_usage(&self) -> (usize, Option<u32>, usize) {
        let highest = self.teids.last_key_value().map(|(&t, _)| t);
        (self.teids.len(), highest, self.teid_pool.in_quarantine())
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
}
