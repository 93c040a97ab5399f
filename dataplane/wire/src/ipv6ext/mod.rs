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
mod tests;
