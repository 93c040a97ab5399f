//! The Delta-SMP baseline (Kestrel Table II; selective postcards): a per-packet record
//! exported only when a watched metric of its flow moved by more than delta since the flow's
//! last exported postcard. delta = 0 for every metric exports every packet (full postcards).
//!
//! Per-flow state is a fixed direct-mapped table (no allocation per packet): a slot holds the
//! key and the last exported values; a flow that finds its slot taken by another key takes it
//! over and exports (it has no state to compare with). Postcards go to the control side
//! through an SPSC ring; when it is full the postcard is counted as dropped.

use super::layout::mix;
use rtrb::{Consumer, Producer, RingBuffer};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One postcard (32 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Postcard {
    /// Dequeue time, ns on the worker clock.
    pub t_ns: u64,
    pub teid: u32,
    pub sojourn_ns: u32,
    /// Gap since the flow's previous packet (any packet, exported or not); 0 for the first.
    pub iat_ns: u32,
    /// Inner IP length.
    pub len: u32,
    pub qfi: u8,
    pub qid: u8,
    pub colour: u8,
    /// 0 uplink, 1 downlink.
    pub dir: u8,
}

/// Deltas per watched metric, ns; a colour change always exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deltas {
    pub sojourn_ns: u32,
    pub iat_ns: u32,
}

impl Deltas {
    /// Full postcards: every packet.
    pub const FULL: Deltas = Deltas {
        sojourn_ns: 0,
        iat_ns: 0,
    };
    pub fn full(&self) -> bool {
        *self == Deltas::FULL
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Flow {
    /// `teid << 8 | qfi` with bit 40 + dir set: 0 = empty slot.
    key: u64,
    last_t: u64,
    sojourn: u32,
    iat: u32,
    colour: u8,
}

/// Postcard counters, read by the control side.
#[derive(Debug, Default)]
pub struct PostcardStats {
    pub exported: AtomicU64,
    pub dropped: AtomicU64,
    pub suppressed: AtomicU64,
}

/// The worker's Delta-SMP state.
#[derive(Debug)]
pub struct Smp {
    deltas: Deltas,
    flows: Vec<Flow>,
    mask: usize,
    out: Producer<Postcard>,
    stats: Arc<PostcardStats>,
    exported: u64,
    dropped: u64,
    suppressed: u64,
}

/// Flow slots per tap.
pub const FLOW_SLOTS: usize = 4096;
/// Postcards the ring holds between two control ticks.
pub const RING: usize = 1 << 16;

/// The worker state and the control side's end (allocates: control thread).
pub fn smp_pair(deltas: Deltas) -> (Smp, Consumer<Postcard>, Arc<PostcardStats>) {
    let (tx, rx) = RingBuffer::new(RING);
    let stats = Arc::new(PostcardStats::default());
    let smp = Smp {
        deltas,
        flows: vec![Flow::default(); FLOW_SLOTS],
        mask: FLOW_SLOTS - 1,
        out: tx,
        stats: stats.clone(),
        exported: 0,
        dropped: 0,
        suppressed: 0,
    };
    (smp, rx, stats)
}

impl Smp {
    /// One packet: update its flow and export a postcard if a metric moved by more than its
    /// delta (or always, for full postcards).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        dir: u8,
        qid: u8,
        teid: u32,
        qfi: u8,
        len: u32,
        colour: u8,
        sojourn_ns: u32,
        t_ns: u64,
    ) {
        let key = (u64::from(teid) << 8 | u64::from(qfi)) | 1 << (40 + u32::from(dir & 1));
        let slot = (mix(key) as usize) & self.mask;
        let f = &mut self.flows[slot];
        let known = f.key == key;
        let iat = if known {
            u32::try_from(t_ns.saturating_sub(f.last_t)).unwrap_or(u32::MAX)
        } else {
            0
        };
        let moved = !known
            || self.deltas.full()
            || sojourn_ns.abs_diff(f.sojourn) > self.deltas.sojourn_ns
            || iat.abs_diff(f.iat) > self.deltas.iat_ns
            || colour != f.colour;
        f.key = key;
        f.last_t = t_ns;
        if !moved {
            self.suppressed += 1;
            return;
        }
        f.sojourn = sojourn_ns;
        f.iat = iat;
        f.colour = colour;
        let p = Postcard {
            t_ns,
            teid,
            sojourn_ns,
            iat_ns: iat,
            len,
            qfi,
            qid,
            colour,
            dir,
        };
        if self.out.push(p).is_ok() {
            self.exported += 1;
        } else {
            self.dropped += 1;
        }
    }

    /// Publish the counters (once per burst: relaxed stores, no read-modify-write).
    #[inline]
    pub fn publish(&self) {
        self.stats.exported.store(self.exported, Ordering::Relaxed);
        self.stats.dropped.store(self.dropped, Ordering::Relaxed);
        self.stats
            .suppressed
            .store(self.suppressed, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_postcards_export_every_packet() {
        let (mut s, mut rx, _) = smp_pair(Deltas::FULL);
        for t in 0..100u64 {
            s.record(1, 7, 5, 9, 100, 0, 1000, t * 10);
        }
        assert_eq!(rx.slots(), 100);
        let a = rx.pop().unwrap();
        let b = rx.pop().unwrap();
        assert_eq!((a.iat_ns, b.iat_ns, b.t_ns), (0, 10, 10));
    }

    #[test]
    fn deltas_suppress_small_moves_per_flow() {
        let (mut s, mut rx, st) = smp_pair(Deltas {
            sojourn_ns: 1000,
            iat_ns: 1_000_000,
        });
        // Sojourn 0, 500, 900 (within 1000 of the exported 0), 1500 (moved), 1600, 2600.
        for (i, soj) in [0u32, 500, 900, 1500, 1600, 2600].into_iter().enumerate() {
            s.record(0, 1, 9, 1, 60, 0, soj, i as u64 * 1000);
        }
        // Another flow is independent; a colour change always exports.
        s.record(0, 1, 10, 1, 60, 0, 0, 10_000);
        s.record(0, 1, 10, 1, 60, 2, 0, 11_000);
        s.publish();
        let got: Vec<(u32, u32)> = std::iter::from_fn(|| rx.pop().ok())
            .map(|p| (p.teid, p.sojourn_ns))
            .collect();
        assert_eq!(got, vec![(9, 0), (9, 1500), (9, 2600), (10, 0), (10, 0)]);
        assert_eq!(st.suppressed.load(Ordering::Relaxed), 3);
        assert_eq!(st.exported.load(Ordering::Relaxed), 5);
    }

    #[test]
    fn a_full_ring_counts_drops() {
        let (mut s, _rx, st) = smp_pair(Deltas::FULL);
        for t in 0..(RING as u64 + 10) {
            s.record(1, 0, 1, 1, 60, 0, 0, t);
        }
        s.publish();
        assert_eq!(st.dropped.load(Ordering::Relaxed), 10);
    }
}
