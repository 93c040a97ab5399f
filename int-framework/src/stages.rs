//! The INT elements as worker pipeline stages (seed 003 sections III-C to III-E): [`IntSource`]
//! (INTSource), [`IntTransit`] (INTInter) and [`IntSink`] (INTSink), over both wire encodings
//! ([`crate::option`]).
//!
//! Where the IPv6 header is: [`L3Offset::Ethernet`] (N6 and stand-alone transit pipelines:
//! after an Ethernet header, one VLAN tag allowed) or [`L3Offset::Raw`] (the buffer starts
//! with IPv6). Headers are inserted right after the fixed IPv6 header by moving the bytes in
//! front of them into the headroom ([`PacketBuf::prepend`]) and removed the same way
//! ([`PacketBuf::adj`]), so the payload never moves.
//!
//! Per packet: no allocation, no locks. Rules come from a [`TableSnapshot`] read once per
//! batch; reports and in-band requests leave through a bounded channel of fixed-size
//! [`IntEvent`]s (array-backed, no allocation per message); piggy-back reports arrive the
//! same way. Time is `cx.now_ns()`.

use crate::namespace::{TableSnapshot, DEFAULT_RESEND_INTERVAL_NS};
use crate::report::{E2eData, Encoding, HopData, IntReport};
use crate::request::{Mode, TraceType};
use crossbeam_channel::{Receiver, Sender, TrySendError};
use peregrine_dataplane::buffer::{BufError, PacketBuf};
use peregrine_dataplane::runtime::{
    Batch, Context, Disposition, DropReason, Reader, Reasons, Stage,
};
use peregrine_wire::int::{
    emit_inband_header, emit_seed_header, find_inband, hop_to_node_data_in, inband_header_len,
    ioam_trace_type, node_data_to_hop_in, parse_seed_header, InBandKind, InBandRepr, SeedE2eRepr,
    SeedHopRepr, TsFormat, MAX_INBAND_PAYLOAD,
};
use peregrine_wire::ioam::{self, E2eOption, E2eRepr, NodeData, TraceOption, TraceRepr};
use peregrine_wire::ipv6::{self, ip_protocol};
use peregrine_wire::ipv6ext::{self, OptionsHeader};
use peregrine_wire::ipv6option::option_type as ipv6_opt;
use rustc_hash::FxHashMap;
use std::net::Ipv6Addr;

/// Where the IPv6 header starts in the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum L3Offset {
    /// After an Ethernet header (one 802.1Q tag allowed).
    #[default]
    Ethernet,
    /// At offset 0.
    Raw,
}

impl L3Offset {
    fn find(self, d: &[u8]) -> Option<usize> {
        match self {
            L3Offset::Raw => Some(0),
            L3Offset::Ethernet => match d.get(12..14)? {
                [0x86, 0xdd] => Some(14),
                [0x81, 0x00] if d.get(16..18)? == [0x86, 0xdd] => Some(18),
                _ => None,
            },
        }
    }
}

/// Configuration shared by the three elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntConfig {
    /// This node's ID (seed: 16 bits; IOAM node_id is 24 bits and gets the same value).
    pub node_id: u16,
    /// Largest IPv6 packet (header included) the egress link carries; INT is skipped for a
    /// packet it would push over (III-C, III-D).
    pub mtu: usize,
    pub l3: L3Offset,
    /// Namespaces whose rule uses the seed encoding (sorted); all others use IOAM. (The rule
    /// JSON has no encoding field yet; the manager passes this list.)
    pub seed_namespaces: Vec<u16>,
    /// IOAM: pre-allocated trace entries for transit hops (the source adds one for itself).
    pub ioam_hops: u8,
    /// In-band request re-send interval (III-B.2; the namespace table's default).
    pub resend_interval_ns: u64,
    /// HbH fields (Table I bits 16-18, low half) this node can fill as a transit.
    pub supported_hbh: u16,
    /// Seed of the per-worker PRNG of the probability mode (mixed with the worker index).
    pub prng_seed: u64,
    /// What the IOAM timestamp fraction counts (RFC 9197 4.4.2.3). Linux writes POSIX
    /// (microseconds); a path with Linux hops needs [`TsFormat::Posix`] everywhere.
    pub ioam_timestamp: TsFormat,
    /// Timestamps are wall-clock time (ns since the Unix epoch, as Linux and other nodes
    /// write them) rather than the worker clock; needed when nodes are compared.
    pub wall_clock: bool,
    /// The source instruments only packets received on these ports (the edge facing the
    /// hosts); empty: every port. A node that is also a sink must not re-instrument the
    /// packets it just stripped.
    pub source_ports: Vec<u16>,
    /// The IOAM Hop_Lim written is the hop limit the packet leaves with (received - 1), as
    /// a Linux transit writes it (`ioam6_fill_trace_data` on input); set when the stages
    /// run before the routing stage that decrements it. Off: the hop limit as seen.
    pub hop_limit_after_forward: bool,
}

