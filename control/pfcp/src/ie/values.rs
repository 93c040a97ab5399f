//! The values of the fixed-layout IEs Peregrine decodes (TS 29.244 section 8.2): flag bitmaps,
//! F-TEID, F-SEID, Node ID, SDF filter, bit rates, volumes, outer header creation and removal,
//! UE IP address.

use std::net::{Ipv4Addr, Ipv6Addr};

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
