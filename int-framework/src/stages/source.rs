//! INTSource (Miranda et al., section III-C): matches the packet's flow against the rules, counts
//! it, sends a pending in-band request or piggy-back report first, samples per the rule's
//! mode and inserts the E2E data and room for the hops after the IPv6 header.

use super::flow::{locate, Flow, FlowCounters, FlowIndex, NsSlots, Prng};
use super::IntEvent;
use super::{fix_ipv6, resize_at, InBandBytes, IntConfig, Piggyback, StageClock};
use crate::gate::FlowGate;
use crate::namespace::TableSnapshot;
use crate::report::Encoding;
use crate::request::{Mode, TraceType};
use crossbeam_channel::{Receiver, Sender};
use peregrine_dataplane::buffer::PacketBuf;
use peregrine_dataplane::runtime::{Batch, Context, Disposition, Reader, Stage};
use peregrine_wire::int::{
    emit_inband_header, emit_seed_header, hop_to_node_data_in, inband_header_len, ioam_trace_type,
    InBandKind, InBandRepr, SeedE2eRepr, SeedHopRepr, MAX_INBAND_PAYLOAD,
};
use peregrine_wire::ioam::{self, E2eRepr, TraceOption, TraceRepr};
use peregrine_wire::ipv6::{self, ip_protocol};
use peregrine_wire::ipv6option::option_type as ipv6_opt;

/// What the source did, for tests and the stats page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceStats {
    /// Packets matching a rule.
    pub matched: u64,
    /// Packets that got INT telemetry headers.
    pub int_added: u64,
    /// In-band requests (0x32) sent.
    pub requests_sent: u64,
    /// Piggy-back reports (0x33) sent.
    pub reports_sent: u64,
    /// INT skipped: the packet would exceed the MTU.
    pub skipped_mtu: u64,
    /// INT skipped: the packet already has a Hop-by-Hop header.
    pub skipped_has_hbh: u64,
    /// INT skipped: the headers could not be built (trace type / hops do not fit an option).
    pub skipped_build: u64,
    /// Co-design gate: flows that turned large within a window (INT stops for them).
    pub gate_switched: u64,
    /// Co-design gate: packets that would have got INT but belong to a large flow.
    pub gate_skipped: u64,
    /// Co-design gate: INT header bytes those packets did not carry.
    pub gate_bytes_saved: u64,
    /// Co-design gate: packets without a classified flow hash (INT as without the gate).
    pub gate_unclassified: u64,
    /// Co-design gate: closed windows handed to the control core for export.
    pub gate_windows_exported: u64,
    /// Co-design gate: switch records (or window ends) lost on a full event channel.
    pub gate_export_dropped: u64,
}

#[derive(Debug, Clone, Copy)]
struct SourceNs {
    generation: u64,
    tx: FlowCounters,
    int_counter: u32,
    since_int: u32,
    last_int_ns: Option<u64>,
    request_sent: bool,
    last_request_ns: u64,
    request_len: u8,
    request: InBandBytes,
}

impl SourceNs {
    const NEW: SourceNs = SourceNs {
        generation: u64::MAX,
        tx: FlowCounters {
            packets: 0,
            bytes: 0,
        },
        int_counter: 0,
        since_int: 0,
        last_int_ns: None,
        request_sent: false,
        last_request_ns: 0,
        request_len: 0,
        request: [0; MAX_INBAND_PAYLOAD],
    };
}

/// INTSource (III-C): matches the IPv6 5-tuple against the rules, counts the flow, sends the
/// pending in-band request or piggy-back report first, samples per the rule's mode and adds
/// the E2E data and room for the hops, within the MTU.
pub struct IntSource {
    cfg: IntConfig,
    table: Reader<TableSnapshot>,
    index: FlowIndex,
    ns: NsSlots<SourceNs>,
    prng: Option<Prng>,
    piggyback_rx: Option<Receiver<Piggyback>>,
    pending: [Option<Piggyback>; 8],
    /// Occupied `pending` slots: zero in the common case, so packets skip scanning them.
    n_pending: usize,
    stats: SourceStats,
    clock: StageClock,
    trust_meta: bool,
    gate: Option<FlowGate>,
    /// Where the gate's closed windows go (the control core), if anywhere.
    events: Option<Sender<IntEvent>>,
    worker: u16,
    /// The worker clock's zero as an `Instant`, learnt from the first batch: `idle` has no
    /// context, and closes the gate's window by this.
    clock_zero: Option<std::time::Instant>,
}

