//! The control side of the bank exchange: drain every tap's full ring, add each bank into
//! its window (per element: exact for every counter and latency bin), zero it and hand it
//! back, and finish a window once every tap has moved past it or gone quiet. I/O-free, with
//! the control clock passed in, so a virtual-time driver runs it as the daemon does.
//!
//! Inter-arrival bins summed over taps count, per bucket, the gaps each tap saw between the
//! packets *it* dequeued: with two workers a bucket's packets are split between two clocks,
//! so the summed histogram holds two interleaved gap sequences (each gap longer than the
//! bucket's true gap when both workers serve it), and a tap's first packet in a bucket gives
//! no gap. Exact when one worker serves each key (flow steering does that for a session).

use super::bank::{Bank, Pm, QFIS};
use super::edges::FINE_BINS;
use super::layout::{Bucket, HotBucket, Layout, BINS, DIRS};
use super::tap::TapEnds;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

/// A bucket summed over taps (64-bit: no width limit after summing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SumBucket {
    pub packets: u64,
    pub bytes: u64,
    pub colour: [u64; 3],
    pub lat: [u64; BINS],
    pub iat: [u64; BINS],
}

impl SumBucket {
    fn add(&mut self, b: &Bucket) {
        self.packets += u64::from(b.packets);
        self.bytes += b.bytes;
        for (s, &x) in self.colour.iter_mut().zip(&b.colour) {
            *s += u64::from(x);
        }
        for (s, &x) in self.lat.iter_mut().zip(&b.lat) {
            *s += u64::from(x);
        }
        for (s, &x) in self.iat.iter_mut().zip(&b.iat) {
            *s += u64::from(x);
        }
    }

    fn add_hot(&mut self, b: &HotBucket) {
        self.packets += u64::from(b.packets);
        self.bytes += b.bytes;
        for (s, &x) in self.colour.iter_mut().zip(&b.colour) {
            *s += u64::from(x);
        }
        for (s, &x) in self.lat.iter_mut().zip(&b.lat) {
            *s += u64::from(x);
        }
        for (s, &x) in self.iat.iter_mut().zip(&b.iat) {
            *s += u64::from(x);
        }
    }

    /// Element-wise minimum (the Count-Min query over rows).
    pub fn min(&self, o: &SumBucket) -> SumBucket {
        let m = |a: &[u64], b: &[u64], out: &mut [u64]| {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = x.min(y);
            }
        };
        let mut r = SumBucket {
            packets: self.packets.min(o.packets),
            bytes: self.bytes.min(o.bytes),
            ..SumBucket::default()
        };
        m(&self.colour, &o.colour, &mut r.colour);
        m(&self.lat, &o.lat, &mut r.lat);
        m(&self.iat, &o.iat, &mut r.iat);
        r
    }
}

/// One window, summed over the taps that had packets in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub seq: u64,
    pub layout: Layout,
    /// Banks (tap windows) summed in.
    pub banks: u32,
    /// Distinct taps (worker x port) whose banks are in.
    pub sources: Vec<u32>,
    /// Edge versions the banks were binned with (one, unless a publish raced a window edge).
    pub edges_versions: Vec<u64>,
    /// `Layout::bank_len` buckets, `[dir][qid][row][column]`.
    pub buckets: Vec<SumBucket>,
    /// `[dir][qid][latency | iat][FINE_BINS]` of calibrating QIDs.
    pub fine: Vec<u64>,
    /// `[dir][qfi]` 3GPP-PM counters.
    pub pm: Vec<Pm>,
    pub packets: u64,
    pub skipped: u64,
    /// A part of a window already finished: banks that arrived after it (add to it).
    pub late: bool,
    /// Control-clock ns at which the first bank of the window arrived.
    first_ns: u64,
}

