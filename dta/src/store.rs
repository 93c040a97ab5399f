//! The translator's writes into the region (seed appendix A, Algorithms 1, 3, 5 and section
//! 4 "Postcarding"), I/O-free: the caller hands in parsed reports, we store.
//!
//! - Key-Write: N copies at `slot(key, n)`; with one data word the slot is one 64-bit
//!   atomic store (no torn reads, any number of writers); with 3 or 7 words a per-slot
//!   sequence word makes it a seqlock: odd while a writer is in it, bumped with Release
//!   after the checksum and data, so a reader that sees the same even sequence before and
//!   after has a consistent slot (and a writer that finds it odd refuses `slot_busy`
//!   after a bounded retry instead of waiting).
//! - Key-Increment: N relaxed atomic fetch-adds.
//! - Append: per-list batches staged in the translator, written into the ring at
//!   `(head + j) mod length`, then the head (entries ever written) published with Release.
//!   One writer per list (the translator steers lists to an owner worker).
//! - Postcarding: a per-worker cache of `cache_slots` entries holding up to B hops of one
//!   key; the chunk is written when all B hops are in, or early when another key evicts it
//!   (missing hops written blank), or on [`Postcarder::flush_all`].

use crate::hash::{self, BLANK};
use crate::layout::{Layout, PostcardMode};
use crate::region::Region;
use crate::Refusal;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Bounded retries of a busy Key-Write slot before refusing.
const BUSY_RETRIES: u32 = 64;

/// The region as the translator writes it. Cheap to clone (one per worker).
#[derive(Debug, Clone)]
pub struct Store {
    region: Arc<Region>,
    l: Layout,
    /// `mod S` of the Key-Write and Key-Increment sections, by multiplication.
    kw_mod: hash::FastMod,
    ki_mod: hash::FastMod,
    /// `mod C` of the Postcarding chunks.
    pc_mod: hash::FastMod,
    /// The Key-Write checksum's mask (`kw_checksum_bits` low bits).
    kw_mask: u32,
    /// The redundancies one-word Key-Write and Key-Increment store without further checks
    /// are `1..=` these: the maximum when the section has slots (and, for Key-Write, one
    /// data word), else 0 (every report then takes the checks one by one, for its refusal).
    kw_one_max: u32,
    ki_max: u32,
}

