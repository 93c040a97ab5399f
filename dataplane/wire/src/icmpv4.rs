//! ICMP for IPv4 (RFC 792): echo request/reply and the error messages a router sends,
//! Destination Unreachable (with RFC 1191 next-hop MTU for "fragmentation needed") and Time
//! Exceeded.
//!
//! The view covers the ICMP message only (the IPv4 payload); the checksum covers all of it.

use crate::{be16, be32, checksum, put16, put32, Error, Result};

/// ICMP message types (RFC 792).
pub mod msg_type {
    pub const ECHO_REPLY: u8 = 0;
    pub const DST_UNREACHABLE: u8 = 3;
    pub const REDIRECT: u8 = 5;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;
    pub const PARAM_PROBLEM: u8 = 12;
}

/// Destination Unreachable codes (RFC 792, RFC 1812 section 5.2.7.1).
pub mod unreachable {
    pub const NET: u8 = 0;
    pub const HOST: u8 = 1;
    pub const PROTOCOL: u8 = 2;
    pub const PORT: u8 = 3;
    /// Fragmentation needed and DF set; carries the next-hop MTU (RFC 1191 section 4).
    pub const FRAG_NEEDED: u8 = 4;
    pub const SOURCE_ROUTE_FAILED: u8 = 5;
    pub const NET_UNKNOWN: u8 = 6;
    pub const HOST_UNKNOWN: u8 = 7;
    pub const ADMIN_PROHIBITED: u8 = 13;
}

/// Time Exceeded codes (RFC 792).
pub mod time_exceeded {
    pub const TTL: u8 = 0;
    pub const REASSEMBLY: u8 = 1;
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQ_NO: Range<usize> = 6..8;
    /// The 32-bit word after the checksum ("unused" in most error messages).
    pub const REST: Range<usize> = 4..8;
    pub const NEXT_HOP_MTU: Range<usize> = 6..8;
    pub const DATA: RangeFrom<usize> = 8..;
}

/// Length of the ICMP header (type, code, checksum and the 32-bit rest-of-header word).
pub const HEADER_LEN: usize = field::DATA.start;

/// Most bytes of the offending datagram an error message quotes, so that the whole ICMP
/// datagram stays within 576 bytes (RFC 1812 section 4.3.2.3): 576 - 20 (IPv4) - 8 (ICMP).
pub const MAX_QUOTE_LEN: usize = 576 - crate::ipv4::HEADER_LEN - HEADER_LEN;

/// The prefix of `datagram` (an IPv4 header and what follows) that an error message quotes.
pub fn quote(datagram: &[u8]) -> &[u8] {
    &datagram[..datagram.len().min(MAX_QUOTE_LEN)]
}

