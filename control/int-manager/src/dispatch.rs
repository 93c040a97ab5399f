//! The INT manager's message dispatch and report publication, I/O-free (Miranda et al., III-B).
//!
//! [`ManagerCore`] is everything the manager does between its sockets: it turns one rule API
//! message (bytes) into one reply (bytes) applied to the [`NamespaceTable`], turns one report
//! from the sink into one PUB message (topic and payload), feeds the [`QosMonitor`] and emits
//! its reports when a window closes. Time is passed in; the thread in [`super`] owns the sockets.

use super::{Encoding, ManagedReport, Publication};
use crate::codec::{self, ReplyCodec};
use crate::qos_monitor::{QosConfig, QosMonitor, QosReport, Window};
use peregrine_int::namespace::{Learned, NamespaceTable, TableConfig, TableSnapshot};
use peregrine_int::request::{Reply, Request, RequestError, Rule};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Encoding of a rule API message, detected per message: a message whose first byte is ASCII
/// (JSON whitespace, `{`, or anything else a human might type) is JSON; one starting with a
/// non-ASCII byte (0x80 and above) is CBOR: a CBOR request is a map, major type 5, initial byte
/// 0xA0..=0xBF, possibly after a tag 0xC0..=0xDB, and no JSON text can start with such a byte. The reply uses the same
/// encoding; an empty message gets a JSON reply.
pub fn detect_encoding(msg: &[u8]) -> Encoding {
    match msg.first() {
        Some(&b) if b >= 0x80 => Encoding::Cbor,
        _ => Encoding::Json,
    }
}

/// Why a rule API message was rejected, one counter each (every rejection is named).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RejectCounters {
    /// Zero-length message.
    pub empty: u64,
    /// Multipart message (the API is one frame per request).
    pub multipart: u64,
    /// Longer than [`codec::MAX_PAYLOAD`] (413).
    pub oversize: u64,
    /// Nested deeper than [`codec::MAX_DEPTH`].
    pub too_deep: u64,
    /// Not JSON/CBOR of the schema's shape: syntax errors, unknown requests or fields,
    /// duplicate fields, trailing bytes.
    pub malformed: u64,
    /// Well formed but a field is missing, of the wrong type or out of range.
    pub invalid: u64,
    /// Modify / remove / stats of a namespace that is not installed (404).
    pub unknown_namespace: u64,
    /// Install of a namespace already installed (409).
    pub duplicate_namespace: u64,
    /// Install with the table full (507).
    pub table_full: u64,
}

impl RejectCounters {
    /// `(reason, count)` pairs, for exporters.
    pub fn reasons(&self) -> [(&'static str, u64); 9] {
        [
            ("empty", self.empty),
            ("multipart", self.multipart),
            ("oversize", self.oversize),
            ("too_deep", self.too_deep),
            ("malformed", self.malformed),
            ("invalid", self.invalid),
            ("unknown_namespace", self.unknown_namespace),
            ("duplicate_namespace", self.duplicate_namespace),
            ("table_full", self.table_full),
        ]
    }
    /// Sum of all reasons.
    pub fn total(&self) -> u64 {
        self.reasons().iter().map(|r| r.1).sum()
    }
}

/// What in-band INT requests (0x32, already decoded and validated) did to the table
/// ([`ManagerCore::on_inband_request`]; docs/int.md "In-band installation").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct InBandCounters {
    /// Namespace absent: installed from the request.
    pub installed: u64,
    /// Namespace learned in-band with the same rule: nothing changed.
    pub refreshed: u64,
    /// Namespace learned in-band with a different rule: replaced.
    pub replaced: u64,
    /// Namespace installed by the controller: left alone.
    pub conflict: u64,
    /// Namespace absent and the table full: not installed.
    pub table_full: u64,
}

