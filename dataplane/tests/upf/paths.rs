//! The fast path against the general path (the same bytes, dispositions and metadata), the
//! metadata of what is sent, and mutated frames that must never panic.

use super::*;

/// The test kit's seeded PRNG: deterministic randomness for the mutation test.
fn rnd(s: &mut impl RngCore) -> u64 {
    s.next_u64()
}

#[test]
fn mutated_frames_never_panic() {
    let mut u = ul(Some(9));
    u.qers = vec![qer(None, true, Some((mbr(1_000_000, 10_000), 1, 1)))];
    u.urrs = vec![2];
    let mut n9 = ul(Some(5));
    n9.far.outer = Some(OuterHeader {
        teid: 7,
        peer: IpAddr::V4(peer_upf_v4()),
        local: IpAddr::V4(upf_v4()),
    });
    let mut d6 = dl(DL_TEID, IpAddr::V6(gnb_v6()));
    d6.filters = vec![FlowFilter {
        proto: Some(17),
        src: None,
        dst: None,
        src_ports: Some((1, 100)),
        dst_ports: None,
    }];
    let mut tb = TableBuilder::default();
    tb.add(Key::Teid(TEID), &[u, n9])
        .add(Key::Ue4(ue_v4(0)), &[dl(DL_TEID, IpAddr::V4(gnb_v4()))])
        .add(Key::Ue6(ue_v6(0)), &[d6, dl(DL_TEID, IpAddr::V6(gnb_v6()))]);
    let mut rig = Rig::new(tb.build(), cfg());
    let mut echo = vec![0u8; 12];
    gtpu_msg::Repr::EchoRequest { seq: 1 }
        .emit(&mut echo)
        .unwrap();
    let seeds = [
        ul_frame(false, TEID, Some(9), &udp4(ue_v4(0), server_v4(), 53, 64)),
        ul_frame(true, TEID, Some(5), &udp6(ue_v6(0), server_v6(), 53, 64)),
        ul_frame(false, 0x55, None, &udp4(ue_v4(0), server_v4(), 53, 64)),
        dl_frame(&udp4(server_v4(), ue_v4(0), 80, 1400)),
        dl_frame(&udp6(server_v6(), ue_v6(0), 80, 64)),
        udp_frame(IpAddr::V6(gnb_v6()), IpAddr::V6(upf_v6()), 9, 2152, &echo),
    ];
    let mut s = rng::seeded(0x1234_5678_9abc_def0);
    let mut sent = 0;
    for round in 0..20_000u64 {
        let mut f = seeds[(rnd(&mut s) % seeds.len() as u64) as usize].clone();
        for _ in 0..1 + rnd(&mut s) % 4 {
            let i = (rnd(&mut s) % f.len() as u64) as usize;
            f[i] ^= 1 << (rnd(&mut s) % 8);
        }
        if rnd(&mut s).is_multiple_of(3) {
            let n = (rnd(&mut s) % f.len() as u64) as usize;
            f.truncate(n);
        }
        let (out, d) = rig.one(f, (round % 2) as u16, round * 1_000_000);
        if let Action::Tx(_) = d.action() {
            sent += 1;
            assert!(out.len() >= 14);
        }
    }
    assert!(
        sent > 1000,
        "mutations left too little valid traffic: {sent}"
    );
}

/// The fast-path records (`Shard::index_fast`) and the chunked passes over the classifier's
/// metadata are accelerators only: batches of valid and mutated frames give the same bytes,
/// dispositions, metadata and counters as the per-packet general path (which classifies each
/// packet itself) over tables without fast-path records, and the UPF alone (classifying for
/// itself) gives what it gives after a `Classify` stage.
#[test]
fn fast_path_matches_general_path() {
    assert!(
        !fast_matches_general(TEID),
        "TEID {TEID:#x} is hashed, not paged"
    );
}

/// [`fast_path_matches_general_path`] with the session's uplink TEID in a direct page
/// (`upf::pages`: a TEID below 32 times the shard count, as the UPF's own F-TEID CHOOSE
/// allocator hands them out), beside 0x77 (same page, a PDR whose QFI the packets lack) and
/// 0x55 (a page without TEIDs): the page slot gives what the hash map gives.
#[test]
fn paged_teid_fast_path_matches_general_path() {
    assert!(fast_matches_general(0x78), "TEID 0x78 has a page slot");
}

