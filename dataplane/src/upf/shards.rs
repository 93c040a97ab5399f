//! The shard pointer array of a [`UpfTables`](super::UpfTables) snapshot, in two levels so
//! that publishing a new snapshot does not cost one reference-count update per shard.
//!
//! A flat `Vec<Arc<Shard>>` made every publish clone every shard pointer (an atomic
//! increment in each shard's own allocation, one cache miss each: 2^15 at a million
//! sessions) and every retired snapshot release as many. Here the shards are grouped in
//! chunks of [`CHUNK`] behind one `Arc` each, and the snapshot holds one `Arc` of the chunk
//! directory: cloning the tables is one increment; a rebuild ([`ShardTable::replace`])
//! copies the directory (one increment per chunk, `shards / CHUNK`, on the small chunk
//! headers) and copies only the chunks it changes (one increment per shard of those). A
//! worker's lookup reads one more pointer (directory entry, then the chunk's slot), both
//! in a few kilobytes that stay cached.

use super::tables::Shard;
use std::sync::Arc;

/// log2 of the shards per chunk.
pub const CHUNK_BITS: u32 = 4;
/// Shards per chunk: the trade between the directory copied on every rebuild (`shards /
/// CHUNK` pointers) and a changed chunk's copy (`CHUNK` pointers); at 2^15 shards and a
/// burst of a few hundred changed sessions both are a few thousand.
pub const CHUNK: usize = 1 << CHUNK_BITS;

type Chunk = [Arc<Shard>; CHUNK];

/// An immutable array of shard pointers, shared between snapshots chunk by chunk.
#[derive(Debug, Clone)]
pub struct ShardTable {
    dir: Arc<[Arc<Chunk>]>,
    len: usize,
}

impl ShardTable {
    /// `len` shards, all `fill` (the last chunk is padded with it, never read).
    pub fn new(len: usize, fill: Arc<Shard>) -> ShardTable {
        let chunk: Arc<Chunk> = Arc::new(std::array::from_fn(|_| fill.clone()));
        ShardTable {
            dir: (0..len.div_ceil(CHUNK)).map(|_| chunk.clone()).collect(),
            len,
        }
    }

    /// Number of shards.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Shard `i`, `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&Arc<Shard>> {
        if i >= self.len {
            return None;
        }
        Some(&self.dir[i >> CHUNK_BITS][i & (CHUNK - 1)])
    }

    /// Shard `i` for the packet path: `i` below [`Self::len`] (a shard index of these
    /// tables); past it the padding of the last chunk or a panic, never another table's.
    #[inline]
    pub fn at(&self, i: usize) -> &Shard {
        &self.dir[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }

    /// The shards in order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Shard>> + '_ {
        self.dir.iter().flat_map(|c| c.iter()).take(self.len)
    }

    /// Chunks this table shares with `other` (same allocation), for tests and stats.
    pub fn shared_chunks(&self, other: &ShardTable) -> usize {
        self.dir
            .iter()
            .zip(other.dir.iter())
            .filter(|(a, b)| Arc::ptr_eq(a, b))
            .count()
    }

    /// Number of chunks.
    pub fn chunks(&self) -> usize {
        self.dir.len()
    }

    /// Replace shards by (index, new shard); indices past the end are ignored. Chunks with
    /// no replacement stay shared with every table that holds them; a chunk with several is
    /// copied once. Tables cloned before keep their shards.
    pub fn replace(&mut self, updates: impl IntoIterator<Item = (usize, Arc<Shard>)>) {
        let mut dir: Vec<Arc<Chunk>> = self.dir.to_vec();
        for (i, s) in updates {
            if i < self.len {
                // Copies the chunk the first time (it is shared with the old directory),
                // writes in place after.
                Arc::make_mut(&mut dir[i >> CHUNK_BITS])[i & (CHUNK - 1)] = s;
            }
        }
        self.dir = dir.into();
    }
}

impl std::ops::Index<usize> for ShardTable {
    type Output = Arc<Shard>;

    #[inline]
    fn index(&self, i: usize) -> &Arc<Shard> {
        assert!(i < self.len, "shard {i} of {}", self.len);
        &self.dir[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }
}

impl<'a> IntoIterator for &'a ShardTable {
    type Item = &'a Arc<Shard>;
    type IntoIter = Box<dyn Iterator<Item = &'a Arc<Shard>> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl FromIterator<Arc<Shard>> for ShardTable {
    fn from_iter<I: IntoIterator<Item = Arc<Shard>>>(it: I) -> ShardTable {
        let all: Vec<Arc<Shard>> = it.into_iter().collect();
        let len = all.len();
        let fill = all
            .last()
            .cloned()
            .unwrap_or_else(|| Arc::new(Shard::default()));
        let mut t = ShardTable::new(len, fill);
        t.replace(all.into_iter().enumerate());
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(seid: u64) -> Arc<Shard> {
        let mut s = Shard::default();
        s.sessions
            .push(super::super::tables::SessionInfo { up_seid: seid });
        Arc::new(s)
    }

    fn seid(s: &Shard) -> Option<u64> {
        s.sessions.first().map(|i| i.up_seid)
    }

    #[test]
    fn replace_copies_only_touched_chunks_and_keeps_old_tables() {
        let empty = Arc::new(Shard::default());
        let n = 20 * CHUNK + 3;
        let a = ShardTable::new(n, empty.clone());
        assert_eq!((a.len(), a.chunks()), (n, 21));
        assert_eq!(a.iter().count(), n);
        let mut b = a.clone();
        b.replace([
            (5, shard(1)),
            (7, shard(2)),
            (CHUNK * 20 + 2, shard(3)),
            (n, shard(9)),
        ]);
        // Two chunks copied, the other 19 shared.
        assert_eq!(b.shared_chunks(&a), 19);
        assert_eq!(seid(&b[5]), Some(1));
        assert_eq!(seid(&b[7]), Some(2));
        assert_eq!(seid(&b[n - 1]), Some(3));
        assert!(b.get(n).is_none());
        // Untouched shards are the same allocation; the old table is unchanged.
        assert!(Arc::ptr_eq(&a[6], &b[6]) && Arc::ptr_eq(&a[CHUNK], &b[CHUNK]));
        assert!(a.iter().all(|s| Arc::ptr_eq(s, &empty)));
        let ids: Vec<u64> = b.iter().filter_map(|s| seid(s)).collect();
        assert_eq!(ids, [1, 2, 3]);
        // From an iterator: same shards in the same order.
        let c: ShardTable = (0..n as u64).map(shard).collect();
        assert_eq!(c.len(), n);
        assert!((0..n).all(|i| seid(&c[i]) == Some(i as u64)));
        assert_eq!((&c).into_iter().count(), n);
    }
}
