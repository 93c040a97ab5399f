//! IPv6 option TLVs carried in Hop-by-Hop and Destination Options headers (RFC 8200
//! section 4.2).
//!
//! [`iter`] walks an options area (the bytes after Next Header and Hdr Ext Len). Options it
//! does not know, which is every option except Pad1 and PadN, come out as
//! [`Kind::Unknown`] with the raw type and data, so callers such as IOAM (RFC 9486) can
//! interpret them; [`Ipv6Option::offset`] locates the option for in-place updates.

use crate::{Error, Result};
use core::iter::FusedIterator;

/// Option type values (IANA "Destination Options and Hop-by-Hop Options").
pub mod option_type {
    /// A single padding octet (RFC 8200 section 4.2).
    pub const PAD1: u8 = 0x00;
    /// Two or more padding octets (RFC 8200 section 4.2).
    pub const PADN: u8 = 0x01;
    /// Jumbo Payload (RFC 2675).
    pub const JUMBO: u8 = 0xc2;
    /// Router Alert (RFC 2711).
    pub const ROUTER_ALERT: u8 = 0x05;
    /// IOAM in a Destination Options header (RFC 9486).
    pub const IOAM_DEST: u8 = 0x11;
    /// IOAM in a Hop-by-Hop Options header (RFC 9486).
    pub const IOAM_HBH: u8 = 0x31;
}

/// Most data octets a single TLV can carry (Opt Data Len is 8 bits).
pub const MAX_DATA_LEN: usize = 255;

/// What a node that does not recognise an option must do: the top two bits of its type
/// (RFC 8200 section 4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// 00: skip the option and continue.
    Skip,
    /// 01: discard the packet.
    Discard,
    /// 10: discard and send ICMPv6 Parameter Problem, code 2.
    DiscardSendIcmp,
    /// 11: discard and send Parameter Problem, code 2, unless the destination is multicast.
    DiscardSendIcmpUnlessMulticast,
}

/// The unrecognised-option action encoded in `option_type`.
pub const fn action(option_type: u8) -> Action {
    match option_type >> 6 {
        0 => Action::Skip,
        1 => Action::Discard,
        2 => Action::DiscardSendIcmp,
        _ => Action::DiscardSendIcmpUnlessMulticast,
    }
}

/// The third-highest bit of `option_type`: option data may change en route, so it is zeroed
/// for AH's integrity check (RFC 8200 section 4.2).
pub const fn may_change(option_type: u8) -> bool {
    option_type & 0x20 != 0
}

/// One option as found on the wire, or as given to [`Kind::emit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind<'a> {
    /// One padding octet.
    Pad1,
    /// PadN with this many data octets (the option is two longer). Emitted as zeros; the
    /// parser does not check that received padding is zero.
    PadN(u8),
    /// Any other option: its raw type and data.
    Unknown { option_type: u8, data: &'a [u8] },
}

impl<'a> Kind<'a> {
    /// The option type octet.
    pub const fn option_type(&self) -> u8 {
        match self {
            Kind::Pad1 => option_type::PAD1,
            Kind::PadN(_) => option_type::PADN,
            Kind::Unknown { option_type, .. } => *option_type,
        }
    }

    /// The option data (empty for padding).
    pub const fn data(&self) -> &'a [u8] {
        match self {
            Kind::Unknown { data, .. } => data,
            _ => &[],
        }
    }

    /// Bytes this option takes on the wire.
    pub const fn buffer_len(&self) -> usize {
        match self {
            Kind::Pad1 => 1,
            Kind::PadN(n) => 2 + *n as usize,
            Kind::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Write the option at the start of `buf`; returns the bytes written. Data over 255
    /// bytes, or an `Unknown` whose type is Pad1 (which has no length octet), is `Malformed`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        match *self {
            Kind::Pad1 => emit_pad1(buf),
            Kind::PadN(n) => emit_padn(buf, n),
            Kind::Unknown { option_type, data } => emit_tlv(buf, option_type, data),
        }
    }
}

/// An option found by [`iter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Option<'a> {
    /// Offset of the option type octet within the options area.
    pub offset: usize,
    pub kind: Kind<'a>,
}

impl<'a> Ipv6Option<'a> {
    pub const fn option_type(&self) -> u8 {
        self.kind.option_type()
    }

    pub const fn data(&self) -> &'a [u8] {
        self.kind.data()
    }

    /// Offset of the option data within the options area (after type and length).
    pub const fn data_offset(&self) -> usize {
        match self.kind {
            Kind::Pad1 => self.offset + 1,
            _ => self.offset + 2,
        }
    }

    pub const fn action(&self) -> Action {
        action(self.option_type())
    }

    pub const fn may_change(&self) -> bool {
        may_change(self.option_type())
    }

    /// Bytes the option takes on the wire.
    pub const fn len(&self) -> usize {
        self.kind.buffer_len()
    }

    /// Always false: every option takes at least one byte.
    pub const fn is_empty(&self) -> bool {
        false
    }
}

