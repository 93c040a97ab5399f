//! [`Mbuf`]: an owned DPDK packet mbuf implementing [`PacketBuf`].

use super::{DpdkError, Mempool};
use crate::buffer::{BufError, Meta, PacketBuf};
use crate::meta::PacketMeta;
use peregrine_dpdk_sys as sys;
use std::ffi::c_char;
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Name of the mbuf dynamic field holding [`Meta::timestamp_ns`].
pub const TIMESTAMP_FIELD: &str = "peregrine_ts_ns";
/// Name of the mbuf dynamic flag that says the timestamp field is set.
pub const TIMESTAMP_FLAG: &str = "peregrine_ts_valid";

/// Offset of the timestamp dynfield in `rte_mbuf` (0: not registered; real offsets are never 0).
static TS_OFFSET: AtomicUsize = AtomicUsize::new(0);
/// `ol_flags` bit saying the timestamp is valid (0: not registered).
static TS_FLAG: AtomicU64 = AtomicU64::new(0);

const RX_RSS_HASH: u64 = sys::RTE_MBUF_F_RX_RSS_HASH as u64;

fn dyn_name(name: &str) -> [c_char; sys::RTE_MBUF_DYN_NAMESIZE as usize] {
    let mut out = [0 as c_char; sys::RTE_MBUF_DYN_NAMESIZE as usize];
    for (o, b) in out.iter_mut().zip(name.bytes()) {
        *o = b as c_char;
    }
    out
}

/// Register the timestamp dynamic field and flag; called once by `Eal::init`.
pub(super) fn register_dynamic_fields() -> Result<(), DpdkError> {
    let field = sys::rte_mbuf_dynfield {
        name: dyn_name(TIMESTAMP_FIELD),
        size: std::mem::size_of::<u64>(),
        align: std::mem::align_of::<u64>(),
        flags: 0,
    };
    // SAFETY: `field` is a valid descriptor; the EAL is initialised (the registry lives in a
    // memzone).
    let off = unsafe { sys::rte_mbuf_dynfield_register(&field) };
    if off < 0 {
        return Err(DpdkError::from_errno(format!(
            "rte_mbuf_dynfield_register({TIMESTAMP_FIELD})"
        )));
    }
    let flag = sys::rte_mbuf_dynflag {
        name: dyn_name(TIMESTAMP_FLAG),
        flags: 0,
    };
    // SAFETY: as above.
    let bit = unsafe { sys::rte_mbuf_dynflag_register(&flag) };
    if bit < 0 {
        return Err(DpdkError::from_errno(format!(
            "rte_mbuf_dynflag_register({TIMESTAMP_FLAG})"
        )));
    }
    TS_OFFSET.store(off as usize, Ordering::Release);
    TS_FLAG.store(1u64 << bit, Ordering::Release);
    Ok(())
}

/// An owned packet mbuf (a pointer to an `rte_mbuf`); dropping it frees it to its pool.
///
/// `repr(transparent)`: a `*mut Mbuf` is a `*mut *mut rte_mbuf`, so bursts of `Mbuf` go to and
/// from the driver without conversion.
///
/// # Segments
///
/// Ports are configured without scatter, so received packets are single-segment. The
/// [`PacketBuf`] view is of the **first segment only**: [`data`](PacketBuf::data) is the first
/// segment's bytes, [`prepend`](PacketBuf::prepend)/[`adj`](PacketBuf::adj) work on its front.
/// [`append`](PacketBuf::append)/[`trim`](PacketBuf::trim)/[`tailroom`](PacketBuf::tailroom)
/// act on the last segment (the same one, for a single-segment packet). `pkt_len` and the
/// segment's `data_len` are always kept consistent.
///
/// # Metadata
///
/// [`Meta::rx_port`] is `mbuf.port` as the driver left it (NIC PMDs, net_pcap and net_null
/// write their ethdev port id; net_ring writes nothing). Rx does not rewrite it: that would
/// touch every mbuf, the largest single cost of a forwarding loop that otherwise never reads
/// packet memory. The runtime's authoritative rx port is per batch (`Batch::rx_port`).
/// [`Meta::hash`] is `hash.rss` when `RTE_MBUF_F_RX_RSS_HASH` is set (else
/// 0), and [`Meta::timestamp_ns`] is the `peregrine_ts_ns` dynamic field when the
/// `peregrine_ts_valid` dynamic flag is set (else 0). A freshly allocated mbuf has DPDK's
/// `rx_port` of `RTE_MBUF_PORT_INVALID` (0xffff), no hash and no timestamp.
///
/// [`PacketMeta`] lives in the mbuf's private area (`rte_mbuf_to_priv`: the bytes right
/// behind the 128-byte `rte_mbuf`), which every [`Mempool`] reserves
/// ([`MBUF_PRIV_SIZE`](super::MBUF_PRIV_SIZE)) and initialises; DPDK never writes
/// it, so it travels with the mbuf through drivers and rings untouched.
#[repr(transparent)]
pub struct Mbuf(NonNull<sys::rte_mbuf>);

