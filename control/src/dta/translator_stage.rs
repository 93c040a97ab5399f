//! The `dta-translator` pipeline's main stage: DTA reports in (Ethernet / IPv4 / UDP
//! 40040), writes into the collector's region out (`peregrine_dta::Translator`).
//!
//! Per packet: parse the outer headers (anything else is dropped as `dta_not_report`),
//! send Append and Postcarding reports to the worker that owns their list / key (flow
//! steering: one writer per list and per postcard cache entry), apply the per-source rate
//! limit, hand the payload to the translator. A stored report ends as `dta_stored`; a
//! refused one is dropped under `dta_<reason>`, or, when it is retransmittable, turned in
//! place into a NACK (UDP 40044, seqnum + nack bit) and sent back out of its rx port.

use peregrine_dataplane::runtime::{Batch, Context, Disposition, DropReason, Reasons, Stage};
use peregrine_dataplane::PacketBuf;
use peregrine_dta::{RateLimiter, Refusal, Translator};
use peregrine_wire::dta::{self, opcode, AckRepr, Variant};
use peregrine_wire::{ethernet, ipv4, udp};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

mod rdma;

/// Words of a published counter snapshot: the translator's counters, NACKs, hand-offs, then
/// the RoCEv2 output's ([`RdmaStats`]).
const WORDS: usize = 8 + Refusal::COUNT + 2 + RDMA_WORDS;
const RDMA_WORDS: usize = 5;

/// One worker's RoCEv2 output figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RdmaStats {
    /// Request frames sent.
    pub sent: u64,
    /// Reports dropped (NACKed when retransmittable) because the batch lacked the spare
    /// buffers their frames need.
    pub no_buffer: u64,
    /// PSN resynchronisations after a NAK.
    pub resyncs: u64,
    /// Postcard chunks written: complete, early (evicted or flushed).
    pub paths_complete: u64,
    pub paths_early: u64,
}

impl RdmaStats {
    fn words(&self) -> [u64; RDMA_WORDS] {
        [
            self.sent,
            self.no_buffer,
            self.resyncs,
            self.paths_complete,
            self.paths_early,
        ]
    }

    fn add(&mut self, w: &[u64]) {
        self.sent += w[0];
        self.no_buffer += w[1];
        self.resyncs += w[2];
        self.paths_complete += w[3];
        self.paths_early += w[4];
    }
}

/// One worker's published counters (stored by that worker only, read by the control loop).
#[derive(Debug)]
pub struct WorkerSlot {
    words: [AtomicU64; WORDS],
}

