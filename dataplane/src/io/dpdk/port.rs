//! Ethdev ports: configuration, the [`Backend`] and the per-worker [`WorkerIo`].

use super::{register_thread, DpdkError, Eal, Mbuf, Mempool};
use crate::io::{Backend, Burst, PortId, PortInfo, PortLink, PortStats, WorkerIo, MAX_BURST};
use peregrine_dpdk_sys as sys;
use std::ffi::{c_void, CStr, CString};
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// One port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpdkPortConfig {
    /// Our name for the port ("n3", "n6").
    pub name: String,
    /// The ethdev name as DPDK knows it: a vdev name given in the EAL arguments
    /// (`net_ring0` for `--vdev=net_ring0`) or a PCI address (`0000:03:00.0`).
    pub device: String,
    /// Rx descriptors per queue (adjusted to the driver's limits).
    pub rx_desc: u16,
    /// Tx descriptors per queue (adjusted to the driver's limits).
    pub tx_desc: u16,
    /// Spread packets over the worker queues with RSS, if the device supports it and there is
    /// more than one worker.
    pub rss: bool,
}

impl DpdkPortConfig {
    /// A port with 1024 rx/tx descriptors and RSS on.
    pub fn new(name: impl Into<String>, device: impl Into<String>) -> DpdkPortConfig {
        DpdkPortConfig {
            name: name.into(),
            device: device.into(),
            rx_desc: 1024,
            tx_desc: 1024,
            rss: true,
        }
    }
}

/// The DPDK backend's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpdkConfig {
    /// EAL arguments without `argv[0]`, e.g. `["-l", "0-3", "--vdev=net_ring0"]`. For processes
    /// that must not share hugepages (tests) add
    /// `--no-huge --no-pci -m <MB> --no-shconf --no-telemetry` (see the module documentation).
    pub eal_args: Vec<String>,
    /// The ports; the [`PortId`] of a port is its index here.
    pub ports: Vec<DpdkPortConfig>,
    /// Worker count: each port gets this many rx and tx queues, queue `i` for worker `i`.
    pub workers: usize,
    /// Mbufs in each worker's pool (one pool per worker, shared by its queues on all ports).
    /// Should cover, per worker, the rx+tx descriptors of all ports plus bursts in flight and
    /// the cache.
    pub mbufs_per_worker: u32,
    /// Per-lcore mempool cache size (at most 512 and `mbufs_per_worker / 1.5`).
    pub mbuf_cache: u32,
    /// Mbuf data room including the 128-byte headroom (DPDK default: 2176).
    pub data_room: u16,
}

impl DpdkConfig {
    /// DPDK's default mbuf data room (`RTE_MBUF_DEFAULT_BUF_SIZE`: 2048 + 128 headroom).
    pub const DEFAULT_DATA_ROOM: u16 = sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16;
}

/// Linux `ENOTSUP` (= `EOPNOTSUPP`), as ethdev calls return it negated.
const ENOTSUP: i32 = 95;

/// Serialises ethdev control-path calls (configure/start/stop/close), which DPDK does not make
/// thread-safe, between backends built or dropped on different threads.
static CONTROL: Mutex<()> = Mutex::new(());

fn control_lock() -> MutexGuard<'static, ()> {
    CONTROL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Per-process counter to keep mempool names unique across backends.
static POOL_SEQ: AtomicU32 = AtomicU32::new(0);

struct Port {
    eth_id: u16,
    configured: bool,
    started: bool,
}

