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
use peregrine_dta::{RateLimiter, Refusal, Refused, Translator};
use peregrine_wire::dta::{self, opcode, AckRepr, Primitive, Repr, Variant};
use peregrine_wire::roce;
use peregrine_wire::{ethernet, ipv4, udp};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Words of a published counter snapshot: the translator's counters, NACKs, hand-offs.
const WORDS: usize = 8 + Refusal::COUNT + 2;

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

fn to_words(c: &peregrine_dta::Counters, nacks: u64, handed_off: u64) -> [u64; WORDS] {
    let mut w = [0u64; WORDS];
    w[..8].copy_from_slice(&[
        c.key_write,
        c.key_increment,
        c.append,
        c.postcard,
        c.region_writes,
        c.postcard_paths_complete,
        c.postcard_early_flush,
        c.postcard_duplicate_hop,
    ]);
    w[8..8 + Refusal::COUNT].copy_from_slice(&c.refused);
    w[WORDS - 2] = nacks;
    w[WORDS - 1] = handed_off;
    w
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
    (c, w[WORDS - 2], w[WORDS - 1])
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
        let mut c = peregrine_dta::Counters::default();
        let (mut n, mut h) = (0, 0);
        for w in &self.workers {
            let words = std::array::from_fn(|i| w.words[i].load(Ordering::Relaxed));
            let (wc, wn, wh) = from_words(&words);
            c.add(&wc);
            n += wn;
            h += wh;
        }
        (c, n, h)
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
    /// RoCEv2 output: valid primitives for the control side to send.
    rdma: Option<rtrb::Producer<Primitive>>,
}

/// Reports a worker queues for the RoCEv2 output between two control ticks.
pub const RDMA_RING: usize = 8192;

/// The control side's end of a worker's RoCEv2 queue.
pub type RdmaRing = rtrb::Consumer<Primitive>;

/// Benchmark loop-back (`perf/`, never set by the daemon): a stored report is rewritten for
/// its next pass (key or data advanced, so a recirculating stream keeps writing new slots)
/// and sent back out of the other port of a `net_ring` pair, as `dpdk-testpmd`'s 5tswap
/// returns every packet.
#[derive(Debug, Clone, Copy)]
pub struct Loopback {
    base: usize,
}

/// Added to a looped-back report's key each pass (odd: every key of the 2^32 is visited).
const KEY_STEP: u32 = 0x3c6e_f373;

impl Loopback {
    pub fn new(variant: Variant) -> Loopback {
        Loopback {
            base: variant.base_len(),
        }
    }