/// The comparison of [`fast_path_matches_general_path`] with the session's uplink TEID
/// `teid`; whether `teid` had a direct page slot.
fn fast_matches_general(teid: u32) -> bool {
    let mut u = ul(Some(9));
    u.qers = vec![qer(None, true, Some((mbr(1_000_000, 10_000), 1, 1)))];
    u.urrs = vec![2];
    let mut d4 = dl(DL_TEID, IpAddr::V4(gnb_v4()));
    d4.qers = vec![qer(Some(7), true, Some((mbr(1_000_000, 10_000), 3, 1)))];
    d4.urrs = vec![4];
    let mut tb = TableBuilder::default();
    tb.add(Key::Teid(teid), &[u.clone()])
        .add(Key::Teid(0x77), &[ul(Some(5))])
        .add(Key::Ue4(ue_v4(0)), &[d4])
        .add(Key::Ue6(ue_v6(0)), &[dl(DL_TEID, IpAddr::V6(gnb_v6()))]);
    let tables = tb.build_with(true);
    let paged = tables
        .shards
        .teid_page(u64::from(teid))
        .is_some_and(|(page, i)| page[i].is_used());
    let mut fast = Rig::with_mode(tables, cfg(), Mode::Classified);
    let mut alone = Rig::with_mode(tb.build_with(true), cfg(), Mode::Alone);
    let mut general = Rig::with_mode(tb.build_with(false), cfg(), Mode::General);
    let seeds = [
        ul_frame(false, teid, Some(9), &udp4(ue_v4(0), server_v4(), 53, 64)),
        ul_frame(true, teid, None, &udp6(ue_v6(0), server_v6(), 53, 64)),
        // The PDR's QFI (5) does not match the packet's: no PDR.
        ul_frame(false, 0x77, Some(6), &udp4(ue_v4(0), server_v4(), 53, 64)),
        ul_frame(false, 0x55, None, &udp4(ue_v4(0), server_v4(), 53, 64)),
        dl_frame(&udp4(server_v4(), ue_v4(0), 80, 1400)),
        dl_frame(&udp4(server_v4(), ue_v4(1), 80, 64)),
        dl_frame(&udp6(server_v6(), ue_v6(0), 80, 64)),
    ];
    let mut s = rng::seeded(0x0bad_cafe_f00d);
    let mut sent = 0;
    let mut classified = 0;
    for round in 0..400u64 {
        let frames: Vec<Vec<u8>> = (0..40)
            .map(|_| {
                let mut f = seeds[(rnd(&mut s) % seeds.len() as u64) as usize].clone();
                if rnd(&mut s).is_multiple_of(4) {
                    let i = (rnd(&mut s) % f.len() as u64) as usize;
                    f[i] ^= 1 << (rnd(&mut s) % 8);
                }
                f
            })
            .collect();
        let port = (round % 2) as u16;
        let a = fast.run_meta(&frames, port, round * 100_000);
        let b = general.run_meta(&frames, port, round * 100_000);
        let c = alone.run_meta(&frames, port, round * 100_000);
        assert_eq!(a.len(), frames.len(), "round {round}");
        assert_eq!(a.len(), b.len(), "round {round}");
        assert_eq!(a.len(), c.len(), "round {round}");
        for (i, ((fa, da, ma), (fb, db, mb))) in a.iter().zip(&b).enumerate() {
            assert_eq!(fa, fb, "round {round} packet {i}: bytes");
            assert_eq!(da, db, "round {round} packet {i}: disposition");
            assert_eq!(ma, mb, "round {round} packet {i}: metadata");
            sent += matches!(da.action(), Action::Tx(_)) as u32;
            classified += ma.is_classified() as u32;
        }
        for (i, ((fa, da, ma), (fc, dc, mc))) in a.iter().zip(&c).enumerate() {
            assert_eq!(fa, fc, "round {round} packet {i}: bytes (alone)");
            assert_eq!(da, dc, "round {round} packet {i}: disposition (alone)");
            assert_eq!(ma, mc, "round {round} packet {i}: metadata (alone)");
        }
    }
    assert!(sent > 1000, "too little forwarded: {sent}");
    assert!(classified > 1000, "too little classified: {classified}");
    for slot in [2, 4] {
        assert_eq!(fast.stats.urr(slot), general.stats.urr(slot));
        assert_eq!(fast.stats.urr(slot), alone.stats.urr(slot));
    }
    for q in [0, 5, 6, 7, 9] {
        for dir in [Direction::Uplink, Direction::Downlink] {
            assert_eq!(fast.stats.qfi(dir, q), general.stats.qfi(dir, q));
            assert_eq!(fast.stats.qfi(dir, q), alone.stats.qfi(dir, q));
        }
    }
    assert_eq!(fast.stats.totals(), general.stats.totals());
    assert_eq!(fast.stats.totals(), alone.stats.totals());
    paged
}

