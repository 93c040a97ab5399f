//! The QoS monitor's inputs, configuration and reports (plain data), and the path composition
//! of the paper's equations (1)-(3).

use super::{DEFAULT_MAX_NAMESPACES, MAX_HOPS};
use peregrine_int::report::IntReport;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Width of a wrapping counter or sequence number (seed Table I: HbH packet counters are 16-bit,
/// E2E counters and byte counters 32-bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum CounterWidth {
    /// 16-bit counter, wraps after 65535.
    Bits16,
    /// 32-bit counter, wraps after 2^32 - 1.
    #[default]
    Bits32,
}

impl CounterWidth {
    pub(super) fn mask(self) -> u32 {
        match self {
            CounterWidth::Bits16 => 0xffff,
            CounterWidth::Bits32 => u32::MAX,
        }
    }
    pub(super) fn half(self) -> u32 {
        self.mask() / 2 + 1
    }
    pub(super) fn range(self) -> u64 {
        self.mask() as u64 + 1
    }
}

/// Averaging window (seed III-F: "1 second, 10 seconds, 1 minute").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Window {
    /// 1 s (the seed's default).
    OneSecond,
    /// 10 s.
    TenSeconds,
    /// 60 s.
    OneMinute,
}

impl Window {
    /// All windows, shortest first.
    pub const ALL: [Window; 3] = [Window::OneSecond, Window::TenSeconds, Window::OneMinute];

    /// Window length in nanoseconds.
    pub fn duration_ns(self) -> u64 {
        match self {
            Window::OneSecond => 1_000_000_000,
            Window::TenSeconds => 10_000_000_000,
            Window::OneMinute => 60_000_000_000,
        }
    }

    pub(super) fn index(self) -> usize {
        match self {
            Window::OneSecond => 0,
            Window::TenSeconds => 1,
            Window::OneMinute => 2,
        }
    }
}

/// Per-hop entry of a raw report (seed Fig. 2 HbH entry data; Table I bits 16-18).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct HopEntry {
    /// Node ID of the hop (seed III-A).
    pub node_id: u32,
    /// Ingress timestamp, ns (the seed's single HbH timestamp maps here).
    pub ingress_ts_ns: Option<u64>,
    /// Egress timestamp, ns.
    pub egress_ts_ns: Option<u64>,
    /// Width of `rx_packets` / `tx_packets` (16-bit in the seed).
    pub packet_counter_width: CounterWidth,
    /// Packets received by the hop for this namespace (wrapping).
    pub rx_packets: Option<u32>,
    /// Packets transmitted by the hop for this namespace (wrapping).
    pub tx_packets: Option<u32>,
    /// Bytes received (32-bit, wrapping).
    pub rx_bytes: Option<u32>,
    /// Bytes transmitted (32-bit, wrapping). Carried, not used by the metrics.
    pub tx_bytes: Option<u32>,
}

impl HopEntry {
    pub(super) fn ref_ts(&self) -> Option<u64> {
        self.ingress_ts_ns.or(self.egress_ts_ns)
    }
}

/// One raw INT report as produced by the INT sink for one packet (seed III-E "raw report").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RawReport {
    /// Namespace (seed III-A: unique identifier of the INT rule / monitored flow).
    pub namespace: u32,
    /// Sequence number of the INT packet (seed Table I bit 0, E2E INT counter).
    pub seq: u32,
    /// Width of `seq`.
    pub seq_width: CounterWidth,
    /// Source (E2E) timestamp, ns (Table I bit 1).
    pub src_ts_ns: u64,
    /// Sink receive timestamp, ns. Drives the windows.
    pub sink_ts_ns: u64,
    /// Length of the packet in bytes as counted by the byte counters.
    pub packet_len: u32,
    /// Node ID of the source (0 allowed, seed III-A).
    pub source_node_id: u32,
    /// Node ID of the sink.
    pub sink_node_id: u32,
    /// Source TX packet counter (Table I bit 2, 32-bit).
    pub src_tx_packets: Option<u32>,
    /// Source TX byte counter (Table I bit 3, 32-bit). Carried, not used by the metrics.
    pub src_tx_bytes: Option<u32>,
    /// Sink RX packet counter (32-bit); if absent the monitor counts reports.
    pub sink_rx_packets: Option<u32>,
    /// Sink RX byte counter (32-bit); if absent the monitor sums `packet_len`.
    pub sink_rx_bytes: Option<u32>,
    /// Intermediate hops in path order (source side first).
    pub hops: Vec<HopEntry>,
}

