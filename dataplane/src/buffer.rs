//! The one packet-buffer abstraction of the dataplane.
//!
//! Implemented by DPDK mbufs (`io::dpdk::Mbuf`) and by [`OwnedBuf`], so every stage runs in
//! unit tests without DPDK. A buffer is one contiguous segment with headroom in front of the
//! packet (for encapsulation) and tailroom behind it.

use crate::meta::PacketMeta;
use thiserror::Error;

/// Headroom every buffer implementation guarantees on receive (DPDK's RTE_PKTMBUF_HEADROOM).
pub const DEFAULT_HEADROOM: usize = 128;

/// Data room of an owned buffer (matches DPDK's default mbuf data room of 2048 + headroom).
pub const DEFAULT_DATA_ROOM: usize = 2048;

#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum BufError {
    #[error("not enough headroom: need {need}, have {have}")]
    NoHeadroom { need: usize, have: usize },
    #[error("not enough tailroom: need {need}, have {have}")]
    NoTailroom { need: usize, have: usize },
    #[error("cannot remove {want} bytes from a {len}-byte packet")]
    TooShort { want: usize, len: usize },
}

/// Per-packet metadata carried beside the bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meta {
    /// Port the packet arrived on, where the backend records it per packet (pcap and memory
    /// backends: our port index; DPDK: what the driver wrote, see `io::dpdk::Mbuf`). The
    /// runtime's authoritative value is per batch (`runtime::Batch::rx_port`); a stage that
    /// keeps packets beyond their batch (queues) stamps it with `set_meta`.
    pub rx_port: u16,
    /// RSS or software flow hash (0 if none).
    pub hash: u32,
    /// Arrival timestamp in nanoseconds (0 if unset): the capture time for pcap replays,
    /// the worker clock for live ports. Queues keep their enqueue time in
    /// [`PacketMeta::enqueue_ns`], not here.
    pub timestamp_ns: u64,
}

/// A single-segment packet buffer with headroom.
///
/// All operations are O(1) pointer/offset moves; none allocates.
pub trait PacketBuf: Send {
    /// The packet bytes.
    fn data(&self) -> &[u8];
    /// The packet bytes, writable.
    fn data_mut(&mut self) -> &mut [u8];
    /// Bytes available in front of the packet.
    fn headroom(&self) -> usize;
    /// Bytes available behind the packet.
    fn tailroom(&self) -> usize;
    /// Grow the packet by `n` bytes at the front and return them (contents unspecified).
    fn prepend(&mut self, n: usize) -> Result<&mut [u8], BufError>;
    /// Remove `n` bytes from the front (decapsulation).
    fn adj(&mut self, n: usize) -> Result<(), BufError>;
    /// Grow the packet by `n` bytes at the end and return them (contents unspecified).
    fn append(&mut self, n: usize) -> Result<&mut [u8], BufError>;
    /// Remove `n` bytes from the end.
    fn trim(&mut self, n: usize) -> Result<(), BufError>;
    /// Keep bytes `off..off + n` of the packet: [`adj`](Self::adj)`(off)`, then the tail
    /// grown ([`append`](Self::append)) or cut ([`trim`](Self::trim)) to `n` bytes; an
    /// error is that of the first step that fails, with what the steps before it did.
    #[inline]
    fn keep(&mut self, off: usize, n: usize) -> Result<(), BufError> {
        keep_by_steps(self, off, n)
    }
    /// Metadata.
    fn meta(&self) -> Meta;
    /// Replace metadata.
    fn set_meta(&mut self, meta: Meta);
    /// What stages learned about the packet ([`PacketMeta`]); stale on rx until the
    /// classifier resets it.
    fn pkt_meta(&self) -> &PacketMeta;
    /// The packet's [`PacketMeta`], writable.
    fn pkt_meta_mut(&mut self) -> &mut PacketMeta;
    /// The packet bytes and its [`PacketMeta`], writable, at once (they never overlap), so
    /// a classifier can write the record in place while it reads the bytes.
    fn data_and_meta_mut(&mut self) -> (&[u8], &mut PacketMeta);