impl IntSource {
    pub fn new(cfg: IntConfig, table: Reader<TableSnapshot>) -> IntSource {
        IntSource {
            clock: StageClock::new(cfg.wall_clock),
            cfg,
            table,
            index: FlowIndex::new(),
            ns: NsSlots::new(),
            prng: None,
            piggyback_rx: None,
            pending: [None; 8],
            n_pending: 0,
            stats: SourceStats::default(),
            trust_meta: false,
            gate: None,
            events: None,
            worker: 0,
            clock_zero: None,
        }
    }

    /// Hand the gate's closed windows (switch records) to `tx` for export.
    pub fn with_events(mut self, tx: Sender<IntEvent>) -> IntSource {
        self.events = Some(tx);
        self
    }

    /// Send the gate's closed window, if one waits: its records, then the window end.
    fn export_gate(&mut self) {
        let Some(g) = &mut self.gate else { return };
        let Some((window, recs)) = g.take_closed() else {
            return;
        };
        let Some(tx) = &self.events else { return };
        let mut lost = 0u32;
        for &record in recs {
            let ev = IntEvent::GateFlow {
                worker: self.worker,
                start_ns: window.start_ns,
                record,
            };
            if tx.try_send(ev).is_err() {
                lost += 1;
                self.stats.gate_export_dropped += 1;
            }
        }
        let ev = IntEvent::GateWindow {
            worker: self.worker,
            window,
            lost,
        };
        match tx.try_send(ev) {
            Ok(()) => self.stats.gate_windows_exported += 1,
            Err(_) => self.stats.gate_export_dropped += 1,
        }
    }

    /// Close the gate's window and export it (the stage is going away).
    pub fn flush_gate(&mut self) {
        if let Some(g) = &mut self.gate {
            g.flush();
        }
        self.export_gate();
    }

    /// Gate INT by flow size (sketch-INT co-design, `docs/codesign.md`): every packet updates
    /// the gate's sketch, and packets of large flows get no INT. Keyed by the classifier's
    /// flow hash, so it acts only with [`IntSource::after_classifier`].
    pub fn with_gate(mut self, gate: FlowGate) -> IntSource {
        self.gate = Some(gate);
        self
    }

    /// The gate, if any (tests and the accuracy experiment read its sketch).
    pub fn gate(&self) -> Option<&FlowGate> {
        self.gate.as_ref()
    }

    /// A classifier stage runs before this one: read each packet's classified
    /// [`PacketMeta`](peregrine_dataplane::meta::PacketMeta) instead of classifying again.
    pub fn after_classifier(mut self) -> IntSource {
        self.trust_meta = true;
        self
    }

    /// Take piggy-back reports to send from `rx` (filled by the control core).
    pub fn with_piggyback(mut self, rx: Receiver<Piggyback>) -> IntSource {
        self.piggyback_rx = Some(rx);
        self
    }

    pub fn stats(&self) -> SourceStats {
        let mut s = self.stats;
        if let Some(g) = &self.gate {
            s.gate_switched = g.stats().switched;
        }
        s
    }

    /// The source's counters for a namespace (TX packets/bytes, INT packets).
    pub fn counters(&self, ns: u16) -> Option<(FlowCounters, u32)> {
        self.ns.get(ns).map(|s| (s.tx, s.int_counter))
    }

    fn process_one<B: PacketBuf>(&mut self, b: &mut B, now: u64) {
        // The gate sees every packet (Zhu et al., step 3a), INT-matched or not.
        let mut large = false;
        if let Some(g) = &mut self.gate {
            let m = b.pkt_meta();
            if self.trust_meta && m.is_classified() {
                large = g.observe(m.flow_hash, b.data().len() as u32, now).large;
                if g.has_closed() {
                    self.export_gate();
                }
            } else {
                self.stats.gate_unclassified += 1;
            }
        }
        self.process_flow(b, now, large);
    }