impl InBandCounters {
    /// `(outcome, count)` pairs, for exporters.
    pub fn outcomes(&self) -> [(&'static str, u64); 5] {
        [
            ("installed", self.installed),
            ("refreshed", self.refreshed),
            ("replaced", self.replaced),
            ("conflict", self.conflict),
            ("table_full", self.table_full),
        ]
    }
}

/// The manager's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ManagerCounters {
    /// Rule API messages received (each got exactly one reply).
    pub requests: u64,
    /// Messages detected as JSON.
    pub json_requests: u64,
    /// Messages detected as CBOR.
    pub cbor_requests: u64,
    /// Requests answered with `ok`.
    pub ok: u64,
    /// Successful installs.
    pub installs: u64,
    /// Successful modifies.
    pub modifies: u64,
    /// Successful removes.
    pub removes: u64,
    /// Successful lists.
    pub lists: u64,
    /// Successful stats.
    pub stats: u64,
    /// Requests answered with an error, by reason.
    pub rejected: RejectCounters,
    /// Table snapshots handed to the dataplane.
    pub snapshots_published: u64,
    /// Replies the socket failed to send (peer gone).
    pub reply_send_errors: u64,
    /// Reports received from the sink.
    pub reports_in: u64,
    /// Raw reports published.
    pub raw_published: u64,
    /// QoS reports published.
    pub qos_published: u64,
    /// Reports dropped: their namespace is not installed (e.g. removed while in flight).
    pub reports_unknown_namespace: u64,
    /// Reports the QoS monitor refused (namespace cap or too many hops; still published raw).
    pub qos_ingest_refused: u64,
    /// Publications the PUB socket failed to send.
    pub publish_errors: u64,
    /// In-band requests applied, by outcome.
    pub inband: InBandCounters,
}

/// What [`ManagerCore::handle_message`] produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Handled {
    /// The reply, in the request's encoding.
    pub reply: Vec<u8>,
    /// The table changed: publish a new snapshot.
    pub changed: bool,
}

/// The manager's state and logic, without sockets or threads.
#[derive(Debug)]
pub struct ManagerCore {
    table: NamespaceTable,
    qos: QosMonitor,
    counters: ManagerCounters,
    report_encoding: Encoding,
    qos_grace_ns: u64,
    /// Per window length, the index `now / W` of the last tick (windows closed up to it).
    last_tick: [Option<u64>; 3],
}

impl ManagerCore {
    /// A manager with an empty table. Reports are published in `report_encoding`; QoS windows
    /// are closed `qos_grace_ns` after their end so reports still in flight land in them.
    pub fn new(
        table: TableConfig,
        qos: QosConfig,
        report_encoding: Encoding,
        qos_grace_ns: u64,
    ) -> Self {
        ManagerCore {
            table: NamespaceTable::new(table),
            qos: QosMonitor::new(qos),
            counters: ManagerCounters::default(),
            report_encoding,
            qos_grace_ns,
            last_tick: [None; 3],
        }
    }

    /// The counters.
    pub fn counters(&self) -> ManagerCounters {
        self.counters
    }
    /// Counts a reply the transport could not send.
    pub fn count_reply_send_error(&mut self) {
        self.counters.reply_send_errors += 1;
    }
    /// Counts a publication the transport could not send.
    pub fn count_publish_error(&mut self) {
        self.counters.publish_errors += 1;
    }
    /// Counts a multipart message and returns its error reply (JSON or CBOR after the first
    /// frame's encoding).
    pub fn reject_multipart(&mut self, first: &[u8], frames: usize) -> Vec<u8> {
        let enc = self.count_request(first);
        self.counters.rejected.multipart += 1;
        encode_reply(
            &Reply::error(
                400,
                format!("multipart message ({frames} frames): send one frame per request"),
            ),
            enc,
        )
    }
    /// The namespace table.
    pub fn table(&self) -> &NamespaceTable {
        &self.table
    }
    /// The QoS monitor.
    pub fn qos(&self) -> &QosMonitor {
        &self.qos
    }
    /// The current snapshot for the dataplane, counted as published.
    pub fn publish_snapshot(&mut self) -> Arc<TableSnapshot> {
        self.counters.snapshots_published += 1;
        self.table.snapshot()
    }

    fn count_request(&mut self, msg: &[u8]) -> Encoding {
        self.counters.requests += 1;
        let enc = detect_encoding(msg);
        match enc {
            Encoding::Json => self.counters.json_requests += 1,
            Encoding::Cbor => self.counters.cbor_requests += 1,
        }
        enc
    }

