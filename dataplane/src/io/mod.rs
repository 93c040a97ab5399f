//! I/O backends: DPDK ethdev ports (`dpdk`) and a pure-Rust pcap backend (`pcap`).
//!
//! A backend is built once from configuration; it then hands each worker its own
//! [`WorkerIo`], which owns that worker's rx/tx queues, so the per-packet path shares nothing
//! between workers.

use crate::buffer::PacketBuf;
use arrayvec::ArrayVec;

pub mod dpdk;
pub mod memory;
pub mod pcap;
pub mod pcapfile;

/// Largest burst the runtime moves in one call.
pub const MAX_BURST: usize = 256;

/// A burst of packets: a fixed-capacity array, never allocated on the packet path.
pub type Burst<B> = ArrayVec<B, MAX_BURST>;

/// Index of a port in the backend's port list (for DPDK, the ethdev port id).
pub type PortId = u16;

/// Static facts about one port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    pub id: PortId,
    /// The name given in configuration (e.g. "n3", "n6").
    pub name: String,
    /// Driver name as the backend reports it (e.g. "net_ring", "pcap").
    pub driver: String,
    pub mac: [u8; 6],
    pub rx_queues: u16,
    pub tx_queues: u16,
}

/// Port counters, with the meaning of DPDK's `rte_eth_stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    pub ipackets: u64,
    pub opackets: u64,
    pub ibytes: u64,
    pub obytes: u64,
    /// Dropped by the hardware/driver for lack of rx descriptors.
    pub imissed: u64,
    pub ierrors: u64,
    pub oerrors: u64,
    /// Rx failures for lack of buffers.
    pub rx_nombuf: u64,
}

/// Link state of a port (DPDK's `rte_eth_link`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortLink {
    pub up: bool,
    /// Mbit/s; 0 when unknown.
    pub speed_mbps: u32,
    pub full_duplex: bool,
}

/// One worker's view of the ports: its own queues on each port, its own buffer cache.
pub trait WorkerIo: Send {
    type Buf: PacketBuf;

    /// Receive into `out` at most `max` packets (and no more than its remaining capacity)
    /// from `port`/`queue`; returns how many were appended.
    fn rx_burst(
        &mut self,
        port: PortId,
        queue: u16,
        out: &mut Burst<Self::Buf>,
        max: usize,
    ) -> usize;

    /// Send every packet in `pkts` on `port`/`queue`. Packets the port does not accept are
    /// freed. `pkts` is empty on return. Returns how many were accepted.
    fn tx_burst(&mut self, port: PortId, queue: u16, pkts: &mut Burst<Self::Buf>) -> usize;

    /// Free a packet that will not be sent.
    fn release(&mut self, buf: Self::Buf);

    /// Free every packet of `pkts` (dropped together), leaving it empty. Backends with a
    /// bulk free (DPDK's `rte_pktmbuf_free_bulk`) free them in one call.
    fn release_all(&mut self, pkts: &mut Burst<Self::Buf>) {
        for b in pkts.drain(..) {
            self.release(b);
        }
    }

    /// An empty buffer to build a packet in (replies, reports); `None` if the pool is dry.
    fn alloc(&mut self) -> Option<Self::Buf>;

    /// Up to `n` empty buffers, each handed to `put`, fewer if the pool runs dry; returns
    /// how many. Backends with a bulk allocator take them in one call.
    fn alloc_many(&mut self, n: usize, put: impl FnMut(Self::Buf)) -> usize
    where
        Self: Sized,
    {
        alloc_one_by_one(self, n, put)
    }

    /// True once every rx source of this worker is finished for good (a pcap file at its end,
    /// all loops done). Live ports never are.
    fn rx_exhausted(&self) -> bool {
        false
    }

    /// Push out anything buffered (pcap writers). Called when the worker goes idle and at stop.
    fn flush(&mut self) {}

    /// True when the worker's clock should follow the packets' recorded timestamps
    /// (`Meta::timestamp_ns` of each batch's first packet) instead of the wall clock: a
    /// replay processed as fast as possible whose meters, windows and timers still see the
    /// trace's own timing, whatever the load of the machine.
    fn recorded_clock(&self) -> bool {
        false
    }

    /// True when a packet must not be lost to a faster reader: a file replay. Then a worker
    /// does not receive while a hand-off ring to another worker lacks room for a burst
    /// (backpressure), instead of dropping as `handoff_ring_full` as it does on live ports,
    /// where the NIC drops instead.
    fn lossless(&self) -> bool {
        false
    }
}

/// [`WorkerIo::alloc_many`] with [`WorkerIo::alloc`], one buffer at a time (the default,
/// and a bulk allocator's fallback when it cannot give all `n` at once).
pub(crate) fn alloc_one_by_one<I: WorkerIo>(
    io: &mut I,
    n: usize,
    mut put: impl FnMut(I::Buf),
) -> usize {
    let mut k = 0;
    while k < n {
        let Some(b) = io.alloc() else { break };
        put(b);
        k += 1;
    }
    k
}

/// A configured set of ports.
pub trait Backend {
    type Io: WorkerIo;

    /// The ports, indexed by [`PortId`].
    fn ports(&self) -> &[PortInfo];

    /// Take the I/O handle of worker `worker` (0-based, fewer than the configured worker count).
    /// Each worker's handle is taken once.
    fn worker_io(&mut self, worker: usize) -> Self::Io;

    /// Counters of one port.
    fn port_stats(&self, port: PortId) -> PortStats;

    /// Link state of one port, where the backend has such a thing (files do not).
    fn link(&self, _port: PortId) -> Option<PortLink> {
        None
    }
}
