//! The poll-mode worker loop and the runtime that starts, watches and stops workers.
//!
//! A worker owns its rx queues, its tx queue on every port, its pipeline and its counters.
//! Per burst: rx -> stages -> dispatch (tx per port / drop by reason / to control) -> tx.
//! Nothing on that path allocates, locks or makes a syscall; the control thread reads the
//! worker's counters from atomics the worker refreshes every few thousand polls.

use super::batch::{Action, Batch};
use super::counters::{Counters, SharedCounters};
use super::reason::Reasons;
use super::stage::{Context, Pipeline, PipelineFactory};
use crate::buffer::PacketBuf;
use crate::io::{Backend, Burst, PortId, PortInfo, WorkerIo, MAX_BURST};
use arrayvec::ArrayVec;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes of an exception packet copied to the control thread.
pub const CONTROL_SNAP: usize = 2048;

/// A packet the pipeline handed to the control thread (ARP, unknown traffic, ...), copied so
/// the buffer goes straight back to the worker's pool.
#[derive(Debug, Clone)]
pub struct ControlPacket {
    pub worker: usize,
    pub port: PortId,
    /// Original length; `data` holds at most [`CONTROL_SNAP`] bytes of it.
    pub len: usize,
    pub data: ArrayVec<u8, CONTROL_SNAP>,
}

/// Which queues a worker polls and where it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSpec {
    pub id: usize,
    /// CPU to pin to, if any.
    pub core: Option<usize>,
    /// (port, rx queue) pairs this worker polls.
    pub rx_queues: Vec<(PortId, u16)>,
    /// This worker's tx queue on every port.
    pub tx_queue: u16,
}

/// Runtime-wide settings.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub workers: Vec<WorkerSpec>,
    /// Packets per rx burst (32..=256).
    pub burst: usize,
    /// Stop once no packet has arrived for this long (replays on ports with no end signal).
    pub stop_after_idle: Option<Duration>,
    /// Capacity of the worker -> control exception queue (per runtime).
    pub control_queue: usize,
}

const PUBLISH_EVERY: u64 = 1024;

/// When traffic was last seen, for `stop_after_idle`: busy polls only set a flag.
#[derive(Debug)]
struct IdleClock {
    since: Instant,
    saw_rx: bool,
}

struct Worker<I: WorkerIo> {
    spec: WorkerSpec,
    io: I,
    pipeline: Pipeline<I::Buf>,
    counters: Counters,
    shared: Arc<SharedCounters>,
    txq: Vec<Burst<I::Buf>>,
    /// Some `txq` holds packets (set by the slow dispatch path).
    tx_pending: bool,
    control: Sender<ControlPacket>,
    stop: Arc<AtomicBool>,
    epoch: Instant,
    burst: usize,
    stop_after_idle: Option<Duration>,
}

impl<I: WorkerIo> Worker<I> {
    fn run(mut self) -> Counters {
        if let Some(core) = self.spec.core {
            if !core_affinity::set_for_current(core_affinity::CoreId { id: core }) {
                tracing::warn!(worker = self.spec.id, core, "could not pin worker to core");
            }
        }
        let mut batch: Batch<I::Buf> = Batch::new();
        let mut cx = Context::live(self.epoch, self.spec.id);
        let mut polls: u64 = 0;
        let mut idle = IdleClock {
            since: Instant::now(),
            saw_rx: false,
        };
        let rxq = std::mem::take(&mut self.spec.rx_queues);
        loop {
            let mut got = 0usize;
            for &(port, queue) in &rxq {
                let n = self.io.rx_burst(port, queue, &mut batch.pkts, self.burst);
                if n == 0 {
                    continue;
                }
                got += n;
                if let Some(c) = self.counters.rx_pkts.get_mut(port as usize) {
                    *c += n as u64;
                }
                self.counters.bursts += 1;
                batch.rx_port = port;
                batch.reset_dispositions();
                cx.next_batch();
                self.pipeline.run(&mut batch, &cx);
                self.dispatch(&mut batch);
                self.flush_tx();
                debug_assert!(batch.pkts.is_empty());
            }
            polls += 1;
            if got == 0 {
                self.counters.idle_polls += 1;
                if self.idle_should_stop(&mut idle, polls) {
                    break;
                }
            } else {
                idle.saw_rx = true;
            }
            if polls.is_multiple_of(PUBLISH_EVERY) {
                self.shared.store(&self.counters);
                if self.stop.load(Ordering::Relaxed) {
                    break;
                }
            }
        }
        self.io.flush();
        self.shared.store(&self.counters);
        self.counters
    }

