//! IEEE 802.1Q VLAN tags (C-tag, TPID 0x8100) and IEEE 802.1ad S-tags (TPID 0x88a8, QinQ).
//!
//! On the wire a tag is TPID(2) | TCI(2) inserted where the EtherType was (IEEE 802.1Q-2018
//! section 9.3). The TPID sits in the Ethernet header's EtherType position, so the [`Tag`] view
//! starts after it: TCI(2) | encapsulated EtherType(2), followed by the payload.

use crate::ethernet::{self, ethertype};
use crate::{be16, put16, Error, Result};

mod field {
    use core::ops::{Range, RangeFrom};
    pub const TCI: Range<usize> = 0..2;
    pub const ETHERTYPE: Range<usize> = 2..4;
    pub const PAYLOAD: RangeFrom<usize> = 4..;
}

/// Length of the part of a tag the [`Tag`] view covers (TCI + inner EtherType).
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// Most tags [`l3_offset`] skips: one S-tag and one C-tag (QinQ).
pub const MAX_TAGS: usize = 2;

/// Highest VLAN identifier; 0xfff itself is reserved (IEEE 802.1Q-2018 table 9-2).
pub const VID_MAX: u16 = 0x0fff;

/// Whether `ethertype` is a tag protocol identifier we skip (0x8100 or 0x88a8).
pub const fn is_tpid(ethertype: u16) -> bool {
    ethertype == ethertype::VLAN || ethertype == ethertype::QINQ
}

/// A read/write view of a VLAN tag's TCI and the EtherType it encapsulates.
#[derive(Debug, Clone)]
pub struct Tag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Tag<T> {
    /// Wrap without checking; accessors may panic on short buffers. Prefer [`Tag::new_checked`].
    pub const fn new_unchecked(buffer: T) -> Tag<T> {
        Tag { buffer }
    }

    /// Wrap and check that TCI and inner EtherType fit.
    pub fn new_checked(buffer: T) -> Result<Tag<T>> {
        let t = Self::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
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

    /// The whole Tag Control Information word.
    pub fn tci(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::TCI])
    }

    /// Priority Code Point (3 bits, IEEE 802.1Q-2018 section 6.9.3).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop Eligible Indicator (1 bit).
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (12 bits); 0 means priority-tagged only.
    pub fn vid(&self) -> u16 {
        self.tci() & VID_MAX
    }

    /// The EtherType of what follows the tag.
    pub fn ethertype(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::ETHERTYPE])
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Tag<T> {
    pub fn set_tci(&mut self, tci: u16) {
        put16(&mut self.buffer.as_mut()[field::TCI], tci);
    }

    /// Set the PCP; bits above the low three are ignored.
    pub fn set_pcp(&mut self, pcp: u8) {
        self.set_tci((self.tci() & 0x1fff) | ((pcp as u16 & 0x7) << 13));
    }

    pub fn set_dei(&mut self, dei: bool) {
        let t = self.tci() & !0x1000;
        self.set_tci(if dei { t | 0x1000 } else { t });
    }

    /// Set the VID; bits above the low twelve are ignored.
    pub fn set_vid(&mut self, vid: u16) {
        self.set_tci((self.tci() & !VID_MAX) | (vid & VID_MAX));
    }

    pub fn set_ethertype(&mut self, t: u16) {
        put16(&mut self.buffer.as_mut()[field::ETHERTYPE], t);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// High-level representation of a VLAN tag (TCI fields and inner EtherType).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub pcp: u8,
    pub dei: bool,
    pub vid: u16,
    pub ethertype: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(tag: &Tag<T>) -> Result<Repr> {
        tag.check_len()?;
        Ok(Repr {
            pcp: tag.pcp(),
            dei: tag.dei(),
            vid: tag.vid(),
            ethertype: tag.ethertype(),
        })
    }

    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write TCI and inner EtherType into the first [`HEADER_LEN`] bytes of `buf` (the TPID is
    /// the enclosing header's EtherType). A PCP above 7 or VID above 0xfff is `Malformed`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if self.pcp > 7 || self.vid > VID_MAX {
            return Err(Error::Malformed);
        }
        if buf.len() < HEADER_LEN {
            return Err(Error::BufferTooSmall);
        }
        let mut t = Tag::new_unchecked(buf);
        t.set_tci(((self.pcp as u16) << 13) | ((self.dei as u16) << 12) | self.vid);
        t.set_ethertype(self.ethertype);
        Ok(())
    }
}