/// State shared by the backend and its worker IOs; dropped (ports stopped and closed, pools
/// freed) when the last of them goes.
struct Shared {
    ports: Vec<Port>,
    nb_queues: u16,
    /// Close ports on drop (only once construction succeeded: a failed construction leaves
    /// them open so they can be configured again).
    close_on_drop: bool,
    /// Fields drop after `Drop::drop` has closed the ports, so the pools outlive the ports.
    pools: Vec<Mempool>,
    _eal: Eal,
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _control = control_lock();
        for p in &mut self.ports {
            if p.started {
                // Give back what sits in the rx queues (net_ring keeps tx'd packets in a ring
                // that close frees without freeing its mbufs). Bounded: a live port or
                // net_null never runs dry.
                for q in 0..self.nb_queues {
                    drain_rx(p.eth_id, q);
                }
                // SAFETY: no worker IO is left (they hold this `Shared`), so nobody uses the
                // port's queues.
                let rc = unsafe { sys::rte_eth_dev_stop(p.eth_id) };
                if rc < 0 {
                    tracing::warn!(
                        port = p.eth_id,
                        "{}",
                        DpdkError::from_ret("rte_eth_dev_stop", rc)
                    );
                }
                p.started = false;
            }
            if p.configured && self.close_on_drop {
                // SAFETY: as above; the port is stopped.
                let rc = unsafe { sys::rte_eth_dev_close(p.eth_id) };
                if rc < 0 {
                    tracing::warn!(
                        port = p.eth_id,
                        "{}",
                        DpdkError::from_ret("rte_eth_dev_close", rc)
                    );
                }
            }
        }
    }
}

fn drain_rx(eth_id: u16, queue: u16) {
    let mut burst: Burst<Mbuf> = Burst::new();
    for _ in 0..16 {
        // SAFETY: the port is started and `queue` is configured; no other thread uses it (see
        // `Shared::drop`); the array has room for MAX_BURST pointers, which become owned Mbufs.
        let n = unsafe {
            let n = sys::pg_eth_rx_burst(
                eth_id,
                queue,
                burst.as_mut_ptr().cast::<*mut sys::rte_mbuf>(),
                MAX_BURST as u16,
            );
            burst.set_len(n as usize);
            n
        };
        burst.clear();
        if n == 0 {
            break;
        }
    }
}

/// Ethdev ports configured with one rx and one tx queue per worker, and one mbuf pool per
/// worker. See the [module documentation](super) for the EAL arguments and teardown order.
pub struct DpdkBackend {
    shared: Arc<Shared>,
    infos: Vec<PortInfo>,
    workers: usize,
    taken: Vec<bool>,
}

impl fmt::Debug for DpdkBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpdkBackend")
            .field("ports", &self.infos)
            .field("workers", &self.workers)
            .field("pools", &self.shared.pools)
            .finish()
    }
}

fn to_u16(v: usize, what: &str) -> Result<u16, DpdkError> {
    u16::try_from(v).map_err(|_| DpdkError::Config(format!("{what} {v} out of range")))
}

