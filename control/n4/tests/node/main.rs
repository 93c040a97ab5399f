//! Behaviour of `peregrine_n4::Node` against TS 29.244 (sections cited per test).

use std::collections::BTreeSet;

use peregrine_n4::{DownReason, Event, Node, Output};
use peregrine_pfcp::cause;
use peregrine_pfcp::ie::{apply_action, ie_type as t, Bitmap, FTeid, GateStatus, Ie, NodeId};
use peregrine_pfcp::message::{msg_type as mt, SessionModificationRequest};
use peregrine_pfcp::{Body, Message};
use peregrine_testkit::pfcp::{node::*, requests::*};

// ---- 6.2.2 Heartbeat -------------------------------------------------------------------

#[test]
fn heartbeat_request_answered_with_our_recovery_time_stamp() {
    let mut n = node();
    // No association needed (section 6.2.2.1).
    let out = n.handle(0, smf(), &heartbeat_req(42));
    let m = sent(&out);
    assert_eq!(m.seq, 42);
    match m.body {
        Body::HeartbeatResponse(h) => assert_eq!(h.recovery_time_stamp, RTS),
        b => panic!("{b:?}"),
    }
}

#[test]
fn heartbeat_timers_with_fake_clock() {
    let mut n = associated();
    establish(&mut n, 0, 2, 7);
    assert_eq!(n.next_timer(), Some(10 * SEC));
    assert!(n.poll_timers(9 * SEC).is_empty());
    // First heartbeat at the interval.
    let out = n.poll_timers(10 * SEC);
    let m = sent(&out);
    assert!(matches!(m.body, Body::HeartbeatRequest(ref h) if h.recovery_time_stamp == RTS));
    assert_eq!(n.next_timer(), Some(20 * SEC));
    // Answer it: counter cleared, so 3 more unanswered are tolerated.
    assert!(n.handle(11 * SEC, smf(), &heartbeat_resp(m.seq)).is_empty());
    for k in 2..=4u64 {
        let out = n.poll_timers(k * 10 * SEC);
        assert!(matches!(sent(&out).body, Body::HeartbeatRequest(_)));
        assert_eq!(n.session_count(), 1);
    }
    // Fourth due time with 3 unanswered: peer down, sessions released.
    let out = n.poll_timers(50 * SEC);
    assert_eq!(
        events(&out),
        vec![
            Event::SessionDeleted { seid: 1 },
            Event::AssociationDown {
                peer: smf(),
                reason: DownReason::HeartbeatTimeout
            }
        ]
    );
    assert_eq!(n.session_count(), 0);
    assert!(n.association(smf()).is_none());
    assert_eq!(n.next_timer(), None);
    n.check_consistency().unwrap();
}

#[test]
fn heartbeat_sequence_numbers_distinct() {
    let mut n = associated();
    let mut seqs = BTreeSet::new();
    for k in 1..=3u64 {
        let out = n.poll_timers(k * 10 * SEC);
        let m = sent(&out);
        assert!(seqs.insert(m.seq));
        n.handle(k * 10 * SEC, smf(), &heartbeat_resp(m.seq));
    }
    assert!(n.association(smf()).is_some());
}

// ---- 6.2.6 - 6.2.8 Associations --------------------------------------------------------

#[test]
fn association_setup_update_release() {
    let mut n = node();
    let out = n.handle(0, smf(), &setup_req(1, 1000));
    assert_eq!(
        events(&out),
        vec![Event::AssociationUp {
            peer: smf(),
            node_id: NodeId::fqdn("smf.example")
        }]
    );
    match sent(&out).body {
        Body::AssociationSetupResponse(r) => {
            assert_eq!(r.cause, cause::REQUEST_ACCEPTED);
            assert_eq!(r.node_id, NodeId::Ipv4(UPF));
            assert_eq!(r.recovery_time_stamp, Some(RTS));
            assert!(r
                .up_function_features
                .unwrap()
                .contains(peregrine_n4::up_features::FTUP));
        }
        b => panic!("{b:?}"),
    }
    let a = n.association(smf()).unwrap();
    assert_eq!(a.cp_features, Some(Bitmap(1)));
    let out = n.handle(0, smf(), &assoc_req(2, false));
    assert!(matches!(sent(&out).body, Body::AssociationUpdateResponse(ref r) if r.cause == 1));
    establish(&mut n, 0, 3, 7);
    let out = n.handle(0, smf(), &assoc_req(4, true));
    assert!(matches!(sent(&out).body, Body::AssociationReleaseResponse(ref r) if r.cause == 1));
    assert!(events(&out).contains(&Event::SessionDeleted { seid: 1 }));
    assert_eq!(n.session_count(), 0);
    assert!(n.association(smf()).is_none());
    // Update / Release without association: 72.
    for rel in [false, true] {
        let out = n.handle(0, smf(), &assoc_req(5 + rel as u32, rel));
        let c = match sent(&out).body {
            Body::AssociationUpdateResponse(r) | Body::AssociationReleaseResponse(r) => r.cause,
            b => panic!("{b:?}"),
        };
        assert_eq!(c, cause::NO_ESTABLISHED_PFCP_ASSOCIATION);
    }
    n.check_consistency().unwrap();
}

