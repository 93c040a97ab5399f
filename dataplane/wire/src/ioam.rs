//! In situ OAM (IOAM) data fields (RFC 9197) and their IPv6 encapsulation (RFC 9486).
//!
//! An IOAM option travels as an IPv6 option TLV (RFC 9486 section 3), type
//! [`IOAM_HBH`](crate::ipv6option::option_type::IOAM_HBH) (0x31) in a Hop-by-Hop header or
//! [`IOAM_DEST`](crate::ipv6option::option_type::IOAM_DEST) (0x11) in a Destination Options
//! header. Its option data starts with Reserved (8 bits) and the IOAM Option-Type (8 bits,
//! [`option_type`]), followed by the *body*, the IOAM option proper:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |  Option Type  |  Opt Data Len |   Reserved    |   IOAM-OPT    |  RFC 9486 section 3
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |         Namespace-ID          |NodeLen  | Flags | RemainingLen|  RFC 9197 section 4.4
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |               IOAM-Trace-Type                 |  Reserved     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |            node data list (pre-allocated or incremental)      |
//! ```
//!
//! The IOAM option must be 4n-aligned in its extension header (RFC 9486 section 3; Linux
//! drops it otherwise): [`emit_hbh_with_trace`] puts a 2-byte PadN before it.
//!
//! * [`TraceOption`] / [`TraceRepr`]: the Pre-allocated and Incremental Trace Options
//!   (RFC 9197 section 4.4), with [`TraceOption::entries`] over the filled node data and
//!   [`TraceOption::fill_next`] for a transit node.
//! * [`NodeData`]: one node's data decoded per [`TraceType`] (section 4.4.2).
//! * [`E2eOption`] / [`E2eRepr`]: the Edge-to-Edge Option (section 4.6).
//!
//! The Proof of Transit option (section 4.5) is recognised by its type only.

use crate::ipv6ext::OptionsHeader;
use crate::ipv6option::{self, option_type as ipv6_option_type, MAX_DATA_LEN};
use crate::{be16, be32, put16, put32, Error, Result};
use core::iter::FusedIterator;
use core::ops::Range;

/// IOAM Option-Type values (RFC 9197 section 7.1, "IOAM Option-Type" registry).
pub mod option_type {
    /// Pre-allocated Trace Option (RFC 9197 section 4.4).
    pub const PRE_ALLOCATED_TRACE: u8 = 0;
    /// Incremental Trace Option (RFC 9197 section 4.4).
    pub const INCREMENTAL_TRACE: u8 = 1;
    /// Proof of Transit Option (RFC 9197 section 4.5).
    pub const POT: u8 = 2;
    /// Edge-to-Edge Option (RFC 9197 section 4.6).
    pub const E2E: u8 = 3;
}

/// Bytes before the IOAM body in the IPv6 option: Option Type, Opt Data Len, Reserved,
/// IOAM Option-Type (RFC 9486 section 3).
pub const IPV6_OPTION_HEADER_LEN: usize = 4;

/// Longest IOAM body one IPv6 option can carry (Opt Data Len 255 minus Reserved and
/// IOAM Option-Type).
pub const MAX_BODY_LEN: usize = MAX_DATA_LEN - 2;

/// Length of the trace option header before the node data list (RFC 9197 section 4.4).
pub const TRACE_HEADER_LEN: usize = 8;

/// Length of the E2E option header before its data (RFC 9197 section 4.6).
pub const E2E_HEADER_LEN: usize = 4;

// ---------------------------------------------------------------------------------------
// RFC 9486 encapsulation

mod field {
    use core::ops::{Range, RangeFrom};
    // IPv6 option data (RFC 9486 section 3).
    pub const RESERVED: usize = 0;
    pub const OPT_TYPE: usize = 1;
    pub const BODY: RangeFrom<usize> = 2..;
    // Trace option (RFC 9197 section 4.4).
    pub const NAMESPACE: Range<usize> = 0..2;
    pub const LENS_FLAGS: Range<usize> = 2..4;
    pub const TRACE_TYPE: Range<usize> = 4..7;
    pub const TRACE_RESERVED: usize = 7;
    pub const NODE_DATA: RangeFrom<usize> = 8..;
    // E2E option (RFC 9197 section 4.6).
    pub const E2E_TYPE: Range<usize> = 2..4;
    pub const E2E_DATA: RangeFrom<usize> = 4..;
}

/// A view of an IOAM IPv6 option's data (the bytes after Option Type and Opt Data Len):
/// Reserved, IOAM Option-Type, body (RFC 9486 section 3).
#[derive(Debug, Clone)]
pub struct IoamOption<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IoamOption<T> {
    pub const fn new_unchecked(buffer: T) -> IoamOption<T> {
        IoamOption { buffer }
    }

    /// Wrap `buffer`, exactly the option data; at least 2 bytes.
    pub fn new_checked(buffer: T) -> Result<IoamOption<T>> {
        let o = Self::new_unchecked(buffer);
        o.check_len()?;
        Ok(o)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < field::BODY.start {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Reserved octet: zero when sent, ignored when received.
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED]
    }

    /// IOAM Option-Type ([`option_type`]).
    pub fn ioam_type(&self) -> u8 {
        self.buffer.as_ref()[field::OPT_TYPE]
    }

    /// The IOAM option proper (trace, POT or E2E).
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[field::BODY]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IoamOption<T> {
    pub fn set_reserved(&mut self, v: u8) {
        self.buffer.as_mut()[field::RESERVED] = v;
    }

    pub fn set_ioam_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::OPT_TYPE] = v;
    }

    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::BODY]
    }
}

/// Write the 4 bytes that precede an IOAM body of `body_len` bytes in an IPv6 options area:
/// `ipv6_option_type` (0x31 or 0x11), Opt Data Len, Reserved = 0, `ioam_type`. Returns 4.
/// A body over [`MAX_BODY_LEN`] is `Malformed`.
pub fn emit_option_header(
    ipv6_option_type: u8,
    ioam_type: u8,
    body_len: usize,
    buf: &mut [u8],
) -> Result<usize> {
    if body_len > MAX_BODY_LEN {
        return Err(Error::Malformed);
    }
    let b = buf
        .get_mut(..IPV6_OPTION_HEADER_LEN)
        .ok_or(Error::BufferTooSmall)?;
    b[0] = ipv6_option_type;
    b[1] = (2 + body_len) as u8;
    b[2] = 0;
    b[3] = ioam_type;
    Ok(IPV6_OPTION_HEADER_LEN)
}

/// An IOAM option found in an options header by [`find_in_header`]. Offsets are from the
/// start of the extension header (Next Header octet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Offset of the IPv6 Option Type octet.
    pub offset: usize,
    /// The IPv6 option type (0x31 or 0x11).
    pub ipv6_option_type: u8,
    /// IOAM Option-Type ([`option_type`]).
    pub ioam_type: u8,
    /// Where the body (after Reserved and IOAM Option-Type) lies.
    pub body: Range<usize>,
}

impl Found {
    /// Whether the option is 4n-aligned within the header, as RFC 9486 section 3 requires.
    pub const fn is_aligned(&self) -> bool {
        self.offset.is_multiple_of(4)
    }
}

/// Find the first IOAM option (IPv6 option type `ipv6_option_type`, 0x31 or 0x11) in the
/// Hop-by-Hop or Destination Options header at the start of `header`. `Ok(None)` when there
/// is none; `Truncated` for a bad header or options area, `Malformed` for an IOAM option
/// shorter than its Reserved and Option-Type octets.
pub fn find_in_header(header: &[u8], ipv6_option_type: u8) -> Result<Option<Found>> {
    let h = OptionsHeader::new_checked(header)?;
    for opt in h.iter_options() {
        let opt = opt?;
        if opt.option_type() != ipv6_option_type {
            continue;
        }
        let data = opt.data();
        if data.len() < field::BODY.start {
            return Err(Error::Malformed);
        }
        // The options area starts 2 bytes into the header.
        let start = 2 + opt.data_offset();
        return Ok(Some(Found {
            offset: 2 + opt.offset,
            ipv6_option_type,
            ioam_type: data[field::OPT_TYPE],
            body: start + field::BODY.start..start + data.len(),
        }));
    }
    Ok(None)
}

/// Length of the Hop-by-Hop header [`emit_hbh_with_trace`] writes for `repr`.
pub const fn hbh_with_trace_len(repr: &TraceRepr) -> usize {
    hbh_with_ioam_len(repr.buffer_len())
}

