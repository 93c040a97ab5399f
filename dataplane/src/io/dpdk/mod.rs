//! DPDK ethdev backend: EAL, mbuf pools, [`Mbuf`] as a [`PacketBuf`](crate::buffer::PacketBuf),
//! and ports with one rx/tx queue per worker.
//!
//! # Process model
//!
//! The EAL exists once per process ([`Eal::init`]); every backend and mempool in the process
//! shares it. Ports are named in the EAL arguments (`--vdev=net_ring0`, a PCI allow-list) and
//! looked up by their ethdev name. To run several DPDK processes side by side (tests, CI) keep
//! each one's memory and files private: `--no-huge --no-pci -m <MB> --no-shconf
//! --no-telemetry` (the EAL refuses `--in-memory` together with `--no-huge`; with hugepages use
//! `--in-memory`, or a unique `--file-prefix`). `-m` must hold every pool: an mbuf of the
//! default data room takes about 2.3 KiB, and each pool with a cache adds about 1 MiB of
//! per-lcore cache structures (`RTE_MAX_LCORE` = 128).
//!
//! # Threads
//!
//! Worker threads need not be EAL lcores. The first rx/tx/alloc of a [`DpdkWorkerIo`] registers
//! its thread with the EAL ([`register_thread`]) so the mempool's per-lcore cache is used;
//! the registration is undone when the thread exits. If registration fails (all lcore ids in
//! use, or multi-process mode) everything still works, only without the cache.
//!
//! # Teardown order
//!
//! Ports and mempools are shared (reference counted) by [`DpdkBackend`] and every
//! [`DpdkWorkerIo`]; ports are stopped and closed, and the pools freed, when the last of them is
//! dropped. A pool that still has mbufs out (held by the application) is not freed but leaked,
//! so a late `Mbuf` drop is always sound.

mod eal;
mod mbuf;
mod mempool;
mod port;

pub use eal::Eal;
pub use mbuf::Mbuf;
pub use mempool::{Mempool, MBUF_PRIV_SIZE};
pub use port::{DpdkBackend, DpdkConfig, DpdkPortConfig, DpdkWorkerIo};

use peregrine_dpdk_sys as sys;
use std::cell::Cell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};
use thiserror::Error;

/// Errors of the DPDK backend. DPDK error codes are carried with their `rte_strerror` text.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DpdkError {
    /// A DPDK call failed.
    #[error("{op} failed: {msg} (errno {errno})")]
    Call { op: String, errno: i32, msg: String },
    /// The EAL is already running with other arguments (it can exist once per process).
    #[error("EAL already initialised with different arguments {existing:?}")]
    EalArgsMismatch { existing: Vec<String> },
    /// `rte_eal_init` failed earlier in this process; it cannot be retried.
    #[error("EAL initialisation failed earlier in this process: {0}")]
    EalFailed(String),
    /// The EAL has not been initialised (or was cleaned up).
    #[error("EAL is not initialised")]
    EalNotInitialised,
    /// [`Eal::cleanup`] ran; the EAL cannot come back in this process.
    #[error("EAL was cleaned up and cannot be initialised again in this process")]
    EalCleanedUp,
    /// Something still uses the EAL or a pool.
    #[error("still in use: {0}")]
    Busy(String),
    /// No ethdev has the configured device name.
    #[error("port {name:?}: no ethdev named {device:?} (is it in the EAL arguments?)")]
    NoSuchDevice { name: String, device: String },
    /// The driver has fewer queues than the configured workers.
    #[error("port {name:?} ({driver}): {workers} workers need {workers} rx and tx queues, driver has at most {max_rx} rx / {max_tx} tx")]
    TooFewQueues {
        name: String,
        driver: String,
        workers: usize,
        max_rx: u16,
        max_tx: u16,
    },
    /// Invalid configuration.
    #[error("invalid DPDK configuration: {0}")]
    Config(String),
}

