//! The one flow classifier of the packet path: parses a frame once and fills its
//! [`PacketMeta`], which the UPF, the INT stages and the telemetry taps then read instead of
//! parsing again.
//!
//! What it parses: Ethernet with up to two VLAN tags (`vlan::l3_offset`, as the UPF always
//! accepted), IPv4 (header checksum verified on the outer header only: an inner packet's is
//! the UE's business, TS 29.281 section 5 carries it untouched) or IPv6 with its extension
//! header chain (RFC 8200 section 4), the L4 header of TCP, UDP, ICMP and ICMPv6, and for UDP
//! to port 2152 a GTP-U G-PDU (TS 29.281 section 5.1: TEID, the PDU Session Container's QFI
//! of TS 38.415 section 5.5.2, then the inner IP packet and its L4 header).
//!
//! Fragments: a non-first fragment (IPv4 offset != 0, or an IPv6 Fragment header with
//! offset != 0) has no L4 header: [`flags::FRAGMENT`], `l4_off` 0, no ports. A first fragment
//! keeps its ports ([`flags::L4`]) and is marked [`FIRST_FRAGMENT`]. An outer fragment is
//! never taken as a G-PDU (its GTP-U payload is incomplete; no reassembly on the fast path).
//!
//! A G-PDU whose GTP-U header, PDU Session Container or inner packet does not parse is
//! classified as the outer UDP packet it is (no [`flags::GPDU`]); the UPF's slow path then
//! re-reads the GTP-U header to name the exact drop reason. An error ([`ClassifyError`])
//! leaves the record reset and without [`flags::CLASSIFIED`].
//!
//! `flow_hash` is [`flow_hash`] of the flow packet's 5-tuple (the inner one of a G-PDU).

use crate::buffer::PacketBuf;
pub use crate::meta::{flags, Direction, PacketMeta};
use crate::runtime::{Batch, Context, Disposition, Stage};
use peregrine_wire::ethernet::{self, ethertype};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{gtpu, ipv4, ipv6, ipv6ext, tcp, udp, vlan, Error as WireError};

/// Free bit of [`PacketMeta::flags`]: the flow packet is the first fragment of a fragmented
/// datagram (IPv4 MF with offset 0, or an IPv6 Fragment header with offset 0): its L4
/// header is here, the rest of the datagram is not.
pub const FIRST_FRAGMENT: u16 = 1 << 14;
/// Free bit of [`PacketMeta::flags`]: a G-PDU carried a PDU Session Container; its QFI is in
/// [`PacketMeta::qfi`] (without it `qfi` is 0 and means "none").
pub const HAS_QFI: u16 = 1 << 15;

/// Why a frame could not be classified. Each maps to the UPF drop reason of the same name
/// ([`ClassifyError::reason_name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassifyError {
    /// Shorter than an Ethernet header, a truncated VLAN tag, or more than two tags.
    L2Truncated,
    /// Neither IPv4 nor IPv6 (ARP included; the UPF sends ARP to the control core).
    UnsupportedEthertype(u16),
    Ipv4Truncated,
    Ipv4Malformed,
    Ipv4BadChecksum,
    Ipv6Truncated,
    /// Bad header, or an extension header chain that does not parse.
    Ipv6Malformed,
    /// A TCP or UDP header that does not fit the IP payload or whose length is wrong.
    L4Malformed,
}

impl ClassifyError {
    /// The drop reason name the UPF counts this error under.
    pub const fn reason_name(self) -> &'static str {
        match self {
            ClassifyError::L2Truncated => "l2_truncated",
            ClassifyError::UnsupportedEthertype(_) => "unsupported_ethertype",
            ClassifyError::Ipv4Truncated => "ipv4_truncated",
            ClassifyError::Ipv4Malformed => "ipv4_malformed",
            ClassifyError::Ipv4BadChecksum => "ipv4_bad_checksum",
            ClassifyError::Ipv6Truncated => "ipv6_truncated",
            ClassifyError::Ipv6Malformed => "ipv6_malformed",
            ClassifyError::L4Malformed => "l4_malformed",
        }
    }
}

impl std::fmt::Display for ClassifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.reason_name())
    }
}

impl std::error::Error for ClassifyError {}

