//! TCP header (RFC 9293): ports, sequence numbers, flags; options are skipped.
//!
//! The view covers one whole segment: the buffer is taken to be exactly the IP payload,
//! since TCP has no length field of its own and the checksum (RFC 9293 section 3.1,
//! "Checksum") covers the pseudo-header, the header with options, and all the data.

use crate::checksum;
use crate::{be16, be32, put16, put32, Error, Result};
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IP protocol / IPv6 next-header number of TCP (IANA), used in the pseudo-header.
const IP_PROTOCOL: u8 = crate::ipv4::ip_protocol::TCP;

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ_NUM: Range<usize> = 4..8;
    pub const ACK_NUM: Range<usize> = 8..12;
    /// Data offset (high 4 bits) and reserved bits (low 4 bits).
    pub const DATA_OFFSET: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WINDOW: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
}

/// Length of the TCP header without options (data offset 5).
pub const HEADER_LEN: usize = field::URGENT.end;

/// The control bits (RFC 9293 section 3.1; ECE/CWR from RFC 3168 section 6.1).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u8);

impl Flags {
    pub const FIN: Flags = Flags(0x01);
    pub const SYN: Flags = Flags(0x02);
    pub const RST: Flags = Flags(0x04);
    pub const PSH: Flags = Flags(0x08);
    pub const ACK: Flags = Flags(0x10);
    pub const URG: Flags = Flags(0x20);
    pub const ECE: Flags = Flags(0x40);
    pub const CWR: Flags = Flags(0x80);

    pub const fn empty() -> Flags {
        Flags(0)
    }

    /// All bits of `other` are set in `self`.
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn union(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }
}

impl core::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        self.union(rhs)
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [&str; 8] = ["FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"];
        f.write_str("Flags(")?;
        let mut first = true;
        for (i, n) in NAMES.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(n)?;
                first = false;
            }
        }
        f.write_str(")")
    }
}

