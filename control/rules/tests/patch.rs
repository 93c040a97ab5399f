//! Shards patched incrementally equal shards built from scratch: random establishments,
//! modifications (MBR, UE address, SDF filters) and deletions with builds at random points,
//! then the same final sessions compiled by a fresh compiler; and a snapshot taken midway
//! stays as it was.

mod common;

use peregrine_dataplane::upf::shards::MAX_LAG;
use peregrine_dataplane::upf::tables::{
    shard_of_in, Direction, FarRule, FlowFilter, KeyMap, KeySlot, QerRule, Shard, UpfTables, NONE,
};
use peregrine_n4::Session;
use peregrine_rules::static_sessions::{
    synthetic, to_sessions, N3Addresses, StaticSession, SyntheticParams,
};
use peregrine_rules::{Compiler, CompilerConfig};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, Ipv6Addr};

const N3: N3Addresses = N3Addresses {
    v4: Some(Ipv4Addr::new(192, 0, 2, 1)),
    v6: Some(Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 1)),
};

fn compiler() -> Compiler {
    Compiler::new(CompilerConfig {
        local_v4: N3.v4.into_iter().collect(),
        local_v6: N3.v6.into_iter().collect(),
        max_meter_slots: 100_000,
        max_urr_slots: 100_000,
        qos: peregrine_dataplane::qos::QosPolicies::new(
            peregrine_dataplane::qos::QerPolicy::legacy_policing(),
        ),
    })
}

fn session(s: &StaticSession) -> Session {
    to_sessions(std::slice::from_ref(s), N3).unwrap().remove(0)
}

/// One candidate PDR with everything it resolves to, slots left out (they depend on the
/// allocation history): (SEID, PDR ID, direction, QFI, filters, decap, FAR, QERs).
type Resolved = (
    u64,
    u16,
    Direction,
    Option<u8>,
    Vec<FlowFilter>,
    bool,
    FarRule,
    Vec<String>,
);
/// (map, key) -> (candidates in order, fast-path record without slots).
type View = BTreeMap<(u8, u64), (Vec<Resolved>, Option<String>)>;

fn qer_text(q: &QerRule) -> String {
    format!(
        "{} {} {:?} {:?} {:?}",
        q.qer_id, q.gate_open, q.meter_cfg, q.pacer, q.qfi
    )
}

fn view_map<K: Copy + Into<u64>>(
    c: Option<&Compiler>,
    sh: &Shard,
    m: &KeyMap<K>,
    tag: u8,
    key_of: impl Fn(u64) -> K,
    v: &mut View,
    own: impl Fn(u64) -> bool,
) {
    let slot = |k: u64| *m.slot(key_of(k)).unwrap();
    view_entries(c, sh, m.iter(), slot, tag, v, own);
}

/// [`view_map`] of a shard's uplink TEIDs, those of its map and those of its list, whose
/// slots (with the fast-path records) are their page slots in `t`.
fn view_teids(
    c: Option<&Compiler>,
    t: &UpfTables,
    sh: &Shard,
    v: &mut View,
    own: impl Fn(u64) -> bool,
) {
    let slot = |k: u64| match sh.by_teid.slot(k as u32) {
        Some(s) => *s,
        None => {
            let (page, i) = t.shards.teid_page(k).expect("a listed TEID has its page");
            assert_eq!(page[i].key(), k);
            page[i]
        }
    };
    view_entries(c, sh, sh.teids(), slot, 0, v, own);
}

