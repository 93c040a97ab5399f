//! Direct Telemetry Access (DTA) reports and ACK/NACKs (Langlet et al., "Direct Telemetry
//! Access", SIGCOMM 2023, section 4 and Figure 4), byte-compatible with the public DTA
//! prototype's headers.
//!
//! A report is Ethernet / IPv4 / UDP to port [`UDP_PORT`] / base header / one primitive
//! sub-header, all big-endian:
//!
//! ```text
//!  base (NACK-tracking, default, 3 B)   base (plain, 2 B)
//!  +--------+--------+-+-+------+       +--------+-+-------+
//!  | opcode | seqnum |I|R| rsvd |       | opcode |I| rsvd  |
//!  +--------+--------+-+-+------+       +--------+-+-------+
//!
//!  Key-Write (0x01)      redundancy u8 | key u32 | data u32 x K   (K = 1, 3 or 7)
//!  Append (0x02)         list id u32   | data u32
//!  Key-Increment (0x03)  redundancy u8 | key u32 | counter u64
//!  Postcarding (0x04)    key u32       | hop u8  | data u32
//!
//!  ACK/NACK (UDP 40044): seqnum u8 | N:1 reserved:7
//! ```
//!
//! `I` is "immediate" (tell the collector's CPU), `R` "retransmittable" (the translator
//! tracks the sequence number and NACKs a refused report). The sub-header must fill the UDP
//! payload exactly: trailing bytes are `Malformed`, never ignored.

use crate::{be32, put32, Error, Result};

#[cfg(test)]
mod tests;

/// UDP destination port of DTA reports (the prototype's `DTA_PORT_NUMBER`).
pub const UDP_PORT: u16 = 40040;
/// UDP port of ACK/NACKs back to the reporter (the prototype's `DTA_ACK_PORT_NUMBER`).
pub const ACK_UDP_PORT: u16 = 40044;
/// Largest Key-Write data vector (words).
pub const MAX_KW_WORDS: usize = 7;

/// Primitive opcodes (first byte of the base header).
pub mod opcode {
    pub const KEY_WRITE: u8 = 0x01;
    pub const APPEND: u8 = 0x02;
    pub const KEY_INCREMENT: u8 = 0x03;
    pub const POSTCARDING: u8 = 0x04;
}

const FLAG_IMMEDIATE: u8 = 0x80;
const FLAG_RETRANSMIT: u8 = 0x40;

/// Which base header the reporters use: the prototype compiles one or the other
/// (`DO_NACK_TRACKING`), and nothing on the wire tells them apart, so it is configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Variant {
    /// opcode, seqnum, flags (immediate:1, retransmittable:1, reserved:6): 3 bytes.
    #[default]
    Tracked,
    /// opcode, flags (immediate:1, reserved:7): 2 bytes.
    Plain,
}

impl Variant {
    /// Length of the base header.
    pub const fn base_len(self) -> usize {
        match self {
            Variant::Tracked => 3,
            Variant::Plain => 2,
        }
    }
}

/// Length of each primitive's sub-header (Key-Write with one data word).
pub mod sub_len {
    pub const KEY_WRITE_1: usize = 1 + 4 + 4;
    pub const APPEND: usize = 4 + 4;
    pub const KEY_INCREMENT: usize = 1 + 4 + 8;
    pub const POSTCARDING: usize = 4 + 1 + 4;
}

