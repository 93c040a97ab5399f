//! GTP-U v1 header (3GPP TS 29.281 section 5): flags, optional fields, extension-header chain.
//!
//! ```text
//! octet 1:     Version (3) = 1 | PT = 1 | spare | E | S | PN        (section 5.1)
//! octet 2:     Message Type
//! octets 3-4:  Length: octets after the mandatory 8 (optional fields, extensions, payload)
//! octets 5-8:  TEID
//! octets 9-10: Sequence Number      \
//! octet 11:    N-PDU Number          > present when any of E, S, PN is set
//! octet 12:    Next Extension Header Type /
//! extension headers (section 5.2): [length in 4-octet units][content][next type] ...
//! ```
//!
//! [`Header::new_checked`] walks the whole extension chain once, so that every accessor after
//! it (including [`Header::payload`]) is in bounds.

use crate::pdu_session;
use crate::{be16, be32, put16, put32, Error, Result};

/// UDP port of GTP-U (TS 29.281 section 4.4.2.3).
pub const PORT: u16 = 2152;

/// The only GTP version handled here (GTPv1, TS 29.281 section 5.1).
pub const VERSION: u8 = 1;

/// Most extension headers walked before giving up with `Error::Unsupported`. The spec sets
/// no limit; this bounds the work an attacker can make us do per packet.
pub const MAX_EXT_HEADERS: usize = 16;

/// Message types (TS 29.281 section 6.1, table 6.1-1).
pub mod msg_type {
    pub const ECHO_REQUEST: u8 = 1;
    pub const ECHO_RESPONSE: u8 = 2;
    pub const ERROR_INDICATION: u8 = 26;
    pub const SUPPORTED_EXT_HEADERS_NOTIFICATION: u8 = 31;
    pub const END_MARKER: u8 = 254;
    /// G-PDU: a T-PDU (user packet) behind the header.
    pub const G_PDU: u8 = 255;
}

/// Extension header types (TS 29.281 section 5.2.1, table 5.2.1-3).
pub mod ext_type {
    pub const NO_MORE: u8 = 0x00;
    /// Reserved for GTP-C (MBMS support indication).
    pub const MBMS_SUPPORT_INDICATION: u8 = 0x01;
    /// Reserved for GTP-C (MS Info Change Reporting support indication).
    pub const MS_INFO_CHANGE_REPORTING: u8 = 0x02;
    /// Long PDCP PDU Number, comprehension not required.
    pub const LONG_PDCP_PDU_NUMBER_NR: u8 = 0x03;
    pub const SERVICE_CLASS_INDICATOR: u8 = 0x20;
    /// UDP Port (section 5.2.2.1), e.g. in Error Indication.
    pub const UDP_PORT: u8 = 0x40;
    pub const RAN_CONTAINER: u8 = 0x81;
    /// Long PDCP PDU Number, comprehension required.
    pub const LONG_PDCP_PDU_NUMBER: u8 = 0x82;
    pub const XW_RAN_CONTAINER: u8 = 0x83;
    pub const NR_RAN_CONTAINER: u8 = 0x84;
    /// PDU Session Container (TS 38.415), see [`crate::pdu_session`].
    pub const PDU_SESSION_CONTAINER: u8 = 0x85;
    /// PDCP PDU Number (section 5.2.2.2).
    pub const PDCP_PDU_NUMBER: u8 = 0xc0;
    /// Reserved for GTP-C (Suspend Request / Response).
    pub const SUSPEND_REQUEST: u8 = 0xc1;
    pub const SUSPEND_RESPONSE: u8 = 0xc2;

    /// Bit 8 set: a receiving endpoint must understand the type or reject the packet
    /// (section 5.2.1, table 5.2.1-2).
    pub const fn endpoint_must_comprehend(t: u8) -> bool {
        t & 0x80 != 0
    }

    /// Bits 8 and 7 set: an intermediate node must understand the type as well.
    pub const fn intermediate_must_comprehend(t: u8) -> bool {
        t & 0xc0 == 0xc0
    }
}

