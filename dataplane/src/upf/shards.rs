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

/// An immutable array of shard pointers, shared between snapshots as a whole.
#[derive(Debug, Clone)]
pub struct ShardTable {
    dir: Arc<[Arc<Shard>]>,
}

impl ShardTable {
    /// `len` shards, all `fill`.
    pub fn new(len: usize, fill: Arc<Shard>) -> ShardTable {
        ShardTable {
            dir: (0..len).map(|_| fill.clone()).collect(),
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
        let mut dir: Arc<[Arc<Shard>]> = self.dir.iter().cloned().collect();
        let slots = Arc::get_mut(&mut dir).expect("a new array has one owner");
        for (i, s) in updates {
            if let Some(slot) = slots.get_mut(i) {
                *slot = s;
            }
        }
        self.dir = dir;
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
        if !dirs
            .dirs
            .back()
            .is_some_and(|(_, d)| Arc::ptr_eq(d, &self.dir))
        {
            dirs.dirs.clear();
            dirs.log.clear();
            dirs.dirs.push_back((0, self.dir.clone()));
        }
        let version = dirs.dirs.back().map_or(0, |d| d.0) + 1;
        let mut changed = std::mem::take(&mut dirs.spare_log);
        changed.clear();
        // The newest earlier array no snapshot holds (the current one is the last).
        let free = (0..dirs.dirs.len() - 1)
            .rev()
            .find(|&k| Arc::get_mut(&mut dirs.dirs[k].1).is_some());
        let mut dir = match free.and_then(|k| dirs.dirs.remove(k)) {
            Some((since, mut dir)) => {
                let slots = Arc::get_mut(&mut dir).expect("no other owner: checked above");
                for (_, idx) in dirs.log.iter().filter(|e| e.0 > since) {
                    for &i in idx {
                        let (slot, now) = (&mut slots[i as usize], &self.dir[i as usize]);
                        if !Arc::ptr_eq(slot, now) {
                            *slot = now.clone();
                        }
                    }
                }
                dirs.recycled += 1;
                dir
            }
            None => {
                dirs.copied += 1;
                self.dir.iter().cloned().collect()
            }
        };
        let slots = Arc::get_mut(&mut dir).expect("no other owner");
        for (i, s) in updates {
            if let Some(slot) = slots.get_mut(i) {
                *slot = s;
                changed.push(i as u32);
            }
        }
        dirs.log.push_back((version, changed));
        dirs.dirs.push_back((version, dir.clone()));
        self.dir = dir;
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
    dirs: VecDeque<(u64, Arc<[Arc<Shard>]>)>,
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
        ShardTable {
            dir: it.into_iter().collect(),
        }
    }
}

#[cfg(test)]
#[path = "shards_tests.rs"]
mod tests;