fn view_entries(
    c: Option<&Compiler>,
    sh: &Shard,
    entries: impl Iterator<Item = (u64, (u32, u32))>,
    slot: impl Fn(u64) -> KeySlot,
    tag: u8,
    v: &mut View,
    own: impl Fn(u64) -> bool,
) {
    for (key, (a, b)) in entries.filter(|e| own(e.0)) {
        let mut cands = Vec::new();
        for &pi in &sh.pdr_order[a as usize..b as usize] {
            let p = &sh.pdrs[pi as usize];
            let seid = sh.sessions[p.session as usize].up_seid;
            let mut qers = Vec::new();
            for &q in p.qers.iter().filter(|&&q| q != NONE) {
                let rule = &sh.qers[q as usize];
                // Slots agree with the compiler's own record.
                if let (Some(c), true) = (c, rule.meter.slot != NONE) {
                    assert_eq!(c.meter(seid, rule.qer_id, p.direction), Some(rule.meter));
                }
                qers.push(qer_text(rule));
            }
            for u in p.urrs.iter().filter(|u| u.slot != NONE) {
                if let Some(c) = c {
                    assert_eq!(c.urr_slot(seid, 1), Some(u.slot));
                }
            }
            cands.push((
                seid,
                p.pdr_id,
                p.direction,
                p.qfi,
                sh.filters[p.filters.0 as usize..p.filters.1 as usize].to_vec(),
                p.remove_gtpu,
                sh.fars[p.far as usize],
                qers,
            ));
        }
        let fast = slot(key).fast().map(|f| {
            for (mr, &qi) in f.meters.iter().zip(&f.meter_qers) {
                if mr.slot != NONE {
                    assert_eq!(sh.qers[qi as usize].meter, *mr);
                }
            }
            format!(
                "{:?} {} {} {}",
                f.outer(),
                f.pdr_qfi,
                f.mark_qfi,
                f.meters.iter().filter(|m| m.slot != NONE).count()
            )
        });
        assert!(v.insert((tag, key), (cands, fast)).is_none());
    }
}

/// [`view`] as a lookup sees it: only the keys at their own shard position (a table whose
/// shard count grew shares a shard between positions until a build splits it).
fn view_owned(c: Option<&Compiler>, t: &UpfTables) -> View {
    let mut v = View::new();
    for (i, sh) in t.shards.iter().enumerate() {
        let own = |k: u64| shard_of_in(k, t.shard_bits) == i;
        view_teids(c, t, sh, &mut v, own);
        view_map(c, sh, &sh.by_ue_v4, 1, |k| k as u32, &mut v, own);
        view_map(c, sh, &sh.by_ue_v6, 2, |k| k, &mut v, own);
    }
    v
}

/// The whole tables as resolved candidates, and per-shard vector lengths.
fn view(c: Option<&Compiler>, t: &UpfTables) -> (View, Vec<[usize; 6]>) {
    let mut v = View::new();
    let mut lens = Vec::new();
    for sh in &t.shards {
        view_teids(c, t, sh, &mut v, |_| true);
        view_map(c, sh, &sh.by_ue_v4, 1, |k| k as u32, &mut v, |_| true);
        view_map(c, sh, &sh.by_ue_v6, 2, |k| k, &mut v, |_| true);
        lens.push([
            sh.pdr_order.len(),
            sh.pdrs.len(),
            sh.filters.len(),
            sh.fars.len(),
            sh.qers.len(),
            sh.sessions.len(),
        ]);
    }
    (v, lens)
}

/// xorshift64: deterministic, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `n` synthetic sessions, each with a 50 Mbit/s MBR (a QER to change under churn).
fn mbr_pool(n: usize) -> Vec<StaticSession> {
    synthetic(
        n,
        &SyntheticParams {
            mbr_kbps: Some(50_000),
            ..SyntheticParams::default()
        },
    )
}

/// `t` (built by `c`) looks every key up to the same rules as a fixed-count compiler's
/// tables built from scratch with the `live` sessions.
fn assert_resolves_as_from_scratch(
    c: &Compiler,
    t: &UpfTables,
    live: &BTreeMap<u64, StaticSession>,
) {
    let got = view_owned(Some(c), t);
    let mut scratch = compiler();
    for s in live.values() {
        scratch.upsert(&session(s)).unwrap();
    }
    let built = scratch.build();
    let (want, _) = view(Some(&scratch), &built);
    assert_eq!(got.len(), want.len());
    for (k, v) in &want {
        assert_eq!(got.get(k), Some(v), "key {k:?}");
    }
}

