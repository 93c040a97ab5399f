//! A worker's windows, published to the control thread without locks: per slice two buffers
//! of atomics and a generation (a seqlock over a double buffer). The worker fills its private
//! [`LogHist`]s; at the end of a window (and when idle, for the running window) it copies
//! them into the buffer the reader is not using and bumps the generation. Each buffer also
//! has its own sequence number, odd while it is being written, so a reader that raced with a
//! second publish into the same buffer sees the change and retries (a seqlock, in atomics).

use super::hist::{LogHist, NBINS};
use super::kernel::SetStats;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Cumulative set counters carried with each publish, in this order.
pub const STAT_NAMES: [&str; 7] = [
    "requests",
    "inserted",
    "overwrote",
    "responses",
    "not_sampled",
    "matched",
    "unmatched",
];

fn stats_array(s: &SetStats) -> [u64; 7] {
    [
        s.requests,
        s.inserted,
        s.overwrote,
        s.responses,
        s.not_sampled,
        s.matched,
        s.unmatched,
    ]
}

#[derive(Debug)]
struct Buf {
    seq: AtomicU64,
    index: AtomicU64,
    n: Box<[AtomicU64]>,
    w: Box<[AtomicU64]>,
    w2: Box<[AtomicU64]>,
    stats: [AtomicU64; 7],
    /// Every bin of `n`, `w` and `w2` is 0 (the worker's own note, read and written only by
    /// it: a publish of empty histograms into such a buffer copies no bin).
    zero: AtomicBool,
}

impl Buf {
    fn new(fridges: usize) -> Buf {
        let z = || (0..fridges * NBINS).map(|_| AtomicU64::new(0)).collect();
        Buf {
            seq: AtomicU64::new(0),
            index: AtomicU64::new(0),
            n: z(),
            w: z(),
            w2: z(),
            stats: Default::default(),
            zero: AtomicBool::new(true),
        }
    }
}

/// One slice's published window (shared between its worker and the control thread).
#[derive(Debug)]
pub struct SlicePub {
    fridges: usize,
    gen: AtomicU64,
    bufs: [Buf; 2],
}

/// What a reader gets: the window's index (`now_ns / window_ns`), per-fridge histograms and
/// the set's cumulative counters.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowSnap {
    pub gen: u64,
    pub index: u64,
    pub hists: Vec<LogHist>,
    pub stats: [u64; 7],
}

impl SlicePub {
    pub fn new(fridges: usize) -> SlicePub {
        SlicePub {
            fridges,
            gen: AtomicU64::new(0),
            bufs: [Buf::new(fridges), Buf::new(fridges)],
        }
    }

    /// Worker side: publish the state of window `index`. No allocation, no lock.
    pub fn publish(&self, index: u64, hists: &[LogHist], stats: &SetStats) {
        self.publish_hists(index, Some(hists), stats);
    }

