//! `peregrine_rules::static_sessions::synthetic` must number sessions exactly as pg-gen's
//! traffic does, or the default job's packets would miss every rule.

use peregrine_rules::static_sessions::{synthetic, OuterMix, SyntheticParams};
use peregrine_testkit::traffic::{IpMix, Preset};
use std::net::IpAddr;

#[test]
fn synthetic_sessions_match_pg_gen() {
    for (outer, mix, seed) in [
        (IpMix::Mixed, OuterMix::Mixed, 1),
        (IpMix::V4, OuterMix::V4, 7),
        (IpMix::V6, OuterMix::V6, 42),
    ] {
        let mut spec = Preset::Quickstart.spec();
        spec.ues = 3000;
        spec.outer = outer;
        spec.seed = seed;
        spec.gnbs = 5;
        spec.qfis = vec![2, 7];
        let a = &spec.addressing;
        let p = SyntheticParams {
            seed,
            qfis: spec.qfis.clone(),
            gnbs: spec.gnbs,
            outer: mix,
            ue_pool_v4: a.ue_pool_v4.addr,
            ue_pool_v6: a.ue_pool_v6.addr,
            gnb_v4: a.gnb_n3_v4,
            gnb_v6: a.gnb_n3_v6,
            mbr_kbps: None,
        };
        let ours = synthetic(spec.ues as usize, &p);
        let theirs = spec.sessions();
        assert_eq!(ours.len(), theirs.len());
        let mut v6 = 0;
        for (o, t) in ours.iter().zip(&theirs) {
            assert_eq!(o.ue_ipv4, Some(t.ue_ipv4), "UE {}", t.ue_index);
            assert_eq!(o.ue_ipv6, Some(t.ue_ipv6), "UE {}", t.ue_index);
            assert_eq!(o.ul_teid, t.ul_teid, "UE {}", t.ue_index);
            assert_eq!(o.dl_teid, t.dl_teid, "UE {}", t.ue_index);
            assert_eq!(o.gnb, t.gnb_addr, "UE {}", t.ue_index);
            assert_eq!(o.qfi, t.qfi, "UE {}", t.ue_index);
            v6 += usize::from(matches!(o.gnb, IpAddr::V6(_)));
        }
        // The mixed case really mixes.
        if mix == OuterMix::Mixed {
            assert!(v6 > 1000 && v6 < 2000, "{v6}");
        }
    }
}
