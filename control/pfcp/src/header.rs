//! PFCP message header (TS 29.244 section 7.2.2).
//!
//! ```text
//! octet 1:      Version (3) = 1 | spare | spare | FO | MP | S     (section 7.2.2.1)
//! octet 2:      Message Type
//! octets 3-4:   Message Length: octets after the first 4 (SEID, sequence, IEs)
//! S = 1 (session messages, section 7.2.2.3):
//!   octets 5-12:  SEID
//!   octets 13-15: Sequence Number
//!   octet 16:     Message Priority (bits 8-5, when MP = 1) | spare
//! S = 0 (node messages, section 7.2.2.2):
//!   octets 5-7:   Sequence Number
//!   octet 8:      spare
//! ```

use crate::error::{DecodeError, EmitError};

/// The only PFCP version (section 7.2.2.1).
pub const VERSION: u8 = 1;

/// Bits of the flags octet (section 7.2.2.1).
pub mod flags {
    pub const VERSION_MASK: u8 = 0xe0;
    /// Follow On: another PFCP message follows in the same UDP datagram.
    pub const FO: u8 = 0x04;
    /// Message Priority present.
    pub const MP: u8 = 0x02;
    /// SEID present.
    pub const S: u8 = 0x01;
}

mod field {
    use core::ops::Range;
    pub const FLAGS: usize = 0;
    pub const MSG_TYPE: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const SEID: Range<usize> = 4..12;
    pub const SEQ_S1: Range<usize> = 12..15;
    pub const PRIO_S1: usize = 15;
    pub const SEQ_S0: Range<usize> = 4..7;
    pub const PRIO_S0: usize = 7;
}

/// Octets before the length field's count starts (section 7.2.2.1).
pub const FIXED_LEN: usize = field::LENGTH.end;
/// Header length of node messages (S = 0).
pub const NODE_HEADER_LEN: usize = field::PRIO_S0 + 1;
/// Header length of session messages (S = 1).
pub const SESSION_HEADER_LEN: usize = field::PRIO_S1 + 1;

/// A read-only view of a PFCP message.
///
/// After [`Header::new_checked`]: version 1; the header (8 or 16 octets depending on S) and
/// the whole message (4 + length field octets) fit the buffer. Bytes after the message (the
/// next message when FO is set) are ignored.
#[derive(Debug, Clone)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Wrap without checking; accessors may panic on short buffers.
    pub const fn new_unchecked(buffer: T) -> Header<T> {
        Header { buffer }
    }

    /// Wrap and validate (see [`Header::check_len`]).
    pub fn new_checked(buffer: T) -> Result<Header<T>, DecodeError> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// `Truncated` if the fixed 4 octets or the header do not fit; `UnsupportedVersion` if
    /// the version is not 1; `InvalidLength` if the length field is shorter than the header or
    /// the message does not fit the buffer.
    pub fn check_len(&self) -> Result<(), DecodeError> {
        let buf = self.buffer.as_ref();
        if buf.len() < FIXED_LEN {
            return Err(DecodeError::Truncated);
        }
        if self.version() != VERSION {
            return Err(DecodeError::UnsupportedVersion(self.version()));
        }
        if buf.len() < self.header_len() {
            return Err(DecodeError::Truncated);
        }
        let declared = self.total_len();
        if declared < self.header_len() || declared > buf.len() {
            return Err(DecodeError::InvalidLength {
                declared,
                available: buf.len(),
            });
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    pub fn version(&self) -> u8 {
        self.flags() >> 5
    }

    /// Follow On flag.
    pub fn fo_flag(&self) -> bool {
        self.flags() & flags::FO != 0
    }

    /// Message Priority flag.
    pub fn mp_flag(&self) -> bool {
        self.flags() & flags::MP != 0
    }

    /// SEID flag.
    pub fn s_flag(&self) -> bool {
        self.flags() & flags::S != 0
    }

    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::MSG_TYPE]
    }

    /// The length field: octets after the first 4.
    pub fn length(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::LENGTH];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Length of the whole message: 4 + the length field.
    pub fn total_len(&self) -> usize {
        FIXED_LEN + self.length() as usize
    }

    /// 8 for node messages, 16 for session messages.
    pub fn header_len(&self) -> usize {
        if self.s_flag() {
            SESSION_HEADER_LEN
        } else {
            NODE_HEADER_LEN
        }
    }

    /// SEID, if S is set.
    pub fn seid(&self) -> Option<u64> {
        self.s_flag().then(|| {
            let b = &self.buffer.as_ref()[field::SEID];
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_be_bytes(a)
        })
    }

    /// 24-bit sequence number.
    pub fn seq(&self) -> u32 {
        let r = if self.s_flag() {
            field::SEQ_S1
        } else {
            field::SEQ_S0
        };
        let b = &self.buffer.as_ref()[r];
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }

    /// Message priority (0 highest .. 15 lowest), if MP is set.
    pub fn priority(&self) -> Option<u8> {
        let at = if self.s_flag() {
            field::PRIO_S1
        } else {
            field::PRIO_S0
        };
        self.mp_flag().then(|| self.buffer.as_ref()[at] >> 4)
    }

    /// The IEs: octets between the header and the end of the message.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..self.total_len()]
    }
}

