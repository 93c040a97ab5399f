//! Per-packet costs of QoS: the RFC 2698 TrTCM meter and the 8-queue SP + DRR egress
//! scheduler.
//!
//! Run with `cargo bench -p peregrine-perf --bench qos`; every benchmark reports elements
//! (packets) per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use peregrine_dataplane::buffer::OwnedBuf;
use peregrine_dataplane::qos::{
    Colour, ColourMode, QfiMap, Scheduler, SchedulerConfig, ShaperConfig, TrTcm, TrTcmConfig,
};
use std::hint::black_box;
use std::time::Duration;

/// Packets per batch, a typical rx burst.
const BATCH: usize = 32;

/// Packet sizes cycled through (IMIX-like).
const SIZES: [u64; 8] = [64, 1500, 576, 64, 1500, 64, 128, 1500];

fn bench_trtcm(c: &mut Criterion) {
    let mut g = c.benchmark_group("trtcm");
    g.throughput(Throughput::Elements(1));
    for (name, mode, pre) in [
        ("mark_blind", ColourMode::Blind, [Colour::Green; 8]),
        (
            "mark_aware",
            ColourMode::Aware,
            [
                Colour::Green,
                Colour::Yellow,
                Colour::Green,
                Colour::Red,
                Colour::Green,
                Colour::Green,
                Colour::Yellow,
                Colour::Green,
            ],
        ),
    ] {
        // 100 Mbit/s peak, 25 Mbit/s committed; offered ~1 Gbit/s (a packet per 5 us of
        // virtual time, ~600 B average), so all three colours occur.
        let mut m = TrTcm::new(
            TrTcmConfig {
                cir: 3_125_000,
                cbs: 31_250,
                pir: 12_500_000,
                pbs: 125_000,
                mode,
            },
            0,
        )
        .unwrap();
        let mut t = 0u64;
        let mut i = 0usize;
        g.bench_function(name, |b| {
            b.iter(|| {
                t += 5_000;
                i = (i + 1) & 7;
                black_box(m.mark(black_box(t), SIZES[i], pre[i]))
            })
        });
    }
    let mut u = TrTcm::from_qer_kbps(None, None, ColourMode::Blind, 0);
    let mut t = 0u64;
    g.bench_function("mark_unlimited", |b| {
        b.iter(|| {
            t += 5_000;
            black_box(u.mark(black_box(t), 1500, Colour::Green))
        })
    });
    g.finish();
}

fn bench_scheduler(c: &mut Criterion) {
    let mut g = c.benchmark_group("scheduler");
    g.throughput(Throughput::Elements(BATCH as u64));
    let map = QfiMap::default();
    // QFIs spread over SP and DRR queues.
    let qfis: [u8; 8] = [9, 1, 5, 2, 4, 6, 7, 8];
    for (name, shaper) in [
        ("enq_deq_batch32", None),
        (
            // A shaper that never binds (100 Gbit/s): measures its bookkeeping.
            "enq_deq_batch32_shaped",
            Some(ShaperConfig {
                rate_bytes_per_s: 12_500_000_000,
                burst_bytes: 1 << 30,
            }),
        ),
    ] {
        let cfg = SchedulerConfig {
            shaper,
            ..SchedulerConfig::default()
        };
        let mut s: Scheduler<OwnedBuf> = Scheduler::new(&cfg, 0).unwrap();
        let mut bufs: Vec<OwnedBuf> = (0..BATCH)
            .map(|i| OwnedBuf::from_slice(&vec![0u8; SIZES[i % 8] as usize]))
            .collect();
        // Keep some standing backlog in the DRR queues so dequeue walks real rounds.
        for i in 0..256 {
            s.enqueue(
                OwnedBuf::from_slice(&vec![0u8; SIZES[i % 8] as usize]),
                map.qid(qfis[(i % 6) + 2]),
                0,
            )
            .unwrap();
        }
        let mut t = 0u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                t += 10_000;
                for (i, p) in bufs.drain(..).enumerate() {
                    if let Err(p) = s.enqueue(p, map.qid(qfis[i & 7]), t) {
                        drop(black_box(p));
                    }
                }
                s.dequeue_burst(t, BATCH, |d| {
                    black_box(d.sojourn_ns);
                    bufs.push(d.pkt);
                });
            })
        });
        assert_eq!(bufs.len(), BATCH);
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
    name = qos;
    config = config();
    targets = bench_trtcm, bench_scheduler
}
criterion_main!(qos);