impl DpdkBackend {
    /// Initialise the EAL (or join it, if it runs with the same arguments), then configure and
    /// start every port: `workers` rx and tx queues, RSS when asked for and supported, one
    /// pool per worker, promiscuous mode.
    pub fn new(cfg: DpdkConfig) -> Result<DpdkBackend, DpdkError> {
        if cfg.workers == 0 {
            return Err(DpdkError::Config("workers must be at least 1".into()));
        }
        if cfg.ports.is_empty() {
            return Err(DpdkError::Config("no ports".into()));
        }
        let nb_queues = to_u16(cfg.workers, "workers")?;
        to_u16(cfg.ports.len(), "port count")?;
        let eal = Eal::init(&cfg.eal_args)?;

        // Look every port up before touching any.
        let mut eth_ids = Vec::with_capacity(cfg.ports.len());
        for pc in &cfg.ports {
            let cname = CString::new(pc.device.as_str())
                .map_err(|_| DpdkError::Config(format!("device {:?} contains NUL", pc.device)))?;
            let mut id = 0u16;
            // SAFETY: cname is a valid C string; id is a valid out-pointer.
            let rc = unsafe { sys::rte_eth_dev_get_port_by_name(cname.as_ptr(), &mut id) };
            if rc != 0 {
                return Err(DpdkError::NoSuchDevice {
                    name: pc.name.clone(),
                    device: pc.device.clone(),
                });
            }
            if eth_ids.contains(&id) {
                return Err(DpdkError::Config(format!(
                    "device {:?} listed twice",
                    pc.device
                )));
            }
            eth_ids.push(id);
        }

        // SAFETY: only reads the NUMA socket of a valid port.
        let socket = unsafe { sys::rte_eth_dev_socket_id(eth_ids[0]) };
        let seq = POOL_SEQ.fetch_add(1, Ordering::Relaxed);
        let mut pools = Vec::with_capacity(cfg.workers);
        for w in 0..cfg.workers {
            pools.push(Mempool::new(
                &format!("pg{seq}_w{w}"),
                cfg.mbufs_per_worker,
                cfg.mbuf_cache,
                cfg.data_room,
                socket,
            )?);
        }
        let need: u32 = cfg
            .ports
            .iter()
            .map(|p| p.rx_desc as u32 + p.tx_desc as u32)
            .sum::<u32>()
            + MAX_BURST as u32
            + cfg.mbuf_cache;
        if cfg.mbufs_per_worker < need {
            tracing::warn!(
                mbufs_per_worker = cfg.mbufs_per_worker,
                need,
                "mbuf pools may be too small to fill all descriptors"
            );
        }

        let mut shared = Shared {
            ports: eth_ids
                .iter()
                .map(|&eth_id| Port {
                    eth_id,
                    configured: false,
                    started: false,
                })
                .collect(),
            nb_queues,
            close_on_drop: false,
            pools,
            _eal: eal,
        };
        // The control lock is released before `shared` can drop (its Drop takes the lock too).
        let infos = {
            let _control = control_lock();
            cfg.ports
                .iter()
                .enumerate()
                .map(|(idx, pc)| setup_port(&mut shared, idx, pc, cfg.workers))
                .collect::<Result<Vec<_>, _>>()
        }?;
        shared.close_on_drop = true;
        Ok(DpdkBackend {
            shared: Arc::new(shared),
            infos,
            workers: cfg.workers,
            taken: vec![false; cfg.workers],
        })
    }

    /// The ethdev port id of our port `port`.
    pub fn ethdev_port_id(&self, port: PortId) -> Option<u16> {
        self.shared.ports.get(port as usize).map(|p| p.eth_id)
    }

    /// Number of workers (queues per port).
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// (port, queue) pairs polled by `worker`: its own queue (= its index) on every port. Its
    /// tx queue on every port is also its index.
    pub fn rx_queues_of(&self, worker: usize) -> Vec<(PortId, u16)> {
        (0..self.infos.len())
            .map(|p| (p as PortId, worker as u16))
            .collect()
    }

    /// The mbuf pool of worker `worker`.
    pub fn mempool(&self, worker: usize) -> Option<&Mempool> {
        self.shared.pools.get(worker)
    }
}

fn dev_info(eth_id: u16) -> Result<sys::rte_eth_dev_info, DpdkError> {
    let mut info = sys::rte_eth_dev_info::default();
    // SAFETY: valid port id; info is a valid out-pointer.
    let rc = unsafe { sys::rte_eth_dev_info_get(eth_id, &mut info) };
    if rc != 0 {
        return Err(DpdkError::from_ret("rte_eth_dev_info_get", rc));
    }
    Ok(info)
}

