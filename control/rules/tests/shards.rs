//! The shard count follows the compiler's capacity (URR slots): ~128 sessions per shard at
//! capacity, 2^10..2^16 shards, and every key is found through the tables' own shard index.

mod common;

use peregrine_dataplane::upf::tables::{MAX_SHARD_BITS, NUM_SHARDS, SHARD_BITS};
use peregrine_rules::static_sessions::{synthetic, to_sessions, N3Addresses, SyntheticParams};
use peregrine_rules::{shard_bits_for, Compiler, CompilerConfig};
use std::net::{Ipv4Addr, Ipv6Addr};

#[test]
fn shard_bits_follow_the_capacity() {
    assert_eq!(shard_bits_for(0), SHARD_BITS);
    assert_eq!(shard_bits_for(100_000), SHARD_BITS);
    assert_eq!(shard_bits_for(200_000), 11);
    assert_eq!(shard_bits_for(2_000_000), 14);
    assert_eq!(shard_bits_for(4_040_064), 15);
    assert_eq!(shard_bits_for(u32::MAX), MAX_SHARD_BITS);
}

#[test]
fn big_capacity_tables_find_every_key() {
    const N: usize = 20_000;
    let statics = synthetic(N, &SyntheticParams::default());
    let n3 = N3Addresses {
        v4: Some(Ipv4Addr::new(192, 0, 2, 1)),
        v6: Some(Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 1)),
    };
    let mut c = Compiler::new(CompilerConfig {
        local_v4: n3.v4.into_iter().collect(),
        local_v6: n3.v6.into_iter().collect(),
        max_meter_slots: 4_000_000,
        max_urr_slots: 2_000_000,
        qos: peregrine_dataplane::qos::QosPolicies::new(
            peregrine_dataplane::qos::QerPolicy::legacy_policing(),
        ),
    });
    for s in to_sessions(&statics, n3).unwrap() {
        c.upsert(&s).unwrap();
    }
    let t = c.build();
    assert_eq!((t.shard_bits, t.shards.len()), (14, 16 * NUM_SHARDS));
    common::assert_every_key_found(&t, &statics);
}