impl Window {
    fn new(seq: u64, layout: &Layout, now_ns: u64) -> Window {
        Window {
            seq,
            layout: layout.clone(),
            banks: 0,
            sources: Vec::new(),
            edges_versions: Vec::new(),
            buckets: vec![SumBucket::default(); layout.bank_len()],
            fine: vec![0; DIRS * layout.qids * 2 * FINE_BINS],
            pm: vec![Pm::default(); DIRS * QFIS],
            packets: 0,
            skipped: 0,
            late: false,
            first_ns: now_ns,
        }
    }

    fn add(&mut self, b: &Bank) {
        for ((s, x), h) in self.buckets.iter_mut().zip(&b.buckets).zip(&b.hot) {
            s.add(x);
            s.add_hot(h);
        }
        for (s, &x) in self.fine.iter_mut().zip(&b.fine) {
            *s += u64::from(x);
        }
        for (s, x) in self.pm.iter_mut().zip(&b.pm) {
            s.packets += x.packets;
            s.bytes += x.bytes;
            s.sojourn_sum_ns += x.sojourn_sum_ns;
        }
        self.packets += b.packets;
        self.skipped += b.skipped;
        self.banks += 1;
        if !self.sources.contains(&b.source) {
            self.sources.push(b.source);
        }
        if !self.edges_versions.contains(&b.edges_version) {
            self.edges_versions.push(b.edges_version);
        }
    }

    /// The buckets of sketch (dir, qid), `rows * width`.
    pub fn sketch(&self, dir: usize, qid: usize) -> &[SumBucket] {
        let base = self.layout.sketch_base(dir, qid);
        &self.buckets[base..base + self.layout.sketch_len()]
    }

    /// The Count-Min estimate of key (teid, qfi) in sketch (dir, qid): the minimum over rows
    /// of each field (Kestrel section III-C "Export and query model").
    pub fn query(&self, dir: usize, qid: usize, teid: u32, qfi: u8) -> SumBucket {
        let mut cols = [0; super::layout::MAX_ROWS];
        self.layout.columns(qid, teid, qfi, &mut cols);
        let s = self.sketch(dir, qid);
        let w = self.layout.width;
        (1..self.layout.rows).fold(s[cols[0]], |acc, r| acc.min(&s[r * w + cols[r]]))
    }

    /// Row `row`'s sum of sketch (dir, qid): every row sums to the queue's exact totals.
    pub fn row_sum(&self, dir: usize, qid: usize, row: usize) -> SumBucket {
        let w = self.layout.width;
        let mut t = SumBucket::default();
        for b in &self.sketch(dir, qid)[row * w..(row + 1) * w] {
            t.packets += b.packets;
            t.bytes += b.bytes;
            for i in 0..3 {
                t.colour[i] += b.colour[i];
            }
            for i in 0..BINS {
                t.lat[i] += b.lat[i];
                t.iat[i] += b.iat[i];
            }
        }
        t
    }

    /// Fine histograms (latency, inter-arrival) of (dir, qid).
    pub fn fine_of(&self, dir: usize, qid: usize) -> (&[u64], &[u64]) {
        let base = (dir * self.layout.qids + qid) * 2 * FINE_BINS;
        self.fine[base..base + 2 * FINE_BINS].split_at(FINE_BINS)
    }
}

#[derive(Debug)]
struct Source {
    ends: TapEnds,
    /// Highest sequence number received, and when (control clock).
    high: Option<u64>,
    last_ns: u64,
}

/// Sums the taps' banks per window (see the module doc).
#[derive(Debug)]
pub struct Aggregator {
    layout: Layout,
    window_ns: u64,
    sources: Vec<Source>,
    pending: BTreeMap<u64, Window>,
    /// Highest sequence number finished.
    done: Option<u64>,
    /// Windows finished, late parts included.
    pub windows: u64,
    pub late_parts: u64,
}

impl Aggregator {
    /// `window_ns` is also how long a window waits for a quiet tap.
    pub fn new(layout: Layout, window_ns: u64) -> Aggregator {
        Aggregator {
            layout,
            window_ns,
            sources: Vec::new(),
            pending: BTreeMap::new(),
            done: None,
            windows: 0,
            late_parts: 0,
        }
    }

