use super::generator::anomaly_positions;
use super::*;

/// Reference values computed with an independent implementation of splitmix64 and
/// xoshiro256** (state seeded by four splitmix64 outputs from 0).
#[test]
fn prng_reference_values() {
    let mut s = 0;
    assert_eq!(splitmix64(&mut s), 0xe220_a839_7b1d_cdaf);
    let mut r = Rng::new(0);
    assert_eq!(r.next_u64(), 0x99ec_5f36_cb75_f2b4);
    assert_eq!(r.next_u64(), 0xbf6e_1f78_4956_452a);
    assert_eq!(r.next_u64(), 0x1a5f_849d_4933_e6e0);
}

#[test]
fn below_and_f64_in_range() {
    let mut r = Rng::new(7);
    for n in [1u64, 2, 3, 1000, u64::MAX] {
        for _ in 0..100 {
            assert!(r.below(n) < n);
        }
    }
    for _ in 0..1000 {
        let x = r.next_f64();
        assert!((0.0..1.0).contains(&x));
    }
}

#[test]
fn permute24_is_a_bijection_on_small_ranges() {
    let mut seen = std::collections::HashSet::new();
    for i in 0..70_000 {
        let v = permute24(i, 0x1234_5678);
        assert!(v <= 0x00ff_ffff);
        assert!(seen.insert(v), "collision at {i}");
    }
}

#[test]
fn imix_proportions() {
    let count = |s| IMIX_CYCLE.iter().filter(|&&x| x == s).count();
    assert_eq!((count(64), count(576), count(1500)), (7, 4, 1));
    assert_eq!(Sizes::Imix.size_for(6), 1500);
    assert_eq!(Sizes::Fixed(vec![1, 2, 3]).size_for(4), 2);
}

#[test]
fn parse_cli_values() {
    assert_eq!("imix".parse::<Sizes>(), Ok(Sizes::Imix));
    assert_eq!("64, 512".parse::<Sizes>(), Ok(Sizes::Fixed(vec![64, 512])));
    assert!("64,x".parse::<Sizes>().is_err());
    assert_eq!("V6".parse::<IpMix>(), Ok(IpMix::V6));
    assert!("v5".parse::<IpMix>().is_err());
    assert_eq!("quickstart".parse::<Preset>(), Ok(Preset::Quickstart));
}

#[test]
fn default_addresses() {
    let a = Addressing::default();
    assert_eq!(a.gnb_v4(2), Ipv4Addr::new(192, 0, 2, 12));
    assert_eq!(a.gnb_v6(1), "2001:db8:3::11".parse::<Ipv6Addr>().unwrap());
    assert_eq!(a.ue_v4(0), Ipv4Addr::new(10, 45, 0, 1));
    assert_eq!(a.ue_v4(300), Ipv4Addr::new(10, 45, 1, 45));
    assert_eq!(
        a.ue_v6(0x1234),
        "2001:db8:45:1234::1".parse::<Ipv6Addr>().unwrap()
    );
    assert_eq!(a.dn_server_v4(0), Ipv4Addr::new(198, 51, 100, 1));
    assert_eq!(
        a.dn_server_v6(1),
        "2001:db8:6::2".parse::<Ipv6Addr>().unwrap()
    );
    assert_eq!(a.ue_capacity(), 65534);
}

#[test]
fn sessions_have_unique_teids_and_spread_qfis() {
    let spec = TrafficSpec {
        ues: 5000,
        gnbs: 7,
        ..TrafficSpec::default()
    };
    let ss = spec.sessions();
    let ul: std::collections::HashSet<u32> = ss.iter().map(|s| s.ul_teid).collect();
    let dl: std::collections::HashSet<u32> = ss.iter().map(|s| s.dl_teid).collect();
    assert_eq!((ul.len(), dl.len()), (5000, 5000));
    assert!(!ul.contains(&UNKNOWN_TEID) && !ul.contains(&0));
    assert!(ss.iter().all(|s| s.gnb_index == s.ue_index % 7));
    assert!(ss.iter().all(|s| s.qfis.first() == Some(&s.qfi)));
    assert_eq!(ss[2].qfis, vec![9, 1, 5]);
    assert!(ss.iter().any(|s| s.gnb_addr.is_ipv4()) && ss.iter().any(|s| s.gnb_addr.is_ipv6()));
}

#[test]
fn validate_rejects_bad_specs() {
    let ok = TrafficSpec::default();
    assert!(ok.validate().is_ok());
    let breakers: [fn(&mut TrafficSpec); 10] = [
        |s| s.ues = 0,
        |s| s.ues = 70_000,
        |s| s.gnbs = 0,
        |s| s.qfis.clear(),
        |s| s.qfis = vec![64],
        |s| s.ul_ratio = 1.5,
        |s| s.ul_ratio = f64::NAN,
        |s| s.sizes = Sizes::Fixed(vec![]),
        |s| s.rate_pps = Some(0.0),
        |s| (s.anomalies, s.packets) = (11, 10),
    ];
    for (i, brk) in breakers.iter().enumerate() {
        let mut b = ok.clone();
        brk(&mut b);
        assert!(b.validate().is_err(), "case {i}: {b:?}");
    }
}

#[test]
fn anomaly_positions_are_distinct_and_in_range() {
    let spec = TrafficSpec {
        packets: 100,
        anomalies: 100,
        ..TrafficSpec::default()
    };
    assert_eq!(anomaly_positions(&spec), (0..100).collect::<Vec<u64>>());
    let spec = TrafficSpec {
        packets: 1000,
        anomalies: 37,
        ..TrafficSpec::default()
    };
    let p = anomaly_positions(&spec);
    assert_eq!(p.len(), 37);
    assert!(p.windows(2).all(|w| w[0] < w[1]) && p[36] < 1000);
}

#[test]
fn timestamps_follow_the_rate() {
    let spec = TrafficSpec {
        rate_pps: Some(250_000.0),
        ..TrafficSpec::default()
    };
    assert_eq!(spec.ts_ns(0), START_TS_NS);
    assert_eq!(spec.ts_ns(3), START_TS_NS + 12_000);
    assert_eq!(TrafficSpec::default().ts_ns(5), START_TS_NS + 5_000);
}