impl RawReport {
    /// A report with no hops and no counters; fill the rest with struct update syntax.
    pub fn new(namespace: u32, seq: u32, src_ts_ns: u64, sink_ts_ns: u64, packet_len: u32) -> Self {
        RawReport {
            namespace,
            seq,
            src_ts_ns,
            sink_ts_ns,
            packet_len,
            ..Default::default()
        }
    }
}

/// Metrics of one link (hop pair) or of the end-to-end path over one window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct LinkMetrics {
    /// Throughput in bit/s (needs two reports).
    pub throughput_bps: Option<f64>,
    /// Mean one-way delay, ns.
    pub delay_ns: Option<f64>,
    /// Mean |difference of sequential delays|, ns (needs two reports).
    pub jitter_ns: Option<f64>,
    /// Packet loss ratio in [0, 1].
    pub loss_ratio: Option<f64>,
}

/// Metrics of a path composed from its links (seed Eqs. (1)-(3)).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct PathMetrics {
    /// Eq. (1): min over links.
    pub throughput_bps: Option<f64>,
    /// Eq. (2): sum over links.
    pub delay_ns: Option<f64>,
    /// Eq. (2) (delay and jitter are additive): sum over links.
    pub jitter_ns: Option<f64>,
    /// Eq. (3): `1 - Π(1 - l_i)`.
    pub loss_ratio: Option<f64>,
}

/// Compose link metrics along a path (seed section IV-B, Eqs. (1)-(3)). A metric is `None` if the
/// slice is empty or any link lacks it.
pub fn compose(links: &[LinkMetrics]) -> PathMetrics {
    if links.is_empty() {
        return PathMetrics::default();
    }
    let all = |f: fn(&LinkMetrics) -> Option<f64>| -> Option<Vec<f64>> {
        links.iter().map(f).collect::<Option<Vec<f64>>>()
    };
    PathMetrics {
        throughput_bps: all(|l| l.throughput_bps)
            .map(|v| v.into_iter().fold(f64::INFINITY, f64::min)),
        delay_ns: all(|l| l.delay_ns).map(|v| v.into_iter().sum()),
        jitter_ns: all(|l| l.jitter_ns).map(|v| v.into_iter().sum()),
        loss_ratio: all(|l| l.loss_ratio)
            .map(|v| 1.0 - v.into_iter().map(|l| 1.0 - l).product::<f64>()),
    }
}

/// One-way delay statistics over a window, ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DelayStats {
    /// Mean (exact).
    pub mean: f64,
    /// Median (histogram, clamped to [min, max]).
    pub p50: i64,
    /// 99th percentile (histogram, clamped to [min, max]).
    pub p99: i64,
    /// Minimum.
    pub min: i64,
    /// Maximum.
    pub max: i64,
}

/// Metrics of one hop pair in a [`QosReport`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HopReport {
    /// Upstream node (source node ID for the first link).
    pub from_node: u32,
    /// Downstream node (sink node ID for the last link).
    pub to_node: u32,
    /// Metrics of the link.
    pub metrics: LinkMetrics,
}

/// Consolidated QoS report for one namespace and window (seed III-F).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QosReport {
    /// Namespace.
    pub namespace: u32,
    /// Window length.
    pub window: Window,
    /// Window start (inclusive), sink clock ns.
    pub window_start_ns: u64,
    /// Window end (exclusive), sink clock ns.
    pub window_end_ns: u64,
    /// Raw reports that fell into the window.
    pub reports: u64,
    /// End-to-end throughput, bit/s (sink RX bytes, Algorithm 1).
    pub throughput_bps: Option<f64>,
    /// End-to-end one-way delay.
    pub delay_ns: DelayStats,
    /// End-to-end jitter (mean |ΔD|, seed III-F), ns.
    pub jitter_ns: Option<f64>,
    /// RFC 3550 smoothed jitter at the window's last report, ns.
    pub jitter_rfc3550_ns: Option<f64>,
    /// End-to-end loss ratio from sequence-number gaps.
    pub loss_ratio: Option<f64>,
    /// End-to-end loss ratio from source TX / sink RX packet counters.
    pub loss_ratio_counters: Option<f64>,
    /// Per hop pair metrics, source to sink.
    pub per_hop: Vec<HopReport>,
    /// The per-hop metrics composed with [`compose`] (compare with the end-to-end values).
    pub composed: PathMetrics,
}