/// Length of a Hop-by-Hop header holding PadN(0) and one IOAM option with a body of
/// `body_len` bytes, padded to a multiple of 8.
pub const fn hbh_with_ioam_len(body_len: usize) -> usize {
    (2 + 2 + IPV6_OPTION_HEADER_LEN + body_len).div_ceil(8) * 8
}

/// Write an options header (`ipv6_option_type` 0x31 for Hop-by-Hop, 0x11 for Destination
/// Options) holding a 2-byte PadN, so that the IOAM option that follows is 4n-aligned
/// (RFC 9486 section 3), and the IOAM option's first 4 bytes; then end padding to a
/// multiple of 8. The body itself (`body_len` bytes) is zero-filled and its range returned
/// for the caller to write; also returns the header length.
pub fn emit_header_with_ioam(
    next_header: u8,
    ipv6_option_type: u8,
    ioam_type: u8,
    body_len: usize,
    buf: &mut [u8],
) -> Result<(usize, Range<usize>)> {
    if body_len > MAX_BODY_LEN {
        return Err(Error::Malformed);
    }
    let len = hbh_with_ioam_len(body_len);
    let b = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
    b[0] = next_header;
    b[1] = (len / 8 - 1) as u8;
    let mut pos = 2;
    pos += ipv6option::emit_padn(&mut b[pos..], 0)?;
    pos += emit_option_header(ipv6_option_type, ioam_type, body_len, &mut b[pos..])?;
    let body = pos..pos + body_len;
    b[body.clone()].fill(0);
    ipv6option::emit_pad(&mut b[body.end..], len - body.end)?;
    Ok((len, body))
}

/// Write a Hop-by-Hop header carrying a Pre-allocated Trace Option built from `repr`
/// (header fields as given, node data all zero), preceded by a PadN so the IOAM option is
/// 4n-aligned. Returns the header length ([`hbh_with_trace_len`]).
pub fn emit_hbh_with_trace(next_header: u8, repr: &TraceRepr, buf: &mut [u8]) -> Result<usize> {
    let (len, body) = emit_header_with_ioam(
        next_header,
        ipv6_option_type::IOAM_HBH,
        option_type::PRE_ALLOCATED_TRACE,
        repr.buffer_len(),
        buf,
    )?;
    repr.emit(&mut buf[body])?;
    Ok(len)
}

// ---------------------------------------------------------------------------------------
// Trace type

/// IOAM-Trace-Type (RFC 9197 section 4.4.1): 24 bits, bit 0 the most significant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TraceType(pub u32);

impl TraceType {
    /// Mask of bit `n` (0 = most significant of the 24).
    pub const fn bit(n: u32) -> u32 {
        if n < 24 {
            1 << (23 - n)
        } else {
            0
        }
    }
    /// Bit 0: Hop_Lim and node_id, short format (4 octets).
    pub const HOP_LIM_NODE_ID: u32 = Self::bit(0);
    /// Bit 1: ingress_if_id and egress_if_id, short format (4 octets).
    pub const IF_IDS: u32 = Self::bit(1);
    /// Bit 2: timestamp seconds (4 octets).
    pub const TIMESTAMP_SECS: u32 = Self::bit(2);
    /// Bit 3: timestamp fraction (4 octets).
    pub const TIMESTAMP_FRAC: u32 = Self::bit(3);
    /// Bit 4: transit delay (4 octets).
    pub const TRANSIT_DELAY: u32 = Self::bit(4);
    /// Bit 5: IOAM-Namespace-specific data, short format (4 octets).
    pub const NAMESPACE_DATA: u32 = Self::bit(5);
    /// Bit 6: queue depth (4 octets).
    pub const QUEUE_DEPTH: u32 = Self::bit(6);
    /// Bit 7: checksum complement (4 octets).
    pub const CHECKSUM_COMPLEMENT: u32 = Self::bit(7);
    /// Bit 8: Hop_Lim and node_id, wide format (8 octets).
    pub const HOP_LIM_NODE_ID_WIDE: u32 = Self::bit(8);
    /// Bit 9: ingress_if_id and egress_if_id, wide format (8 octets).
    pub const IF_IDS_WIDE: u32 = Self::bit(9);
    /// Bit 10: IOAM-Namespace-specific data, wide format (8 octets).
    pub const NAMESPACE_DATA_WIDE: u32 = Self::bit(10);
    /// Bit 11: buffer occupancy (4 octets).
    pub const BUFFER_OCCUPANCY: u32 = Self::bit(11);
    /// Bits 12-21: undefined; a transit node fills 4 octets of all-ones for each
    /// (RFC 9197 section 4.4.1).
    pub const UNDEFINED: u32 = 0x00_0ffc;
    /// Bit 22: Opaque State Snapshot (variable length, not counted in NodeLen).
    pub const OPAQUE_STATE_SNAPSHOT: u32 = Self::bit(22);
    /// Bit 23: reserved, must be zero.
    pub const RESERVED: u32 = Self::bit(23);
    const SHORT: u32 = 0xff_1000;
    const WIDE: u32 = 0x00_e000;

    /// Whether every bit of `mask` is set.
    pub const fn has(self, mask: u32) -> bool {
        self.0 & mask == mask && mask != 0
    }

    /// NodeLen for this trace type in 4-octet units: 1 per short field, 2 per wide field, 1
    /// per undefined bit; the opaque state snapshot is not counted (RFC 9197 section 4.4).
    /// (Linux does not count undefined bits, and drops such packets as inconsistent.)
    pub const fn node_len(self) -> u8 {
        ((self.0 & Self::SHORT).count_ones()
            + 2 * (self.0 & Self::WIDE).count_ones()
            + (self.0 & Self::UNDEFINED).count_ones()) as u8
    }

    /// Whether any of bits 12-21 is set.
    pub const fn has_undefined(self) -> bool {
        self.0 & Self::UNDEFINED != 0
    }
}

// ---------------------------------------------------------------------------------------
// Node data

/// All-ones values a node writes into a field it cannot fill (RFC 9197 section 4.4.2).
pub mod unavailable {
    pub const U8: u8 = 0xff;
    pub const U16: u16 = 0xffff;
    /// 24-bit node_id and schema ID.
    pub const U24: u32 = 0x00ff_ffff;
    pub const U32: u32 = 0xffff_ffff;
    /// 56-bit wide node_id.
    pub const U56: u64 = 0x00ff_ffff_ffff_ffff;
    pub const U64: u64 = u64::MAX;
}

/// Opaque State Snapshot (RFC 9197 section 4.4.2.12): Length (8, in 4-octet units of
/// data) | Schema ID (24) | data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpaqueSnapshot<'a> {
    pub schema_id: u32,
    /// A multiple of 4 bytes, at most 1020.
    pub data: &'a [u8],
}

/// One node's data, decoded per a [`TraceType`] (RFC 9197 section 4.4.2). A field is `Some`
/// exactly when its trace-type bit is set; the value is as found, so a field the node could
/// not fill is `Some(all-ones)` (see [`unavailable`], [`NodeData::available`]). When
/// emitting, a `None` field whose bit is set is written as all-ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeData<'a> {
    /// Bit 0: Hop_Lim (8 bits).
    pub hop_limit: Option<u8>,
    /// Bit 0: node_id (24 bits).
    pub node_id: Option<u32>,
    /// Bit 1: ingress_if_id (16 bits).
    pub ingress_if_id: Option<u16>,
    /// Bit 1: egress_if_id (16 bits).
    pub egress_if_id: Option<u16>,
    /// Bit 2: timestamp seconds.
    pub timestamp_secs: Option<u32>,
    /// Bit 3: timestamp fraction (subseconds; the unit depends on the timestamp format).
    pub timestamp_frac: Option<u32>,
    /// Bit 4: transit delay in nanoseconds (top bit: overflow).
    pub transit_delay: Option<u32>,
    /// Bit 5: namespace-specific data, short.
    pub namespace_data: Option<u32>,
    /// Bit 6: queue depth.
    pub queue_depth: Option<u32>,
    /// Bit 7: checksum complement.
    pub checksum_complement: Option<u32>,
    /// Bit 8: Hop_Lim (8 bits) of the wide format.
    pub hop_limit_wide: Option<u8>,
    /// Bit 8: node_id (56 bits), wide.
    pub node_id_wide: Option<u64>,
    /// Bit 9: ingress_if_id (32 bits), wide.
    pub ingress_if_id_wide: Option<u32>,
    /// Bit 9: egress_if_id (32 bits), wide.
    pub egress_if_id_wide: Option<u32>,
    /// Bit 10: namespace-specific data, wide.
    pub namespace_data_wide: Option<u64>,
    /// Bit 11: buffer occupancy.
    pub buffer_occupancy: Option<u32>,
    /// Bit 22: opaque state snapshot. When emitting, `None` is written as Length 0 and
    /// Schema ID all-ones.
    pub opaque: Option<OpaqueSnapshot<'a>>,
}

