//! Tests of [`ShardTable`] and the recycling of its arrays ([`ShardDirs`]).

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

fn seids(t: &ShardTable) -> Vec<Option<u64>> {
    t.iter().map(|s| seid(s)).collect()
}

#[test]
fn replace_copies_the_array_and_keeps_old_tables() {
    let empty = Arc::new(Shard::default());
    let n = 20 * 16 + 3;
    let a = ShardTable::new(n, empty.clone());
    assert_eq!(a.len(), n);
    assert_eq!(a.iter().count(), n);
    let mut b = a.clone();
    assert!(b.same_array(&a));
    b.replace([
        (5, shard(1)),
        (7, shard(2)),
        (n - 1, shard(3)),
        (n, shard(9)),
    ]);
    // Three shards replaced, the others shared; an index past the end is ignored.
    assert!(!b.same_array(&a));
    assert_eq!(b.shared_shards(&a), n - 3);
    assert_eq!(seid(&b[5]), Some(1));
    assert_eq!(seid(&b[7]), Some(2));
    assert_eq!(seid(&b[n - 1]), Some(3));
    assert!(b.get(n).is_none());
    // Untouched shards are the same allocation; the old table is unchanged.
    assert!(Arc::ptr_eq(&a[6], &b[6]) && Arc::ptr_eq(&a[16], &b[16]));
    assert!(a.iter().all(|s| Arc::ptr_eq(s, &empty)));
    let ids: Vec<u64> = b.iter().filter_map(|s| seid(s)).collect();
    assert_eq!(ids, [1, 2, 3]);
    // From an iterator: same shards in the same order.
    let c: ShardTable = (0..n as u64).map(shard).collect();
    assert_eq!(c.len(), n);
    assert!((0..n).all(|i| seid(&c[i]) == Some(i as u64)));
    assert!((0..n).all(|i| seid(c.at(i)) == Some(i as u64)));
    assert_eq!((&c).into_iter().count(), n);
}

/// xorshift64: deterministic, no dependency.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Random rebuilds while snapshots are held for random numbers of rebuilds (none, a few,
/// longer than the arrays kept): every snapshot keeps exactly the shards it had, the
/// current table has every change, and a rebuild copies the array only when every kept
/// array is held.
#[test]
fn update_recycles_free_arrays_and_keeps_held_snapshots() {
    let n = 1000;
    let mut t = ShardTable::new(n, Arc::new(Shard::default()));
    let mut dirs = ShardDirs::default();
    let mut model: Vec<Option<u64>> = vec![None; n];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // (release after this rebuild, snapshot, its shards when taken)
    let mut held: Vec<(u64, ShardTable, Vec<Option<u64>>)> = Vec::new();
    let mut next = 0u64;
    for round in 0..3000u64 {
        // Release the snapshots due, checking them first.
        held.retain(|(until, s, want)| {
            assert_eq!(&seids(s), want, "a held snapshot changed");
            *until > round
        });
        let still_held = held.len();
        let (recycled, copied) = dirs.counts();
        let free_before = dirs.arrays().saturating_sub(1 + still_held);
        let k = 1 + rng.below(if round % 50 == 0 { 400 } else { 8 });
        let mut ups = Vec::new();
        for _ in 0..k {
            let i = rng.below(n as u64 + 2) as usize;
            next += 1;
            ups.push((i, shard(next)));
            if i < n {
                model[i] = Some(next);
            }
        }
        t.update(ups, &mut dirs);
        assert_eq!(seids(&t), model, "round {round}");
        let (r2, c2) = dirs.counts();
        assert_eq!(r2 + c2, recycled + copied + 1);
        // Arrays no snapshot holds are recycled, not copied (the first rebuild has none).
        if free_before > 0 {
            assert_eq!(r2, recycled + 1, "round {round}: a free array was there");
        }
        assert!(dirs.arrays() <= SPARE_DIRS + 1);
        match rng.below(4) {
            0 => {}
            1 => held.push((round + 1, t.clone(), model.clone())),
            2 => held.push((round + 1 + rng.below(4), t.clone(), model.clone())),
            _ => held.push((round + 1 + rng.below(3 * MAX_LAG), t.clone(), model.clone())),
        }
    }
    for (_, s, want) in &held {
        assert_eq!(&seids(s), want);
    }
    let (recycled, copied) = dirs.counts();
    // Both paths taken many times (2,364 and 636 with this seed).
    assert!(recycled > 1500 && copied > 100, "{recycled} {copied}");
    // Nothing held: the next two rebuilds recycle.
    drop(held);
    t.update([(3, shard(0))], &mut dirs);
    t.update([(4, shard(0))], &mut dirs);
    assert_eq!(dirs.counts().0, recycled + 2);
    model[3] = Some(0);
    model[4] = Some(0);
    assert_eq!(seids(&t), model);
    // A table the dirs did not make last (a doubled one) starts them over, with a copy.
    let mut doubled: ShardTable = (0..2 * n).map(|j| t[j / 2].clone()).collect();
    doubled.update([(1, shard(7))], &mut dirs);
    assert_eq!(dirs.counts().1, copied + 1);
    assert_eq!(dirs.arrays(), 2);
    assert_eq!(seid(&doubled[1]), Some(7));
    assert!((2..2 * n).all(|j| Arc::ptr_eq(&doubled[j], &t[j / 2])));
    assert_eq!(seids(&t), model);
}

