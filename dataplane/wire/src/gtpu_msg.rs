//! GTP-U signalling messages (3GPP TS 29.281 section 7): Echo Request/Response with Recovery IE, Error Indication, End Marker.
//!
//! Information elements (section 8) follow the GTP-U header and its extension headers.
//! Types below 128 are TV with a fixed length known per type (Recovery: 1, TEID Data I: 4);
//! types from 128 are TLV with a 2-octet length (section 8.1), except Extension Header Type
//! List (141), whose length is 1 octet (section 8.5). A TV type we do not know cannot be
//! skipped, so the [`Ies`] iterator stops there with `Error::Unsupported`.

use crate::gtpu::{self, msg_type};
use crate::{be16, be32, put16, put32, Error, Result};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Information element types (TS 29.281 section 8.1, table 8.1-1).
pub mod ie_type {
    /// Recovery (TV, 1 octet restart counter), section 8.2.
    pub const RECOVERY: u8 = 14;
    /// Tunnel Endpoint Identifier Data I (TV, 4 octets), section 8.3.
    pub const TEID_DATA_I: u8 = 16;
    /// GTP-U Peer Address (TLV, 4 or 16 octets), section 8.4.
    pub const GTPU_PEER_ADDRESS: u8 = 133;
    /// Extension Header Type List (type, 1-octet length, types), section 8.5.
    pub const EXT_HEADER_TYPE_LIST: u8 = 141;
    /// Private Extension (TLV), section 8.6.
    pub const PRIVATE_EXTENSION: u8 = 255;
}

/// Value length of the TV types we know, `None` for unknown TV types.
const fn tv_len(ty: u8) -> Option<usize> {
    match ty {
        ie_type::RECOVERY => Some(1),
        ie_type::TEID_DATA_I => Some(4),
        _ => None,
    }
}

/// One information element: its type and value (without type and length octets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ie<'a> {
    pub ty: u8,
    pub value: &'a [u8],
}

/// Iterator over the IEs of a message body. Yields `Err` once (then ends) on an unknown TV
/// type (`Unsupported`) or an IE running past the body (`Truncated`).
#[derive(Debug, Clone)]
pub struct Ies<'a> {
    data: &'a [u8],
}

/// Iterate over the IEs in `body` (the GTP-U payload of a signalling message).
pub fn ies(body: &[u8]) -> Ies<'_> {
    Ies { data: body }
}

impl<'a> Ies<'a> {
    fn step(&self) -> Result<(Ie<'a>, usize)> {
        let d = self.data;
        let ty = d[0];
        let (hdr, len) = if ty < 128 {
            (1, tv_len(ty).ok_or(Error::Unsupported)?)
        } else if ty == ie_type::EXT_HEADER_TYPE_LIST {
            (2, *d.get(1).ok_or(Error::Truncated)? as usize)
        } else {
            (3, be16(d.get(1..3).ok_or(Error::Truncated)?) as usize)
        };
        let value = d.get(hdr..hdr + len).ok_or(Error::Truncated)?;
        Ok((Ie { ty, value }, hdr + len))
    }
}

impl<'a> Iterator for Ies<'a> {
    type Item = Result<Ie<'a>>;

    fn next(&mut self) -> Option<Result<Ie<'a>>> {
        if self.data.is_empty() {
            return None;
        }
        match self.step() {
            Ok((ie, n)) => {
                self.data = &self.data[n..];
                Some(Ok(ie))
            }
            Err(e) => {
                self.data = &[];
                Some(Err(e))
            }
        }
    }
}

/// GTP-U signalling messages a UPF sends or answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr {
    /// Echo Request (section 7.2.1); a Private Extension, if any, is ignored.
    EchoRequest { seq: u16 },
    /// Echo Response (section 7.2.2) with its Recovery IE; the restart counter is sent as 0
    /// and ignored on receipt (section 8.2), but kept here as received.
    EchoResponse { seq: u16, recovery: u8 },
    /// Error Indication (section 7.3.1): the TEID that was not found and the address of the
    /// peer that reported it. Sent with TEID 0 and the S flag set (sequence number 0).
    ErrorIndication { teid_data: u32, peer: IpAddr },
    /// End Marker (section 7.3.2) for tunnel `teid`; no IEs.
    EndMarker { teid: u32 },
}

impl Repr {
    /// The Echo Response answering an Echo Request with sequence number `seq`.
    pub const fn echo_response(seq: u16) -> Repr {
        Repr::EchoResponse { seq, recovery: 0 }
    }

