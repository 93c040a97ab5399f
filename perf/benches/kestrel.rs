//! Per-packet cost of the Kestrel sketch update (a packet into d = 3 rows of enriched
//! buckets of its queue's sketch) next to a plain 3-row Count-Min update (one u32 per
//! bucket) with the same hash, over the same packets: 900 keys (100 UEs x 9 QFIs, the
//! seed's testbed) in 8 queues, both directions.
//!
//! Also the baselines' per-packet costs (Delta-SMP postcards, full and with deltas).
//!
//! Run with `cargo bench -p peregrine-perf --bench kestrel`; throughput is in packets.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use peregrine_dataplane::runtime::Publisher;
use peregrine_dataplane::telemetry::kestrel::layout::{self, Layout, MAX_ROWS};
use peregrine_dataplane::telemetry::kestrel::postcard::smp_pair;
use peregrine_dataplane::telemetry::kestrel::{tap_pair, Deltas, EdgeTable, Sample};
use std::hint::black_box;
use std::time::Duration;

const N: usize = 4096;

fn samples() -> Vec<Sample> {
    let mut x = 42u64;
    let mut t = 1_000u64;
    (0..N)
        .map(|_| {
            x = layout::mix(x);
            let ue = (x % 100) as u32;
            let qfi = (x >> 8) as u8 % 9 + 1;
            t += (x >> 16) % 2_000;
            Sample {
                dir: (x >> 24 & 1) as usize,
                qid: usize::from(qfi) % 8,
                teid: 0x1000 + ue,
                qfi,
                len: 64 + (x >> 32) as u32 % 1400,
                colour: (x >> 48) as u8 % 3,
                sojourn_ns: (x >> 40) as u32 % 2_000_000,
                t_ns: t,
            }
        })
        .collect()
}

/// A plain Count-Min sketch per (direction, QID): rows x width u32 counters.
struct PlainCms {
    layout: Layout,
    counts: Vec<u32>,
}

impl PlainCms {
    #[inline]
    fn update(&mut self, s: &Sample) {
        let mut cols = [0usize; MAX_ROWS];
        self.layout.columns(s.qid, s.teid, s.qfi, &mut cols);
        let base = self.layout.sketch_base(s.dir, s.qid);
        let w = self.layout.width;
        for (r, &c) in cols.iter().enumerate().take(self.layout.rows) {
            self.counts[base + r * w + c] += 1;
        }
    }
}

fn bench(c: &mut Criterion) {
    let s = samples();
    let mut g = c.benchmark_group("kestrel_update");
    g.throughput(Throughput::Elements(N as u64));
    g.measurement_time(Duration::from_secs(3));
    let l = Layout::paper();
    let mut cms = PlainCms {
        counts: vec![0; l.bank_len()],
        layout: l.clone(),
    };
    g.bench_function("plain_cms_3x512", |b| {
        b.iter(|| {
            for x in &s {
                cms.update(black_box(x));
            }
        })
    });
    let table = Publisher::new(EdgeTable::default());
    let (mut tap, _ends) = tap_pair(0, &l, 1_000_000_000, table.reader(), None);
    g.bench_function("kestrel_3x512", |b| {
        b.iter(|| {
            for x in &s {
                tap.record(black_box(x));
            }
        })
    });
    // The baselines on the same packets. 3GPP-PM counters are part of every bank update
    // (kestrel_3x512 includes them); Delta-SMP postcards, full and with deltas (5 us sojourn,
    // 100 us inter-arrival), each iteration also draining the ring as the control side does.
    for (name, d) in [
        ("postcards_full", Deltas::FULL),
        (
            "postcards_delta",
            Deltas {
                sojourn_ns: 5_000,
                iat_ns: 100_000,
            },
        ),
    ] {
        let (mut smp, mut rx, _) = smp_pair(d);
        g.bench_function(name, |b| {
            b.iter(|| {
                for x in &s {
                    let x = black_box(x);
                    smp.record(
                        x.dir as u8,
                        x.qid as u8,
                        x.teid,
                        x.qfi,
                        x.len,
                        x.colour,
                        x.sojourn_ns,
                        x.t_ns,
                    );
                }
                while rx.pop().is_ok() {}
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
