//! Per-packet cost of the sketch-INT co-design gate (`docs/codesign.md`): `observe` alone
//! (Count-Min with conservative update, d = 3 and 4 rows, over a stream of 4096 flow hashes),
//! and the INT source after the classifier on batches of 32 packets with and without the
//! gate: a count(64) rule (the fast path: most packets only counted) and a count(1) rule on a
//! flow the gate judges large (INT suppressed) against the same rule without the gate (INT
//! inserted). Each source line includes the classifier and the refill of the 32 buffers.
//!
//! Run with `cargo bench -p peregrine-perf --bench codesign_gate`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use peregrine_dataplane::classify::Classify;
use peregrine_dataplane::runtime::{Batch, Context, Disposition, Publisher, Stage};
use peregrine_dataplane::OwnedBuf;
use peregrine_int::gate::{FlowGate, GateConfig, GateUnit};
use peregrine_int::namespace::{NamespaceTable, TableSnapshot};
use peregrine_int::stages::{IntConfig, IntSource};
use peregrine_perf::int_accuracy::stages::{frame, rule};
use peregrine_perf::int_accuracy::Strategy;
use std::hint::black_box;

const BATCH: usize = 32;

fn gate_cfg(rows: u8, large: u32) -> GateConfig {
    GateConfig {
        window_ms: 1000,
        rows,
        width: 4096,
        unit: GateUnit::Packets,
        large,
        small: large.div_ceil(2),
        export: None,
        export_flows: 4096,
    }
}

fn observe(c: &mut Criterion) {
    let mut x = 0x1234_5678u32;
    let hashes: Vec<u32> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        })
        .collect();
    let mut g = c.benchmark_group("gate");
    g.throughput(Throughput::Elements(hashes.len() as u64));
    for rows in [3u8, 4] {
        let mut gate = FlowGate::new(gate_cfg(rows, 64)).unwrap();
        let mut now = 0u64;
        g.bench_function(format!("observe_d{rows}"), |b| {
            b.iter(|| {
                for &h in &hashes {
                    now += 10;
                    black_box(gate.observe(h, 1000, now));
                }
            })
        });
    }
    g.finish();
}

fn source(every: u32, gate: Option<GateConfig>) -> (IntSource, Publisher<TableSnapshot>) {
    let mut table = NamespaceTable::default();
    table.install(rule(Strategy::Count(every))).unwrap();
    let publisher = Publisher::new((*table.snapshot()).clone());
    let mut s = IntSource::new(IntConfig::default(), publisher.reader()).after_classifier();
    if let Some(g) = gate {
        s = s.with_gate(FlowGate::new(g).unwrap());
    }
    (s, publisher)
}

fn source_batches(c: &mut Criterion) {
    let pkt = frame(1);
    let mut g = c.benchmark_group("gate_source");
    g.throughput(Throughput::Elements(BATCH as u64));
    // large = 1: the flow is large from its second packet on.
    let cases: [(&str, u32, Option<GateConfig>); 4] = [
        ("count64_no_gate", 64, None),
        ("count64_gate", 64, Some(gate_cfg(3, 1 << 30))),
        ("count1_no_gate_int_inserted", 1, None),
        ("count1_gate_large_flow", 1, Some(gate_cfg(3, 1))),
    ];
    for (name, every, gate) in cases {
        let (mut s, _p) = source(every, gate);
        let mut cl = Classify::new();
        let mut now = 0u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut batch = Batch::<OwnedBuf>::new();
                for _ in 0..BATCH {
                    batch
                        .push(OwnedBuf::from_slice(&pkt), Disposition::CONTINUE)
                        .unwrap();
                }
                now += 1_000;
                let cx = Context::fixed(now, 0);
                cl.process(&mut batch, &cx);
                s.process(&mut batch, &cx);
                black_box(batch.drain().count())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, observe, source_batches);
criterion_main!(benches);