    fn process_flow<B: PacketBuf>(&mut self, b: &mut B, now: u64, large: bool) {
        // The common case: a packet of a flow seen recently that is only counted (no
        // piggy-back report waiting, no request due, not sampled). Anything else, or a cache
        // miss, takes the full path below, with nothing changed here.
        if self.trust_meta && self.n_pending == 0 {
            let (d, m) = (b.data(), b.pkt_meta());
            match self.index.cached(d, m) {
                Some(None) => return,
                Some(Some(slot)) if self.count_only(slot, d, usize::from(m.l3_off), now) => return,
                _ => {}
            }
        }
        let Some(flow) = locate(self.cfg.l3, self.trust_meta, b) else {
            return;
        };
        let off = flow.off;
        let ins_at = off + ipv6::HEADER_LEN;
        // Piggy-back reports go towards their destination whatever the flow (III-B).
        // By reference: a `Piggyback` is ~270 bytes, copying eight per packet showed up.
        let mut i_pending = None;
        if self.n_pending > 0 {
            i_pending = self
                .pending
                .iter()
                .position(|p| p.as_ref().is_some_and(|p| p.dst == flow.dst));
        }
        if let Some(i) = i_pending {
            if flow.next_header == ip_protocol::HOPOPT {
                self.stats.skipped_has_hbh += 1;
            } else if let Some(p) = self.pending[i] {
                let repr = InBandRepr {
                    kind: InBandKind::Report,
                    payload: &p.bytes[..p.len as usize],
                };
                if self.insert_inband(b, off, &flow, &repr) {
                    self.pending[i] = None;
                    self.n_pending -= 1;
                    self.stats.reports_sent += 1;
                    return;
                }
            }
        }
        let Some(slot) = self.index.lookup(&flow) else {
            return;
        };
        let table = self.table.cached();
        let rule = &table.namespaces[slot].rule;
        let ns_id = rule.ns_id;
        let generation = table.generation;
        self.stats.matched += 1;
        let st = &mut self.ns.vals[slot];
        if st.generation != generation {
            // The rule changed (or is new): re-encode the in-band request and send it again
            // so the path learns the change. Rare, so allocating here is fine.
            st.generation = generation;
            st.request_sent = false;
            st.request_len = match rule.to_option_payload() {
                Ok(v) if !v.is_empty() => {
                    st.request[..v.len()].copy_from_slice(&v);
                    v.len() as u8
                }
                _ => 0,
            };
        }
        st.tx.add(flow.len);
        if flow.next_header == ip_protocol::HOPOPT {
            self.stats.skipped_has_hbh += 1;
            return;
        }
        // III-B.2: the request goes in the first data packet, and again every interval.
        let due = !st.request_sent
            || now.saturating_sub(st.last_request_ns) >= self.cfg.resend_interval_ns;
        if due && st.request_len > 0 {
            let req = st.request;
            let repr = InBandRepr {
                kind: InBandKind::Request,
                payload: &req[..st.request_len as usize],
            };
            let len = inband_header_len(repr.payload.len());
            if flow.len + len > self.cfg.mtu {
                self.stats.skipped_mtu += 1;
                return;
            }
            let mut hdr = [0u8; 264];
            if let Ok(n) = emit_inband_header(flow.next_header, &repr, &mut hdr) {
                if insert(b, ins_at, off, &hdr[..n]) {
                    let st = &mut self.ns.vals[slot];
                    st.request_sent = true;
                    st.last_request_ns = now;
                    self.stats.requests_sent += 1;
                }
            }
            return;
        }
        // Sampling (III-B.1 modes).
        let sample = match rule.mode {
            Mode::Count(n) => {
                st.since_int = st.since_int.saturating_add(1);
                st.since_int >= n
            }
            Mode::Frequency(ms) => st
                .last_int_ns
                .is_none_or(|t| now.saturating_sub(t) >= ms as u64 * 1_000_000),
            Mode::Probability(p) => {
                let worker_seed = self.cfg.prng_seed;
                let prng = self.prng.get_or_insert_with(|| Prng::new(worker_seed, 0));
                prng.next_f64() * 100.0 < p
            }
        };
        if !sample {
            return;
        }
        let tt = rule.trace_type;
        let e2e = tt.e2e();
        let seq = st.int_counter.wrapping_add(1);
        let tx = st.tx;
        let mut hdr = [0u8; 1024];
        let built = match self.cfg.encoding(ns_id) {
            Encoding::Seed => {
                let has = |m: u32| e2e & (m >> 16) as u16 != 0;
                let e = SeedE2eRepr {
                    int_counter: has(TraceType::E2E_INT_COUNTER).then_some(seq),
                    timestamp_ns: has(TraceType::E2E_TIMESTAMP).then_some(now),
                    tx_packets: has(TraceType::E2E_TX_COUNTER).then_some(tx.packets),
                    tx_bytes: has(TraceType::E2E_TX_BYTES).then_some(tx.bytes),
                };
                emit_seed_header(flow.next_header, ns_id, tt, None, &[], Some(&e), &mut hdr).ok()
            }
            Encoding::Ioam => build_ioam(
                &self.cfg,
                ns_id,
                tt,
                seq,
                now,
                tx,
                flow.next_header,
                flow.hop_limit,
                &mut hdr,
            ),
        };
        let Some(n) = built else {
            self.stats.skipped_build += 1;
            return;
        };
        if flow.len + n > self.cfg.mtu {
            self.stats.skipped_mtu += 1;
            return;
        }
        if large {
            // Step 3d: a large flow is measured by the sketch only.
            // The sample is spent (the flow stays on the count-only fast path).
            self.stats.gate_skipped += 1;
            self.stats.gate_bytes_saved += n as u64;
            let st = &mut self.ns.vals[slot];
            st.since_int = 0;
            st.last_int_ns = Some(now);
            return;
        }
        if insert(b, ins_at, off, &hdr[..n]) {
            let st = &mut self.ns.vals[slot];
            st.int_counter = seq;
            st.since_int = 0;
            st.last_int_ns = Some(now);
            self.stats.int_added += 1;
        }
    }

