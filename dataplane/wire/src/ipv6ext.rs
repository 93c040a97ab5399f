//! IPv6 extension headers (RFC 8200 section 4): Hop-by-Hop and Destination Options
//! (sections 4.3, 4.6), Routing (4.4) and Fragment (4.5), and a bounded walker over the chain.
//!
//! [`walk`] yields each extension header's type, offset and length and stops at the first
//! header that is not an extension header (the upper layer, ESP, or No Next Header). It walks
//! at most [`MAX_EXT_HEADERS`] headers so a hostile chain costs bounded work.

use crate::ipv6::ip_protocol;
use crate::ipv6option::{self, Kind};
use crate::{be16, be32, put16, put32, Error, Result};
use core::ops::Range;

/// Most extension headers [`walk`] will step over before giving up with `Unsupported`.
/// RFC 8200 section 4.1 recommends at most one of each, plus a second Destination Options.
pub const MAX_EXT_HEADERS: usize = 16;

/// Whether `next_header` names an extension header that [`walk`] steps over: Hop-by-Hop,
/// Routing, Fragment, Destination Options, and AH (RFC 4302), whose length is known.
/// ESP, No Next Header and everything else end the walk.
pub const fn is_extension_header(next_header: u8) -> bool {
    matches!(
        next_header,
        ip_protocol::HOPOPT
            | ip_protocol::IPV6_ROUTE
            | ip_protocol::IPV6_FRAG
            | ip_protocol::IPV6_OPTS
            | ip_protocol::AH
    )
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub const NXT_HDR: usize = 0;
    pub const LENGTH: usize = 1;
    // Options headers.
    pub const OPTIONS: RangeFrom<usize> = 2..;
    // Routing header.
    pub const ROUTING_TYPE: usize = 2;
    pub const SEG_LEFT: usize = 3;
    pub const ROUTING_DATA: RangeFrom<usize> = 4..;
    // Fragment header.
    pub const FRAG_OFF_M: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..8;
}

/// Smallest extension header, and the length unit of Hdr Ext Len.
const UNIT: usize = 8;
/// Longest Hop-by-Hop, Destination Options or Routing header (Hdr Ext Len 255).
pub const MAX_HEADER_LEN: usize = 256 * UNIT;

/// Length in bytes of a header whose Hdr Ext Len is `hdr_ext_len` (8-octet units, not
/// counting the first 8).
const fn units_to_len(hdr_ext_len: u8) -> usize {
    (hdr_ext_len as usize + 1) * UNIT
}

/// Check a buffer against an 8-octet-unit length field; shared by the variable-length views.
fn check_units(b: &[u8]) -> Result<()> {
    if b.len() < UNIT {
        return Err(Error::Truncated);
    }
    if b.len() < units_to_len(b[field::LENGTH]) {
        return Err(Error::Truncated);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Hop-by-Hop and Destination Options

/// A read/write view of a Hop-by-Hop (RFC 8200 section 4.3) or Destination Options (4.6)
/// header: Next Header, Hdr Ext Len, options area.
#[derive(Debug, Clone)]
pub struct OptionsHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> OptionsHeader<T> {
    /// Wrap without checking; accessors may panic on short buffers.
    pub const fn new_unchecked(buffer: T) -> OptionsHeader<T> {
        OptionsHeader { buffer }
    }

    /// Wrap and check that the whole header (per Hdr Ext Len) fits; trailing bytes are fine.
    pub fn new_checked(buffer: T) -> Result<OptionsHeader<T>> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    pub fn check_len(&self) -> Result<()> {
        check_units(self.buffer.as_ref())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    /// Hdr Ext Len: 8-octet units, not counting the first 8.
    pub fn hdr_ext_len(&self) -> u8 {
        self.buffer.as_ref()[field::LENGTH]
    }

    /// Whole header length in bytes.
    pub fn header_len(&self) -> usize {
        units_to_len(self.hdr_ext_len())
    }

    /// The options area: everything after Hdr Ext Len up to the header's end.
    pub fn options(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(field::OPTIONS.start..self.header_len())
            .unwrap_or(&[])
    }

    /// Iterate over the options ([`crate::ipv6option::iter`]).
    pub fn iter_options(&self) -> ipv6option::Iter<'_> {
        ipv6option::iter(self.options())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> OptionsHeader<T> {
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = v;
    }

    pub fn set_hdr_ext_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::LENGTH] = v;
    }

    /// Mutable options area, for in-place updates such as IOAM trace data.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        self.buffer
            .as_mut()
            .get_mut(field::OPTIONS.start..end)
            .unwrap_or_default()
    }
}

