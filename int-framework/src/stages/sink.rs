//! INTSink (Miranda et al., section III-E): decodes every hop and the E2E data into an
//! [`IntReport`], hands it to the control core, and removes every INT header so the packet
//! leaves as the source received it.

use super::flow::{locate, ns_index, FlowCounters, FlowIndex, NsSlots};
use super::{
    carried_after, fix_ipv6, has_hbh, inband_event, l3_quick, resize_at, strip_first, Carried,
    Drops, IntConfig, IntEvent, StageClock,
};
use crate::namespace::TableSnapshot;
use crate::report::{E2eData, Encoding, HopData, IntReport};
use crossbeam_channel::Sender;
use peregrine_dataplane::buffer::PacketBuf;
use peregrine_dataplane::runtime::{Disposition, Reader, Reasons};
use peregrine_wire::int::{
    node_data_to_hop_in, parse_seed_header, InBandKind, SeedHopRepr, TsFormat,
};
use peregrine_wire::ioam::{self, E2eOption, E2eRepr, TraceOption};
use peregrine_wire::ipv6::{self, ip_protocol};
use peregrine_wire::ipv6ext::OptionsHeader;
use peregrine_wire::ipv6option::option_type as ipv6_opt;

/// What the sink did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkStats {
    /// Reports produced.
    pub reports: u64,
    /// In-band requests received.
    pub requests: u64,
    /// Piggy-back reports received.
    pub inband_reports: u64,
    /// Events not delivered: the control queue was full.
    pub events_dropped: u64,
    /// INT packets of an unknown namespace, forwarded untouched (III-A).
    pub unknown_namespace: u64,
}

/// INTSink (III-E): decodes every hop and the E2E data into an [`IntReport`], hands it to the
/// control core with the namespace's transmit / piggy-back flags, and removes every INT
/// header so the packet is byte-identical to what the source received.
pub struct IntSink {
    cfg: IntConfig,
    table: Reader<TableSnapshot>,
    events: Sender<IntEvent>,
    index: FlowIndex,
    counters: NsSlots<FlowCounters>,
    drops: Drops,
    stats: SinkStats,
    clock: StageClock,
    trust_meta: bool,
}

/// Most trace entries the sink decodes per packet (an option holds at most 63).
const MAX_ENTRIES: usize = 64;

impl IntSink {
    pub fn new(
        cfg: IntConfig,
        table: Reader<TableSnapshot>,
        events: Sender<IntEvent>,
        reasons: &mut Reasons,
    ) -> IntSink {
        IntSink {
            clock: StageClock::new(cfg.wall_clock),
            cfg,
            table,
            events,
            index: FlowIndex::new(),
            counters: NsSlots::new(),
            drops: Drops {
                malformed: reasons.register("int_sink_malformed"),
            },
            stats: SinkStats::default(),
            trust_meta: false,
        }
    }

    /// A classifier stage (or the UPF) runs before this one: read each packet's classified
    /// [`PacketMeta`](peregrine_dataplane::meta::PacketMeta) instead of classifying again.
    pub fn after_classifier(mut self) -> IntSink {
        self.trust_meta = true;
        self
    }

    pub fn stats(&self) -> SinkStats {
        self.stats
    }

    fn send(&mut self, ev: Option<IntEvent>) {
        if let Some(ev) = ev {
            if self.events.try_send(ev).is_err() {
                self.stats.events_dropped += 1;
            }
        }
    }