/// Bits of the flags octet (section 5.1).
pub mod flags {
    pub const VERSION_MASK: u8 = 0xe0;
    /// Protocol Type: 1 = GTP, 0 = GTP'.
    pub const PT: u8 = 0x10;
    pub const SPARE: u8 = 0x08;
    /// Extension Header flag.
    pub const E: u8 = 0x04;
    /// Sequence Number flag.
    pub const S: u8 = 0x02;
    /// N-PDU Number flag.
    pub const PN: u8 = 0x01;
    /// Any of these set means the 4-octet optional block is present.
    pub const OPT_MASK: u8 = E | S | PN;
}

mod field {
    use core::ops::Range;
    pub const FLAGS: usize = 0;
    pub const MSG_TYPE: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const TEID: Range<usize> = 4..8;
    pub const SEQ: Range<usize> = 8..10;
    pub const NPDU: usize = 10;
    pub const NEXT_EXT: usize = 11;
}

/// Length of the mandatory header.
pub const HEADER_LEN: usize = field::TEID.end;
/// Length of the header with the optional sequence / N-PDU / next-type block.
pub const OPT_HEADER_LEN: usize = field::NEXT_EXT + 1;

/// A read/write view of a GTP-U v1 message.
///
/// After [`Header::new_checked`]: version 1 and PT 1; the message (8 + length field octets)
/// fits the buffer; the optional block, when flagged, lies within the length; and the
/// extension chain is well formed, within the length, and at most [`MAX_EXT_HEADERS`] long.
/// Bytes after the message (e.g. Ethernet padding) are ignored.
#[derive(Debug, Clone)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Wrap without checking; accessors may panic on short buffers. Prefer [`Header::new_checked`].
    pub const fn new_unchecked(buffer: T) -> Header<T> {
        Header { buffer }
    }

    /// Wrap and validate (see [`Header::check_len`]).
    pub fn new_checked(buffer: T) -> Result<Header<T>> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// `Truncated` if the mandatory header or the message does not fit the buffer;
    /// `Unsupported` if the version is not 1 or PT is not 1 (GTP'), or the extension chain is
    /// longer than [`MAX_EXT_HEADERS`]; `Malformed` if the optional block or an extension
    /// header runs past the length field, or an extension header has length 0.
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != VERSION || self.flags() & flags::PT == 0 {
            return Err(Error::Unsupported);
        }
        if HEADER_LEN + self.length() as usize > buf.len() {
            return Err(Error::Truncated);
        }
        self.walk().map(|_| ())
    }

    /// Length of the header with optional block and extensions, validating the chain.
    fn walk(&self) -> Result<usize> {
        let buf = self.buffer.as_ref();
        let msg = buf.get(..self.total_len()).ok_or(Error::Truncated)?;
        if !self.has_opt() {
            return Ok(HEADER_LEN);
        }
        if msg.len() < OPT_HEADER_LEN {
            return Err(Error::Malformed);
        }
        let mut off = OPT_HEADER_LEN;
        let mut next = self.next_ext_type();
        let mut count = 0;
        while next != ext_type::NO_MORE {
            if count == MAX_EXT_HEADERS {
                return Err(Error::Unsupported);
            }
            let units = *msg.get(off).ok_or(Error::Malformed)?;
            if units == 0 {
                return Err(Error::Malformed);
            }
            let end = off + units as usize * 4;
            next = *msg.get(end - 1).ok_or(Error::Malformed)?;
            off = end;
            count += 1;
        }
        Ok(off)
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The whole flags octet.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    pub fn version(&self) -> u8 {
        self.flags() >> 5
    }

    /// Protocol Type: `true` for GTP (always, after `new_checked`), `false` for GTP'.
    pub fn protocol_type(&self) -> bool {
        self.flags() & flags::PT != 0
    }

    pub fn e_flag(&self) -> bool {
        self.flags() & flags::E != 0
    }

    pub fn s_flag(&self) -> bool {
        self.flags() & flags::S != 0
    }

    pub fn pn_flag(&self) -> bool {
        self.flags() & flags::PN != 0
    }

    /// Whether the optional 4-octet block (sequence, N-PDU, next type) is present.
    pub fn has_opt(&self) -> bool {
        self.flags() & flags::OPT_MASK != 0
    }

    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::MSG_TYPE]
    }

    /// The length field: octets after the mandatory 8.
    pub fn length(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::LENGTH])
    }

    /// Length of the whole message: 8 + the length field.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + self.length() as usize
    }

    pub fn teid(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::TEID])
    }

    /// Sequence Number, if the S flag is set.
    pub fn seq_number(&self) -> Option<u16> {
        self.s_flag()
            .then(|| be16(&self.buffer.as_ref()[field::SEQ]))
    }

    /// N-PDU Number, if the PN flag is set.
    pub fn npdu_number(&self) -> Option<u8> {
        self.pn_flag().then(|| self.buffer.as_ref()[field::NPDU])
    }

    /// Type of the first extension header; 0 when the E flag is clear (section 5.1: the
    /// field is then not to be interpreted).
    pub fn next_ext_type(&self) -> u8 {
        if self.e_flag() {
            self.buffer.as_ref()[field::NEXT_EXT]
        } else {
            ext_type::NO_MORE
        }
    }

    /// Length of the header: 8, or 12 plus the extension headers.
    pub fn header_len(&self) -> usize {
        // Only fails on an unchecked buffer; then treat the whole message as header.
        self.walk().unwrap_or_else(|_| self.total_len())
    }

    /// The extension headers as `(type, content)`, content being the octets between the
    /// length octet and the next-type octet (padding included).
    pub fn extensions(&self) -> ExtHeaders<'_> {
        let buf = self.buffer.as_ref();
        let end = self.total_len().min(buf.len());
        let data = buf.get(OPT_HEADER_LEN..end).unwrap_or(&[]);
        ExtHeaders {
            data,
            next: self.next_ext_type(),
            remaining: MAX_EXT_HEADERS,
        }
    }

    /// Content of the first extension header of type `ty`.
    pub fn find_extension(&self, ty: u8) -> Option<&[u8]> {
        self.extensions().find(|&(t, _)| t == ty).map(|(_, c)| c)
    }

    /// The PDU Session Container, if there is one (the first, if several).
    pub fn pdu_session(&self) -> Result<Option<pdu_session::Repr>> {
        match self.find_extension(ext_type::PDU_SESSION_CONTAINER) {
            None => Ok(None),
            Some(c) => pdu_session::Repr::parse(&pdu_session::Packet::new_checked(c)?).map(Some),
        }
    }

    /// The octets after the header and all extension headers, bounded by the length field.
    pub fn payload(&self) -> &[u8] {
        let end = self.total_len();
        let start = self.header_len().min(end);
        &self.buffer.as_ref()[start..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    pub fn set_flags(&mut self, v: u8) {
        self.buffer.as_mut()[field::FLAGS] = v;
    }

    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::MSG_TYPE] = v;
    }

    pub fn set_length(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::LENGTH], v);
    }

    pub fn set_teid(&mut self, v: u32) {
        put32(&mut self.buffer.as_mut()[field::TEID], v);
    }

    /// Write the sequence number octets (the optional block must be present).
    pub fn set_seq_number(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::SEQ], v);
    }

    /// Write the N-PDU number octet (the optional block must be present).
    pub fn set_npdu_number(&mut self, v: u8) {
        self.buffer.as_mut()[field::NPDU] = v;
    }

    /// Write the next extension header type octet (the optional block must be present).
    pub fn set_next_ext_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::NEXT_EXT] = v;
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = self.total_len();
        let start = self.header_len().min(end);
        &mut self.buffer.as_mut()[start..end]
    }
}