/// High-level representation of an options header, options kept raw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionsRepr<'a> {
    pub next_header: u8,
    /// The options area; `2 + options.len()` must be a multiple of 8, at most 2048.
    pub options: &'a [u8],
}

impl<'a> OptionsRepr<'a> {
    /// Parse a header; the options are checked to be well formed TLVs (`Truncated` if not).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(header: &OptionsHeader<&'a T>) -> Result<Self> {
        header.check_len()?;
        let b: &'a [u8] = T::as_ref(header.buffer);
        let options = &b[field::OPTIONS.start..header.header_len()];
        ipv6option::iter(options).try_for_each(|o| o.map(drop))?;
        Ok(OptionsRepr {
            next_header: header.next_header(),
            options,
        })
    }

    pub const fn header_len(&self) -> usize {
        field::OPTIONS.start + self.options.len()
    }

    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Write the header into the start of `buf`. An options area that does not make the
    /// header a multiple of 8 bytes (or longer than 2048) is `Malformed`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let len = self.header_len();
        if len & (UNIT - 1) != 0 || len > MAX_HEADER_LEN {
            return Err(Error::Malformed);
        }
        let b = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        b[field::NXT_HDR] = self.next_header;
        b[field::LENGTH] = (len / UNIT - 1) as u8;
        b[field::OPTIONS].copy_from_slice(self.options);
        Ok(())
    }
}

/// Length of the options header [`emit_options_header`] writes for `options`: type and
/// length octets plus the options, rounded up to a multiple of 8.
pub fn options_header_len(options: &[Kind<'_>]) -> usize {
    let raw: usize = field::OPTIONS.start + options.iter().map(Kind::buffer_len).sum::<usize>();
    raw.div_ceil(UNIT) * UNIT
}

/// Write a Hop-by-Hop or Destination Options header holding `options` in order, padded at
/// the end with Pad1/PadN to a multiple of 8 bytes (RFC 8200 section 4.2). Returns its
/// length. Alignment requirements of individual options are the caller's: put explicit
/// padding in `options` where an option needs it.
pub fn emit_options_header(next_header: u8, options: &[Kind<'_>], buf: &mut [u8]) -> Result<usize> {
    let len = options_header_len(options);
    if len > MAX_HEADER_LEN {
        return Err(Error::Malformed);
    }
    let b = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
    b[field::NXT_HDR] = next_header;
    b[field::LENGTH] = (len / UNIT - 1) as u8;
    let mut pos = field::OPTIONS.start;
    for o in options {
        pos += o.emit(&mut b[pos..])?;
    }
    ipv6option::emit_pad(&mut b[pos..], len - pos)?;
    Ok(len)
}

// ---------------------------------------------------------------------------------------
// Routing

/// A read/write view of a Routing header (RFC 8200 section 4.4). The type-specific data is
/// left raw; Segment Routing (type 4, RFC 8754) lays out a segment list in it.
#[derive(Debug, Clone)]
pub struct RoutingHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> RoutingHeader<T> {
    pub const fn new_unchecked(buffer: T) -> RoutingHeader<T> {
        RoutingHeader { buffer }
    }

    /// Wrap and check that the whole header (per Hdr Ext Len) fits; trailing bytes are fine.
    pub fn new_checked(buffer: T) -> Result<RoutingHeader<T>> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    pub fn check_len(&self) -> Result<()> {
        check_units(self.buffer.as_ref())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    pub fn hdr_ext_len(&self) -> u8 {
        self.buffer.as_ref()[field::LENGTH]
    }

    pub fn header_len(&self) -> usize {
        units_to_len(self.hdr_ext_len())
    }

    pub fn routing_type(&self) -> u8 {
        self.buffer.as_ref()[field::ROUTING_TYPE]
    }

    pub fn segments_left(&self) -> u8 {
        self.buffer.as_ref()[field::SEG_LEFT]
    }

    /// Type-specific data, up to the header's end.
    pub fn data(&self) -> &[u8] {
        self.buffer
            .as_ref()
            .get(field::ROUTING_DATA.start..self.header_len())
            .unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RoutingHeader<T> {
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = v;
    }

    pub fn set_hdr_ext_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::LENGTH] = v;
    }

    pub fn set_routing_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::ROUTING_TYPE] = v;
    }

    pub fn set_segments_left(&mut self, v: u8) {
        self.buffer.as_mut()[field::SEG_LEFT] = v;
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        self.buffer
            .as_mut()
            .get_mut(field::ROUTING_DATA.start..end)
            .unwrap_or_default()
    }
}

