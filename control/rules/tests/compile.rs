//! The compiler fed by the real N4 node: sessions established and modified with PFCP
//! requests, then the compiled shards inspected.

use peregrine_dataplane::qos::trtcm::kbps_to_bytes_per_s;
use peregrine_dataplane::upf::tables::{
    iface, Direction, FarAction, FlowFilter, IpPrefix, OuterHeader, PdrRule, Shard, UpfTables,
    NONE, NUM_SHARDS,
};
use peregrine_n4::Session;
use peregrine_pfcp::cause;
use peregrine_pfcp::ie::{apply_action as aa, ie_type as t, FTeid, Ie, OuterHeaderCreation};
use peregrine_pfcp::message::SessionModificationRequest;
use peregrine_rules::{Compiler, CompilerConfig};
use peregrine_testkit::pfcp::compile::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

fn compiler_cfg() -> CompilerConfig {
    CompilerConfig {
        local_v4: vec![N3],
        local_v6: vec![N3_V6],
        max_meter_slots: 10_000,
        max_urr_slots: 10_000,
        qos: peregrine_dataplane::qos::QosPolicies::new(
            peregrine_dataplane::qos::QerPolicy::legacy_policing(),
        ),
    }
}

fn ue(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 60, 0, 1)) + i)
}

/// The shard and candidate PDRs (in order) under an uplink TEID.
fn by_teid(t: &UpfTables, teid: u32) -> (&Shard, Vec<&PdrRule>) {
    let sh = t.teid_shard(teid);
    let v = t.teid_candidates(teid).map_or(vec![], |(_, (a, b))| {
        sh.pdr_order[a as usize..b as usize]
            .iter()
            .map(|&i| &sh.pdrs[i as usize])
            .collect()
    });
    (sh, v)
}

fn by_ue(t: &UpfTables, ue: Ipv4Addr) -> (&Shard, Vec<&PdrRule>) {
    let k = u32::from(ue);
    let sh = t.ue_v4_shard(k);
    let v = sh.by_ue_v4.get(&k).map_or(vec![], |&(a, b)| {
        sh.pdr_order[a as usize..b as usize]
            .iter()
            .map(|&i| &sh.pdrs[i as usize])
            .collect()
    });
    (sh, v)
}

fn ul_teid(s: &Session) -> u32 {
    s.pdrs[&1].pdi.f_teid.unwrap().teid
}

fn total_pdrs(t: &UpfTables) -> usize {
    t.shards.iter().map(|s| s.pdrs.len()).sum()
}

