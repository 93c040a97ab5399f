//! IOAM-Trace-Type and one node's data (RFC 9197 sections 4.4.1 and 4.4.2).

use super::*;

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

    pub(super) fn check(&self) -> Result<()> {
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