fn be64(b: &[u8]) -> u64 {
    ((be32(b) as u64) << 32) | be32(&b[4..]) as u64
}

fn put64(b: &mut [u8], v: u64) {
    put32(b, (v >> 32) as u32);
    put32(&mut b[4..], v as u32);
}

/// Keep `v` when it is not all-ones.
fn avail<V: PartialEq>(v: Option<V>, ones: V) -> Option<V> {
    v.filter(|v| *v != ones)
}

impl<'a> NodeData<'a> {
    /// Bytes this entry takes for `tt`: NodeLen * 4, plus the opaque snapshot if bit 22.
    pub fn entry_len(&self, tt: TraceType) -> usize {
        let mut n = tt.node_len() as usize * 4;
        if tt.has(TraceType::OPAQUE_STATE_SNAPSHOT) {
            n += 4 + self.opaque.map_or(0, |o| o.data.len());
        }
        n
    }

    /// Decode one entry at the start of `b` for trace type `tt`; returns the data and the
    /// entry's length. Bytes past the entry are ignored. `Truncated` if `b` is too short.
    pub fn parse(b: &'a [u8], tt: TraceType) -> Result<(NodeData<'a>, usize)> {
        let fixed = tt.node_len() as usize * 4;
        if b.len() < fixed {
            return Err(Error::Truncated);
        }
        let mut d = NodeData::default();
        let mut p = 0;
        let short = |p: &mut usize| {
            let v = be32(&b[*p..]);
            *p += 4;
            v
        };
        if tt.has(TraceType::HOP_LIM_NODE_ID) {
            let v = short(&mut p);
            d.hop_limit = Some((v >> 24) as u8);
            d.node_id = Some(v & unavailable::U24);
        }
        if tt.has(TraceType::IF_IDS) {
            let v = short(&mut p);
            d.ingress_if_id = Some((v >> 16) as u16);
            d.egress_if_id = Some(v as u16);
        }
        let singles: [(u32, &mut Option<u32>); 6] = [
            (TraceType::TIMESTAMP_SECS, &mut d.timestamp_secs),
            (TraceType::TIMESTAMP_FRAC, &mut d.timestamp_frac),
            (TraceType::TRANSIT_DELAY, &mut d.transit_delay),
            (TraceType::NAMESPACE_DATA, &mut d.namespace_data),
            (TraceType::QUEUE_DEPTH, &mut d.queue_depth),
            (TraceType::CHECKSUM_COMPLEMENT, &mut d.checksum_complement),
        ];
        for (mask, slot) in singles {
            if tt.has(mask) {
                *slot = Some(short(&mut p));
            }
        }
        if tt.has(TraceType::HOP_LIM_NODE_ID_WIDE) {
            let v = be64(&b[p..]);
            p += 8;
            d.hop_limit_wide = Some((v >> 56) as u8);
            d.node_id_wide = Some(v & unavailable::U56);
        }
        if tt.has(TraceType::IF_IDS_WIDE) {
            d.ingress_if_id_wide = Some(be32(&b[p..]));
            d.egress_if_id_wide = Some(be32(&b[p + 4..]));
            p += 8;
        }
        if tt.has(TraceType::NAMESPACE_DATA_WIDE) {
            d.namespace_data_wide = Some(be64(&b[p..]));
            p += 8;
        }
        if tt.has(TraceType::BUFFER_OCCUPANCY) {
            d.buffer_occupancy = Some(short(&mut p));
        }
        // Undefined bits: skipped (their content is all-ones by RFC 9197).
        p = fixed;
        if tt.has(TraceType::OPAQUE_STATE_SNAPSHOT) {
            let h = b.get(p..p + 4).ok_or(Error::Truncated)?;
            let len = h[0] as usize * 4;
            let schema_id = be32(h) & unavailable::U24;
            let data = b.get(p + 4..p + 4 + len).ok_or(Error::Truncated)?;
            d.opaque = Some(OpaqueSnapshot { schema_id, data });
            p += 4 + len;
        }
        Ok((d, p))
    }

    /// Write this entry for trace type `tt` at the start of `buf`; returns its length
    /// ([`NodeData::entry_len`]). Values wider than their field (node_id over 24 bits,
    /// wide node_id over 56, schema ID over 24, opaque data not a multiple of 4 or over
    /// 1020 bytes) are `Malformed`; nothing is written then.
    pub fn emit(&self, tt: TraceType, buf: &mut [u8]) -> Result<usize> {
        self.check()?;
        let len = self.entry_len(tt);
        let b = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        let mut p = 0;
        let short = |b: &mut [u8], p: &mut usize, v: u32| {
            put32(&mut b[*p..], v);
            *p += 4;
        };
        if tt.has(TraceType::HOP_LIM_NODE_ID) {
            let v = (self.hop_limit.unwrap_or(unavailable::U8) as u32) << 24
                | self.node_id.unwrap_or(unavailable::U24);
            short(b, &mut p, v);
        }
        if tt.has(TraceType::IF_IDS) {
            let v = (self.ingress_if_id.unwrap_or(unavailable::U16) as u32) << 16
                | self.egress_if_id.unwrap_or(unavailable::U16) as u32;
            short(b, &mut p, v);
        }
        for (mask, v) in [
            (TraceType::TIMESTAMP_SECS, self.timestamp_secs),
            (TraceType::TIMESTAMP_FRAC, self.timestamp_frac),
            (TraceType::TRANSIT_DELAY, self.transit_delay),
            (TraceType::NAMESPACE_DATA, self.namespace_data),
            (TraceType::QUEUE_DEPTH, self.queue_depth),
            (TraceType::CHECKSUM_COMPLEMENT, self.checksum_complement),
        ] {
            if tt.has(mask) {
                short(b, &mut p, v.unwrap_or(unavailable::U32));
            }
        }
        if tt.has(TraceType::HOP_LIM_NODE_ID_WIDE) {
            let v = (self.hop_limit_wide.unwrap_or(unavailable::U8) as u64) << 56
                | self.node_id_wide.unwrap_or(unavailable::U56);
            put64(&mut b[p..], v);
            p += 8;
        }
        if tt.has(TraceType::IF_IDS_WIDE) {
            short(
                b,
                &mut p,
                self.ingress_if_id_wide.unwrap_or(unavailable::U32),
            );
            short(
                b,
                &mut p,
                self.egress_if_id_wide.unwrap_or(unavailable::U32),
            );
        }
        if tt.has(TraceType::NAMESPACE_DATA_WIDE) {
            put64(
                &mut b[p..],
                self.namespace_data_wide.unwrap_or(unavailable::U64),
            );
            p += 8;
        }
        if tt.has(TraceType::BUFFER_OCCUPANCY) {
            short(b, &mut p, self.buffer_occupancy.unwrap_or(unavailable::U32));
        }
        for _ in 0..(tt.0 & TraceType::UNDEFINED).count_ones() {
            short(b, &mut p, unavailable::U32);
        }
        if tt.has(TraceType::OPAQUE_STATE_SNAPSHOT) {
            let (schema_id, data) = match self.opaque {
                Some(o) => (o.schema_id, o.data),
                None => (unavailable::U24, &[][..]),
            };
            put32(&mut b[p..], ((data.len() / 4) as u32) << 24 | schema_id);
            b[p + 4..p + 4 + data.len()].copy_from_slice(data);
        }
        Ok(len)
    }

    fn check(&self) -> Result<()> {
        let bad = self.node_id.is_some_and(|v| v > unavailable::U24)
            || self.node_id_wide.is_some_and(|v| v > unavailable::U56)
            || self.opaque.is_some_and(|o| {
                o.schema_id > unavailable::U24
                    || !o.data.len().is_multiple_of(4)
                    || o.data.len() > 255 * 4
            });
        if bad {
            Err(Error::Malformed)
        } else {
            Ok(())
        }
    }

