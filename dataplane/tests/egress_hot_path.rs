//! The scheduled egress path does not allocate per packet: the `hot_path.rs` setup (a
//! counting global allocator, one worker forwarding between two DPDK `net_ring` ports through
//! the real `l3fwd` stage), with an egress scheduler on both ports, packets spread over all
//! eight QIDs and a shaper on port 1 that keeps its queues backlogged, so every packet is
//! enqueued, scheduled (SP + DRR), dequeued with its sojourn time recorded, and idle polls
//! drain the shaper. The allocation count must not move.
//!
//! Packets circulate: each ring loops a port's tx back to its own rx, and l3fwd routes them
//! out again on every pass. A small test stage restores the TTL before l3fwd (as if each
//! pass were a fresh packet) so they are not dropped after 64 hops.

mod common;

use peregrine_dataplane::qos::{SchedulerConfig, ShaperConfig};
use peregrine_dataplane::runtime::{
    Action, Batch, Context, Counters, Disposition, EgressConfig, Stage,
};
use peregrine_dataplane::PacketBuf;

/// After l3fwd: send the packets through the QIDs of their port in turn.
struct SpreadQids(u8);

impl<B: PacketBuf> Stage<B> for SpreadQids {
    fn name(&self) -> &'static str {
        "spread_qids"
    }
    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        for i in 0..batch.len() {
            if let Action::Tx(p) = batch.disposition(i).action() {
                batch.set_disposition(i, Disposition::tx_queue(p, self.0 % 8));
                self.0 = self.0.wrapping_add(1);
            }
        }
    }
}

#[test]
fn scheduled_egress_allocates_nothing_per_packet() {
    let egress = vec![
        Some(EgressConfig::default()),
        // 6 MB/s of 60-byte frames: ~100k packets/s, below what the worker forwards, so
        // port 1's queues stay backlogged and idle polls drain them.
        Some(EgressConfig::new(SchedulerConfig {
            shaper: Some(ShaperConfig {
                rate_bytes_per_s: 6_000_000,
                burst_bytes: 1_000,
            }),
            ..SchedulerConfig::default()
        })),
    ];
    let (run, _routes) = common::start_ring_loop(egress, || Some(Box::new(SpreadQids(0))));
    // The window lasts until every QID of port 1 was used and its queues built up, not a
    // fixed time: the shaped port drains at its rate whatever the machine's load.
    let used = |c: &Counters| {
        c.egress_of(1).is_some_and(|e| {
            e.queues.iter().all(|q| q.deq_pkts > 1000) && e.total().sojourn_max_ns > 0
        })
    };
    let (forwarded, allocs, total) = common::measure(run, 50_001, used);
    let e = total.egress_of(1).expect("port 1 scheduled");
    for (qid, q) in e.queues.iter().enumerate() {
        assert!(q.deq_pkts > 1000, "QID {qid} barely used: {q:?}");
    }
    assert!(
        e.total().sojourn_max_ns > 0,
        "port 1's queues never built up"
    );
    eprintln!("forwarded {forwarded} packets in the window; port 1 egress:\n{e}");
    assert!(
        forwarded > 50_000,
        "the loop forwarded only {forwarded} packets"
    );
    assert_eq!(total.total_drops(), 0, "{total:?}");
    assert_eq!(
        allocs, 0,
        "{allocs} allocations while forwarding {forwarded} packets"
    );
}
