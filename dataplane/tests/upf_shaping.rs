//! The UPF stage with a shaping QER (`qos::pacer`) in front of an egress scheduler, in
//! virtual time: a downlink UDP flow at twice the MBR leaves at the MBR, the excess beyond
//! the queue bound is dropped as `mbr_queue_full`; and `fix_l4_checksums` completes a
//! partial TCP checksum of a packet received on a listed port.

use peregrine_dataplane::buffer::{OwnedBuf, PacketBuf};
use peregrine_dataplane::meta::flags;
use peregrine_dataplane::qos::{ColourMode, PacerConfig, Scheduler, SchedulerConfig, TrTcmConfig};
use peregrine_dataplane::runtime::Action;
use peregrine_dataplane::upf::UpfConfig;
use peregrine_testkit::upf::*;
use peregrine_wire::checksum::{combine, finish, pseudo_v4, sum};
use std::net::IpAddr;

const DL_TEID: u32 = 0x0200_0001;
const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

#[test]
fn stage_shapes_2x_mbr_to_the_mbr() {
    // MBR 1 Mbit/s = 125 000 B/s; offered 250 000 B/s of 1000-byte packets for 4 s.
    let rate = 125_000u64;
    let mut p = dl(DL_TEID, IpAddr::V4(gnb_v4()));
    let meter = TrTcmConfig {
        cir: 0,
        cbs: 0,
        pir: rate,
        pbs: 12_500,
        mode: ColourMode::Blind,
    };
    let mut q = qer(Some(9), true, Some((meter, 3, 1)));
    q.pacer = Some(PacerConfig {
        rate_bytes_per_s: rate,
        burst_bytes: 3_200,
        queue_ns: 100 * MS as u32,
    });
    p.qers = vec![q];
    let mut tb = TableBuilder::default();
    tb.add(Key::Ue4(ue_v4(0)), &[p]);
    let mut rig = Rig::new(tb.build(), cfg());
    let mut sched: Scheduler<OwnedBuf> = Scheduler::new(&SchedulerConfig::default(), 0).unwrap();
    let frame = dl_frame(&udp4(server_v4(), ue_v4(0), 80, 1000 - 28));
    let mut per_second = [0u64; 5];
    let (mut queue_full, mut shaped) = (0u64, 0u64);
    let mut t = 0u64;
    while t < 5 * S {
        if t < 4 * S && t.is_multiple_of(4 * MS) {
            let (bytes, d, meta) = rig
                .run_meta(std::slice::from_ref(&frame), 1, t)
                .pop()
                .unwrap();
            match d.action() {
                Action::Tx(0) => {
                    if meta.flags & flags::SHAPED != 0 {
                        shaped += 1;
                    }
                    let mut b = OwnedBuf::from_slice(&bytes);
                    *b.pkt_meta_mut() = meta;
                    sched.enqueue(b, meta.qid, t).expect("room");
                }
                _ => {
                    assert_eq!(rig.reason(d), "mbr_queue_full");
                    queue_full += 1;
                }
            }
        }
        while let Some(d) = sched.dequeue(t) {
            // Inner bytes: the frame less Ethernet, outer IPv4, UDP, GTP-U with the PDU
            // Session Container.
            per_second[(t / S) as usize] += 1000;
            assert!(d.pkt.len() > 1000);
        }
        t += 100_000;
    }
    assert!(sched.is_empty());
    for (s, &b) in per_second.iter().enumerate().take(4).skip(1) {
        assert!(
            (rate * 95 / 100..=rate * 105 / 100).contains(&b),
            "second {s}: {b} B at MBR {rate}: {per_second:?}"
        );
    }
    // Half of 1000 packets over the MBR; the queue (100 ms = 12.5 packets) holds a few.
    assert!((470..=500).contains(&queue_full), "{queue_full}");
    assert!(shaped > 400, "{shaped}");
    let total: u64 = per_second.iter().sum();
    assert_eq!(total / 1000 + queue_full, 1000);
    // Delayed packets are yellow, refused ones red (no GBR: nothing green after the burst).
    let qs = rig
        .stats
        .qfi(peregrine_dataplane::upf::tables::Direction::Downlink, 9);
    assert_eq!(qs.red, queue_full);
}

#[test]
fn partial_tcp_checksum_completed_on_a_listed_port() {
    let tables = || {
        let mut tb = TableBuilder::default();
        tb.add(Key::Ue4(ue_v4(0)), &[dl(DL_TEID, IpAddr::V4(gnb_v4()))]);
        tb.build()
    };
    // A TCP segment whose checksum field holds only the folded pseudo-header sum.
    let payload = [7u8; 100];
    let tcp_len = 20 + payload.len();
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 6, 0, 0];
    ip.extend_from_slice(&server_v4().octets());
    ip.extend_from_slice(&ue_v4(0).octets());
    let total = (20 + tcp_len) as u16;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let hc = peregrine_wire::checksum::checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&hc.to_be_bytes());
    ip.extend_from_slice(&[
        0, 80, 0xc3, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 1, 0, 0, 0, 0, 0,
    ]);
    ip.extend_from_slice(&payload);
    let ps = pseudo_v4(server_v4().octets(), ue_v4(0).octets(), 6, tcp_len as u16);
    ip[36..38].copy_from_slice(&(!finish(ps)).to_be_bytes());
    let inner_ok = |out: &[u8]| {
        // The inner packet is the last `total` bytes of the G-PDU.
        let inner = &out[out.len() - usize::from(total)..];
        finish(combine(ps, sum(&inner[20..]))) == 0
    };
    for (mask, fixed) in [(0u64, false), (1 << 1, true)] {
        let mut rig = Rig::new(
            tables(),
            UpfConfig {
                fix_l4_checksums: mask,
                ..cfg()
            },
        );
        let (out, d) = rig.one(dl_frame(&ip), 1, 0);
        assert_eq!(d.action(), Action::Tx(0));
        assert_eq!(inner_ok(&out), fixed, "mask {mask:#b}");
        assert_eq!(rig.stats.totals().l4_checksums_fixed, u64::from(fixed));
    }
}
