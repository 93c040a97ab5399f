//! QoS Monitor: turns raw INT reports into throughput, delay, jitter and packet loss.
//!
//! This is the seed's *QoS Monitor* (Miranda et al., section III-F, "QoS Monitor"), written I/O-free:
//! the INT sink hands it one [`RawReport`] per INT-carrying packet it decoded, and the caller passes
//! the current time into [`QosMonitor::report`]. Nothing here reads a clock, so results are
//! deterministic functions of the reports fed in.
//!
//! # Units and clocks
//! All timestamps are **nanoseconds** as `u64` (the seed carries 64-bit timestamps, Table I bits 1
//! and 17; RFC 9197 timestamps convert to ns before they reach this module). Window edges are driven
//! by the **sink timestamp** ([`RawReport::sink_ts_ns`]); `now` passed to [`QosMonitor::report`] is
//! on the same clock. One-way delays are signed: unsynchronised clocks can make them negative (seed
//! section V-B saw -36 s), and the monitor keeps the sign in means and min/max.
//!
//! # Definitions (Miranda et al.)
//! - **Delay** (III-F): "only the delay can be calculated with a single raw report, from the
//!   difference of the timestamps from each hop". End to end: `sink_ts - src_ts`. Per hop pair
//!   (link `i -> j`): `t_j - t_i`, where a node's reference time `t` is its ingress timestamp, or its
//!   egress timestamp if it only has that (the seed has one HbH timestamp per hop, Table I bit 17).
//!   With one reference time per node the link delays telescope exactly to the end-to-end delay,
//!   which is Eq. (2). Reported as mean, plus p50/p99 from an HdrHistogram (Tene's High Dynamic
//!   Range Histogram, the `hdrhistogram` crate) with 1 significant digit: 16 sub-buckets per
//!   power of two, so at most 6.25 % relative error; the middle of the quantile's bucket,
//!   clamped to the window's min/max, so exact when all samples are equal.
//! - **Jitter** (III-F): "the jitter is calculated through the difference of sequential samples of
//!   delay": the mean of `|D_k - D_{k-1}|` over consecutive reports in arrival order whose second
//!   report falls into the window. The RFC 3550 (section 6.4.1) smoothed estimate
//!   `J += (|D_k - D_{k-1}| - J) / 16` is reported beside it for comparison.
//! - **Throughput** (III-F, Algorithm 1): `(endBytes - startBytes) * 8 / (endTS - startTS)`, where
//!   the end entry is the last report in the window and the start entry is the last report before the
//!   window opened ("the first valid entry near baseTS"; with sparse sampling "the values are
//!   averaged over the period between the last two reports"). For link `i -> j` the bytes are
//!   j's RX byte counter (Table I bit 18, 32-bit) and the times are j's reference times; end to end it
//!   is the sink's RX bytes. If the sink passes no RX counters, the monitor counts the packet lengths
//!   of the reports it sees (exact when every packet carries INT).
//! - **Packet loss ratio, per hop** (III-F): "the same approach from Algorithm 1, but using the
//!   packet counters, and the difference between transmitted and received packets over a period":
//!   `1 - ΔRX_j / ΔTX_i` over the same start/end entries. HbH packet counters are 16-bit (Table I
//!   bit 16), E2E ones 32-bit (bit 2); both may wrap.
//! - **Packet loss ratio, end to end**: from gaps in the report sequence number (Table I bit 0,
//!   the E2E INT counter), with a 64-entry reordering window (RFC 3550 appendix A.1 style extended
//!   sequence numbers): a sequence number is declared lost only once 64 newer ones have been seen,
//!   so reordering by fewer than 64 positions is never counted as loss. Counter-based end-to-end loss
//!   (source TX vs sink RX) is reported beside it as `loss_ratio_counters`.
//! - **Counter wrap** (III-F, Algorithm 1 line 9; Table I): every 16- or 32-bit counter and the
//!   sequence number is extended to 64 bits with serial-number arithmetic (RFC 1982): a forward step
//!   of less than half the range is an advance (possibly across the wrap); anything else is an older
//!   value from a reordered packet and is ignored. This subsumes the seed's "add 65536 (or 2^32)
//!   if end < start" and also tolerates reordering.
//! - **Path composition** (section IV-B, Eqs. (1)-(3)): throughput is concave (min over links),
//!   delay and jitter are additive (sum), loss is multiplicative (`1 - Π(1 - l_i)`); see
//!   [`compose`]. The additive jitter rule is the seed's; for the mean-absolute-difference jitter it
//!   is an upper bound (`E|X + Y| <= E|X| + E|Y|`), exact when only one link contributes jitter.
//!
//! # Windows and memory
//! Windows are 1 s, 10 s and 60 s (III-F: "1 second, 10 seconds, 1 minute"), aligned to multiples
//! of their length on the sink clock: window `k` covers `[k*W, (k+1)*W)`. [`QosMonitor::report`]
//! returns the last *complete* window before `now`, i.e. `k = now / W - 1`, so results do not
//! change once a window has closed. Per namespace the monitor keeps at most [`MAX_SAMPLES`] (1000,
//! as the seed) compact recent samples plus, per window length, two O(1) aggregate buckets (the
//! open one and the last closed one; per-link aggregates are bounded by [`MAX_HOPS`]). The number
//! of namespaces is capped ([`QosConfig::max_namespaces`]); new namespaces beyond the cap are
//! refused or evict the least recently updated one ([`CapPolicy`]), and both are counted.
//!
//! The seed's namespace identifies one monitored flow (one INT rule per flow, section III-B), so
//! the monitor keys its state by namespace only.