#[test]
fn repeated_setup_keeps_sessions_unless_peer_restarted() {
    let mut n = associated();
    establish(&mut n, 0, 2, 7);
    n.handle(0, smf(), &setup_req(3, 1000));
    assert_eq!(n.session_count(), 1);
    let out = n.handle(0, smf(), &setup_req(4, 2000));
    assert!(events(&out).contains(&Event::SessionDeleted { seid: 1 }));
    assert_eq!(n.session_count(), 0);
    assert!(n.association(smf()).is_some());
    n.check_consistency().unwrap();
}

// ---- 6.3.2 Session Establishment -------------------------------------------------------

#[test]
fn establishment_requires_association() {
    let mut n = node();
    let out = n.handle(0, smf(), &est_bytes(1, est(77)));
    let r = sess_resp(&out);
    assert_eq!(r.cause, cause::NO_ESTABLISHED_PFCP_ASSOCIATION);
    assert_eq!(r.hdr_seid, Some(77));
    assert_eq!(r.up_seid, None);
    assert_eq!(n.session_count(), 0);
}

#[test]
fn establishment_accepted_with_created_pdr_and_snapshot() {
    let mut n = associated();
    let out = n.handle(0, smf(), &est_bytes(2, est(77)));
    let r = sess_resp(&out);
    assert_eq!(
        (r.cause, r.msg_type),
        (1, mt::SESSION_ESTABLISHMENT_RESPONSE)
    );
    assert_eq!(r.hdr_seid, Some(77));
    let seid = r.up_seid.unwrap();
    assert_eq!(events(&out), vec![Event::SessionCreated { seid }]);
    assert_eq!(r.created.len(), 1);
    let (pdr, teid, v4, v6) = created_fteid(&r.created[0]);
    assert_eq!((pdr, v4, v6), (1, Some(N3), None));
    assert_ne!(teid, 0);
    // Snapshot for the rule compiler.
    let s = n.sessions().next().unwrap();
    assert_eq!(s.up_seid, seid);
    assert_eq!(s.cp_f_seid.seid, 77);
    let ul = &s.pdrs[&1];
    assert_eq!(ul.precedence, 200);
    assert_eq!(ul.pdi.source_interface, 0);
    assert_eq!(ul.pdi.f_teid.unwrap().teid, teid);
    assert_eq!(ul.pdi.qfi, Some(9));
    assert_eq!(ul.pdi.sdf_filters.len(), 1);
    assert_eq!(ul.outer_header_removal.unwrap().description, 0);
    assert_eq!(
        (ul.far_id, &ul.qer_ids, &ul.urr_ids),
        (1, &vec![1], &vec![1])
    );
    assert!(s.pdrs[&2].pdi.ue_ip.unwrap().sd);
    let f2 = &s.fars[&2];
    assert!(f2.apply_action.contains(apply_action::FORW));
    let fp = f2.forwarding.as_ref().unwrap();
    assert_eq!(fp.destination_interface, 0);
    assert_eq!(fp.outer_header_creation.unwrap().teid, Some(0x100));
    assert_eq!(s.qers[&1].mbr.unwrap().dl, 200_000);
    assert_eq!(s.qers[&1].gate, GateStatus::default());
    assert_eq!(s.urrs[&1].volume_threshold.unwrap().total, Some(1_000_000));
    assert_eq!(s.urrs[&1].measurement_period, Some(60));
    n.check_consistency().unwrap();
}

