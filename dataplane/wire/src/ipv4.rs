//! IPv4 header (RFC 791 section 3.1) with header checksum (RFC 791, RFC 1071) and its
//! incremental update on TTL decrement (RFC 1624, RFC 1812 section 5.3.1).
//!
//! Options are not interpreted: `new_checked` accepts IHL > 5 and [`Packet::payload`] starts
//! after them. The payload is bounded by Total Length, so Ethernet padding after the datagram
//! is not part of it.

use crate::{be16, checksum, put16, Error, Result};
use core::net::Ipv4Addr;

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

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    /// TTL and protocol share one 16-bit checksum word.
    pub const TTL_PROTO: Range<usize> = 8..10;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
}

/// Flag bits and offset mask of the 16-bit flags/fragment-offset word (RFC 791 section 3.1).
mod flg {
    pub const RESERVED: u16 = 0x8000;
    pub const DF: u16 = 0x4000;
    pub const MF: u16 = 0x2000;
    pub const OFFSET: u16 = 0x1fff;
}

/// Length of an IPv4 header without options (IHL = 5).
pub const HEADER_LEN: usize = 20;
/// Longest IPv4 header (IHL = 15).
pub const MAX_HEADER_LEN: usize = 60;

/// A read/write view of an IPv4 datagram.
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

    /// Wrap and validate: version 4, IHL >= 5, header and Total Length within the buffer.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Check the invariants every accessor relies on. A buffer longer than Total Length is
    /// accepted (Ethernet pads short frames to 60 bytes); a shorter one is `Truncated`.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::Malformed);
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if b.len() < hl {
            return Err(Error::Truncated);
        }
        let total = self.total_len() as usize;
        if total < hl {
            return Err(Error::Malformed);
        }
        if b.len() < total {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL * 4), options included.
    pub fn header_len(&self) -> usize {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0f) as usize * 4
    }

    /// The whole former TOS octet: DSCP (RFC 2474) in the top six bits, ECN (RFC 3168) below.
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }

    pub fn dscp(&self) -> u8 {
        self.dscp_ecn() >> 2
    }

    pub fn ecn(&self) -> u8 {
        self.dscp_ecn() & 0x03
    }

    /// Total Length: header plus payload, in bytes.
    pub fn total_len(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::LENGTH])
    }

    pub fn ident(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::IDENT])
    }

    fn flg_off(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::FLG_OFF])
    }

    pub fn dont_frag(&self) -> bool {
        self.flg_off() & flg::DF != 0
    }

    pub fn more_frags(&self) -> bool {
        self.flg_off() & flg::MF != 0
    }

    /// The reserved flag bit, which RFC 791 says must be zero.
    pub fn reserved_flag(&self) -> bool {
        self.flg_off() & flg::RESERVED != 0
    }

    /// Fragment offset in bytes (the field counts 8-octet units).
    pub fn frag_offset(&self) -> u16 {
        (self.flg_off() & flg::OFFSET) << 3
    }

    /// Part of a fragmented datagram (MF set or non-zero offset), RFC 791 section 2.3.
    pub fn is_fragment(&self) -> bool {
        self.flg_off() & (flg::MF | flg::OFFSET) != 0
    }

    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CHECKSUM])
    }

    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SRC];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::DST];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// The header, options included.
    pub fn header(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        b.get(..self.header_len()).unwrap_or(b)
    }

    /// Raw options area (empty when IHL = 5).
    pub fn options(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(HEADER_LEN..self.header_len())
            .unwrap_or(&[])
    }

    /// The payload, bounded by Total Length (trailing link-layer padding excluded).
    pub fn payload(&self) -> &[u8] {
        let range = self.header_len()..self.total_len() as usize;
        self.buffer.as_ref().get(range).unwrap_or(&[])
    }

    /// RFC 1071: the one's-complement sum over the header, checksum included, is all ones.
    pub fn verify_checksum(&self) -> bool {
        checksum::fold(checksum::sum(self.header())) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set version 4 and the header length in bytes (rounded down to a multiple of 4).
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        let ihl = (header_len / 4).min(15) as u8;
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | ihl;
    }

    pub fn set_dscp_ecn(&mut self, v: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = v;
    }

    pub fn set_total_len(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::LENGTH], v);
    }

    pub fn set_ident(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::IDENT], v);
    }

    fn set_flg_off(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::FLG_OFF], v);
    }

    /// Clear all flags and the fragment offset.
    pub fn clear_flags(&mut self) {
        self.set_flg_off(0);
    }

    pub fn set_dont_frag(&mut self, v: bool) {
        let w = self.flg_off() & !flg::DF;
        self.set_flg_off(if v { w | flg::DF } else { w });
    }

    pub fn set_more_frags(&mut self, v: bool) {
        let w = self.flg_off() & !flg::MF;
        self.set_flg_off(if v { w | flg::MF } else { w });
    }

    /// Set the fragment offset in bytes; the low three bits are dropped (8-octet units).
    pub fn set_frag_offset(&mut self, bytes: u16) {
        let w = self.flg_off() & !flg::OFFSET;
        self.set_flg_off(w | (bytes >> 3));
    }

    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }

    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = v;
    }

    pub fn set_checksum(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::CHECKSUM], v);
    }

    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.octets());
    }

    /// Compute and store the header checksum over the current header (options included).
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.header());
        self.set_checksum(c);
    }

    /// Forwarding step of RFC 1812 section 5.3.1: decrement TTL and patch the checksum with
    /// the RFC 1624 incremental update instead of re-summing the header.
    ///
    /// Returns the new TTL, or `None` (leaving the header untouched) if TTL was already 0.
    /// A router must not forward when this returns `Some(0)`; it sends Time Exceeded instead.
    pub fn decrement_ttl_update_checksum(&mut self) -> Option<u8> {
        let b = self.buffer.as_mut();
        let ttl = b[field::TTL].checked_sub(1)?;
        let old = be16(&b[field::TTL_PROTO]);
        b[field::TTL] = ttl;
        let new = be16(&b[field::TTL_PROTO]);
        let c = checksum::update16(be16(&b[field::CHECKSUM]), old, new);
        put16(&mut b[field::CHECKSUM], c);
        Some(ttl)
    }

    /// Mutable payload, bounded by Total Length.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.header_len()..self.total_len() as usize;
        self.buffer.as_mut().get_mut(range).unwrap_or_default()
    }
}

