//! Copy-and-patch of one shard: the next version of a shard is its previous version without
//! the entries of the sessions that changed, plus the changed sessions' new entries. Only
//! the shard's own flat vectors and the changed sessions' staged rules are read, so what a
//! PFCP request costs the compiler does not depend on how many sessions exist (the shard
//! count follows the capacity, `shard_bits_for`, so a shard holds a bounded number of
//! sessions' entries); the previous version stays intact for workers still reading it.

use crate::compile::{Key, Pieces};
use peregrine_dataplane::upf::pages::paged;
use peregrine_dataplane::upf::tables::{
    shard_of_in, KeyMap, PdrRule, SessionInfo, Shard, MAX_QERS_PER_PDR, NONE,
};
use rustc_hash::FxHashMap;

/// Buffers reused from one patch to the next (no allocation per shard beyond the new
/// shard's own vectors).
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    seids: Vec<u64>,
    sessions: Vec<u32>,
    fars: Vec<u32>,
    qers: Vec<u32>,
    pdrs: Vec<u32>,
    teid: Vec<(u64, (u32, u32))>,
    v4: Vec<(u64, (u32, u32))>,
    v6: Vec<(u64, (u32, u32))>,
    /// (key, precedence, PDR ID, shard PDR index) of one appended session.
    entries: Vec<(Key, u32, u16, u32)>,
}

/// The next version of shard `idx` (of `1 << bits`): `old` without the entries of `seids`,
/// then the staged rules of those of `seids` that have a key in this shard.
pub(crate) fn patch_shard(
    old: &Shard,
    idx: usize,
    bits: u32,
    seids: impl Iterator<Item = u64>,
    staged: &FxHashMap<u64, Pieces>,
    sc: &mut Scratch,
) -> Shard {
    sc.seids.clear();
    sc.seids.extend(seids);
    let added: Vec<(u64, &Pieces)> = sc
        .seids
        .iter()
        .filter_map(|s| staged.get(s).map(|p| (*s, p)))
        .filter(|(_, p)| {
            p.pdrs
                .iter()
                .any(|c| c.keys.iter().any(|k| k.shard(bits) == idx))
        })
        .collect();
    let add_pdrs: usize = added.iter().map(|(_, p)| p.pdrs.len()).sum();
    let add_fars: usize = added.iter().map(|(_, p)| p.fars.len()).sum();
    let add_qers: usize = added.iter().map(|(_, p)| p.qers.len()).sum();
    let add_filters: usize = added
        .iter()
        .flat_map(|(_, p)| p.pdrs.iter().map(|c| c.filters.len()))
        .sum();
    // Only new sessions (the common case under establishments): the old entries keep
    // their indices, so the shard is copied whole (memory speed: no renumbering, no
    // re-indexing of its keys) and the new entries appended.
    if !old.sessions.iter().any(|s| sc.seids.contains(&s.up_seid)) {
        return append(
            old,
            &added,
            idx,
            bits,
            sc,
            [add_pdrs, add_fars, add_qers, add_filters],
        );
    }
    let mut sh = Shard {
        pdr_order: Vec::with_capacity(old.pdr_order.len() + 2 * add_pdrs),
        pdrs: Vec::with_capacity(old.pdrs.len() + add_pdrs),
        filters: Vec::with_capacity(old.filters.len() + add_filters),
        fars: Vec::with_capacity(old.fars.len() + add_fars),
        qers: Vec::with_capacity(old.qers.len() + add_qers),
        sessions: Vec::with_capacity(old.sessions.len() + added.len()),
        ..Shard::default()
    };

    // 1. The old entries of every session that did not change, indices renumbered.
    sc.sessions.clear();
    for s in &old.sessions {
        if sc.seids.contains(&s.up_seid) {
            sc.sessions.push(NONE);
        } else {
            sc.sessions.push(sh.sessions.len() as u32);
            sh.sessions.push(*s);
        }
    }
    reset(&mut sc.fars, old.fars.len());
    reset(&mut sc.qers, old.qers.len());
    reset(&mut sc.pdrs, old.pdrs.len());
    for (i, p) in old.pdrs.iter().enumerate() {
        let session = sc.sessions.get(p.session as usize).copied().unwrap_or(NONE);
        if session == NONE {
            continue;
        }
        copy_pdr(sc, old, &mut sh, i, session);
    }
    // Candidate lists: a key belongs to one session, so a list is kept or dropped whole.
    keep_lists(old, sc, &mut sh, |_| true);

    // 2. The changed sessions' new entries under their keys in this shard.
    add_sessions(&mut sh, &added, idx, bits, sc);

    // 3. Maps sized for exactly their keys, vectors trimmed (a shrinking realloc does not
    // copy), and the common case flattened into the key slots.
    finish(sh, sc, bits)
}

