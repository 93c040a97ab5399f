//! ICMPv6 (RFC 4443): echo request/reply (section 4) and the error messages a router sends
//! (section 3): Destination Unreachable, Packet Too Big, Time Exceeded, Parameter Problem.
//!
//! The view covers the ICMPv6 message only (the upper-layer payload). The checksum also
//! covers the IPv6 pseudo-header (RFC 8200 section 8.1), so checksum operations take the
//! source and destination addresses.

use crate::ipv6::ip_protocol;
use crate::{be16, be32, checksum, put16, put32, Error, Result};
use core::net::Ipv6Addr;

/// ICMPv6 message types (RFC 4443 section 2.1; Neighbor Discovery in RFC 4861).
pub mod msg_type {
    pub const DST_UNREACHABLE: u8 = 1;
    pub const PKT_TOO_BIG: u8 = 2;
    pub const TIME_EXCEEDED: u8 = 3;
    pub const PARAM_PROBLEM: u8 = 4;
    pub const ECHO_REQUEST: u8 = 128;
    pub const ECHO_REPLY: u8 = 129;
    pub const ROUTER_SOLICIT: u8 = 133;
    pub const ROUTER_ADVERT: u8 = 134;
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    pub const NEIGHBOR_ADVERT: u8 = 136;
    pub const REDIRECT: u8 = 137;
}

/// Destination Unreachable codes (RFC 4443 section 3.1).
pub mod unreachable {
    pub const NO_ROUTE: u8 = 0;
    pub const ADMIN_PROHIBITED: u8 = 1;
    pub const BEYOND_SCOPE: u8 = 2;
    pub const ADDRESS: u8 = 3;
    pub const PORT: u8 = 4;
    pub const FAILED_POLICY: u8 = 5;
    pub const REJECT_ROUTE: u8 = 6;
}

/// Time Exceeded codes (RFC 4443 section 3.3).
pub mod time_exceeded {
    pub const HOP_LIMIT: u8 = 0;
    pub const REASSEMBLY: u8 = 1;
}

/// Parameter Problem codes (RFC 4443 section 3.4).
pub mod param_problem {
    pub const ERRONEOUS_FIELD: u8 = 0;
    pub const UNRECOGNIZED_NEXT_HEADER: u8 = 1;
    pub const UNRECOGNIZED_OPTION: u8 = 2;
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQ_NO: Range<usize> = 6..8;
    /// MTU (Packet Too Big), Pointer (Parameter Problem), unused otherwise.
    pub const REST: Range<usize> = 4..8;
    pub const DATA: RangeFrom<usize> = 8..;
}

/// Length of the ICMPv6 header (type, code, checksum and the 32-bit message-specific word).
pub const HEADER_LEN: usize = field::DATA.start;

/// Most bytes of the offending packet an error message quotes so that the whole error fits
/// the IPv6 minimum MTU (RFC 4443 section 2.4 (c)): 1280 - 40 (IPv6) - 8 (ICMPv6).
pub const MAX_QUOTE_LEN: usize = crate::ipv6::MIN_MTU - crate::ipv6::HEADER_LEN - HEADER_LEN;

/// The prefix of `packet` (an IPv6 header and what follows) that an error message quotes.
pub fn quote(packet: &[u8]) -> &[u8] {
    &packet[..packet.len().min(MAX_QUOTE_LEN)]
}

/// Checksum partial sum of the pseudo-header plus `message`.
fn sum_with_pseudo(src: Ipv6Addr, dst: Ipv6Addr, message: &[u8]) -> u32 {
    let ph = checksum::pseudo_v6(
        src.octets(),
        dst.octets(),
        ip_protocol::IPV6_ICMP,
        message.len() as u32,
    );
    checksum::combine(ph, checksum::sum(message))
}