impl Store {
    pub fn new(region: Arc<Region>) -> Store {
        let l = *region.layout();
        Store {
            region,
            kw_mod: hash::FastMod::new(l.sizes.kw_slots),
            ki_mod: hash::FastMod::new(l.sizes.ki_slots),
            pc_mod: hash::FastMod::new(l.sizes.pc_chunks),
            kw_mask: hash::mask(l.sizes.kw_checksum_bits),
            kw_one_max: if l.sizes.kw_slots > 0 && l.sizes.kw_words == 1 {
                l.sizes.kw_max_redundancy
            } else {
                0
            },
            ki_max: if l.sizes.ki_slots > 0 {
                l.sizes.ki_max_redundancy
            } else {
                0
            },
            l,
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.l
    }

    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    #[inline(always)]
    fn kw64(&self) -> &[AtomicU64] {
        self.region.kw64()
    }

    fn kw32(&self) -> &[AtomicU32] {
        let s = &self.l.sizes;
        self.region
            .u32s(self.l.kw_offset, s.kw_slots * (2 + s.kw_words as u64))
    }

    /// Key-Write `data` (exactly K words) under `key` into `redundancy` slots. Returns the
    /// number of slot writes.
    pub fn key_write(&self, redundancy: u8, key: u32, data: &[u32]) -> Result<u32, Refusal> {
        if let [d] = data {
            return self.key_write_one(redundancy, key, *d);
        }
        let s = &self.l.sizes;
        check_primitive(s.kw_slots, redundancy, s.kw_max_redundancy)?;
        if data.len() != s.kw_words as usize {
            return Err(Refusal::DataWords);
        }
        // One data word (K = 1) was taken by `key_write_one` above: here K is 3 or 7.
        let kc = hash::KeyCrc::new(key);
        let csum = kc.crc() & hash::mask(s.kw_checksum_bits);
        let w = self.kw32();
        let stride = 2 + s.kw_words as usize;
        for n in 0..redundancy {
            let base = self.kw_mod.of(kc.crc_n(n)) as usize * stride;
            let seq = &w[base];
            let mut tries = 0;
            let s0 = loop {
                let cur = seq.load(Ordering::Relaxed);
                if cur & 1 == 0
                    && seq
                        .compare_exchange_weak(cur, cur + 1, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    break cur;
                }
                tries += 1;
                if tries > BUSY_RETRIES {
                    return Err(Refusal::SlotBusy);
                }
                std::hint::spin_loop();
            };
            w[base + 1].store(csum, Ordering::Relaxed);
            for (i, d) in data.iter().enumerate() {
                w[base + 2 + i].store(*d, Ordering::Relaxed);
            }
            seq.store(s0.wrapping_add(2), Ordering::Release);
        }
        Ok(redundancy as u32)
    }

    /// [`key_write`](Self::key_write) of one data word (the per-packet common case, inlined
    /// into the translator's loop): the same checks in the same order, then one 64-bit
    /// store per slot. A redundancy in `1..=kw_one_max` passes them all at once (one
    /// compare); any other goes through them one by one for its refusal.
    #[inline(always)]
    pub fn key_write_one(&self, redundancy: u8, key: u32, data: u32) -> Result<u32, Refusal> {
        if u32::from(redundancy).wrapping_sub(1) >= self.kw_one_max {
            let s = &self.l.sizes;
            check_primitive(s.kw_slots, redundancy, s.kw_max_redundancy)?;
            if s.kw_words != 1 {
                return Err(Refusal::DataWords);
            }
        }
        // The key's CRC register (four independent slice-by-4 lookups) gives the checksum,
        // and slot 0's CRC with one more byte step (cheaper than a second set of four
        // lookups); slot n's CRC is slot 0's xor the table's entry n (`KeyCrc::crc_n_xor`).
        let kc = hash::KeyCrc::new(key);
        let word = (kc.crc() & self.kw_mask) as u64 | (data as u64) << 32;
        let slots = self.kw64();
        let (c0, m) = (kc.crc_n(0), self.kw_mod);
        // Redundancy is at least 1 here: slot 0 (`crc_n_xor(c0, 0)` is `c0`), slot 1 with its
        // table entry a constant, then the others.
        slots[m.of(c0) as usize].store(word, Ordering::Release);
        if redundancy > 1 {
            slots[m.of(hash::KeyCrc::crc_n_xor(c0, 1)) as usize].store(word, Ordering::Release);
            for n in 2..redundancy {
                slots[m.of(hash::KeyCrc::crc_n_xor(c0, n)) as usize].store(word, Ordering::Release);
            }
        }
        Ok(redundancy as u32)
    }

    /// Add `counter` to `key`'s `redundancy` counters. Returns the number of fetch-adds.
    /// A redundancy in `1..=ki_max` passes the checks at once, as for
    /// [`key_write_one`](Self::key_write_one).
    #[inline(always)]
    pub fn key_increment(&self, redundancy: u8, key: u32, counter: u64) -> Result<u32, Refusal> {
        let s = &self.l.sizes;
        if u32::from(redundancy).wrapping_sub(1) >= self.ki_max {
            check_primitive(s.ki_slots, redundancy, s.ki_max_redundancy)?;
        }
        let c = self.region.ki64();
        let (c0, m) = (hash::crc_key0(key), self.ki_mod);
        c[m.of(c0) as usize].fetch_add(counter, Ordering::Relaxed);
        if redundancy > 1 {
            c[m.of(hash::KeyCrc::crc_n_xor(c0, 1)) as usize].fetch_add(counter, Ordering::Relaxed);
            for n in 2..redundancy {
                c[m.of(hash::KeyCrc::crc_n_xor(c0, n)) as usize]
                    .fetch_add(counter, Ordering::Relaxed);
            }
        }
        Ok(redundancy as u32)
    }

    /// Write one postcard chunk (`vals[..B]`, [`BLANK`] where no postcard) of `key` into its
    /// `pc_redundancy` chunks.
    fn write_chunk(&self, key: u32, vals: &[u32]) -> u32 {
        let s = &self.l.sizes;
        let b = s.pc_hops as usize;
        let words = self.region.u32s(self.l.pc_offset, s.pc_chunks * b as u64);
        let kc = hash::KeyCrc::new(key);
        let enc = encode_chunk_kc(&self.l, kc, vals);
        for j in 0..s.pc_redundancy as u8 {
            let base = self.pc_mod.of(kc.crc_n(j)) as usize * b;
            for (d, w) in words[base..base + b].iter().zip(&enc) {
                d.store(*w, Ordering::Relaxed);
            }
        }
        std::sync::atomic::fence(Ordering::Release);
        s.pc_redundancy
    }

    /// Write `vals` as list `list`'s next entries and publish the new head. The caller is
    /// the list's only writer.
    fn append_entries(&self, list: u32, vals: &[u32]) {
        let s = &self.l.sizes;
        let heads = self.region.u64s(self.l.ap_heads_offset, s.ap_lists as u64);
        let len = s.ap_list_len;
        let data = self
            .region
            .u32s(self.l.ap_data_offset + 4 * len * list as u64, len);
        let head = heads[list as usize].load(Ordering::Relaxed);
        // One division per batch: the batch is at most two runs, up to the ring's end and
        // from its start (a batch is no longer than the ring, `Layout::validate`).
        let at = (head % len) as usize;
        let (run, wrapped) = vals.split_at(vals.len().min(data.len() - at));
        for (d, v) in data[at..].iter().zip(run) {
            d.store(*v, Ordering::Relaxed);
        }
        for (d, v) in data.iter().zip(wrapped) {
            d.store(*v, Ordering::Relaxed);
        }
        heads[list as usize].store(head + vals.len() as u64, Ordering::Release);
    }
}

/// The checks every Key-Write and Key-Increment makes first, in this order: the primitive
/// has slots in the region, and the redundancy is between 1 and its maximum.
#[inline]
fn check_primitive(slots: u64, n: u8, max: u32) -> Result<(), Refusal> {
    if slots == 0 {
        Err(Refusal::PrimitiveDisabled)
    } else if n == 0 {
        Err(Refusal::RedundancyZero)
    } else if n as u32 > max {
        Err(Refusal::RedundancyTooHigh)
    } else {
        Ok(())
    }
}

/// The words a postcard chunk of `key` stores for hop values `vals[..B]` ([`BLANK`] where
/// no postcard): hashed mode `CRC32(key LE || 0x80|i) xor g(v)`, raw mode the values.
pub fn encode_chunk(l: &Layout, key: u32, vals: &[u32]) -> [u32; 8] {
    encode_chunk_kc(l, hash::KeyCrc::new(key), vals)
}

/// [`encode_chunk`] with the key's CRC register already computed (the chunk's slots need it
/// too). The mode is matched once per chunk, not per hop.
#[inline]
fn encode_chunk_kc(l: &Layout, kc: hash::KeyCrc, vals: &[u32]) -> [u32; 8] {
    let s = &l.sizes;
    let hops = (s.pc_hops as usize).min(vals.len()).min(8);
    let mut enc = [0u32; 8];
    match s.pc_mode {
        PostcardMode::Hashed => {
            // `CRC32(key LE || 0x80|i)` is `CRC32(key LE || 0x80)` xor the table's entry i
            // (`KeyCrc::crc_n_xor`): one CRC step per chunk, a constant per hop.
            let c80 = kc.crc_n(0x80);
            for (i, (e, v)) in enc[..hops].iter_mut().zip(&vals[..hops]).enumerate() {
                *e = hash::KeyCrc::crc_n_xor(c80, i as u8) ^ hash::g(*v);
            }
        }
        PostcardMode::Raw => enc[..hops].copy_from_slice(&vals[..hops]),
    }
    enc
}

/// Where [`Appender`] batches and [`Postcarder`] chunks go: the mapped region ([`Store`]),
/// or RDMA WRITEs toward a collector's NIC (`crate::rdma`).
pub trait Sink {
    /// Write `vals` as list `list`'s next entries and publish the new head (the caller is
    /// the list's only writer).
    fn append_entries(&mut self, list: u32, vals: &[u32]);
    /// Write `key`'s chunk of hop values `vals[..B]`; returns the chunk copies written.
    fn write_chunk(&mut self, key: u32, vals: &[u32]) -> u32;
}

impl Sink for Store {
    fn append_entries(&mut self, list: u32, vals: &[u32]) {
        Store::append_entries(self, list, vals)
    }

