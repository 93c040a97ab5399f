//! Usage reporting (TS 29.244 5.2.2, 7.5.5, 7.5.7, 7.5.8), downlink data reports and BAR
//! (5.2.3), Failed Rule ID (8.2.80) and the node's statistics. Every report is decoded with
//! our codec; the tshark test checks that Wireshark agrees.

use std::time::Duration;

use peregrine_n4::{Event, Node, Output, Usage};
use peregrine_pfcp::ie::{
    apply_action, ie_type as t, report_type, reporting_triggers as rt, usage_report_trigger as urt,
    Bitmap, FailedRuleId, Grouped, Ie, Volume,
};
use peregrine_pfcp::message::{
    msg_type as mt, SessionEstablishmentRequest, SessionModificationRequest, SessionReportRequest,
    SessionResponse,
};
use peregrine_pfcp::{cause, Body, Message};
use peregrine_testkit::pfcp::{node::*, requests::*};
use peregrine_testkit::tshark;

const CP_SEID: u64 = 7;

/// A node whose heartbeats stay out of the way (interval 1000 s).
fn quiet_node() -> Node {
    let mut c = config();
    c.heartbeat_interval = Duration::from_secs(1000);
    let mut n = Node::new(c);
    n.handle(0, smf(), &setup_req(1, 1000));
    n
}

/// The standard session with URR 1 replaced by `urr`.
fn session_with(n: &mut Node, urr: Grouped) -> u64 {
    let mut r = est(CP_SEID);
    r.create_urr = vec![urr];
    let out = n.handle(0, smf(), &est_bytes(2, r));
    let resp = sess_resp(&out);
    assert_eq!(resp.cause, 1, "{:?}", resp.offending);
    resp.up_seid.unwrap()
}

fn vol(total: Option<u64>, ul: Option<u64>, dl: Option<u64>) -> Volume {
    Volume {
        total,
        ul,
        dl,
        ..Default::default()
    }
}

fn usage(ul: u64, dl: u64, at: u64) -> Usage {
    Usage {
        ul_bytes: ul,
        dl_bytes: dl,
        ul_pkts: ul / 100,
        dl_pkts: dl / 100,
        first_pkt_ns: (ul + dl > 0).then_some(SEC / 2),
        last_pkt_ns: (ul + dl > 0).then_some(at),
    }
}

/// Session Report Requests among `out`, decoded, with their sequence numbers.
fn reports(out: &[Output]) -> Vec<(Message, SessionReportRequest)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send { to, bytes } => {
                assert_eq!(*to, smf());
                let m = Message::parse(bytes).expect("our report decodes");
                match m.body.clone() {
                    Body::SessionReportRequest(r) => Some((m, r)),
                    _ => None,
                }
            }
            _ => None,
        })
        .collect()
}

/// The single usage report of a single Session Report Request.
fn one_usage_report(out: &[Output]) -> (u32, Grouped) {
    let rs = reports(out);
    assert_eq!(rs.len(), 1, "{out:?}");
    let (m, r) = &rs[0];
    assert_eq!(m.seid, Some(CP_SEID), "header SEID is the CP's (7.2.2.4.2)");
    assert_eq!(r.report_type, Bitmap(report_type::USAR));
    assert_eq!(r.usage_report.len(), 1);
    assert_eq!(r.usage_report[0].ie_type, t::USAGE_REPORT_SRR);
    (m.seq, r.usage_report[0].clone())
}

struct Rep {
    urr: u32,
    seqn: u32,
    trigger: u64,
    vol: Option<Volume>,
    dur: Option<u32>,
    start: Option<u32>,
    end: Option<u32>,
}

fn rep(g: &Grouped) -> Rep {
    let mut r = Rep {
        urr: 0,
        seqn: u32::MAX,
        trigger: 0,
        vol: None,
        dur: None,
        start: None,
        end: None,
    };
    for ie in &g.ies {
        match ie {
            Ie::UrrId(x) => r.urr = *x,
            Ie::UrSeqn(x) => r.seqn = *x,
            Ie::UsageReportTrigger(b) => r.trigger = b.0,
            Ie::VolumeMeasurement(v) => r.vol = Some(*v),
            Ie::DurationMeasurement(x) => r.dur = Some(*x),
            Ie::StartTime(x) => r.start = Some(*x),
            Ie::EndTime(x) => r.end = Some(*x),
            _ => {}
        }
    }
    r
}

