//! Forwarding through the `Upf` stage does not allocate: a counting global allocator
//! watches 20 000 batches of uplink decap, downlink encap (IPv4 and IPv6 outer, metered),
//! echo replies and Error Indications, and of fragmenting (downlink IPv4 without DF) and
//! reassembling (outer fragments to N3); the count must not move.

mod common;

use peregrine_dataplane::qos::{ColourMode, TrTcmConfig};
use peregrine_dataplane::runtime::{Action, Context, Disposition};
use peregrine_dataplane::OwnedBuf;
use peregrine_testkit::upf::*;
use peregrine_wire::gtpu_msg;
use std::net::IpAddr;

#[test]
fn upf_forwarding_allocates_nothing() {
    let meter = TrTcmConfig {
        cir: 0,
        cbs: 0,
        pir: 1 << 40,
        pbs: 1 << 20,
        mode: ColourMode::Blind,
    };
    let mut u = ul(Some(9));
    u.qers = vec![qer(None, true, Some((meter, 1, 1)))];
    u.urrs = vec![1];
    let mut d4 = dl(0x22, IpAddr::V4(gnb_v4()));
    d4.qers = vec![qer(Some(9), true, Some((meter, 2, 1)))];
    let mut tb = TableBuilder::default();
    tb.add(Key::Teid(0x11), &[u])
        .add(Key::Ue4(ue_v4(0)), &[d4])
        .add(Key::Ue6(ue_v6(0)), &[dl(0x33, IpAddr::V6(gnb_v6()))]);
    let mut rig = Rig::new(tb.build(), UpfConfigExt::with_pps(1_000_000_000));
    let mut echo = vec![0u8; 12];
    gtpu_msg::Repr::EchoRequest { seq: 1 }
        .emit(&mut echo)
        .unwrap();
    let frames = [
        (
            0u16,
            ul_frame(false, 0x11, Some(9), &udp4(ue_v4(0), server_v4(), 53, 64)),
        ),
        (
            0,
            ul_frame(true, 0x11, Some(9), &udp6(ue_v6(0), server_v6(), 53, 64)),
        ),
        (
            0,
            ul_frame(false, 0x99, Some(9), &udp4(ue_v4(0), server_v4(), 53, 64)),
        ),
        (
            0,
            udp_frame(IpAddr::V4(gnb_v4()), IpAddr::V4(upf_v4()), 9, 2152, &echo),
        ),
        (1, dl_frame(&udp4(server_v4(), ue_v4(0), 80, 512))),
        (1, dl_frame(&udp6(server_v6(), ue_v6(0), 80, 512))),
    ];
    // One reusable buffer per frame; the batch is refilled in place.
    let mut bufs: Vec<Option<OwnedBuf>> = frames
        .iter()
        .map(|(_, f)| Some(OwnedBuf::from_slice(f)))
        .collect();
    let mut run = |bufs: &mut Vec<Option<OwnedBuf>>, i: u64| {
        let mut ok = 0;
        for (k, (port, f)) in frames.iter().enumerate() {
            let mut b = bufs[k].take().unwrap();
            b.set_data(f).unwrap();
            rig.batch.rx_port = *port;
            let _ = rig.batch.push(b, Disposition::CONTINUE);
            let cx = Context::fixed(i * 1_000, 0);
            rig.pipe.run(&mut rig.batch, &cx);
            let (b, d) = rig.batch.drain().next().unwrap();
            if matches!(d.action(), Action::Tx(_)) {
                ok += 1;
            }
            bufs[k] = Some(b);
        }
        ok
    };
    assert_eq!(run(&mut bufs, 0), frames.len(), "every case is sent");
    // This thread only: the harness may allocate on its own threads meanwhile.
    let before = peregrine_testkit::alloc::thread_allocs();
    let mut sent = 0;
    for i in 1..20_000 {
        sent += run(&mut bufs, i);
    }
    let after = peregrine_testkit::alloc::thread_allocs();
    assert_eq!(sent, 19_999 * frames.len());
    assert_eq!(after - before, 0, "allocations on the UPF path");
}

/// The outer IPv4 packet of `f` cut in two fragments (ident `id`), Ethernet kept.
fn two_fragments(f: &[u8], first: usize, id: u16) -> [Vec<u8>; 2] {
    let body = &f[34..];
    let piece = |off: usize, data: &[u8], more: bool| {
        let mut v = f[..34].to_vec();
        v.extend_from_slice(data);
        let mut ip = peregrine_wire::ipv4::Packet::new_unchecked(&mut v[14..]);
        ip.set_total_len((20 + data.len()) as u16);
        ip.set_ident(id);
        ip.set_dont_frag(false);
        ip.set_frag_offset(off as u16);
        ip.set_more_frags(more);
        ip.fill_checksum();
        v
    };
    [
        piece(0, &body[..first], true),
        piece(first, &body[first..], false),
    ]
}

#[test]
fn fragmenting_and_reassembling_allocate_nothing() {
    let mut tb = TableBuilder::default();
    tb.add(Key::Teid(0x11), &[ul(Some(9))])
        .add(Key::Ue4(ue_v4(0)), &[dl(0x22, IpAddr::V4(gnb_v4()))]);
    let mut rig = Rig::new(tb.build(), cfg());
    let mut big = udp4(server_v4(), ue_v4(0), 80, 1500 - 28);
    big[6] = 0;
    {
        let mut ip = peregrine_wire::ipv4::Packet::new_unchecked(&mut big[..]);
        ip.fill_checksum();
    }
    let ul = ul_frame(
        false,
        0x11,
        Some(9),
        &udp4(ue_v4(0), server_v4(), 53, 1500 - 28),
    );
    let [f0, f1] = two_fragments(&ul, 1480, 5);
    let frames = [(1u16, dl_frame(&big)), (0, f1), (0, f0)];
    let mut pool: Vec<OwnedBuf> = (0..128).map(|_| OwnedBuf::new()).collect();
    let mut run = |pool: &mut Vec<OwnedBuf>, i: u64| {
        let mut sent = 0;
        for (port, f) in &frames {
            let mut b = pool.pop().unwrap();
            b.set_data(f).unwrap();
            while rig.batch.spares_missing() > 0 {
                let mut s = pool.pop().unwrap();
                s.reset();
                let _ = rig.batch.give_spare(s);
            }
            rig.batch.rx_port = *port;
            let _ = rig.batch.push(b, Disposition::CONTINUE);
            rig.pipe.run(&mut rig.batch, &Context::fixed(i * 1_000, 0));
            for (b, d) in rig.batch.drain() {
                sent += usize::from(matches!(d.action(), Action::Tx(_)));
                pool.push(b);
            }
        }
        sent
    };
    // 2 pieces down, the reassembled G-PDU up (its first fragment is held).
    assert_eq!(run(&mut pool, 0), 3);
    let before = peregrine_testkit::alloc::thread_allocs();
    let mut sent = 0;
    for i in 1..5_000 {
        sent += run(&mut pool, i);
    }
    let after = peregrine_testkit::alloc::thread_allocs();
    assert_eq!(sent, 4_999 * 3);
    assert_eq!(after - before, 0, "allocations on the fragment paths");
    let t = rig.stats.totals();
    assert_eq!(
        (t.packets_fragmented, t.datagrams_reassembled),
        (5_000, 5_000)
    );
}
