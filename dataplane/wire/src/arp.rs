//! ARP for IPv4 over Ethernet (RFC 826).
//!
//! Only the Ethernet/IPv4 combination is represented: [`Packet::new_checked`] rejects other
//! hardware or protocol types as `Unsupported` and other address lengths as `Malformed`, so
//! every address accessor after it is at a fixed offset and in bounds.

use crate::ethernet::{ethertype, Address};
use crate::{be16, put16, Error, Result};
use core::net::Ipv4Addr;

/// `ar$hrd` for Ethernet (IANA ARP parameters).
pub const HTYPE_ETHERNET: u16 = 1;
/// `ar$pro` for IPv4: the IPv4 EtherType.
pub const PTYPE_IPV4: u16 = ethertype::IPV4;

mod field {
    use core::ops::Range;
    pub const HTYPE: Range<usize> = 0..2;
    pub const PTYPE: Range<usize> = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Range<usize> = 6..8;
    pub const SHA: Range<usize> = 8..14;
    pub const SPA: Range<usize> = 14..18;
    pub const THA: Range<usize> = 18..24;
    pub const TPA: Range<usize> = 24..28;
}

/// Length of the fixed part common to all ARP packets (up to and including `ar$op`).
const FIXED_LEN: usize = 8;
/// Length of an Ethernet/IPv4 ARP packet.
pub const HEADER_LEN: usize = field::TPA.end;

/// `ar$op` (RFC 826; values beyond 2 from the IANA registry are not handled here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Request,
    Reply,
    Unknown(u16),
}

impl From<u16> for Operation {
    fn from(v: u16) -> Self {
        match v {
            1 => Operation::Request,
            2 => Operation::Reply,
            v => Operation::Unknown(v),
        }
    }
}

impl From<Operation> for u16 {
    fn from(op: Operation) -> u16 {
        match op {
            Operation::Request => 1,
            Operation::Reply => 2,
            Operation::Unknown(v) => v,
        }
    }
}

/// A read/write view of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap without checking; accessors may panic on short buffers. Prefer
    /// [`Packet::new_checked`].
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap and validate: Ethernet/IPv4 types and lengths, all 28 bytes present. Trailing
    /// bytes (Ethernet padding) are allowed.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < FIXED_LEN {
            return Err(Error::Truncated);
        }
        if self.hardware_type() != HTYPE_ETHERNET || self.protocol_type() != PTYPE_IPV4 {
            return Err(Error::Unsupported);
        }
        if self.hardware_len() != 6 || self.protocol_len() != 4 {
            return Err(Error::Malformed);
        }
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn hardware_type(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::HTYPE])
    }

    pub fn protocol_type(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::PTYPE])
    }

    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    pub fn operation(&self) -> Operation {
        be16(&self.buffer.as_ref()[field::OPER]).into()
    }

    pub fn sender_hardware_addr(&self) -> Address {
        mac(&self.buffer.as_ref()[field::SHA])
    }

    pub fn sender_protocol_addr(&self) -> Ipv4Addr {
        ip(&self.buffer.as_ref()[field::SPA])
    }

    pub fn target_hardware_addr(&self) -> Address {
        mac(&self.buffer.as_ref()[field::THA])
    }

    pub fn target_protocol_addr(&self) -> Ipv4Addr {
        ip(&self.buffer.as_ref()[field::TPA])
    }
}

fn mac(b: &[u8]) -> Address {
    let mut a = [0u8; 6];
    a.copy_from_slice(&b[..6]);
    Address(a)
}

fn ip(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_hardware_type(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::HTYPE], v);
    }

    pub fn set_protocol_type(&mut self, v: u16) {
        put16(&mut self.buffer.as_mut()[field::PTYPE], v);
    }

    pub fn set_hardware_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::HLEN] = v;
    }

    pub fn set_protocol_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::PLEN] = v;
    }

    pub fn set_operation(&mut self, op: Operation) {
        put16(&mut self.buffer.as_mut()[field::OPER], op.into());
    }

    pub fn set_sender_hardware_addr(&mut self, a: Address) {
        self.buffer.as_mut()[field::SHA].copy_from_slice(&a.0);
    }

    pub fn set_sender_protocol_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SPA].copy_from_slice(&a.octets());
    }

    pub fn set_target_hardware_addr(&mut self, a: Address) {
        self.buffer.as_mut()[field::THA].copy_from_slice(&a.0);
    }

    pub fn set_target_protocol_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::TPA].copy_from_slice(&a.octets());
    }
}

/// High-level representation of an Ethernet/IPv4 ARP request or reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub operation: Operation,
    pub sender_hardware_addr: Address,
    pub sender_protocol_addr: Ipv4Addr,
    pub target_hardware_addr: Address,
    pub target_protocol_addr: Ipv4Addr,
}

