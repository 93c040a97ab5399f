//! The INTManager's namespace control structures (Miranda et al., section III-B.2, Listing 2), I/O-free.
//!
//! "The INTManager keeps an internal structure for each monitored flow, described in Listing 2":
//! [`NamespaceState`] is that structure, and [`NamespaceTable`] holds one per namespace and applies
//! [`Request`]s to them. Every request is applied transactionally: it is checked completely before
//! anything changes, so a rejected request leaves the table exactly as it was.
//!
//! The dataplane's INT stages (source, transit, sink) do not read the table directly: they read an
//! immutable [`TableSnapshot`] (plain data, behind an [`Arc`]) taken with
//! [`NamespaceTable::snapshot`] after each change, e.g. published through an `ArcSwap`.
//!
//! Time is passed in (nanoseconds, any monotonic clock). The seed re-sends the in-band INT request
//! "every pre-defined interval (60 seconds by default) to enable the monitoring in new nodes if the
//! route changes" (III-B.2): [`NamespaceTable::due_requests`] lists the namespaces whose request
//! is due and [`NamespaceTable::mark_request_sent`] records a transmission.

use crate::request::Reply;
use crate::request::{
    Flags, Mode, ModifyFields, NamespaceStats, ReplyBody, Request, RequestError, Rule, TraceType,
};
use std::collections::BTreeMap;
use std::net::Ipv6Addr;
use std::sync::Arc;

/// Default in-band request re-send interval: 60 s (III-B.2).
pub const DEFAULT_RESEND_INTERVAL_NS: u64 = 60_000_000_000;
/// Default cap on installed namespaces.
pub const DEFAULT_MAX_NAMESPACES: usize = 1024;
/// Cap on per-node hop overrides per namespace.
pub const MAX_HOP_OVERRIDES: usize = 256;

/// Table configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableConfig {
    /// Most namespaces installed at once; installs beyond it fail with [`TableError::Full`].
    pub max_namespaces: usize,
    /// In-band request re-send interval, ns.
    pub resend_interval_ns: u64,
}

impl Default for TableConfig {
    fn default() -> Self {
        TableConfig {
            max_namespaces: DEFAULT_MAX_NAMESPACES,
            resend_interval_ns: DEFAULT_RESEND_INTERVAL_NS,
        }
    }
}

/// Listing 2 line 3: "counters tx/rx bytes/packets".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    /// Packets of the flow transmitted.
    pub tx_packets: u64,
    /// Bytes of the flow transmitted.
    pub tx_bytes: u64,
    /// Packets of the flow received.
    pub rx_packets: u64,
    /// Bytes of the flow received.
    pub rx_bytes: u64,
    /// INT-carrying packets generated.
    pub int_packets: u64,
}

/// The seed's `struct INTNSCtrl` (Listing 2), field for field:
///
/// | Listing 2 line | here |
/// |---|---|
/// | 2 `int request fields` | [`request`](Self::request) (Listing 1: ns, app, 5-tuple, trace type, mode) |
/// | 3 `counters tx/rx bytes/packets` | [`counters`](Self::counters) |
/// | 4 `bool request_sent` | [`request_sent`](Self::request_sent) |
/// | 5 `Timestamp last_request_tx` | [`last_request_tx`](Self::last_request_tx) |
/// | 6-9 `transmit_report`, `piggyback_report`, `extract_report`, `hop_enabled` | `request.flags` |
/// | 10 `Timestamp last_int_tx` | [`last_int_tx`](Self::last_int_tx) |
///
/// Plus [`hop_overrides`](Self::hop_overrides): per-node exceptions to `hop_enabled` (our
/// extension, so the controller can "selectively enable" hops, III-D, by node id).
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceState {
    /// The rule (Listing 1 fields plus the modifiable flags of lines 6-9).
    pub request: Rule,
    /// Counters.
    pub counters: Counters,
    /// Whether the in-band request was sent to the destination.
    pub request_sent: bool,
    /// When the in-band request was last sent, ns.
    pub last_request_tx: Option<u64>,
    /// When the last INT packet was sent (frequency mode), ns.
    pub last_int_tx: Option<u64>,
    /// Node id -> collection forced on (`true`) or off (`false`).
    pub hop_overrides: BTreeMap<u16, bool>,
    /// Who installed it: the controller (rule API) or an in-band 0x32 request.
    pub origin: Origin,
}