    /// Count a packet of the namespace at `slot` (IPv6 header at `off` of `d`) if that is
    /// all the full path would do with it; `false` (nothing changed) when it would do more:
    /// the rule changed, the packet has a Hop-by-Hop header, a request is due, or the packet
    /// is sampled (probability mode always goes the full way: its draw belongs there).
    #[inline]
    fn count_only(&mut self, slot: usize, d: &[u8], off: usize, now: u64) -> bool {
        let table = self.table.cached();
        let rule = &table.namespaces[slot].rule;
        let st = &mut self.ns.vals[slot];
        if st.generation != table.generation || d[off + 6] == ip_protocol::HOPOPT {
            return false;
        }
        let due = !st.request_sent
            || now.saturating_sub(st.last_request_ns) >= self.cfg.resend_interval_ns;
        if due && st.request_len > 0 {
            return false;
        }
        match rule.mode {
            Mode::Count(n) => {
                let since = st.since_int.saturating_add(1);
                if since >= n {
                    return false;
                }
                st.since_int = since;
            }
            Mode::Frequency(ms) => {
                if st
                    .last_int_ns
                    .is_none_or(|t| now.saturating_sub(t) >= ms as u64 * 1_000_000)
                {
                    return false;
                }
            }
            Mode::Probability(_) => return false,
        }
        self.stats.matched += 1;
        st.tx
            .add(40 + usize::from(u16::from_be_bytes([d[off + 4], d[off + 5]])));
        true
    }

    fn insert_inband<B: PacketBuf>(
        &mut self,
        b: &mut B,
        off: usize,
        flow: &Flow,
        repr: &InBandRepr<'_>,
    ) -> bool {
        let mut hdr = [0u8; 264];
        let Ok(n) = emit_inband_header(flow.next_header, repr, &mut hdr) else {
            return false;
        };
        if flow.len + n > self.cfg.mtu {
            self.stats.skipped_mtu += 1;
            return false;
        }
        insert(b, off + ipv6::HEADER_LEN, off, &hdr[..n])
    }
}

/// Insert `hdr` (whose Next Header is already the packet's) after the IPv6 header at `off`.
fn insert<B: PacketBuf>(b: &mut B, at: usize, off: usize, hdr: &[u8]) -> bool {
    if resize_at(b, at, 0, hdr.len()).is_err() {
        return false;
    }
    let d = b.data_mut();
    d[at..at + hdr.len()].copy_from_slice(hdr);
    fix_ipv6(d, off, ip_protocol::HOPOPT, hdr.len() as isize);
    true
}