/// Iterator over a message's extension headers, yielding `(type, content)`.
///
/// Stops at next type 0, at the end of the message, after [`MAX_EXT_HEADERS`], or at a
/// malformed header (which [`Header::new_checked`] would have rejected).
#[derive(Debug, Clone)]
pub struct ExtHeaders<'a> {
    data: &'a [u8],
    next: u8,
    remaining: usize,
}

impl<'a> Iterator for ExtHeaders<'a> {
    type Item = (u8, &'a [u8]);

    fn next(&mut self) -> Option<(u8, &'a [u8])> {
        if self.next == ext_type::NO_MORE || self.remaining == 0 {
            return None;
        }
        let units = *self.data.first()? as usize;
        let len = units * 4;
        if units == 0 || len > self.data.len() {
            self.remaining = 0;
            return None;
        }
        let ty = self.next;
        let content = &self.data[1..len - 1];
        self.next = self.data[len - 1];
        self.data = &self.data[len..];
        self.remaining -= 1;
        Some((ty, content))
    }
}

/// High-level representation of a GTP-U header.
///
/// Only the PDU Session Container is represented among extension headers: [`Repr::parse`]
/// skips any others, and [`Repr::emit`] writes at most that one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub msg_type: u8,
    pub teid: u32,
    /// Sequence Number; `Some` sets the S flag.
    pub seq: Option<u16>,
    /// N-PDU Number; `Some` sets the PN flag.
    pub npdu: Option<u8>,
    /// PDU Session Container; `Some` sets the E flag.
    pub ext: Option<pdu_session::Repr>,
    /// Octets after the header and extensions (T-PDU or IEs).
    pub payload_len: usize,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(header: &Header<T>) -> Result<Repr> {
        header.check_len()?;
        Ok(Repr {
            msg_type: header.msg_type(),
            teid: header.teid(),
            seq: header.seq_number(),
            npdu: header.npdu_number(),
            ext: header.pdu_session()?,
            payload_len: header.payload().len(),
        })
    }