/// Who installed a namespace (docs/int.md "In-band installation").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Origin {
    /// The controller, over the rule API: an in-band request never changes it.
    #[default]
    Controller,
    /// Learned from an in-band request (seed III-B, III-D: "if a packet carries an INT
    /// request ... the Namespace control structure is created by the INTManager"): refreshed
    /// or replaced by later requests; this node is not the flow's source.
    InBand,
}

/// What an in-band request did to the table ([`NamespaceTable::learn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learned {
    /// The namespace was not present: installed from the request.
    Installed,
    /// Present with the same rule, learned in-band: nothing changed.
    Refreshed,
    /// Present with a different rule, learned in-band: the rule was replaced (a changed rule
    /// or route reaches this node with the source's periodic re-send).
    Replaced,
    /// Present and installed by the controller: left alone.
    Conflict,
}

impl NamespaceState {
    fn new(rule: Rule) -> Self {
        NamespaceState {
            origin: Origin::Controller,
            request: rule,
            counters: Counters::default(),
            request_sent: false,
            last_request_tx: None,
            last_int_tx: None,
            hop_overrides: BTreeMap::new(),
        }
    }

    /// Applies `changes` to a copy and returns it, or the first problem. `self` is unchanged.
    fn modified(&self, changes: &ModifyFields) -> Result<NamespaceState, TableError> {
        let mut next = self.clone();
        let rule = &mut next.request;
        if changes.mode.is_some() || changes.mode_setting.is_some() {
            let kind = changes.mode.unwrap_or(rule.mode.kind());
            let setting = changes.mode_setting.unwrap_or(rule.mode.setting());
            rule.mode = Mode::from_parts(kind, setting)?;
        }
        if let Some(t) = changes.trace_type {
            rule.trace_type = t;
        }
        let f: &mut Flags = &mut rule.flags;
        if let Some(v) = changes.transmit_report {
            f.transmit_report = v;
        }
        if let Some(v) = changes.piggyback_report {
            f.piggyback_report = v;
        }
        if let Some(v) = changes.extract_report {
            f.extract_report = v;
        }
        if let Some(v) = changes.hop_enabled {
            f.hop_enabled = v;
        }
        for n in &changes.enable_hops {
            next.hop_overrides.insert(*n, true);
        }
        for n in &changes.disable_hops {
            next.hop_overrides.insert(*n, false);
        }
        if next.hop_overrides.len() > MAX_HOP_OVERRIDES {
            return Err(TableError::TooManyHopOverrides {
                ns_id: self.request.ns_id,
                max: MAX_HOP_OVERRIDES,
            });
        }
        Ok(next)
    }

    fn stats(&self) -> NamespaceStats {
        NamespaceStats {
            ns_id: self.request.ns_id,
            app_id: self.request.app_id,
            tx_packets: self.counters.tx_packets,
            tx_bytes: self.counters.tx_bytes,
            rx_packets: self.counters.rx_packets,
            rx_bytes: self.counters.rx_bytes,
            int_packets: self.counters.int_packets,
            request_sent: self.request_sent,
            last_request_tx_ns: self.last_request_tx,
            last_int_tx_ns: self.last_int_tx,
        }
    }
}