use hdrhistogram::Histogram;
use std::collections::{HashMap, VecDeque};

/// Recent raw samples kept per namespace (seed III-F: "1000 samples").
pub const MAX_SAMPLES: usize = 1000;
/// Largest number of intermediate hops a report may carry.
pub const MAX_HOPS: usize = 16;
/// Default cap on monitored namespaces.
pub const DEFAULT_MAX_NAMESPACES: usize = 1024;
/// Reordering tolerance of the sequence-number loss detector, in packets.
pub const REORDER_WINDOW: u64 = 64;

/// Significant decimal digits of the delay histograms: 1 gives 16 sub-buckets per power of two
/// (about 1000 counters over the whole `u64` range, as small as the windows need).
const HIST_SIGFIG: u8 = 1;

/// A delay histogram over all of `u64`, allocated once (never resized when recording).
fn delay_histogram() -> Histogram<u32> {
    // The bounds are constants that `new_with_bounds` accepts (1 <= low, 2 * low <= high,
    // sigfig <= 5).
    Histogram::new_with_bounds(1, u64::MAX, HIST_SIGFIG).expect("constant valid bounds")
}

mod types;

pub use types::*;

// ---------------------------------------------------------------------------------------------
// Internals

/// Extends a wrapping counter to 64 bits (RFC 1982 serial-number arithmetic).
#[derive(Debug, Clone, Copy, Default)]
struct Unwrap {
    last: u32,
    ext: u64,
    init: bool,
}

