//! The collector's queries over an attached region (seed appendix A, Algorithms 2, 4, 6
//! and section 4): reads only, never a write into the structures, never a panic on what
//! another process left in the region (every index is reduced modulo a validated size).

use crate::hash::{self, BLANK};
use crate::layout::{Layout, PostcardMode};
use crate::region::Region;
use crate::Error;
use serde::Serialize;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

/// Largest redundancy a query reads (the layout's maximum too).
const MAX_N: u32 = 16;

/// Reads of a torn Key-Write slot (K > 1) retried before the slot counts as unreadable.
const TORN_RETRIES: u32 = 16;

/// A Key-Write answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum KwAnswer {
    /// The plurality value among slots with the key's checksum, with its vote count.
    Found {
        data: Vec<u32>,
        votes: u32,
        matching: u32,
    },
    /// No slot holds the key's checksum (overwritten, or never written).
    Empty,
    /// Values with the key's checksum disagree and none has a plurality of at least
    /// `min_agree` votes.
    NoConsensus { matching: u32 },
}

/// A Postcarding answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum PathAnswer {
    /// The valid path (hops 0..len), agreed on by every valid chunk.
    Found { hops: Vec<u32>, valid_chunks: u32 },
    /// No chunk holds valid information for this key.
    Empty,
    /// Valid chunks disagree.
    Conflict { valid_chunks: u32 },
    /// Raw mode: chunk 0's words, unchecked.
    Raw { words: Vec<u32> },
}

/// Entries read by [`ListFollower::poll`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Polled {
    /// Index (entries ever appended before it) of the first entry returned.
    pub first: u64,
    pub entries: Vec<u32>,
    /// Entries overwritten before we read them (we fell more than a ring behind, or the
    /// writer lapped us while we copied).
    pub lost: u64,
}

/// An attached collector.
#[derive(Debug, Clone)]
pub struct Collector {
    region: Arc<Region>,
    l: Layout,
}

impl Collector {
    pub fn attach(path: impl AsRef<std::path::Path>) -> Result<Collector, Error> {
        Ok(Collector::new(Arc::new(Region::open(path)?)))
    }

    pub fn new(region: Arc<Region>) -> Collector {
        let l = *region.layout();
        Collector { region, l }
    }

    pub fn layout(&self) -> &Layout {
        &self.l
    }

    /// Key-Write query (seed Algorithm 2 with a plurality vote): read slots `0..n` of `key`
    /// (`n` defaults to the region's maximum redundancy), collect the data of slots whose
    /// checksum matches, return the most frequent value if it has at least `min_agree`
    /// votes and no other value ties with it.
    pub fn key_write(&self, key: u32, n: Option<u32>, min_agree: u32) -> Result<KwAnswer, Error> {
        let s = &self.l.sizes;
        if s.kw_slots == 0 {
            return Err(Error::Disabled("key-write"));
        }
        let n = n.unwrap_or(s.kw_max_redundancy);
        if n == 0 || n > MAX_N {
            return Err(Error::Query(format!(
                "redundancy must be 1..={MAX_N}, got {n}"
            )));
        }
        let kc = hash::KeyCrc::new(key);
        let csum = kc.crc() & hash::mask(s.kw_checksum_bits);
        let k = s.kw_words as usize;
        // Distinct candidate values and their votes, on the stack (no allocation until the
        // answer).
        let mut cands = [([0u32; 7], 0u32); MAX_N as usize];
        let (mut distinct, mut matching) = (0usize, 0u32);
        for i in 0..n {
            let idx = kc.slot(i as u8, s.kw_slots) as usize;
            let Some((c, data)) = self.read_kw_slot(idx, k) else {
                continue;
            };
            if c != csum {
                continue;
            }
            matching += 1;
            match cands[..distinct].iter_mut().find(|(d, _)| *d == data) {
                Some((_, v)) => *v += 1,
                None => {
                    cands[distinct] = (data, 1);
                    distinct += 1;
                }
            }
        }
        if matching == 0 {
            return Ok(KwAnswer::Empty);
        }
        let c = &mut cands[..distinct];
        c.sort_by_key(|c| std::cmp::Reverse(c.1));
        let top = c[0].1;
        let tied = c.get(1).is_some_and(|c| c.1 == top);
        if tied || top < min_agree.max(1) {
            return Ok(KwAnswer::NoConsensus { matching });
        }
        Ok(KwAnswer::Found {
            data: c[0].0[..k].to_vec(),
            votes: top,
            matching,
        })
    }