/// IOAM encoding at the source: a Hop-by-Hop header with a Pre-allocated Trace (room for
/// `ioam_hops` transit entries plus the source's own, which it fills: node ID, timestamp,
/// and the E2E TX packets | TX bytes in the wide namespace data), then, if the rule asks
/// for the INT counter or timestamp, a Destination Options header with the IOAM E2E option
/// (sequence number 32, timestamp seconds + nanoseconds). Returns the bytes written.
#[allow(clippy::too_many_arguments)]
fn build_ioam(
    cfg: &IntConfig,
    ns: u16,
    tt: TraceType,
    seq: u32,
    now: u64,
    tx: FlowCounters,
    next_header: u8,
    hop_limit: u8,
    buf: &mut [u8],
) -> Option<usize> {
    let e2e = tt.e2e();
    let want = |m: u32| e2e & (m >> 16) as u16 != 0;
    let e = E2eRepr {
        namespace_id: ns,
        seq_num_32: want(TraceType::E2E_INT_COUNTER).then_some(seq),
        timestamp_secs: want(TraceType::E2E_TIMESTAMP).then_some(cfg.ioam_timestamp.split(now).0),
        timestamp_frac: want(TraceType::E2E_TIMESTAMP).then_some(cfg.ioam_timestamp.split(now).1),
        ..Default::default()
    };
    let with_doh = e.e2e_type() != 0;
    let itt = ioam_trace_type(tt);
    let repr = TraceRepr::pre_allocated(ns, itt, cfg.ioam_hops as usize + 1).ok()?;
    let hbh_next = if with_doh {
        ip_protocol::IPV6_OPTS
    } else {
        next_header
    };
    let n = ioam::emit_hbh_with_trace(hbh_next, &repr, buf).ok()?;
    let found = ioam::find_in_header(&buf[..n], ipv6_opt::IOAM_HBH).ok()??;
    let mut t = TraceOption::new_checked(&mut buf[found.body]).ok()?;
    let src = SeedHopRepr {
        node_id: cfg.node_id,
        timestamp_ns: Some(now),
        ..Default::default()
    };
    let hop_limit = match cfg.hop_limit_after_forward {
        true => hop_limit.saturating_sub(1),
        false => hop_limit,
    };
    let mut d = hop_to_node_data_in(&src, hop_limit, itt, cfg.ioam_timestamp);
    if want(TraceType::E2E_TX_COUNTER) || want(TraceType::E2E_TX_BYTES) {
        d.namespace_data_wide = Some((tx.packets as u64) << 32 | tx.bytes as u64);
    }
    t.fill_next(&d).ok()?;
    if !with_doh {
        return Some(n);
    }
    let (m, body) = ioam::emit_header_with_ioam(
        next_header,
        ipv6_opt::IOAM_DEST,
        ioam::option_type::E2E,
        e.buffer_len(),
        &mut buf[n..],
    )
    .ok()?;
    e.emit(&mut buf[n + body.start..n + body.end]).ok()?;
    Some(n + m)
}

stage_debug!(IntSource);

impl<B: PacketBuf> Stage<B> for IntSource {
    fn name(&self) -> &'static str {
        "int_source"
    }

    fn idle(&mut self) {
        self.table.get();
        if let (Some(g), Some(zero)) = (&mut self.gate, self.clock_zero) {
            let now = self.clock.now(zero.elapsed().as_nanos() as u64);
            g.expire(now);
            self.export_gate();
        }
    }

    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        if !self.cfg.source_ports.is_empty() && !self.cfg.source_ports.contains(&batch.rx_port) {
            return;
        }
        let table = self.table.get();
        if self.index.sync(table) {
            self.ns.sync(table, SourceNs::NEW);
        }
        let worker_ns = cx.now_ns();
        let now = self.clock.now(worker_ns);
        if self.prng.is_none() {
            self.prng = Some(Prng::new(self.cfg.prng_seed, cx.worker));
            self.worker = cx.worker as u16;
            self.clock_zero =
                std::time::Instant::now().checked_sub(std::time::Duration::from_nanos(worker_ns));
        }
        if let Some(rx) = &self.piggyback_rx {
            for slot in self.pending.iter_mut().filter(|s| s.is_none()) {
                match rx.try_recv() {
                    Ok(p) => {
                        *slot = Some(p);
                        self.n_pending += 1;
                    }
                    Err(_) => break,
                }
            }
        }
        // No rule and no piggy-back report to send: nothing can happen to these packets.
        if self.index.is_empty() && self.n_pending == 0 {
            return;
        }
        batch.for_each_active(|b| {
            self.process_one(b, now);
            Disposition::CONTINUE
        });
    }
}