/// One random operation of the growth tests' churn: a session of `pool` not yet live is
/// established; a live one is deleted (1 in 6) or its downlink MBR changed.
fn churn(
    c: &mut Compiler,
    pool: &[StaticSession],
    live: &mut BTreeMap<u64, StaticSession>,
    rng: &mut Rng,
) {
    let i = rng.below(pool.len() as u64) as usize;
    let seid = pool[i].seid;
    match (live.get(&seid).cloned(), rng.below(6)) {
        (None, _) => {
            c.upsert(&session(&pool[i])).unwrap();
            live.insert(seid, pool[i].clone());
        }
        (Some(_), 0) => {
            c.remove(seid);
            live.remove(&seid);
        }
        (Some(mut s), _) => {
            s.mbr_dl_kbps = Some(10_000 + rng.below(90_000));
            c.upsert(&session(&s)).unwrap();
            live.insert(seid, s);
        }
    }
}

#[test]
fn patched_shards_equal_shards_built_from_scratch() {
    let pool = mbr_pool(4000);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut live: BTreeMap<u64, StaticSession> = BTreeMap::new();
    let mut c = compiler();
    let mut fresh_v4 = u32::from(Ipv4Addr::new(10, 200, 0, 0));
    let mut midway = None;
    for op in 0..12_000 {
        let i = rng.below(pool.len() as u64) as usize;
        let seid = pool[i].seid;
        match (live.get(&seid).cloned(), rng.below(5)) {
            (None, _) => {
                let mut s = pool[i].clone();
                if rng.below(4) == 0 {
                    s.sdf = vec!["permit out udp from 198.51.100.0/24 53 to assigned".into()];
                }
                c.upsert(&session(&s)).unwrap();
                live.insert(seid, s);
            }
            (Some(_), 0) => {
                c.remove(seid);
                live.remove(&seid);
            }
            (Some(mut s), k) => {
                match k {
                    1 => s.mbr_dl_kbps = Some(10_000 + rng.below(90_000)),
                    2 => {
                        fresh_v4 += 1;
                        s.ue_ipv4 = Some(Ipv4Addr::from(fresh_v4));
                    }
                    3 => s.sdf = vec!["permit out ip from 203.0.113.0/24 to assigned".into()],
                    _ => s.sdf.clear(),
                }
                c.upsert(&session(&s)).unwrap();
                live.insert(seid, s);
            }
        }
        if rng.below(40) == 0 {
            let t = c.build();
            if midway.is_none() && op > 6000 {
                let v = view(Some(&c), &t);
                midway = Some((t, v, live.keys().copied().collect::<BTreeSet<u64>>()));
            }
        }
    }
    let patched = c.build();
    let (got, got_lens) = view(Some(&c), &patched);

    let mut scratch = compiler();
    // Another order: shard contents may be ordered differently, never differ.
    for s in live.values().rev() {
        scratch.upsert(&session(s)).unwrap();
    }
    let built = scratch.build();
    let (want, want_lens) = view(Some(&scratch), &built);
    assert_eq!(got.len(), want.len());
    for (k, v) in &want {
        assert_eq!(got.get(k), Some(v), "key {k:?}");
    }
    // No entry of a removed or replaced session is left behind in any shard.
    assert_eq!(got_lens, want_lens);
    let seids: BTreeSet<u64> = got
        .values()
        .flat_map(|(c, _)| c.iter().map(|r| r.0))
        .collect();
    assert_eq!(seids, live.keys().copied().collect());

    // The snapshot taken midway is as it was (workers may still read it).
    let (t, before, seids) = midway.expect("a midway build");
    assert_eq!(view(None, &t), before);
    let at: BTreeSet<u64> = before
        .0
        .values()
        .flat_map(|(c, _)| c.iter().map(|r| r.0))
        .collect();
    assert_eq!(at, seids);
}

/// A compiler whose shard count follows the sessions (`grow_shards_above`) doubles its
/// shards under churn, and its tables look every key up to the same rules as a fixed-count
/// compiler's built from scratch; snapshots taken before a doubling stay as they were.
#[test]
fn grown_shards_equal_shards_built_from_scratch() {
    grown_shards_resolve_as_from_scratch(mbr_pool(3000));
}