#[test]
fn establishment_compiles_keys_precedence_far_qer_urr() {
    let mut n = node();
    let mut r = est(1, None, ue(0));
    // Two more downlink PDRs: a DNS flow and a tie broken by PDR ID.
    r.create_pdr.push(pdr_dl(
        4,
        50,
        ue(0),
        None,
        2,
        vec![sdf("permit out udp from 198.51.100.1 53 to assigned")],
    ));
    r.create_pdr.push(pdr_dl(
        3,
        50,
        ue(0),
        None,
        2,
        vec![sdf(
            "permit out tcp from 198.51.100.0/24 to assigned 80,443",
        )],
    ));
    let seid = establish(&mut n, 2, r);
    let s = session(&n, seid);
    let mut c = Compiler::new(compiler_cfg());
    c.check(&s).unwrap();
    c.upsert(&s).unwrap();
    let tables = c.build();
    assert_eq!(tables.local_v4, vec![N3]);

    // Uplink: keyed by the TEID the node chose, GTP-U removed, forward to core, UL QER.
    let teid = ul_teid(&s);
    let (sh, ul) = by_teid(&tables, teid);
    assert_eq!(ul.len(), 1);
    let p = ul[0];
    assert_eq!(
        (p.pdr_id, p.direction, p.remove_gtpu),
        (1, Direction::Uplink, true)
    );
    assert_eq!(sh.sessions[p.session as usize].up_seid, seid);
    assert_eq!(
        sh.filters[p.filters.0 as usize..p.filters.1 as usize].len(),
        1
    );
    let far = sh.fars[p.far as usize];
    assert_eq!(
        (far.far_id, far.action, far.dst_iface, far.outer),
        (1, FarAction::Forward, iface::CORE, None)
    );
    let q = sh.qers[p.qers[0] as usize];
    assert_eq!(p.qers[1], NONE);
    assert!(q.gate_open);
    assert_eq!(q.qfi, Some(9));
    let cfg = q.meter_cfg.unwrap();
    assert_eq!((cfg.pir, cfg.cir), (kbps_to_bytes_per_s(100_000), 0));
    assert_eq!(q.meter.generation, 1);
    assert_eq!(p.urrs[0].slot, c.urr_slot(seid, 1).unwrap());

    // Downlink: precedence order 3, 4 (tie at 50, by PDR ID), then 2.
    let (sh, dl) = by_ue(&tables, ue(0));
    assert_eq!(dl.iter().map(|p| p.pdr_id).collect::<Vec<_>>(), [3, 4, 2]);
    assert!(dl
        .iter()
        .all(|p| p.direction == Direction::Downlink && !p.remove_gtpu));
    // PDR 3's port list became two filters, remote side as source.
    let f3 = &sh.filters[dl[0].filters.0 as usize..dl[0].filters.1 as usize];
    assert_eq!(f3.len(), 2);
    assert_eq!(f3[1].dst_ports, Some((443, 443)));
    let f4 = &sh.filters[dl[1].filters.0 as usize..dl[1].filters.1 as usize];
    assert_eq!(
        f4,
        [FlowFilter {
            proto: Some(17),
            src: Some(IpPrefix::V4(Ipv4Addr::new(198, 51, 100, 1), 32)),
            dst: None,
            src_ports: Some((53, 53)),
            dst_ports: None,
        }]
    );
    // One FAR and one DL QER entry shared by the three PDRs of the shard.
    assert!(dl
        .iter()
        .all(|p| p.far == dl[0].far && p.qers == dl[0].qers));
    let far = sh.fars[dl[0].far as usize];
    assert_eq!(
        far.outer,
        Some(OuterHeader {
            teid: 0x100,
            peer: IpAddr::V4(GNB),
            local: IpAddr::V4(N3),
        })
    );
    let q = sh.qers[dl[0].qers[0] as usize];
    assert_eq!(q.meter_cfg.unwrap().pir, kbps_to_bytes_per_s(200_000));
    // UL and DL meters are different slots.
    let ul_meter = by_teid(&tables, teid).0.qers[0].meter;
    assert_ne!(q.meter.slot, ul_meter.slot);
    let st = c.stats();
    assert_eq!(
        (st.sessions, st.pdrs, st.meter_slots_used, st.urr_slots_used),
        (1, 4, 2, 1)
    );
    assert_eq!(tables.meter_slots, 2);
}

#[test]
fn removal_clears_every_key_and_frees_slots() {
    let mut n = node();
    let mut c = Compiler::new(compiler_cfg());
    let a = establish(&mut n, 2, est(1, None, ue(0)));
    let b = establish(&mut n, 3, est(2, None, ue(1)));
    let (sa, sb) = (session(&n, a), session(&n, b));
    c.upsert(&sa).unwrap();
    c.upsert(&sb).unwrap();
    let t1 = c.build();
    assert_eq!(total_pdrs(&t1), 4);
    assert_eq!(delete(&mut n, 4, a), cause::REQUEST_ACCEPTED);
    c.remove(a);
    c.remove(a); // twice: no effect
    let t2 = c.build();
    assert!(by_teid(&t2, ul_teid(&sa)).1.is_empty());
    assert!(by_ue(&t2, ue(0)).1.is_empty());
    assert_eq!(by_ue(&t2, ue(1)).1.len(), 1);
    assert_eq!(total_pdrs(&t2), 2);
    assert!(t2
        .shards
        .iter()
        .all(|s| s.sessions.iter().all(|i| i.up_seid != a)));
    assert_eq!(c.urr_slot(a, 1), None);
    c.remove(b);
    let t3 = c.build();
    assert_eq!(total_pdrs(&t3), 0);
    assert!(t3.shards.iter().all(|s| s.by_teid.is_empty()
        && s.paged_teids.is_empty()
        && s.by_ue_v4.is_empty()
        && s.fars.is_empty()
        && s.qers.is_empty()
        && s.filters.is_empty()));
    let st = c.stats();
    assert_eq!(
        (st.sessions, st.meter_slots_used, st.urr_slots_used),
        (0, 0, 0)
    );
}