    fn write_chunk(&mut self, key: u32, vals: &[u32]) -> u32 {
        Store::write_chunk(self, key, vals)
    }
}

/// One worker's Append batching (seed Algorithm 3): `lists x batch` staged entries.
#[derive(Debug)]
pub struct Appender {
    batch: usize,
    lists: u32,
    staged: Vec<u32>,
    fill: Vec<u8>,
}

impl Appender {
    pub fn new(l: &Layout) -> Appender {
        let batch = l.sizes.ap_batch as usize;
        Appender {
            batch,
            lists: l.sizes.ap_lists,
            staged: vec![0; batch * l.sizes.ap_lists as usize],
            fill: vec![0; l.sizes.ap_lists as usize],
        }
    }

    /// Stage `data` for `list`; write the batch when it is full. Returns region writes (0 or
    /// 1 batch write).
    #[inline]
    pub fn append(&mut self, store: &mut impl Sink, list: u32, data: u32) -> Result<u32, Refusal> {
        let l = list as usize;
        // One fill count per list: none at all when Append is disabled.
        let Some(fill) = self.fill.get_mut(l) else {
            return Err(if self.lists == 0 {
                Refusal::PrimitiveDisabled
            } else {
                Refusal::UnknownList
            });
        };
        let f = *fill as usize;
        let start = l * self.batch;
        self.staged[start + f] = data;
        if f + 1 < self.batch {
            *fill += 1;
            return Ok(0);
        }
        *fill = 0;
        store.append_entries(list, &self.staged[start..start + self.batch]);
        Ok(1)
    }

