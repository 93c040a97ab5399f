//! INTInter (Miranda et al., section III-D): adds this node's hop data to the INT packets of
//! enabled namespaces, counts monitored flows, passes in-band requests on and extracts
//! piggy-back reports.

use super::flow::{locate, Flow, FlowCounters, FlowIndex, NsSlots};
use super::{
    carried_after, fix_ipv6, has_hbh, inband_event, int_headers_len, l3_quick, resize_at,
    strip_first, Carried, Drops, IntConfig, IntEvent, StageClock,
};
use crate::namespace::TableSnapshot;
use crate::request::TraceType;
use crossbeam_channel::{Sender, TrySendError};
use peregrine_dataplane::buffer::PacketBuf;
use peregrine_dataplane::runtime::{Disposition, Reader, Reasons};
use peregrine_wire::int::{
    emit_seed_header, hop_to_node_data_in, parse_seed_header, InBandKind, SeedHopRepr,
};
use peregrine_wire::ioam::{self, NodeData, TraceOption};
use peregrine_wire::ipv6::{self, ip_protocol};
use peregrine_wire::ipv6option::option_type as ipv6_opt;

/// What the transit did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransitStats {
    /// Hop entries added (seed) or filled (IOAM).
    pub hops_added: u64,
    /// In-band requests passed to the control core.
    pub requests_seen: u64,
    /// Piggy-back reports extracted.
    pub reports_extracted: u64,
    /// Not added: namespace unknown, or hops disabled for this node.
    pub skipped_disabled: u64,
    /// Not added: the packet would exceed the MTU.
    pub skipped_mtu: u64,
    /// Not added: no room left in the option (IOAM: Overflow flag set).
    pub skipped_full: u64,
    /// Events not delivered: the control queue was full.
    pub events_dropped: u64,
}

/// INTInter (III-D): adds this node's HbH data to INT packets of enabled namespaces (seed:
/// a new entry stacked after the main header, listing in its entry trace type the fields it
/// supports; IOAM: fills the next pre-allocated entry, unsupported fields all-ones).
pub struct IntTransit {
    cfg: IntConfig,
    table: Reader<TableSnapshot>,
    events: Option<Sender<IntEvent>>,
    index: FlowIndex,
    counters: NsSlots<FlowCounters>,
    drops: Drops,
    stats: TransitStats,
    clock: StageClock,
    trust_meta: bool,
}

impl IntTransit {
    pub fn new(cfg: IntConfig, table: Reader<TableSnapshot>, reasons: &mut Reasons) -> IntTransit {
        IntTransit {
            clock: StageClock::new(cfg.wall_clock),
            cfg,
            table,
            events: None,
            index: FlowIndex::new(),
            counters: NsSlots::new(),
            drops: Drops {
                malformed: reasons.register("int_transit_malformed"),
            },
            stats: TransitStats::default(),
            trust_meta: false,
        }
    }

    /// A classifier stage runs before this one: read each packet's classified
    /// [`PacketMeta`](peregrine_dataplane::meta::PacketMeta) instead of classifying again.
    pub fn after_classifier(mut self) -> IntTransit {
        self.trust_meta = true;
        self
    }

    /// Send in-band requests and extracted reports to `tx`.
    pub fn with_events(mut self, tx: Sender<IntEvent>) -> IntTransit {
        self.events = Some(tx);
        self
    }

    pub fn stats(&self) -> TransitStats {
        self.stats
    }

    fn process_one<B: PacketBuf>(&mut self, b: &mut B, now: u64) -> Disposition {
        if self.index.is_empty() {
            // Nothing to count and no INT header: the common case costs two loads.
            let Some(off) = l3_quick(self.cfg.l3, self.trust_meta, b) else {
                return Disposition::CONTINUE;
            };
            if !has_hbh(b.data(), off) {
                return Disposition::CONTINUE;
            }
        }
        let Some(flow) = locate(self.cfg.l3, self.trust_meta, b) else {
            return Disposition::CONTINUE;
        };
        let off = flow.off;
        let at = off + ipv6::HEADER_LEN;
        let Ok(carried) = carried_after(&self.cfg, b, &flow) else {
            return Disposition::drop_as(self.drops.malformed);
        };
        let table = self.table.cached();
        // Count every packet of a monitored flow, INT or not (Listing 2 counters), without
        // the INT headers, so that every node counts the same bytes for the same packet.
        let int_len = match carried {
            Carried::None => 0,
            _ => int_headers_len(&b.data()[at..]),
        };
        let counted = self.index.lookup(&flow).map(|i| {
            let c = &mut self.counters.vals[i];
            c.add(flow.len.saturating_sub(int_len));
            (table.namespaces[i].ns_id(), *c)
        });
        match carried {
            Carried::None => Disposition::CONTINUE,
            Carried::InBand(InBandKind::Request, _) => {
                self.stats.requests_seen += 1;
                let ev = inband_event(&b.data()[at..], flow.src, InBandKind::Request);
                self.send(ev);
                Disposition::CONTINUE
            }
            Carried::InBand(InBandKind::Report, ns) => {
                let extract = table.get(ns).is_some_and(|n| n.rule.flags.extract_report);
                if extract {
                    let ev = inband_event(&b.data()[at..], flow.src, InBandKind::Report);
                    if strip_first(b, off).is_err() {
                        return Disposition::drop_as(self.drops.malformed);
                    }
                    self.stats.reports_extracted += 1;
                    self.send(ev);
                }
                Disposition::CONTINUE
            }
            Carried::Seed => self.seed(b, off, &flow, counted, now),
            Carried::Ioam => self.ioam(b, off, &flow, counted, now),
        }
    }

