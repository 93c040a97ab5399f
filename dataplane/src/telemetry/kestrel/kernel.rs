//! The tap's per-packet kernel for the paper's depth (d = 3): the same update as
//! [`Sketcher::record`](super::Sketcher::record), with the work that does not depend on the
//! row taken out of the rows and each histogram bin found by one table lookup instead of
//! seven compares (perf/results/kestrel.md, "Bin tables and the d = 3 kernel" and "Kernel
//! round 5").
//!
//! Bins: bin `k` of a histogram holds `[edge[k-1], edge[k])`, i.e. the bin of `v` is the
//! number of edges `<= v` ([`layout::bin`]). A [`BinTable`] splits the
//! values by octave (`[2^o, 2^(o+1))`, the first one `[0, 2)`) and keeps per octave the
//! number of edges below its end and the (at most two) edges inside it, so a bin is a `bsr`,
//! one table entry and two compares, with no chain of dependent loads; one compare when no
//! octave holds two edges (the defaults). Edge sets with three or more edges in one octave
//! (edges closer than a factor of two; the defaults are a factor of four apart) have no
//! table, and the sketcher uses the compare search for them.

use super::bank::{spill_sketch, Bank, Pm, Sample, Sketcher, AHEAD, CHUNK, QFIS};
use super::edges::QidEdges;
use super::layout::{self, HotBucket, IndexHash, DIRS, EDGES, MAX_QIDS, SPILL_AT};
use crate::upf::prefetch::prefetch_addr;

/// The bin of a value by octave (see the module doc): per octave `o` (`[2^o, 2^(o+1))`, the
/// first `[0, 2)`), `bin(v) = top[o] - (v < a[o]) - (v < b[o])`, where `top` is the number
/// of edges below the octave's end and `a`, `b` the (at most two) edges inside it above its
/// lowest value; free places hold 0, which no value is below. An edge at the octave's lowest
/// value is at most every value of the octave and counts in `top` alone. 64 octaves, so a
/// 64-bit inter-arrival gap needs no clamp (every gap of 2^32 ns or more bins as `u32::MAX`
/// does). Three arrays rather than one array of triples (kernel round 6): the octave is the
/// `bsr` of the value and each entry's address is `table + 8 o`, one addressing mode with
/// no multiply by the entry size. The edges are u64 so that `v < a` is one compare of the
/// 64-bit value with memory, and `top` is a byte so that each term is one `sbb` (LLVM
/// emits `xor`/`setb`/`sub` for the same subtraction in u64; perf/results/kestrel.md,
/// rounds 5 and 6). The one-compare bin ([`BinTable::bin1`]) is `top[o] - (v < a[o])`
/// alone (round 15; rounds 12-14 read a table of bin pairs, `pair[o][v >= a[o]]`, which
/// LLVM compiled as a data-dependent branch in some builds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct BinTable {
    a: [u64; 64],
    b: [u64; 64],
    top: [u8; 64],
}

impl BinTable {
    /// The table for ascending `edges`, or `None` when an octave holds three or more.
    pub fn new(edges: &[u32; EDGES]) -> Option<BinTable> {
        let mut t = BinTable {
            a: [0; 64],
            b: [0; 64],
            top: [0; 64],
        };
        for o in 0..64 {
            let lo = if o == 0 { 0u64 } else { 1 << o };
            let hi = if o == 63 { u64::MAX } else { 2u64 << o };
            // Edges at or below `lo` are at most every value of the octave.
            let mut inside = edges
                .iter()
                .map(|&e| u64::from(e))
                .filter(|&e| e > lo && e < hi);
            let top = edges.iter().filter(|&&e| u64::from(e) < hi).count() as u8;
            let (a, b) = (inside.next(), inside.next());
            if inside.next().is_some() {
                return None;
            }
            t.a[o] = a.unwrap_or(0);
            t.b[o] = b.unwrap_or(0);
            t.top[o] = top;
        }
        Some(t)
    }

