//! The PFCP gaps an independent SMF found (issue 14 item 6): Time Quota with TIMQU (TS 29.244
//! sections 5.2.2.2, 8.2.51), PFCPSMReq-Flags QAURR (8.2.58), Query URR Reference (8.2.98,
//! table 7.5.5.2-1), and the audit of IEs we would otherwise accept and ignore
//! (`peregrine_n4::audit`): refused with the IE named, or discarded and counted when unknown.

use peregrine_n4::{Event, Node};
use peregrine_pfcp::ie::{
    ie_type as t, reporting_triggers as rt, smreq_flags, usage_report_trigger as urt, Bitmap,
    FailedRuleId, Grouped, Ie, RawIe, ENTERPRISE_BIT,
};
use peregrine_pfcp::message::{SessionModificationRequest, SessionResponse};
use peregrine_pfcp::{cause, Body};
use peregrine_testkit::pfcp::{node::*, requests::*};

const SEC: u64 = 1_000_000_000;

fn raw(ty: u16, value: &[u8]) -> Ie {
    Ie::Raw(RawIe {
        ie_type: ty,
        enterprise_id: None,
        value: value.to_vec(),
    })
}

fn modify_response(
    n: &mut Node,
    now: u64,
    seq: u32,
    seid: u64,
    r: SessionModificationRequest,
) -> SessionResponse {
    match sent(&n.handle(now, smf(), &modify_bytes(seq, seid, r))).body {
        Body::SessionModificationResponse(r) => r,
        b => panic!("{b:?}"),
    }
}

/// (URR ID, trigger, Query URR Reference) of each usage report.
fn reports(gs: &[Grouped]) -> Vec<(u32, u64, Option<u32>)> {
    gs.iter()
        .map(|g| {
            let id = g.ies.iter().find_map(|i| match i {
                Ie::UrrId(x) => Some(*x),
                _ => None,
            });
            let trig = g.ies.iter().find_map(|i| match i {
                Ie::UsageReportTrigger(b) => Some(b.0),
                _ => None,
            });
            let qref = g.ies.iter().find_map(|i| match i {
                Ie::QueryUrrReference(x) => Some(*x),
                _ => None,
            });
            (id.unwrap(), trig.unwrap(), qref)
        })
        .collect()
}

#[test]
fn time_quota_runs_out_reports_timqu_stops_forwarding_and_rearms() {
    let mut c = config();
    c.heartbeat_interval = std::time::Duration::from_secs(1000);
    let mut n = Node::new(c);
    n.handle(0, smf(), &setup_req(1, 1000));
    let mut r = est(7);
    r.create_urr = vec![urr_with(1, rt::TIMQU, vec![Ie::TimeQuota(20)])];
    let out = n.handle(0, smf(), &est_bytes(2, r));
    let seid = sess_resp(&out).up_seid.unwrap();
    assert_eq!(n.next_timer(), Some(20 * SEC));
    assert!(events(&n.poll_timers(19 * SEC)).is_empty());
    let out = n.poll_timers(20 * SEC);
    assert_eq!(
        events(&out),
        vec![Event::QuotaExhausted { seid, urr_id: 1 }]
    );
    let rep = sent(&out);
    let Body::SessionReportRequest(rr) = rep.body else {
        panic!("{rep:?}")
    };
    assert_eq!(reports(&rr.usage_report), vec![(1, urt::TIMQU, None)]);
    // Reported once.
    assert!(events(&n.poll_timers(40 * SEC)).is_empty());
    // A new Time Quota counts from the Update URR.
    let upd = SessionModificationRequest {
        update_urr: vec![g(t::UPDATE_URR, vec![Ie::UrrId(1), Ie::TimeQuota(5)])],
        ..Default::default()
    };
    assert_eq!(modify_response(&mut n, 41 * SEC, 3, seid, upd).cause, 1);
    assert!(events(&n.poll_timers(45 * SEC)).is_empty());
    assert_eq!(
        events(&n.poll_timers(46 * SEC)),
        vec![Event::QuotaExhausted { seid, urr_id: 1 }]
    );
    n.check_consistency().unwrap();
}

