//! RoCEv2 (InfiniBand Architecture Specification Vol. 1, Annex A17 "RoCEv2"): the Base
//! Transport Header, RDMA and Atomic extended headers, the ACK extended header and the
//! invariant CRC, as the DTA translator's RDMA output needs them (RC RDMA WRITE Only, RC
//! FETCH_ADD, and the responder's ACK / NAK).
//!
//! ```text
//!  BTH (12)  opcode | SE M Pad(2) TVer(4) | P_Key(16) | F B resv6 | DestQP(24) | A resv7 | PSN(24)
//!  RETH (16) virtual address u64 | R_Key u32 | DMA length u32
//!  AtomicETH (28) virtual address u64 | R_Key u32 | swap/add data u64 | compare data u64
//!  AETH (4)  syndrome u8 | MSN(24)
//! ```
//!
//! The ICRC (A17.3.3) is CRC-32 over 8 bytes of ones (the absent LRH), the IPv4 header with
//! TOS, TTL and checksum set to ones, the UDP header with the checksum set to ones, the BTH
//! with its byte 4 (F, B, resv6) set to ones, and the rest up to the ICRC; it is sent least
//! significant byte first.

use crate::{be32, put32, Error, Result};

mod template;
pub use template::RequestTemplate;

/// UDP destination port of RoCEv2.
pub const UDP_PORT: u16 = 4791;
pub const BTH_LEN: usize = 12;
pub const RETH_LEN: usize = 16;
pub const ATOMIC_ETH_LEN: usize = 28;
pub const AETH_LEN: usize = 4;
pub const ICRC_LEN: usize = 4;
/// The default partition key.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// Reliable Connection opcodes used here (IBA Table 38).
pub mod opcode {
    pub const RC_RDMA_WRITE_ONLY: u8 = 0x0a;
    pub const RC_ACK: u8 = 0x11;
    pub const RC_ATOMIC_ACK: u8 = 0x12;
    pub const RC_FETCH_ADD: u8 = 0x14;
}

/// A Base Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bth {
    pub opcode: u8,
    pub solicited: bool,
    pub pad_count: u8,
    pub pkey: u16,
    pub dest_qp: u32,
    pub ack_req: bool,
    pub psn: u32,
}

impl Bth {
    pub fn parse(b: &[u8]) -> Result<Bth> {
        if b.len() < BTH_LEN {
            return Err(Error::Truncated);
        }
        if b[1] & 0x0f != 0 {
            return Err(Error::Unsupported); // transport header version 0 only
        }
        Ok(Bth {
            opcode: b[0],
            solicited: b[1] & 0x80 != 0,
            pad_count: (b[1] >> 4) & 3,
            pkey: u16::from_be_bytes([b[2], b[3]]),
            dest_qp: be32(&b[4..]) & 0x00ff_ffff,
            ack_req: b[8] & 0x80 != 0,
            psn: be32(&b[8..]) & 0x00ff_ffff,
        })
    }

    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        if b.len() < BTH_LEN {
            return Err(Error::BufferTooSmall);
        }
        if self.dest_qp > 0x00ff_ffff || self.psn > 0x00ff_ffff || self.pad_count > 3 {
            return Err(Error::Malformed);
        }
        b[0] = self.opcode;
        b[1] = (self.solicited as u8) << 7 | self.pad_count << 4;
        b[2..4].copy_from_slice(&self.pkey.to_be_bytes());
        put32(&mut b[4..], self.dest_qp);
        put32(&mut b[8..], (self.ack_req as u32) << 31 | self.psn);
        Ok(())
    }
}

/// An RDMA Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reth {
    pub va: u64,
    pub rkey: u32,
    pub dma_len: u32,
}

impl Reth {
    pub fn parse(b: &[u8]) -> Result<Reth> {
        if b.len() < RETH_LEN {
            return Err(Error::Truncated);
        }
        Ok(Reth {
            va: u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            rkey: be32(&b[8..]),
            dma_len: be32(&b[12..]),
        })
    }

    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        if b.len() < RETH_LEN {
            return Err(Error::BufferTooSmall);
        }
        b[..8].copy_from_slice(&self.va.to_be_bytes());
        put32(&mut b[8..], self.rkey);
        put32(&mut b[12..], self.dma_len);
        Ok(())
    }
}

/// An Atomic Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicEth {
    pub va: u64,
    pub rkey: u32,
    pub swap_add: u64,
    pub compare: u64,
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

