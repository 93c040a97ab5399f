use super::*;
use crate::classify::classify;
use crate::meta::PacketMeta;
use peregrine_testkit::frames::{eth, ip_packet, tcp_segment, DST_MAC, SRC_MAC};
use std::net::{IpAddr, Ipv4Addr};

const UE: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const SRV: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9));

/// An Ethernet/IP/TCP frame without payload (`tcp_segment`) and its record.
fn tcp(
    src: IpAddr,
    dst: IpAddr,
    ports: (u16, u16),
    seq: u32,
    ack: u32,
    fl: u8,
) -> (Vec<u8>, PacketMeta) {
    let f = eth(
        DST_MAC,
        SRC_MAC,
        &tcp_segment(src, dst, ports, seq, ack, fl),
    );
    let mut m = PacketMeta::EMPTY;
    classify(&f, &mut m).unwrap();
    (f, m)
}

fn spec(m: u32, p: f64) -> StageSpec {
    StageSpec {
        slices: vec![
            SliceSpec {
                name: "https".into(),
                kind: Kind::TcpHandshake,
                vantage: Vantage::N6,
                qfi: vec![],
                ports: vec![443],
                peers: vec![],
                fridges: vec![FridgeSpec { m, p }],
            },
            SliceSpec {
                name: "other".into(),
                kind: Kind::TcpHandshake,
                vantage: Vantage::N6,
                qfi: vec![],
                ports: vec![],
                peers: vec![],
                fridges: vec![FridgeSpec { m, p }],
            },
        ],
        mode: XMode::Insertions,
        window_ns: 1_000_000_000,
        seed: 1,
        uplink_ports: vec![0],
    }
}

fn stage(s: &StageSpec) -> (FridgeStage, Arc<WorkerPub>) {
    let p = Arc::new(WorkerPub::new(s));
    (FridgeStage::new(s, 0, p.clone()).unwrap(), p)
}

#[test]
fn handshakes_land_in_their_slice_and_window() {
    let s = spec(1024, 1.0);
    let (mut st, p) = stage(&s);
    // UE (uplink, rx port 0) opens 10 connections to :443 and 5 to :80; SYN-ACKs 20 ms later
    // come back on port 1 (downlink).
    for i in 0..15u32 {
        let port = if i < 10 { 443 } else { 80 };
        let t0 = u64::from(i) * 1_000_000;
        let (f, m) = tcp(UE, SRV, (40000 + i as u16, port), 7 * i, 0, 0x02);
        st.observe(&f, &m, 0, t0);
        let (f, m) = tcp(SRV, UE, (port, 40000 + i as u16), 9, 7 * i + 1, 0x12);
        st.observe(&f, &m, 1, t0 + 20_000_000);
    }
    assert!(
        p.slices[0].done.read().is_none(),
        "nothing published inside the window"
    );
    // The next window starts: the first is published.
    st.roll(1_500_000_000);
    let a = p.slices[0].done.read().unwrap();
    let b = p.slices[1].done.read().unwrap();
    assert_eq!(a.index, 0);
    assert_eq!(a.hists[0].samples(), 10);
    assert_eq!(b.hists[0].samples(), 5);
    let bin = super::super::hist::bin_of(20_000_000);
    assert_eq!(a.hists[0].n[bin], 10);
    assert_eq!(
        a.hists[0].w[bin], 10.0,
        "p = 1 and nothing evicted: weight 1 each"
    );
    assert_eq!(a.stats[0], 10, "requests");
    assert_eq!(a.stats[5], 10, "matched");
}

