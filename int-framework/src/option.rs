//! INT options on the wire (seed 003 section III-A, Fig. 2 and Fig. 3), smoltcp style, and the
//! mapping of the seed's fields onto RFC 9197 IOAM in the RFC 9486 encapsulation.
//!
//! Two encodings (docs/int.md has the byte diagrams):
//!
//! * **Seed** (per rule): one Hop-by-Hop header, byte for byte the seed's Fig. 2:
//!
//!   ```text
//!    0                   1                   2                   3
//!    0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |  Next Header  |  Hdr Ext Len  |  PadN (0x01)  |       0       |
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |  0x31         |  Opt Len      |          Namespace            |  main header
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |        Trace Type (E2E half 31..16 | HbH half 15..0)          |
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |           Node ID             |     HbH entry trace type      |  newest hop
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |  entry data: bit 16 TX pkts(16) RX pkts(16); bit 17 ts(64);   |
//!   |              bit 18 TX bytes(32) RX bytes(32)                 |
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |  ... older hops ...                                           |
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |  0x11         |  Opt Len      |        E2E trace type         |  E2E entry header
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |  E2E data: bit 0 INT counter(32); bit 1 ts(64); bit 2 TX      |
//!   |            pkts(32); bit 3 TX bytes(32)                       |
//!   +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//!   |  Pad1 / PadN to a multiple of 8                               |
//!   ```
//!
//!   The leading PadN puts the 0x31 option on a 4n boundary (RFC 9486 section 3; Linux drops
//!   it otherwise) and every entry is 4n long, so the 0x11 option is 4n-aligned too. A hop
//!   stacks its entry right after the main header (III-D).
//! * **IOAM** (default): the per-hop data in an RFC 9197 Pre-allocated Trace in the
//!   Hop-by-Hop header, the E2E data in an RFC 9197 E2E option in a Destination Options
//!   header, both built with `peregrine_wire::ioam`; see [`ioam_trace_type`] and
//!   [`hop_to_node_data`] for the field mapping.
//!
//! The in-band INT Request (seed Fig. 3, option 0x32, CBOR payload) and piggy-backed report
//! (option 0x33) are **experimental** option types: IANA has not assigned them. Both have
//! action bits 00 (skip if unknown, RFC 8200 section 4.2) and the "may change" bit set
//! (0x20), so nodes that do not know them forward the packet.

use crate::report::HopData;
use crate::request::TraceType;
use core::iter::FusedIterator;
use peregrine_wire::ioam::{self, NodeData};
use peregrine_wire::ipv6ext::OptionsHeader;
use peregrine_wire::ipv6option::{self, Kind, MAX_DATA_LEN};
use peregrine_wire::{Error, Result};

/// IPv6 option types used by INT.
pub mod option_type {
    /// The seed's main header / IOAM in Hop-by-Hop (RFC 9486).
    pub const TRACE: u8 = 0x31;
    /// The seed's E2E entry / IOAM in Destination Options (RFC 9486).
    pub const E2E: u8 = 0x11;
    /// INT Request, CBOR rule (seed Fig. 3). Experimental, unassigned.
    pub const REQUEST: u8 = 0x32;
    /// Piggy-backed INT report (seed III-B). Experimental, unassigned.
    pub const REPORT: u8 = 0x33;
}

/// Bytes of the seed main header in the 0x31 option data: Namespace (16), Trace Type (32).
pub const SEED_MAIN_LEN: usize = 6;
/// Bytes of a seed hop entry header: Node ID (16), HbH entry trace type (16).
pub const SEED_HOP_HEADER_LEN: usize = 4;
/// Bytes of the seed E2E trace type in the 0x11 option data.
pub const SEED_E2E_HEADER_LEN: usize = 2;
/// Longest payload of a 0x32 / 0x33 option.
pub const MAX_INBAND_PAYLOAD: usize = MAX_DATA_LEN;

const HBH_KNOWN: u16 = TraceType::KNOWN as u16;
const E2E_KNOWN: u16 = (TraceType::KNOWN >> 16) as u16;
const HBH_PKTS: u16 = TraceType::HBH_TXRX_COUNTER as u16;
const HBH_TS: u16 = TraceType::HBH_TIMESTAMP as u16;
const HBH_BYTES: u16 = TraceType::HBH_TXRX_BYTES as u16;
const E2E_CNT: u16 = (TraceType::E2E_INT_COUNTER >> 16) as u16;
const E2E_TS: u16 = (TraceType::E2E_TIMESTAMP >> 16) as u16;
const E2E_TXP: u16 = (TraceType::E2E_TX_COUNTER >> 16) as u16;
const E2E_TXB: u16 = (TraceType::E2E_TX_BYTES >> 16) as u16;

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn be64(b: &[u8]) -> u64 {
    ((be32(b) as u64) << 32) | be32(&b[4..]) as u64
}

