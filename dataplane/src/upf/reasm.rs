//! Reassembly of outer IPv4 and IPv6 fragments addressed to our N3/N9 addresses (a gNB on
//! a 1500-byte link fragments the outer packet of a full-size uplink G-PDU), I/O-free with
//! time passed in: the UPF stage feeds it each fragment's IP packet and, when a datagram is
//! complete, has it written into the buffer of the fragment that completed it and processes
//! that as any received G-PDU.
//!
//! Rules:
//! * IPv4, RFC 791 section 3.2: fragments of one datagram share (source, destination,
//!   protocol, identification); every fragment but the last carries a multiple of 8 bytes;
//!   the header is the first fragment's (offset 0). Data that overlaps data already held
//!   is copied over it, as RFC 791's procedure does (counted in [`Reassembler::overlaps`]).
//! * IPv6, RFC 8200 section 4.5: (source, destination, identification); the unfragmentable
//!   part is the first fragment's, its last Next Header takes the Fragment header's. A
//!   fragment that overlaps one held discards the whole datagram, and fragments of it that
//!   arrive later are dropped until its timeout (RFC 5722 section 4).
//! * Both: an exact duplicate (same offset, length and bytes, RFC 8200 section 4.5) is
//!   dropped alone; a first fragment that does not hold the whole UDP header is refused
//!   (tiny fragments, RFC 1858 section 3 and RFC 7112); a datagram larger than
//!   `max_datagram` bytes, a second different end, or data past the end is refused.
//!
//! Memory is bounded and allocated at construction: `max_datagrams` slots of
//! `max_datagram` bytes (plus room for the header); `max_bytes` bounds the fragment bytes
//! held at once, `max_per_source` the datagrams one source may have in flight. A datagram
//! not complete `timeout_ns` after its first fragment is given up, checked whenever a
//! fragment arrives (so a stale slot is freed before anyone needs it). Everything refused
//! has a [`Refusal`] that the stage counts as a named drop reason.

use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{ipv4, ipv6, ipv6ext, udp};

/// Largest datagram a slot can hold (bytes after the IP header / unfragmentable part).
pub const MAX_DATAGRAM: usize = 16 * 1024;
/// Room kept in front of a slot's payload for the header: IPv4 up to 60 bytes, IPv6 the
/// fixed header and up to 176 bytes of extension headers before the Fragment header.
const HDR_ROOM: usize = 216;
/// Fragments one datagram may have (each recorded to tell duplicates from overlaps).
pub const MAX_FRAGMENTS: usize = 64;
const BLOCKS: usize = MAX_DATAGRAM / 8;

/// Limits of a [`Reassembler`] (`[upf.reassembly]` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReasmConfig {
    /// Datagrams in reassembly at once (slots, allocated up front).
    pub max_datagrams: usize,
    /// Largest reassembled datagram payload (at most [`MAX_DATAGRAM`]).
    pub max_datagram: usize,
    /// Fragment bytes held at once over all slots.
    pub max_bytes: usize,
    /// Datagrams one source address may have in reassembly.
    pub max_per_source: usize,
    /// Give a datagram up this long after its first fragment arrived.
    pub timeout_ns: u64,
}

impl Default for ReasmConfig {
    fn default() -> Self {
        ReasmConfig {
            max_datagrams: 64,
            max_datagram: 2048,
            max_bytes: 64 * 1024,
            max_per_source: 16,
            timeout_ns: 2_000_000_000,
        }
    }
}

/// Why a fragment was refused (each a drop reason of the UPF stage, `reasm_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not a fragment, bad lengths, a non-last fragment not a multiple of 8 bytes, no
    /// Fragment header where the classifier saw one, an unfragmentable part too long.
    Malformed,
    /// The first fragment does not hold the whole UDP header.
    Tiny,
    /// Past `max_datagram`, or past the end a last fragment set, or a second different end.
    TooBig,
    /// Every slot is busy.
    TableFull,
    /// The source has `max_per_source` datagrams in reassembly.
    SourceLimit,
    /// Holding it would exceed `max_bytes`.
    MemoryFull,
    /// IPv6 overlap (RFC 5722): the datagram is discarded, and its later fragments.
    Overlap,
    /// An exact duplicate of a fragment held.
    Duplicate,
    /// More than [`MAX_FRAGMENTS`] fragments for one datagram: the datagram is discarded.
    TooManyFragments,
    /// A fragment of a datagram already discarded (overlap, a second end, too many
    /// fragments), dropped until its timeout.
    Discarded,
}