/// Iterator over the options in an options area. A TLV that runs past the area yields one
/// `Err(Error::Truncated)`, after which the iterator is exhausted.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    area: &'a [u8],
    pos: usize,
}

/// Iterate over the options in `area` (the bytes after Hdr Ext Len).
pub const fn iter(area: &[u8]) -> Iter<'_> {
    Iter { area, pos: 0 }
}

impl<'a> Iter<'a> {
    /// Offset of the next option to be read.
    pub const fn offset(&self) -> usize {
        self.pos
    }

    fn fail(&mut self) -> Option<Result<Ipv6Option<'a>>> {
        self.pos = self.area.len();
        Some(Err(Error::Truncated))
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = Result<Ipv6Option<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let offset = self.pos;
        let &ty = self.area.get(offset)?;
        if ty == option_type::PAD1 {
            self.pos += 1;
            return Some(Ok(Ipv6Option {
                offset,
                kind: Kind::Pad1,
            }));
        }
        let Some(&len) = self.area.get(offset + 1) else {
            return self.fail();
        };
        let end = offset + 2 + len as usize;
        let Some(data) = self.area.get(offset + 2..end) else {
            return self.fail();
        };
        self.pos = end;
        let kind = if ty == option_type::PADN {
            Kind::PadN(len)
        } else {
            Kind::Unknown {
                option_type: ty,
                data,
            }
        };
        Some(Ok(Ipv6Option { offset, kind }))
    }
}

impl FusedIterator for Iter<'_> {}

/// Write a Pad1 option.
pub fn emit_pad1(buf: &mut [u8]) -> Result<usize> {
    let b = buf.first_mut().ok_or(Error::BufferTooSmall)?;
    *b = option_type::PAD1;
    Ok(1)
}

/// Write a PadN option with `data_len` zero data octets (`data_len + 2` bytes in all).
pub fn emit_padn(buf: &mut [u8], data_len: u8) -> Result<usize> {
    let n = 2 + data_len as usize;
    let b = buf.get_mut(..n).ok_or(Error::BufferTooSmall)?;
    b[0] = option_type::PADN;
    b[1] = data_len;
    b[2..].fill(0);
    Ok(n)
}

/// Write exactly `n` bytes of padding: nothing, Pad1, or one PadN. More than 257 bytes is
/// `Malformed` (and RFC 8200 padding never needs more than 7).
pub fn emit_pad(buf: &mut [u8], n: usize) -> Result<usize> {
    match n {
        0 => Ok(0),
        1 => emit_pad1(buf),
        n if n - 2 <= MAX_DATA_LEN => emit_padn(buf, (n - 2) as u8),
        _ => Err(Error::Malformed),
    }
}

/// Write a generic TLV option. Data over 255 bytes, or type Pad1, is `Malformed`.
pub fn emit_tlv(buf: &mut [u8], option_type: u8, data: &[u8]) -> Result<usize> {
    if option_type == option_type::PAD1 || data.len() > MAX_DATA_LEN {
        return Err(Error::Malformed);
    }
    let n = 2 + data.len();
    let b = buf.get_mut(..n).ok_or(Error::BufferTooSmall)?;
    b[0] = option_type;
    b[1] = data.len() as u8;
    b[2..].copy_from_slice(data);
    Ok(n)
}