    /// The octave of `v`: its highest set bit (0 for 0 and 1).
    #[inline(always)]
    fn octave(v: u64) -> usize {
        (63 - (v | 1).leading_zeros()) as usize & 63
    }

    /// The bin of `v`: the number of edges `<= v`, with `v` past `u32::MAX` as `u32::MAX`.
    #[inline(always)]
    pub fn bin(&self, v: u64) -> usize {
        let o = Self::octave(v);
        let n = self.top[o]
            .wrapping_sub(u8::from(v < self.a[o]))
            .wrapping_sub(u8::from(v < self.b[o]));
        usize::from(n & 7)
    }

    /// Whether no octave holds two edges above its lowest value, so that [`BinTable::bin1`]
    /// is exact (edges a factor of two or more apart, as the defaults are).
    pub fn one_per_octave(&self) -> bool {
        self.b.iter().all(|&b| b == 0)
    }

    /// [`BinTable::bin`] with one compare: exact when [`BinTable::one_per_octave`].
    #[inline(always)]
    pub fn bin1(&self, v: u64) -> usize {
        let o = Self::octave(v);
        // `top[o]` less one when `v` is below the octave's edge (with no edge inside, `a[o]`
        // is 0 and nothing is below it). The byte is loaded beside the edge and the compare
        // only borrows from it (`sbb`), so no load waits for the compare and there is no
        // select for LLVM to turn into a data-dependent branch in any copy of the kernel
        // (round 15: `pair[o][v >= a[o]]`, with or without `select_unpredictable`, became
        // a branch in some builds; perf/results/kestrel.md, rounds 13-15).
        usize::from(self.top[o].wrapping_sub(u8::from(v < self.a[o])) & 7)
    }
}

/// The latency and inter-arrival tables of one QID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct QidTables {
    lat: BinTable,
    iat: BinTable,
}

impl QidTables {
    /// Both tables need one compare per bin ([`BinTable::bin1`]).
    pub(super) fn one_per_octave(&self) -> bool {
        self.lat.one_per_octave() && self.iat.one_per_octave()
    }

    pub(super) fn new(e: &QidEdges) -> Option<QidTables> {
        Some(QidTables {
            lat: BinTable::new(&e.lat)?,
            iat: BinTable::new(&e.iat)?,
        })
    }
}