#[test]
fn choose_id_sharing_and_uniqueness() {
    let mut n = associated();
    let mut r = est(1);
    r.create_pdr = vec![
        pdr_ul(1, Some(5), 1),
        pdr_ul(2, Some(5), 1),
        pdr_ul(3, Some(6), 1),
        pdr_ul(4, None, 1),
        pdr_ul(5, None, 1),
    ];
    let out = n.handle(0, smf(), &est_bytes(2, r));
    let resp = sess_resp(&out);
    assert_eq!(resp.cause, 1);
    let c: Vec<_> = resp.created.iter().map(created_fteid).collect();
    assert_eq!(c.len(), 5);
    assert_eq!(c[0].1, c[1].1, "same CHID shares the F-TEID");
    let distinct: BTreeSet<u32> = [c[0].1, c[2].1, c[3].1, c[4].1].into();
    assert_eq!(distinct.len(), 4);
    // A second session never reuses them.
    let out = n.handle(0, smf(), &est_bytes(3, est(2)));
    let (_, teid, _, _) = created_fteid(&sess_resp(&out).created[0]);
    assert!(!distinct.contains(&teid));
    n.check_consistency().unwrap();
}

/// Establish a session that is then subject of rejected requests; returns node and SEID.
fn with_session() -> (Node, u64) {
    let mut n = associated();
    let seid = establish(&mut n, 0, 2, 7);
    (n, seid)
}

fn expect_rejected(n: &mut Node, bytes: &[u8], cause_: u8, offending: Option<u16>) {
    let before = n.debug_snapshot();
    let out = n.handle(0, smf(), bytes);
    let r = sess_resp(&out);
    assert_eq!((r.cause, r.offending), (cause_, offending));
    assert!(events(&out).is_empty());
    assert_eq!(n.debug_snapshot(), before, "rejection changed state");
    n.check_consistency().unwrap();
}

#[test]
fn establishment_rejections_leave_state_unchanged() {
    let (mut n, _) = with_session();
    let mut seq = 100;
    let mut case = |n: &mut Node,
                    f: &dyn Fn(&mut peregrine_pfcp::message::SessionEstablishmentRequest),
                    c: u8,
                    o: Option<u16>| {
        let mut r = est(99);
        f(&mut r);
        seq += 1;
        expect_rejected(n, &est_bytes(seq, r), c, o);
    };
    let rule = cause::RULE_CREATION_MODIFICATION_FAILURE;
    // Dangling references.
    case(&mut n, &|r| r.create_far.truncate(1), rule, Some(t::FAR_ID));
    case(&mut n, &|r| r.create_qer.clear(), rule, Some(t::QER_ID));
    case(&mut n, &|r| r.create_urr.clear(), rule, Some(t::URR_ID));
    // Duplicates.
    case(
        &mut n,
        &|r| r.create_pdr.push(pdr_dl(2, 1)),
        rule,
        Some(t::PDR_ID),
    );
    case(
        &mut n,
        &|r| r.create_far.push(far_n6(2)),
        rule,
        Some(t::FAR_ID),
    );
    case(
        &mut n,
        &|r| r.create_qer.push(qer(1)),
        rule,
        Some(t::QER_ID),
    );
    case(
        &mut n,
        &|r| r.create_urr.push(urr(1)),
        rule,
        Some(t::URR_ID),
    );
    // CHOOSE for a family we do not serve (documented choice: 73, Offending IE F-TEID).
    case(
        &mut n,
        &|r| {
            let mut p = pdr_ul(3, None, 1);
            if let Some(Ie::Grouped(pdi)) = p.ies.get_mut(2) {
                pdi.ies[1] = Ie::FTeid(FTeid::Choose {
                    v4: false,
                    v6: true,
                    choose_id: None,
                });
            }
            r.create_pdr.push(p);
        },
        rule,
        Some(t::F_TEID),
    );
    // CP-assigned TEID already used by the other session.
    let used = n.sessions().next().unwrap().pdrs[&1]
        .pdi
        .f_teid
        .unwrap()
        .teid;
    case(
        &mut n,
        &|r| {
            let mut p = pdr_ul(3, None, 1);
            if let Some(Ie::Grouped(pdi)) = p.ies.get_mut(2) {
                pdi.ies[1] = Ie::FTeid(FTeid::Assigned {
                    teid: used,
                    ipv4: Some(N3),
                    ipv6: None,
                });
            }
            r.create_pdr.push(p);
        },
        rule,
        Some(t::F_TEID),
    );
    // PDR without FAR ID: conditional IE missing.
    case(
        &mut n,
        &|r| r.create_pdr[1].ies.retain(|i| i.ie_type() != t::FAR_ID),
        cause::CONDITIONAL_IE_MISSING,
        Some(t::FAR_ID),
    );
    assert_eq!(n.session_count(), 1);
}

