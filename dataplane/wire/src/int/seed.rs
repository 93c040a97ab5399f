//! The seed layout of INT (Fig. 2): hop entries, the 0x31 main header, the 0x11 E2E
//! entry and the Hop-by-Hop header that holds them.

use super::*;

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