/// High-level header representation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub msg_type: u8,
    /// Follow On flag.
    pub fo: bool,
    /// SEID; `Some` sets the S flag (session messages).
    pub seid: Option<u64>,
    /// 24-bit sequence number.
    pub seq: u32,
    /// 4-bit message priority; `Some` sets the MP flag.
    pub priority: Option<u8>,
    /// Octets of IEs after the header.
    pub payload_len: usize,
}

impl Repr {
    /// Parse a checked header.
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Repr {
        Repr {
            msg_type: h.msg_type(),
            fo: h.fo_flag(),
            seid: h.seid(),
            seq: h.seq(),
            priority: h.priority(),
            payload_len: h.total_len() - h.header_len(),
        }
    }

    /// 8 or 16.
    pub fn header_len(&self) -> usize {
        if self.seid.is_some() {
            SESSION_HEADER_LEN
        } else {
            NODE_HEADER_LEN
        }
    }

    /// Header plus payload.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// Write the header into the front of `buf` (the payload is the caller's).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, EmitError> {
        let hl = self.header_len();
        if buf.len() < hl {
            return Err(EmitError::BufferTooSmall {
                needed: hl,
                available: buf.len(),
            });
        }
        if self.seq > 0x00ff_ffff {
            return Err(EmitError::FieldRange("sequence number"));
        }
        let length =
            u16::try_from(self.buffer_len() - FIXED_LEN).map_err(|_| EmitError::MessageTooLong)?;
        let mut f = VERSION << 5;
        if self.fo {
            f |= flags::FO;
        }
        if self.seid.is_some() {
            f |= flags::S;
        }
        let prio = match self.priority {
            Some(p) if p > 0x0f => return Err(EmitError::FieldRange("message priority")),
            Some(p) => {
                f |= flags::MP;
                p << 4
            }
            None => 0,
        };
        buf[field::FLAGS] = f;
        buf[field::MSG_TYPE] = self.msg_type;
        buf[field::LENGTH].copy_from_slice(&length.to_be_bytes());
        let seq = &self.seq.to_be_bytes()[1..];
        match self.seid {
            Some(seid) => {
                buf[field::SEID].copy_from_slice(&seid.to_be_bytes());
                buf[field::SEQ_S1].copy_from_slice(seq);
                buf[field::PRIO_S1] = prio;
            }
            None => {
                buf[field::SEQ_S0].copy_from_slice(seq);
                buf[field::PRIO_S0] = prio;
            }
        }
        Ok(hl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_header_round_trip() {
        let r = Repr {
            msg_type: 1,
            fo: false,
            seid: None,
            seq: 0x123456,
            priority: None,
            payload_len: 8,
        };
        let mut b = [0u8; 16];
        assert_eq!(r.emit(&mut b).unwrap(), 8);
        assert_eq!(&b[..8], &[0x20, 1, 0, 12, 0x12, 0x34, 0x56, 0]);
        let h = Header::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&h), r);
    }

    #[test]
    fn session_header_round_trip() {
        let r = Repr {
            msg_type: 50,
            fo: true,
            seid: Some(0x0102030405060708),
            seq: 7,
            priority: Some(3),
            payload_len: 0,
        };
        let mut b = [0u8; 16];
        r.emit(&mut b).unwrap();
        assert_eq!(b[0], 0x27);
        assert_eq!(&b[2..4], &[0, 12]);
        assert_eq!(b[15], 0x30);
        let h = Header::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&h), r);
    }

    #[test]
    fn bad_headers() {
        assert_eq!(
            Header::new_checked(&[0x20u8, 1, 0][..]).unwrap_err(),
            DecodeError::Truncated
        );
        assert_eq!(
            Header::new_checked(&[0x40u8, 1, 0, 4, 0, 0, 0, 0][..]).unwrap_err(),
            DecodeError::UnsupportedVersion(2)
        );
        assert!(matches!(
            Header::new_checked(&[0x20u8, 1, 0, 9, 0, 0, 0, 0][..]).unwrap_err(),
            DecodeError::InvalidLength { .. }
        ));
        assert!(matches!(
            Header::new_checked(&[0x20u8, 1, 0, 3, 0, 0, 0, 0][..]).unwrap_err(),
            DecodeError::InvalidLength { .. }
        ));
        assert_eq!(
            Header::new_checked(&[0x21u8, 50, 0, 12, 0, 0, 0, 0][..]).unwrap_err(),
            DecodeError::Truncated
        );
        let r = Repr {
            msg_type: 1,
            fo: false,
            seid: None,
            seq: 1 << 24,
            priority: None,
            payload_len: 0,
        };
        assert!(r.emit(&mut [0u8; 8]).is_err());
    }
}