    /// The packet's first `n` bytes, if it has that many: `self.data().get(..n)`, for a
    /// reader of headers at fixed offsets (the fridge's usual records). An implementation
    /// may answer it with one length check where [`data`](Self::data) checks its own bounds
    /// and the reader then checks the prefix's.
    #[inline]
    fn head(&self, n: usize) -> Option<&[u8]> {
        self.data().get(..n)
    }

    fn len(&self) -> usize {
        self.data().len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// [`keep_by_steps`] out of line, for an implementation whose `keep` has a common case to
/// be inlined whole.
#[cold]
#[inline(never)]
pub(crate) fn keep_by_steps_cold<B: PacketBuf>(
    b: &mut B,
    off: usize,
    n: usize,
) -> Result<(), BufError> {
    keep_by_steps(b, off, n)
}

/// [`PacketBuf::keep`] as its documented steps.
#[inline]
pub(crate) fn keep_by_steps<B: PacketBuf + ?Sized>(
    b: &mut B,
    off: usize,
    n: usize,
) -> Result<(), BufError> {
    b.adj(off)?;
    let len = b.len();
    if n > len {
        b.append(n - len).map(|_| ())
    } else {
        b.trim(len - n)
    }
}

/// A plain heap buffer: the test and pcap-backend implementation of [`PacketBuf`].
///
/// Allocated once and recycled through a pool by the backends that use it; creating one is
/// not meant for the per-packet path.
#[derive(Clone)]
pub struct OwnedBuf {
    room: Box<[u8]>,
    start: usize,
    end: usize,
    meta: Meta,
    pkt_meta: PacketMeta,
}

impl std::fmt::Debug for OwnedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedBuf")
            .field("len", &self.len())
            .field("headroom", &self.start)
            .field("meta", &self.meta)
            .field("pkt_meta", &self.pkt_meta)
            .finish()
    }
}

impl OwnedBuf {
    /// An empty buffer with `headroom` bytes in front and `data_room` bytes for the packet.
    pub fn with_capacity(headroom: usize, data_room: usize) -> OwnedBuf {
        OwnedBuf {
            room: vec![0u8; headroom + data_room].into_boxed_slice(),
            start: headroom,
            end: headroom,
            meta: Meta::default(),
            pkt_meta: PacketMeta::EMPTY,
        }
    }

    /// An empty buffer with the default headroom and data room.
    pub fn new() -> OwnedBuf {
        Self::with_capacity(DEFAULT_HEADROOM, DEFAULT_DATA_ROOM)
    }

    /// A buffer holding a copy of `bytes`, with default headroom and at least the default room.
    pub fn from_slice(bytes: &[u8]) -> OwnedBuf {
        let mut b = Self::with_capacity(DEFAULT_HEADROOM, bytes.len().max(DEFAULT_DATA_ROOM));
        b.set_data(bytes).expect("sized to fit");
        b
    }

    /// The invariant every constructor and method keeps, which lets `data`, `data_mut`,
    /// `prepend`, `data_and_meta_mut` and `head` slice `room` without a range check:
    /// `start <= end <= room.len()`. `with_capacity` and `reset` set `start = end <=
    /// room.len()`; `set_data` and `append` check the room behind `end`, `prepend` the room
    /// before `start`, `adj` and `trim` the packet's length; `room` is never resized.
    /// Checked in debug builds.
    #[inline(always)]
    fn in_bounds(&self) {
        debug_assert!(self.start <= self.end && self.end <= self.room.len());
    }

    /// Reset to an empty packet with the default headroom (for recycling).
    pub fn reset(&mut self) {
        let h = DEFAULT_HEADROOM.min(self.room.len());
        self.start = h;
        self.end = h;
        self.meta = Meta::default();
        self.pkt_meta = PacketMeta::EMPTY;
    }