#[test]
fn choose_without_ftup_is_invalid_allocation_option() {
    let mut c = config();
    c.up_features = Bitmap(0);
    let mut n = Node::new(c);
    n.handle(0, smf(), &setup_req(1, 1));
    expect_rejected(
        &mut n,
        &est_bytes(2, est(1)),
        cause::INVALID_F_TEID_ALLOCATION_OPTION,
        Some(t::F_TEID),
    );
}

#[test]
fn session_table_full_is_no_resources() {
    let mut c = config();
    c.max_sessions = 2;
    let mut n = Node::new(c);
    n.handle(0, smf(), &setup_req(1, 1));
    establish(&mut n, 0, 2, 1);
    establish(&mut n, 0, 3, 2);
    expect_rejected(
        &mut n,
        &est_bytes(4, est(3)),
        cause::NO_RESOURCES_AVAILABLE,
        None,
    );
}

// ---- 6.3.3 Session Modification -----------------------------------------------------------

#[test]
fn modification_unknown_seid_is_65_with_header_seid_0() {
    let (mut n, _) = with_session();
    expect_rejected(
        &mut n,
        &modify_bytes(50, 999, SessionModificationRequest::default()),
        cause::SESSION_CONTEXT_NOT_FOUND,
        None,
    );
    let out = n.handle(0, smf(), &modify_bytes(51, 999, Default::default()));
    assert_eq!(sess_resp(&out).hdr_seid, Some(0));
}

#[test]
fn modification_create_update_remove() {
    let (mut n, seid) = with_session();
    let r = SessionModificationRequest {
        create_pdr: vec![pdr_ul(3, Some(1), 3)],
        create_far: vec![far_n6(3)],
        update_far: vec![g(
            t::UPDATE_FAR,
            vec![
                Ie::FarId(2),
                Ie::ApplyAction(Bitmap(apply_action::BUFF | apply_action::NOCP)),
            ],
        )],
        update_qer: vec![g(
            t::UPDATE_QER,
            vec![Ie::QerId(1), Ie::GateStatus(GateStatus { ul: 1, dl: 1 })],
        )],
        update_pdr: vec![g(t::UPDATE_PDR, vec![Ie::PdrId(2), Ie::Precedence(5)])],
        remove_pdr: vec![g(t::REMOVE_PDR, vec![Ie::PdrId(1)])],
        remove_far: vec![g(t::REMOVE_FAR, vec![Ie::FarId(1)])],
        ..Default::default()
    };
    let old_teid = n.session(seid).unwrap().pdrs[&1].pdi.f_teid.unwrap().teid;
    let out = n.handle(0, smf(), &modify_bytes(10, seid, r));
    let resp = sess_resp(&out);
    assert_eq!((resp.cause, resp.hdr_seid), (1, Some(7)));
    assert_eq!(events(&out), vec![Event::SessionModified { seid }]);
    assert_eq!(resp.created.len(), 1);
    let (pdr, teid, _, _) = created_fteid(&resp.created[0]);
    assert_eq!(pdr, 3);
    assert_ne!(teid, old_teid);
    let s = n.session(seid).unwrap();
    assert_eq!(s.pdrs.keys().copied().collect::<Vec<_>>(), vec![2, 3]);
    assert_eq!(s.fars.keys().copied().collect::<Vec<_>>(), vec![2, 3]);
    assert!(s.fars[&2].apply_action.contains(apply_action::BUFF));
    assert_eq!(s.qers[&1].gate, GateStatus { ul: 1, dl: 1 });
    assert_eq!(s.pdrs[&2].precedence, 5);
    n.check_consistency().unwrap();
    // Update Forwarding Parameters: new outer header TEID for the gNB (handover).
    let r = SessionModificationRequest {
        update_far: vec![g(
            t::UPDATE_FAR,
            vec![
                Ie::FarId(2),
                Ie::ApplyAction(Bitmap(apply_action::FORW)),
                Ie::Grouped(g(
                    t::UPDATE_FORWARDING_PARAMETERS,
                    vec![Ie::OuterHeaderCreation(
                        peregrine_pfcp::ie::OuterHeaderCreation {
                            description: peregrine_pfcp::ie::ohc::GTPU_UDP_IPV4,
                            teid: Some(0x200),
                            ipv4: Some(GNB),
                            ..Default::default()
                        },
                    )],
                )),
            ],
        )],
        ..Default::default()
    };
    assert_eq!(
        sess_resp(&n.handle(0, smf(), &modify_bytes(11, seid, r))).cause,
        1
    );
    let fp = n.session(seid).unwrap().fars[&2]
        .forwarding
        .clone()
        .unwrap();
    assert_eq!(fp.outer_header_creation.unwrap().teid, Some(0x200));
    assert_eq!(fp.destination_interface, 0);
}

