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

use crate::error::{DecodeError, EmitError};
use std::net::{Ipv4Addr, Ipv6Addr};

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
pub mod ie_type {
    pub const CREATE_PDR: u16 = 1;
    pub const PDI: u16 = 2;
    pub const CREATE_FAR: u16 = 3;
    pub const FORWARDING_PARAMETERS: u16 = 4;
    pub const CREATE_URR: u16 = 6;
    pub const CREATE_QER: u16 = 7;
    pub const CREATED_PDR: u16 = 8;
    pub const UPDATE_PDR: u16 = 9;
    pub const UPDATE_FAR: u16 = 10;
    pub const UPDATE_FORWARDING_PARAMETERS: u16 = 11;
    /// Update BAR in Session Report Response (table 7.5.9.2-1).
    pub const UPDATE_BAR_SRR: u16 = 12;
    pub const UPDATE_URR: u16 = 13;
    pub const UPDATE_QER: u16 = 14;
    pub const REMOVE_PDR: u16 = 15;
    pub const REMOVE_FAR: u16 = 16;
    pub const REMOVE_URR: u16 = 17;
    pub const REMOVE_QER: u16 = 18;
    pub const CAUSE: u16 = 19;
    pub const SOURCE_INTERFACE: u16 = 20;
    pub const F_TEID: u16 = 21;
    pub const NETWORK_INSTANCE: u16 = 22;
    pub const SDF_FILTER: u16 = 23;
    pub const GATE_STATUS: u16 = 25;
    pub const MBR: u16 = 26;
    pub const GBR: u16 = 27;
    pub const PRECEDENCE: u16 = 29;
    pub const VOLUME_THRESHOLD: u16 = 31;
    pub const TIME_THRESHOLD: u16 = 32;
    pub const REPORTING_TRIGGERS: u16 = 37;
    pub const REPORT_TYPE: u16 = 39;
    pub const OFFENDING_IE: u16 = 40;
    pub const DESTINATION_INTERFACE: u16 = 42;
    pub const UP_FUNCTION_FEATURES: u16 = 43;
    pub const APPLY_ACTION: u16 = 44;
    /// PFCPSMReq-Flags (section 8.2.58).
    pub const PFCPSMREQ_FLAGS: u16 = 49;
    pub const PDR_ID: u16 = 56;
    pub const F_SEID: u16 = 57;
    pub const NODE_ID: u16 = 60;
    pub const MEASUREMENT_METHOD: u16 = 62;
    pub const USAGE_REPORT_TRIGGER: u16 = 63;
    pub const MEASUREMENT_PERIOD: u16 = 64;
    pub const VOLUME_MEASUREMENT: u16 = 66;
    pub const DURATION_MEASUREMENT: u16 = 67;
    pub const TIME_OF_FIRST_PACKET: u16 = 69;
    pub const TIME_OF_LAST_PACKET: u16 = 70;
    pub const VOLUME_QUOTA: u16 = 73;
    /// Time Quota (section 8.2.51), seconds.
    pub const TIME_QUOTA: u16 = 74;
    pub const START_TIME: u16 = 75;
    pub const END_TIME: u16 = 76;
    /// Query URR in Session Modification Request (table 7.5.4.10-1).
    pub const QUERY_URR: u16 = 77;
    /// Usage Report in Session Modification Response (table 7.5.5.2-1).
    pub const USAGE_REPORT_SMR: u16 = 78;
    /// Usage Report in Session Deletion Response (table 7.5.7.2-1).
    pub const USAGE_REPORT_SDR: u16 = 79;
    /// Usage Report in Session Report Request (table 7.5.8.3-1).
    pub const USAGE_REPORT_SRR: u16 = 80;
    pub const URR_ID: u16 = 81;
    pub const DOWNLINK_DATA_REPORT: u16 = 83;
    pub const OUTER_HEADER_CREATION: u16 = 84;
    pub const CREATE_BAR: u16 = 85;
    /// Update BAR in Session Modification Request (table 7.5.4.14-1).
    pub const UPDATE_BAR: u16 = 86;
    pub const REMOVE_BAR: u16 = 87;
    pub const BAR_ID: u16 = 88;
    pub const UE_IP_ADDRESS: u16 = 93;
    pub const OUTER_HEADER_REMOVAL: u16 = 95;
    pub const RECOVERY_TIME_STAMP: u16 = 96;
    /// Node Report Type (section 8.2.69), see [`super::node_report_type`].
    pub const NODE_REPORT_TYPE: u16 = 101;
    /// User Plane Path Failure Report (table 7.4.5.1.2-1).
    pub const USER_PLANE_PATH_FAILURE_REPORT: u16 = 102;
    /// Remote GTP-U Peer (section 8.2.70).
    pub const REMOTE_GTPU_PEER: u16 = 103;
    pub const UR_SEQN: u16 = 104;
    pub const FAR_ID: u16 = 108;
    pub const QER_ID: u16 = 109;
    pub const FAILED_RULE_ID: u16 = 114;
    pub const QFI: u16 = 124;
    /// Query URR Reference (section 8.2.98).
    pub const QUERY_URR_REFERENCE: u16 = 125;
    pub const SUGGESTED_BUFFERING_PACKETS_COUNT: u16 = 140;
    /// User Plane Path Recovery Report (table 7.4.5.1.3-1).
    pub const USER_PLANE_PATH_RECOVERY_REPORT: u16 = 187;

    /// Whether `t` is one of the grouped IEs decoded as [`super::Grouped`].
    pub const fn is_grouped(t: u16) -> bool {
        matches!(
            t,
            CREATE_PDR
                | PDI
                | CREATE_FAR
                | FORWARDING_PARAMETERS
                | CREATE_URR
                | CREATE_QER
                | CREATED_PDR
                | UPDATE_PDR
                | UPDATE_FAR
                | UPDATE_FORWARDING_PARAMETERS
                | UPDATE_URR
                | UPDATE_QER
                | REMOVE_PDR
                | REMOVE_FAR
                | REMOVE_URR
                | REMOVE_QER
                | USAGE_REPORT_SMR
                | USAGE_REPORT_SDR
                | USAGE_REPORT_SRR
                | DOWNLINK_DATA_REPORT
                | CREATE_BAR
                | REMOVE_BAR
                | UPDATE_BAR
                | UPDATE_BAR_SRR
                | QUERY_URR
                | USER_PLANE_PATH_FAILURE_REPORT
                | USER_PLANE_PATH_RECOVERY_REPORT
        )
    }