    /// Called on an empty poll: flushes writers now and then and decides whether to stop.
    #[cold]
    fn idle_should_stop(&mut self, idle: &mut IdleClock, polls: u64) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return true;
        }
        if self.io.rx_exhausted() {
            return true;
        }
        if polls.is_multiple_of(256) {
            self.io.flush();
            self.shared.store(&self.counters);
            if let Some(limit) = self.stop_after_idle {
                // The clock is read here, on the idle path, never per busy poll.
                if std::mem::take(&mut idle.saw_rx) {
                    idle.since = Instant::now();
                } else if idle.since.elapsed() >= limit {
                    return true;
                }
            }
        }
        std::hint::spin_loop();
        false
    }

    #[inline]
    fn dispatch(&mut self, batch: &mut Batch<I::Buf>) {
        // Whole batch decided at once (cross-connects, one-way forwarding): hand the batch's
        // array straight to the driver, no per-packet work at all.
        if let Some(d) = batch.uniform() {
            if let Action::Tx(p) = d.action() {
                // The per-port tx queues are empty here: `flush_tx` drains them after every
                // batch, so sending this batch first cannot reorder anything.
                if (p as usize) < self.txq.len() {
                    debug_assert!(self.txq[p as usize].is_empty());
                    let n = batch.pkts.len();
                    let sent = self.io.tx_burst(p, self.spec.tx_queue, &mut batch.pkts);
                    self.counters.tx_pkts[p as usize] += sent as u64;
                    if sent < n {
                        self.counters.drops[Reasons::TX_FULL.0 as usize] += (n - sent) as u64;
                    }
                    return;
                }
            }
        }
        self.tx_pending = true;
        let rx_port = batch.rx_port;
        for (pkt, d) in batch.drain() {
            match d.action() {
                Action::Tx(p) => match self.txq.get_mut(p as usize) {
                    Some(q) => {
                        if let Err(e) = q.try_push(pkt) {
                            self.count_drop(Reasons::TX_FULL.0);
                            self.io.release(e.element());
                        }
                    }
                    None => {
                        self.count_drop(Reasons::BAD_TX_PORT.0);
                        self.io.release(pkt);
                    }
                },
                Action::Drop(r) => {
                    self.count_drop(r.0);
                    self.io.release(pkt);
                }
                Action::ToControl => {
                    self.send_to_control(rx_port, &pkt);
                    self.io.release(pkt);
                }
                Action::Continue => {
                    self.count_drop(Reasons::NO_DISPOSITION.0);
                    self.io.release(pkt);
                }
            }
        }
    }

    #[inline]
    fn count_drop(&mut self, r: u16) {
        if let Some(c) = self.counters.drops.get_mut(r as usize) {
            *c += 1;
        }
    }

    fn send_to_control(&mut self, port: PortId, pkt: &I::Buf) {
        let bytes = pkt.data();
        let mut data = ArrayVec::new();
        let _ = data.try_extend_from_slice(&bytes[..bytes.len().min(CONTROL_SNAP)]);
        let msg = ControlPacket {
            worker: self.spec.id,
            port,
            len: bytes.len(),
            data,
        };
        match self.control.try_send(msg) {
            Ok(()) => self.counters.to_control += 1,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.count_drop(Reasons::CONTROL_QUEUE_FULL.0)
            }
        }
    }

    #[inline]
    fn flush_tx(&mut self) {
        if !self.tx_pending {
            return;
        }
        self.tx_pending = false;
        let q = self.spec.tx_queue;
        for (port, pkts) in self.txq.iter_mut().enumerate() {
            if pkts.is_empty() {
                continue;
            }
            let n = pkts.len();
            let sent = self.io.tx_burst(port as PortId, q, pkts);
            self.counters.tx_pkts[port] += sent as u64;
            if sent < n {
                self.counters.drops[Reasons::TX_FULL.0 as usize] += (n - sent) as u64;
            }
        }
    }
}