fn report_resp(seq: u32, c: u8) -> Vec<u8> {
    msg(
        seq,
        Some(1),
        Body::SessionReportResponse(SessionResponse {
            cause: c,
            offending_ie: None,
            created_pdr: vec![],
            usage_report: vec![],
            extra: vec![],
        }),
    )
}

fn modify_resp(out: &[Output]) -> SessionResponse {
    match sent(out).body {
        Body::SessionModificationResponse(r) | Body::SessionDeletionResponse(r) => r,
        b => panic!("{b:?}"),
    }
}

// ---- 5.2.2.2 Volume threshold ----------------------------------------------------------

#[test]
fn volume_threshold_reports_once_and_rearms_from_reported_point() {
    let mut n = quiet_node();
    let seid = session_with(
        &mut n,
        urr_with(
            1,
            rt::VOLTH,
            vec![Ie::VolumeThreshold(vol(Some(1000), None, None))],
        ),
    );
    assert!(n
        .update_usage(SEC, seid, 1, usage(300, 400, SEC))
        .is_empty());
    let out = n.update_usage(2 * SEC, seid, 1, usage(500, 700, 2 * SEC));
    let (seq, gr) = one_usage_report(&out);
    let r = rep(&gr);
    assert_eq!((r.urr, r.seqn, r.trigger), (1, 0, urt::VOLTH));
    let v = r.vol.unwrap();
    assert_eq!((v.total, v.ul, v.dl), (Some(1200), Some(500), Some(700)));
    assert_eq!(
        (v.ul_packets, v.dl_packets, v.total_packets),
        (Some(5), Some(7), Some(12))
    );
    assert_eq!(r.dur, Some(2));
    assert_eq!((r.start, r.end), (Some(RTS), Some(RTS + 2)));
    assert!(gr.ies.contains(&Ie::TimeOfLastPacket(RTS + 2)));
    // Same usage again, or less than a threshold's worth more: nothing.
    assert!(n
        .update_usage(2 * SEC, seid, 1, usage(500, 700, 2 * SEC))
        .is_empty());
    assert!(n
        .update_usage(3 * SEC, seid, 1, usage(900, 1299, 3 * SEC))
        .is_empty());
    assert_eq!(n.pending_reports(), 1);
    // Acknowledged: done.
    assert!(n.handle(3 * SEC, smf(), &report_resp(seq, 1)).is_empty());
    assert_eq!(n.pending_reports(), 0);
    // The next 1000 octets since the report: second report, UR-SEQN 1, the delta only.
    let out = n.update_usage(4 * SEC, seid, 1, usage(900, 1300, 4 * SEC));
    let r = rep(&one_usage_report(&out).1);
    assert_eq!((r.seqn, r.trigger), (1, urt::VOLTH));
    assert_eq!(r.vol.unwrap().total, Some(1000));
    assert_eq!(r.dur, Some(2));
    // Update URR with a higher threshold: applies from now on.
    let upd = SessionModificationRequest {
        update_urr: vec![g(
            t::UPDATE_URR,
            vec![
                Ie::UrrId(1),
                Ie::VolumeThreshold(vol(None, Some(5000), None)),
            ],
        )],
        ..Default::default()
    };
    let out = n.handle(5 * SEC, smf(), &modify_bytes(20, seid, upd));
    assert_eq!(modify_resp(&out).cause, 1);
    assert!(n
        .update_usage(6 * SEC, seid, 1, usage(5899, 1300, 6 * SEC))
        .is_empty());
    let r = rep(&one_usage_report(&n.update_usage(7 * SEC, seid, 1, usage(5900, 1300, 7 * SEC))).1);
    assert_eq!(r.vol.unwrap().ul, Some(5000));
    // Unknown session or URR: ignored.
    assert!(n
        .update_usage(7 * SEC, 999, 1, usage(1 << 40, 0, 0))
        .is_empty());
    assert!(n
        .update_usage(7 * SEC, seid, 9, usage(1 << 40, 0, 0))
        .is_empty());
    n.check_consistency().unwrap();
}

// ---- 5.2.2.2 Volume quota ----------------------------------------------------------------

