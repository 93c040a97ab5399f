//! Per-packet costs of the INT stages (Miranda et al., III-C..III-E) over batches of 32 `OwnedBuf`s:
//! a transit hop on INT packets (both encodings), the sink's decode + strip + report per
//! sampled packet, and the fast paths a non-sampled packet takes (source: flow lookup and
//! counters; transit: flow lookup). Every benchmark refills its 32 buffers from a template
//! each iteration; `refill` measures that alone, so a stage's cost is its line minus `refill`.
//!
//! Run with `cargo bench -p peregrine-perf --bench int`; results in `results/int-bench.md`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use crossbeam_channel::{bounded, Receiver};
use peregrine_dataplane::runtime::{Batch, Context, Disposition, Publisher, Reasons, Stage};
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use peregrine_int::namespace::{NamespaceTable, TableSnapshot};
use peregrine_int::stages::{IntConfig, IntEvent, IntSink, IntSource, IntTransit};
use peregrine_perf::int_accuracy::stages::{frame, rule};
use peregrine_perf::int_accuracy::{Encoding, Strategy};
use std::hint::black_box;

const BATCH: usize = 32;

struct Nodes {
    _publisher: Publisher<TableSnapshot>,
    source: IntSource,
    transits: Vec<IntTransit>,
    sink: IntSink,
    events: Receiver<IntEvent>,
}

fn nodes(encoding: Encoding, every: u32) -> Nodes {
    let mut table = NamespaceTable::default();
    let r = rule(Strategy::Count(every));
    let ns = r.ns_id;
    table.install(r).unwrap();
    let publisher = Publisher::new((*table.snapshot()).clone());
    let cfg = |node_id| IntConfig {
        node_id,
        seed_namespaces: if encoding == Encoding::Seed {
            vec![ns]
        } else {
            Vec::new()
        },
        ioam_hops: 4,
        ..IntConfig::default()
    };
    let mut reasons = Reasons::new();
    let (tx, events) = bounded(1 << 16);
    Nodes {
        source: IntSource::new(cfg(0), publisher.reader()),
        transits: (1..=4)
            .map(|k| IntTransit::new(cfg(k), publisher.reader(), &mut reasons))
            .collect(),
        sink: IntSink::new(cfg(5), publisher.reader(), tx, &mut reasons),
        events,
        _publisher: publisher,
    }
}

/// Run one packet through a stage at `now`.
fn one<S: Stage<OwnedBuf>>(s: &mut S, pkt: &[u8], now: u64) -> Vec<u8> {
    let mut b = Batch::<OwnedBuf>::new();
    b.push(OwnedBuf::from_slice(pkt), Disposition::CONTINUE)
        .unwrap();
    s.process(&mut b, &Context::fixed(now, 0));
    let (out, d) = b.drain().next().unwrap();
    assert!(d.is_continue());
    out.data().to_vec()
}

/// The packet after the source (INT on every packet) and after `hops` transits.
fn int_packet(n: &mut Nodes, hops: usize) -> Vec<u8> {
    // The flow's first packet carries the in-band request; the second gets telemetry.
    one(&mut n.source, &frame(0), 1_000);
    let mut p = one(&mut n.source, &frame(1), 2_000);
    assert!(p.len() > frame(1).len());
    for (k, t) in n.transits.iter_mut().take(hops).enumerate() {
        p = one(t, &p, 3_000 + k as u64 * 1_000);
    }
    p
}

/// Refill `pool` from `tmpl` into `batch`, run `f`, move the buffers back.
fn cycle(
    batch: &mut Batch<OwnedBuf>,
    pool: &mut Vec<OwnedBuf>,
    tmpl: &[u8],
    f: impl FnOnce(&mut Batch<OwnedBuf>),
) {
    while let Some(mut b) = pool.pop() {
        b.set_data(tmpl).unwrap();
        let _ = batch.push(b, Disposition::CONTINUE);
    }
    f(batch);
    for (b, d) in batch.drain() {
        black_box(d);
        pool.push(b);
    }
}

fn bench_int(c: &mut Criterion) {
    let mut g = c.benchmark_group("int");
    g.throughput(Throughput::Elements(BATCH as u64));
    let mut batch = Batch::<OwnedBuf>::new();
    let mut pool: Vec<OwnedBuf> = (0..BATCH).map(|_| OwnedBuf::new()).collect();
    let plain = frame(7);
    g.bench_function("refill", |b| {
        b.iter(|| cycle(&mut batch, &mut pool, &plain, |_| {}))
    });
    for (name, enc) in [("ioam", Encoding::Ioam), ("seed", Encoding::Seed)] {
        let mut n = nodes(enc, 1);
        let at_t1 = int_packet(&mut n, 0);
        let at_sink = int_packet(&mut n, 4);
        let cx = Context::fixed(10_000, 0);
        let t = &mut n.transits[0];
        g.bench_function(format!("transit/{name}"), |b| {
            b.iter(|| cycle(&mut batch, &mut pool, &at_t1, |bt| t.process(bt, &cx)))
        });
        let (sink, events) = (&mut n.sink, &n.events);
        g.bench_function(format!("sink/{name}"), |b| {
            b.iter(|| {
                cycle(&mut batch, &mut pool, &at_sink, |bt| sink.process(bt, &cx));
                for e in events.try_iter() {
                    black_box(e);
                }
            })
        });
        assert!(n.sink.stats().reports > 0, "the sink decoded nothing");
    }
    // Non-sampled packets: the source at 1/1000 (counted, not sampled, nearly always) and a
    // transit on a plain packet of a monitored flow.
    let mut n = nodes(Encoding::Ioam, 1000);
    let cx = Context::fixed(10_000, 0);
    let src = &mut n.source;
    g.bench_function("source_1_in_1000", |b| {
        b.iter(|| cycle(&mut batch, &mut pool, &plain, |bt| src.process(bt, &cx)))
    });
    let t = &mut n.transits[0];
    g.bench_function("transit/plain", |b| {
        b.iter(|| cycle(&mut batch, &mut pool, &plain, |bt| t.process(bt, &cx)))
    });
    g.finish();
}

criterion_group!(benches, bench_int);
criterion_main!(benches);
