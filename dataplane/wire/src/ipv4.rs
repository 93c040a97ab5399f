//! IPv4 header (RFC 791) with header checksum.

/// IP protocol / IPv6 next-header numbers (IANA "Assigned Internet Protocol Numbers").
///
/// Shared by IPv4 (`protocol`) and IPv6 (`next header`, RFC 8200 section 4); re-exported
/// as `crate::ipv6::ip_protocol`.
pub mod ip_protocol {
    /// IPv6 Hop-by-Hop Options (RFC 8200 section 4.3).
    pub const HOPOPT: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const IGMP: u8 = 2;
    /// IPv4 encapsulation (IP-in-IP, RFC 2003).
    pub const IPV4: u8 = 4;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    /// IPv6 encapsulation (RFC 2473).
    pub const IPV6: u8 = 41;
    /// IPv6 Routing header (RFC 8200 section 4.4).
    pub const IPV6_ROUTE: u8 = 43;
    /// IPv6 Fragment header (RFC 8200 section 4.5).
    pub const IPV6_FRAG: u8 = 44;
    pub const GRE: u8 = 47;
    pub const ESP: u8 = 50;
    pub const AH: u8 = 51;
    pub const IPV6_ICMP: u8 = 58;
    /// IPv6 No Next Header (RFC 8200 section 4.7).
    pub const IPV6_NONXT: u8 = 59;
    /// IPv6 Destination Options (RFC 8200 section 4.6).
    pub const IPV6_OPTS: u8 = 60;
    pub const SCTP: u8 = 132;
    /// Mobility header (RFC 6275).
    pub const MOBILITY: u8 = 135;
    /// Host Identity Protocol (RFC 7401).
    pub const HIP: u8 = 139;
    /// Shim6 (RFC 5533).
    pub const SHIM6: u8 = 140;
    /// Reserved for experimentation and testing (RFC 3692).
    pub const EXP1: u8 = 253;
    pub const EXP2: u8 = 254;
}

/// Fuzz entry (placeholder until the module lands).
#[doc(hidden)]
pub fn fuzz(_data: &[u8]) {}