impl Sketcher {
    /// [`Sketcher::record_burst`] for d = 3 with every QID's bins in tables: per chunk of
    /// [`CHUNK`], first each packet's three bucket indices (hash, split, sketch base) and its
    /// PM counters, then the updates in packet order, prefetching the rows of the packet
    /// [`AHEAD`] places on. Per packet the row-independent parts (colour, latency bin,
    /// length, last-seen value) once, then per row the counters, the last-seen exchange and
    /// the inter-arrival bin. No spill test per packet: pass 1 counts down each sketch's room
    /// ([`Bank::hot_room`]: [`SPILL_AT`] less its packets since its hot buckets last spilled),
    /// and when a sketch's room reaches 0 the chunk is cut after that packet and the whole
    /// sketch spills (no hot bucket holds more packets than its sketch, so none can wrap).
    /// `BITS` is log2(width) when the caller knows it at compile time (0: `self.bits`); `Q8`
    /// whether the layout has [`MAX_QIDS`] QIDs (the default), so that pass 1 tests a QID
    /// against a constant and finds a sketch with a `lea` (round 16: the QID count was read
    /// from the stack twice a packet and multiplied); `CAL` whether any QID is calibrating;
    /// `ONE` whether every table finds a bin with one compare ([`BinTable::bin1`]). Returns
    /// false (nothing recorded) when `bank` has no PM slots (an
    /// empty placeholder bank), so the caller takes the general path. Out of line (round
    /// 12): inlined into the benchmark's loop, LLVM reloaded two of the caller's values from
    /// the stack in every iteration of both passes.
    #[inline(never)]
    pub(super) fn burst3<const BITS: u32, const Q8: bool, const CAL: bool, const ONE: bool>(
        &self,
        bank: &mut Bank,
        samples: &[Sample],
        tables: &[QidTables; MAX_QIDS],
        calibrating: &[bool; MAX_QIDS],
    ) -> bool {
        let hash = self.hash;
        let sketch_len = 3usize << if BITS > 0 { BITS } else { self.bits };
        let Bank {
            hot,
            buckets,
            pm,
            fine,
            packets,
            skipped,
            dirty,
            hot_room: room,
            at,
            ..
        } = bank;
        let Ok(pms) = <&mut [Pm; DIRS * QFIS]>::try_from(&mut pm[..]) else {
            return false;
        };
        // The paper's layout (8 QIDs, w = 512): the bank's length is a constant, so pass 2's
        // bounds tests compare with an immediate and keep no register for it (round 16).
        let hot: &mut [HotBucket] = if Q8 && BITS == 9 {
            match <&mut [HotBucket; (DIRS * MAX_QIDS * 3) << 9]>::try_from(&mut hot[..]) {
                Ok(h) => h,
                Err(_) => return false,
            }
        } else {
            hot
        };
        for chunk in samples.chunks(CHUNK) {
            let mut rest = chunk;
            while !rest.is_empty() {
                // Pass 1: every packet's three bucket indices (u32::MAX: not recorded), up to
                // the packet that fills its sketch, if one does. The hash is chosen once per
                // chunk, so the default one is inlined in the loop.
                let (n, end, full) = match hash {
                    IndexHash::Splitmix64 => {
                        self.index3::<BITS, Q8, _>(rest, at, pms, room, |seed, s| {
                            layout::hash(seed, s.teid, s.qfi)
                        })
                    }
                    IndexHash::Crc32 => {
                        self.index3::<BITS, Q8, _>(rest, at, pms, room, |seed, s| {
                            u64::from(layout::crc32_key(seed as u32, s.teid, s.qfi))
                        })
                    }
                };
                let (now, later) = rest.split_at(end);
                rest = later;
                *skipped += (end - n) as u64;
                *packets += n as u64;
                *dirty |= n > 0;
                update3::<CAL, ONE>(self, hot, fine, now, at, tables, calibrating);
                if let Some(sk) = full {
                    spill_sketch(buckets, hot, sk * sketch_len, sketch_len);
                }
            }
        }
        true
    }

    /// Pass 1 of [`Sketcher::burst3`]: each packet's three bucket indices under `hash`, or
    /// `u32::MAX` when it has no direction or its QID is beyond the layout, its 3GPP-PM
    /// counters (they need no bucket), and its sketch's room in `room` counted down. Stops
    /// after the first packet whose sketch's room reaches 0 (and sets it to [`SPILL_AT`]).
    /// Returns the packets recorded, the packets seen and the sketch to spill, if any. Out of
    /// line (round 16): inlined into [`Sketcher::burst3`], LLVM spilled the loop's packet
    /// count and read the room and PM bases from the stack (four stack accesses a packet;
    /// one, the room base, out of line); a call per pass costs less.
    #[inline(never)]
    fn index3<const BITS: u32, const Q8: bool, H: Fn(u64, &Sample) -> u64>(
        &self,
        chunk: &[Sample],
        at: &mut [[u32; 3]; CHUNK + AHEAD],
        pms: &mut [Pm; DIRS * QFIS],
        room: &mut [u32; DIRS * MAX_QIDS],
        hash: H,
    ) -> (usize, usize, Option<usize>) {
        let bits = if BITS > 0 { BITS } else { self.bits };
        let width = 1usize << bits;
        let mask = width - 1;
        let qids = if Q8 { MAX_QIDS } else { self.qids };
        // A copy, so that the loop reads the seeds at a fixed offset from the stack pointer
        // and keeps no register for `self`.
        let seeds = self.seeds;
        // Packets recorded and skipped so far: a packet's place is their sum, so the loop
        // keeps no index of its own (round 12: 4 loop instructions a packet instead of 7).
        let (mut n, mut skipped) = (0, 0);
        let len = chunk.len().min(CHUNK);
        for (s, a) in chunk[..len].iter().zip(at.iter_mut()) {
            if s.dir < DIRS && s.qid < qids {
                let h = hash(seeds[s.qid & (MAX_QIDS - 1)], s) as usize;
                let sk = s.dir * qids + s.qid;
                let base = sk * 3 * width;
                *a = [
                    base + (h & mask),
                    base + width + ((h >> bits) & mask),
                    base + 2 * width + ((h >> (2 * bits)) & mask),
                ]
                .map(|i| i as u32);
                let pm = &mut pms[(s.dir * QFIS + usize::from(s.qfi & 63)) & (DIRS * QFIS - 1)];
                pm.sojourn_sum_ns += u64::from(s.sojourn_ns);
                pm.bytes += u64::from(s.len);
                pm.packets += 1;
                n += 1;
                let r = &mut room[sk & (DIRS * MAX_QIDS - 1)];
                *r -= 1;
                if *r == 0 {
                    *r = u32::from(SPILL_AT);
                    return (n, n + skipped, Some(sk));
                }
            } else {
                *a = [u32::MAX; 3];
                skipped += 1;
            }
        }
        (n, len, None)
    }
}

