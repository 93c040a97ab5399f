//! A pure-Rust port backend that replays capture files on rx and writes capture files on tx.
//!
//! **For tests and trace replay, not line rate.** Rx is fast (packets are preloaded into
//! memory and copied into recycled buffers, nothing allocates once warm), but tx goes through
//! a [`std::sync::Mutex`]-protected buffered file writer shared by all workers.
//!
//! # Ports and workers
//!
//! * Each port has at most one rx queue (queue 0), fed by its `rx` file (classic pcap or
//!   pcapng, Ethernet only; see [`super::pcapfile`]). The queue is served by exactly one
//!   worker: **worker `w` polls the ports whose index `% workers == w`**.
//!   [`PcapBackend::rx_queues_of`] lists them, so the runtime knows which worker polls what.
//! * A port's tx side, if it has a `tx` file, is shared by every worker: one
//!   `Arc<Mutex<PcapWriter>>` per port, locked once per burst. Every tx queue id maps to it;
//!   the port reports `tx_queues = workers`. Packets sent on a port without a tx file are
//!   freed and counted in `oerrors`.
//! * Transmitted packets are written with their [`Meta::timestamp_ns`] if non-zero (so a
//!   replayed packet keeps its capture time), else with the current wall-clock time. Output
//!   files are nanosecond-resolution classic pcap.
//!
//! # Replay
//!
//! Rx files are read fully at construction into one byte arena per port plus an index, capped
//! at [`PRELOAD_LIMIT`] bytes in total. [`Replay::Fast`] releases packets as fast as they are
//! polled ([`Replay::Recorded`] too, with the workers' clock following the capture
//! timestamps); [`Replay::Timed`] releases each packet no earlier than its offset from the first
//! packet of the file divided by `speed`, measured from the first poll of the port, on a
//! [`Clock`] that tests can replace ([`ManualClock`]). Consecutive loops follow each other
//! back to back: loop `k` starts when loop `k - 1`'s last packet was due. Each file is played
//! `loops` times (0 = forever); [`WorkerIo::rx_exhausted`] turns true after the last one.
//! Records whose timestamps go backwards are released as soon as their predecessor is.
//!
//! # Buffers
//!
//! Each worker owns a pool of `pool_size` [`OwnedBuf`]s allocated at construction, with room
//! for the largest frame of that worker's rx files (at least [`DEFAULT_DATA_ROOM`]).
//! `rx_burst` takes from it, `release`, `tx_burst` and `alloc` round-trip through it. When it
//! is empty, `rx_burst` stops short and counts one `rx_nombuf`.
//!
//! With several workers, flow steering moves buffers between them: a worker whose packets
//! are handed off would lend its whole pool to the worker that sends them and frees them.
//! So, as DPDK's mempool backs its per-lcore caches with a shared ring, every pool spills
//! what it cannot keep into one lock-free queue shared by the workers (its slots allocated
//! at construction, `pool_size` per worker) and refills from it when it runs dry; all
//! workers' buffers then have the data room of the largest rx frame of any port.

use super::pcapfile::{PcapFileError, PcapReader, PcapWriter, Resolution};
use super::{Backend, Burst, PortId, PortInfo, PortStats, WorkerIo};
use crate::buffer::{Meta, OwnedBuf, PacketBuf, DEFAULT_DATA_ROOM, DEFAULT_HEADROOM};
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use thiserror::Error;

mod clock;
pub use clock::{Clock, ManualClock, SystemClock};

/// Total bytes of rx packets preloaded into memory across all ports.
pub const PRELOAD_LIMIT: usize = 1 << 30;

/// Total bytes of packet buffers one worker's pool may take.
pub const POOL_MEMORY_LIMIT: usize = 1 << 30;

/// One port of the pcap backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapPortConfig {
    /// Port name (e.g. "n3").
    pub name: String,
    /// Capture file replayed on rx; `None` for a port that never receives.
    pub rx: Option<PathBuf>,
    /// Capture file written on tx (created or truncated); `None` drops transmitted packets.
    pub tx: Option<PathBuf>,
    pub mac: [u8; 6],
}

