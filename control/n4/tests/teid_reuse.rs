//! F-TEID CHOOSE under churn (TS 29.244 section 5.5.3): released TEIDs are reused, lowest
//! first, once their quarantine (`NodeConfig::teid_reuse_after`, 60 s by default) is over,
//! never before; CHOOSE ID sharing is unchanged; a TEID taken meanwhile by a CP-assigned
//! F-TEID is not handed out twice; and after 100k establish / delete cycles the highest live
//! TEID stays below live + released-within-the-quarantine + a small slack.

use std::collections::VecDeque;
use std::time::Duration;

use peregrine_n4::Node;
use peregrine_pfcp::cause;
use peregrine_pfcp::ie::{ie_type as t, FTeid, Grouped, Ie};
use peregrine_pfcp::message::{SessionEstablishmentRequest, SessionModificationRequest};
use peregrine_testkit::pfcp::{node::*, requests::*};

const Q: u64 = 60 * SEC;

fn quiet_node() -> Node {
    let mut c = config();
    c.heartbeat_interval = Duration::from_secs(1_000_000);
    c.echo_interval = Duration::ZERO;
    assert_eq!(c.teid_reuse_after, Duration::from_secs(60), "the default");
    let mut n = Node::new(c);
    n.handle(0, smf(), &setup_req(1, 1000));
    n
}

/// Establish `r` at `now`: (UP SEID, TEIDs of the Created PDRs in PDR order).
fn est_teids(n: &mut Node, now: u64, seq: u32, r: SessionEstablishmentRequest) -> (u64, Vec<u32>) {
    let resp = sess_resp(&n.handle(now, smf(), &est_bytes(seq, r)));
    assert_eq!(resp.cause, cause::REQUEST_ACCEPTED, "{:?}", resp.offending);
    let teids = resp.created.iter().map(|c| created_fteid(c).1).collect();
    (resp.up_seid.unwrap(), teids)
}

/// The standard session (one CHOOSE F-TEID): (UP SEID, its TEID).
fn one(n: &mut Node, now: u64, seq: u32) -> (u64, u32) {
    let (seid, teids) = est_teids(n, now, seq, est(u64::from(seq)));
    assert_eq!(teids.len(), 1);
    (seid, teids[0])
}

fn delete(n: &mut Node, now: u64, seq: u32, seid: u64) {
    let resp = sess_resp(&n.handle(now, smf(), &delete_bytes(seq, seid)));
    assert_eq!(resp.cause, cause::REQUEST_ACCEPTED);
}

/// Uplink PDR `id` with the F-TEID `f` instead of CHOOSE.
fn pdr_with(id: u16, f: FTeid) -> Grouped {
    let mut p = pdr_ul(id, None, 1);
    for ie in &mut p.ies {
        if let Ie::Grouped(pdi) = ie {
            for x in &mut pdi.ies {
                if let Ie::FTeid(old) = x {
                    *old = f;
                }
            }
        }
    }
    p
}

fn assigned(teid: u32) -> FTeid {
    FTeid::Assigned {
        teid,
        ipv4: Some(N3),
        ipv6: None,
    }
}

#[test]
fn released_teid_is_reused_only_after_the_quarantine() {
    let mut n = quiet_node();
    let s: Vec<(u64, u32)> = (0..3).map(|k| one(&mut n, 0, 10 + k)).collect();
    assert_eq!(s.iter().map(|x| x.1).collect::<Vec<_>>(), [1, 2, 3]);
    delete(&mut n, 10 * SEC, 20, s[1].0);
    assert_eq!(n.teid_usage(), (2, Some(3), 1));
    // Within the quarantine (up to 10 s + 60 s - 1 ns): the counter's next ones.
    assert_eq!(one(&mut n, 10 * SEC + Q - 1, 21).1, 4);
    n.check_consistency().unwrap();
    // After it: TEID 2 again, then the counter.
    assert_eq!(one(&mut n, 10 * SEC + Q, 22).1, 2);
    assert_eq!(one(&mut n, 10 * SEC + Q, 23).1, 5);
    assert_eq!(n.teid_usage(), (5, Some(5), 0));
    n.check_consistency().unwrap();
}