/// A read/write view of an ICMPv6 message.
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

    /// Echo identifier (RFC 4443 section 4.1).
    pub fn echo_ident(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::ECHO_IDENT])
    }

    /// Echo sequence number (RFC 4443 section 4.1).
    pub fn echo_seq_no(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::ECHO_SEQ_NO])
    }

    /// MTU of a Packet Too Big message (RFC 4443 section 3.2).
    pub fn mtu(&self) -> u32 {
        self.rest_of_header()
    }

    /// Pointer of a Parameter Problem message: offset of the error in the quoted packet.
    pub fn pointer(&self) -> u32 {
        self.rest_of_header()
    }

    /// The whole message-specific word.
    pub fn rest_of_header(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::REST])
    }

    /// Echo data, or the quoted packet of an error message.
    pub fn data(&self) -> &[u8] {
        self.buffer.as_ref().get(field::DATA).unwrap_or(&[])
    }

    /// The checksum over pseudo-header and message verifies (RFC 4443 section 2.3).
    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        checksum::fold(sum_with_pseudo(src, dst, self.buffer.as_ref())) == 0xffff
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

    /// Set the message-specific word (MTU, Pointer, or 0 where unused).
    pub fn set_rest_of_header(&mut self, v: u32) {
        put32(&mut self.buffer.as_mut()[field::REST], v);
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        self.buffer
            .as_mut()
            .get_mut(field::DATA)
            .unwrap_or_default()
    }

    /// Compute and store the checksum over pseudo-header and the whole buffer.
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.set_checksum(0);
        let c = checksum::finish(sum_with_pseudo(src, dst, self.buffer.as_ref()));
        self.set_checksum(c);
    }
}

/// High-level representation of the ICMPv6 messages we handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr<'a> {
    DstUnreachable {
        code: u8,
        data: &'a [u8],
    },
    PktTooBig {
        mtu: u32,
        data: &'a [u8],
    },
    TimeExceeded {
        code: u8,
        data: &'a [u8],
    },
    /// `pointer` is the offset in the quoted packet where the problem was found.
    ParamProblem {
        code: u8,
        pointer: u32,
        data: &'a [u8],
    },
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
}