/// How rx files are paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Replay {
    /// As fast as the workers poll.
    Fast,
    /// At the recorded inter-packet gaps divided by `speed` (2.0 = twice as fast).
    Timed { speed: f64 },
    /// As fast as the workers poll, with the workers' clock following the recorded
    /// timestamps ([`WorkerIo::recorded_clock`]): deterministic timing-dependent behaviour
    /// (meters, usage periods) on any machine.
    Recorded,
}

/// With [`Replay::Recorded`], the longest span of recorded time one batch covers: every
/// packet of a batch is processed at the batch's time (its first packet's timestamp), so
/// this bounds the timing error a meter or timer sees.
pub const RECORDED_BATCH_SPAN_NS: u64 = 50_000;

/// Configuration of a [`PcapBackend`].
#[derive(Debug, Clone, PartialEq)]
pub struct PcapConfig {
    pub ports: Vec<PcapPortConfig>,
    /// Number of workers (at least 1).
    pub workers: usize,
    pub replay: Replay,
    /// How many times each rx file is played; 0 = forever.
    pub loops: u32,
    /// Buffers in each worker's pool (at least 1).
    pub pool_size: usize,
}

impl Default for PcapConfig {
    fn default() -> Self {
        PcapConfig {
            ports: Vec::new(),
            workers: 1,
            replay: Replay::Fast,
            loops: 1,
            pool_size: 1024,
        }
    }
}

/// Errors building a [`PcapBackend`] or taking a worker handle.
#[derive(Debug, Error)]
pub enum PcapError {
    #[error("pcap backend needs at least one worker")]
    NoWorkers,
    #[error("pcap backend needs a buffer pool of at least one buffer")]
    EmptyPool,
    #[error("timed replay speed must be finite and positive, got {0}")]
    BadSpeed(f64),
    #[error("{0} ports configured; port ids are 16-bit")]
    TooManyPorts(usize),
    #[error("tx file {0} is used by more than one port")]
    DuplicateTx(PathBuf),
    #[error("port {port}: reading {path}: {source}")]
    Read {
        port: String,
        path: PathBuf,
        source: PcapFileError,
    },
    #[error("port {port}: creating {path}: {source}")]
    Create {
        port: String,
        path: PathBuf,
        source: PcapFileError,
    },
    #[error("port {port}: rx files exceed the {limit}-byte preload limit")]
    PreloadLimit { port: String, limit: usize },
    #[error(
        "worker {worker}: a pool of {pool_size} buffers of {buf_bytes} bytes exceeds {limit} bytes"
    )]
    PoolTooLarge {
        worker: usize,
        pool_size: usize,
        buf_bytes: usize,
        limit: usize,
    },
    #[error("worker {worker} out of range: the backend has {workers} workers")]
    NoSuchWorker { worker: usize, workers: usize },
    #[error("worker {0}'s handle was already taken")]
    WorkerTaken(usize),
}

type TxFile = Arc<Mutex<PcapWriter<BufWriter<File>>>>;

/// Per-port counters, shared by the workers and [`PcapBackend::port_stats`]; updated once
/// per burst with relaxed atomics.
#[derive(Debug, Default)]
struct PortCounters {
    ipackets: AtomicU64,
    ibytes: AtomicU64,
    opackets: AtomicU64,
    obytes: AtomicU64,
    oerrors: AtomicU64,
    ierrors: AtomicU64,
    rx_nombuf: AtomicU64,
}

