//! Header writing for the UPF stage: GTP-U encapsulation (TS 29.281 section 5, with the PDU
//! Session Container of TS 38.415 section 5.5.2), in-place replies to a GTP-U peer (Echo
//! Response and Error Indication, TS 29.281 sections 7.2.2 and 7.3.1) and in-place ICMP
//! "too big" errors (RFC 1191 / RFC 4443 section 3.2). Nothing here allocates.

use crate::buffer::{BufError, PacketBuf};
use crate::upf::tables::OuterHeader;
use peregrine_wire::ethernet::{self, ethertype, Address as MacAddr};
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{gtpu, icmpv4, icmpv6, ipv4, ipv6, pdu_session, udp};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an encapsulation could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncapError {
    /// Outer peer and local address of different families, or a QFI above 63.
    BadOuter,
    /// Not enough headroom / tailroom.
    Buf(BufError),
}

impl From<BufError> for EncapError {
    fn from(e: BufError) -> Self {
        EncapError::Buf(e)
    }
}

/// GTP-U header with the 4-octet optional block and a one-unit PDU Session Container.
pub const GTPU_PSC_LEN: usize = gtpu::OPT_HEADER_LEN + 4;

/// Bytes added in front of an inner IP packet by [`encap_gtpu`], without Ethernet: outer
/// IPv4 20 or IPv6 40, UDP 8, GTP-U 12, PDU Session Container 4.
pub const fn overhead(v6_outer: bool) -> usize {
    (if v6_outer {
        ipv6::HEADER_LEN
    } else {
        ipv4::HEADER_LEN
    }) + udp::HEADER_LEN
        + GTPU_PSC_LEN
}

/// Resize the packet to exactly `n` bytes (grow or shrink at the tail).
pub fn set_len<B: PacketBuf>(p: &mut B, n: usize) -> Result<(), BufError> {
    let len = p.len();
    if n > len {
        p.append(n - len).map(|_| ())
    } else {
        p.trim(len - n)
    }
}

/// Which PDU Session Container to add: DL PDU SESSION INFORMATION (type 0) toward a gNB or
/// downstream UPF, UL (type 1) when relaying uplink over N9 (TS 38.415 section 5.5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Psc {
    Dl,
    Ul,
}

/// The GTP-U header of a G-PDU (TS 29.281 5.1) with the E flag and a PDU Session Container
/// (TS 38.415 5.5.2) carrying `qfi`, in front of `payload_len` bytes.
fn g_pdu(teid: u32, qfi: u8, psc: Psc, payload_len: usize) -> gtpu::Repr {
    let ext = match psc {
        Psc::Dl => pdu_session::Repr::Dl {
            qfi,
            rqi: false,
            ppi: None,
        },
        Psc::Ul => pdu_session::Repr::Ul { qfi },
    };
    gtpu::Repr {
        msg_type: gtpu::msg_type::G_PDU,
        teid,
        seq: None,
        npdu: None,
        ext: Some(ext),
        payload_len,
    }
}