    /// Lists (the range of [`flush_list`](Self::flush_list)).
    pub fn lists(&self) -> u32 {
        self.lists
    }

    /// Write list `l`'s partial batch, if any. Returns whether there was one.
    pub fn flush_list(&mut self, store: &mut impl Sink, l: u32) -> bool {
        let (i, f) = (
            l as usize,
            self.fill.get(l as usize).copied().unwrap_or(0) as usize,
        );
        if f == 0 {
            return false;
        }
        store.append_entries(l, &self.staged[i * self.batch..i * self.batch + f]);
        self.fill[i] = 0;
        true
    }

    /// Write every partial batch (shutdown, or a timer so entries do not wait forever).
    pub fn flush_all(&mut self, store: &mut impl Sink) -> u32 {
        let mut writes = 0;
        for l in 0..self.lists as usize {
            let f = self.fill[l] as usize;
            if f > 0 {
                store.append_entries(l as u32, &self.staged[l * self.batch..l * self.batch + f]);
                self.fill[l] = 0;
                writes += 1;
            }
        }
        writes
    }
}

/// A Postcarding cache entry: `N` words, aligned to its size (32 or 64 bytes), so that an
/// entry never straddles a 64-byte cache line (the 40-byte entry before had every other
/// entry across two). Hop values in words `0..B`, the key in word `N - 2`, the present mask
/// (bit i: hop i is in; 0: the entry is free) in word `N - 1`.
trait Entry: Copy + std::fmt::Debug {
    /// Words: 8 ([`Entry8`], B <= 6) or 16 ([`Entry16`], B = 7 or 8).
    const N: usize;
    /// Every hop value [`BLANK`], key 0, free.
    const FREE: Self;
    fn w(&self) -> &[u32];
    fn w_mut(&mut self) -> &mut [u32];
}

/// 32 bytes: up to 6 hops (the default B = 5).
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
struct Entry8([u32; 8]);

/// 64 bytes: 7 or 8 hops.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Entry16([u32; 16]);

/// [`Entry`] for an entry type of `$n` words: the key and the present mask in the last two.
macro_rules! entry_words {
    ($t:ident, $n:literal) => {
        impl Entry for $t {
            const N: usize = $n;
            const FREE: Self = {
                let mut w = [BLANK; $n];
                (w[$n - 2], w[$n - 1]) = (0, 0);
                $t(w)
            };
            #[inline(always)]
            fn w(&self) -> &[u32] {
                &self.0
            }
            #[inline(always)]
            fn w_mut(&mut self) -> &mut [u32] {
                &mut self.0
            }
        }
    };
}
entry_words!(Entry8, 8);
entry_words!(Entry16, 16);

/// The cache's entries, in the layout B allows.
#[derive(Debug)]
enum Entries {
    Small(Vec<Entry8>),
    Large(Vec<Entry16>),
}

/// What a postcard did in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PostcardOutcome {
    /// Chunks written (complete paths).
    pub complete: u32,
    /// Chunks written early for an evicted key.
    pub early: u32,
    /// The same hop arrived twice before the path completed (the later value wins).
    pub duplicate_hop: bool,
}

/// One worker's Postcarding cache (seed section 4 and 5.2: a hash-indexed table keyed by
/// flow, emitting on completion or collision).
#[derive(Debug)]
pub struct Postcarder {
    entries: Entries,
    /// `mod` the entries, by multiplication.
    index_mod: hash::FastMod,
    hops: u32,
    full: u32,
    /// The region has a Postcarding section.
    enabled: bool,
    /// A hop below this and a value below [`value_ok`](Self::value_ok) pass every check:
    /// B when enabled, else 0.
    hop_ok: u32,
    /// The value limit in hashed mode, else `u64::MAX` (raw values are not checked).
    value_ok: u64,
}