/// Bytes of hop entry data for an HbH entry trace type (Table I bits 16-18).
pub const fn hop_data_len(entry_trace_type: u16) -> usize {
    let mut n = 0;
    if entry_trace_type & HBH_PKTS != 0 {
        n += 4;
    }
    if entry_trace_type & HBH_TS != 0 {
        n += 8;
    }
    if entry_trace_type & HBH_BYTES != 0 {
        n += 8;
    }
    n
}

/// Bytes of E2E data for an E2E trace type (Table I bits 0-3, as the upper 16 bits).
pub const fn e2e_data_len(e2e_trace_type: u16) -> usize {
    let mut n = 0;
    if e2e_trace_type & E2E_CNT != 0 {
        n += 4;
    }
    if e2e_trace_type & E2E_TS != 0 {
        n += 8;
    }
    if e2e_trace_type & E2E_TXP != 0 {
        n += 4;
    }
    if e2e_trace_type & E2E_TXB != 0 {
        n += 4;
    }
    n
}

// ---------------------------------------------------------------------------------------
// Seed hop entry

/// One seed hop entry (Fig. 2 HbH entry header and entry data). The entry trace type is
/// implied by which fields are `Some`: a node adds only what it supports (III-A).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeedHopRepr {
    pub node_id: u16,
    /// Bit 16: (TX, RX) packets, 16-bit.
    pub packets: Option<(u16, u16)>,
    /// Bit 17: timestamp, ns.
    pub timestamp_ns: Option<u64>,
    /// Bit 18: (TX, RX) bytes, 32-bit.
    pub bytes: Option<(u32, u32)>,
}

impl SeedHopRepr {
    /// The HbH entry trace type these fields imply.
    pub const fn entry_trace_type(&self) -> u16 {
        let mut t = 0;
        if self.packets.is_some() {
            t |= HBH_PKTS;
        }
        if self.timestamp_ns.is_some() {
            t |= HBH_TS;
        }
        if self.bytes.is_some() {
            t |= HBH_BYTES;
        }
        t
    }

    pub const fn buffer_len(&self) -> usize {
        SEED_HOP_HEADER_LEN + hop_data_len(self.entry_trace_type())
    }

    /// Parse the entry at the start of `b`; returns it and its length. Unallocated entry
    /// trace type bits are `Unsupported` (their length is unknown), short data `Truncated`.
    pub fn parse(b: &[u8]) -> Result<(SeedHopRepr, usize)> {
        if b.len() < SEED_HOP_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let ett = be16(&b[2..]);
        if ett & !HBH_KNOWN != 0 {
            return Err(Error::Unsupported);
        }
        let len = SEED_HOP_HEADER_LEN + hop_data_len(ett);
        if b.len() < len {
            return Err(Error::Truncated);
        }
        let mut r = SeedHopRepr {
            node_id: be16(b),
            ..Default::default()
        };
        let mut p = SEED_HOP_HEADER_LEN;
        if ett & HBH_PKTS != 0 {
            r.packets = Some((be16(&b[p..]), be16(&b[p + 2..])));
            p += 4;
        }
        if ett & HBH_TS != 0 {
            r.timestamp_ns = Some(be64(&b[p..]));
            p += 8;
        }
        if ett & HBH_BYTES != 0 {
            r.bytes = Some((be32(&b[p..]), be32(&b[p + 4..])));
        }
        Ok((r, len))
    }

