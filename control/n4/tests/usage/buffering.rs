//! Buffering (TS 29.244 5.2.3): downlink data reports and BAR, and the Failed Rule ID
//! (8.2.80) of a PDR whose FAR is dangling.

use super::*;

// ---- 5.2.3 Buffering: DLDR and BAR -------------------------------------------------------

fn set_far2(n: &mut Node, seid: u64, seq: u32, action: u64) {
    let m = SessionModificationRequest {
        update_far: vec![g(
            t::UPDATE_FAR,
            vec![Ie::FarId(2), Ie::ApplyAction(Bitmap(action))],
        )],
        ..Default::default()
    };
    assert_eq!(
        modify_resp(&n.handle(0, smf(), &modify_bytes(seq, seid, m))).cause,
        1
    );
}

#[test]
fn downlink_data_report_once_per_buffering_episode() {
    let mut n = quiet_node();
    let out = n.handle(0, smf(), &est_bytes(2, buffering_est()));
    let seid = sess_resp(&out).up_seid.unwrap();
    let s = n.session(seid).unwrap();
    assert_eq!(
        s.bar.as_ref().unwrap().suggested_buffering_packets_count,
        Some(16)
    );
    assert_eq!(s.fars[&2].bar_id, Some(1));
    let out = n.downlink_data(SEC, seid, 2);
    let rs = reports(&out);
    assert_eq!(rs.len(), 1);
    let (m, r) = &rs[0];
    assert_eq!(m.seid, Some(CP_SEID));
    assert_eq!(r.report_type, Bitmap(report_type::DLDR));
    assert_eq!(r.downlink_data_report.as_ref().unwrap().pdr_id(), Some(2));
    assert!(r.usage_report.is_empty());
    // More packets in the same episode: nothing.
    for _ in 0..5 {
        assert!(n.downlink_data(2 * SEC, seid, 2).is_empty());
    }
    // Paging done: FAR to FORW ends the episode; buffering again starts a new one.
    set_far2(&mut n, seid, 10, apply_action::FORW);
    assert!(
        n.downlink_data(3 * SEC, seid, 2).is_empty(),
        "FORW: no report"
    );
    set_far2(&mut n, seid, 11, apply_action::BUFF | apply_action::NOCP);
    assert_eq!(reports(&n.downlink_data(4 * SEC, seid, 2)).len(), 1);
    // BUFF without NOCP: buffered silently. Unknown PDR or session: nothing.
    set_far2(&mut n, seid, 12, apply_action::BUFF);
    assert!(n.downlink_data(5 * SEC, seid, 2).is_empty());
    assert!(n.downlink_data(5 * SEC, seid, 77).is_empty());
    assert!(n.downlink_data(5 * SEC, 999, 2).is_empty());
    n.check_consistency().unwrap();
}

#[test]
fn bar_create_update_remove_and_references() {
    let mut n = quiet_node();
    let out = n.handle(0, smf(), &est_bytes(2, buffering_est()));
    let seid = sess_resp(&out).up_seid.unwrap();
    let upd = SessionModificationRequest {
        update_bar: Some(g(
            t::UPDATE_BAR,
            vec![Ie::BarId(1), Ie::SuggestedBufferingPacketsCount(4)],
        )),
        ..Default::default()
    };
    assert_eq!(
        modify_resp(&n.handle(0, smf(), &modify_bytes(3, seid, upd))).cause,
        1
    );
    let bar = n.session(seid).unwrap().bar.clone().unwrap();
    assert_eq!(bar.suggested_buffering_packets_count, Some(4));
    // Removing the BAR a FAR still references: 73, Failed Rule ID = that FAR.
    let rm = SessionModificationRequest {
        remove_bar: Some(g(t::REMOVE_BAR, vec![Ie::BarId(1)])),
        ..Default::default()
    };
    let resp = modify_resp(&n.handle(0, smf(), &modify_bytes(4, seid, rm.clone())));
    assert_eq!(resp.cause, cause::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(resp.extra, vec![Ie::FailedRuleId(FailedRuleId::Far(2))]);
    // A second BAR, or updating / removing an unknown one: 73 naming the BAR.
    for (seq, m) in [
        (
            5,
            SessionModificationRequest {
                create_bar: Some(g(t::CREATE_BAR, vec![Ie::BarId(2)])),
                ..Default::default()
            },
        ),
        (
            6,
            SessionModificationRequest {
                update_bar: Some(g(t::UPDATE_BAR, vec![Ie::BarId(2)])),
                ..Default::default()
            },
        ),
        (
            7,
            SessionModificationRequest {
                remove_bar: Some(g(t::REMOVE_BAR, vec![Ie::BarId(2)])),
                ..Default::default()
            },
        ),
    ] {
        let resp = modify_resp(&n.handle(0, smf(), &modify_bytes(seq, seid, m)));
        assert_eq!(resp.cause, cause::RULE_CREATION_MODIFICATION_FAILURE);
        assert_eq!(resp.extra, vec![Ie::FailedRuleId(FailedRuleId::Bar(2))]);
    }
    // Drop the FAR's need for it, then remove: accepted.
    let mut both = rm;
    both.remove_far = vec![g(t::REMOVE_FAR, vec![Ie::FarId(2)])];
    both.remove_pdr = vec![g(t::REMOVE_PDR, vec![Ie::PdrId(2)])];
    assert_eq!(
        modify_resp(&n.handle(0, smf(), &modify_bytes(8, seid, both))).cause,
        1
    );
    assert!(n.session(seid).unwrap().bar.is_none());
    // Establishment with a FAR naming a missing BAR: 73, Failed Rule ID FAR 2.
    let mut r = buffering_est();
    r.create_bar = None;
    r.cp_f_seid = cp_fseid(8);
    let out = n.handle(0, smf(), &est_bytes(9, r));
    match sent(&out).body {
        Body::SessionEstablishmentResponse(e) => {
            assert_eq!(e.cause, cause::RULE_CREATION_MODIFICATION_FAILURE);
            assert_eq!(e.offending_ie, Some(t::BAR_ID));
            assert_eq!(e.extra, vec![Ie::FailedRuleId(FailedRuleId::Far(2))]);
        }
        b => panic!("{b:?}"),
    }
    n.check_consistency().unwrap();
}

#[test]
fn failed_rule_id_names_the_pdr_with_a_dangling_far() {
    let mut n = quiet_node();
    let mut r = est(CP_SEID);
    r.create_pdr[1] = pdr_dl(2, 42);
    let out = n.handle(0, smf(), &est_bytes(2, r));
    match sent(&out).body {
        Body::SessionEstablishmentResponse(e) => {
            assert_eq!((e.cause, e.offending_ie), (73, Some(t::FAR_ID)));
            assert_eq!(e.extra, vec![Ie::FailedRuleId(FailedRuleId::Pdr(2))]);
        }
        b => panic!("{b:?}"),
    }
}
