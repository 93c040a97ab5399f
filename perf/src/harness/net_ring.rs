//! One forwarding worker on two DPDK `net_ring` vdevs with packets already in flight: the
//! backend, the injection of the first packets, the runtime configuration and the
//! measurement window.

use peregrine_dataplane::io::dpdk::{DpdkBackend, DpdkConfig, DpdkPortConfig};
use peregrine_dataplane::io::{Backend, Burst, PortId, PortInfo, PortStats, WorkerIo};
use peregrine_dataplane::runtime::{EgressConfig, RuntimeConfig, WorkerSpec};
use peregrine_dataplane::PacketBuf;
use peregrine_testkit::alloc::CountingAlloc;
use std::time::{Duration, Instant};

/// A DPDK backend on `net_ring0` and `net_ring1` (EAL main lcore 0, no hugepages, `mem_mb`
/// megabytes), one worker's mbuf pool.
pub fn backend(mem_mb: u32) -> DpdkBackend {
    backend_for(mem_mb, 1)
}

/// [`backend`] for `workers` workers: a queue pair per worker on each port (a `net_ring`
/// port loops its tx queue `q` back to its rx queue `q`, so each worker's packets come back
/// to it unless a stage hands them to another) and an mbuf pool per worker.
pub fn backend_for(mem_mb: u32, workers: usize) -> DpdkBackend {
    backend_with(mem_mb, workers, &[])
}

/// [`backend_for`] with more vdev ports after the two rings, each `(port name, vdev)` (e.g.
/// `("nic", "net_null0")`, a sink standing in for a NIC).
pub fn backend_with(mem_mb: u32, workers: usize, extra: &[(&str, &str)]) -> DpdkBackend {
    let vdevs: Vec<&str> = ["net_ring0", "net_ring1"]
        .into_iter()
        .chain(extra.iter().map(|(_, vdev)| *vdev))
        .collect();
    let eal_args = peregrine_testkit::dpdk::eal_args(mem_mb, &vdevs);
    let mut ports = vec![
        DpdkPortConfig::new("r0", "net_ring0"),
        DpdkPortConfig::new("r1", "net_ring1"),
    ];
    for (name, vdev) in extra {
        ports.push(DpdkPortConfig::new(*name, *vdev));
    }
    let cfg = DpdkConfig {
        eal_args,
        ports,
        workers,
        mbufs_per_worker: 8191,
        mbuf_cache: 256,
        data_room: DpdkConfig::DEFAULT_DATA_ROOM,
    };
    DpdkBackend::new(cfg).expect("DPDK backend on net_ring vdevs")
}

/// The backend with the worker's I/O created (and the ports preloaded) before the runtime
/// starts: hands the runtime the I/O the harness took to inject the first packets.
pub struct Preloaded {
    inner: DpdkBackend,
    io: Vec<Option<<DpdkBackend as Backend>::Io>>,
}

impl std::fmt::Debug for Preloaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preloaded")
            .field("ports", &self.inner.ports().len())
            .field("io_taken", &self.io.iter().filter(|i| i.is_none()).count())
            .finish()
    }
}

impl Preloaded {
    /// Sends `count` frames on each of ports 0 and 1 (cycling over `frames`, which must not
    /// be empty); the rings loop them back as the worker's first input.
    pub fn inject<F: AsRef<[u8]>>(backend: DpdkBackend, frames: &[F], count: usize) -> Self {
        Self::inject_workers(backend, frames, count, 1)
    }

    /// [`Preloaded::inject`] for `workers` workers: `count` frames on each port's queue of
    /// each worker, worker `w` starting `w * count` frames further into `frames`.
    pub fn inject_workers<F: AsRef<[u8]>>(
        mut backend: DpdkBackend,
        frames: &[F],
        count: usize,
        workers: usize,
    ) -> Self {
        let mut ios = Vec::with_capacity(workers);
        for w in 0..workers {
            let mut io = backend.worker_io(w);
            for port in 0..2u16 {
                let mut b = Burst::new();
                for k in 0..count {
                    let mut m = io.alloc().expect("mbuf");
                    let f = frames[(w * count + k) % frames.len()].as_ref();
                    m.append(f.len()).expect("room").copy_from_slice(f);
                    b.push(m);
                }
                io.tx_burst(port, w as u16, &mut b);
            }
            ios.push(Some(io));
        }
        Self {
            inner: backend,
            io: ios,
        }
    }

