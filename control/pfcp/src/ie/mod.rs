//! Information elements (TS 29.244 section 8).
//!
//! ```text
//! octets 1-2:  Type (bit 8 of octet 1 set: vendor-specific, section 8.1.1)
//! octets 3-4:  Length: octets after these 4 (includes the Enterprise ID if present)
//! octets 5-6:  Enterprise ID (vendor-specific IEs only)
//! then:        value; for grouped IEs a list of IEs (section 7.5, 8.1.2)
//! ```
//!
//! [`IeIter`] walks a TLV list and stops with a typed error at the first IE whose header or
//! value runs past its container. [`Ie`] is the typed form of the IEs Peregrine needs
//! (section 8.2); every other IE is kept as [`RawIe`] so it can be skipped, forwarded or
//! reported. Grouped IEs ([`Grouped`]) are decoded recursively, at most [`MAX_DEPTH`] deep.
//!
//! Per section 8.1.1 a receiver ignores octets beyond those it knows at the end of a
//! fixed-layout IE ("extendable" IEs); they are not kept.

use crate::error::DecodeError;

/// Deepest nesting of grouped IEs accepted (a message's own IEs are at depth 0, so e.g.
/// Create PDR / PDI / ... is depth 1 / 2). The deepest real nesting in Release 17 is ~4.
pub const MAX_DEPTH: usize = 8;

/// Type bit marking a vendor-specific IE (section 8.1.1).
pub const ENTERPRISE_BIT: u16 = 0x8000;

/// Length of the TLV header (type + length).
pub const HEADER_LEN: usize = 4;

mod field {
    use core::ops::Range;
    pub const TYPE: Range<usize> = 0..2;
    pub const LENGTH: Range<usize> = 2..4;
}

/// IE type values (TS 29.244 section 8.1.2, table 8.1.2-1).
pub mod ie_type;

/// A borrowed, length-checked TLV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawIeRef<'a> {
    /// Type including [`ENTERPRISE_BIT`] for vendor IEs.
    pub ie_type: u16,
    /// Enterprise ID of a vendor-specific IE.
    pub enterprise_id: Option<u16>,
    /// Value after the header (and after the Enterprise ID).
    pub value: &'a [u8],
}

/// Iterator over the IEs of a buffer. Yields `Err` once, at the first IE that does not fit
/// (`IeLength`) or a vendor IE too short for its Enterprise ID (`IeIncorrect`), then stops.
#[derive(Debug, Clone)]
pub struct IeIter<'a> {
    buf: &'a [u8],
}

impl<'a> IeIter<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        IeIter { buf }
    }
}

impl<'a> Iterator for IeIter<'a> {
    type Item = Result<RawIeRef<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            return None;
        }
        let buf = core::mem::take(&mut self.buf);
        let Some(hdr) = buf.get(..HEADER_LEN) else {
            let ie_type = match buf {
                [a, b, ..] => u16::from_be_bytes([*a, *b]),
                _ => 0,
            };
            return Some(Err(DecodeError::IeLength { ie_type }));
        };
        let ie_type = u16::from_be_bytes([hdr[field::TYPE.start], hdr[field::TYPE.start + 1]]);
        let len = u16::from_be_bytes([hdr[field::LENGTH.start], hdr[field::LENGTH.start + 1]]);
        let end = HEADER_LEN + len as usize;
        let Some(value) = buf.get(HEADER_LEN..end) else {
            return Some(Err(DecodeError::IeLength { ie_type }));
        };
        let (enterprise_id, value) = if ie_type & ENTERPRISE_BIT != 0 {
            match value {
                [a, b, rest @ ..] => (Some(u16::from_be_bytes([*a, *b])), rest),
                _ => return Some(Err(DecodeError::IeIncorrect { ie_type })),
            }
        } else {
            (None, value)
        };
        self.buf = &buf[end..];
        Some(Ok(RawIeRef {
            ie_type,
            enterprise_id,
            value,
        }))
    }
}

/// An IE kept as bytes: unknown, not decoded here, or vendor-specific.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawIe {
    pub ie_type: u16,
    pub enterprise_id: Option<u16>,
    pub value: Vec<u8>,
}

mod values;
pub use values::*;
mod codec;

/// A grouped IE: its type and its member IEs in wire order (section 7.5, 8.1.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grouped {
    pub ie_type: u16,
    pub ies: Vec<Ie>,
}

impl Grouped {
    pub fn new(ie_type: u16, ies: Vec<Ie>) -> Self {
        Grouped { ie_type, ies }
    }

    /// First member of type `t`.
    pub fn get(&self, t: u16) -> Option<&Ie> {
        self.ies.iter().find(|i| i.ie_type() == t)
    }

