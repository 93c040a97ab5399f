//! Per-worker counters: plain integers owned by the worker on the packet path, published
//! to atomics the control thread reads (single writer, so relaxed stores suffice).

use std::sync::atomic::{AtomicU64, Ordering};

/// The worker's own counters (no atomics, no sharing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub rx_pkts: Vec<u64>,
    pub tx_pkts: Vec<u64>,
    pub drops: Vec<u64>,
    pub to_control: u64,
    pub bursts: u64,
    pub idle_polls: u64,
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
        self.bursts += other.bursts;
        self.idle_polls += other.idle_polls;
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
    bursts: AtomicU64,
    idle_polls: AtomicU64,
}

fn atomics(n: usize) -> Vec<AtomicU64> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

impl SharedCounters {
    pub fn new(ports: usize, reasons: usize) -> SharedCounters {
        SharedCounters {
            rx_pkts: atomics(ports),
            tx_pkts: atomics(ports),
            drops: atomics(reasons),
            to_control: AtomicU64::new(0),
            bursts: AtomicU64::new(0),
            idle_polls: AtomicU64::new(0),
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
        self.bursts.store(c.bursts, Ordering::Relaxed);
        self.idle_polls.store(c.idle_polls, Ordering::Relaxed);
    }

    pub fn load(&self) -> Counters {
        let ld = |a: &[AtomicU64]| a.iter().map(|x| x.load(Ordering::Relaxed)).collect();
        Counters {
            rx_pkts: ld(&self.rx_pkts),
            tx_pkts: ld(&self.tx_pkts),
            drops: ld(&self.drops),
            to_control: self.to_control.load(Ordering::Relaxed),
            bursts: self.bursts.load(Ordering::Relaxed),
            idle_polls: self.idle_polls.load(Ordering::Relaxed),
        }
    }
}