/// High-level representation of an unfragmented IPv4 header without options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: u8,
    /// Payload length in bytes (Total Length minus header length).
    pub payload_len: usize,
    pub ttl: u8,
    pub dscp_ecn: u8,
    pub ident: u16,
    pub dont_frag: bool,
}

impl Repr {
    /// Parse a checked packet, verifying the header checksum (`Error::Checksum`).
    ///
    /// Fragments are `Error::Unsupported`: a `Repr` has no fragment fields, so it could not
    /// describe one faithfully. Options are skipped and not represented.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        if packet.is_fragment() {
            return Err(Error::Unsupported);
        }
        Ok(Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: packet.total_len() as usize - packet.header_len(),
            ttl: packet.ttl(),
            dscp_ecn: packet.dscp_ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
        })
    }

    /// Emitted headers carry no options.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Write the 20-byte header (checksum filled) into the start of `buf`. The payload is the
    /// caller's to write; `buf` only needs to hold the header.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if self.payload_len > u16::MAX as usize - HEADER_LEN {
            return Err(Error::Malformed);
        }
        if buf.len() < HEADER_LEN {
            return Err(Error::BufferTooSmall);
        }
        let mut p = Packet::new_unchecked(&mut buf[..HEADER_LEN]);
        p.set_version_and_header_len(HEADER_LEN);
        p.set_dscp_ecn(self.dscp_ecn);
        p.set_total_len(self.buffer_len() as u16);
        p.set_ident(self.ident);
        p.clear_flags();
        p.set_dont_frag(self.dont_frag);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src);
        p.set_dst_addr(self.dst);
        p.fill_checksum();
        Ok(())
    }
}

