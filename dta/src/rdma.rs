//! The translator's RoCEv2 output mode (seed section 5.2), I/O-free: instead of storing
//! into a mapped region, a Key-Write becomes N RDMA WRITE Only requests and a
//! Key-Increment N FETCH_ADDs toward a collector's RDMA NIC, at the addresses the same
//! layout gives (`collector base VA + section offset + slot x slot size`), with one PSN
//! sequence per queue pair and resynchronisation when the responder NAKs a PSN sequence
//! error. The frames are handed to the caller (the pipeline sends them).
//!
//! Only K = 1 Key-Write slots (8 bytes: checksum then data, little-endian as the collector
//! reads them) and Key-Increment counters are emitted here; Append and Postcarding chunks
//! would be WRITEs of their batch / chunk bytes in the same way.

use crate::hash;
use crate::layout::Layout;
use crate::Refusal;
use peregrine_wire::dta::FrameAddrs;
use peregrine_wire::roce::{self, opcode, Aeth, AtomicEth, Bth, Request, Reth};

/// What the collector advertises for its registered region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub qp: u32,
    pub rkey: u32,
    /// Virtual address of the region's first byte (its header).
    pub base_va: u64,
}

/// One queue pair's requester state.
#[derive(Debug, Clone)]
pub struct Qp {
    t: Target,
    l: Layout,
    addrs: FrameAddrs,
    /// The next PSN to send.
    psn: u32,
    /// NAKs that moved our PSN.
    pub resyncs: u64,
}

/// Frames are at most this long (headers, AtomicETH or RETH with 8 bytes, ICRC).
pub const MAX_FRAME: usize = 128;

impl Qp {
    pub fn new(t: Target, l: Layout, addrs: FrameAddrs, first_psn: u32) -> Qp {
        Qp {
            t,
            l,
            addrs,
            psn: first_psn & 0x00ff_ffff,
            resyncs: 0,
        }
    }

    pub fn psn(&self) -> u32 {
        self.psn
    }

    fn bth(&mut self, op: u8) -> Bth {
        let b = Bth {
            opcode: op,
            solicited: false,
            pad_count: 0,
            pkey: roce::DEFAULT_PKEY,
            dest_qp: self.t.qp,
            ack_req: true,
            psn: self.psn,
        };
        self.psn = (self.psn + 1) & 0x00ff_ffff;
        b
    }

    /// The N WRITE requests of a Key-Write, each passed to `send` as a whole frame.
    pub fn key_write(
        &mut self,
        redundancy: u8,
        key: u32,
        data: u32,
        mut send: impl FnMut(&[u8]),
    ) -> Result<u32, Refusal> {
        let s = self.l.sizes;
        if s.kw_slots == 0 || s.kw_words != 1 {
            return Err(Refusal::PrimitiveDisabled);
        }
        if redundancy == 0 {
            return Err(Refusal::RedundancyZero);
        }
        if redundancy as u32 > s.kw_max_redundancy {
            return Err(Refusal::RedundancyTooHigh);
        }
        let csum = hash::kw_checksum(key, s.kw_checksum_bits);
        let mut slot = [0u8; 8];
        slot[..4].copy_from_slice(&csum.to_le_bytes());
        slot[4..].copy_from_slice(&data.to_le_bytes());
        let mut buf = [0u8; MAX_FRAME];
        for n in 0..redundancy {
            let va = self.t.base_va + self.l.kw_offset + 8 * hash::slot(key, n, s.kw_slots);
            let bth = self.bth(opcode::RC_RDMA_WRITE_ONLY);
            let req = Request::Write {
                reth: Reth {
                    va,
                    rkey: self.t.rkey,
                    dma_len: 8,
                },
                data: &slot,
            };
            let len = roce::emit_request(&mut buf, &self.addrs, &bth, &req)
                .map_err(|_| Refusal::Malformed)?;
            send(&buf[..len]);
        }
        Ok(redundancy as u32)
    }

    /// The N FETCH_ADD requests of a Key-Increment.
    pub fn key_increment(
        &mut self,
        redundancy: u8,
        key: u32,
        counter: u64,
        mut send: impl FnMut(&[u8]),
    ) -> Result<u32, Refusal> {
        let s = self.l.sizes;
        if s.ki_slots == 0 {
            return Err(Refusal::PrimitiveDisabled);
        }
        if redundancy == 0 {
            return Err(Refusal::RedundancyZero);
        }
        if redundancy as u32 > s.ki_max_redundancy {
            return Err(Refusal::RedundancyTooHigh);
        }
        let mut buf = [0u8; MAX_FRAME];
        for n in 0..redundancy {
            let va = self.t.base_va + self.l.ki_offset + 8 * hash::slot(key, n, s.ki_slots);
            let bth = self.bth(opcode::RC_FETCH_ADD);
            let req = Request::FetchAdd(AtomicEth {
                va,
                rkey: self.t.rkey,
                swap_add: counter,
                compare: 0,
            });
            let len = roce::emit_request(&mut buf, &self.addrs, &bth, &req)
                .map_err(|_| Refusal::Malformed)?;
            send(&buf[..len]);
        }
        Ok(redundancy as u32)
    }

