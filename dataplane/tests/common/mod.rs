//! Shared by the dataplane's allocation tests: the test kit's counting allocator and a DPDK
//! `net_ring` loop that keeps one worker forwarding the same packets through real stages.
#![allow(dead_code)]

use peregrine_dataplane::io::dpdk::{DpdkBackend, DpdkConfig, DpdkPortConfig};
use peregrine_dataplane::io::{Backend, Burst, PortId, PortInfo, PortStats, WorkerIo};
use peregrine_dataplane::runtime::{
    self, Batch, Context, Counters, EgressConfig, Pipeline, Publisher, Reasons, Running,
    RuntimeConfig, Stage, WorkerSpec,
};
use peregrine_dataplane::stages::l3fwd::{L3Fwd, NextHop, RouteTable};
use peregrine_dataplane::PacketBuf;
use peregrine_testkit::alloc::{thread_allocs, CountingAlloc};
use peregrine_testkit::tools::wait_until;
use peregrine_wire::ethernet::{self, ethertype, Address as Mac};
use peregrine_wire::{checksum, ipv4};
use std::net::{IpAddr, Ipv4Addr};

/// Counts every allocation and reallocation of the test binary, in total and per thread.
#[global_allocator]
pub static GLOBAL: CountingAlloc = CountingAlloc::new();

pub const MAC0: Mac = Mac([2, 0, 0, 0, 0, 0x10]);
pub const MAC1: Mac = Mac([2, 0, 0, 0, 0, 0x11]);

/// Puts TTL back to 64 with a full header checksum, so packets can loop forever.
pub struct RefreshTtl;

impl<B: PacketBuf> Stage<B> for RefreshTtl {
    fn name(&self) -> &'static str {
        "refresh_ttl"
    }
    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        for p in batch.pkts.iter_mut() {
            if let Ok(mut ip) = ipv4::Packet::new_checked(&mut p.data_mut()[14..]) {
                ip.set_ttl(64);
                ip.fill_checksum();
            }
        }
    }
}

pub fn frame(dst_mac: Mac, dst: Ipv4Addr) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    ethernet::Repr {
        src: Mac([2, 0, 0, 0, 0, 0x99]),
        dst: dst_mac,
        ethertype: ethertype::IPV4,
    }
    .emit(&mut f)
    .unwrap();
    ipv4::Repr {
        src: Ipv4Addr::new(192, 0, 2, 1),
        dst,
        protocol: 17,
        payload_len: 26,
        ttl: 64,
        dscp_ecn: 0,
        ident: 1,
        dont_frag: false,
    }
    .emit(&mut f[14..])
    .unwrap();
    assert_eq!(checksum::checksum(&f[14..34]), 0);
    f
}

pub struct Preloaded(DpdkBackend, Option<<DpdkBackend as Backend>::Io>);

impl Backend for Preloaded {
    type Io = <DpdkBackend as Backend>::Io;
    fn ports(&self) -> &[PortInfo] {
        self.0.ports()
    }
    fn worker_io(&mut self, _w: usize) -> Self::Io {
        self.1.take().unwrap()
    }
    fn port_stats(&self, p: PortId) -> PortStats {
        self.0.port_stats(p)
    }
}

/// The loop's packet buffer (a DPDK mbuf).
pub type Buf = <<Preloaded as Backend>::Io as WorkerIo>::Buf;

/// Start one worker forwarding 128 packets in a loop between two `net_ring` ports through
/// `RefreshTtl`, the real `l3fwd` and `extra` (if any), with the given egress schedulers.
/// Put 64 frames on each of the two ring ports (through `io`'s tx, so they come back as rx):
/// port 0's for 198.51.100.1 (routed to port 1 by [`loop_routes`]), port 1's the reverse.
pub fn seed_both_ports(io: &mut <DpdkBackend as Backend>::Io) {
    for (port, mac, dst) in [
        (0u16, MAC0, Ipv4Addr::new(198, 51, 100, 1)),
        (1, MAC1, Ipv4Addr::new(203, 0, 113, 1)),
    ] {
        let mut b = Burst::new();
        for _ in 0..64 {
            let f = frame(mac, dst);
            let mut m = io.alloc().unwrap();
            m.append(f.len()).unwrap().copy_from_slice(&f);
            b.push(m);
        }
        assert_eq!(io.tx_burst(port, 0, &mut b), 64);
    }
}

/// Routes that send each seeded frame out of the other ring port. Next-hop MAC = the
/// receiving port's own MAC, so the looped frame is "for us" again.
pub fn loop_routes() -> RouteTable {
    let mut t = RouteTable::default();
    t.insert(
        IpAddr::V4(Ipv4Addr::new(198, 51, 100, 0)),
        24,
        NextHop { port: 1, mac: MAC1 },
    );
    t.insert(
        IpAddr::V4(Ipv4Addr::new(203, 0, 113, 0)),
        24,
        NextHop { port: 0, mac: MAC0 },
    );
    t
}