impl Default for WorkerSlot {
    fn default() -> Self {
        WorkerSlot {
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

fn from_words(w: &[u64; WORDS]) -> (peregrine_dta::Counters, u64, u64) {
    let mut c = peregrine_dta::Counters {
        key_write: w[0],
        key_increment: w[1],
        append: w[2],
        postcard: w[3],
        region_writes: w[4],
        postcard_paths_complete: w[5],
        postcard_early_flush: w[6],
        postcard_duplicate_hop: w[7],
        ..Default::default()
    };
    c.refused.copy_from_slice(&w[8..8 + Refusal::COUNT]);
    (c, w[8 + Refusal::COUNT], w[9 + Refusal::COUNT])
}

/// Shared between the stage copies and the feature (metrics, summary).
#[derive(Debug, Default)]
pub struct Shared {
    pub workers: Vec<WorkerSlot>,
}

impl Shared {
    pub fn new(workers: usize) -> Shared {
        Shared {
            workers: (0..workers).map(|_| WorkerSlot::default()).collect(),
        }
    }

    pub fn totals(&self) -> (peregrine_dta::Counters, u64, u64) {
        let (c, n, h, _) = self.totals_rdma();
        (c, n, h)
    }

    /// [`totals`](Self::totals) and the RoCEv2 output's figures.
    pub fn totals_rdma(&self) -> (peregrine_dta::Counters, u64, u64, RdmaStats) {
        let mut c = peregrine_dta::Counters::default();
        let (mut n, mut h, mut r) = (0, 0, RdmaStats::default());
        for w in &self.workers {
            let words: [u64; WORDS] = std::array::from_fn(|i| w.words[i].load(Ordering::Relaxed));
            let (wc, wn, wh) = from_words(&words);
            c.add(&wc);
            n += wn;
            h += wh;
            r.add(&words[WORDS - RDMA_WORDS..]);
        }
        (c, n, h, r)
    }
}

#[derive(Debug)]
pub struct TranslatorStage {
    t: Translator,
    variant: Variant,
    limiter: Option<RateLimiter>,
    workers: u16,
    worker: usize,
    shared: Arc<Shared>,
    nacks: u64,
    handed_off: u64,
    not_report: DropReason,
    stored: DropReason,
    refused: [DropReason; Refusal::COUNT],
    dirty: bool,
    loopback: Option<Loopback>,
    /// RoCEv2 output: this worker's queue pair and its frames' port.
    rdma: Option<RdmaOut>,
}

/// Spare buffers a RoCEv2-mode stage asks the worker to keep per batch (all it may have).
const RDMA_SPARES: usize = peregrine_dataplane::runtime::batch::MAX_SPARES;

/// One worker's RoCEv2 output: its own queue pair (PSNs are per QP, so QPs are
/// partitioned per worker, never shared), the port its requests leave by, every worker's
/// local QP number (a response goes to the worker that owns its destination QP).
#[derive(Debug)]
pub struct RdmaOut {
    pub qp: peregrine_dta::rdma::Qp,
    pub port: u16,
    pub local_qps: Arc<[u32]>,
    /// The worker went idle: write staged Append batches and postcards with the next
    /// batch's spare buffers.
    flush_pending: bool,
    stats: RdmaStats,
    no_buffer: DropReason,
    response: DropReason,
}

impl RdmaOut {
    pub fn new(
        qp: peregrine_dta::rdma::Qp,
        port: u16,
        local_qps: Arc<[u32]>,
        reasons: &mut Reasons,
    ) -> RdmaOut {
        RdmaOut {
            qp,
            port,
            local_qps,
            flush_pending: false,
            stats: RdmaStats::default(),
            no_buffer: reasons.register("dta_rdma_no_buffer"),
            response: reasons.register("dta_rdma_response"),
        }
    }
}

/// Benchmark loop-back (`perf/`, never set by the daemon): a stored report is rewritten for
/// its next pass (key or data advanced, so a recirculating stream keeps writing new slots)
/// and sent back out of the other port of a `net_ring` pair, as `dpdk-testpmd`'s 5tswap
/// returns every packet.
///
/// Keys (Key-Write, Key-Increment, Postcarding) either range over all of 2^32
/// ([`new`](Self::new): every pass a new key, an unbounded key population) or stay in
/// `[0, K)` ([`with_keys`](Self::with_keys): advanced modulo K by a step coprime to K, so
/// each report still visits all K keys). Append's data word is always advanced modulo 2^32.
#[derive(Debug, Clone, Copy)]
pub struct Loopback {
    base: usize,
    /// K, the key population; 2^32 when unbounded (then `+ step mod K` is the wrapping add).
    keys: u64,
    /// The step modulo K (coprime to K, below K); [`KEY_STEP`] when unbounded.
    step: u64,
}

/// Added to a looped-back report's key each pass (odd: every key of the 2^32 is visited).
const KEY_STEP: u32 = 0x3c6e_f373;

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Loopback {
    pub fn new(variant: Variant) -> Loopback {
        Loopback {
            base: variant.base_len(),
            keys: 1 << 32,
            step: KEY_STEP as u64,
        }
    }

    /// Keep keys in `[0, keys)` (0: unbounded, as [`new`](Self::new)); the step is
    /// `KEY_STEP` mod `keys`, moved up to the next value coprime to `keys`. Reports should
    /// start with keys below `keys` ([`key`](Self::key)); one that does not is brought into
    /// range on its first pass.
    pub fn with_keys(mut self, keys: u32) -> Loopback {
        let k = match keys {
            0 => 1 << 32,
            k => u64::from(k),
        };
        let mut s = u64::from(KEY_STEP) % k;
        while gcd(s, k) != 1 {
            s = (s + 1) % k;
        }
        (self.keys, self.step) = (k, s);
        self
    }

    /// The key population K (0: unbounded).
    pub fn keys(&self) -> u32 {
        self.keys as u32
    }

    /// `key` mapped into the population: `key mod K` (itself when unbounded).
    pub fn key(&self, key: u32) -> u32 {
        (u64::from(key) % self.keys) as u32
    }

    /// Advance the report at the start of `payload` (the UDP payload) for its next pass.
    #[inline(always)]
    pub fn advance(&self, payload: &mut [u8]) {
        let Some(&op) = payload.first() else {
            return;
        };
        // Key-Write (1) and Key-Increment (3) are the opcodes with `op | 2 == 3`: one compare
        // for the common reports instead of a jump table.
        let at = if op | 2 == 3 {
            self.base + 1
        } else if op == opcode::POSTCARDING {
            self.base
        } else {
            // Append: the data word, modulo 2^32.
            if op == opcode::APPEND {
                if let Some(w) = payload
                    .get_mut(self.base + 4..)
                    .and_then(|r| r.first_chunk_mut::<4>())
                {
                    *w = u32::from_be_bytes(*w).wrapping_add(KEY_STEP).to_be_bytes();
                }
            }
            return;
        };
        if let Some(w) = payload.get_mut(at..).and_then(|r| r.first_chunk_mut::<4>()) {
            // (v + step) mod K with v < K, step < K: one compare, no division (K = 2^32:
            // the wrapping add). A key not below K is brought into range first.
            let (k, mut v) = (self.keys, u64::from(u32::from_be_bytes(*w)));
            if v >= k {
                v %= k;
            }
            let n = v + self.step;
            *w = ((if n >= k { n - k } else { n }) as u32).to_be_bytes();
        }
    }
}

/// The drop-reason names, `dta_` + the refusal's name.
const REFUSED_NAMES: [&str; Refusal::COUNT] = [
    "dta_truncated",
    "dta_malformed",
    "dta_unknown_opcode",
    "dta_redundancy_zero",
    "dta_redundancy_too_high",
    "dta_data_words",
    "dta_unknown_list",
    "dta_hop_out_of_range",
    "dta_value_out_of_range",
    "dta_primitive_disabled",
    "dta_slot_busy",
    "dta_rate_limited",
];

impl TranslatorStage {
    pub fn new(
        t: Translator,
        variant: Variant,
        limiter: Option<RateLimiter>,
        workers: usize,
        worker: usize,
        shared: Arc<Shared>,
        reasons: &mut Reasons,
    ) -> TranslatorStage {
        TranslatorStage {
            t,
            variant,
            limiter,
            workers: workers as u16,
            worker,
            shared,
            nacks: 0,
            handed_off: 0,
            not_report: reasons.register("dta_not_report"),
            stored: reasons.register("dta_stored"),
            refused: REFUSED_NAMES.map(|n| reasons.register(n)),
            dirty: false,
            loopback: None,
            rdma: None,
        }
    }

    /// RoCEv2 output: valid reports become RDMA requests made here, in the worker, in the
    /// report's own buffer and the batch's spare buffers, sent on `r.port`; responses
    /// (UDP 4791) resynchronise the owning worker's queue pair.
    pub fn with_rdma(mut self, r: RdmaOut) -> TranslatorStage {
        self.rdma = Some(r);
        self
    }

    /// Benchmarks only: loop stored reports back (see [`Loopback`]).
    pub fn with_loopback(mut self, l: Loopback) -> TranslatorStage {
        self.loopback = Some(l);
        self
    }

    /// The worker that owns an Append list or a postcard key, if the payload is one.
    fn owner(&self, payload: &[u8]) -> Option<u16> {
        let b = self.variant.base_len();
        let op = *payload.first()?;
        let id = payload.get(b..b + 4)?;
        if op != opcode::APPEND && op != opcode::POSTCARDING {
            return None;
        }
        let id = u32::from_be_bytes([id[0], id[1], id[2], id[3]]);
        Some((peregrine_dta::hash::g(id) % self.workers as u32) as u16)
    }

    /// Store the counters into this worker's slot, word by word (no staging array: this
    /// runs after every batch). The RoCEv2 words are stored in that mode only (0 otherwise,
    /// as the slot starts). The layout is [`from_words`]'s.
    fn publish(&mut self) {
        if let Some(slot) = self.shared.workers.get(self.worker) {
            let (w, c) = (&slot.words, &self.t.counters);
            let head = [
                c.key_write,
                c.key_increment,
                c.append,
                c.postcard,
                c.region_writes,
                c.postcard_paths_complete,
                c.postcard_early_flush,
                c.postcard_duplicate_hop,
            ];
            let tail = [self.nacks, self.handed_off];
            let (w_head, rest) = w.split_at(head.len());
            let (w_refused, rest) = rest.split_at(Refusal::COUNT);
            let (w_tail, rdma) = rest.split_at(tail.len());
            for (a, v) in w_head.iter().zip(head) {
                a.store(v, Ordering::Relaxed);
            }
            for (a, v) in w_refused.iter().zip(c.refused) {
                a.store(v, Ordering::Relaxed);
            }
            for (a, v) in w_tail.iter().zip(tail) {
                a.store(v, Ordering::Relaxed);
            }
            if let Some(o) = &self.rdma {
                let r = RdmaStats {
                    resyncs: o.qp.resyncs(),
                    paths_complete: o.qp.paths_complete,
                    paths_early: o.qp.paths_early,
                    ..o.stats
                };
                for (a, v) in rdma.iter().zip(r.words()) {
                    a.store(v, Ordering::Relaxed);
                }
            }
        }
        self.dirty = false;
    }

    /// One packet. The common frame (IPv4 without options) is parsed at fixed offsets and
    /// handled with its UDP header at the constant [`FIXED_UDP`]; any other frame takes the
    /// general parse, out of line. `SIMPLE`: one worker and no rate limit (the per-packet
    /// tests for either are left out); `lb`: [`Self::loopback`], passed in so that a batch
    /// loop knows it as a constant. Inlined into each of [`Stage::process`]'s batch loops.
    #[inline(always)]
    fn one<B: PacketBuf, const SIMPLE: bool>(
        &mut self,
        pkt: &mut B,
        rx_port: u16,
        now_ns: u64,
        lb: Option<Loopback>,
    ) -> Disposition {
        match report_offsets_fixed(pkt.data()) {
            Fixed::Udp(src, len, dport) => {
                self.report::<B, SIMPLE>(pkt, FIXED_UDP, src, len, dport, rx_port, now_ns, lb)
            }
            Fixed::NotUdp => Disposition::drop_as(self.not_report),
            Fixed::Other => self.one_general::<B, SIMPLE>(pkt, rx_port, now_ns),
        }
    }

    /// [`one`](Self::one) for a frame the fixed-offset parse does not take. The loop-back is
    /// read here, not passed in: a by-value argument of this out-of-line call would be copied
    /// to the stack for every packet of the batch loop.
    #[cold]
    #[inline(never)]
    fn one_general<B: PacketBuf, const SIMPLE: bool>(
        &mut self,
        pkt: &mut B,
        rx_port: u16,
        now_ns: u64,
    ) -> Disposition {
        let lb = self.loopback;
        match report_offsets_general(pkt.data()) {
            Some((udp_at, src, len, dport)) => {
                self.report::<B, SIMPLE>(pkt, udp_at, src, len, dport, rx_port, now_ns, lb)
            }
            None => Disposition::drop_as(self.not_report),
        }
    }

    /// A UDP datagram at `udp_at` (from IPv4 source `src`, UDP length `len`, destination port
    /// `dport`).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn report<B: PacketBuf, const SIMPLE: bool>(
        &mut self,
        pkt: &mut B,
        udp_at: usize,
        src: u32,
        len: usize,
        dport: u16,
        rx_port: u16,
        now_ns: u64,
        lb: Option<Loopback>,
    ) -> Disposition {
        if dport != dta::UDP_PORT {
            return Disposition::drop_as(self.not_report);
        }
        let frame = pkt.data_mut();
        let Some(payload) = frame.get_mut(udp_at + udp::HEADER_LEN..udp_at + len) else {
            return Disposition::drop_as(self.not_report);
        };
        if !SIMPLE && self.workers > 1 {
            if let Some(w) = self.owner(payload) {
                if w as usize != self.worker {
                    self.handed_off += 1;
                    // Resume at this stage, the kind's only one, on the owner.
                    return Disposition::handoff(w, 0);
                }
            }
        }
        let allowed = match &mut self.limiter {
            Some(l) if !SIMPLE => l.allow(src, now_ns),
            _ => true,
        };
        let verdict = if allowed {
            self.t.handle(payload)
        } else {
            Err(self.t.refuse(Refusal::RateLimited, payload))
        };
        match verdict {
            Ok(()) => match lb {
                Some(l) => {
                    l.advance(payload);
                    Disposition::tx(rx_port ^ 1)
                }
                None => Disposition::drop_as(self.stored),
            },
            Err(r) => self.refused_as(pkt, udp_at, r.nack, self.refused[r.why.index()], rx_port),
        }
    }

    /// A refused report: NACKed in place when retransmittable (sent back out of its rx
    /// port), else dropped as `reason`.
    fn refused_as<B: PacketBuf>(
        &mut self,
        pkt: &mut B,
        udp_at: usize,
        nack: Option<u8>,
        reason: DropReason,
        rx_port: u16,
    ) -> Disposition {
        match nack {
            Some(seq) if nack_in_place(pkt, udp_at, seq) => {
                self.nacks += 1;
                Disposition::tx(rx_port)
            }
            _ => Disposition::drop_as(reason),
        }
    }
}

/// (UDP header offset, IPv4 source, UDP length, UDP destination port) of an IPv4 / UDP
/// frame, or `None`: every check of the general parse (`report_offsets_general`: the
/// Ethernet, IPv4 and UDP lengths, version, protocol, the IPv4 header checksum), for the
/// common IPv4 header without options (IHL 5) at fixed offsets (`report_offsets_fixed`);
/// any other frame takes the general parse. Public for the benchmark's hash-map collector
/// (`perf/`), which checks the outer headers as the translator does.
#[inline(always)]
pub fn report_offsets(f: &[u8]) -> Option<(usize, u32, usize, u16)> {
    match report_offsets_fixed(f) {
        Fixed::Udp(src, len, dport) => Some((FIXED_UDP, src, len, dport)),
        Fixed::NotUdp => None,
        Fixed::Other => report_offsets_general(f),
    }
}

/// The UDP header's offset in a frame whose IPv4 header has no options.
const FIXED_UDP: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN;

/// What [`report_offsets_fixed`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fixed {
    /// An IPv4 / UDP frame with its UDP header at [`FIXED_UDP`]: IPv4 source, UDP length, UDP
    /// destination port.
    Udp(u32, usize, u16),
    /// A frame with an IPv4 header without options that the general parse refuses too.
    NotUdp,
    /// Not at fixed offsets (shorter than the three headers, or IHL other than 5): for the
    /// general parse.
    Other,
}

/// [`report_offsets`] at fixed offsets: every check of the general parse for a frame whose
/// IPv4 header has no options (IHL 5).
#[inline(always)]
fn report_offsets_fixed(f: &[u8]) -> Fixed {
    const IP: usize = ethernet::HEADER_LEN;
    const UDP: usize = FIXED_UDP;
    let Some(h) = f.get(..UDP + udp::HEADER_LEN) else {
        return Fixed::Other;
    };
    if h[IP] != 0x45 {
        return Fixed::Other;
    }
    let be16 = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]) as usize;
    // Total Length covers header + UDP header at least and fits in the frame; the UDP
    // length is at least its header and fits in the IP payload (as `udp::check_len` on it).
    let total = be16(IP + 2);
    let ulen = be16(UDP + 4);
    if be16(12) != usize::from(ethernet::ethertype::IPV4)
        || h[IP + 9] != ipv4::ip_protocol::UDP
        || total < ipv4::HEADER_LEN + udp::HEADER_LEN
        || total > f.len() - IP
        || ulen < udp::HEADER_LEN
        || ulen > total - ipv4::HEADER_LEN
        || !h[IP..UDP].first_chunk().is_some_and(header_checksum_ok)
    {
        return Fixed::NotUdp;
    }
    let src = u32::from_be_bytes([h[IP + 12], h[IP + 13], h[IP + 14], h[IP + 15]]);
    Fixed::Udp(src, ulen, be16(UDP + 2) as u16)
}