    /// Parse the message behind a validated GTP-U header: its IEs are read from
    /// [`gtpu::Header::payload`]. `Unsupported` for message types not listed in [`Repr`]
    /// (including G-PDU); `Malformed` when a mandatory IE is missing or a peer address is
    /// neither 4 nor 16 octets. IEs after the mandatory ones are not examined.
    pub fn parse<T: AsRef<[u8]>>(header: &gtpu::Header<T>) -> Result<Repr> {
        header.check_len()?;
        let body = header.payload();
        match header.msg_type() {
            // Section 5.1 requires S=1 for Echo; tolerate its absence as sequence 0.
            msg_type::ECHO_REQUEST => Ok(Repr::EchoRequest {
                seq: header.seq_number().unwrap_or(0),
            }),
            msg_type::ECHO_RESPONSE => {
                let seq = header.seq_number().unwrap_or(0);
                for ie in ies(body) {
                    let ie = ie?;
                    if ie.ty == ie_type::RECOVERY {
                        return Ok(Repr::EchoResponse {
                            seq,
                            recovery: ie.value[0],
                        });
                    }
                }
                Err(Error::Malformed)
            }
            msg_type::ERROR_INDICATION => {
                let mut teid_data = None;
                let mut peer = None;
                for ie in ies(body) {
                    let ie = ie?;
                    match ie.ty {
                        ie_type::TEID_DATA_I if teid_data.is_none() => {
                            teid_data = Some(be32(ie.value));
                        }
                        ie_type::GTPU_PEER_ADDRESS if peer.is_none() => {
                            peer = Some(parse_addr(ie.value)?);
                        }
                        _ => {}
                    }
                    if let (Some(teid_data), Some(peer)) = (teid_data, peer) {
                        return Ok(Repr::ErrorIndication { teid_data, peer });
                    }
                }
                Err(Error::Malformed)
            }
            msg_type::END_MARKER => Ok(Repr::EndMarker {
                teid: header.teid(),
            }),
            _ => Err(Error::Unsupported),
        }
    }

    /// The sequence number carried in the header, if any.
    pub const fn seq(&self) -> Option<u16> {
        match *self {
            Repr::EchoRequest { seq } | Repr::EchoResponse { seq, .. } => Some(seq),
            Repr::ErrorIndication { .. } => Some(0),
            Repr::EndMarker { .. } => None,
        }
    }

    /// Length of the IEs after the header.
    pub const fn body_len(&self) -> usize {
        match self {
            Repr::EchoRequest { .. } | Repr::EndMarker { .. } => 0,
            Repr::EchoResponse { .. } => 2,
            Repr::ErrorIndication { peer, .. } => {
                5 + 3
                    + match peer {
                        IpAddr::V4(_) => 4,
                        IpAddr::V6(_) => 16,
                    }
            }
        }
    }

    /// The GTP-U header this message is sent with.
    pub const fn header_repr(&self) -> gtpu::Repr {
        let (msg_type, teid) = match *self {
            Repr::EchoRequest { .. } => (msg_type::ECHO_REQUEST, 0),
            Repr::EchoResponse { .. } => (msg_type::ECHO_RESPONSE, 0),
            Repr::ErrorIndication { .. } => (msg_type::ERROR_INDICATION, 0),
            Repr::EndMarker { teid } => (msg_type::END_MARKER, teid),
        };
        gtpu::Repr {
            msg_type,
            teid,
            seq: self.seq(),
            npdu: None,
            ext: None,
            payload_len: self.body_len(),
        }
    }

    /// Length of the whole message, header included.
    pub const fn buffer_len(&self) -> usize {
        self.header_repr().buffer_len()
    }

    /// Write the whole GTP-U message (header and IEs) into the first
    /// [`Repr::buffer_len`] bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let h = self.header_repr();
        if buf.len() < h.buffer_len() {
            return Err(Error::BufferTooSmall);
        }
        h.emit(buf)?;
        let body = &mut buf[h.header_len()..h.buffer_len()];
        match *self {
            Repr::EchoRequest { .. } | Repr::EndMarker { .. } => {}
            Repr::EchoResponse { recovery, .. } => {
                body[0] = ie_type::RECOVERY;
                body[1] = recovery;
            }
            Repr::ErrorIndication { teid_data, peer } => {
                body[0] = ie_type::TEID_DATA_I;
                put32(&mut body[1..5], teid_data);
                body[5] = ie_type::GTPU_PEER_ADDRESS;
                match peer {
                    IpAddr::V4(a) => {
                        put16(&mut body[6..8], 4);
                        body[8..12].copy_from_slice(&a.octets());
                    }
                    IpAddr::V6(a) => {
                        put16(&mut body[6..8], 16);
                        body[8..24].copy_from_slice(&a.octets());
                    }
                }
            }
        }
        Ok(())
    }
}