/// Encapsulate the packet, which must hold exactly one inner IP packet, as a G-PDU:
/// prepend Ethernet (`dst_mac`, `src_mac`), outer IPv4 (TTL 64, DF, header checksum, UDP
/// checksum 0 as RFC 768 allows) or IPv6 (hop limit 64, UDP checksum always computed,
/// RFC 8200 section 8.1), UDP (`src_port` -> 2152) and GTP-U with the E flag and a PDU
/// Session Container carrying `qfi`.
pub fn encap_gtpu<B: PacketBuf>(
    p: &mut B,
    outer: &OuterHeader,
    qfi: u8,
    psc: Psc,
    src_port: u16,
    dst_mac: MacAddr,
    src_mac: MacAddr,
) -> Result<(), EncapError> {
    if qfi > 63 {
        return Err(EncapError::BadOuter);
    }
    let inner_len = p.len();
    let gtp = g_pdu(outer.teid, qfi, psc, inner_len);
    let (ohl, et) = match (outer.local, outer.peer) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            let eth = eth_addrs(dst_mac, src_mac);
            return encap_gtpu_v4(p, outer.teid, src, dst, qfi, psc, src_port, &eth);
        }
        (IpAddr::V6(_), IpAddr::V6(_)) => (ipv6::HEADER_LEN, ethertype::IPV6),
        _ => return Err(EncapError::BadOuter),
    };
    let udp_off = ethernet::HEADER_LEN + ohl;
    let gtp_off = udp_off + udp::HEADER_LEN;
    let total = gtp_off + gtp.header_len();
    let udp_payload = gtp.buffer_len();
    let hdr = p.prepend(total)?;
    ethernet::Repr {
        src: src_mac,
        dst: dst_mac,
        ethertype: et,
    }
    .emit(hdr)
    .map_err(|_| EncapError::BadOuter)?;
    gtp.emit(&mut hdr[gtp_off..])
        .map_err(|_| EncapError::BadOuter)?;
    udp::Repr {
        src_port,
        dst_port: gtpu::PORT,
        payload_len: udp_payload,
    }
    .emit(&mut hdr[udp_off..])
    .map_err(|_| EncapError::BadOuter)?;
    match (outer.local, outer.peer) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => ipv4::Repr {
            src,
            dst,
            protocol: ip_protocol::UDP,
            payload_len: udp::HEADER_LEN + udp_payload,
            ttl: 64,
            dscp_ecn: 0,
            ident: 0,
            dont_frag: true,
        }
        .emit(&mut hdr[ethernet::HEADER_LEN..])
        .map_err(|_| EncapError::BadOuter)?,
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            ipv6::Repr {
                src,
                dst,
                next_header: ip_protocol::UDP,
                payload_len: udp::HEADER_LEN + udp_payload,
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
            }
            .emit(&mut hdr[ethernet::HEADER_LEN..])
            .map_err(|_| EncapError::BadOuter)?;
            // Over IPv6 a zero UDP checksum is not allowed for GTP-U (RFC 8200 section 8.1).
            udp::Packet::new_unchecked(&mut p.data_mut()[udp_off..]).fill_checksum_v6(src, dst);
        }
        _ => return Err(EncapError::BadOuter),
    }
    Ok(())
}

/// Ethernet + outer IPv4 + UDP + GTP-U with one PDU Session Container: what
/// [`encap_gtpu_v4`] prepends.
pub const V4_ENCAP_LEN: usize =
    ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN + GTPU_PSC_LEN;

/// An Ethernet header's two addresses as they are on the wire: destination, then source.
#[inline(always)]
pub fn eth_addrs(dst: MacAddr, src: MacAddr) -> [u8; 12] {
    let mut a = [0u8; 12];
    a[..6].copy_from_slice(&dst.0);
    a[6..].copy_from_slice(&src.0);
    a
}