impl Default for IntConfig {
    fn default() -> Self {
        IntConfig {
            node_id: 0,
            mtu: 1500,
            l3: L3Offset::Ethernet,
            seed_namespaces: Vec::new(),
            ioam_hops: 5,
            resend_interval_ns: DEFAULT_RESEND_INTERVAL_NS,
            supported_hbh: (TraceType::HBH_TXRX_COUNTER
                | TraceType::HBH_TIMESTAMP
                | TraceType::HBH_TXRX_BYTES) as u16,
            prng_seed: 0x9e37_79b9_7f4a_7c15,
            ioam_timestamp: TsFormat::Ptp,
            wall_clock: false,
            source_ports: Vec::new(),
            hop_limit_after_forward: false,
        }
    }
}

impl IntConfig {
    /// Encoding of a namespace's rule.
    pub fn encoding(&self, ns: u16) -> Encoding {
        if self.seed_namespaces.binary_search(&ns).is_ok() {
            Encoding::Seed
        } else {
            Encoding::Ioam
        }
    }
}

/// Longest in-band payload, as a fixed buffer.
pub type InBandBytes = [u8; MAX_INBAND_PAYLOAD];

/// What the elements hand to the control core. Fixed size, `Copy`.
// Unboxed on purpose: a boxed report would allocate per packet.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy)]
pub enum IntEvent {
    /// A raw report from the sink, with what the namespace says to do with it.
    Report {
        report: IntReport,
        transmit: bool,
        piggyback: bool,
    },
    /// An in-band INT Request (0x32) seen by a transit or sink: CBOR rule bytes.
    Request {
        from: Ipv6Addr,
        len: u8,
        cbor: InBandBytes,
    },
    /// A piggy-backed report (0x33) extracted by a transit or received by a sink.
    InBandReport {
        from: Ipv6Addr,
        len: u8,
        bytes: InBandBytes,
    },
}

/// A piggy-back report for the source to send in-band towards `dst` (III-B).
#[derive(Debug, Clone, Copy)]
pub struct Piggyback {
    pub dst: Ipv6Addr,
    pub len: u8,
    pub bytes: InBandBytes,
}

impl Piggyback {
    /// Wrap a report's compact encoding for `dst` (the report's flow source).
    pub fn new(dst: Ipv6Addr, report: &IntReport) -> Piggyback {
        let mut bytes = [0u8; MAX_INBAND_PAYLOAD];
        let len = report.encode_compact(&mut bytes).unwrap_or(0) as u8;
        Piggyback { dst, len, bytes }
    }
}

/// A stage's timestamp clock: the worker clock, or wall-clock time derived from it by an
/// offset re-read once a second (one vDSO `clock_gettime` per second, not per packet).
#[derive(Debug, Clone, Copy, Default)]
struct StageClock {
    wall: bool,
    offset: u64,
    calibrated_at: Option<u64>,
}

const CLOCK_RECALIBRATE_NS: u64 = 1_000_000_000;

impl StageClock {
    fn new(wall: bool) -> StageClock {
        StageClock {
            wall,
            ..Default::default()
        }
    }