/// RFC 1071 over a 20-byte IPv4 header, checksum included: the one's-complement sum is all
/// ones. Folding a sum's carries back in (end-around carry) keeps it modulo 0xffff, so the
/// folded sum is all ones exactly when the plain sum is a non-zero multiple of 0xffff (a
/// remainder by a constant: a multiply, no fold loop). The header is summed as native-order
/// words, two of 64 bits and one of 32: a word is the sum of its 16-bit parts modulo 0xffff
/// (2^16 = 1 there), and a byte-swapped 16-bit word is 256 times the word modulo
/// 0xffff (RFC 1071 section 2 (B)), 256 being invertible, so "a multiple of 0xffff" is the
/// same in either byte order.
#[inline(always)]
fn header_checksum_ok(h: &[u8; 20]) -> bool {
    // Two 64-bit words and a 32-bit one, added with end-around carries (2^64 is 1 modulo
    // 0xffff, as 2^16 is): the result is the plain sum modulo 0xffff, and 0 only when every
    // word is 0 (then the plain sum is 0 too).
    let a = u64::from_ne_bytes(*h[..8].first_chunk().expect("8 of 20"));
    let b = u64::from_ne_bytes(*h[8..].first_chunk().expect("8 of 12"));
    let c = u64::from(u32::from_ne_bytes(*h[16..].first_chunk().expect("4 of 4")));
    let (s, o1) = a.overflowing_add(b);
    let (s, o2) = s.overflowing_add(c + u64::from(o1));
    // No overflow: with o2 set, s is below c + 1 <= 2^32.
    let s = s + u64::from(o2);
    peregrine_dataplane::classify::sum_is_ones(s)
}