/// Workers started on a backend; the handle the control thread keeps.
#[derive(Debug)]
pub struct Running {
    handles: Vec<JoinHandle<Counters>>,
    shared: Vec<Arc<SharedCounters>>,
    stop: Arc<AtomicBool>,
    control_rx: Receiver<ControlPacket>,
    reasons: Reasons,
    ports: Vec<PortInfo>,
    stage_names: Vec<&'static str>,
}

/// Start one thread per [`WorkerSpec`], each with its own I/O handle and pipeline.
pub fn start<Bk, F>(backend: &mut Bk, factory: &F, cfg: &RuntimeConfig) -> std::io::Result<Running>
where
    Bk: Backend,
    Bk::Io: 'static,
    F: PipelineFactory<<Bk::Io as WorkerIo>::Buf>,
{
    let burst = cfg.burst.clamp(1, MAX_BURST);
    let ports = backend.ports().to_vec();
    let mut reasons = Reasons::new();
    let pipelines: Vec<_> = cfg
        .workers
        .iter()
        .map(|w| factory.build(w.id, &mut reasons))
        .collect();
    let stage_names = pipelines
        .first()
        .map(|p| p.stage_names())
        .unwrap_or_default();
    let stop = Arc::new(AtomicBool::new(false));
    let (ctl_tx, control_rx) = crossbeam_channel::bounded(cfg.control_queue.max(1));
    let epoch = Instant::now();
    let mut handles = Vec::new();
    let mut shared = Vec::new();
    for (spec, pipeline) in cfg.workers.iter().cloned().zip(pipelines) {
        let sc = Arc::new(SharedCounters::new(ports.len(), reasons.len()));
        shared.push(sc.clone());
        let w = Worker {
            io: backend.worker_io(spec.id),
            pipeline,
            counters: Counters::new(ports.len(), reasons.len()),
            shared: sc,
            txq: (0..ports.len()).map(|_| Burst::new()).collect(),
            tx_pending: false,
            control: ctl_tx.clone(),
            stop: stop.clone(),
            epoch,
            burst,
            stop_after_idle: cfg.stop_after_idle,
            spec,
        };
        let name = format!("pg-worker-{}", w.spec.id);
        handles.push(
            std::thread::Builder::new()
                .name(name)
                .spawn(move || w.run())?,
        );
    }
    Ok(Running {
        handles,
        shared,
        stop,
        control_rx,
        reasons,
        ports,
        stage_names,
    })
}

impl Running {
    /// Counters summed over workers, as last published.
    pub fn counters(&self) -> Counters {
        let mut total = Counters::new(self.ports.len(), self.reasons.len());
        for s in &self.shared {
            total.add(&s.load());
        }
        total
    }

    pub fn reasons(&self) -> &Reasons {
        &self.reasons
    }

    pub fn ports(&self) -> &[PortInfo] {
        &self.ports
    }

    pub fn stage_names(&self) -> &[&'static str] {
        &self.stage_names
    }

    /// Exception packets from the workers.
    pub fn control_rx(&self) -> &Receiver<ControlPacket> {
        &self.control_rx
    }

    /// The flag workers poll; set it (e.g. from a signal handler) to stop them.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// True once every worker has returned.
    pub fn finished(&self) -> bool {
        self.handles.iter().all(|h| h.is_finished())
    }

    /// Wait for every worker; returns the final counters summed over workers.
    pub fn join(self) -> Counters {
        let mut total = Counters::new(self.ports.len(), self.reasons.len());
        for h in self.handles {
            match h.join() {
                Ok(c) => total.add(&c),
                Err(_) => tracing::error!("a worker panicked"),
            }
        }
        total
    }
}