/// A read/write view of a DTA report (the UDP payload).
///
/// After [`Packet::new_checked`] the opcode is known and the buffer holds exactly its
/// sub-header (Key-Write: 1, 3 or 7 data words), so every accessor is in bounds.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
    variant: Variant,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T, variant: Variant) -> Packet<T> {
        Packet { buffer, variant }
    }

    /// Wrap and check: `Truncated` if shorter than the base header or the opcode's
    /// sub-header, `Unsupported` for an unknown opcode, `Malformed` for a length that is no
    /// sub-header's (trailing bytes, a Key-Write data vector other than 1, 3 or 7 words).
    pub fn new_checked(buffer: T, variant: Variant) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer, variant);
        p.check_len()?;
        Ok(p)
    }

    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        let base = self.variant.base_len();
        if buf.len() < base {
            return Err(Error::Truncated);
        }
        let sub = buf.len() - base;
        let want = match buf[0] {
            opcode::KEY_WRITE => {
                if sub < sub_len::KEY_WRITE_1 {
                    return Err(Error::Truncated);
                }
                return match (sub - 5) / 4 {
                    1 | 3 | 7 if (sub - 5).is_multiple_of(4) => Ok(()),
                    _ => Err(Error::Malformed),
                };
            }
            opcode::APPEND => sub_len::APPEND,
            opcode::KEY_INCREMENT => sub_len::KEY_INCREMENT,
            opcode::POSTCARDING => sub_len::POSTCARDING,
            _ => return Err(Error::Unsupported),
        };
        match sub.cmp(&want) {
            core::cmp::Ordering::Less => Err(Error::Truncated),
            core::cmp::Ordering::Greater => Err(Error::Malformed),
            core::cmp::Ordering::Equal => Ok(()),
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn variant(&self) -> Variant {
        self.variant
    }

    pub fn opcode(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    fn flags(&self) -> u8 {
        self.buffer.as_ref()[self.variant.base_len() - 1]
    }

    /// The sequence number (0 in the plain variant, which has none).
    pub fn seqnum(&self) -> u8 {
        match self.variant {
            Variant::Tracked => self.buffer.as_ref()[1],
            Variant::Plain => 0,
        }
    }

    pub fn immediate(&self) -> bool {
        self.flags() & FLAG_IMMEDIATE != 0
    }

    /// Retransmittable (always false in the plain variant).
    pub fn retransmittable(&self) -> bool {
        self.variant == Variant::Tracked && self.flags() & FLAG_RETRANSMIT != 0
    }

    /// The reserved flag bits (must be zero when sent; not checked on receipt, as the
    /// prototype does not).
    pub fn reserved(&self) -> u8 {
        match self.variant {
            Variant::Tracked => self.flags() & 0x3f,
            Variant::Plain => self.flags() & 0x7f,
        }
    }

    /// The primitive sub-header.
    pub fn sub(&self) -> &[u8] {
        &self.buffer.as_ref()[self.variant.base_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_seqnum(&mut self, v: u8) {
        if self.variant == Variant::Tracked {
            self.buffer.as_mut()[1] = v;
        }
    }

    pub fn sub_mut(&mut self) -> &mut [u8] {
        let b = self.variant.base_len();
        &mut self.buffer.as_mut()[b..]
    }
}

/// One primitive's operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Primitive {
    /// Write `data[..words]` under `key` into `redundancy` slots.
    KeyWrite {
        redundancy: u8,
        key: u32,
        words: u8,
        data: [u32; MAX_KW_WORDS],
    },
    /// Append `data` to list `list`.
    Append { list: u32, data: u32 },
    /// Add `counter` to `key`'s `redundancy` counters.
    KeyIncrement {
        redundancy: u8,
        key: u32,
        counter: u64,
    },
    /// Hop `hop`'s postcard `data` for flow/packet `key`.
    Postcard { key: u32, hop: u8, data: u32 },
}

impl Primitive {
    /// A Key-Write of `data` (1, 3 or 7 words; `Malformed` otherwise).
    pub fn key_write(redundancy: u8, key: u32, data: &[u32]) -> Result<Primitive> {
        if !matches!(data.len(), 1 | 3 | 7) {
            return Err(Error::Malformed);
        }
        let mut d = [0u32; MAX_KW_WORDS];
        d[..data.len()].copy_from_slice(data);
        Ok(Primitive::KeyWrite {
            redundancy,
            key,
            words: data.len() as u8,
            data: d,
        })
    }

    pub const fn opcode(&self) -> u8 {
        match self {
            Primitive::KeyWrite { .. } => opcode::KEY_WRITE,
            Primitive::Append { .. } => opcode::APPEND,
            Primitive::KeyIncrement { .. } => opcode::KEY_INCREMENT,
            Primitive::Postcard { .. } => opcode::POSTCARDING,
        }
    }

    /// Length of the sub-header.
    pub const fn sub_len(&self) -> usize {
        match self {
            Primitive::KeyWrite { words, .. } => 5 + 4 * *words as usize,
            Primitive::Append { .. } => sub_len::APPEND,
            Primitive::KeyIncrement { .. } => sub_len::KEY_INCREMENT,
            Primitive::Postcard { .. } => sub_len::POSTCARDING,
        }
    }
}

/// A report of one of the per-report common shapes, decoded straight from its bytes by
/// [`decode_fast`]: one-word Key-Write, Key-Increment, Append and Postcarding, the fields
/// as the sub-headers carry them (section 4, Figure 4 of the seed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fast {
    /// Key-Write with one data word.
    KeyWrite {
        redundancy: u8,
        key: u32,
        data: u32,
    },
    KeyIncrement {
        redundancy: u8,
        key: u32,
        counter: u64,
    },
    Append {
        list: u32,
        data: u32,
    },
    Postcard {
        key: u32,
        hop: u8,
        data: u32,
    },
}

impl Fast {
    /// `p` in [`decode_fast`]'s shape; a Key-Write keeps its first data word (its only one
    /// when [`decode_fast`] took the report).
    pub fn first_word(p: &Primitive) -> Fast {
        match *p {
            Primitive::KeyWrite {
                redundancy,
                key,
                data,
                ..
            } => Fast::KeyWrite {
                redundancy,
                key,
                data: data[0],
            },
            Primitive::KeyIncrement {
                redundancy,
                key,
                counter,
            } => Fast::KeyIncrement {
                redundancy,
                key,
                counter,
            },
            Primitive::Append { list, data } => Fast::Append { list, data },
            Primitive::Postcard { key, hop, data } => Fast::Postcard { key, hop, data },
        }
    }
}

/// The per-report common cases (one-word Key-Write, Key-Increment, Append, Postcarding)
/// decoded straight from the payload's bytes, `base` being the variant's
/// [`Variant::base_len`]: no `Packet` / `Repr` walk, and no 7-word Key-Write array built
/// and copied per report. `None` for anything else, which the caller parses in full
/// ([`Repr::parse`]); a payload taken here has exactly the length `Packet::check_len`
/// accepts for it, and the fields `Repr::parse` would give. The translator and the
/// benchmark's hash-map collector both decode with this (the same decode on both sides of
/// the comparison); inlined, so a caller's `match` on the result folds into the opcode
/// tests. Opcodes are tested one after another, Key-Write first, not by a jump table.
#[inline(always)]
pub fn decode_fast(payload: &[u8], base: usize) -> Option<Fast> {
    let op = *payload.first()?;
    let s = payload.get(base..)?;
    Some(if op == opcode::KEY_WRITE {
        let s: &[u8; sub_len::KEY_WRITE_1] = s.try_into().ok()?;
        Fast::KeyWrite {
            redundancy: s[0],
            key: be32(&s[1..5]),
            data: be32(&s[5..9]),
        }
    } else if op == opcode::KEY_INCREMENT {
        let s: &[u8; sub_len::KEY_INCREMENT] = s.try_into().ok()?;
        Fast::KeyIncrement {
            redundancy: s[0],
            key: be32(&s[1..5]),
            counter: u64::from(be32(&s[5..9])) << 32 | u64::from(be32(&s[9..13])),
        }
    } else if op == opcode::APPEND {
        let s: &[u8; sub_len::APPEND] = s.try_into().ok()?;
        Fast::Append {
            list: be32(&s[0..4]),
            data: be32(&s[4..8]),
        }
    } else if op == opcode::POSTCARDING {
        let s: &[u8; sub_len::POSTCARDING] = s.try_into().ok()?;
        Fast::Postcard {
            key: be32(&s[0..4]),
            hop: s[4],
            data: be32(&s[5..9]),
        }
    } else {
        return None;
    })
}

/// One-word Key-Write and Key-Increment, the per-report common case, decoded straight from
/// the payload's bytes as a translator's per-report path wants them (no `Packet` / `Repr`
/// walk; [`decode_fast`]), with the report's NACK sequence number if it is retransmittable.
/// `None` for anything else, which the caller parses in full ([`Repr::parse`]); a payload
/// taken here has exactly the length `Packet::check_len` accepts for it.
#[inline]
pub fn parse_one_word(payload: &[u8], variant: Variant) -> Option<(Primitive, Option<u8>)> {
    let prim = match decode_fast(payload, variant.base_len())? {
        Fast::KeyWrite {
            redundancy,
            key,
            data,
        } => Primitive::KeyWrite {
            redundancy,
            key,
            words: 1,
            data: [data, 0, 0, 0, 0, 0, 0],
        },
        Fast::KeyIncrement {
            redundancy,
            key,
            counter,
        } => Primitive::KeyIncrement {
            redundancy,
            key,
            counter,
        },
        _ => return None,
    };
    let p = Packet::new_unchecked(payload, variant);
    Some((prim, p.retransmittable().then(|| p.seqnum())))
}

/// A parsed report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub variant: Variant,
    /// Sequence number (ignored by the plain variant).
    pub seqnum: u8,
    pub immediate: bool,
    /// Retransmittable (the plain variant cannot carry it: emit refuses `true`).
    pub retransmittable: bool,
    pub primitive: Primitive,
}

