//! UDP (RFC 768) with checksums over IPv4 and IPv6 pseudo-headers.
//!
//! Checksum rules:
//! - the checksum covers the pseudo-header, the UDP header and the payload, up to the UDP
//!   length field (RFC 768 "Fields"; IPv4 pseudo-header RFC 768, IPv6 RFC 8200 section 8.1);
//! - a computed checksum of 0 is transmitted as `0xffff` (RFC 768, RFC 8200 section 8.1);
//! - over IPv4 a received checksum of 0 means "no checksum" and is accepted (RFC 768);
//! - over IPv6 a received checksum of 0 is invalid (RFC 8200 section 8.1; the RFC 6935/6936
//!   tunnel exception is not applied here).

use crate::checksum;
use crate::{be16, put16, Error, Result};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IP protocol / IPv6 next-header number of UDP (IANA), used in the pseudo-header.
const IP_PROTOCOL: u8 = crate::ipv4::ip_protocol::UDP;

mod field {
    use core::ops::{Range, RangeFrom};
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
    pub const PAYLOAD: RangeFrom<usize> = 8..;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A read/write view of a UDP datagram (RFC 768).
///
/// After [`Packet::new_checked`] the length field is at least [`HEADER_LEN`] and no larger
/// than the buffer; trailing bytes beyond it (e.g. Ethernet padding) are ignored.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking; accessors may panic on short buffers. Prefer [`Packet::new_checked`].
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap and check the header and the length field (see [`Packet::check_len`]).
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` if the buffer is shorter than the header or than the length field says;
    /// `Malformed` if the length field is below [`HEADER_LEN`].
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = be16(&buf[field::LENGTH]) as usize;
        if len < HEADER_LEN {
            Err(Error::Malformed)
        } else if len > buf.len() {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn src_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::SRC_PORT])
    }

    pub fn dst_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::DST_PORT])
    }

    /// The length field: header plus payload, in bytes.
    pub fn length(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// The checksum field as received.
    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    /// The payload, bounded by the length field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.length() as usize]
    }

    /// Header and payload, bounded by the length field: the bytes the checksum covers.
    fn datagram(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.length() as usize]
    }

    /// One's-complement sum of the datagram plus the given pseudo-header sum.
    fn sum_with(&self, pseudo: u32) -> u16 {
        checksum::fold(checksum::combine(pseudo, checksum::sum(self.datagram())))
    }

    /// Verify the checksum over the IPv4 pseudo-header (RFC 768). A zero checksum field
    /// means the sender did not compute one and is accepted.
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        self.sum_with(checksum::pseudo_v4(
            src.octets(),
            dst.octets(),
            IP_PROTOCOL,
            self.length(),
        )) == 0xffff
    }

    /// Verify the checksum over the IPv6 pseudo-header (RFC 8200 section 8.1). A zero
    /// checksum field is invalid over IPv6.
    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        if self.checksum() == 0 {
            return false;
        }
        let pseudo = checksum::pseudo_v6(
            src.octets(),
            dst.octets(),
            IP_PROTOCOL,
            self.length() as u32,
        );
        self.sum_with(pseudo) == 0xffff
    }

    /// Verify over whichever pseudo-header the address family selects. Mixed families
    /// (one IPv4, one IPv6 address) never verify.
    pub fn verify_checksum(&self, src: IpAddr, dst: IpAddr) -> bool {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => self.verify_checksum_v4(s, d),
            (IpAddr::V6(s), IpAddr::V6(d)) => self.verify_checksum_v6(s, d),
            _ => false,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::SRC_PORT], v);
    }

    pub fn set_dst_port(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::DST_PORT], v);
    }

    pub fn set_length(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::LENGTH], v);
    }

    pub fn set_checksum(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::CHECKSUM], v);
    }

    /// The payload, bounded by the length field.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = self.length() as usize;
        &mut self.buffer.as_mut()[HEADER_LEN..len]
    }

    /// Compute and store the checksum for the given pseudo-header sum; 0 is sent as 0xffff.
    fn fill_with(&mut self, pseudo: u32) {
        self.set_checksum(0);
        let c = !self.sum_with(pseudo);
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }

    /// Compute the checksum over the IPv4 pseudo-header (RFC 768) and store it. The length
    /// field and the payload must already be in place.
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let pseudo = checksum::pseudo_v4(src.octets(), dst.octets(), IP_PROTOCOL, self.length());
        self.fill_with(pseudo);
    }

    /// Compute the checksum over the IPv6 pseudo-header (RFC 8200 section 8.1) and store it.
    /// The length field and the payload must already be in place.
    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        let pseudo = checksum::pseudo_v6(
            src.octets(),
            dst.octets(),
            IP_PROTOCOL,
            self.length() as u32,
        );
        self.fill_with(pseudo);
    }

    /// Fill over whichever pseudo-header the address family selects. Mixed families are
    /// rejected with `Error::Malformed` and leave the packet untouched.
    pub fn fill_checksum(&mut self, src: IpAddr, dst: IpAddr) -> Result<()> {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => self.fill_checksum_v4(s, d),
            (IpAddr::V6(s), IpAddr::V6(d)) => self.fill_checksum_v6(s, d),
            _ => return Err(Error::Malformed),
        }
        Ok(())
    }
}

/// High-level representation of a UDP header (RFC 768).
///
/// [`Repr::parse`] does not verify the checksum (use [`Packet::verify_checksum_v4`] /
/// [`Packet::verify_checksum_v6`]); [`Repr::emit`] writes a zero checksum, to be filled with
/// [`Packet::fill_checksum_v4`] / [`Packet::fill_checksum_v6`] once the payload is in place
/// (or left 0 over IPv4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    /// Payload length in bytes (the length field minus [`HEADER_LEN`]).
    pub payload_len: usize,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: packet.length() as usize - HEADER_LEN,
        })
    }

    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload: the value of the length field.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Write the header into the first [`HEADER_LEN`] bytes of `buf`, with a zero checksum.
    /// `Error::Malformed` if the payload does not fit the 16-bit length field.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() < HEADER_LEN {
            return Err(Error::BufferTooSmall);
        }
        let len = u16::try_from(self.buffer_len()).map_err(|_| Error::Malformed)?;
        let mut p = Packet::new_unchecked(buf);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_length(len);
        p.set_checksum(0);
        Ok(())
    }
}

/// Fuzz entry: parse, read every field, verify checksums, re-emit. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let _ = (p.src_port(), p.dst_port(), p.checksum(), p.payload().len());
    let a4 = Ipv4Addr::new(10, 0, 0, 1);
    let b4 = Ipv4Addr::new(10, 0, 0, 2);
    let a6 = Ipv6Addr::LOCALHOST;
    let _ = p.verify_checksum_v4(a4, b4);
    let _ = p.verify_checksum_v6(a6, a6);
    let _ = p.verify_checksum(IpAddr::V4(a4), IpAddr::V6(a6));
    let r = Repr::parse(&p).expect("checked packet parses");
    assert_eq!(r.buffer_len(), p.length() as usize);

    let mut hdr = [0u8; HEADER_LEN];
    r.emit(&mut hdr).expect("header fits");
    assert_eq!(&hdr[..6], &data[..6]);

    // Round-trip the whole datagram when it is small enough for a stack buffer, and check
    // that a filled checksum verifies.
    let mut out = [0u8; 256];
    let n = r.buffer_len();
    if n <= out.len() {
        r.emit(&mut out[..n]).expect("fits");
        out[HEADER_LEN..n].copy_from_slice(p.payload());
        let mut q = Packet::new_checked(&mut out[..n]).expect("emitted datagram checks");
        assert_eq!(Repr::parse(&q), Ok(r));
        q.fill_checksum_v4(a4, b4);
        assert!(q.verify_checksum_v4(a4, b4));
        q.fill_checksum_v6(a6, a6);
        assert!(q.verify_checksum_v6(a6, a6));
        assert_ne!(q.checksum(), 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // DNS query 192.168.1.10:51234 -> 8.8.8.8:53, hand-computed checksum.
    // UDP: src 0xc822, dst 0x0035, len 0x000c, csum ?, payload "abcd".
    fn v4_vector() -> ([u8; 12], Ipv4Addr, Ipv4Addr) {
        let mut d = [
            0xc8, 0x22, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, b'a', b'b', b'c', b'd',
        ];
        // Pseudo-header: c0a8 + 010a + 0808 + 0808 + 0011 + 000c = 0xd1df
        // UDP: c822 + 0035 + 000c + 0000 + 6162 + 6364 = 0x1_8d29 -> 0x8d2a
        // Total: 0xd1df + 0x8d2a = 0x1_5f09 -> 0x5f0a; checksum = !0x5f0a = 0xa0f5.
        d[6] = 0xa0;
        d[7] = 0xf5;
        (d, Ipv4Addr::new(192, 168, 1, 10), Ipv4Addr::new(8, 8, 8, 8))
    }

    #[test]
    fn parse_fields() {
        let (d, _, _) = v4_vector();
        let p = Packet::new_checked(&d[..]).unwrap();
        assert_eq!(p.src_port(), 51234);
        assert_eq!(p.dst_port(), 53);
        assert_eq!(p.length(), 12);
        assert_eq!(p.checksum(), 0xa0f5);
        assert_eq!(p.payload(), b"abcd");
        assert_eq!(
            Repr::parse(&p),
            Ok(Repr {
                src_port: 51234,
                dst_port: 53,
                payload_len: 4
            })
        );
    }

    #[test]
    fn checksum_v4_hand_computed() {
        let (d, s, t) = v4_vector();
        let p = Packet::new_checked(&d[..]).unwrap();
        assert!(p.verify_checksum_v4(s, t));
        assert!(p.verify_checksum(IpAddr::V4(s), IpAddr::V4(t)));
        assert!(!p.verify_checksum_v4(s, Ipv4Addr::new(8, 8, 4, 4)));

        let mut e = d;
        e[6] = 0;
        e[7] = 0;
        let mut q = Packet::new_checked(&mut e[..]).unwrap();
        q.fill_checksum_v4(s, t);
        assert_eq!(q.checksum(), 0xa0f5);
        assert_eq!(e, d);
    }

    #[test]
    fn checksum_v4_zero_means_none() {
        let (mut d, s, t) = v4_vector();
        d[6] = 0;
        d[7] = 0;
        let p = Packet::new_checked(&d[..]).unwrap();
        assert!(p.verify_checksum_v4(s, t));
        assert!(p.verify_checksum_v4(Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST));
    }

    // GTP-U-sized datagram over IPv6: 2001:db8::1 -> 2001:db8::2, ports 2152 -> 2152,
    // payload 00 01 02 03. Hand computation:
    //   src: 2001 + 0db8 + 0001 = 0x2dba; dst: 2001 + 0db8 + 0002 = 0x2dbb
    //   len 0x000c, next header 0x0011
    //   UDP: 0868 + 0868 + 000c + 0000 + 0001 + 0203 = 0x12e0
    //   total: 0x2dba + 0x2dbb + 0x000c + 0x0011 + 0x12e0 = 0x6e72; checksum = 0x918d.
    const V6: [u8; 12] = [
        0x08, 0x68, 0x08, 0x68, 0x00, 0x0c, 0x91, 0x8d, 0x00, 0x01, 0x02, 0x03,
    ];

    fn v6_addrs() -> (Ipv6Addr, Ipv6Addr) {
        (
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2),
        )
    }

    #[test]
    fn checksum_v6_hand_computed() {
        let (s, t) = v6_addrs();
        let p = Packet::new_checked(&V6[..]).unwrap();
        assert!(p.verify_checksum_v6(s, t));
        assert!(p.verify_checksum(IpAddr::V6(s), IpAddr::V6(t)));
        assert!(!p.verify_checksum_v6(t, Ipv6Addr::LOCALHOST));
        // Mixed families never verify.
        assert!(!p.verify_checksum(IpAddr::V6(s), IpAddr::V4(Ipv4Addr::LOCALHOST)));

        let mut e = V6;
        e[6] = 0xaa;
        let mut q = Packet::new_checked(&mut e[..]).unwrap();
        q.fill_checksum(IpAddr::V6(s), IpAddr::V6(t)).unwrap();
        assert_eq!(e, V6);
    }

    #[test]
    fn checksum_v6_zero_invalid() {
        let (s, t) = v6_addrs();
        let mut d = V6;
        d[6] = 0;
        d[7] = 0;
        assert!(!Packet::new_checked(&d[..])
            .unwrap()
            .verify_checksum_v6(s, t));
    }

    /// A datagram whose checksum computes to 0 is sent as 0xffff, which verifies.
    #[test]
    fn computed_zero_sent_as_ffff() {
        // Over 0.0.0.0 -> 0.0.0.0 the pseudo-header sums to 0x0011 + 0x000a = 0x001b.
        // Header: ports 0, len 0x000a, checksum 0; payload word P. Sum = 0x001b + 0x000a + P.
        // Choose P so the sum is 0xffff: P = 0xffff - 0x0025 = 0xffda.
        let mut d = [0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x00, 0xff, 0xda];
        let z = Ipv4Addr::UNSPECIFIED;
        let mut p = Packet::new_checked(&mut d[..]).unwrap();
        p.fill_checksum_v4(z, z);
        assert_eq!(p.checksum(), 0xffff);
        assert!(p.verify_checksum_v4(z, z));
        let zz = Ipv6Addr::UNSPECIFIED;
        // Over :: -> :: the pseudo-header sum is the same (0x000a + 0x0011).
        p.fill_checksum_v6(zz, zz);
        assert_eq!(p.checksum(), 0xffff);
        assert!(p.verify_checksum_v6(zz, zz));
    }

    #[test]
    fn length_field_bounds_payload() {
        // Length 9 inside an 12-byte buffer (Ethernet-style trailing padding).
        let d = [0, 1, 0, 2, 0, 9, 0, 0, 0x42, 0xee, 0xee, 0xee];
        let p = Packet::new_checked(&d[..]).unwrap();
        assert_eq!(p.payload(), &[0x42]);
        assert_eq!(Repr::parse(&p).unwrap().payload_len, 1);
    }

    #[test]
    fn bad_lengths() {
        let (d, _, _) = v4_vector();
        assert_eq!(Packet::new_checked(&d[..7]).unwrap_err(), Error::Truncated);
        // Length field larger than the buffer.
        assert_eq!(Packet::new_checked(&d[..11]).unwrap_err(), Error::Truncated);
        // Length field below the header size.
        let mut e = d;
        e[5] = 7;
        assert_eq!(Packet::new_checked(&e[..]).unwrap_err(), Error::Malformed);
        e[5] = 8;
        assert_eq!(Packet::new_checked(&e[..]).unwrap().payload(), &[] as &[u8]);
    }

    #[test]
    fn emit_then_fill() {
        let (d, s, t) = v4_vector();
        let r = Repr {
            src_port: 51234,
            dst_port: 53,
            payload_len: 4,
        };
        assert_eq!(r.buffer_len(), 12);
        let mut buf = [0xffu8; 12];
        r.emit(&mut buf[..8]).unwrap();
        buf[8..].copy_from_slice(b"abcd");
        Packet::new_checked(&mut buf[..])
            .unwrap()
            .fill_checksum_v4(s, t);
        assert_eq!(buf, d);
        assert_eq!(r.emit(&mut [0u8; 7]), Err(Error::BufferTooSmall));
        let big = Repr {
            payload_len: 65536 - 8,
            ..r
        };
        assert_eq!(big.emit(&mut [0u8; 8]), Err(Error::Malformed));
        assert_eq!(
            Packet::new_unchecked(&mut [0u8; 8][..])
                .fill_checksum(IpAddr::V4(s), IpAddr::V6(Ipv6Addr::LOCALHOST)),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn fuzz_vectors() {
        let (d, _, _) = v4_vector();
        fuzz(&d);
        fuzz(&V6);
        for n in 0..d.len() {
            fuzz(&d[..n]);
        }
    }
}
