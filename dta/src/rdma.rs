//! The translator's RoCEv2 output mode (seed section 5.2), I/O-free: instead of storing
//! into a mapped region, every primitive becomes RDMA requests toward a collector's RDMA
//! NIC, at the addresses the same layout gives (`collector base VA + section offset +
//! element`), with one PSN sequence per queue pair and resynchronisation when the responder
//! NAKs a PSN sequence error. The frames are handed to the caller (the pipeline sends them).
//!
//! | primitive | requests (bytes little-endian, as the collector reads them) |
//! |---|---|
//! | Key-Write, K = 1 | N WRITEs of the 8-byte slot (checksum, data) |
//! | Key-Write, K = 3, 7 | per copy 3 WRITEs: the slot's sequence word odd, then checksum and data, then the sequence word even (the region's seqlock, relying on the responder placing one QP's WRITEs in order) |
//! | Key-Increment | N FETCH_ADDs of the counter |
//! | Append | per full (or flushed) batch: one WRITE of the batch at the list's tail (two when it wraps the ring), then one WRITE of the list's new head (u64) |
//! | Postcarding | per complete, evicted or flushed chunk: one WRITE of the B-word chunk per copy |
//!
//! Append batching and the Postcarding cache are the region path's ([`Appender`],
//! [`Postcarder`]) with RDMA WRITEs as their [`Sink`]; the list heads are kept here (the
//! collector's region starts zeroed, as [`crate::Region::create`] leaves it).

use crate::hash;
use crate::layout::Layout;
use crate::store::{self, Appender, PostcardOutcome, Postcarder, Sink};
use crate::Refusal;
use peregrine_wire::dta::{FrameAddrs, Primitive};
use peregrine_wire::roce::{self, opcode, Aeth, AtomicEth, Bth, Request, RequestTemplate, Reth};

/// What the collector advertises for its registered region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The collector's queue pair (BTH destination QP of our requests).
    pub qp: u32,
    /// Our own queue pair number, the one the collector's QP is connected to: its ACKs and
    /// NAKs carry it as their destination QP.
    pub local_qp: u32,
    pub rkey: u32,
    /// Virtual address of the region's first byte (its header).
    pub base_va: u64,
}

/// Frames are at most this long: headers, RETH, the largest WRITE (an Append batch of 64
/// words: 256 bytes, the smallest IB path MTU), ICRC.
pub const MAX_FRAME: usize = 384;

/// The wire side of one queue pair: addresses, PSN, list heads.
#[derive(Debug, Clone)]
struct Wire {
    t: Target,
    l: Layout,
    /// `mod S` of the Key-Write, Key-Increment and Postcarding sections by a multiply.
    kw_mod: hash::FastMod,
    ki_mod: hash::FastMod,
    pc_mod: hash::FastMod,
    /// The next PSN to send.
    psn: u32,
    /// The even sequence value of the next K > 1 Key-Write slot write.
    seq: u32,
    /// Entries ever appended, per list (the heads we publish).
    heads: Vec<u64>,
    resyncs: u64,
    /// Headers up to the BTH, built once.
    tpl: RequestTemplate,
    /// The frame being built (every byte of a frame is written: no zeroing per frame).
    buf: Box<[u8; MAX_FRAME]>,
}

impl Wire {
    /// One RDMA WRITE Only of `data` at region offset `off`.
    fn write(&mut self, off: u64, data: &[u8], send: &mut impl FnMut(&[u8])) {
        let req = Request::Write {
            reth: Reth {
                va: self.t.base_va.wrapping_add(off),
                rkey: self.t.rkey,
                dma_len: data.len() as u32,
            },
            data,
        };
        self.request(&req, send);
    }

    /// One request with the next PSN, from the queue pair's template. Our callers write
    /// at most 256 bytes and PSNs stay within 24 bits: it always fits.
    fn request(&mut self, req: &Request<'_>, send: &mut impl FnMut(&[u8])) {
        let psn = self.psn;
        self.psn = (self.psn + 1) & 0x00ff_ffff;
        if let Ok(n) = self.tpl.write(&mut self.buf[..], psn, req) {
            send(&self.buf[..n]);
        }
    }