impl Repr {
    /// A report of `variant` with sequence number 0 and no flag set (a reporter's usual
    /// report; set `seqnum` / `retransmittable` with struct update syntax).
    pub const fn new(variant: Variant, primitive: Primitive) -> Repr {
        Repr {
            variant,
            seqnum: 0,
            immediate: false,
            retransmittable: false,
            primitive,
        }
    }

    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        let s = p.sub();
        let primitive = match p.opcode() {
            opcode::KEY_WRITE => {
                let words = (s.len() - 5) / 4;
                let mut data = [0u32; MAX_KW_WORDS];
                for (i, d) in data.iter_mut().take(words).enumerate() {
                    *d = be32(&s[5 + 4 * i..]);
                }
                Primitive::KeyWrite {
                    redundancy: s[0],
                    key: be32(&s[1..]),
                    words: words as u8,
                    data,
                }
            }
            opcode::APPEND => Primitive::Append {
                list: be32(s),
                data: be32(&s[4..]),
            },
            opcode::KEY_INCREMENT => Primitive::KeyIncrement {
                redundancy: s[0],
                key: be32(&s[1..]),
                counter: u64::from_be_bytes([s[5], s[6], s[7], s[8], s[9], s[10], s[11], s[12]]),
            },
            opcode::POSTCARDING => Primitive::Postcard {
                key: be32(s),
                hop: s[4],
                data: be32(&s[5..]),
            },
            _ => return Err(Error::Unsupported),
        };
        Ok(Repr {
            variant: p.variant(),
            seqnum: p.seqnum(),
            immediate: p.immediate(),
            retransmittable: p.retransmittable(),
            primitive,
        })
    }

    /// Base header plus sub-header.
    pub const fn buffer_len(&self) -> usize {
        self.variant.base_len() + self.primitive.sub_len()
    }

    /// Write the report into the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let n = self.buffer_len();
        if buf.len() < n {
            return Err(Error::BufferTooSmall);
        }
        if self.retransmittable && self.variant == Variant::Plain {
            return Err(Error::Malformed);
        }
        let buf = &mut buf[..n];
        buf[0] = self.primitive.opcode();
        let mut flags = 0;
        if self.immediate {
            flags |= FLAG_IMMEDIATE;
        }
        if self.retransmittable {
            flags |= FLAG_RETRANSMIT;
        }
        let base = self.variant.base_len();
        if self.variant == Variant::Tracked {
            buf[1] = self.seqnum;
        }
        buf[base - 1] = flags;
        let s = &mut buf[base..];
        match self.primitive {
            Primitive::KeyWrite {
                redundancy,
                key,
                words,
                data,
            } => {
                if !matches!(words, 1 | 3 | 7) {
                    return Err(Error::Malformed);
                }
                s[0] = redundancy;
                put32(&mut s[1..], key);
                for (i, d) in data.iter().take(words as usize).enumerate() {
                    put32(&mut s[5 + 4 * i..], *d);
                }
            }
            Primitive::Append { list, data } => {
                put32(s, list);
                put32(&mut s[4..], data);
            }
            Primitive::KeyIncrement {
                redundancy,
                key,
                counter,
            } => {
                s[0] = redundancy;
                put32(&mut s[1..], key);
                s[5..13].copy_from_slice(&counter.to_be_bytes());
            }
            Primitive::Postcard { key, hop, data } => {
                put32(s, key);
                s[4] = hop;
                put32(&mut s[5..], data);
            }
        }
        Ok(n)
    }
}