    /// Packets received on both ports so far.
    pub fn rx_packets(&self) -> u64 {
        self.port_stats(0).ipackets + self.port_stats(1).ipackets
    }
}

impl Backend for Preloaded {
    type Io = <DpdkBackend as Backend>::Io;
    fn ports(&self) -> &[PortInfo] {
        self.inner.ports()
    }
    fn worker_io(&mut self, worker: usize) -> Self::Io {
        self.io[worker].take().expect("each worker's I/O once")
    }
    fn port_stats(&self, port: PortId) -> PortStats {
        self.inner.port_stats(port)
    }
}

/// One worker pinned to `core` polling queue 0 of both ports; an egress scheduler with the
/// default configuration on both ports when `egress`.
pub fn one_worker(core: usize, burst: usize, egress: bool) -> RuntimeConfig {
    RuntimeConfig {
        workers: vec![WorkerSpec {
            id: 0,
            core: Some(core),
            rx_queues: vec![(0, 0), (1, 0)],
            tx_queue: 0,
        }],
        burst,
        stop_after_idle: None,
        control_queue: 16,
        egress: if egress {
            vec![Some(EgressConfig::default()); 2]
        } else {
            Vec::new()
        },
    }
}

/// `cores.len()` workers, worker `w` pinned to `cores[w]` polling and sending on queue `w`
/// of both ports (no egress scheduler).
pub fn workers_on(cores: &[usize], burst: usize) -> RuntimeConfig {
    RuntimeConfig {
        workers: cores
            .iter()
            .enumerate()
            .map(|(w, &core)| WorkerSpec {
                id: w,
                core: Some(core),
                rx_queues: vec![(0, w as u16), (1, w as u16)],
                tx_queue: w as u16,
            })
            .collect(),
        ..one_worker(cores[0], burst, false)
    }
}

/// A measurement window: rx packets, time and allocations at its start.
#[derive(Debug)]
pub struct Window {
    rx: u64,
    at: Instant,
    allocs: u64,
}

impl Window {
    pub fn open<A>(pre: &Preloaded, alloc: &CountingAlloc<A>) -> Self {
        let allocs = alloc.allocs();
        Self {
            rx: pre.rx_packets(),
            at: Instant::now(),
            allocs,
        }
    }

    /// Time since the window opened.
    pub fn elapsed(&self) -> Duration {
        self.at.elapsed()
    }

    /// (packets per second, allocations) over the window.
    pub fn close<A>(self, pre: &Preloaded, alloc: &CountingAlloc<A>) -> (f64, u64) {
        let (rx, at) = (pre.rx_packets(), Instant::now());
        let allocs = alloc.allocs() - self.allocs;
        ((rx - self.rx) as f64 / (at - self.at).as_secs_f64(), allocs)
    }
}

/// A 1 s warm-up, then a window of `seconds` in which this thread only sleeps:
/// (packets per second, allocations).
pub fn measure<A>(pre: &Preloaded, alloc: &CountingAlloc<A>, seconds: f64) -> (f64, u64) {
    std::thread::sleep(Duration::from_secs(1));
    let w = Window::open(pre, alloc);
    std::thread::sleep(Duration::from_secs_f64(seconds));
    w.close(pre, alloc)
}

/// The non-zero drop counters of a worker run, by reason name.
pub fn drops_by_reason(names: &[&str], drops: &[u64]) -> Vec<(String, u64)> {
    names
        .iter()
        .zip(drops)
        .filter(|(_, d)| **d > 0)
        .map(|(n, d)| (n.to_string(), *d))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_nonzero_drops_are_reported() {
        let d = drops_by_reason(&["a", "b", "c"], &[0, 3, 1]);
        assert_eq!(d, vec![("b".to_string(), 3), ("c".to_string(), 1)]);
    }

    #[test]
    fn worker_config_polls_both_ports() {
        let c = one_worker(3, 16, true);
        assert_eq!(c.workers[0].core, Some(3));
        assert_eq!(c.workers[0].rx_queues, vec![(0, 0), (1, 0)]);
        assert_eq!((c.burst, c.egress.len()), (16, 2));
        assert!(one_worker(1, 32, false).egress.is_empty());
    }
}