/// [`encap_gtpu`] over IPv4 (`src` -> `dst`; `eth` the Ethernet addresses, [`eth_addrs`]),
/// written as one 58-byte header: the fields
/// that do not depend on the packet come from a template, the rest are stored in place and
/// the IPv4 header checksum (RFC 791, RFC 1071) is summed from the words that vary
/// (addresses, total length) plus the template's constant part. Same bytes as the
/// `Repr`-based emitters (`tests::v4_template_matches_reprs`). `qfi` must be at most 63
/// (6 bits, TS 38.415 5.5.3.3): the caller checks ([`encap_gtpu`] does).
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn encap_gtpu_v4<B: PacketBuf>(
    p: &mut B,
    teid: u32,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    qfi: u8,
    psc: Psc,
    src_port: u16,
    eth: &[u8; 12],
) -> Result<(), EncapError> {
    // Ethernet (14) | IPv4 (20) | UDP (8) | GTP-U (8 + 4 optional) | PSC (4).
    const T: [u8; V4_ENCAP_LEN] = {
        let mut t = [0u8; V4_ENCAP_LEN];
        t[12] = (ethertype::IPV4 >> 8) as u8;
        t[13] = ethertype::IPV4 as u8;
        t[14] = 0x45; // version 4, IHL 5
        t[20] = 0x40; // DF
        t[22] = 64; // TTL
        t[23] = ip_protocol::UDP;
        t[36] = (gtpu::PORT >> 8) as u8;
        t[37] = gtpu::PORT as u8;
        t[42] = 0x34; // version 1, PT, E
        t[43] = gtpu::msg_type::G_PDU;
        t[53] = gtpu::ext_type::PDU_SESSION_CONTAINER;
        t[54] = 1; // container length in 4-octet units
        t
    };
    // One's complement sum of the template's constant IPv4 words (0x4500, 0x4000, 0x4011),
    // each read little-endian (see the checksum below).
    const IP_CONST: u32 = u16::from_le_bytes([0x45, 0]) as u32
        + u16::from_le_bytes([0x40, 0]) as u32
        + u16::from_le_bytes([64, ip_protocol::UDP]) as u32;
    let inner_len = p.len();
    // The caller's (`encap_gtpu` refuses a larger one; a fast-path record is built only
    // with a QFI <= 63, and a received QFI is 6 bits).
    debug_assert!(qfi <= 63);
    let ip_len = ipv4::HEADER_LEN + udp::HEADER_LEN + GTPU_PSC_LEN + inner_len;
    let Ok(ip_len16) = u16::try_from(ip_len) else {
        return Err(EncapError::BadOuter);
    };
    let h = p.prepend(V4_ENCAP_LEN)?;
    let Some(h) = h.first_chunk_mut::<V4_ENCAP_LEN>() else {
        return Err(EncapError::BadOuter);
    };
    // The template from byte 10 (48 bytes: three 16-byte stores), then the addresses over
    // bytes 0..12.
    h[10..].copy_from_slice(&T[10..]);
    h[0..12].copy_from_slice(eth);
    let (s, d) = (src.octets(), dst.octets());
    let len = ip_len16.to_be_bytes();
    h[16..18].copy_from_slice(&len);
    // The header's words read little-endian, so the addresses are summed as they are
    // written (no byte swaps): a one's complement sum of byte-swapped words is the
    // byte-swapped sum (RFC 1071 section 2(B)), written back little-endian. The addresses
    // as 32-bit words: 2^16 = 1 in one's complement arithmetic (mod 0xffff), so their sum
    // folds to that of their 16-bit halves. Below 2^34: three folds.
    let mut sum = u64::from(IP_CONST + u32::from(u16::from_le_bytes(len)))
        + u64::from(u32::from_le_bytes(s))
        + u64::from(u32::from_le_bytes(d));
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    h[24..26].copy_from_slice(&(!(sum as u16)).to_le_bytes());
    h[26..30].copy_from_slice(&s);
    h[30..34].copy_from_slice(&d);
    h[34..36].copy_from_slice(&src_port.to_be_bytes());
    // UDP length; checksum 0 (RFC 768 allows it over IPv4).
    h[38..40].copy_from_slice(&(ip_len16 - ipv4::HEADER_LEN as u16).to_be_bytes());
    // GTP-U length: everything after the mandatory 8 octets.
    h[44..46]
        .copy_from_slice(&((inner_len + GTPU_PSC_LEN - gtpu::HEADER_LEN) as u16).to_be_bytes());
    h[46..50].copy_from_slice(&teid.to_be_bytes());
    h[55] = match psc {
        Psc::Dl => 0x00,
        Psc::Ul => 0x10,
    };
    h[56] = qfi;
    Ok(())
}

/// Turn a received UDP datagram around in place, after the caller wrote `udp_payload_len`
/// bytes of new UDP payload behind the UDP header at `l4` and sized the frame to end there:
/// swap the Ethernet addresses (source = `our_mac`), the IP addresses and set hop limit /
/// TTL 64, set the UDP ports and every length, and fill the IPv4 header checksum and the
/// UDP checksum (0 over IPv4, computed over IPv6). The outer IP header at `l3` must have
/// been checked by the caller (it was parsed to find `l4`).
pub fn reply_udp_in_place(
    data: &mut [u8],
    l3: usize,
    l4: usize,
    v6: bool,
    udp_payload_len: usize,
    ports: (u16, u16),
    our_mac: MacAddr,
) {
    let udp_len = udp::HEADER_LEN + udp_payload_len;
    {
        let mut f = ethernet::Frame::new_unchecked(&mut data[..]);
        let peer = f.src_addr();
        f.set_dst_addr(peer);
        f.set_src_addr(our_mac);
    }
    if v6 {
        let mut ip = ipv6::Packet::new_unchecked(&mut data[l3..]);
        let (s, d) = (ip.src_addr(), ip.dst_addr());
        ip.set_src_addr(d);
        ip.set_dst_addr(s);
        ip.set_hop_limit(64);
        ip.set_payload_len((l4 - l3 - ipv6::HEADER_LEN + udp_len) as u16);
        let mut u = udp::Packet::new_unchecked(&mut data[l4..l4 + udp_len]);
        u.set_src_port(ports.0);
        u.set_dst_port(ports.1);
        u.set_length(udp_len as u16);
        u.fill_checksum_v6(d, s);
    } else {
        let mut ip = ipv4::Packet::new_unchecked(&mut data[l3..]);
        let (s, d) = (ip.src_addr(), ip.dst_addr());
        ip.set_src_addr(d);
        ip.set_dst_addr(s);
        ip.set_ttl(64);
        ip.set_total_len((l4 - l3 + udp_len) as u16);
        ip.set_ident(0);
        ip.clear_flags();
        ip.fill_checksum();
        let mut u = udp::Packet::new_unchecked(&mut data[l4..l4 + udp_len]);
        u.set_src_port(ports.0);
        u.set_dst_port(ports.1);
        u.set_length(udp_len as u16);
        u.set_checksum(0);
    }
}