/// An ACK/NACK (UDP [`ACK_UDP_PORT`]): the report's sequence number and the NACK bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckRepr {
    pub seqnum: u8,
    pub nack: bool,
}

/// Length of an ACK/NACK.
pub const ACK_LEN: usize = 2;

impl AckRepr {
    /// Parse an ACK/NACK payload: exactly [`ACK_LEN`] bytes (`Truncated` / `Malformed`).
    pub fn parse(b: &[u8]) -> Result<AckRepr> {
        match b.len() {
            n if n < ACK_LEN => Err(Error::Truncated),
            ACK_LEN => Ok(AckRepr {
                seqnum: b[0],
                nack: b[1] & 0x80 != 0,
            }),
            _ => Err(Error::Malformed),
        }
    }

    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.len() < ACK_LEN {
            return Err(Error::BufferTooSmall);
        }
        buf[0] = self.seqnum;
        buf[1] = if self.nack { 0x80 } else { 0 };
        Ok(ACK_LEN)
    }
}

/// Addresses of a whole report frame (Ethernet / IPv4 / UDP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameAddrs {
    pub eth_src: crate::ethernet::Address,
    pub eth_dst: crate::ethernet::Address,
    pub ip_src: core::net::Ipv4Addr,
    pub ip_dst: core::net::Ipv4Addr,
    pub src_port: u16,
    pub dst_port: u16,
}