    /// 8 if no optional field or extension is present, else 12 plus the extension.
    pub const fn header_len(&self) -> usize {
        match self.ext {
            None if self.seq.is_none() && self.npdu.is_none() => HEADER_LEN,
            None => OPT_HEADER_LEN,
            Some(e) => OPT_HEADER_LEN + e.buffer_len(),
        }
    }

    pub const fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// Write the header (and extension) into the first [`Repr::header_len`] bytes of `buf`,
    /// with the length field covering `payload_len` octets to be written after it.
    /// `Malformed` if the message does not fit the 16-bit length field or the extension is
    /// invalid.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let hl = self.header_len();
        if buf.len() < hl {
            return Err(Error::BufferTooSmall);
        }
        let length =
            u16::try_from(hl - HEADER_LEN + self.payload_len).map_err(|_| Error::Malformed)?;
        let mut f = (VERSION << 5) | flags::PT;
        if self.ext.is_some() {
            f |= flags::E;
        }
        if self.seq.is_some() {
            f |= flags::S;
        }
        if self.npdu.is_some() {
            f |= flags::PN;
        }
        if let Some(e) = self.ext {
            e.emit(&mut buf[OPT_HEADER_LEN..hl])?;
        }
        let mut h = Header::new_unchecked(buf);
        h.set_flags(f);
        h.set_msg_type(self.msg_type);
        h.set_length(length);
        h.set_teid(self.teid);
        if hl > HEADER_LEN {
            h.set_seq_number(self.seq.unwrap_or(0));
            h.set_npdu_number(self.npdu.unwrap_or(0));
            h.set_next_ext_type(if self.ext.is_some() {
                ext_type::PDU_SESSION_CONTAINER
            } else {
                ext_type::NO_MORE
            });
        }
        Ok(())
    }
}