    /// All members of type `t`.
    pub fn all(&self, t: u16) -> impl Iterator<Item = &Ie> {
        self.ies.iter().filter(move |i| i.ie_type() == t)
    }

    /// PDR ID member, if any.
    pub fn pdr_id(&self) -> Option<u16> {
        match self.get(ie_type::PDR_ID) {
            Some(Ie::PdrId(v)) => Some(*v),
            _ => None,
        }
    }

    /// FAR ID member, if any.
    pub fn far_id(&self) -> Option<u32> {
        match self.get(ie_type::FAR_ID) {
            Some(Ie::FarId(v)) => Some(*v),
            _ => None,
        }
    }

    /// Grouped member of type `t`, if any.
    pub fn group(&self, t: u16) -> Option<&Grouped> {
        match self.get(t) {
            Some(Ie::Grouped(g)) => Some(g),
            _ => None,
        }
    }

    /// Decode the member list of a grouped IE of type `ie_type` found at nesting `depth`
    /// (1 for a message's own grouped IEs), and check its mandatory members.
    pub fn parse(ie_type: u16, value: &[u8], depth: usize) -> Result<Grouped, DecodeError> {
        if depth > MAX_DEPTH {
            return Err(DecodeError::NestingTooDeep { ie_type });
        }
        let ies = parse_list(value, depth)?;
        let g = Grouped { ie_type, ies };
        for &m in ie_type::mandatory_members(ie_type) {
            if g.get(m).is_none() {
                return Err(DecodeError::MandatoryIeMissing { ie_type: m });
            }
        }
        Ok(g)
    }
}

/// Decode every IE of `buf`; grouped members are decoded at `depth + 1`.
pub fn parse_list(buf: &[u8], depth: usize) -> Result<Vec<Ie>, DecodeError> {
    // Headers first (a few loads each), so the list is one allocation of its final size,
    // not the 4, 8, 16... of a collect with no size hint.
    let mut ies = Vec::with_capacity(IeIter::new(buf).count());
    for raw in IeIter::new(buf) {
        ies.push(Ie::parse(raw?, depth)?);
    }
    Ok(ies)
}

/// A decoded IE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ie {
    Cause(u8),
    SourceInterface(u8),
    FTeid(FTeid),
    /// Network Instance, typically a DNN in label encoding (section 8.2.4); kept as bytes.
    NetworkInstance(Vec<u8>),
    SdfFilter(SdfFilter),
    GateStatus(GateStatus),
    Mbr(BitRate),
    Gbr(BitRate),
    Precedence(u32),
    VolumeThreshold(Volume),
    /// Seconds.
    TimeThreshold(u32),
    ReportingTriggers(Bitmap),
    ReportType(Bitmap),
    /// Type of the offending IE.
    OffendingIe(u16),
    DestinationInterface(u8),
    UpFunctionFeatures(Bitmap),
    ApplyAction(Bitmap),
    /// PFCPSMReq-Flags (section 8.2.58), see [`smreq_flags`].
    PfcpsmReqFlags(Bitmap),
    PdrId(u16),
    FSeid(FSeid),
    NodeId(NodeId),
    MeasurementMethod(Bitmap),
    UsageReportTrigger(Bitmap),
    /// Seconds.
    MeasurementPeriod(u32),
    VolumeMeasurement(Volume),
    /// Seconds.
    DurationMeasurement(u32),
    /// NTP seconds (RFC 5905 section 6, first 4 octets of the 64-bit timestamp).
    TimeOfFirstPacket(u32),
    TimeOfLastPacket(u32),
    VolumeQuota(Volume),
    /// Seconds (section 8.2.51).
    TimeQuota(u32),
    OuterHeaderCreation(OuterHeaderCreation),
    UeIpAddress(UeIpAddress),
    OuterHeaderRemoval(OuterHeaderRemoval),
    /// NTP seconds.
    RecoveryTimeStamp(u32),
    UrSeqn(u32),
    FarId(u32),
    QerId(u32),
    UrrId(u32),
    BarId(u8),
    /// NTP seconds (section 8.2.83).
    StartTime(u32),
    /// NTP seconds (section 8.2.84).
    EndTime(u32),
    FailedRuleId(FailedRuleId),
    /// Section 8.2.112.
    SuggestedBufferingPacketsCount(u8),
    /// 6-bit QoS Flow Identifier.
    Qfi(u8),
    /// Query URR Reference (section 8.2.98): the CP function's tag for one query, echoed in
    /// the usage reports that answer it.
    QueryUrrReference(u32),
    NodeReportType(Bitmap),
    RemoteGtpuPeer(RemoteGtpuPeer),
    Grouped(Grouped),
    Raw(RawIe),
}

#[cfg(test)]
mod tests;