/// Replace the packet (exactly one IPv4 packet, from `src`) with an ICMPv4 Destination
/// Unreachable / Fragmentation Needed (RFC 792, RFC 1191 section 4) from `from` quoting as
/// much of it as fits in 576 bytes, in an Ethernet frame to `dst_mac`.
pub fn icmpv4_frag_needed<B: PacketBuf>(
    p: &mut B,
    from: Ipv4Addr,
    to: Ipv4Addr,
    mtu: u16,
    dst_mac: MacAddr,
    src_mac: MacAddr,
) -> Result<(), BufError> {
    let quote = p.len().min(icmpv4::MAX_QUOTE_LEN);
    set_len(p, quote)?;
    let hl = ethernet::HEADER_LEN + ipv4::HEADER_LEN + icmpv4::HEADER_LEN;
    p.prepend(hl)?;
    let data = p.data_mut();
    write_eth(data, dst_mac, src_mac, ethertype::IPV4);
    let _ = ipv4::Repr {
        src: from,
        dst: to,
        protocol: ip_protocol::ICMP,
        payload_len: icmpv4::HEADER_LEN + quote,
        ttl: 64,
        dscp_ecn: 0,
        ident: 0,
        dont_frag: false,
    }
    .emit(&mut data[ethernet::HEADER_LEN..]);
    let mut icmp =
        icmpv4::Packet::new_unchecked(&mut data[ethernet::HEADER_LEN + ipv4::HEADER_LEN..]);
    icmp.set_msg_type(icmpv4::msg_type::DST_UNREACHABLE);
    icmp.set_msg_code(icmpv4::unreachable::FRAG_NEEDED);
    icmp.set_rest_of_header(u32::from(mtu));
    icmp.fill_checksum();
    Ok(())
}

/// Replace the packet (exactly one IPv6 packet) with an ICMPv6 Packet Too Big (RFC 4443
/// section 3.2) from `from` to `to` quoting as much of it as fits in 1280 bytes.
pub fn icmpv6_too_big<B: PacketBuf>(
    p: &mut B,
    from: Ipv6Addr,
    to: Ipv6Addr,
    mtu: u32,
    dst_mac: MacAddr,
    src_mac: MacAddr,
) -> Result<(), BufError> {
    let quote = p.len().min(icmpv6::MAX_QUOTE_LEN);
    set_len(p, quote)?;
    let hl = ethernet::HEADER_LEN + ipv6::HEADER_LEN + icmpv6::HEADER_LEN;
    p.prepend(hl)?;
    let data = p.data_mut();
    write_eth(data, dst_mac, src_mac, ethertype::IPV6);
    let _ = ipv6::Repr {
        src: from,
        dst: to,
        next_header: ip_protocol::IPV6_ICMP,
        payload_len: icmpv6::HEADER_LEN + quote,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut data[ethernet::HEADER_LEN..]);
    let mut icmp =
        icmpv6::Packet::new_unchecked(&mut data[ethernet::HEADER_LEN + ipv6::HEADER_LEN..]);
    icmp.set_msg_type(icmpv6::msg_type::PKT_TOO_BIG);
    icmp.set_msg_code(0);
    icmp.set_rest_of_header(mtu);
    icmp.fill_checksum(from, to);
    Ok(())
}

