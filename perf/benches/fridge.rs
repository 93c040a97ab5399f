//! Fridge kernel throughput: requests and responses of the fridge paper's synthetic trace
//! (1 M requests/s, 40% answered, log-uniform delays up to 64 ms) through one fridge, two
//! fridges, and the simple table, with every sample tallied into its histogram. Elements are
//! trace events (requests + responses). Goal: >= 50 M/s per core.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use peregrine_dataplane::telemetry::fridge::baseline::SimpleTable;
use peregrine_dataplane::telemetry::fridge::{Estimator, FridgeSet, FridgeSpec, LogHist, XMode};
use peregrine_testkit::delay_trace::{synthetic, Event};
use std::hint::black_box;

fn drive(e: &mut impl Estimator, h: &mut [LogHist], events: &[Event]) {
    for ev in events {
        if ev.request {
            e.request(ev.id, ev.t_ns);
        } else if let Some(s) = e.response(ev.id, ev.t_ns) {
            h[usize::from(s.fridge)].add(s.delay_ns, s.weight);
        }
    }
}

fn bench(c: &mut Criterion) {
    let t = synthetic(1, 500_000, 1e6, 0.4, 1_000, 64_000_000);
    let ev = &t.events;
    let mut g = c.benchmark_group("fridge");
    g.throughput(Throughput::Elements(ev.len() as u64));
    g.sample_size(20);
    let mut h = [LogHist::new(), LogHist::new()];
    let one = [FridgeSpec {
        m: 1 << 12,
        p: 1.0 / 16.0,
    }];
    let mut f1 = FridgeSet::new(&one, XMode::Insertions, 3).unwrap();
    g.bench_function("one_fridge_m4096", |b| {
        b.iter(|| drive(&mut f1, &mut h, black_box(ev)))
    });
    let all_in = [FridgeSpec { m: 1 << 12, p: 1.0 }];
    let mut f0 = FridgeSet::new(&all_in, XMode::Insertions, 3).unwrap();
    g.bench_function("one_fridge_m4096_p1", |b| {
        b.iter(|| drive(&mut f0, &mut h, black_box(ev)))
    });
    let two = [
        FridgeSpec {
            m: 1 << 11,
            p: 1.0 / 8.0,
        },
        FridgeSpec {
            m: 1 << 11,
            p: 1.0 / 64.0,
        },
    ];
    let mut f2 = FridgeSet::new(&two, XMode::Insertions, 3).unwrap();
    g.bench_function("two_fridges_m4096", |b| {
        b.iter(|| drive(&mut f2, &mut h, black_box(ev)))
    });
    let mut s = SimpleTable::new(1 << 12, 3);
    g.bench_function("simple_m4096", |b| {
        b.iter(|| drive(&mut s, &mut h, black_box(ev)))
    });
    g.finish();
    black_box(&h);
}

criterion_group!(benches, bench);
criterion_main!(benches);
