//! Per-packet cost of the UPF stage (`peregrine_dataplane::upf::Upf`): uplink decap + N6
//! route, downlink encap over IPv4 and over IPv6 (UDP checksum computed), 64 B and 512 B
//! inner IP packets, with 10k and 100k sessions in the tables and a TrTCM meter on every
//! PDR (rate high enough that everything is forwarded).
//!
//! Each iteration refills a 32-packet batch from the pristine frames (not timed) and runs
//! the stage; only the stage's run is timed (two clock reads per batch of 32, ~1 ns per
//! packet, are in the figure). The 32 packets hit 32 sessions spread over the table. Run with
//! `cargo bench -p peregrine-perf --bench upf`; results in `perf/results/upf-bench.md`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use peregrine_dataplane::qos::{ColourMode, TrTcmConfig};
use peregrine_dataplane::runtime::{Action, Context, Disposition};
use peregrine_dataplane::OwnedBuf;
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
            let sess = |k: u32| k * (n / BATCH);
            let cases: [(&str, u16, Vec<Vec<u8>>); 3] = [
                (
                    "ul_decap_route",
                    0,
                    (0..BATCH)
                        .map(|k| {
                            let inner = udp4(ue_v4(sess(k)), server_v4(), 53, size - 28);
                            ul_frame(false, 0x1000_0000 + sess(k), Some(9), &inner)
                        })
                        .collect(),
                ),
                (
                    "dl_encap_v4",
                    1,
                    (0..BATCH)
                        .map(|k| dl_frame(&udp4(server_v4(), ue_v4(sess(k)), 80, size - 28)))
                        .collect(),
                ),
                (
                    "dl_encap_v6_udp_csum",
                    1,
                    (0..BATCH)
                        .map(|k| dl_frame(&udp6(server_v6(), ue_v6(sess(k)), 80, size - 48)))
                        .collect(),
                ),
            ];
            for (name, port, frames) in cases {
                let mut bufs: Vec<OwnedBuf> =
                    frames.iter().map(|f| OwnedBuf::from_slice(f)).collect();
                // The clock advances 1 ms per batch so the meters refill (PIR 2^40 B/s).
                let mut now = 0u64;
                // Refill the batch from the pristine frames (not timed), run the stage
                // (timed: only `pipe.run`), return the buffers; the time of the run.
                let mut step = |bufs: &mut Vec<OwnedBuf>, rig: &mut Rig| {
                    now += 1_000_000;
                    let cx = Context::fixed(now, 0);
                    rig.batch.rx_port = port;
                    for (mut b, f) in bufs.drain(..).zip(&frames) {
                        b.set_data(f).unwrap();
                        let _ = rig.batch.push(b, Disposition::CONTINUE);
                    }
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
                assert_eq!(step(&mut bufs, &mut rig).0, BATCH, "{name}: all forwarded");
                g.bench_function(
                    BenchmarkId::new(format!("{name}/{size}B"), format!("{}k_sessions", n / 1000)),
                    |b| {
                        b.iter_custom(|iters| {
                            let mut total = Duration::ZERO;
                            for _ in 0..iters {
                                let (sent, dt) = step(&mut bufs, &mut rig);
                                black_box(sent);
                                total += dt;
                            }
                            total
                        })
                    },
                );
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