#[test]
fn responses_without_requests_and_syn_floods_stay_bounded_and_counted() {
    let s = spec(256, 0.5);
    let (mut st, p) = stage(&s);
    // 100k SYNs from random ports: state stays 256 slots per slice.
    for i in 0..100_000u32 {
        let (f, m) = tcp(UE, SRV, ((i % 60000) as u16 + 1024, 443), i, 0, 0x02);
        st.observe(&f, &m, 0, u64::from(i) * 1_000);
    }
    // 1000 SYN-ACKs nobody asked for.
    for i in 0..1000u32 {
        let (f, m) = tcp(SRV, UE, (443, 9), i, 12345 + i, 0x12);
        st.observe(&f, &m, 1, 200_000_000);
    }
    assert!(st.slices[0].set.occupied() <= 256);
    let stats = st.slices[0].set.stats();
    assert_eq!(stats.requests, 100_000);
    assert!(stats.overwrote > 40_000, "{stats:?}");
    assert_eq!(stats.responses, 1000);
    assert_eq!(stats.matched, 0);
    assert_eq!(stats.unmatched + stats.not_sampled, 1000);
    // Truncated and odd packets are counted by reason, not matched.
    let (mut f, _) = tcp(UE, SRV, (1, 443), 0, 0, 0x02);
    f.truncate(40);
    let mut m = PacketMeta::EMPTY;
    let _ = classify(&f, &mut m);
    st.observe(&f, &m, 0, 300_000_000);
    st.observe(&[0u8; 20], &PacketMeta::EMPTY, 0, 300_000_000);
    Stage::<crate::OwnedBuf>::idle(&mut st);
    assert_eq!(
        p.skips.counts[Skip::TruncatedTcp as usize].load(Ordering::Relaxed),
        1
    );
    assert_eq!(
        p.skips.counts[Skip::Unclassified as usize].load(Ordering::Relaxed),
        1
    );
    let w = p.slices[0].total.read().unwrap();
    assert_eq!(w.stats[0], 100_000);
    assert!(
        p.slices[0].done.read().is_none(),
        "the window has not ended"
    );
}

#[test]
fn raw_samples_carry_delay_x_fridge_and_a_full_ring_counts_drops() {
    let s = spec(1024, 1.0);
    let p = Arc::new(WorkerPub::new(&s));
    let (tx, mut rx) = raw_ring(4);
    let mut st = FridgeStage::new(&s, 0, p.clone()).unwrap().with_raw(tx);
    // Six handshakes: three to :80 (slice 1) first, then three to :443 (slice 0); SYN-ACKs
    // after all six SYNs, 5 ms + i us later.
    for i in 0..6u32 {
        let port = if i < 3 { 80 } else { 443 };
        let (f, m) = tcp(UE, SRV, (40000 + i as u16, port), 100 * i, 0, 0x02);
        st.observe(&f, &m, 0, u64::from(i));
    }
    for i in 0..6u32 {
        let port = if i < 3 { 80 } else { 443 };
        let (f, m) = tcp(SRV, UE, (port, 40000 + i as u16), 9, 100 * i + 1, 0x12);
        st.observe(&f, &m, 1, 5_000_000 + u64::from(i) * 1000);
    }
    let got: Vec<RawSample> = std::iter::from_fn(|| rx.pop().ok()).collect();
    assert_eq!(got.len(), 4, "the ring holds 4; 2 dropped");
    // x counts the insertions into the same fridge after the request (p = 1, insertions):
    // slice 1's first request saw its two siblings inserted after it.
    let (a, w) = (got[0], (1.0f64 - 1.0 / 1024.0).powi(-2));
    assert_eq!(
        (a.at_ns, a.delay_ns, a.x, a.slice, a.fridge),
        (5_000_000, 5_000_000, 2, 1, 0)
    );
    assert!((a.weight - w).abs() < 1e-9 * w, "{} vs {w}", a.weight);
    assert_eq!((got[1].slice, got[1].x, got[1].delay_ns), (1, 1, 5_000_999));
    assert_eq!((got[2].slice, got[2].x), (1, 0));
    assert_eq!((got[3].slice, got[3].x, got[3].delay_ns), (0, 2, 5_002_997));
    Stage::<crate::OwnedBuf>::idle(&mut st);
    assert_eq!(p.raw_dropped.load(Ordering::Relaxed), 2);
}