    fn now(&mut self, worker_ns: u64) -> u64 {
        if !self.wall {
            return worker_ns;
        }
        let stale = self
            .calibrated_at
            .is_none_or(|t| worker_ns.saturating_sub(t) >= CLOCK_RECALIBRATE_NS);
        if stale {
            let unix = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            self.offset = unix.saturating_sub(worker_ns);
            self.calibrated_at = Some(worker_ns);
        }
        worker_ns + self.offset
    }
}

// ---------------------------------------------------------------------------------------
// Packet helpers

/// Grow or shrink the `old`-byte region at `at` to `new` bytes by moving the `at` bytes in
/// front of it. Afterwards `[at, at + new)` is the region (contents unspecified).
fn resize_at<B: PacketBuf>(b: &mut B, at: usize, old: usize, new: usize) -> Result<(), BufError> {
    if new > old {
        let d = new - old;
        if b.headroom() >= d {
            // Usually only the L2 and IPv6 headers move.
            b.prepend(d)?;
            b.data_mut().copy_within(d..d + at, 0);
        } else {
            // Not enough headroom (a long request or report option): move the rest back.
            let len = b.len();
            b.append(d)?;
            b.data_mut().copy_within(at + old..len, at + new);
        }
    } else if old > new {
        let d = old - new;
        b.data_mut().copy_within(0..at, d);
        b.adj(d)?;
    }
    Ok(())
}

/// Set the IPv6 Next Header and add `delta` to Payload Length.
fn fix_ipv6(d: &mut [u8], off: usize, next_header: u8, delta: isize) {
    let mut ip = ipv6::Packet::new_unchecked(&mut d[off..]);
    let len = ip.payload_len() as isize + delta;
    ip.set_payload_len(len as u16);
    ip.set_next_header(next_header);
}

/// The flow of an IPv6 packet: addresses, upper protocol, ports (0 when none).
#[derive(Debug, Clone, Copy)]
struct Flow {
    src: Ipv6Addr,
    dst: Ipv6Addr,
    proto: u8,
    sport: u16,
    dport: u16,
    /// IPv6 total length.
    len: usize,
    next_header: u8,
    hop_limit: u8,
}

fn flow_of(d: &[u8], off: usize) -> Option<Flow> {
    let ip = ipv6::Packet::new_checked(d.get(off..)?).ok()?;
    let payload = ip.payload();
    let next_header = ip.next_header();
    // Most packets carry no extension header: skip the walker for them (RFC 8200 4).
    let (proto, uoff) = if ipv6ext::is_extension_header(next_header) {
        let mut w = ipv6ext::walk(next_header, payload);
        for h in &mut w {
            h.ok()?;
        }
        w.upper()?
    } else {
        (next_header, 0)
    };
    let (sport, dport) = match proto {
        ip_protocol::TCP | ip_protocol::UDP => {
            let p = payload.get(uoff..uoff + 4)?;
            (
                u16::from_be_bytes([p[0], p[1]]),
                u16::from_be_bytes([p[2], p[3]]),
            )
        }
        _ => (0, 0),
    };
    Some(Flow {
        src: ip.src_addr(),
        dst: ip.dst_addr(),
        proto,
        sport,
        dport,
        len: ip.total_len(),
        next_header,
        hop_limit: ip.hop_limit(),
    })
}

/// A rule's 5-tuple as a hash key. `wild` says which ports the rule leaves open (bit 0:
/// source, bit 1: destination; Listing 1: port 0 matches any); those ports are 0 here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FlowKey {
    src: u128,
    dst: u128,
    ports: u32,
    proto: u8,
    wild: u8,
}

impl std::hash::Hash for FlowKey {
    /// One word for the hasher: the fields folded with independent multiplies (a derived
    /// hash feeds seven dependent rounds, which showed as most of a lookup's cost).
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        const K1: u64 = 0x9e37_79b9_7f4a_7c15;
        const K2: u64 = 0xc2b2_ae3d_27d4_eb4f;
        const K3: u64 = 0x1656_67b1_9e37_79f9;
        let a = (self.src as u64 ^ (self.src >> 64) as u64).wrapping_mul(K1);
        let b = (self.dst as u64 ^ (self.dst >> 64) as u64).wrapping_mul(K2);
        let c = (self.ports as u64 | (self.proto as u64) << 32 | (self.wild as u64) << 40)
            .wrapping_mul(K3);
        state.write_u64(a ^ b.rotate_left(21) ^ c.rotate_left(42));
    }
}

