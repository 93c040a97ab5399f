//! The INT elements as the daemon runs them: one stage type for sink, transit and source
//! (so a place holds any mix), each copying its counters into a slot the control thread
//! sums for the metrics page and the summary.

use peregrine_dataplane::runtime::{Batch, Context, Stage};
use peregrine_dataplane::PacketBuf;
use peregrine_int::stages::{IntSink, IntSource, IntTransit};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One of the three INT elements.
// Built once per worker and place; its size does not matter, an indirection per batch would.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Element {
    Sink(IntSink),
    Transit(IntTransit),
    Source(IntSource),
}

/// The counters each element keeps (`SourceStats`, `TransitStats`, `SinkStats`), by name.
const SOURCE: [&str; N] = [
    "matched",
    "int_added",
    "requests_sent",
    "reports_sent",
    "skipped_mtu",
    "skipped_has_hbh",
    "skipped_build",
    "gate_switched",
    "gate_skipped",
    "gate_bytes_saved",
    "gate_unclassified",
    "gate_windows_exported",
    "gate_export_dropped",
];
/// Counters per element (the source has the most).
const N: usize = 13;
const TRANSIT: [&str; 7] = [
    "hops_added",
    "requests_seen",
    "reports_extracted",
    "skipped_disabled",
    "skipped_mtu",
    "skipped_full",
    "events_dropped",
];
const SINK: [&str; 5] = [
    "reports",
    "requests",
    "inband_reports",
    "events_dropped",
    "unknown_namespace",
];
const ROLES: [(&str, &[&str]); 3] = [("source", &SOURCE), ("transit", &TRANSIT), ("sink", &SINK)];

impl Element {
    /// (index into `ROLES`, the element's counters in that role's order).
    fn counters(&self) -> (usize, [u64; N]) {
        match self {
            Element::Source(s) => {
                let x = s.stats();
                let v = [
                    x.matched,
                    x.int_added,
                    x.requests_sent,
                    x.reports_sent,
                    x.skipped_mtu,
                    x.skipped_has_hbh,
                    x.skipped_build,
                    x.gate_switched,
                    x.gate_skipped,
                    x.gate_bytes_saved,
                    x.gate_unclassified,
                    x.gate_windows_exported,
                    x.gate_export_dropped,
                ];
                (0, v)
            }
            Element::Transit(s) => {
                let x = s.stats();
                let v = [
                    x.hops_added,
                    x.requests_seen,
                    x.reports_extracted,
                    x.skipped_disabled,
                    x.skipped_mtu,
                    x.skipped_full,
                    x.events_dropped,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                ];
                (1, v)
            }
            Element::Sink(s) => {
                let x = s.stats();
                let v = [
                    x.reports,
                    x.requests,
                    x.inband_reports,
                    x.events_dropped,
                    x.unknown_namespace,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                ];
                (2, v)
            }
        }
    }
}

/// One element's published counters (written by its worker only).
#[derive(Debug, Default)]
struct Slot {
    role: usize,
    vals: [AtomicU64; N],
}

/// Every element's slot, registered when pipelines are built (on the control thread).
#[derive(Debug, Default)]
pub(crate) struct StageCounters {
    slots: Mutex<Vec<Arc<Slot>>>,
}

impl StageCounters {
    /// Per role, per counter: the sum over every element of that role.
    fn totals(&self) -> [[u64; N]; 3] {
        let mut t = [[0u64; N]; 3];
        let slots = match self.slots.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        for s in slots.iter() {
            for (o, v) in t[s.role].iter_mut().zip(&s.vals) {
                *o += v.load(Ordering::Relaxed);
            }
        }
        t
    }