impl Postcarder {
    pub fn new(l: &Layout, cache_slots: usize) -> Postcarder {
        let hops = l.sizes.pc_hops;
        let slots = cache_slots.max(1);
        Postcarder {
            entries: if hops as usize <= Entry8::N - 2 {
                Entries::Small(vec![Entry8::FREE; slots])
            } else {
                Entries::Large(vec![Entry16::FREE; slots])
            },
            index_mod: hash::FastMod::new(slots as u64),
            hops,
            full: (1u32 << hops) - 1,
            enabled: l.sizes.pc_chunks > 0,
            hop_ok: if l.sizes.pc_chunks > 0 { hops } else { 0 },
            value_ok: match l.sizes.pc_mode {
                PostcardMode::Hashed => 1u64 << l.sizes.pc_value_bits,
                PostcardMode::Raw => u64::MAX,
            },
        }
    }

    /// Why a postcard [`postcard`](Self::postcard)'s two compares did not pass was refused:
    /// the checks one by one, in their order.
    #[cold]
    #[inline(never)]
    fn refusal(&self, hop: u8, v: u32) -> Refusal {
        if !self.enabled {
            Refusal::PrimitiveDisabled
        } else if hop as u32 >= self.hops {
            Refusal::HopOutOfRange
        } else {
            debug_assert!(v as u64 >= self.value_ok);
            Refusal::ValueOutOfRange
        }
    }

    /// Write entry `e` (its key's chunk, missing hops blank) and free it.
    ///
    /// The sink gets the entry's first 8 words, of which it reads `..B` (the hop values; in
    /// a 32-byte entry words 6 and 7 are the key and mask). A slice of constant length 8
    /// keeps the chunk's encoding what it was with the 40-byte entries: unrolled, one 4-byte
    /// load per hop. Given `..B` (a length known only at run time) the compiler vectorised
    /// it, and its 16-byte load of the hop values just stored by the last few reports (4-byte
    /// stores, possibly still in the store buffer) cannot be forwarded from them.
    fn flush<E: Entry>(store: &mut impl Sink, e: &mut E) -> u32 {
        let w = e.w_mut();
        let n = store.write_chunk(w[E::N - 2], &w[..8]);
        *e = E::FREE;
        n
    }

    #[inline(always)]
    pub fn postcard(
        &mut self,
        store: &mut impl Sink,
        key: u32,
        hop: u8,
        v: u32,
    ) -> Result<PostcardOutcome, Refusal> {
        // The three checks (enabled, hop below B, value below the limit in hashed mode) as
        // two compares; a refusal takes them one by one, for its reason.
        if hop as u32 >= self.hop_ok || v as u64 >= self.value_ok {
            return Err(self.refusal(hop, v));
        }
        let idx = self.index_mod.of(hash::g(key)) as usize;
        let full = self.full;
        Ok(match &mut self.entries {
            Entries::Small(es) => Self::store_in(store, &mut es[idx], key, hop, v, full),
            Entries::Large(es) => Self::store_in(store, &mut es[idx], key, hop, v, full),
        })
    }

    /// A checked postcard into its entry `e`.
    #[inline(always)]
    fn store_in<E: Entry>(
        store: &mut impl Sink,
        e: &mut E,
        key: u32,
        hop: u8,
        v: u32,
        full: u32,
    ) -> PostcardOutcome {
        let mut out = PostcardOutcome::default();
        let (k, p) = (E::N - 2, E::N - 1);
        if e.w()[p] != 0 && e.w()[k] != key {
            Self::flush(store, e);
            out.early = 1;
        }
        let w = e.w_mut();
        let bit = 1u32 << hop;
        out.duplicate_hop = w[p] & bit != 0;
        // `hop < B <= N - 2` (checked by the caller): the mask only spares a bounds check.
        w[hop as usize & (E::N - 1)] = v;
        w[k] = key;
        w[p] |= bit;
        if w[p] == full {
            Self::flush(store, e);
            out.complete = 1;
        }
        out
    }