    fn process_one<B: PacketBuf>(&mut self, b: &mut B, now: u64) -> Disposition {
        let Some(off) = l3_quick(self.cfg.l3, self.trust_meta, b) else {
            return Disposition::CONTINUE;
        };
        if !has_hbh(b.data(), off) {
            // Not INT (every encoding starts with a Hop-by-Hop header): count the packet if
            // its flow is monitored (the RX counters of the loss figures), else done.
            if self.index.is_empty() {
                return Disposition::CONTINUE;
            }
            // A flow seen recently: its answer from the index's cache, read in place.
            if self.trust_meta {
                if let Some(hit) = self.index.cached(b.data(), b.pkt_meta()) {
                    if let Some(i) = hit {
                        let d = b.data();
                        let len = 40 + usize::from(u16::from_be_bytes([d[off + 4], d[off + 5]]));
                        self.counters.vals[i].add(len);
                    }
                    return Disposition::CONTINUE;
                }
            }
            if let Some(flow) = locate(self.cfg.l3, self.trust_meta, b) {
                if let Some(i) = self.index.lookup(&flow) {
                    self.counters.vals[i].add(flow.len);
                }
            }
            return Disposition::CONTINUE;
        }
        let Some(flow) = locate(self.cfg.l3, self.trust_meta, b) else {
            return Disposition::CONTINUE;
        };
        let off = flow.off;
        let at = off + ipv6::HEADER_LEN;
        let Ok(carried) = carried_after(&self.cfg, b, &flow) else {
            return Disposition::drop_as(self.drops.malformed);
        };
        // Only INT packets need the (1 KB) report; plain packets skip zeroing it.
        let mut report: Option<IntReport> = None;
        let strip_len = match carried {
            Carried::InBand(kind, _) => {
                if kind == InBandKind::Request {
                    self.stats.requests += 1;
                } else {
                    self.stats.inband_reports += 1;
                }
                let ev = inband_event(&b.data()[at..], flow.src, kind);
                self.send(ev);
                if strip_first(b, off).is_err() {
                    return Disposition::drop_as(self.drops.malformed);
                }
                return Disposition::CONTINUE;
            }
            Carried::None => None,
            Carried::Seed => {
                match decode_seed(&b.data()[at..], report.insert(IntReport::default())) {
                    Ok(v) => Some(v),
                    Err(()) => return Disposition::drop_as(self.drops.malformed),
                }
            }
            Carried::Ioam => {
                match decode_ioam(
                    &b.data()[at..],
                    report.insert(IntReport::default()),
                    self.cfg.ioam_timestamp,
                ) {
                    Ok(v) => Some(v),
                    Err(()) => return Disposition::drop_as(self.drops.malformed),
                }
            }
        };
        let table = self.table.cached();
        let slot = match &report {
            Some(r) => ns_index(table, r.ns_id),
            None => self.index.lookup(&flow),
        };
        let Some(slot) = slot else {
            if strip_len.is_some() {
                self.stats.unknown_namespace += 1;
            }
            return Disposition::CONTINUE;
        };
        let rule = &table.namespaces[slot].rule;
        let flags = rule.flags;
        let app_id = rule.app_id;
        let rule_tt = rule.trace_type;
        let (Some((len, next_header)), Some(mut report)) = (strip_len, report) else {
            self.counters.vals[slot].add(flow.len);
            return Disposition::CONTINUE;
        };
        if resize_at(b, at, len, 0).is_err() {
            return Disposition::drop_as(self.drops.malformed);
        }
        fix_ipv6(b.data_mut(), off, next_header, -(len as isize));
        let plen = flow.len.saturating_sub(len);
        let c = &mut self.counters.vals[slot];
        c.add(plen);
        report.app_id = app_id;
        if report.encoding == Encoding::Ioam {
            report.trace_type = rule_tt.0;
        }
        report.src = flow.src;
        report.dst = flow.dst;
        (report.proto, report.sport, report.dport) = (flow.proto, flow.sport, flow.dport);
        report.sink_node_id = self.cfg.node_id as u32;
        report.arrival_ns = now;
        report.packet_len = plen as u32;
        report.sink_rx_packets = c.packets;
        report.sink_rx_bytes = c.bytes;
        self.stats.reports += 1;
        self.send(Some(IntEvent::Report {
            report,
            transmit: flags.transmit_report,
            piggyback: flags.piggyback_report,
        }));
        Disposition::CONTINUE
    }
}