/// A GTP-U Echo Request (`ty` 1) or Response (2) with sequence number `seq`, outer IPv4.
fn gtp_echo(src: IpAddr, dst: IpAddr, ty: u8, seq: u16) -> (Vec<u8>, PacketMeta) {
    let mut ip = ip_packet(src, dst, 17, (2152, 2152), 12, 64);
    ip[26..28].copy_from_slice(&[0, 0]); // no UDP checksum (IPv4)
    let s = seq.to_be_bytes();
    ip[28..40].copy_from_slice(&[0x32, ty, 0, 4, 0, 0, 0, 0, s[0], s[1], 0, 0]);
    let f = eth(DST_MAC, SRC_MAC, &ip);
    let mut m = PacketMeta::EMPTY;
    classify(&f, &mut m).unwrap();
    (f, m)
}

#[test]
fn gtp_echo_slices_keyed_by_gnb_take_only_their_peer() {
    let gnb = |i: u8| IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10 + i));
    let upf = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    let slice = |name: &str, peers: Vec<IpAddr>| SliceSpec {
        name: name.into(),
        kind: Kind::GtpEcho,
        vantage: Vantage::N3,
        qfi: vec![],
        ports: vec![],
        peers,
        fridges: vec![FridgeSpec { m: 64, p: 1.0 }],
    };
    let s = StageSpec {
        slices: vec![
            slice("gnb-a", vec![gnb(0)]),
            slice("gnb-b", vec![gnb(1)]),
            slice("other", vec![]),
        ],
        mode: XMode::Insertions,
        window_ns: 1_000_000_000,
        seed: 1,
        uplink_ports: vec![0],
    };
    let (mut st, p) = stage(&s);
    // The UPF probes three gNBs (requests leave downlink, responses come back on port 0):
    // gNB a answers in 2 ms, b in 7 ms, c in 20 ms.
    for (i, delay) in [(0u8, 2_000_000u64), (1, 7_000_000), (2, 20_000_000)] {
        for seq in 0..4u16 {
            let t = u64::from(seq) * 100_000_000;
            let (f, m) = gtp_echo(upf, gnb(i), 1, seq);
            st.observe(&f, &m, 1, t);
            let (f, m) = gtp_echo(gnb(i), upf, 2, seq);
            st.observe(&f, &m, 0, t + delay);
        }
    }
    st.roll(1_500_000_000);
    let bin = super::super::hist::bin_of;
    for (k, delay) in [(0, 2_000_000), (1, 7_000_000), (2, 20_000_000)] {
        let w = p.slices[k].done.read().unwrap();
        assert_eq!(w.hists[0].samples(), 4, "slice {k}");
        assert_eq!(w.hists[0].n[bin(delay)], 4, "slice {k}");
    }
}

/// The static per-direction-byte tables answer what `uplink` does, for every direction byte
/// and for rx ports that are uplink ports, that are not, and past the configured ones; the
/// folded routes give each kind and request flag its vantage's route (a scan at N6, a scan
/// at N3, a direct route, none).
#[test]
fn dir_up_tables_and_routes_follow_the_direction_rule() {
    for n3 in [false, true] {
        let mut s = spec(64, 1.0);
        s.uplink_ports = vec![0, 2];
        if n3 {
            // The filtered slice at N3: N3 scans, N6 goes straight to "other".
            s.slices[0].vantage = Vantage::N3;
        }
        let (st, _) = stage(&s);
        for rx in 0..5u16 {
            let up = st.rx_up(rx);
            for b in 0..=255u8 {
                let m = PacketMeta {
                    dir: b,
                    ..PacketMeta::EMPTY
                };
                let uplink = st.uplink(&m, rx);
                assert_eq!(
                    DIR_UP[usize::from(up)][usize::from(b)],
                    uplink,
                    "rx {rx} dir {b}"
                );
                for kind in Kind::ALL {
                    for request in [false, true] {
                        let vantage = if request == uplink {
                            Vantage::N6
                        } else {
                            Vantage::N3
                        };
                        let want = match (kind, vantage, n3) {
                            (Kind::TcpHandshake, Vantage::N6, false) => route::SCAN_N6,
                            (Kind::TcpHandshake, Vantage::N3, true) => route::SCAN_N3,
                            (Kind::TcpHandshake, Vantage::N6, true) => 1,
                            _ => route::NONE,
                        };
                        let got = st.routes[usize::from(up)][kind as usize][usize::from(request)]
                            [usize::from(b)];
                        assert_eq!(got, want, "rx {rx} dir {b} {kind:?} request {request}");
                    }
                }
            }
        }
    }
}