impl FlowKey {
    fn of_flow(f: &Flow, wild: u8) -> FlowKey {
        let sport = if wild & 1 != 0 { 0 } else { f.sport };
        let dport = if wild & 2 != 0 { 0 } else { f.dport };
        FlowKey {
            src: u128::from(f.src),
            dst: u128::from(f.dst),
            ports: (sport as u32) << 16 | dport as u32,
            proto: f.proto,
            wild,
        }
    }
}

/// The INTSource lookup ([`TableSnapshot::lookup_flow`], seed Listing 1 matching) as a
/// tuple-space hash: one table keyed by the 5-tuple with the rule's wildcard ports zeroed,
/// probed once per wildcard pattern present (one probe when every rule is exact or all
/// rules share a pattern, at most four). Gives the index of the first (lowest-id) matching
/// namespace in the snapshot. Rebuilt when the snapshot changes, checked once per batch.
#[derive(Debug)]
struct FlowIndex {
    /// Which snapshot this indexes: its address and generation.
    of: (usize, u64),
    map: FxHashMap<FlowKey, u32>,
    patterns: [u8; 4],
    n_patterns: usize,
    /// The last flow looked up and its answer: packets of a flow come in runs, and a hit
    /// here costs one 37-byte compare instead of hashing (OVS's exact-match cache idea).
    last: Option<(FlowKey, Option<u32>)>,
}

impl FlowIndex {
    fn new() -> FlowIndex {
        FlowIndex {
            of: (0, u64::MAX),
            map: FxHashMap::with_capacity_and_hasher(NS_CAPACITY, Default::default()),
            patterns: [0; 4],
            n_patterns: 0,
            last: None,
        }
    }

    /// Re-index `t` if it is not the snapshot indexed; returns whether it was rebuilt.
    /// A rebuild happens on a table change only (a control-plane event), so the rare
    /// allocation of a table grown past its capacity is not per packet.
    fn sync(&mut self, t: &TableSnapshot) -> bool {
        let of = (t as *const TableSnapshot as usize, t.generation);
        if of == self.of {
            return false;
        }
        self.of = of;
        self.last = None;
        self.map.clear();
        self.n_patterns = 0;
        for (i, n) in t.namespaces.iter().enumerate() {
            let r = &n.rule;
            let wild = (r.src_port == 0) as u8 | ((r.dst_port == 0) as u8) << 1;
            let key = FlowKey {
                src: u128::from(r.src_ip),
                dst: u128::from(r.dst_ip),
                ports: (r.src_port as u32) << 16 | r.dst_port as u32,
                proto: r.protocol.number(),
                wild,
            };
            // Sorted by id: the first rule with a key is the lowest id, as lookup_flow.
            self.map.entry(key).or_insert(i as u32);
            if !self.patterns[..self.n_patterns].contains(&wild) {
                self.patterns[self.n_patterns] = wild;
                self.n_patterns += 1;
            }
        }
        true
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.n_patterns == 0
    }

    /// Index (in the snapshot) of the first namespace whose rule matches `f`.
    #[inline]
    fn lookup(&mut self, f: &Flow) -> Option<usize> {
        let exact = FlowKey::of_flow(f, 0);
        if let Some((k, hit)) = self.last {
            if k == exact {
                return hit.map(|i| i as usize);
            }
        }
        let mut best: Option<u32> = None;
        for &w in &self.patterns[..self.n_patterns] {
            if let Some(&i) = self.map.get(&FlowKey::of_flow(f, w)) {
                best = Some(best.map_or(i, |b| b.min(i)));
            }
        }
        self.last = Some((exact, best));
        best.map(|i| i as usize)
    }
}

/// Index of namespace `ns` in the snapshot (sorted by id).
fn ns_index(t: &TableSnapshot, ns: u16) -> Option<usize> {
    t.namespaces
        .binary_search_by_key(&ns, |n| n.rule.ns_id)
        .ok()
}

