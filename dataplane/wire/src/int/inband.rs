//! The experimental in-band options: 0x32 INT Request and 0x33 piggy-backed report (Fig. 3).

use super::*;

// ---------------------------------------------------------------------------------------
// In-band request / report options

/// Which in-band option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InBandKind {
    /// 0x32: INT Request, the CBOR rule (`Rule::to_option_payload`).
    Request,
    /// 0x33: a piggy-backed report (`peregrine_int::report::IntReport::encode_compact`).
    Report,
}

impl InBandKind {
    pub const fn option_type(self) -> u8 {
        match self {
            InBandKind::Request => option_type::REQUEST,
            InBandKind::Report => option_type::REPORT,
        }
    }
}

/// An in-band option (seed Fig. 3): option type, length, payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InBandRepr<'a> {
    pub kind: InBandKind,
    pub payload: &'a [u8],
}

/// Length of the Hop-by-Hop header [`emit_inband_header`] writes.
pub const fn inband_header_len(payload_len: usize) -> usize {
    (2 + 2 + payload_len).div_ceil(8) * 8
}

/// Write a Hop-by-Hop header holding only `repr` (seed Fig. 3) and padding. An empty or
/// over-255-byte payload is `Malformed`.
pub fn emit_inband_header(next_header: u8, repr: &InBandRepr<'_>, buf: &mut [u8]) -> Result<usize> {
    if repr.payload.is_empty() || repr.payload.len() > MAX_INBAND_PAYLOAD {
        return Err(Error::Malformed);
    }
    let len = inband_header_len(repr.payload.len());
    let b = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
    b[0] = next_header;
    b[1] = (len / 8 - 1) as u8;
    let p = 2 + ipv6option::emit_tlv(&mut b[2..], repr.kind.option_type(), repr.payload)?;
    ipv6option::emit_pad(&mut b[p..], len - p)?;
    Ok(len)
}

/// The first 0x32 or 0x33 option in the options header at the start of `hdr`, if any.
pub fn find_inband(hdr: &[u8]) -> Result<Option<InBandRepr<'_>>> {
    let h = OptionsHeader::new_checked(hdr)?;
    let area = &hdr[2..h.header_len()];
    for opt in ipv6option::iter(area) {
        let opt = opt?;
        let kind = match opt.option_type() {
            option_type::REQUEST => InBandKind::Request,
            option_type::REPORT => InBandKind::Report,
            _ => continue,
        };
        if opt.data().is_empty() {
            return Err(Error::Malformed);
        }
        return Ok(Some(InBandRepr {
            kind,
            payload: opt.data(),
        }));
    }
    Ok(None)
}
