//! Per-worker counters: plain integers owned by the worker on the packet path, published
//! to atomics the control thread reads (single writer, so relaxed stores suffice).
//!
//! Besides packet and drop counts, each worker publishes per-port, per-QID egress queue
//! counters (enqueued, dequeued, tail-dropped, depth, sojourn sum/count/max and a histogram)
//! for every port that has an egress scheduler.

use crate::io::PortId;
use crate::qos::NUM_QUEUES;
use std::sync::atomic::{AtomicU64, Ordering};

/// The worker's own counters (no atomics, no sharing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub rx_pkts: Vec<u64>,
    pub tx_pkts: Vec<u64>,
    pub drops: Vec<u64>,
    pub to_control: u64,
    /// Frames the control side injected that this worker sent (see `worker::Injector`).
    pub injected: u64,
    pub bursts: u64,
    pub idle_polls: u64,
    /// Packets this worker handed to another worker's ring (flow steering).
    pub handed_off: u64,
    /// Packets this worker took from other workers' rings and processed.
    pub handoff_received: u64,
    /// One entry per port with an egress scheduler, in port order.
    pub egress: Vec<EgressCounters>,
}

impl Counters {
    pub fn new(ports: usize, reasons: usize) -> Counters {
        Counters {
            rx_pkts: vec![0; ports],
            tx_pkts: vec![0; ports],
            drops: vec![0; reasons],
            ..Default::default()
        }
    }

    /// Add `other` into `self` (aggregation on the control thread).
    pub fn add(&mut self, other: &Counters) {
        fn add_vec(a: &mut Vec<u64>, b: &[u64]) {
            if a.len() < b.len() {
                a.resize(b.len(), 0);
            }
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
        add_vec(&mut self.rx_pkts, &other.rx_pkts);
        add_vec(&mut self.tx_pkts, &other.tx_pkts);
        add_vec(&mut self.drops, &other.drops);
        self.to_control += other.to_control;
        self.injected += other.injected;
        self.bursts += other.bursts;
        self.idle_polls += other.idle_polls;
        self.handed_off += other.handed_off;
        self.handoff_received += other.handoff_received;
        for e in &other.egress {
            match self.egress.iter_mut().find(|x| x.port == e.port) {
                Some(x) => {
                    for (a, b) in x.queues.iter_mut().zip(&e.queues) {
                        a.add(b);
                    }
                }
                None => self.egress.push(e.clone()),
            }
        }
    }

    /// The egress counters of `port`, if it has a scheduler.
    pub fn egress_of(&self, port: PortId) -> Option<&EgressCounters> {
        self.egress.iter().find(|e| e.port == port)
    }

    pub fn total_rx(&self) -> u64 {
        self.rx_pkts.iter().sum()
    }

    pub fn total_tx(&self) -> u64 {
        self.tx_pkts.iter().sum()
    }

    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }
}

/// The published copy of one worker's [`Counters`].
#[derive(Debug)]
pub struct SharedCounters {
    rx_pkts: Vec<AtomicU64>,
    tx_pkts: Vec<AtomicU64>,
    drops: Vec<AtomicU64>,
    to_control: AtomicU64,
    injected: AtomicU64,
    bursts: AtomicU64,
    idle_polls: AtomicU64,
    handed_off: AtomicU64,
    handoff_received: AtomicU64,
    /// Scheduled ports, and their [`QidCounters`] flattened: port-major, then QID, then word.
    egress_ports: Vec<PortId>,
    egress: Vec<AtomicU64>,
}

fn atomics(n: usize) -> Vec<AtomicU64> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

impl SharedCounters {
    pub fn new(ports: usize, reasons: usize) -> SharedCounters {
        Self::with_egress(ports, reasons, &[])
    }

