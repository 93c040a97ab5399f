//! Full-stack parsers for the frames the generator makes, verifying every checksum on the
//! way: what the tests, the benchmarks and UPF tests check generated traffic with.

use peregrine_wire::ethernet::ethertype;
use peregrine_wire::ipv4::ip_protocol;
use peregrine_wire::{gtpu, ipv4, ipv6, ipv6ext, pdu_session, tcp, udp, vlan, Error};
use std::fmt;
use std::net::IpAddr;

/// The header a parse failed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Ethernet,
    /// The N3 transport IP header (or the only IP header, for [`dl_frame`]).
    OuterIp,
    OuterUdp,
    Gtpu,
    /// The user packet's IP header.
    InnerIp,
    /// The user packet's transport header.
    InnerL4,
}

/// A parse failure: where, and why ([`Error::Checksum`] for a checksum that does not
/// verify, [`Error::Unsupported`] for a header of a kind the parser does not follow).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseError {
    pub layer: Layer,
    pub error: Error,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.layer, self.error)
    }
}

impl std::error::Error for ParseError {}

fn at(layer: Layer) -> impl Fn(Error) -> ParseError {
    move |error| ParseError { layer, error }
}

/// An IP header, extension headers walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpInfo {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// TTL or hop limit.
    pub ttl: u8,
    /// The upper-layer protocol (after any IPv6 extension headers).
    pub protocol: u8,
    /// Header length, IPv6 extension headers included.
    pub header_len: usize,
    /// Total Length, or 40 + Payload Length.
    pub total_len: usize,
}

/// A UDP or TCP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L4Info {
    pub protocol: u8,
    pub src_port: u16,
    pub dst_port: u16,
    pub payload_len: usize,
}

/// An IP packet carrying UDP or TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpPacketInfo {
    pub ip: IpInfo,
    pub l4: L4Info,
}

/// An uplink G-PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UlInfo {
    pub outer: IpInfo,
    pub teid: u32,
    pub pdu_session: Option<pdu_session::Repr>,
    pub inner: IpPacketInfo,
}

/// Parse an IPv4 (checksum verified, fragments `Unsupported`) or IPv6 header (extension
/// headers walked); returns it and the upper-layer bytes.
pub fn ip(bytes: &[u8], layer: Layer) -> Result<(IpInfo, &[u8]), ParseError> {
    let e = at(layer);
    match bytes.first().map(|b| b >> 4) {
        Some(4) => {
            let p = ipv4::Packet::new_checked(bytes).map_err(&e)?;
            let r = ipv4::Repr::parse(&p).map_err(&e)?;
            let info = IpInfo {
                src: r.src.into(),
                dst: r.dst.into(),
                ttl: r.ttl,
                protocol: r.protocol,
                header_len: p.header_len(),
                total_len: p.total_len() as usize,
            };
            // Bounds checked by `new_checked`; sliced from `bytes` to keep its lifetime.
            Ok((info, &bytes[info.header_len..info.total_len]))
        }
        Some(6) => {
            let p = ipv6::Packet::new_checked(bytes).map_err(&e)?;
            let payload = &bytes[ipv6::HEADER_LEN..p.total_len()];
            let mut w = ipv6ext::walk(p.next_header(), payload);
            for h in &mut w {
                h.map_err(&e)?;
            }
            if w.later_fragment() {
                return Err(e(Error::Unsupported));
            }
            let (protocol, off) = w.upper().ok_or(e(Error::Malformed))?;
            let info = IpInfo {
                src: p.src_addr().into(),
                dst: p.dst_addr().into(),
                ttl: p.hop_limit(),
                protocol,
                header_len: ipv6::HEADER_LEN + off,
                total_len: p.total_len(),
            };
            Ok((info, payload.get(off..).unwrap_or(&[])))
        }
        Some(_) => Err(e(Error::Malformed)),
        None => Err(e(Error::Truncated)),
    }
}