impl DpdkError {
    /// An error from a DPDK call that reports failure through `rte_errno`.
    pub(crate) fn from_errno(op: impl Into<String>) -> DpdkError {
        // SAFETY: pg_errno only reads the calling thread's rte_errno.
        let errno = unsafe { sys::pg_errno() };
        Self::call(op, errno)
    }

    /// An error from a DPDK call that returns `-errno`.
    pub(crate) fn from_ret(op: impl Into<String>, ret: i32) -> DpdkError {
        Self::call(op, ret.saturating_abs())
    }

    fn call(op: impl Into<String>, errno: i32) -> DpdkError {
        DpdkError::Call {
            op: op.into(),
            errno,
            msg: strerror(errno),
        }
    }
}

/// `rte_strerror` text of an errno value (including DPDK's own codes).
pub fn strerror(errno: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a NUL-terminated string (a static one or a
    // per-thread buffer) that stays valid until the next call on this thread; it is copied
    // before returning.
    unsafe {
        let p = sys::rte_strerror(errno);
        if p.is_null() {
            return format!("errno {errno}");
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// The time-stamp counter (`rte_get_tsc_cycles`).
#[inline]
pub fn tsc() -> u64 {
    // SAFETY: reads the CPU cycle counter; no memory is touched.
    unsafe { sys::pg_get_tsc_cycles() }
}

/// Frequency of [`tsc`] in Hz as measured by the EAL (`rte_get_tsc_hz`); 0 before [`Eal::init`].
pub fn tsc_hz() -> u64 {
    if !EAL_RUNNING.load(Ordering::Acquire) {
        return 0;
    }
    // SAFETY: reads a value the EAL computed during initialisation.
    unsafe { sys::pg_get_tsc_hz() }
}

/// True between a successful [`Eal::init`] and [`Eal::cleanup`].
pub(crate) static EAL_RUNNING: AtomicBool = AtomicBool::new(false);

/// Undoes `rte_thread_register` when the thread exits.
struct LcoreRegistration {
    registered_by_us: bool,
}

impl Drop for LcoreRegistration {
    fn drop(&mut self) {
        if self.registered_by_us && EAL_RUNNING.load(Ordering::Acquire) {
            // SAFETY: this thread was registered by `register_thread`, and the EAL is still
            // initialised; unregistering only releases this thread's lcore id.
            unsafe { sys::rte_thread_unregister() };
        }
    }
}

thread_local! {
    static LCORE: Cell<Option<u32>> = const { Cell::new(None) };
    static LCORE_REG: LcoreRegistration = LcoreRegistration { registered_by_us: register_now() };
}

fn register_now() -> bool {
    if !EAL_RUNNING.load(Ordering::Acquire) {
        return false;
    }
    // SAFETY: reads this thread's lcore id (TLS).
    if unsafe { sys::pg_lcore_id() } != sys::LCORE_ID_ANY {
        return false; // an EAL thread, or registered already
    }
    // SAFETY: the EAL is initialised; registering gives this (non-EAL) thread an lcore id.
    let rc = unsafe { sys::rte_thread_register() };
    if rc != 0 {
        tracing::debug!(
            "rte_thread_register failed ({}); mempool caches unused on this thread",
            DpdkError::from_errno("rte_thread_register")
        );
        return false;
    }
    true
}

/// Give the calling thread an EAL lcore id if it has none (so mempool caches work); returns
/// the lcore id, or `None` if the thread has none (EAL not running, registration refused).
/// Idempotent and cheap after the first call; the registration ends when the thread exits.
pub fn register_thread() -> Option<u32> {
    if let Some(id) = LCORE.with(Cell::get) {
        return Some(id);
    }
    LCORE_REG.with(|_| ());
    // SAFETY: reads this thread's lcore id (TLS).
    let id = unsafe { sys::pg_lcore_id() };
    if id == sys::LCORE_ID_ANY {
        return None;
    }
    LCORE.with(|c| c.set(Some(id)));
    Some(id)
}
