//! Kestrel per-queue sketch telemetry in the workers (Kestrel: sketch-based telemetry for
//! QoS anomaly detection in 5G user planes, sections III-V): per direction and egress queue
//! a Count-Min sketch of enriched buckets keyed by (TEID, QFI), updated at dequeue by a
//! post-dequeue tap, exchanged per window with the control side by double buffering over
//! SPSC rings; per-QFI 3GPP-PM counters in the same bank; Delta-SMP postcards beside it.
//! The export and the collector are on the control side (`peregrine::kestrel`); docs in
//! docs/kestrel.md.

pub mod bank;
pub mod edges;
pub mod kernel;
pub mod layout;
pub mod postcard;
pub mod tap;
pub mod window;

pub use bank::{Bank, Pm, Sample, Sketcher, CHUNK, QFIS};
pub use edges::{parse_edges, EdgeError, EdgeSet, EdgeTable, QidEdges, FINE_BINS};
pub use layout::{
    Bucket, HotBucket, IndexHash, Layout, LayoutError, BINS, DIRS, EDGES, MAX_QIDS, MAX_WINDOW_NS,
    SPILL_AT,
};
pub use postcard::{Deltas, Postcard};
pub use tap::{tap_pair, KestrelTap, TapEnds, TapStats};
pub use window::{Aggregator, SumBucket, Window};

/// The cache-line read hint the burst update uses (for benchmarks that give a plain sketch
/// the same two-pass prefetch).
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    crate::upf::prefetch::prefetch(r);
}

#[cfg(test)]
mod tests;
