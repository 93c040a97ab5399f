//! The shard pointer array of a [`UpfTables`](super::UpfTables) snapshot, and the recycling
//! of earlier versions' arrays that makes a rebuild cost only the entries it changes.
//!
//! A snapshot holds one `Arc` of a flat array of shard pointers: cloning the tables is one
//! increment, and a worker's lookup reads the array entry, then the shard. Copying the array
//! for every rebuild would cost one reference-count increment per shard (an atomic in each
//! shard's own allocation, a cache miss each), and as many decrements when the retired
//! snapshot is freed: 2^17 each at a million sessions. Grouping the pointers in chunks of
//! 16 behind one `Arc` each (the previous layout) cut that to `shards / 16` per rebuild,
//! still growing with the shard count, which grows with the sessions.
//!
//! Here a rebuild copies nothing. [`ShardDirs`] keeps the arrays of the last few versions;
//! once no snapshot holds one any more (the publisher has reclaimed it: `Arc::get_mut`
//! succeeds), it is brought up to date by rewriting only the entries changed since its
//! version (each rebuild logs the indices it changed) and becomes the next version. A
//! rebuild then costs O(entries changed by the last few rebuilds), whatever the shard
//! count. This is the left-right technique (P. Ramalhete and A. Correia, "Left-Right: A
//! Concurrency Control Technique with Wait-Free Population Oblivious Reads", 2015: the
//! writer keeps a second instance and replays its changes on it once readers have left
//! it), with readers' departure seen in the reference count of the RCU-published snapshot
//! (P. McKenney, "RCU Usage in the Linux Kernel: One Decade Later", 2013) instead of read
//! indicators, so the readers' side is unchanged. Only when every kept array is still held
//! (readers several versions behind) is the array copied, as before.

use super::keymap::KeySlot;
use super::pages::{apply_changes, build_pages, page_changes, page_of, PageRef, TeidPage, PAGE};
use super::tables::Shard;
use std::collections::VecDeque;
use std::sync::Arc;

/// Arrays [`ShardDirs`] keeps besides the current one. A reader holds one version at a
/// time and the publisher's retired list one more until its next reclaim, so with one
/// worker two earlier arrays are held at most and a third is free.
pub const SPARE_DIRS: usize = 3;

/// Versions an earlier array may lag the current one and still be kept: replaying more
/// rebuilds' changes than this approaches a copy of the array.
pub const MAX_LAG: u64 = 16;

/// An immutable array of shard pointers, shared between snapshots as a whole, and beside it
/// one array per map kind of each shard's key-map slot arrays (its maps' own `Arc`s:
/// [`KeyMap::slots_arc`](super::keymap::KeyMap::slots_arc)). A packet's lookup reads its
/// shard's entry in its kind's array (16 bytes a shard: 64 KiB at 4,096 shards, mostly
/// cached) and starts loading its home slot at once, instead of first loading the shard's
/// own line (the maps' headers: one line per shard scattered over the heap, a miss at 100k
/// sessions) and only then the slot. A shard is never written once in a table, so the
/// entries stay its maps'. The four arrays are cloned, held and recycled together.
#[derive(Debug, Clone)]
pub struct ShardTable {
    dir: Arc<[Arc<Shard>]>,
    /// By map: uplink TEID, UE IPv4, UE IPv6 (`Shard::by_teid`, `by_ue_v4`, `by_ue_v6`).
    maps: [Arc<[Arc<[KeySlot]>]>; 3],
    /// The direct TEID pages ([`super::pages`]), one entry a position: page `p` holds the
    /// slots of TEIDs `p * PAGE ..`, each copied from the shard at its own position.
    pages: Arc<[PageRef]>,
}

/// The arrays of a [`ShardTable`] no other table holds, to rewrite in place.
struct DirMut<'a> {
    shards: &'a mut [Arc<Shard>],
    maps: [&'a mut [Arc<[KeySlot]>]; 3],
    pages: &'a mut [PageRef],
}

/// A logged change to a page entry (the others are shard positions).
const PAGE_ENTRY: u32 = 1 << 31;

