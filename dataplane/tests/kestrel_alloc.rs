//! The Kestrel tap does not allocate while forwarding: bursts across many window edges with
//! the control side exchanging banks, re-binned edges published and postcards (full and
//! delta) exported; a counting global allocator watches the worker thread.

use peregrine_dataplane::meta::PacketMeta;
use peregrine_dataplane::runtime::{Context, Publisher, Tap};
use peregrine_dataplane::telemetry::kestrel::layout::default_seeds;
use peregrine_dataplane::telemetry::kestrel::{
    tap_pair, Aggregator, Deltas, EdgeSet, EdgeTable, Layout,
};
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use peregrine_testkit::alloc::{thread_allocs, CountingAlloc};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc::new();

fn burst(n: u32, t: u32) -> Vec<OwnedBuf> {
    (0..n)
        .map(|i| {
            let mut f = vec![0u8; 60];
            f[14] = 0x45;
            f[17] = 46;
            let mut b = OwnedBuf::from_slice(&f);
            let m = b.pkt_meta_mut();
            *m = PacketMeta::EMPTY;
            m.dir = 1 + (i & 1) as u8;
            m.qid = (i % 8) as u8;
            m.teid = (i * 7 + t) % 300;
            m.qfi = (i % 9) as u8;
            m.color = (i % 3) as u8;
            m.sojourn_ns = i * 997;
            m.enqueue_ns = u64::from(t) * 1000;
            m.inner_l3_off = 14;
            b
        })
        .collect()
}

#[test]
fn the_tap_allocates_nothing_per_packet() {
    for deltas in [
        None,
        Some(Deltas::FULL),
        Some(Deltas {
            sojourn_ns: 5000,
            iat_ns: 100_000,
        }),
    ] {
        let layout = Layout::new(8, 3, 512, default_seeds(8)).unwrap();
        let table = Publisher::new(EdgeTable::default());
        let (mut tap, ends) = tap_pair(0, &layout, 100_000, table.reader(), deltas);
        let mut agg = Aggregator::new(layout, 100_000);
        agg.add_source(ends);
        let mut pkts: Vec<Vec<OwnedBuf>> = (0..64).map(|t| burst(32, t)).collect();
        let mut cards = Vec::with_capacity(1 << 20);
        // Warm up: first window edges, the reader's first refresh.
        for (t, b) in pkts.iter_mut().enumerate().take(4) {
            tap.on_burst(0, b, &Context::fixed(t as u64 * 50_000, 0));
        }
        let mut windows = 0;
        for round in 0..20u64 {
            let before = thread_allocs();
            for (t, b) in pkts.iter_mut().enumerate() {
                let now = (round * 64 + t as u64 + 4) * 50_000;
                tap.on_burst(0, b, &Context::fixed(now, 0));
            }
            Tap::<OwnedBuf>::idle(&mut tap);
            assert_eq!(
                thread_allocs(),
                before,
                "the tap allocated in round {round}"
            );
            // The control side (allocating freely) between rounds, as its loop would.
            windows += agg.poll(0).len();
            agg.drain_postcards(&mut cards);
            if round == 10 {
                let next = EdgeSet {
                    version: 2,
                    ..EdgeSet::default()
                };
                table.publish(table.current().next(next, 0));
            }
        }
        assert!(windows >= 30, "{windows} windows exchanged");
        if deltas == Some(Deltas::FULL) {
            assert!(cards.len() >= 20 * 64 * 32, "{}", cards.len());
        }
    }
}
