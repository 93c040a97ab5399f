//! Hand-offs between workers do not allocate per packet: the `hot_path.rs` approach (a
//! counting global allocator watching a window of steady forwarding between two DPDK
//! `net_ring` ports through the real `l3fwd`), with two workers, where a stage before l3fwd
//! hands every packet received from a port to the other worker. Each pass of a packet is
//! thus: rx on one worker, staged and pushed in a burst to the SPSC ring, polled and resumed
//! by the other worker, routed and sent on that worker's tx queue, which the ring PMD loops
//! back to that worker's rx queue. The allocation count must not move.

mod common;

use common::{loop_routes, seed_both_ports, RefreshTtl, MAC0, MAC1};
use peregrine_dataplane::io::dpdk::DpdkBackend;
use peregrine_dataplane::io::{Backend, PortId, PortInfo, PortStats};
use peregrine_dataplane::runtime::Publisher;
use peregrine_dataplane::runtime::{
    self, Batch, Context, Counters, Disposition, Pipeline, Reasons, RuntimeConfig, Stage,
    WorkerSpec,
};
use peregrine_dataplane::stages::l3fwd::L3Fwd;
use peregrine_dataplane::PacketBuf;

/// Hands every packet to the other of two workers, resuming at the next stage.
struct Bounce;

impl<B: PacketBuf> Stage<B> for Bounce {
    fn name(&self) -> &'static str {
        "bounce"
    }
    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        batch.set_active(Disposition::handoff(1 - cx.worker as u16, 2));
    }
}

type Io = <DpdkBackend as Backend>::Io;

/// A backend whose worker I/O handles were taken (and used to preload the rings) already.
struct Preloaded(DpdkBackend, Vec<Option<Io>>);

impl Backend for Preloaded {
    type Io = Io;
    fn ports(&self) -> &[PortInfo] {
        self.0.ports()
    }
    fn worker_io(&mut self, w: usize) -> Io {
        self.1[w].take().unwrap()
    }
    fn port_stats(&self, p: PortId) -> PortStats {
        self.0.port_stats(p)
    }
}

#[test]
fn handoff_allocates_nothing_per_packet() {
    let mut be = common::ring_backend(2, 256);
    let mut ios = vec![Some(be.worker_io(0)), Some(be.worker_io(1))];
    // 64 packets per port on worker 0's queues; the first pass hands them to worker 1.
    let io = ios[0].as_mut().unwrap();
    seed_both_ports(io);
    let t = loop_routes();
    let routes = Publisher::new(t);
    let mut pre = Preloaded(be, ios);
    let cfg = RuntimeConfig {
        workers: (0..2)
            .map(|id| WorkerSpec {
                id,
                core: None,
                rx_queues: vec![(0, id as u16), (1, id as u16)],
                tx_queue: id as u16,
            })
            .collect(),
        burst: 32,
        stop_after_idle: None,
        control_queue: 16,
        egress: vec![],
    };
    let run = runtime::start(
        &mut pre,
        &|_w: usize, r: &mut Reasons| {
            Pipeline::new(vec![
                Box::new(RefreshTtl) as Box<dyn Stage<_>>,
                Box::new(Bounce),
                Box::new(L3Fwd::new(routes.reader(), vec![MAC0, MAC1], false, r)),
            ])
        },
        &cfg,
    )
    .unwrap();
    // A window of at least 20,000 hand-offs (and the workers' periodic work), not a fixed
    // time: two spinning workers on a shared 2-core machine go at the load's pace. Counted
    // where they are received: the warm-up then also waits for the receiving worker to be
    // in its loop (a worker that starts late under load would allocate its start-up in the
    // window; seen once with the sum of hand-offs sent).
    let received = |c: &Counters| c.handoff_received;
    let (handed, allocs) = common::window(&run, received, 20_000, |_| true);
    run.request_stop();
    let per = run.join_workers();
    // Two spinning workers on a shared 2-core machine: the rate varies with the load, so
    // the bar is only that hand-offs kept happening through the window.
    assert!(handed > 1_000, "only {handed} hand-offs in the window");
    for (w, c) in per.iter().enumerate() {
        assert!(
            c.handed_off > 0 && c.handoff_received > 0,
            "worker {w}: {c:?}"
        );
        assert_eq!(c.total_drops(), 0, "worker {w}: {c:?}");
    }
    assert_eq!(allocs, 0, "{allocs} allocations during {handed} hand-offs");
}