/// Classify the Ethernet frame `data` into `meta` (reset first). See the module docs.
///
/// The common shapes take a fast path (`fast`) with the same result; everything else, and
/// every error, the general parser ([`classify_general`]).
#[inline]
pub fn classify(data: &[u8], meta: &mut PacketMeta) -> Result<(), ClassifyError> {
    if fast::classify_fast(data, meta) {
        return Ok(());
    }
    classify_general(data, meta)
}

/// [`classify`] without the fast path: the reference the fast path is tested against.
pub fn classify_general(data: &[u8], meta: &mut PacketMeta) -> Result<(), ClassifyError> {
    *meta = PacketMeta::EMPTY;
    if data.len() < ethernet::HEADER_LEN {
        return Err(ClassifyError::L2Truncated);
    }
    let (l3, et) = vlan::l3_offset(data).map_err(|_| ClassifyError::L2Truncated)?;
    let v6 = match et {
        ethertype::IPV4 => false,
        ethertype::IPV6 => true,
        _ => return Err(ClassifyError::UnsupportedEthertype(et)),
    };
    classify_at(data, l3, v6, meta)
}

/// Classify the IP packet at `l3` of `data` (IPv6 if `v6`) into `meta` (reset first): for
/// buffers that do not start with Ethernet (INT's raw-IPv6 pipelines).
pub fn classify_at(
    data: &[u8],
    l3: usize,
    v6: bool,
    meta: &mut PacketMeta,
) -> Result<(), ClassifyError> {
    *meta = PacketMeta::EMPTY;
    let ip = parse_ip(data, l3, v6, true)?;
    let mut flow = ip;
    let mut m = PacketMeta {
        l3_off: off16(l3)?,
        l4_off: off16(ip.l4)?,
        ..PacketMeta::EMPTY
    };
    if v6 {
        m.flags |= flags::OUTER_V6;
    }
    if ip.flags & flags::L4 != 0 && ip.proto == ip_protocol::UDP && ip.flags & FIRST_FRAGMENT == 0 {
        let u = udp::Packet::new_unchecked(&data[ip.l4..]);
        if u.dst_port() == gtpu::PORT {
            if let Some(g) = gpdu(data, ip.l4, u.length() as usize) {
                m.flags |= flags::GPDU;
                m.teid = g.teid;
                if let Some(q) = g.qfi {
                    m.qfi = q;
                    m.flags |= HAS_QFI;
                }
                flow = g.inner;
            }
        }
    }
    m.inner_l3_off = off16(flow.l3)?;
    m.inner_l4_off = off16(flow.l4)?;
    m.proto = flow.proto;
    m.flags |= flow.flags | flags::CLASSIFIED;
    if flow.v6 {
        m.flags |= flags::INNER_V6;
    }
    let (sp, dp) = flow.ports(data);
    m.flow_hash = flow_hash(flow.src, flow.dst, sp, dp, flow.proto);
    *meta = m;
    Ok(())
}

fn off16(o: usize) -> Result<u16, ClassifyError> {
    u16::try_from(o).map_err(|_| ClassifyError::L4Malformed)
}

/// `flow_hash` of a 5-tuple: each address folded to 64 bits and multiplied by its own odd
/// constant, the ports and protocol likewise, the three products combined by rotation and
/// finished with MurmurHash3's 64-bit finaliser (fmix64), truncated to 32 bits. No seed: the
/// same on every worker, every run and every node, so sketches and indexes built from it can
/// be merged. IPv4 addresses are in the low 32 bits; ports are 0 when the packet has none.
/// Never 0 (0 means "not computed").
#[inline(always)]
pub fn flow_hash(src: u128, dst: u128, sport: u16, dport: u16, proto: u8) -> u32 {
    flow_hash_word(src, dst, ports_word(sport, dport, proto))
}

/// The word [`flow_hash`] hashes the ports and protocol as: `proto << 32 | sport << 16 |
/// dport` (for TCP / UDP the low 32 bits are the L4 header's first four bytes, big-endian).
#[inline(always)]
pub fn ports_word(sport: u16, dport: u16, proto: u8) -> u64 {
    u64::from(sport) << 16 | u64::from(dport) | u64::from(proto) << 32
}