#[cfg(any(test, feature = "fuzzing"))]
/// Largest datagram the fuzz round-trip re-parses (it needs the whole datagram in a stack buffer).
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
        p.ident(),
        p.reserved_flag(),
        p.ttl(),
        p.protocol(),
    );
    let _ = (
        p.dont_frag(),
        p.more_frags(),
        p.frag_offset(),
        p.is_fragment(),
        p.checksum(),
    );
    let _ = (
        p.src_addr(),
        p.dst_addr(),
        p.options().len(),
        p.payload().len(),
    );
    let hl = p.header_len();
    assert!(hl + p.payload().len() == p.total_len() as usize);

    // The incremental update keeps a valid checksum valid.
    let mut hdr = [0u8; MAX_HEADER_LEN];
    hdr[..hl].copy_from_slice(&data[..hl]);
    let mut h = Packet::new_unchecked(&mut hdr[..hl]);
    let was_valid = h.verify_checksum();
    if h.decrement_ttl_update_checksum().is_some() && was_valid {
        assert!(h.verify_checksum());
    }
    fuzz_repr(&p);
    // Again with the checksum fixed, so that random headers reach `Repr` too.
    let total = p.total_len() as usize;
    if total <= FUZZ_BUF {
        let mut fixed = [0u8; FUZZ_BUF];
        fixed[..total].copy_from_slice(&data[..total]);
        let mut f = Packet::new_checked(&mut fixed[..total]).expect("same header");
        f.fill_checksum();
        assert!(f.verify_checksum());
        fuzz_repr(&Packet::new_checked(&fixed[..total]).expect("same header"));
    }
}