/// What became of a fragment given to [`Reassembler::insert`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Held; the datagram is not complete yet.
    Held,
    /// The datagram is complete: [`Reassembler::finish`] it into `len` bytes.
    Complete { slot: usize, len: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Key {
    v6: bool,
    proto: u8,
    src: u128,
    dst: u128,
    ident: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    Open,
    /// Discarded (RFC 5722): later fragments are dropped until the timeout.
    Dead,
}

#[derive(Debug)]
struct Slot {
    state: State,
    key: Key,
    born_ns: u64,
    /// Bytes of fragment payload held (counted against `max_bytes`).
    held: usize,
    /// Payload length, once the last fragment arrived.
    end: Option<usize>,
    /// Header length stored in front of the payload (0: first fragment not seen yet).
    hdr_len: usize,
    /// IPv6: offset in the header of the Next Header byte that named the Fragment header.
    nh_at: usize,
    next_header: u8,
    /// Blocks of 8 payload bytes received.
    have: [u64; BLOCKS / 64],
    frags: [(u16, u16); MAX_FRAGMENTS],
    nfrags: usize,
    /// `HDR_ROOM` bytes of header room, then the payload.
    data: Box<[u8]>,
}

/// A fragment's facts, read from its IP packet.
struct Frag<'a> {
    key: Key,
    offset: usize,
    more: bool,
    /// The header to keep if this is the first fragment (IPv4 header; IPv6 header and the
    /// extension headers before the Fragment header).
    hdr: &'a [u8],
    nh_at: usize,
    next_header: u8,
    /// The upper-layer protocol (IPv6: the Fragment header's Next Header).
    upper: u8,
    payload: &'a [u8],
}

/// The reassembly table of one worker. See the module docs.
#[derive(Debug)]
pub struct Reassembler {
    cfg: ReasmConfig,
    slots: Vec<Slot>,
    held: usize,
    /// Fragments whose data overlapped data already held (IPv4, copied over it).
    pub overlaps: u64,
}

impl Reassembler {
    /// Allocates every slot now.
    pub fn new(cfg: ReasmConfig) -> Reassembler {
        let cfg = ReasmConfig {
            max_datagram: cfg.max_datagram.min(MAX_DATAGRAM),
            ..cfg
        };
        let slots = (0..cfg.max_datagrams)
            .map(|_| Slot {
                state: State::Free,
                key: Key::default(),
                born_ns: 0,
                held: 0,
                end: None,
                hdr_len: 0,
                nh_at: 0,
                next_header: 0,
                have: [0; BLOCKS / 64],
                frags: [(0, 0); MAX_FRAGMENTS],
                nfrags: 0,
                data: vec![0u8; HDR_ROOM + cfg.max_datagram].into_boxed_slice(),
            })
            .collect();
        Reassembler {
            cfg,
            slots,
            held: 0,
            overlaps: 0,
        }
    }

    pub fn config(&self) -> &ReasmConfig {
        &self.cfg
    }

    /// Datagrams in reassembly (discarded ones waiting for their timeout included).
    pub fn in_flight(&self) -> usize {
        self.slots.iter().filter(|s| s.state != State::Free).count()
    }

    /// Fragment bytes held.
    pub fn held_bytes(&self) -> usize {
        self.held
    }

    /// Give up every datagram older than the timeout at `now_ns`; returns how many that
    /// were still open (discarded ones are not counted again).
    pub fn expire(&mut self, now_ns: u64) -> usize {
        let mut n = 0;
        for i in 0..self.slots.len() {
            let s = &self.slots[i];
            if s.state != State::Free && now_ns.saturating_sub(s.born_ns) >= self.cfg.timeout_ns {
                n += usize::from(s.state == State::Open);
                self.free(i);
            }
        }
        n
    }

    fn free(&mut self, i: usize) {
        let s = &mut self.slots[i];
        self.held -= s.held;
        s.state = State::Free;
        s.held = 0;
    }