/// High-level representation of a Routing header, data kept raw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutingRepr<'a> {
    pub next_header: u8,
    pub routing_type: u8,
    pub segments_left: u8,
    /// Type-specific data; `4 + data.len()` must be a multiple of 8, at most 2048.
    pub data: &'a [u8],
}

impl<'a> RoutingRepr<'a> {
    pub fn parse<T: AsRef<[u8]> + ?Sized>(header: &RoutingHeader<&'a T>) -> Result<Self> {
        header.check_len()?;
        let b: &'a [u8] = T::as_ref(header.buffer);
        Ok(RoutingRepr {
            next_header: header.next_header(),
            routing_type: header.routing_type(),
            segments_left: header.segments_left(),
            data: &b[field::ROUTING_DATA.start..header.header_len()],
        })
    }

    pub const fn header_len(&self) -> usize {
        field::ROUTING_DATA.start + self.data.len()
    }

    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Write the header into the start of `buf`; a length that is not a multiple of 8 (or
    /// over 2048) is `Malformed`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let len = self.header_len();
        if len & (UNIT - 1) != 0 || len > MAX_HEADER_LEN {
            return Err(Error::Malformed);
        }
        let b = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        b[field::NXT_HDR] = self.next_header;
        b[field::LENGTH] = (len / UNIT - 1) as u8;
        b[field::ROUTING_TYPE] = self.routing_type;
        b[field::SEG_LEFT] = self.segments_left;
        b[field::ROUTING_DATA].copy_from_slice(self.data);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Fragment

/// Length of the Fragment header, which is fixed.
pub const FRAGMENT_HEADER_LEN: usize = 8;

/// A read/write view of a Fragment header (RFC 8200 section 4.5).
#[derive(Debug, Clone)]
pub struct FragmentHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> FragmentHeader<T> {
    pub const fn new_unchecked(buffer: T) -> FragmentHeader<T> {
        FragmentHeader { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<FragmentHeader<T>> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < FRAGMENT_HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    fn off_m(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::FRAG_OFF_M])
    }

    /// Fragment offset in bytes (the field counts 8-octet units).
    pub fn frag_offset(&self) -> u16 {
        self.off_m() & 0xfff8
    }

    /// M flag: more fragments follow.
    pub fn more_frags(&self) -> bool {
        self.off_m() & 1 != 0
    }

    pub fn ident(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::IDENT])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> FragmentHeader<T> {
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = v;
    }

    /// Set offset (bytes; low three bits dropped) and M flag; the reserved bits are cleared.
    pub fn set_frag_offset_and_more(&mut self, offset: u16, more: bool) {
        put16(
            &mut self.buffer.as_mut()[field::FRAG_OFF_M],
            (offset & 0xfff8) | more as u16,
        );
    }

    pub fn set_ident(&mut self, v: u32) {
        put32(&mut self.buffer.as_mut()[field::IDENT], v);
    }
}

/// High-level representation of a Fragment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragmentRepr {
    pub next_header: u8,
    /// Offset of this fragment's data in bytes; a multiple of 8.
    pub frag_offset: u16,
    pub more_frags: bool,
    pub ident: u32,
}

impl FragmentRepr {
    pub fn parse<T: AsRef<[u8]>>(header: &FragmentHeader<T>) -> Result<Self> {
        header.check_len()?;
        Ok(FragmentRepr {
            next_header: header.next_header(),
            frag_offset: header.frag_offset(),
            more_frags: header.more_frags(),
            ident: header.ident(),
        })
    }

    /// An atomic fragment (offset 0, no more fragments; RFC 6946) holds the whole packet.
    pub const fn is_atomic(&self) -> bool {
        self.frag_offset == 0 && !self.more_frags
    }

    pub const fn header_len(&self) -> usize {
        FRAGMENT_HEADER_LEN
    }

    pub const fn buffer_len(&self) -> usize {
        FRAGMENT_HEADER_LEN
    }

    /// Write the header into the start of `buf`; an offset that is not a multiple of 8 is
    /// `Malformed`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if self.frag_offset & 0x7 != 0 {
            return Err(Error::Malformed);
        }
        let b = buf
            .get_mut(..FRAGMENT_HEADER_LEN)
            .ok_or(Error::BufferTooSmall)?;
        let mut h = FragmentHeader::new_unchecked(b);
        h.set_next_header(self.next_header);
        h.buffer[1] = 0;
        h.set_frag_offset_and_more(self.frag_offset, self.more_frags);
        h.set_ident(self.ident);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Chain walker

