//! An in-memory backend: rx queues preloaded with frames, tx captured in memory.
//!
//! For unit and integration tests of stages and the runtime without DPDK or files. Buffers
//! come from a per-worker pool of [`OwnedBuf`]s that `release` and `tx_burst` refill. A buffer
//! handed to another worker (flow steering) is freed into that worker's pool; a pool that
//! grows past its size gives the extras to a spare list all workers share, and a dry pool
//! takes from it, so the backend's buffers are conserved like a DPDK mempool's.

use super::{Backend, Burst, PortId, PortInfo, PortStats, WorkerIo};
use crate::buffer::{Meta, OwnedBuf, PacketBuf};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Frames sent on one port, in order.
pub type TxLog = Arc<Mutex<Vec<Vec<u8>>>>;

/// Per-port configuration of the memory backend.
#[derive(Debug, Clone, Default)]
pub struct MemPort {
    pub name: String,
    pub mac: [u8; 6],
    /// Frames to deliver on rx, by the worker that polls this port.
    pub rx: Vec<Vec<u8>>,
    /// A live port is never exhausted (like a NIC): workers run until told to stop.
    pub live: bool,
}

/// See the module docs.
#[derive(Debug)]
pub struct MemBackend {
    ports: Vec<PortInfo>,
    rx: Vec<Option<VecDeque<Vec<u8>>>>,
    live: Vec<bool>,
    tx: Vec<TxLog>,
    workers: usize,
    pool_size: usize,
    spare: Arc<Mutex<Vec<OwnedBuf>>>,
}

/// One worker's handle on a [`MemBackend`].
#[derive(Debug)]
pub struct MemWorkerIo {
    rx: Vec<(PortId, VecDeque<Vec<u8>>)>,
    live: bool,
    tx: Vec<TxLog>,
    pool: Vec<OwnedBuf>,
    pool_size: usize,
    spare: Arc<Mutex<Vec<OwnedBuf>>>,
    /// Accept at most this many packets per tx burst (to exercise tx-full handling).
    pub tx_limit: usize,
}

impl MemBackend {
    /// Port `i`'s rx frames go to worker `i % workers`.
    pub fn new(ports: Vec<MemPort>, workers: usize) -> MemBackend {
        let infos = ports
            .iter()
            .enumerate()
            .map(|(i, p)| PortInfo {
                id: i as PortId,
                name: p.name.clone(),
                driver: "memory".into(),
                mac: p.mac,
                rx_queues: 1,
                tx_queues: workers as u16,
            })
            .collect();
        let tx = ports.iter().map(|_| TxLog::default()).collect();
        let live = ports.iter().map(|p| p.live).collect();
        let rx = ports.into_iter().map(|p| Some(p.rx.into())).collect();
        MemBackend {
            ports: infos,
            rx,
            live,
            tx,
            workers: workers.max(1),
            pool_size: 1024,
            spare: Arc::default(),
        }
    }

    /// Give each worker `n` buffers instead of 1,024 (set before taking the workers' I/O).
    pub fn with_pool_size(mut self, n: usize) -> MemBackend {
        self.pool_size = n;
        self
    }

    /// What has been sent on `port` so far.
    pub fn tx_log(&self, port: PortId) -> TxLog {
        self.tx[port as usize].clone()
    }

    /// (port, queue) pairs polled by `worker`.
    pub fn rx_queues_of(&self, worker: usize) -> Vec<(PortId, u16)> {
        (0..self.ports.len())
            .filter(|p| p % self.workers == worker)
            .map(|p| (p as PortId, 0))
            .collect()
    }
}

impl Backend for MemBackend {
    type Io = MemWorkerIo;

    fn ports(&self) -> &[PortInfo] {
        &self.ports
    }

    fn worker_io(&mut self, worker: usize) -> MemWorkerIo {
        let rx = self
            .rx_queues_of(worker)
            .into_iter()
            .filter_map(|(p, _)| self.rx[p as usize].take().map(|q| (p, q)))
            .collect();
        let live = self
            .rx_queues_of(worker)
            .iter()
            .any(|(p, _)| self.live[*p as usize]);
        MemWorkerIo {
            rx,
            live,
            tx: self.tx.clone(),
            pool: (0..self.pool_size).map(|_| OwnedBuf::new()).collect(),
            pool_size: self.pool_size,
            spare: self.spare.clone(),
            tx_limit: usize::MAX,
        }
    }

    fn port_stats(&self, port: PortId) -> PortStats {
        let log = self.tx[port as usize].lock().expect("tx log");
        PortStats {
            opackets: log.len() as u64,
            obytes: log.iter().map(|f| f.len() as u64).sum(),
            ..Default::default()
        }
    }
}

impl MemWorkerIo {
    #[inline]
    fn take(&mut self) -> Option<OwnedBuf> {
        self.pool
            .pop()
            .or_else(|| self.spare.lock().expect("spare buffers").pop())
    }

    #[inline]
    fn give(&mut self, b: OwnedBuf) {
        if self.pool.len() < self.pool_size {
            self.pool.push(b);
        } else {
            self.spare.lock().expect("spare buffers").push(b);
        }
    }
}

impl WorkerIo for MemWorkerIo {
    type Buf = OwnedBuf;

    fn rx_burst(
        &mut self,
        port: PortId,
        _queue: u16,
        out: &mut Burst<OwnedBuf>,
        max: usize,
    ) -> usize {
        let Some(qi) = self.rx.iter().position(|(p, _)| *p == port) else {
            return 0;
        };
        let mut n = 0;
        while n < max && !out.is_full() {
            if self.rx[qi].1.is_empty() {
                break;
            }
            let Some(mut b) = self.take() else { break };
            let Some(frame) = self.rx[qi].1.pop_front() else {
                break;
            };
            if b.set_data(&frame).is_err() {
                self.give(b);
                continue;
            }
            b.set_meta(Meta {
                rx_port: port,
                ..Meta::default()
            });
            out.push(b);
            n += 1;
        }
        n
    }

    fn tx_burst(&mut self, port: PortId, _queue: u16, pkts: &mut Burst<OwnedBuf>) -> usize {
        let mut sent = 0;
        let log = self.tx[port as usize].clone();
        let mut log = log.lock().expect("tx log");
        for b in pkts.drain(..) {
            if sent < self.tx_limit {
                log.push(b.data().to_vec());
                sent += 1;
            }
            self.give(b);
        }
        sent
    }

    fn release(&mut self, buf: OwnedBuf) {
        self.give(buf);
    }

    fn alloc(&mut self) -> Option<OwnedBuf> {
        self.take().map(|mut b| {
            b.reset();
            b
        })
    }

    fn rx_exhausted(&self) -> bool {
        !self.live && self.rx.iter().all(|(_, q)| q.is_empty())
    }
}