#[test]
fn slot_reuse_and_meter_changes_bump_generation() {
    let mut n = node();
    let mut c = Compiler::new(compiler_cfg());
    let a = establish(&mut n, 2, est(1, None, ue(0)));
    c.upsert(&session(&n, a)).unwrap();
    let m_ul = c.meter(a, 1, Direction::Uplink).unwrap();
    let m_dl = c.meter(a, 1, Direction::Downlink).unwrap();
    let u = c.urr_slot(a, 1).unwrap();
    assert_eq!((m_ul.generation, m_dl.generation), (1, 1));

    // Same MBR again (an unrelated modification): slots and generations unchanged.
    let upd = SessionModificationRequest {
        update_far: vec![g(
            t::UPDATE_FAR,
            vec![
                Ie::FarId(1),
                Ie::ApplyAction(peregrine_pfcp::ie::Bitmap(aa::FORW)),
            ],
        )],
        ..Default::default()
    };
    assert_eq!(modify(&mut n, 3, a, upd), cause::REQUEST_ACCEPTED);
    c.upsert(&session(&n, a)).unwrap();
    assert_eq!(c.meter(a, 1, Direction::Uplink), Some(m_ul));

    // DL MBR changes: the DL slot stays, its generation bumps; UL untouched.
    let upd = SessionModificationRequest {
        update_qer: vec![g(
            t::UPDATE_QER,
            vec![
                Ie::QerId(1),
                Ie::Mbr(peregrine_pfcp::ie::BitRate {
                    ul: 100_000,
                    dl: 50_000,
                }),
            ],
        )],
        ..Default::default()
    };
    assert_eq!(modify(&mut n, 4, a, upd), cause::REQUEST_ACCEPTED);
    c.upsert(&session(&n, a)).unwrap();
    let t = c.build();
    let m2 = c.meter(a, 1, Direction::Downlink).unwrap();
    assert_eq!((m2.slot, m2.generation), (m_dl.slot, 2));
    assert_eq!(c.meter(a, 1, Direction::Uplink), Some(m_ul));
    let (sh, dl) = by_ue(&t, ue(0));
    assert_eq!(sh.qers[dl[0].qers[0] as usize].meter, m2);
    assert_eq!(
        sh.qers[dl[0].qers[0] as usize].meter_cfg.unwrap().pir,
        kbps_to_bytes_per_s(50_000)
    );

    // Remove the session; a new one reuses the freed slots with higher generations.
    c.remove(a);
    let b = establish(&mut n, 5, est(2, None, ue(1)));
    c.upsert(&session(&n, b)).unwrap();
    let reused = [
        c.meter(b, 1, Direction::Uplink).unwrap(),
        c.meter(b, 1, Direction::Downlink).unwrap(),
    ];
    let mut slots: Vec<u32> = reused.iter().map(|m| m.slot).collect();
    slots.sort();
    let mut old: Vec<u32> = vec![m_ul.slot, m_dl.slot];
    old.sort();
    assert_eq!(slots, old);
    for m in reused {
        let before = if m.slot == m_dl.slot { 2 } else { 1 };
        assert_eq!(m.generation, before + 1, "{m:?}");
    }
    assert_eq!(c.urr_slot(b, 1), Some(u));
    assert_eq!(c.stats().meter_slots_used, 2);
}