/// Skip the Ethernet header and up to [`MAX_TAGS`] VLAN tags (either TPID, in any order).
///
/// Returns the offset of the L3 header and its EtherType. The L3 header itself is not
/// checked: the offset may equal `frame.len()`. A third tag is `Error::Unsupported`.
pub fn l3_offset(frame: &[u8]) -> Result<(usize, u16)> {
    let eth = ethernet::Frame::new_checked(frame)?;
    let mut ty = eth.ethertype();
    let mut off = ethernet::HEADER_LEN;
    for _ in 0..MAX_TAGS {
        if !is_tpid(ty) {
            return Ok((off, ty));
        }
        let tag = Tag::new_checked(frame.get(off..).unwrap_or(&[]))?;
        ty = tag.ethertype();
        off += HEADER_LEN;
    }
    if is_tpid(ty) {
        Err(Error::Unsupported)
    } else {
        Ok((off, ty))
    }
}

/// Fuzz entry: parse a tag, round-trip it, and walk `data` as a tagged frame. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    if let Ok(t) = Tag::new_checked(data) {
        let _ = (t.tci(), t.payload().len());
        let r = Repr::parse(&t).expect("checked tag parses");
        let mut out = [0u8; HEADER_LEN];
        r.emit(&mut out).expect("parsed fields are in range");
        assert_eq!(&out[..], &data[..HEADER_LEN]);
        assert_eq!(
            Repr::parse(&Tag::new_checked(&out[..]).expect("fits")),
            Ok(r)
        );
    }
    if let Ok((off, ty)) = l3_offset(data) {
        assert!(off <= data.len() && !is_tpid(ty));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // QinQ frame: S-tag VID 100 PCP 5, C-tag VID 10 DEI set, then the start of an IPv4 header.
    static QINQ: [u8; 26] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x88, 0xa8, 0xa0,
        0x64, 0x81, 0x00, 0x10, 0x0a, 0x08, 0x00, 0x45, 0x00, 0x00, 0x54,
    ];

    #[test]
    fn parse_tags() {
        let outer = Tag::new_checked(&QINQ[14..]).unwrap();
        assert_eq!((outer.pcp(), outer.dei(), outer.vid()), (5, false, 100));
        assert_eq!(outer.ethertype(), ethertype::VLAN);
        let inner = Tag::new_checked(outer.payload()).unwrap();
        assert_eq!((inner.pcp(), inner.dei(), inner.vid()), (0, true, 10));
        assert_eq!(inner.ethertype(), ethertype::IPV4);
        assert_eq!(inner.payload(), &[0x45, 0x00, 0x00, 0x54]);
    }

    #[test]
    fn emit_roundtrip_and_setters() {
        let r = Repr {
            pcp: 5,
            dei: false,
            vid: 100,
            ethertype: ethertype::VLAN,
        };
        let mut buf = [0u8; 4];
        r.emit(&mut buf).unwrap();
        assert_eq!(&buf, &QINQ[14..18]);
        assert_eq!(Repr::parse(&Tag::new_checked(&buf[..]).unwrap()), Ok(r));
        assert_eq!(r.emit(&mut [0u8; 3]), Err(Error::BufferTooSmall));
        assert_eq!(
            Repr { vid: 0x1000, ..r }.emit(&mut buf),
            Err(Error::Malformed)
        );
        assert_eq!(Repr { pcp: 8, ..r }.emit(&mut buf), Err(Error::Malformed));

        let mut t = Tag::new_checked(&mut buf[..]).unwrap();
        t.set_vid(0xfff);
        t.set_dei(true);
        t.set_pcp(7);
        assert_eq!(t.tci(), 0xffff);
        t.set_pcp(0);
        t.set_dei(false);
        assert_eq!(t.tci(), 0x0fff);
    }

    #[test]
    fn l3_offsets() {
        assert_eq!(l3_offset(&QINQ), Ok((22, ethertype::IPV4)));
        // Untagged: the Ethernet payload.
        let mut plain = [0u8; 14];
        plain[12..14].copy_from_slice(&[0x86, 0xdd]);
        assert_eq!(l3_offset(&plain), Ok((14, ethertype::IPV6)));
        // Single tag.
        let mut one = [0u8; 18];
        one[12..18].copy_from_slice(&[0x81, 0x00, 0x00, 0x05, 0x08, 0x06]);
        assert_eq!(l3_offset(&one), Ok((18, ethertype::ARP)));
    }

    #[test]
    fn l3_offset_errors() {
        assert_eq!(l3_offset(&QINQ[..13]), Err(Error::Truncated));
        assert_eq!(l3_offset(&QINQ[..17]), Err(Error::Truncated));
        assert_eq!(l3_offset(&QINQ[..21]), Err(Error::Truncated));
        let mut triple = [0u8; 26];
        triple[..22].copy_from_slice(&QINQ[..22]);
        triple[20..22].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(l3_offset(&triple), Err(Error::Unsupported));
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Tag::new_checked(&QINQ[14..17]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn fuzz_smoke() {
        for n in 0..=QINQ.len() {
            fuzz(&QINQ[..n]);
            fuzz(&QINQ[n..]);
        }
    }
}