    /// Reset and copy `bytes` in as the packet.
    pub fn set_data(&mut self, bytes: &[u8]) -> Result<(), BufError> {
        self.reset();
        let room = self.room.len() - self.start;
        if bytes.len() > room {
            return Err(BufError::NoTailroom {
                need: bytes.len(),
                have: room,
            });
        }
        self.end = self.start + bytes.len();
        self.room[self.start..self.end].copy_from_slice(bytes);
        Ok(())
    }
}

impl Default for OwnedBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl PacketBuf for OwnedBuf {
    /// No range check: see `OwnedBuf::in_bounds` (the checked slicing cost 5 instructions a
    /// call, three or four calls a packet in the UPF stage).
    #[inline]
    fn data(&self) -> &[u8] {
        self.in_bounds();
        // SAFETY: `start <= end <= room.len()` always holds (`in_bounds`), so the range is
        // in bounds and not reversed.
        unsafe { self.room.get_unchecked(self.start..self.end) }
    }

    #[inline]
    fn data_mut(&mut self) -> &mut [u8] {
        self.in_bounds();
        // SAFETY: as in `data`.
        unsafe { self.room.get_unchecked_mut(self.start..self.end) }
    }

    #[inline]
    fn headroom(&self) -> usize {
        self.start
    }

    #[inline]
    fn tailroom(&self) -> usize {
        self.room.len() - self.end
    }

    #[inline]
    fn prepend(&mut self, n: usize) -> Result<&mut [u8], BufError> {
        if n > self.start {
            return Err(BufError::NoHeadroom {
                need: n,
                have: self.start,
            });
        }
        self.start -= n;
        self.in_bounds();
        // SAFETY: `n <= ` the old `start` (checked above), so `start + n` is the old `start`,
        // at most `end <= room.len()` (`in_bounds`).
        Ok(unsafe { self.room.get_unchecked_mut(self.start..self.start + n) })
    }

    #[inline]
    fn adj(&mut self, n: usize) -> Result<(), BufError> {
        if n > self.end - self.start {
            return Err(BufError::TooShort {
                want: n,
                len: self.end - self.start,
            });
        }
        self.start += n;
        Ok(())
    }

    /// A window inside the packet (the common case) with one test; anything else by the
    /// documented steps.
    #[inline]
    fn keep(&mut self, off: usize, n: usize) -> Result<(), BufError> {
        let len = self.end - self.start;
        if off <= len && n <= len - off {
            self.start += off;
            self.end = self.start + n;
            return Ok(());
        }
        keep_by_steps(self, off, n)
    }

    #[inline]
    fn append(&mut self, n: usize) -> Result<&mut [u8], BufError> {
        let have = self.room.len() - self.end;
        if n > have {
            return Err(BufError::NoTailroom { need: n, have });
        }
        let old = self.end;
        self.end += n;
        Ok(&mut self.room[old..self.end])
    }

    #[inline]
    fn trim(&mut self, n: usize) -> Result<(), BufError> {
        if n > self.end - self.start {
            return Err(BufError::TooShort {
                want: n,
                len: self.end - self.start,
            });
        }
        self.end -= n;
        Ok(())
    }

    #[inline]
    fn meta(&self) -> Meta {
        self.meta
    }

    #[inline]
    fn set_meta(&mut self, meta: Meta) {
        self.meta = meta;
    }

    #[inline]
    fn pkt_meta(&self) -> &PacketMeta {
        &self.pkt_meta
    }

    #[inline]
    fn pkt_meta_mut(&mut self) -> &mut PacketMeta {
        &mut self.pkt_meta
    }

    #[inline]
    fn data_and_meta_mut(&mut self) -> (&[u8], &mut PacketMeta) {
        self.in_bounds();
        // SAFETY: as in `data`.
        let d = unsafe { self.room.get_unchecked(self.start..self.end) };
        (d, &mut self.pkt_meta)
    }

