//! The per-packet path does not allocate: a counting global allocator watches a window in
//! which one worker forwards millions of packets between two DPDK `net_ring` ports through
//! the real `l3fwd` stage. The count must not move.
//!
//! Packets circulate: each ring loops a port's tx back to its own rx, and l3fwd routes them
//! out again on every pass. A small test stage restores the TTL before l3fwd (as if each
//! pass were a fresh packet) so they are not dropped after 64 hops.

mod common;

#[test]
fn forwarding_allocates_nothing_per_packet() {
    let (run, _routes) = common::start_ring_loop(Vec::new(), || None);
    // The window ends once it covered 100,000 forwarded packets (and the workers' periodic
    // work), however long that takes on a loaded machine.
    let (forwarded, allocs, total) = common::measure(run, 100_001, |_| true);
    assert!(
        forwarded > 100_000,
        "the loop forwarded only {forwarded} packets"
    );
    assert_eq!(total.total_drops(), 0, "{total:?}");
    assert_eq!(
        allocs, 0,
        "{allocs} allocations while forwarding {forwarded} packets"
    );
}