#[test]
fn modification_refiles_changed_teid_and_ue_ip() {
    let mut n = node();
    let mut c = Compiler::new(compiler_cfg());
    let a = establish(&mut n, 2, est(1, Some(0x1111), ue(0)));
    c.upsert(&session(&n, a)).unwrap();
    let t1 = c.build();
    assert_eq!(by_teid(&t1, 0x1111).1.len(), 1);
    let upd = SessionModificationRequest {
        update_pdr: vec![
            g(
                t::UPDATE_PDR,
                vec![
                    Ie::PdrId(1),
                    Ie::Grouped(g(
                        t::PDI,
                        vec![
                            Ie::SourceInterface(0),
                            Ie::FTeid(FTeid::Assigned {
                                teid: 0x2222,
                                ipv4: Some(N3),
                                ipv6: None,
                            }),
                        ],
                    )),
                ],
            ),
            g(
                t::UPDATE_PDR,
                vec![
                    Ie::PdrId(2),
                    Ie::Grouped(g(
                        t::PDI,
                        vec![
                            Ie::SourceInterface(1),
                            Ie::UeIpAddress(peregrine_pfcp::ie::UeIpAddress {
                                sd: true,
                                ipv4: Some(ue(7)),
                                ipv6: Some(Ipv6Addr::new(0x2001, 0xdb8, 0x60, 7, 0, 0, 0, 1)),
                                ..Default::default()
                            }),
                        ],
                    )),
                ],
            ),
        ],
        ..Default::default()
    };
    assert_eq!(modify(&mut n, 3, a, upd), cause::REQUEST_ACCEPTED);
    c.upsert(&session(&n, a)).unwrap();
    let t2 = c.build();
    assert!(by_teid(&t2, 0x1111).1.is_empty());
    assert_eq!(by_teid(&t2, 0x2222).1[0].pdr_id, 1);
    assert!(by_ue(&t2, ue(0)).1.is_empty());
    assert_eq!(by_ue(&t2, ue(7)).1[0].pdr_id, 2);
    let p64 = (u128::from(Ipv6Addr::new(0x2001, 0xdb8, 0x60, 7, 0, 0, 0, 0)) >> 64) as u64;
    let sh = t2.ue_v6_shard(p64);
    let &(a6, b6) = sh.by_ue_v6.get(&p64).unwrap();
    assert_eq!(sh.pdrs[sh.pdr_order[a6 as usize] as usize].pdr_id, 2);
    assert_eq!(b6 - a6, 1);
    assert_eq!(total_pdrs(&t2), 3); // UL + DL under v4 and under v6
                                    // The old keys are free for another session now.
    let b = establish(&mut n, 4, est(2, Some(0x1111), ue(0)));
    c.upsert(&session(&n, b)).unwrap();
}

#[test]
fn untouched_shards_are_shared() {
    let mut n = node();
    let mut c = Compiler::new(compiler_cfg());
    let mut seids = vec![];
    for i in 0..200 {
        let s = establish(&mut n, 10 + i, est(u64::from(i) + 1, None, ue(i)));
        c.upsert(&session(&n, s)).unwrap();
        seids.push(s);
    }
    let t1 = c.build();
    assert_eq!(total_pdrs(&t1), 400);
    // Nothing changed: every shard is the same allocation.
    let t1b = c.build();
    assert!((0..NUM_SHARDS).all(|i| Arc::ptr_eq(&t1.shards[i], &t1b.shards[i])));

    // Move session 17 to a new UE address: its TEID shard, its old and new UE shards change.
    let s = seids[17];
    let mut sess = session(&n, s);
    let teid = ul_teid(&sess);
    sess.pdrs
        .get_mut(&2)
        .unwrap()
        .pdi
        .ue_ip
        .as_mut()
        .unwrap()
        .ipv4 = Some(ue(5000));
    c.upsert(&sess).unwrap();
    let t2 = c.build();
    let touched = [
        peregrine_dataplane::upf::tables::shard_of(u64::from(teid)),
        peregrine_dataplane::upf::tables::shard_of(u64::from(u32::from(ue(17)))),
        peregrine_dataplane::upf::tables::shard_of(u64::from(u32::from(ue(5000)))),
    ];
    for i in 0..NUM_SHARDS {
        assert_eq!(
            Arc::ptr_eq(&t1.shards[i], &t2.shards[i]),
            !touched.contains(&i),
            "shard {i}"
        );
    }
    assert_eq!(by_ue(&t2, ue(5000)).1.len(), 1);
    assert!(by_ue(&t2, ue(17)).1.is_empty());
    // The old snapshot is intact (workers may still read it).
    assert_eq!(by_ue(&t1, ue(17)).1.len(), 1);
}

