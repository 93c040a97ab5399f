//! IPv6 fixed header (RFC 8200 section 3).
//!
//! Extension headers are in [`crate::ipv6ext`]. The payload is bounded by Payload Length, so
//! Ethernet padding after the packet is not part of it. Jumbograms (RFC 2675, Payload Length
//! 0 plus a Hop-by-Hop option) are not supported: a zero Payload Length means an empty payload.

pub use crate::ipv4::ip_protocol;
use crate::{be16, be32, put16, put32, Error, Result};
use core::net::Ipv6Addr;

mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = field::DST.end;
/// Largest flow label (20 bits).
pub const FLOW_LABEL_MAX: u32 = 0x000f_ffff;
/// The minimum link MTU every IPv6 link must support (RFC 8200 section 5).
pub const MIN_MTU: usize = 1280;

/// A read/write view of an IPv6 packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking; fixed-field accessors may panic on short buffers. Prefer
    /// [`Packet::new_checked`].
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap and validate: version 6, fixed header and Payload Length within the buffer.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// A buffer longer than header + Payload Length is accepted (link padding).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::Malformed);
        }
        if len < self.total_len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn ver_tc_flow(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::VER_TC_FLOW])
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic Class: DSCP (RFC 2474) in the top six bits, ECN (RFC 3168) below.
    pub fn traffic_class(&self) -> u8 {
        (self.ver_tc_flow() >> 20) as u8
    }

    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 0x03
    }

    /// Flow Label (20 bits, RFC 6437).
    pub fn flow_label(&self) -> u32 {
        self.ver_tc_flow() & FLOW_LABEL_MAX
    }

    /// Payload Length: bytes after the fixed header, extension headers included.
    pub fn payload_len(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// Fixed header plus Payload Length.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + self.payload_len() as usize
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    pub fn src_addr(&self) -> Ipv6Addr {
        addr(&self.buffer.as_ref()[field::SRC])
    }

    pub fn dst_addr(&self) -> Ipv6Addr {
        addr(&self.buffer.as_ref()[field::DST])
    }

    /// The payload (extension headers and upper layer), bounded by Payload Length.
    pub fn payload(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(HEADER_LEN..self.total_len())
            .unwrap_or(&[])
    }
}

fn addr(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    Ipv6Addr::from(a)
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_ver_tc_flow(&mut self, v: u32) {
        put32(&mut self.buffer.as_mut()[field::VER_TC_FLOW], v);
    }

    /// Set the version nibble to 6.
    pub fn set_version(&mut self) {
        self.set_ver_tc_flow((self.ver_tc_flow() & 0x0fff_ffff) | 0x6000_0000);
    }

    pub fn set_traffic_class(&mut self, tc: u8) {
        self.set_ver_tc_flow((self.ver_tc_flow() & 0xf00f_ffff) | ((tc as u32) << 20));
    }

    /// Set the flow label; bits above the low twenty are ignored.
    pub fn set_flow_label(&mut self, fl: u32) {
        self.set_ver_tc_flow((self.ver_tc_flow() & !FLOW_LABEL_MAX) | (fl & FLOW_LABEL_MAX));
    }

    pub fn set_payload_len(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::LENGTH], v);
    }

    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = v;
    }

    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }

    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.octets());
    }

    /// Forwarding step of RFC 8200 section 3: decrement Hop Limit (there is no header
    /// checksum). Returns the new value, or `None` (unchanged) if it was already 0. A router
    /// must not forward when this returns `Some(0)`; it sends Time Exceeded instead.
    pub fn decrement_hop_limit(&mut self) -> Option<u8> {
        let hl = self.hop_limit().checked_sub(1)?;
        self.set_hop_limit(hl);
        Some(hl)
    }

    /// Mutable payload, bounded by Payload Length.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.total_len();
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..end)
            .unwrap_or_default()
    }
}

/// High-level representation of the fixed IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    /// The first extension header or the upper-layer protocol ([`ip_protocol`]).
    pub next_header: u8,
    /// Bytes after the fixed header, extension headers included.
    pub payload_len: usize,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: packet.payload_len() as usize,
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Write the 40-byte fixed header into the start of `buf`; the payload is the caller's.
    /// A payload over 65535 bytes or a flow label over 20 bits is `Malformed`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if self.payload_len > u16::MAX as usize || self.flow_label > FLOW_LABEL_MAX {
            return Err(Error::Malformed);
        }
        if buf.len() < HEADER_LEN {
            return Err(Error::BufferTooSmall);
        }
        let mut p = Packet::new_unchecked(&mut buf[..HEADER_LEN]);
        p.set_ver_tc_flow(0x6000_0000 | ((self.traffic_class as u32) << 20) | self.flow_label);
        p.set_payload_len(self.payload_len as u16);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_addr(self.src);
        p.set_dst_addr(self.dst);
        Ok(())
    }
}

