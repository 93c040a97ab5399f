//! Direct TEID pages (docs/upf.md, "Direct TEID slots"): for a local TEID below
//! [`PAGE`] times the shard count, the uplink lookup reads the key slot at index `teid` of
//! an array of pages instead of probing the TEID's hash map: one line, no hash, no probe.
//!
//! TEIDs that the UPF allocates itself (F-TEID CHOOSE, TS 29.244 section 5.5.3) are handed
//! out from 1 upwards and reused once released (`control/n4`), so they stay below the
//! limit; SMFs that number TEIDs themselves often do so from 1 too. A TEID at or above the
//! limit is looked up in its shard's hash map as before. A paged TEID is in no hash map: its
//! shard lists it ([`Shard::paged_teids`]) and its page slot is what the lookup reads. One
//! that became pageable when the table doubled stays in its shard's map until the shard is
//! rebuilt: its page slot is empty, and the general path finds it in the map
//! (`UpfTables::teid_candidates`).
//!
//! A page slot is a copy of the TEID's slot in the shard at position
//! `shard_index(teid)` (its candidate range is into that shard's `pdr_order`, and the
//! packet path takes that shard for the general path), so whenever a table position gets
//! a new shard, the slots of the TEIDs filed at that position are rewritten from it
//! ([`page_changes`]); a page is copied on write (`Arc`), as a shard is.

use super::keymap::KeySlot;
use super::tables::{shard_in, Shard};
use std::sync::Arc;

/// TEIDs (key slots) a page: 32 slots of 64 bytes, 2 KiB. A rule change copies the pages
/// of the TEIDs its shards hold (up to ~16 when a shard's entries are renumbered), so a
/// page is kept small; the page array has one entry a shard position (8 bytes), so the
/// limit is 32 TEIDs a shard, above the ~16 sessions a shard holds before it doubles.
pub const PAGE: usize = 32;

/// One page of direct TEID slots.
pub type TeidPage = [KeySlot; PAGE];

/// A page entry: `None` for a page no TEID has used yet (a lookup there takes the hash
/// map, which misses too).
pub type PageRef = Option<Arc<TeidPage>>;

/// The page of TEID `teid` in `pages`, and its slot index in it; `None` past the pages.
#[inline(always)]
pub fn page_of(pages: &[PageRef], teid: u64) -> Option<(&TeidPage, usize)> {
    let p = pages.get((teid / PAGE as u64) as usize)?.as_deref()?;
    Some((p, (teid % PAGE as u64) as usize))
}

/// Whether TEID `teid` has a page slot in a table of `positions` shard positions.
#[inline]
pub fn paged(teid: u64, positions: usize) -> bool {
    teid < (positions * PAGE) as u64
}

/// The page slot changes of table position `pos` (of `positions`) going from shard `old`
/// to shard `new`, given the current `pages`: `(teid, slot)` for every paged TEID of `new`
/// filed at `pos` whose page slot differs, and `(teid, None)` for every paged TEID of
/// `old` filed at `pos` that `new` lacks. A shard's TEIDs are those of its map
/// ([`Shard::by_teid`]) and of its list ([`Shard::paged_teids`], whose slots are made here
/// with their fast-path records, but for the leading [`Shard::paged_settled`] ones, which
/// `new` says are unchanged from `old`). TEIDs of `old` filed elsewhere (a doubled table's sibling
/// position, which still holds `old`) are left alone. Appended to `out`.
pub fn page_changes(
    old: &Shard,
    new: &Shard,
    pos: usize,
    positions: usize,
    pages: &[PageRef],
    out: &mut Vec<(u64, Option<KeySlot>)>,
) {
    let mine = |t: u64| paged(t, positions) && shard_in(t, positions) == pos;
    let mut kept: Vec<u64> = Vec::new();
    // A slot identical to the one the page holds is not a change.
    let mut put = |s: KeySlot| {
        if page_of(pages, s.key()).map(|(p, i)| &p[i]) != Some(&s) {
            out.push((s.key(), Some(s)));
        }
    };
    for s in new.by_teid.used_slots().filter(|s| mine(s.key())) {
        kept.push(s.key());
        put(*s);
    }
    let settled = (new.paged_settled as usize).min(new.paged_teids.len());
    for (n, &(t, r)) in new.paged_teids.iter().enumerate() {
        if !mine(u64::from(t)) {
            continue;
        }
        kept.push(u64::from(t));
        // Past the settled ones: made again (a settled one's slot, made from the shard
        // this one was appended to, is unchanged).
        if n >= settled {
            put(new.uplink_slot(t, r));
        }
    }
    kept.sort_unstable();
    for (t, _) in old.teids().filter(|e| mine(e.0)) {
        if kept.binary_search(&t).is_err() {
            out.push((t, None));
        }
    }
}