/// Ethernet + IPv4 + UDP header length in front of a DTA payload.
pub const FRAME_OVERHEAD: usize =
    crate::ethernet::HEADER_LEN + crate::ipv4::HEADER_LEN + crate::udp::HEADER_LEN;

/// Write Ethernet / IPv4 / UDP headers (IPv4 and UDP checksums filled) around a payload of
/// `payload_len` bytes already at `buf[FRAME_OVERHEAD..]`; returns the frame length.
pub fn emit_frame(buf: &mut [u8], a: &FrameAddrs, payload_len: usize) -> Result<usize> {
    emit_frame_with(buf, a, payload_len, true)
}

/// [`emit_frame`], the UDP checksum filled only when `udp_checksum` (else 0: "none", as
/// RoCEv2 over IPv4 sends it, whose payload the ICRC covers).
pub fn emit_frame_with(
    buf: &mut [u8],
    a: &FrameAddrs,
    payload_len: usize,
    udp_checksum: bool,
) -> Result<usize> {
    use crate::{ethernet, ipv4, udp};
    let n = FRAME_OVERHEAD + payload_len;
    if buf.len() < n {
        return Err(Error::BufferTooSmall);
    }
    ethernet::Repr {
        src: a.eth_src,
        dst: a.eth_dst,
        ethertype: ethernet::ethertype::IPV4,
    }
    .emit(buf)?;
    let ip_at = ethernet::HEADER_LEN;
    let udp_at = ip_at + ipv4::HEADER_LEN;
    ipv4::Repr {
        src: a.ip_src,
        dst: a.ip_dst,
        protocol: ipv4::ip_protocol::UDP,
        payload_len: udp::HEADER_LEN + payload_len,
        ttl: 64,
        dscp_ecn: 0,
        ident: 0,
        dont_frag: true,
    }
    .emit(&mut buf[ip_at..])?;
    udp::Repr {
        src_port: a.src_port,
        dst_port: a.dst_port,
        payload_len,
    }
    .emit(&mut buf[udp_at..])?;
    let mut u = udp::Packet::new_unchecked(&mut buf[udp_at..n]);
    if udp_checksum {
        u.fill_checksum_v4(a.ip_src, a.ip_dst);
    } else {
        u.set_checksum(0);
    }
    Ok(n)
}

/// Fuzz entry: check, parse, re-emit, re-parse, in both variants; ACK parse. Never panics.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    for v in [Variant::Tracked, Variant::Plain] {
        let Ok(p) = Packet::new_checked(data, v) else {
            continue;
        };
        let _ = (p.seqnum(), p.immediate(), p.reserved(), p.sub().len());
        let r = Repr::parse(&p).expect("checked report parses");
        assert_eq!(r.buffer_len(), data.len());
        let mut out = [0u8; 64];
        let n = r.emit(&mut out).expect("fits");
        let q = Packet::new_checked(&out[..n], v).expect("emitted report checks");
        assert_eq!(Repr::parse(&q), Ok(r));
    }
    if let Ok(a) = AckRepr::parse(data) {
        let mut out = [0u8; ACK_LEN];
        a.emit(&mut out).expect("fits");
        assert_eq!(AckRepr::parse(&out), Ok(a));
    }
}