/// [`grown_shards_equal_shards_built_from_scratch`] with the sessions' TEIDs numbered as
/// F-TEID CHOOSE hands them out (1, 2, 3, ...): every TEID has a direct page slot
/// (`upf::pages`), which must follow its shard through the doublings, the splits and the
/// appends to split halves.
#[test]
fn grown_shards_with_paged_teids_equal_shards_built_from_scratch() {
    let mut pool = mbr_pool(3000);
    for (i, s) in pool.iter_mut().enumerate() {
        s.ul_teid = i as u32 + 1;
    }
    grown_shards_resolve_as_from_scratch(pool);
}

fn grown_shards_resolve_as_from_scratch(pool: Vec<StaticSession>) {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut live: BTreeMap<u64, StaticSession> = BTreeMap::new();
    let mut c = compiler().grow_shards_above(2);
    let mut snapshots = Vec::new();
    for op in 0..9_000 {
        churn(&mut c, &pool, &mut live, &mut rng);
        if rng.below(50) == 0 {
            let t = c.build();
            if op % 4 == 0 {
                let v = view_owned(None, &t);
                snapshots.push((t, v));
            }
        }
    }
    let grown = c.build();
    // 3 keys per session (TEID, UE IPv4, UE /64), at most 2 per shard on average.
    assert!(grown.shard_bits > 10, "{}", grown.shard_bits);
    assert!(3 * live.len() <= 2 << grown.shard_bits);
    assert_resolves_as_from_scratch(&c, &grown, &live);
    let grown_sizes: BTreeSet<u32> = snapshots.iter().map(|(t, _)| t.shard_bits).collect();
    assert!(
        grown_sizes.len() > 1,
        "the count grew between snapshots: {grown_sizes:?}"
    );
    for (t, before) in &snapshots {
        assert_eq!(&view_owned(None, t), before);
    }
}

/// Builds under churn with doublings recycle earlier versions' shard arrays (no copy of the
/// array per build) while snapshots are held for random numbers of builds: a snapshot never
/// changes while held, every live session's keys are found in every build, and the last
/// build resolves every key as a fixed-count compiler's built from scratch.
#[test]
fn recycled_shard_arrays_keep_snapshots_and_find_every_key() {
    let pool = mbr_pool(2500);
    let mut rng = Rng(0xd1b5_4a32_d192_ed03);
    let mut live: BTreeMap<u64, StaticSession> = BTreeMap::new();
    let mut c = compiler().grow_shards_above(2);
    // (release after this build, snapshot, its view when taken)
    let mut held: Vec<(usize, UpfTables, View)> = Vec::new();
    let (mut builds, mut doublings, mut bits) = (0usize, 0, 0);
    for _ in 0..7_000 {
        churn(&mut c, &pool, &mut live, &mut rng);
        if rng.below(12) != 0 {
            continue;
        }
        let t = c.build();
        builds += 1;
        if bits != 0 && t.shard_bits != bits {
            doublings += 1;
        }
        bits = t.shard_bits;
        let statics: Vec<StaticSession> = live.values().cloned().collect();
        common::assert_every_key_found(&t, &statics);
        // A snapshot released now was held through every build since it was taken.
        held.retain(|(until, s, before)| {
            if *until > builds {
                return true;
            }
            assert_eq!(&view_owned(None, s), before, "a held snapshot changed");
            false
        });
        let hold = match rng.below(4) {
            0 | 1 => continue,
            2 => 1 + rng.below(3),
            _ => 1 + rng.below(3 * MAX_LAG),
        };
        let v = view_owned(None, &t);
        held.push((builds + hold as usize, t, v));
    }
    for (_, s, before) in &held {
        assert_eq!(&view_owned(None, s), before);
    }
    drop(held);
    let last = c.build();
    assert_resolves_as_from_scratch(&c, &last, &live);
    let (recycled, copied) = c.shard_array_counts();
    assert!(doublings >= 2, "{doublings}");
    assert_eq!(recycled + copied, builds as u64 + 1);
    // A copy at the first build, after each doubling and when every kept array is held;
    // recycled otherwise.
    assert!(
        copied > doublings && recycled > copied,
        "{recycled} {copied}"
    );
}