    fn send(&mut self, ev: Option<IntEvent>) {
        if let (Some(tx), Some(ev)) = (&self.events, ev) {
            if let Err(TrySendError::Full(_)) = tx.try_send(ev) {
                self.stats.events_dropped += 1;
            }
        }
    }

    fn hop(
        &self,
        requested: u16,
        counted: Option<(u16, FlowCounters)>,
        ns: u16,
        now: u64,
    ) -> SeedHopRepr {
        let have = requested & self.cfg.supported_hbh;
        let c = counted.filter(|c| c.0 == ns).map(|c| c.1);
        // The counters are per namespace at this node: RX and TX are counted at the same
        // point, so they are equal unless a later stage drops the packet.
        SeedHopRepr {
            node_id: self.cfg.node_id,
            packets: c
                .filter(|_| have & TraceType::HBH_TXRX_COUNTER as u16 != 0)
                .map(|c| (c.packets as u16, c.packets as u16)),
            timestamp_ns: (have & TraceType::HBH_TIMESTAMP as u16 != 0).then_some(now),
            bytes: c
                .filter(|_| have & TraceType::HBH_TXRX_BYTES as u16 != 0)
                .map(|c| (c.bytes, c.bytes)),
        }
    }

    fn enabled(&mut self, ns: u16) -> bool {
        let on = self
            .table
            .cached()
            .get(ns)
            .is_some_and(|n| n.hop_enabled_for(self.cfg.node_id));
        if !on {
            self.stats.skipped_disabled += 1;
        }
        on
    }

    fn seed<B: PacketBuf>(
        &mut self,
        b: &mut B,
        off: usize,
        flow: &Flow,
        counted: Option<(u16, FlowCounters)>,
        now: u64,
    ) -> Disposition {
        let at = off + ipv6::HEADER_LEN;
        let mut hdr = [0u8; 1024];
        let (ns, old_len, n) = {
            let h = match parse_seed_header(&b.data()[at..]) {
                Ok(h) => h,
                Err(_) => return Disposition::drop_as(self.drops.malformed),
            };
            if h.trace.hops().any(|r| r.is_err()) {
                return Disposition::drop_as(self.drops.malformed);
            }
            let ns = h.trace.namespace();
            let tt = h.trace.trace_type();
            if !self.enabled(ns) || tt.hbh() == 0 {
                return Disposition::CONTINUE;
            }
            let hop = self.hop(tt.hbh(), counted, ns, now);
            match emit_seed_header(
                h.next_header,
                ns,
                tt,
                Some(&hop),
                h.trace.hop_area(),
                h.e2e.as_ref(),
                &mut hdr,
            ) {
                Ok(n) => (ns, h.len, n),
                Err(_) => {
                    self.stats.skipped_full += 1;
                    return Disposition::CONTINUE;
                }
            }
        };
        let _ = ns;
        if flow.len + n - old_len > self.cfg.mtu {
            self.stats.skipped_mtu += 1;
            return Disposition::CONTINUE;
        }
        if resize_at(b, at, old_len, n).is_err() {
            self.stats.skipped_mtu += 1;
            return Disposition::CONTINUE;
        }
        let d = b.data_mut();
        d[at..at + n].copy_from_slice(&hdr[..n]);
        fix_ipv6(d, off, ip_protocol::HOPOPT, n as isize - old_len as isize);
        self.stats.hops_added += 1;
        Disposition::CONTINUE
    }

    fn ioam<B: PacketBuf>(
        &mut self,
        b: &mut B,
        off: usize,
        flow: &Flow,
        counted: Option<(u16, FlowCounters)>,
        now: u64,
    ) -> Disposition {
        let at = off + ipv6::HEADER_LEN;
        let found = match ioam::find_in_header(&b.data()[at..], ipv6_opt::IOAM_HBH) {
            Ok(Some(f)) => f,
            _ => return Disposition::drop_as(self.drops.malformed),
        };
        let body = at + found.body.start..at + found.body.end;
        let Ok(t) = TraceOption::new_checked(&b.data()[body.clone()]) else {
            return Disposition::drop_as(self.drops.malformed);
        };
        let ns = t.namespace_id();
        let itt = t.trace_type();
        if !self.enabled(ns) {
            return Disposition::CONTINUE;
        }
        // What the trace asks for, in the seed's HbH bits.
        let mut requested = 0u16;
        if itt.has(ioam::TraceType::TIMESTAMP_SECS) {
            requested |= TraceType::HBH_TIMESTAMP as u16;
        }
        if itt.has(ioam::TraceType::NAMESPACE_DATA) {
            requested |= TraceType::HBH_TXRX_COUNTER as u16;
        }
        if itt.has(ioam::TraceType::NAMESPACE_DATA_WIDE) {
            requested |= TraceType::HBH_TXRX_BYTES as u16;
        }
        let hop = self.hop(requested, counted, ns, now);
        let hl = match self.cfg.hop_limit_after_forward {
            true => flow.hop_limit.saturating_sub(1),
            false => flow.hop_limit,
        };
        let node: NodeData<'static> = hop_to_node_data_in(&hop, hl, itt, self.cfg.ioam_timestamp);
        let mut t = TraceOption::new_unchecked(&mut b.data_mut()[body]);
        match t.fill_next(&node) {
            Ok(()) => {
                self.stats.hops_added += 1;
                Disposition::CONTINUE
            }
            Err(peregrine_wire::Error::BufferTooSmall) => {
                self.stats.skipped_full += 1;
                Disposition::CONTINUE
            }
            Err(_) => Disposition::drop_as(self.drops.malformed),
        }
    }
}

table_stage!(IntTransit, "int_transit");