/// [`write_eth`] with the two addresses as [`eth_addrs`] gives them, into `h` (the header
/// `prepend` made room for).
#[inline(always)]
pub fn write_eth_addrs(h: &mut [u8; ethernet::HEADER_LEN], eth: [u8; 12], et: u16) {
    h[..12].copy_from_slice(&eth);
    h[12..].copy_from_slice(&et.to_be_bytes());
}

/// Write an Ethernet header at the start of `data` (at least 14 bytes).
pub fn write_eth(data: &mut [u8], dst: MacAddr, src: MacAddr, et: u16) {
    let mut f = ethernet::Frame::new_unchecked(data);
    f.set_dst_addr(dst);
    f.set_src_addr(src);
    f.set_ethertype(et);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::OwnedBuf;

    /// The G-PDU header over IPv4 as the wire crate's `Repr` emitters write it.
    fn by_reprs(o: &OuterHeader, qfi: u8, psc: Psc, sport: u16, inner: usize) -> Vec<u8> {
        let (IpAddr::V4(src), IpAddr::V4(dst)) = (o.local, o.peer) else {
            unreachable!()
        };
        let gtp = g_pdu(o.teid, qfi, psc, inner);
        let mut h = vec![0u8; V4_ENCAP_LEN];
        ethernet::Repr {
            src: MacAddr([2, 0, 0, 0, 0, 1]),
            dst: MacAddr([2, 0, 0, 0, 0, 2]),
            ethertype: ethertype::IPV4,
        }
        .emit(&mut h)
        .unwrap();
        gtp.emit(&mut h[42..]).unwrap();
        udp::Repr {
            src_port: sport,
            dst_port: gtpu::PORT,
            payload_len: gtp.buffer_len(),
        }
        .emit(&mut h[34..])
        .unwrap();
        ipv4::Repr {
            src,
            dst,
            protocol: ip_protocol::UDP,
            payload_len: udp::HEADER_LEN + gtp.buffer_len(),
            ttl: 64,
            dscp_ecn: 0,
            ident: 0,
            dont_frag: true,
        }
        .emit(&mut h[14..])
        .unwrap();
        h
    }

    #[test]
    fn v4_template_matches_reprs() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for i in 0..2000 {
            let r = next();
            let (peer, local) = match i % 7 {
                // The largest sums (every fold carries) and the smallest.
                0 => (u32::MAX, u32::MAX),
                1 => (0, 0),
                _ => ((r >> 32) as u32, next() as u32),
            };
            let o = OuterHeader {
                teid: r as u32,
                peer: IpAddr::V4(Ipv4Addr::from(peer)),
                local: IpAddr::V4(Ipv4Addr::from(local)),
            };
            let qfi = (r >> 7) as u8 & 63;
            let psc = if i % 2 == 0 { Psc::Dl } else { Psc::Ul };
            let sport = (r >> 40) as u16;
            // Extremes of the addresses and lengths (checksum carries) beside random ones.
            let inner = [0usize, 1, 20, 1400, 9000, 65_000][i % 6];
            let mut b = OwnedBuf::with_capacity(128, 65_536);
            b.append(inner).unwrap();
            let (d, s) = (MacAddr([2, 0, 0, 0, 0, 2]), MacAddr([2, 0, 0, 0, 0, 1]));
            encap_gtpu(&mut b, &o, qfi, psc, sport, d, s).unwrap();
            let want = by_reprs(&o, qfi, psc, sport, inner);
            assert_eq!(&b.data()[..V4_ENCAP_LEN], &want[..], "case {i}");
            assert_eq!(b.len(), V4_ENCAP_LEN + inner);
        }
        // Too long for IPv4, a QFI above 63: refused.
        let o = OuterHeader {
            teid: 1,
            peer: IpAddr::V4(Ipv4Addr::BROADCAST),
            local: IpAddr::V4(Ipv4Addr::BROADCAST),
        };
        let mut b = OwnedBuf::with_capacity(128, 70_000);
        b.append(65_500).unwrap();
        let m = MacAddr::default();
        assert_eq!(
            encap_gtpu(&mut b, &o, 1, Psc::Dl, 1, m, m),
            Err(EncapError::BadOuter)
        );
        let mut b = OwnedBuf::with_capacity(128, 100);
        assert_eq!(
            encap_gtpu(&mut b, &o, 64, Psc::Dl, 1, m, m),
            Err(EncapError::BadOuter)
        );
    }
}