/// A shard whose three maps hold `keys` (each map a different key set).
fn keyed(seid: u64, keys: u32) -> Arc<Shard> {
    let mut s = Shard::default();
    s.sessions
        .push(super::super::tables::SessionInfo { up_seid: seid });
    for k in 0..keys {
        s.by_teid.insert(k * 3 + seid as u32, (k, k + 1));
        s.by_ue_v4.insert(k * 5 + seid as u32, (k, k + 2));
        s.by_ue_v6.insert(u64::from(k) << 40 | seid, (k, k + 3));
    }
    Arc::new(s)
}

/// The directory's slot arrays are always its shards' own maps' (the same allocation),
/// after a build, a replace and updates that recycle or copy while snapshots are held.
#[test]
fn directory_slot_arrays_are_the_shards_maps() {
    fn check(t: &ShardTable) {
        for i in 0..t.len() {
            let s = t.at(i);
            assert!(std::ptr::eq(t.teid_slots(i), s.by_teid.slots()), "{i}");
            assert!(std::ptr::eq(t.ue_v4_slots(i), s.by_ue_v4.slots()), "{i}");
            assert!(std::ptr::eq(t.ue_v6_slots(i), s.by_ue_v6.slots()), "{i}");
        }
    }
    let n = 64;
    let mut t: ShardTable = (0..n as u64).map(|i| keyed(i, (i % 7) as u32)).collect();
    check(&t);
    t.replace([(3, keyed(100, 9)), (n - 1, keyed(101, 0))]);
    check(&t);
    let mut dirs = ShardDirs::default();
    let mut held = Vec::new();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..200u64 {
        let i = rng.below(n as u64) as usize;
        let s = keyed(1000 + round, rng.below(12) as u32);
        t.update([(i, s)], &mut dirs);
        check(&t);
        assert_eq!(seid(t.at(i)), Some(1000 + round));
        if rng.below(3) == 0 {
            held.push(t.clone());
        }
        if held.len() > 5 {
            held.remove(0);
        }
        held.iter().for_each(check);
    }
    let (recycled, copied) = dirs.counts();
    assert!(recycled > 0 && copied > 0, "{recycled} {copied}");
}

/// A shard holding, of `teids`, those filed at position `pos` of `positions` (ranges
/// numbered from `base`, so two versions of a position differ), the even ones in its list
/// of paged TEIDs, the odd ones in its map.
fn filed(teids: &[u32], pos: usize, positions: usize, base: u32) -> Arc<Shard> {
    let mut s = Shard::default();
    for (n, &t) in teids
        .iter()
        .filter(|&&t| crate::upf::tables::shard_in(u64::from(t), positions) == pos)
        .enumerate()
    {
        let r = (base + n as u32, base + n as u32 + 1);
        // Both places a shard files TEIDs: its map, and (as the compiler does for paged
        // ones) its list.
        if t % 2 == 0 {
            s.paged_teids.push((t, r));
        } else {
            s.by_teid.insert(t, r);
        }
    }
    Arc::new(s)
}