/// Per-namespace state of a stage, in the snapshot's order (so a [`FlowIndex`] hit is a
/// direct index), carried over by namespace id when the table changes.
#[derive(Debug)]
struct NsSlots<T> {
    ids: Vec<u16>,
    vals: Vec<T>,
    next_ids: Vec<u16>,
    next_vals: Vec<T>,
}

impl<T: Copy> NsSlots<T> {
    fn new() -> NsSlots<T> {
        NsSlots {
            ids: Vec::new(),
            vals: Vec::new(),
            next_ids: Vec::new(),
            next_vals: Vec::new(),
        }
    }

    /// Lay the slots out as `t`'s namespaces, keeping the state of those that remain.
    fn sync(&mut self, t: &TableSnapshot, init: T) {
        self.next_ids.clear();
        self.next_vals.clear();
        for n in &t.namespaces {
            let id = n.rule.ns_id;
            let v = match self.ids.binary_search(&id) {
                Ok(i) => self.vals[i],
                Err(_) => init,
            };
            self.next_ids.push(id);
            self.next_vals.push(v);
        }
        std::mem::swap(&mut self.ids, &mut self.next_ids);
        std::mem::swap(&mut self.vals, &mut self.next_vals);
    }

    fn get(&self, ns: u16) -> Option<&T> {
        self.ids.binary_search(&ns).ok().map(|i| &self.vals[i])
    }
}

/// Per-namespace packet/byte counters kept by a node (Listing 2 counters), wrapping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowCounters {
    pub packets: u32,
    pub bytes: u32,
}

impl FlowCounters {
    fn add(&mut self, len: usize) {
        self.packets = self.packets.wrapping_add(1);
        self.bytes = self.bytes.wrapping_add(len as u32);
    }
}

/// Most namespaces a stage keeps state for (the namespace table's default cap); the maps
/// are allocated for this many up front so a new namespace does not allocate.
const NS_CAPACITY: usize = crate::namespace::DEFAULT_MAX_NAMESPACES;

/// xorshift64*: the per-worker PRNG of the probability mode (deterministic under test).
#[derive(Debug, Clone)]
struct Prng(u64);

