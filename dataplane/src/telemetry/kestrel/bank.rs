//! One window's state of one worker's tap (a *bank*): the sketches, the 3GPP-PM per-QFI
//! counters and, for calibrating QIDs, the fine histograms. The worker owns its active bank
//! outright (plain stores, no atomics); at the window edge the whole bank moves to the
//! control side (`super::tap`).

use super::edges::{fine_bin, EdgeSet, FINE_BINS};
use super::kernel::QidTables;
use super::layout::{
    bin, Bucket, HotBucket, IndexHash, Layout, DIRS, MAX_QIDS, MAX_ROWS, SPILL_AT,
};
use crate::upf::prefetch::prefetch;

/// Packets a burst update hashes per pass (then updates them in order).
pub const CHUNK: usize = 32;

/// How many packets ahead of its update a packet's row buckets are prefetched: with d = 3
/// about 12 lines in flight (prefetching a whole 32-packet chunk, 96 lines, stalled on them;
/// no prefetch at all cost 5-12 %; 4 ahead ran 1.3 % faster than 8 in round 10's quiet
/// benchmark alternation, where the rows come from L2: perf/results/kestrel.md).
pub const AHEAD: usize = 4;

/// QFIs are 6 bits (TS 38.415 section 5.5.3.3).
pub const QFIS: usize = 64;

/// 3GPP-PM counters of one (direction, QFI) in a window (TS 28.552 section 5.4: packets,
/// bytes and mean delay per QFI). Drops are counted by the UPF, not here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pm {
    pub packets: u64,
    pub bytes: u64,
    /// Sum of queue sojourn times, ns (mean delay = sum / packets).
    pub sojourn_sum_ns: u64,
}

/// One packet as the kernel sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// 0 uplink, 1 downlink.
    pub dir: usize,
    pub qid: usize,
    pub teid: u32,
    pub qfi: u8,
    /// Inner IP length, bytes.
    pub len: u32,
    /// 0 green, 1 yellow, 2 red.
    pub colour: u8,
    pub sojourn_ns: u32,
    /// Dequeue time, ns on the worker clock (for inter-arrival times).
    pub t_ns: u64,
}

impl Sample {
    /// A placeholder (no direction: a burst update skips it).
    pub const EMPTY: Sample = Sample {
        dir: usize::MAX,
        qid: 0,
        teid: 0,
        qfi: 0,
        len: 0,
        colour: 0,
        sojourn_ns: 0,
        t_ns: 0,
    };
}

/// One window's counters (see the module doc).
#[derive(Debug, Clone)]
pub struct Bank {
    /// Window sequence number: `window start / window length`.
    pub seq: u64,
    /// Version of the edges every packet of this bank was binned with.
    pub edges_version: u64,
    /// Index of the tap (worker x port) that filled it.
    pub source: u32,
    /// `Layout::bank_len` wide buckets, `[dir][qid][row][column]`: the hot buckets' spills
    /// and the reference update's counters. A bucket's window value is wide + hot
    /// ([`Bank::bucket`]).
    pub buckets: Vec<Bucket>,
    /// `Layout::bank_len` hot buckets, same order: what the tap's burst update writes, and
    /// every bucket's last-seen time.
    pub hot: Vec<HotBucket>,
    /// `[dir][qid]`: packets of calibrating QIDs, binned finely: `[latency | iat][FINE_BINS]`.
    pub fine: Vec<u32>,
    /// `[dir][qfi]`: 3GPP-PM counters.
    pub pm: Vec<Pm>,
    /// Packets recorded in the sketches.
    pub packets: u64,
    /// Packets skipped: no direction or a QID beyond the layout.
    pub skipped: u64,
    /// Whether anything was recorded since the bank was zeroed.
    pub dirty: bool,
    /// `[dir][qid]`: packets each sketch's hot buckets may still count: [`SPILL_AT`] less
    /// the packets the burst update recorded in them since they last spilled. At 0 the whole
    /// sketch spills ([`spill_sketch`]) and this is [`SPILL_AT`] again, so no hot bucket
    /// (whose counters are each at most its sketch's packets) can wrap.
    pub(super) hot_room: [u32; DIRS * MAX_QIDS],
    /// The d = 3 kernel's scratch: pass 1's bucket indices of a chunk, and [`AHEAD`] more
    /// entries that pass 2 prefetches with no test. Kept here, not on the kernel's stack, so
    /// that a burst does not zero it (a 432-byte `memset` a chunk; perf/results/kestrel.md,
    /// round 11): entries past the current chunk hold 0 or an earlier chunk's indices, which
    /// pass 2 only prefetches (a hint, never a dereference).
    pub(super) at: [[u32; 3]; CHUNK + AHEAD],
}