    /// `peregrine_int_{source,transit,sink}_events_total{event}` for the roles in use.
    pub fn write_metrics(&self, e: &mut crate::metrics::Exposition) {
        const FAMILIES: [(&str, &str); 3] = [
            (
                "peregrine_int_source_events_total",
                "INT source: packets matched, instrumented, requests and piggy-back reports sent, skips by cause.",
            ),
            (
                "peregrine_int_transit_events_total",
                "INT transit: hop entries added, requests seen, reports extracted, skips by cause, events dropped.",
            ),
            (
                "peregrine_int_sink_events_total",
                "INT sink: reports produced, requests and in-band reports received, events dropped, unknown namespaces.",
            ),
        ];
        let t = self.totals();
        let used = self.roles_in_use();
        for (r, ((name, help), (_, events))) in FAMILIES.iter().zip(ROLES).enumerate() {
            if !used[r] {
                continue;
            }
            e.family(name, crate::metrics::Kind::Counter, help);
            for (i, ev) in events.iter().enumerate() {
                e.sample(name, &[("event", ev)], t[r][i] as f64);
            }
        }
    }

    /// `{"source": {"matched": n, ...}, ...}` for the roles in use.
    pub fn totals_json(&self) -> serde_json::Value {
        let t = self.totals();
        let used = self.roles_in_use();
        let mut m = serde_json::Map::new();
        for (r, (role, events)) in ROLES.iter().enumerate() {
            if used[r] {
                let o: serde_json::Map<_, _> = events
                    .iter()
                    .enumerate()
                    .map(|(i, ev)| (ev.to_string(), t[r][i].into()))
                    .collect();
                m.insert(role.to_string(), o.into());
            }
        }
        m.into()
    }

    fn roles_in_use(&self) -> [bool; 3] {
        let mut used = [false; 3];
        if let Ok(s) = self.slots.lock() {
            for x in s.iter() {
                used[x.role] = true;
            }
        }
        used
    }
}

/// Batches between two copies of an element's counters into its slot.
const PUBLISH_EVERY: u32 = 64;

/// An element as a stage: runs it, and copies its counters into its slot every
/// [`PUBLISH_EVERY`] batches, when idle and when the worker drops it (so the final figures
/// are exact).
pub(crate) struct IntStage {
    elem: Element,
    slot: Arc<Slot>,
    batches: u32,
}

impl IntStage {
    /// Wrap `elem`, registering its slot in `counters`.
    pub(crate) fn new(elem: Element, counters: &StageCounters) -> IntStage {
        let slot = Arc::new(Slot {
            role: elem.counters().0,
            vals: Default::default(),
        });
        match counters.slots.lock() {
            Ok(mut s) => s.push(slot.clone()),
            Err(p) => p.into_inner().push(slot.clone()),
        }
        IntStage {
            elem,
            slot,
            batches: 0,
        }
    }

    fn publish(&self) {
        let (_, v) = self.elem.counters();
        for (a, x) in self.slot.vals.iter().zip(v) {
            a.store(x, Ordering::Relaxed);
        }
    }
}

impl Drop for IntStage {
    fn drop(&mut self) {
        // The gate's last window goes out with the final figures.
        if let Element::Source(s) = &mut self.elem {
            s.flush_gate();
        }
        self.publish();
    }
}

impl<B: PacketBuf> Stage<B> for IntStage {
    fn name(&self) -> &'static str {
        match &self.elem {
            Element::Sink(s) => Stage::<B>::name(s),
            Element::Transit(s) => Stage::<B>::name(s),
            Element::Source(s) => Stage::<B>::name(s),
        }
    }

    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        match &mut self.elem {
            Element::Sink(s) => s.process(batch, cx),
            Element::Transit(s) => s.process(batch, cx),
            Element::Source(s) => s.process(batch, cx),
        }
        self.batches = self.batches.wrapping_add(1);
        if self.batches.is_multiple_of(PUBLISH_EVERY) {
            self.publish();
        }
    }

    fn idle(&mut self) {
        match &mut self.elem {
            Element::Sink(s) => Stage::<B>::idle(s),
            Element::Transit(s) => Stage::<B>::idle(s),
            Element::Source(s) => Stage::<B>::idle(s),
        }
        self.publish();
    }
}