    /// Write up to `max` cached partial paths, resuming at entry `*cursor` (the caller keeps
    /// it between calls). Returns the chunks written and whether the scan reached the end
    /// (then `*cursor` is back at 0).
    pub fn flush_some(
        &mut self,
        store: &mut impl Sink,
        cursor: &mut usize,
        max: usize,
    ) -> (u32, bool) {
        match &mut self.entries {
            Entries::Small(es) => Self::flush_from(store, es, cursor, max),
            Entries::Large(es) => Self::flush_from(store, es, cursor, max),
        }
    }

    fn flush_from<E: Entry>(
        store: &mut impl Sink,
        es: &mut [E],
        cursor: &mut usize,
        max: usize,
    ) -> (u32, bool) {
        let mut n = 0;
        while *cursor < es.len() {
            if n as usize == max {
                return (n, false);
            }
            let e = &mut es[*cursor];
            if e.w()[E::N - 1] != 0 {
                Self::flush(store, e);
                n += 1;
            }
            *cursor += 1;
        }
        *cursor = 0;
        (n, true)
    }

    /// Write every cached partial path (missing hops blank). Returns chunks written.
    pub fn flush_all(&mut self, store: &mut impl Sink) -> u32 {
        let mut cursor = 0;
        self.flush_some(store, &mut cursor, usize::MAX).0
    }
}

#[cfg(test)]
mod postcarder_model {
    use super::*;
    use crate::layout::Sizes;

    /// The cache as it was written before the aligned entries: 40-byte entries, a `Vec` of them.
    #[derive(Clone, Copy)]
    struct Model {
        key: u32,
        present: u8,
        vals: [u32; 8],
    }

    /// Records every chunk write (key, the B hop values `vals[..B]`).
    #[derive(Default)]
    struct Record(Vec<(u32, Vec<u32>)>, usize);

    impl Sink for Record {
        fn append_entries(&mut self, _: u32, _: &[u32]) {}
        fn write_chunk(&mut self, key: u32, vals: &[u32]) -> u32 {
            self.0.push((key, vals[..self.1].to_vec()));
            1
        }
    }

    /// Every B of 1..=8 and a small cache (evictions, duplicates, completions, flushes):
    /// the outcomes and the chunks written (keys, values, blanks) are those of the 40-byte
    /// entries before.
    #[test]
    fn aligned_entries_match_the_40_byte_entries() {
        for hops in 1..=8u32 {
            let l = Layout::new(Sizes {
                pc_hops: hops,
                ..Sizes::default()
            })
            .unwrap();
            for slots in [1usize, 7, 64] {
                let mut pc = Postcarder::new(&l, slots);
                let (mut got, mut want) = (Record(Vec::new(), hops as usize), Record::default());
                let m = hash::FastMod::new(slots as u64);
                let mut model = vec![
                    Model {
                        key: 0,
                        present: 0,
                        vals: [BLANK; 8]
                    };
                    slots
                ];
                let full = ((1u16 << hops) - 1) as u8;
                let mut x = 0x2545_f491u32;
                for i in 0..20_000u32 {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    let (key, hop, v) = (x % 97, (x >> 8) as u8 % hops as u8, i & 0xffff);
                    let o = pc.postcard(&mut got, key, hop, v).unwrap();
                    let mut w = PostcardOutcome::default();
                    let e = &mut model[m.of(hash::g(key)) as usize];
                    if e.present != 0 && e.key != key {
                        want.0.push((e.key, e.vals[..hops as usize].to_vec()));
                        (e.present, e.vals) = (0, [BLANK; 8]);
                        w.early = 1;
                    }
                    e.key = key;
                    w.duplicate_hop = e.present & (1 << hop) != 0;
                    e.vals[hop as usize] = v;
                    e.present |= 1 << hop;
                    if e.present == full {
                        want.0.push((e.key, e.vals[..hops as usize].to_vec()));
                        (e.present, e.vals) = (0, [BLANK; 8]);
                        w.complete = 1;
                    }
                    assert_eq!(o, w, "B {hops}, {slots} entries, postcard {i}");
                    if i % 5000 == 4999 {
                        let mut cursor = 0;
                        while !pc.flush_some(&mut got, &mut cursor, 3).1 {}
                        for e in model.iter_mut().filter(|e| e.present != 0) {
                            want.0.push((e.key, e.vals[..hops as usize].to_vec()));
                            (e.present, e.vals) = (0, [BLANK; 8]);
                        }
                    }
                }
                pc.flush_all(&mut got);
                for e in model.iter_mut().filter(|e| e.present != 0) {
                    want.0.push((e.key, e.vals[..hops as usize].to_vec()));
                }
                assert_eq!(got.0, want.0, "B {hops}, {slots} entries");
            }
        }
    }
}