impl<'a> Repr<'a> {
    /// Parse a message carried from `src` to `dst`, verifying the checksum
    /// (`Error::Checksum`). Other types (Neighbor Discovery included) are `Unsupported`;
    /// an echo or Packet Too Big with a non-zero code is `Malformed`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        src: Ipv6Addr,
        dst: Ipv6Addr,
        packet: &Packet<&'a T>,
    ) -> Result<Repr<'a>> {
        packet.check_len()?;
        if !packet.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        let data = packet.data_ref();
        let code = packet.msg_code();
        let ty = packet.msg_type();
        if code != 0
            && matches!(
                ty,
                msg_type::PKT_TOO_BIG | msg_type::ECHO_REQUEST | msg_type::ECHO_REPLY
            )
        {
            return Err(Error::Malformed);
        }
        let (ident, seq_no) = (packet.echo_ident(), packet.echo_seq_no());
        match ty {
            msg_type::DST_UNREACHABLE => Ok(Repr::DstUnreachable { code, data }),
            msg_type::PKT_TOO_BIG => Ok(Repr::PktTooBig {
                mtu: packet.mtu(),
                data,
            }),
            msg_type::TIME_EXCEEDED => Ok(Repr::TimeExceeded { code, data }),
            msg_type::PARAM_PROBLEM => Ok(Repr::ParamProblem {
                code,
                pointer: packet.pointer(),
                data,
            }),
            msg_type::ECHO_REQUEST => Ok(Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }),
            msg_type::ECHO_REPLY => Ok(Repr::EchoReply {
                ident,
                seq_no,
                data,
            }),
            _ => Err(Error::Unsupported),
        }
    }

    /// The reply to an echo request (RFC 4443 section 4.2: same identifier, sequence number
    /// and data).
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

    /// Whether this is an error message (type below 128, RFC 4443 section 2.1), which must
    /// never be sent in response to another error (section 2.4 (e)).
    pub const fn is_error(&self) -> bool {
        !matches!(self, Repr::EchoRequest { .. } | Repr::EchoReply { .. })
    }

    pub const fn data(&self) -> &'a [u8] {
        match *self {
            Repr::DstUnreachable { data, .. }
            | Repr::PktTooBig { data, .. }
            | Repr::TimeExceeded { data, .. }
            | Repr::ParamProblem { data, .. }
            | Repr::EchoRequest { data, .. }
            | Repr::EchoReply { data, .. } => data,
        }
    }

    /// Type, code and message-specific word on the wire.
    const fn header_fields(&self) -> (u8, u8, u32) {
        const fn echo(ident: u16, seq_no: u16) -> u32 {
            ((ident as u32) << 16) | seq_no as u32
        }
        match *self {
            Repr::DstUnreachable { code, .. } => (msg_type::DST_UNREACHABLE, code, 0),
            Repr::PktTooBig { mtu, .. } => (msg_type::PKT_TOO_BIG, 0, mtu),
            Repr::TimeExceeded { code, .. } => (msg_type::TIME_EXCEEDED, code, 0),
            Repr::ParamProblem { code, pointer, .. } => (msg_type::PARAM_PROBLEM, code, pointer),
            Repr::EchoRequest { ident, seq_no, .. } => {
                (msg_type::ECHO_REQUEST, 0, echo(ident, seq_no))
            }
            Repr::EchoReply { ident, seq_no, .. } => (msg_type::ECHO_REPLY, 0, echo(ident, seq_no)),
        }
    }

    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus data: the whole message.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.data().len()
    }

    /// Write the whole message for `src` -> `dst`, data copied and checksum filled, into the
    /// start of `buf`.
    pub fn emit(&self, src: Ipv6Addr, dst: Ipv6Addr, buf: &mut [u8]) -> Result<()> {
        let b = buf
            .get_mut(..self.buffer_len())
            .ok_or(Error::BufferTooSmall)?;
        let mut p = Packet::new_unchecked(b);
        let (ty, code, rest) = self.header_fields();
        p.set_msg_type(ty);
        p.set_msg_code(code);
        p.set_rest_of_header(rest);
        p.data_mut().copy_from_slice(self.data());
        p.fill_checksum(src, dst);
        Ok(())
    }
}

#[cfg(any(test, feature = "fuzzing"))]
/// Largest message the fuzz round-trip re-emits (it needs a stack buffer).
const FUZZ_BUF: usize = 4096;
#[cfg(any(test, feature = "fuzzing"))]
const FUZZ_SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
#[cfg(any(test, feature = "fuzzing"))]
const FUZZ_DST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

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
    let _ = (p.mtu(), p.pointer(), p.data().len(), quote(data).len());
    fuzz_repr(&p);
    if data.len() <= FUZZ_BUF {
        let mut fixed = [0u8; FUZZ_BUF];
        let fixed = &mut fixed[..data.len()];
        fixed.copy_from_slice(data);
        Packet::new_unchecked(&mut *fixed).fill_checksum(FUZZ_SRC, FUZZ_DST);
        let p = Packet::new_checked(&*fixed).expect("same length");
        assert!(p.verify_checksum(FUZZ_SRC, FUZZ_DST));
        fuzz_repr(&p);
    }
}

