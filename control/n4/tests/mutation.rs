//! Deterministic mutation loop: ~50k valid-then-mutated requests through `Node::handle`. The
//! node must never panic, must keep its cross-table invariants, must answer only with
//! decodable datagrams, and a rejected session request must leave the state unchanged.

use peregrine_n4::{Node, Output, Usage};
use peregrine_pfcp::ie::{ie_type as t, Bitmap, GateStatus, Ie};
use peregrine_pfcp::message::{SessionModificationRequest, SessionResponse};
use peregrine_pfcp::{cause, Body, Message};
use peregrine_testkit::pfcp::{node::*, requests::*};
use peregrine_testkit::rng::{self, RngCore, Xoshiro256PlusPlus};

/// The test kit's seeded PRNG (xoshiro256++).
struct Rng(Xoshiro256PlusPlus);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// In `0..n`, or 0 when `n` is 0.
    fn below(&mut self, n: u64) -> u64 {
        rng::below(&mut self.0, n.max(1))
    }
}

fn template(rng: &mut Rng, seq: u32, seids: &[u64], reports: &[u32]) -> Vec<u8> {
    let seid = if seids.is_empty() || rng.below(8) == 0 {
        rng.below(64)
    } else {
        seids[rng.below(seids.len() as u64) as usize]
    };
    let id = rng.below(4) as u16 + 1;
    match rng.below(14) {
        0 => heartbeat_req(seq),
        1 => setup_req(seq, rng.below(3) as u32),
        2 => assoc_req(seq, false),
        3 if rng.below(4) == 0 => assoc_req(seq, true),
        3..=5 => est_bytes(seq, est(rng.next())),
        6 => delete_bytes(seq, seid),
        7 => modify_bytes(
            seq,
            seid,
            SessionModificationRequest {
                create_pdr: vec![pdr_ul(id + 2, Some(rng.below(3) as u8), id as u32)],
                create_far: vec![far_n6(id as u32)],
                ..Default::default()
            },
        ),
        8 => modify_bytes(
            seq,
            seid,
            SessionModificationRequest {
                remove_pdr: vec![g(t::REMOVE_PDR, vec![Ie::PdrId(id)])],
                remove_far: vec![g(t::REMOVE_FAR, vec![Ie::FarId(id as u32)])],
                ..Default::default()
            },
        ),
        9 => modify_bytes(
            seq,
            seid,
            SessionModificationRequest {
                update_qer: vec![g(
                    t::UPDATE_QER,
                    vec![Ie::QerId(1), Ie::GateStatus(GateStatus { ul: 1, dl: 0 })],
                )],
                update_far: vec![g(
                    t::UPDATE_FAR,
                    vec![Ie::FarId(id as u32), Ie::ApplyAction(Bitmap(1))],
                )],
                update_pdr: vec![g(
                    t::UPDATE_PDR,
                    vec![Ie::PdrId(id), Ie::FarId(rng.below(3) as u32)],
                )],
                ..Default::default()
            },
        ),
        10 => modify_bytes(
            seq,
            seid,
            SessionModificationRequest {
                create_qer: vec![qer(id as u32)],
                create_urr: vec![urr(id as u32)],
                remove_urr: vec![g(t::REMOVE_URR, vec![Ie::UrrId(id as u32)])],
                ..Default::default()
            },
        ),
        11 => modify_bytes(
            seq,
            seid,
            SessionModificationRequest {
                query_urr: vec![g(t::QUERY_URR, vec![Ie::UrrId(id as u32)])],
                update_urr: vec![g(
                    t::UPDATE_URR,
                    vec![
                        Ie::UrrId(1),
                        Ie::ReportingTriggers(Bitmap(0x0107)),
                        Ie::VolumeQuota(peregrine_pfcp::ie::Volume {
                            total: Some(rng.below(1 << 20)),
                            ..Default::default()
                        }),
                        Ie::TimeThreshold(rng.below(5) as u32),
                        Ie::MeasurementPeriod(rng.below(3) as u32),
                    ],
                )],
                ..Default::default()
            },
        ),
        12 => msg(
            // Mostly a report we sent, sometimes a stray sequence number.
            reports
                .get(rng.below(reports.len() as u64 + 1) as usize)
                .copied()
                .unwrap_or(rng.below(64) as u32),
            Some(seid),
            Body::SessionReportResponse(SessionResponse {
                cause: [1, 65, 64][rng.below(3) as usize],
                offending_ie: None,
                created_pdr: vec![],
                usage_report: vec![],
                extra: vec![],
            }),
        ),
        _ => heartbeat_resp(seq),
    }
}

/// Feed usage for a random URR (cumulative, sometimes going backwards) and a downlink packet
/// for a random PDR; every report must decode and no report may name a missing session.
fn feed(n: &mut Node, rng: &mut Rng, now: u64, seids: &[u64], reports: &mut Vec<u32>) {
    let Some(&seid) = seids.get(rng.below(seids.len() as u64 + 1) as usize) else {
        return;
    };
    let u = Usage {
        ul_bytes: rng.below(1 << 24),
        dl_bytes: rng.below(1 << 24),
        ul_pkts: rng.below(1 << 12),
        dl_pkts: rng.below(1 << 12),
        first_pkt_ns: (rng.below(2) == 0).then(|| rng.next()),
        last_pkt_ns: (rng.below(2) == 0).then(|| rng.next()),
    };
    let mut outs = n.update_usage(now, seid, rng.below(5) as u32, u);
    outs.extend(n.downlink_data(now, seid, rng.below(5) as u16));
    for o in outs {
        if let Output::Send { bytes, .. } = o {
            reports.push(Message::parse(&bytes).unwrap().seq);
        }
    }
    if reports.len() > 16 {
        reports.drain(..8);
    }
}