    /// Write the entry at the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let b = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        b[..2].copy_from_slice(&self.node_id.to_be_bytes());
        b[2..4].copy_from_slice(&self.entry_trace_type().to_be_bytes());
        let mut p = SEED_HOP_HEADER_LEN;
        if let Some((tx, rx)) = self.packets {
            b[p..p + 2].copy_from_slice(&tx.to_be_bytes());
            b[p + 2..p + 4].copy_from_slice(&rx.to_be_bytes());
            p += 4;
        }
        if let Some(ts) = self.timestamp_ns {
            b[p..p + 8].copy_from_slice(&ts.to_be_bytes());
            p += 8;
        }
        if let Some((tx, rx)) = self.bytes {
            b[p..p + 4].copy_from_slice(&tx.to_be_bytes());
            b[p + 4..p + 8].copy_from_slice(&rx.to_be_bytes());
        }
        Ok(len)
    }

    /// As a report hop.
    pub fn to_hop(&self) -> HopData {
        HopData {
            node_id: self.node_id as u32,
            entry_trace_type: self.entry_trace_type(),
            timestamp_ns: self.timestamp_ns,
            tx_packets: self.packets.map(|p| p.0),
            rx_packets: self.packets.map(|p| p.1),
            tx_bytes: self.bytes.map(|b| b.0),
            rx_bytes: self.bytes.map(|b| b.1),
            hop_limit: None,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Seed main header (0x31 option data)

/// A view of the seed's 0x31 option data: main header, then hop entries, newest first.
#[derive(Debug, Clone)]
pub struct SeedTrace<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SeedTrace<T> {
    pub const fn new_unchecked(buffer: T) -> SeedTrace<T> {
        SeedTrace { buffer }
    }

    /// Wrap and check that the main header fits; entries are checked as they are read.
    pub fn new_checked(buffer: T) -> Result<SeedTrace<T>> {
        let t = Self::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < SEED_MAIN_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn namespace(&self) -> u16 {
        be16(self.buffer.as_ref())
    }

    /// The 32-bit trace type (Table I).
    pub fn trace_type(&self) -> TraceType {
        TraceType(be32(&self.buffer.as_ref()[2..]))
    }

    /// The hop entries, raw.
    pub fn hop_area(&self) -> &[u8] {
        &self.buffer.as_ref()[SEED_MAIN_LEN..]
    }

    /// The hop entries, newest first. Yields `Err` at most once, then ends.
    pub fn hops(&self) -> SeedHops<'_> {
        SeedHops {
            data: self.hop_area(),
            failed: false,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SeedTrace<T> {
    pub fn set_namespace(&mut self, v: u16) {
        self.buffer.as_mut()[..2].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_trace_type(&mut self, v: TraceType) {
        self.buffer.as_mut()[2..6].copy_from_slice(&v.0.to_be_bytes());
    }
}

/// Iterator over seed hop entries.
#[derive(Debug, Clone)]
pub struct SeedHops<'a> {
    data: &'a [u8],
    failed: bool,
}

impl Iterator for SeedHops<'_> {
    type Item = Result<SeedHopRepr>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.data.is_empty() {
            return None;
        }
        match SeedHopRepr::parse(self.data) {
            Ok((h, n)) => {
                self.data = &self.data[n..];
                Some(Ok(h))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

impl FusedIterator for SeedHops<'_> {}

// ---------------------------------------------------------------------------------------
// Seed E2E entry (0x11 option data)

/// The seed's E2E entry (Fig. 2): E2E trace type (16) and the source's data. The trace
/// type is implied by which fields are `Some`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeedE2eRepr {
    /// Bit 0.
    pub int_counter: Option<u32>,
    /// Bit 1, ns.
    pub timestamp_ns: Option<u64>,
    /// Bit 2.
    pub tx_packets: Option<u32>,
    /// Bit 3.
    pub tx_bytes: Option<u32>,
}

impl SeedE2eRepr {
    /// E2E trace type (the upper 16 bits of the 32-bit trace type).
    pub const fn trace_type(&self) -> u16 {
        let mut t = 0;
        if self.int_counter.is_some() {
            t |= E2E_CNT;
        }
        if self.timestamp_ns.is_some() {
            t |= E2E_TS;
        }
        if self.tx_packets.is_some() {
            t |= E2E_TXP;
        }
        if self.tx_bytes.is_some() {
            t |= E2E_TXB;
        }
        t
    }

    /// Option data length.
    pub const fn buffer_len(&self) -> usize {
        SEED_E2E_HEADER_LEN + e2e_data_len(self.trace_type())
    }

    /// Parse the 0x11 option data. Unallocated bits `Unsupported`; short data `Truncated`;
    /// trailing bytes `Malformed` (the option length must match the trace type).
    pub fn parse(data: &[u8]) -> Result<SeedE2eRepr> {
        if data.len() < SEED_E2E_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let tt = be16(data);
        if tt & !E2E_KNOWN != 0 {
            return Err(Error::Unsupported);
        }
        let need = SEED_E2E_HEADER_LEN + e2e_data_len(tt);
        if data.len() < need {
            return Err(Error::Truncated);
        }
        if data.len() > need {
            return Err(Error::Malformed);
        }
        let mut r = SeedE2eRepr::default();
        let mut p = SEED_E2E_HEADER_LEN;
        if tt & E2E_CNT != 0 {
            r.int_counter = Some(be32(&data[p..]));
            p += 4;
        }
        if tt & E2E_TS != 0 {
            r.timestamp_ns = Some(be64(&data[p..]));
            p += 8;
        }
        if tt & E2E_TXP != 0 {
            r.tx_packets = Some(be32(&data[p..]));
            p += 4;
        }
        if tt & E2E_TXB != 0 {
            r.tx_bytes = Some(be32(&data[p..]));
        }
        Ok(r)
    }

    /// Write the option data at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let b = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        b[..2].copy_from_slice(&self.trace_type().to_be_bytes());
        let mut p = 2;
        if let Some(v) = self.int_counter {
            b[p..p + 4].copy_from_slice(&v.to_be_bytes());
            p += 4;
        }
        if let Some(ts) = self.timestamp_ns {
            b[p..p + 8].copy_from_slice(&ts.to_be_bytes());
            p += 8;
        }
        for v in [self.tx_packets, self.tx_bytes].into_iter().flatten() {
            b[p..p + 4].copy_from_slice(&v.to_be_bytes());
            p += 4;
        }
        Ok(len)
    }
}

// ---------------------------------------------------------------------------------------
// Seed Hop-by-Hop header

/// A parsed seed Hop-by-Hop header: the 0x31 option and the optional 0x11 option.
#[derive(Debug, Clone)]
pub struct SeedHeader<'a> {
    pub next_header: u8,
    /// Header length in bytes.
    pub len: usize,
    pub trace: SeedTrace<&'a [u8]>,
    pub e2e: Option<SeedE2eRepr>,
}

/// Parse a seed Hop-by-Hop header at the start of `hdr`: exactly one 0x31 option, at most
/// one 0x11, padding; anything else is `Unsupported` (we could not rebuild it faithfully).
pub fn parse_seed_header(hdr: &[u8]) -> Result<SeedHeader<'_>> {
    let h = OptionsHeader::new_checked(hdr)?;
    let len = h.header_len();
    let hdr = &hdr[..len];
    let mut trace = None;
    let mut e2e = None;
    for opt in ipv6option::iter(&hdr[2..]) {
        let opt = opt?;
        match opt.kind {
            Kind::Pad1 | Kind::PadN(_) => {}
            Kind::Unknown { option_type, data } => match option_type {
                option_type::TRACE if trace.is_none() => {
                    trace = Some(SeedTrace::new_checked(data)?);
                }
                option_type::E2E if e2e.is_none() => e2e = Some(SeedE2eRepr::parse(data)?),
                option_type::TRACE | option_type::E2E => return Err(Error::Malformed),
                _ => return Err(Error::Unsupported),
            },
        }
    }
    Ok(SeedHeader {
        next_header: h.next_header(),
        len,
        trace: trace.ok_or(Error::Malformed)?,
        e2e,
    })
}

fn seed_body_len(hops_len: usize, e2e: Option<&SeedE2eRepr>) -> usize {
    // PadN(2), 0x31 TL + main + hops, 0x11 TL + data.
    2 + 2 + SEED_MAIN_LEN + hops_len + e2e.map_or(0, |e| 2 + e.buffer_len())
}

/// Length of the seed header [`emit_seed_header`] writes.
pub fn seed_header_len(hops_len: usize, e2e: Option<&SeedE2eRepr>) -> usize {
    (2 + seed_body_len(hops_len, e2e)).div_ceil(8) * 8
}

/// Write a seed Hop-by-Hop header (Fig. 2): PadN(2), the 0x31 option with `namespace`,
/// `trace_type`, then `new_hop` (if any) stacked before `old_hops` (raw entries, newest
/// first), the 0x11 option if `e2e`, padding to a multiple of 8. Returns its length. Hop
/// entries that would not fit in one option (255 bytes) are `BufferTooSmall`.
pub fn emit_seed_header(
    next_header: u8,
    namespace: u16,
    trace_type: TraceType,
    new_hop: Option<&SeedHopRepr>,
    old_hops: &[u8],
    e2e: Option<&SeedE2eRepr>,
    buf: &mut [u8],
) -> Result<usize> {
    let hops_len = new_hop.map_or(0, |h| h.buffer_len()) + old_hops.len();
    let trace_len = SEED_MAIN_LEN + hops_len;
    if trace_len > MAX_DATA_LEN {
        return Err(Error::BufferTooSmall);
    }
    let len = seed_header_len(hops_len, e2e);
    let b = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
    b[0] = next_header;
    b[1] = (len / 8 - 1) as u8;
    let mut p = 2 + ipv6option::emit_padn(&mut b[2..], 0)?;
    b[p] = option_type::TRACE;
    b[p + 1] = trace_len as u8;
    p += 2;
    let mut t = SeedTrace::new_unchecked(&mut b[p..p + SEED_MAIN_LEN]);
    t.set_namespace(namespace);
    t.set_trace_type(trace_type);
    p += SEED_MAIN_LEN;
    if let Some(h) = new_hop {
        p += h.emit(&mut b[p..])?;
    }
    b[p..p + old_hops.len()].copy_from_slice(old_hops);
    p += old_hops.len();
    if let Some(e) = e2e {
        b[p] = option_type::E2E;
        b[p + 1] = e.buffer_len() as u8;
        p += 2;
        p += e.emit(&mut b[p..])?;
    }
    ipv6option::emit_pad(&mut b[p..], len - p)?;
    Ok(len)
}

// ---------------------------------------------------------------------------------------
// In-band request / report options

/// Which in-band option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InBandKind {
    /// 0x32: INT Request, the CBOR rule (`Rule::to_option_payload`).
    Request,
    /// 0x33: a piggy-backed report ([`IntReport::encode_compact`](crate::report::IntReport::encode_compact)).
    Report,
}

impl InBandKind {
    pub const fn option_type(self) -> u8 {
        match self {
            InBandKind::Request => option_type::REQUEST,
            InBandKind::Report => option_type::REPORT,
        }
    }
}

/// An in-band option (seed Fig. 3): option type, length, payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InBandRepr<'a> {
    pub kind: InBandKind,
    pub payload: &'a [u8],
}

/// Length of the Hop-by-Hop header [`emit_inband_header`] writes.
pub const fn inband_header_len(payload_len: usize) -> usize {
    (2 + 2 + payload_len).div_ceil(8) * 8
}

/// Write a Hop-by-Hop header holding only `repr` (seed Fig. 3) and padding. An empty or
/// over-255-byte payload is `Malformed`.
pub fn emit_inband_header(next_header: u8, repr: &InBandRepr<'_>, buf: &mut [u8]) -> Result<usize> {
    if repr.payload.is_empty() || repr.payload.len() > MAX_INBAND_PAYLOAD {
        return Err(Error::Malformed);
    }
    let len = inband_header_len(repr.payload.len());
    let b = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
    b[0] = next_header;
    b[1] = (len / 8 - 1) as u8;
    let p = 2 + ipv6option::emit_tlv(&mut b[2..], repr.kind.option_type(), repr.payload)?;
    ipv6option::emit_pad(&mut b[p..], len - p)?;
    Ok(len)
}

/// The first 0x32 or 0x33 option in the options header at the start of `hdr`, if any.
pub fn find_inband(hdr: &[u8]) -> Result<Option<InBandRepr<'_>>> {
    let h = OptionsHeader::new_checked(hdr)?;
    let area = &hdr[2..h.header_len()];
    for opt in ipv6option::iter(area) {
        let opt = opt?;
        let kind = match opt.option_type() {
            option_type::REQUEST => InBandKind::Request,
            option_type::REPORT => InBandKind::Report,
            _ => continue,
        };
        if opt.data().is_empty() {
            return Err(Error::Malformed);
        }
        return Ok(Some(InBandRepr {
            kind,
            payload: opt.data(),
        }));
    }
    Ok(None)
}