    /// Mandatory members of a grouped IE (section 7.5 tables), checked on decode.
    pub const fn mandatory_members(t: u16) -> &'static [u16] {
        match t {
            CREATE_PDR => &[PDR_ID, PRECEDENCE, PDI], // table 7.5.2.2-1
            PDI => &[SOURCE_INTERFACE],               // table 7.5.2.2-2
            CREATE_FAR => &[FAR_ID, APPLY_ACTION],    // table 7.5.2.3-1
            FORWARDING_PARAMETERS => &[DESTINATION_INTERFACE], // table 7.5.2.3-2
            CREATE_URR => &[URR_ID, MEASUREMENT_METHOD, REPORTING_TRIGGERS], // 7.5.2.4-1
            CREATE_QER => &[QER_ID, GATE_STATUS],     // table 7.5.2.5-1
            CREATED_PDR | UPDATE_PDR | REMOVE_PDR | DOWNLINK_DATA_REPORT => &[PDR_ID],
            UPDATE_FAR | REMOVE_FAR => &[FAR_ID],
            UPDATE_URR | REMOVE_URR | QUERY_URR => &[URR_ID],
            UPDATE_QER | REMOVE_QER => &[QER_ID],
            USAGE_REPORT_SMR | USAGE_REPORT_SDR | USAGE_REPORT_SRR => {
                &[URR_ID, UR_SEQN, USAGE_REPORT_TRIGGER]
            }
            CREATE_BAR | REMOVE_BAR | UPDATE_BAR | UPDATE_BAR_SRR => &[BAR_ID],
            _ => &[],
        }
    }
}

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

/// Flag octets of a bitmap IE, octet 5 in bits 0-7, octet 6 in bits 8-15, ... (Reporting
/// Triggers, Usage Report Trigger, UP Function Features, Apply Action, Measurement Method,
/// Report Type). Octets beyond the 8th are ignored; emitted with as many octets as the highest
/// set bit needs, at least the Release 16 length of the IE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bitmap(pub u64);

impl Bitmap {
    pub fn contains(&self, bit: u64) -> bool {
        self.0 & bit == bit
    }
}

/// Apply Action bits (section 8.2.26).
pub mod apply_action {
    pub const DROP: u64 = 0x01;
    pub const FORW: u64 = 0x02;
    pub const BUFF: u64 = 0x04;
    pub const NOCP: u64 = 0x08;
    pub const DUPL: u64 = 0x10;
}

/// PFCPSMReq-Flags bits (section 8.2.58).
pub mod smreq_flags {
    /// Drop Buffered Packets.
    pub const DROBU: u64 = 0x01;
    /// Send End Marker Packets (in Update Forwarding Parameters, section 5.2.2.3).
    pub const SNDEM: u64 = 0x02;
    /// Query All URRs.
    pub const QAURR: u64 = 0x04;
}

/// Node Report Type bits (section 8.2.69).
pub mod node_report_type {
    /// User Plane Path Failure Report.
    pub const UPFR: u64 = 0x01;
    /// User Plane Path Recovery Report.
    pub const UPRR: u64 = 0x02;
}

/// Report Type bits (section 8.2.21).
pub mod report_type {
    pub const DLDR: u64 = 0x01;
    pub const USAR: u64 = 0x02;
    pub const ERIR: u64 = 0x04;
    pub const UPIR: u64 = 0x08;
}

/// Measurement Method bits (section 8.2.40).
pub mod measurement_method {
    pub const DURAT: u64 = 0x01;
    pub const VOLUM: u64 = 0x02;
    pub const EVENT: u64 = 0x04;
}

/// Reporting Triggers bits (section 8.2.19), octet 5 in bits 0-7, octet 6 in bits 8-15.
pub mod reporting_triggers {
    pub const PERIO: u64 = 0x01;
    pub const VOLTH: u64 = 0x02;
    pub const TIMTH: u64 = 0x04;
    pub const VOLQU: u64 = 0x0100;
    pub const TIMQU: u64 = 0x0200;
}

/// Usage Report Trigger bits (section 8.2.41), octet 5 in bits 0-7, octet 6 in bits 8-15.
pub mod usage_report_trigger {
    pub const PERIO: u64 = 0x01;
    pub const VOLTH: u64 = 0x02;
    pub const TIMTH: u64 = 0x04;
    /// Immediate report (Query URR).
    pub const IMMER: u64 = 0x80;
    pub const VOLQU: u64 = 0x0100;
    pub const TIMQU: u64 = 0x0200;
    /// Termination report (Remove URR, session deletion).
    pub const TERMR: u64 = 0x0800;
}

/// Failed Rule ID (section 8.2.80): the rule whose creation or modification failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedRuleId {
    Pdr(u16),
    Far(u32),
    Qer(u32),
    Urr(u32),
    Bar(u8),
}

/// F-TEID (section 8.2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FTeid {
    /// CH = 0: TEID and at least one address.
    Assigned {
        teid: u32,
        ipv4: Option<Ipv4Addr>,
        ipv6: Option<Ipv6Addr>,
    },
    /// CH = 1: the UP function allocates the TEID for the flagged address families;
    /// `choose_id` (CHID) lets several PDRs share the allocation.
    Choose {
        v4: bool,
        v6: bool,
        choose_id: Option<u8>,
    },
}

/// F-SEID (section 8.2.37).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FSeid {
    pub seid: u64,
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
}

/// Remote GTP-U Peer (section 8.2.70): a GTP-U peer address, with the Destination Interface
/// and Network Instance of the path when given.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RemoteGtpuPeer {
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
    /// Destination Interface value (section 8.2.24).
    pub destination_interface: Option<u8>,
    /// Network Instance (section 8.2.4), as bytes.
    pub network_instance: Option<Vec<u8>>,
}

/// Node ID (section 8.2.38).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeId {
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
    /// FQDN in DNS label encoding (RFC 1035 section 3.1, no trailing root label); see
    /// [`NodeId::fqdn`] and [`NodeId::fqdn_to_string`].
    Fqdn(Vec<u8>),
}

impl NodeId {
    /// Encode a dotted name as labels.
    pub fn fqdn(name: &str) -> NodeId {
        NodeId::Fqdn(encode_labels(name))
    }

    /// Dotted form of an FQDN Node ID (lossy on malformed labels).
    pub fn fqdn_to_string(&self) -> Option<String> {
        match self {
            NodeId::Fqdn(b) => Some(decode_labels(b)),
            _ => None,
        }
    }
}

/// DNS label encoding of a dotted name (labels over 63 octets are truncated).
pub fn encode_labels(name: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(name.len() + 1);
    for l in name.split('.').filter(|l| !l.is_empty()) {
        let l = &l.as_bytes()[..l.len().min(63)];
        v.push(l.len() as u8);
        v.extend_from_slice(l);
    }
    v
}

/// Dotted form of DNS labels; a label running past the end is cut short.
pub fn decode_labels(b: &[u8]) -> String {
    let mut out = String::new();
    let mut rest = b;
    while let [n, tail @ ..] = rest {
        let n = (*n as usize).min(tail.len());
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(&String::from_utf8_lossy(&tail[..n]));
        rest = &tail[n..];
    }
    out
}

/// SDF Filter (section 8.2.5).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SdfFilter {
    /// FD: IPFilterRule of RFC 6733 / TS 29.212, e.g. `permit out ip from any to assigned`.
    pub flow_description: Option<Vec<u8>>,
    /// TTC: ToS / Traffic Class octet and mask octet.
    pub tos_traffic_class: Option<u16>,
    /// SPI: Security Parameter Index.
    pub spi: Option<u32>,
    /// FL: 20-bit IPv6 flow label (3 octets on the wire).
    pub flow_label: Option<u32>,
    /// BID: SDF Filter ID.
    pub sdf_filter_id: Option<u32>,
}