/// [`flow_hash`] with the ports and protocol as their [`ports_word`].
#[inline(always)]
pub fn flow_hash_word(src: u128, dst: u128, w: u64) -> u32 {
    const K1: u64 = 0x9e37_79b9_7f4a_7c15;
    const K2: u64 = 0xc2b2_ae3d_27d4_eb4f;
    const K3: u64 = 0x1656_67b1_9e37_79f9;
    let a = (src as u64 ^ (src >> 64) as u64).wrapping_mul(K1);
    let b = (dst as u64 ^ (dst >> 64) as u64).wrapping_mul(K2);
    let c = w.wrapping_mul(K3);
    let mut h = a ^ b.rotate_left(21) ^ c.rotate_left(42);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    let h = (h ^ (h >> 32)) as u32;
    if h == 0 {
        1
    } else {
        h
    }
}

/// Adjust the offsets of `meta` after `delta` bytes were inserted (positive) or removed
/// (negative) at `at` of the packet, the bytes in front of `at` keeping their offsets (as
/// header insertion through the headroom does): every offset at or past `at` moves.
pub fn shift_offsets(meta: &mut PacketMeta, at: usize, delta: isize) {
    for o in [
        &mut meta.l3_off,
        &mut meta.l4_off,
        &mut meta.inner_l3_off,
        &mut meta.inner_l4_off,
    ] {
        if *o != 0 && usize::from(*o) >= at {
            *o = (*o as isize + delta).clamp(0, u16::MAX as isize) as u16;
        }
    }
}

/// One IP header's facts, all offsets from the start of the frame.
#[derive(Debug, Clone, Copy)]
struct Ip {
    v6: bool,
    src: u128,
    dst: u128,
    proto: u8,
    l3: usize,
    /// L4 header offset, 0 when none (a non-first fragment).
    l4: usize,
    /// `flags::L4`, `flags::FRAGMENT`, `FIRST_FRAGMENT`.
    flags: u16,
}

impl Ip {
    /// The ports of a TCP / UDP flow with its L4 header, else (0, 0).
    fn ports(&self, data: &[u8]) -> (u16, u16) {
        if self.flags & flags::L4 != 0 && matches!(self.proto, ip_protocol::UDP | ip_protocol::TCP)
        {
            let p = &data[self.l4..self.l4 + 4];
            (
                u16::from_be_bytes([p[0], p[1]]),
                u16::from_be_bytes([p[2], p[3]]),
            )
        } else {
            (0, 0)
        }
    }
}

/// Parse the IP packet at `l3` with its extension chain and check its L4 header.
fn parse_ip(data: &[u8], l3: usize, v6: bool, outer: bool) -> Result<Ip, ClassifyError> {
    let b = data.get(l3..).unwrap_or_default();
    let (ip, end) = if v6 {
        let p = match ipv6::Packet::new_checked(b) {
            Ok(p) => p,
            Err(WireError::Truncated) => return Err(ClassifyError::Ipv6Truncated),
            Err(_) => return Err(ClassifyError::Ipv6Malformed),
        };
        let len = p.total_len();
        let nh = p.next_header();
        let (proto, off, fl) = if ipv6ext::is_extension_header(nh) {
            let c = ipv6ext::parse_chain(nh, &b[ipv6::HEADER_LEN..len])
                .map_err(|_| ClassifyError::Ipv6Malformed)?;
            let fl = match (c.fragment.is_some(), c.later_fragment) {
                (_, true) => flags::FRAGMENT,
                (true, false) => FIRST_FRAGMENT,
                _ => 0,
            };
            (c.upper, c.upper_offset, fl)
        } else {
            (nh, 0, 0)
        };
        let ip = Ip {
            v6,
            src: u128::from(p.src_addr()),
            dst: u128::from(p.dst_addr()),
            proto,
            l3,
            l4: l3 + ipv6::HEADER_LEN + off,
            flags: fl,
        };
        (ip, l3 + len)
    } else {
        let p = match ipv4::Packet::new_checked(b) {
            Ok(p) => p,
            Err(WireError::Truncated) => return Err(ClassifyError::Ipv4Truncated),
            Err(_) => return Err(ClassifyError::Ipv4Malformed),
        };
        if outer && !p.verify_checksum() {
            return Err(ClassifyError::Ipv4BadChecksum);
        }
        let fl = if p.frag_offset() != 0 {
            flags::FRAGMENT
        } else if p.more_frags() {
            FIRST_FRAGMENT
        } else {
            0
        };
        let ip = Ip {
            v6,
            src: u128::from(u32::from(p.src_addr())),
            dst: u128::from(u32::from(p.dst_addr())),
            proto: p.protocol(),
            l3,
            l4: l3 + p.header_len(),
            flags: fl,
        };
        (ip, l3 + p.total_len() as usize)
    };
    let mut ip = ip;
    if ip.flags & flags::FRAGMENT != 0 {
        ip.l4 = 0;
        return Ok(ip);
    }
    let l4 = data.get(ip.l4..end).unwrap_or_default();
    // A first fragment holds the L4 header but not what its length fields cover: only the
    // header itself is checked (its ports are all a flow needs).
    let first = ip.flags & FIRST_FRAGMENT != 0;
    let complete = match ip.proto {
        ip_protocol::UDP if first => l4.len() >= udp::HEADER_LEN,
        ip_protocol::TCP if first => l4.len() >= tcp::HEADER_LEN,
        ip_protocol::UDP => udp::Packet::new_checked(l4)
            .map(|_| true)
            .map_err(|_| ClassifyError::L4Malformed)?,
        ip_protocol::TCP => tcp::Packet::new_checked(l4)
            .map(|_| true)
            .map_err(|_| ClassifyError::L4Malformed)?,
        // Type, code and checksum (RFC 792, RFC 4443 section 2.1).
        ip_protocol::ICMP | ip_protocol::IPV6_ICMP => l4.len() >= 4,
        _ => false,
    };
    if complete {
        ip.flags |= flags::L4;
    }
    Ok(ip)
}