/// Apply `changes` (sorted by TEID here) to `pages`: each page touched is copied once,
/// or made, and dropped (`None`) if it ends up with no used slot. Answers the page
/// indices written (into `written`, appended).
pub fn apply_changes(
    pages: &mut [PageRef],
    changes: &mut [(u64, Option<KeySlot>)],
    written: &mut Vec<u32>,
) {
    changes.sort_unstable_by_key(|c| c.0);
    let mut i = 0;
    while i < changes.len() {
        let p = (changes[i].0 / PAGE as u64) as usize;
        let j = i + changes[i..]
            .iter()
            .take_while(|c| (c.0 / PAGE as u64) as usize == p)
            .count();
        if let Some(entry) = pages.get_mut(p) {
            let mut page: TeidPage = match entry {
                Some(old) => **old,
                None => [KeySlot::EMPTY; PAGE],
            };
            for (t, s) in &changes[i..j] {
                page[(t % PAGE as u64) as usize] = s.unwrap_or(KeySlot::EMPTY);
            }
            *entry = page.iter().any(KeySlot::is_used).then(|| Arc::new(page));
            written.push(p as u32);
        }
        i = j;
    }
}

/// The pages of a table whose position `i` holds `shards[i]`, built from scratch.
pub fn build_pages<'a>(shards: impl ExactSizeIterator<Item = &'a Arc<Shard>>) -> Vec<PageRef> {
    let positions = shards.len();
    let mut pages: Vec<PageRef> = vec![None; positions];
    let mut changes = Vec::new();
    let empty = Shard::default();
    for (i, s) in shards.enumerate() {
        page_changes(&empty, s, i, positions, &pages, &mut changes);
    }
    apply_changes(&mut pages, &mut changes, &mut Vec::new());
    pages
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard_with(teids: &[u32]) -> Shard {
        let mut s = Shard::default();
        for (n, &t) in teids.iter().enumerate() {
            s.by_teid.insert(t, (n as u32, n as u32 + 1));
        }
        s
    }

    #[test]
    fn page_slots_follow_their_positions_shard() {
        let positions = 8;
        // TEIDs 1..200: those below 8 * 32 = 256 are paged, each at its own position.
        let all: Vec<u32> = (1..200).collect();
        let shards: Vec<Arc<Shard>> = (0..positions)
            .map(|i| {
                let mine: Vec<u32> = all
                    .iter()
                    .copied()
                    .filter(|&t| shard_in(u64::from(t), positions) == i)
                    .collect();
                Arc::new(shard_with(&mine))
            })
            .collect();
        let pages = build_pages(shards.iter());
        for &t in &all {
            let (page, k) = page_of(&pages, u64::from(t)).expect("paged");
            let s = &page[k];
            let at = &shards[shard_in(u64::from(t), positions)];
            assert!(s.is_used() && s.key() == u64::from(t));
            assert_eq!(s.range(), *at.by_teid.get(&t).unwrap());
        }
        // Unused slots of a built page are empty; pages past the TEIDs are not built.
        let (page, _) = page_of(&pages, 1).unwrap();
        assert!(!page[0].is_used());
        assert!(page_of(&pages, 250).is_none() && page_of(&pages, 4096).is_none());
        assert!(!paged(256, positions) && paged(255, positions));

        // Position 3 loses one TEID and gains none: its slot is cleared, the rest kept.
        let mut pages = pages;
        let gone = *all
            .iter()
            .find(|&&t| shard_in(u64::from(t), 8) == 3)
            .unwrap();
        let keep: Vec<u32> = all
            .iter()
            .copied()
            .filter(|&t| shard_in(u64::from(t), 8) == 3 && t != gone)
            .collect();
        let new = shard_with(&keep);
        let mut ch = Vec::new();
        page_changes(&shards[3], &new, 3, positions, &pages, &mut ch);
        let mut written = Vec::new();
        apply_changes(&mut pages, &mut ch, &mut written);
        assert!(!written.is_empty());
        let (page, k) = page_of(&pages, u64::from(gone)).unwrap();
        assert!(!page[k].is_used());
        for &t in &keep {
            let (page, k) = page_of(&pages, u64::from(t)).unwrap();
            assert_eq!(page[k].range(), *new.by_teid.get(&t).unwrap());
        }
    }

    #[test]
    fn a_sibling_positions_teids_are_left_alone() {
        // Positions 2 and 3 of a doubled table both hold the shard they were split from;
        // replacing position 2 leaves the slots of the TEIDs filed at 3.
        let positions = 4;
        let both: Vec<u32> = (1..128)
            .filter(|&t| matches!(shard_in(u64::from(t), positions), 2 | 3))
            .collect();
        let old = Arc::new(shard_with(&both));
        let shards = [
            Arc::new(Shard::default()),
            Arc::new(Shard::default()),
            old.clone(),
            old.clone(),
        ];
        let mut pages = build_pages(shards.iter());
        let twos: Vec<u32> = both
            .iter()
            .copied()
            .filter(|&t| shard_in(u64::from(t), positions) == 2)
            .collect();
        let mut ch = Vec::new();
        page_changes(&old, &shard_with(&twos), 2, positions, &pages, &mut ch);
        assert!(ch.iter().all(|c| shard_in(c.0, positions) == 2));
        apply_changes(&mut pages, &mut ch, &mut Vec::new());
        for &t in &both {
            let (page, k) = page_of(&pages, u64::from(t)).unwrap();
            assert!(page[k].is_used() && page[k].key() == u64::from(t), "{t}");
        }
    }
}