#[test]
fn qaurr_reports_every_urr_and_query_reference_is_echoed() {
    let mut n = associated();
    let seid = establish(&mut n, 0, 2, 7);
    let add = SessionModificationRequest {
        create_urr: vec![urr_with(5, 0, vec![])],
        ..Default::default()
    };
    assert_eq!(modify_response(&mut n, 0, 3, seid, add).cause, 1);
    // QAURR with a reference, and a URR created by the same request: the two URRs the
    // session had are reported (IMMER), each carrying the reference; the new one is not.
    let q = SessionModificationRequest {
        create_urr: vec![urr_with(6, 0, vec![])],
        pfcpsm_req_flags: Some(Bitmap(smreq_flags::QAURR)),
        query_urr_reference: Some(0xabcd),
        ..Default::default()
    };
    let r = modify_response(&mut n, SEC, 4, seid, q);
    assert_eq!(r.cause, 1);
    assert_eq!(
        reports(&r.usage_report),
        vec![(1, urt::IMMER, Some(0xabcd)), (5, urt::IMMER, Some(0xabcd))]
    );
    // Query URR naming URR 5 as well as QAURR: one report per URR.
    let q = SessionModificationRequest {
        query_urr: vec![g(t::QUERY_URR, vec![Ie::UrrId(5)])],
        pfcpsm_req_flags: Some(Bitmap(smreq_flags::QAURR)),
        ..Default::default()
    };
    let r = modify_response(&mut n, 2 * SEC, 5, seid, q);
    let got: Vec<u32> = reports(&r.usage_report).iter().map(|x| x.0).collect();
    assert_eq!(got, vec![1, 5, 6]);
    assert!(reports(&r.usage_report).iter().all(|x| x.2.is_none()));
    // A plain Query URR with a reference echoes it too.
    let q = SessionModificationRequest {
        query_urr: vec![g(t::QUERY_URR, vec![Ie::UrrId(6)])],
        query_urr_reference: Some(9),
        ..Default::default()
    };
    let r = modify_response(&mut n, 3 * SEC, 6, seid, q);
    assert_eq!(reports(&r.usage_report), vec![(6, urt::IMMER, Some(9))]);
    n.check_consistency().unwrap();
}

#[test]
fn ies_we_would_ignore_are_refused_by_name_and_change_nothing() {
    let mut n = associated();
    let seid = establish(&mut n, 0, 2, 7);
    let before = n.debug_snapshot();
    // Monitoring Time (33) in a Create URR: 73, Offending IE 33, Failed Rule ID URR 8.
    let m = SessionModificationRequest {
        create_urr: vec![urr_with(8, rt::VOLTH, vec![raw(33, &[0, 0, 0, 1])])],
        ..Default::default()
    };
    let r = modify_response(&mut n, SEC, 3, seid, m);
    assert_eq!(
        (r.cause, r.offending_ie),
        (cause::RULE_CREATION_MODIFICATION_FAILURE, Some(33))
    );
    assert_eq!(r.extra, vec![Ie::FailedRuleId(FailedRuleId::Urr(8))]);
    // A Reporting Trigger we do not implement (START of traffic).
    let m = SessionModificationRequest {
        update_urr: vec![g(
            t::UPDATE_URR,
            vec![Ie::UrrId(1), Ie::ReportingTriggers(Bitmap(0x10))],
        )],
        ..Default::default()
    };
    let r = modify_response(&mut n, SEC, 4, seid, m);
    assert_eq!(r.offending_ie, Some(t::REPORTING_TRIGGERS));
    // SUMPC at the top of a modification: 76.
    let m = SessionModificationRequest {
        pfcpsm_req_flags: Some(Bitmap(0x08)),
        ..Default::default()
    };
    let r = modify_response(&mut n, SEC, 5, seid, m);
    assert_eq!(
        (r.cause, r.offending_ie),
        (cause::SERVICE_NOT_SUPPORTED, Some(t::PFCPSMREQ_FLAGS))
    );
    assert_eq!(n.debug_snapshot(), before);
    // An establishment with Create Traffic Endpoint (127): 76, no session.
    let mut e = est(8);
    e.extra = vec![raw(127, &[0, 131, 0, 1, 1])];
    let r = sess_resp(&n.handle(2 * SEC, smf(), &est_bytes(6, e)));
    assert_eq!(
        (r.cause, r.offending, r.hdr_seid),
        (cause::SERVICE_NOT_SUPPORTED, Some(127), Some(8))
    );
    assert_eq!(n.debug_snapshot(), before);
    // Informational IEs (PDN Type 113, DNN 159, S-NSSAI 257) pass; a type beyond the
    // specification's table and a vendor IE are discarded and counted.
    let mut e = est(9);
    e.extra = vec![
        raw(113, &[1]),
        raw(159, b"\x08internet"),
        raw(257, &[1, 0, 0, 1]),
        raw(400, &[1]),
        Ie::Raw(RawIe {
            ie_type: 7 | ENTERPRISE_BIT,
            enterprise_id: Some(18681),
            value: vec![1],
        }),
    ];
    let r = sess_resp(&n.handle(3 * SEC, smf(), &est_bytes(7, e)));
    assert_eq!(r.cause, 1, "{:?}", r.offending);
    let d = &n.stats().ies_discarded;
    assert_eq!(d.get(&400), Some(&1));
    assert_eq!(d.get(&(7 | ENTERPRISE_BIT)), Some(&1));
    n.check_consistency().unwrap();
}