    /// [`publish`](Self::publish), where `None` stands for histograms the caller knows to be
    /// empty (every bin 0, e.g. a window without samples): the buffer's bins are then
    /// zeroed, or left as they are when they already are (no copy: a slice that has tallied
    /// no sample publishes its counters alone).
    pub fn publish_hists(&self, index: u64, hists: Option<&[LogHist]>, stats: &SetStats) {
        let g = self.gen.load(Ordering::Relaxed) + 1;
        let b = &self.bufs[(g & 1) as usize];
        let s = b.seq.load(Ordering::Relaxed);
        b.seq.store(s + 1, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        b.index.store(index, Ordering::Relaxed);
        match hists {
            Some(hists) => {
                b.zero.store(false, Ordering::Relaxed);
                for (k, h) in hists.iter().enumerate().take(self.fridges) {
                    let r = k * NBINS..(k + 1) * NBINS;
                    // Zipped, not indexed: no bounds check per bin (a third of the
                    // instructions).
                    let dst = b.n[r.clone()].iter().zip(&b.w[r.clone()]).zip(&b.w2[r]);
                    let src = h.n.iter().zip(h.w.iter()).zip(h.w2.iter());
                    for (((dn, dw), dw2), ((n, w), w2)) in dst.zip(src) {
                        dn.store(*n, Ordering::Relaxed);
                        dw.store(w.to_bits(), Ordering::Relaxed);
                        dw2.store(w2.to_bits(), Ordering::Relaxed);
                    }
                }
            }
            None if b.zero.load(Ordering::Relaxed) => {}
            None => {
                for a in b.n.iter().chain(b.w.iter()).chain(b.w2.iter()) {
                    a.store(0, Ordering::Relaxed);
                }
                b.zero.store(true, Ordering::Relaxed);
            }
        }
        for (a, v) in b.stats.iter().zip(stats_array(stats)) {
            a.store(v, Ordering::Relaxed);
        }
        b.seq.store(s + 2, Ordering::Release);
        self.gen.store(g, Ordering::Release);
    }

    /// Generation of the last publish (0: nothing yet).
    pub fn generation(&self) -> u64 {
        self.gen.load(Ordering::Acquire)
    }

    /// Reader side: the last published window, or `None` before the first publish (or after
    /// three torn attempts, when the worker publishes faster than we read).
    pub fn read(&self) -> Option<WindowSnap> {
        for _ in 0..3 {
            let g = self.gen.load(Ordering::Acquire);
            if g == 0 {
                return None;
            }
            let b = &self.bufs[(g & 1) as usize];
            let s1 = b.seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut hists = Vec::with_capacity(self.fridges);
            for k in 0..self.fridges {
                let mut h = LogHist::new();
                let base = k * NBINS;
                for i in 0..NBINS {
                    h.n[i] = b.n[base + i].load(Ordering::Relaxed);
                    h.w[i] = f64::from_bits(b.w[base + i].load(Ordering::Relaxed));
                    h.w2[i] = f64::from_bits(b.w2[base + i].load(Ordering::Relaxed));
                }
                hists.push(h);
            }
            let mut stats = [0u64; 7];
            for (s, a) in stats.iter_mut().zip(&b.stats) {
                *s = a.load(Ordering::Relaxed);
            }
            let index = b.index.load(Ordering::Relaxed);
            std::sync::atomic::fence(Ordering::Acquire);
            if b.seq.load(Ordering::Relaxed) == s1 {
                return Some(WindowSnap {
                    gen: g,
                    index,
                    hists,
                    stats,
                });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_then_read_round_trips() {
        let p = SlicePub::new(2);
        assert!(p.read().is_none());
        let mut h = [LogHist::new(), LogHist::new()];
        h[0].add(1_000, 2.5);
        h[1].add(5_000_000, 7.0);
        let st = SetStats {
            requests: 10,
            matched: 3,
            ..SetStats::default()
        };
        p.publish(42, &h, &st);
        let s = p.read().unwrap();
        assert_eq!((s.gen, s.index), (1, 42));
        assert_eq!(s.hists[0], h[0]);
        assert_eq!(s.hists[1], h[1]);
        assert_eq!(s.stats[0], 10);
        assert_eq!(s.stats[5], 3);
        h[0].add(1_000, 1.0);
        p.publish(43, &h, &st);
        let s = p.read().unwrap();
        assert_eq!((s.gen, s.index), (2, 43));
        assert_eq!(s.hists[0].w[super::super::hist::bin_of(1_000)], 3.5);
    }

    /// Empty histograms published as `None` read back as empty, into either buffer, after
    /// a publish of samples into it too; the window index and counters as given.
    #[test]
    fn empty_publish_reads_back_empty() {
        let p = SlicePub::new(2);
        let mut h = [LogHist::new(), LogHist::new()];
        h[1].add(7_000, 1.5);
        let empty = [LogHist::new(), LogHist::new()];
        let st = |requests| SetStats {
            requests,
            ..SetStats::default()
        };
        // Buffers in turn: 1 empty, 0 samples, 1 empty, 0 empty (over samples), 1 samples,
        // 0 empty, 1 empty (over samples), 0 empty (already zero).
        let plan = [false, true, false, false, true, false, false, false];
        for (i, &sampled) in plan.iter().enumerate() {
            let i = i as u64;
            p.publish_hists(10 + i, sampled.then_some(&h[..]), &st(i));
            let s = p.read().unwrap();
            assert_eq!((s.gen, s.index, s.stats[0]), (i + 1, 10 + i, i));
            assert_eq!(s.hists, if sampled { &h } else { &empty }, "publish {i}");
        }
    }
}
