//! IOAM in IPv6 options (RFC 9486 section 3): the option view, finding it in an
//! extension header, and emitting a header that carries one.

use super::*;

/// A view of an IOAM IPv6 option's data (the bytes after Option Type and Opt Data Len):
/// Reserved, IOAM Option-Type, body (RFC 9486 section 3).
#[derive(Debug, Clone)]
pub struct IoamOption<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IoamOption<T> {
    pub const fn new_unchecked(buffer: T) -> IoamOption<T> {
        IoamOption { buffer }
    }

    /// Wrap `buffer`, exactly the option data; at least 2 bytes.
    pub fn new_checked(buffer: T) -> Result<IoamOption<T>> {
        let o = Self::new_unchecked(buffer);
        o.check_len()?;
        Ok(o)
    }

    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < field::BODY.start {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Reserved octet: zero when sent, ignored when received.
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED]
    }

    /// IOAM Option-Type ([`option_type`]).
    pub fn ioam_type(&self) -> u8 {
        self.buffer.as_ref()[field::OPT_TYPE]
    }

    /// The IOAM option proper (trace, POT or E2E).
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[field::BODY]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IoamOption<T> {
    pub fn set_reserved(&mut self, v: u8) {
        self.buffer.as_mut()[field::RESERVED] = v;
    }

    pub fn set_ioam_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::OPT_TYPE] = v;
    }

    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::BODY]
    }
}

/// Write the 4 bytes that precede an IOAM body of `body_len` bytes in an IPv6 options area:
/// `ipv6_option_type` (0x31 or 0x11), Opt Data Len, Reserved = 0, `ioam_type`. Returns 4.
/// A body over [`MAX_BODY_LEN`] is `Malformed`.
pub fn emit_option_header(
    ipv6_option_type: u8,
    ioam_type: u8,
    body_len: usize,
    buf: &mut [u8],
) -> Result<usize> {
    if body_len > MAX_BODY_LEN {
        return Err(Error::Malformed);
    }
    let b = buf
        .get_mut(..IPV6_OPTION_HEADER_LEN)
        .ok_or(Error::BufferTooSmall)?;
    b[0] = ipv6_option_type;
    b[1] = (2 + body_len) as u8;
    b[2] = 0;
    b[3] = ioam_type;
    Ok(IPV6_OPTION_HEADER_LEN)
}

/// An IOAM option found in an options header by [`find_in_header`]. Offsets are from the
/// start of the extension header (Next Header octet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Offset of the IPv6 Option Type octet.
    pub offset: usize,
    /// The IPv6 option type (0x31 or 0x11).
    pub ipv6_option_type: u8,
    /// IOAM Option-Type ([`option_type`]).
    pub ioam_type: u8,
    /// Where the body (after Reserved and IOAM Option-Type) lies.
    pub body: Range<usize>,
}

impl Found {
    /// Whether the option is 4n-aligned within the header, as RFC 9486 section 3 requires.
    pub const fn is_aligned(&self) -> bool {
        self.offset.is_multiple_of(4)
    }
}

/// Find the first IOAM option (IPv6 option type `ipv6_option_type`, 0x31 or 0x11) in the
/// Hop-by-Hop or Destination Options header at the start of `header`. `Ok(None)` when there
/// is none; `Truncated` for a bad header or options area, `Malformed` for an IOAM option
/// shorter than its Reserved and Option-Type octets.
pub fn find_in_header(header: &[u8], ipv6_option_type: u8) -> Result<Option<Found>> {
    let h = OptionsHeader::new_checked(header)?;
    for opt in h.iter_options() {
        let opt = opt?;
        if opt.option_type() != ipv6_option_type {
            continue;
        }
        let data = opt.data();
        if data.len() < field::BODY.start {
            return Err(Error::Malformed);
        }
        // The options area starts 2 bytes into the header.
        let start = 2 + opt.data_offset();
        return Ok(Some(Found {
            offset: 2 + opt.offset,
            ipv6_option_type,
            ioam_type: data[field::OPT_TYPE],
            body: start + field::BODY.start..start + data.len(),
        }));
    }
    Ok(None)
}

/// Length of the Hop-by-Hop header [`emit_hbh_with_trace`] writes for `repr`.
pub const fn hbh_with_trace_len(repr: &TraceRepr) -> usize {
    hbh_with_ioam_len(repr.buffer_len())
}

/// Length of a Hop-by-Hop header holding PadN(0) and one IOAM option with a body of
/// `body_len` bytes, padded to a multiple of 8.
pub const fn hbh_with_ioam_len(body_len: usize) -> usize {
    (2 + 2 + IPV6_OPTION_HEADER_LEN + body_len).div_ceil(8) * 8
}

/// Write an options header (`ipv6_option_type` 0x31 for Hop-by-Hop, 0x11 for Destination
/// Options) holding a 2-byte PadN, so that the IOAM option that follows is 4n-aligned
/// (RFC 9486 section 3), and the IOAM option's first 4 bytes; then end padding to a
/// multiple of 8. The body itself (`body_len` bytes) is zero-filled and its range returned
/// for the caller to write; also returns the header length.
pub fn emit_header_with_ioam(
    next_header: u8,
    ipv6_option_type: u8,
    ioam_type: u8,
    body_len: usize,
    buf: &mut [u8],
) -> Result<(usize, Range<usize>)> {
    if body_len > MAX_BODY_LEN {
        return Err(Error::Malformed);
    }
    let len = hbh_with_ioam_len(body_len);
    let b = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
    b[0] = next_header;
    b[1] = (len / 8 - 1) as u8;
    let mut pos = 2;
    pos += ipv6option::emit_padn(&mut b[pos..], 0)?;
    pos += emit_option_header(ipv6_option_type, ioam_type, body_len, &mut b[pos..])?;
    let body = pos..pos + body_len;
    b[body.clone()].fill(0);
    ipv6option::emit_pad(&mut b[body.end..], len - body.end)?;
    Ok((len, body))
}

/// Write a Hop-by-Hop header carrying a Pre-allocated Trace Option built from `repr`
/// (header fields as given, node data all zero), preceded by a PadN so the IOAM option is
/// 4n-aligned. Returns the header length ([`hbh_with_trace_len`]).
pub fn emit_hbh_with_trace(next_header: u8, repr: &TraceRepr, buf: &mut [u8]) -> Result<usize> {
    let (len, body) = emit_header_with_ioam(
        next_header,
        ipv6_option_type::IOAM_HBH,
        option_type::PRE_ALLOCATED_TRACE,
        repr.buffer_len(),
        buf,
    )?;
    repr.emit(&mut buf[body])?;
    Ok(len)
}
