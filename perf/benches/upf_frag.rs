//! Cost of the UPF's fragment paths (issue 14 items 2 and 3), each beside the packet it
//! replaces so the difference is the price of the fragments:
//!
//! * `dl_fragment_1500B`: 32 downlink 1500-byte IPv4 packets without DF, MTU 1500: each is
//!   cut into 2 pieces before encapsulation (64 G-PDUs out); `dl_encap_1400B` the same
//!   number of packets that fit.
//! * `ul_reassemble_2frags`: 16 uplink G-PDUs of 1500-byte inner packets, each arriving as
//!   2 outer IPv4 fragments (32 frames in), reassembled, decapsulated and routed; `ul_whole`
//!   the same 16 G-PDUs unfragmented.
//! * `reasm_v4` / `reasm_v6`: the I/O-free reassembler alone, two fragments in and the
//!   datagram written out.
//!
//! Each iteration refills the batch from pristine frames (a memcpy per frame, included).
//! Run with `cargo bench -p peregrine-perf --bench upf_frag`; results in
//! `perf/results/upf-bench.md`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use peregrine_dataplane::runtime::{Action, Context, Disposition};
use peregrine_dataplane::upf::reasm::{Outcome, ReasmConfig, Reassembler};
use peregrine_dataplane::upf::UpfConfig;
use peregrine_dataplane::OwnedBuf;
use peregrine_testkit::upf::*;
use peregrine_wire::ipv4;
use std::hint::black_box;
use std::net::IpAddr;
use std::time::Duration;

const TEID: u32 = 0x1000_0000;

fn rig() -> Rig {
    let mut tb = TableBuilder::default();
    tb.add(Key::Teid(TEID), &[ul(Some(9))])
        .add(Key::Ue4(ue_v4(0)), &[dl(0x2000_0000, IpAddr::V4(gnb_v4()))]);
    Rig::new(tb.build(), UpfConfig { ..cfg() })
}

fn no_df(mut v: Vec<u8>) -> Vec<u8> {
    let mut ip = ipv4::Packet::new_unchecked(&mut v[..]);
    ip.set_dont_frag(false);
    ip.fill_checksum();
    v
}

/// Cut frame `f`'s outer IPv4 packet in two (the first carrying `first` payload bytes).
fn two_fragments(f: &[u8], first: usize, ident: u16) -> [Vec<u8>; 2] {
    let body = &f[34..];
    let piece = |off: usize, data: &[u8], more: bool| {
        let mut v = f[..34].to_vec();
        v.extend_from_slice(data);
        let mut ip = ipv4::Packet::new_unchecked(&mut v[14..]);
        ip.set_total_len((20 + data.len()) as u16);
        ip.set_ident(ident);
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

/// Run `frames` on `port` through the rig, with the buffers of `pool`; the worker's
/// spare top-up is done from the pool too. Returns the packets sent.
fn step(rig: &mut Rig, pool: &mut Vec<OwnedBuf>, frames: &[Vec<u8>], port: u16, now: u64) -> u32 {
    let cx = Context::fixed(now, 0);
    rig.batch.rx_port = port;
    for f in frames {
        let mut b = pool.pop().expect("pool");
        b.set_data(f).unwrap();
        let _ = rig.batch.push(b, Disposition::CONTINUE);
    }
    while rig.batch.spares_missing() > 0 {
        let mut b = pool.pop().expect("pool");
        b.reset();
        let _ = rig.batch.give_spare(b);
    }
    // As the worker presents a received batch (`Worker::process`).
    rig.batch.reset_dispositions();
    rig.pipe.run(&mut rig.batch, &cx);
    let mut sent = 0;
    for (b, d) in rig.batch.drain() {
        sent += matches!(d.action(), Action::Tx(_)) as u32;
        pool.push(b);
    }
    sent
}

fn bench_paths(c: &mut Criterion) {
    let mut g = c.benchmark_group("upf_frag");
    let inner_ul = udp4(ue_v4(0), server_v4(), 53, 1500 - 28);
    let whole = ul_frame(false, TEID, Some(9), &inner_ul);
    let cases: [(&str, u16, Vec<Vec<u8>>, u32); 4] = [
        (
            "dl_fragment_1500B",
            1,
            (0..32)
                .map(|_| dl_frame(&no_df(udp4(server_v4(), ue_v4(0), 80, 1500 - 28))))
                .collect(),
            64,
        ),
        (
            "dl_encap_1400B",
            1,
            (0..32)
                .map(|_| dl_frame(&no_df(udp4(server_v4(), ue_v4(0), 80, 1400 - 28))))
                .collect(),
            32,
        ),
        (
            "ul_reassemble_2frags",
            0,
            (0..16u16)
                .flat_map(|k| two_fragments(&whole, 1480, k))
                .collect(),
            16,
        ),
        ("ul_whole", 0, (0..16).map(|_| whole.clone()).collect(), 16),
    ];
    for (name, port, frames, out) in cases {
        let mut rig = rig();
        let mut pool: Vec<OwnedBuf> = (0..160).map(|_| OwnedBuf::new()).collect();
        let mut now = 0;
        assert_eq!(step(&mut rig, &mut pool, &frames, port, now), out, "{name}");
        g.throughput(Throughput::Elements(u64::from(out)));
        g.bench_function(name, |b| {
            b.iter(|| {
                now += 1000;
                black_box(step(&mut rig, &mut pool, &frames, port, now))
            })
        });
    }
    g.finish();
}

fn bench_reassembler(c: &mut Criterion) {
    let mut g = c.benchmark_group("reasm");
    g.throughput(Throughput::Elements(1));
    let inner = udp4(ue_v4(0), server_v4(), 53, 1500 - 28);
    let v4 = two_fragments(&ul_frame(false, TEID, Some(9), &inner), 1480, 7);
    let v4: Vec<Vec<u8>> = v4.iter().map(|f| f[14..].to_vec()).collect();
    // IPv6: the fixed header, a Fragment header, then the UDP datagram's pieces.
    let f6 = ul_frame(true, TEID, Some(9), &inner);
    let body = &f6[54..];
    let v6: Vec<Vec<u8>> = [(0usize, 1232usize, true), (1232, body.len() - 1232, false)]
        .iter()
        .map(|&(off, len, more)| {
            let mut v = f6[14..54].to_vec();
            v[6] = 44;
            v[4..6].copy_from_slice(&((8 + len) as u16).to_be_bytes());
            v.extend_from_slice(&[17, 0]);
            v.extend_from_slice(&((off as u16) | u16::from(more)).to_be_bytes());
            v.extend_from_slice(&9u32.to_be_bytes());
            v.extend_from_slice(&body[off..off + len]);
            v
        })
        .collect();
    for (name, frags) in [("reasm_v4", v4), ("reasm_v6", v6)] {
        let mut r = Reassembler::new(ReasmConfig::default());
        let mut out = vec![0u8; 4096];
        let mut now = 0u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                now += 1;
                let _ = r.insert(&frags[0], now);
                match r.insert(&frags[1], now) {
                    Ok(Outcome::Complete { slot, len }) => {
                        r.finish(slot, &mut out[..len]);
                        black_box(len)
                    }
                    o => panic!("{o:?}"),
                }
            })
        });
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(20)
}

criterion_group! {
    name = upf_frag;
    config = config();
    targets = bench_paths, bench_reassembler
}
criterion_main!(upf_frag);
