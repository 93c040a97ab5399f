//! Per-packet cost of the UPF stage (`peregrine_dataplane::upf::Upf`): uplink decap + N6
//! route, downlink encap over IPv4 and over IPv6 (UDP checksum computed), 64 B and 512 B
//! inner IP packets, with 10k and 100k sessions in the tables and a TrTCM meter on every
//! PDR (rate high enough that everything is forwarded).
//!
//! Each iteration refills a 32-packet batch from the pristine frames (not timed) and runs
//! the stage; only the stage's run is timed (two clock reads per batch of 32, ~1 ns per
//! packet, are in the figure). In the `<n>k_sessions` cases the 32 packets hit the same 32
//! sessions spread over the table in every iteration, so their lines stay cached whatever the
//! table's size. The `<n>k_sessions_cycled` cases (64 B) visit every session in a fixed
//! shuffled order, 32 new sessions per batch, as a worker's traffic does: each batch's key
//! slots, meters and usage cells are cold unless the cache holds all `n` sessions' state.
//! Run with `cargo bench -p peregrine-perf --bench upf`; results in `perf/results/upf-bench.md`
//! and, per optimisation round, `perf/results/upf.md`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use peregrine_dataplane::qos::{ColourMode, TrTcmConfig};
use peregrine_dataplane::runtime::{Action, Context, Disposition};
use peregrine_dataplane::OwnedBuf;
use peregrine_testkit::rng;
use peregrine_testkit::upf::*;
use std::hint::black_box;
use std::net::IpAddr;
use std::time::{Duration, Instant};

const BATCH: u32 = 32;

fn tables(n: u32) -> peregrine_dataplane::upf::UpfTables {
    let meter = TrTcmConfig {
        cir: 0,
        cbs: 0,
        pir: 1 << 40,
        pbs: 1 << 24,
        mode: ColourMode::Blind,
    };
    let mut tb = TableBuilder::default();
    for i in 0..n {
        let mut u = ul(Some(9));
        u.qers = vec![qer(None, true, Some((meter, 3 * i, 1)))];
        let mut d4 = dl(0x2000_0000 + i, IpAddr::V4(gnb_v4()));
        d4.qers = vec![qer(Some(9), true, Some((meter, 3 * i + 1, 1)))];
        let mut d6 = dl(0x3000_0000 + i, IpAddr::V6(gnb_v6()));
        d6.qers = vec![qer(Some(9), true, Some((meter, 3 * i + 2, 1)))];
        tb.add(Key::Teid(0x1000_0000 + i), &[u])
            .add(Key::Ue4(ue_v4(i)), &[d4])
            .add(Key::Ue6(ue_v6(i)), &[d6]);
    }
    tb.build()
}

/// The stage's cases: name and rx port (0 = N3, 1 = N6).
const CASES: [(&str, u16); 3] = [
    ("ul_decap_route", 0),
    ("dl_encap_v4", 1),
    ("dl_encap_v6_udp_csum", 1),
];

/// Case `name`'s frame of `size` bytes (inner IP packet) for session `i`.
fn frame(name: &str, size: usize, i: u32) -> Vec<u8> {
    match name {
        "ul_decap_route" => {
            let inner = udp4(ue_v4(i), server_v4(), 53, size - 28);
            ul_frame(false, 0x1000_0000 + i, Some(9), &inner)
        }
        "dl_encap_v4" => dl_frame(&udp4(server_v4(), ue_v4(i), 80, size - 28)),
        _ => dl_frame(&udp6(server_v6(), ue_v6(i), 80, size - 48)),
    }
}

/// Sessions `0..n` in a fixed pseudo-random order (Fisher-Yates over a seeded stream).
fn shuffled(n: u32) -> Vec<u32> {
    let mut r = rng::seeded(0x5e55_1095);
    let mut v: Vec<u32> = (0..n).collect();
    for i in (1..v.len()).rev() {
        let j = rng::below(&mut r, i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

fn bench_upf(c: &mut Criterion) {
    let mut g = c.benchmark_group("upf");
    g.throughput(Throughput::Elements(u64::from(BATCH)));
    for n in [10_000u32, 100_000] {
        let cfg = peregrine_dataplane::upf::UpfConfig {
            max_meter_slots: 3 * n,
            ..cfg()
        };
        let mut rig = Rig::new(tables(n), cfg);
        for size in [64usize, 512] {
            let spread: Vec<u32> = (0..BATCH).map(|k| k * (n / BATCH)).collect();
            let mut cases: Vec<(String, u16, Vec<Vec<u8>>)> = CASES
                .iter()
                .map(|&(name, port)| {
                    let frames = spread.iter().map(|&i| frame(name, size, i)).collect();
                    (
                        format!("{name}/{size}B/{}k_sessions", n / 1000),
                        port,
                        frames,
                    )
                })
                .collect();
            if size == 64 {
                let order = shuffled(n);
                for &(name, port) in &CASES {
                    let frames = order.iter().map(|&i| frame(name, size, i)).collect();
                    let id = format!("{name}/{size}B/{}k_sessions_cycled", n / 1000);
                    cases.push((id, port, frames));
                }
            }
            for (id, port, frames) in cases {
                let mut bufs: Vec<OwnedBuf> = frames[..BATCH as usize]
                    .iter()
                    .map(|f| OwnedBuf::from_slice(f))
                    .collect();
                // The clock advances 1 ms per batch so the meters refill (PIR 2^40 B/s).
                let mut now = 0u64;
                // The next batch's first frame: the batches walk `frames` in turn, wrapping.
                let mut next = 0usize;
                // Refill the batch from the pristine frames (not timed), run the stage
                // (timed: only `pipe.run`), return the buffers; the time of the run.
                let mut step = |bufs: &mut Vec<OwnedBuf>, rig: &mut Rig| {
                    now += 1_000_000;
                    let cx = Context::fixed(now, 0);
                    rig.batch.rx_port = port;
                    for mut b in bufs.drain(..) {
                        b.set_data(&frames[next]).unwrap();
                        next = (next + 1) % frames.len();
                        let _ = rig.batch.push(b, Disposition::CONTINUE);
                    }
                    // As the worker presents a received batch (`Worker::process`): one
                    // uniform disposition, not the per-packet ones `push` leaves.
                    rig.batch.reset_dispositions();
                    let t0 = Instant::now();
                    rig.pipe.run(&mut rig.batch, &cx);
                    let dt = t0.elapsed();
                    let mut sent = 0;
                    for (b, d) in rig.batch.drain() {
                        sent += matches!(d.action(), Action::Tx(_)) as u32;
                        bufs.push(b);
                    }
                    (sent, dt)
                };
                // Every session once (its meter created on the general path) before timing.
                for _ in 0..frames.len().div_ceil(BATCH as usize) {
                    assert_eq!(step(&mut bufs, &mut rig).0, BATCH, "{id}: all forwarded");
                }
                let (group, param) = id.rsplit_once('/').expect("name/size/sessions");
                g.bench_function(BenchmarkId::new(group, param), |b| {
                    b.iter_custom(|iters| {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            let (sent, dt) = step(&mut bufs, &mut rig);
                            black_box(sent);
                            total += dt;
                        }
                        total
                    })
                });
            }
        }
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
    name = upf;
    config = config();
    targets = bench_upf
}
criterion_main!(upf);