/// Why the table refused a request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TableError {
    /// Install of a namespace that is already installed.
    #[error("namespace {ns_id} is already installed")]
    Duplicate {
        /// Namespace.
        ns_id: u16,
    },
    /// Modify/remove/stats of a namespace that is not installed.
    #[error("namespace {ns_id} is not installed")]
    Unknown {
        /// Namespace.
        ns_id: u16,
    },
    /// Install with the table at its cap.
    #[error("namespace table full ({max} namespaces)")]
    Full {
        /// Cap.
        max: usize,
    },
    /// Modify would exceed [`MAX_HOP_OVERRIDES`].
    #[error("namespace {ns_id}: more than {max} per-node hop overrides")]
    TooManyHopOverrides {
        /// Namespace.
        ns_id: u16,
        /// Cap.
        max: usize,
    },
    /// The changes are invalid for the rule (e.g. switching to probability mode with the old
    /// count setting 1000, which is not a percentage).
    #[error(transparent)]
    Invalid(#[from] RequestError),
}

impl TableError {
    /// HTTP-like code: 409 duplicate, 404 unknown, 507 full, 400 invalid.
    pub fn code(&self) -> u16 {
        match self {
            TableError::Duplicate { .. } => 409,
            TableError::Unknown { .. } => 404,
            TableError::Full { .. } => 507,
            TableError::TooManyHopOverrides { .. } => 400,
            TableError::Invalid(e) => e.code(),
        }
    }
}

/// What a dataplane stage needs of one namespace: immutable plain data.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceSnapshot {
    /// The rule, with the current flags.
    pub rule: Rule,
    /// Per-node hop overrides, sorted by node id.
    pub hop_overrides: Vec<(u16, bool)>,
    /// Learned from an in-band request: transit and sink act on it, the INTSource does not
    /// (this node is on the flow's path, not its source).
    pub in_band: bool,
}

impl NamespaceSnapshot {
    /// Namespace id.
    pub fn ns_id(&self) -> u16 {
        self.rule.ns_id
    }
    /// Trace type.
    pub fn trace_type(&self) -> TraceType {
        self.rule.trace_type
    }
    /// Whether the INTInter with `node_id` collects HbH metadata for this namespace (III-D).
    pub fn hop_enabled_for(&self, node_id: u16) -> bool {
        match self.hop_overrides.binary_search_by_key(&node_id, |e| e.0) {
            Ok(i) => self.hop_overrides[i].1,
            Err(_) => self.rule.flags.hop_enabled,
        }
    }
}

/// Immutable view of the whole table, for the dataplane.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TableSnapshot {
    /// Bumped on every change of the table's rules.
    pub generation: u64,
    /// Namespaces sorted by id.
    pub namespaces: Vec<NamespaceSnapshot>,
}

impl TableSnapshot {
    /// The namespace with this id (the INTInter/INTSink lookup: "if the Namespace in a packet
    /// does not match an installed rule, the packet is simply forwarded", III-A).
    pub fn get(&self, ns_id: u16) -> Option<&NamespaceSnapshot> {
        self.namespaces
            .binary_search_by_key(&ns_id, |n| n.rule.ns_id)
            .ok()
            .map(|i| &self.namespaces[i])
    }
    /// The first namespace (lowest id) whose rule matches this 5-tuple (the INTSource lookup);
    /// namespaces learned in-band are not source rules and never match.
    pub fn lookup_flow(
        &self,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        proto: u8,
        sport: u16,
        dport: u16,
    ) -> Option<&NamespaceSnapshot> {
        self.namespaces
            .iter()
            .find(|n| !n.in_band && n.rule.matches(src, dst, proto, sport, dport))
    }
}

/// The INTManager's namespace table.
#[derive(Debug, Clone)]
pub struct NamespaceTable {
    config: TableConfig,
    entries: BTreeMap<u16, NamespaceState>,
    generation: u64,
    snapshot: Option<Arc<TableSnapshot>>,
}

impl Default for NamespaceTable {
    fn default() -> Self {
        NamespaceTable::new(TableConfig::default())
    }
}

impl NamespaceTable {
    /// Empty table.
    pub fn new(config: TableConfig) -> Self {
        NamespaceTable {
            config,
            entries: BTreeMap::new(),
            generation: 0,
            snapshot: None,
        }
    }

