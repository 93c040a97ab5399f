//! Memory per PFCP session held by the N4 node, measured with a counting allocator (live
//! heap bytes, deterministic: no timing). 10,000 sessions of the shape the SMF simulator
//! (control/tests/smf/smf_sim.py) establishes: 2 PDRs (UL with F-TEID CHOOSE / CHID, both
//! with network instance "internet" and the UE IPv4 address), 2 FARs (N6 with a network
//! instance, N3 with Outer Header Creation), 1 QER (gate, MBR, QFI), 1 URR (VOLUM + DURAT,
//! periodic). The budget keeps the node's share of the 2 KiB per-session goal.

use peregrine_testkit::alloc::CountingAlloc;
use std::net::Ipv4Addr;
use std::time::Duration;

use peregrine_n4::{Node, Session};
use peregrine_pfcp::ie::{
    apply_action, ie_type as t, measurement_method as mm, ohc, reporting_triggers as rt, BitRate,
    Bitmap, FTeid, GateStatus, Grouped, Ie, OuterHeaderCreation, OuterHeaderRemoval, UeIpAddress,
};
use peregrine_testkit::pfcp::{node::*, requests::*};

/// Live heap bytes, for the memory figures.
#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc::new();

fn live() -> isize {
    GLOBAL.live() as isize
}

const N: usize = 10_000;
/// The node's share of the 2 KiB per-session goal (the rule compiler, its tables and the
/// per-worker state take the rest).
const NODE_BUDGET: f64 = 700.0;

fn internet() -> Ie {
    Ie::NetworkInstance(b"\x08internet".to_vec())
}

/// Session Establishment Request `i` as smf_sim.py's `establishment` builds it.
fn smf_sim_request(seq: u32, i: u32) -> Vec<u8> {
    let ue = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 60, 0, 0)) + i);
    let pdr = |id: u16, far: u32, pdi: Vec<Ie>, ohr: bool| {
        let mut ies = vec![
            Ie::PdrId(id),
            Ie::Precedence(100),
            Ie::Grouped(Grouped::new(t::PDI, pdi)),
        ];
        if ohr {
            ies.push(Ie::OuterHeaderRemoval(OuterHeaderRemoval {
                description: 0,
                ext_header_deletion: None,
            }));
        }
        ies.extend([Ie::FarId(far), Ie::QerId(1), Ie::UrrId(1)]);
        Grouped::new(t::CREATE_PDR, ies)
    };
    let ul = pdr(
        1,
        1,
        vec![
            Ie::SourceInterface(0),
            Ie::FTeid(FTeid::Choose {
                v4: true,
                v6: false,
                choose_id: Some(1),
            }),
            internet(),
            Ie::UeIpAddress(UeIpAddress {
                ipv4: Some(ue),
                ..Default::default()
            }),
            Ie::Qfi(9),
        ],
        true,
    );
    let dl = pdr(
        2,
        2,
        vec![
            Ie::SourceInterface(1),
            internet(),
            Ie::UeIpAddress(UeIpAddress {
                sd: true,
                ipv4: Some(ue),
                ..Default::default()
            }),
        ],
        false,
    );
    let far = |id: u32, fwd: Vec<Ie>| {
        Grouped::new(
            t::CREATE_FAR,
            vec![
                Ie::FarId(id),
                Ie::ApplyAction(Bitmap(apply_action::FORW)),
                Ie::Grouped(Grouped::new(t::FORWARDING_PARAMETERS, fwd)),
            ],
        )
    };
    let far_n6 = far(1, vec![Ie::DestinationInterface(1), internet()]);
    let far_n3 = far(
        2,
        vec![
            Ie::DestinationInterface(0),
            Ie::OuterHeaderCreation(OuterHeaderCreation {
                description: ohc::GTPU_UDP_IPV4,
                teid: Some(0x10_0000 + i),
                ipv4: Some(GNB),
                ..Default::default()
            }),
        ],
    );
    let urr = Grouped::new(
        t::CREATE_URR,
        vec![
            Ie::UrrId(1),
            Ie::MeasurementMethod(Bitmap(mm::VOLUM | mm::DURAT)),
            Ie::ReportingTriggers(Bitmap(rt::PERIO)),
            Ie::MeasurementPeriod(60),
        ],
    );
    let qer = Grouped::new(
        t::CREATE_QER,
        vec![
            Ie::QerId(1),
            Ie::GateStatus(GateStatus { ul: 0, dl: 0 }),
            Ie::Mbr(BitRate {
                ul: 100_000,
                dl: 100_000,
            }),
            Ie::Qfi(9),
        ],
    );
    let r = peregrine_pfcp::message::SessionEstablishmentRequest {
        create_pdr: vec![ul, dl],
        create_far: vec![far_n6, far_n3],
        create_urr: vec![urr],
        create_qer: vec![qer],
        ..est(u64::from(i) + 1)
    };
    est_bytes(seq, r)
}