fn setup_port(
    shared: &mut Shared,
    idx: usize,
    pc: &DpdkPortConfig,
    workers: usize,
) -> Result<PortInfo, DpdkError> {
    let eth_id = shared.ports[idx].eth_id;
    let nq = shared.nb_queues;
    let info = dev_info(eth_id)?;
    let driver = if info.driver_name.is_null() {
        String::from("?")
    } else {
        // SAFETY: driver_name is a NUL-terminated string owned by the driver.
        unsafe { CStr::from_ptr(info.driver_name) }
            .to_string_lossy()
            .into_owned()
    };
    if (info.max_rx_queues as usize) < workers || (info.max_tx_queues as usize) < workers {
        return Err(DpdkError::TooFewQueues {
            name: pc.name.clone(),
            driver,
            workers,
            max_rx: info.max_rx_queues,
            max_tx: info.max_tx_queues,
        });
    }

    let mut conf = sys::rte_eth_conf::default();
    let want_hf = (sys::RTE_ETH_RSS_IP | sys::RTE_ETH_RSS_UDP | sys::RTE_ETH_RSS_TCP) as u64;
    let rss_hf = match info.flow_type_rss_offloads & want_hf {
        0 => info.flow_type_rss_offloads,
        hf => hf,
    };
    if pc.rss && nq > 1 && rss_hf != 0 {
        conf.rxmode.mq_mode = sys::RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_key = std::ptr::null_mut(); // driver's default key
        conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
        let rss_hash = sys::RTE_ETH_RX_OFFLOAD_RSS_HASH as u64;
        if info.rx_offload_capa & rss_hash != 0 {
            conf.rxmode.offloads |= rss_hash;
        }
    } else if pc.rss && nq > 1 {
        tracing::warn!(port = %pc.name, %driver, "RSS requested but not supported; queues are not balanced");
    }

    // SAFETY: valid port, stopped (never started by us); conf is a valid configuration.
    let rc = unsafe { sys::rte_eth_dev_configure(eth_id, nq, nq, &conf) };
    if rc != 0 {
        return Err(DpdkError::from_ret(
            format!("rte_eth_dev_configure({})", pc.device),
            rc,
        ));
    }
    shared.ports[idx].configured = true;

    let (mut nb_rx, mut nb_tx) = (pc.rx_desc, pc.tx_desc);
    // SAFETY: valid configured port; valid out-pointers.
    let rc = unsafe { sys::rte_eth_dev_adjust_nb_rx_tx_desc(eth_id, &mut nb_rx, &mut nb_tx) };
    if rc != 0 {
        return Err(DpdkError::from_ret("rte_eth_dev_adjust_nb_rx_tx_desc", rc));
    }
    // SAFETY: reads the socket of a valid port.
    let socket = unsafe { sys::rte_eth_dev_socket_id(eth_id) };
    let socket = if socket < 0 {
        sys::SOCKET_ID_ANY
    } else {
        socket
    };
    let socket = socket as u32; // DPDK takes SOCKET_ID_ANY (-1) as an unsigned int here.
    for q in 0..nq {
        let pool = shared.pools[q as usize].as_ptr();
        // SAFETY: configured port, q < nb_rx_queues; null rx_conf means driver defaults;
        // the pool outlives the port (pools drop after the ports are closed).
        let rc = unsafe {
            sys::rte_eth_rx_queue_setup(eth_id, q, nb_rx, socket, std::ptr::null(), pool)
        };
        if rc != 0 {
            return Err(DpdkError::from_ret(
                format!("rte_eth_rx_queue_setup({}, {q})", pc.device),
                rc,
            ));
        }
        // SAFETY: as above for the tx queue.
        let rc = unsafe { sys::rte_eth_tx_queue_setup(eth_id, q, nb_tx, socket, std::ptr::null()) };
        if rc != 0 {
            return Err(DpdkError::from_ret(
                format!("rte_eth_tx_queue_setup({}, {q})", pc.device),
                rc,
            ));
        }
    }

    // SAFETY: configured port with all queues set up.
    let rc = unsafe { sys::rte_eth_dev_start(eth_id) };
    if rc != 0 {
        return Err(DpdkError::from_ret(
            format!("rte_eth_dev_start({})", pc.device),
            rc,
        ));
    }
    shared.ports[idx].started = true;

    // SAFETY: valid started port.
    let rc = unsafe { sys::rte_eth_promiscuous_enable(eth_id) };
    if rc != 0 && rc != -ENOTSUP {
        return Err(DpdkError::from_ret(
            format!("rte_eth_promiscuous_enable({})", pc.device),
            rc,
        ));
    }

    let mut mac = sys::rte_ether_addr::default();
    // SAFETY: valid port; mac is a valid out-pointer.
    let rc = unsafe { sys::rte_eth_macaddr_get(eth_id, &mut mac) };
    if rc != 0 {
        return Err(DpdkError::from_ret("rte_eth_macaddr_get", rc));
    }

    Ok(PortInfo {
        id: idx as PortId,
        name: pc.name.clone(),
        driver,
        mac: mac.addr_bytes,
        rx_queues: nq,
        tx_queues: nq,
    })
}