/// Gate Status (section 8.2.7): 0 = open, 1 = closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GateStatus {
    pub ul: u8,
    pub dl: u8,
}

/// MBR / GBR (sections 8.2.8 / 8.2.9): 40-bit kbps values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BitRate {
    pub ul: u64,
    pub dl: u64,
}

/// Volume Threshold / Volume Quota / Volume Measurement (sections 8.2.13, 8.2.50, 8.2.44):
/// octets (and, in Volume Measurement, packets, Release 16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Volume {
    pub total: Option<u64>,
    pub ul: Option<u64>,
    pub dl: Option<u64>,
    pub total_packets: Option<u64>,
    pub ul_packets: Option<u64>,
    pub dl_packets: Option<u64>,
}

/// Outer Header Creation (section 8.2.56).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OuterHeaderCreation {
    /// Description octets 5-6 (see [`ohc`]); decides which fields are on the wire.
    pub description: u16,
    pub teid: Option<u32>,
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
    pub port: Option<u16>,
    /// 3-octet C-TAG (flags + VID).
    pub c_tag: Option<u32>,
    /// 3-octet S-TAG.
    pub s_tag: Option<u32>,
}

/// Outer Header Creation Description bits: octet 5 in bits 8-15, octet 6 in bits 0-7, as the
/// two octets read big-endian.
pub mod ohc {
    pub const GTPU_UDP_IPV4: u16 = 0x0100;
    pub const GTPU_UDP_IPV6: u16 = 0x0200;
    pub const UDP_IPV4: u16 = 0x0400;
    pub const UDP_IPV6: u16 = 0x0800;
    pub const IPV4: u16 = 0x1000;
    pub const IPV6: u16 = 0x2000;
    pub const C_TAG: u16 = 0x4000;
    pub const S_TAG: u16 = 0x8000;
    pub const N19: u16 = 0x0001;
    pub const N6: u16 = 0x0002;
    pub const TEID_PRESENT: u16 = GTPU_UDP_IPV4 | GTPU_UDP_IPV6;
    pub const IPV4_PRESENT: u16 = GTPU_UDP_IPV4 | UDP_IPV4 | IPV4;
    pub const IPV6_PRESENT: u16 = GTPU_UDP_IPV6 | UDP_IPV6 | IPV6;
    pub const PORT_PRESENT: u16 = UDP_IPV4 | UDP_IPV6;
}

/// UE IP Address (section 8.2.62).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UeIpAddress {
    /// S/D: `true` = destination address.
    pub sd: bool,
    /// CHV4: the UP function chooses the IPv4 address.
    pub chv4: bool,
    /// CHV6: the UP function chooses the IPv6 prefix.
    pub chv6: bool,
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
    /// IPv6D: IPv6 Prefix Delegation Bits.
    pub ipv6_prefix_delegation_bits: Option<u8>,
    /// IP6PL: IPv6 Prefix Length.
    pub ipv6_prefix_length: Option<u8>,
}

/// Outer Header Removal (section 8.2.64).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OuterHeaderRemoval {
    /// 0 = GTP-U/UDP/IPv4, 1 = GTP-U/UDP/IPv6, 2 = UDP/IPv4, ... 6 = GTP-U/UDP/IP.
    pub description: u8,
    /// GTP-U Extension Header Deletion octet (bit 1: PDU Session Container).
    pub ext_header_deletion: Option<u8>,
}

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