    /// Number of installed namespaces.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// True if none installed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// The state of one namespace.
    pub fn get(&self, ns_id: u16) -> Option<&NamespaceState> {
        self.entries.get(&ns_id)
    }

    fn changed(&mut self) {
        self.generation += 1;
        self.snapshot = None;
    }

    /// Installs a rule (duplicate namespace or a full table is an error). A namespace learned
    /// in-band is taken over: the controller's rule replaces it and is then protected from
    /// in-band requests (counters and hop overrides are kept).
    pub fn install(&mut self, rule: Rule) -> Result<(), TableError> {
        let ns_id = rule.ns_id;
        if let Some(cur) = self.entries.get_mut(&ns_id) {
            if cur.origin == Origin::Controller {
                return Err(TableError::Duplicate { ns_id });
            }
            cur.origin = Origin::Controller;
            cur.request = rule;
            cur.request_sent = false;
            self.changed();
            return Ok(());
        }
        if self.entries.len() >= self.config.max_namespaces {
            return Err(TableError::Full {
                max: self.config.max_namespaces,
            });
        }
        self.entries.insert(ns_id, NamespaceState::new(rule));
        self.changed();
        Ok(())
    }

    /// Creates or refreshes a namespace from an in-band INT request (seed III-B, III-D), the rule
    /// already validated as a rule API install is. Absent: installed ([`Origin::InBand`]);
    /// learned in-band with the same rule: refreshed (no change, no new snapshot needed); with a
    /// different rule: replaced (counters and hop overrides kept); installed by the controller:
    /// [`Learned::Conflict`], unchanged. Only a full table is an error.
    pub fn learn(&mut self, rule: Rule) -> Result<Learned, TableError> {
        let ns_id = rule.ns_id;
        if let Some(cur) = self.entries.get_mut(&ns_id) {
            return Ok(match cur.origin {
                Origin::Controller => Learned::Conflict,
                Origin::InBand if cur.request == rule => Learned::Refreshed,
                Origin::InBand => {
                    cur.request = rule;
                    self.changed();
                    Learned::Replaced
                }
            });
        }
        if self.entries.len() >= self.config.max_namespaces {
            return Err(TableError::Full {
                max: self.config.max_namespaces,
            });
        }
        let mut st = NamespaceState::new(rule);
        st.origin = Origin::InBand;
        self.entries.insert(ns_id, st);
        self.changed();
        Ok(Learned::Installed)
    }

    /// Changes only the given fields; all or nothing.
    pub fn modify(&mut self, ns_id: u16, changes: &ModifyFields) -> Result<(), TableError> {
        let cur = self
            .entries
            .get(&ns_id)
            .ok_or(TableError::Unknown { ns_id })?;
        let next = cur.modified(changes)?;
        let mode_or_trace_changed = next.request.mode != cur.request.mode
            || next.request.trace_type != cur.request.trace_type;
        let mut next = next;
        if mode_or_trace_changed {
            // The destination must learn the new rule: re-send the in-band request promptly.
            next.request_sent = false;
        }
        self.entries.insert(ns_id, next);
        self.changed();
        Ok(())
    }

    /// Removes a namespace, returning its final state.
    pub fn remove(&mut self, ns_id: u16) -> Result<NamespaceState, TableError> {
        let st = self
            .entries
            .remove(&ns_id)
            .ok_or(TableError::Unknown { ns_id })?;
        self.changed();
        Ok(st)
    }

    /// All rules, by namespace.
    pub fn list(&self) -> Vec<Rule> {
        self.entries.values().map(|s| s.request.clone()).collect()
    }

    /// Counters of one namespace or all.
    pub fn stats(&self, ns_id: Option<u16>) -> Result<Vec<NamespaceStats>, TableError> {
        match ns_id {
            Some(ns_id) => self
                .entries
                .get(&ns_id)
                .map(|s| vec![s.stats()])
                .ok_or(TableError::Unknown { ns_id }),
            None => Ok(self.entries.values().map(NamespaceState::stats).collect()),
        }
    }

