//! One queue pair's request frames from a template: the Ethernet, IPv4 and UDP headers and
//! the BTH's fixed fields (P_Key, destination QP, AckReq) are built once; per frame only
//! the opcode, pad count, PSN, the two lengths, the IPv4 checksum (from the template's
//! partial sum, RFC 1071), the extended header, the data and the ICRC are written. The
//! frames are byte for byte those of [`emit_request`](super::emit_request) (tested), at a
//! fraction of its cost: a translator core makes one per report.
//!
//! The ICRC (A17.3.3) is computed in place: the 8 bytes of ones that stand for the absent
//! LRH go over the end of the Ethernet header, the variant fields are set to ones, one CRC
//! pass runs from there to the ICRC, and every byte is put back.

use super::{opcode, Bth, Request, ATOMIC_ETH_LEN, BTH_LEN, DEFAULT_PKEY, ICRC_LEN, RETH_LEN};
use crate::dta::{emit_frame_with, FrameAddrs, FRAME_OVERHEAD};
use crate::{checksum, ethernet, ipv4, Error, Result};

const IP: usize = ethernet::HEADER_LEN;
const UDP: usize = IP + ipv4::HEADER_LEN;
const BTH: usize = FRAME_OVERHEAD;
const EXT: usize = BTH + BTH_LEN;
/// Where the ICRC's pass starts: 8 bytes before the IPv4 header.
const CRC_FROM: usize = IP - 8;

/// Headers up to the BTH of one queue pair's requests.
#[derive(Debug, Clone)]
pub struct RequestTemplate {
    hdr: [u8; EXT],
    /// The IPv4 header's one's-complement sum with a total length of 0.
    ip_sum: u32,
    /// A fresh CRC-32 state: cloned per frame, so the CPU features are detected once.
    crc: crc32fast::Hasher,
}

impl RequestTemplate {
    /// Requests from `a` (UDP destination port forced to 4791) to the queue pair `dest_qp`,
    /// every one with AckReq set, as [`emit_request`](super::emit_request) makes them.
    pub fn new(a: &FrameAddrs, dest_qp: u32) -> Result<RequestTemplate> {
        let mut hdr = [0u8; EXT];
        let addrs = FrameAddrs {
            dst_port: super::UDP_PORT,
            ..*a
        };
        emit_frame_with(&mut hdr, &addrs, BTH_LEN, false)?;
        Bth {
            opcode: 0,
            solicited: false,
            pad_count: 0,
            pkey: DEFAULT_PKEY,
            dest_qp,
            ack_req: true,
            psn: 0,
        }
        .emit(&mut hdr[BTH..])?;
        hdr[IP + 2..IP + 4].fill(0);
        hdr[IP + 10..IP + 12].fill(0);
        hdr[UDP + 4..UDP + 6].fill(0);
        let ip_sum = checksum::sum(&hdr[IP..UDP]);
        Ok(RequestTemplate {
            hdr,
            ip_sum,
            crc: crc32fast::Hasher::new(),
        })
    }

    /// Write the whole frame of `req` with `psn` into `buf`; returns its length.
    /// `Malformed` for a PSN over 24 bits, `BufferTooSmall` if `buf` cannot hold it.
    #[inline]
    pub fn write(&self, buf: &mut [u8], psn: u32, req: &Request<'_>) -> Result<usize> {
        let (op, ext, data) = match req {
            Request::Write { data, .. } => (opcode::RC_RDMA_WRITE_ONLY, RETH_LEN, data.len()),
            Request::FetchAdd(_) => (opcode::RC_FETCH_ADD, ATOMIC_ETH_LEN, 0),
        };
        if psn > 0x00ff_ffff {
            return Err(Error::Malformed);
        }
        let pad = (4 - data % 4) % 4;
        let n = EXT + ext + data + pad + ICRC_LEN;
        let Some(f) = buf.get_mut(..n) else {
            return Err(Error::BufferTooSmall);
        };
        f[..EXT].copy_from_slice(&self.hdr);
        let ip_len = (n - IP) as u16;
        f[IP + 2..IP + 4].copy_from_slice(&ip_len.to_be_bytes());
        let csum = checksum::finish(checksum::combine(self.ip_sum, u32::from(ip_len)));
        f[IP + 10..IP + 12].copy_from_slice(&csum.to_be_bytes());
        f[UDP + 4..UDP + 6].copy_from_slice(&(ip_len - ipv4::HEADER_LEN as u16).to_be_bytes());
        f[BTH] = op;
        f[BTH + 1] = (pad as u8) << 4;
        let a = u32::from_be_bytes([f[BTH + 8], 0, 0, 0]) | psn;
        f[BTH + 8..BTH + 12].copy_from_slice(&a.to_be_bytes());
        match req {
            Request::Write { reth, data } => {
                reth.emit(&mut f[EXT..])?;
                if pad > 0 {
                    // Zeros under the data's last word: the pad (data is non-empty here).
                    f[n - ICRC_LEN - 4..n - ICRC_LEN].fill(0);
                }
                f[EXT + RETH_LEN..EXT + RETH_LEN + data.len()].copy_from_slice(data);
            }
            Request::FetchAdd(e) => e.emit(&mut f[EXT..])?,
        }
        fill_icrc(f, self.crc.clone());
        Ok(n)
    }
}

