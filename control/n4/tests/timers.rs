//! The URR timer index at scale (TS 29.244 section 5.2.2.2): with thousands of sessions,
//! `next_timer` is the earliest deadline of any URR, `poll_timers` reports exactly the URRs
//! due, `watched_urrs` lists exactly the URRs with volume triggers, and the index follows
//! establishment, Update URR, Remove URR and deletion (`check_consistency` compares it with
//! every meter).

use std::time::Duration;

use peregrine_n4::{Node, Output, Usage};
use peregrine_pfcp::ie::{ie_type as t, reporting_triggers as rt, Ie, Volume};
use peregrine_pfcp::message::SessionModificationRequest;
use peregrine_pfcp::{Body, Message};
use peregrine_testkit::pfcp::{node::*, requests::*};

const N: u64 = 3000;

/// Session `k`'s URR: a period of 10..=70 s (by `k % 7`); every fifth also has a Volume
/// Threshold of 1000 octets.
fn urr_of(k: u64) -> (u64, bool) {
    ((k % 7 + 1) * 10, k.is_multiple_of(5))
}

fn node_with_sessions() -> (Node, Vec<u64>) {
    let mut c = config();
    c.heartbeat_interval = Duration::from_secs(100_000);
    c.echo_interval = Duration::ZERO;
    c.max_sessions = N as usize + 1;
    let mut n = Node::new(c);
    n.handle(0, smf(), &setup_req(1, 1000));
    let mut seids = Vec::new();
    for k in 0..N {
        let (period, volth) = urr_of(k);
        let mut trig = rt::PERIO;
        let mut extra = vec![Ie::MeasurementPeriod(period as u32)];
        if volth {
            trig |= rt::VOLTH;
            extra.push(Ie::VolumeThreshold(Volume {
                total: Some(1000),
                ..Default::default()
            }));
        }
        let mut r = est(100 + k);
        r.create_urr = vec![urr_with(1, trig, extra)];
        let resp = sess_resp(&n.handle(0, smf(), &est_bytes(2 + k as u32, r)));
        assert_eq!(resp.cause, 1, "session {k}");
        seids.push(resp.up_seid.expect("UP F-SEID"));
    }
    n.check_consistency().unwrap();
    (n, seids)
}

fn report_seids(out: &[Output]) -> Vec<u64> {
    let mut v: Vec<u64> = out
        .iter()
        .filter_map(|o| match o {
            Output::Send { bytes, .. } => {
                let m = Message::parse(bytes).ok()?;
                matches!(m.body, Body::SessionReportRequest(_)).then_some(m.seid?)
            }
            _ => None,
        })
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn timers_fire_exactly_the_urrs_due_among_thousands() {
    let (mut n, seids) = node_with_sessions();
    assert_eq!(n.urr_index_sizes(), (N as usize, N as usize / 5));
    let watched: Vec<(u64, u32)> = n.watched_urrs().collect();
    let want: Vec<(u64, u32)> = (0..N)
        .filter(|k| urr_of(*k).1)
        .map(|k| (seids[k as usize], 1))
        .collect();
    assert_eq!(watched, want, "only the volume-threshold URRs are polled");
    assert_eq!(n.next_timer(), Some(10 * SEC));
    // At 30 s the 10 s, 20 s and 30 s periods are due (3/7 of the sessions), once each.
    let out = n.poll_timers(30 * SEC);
    let got = report_seids(&out);
    // Reports carry the CP's SEID (100 + k).
    let due: Vec<u64> = (0..N)
        .filter(|k| urr_of(*k).0 <= 30)
        .map(|k| 100 + k)
        .collect();
    assert_eq!(got, due);
    n.check_consistency().unwrap();
    // Next: T1 of those reports (3 s), before the 40 s periods.
    assert_eq!(n.next_timer(), Some(33 * SEC));
}

#[test]
fn index_follows_update_remove_and_deletion() {
    let (mut n, seids) = node_with_sessions();
    // Session 0: period 10 s -> 1000 s; session 1: URR removed; session 2: deleted.
    let upd = SessionModificationRequest {
        update_urr: vec![g(
            t::UPDATE_URR,
            vec![Ie::UrrId(1), Ie::MeasurementPeriod(1000)],
        )],
        ..Default::default()
    };
    assert_eq!(
        sess_resp(&n.handle(SEC, smf(), &modify_bytes(90_000, seids[0], upd))).cause,
        1
    );
    // Session 1: URR 5 (no PDR uses it, 10 s period) created, then removed.
    let add = SessionModificationRequest {
        create_urr: vec![urr_with(5, rt::PERIO, vec![Ie::MeasurementPeriod(10)])],
        ..Default::default()
    };
    assert_eq!(
        sess_resp(&n.handle(SEC, smf(), &modify_bytes(90_001, seids[1], add))).cause,
        1
    );
    n.check_consistency().unwrap();
    assert_eq!(n.urr_index_sizes().0, N as usize + 1);
    let rm = SessionModificationRequest {
        remove_urr: vec![g(t::REMOVE_URR, vec![Ie::UrrId(5)])],
        ..Default::default()
    };
    assert_eq!(
        sess_resp(&n.handle(SEC, smf(), &modify_bytes(90_002, seids[1], rm))).cause,
        1
    );
    assert_eq!(
        sess_resp(&n.handle(SEC, smf(), &delete_bytes(90_003, seids[2]))).cause,
        1
    );
    n.check_consistency().unwrap();
    // Session 2's URR is gone with it; session 2 had k = 2: no volume threshold.
    assert_eq!(n.urr_index_sizes(), (N as usize - 1, N as usize / 5));
    // The 10 s sessions other than 0 (k = 7, 14, ...) fire at 10 s; session 0 does not.
    let out = n.poll_timers(10 * SEC);
    let want: Vec<u64> = (1..N)
        .filter(|k| k.is_multiple_of(7))
        .map(|k| 100 + k)
        .collect();
    assert_eq!(report_seids(&out), want);
    n.check_consistency().unwrap();
    // Session 0's period now runs from the update (1 s) for 1000 s.
    assert!(!report_seids(&n.poll_timers(1000 * SEC)).contains(&100));
    assert!(report_seids(&n.poll_timers(1001 * SEC)).contains(&100));
    n.check_consistency().unwrap();
}

#[test]
fn a_due_timer_reads_fresh_usage() {
    let (mut n, seids) = node_with_sessions();
    let target = seids[7];
    let mut source = |seid: u64, _urr: u32| {
        (seid == target).then_some(Usage {
            ul_bytes: 4242,
            ul_pkts: 3,
            ..Usage::default()
        })
    };
    let out = n.poll_timers_with(10 * SEC, &mut source);
    let vol = out.iter().find_map(|o| match o {
        Output::Send { bytes, .. } => {
            let m = Message::parse(bytes).ok()?;
            let Body::SessionReportRequest(r) = m.body else {
                return None;
            };
            (m.seid == Some(107)).then(|| {
                r.usage_report[0].ies.iter().find_map(|i| match i {
                    Ie::VolumeMeasurement(v) => v.ul,
                    _ => None,
                })
            })?
        }
        _ => None,
    });
    assert_eq!(vol, Some(4242));
}