    /// Little-endian bytes of `words` into `out` (as many as fit).
    fn le(words: &[u32], out: &mut [u8]) -> usize {
        let mut n = 0;
        for (c, w) in out.chunks_exact_mut(4).zip(words) {
            c.copy_from_slice(&w.to_le_bytes());
            n += 4;
        }
        n
    }
}

/// [`Wire`] and the caller's frame sink as the Append / Postcarding [`Sink`].
struct Emit<'a, F: FnMut(&[u8])> {
    w: &'a mut Wire,
    send: &'a mut F,
}

impl<F: FnMut(&[u8])> Sink for Emit<'_, F> {
    fn append_entries(&mut self, list: u32, vals: &[u32]) {
        let s = self.w.l.sizes;
        let (len, l) = (s.ap_list_len, list as usize);
        let head = self.w.heads[l];
        let at = head % len;
        let first = vals.len().min((len - at) as usize);
        let base = self.w.l.ap_data_offset + 4 * len * list as u64;
        let mut b = [0u8; 256];
        for (off, run) in [(at, &vals[..first]), (0, &vals[first..])] {
            if !run.is_empty() {
                let n = Wire::le(run, &mut b);
                self.w.write(base + 4 * off, &b[..n], self.send);
            }
        }
        // The head after the entries: a reader that sees it sees them.
        let h = head + vals.len() as u64;
        self.w.heads[l] = h;
        let off = self.w.l.ap_heads_offset + 8 * list as u64;
        self.w.write(off, &h.to_le_bytes(), self.send);
    }

    fn write_chunk(&mut self, key: u32, vals: &[u32]) -> u32 {
        let l = self.w.l;
        let b = l.sizes.pc_hops as u64;
        let enc = store::encode_chunk(&l, key, vals);
        let mut bytes = [0u8; 256];
        let n = Wire::le(&enc[..b as usize], &mut bytes);
        let kc = hash::KeyCrc::new(key);
        for j in 0..l.sizes.pc_redundancy as u8 {
            let off = l.pc_offset + 4 * b * self.w.pc_mod.of(kc.crc_n(j));
            self.w.write(off, &bytes[..n], self.send);
        }
        l.sizes.pc_redundancy
    }
}

/// One queue pair's requester state, with the Append batches and postcards staged for it.
#[derive(Debug)]
pub struct Qp {
    w: Wire,
    appender: Appender,
    postcarder: Postcarder,
    /// Postcard chunks written: complete paths, early (evicted or flushed).
    pub paths_complete: u64,
    pub paths_early: u64,
    /// Where [`flush_some`](Self::flush_some) resumes: next list, next cache entry.
    flush_list: u32,
    flush_entry: usize,
}

/// Whether `p` is one the region path would store (the same checks, the same refusals),
/// without storing it: lets a pipeline stage refuse (and NACK) before queueing a report
/// for the RoCEv2 output.
pub fn check(l: &Layout, p: &Primitive) -> Result<(), Refusal> {
    let s = &l.sizes;
    let redundancy = |n: u8, max: u32| match n {
        0 => Err(Refusal::RedundancyZero),
        n if n as u32 > max => Err(Refusal::RedundancyTooHigh),
        _ => Ok(()),
    };
    match *p {
        Primitive::KeyWrite {
            redundancy: n,
            words,
            ..
        } => {
            if s.kw_slots == 0 {
                return Err(Refusal::PrimitiveDisabled);
            }
            redundancy(n, s.kw_max_redundancy)?;
            if words as u32 != s.kw_words {
                return Err(Refusal::DataWords);
            }
        }
        Primitive::KeyIncrement { redundancy: n, .. } => {
            if s.ki_slots == 0 {
                return Err(Refusal::PrimitiveDisabled);
            }
            redundancy(n, s.ki_max_redundancy)?;
        }
        Primitive::Append { list, .. } => {
            if s.ap_lists == 0 {
                return Err(Refusal::PrimitiveDisabled);
            }
            if list >= s.ap_lists {
                return Err(Refusal::UnknownList);
            }
        }
        Primitive::Postcard { hop, data, .. } => {
            if s.pc_chunks == 0 {
                return Err(Refusal::PrimitiveDisabled);
            }
            if hop as u32 >= s.pc_hops {
                return Err(Refusal::HopOutOfRange);
            }
            if s.pc_mode == crate::PostcardMode::Hashed && data as u64 >= 1u64 << s.pc_value_bits {
                return Err(Refusal::ValueOutOfRange);
            }
        }
    }
    Ok(())
}