/// One extension header found by [`walk`]. Offsets are relative to the IPv6 payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtHeader {
    /// Which header this is (an [`ip_protocol`] number).
    pub header_type: u8,
    /// Its Next Header field.
    pub next_header: u8,
    pub offset: usize,
    pub len: usize,
}

impl ExtHeader {
    pub const fn range(&self) -> Range<usize> {
        self.offset..self.offset + self.len
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Walking,
    Done,
    Failed,
}

/// Iterator over an IPv6 extension header chain; see [`walk`].
#[derive(Debug, Clone)]
pub struct ExtWalk<'a> {
    payload: &'a [u8],
    next_header: u8,
    offset: usize,
    count: usize,
    later_fragment: bool,
    state: State,
}

/// Walk the extension headers of an IPv6 packet whose fixed header's Next Header is
/// `first_next_header` and whose payload is `payload`.
///
/// Each item is one header's type, offset and length. The walk ends (returns `None`) at the
/// first non-extension header, after which [`ExtWalk::upper`] gives it and its offset; or at
/// a Fragment header with a non-zero offset, whose data is a continuation, not headers.
/// It fails, yielding one `Err` and then `None`, on a header running past the payload
/// (`Truncated`), a Hop-by-Hop header anywhere but first or an AH length that is not a
/// multiple of 8 (`Malformed`), or more than [`MAX_EXT_HEADERS`] headers (`Unsupported`).
pub const fn walk(first_next_header: u8, payload: &[u8]) -> ExtWalk<'_> {
    ExtWalk {
        payload,
        next_header: first_next_header,
        offset: 0,
        count: 0,
        later_fragment: false,
        state: State::Walking,
    }
}

impl<'a> ExtWalk<'a> {
    fn fail(&mut self, e: Error) -> Option<Result<ExtHeader>> {
        self.state = State::Failed;
        Some(Err(e))
    }

    /// The upper-layer protocol and its offset in the payload, once the walk has ended
    /// without error; `None` before that or after an error.
    pub const fn upper(&self) -> Option<(u8, usize)> {
        match self.state {
            State::Done => Some((self.next_header, self.offset)),
            _ => None,
        }
    }

    /// Whether the walk stopped at a Fragment header with a non-zero offset.
    pub const fn later_fragment(&self) -> bool {
        self.later_fragment
    }

    /// Run the walk to its end and summarise it.
    pub fn into_chain(mut self) -> Result<ExtChain> {
        let mut c = ExtChain {
            upper: self.next_header,
            upper_offset: 0,
            count: 0,
            hbh: None,
            dest_opts_routing: None,
            routing: None,
            fragment: None,
            auth: None,
            dest_opts: None,
            later_fragment: false,
        };
        for h in &mut self {
            let h = h?;
            c.count += 1;
            let slot = match h.header_type {
                ip_protocol::HOPOPT => &mut c.hbh,
                ip_protocol::IPV6_OPTS if h.next_header == ip_protocol::IPV6_ROUTE => {
                    &mut c.dest_opts_routing
                }
                ip_protocol::IPV6_OPTS => &mut c.dest_opts,
                ip_protocol::IPV6_ROUTE => &mut c.routing,
                ip_protocol::IPV6_FRAG => &mut c.fragment,
                _ => &mut c.auth,
            };
            slot.get_or_insert(h.range());
        }
        (c.upper, c.upper_offset) = self.upper().ok_or(Error::Malformed)?;
        c.later_fragment = self.later_fragment;
        Ok(c)
    }
}

impl Iterator for ExtWalk<'_> {
    type Item = Result<ExtHeader>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.state != State::Walking {
            return None;
        }
        let ty = self.next_header;
        if !is_extension_header(ty) || self.later_fragment {
            self.state = State::Done;
            return None;
        }
        // RFC 8200 section 4.3: Hop-by-Hop only immediately after the IPv6 header.
        if ty == ip_protocol::HOPOPT && self.count != 0 {
            return self.fail(Error::Malformed);
        }
        if self.count >= MAX_EXT_HEADERS {
            return self.fail(Error::Unsupported);
        }
        let rest = self.payload.get(self.offset..).unwrap_or(&[]);
        if rest.len() < 2 {
            return self.fail(Error::Truncated);
        }
        let len = match ty {
            ip_protocol::IPV6_FRAG => FRAGMENT_HEADER_LEN,
            // RFC 4302 section 2.2: 4-octet units minus 2; a multiple of 8 for IPv6.
            ip_protocol::AH => (rest[field::LENGTH] as usize + 2) * 4,
            _ => units_to_len(rest[field::LENGTH]),
        };
        if len & (UNIT - 1) != 0 {
            return self.fail(Error::Malformed);
        }
        if rest.len() < len {
            return self.fail(Error::Truncated);
        }
        if ty == ip_protocol::IPV6_FRAG && be16(&rest[field::FRAG_OFF_M]) & 0xfff8 != 0 {
            self.later_fragment = true;
        }
        let h = ExtHeader {
            header_type: ty,
            next_header: rest[field::NXT_HDR],
            offset: self.offset,
            len,
        };
        self.next_header = h.next_header;
        self.offset += len;
        self.count += 1;
        Some(Ok(h))
    }
}