    /// Decodes, applies and answers one rule API message. Never panics; every input gets a
    /// reply (III-B: "every configuration ... gets an immediate confirmation").
    pub fn handle_message(&mut self, msg: &[u8]) -> Handled {
        let enc = self.count_request(msg);
        let reply = |r: &Reply| encode_reply(r, enc);
        if msg.is_empty() {
            self.counters.rejected.empty += 1;
            return Handled {
                reply: reply(&Reply::error(
                    400,
                    "empty message: expected a JSON or CBOR request",
                )),
                changed: false,
            };
        }
        let decoded = match enc {
            Encoding::Json => codec::decode_json(msg),
            Encoding::Cbor => codec::decode_cbor(msg),
        };
        let req = match decoded {
            Ok(r) => r,
            Err(e) => {
                let c = &mut self.counters.rejected;
                match e {
                    RequestError::PayloadTooLarge { .. } => c.oversize += 1,
                    RequestError::NestingTooDeep { .. } => c.too_deep += 1,
                    RequestError::Malformed(_) => c.malformed += 1,
                    _ => c.invalid += 1,
                }
                return Handled {
                    reply: reply(&e.to_reply()),
                    changed: false,
                };
            }
        };
        let removed = match &req {
            Request::Remove { namespace } => Some(*namespace),
            _ => None,
        };
        let kind = RequestKind::of(&req);
        let r = self.table.handle(req);
        let changed = match &r {
            Reply::Ok(_) => {
                self.counters.ok += 1;
                let c = &mut self.counters;
                match kind {
                    RequestKind::Install => c.installs += 1,
                    RequestKind::Modify => c.modifies += 1,
                    RequestKind::Remove => c.removes += 1,
                    RequestKind::List => c.lists += 1,
                    RequestKind::Stats => c.stats += 1,
                }
                if let Some(ns) = removed {
                    // Its QoS state would otherwise linger until the monitor's cap evicts it.
                    self.qos.remove_namespace(ns as u32);
                }
                kind.mutates()
            }
            Reply::Error { code, .. } => {
                let c = &mut self.counters.rejected;
                match code {
                    404 => c.unknown_namespace += 1,
                    409 => c.duplicate_namespace += 1,
                    507 => c.table_full += 1,
                    413 => c.oversize += 1,
                    _ => c.invalid += 1,
                }
                false
            }
        };
        Handled {
            reply: reply(&r),
            changed,
        }
    }

    /// One in-band INT request (seed III-B, III-D), decoded and validated by the caller exactly
    /// as a rule API install: creates or refreshes the namespace ([`NamespaceTable::learn`]).
    /// Returns whether the table changed (publish a snapshot). Never touches a namespace the
    /// controller installed.
    pub fn on_inband_request(&mut self, rule: Rule) -> bool {
        let c = &mut self.counters.inband;
        match self.table.learn(rule) {
            Ok(Learned::Installed) => c.installed += 1,
            Ok(Learned::Replaced) => c.replaced += 1,
            Ok(Learned::Refreshed) => {
                c.refreshed += 1;
                return false;
            }
            Ok(Learned::Conflict) => {
                c.conflict += 1;
                return false;
            }
            // The only error of `learn`.
            Err(_) => {
                c.table_full += 1;
                return false;
            }
        }
        true
    }

    /// One report from the sink: fed to the QoS monitor and returned as a publication on
    /// `raw/<app_id>/<ns_id>`, or `None` (counted) if its namespace is not installed.
    pub fn on_report<R: ManagedReport>(&mut self, report: &R) -> Option<Publication> {
        self.counters.reports_in += 1;
        let ns = report.ns_id();
        let app = match u16::try_from(ns).ok().and_then(|n| self.table.get(n)) {
            Some(st) => st.request.app_id,
            None => {
                self.counters.reports_unknown_namespace += 1;
                return None;
            }
        };
        if let Some(raw) = report.qos_input() {
            if self.qos.ingest(&raw).is_err() {
                self.counters.qos_ingest_refused += 1;
            }
        }
        let payload = encode_value(report, self.report_encoding);
        self.counters.raw_published += 1;
        Some(Publication {
            topic: topic("raw", app, ns),
            payload,
        })
    }

    /// Closes the QoS windows that ended at least the grace period before `now` (the sink's
    /// clock, ns) and appends one publication per installed namespace with reports in the
    /// closed window, on `qos/<app_id>/<ns_id>`. The first call only sets the reference.
    pub fn tick(&mut self, now: u64, out: &mut Vec<Publication>) {
        let t = now.saturating_sub(self.qos_grace_ns);
        for (i, w) in Window::ALL.into_iter().enumerate() {
            let idx = t / w.duration_ns();
            let prev = self.last_tick[i].replace(idx);
            if prev.is_none_or(|p| idx <= p) {
                continue;
            }
            for (ns, app) in self.installed() {
                if let Some(rep) = self.qos.report(ns as u32, w, t) {
                    out.push(self.qos_publication(app, &rep));
                }
            }
        }
    }

    fn installed(&self) -> Vec<(u16, u32)> {
        self.table
            .list()
            .iter()
            .map(|r| (r.ns_id, r.app_id))
            .collect()
    }