impl Qp {
    /// A queue pair toward `t`, whose region has layout `l`; `pc_cache_slots` postcard
    /// cache entries (as the region path's per-worker cache).
    ///
    /// # Panics
    /// If `t.qp` is over 24 bits (the daemon's config refuses such a QP number).
    pub fn new(
        t: Target,
        l: Layout,
        addrs: FrameAddrs,
        first_psn: u32,
        pc_cache_slots: usize,
    ) -> Qp {
        Qp {
            appender: Appender::new(&l),
            postcarder: Postcarder::new(&l, pc_cache_slots),
            paths_complete: 0,
            paths_early: 0,
            flush_list: 0,
            flush_entry: 0,
            w: Wire {
                t,
                l,
                kw_mod: hash::FastMod::new(l.sizes.kw_slots),
                ki_mod: hash::FastMod::new(l.sizes.ki_slots),
                pc_mod: hash::FastMod::new(l.sizes.pc_chunks),
                psn: first_psn & 0x00ff_ffff,
                seq: 0,
                heads: vec![0; l.sizes.ap_lists as usize],
                resyncs: 0,
                tpl: RequestTemplate::new(&addrs, t.qp)
                    .expect("Target::qp is a 24-bit QP number (the config checks it)"),
                buf: Box::new([0; MAX_FRAME]),
            },
        }
    }

    pub fn psn(&self) -> u32 {
        self.w.psn
    }

    /// NAKs that moved our PSN.
    pub fn resyncs(&self) -> u64 {
        self.w.resyncs
    }

    /// Any primitive: its requests (now, or when its batch / chunk is written) passed to
    /// `send`. Returns the frames sent now.
    pub fn handle(&mut self, p: &Primitive, send: impl FnMut(&[u8])) -> Result<u32, Refusal> {
        check(&self.w.l, p)?;
        self.handle_checked(p, send)
    }

    /// [`handle`](Self::handle) for a primitive [`check`] has passed (a pipeline stage
    /// checks before it reserves buffers): no second check. An unchecked primitive is not
    /// unsafe here, only wrong: a redundancy of 0 sends nothing, one over the maximum
    /// writes more copies.
    pub fn handle_checked(
        &mut self,
        p: &Primitive,
        mut send: impl FnMut(&[u8]),
    ) -> Result<u32, Refusal> {
        let mut frames = 0u32;
        let mut count = |f: &[u8]| {
            frames += 1;
            send(f)
        };
        match *p {
            Primitive::KeyWrite {
                redundancy,
                key,
                words,
                ref data,
            } => {
                self.key_write_checked(redundancy, key, &data[..words as usize], &mut count)?;
            }
            Primitive::KeyIncrement {
                redundancy,
                key,
                counter,
            } => {
                self.key_increment_checked(redundancy, key, counter, &mut count);
            }
            Primitive::Append { list, data } => {
                self.append(list, data, &mut count)?;
            }
            Primitive::Postcard { key, hop, data } => {
                self.postcard(key, hop, data, &mut count)?;
            }
        }
        Ok(frames)
    }

    /// The requests of a Key-Write of `data` (exactly K words), each passed to `send` as a
    /// whole frame. Returns the slot copies written.
    pub fn key_write(
        &mut self,
        redundancy: u8,
        key: u32,
        data: &[u32],
        send: impl FnMut(&[u8]),
    ) -> Result<u32, Refusal> {
        check(
            &self.w.l,
            &Primitive::KeyWrite {
                redundancy,
                key,
                words: data.len().min(7) as u8,
                data: [0; 7],
            },
        )?;
        self.key_write_checked(redundancy, key, data, send)
    }