/// Append the entries of `added` (sessions with a key in shard `idx`) to `sh`; their keys
/// and candidate ranges go to `sc.teid` / `sc.v4` / `sc.v6`.
fn add_sessions(sh: &mut Shard, added: &[(u64, &Pieces)], idx: usize, bits: u32, sc: &mut Scratch) {
    for (seid, cs) in added {
        let session = sh.sessions.len() as u32;
        sh.sessions.push(SessionInfo { up_seid: *seid });
        reset(&mut sc.fars, cs.fars.len());
        reset(&mut sc.qers, cs.qers.len());
        sc.entries.clear();
        for p in &cs.pdrs {
            if !p.keys.iter().any(|k| k.shard(bits) == idx) {
                continue;
            }
            let far = remap(&mut sc.fars, u32::from(p.far), &cs.fars, &mut sh.fars);
            let mut qers = [NONE; MAX_QERS_PER_PDR];
            for (d, &qi) in qers.iter_mut().zip(&p.qers) {
                let m = &mut sc.qers[qi as usize];
                if *m == NONE {
                    *m = sh.qers.len() as u32;
                    sh.qers.push(cs.qers[qi as usize].rule);
                }
                *d = *m;
            }
            let f0 = sh.filters.len() as u32;
            sh.filters.extend_from_slice(&p.filters);
            let pi = sh.pdrs.len() as u32;
            sh.pdrs.push(PdrRule {
                pdr_id: p.pdr_id,
                session,
                direction: p.direction,
                qfi: p.qfi,
                filters: (f0, sh.filters.len() as u32),
                remove_gtpu: p.remove_gtpu,
                far,
                qers,
                urrs: p.urrs,
            });
            for &k in p.keys.iter().filter(|k| k.shard(bits) == idx) {
                sc.entries.push((k, p.precedence, p.pdr_id, pi));
            }
        }
        // Candidates under one key by precedence (TS 29.244 section 5.2.1), ties by PDR ID.
        sc.entries.sort_unstable();
        let mut i = 0;
        while i < sc.entries.len() {
            let k = sc.entries[i].0;
            let start = sh.pdr_order.len() as u32;
            while i < sc.entries.len() && sc.entries[i].0 == k {
                sh.pdr_order.push(sc.entries[i].3);
                i += 1;
            }
            let r = (start, sh.pdr_order.len() as u32);
            match k {
                Key::Teid(v) => sc.teid.push((u64::from(v), r)),
                Key::UeV4(v) => sc.v4.push((u64::from(v), r)),
                Key::UeV6(v) => sc.v6.push((v, r)),
            }
        }
    }
}