fn per_session(bytes: isize) -> f64 {
    bytes as f64 / N as f64
}

#[test]
fn typical_session_stays_within_the_node_budget() {
    let mut cfg = config();
    cfg.max_sessions = N + 16;
    cfg.heartbeat_interval = Duration::from_secs(3600);
    let reqs: Vec<Vec<u8>> = (0..N as u32).map(|i| smf_sim_request(i + 2, i)).collect();

    let l0 = live();
    let mut n = Node::new(cfg);
    n.handle(0, smf(), &setup_req(1, 1000));
    let l_assoc = live();
    for r in &reqs {
        let out = n.handle(SEC, smf(), r);
        assert_eq!(sess_resp(&out).cause, 1);
    }
    assert_eq!(n.session_count(), N);
    let l_est = live();
    // Answered requests are remembered for `response_retention` (30 s, bounded at 4096,
    // TS 29.244 section 6.4); a datagram after that expires them, so what remains is the
    // sessions' own state (plus the one cached Heartbeat Response).
    let cache_before = per_session(l_est - l_assoc) - {
        n.handle(40 * SEC, smf(), &heartbeat_req(1));
        per_session(live() - l_assoc)
    };
    assert_eq!(n.cached_responses(), 1);
    n.check_consistency().unwrap();
    let node = per_session(live() - l0);

    // The same rules as typed `Session`s (what the rule compiler reads; before the compact
    // stored form the node kept these), for comparison.
    let l1 = live();
    let mut copies: Vec<Session> = Vec::with_capacity(N);
    copies.extend(n.sessions());
    let rules = per_session(live() - l1);
    let pdrs = {
        let a = live();
        let v: Vec<_> = copies.iter().map(|s| s.pdrs.clone()).collect();
        let b = live() - a - (v.capacity() * std::mem::size_of_val(&copies[0].pdrs)) as isize;
        per_session(b)
    };
    let fars = {
        let a = live();
        let v: Vec<_> = copies.iter().map(|s| s.fars.clone()).collect();
        let b = live() - a - (v.capacity() * std::mem::size_of_val(&copies[0].fars)) as isize;
        per_session(b)
    };
    drop(copies);
    println!(
        "N4 node, {N} smf_sim-shaped sessions: {node:.0} B/session \
         (for comparison, the rules as typed Sessions: {rules:.0} B incl. Session struct {} B, \
         PDR heap {pdrs:.0} B, FAR heap {fars:.0} B); \
         response cache while fresh: {cache_before:.0} B/session; \
         sizes: Session {} Pdr {} Far {} Qer {} Urr {}",
        std::mem::size_of::<Session>(),
        std::mem::size_of::<Session>(),
        std::mem::size_of::<peregrine_n4::Pdr>(),
        std::mem::size_of::<peregrine_n4::Far>(),
        std::mem::size_of::<peregrine_n4::Qer>(),
        std::mem::size_of::<peregrine_n4::Urr>(),
    );
    assert!(
        node <= NODE_BUDGET,
        "N4 node holds {node:.0} B per typical session, budget {NODE_BUDGET} B"
    );

    // Deleting every session gives its memory back: what stays is the bounded response
    // cache's table (sized for 4096 entries, not per session). A second establish / delete
    // round must end where the first did.
    let delete_all = |n: &mut Node, seq0: u32, now: u64| {
        let seids: Vec<u64> = n.urr_keys().map(|(seid, _)| seid).collect();
        for (k, seid) in seids.into_iter().enumerate() {
            let out = n.handle(now, smf(), &delete_bytes(seq0 + k as u32, seid));
            assert_eq!(sess_resp(&out).cause, 1);
        }
        n.handle(now + 40 * SEC, smf(), &heartbeat_req(seq0));
        assert_eq!(n.session_count(), 0);
        n.check_consistency().unwrap();
        live()
    };
    let l_del1 = delete_all(&mut n, 100_000, 41 * SEC);
    println!(
        "after deleting them all: {:.0} B/session left (bounded response cache table)",
        per_session(l_del1 - l_assoc)
    );
    for r in &reqs {
        assert_eq!(sess_resp(&n.handle(90 * SEC, smf(), r)).cause, 1);
    }
    let l_del2 = delete_all(&mut n, 200_000, 131 * SEC);
    let leak = per_session(l_del2 - l_del1);
    assert!(
        leak.abs() < 1.0,
        "{leak:.2} B per deleted session still held"
    );
}