// ---------------------------------------------------------------------------------------
// IOAM mapping

/// The RFC 9197 trace type for the HbH half of a seed trace type: bit 0 (Hop_Lim, node_id)
/// always; seed bit 17 (timestamp) -> bits 2 and 3 (seconds, nanoseconds); seed bit 16
/// (TX/RX packets, 16 bits each) -> bit 5 (namespace data, short); seed bit 18 (TX/RX
/// bytes, 32 bits each), or E2E bits 2-3 (the source's TX packets and bytes, carried in the
/// source's own entry) -> bit 10 (namespace data, wide). Linux fills all of these.
pub fn ioam_trace_type(tt: TraceType) -> ioam::TraceType {
    use ioam::TraceType as T;
    let h = tt.hbh();
    let mut v = T::HOP_LIM_NODE_ID;
    if h & HBH_TS != 0 {
        v |= T::TIMESTAMP_SECS | T::TIMESTAMP_FRAC;
    }
    if h & HBH_PKTS != 0 {
        v |= T::NAMESPACE_DATA;
    }
    // The source's own entry carries the E2E TX counters in the wide data (docs/int.md).
    if h & HBH_BYTES != 0 || tt.e2e() & (E2E_TXP | E2E_TXB) != 0 {
        v |= T::NAMESPACE_DATA_WIDE;
    }
    ioam::TraceType(v)
}