/// The ICRC of the whole frame `f` (Ethernet, IPv4 without options, UDP, BTH, ..., ICRC)
/// into its last 4 bytes, computed in place (every byte but the ICRC is left as it was);
/// `h` is a fresh CRC-32 state.
fn fill_icrc(f: &mut [u8], mut h: crc32fast::Hasher) {
    let n = f.len() - ICRC_LEN;
    let lrh: [u8; 8] = f[CRC_FROM..IP].try_into().expect("8 bytes");
    let kept = [
        f[IP + 1],
        f[IP + 8],
        f[IP + 10],
        f[IP + 11],
        f[UDP + 6],
        f[UDP + 7],
        f[BTH + 4],
    ];
    f[CRC_FROM..IP].fill(0xff);
    for at in [IP + 1, IP + 8, IP + 10, IP + 11, UDP + 6, UDP + 7, BTH + 4] {
        f[at] = 0xff;
    }
    h.update(&f[CRC_FROM..n]);
    let c = h.finalize();
    f[CRC_FROM..IP].copy_from_slice(&lrh);
    for (at, v) in [IP + 1, IP + 8, IP + 10, IP + 11, UDP + 6, UDP + 7, BTH + 4]
        .into_iter()
        .zip(kept)
    {
        f[at] = v;
    }
    f[n..].copy_from_slice(&c.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::super::{emit_request, verify_icrc_v4, AtomicEth, Reth};
    use super::*;
    use crate::ethernet::Address;
    use core::net::Ipv4Addr;

    fn addrs() -> FrameAddrs {
        FrameAddrs {
            eth_src: Address([2, 0, 0, 0, 0, 1]),
            eth_dst: Address([2, 0, 0, 0, 0, 0x99]),
            ip_src: Ipv4Addr::new(10, 0, 0, 1),
            ip_dst: Ipv4Addr::new(10, 0, 0, 99),
            src_port: 49152,
            dst_port: 40040,
        }
    }

    fn bth(op: u8, qp: u32, psn: u32) -> Bth {
        Bth {
            opcode: op,
            solicited: false,
            pad_count: 0,
            pkey: DEFAULT_PKEY,
            dest_qp: qp,
            ack_req: true,
            psn,
        }
    }

    /// Every data length a translator writes (and odd ones, padded), PSNs across the
    /// 24-bit range, both request kinds: the template's frame is `emit_request`'s.
    #[test]
    fn template_frames_equal_emit_request() {
        let a = addrs();
        let qp = 0x00ab_cdef;
        let t = RequestTemplate::new(&a, qp).unwrap();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let data: [u8; 256] = core::array::from_fn(|i| (i * 7 + 3) as u8);
        let (mut want, mut got) = ([0u8; 400], [0xa5u8; 400]);
        for len in (0..=256).chain([1, 2, 3, 5, 255]) {
            let psn = (next() as u32) & 0x00ff_ffff;
            let reth = Reth {
                va: next(),
                rkey: next() as u32,
                dma_len: len as u32,
            };
            let w = Request::Write {
                reth,
                data: &data[..len],
            };
            let m =
                emit_request(&mut want, &a, &bth(opcode::RC_RDMA_WRITE_ONLY, qp, psn), &w).unwrap();
            assert_eq!(t.write(&mut got, psn, &w), Ok(m), "len {len}");
            assert_eq!(want[..m], got[..m], "len {len}");
            assert!(verify_icrc_v4(&got[IP..m]));
        }
        for psn in [0, 1, 0x00ff_ffff, 0x0080_0000] {
            let f = Request::FetchAdd(AtomicEth {
                va: next(),
                rkey: next() as u32,
                swap_add: next(),
                compare: 0,
            });
            let m = emit_request(&mut want, &a, &bth(opcode::RC_FETCH_ADD, qp, psn), &f).unwrap();
            assert_eq!(t.write(&mut got, psn, &f), Ok(m));
            assert_eq!(want[..m], got[..m]);
        }
    }

    #[test]
    fn refusals() {
        let t = RequestTemplate::new(&addrs(), 1).unwrap();
        let w = Request::Write {
            reth: Reth {
                va: 0,
                rkey: 0,
                dma_len: 8,
            },
            data: &[0; 8],
        };
        let mut b = [0u8; 128];
        assert_eq!(t.write(&mut b, 1 << 24, &w), Err(Error::Malformed));
        assert_eq!(t.write(&mut b[..80], 0, &w), Err(Error::BufferTooSmall));
        assert!(RequestTemplate::new(&addrs(), 1 << 24).is_err());
    }
}
