//! Ethernet II frames (IEEE 802.3 clause 3.1.1, DIX framing).
//!
//! 802.1Q tags are in [`crate::vlan`]; this view stops at the first EtherType.

use crate::{be16, put16, Error, Result};
use core::fmt;

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Address(pub [u8; 6]);

impl Address {
    pub const BROADCAST: Address = Address([0xff; 6]);

    pub const fn is_broadcast(&self) -> bool {
        let a = self.0;
        a[0] == 0xff && a[1] == 0xff && a[2] == 0xff && a[3] == 0xff && a[4] == 0xff && a[5] == 0xff
    }

    /// Group bit (I/G) set: multicast or broadcast.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Parse `aa:bb:cc:dd:ee:ff` (also `-` separated).
    pub fn parse(s: &str) -> Option<Address> {
        let mut out = [0u8; 6];
        let mut n = 0;
        for part in s.split([':', '-']) {
            if n == 6 || part.len() != 2 {
                return None;
            }
            out[n] = u8::from_str_radix(part, 16).ok()?;
            n += 1;
        }
        (n == 6).then_some(Address(out))
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            a[0], a[1], a[2], a[3], a[4], a[5]
        )
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// EtherType values we act on (IEEE registry).
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const IPV6: u16 = 0x86dd;
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const PAYLOAD: RangeFrom<usize> = 14..;
}

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A read/write view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wrap without checking; accessors may panic on short buffers. Prefer [`Frame::new_checked`].
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wrap and check that the header fits.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
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

    pub fn dst_addr(&self) -> Address {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST]);
        Address(a)
    }

    pub fn src_addr(&self) -> Address {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC]);
        Address(a)
    }

    pub fn ethertype(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::ETHERTYPE])
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    pub fn set_dst_addr(&mut self, a: Address) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.0);
    }

    pub fn set_src_addr(&mut self, a: Address) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.0);
    }

    pub fn set_ethertype(&mut self, t: u16) {
        put16(&mut self.buffer.as_mut()[field::ETHERTYPE], t);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// High-level representation of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src: Address,
    pub dst: Address,
    pub ethertype: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<Repr> {
        frame.check_len()?;
        Ok(Repr {
            src: frame.src_addr(),
            dst: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header into the first [`HEADER_LEN`] bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() < HEADER_LEN {
            return Err(Error::BufferTooSmall);
        }
        let mut f = Frame::new_unchecked(buf);
        f.set_dst_addr(self.dst);
        f.set_src_addr(self.src);
        f.set_ethertype(self.ethertype);
        Ok(())
    }
}

/// Fuzz entry: parse, read every field, re-emit. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    if let Ok(f) = Frame::new_checked(data) {
        let r = Repr::parse(&f).expect("checked frame parses");
        let mut out = [0u8; HEADER_LEN];
        r.emit(&mut out).expect("header fits");
        assert_eq!(&out[..], &data[..HEADER_LEN]);
        let _ = f.payload().len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A frame from a capture: broadcast ARP from 52:54:00:12:34:56.
    static FRAME: [u8; 18] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x06, 0x00,
        0x01, 0x08, 0x00,
    ];

    #[test]
    fn parse_capture() {
        let f = Frame::new_checked(&FRAME[..]).unwrap();
        assert!(f.dst_addr().is_broadcast());
        assert_eq!(f.src_addr(), Address([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]));
        assert_eq!(f.ethertype(), ethertype::ARP);
        assert_eq!(f.payload(), &[0x00, 0x01, 0x08, 0x00]);
    }

    #[test]
    fn emit_roundtrip() {
        let r = Repr::parse(&Frame::new_checked(&FRAME[..]).unwrap()).unwrap();
        let mut buf = [0u8; 14];
        r.emit(&mut buf).unwrap();
        assert_eq!(&buf, &FRAME[..14]);
        assert_eq!(r.emit(&mut [0u8; 13]), Err(Error::BufferTooSmall));
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Frame::new_checked(&FRAME[..13]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn mac_parse_display() {
        let a = Address::parse("02:00:5e:10:00:0a").unwrap();
        assert_eq!(std::format!("{a}"), "02:00:5e:10:00:0a");
        assert!(Address::parse("02:00:5e:10:00").is_none());
        assert!(Address::parse("02:00:5e:10:00:0a:11").is_none());
        assert!(Address::parse("zz:00:5e:10:00:0a").is_none());
    }
}