/// [`report_offsets`] by the wire crate's general parse (any header length).
#[cold]
fn report_offsets_general(f: &[u8]) -> Option<(usize, u32, usize, u16)> {
    let eth = ethernet::Frame::new_checked(f).ok()?;
    if eth.ethertype() != ethernet::ethertype::IPV4 {
        return None;
    }
    let ip = ipv4::Packet::new_checked(eth.payload()).ok()?;
    if ip.protocol() != ipv4::ip_protocol::UDP || !ip.verify_checksum() {
        return None;
    }
    let udp_at = ethernet::HEADER_LEN + ip.header_len();
    let u = udp::Packet::new_checked(ip.payload()).ok()?;
    Some((
        udp_at,
        u32::from(ip.src_addr()),
        u.length() as usize,
        u.dst_port(),
    ))
}

/// Rewrite a report frame into a NACK back to its sender: addresses swapped, UDP 40040 ->
/// the sender's port 40044, a 2-byte payload, lengths and checksums redone.
fn nack_in_place<B: PacketBuf>(pkt: &mut B, udp_at: usize, seq: u8) -> bool {
    let ip_at = ethernet::HEADER_LEN;
    let new_len = udp_at + udp::HEADER_LEN + dta::ACK_LEN;
    if pkt.len() < new_len {
        return false;
    }
    let extra = pkt.len() - new_len;
    if pkt.trim(extra).is_err() {
        return false;
    }
    let d = pkt.data_mut();
    let (src_mac, dst_mac) = {
        let e = ethernet::Frame::new_unchecked(&d[..]);
        (e.src_addr(), e.dst_addr())
    };
    let mut e = ethernet::Frame::new_unchecked(&mut d[..]);
    e.set_dst_addr(src_mac);
    e.set_src_addr(dst_mac);
    let ihl = udp_at - ip_at;
    let (src, dst) = {
        let mut ip = ipv4::Packet::new_unchecked(&mut d[ip_at..udp_at]);
        let (s, t) = (ip.src_addr(), ip.dst_addr());
        ip.set_src_addr(t);
        ip.set_dst_addr(s);
        ip.set_total_len((ihl + udp::HEADER_LEN + dta::ACK_LEN) as u16);
        ip.set_ttl(64);
        ip.fill_checksum();
        (t, s)
    };
    let _ = AckRepr {
        seqnum: seq,
        nack: true,
    }
    .emit(&mut d[udp_at + udp::HEADER_LEN..]);
    let mut u = udp::Packet::new_unchecked(&mut d[udp_at..]);
    u.set_src_port(dta::UDP_PORT);
    u.set_dst_port(dta::ACK_UDP_PORT);
    u.set_length((udp::HEADER_LEN + dta::ACK_LEN) as u16);
    u.fill_checksum_v4(src, dst);
    true
}