/// Every refused session leaves the compiler exactly as it was.
#[test]
fn rejections_carry_cause_and_offending_ie_and_change_nothing() {
    let mut n = node();
    let mut c = Compiler::new(CompilerConfig {
        local_v6: vec![],
        ..compiler_cfg()
    });
    let a = establish(&mut n, 2, est(1, None, ue(0)));
    let good = session(&n, a);
    c.upsert(&good).unwrap();
    let before = c.build();

    let mut cases: Vec<(Session, u8, u16)> = vec![];
    let mut s = good.clone();
    s.pdrs
        .get_mut(&1)
        .unwrap()
        .outer_header_removal
        .as_mut()
        .unwrap()
        .description = 2;
    cases.push((
        s,
        cause::RULE_CREATION_MODIFICATION_FAILURE,
        t::OUTER_HEADER_REMOVAL,
    ));
    let mut s = good.clone();
    s.pdrs.get_mut(&2).unwrap().pdi.sdf_filters = vec![peregrine_pfcp::ie::SdfFilter {
        flow_description: Some(b"permit out ip from 10.0.0.0/40 to assigned".to_vec()),
        ..Default::default()
    }];
    cases.push((s, cause::RULE_CREATION_MODIFICATION_FAILURE, t::SDF_FILTER));
    let mut s = good.clone();
    s.pdrs.get_mut(&2).unwrap().pdi.sdf_filters = vec![peregrine_pfcp::ie::SdfFilter {
        flow_description: Some(b"permit out ip from any to assigned".to_vec()),
        spi: Some(7),
        ..Default::default()
    }];
    cases.push((s, cause::RULE_CREATION_MODIFICATION_FAILURE, t::SDF_FILTER));
    // A spare Destination Interface (6-15, TS 29.244 section 8.2.24): the IE is incorrect.
    for spare in [6u8, 15] {
        let mut s = good.clone();
        s.fars
            .get_mut(&2)
            .unwrap()
            .forwarding
            .as_mut()
            .unwrap()
            .destination_interface = spare;
        cases.push((s, cause::MANDATORY_IE_INCORRECT, t::DESTINATION_INTERFACE));
    }
    // IPv6 gNB but no local IPv6 address.
    let mut s = good.clone();
    s.fars
        .get_mut(&2)
        .unwrap()
        .forwarding
        .as_mut()
        .unwrap()
        .outer_header_creation = Some(OuterHeaderCreation {
        description: peregrine_pfcp::ie::ohc::GTPU_UDP_IPV6,
        teid: Some(5),
        ipv6: Some(GNB_V6),
        ..Default::default()
    });
    cases.push((
        s,
        cause::RULE_CREATION_MODIFICATION_FAILURE,
        t::OUTER_HEADER_CREATION,
    ));
    let mut s = good.clone();
    s.fars
        .get_mut(&2)
        .unwrap()
        .forwarding
        .as_mut()
        .unwrap()
        .outer_header_creation = Some(OuterHeaderCreation {
        description: peregrine_pfcp::ie::ohc::UDP_IPV4,
        ipv4: Some(GNB),
        port: Some(9),
        ..Default::default()
    });
    cases.push((
        s,
        cause::RULE_CREATION_MODIFICATION_FAILURE,
        t::OUTER_HEADER_CREATION,
    ));
    for bits in [aa::FORW | aa::DROP, aa::FORW | aa::DUPL, 0] {
        let mut s = good.clone();
        s.fars.get_mut(&1).unwrap().apply_action = peregrine_pfcp::ie::Bitmap(bits);
        cases.push((
            s,
            cause::RULE_CREATION_MODIFICATION_FAILURE,
            t::APPLY_ACTION,
        ));
    }
    let mut s = good.clone();
    for id in 2..=3 {
        let mut q = s.qers[&1].clone();
        q.id = id;
        s.qers.insert(id, q);
    }
    s.pdrs.get_mut(&1).unwrap().qer_ids = vec![1, 2, 3];
    cases.push((s, cause::RULE_CREATION_MODIFICATION_FAILURE, t::QER_ID));
    let mut s = good.clone();
    s.pdrs.get_mut(&1).unwrap().pdi.f_teid = None;
    cases.push((s, cause::RULE_CREATION_MODIFICATION_FAILURE, t::F_TEID));
    let mut s = good.clone();
    s.pdrs.get_mut(&2).unwrap().pdi.ue_ip = None;
    cases.push((
        s,
        cause::RULE_CREATION_MODIFICATION_FAILURE,
        t::UE_IP_ADDRESS,
    ));
    // Another session claiming the same UE address or TEID.
    let mut s = good.clone();
    s.up_seid = 99;
    s.pdrs
        .get_mut(&1)
        .unwrap()
        .pdi
        .f_teid
        .as_mut()
        .unwrap()
        .teid = 0x7777;
    cases.push((
        s,
        cause::RULE_CREATION_MODIFICATION_FAILURE,
        t::UE_IP_ADDRESS,
    ));
    let mut s = good.clone();
    s.up_seid = 99;
    s.pdrs.get_mut(&2).unwrap().pdi.ue_ip.as_mut().unwrap().ipv4 = Some(ue(9));
    cases.push((s, cause::RULE_CREATION_MODIFICATION_FAILURE, t::F_TEID));

    for (i, (s, want_cause, want_ie)) in cases.iter().enumerate() {
        let e = c.check(s).unwrap_err();
        assert_eq!(
            (e.cause, e.offending_ie),
            (*want_cause, Some(*want_ie)),
            "case {i}: {e}"
        );
        assert_eq!(c.upsert(s).unwrap_err(), e, "case {i}");
        assert_eq!(e.reject().cause, *want_cause);
    }
    let after = c.build();
    assert!((0..NUM_SHARDS).all(|i| Arc::ptr_eq(&before.shards[i], &after.shards[i])));
    assert_eq!(c.stats().meter_slots_used, 2);
    assert_eq!(c.meter(a, 1, Direction::Uplink).unwrap().generation, 1);
}