/// Per colour byte, the increment of a hot bucket's `packets` and `colour` read as one
/// little-endian u64 (lane 0 `packets`, lanes 1-3 green, yellow, red; see
/// [`add_packet_colour`]): `1 | 1 << 16 (1 + min(colour, 2))`, the colour clamped to red as
/// [`Sketcher::record`] does. 256 entries so that the byte indexes it with no clamp or
/// bounds test (round 12: 2 instructions a packet for the colour instead of 6).
static PC_INC: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut c = 0;
    while c < 256 {
        let lane = 1 + if c < 2 { c } else { 2 };
        t[c] = 1 | 1 << (16 * lane);
        c += 1;
    }
    t
};

// Why the lanes of [`add_packet_colour`] never carry into each other: every lane counts at
// most its bucket's `packets`, which is at most `SPILL_AT` (the sketch spills when its room,
// `SPILL_AT` packets, is used up; the compare-search path spills a bucket at `SPILL_AT`),
// and a lane holds 0..=0xffff.
const _: () = assert!(SPILL_AT as u64 <= 0xffff);

/// Add `inc` (an entry of [`PC_INC`]) to hot bucket `b`'s `packets` and `colour` as one u64:
/// the four adjacent u16 counters (`HotBucket` offsets 16..24) are read, added and written
/// as the lanes of one u64, which LLVM makes one 64-bit add to memory, where the counters one
/// at a time took two 16-bit ones (round 12). Exact: no lane passes 0xffff (the const assert
/// above), so no add carries into the next lane.
#[inline(always)]
fn add_packet_colour(b: &mut HotBucket, inc: u64) {
    debug_assert!(b.packets < u16::MAX, "a hot bucket spills before it wraps");
    let [g, y, r] = b.colour;
    let v =
        (u64::from(b.packets) | u64::from(g) << 16 | u64::from(y) << 32 | u64::from(r) << 48) + inc;
    b.packets = v as u16;
    b.colour = [(v >> 16) as u16, (v >> 32) as u16, (v >> 48) as u16];
}