/// A read/write view of a TCP segment (RFC 9293 section 3.1).
///
/// After [`Packet::new_checked`] the data offset is at least 5 and the header with its
/// options fits the buffer.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking; accessors may panic on short buffers. Prefer [`Packet::new_checked`].
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap and check the header (see [`Packet::check_len`]).
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// `Truncated` if the fixed header or the options do not fit; `Malformed` if the data
    /// offset is below 5.
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = (buf[field::DATA_OFFSET] >> 4) as usize * 4;
        if hl < HEADER_LEN {
            Err(Error::Malformed)
        } else if hl > buf.len() {
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

    pub fn seq_number(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::SEQ_NUM])
    }

    pub fn ack_number(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::ACK_NUM])
    }

    /// The data offset field, in 32-bit words.
    pub fn data_offset(&self) -> u8 {
        self.buffer.as_ref()[field::DATA_OFFSET] >> 4
    }

    /// Header length including options, in bytes.
    pub fn header_len(&self) -> usize {
        self.data_offset() as usize * 4
    }

    pub fn flags(&self) -> Flags {
        Flags(self.buffer.as_ref()[field::FLAGS])
    }

    pub fn fin(&self) -> bool {
        self.flags().contains(Flags::FIN)
    }

    pub fn syn(&self) -> bool {
        self.flags().contains(Flags::SYN)
    }

    pub fn rst(&self) -> bool {
        self.flags().contains(Flags::RST)
    }

    pub fn psh(&self) -> bool {
        self.flags().contains(Flags::PSH)
    }

    pub fn ack(&self) -> bool {
        self.flags().contains(Flags::ACK)
    }

    pub fn urg(&self) -> bool {
        self.flags().contains(Flags::URG)
    }

    pub fn ece(&self) -> bool {
        self.flags().contains(Flags::ECE)
    }

    pub fn cwr(&self) -> bool {
        self.flags().contains(Flags::CWR)
    }

    pub fn window_len(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::WINDOW])
    }

    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    pub fn urgent_ptr(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::URGENT])
    }

    /// The options bytes (between the fixed header and the data), unparsed.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The data after the header and its options.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// One's-complement sum of the whole segment plus the given pseudo-header sum.
    fn sum_with(&self, pseudo: u32) -> u16 {
        checksum::fold(checksum::combine(
            pseudo,
            checksum::sum(self.buffer.as_ref()),
        ))
    }

    /// Verify the checksum over the IPv4 pseudo-header (RFC 9293 section 3.1). Segments
    /// longer than 65535 bytes cannot be carried by IPv4 and never verify.
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let Ok(len) = u16::try_from(self.buffer.as_ref().len()) else {
            return false;
        };
        self.sum_with(checksum::pseudo_v4(
            src.octets(),
            dst.octets(),
            IP_PROTOCOL,
            len,
        )) == 0xffff
    }

    /// Verify the checksum over the IPv6 pseudo-header (RFC 8200 section 8.1).
    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        let Ok(len) = u32::try_from(self.buffer.as_ref().len()) else {
            return false;
        };
        self.sum_with(checksum::pseudo_v6(
            src.octets(),
            dst.octets(),
            IP_PROTOCOL,
            len,
        )) == 0xffff
    }

    /// Verify over whichever pseudo-header the address family selects; mixed families never
    /// verify.
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

    pub fn set_seq_number(&mut self, v: u32) {
        put32(&mut self.buffer.as_mut()[field::SEQ_NUM], v);
    }

    pub fn set_ack_number(&mut self, v: u32) {
        put32(&mut self.buffer.as_mut()[field::ACK_NUM], v);
    }

    /// Set the data offset (in 32-bit words, low 4 bits used); clears the reserved bits.
    pub fn set_data_offset(&mut self, words: u8) {
        self.buffer.as_mut()[field::DATA_OFFSET] = (words & 0x0f) << 4;
    }

    pub fn set_flags(&mut self, f: Flags) {
        self.buffer.as_mut()[field::FLAGS] = f.0;
    }

    pub fn set_window_len(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::WINDOW], v);
    }

    pub fn set_checksum(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::CHECKSUM], v);
    }

    pub fn set_urgent_ptr(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::URGENT], v);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        &mut self.buffer.as_mut()[hl..]
    }

    /// Compute and store the checksum over the IPv4 pseudo-header; the whole buffer is the
    /// segment. `Error::Malformed` if it is longer than 65535 bytes.
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) -> Result<()> {
        let len = u16::try_from(self.buffer.as_ref().len()).map_err(|_| Error::Malformed)?;
        self.set_checksum(0);
        let c = !self.sum_with(checksum::pseudo_v4(
            src.octets(),
            dst.octets(),
            IP_PROTOCOL,
            len,
        ));
        self.set_checksum(c);
        Ok(())
    }

    /// Compute and store the checksum over the IPv6 pseudo-header; the whole buffer is the
    /// segment.
    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) -> Result<()> {
        let len = u32::try_from(self.buffer.as_ref().len()).map_err(|_| Error::Malformed)?;
        self.set_checksum(0);
        let c = !self.sum_with(checksum::pseudo_v6(
            src.octets(),
            dst.octets(),
            IP_PROTOCOL,
            len,
        ));
        self.set_checksum(c);
        Ok(())
    }

    /// Fill over whichever pseudo-header the address family selects; mixed families are
    /// `Error::Malformed`.
    pub fn fill_checksum(&mut self, src: IpAddr, dst: IpAddr) -> Result<()> {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => self.fill_checksum_v4(s, d),
            (IpAddr::V6(s), IpAddr::V6(d)) => self.fill_checksum_v6(s, d),
            _ => Err(Error::Malformed),
        }
    }
}

/// High-level representation of a TCP header. Options are not represented: [`Repr::parse`]
/// skips them and [`Repr::emit`] writes none (data offset 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq_number: u32,
    pub ack_number: u32,
    pub flags: Flags,
    pub window_len: u16,
    pub urgent_ptr: u16,
    /// Data length in bytes (after the header and any options).
    pub payload_len: usize,
}

impl Repr {
    /// Parse the header fields. The checksum is not verified here (see
    /// [`Packet::verify_checksum_v4`] / [`Packet::verify_checksum_v6`]).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: packet.ack_number(),
            flags: packet.flags(),
            window_len: packet.window_len(),
            urgent_ptr: packet.urgent_ptr(),
            payload_len: packet.payload().len(),
        })
    }

    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Write the header (no options, zero checksum) into the first [`HEADER_LEN`] bytes of
    /// `buf`. Fill the checksum once the payload is in place.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() < HEADER_LEN {
            return Err(Error::BufferTooSmall);
        }
        let mut p = Packet::new_unchecked(buf);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_seq_number(self.seq_number);
        p.set_ack_number(self.ack_number);
        p.set_data_offset((HEADER_LEN / 4) as u8);
        p.set_flags(self.flags);
        p.set_window_len(self.window_len);
        p.set_checksum(0);
        p.set_urgent_ptr(self.urgent_ptr);
        Ok(())
    }
}