    /// Also holds the egress counters of `egress_ports` (the ports with a scheduler).
    pub fn with_egress(ports: usize, reasons: usize, egress_ports: &[PortId]) -> SharedCounters {
        SharedCounters {
            egress_ports: egress_ports.to_vec(),
            egress: atomics(egress_ports.len() * NUM_QUEUES * QidCounters::WORDS),
            rx_pkts: atomics(ports),
            tx_pkts: atomics(ports),
            drops: atomics(reasons),
            to_control: AtomicU64::new(0),
            injected: AtomicU64::new(0),
            bursts: AtomicU64::new(0),
            idle_polls: AtomicU64::new(0),
            handed_off: AtomicU64::new(0),
            handoff_received: AtomicU64::new(0),
        }
    }

    /// Called by the owning worker only.
    pub fn store(&self, c: &Counters) {
        fn st(a: &[AtomicU64], v: &[u64]) {
            for (x, y) in a.iter().zip(v) {
                x.store(*y, Ordering::Relaxed);
            }
        }
        st(&self.rx_pkts, &c.rx_pkts);
        st(&self.tx_pkts, &c.tx_pkts);
        st(&self.drops, &c.drops);
        self.to_control.store(c.to_control, Ordering::Relaxed);
        self.injected.store(c.injected, Ordering::Relaxed);
        self.bursts.store(c.bursts, Ordering::Relaxed);
        self.idle_polls.store(c.idle_polls, Ordering::Relaxed);
        self.handed_off.store(c.handed_off, Ordering::Relaxed);
        self.handoff_received
            .store(c.handoff_received, Ordering::Relaxed);
        let words = c
            .egress
            .iter()
            .flat_map(|e| e.queues.iter())
            .flat_map(|q| q.to_words());
        for (x, y) in self.egress.iter().zip(words) {
            x.store(y, Ordering::Relaxed);
        }
    }

    pub fn load(&self) -> Counters {
        let ld = |a: &[AtomicU64]| a.iter().map(|x| x.load(Ordering::Relaxed)).collect();
        Counters {
            rx_pkts: ld(&self.rx_pkts),
            tx_pkts: ld(&self.tx_pkts),
            drops: ld(&self.drops),
            to_control: self.to_control.load(Ordering::Relaxed),
            injected: self.injected.load(Ordering::Relaxed),
            bursts: self.bursts.load(Ordering::Relaxed),
            idle_polls: self.idle_polls.load(Ordering::Relaxed),
            handed_off: self.handed_off.load(Ordering::Relaxed),
            handoff_received: self.handoff_received.load(Ordering::Relaxed),
            egress: self
                .egress_ports
                .iter()
                .zip(self.egress.chunks(NUM_QUEUES * QidCounters::WORDS))
                .map(|(&port, chunk)| {
                    let mut e = EgressCounters::new(port);
                    for (q, w) in e.queues.iter_mut().zip(chunk.chunks(QidCounters::WORDS)) {
                        let mut words = [0u64; QidCounters::WORDS];
                        for (x, a) in words.iter_mut().zip(w) {
                            *x = a.load(Ordering::Relaxed);
                        }
                        *q = QidCounters::from_words(&words);
                    }
                    e
                })
                .collect(),
        }
    }
}

/// Sojourn-time histogram bins per egress queue.
pub const SOJOURN_BINS: usize = 8;

/// Exclusive upper edges of sojourn bins 0..=6 in microseconds (powers of 4, so eight bins
/// span 1 µs to 4 ms); bin 7 holds everything from 4096 µs up.
pub const SOJOURN_BIN_EDGES_US: [u64; SOJOURN_BINS - 1] = [1, 4, 16, 64, 256, 1024, 4096];

/// The histogram bin of a sojourn time: `ceil(bits(us) / 2)`, capped at the last bin,
/// which reproduces [`SOJOURN_BIN_EDGES_US`] without a search.
#[inline]
pub fn sojourn_bin(sojourn_ns: u64) -> usize {
    let us = sojourn_ns / 1000;
    let bits = (u64::BITS - us.leading_zeros()) as usize;
    bits.div_ceil(2).min(SOJOURN_BINS - 1)
}