impl Bank {
    /// A zeroed bank for `layout` (allocates: control side only).
    pub fn new(layout: &Layout) -> Bank {
        Bank {
            seq: 0,
            edges_version: 0,
            source: 0,
            buckets: vec![Bucket::ZERO; layout.bank_len()],
            hot: vec![HotBucket::ZERO; layout.bank_len()],
            fine: vec![0; DIRS * layout.qids * 2 * FINE_BINS],
            pm: vec![Pm::default(); DIRS * QFIS],
            packets: 0,
            skipped: 0,
            dirty: false,
            hot_room: HOT_ROOM,
            at: [[0; 3]; CHUNK + AHEAD],
        }
    }

    /// A bank with no buckets (a placeholder; records nothing).
    pub fn empty() -> Bank {
        Bank {
            seq: 0,
            edges_version: 0,
            source: 0,
            buckets: Vec::new(),
            hot: Vec::new(),
            fine: Vec::new(),
            pm: Vec::new(),
            packets: 0,
            skipped: 0,
            dirty: false,
            hot_room: HOT_ROOM,
            at: [[0; 3]; CHUNK + AHEAD],
        }
    }

    /// Zero every counter (the control side, before handing the bank back).
    pub fn clear(&mut self) {
        self.buckets.fill(Bucket::ZERO);
        self.hot.fill(HotBucket::ZERO);
        self.fine.fill(0);
        self.pm.fill(Pm::default());
        self.packets = 0;
        self.skipped = 0;
        self.dirty = false;
        self.hot_room = HOT_ROOM;
    }

    /// Bucket `i`'s counters in this window: the wide counters plus the hot ones.
    #[inline]
    pub fn bucket(&self, i: usize) -> Bucket {
        let mut b = self.buckets[i];
        b.add_hot(&self.hot[i]);
        b
    }

    /// Move hot bucket `i`'s counters into the wide bucket (last-seen stays).
    #[cold]
    #[inline(never)]
    fn spill(&mut self, i: usize) {
        spill_into(&mut self.buckets, &mut self.hot, i);
    }

    /// The fine histograms of (dir, qid): latency then inter-arrival.
    pub fn fine_of(&self, dir: usize, qid: usize) -> (&[u32], &[u32]) {
        let base = (dir * (self.fine.len() / (DIRS * 2 * FINE_BINS)) + qid) * 2 * FINE_BINS;
        let s = &self.fine[base..base + 2 * FINE_BINS];
        s.split_at(FINE_BINS)
    }
}

/// Move hot bucket `i`'s counters into wide bucket `i` (last-seen stays).
#[inline]
pub(super) fn spill_into(buckets: &mut [Bucket], hot: &mut [HotBucket], i: usize) {
    let h = &mut hot[i];
    buckets[i].add_hot(h);
    *h = HotBucket {
        last_seen: h.last_seen,
        ..HotBucket::ZERO
    };
}

/// [`Bank::hot_room`] of a zeroed bank.
const HOT_ROOM: [u32; DIRS * MAX_QIDS] = [SPILL_AT as u32; DIRS * MAX_QIDS];

/// Spill every hot bucket of the sketch at `base..base + len` that counted a packet into
/// its wide bucket (the burst update, when the sketch's [`Bank::hot_room`] reaches 0: once
/// per 65 535 packets of one sketch).
#[cold]
#[inline(never)]
pub(super) fn spill_sketch(buckets: &mut [Bucket], hot: &mut [HotBucket], base: usize, len: usize) {
    for i in base..base + len {
        if hot[i].packets != 0 {
            spill_into(buckets, hot, i);
        }
    }
}