// SAFETY: an Mbuf owns its rte_mbuf exclusively (refcnt 1, see `from_raw`); freeing it to its
// pool is thread-safe.
unsafe impl Send for Mbuf {}

impl fmt::Debug for Mbuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mbuf")
            .field("len", &self.len())
            .field("pkt_len", &self.pkt_len())
            .field("nb_segs", &self.nb_segs())
            .field("headroom", &self.headroom())
            .field("meta", &self.meta())
            .finish()
    }
}

impl Mbuf {
    /// Allocate from a raw pool.
    ///
    /// # Safety
    /// `pool` must be a valid pktmbuf pool that outlives the returned mbuf's use of it (our
    /// [`Mempool`] guarantees that by leaking itself if mbufs are still out on drop).
    #[inline]
    pub(crate) unsafe fn alloc_raw(pool: *mut sys::rte_mempool) -> Option<Mbuf> {
        // SAFETY: guaranteed by the caller.
        NonNull::new(unsafe { sys::pg_pktmbuf_alloc(pool) }).map(Mbuf)
    }

    /// An empty mbuf from `pool` (default headroom, length 0), or `None` if the pool is dry.
    #[inline]
    pub fn alloc(pool: &Mempool) -> Option<Mbuf> {
        pool.alloc()
    }

    /// An mbuf from `pool` holding a copy of `bytes`; `None` if the pool is dry or the bytes do
    /// not fit.
    pub fn from_slice(pool: &Mempool, bytes: &[u8]) -> Option<Mbuf> {
        let mut m = pool.alloc()?;
        m.append(bytes.len()).ok()?.copy_from_slice(bytes);
        Some(m)
    }

    /// Take ownership of a raw mbuf.
    ///
    /// # Safety
    /// `m` must be a valid, direct (not indirect/attached), exclusively owned packet mbuf
    /// (refcnt 1), e.g. one returned by a driver's rx burst or by [`Mbuf::into_raw`], whose pool
    /// outlives it and was made by [`Mempool::new`] (so its private area holds a
    /// [`PacketMeta`]).
    #[inline]
    pub unsafe fn from_raw(m: NonNull<sys::rte_mbuf>) -> Mbuf {
        Mbuf(m)
    }

    /// Give up ownership; the caller must free the mbuf (e.g. by sending it or with
    /// `rte_pktmbuf_free`, or by [`Mbuf::from_raw`]).
    #[inline]
    pub fn into_raw(self) -> NonNull<sys::rte_mbuf> {
        let p = self.0;
        std::mem::forget(self);
        p
    }

    /// The raw mbuf, still owned by `self`.
    #[inline]
    pub fn as_ptr(&self) -> *mut sys::rte_mbuf {
        self.0.as_ptr()
    }

    #[inline(always)]
    fn raw(&self) -> &sys::rte_mbuf {
        // SAFETY: we own a valid mbuf; nobody else accesses it while we hold `&self`.
        unsafe { self.0.as_ref() }
    }

    #[inline(always)]
    fn raw_mut(&mut self) -> &mut sys::rte_mbuf {
        // SAFETY: we own a valid mbuf exclusively.
        unsafe { self.0.as_mut() }
    }

    /// Total packet length over all segments (`pkt_len`).
    #[inline]
    pub fn pkt_len(&self) -> u32 {
        self.raw().pkt_len
    }

    /// Number of segments.
    #[inline]
    pub fn nb_segs(&self) -> u16 {
        self.raw().nb_segs
    }

    /// Offload flags.
    #[inline]
    pub fn ol_flags(&self) -> u64 {
        self.raw().ol_flags
    }

    #[inline(always)]
    fn is_single(&self) -> bool {
        self.raw().nb_segs == 1
    }

    /// Pointer to the first byte of the first segment's data.
    #[inline(always)]
    fn data_ptr(&self) -> *mut u8 {
        let m = self.raw();
        // SAFETY: buf_addr + data_off is within the mbuf's buffer (DPDK invariant).
        unsafe { m.buf_addr.cast::<u8>().add(m.data_off as usize) }
    }