/// A read/write view of an ICMPv4 message.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking; accessors may panic on short buffers. Prefer
    /// [`Packet::new_checked`].
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap and check that the 8-byte header fits.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    /// Echo identifier (RFC 792, echo messages).
    pub fn echo_ident(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::ECHO_IDENT])
    }

    /// Echo sequence number (RFC 792, echo messages).
    pub fn echo_seq_no(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::ECHO_SEQ_NO])
    }

    /// Next-hop MTU of a "fragmentation needed" message (RFC 1191 section 4).
    pub fn next_hop_mtu(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::NEXT_HOP_MTU])
    }

    /// The whole rest-of-header word.
    pub fn rest_of_header(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::REST])
    }

    /// Echo data, or the quoted datagram of an error message.
    pub fn data(&self) -> &[u8] {
        self.buffer.as_ref().get(field::DATA).unwrap_or(&[])
    }

    /// The checksum over the whole message verifies (RFC 792).
    pub fn verify_checksum(&self) -> bool {
        checksum::fold(checksum::sum(self.buffer.as_ref())) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// [`Packet::data`] with the buffer's lifetime, for [`Repr::parse`].
    fn data_ref(&self) -> &'a [u8] {
        T::as_ref(self.buffer).get(field::DATA).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }

    pub fn set_msg_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v;
    }

    pub fn set_checksum(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::CHECKSUM], v);
    }

    pub fn set_echo_ident(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::ECHO_IDENT], v);
    }

    pub fn set_echo_seq_no(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::ECHO_SEQ_NO], v);
    }

    /// Set the next-hop MTU and clear the unused half-word before it.
    pub fn set_next_hop_mtu(&mut self, v: u16) {
        self.set_rest_of_header(v as u32);
    }

    pub fn set_rest_of_header(&mut self, v: u32) {
        put32(&mut self.buffer.as_mut()[field::REST], v);
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        self.buffer
            .as_mut()
            .get_mut(field::DATA)
            .unwrap_or_default()
    }

    /// Compute and store the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// High-level representation of the ICMPv4 messages we handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr<'a> {
    EchoRequest {
        ident: u16,
        seq_no: u16,
        data: &'a [u8],
    },
    EchoReply {
        ident: u16,
        seq_no: u16,
        data: &'a [u8],
    },
    /// `next_hop_mtu` is meaningful for code [`unreachable::FRAG_NEEDED`] only; parsing sets it
    /// to 0 for other codes, and it should be 0 when emitting them.
    DstUnreachable {
        code: u8,
        next_hop_mtu: u16,
        data: &'a [u8],
    },
    TimeExceeded {
        code: u8,
        data: &'a [u8],
    },
}

impl<'a> Repr<'a> {
    /// Parse a message, verifying its checksum (`Error::Checksum`). Other message types are
    /// `Unsupported`; an echo with a non-zero code is `Malformed`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        let data = packet.data_ref();
        let code = packet.msg_code();
        match packet.msg_type() {
            msg_type::ECHO_REQUEST | msg_type::ECHO_REPLY if code != 0 => Err(Error::Malformed),
            msg_type::ECHO_REQUEST => Ok(Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            msg_type::ECHO_REPLY => Ok(Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            msg_type::DST_UNREACHABLE => Ok(Repr::DstUnreachable {
                code,
                next_hop_mtu: if code == unreachable::FRAG_NEEDED {
                    packet.next_hop_mtu()
                } else {
                    0
                },
                data,
            }),
            msg_type::TIME_EXCEEDED => Ok(Repr::TimeExceeded { code, data }),
            _ => Err(Error::Unsupported),
        }
    }

    /// The reply to an echo request (RFC 792: same identifier, sequence number and data).
    pub const fn echo_reply(&self) -> Option<Repr<'a>> {
        match *self {
            Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => Some(Repr::EchoReply {
                ident,
                seq_no,
                data,
            }),
            _ => None,
        }
    }

    pub const fn data(&self) -> &'a [u8] {
        match *self {
            Repr::EchoRequest { data, .. }
            | Repr::EchoReply { data, .. }
            | Repr::DstUnreachable { data, .. }
            | Repr::TimeExceeded { data, .. } => data,
        }
    }

    /// Type, code and rest-of-header word on the wire.
    const fn header_fields(&self) -> (u8, u8, u32) {
        const fn echo(ident: u16, seq_no: u16) -> u32 {
            ((ident as u32) << 16) | seq_no as u32
        }
        match *self {
            Repr::EchoRequest { ident, seq_no, .. } => {
                (msg_type::ECHO_REQUEST, 0, echo(ident, seq_no))
            }
            Repr::EchoReply { ident, seq_no, .. } => (msg_type::ECHO_REPLY, 0, echo(ident, seq_no)),
            // RFC 1191 section 4: unused high half-word, next-hop MTU in the low one.
            Repr::DstUnreachable {
                code, next_hop_mtu, ..
            } => (msg_type::DST_UNREACHABLE, code, next_hop_mtu as u32),
            Repr::TimeExceeded { code, .. } => (msg_type::TIME_EXCEEDED, code, 0),
        }
    }

    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus data: the whole message.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.data().len()
    }

    /// Write the whole message, data copied and checksum filled, into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let b = buf
            .get_mut(..self.buffer_len())
            .ok_or(Error::BufferTooSmall)?;
        let mut p = Packet::new_unchecked(b);
        let (ty, code, rest) = self.header_fields();
        p.set_msg_type(ty);
        p.set_msg_code(code);
        p.set_rest_of_header(rest);
        p.data_mut().copy_from_slice(self.data());
        p.fill_checksum();
        Ok(())
    }
}