impl<B: PacketBuf> Stage<B> for TranslatorStage {
    fn name(&self) -> &'static str {
        "dta_translator"
    }

    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        let rx = batch.rx_port;
        let now = cx.now_ns();
        if self.rdma.is_some() {
            self.process_rdma(batch, now);
        } else {
            // Decided per report; a batch whose reports all end alike (all stored, or all
            // looped back) stays one decision, which the worker carries out for the whole
            // batch at once (one tx burst, or one bulk free).
            //
            // One worker and no rate limit (the daemon's common set-up and the benchmark's):
            // the per-packet tests for a hand-off and for the limiter are left out of the loop,
            // and the loop-back (benchmarks only) is a constant of each loop.
            if self.workers <= 1 && self.limiter.is_none() {
                match self.loopback {
                    Some(lb) => batch.decide_each(|p| self.one::<B, true>(p, rx, now, Some(lb))),
                    None => batch.decide_each(|p| self.one::<B, true>(p, rx, now, None)),
                }
            } else {
                let lb = self.loopback;
                batch.decide_each(|p| self.one::<B, false>(p, rx, now, lb));
            }
            // Published once per batch, not marked per report (most batches are reports).
            self.dirty = true;
        }
        if self.dirty {
            self.publish();
        }
    }

    fn idle(&mut self) {
        // No reports for a while: write partial Append batches and cached postcards so the
        // collector sees them (RoCEv2 mode: with the next batch's buffers, which an idle
        // stage has none of), and publish the counters.
        match &mut self.rdma {
            Some(r) => r.flush_pending = true,
            None => self.t.flush(),
        }
        self.publish();
    }

    fn spare_buffers(&self) -> usize {
        if self.rdma.is_some() {
            RDMA_SPARES
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests;