impl Backend for DpdkBackend {
    type Io = DpdkWorkerIo;

    fn ports(&self) -> &[PortInfo] {
        &self.infos
    }

    /// # Panics
    /// If `worker` is not below the configured worker count or was taken already.
    fn worker_io(&mut self, worker: usize) -> DpdkWorkerIo {
        assert!(
            worker < self.workers,
            "worker {worker} out of range (workers: {})",
            self.workers
        );
        assert!(
            !self.taken[worker],
            "worker {worker}'s I/O was taken already"
        );
        self.taken[worker] = true;
        let queue = worker as u16;
        DpdkWorkerIo {
            eth_ids: self.shared.ports.iter().map(|p| p.eth_id).collect(),
            // SAFETY: every port was started in `new` with `workers` queues, and is stopped
            // only after this I/O (which holds `shared`) is dropped.
            paths: self
                .shared
                .ports
                .iter()
                .map(|p| unsafe { QueuePath::resolve(p.eth_id, queue) })
                .collect(),
            pool: self.shared.pools[worker].as_ptr(),
            queue: worker as u16,
            thread_ready: false,
            shared: Arc::clone(&self.shared),
        }
    }

    /// Counters from `rte_eth_stats_get`; zeros for an unknown port.
    fn port_stats(&self, port: PortId) -> PortStats {
        let Some(p) = self.shared.ports.get(port as usize) else {
            return PortStats::default();
        };
        let mut s = sys::rte_eth_stats::default();
        // SAFETY: valid port; s is a valid out-pointer.
        let rc = unsafe { sys::rte_eth_stats_get(p.eth_id, &mut s) };
        if rc != 0 {
            return PortStats::default();
        }
        PortStats {
            ipackets: s.ipackets,
            opackets: s.opackets,
            ibytes: s.ibytes,
            obytes: s.obytes,
            imissed: s.imissed,
            ierrors: s.ierrors,
            oerrors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
        }
    }

    fn link(&self, port: PortId) -> Option<PortLink> {
        let p = self.shared.ports.get(port as usize)?;
        let mut l = sys::rte_eth_link::default();
        // SAFETY: valid port; l is a valid out-pointer; the no-wait variant does not block.
        let rc = unsafe { sys::rte_eth_link_get_nowait(p.eth_id, &mut l) };
        (rc == 0).then(|| PortLink {
            up: l.link_status() != 0,
            speed_mbps: l.link_speed,
            full_duplex: l.link_duplex() != 0,
        })
    }
}

/// One worker's queues (queue number = worker index) on every port, and its mbuf pool.
///
/// The `queue` argument of [`WorkerIo`] methods must be the worker's own queue (its index);
/// the I/O always uses its own queue, so two workers never share a queue (debug builds assert
/// on a mismatch). Ports are our indices ([`PortId`]); an unknown port receives nothing and
/// drops what is sent to it.
pub struct DpdkWorkerIo {
    /// Ethdev id of each of our ports.
    eth_ids: Box<[u16]>,
    /// Per port, this worker's queue's PMD burst functions, resolved once after start.
    paths: Box<[QueuePath]>,
    /// This worker's pool (owned by `shared`).
    pool: *mut sys::rte_mempool,
    queue: u16,
    /// This thread has been offered an lcore id (for the mempool cache).
    thread_ready: bool,
    shared: Arc<Shared>,
}