impl Prng {
    fn new(seed: u64, worker: usize) -> Prng {
        let s = seed ^ (worker as u64).wrapping_mul(0x2545_f491_4f6c_dd1d);
        Prng(if s == 0 { 1 } else { s })
    }
    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

// ---------------------------------------------------------------------------------------
// Source

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
        }
    }

    /// Take piggy-back reports to send from `rx` (filled by the control core).
    pub fn with_piggyback(mut self, rx: Receiver<Piggyback>) -> IntSource {
        self.piggyback_rx = Some(rx);
        self
    }

    pub fn stats(&self) -> SourceStats {
        self.stats
    }

    /// The source's counters for a namespace (TX packets/bytes, INT packets).
    pub fn counters(&self, ns: u16) -> Option<(FlowCounters, u32)> {
        self.ns.get(ns).map(|s| (s.tx, s.int_counter))
    }

    fn process_one<B: PacketBuf>(&mut self, b: &mut B, now: u64) {
        let Some(off) = self.cfg.l3.find(b.data()) else {
            return;
        };
        let Some(flow) = flow_of(b.data(), off) else {
            return;
        };
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
        if insert(b, ins_at, off, &hdr[..n]) {
            let st = &mut self.ns.vals[slot];
            st.int_counter = seq;
            st.since_int = 0;
            st.last_int_ns = Some(now);
            self.stats.int_added += 1;
        }
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

impl std::fmt::Debug for IntSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntSource")
            .field("cfg", &self.cfg)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<B: PacketBuf> Stage<B> for IntSource {
    fn name(&self) -> &'static str {
        "int_source"
    }

    fn idle(&mut self) {
        self.table.get();
    }

    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        if !self.cfg.source_ports.is_empty() && !self.cfg.source_ports.contains(&batch.rx_port) {
            return;
        }
        let table = self.table.get();
        if self.index.sync(table) {
            self.ns.sync(table, SourceNs::NEW);
        }
        let now = self.clock.now(cx.now_ns());
        if self.prng.is_none() {
            self.prng = Some(Prng::new(self.cfg.prng_seed, cx.worker));
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

// ---------------------------------------------------------------------------------------
// Which INT header a packet carries

#[derive(Debug)]
enum Carried {
    None,
    InBand(InBandKind, u16),
    Seed,
    Ioam,
}

fn classify(cfg: &IntConfig, hdr: &[u8]) -> Result<Carried, peregrine_wire::Error> {
    if let Some(r) = find_inband(hdr)? {
        let ns = match r.kind {
            InBandKind::Report if r.payload.len() >= 2 => {
                u16::from_be_bytes([r.payload[0], r.payload[1]])
            }
            _ => 0,
        };
        return Ok(Carried::InBand(r.kind, ns));
    }
    let Some(f) = ioam::find_in_header(hdr, ipv6_opt::IOAM_HBH)? else {
        return Ok(Carried::None);
    };
    // The seed's namespace sits where IOAM has Reserved and IOAM-Option-Type; the rule's
    // encoding decides (docs/int.md).
    let data = &hdr[f.body.start - 2..f.body.end];
    let seed_ns = u16::from_be_bytes([data[0], data[1]]);
    if cfg.encoding(seed_ns) == Encoding::Seed {
        Ok(Carried::Seed)
    } else if f.ioam_type == ioam::option_type::PRE_ALLOCATED_TRACE {
        Ok(Carried::Ioam)
    } else {
        Ok(Carried::None)
    }
}

// ---------------------------------------------------------------------------------------
// Transit

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

#[derive(Debug, Clone, Copy)]
struct Drops {
    malformed: DropReason,
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
        }
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
        let Some(off) = self.cfg.l3.find(b.data()) else {
            return Disposition::CONTINUE;
        };
        if self.index.is_empty() && !has_hbh(b.data(), off) {
            // Nothing to count and no INT header: the common case costs two loads.
            return Disposition::CONTINUE;
        }
        let Some(flow) = flow_of(b.data(), off) else {
            return Disposition::CONTINUE;
        };
        let at = off + ipv6::HEADER_LEN;
        let carried = if flow.next_header == ip_protocol::HOPOPT {
            match classify(&self.cfg, &b.data()[at..]) {
                Ok(c) => c,
                Err(_) => return Disposition::drop_as(self.drops.malformed),
            }
        } else {
            Carried::None
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

/// Length of the INT headers at the start of `hdr`: the Hop-by-Hop header, plus a
/// Destination Options header right after it that holds an IOAM E2E option.
fn int_headers_len(hdr: &[u8]) -> usize {
    let Ok(h) = OptionsHeader::new_checked(hdr) else {
        return 0;
    };
    let len = h.header_len();
    if h.next_header() == ip_protocol::IPV6_OPTS {
        if let Some(rest) = hdr.get(len..) {
            if let Ok(Some(_)) = ioam::find_in_header(rest, ipv6_opt::IOAM_DEST) {
                if let Ok(d) = OptionsHeader::new_checked(rest) {
                    return len + d.header_len();
                }
            }
        }
    }
    len
}

fn inband_event(hdr: &[u8], from: Ipv6Addr, kind: InBandKind) -> Option<IntEvent> {
    let r = find_inband(hdr).ok()??;
    let mut bytes = [0u8; MAX_INBAND_PAYLOAD];
    bytes[..r.payload.len()].copy_from_slice(r.payload);
    let len = r.payload.len() as u8;
    Some(match kind {
        InBandKind::Request => IntEvent::Request {
            from,
            len,
            cbor: bytes,
        },
        InBandKind::Report => IntEvent::InBandReport { from, len, bytes },
    })
}

/// Remove the first extension header after the IPv6 header at `off`.
fn strip_first<B: PacketBuf>(b: &mut B, off: usize) -> Result<(), ()> {
    let at = off + ipv6::HEADER_LEN;
    let h = OptionsHeader::new_checked(&b.data()[at..]).map_err(|_| ())?;
    let (len, nh) = (h.header_len(), h.next_header());
    resize_at(b, at, len, 0).map_err(|_| ())?;
    fix_ipv6(b.data_mut(), off, nh, -(len as isize));
    Ok(())
}

impl std::fmt::Debug for IntTransit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntTransit")
            .field("cfg", &self.cfg)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<B: PacketBuf> Stage<B> for IntTransit {
    fn name(&self) -> &'static str {
        "int_transit"
    }

    fn idle(&mut self) {
        self.table.get();
    }

    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        let table = self.table.get();
        if self.index.sync(table) {
            self.counters.sync(table, FlowCounters::default());
        }
        let now = self.clock.now(cx.now_ns());
        batch.for_each_active(|b| self.process_one(b, now));
    }
}

/// Whether the IPv6 header at `off` is followed by a Hop-by-Hop Options header, where
/// every INT encoding starts (RFC 8200 4.1: it must come first). Bounds-checked loads
/// only; a truncated header is not INT here and the full parse deals with it.
#[inline]
fn has_hbh(d: &[u8], off: usize) -> bool {
    d.get(off + 6) == Some(&ip_protocol::HOPOPT)
}

// ---------------------------------------------------------------------------------------
// Sink

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
        }
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
        let Some(off) = self.cfg.l3.find(b.data()) else {
            return Disposition::CONTINUE;
        };
        if !has_hbh(b.data(), off) {
            // Not INT (every encoding starts with a Hop-by-Hop header): count the packet if
            // its flow is monitored (the RX counters of the loss figures), else done.
            if self.index.is_empty() {
                return Disposition::CONTINUE;
            }
            if let Some(flow) = flow_of(b.data(), off) {
                if let Some(i) = self.index.lookup(&flow) {
                    self.counters.vals[i].add(flow.len);
                }
            }
            return Disposition::CONTINUE;
        }
        let Some(flow) = flow_of(b.data(), off) else {
            return Disposition::CONTINUE;
        };
        let at = off + ipv6::HEADER_LEN;
        let carried = if flow.next_header == ip_protocol::HOPOPT {
            match classify(&self.cfg, &b.data()[at..]) {
                Ok(c) => c,
                Err(_) => return Disposition::drop_as(self.drops.malformed),
            }
        } else {
            Carried::None
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

impl std::fmt::Debug for IntSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntSink")
            .field("cfg", &self.cfg)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<B: PacketBuf> Stage<B> for IntSink {
    fn name(&self) -> &'static str {
        "int_sink"
    }

    fn idle(&mut self) {
        self.table.get();
    }

    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        let table = self.table.get();
        if self.index.sync(table) {
            self.counters.sync(table, FlowCounters::default());
        }
        let now = self.clock.now(cx.now_ns());
        batch.for_each_active(|b| self.process_one(b, now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::namespace::NamespaceTable;
    use crate::request::{Flags, Protocol, Rule};

    fn addr(i: u8) -> Ipv6Addr {
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, i as u16)
    }

    fn rule(ns: u16, src: u8, dst: u8, sport: u16, dport: u16, protocol: Protocol) -> Rule {
        Rule {
            ns_id: ns,
            app_id: 1,
            src_ip: addr(src),
            dst_ip: addr(dst),
            src_port: sport,
            dst_port: dport,
            protocol,
            trace_type: TraceType::SEED_EXPERIMENTS,
            mode: Mode::Count(10),
            flags: Flags::default(),
        }
    }

    fn flow(src: u8, dst: u8, proto: u8, sport: u16, dport: u16) -> Flow {
        Flow {
            src: addr(src),
            dst: addr(dst),
            proto,
            sport,
            dport,
            len: 100,
            next_header: proto,
            hop_limit: 64,
        }
    }

    /// The hash index answers exactly as the snapshot's linear `lookup_flow` (first match,
    /// lowest id), over exact rules, every wildcard pattern and overlapping rules.
    #[test]
    fn flow_index_agrees_with_linear_lookup() {
        let mut t = NamespaceTable::default();
        let rules = [
            rule(9, 1, 2, 1000, 2000, Protocol::Udp), // exact
            rule(5, 1, 2, 0, 2000, Protocol::Udp),    // any source port, overlaps 9
            rule(7, 1, 2, 1000, 0, Protocol::Udp),    // any destination port
            rule(3, 3, 4, 0, 0, Protocol::Tcp),       // any ports
            rule(11, 3, 4, 80, 443, Protocol::Tcp),   // exact, shadowed by 3
            rule(2, 5, 6, 1, 2, Protocol::Icmp),      // exact, ICMP has no ports
            rule(4, 5, 6, 0, 0, Protocol::Icmp),
        ];
        for r in rules {
            t.install(r).unwrap();
        }
        let snap = t.snapshot();
        let mut idx = FlowIndex::new();
        assert!(idx.sync(&snap));
        assert!(!idx.sync(&snap), "same snapshot: no rebuild");
        assert_eq!(idx.n_patterns, 4);
        let mut hits = 0;
        for src in 0..8 {
            for dst in 0..8 {
                for proto in [ip_protocol::UDP, ip_protocol::TCP, 58] {
                    for sport in [0, 1, 80, 1000, 1001] {
                        for dport in [0, 2, 443, 2000, 2001] {
                            let f = flow(src, dst, proto, sport, dport);
                            let want = snap
                                .lookup_flow(f.src, f.dst, f.proto, f.sport, f.dport)
                                .map(|n| n.ns_id());
                            let got = idx.lookup(&f).map(|i| snap.namespaces[i].ns_id());
                            assert_eq!(got, want, "{f:?}");
                            hits += want.is_some() as usize;
                        }
                    }
                }
            }
        }
        assert!(hits > 50, "the grid must exercise matches, got {hits}");
        // Exact rule 9 is shadowed by the lower id 5 (any source port).
        let f = flow(1, 2, ip_protocol::UDP, 1000, 2000);
        assert_eq!(idx.lookup(&f).map(|i| snap.namespaces[i].ns_id()), Some(5));
    }

    #[test]
    fn flow_index_follows_table_changes() {
        let mut t = NamespaceTable::default();
        let mut idx = FlowIndex::new();
        assert!(idx.sync(&t.snapshot()));
        assert!(idx.is_empty());
        t.install(rule(1, 1, 2, 0, 5000, Protocol::Udp)).unwrap();
        let snap = t.snapshot();
        assert!(idx.sync(&snap));
        assert!(!idx.is_empty());
        assert!(idx.lookup(&flow(1, 2, ip_protocol::UDP, 7, 5000)).is_some());
        t.remove(1).unwrap();
        assert!(idx.sync(&t.snapshot()));
        assert!(idx.is_empty());
        assert!(idx.lookup(&flow(1, 2, ip_protocol::UDP, 7, 5000)).is_none());
    }

    #[test]
    fn slots_keep_state_of_remaining_namespaces() {
        let mut t = NamespaceTable::default();
        t.install(rule(4, 1, 2, 0, 1, Protocol::Udp)).unwrap();
        t.install(rule(8, 1, 2, 0, 2, Protocol::Udp)).unwrap();
        let mut s: NsSlots<u32> = NsSlots::new();
        s.sync(&t.snapshot(), 0);
        s.vals[0] = 40;
        s.vals[1] = 80;
        t.install(rule(6, 1, 2, 0, 3, Protocol::Udp)).unwrap();
        t.remove(4).unwrap();
        s.sync(&t.snapshot(), 1);
        assert_eq!(s.ids, [6, 8]);
        assert_eq!(s.vals, [1, 80]);
        assert_eq!(s.get(8), Some(&80));
        assert_eq!(s.get(4), None);
    }

    #[test]
    fn hbh_check_is_bounds_checked() {
        let mut d = [0u8; 60];
        d[14 + 6] = ip_protocol::UDP;
        assert!(!has_hbh(&d, 14));
        d[14 + 6] = ip_protocol::HOPOPT;
        assert!(has_hbh(&d, 14));
        assert!(!has_hbh(&d[..20], 14));
        assert!(!has_hbh(&[], 0));
    }
}