/// Reader over an IE value; every accessor returns `None` past the end.
struct Rd<'a>(&'a [u8]);

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn be(&mut self, n: usize) -> Option<u64> {
        Some(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }
    fn u8(&mut self) -> Option<u8> {
        self.be(1).map(|v| v as u8)
    }
    fn u16(&mut self) -> Option<u16> {
        self.be(2).map(|v| v as u16)
    }
    fn u32(&mut self) -> Option<u32> {
        self.be(4).map(|v| v as u32)
    }
    fn ipv4(&mut self) -> Option<Ipv4Addr> {
        self.u32().map(Ipv4Addr::from)
    }
    fn ipv6(&mut self) -> Option<Ipv6Addr> {
        let b: [u8; 16] = self.take(16)?.try_into().ok()?;
        Some(Ipv6Addr::from(b))
    }
    fn opt<T>(
        &mut self,
        present: bool,
        f: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Option<T>> {
        if present {
            f(self).map(Some)
        } else {
            Some(None)
        }
    }
}

fn put_be(out: &mut Vec<u8>, v: u64, n: usize) {
    out.extend_from_slice(&v.to_be_bytes()[8 - n..]);
}

fn parse_bitmap(v: &[u8]) -> Option<Bitmap> {
    if v.is_empty() {
        return None;
    }
    let mut x = 0u64;
    for (i, b) in v.iter().take(8).enumerate() {
        x |= (*b as u64) << (8 * i);
    }
    Some(Bitmap(x))
}

fn emit_bitmap(out: &mut Vec<u8>, b: Bitmap, min_len: usize) {
    let used = 8 - (b.0.leading_zeros() as usize / 8);
    for i in 0..used.max(min_len) {
        out.push((b.0 >> (8 * i)) as u8);
    }
}

fn parse_volume(v: &[u8], mask: u8) -> Option<Volume> {
    let mut r = Rd(v);
    let f = r.u8()? & mask;
    Some(Volume {
        total: r.opt(f & 0x01 != 0, |r| r.be(8))?,
        ul: r.opt(f & 0x02 != 0, |r| r.be(8))?,
        dl: r.opt(f & 0x04 != 0, |r| r.be(8))?,
        total_packets: r.opt(f & 0x08 != 0, |r| r.be(8))?,
        ul_packets: r.opt(f & 0x10 != 0, |r| r.be(8))?,
        dl_packets: r.opt(f & 0x20 != 0, |r| r.be(8))?,
    })
}

fn emit_volume(out: &mut Vec<u8>, v: &Volume) {
    let all = [
        v.total,
        v.ul,
        v.dl,
        v.total_packets,
        v.ul_packets,
        v.dl_packets,
    ];
    let mut f = 0u8;
    for (i, x) in all.iter().enumerate() {
        if x.is_some() {
            f |= 1 << i;
        }
    }
    out.push(f);
    for x in all.iter().flatten() {
        put_be(out, *x, 8);
    }
}

fn parse_fteid(v: &[u8]) -> Option<FTeid> {
    let mut r = Rd(v);
    let f = r.u8()?;
    let (v4, v6, ch, chid) = (f & 1 != 0, f & 2 != 0, f & 4 != 0, f & 8 != 0);
    if ch {
        Some(FTeid::Choose {
            v4,
            v6,
            choose_id: r.opt(chid, Rd::u8)?,
        })
    } else {
        let teid = r.u32()?;
        let ipv4 = r.opt(v4, Rd::ipv4)?;
        let ipv6 = r.opt(v6, Rd::ipv6)?;
        if ipv4.is_none() && ipv6.is_none() {
            return None; // section 8.2.3: at least one of V4 and V6 shall be set
        }
        Some(FTeid::Assigned { teid, ipv4, ipv6 })
    }
}

fn parse_sdf(v: &[u8]) -> Option<SdfFilter> {
    let mut r = Rd(v);
    let f = r.u8()?;
    r.u8()?; // spare octet
    Some(SdfFilter {
        flow_description: r.opt(f & 1 != 0, |r| {
            let n = r.u16()? as usize;
            r.take(n).map(<[u8]>::to_vec)
        })?,
        tos_traffic_class: r.opt(f & 2 != 0, Rd::u16)?,
        spi: r.opt(f & 4 != 0, Rd::u32)?,
        flow_label: r.opt(f & 8 != 0, |r| r.be(3).map(|x| x as u32))?,
        sdf_filter_id: r.opt(f & 16 != 0, Rd::u32)?,
    })
}

fn parse_ohc(v: &[u8]) -> Option<OuterHeaderCreation> {
    let mut r = Rd(v);
    let d = r.u16()?;
    Some(OuterHeaderCreation {
        description: d,
        teid: r.opt(d & ohc::TEID_PRESENT != 0, Rd::u32)?,
        ipv4: r.opt(d & ohc::IPV4_PRESENT != 0, Rd::ipv4)?,
        ipv6: r.opt(d & ohc::IPV6_PRESENT != 0, Rd::ipv6)?,
        port: r.opt(d & ohc::PORT_PRESENT != 0, Rd::u16)?,
        c_tag: r.opt(d & ohc::C_TAG != 0, |r| r.be(3).map(|x| x as u32))?,
        s_tag: r.opt(d & ohc::S_TAG != 0, |r| r.be(3).map(|x| x as u32))?,
    })
}

fn parse_ueip(v: &[u8]) -> Option<UeIpAddress> {
    let mut r = Rd(v);
    let f = r.u8()?;
    Some(UeIpAddress {
        sd: f & 0x04 != 0,
        chv4: f & 0x10 != 0,
        chv6: f & 0x20 != 0,
        ipv4: r.opt(f & 0x02 != 0, Rd::ipv4)?,
        ipv6: r.opt(f & 0x01 != 0, Rd::ipv6)?,
        ipv6_prefix_delegation_bits: r.opt(f & 0x08 != 0, Rd::u8)?,
        ipv6_prefix_length: r.opt(f & 0x40 != 0, Rd::u8)?,
    })
}

/// Section 8.2.70: flags (V6 0x01, V4 0x02, DI 0x04, NI 0x08), IPv4, IPv6, then the
/// Destination Interface and Network Instance each behind a 2-octet length.
fn parse_remote_gtpu_peer(v: &[u8]) -> Option<RemoteGtpuPeer> {
    let mut r = Rd(v);
    let f = r.u8()?;
    let ipv4 = r.opt(f & 0x02 != 0, Rd::ipv4)?;
    let ipv6 = r.opt(f & 0x01 != 0, Rd::ipv6)?;
    let destination_interface = if f & 0x04 != 0 {
        let n = r.be(2)? as usize;
        let d = r.take(n)?;
        Some(*d.first()? & 0x0f)
    } else {
        None
    };
    let network_instance = if f & 0x08 != 0 {
        let n = r.be(2)? as usize;
        Some(r.take(n)?.to_vec())
    } else {
        None
    };
    Some(RemoteGtpuPeer {
        ipv4,
        ipv6,
        destination_interface,
        network_instance,
    })
}

fn parse_node_id(v: &[u8]) -> Option<NodeId> {
    let mut r = Rd(v);
    match r.u8()? & 0x0f {
        0 => r.ipv4().map(NodeId::Ipv4),
        1 => r.ipv6().map(NodeId::Ipv6),
        2 if !r.0.is_empty() => Some(NodeId::Fqdn(r.0.to_vec())),
        _ => None,
    }
}

impl Ie {
    /// The IE type (section 8.1.2).
    pub fn ie_type(&self) -> u16 {
        use ie_type as t;
        match self {
            Ie::Cause(_) => t::CAUSE,
            Ie::SourceInterface(_) => t::SOURCE_INTERFACE,
            Ie::FTeid(_) => t::F_TEID,
            Ie::NetworkInstance(_) => t::NETWORK_INSTANCE,
            Ie::SdfFilter(_) => t::SDF_FILTER,
            Ie::GateStatus(_) => t::GATE_STATUS,
            Ie::Mbr(_) => t::MBR,
            Ie::Gbr(_) => t::GBR,
            Ie::Precedence(_) => t::PRECEDENCE,
            Ie::VolumeThreshold(_) => t::VOLUME_THRESHOLD,
            Ie::TimeThreshold(_) => t::TIME_THRESHOLD,
            Ie::ReportingTriggers(_) => t::REPORTING_TRIGGERS,
            Ie::ReportType(_) => t::REPORT_TYPE,
            Ie::OffendingIe(_) => t::OFFENDING_IE,
            Ie::DestinationInterface(_) => t::DESTINATION_INTERFACE,
            Ie::UpFunctionFeatures(_) => t::UP_FUNCTION_FEATURES,
            Ie::ApplyAction(_) => t::APPLY_ACTION,
            Ie::PfcpsmReqFlags(_) => t::PFCPSMREQ_FLAGS,
            Ie::PdrId(_) => t::PDR_ID,
            Ie::FSeid(_) => t::F_SEID,
            Ie::NodeId(_) => t::NODE_ID,
            Ie::MeasurementMethod(_) => t::MEASUREMENT_METHOD,
            Ie::UsageReportTrigger(_) => t::USAGE_REPORT_TRIGGER,
            Ie::MeasurementPeriod(_) => t::MEASUREMENT_PERIOD,
            Ie::VolumeMeasurement(_) => t::VOLUME_MEASUREMENT,
            Ie::DurationMeasurement(_) => t::DURATION_MEASUREMENT,
            Ie::TimeOfFirstPacket(_) => t::TIME_OF_FIRST_PACKET,
            Ie::TimeOfLastPacket(_) => t::TIME_OF_LAST_PACKET,
            Ie::VolumeQuota(_) => t::VOLUME_QUOTA,
            Ie::TimeQuota(_) => t::TIME_QUOTA,
            Ie::OuterHeaderCreation(_) => t::OUTER_HEADER_CREATION,
            Ie::UeIpAddress(_) => t::UE_IP_ADDRESS,
            Ie::OuterHeaderRemoval(_) => t::OUTER_HEADER_REMOVAL,
            Ie::RecoveryTimeStamp(_) => t::RECOVERY_TIME_STAMP,
            Ie::UrSeqn(_) => t::UR_SEQN,
            Ie::FarId(_) => t::FAR_ID,
            Ie::QerId(_) => t::QER_ID,
            Ie::UrrId(_) => t::URR_ID,
            Ie::BarId(_) => t::BAR_ID,
            Ie::StartTime(_) => t::START_TIME,
            Ie::EndTime(_) => t::END_TIME,
            Ie::FailedRuleId(_) => t::FAILED_RULE_ID,
            Ie::SuggestedBufferingPacketsCount(_) => t::SUGGESTED_BUFFERING_PACKETS_COUNT,
            Ie::Qfi(_) => t::QFI,
            Ie::QueryUrrReference(_) => t::QUERY_URR_REFERENCE,
            Ie::NodeReportType(_) => t::NODE_REPORT_TYPE,
            Ie::RemoteGtpuPeer(_) => t::REMOTE_GTPU_PEER,
            Ie::Grouped(g) => g.ie_type,
            Ie::Raw(r) => r.ie_type,
        }
    }

    /// Decode one TLV found at nesting `depth` (0 for a message's own IEs). Unknown and
    /// vendor-specific IEs become [`Ie::Raw`]; a known IE whose value does not decode is
    /// `IeIncorrect`.
    pub fn parse(raw: RawIeRef<'_>, depth: usize) -> Result<Ie, DecodeError> {
        use ie_type as t;
        let ty = raw.ie_type;
        let v = raw.value;
        if raw.enterprise_id.is_some() {
            return Ok(Ie::Raw(RawIe {
                ie_type: ty,
                enterprise_id: raw.enterprise_id,
                value: v.to_vec(),
            }));
        }
        if t::is_grouped(ty) {
            return Grouped::parse(ty, v, depth + 1).map(Ie::Grouped);
        }
        let mut r = Rd(v);
        let ie = match ty {
            t::CAUSE => r.u8().map(Ie::Cause),
            t::SOURCE_INTERFACE => r.u8().map(|x| Ie::SourceInterface(x & 0x0f)),
            t::F_TEID => parse_fteid(v).map(Ie::FTeid),
            t::NETWORK_INSTANCE => Some(Ie::NetworkInstance(v.to_vec())),
            t::SDF_FILTER => parse_sdf(v).map(Ie::SdfFilter),
            t::GATE_STATUS => r.u8().map(|x| {
                Ie::GateStatus(GateStatus {
                    ul: (x >> 2) & 3,
                    dl: x & 3,
                })
            }),
            t::MBR | t::GBR => (|| {
                let b = BitRate {
                    ul: r.be(5)?,
                    dl: r.be(5)?,
                };
                Some(if ty == t::MBR { Ie::Mbr(b) } else { Ie::Gbr(b) })
            })(),
            t::PRECEDENCE => r.u32().map(Ie::Precedence),
            t::VOLUME_THRESHOLD => parse_volume(v, 0x07).map(Ie::VolumeThreshold),
            t::VOLUME_QUOTA => parse_volume(v, 0x07).map(Ie::VolumeQuota),
            t::VOLUME_MEASUREMENT => parse_volume(v, 0x3f).map(Ie::VolumeMeasurement),
            t::TIME_THRESHOLD => r.u32().map(Ie::TimeThreshold),
            t::TIME_QUOTA => r.u32().map(Ie::TimeQuota),
            t::QUERY_URR_REFERENCE => r.u32().map(Ie::QueryUrrReference),
            t::NODE_REPORT_TYPE => parse_bitmap(v).map(Ie::NodeReportType),
            t::REMOTE_GTPU_PEER => parse_remote_gtpu_peer(v).map(Ie::RemoteGtpuPeer),
            t::REPORTING_TRIGGERS => parse_bitmap(v).map(Ie::ReportingTriggers),
            t::REPORT_TYPE => parse_bitmap(v).map(Ie::ReportType),
            t::UP_FUNCTION_FEATURES => parse_bitmap(v).map(Ie::UpFunctionFeatures),
            t::APPLY_ACTION => parse_bitmap(v).map(Ie::ApplyAction),
            t::PFCPSMREQ_FLAGS => parse_bitmap(v).map(Ie::PfcpsmReqFlags),
            t::MEASUREMENT_METHOD => parse_bitmap(v).map(Ie::MeasurementMethod),
            t::USAGE_REPORT_TRIGGER => parse_bitmap(v).map(Ie::UsageReportTrigger),
            t::OFFENDING_IE => r.u16().map(Ie::OffendingIe),
            t::DESTINATION_INTERFACE => r.u8().map(|x| Ie::DestinationInterface(x & 0x0f)),
            t::PDR_ID => r.u16().map(Ie::PdrId),
            t::F_SEID => (|| {
                let f = r.u8()?;
                let seid = r.be(8)?;
                let ipv4 = r.opt(f & 2 != 0, Rd::ipv4)?;
                let ipv6 = r.opt(f & 1 != 0, Rd::ipv6)?;
                Some(Ie::FSeid(FSeid { seid, ipv4, ipv6 }))
            })(),
            t::NODE_ID => parse_node_id(v).map(Ie::NodeId),
            t::MEASUREMENT_PERIOD => r.u32().map(Ie::MeasurementPeriod),
            t::DURATION_MEASUREMENT => r.u32().map(Ie::DurationMeasurement),
            t::TIME_OF_FIRST_PACKET => r.u32().map(Ie::TimeOfFirstPacket),
            t::TIME_OF_LAST_PACKET => r.u32().map(Ie::TimeOfLastPacket),
            t::OUTER_HEADER_CREATION => parse_ohc(v).map(Ie::OuterHeaderCreation),
            t::UE_IP_ADDRESS => parse_ueip(v).map(Ie::UeIpAddress),
            t::OUTER_HEADER_REMOVAL => (|| {
                Some(Ie::OuterHeaderRemoval(OuterHeaderRemoval {
                    description: r.u8()?,
                    ext_header_deletion: r.u8(),
                }))
            })(),
            t::RECOVERY_TIME_STAMP => r.u32().map(Ie::RecoveryTimeStamp),
            t::UR_SEQN => r.u32().map(Ie::UrSeqn),
            t::FAR_ID => r.u32().map(Ie::FarId),
            t::QER_ID => r.u32().map(Ie::QerId),
            t::URR_ID => r.u32().map(Ie::UrrId),
            t::BAR_ID => r.u8().map(Ie::BarId),
            t::START_TIME => r.u32().map(Ie::StartTime),
            t::END_TIME => r.u32().map(Ie::EndTime),
            t::FAILED_RULE_ID => (|| {
                Some(Ie::FailedRuleId(match r.u8()? & 0x1f {
                    0 => FailedRuleId::Pdr(r.u16()?),
                    1 => FailedRuleId::Far(r.u32()?),
                    2 => FailedRuleId::Qer(r.u32()?),
                    3 => FailedRuleId::Urr(r.u32()?),
                    4 => FailedRuleId::Bar(r.u8()?),
                    _ => return None,
                }))
            })(),
            t::SUGGESTED_BUFFERING_PACKETS_COUNT => r.u8().map(Ie::SuggestedBufferingPacketsCount),
            t::QFI => r.u8().map(|x| Ie::Qfi(x & 0x3f)),
            _ => Some(Ie::Raw(RawIe {
                ie_type: ty,
                enterprise_id: None,
                value: v.to_vec(),
            })),
        };
        ie.ok_or(DecodeError::IeIncorrect { ie_type: ty })
    }

    /// Append the whole TLV to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<(), EmitError> {
        let ty = self.ie_type();
        let start = out.len();
        out.extend_from_slice(&ty.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        self.emit_value(out)?;
        let len = u16::try_from(out.len() - start - HEADER_LEN)
            .map_err(|_| EmitError::IeTooLong { ie_type: ty })?;
        out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
        Ok(())
    }

    fn emit_value(&self, out: &mut Vec<u8>) -> Result<(), EmitError> {
        match self {
            Ie::Cause(x) | Ie::BarId(x) | Ie::SuggestedBufferingPacketsCount(x) => out.push(*x),
            Ie::FailedRuleId(f) => {
                let (ty, v, n) = match *f {
                    FailedRuleId::Pdr(x) => (0, x as u64, 2),
                    FailedRuleId::Far(x) => (1, x as u64, 4),
                    FailedRuleId::Qer(x) => (2, x as u64, 4),
                    FailedRuleId::Urr(x) => (3, x as u64, 4),
                    FailedRuleId::Bar(x) => (4, x as u64, 1),
                };
                out.push(ty);
                put_be(out, v, n);
            }
            Ie::SourceInterface(x) | Ie::DestinationInterface(x) => out.push(x & 0x0f),
            Ie::Qfi(x) => out.push(x & 0x3f),
            Ie::FTeid(f) => match *f {
                FTeid::Assigned { teid, ipv4, ipv6 } => {
                    if ipv4.is_none() && ipv6.is_none() {
                        return Err(EmitError::FieldRange("F-TEID without address"));
                    }
                    out.push(ipv4.is_some() as u8 | (ipv6.is_some() as u8) << 1);
                    put_be(out, teid as u64, 4);
                    if let Some(a) = ipv4 {
                        out.extend_from_slice(&a.octets());
                    }
                    if let Some(a) = ipv6 {
                        out.extend_from_slice(&a.octets());
                    }
                }
                FTeid::Choose { v4, v6, choose_id } => {
                    out.push(v4 as u8 | (v6 as u8) << 1 | 4 | (choose_id.is_some() as u8) << 3);
                    out.extend(choose_id);
                }
            },
            Ie::NetworkInstance(v) => out.extend_from_slice(v),
            Ie::SdfFilter(s) => {
                let f = s.flow_description.is_some() as u8
                    | (s.tos_traffic_class.is_some() as u8) << 1
                    | (s.spi.is_some() as u8) << 2
                    | (s.flow_label.is_some() as u8) << 3
                    | (s.sdf_filter_id.is_some() as u8) << 4;
                out.extend_from_slice(&[f, 0]);
                if let Some(fd) = &s.flow_description {
                    let n = u16::try_from(fd.len()).map_err(|_| EmitError::IeTooLong {
                        ie_type: ie_type::SDF_FILTER,
                    })?;
                    out.extend_from_slice(&n.to_be_bytes());
                    out.extend_from_slice(fd);
                }
                if let Some(x) = s.tos_traffic_class {
                    put_be(out, x as u64, 2);
                }
                if let Some(x) = s.spi {
                    put_be(out, x as u64, 4);
                }
                if let Some(x) = s.flow_label {
                    if x > 0x00ff_ffff {
                        return Err(EmitError::FieldRange("flow label"));
                    }
                    put_be(out, x as u64, 3);
                }
                if let Some(x) = s.sdf_filter_id {
                    put_be(out, x as u64, 4);
                }
            }
            Ie::GateStatus(g) => out.push((g.ul & 3) << 2 | (g.dl & 3)),
            Ie::Mbr(b) | Ie::Gbr(b) => {
                if b.ul >> 40 != 0 || b.dl >> 40 != 0 {
                    return Err(EmitError::FieldRange("bit rate"));
                }
                put_be(out, b.ul, 5);
                put_be(out, b.dl, 5);
            }
            Ie::Precedence(x)
            | Ie::TimeThreshold(x)
            | Ie::TimeQuota(x)
            | Ie::QueryUrrReference(x)
            | Ie::MeasurementPeriod(x)
            | Ie::DurationMeasurement(x)
            | Ie::TimeOfFirstPacket(x)
            | Ie::TimeOfLastPacket(x)
            | Ie::RecoveryTimeStamp(x)
            | Ie::StartTime(x)
            | Ie::EndTime(x)
            | Ie::UrSeqn(x)
            | Ie::FarId(x)
            | Ie::QerId(x)
            | Ie::UrrId(x) => put_be(out, *x as u64, 4),
            Ie::VolumeThreshold(v) | Ie::VolumeQuota(v) => {
                if v.total_packets.is_some() || v.ul_packets.is_some() || v.dl_packets.is_some() {
                    return Err(EmitError::FieldRange(
                        "packet counts outside Volume Measurement",
                    ));
                }
                emit_volume(out, v)
            }
            Ie::VolumeMeasurement(v) => emit_volume(out, v),
            Ie::ReportingTriggers(b) | Ie::UsageReportTrigger(b) => emit_bitmap(out, *b, 3),
            Ie::UpFunctionFeatures(b) => emit_bitmap(out, *b, 6),
            Ie::ApplyAction(b) => emit_bitmap(out, *b, 2),
            Ie::PfcpsmReqFlags(b) => emit_bitmap(out, *b, 1),
            Ie::ReportType(b) | Ie::MeasurementMethod(b) | Ie::NodeReportType(b) => {
                emit_bitmap(out, *b, 1)
            }
            Ie::OffendingIe(x) | Ie::PdrId(x) => put_be(out, *x as u64, 2),
            Ie::RemoteGtpuPeer(p) => {
                out.push(
                    (p.network_instance.is_some() as u8) << 3
                        | (p.destination_interface.is_some() as u8) << 2
                        | (p.ipv4.is_some() as u8) << 1
                        | p.ipv6.is_some() as u8,
                );
                if let Some(a) = p.ipv4 {
                    out.extend_from_slice(&a.octets());
                }
                if let Some(a) = p.ipv6 {
                    out.extend_from_slice(&a.octets());
                }
                if let Some(d) = p.destination_interface {
                    put_be(out, 1, 2);
                    out.push(d & 0x0f);
                }
                if let Some(n) = &p.network_instance {
                    let len = u16::try_from(n.len())
                        .map_err(|_| EmitError::FieldRange("network instance"))?;
                    put_be(out, u64::from(len), 2);
                    out.extend_from_slice(n);
                }
            }
            Ie::FSeid(f) => {
                out.push((f.ipv4.is_some() as u8) << 1 | f.ipv6.is_some() as u8);
                put_be(out, f.seid, 8);
                if let Some(a) = f.ipv4 {
                    out.extend_from_slice(&a.octets());
                }
                if let Some(a) = f.ipv6 {
                    out.extend_from_slice(&a.octets());
                }
            }
            Ie::NodeId(n) => match n {
                NodeId::Ipv4(a) => {
                    out.push(0);
                    out.extend_from_slice(&a.octets());
                }
                NodeId::Ipv6(a) => {
                    out.push(1);
                    out.extend_from_slice(&a.octets());
                }
                NodeId::Fqdn(b) => {
                    if b.is_empty() {
                        return Err(EmitError::FieldRange("empty FQDN"));
                    }
                    out.push(2);
                    out.extend_from_slice(b);
                }
            },
            Ie::OuterHeaderCreation(o) => {
                let d = o.description;
                put_be(out, d as u64, 2);
                let missing = EmitError::FieldRange("outer header creation field");
                if d & ohc::TEID_PRESENT != 0 {
                    put_be(out, o.teid.ok_or(missing)? as u64, 4);
                }
                if d & ohc::IPV4_PRESENT != 0 {
                    out.extend_from_slice(&o.ipv4.ok_or(missing)?.octets());
                }
                if d & ohc::IPV6_PRESENT != 0 {
                    out.extend_from_slice(&o.ipv6.ok_or(missing)?.octets());
                }
                if d & ohc::PORT_PRESENT != 0 {
                    put_be(out, o.port.ok_or(missing)? as u64, 2);
                }
                for (bit, tag) in [(ohc::C_TAG, o.c_tag), (ohc::S_TAG, o.s_tag)] {
                    if d & bit != 0 {
                        let t = tag.ok_or(missing)?;
                        if t > 0x00ff_ffff {
                            return Err(missing);
                        }
                        put_be(out, t as u64, 3);
                    }
                }
            }
            Ie::UeIpAddress(u) => {
                let f = u.ipv6.is_some() as u8
                    | (u.ipv4.is_some() as u8) << 1
                    | (u.sd as u8) << 2
                    | (u.ipv6_prefix_delegation_bits.is_some() as u8) << 3
                    | (u.chv4 as u8) << 4
                    | (u.chv6 as u8) << 5
                    | (u.ipv6_prefix_length.is_some() as u8) << 6;
                out.push(f);
                if let Some(a) = u.ipv4 {
                    out.extend_from_slice(&a.octets());
                }
                if let Some(a) = u.ipv6 {
                    out.extend_from_slice(&a.octets());
                }
                out.extend(u.ipv6_prefix_delegation_bits);
                out.extend(u.ipv6_prefix_length);
            }
            Ie::OuterHeaderRemoval(o) => {
                out.push(o.description);
                out.extend(o.ext_header_deletion);
            }
            Ie::Grouped(g) => {
                for ie in &g.ies {
                    ie.emit(out)?;
                }
            }
            Ie::Raw(r) => {
                if let Some(e) = r.enterprise_id {
                    if r.ie_type & ENTERPRISE_BIT == 0 {
                        return Err(EmitError::FieldRange("enterprise ID on a 3GPP IE type"));
                    }
                    out.extend_from_slice(&e.to_be_bytes());
                } else if r.ie_type & ENTERPRISE_BIT != 0 {
                    return Err(EmitError::FieldRange("vendor IE without enterprise ID"));
                }
                out.extend_from_slice(&r.value);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(ie: Ie) -> Vec<u8> {
        let mut v = Vec::new();
        ie.emit(&mut v).unwrap();
        let back = parse_list(&v, 0).unwrap();
        assert_eq!(back, vec![ie]);
        v
    }

    #[test]
    fn leaf_round_trips() {
        let a4 = Ipv4Addr::new(10, 0, 0, 1);
        let a6 = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
        assert_eq!(rt(Ie::Cause(1)), [0, 19, 0, 1, 1]);
        rt(Ie::SourceInterface(1));
        assert_eq!(
            rt(Ie::FTeid(FTeid::Assigned {
                teid: 0x11223344,
                ipv4: Some(a4),
                ipv6: None
            })),
            [0, 21, 0, 9, 1, 0x11, 0x22, 0x33, 0x44, 10, 0, 0, 1]
        );
        rt(Ie::FTeid(FTeid::Assigned {
            teid: 1,
            ipv4: Some(a4),
            ipv6: Some(a6),
        }));
        rt(Ie::FTeid(FTeid::Choose {
            v4: true,
            v6: false,
            choose_id: Some(5),
        }));
        rt(Ie::FTeid(FTeid::Choose {
            v4: true,
            v6: true,
            choose_id: None,
        }));
        rt(Ie::NetworkInstance(encode_labels("internet")));
        rt(Ie::SdfFilter(SdfFilter {
            flow_description: Some(b"permit out ip from any to assigned".to_vec()),
            tos_traffic_class: Some(0x1234),
            spi: Some(7),
            flow_label: Some(0xabcde),
            sdf_filter_id: Some(9),
        }));
        rt(Ie::GateStatus(GateStatus { ul: 1, dl: 0 }));
        rt(Ie::Mbr(BitRate {
            ul: (1 << 40) - 1,
            dl: 5,
        }));
        rt(Ie::Gbr(BitRate { ul: 1, dl: 2 }));
        rt(Ie::Precedence(255));
        rt(Ie::VolumeThreshold(Volume {
            total: Some(1),
            dl: Some(3),
            ..Default::default()
        }));
        rt(Ie::VolumeQuota(Volume {
            ul: Some(2),
            ..Default::default()
        }));
        rt(Ie::VolumeMeasurement(Volume {
            total: Some(1),
            ul: Some(2),
            dl: Some(3),
            total_packets: Some(4),
            ul_packets: Some(5),
            dl_packets: Some(6),
        }));
        rt(Ie::TimeThreshold(60));
        rt(Ie::TimeQuota(3600));
        rt(Ie::QueryUrrReference(0xdead_beef));
        rt(Ie::NodeReportType(Bitmap(node_report_type::UPFR)));
        assert_eq!(
            rt(Ie::RemoteGtpuPeer(RemoteGtpuPeer {
                ipv4: Some(a4),
                ..Default::default()
            })),
            [0, 103, 0, 5, 2, 10, 0, 0, 1]
        );
        rt(Ie::RemoteGtpuPeer(RemoteGtpuPeer {
            ipv4: Some(a4),
            ipv6: Some(a6),
            destination_interface: Some(0),
            network_instance: Some(encode_labels("access")),
        }));
        rt(Ie::ReportingTriggers(Bitmap(0x0102)));
        rt(Ie::ReportType(Bitmap(report_type::USAR)));
        rt(Ie::OffendingIe(60));
        rt(Ie::DestinationInterface(2));
        rt(Ie::UpFunctionFeatures(Bitmap(0x0000_0100_0001)));
        assert_eq!(
            rt(Ie::ApplyAction(Bitmap(apply_action::FORW))),
            [0, 44, 0, 2, 2, 0]
        );
        rt(Ie::PdrId(1));
        rt(Ie::FSeid(FSeid {
            seid: 0x0102030405060708,
            ipv4: Some(a4),
            ipv6: Some(a6),
        }));
        rt(Ie::NodeId(NodeId::Ipv4(a4)));
        rt(Ie::NodeId(NodeId::Ipv6(a6)));
        rt(Ie::NodeId(NodeId::fqdn("upf.example.org")));
        rt(Ie::MeasurementMethod(Bitmap(measurement_method::VOLUM)));
        rt(Ie::UsageReportTrigger(Bitmap(0x80)));
        rt(Ie::MeasurementPeriod(10));
        rt(Ie::DurationMeasurement(11));
        rt(Ie::TimeOfFirstPacket(12));
        rt(Ie::TimeOfLastPacket(13));
        rt(Ie::OuterHeaderCreation(OuterHeaderCreation {
            description: ohc::GTPU_UDP_IPV4,
            teid: Some(0x99),
            ipv4: Some(a4),
            ..Default::default()
        }));
        rt(Ie::OuterHeaderCreation(OuterHeaderCreation {
            description: ohc::UDP_IPV6 | ohc::C_TAG | ohc::S_TAG | ohc::N6,
            ipv6: Some(a6),
            port: Some(2152),
            c_tag: Some(0x10203),
            s_tag: Some(0x40506),
            ..Default::default()
        }));
        rt(Ie::UeIpAddress(UeIpAddress {
            sd: true,
            ipv4: Some(a4),
            ipv6: Some(a6),
            ipv6_prefix_delegation_bits: Some(3),
            ipv6_prefix_length: Some(64),
            ..Default::default()
        }));
        rt(Ie::UeIpAddress(UeIpAddress {
            chv4: true,
            chv6: true,
            ..Default::default()
        }));
        rt(Ie::OuterHeaderRemoval(OuterHeaderRemoval {
            description: 0,
            ext_header_deletion: None,
        }));
        rt(Ie::OuterHeaderRemoval(OuterHeaderRemoval {
            description: 6,
            ext_header_deletion: Some(1),
        }));
        rt(Ie::RecoveryTimeStamp(0xe000_0000));
        rt(Ie::UrSeqn(3));
        rt(Ie::FarId(0x8000_0001));
        rt(Ie::QerId(4));
        rt(Ie::UrrId(5));
        rt(Ie::BarId(6));
        assert_eq!(
            rt(Ie::StartTime(0xe6f0_0001)),
            [0, 75, 0, 4, 0xe6, 0xf0, 0, 1]
        );
        rt(Ie::EndTime(0xe6f0_0002));
        assert_eq!(
            rt(Ie::SuggestedBufferingPacketsCount(10)),
            [0, 140, 0, 1, 10]
        );
        assert_eq!(
            rt(Ie::FailedRuleId(FailedRuleId::Pdr(0x102))),
            [0, 114, 0, 3, 0, 1, 2]
        );
        rt(Ie::FailedRuleId(FailedRuleId::Far(7)));
        rt(Ie::FailedRuleId(FailedRuleId::Qer(8)));
        assert_eq!(
            rt(Ie::FailedRuleId(FailedRuleId::Urr(9))),
            [0, 114, 0, 5, 3, 0, 0, 0, 9]
        );
        rt(Ie::FailedRuleId(FailedRuleId::Bar(1)));
        // Rule ID type 5..31 is not defined; a value too short for its type is incorrect.
        for bad in [&[0u8, 114, 0, 2, 5, 0][..], &[0, 114, 0, 2, 1, 0]] {
            assert_eq!(
                parse_list(bad, 0).unwrap_err(),
                DecodeError::IeIncorrect { ie_type: 114 }
            );
        }
        rt(Ie::Qfi(9));
        rt(Ie::Raw(RawIe {
            ie_type: 1000,
            enterprise_id: None,
            value: vec![1, 2, 3],
        }));
        assert_eq!(
            rt(Ie::Raw(RawIe {
                ie_type: 0x8001,
                enterprise_id: Some(18681),
                value: vec![7]
            })),
            [0x80, 1, 0, 3, 0x48, 0xf9, 7]
        );
    }

    #[test]
    fn grouped_round_trip_and_mandatory_members() {
        let pdi = Grouped::new(ie_type::PDI, vec![Ie::SourceInterface(0)]);
        let pdr = Ie::Grouped(Grouped::new(
            ie_type::CREATE_PDR,
            vec![
                Ie::PdrId(1),
                Ie::Precedence(10),
                Ie::Grouped(pdi),
                Ie::FarId(1),
            ],
        ));
        let v = rt(pdr);
        // Drop the Precedence: Mandatory IE missing, offending IE = Precedence.
        let mut broken = Vec::new();
        Ie::Grouped(Grouped::new(
            ie_type::CREATE_PDR,
            vec![
                Ie::PdrId(1),
                Ie::Grouped(Grouped::new(ie_type::PDI, vec![Ie::SourceInterface(0)])),
            ],
        ))
        .emit(&mut broken)
        .unwrap();
        assert_eq!(
            parse_list(&broken, 0).unwrap_err(),
            DecodeError::MandatoryIeMissing {
                ie_type: ie_type::PRECEDENCE
            }
        );
        assert!(v.len() > 20);
    }

    #[test]
    fn iterator_errors() {
        // Header cut short.
        let mut it = IeIter::new(&[0, 19, 0]);
        assert_eq!(it.next(), Some(Err(DecodeError::IeLength { ie_type: 19 })));
        assert_eq!(it.next(), None);
        // Value past the end.
        let mut it = IeIter::new(&[0, 19, 0, 2, 1]);
        assert_eq!(it.next(), Some(Err(DecodeError::IeLength { ie_type: 19 })));
        assert_eq!(it.next(), None);
        // Vendor IE too short for its Enterprise ID.
        let mut it = IeIter::new(&[0x80, 1, 0, 1, 1]);
        assert_eq!(
            it.next(),
            Some(Err(DecodeError::IeIncorrect { ie_type: 0x8001 }))
        );
        // Known IE with a short value.
        assert_eq!(
            parse_list(&[0, 96, 0, 3, 1, 2, 3], 0).unwrap_err(),
            DecodeError::IeIncorrect { ie_type: 96 }
        );
        // Extra octets at the end of a fixed IE are ignored (section 8.1.1).
        assert_eq!(
            parse_list(&[0, 19, 0, 2, 1, 9], 0).unwrap(),
            vec![Ie::Cause(1)]
        );
    }

    #[test]
    fn nesting_is_bounded() {
        // Update Forwarding Parameters has no mandatory members: nest it deeply.
        let mut v: Vec<u8> = Vec::new();
        for _ in 0..100 {
            let mut w = vec![0, ie_type::UPDATE_FORWARDING_PARAMETERS as u8];
            w.extend_from_slice(&(v.len() as u16).to_be_bytes());
            w.extend_from_slice(&v);
            v = w;
        }
        assert_eq!(
            parse_list(&v, 0).unwrap_err(),
            DecodeError::NestingTooDeep {
                ie_type: ie_type::UPDATE_FORWARDING_PARAMETERS
            }
        );
        // Exactly MAX_DEPTH levels are fine.
        let mut v: Vec<u8> = Vec::new();
        for _ in 0..MAX_DEPTH {
            let mut w = vec![0, ie_type::UPDATE_FORWARDING_PARAMETERS as u8];
            w.extend_from_slice(&(v.len() as u16).to_be_bytes());
            w.extend_from_slice(&v);
            v = w;
        }
        assert!(parse_list(&v, 0).is_ok());
    }

    #[test]
    fn labels() {
        assert_eq!(encode_labels("a.bc"), [1, b'a', 2, b'b', b'c']);
        assert_eq!(decode_labels(&[1, b'a', 2, b'b', b'c']), "a.bc");
        assert_eq!(decode_labels(&[5, b'a']), "a");
    }
}