/// A path switch with SNDEM (TS 29.244 sections 5.2.2.3 and 8.2.58): Update Forwarding
/// Parameters with a new Outer Header Creation and PFCPSMReq-Flags SNDEM make the node ask
/// for an End Marker down the old tunnel, before `SessionModified`; without SNDEM, or with
/// the tunnel unchanged, or when the request is rejected, it does not.
#[test]
fn sndem_with_a_new_tunnel_asks_for_an_end_marker_on_the_old_one() {
    use peregrine_pfcp::ie::{ohc, smreq_flags, OuterHeaderCreation};
    let (mut n, seid) = with_session();
    let tunnel = |teid: u32| OuterHeaderCreation {
        description: ohc::GTPU_UDP_IPV4,
        teid: Some(teid),
        ipv4: Some(GNB),
        ..Default::default()
    };
    let switch = |far: u32, teid: u32, flags: Option<u64>| {
        let mut ufp = vec![Ie::OuterHeaderCreation(tunnel(teid))];
        ufp.extend(flags.map(|f| Ie::PfcpsmReqFlags(Bitmap(f))));
        SessionModificationRequest {
            update_far: vec![g(
                t::UPDATE_FAR,
                vec![
                    Ie::FarId(far),
                    Ie::Grouped(g(t::UPDATE_FORWARDING_PARAMETERS, ufp)),
                ],
            )],
            ..Default::default()
        }
    };
    // 0x100 -> 0x200 with SNDEM: End Marker for TEID 0x100 at the gNB.
    let out = n.handle(
        0,
        smf(),
        &modify_bytes(20, seid, switch(2, 0x200, Some(smreq_flags::SNDEM))),
    );
    assert_eq!(sess_resp(&out).cause, 1);
    assert_eq!(
        events(&out),
        vec![
            Event::EndMarker {
                seid,
                far_id: 2,
                old: tunnel(0x100)
            },
            Event::SessionModified { seid }
        ]
    );
    // 0x200 -> 0x300 without SNDEM (DROBU only): no End Marker.
    let out = n.handle(
        0,
        smf(),
        &modify_bytes(21, seid, switch(2, 0x300, Some(smreq_flags::DROBU))),
    );
    assert_eq!(events(&out), vec![Event::SessionModified { seid }]);
    let out = n.handle(0, smf(), &modify_bytes(22, seid, switch(2, 0x301, None)));
    assert_eq!(events(&out), vec![Event::SessionModified { seid }]);
    // Same tunnel again with SNDEM: nothing moved, no End Marker.
    let out = n.handle(
        0,
        smf(),
        &modify_bytes(23, seid, switch(2, 0x301, Some(smreq_flags::SNDEM))),
    );
    assert_eq!(events(&out), vec![Event::SessionModified { seid }]);
    // FAR 1 (N6, no tunnel) gains one with SNDEM: there is no old tunnel to end.
    let out = n.handle(
        0,
        smf(),
        &modify_bytes(24, seid, switch(1, 0x400, Some(smreq_flags::SNDEM))),
    );
    assert_eq!(events(&out), vec![Event::SessionModified { seid }]);
    // A rejected request (unknown FAR 9 beside the switch) changes nothing and says nothing.
    let mut bad = switch(2, 0x500, Some(smreq_flags::SNDEM));
    bad.update_far.push(g(t::UPDATE_FAR, vec![Ie::FarId(9)]));
    expect_rejected(
        &mut n,
        &modify_bytes(25, seid, bad),
        cause::RULE_CREATION_MODIFICATION_FAILURE,
        Some(t::FAR_ID),
    );
    n.check_consistency().unwrap();
}