#[test]
fn lowest_free_teid_first_and_freed_tops_go_back_to_the_counter() {
    let mut n = quiet_node();
    let s: Vec<(u64, u32)> = (0..6).map(|k| one(&mut n, 0, 10 + k)).collect();
    // Release 5, then 2, then 6 (the top of the counter's range), then 4.
    for (k, i) in [4usize, 1, 5, 3].into_iter().enumerate() {
        delete(&mut n, (k as u64 + 1) * SEC, 30 + k as u32, s[i].0);
    }
    let later = 10 * SEC + Q;
    // The timer poll settles the pool: free after the quarantine are 2, and 4..=6, which
    // reaches the counter (7) and is given back to it. Lowest first: 2, 4, 5, 6, then 7.
    n.poll_timers(later);
    n.check_consistency().unwrap();
    let got: Vec<u32> = (0..5).map(|k| one(&mut n, later, 40 + k).1).collect();
    assert_eq!(got, [2, 4, 5, 6, 7]);
    n.check_consistency().unwrap();
    // Unsettled (no commit, release or timer poll since their quarantine ended), released
    // TEIDs are taken oldest first: 5 (released at 1 s) before 2 (at 2 s).
    let mut n = quiet_node();
    let s: Vec<(u64, u32)> = (0..6).map(|k| one(&mut n, 0, 10 + k)).collect();
    delete(&mut n, SEC, 30, s[4].0);
    delete(&mut n, 2 * SEC, 31, s[1].0);
    assert_eq!(one(&mut n, 2 * SEC + Q, 32).1, 5);
    assert_eq!(one(&mut n, 2 * SEC + Q, 33).1, 2);
}

#[test]
fn chid_sharing_unchanged_with_reused_teids() {
    let mut n = quiet_node();
    let s: Vec<(u64, u32)> = (0..4).map(|k| one(&mut n, 0, 10 + k)).collect();
    delete(&mut n, SEC, 20, s[0].0);
    delete(&mut n, SEC, 21, s[2].0);
    // PDRs 1 and 3 share CHOOSE ID 1, PDR 4 has CHOOSE ID 2, PDR 5 none: three TEIDs, the
    // free ones 1 and 3 first, then the counter.
    let mut r = est(50);
    r.create_pdr = vec![
        pdr_ul(1, Some(1), 1),
        pdr_dl(2, 2),
        pdr_ul(3, Some(1), 1),
        pdr_ul(4, Some(2), 1),
        pdr_ul(5, None, 1),
    ];
    let (seid, teids) = est_teids(&mut n, SEC + Q, 30, r);
    assert_eq!(teids, [1, 1, 3, 5]);
    assert_eq!(n.session(seid).unwrap().teids().len(), 3);
    n.check_consistency().unwrap();
}

#[test]
fn teid_taken_by_a_cp_assigned_fteid_is_not_handed_out_twice() {
    let mut n = quiet_node();
    let s: Vec<(u64, u32)> = (0..4).map(|k| one(&mut n, 0, 10 + k)).collect();
    delete(&mut n, SEC, 20, s[1].0); // TEID 2, in quarantine
    delete(&mut n, SEC, 21, s[2].0); // TEID 3, in quarantine
                                     // The CP assigns TEID 2 itself (CH = 0) during its quarantine: its choice, accepted.
    let mut r = est(60);
    r.create_pdr = vec![pdr_with(1, assigned(2)), pdr_dl(2, 2)];
    let (cp2, created) = est_teids(&mut n, 2 * SEC, 30, r);
    assert!(created.is_empty());
    // After the quarantine CHOOSE gets 3, not 2; then the counter.
    assert_eq!(one(&mut n, SEC + Q, 31).1, 3);
    assert_eq!(one(&mut n, SEC + Q, 32).1, 5);
    n.check_consistency().unwrap();
    // The CP-assigned 2 released at 70 s: a quarantine of its own from then.
    delete(&mut n, 70 * SEC, 33, cp2);
    assert_eq!(one(&mut n, 70 * SEC + Q - 1, 34).1, 6);
    assert_eq!(one(&mut n, 70 * SEC + Q, 35).1, 2);
    // A free TEID (its quarantine over) taken by a CP-assigned F-TEID, in the same request
    // as a CHOOSE: the CHOOSE gets another one.
    delete(&mut n, 200 * SEC, 36, s[3].0); // TEID 4
    delete(&mut n, 200 * SEC, 37, s[0].0); // TEID 1
    let mut r = est(61);
    r.create_pdr = vec![pdr_with(1, assigned(1)), pdr_dl(2, 2), pdr_ul(3, None, 1)];
    let (_, created) = est_teids(&mut n, 200 * SEC + Q, 38, r);
    assert_eq!(created, [4]);
    n.check_consistency().unwrap();
}

