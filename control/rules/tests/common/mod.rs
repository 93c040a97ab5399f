//! Helpers shared by the rules crate's integration tests.

use peregrine_dataplane::upf::tables::UpfTables;
use peregrine_rules::static_sessions::StaticSession;

/// Every session is findable through the tables' own shard index: by uplink TEID, UE IPv4
/// and UE /64.
pub fn assert_every_key_found(t: &UpfTables, statics: &[StaticSession]) {
    for st in statics {
        assert!(t.teid_candidates(st.ul_teid).is_some());
        let v4 = u32::from(st.ue_ipv4.unwrap());
        assert!(t.ue_v4_shard(v4).by_ue_v4.contains_key(&v4));
        let p64 = (u128::from(st.ue_ipv6.unwrap()) >> 64) as u64;
        assert!(t.ue_v6_shard(p64).by_ue_v6.contains_key(&p64));
    }
}