/// A parsed G-PDU.
struct Gpdu {
    teid: u32,
    qfi: Option<u8>,
    inner: Ip,
}

/// The G-PDU in the UDP datagram at `l4` (UDP length `ulen`), if it is one and its inner
/// packet parses.
fn gpdu(data: &[u8], l4: usize, ulen: usize) -> Option<Gpdu> {
    let gtp_off = l4 + udp::HEADER_LEN;
    let g = gtpu::Header::new_checked(data.get(gtp_off..l4 + ulen)?).ok()?;
    if g.msg_type() != gtpu::msg_type::G_PDU {
        return None;
    }
    let qfi = match g.pdu_session() {
        Ok(r) => r.map(|r| r.qfi()),
        // An unknown PDU type: no QFI.
        Err(WireError::Unsupported) => None,
        Err(_) => return None,
    };
    let inner_off = gtp_off + g.header_len();
    let inner_end = gtp_off + g.total_len();
    let inner_bytes = data.get(..inner_end)?;
    let v6 = match inner_bytes.get(inner_off).map(|b| b >> 4) {
        Some(4) => false,
        Some(6) => true,
        _ => return None,
    };
    let inner = parse_ip(inner_bytes, inner_off, v6, false).ok()?;
    Some(Gpdu {
        teid: g.teid(),
        qfi,
        inner,
    })
}

/// What the [`Classify`] stage saw, for tests and the stats page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassifyStats {
    pub classified: u64,
    /// Packets left without [`flags::CLASSIFIED`]: the stages after decide (the UPF drops
    /// them under the error's reason, INT leaves them alone).
    pub unclassified: u64,
}

/// The classifier as the first stage of a pipeline: fills every active packet's
/// [`PacketMeta`]. It drops nothing: what a packet that does not parse means is for the
/// stages that follow (the UPF names the drop reason; ARP goes to the control core).
#[derive(Debug, Default)]
pub struct Classify {
    stats: ClassifyStats,
}

impl Classify {
    pub fn new() -> Classify {
        Classify::default()
    }

    pub fn stats(&self) -> ClassifyStats {
        self.stats
    }
}

impl<B: PacketBuf> Stage<B> for Classify {
    fn name(&self) -> &'static str {
        "classify"
    }

    fn process(&mut self, batch: &mut Batch<B>, _cx: &Context) {
        let stats = &mut self.stats;
        batch.for_each_active(|p| {
            let mut m = PacketMeta::EMPTY;
            match classify(p.data(), &mut m) {
                Ok(()) => stats.classified += 1,
                Err(_) => stats.unclassified += 1,
            }
            *p.pkt_meta_mut() = m;
            Disposition::CONTINUE
        });
    }
}

mod fast;
pub(crate) use fast::psc_qfi;
pub use fast::sum_is_ones;
#[cfg(test)]
pub(crate) mod tests;
