//! The (TEID, QFI) keys of the installed PFCP sessions, read from the UPF's rule snapshot
//! (what the workers forward with, static sessions and N4's alike): the keys the collector
//! answers queries and top-key listings for, and the detectors summarise.
//!
//! A sketch key is what the tap sees on the packet (docs/kestrel.md): uplink the received
//! N3 TEID with the packet's QFI, so a PDR matched by local TEID with a PDI QFI gives
//! (uplink, TEID, QFI); downlink the TEID of the encapsulation with the QFI the UPF marks, so
//! a downlink PDR whose FAR creates a GTP-U header and whose QER marks a QFI gives
//! (downlink, outer TEID, QFI). A PDR without a QFI (uplink: any QFI matches; downlink: no
//! marking) names no key and is counted in [`SessionKeys::unkeyed`].
//!
//! The snapshot shares unchanged shards between generations (`Arc`), so an update re-reads
//! only the shards that changed: cheap at a million sessions when N4 touches a few.

use peregrine_dataplane::upf::tables::{Direction, Shard, NONE};
use peregrine_dataplane::upf::UpfTables;
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

/// (direction 0 uplink / 1 downlink, TEID, QFI).
pub type DirKey = (u8, u32, u8);

/// The keys of one shard; the shard itself held weakly to see whether it changed.
#[derive(Debug, Default)]
struct ShardKeys {
    shard: Weak<Shard>,
    keys: Vec<DirKey>,
    unkeyed: usize,
}

/// The keys of the sessions in a rule snapshot, kept up to date by [`SessionKeys::update`].
#[derive(Debug, Default)]
pub struct SessionKeys {
    shards: Vec<ShardKeys>,
    /// Snapshot generation last read.
    generation: Option<u64>,
    /// PDRs that name no key (no QFI), in the last snapshot read.
    pub unkeyed: usize,
    /// Per (direction, QFI), the TEIDs (sorted, deduplicated).
    by_qfi: BTreeMap<(u8, u8), Vec<u32>>,
}

fn shard_keys(s: &Shard) -> (Vec<DirKey>, usize) {
    let mut keys = Vec::new();
    let mut unkeyed = 0;
    let pdrs = |r: (u32, u32)| {
        s.pdr_order
            .get(r.0 as usize..r.1 as usize)
            .unwrap_or(&[])
            .iter()
            .filter_map(|&i| s.pdrs.get(i as usize))
    };
    for (teid, r) in s.teids() {
        for p in pdrs(r) {
            match p.qfi {
                Some(q) => keys.push((p.direction as u8, teid as u32, q)),
                None => unkeyed += 1,
            }
        }
    }
    let dl = s.by_ue_v4.iter().chain(s.by_ue_v6.iter());
    for (_, r) in dl {
        for p in pdrs(r) {
            let Some(outer) = s.fars.get(p.far as usize).and_then(|f| f.outer) else {
                continue;
            };
            let mark = p
                .qers
                .iter()
                .filter(|&&q| q != NONE)
                .find_map(|&q| s.qers.get(q as usize).and_then(|q| q.qfi));
            match mark {
                Some(q) => keys.push((Direction::Downlink as u8, outer.teid, q)),
                None => unkeyed += 1,
            }
        }
    }
    keys.sort_unstable();
    keys.dedup();
    (keys, unkeyed)
}

impl SessionKeys {
    /// Re-read what changed since the last call (by `generation`, then shard by shard);
    /// true if the keys may have changed.
    pub fn update(&mut self, generation: u64, t: &UpfTables) -> bool {
        if self.generation == Some(generation) {
            return false;
        }
        self.generation = Some(generation);
        if self.shards.len() != t.shards.len() {
            self.shards = (0..t.shards.len()).map(|_| ShardKeys::default()).collect();
        }
        let mut changed = false;
        for (k, s) in self.shards.iter_mut().zip(&t.shards) {
            if k.shard.upgrade().is_some_and(|old| Arc::ptr_eq(&old, s)) {
                continue;
            }
            let (keys, unkeyed) = shard_keys(s);
            changed |= keys != k.keys;
            *k = ShardKeys {
                shard: Arc::downgrade(s),
                keys,
                unkeyed,
            };
        }
        if changed || self.by_qfi.is_empty() {
            self.by_qfi.clear();
            for &(d, t, q) in self.shards.iter().flat_map(|s| &s.keys) {
                self.by_qfi.entry((d, q)).or_default().push(t);
            }
            for v in self.by_qfi.values_mut() {
                v.sort_unstable();
                v.dedup();
            }
        }
        self.unkeyed = self.shards.iter().map(|s| s.unkeyed).sum();
        changed
    }

    /// The TEIDs of (direction, QFI).
    pub fn teids(&self, dir: u8, qfi: u8) -> &[u32] {
        self.by_qfi.get(&(dir, qfi)).map_or(&[], Vec::as_slice)
    }

    /// The QFIs with keys in `dir`, ascending.
    pub fn qfis(&self, dir: u8) -> Vec<u8> {
        self.by_qfi
            .keys()
            .filter(|k| k.0 == dir)
            .map(|k| k.1)
            .collect()
    }

    /// Every key, ordered.
    pub fn all(&self) -> impl Iterator<Item = DirKey> + '_ {
        self.by_qfi
            .iter()
            .flat_map(|(&(d, q), ts)| ts.iter().map(move |&t| (d, t, q)))
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.by_qfi.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