/// Pass 2 of [`Sketcher::burst3`]: the bucket updates of `chunk` in packet order, each
/// preceded by a prefetch of the rows of the packet [`AHEAD`] places on (`at` has their
/// indices; past the chunk, 0 or an earlier chunk's).
#[inline(always)]
fn update3<const CAL: bool, const ONE: bool>(
    sk: &Sketcher,
    hot: &mut [HotBucket],
    fine: &mut [u32],
    chunk: &[Sample],
    at: &[[u32; 3]; CHUNK + AHEAD],
    tables: &[QidTables; MAX_QIDS],
    calibrating: &[bool; MAX_QIDS],
) {
    // A prefetch is a hint on an address, never a dereference: no bounds needed.
    let hp = hot.as_ptr();
    let prefetch_rows = |a: &[u32; 3]| {
        for &i in a {
            prefetch_addr(hp.wrapping_add(i as usize).cast());
        }
    };
    for a in at.iter().take(AHEAD.min(chunk.len())) {
        prefetch_rows(a);
    }
    for ((s, a), ahead) in chunk.iter().zip(at).zip(&at[AHEAD..]) {
        prefetch_rows(ahead);
        let [a0, a1, a2] = a.map(|i| i as usize);
        // A packet not recorded has row 0 at u32::MAX, past any bank (a layout has at most
        // 2 x 8 x 2^16 x 8 buckets): one test for both that and row 0's bounds.
        let Some(l0) = hot.get(a0).map(|b| b.last_seen) else {
            continue;
        };
        let tb = &tables[s.qid & (MAX_QIDS - 1)];
        let last = [l0, hot[a1].last_seen, hot[a2].last_seen];
        let bin = |t: &BinTable, v: u64| if ONE { t.bin1(v) } else { t.bin(v) };
        // Each row's inter-arrival bin as soon as its last-seen is loaded (all three loads
        // first), so no last-seen value or bin stays live across the other counters. A
        // bucket's first packet (last-seen 0) adds no gap: its increment is 0.
        for (&l, i) in last.iter().zip([a0, a1, a2]) {
            hot[i].iat[bin(&tb.iat, s.t_ns.saturating_sub(l))] += u16::from(l != 0);
        }
        let lat = bin(&tb.lat, u64::from(s.sojourn_ns));
        let pc = PC_INC[usize::from(s.colour)];
        let t = s.t_ns.max(1);
        let len = u64::from(s.len);
        for i in [a0, a1, a2] {
            let b = &mut hot[i];
            b.last_seen = t;
            b.bytes += len;
            add_packet_colour(b, pc);
            b.lat[lat] += 1;
        }
        if CAL && calibrating[s.qid & (MAX_QIDS - 1)] {
            let gap = (last[0] != 0)
                .then(|| s.t_ns.saturating_sub(last[0]).min(u64::from(u32::MAX)) as u32);
            sk.calibrate_into(fine, s, Some(s.sojourn_ns), gap);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::kestrel::layout::{bin, mix};

    /// Check `got` against the compare search for `edges` at and around every edge and octave
    /// boundary, at the extremes and at 64 random values (drawn from `x`).
    fn probe_bins(edges: &[u32; EDGES], x: &mut u64, got: impl Fn(u64) -> usize) {
        let probe = |v: u64| {
            let want = bin(edges, v.min(u64::from(u32::MAX)) as u32);
            assert_eq!(got(v), want, "edges {edges:?} value {v}");
        };
        for &edge in edges {
            for d in [0, 1, 2] {
                probe(u64::from(edge) + d);
                probe(u64::from(edge).saturating_sub(d));
            }
        }
        for o in 0..64 {
            probe(1u64 << o);
            probe((1u64 << o) - 1);
        }
        for _ in 0..64 {
            *x = mix(*x);
            probe(*x >> (*x % 64));
        }
        probe(0);
        probe(u64::MAX);
    }

    /// The table's bin is the compare search's for every value, at and around every edge
    /// and octave boundary and at random, for random edge sets (those it accepts).
    #[test]
    fn table_bins_equal_compare_bins() {
        let mut x = 7u64;
        let mut accepted = 0;
        for round in 0..2000 {
            x = mix(x);
            // Edges from a random start with random ratios 1.001 .. 16 (some sets put three
            // edges in one octave: refused), plus the defaults and edges at the extremes.
            let mut e = [0u32; EDGES];
            let mut v = (x % 100_000) as f64;
            for slot in &mut e {
                x = mix(x);
                v = v * (1.001 + (x % 15_000) as f64 / 1000.0) + 1.0;
                *slot = v.min(f64::from(u32::MAX)) as u32;
            }
            if round == 0 {
                e = QidEdges::DEFAULT.lat;
            }
            if round == 1 {
                e = [0, 1, 2, 4, 8, 1 << 31, u32::MAX];
            }
            if e.windows(2).any(|w| w[0] >= w[1]) {
                continue;
            }
            let Some(t) = BinTable::new(&e) else {
                let per_octave = |o: u32| e.iter().filter(|&&v| (v | 1).ilog2() == o).count();
                assert!((0..32).any(|o| per_octave(o) >= 3), "{e:?} refused");
                continue;
            };
            accepted += 1;
            probe_bins(&e, &mut x, |v| t.bin(v));
        }
        assert!(accepted > 500, "{accepted} edge sets had tables");
    }

    /// Where no octave holds two edges above its lowest value, the one-compare bin is the
    /// compare search's; edges a factor of two or more apart always allow it.
    #[test]
    fn one_compare_bins_equal_compare_bins() {
        let mut x = 11u64;
        let mut one = 0;
        for _ in 0..2000 {
            x = mix(x);
            let spread = x.is_multiple_of(2);
            let mut e = [0u32; EDGES];
            let mut v = (x % 5_000) as f64;
            for slot in &mut e {
                x = mix(x);
                let ratio = if spread { 2.0 } else { 1.001 } + (x % 14_000) as f64 / 1000.0;
                v = v * ratio + 1.0;
                *slot = v.min(f64::from(u32::MAX)) as u32;
            }
            if e.windows(2).any(|w| w[0] >= w[1]) {
                continue;
            }
            let Some(t) = BinTable::new(&e) else {
                continue;
            };
            // (Unless the clamp at u32::MAX brought the last two closer.)
            if spread && !e.contains(&u32::MAX) {
                assert!(t.one_per_octave(), "{e:?}");
            }
            if !t.one_per_octave() {
                continue;
            }
            one += 1;
            probe_bins(&e, &mut x, |v| t.bin1(v));
        }
        assert!(one > 500, "{one} edge sets had one-compare tables");
        assert!(BinTable::new(&QidEdges::DEFAULT.lat)
            .unwrap()
            .one_per_octave());
        assert!(BinTable::new(&QidEdges::DEFAULT.iat)
            .unwrap()
            .one_per_octave());
    }

    /// Each colour byte's increment adds one packet and one to its colour (red for 2 and
    /// above, as `Sketcher::record` clamps), and a bucket with every lane one below the
    /// spill bound takes it with no carry into a neighbouring lane.
    #[test]
    fn packet_colour_increment_has_no_carry() {
        for c in 0..=u8::MAX {
            let mut b = HotBucket::ZERO;
            b.packets = SPILL_AT - 1;
            b.colour = [SPILL_AT - 1; 3];
            add_packet_colour(&mut b, PC_INC[usize::from(c)]);
            assert_eq!(b.packets, SPILL_AT);
            let hit = usize::from(c.min(2));
            for (k, &n) in b.colour.iter().enumerate() {
                let want = if k == hit { SPILL_AT } else { SPILL_AT - 1 };
                assert_eq!(n, want, "colour byte {c}, lane {k}");
            }
            let mut z = HotBucket::ZERO;
            add_packet_colour(&mut z, PC_INC[usize::from(c)]);
            assert_eq!((z.packets, z.colour.iter().sum::<u16>()), (1, 1));
            assert_eq!(z.colour[hit], 1);
        }
    }

    #[test]
    fn close_edges_have_no_table() {
        assert!(BinTable::new(&[1000, 1100, 1200, 5000, 6000, 7000, 9000]).is_none());
        assert!(BinTable::new(&QidEdges::DEFAULT.iat).is_some());
    }
}