/// What the d = 3 kernel derives from an [`EdgeSet`]: bin tables per QID (`super::kernel`),
/// rebuilt when the edges change (compared per burst: no per-packet cost).
#[derive(Debug, Clone)]
struct BinCache {
    edges: EdgeSet,
    tables: [QidTables; MAX_QIDS],
    /// Every QID of the layout has tables (else the compare search is used).
    all: bool,
    /// Every QID's tables find a bin with one compare (`BinTable::bin1`).
    one: bool,
    any_calibrating: bool,
}

/// The per-packet kernel's fixed state: the layout in register-friendly form.
#[derive(Debug, Clone)]
pub struct Sketcher {
    pub(super) qids: usize,
    rows: usize,
    pub(super) bits: u32,
    width: usize,
    pub(super) seeds: [u64; MAX_QIDS],
    pub(super) hash: IndexHash,
    bins: Box<BinCache>,
}

impl Sketcher {
    pub fn new(layout: &Layout) -> Sketcher {
        let mut seeds = [0; MAX_QIDS];
        seeds[..layout.qids].copy_from_slice(&layout.seeds);
        let edges = EdgeSet::default();
        let default = QidTables::new(&edges.qids[0]).expect("the default edges have tables");
        let mut sk = Sketcher {
            qids: layout.qids,
            rows: layout.rows,
            bits: layout.index_bits(),
            width: layout.width,
            seeds,
            hash: layout.hash,
            bins: Box::new(BinCache {
                edges,
                tables: [default; MAX_QIDS],
                all: true,
                one: true,
                any_calibrating: false,
            }),
        };
        sk.set_bins(&edges);
        sk
    }

    /// Rebuild the bin tables for `edges` (when they changed: a new version, a re-binning).
    #[cold]
    fn set_bins(&mut self, edges: &EdgeSet) {
        let c = &mut *self.bins;
        c.edges = *edges;
        c.all = true;
        c.one = true;
        for (q, e) in edges.qids.iter().enumerate().take(self.qids) {
            match QidTables::new(e) {
                Some(t) => {
                    c.one &= t.one_per_octave();
                    c.tables[q] = t;
                }
                None => c.all = false,
            }
        }
        c.any_calibrating = edges.calibrating[..self.qids].iter().any(|&x| x);
    }

    /// Record a burst of packets in `bank` with `edges`: what [`Sketcher::record`] does for
    /// each packet in order, into the hot buckets (spilling into the wide ones), in chunks
    /// of [`CHUNK`]: first every packet's hash, then the updates in packet order, each
    /// packet's update preceded by a prefetch of the row buckets of the packet [`AHEAD`]
    /// places later, so the misses overlap without overrunning the CPU's miss buffers. No
    /// allocation, no branch on data but the calibration and spill tests (rare).
    pub fn record_burst(&mut self, bank: &mut Bank, edges: &EdgeSet, samples: &[Sample]) {
        self.set_edges(edges);
        self.record_burst_own(bank, samples);
    }

    /// Make `edges` the ones [`Sketcher::record_burst_own`] bins with, rebuilding the bin
    /// tables if they changed (the tap calls it when its edges change, once per window at
    /// most; the sketcher starts with the default edges).
    pub fn set_edges(&mut self, edges: &EdgeSet) {
        if self.bins.edges != *edges {
            self.set_bins(edges);
        }
    }

    /// [`Sketcher::record_burst`] with the edges of the last [`Sketcher::set_edges`]: the
    /// tap's entry, which thus compares no edge set per burst.
    pub fn record_burst_own(&mut self, bank: &mut Bank, samples: &[Sample]) {
        let c = &*self.bins;
        if self.rows != 3 {
            let edges = c.edges;
            return self.burst::<0>(bank, &edges, samples);
        }
        // The paper's d = 3: the kernel with bin tables (`super::kernel`) when every QID's
        // edges have them, specialised for w = 512 with no calibrating QID, with one
        // compare per bin when the edges allow it, and for the paper's 8 QIDs.
        let cal = &c.edges.calibrating;
        let q8 = self.qids == MAX_QIDS;
        let done = c.all
            && match (self.bits, q8, c.any_calibrating, c.one) {
                (9, true, false, true) => {
                    self.burst3::<9, true, false, true>(bank, samples, &c.tables, cal)
                }
                (9, _, false, true) => {
                    self.burst3::<9, false, false, true>(bank, samples, &c.tables, cal)
                }
                (9, _, false, false) => {
                    self.burst3::<9, false, false, false>(bank, samples, &c.tables, cal)
                }
                (_, _, false, _) => {
                    self.burst3::<0, false, false, false>(bank, samples, &c.tables, cal)
                }
                (_, _, true, _) => {
                    self.burst3::<0, false, true, false>(bank, samples, &c.tables, cal)
                }
            };
        if !done {
            let edges = c.edges;
            self.burst::<3>(bank, &edges, samples);
        }
    }