/// The next version of `old` when none of its sessions changed: its vectors copied whole
/// (indices unchanged, so its key slots keep their fast-path records) and `added` appended.
/// `add`: the PDRs, FARs, QERs and filters `added` brings.
fn append(
    old: &Shard,
    added: &[(u64, &Pieces)],
    idx: usize,
    bits: u32,
    sc: &mut Scratch,
    add: [usize; 4],
) -> Shard {
    let [add_pdrs, add_fars, add_qers, add_filters] = add;
    fn grown<T: Clone>(v: &[T], extra: usize) -> Vec<T> {
        let mut n = Vec::with_capacity(v.len() + extra);
        n.extend_from_slice(v);
        n
    }
    let mut sh = Shard {
        pdr_order: grown(&old.pdr_order, 2 * add_pdrs),
        pdrs: grown(&old.pdrs, add_pdrs),
        filters: grown(&old.filters, add_filters),
        fars: grown(&old.fars, add_fars),
        qers: grown(&old.qers, add_qers),
        sessions: grown(&old.sessions, added.len()),
        ..Shard::default()
    };
    sc.teid.clear();
    sc.v4.clear();
    sc.v6.clear();
    add_sessions(&mut sh, added, idx, bits, sc);
    let positions = 1usize << bits;
    let hashed = sc.teid.iter().filter(|e| !paged(e.0, positions)).count();
    sh.by_teid = old.by_teid.with_room_loose(hashed);
    sh.by_ue_v4 = old.by_ue_v4.with_room(sc.v4.len());
    sh.by_ue_v6 = old.by_ue_v6.with_room(sc.v6.len());
    sh.paged_teids = Vec::with_capacity(old.paged_teids.len() + sc.teid.len() - hashed);
    sh.paged_teids.extend_from_slice(&old.paged_teids);
    // Their rules keep their indices: the page slots made from `old` stay right.
    sh.paged_settled = old.paged_teids.len() as u32;
    for &(k, r) in &sc.teid {
        if paged(k, positions) {
            sh.paged_teids.push((k as u32, r));
        } else {
            sh.by_teid.insert(k as u32, r);
        }
    }
    for &(k, r) in &sc.v4 {
        sh.by_ue_v4.insert(k as u32, r);
    }
    for &(k, r) in &sc.v6 {
        sh.by_ue_v6.insert(k, r);
    }
    // As the general path leaves them: `add` counted PDRs with no key in this shard too.
    trim(&mut sh);
    let keys = |v: &[(u64, (u32, u32))]| v.iter().map(|e| e.0).collect::<Vec<u64>>();
    let (t, v4, v6) = (keys(&sc.teid), keys(&sc.v4), keys(&sc.v6));
    sh.index_fast_of(&t, &v4, &v6);
    sh
}

/// Shard `idx` of `1 << bits` made from `old`, the shard of `1 << (bits - 1)` it halves
/// (`idx >> 1`): the entries of the keys that fall in `idx`, indices renumbered. A table
/// that doubles its shard count ([`Compiler::grow_shards_above`]) splits every shard so.
///
/// [`Compiler::grow_shards_above`]: crate::Compiler::grow_shards_above
pub(crate) fn split_shard(old: &Shard, idx: usize, bits: u32, sc: &mut Scratch) -> Shard {
    let mine = |k: u64| shard_of_in(k, bits) == idx;
    // The PDRs under a key of this half (a PDR filed under two keys may go to both).
    reset(&mut sc.pdrs, old.pdrs.len());
    let lists = old.teids().chain(old.by_ue_v4.iter());
    for (_, (a, b)) in lists.chain(old.by_ue_v6.iter()).filter(|e| mine(e.0)) {
        for &pi in old.pdr_order.get(a as usize..b as usize).unwrap_or(&[]) {
            if let Some(m) = sc.pdrs.get_mut(pi as usize) {
                *m = 0;
            }
        }
    }
    let mut sh = Shard::default();
    reset(&mut sc.sessions, old.sessions.len());
    reset(&mut sc.fars, old.fars.len());
    reset(&mut sc.qers, old.qers.len());
    for (i, p) in old.pdrs.iter().enumerate() {
        if sc.pdrs[i] == NONE {
            continue;
        }
        let session = remap(&mut sc.sessions, p.session, &old.sessions, &mut sh.sessions);
        copy_pdr(sc, old, &mut sh, i, session);
    }
    keep_lists(old, sc, &mut sh, mine);
    finish(sh, sc, bits)
}

/// [`keep`] of `old`'s TEIDs, UE IPv4 and UE IPv6 keys `want` takes, into `sc.teid`,
/// `sc.v4` and `sc.v6`.
fn keep_lists(old: &Shard, sc: &mut Scratch, sh: &mut Shard, want: impl Fn(u64) -> bool) {
    keep(old, old.teids(), &sc.pdrs, &mut sc.teid, sh, &want);
    keep(old, old.by_ue_v4.iter(), &sc.pdrs, &mut sc.v4, sh, &want);
    keep(old, old.by_ue_v6.iter(), &sc.pdrs, &mut sc.v6, sh, &want);
}

