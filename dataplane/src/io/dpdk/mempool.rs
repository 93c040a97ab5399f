//! Packet mbuf pools (`rte_pktmbuf_pool_create`).

use super::{DpdkError, Eal, Mbuf};
use crate::meta::{PacketMeta, PACKET_META_SIZE};
use peregrine_dpdk_sys as sys;
use std::ffi::{c_uint, c_void, CString};
use std::fmt;
use std::ptr::NonNull;
use std::sync::Mutex;

/// Bytes of every pool's mbuf private area: room for the [`PacketMeta`] behind each
/// `rte_mbuf`, rounded up to a whole cache line (a multiple of `RTE_MBUF_PRIV_ALIGN`, as
/// `rte_pktmbuf_pool_create` requires). A whole line keeps the packet data behind it
/// cache-line aligned as it was before the record existed (with 40 bytes, the first 64
/// bytes of headers straddled two lines).
pub const MBUF_PRIV_SIZE: u16 = {
    let a = sys::RTE_CACHE_LINE_SIZE as usize;
    assert!(a.is_multiple_of(sys::RTE_MBUF_PRIV_ALIGN as usize));
    let n = PACKET_META_SIZE.div_ceil(a) * a;
    assert!(n <= u16::MAX as usize);
    n as u16
};

/// Writes [`PacketMeta::EMPTY`] into one mbuf's private area (`rte_mempool_obj_iter`
/// callback), so the record is initialised memory from the start.
unsafe extern "C" fn init_priv(
    _mp: *mut sys::rte_mempool,
    _opaque: *mut c_void,
    obj: *mut c_void,
    _idx: c_uint,
) {
    let m = obj.cast::<sys::rte_mbuf>();
    // SAFETY: `obj` is an mbuf of a pool created with a private area of MBUF_PRIV_SIZE >=
    // size_of::<PacketMeta>() bytes, which starts right behind the 128-byte (so 8-aligned)
    // rte_mbuf (`rte_mbuf_to_priv`); the pool is not yet shared with anyone.
    unsafe {
        debug_assert!((*m).priv_size >= MBUF_PRIV_SIZE);
        m.add(1).cast::<PacketMeta>().write(PacketMeta::EMPTY);
    }
}

/// A pool of packet mbufs.
///
/// Every mbuf has a private area of [`MBUF_PRIV_SIZE`] bytes holding its [`PacketMeta`]
/// (see `Mbuf::pkt_meta`), initialised to [`PacketMeta::EMPTY`] when the pool is made.
///
/// Dropping it frees the pool, unless mbufs from it are still out (held by the application or
/// stuck in a driver): then the pool is leaked, so those mbufs can still be freed safely later.
pub struct Mempool {
    ptr: NonNull<sys::rte_mempool>,
    name: String,
    _eal: Eal,
}

// SAFETY: an rte_mempool is a shared, thread-safe object (multi-producer/multi-consumer ring
// with per-lcore caches, each used only by the thread that owns that lcore id).
unsafe impl Send for Mempool {}
// SAFETY: as above; `&Mempool` only allows alloc/count operations, which are thread-safe.
unsafe impl Sync for Mempool {}

impl fmt::Debug for Mempool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mempool")
            .field("name", &self.name)
            .field("avail", &self.avail_count())
            .field("in_use", &self.in_use_count())
            .finish()
    }
}