fn add(c: &AtomicU64, n: u64) {
    if n != 0 {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

/// One record of a preloaded file: where its bytes are in the arena, and its timestamp.
#[derive(Debug, Clone, Copy)]
struct Record {
    offset: usize,
    len: usize,
    ts_ns: u64,
}

/// A preloaded rx file.
#[derive(Debug, Default)]
struct Trace {
    arena: Vec<u8>,
    index: Vec<Record>,
    max_len: usize,
}

impl Trace {
    fn bytes(&self, r: &Record) -> &[u8] {
        &self.arena[r.offset..r.offset + r.len]
    }

    fn first_ts(&self) -> u64 {
        self.index.first().map_or(0, |r| r.ts_ns)
    }

    /// Offset of the last record from the first: the length of one loop in timed replay.
    fn span_ns(&self) -> u64 {
        self.index
            .last()
            .map_or(0, |r| r.ts_ns.saturating_sub(self.first_ts()))
    }
}

/// Read all of `path` into a trace, with `budget` bytes of packet data at most.
fn preload(port: &str, path: &PathBuf, budget: usize) -> Result<Trace, PcapError> {
    let read_err = |source| PcapError::Read {
        port: port.into(),
        path: path.clone(),
        source,
    };
    let mut reader = PcapReader::open(path).map_err(read_err)?;
    let file_len = std::fs::metadata(path).map_or(0, |m| m.len());
    let mut trace = Trace::default();
    // The packet bytes of a file are never more than the file.
    trace
        .arena
        .reserve_exact(usize::try_from(file_len).unwrap_or(usize::MAX).min(budget));
    let mut buf = Vec::new();
    while let Some(rec) = reader.next_packet(&mut buf).map_err(read_err)? {
        if trace.arena.len() + buf.len() > budget {
            return Err(PcapError::PreloadLimit {
                port: port.into(),
                limit: PRELOAD_LIMIT,
            });
        }
        trace.index.push(Record {
            offset: trace.arena.len(),
            len: buf.len(),
            ts_ns: rec.ts_ns,
        });
        trace.arena.extend_from_slice(&buf);
        trace.max_len = trace.max_len.max(buf.len());
    }
    Ok(trace)
}

/// The pcap backend. See the module docs.
#[derive(Debug)]
pub struct PcapBackend {
    ports: Vec<PortInfo>,
    counters: Vec<Arc<PortCounters>>,
    tx: Vec<Option<TxFile>>,
    /// Preloaded rx files, moved into the worker handle that polls them.
    rx: Vec<Option<Trace>>,
    taken: Vec<bool>,
    workers: usize,
    replay: Replay,
    loops: u32,
    pool_size: usize,
    /// Data room of each worker's buffers.
    room: Vec<usize>,
    /// Buffers the workers' pools could not keep (several workers only; see Buffers).
    spare: Option<Spare>,
    clock: Arc<dyn Clock>,
}

/// The queue behind the workers' pools (see the module docs, Buffers).
#[derive(Debug, Clone)]
struct Spare {
    tx: crossbeam_channel::Sender<OwnedBuf>,
    rx: crossbeam_channel::Receiver<OwnedBuf>,
}

impl PcapBackend {
    /// Preload the rx files and create the tx files of `cfg`, with the system clock.
    pub fn new(cfg: PcapConfig) -> Result<PcapBackend, PcapError> {
        Self::with_clock(cfg, Arc::new(SystemClock::new()))
    }

    /// Like [`new`](Self::new) with the given clock (tests pass a [`ManualClock`]).
    pub fn with_clock(cfg: PcapConfig, clock: Arc<dyn Clock>) -> Result<PcapBackend, PcapError> {
        Self::build(cfg, clock, PRELOAD_LIMIT)
    }

    fn build(
        cfg: PcapConfig,
        clock: Arc<dyn Clock>,
        preload_limit: usize,
    ) -> Result<PcapBackend, PcapError> {
        if cfg.workers == 0 {
            return Err(PcapError::NoWorkers);
        }
        if cfg.pool_size == 0 {
            return Err(PcapError::EmptyPool);
        }
        if let Replay::Timed { speed } = cfg.replay {
            if !speed.is_finite() || speed <= 0.0 {
                return Err(PcapError::BadSpeed(speed));
            }
        }
        if cfg.ports.len() > usize::from(PortId::MAX) + 1 {
            return Err(PcapError::TooManyPorts(cfg.ports.len()));
        }
        for (i, p) in cfg.ports.iter().enumerate() {
            if let Some(tx) = &p.tx {
                if cfg.ports[..i].iter().any(|q| q.tx.as_ref() == Some(tx)) {
                    return Err(PcapError::DuplicateTx(tx.clone()));
                }
            }
        }

        // Read every rx file before creating any tx file, so a bad configuration truncates
        // nothing.
        let mut rx = Vec::with_capacity(cfg.ports.len());
        let mut preloaded = 0usize;
        for p in &cfg.ports {
            let trace = match &p.rx {
                Some(path) => {
                    let t = preload(&p.name, path, preload_limit - preloaded)?;
                    preloaded += t.arena.len();
                    Some(t)
                }
                None => None,
            };
            rx.push(trace);
        }
        // Buffers move between workers with flow steering: one size for all of them.
        let shared_room = (0..cfg.workers)
            .map(|w| Self::buf_room(&rx, cfg.workers, w))
            .max()
            .unwrap_or(DEFAULT_DATA_ROOM);
        let room: Vec<usize> = (0..cfg.workers)
            .map(|w| {
                if cfg.workers > 1 {
                    shared_room
                } else {
                    Self::buf_room(&rx, cfg.workers, w)
                }
            })
            .collect();
        for (w, &room) in room.iter().enumerate() {
            let buf_bytes = DEFAULT_HEADROOM + room;
            if cfg.pool_size.saturating_mul(buf_bytes) > POOL_MEMORY_LIMIT {
                return Err(PcapError::PoolTooLarge {
                    worker: w,
                    pool_size: cfg.pool_size,
                    buf_bytes,
                    limit: POOL_MEMORY_LIMIT,
                });
            }
        }
        let mut tx = Vec::with_capacity(cfg.ports.len());
        for p in &cfg.ports {
            let writer = match &p.tx {
                Some(path) => Some(Arc::new(Mutex::new(
                    PcapWriter::create(path, Resolution::Nano).map_err(|source| {
                        PcapError::Create {
                            port: p.name.clone(),
                            path: path.clone(),
                            source,
                        }
                    })?,
                ))),
                None => None,
            };
            tx.push(writer);
        }

        let tx_queues = u16::try_from(cfg.workers).unwrap_or(u16::MAX);
        let ports = cfg
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| PortInfo {
                id: i as PortId,
                name: p.name.clone(),
                driver: "pcap".into(),
                mac: p.mac,
                rx_queues: u16::from(p.rx.is_some()),
                tx_queues: if p.tx.is_some() { tx_queues } else { 0 },
            })
            .collect();
        Ok(PcapBackend {
            ports,
            counters: cfg.ports.iter().map(|_| Arc::default()).collect(),
            tx,
            rx,
            taken: vec![false; cfg.workers],
            workers: cfg.workers,
            replay: cfg.replay,
            loops: cfg.loops,
            pool_size: cfg.pool_size,
            room,
            spare: (cfg.workers > 1).then(|| {
                let (tx, rx) = crossbeam_channel::bounded(cfg.pool_size * cfg.workers);
                Spare { tx, rx }
            }),
            clock,
        })
    }

    /// Data room of worker `w`'s buffers: its largest rx frame, at least the default.
    fn buf_room(rx: &[Option<Trace>], workers: usize, w: usize) -> usize {
        rx.iter()
            .enumerate()
            .filter(|(p, _)| p % workers == w)
            .filter_map(|(_, t)| t.as_ref().map(|t| t.max_len))
            .fold(DEFAULT_DATA_ROOM, usize::max)
    }

    /// The (port, rx queue) pairs worker `worker` polls: the ports with an rx file whose index
    /// `% workers == worker`, queue 0.
    pub fn rx_queues_of(&self, worker: usize) -> Vec<(PortId, u16)> {
        self.ports
            .iter()
            .filter(|p| p.rx_queues > 0 && usize::from(p.id) % self.workers == worker)
            .map(|p| (p.id, 0))
            .collect()
    }

    /// Number of workers the backend was configured for.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Packets preloaded for `port`'s rx (0 if none, or once its worker handle is taken).
    pub fn rx_packets(&self, port: PortId) -> usize {
        self.rx
            .get(usize::from(port))
            .and_then(Option::as_ref)
            .map_or(0, |t| t.index.len())
    }

    /// Take worker `worker`'s handle, or say why not.
    pub fn try_worker_io(&mut self, worker: usize) -> Result<PcapWorkerIo, PcapError> {
        let taken = self.taken.get_mut(worker).ok_or(PcapError::NoSuchWorker {
            worker,
            workers: self.workers,
        })?;
        if *taken {
            return Err(PcapError::WorkerTaken(worker));
        }
        *taken = true;
        let room = self.room[worker];
        let mut rx = Vec::new();
        let mut rx_slot = vec![None; self.ports.len()];
        for (port, _) in self.rx_queues_of(worker) {
            if let Some(trace) = self.rx[usize::from(port)].take() {
                rx_slot[usize::from(port)] = Some(rx.len());
                rx.push(RxSource::new(port, trace));
            }
        }
        Ok(PcapWorkerIo {
            worker,
            rx,
            rx_slot,
            tx: self.tx.clone(),
            counters: self.counters.clone(),
            pool: Pool::new(self.pool_size, room, self.spare.clone()),
            replay: self.replay,
            loops: self.loops,
            clock: self.clock.clone(),
        })
    }
}

impl Backend for PcapBackend {
    type Io = PcapWorkerIo;

    fn ports(&self) -> &[PortInfo] {
        &self.ports
    }

    /// # Panics
    ///
    /// If `worker` is not below the configured worker count or its handle was already taken
    /// (see [`PcapBackend::try_worker_io`] for the fallible form).
    fn worker_io(&mut self, worker: usize) -> PcapWorkerIo {
        match self.try_worker_io(worker) {
            Ok(io) => io,
            Err(e) => panic!("pcap backend: {e}"),
        }
    }

    fn port_stats(&self, port: PortId) -> PortStats {
        let Some(c) = self.counters.get(usize::from(port)) else {
            return PortStats::default();
        };
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PortStats {
            ipackets: get(&c.ipackets),
            opackets: get(&c.opackets),
            ibytes: get(&c.ibytes),
            obytes: get(&c.obytes),
            imissed: 0,
            ierrors: get(&c.ierrors),
            oerrors: get(&c.oerrors),
            rx_nombuf: get(&c.rx_nombuf),
        }
    }
}

/// A worker's buffer pool: a stack of recycled buffers, never grown past its size.
#[derive(Debug)]
struct Pool {
    bufs: Vec<OwnedBuf>,
    size: usize,
    /// Total room (headroom + data room) of the pool's buffers.
    buf_bytes: usize,
    spare: Option<Spare>,
}

impl Pool {
    fn new(size: usize, data_room: usize, spare: Option<Spare>) -> Pool {
        Pool {
            bufs: (0..size)
                .map(|_| OwnedBuf::with_capacity(DEFAULT_HEADROOM, data_room))
                .collect(),
            size,
            buf_bytes: DEFAULT_HEADROOM + data_room,
            spare,
        }
    }

    fn get(&mut self) -> Option<OwnedBuf> {
        self.bufs
            .pop()
            .or_else(|| self.spare.as_ref()?.rx.try_recv().ok())
    }

    /// Take `buf` back. Buffers too small for the largest rx frame (ones not allocated
    /// here) are freed; those that would overfill the pool go to the shared spare queue,
    /// or are freed without one.
    fn put(&mut self, buf: OwnedBuf) {
        let room = buf.headroom() + buf.len() + buf.tailroom();
        if room < self.buf_bytes {
            return;
        }
        if self.bufs.len() < self.size {
            self.bufs.push(buf);
        } else if let Some(s) = &self.spare {
            let _ = s.tx.try_send(buf);
        }
    }
}

/// Replay state of one rx file.
#[derive(Debug)]
struct RxSource {
    port: PortId,
    trace: Trace,
    /// Next record to deliver.
    next: usize,
    /// Loops completed.
    loops_done: u32,
    /// Timed replay: offset of the current loop's start from the first packet, in trace time.
    loop_base_ns: u64,
    /// Timed replay: monotonic time of the first poll.
    start_ns: Option<u64>,
    done: bool,
}

impl RxSource {
    fn new(port: PortId, trace: Trace) -> RxSource {
        let done = trace.index.is_empty();
        RxSource {
            port,
            trace,
            next: 0,
            loops_done: 0,
            loop_base_ns: 0,
            start_ns: None,
            done,
        }
    }

    /// Step past the record just delivered, wrapping or finishing at the end of the file.
    fn advance(&mut self, loops: u32) {
        self.next += 1;
        if self.next < self.trace.index.len() {
            return;
        }
        self.loops_done = self.loops_done.saturating_add(1);
        if loops != 0 && self.loops_done >= loops {
            self.done = true;
        } else {
            self.next = 0;
            self.loop_base_ns = self.loop_base_ns.saturating_add(self.trace.span_ns());
        }
    }
}

/// One worker's handle on a [`PcapBackend`]: its rx files, every port's tx file, its pool.
#[derive(Debug)]
pub struct PcapWorkerIo {
    worker: usize,
    rx: Vec<RxSource>,
    /// Port -> index in `rx`.
    rx_slot: Vec<Option<usize>>,
    tx: Vec<Option<TxFile>>,
    counters: Vec<Arc<PortCounters>>,
    pool: Pool,
    replay: Replay,
    loops: u32,
    clock: Arc<dyn Clock>,
}

impl PcapWorkerIo {
    /// Which worker this handle belongs to.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// Buffers currently in the pool.
    pub fn pool_available(&self) -> usize {
        self.pool.bufs.len()
    }
}

impl WorkerIo for PcapWorkerIo {
    fn recorded_clock(&self) -> bool {
        matches!(self.replay, Replay::Recorded)
    }

    fn lossless(&self) -> bool {
        true
    }

    type Buf = OwnedBuf;

    fn rx_burst(
        &mut self,
        port: PortId,
        queue: u16,
        out: &mut Burst<OwnedBuf>,
        max: usize,
    ) -> usize {
        let Some(&Some(slot)) = self.rx_slot.get(usize::from(port)) else {
            return 0;
        };
        if matches!(self.replay, Replay::Recorded) && self.rx.len() > 1 {
            // One clock for all of this worker's files: a port whose next packet is more
            // than a batch span later than another port's next waits for it, so ports of
            // different rates stay together in recorded time.
            let next = |s: &RxSource| (!s.done).then(|| s.trace.index[s.next].ts_ns);
            let earliest = self.rx.iter().filter_map(next).min();
            if let (Some(mine), Some(e)) = (next(&self.rx[slot]), earliest) {
                if mine > e.saturating_add(RECORDED_BATCH_SPAN_NS) {
                    return 0;
                }
            }
        }
        let src = &mut self.rx[slot];
        let want = max.min(out.remaining_capacity());
        if queue != 0 || src.done || want == 0 {
            return 0;
        }
        // Timed replay: trace time (offset from the first packet) released so far.
        let released_ns = match self.replay {
            Replay::Fast | Replay::Recorded => None,
            Replay::Timed { speed } => {
                let now = self.clock.monotonic_ns();
                let start = *src.start_ns.get_or_insert(now);
                // f64 -> u64 `as` saturates.
                Some((now.saturating_sub(start) as f64 * speed) as u64)
            }
        };
        let first_ts = src.trace.first_ts();
        let (mut n, mut bytes, mut nombuf, mut errors) = (0usize, 0u64, 0u64, 0u64);
        // On the recorded clock a batch's time is its first packet's timestamp, so a batch
        // holds only packets recorded within RECORDED_BATCH_SPAN_NS of it.
        let mut batch_ts: Option<u64> = None;
        while n < want && !src.done {
            let rec = src.trace.index[src.next];
            if matches!(self.replay, Replay::Recorded) {
                let t0 = *batch_ts.get_or_insert(rec.ts_ns);
                if rec.ts_ns > t0.saturating_add(RECORDED_BATCH_SPAN_NS) {
                    break;
                }
            }
            if let Some(released) = released_ns {
                let due = src
                    .loop_base_ns
                    .saturating_add(rec.ts_ns.saturating_sub(first_ts));
                if due > released {
                    break;
                }
            }
            let Some(mut buf) = self.pool.get() else {
                nombuf = 1;
                break;
            };
            if buf.set_data(src.trace.bytes(&rec)).is_err() {
                // Cannot happen: the pool only holds buffers with room for the largest frame.
                errors += 1;
                self.pool.put(buf);
                src.advance(self.loops);
                continue;
            }
            buf.set_meta(Meta {
                rx_port: src.port,
                hash: 0,
                timestamp_ns: rec.ts_ns,
            });
            out.push(buf);
            n += 1;
            bytes += rec.len as u64;
            src.advance(self.loops);
        }
        let c = &self.counters[usize::from(port)];
        add(&c.ipackets, n as u64);
        add(&c.ibytes, bytes);
        add(&c.rx_nombuf, nombuf);
        add(&c.ierrors, errors);
        n
    }

    /// Writes the burst to the port's tx file under one lock; `queue` is ignored.
    fn tx_burst(&mut self, port: PortId, _queue: u16, pkts: &mut Burst<OwnedBuf>) -> usize {
        let (Some(Some(file)), Some(c)) = (
            self.tx.get(usize::from(port)),
            self.counters.get(usize::from(port)),
        ) else {
            // No tx file (or no such port): free everything.
            if let Some(c) = self.counters.get(usize::from(port)) {
                add(&c.oerrors, pkts.len() as u64);
            }
            for buf in pkts.drain(..) {
                self.pool.put(buf);
            }
            return 0;
        };
        let (mut sent, mut bytes, mut errors) = (0usize, 0u64, 0u64);
        let mut wall_ns = None;
        let mut writer = file.lock().unwrap_or_else(PoisonError::into_inner);
        let mut first_err = None;
        for buf in pkts.drain(..) {
            let ts = match buf.meta().timestamp_ns {
                0 => *wall_ns.get_or_insert_with(|| self.clock.wall_ns()),
                ts => ts,
            };
            match writer.write(ts, buf.data()) {
                Ok(()) => {
                    sent += 1;
                    bytes += buf.len() as u64;
                }
                Err(e) => {
                    errors += 1;
                    first_err.get_or_insert(e);
                }
            }
            self.pool.put(buf);
        }
        drop(writer);
        if let Some(e) = first_err {
            tracing::warn!(port, errors, error = %e, "pcap tx write failed");
        }
        add(&c.opackets, sent as u64);
        add(&c.obytes, bytes);
        add(&c.oerrors, errors);
        sent
    }

    fn release(&mut self, buf: OwnedBuf) {
        self.pool.put(buf);
    }

    fn alloc(&mut self) -> Option<OwnedBuf> {
        let mut buf = self.pool.get()?;
        buf.reset();
        Some(buf)
    }

    /// True once every rx file of this worker has played all its loops (immediately for a
    /// worker that polls no file).
    fn rx_exhausted(&self) -> bool {
        self.rx.iter().all(|s| s.done)
    }

    /// Flushes every port's tx file.
    fn flush(&mut self) {
        for (port, file) in self.tx.iter().enumerate() {
            if let Some(file) = file {
                let mut w = file.lock().unwrap_or_else(PoisonError::into_inner);
                if let Err(e) = w.flush() {
                    tracing::warn!(port, error = %e, "pcap tx flush failed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