    /// Applies a request and returns the immediate reply (III-B).
    pub fn handle(&mut self, req: Request) -> Reply {
        let r = match req {
            Request::Install(rule) => {
                let ns_id = rule.ns_id;
                self.install(rule).map(|_| ReplyBody::Installed { ns_id })
            }
            Request::Modify { namespace, changes } => self
                .modify(namespace, &changes)
                .map(|_| ReplyBody::Modified { ns_id: namespace }),
            Request::Remove { namespace } => self
                .remove(namespace)
                .map(|_| ReplyBody::Removed { ns_id: namespace }),
            Request::List => Ok(ReplyBody::List { rules: self.list() }),
            Request::Stats { namespace } => self
                .stats(namespace)
                .map(|stats| ReplyBody::Stats { stats }),
        };
        match r {
            Ok(body) => Reply::Ok(body),
            Err(e) => Reply::error(e.code(), e),
        }
    }

    /// Namespaces whose in-band request is due at `now`: never sent, or last sent at least the
    /// re-send interval ago. A clock that went backwards makes nothing due.
    pub fn due_requests(&self, now: u64) -> Vec<u16> {
        let every = self.config.resend_interval_ns;
        self.entries
            .iter()
            .filter(|(_, s)| match (s.request_sent, s.last_request_tx) {
                (true, Some(t)) => now.checked_sub(t).is_some_and(|d| d >= every),
                _ => true,
            })
            .map(|(ns, _)| *ns)
            .collect()
    }

    /// Records that the in-band request of `ns_id` was sent at `now`.
    pub fn mark_request_sent(&mut self, ns_id: u16, now: u64) -> Result<(), TableError> {
        let s = self
            .entries
            .get_mut(&ns_id)
            .ok_or(TableError::Unknown { ns_id })?;
        s.request_sent = true;
        s.last_request_tx = Some(now);
        Ok(())
    }

    /// Adds to the TX counters (and the INT packet counter / `last_int_tx` if `int` is set).
    pub fn record_tx(
        &mut self,
        ns_id: u16,
        bytes: u64,
        int: bool,
        now: u64,
    ) -> Result<(), TableError> {
        let s = self
            .entries
            .get_mut(&ns_id)
            .ok_or(TableError::Unknown { ns_id })?;
        s.counters.tx_packets = s.counters.tx_packets.wrapping_add(1);
        s.counters.tx_bytes = s.counters.tx_bytes.wrapping_add(bytes);
        if int {
            s.counters.int_packets = s.counters.int_packets.wrapping_add(1);
            s.last_int_tx = Some(now);
        }
        Ok(())
    }

    /// Adds to the RX counters.
    pub fn record_rx(&mut self, ns_id: u16, bytes: u64) -> Result<(), TableError> {
        let s = self
            .entries
            .get_mut(&ns_id)
            .ok_or(TableError::Unknown { ns_id })?;
        s.counters.rx_packets = s.counters.rx_packets.wrapping_add(1);
        s.counters.rx_bytes = s.counters.rx_bytes.wrapping_add(bytes);
        Ok(())
    }

    /// Immutable snapshot for the dataplane; cached until the next change.
    pub fn snapshot(&mut self) -> Arc<TableSnapshot> {
        if let Some(s) = &self.snapshot {
            return Arc::clone(s);
        }
        let s = Arc::new(TableSnapshot {
            generation: self.generation,
            namespaces: self
                .entries
                .values()
                .map(|s| NamespaceSnapshot {
                    rule: s.request.clone(),
                    hop_overrides: s.hop_overrides.iter().map(|(k, v)| (*k, *v)).collect(),
                    in_band: s.origin == Origin::InBand,
                })
                .collect(),
        });
        self.snapshot = Some(Arc::clone(&s));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Protocol, TraceType};