    fn key_write_checked(
        &mut self,
        redundancy: u8,
        key: u32,
        data: &[u32],
        mut send: impl FnMut(&[u8]),
    ) -> Result<u32, Refusal> {
        let l = self.w.l;
        let s = l.sizes;
        if data.len() != s.kw_words as usize {
            return Err(Refusal::DataWords);
        }
        let csum = hash::kw_checksum(key, s.kw_checksum_bits);
        let kc = hash::KeyCrc::new(key);
        let stride = s.kw_slot_bytes();
        if s.kw_words == 1 {
            // The 8-byte slot: checksum then the word, little-endian.
            let slot = (u64::from(data[0]) << 32 | u64::from(csum)).to_le_bytes();
            for copy in 0..redundancy {
                let off = l.kw_offset + stride * self.w.kw_mod.of(kc.crc_n(copy));
                self.w.write(off, &slot, &mut send);
            }
            return Ok(redundancy as u32);
        }
        let mut body = [0u32; 8];
        body[0] = csum;
        body[1..1 + data.len()].copy_from_slice(data);
        let mut b = [0u8; 32];
        let n = Wire::le(&body[..1 + data.len()], &mut b);
        for copy in 0..redundancy {
            let off = l.kw_offset + stride * self.w.kw_mod.of(kc.crc_n(copy));
            // The seqlock: odd while the body is written, then a new even value (a
            // per-QP counter, so a reader never sees the same even value around a write).
            self.w.seq = self.w.seq.wrapping_add(2);
            let even = self.w.seq;
            self.w
                .write(off, &(even.wrapping_sub(1)).to_le_bytes(), &mut send);
            self.w.write(off + 4, &b[..n], &mut send);
            self.w.write(off, &even.to_le_bytes(), &mut send);
        }
        Ok(redundancy as u32)
    }

    /// The N FETCH_ADD requests of a Key-Increment.
    pub fn key_increment(
        &mut self,
        redundancy: u8,
        key: u32,
        counter: u64,
        send: impl FnMut(&[u8]),
    ) -> Result<u32, Refusal> {
        check(
            &self.w.l,
            &Primitive::KeyIncrement {
                redundancy,
                key,
                counter,
            },
        )?;
        Ok(self.key_increment_checked(redundancy, key, counter, send))
    }

    fn key_increment_checked(
        &mut self,
        redundancy: u8,
        key: u32,
        counter: u64,
        mut send: impl FnMut(&[u8]),
    ) -> u32 {
        let l = self.w.l;
        let kc = hash::KeyCrc::new(key);
        for n in 0..redundancy {
            let va = self.w.t.base_va + l.ki_offset + 8 * self.w.ki_mod.of(kc.crc_n(n));
            let req = Request::FetchAdd(AtomicEth {
                va,
                rkey: self.w.t.rkey,
                swap_add: counter,
                compare: 0,
            });
            self.w.request(&req, &mut send);
        }
        redundancy as u32
    }

    /// Stage an Append; a full batch goes out as its WRITEs. Returns batches written.
    pub fn append(
        &mut self,
        list: u32,
        data: u32,
        mut send: impl FnMut(&[u8]),
    ) -> Result<u32, Refusal> {
        let mut e = Emit {
            w: &mut self.w,
            send: &mut send,
        };
        self.appender.append(&mut e, list, data)
    }

    /// Cache a postcard; a complete or evicted chunk goes out as its WRITEs.
    pub fn postcard(
        &mut self,
        key: u32,
        hop: u8,
        data: u32,
        mut send: impl FnMut(&[u8]),
    ) -> Result<PostcardOutcome, Refusal> {
        let mut e = Emit {
            w: &mut self.w,
            send: &mut send,
        };
        let o = self.postcarder.postcard(&mut e, key, hop, data)?;
        self.paths_complete += u64::from(o.complete);
        self.paths_early += u64::from(o.early);
        Ok(o)
    }

    /// The most frames `p` can make (a pipeline stage reserves that many buffers first):
    /// Key-Write N or 3N (K > 1), Key-Increment N, an Append 3 (a batch across the ring's
    /// end, then the head), a postcard 2 chunks (an evicted one and its own) per copy.
    pub fn max_frames(&self, p: &Primitive) -> usize {
        let s = &self.w.l.sizes;
        match *p {
            Primitive::KeyWrite { redundancy, .. } => {
                redundancy as usize * if s.kw_words == 1 { 1 } else { 3 }
            }
            Primitive::KeyIncrement { redundancy, .. } => redundancy as usize,
            Primitive::Append { .. } => 3,
            Primitive::Postcard { .. } => 2 * s.pc_redundancy as usize,
        }
    }