impl AtomicEth {
    pub fn parse(b: &[u8]) -> Result<AtomicEth> {
        if b.len() < ATOMIC_ETH_LEN {
            return Err(Error::Truncated);
        }
        Ok(AtomicEth {
            va: be64(b),
            rkey: be32(&b[8..]),
            swap_add: be64(&b[12..]),
            compare: be64(&b[20..]),
        })
    }

    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        if b.len() < ATOMIC_ETH_LEN {
            return Err(Error::BufferTooSmall);
        }
        b[..8].copy_from_slice(&self.va.to_be_bytes());
        put32(&mut b[8..], self.rkey);
        b[12..20].copy_from_slice(&self.swap_add.to_be_bytes());
        b[20..28].copy_from_slice(&self.compare.to_be_bytes());
        Ok(())
    }
}

/// An ACK Extended Transport Header: syndrome and message sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aeth {
    pub syndrome: u8,
    pub msn: u32,
}

impl Aeth {
    pub fn parse(b: &[u8]) -> Result<Aeth> {
        if b.len() < AETH_LEN {
            return Err(Error::Truncated);
        }
        Ok(Aeth {
            syndrome: b[0],
            msn: be32(b) & 0x00ff_ffff,
        })
    }

    pub fn emit(&self, b: &mut [u8]) -> Result<()> {
        if b.len() < AETH_LEN {
            return Err(Error::BufferTooSmall);
        }
        put32(b, (self.syndrome as u32) << 24 | (self.msn & 0x00ff_ffff));
        Ok(())
    }

    /// A NAK (syndrome bits 6..5 = 11, IBA 9.7.5.2.2).
    pub const fn is_nak(&self) -> bool {
        self.syndrome & 0x60 == 0x60
    }

    /// A PSN sequence error NAK (NAK code 0): the responder expects the ACK's PSN next.
    pub const fn is_psn_sequence_error(&self) -> bool {
        self.is_nak() && self.syndrome & 0x1f == 0
    }
}

/// The ICRC of a RoCEv2-over-IPv4 packet: `ip` holds the IPv4 header, UDP header, BTH and
/// everything up to (not including) the ICRC. `Truncated` if shorter than those headers.
pub fn icrc_v4(ip: &[u8]) -> Result<u32> {
    let ihl = match ip.first() {
        Some(v) => ((v & 0x0f) as usize) * 4,
        None => return Err(Error::Truncated),
    };
    if ihl < 20 || ip.len() < ihl + 8 + BTH_LEN {
        return Err(Error::Truncated);
    }
    // One CRC pass over a masked copy (the common, short case): a single `update` takes
    // crc32fast's folding path, where five short ones would each take its byte loop.
    let mut m = [0u8; 8 + 128];
    let short = ip.len() <= 128;
    let end = if short {
        8 + ip.len()
    } else {
        8 + ihl + 8 + BTH_LEN
    };
    m[..8].fill(0xff);
    m[8..end].copy_from_slice(&ip[..end - 8]);
    m[8 + 1] = 0xff; // TOS
    m[8 + 8] = 0xff; // TTL
    m[8 + 10] = 0xff; // header checksum
    m[8 + 11] = 0xff;
    m[8 + ihl + 6] = 0xff; // UDP checksum
    m[8 + ihl + 7] = 0xff;
    m[8 + ihl + 8 + 4] = 0xff; // BTH F, B, resv6
    let mut h = crc32fast::Hasher::new();
    h.update(&m[..end]);
    if !short {
        h.update(&ip[ihl + 8 + BTH_LEN..]);
    }
    Ok(h.finalize())
}

/// Fill the last [`ICRC_LEN`] bytes of `ip` (IPv4 header to ICRC) with the ICRC.
pub fn fill_icrc_v4(ip: &mut [u8]) -> Result<()> {
    let n = ip.len().checked_sub(ICRC_LEN).ok_or(Error::Truncated)?;
    let c = icrc_v4(&ip[..n])?;
    ip[n..].copy_from_slice(&c.to_le_bytes());
    Ok(())
}

/// Whether the ICRC at the end of `ip` verifies.
pub fn verify_icrc_v4(ip: &[u8]) -> bool {
    let Some(n) = ip.len().checked_sub(ICRC_LEN) else {
        return false;
    };
    icrc_v4(&ip[..n]).is_ok_and(|c| c.to_le_bytes() == ip[n..])
}