/// Parse a UDP or TCP header over `seg` (the IP payload) and verify its checksum.
pub fn l4(ip: &IpInfo, seg: &[u8], layer: Layer) -> Result<L4Info, ParseError> {
    let e = at(layer);
    match ip.protocol {
        ip_protocol::UDP => {
            let p = udp::Packet::new_checked(seg).map_err(&e)?;
            if !p.verify_checksum(ip.src, ip.dst) {
                return Err(e(Error::Checksum));
            }
            Ok(L4Info {
                protocol: ip.protocol,
                src_port: p.src_port(),
                dst_port: p.dst_port(),
                payload_len: p.payload().len(),
            })
        }
        ip_protocol::TCP => {
            let p = tcp::Packet::new_checked(seg).map_err(&e)?;
            if !p.verify_checksum(ip.src, ip.dst) {
                return Err(e(Error::Checksum));
            }
            Ok(L4Info {
                protocol: ip.protocol,
                src_port: p.src_port(),
                dst_port: p.dst_port(),
                payload_len: p.payload().len(),
            })
        }
        _ => Err(e(Error::Unsupported)),
    }
}

/// Parse a user IP packet (IP, then UDP or TCP), reporting failures at `ip_layer` and
/// `l4_layer`.
pub fn ip_packet(
    bytes: &[u8],
    ip_layer: Layer,
    l4_layer: Layer,
) -> Result<IpPacketInfo, ParseError> {
    let (ip, seg) = ip(bytes, ip_layer)?;
    let l4 = l4(&ip, seg, l4_layer)?;
    Ok(IpPacketInfo { ip, l4 })
}

/// The IP packet of an Ethernet frame (802.1Q tags skipped); `Unsupported` at the
/// Ethernet layer for other EtherTypes.
pub fn l3(frame: &[u8]) -> Result<&[u8], ParseError> {
    let e = at(Layer::Ethernet);
    let (off, ty) = vlan::l3_offset(frame).map_err(&e)?;
    match ty {
        ethertype::IPV4 | ethertype::IPV6 => Ok(&frame[off..]),
        _ => Err(e(Error::Unsupported)),
    }
}

/// A downlink frame: Ethernet / IP / UDP or TCP.
pub fn dl_frame(frame: &[u8]) -> Result<IpPacketInfo, ParseError> {
    ip_packet(l3(frame)?, Layer::OuterIp, Layer::InnerL4)
}

/// An N3 frame up to its GTP-U header: Ethernet / IP / UDP to port 2152 (checksum
/// verified) / GTP-U (validated, extension chain walked).
pub fn n3_gtpu(frame: &[u8]) -> Result<(IpInfo, gtpu::Header<&[u8]>), ParseError> {
    let (outer, seg) = ip(l3(frame)?, Layer::OuterIp)?;
    let e = at(Layer::OuterUdp);
    if outer.protocol != ip_protocol::UDP {
        return Err(e(Error::Unsupported));
    }
    let u = udp::Packet::new_checked(seg).map_err(&e)?;
    if u.dst_port() != gtpu::PORT {
        return Err(e(Error::Unsupported));
    }
    if !u.verify_checksum(outer.src, outer.dst) {
        return Err(e(Error::Checksum));
    }
    let h = gtpu::Header::new_checked(&seg[udp::HEADER_LEN..u.length() as usize])
        .map_err(at(Layer::Gtpu))?;
    Ok((outer, h))
}

/// An uplink G-PDU frame, down to the user packet's transport header.
pub fn ul_frame(frame: &[u8]) -> Result<UlInfo, ParseError> {
    let (outer, h) = n3_gtpu(frame)?;
    let e = at(Layer::Gtpu);
    if h.msg_type() != gtpu::msg_type::G_PDU {
        return Err(e(Error::Unsupported));
    }
    let pdu_session = h.pdu_session().map_err(&e)?;
    let inner = ip_packet(h.payload(), Layer::InnerIp, Layer::InnerL4)?;
    Ok(UlInfo {
        outer,
        teid: h.teid(),
        pdu_session,
        inner,
    })
}
