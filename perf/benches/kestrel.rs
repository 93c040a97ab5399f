//! Per-packet cost of the Kestrel sketch update (a packet into d = 3 rows of enriched
//! buckets of its queue's sketch) next to a plain 3-row Count-Min update (one u32 per
//! bucket) with the same hash, over the same packets: 900 keys (100 UEs x 9 QFIs, the
//! seed's testbed) in 8 queues, both directions.
//!
//! Kestrel variants: `kestrel_3x512` is the tap's update (bursts of 32: hash the burst, then
//! update 64-byte hot buckets, prefetching 8 packets ahead, bins by table lookup);
//! `kestrel_3x512_before_compare_bins` the same burst update as it was before the bin tables
//! (seven compares per bin, per-row calibration tests); `kestrel_3x512_before_128B` the one
//! before the hot buckets; `kestrel_3x512_reference` the one-packet reference update into
//! the wide (88-byte) buckets. Plain CMS variants: one
//! packet at a time, and with the same two-pass burst prefetch as the tap.
//!
//! Also the baselines' per-packet costs (Delta-SMP postcards, full and with deltas).
//!
//! Run with `cargo bench -p peregrine-perf --bench kestrel`; throughput is in packets.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use peregrine_dataplane::runtime::Publisher;
use peregrine_dataplane::telemetry::kestrel::layout::{self, Layout, MAX_ROWS};
use peregrine_dataplane::telemetry::kestrel::postcard::smp_pair;
use peregrine_dataplane::telemetry::kestrel::{
    tap_pair, Bank, Deltas, EdgeSet, EdgeTable, KestrelTap, Sample, Sketcher, CHUNK,
};
use peregrine_perf::plain_cms::PlainCms;
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

/// The update as it was before hot buckets (for the before/after figure in one run): one
/// 128-byte bucket per row (two cache lines, u32 counters, last-seen in the first line),
/// one packet at a time, no prefetch; PM counters as the tap keeps them.
#[repr(C, align(128))]
#[derive(Clone, Copy)]
struct Bucket128 {
    bytes: u64,
    packets: u32,
    colour: [u32; 3],
    lat: [u32; 8],
    last_seen: u64,
    iat: [u32; 8],
    _pad: [u32; 8],
}

struct Before {
    layout: Layout,
    buckets: Vec<Bucket128>,
    pm: Vec<[u64; 3]>,
    edges: EdgeSet,
}

impl Before {
    fn new(layout: &Layout) -> Before {
        let zero = Bucket128 {
            bytes: 0,
            packets: 0,
            colour: [0; 3],
            lat: [0; 8],
            last_seen: 0,
            iat: [0; 8],
            _pad: [0; 8],
        };
        Before {
            layout: layout.clone(),
            buckets: vec![zero; layout.bank_len()],
            pm: vec![[0; 3]; 2 * 64],
            edges: EdgeSet::default(),
        }
    }

    #[inline]
    fn record(&mut self, s: &Sample) {
        let e = &self.edges.qids[s.qid];
        let lat_bin = layout::bin(&e.lat, s.sojourn_ns);
        let mut cols = [0usize; MAX_ROWS];
        self.layout.columns(s.qid, s.teid, s.qfi, &mut cols);
        let base = self.layout.sketch_base(s.dir, s.qid);
        let colour = usize::from(s.colour.min(2));
        for (row, &c) in cols.iter().enumerate().take(self.layout.rows) {
            let b = &mut self.buckets[base + row * self.layout.width + c];
            b.packets += 1;
            b.bytes += u64::from(s.len);
            b.colour[colour] += 1;
            b.lat[lat_bin] += 1;
            let last = std::mem::replace(&mut b.last_seen, s.t_ns.max(1));
            if last != 0 {
                let iat = u32::try_from(s.t_ns.saturating_sub(last)).unwrap_or(u32::MAX);
                b.iat[layout::bin(&e.iat, iat)] += 1;
            }
        }
        let pm = &mut self.pm[s.dir * 64 + usize::from(s.qfi & 63)];
        pm[0] += 1;
        pm[1] += u64::from(s.len);
        pm[2] += u64::from(s.sojourn_ns);
    }
}

// One iteration of each variant, not inlined, so `valgrind --tool=callgrind` counts each
// one's instructions per call (perf/results/kestrel.md).
#[inline(never)]
fn iter_cms(cms: &mut PlainCms, s: &[Sample]) {
    for x in s {
        cms.update(black_box(x));
    }
}

#[inline(never)]
fn iter_cms_burst(cms: &mut PlainCms, s: &[Sample]) {
    for x in s.chunks(CHUNK) {
        cms.update_burst(black_box(x));
    }
}

#[inline(never)]
fn iter_kestrel(tap: &mut KestrelTap, s: &[Sample]) {
    for x in s.chunks(CHUNK) {
        tap.record_burst(black_box(x));
    }
}

#[inline(never)]
fn iter_before_compare(sk: &mut Sketcher, bank: &mut Bank, edges: &EdgeSet, s: &[Sample]) {
    for x in s.chunks(CHUNK) {
        sk.record_burst_compare(bank, edges, black_box(x));
    }
}

#[inline(never)]
fn iter_before(before: &mut Before, s: &[Sample]) {
    for x in s {
        before.record(black_box(x));
    }
}

#[inline(never)]
fn iter_reference(sk: &mut Sketcher, bank: &mut Bank, edges: &EdgeSet, s: &[Sample]) {
    for x in s {
        sk.record(bank, edges, black_box(x));
    }
}

fn bench(c: &mut Criterion) {
    let s = samples();
    let mut g = c.benchmark_group("kestrel_update");
    g.throughput(Throughput::Elements(N as u64));
    g.measurement_time(Duration::from_secs(3));
    let l = Layout::paper();
    let mut cms = PlainCms::new(&l);
    g.bench_function("plain_cms_3x512", |b| b.iter(|| iter_cms(&mut cms, &s)));
    g.bench_function("plain_cms_3x512_burst_prefetch", |b| {
        b.iter(|| iter_cms_burst(&mut cms, &s))
    });
    let table = Publisher::new(EdgeTable::default());
    let (mut tap, _ends) = tap_pair(0, &l, 1_000_000_000, table.reader(), None);
    g.bench_function("kestrel_3x512", |b| b.iter(|| iter_kestrel(&mut tap, &s)));
    let (mut sk, mut bank, edges) = (Sketcher::new(&l), Bank::new(&l), EdgeSet::default());
    g.bench_function("kestrel_3x512_before_compare_bins", |b| {
        b.iter(|| iter_before_compare(&mut sk, &mut bank, &edges, &s))
    });
    let mut before = Before::new(&l);
    g.bench_function("kestrel_3x512_before_128B", |b| {
        b.iter(|| iter_before(&mut before, &s))
    });
    let (mut sk, mut bank, edges) = (Sketcher::new(&l), Bank::new(&l), EdgeSet::default());
    g.bench_function("kestrel_3x512_reference", |b| {
        b.iter(|| iter_reference(&mut sk, &mut bank, &edges, &s))
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