/// A DPDK backend on the `net_ring0` / `net_ring1` vdevs (ports "a" and "b"), no hugepages,
/// `mem_mb` MB, `workers` workers with 4,095 mbufs each.
pub fn ring_backend(workers: usize, mem_mb: u32) -> DpdkBackend {
    let eal = peregrine_testkit::dpdk::eal_args(mem_mb, &["net_ring0", "net_ring1"]);
    DpdkBackend::new(DpdkConfig {
        eal_args: eal,
        ports: vec![
            DpdkPortConfig::new("a", "net_ring0"),
            DpdkPortConfig::new("b", "net_ring1"),
        ],
        workers,
        mbufs_per_worker: 4095,
        mbuf_cache: 64,
        data_room: DpdkConfig::DEFAULT_DATA_ROOM,
    })
    .expect("net_ring backend")
}

pub fn start_ring_loop(
    egress: Vec<Option<EgressConfig>>,
    extra: impl Fn() -> Option<Box<dyn Stage<Buf>>>,
) -> (Running, Publisher<RouteTable>) {
    let mut be = ring_backend(1, 128);
    let mut io = be.worker_io(0);
    // Port 0 receives packets for 198.51.100.0/24 (routed to port 1) and the reverse.
    seed_both_ports(&mut io);
    let t = loop_routes();
    // Each packet is routed out of its port, loops back in (the ring), and is routed again:
    // every pass goes through the full l3fwd checks and rewrite.
    let routes = Publisher::new(t);
    let mut pre = Preloaded(be, Some(io));
    let cfg = RuntimeConfig {
        workers: vec![WorkerSpec {
            id: 0,
            core: None,
            rx_queues: vec![(0, 0), (1, 0)],
            tx_queue: 0,
        }],
        burst: 32,
        stop_after_idle: None,
        control_queue: 16,
        egress,
    };
    let run = runtime::start(
        &mut pre,
        &|_w: usize, r: &mut Reasons| {
            let mut stages: Vec<Box<dyn Stage<_>>> = vec![
                Box::new(RefreshTtl),
                Box::new(L3Fwd::new(routes.reader(), vec![MAC0, MAC1], false, r)),
            ];
            stages.extend(extra());
            Pipeline::new(stages)
        },
        &cfg,
    )
    .unwrap();
    (run, routes)
}

/// Counter publishes (each worker publishes every 1,024 polls) the warm-up waits for.
const WARM_PUBLISHES: u64 = 4;
/// How far `progress` moves in the warm-up: every worker is in its loop and past its first
/// passes.
const WARM_PROGRESS: u64 = 10_000;
/// Counter publishes a window covers at least: every worker's periodic work ran in it.
const WINDOW_PUBLISHES: u64 = 4;

/// Polls (bursts and idle polls) as the workers last published them: it moves only when a
/// worker publishes, every 1,024 of its polls.
fn polls(c: &Counters) -> u64 {
    c.bursts + c.idle_polls
}

/// Watch a running loop for a window of steady forwarding and count the allocations in it:
/// (how far `progress` moved in the window, allocations in the window).
///
/// Both ends are states of the loop, not clock times (the wall clock is only testkit's hang
/// guard): the warm-up lasts until `progress` moved `WARM_PROGRESS` and the workers published
/// their counters `WARM_PUBLISHES` times, so first passes are behind us (with several
/// workers, `progress` must be something each of them does); the window lasts until
/// `progress` moved at least `min` more, the workers published `WINDOW_PUBLISHES` more
/// times, and `more` holds of the counters. Reading the counters allocates on this thread:
/// those allocations are the test's, not the workers', and are not counted.
pub fn window(
    run: &Running,
    progress: impl Fn(&Counters) -> u64,
    min: u64,
    more: impl Fn(&Counters) -> bool,
) -> (u64, u64) {
    let c0 = run.counters();
    let (p0, q0) = (progress(&c0), polls(&c0));
    wait_until("the loop warmed up", || {
        let c = run.counters();
        progress(&c) >= p0 + WARM_PROGRESS && polls(&c) >= q0 + WARM_PUBLISHES * 1024
    });
    let own = thread_allocs();
    let before = GLOBAL.allocs();
    let c1 = run.counters();
    let (p1, q1) = (progress(&c1), polls(&c1));
    let mut moved = 0;
    wait_until("a window of steady forwarding", || {
        let c = run.counters();
        moved = progress(&c) - p1;
        moved >= min && polls(&c) >= q1 + WINDOW_PUBLISHES * 1024 && more(&c)
    });
    let allocs = GLOBAL.allocs() - before;
    let own = thread_allocs() - own;
    (moved, allocs - own)
}

/// [`window`] over forwarded packets (at least `min`); stop and return (packets forwarded
/// in the window, allocations in the window, final counters).
pub fn measure(run: Running, min: u64, more: impl Fn(&Counters) -> bool) -> (u64, u64, Counters) {
    let (forwarded, allocs) = window(&run, Counters::total_rx, min, more);
    run.request_stop();
    let total = run.join();
    (forwarded, allocs, total)
}