    /// Take the fragment `ip` (an IPv4 or IPv6 packet from its first header byte, its
    /// length as the header says or more) arriving at `now_ns`.
    pub fn insert(&mut self, ip: &[u8], now_ns: u64) -> Result<Outcome, Refusal> {
        let f = parse(ip)?;
        if f.offset == 0 && f.payload.len() < udp::HEADER_LEN && f.upper == ip_protocol::UDP {
            return Err(Refusal::Tiny);
        }
        if f.payload.is_empty() || (f.more && f.payload.len() % 8 != 0) {
            return Err(Refusal::Malformed);
        }
        let end = f.offset + f.payload.len();
        if end > self.cfg.max_datagram {
            return Err(Refusal::TooBig);
        }
        let i = match self
            .slots
            .iter()
            .position(|s| s.state != State::Free && s.key == f.key)
        {
            Some(i) => i,
            None => self.open(&f.key, now_ns)?,
        };
        if self.slots[i].state == State::Dead {
            return Err(Refusal::Discarded);
        }
        let r = self.add(i, &f, end);
        if let Err(e) = r {
            if matches!(
                e,
                Refusal::Overlap | Refusal::TooManyFragments | Refusal::TooBig
            ) {
                self.discard(i);
            }
            if self.slots[i].state == State::Open && self.slots[i].nfrags == 0 {
                self.free(i);
            }
            return Err(e);
        }
        let s = &self.slots[i];
        match s.end {
            Some(len) if s.hdr_len != 0 && covered(&s.have, len) => Ok(Outcome::Complete {
                slot: i,
                len: s.hdr_len + len,
            }),
            _ => Ok(Outcome::Held),
        }
    }

    /// A free slot for a new datagram of `key`, within the limits.
    fn open(&mut self, key: &Key, now_ns: u64) -> Result<usize, Refusal> {
        let same_src = self
            .slots
            .iter()
            .filter(|s| s.state != State::Free && s.key.src == key.src && s.key.v6 == key.v6)
            .count();
        if same_src >= self.cfg.max_per_source {
            return Err(Refusal::SourceLimit);
        }
        let i = self
            .slots
            .iter()
            .position(|s| s.state == State::Free)
            .ok_or(Refusal::TableFull)?;
        let s = &mut self.slots[i];
        s.state = State::Open;
        s.key = *key;
        s.born_ns = now_ns;
        s.held = 0;
        s.end = None;
        s.hdr_len = 0;
        s.have = [0; BLOCKS / 64];
        s.nfrags = 0;
        Ok(i)
    }

    /// IPv6 (RFC 5722) or a datagram that cannot be finished: drop what it holds, keep the
    /// slot (dead) until the timeout so its later fragments are dropped too.
    fn discard(&mut self, i: usize) {
        let s = &mut self.slots[i];
        self.held -= s.held;
        s.held = 0;
        s.state = State::Dead;
    }

    fn add(&mut self, i: usize, f: &Frag<'_>, end: usize) -> Result<(), Refusal> {
        let max_bytes = self.cfg.max_bytes;
        let held = self.held;
        let s = &mut self.slots[i];
        let (b0, b1) = (f.offset / 8, end.div_ceil(8));
        let overlap = any_in(&s.have, b0, b1);
        if overlap {
            let dup = s.frags[..s.nfrags]
                .iter()
                .any(|&(o, l)| usize::from(o) == f.offset && usize::from(l) == f.payload.len())
                && s.data[HDR_ROOM + f.offset..HDR_ROOM + end] == *f.payload;
            if dup {
                return Err(Refusal::Duplicate);
            }
            if f.key.v6 {
                return Err(Refusal::Overlap);
            }
        }
        match (f.more, s.end) {
            (false, Some(e)) if e != end => return Err(Refusal::TooBig),
            (true, Some(e)) if end > e => return Err(Refusal::TooBig),
            (false, None) if s.have_past(end) => return Err(Refusal::TooBig),
            _ => {}
        }
        if s.nfrags == MAX_FRAGMENTS {
            return Err(Refusal::TooManyFragments);
        }
        if held + f.payload.len() > max_bytes {
            return Err(Refusal::MemoryFull);
        }
        if f.offset == 0 {
            if f.hdr.len() > HDR_ROOM {
                return Err(Refusal::Malformed);
            }
            s.hdr_len = f.hdr.len();
            s.data[HDR_ROOM - f.hdr.len()..HDR_ROOM].copy_from_slice(f.hdr);
            s.nh_at = f.nh_at;
            s.next_header = f.next_header;
        }
        if !f.more {
            s.end = Some(end);
        }
        s.data[HDR_ROOM + f.offset..HDR_ROOM + end].copy_from_slice(f.payload);
        set_range(&mut s.have, b0, b1);
        s.frags[s.nfrags] = (f.offset as u16, f.payload.len() as u16);
        s.nfrags += 1;
        s.held += f.payload.len();
        self.held += f.payload.len();
        if overlap {
            self.overlaps += 1;
        }
        Ok(())
    }