#[cfg(any(test, feature = "fuzzing"))]
fn fuzz_repr(p: &Packet<&[u8]>) {
    let Ok(r) = Repr::parse(FUZZ_SRC, FUZZ_DST, p) else {
        return;
    };
    let _ = (r.echo_reply(), r.is_error());
    let mut out = [0u8; FUZZ_BUF];
    if r.buffer_len() <= out.len() {
        r.emit(FUZZ_SRC, FUZZ_DST, &mut out).expect("fits");
        let p2 = Packet::new_checked(&out[..r.buffer_len()]).expect("checks");
        assert_eq!(Repr::parse(FUZZ_SRC, FUZZ_DST, &p2), Ok(r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ipv6, ipv6ext};

    const SRC: Ipv6Addr = Ipv6Addr::new(0x2003, 0, 0, 0, 0, 0, 0, 2);
    const DST: Ipv6Addr = Ipv6Addr::new(0x2003, 0, 0, 0, 0, 0, 0, 1);

    /// A router's ping 2003::2 -> 2003::1 (published Wireshark decode): identifier 0xd2ab,
    /// sequence 256, 56 data bytes, checksum 0x99d9 "[correct]".
    fn echo_request() -> [u8; 64] {
        let mut m = [0u8; 64];
        m[..24].copy_from_slice(&[
            0x80, 0x00, 0x99, 0xd9, 0xd2, 0xab, 0x01, 0x00, 0xc4, 0xb9, 0x18, 0x00, 0x69, 0x6e,
            0x69, 0x73, 0x74, 0x72, 0x61, 0x74, 0x69, 0x76, 0x65, 0x6c,
        ]);
        for (i, b) in m[24..].iter_mut().enumerate() {
            *b = i as u8;
        }
        m
    }

    #[test]
    fn parse_echo_capture() {
        let m = echo_request();
        let p = Packet::new_checked(&m[..]).unwrap();
        assert!(p.verify_checksum(SRC, DST));
        // The pseudo-header matters: swapped addresses sum the same, other ones do not.
        assert!(p.verify_checksum(DST, SRC));
        assert!(!p.verify_checksum(SRC, Ipv6Addr::LOCALHOST));
        let r = Repr::parse(SRC, DST, &p).unwrap();
        assert_eq!(
            r,
            Repr::EchoRequest {
                ident: 0xd2ab,
                seq_no: 256,
                data: &m[8..]
            }
        );
        assert!(!r.is_error());
    }

    #[test]
    fn emit_echo_matches_capture() {
        let m = echo_request();
        let r = Repr::EchoRequest {
            ident: 0xd2ab,
            seq_no: 256,
            data: &m[8..],
        };
        let mut buf = [0u8; 64];
        r.emit(SRC, DST, &mut buf).unwrap();
        assert_eq!(buf, m);
        assert_eq!(r.emit(SRC, DST, &mut [0u8; 63]), Err(Error::BufferTooSmall));
        let reply = r.echo_reply().unwrap();
        reply.emit(DST, SRC, &mut buf).unwrap();
        // Type 128 -> 129 lowers the checksum by 0x0100.
        assert_eq!(&buf[..4], &[0x81, 0x00, 0x98, 0xd9]);
        assert_eq!(
            Repr::parse(DST, SRC, &Packet::new_checked(&buf[..]).unwrap()),
            Ok(reply)
        );
    }

    #[test]
    fn bad_checksum_and_truncated() {
        let mut m = echo_request();
        m[40] ^= 0x80;
        let p = Packet::new_checked(&m[..]).unwrap();
        assert_eq!(Repr::parse(SRC, DST, &p), Err(Error::Checksum));
        assert_eq!(Packet::new_checked(&m[..7]).unwrap_err(), Error::Truncated);
    }

    /// A router's error replies quoting the capture (IPv6 header + echo).
    #[test]
    fn error_messages_roundtrip() {
        let mut orig = [0u8; 104];
        let ip = ipv6::Repr {
            src: SRC,
            dst: DST,
            next_header: ip_protocol::IPV6_ICMP,
            payload_len: 64,
            hop_limit: 1,
            traffic_class: 0,
            flow_label: 0,
        };
        ip.emit(&mut orig).unwrap();
        orig[40..].copy_from_slice(&echo_request());
        let router = Ipv6Addr::new(0x2003, 0, 0, 0, 0, 0, 0, 0xfe);
        let q = quote(&orig);
        let mut buf = [0u8; 112];
        for r in [
            Repr::DstUnreachable {
                code: unreachable::NO_ROUTE,
                data: q,
            },
            Repr::PktTooBig { mtu: 1400, data: q },
            Repr::TimeExceeded {
                code: time_exceeded::HOP_LIMIT,
                data: q,
            },
            Repr::ParamProblem {
                code: param_problem::UNRECOGNIZED_NEXT_HEADER,
                pointer: 6,
                data: q,
            },
        ] {
            assert!(r.is_error());
            r.emit(router, SRC, &mut buf).unwrap();
            let p = Packet::new_checked(&buf[..]).unwrap();
            assert!(p.verify_checksum(router, SRC));
            assert_eq!(Repr::parse(router, SRC, &p), Ok(r));
            assert_eq!(p.data(), &orig[..]);
        }
        let r = Repr::PktTooBig { mtu: 1400, data: q };
        r.emit(router, SRC, &mut buf).unwrap();
        assert_eq!(&buf[4..8], &[0, 0, 0x05, 0x78]);
        assert_eq!(Packet::new_checked(&buf[..]).unwrap().mtu(), 1400);
        let r = Repr::TimeExceeded { code: 0, data: q };
        buf[4..8].fill(0xff);
        r.emit(router, SRC, &mut buf).unwrap();
        assert_eq!(&buf[..2], &[3, 0]);
        assert_eq!(&buf[4..8], &[0, 0, 0, 0]);
    }

    #[test]
    fn error_inside_ipv6_packet() {
        // Emit Packet Too Big as a full IPv6 packet and walk it back.
        let mut pkt = [0u8; 40 + 8 + 64];
        let m = echo_request();
        let r = Repr::PktTooBig {
            mtu: 1280,
            data: &m,
        };
        let ip = ipv6::Repr {
            src: DST,
            dst: SRC,
            next_header: ip_protocol::IPV6_ICMP,
            payload_len: r.buffer_len(),
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
        };
        ip.emit(&mut pkt).unwrap();
        r.emit(ip.src, ip.dst, &mut pkt[40..]).unwrap();
        let p = ipv6::Packet::new_checked(&pkt[..]).unwrap();
        let c = ipv6ext::parse_chain(p.next_header(), p.payload()).unwrap();
        assert_eq!((c.upper, c.upper_offset), (ip_protocol::IPV6_ICMP, 0));
        let icmp = Packet::new_checked(&p.payload()[c.upper_offset..]).unwrap();
        assert_eq!(Repr::parse(p.src_addr(), p.dst_addr(), &icmp), Ok(r));
    }

    #[test]
    fn unsupported_and_malformed() {
        let mut b = [0u8; 8];
        b[0] = msg_type::NEIGHBOR_SOLICIT;
        Packet::new_unchecked(&mut b[..]).fill_checksum(SRC, DST);
        assert_eq!(
            Repr::parse(SRC, DST, &Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Unsupported)
        );
        for ty in [
            msg_type::PKT_TOO_BIG,
            msg_type::ECHO_REQUEST,
            msg_type::ECHO_REPLY,
        ] {
            b[0] = ty;
            b[1] = 1;
            Packet::new_unchecked(&mut b[..]).fill_checksum(SRC, DST);
            assert_eq!(
                Repr::parse(SRC, DST, &Packet::new_checked(&b[..]).unwrap()),
                Err(Error::Malformed)
            );
        }
    }

    #[test]
    fn quote_is_bounded() {
        assert_eq!(MAX_QUOTE_LEN, 1232);
        assert_eq!(quote(&[0u8; 1500]).len(), 1232);
        assert_eq!(quote(&[0u8; 48]).len(), 48);
    }

    #[test]
    fn fuzz_smoke() {
        let m = echo_request();
        for n in 0..=m.len() {
            fuzz(&m[..n]);
            fuzz(&m[n..]);
        }
    }
}
