//! Request/response IDs of packets, read at the offsets the classifier left in `PacketMeta`
//! (the flow's IP and L4 headers: the inner packet of a G-PDU), so nothing is parsed twice.
//!
//! Each ID is hashed to 64 bits over the kind, the requester's and responder's addresses, and
//! the field that pairs them; a response hashes the same fields in the request's order:
//!
//! | kind | request | response | pairing field |
//! |---|---|---|---|
//! | `tcp_handshake` | SYN without ACK | SYN-ACK | ports, `seq + 1` = `ack` |
//! | `tcp_data` | a segment that advances seq (payload, SYN-ACK, FIN) | a non-SYN segment with ACK | ports, `seq + len` = `ack` |
//! | `dns` | UDP to port 53, QR = 0 | UDP from port 53, QR = 1 | ports, DNS ID |
//! | `icmp_echo` | ICMP echo request (8), ICMPv6 (128) | echo reply (0, 129) | identifier, sequence |
//! | `gtp_echo` | GTP-U Echo Request (1) | Echo Response (2) | GTP-U sequence number |
//!
//! `tcp_data` follows the fridge paper's trace evaluation: a delayed or cumulative ACK
//! matches only the segment whose end it acknowledges (the latest covered request); the
//! earlier segments it covers stay unanswered. A data segment carrying an ACK is a request
//! and a response at once.

use crate::meta::{flags, PacketMeta};

/// A kind of request/response pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kind {
    TcpHandshake = 0,
    TcpData = 1,
    Dns = 2,
    IcmpEcho = 3,
    GtpEcho = 4,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::TcpHandshake,
        Kind::TcpData,
        Kind::Dns,
        Kind::IcmpEcho,
        Kind::GtpEcho,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Kind::TcpHandshake => "tcp_handshake",
            Kind::TcpData => "tcp_data",
            Kind::Dns => "dns",
            Kind::IcmpEcho => "icmp_echo",
            Kind::GtpEcho => "gtp_echo",
        }
    }

    pub fn from_name(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    pub const fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// One role a packet plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Role {
    pub kind: Kind,
    pub request: bool,
    /// 64-bit ID hash (equal for a request and its response).
    pub id: u64,
    /// The packet's (source, destination) ports (0 for ICMP): a port-class slice matches
    /// either, so both halves of a pair fall in the same slice.
    pub ports: [u16; 2],
}

/// Up to two roles (a data segment with an ACK; a SYN-ACK).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Roles {
    n: u8,
    r: [Option<Role>; 2],
}

impl Roles {
    fn push(&mut self, r: Role) {
        if let Some(s) = self.r.get_mut(usize::from(self.n)) {
            *s = Some(r);
            self.n += 1;
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = Role> + '_ {
        self.r.iter().flatten().copied()
    }

    pub fn len(&self) -> usize {
        usize::from(self.n)
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}

/// Why a packet yields no role, counted by the stage under these names. None is an error of
/// the packet's forwarding: telemetry never drops traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Skip {
    /// The classifier could not parse it (a non-IP frame, or an IP packet whose L4 header is
    /// cut short: those are counted below when the IP header names TCP or UDP).
    Unclassified = 0,
    /// TCP header cut short (the classifier refused it) or payload length past the frame.
    TruncatedTcp = 1,
    /// UDP to or from port 53 with fewer than 12 bytes of DNS header.
    TruncatedDns = 2,
    /// ICMP echo shorter than its 8-byte header.
    TruncatedIcmp = 3,
    /// GTP-U echo shorter than its header with a sequence number.
    TruncatedGtp = 4,
    /// A non-first fragment: no L4 header to match on.
    Fragment = 5,
    /// A packet of no configured kind.
    Other = 6,
}

impl Skip {
    pub const COUNT: usize = 7;
    pub const NAMES: [&'static str; Skip::COUNT] = [
        "unclassified",
        "truncated_tcp",
        "truncated_dns",
        "truncated_icmp",
        "truncated_gtp",
        "fragment",
        "other",
    ];
}

#[inline]
fn be16(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(d.get(at..at + 2)?.try_into().ok()?))
}