#[test]
fn choose_skips_a_teid_a_later_pdr_of_the_request_assigns() {
    let mut n = quiet_node();
    // PDR 1 (CHOOSE) is resolved before PDR 3 (CP-assigned 1): CHOOSE still avoids 1.
    let mut r = est(90);
    r.create_pdr.push(pdr_with(3, assigned(1)));
    let (seid, created) = est_teids(&mut n, 0, 10, r);
    assert_eq!(created, [2]);
    // The same in a modification: Create PDR with CHOOSE, Update PDR assigning 3.
    let m = SessionModificationRequest {
        create_pdr: vec![pdr_ul(4, None, 1)],
        update_pdr: vec![g(
            t::UPDATE_PDR,
            vec![
                Ie::PdrId(3),
                Ie::Grouped(g(
                    t::PDI,
                    vec![Ie::SourceInterface(0), Ie::FTeid(assigned(3))],
                )),
            ],
        )],
        ..Default::default()
    };
    let resp = sess_resp(&n.handle(SEC, smf(), &modify_bytes(11, seid, m)));
    assert_eq!(resp.cause, cause::REQUEST_ACCEPTED);
    assert_eq!(created_fteid(&resp.created[0]).1, 4);
    let s = n.session(seid).unwrap();
    assert_eq!(s.teids(), [2, 3, 4].into());
    n.check_consistency().unwrap();
}

#[test]
fn modification_and_association_release_release_teids() {
    let mut n = quiet_node();
    let mut r = est(70);
    r.create_pdr = vec![pdr_ul(1, None, 1), pdr_dl(2, 2), pdr_ul(3, None, 1)];
    let (seid, teids) = est_teids(&mut n, 0, 10, r);
    assert_eq!(teids, [1, 2]);
    // Remove PDR 3 (TEID 2) at 5 s.
    let m = SessionModificationRequest {
        remove_pdr: vec![g(t::REMOVE_PDR, vec![Ie::PdrId(3)])],
        ..Default::default()
    };
    let resp = sess_resp(&n.handle(5 * SEC, smf(), &modify_bytes(11, seid, m)));
    assert_eq!(resp.cause, cause::REQUEST_ACCEPTED);
    assert_eq!(n.teid_usage(), (1, Some(1), 1));
    // A Create PDR with CHOOSE in a modification: quarantine respected, then reuse.
    let add = |pdr: u16| SessionModificationRequest {
        create_pdr: vec![pdr_ul(pdr, None, 1)],
        ..Default::default()
    };
    let resp = sess_resp(&n.handle(5 * SEC + Q - 1, smf(), &modify_bytes(12, seid, add(4))));
    assert_eq!(created_fteid(&resp.created[0]).1, 3);
    let resp = sess_resp(&n.handle(5 * SEC + Q, smf(), &modify_bytes(13, seid, add(5))));
    assert_eq!(created_fteid(&resp.created[0]).1, 2);
    n.check_consistency().unwrap();
    // Association release: all of the session's TEIDs (1, 2, 3) released at 100 s.
    n.handle(100 * SEC, smf(), &assoc_req(14, true));
    assert_eq!(n.session_count(), 0);
    assert_eq!(n.teid_usage(), (0, None, 3));
    n.handle(100 * SEC, smf(), &setup_req(15, 1000));
    assert_eq!(one(&mut n, 100 * SEC + Q - 1, 16).1, 4);
    // After the quarantine 1..=3 are free (and 1..=4 once 4 goes, back to the counter).
    assert_eq!(one(&mut n, 100 * SEC + Q, 17).1, 1);
    n.check_consistency().unwrap();
}