impl DirMut<'_> {
    /// Entry `i` made `s`'s (no change if `i` is past the end); whether it was in range.
    fn set(&mut self, i: usize, s: Arc<Shard>) -> bool {
        let Some(slot) = self.shards.get_mut(i) else {
            return false;
        };
        let [t, v4, v6] = &mut self.maps;
        t[i] = s.by_teid.slots_arc().clone();
        v4[i] = s.by_ue_v4.slots_arc().clone();
        v6[i] = s.by_ue_v6.slots_arc().clone();
        *slot = s;
        true
    }
}

impl ShardTable {
    /// `len` shards, all `fill`.
    pub fn new(len: usize, fill: Arc<Shard>) -> ShardTable {
        (0..len).map(|_| fill.clone()).collect()
    }

    /// The arrays, if this table is their only holder.
    fn unique(&mut self) -> Option<DirMut<'_>> {
        let [t, v4, v6] = &mut self.maps;
        Some(DirMut {
            shards: Arc::get_mut(&mut self.dir)?,
            maps: [Arc::get_mut(t)?, Arc::get_mut(v4)?, Arc::get_mut(v6)?],
            pages: Arc::get_mut(&mut self.pages)?,
        })
    }

    /// A copy of the arrays (one increment per entry), held by no other table.
    fn copy(&self) -> ShardTable {
        let map = |m: &Arc<[Arc<[KeySlot]>]>| m.iter().cloned().collect();
        ShardTable {
            dir: self.dir.iter().cloned().collect(),
            maps: [map(&self.maps[0]), map(&self.maps[1]), map(&self.maps[2])],
            pages: self.pages.iter().cloned().collect(),
        }
    }

    /// The table with twice the positions, position `j` holding this table's shard `j / 2`
    /// (a doubling's unsplit halves, `Compiler::grow_shards_above`), its pages kept: a TEID
    /// paged before is filed at one of the two halves of its old position, which both hold
    /// the shard its slot came from. The added pages are empty until a position's new shard
    /// fills them. One increment per entry.
    pub fn doubled(&self) -> ShardTable {
        let half = |m: &Arc<[Arc<[KeySlot]>]>| (0..2 * m.len()).map(|j| m[j / 2].clone()).collect();
        ShardTable {
            dir: (0..2 * self.len())
                .map(|j| self.dir[j / 2].clone())
                .collect(),
            maps: [
                half(&self.maps[0]),
                half(&self.maps[1]),
                half(&self.maps[2]),
            ],
            pages: self
                .pages
                .iter()
                .cloned()
                .chain(std::iter::repeat_n(None, self.pages.len()))
                .collect(),
        }
    }

    /// The direct page of TEID `teid` (as its `u64`) and its slot in it, `None` if the TEID
    /// is past the pages or its page has no slot in use (the TEID's hash map decides).
    #[inline(always)]
    pub fn teid_page(&self, teid: u64) -> Option<(&TeidPage, usize)> {
        page_of(&self.pages, teid)
    }

    /// Heap bytes of the pages in use (each its own allocation with its `Arc` counts,
    /// padded to the slots' alignment).
    pub fn page_bytes(&self) -> usize {
        let n = self.pages.iter().filter(|p| p.is_some()).count();
        n * (PAGE + 1) * std::mem::size_of::<KeySlot>()
    }

    /// The page changes of positions `updates` going from this table's shards to theirs,
    /// applied to `d`'s pages; the page entries written are logged in `changed`.
    fn page_updates(
        &self,
        updates: &[(usize, Arc<Shard>)],
        d: &mut DirMut<'_>,
        changed: &mut Vec<u32>,
    ) {
        let mut ch = Vec::new();
        for (i, s) in updates {
            if let Some(old) = self.dir.get(*i) {
                page_changes(old, s, *i, self.len(), &self.pages, &mut ch);
            }
        }
        let first = changed.len();
        apply_changes(d.pages, &mut ch, changed);
        for c in &mut changed[first..] {
            *c |= PAGE_ENTRY;
        }
    }

    /// Number of shards.
    #[inline]
    pub fn len(&self) -> usize {
        self.dir.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.dir.is_empty()
    }

    /// Shard `i`, `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&Arc<Shard>> {
        self.dir.get(i)
    }

    /// Shard `i` for the packet path: `i` below [`Self::len`] (a shard index of these
    /// tables); past it a panic, never another table's shard.
    #[inline]
    pub fn at(&self, i: usize) -> &Shard {
        &self.dir[i]
    }

    /// The slots of shard `i`'s uplink TEID map (`at(i).by_teid.slots()`, from the
    /// directory's own array: the shard's line is not read).
    #[inline]
    pub fn teid_slots(&self, i: usize) -> &[KeySlot] {
        &self.maps[0][i]
    }

    /// The slots of shard `i`'s UE IPv4 map (as [`Self::teid_slots`]).
    #[inline]
    pub fn ue_v4_slots(&self, i: usize) -> &[KeySlot] {
        &self.maps[1][i]
    }

    /// The slots of shard `i`'s UE IPv6 map (as [`Self::teid_slots`]).
    #[inline]
    pub fn ue_v6_slots(&self, i: usize) -> &[KeySlot] {
        &self.maps[2][i]
    }

    /// Heap bytes of this version's arrays (a shard pointer, three slot-array references and
    /// a page reference a position, and each of the five arrays' `Arc` counts;
    /// [`ShardDirs`] keeps up to [`SPARE_DIRS`] more versions). The pages themselves:
    /// [`Self::page_bytes`].
    pub fn heap_bytes(&self) -> usize {
        const ARC_COUNTS: usize = 2 * std::mem::size_of::<usize>();
        5 * ARC_COUNTS
            + self.len()
                * (std::mem::size_of::<Arc<Shard>>()
                    + 3 * std::mem::size_of::<Arc<[KeySlot]>>()
                    + std::mem::size_of::<PageRef>())
    }

    /// The shards in order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Shard>> + '_ {
        self.dir.iter()
    }

    /// Positions where this table and `other` hold the same shard (same allocation), for
    /// tests and stats.
    pub fn shared_shards(&self, other: &ShardTable) -> usize {
        self.dir
            .iter()
            .zip(other.dir.iter())
            .filter(|(a, b)| Arc::ptr_eq(a, b))
            .count()
    }

    /// True if both tables are the same array (one is a clone of the other).
    pub fn same_array(&self, other: &ShardTable) -> bool {
        Arc::ptr_eq(&self.dir, &other.dir)
    }

    /// Replace shards by (index, new shard); indices past the end are ignored. Copies the
    /// array (one increment per shard); tables cloned before keep their shards. Rebuilds
    /// that follow one another use [`Self::update`].
    pub fn replace(&mut self, updates: impl IntoIterator<Item = (usize, Arc<Shard>)>) {
        let updates: Vec<(usize, Arc<Shard>)> = updates.into_iter().collect();
        let mut t = self.copy();
        let mut d = t.unique().expect("a new array has one owner");
        self.page_updates(&updates, &mut d, &mut Vec::new());
        for (i, s) in updates {
            d.set(i, s);
        }
        *self = t;
    }

    /// [`Self::replace`] for a sequence of rebuilds of one table: the new array is an
    /// earlier version's that no snapshot holds any more, with the entries changed since
    /// rewritten (see the module doc), so the cost is the changed entries', not the shard
    /// count's. Tables cloned before keep their shards. `dirs` must be used for this table's
    /// rebuilds only; a table it did not make last (a new one, a doubled one) starts it over.
    pub fn update(
        &mut self,
        updates: impl IntoIterator<Item = (usize, Arc<Shard>)>,
        dirs: &mut ShardDirs,
    ) {
        if !dirs.dirs.back().is_some_and(|(_, d)| d.same_array(self)) {
            dirs.dirs.clear();
            dirs.log.clear();
            dirs.dirs.push_back((0, self.clone()));
        }
        let version = dirs.dirs.back().map_or(0, |d| d.0) + 1;
        let mut changed = std::mem::take(&mut dirs.spare_log);
        changed.clear();
        // The newest earlier array no snapshot holds (the current one is the last).
        let free = (0..dirs.dirs.len() - 1)
            .rev()
            .find(|&k| dirs.dirs[k].1.unique().is_some());
        let mut dir = match free.and_then(|k| dirs.dirs.remove(k)) {
            Some((since, mut dir)) => {
                let mut slots = dir.unique().expect("no other owner: checked above");
                for (_, idx) in dirs.log.iter().filter(|e| e.0 > since) {
                    for &i in idx {
                        if i & PAGE_ENTRY != 0 {
                            let p = (i & !PAGE_ENTRY) as usize;
                            slots.pages[p].clone_from(&self.pages[p]);
                            continue;
                        }
                        let i = i as usize;
                        let now = &self.dir[i];
                        if !Arc::ptr_eq(&slots.shards[i], now) {
                            slots.set(i, now.clone());
                        }
                    }
                }
                dirs.recycled += 1;
                dir
            }
            None => {
                dirs.copied += 1;
                self.copy()
            }
        };
        let mut slots = dir.unique().expect("no other owner");
        let updates: Vec<(usize, Arc<Shard>)> = updates.into_iter().collect();
        self.page_updates(&updates, &mut slots, &mut changed);
        for (i, s) in updates {
            if slots.set(i, s) {
                changed.push(i as u32);
            }
        }
        dirs.log.push_back((version, changed));
        dirs.dirs.push_back((version, dir.clone()));
        *self = dir;
        // Keep the current array and at most SPARE_DIRS earlier ones, none more than
        // MAX_LAG versions old (a snapshot held that long is better copied than replayed),
        // and the changes since the oldest kept.
        while dirs.dirs.len() > SPARE_DIRS + 1
            || dirs.dirs.front().is_some_and(|d| d.0 + MAX_LAG < version)
        {
            dirs.dirs.pop_front();
        }
        let oldest = dirs.dirs.front().map_or(version, |d| d.0);
        while dirs.log.front().is_some_and(|e| e.0 <= oldest) {
            // A first build's log (every shard) is not kept for the small ones after.
            if let Some((_, v)) = dirs.log.pop_front().filter(|e| e.1.capacity() <= 1 << 16) {
                dirs.spare_log = v;
            }
        }
    }
}

