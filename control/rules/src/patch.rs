//! Copy-and-patch of one shard: the next version of a shard is its previous version without
//! the entries of the sessions that changed, plus the changed sessions' new entries. Only
//! the shard's own flat vectors and the changed sessions' staged rules are read, so what a
//! PFCP request costs the compiler does not depend on how many sessions exist (the shard
//! count follows the capacity, `shard_bits_for`, so a shard holds a bounded number of
//! sessions' entries); the previous version stays intact for workers still reading it.

use crate::compile::{Key, Pieces};
use peregrine_dataplane::upf::tables::{
    KeyMap, PdrRule, SessionInfo, Shard, MAX_QERS_PER_PDR, NONE,
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
    // Candidate lists: a key belongs to one session, so a list is kept or dropped whole.
    keep(old, &old.by_teid, &sc.pdrs, &mut sc.teid, &mut sh);
    keep(old, &old.by_ue_v4, &sc.pdrs, &mut sc.v4, &mut sh);
    keep(old, &old.by_ue_v6, &sc.pdrs, &mut sc.v6, &mut sh);

    // 2. The changed sessions' new entries under their keys in this shard.
    for (seid, cs) in &added {
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

    // 3. Maps sized for exactly their keys, vectors trimmed (a shrinking realloc does not
    // copy), and the common case flattened into the key slots.
    sh.by_teid = key_map(&sc.teid, |k| k as u32);
    sh.by_ue_v4 = key_map(&sc.v4, |k| k as u32);
    sh.by_ue_v6 = key_map(&sc.v6, |k| k);
    sh.pdr_order.shrink_to_fit();
    sh.pdrs.shrink_to_fit();
    sh.filters.shrink_to_fit();
    sh.fars.shrink_to_fit();
    sh.qers.shrink_to_fit();
    sh.sessions.shrink_to_fit();
    sh.index_fast();
    sh
}

/// The candidate lists of `m` whose PDRs were kept (`pdrs`: old index to new), copied to
/// the end of `sh.pdr_order`; (key, new range) to `out`.
fn keep<K>(
    old: &Shard,
    m: &KeyMap<K>,
    pdrs: &[u32],
    out: &mut Vec<(u64, (u32, u32))>,
    sh: &mut Shard,
) where
    K: Copy + Into<u64>,
{
    out.clear();
    for (key, (a, b)) in m.iter() {
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

fn key_map<K: Copy + Into<u64>>(
    entries: &[(u64, (u32, u32))],
    key: impl Fn(u64) -> K,
) -> KeyMap<K> {
    let mut m = KeyMap::with_capacity(entries.len());
    for &(k, r) in entries {
        m.insert(key(k), r);
    }
    m
}