#[test]
fn a_refused_request_leaves_the_teid_pool_as_it_was() {
    let mut n = quiet_node();
    let s: Vec<(u64, u32)> = (0..3).map(|k| one(&mut n, 0, 10 + k)).collect();
    delete(&mut n, SEC, 20, s[0].0);
    let before = n.debug_snapshot();
    // CHOOSE would take free TEID 1, but a dangling FAR reference refuses the request.
    let mut r = est(80);
    r.create_pdr = vec![pdr_ul(1, None, 1), pdr_dl(2, 9)];
    let resp = sess_resp(&n.handle(SEC + Q, smf(), &est_bytes(21, r)));
    assert_eq!(resp.cause, cause::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(n.debug_snapshot(), before);
    assert_eq!(one(&mut n, SEC + Q, 22).1, 1);
}

/// 100k establish / delete cycles with 1000 sessions live, one cycle every 5 ms of virtual
/// time: 12,000 TEIDs are released within any 60 s quarantine, so no more than about
/// 13,000 TEIDs (live + quarantined) are ever needed. Without reuse the counter would end
/// at 101,000.
#[test]
fn churn_keeps_live_teids_dense() {
    const LIVE: usize = 1000;
    const CYCLES: u64 = 100_000;
    const STEP: u64 = 5_000_000;
    let in_quarantine = (Q / STEP) as u32;
    let mut c = config();
    c.heartbeat_interval = Duration::from_secs(1_000_000);
    c.echo_interval = Duration::ZERO;
    let mut n = Node::new(c);
    n.handle(0, smf(), &setup_req(1, 1000));
    let mut live: VecDeque<u64> = VecDeque::new();
    let mut seq = 2u32;
    let mut highest = 0u32;
    for i in 0..CYCLES + LIVE as u64 {
        let now = i * STEP;
        let (seid, teid) = one(&mut n, now, seq);
        seq = seq % 0x00ff_fff0 + 1;
        highest = highest.max(teid);
        live.push_back(seid);
        if live.len() > LIVE {
            delete(&mut n, now, seq, live.pop_front().unwrap());
            seq = seq % 0x00ff_fff0 + 1;
        }
        if i % 20_000 == 0 {
            n.check_consistency().unwrap();
        }
    }
    let (count, top, quarantined) = n.teid_usage();
    assert_eq!(count, LIVE);
    assert!(
        quarantined as u32 <= in_quarantine + 1,
        "{quarantined} in quarantine"
    );
    let bound = LIVE as u32 + in_quarantine + 16;
    println!(
        "churn: {CYCLES} cycles, {LIVE} live: highest TEID ever {highest}, now {top:?}, \
         {quarantined} in quarantine; bound {bound}"
    );
    assert!(highest <= bound, "highest TEID {highest} > {bound}");
    n.check_consistency().unwrap();
}

/// Random establishments (CHOOSE, sometimes with a CP-assigned F-TEID from a small range),
/// modifications moving the CHOOSE PDR, deletions and association releases at random
/// times, against a model of the TEIDs: no CHOOSE TEID is ever live already or reused
/// within the quarantine of its last release, and a CP-assigned one is refused exactly when
/// it is live.
#[test]
fn random_churn_never_reuses_within_the_quarantine() {
    use peregrine_testkit::rng;
    use std::collections::HashMap;
    let mut r = rng::seeded(0x7e1d_0039);
    let mut below = |n: u64| rng::below(&mut r, n);
    let mut n = quiet_node();
    // SEID -> (CHOOSE PDR ID, its TEID, CP-assigned TEID).
    let mut live: Live = HashMap::new();
    let mut released: HashMap<u32, u64> = HashMap::new();
    let mut now = 0u64;
    let mut seq = 10u32;
    let (mut reused, mut refused) = (0u32, 0u32);
    type Live = HashMap<u64, (u16, u32, Option<u32>)>;
    fn in_use(live: &Live, t: u32) -> bool {
        live.values().any(|&(_, c, a)| c == t || a == Some(t))
    }
    // A TEID CHOOSE handed out at `now`: not live, not within its quarantine. Reused?
    fn fresh(now: u64, t: u32, live: &Live, released: &HashMap<u32, u64>) -> bool {
        assert!(!in_use(live, t), "TEID {t} handed out while live");
        released.get(&t).is_some_and(|&at| {
            assert!(
                now >= at + Q,
                "TEID {t} reused {} ns after its release",
                now - at
            );
            true
        })
    }
    for step in 0..20_000u32 {
        now += below(2 * SEC);
        seq += 1;
        let k = below(100);
        if k < 50 && live.len() < 300 {
            let cp = (below(3) == 0).then(|| 1 + below(400) as u32);
            let mut e = est(u64::from(seq));
            if let Some(t) = cp {
                e.create_pdr.push(pdr_with(3, assigned(t)));
            }
            let resp = sess_resp(&n.handle(now, smf(), &est_bytes(seq, e)));
            let clash = cp.is_some_and(|t| in_use(&live, t));
            if clash {
                assert_eq!(resp.cause, cause::RULE_CREATION_MODIFICATION_FAILURE);
                refused += 1;
                continue;
            }
            assert_eq!(resp.cause, cause::REQUEST_ACCEPTED, "step {step}");
            let t = created_fteid(&resp.created[0]).1;
            assert_ne!(
                Some(t),
                cp,
                "CHOOSE handed out the request's own CP-assigned TEID"
            );
            reused += u32::from(fresh(now, t, &live, &released));
            live.insert(resp.up_seid.unwrap(), (1, t, cp));
        } else if k < 80 && !live.is_empty() {
            let seid = *live.keys().nth(below(live.len() as u64) as usize).unwrap();
            let (id, t, cp) = live.remove(&seid).unwrap();
            delete(&mut n, now, seq, seid);
            released.insert(t, now);
            if let Some(a) = cp {
                released.insert(a, now);
            }
            let _ = id;
        } else if k < 99 && !live.is_empty() {
            // Move the CHOOSE PDR: remove it, create another with CHOOSE.
            let seid = *live.keys().nth(below(live.len() as u64) as usize).unwrap();
            let (id, old, cp) = live[&seid];
            let new_id = if id == 1 { 4 } else { 1 };
            let m = SessionModificationRequest {
                remove_pdr: vec![g(t::REMOVE_PDR, vec![Ie::PdrId(id)])],
                create_pdr: vec![pdr_ul(new_id, None, 1)],
                ..Default::default()
            };
            let resp = sess_resp(&n.handle(now, smf(), &modify_bytes(seq, seid, m)));
            assert_eq!(resp.cause, cause::REQUEST_ACCEPTED, "step {step}");
            let t = created_fteid(&resp.created[0]).1;
            live.remove(&seid);
            reused += u32::from(fresh(now, t, &live, &released));
            assert_ne!(t, old, "the removed PDR's TEID is released, not kept");
            released.insert(old, now);
            live.insert(seid, (new_id, t, cp));
        } else if k == 99 {
            // Association release and setup again: every session's TEIDs released.
            n.handle(now, smf(), &assoc_req(seq, true));
            for (_, (_, t, cp)) in live.drain() {
                released.insert(t, now);
                if let Some(a) = cp {
                    released.insert(a, now);
                }
            }
            seq += 1;
            n.handle(now, smf(), &setup_req(seq, 1000));
        }
        if step % 16 == 0 {
            n.poll_timers(now);
        }
        if step % 500 == 0 {
            n.check_consistency().unwrap();
        }
    }
    n.check_consistency().unwrap();
    println!("random churn: {reused} TEIDs reused after their quarantine, {refused} CP-assigned clashes refused, highest {:?}", n.teid_usage().1);
    assert!(
        reused > 1000 && refused > 10,
        "{reused} reused, {refused} refused"
    );
}

/// TEIDs reserved for sessions the node does not manage (the daemon's static sessions,
/// `NodeConfig::reserved_teids`): CHOOSE skips them, and a CP-assigned one is refused with
/// cause 73 naming the F-TEID, as a TEID of another session is.
#[test]
fn reserved_teids_are_never_handed_out_nor_accepted() {
    let mut c = config();
    c.heartbeat_interval = Duration::from_secs(1_000_000);
    c.echo_interval = Duration::ZERO;
    c.reserved_teids = [1, 2, 4].into();
    let mut n = Node::new(c);
    n.handle(0, smf(), &setup_req(1, 1000));
    let got: Vec<u32> = (0..3).map(|k| one(&mut n, 0, 10 + k).1).collect();
    assert_eq!(got, [3, 5, 6]);
    let mut r = est(60);
    r.create_pdr = vec![pdr_with(1, assigned(4)), pdr_dl(2, 2)];
    let resp = sess_resp(&n.handle(SEC, smf(), &est_bytes(20, r)));
    assert_eq!(resp.cause, cause::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(resp.offending, Some(t::F_TEID));
    n.check_consistency().unwrap();
}