    /// One length check (`data` checks `start <= end <= room.len()` first, then the caller
    /// checks the prefix: 9 instructions against 5 in the fridge's loop).
    #[inline]
    fn head(&self, n: usize) -> Option<&[u8]> {
        debug_assert!(self.start <= self.end && self.end <= self.room.len());
        // `start <= room.len() <= isize::MAX` (an allocation), so for `n <= isize::MAX` (a
        // test that folds away for a constant `n`) `start + n` does not wrap.
        let end = self.start.wrapping_add(n);
        if n > isize::MAX as usize || end > self.end {
            return None;
        }
        // SAFETY: every constructor and method keeps `start <= end <= room.len()`
        // (`with_capacity` and `reset` set `start = end <= room.len()`; `set_data`, `append`
        // check the room behind `end`, `prepend` the room before `start`, `adj` and `trim`
        // the packet's length), and `room` is never resized; so `start..start + n`, which
        // does not wrap (above) and ends at most at `self.end`, is in bounds.
        Some(unsafe { self.room.get_unchecked(self.start..end) })
    }
}

/// Conformance checks every [`PacketBuf`] implementation must pass; the DPDK mbuf tests call
/// this too, so both implementations are held to one contract.
pub fn conformance<B: PacketBuf>(mut b: B, payload: &[u8]) {
    assert_eq!(b.data(), payload);
    let head = b.headroom();
    assert!(
        head >= 64,
        "at least 64 bytes of headroom for encapsulation, got {head}"
    );
    let hdr = b.prepend(36).expect("prepend within headroom");
    hdr.fill(0xab);
    assert_eq!(b.len(), payload.len() + 36);
    assert_eq!(b.headroom(), head - 36);
    assert_eq!(&b.data()[..36], &[0xab; 36][..]);
    assert_eq!(&b.data()[36..], payload);
    b.adj(36).unwrap();
    assert_eq!(b.data(), payload);
    assert!(matches!(
        b.prepend(head + 1),
        Err(BufError::NoHeadroom { .. })
    ));
    assert_eq!(
        b.data(),
        payload,
        "failed prepend leaves the packet unchanged"
    );
    let tail = b.tailroom();
    b.append(4).unwrap().copy_from_slice(&[1, 2, 3, 4]);
    assert_eq!(&b.data()[payload.len()..], &[1, 2, 3, 4]);
    assert_eq!(b.tailroom(), tail - 4);
    b.trim(4).unwrap();
    assert_eq!(b.data(), payload);
    assert!(b.trim(payload.len() + 1).is_err());
    assert!(b.adj(payload.len() + 1).is_err());
    let m = Meta {
        rx_port: 3,
        hash: 0xdead_beef,
        timestamp_ns: 42,
    };
    b.set_meta(m);
    assert_eq!(b.meta(), m);
    // The packet metadata is its own record: writable in place, every field kept, untouched
    // by `set_meta` and by header moves.
    let pm = crate::meta::PacketMeta {
        enqueue_ns: u64::MAX - 1,
        flow_hash: 0x1234_5678,
        teid: 0xfeed_f00d,
        session: 77,
        sojourn_ns: u32::MAX,
        l3_off: 14,
        l4_off: 34,
        inner_l3_off: 70,
        inner_l4_off: 90,
        flags: crate::meta::flags::CLASSIFIED | crate::meta::flags::GPDU,
        proto: 6,
        dir: crate::meta::Direction::Uplink as u8,
        qfi: 9,
        qid: 7,
        color: 2,
        _spare: 0xaa,
    };
    *b.pkt_meta_mut() = crate::meta::PacketMeta::EMPTY;
    assert_eq!(*b.pkt_meta(), crate::meta::PacketMeta::EMPTY);
    *b.pkt_meta_mut() = pm;
    assert_eq!(*b.pkt_meta(), pm);
    b.pkt_meta_mut().sojourn_ns = 5;
    assert_eq!(b.pkt_meta().sojourn_ns, 5);
    assert_eq!(b.pkt_meta().enqueue_ns, pm.enqueue_ns);
    b.pkt_meta_mut().sojourn_ns = pm.sojourn_ns;
    b.set_meta(Meta::default());
    b.prepend(8).unwrap();
    b.adj(8).unwrap();
    assert_eq!(
        *b.pkt_meta(),
        pm,
        "set_meta and header moves keep the record"
    );
    b.set_meta(m);
    assert_eq!(b.meta(), m, "the record does not overlap the rx metadata");
    // Bytes and record at once: the same bytes, the same record, a write lands in it and
    // leaves the bytes alone.
    {
        let (d, r) = b.data_and_meta_mut();
        assert_eq!((d, *r), (payload, pm));
        r.flow_hash = 7;
    }
    assert_eq!((b.data(), b.pkt_meta().flow_hash), (payload, 7));
    b.pkt_meta_mut().flow_hash = pm.flow_hash;
    b.data_mut()[0] ^= 0xff;
    assert_eq!(b.data()[0], payload[0] ^ 0xff);
    assert_eq!(*b.pkt_meta(), pm, "nor the packet bytes");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `OwnedBuf::keep` (one test for a window inside the packet) is the documented steps,
    /// result and buffer, for every offset and length around the packet's and the room's.
    #[test]
    fn keep_is_adj_then_set_len() {
        for (headroom, room, len) in [(128, 0, 0), (128, 10, 6), (128, 64, 40), (128, 40, 40)] {
            for off in 0..len + 3 {
                for n in 0..room + 3 {
                    let mut a = OwnedBuf::with_capacity(headroom, room);
                    a.set_data(&(0..len as u8).collect::<Vec<_>>()).unwrap();
                    let mut b = a.clone();
                    let ra = a.keep(off, n);
                    let rb = keep_by_steps(&mut b, off, n);
                    assert_eq!(ra, rb, "off {off} n {n}");
                    assert_eq!((a.start, a.end), (b.start, b.end), "off {off} n {n}");
                    assert_eq!(a.data(), b.data());
                }
            }
        }
    }

    #[test]
    fn owned_buf_conforms() {
        let payload: Vec<u8> = (0..200u8).collect();
        conformance(OwnedBuf::from_slice(&payload), &payload);
    }

    #[test]
    fn reset_clears_the_packet_metadata() {
        let mut b = OwnedBuf::from_slice(&[1, 2, 3]);
        assert_eq!(*b.pkt_meta(), PacketMeta::EMPTY);
        b.pkt_meta_mut().teid = 9;
        b.reset();
        assert_eq!(*b.pkt_meta(), PacketMeta::EMPTY);
    }

    /// `head(n)` is `data().get(..n)` for every `n`, through every move of the packet's
    /// bounds (and in buffers without headroom or room).
    #[test]
    fn head_is_the_data_prefix() {
        let check = |b: &OwnedBuf| {
            for n in 0..=b.len() + 3 {
                assert_eq!(b.head(n), b.data().get(..n), "n {n}, len {}", b.len());
            }
        };
        for (headroom, room) in [(0, 0), (0, 5), (3, 0), (8, 40), (128, 2048)] {
            let mut b = OwnedBuf::with_capacity(headroom, room);
            check(&b);
            let _ = b.set_data(&(0..room.min(30) as u8).collect::<Vec<_>>());
            check(&b);
            for step in 0..12usize {
                let n = step % 5;
                let _ = match step % 4 {
                    0 => b.prepend(n).map(|_| ()),
                    1 => b.append(n).map(|_| ()),
                    2 => b.adj(n),
                    _ => b.trim(n),
                };
                check(&b);
            }
            b.reset();
            check(&b);
        }
        let c = OwnedBuf::from_slice(&[1, 2, 3]).clone();
        assert_eq!(c.head(2), Some(&[1u8, 2][..]));
        assert_eq!(c.head(4), None);
        for n in [
            isize::MAX as usize,
            isize::MAX as usize + 1,
            usize::MAX - 2,
            usize::MAX,
        ] {
            assert_eq!(c.head(n), None, "{n}");
        }
    }

    #[test]
    fn oversize_set_data_is_an_error() {
        let mut b = OwnedBuf::with_capacity(128, 64);
        assert!(b.set_data(&[0u8; 65]).is_err());
        assert!(b.set_data(&[0u8; 64]).is_ok());
    }
}