#[cfg(any(test, feature = "fuzzing"))]
fn fuzz_repr(p: &Packet<&[u8]>) {
    let Ok(r) = Repr::parse(p) else { return };
    let mut buf = [0u8; FUZZ_BUF];
    if r.buffer_len() <= buf.len() {
        r.emit(&mut buf).expect("header fits");
        let p2 = Packet::new_checked(&buf[..r.buffer_len()]).expect("emitted header checks");
        assert_eq!(Repr::parse(&p2), Ok(r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worked example header from Wikipedia's "IPv4 header checksum" article: a UDP
    /// datagram 192.168.0.1 -> 192.168.0.199, Total Length 0x73, checksum 0xb861.
    static HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    fn datagram() -> [u8; 0x73] {
        let mut d = [0u8; 0x73];
        d[..20].copy_from_slice(&HDR);
        for (i, b) in d[20..].iter_mut().enumerate() {
            *b = i as u8;
        }
        d
    }

    #[test]
    fn parse_known_header() {
        let d = datagram();
        let p = Packet::new_checked(&d[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 0x73);
        assert_eq!(p.ident(), 0);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert!(!p.is_fragment());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), ip_protocol::UDP);
        assert_eq!(p.checksum(), 0xb861);
        assert!(p.verify_checksum());
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 0, 199));
        assert_eq!(p.payload().len(), 0x73 - 20);
        assert!(p.options().is_empty());
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr {
                src: Ipv4Addr::new(192, 168, 0, 1),
                dst: Ipv4Addr::new(192, 168, 0, 199),
                protocol: ip_protocol::UDP,
                payload_len: 0x73 - 20,
                ttl: 64,
                dscp_ecn: 0,
                ident: 0,
                dont_frag: true,
            }
        );
    }

    #[test]
    fn emit_reproduces_known_checksum() {
        let r = Repr::parse(&Packet::new_checked(&datagram()[..]).unwrap()).unwrap();
        let mut buf = [0u8; 20];
        r.emit(&mut buf).unwrap();
        assert_eq!(buf, HDR);
        assert_eq!(r.emit(&mut [0u8; 19]), Err(Error::BufferTooSmall));
        let big = Repr {
            payload_len: 65516,
            ..r
        };
        assert_eq!(big.emit(&mut buf), Err(Error::Malformed));
    }

    #[test]
    fn bad_checksum() {
        let mut d = datagram();
        d[11] ^= 1;
        let p = Packet::new_checked(&d[..]).unwrap();
        assert!(!p.verify_checksum());
        assert_eq!(Repr::parse(&p), Err(Error::Checksum));
    }

    #[test]
    fn trailing_padding_excluded() {
        let mut d = [0u8; 60];
        let r = Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            protocol: ip_protocol::ICMP,
            payload_len: 8,
            ttl: 1,
            dscp_ecn: 0xb8,
            ident: 0x1234,
            dont_frag: false,
        };
        r.emit(&mut d).unwrap();
        d[28..].fill(0xee); // Ethernet padding
        let p = Packet::new_checked(&d[..]).unwrap();
        assert_eq!(p.payload().len(), 8);
        assert_eq!(p.dscp(), 46); // EF
        assert_eq!(Repr::parse(&p), Ok(r));
    }

    #[test]
    fn truncated_and_malformed() {
        let d = datagram();
        assert_eq!(Packet::new_checked(&d[..19]).unwrap_err(), Error::Truncated);
        // Shorter than Total Length.
        assert_eq!(
            Packet::new_checked(&d[..0x72]).unwrap_err(),
            Error::Truncated
        );
        let mut v6 = d;
        v6[0] = 0x65;
        assert_eq!(Packet::new_checked(&v6[..]).unwrap_err(), Error::Malformed);
        let mut ihl4 = d;
        ihl4[0] = 0x44;
        assert_eq!(
            Packet::new_checked(&ihl4[..]).unwrap_err(),
            Error::Malformed
        );
        // IHL 15 needs 60 header bytes.
        let mut ihl15 = d;
        ihl15[0] = 0x4f;
        assert_eq!(
            Packet::new_checked(&ihl15[..40]).unwrap_err(),
            Error::Truncated
        );
        // Total Length smaller than the header.
        let mut short_total = d;
        short_total[2..4].copy_from_slice(&[0, 19]);
        assert_eq!(
            Packet::new_checked(&short_total[..]).unwrap_err(),
            Error::Malformed
        );
    }

    #[test]
    fn options_skipped() {
        // IHL 6 with a 4-byte Router Alert option (RFC 2113: 94 04 00 00).
        let mut d = [0u8; 32];
        d[..12].copy_from_slice(&[0x46, 0, 0, 32, 0xab, 0xcd, 0, 0, 1, 2, 0, 0]);
        d[12..20].copy_from_slice(&[10, 0, 0, 1, 224, 0, 0, 22]);
        d[20..24].copy_from_slice(&[0x94, 0x04, 0x00, 0x00]);
        d[24..].fill(0x5a);
        let mut p = Packet::new_checked(&mut d[..]).unwrap();
        p.fill_checksum();
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.options(), &[0x94, 0x04, 0x00, 0x00]);
        assert_eq!(p.payload(), &[0x5a; 8]);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r.payload_len, 8);
        assert_eq!(r.protocol, ip_protocol::IGMP);
    }

    #[test]
    fn fragments_unsupported_in_repr() {
        let mut d = datagram();
        let mut p = Packet::new_checked(&mut d[..]).unwrap();
        p.set_dont_frag(false);
        p.set_more_frags(true);
        p.set_frag_offset(1480);
        p.fill_checksum();
        assert!(p.more_frags() && p.is_fragment());
        assert_eq!(p.frag_offset(), 1480);
        assert!(!p.dont_frag());
        assert_eq!(Repr::parse(&p), Err(Error::Unsupported));
    }

    #[test]
    fn ttl_decrement_matches_full_recompute() {
        let mut d = datagram();
        for ttl in [64u8, 2, 1, 255, 0x80] {
            let mut p = Packet::new_checked(&mut d[..]).unwrap();
            p.set_ttl(ttl);
            p.fill_checksum();
            assert_eq!(p.decrement_ttl_update_checksum(), Some(ttl - 1));
            assert_eq!(p.ttl(), ttl - 1);
            assert!(p.verify_checksum());
            let inc = p.checksum();
            p.fill_checksum();
            assert_eq!(inc, p.checksum());
        }
        let mut p = Packet::new_checked(&mut d[..]).unwrap();
        p.set_ttl(0);
        p.fill_checksum();
        let c = p.checksum();
        assert_eq!(p.decrement_ttl_update_checksum(), None);
        assert_eq!((p.ttl(), p.checksum()), (0, c));
    }

    #[test]
    fn fuzz_smoke() {
        fuzz(&datagram());
        let mut d = datagram();
        d[11] ^= 0xff;
        fuzz(&d);
        for n in 0..d.len() {
            fuzz(&d[..n]);
        }
    }
}