/// Seconds and nanoseconds of a ns timestamp (RFC 9197 section 5 PTP truncated format).
pub const fn ts_split(ns: u64) -> (u32, u32) {
    ((ns / 1_000_000_000) as u32, (ns % 1_000_000_000) as u32)
}

/// Inverse of [`ts_split`]; a fraction of a second or more is `None`.
pub fn ts_join(secs: u32, frac: u32) -> Option<u64> {
    (frac < 1_000_000_000).then(|| secs as u64 * 1_000_000_000 + frac as u64)
}

/// What the IOAM timestamp fraction field counts (RFC 9197 sections 4.4.2.3 and 5: the
/// format is a property of the IOAM namespace). Seconds are the same in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TsFormat {
    /// PTP truncated (RFC 9197 5.1): nanoseconds.
    #[default]
    Ptp,
    /// POSIX (RFC 9197 5.3): microseconds. What the Linux kernel writes
    /// (`net/ipv6/ioam6.c`: `tv_nsec / NSEC_PER_USEC`), so mixed paths agree.
    Posix,
}

impl TsFormat {
    /// Seconds and fraction of a ns timestamp in this format.
    pub const fn split(self, ns: u64) -> (u32, u32) {
        match self {
            TsFormat::Ptp => ts_split(ns),
            TsFormat::Posix => (
                (ns / 1_000_000_000) as u32,
                ((ns % 1_000_000_000) / 1_000) as u32,
            ),
        }
    }

    /// Inverse of [`TsFormat::split`] (to the format's resolution); a fraction of a second
    /// or more is `None`.
    pub fn join(self, secs: u32, frac: u32) -> Option<u64> {
        match self {
            TsFormat::Ptp => ts_join(secs, frac),
            TsFormat::Posix => {
                (frac < 1_000_000).then(|| secs as u64 * 1_000_000_000 + frac as u64 * 1_000)
            }
        }
    }
}