#[cfg(any(test, feature = "fuzzing"))]
/// Largest message the fuzz round-trip re-emits (it needs a stack buffer).
const FUZZ_BUF: usize = 4096;

/// Fuzz entry: check, read every field, parse, emit, re-parse; then the same with the
/// checksum fixed so random messages reach `Repr`. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.msg_type(),
        p.msg_code(),
        p.checksum(),
        p.echo_ident(),
        p.echo_seq_no(),
    );
    let _ = (
        p.next_hop_mtu(),
        p.rest_of_header(),
        p.data().len(),
        quote(data).len(),
    );
    fuzz_repr(&p);
    if data.len() <= FUZZ_BUF {
        let mut fixed = [0u8; FUZZ_BUF];
        let fixed = &mut fixed[..data.len()];
        fixed.copy_from_slice(data);
        Packet::new_unchecked(&mut *fixed).fill_checksum();
        let p = Packet::new_checked(&*fixed).expect("same length");
        assert!(p.verify_checksum());
        fuzz_repr(&p);
    }
}

#[cfg(any(test, feature = "fuzzing"))]
fn fuzz_repr(p: &Packet<&[u8]>) {
    let Ok(r) = Repr::parse(p) else { return };
    let mut out = [0u8; FUZZ_BUF];
    if r.buffer_len() <= out.len() {
        r.emit(&mut out).expect("fits");
        let p2 = Packet::new_checked(&out[..r.buffer_len()]).expect("checks");
        assert_eq!(Repr::parse(&p2), Ok(r));
    }
    let _ = r.echo_reply();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4;

    /// A Linux `ping 127.0.0.1` capture (jpcap test data, echoRequest.txt): IPv4 header with
    /// checksum 0x7c97, then an echo request with checksum 0x3bf6, identifier 0xf703, sequence
    /// 0, and 56 data bytes (a struct timeval, then 0x08..0x37).
    fn capture() -> [u8; 84] {
        let mut d = [0u8; 84];
        d[..36].copy_from_slice(&[
            0x45, 0x00, 0x00, 0x54, 0x00, 0x10, 0x00, 0x00, 0x40, 0x01, 0x7c, 0x97, 0x7f, 0x00,
            0x00, 0x01, 0x7f, 0x00, 0x00, 0x01, 0x08, 0x00, 0x3b, 0xf6, 0xf7, 0x03, 0x00, 0x00,
            0x68, 0xc8, 0x05, 0x3b, 0x60, 0xff, 0x0b, 0x00,
        ]);
        for (i, b) in d[36..].iter_mut().enumerate() {
            *b = 0x08 + i as u8;
        }
        d
    }

    #[test]
    fn parse_echo_capture() {
        let d = capture();
        let ip = ipv4::Packet::new_checked(&d[..]).unwrap();
        assert!(ip.verify_checksum());
        assert_eq!(ip.protocol(), ipv4::ip_protocol::ICMP);
        let p = Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(p.checksum(), 0x3bf6);
        assert!(p.verify_checksum());
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr::EchoRequest {
                ident: 0xf703,
                seq_no: 0,
                data: &d[28..]
            }
        );
    }

    #[test]
    fn emit_echo_matches_capture() {
        let d = capture();
        let r = Repr::EchoRequest {
            ident: 0xf703,
            seq_no: 0,
            data: &d[28..],
        };
        let mut buf = [0u8; 64];
        r.emit(&mut buf).unwrap();
        assert_eq!(&buf[..], &d[20..]);
        assert_eq!(r.emit(&mut [0u8; 63]), Err(Error::BufferTooSmall));

        // The reply differs only in type, so its checksum is 0x3bf6 + 0x0800.
        r.echo_reply().unwrap().emit(&mut buf).unwrap();
        assert_eq!(&buf[..4], &[0x00, 0x00, 0x43, 0xf6]);
        assert_eq!(
            Repr::parse(&Packet::new_checked(&buf[..]).unwrap())
                .unwrap()
                .echo_reply(),
            None
        );
    }

    #[test]
    fn bad_checksum_and_truncated() {
        let d = capture();
        let mut icmp = [0u8; 64];
        icmp.copy_from_slice(&d[20..]);
        icmp[63] ^= 0x01;
        let p = Packet::new_checked(&icmp[..]).unwrap();
        assert!(!p.verify_checksum());
        assert_eq!(Repr::parse(&p), Err(Error::Checksum));
        assert_eq!(
            Packet::new_checked(&icmp[..7]).unwrap_err(),
            Error::Truncated
        );
        // A header-only echo is fine.
        let r = Repr::EchoRequest {
            ident: 1,
            seq_no: 2,
            data: &[],
        };
        let mut b = [0u8; 8];
        r.emit(&mut b).unwrap();
        assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()), Ok(r));
    }

    #[test]
    fn frag_needed_roundtrip() {
        let d = capture();
        let quoted = quote(&d[..28]);
        let r = Repr::DstUnreachable {
            code: unreachable::FRAG_NEEDED,
            next_hop_mtu: 1400,
            data: quoted,
        };
        let mut buf = [0u8; 36];
        r.emit(&mut buf).unwrap();
        assert_eq!(&buf[..8], &[3, 4, buf[2], buf[3], 0, 0, 0x05, 0x78]);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.next_hop_mtu(), 1400);
        assert_eq!(Repr::parse(&p), Ok(r));
        // For other codes the word is unused and not represented.
        let mut b2 = buf;
        b2[1] = unreachable::PORT;
        Packet::new_unchecked(&mut b2[..]).fill_checksum();
        let r2 = Repr::parse(&Packet::new_checked(&b2[..]).unwrap()).unwrap();
        assert_eq!(
            r2,
            Repr::DstUnreachable {
                code: 3,
                next_hop_mtu: 0,
                data: quoted
            }
        );
    }

    #[test]
    fn time_exceeded_roundtrip() {
        let d = capture();
        let r = Repr::TimeExceeded {
            code: time_exceeded::TTL,
            data: &d[..28],
        };
        let mut buf = [0xffu8; 36];
        r.emit(&mut buf).unwrap();
        assert_eq!(&buf[..2], &[11, 0]);
        assert_eq!(&buf[4..8], &[0, 0, 0, 0]);
        assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()), Ok(r));
    }

    #[test]
    fn unsupported_and_malformed() {
        let mut b = [0u8; 8];
        b[0] = msg_type::REDIRECT;
        Packet::new_unchecked(&mut b[..]).fill_checksum();
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Unsupported)
        );
        b[0] = msg_type::ECHO_REQUEST;
        b[1] = 1;
        Packet::new_unchecked(&mut b[..]).fill_checksum();
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn quote_is_bounded() {
        assert_eq!(MAX_QUOTE_LEN, 548);
        assert_eq!(quote(&[0u8; 1500]).len(), 548);
        assert_eq!(quote(&[0u8; 28]).len(), 28);
    }

    #[test]
    fn fuzz_smoke() {
        let d = capture();
        for n in 0..=64 {
            fuzz(&d[20..20 + n]);
            fuzz(&d[n..]);
        }
    }
}