impl Repr {
    /// Parse a checked packet. Operations other than request and reply (RARP, InARP) are
    /// `Error::Unsupported`.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        let operation = packet.operation();
        if let Operation::Unknown(_) = operation {
            return Err(Error::Unsupported);
        }
        Ok(Repr {
            operation,
            sender_hardware_addr: packet.sender_hardware_addr(),
            sender_protocol_addr: packet.sender_protocol_addr(),
            target_hardware_addr: packet.target_hardware_addr(),
            target_protocol_addr: packet.target_protocol_addr(),
        })
    }

    /// The reply a host owning `target_protocol_addr` with MAC `our_mac` sends to this request
    /// (RFC 826, "Packet Reception"). `None` if this is not a request.
    pub fn reply(&self, our_mac: Address) -> Option<Repr> {
        (self.operation == Operation::Request).then_some(Repr {
            operation: Operation::Reply,
            sender_hardware_addr: our_mac,
            sender_protocol_addr: self.target_protocol_addr,
            target_hardware_addr: self.sender_hardware_addr,
            target_protocol_addr: self.sender_protocol_addr,
        })
    }

    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the 28-byte packet into the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        if buf.len() < HEADER_LEN {
            return Err(Error::BufferTooSmall);
        }
        let mut p = Packet::new_unchecked(buf);
        p.set_hardware_type(HTYPE_ETHERNET);
        p.set_protocol_type(PTYPE_IPV4);
        p.set_hardware_len(6);
        p.set_protocol_len(4);
        p.set_operation(self.operation);
        p.set_sender_hardware_addr(self.sender_hardware_addr);
        p.set_sender_protocol_addr(self.sender_protocol_addr);
        p.set_target_hardware_addr(self.target_hardware_addr);
        p.set_target_protocol_addr(self.target_protocol_addr);
        Ok(())
    }
}

/// Fuzz entry: check, read every field, parse, emit, re-parse. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let Ok(p) = Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.operation(),
        p.sender_hardware_addr(),
        p.sender_protocol_addr(),
    );
    let _ = (p.target_hardware_addr(), p.target_protocol_addr());
    if let Ok(r) = Repr::parse(&p) {
        let mut out = [0u8; HEADER_LEN];
        r.emit(&mut out).expect("fits");
        assert_eq!(&out[..], &data[..HEADER_LEN]);
        assert_eq!(
            Repr::parse(&Packet::new_checked(&out[..]).expect("checks")),
            Ok(r)
        );
        let _ = r.reply(Address::BROADCAST);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A guest on QEMU user networking, 52:54:00:12:34:56 (10.0.2.15), asks who has the
    // gateway 10.0.2.2 (built by hand from RFC 826's layout, QEMU's default addresses).
    // Padded to the 46-byte Ethernet minimum payload.
    static REQUEST: [u8; 46] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x0a,
        0x00, 0x02, 0x0f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x00, 0x02, 0x02, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    const GUEST: Address = Address([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
    const GATEWAY: Address = Address([0x52, 0x55, 0x0a, 0x00, 0x02, 0x02]);

    #[test]
    fn parse_request() {
        let p = Packet::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(p.operation(), Operation::Request);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Repr {
                operation: Operation::Request,
                sender_hardware_addr: GUEST,
                sender_protocol_addr: Ipv4Addr::new(10, 0, 2, 15),
                target_hardware_addr: Address([0; 6]),
                target_protocol_addr: Ipv4Addr::new(10, 0, 2, 2),
            }
        );
    }

    #[test]
    fn emit_roundtrip_and_reply() {
        let r = Repr::parse(&Packet::new_checked(&REQUEST[..]).unwrap()).unwrap();
        let mut buf = [0u8; 28];
        r.emit(&mut buf).unwrap();
        assert_eq!(&buf, &REQUEST[..28]);
        assert_eq!(r.emit(&mut [0u8; 27]), Err(Error::BufferTooSmall));

        let reply = r.reply(GATEWAY).unwrap();
        reply.emit(&mut buf).unwrap();
        assert_eq!(
            &buf,
            &[
                0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02, 0x52, 0x55, 0x0a, 0x00, 0x02, 0x02,
                0x0a, 0x00, 0x02, 0x02, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x0a, 0x00, 0x02, 0x0f
            ]
        );
        assert_eq!(reply.reply(GATEWAY), None);
    }

    #[test]
    fn rejects_other_types() {
        assert_eq!(
            Packet::new_checked(&REQUEST[..7]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&REQUEST[..27]).unwrap_err(),
            Error::Truncated
        );
        let mut d = REQUEST;
        d[1] = 6; // IEEE 802 hardware
        assert_eq!(Packet::new_checked(&d[..]).unwrap_err(), Error::Unsupported);
        let mut d = REQUEST;
        d[2..4].copy_from_slice(&[0x86, 0xdd]);
        assert_eq!(Packet::new_checked(&d[..]).unwrap_err(), Error::Unsupported);
        let mut d = REQUEST;
        d[4] = 8;
        assert_eq!(Packet::new_checked(&d[..]).unwrap_err(), Error::Malformed);
        let mut d = REQUEST;
        d[5] = 16;
        assert_eq!(Packet::new_checked(&d[..]).unwrap_err(), Error::Malformed);
        let mut d = REQUEST;
        d[7] = 3; // RARP request
        let p = Packet::new_checked(&d[..]).unwrap();
        assert_eq!(p.operation(), Operation::Unknown(3));
        assert_eq!(Repr::parse(&p), Err(Error::Unsupported));
    }

    #[test]
    fn fuzz_smoke() {
        for n in 0..=REQUEST.len() {
            fuzz(&REQUEST[..n]);
        }
    }
}