impl core::iter::FusedIterator for ExtWalk<'_> {}

/// Summary of an extension header chain: where the upper layer starts and where each
/// extension header is (ranges relative to the IPv6 payload; the first of each kind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtChain {
    /// Upper-layer protocol (or ESP, or No Next Header).
    pub upper: u8,
    /// Offset of the upper-layer header in the payload.
    pub upper_offset: usize,
    /// Number of extension headers walked.
    pub count: u8,
    pub hbh: Option<Range<usize>>,
    /// Destination Options before a Routing header (processed at each listed destination).
    pub dest_opts_routing: Option<Range<usize>>,
    pub routing: Option<Range<usize>>,
    pub fragment: Option<Range<usize>>,
    /// Authentication Header (RFC 4302).
    pub auth: Option<Range<usize>>,
    /// Destination Options for the final destination.
    pub dest_opts: Option<Range<usize>>,
    /// A Fragment header with non-zero offset was found: the bytes at `upper_offset` are
    /// fragment data, not an upper-layer header (`upper` is the original packet's protocol).
    pub later_fragment: bool,
}

/// [`walk`] the chain to its end and summarise it.
pub fn parse_chain(first_next_header: u8, payload: &[u8]) -> Result<ExtChain> {
    walk(first_next_header, payload).into_chain()
}

/// Fuzz entry: walk `data[1..]` with `data[0]` as first Next Header, parse every header
/// found and round-trip its representation; also try each view on `data`. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    if let Some((&first, payload)) = data.split_first() {
        let mut w = walk(first, payload);
        let mut end = 0;
        let mut failed = false;
        for h in &mut w {
            let Ok(h) = h else {
                failed = true;
                continue;
            };
            assert!(!failed && h.offset == end && h.range().end <= payload.len());
            end = h.range().end;
            fuzz_header(h.header_type, &payload[h.range()]);
        }
        if let Some((upper, off)) = w.upper() {
            assert!(!failed && off == end && !is_extension_header(upper) || w.later_fragment());
        }
        let chain = parse_chain(first, payload);
        assert_eq!(chain.is_ok(), w.upper().is_some());
    }
    for ty in [
        ip_protocol::HOPOPT,
        ip_protocol::IPV6_ROUTE,
        ip_protocol::IPV6_FRAG,
    ] {
        fuzz_header(ty, data);
    }
}