/// The candidate lists of `entries` (a map's or list's (key, range)) whose PDRs were kept
/// (`pdrs`: old index to new), copied to the end of `sh.pdr_order`; (key, new range) to `out`.
fn keep(
    old: &Shard,
    entries: impl Iterator<Item = (u64, (u32, u32))>,
    pdrs: &[u32],
    out: &mut Vec<(u64, (u32, u32))>,
    sh: &mut Shard,
    want: impl Fn(u64) -> bool,
) {
    out.clear();
    for (key, (a, b)) in entries.filter(|e| want(e.0)) {
        let start = sh.pdr_order.len() as u32;
        for &pi in old.pdr_order.get(a as usize..b as usize).unwrap_or(&[]) {
            match pdrs.get(pi as usize) {
                Some(&n) if n != NONE => sh.pdr_order.push(n),
                _ => {}
            }
        }
        if sh.pdr_order.len() as u32 > start {
            out.push((key, (start, sh.pdr_order.len() as u32)));
        }
    }
}

/// A built shard's maps sized for exactly their keys (`sc`'s lists), its vectors trimmed (a
/// shrinking realloc does not copy) and the common case flattened into the key slots.
fn finish(mut sh: Shard, sc: &Scratch, bits: u32) -> Shard {
    // TEIDs with a direct page slot go to the shard's list (the packet path reads their
    // page slots), the others to its map, sized at load factor 1/2 (the packet path probes
    // it: fewer second lines).
    let positions = 1usize << bits;
    sh.paged_teids = sc
        .teid
        .iter()
        .filter(|e| paged(e.0, positions))
        .map(|&(k, r)| (k as u32, r))
        .collect();
    let hashed = sc.teid.len() - sh.paged_teids.len();
    let mut teids = KeyMap::with_capacity_loose(hashed);
    for &(k, r) in sc.teid.iter().filter(|e| !paged(e.0, positions)) {
        teids.insert(k as u32, r);
    }
    sh.by_teid = teids;
    sh.by_ue_v4 = key_map(KeyMap::with_capacity(sc.v4.len()), &sc.v4, |k| k as u32);
    sh.by_ue_v6 = key_map(KeyMap::with_capacity(sc.v6.len()), &sc.v6, |k| k);
    trim(&mut sh);
    sh.index_fast();
    sh
}

/// Trim a built shard's vectors to their length (a shrinking realloc does not copy).
fn trim(sh: &mut Shard) {
    sh.pdr_order.shrink_to_fit();
    sh.paged_teids.shrink_to_fit();
    sh.pdrs.shrink_to_fit();
    sh.filters.shrink_to_fit();
    sh.fars.shrink_to_fit();
    sh.qers.shrink_to_fit();
    sh.sessions.shrink_to_fit();
}

/// Copy PDR `i` of `old` into `sh` as a PDR of session `session` (an index in `sh`), with its
/// FAR, QERs and filters renumbered through `sc`; `sc.pdrs[i]` records its new index.
fn copy_pdr(sc: &mut Scratch, old: &Shard, sh: &mut Shard, i: usize, session: u32) {
    let p = &old.pdrs[i];
    let far = remap(&mut sc.fars, p.far, &old.fars, &mut sh.fars);
    let mut qers = [NONE; MAX_QERS_PER_PDR];
    for (d, &q) in qers.iter_mut().zip(&p.qers) {
        *d = remap(&mut sc.qers, q, &old.qers, &mut sh.qers);
    }
    let f0 = sh.filters.len() as u32;
    if let Some(f) = old.filters.get(p.filters.0 as usize..p.filters.1 as usize) {
        sh.filters.extend_from_slice(f);
    }
    sc.pdrs[i] = sh.pdrs.len() as u32;
    sh.pdrs.push(PdrRule {
        session,
        far,
        qers,
        filters: (f0, sh.filters.len() as u32),
        ..p.clone()
    });
}

fn reset(v: &mut Vec<u32>, n: usize) {
    v.clear();
    v.resize(n, NONE);
}

/// The new index of entry `i` of `from`, copying it to `to` on first use (`map` remembers).
fn remap<T: Clone>(map: &mut [u32], i: u32, from: &[T], to: &mut Vec<T>) -> u32 {
    let (Some(m), Some(e)) = (map.get_mut(i as usize), from.get(i as usize)) else {
        return NONE;
    };
    if *m == NONE {
        *m = to.len() as u32;
        to.push(e.clone());
    }
    *m
}

/// `m` (empty, sized for `entries`) with `entries`.
fn key_map<K: Copy + Into<u64>>(
    mut m: KeyMap<K>,
    entries: &[(u64, (u32, u32))],
    key: impl Fn(u64) -> K,
) -> KeyMap<K> {
    for &(k, r) in entries {
        m.insert(key(k), r);
    }
    m
}