#[test]
fn quota_exhausted_reports_once_with_event_and_update_rearms() {
    let mut n = quiet_node();
    let seid = session_with(
        &mut n,
        urr_with(
            1,
            rt::VOLQU,
            vec![Ie::VolumeQuota(vol(None, None, Some(10_000)))],
        ),
    );
    assert!(n
        .update_usage(SEC, seid, 1, usage(50_000, 9_999, SEC))
        .is_empty());
    let out = n.update_usage(2 * SEC, seid, 1, usage(50_000, 10_000, 2 * SEC));
    assert_eq!(
        events(&out),
        vec![Event::QuotaExhausted { seid, urr_id: 1 }]
    );
    let r = rep(&one_usage_report(&out).1);
    assert_eq!(r.trigger, urt::VOLQU);
    assert_eq!(r.vol.unwrap().dl, Some(10_000));
    // Exhausted once: more traffic (in flight) reports nothing more.
    assert!(n
        .update_usage(3 * SEC, seid, 1, usage(50_000, 90_000, 3 * SEC))
        .is_empty());
    // A new quota from the CP function counts from now.
    let upd = SessionModificationRequest {
        update_urr: vec![g(
            t::UPDATE_URR,
            vec![Ie::UrrId(1), Ie::VolumeQuota(vol(None, None, Some(500)))],
        )],
        ..Default::default()
    };
    assert_eq!(
        modify_resp(&n.handle(4 * SEC, smf(), &modify_bytes(30, seid, upd))).cause,
        1
    );
    assert!(n
        .update_usage(5 * SEC, seid, 1, usage(50_000, 90_499, 5 * SEC))
        .is_empty());
    let out = n.update_usage(6 * SEC, seid, 1, usage(50_000, 90_500, 6 * SEC));
    assert_eq!(
        events(&out),
        vec![Event::QuotaExhausted { seid, urr_id: 1 }]
    );
    assert_eq!(rep(&one_usage_report(&out).1).seqn, 1);
}

// ---- 5.2.2.2 Periodic reporting and time threshold ---------------------------------------

#[test]
fn periodic_reports_carry_only_the_period() {
    let mut n = quiet_node();
    let seid = session_with(
        &mut n,
        urr_with(1, rt::PERIO, vec![Ie::MeasurementPeriod(10)]),
    );
    assert_eq!(n.next_timer(), Some(10 * SEC));
    assert!(n.poll_timers(9 * SEC).is_empty());
    // Usage fed during the period never triggers by itself.
    assert!(n
        .update_usage(5 * SEC, seid, 1, usage(100, 200, 5 * SEC))
        .is_empty());
    let mut totals = Vec::new();
    let mut cum = (100u64, 200u64);
    for k in 1..=4u64 {
        let out = n.poll_timers(k * 10 * SEC);
        let (seq, gr) = one_usage_report(&out);
        let r = rep(&gr);
        assert_eq!((r.seqn, r.trigger), ((k - 1) as u32, urt::PERIO));
        assert_eq!(r.dur, Some(10));
        assert_eq!(r.start, Some(RTS + ((k - 1) * 10) as u32));
        totals.push(r.vol.unwrap().total.unwrap());
        n.handle(k * 10 * SEC, smf(), &report_resp(seq, 1));
        assert_eq!(n.next_timer(), Some((k + 1) * 10 * SEC));
        // Traffic of the next period: k * 1000 octets.
        cum.1 += k * 1000;
        n.update_usage(
            k * 10 * SEC + SEC,
            seid,
            1,
            usage(cum.0, cum.1, k * 10 * SEC + SEC),
        );
    }
    assert_eq!(totals, vec![300, 1000, 2000, 3000]);
    assert_eq!(n.stats().reports_acknowledged, 4);
}

#[test]
fn time_threshold_reports_after_the_threshold() {
    let mut n = quiet_node();
    session_with(&mut n, urr_with(1, rt::TIMTH, vec![Ie::TimeThreshold(30)]));
    assert_eq!(n.next_timer(), Some(30 * SEC));
    assert!(reports(&n.poll_timers(29 * SEC)).is_empty());
    let out = n.poll_timers(30 * SEC);
    let (seq, gr) = one_usage_report(&out);
    let r = rep(&gr);
    assert_eq!((r.trigger, r.dur), (urt::TIMTH, Some(30)));
    assert_eq!(n.next_timer(), Some(33 * SEC), "T1 retransmission");
    n.handle(31 * SEC, smf(), &report_resp(seq, 1));
    // Re-armed from the report.
    assert_eq!(n.next_timer(), Some(60 * SEC));
    assert!(n.poll_timers(59 * SEC).is_empty());
    assert_eq!(rep(&one_usage_report(&n.poll_timers(60 * SEC)).1).seqn, 1);
}