/// A hop's data as an RFC 9197 node entry for trace type `tt`: fields the hop did not
/// collect stay `None`, which [`NodeData::emit`] writes as all-ones (RFC 9197 section
/// 4.4.2; this replaces the seed's per-hop entry trace type).
pub fn hop_to_node_data(h: &SeedHopRepr, hop_limit: u8, tt: ioam::TraceType) -> NodeData<'static> {
    hop_to_node_data_in(h, hop_limit, tt, TsFormat::Ptp)
}

/// [`hop_to_node_data`] with the namespace's timestamp format.
pub fn hop_to_node_data_in(
    h: &SeedHopRepr,
    hop_limit: u8,
    tt: ioam::TraceType,
    fmt: TsFormat,
) -> NodeData<'static> {
    use ioam::TraceType as T;
    let mut d = NodeData::default();
    if tt.has(T::HOP_LIM_NODE_ID) {
        d.hop_limit = Some(hop_limit);
        d.node_id = Some(h.node_id as u32);
    }
    if let Some(ts) = h.timestamp_ns {
        let (s, f) = fmt.split(ts);
        d.timestamp_secs = tt.has(T::TIMESTAMP_SECS).then_some(s);
        d.timestamp_frac = tt.has(T::TIMESTAMP_FRAC).then_some(f);
    }
    if let Some((tx, rx)) = h.packets {
        d.namespace_data = tt
            .has(T::NAMESPACE_DATA)
            .then_some((tx as u32) << 16 | rx as u32);
    }
    if let Some((tx, rx)) = h.bytes {
        d.namespace_data_wide = tt
            .has(T::NAMESPACE_DATA_WIDE)
            .then_some((tx as u64) << 32 | rx as u64);
    }
    d
}

/// An RFC 9197 node entry as a report hop: all-ones fields are "not collected".
pub fn node_data_to_hop(d: &NodeData<'_>) -> HopData {
    node_data_to_hop_in(d, TsFormat::Ptp)
}

/// [`node_data_to_hop`] with the namespace's timestamp format.
pub fn node_data_to_hop_in(d: &NodeData<'_>, fmt: TsFormat) -> HopData {
    let a = d.available();
    let timestamp_ns = match (a.timestamp_secs, a.timestamp_frac) {
        (Some(s), Some(f)) => fmt.join(s, f),
        (Some(s), None) => Some(s as u64 * 1_000_000_000),
        _ => None,
    };
    let mut h = HopData {
        node_id: a.node_id.unwrap_or(0),
        timestamp_ns,
        tx_packets: a.namespace_data.map(|v| (v >> 16) as u16),
        rx_packets: a.namespace_data.map(|v| v as u16),
        tx_bytes: a.namespace_data_wide.map(|v| (v >> 32) as u32),
        rx_bytes: a.namespace_data_wide.map(|v| v as u32),
        entry_trace_type: 0,
        hop_limit: a.hop_limit,
    };
    if h.timestamp_ns.is_some() {
        h.entry_trace_type |= HBH_TS;
    }
    if h.tx_packets.is_some() {
        h.entry_trace_type |= HBH_PKTS;
    }
    if h.tx_bytes.is_some() {
        h.entry_trace_type |= HBH_BYTES;
    }
    h
}

// ---------------------------------------------------------------------------------------
// Fuzzing