/// Fuzz entry: parse every header at the start of `data`, re-emit, check the ICRC paths.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub fn fuzz(data: &[u8]) {
    let mut out = [0u8; 32];
    if let Ok(b) = Bth::parse(data) {
        b.emit(&mut out).expect("parsed BTH re-emits");
        assert_eq!(Bth::parse(&out), Ok(b));
    }
    if let Ok(r) = Reth::parse(data) {
        r.emit(&mut out).expect("fits");
        assert_eq!(Reth::parse(&out), Ok(r));
    }
    if let Ok(a) = AtomicEth::parse(data) {
        a.emit(&mut out).expect("fits");
        assert_eq!(AtomicEth::parse(&out), Ok(a));
    }
    if let Ok(a) = Aeth::parse(data) {
        a.emit(&mut out).expect("fits");
        assert_eq!(Aeth::parse(&out), Ok(a));
    }
    let _ = icrc_v4(data);
    let _ = verify_icrc_v4(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bth_vector() {
        // FETCH_ADD to QP 0x000123, PSN 0x00abcd, ack requested, default P_Key.
        let b = Bth {
            opcode: opcode::RC_FETCH_ADD,
            solicited: false,
            pad_count: 0,
            pkey: DEFAULT_PKEY,
            dest_qp: 0x123,
            ack_req: true,
            psn: 0xabcd,
        };
        let mut out = [0u8; BTH_LEN];
        b.emit(&mut out).unwrap();
        assert_eq!(
            out,
            [0x14, 0x00, 0xff, 0xff, 0x00, 0x00, 0x01, 0x23, 0x80, 0x00, 0xab, 0xcd]
        );
        assert_eq!(Bth::parse(&out), Ok(b));
        assert_eq!(Bth::parse(&out[..11]), Err(Error::Truncated));
    }

    #[test]
    fn aeth_nak_codes() {
        let a = Aeth::parse(&[0x60, 0, 0, 5]).unwrap();
        assert!(a.is_nak() && a.is_psn_sequence_error());
        assert!(!Aeth::parse(&[0x00, 0, 0, 5]).unwrap().is_nak());
        assert!(!Aeth::parse(&[0x61, 0, 0, 5])
            .unwrap()
            .is_psn_sequence_error());
    }

    #[test]
    fn fuzz_short_inputs() {
        for n in 0..40 {
            fuzz(&[0x45u8; 40][..n]);
        }
    }
}

/// The extended header (and data) after the BTH of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    /// RDMA WRITE Only: RETH, then `data` padded to 4 bytes.
    Write { reth: Reth, data: &'a [u8] },
    /// FETCH_ADD: AtomicETH.
    FetchAdd(AtomicEth),
}

/// Write a whole RoCEv2 request frame (Ethernet / IPv4 / UDP to 4791 / BTH / RETH or
/// AtomicETH / data / ICRC) into `buf`; the UDP checksum is 0 (allowed for RoCEv2 over
/// IPv4, A17.4.1), the BTH pad count follows the data. Returns the frame length.
pub fn emit_request(
    buf: &mut [u8],
    a: &crate::dta::FrameAddrs,
    bth: &Bth,
    req: &Request<'_>,
) -> Result<usize> {
    let at = crate::dta::FRAME_OVERHEAD;
    let (ext, data) = match req {
        Request::Write { data, .. } => (RETH_LEN, data.len()),
        Request::FetchAdd(_) => (ATOMIC_ETH_LEN, 0),
    };
    let pad = (4 - data % 4) % 4;
    let roce_len = BTH_LEN + ext + data + pad + ICRC_LEN;
    if buf.len() < at + roce_len {
        return Err(Error::BufferTooSmall);
    }
    let mut b = *bth;
    b.pad_count = pad as u8;
    b.emit(&mut buf[at..])?;
    let x = at + BTH_LEN;
    match req {
        Request::Write { reth, data } => {
            reth.emit(&mut buf[x..])?;
            buf[x + RETH_LEN..x + RETH_LEN + data.len()].copy_from_slice(data);
            buf[x + RETH_LEN + data.len()..x + RETH_LEN + data.len() + pad].fill(0);
        }
        Request::FetchAdd(e) => e.emit(&mut buf[x..])?,
    }
    let addrs = crate::dta::FrameAddrs {
        dst_port: UDP_PORT,
        ..*a
    };
    let n = crate::dta::emit_frame_with(buf, &addrs, roce_len, false)?;
    fill_icrc_v4(&mut buf[crate::ethernet::HEADER_LEN..n])?;
    Ok(n)
}