impl Unwrap {
    /// Returns the extended value and whether `raw` was stale (older, ignored).
    fn update(&mut self, raw: u32, w: CounterWidth) -> (u64, bool) {
        let raw = raw & w.mask();
        if !self.init {
            self.init = true;
            self.last = raw;
            self.ext = raw as u64;
            return (self.ext, false);
        }
        let d = raw.wrapping_sub(self.last) & w.mask();
        if d < w.half() {
            self.ext += d as u64;
            self.last = raw;
            (self.ext, false)
        } else {
            (self.ext, true)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SeqOutcome {
    New { lost: u64 },
    Filled,
    Duplicate,
    Late,
}

/// Sequence-number loss detector with a [`REORDER_WINDOW`]-packet reordering window.
#[derive(Debug, Clone, Copy, Default)]
struct SeqTracker {
    max: u32,
    init: bool,
    /// Bit k set: sequence number `max - k` was received.
    bits: u64,
    /// Bit k set: sequence number `max - k` is expected (not before the first packet seen, unless
    /// it arrived late), so its absence counts as loss when it leaves the window.
    known: u64,
}

impl SeqTracker {
    fn on_seq(&mut self, raw: u32, w: CounterWidth) -> SeqOutcome {
        let raw = raw & w.mask();
        if !self.init {
            self.init = true;
            self.max = raw;
            self.bits = 1;
            self.known = 1;
            return SeqOutcome::New { lost: 0 };
        }
        let d = raw.wrapping_sub(self.max) & w.mask();
        if d == 0 {
            SeqOutcome::Duplicate
        } else if d < w.half() {
            let d = d as u64;
            let missing = self.known & !self.bits;
            let lost = if d >= REORDER_WINDOW {
                missing.count_ones() as u64 + (d - REORDER_WINDOW)
            } else {
                (missing >> (64 - d)).count_ones() as u64
            };
            if d >= 64 {
                self.bits = 1;
                self.known = u64::MAX;
            } else {
                self.bits = (self.bits << d) | 1;
                self.known = (self.known << d) | ((1u64 << d) - 1);
            }
            self.max = raw;
            SeqOutcome::New { lost }
        } else {
            let k = w.range() - d as u64;
            if k < REORDER_WINDOW {
                if self.bits & (1 << k) != 0 {
                    SeqOutcome::Duplicate
                } else {
                    self.bits |= 1 << k;
                    self.known |= 1 << k;
                    SeqOutcome::Filled
                }
            } else {
                SeqOutcome::Late
            }
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct NodeCounters {
    tx: Unwrap,
    rx: Unwrap,
    rxb: Unwrap,
    synth_rx: u64,
    synth_rxb: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct NodeView {
    id: u32,
    t: Option<u64>,
    tx: Option<u64>,
    rx: Option<u64>,
    rxb: Option<u64>,
}

/// Counter snapshot of a link at one report: upstream TX, downstream RX and RX bytes, at the
/// downstream node's time.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LinkSnap {
    t: u64,
    tx_up: Option<u64>,
    rx_down: Option<u64>,
    rxb_down: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default)]
struct LinkState {
    last_snap: Option<LinkSnap>,
    prev_delay: Option<i64>,
}

#[derive(Debug, Clone, Copy, Default)]
struct LinkAgg {
    from: u32,
    to: u32,
    start: Option<LinkSnap>,
    end: Option<LinkSnap>,
    delay_sum: i128,
    delay_n: u64,
    jit_sum: u128,
    jit_n: u64,
}

impl LinkAgg {
    fn metrics(&self) -> LinkMetrics {
        let mut m = LinkMetrics {
            delay_ns: (self.delay_n > 0).then(|| self.delay_sum as f64 / self.delay_n as f64),
            jitter_ns: (self.jit_n > 0).then(|| self.jit_sum as f64 / self.jit_n as f64),
            ..Default::default()
        };
        if let (Some(s), Some(e)) = (self.start, self.end) {
            if let (Some(b0), Some(b1)) = (s.rxb_down, e.rxb_down) {
                if e.t > s.t {
                    m.throughput_bps =
                        Some(b1.saturating_sub(b0) as f64 * 8e9 / (e.t - s.t) as f64);
                }
            }
            if let (Some(tx0), Some(tx1), Some(rx0), Some(rx1)) =
                (s.tx_up, e.tx_up, s.rx_down, e.rx_down)
            {
                let dtx = tx1.saturating_sub(tx0);
                let drx = rx1.saturating_sub(rx0);
                if dtx > 0 {
                    m.loss_ratio = Some((1.0 - drx as f64 / dtx as f64).clamp(0.0, 1.0));
                }
            }
        }
        m
    }
}

#[derive(Debug)]
struct Bucket {
    idx: u64,
    valid: bool,
    reports: u64,
    delay_sum: i128,
    delay_n: u64,
    delay_min: i64,
    delay_max: i64,
    hist: Histogram<u32>,
    jit_sum: u128,
    jit_n: u64,
    rfc3550: Option<f64>,
    seq_recv: u64,
    seq_lost: u64,
    links: Vec<LinkAgg>,
}

impl Bucket {
    fn new() -> Self {
        Bucket {
            idx: 0,
            valid: false,
            reports: 0,
            delay_sum: 0,
            delay_n: 0,
            delay_min: i64::MAX,
            delay_max: i64::MIN,
            hist: delay_histogram(),
            jit_sum: 0,
            jit_n: 0,
            rfc3550: None,
            seq_recv: 0,
            seq_lost: 0,
            links: Vec::new(),
        }
    }

    fn reset(&mut self, idx: u64, path: &[u32], links: &[LinkState]) {
        self.idx = idx;
        self.valid = true;
        self.reports = 0;
        self.delay_sum = 0;
        self.delay_n = 0;
        self.delay_min = i64::MAX;
        self.delay_max = i64::MIN;
        self.hist.reset();
        self.jit_sum = 0;
        self.jit_n = 0;
        self.rfc3550 = None;
        self.seq_recv = 0;
        self.seq_lost = 0;
        self.reset_links(path, links);
    }

    fn reset_links(&mut self, path: &[u32], links: &[LinkState]) {
        self.links.clear();
        self.links
            .extend(links.iter().enumerate().map(|(l, s)| LinkAgg {
                from: path[l],
                to: path[l + 1],
                start: s.last_snap,
                ..Default::default()
            }));
    }

    /// The `q` quantile of the delays (rank `ceil(q * n)`): the middle of its histogram
    /// bucket, clamped to the window's min/max; 0 for an empty window.
    fn percentile(&self, q: f64) -> i64 {
        if self.hist.is_empty() {
            return 0;
        }
        let mid = self.hist.median_equivalent(self.hist.value_at_quantile(q));
        let v = mid.min(i64::MAX as u64) as i64;
        v.clamp(self.delay_min, self.delay_max)
    }
}

#[derive(Debug)]
struct WinState {
    cur: Bucket,
    done: Bucket,
}

#[derive(Debug)]
struct NsState {
    samples: VecDeque<Sample>,
    path: Vec<u32>,
    nodes: Vec<NodeCounters>,
    links: Vec<LinkState>,
    views: Vec<NodeView>,
    seq: SeqTracker,
    prev_delay: Option<i64>,
    rfc3550: f64,
    last_update: u64,
    windows: [WinState; 3],
}

impl NsState {
    fn new() -> Self {
        let w = || WinState {
            cur: Bucket::new(),
            done: Bucket::new(),
        };
        NsState {
            samples: VecDeque::with_capacity(MAX_SAMPLES),
            path: Vec::new(),
            nodes: Vec::new(),
            links: Vec::new(),
            views: Vec::new(),
            seq: SeqTracker::default(),
            prev_delay: None,
            rfc3550: 0.0,
            last_update: 0,
            windows: [w(), w(), w()],
        }
    }
}

/// The QoS monitor (seed III-F). Feed it [`RawReport`]s with [`QosMonitor::ingest`], read
/// [`QosReport`]s with [`QosMonitor::report`].
#[derive(Debug, Default)]
pub struct QosMonitor {
    cfg: QosConfig,
    ns: HashMap<u32, NsState>,
    stats: QosStats,
}

impl QosMonitor {
    /// A monitor with the given configuration.
    pub fn new(cfg: QosConfig) -> Self {
        QosMonitor {
            cfg,
            ns: HashMap::new(),
            stats: QosStats::default(),
        }
    }

    /// Monitor-wide counters.
    pub fn stats(&self) -> QosStats {
        self.stats
    }

    /// Number of monitored namespaces.
    pub fn namespace_count(&self) -> usize {
        self.ns.len()
    }

    /// Stop monitoring a namespace (e.g. its INT rule was removed). Returns whether it existed.
    pub fn remove_namespace(&mut self, ns: u32) -> bool {
        self.ns.remove(&ns).is_some()
    }

    /// The retained recent samples of a namespace, oldest first (at most [`MAX_SAMPLES`]).
    pub fn samples(&self, ns: u32) -> Option<&VecDeque<Sample>> {
        self.ns.get(&ns).map(|s| &s.samples)
    }

    /// Enforce the namespace cap before `ns` is inserted.
    fn make_room(&mut self, ns: u32) -> Result<(), IngestError> {
        if self.ns.contains_key(&ns) || self.ns.len() < self.cfg.max_namespaces {
            return Ok(());
        }
        if self.cfg.cap_policy == CapPolicy::EvictLeastRecent {
            let victim = self
                .ns
                .iter()
                .map(|(&k, s)| (s.last_update, k))
                .min()
                .map(|(_, k)| k);
            if let Some(v) = victim {
                self.ns.remove(&v);
                self.stats.evicted += 1;
                return Ok(());
            }
        }
        self.stats.refused += 1;
        Err(IngestError::NamespaceLimit)
    }

    /// Ingest one raw report.
    pub fn ingest(&mut self, r: &RawReport) -> Result<(), IngestError> {
        if r.hops.len() > MAX_HOPS {
            self.stats.too_many_hops += 1;
            return Err(IngestError::TooManyHops);
        }
        self.make_room(r.namespace)?;
        let mut stats = self.stats;
        let st = self.ns.entry(r.namespace).or_insert_with(NsState::new);
        stats.accepted += 1;
        st.last_update = r.sink_ts_ns;

        // Path (node ID sequence) and path changes.
        let n_nodes = r.hops.len() + 2;
        let same_path = st.path.len() == n_nodes
            && st.path[0] == r.source_node_id
            && st.path[n_nodes - 1] == r.sink_node_id
            && st.path[1..n_nodes - 1]
                .iter()
                .zip(&r.hops)
                .all(|(a, h)| *a == h.node_id);
        if !same_path {
            if !st.path.is_empty() {
                stats.path_changes += 1;
            }
            st.path.clear();
            st.path.push(r.source_node_id);
            st.path.extend(r.hops.iter().map(|h| h.node_id));
            st.path.push(r.sink_node_id);
            st.nodes.clear();
            st.nodes.resize(n_nodes, NodeCounters::default());
            st.links.clear();
            st.links.resize(n_nodes - 1, LinkState::default());
            for w in st.windows.iter_mut() {
                if w.cur.valid {
                    w.cur.reset_links(&st.path, &st.links);
                }
            }
        }

        // Node views: extended counters and reference times.
        st.views.clear();
        let mut stale = false;
        {
            let c = &mut st.nodes[0];
            let tx = r.src_tx_packets.map(|v| {
                let (x, s) = c.tx.update(v, CounterWidth::Bits32);
                stale |= s;
                x
            });
            st.views.push(NodeView {
                id: r.source_node_id,
                t: Some(r.src_ts_ns),
                tx,
                rx: None,
                rxb: None,
            });
        }
        for (k, h) in r.hops.iter().enumerate() {
            let c = &mut st.nodes[k + 1];
            let mut up = |u: &mut Unwrap, v: Option<u32>, w: CounterWidth| {
                v.map(|v| {
                    let (x, s) = u.update(v, w);
                    stale |= s;
                    x
                })
            };
            let tx = up(&mut c.tx, h.tx_packets, h.packet_counter_width);
            let rx = up(&mut c.rx, h.rx_packets, h.packet_counter_width);
            let rxb = up(&mut c.rxb, h.rx_bytes, CounterWidth::Bits32);
            st.views.push(NodeView {
                id: h.node_id,
                t: h.ref_ts(),
                tx,
                rx,
                rxb,
            });
        }
        {
            let c = &mut st.nodes[n_nodes - 1];
            let rx = match r.sink_rx_packets {
                Some(v) => {
                    let (x, s) = c.rx.update(v, CounterWidth::Bits32);
                    stale |= s;
                    x
                }
                None => {
                    c.synth_rx += 1;
                    c.synth_rx
                }
            };
            let rxb = match r.sink_rx_bytes {
                Some(v) => {
                    let (x, s) = c.rxb.update(v, CounterWidth::Bits32);
                    stale |= s;
                    x
                }
                None => {
                    c.synth_rxb += r.packet_len as u64;
                    c.synth_rxb
                }
            };
            st.views.push(NodeView {
                id: r.sink_node_id,
                t: Some(r.sink_ts_ns),
                tx: None,
                rx: Some(rx),
                rxb: Some(rxb),
            });
        }
        if stale {
            stats.stale_counters += 1;
        }

        // Roll windows on the sink clock.
        for (wi, w) in st.windows.iter_mut().enumerate() {
            let idx = r.sink_ts_ns / Window::ALL[wi].duration_ns();
            if !w.cur.valid || idx > w.cur.idx {
                std::mem::swap(&mut w.cur, &mut w.done);
                w.cur.reset(idx, &st.path, &st.links);
            }
        }

        // End to end: delay, jitter, sequence loss.
        let d = r.sink_ts_ns.wrapping_sub(r.src_ts_ns) as i64;
        let jit = st.prev_delay.map(|p| d.abs_diff(p));
        st.prev_delay = Some(d);
        if let Some(j) = jit {
            st.rfc3550 += (j as f64 - st.rfc3550) / 16.0;
        }
        let seq = st.seq.on_seq(r.seq, r.seq_width);
        let (recv, lost) = match seq {
            SeqOutcome::New { lost } => (1, lost),
            SeqOutcome::Filled => (1, 0),
            SeqOutcome::Duplicate => {
                stats.duplicate_seq += 1;
                (0, 0)
            }
            SeqOutcome::Late => {
                stats.late_seq += 1;
                (0, 0)
            }
        };
        // Negative delays (unsynchronised clocks) count in the lowest bucket; the percentile
        // is clamped to the window's min.
        let hv = d.max(0) as u64;
        for w in st.windows.iter_mut() {
            let b = &mut w.cur;
            b.reports += 1;
            b.delay_sum += d as i128;
            b.delay_n += 1;
            b.delay_min = b.delay_min.min(d);
            b.delay_max = b.delay_max.max(d);
            b.hist.saturating_record(hv);
            if let Some(j) = jit {
                b.jit_sum += j as u128;
                b.jit_n += 1;
                b.rfc3550 = Some(st.rfc3550);
            }
            b.seq_recv += recv;
            b.seq_lost += lost;
        }

        // Per hop pair.
        for l in 0..n_nodes - 1 {
            let (up, down) = (st.views[l], st.views[l + 1]);
            let ls = &mut st.links[l];
            let delay = match (up.t, down.t) {
                (Some(a), Some(b)) => Some(b.wrapping_sub(a) as i64),
                _ => None,
            };
            let ljit = match (delay, ls.prev_delay) {
                (Some(d), Some(p)) => Some(d.abs_diff(p)),
                _ => None,
            };
            if delay.is_some() {
                ls.prev_delay = delay;
            }
            let mut t = down.t.unwrap_or(r.sink_ts_ns);
            if let Some(prev) = ls.last_snap {
                t = t.max(prev.t);
            }
            let snap = LinkSnap {
                t,
                tx_up: up.tx,
                rx_down: down.rx,
                rxb_down: down.rxb,
            };
            ls.last_snap = Some(snap);
            for w in st.windows.iter_mut() {
                let a = &mut w.cur.links[l];
                debug_assert_eq!((a.from, a.to), (up.id, down.id));
                if a.start.is_none() {
                    a.start = Some(snap);
                }
                a.end = Some(snap);
                if let Some(d) = delay {
                    a.delay_sum += d as i128;
                    a.delay_n += 1;
                }
                if let Some(j) = ljit {
                    a.jit_sum += j as u128;
                    a.jit_n += 1;
                }
            }
        }

        // Retained samples (seed: the most recent 1000).
        if st.samples.len() == MAX_SAMPLES {
            st.samples.pop_front();
        }
        st.samples.push_back(Sample {
            seq: r.seq,
            src_ts_ns: r.src_ts_ns,
            sink_ts_ns: r.sink_ts_ns,
            packet_len: r.packet_len,
            hops: r.hops.len() as u8,
        });
        self.stats = stats;
        Ok(())
    }

    /// Report of the last complete window of length `window` before `now` (sink clock, ns):
    /// `[k*W, (k+1)*W)` with `k = now / W - 1`. `None` if the namespace is unknown or had no
    /// reports in that window.
    pub fn report(&self, ns: u32, window: Window, now: u64) -> Option<QosReport> {
        let st = self.ns.get(&ns)?;
        let wlen = window.duration_ns();
        let target = (now / wlen).checked_sub(1)?;
        let w = &st.windows[window.index()];
        let b = [&w.cur, &w.done]
            .into_iter()
            .find(|b| b.valid && b.idx == target && b.reports > 0)?;
        let per_hop: Vec<HopReport> = b
            .links
            .iter()
            .map(|a| HopReport {
                from_node: a.from,
                to_node: a.to,
                metrics: a.metrics(),
            })
            .collect();
        let metrics: Vec<LinkMetrics> = per_hop.iter().map(|h| h.metrics).collect();
        let loss_ratio_counters = match (b.links.first(), b.links.last()) {
            (Some(f), Some(l)) => match (f.start, f.end, l.start, l.end) {
                (Some(fs), Some(fe), Some(ls), Some(le)) => {
                    match (fs.tx_up, fe.tx_up, ls.rx_down, le.rx_down) {
                        (Some(t0), Some(t1), Some(r0), Some(r1)) if t1 > t0 => Some(
                            (1.0 - r1.saturating_sub(r0) as f64 / (t1 - t0) as f64).clamp(0.0, 1.0),
                        ),
                        _ => None,
                    }
                }
                _ => None,
            },
            _ => None,
        };
        let seq_total = b.seq_recv + b.seq_lost;
        Some(QosReport {
            namespace: ns,
            window,
            window_start_ns: target * wlen,
            window_end_ns: (target + 1) * wlen,
            reports: b.reports,
            throughput_bps: metrics.last().and_then(|m| m.throughput_bps),
            delay_ns: DelayStats {
                mean: b.delay_sum as f64 / b.delay_n as f64,
                p50: b.percentile(0.50),
                p99: b.percentile(0.99),
                min: b.delay_min,
                max: b.delay_max,
            },
            jitter_ns: (b.jit_n > 0).then(|| b.jit_sum as f64 / b.jit_n as f64),
            jitter_rfc3550_ns: b.rfc3550,
            loss_ratio: (seq_total > 0).then(|| b.seq_lost as f64 / seq_total as f64),
            loss_ratio_counters,
            composed: compose(&metrics),
            per_hop,
        })
    }
}

#[cfg(test)]
mod tests;