    pub fn add_source(&mut self, ends: TapEnds) {
        self.sources.push(Source {
            ends,
            high: None,
            last_ns: 0,
        });
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Number of taps (worker x port).
    pub fn sources(&self) -> usize {
        self.sources.len()
    }

    /// Newest sequence number any tap has handed over.
    pub fn newest_seq(&self) -> Option<u64> {
        self.sources.iter().filter_map(|s| s.high).max()
    }

    /// The taps' counters: (banks, stalls, idle flushes) summed.
    pub fn tap_stats(&self) -> (u64, u64, u64) {
        self.sources.iter().fold((0, 0, 0), |a, s| {
            let t = &s.ends.stats;
            (
                a.0 + t.banks.load(Ordering::Relaxed),
                a.1 + t.stalls.load(Ordering::Relaxed),
                a.2 + t.idle_flushes.load(Ordering::Relaxed),
            )
        })
    }

    /// Move the postcards waiting in the taps' rings to `out`; (exported, dropped,
    /// suppressed) summed over taps.
    pub fn drain_postcards(&mut self, out: &mut Vec<super::postcard::Postcard>) -> (u64, u64, u64) {
        let mut t = (0, 0, 0);
        for s in &mut self.sources {
            if let Some((rx, st)) = &mut s.ends.postcards {
                while let Ok(p) = rx.pop() {
                    out.push(p);
                }
                t.0 += st.exported.load(Ordering::Relaxed);
                t.1 += st.dropped.load(Ordering::Relaxed);
                t.2 += st.suppressed.load(Ordering::Relaxed);
            }
        }
        t
    }

    /// Drain the rings (banks summed, zeroed, handed back) and return the windows finished
    /// at control-clock `now_ns`, oldest first.
    pub fn poll(&mut self, now_ns: u64) -> Vec<Window> {
        let mut out = Vec::new();
        for i in 0..self.sources.len() {
            while let Ok(mut bank) = self.sources[i].ends.full.pop() {
                let seq = bank.seq;
                let src = &mut self.sources[i];
                src.high = Some(src.high.map_or(seq, |h| h.max(seq)));
                src.last_ns = now_ns;
                if self.done.is_some_and(|d| seq <= d) {
                    let mut w = Window::new(seq, &self.layout, now_ns);
                    w.late = true;
                    w.add(&bank);
                    self.late_parts += 1;
                    out.push(w);
                } else {
                    let layout = &self.layout;
                    self.pending
                        .entry(seq)
                        .or_insert_with(|| Window::new(seq, layout, now_ns))
                        .add(&bank);
                }
                bank.clear();
                // The spare ring holds every bank of the tap: never full.
                let _ = self.sources[i].ends.spare.push(bank);
            }
        }
        while let Some((&seq, w)) = self.pending.iter().next() {
            let ready = self.sources.iter().all(|s| {
                s.high.is_some_and(|h| h > seq)
                    || now_ns.saturating_sub(s.last_ns) >= self.window_ns
                        && now_ns.saturating_sub(w.first_ns) >= self.window_ns
            });
            if !ready {
                break;
            }
            out.push(self.finish(seq));
        }
        out
    }

    /// Every pending window, finished now (at stop, after the workers flushed).
    pub fn flush(&mut self, now_ns: u64) -> Vec<Window> {
        let mut out = self.poll(now_ns);
        let seqs: Vec<u64> = self.pending.keys().copied().collect();
        out.extend(seqs.into_iter().map(|s| self.finish(s)));
        out
    }

    fn finish(&mut self, seq: u64) -> Window {
        let w = self.pending.remove(&seq).expect("pending");
        self.done = Some(self.done.map_or(seq, |d| d.max(seq)));
        self.windows += 1;
        w
    }
}