/// Fuzz entry: parse, read every field, walk extensions, re-emit, re-parse. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let Ok(h) = Header::new_checked(data) else {
        return;
    };
    let _ = (
        h.version(),
        h.protocol_type(),
        h.e_flag(),
        h.s_flag(),
        h.pn_flag(),
    );
    let _ = (
        h.msg_type(),
        h.length(),
        h.teid(),
        h.seq_number(),
        h.npdu_number(),
    );
    let _ = h.next_ext_type();
    let mut n = 0;
    for (t, c) in h.extensions() {
        assert_eq!(c.len() % 4, 2);
        let _ = (
            ext_type::endpoint_must_comprehend(t),
            ext_type::intermediate_must_comprehend(t),
        );
        pdu_session::fuzz(c);
        n += 1;
    }
    assert!(n <= MAX_EXT_HEADERS);
    assert!(h.header_len() + h.payload().len() == h.total_len());
    let Ok(r) = Repr::parse(&h) else { return };

    let mut out = [0u8; 256];
    let total = r.buffer_len();
    if total <= out.len() {
        r.emit(&mut out[..total]).expect("fits");
        out[r.header_len()..total].copy_from_slice(h.payload());
        let q = Header::new_checked(&out[..total]).expect("emitted message checks");
        assert_eq!(Repr::parse(&q), Ok(r));
        assert_eq!(q.payload(), h.payload());
    } else {
        let mut hdr = [0u8; 20];
        r.emit(&mut hdr).expect("header fits");
        let q = Header::new_unchecked(&hdr[..]);
        assert_eq!((q.msg_type(), q.teid()), (r.msg_type, r.teid));
        assert_eq!((q.seq_number(), q.npdu_number()), (r.seq, r.npdu));
        assert_eq!(q.total_len(), total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DL G-PDU from a capture: E flag, G-PDU, length 84, TEID 1, seq 0, N-PDU 0, next
    /// extension 0x85; PDU Session Container of 1 unit (DL, QFI 9), next type 0; then 76
    /// octets of inner IPv4 (only its start is meaningful here).
    fn gpdu() -> [u8; 92] {
        let mut m = [0u8; 92];
        m[..16].copy_from_slice(&[
            0x34, 0xff, 0x00, 0x54, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x85, 0x01, 0x00,
            0x09, 0x00,
        ]);
        m[16] = 0x45;
        m[18] = 0x00;
        m[19] = 76;
        m
    }

    #[test]
    fn parse_gpdu_capture() {
        let m = gpdu();
        let h = Header::new_checked(&m[..]).unwrap();
        assert_eq!(h.version(), 1);
        assert!(h.protocol_type());
        assert!(h.e_flag() && !h.s_flag() && !h.pn_flag());
        assert_eq!(h.msg_type(), msg_type::G_PDU);
        assert_eq!(h.length(), 84);
        assert_eq!(h.teid(), 1);
        assert_eq!(h.seq_number(), None);
        assert_eq!(h.npdu_number(), None);
        assert_eq!(h.next_ext_type(), ext_type::PDU_SESSION_CONTAINER);
        assert_eq!(h.header_len(), 16);
        assert_eq!(h.payload().len(), 76);
        assert_eq!(h.payload()[0], 0x45);
        let mut it = h.extensions();
        assert_eq!(it.next(), Some((0x85, &[0x00, 0x09][..])));
        assert_eq!(it.next(), None);
        let ps = Some(pdu_session::Repr::Dl {
            qfi: 9,
            rqi: false,
            ppi: None,
        });
        assert_eq!(h.pdu_session(), Ok(ps));

        let r = Repr::parse(&h).unwrap();
        assert_eq!(
            r,
            Repr {
                msg_type: 255,
                teid: 1,
                seq: None,
                npdu: None,
                ext: ps,
                payload_len: 76
            }
        );
        assert_eq!(r.header_len(), 16);
        let mut out = [0u8; 16];
        r.emit(&mut out).unwrap();
        assert_eq!(out[..], m[..16]);
    }

    #[test]
    fn minimal_gpdu() {
        // 30 ff 00 04 TEID 0x12345678, payload de ad be ef.
        let m = [
            0x30, 0xff, 0x00, 0x04, 0x12, 0x34, 0x56, 0x78, 0xde, 0xad, 0xbe, 0xef,
        ];
        let h = Header::new_checked(&m[..]).unwrap();
        assert!(!h.has_opt());
        assert_eq!(h.next_ext_type(), 0);
        assert_eq!(h.header_len(), 8);
        assert_eq!(h.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(h.extensions().count(), 0);
        let r = Repr::parse(&h).unwrap();
        assert_eq!(r.header_len(), 8);
        let mut out = [0u8; 12];
        r.emit(&mut out).unwrap();
        out[8..].copy_from_slice(h.payload());
        assert_eq!(out, m);
    }

    #[test]
    fn seq_and_npdu() {
        let m = [
            0x33, 0xff, 0x00, 0x05, 0, 0, 0, 7, 0xab, 0xcd, 0x42, 0x00, 0x99,
        ];
        let h = Header::new_checked(&m[..]).unwrap();
        assert_eq!(h.seq_number(), Some(0xabcd));
        assert_eq!(h.npdu_number(), Some(0x42));
        assert_eq!(h.payload(), &[0x99]);
        let r = Repr::parse(&h).unwrap();
        assert_eq!(
            (r.seq, r.npdu, r.ext, r.payload_len),
            (Some(0xabcd), Some(0x42), None, 1)
        );
        let mut out = [0u8; 13];
        r.emit(&mut out).unwrap();
        out[12] = 0x99;
        assert_eq!(out, m);
    }

    #[test]
    fn ext_chain_skips_unknown() {
        // UDP Port ext (1 unit: 01 08 68 85), then PDU session UL QFI 5, then payload.
        let m = [
            0x34, 0xff, 0x00, 0x0d, 0, 0, 0, 1, 0, 0, 0, 0x40, 0x01, 0x08, 0x68, 0x85, 0x01, 0x10,
            0x05, 0x00, 0xaa,
        ];
        let h = Header::new_checked(&m[..]).unwrap();
        let mut it = h.extensions();
        assert_eq!(it.next(), Some((ext_type::UDP_PORT, &[0x08, 0x68][..])));
        assert_eq!(it.next(), Some((0x85, &[0x10, 0x05][..])));
        assert_eq!(it.next(), None);
        assert_eq!(h.header_len(), 20);
        assert_eq!(h.payload(), &[0xaa]);
        assert_eq!(h.pdu_session(), Ok(Some(pdu_session::Repr::Ul { qfi: 5 })));
        assert_eq!(h.find_extension(ext_type::PDCP_PDU_NUMBER), None);
    }

    #[test]
    fn trailing_bytes_ignored() {
        let mut m = [0u8; 100];
        m[..92].copy_from_slice(&gpdu());
        let h = Header::new_checked(&m[..]).unwrap();
        assert_eq!(h.payload().len(), 76);
        assert_eq!(h.total_len(), 92);
    }

    #[test]
    fn truncated_and_unsupported() {
        let m = gpdu();
        assert_eq!(Header::new_checked(&m[..7]).unwrap_err(), Error::Truncated);
        assert_eq!(Header::new_checked(&m[..91]).unwrap_err(), Error::Truncated);
        let mut v = m;
        v[0] = 0x54; // version 2
        assert_eq!(Header::new_checked(&v[..]).unwrap_err(), Error::Unsupported);
        v[0] = 0x24; // PT = 0 (GTP')
        assert_eq!(Header::new_checked(&v[..]).unwrap_err(), Error::Unsupported);
        v[0] = 0x14; // version 0
        assert_eq!(Header::new_checked(&v[..]).unwrap_err(), Error::Unsupported);
    }

    #[test]
    fn malformed_lengths() {
        // S flag but length 2: optional block outside the message.
        let m = [0x32, 0x01, 0x00, 0x02, 0, 0, 0, 0, 0, 1, 0, 0];
        assert_eq!(Header::new_checked(&m[..]).unwrap_err(), Error::Malformed);
        // Extension header with length 0.
        let mut g = gpdu();
        g[12] = 0;
        assert_eq!(Header::new_checked(&g[..]).unwrap_err(), Error::Malformed);
        // Extension header running past the length field.
        let short = [
            0x34, 0xff, 0x00, 0x08, 0, 0, 0, 1, 0, 0, 0, 0x85, 0x02, 0x00, 0x09, 0x00,
        ];
        assert_eq!(
            Header::new_checked(&short[..]).unwrap_err(),
            Error::Malformed
        );
        // E flag, next type set, but no room for any extension.
        let none = [0x34, 0xff, 0x00, 0x04, 0, 0, 0, 1, 0, 0, 0, 0x85];
        assert_eq!(
            Header::new_checked(&none[..]).unwrap_err(),
            Error::Malformed
        );
        // A PDU Session Container the view accepts but whose PDU type is reserved.
        let mut r = gpdu();
        r[13] = 0x30;
        let h = Header::new_checked(&r[..]).unwrap();
        assert_eq!(Repr::parse(&h), Err(Error::Unsupported));
    }

    #[test]
    fn ext_chain_bounded() {
        // 4 + 17 extension headers of one unit each (type 0x40, chained).
        let mut m = [0u8; 12 + 4 * 17];
        m[..12].copy_from_slice(&[0x34, 0xff, 0, (4 + 4 * 17) as u8, 0, 0, 0, 1, 0, 0, 0, 0x40]);
        for i in 0..17 {
            m[12 + i * 4..12 + i * 4 + 4].copy_from_slice(&[0x01, 0, 0, 0x40]);
        }
        // The 17th header ends the chain: exactly 17 headers, over the limit.
        m[12 + 16 * 4 + 3] = 0;
        assert_eq!(Header::new_checked(&m[..]).unwrap_err(), Error::Unsupported);
        // 16 is fine: end the chain one earlier (the last unit becomes payload).
        m[12 + 15 * 4 + 3] = 0;
        let h = Header::new_checked(&m[..]).unwrap();
        assert_eq!(h.extensions().count(), 16);
        assert_eq!(h.payload().len(), 4);
        // The iterator alone (unchecked) also stops at the bound.
        m[12 + 15 * 4 + 3] = 0x40;
        let u = Header::new_unchecked(&m[..]);
        assert_eq!(u.extensions().count(), MAX_EXT_HEADERS);
    }

    #[test]
    fn emit_errors_and_flags() {
        let r = Repr {
            msg_type: msg_type::G_PDU,
            teid: 0xdead_beef,
            seq: Some(7),
            npdu: None,
            ext: Some(pdu_session::Repr::Dl {
                qfi: 1,
                rqi: true,
                ppi: Some(2),
            }),
            payload_len: 100,
        };
        assert_eq!(r.header_len(), 20);
        assert_eq!(r.emit(&mut [0u8; 19]), Err(Error::BufferTooSmall));
        let mut out = [0u8; 20];
        r.emit(&mut out).unwrap();
        assert_eq!(
            out,
            [
                0x36,
                0xff,
                0x00,
                112,
                0xde,
                0xad,
                0xbe,
                0xef,
                0x00,
                0x07,
                0x00,
                0x85,
                0x02,
                0x00,
                0x41 | 0x80,
                0x40,
                0,
                0,
                0,
                0
            ]
        );
        let big = Repr {
            payload_len: 65536 - 12,
            ..r
        };
        assert_eq!(big.emit(&mut [0u8; 20]), Err(Error::Malformed));
        let bad = Repr {
            ext: Some(pdu_session::Repr::Ul { qfi: 99 }),
            ..r
        };
        assert_eq!(bad.emit(&mut [0u8; 20]), Err(Error::Malformed));
    }

    #[test]
    fn comprehension_bits() {
        assert!(!ext_type::endpoint_must_comprehend(ext_type::UDP_PORT));
        assert!(ext_type::endpoint_must_comprehend(
            ext_type::PDU_SESSION_CONTAINER
        ));
        assert!(!ext_type::intermediate_must_comprehend(
            ext_type::PDU_SESSION_CONTAINER
        ));
        assert!(ext_type::intermediate_must_comprehend(
            ext_type::PDCP_PDU_NUMBER
        ));
    }

    #[test]
    fn fuzz_vectors() {
        let m = gpdu();
        fuzz(&m);
        for n in 0..20 {
            fuzz(&m[..n]);
        }
        fuzz(&[0x30, 0xff, 0x00, 0x00, 0, 0, 0, 0]);
        fuzz(&[
            0x37, 0x01, 0x00, 0x08, 0, 0, 0, 0, 0, 0, 0, 0x85, 1, 0xff, 0xff, 0,
        ]);
        let mut big = [0u8; 400];
        big[..16].copy_from_slice(&m[..16]);
        big[2..4].copy_from_slice(&(400u16 - 8).to_be_bytes());
        fuzz(&big);
    }
}