    fn rule(ns: u16) -> Rule {
        Rule {
            ns_id: ns,
            app_id: 7,
            src_ip: "2001:db8::1".parse().unwrap(),
            dst_ip: "2001:db8::2".parse().unwrap(),
            src_port: 0,
            dst_port: 5000,
            protocol: Protocol::Udp,
            trace_type: TraceType::SEED_EXPERIMENTS,
            mode: Mode::Count(100),
            flags: Flags::default(),
        }
    }

    #[test]
    fn snapshot_cached_until_change() {
        let mut t = NamespaceTable::default();
        t.install(rule(1)).unwrap();
        let a = t.snapshot();
        let b = t.snapshot();
        assert!(Arc::ptr_eq(&a, &b));
        t.remove(1).unwrap();
        let c = t.snapshot();
        assert!(c.namespaces.is_empty());
        assert!(c.generation > a.generation);
        assert_eq!(a.get(1).unwrap().ns_id(), 1);
    }

    #[test]
    fn learn_installs_refreshes_replaces_and_yields_to_the_controller() {
        let mut t = NamespaceTable::new(TableConfig {
            max_namespaces: 2,
            ..TableConfig::default()
        });
        assert_eq!(t.learn(rule(1)), Ok(Learned::Installed));
        let g0 = t.snapshot();
        let n = g0.get(1).unwrap();
        assert!(n.in_band);
        // Transit and sink find it by id; the source's flow lookup does not.
        let (src, dst) = (rule(1).src_ip, rule(1).dst_ip);
        assert!(g0.lookup_flow(src, dst, 17, 9, 5000).is_none());
        assert_eq!(t.learn(rule(1)), Ok(Learned::Refreshed));
        assert!(Arc::ptr_eq(&g0, &t.snapshot()), "a refresh changes nothing");
        let mut changed = rule(1);
        changed.mode = Mode::Count(5);
        assert_eq!(t.learn(changed.clone()), Ok(Learned::Replaced));
        assert_eq!(t.get(1).unwrap().request, changed);
        assert!(t.snapshot().generation > g0.generation);
        // Controller-installed namespaces are never touched in-band.
        t.install(rule(2)).unwrap();
        let mut other = rule(2);
        other.app_id = 99;
        assert_eq!(t.learn(other), Ok(Learned::Conflict));
        assert_eq!(t.get(2).unwrap().request, rule(2));
        // Full table: an error, nothing installed.
        assert_eq!(t.learn(rule(3)), Err(TableError::Full { max: 2 }));
        assert!(t.get(3).is_none());
        // The controller takes a learned namespace over; it is then protected and a source rule.
        t.install(rule(1)).unwrap();
        assert_eq!(t.get(1).unwrap().origin, Origin::Controller);
        assert_eq!(t.learn(changed), Ok(Learned::Conflict));
        assert!(t.snapshot().lookup_flow(src, dst, 17, 9, 5000).is_some());
        assert_eq!(t.install(rule(1)), Err(TableError::Duplicate { ns_id: 1 }));
    }

    #[test]
    fn hop_overrides() {
        let mut t = NamespaceTable::default();
        t.install(rule(1)).unwrap();
        let ch = ModifyFields {
            hop_enabled: Some(false),
            enable_hops: vec![3],
            ..Default::default()
        };
        t.modify(1, &ch).unwrap();
        let s = t.snapshot();
        let n = s.get(1).unwrap();
        assert!(n.hop_enabled_for(3));
        assert!(!n.hop_enabled_for(4));
    }

    #[test]
    fn lookup_flow_port_wildcard() {
        let mut t = NamespaceTable::default();
        t.install(rule(1)).unwrap();
        let s = t.snapshot();
        let (a, b) = (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        );
        assert!(s.lookup_flow(a, b, 17, 1234, 5000).is_some());
        assert!(s.lookup_flow(a, b, 17, 1234, 5001).is_none());
        assert!(s.lookup_flow(a, b, 6, 1234, 5000).is_none());
    }
}