fn mutate(rng: &mut Rng, b: &mut Vec<u8>) {
    for _ in 0..=rng.below(3) {
        if b.is_empty() {
            b.push(rng.next() as u8);
        }
        let at = rng.below(b.len() as u64) as usize;
        match rng.below(6) {
            0 => b[at] ^= 1 << rng.below(8),
            1 => b[at] = rng.next() as u8,
            2 => b.truncate(at),
            3 => b.insert(at, rng.next() as u8),
            4 => {
                // Grow or shrink the message length field, or an IE length.
                if b.len() > 3 {
                    let i = 2 + 2 * rng.below(((b.len() - 2) / 2) as u64) as usize;
                    if i + 1 < b.len() {
                        let v = u16::from_be_bytes([b[i], b[i + 1]])
                            .wrapping_add(rng.below(9) as u16)
                            .wrapping_sub(4);
                        b[i..i + 2].copy_from_slice(&v.to_be_bytes());
                    }
                }
            }
            _ => {
                let end = (at + 1 + rng.below(16) as usize).min(b.len());
                let chunk = b[at..end].to_vec();
                b.splice(at..at, chunk);
            }
        }
    }
}

#[test]
fn fifty_thousand_mutations() {
    let mut c = config();
    c.max_sessions = 24;
    c.response_cache_capacity = 64;
    let mut n = Node::new(c);
    n.handle(0, smf(), &setup_req(1, 0));
    let mut rng = Rng(rng::seeded(0x9e37_79b9_7f4a_7c15));
    let mut now = 0u64;
    let (mut accepted, mut rejected, mut silent) = (0u32, 0u32, 0u32);
    let mut reports: Vec<u32> = Vec::new();
    for i in 0..50_000u32 {
        now += rng.below(SEC / 2);
        let seids: Vec<u64> = n.sessions().map(|s| s.up_seid).collect();
        // Reuse sequence numbers now and then, to exercise the duplicate cache.
        let seq = if rng.below(10) == 0 {
            rng.below(32) as u32
        } else {
            1000 + i
        };
        let mut b = template(&mut rng, seq, &seids, &reports);
        if rng.below(10) < 7 {
            mutate(&mut rng, &mut b);
        }
        let peer = if rng.below(20) == 0 { smf2() } else { smf() };
        let check = i % 25 == 0;
        let before = check.then(|| n.debug_snapshot());
        let out = if rng.below(4) == 0 {
            // Responses ask a usage source; it must not be consulted for rejections.
            let mut src = |_: u64, _: u32| {
                Some(Usage {
                    ul_bytes: rng.below(1 << 30),
                    ..Default::default()
                })
            };
            n.handle_with(now, peer, &b, &mut src)
        } else {
            n.handle(now, peer, &b)
        };
        let after = check.then(|| n.debug_snapshot());
        if i % 3 == 0 {
            feed(&mut n, &mut rng, now, &seids, &mut reports);
        }
        if i % 7 == 0 {
            for o in n.poll_timers(now) {
                if let Output::Send { bytes, .. } = o {
                    Message::parse(&bytes).unwrap();
                }
            }
            // Keep the association alive most of the time.
            if rng.below(2) == 0 {
                n.handle(now, smf(), &heartbeat_resp(1));
            }
        }
        if let Err(e) = n.check_consistency() {
            panic!("iteration {i}: {e}\ninput {b:02x?}");
        }
        let sends: Vec<&Vec<u8>> = out
            .iter()
            .filter_map(|o| match o {
                Output::Send { bytes, .. } => Some(bytes),
                _ => None,
            })
            .collect();
        assert!(sends.len() <= 1);
        let Some(bytes) = sends.first() else {
            silent += 1;
            continue;
        };
        let m = Message::parse(bytes).unwrap_or_else(|e| panic!("iteration {i}: bad response {e}"));
        let rej = match &m.body {
            Body::SessionEstablishmentResponse(r) => Some(r.cause),
            Body::SessionModificationResponse(r) | Body::SessionDeletionResponse(r) => {
                Some(r.cause)
            }
            _ => None,
        };
        match rej {
            Some(c) if !cause::is_accepted(c) => {
                rejected += 1;
                if let (Some(before), Some(after)) = (&before, &after) {
                    assert_eq!(after, before, "iteration {i}: rejection changed state");
                }
            }
            Some(_) => accepted += 1,
            None => {}
        }
        // Re-associate if the peer went away, so sessions keep coming.
        if n.association(smf()).is_none() {
            n.handle(now, smf(), &setup_req(0x00ff_fff0 + (i % 8), 0));
        }
    }
    assert!(accepted > 1000, "accepted {accepted}");
    assert!(rejected > 1000, "rejected {rejected}");
    assert!(silent > 1000, "silent {silent}");
    let st = n.stats();
    assert!(st.reports_sent > 100, "{st:?}");
    assert!(
        st.reports_retransmitted > 0 && st.reports_acknowledged > 0,
        "{st:?}"
    );
    assert!(st.decode_errors.values().sum::<u64>() > 1000, "{st:?}");
}