/// Fuzz entry: iterate `data` as an options area and re-emit every option. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let mut out = [0u8; 2 + MAX_DATA_LEN];
    let mut errors = 0;
    let mut expected_offset = 0;
    for opt in iter(data) {
        let Ok(opt) = opt else {
            errors += 1;
            continue;
        };
        assert_eq!(errors, 0, "nothing follows an error");
        assert_eq!(opt.offset, expected_offset);
        expected_offset += opt.len();
        let _ = (
            opt.action(),
            opt.may_change(),
            opt.data_offset(),
            opt.data().len(),
        );
        let n = opt.kind.emit(&mut out).expect("parsed option re-emits");
        assert_eq!(n, opt.len());
        let again = iter(&out[..n])
            .next()
            .expect("one option")
            .expect("well formed");
        assert_eq!(again.kind, opt.kind);
        if !matches!(opt.kind, Kind::PadN(_)) {
            assert_eq!(&out[..n], &data[opt.offset..opt.offset + n]);
        }
    }
    assert!(errors <= 1);
    assert!(expected_offset <= data.len());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    // Pad1, PadN(1), an RFC 4727 experimental option 0x1e with 2 data bytes, Router Alert
    // (MLD, value 0), an IOAM option stub (type 0x31, len 4), and PadN(0).
    static AREA: [u8; 20] = [
        0x00, 0x01, 0x01, 0x00, 0x1e, 0x02, 0xaa, 0xbb, 0x05, 0x02, 0x00, 0x00, 0x31, 0x04, 0x00,
        0x00, 0x00, 0x00, 0x01, 0x00,
    ];

    #[test]
    fn iterate() {
        let opts: Vec<_> = iter(&AREA).collect::<Result<_>>().unwrap();
        assert_eq!(opts.len(), 6);
        assert_eq!(
            opts[0],
            Ipv6Option {
                offset: 0,
                kind: Kind::Pad1
            }
        );
        assert_eq!(
            opts[1],
            Ipv6Option {
                offset: 1,
                kind: Kind::PadN(1)
            }
        );
        assert_eq!(opts[2].offset, 4);
        assert_eq!(opts[2].option_type(), 0x1e);
        assert_eq!(opts[2].data(), &[0xaa, 0xbb]);
        assert_eq!(opts[2].data_offset(), 6);
        assert_eq!(opts[2].action(), Action::Skip);
        assert!(!opts[2].may_change());
        assert_eq!(opts[3].option_type(), option_type::ROUTER_ALERT);
        assert_eq!(opts[4].option_type(), option_type::IOAM_HBH);
        assert!(opts[4].may_change());
        assert_eq!(opts[4].data(), &[0, 0, 0, 0]);
        assert_eq!(
            opts[5],
            Ipv6Option {
                offset: 18,
                kind: Kind::PadN(0)
            }
        );
    }

    #[test]
    fn action_bits() {
        assert_eq!(action(0x1e), Action::Skip);
        assert_eq!(action(0x5e), Action::Discard);
        assert_eq!(action(0x9e), Action::DiscardSendIcmp);
        assert_eq!(action(0xc2), Action::DiscardSendIcmpUnlessMulticast);
        assert!(may_change(0x3e) && !may_change(0xde));
    }

    #[test]
    fn truncated_yields_one_error() {
        // Length octet missing.
        let mut it = iter(&[0x00, 0x1e]);
        assert_eq!(
            it.next(),
            Some(Ok(Ipv6Option {
                offset: 0,
                kind: Kind::Pad1
            }))
        );
        assert_eq!(it.next(), Some(Err(Error::Truncated)));
        assert_eq!(it.next(), None);
        // Data runs past the end; trailing bytes are not looked at.
        let mut it = iter(&[0x1e, 0x05, 0xaa, 0x00, 0x00]);
        assert_eq!(it.next(), Some(Err(Error::Truncated)));
        assert_eq!(it.next(), None);
        assert_eq!(iter(&[]).next(), None);
    }

    #[test]
    fn emit_helpers() {
        let mut buf = [0xffu8; 8];
        assert_eq!(emit_pad(&mut buf, 0), Ok(0));
        assert_eq!(emit_pad(&mut buf, 1), Ok(1));
        assert_eq!(buf[0], 0);
        assert_eq!(emit_pad(&mut buf, 5), Ok(5));
        assert_eq!(&buf[..5], &[1, 3, 0, 0, 0]);
        assert_eq!(emit_pad(&mut buf, 9), Err(Error::BufferTooSmall));
        assert_eq!(emit_pad(&mut [0u8; 300], 258), Err(Error::Malformed));
        assert_eq!(emit_tlv(&mut buf, 0x1e, &[0xaa, 0xbb]), Ok(4));
        assert_eq!(&buf[..4], &AREA[4..8]);
        assert_eq!(
            emit_tlv(&mut buf, 0x1e, &[0; 7]),
            Err(Error::BufferTooSmall)
        );
        assert_eq!(emit_tlv(&mut buf, 0x00, &[]), Err(Error::Malformed));
        assert_eq!(
            emit_tlv(&mut [0u8; 300], 0x1e, &[0; 256]),
            Err(Error::Malformed)
        );
        assert_eq!(emit_pad1(&mut []), Err(Error::BufferTooSmall));
    }

    #[test]
    fn roundtrip() {
        let mut out = [0u8; 20];
        let mut pos = 0;
        for o in iter(&AREA) {
            pos += o.unwrap().kind.emit(&mut out[pos..]).unwrap();
        }
        assert_eq!(out, AREA);
    }

    #[test]
    fn fuzz_smoke() {
        for n in 0..=AREA.len() {
            fuzz(&AREA[..n]);
            fuzz(&AREA[n..]);
        }
    }
}
