//! Per-packet costs of the platform's packet metadata and worker hand-off, over bursts of 32
//! `OwnedBuf`s (issue 8 items 3 and 5):
//!
//! * `sched_roundtrip`: enqueue 32 packets on an egress scheduler and dequeue them (the
//!   scheduler stamps `enqueue_ns` and `sojourn_ns` in each packet's `PacketMeta`);
//! * `meta_fill_sched_read`: the same, plus what stages and a tap do with the record: reset
//!   and fill it per packet (as the classifier and the UPF do) before queueing, and read
//!   five fields per packet after dequeue (as a post-dequeue tap does). The metadata's cost
//!   is this line minus `sched_roundtrip`;
//! * `handoff_push_pop`: stage 32 packets for another worker, push them to its SPSC ring in
//!   one chunk, pop them back as one run (both ends on one thread: the instruction cost, not
//!   the cross-core cache-line transfer a real hand-off also pays).
//!
//! Run with `cargo bench -p peregrine-perf --bench platform`; results in
//! `results/platform.md`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use peregrine_dataplane::io::Burst;
use peregrine_dataplane::meta::{flags, Direction, PacketMeta};
use peregrine_dataplane::qos::{Scheduler, SchedulerConfig};
use peregrine_dataplane::runtime::handoff::{mesh, Item};
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use std::hint::black_box;

const BATCH: usize = 32;

fn burst() -> Burst<OwnedBuf> {
    (0..BATCH)
        .map(|_| OwnedBuf::from_slice(&[0u8; 128]))
        .collect()
}

fn fill(p: &mut OwnedBuf, i: u32) {
    let m = p.pkt_meta_mut();
    *m = PacketMeta::EMPTY;
    m.flags = flags::CLASSIFIED | flags::GPDU | flags::L4;
    m.l3_off = 14;
    m.l4_off = 34;
    m.inner_l3_off = 50;
    m.inner_l4_off = 70;
    m.flow_hash = i.wrapping_mul(0x9e37_79b9);
    m.proto = 6;
    m.teid = i;
    m.session = i & 1023;
    m.dir = Direction::Uplink as u8;
    m.qfi = 9;
    m.qid = (i & 7) as u8;
    m.color = (i % 3) as u8;
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("platform");
    g.throughput(Throughput::Elements(BATCH as u64));

    let mut sched: Scheduler<OwnedBuf> = Scheduler::new(&SchedulerConfig::default(), 0).unwrap();
    let mut pkts = burst();
    let mut now = 0u64;
    g.bench_function("sched_roundtrip", |b| {
        b.iter(|| {
            now += 1_000;
            for (i, p) in pkts.drain(..).enumerate() {
                let _ = sched.enqueue(p, (i & 7) as u8, now);
            }
            sched.dequeue_burst(now + 500, BATCH, |d| pkts.push(d.pkt));
            black_box(&pkts);
        })
    });

    g.bench_function("meta_fill_sched_read", |b| {
        let mut k = 0u32;
        b.iter(|| {
            now += 1_000;
            for p in pkts.iter_mut() {
                k = k.wrapping_add(1);
                fill(p, k);
            }
            for p in pkts.drain(..) {
                let q = p.pkt_meta().qid;
                let _ = sched.enqueue(p, q, now);
            }
            sched.dequeue_burst(now + 500, BATCH, |d| pkts.push(d.pkt));
            let mut acc = 0u64;
            for p in pkts.iter() {
                let m = p.pkt_meta();
                acc = acc
                    .wrapping_add(u64::from(m.sojourn_ns))
                    .wrapping_add(u64::from(m.flow_hash))
                    .wrapping_add(u64::from(m.teid))
                    .wrapping_add(u64::from(m.qfi))
                    .wrapping_add(u64::from(m.color));
            }
            black_box(acc);
        })
    });

    let mut rings = mesh::<OwnedBuf>(2, 1024);
    let (mut out, _) = rings.remove(0);
    let (_, mut inb) = rings.remove(0);
    let mut got: Burst<OwnedBuf> = Burst::new();
    g.bench_function("handoff_push_pop", |b| {
        b.iter(|| {
            for pkt in pkts.drain(..) {
                let item = Item {
                    pkt,
                    rx_port: 0,
                    resume_at: 2,
                };
                if out.stage(1, item).is_err() {
                    unreachable!("a burst fits the staging area");
                }
            }
            let pushed = out.flush(|_| unreachable!("the ring has room"));
            black_box(pushed);
            let key = inb.pop_run(0, &mut got, BATCH);
            black_box(key);
            std::mem::swap(&mut pkts, &mut got);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
