//! In-band installation (Miranda et al., section III-B "INT Request", III-D): a transit or
//! sink that sees the 0x32 option creates or refreshes that namespace's control structure.
//! The control loop decodes and validates the CBOR exactly as a rule API install
//! (`peregrine_int_manager::codec`), counts refusals by reason, and hands valid rules to the
//! manager thread over a bounded queue; the manager applies them
//! (`ManagerCore::on_inband_request`) and publishes the snapshot. docs/int.md "In-band
//! installation".

use super::{IntDaemonStats, IntRuntime};
use crate::metrics::{Exposition, Kind};
use peregrine_int::request::{RequestError, Rule};
use peregrine_int_manager::codec::RuleCbor;
use serde::{Deserialize, Serialize};

/// Why an in-band INT request (0x32) was refused: the reasons of a rule API install
/// (`peregrine_int_manager::RejectCounters`) plus `not_an_install`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InBandRejects {
    /// Longer than the 0x32 option holds.
    pub oversize: u64,
    /// Nested deeper than the decoder's limit.
    pub too_deep: u64,
    /// Not CBOR of the schema's shape.
    pub malformed: u64,
    /// A well-formed request other than `int_request`.
    pub not_an_install: u64,
    /// An `int_request` with a field missing, of the wrong type or out of range.
    pub invalid: u64,
}