/// The arrays of a [`ShardTable`]'s earlier versions and the indices each rebuild changed,
/// for [`ShardTable::update`] to recycle an array instead of copying one.
#[derive(Debug, Default)]
pub struct ShardDirs {
    /// (version, array), oldest first; the last is the table's current array.
    dirs: VecDeque<(u64, ShardTable)>,
    /// (version, indices that version changed from the one before), oldest first.
    log: VecDeque<(u64, Vec<u32>)>,
    /// A retired log entry's vector, reused for the next.
    spare_log: Vec<u32>,
    recycled: u64,
    copied: u64,
}

impl ShardDirs {
    /// Rebuilds that recycled an earlier array, and rebuilds that copied one (every earlier
    /// array still held, or the first rebuild of a table).
    pub fn counts(&self) -> (u64, u64) {
        (self.recycled, self.copied)
    }

    /// Arrays kept (the current one included).
    pub fn arrays(&self) -> usize {
        self.dirs.len()
    }
}

impl std::ops::Index<usize> for ShardTable {
    type Output = Arc<Shard>;

    #[inline]
    fn index(&self, i: usize) -> &Arc<Shard> {
        &self.dir[i]
    }
}

impl<'a> IntoIterator for &'a ShardTable {
    type Item = &'a Arc<Shard>;
    type IntoIter = std::slice::Iter<'a, Arc<Shard>>;

    fn into_iter(self) -> Self::IntoIter {
        self.dir.iter()
    }
}

impl FromIterator<Arc<Shard>> for ShardTable {
    fn from_iter<I: IntoIterator<Item = Arc<Shard>>>(it: I) -> ShardTable {
        let dir: Arc<[Arc<Shard>]> = it.into_iter().collect();
        let map = |f: fn(&Shard) -> &Arc<[KeySlot]>| dir.iter().map(|s| f(s).clone()).collect();
        let maps = [
            map(|s| s.by_teid.slots_arc()),
            map(|s| s.by_ue_v4.slots_arc()),
            map(|s| s.by_ue_v6.slots_arc()),
        ];
        let pages = build_pages(dir.iter()).into();
        ShardTable { dir, maps, pages }
    }
}

#[cfg(test)]
#[path = "shards_tests.rs"]
mod tests;