impl Mempool {
    /// Create a pool of `n_mbufs` packet mbufs with a per-lcore cache of `cache_size`, each with
    /// `data_room` bytes of buffer *including* the `RTE_PKTMBUF_HEADROOM` (128) headroom
    /// (DPDK's default is `RTE_MBUF_DEFAULT_BUF_SIZE` = 2176), on NUMA `socket` (-1: any).
    ///
    /// The EAL must be running. `name` must be unique in the process and shorter than
    /// `RTE_MEMPOOL_NAMESIZE` (26) bytes. DPDK wants `cache_size <= 512` and
    /// `cache_size <= n_mbufs / 1.5`.
    pub fn new(
        name: &str,
        n_mbufs: u32,
        cache_size: u32,
        data_room: u16,
        socket: i32,
    ) -> Result<Mempool, DpdkError> {
        let eal = Eal::current().ok_or(DpdkError::EalNotInitialised)?;
        if name.len() >= sys::RTE_MEMPOOL_NAMESIZE as usize {
            return Err(DpdkError::Config(format!(
                "mempool name {name:?} is longer than {} bytes",
                sys::RTE_MEMPOOL_NAMESIZE - 1
            )));
        }
        if (data_room as u32) < sys::RTE_PKTMBUF_HEADROOM {
            return Err(DpdkError::Config(format!(
                "data room {data_room} is smaller than the mbuf headroom {}",
                sys::RTE_PKTMBUF_HEADROOM
            )));
        }
        let cname = CString::new(name)
            .map_err(|_| DpdkError::Config(format!("mempool name {name:?} contains NUL")))?;
        // SAFETY: the EAL is running (we hold a handle); cname is a valid C string that DPDK
        // copies.
        let p = unsafe {
            sys::rte_pktmbuf_pool_create(
                cname.as_ptr(),
                n_mbufs,
                cache_size,
                MBUF_PRIV_SIZE,
                data_room,
                socket,
            )
        };
        let ptr = NonNull::new(p).ok_or_else(|| {
            DpdkError::from_errno(format!(
                "rte_pktmbuf_pool_create({name:?}, n={n_mbufs}, cache={cache_size}, room={data_room})"
            ))
        })?;
        // SAFETY: `ptr` is the pktmbuf pool just created (private areas of MBUF_PRIV_SIZE), not
        // yet visible to any other thread; `init_priv` only writes each mbuf's private area.
        unsafe { sys::rte_mempool_obj_iter(ptr.as_ptr(), Some(init_priv), std::ptr::null_mut()) };
        Ok(Mempool {
            ptr,
            name: name.to_string(),
            _eal: eal,
        })
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The raw pool, valid as long as `self`.
    pub fn as_ptr(&self) -> *mut sys::rte_mempool {
        self.ptr.as_ptr()
    }

    /// An empty mbuf (default headroom, length 0), or `None` if the pool is dry.
    #[inline]
    pub fn alloc(&self) -> Option<Mbuf> {
        // SAFETY: the pool is valid while `self` is, and it is a pktmbuf pool.
        unsafe { Mbuf::alloc_raw(self.ptr.as_ptr()) }
    }

    /// Mbufs available (in the common pool and in all lcore caches).
    pub fn avail_count(&self) -> u32 {
        // SAFETY: the pool is valid while `self` is.
        unsafe { sys::pg_mempool_avail_count(self.ptr.as_ptr()) }
    }

    /// Mbufs currently allocated.
    pub fn in_use_count(&self) -> u32 {
        // SAFETY: the pool is valid while `self` is.
        unsafe { sys::pg_mempool_in_use_count(self.ptr.as_ptr()) }
    }
}

impl Drop for Mempool {
    fn drop(&mut self) {
        let in_use = self.in_use_count();
        if in_use == 0 {
            // SAFETY: no mbuf of this pool is out, and `self` is the only owner of the pool.
            unsafe { sys::rte_mempool_free(self.ptr.as_ptr()) };
        } else {
            tracing::warn!(
                pool = %self.name,
                in_use,
                "mempool dropped with mbufs still allocated; leaking it"
            );
            leaked().push(LeakedPool(self.ptr));
        }
    }
}

/// A pool that was dropped with mbufs out.
struct LeakedPool(NonNull<sys::rte_mempool>);
// SAFETY: see `Mempool`; the pointer is only used for counting and freeing under LEAKED's lock.
unsafe impl Send for LeakedPool {}

static LEAKED: Mutex<Vec<LeakedPool>> = Mutex::new(Vec::new());

fn leaked() -> std::sync::MutexGuard<'static, Vec<LeakedPool>> {
    LEAKED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Mbufs still out of leaked pools.
pub(super) fn leaked_in_use() -> u32 {
    leaked()
        .iter()
        // SAFETY: leaked pools are never freed except by `free_leaked`.
        .map(|p| unsafe { sys::pg_mempool_in_use_count(p.0.as_ptr()) })
        .sum()
}

/// Free leaked pools that have no mbufs out.
pub(super) fn free_leaked() {
    leaked().retain(|p| {
        // SAFETY: as above; a pool with no mbufs out has no other user.
        unsafe {
            if sys::pg_mempool_in_use_count(p.0.as_ptr()) == 0 {
                sys::rte_mempool_free(p.0.as_ptr());
                false
            } else {
                true
            }
        }
    });
}