/// One egress queue's counters on one port (cumulative since start, except the depths).
///
/// A control core computes a per-window mean delay from two readings a window apart:
/// `(sum1 - sum0) / (count1 - count0)` ([`QidCounters::since`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QidCounters {
    pub enq_pkts: u64,
    pub enq_bytes: u64,
    pub deq_pkts: u64,
    pub deq_bytes: u64,
    /// Tail drops (queue full); also counted under `egress_queue_full`.
    pub drop_pkts: u64,
    pub drop_bytes: u64,
    /// Packets and bytes queued at the last publish.
    pub depth_pkts: u64,
    pub depth_bytes: u64,
    /// Sum, count and maximum of the sojourn times of dequeued packets.
    pub sojourn_sum_ns: u64,
    pub sojourn_count: u64,
    pub sojourn_max_ns: u64,
    /// Dequeued packets per sojourn bin ([`SOJOURN_BIN_EDGES_US`]).
    pub sojourn_hist: [u64; SOJOURN_BINS],
}

impl QidCounters {
    const WORDS: usize = 11 + SOJOURN_BINS;

    /// Account one dequeued packet's time in the queue.
    #[inline]
    pub fn record_sojourn(&mut self, ns: u64) {
        self.sojourn_sum_ns = self.sojourn_sum_ns.wrapping_add(ns);
        self.sojourn_count += 1;
        self.sojourn_max_ns = self.sojourn_max_ns.max(ns);
        self.sojourn_hist[sojourn_bin(ns)] += 1;
    }

    /// Mean sojourn time in ns, if any packet was dequeued.
    pub fn mean_sojourn_ns(&self) -> Option<u64> {
        (self.sojourn_count > 0).then(|| self.sojourn_sum_ns / self.sojourn_count)
    }

    /// What happened between `earlier` and `self` (a window): cumulative fields are
    /// differences, depths and the maximum are `self`'s (the maximum is since start).
    pub fn since(&self, earlier: &QidCounters) -> QidCounters {
        let mut w = self.to_words();
        for (i, (x, y)) in w.iter_mut().zip(earlier.to_words()).enumerate() {
            if !Self::is_level(i) {
                *x = x.wrapping_sub(y);
            }
        }
        QidCounters::from_words(&w)
    }

    /// Add `o` (another worker's): sums, except the maximum.
    pub fn add(&mut self, o: &QidCounters) {
        let max = self.sojourn_max_ns.max(o.sojourn_max_ns);
        let mut w = self.to_words();
        for (x, y) in w.iter_mut().zip(o.to_words()) {
            *x = x.wrapping_add(y);
        }
        *self = QidCounters::from_words(&w);
        self.sojourn_max_ns = max;
    }

    /// Word index of a level (not a running total): the depths and the maximum.
    fn is_level(i: usize) -> bool {
        matches!(i, 6 | 7 | 10)
    }

    fn to_words(self) -> [u64; Self::WORDS] {
        let mut w = [0u64; Self::WORDS];
        w[..11].copy_from_slice(&[
            self.enq_pkts,
            self.enq_bytes,
            self.deq_pkts,
            self.deq_bytes,
            self.drop_pkts,
            self.drop_bytes,
            self.depth_pkts,
            self.depth_bytes,
            self.sojourn_sum_ns,
            self.sojourn_count,
            self.sojourn_max_ns,
        ]);
        w[11..].copy_from_slice(&self.sojourn_hist);
        w
    }

    fn from_words(w: &[u64; Self::WORDS]) -> QidCounters {
        let mut sojourn_hist = [0u64; SOJOURN_BINS];
        sojourn_hist.copy_from_slice(&w[11..]);
        QidCounters {
            enq_pkts: w[0],
            enq_bytes: w[1],
            deq_pkts: w[2],
            deq_bytes: w[3],
            drop_pkts: w[4],
            drop_bytes: w[5],
            depth_pkts: w[6],
            depth_bytes: w[7],
            sojourn_sum_ns: w[8],
            sojourn_count: w[9],
            sojourn_max_ns: w[10],
            sojourn_hist,
        }
    }
}