    /// Give up complete datagram `slot` without writing it (no buffer to hold it).
    pub fn abandon(&mut self, slot: usize) {
        self.free(slot);
    }

    /// Write complete datagram `slot` (as [`Outcome::Complete`] gave it) into `out`, which
    /// must be exactly its length, with its header made whole again (IPv4: length, no MF or
    /// offset, checksum; IPv6: payload length, the Fragment header removed), and free the
    /// slot.
    pub fn finish(&mut self, slot: usize, out: &mut [u8]) {
        let s = &self.slots[slot];
        let len = s.end.unwrap_or(0);
        let hl = s.hdr_len;
        debug_assert_eq!(out.len(), hl + len);
        out.copy_from_slice(&s.data[HDR_ROOM - hl..HDR_ROOM + len]);
        if s.key.v6 {
            out[s.nh_at] = s.next_header;
            let mut ip = ipv6::Packet::new_unchecked(&mut out[..]);
            ip.set_payload_len((hl + len - ipv6::HEADER_LEN) as u16);
        } else {
            let mut ip = ipv4::Packet::new_unchecked(&mut out[..]);
            ip.set_total_len((hl + len) as u16);
            ip.set_more_frags(false);
            ip.set_frag_offset(0);
            ip.fill_checksum();
        }
        self.free(slot);
    }
}

impl Slot {
    /// Whether data was received at or past byte `end` (a last fragment that would cut it).
    fn have_past(&self, end: usize) -> bool {
        any_in(&self.have, end.div_ceil(8), BLOCKS)
    }
}

/// The mask of bits `lo..hi` of word `w` of a block range `b0..b1`.
#[inline]
fn word_mask(w: usize, b0: usize, b1: usize) -> u64 {
    let lo = b0.max(w * 64) - w * 64;
    let hi = b1.min(w * 64 + 64) - w * 64;
    if hi - lo == 64 {
        u64::MAX
    } else {
        ((1u64 << (hi - lo)) - 1) << lo
    }
}

/// Whether any block of `b0..b1` is set (a word at a time).
fn any_in(have: &[u64; BLOCKS / 64], b0: usize, b1: usize) -> bool {
    b0 < b1 && (b0 / 64..=(b1 - 1) / 64).any(|w| have[w] & word_mask(w, b0, b1) != 0)
}

/// Set blocks `b0..b1`.
fn set_range(have: &mut [u64; BLOCKS / 64], b0: usize, b1: usize) {
    if b0 < b1 {
        let (w0, w1) = (b0 / 64, (b1 - 1) / 64);
        for (w, word) in have.iter_mut().enumerate().take(w1 + 1).skip(w0) {
            *word |= word_mask(w, b0, b1);
        }
    }
}

/// Whether blocks covering bytes `0..len` are all received.
fn covered(have: &[u64; BLOCKS / 64], len: usize) -> bool {
    let n = len.div_ceil(8);
    let (full, rest) = (n / 64, n % 64);
    have[..full].iter().all(|&w| w == u64::MAX)
        && (rest == 0 || have[full] & ((1u64 << rest) - 1) == (1u64 << rest) - 1)
}