    /// The same data with every all-ones ("not filled", RFC 9197 section 4.4.2) field
    /// turned into `None`, and an opaque snapshot with Schema ID all-ones and no data too.
    pub fn available(&self) -> NodeData<'a> {
        use unavailable as u;
        NodeData {
            hop_limit: avail(self.hop_limit, u::U8),
            node_id: avail(self.node_id, u::U24),
            ingress_if_id: avail(self.ingress_if_id, u::U16),
            egress_if_id: avail(self.egress_if_id, u::U16),
            timestamp_secs: avail(self.timestamp_secs, u::U32),
            timestamp_frac: avail(self.timestamp_frac, u::U32),
            transit_delay: avail(self.transit_delay, u::U32),
            namespace_data: avail(self.namespace_data, u::U32),
            queue_depth: avail(self.queue_depth, u::U32),
            checksum_complement: avail(self.checksum_complement, u::U32),
            hop_limit_wide: avail(self.hop_limit_wide, u::U8),
            node_id_wide: avail(self.node_id_wide, u::U56),
            ingress_if_id_wide: avail(self.ingress_if_id_wide, u::U32),
            egress_if_id_wide: avail(self.egress_if_id_wide, u::U32),
            namespace_data_wide: avail(self.namespace_data_wide, u::U64),
            buffer_occupancy: avail(self.buffer_occupancy, u::U32),
            opaque: self
                .opaque
                .filter(|o| !(o.schema_id == u::U24 && o.data.is_empty())),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Trace option

/// Trace option flags (RFC 9197 section 4.4; 4 bits, most significant first).
pub mod flags {
    /// Overflow: a node could not add its data for lack of space.
    pub const OVERFLOW: u8 = 0b1000;
    /// Loopback (RFC 9322).
    pub const LOOPBACK: u8 = 0b0100;
    /// Active (RFC 9322).
    pub const ACTIVE: u8 = 0b0010;
}

/// A read/write view of a Pre-allocated or Incremental Trace Option body (RFC 9197 section
/// 4.4): the buffer is exactly the option body, the bytes after the RFC 9486 Reserved and
/// IOAM Option-Type octets, so its length after the 8-byte header is the node data list.
#[derive(Debug, Clone)]
pub struct TraceOption<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TraceOption<T> {
    pub const fn new_unchecked(buffer: T) -> TraceOption<T> {
        TraceOption { buffer }
    }

    /// Wrap and check that the 8-byte header fits. RemainingLen is not checked against the
    /// buffer (it means different things in the two trace options); see
    /// [`TraceOption::entries`] and [`TraceOption::fill_next`].
    pub fn new_checked(buffer: T) -> Result<TraceOption<T>> {
        let t = Self::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < TRACE_HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn lens_flags(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::LENS_FLAGS])
    }

    /// Namespace-ID (16 bits).
    pub fn namespace_id(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::NAMESPACE])
    }

    /// NodeLen (5 bits): one node's data in 4-octet units, without the opaque snapshot.
    pub fn node_len(&self) -> u8 {
        (self.lens_flags() >> 11) as u8
    }

    /// Flags (4 bits; [`flags`]).
    pub fn flags(&self) -> u8 {
        ((self.lens_flags() >> 7) & 0xf) as u8
    }

    pub fn overflow(&self) -> bool {
        self.flags() & flags::OVERFLOW != 0
    }

    pub fn loopback(&self) -> bool {
        self.flags() & flags::LOOPBACK != 0
    }

    pub fn active(&self) -> bool {
        self.flags() & flags::ACTIVE != 0
    }

    /// RemainingLen (7 bits): free space in 4-octet units.
    pub fn remaining_len(&self) -> u8 {
        (self.lens_flags() & 0x7f) as u8
    }

    /// IOAM-Trace-Type (24 bits).
    pub fn trace_type(&self) -> TraceType {
        let b = &self.buffer.as_ref()[field::TRACE_TYPE];
        TraceType(u32::from_be_bytes([0, b[0], b[1], b[2]]))
    }

    /// The Reserved octet after the trace type.
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::TRACE_RESERVED]
    }

    /// Node data list: everything after the header.
    pub fn node_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::NODE_DATA]
    }

    /// NodeLen as the trace type says it should be ([`TraceType::node_len`]).
    pub fn node_len_from_type(&self) -> u8 {
        self.trace_type().node_len()
    }

    /// Bytes one entry takes without an opaque snapshot (`node_len() * 4`).
    pub fn node_data_len(&self) -> usize {
        self.node_len() as usize * 4
    }

    /// Pre-allocated trace: the free space at the start of the node data list
    /// (`RemainingLen * 4` bytes). `Malformed` if RemainingLen points past the buffer.
    pub fn free_space(&self) -> Result<&[u8]> {
        let n = self.remaining_len() as usize * 4;
        self.node_data().get(..n).ok_or(Error::Malformed)
    }

    /// Pre-allocated trace: the filled node entries, most recent hop first (they follow the
    /// `RemainingLen * 4` free bytes; RFC 9197 section 4.4). Yields `Malformed` once if
    /// RemainingLen points past the buffer or NodeLen disagrees with the trace type.
    pub fn entries(&self) -> Entries<'_> {
        let data = self.node_data();
        let start = self.remaining_len() as usize * 4;
        match data.get(start..) {
            Some(filled) => self.entries_over(filled),
            None => Entries::failed(),
        }
    }

    /// Incremental trace: every entry in the node data list, most recent hop first.
    pub fn entries_incremental(&self) -> Entries<'_> {
        self.entries_over(self.node_data())
    }

    fn entries_over<'a>(&self, data: &'a [u8]) -> Entries<'a> {
        let tt = self.trace_type();
        let usable = self.node_len() == tt.node_len()
            && (tt.node_len() > 0 || tt.has(TraceType::OPAQUE_STATE_SNAPSHOT));
        if !usable {
            return Entries::failed();
        }
        Entries {
            data,
            pos: 0,
            tt,
            error: false,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TraceOption<T> {
    fn set_lens_flags(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::LENS_FLAGS], v);
    }

    pub fn set_namespace_id(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::NAMESPACE], v);
    }

    /// Set NodeLen (low 5 bits of `v`).
    pub fn set_node_len(&mut self, v: u8) {
        let lf = self.lens_flags() & 0x07ff | ((v as u16 & 0x1f) << 11);
        self.set_lens_flags(lf);
    }

    /// Set the 4 flag bits (low 4 bits of `v`).
    pub fn set_flags(&mut self, v: u8) {
        let lf = self.lens_flags() & !(0xf << 7) | ((v as u16 & 0xf) << 7);
        self.set_lens_flags(lf);
    }

    pub fn set_overflow(&mut self, on: bool) {
        let f = self.flags();
        self.set_flags(if on {
            f | flags::OVERFLOW
        } else {
            f & !flags::OVERFLOW
        });
    }

    /// Set RemainingLen (low 7 bits of `v`).
    pub fn set_remaining_len(&mut self, v: u8) {
        let lf = self.lens_flags() & !0x7f | (v as u16 & 0x7f);
        self.set_lens_flags(lf);
    }

    /// Set the trace type (low 24 bits).
    pub fn set_trace_type(&mut self, v: TraceType) {
        let b = v.0.to_be_bytes();
        self.buffer.as_mut()[field::TRACE_TYPE].copy_from_slice(&b[1..]);
    }

    pub fn set_reserved(&mut self, v: u8) {
        self.buffer.as_mut()[field::TRACE_RESERVED] = v;
    }

    pub fn node_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::NODE_DATA]
    }

    /// Pre-allocated trace, transit node: write `node` into the last free entry (just before
    /// the filled ones) and decrease RemainingLen by the entry length (RFC 9197 section
    /// 4.4). Without room, sets the Overflow flag and returns `BufferTooSmall`. NodeLen not
    /// matching the trace type, or RemainingLen pointing past the buffer, is `Malformed`
    /// (and so is a field value wider than its field); nothing is written in those cases.
    pub fn fill_next(&mut self, node: &NodeData<'_>) -> Result<()> {
        let tt = self.trace_type();
        if self.node_len() != tt.node_len()
            || (tt.node_len() == 0 && !tt.has(TraceType::OPAQUE_STATE_SNAPSHOT))
        {
            return Err(Error::Malformed);
        }
        node.check()?;
        let rem = self.remaining_len() as usize * 4;
        if rem > self.node_data().len() {
            return Err(Error::Malformed);
        }
        let len = node.entry_len(tt);
        if len > rem {
            self.set_overflow(true);
            return Err(Error::BufferTooSmall);
        }
        node.emit(tt, &mut self.node_data_mut()[rem - len..rem])?;
        self.set_remaining_len(((rem - len) / 4) as u8);
        Ok(())
    }
}