    /// Write partial Append batches and cached postcards in frames of at most `budget`,
    /// resuming where the last call stopped. Returns whether everything staged is out.
    pub fn flush_some(&mut self, budget: usize, mut send: impl FnMut(&[u8])) -> bool {
        let per = self.w.l.sizes.pc_redundancy.max(1) as usize;
        let mut left = budget;
        let mut e = Emit {
            w: &mut self.w,
            send: &mut send,
        };
        while self.flush_list < self.appender.lists() {
            if left < 3 {
                return false;
            }
            if self.appender.flush_list(&mut e, self.flush_list) {
                left -= 3;
            }
            self.flush_list += 1;
        }
        let (n, done) = self
            .postcarder
            .flush_some(&mut e, &mut self.flush_entry, left / per);
        self.paths_early += u64::from(n);
        if done {
            self.flush_list = 0;
        }
        done
    }

    /// Write every partial Append batch and cached postcard. Returns (batches, chunks).
    pub fn flush(&mut self, mut send: impl FnMut(&[u8])) -> (u32, u32) {
        let mut e = Emit {
            w: &mut self.w,
            send: &mut send,
        };
        let a = self.appender.flush_all(&mut e);
        let p = self.postcarder.flush_all(&mut e);
        self.paths_early += u64::from(p);
        (a, p)
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
        if bth.dest_qp != self.w.t.local_qp || bth.opcode != opcode::RC_ACK {
            return false;
        }
        let Ok(a) = Aeth::parse(rest) else {
            return false;
        };
        if a.is_psn_sequence_error() && bth.psn != self.w.psn {
            self.w.psn = bth.psn;
            self.w.resyncs += 1;
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

    fn addrs() -> FrameAddrs {
        FrameAddrs {
            eth_src: Address([2, 0, 0, 0, 0, 1]),
            eth_dst: Address([2, 0, 0, 0, 0, 2]),
            ip_src: Ipv4Addr::new(10, 0, 0, 1),
            ip_dst: Ipv4Addr::new(10, 0, 0, 2),
            src_port: 49152,
            dst_port: roce::UDP_PORT,
        }
    }

    fn qp() -> Qp {
        let l = Layout::new(Sizes {
            kw_slots: 1001,
            ..Sizes::default()
        })
        .unwrap();
        let a = addrs();
        let t = Target {
            qp: 0x42,
            local_qp: 0x99,
            rkey: 7,
            base_va: 0x7f00_0000_0000,
        };
        Qp::new(t, l, a, 0xff_fffe, 64)
    }

    #[test]
    fn writes_go_to_the_formula_slots_with_consecutive_psns() {
        let mut q = qp();
        let mut frames = Vec::new();
        q.key_write(2, 9, &[77], |f| frames.push(f.to_vec()))
            .unwrap();
        assert_eq!(frames.len(), 2);
        for (n, f) in frames.iter().enumerate() {
            let ip = &f[14..];
            assert!(roce::verify_icrc_v4(ip));
            let bth = Bth::parse(&ip[28..]).unwrap();
            // PSNs wrap at 2^24.
            assert_eq!(bth.psn, (0xff_fffe + n as u32) & 0xff_ffff);
            let reth = Reth::parse(&ip[40..]).unwrap();
            let slot = hash::slot(9, n as u8, 1001);
            assert_eq!(reth.va, 0x7f00_0000_0000 + q.w.l.kw_offset + 8 * slot);
            let payload = &ip[56..64];
            assert_eq!(&payload[..4], &hash::kw_checksum(9, 32).to_le_bytes());
            assert_eq!(&payload[4..], &77u32.to_le_bytes());
        }
        assert_eq!(q.psn(), 0);
        assert_eq!(
            q.key_write(5, 9, &[1], |_| {}),
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
            dest_qp: 0x99,
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
        let n = peregrine_wire::dta::emit_frame(&mut buf, &addrs(), roce_len).unwrap();
        roce::fill_icrc_v4(&mut buf[14..n]).unwrap();
        assert!(q.on_response(&buf[14..n]));
        assert_eq!((q.psn(), q.resyncs()), (0x10, 1));
        // A corrupted copy is ignored.
        buf[n - 1] ^= 1;
        assert!(!q.on_response(&buf[14..n]));
    }

    /// (VA - base, payload) of an RDMA WRITE frame, checking its ICRC.
    fn write_of(f: &[u8]) -> (u64, Vec<u8>) {
        let ip = &f[14..];
        assert!(roce::verify_icrc_v4(ip));
        let bth = Bth::parse(&ip[28..]).unwrap();
        assert_eq!(bth.opcode, opcode::RC_RDMA_WRITE_ONLY);
        let reth = Reth::parse(&ip[40..]).unwrap();
        let d = &ip[56..56 + reth.dma_len as usize];
        (reth.va - 0x7f00_0000_0000, d.to_vec())
    }

    fn le(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn qp_with(s: Sizes) -> Qp {
        let mut q = qp();
        let l = Layout::new(s).unwrap();
        q = Qp::new(q.w.t, l, addrs(), 0, 4);
        q
    }

    #[test]
    fn append_batches_wrap_into_two_writes_then_the_head() {
        let mut q = qp_with(Sizes {
            ap_lists: 2,
            ap_batch: 4,
            ap_list_len: 6,
            ..Sizes::default()
        });
        let l = q.w.l;
        let mut f = Vec::new();
        for d in 0..8 {
            q.append(1, 100 + d, |x| f.push(write_of(x))).unwrap();
        }
        let list = l.ap_data_offset + 4 * 6;
        let head = l.ap_heads_offset + 8;
        assert_eq!(
            f,
            vec![
                (list, le(&[100, 101, 102, 103])),
                (head, 4u64.to_le_bytes().to_vec()),
                (list + 16, le(&[104, 105])),
                (list, le(&[106, 107])),
                (head, 8u64.to_le_bytes().to_vec()),
            ]
        );
        f.clear();
        q.append(1, 108, |x| f.push(write_of(x))).unwrap();
        assert!(f.is_empty(), "staged until the batch fills or a flush");
        assert_eq!(q.flush(|x| f.push(write_of(x))), (1, 0));
        assert_eq!(
            f,
            vec![(list + 8, le(&[108])), (head, 9u64.to_le_bytes().to_vec())]
        );
        assert_eq!(q.append(2, 1, |_| {}), Err(Refusal::UnknownList));
    }

    #[test]
    fn a_postcard_chunk_is_one_write_per_copy() {
        let mut q = qp_with(Sizes {
            pc_chunks: 211,
            pc_hops: 3,
            pc_redundancy: 2,
            ..Sizes::default()
        });
        let l = q.w.l;
        let mut f = Vec::new();
        for hop in 0..3u8 {
            q.postcard(77, hop, 10 + hop as u32, |x| f.push(write_of(x)))
                .unwrap();
        }
        let words = crate::store::encode_chunk(&l, 77, &[10, 11, 12]);
        let want: Vec<_> = (0..2u8)
            .map(|j| {
                let c = hash::slot(77, j, 211);
                (l.pc_offset + 12 * c, le(&words[..3]))
            })
            .collect();
        assert_eq!(f, want);
        assert_eq!(
            q.postcard(77, 3, 1, |_| {}).unwrap_err(),
            Refusal::HopOutOfRange
        );
    }

    #[test]
    fn a_three_word_key_write_is_a_seqlocked_slot() {
        let mut q = qp_with(Sizes {
            kw_slots: 1001,
            kw_words: 3,
            ..Sizes::default()
        });
        let l = q.w.l;
        let mut f = Vec::new();
        q.key_write(2, 9, &[1, 2, 3], |x| f.push(write_of(x)))
            .unwrap();
        assert_eq!(f.len(), 6);
        for (n, w) in f.chunks(3).enumerate() {
            let slot = l.kw_offset + 20 * hash::slot(9, n as u8, 1001);
            let even = 2 * (n as u32 + 1);
            assert_eq!(w[0], (slot, le(&[even - 1])));
            assert_eq!(w[1], (slot + 4, le(&[hash::kw_checksum(9, 32), 1, 2, 3])));
            assert_eq!(w[2], (slot, le(&[even])));
        }
        assert_eq!(q.key_write(1, 9, &[1], |_| {}), Err(Refusal::DataWords));
    }
}