/// Fuzz entry: parse, read every field, re-emit. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.data_offset(),
        p.checksum(),
        p.options().len(),
        p.payload().len(),
    );
    let _ = (
        p.fin(),
        p.syn(),
        p.rst(),
        p.psh(),
        p.ack(),
        p.urg(),
        p.ece(),
        p.cwr(),
    );
    let a4 = Ipv4Addr::new(10, 0, 0, 1);
    let a6 = Ipv6Addr::LOCALHOST;
    let _ = p.verify_checksum_v4(a4, a4);
    let _ = p.verify_checksum_v6(a6, a6);
    let _ = p.verify_checksum(IpAddr::V4(a4), IpAddr::V6(a6));
    let r = Repr::parse(&p).expect("checked segment parses");
    assert_eq!(r.payload_len + p.header_len(), data.len());

    let mut out = [0u8; 256];
    let n = r.buffer_len();
    if n <= out.len() {
        r.emit(&mut out[..n]).expect("fits");
        out[HEADER_LEN..n].copy_from_slice(p.payload());
        let mut q = Packet::new_checked(&mut out[..n]).expect("emitted segment checks");
        assert_eq!(Repr::parse(&q), Ok(r));
        q.fill_checksum_v4(a4, a4).expect("short segment");
        assert!(q.verify_checksum_v4(a4, a4));
        q.fill_checksum_v6(a6, a6).expect("short segment");
        assert!(q.verify_checksum_v6(a6, a6));
    } else {
        let mut hdr = [0u8; HEADER_LEN];
        r.emit(&mut hdr).expect("header fits");
        let q = Packet::new_checked(&hdr[..]).expect("emitted header checks");
        assert_eq!(
            Repr::parse(&q),
            Ok(Repr {
                payload_len: 0,
                ..r
            })
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SYN from a Linux client, 192.168.0.2:40000 -> 192.168.0.1:80, with MSS, SACK-permitted,
    /// timestamps, NOP, window-scale options (data offset 10). Checksum computed with
    /// `checksum::checksum` over pseudo-header + segment and checked in `syn_checksum`.
    const SYN: [u8; 40] = [
        0x9c, 0x40, 0x00, 0x50, // ports 40000 -> 80
        0x12, 0x34, 0x56, 0x78, // seq
        0x00, 0x00, 0x00, 0x00, // ack
        0xa0, 0x02, 0xfa, 0xf0, // data offset 10, SYN, window 64240
        0x00, 0x00, 0x00, 0x00, // checksum (filled in the test), urgent pointer
        0x02, 0x04, 0x05, 0xb4, // MSS 1460
        0x04, 0x02, // SACK permitted
        0x08, 0x0a, 0x00, 0x01, 0x02, 0x03, 0x00, 0x00, 0x00, 0x00, // timestamps
        0x01, // NOP
        0x03, 0x03, 0x07, // window scale 7
    ];

    fn v4() -> (Ipv4Addr, Ipv4Addr) {
        (Ipv4Addr::new(192, 168, 0, 2), Ipv4Addr::new(192, 168, 0, 1))
    }

    #[test]
    fn parse_syn_with_options() {
        let p = Packet::new_checked(&SYN[..]).unwrap();
        assert_eq!(p.src_port(), 40000);
        assert_eq!(p.dst_port(), 80);
        assert_eq!(p.seq_number(), 0x1234_5678);
        assert_eq!(p.ack_number(), 0);
        assert_eq!(p.data_offset(), 10);
        assert_eq!(p.header_len(), 40);
        assert_eq!(p.flags(), Flags::SYN);
        assert!(p.syn() && !p.ack() && !p.fin() && !p.rst());
        assert_eq!(p.window_len(), 64240);
        assert_eq!(p.urgent_ptr(), 0);
        assert_eq!(p.options().len(), 20);
        assert_eq!(p.options()[..4], [0x02, 0x04, 0x05, 0xb4]);
        assert!(p.payload().is_empty());
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr {
                src_port: 40000,
                dst_port: 80,
                seq_number: 0x1234_5678,
                ack_number: 0,
                flags: Flags::SYN,
                window_len: 64240,
                urgent_ptr: 0,
                payload_len: 0,
            }
        );
    }

    #[test]
    fn syn_checksum() {
        let (s, d) = v4();
        let mut seg = SYN;
        let mut p = Packet::new_checked(&mut seg[..]).unwrap();
        p.fill_checksum_v4(s, d).unwrap();
        // Independent computation: pseudo-header bytes followed by the segment.
        let mut whole = [0u8; 12 + 40];
        whole[..4].copy_from_slice(&s.octets());
        whole[4..8].copy_from_slice(&d.octets());
        whole[9] = 6;
        whole[11] = 40;
        whole[12..].copy_from_slice(&SYN);
        assert_eq!(p.checksum(), checksum::checksum(&whole));
        assert!(p.verify_checksum_v4(s, d));
        assert!(!p.verify_checksum_v4(d, Ipv4Addr::new(192, 168, 0, 3)));
        p.set_seq_number(0x1234_5679);
        assert!(!p.verify_checksum_v4(s, d));
    }

    /// An ACK with 5 bytes of data over IPv6, checksum hand-computed:
    ///   pseudo: 2001+0db8+0001 + 2001+0db8+0002 + 0000+0019 + 0006 = 0x5b94
    ///   segment: 1f90+c350 + 0000+0001 + 0000+0002 + 5018 + 01f5 + 0000 + 0000
    ///            + 6865 + 6c6c + 6f00 = 0x2_78c1 -> 0x78c3
    ///   total 0x5b94 + 0x78c3 = 0xd457; checksum = !0xd457 = 0x2ba8.
    const ACK6: [u8; 25] = [
        0x1f, 0x90, 0xc3, 0x50, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x50, 0x18, 0x01,
        0xf5, 0x2b, 0xa8, 0x00, 0x00, b'h', b'e', b'l', b'l', b'o',
    ];

    #[test]
    fn ack_v6_checksum_and_payload() {
        let s = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
        let d = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
        let p = Packet::new_checked(&ACK6[..]).unwrap();
        assert_eq!(p.flags(), Flags::ACK | Flags::PSH);
        assert_eq!(p.payload(), b"hello");
        assert!(p.verify_checksum_v6(s, d));
        assert!(p.verify_checksum(IpAddr::V6(s), IpAddr::V6(d)));
        assert!(!p.verify_checksum(IpAddr::V6(s), IpAddr::V4(Ipv4Addr::LOCALHOST)));
        let mut e = ACK6;
        let mut q = Packet::new_checked(&mut e[..]).unwrap();
        q.set_checksum(0x1234);
        q.fill_checksum(IpAddr::V6(s), IpAddr::V6(d)).unwrap();
        assert_eq!(e, ACK6);
    }

    #[test]
    fn emit_roundtrip() {
        let r = Repr::parse(&Packet::new_checked(&ACK6[..]).unwrap()).unwrap();
        assert_eq!(r.payload_len, 5);
        assert_eq!(r.buffer_len(), 25);
        let mut buf = [0xffu8; 25];
        r.emit(&mut buf).unwrap();
        buf[20..].copy_from_slice(b"hello");
        let s = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
        let d = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
        Packet::new_checked(&mut buf[..])
            .unwrap()
            .fill_checksum_v6(s, d)
            .unwrap();
        assert_eq!(buf, ACK6);
        assert_eq!(r.emit(&mut [0u8; 19]), Err(Error::BufferTooSmall));
    }

    #[test]
    fn bad_lengths() {
        assert_eq!(
            Packet::new_checked(&SYN[..19]).unwrap_err(),
            Error::Truncated
        );
        // Options run past the end of the buffer.
        assert_eq!(
            Packet::new_checked(&SYN[..39]).unwrap_err(),
            Error::Truncated
        );
        let mut e = SYN;
        e[12] = 0x40; // data offset 4
        assert_eq!(Packet::new_checked(&e[..]).unwrap_err(), Error::Malformed);
        e[12] = 0x50; // data offset 5: options become data
        assert_eq!(Packet::new_checked(&e[..]).unwrap().payload().len(), 20);
        e[12] = 0xf0; // data offset 15 = 60 bytes > 40
        assert_eq!(Packet::new_checked(&e[..]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn flags_debug() {
        let f = Flags::SYN | Flags::ACK | Flags::ECE | Flags::CWR;
        assert_eq!(std::format!("{f:?}"), "Flags(SYN|ACK|ECE|CWR)");
        assert!(f.contains(Flags::SYN | Flags::ACK));
        assert!(!f.contains(Flags::FIN));
        assert_eq!(std::format!("{:?}", Flags::empty()), "Flags()");
    }

    #[test]
    fn fuzz_vectors() {
        fuzz(&SYN);
        fuzz(&ACK6);
        for n in 0..SYN.len() {
            fuzz(&SYN[..n]);
        }
        let big = [0x50u8; 300];
        fuzz(&big);
    }
}