/// GTP-U Peer Address value (section 8.4): IPv4 or IPv6 by length.
fn parse_addr(v: &[u8]) -> Result<IpAddr> {
    if let Ok(a) = <[u8; 4]>::try_from(v) {
        Ok(IpAddr::V4(Ipv4Addr::from(a)))
    } else if let Ok(a) = <[u8; 16]>::try_from(v) {
        Ok(IpAddr::V6(Ipv6Addr::from(a)))
    } else {
        Err(Error::Malformed)
    }
}

/// Fuzz entry: parse a GTP-U message, walk its IEs, parse the signalling `Repr`, re-emit,
/// re-parse. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let Ok(h) = gtpu::Header::new_checked(data) else {
        return;
    };
    let mut consumed = 0;
    for ie in ies(h.payload()) {
        match ie {
            Ok(ie) => consumed += ie.value.len() + 1,
            Err(_) => break,
        }
    }
    assert!(consumed <= h.payload().len());
    let Ok(r) = Repr::parse(&h) else { return };
    let mut out = [0u8; 40];
    let n = r.buffer_len();
    r.emit(&mut out).expect("message fits");
    let q = gtpu::Header::new_checked(&out[..n]).expect("emitted message checks");
    assert_eq!(Repr::parse(&q), Ok(r));
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real captures (S flag set, sequence 1).
    const ECHO_REQ: [u8; 12] = [0x32, 0x01, 0x00, 0x04, 0, 0, 0, 0, 0x00, 0x01, 0x00, 0x00];
    const ECHO_RESP: [u8; 14] = [
        0x32, 0x02, 0x00, 0x06, 0, 0, 0, 0, 0x00, 0x01, 0x00, 0x00, 0x0e, 0x00,
    ];

    fn parse(m: &[u8]) -> Result<Repr> {
        Repr::parse(&gtpu::Header::new_checked(m)?)
    }

    fn roundtrip(r: Repr, expect: &[u8]) {
        let mut out = [0u8; 64];
        assert_eq!(r.buffer_len(), expect.len());
        r.emit(&mut out).unwrap();
        assert_eq!(&out[..expect.len()], expect);
        assert_eq!(
            r.emit(&mut out[..expect.len() - 1]),
            Err(Error::BufferTooSmall)
        );
    }

    #[test]
    fn echo_request() {
        let r = parse(&ECHO_REQ).unwrap();
        assert_eq!(r, Repr::EchoRequest { seq: 1 });
        roundtrip(r, &ECHO_REQ);
        // With a Private Extension (TLV 255, enterprise 0x0001, value aa), still fine.
        let mut m = [0u8; 18];
        m[..12].copy_from_slice(&ECHO_REQ);
        m[3] = 10;
        m[12..].copy_from_slice(&[0xff, 0x00, 0x03, 0x00, 0x01, 0xaa]);
        assert_eq!(parse(&m), Ok(Repr::EchoRequest { seq: 1 }));
    }

    #[test]
    fn echo_response() {
        let r = parse(&ECHO_RESP).unwrap();
        assert_eq!(
            r,
            Repr::EchoResponse {
                seq: 1,
                recovery: 0
            }
        );
        assert_eq!(r, Repr::echo_response(1));
        roundtrip(r, &ECHO_RESP);
        let h = gtpu::Header::new_checked(&ECHO_RESP[..]).unwrap();
        let ies: std::vec::Vec<_> = ies(h.payload()).collect();
        assert_eq!(
            ies,
            [Ok(Ie {
                ty: ie_type::RECOVERY,
                value: &[0][..]
            })]
        );
    }

    #[test]
    fn echo_response_missing_recovery() {
        let mut m = ECHO_RESP;
        m[3] = 4;
        assert_eq!(parse(&m[..12]), Err(Error::Malformed));
    }

    // Error Indication: TEID 0, S flag, seq 0; TEID Data I 0x2a; peer 192.168.0.1.
    const ERR_IND_V4: [u8; 24] = [
        0x32, 0x1a, 0x00, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, // header
        0x10, 0x00, 0x00, 0x00, 0x2a, // TEID Data I
        0x85, 0x00, 0x04, 192, 168, 0, 1, // GTP-U Peer Address
    ];

    #[test]
    fn error_indication_v4() {
        let r = parse(&ERR_IND_V4).unwrap();
        let peer = IpAddr::V4(Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(
            r,
            Repr::ErrorIndication {
                teid_data: 0x2a,
                peer
            }
        );
        roundtrip(r, &ERR_IND_V4);
    }

    #[test]
    fn error_indication_v6_with_udp_port_ext() {
        let peer = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1));
        let r = Repr::ErrorIndication {
            teid_data: 0x0102_0304,
            peer,
        };
        let mut m = [0u8; 40];
        let n = r.buffer_len();
        assert_eq!(n, 12 + 5 + 19);
        r.emit(&mut m).unwrap();
        assert_eq!(m[12..17], [0x10, 1, 2, 3, 4]);
        assert_eq!(m[17..20], [0x85, 0x00, 0x10]);
        assert_eq!(parse(&m[..n]), Ok(r));

        // The same message with a UDP Port extension header (section 5.2.2.1) in front.
        let mut e = [0u8; 44];
        e[..12].copy_from_slice(&[0x36, 0x1a, 0x00, 0x20, 0, 0, 0, 0, 0, 0, 0, 0x40]);
        e[12..16].copy_from_slice(&[0x01, 0x08, 0x68, 0x00]);
        e[16..40].copy_from_slice(&m[12..n]);
        assert_eq!(parse(&e[..40]), Ok(r));
    }

    #[test]
    fn error_indication_bad_ies() {
        // Missing peer address.
        let mut m = ERR_IND_V4;
        m[3] = 9;
        assert_eq!(parse(&m[..17]), Err(Error::Malformed));
        // Peer address of 5 octets.
        let mut b = [0u8; 25];
        b[..24].copy_from_slice(&ERR_IND_V4);
        b[3] = 0x11;
        b[19] = 5;
        assert_eq!(parse(&b), Err(Error::Malformed));
        // Peer address length running past the body.
        let mut t = ERR_IND_V4;
        t[19] = 16;
        assert_eq!(parse(&t), Err(Error::Truncated));
        // An unknown TV type before the mandatory IEs cannot be skipped.
        let mut u = [0u8; 26];
        u[..12].copy_from_slice(&ERR_IND_V4[..12]);
        u[3] = 18;
        u[12..14].copy_from_slice(&[0x03, 0x00]);
        u[14..].copy_from_slice(&ERR_IND_V4[12..]);
        assert_eq!(parse(&u), Err(Error::Unsupported));
    }

    #[test]
    fn end_marker() {
        let m = [0x30, 0xfe, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a];
        let r = parse(&m).unwrap();
        assert_eq!(r, Repr::EndMarker { teid: 42 });
        assert_eq!(r.seq(), None);
        roundtrip(r, &m);
    }

    #[test]
    fn other_types_unsupported() {
        let g = [0x30, 0xff, 0x00, 0x01, 0, 0, 0, 1, 0x45];
        assert_eq!(parse(&g), Err(Error::Unsupported));
        let sehn = [0x32, 31, 0x00, 0x06, 0, 0, 0, 0, 0, 1, 0, 0, 0x8d, 0x00];
        assert_eq!(parse(&sehn), Err(Error::Unsupported));
    }

    #[test]
    fn ie_iterator() {
        // Recovery, Extension Header Type List (1-octet length), Private Extension, unknown TV.
        let body = [
            0x0e, 0x05, // Recovery 5
            0x8d, 0x02, 0x85, 0x40, // Ext Header Type List [0x85, 0x40]
            0xff, 0x00, 0x02, 0x00, 0x01, // Private Extension
            0x03, 0x00, // unknown TV type 3
            0x0e, 0x01, // never reached
        ];
        let mut it = ies(&body);
        assert_eq!(
            it.next(),
            Some(Ok(Ie {
                ty: 14,
                value: &[5][..]
            }))
        );
        assert_eq!(
            it.next(),
            Some(Ok(Ie {
                ty: 141,
                value: &[0x85, 0x40][..]
            }))
        );
        assert_eq!(
            it.next(),
            Some(Ok(Ie {
                ty: 255,
                value: &[0, 1][..]
            }))
        );
        assert_eq!(it.next(), Some(Err(Error::Unsupported)));
        assert_eq!(it.next(), None);
        // Truncated TV, TLV length and TLV value.
        assert_eq!(ies(&[0x10, 0, 0]).next(), Some(Err(Error::Truncated)));
        assert_eq!(ies(&[0x85, 0]).next(), Some(Err(Error::Truncated)));
        assert_eq!(ies(&[0x8d]).next(), Some(Err(Error::Truncated)));
        assert_eq!(
            ies(&[0x85, 0, 4, 1, 2, 3]).next(),
            Some(Err(Error::Truncated))
        );
        assert_eq!(ies(&[]).next(), None);
    }

    #[test]
    fn fuzz_vectors() {
        fuzz(&ECHO_REQ);
        fuzz(&ECHO_RESP);
        fuzz(&ERR_IND_V4);
        for n in 0..ERR_IND_V4.len() {
            fuzz(&ERR_IND_V4[..n]);
        }
        fuzz(&[0x30, 0xfe, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a]);
        fuzz(&[
            0x32, 0x02, 0x00, 0x08, 0, 0, 0, 0, 0, 1, 0, 0, 0x03, 0x00, 0x0e, 0x00,
        ]);
    }
}