    /// Slot `idx` as stored (checksum, data), for inspection.
    pub fn kw_slot(&self, idx: u64) -> Result<(u32, Vec<u32>), Error> {
        let s = &self.l.sizes;
        if idx >= s.kw_slots {
            return Err(Error::Query(format!(
                "slot {idx} is beyond the {} slots",
                s.kw_slots
            )));
        }
        self.read_kw_slot(idx as usize, s.kw_words as usize)
            .map(|(c, d)| (c, d[..s.kw_words as usize].to_vec()))
            .ok_or_else(|| {
                Error::Query(format!("slot {idx} stayed torn (a writer is stuck in it)"))
            })
    }

    /// Checksum and data of slot `idx`, or `None` if it stayed torn over the retries.
    fn read_kw_slot(&self, idx: usize, k: usize) -> Option<(u32, [u32; 7])> {
        let s = &self.l.sizes;
        if k == 1 {
            let w = self.region.u64s(self.l.kw_offset, s.kw_slots)[idx].load(Ordering::Acquire);
            let mut d = [0u32; 7];
            d[0] = (w >> 32) as u32;
            return Some((w as u32, d));
        }
        let stride = 2 + k;
        let w = self
            .region
            .u32s(self.l.kw_offset, s.kw_slots * stride as u64);
        let base = idx * stride;
        for _ in 0..TORN_RETRIES {
            let s1 = w[base].load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let c = w[base + 1].load(Ordering::Relaxed);
            let mut data = [0u32; 7];
            for (i, d) in data.iter_mut().take(k).enumerate() {
                *d = w[base + 2 + i].load(Ordering::Relaxed);
            }
            fence(Ordering::Acquire);
            if w[base].load(Ordering::Relaxed) == s1 {
                return Some((c, data));
            }
        }
        None
    }

    /// Key-Increment query (seed Algorithm 6): the minimum of the key's `n` counters.
    pub fn key_increment(&self, key: u32, n: Option<u32>) -> Result<u64, Error> {
        let s = &self.l.sizes;
        if s.ki_slots == 0 {
            return Err(Error::Disabled("key-increment"));
        }
        let n = n.unwrap_or(s.ki_max_redundancy);
        if n == 0 || n > MAX_N {
            return Err(Error::Query(format!(
                "redundancy must be 1..={MAX_N}, got {n}"
            )));
        }
        let c = self.region.u64s(self.l.ki_offset, s.ki_slots);
        let kc = hash::KeyCrc::new(key);
        Ok((0..n)
            .map(|i| c[kc.slot(i as u8, s.ki_slots) as usize].load(Ordering::Relaxed))
            .min()
            .unwrap_or(0))
    }