/// Iterator over trace entries, from [`TraceOption::entries`]. Yields `Err` at most once,
/// then ends.
#[derive(Debug, Clone)]
pub struct Entries<'a> {
    data: &'a [u8],
    pos: usize,
    tt: TraceType,
    error: bool,
}

impl<'a> Entries<'a> {
    fn failed() -> Entries<'a> {
        Entries {
            data: &[],
            pos: 0,
            tt: TraceType(0),
            error: true,
        }
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<NodeData<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.error {
            self.error = false;
            self.pos = self.data.len();
            return Some(Err(Error::Malformed));
        }
        let rest = self.data.get(self.pos..).filter(|r| !r.is_empty())?;
        match NodeData::parse(rest, self.tt) {
            Ok((d, n)) if n > 0 => {
                self.pos += n;
                Some(Ok(d))
            }
            Ok(_) | Err(_) => {
                self.pos = self.data.len();
                Some(Err(Error::Truncated))
            }
        }
    }
}

impl FusedIterator for Entries<'_> {}

/// High-level representation of a trace option header, plus the length of its node data
/// list (which [`TraceRepr::emit`] zero-fills).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRepr {
    pub namespace_id: u16,
    /// 5 bits.
    pub node_len: u8,
    /// 4 bits ([`flags`]).
    pub flags: u8,
    /// 7 bits.
    pub remaining_len: u8,
    pub trace_type: TraceType,
    /// Bytes of node data after the header.
    pub data_len: usize,
}

impl TraceRepr {
    /// A Pre-allocated Trace with room for `entries` nodes: NodeLen from the trace type,
    /// RemainingLen = `entries * NodeLen`, node data all zero. A trace type with bit 22
    /// (variable-length opaque snapshot) is `Unsupported`; an empty one, reserved bit 23,
    /// or more space than RemainingLen (127 units) or one IPv6 option can hold, `Malformed`.
    pub fn pre_allocated(namespace_id: u16, trace_type: TraceType, entries: usize) -> Result<Self> {
        if trace_type.has(TraceType::OPAQUE_STATE_SNAPSHOT) {
            return Err(Error::Unsupported);
        }
        let r = Self::incremental(namespace_id, trace_type, entries)?;
        let data_len = r.remaining_len as usize * 4;
        if TRACE_HEADER_LEN + data_len > MAX_BODY_LEN {
            return Err(Error::Malformed);
        }
        Ok(TraceRepr { data_len, ..r })
    }

    /// An Incremental Trace announcing room for `entries` nodes (RemainingLen), with no
    /// node data yet.
    pub fn incremental(namespace_id: u16, trace_type: TraceType, entries: usize) -> Result<Self> {
        let node_len = trace_type.node_len();
        if node_len == 0 || trace_type.0 > 0xff_ffff || trace_type.has(TraceType::RESERVED) {
            return Err(Error::Malformed);
        }
        let units = entries
            .checked_mul(node_len as usize)
            .filter(|&u| u <= 0x7f)
            .ok_or(Error::Malformed)?;
        Ok(TraceRepr {
            namespace_id,
            node_len,
            flags: 0,
            remaining_len: units as u8,
            trace_type,
            data_len: 0,
        })
    }

    pub fn parse<T: AsRef<[u8]> + ?Sized>(t: &TraceOption<&T>) -> Result<Self> {
        t.check_len()?;
        Ok(TraceRepr {
            namespace_id: t.namespace_id(),
            node_len: t.node_len(),
            flags: t.flags(),
            remaining_len: t.remaining_len(),
            trace_type: t.trace_type(),
            data_len: t.node_data().len(),
        })
    }

    /// Header plus node data.
    pub const fn buffer_len(&self) -> usize {
        TRACE_HEADER_LEN + self.data_len
    }

    /// Write the header (Reserved = 0) and `data_len` zero bytes of node data at the start
    /// of `buf`. Field values wider than their field are `Malformed`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if self.node_len > 0x1f
            || self.flags > 0xf
            || self.remaining_len > 0x7f
            || self.trace_type.0 > 0xff_ffff
        {
            return Err(Error::Malformed);
        }
        let b = buf
            .get_mut(..self.buffer_len())
            .ok_or(Error::BufferTooSmall)?;
        let mut t = TraceOption::new_unchecked(b);
        t.set_namespace_id(self.namespace_id);
        t.set_lens_flags(
            (self.node_len as u16) << 11 | (self.flags as u16) << 7 | self.remaining_len as u16,
        );
        t.set_trace_type(self.trace_type);
        t.set_reserved(0);
        t.node_data_mut().fill(0);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Edge-to-Edge option

/// IOAM-E2E-Type bits (RFC 9197 section 4.6; bit 0 the most significant of 16).
pub mod e2e_type {
    /// Bit 0: 64-bit sequence number.
    pub const SEQ_NUM_64: u16 = 1 << 15;
    /// Bit 1: 32-bit sequence number.
    pub const SEQ_NUM_32: u16 = 1 << 14;
    /// Bit 2: timestamp seconds.
    pub const TIMESTAMP_SECS: u16 = 1 << 13;
    /// Bit 3: timestamp fraction.
    pub const TIMESTAMP_FRAC: u16 = 1 << 12;
    /// Bits 4-15: undefined.
    pub const UNDEFINED: u16 = 0x0fff;
}

/// A read/write view of an Edge-to-Edge Option body (RFC 9197 section 4.6):
/// Namespace-ID (16) | IOAM-E2E-Type (16) | data. The buffer is exactly the body.
#[derive(Debug, Clone)]
pub struct E2eOption<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> E2eOption<T> {
    pub const fn new_unchecked(buffer: T) -> E2eOption<T> {
        E2eOption { buffer }
    }

    /// Wrap and check that the 4-byte header fits.
    pub fn new_checked(buffer: T) -> Result<E2eOption<T>> {
        let o = Self::new_unchecked(buffer);
        o.check_len()?;
        Ok(o)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < E2E_HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn namespace_id(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::NAMESPACE])
    }

    /// IOAM-E2E-Type ([`e2e_type`]).
    pub fn e2e_type(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::E2E_TYPE])
    }

    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::E2E_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> E2eOption<T> {
    pub fn set_namespace_id(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::NAMESPACE], v);
    }

    pub fn set_e2e_type(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::E2E_TYPE], v);
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::E2E_DATA]
    }
}

/// High-level representation of an E2E option; the IOAM-E2E-Type is implied by which
/// fields are `Some`, data in bit order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct E2eRepr {
    pub namespace_id: u16,
    pub seq_num_64: Option<u64>,
    pub seq_num_32: Option<u32>,
    pub timestamp_secs: Option<u32>,
    pub timestamp_frac: Option<u32>,
}