#[test]
fn modification_rejections_leave_state_unchanged() {
    let (mut n, seid) = with_session();
    let rule = cause::RULE_CREATION_MODIFICATION_FAILURE;
    let cases: Vec<(SessionModificationRequest, u8, Option<u16>)> = vec![
        // Remove of a rule that does not exist.
        (
            SessionModificationRequest {
                remove_pdr: vec![g(t::REMOVE_PDR, vec![Ie::PdrId(9)])],
                ..Default::default()
            },
            rule,
            Some(t::PDR_ID),
        ),
        (
            SessionModificationRequest {
                remove_qer: vec![g(t::REMOVE_QER, vec![Ie::QerId(9)])],
                ..Default::default()
            },
            rule,
            Some(t::QER_ID),
        ),
        (
            SessionModificationRequest {
                remove_urr: vec![g(t::REMOVE_URR, vec![Ie::UrrId(9)])],
                ..Default::default()
            },
            rule,
            Some(t::URR_ID),
        ),
        // Removing a FAR still used by PDR 1.
        (
            SessionModificationRequest {
                remove_far: vec![g(t::REMOVE_FAR, vec![Ie::FarId(1)])],
                ..Default::default()
            },
            rule,
            Some(t::FAR_ID),
        ),
        // Valid edits followed by an invalid one: nothing is applied.
        (
            SessionModificationRequest {
                create_far: vec![far_n6(7)],
                create_pdr: vec![pdr_ul(8, None, 7)],
                update_qer: vec![g(t::UPDATE_QER, vec![Ie::QerId(5)])],
                ..Default::default()
            },
            rule,
            Some(t::QER_ID),
        ),
        // Create duplicate.
        (
            SessionModificationRequest {
                create_pdr: vec![pdr_dl(1, 1)],
                ..Default::default()
            },
            rule,
            Some(t::PDR_ID),
        ),
        // Update of a missing PDR / URR.
        (
            SessionModificationRequest {
                update_pdr: vec![g(t::UPDATE_PDR, vec![Ie::PdrId(44)])],
                ..Default::default()
            },
            rule,
            Some(t::PDR_ID),
        ),
        (
            SessionModificationRequest {
                update_urr: vec![g(t::UPDATE_URR, vec![Ie::UrrId(44)])],
                ..Default::default()
            },
            rule,
            Some(t::URR_ID),
        ),
        // Update PDR pointing at a missing FAR.
        (
            SessionModificationRequest {
                update_pdr: vec![g(t::UPDATE_PDR, vec![Ie::PdrId(1), Ie::FarId(99)])],
                ..Default::default()
            },
            rule,
            Some(t::FAR_ID),
        ),
    ];
    for (i, (r, c, o)) in cases.into_iter().enumerate() {
        expect_rejected(&mut n, &modify_bytes(200 + i as u32, seid, r), c, o);
    }
}

// ---- 6.3.4 Session Deletion ----------------------------------------------------------------

#[test]
fn deletion() {
    let (mut n, seid) = with_session();
    expect_rejected(
        &mut n,
        &delete_bytes(9, 12345),
        cause::SESSION_CONTEXT_NOT_FOUND,
        None,
    );
    let out = n.handle(0, smf(), &delete_bytes(10, seid));
    let r = sess_resp(&out);
    assert_eq!((r.cause, r.hdr_seid), (1, Some(7)));
    assert_eq!(events(&out), vec![Event::SessionDeleted { seid }]);
    assert_eq!(n.session_count(), 0);
    assert!(n.association(smf()).unwrap().sessions.is_empty());
    n.check_consistency().unwrap();
}

// ---- Scale ---------------------------------------------------------------------------------