/// A DNS datagram (`qr`: a response) of `len` DNS bytes with ID `id`.
fn dns_ip(src: IpAddr, dst: IpAddr, ports: (u16, u16), id: u16, qr: bool, len: usize) -> Vec<u8> {
    let mut body = vec![0u8; len];
    if len >= 3 {
        body[..2].copy_from_slice(&id.to_be_bytes());
        body[2] = if qr { 0x81 } else { 0x01 };
    }
    peregrine_testkit::frames::ip_udp(src, dst, ports.0, ports.1, &body)
}

/// Records as the UPF leaves them: routed uplink (the user packet behind Ethernet) and
/// encapsulated downlink (behind IPv4, UDP and GTP-U with a PDU Session Container), with the
/// UPF's direction set (`fast`) or not (the direction then from the rx port).
fn upf_record(ip: &[u8], up: bool, fast: bool) -> (Vec<u8>, PacketMeta) {
    use peregrine_testkit::frames::{gpdu, ip_udp};
    let f = if up {
        eth(DST_MAC, SRC_MAC, ip)
    } else {
        let gnb = IpAddr::V4(Ipv4Addr::new(172, 16, 0, 2));
        let upf = IpAddr::V4(Ipv4Addr::new(172, 16, 0, 1));
        eth(
            DST_MAC,
            SRC_MAC,
            &ip_udp(upf, gnb, 2152, 2152, &gpdu(7, Some(9), ip)),
        )
    };
    let mut m = PacketMeta::EMPTY;
    let _ = classify(&f, &mut m);
    if fast {
        m.dir = if up {
            Direction::Uplink
        } else {
            Direction::Downlink
        } as u8;
    }
    (f, m)
}