impl E2eRepr {
    /// Parse; undefined type bits are `Unsupported` (their data length is unknown), data
    /// shorter than the type needs is `Truncated`. Trailing data is ignored.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(o: &E2eOption<&T>) -> Result<Self> {
        o.check_len()?;
        let ty = o.e2e_type();
        if ty & e2e_type::UNDEFINED != 0 {
            return Err(Error::Unsupported);
        }
        let d = o.data();
        if d.len() < Self::data_len_for(ty) {
            return Err(Error::Truncated);
        }
        let mut r = E2eRepr {
            namespace_id: o.namespace_id(),
            ..E2eRepr::default()
        };
        let mut p = 0;
        if ty & e2e_type::SEQ_NUM_64 != 0 {
            r.seq_num_64 = Some(be64(&d[p..]));
            p += 8;
        }
        for (bit, slot) in [
            (e2e_type::SEQ_NUM_32, &mut r.seq_num_32),
            (e2e_type::TIMESTAMP_SECS, &mut r.timestamp_secs),
            (e2e_type::TIMESTAMP_FRAC, &mut r.timestamp_frac),
        ] {
            if ty & bit != 0 {
                *slot = Some(be32(&d[p..]));
                p += 4;
            }
        }
        Ok(r)
    }

    const fn data_len_for(ty: u16) -> usize {
        let mut n = 0;
        if ty & e2e_type::SEQ_NUM_64 != 0 {
            n += 8;
        }
        n + 4
            * (ty & (e2e_type::SEQ_NUM_32 | e2e_type::TIMESTAMP_SECS | e2e_type::TIMESTAMP_FRAC))
                .count_ones() as usize
    }

    /// The IOAM-E2E-Type these fields imply.
    pub const fn e2e_type(&self) -> u16 {
        let mut t = 0;
        if self.seq_num_64.is_some() {
            t |= e2e_type::SEQ_NUM_64;
        }
        if self.seq_num_32.is_some() {
            t |= e2e_type::SEQ_NUM_32;
        }
        if self.timestamp_secs.is_some() {
            t |= e2e_type::TIMESTAMP_SECS;
        }
        if self.timestamp_frac.is_some() {
            t |= e2e_type::TIMESTAMP_FRAC;
        }
        t
    }

    pub const fn buffer_len(&self) -> usize {
        E2E_HEADER_LEN + Self::data_len_for(self.e2e_type())
    }

    /// Write the option body at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let b = buf
            .get_mut(..self.buffer_len())
            .ok_or(Error::BufferTooSmall)?;
        let mut o = E2eOption::new_unchecked(b);
        o.set_namespace_id(self.namespace_id);
        o.set_e2e_type(self.e2e_type());
        let d = o.data_mut();
        let mut p = 0;
        if let Some(v) = self.seq_num_64 {
            put64(&mut d[p..], v);
            p += 8;
        }
        for v in [self.seq_num_32, self.timestamp_secs, self.timestamp_frac]
            .into_iter()
            .flatten()
        {
            put32(&mut d[p..], v);
            p += 4;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Fuzzing

/// Fuzz entry: `data` as an IOAM option data, a trace body, a node entry, an E2E body and
/// an options header; parse, iterate, fill and round-trip. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    const MAX: usize = 1024;
    if let Ok(o) = IoamOption::new_checked(data) {
        let _ = (o.reserved(), o.ioam_type(), o.body().len());
    }
    if let Some(h) = find_in_header(data, ipv6_option_type::IOAM_HBH)
        .ok()
        .flatten()
    {
        assert!(h.body.end <= data.len() && h.offset < h.body.start);
        let _ = (h.is_aligned(), h.ioam_type);
    }
    if let Ok(t) = TraceOption::new_checked(data) {
        let _ = (
            t.namespace_id(),
            t.overflow(),
            t.loopback(),
            t.active(),
            t.reserved(),
            t.node_len_from_type(),
            t.node_data_len(),
            t.free_space().map(<[u8]>::len),
            t.trace_type().has_undefined(),
        );
        let mut errors = 0;
        for it in [t.entries(), t.entries_incremental()] {
            for e in it.take(MAX) {
                match e {
                    Ok(d) => {
                        let _ = d.available();
                    }
                    Err(_) => errors += 1,
                }
            }
        }
        assert!(errors <= 2);
        let r = TraceRepr::parse(&t).expect("checked trace parses");
        let mut out = [0u8; MAX];
        if r.buffer_len() <= MAX {
            r.emit(&mut out).expect("parsed repr re-emits");
            assert_eq!(&out[..4], &data[..4]);
            assert_eq!(&out[4..7], &data[4..7]);
            let back = TraceRepr::parse(&TraceOption::new_checked(&out[..r.buffer_len()]).unwrap());
            assert_eq!(back, Ok(r));
            // Fill the next entry with the first filled one (or nothing), then read it back.
            out[..data.len()].copy_from_slice(data);
            let node = t.entries().next().and_then(|e| e.ok()).unwrap_or_default();
            let mut w = TraceOption::new_unchecked(&mut out[..data.len()]);
            let before = w.remaining_len();
            match w.fill_next(&node) {
                Ok(()) => {
                    let used = node.entry_len(t.trace_type()) / 4;
                    assert_eq!(w.remaining_len() as usize + used, before as usize);
                    let first = w.entries().next().expect("an entry").expect("parses");
                    let mut a = [0u8; MAX];
                    let mut b = [0u8; MAX];
                    let na = first.emit(t.trace_type(), &mut a).expect("emits");
                    let nb = node.emit(t.trace_type(), &mut b).expect("emits");
                    assert_eq!(&a[..na], &b[..nb]);
                }
                Err(Error::BufferTooSmall) => assert!(w.overflow()),
                Err(_) => assert_eq!(w.remaining_len(), before),
            }
        }
    }
    if data.len() >= 3 {
        let tt = TraceType(u32::from_be_bytes([0, data[0], data[1], data[2]]));
        if let Ok((d, n)) = NodeData::parse(&data[3..], tt) {
            let mut out = [0u8; MAX];
            assert_eq!(n, d.entry_len(tt));
            if n <= MAX {
                assert_eq!(d.emit(tt, &mut out), Ok(n));
                let again = NodeData::parse(&out[..n], tt).expect("re-parses").0;
                assert_eq!(again, d);
                if !tt.has_undefined() {
                    assert_eq!(&out[..n], &data[3..3 + n]);
                }
            }
        }
    }
    if let Ok(o) = E2eOption::new_checked(data) {
        if let Ok(r) = E2eRepr::parse(&o) {
            let mut out = [0u8; 32];
            r.emit(&mut out).expect("fits");
            assert_eq!(&out[..r.buffer_len()], &data[..r.buffer_len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv6option::option_type::{IOAM_DEST, IOAM_HBH};
    use std::vec::Vec;

    const TT_0_3: TraceType = TraceType(
        TraceType::HOP_LIM_NODE_ID
            | TraceType::IF_IDS
            | TraceType::TIMESTAMP_SECS
            | TraceType::TIMESTAMP_FRAC,
    );

    /// A Hop-by-Hop header built by hand, field by field, from RFC 8200 / RFC 9486 section
    /// 3 / RFC 9197 section 4.4: next header UDP, PadN(0), IOAM 0x31 pre-allocated trace,
    /// namespace 123, NodeLen 4, flags O, RemainingLen 8 of 16, trace type bits 0-3, and
    /// two of four entries filled.
    #[rustfmt::skip]
    static HBH: [u8; 80] = [
        17, 9,                   // Next Header UDP, Hdr Ext Len 9 (80 bytes)
        0x01, 0x00,              // PadN, 0 data bytes: the IOAM option starts at 4
        0x31, 74,                // IOAM (HbH), Opt Data Len 74
        0x00, 0x00,              // Reserved, IOAM Option-Type 0 (pre-allocated trace)
        0x00, 0x7b,              // Namespace-ID 123
        0b0010_0100, 0b0000_1000,// NodeLen 4 (00100) | Flags 1000 (O) | RemainingLen 8
        0xf0, 0x00, 0x00,        // IOAM-Trace-Type: bits 0, 1, 2, 3
        0x00,                    // Reserved
        // 32 free bytes (RemainingLen 8 units).
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        // Entry of the most recent hop: Hop_Lim 62, node_id 0x0a0b0d; if 0x0102 / 0x0304;
        // seconds 0x11223345; fraction all-ones (not available).
        62, 0x0a, 0x0b, 0x0d, 0x01, 0x02, 0x03, 0x04,
        0x11, 0x22, 0x33, 0x45, 0xff, 0xff, 0xff, 0xff,
        // First hop: Hop_Lim 63, node_id 0x0a0b0c; if 0x0005 / 0x0006; 0x11223344 s,
        // fraction 0x55667788.
        63, 0x0a, 0x0b, 0x0c, 0x00, 0x05, 0x00, 0x06,
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
    ];

    fn hop(hl: u8, id: u32, i: u16, e: u16, s: u32, f: Option<u32>) -> NodeData<'static> {
        NodeData {
            hop_limit: Some(hl),
            node_id: Some(id),
            ingress_if_id: Some(i),
            egress_if_id: Some(e),
            timestamp_secs: Some(s),
            timestamp_frac: f,
            ..NodeData::default()
        }
    }

    #[test]
    fn trace_type_bits_and_node_len() {
        assert_eq!(TraceType::HOP_LIM_NODE_ID, 0x80_0000);
        assert_eq!(TraceType::TIMESTAMP_FRAC, 0x10_0000);
        assert_eq!(TraceType::CHECKSUM_COMPLEMENT, 0x01_0000);
        assert_eq!(TraceType::HOP_LIM_NODE_ID_WIDE, 0x00_8000);
        assert_eq!(TraceType::BUFFER_OCCUPANCY, 0x00_1000);
        assert_eq!(TraceType::OPAQUE_STATE_SNAPSHOT, 0x00_0002);
        assert_eq!(TraceType::RESERVED, 0x00_0001);
        assert_eq!(TraceType::bit(24), 0);
        assert_eq!(TT_0_3.node_len(), 4);
        // Each short field 1 unit, each wide field 2.
        for b in 0..8 {
            assert_eq!(TraceType(TraceType::bit(b)).node_len(), 1, "bit {b}");
        }
        for b in 8..11 {
            assert_eq!(TraceType(TraceType::bit(b)).node_len(), 2, "bit {b}");
        }
        assert_eq!(TraceType(TraceType::bit(11)).node_len(), 1);
        for b in 12..22 {
            assert_eq!(TraceType(TraceType::bit(b)).node_len(), 1, "bit {b}");
            assert!(TraceType(TraceType::bit(b)).has_undefined());
        }
        assert_eq!(TraceType(TraceType::OPAQUE_STATE_SNAPSHOT).node_len(), 0);
        // All defined fixed fields: 9 short + 3 wide.
        assert_eq!(TraceType(0xff_f000).node_len(), 15);
        assert!(!TraceType(0xff_f000).has_undefined());
        assert!(!TT_0_3.has(0));
    }

    #[test]
    fn parse_hand_built_header() {
        let f = find_in_header(&HBH, IOAM_HBH).unwrap().unwrap();
        assert_eq!(
            f,
            Found {
                offset: 4,
                ipv6_option_type: IOAM_HBH,
                ioam_type: option_type::PRE_ALLOCATED_TRACE,
                body: 8..80
            }
        );
        assert!(f.is_aligned());
        assert_eq!(find_in_header(&HBH, IOAM_DEST), Ok(None));
        let o = IoamOption::new_checked(&HBH[6..]).unwrap();
        assert_eq!((o.reserved(), o.ioam_type(), o.body().len()), (0, 0, 72));

        let t = TraceOption::new_checked(&HBH[f.body.clone()]).unwrap();
        assert_eq!(t.namespace_id(), 123);
        assert_eq!(t.node_len(), 4);
        assert_eq!(t.node_len_from_type(), 4);
        assert_eq!(t.node_data_len(), 16);
        assert_eq!(t.flags(), flags::OVERFLOW);
        assert!(t.overflow() && !t.loopback() && !t.active());
        assert_eq!(t.remaining_len(), 8);
        assert_eq!(t.trace_type(), TT_0_3);
        assert_eq!(t.reserved(), 0);
        assert_eq!(t.node_data().len(), 64);
        assert_eq!(t.free_space().unwrap().len(), 32);
        let e: Vec<_> = t.entries().collect::<Result<_>>().unwrap();
        assert_eq!(
            e,
            [
                hop(62, 0x0a0b0d, 0x0102, 0x0304, 0x11223345, Some(u32::MAX)),
                hop(63, 0x0a0b0c, 5, 6, 0x11223344, Some(0x55667788)),
            ]
        );
        assert_eq!(e[0].available().timestamp_frac, None);
        assert_eq!(e[0].available().hop_limit, Some(62));
        assert_eq!(e[1].available(), e[1]);
        // Incremental reading sees the 32 zero bytes as two entries too.
        assert_eq!(t.entries_incremental().count(), 4);

        let r = TraceRepr::parse(&t).unwrap();
        assert_eq!(
            r,
            TraceRepr {
                namespace_id: 123,
                node_len: 4,
                flags: flags::OVERFLOW,
                remaining_len: 8,
                trace_type: TT_0_3,
                data_len: 64
            }
        );
    }

    #[test]
    fn flag_and_length_bit_positions() {
        let mut t = TraceOption::new_unchecked([0u8; 8]);
        t.set_node_len(0x1f);
        assert_eq!(t.clone().into_inner()[2..4], [0xf8, 0x00]);
        t.set_flags(flags::OVERFLOW);
        assert_eq!(t.clone().into_inner()[2..4], [0xfc, 0x00]);
        t.set_flags(flags::LOOPBACK);
        assert_eq!(t.clone().into_inner()[2..4], [0xfa, 0x00]);
        t.set_flags(flags::ACTIVE);
        assert_eq!(t.clone().into_inner()[2..4], [0xf9, 0x00]);
        t.set_flags(0x1);
        assert_eq!(t.clone().into_inner()[2..4], [0xf8, 0x80]);
        t.set_remaining_len(0x7f);
        assert_eq!(t.clone().into_inner()[2..4], [0xf8, 0xff]);
        assert_eq!((t.node_len(), t.flags(), t.remaining_len()), (31, 1, 127));
        t.set_node_len(0);
        t.set_flags(0);
        assert_eq!(t.clone().into_inner()[2..4], [0x00, 0x7f]);
        t.set_overflow(true);
        assert!(t.overflow());
        t.set_overflow(false);
        t.set_remaining_len(0);
        t.set_trace_type(TraceType(0x12_3456));
        t.set_namespace_id(0xabcd);
        assert_eq!(t.into_inner(), [0xab, 0xcd, 0, 0, 0x12, 0x34, 0x56, 0]);
    }

    #[test]
    fn emit_and_fill_reproduce_hand_built_header() {
        let mut r = TraceRepr::pre_allocated(123, TT_0_3, 4).unwrap();
        assert_eq!((r.node_len, r.remaining_len, r.data_len), (4, 16, 64));
        r.flags = flags::OVERFLOW;
        assert_eq!(hbh_with_trace_len(&r), 80);
        let mut buf = [0xeeu8; 96];
        assert_eq!(emit_hbh_with_trace(17, &r, &mut buf), Ok(80));
        assert_eq!(buf[80], 0xee);
        let mut t = TraceOption::new_checked(&mut buf[8..80]).unwrap();
        assert_eq!(t.entries().count(), 0);
        t.fill_next(&hop(63, 0x0a0b0c, 5, 6, 0x11223344, Some(0x55667788)))
            .unwrap();
        assert_eq!(t.remaining_len(), 12);
        t.fill_next(&hop(62, 0x0a0b0d, 0x0102, 0x0304, 0x11223345, None))
            .unwrap();
        assert_eq!(t.remaining_len(), 8);
        assert_eq!(&buf[..80], &HBH[..]);

        // Two more fit; the fifth overflows, leaving everything but the O flag alone.
        let mut t = TraceOption::new_checked(&mut buf[8..80]).unwrap();
        t.set_flags(0);
        t.fill_next(&NodeData::default()).unwrap();
        t.fill_next(&NodeData::default()).unwrap();
        assert_eq!(t.remaining_len(), 0);
        assert!(!t.overflow());
        assert_eq!(&t.node_data()[..16], &[0xff; 16]);
        let before: Vec<u8> = t.node_data().to_vec();
        assert_eq!(
            t.fill_next(&NodeData::default()),
            Err(Error::BufferTooSmall)
        );
        assert!(t.overflow());
        assert_eq!(t.node_data(), &before[..]);
        assert_eq!(t.entries().count(), 4);
    }

    #[test]
    fn fill_rejects_inconsistent_headers() {
        let r = TraceRepr::pre_allocated(1, TT_0_3, 2).unwrap();
        let mut b = [0u8; 40];
        r.emit(&mut b).unwrap();
        let mut t = TraceOption::new_checked(&mut b[..]).unwrap();
        t.set_node_len(3);
        assert_eq!(t.fill_next(&NodeData::default()), Err(Error::Malformed));
        assert_eq!(t.entries().next(), Some(Err(Error::Malformed)));
        t.set_node_len(4);
        t.set_remaining_len(9); // 36 bytes, but there are 32
        assert_eq!(t.fill_next(&NodeData::default()), Err(Error::Malformed));
        assert_eq!(t.free_space(), Err(Error::Malformed));
        assert_eq!(t.entries().collect::<Vec<_>>(), [Err(Error::Malformed)]);
        t.set_remaining_len(8);
        let wide = NodeData {
            node_id: Some(0x100_0000),
            ..NodeData::default()
        };
        assert_eq!(t.fill_next(&wide), Err(Error::Malformed));
        assert_eq!(t.remaining_len(), 8);
        // Trailing bytes that are not a whole entry.
        t.set_remaining_len(1);
        assert_eq!(
            t.entries().collect::<Vec<_>>().last(),
            Some(&Err(Error::Truncated))
        );
        assert_eq!(
            TraceOption::new_checked(&[0u8; 7][..]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn repr_builders_reject_bad_sizes() {
        assert_eq!(
            TraceRepr::pre_allocated(1, TraceType(0), 1),
            Err(Error::Malformed)
        );
        assert_eq!(
            TraceRepr::pre_allocated(
                1,
                TraceType(TraceType::OPAQUE_STATE_SNAPSHOT | 0x80_0000),
                1
            ),
            Err(Error::Unsupported)
        );
        // 61 units of data plus the 8-byte header passes 253 bytes.
        assert_eq!(
            TraceRepr::pre_allocated(1, TraceType(0x80_0000), 62),
            Err(Error::Malformed)
        );
        assert!(TraceRepr::pre_allocated(1, TraceType(0x80_0000), 61).is_ok());
        assert_eq!(TraceRepr::incremental(1, TT_0_3, 32), Err(Error::Malformed));
        let inc = TraceRepr::incremental(1, TT_0_3, 31).unwrap();
        assert_eq!((inc.remaining_len, inc.data_len), (124, 0));
        let mut bad = inc;
        bad.flags = 0x10;
        assert_eq!(bad.emit(&mut [0u8; 8]), Err(Error::Malformed));
        assert_eq!(inc.emit(&mut [0u8; 7]), Err(Error::BufferTooSmall));
    }

    #[test]
    fn node_data_every_field() {
        let tt = TraceType(0xff_f000 | TraceType::bit(12) | TraceType::OPAQUE_STATE_SNAPSHOT);
        let opaque = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let d = NodeData {
            hop_limit: Some(1),
            node_id: Some(0x02_0304),
            ingress_if_id: Some(0x0506),
            egress_if_id: Some(0x0708),
            timestamp_secs: Some(0x090a_0b0c),
            timestamp_frac: Some(0x0d0e_0f10),
            transit_delay: Some(0x1112_1314),
            namespace_data: Some(0x1516_1718),
            queue_depth: Some(0x191a_1b1c),
            checksum_complement: Some(0x1d1e_1f20),
            hop_limit_wide: Some(0x21),
            node_id_wide: Some(0x22_2324_2526_2728),
            ingress_if_id_wide: Some(0x292a_2b2c),
            egress_if_id_wide: Some(0x2d2e_2f30),
            namespace_data_wide: Some(0x3132_3334_3536_3738),
            buffer_occupancy: Some(0x393a_3b3c),
            opaque: Some(OpaqueSnapshot {
                schema_id: 0x3d3e3f,
                data: &opaque,
            }),
        };
        // 16 units of fixed fields (15 + one undefined bit), then 4 + 8 bytes of snapshot.
        assert_eq!(d.entry_len(tt), 64 + 12);
        let mut b = [0u8; 76];
        assert_eq!(d.emit(tt, &mut b), Ok(76));
        let mut want: Vec<u8> = (1u8..=0x3c).collect();
        want.extend_from_slice(&[0xff; 4]); // undefined bit 12
        want.extend_from_slice(&[2, 0x3d, 0x3e, 0x3f]); // Length 2, Schema ID
        want.extend_from_slice(&opaque);
        assert_eq!(&b[..], &want[..]);
        assert_eq!(NodeData::parse(&b, tt), Ok((d, 76)));
        assert_eq!(NodeData::parse(&b[..75], tt), Err(Error::Truncated));
        assert_eq!(NodeData::parse(&b[..63], tt), Err(Error::Truncated));
        assert_eq!(d.emit(tt, &mut [0u8; 75]), Err(Error::BufferTooSmall));

        // Nothing set: all-ones everywhere, and an empty snapshot with schema all-ones.
        let none = NodeData::default();
        let mut n = [0u8; 68];
        assert_eq!(none.emit(tt, &mut n), Ok(68));
        assert_eq!(&n[..64], &[0xff; 64]);
        assert_eq!(&n[64..], &[0, 0xff, 0xff, 0xff]);
        let (p, _) = NodeData::parse(&n, tt).unwrap();
        assert_eq!(p.hop_limit, Some(0xff));
        assert_eq!(p.node_id_wide, Some(unavailable::U56));
        assert_eq!(p.available(), NodeData::default());

        let bad = NodeData {
            opaque: Some(OpaqueSnapshot {
                schema_id: 1,
                data: &[1, 2, 3],
            }),
            ..NodeData::default()
        };
        assert_eq!(bad.emit(tt, &mut [0u8; 128]), Err(Error::Malformed));
    }

    #[test]
    fn e2e_option() {
        #[rustfmt::skip]
        let body = [
            0x00, 0x7b,             // Namespace-ID 123
            0b1011_0000, 0x00,      // IOAM-E2E-Type: 64-bit seq, ts seconds, ts fraction
            1, 2, 3, 4, 5, 6, 7, 8, // sequence number
            0, 0, 0, 9,             // seconds
            0, 0, 0, 10,            // fraction
        ];
        let o = E2eOption::new_checked(&body[..]).unwrap();
        assert_eq!((o.namespace_id(), o.e2e_type()), (123, 0xb000));
        let r = E2eRepr::parse(&o).unwrap();
        assert_eq!(
            r,
            E2eRepr {
                namespace_id: 123,
                seq_num_64: Some(0x0102_0304_0506_0708),
                seq_num_32: None,
                timestamp_secs: Some(9),
                timestamp_frac: Some(10),
            }
        );
        assert_eq!(r.buffer_len(), 20);
        let mut out = [0u8; 20];
        r.emit(&mut out).unwrap();
        assert_eq!(out, body);
        assert_eq!(r.emit(&mut [0u8; 19]), Err(Error::BufferTooSmall));
        let o = E2eOption::new_checked(&body[..19]).unwrap();
        assert_eq!(E2eRepr::parse(&o), Err(Error::Truncated));
        let mut odd = body;
        odd[3] = 1;
        let o = E2eOption::new_checked(&odd[..]).unwrap();
        assert_eq!(E2eRepr::parse(&o), Err(Error::Unsupported));
        let seq32 = E2eRepr {
            namespace_id: 7,
            seq_num_32: Some(0xdead_beef),
            ..E2eRepr::default()
        };
        let mut b = [0u8; 8];
        seq32.emit(&mut b).unwrap();
        assert_eq!(b, [0, 7, 0x40, 0, 0xde, 0xad, 0xbe, 0xef]);
        assert!(E2eOption::new_checked(&b[..3]).is_err());
    }

    #[test]
    fn destination_options_with_e2e() {
        let r = E2eRepr {
            namespace_id: 5,
            seq_num_32: Some(77),
            ..E2eRepr::default()
        };
        let mut buf = [0u8; 32];
        let (len, body) =
            emit_header_with_ioam(6, IOAM_DEST, option_type::E2E, r.buffer_len(), &mut buf)
                .unwrap();
        r.emit(&mut buf[body.clone()]).unwrap();
        assert_eq!(len, 16);
        assert_eq!(&buf[..8], &[6, 1, 1, 0, 0x11, 10, 0, 3]);
        let f = find_in_header(&buf[..len], IOAM_DEST).unwrap().unwrap();
        assert_eq!(
            (f.offset, f.ioam_type, &f.body),
            (4, option_type::E2E, &body)
        );
        let back = E2eRepr::parse(&E2eOption::new_checked(&buf[body]).unwrap());
        assert_eq!(back, Ok(r));
        assert_eq!(
            emit_header_with_ioam(6, IOAM_DEST, 3, 254, &mut [0u8; 300]),
            Err(Error::Malformed)
        );
        assert_eq!(
            emit_option_header(IOAM_HBH, 0, 10, &mut [0u8; 3]),
            Err(Error::BufferTooSmall)
        );
    }

    #[test]
    fn find_rejects_short_ioam_option() {
        // IOAM option with 1 data byte, then padding.
        let h = [59, 0, 0x31, 1, 0, 0x01, 0x00, 0x00];
        assert_eq!(find_in_header(&h, IOAM_HBH), Err(Error::Malformed));
        assert_eq!(find_in_header(&h[..7], IOAM_HBH), Err(Error::Truncated));
        // Unaligned IOAM option (Linux drops these).
        let h = [59, 0, 0x31, 4, 0, 0, 0, 0];
        let f = find_in_header(&h, IOAM_HBH).unwrap().unwrap();
        assert!(!f.is_aligned());
        assert_eq!(f.body, 6..8);
    }

    #[test]
    fn fuzz_smoke() {
        let body = &HBH[8..];
        for n in 0..=HBH.len() {
            fuzz(&HBH[..n]);
            fuzz(&HBH[n..]);
        }
        for n in 0..=body.len() {
            fuzz(&body[..n]);
        }
        let mut b = body.to_vec();
        for v in [0u8, 0xff, 0x55] {
            for i in 2..8 {
                b[i] = v;
                fuzz(&b);
            }
        }
        fuzz(&[0xff; 300]);
        fuzz(&[0x00; 300]);
    }
}