    /// Postcarding query: decode each of the key's chunks; a chunk is valid when hops
    /// `0..l` (l >= 1) decode to values in V and hops `l..B` to the blank marker.
    pub fn path(&self, key: u32) -> Result<PathAnswer, Error> {
        let s = &self.l.sizes;
        if s.pc_chunks == 0 {
            return Err(Error::Disabled("postcarding"));
        }
        let b = s.pc_hops as usize;
        let words = self.region.u32s(self.l.pc_offset, s.pc_chunks * b as u64);
        fence(Ordering::Acquire);
        let chunk = |j: u32| -> Vec<u32> {
            let base = hash::slot(key, j as u8, s.pc_chunks) as usize * b;
            (0..b)
                .map(|i| words[base + i].load(Ordering::Relaxed))
                .collect()
        };
        if s.pc_mode == PostcardMode::Raw {
            return Ok(PathAnswer::Raw { words: chunk(0) });
        }
        let limit = 1u64 << s.pc_value_bits;
        let mut valid: Vec<Vec<u32>> = Vec::new();
        for j in 0..s.pc_redundancy {
            let vals: Vec<u32> = chunk(j)
                .iter()
                .enumerate()
                .map(|(i, w)| hash::g_inv(w ^ hash::hop_checksum(key, i as u8)))
                .collect();
            let l = vals.iter().take_while(|v| (**v as u64) < limit).count();
            if l >= 1 && vals[l..].iter().all(|v| *v == BLANK) {
                valid.push(vals[..l].to_vec());
            }
        }
        let n = valid.len() as u32;
        Ok(match valid.first() {
            None => PathAnswer::Empty,
            Some(p) if valid.iter().all(|q| q == p) => PathAnswer::Found {
                hops: p.clone(),
                valid_chunks: n,
            },
            Some(_) => PathAnswer::Conflict { valid_chunks: n },
        })
    }

    /// Follow list `list` from its current head (only entries appended from now on).
    pub fn follow(&self, list: u32) -> Result<ListFollower, Error> {
        let mut f = self.follow_from(list, 0)?;
        f.pos = f.head();
        Ok(f)
    }

    /// Follow list `list` from entry index `pos` (0: the oldest still in the ring).
    pub fn follow_from(&self, list: u32, pos: u64) -> Result<ListFollower, Error> {
        let s = &self.l.sizes;
        if list >= s.ap_lists {
            return Err(Error::UnknownList(list, s.ap_lists));
        }
        Ok(ListFollower {
            c: self.clone(),
            list,
            pos,
        })
    }
}

/// A reader of one Append list (seed Algorithm 4, with a head to follow): it keeps its own
/// position and detects being lapped by the writer.
#[derive(Debug, Clone)]
pub struct ListFollower {
    c: Collector,
    list: u32,
    pos: u64,
}

impl ListFollower {
    fn head(&self) -> u64 {
        let s = &self.c.l.sizes;
        self.c
            .region
            .u64s(self.c.l.ap_heads_offset, s.ap_lists as u64)[self.list as usize]
            .load(Ordering::Acquire)
    }

    /// Our position (index of the next entry to read).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Read up to `max` new entries.
    pub fn poll(&mut self, max: usize) -> Polled {
        let s = &self.c.l.sizes;
        let len = s.ap_list_len;
        let batch = s.ap_batch as u64;
        let data = self
            .c
            .region
            .u32s(self.c.l.ap_data_offset + 4 * len * self.list as u64, len);
        let h = self.head();
        let mut out = Polled::default();
        if h < self.pos {
            // The head went backwards: the region was re-created under us. Restart.
            self.pos = h;
            return out;
        }
        // The writer may already be overwriting the next batch's slots: a ring minus one
        // batch behind the head is all that is safe.
        let safe = len.saturating_sub(batch);
        if h - self.pos > safe {
            out.lost += h - safe - self.pos;
            self.pos = h - safe;
        }
        let end = h.min(self.pos + max as u64);
        out.first = self.pos;
        out.entries = (self.pos..end)
            .map(|i| data[(i % len) as usize].load(Ordering::Relaxed))
            .collect();
        fence(Ordering::Acquire);
        // Entries the writer may have reached while we copied are not trustworthy.
        let h2 = self.head();
        let oldest_ok = (h2 + batch).saturating_sub(len);
        if oldest_ok > out.first {
            let drop = (oldest_ok - out.first).min(out.entries.len() as u64);
            out.entries.drain(..drop as usize);
            out.lost += drop;
            out.first += drop;
        }
        self.pos = end;
        out
    }
}