#[inline]
fn be32(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(d.get(at..at + 4)?.try_into().ok()?))
}

/// The flow's addresses (IPv4 in the low 32 bits) and the end of its IP payload (from the
/// IP length field, bounded by the frame).
#[inline(always)]
fn addrs(d: &[u8], l3: usize, v6: bool) -> Option<(u128, u128, usize)> {
    // One bounds check per header, then fixed offsets.
    if v6 {
        let h: &[u8; 40] = d.get(l3..l3 + 40)?.try_into().ok()?;
        let s = u128::from_be_bytes(h[8..24].try_into().ok()?);
        let t = u128::from_be_bytes(h[24..40].try_into().ok()?);
        Some((
            s,
            t,
            l3 + 40 + usize::from(u16::from_be_bytes([h[4], h[5]])),
        ))
    } else {
        let h: &[u8; 20] = d.get(l3..l3 + 20)?.try_into().ok()?;
        let s = u128::from(u32::from_be_bytes([h[12], h[13], h[14], h[15]]));
        let t = u128::from(u32::from_be_bytes([h[16], h[17], h[18], h[19]]));
        Some((s, t, l3 + usize::from(u16::from_be_bytes([h[2], h[3]]))))
    }
}

/// The outer (source, destination) addresses of a classified packet, IPv4 in the low 32
/// bits: the GTP-U peers of an echo, for slices keyed by peer address.
#[inline]
pub fn outer_addrs(d: &[u8], m: &PacketMeta) -> Option<(u128, u128)> {
    addrs(d, usize::from(m.l3_off), m.has(flags::OUTER_V6)).map(|(s, t, _)| (s, t))
}

/// An address as [`outer_addrs`] gives it.
pub fn addr_key(a: std::net::IpAddr) -> u128 {
    match a {
        std::net::IpAddr::V4(a) => u128::from(u32::from(a)),
        std::net::IpAddr::V6(a) => u128::from(a),
    }
}