#[cfg(any(test, feature = "fuzzing"))]
fn fuzz_header(ty: u8, data: &[u8]) {
    let mut out = [0u8; MAX_HEADER_LEN];
    match ty {
        ip_protocol::HOPOPT | ip_protocol::IPV6_OPTS => {
            let Ok(h) = OptionsHeader::new_checked(data) else {
                return;
            };
            let _ = (h.next_header(), h.iter_options().count());
            let Ok(r) = OptionsRepr::parse(&h) else {
                return;
            };
            r.emit(&mut out).expect("parsed header re-emits");
            assert_eq!(&out[..r.header_len()], &data[..r.header_len()]);
            let h2 = OptionsHeader::new_checked(&out[..]).expect("checks");
            assert_eq!(OptionsRepr::parse(&h2), Ok(r));
            // Rebuilding from the option list gives the same options, pads aside.
            let mut kinds = [Kind::Pad1; MAX_HEADER_LEN / 2];
            let mut n = 0;
            for o in h.iter_options().flatten() {
                if !matches!(o.kind, Kind::Pad1 | Kind::PadN(_)) {
                    kinds[n] = o.kind;
                    n += 1;
                }
            }
            let len = emit_options_header(r.next_header, &kinds[..n], &mut out).expect("fits");
            let h3 = OptionsHeader::new_checked(&out[..len]).expect("checks");
            let rebuilt = h3
                .iter_options()
                .flatten()
                .filter(|o| !matches!(o.kind, Kind::Pad1 | Kind::PadN(_)));
            assert!(rebuilt.map(|o| o.kind).eq(kinds[..n].iter().copied()));
        }
        ip_protocol::IPV6_ROUTE => {
            let Ok(h) = RoutingHeader::new_checked(data) else {
                return;
            };
            let r = RoutingRepr::parse(&h).expect("checked header parses");
            r.emit(&mut out).expect("parsed header re-emits");
            assert_eq!(&out[..r.header_len()], &data[..r.header_len()]);
            assert_eq!(
                RoutingRepr::parse(&RoutingHeader::new_checked(&out[..]).expect("checks")),
                Ok(r)
            );
        }
        ip_protocol::IPV6_FRAG => {
            let Ok(h) = FragmentHeader::new_checked(data) else {
                return;
            };
            let r = FragmentRepr::parse(&h).expect("checked header parses");
            let _ = r.is_atomic();
            r.emit(&mut out).expect("parsed header re-emits");
            assert_eq!(
                FragmentRepr::parse(&FragmentHeader::new_checked(&out[..]).expect("checks")),
                Ok(r)
            );
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv6;
    use crate::ipv6option::{option_type, Action};
    use std::vec::Vec;

    /// 2001:db8::1 -> 2001:db8::2: Hop-by-Hop (PadN, experimental option 0x1e), Segment
    /// Routing header (type 4, one segment, segments left 0), Fragment (first fragment, M set,
    /// id 0x12345678), then a UDP header 1234 -> 2152 (GTP-U) and 4 bytes of data.
    static PACKET: [u8; 40 + 8 + 24 + 8 + 12] = [
        // IPv6: payload length 52, next header HbH, hop limit 64.
        0x60, 0x00, 0x00, 0x00, 0x00, 0x34, 0x00, 0x40, //
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, //
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, //
        // Hop-by-Hop: next Routing, len 0; PadN(0); option 0x1e len 2 aa bb.
        0x2b, 0x00, 0x01, 0x00, 0x1e, 0x02, 0xaa, 0xbb, //
        // Routing: next Fragment, len 2, type 4, segments left 0; last entry 0, flags 0,
        // tag 0; segment list [2001:db8::2].
        0x2c, 0x02, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, //
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, //
        // Fragment: next UDP, offset 0, M=1, id 0x12345678.
        0x11, 0x00, 0x00, 0x01, 0x12, 0x34, 0x56, 0x78, //
        // UDP 1234 -> 2152, length 12, checksum 0 (not checked here), data.
        0x04, 0xd2, 0x08, 0x68, 0x00, 0x0c, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef,
    ];

    fn payload() -> &'static [u8] {
        &PACKET[40..]
    }

    #[test]
    fn walk_hbh_routing_fragment() {
        let ip = ipv6::Packet::new_checked(&PACKET[..]).unwrap();
        let mut w = walk(ip.next_header(), ip.payload());
        let hs: Vec<_> = (&mut w)
            .map(|h| h.map(|h| (h.header_type, h.offset, h.len)))
            .collect();
        assert_eq!(hs, [Ok((0, 0, 8)), Ok((43, 8, 24)), Ok((44, 32, 8))]);
        assert_eq!(w.upper(), Some((ip_protocol::UDP, 40)));
        assert!(!w.later_fragment());

        let c = parse_chain(ip.next_header(), ip.payload()).unwrap();
        assert_eq!(
            c,
            ExtChain {
                upper: ip_protocol::UDP,
                upper_offset: 40,
                count: 3,
                hbh: Some(0..8),
                dest_opts_routing: None,
                routing: Some(8..32),
                fragment: Some(32..40),
                auth: None,
                dest_opts: None,
                later_fragment: false,
            }
        );
        assert_eq!(
            &ip.payload()[c.upper_offset..][..4],
            &[0x04, 0xd2, 0x08, 0x68]
        );
    }

    #[test]
    fn hbh_options() {
        let h = OptionsHeader::new_checked(&payload()[..8]).unwrap();
        assert_eq!(
            (h.next_header(), h.hdr_ext_len(), h.header_len()),
            (43, 0, 8)
        );
        let opts: Vec<_> = h.iter_options().collect::<Result<_>>().unwrap();
        assert_eq!(opts.len(), 2);
        assert_eq!(opts[0].kind, Kind::PadN(0));
        assert_eq!(
            opts[1].kind,
            Kind::Unknown {
                option_type: 0x1e,
                data: &[0xaa, 0xbb]
            }
        );
        assert_eq!(opts[1].action(), Action::Skip);
        let r = OptionsRepr::parse(&h).unwrap();
        assert_eq!(
            r,
            OptionsRepr {
                next_header: 43,
                options: &payload()[2..8]
            }
        );
        let mut out = [0u8; 8];
        r.emit(&mut out).unwrap();
        assert_eq!(&out, &payload()[..8]);
        assert_eq!(r.emit(&mut [0u8; 7]), Err(Error::BufferTooSmall));
        let bad = OptionsRepr {
            options: &[0; 5],
            ..r
        };
        assert_eq!(bad.emit(&mut out), Err(Error::Malformed));
    }

    #[test]
    fn routing_and_fragment_views() {
        let rh = RoutingHeader::new_checked(&payload()[8..]).unwrap();
        assert_eq!(
            (
                rh.next_header(),
                rh.header_len(),
                rh.routing_type(),
                rh.segments_left()
            ),
            (44, 24, 4, 0)
        );
        assert_eq!(rh.data().len(), 20);
        let r = RoutingRepr::parse(&rh).unwrap();
        let mut out = [0u8; 24];
        r.emit(&mut out).unwrap();
        assert_eq!(&out[..], &payload()[8..32]);
        assert_eq!(
            RoutingRepr { data: &[0; 5], ..r }.emit(&mut out),
            Err(Error::Malformed)
        );

        let fh = FragmentHeader::new_checked(&payload()[32..]).unwrap();
        let f = FragmentRepr::parse(&fh).unwrap();
        assert_eq!(
            f,
            FragmentRepr {
                next_header: 17,
                frag_offset: 0,
                more_frags: true,
                ident: 0x1234_5678
            }
        );
        assert!(!f.is_atomic());
        let mut out = [0xffu8; 8];
        f.emit(&mut out).unwrap();
        assert_eq!(&out, &payload()[32..40]);
        let later = FragmentRepr {
            frag_offset: 1232,
            more_frags: false,
            ..f
        };
        later.emit(&mut out).unwrap();
        assert_eq!(&out[2..4], &[0x04, 0xd0]);
        assert_eq!(
            FragmentRepr::parse(&FragmentHeader::new_checked(&out[..]).unwrap()),
            Ok(later)
        );
        assert_eq!(
            FragmentRepr {
                frag_offset: 3,
                ..f
            }
            .emit(&mut out),
            Err(Error::Malformed)
        );
        assert_eq!(f.emit(&mut [0u8; 7]), Err(Error::BufferTooSmall));
    }

    #[test]
    fn later_fragment_stops_walk() {
        let mut p = [0u8; 16];
        p[..8].copy_from_slice(&[0x11, 0x00, 0x05, 0x00, 0, 0, 0, 1]); // offset 160
        p[8..].copy_from_slice(&[0x00, 0x00, 0, 0, 0, 0, 0, 0]); // looks like HbH: not walked
        let c = parse_chain(ip_protocol::IPV6_FRAG, &p).unwrap();
        assert_eq!(
            (c.upper, c.upper_offset, c.later_fragment, c.count),
            (17, 8, true, 1)
        );
    }

    #[test]
    fn no_extension_headers() {
        let c = parse_chain(ip_protocol::TCP, &[]).unwrap();
        assert_eq!((c.upper, c.upper_offset, c.count), (ip_protocol::TCP, 0, 0));
        let c = parse_chain(ip_protocol::IPV6_NONXT, &[1, 2, 3]).unwrap();
        assert_eq!((c.upper, c.upper_offset), (ip_protocol::IPV6_NONXT, 0));
    }

    #[test]
    fn dest_opts_placement_and_auth() {
        // DestOpts -> Routing(type 0 empty) -> AH (len 1 = 12 bytes: not a multiple of 8
        // would be malformed, so len 2 = 16) -> DestOpts -> ICMPv6.
        let mut p = [0u8; 8 + 8 + 16 + 8];
        p[0] = ip_protocol::IPV6_ROUTE;
        p[8] = ip_protocol::AH;
        p[16] = ip_protocol::IPV6_OPTS;
        p[17] = 2;
        p[32] = ip_protocol::IPV6_ICMP;
        let c = parse_chain(ip_protocol::IPV6_OPTS, &p).unwrap();
        assert_eq!(c.dest_opts_routing, Some(0..8));
        assert_eq!(c.routing, Some(8..16));
        assert_eq!(c.auth, Some(16..32));
        assert_eq!(c.dest_opts, Some(32..40));
        assert_eq!(
            (c.upper, c.upper_offset, c.count),
            (ip_protocol::IPV6_ICMP, 40, 4)
        );
        p[17] = 1;
        assert_eq!(
            parse_chain(ip_protocol::IPV6_OPTS, &p),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn walk_errors() {
        // A header running past the payload.
        for n in [1, 7, 20, 39] {
            let mut w = walk(ip_protocol::HOPOPT, &payload()[..n]);
            let last = (&mut w).last().unwrap();
            assert_eq!(last, Err(Error::Truncated), "n = {n}");
            assert_eq!(w.next(), None);
            assert_eq!(w.upper(), None);
        }
        assert_eq!(parse_chain(ip_protocol::HOPOPT, &[]), Err(Error::Truncated));
        // Hop-by-Hop after another header.
        let mut p = [0u8; 16];
        p[0] = ip_protocol::HOPOPT;
        assert_eq!(
            parse_chain(ip_protocol::IPV6_OPTS, &p),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn walk_is_bounded() {
        // 17 Destination Options headers, each pointing at the next.
        let mut p = [0u8; 17 * 8 + 8];
        for i in 0..17 {
            p[i * 8] = ip_protocol::IPV6_OPTS;
        }
        let mut w = walk(ip_protocol::IPV6_OPTS, &p);
        assert_eq!((&mut w).filter(Result::is_ok).count(), MAX_EXT_HEADERS);
        assert_eq!(
            parse_chain(ip_protocol::IPV6_OPTS, &p),
            Err(Error::Unsupported)
        );
        p[15 * 8] = ip_protocol::UDP;
        assert_eq!(parse_chain(ip_protocol::IPV6_OPTS, &p).unwrap().count, 16);
    }

    #[test]
    fn emit_options_header_pads() {
        let ra = [0u8, 0];
        let opts = [Kind::Unknown {
            option_type: option_type::ROUTER_ALERT,
            data: &ra,
        }];
        assert_eq!(options_header_len(&opts), 8);
        let mut buf = [0xffu8; 16];
        assert_eq!(
            emit_options_header(ip_protocol::IPV6_ICMP, &opts, &mut buf),
            Ok(8)
        );
        // RFC 2711 Router Alert as sent with MLD: 3a 00 05 02 00 00 01 00.
        assert_eq!(&buf[..8], &[0x3a, 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00]);

        let d = [0x11u8; 4];
        let opts = [
            Kind::Unknown {
                option_type: 0x1e,
                data: &d,
            },
            Kind::Pad1,
        ];
        assert_eq!(emit_options_header(0x11, &opts, &mut buf), Ok(16));
        let h = OptionsHeader::new_checked(&buf[..]).unwrap();
        assert_eq!(h.hdr_ext_len(), 1);
        let kinds: Vec<_> = h.iter_options().map(|o| o.unwrap().kind).collect();
        assert_eq!(kinds, [opts[0], Kind::Pad1, Kind::PadN(5)]);

        // Exactly 8 bytes of option: no padding at all.
        let opts = [Kind::Unknown {
            option_type: 0x1e,
            data: &d,
        }];
        assert_eq!(emit_options_header(0x11, &opts, &mut buf), Ok(8));
        assert_eq!(
            emit_options_header(0x11, &opts, &mut buf[..7]),
            Err(Error::BufferTooSmall)
        );
        // A 7-byte tail gets one Pad1 only.
        let opts = [Kind::Unknown {
            option_type: 0x1e,
            data: &d[..3],
        }];
        assert_eq!(emit_options_header(0x11, &opts, &mut buf), Ok(8));
        assert_eq!(buf[7], 0);
    }

    #[test]
    fn truncated_views() {
        assert_eq!(
            OptionsHeader::new_checked(&payload()[..7]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            RoutingHeader::new_checked(&payload()[8..31]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            FragmentHeader::new_checked(&payload()[32..39]).unwrap_err(),
            Error::Truncated
        );
        // Options that run past the header: the view checks, the Repr does not parse.
        let bad = [0x3a, 0x00, 0x1e, 0x09, 0, 0, 0, 0];
        let h = OptionsHeader::new_checked(&bad[..]).unwrap();
        assert_eq!(OptionsRepr::parse(&h), Err(Error::Truncated));
    }

    #[test]
    fn fuzz_smoke() {
        let mut d = [0u8; 1 + 52];
        d[0] = 0;
        d[1..].copy_from_slice(payload());
        for n in 0..=d.len() {
            fuzz(&d[..n]);
            fuzz(&d[n..]);
        }
    }
}