// ---- 7.5.7 Deletion with final usage; 7.5.5 Remove / Query URR ----------------------------

#[test]
fn deletion_response_carries_final_usage_from_the_source() {
    let mut n = quiet_node();
    let mut r = est(CP_SEID);
    r.create_urr = vec![
        urr_with(1, rt::PERIO, vec![Ie::MeasurementPeriod(60)]),
        urr_with(2, 0, vec![]),
    ];
    let out = n.handle(0, smf(), &est_bytes(2, r));
    let seid = sess_resp(&out).up_seid.unwrap();
    n.update_usage(SEC, seid, 1, usage(10, 20, SEC));
    // The source has newer counters for URR 1 only; URR 2 keeps what was fed (nothing).
    let mut asked = Vec::new();
    let mut src = |s: u64, u: u32| {
        asked.push((s, u));
        (u == 1).then(|| usage(1000, 2000, 9 * SEC))
    };
    let out = n.handle_with(10 * SEC, smf(), &delete_bytes(3, seid), &mut src);
    assert_eq!(asked, vec![(seid, 1), (seid, 2)]);
    let resp = modify_resp(&out);
    assert_eq!(resp.cause, 1);
    assert_eq!(resp.usage_report.len(), 2);
    assert!(resp
        .usage_report
        .iter()
        .all(|g| g.ie_type == t::USAGE_REPORT_SDR));
    let a = rep(&resp.usage_report[0]);
    assert_eq!((a.urr, a.trigger, a.dur), (1, urt::TERMR, Some(10)));
    assert_eq!(a.vol.unwrap().total, Some(3000));
    let b = rep(&resp.usage_report[1]);
    assert_eq!((b.urr, b.vol.unwrap().total), (2, Some(0)));
    assert_eq!(n.session_count(), 0);
    n.check_consistency().unwrap();
}