    fn qos_publication(&mut self, app: u32, rep: &QosReport) -> Publication {
        self.counters.qos_published += 1;
        Publication {
            topic: topic("qos", app, rep.namespace),
            payload: encode_value(rep, self.report_encoding),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum RequestKind {
    Install,
    Modify,
    Remove,
    List,
    Stats,
}

impl RequestKind {
    fn of(r: &Request) -> Self {
        match r {
            Request::Install(_) => RequestKind::Install,
            Request::Modify { .. } => RequestKind::Modify,
            Request::Remove { .. } => RequestKind::Remove,
            Request::List => RequestKind::List,
            Request::Stats { .. } => RequestKind::Stats,
        }
    }
    fn mutates(self) -> bool {
        matches!(
            self,
            RequestKind::Install | RequestKind::Modify | RequestKind::Remove
        )
    }
}

/// The PUB topic of a report: `<kind>/<app_id>/<ns_id>` (`kind` is `raw` or `qos`). A SUB
/// prefix filter selects a kind (`raw/`), an application (`raw/1/`) or a namespace (`raw/1/7`,
/// which as a prefix also matches `raw/1/70`: compare the whole topic to be exact).
pub fn topic(kind: &str, app_id: u32, ns_id: u32) -> String {
    format!("{kind}/{app_id}/{ns_id}")
}

/// Splits a topic made by [`topic`] into `(kind, app_id, ns_id)`.
pub fn parse_topic(t: &str) -> Option<(&str, u32, u32)> {
    let mut it = t.split('/');
    let kind = it.next()?;
    let app = it.next()?.parse().ok()?;
    let ns = it.next()?.parse().ok()?;
    it.next().is_none().then_some((kind, app, ns))
}

fn encode_reply(r: &Reply, enc: Encoding) -> Vec<u8> {
    match enc {
        Encoding::Json => r.to_json(),
        Encoding::Cbor => r.to_cbor(),
    }
}

fn encode_value<T: Serialize + ?Sized>(v: &T, enc: Encoding) -> Vec<u8> {
    match enc {
        // Report types are plain data: serialisation cannot fail short of a bug, and an empty
        // payload is then visible to subscribers rather than a panic here.
        Encoding::Json => serde_json::to_vec(v).unwrap_or_default(),
        Encoding::Cbor => {
            let mut out = Vec::new();
            let _ = ciborium::ser::into_writer(v, &mut out);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qos_monitor::RawReport;

    fn core() -> ManagerCore {
        ManagerCore::new(
            TableConfig::default(),
            QosConfig::default(),
            Encoding::Json,
            0,
        )
    }

    const INSTALL: &str = r#"{"int_request":{"ns_id":7,"app_id":1,"src_ip":"2001:db8::1",
        "dst_ip":"2001:db8::2","src_port":0,"dst_port":5000,"protocol":"UDP",
        "trace_type":"0x7000E000","mode":"count","mode_setting":100}}"#;

    #[test]
    fn detects_encoding_by_first_byte() {
        assert_eq!(detect_encoding(b" {"), Encoding::Json);
        assert_eq!(detect_encoding(b"garbage"), Encoding::Json);
        assert_eq!(detect_encoding(&[0xA1, 0x60]), Encoding::Cbor);
        assert_eq!(detect_encoding(&[0xD9, 0xD9, 0xF7]), Encoding::Cbor);
        assert_eq!(detect_encoding(b""), Encoding::Json);
    }

    #[test]
    fn topics_round_trip() {
        assert_eq!(topic("raw", 1, 7), "raw/1/7");
        assert_eq!(
            parse_topic("qos/4294967295/65535"),
            Some(("qos", u32::MAX, 65535))
        );
        assert_eq!(parse_topic("raw/1"), None);
        assert_eq!(parse_topic("raw/1/7/x"), None);
        assert_eq!(parse_topic("raw/x/7"), None);
    }

    #[test]
    fn install_changes_list_does_not() {
        let mut c = core();
        let h = c.handle_message(INSTALL.as_bytes());
        assert!(h.changed, "{}", String::from_utf8_lossy(&h.reply));
        let h = c.handle_message(br#"{"int_list":{}}"#);
        assert!(!h.changed);
        let h = c.handle_message(INSTALL.as_bytes());
        assert!(!h.changed);
        let k = c.counters();
        assert_eq!((k.requests, k.ok, k.installs, k.lists), (3, 2, 1, 1));
        assert_eq!(k.rejected.duplicate_namespace, 1);
    }

    #[test]
    fn report_for_unknown_namespace_is_dropped_and_counted() {
        let mut c = core();
        assert!(c.on_report(&RawReport::new(7, 0, 0, 1, 100)).is_none());
        assert!(c.on_report(&RawReport::new(70_000, 0, 0, 1, 100)).is_none());
        assert_eq!(c.counters().reports_unknown_namespace, 2);
        c.handle_message(INSTALL.as_bytes());
        let p = c.on_report(&RawReport::new(7, 0, 0, 1, 100)).unwrap();
        assert_eq!(p.topic, "raw/1/7");
        let v: RawReport = serde_json::from_slice(&p.payload).unwrap();
        assert_eq!(v.packet_len, 100);
    }

    #[test]
    fn qos_published_once_per_closed_window() {
        let mut c = core();
        c.handle_message(INSTALL.as_bytes());
        let s = 1_000_000_000u64;
        let mut out = Vec::new();
        c.tick(s / 2, &mut out);
        for i in 0..10u32 {
            let t = s / 2 + i as u64 * 1000;
            c.on_report(&RawReport::new(7, i, t - 500, t, 1000));
        }
        c.tick(s - 1, &mut out);
        assert!(out.is_empty());
        c.tick(s + 1, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].topic, "qos/1/7");
        let r: QosReport = serde_json::from_slice(&out[0].payload).unwrap();
        assert_eq!((r.window, r.reports), (Window::OneSecond, 10));
        c.tick(s + 2, &mut out);
        assert_eq!(out.len(), 1, "a window is published once");
        // The 10 s window closes at 10 s and holds the same ten reports.
        c.tick(10 * s, &mut out);
        let last: QosReport = serde_json::from_slice(&out.last().unwrap().payload).unwrap();
        assert_eq!((last.window, last.reports), (Window::TenSeconds, 10));
        assert_eq!(c.counters().qos_published, out.len() as u64);
    }

    fn inband_rule(ns: u16, count: u32) -> Rule {
        let text = INSTALL
            .replace("\"ns_id\":7", &format!("\"ns_id\":{ns}"))
            .replace("\"mode_setting\":100", &format!("\"mode_setting\":{count}"));
        match codec::decode_json(text.as_bytes()).unwrap() {
            Request::Install(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn inband_request_installs_refreshes_replaces_and_conflicts() {
        let mut c = ManagerCore::new(
            TableConfig {
                max_namespaces: 2,
                ..TableConfig::default()
            },
            QosConfig::default(),
            Encoding::Json,
            0,
        );
        // Install: absent namespace, new snapshot; reports for it are now published.
        assert!(c.on_inband_request(inband_rule(9, 100)));
        assert_eq!(c.table().get(9).unwrap().request, inband_rule(9, 100));
        assert_eq!(
            c.on_report(&RawReport::new(9, 0, 0, 1, 100)).unwrap().topic,
            "raw/1/9"
        );
        // Refresh: same rule, nothing to publish.
        let before = c.publish_snapshot();
        assert!(!c.on_inband_request(inband_rule(9, 100)));
        assert!(Arc::ptr_eq(&before, &c.publish_snapshot()));
        // Replace: the source's re-send carries a changed rule.
        assert!(c.on_inband_request(inband_rule(9, 5)));
        assert_eq!(c.table().get(9).unwrap().request, inband_rule(9, 5));
        // Conflict: the controller's namespace 7 is never replaced in-band.
        assert!(c.handle_message(INSTALL.as_bytes()).changed);
        assert!(!c.on_inband_request(inband_rule(7, 5)));
        assert_eq!(c.table().get(7).unwrap().request, inband_rule(7, 100));
        // Table full (2): counted, nothing installed.
        assert!(!c.on_inband_request(inband_rule(11, 100)));
        assert!(c.table().get(11).is_none());
        let k = c.counters().inband;
        assert_eq!(
            (
                k.installed,
                k.refreshed,
                k.replaced,
                k.conflict,
                k.table_full
            ),
            (1, 1, 1, 1, 1)
        );
        // The controller still sees a learned namespace, and can take it over.
        let h = c.handle_message(INSTALL.replace("\"ns_id\":7", "\"ns_id\":9").as_bytes());
        assert!(h.changed, "{}", String::from_utf8_lossy(&h.reply));
        assert!(!c.on_inband_request(inband_rule(9, 5)));
        assert_eq!(c.counters().inband.conflict, 2);
    }

    #[test]
    fn remove_forgets_qos_state() {
        let mut c = core();
        c.handle_message(INSTALL.as_bytes());
        c.on_report(&RawReport::new(7, 0, 0, 1, 100));
        assert_eq!(c.qos().namespace_count(), 1);
        let h = c.handle_message(br#"{"int_remove":{"ns_id":7}}"#);
        assert!(h.changed);
        assert_eq!(c.qos().namespace_count(), 0);
    }
}