    /// [`Sketcher::record_burst`] with every bin found by the compare search (the update
    /// before the d = 3 kernel and its bin tables; what edge sets without tables use).
    /// Benchmarks measure the two against each other.
    pub fn record_burst_compare(&mut self, bank: &mut Bank, edges: &EdgeSet, samples: &[Sample]) {
        if self.rows == 3 {
            self.burst::<3>(bank, edges, samples);
        } else {
            self.burst::<0>(bank, edges, samples);
        }
    }

    /// [`Sketcher::record_burst`] with `ROWS` rows (0: `self.rows`).
    #[inline(always)]
    fn burst<const ROWS: usize>(&mut self, bank: &mut Bank, edges: &EdgeSet, samples: &[Sample]) {
        let rows = if ROWS > 0 { ROWS } else { self.rows };
        let (bits, width) = (self.bits, self.width);
        let mask = (1u64 << bits) - 1;
        let col = |h: u64, row: usize| row * width + ((h >> (row as u32 * bits)) & mask) as usize;
        for chunk in samples.chunks(CHUNK) {
            // Pass 1: every packet's hash and the first bucket of its sketch.
            let mut hs = [0u64; CHUNK];
            let mut bases = [usize::MAX; CHUNK];
            for ((s, h), base) in chunk.iter().zip(&mut hs).zip(&mut bases) {
                if s.dir < DIRS && s.qid < self.qids {
                    *h = self.hash.hash(self.seeds[s.qid], s.teid, s.qfi);
                    *base = (s.dir * self.qids + s.qid) * rows * width;
                }
            }
            let prefetch_rows = |hot: &[HotBucket], k: usize| {
                if let (Some(&h), Some(&base)) = (hs.get(k), bases.get(k)) {
                    if base != usize::MAX {
                        for row in 0..rows {
                            if let Some(b) = hot.get(base + col(h, row)) {
                                prefetch(b);
                            }
                        }
                    }
                }
            };
            for k in 0..AHEAD.min(chunk.len()) {
                prefetch_rows(&bank.hot, k);
            }
            // Pass 2: the updates, in packet order.
            let mut skipped = 0;
            for (k, ((s, &h), &base)) in chunk.iter().zip(&hs).zip(&bases).enumerate() {
                if k + AHEAD < chunk.len() {
                    prefetch_rows(&bank.hot, k + AHEAD);
                }
                if base == usize::MAX {
                    skipped += 1;
                    continue;
                }
                let e = &edges.qids[s.qid];
                let lat_bin = bin(&e.lat, s.sojourn_ns);
                let colour = usize::from(s.colour.min(2));
                let calibrating = edges.calibrating[s.qid];
                let t = s.t_ns.max(1);
                for row in 0..rows {
                    let i = base + col(h, row);
                    let b = &mut bank.hot[i];
                    b.packets += 1;
                    b.bytes += u64::from(s.len);
                    b.colour[colour] += 1;
                    b.lat[lat_bin] += 1;
                    let last = std::mem::replace(&mut b.last_seen, t);
                    let iat = s.t_ns.saturating_sub(last).min(u64::from(u32::MAX)) as u32;
                    // Branch-free first-seen test: a bucket's first packet adds no gap.
                    b.iat[bin(&e.iat, iat)] += u16::from(last != 0);
                    let full = b.packets == SPILL_AT;
                    if calibrating && row == 0 && last != 0 {
                        self.calibrate(bank, s, None, Some(iat));
                    }
                    if full {
                        bank.spill(i);
                    }
                }
                if calibrating {
                    self.calibrate(bank, s, Some(s.sojourn_ns), None);
                }
                let pm = &mut bank.pm[s.dir * QFIS + usize::from(s.qfi & 63)];
                pm.packets += 1;
                pm.bytes += u64::from(s.len);
                pm.sojourn_sum_ns += u64::from(s.sojourn_ns);
                // Keep the sketch's count for the d = 3 kernel, which spills by sketch.
                let sk = s.dir * self.qids + s.qid;
                bank.hot_room[sk] -= 1;
                if bank.hot_room[sk] == 0 {
                    bank.hot_room[sk] = u32::from(SPILL_AT);
                    let len = rows * width;
                    spill_sketch(&mut bank.buckets, &mut bank.hot, sk * len, len);
                }
            }
            let n = (chunk.len() - skipped) as u64;
            bank.skipped += skipped as u64;
            bank.packets += n;
            bank.dirty |= n > 0;
        }
    }