/// Every paged TEID of the shard at its own position has its slot in its page, equal to the
/// shard's, and every used page slot is such a TEID's (`upf::pages`). The one exception: a
/// TEID that became paged when the table doubled, at a position not patched since
/// (`patched[q]` false: it still holds the shard it was doubled from), may have no page slot
/// yet.
fn check_pages(t: &ShardTable, patched: &[bool]) {
    use crate::upf::pages::paged;
    use crate::upf::tables::shard_in;
    let n = t.len();
    let mut want = 0;
    for (q, sh) in t.iter().enumerate() {
        for (k, r) in sh.teids() {
            if !(paged(k, n) && shard_in(k, n) == q) {
                continue;
            }
            let slot = match sh.by_teid.slot(k as u32) {
                Some(s) => *s,
                None => sh.uplink_slot(k as u32, r),
            };
            match t.teid_page(k) {
                Some((page, i)) if page[i].is_used() => {
                    assert_eq!(page[i], slot, "TEID {k}");
                    want += 1;
                }
                _ => assert!(
                    !patched[q],
                    "TEID {k} at a patched position has no page slot"
                ),
            }
        }
    }
    let used: usize = (0..(n * crate::upf::pages::PAGE) as u64)
        .filter(|&k| t.teid_page(k).is_some_and(|(p, i)| p[i].is_used()))
        .count();
    assert_eq!(used, want, "page slots of TEIDs no position files");
}

/// Pages follow the positions' shards through builds, replaces, recycled and copied updates
/// with snapshots held, and doublings with unsplit halves patched one at a time.
#[test]
fn pages_follow_the_shards_through_updates_and_doublings() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut n = 8;
    // TEIDs mostly paged (below 32 * 8 = 256), a few above (hash only).
    let mut teids: Vec<u32> = (1..200).chain([300, 5000, 70_000]).collect();
    let mut t: ShardTable = (0..n).map(|q| filed(&teids, q, n, 0)).collect();
    // Positions given a shard of their own since the last doubling.
    let mut patched = vec![true; n];
    check_pages(&t, &patched);
    t.replace([(2, filed(&teids[10..], 2, n, 7))]);
    check_pages(&t, &patched);
    let mut dirs = ShardDirs::default();
    let mut held = Vec::new();
    for round in 0..400u32 {
        if round % 100 == 99 {
            // Double: both halves hold the old shard; patch half of the positions.
            t = t.doubled();
            n *= 2;
            patched = vec![false; n];
            check_pages(&t, &patched);
            teids.extend((0..40).map(|_| 1 + rng.below(32 * n as u64) as u32));
            teids.sort_unstable();
            teids.dedup();
        }
        // Drop or add a few TEIDs and rebuild their positions.
        let mut ups = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let q = rng.below(n as u64) as usize;
            if rng.below(2) == 0 && !teids.is_empty() {
                let i = rng.below(teids.len() as u64) as usize;
                teids.remove(i);
            } else {
                teids.push(1 + rng.below(32 * n as u64 + 50) as u32);
                teids.sort_unstable();
                teids.dedup();
            }
            if !ups.iter().any(|u: &(usize, Arc<Shard>)| u.0 == q) {
                ups.push((q, filed(&teids, q, n, 1000 * round)));
                patched[q] = true;
            }
        }
        t.update(ups, &mut dirs);
        check_pages(&t, &patched);
        if rng.below(3) == 0 {
            held.push((t.clone(), patched.clone()));
        }
        if held.len() > 5 {
            held.remove(0);
        }
        held.iter().for_each(|(h, p)| check_pages(h, p));
    }
    let (recycled, copied) = dirs.counts();
    assert!(recycled > 0 && copied > 0, "{recycled} {copied}");
}