/// Read a fragment's facts from its IP packet.
fn parse(ip: &[u8]) -> Result<Frag<'_>, Refusal> {
    match ip.first().map(|b| b >> 4) {
        Some(4) => {
            let p = ipv4::Packet::new_checked(ip).map_err(|_| Refusal::Malformed)?;
            let (hl, tl) = (p.header_len(), usize::from(p.total_len()));
            if !p.is_fragment() {
                return Err(Refusal::Malformed);
            }
            Ok(Frag {
                key: Key {
                    v6: false,
                    proto: p.protocol(),
                    src: u128::from(u32::from(p.src_addr())),
                    dst: u128::from(u32::from(p.dst_addr())),
                    ident: u32::from(p.ident()),
                },
                offset: usize::from(p.frag_offset()),
                more: p.more_frags(),
                hdr: &ip[..hl],
                nh_at: 0,
                next_header: 0,
                upper: p.protocol(),
                payload: &ip[hl..tl],
            })
        }
        Some(6) => {
            let p = ipv6::Packet::new_checked(ip).map_err(|_| Refusal::Malformed)?;
            let end = p.total_len();
            let body = &ip[ipv6::HEADER_LEN..end];
            // The Next Header byte that names the header being looked at.
            let mut nh_at = 6;
            for h in ipv6ext::walk(p.next_header(), body) {
                let h = h.map_err(|_| Refusal::Malformed)?;
                if h.header_type == ip_protocol::IPV6_FRAG {
                    let fh = ipv6ext::FragmentHeader::new_checked(&body[h.range()])
                        .map_err(|_| Refusal::Malformed)?;
                    let at = ipv6::HEADER_LEN + h.offset;
                    return Ok(Frag {
                        key: Key {
                            v6: true,
                            proto: 0,
                            src: u128::from(p.src_addr()),
                            dst: u128::from(p.dst_addr()),
                            ident: fh.ident(),
                        },
                        offset: usize::from(fh.frag_offset()),
                        more: fh.more_frags(),
                        hdr: &ip[..at],
                        nh_at,
                        next_header: fh.next_header(),
                        upper: fh.next_header(),
                        payload: &ip[at + ipv6ext::FRAGMENT_HEADER_LEN..end],
                    });
                }
                nh_at = ipv6::HEADER_LEN + h.offset;
            }
            Err(Refusal::Malformed)
        }
        _ => Err(Refusal::Malformed),
    }
}

/// Fuzz entry: feed `data` as a stream of fragments (each prefixed by a length byte and a
/// time step) to a small reassembler and finish whatever completes. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let mut r = Reassembler::new(ReasmConfig {
        max_datagrams: 4,
        max_datagram: 4096,
        max_bytes: 6000,
        max_per_source: 3,
        timeout_ns: 100,
    });
    let mut now = 0u64;
    let mut rest = data;
    let mut out = vec![0u8; HDR_ROOM + MAX_DATAGRAM];
    while rest.len() >= 3 {
        let n = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 3);
        now += u64::from(rest[2]);
        let (pkt, tail) = rest[3..].split_at(n);
        rest = tail;
        r.expire(now);
        if let Ok(Outcome::Complete { slot, len }) = r.insert(pkt, now) {
            r.finish(slot, &mut out[..len]);
        }
        assert!(r.held_bytes() <= 6000);
    }
}

#[cfg(test)]
#[path = "reasm_tests.rs"]
mod tests;

#[cfg(test)]
mod bits {
    use super::*;

    #[test]
    fn word_ranges_match_bit_by_bit() {
        let cases = [
            (0, 1),
            (0, 64),
            (3, 70),
            (63, 65),
            (64, 128),
            (100, 2048),
            (2047, 2048),
        ];
        for &(b0, b1) in &cases {
            let mut h = [0u64; BLOCKS / 64];
            set_range(&mut h, b0, b1);
            for b in 0..BLOCKS {
                assert_eq!(h[b / 64] & (1 << (b % 64)) != 0, (b0..b1).contains(&b));
            }
            for &(c0, c1) in &cases {
                let slow = (c0..c1).any(|b| (b0..b1).contains(&b));
                assert_eq!(any_in(&h, c0, c1), slow, "{b0}..{b1} vs {c0}..{c1}");
            }
            assert!(!any_in(&h, 5, 5));
        }
    }
}