/// The UPF leaves each forwarded packet's metadata describing the bytes it sends: what the
/// classifier finds in them, plus the UPF's decisions (direction, TEID, URR slot, QFI,
/// queue, colour).
#[test]
fn metadata_describes_the_packet_sent() {
    let mut u = ul(Some(9));
    u.urrs = vec![2];
    let mut d4 = dl(DL_TEID, IpAddr::V4(gnb_v4()));
    d4.qers = vec![qer(Some(7), true, Some((mbr(1_000_000, 10_000), 3, 1)))];
    let mut tb = TableBuilder::default();
    tb.add(Key::Teid(TEID), &[u])
        .add(Key::Ue4(ue_v4(0)), &[d4])
        .add(Key::Ue6(ue_v6(0)), &[dl(DL_TEID, IpAddr::V6(gnb_v6()))]);
    for mode in [Mode::Classified, Mode::Alone, Mode::General] {
        let mut rig = Rig::with_mode(tb.build(), cfg(), mode);
        // Port, frame, colour: the IPv4 downlink rule is metered with no GBR (CIR 0): yellow
        // under its MBR; the others have no meter: green.
        let cases = [
            (
                0u16,
                ul_frame(true, TEID, Some(9), &udp4(ue_v4(0), server_v4(), 53, 64)),
                0,
            ),
            (1, dl_frame(&udp4(server_v4(), ue_v4(0), 80, 100)), 1),
            (1, dl_frame(&udp6(server_v6(), ue_v6(0), 80, 100)), 0),
        ];
        for (port, f, colour) in cases {
            let mut rx = PacketMeta::EMPTY;
            classify(&f, &mut rx).unwrap();
            let (bytes, d, m) = rig.run_meta(&[f], port, 0).pop().unwrap();
            assert!(
                matches!(d.action(), Action::Tx(_)),
                "{mode:?}: {}",
                rig.reason(d)
            );
            let mut want = PacketMeta::EMPTY;
            classify(&bytes, &mut want).unwrap();
            // The classifier's view of the bytes sent.
            assert_eq!(
                (m.l3_off, m.l4_off, m.inner_l3_off, m.inner_l4_off, m.proto),
                (
                    want.l3_off,
                    want.l4_off,
                    want.inner_l3_off,
                    want.inner_l4_off,
                    want.proto
                ),
                "{mode:?} port {port}"
            );
            assert_eq!(
                m.flags & !HAS_QFI,
                want.flags & !HAS_QFI,
                "{mode:?} port {port}"
            );
            assert_eq!(m.flow_hash, want.flow_hash);
            assert_eq!(m.flow_hash, rx.flow_hash, "the flow is the inner packet's");
            if port == 0 {
                assert_eq!(m.direction(), MetaDirection::Uplink);
                assert_eq!((m.teid, m.qfi, m.session), (TEID, 9, 2));
                assert!(!m.has(flags::GPDU));
            } else {
                assert_eq!(m.direction(), MetaDirection::Downlink);
                assert!(m.has(flags::GPDU));
                assert_eq!((m.teid, want.teid), (DL_TEID, DL_TEID));
                assert_eq!(m.session, PacketMeta::NO_SESSION);
            }
            assert_eq!(m.qid, cfg().qfi_map.qid(m.qfi));
            assert_eq!(m.color, colour, "{mode:?} port {port}");
        }
    }
}