/// Decode a seed header into `r`; returns (header length, next header).
fn decode_seed(hdr: &[u8], r: &mut IntReport) -> Result<(usize, u8), ()> {
    let h = parse_seed_header(hdr).map_err(|_| ())?;
    r.encoding = Encoding::Seed;
    r.ns_id = h.trace.namespace();
    r.trace_type = h.trace.trace_type().0;
    let mut hops = [SeedHopRepr::default(); MAX_ENTRIES];
    let mut n = 0;
    for hop in h.trace.hops() {
        let hop = hop.map_err(|_| ())?;
        if n == MAX_ENTRIES {
            return Err(());
        }
        hops[n] = hop;
        n += 1;
    }
    // On the wire the newest hop is first; the report lists them in path order.
    for hop in hops[..n].iter().rev() {
        r.push_hop(hop.to_hop());
    }
    if let Some(e) = h.e2e {
        r.e2e = E2eData {
            int_counter: e.int_counter,
            timestamp_ns: e.timestamp_ns,
            tx_packets: e.tx_packets,
            tx_bytes: e.tx_bytes,
        };
    }
    Ok((h.len, h.next_header))
}

/// Decode an IOAM Hop-by-Hop trace (and the Destination Options E2E header after it, if
/// it holds an IOAM E2E option of the same namespace) into `r`; returns the length of what
/// to strip and the next header after it. The oldest entry is the source's own.
fn decode_ioam(hdr: &[u8], r: &mut IntReport, fmt: TsFormat) -> Result<(usize, u8), ()> {
    let h = OptionsHeader::new_checked(hdr).map_err(|_| ())?;
    let (mut len, mut nh) = (h.header_len(), h.next_header());
    let f = ioam::find_in_header(hdr, ipv6_opt::IOAM_HBH)
        .map_err(|_| ())?
        .ok_or(())?;
    let t = TraceOption::new_checked(&hdr[f.body]).map_err(|_| ())?;
    r.encoding = Encoding::Ioam;
    r.ns_id = t.namespace_id();
    r.hops_truncated = t.overflow();
    let mut hops = [HopData::default(); MAX_ENTRIES];
    let mut wide = [None; MAX_ENTRIES];
    let mut n = 0;
    for e in t.entries() {
        let e = e.map_err(|_| ())?;
        if n == MAX_ENTRIES {
            return Err(());
        }
        hops[n] = node_data_to_hop_in(&e, fmt);
        wide[n] = e.available().namespace_data_wide;
        n += 1;
    }
    if n > 0 {
        // The source's entry: E2E TX packets | TX bytes in the wide data.
        n -= 1;
        if let Some(w) = wide[n] {
            r.e2e.tx_packets = Some((w >> 32) as u32);
            r.e2e.tx_bytes = Some(w as u32);
        }
        r.e2e.timestamp_ns = hops[n].timestamp_ns;
    }
    for hop in hops[..n].iter().rev() {
        r.push_hop(*hop);
    }
    if nh == ip_protocol::IPV6_OPTS {
        let rest = &hdr[len..];
        if let Ok(Some(f)) = ioam::find_in_header(rest, ipv6_opt::IOAM_DEST) {
            if f.ioam_type == ioam::option_type::E2E {
                let o = E2eOption::new_checked(&rest[f.body]).map_err(|_| ())?;
                let e = E2eRepr::parse(&o).map_err(|_| ())?;
                if e.namespace_id == r.ns_id {
                    r.e2e.int_counter = e.seq_num_32;
                    if let (Some(s), Some(fr)) = (e.timestamp_secs, e.timestamp_frac) {
                        r.e2e.timestamp_ns = fmt.join(s, fr);
                    }
                    let d = OptionsHeader::new_checked(rest).map_err(|_| ())?;
                    len += d.header_len();
                    nh = d.next_header();
                }
            }
        }
    }
    Ok((len, nh))
}

table_stage!(IntSink, "int_sink");