    /// Advance the report at the start of `payload` (the UDP payload) for its next pass.
    pub fn advance(&self, payload: &mut [u8]) {
        let b = self.base;
        let at = match payload.first() {
            Some(&opcode::KEY_WRITE) | Some(&opcode::KEY_INCREMENT) => b + 1,
            Some(&opcode::POSTCARDING) => b,
            // Append: the data word.
            Some(&opcode::APPEND) => b + 4,
            _ => return,
        };
        if let Some(w) = payload.get_mut(at..at + 4) {
            let v = u32::from_be_bytes([w[0], w[1], w[2], w[3]]).wrapping_add(KEY_STEP);
            w.copy_from_slice(&v.to_be_bytes());
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

    /// RoCEv2 output: valid reports go to `tx` for the control side to send as RDMA
    /// requests (Append and Postcarding reports keep their owner worker, so each list's and
    /// key's reports stay in order through the ring); RoCEv2 frames arriving (the
    /// collector's ACK / NAK) go to the control thread.
    pub fn with_rdma(mut self, tx: rtrb::Producer<Primitive>) -> TranslatorStage {
        self.rdma = Some(tx);
        self
    }

    /// RoCEv2 mode: queue a valid report, refuse an invalid one by the region path's
    /// reason; `None` when the payload does not parse (`handle` refuses it by reason).
    fn queue_rdma(&mut self, payload: &[u8]) -> Option<Result<(), Refused>> {
        let tx = self.rdma.as_mut()?;
        let r = dta::Packet::new_checked(payload, self.variant)
            .and_then(|p| Repr::parse(&p))
            .ok()?;
        if let Err(why) = peregrine_dta::rdma::check(self.t.store().layout(), &r.primitive) {
            return Some(Err(self.t.refuse(why, payload)));
        }
        Some(match tx.push(r.primitive) {
            Ok(()) => {
                let c = &mut self.t.counters;
                match r.primitive {
                    Primitive::KeyWrite { .. } => c.key_write += 1,
                    Primitive::KeyIncrement { .. } => c.key_increment += 1,
                    Primitive::Append { .. } => c.append += 1,
                    Primitive::Postcard { .. } => c.postcard += 1,
                }
                Ok(())
            }
            // The control side is behind: refused like an over-rate report (NACKed when
            // retransmittable).
            Err(_) => Err(self.t.refuse(Refusal::RateLimited, payload)),
        })
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

    fn publish(&mut self) {
        if let Some(slot) = self.shared.workers.get(self.worker) {
            let w = to_words(&self.t.counters, self.nacks, self.handed_off);
            for (a, v) in slot.words.iter().zip(w) {
                a.store(v, Ordering::Relaxed);
            }
        }
        self.dirty = false;
    }

    fn one<B: PacketBuf>(&mut self, pkt: &mut B, rx_port: u16, now_ns: u64) -> Disposition {
        let Some((udp_at, src, len, dport)) = report_offsets(pkt.data()) else {
            return Disposition::drop_as(self.not_report);
        };
        if dport != dta::UDP_PORT {
            if dport == roce::UDP_PORT && self.rdma.is_some() {
                return Disposition::TO_CONTROL;
            }
            return Disposition::drop_as(self.not_report);
        }
        let payload = &pkt.data()[udp_at + udp::HEADER_LEN..udp_at + len];
        if self.workers > 1 {
            if let Some(w) = self.owner(payload) {
                if w as usize != self.worker {
                    self.handed_off += 1;
                    // Resume at this stage, the kind's only one, on the owner.
                    return Disposition::handoff(w, 0);
                }
            }
        }
        let allowed = match &mut self.limiter {
            Some(l) => l.allow(u32::from(src), now_ns),
            None => true,
        };
        let verdict = if allowed {
            match self.queue_rdma(payload) {
                Some(v) => v,
                None => self.t.handle(payload),
            }
        } else {
            Err(self.t.refuse(Refusal::RateLimited, payload))
        };
        self.dirty = true;
        match verdict {
            Ok(()) => match self.loopback {
                Some(l) => {
                    l.advance(&mut pkt.data_mut()[udp_at + udp::HEADER_LEN..udp_at + len]);
                    Disposition::tx(rx_port ^ 1)
                }
                None => Disposition::drop_as(self.stored),
            },
            Err(Refused { why, nack: None }) => Disposition::drop_as(self.refused[why.index()]),
            Err(Refused {
                why,
                nack: Some(seq),
            }) => {
                if nack_in_place(pkt, udp_at, seq) {
                    self.nacks += 1;
                    Disposition::tx(rx_port)
                } else {
                    Disposition::drop_as(self.refused[why.index()])
                }
            }
        }
    }
}

/// (UDP header offset, IPv4 source, UDP length, UDP destination port) of an IPv4 / UDP
/// frame, or `None`.
fn report_offsets(f: &[u8]) -> Option<(usize, std::net::Ipv4Addr, usize, u16)> {
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
    Some((udp_at, ip.src_addr(), u.length() as usize, u.dst_port()))
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
        batch.for_each_active(|p| self.one(p, rx, now));
        if self.dirty {
            self.publish();
        }
    }

    fn idle(&mut self) {
        // No reports for a while: write partial Append batches and cached postcards so the
        // collector sees them, and publish the counters.
        self.t.flush();
        self.publish();
    }
}