/// The 128-bit product of `a` and `b`, folded (wyhash's "mum"): one multiply mixes 64 bits
/// into 64 bits.
#[inline]
fn mum(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

const K: [u64; 5] = [
    0xa076_1d64_78bd_642f,
    0xe703_7ed1_a0b4_28db,
    0x8ebc_6af0_9c88_c6e3,
    0x5899_65cc_7537_4cc3,
    0x9e37_79b9_7f4a_7c15,
];

/// The ID of a pair: kind, requester, responder, ports, pairing field (at most 32 bits in
/// every kind). Not yet a hash: the table finalises it once under its seed (`Keyed::head`,
/// `fmix64` of the ID XOR the seed, a bijection; the slot index gets a second `fmix64`), so the
/// ID only has to keep distinct pairs distinct and spread them. The addresses
/// take one word (side by side for IPv4, each IPv6 address folded by a multiply), the rest
/// another, spread by an odd multiplier (a bijection); their XOR is the ID. One multiply for
/// IPv4 (a chain of seven cost a fifth of the UPF's per-packet budget).
#[inline(always)]
pub fn pair_id(kind: Kind, req: u128, resp: u128, ports: u32, key: u64) -> u64 {
    pair_mix(kind, addr_word(req, resp), ports, key)
}

/// Requester and responder in one word: side by side when both are IPv4 (as
/// [`v4_word`]), else each IPv6 address folded by a multiply.
#[inline(always)]
fn addr_word(req: u128, resp: u128) -> u64 {
    if (req | resp) >> 32 == 0 {
        v4_word(req as u32, resp as u32)
    } else {
        mum(req as u64 ^ K[0], (req >> 64) as u64 ^ K[1])
            ^ mum(resp as u64 ^ K[2], (resp >> 64) as u64 ^ K[3]).rotate_left(23)
    }
}

/// Two IPv4 addresses (requester, responder) in one word.
#[inline(always)]
const fn v4_word(req: u32, resp: u32) -> u64 {
    (req as u64) << 32 | resp as u64
}

// `dns_role` reads the source and destination addresses as one big-endian word in place of
// `v4_word(source, destination)`: the two must stay the same layout.
const _: () = assert!(v4_word(0x0a00_0001, 0xc0a8_0102) == 0x0a00_0001_c0a8_0102);

/// [`pair_id`] from the addresses' word.
#[inline(always)]
const fn pair_mix(kind: Kind, a: u64, ports: u32, key: u64) -> u64 {
    // The kind rides in the top bits of the key word (the key has at most 32 bits), XORed
    // into the ports before the shift: `ports << 32 ^ key ^ kind << 58`, one 32-bit XOR.
    let b = ((ports ^ (kind as u32) << 26) as u64) << 32 ^ key;
    a ^ b.wrapping_mul(K[4])
}

/// Minimal look at a packet the classifier refused: does its IP header name TCP (a truncated
/// TCP header) or UDP to/from 53 (a truncated DNS datagram)?
fn refused(d: &[u8]) -> Skip {
    // Ethernet without VLAN, as the refused frames we can say anything about.
    let Some(et) = be16(d, 12) else {
        return Skip::Unclassified;
    };
    let (proto, l4) = match et {
        0x0800 => match (d.get(23), d.get(14)) {
            (Some(&p), Some(&vihl)) => (p, 14 + usize::from(vihl & 0x0f) * 4),
            _ => return Skip::Unclassified,
        },
        0x86dd => match d.get(20) {
            Some(&p) => (p, 54),
            None => return Skip::Unclassified,
        },
        _ => return Skip::Unclassified,
    };
    match proto {
        6 => Skip::TruncatedTcp,
        17 if be16(d, l4) == Some(53) || be16(d, l4 + 2) == Some(53) => Skip::TruncatedDns,
        _ => Skip::Unclassified,
    }
}

/// The roles of one packet among the kinds in `kinds` (a mask of [`Kind::bit`]).
pub fn roles(d: &[u8], m: &PacketMeta, kinds: u8) -> Result<Roles, Skip> {
    let mut out = Roles::default();
    match each_role(d, m, kinds, &mut out)? {
        0 => Err(Skip::Other),
        _ => Ok(out),
    }
}

/// Where [`each_role`] hands the roles it finds. A trait rather than a closure so the
/// stage's sink is inlined at every place a role is found (a closure is called).
pub trait RoleSink {
    fn role(&mut self, r: Role);
}

impl RoleSink for Roles {
    #[inline]
    fn role(&mut self, r: Role) {
        self.push(r);
    }
}

/// [`roles`] without the container, for the stage's per-packet path: `f` gets each role as
/// it is found (every check comes first: a packet refused with a [`Skip`] has given none), and
/// the count of roles is returned (0: a packet of no role among `kinds`, [`Skip::Other`] to
/// [`roles`]).
#[inline(always)]
pub fn each_role(d: &[u8], m: &PacketMeta, kinds: u8, f: &mut impl RoleSink) -> Result<u32, Skip> {
    if single_role(d, m, kinds, f)? {
        Ok(1)
    } else {
        other_roles(d, m, kinds, f)
    }
}

/// The first half of [`each_role`]: hands `f` the one role of a UDP datagram (DNS, GTP-U
/// echo) and returns `Ok(true)`, or returns `Ok(false)` for a classified packet of another
/// protocol, whose roles [`other_roles`] finds. The stage calls this on every packet and
/// [`other_roles`] out of line for the rest (TCP, ICMP), so the common UDP path keeps its
/// state (the stage's sink too) in registers and tests the protocol with one compare.
#[inline(always)]
pub fn single_role(
    d: &[u8],
    m: &PacketMeta,
    kinds: u8,
    f: &mut impl RoleSink,
) -> Result<bool, Skip> {
    // One test for "classified, L4 header complete, not a fragment"; the rest is cold.
    const MASK: u16 = flags::CLASSIFIED | flags::L4 | flags::FRAGMENT;
    if m.flags & MASK != flags::CLASSIFIED | flags::L4 {
        return Err(odd(d, m, kinds));
    }
    if m.proto != 17 {
        return Ok(false);
    }
    // GTP-U echo rides on the outer UDP header (never a G-PDU).
    if kinds & Kind::GtpEcho.bit() != 0 && !m.has(flags::GPDU) {
        if let Some(r) = gtp_echo(d, m)? {
            f.role(r);
            return Ok(true);
        }
    }
    if kinds & Kind::Dns.bit() == 0 {
        return Err(Skip::Other);
    }
    // The role is handed over where it is found: merged, the roles' fields would meet in
    // one variable and the kind would no longer be a constant where the stage routes it.
    dns(
        d,
        usize::from(m.inner_l3_off),
        usize::from(m.inner_l4_off),
        m.has(flags::INNER_V6),
        f,
    )?;
    Ok(true)
}

/// The flow's IP header of the usual uplink shape: after untagged Ethernet (RFC 894) ...
const PLAIN_L3: usize = 14;
/// ... IPv4 without options (RFC 791: IHL 5), so the L4 header 20 bytes on.
const PLAIN_L4: usize = PLAIN_L3 + 20;
/// The downlink's: behind that Ethernet and IPv4, UDP (8 bytes) and GTP-U with its optional
/// block and a one-unit PDU Session Container (16: TS 29.281 section 5.1, TS 38.415 section
/// 5.5.2), as the UPF encapsulates (`upf::encap::GTPU_PSC_LEN`).
const GTPU_L3: usize = PLAIN_L4 + 8 + 16;
const GTPU_L4: usize = GTPU_L3 + 20;

/// The bytes [`plain_dns`] reads of a [`PLAIN_UPLINK_UDP`] record's frame: through the UDP
/// header and the 12-byte DNS header. A frame that long gives the same result cut to them.
pub const PLAIN_DNS_HEAD: usize = PLAIN_L4 + 20;
/// The same of a [`GTPU_DOWNLINK_UDP`] record's frame.
pub const GTPU_DNS_HEAD: usize = GTPU_L4 + 20;

/// The record's flow offsets, flags, protocol and direction as one word (`inner_l3_off` in
/// the low 16 bits, then `inner_l4_off`, `flags`, `proto`, `dir`): adjacent fields, which the
/// compiler reads with one load (`meta::tests` holds the layout).
#[inline(always)]
pub fn record_word(m: &PacketMeta) -> u64 {
    u64::from(m.inner_l3_off)
        | u64::from(m.inner_l4_off) << 16
        | u64::from(m.flags) << 32
        | u64::from(m.proto) << 48
        | u64::from(m.dir) << 56
}

const fn shape(l3: usize, l4: usize, fl: u16, dir: crate::meta::Direction) -> u64 {
    l3 as u64 | (l4 as u64) << 16 | (fl as u64) << 32 | 17 << 48 | (dir as u64) << 56
}

/// [`record_word`] of the usual uplink datagram as the UPF leaves it routed (decapsulated):
/// a classified UDP datagram with its whole header, not a fragment, no other flag, IPv4
/// without options at `PLAIN_L3` (untagged Ethernet), uplink.
pub const PLAIN_UPLINK_UDP: u64 = shape(
    PLAIN_L3,
    PLAIN_L4,
    flags::CLASSIFIED | flags::L4,
    crate::meta::Direction::Uplink,
);

/// [`record_word`] of the usual downlink datagram as the UPF leaves it encapsulated: the
/// same user datagram at `GTPU_L3` behind IPv4, UDP and GTP-U with a PDU Session
/// Container, flagged a G-PDU with a QFI, downlink.
pub const GTPU_DOWNLINK_UDP: u64 = shape(
    GTPU_L3,
    GTPU_L4,
    flags::CLASSIFIED | flags::L4 | flags::GPDU | crate::classify::HAS_QFI,
    crate::meta::Direction::Downlink,
);

/// [`single_role`] for a record whose [`record_word`] is [`PLAIN_UPLINK_UDP`] (`down`
/// false) or [`GTPU_DOWNLINK_UDP`] (`down`, true), with DNS and without GTP-U echo among the
/// kinds: the same `dns` at constant offsets (one bounds check covers both headers, every
/// field is at a fixed offset), `Ok(())` where [`single_role`] answers `Ok(true)`. Reads no
/// byte past [`PLAIN_DNS_HEAD`] (or [`GTPU_DNS_HEAD`]): a frame at least that long may be
/// passed cut to it.
#[inline(always)]
pub fn plain_dns(d: &[u8], down: bool, f: &mut impl RoleSink) -> Result<(), Skip> {
    if down {
        dns(d, GTPU_L3, GTPU_L4, false, f)
    } else {
        dns(d, PLAIN_L3, PLAIN_L4, false, f)
    }
}

/// The second half of [`each_role`], for a classified packet that is not UDP (after
/// [`single_role`] returned `Ok(false)`): the roles (up to two) of a TCP segment ([`tcp`]) or
/// the one of an ICMP echo, handed to `f`, and their count (0: a TCP segment of no role);
/// [`Skip::Other`] for any other protocol or one of no configured kind.
pub fn other_roles(
    d: &[u8],
    m: &PacketMeta,
    kinds: u8,
    f: &mut impl RoleSink,
) -> Result<u32, Skip> {
    match m.proto {
        6 if kinds & (Kind::TcpHandshake.bit() | Kind::TcpData.bit()) != 0 => tcp(d, m, kinds, f),
        1 | 58 if kinds & Kind::IcmpEcho.bit() != 0 => {
            let (l3, l4, v6) = (
                usize::from(m.inner_l3_off),
                usize::from(m.inner_l4_off),
                m.has(flags::INNER_V6),
            );
            f.role(icmp(d, l3, l4, v6, m.proto)?);
            Ok(1)
        }
        _ => Err(Skip::Other),
    }
}

/// `s`, through a call on a cold path, for refusals the common path passes by: the call marks
/// the branch unlikely, so the compiler lays the common path out straight (the DNS query
/// path: two jumps and a reload fewer per packet).
#[cold]
#[inline(never)]
fn rare(s: Skip) -> Skip {
    s
}

/// Why a packet that is unclassified, a fragment or without a complete L4 header plays no
/// role.
#[cold]
fn odd(d: &[u8], m: &PacketMeta, kinds: u8) -> Skip {
    if !m.is_classified() {
        return refused(d);
    }
    if m.has(flags::FRAGMENT) {
        return Skip::Fragment;
    }
    // No complete L4 header: the classifier refused the TCP header.
    if m.proto == 6 && kinds & (Kind::TcpHandshake.bit() | Kind::TcpData.bit()) != 0 {
        Skip::TruncatedTcp
    } else {
        Skip::Other
    }
}

/// A GTP-U Echo Request or Response on the outer UDP header, if the packet is one.
#[inline]
fn gtp_echo(d: &[u8], m: &PacketMeta) -> Result<Option<Role>, Skip> {
    let l4 = usize::from(m.l4_off);
    let (sp, dp) = (be16(d, l4), be16(d, l4 + 2));
    if sp != Some(2152) && dp != Some(2152) {
        return Ok(None);
    }
    let g = l4 + 8;
    let t = d.get(g + 1).copied();
    if !matches!(t, Some(1) | Some(2)) {
        return Ok(None);
    }
    let (Some(fl), Some(seq)) = (d.get(g).copied(), be16(d, g + 8)) else {
        return Err(Skip::TruncatedGtp);
    };
    if fl & 0x02 == 0 {
        // No sequence number: nothing pairs the echo (TS 29.281 section 7.2.1 requires one).
        return Err(Skip::TruncatedGtp);
    }
    let (s, t2, _) =
        addrs(d, usize::from(m.l3_off), m.has(flags::OUTER_V6)).ok_or(Skip::TruncatedGtp)?;
    let request = t == Some(1);
    let (rq, rs) = if request { (s, t2) } else { (t2, s) };
    Ok(Some(Role {
        kind: Kind::GtpEcho,
        request,
        id: pair_id(Kind::GtpEcho, rq, rs, 2152, u64::from(seq)),
        ports: [2152, 2152],
    }))
}

/// A DNS query or response (UDP to or from port 53), handed to `f`: the ports, the ID and
/// the QR bit at fixed offsets from the L4 header, in one bounds check over the UDP header and
/// the 12-byte DNS header; the question section is neither walked nor validated (no slice
/// needs it). A query and a response each hand over their role on their own path, so the
/// direction is a constant where the stage tests it.
#[inline(always)]
fn dns(d: &[u8], l3: usize, l4: usize, v6: bool, f: &mut impl RoleSink) -> Result<(), Skip> {
    let Some(h) = d
        .get(l4..l4 + 20)
        .and_then(|h| <&[u8; 20]>::try_from(h).ok())
    else {
        return Err(short_dns(d, l4));
    };
    // Source and destination port as one word, source high.
    let raw = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
    // The DNS ID, read where a role is made (read before the ports' test, it cost a datagram
    // of neither port three instructions).
    let key = |h: &[u8; 20]| u64::from(u16::from_be_bytes([h[8], h[9]]));
    // A query to 53 or a response from 53; a datagram of neither port is no DNS (the usual
    // UDP datagram: it leaves on the ports alone); anything else is no pair (cold).
    if raw as u16 == 53 {
        if h[10] & 0x80 == 0 {
            f.role(dns_role::<true>(d, l3, l4, v6, raw, key(h))?);
            return Ok(());
        }
    } else if (raw >> 16) as u16 != 53 {
        return Err(Skip::Other);
    }
    if h[10] & 0x80 != 0 && (raw >> 16) as u16 == 53 {
        f.role(dns_role::<false>(d, l3, l4, v6, raw, key(h))?);
        return Ok(());
    }
    Err(unpaired_dns(d, l3, l4, v6, raw))
}

/// The role of a DNS query (`REQUEST`) or response whose UDP ports are `raw` (source high)
/// and DNS ID `key`, once the IP header holds the DNS header.
#[inline(always)]
fn dns_role<const REQUEST: bool>(
    d: &[u8],
    l3: usize,
    l4: usize,
    v6: bool,
    raw: u32,
    key: u64,
) -> Result<Role, Skip> {
    // The ports in request order.
    let ports = if REQUEST { raw } else { raw.rotate_left(16) };
    // The IP length must hold the DNS header too (the frame may be padded).
    let word = if v6 {
        let (s, t, end) = addrs(d, l3, true).ok_or(Skip::TruncatedDns)?;
        if end < l4 + 20 {
            return Err(Skip::TruncatedDns);
        }
        let (rq, rs) = if REQUEST { (s, t) } else { (t, s) };
        addr_word(rq, rs)
    } else {
        let ip: &[u8; 20] = d
            .get(l3..l3 + 20)
            .and_then(|h| h.try_into().ok())
            .ok_or_else(|| rare(Skip::TruncatedDns))?;
        if l3 + usize::from(u16::from_be_bytes([ip[2], ip[3]])) < l4 + 20 {
            return Err(rare(Skip::TruncatedDns));
        }
        // Source and destination side by side in one read: `v4_word(source, destination)`.
        let st = u64::from_be_bytes([
            ip[12], ip[13], ip[14], ip[15], ip[16], ip[17], ip[18], ip[19],
        ]);
        if REQUEST {
            st
        } else {
            st.rotate_left(32)
        }
    };
    Ok(Role {
        kind: Kind::Dns,
        request: REQUEST,
        id: pair_mix(Kind::Dns, word, ports, key),
        ports: [(raw >> 16) as u16, raw as u16],
    })
}

/// Why a UDP datagram with a whole DNS header is no DNS pair: not to or from port 53
/// ([`Skip::Other`]), a DNS header past the IP length ([`Skip::TruncatedDns`]), else a query
/// from 53 or a response to 53 ([`Skip::Other`]).
#[cold]
fn unpaired_dns(d: &[u8], l3: usize, l4: usize, v6: bool, ports: u32) -> Skip {
    if (ports >> 16) as u16 != 53 && ports as u16 != 53 {
        return Skip::Other;
    }
    match addrs(d, l3, v6) {
        Some((_, _, end)) if end >= l4 + 20 => Skip::Other,
        _ => Skip::TruncatedDns,
    }
}

/// A UDP datagram too short for the DNS header: [`Skip::TruncatedDns`] if it is to or from
/// port 53 (ports cut short read as 0: not DNS).
#[cold]
fn short_dns(d: &[u8], l4: usize) -> Skip {
    let (sp, dp) = (be16(d, l4).unwrap_or(0), be16(d, l4 + 2).unwrap_or(0));
    if sp != 53 && dp != 53 {
        Skip::Other
    } else {
        Skip::TruncatedDns
    }
}

/// An ICMP or ICMPv6 echo request or reply.
#[inline]
fn icmp(d: &[u8], l3: usize, l4: usize, v6: bool, proto: u8) -> Result<Role, Skip> {
    let ty = d.get(l4).copied().unwrap_or(255);
    let request = match (proto, ty) {
        (1, 8) | (58, 128) => true,
        (1, 0) | (58, 129) => false,
        _ => return Err(Skip::Other),
    };
    let (s, t, end) = addrs(d, l3, v6).ok_or(Skip::TruncatedIcmp)?;
    if end.min(d.len()) < l4 + 8 {
        return Err(Skip::TruncatedIcmp);
    }
    let (Some(ident), Some(seq)) = (be16(d, l4 + 4), be16(d, l4 + 6)) else {
        return Err(Skip::TruncatedIcmp);
    };
    let (rq, rs) = if request { (s, t) } else { (t, s) };
    Ok(Role {
        kind: Kind::IcmpEcho,
        request,
        id: pair_id(Kind::IcmpEcho, rq, rs, u32::from(ident), u64::from(seq)),
        ports: [0, 0],
    })
}

/// The roles of a TCP segment that [`single_role`] passed on (classified, complete header).
pub fn tcp(d: &[u8], m: &PacketMeta, kinds: u8, f: &mut impl RoleSink) -> Result<u32, Skip> {
    let (l3, l4, v6) = (
        usize::from(m.inner_l3_off),
        usize::from(m.inner_l4_off),
        m.has(flags::INNER_V6),
    );
    let (s, t, end) = addrs(d, l3, v6).ok_or(Skip::TruncatedTcp)?;
    let (Some(sp), Some(dp), Some(seq), Some(ack), Some(&off), Some(&fl)) = (
        be16(d, l4),
        be16(d, l4 + 2),
        be32(d, l4 + 4),
        be32(d, l4 + 8),
        d.get(l4 + 12),
        d.get(l4 + 13),
    ) else {
        return Err(Skip::TruncatedTcp);
    };
    let hdr = usize::from(off >> 4) * 4;
    if hdr < 20 || end > d.len() || end < l4 + hdr {
        return Err(Skip::TruncatedTcp);
    }
    let payload = (end - l4 - hdr) as u32;
    let (syn, ackf, fin, rst) = (
        fl & 0x02 != 0,
        fl & 0x10 != 0,
        fl & 0x01 != 0,
        fl & 0x04 != 0,
    );
    let fwd = u32::from(sp) << 16 | u32::from(dp);
    let rev = u32::from(dp) << 16 | u32::from(sp);
    let mut n = 0;
    if kinds & Kind::TcpHandshake.bit() != 0 && syn && !rst {
        let (request, rq, rs, ports, key) = if ackf {
            (false, t, s, rev, ack)
        } else {
            (true, s, t, fwd, seq.wrapping_add(1))
        };
        f.role(Role {
            kind: Kind::TcpHandshake,
            request,
            id: pair_id(Kind::TcpHandshake, rq, rs, ports, u64::from(key)),
            ports: [sp, dp],
        });
        n += 1;
    }
    if kinds & Kind::TcpData.bit() != 0 && !rst {
        let advance = payload + u32::from(syn) + u32::from(fin);
        // A SYN without ACK opens the handshake: that is tcp_handshake's request.
        if advance > 0 && (ackf || !syn) {
            let key = seq.wrapping_add(advance);
            f.role(Role {
                kind: Kind::TcpData,
                request: true,
                id: pair_id(Kind::TcpData, s, t, fwd, u64::from(key)),
                ports: [sp, dp],
            });
            n += 1;
        }
        if ackf && !syn {
            f.role(Role {
                kind: Kind::TcpData,
                request: false,
                id: pair_id(Kind::TcpData, t, s, rev, u64::from(ack)),
                ports: [sp, dp],
            });
            n += 1;
        }
    }
    Ok(n)
}

#[cfg(test)]
#[path = "matcher_tests.rs"]
mod tests;