/// Fuzz entry: `data` as a seed header, seed option data, hop entry, E2E data and in-band
/// header; parse, iterate and round-trip. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let mut out = [0u8; 2048];
    if let Ok(h) = parse_seed_header(data) {
        let hops: usize = h
            .trace
            .hops()
            .map_while(|r| r.ok())
            .map(|x| x.buffer_len())
            .sum();
        let area = h.trace.hop_area();
        if hops == area.len() {
            let n = emit_seed_header(
                h.next_header,
                h.trace.namespace(),
                h.trace.trace_type(),
                None,
                area,
                h.e2e.as_ref(),
                &mut out,
            );
            if let Ok(n) = n {
                let again = parse_seed_header(&out[..n]).expect("re-parse");
                assert_eq!(again.trace.hop_area(), area);
                assert_eq!(again.e2e, h.e2e);
            }
        }
    }
    if let Ok(t) = SeedTrace::new_checked(data) {
        for hop in t.hops().flatten() {
            let n = hop.emit(&mut out).expect("emit");
            assert_eq!(SeedHopRepr::parse(&out[..n]), Ok((hop, n)));
        }
    }
    if let Ok(e) = SeedE2eRepr::parse(data) {
        let n = e.emit(&mut out).expect("emit");
        assert_eq!(SeedE2eRepr::parse(&out[..n]), Ok(e));
    }
    if let Ok(Some(r)) = find_inband(data) {
        let n = emit_inband_header(0, &r, &mut out).expect("emit");
        assert_eq!(find_inband(&out[..n]), Ok(Some(r)));
    }
    if let Ok((d, _)) = NodeData::parse(data, ioam_trace_type(TraceType(0xffff_ffff))) {
        let _ = node_data_to_hop(&d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posix_timestamps_are_microseconds_as_linux_writes_them() {
        let ns = 1_700_000_000_123_456_789u64;
        assert_eq!(TsFormat::Posix.split(ns), (1_700_000_000, 123_456));
        assert_eq!(TsFormat::Ptp.split(ns), (1_700_000_000, 123_456_789));
        assert_eq!(
            TsFormat::Posix.join(1_700_000_000, 123_456),
            Some(1_700_000_000_123_456_000)
        );
        // A POSIX fraction is below 10^6; a PTP one below 10^9.
        assert_eq!(TsFormat::Posix.join(1, 1_000_000), None);
        assert_eq!(TsFormat::Ptp.join(1, 1_000_000), Some(1_001_000_000));
        // A Linux hop's entry read in its format lands in the same microsecond.
        let d = NodeData {
            hop_limit: Some(62),
            node_id: Some(0x42),
            timestamp_secs: Some(1_700_000_000),
            timestamp_frac: Some(123_456),
            ..NodeData::default()
        };
        let h = node_data_to_hop_in(&d, TsFormat::Posix);
        assert_eq!(h.timestamp_ns, Some(1_700_000_000_123_456_000));
        assert_eq!(h.hop_limit, Some(62));
        assert_eq!(h.node_id, 0x42);
        let hop = SeedHopRepr {
            node_id: 7,
            timestamp_ns: Some(ns),
            ..Default::default()
        };
        let tt = ioam::TraceType(
            ioam::TraceType::HOP_LIM_NODE_ID
                | ioam::TraceType::TIMESTAMP_SECS
                | ioam::TraceType::TIMESTAMP_FRAC,
        );
        let back = hop_to_node_data_in(&hop, 9, tt, TsFormat::Posix);
        assert_eq!(back.timestamp_frac, Some(123_456));
    }

    /// Fig. 2 with the seed experiments' trace type (0x7000E000), one hop, E2E bits 1-3.
    #[test]
    fn seed_header_vector() {
        let hop = SeedHopRepr {
            node_id: 0x0102,
            packets: Some((0x1111, 0x2222)),
            timestamp_ns: Some(0x0102_0304_0506_0708),
            bytes: Some((0xaabb_ccdd, 0x1122_3344)),
        };
        let e2e = SeedE2eRepr {
            int_counter: None,
            timestamp_ns: Some(0x1000),
            tx_packets: Some(7),
            tx_bytes: Some(0x0500),
        };
        let mut b = [0u8; 64];
        let n = emit_seed_header(
            17,
            0x00ab,
            TraceType::SEED_EXPERIMENTS,
            Some(&hop),
            &[],
            Some(&e2e),
            &mut b,
        )
        .unwrap();
        #[rustfmt::skip]
        let want: &[u8] = &[
            17, 6, 0x01, 0x00,
            0x31, 30, 0x00, 0xab,
            0x70, 0x00, 0xe0, 0x00,
            0x01, 0x02, 0xe0, 0x00,
            0x11, 0x11, 0x22, 0x22,
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
            0xaa, 0xbb, 0xcc, 0xdd, 0x11, 0x22, 0x33, 0x44,
            0x11, 18, 0x70, 0x00,
            0, 0, 0, 0, 0, 0, 0x10, 0x00,
            0, 0, 0, 7, 0, 0, 0x05, 0x00,
        ];
        assert_eq!(&b[..n], want);
        assert_eq!(n % 8, 0);
        // Linux: the 0x31 option must be 4n-aligned.
        assert_eq!(b.iter().position(|&x| x == 0x31), Some(4));
        let h = parse_seed_header(&b[..n]).unwrap();
        assert_eq!(h.next_header, 17);
        assert_eq!(h.trace.namespace(), 0xab);
        assert_eq!(h.trace.trace_type(), TraceType::SEED_EXPERIMENTS);
        let hops: Vec<_> = h.trace.hops().collect();
        assert_eq!(hops, vec![Ok(hop)]);
        assert_eq!(h.e2e, Some(e2e));
    }

    #[test]
    fn stacking_puts_the_new_hop_first_and_keeps_alignment() {
        let a = SeedHopRepr {
            node_id: 1,
            timestamp_ns: Some(5),
            ..Default::default()
        };
        let b_ = SeedHopRepr {
            node_id: 2,
            packets: Some((1, 2)),
            ..Default::default()
        };
        let mut one = [0u8; 64];
        let n1 =
            emit_seed_header(6, 9, TraceType(0x4000_C000), Some(&a), &[], None, &mut one).unwrap();
        let h1 = parse_seed_header(&one[..n1]).unwrap();
        let mut two = [0u8; 64];
        let n2 = emit_seed_header(
            6,
            9,
            h1.trace.trace_type(),
            Some(&b_),
            h1.trace.hop_area(),
            None,
            &mut two,
        )
        .unwrap();
        let h2 = parse_seed_header(&two[..n2]).unwrap();
        let hops: Vec<_> = h2.trace.hops().map(|h| h.unwrap().node_id).collect();
        assert_eq!(hops, vec![2, 1]);
        assert_eq!(n2 % 8, 0);
    }

    #[test]
    fn malformed_seed_options_are_typed_errors() {
        // Entry trace type with an unallocated bit.
        assert_eq!(
            SeedHopRepr::parse(&[0, 1, 0x10, 0]),
            Err(Error::Unsupported)
        );
        assert_eq!(SeedHopRepr::parse(&[0, 1, 0x80]), Err(Error::Truncated));
        assert_eq!(
            SeedHopRepr::parse(&[0, 1, 0x80, 0, 1]),
            Err(Error::Truncated)
        );
        assert_eq!(SeedE2eRepr::parse(&[0x08, 0]), Err(Error::Unsupported));
        assert_eq!(SeedE2eRepr::parse(&[0x40, 0, 1]), Err(Error::Truncated));
        assert_eq!(SeedE2eRepr::parse(&[0, 0, 1]), Err(Error::Malformed));
        // Header without a 0x31 option.
        assert_eq!(
            parse_seed_header(&[6, 0, 1, 4, 0, 0, 0, 0]).unwrap_err(),
            Error::Malformed
        );
        // Two 0x31 options.
        let two = [6, 1, 0x31, 6, 0, 1, 0, 0, 0, 0, 0x31, 2, 0, 0, 1, 0];
        assert!(parse_seed_header(&two).is_err());
        // Hops too long for one option.
        let hop = SeedHopRepr {
            node_id: 1,
            packets: Some((1, 1)),
            timestamp_ns: Some(1),
            bytes: Some((1, 1)),
        };
        let old = [0u8; 240];
        let mut b = [0u8; 512];
        assert_eq!(
            emit_seed_header(6, 1, TraceType(0xe000), Some(&hop), &old, None, &mut b),
            Err(Error::BufferTooSmall)
        );
    }

    #[test]
    fn inband_request_vector() {
        let payload = [0xa1, 0x61, 0x61, 0x01];
        let r = InBandRepr {
            kind: InBandKind::Request,
            payload: &payload,
        };
        let mut b = [0u8; 16];
        let n = emit_inband_header(17, &r, &mut b).unwrap();
        assert_eq!(&b[..n], &[17, 0, 0x32, 4, 0xa1, 0x61, 0x61, 0x01]);
        assert_eq!(find_inband(&b[..n]), Ok(Some(r)));
        assert_eq!(
            find_inband(&[17, 0, 0x33, 0, 1, 2, 0, 0]),
            Err(Error::Malformed)
        );
        assert_eq!(find_inband(&[17, 0, 1, 4, 0, 0, 0, 0]), Ok(None));
    }

    #[test]
    fn ioam_mapping_round_trips_and_marks_missing_fields_all_ones() {
        let tt = ioam_trace_type(TraceType::SEED_EXPERIMENTS);
        assert_eq!(tt.node_len(), 6);
        let hop = SeedHopRepr {
            node_id: 42,
            packets: Some((3, 4)),
            timestamp_ns: Some(12_000_000_007),
            bytes: Some((100, 200)),
        };
        let mut b = [0u8; 24];
        let d = hop_to_node_data(&hop, 63, tt);
        assert_eq!(d.emit(tt, &mut b).unwrap(), 24);
        let (back, _) = NodeData::parse(&b, tt).unwrap();
        assert_eq!(back.hop_limit, Some(63));
        // IOAM also carries the Hop_Lim, which the seed layout has no field for.
        assert_eq!(
            node_data_to_hop(&back),
            HopData {
                hop_limit: Some(63),
                ..hop.to_hop()
            }
        );
        // A hop that only has its node ID: the rest is all-ones on the wire.
        let bare = SeedHopRepr {
            node_id: 7,
            ..Default::default()
        };
        hop_to_node_data(&bare, 1, tt).emit(tt, &mut b).unwrap();
        assert!(b[4..].iter().all(|&x| x == 0xff));
        let h = node_data_to_hop(&NodeData::parse(&b, tt).unwrap().0);
        assert_eq!(h.node_id, 7);
        assert_eq!(h.entry_trace_type, 0);
        assert_eq!(h.timestamp_ns, None);
    }

    #[test]
    fn fuzz_entry_survives_mutations() {
        let mut b = [0u8; 64];
        let n = emit_seed_header(
            17,
            1,
            TraceType(0xf000_e000),
            Some(&SeedHopRepr {
                node_id: 3,
                packets: Some((1, 2)),
                timestamp_ns: Some(3),
                bytes: Some((4, 5)),
            }),
            &[],
            Some(&SeedE2eRepr {
                int_counter: Some(1),
                timestamp_ns: Some(2),
                tx_packets: Some(3),
                tx_bytes: Some(4),
            }),
            &mut b,
        )
        .unwrap();
        for i in 0..n {
            for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut m = b;
                m[i] = v;
                for end in [n, i + 1, n.saturating_sub(3)] {
                    fuzz(&m[..end.min(n)]);
                }
            }
        }
    }
}
