//! Control-to-worker injection (`Running::injector`): frames go out of the chosen port
//! byte-identical, on the memory backend and through a real DPDK `net_ring` port; refused
//! and failed injections are reported or counted under `inject_failed`.

use peregrine_dataplane::io::dpdk::{DpdkBackend, DpdkConfig, DpdkPortConfig};
use peregrine_dataplane::io::memory::{MemBackend, MemPort, MemWorkerIo};
use peregrine_dataplane::io::{Backend, PortId, PortInfo, PortStats, WorkerIo};
use peregrine_dataplane::runtime::{
    self, Batch, Context, Disposition, InjectError, Pipeline, Reasons, Running, RuntimeConfig,
    Stage, WorkerSpec, INJECT_MAX,
};
use peregrine_dataplane::{OwnedBuf, PacketBuf};
use peregrine_testkit::tools::{wait_until, START_GUARD};
use std::time::{Duration, Instant};

/// Hands every received packet to the control thread.
struct AllToControl;

impl<B: PacketBuf> Stage<B> for AllToControl {
    fn name(&self) -> &'static str {
        "all_to_control"
    }
    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        batch.set_active(Disposition::TO_CONTROL);
    }
}

fn frame(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn cfg(rx_queues: Vec<(PortId, u16)>) -> RuntimeConfig {
    RuntimeConfig {
        workers: vec![WorkerSpec {
            id: 0,
            core: None,
            rx_queues,
            tx_queue: 0,
        }],
        burst: 32,
        stop_after_idle: None,
        control_queue: 64,
        egress: Vec::new(),
    }
}

fn live_ports() -> Vec<MemPort> {
    ["n3", "n6"]
        .iter()
        .map(|n| MemPort {
            name: n.to_string(),
            live: true,
            ..Default::default()
        })
        .collect()
}

fn start_mem(be: &mut impl Backend<Io = MemWorkerIo>) -> Running {
    runtime::start(
        be,
        &|_w: usize, _r: &mut Reasons| Pipeline::<OwnedBuf>::new(vec![Box::new(AllToControl)]),
        &cfg(vec![(0, 0), (1, 0)]),
    )
    .unwrap()
}

#[test]
fn injected_frames_leave_the_chosen_port_byte_identical_and_in_order() {
    let mut be = MemBackend::new(live_ports(), 1);
    let (l0, l1) = (be.tx_log(0), be.tx_log(1));
    let run = start_mem(&mut be);
    let inj = run.injector();
    assert_eq!(inj.workers(), 1);
    let sent: Vec<Vec<u8>> = (0..10).map(|i| frame(60 + 97 * i, i as u8)).collect();
    let big = frame(INJECT_MAX, 7);
    for f in &sent {
        inj.inject(0, 1, f).unwrap();
    }
    // Clone + Send: another thread can inject too.
    let other = inj.clone();
    let big2 = big.clone();
    std::thread::spawn(move || other.inject(0, 0, &big2).unwrap())
        .join()
        .unwrap();
    wait_until("11 injected frames", || {
        l1.lock().unwrap().len() == 10 && l0.lock().unwrap().len() == 1
    });
    assert_eq!(
        *l1.lock().unwrap(),
        sent,
        "port 1: byte-identical, in order"
    );
    assert_eq!(l0.lock().unwrap()[0], big, "port 0: a full-size frame");
    // Refused before reaching a worker.
    assert_eq!(
        inj.inject(1, 0, &sent[0]),
        Err(InjectError::NoSuchWorker(1))
    );
    assert_eq!(inj.inject(0, 2, &sent[0]), Err(InjectError::NoSuchPort(2)));
    assert_eq!(inj.inject(0, 0, &[]), Err(InjectError::BadLength(0)));
    assert_eq!(
        inj.inject(0, 0, &frame(INJECT_MAX + 1, 0)),
        Err(InjectError::BadLength(INJECT_MAX + 1))
    );
    run.request_stop();
    let total = run.join();
    assert_eq!(total.injected, 11);
    // Not forwarded packets: `tx_pkts` accounts for received ones only.
    assert_eq!(total.tx_pkts, vec![0, 0]);
    assert_eq!(total.drops[Reasons::INJECT_FAILED.0 as usize], 0);
    assert_eq!(total.total_drops(), 0);
    // After the workers stopped, injection says so.
    assert_eq!(inj.inject(0, 0, &sent[0]), Err(InjectError::Stopped));
}

/// A memory backend whose ports take nothing (a full tx ring).
struct FullTx(MemBackend);

impl Backend for FullTx {
    type Io = MemWorkerIo;
    fn ports(&self) -> &[PortInfo] {
        self.0.ports()
    }
    fn worker_io(&mut self, w: usize) -> MemWorkerIo {
        let mut io = self.0.worker_io(w);
        io.tx_limit = 0;
        io
    }
    fn port_stats(&self, p: PortId) -> PortStats {
        self.0.port_stats(p)
    }
}

#[test]
fn a_frame_the_port_does_not_take_is_counted_inject_failed() {
    let mut be = FullTx(MemBackend::new(live_ports(), 1));
    let run = start_mem(&mut be);
    let inj = run.injector();
    for i in 0..3 {
        inj.inject(0, 0, &frame(100, i)).unwrap();
    }
    let failed = |r: &Running| r.counters().drops[Reasons::INJECT_FAILED.0 as usize];
    wait_until("3 failed injections published", || failed(&run) == 3);
    run.request_stop();
    let total = run.join();
    assert_eq!(total.drops[Reasons::INJECT_FAILED.0 as usize], 3);
    assert_eq!(total.injected, 0);
    assert_eq!(total.total_tx(), 0);
    assert_eq!(be.0.tx_log(0).lock().unwrap().len(), 0);
}

/// Through DPDK: a `net_ring` port loops its tx queue back to its rx queue, so the injected
/// frame, sent from an mbuf of the worker's pool, comes back in and reaches the control
/// thread, where it must equal what was injected.
#[test]
fn injected_frame_goes_out_of_a_dpdk_net_ring_port_byte_identical() {
    let eal: Vec<String> = [
        "-l",
        "0",
        "--no-huge",
        "--no-pci",
        "-m",
        "128",
        "--no-shconf",
        "--file-prefix=peregrine-inject-test",
        "--no-telemetry",
        "--log-level=lib.eal:error",
        "--vdev=net_ring0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut be = DpdkBackend::new(DpdkConfig {
        eal_args: eal,
        ports: vec![DpdkPortConfig::new("ring", "net_ring0")],
        workers: 1,
        mbufs_per_worker: 511,
        mbuf_cache: 32,
        data_room: DpdkConfig::DEFAULT_DATA_ROOM,
    })
    .expect("net_ring backend");
    let run = runtime::start(
        &mut be,
        &|_w: usize, _r: &mut Reasons| {
            Pipeline::<<<DpdkBackend as Backend>::Io as WorkerIo>::Buf>::new(vec![Box::new(
                AllToControl,
            )])
        },
        &cfg(vec![(0, 0)]),
    )
    .unwrap();
    let inj = run.injector();
    let sent: Vec<Vec<u8>> = [64usize, 60, 1514]
        .iter()
        .map(|&n| frame(n, n as u8))
        .collect();
    for f in &sent {
        inj.inject(0, 0, f).unwrap();
    }
    let mut got = Vec::new();
    let t0 = Instant::now();
    while got.len() < sent.len() && t0.elapsed() < START_GUARD {
        if let Some(p) = run.recv_control(Duration::from_millis(50)) {
            assert_eq!(p.port, 0);
            assert_eq!(p.len, p.data.len());
            got.push(p.data.to_vec());
        }
    }
    run.request_stop();
    let total = run.join();
    assert_eq!(got, sent, "looped back byte-identical and in order");
    assert_eq!(total.injected, 3);
    assert_eq!(total.tx_pkts, vec![0]);
    assert_eq!(total.rx_pkts, vec![3]);
    assert_eq!(total.total_drops(), 0);
}