impl InBandRejects {
    /// `(reason, count)` pairs, for exporters.
    pub fn reasons(&self) -> [(&'static str, u64); 5] {
        [
            ("oversize", self.oversize),
            ("too_deep", self.too_deep),
            ("malformed", self.malformed),
            ("not_an_install", self.not_an_install),
            ("invalid", self.invalid),
        ]
    }

    /// Sum of all reasons.
    pub fn total(&self) -> u64 {
        self.reasons().iter().map(|r| r.1).sum()
    }

    fn count(&mut self, e: &RequestError) {
        match e {
            RequestError::PayloadTooLarge { .. } | RequestError::OptionTooLarge { .. } => {
                self.oversize += 1
            }
            RequestError::NestingTooDeep { .. } => self.too_deep += 1,
            RequestError::Malformed(_) => self.malformed += 1,
            RequestError::NotAnInstall => self.not_an_install += 1,
            _ => self.invalid += 1,
        }
    }
}

/// The in-band request families: refusals by reason, manager outcomes, queue drops.
pub(super) fn write_metrics(s: &IntDaemonStats, e: &mut Exposition) {
    let c = Kind::Counter;
    e.one(
        "peregrine_int_requests_dropped_total",
        c,
        "Valid in-band (0x32) requests dropped: the manager's queue was full.",
        s.requests_dropped as f64,
    );
    let name = "peregrine_int_requests_rejected_total";
    e.family(
        name,
        c,
        "In-band (0x32) requests refused by reason; they change nothing.",
    );
    for (reason, v) in s.requests_rejected.reasons() {
        e.sample(name, &[("reason", reason)], v as f64);
    }
    let name = "peregrine_int_requests_applied_total";
    e.family(
        name,
        c,
        "Valid in-band (0x32) requests applied by the INT manager, by outcome.",
    );
    for (outcome, v) in s.manager_inband.outcomes() {
        e.sample(name, &[("outcome", outcome)], v as f64);
    }
}

impl IntRuntime {
    /// An in-band INT request (seed III-B, III-D): decoded and validated exactly as a rule API
    /// install, then handed to the manager thread, which creates or refreshes the namespace.
    /// Never blocks: a full queue is a counted drop.
    pub(super) fn on_request(&mut self, from: std::net::Ipv6Addr, cbor: &[u8]) {
        match Rule::from_cbor(cbor) {
            Ok(rule) => {
                if self.inband_tx.try_send(rule).is_err() {
                    self.stats.requests_dropped += 1;
                }
            }
            Err(e) => {
                self.stats.requests_rejected.count(&e);
                tracing::debug!(%from, error = %e, "in-band INT request refused");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{IntRuntime, IntSection};
    use peregrine_int::request::{Request, Rule};
    use peregrine_int::stages::{InBandBytes, IntEvent};
    use peregrine_int_manager::codec::decode_json;
    use std::time::{Duration, Instant};

    const RULE: &str = r#"{"int_request":{"ns_id":7,"app_id":1,"src_ip":"2001:db8::1",
        "dst_ip":"2001:db8::2","src_port":0,"dst_port":5000,"protocol":"UDP",
        "trace_type":"0x7000E000","mode":"count","mode_setting":100}}"#;

    fn runtime() -> IntRuntime {
        let s: IntSection = toml::from_str(
            "node_id = 2\nroles = [\"transit\"]\nrules = \"tcp://127.0.0.1:*\"\nreports = \"tcp://127.0.0.1:*\"\n",
        )
        .unwrap();
        IntRuntime::start(&s).unwrap()
    }

    /// A 0x32 payload as the transit hands it over.
    fn event(cbor: &[u8]) -> IntEvent {
        let mut b: InBandBytes = [0; std::mem::size_of::<InBandBytes>()];
        let n = cbor.len().min(b.len());
        b[..n].copy_from_slice(&cbor[..n]);
        IntEvent::Request {
            from: "2001:db8::1".parse().unwrap(),
            len: n as u8,
            cbor: b,
        }
    }

    /// JSON text -> the same message in CBOR, unvalidated (to build invalid requests).
    fn cbor_of(json: &str) -> Vec<u8> {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        let mut out = Vec::new();
        ciborium::ser::into_writer(&v, &mut out).unwrap();
        out
    }

    fn rule(json: &str) -> Rule {
        match decode_json(json.as_bytes()).unwrap() {
            Request::Install(r) => r,
            other => panic!("{other:?}"),
        }
    }

    fn settle(ir: &mut IntRuntime, done: impl Fn(&IntRuntime) -> bool) {
        let t0 = Instant::now();
        while !done(ir) {
            assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", ir.stats());
            std::thread::sleep(Duration::from_millis(5));
            ir.pump();
        }
    }

    #[test]
    fn inband_request_installs_at_the_transit_and_bad_ones_change_nothing() {
        let mut ir = runtime();
        let good = rule(RULE).to_option_payload().unwrap();
        let bad = [
            // Not CBOR of the schema.
            vec![0xff, 0x00, 0x13],
            // Truncated.
            good[..good.len() - 3].to_vec(),
            // A valid request, but not an install.
            Request::List.to_cbor(),
            // An install with an invalid field (count 0).
            cbor_of(&RULE.replace("\"mode_setting\":100", "\"mode_setting\":0")),
            // ns_id out of range.
            cbor_of(&RULE.replace("\"ns_id\":7", "\"ns_id\":0")),
        ];
        for b in &bad {
            ir.events_tx.send(event(b)).unwrap();
        }
        ir.pump();
        let r = ir.stats().requests_rejected;
        assert_eq!(
            (r.malformed, r.not_an_install, r.invalid, r.total()),
            (2, 1, 2, 5),
            "{r:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
        assert!(ir.tables.current().namespaces.is_empty());
        assert_eq!(ir.stats().manager_inband.installed, 0);

        // The valid request installs namespace 7 as learned in-band, in a published snapshot.
        ir.events_tx.send(event(&good)).unwrap();
        ir.pump();
        settle(&mut ir, |ir| ir.tables.current().get(7).is_some());
        let snap = ir.tables.current();
        let n = snap.get(7).unwrap();
        assert!(n.in_band);
        assert_eq!(n.rule, rule(RULE));
        // The re-send refreshes; a changed rule replaces.
        ir.events_tx.send(event(&good)).unwrap();
        let changed = rule(&RULE.replace("\"mode_setting\":100", "\"mode_setting\":5"));
        ir.events_tx
            .send(event(&changed.to_option_payload().unwrap()))
            .unwrap();
        ir.pump();
        settle(&mut ir, |ir| ir.stats().manager_inband.replaced == 1);
        let s = ir.stats();
        assert_eq!(
            (
                s.requests,
                s.manager_inband.installed,
                s.manager_inband.refreshed
            ),
            (8, 1, 1)
        );
        settle(&mut ir, |ir| {
            ir.tables.current().get(7).map(|n| &n.rule) == Some(&changed)
        });
        // Exported by reason and outcome.
        let mut e = crate::metrics::Exposition::new();
        super::write_metrics(&ir.stats(), &mut e);
        let page = e.finish();
        for line in [
            "peregrine_int_requests_rejected_total{reason=\"malformed\"} 2",
            "peregrine_int_requests_rejected_total{reason=\"invalid\"} 2",
            "peregrine_int_requests_rejected_total{reason=\"not_an_install\"} 1",
            "peregrine_int_requests_applied_total{outcome=\"installed\"} 1",
            "peregrine_int_requests_applied_total{outcome=\"replaced\"} 1",
            "peregrine_int_requests_dropped_total 0",
        ] {
            assert!(page.contains(line), "{line} not in\n{page}");
        }
    }
}