#[test]
fn thousand_sessions_established_modified_deleted() {
    let mut n = associated();
    let mut seq = 10;
    let mut seids = Vec::new();
    let mut teids = BTreeSet::new();
    for i in 0..1000u64 {
        seq += 1;
        let out = n.handle(i, smf(), &est_bytes(seq, est(10_000 + i)));
        let r = sess_resp(&out);
        assert_eq!(r.cause, 1);
        assert!(teids.insert(created_fteid(&r.created[0]).1), "TEID reused");
        seids.push(r.up_seid.unwrap());
    }
    assert_eq!(n.session_count(), 1000);
    assert_eq!(seids.iter().collect::<BTreeSet<_>>().len(), 1000);
    for (i, &seid) in seids.iter().enumerate() {
        seq += 1;
        let r = SessionModificationRequest {
            create_pdr: vec![pdr_ul(3, Some(1), 1)],
            update_qer: vec![g(
                t::UPDATE_QER,
                vec![
                    Ie::QerId(1),
                    Ie::Mbr(peregrine_pfcp::ie::BitRate {
                        ul: i as u64,
                        dl: 1,
                    }),
                ],
            )],
            ..Default::default()
        };
        let out = n.handle(2000, smf(), &modify_bytes(seq, seid, r));
        let resp = sess_resp(&out);
        assert_eq!((resp.cause, resp.hdr_seid), (1, Some(10_000 + i as u64)));
        assert!(
            teids.insert(created_fteid(&resp.created[0]).1),
            "TEID reused"
        );
        assert_eq!(n.session(seid).unwrap().qers[&1].mbr.unwrap().ul, i as u64);
    }
    n.check_consistency().unwrap();
    for &seid in &seids {
        seq += 1;
        assert_eq!(
            sess_resp(&n.handle(3000, smf(), &delete_bytes(seq, seid))).cause,
            1
        );
    }
    assert_eq!(n.session_count(), 0);
    n.check_consistency().unwrap();
}

// ---- 6.4 Reliable delivery -----------------------------------------------------------------

#[test]
fn duplicate_request_gets_cached_bytes_and_is_applied_once() {
    let mut n = associated();
    let req = est_bytes(2, est(7));
    let first = sent_bytes(&n.handle(SEC, smf(), &req));
    let again = n.handle(5 * SEC, smf(), &req);
    assert_eq!(sent_bytes(&again), first);
    assert!(events(&again).is_empty());
    assert_eq!(n.session_count(), 1);
    // Same for a modification: applied once.
    let m = SessionModificationRequest {
        create_far: vec![far_n6(9)],
        ..Default::default()
    };
    let mb = modify_bytes(3, 1, m);
    let a = sent_bytes(&n.handle(6 * SEC, smf(), &mb));
    let b = sent_bytes(&n.handle(7 * SEC, smf(), &mb));
    assert_eq!(a, b);
    assert_eq!(
        Message::parse(&a).unwrap().body.msg_type(),
        mt::SESSION_MODIFICATION_RESPONSE
    );
    assert_eq!(n.session(1).unwrap().fars.len(), 3);
    // A different peer with the same sequence number is a different request.
    let out = n.handle(7 * SEC, smf2(), &req);
    assert_eq!(
        sess_resp(&out).cause,
        cause::NO_ESTABLISHED_PFCP_ASSOCIATION
    );
    // After the retention window the sequence number is new again.
    let out = n.handle(40 * SEC, smf(), &req);
    assert_eq!(sess_resp(&out).cause, 1);
    assert_eq!(n.session_count(), 2);
}

#[test]
fn response_cache_is_bounded() {
    let mut c = config();
    c.response_cache_capacity = 16;
    let mut n = Node::new(c);
    for seq in 0..1000 {
        n.handle(0, smf(), &heartbeat_req(seq));
        assert!(n.cached_responses() <= 16);
    }
}

#[test]
fn fqdn_node_id_uses_n3_address_in_up_f_seid() {
    let mut c = config();
    c.node_id = NodeId::fqdn("upf.example");
    let mut n = Node::new(c);
    n.handle(0, smf(), &setup_req(1, 1));
    match sent(&n.handle(0, smf(), &est_bytes(2, est(1)))).body {
        Body::SessionEstablishmentResponse(r) => assert_eq!(r.up_f_seid.unwrap().ipv4, Some(N3)),
        b => panic!("{b:?}"),
    }
}

mod errors;