    /// A response from the collector (the IPv4 packet: header to ICRC). A NAK for a PSN
    /// sequence error carries the PSN the responder expects: continue from there (the
    /// seed's QP resynchronisation; the reports in between are lost, as the seed accepts).
    /// Returns whether our PSN moved. Anything else (ACKs, bad ICRC, other QPs) is ignored.
    pub fn on_response(&mut self, ip: &[u8]) -> bool {
        if !roce::verify_icrc_v4(ip) {
            return false;
        }
        let ihl = ((ip[0] & 0x0f) as usize) * 4;
        let at = ihl + 8;
        let (Ok(bth), Some(rest)) = (Bth::parse(&ip[at..]), ip.get(at + roce::BTH_LEN..)) else {
            return false;
        };
        if bth.dest_qp != self.t.qp || bth.opcode != opcode::RC_ACK {
            return false;
        }
        let Ok(a) = Aeth::parse(rest) else {
            return false;
        };
        if a.is_psn_sequence_error() && bth.psn != self.psn {
            self.psn = bth.psn;
            self.resyncs += 1;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Sizes;
    use peregrine_wire::ethernet::Address;
    use std::net::Ipv4Addr;

    fn qp() -> Qp {
        let l = Layout::new(Sizes {
            kw_slots: 1001,
            ..Sizes::default()
        })
        .unwrap();
        let a = FrameAddrs {
            eth_src: Address([2, 0, 0, 0, 0, 1]),
            eth_dst: Address([2, 0, 0, 0, 0, 2]),
            ip_src: Ipv4Addr::new(10, 0, 0, 1),
            ip_dst: Ipv4Addr::new(10, 0, 0, 2),
            src_port: 49152,
            dst_port: roce::UDP_PORT,
        };
        let t = Target {
            qp: 0x42,
            rkey: 7,
            base_va: 0x7f00_0000_0000,
        };
        Qp::new(t, l, a, 0xff_fffe)
    }

    #[test]
    fn writes_go_to_the_formula_slots_with_consecutive_psns() {
        let mut q = qp();
        let mut frames = Vec::new();
        q.key_write(2, 9, 77, |f| frames.push(f.to_vec())).unwrap();
        assert_eq!(frames.len(), 2);
        for (n, f) in frames.iter().enumerate() {
            let ip = &f[14..];
            assert!(roce::verify_icrc_v4(ip));
            let bth = Bth::parse(&ip[28..]).unwrap();
            // PSNs wrap at 2^24.
            assert_eq!(bth.psn, (0xff_fffe + n as u32) & 0xff_ffff);
            let reth = Reth::parse(&ip[40..]).unwrap();
            let slot = hash::slot(9, n as u8, 1001);
            assert_eq!(reth.va, 0x7f00_0000_0000 + q.l.kw_offset + 8 * slot);
            let payload = &ip[56..64];
            assert_eq!(&payload[..4], &hash::kw_checksum(9, 32).to_le_bytes());
            assert_eq!(&payload[4..], &77u32.to_le_bytes());
        }
        assert_eq!(q.psn(), 0);
        assert_eq!(
            q.key_write(5, 9, 1, |_| {}),
            Err(Refusal::RedundancyTooHigh)
        );
    }

    #[test]
    fn a_psn_sequence_nak_resyncs() {
        let mut q = qp();
        q.key_increment(1, 3, 5, |_| {}).unwrap();
        // The responder's NAK: BTH (ACK opcode, our QP, expected PSN 0x10), AETH 0x60.
        let mut buf = [0u8; 128];
        let bth = Bth {
            opcode: opcode::RC_ACK,
            solicited: false,
            pad_count: 0,
            pkey: roce::DEFAULT_PKEY,
            dest_qp: 0x42,
            ack_req: false,
            psn: 0x10,
        };
        let roce_len = roce::BTH_LEN + roce::AETH_LEN + roce::ICRC_LEN;
        let at = peregrine_wire::dta::FRAME_OVERHEAD;
        bth.emit(&mut buf[at..]).unwrap();
        Aeth {
            syndrome: 0x60,
            msn: 0,
        }
        .emit(&mut buf[at + roce::BTH_LEN..])
        .unwrap();
        let n = peregrine_wire::dta::emit_frame(&mut buf, &q.addrs, roce_len).unwrap();
        roce::fill_icrc_v4(&mut buf[14..n]).unwrap();
        assert!(q.on_response(&buf[14..n]));
        assert_eq!((q.psn(), q.resyncs), (0x10, 1));
        // A corrupted copy is ignored.
        buf[n - 1] ^= 1;
        assert!(!q.on_response(&buf[14..n]));
    }
}