#[test]
fn query_and_remove_urr_report_in_the_modification_response() {
    let mut n = quiet_node();
    let seid = session_with(&mut n, urr_with(1, 0, vec![]));
    let add = SessionModificationRequest {
        create_urr: vec![urr_with(5, 0, vec![])],
        ..Default::default()
    };
    assert_eq!(
        modify_resp(&n.handle(0, smf(), &modify_bytes(3, seid, add))).cause,
        1
    );
    n.update_usage(SEC, seid, 1, usage(100, 100, SEC));
    n.update_usage(SEC, seid, 5, usage(7, 0, SEC));
    // Query URR 1: IMMER with the usage so far, measurement restarts.
    let q = SessionModificationRequest {
        query_urr: vec![g(t::QUERY_URR, vec![Ie::UrrId(1)])],
        ..Default::default()
    };
    let resp = modify_resp(&n.handle(2 * SEC, smf(), &modify_bytes(4, seid, q.clone())));
    assert_eq!(resp.cause, 1);
    assert_eq!(resp.usage_report.len(), 1);
    assert_eq!(resp.usage_report[0].ie_type, t::USAGE_REPORT_SMR);
    let r = rep(&resp.usage_report[0]);
    assert_eq!((r.urr, r.seqn, r.trigger), (1, 0, urt::IMMER));
    assert_eq!(r.vol.unwrap().total, Some(200));
    // Queried again with a source: only the new usage.
    let mut src = |_: u64, _: u32| Some(usage(150, 100, 3 * SEC));
    let out = n.handle_with(3 * SEC, smf(), &modify_bytes(5, seid, q), &mut src);
    let r = rep(&modify_resp(&out).usage_report[0]);
    assert_eq!((r.seqn, r.vol.unwrap().total), (1, Some(50)));
    // Remove URR 5 (no PDR uses it): TERMR report, meter gone.
    let rm = SessionModificationRequest {
        remove_urr: vec![g(t::REMOVE_URR, vec![Ie::UrrId(5)])],
        ..Default::default()
    };
    let resp = modify_resp(&n.handle(4 * SEC, smf(), &modify_bytes(6, seid, rm)));
    let r = rep(&resp.usage_report[0]);
    assert_eq!(
        (r.urr, r.trigger, r.vol.unwrap().ul),
        (5, urt::TERMR, Some(7))
    );
    assert!(n
        .update_usage(5 * SEC, seid, 5, usage(1, 1, SEC))
        .is_empty());
    n.check_consistency().unwrap();
    // Querying an unknown URR: 73 with Failed Rule ID, nothing changes.
    let before = n.debug_snapshot();
    let bad = SessionModificationRequest {
        query_urr: vec![g(t::QUERY_URR, vec![Ie::UrrId(9)])],
        ..Default::default()
    };
    let resp = modify_resp(&n.handle(5 * SEC, smf(), &modify_bytes(7, seid, bad)));
    assert_eq!(resp.cause, cause::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(resp.offending_ie, Some(t::URR_ID));
    assert_eq!(resp.extra, vec![Ie::FailedRuleId(FailedRuleId::Urr(9))]);
    assert!(resp.usage_report.is_empty());
    assert_eq!(n.debug_snapshot(), before);
}

// ---- 6.4 Report retransmission -----------------------------------------------------------

#[test]
fn report_retransmitted_every_t1_then_given_up() {
    let mut n = quiet_node();
    let seid = session_with(
        &mut n,
        urr_with(
            1,
            rt::VOLTH,
            vec![Ie::VolumeThreshold(vol(Some(1), None, None))],
        ),
    );
    let out = n.update_usage(0, seid, 1, usage(1, 0, 0));
    let first = sent_bytes(&out);
    let t1 = 3 * SEC;
    assert_eq!(n.next_timer(), Some(t1));
    assert!(n.poll_timers(t1 - 1).is_empty());
    for k in 1..=3u64 {
        let out = n.poll_timers(k * t1);
        assert_eq!(sent_bytes(&out), first, "same bytes, same sequence number");
    }
    let out = n.poll_timers(4 * t1);
    let seq = Message::parse(&first).unwrap().seq;
    assert_eq!(events(&out), vec![Event::ReportTimedOut { seid, seq }]);
    assert!(out.iter().all(|o| matches!(o, Output::Event(_))));
    assert_eq!(n.pending_reports(), 0);
    let st = n.stats();
    assert_eq!(
        (
            st.reports_sent,
            st.reports_retransmitted,
            st.reports_timed_out
        ),
        (1, 3, 1)
    );
    // A late response matches nothing.
    n.handle(4 * t1, smf(), &report_resp(seq, 1));
    assert_eq!(n.stats().reports_unexpected_responses, 1);
    assert_eq!(n.stats().reports_acknowledged, 0);
}

#[test]
fn context_not_found_drops_the_sessions_reports() {
    let mut n = quiet_node();
    let seid = session_with(
        &mut n,
        urr_with(
            1,
            rt::VOLTH,
            vec![Ie::VolumeThreshold(vol(Some(10), None, None))],
        ),
    );
    let (s1, _) = one_usage_report(&n.update_usage(0, seid, 1, usage(10, 0, 0)));
    let (s2, _) = one_usage_report(&n.update_usage(SEC, seid, 1, usage(20, 0, SEC)));
    assert_ne!(s1, s2);
    assert_eq!(n.pending_reports(), 2);
    // A response from another peer does not complete it.
    n.handle(SEC, smf2(), &report_resp(s1, 1));
    assert_eq!(n.pending_reports(), 2);
    n.handle(
        SEC,
        smf(),
        &report_resp(s1, cause::SESSION_CONTEXT_NOT_FOUND),
    );
    assert_eq!(n.pending_reports(), 0);
    assert!(reports(&n.poll_timers(10 * SEC)).is_empty());
    assert_eq!(n.stats().reports_rejected, 1);
    n.check_consistency().unwrap();
}

// ---- Statistics --------------------------------------------------------------------------

#[test]
fn stats_count_messages_causes_errors_duplicates_and_reports() {
    let mut n = quiet_node();
    let seid = session_with(
        &mut n,
        urr_with(
            1,
            rt::VOLTH,
            vec![Ie::VolumeThreshold(vol(Some(1), None, None))],
        ),
    );
    // Duplicate establishment: answered from the cache.
    n.handle(0, smf(), &est_bytes(2, est(CP_SEID)));
    // Garbage: unknown type (discarded), truncated, mandatory IE missing (rejected).
    n.handle(0, smf(), &[0x20, 200, 0, 4, 0, 0, 1, 0]);
    n.handle(0, smf(), &[0x21]);
    n.handle(
        0,
        smf(),
        &est_bytes(3, {
            let mut r = est(CP_SEID);
            r.create_far.clear();
            r
        }),
    );
    n.handle(0, smf(), &delete_bytes(4, 999));
    let (seq, _) = one_usage_report(&n.update_usage(0, seid, 1, usage(1, 0, 0)));
    n.handle(0, smf(), &report_resp(seq, 1));
    let st = n.stats().clone();
    assert_eq!(st.rx[&mt::ASSOCIATION_SETUP_REQUEST], 1);
    assert_eq!(st.rx[&mt::SESSION_ESTABLISHMENT_REQUEST], 3);
    assert_eq!(st.rx[&200], 1);
    assert_eq!(st.rx[&mt::SESSION_REPORT_RESPONSE], 1);
    assert_eq!(st.tx[&mt::SESSION_ESTABLISHMENT_RESPONSE], 3);
    assert_eq!(st.tx[&mt::SESSION_REPORT_REQUEST], 1);
    assert_eq!(st.tx[&mt::SESSION_DELETION_RESPONSE], 1);
    assert_eq!(st.responses[&(mt::ASSOCIATION_SETUP_RESPONSE, 1)], 1);
    // The cached duplicate is counted as a duplicate, not as a second response.
    assert_eq!(st.responses[&(mt::SESSION_ESTABLISHMENT_RESPONSE, 1)], 1);
    assert_eq!(
        st.responses[&(
            mt::SESSION_ESTABLISHMENT_RESPONSE,
            cause::MANDATORY_IE_MISSING
        )],
        1
    );
    assert_eq!(
        st.responses[&(
            mt::SESSION_DELETION_RESPONSE,
            cause::SESSION_CONTEXT_NOT_FOUND
        )],
        1
    );
    assert_eq!(st.duplicates, 1);
    assert_eq!(st.decode_errors["unknown_message_type"], 1);
    assert_eq!(st.decode_errors["truncated"], 1);
    assert_eq!(st.decode_errors["mandatory_ie_missing"], 1);
    assert_eq!((st.reports_sent, st.reports_acknowledged), (1, 1));
    assert_eq!((st.sessions, st.associations), (1, 1));
}

// ---- Wireshark agrees --------------------------------------------------------------------

#[test]
fn tshark_decodes_reports_and_usage_carrying_responses() {
    let mut n = quiet_node();
    let mut r = buffering_est();
    r.create_urr = vec![urr_with(
        1,
        rt::VOLTH | rt::PERIO,
        vec![
            Ie::VolumeThreshold(vol(Some(1000), None, None)),
            Ie::MeasurementPeriod(60),
        ],
    )];
    let seid = sess_resp(&n.handle(0, smf(), &est_bytes(2, r)))
        .up_seid
        .unwrap();
    let mut datagrams = Vec::new();
    datagrams.push(sent_bytes(&n.update_usage(
        5 * SEC,
        seid,
        1,
        usage(400, 800, 5 * SEC),
    )));
    datagrams.push(sent_bytes(&n.downlink_data(6 * SEC, seid, 2)));
    let q = SessionModificationRequest {
        query_urr: vec![g(t::QUERY_URR, vec![Ie::UrrId(1)])],
        ..Default::default()
    };
    datagrams.push(sent_bytes(&n.handle(
        7 * SEC,
        smf(),
        &modify_bytes(3, seid, q),
    )));
    let bad = SessionModificationRequest {
        remove_pdr: vec![g(t::REMOVE_PDR, vec![Ie::PdrId(9)])],
        ..Default::default()
    };
    datagrams.push(sent_bytes(&n.handle(
        7 * SEC,
        smf(),
        &modify_bytes(4, seid, bad),
    )));
    n.update_usage(8 * SEC, seid, 1, usage(450, 800, 8 * SEC));
    datagrams.push(sent_bytes(&n.handle(
        9 * SEC,
        smf(),
        &delete_bytes(5, seid),
    )));
    let Some(pkts) = tshark::decode_clean(&datagrams, "n4-usage") else {
        return;
    };
    let types = [
        mt::SESSION_REPORT_REQUEST,
        mt::SESSION_REPORT_REQUEST,
        mt::SESSION_MODIFICATION_RESPONSE,
        mt::SESSION_MODIFICATION_RESPONSE,
        mt::SESSION_DELETION_RESPONSE,
    ];
    for (i, (f, ty)) in pkts.iter().zip(types).enumerate() {
        assert!(
            tshark::has(f, "pfcp.msg_type", &ty.to_string()),
            "{i}: {f:#?}"
        );
        let m = Message::parse(&datagrams[i]).unwrap();
        assert!(tshark::has(f, "pfcp.seqno", &m.seq.to_string()), "{i}");
    }
    // UR-SEQN 0, 1, 2 across the three usage reports; URR ID 1; PDR ID 2 in the DLDR.
    for (i, seqn) in [(0, "0"), (2, "1"), (4, "2")] {
        assert!(
            tshark::has(&pkts[i], "pfcp.ur_seqn", seqn),
            "{i}: {:#?}",
            pkts[i]
        );
        assert!(tshark::has(&pkts[i], "pfcp.urr_id", "1"), "{i}");
    }
    assert!(tshark::has(&pkts[1], "pfcp.pdr_id", "2"), "{:#?}", pkts[1]);
    // The rejection's Failed Rule ID: PDR 9.
    assert!(
        pkts[3].keys().any(|k| k.starts_with("pfcp.failed_rule_id")),
        "{:#?}",
        pkts[3]
    );
    assert!(tshark::has(&pkts[3], "pfcp.cause", "73"));
    // Volumes as Wireshark reads them: the deletion reports 50 octets since the query.
    assert!(
        tshark::has(&pkts[4], "pfcp.volume_measurement.tovol", "50"),
        "{:#?}",
        pkts[4]
    );
    assert!(tshark::has(&pkts[4], "pfcp.usage_report_trigger.term", "1"));
    assert!(tshark::has(
        &pkts[0],
        "pfcp.usage_report_trigger_flags.volth",
        "1"
    ));
    assert!(tshark::has(
        &pkts[2],
        "pfcp.usage_report_trigger.immer",
        "1"
    ));
}

#[test]
fn next_timer_sees_a_session_established_after_it_was_asked() {
    // next_timer caches the earliest URR due time; a later session with an earlier period
    // must still lower it.
    let mut n = quiet_node();
    let mut r = est(CP_SEID);
    r.create_urr = vec![urr_with(1, rt::PERIO, vec![Ie::MeasurementPeriod(60)])];
    assert_eq!(sess_resp(&n.handle(0, smf(), &est_bytes(2, r))).cause, 1);
    assert_eq!(n.next_timer(), Some(60 * SEC));
    let mut r = est(CP_SEID + 1);
    r.create_urr = vec![urr_with(1, rt::PERIO, vec![Ie::MeasurementPeriod(10)])];
    assert_eq!(
        sess_resp(&n.handle(5 * SEC, smf(), &est_bytes(3, r))).cause,
        1
    );
    assert_eq!(n.next_timer(), Some(15 * SEC));
    let out = n.poll_timers(15 * SEC);
    assert_eq!(reports(&out).len(), 1, "the 10 s period fired");
    assert_eq!(n.next_timer(), Some(18 * SEC), "T1 of the report");
}

/// An establishment whose downlink FAR buffers (here and in `buffering.rs`).
fn buffering_est() -> SessionEstablishmentRequest {
    let mut r = est(CP_SEID);
    // FAR 2 (downlink) buffers and notifies, with the session's BAR 1.
    r.create_far[1] = g(
        t::CREATE_FAR,
        vec![
            Ie::FarId(2),
            Ie::ApplyAction(Bitmap(apply_action::BUFF | apply_action::NOCP)),
            Ie::BarId(1),
        ],
    );
    r.create_bar = Some(g(
        t::CREATE_BAR,
        vec![Ie::BarId(1), Ie::SuggestedBufferingPacketsCount(16)],
    ));
    r
}

mod buffering;