#[test]
fn slots_exhausted_is_no_resources() {
    let mut n = node();
    let mut c = Compiler::new(CompilerConfig {
        max_meter_slots: 3,
        max_urr_slots: 10,
        qos: peregrine_dataplane::qos::QosPolicies::new(
            peregrine_dataplane::qos::QerPolicy::legacy_policing(),
        ),
        ..compiler_cfg()
    });
    let a = establish(&mut n, 2, est(1, None, ue(0)));
    let b = establish(&mut n, 3, est(2, None, ue(1)));
    c.upsert(&session(&n, a)).unwrap();
    let e = c.upsert(&session(&n, b)).unwrap_err();
    assert_eq!(
        (e.cause, e.offending_ie),
        (cause::NO_RESOURCES_AVAILABLE, Some(t::QER_ID))
    );
    assert_eq!(c.stats().sessions, 1);
    // Without MBR a QER needs no meter slot, so the session fits.
    let mut s = session(&n, b);
    s.qers.get_mut(&1).unwrap().mbr = None;
    c.upsert(&s).unwrap();
    assert_eq!(c.meter(b, 1, Direction::Uplink), None);
    let mut c = Compiler::new(CompilerConfig {
        max_urr_slots: 1,
        qos: peregrine_dataplane::qos::QosPolicies::new(
            peregrine_dataplane::qos::QerPolicy::legacy_policing(),
        ),
        ..compiler_cfg()
    });
    c.upsert(&session(&n, a)).unwrap();
    let e = c.check(&session(&n, b)).unwrap_err();
    assert_eq!(
        (e.cause, e.offending_ie),
        (cause::NO_RESOURCES_AVAILABLE, Some(t::URR_ID))
    );
    // Freed by removal, available again.
    c.remove(a);
    c.upsert(&session(&n, b)).unwrap();
}

#[test]
fn buffer_and_drop_actions_and_n9() {
    let mut n = node();
    let mut r = est(1, None, ue(0));
    r.create_far[1] = far_action(2, aa::BUFF | aa::NOCP);
    r.create_far[0] = far_action(1, aa::DROP);
    let a = establish(&mut n, 2, r);
    let mut c = Compiler::new(compiler_cfg());
    let mut s = session(&n, a);
    // An N9 PDR from the core with its own F-TEID: filed by TEID, direction downlink.
    let mut n9 = s.pdrs[&1].clone();
    n9.id = 9;
    n9.pdi.source_interface = iface::CORE;
    n9.pdi.f_teid.as_mut().unwrap().teid = 0x9999;
    s.pdrs.insert(9, n9);
    c.upsert(&s).unwrap();
    let t = c.build();
    let (sh, ul) = by_teid(&t, ul_teid(&s));
    assert_eq!(sh.fars[ul[0].far as usize].action, FarAction::Drop);
    let (sh, dl) = by_ue(&t, ue(0));
    assert_eq!(
        sh.fars[dl[0].far as usize].action,
        FarAction::Buffer { notify_cp: true }
    );
    let (_, n9) = by_teid(&t, 0x9999);
    assert_eq!(
        (n9[0].pdr_id, n9[0].direction, n9[0].remove_gtpu),
        (9, Direction::Downlink, true)
    );
}