/// The egress queues of one scheduled port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressCounters {
    pub port: PortId,
    pub queues: [QidCounters; NUM_QUEUES],
}

impl EgressCounters {
    pub fn new(port: PortId) -> EgressCounters {
        EgressCounters {
            port,
            queues: [QidCounters::default(); NUM_QUEUES],
        }
    }

    /// Every queue summed.
    pub fn total(&self) -> QidCounters {
        let mut t = QidCounters::default();
        for q in &self.queues {
            t.add(q);
        }
        t
    }
}

impl std::fmt::Display for EgressCounters {
    /// One line per queue that saw traffic: the table the daemon prints.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "port {} egress: qid enq_pkts deq_pkts drop_pkts depth mean_sojourn_us max_sojourn_us hist",
            self.port
        )?;
        for (qid, q) in self.queues.iter().enumerate() {
            if q.enq_pkts == 0 && q.drop_pkts == 0 {
                continue;
            }
            writeln!(
                f,
                "  {qid} {} {} {} {} {:.1} {:.1} {:?}",
                q.enq_pkts,
                q.deq_pkts,
                q.drop_pkts,
                q.depth_pkts,
                q.mean_sojourn_ns().unwrap_or(0) as f64 / 1e3,
                q.sojourn_max_ns as f64 / 1e3,
                q.sojourn_hist
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sojourn_bins_follow_the_edges() {
        assert_eq!(sojourn_bin(0), 0);
        assert_eq!(sojourn_bin(999), 0);
        for (i, &edge) in SOJOURN_BIN_EDGES_US.iter().enumerate() {
            assert_eq!(sojourn_bin(edge * 1000 - 1), i, "just below {edge} us");
            assert_eq!(sojourn_bin(edge * 1000), i + 1, "at {edge} us");
        }
        assert_eq!(sojourn_bin(u64::MAX), SOJOURN_BINS - 1);
    }

    #[test]
    fn qid_counters_window_and_sum() {
        let mut a = QidCounters {
            enq_pkts: 10,
            depth_pkts: 4,
            ..QidCounters::default()
        };
        a.record_sojourn(2_000);
        let before = a;
        a.enq_pkts = 15;
        a.record_sojourn(6_000);
        a.depth_pkts = 3;
        let w = a.since(&before);
        assert_eq!(w.enq_pkts, 5);
        assert_eq!(w.sojourn_count, 1);
        assert_eq!(w.mean_sojourn_ns(), Some(6_000));
        assert_eq!(w.depth_pkts, 3, "a level, not a difference");
        assert_eq!(w.sojourn_hist[sojourn_bin(6_000)], 1);
        assert_eq!(w.sojourn_hist.iter().sum::<u64>(), 1);
        let mut s = a;
        s.add(&before);
        assert_eq!(s.enq_pkts, 25);
        assert_eq!(s.sojourn_max_ns, 6_000);
        assert_eq!(s.depth_pkts, 7);
    }

    #[test]
    fn shared_counters_round_trip_egress() {
        let mut c = Counters::new(3, 5);
        c.egress = vec![EgressCounters::new(0), EgressCounters::new(2)];
        c.egress[1].queues[6].enq_pkts = 77;
        c.egress[1].queues[6].record_sojourn(123_456);
        c.egress[0].queues[0].drop_bytes = 9;
        let sh = SharedCounters::with_egress(3, 5, &[0, 2]);
        sh.store(&c);
        assert_eq!(sh.load(), c);
        let mut t = Counters::new(3, 5);
        t.add(&c);
        t.add(&c);
        assert_eq!(t.egress_of(2).unwrap().queues[6].enq_pkts, 154);
        assert_eq!(t.egress_of(2).unwrap().total().sojourn_count, 2);
        assert!(t.egress_of(1).is_none());
    }
}