    /// The private area, where the [`PacketMeta`] is.
    #[inline(always)]
    fn priv_ptr(&self) -> *mut PacketMeta {
        debug_assert!(
            usize::from(self.raw().priv_size) >= std::mem::size_of::<PacketMeta>(),
            "mbuf from a pool without a PacketMeta private area"
        );
        // SAFETY: the private area starts right behind the rte_mbuf (`rte_mbuf_to_priv`), inside
        // the mempool object, 8-aligned (the mbuf is cache-line aligned and 128 bytes long).
        unsafe { self.0.as_ptr().add(1).cast::<PacketMeta>() }
    }

    #[inline]
    fn ts_ptr(&self, off: usize) -> *mut u64 {
        // SAFETY: `off` is the offset DPDK assigned to our registered 8-byte, 8-aligned dynamic
        // field, which lies inside every rte_mbuf.
        unsafe { self.0.as_ptr().cast::<u8>().add(off).cast::<u64>() }
    }
}

impl Drop for Mbuf {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: we own the mbuf (and its segments); it is not used after this.
        unsafe { sys::pg_pktmbuf_free(self.0.as_ptr()) }
    }
}

impl PacketBuf for Mbuf {
    /// The first segment's bytes (all of the packet for a single-segment mbuf).
    #[inline(always)]
    fn data(&self) -> &[u8] {
        let len = self.raw().data_len as usize;
        // SAFETY: data_len bytes from the data pointer are inside the segment's buffer and
        // initialised packet memory owned by us; the borrow of `self` keeps them alive.
        unsafe { std::slice::from_raw_parts(self.data_ptr(), len) }
    }

    #[inline(always)]
    fn data_mut(&mut self) -> &mut [u8] {
        let len = self.raw().data_len as usize;
        // SAFETY: as in `data`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.data_ptr(), len) }
    }

    #[inline(always)]
    fn headroom(&self) -> usize {
        self.raw().data_off as usize
    }

    #[inline]
    fn tailroom(&self) -> usize {
        if self.is_single() {
            let m = self.raw();
            m.buf_len as usize - m.data_off as usize - m.data_len as usize
        } else {
            // SAFETY: valid owned mbuf chain.
            unsafe { sys::pg_pktmbuf_tailroom(self.0.as_ptr()) as usize }
        }
    }

    #[inline(always)]
    fn prepend(&mut self, n: usize) -> Result<&mut [u8], BufError> {
        let have = self.headroom();
        if n > have {
            return Err(BufError::NoHeadroom { need: n, have });
        }
        let m = self.raw_mut();
        // n <= data_off <= u16::MAX
        let off = have - n;
        m.data_off = off as u16;
        m.data_len += n as u16;
        m.pkt_len += n as u32;
        // SAFETY: the n bytes in front of the old data (from the new `data_off`, computed
        // here, not read back) are inside the buffer (n <= data_off) and now belong to the
        // packet.
        Ok(unsafe { std::slice::from_raw_parts_mut(m.buf_addr.cast::<u8>().add(off), n) })
    }

    #[inline]
    fn adj(&mut self, n: usize) -> Result<(), BufError> {
        let m = self.raw_mut();
        let len = m.data_len as usize;
        if n > len {
            return Err(BufError::TooShort { want: n, len });
        }
        m.data_off += n as u16;
        m.data_len -= n as u16;
        m.pkt_len -= n as u32;
        Ok(())
    }

    /// A window inside a single-segment packet (the common case) with one test: `adj(off)`
    /// then `trim(data_len - off - n)` as one update of the three fields; anything else by
    /// the documented steps, out of line (so the common case is always inlined: as a call
    /// it cost the UPF's fast path ~10 instructions a packet).
    #[inline(always)]
    fn keep(&mut self, off: usize, n: usize) -> Result<(), BufError> {
        if self.is_single() {
            let m = self.raw_mut();
            let len = m.data_len as usize;
            // `off + n <= len` without wrapping (an add and its carry, then one compare).
            if off.checked_add(n).is_some_and(|end| end <= len) {
                // off, n <= data_len <= u16::MAX; data_off + off stays within the buffer. One
                // segment: `pkt_len` is `data_len` (stored, not read back and adjusted).
                m.data_off += off as u16;
                m.data_len = n as u16;
                m.pkt_len = n as u32;
                return Ok(());
            }
        }
        crate::buffer::keep_by_steps_cold(self, off, n)
    }