// SAFETY: the raw pool pointer is owned by `shared` (which lives as long as `self`), and pool
// operations are thread-safe; the queues (and their PMD queue pointers in `paths`) are used
// only through `&mut self`.
unsafe impl Send for DpdkWorkerIo {}

/// A queue's fast path: the PMD's burst function and queue object, as `rte_eth_rx_burst` /
/// `rte_eth_tx_burst` look them up in `rte_eth_fp_ops` on every call. Resolving them once
/// saves two dependent loads and a callback check per burst; `None` (a callback is installed,
/// or the port is not started) falls back to the full inline call through the shim.
#[derive(Debug, Clone, Copy)]
struct QueuePath {
    rx: Option<(RxFn, *mut c_void)>,
    tx: Option<(TxFn, *mut c_void)>,
}

type RxFn = unsafe extern "C" fn(*mut c_void, *mut *mut sys::rte_mbuf, u16) -> u16;
type TxFn = unsafe extern "C" fn(*mut c_void, *mut *mut sys::rte_mbuf, u16) -> u16;

impl QueuePath {
    /// # Safety
    /// `eth` must be a started port with a configured queue `queue`. The result stays valid
    /// until the port is stopped, which the backend does only after every worker I/O is gone.
    unsafe fn resolve(eth: u16, queue: u16) -> QueuePath {
        if eth as usize >= sys::RTE_MAX_ETHPORTS as usize {
            return QueuePath { rx: None, tx: None };
        }
        // SAFETY: in bounds; the entry is written by rte_eth_dev_start before we read it and
        // not again until stop (caller's contract).
        let ops = unsafe { &*core::ptr::addr_of!(sys::rte_eth_fp_ops[eth as usize]) };
        let pick = |f: Option<RxFn>, q: &sys::rte_ethdev_qdata| -> Option<(RxFn, *mut c_void)> {
            let f = f?;
            if q.data.is_null() {
                return None;
            }
            // SAFETY: `data`/`clbk` are arrays of at least `queue + 1` entries for a configured
            // queue (RTE_MAX_QUEUES_PER_PORT entries in 22.11).
            let (qd, cb) = unsafe {
                (
                    *q.data.add(queue as usize),
                    if q.clbk.is_null() {
                        core::ptr::null_mut()
                    } else {
                        *q.clbk.add(queue as usize)
                    },
                )
            };
            (!qd.is_null() && cb.is_null()).then_some((f, qd))
        };
        QueuePath {
            rx: pick(ops.rx_pkt_burst, &ops.rxq),
            tx: pick(ops.tx_pkt_burst, &ops.txq),
        }
    }
}

impl fmt::Debug for DpdkWorkerIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpdkWorkerIo")
            .field("queue", &self.queue)
            .field("eth_ids", &self.eth_ids)
            .field("pool", &self.shared.pools[self.queue as usize].name())
            .finish()
    }
}

impl DpdkWorkerIo {
    /// The worker index (= queue number on every port).
    pub fn queue(&self) -> u16 {
        self.queue
    }

    #[inline]
    fn ready(&mut self, queue: u16) {
        debug_assert_eq!(
            queue, self.queue,
            "worker {} used queue {queue}",
            self.queue
        );
        if !self.thread_ready {
            register_thread();
            self.thread_ready = true;
        }
    }
}

impl WorkerIo for DpdkWorkerIo {
    type Buf = Mbuf;