#[cfg(any(test, feature = "fuzzing"))]
/// Largest packet the fuzz round-trip re-parses (it needs the whole packet in a stack buffer).
const FUZZ_BUF: usize = 4096;

/// Fuzz entry: check, read every field, parse, emit, re-parse. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.version(),
        p.dscp(),
        p.ecn(),
        p.flow_label(),
        p.next_header(),
        p.hop_limit(),
    );
    let _ = (p.src_addr(), p.dst_addr());
    assert_eq!(p.payload().len(), p.payload_len() as usize);
    let r = Repr::parse(&p).expect("checked packet parses");
    let mut buf = [0u8; FUZZ_BUF];
    if r.buffer_len() <= buf.len() {
        r.emit(&mut buf).expect("header fits");
        assert_eq!(&buf[..HEADER_LEN], &data[..HEADER_LEN]);
        let p2 = Packet::new_checked(&buf[..r.buffer_len()]).expect("emitted header checks");
        assert_eq!(Repr::parse(&p2), Ok(r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // ICMPv6 echo request fe80::1 -> ff02::1 (hop limit 64, traffic class 0xb8, flow label
    // 0x12345) with an 8-byte ICMPv6 header and 4 data bytes.
    static PACKET: [u8; 52] = [
        0x6b, 0x81, 0x23, 0x45, 0x00, 0x0c, 0x3a, 0x40, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0x01, 0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x80, 0x00, 0x00,
        0x00, 0x12, 0x34, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef,
    ];

    fn repr() -> Repr {
        Repr {
            src: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1),
            dst: Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
            next_header: ip_protocol::IPV6_ICMP,
            payload_len: 12,
            hop_limit: 64,
            traffic_class: 0xb8,
            flow_label: 0x12345,
        }
    }

    #[test]
    fn parse_fields() {
        let p = Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.dscp(), 46);
        assert_eq!(p.ecn(), 0);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 12);
        assert_eq!(p.next_header(), 58);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.payload(), &PACKET[40..]);
        assert_eq!(Repr::parse(&p), Ok(repr()));
    }

    #[test]
    fn emit_roundtrip() {
        let mut buf = [0u8; 40];
        repr().emit(&mut buf).unwrap();
        assert_eq!(&buf, &PACKET[..40]);
        assert_eq!(repr().emit(&mut [0u8; 39]), Err(Error::BufferTooSmall));
        let bad = Repr {
            flow_label: 0x10_0000,
            ..repr()
        };
        assert_eq!(bad.emit(&mut buf), Err(Error::Malformed));
        let bad = Repr {
            payload_len: 65536,
            ..repr()
        };
        assert_eq!(bad.emit(&mut buf), Err(Error::Malformed));
    }

    #[test]
    fn setters() {
        let mut buf = [0u8; 40];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_version();
        p.set_flow_label(0xfffff);
        p.set_traffic_class(0xff);
        assert_eq!(p.flow_label(), 0xfffff);
        p.set_traffic_class(0x01);
        p.set_flow_label(0x00001);
        assert_eq!((p.version(), p.traffic_class(), p.flow_label()), (6, 1, 1));
        p.set_hop_limit(1);
        assert_eq!(p.decrement_hop_limit(), Some(0));
        assert_eq!(p.decrement_hop_limit(), None);
        assert_eq!(p.hop_limit(), 0);
    }

    #[test]
    fn padding_and_truncation() {
        let mut padded = [0u8; 64];
        padded[..52].copy_from_slice(&PACKET);
        let p = Packet::new_checked(&padded[..]).unwrap();
        assert_eq!(p.payload(), &PACKET[40..]);
        assert_eq!(
            Packet::new_checked(&PACKET[..39]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&PACKET[..51]).unwrap_err(),
            Error::Truncated
        );
        let mut v4 = PACKET;
        v4[0] = 0x4b;
        assert_eq!(Packet::new_checked(&v4[..]).unwrap_err(), Error::Malformed);
    }

    #[test]
    fn fuzz_smoke() {
        for n in 0..=PACKET.len() {
            fuzz(&PACKET[..n]);
        }
    }
}