    #[inline]
    fn append(&mut self, n: usize) -> Result<&mut [u8], BufError> {
        let have = self.tailroom();
        if n > have {
            return Err(BufError::NoTailroom { need: n, have });
        }
        if self.is_single() {
            let m = self.raw_mut();
            let old = m.data_len as usize;
            m.data_len += n as u16;
            m.pkt_len += n as u32;
            // SAFETY: n <= tailroom, so the n bytes behind the old data are in the buffer.
            Ok(unsafe { std::slice::from_raw_parts_mut(self.data_ptr().add(old), n) })
        } else {
            // SAFETY: valid owned chain; n <= tailroom of the last segment (checked).
            let p = unsafe { sys::pg_pktmbuf_append(self.0.as_ptr(), n as u16) };
            if p.is_null() {
                return Err(BufError::NoTailroom { need: n, have });
            }
            // SAFETY: DPDK returned the start of n new bytes in the last segment, owned by us.
            Ok(unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), n) })
        }
    }

    #[inline]
    fn trim(&mut self, n: usize) -> Result<(), BufError> {
        if self.is_single() {
            let m = self.raw_mut();
            let len = m.data_len as usize;
            if n > len {
                return Err(BufError::TooShort { want: n, len });
            }
            m.data_len -= n as u16;
            m.pkt_len -= n as u32;
            Ok(())
        } else {
            let len = self.pkt_len() as usize;
            if n > u16::MAX as usize {
                return Err(BufError::TooShort { want: n, len });
            }
            // SAFETY: valid owned chain; DPDK checks n against the last segment.
            let rc = unsafe { sys::pg_pktmbuf_trim(self.0.as_ptr(), n as u16) };
            if rc != 0 {
                return Err(BufError::TooShort { want: n, len });
            }
            Ok(())
        }
    }

    #[inline]
    fn meta(&self) -> Meta {
        let m = self.raw();
        let hash = if m.ol_flags & RX_RSS_HASH != 0 {
            // SAFETY: all variants of the hash union are plain integers; `rss` is a u32 view.
            unsafe { m.__bindgen_anon_2.hash.rss }
        } else {
            0
        };
        let flag = TS_FLAG.load(Ordering::Relaxed);
        let off = TS_OFFSET.load(Ordering::Relaxed);
        let timestamp_ns = if flag != 0 && m.ol_flags & flag != 0 {
            // SAFETY: see `ts_ptr`; the field is 8-aligned and initialised when the flag is set.
            unsafe { self.ts_ptr(off).read() }
        } else {
            0
        };
        Meta {
            rx_port: m.port,
            hash,
            timestamp_ns,
        }
    }

    #[inline]
    fn set_meta(&mut self, meta: Meta) {
        let flag = TS_FLAG.load(Ordering::Relaxed);
        let off = TS_OFFSET.load(Ordering::Relaxed);
        let m = self.raw_mut();
        m.port = meta.rx_port;
        m.__bindgen_anon_2.hash.rss = meta.hash;
        if meta.hash != 0 {
            m.ol_flags |= RX_RSS_HASH;
        } else {
            m.ol_flags &= !RX_RSS_HASH;
        }
        if flag != 0 {
            if meta.timestamp_ns != 0 {
                m.ol_flags |= flag;
                // SAFETY: see `ts_ptr`; we own the mbuf exclusively.
                unsafe { self.ts_ptr(off).write(meta.timestamp_ns) };
            } else {
                m.ol_flags &= !flag;
            }
        }
    }

    #[inline(always)]
    fn pkt_meta(&self) -> &PacketMeta {
        // SAFETY: every Mbuf comes from a Mempool (the `from_raw` contract), whose mbufs have a
        // private area of at least size_of::<PacketMeta>() bytes, aligned and initialised to
        // PacketMeta::EMPTY at pool creation (any bit pattern is a valid PacketMeta anyway);
        // we own the mbuf, and the borrow of `self` keeps it alive and unaliased by writers.
        unsafe { &*self.priv_ptr() }
    }

    #[inline(always)]
    fn pkt_meta_mut(&mut self) -> &mut PacketMeta {
        // SAFETY: as in `pkt_meta`; `&mut self` makes the access exclusive.
        unsafe { &mut *self.priv_ptr() }
    }

    #[inline(always)]
    fn data_and_meta_mut(&mut self) -> (&[u8], &mut PacketMeta) {
        let len = self.raw().data_len as usize;
        // SAFETY: as in `data` and `pkt_meta_mut`. The private area lies between the mbuf
        // header and its data buffer (DPDK's mbuf layout: header, private area, buffer), so
        // it never overlaps the packet bytes: the shared and the exclusive borrow are of
        // disjoint memory, and `&mut self` keeps both exclusive to the caller.
        unsafe {
            (
                std::slice::from_raw_parts(self.data_ptr(), len),
                &mut *self.priv_ptr(),
            )
        }
    }
}