/// The usual uplink and downlink records (one compare of the record, the DNS header at fixed
/// offsets, the route of a known direction) give what the general path gives the same
/// packets: the same samples in the same slices (N6 and N3), the same counts and skips.
#[test]
fn usual_records_sample_as_the_general_path() {
    let fridges = vec![FridgeSpec { m: 64, p: 0.5 }];
    let slice = |name: &str, vantage| SliceSpec {
        name: name.into(),
        kind: Kind::Dns,
        vantage,
        qfi: vec![],
        ports: vec![],
        peers: vec![],
        fridges: fridges.clone(),
    };
    let s = StageSpec {
        slices: vec![slice("n6", Vantage::N6), slice("n3", Vantage::N3)],
        mode: XMode::Insertions,
        window_ns: 1_000_000_000,
        seed: 3,
        uplink_ports: vec![0],
    };
    let run = |fast: bool| {
        let (mut st, p) = stage(&s);
        let mut hits = 0;
        for i in 0..400u32 {
            let t = u64::from(i) * 1_000_000;
            let port = 40000 + (i % 50) as u16;
            let id = (i * 7) as u16;
            // N6: query up, response down; N3: query down, response up; every tenth DNS
            // header cut short, every seventh datagram to another port.
            let len = if i % 10 == 3 { 5 } else { 30 };
            let dport = if i % 7 == 2 { 5353 } else { 53 };
            let steps = [
                (dns_ip(UE, SRV, (port, dport), id, false, len), true, 0),
                (dns_ip(SRV, UE, (dport, port), id, true, len), false, 3_000),
                (dns_ip(SRV, UE, (port, dport), id, false, len), false, 5_000),
                (dns_ip(UE, SRV, (dport, port), id, true, len), true, 9_000),
            ];
            for (ip, up, dt) in steps {
                let (f, m) = upf_record(&ip, up, fast);
                hits += usize::from(
                    record_word(&m) == PLAIN_UPLINK_UDP || record_word(&m) == GTPU_DOWNLINK_UDP,
                );
                st.observe(&f, &m, if up { 0 } else { 1 }, t + dt);
            }
        }
        Stage::<crate::OwnedBuf>::idle(&mut st);
        let out: Vec<_> = (0..2)
            .map(|k| {
                (
                    st.slices[k].set.stats(),
                    p.slices[k].total.read().unwrap().hists,
                )
            })
            .collect();
        let skips: Vec<u64> = p
            .skips
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        (out, skips, p.skips.unsliced.load(Ordering::Relaxed), hits)
    };
    let (fast, general) = (run(true), run(false));
    assert_eq!(fast.3, 1600, "every record has one of the usual states");
    assert_eq!(general.3, 0, "no record has one of the usual states");
    assert_eq!(fast.0, general.0);
    assert_eq!((&fast.1, fast.2), (&general.1, general.2));
    // Both vantages sampled, and both skip reasons met.
    for (stats, hists) in &fast.0 {
        assert!(stats.matched > 50, "{stats:?}");
        assert_eq!(hists[0].samples(), stats.matched);
    }
    assert!(fast.1[Skip::TruncatedDns as usize] > 0 && fast.1[Skip::Other as usize] > 0);
}