/// What to do with a new namespace once [`QosConfig::max_namespaces`] are monitored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CapPolicy {
    /// Refuse the report (counted in [`QosStats::refused`]).
    #[default]
    Refuse,
    /// Evict the namespace with the oldest last sink timestamp (ties: lowest namespace),
    /// counted in [`QosStats::evicted`].
    EvictLeastRecent,
}

/// Monitor configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QosConfig {
    /// Hard cap on namespaces.
    pub max_namespaces: usize,
    /// Policy at the cap.
    pub cap_policy: CapPolicy,
}

impl Default for QosConfig {
    fn default() -> Self {
        QosConfig {
            max_namespaces: DEFAULT_MAX_NAMESPACES,
            cap_policy: CapPolicy::Refuse,
        }
    }
}

/// Monitor-wide counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QosStats {
    /// Reports accepted.
    pub accepted: u64,
    /// Reports refused because the namespace cap was reached.
    pub refused: u64,
    /// Namespaces evicted to make room.
    pub evicted: u64,
    /// Reports rejected because they carried more than [`MAX_HOPS`] hops.
    pub too_many_hops: u64,
    /// Path changes (node ID sequence differed from the previous report).
    pub path_changes: u64,
    /// Duplicate sequence numbers.
    pub duplicate_seq: u64,
    /// Sequence numbers older than the reordering window (already declared lost).
    pub late_seq: u64,
    /// Counter values older than the last seen one (reordered packets), ignored.
    pub stale_counters: u64,
}

/// Why a report was not ingested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IngestError {
    /// The namespace cap was reached and the policy is [`CapPolicy::Refuse`].
    NamespaceLimit,
    /// The report carried more than [`MAX_HOPS`] hops.
    TooManyHops,
}

impl fmt::Display for IngestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IngestError::NamespaceLimit => write!(f, "namespace limit reached"),
            IngestError::TooManyHops => write!(f, "more than {MAX_HOPS} hops"),
        }
    }
}

impl std::error::Error for IngestError {}

/// A compact retained sample (one per raw report; the last
/// [`MAX_SAMPLES`](super::MAX_SAMPLES) are kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// Sequence number.
    pub seq: u32,
    /// Source timestamp, ns.
    pub src_ts_ns: u64,
    /// Sink timestamp, ns.
    pub sink_ts_ns: u64,
    /// Packet length.
    pub packet_len: u32,
    /// Number of hops the report carried.
    pub hops: u8,
}

/// The QoS monitor's input from the INT sink's fixed-size report (allocates the hop list, so
/// it runs on the control side).
impl From<&IntReport> for RawReport {
    fn from(r: &IntReport) -> RawReport {
        RawReport {
            namespace: r.ns_id as u32,
            seq: r.e2e.int_counter.unwrap_or(0),
            seq_width: CounterWidth::Bits32,
            src_ts_ns: r.e2e.timestamp_ns.unwrap_or(0),
            sink_ts_ns: r.arrival_ns,
            packet_len: r.packet_len,
            source_node_id: 0,
            sink_node_id: r.sink_node_id,
            src_tx_packets: r.e2e.tx_packets,
            src_tx_bytes: r.e2e.tx_bytes,
            sink_rx_packets: Some(r.sink_rx_packets),
            sink_rx_bytes: Some(r.sink_rx_bytes),
            hops: r
                .hops()
                .iter()
                .map(|h| HopEntry {
                    node_id: h.node_id,
                    ingress_ts_ns: h.timestamp_ns,
                    egress_ts_ns: None,
                    packet_counter_width: CounterWidth::Bits16,
                    rx_packets: h.rx_packets.map(u32::from),
                    tx_packets: h.tx_packets.map(u32::from),
                    rx_bytes: h.rx_bytes,
                    tx_bytes: h.tx_bytes,
                })
                .collect(),
        }
    }
}
