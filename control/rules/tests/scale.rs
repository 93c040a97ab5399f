//! 100 000 synthetic sessions (pg-gen numbering): every key is filed, one change touches
//! few shards, and the memory estimate per session is printed with its breakdown.
//! Timing lives in the criterion bench `perf/benches/rules.rs`.

mod common;

use peregrine_dataplane::upf::tables::NUM_SHARDS;
use peregrine_rules::static_sessions::{synthetic, to_sessions, N3Addresses, SyntheticParams};
use peregrine_rules::{session_bytes_estimate, Compiler, CompilerConfig};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

#[test]
fn hundred_thousand_sessions() {
    const N: usize = 100_000;
    let p = SyntheticParams {
        mbr_kbps: Some(50_000),
        // pg-gen's default /48 pool numbers only 65 536 UE prefixes; use a /32.
        ue_pool_v6: Ipv6Addr::new(0xfd45, 0, 0, 0, 0, 0, 0, 0),
        ..SyntheticParams::default()
    };
    let statics = synthetic(N, &p);
    let n3 = N3Addresses {
        v4: Some(Ipv4Addr::new(192, 0, 2, 1)),
        v6: Some(Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 1)),
    };
    let sessions = to_sessions(&statics, n3).unwrap();
    let mut c = Compiler::new(CompilerConfig {
        local_v4: n3.v4.into_iter().collect(),
        local_v6: n3.v6.into_iter().collect(),
        max_meter_slots: 2 * N as u32,
        max_urr_slots: N as u32,
        qos: peregrine_dataplane::qos::QosPolicies::new(
            peregrine_dataplane::qos::QerPolicy::legacy_policing(),
        ),
    });
    for s in &sessions {
        c.upsert(s).unwrap();
    }
    let t = c.build();
    // Every session is findable by TEID, UE IPv4 and UE /64.
    common::assert_every_key_found(&t, &statics);
    let stats = c.stats();
    assert_eq!((stats.sessions, stats.pdrs), (N, 3 * N));
    assert_eq!(
        (stats.meter_slots_used, stats.urr_slots_used),
        (2 * N as u32, N as u32)
    );

    // One modification: at most 3 shards rebuilt (TEID, UE v4, UE v6 shards).
    let mut s = sessions[12_345].clone();
    s.qers.get_mut(&1).unwrap().mbr.as_mut().unwrap().dl = 70_000;
    c.upsert(&s).unwrap();
    let t2 = c.build();
    let changed = (0..NUM_SHARDS)
        .filter(|&i| !Arc::ptr_eq(&t.shards[i], &t2.shards[i]))
        .count();
    assert!((1..=3).contains(&changed), "{changed}");

    let n4 = sessions.iter().map(session_bytes_estimate).sum::<usize>() / N;
    let per = |b: usize| b / N;
    println!(
        "bytes/session: n4 Session {} + compiled {} + shards {} + indexes {} = {}",
        n4,
        per(stats.compiled_bytes),
        per(stats.shard_bytes),
        per(stats.index_bytes),
        n4 + per(stats.total_bytes())
    );
    // The compiler's own share must stay within the 2 KiB budget.
    assert!(per(stats.total_bytes()) <= 2048, "{stats:?}");
}