/// Bursts of buffers through `process` (the usual records' prefix read by `PacketBuf::head`,
/// the bursts of sent packets walked without a test per packet) give what `observe` gives
/// the same packets one by one on the general path (the direction left to the rx port),
/// skipping those neither sent nor still `Continue`: uniform
/// and per-packet dispositions, drops among them, frames cut short of their record's
/// headers, usual and other records, with DNS alone and with GTP-U echo among the kinds.
#[test]
fn bursts_of_buffers_sample_as_observe() {
    use crate::runtime::{Context, DropReason};
    use crate::OwnedBuf;
    let fridges = vec![FridgeSpec { m: 64, p: 0.5 }];
    let slice = |name: &str, kind, vantage| SliceSpec {
        name: name.into(),
        kind,
        vantage,
        qfi: vec![],
        ports: vec![],
        peers: vec![],
        fridges: fridges.clone(),
    };
    let dns_only = vec![
        slice("n6", Kind::Dns, Vantage::N6),
        slice("n3", Kind::Dns, Vantage::N3),
    ];
    let mut with_echo = dns_only.clone();
    with_echo.push(slice("echo", Kind::GtpEcho, Vantage::N6));
    // Packets in order: (frame, record, rx port).
    let mut pkts = Vec::new();
    for i in 0..300u32 {
        let port = 40000 + (i % 40) as u16;
        let id = (i * 13) as u16;
        let len = if i % 11 == 4 { 5 } else { 30 };
        let steps = [
            (dns_ip(UE, SRV, (port, 53), id, false, len), true),
            (dns_ip(SRV, UE, (53, port), id, true, len), false),
            (dns_ip(SRV, UE, (port, 53), id, false, len), false),
            (dns_ip(UE, SRV, (53, port), id, true, len), true),
        ];
        for (k, (ip, up)) in steps.into_iter().enumerate() {
            let (mut f, m) = upf_record(&ip, up, i % 5 != 1);
            // Some frames cut short of the headers their record names (the record kept).
            if (i as usize + k).is_multiple_of(9) {
                let cut = if up { [20, 40, 53] } else { [60, 90, 97] }[k % 3];
                f.truncate(cut);
            }
            pkts.push((f, m, if up { 0 } else { 1 }));
        }
    }
    for slices in [dns_only, with_echo] {
        let s = StageSpec {
            slices,
            mode: XMode::Insertions,
            window_ns: 50_000_000,
            seed: 5,
            uplink_ports: vec![0],
        };
        let (mut by_burst, pb) = stage(&s);
        let (mut by_packet, pp) = stage(&s);
        let mut batch: Batch<OwnedBuf> = Batch::new();
        let (mut at, mut b, mut seen) = (0, 0usize, 0usize);
        while at < pkts.len() {
            // Bursts of 1..=32 packets from one rx port.
            let rx = pkts[at].2;
            let mut n = 0;
            while at + n < pkts.len() && n < 1 + (b * 7) % 32 && pkts[at + n].2 == rx {
                n += 1;
            }
            batch.rx_port = rx;
            for (f, m, _) in &pkts[at..at + n] {
                let mut buf = OwnedBuf::from_slice(f);
                *buf.pkt_meta_mut() = *m;
                let _ = batch.push(buf, Disposition::CONTINUE);
            }
            let drop = Disposition::drop_as(DropReason(3));
            match b % 5 {
                0 => batch.reset_dispositions(),
                1 => {
                    batch.reset_dispositions();
                    batch.set_active(Disposition::tx(1));
                }
                2 => (0..n).for_each(|i| batch.set_disposition(i, Disposition::tx(i as u16 % 2))),
                3 => (0..n).for_each(|i| {
                    let d = if i % 3 == 1 { drop } else { Disposition::tx(1) };
                    batch.set_disposition(i, d)
                }),
                _ => {
                    batch.reset_dispositions();
                    batch.set_active(drop);
                }
            }
            let now = 1_000 + b as u64 * 3_000_000;
            let sent: Vec<bool> = (0..n)
                .map(|i| batch.disposition(i).is_continue_or_tx())
                .collect();
            Stage::<OwnedBuf>::process(&mut by_burst, &mut batch, &Context::fixed(now, 0));
            // As `process` does first (windows end on traffic).
            by_packet.roll(now);
            for ((f, m, rx), sent) in pkts[at..at + n].iter().zip(sent) {
                if sent {
                    // The general path: no usual record without the UPF's direction (the
                    // rx port gives the same one).
                    let general = PacketMeta {
                        dir: Direction::Unknown as u8,
                        ..*m
                    };
                    by_packet.observe(f, &general, *rx, now);
                    seen += 1;
                }
            }
            assert!(batch.drain().count() == n);
            at += n;
            b += 1;
        }
        assert!(seen > pkts.len() / 2 && seen < pkts.len(), "{seen}");
        for st in [&mut by_burst, &mut by_packet] {
            Stage::<OwnedBuf>::idle(st);
        }
        let matched: u64 = by_packet.slices.iter().map(|s| s.set.stats().matched).sum();
        assert!(matched > 100, "{matched}");
        for k in 0..s.slices.len() {
            assert_eq!(
                by_burst.slices[k].set.stats(),
                by_packet.slices[k].set.stats()
            );
            let (a, c) = (pb.slices[k].total.read(), pp.slices[k].total.read());
            assert_eq!(a.map(|w| w.hists), c.map(|w| w.hists), "slice {k}");
            let (a, c) = (pb.slices[k].done.read(), pp.slices[k].done.read());
            assert_eq!(a.map(|w| (w.index, w.hists)), c.map(|w| (w.index, w.hists)));
        }
        let skips = |p: &WorkerPub| -> Vec<u64> {
            let mut v: Vec<u64> = p
                .skips
                .counts
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect();
            v.push(p.skips.unsliced.load(Ordering::Relaxed));
            v
        };
        assert_eq!(skips(&pb), skips(&pp));
        assert!(skips(&pp)[Skip::TruncatedDns as usize] > 0);
    }
}