    /// Record one packet in `bank` with `edges` (Kestrel section III-C "Packet updates"):
    /// per row, packets and bytes, the colour, the latency bin of the sojourn, and the
    /// inter-arrival bin of `t - last_seen` (none the first time a bucket sees a packet),
    /// then last-seen := t. The reference update: straight into the wide buckets (last-seen
    /// in the hot ones), one packet at a time; the tap uses [`Sketcher::record_burst`],
    /// which tests hold equal to this.
    #[inline]
    pub fn record(&mut self, bank: &mut Bank, edges: &EdgeSet, s: &Sample) {
        if s.dir >= DIRS || s.qid >= self.qids {
            bank.skipped += 1;
            return;
        }
        let e = &edges.qids[s.qid];
        let lat_bin = bin(&e.lat, s.sojourn_ns);
        let mut cols = [0usize; MAX_ROWS];
        super::layout::split(
            self.hash.hash(self.seeds[s.qid], s.teid, s.qfi),
            self.rows,
            self.bits,
            &mut cols,
        );
        let base = (s.dir * self.qids + s.qid) * self.rows * self.width;
        let colour = usize::from(s.colour.min(2));
        let calibrating = edges.calibrating[s.qid];
        for (row, &c) in cols.iter().enumerate().take(self.rows) {
            let i = base + row * self.width + c;
            let b = &mut bank.buckets[i];
            b.packets += 1;
            b.bytes += u64::from(s.len);
            b.colour[colour] += 1;
            b.lat[lat_bin] += 1;
            let last = std::mem::replace(&mut bank.hot[i].last_seen, s.t_ns.max(1));
            let b = &mut bank.buckets[i];
            if last != 0 {
                let iat = u32::try_from(s.t_ns.saturating_sub(last)).unwrap_or(u32::MAX);
                b.iat[bin(&e.iat, iat)] += 1;
                if calibrating && row == 0 {
                    self.calibrate(bank, s, None, Some(iat));
                }
            }
        }
        if calibrating {
            self.calibrate(bank, s, Some(s.sojourn_ns), None);
        }
        let pm = &mut bank.pm[s.dir * QFIS + usize::from(s.qfi & 63)];
        pm.packets += 1;
        pm.bytes += u64::from(s.len);
        pm.sojourn_sum_ns += u64::from(s.sojourn_ns);
        bank.packets += 1;
        bank.dirty = true;
    }

    #[cold]
    fn calibrate(&self, bank: &mut Bank, s: &Sample, lat: Option<u32>, iat: Option<u32>) {
        self.calibrate_into(&mut bank.fine, s, lat, iat);
    }

    /// Count `s`'s sojourn (`lat`) and gap (`iat`) in the fine histograms `fine` of a bank.
    #[cold]
    pub(super) fn calibrate_into(
        &self,
        fine: &mut [u32],
        s: &Sample,
        lat: Option<u32>,
        iat: Option<u32>,
    ) {
        let base = (s.dir * self.qids + s.qid) * 2 * FINE_BINS;
        if let Some(v) = lat {
            fine[base + fine_bin(v)] += 1;
        }
        if let Some(v) = iat {
            fine[base + FINE_BINS + fine_bin(v)] += 1;
        }
    }
}