    #[inline]
    fn rx_burst(&mut self, port: PortId, queue: u16, out: &mut Burst<Mbuf>, max: usize) -> usize {
        self.ready(queue);
        let Some(&eth) = self.eth_ids.get(port as usize) else {
            return 0;
        };
        let len = out.len();
        let room = (out.capacity() - len).min(max); // <= MAX_BURST (256): fits u16
        if room == 0 {
            return 0;
        }
        // SAFETY: `out` has `room` uninitialised slots after `len`; Mbuf is repr(transparent)
        // over a non-null `*mut rte_mbuf`, so the slots are an array of `*mut rte_mbuf` the
        // driver fills with `n <= room` valid, exclusively owned mbufs, which the new length
        // hands to `out`. Our queue is used only by this worker (`&mut self`).
        unsafe {
            let dst = out.as_mut_ptr().add(len).cast::<*mut sys::rte_mbuf>();
            let n = match self.paths.get(port as usize).and_then(|p| p.rx) {
                Some((f, qd)) => f(qd, dst, room as u16) as usize,
                None => sys::pg_eth_rx_burst(eth, self.queue, dst, room as u16) as usize,
            };
            out.set_len(len + n);
            n
        }
    }

    #[inline]
    fn tx_burst(&mut self, port: PortId, queue: u16, pkts: &mut Burst<Mbuf>) -> usize {
        self.ready(queue);
        let n = pkts.len();
        if n == 0 {
            return 0;
        }
        let Some(&eth) = self.eth_ids.get(port as usize) else {
            pkts.clear();
            return 0;
        };
        // SAFETY: the burst's n initialised elements are owned mbuf pointers (repr(transparent)).
        // Setting the length to 0 first moves their ownership out of `pkts`: the driver takes
        // the first `sent`, the rest are freed here exactly once. Our queue is ours alone.
        unsafe {
            let base = pkts.as_mut_ptr().cast::<*mut sys::rte_mbuf>();
            pkts.set_len(0);
            let sent = match self.paths.get(port as usize).and_then(|p| p.tx) {
                Some((f, qd)) => f(qd, base, n as u16) as usize,
                None => sys::pg_eth_tx_burst(eth, self.queue, base, n as u16) as usize,
            };
            if sent < n {
                sys::pg_pktmbuf_free_bulk(base.add(sent), (n - sent) as u32);
            }
            sent
        }
    }

    #[inline]
    fn release(&mut self, buf: Mbuf) {
        drop(buf);
    }

    /// One `rte_pktmbuf_free_bulk` for the whole burst.
    #[inline]
    fn release_all(&mut self, pkts: &mut Burst<Mbuf>) {
        let n = pkts.len();
        if n == 0 {
            return;
        }
        // SAFETY: as in `tx_burst`: the burst's n initialised elements are owned mbuf
        // pointers (repr(transparent)); setting the length to 0 first moves their ownership
        // out of `pkts`, and they are freed here exactly once.
        unsafe {
            let base = pkts.as_mut_ptr().cast::<*mut sys::rte_mbuf>();
            pkts.set_len(0);
            sys::pg_pktmbuf_free_bulk(base, n as u32);
        }
    }

    #[inline]
    fn alloc(&mut self) -> Option<Mbuf> {
        self.ready(self.queue);
        // SAFETY: the pool is kept alive by `shared` and outlives the mbuf (see `Mempool`).
        unsafe { Mbuf::alloc_raw(self.pool) }
    }

    /// `rte_pktmbuf_alloc_bulk` for up to 64 at a time (all or none), one by one when the
    /// pool cannot give them all at once.
    fn alloc_many(&mut self, n: usize, mut put: impl FnMut(Mbuf)) -> usize {
        self.ready(self.queue);
        let mut raw = [core::ptr::null_mut::<sys::rte_mbuf>(); 64];
        let n = n.min(raw.len());
        // SAFETY: the pool is valid and outlives the mbufs (as in `alloc`); `raw` holds `n`
        // pointers; on success DPDK wrote `n` reset, exclusively owned mbufs of this pool.
        if unsafe { sys::pg_pktmbuf_alloc_bulk(self.pool, raw.as_mut_ptr(), n as u32) } == 0 {
            for m in &raw[..n] {
                // SAFETY: each is a fresh, non-null mbuf from our pool (see above).
                put(unsafe { Mbuf::from_raw(std::ptr::NonNull::new_unchecked(*m)) });
            }
            return n;
        }
        crate::io::alloc_one_by_one(self, n, put)
    }
}
