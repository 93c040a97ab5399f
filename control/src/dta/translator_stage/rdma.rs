//! The translator stage's RoCEv2 output, made in the worker at line rate: a valid report's
//! RDMA requests are written into the batch's spare buffers (`Stage::spare_buffers`: the
//! worker tops them up from its pool after each batch, 64 at most) appended to the batch,
//! and leave on the RoCEv2 port with it, in PSN order (the batch is sent in packet order;
//! the report's own buffer is not reused, as it would leave before earlier reports'
//! appended frames). Each worker has its own queue
//! pair (PSNs per QP, QPs partitioned per worker); a response (ACK / NAK, UDP 4791) goes to
//! the worker owning its destination QP, whose QP resynchronises on a PSN-sequence NAK.
//!
//! A report whose frames would not all find a buffer (spares or batch room) is dropped as
//! `dta_rdma_no_buffer` (NACKed when retransmittable) before any frame is made, so a
//! report is all or nothing.

use super::{report_offsets, TranslatorStage};
use peregrine_dataplane::runtime::{Batch, Disposition};
use peregrine_dataplane::PacketBuf;
use peregrine_dta::Refusal;
use peregrine_wire::dta::{self, Primitive, Repr};
use peregrine_wire::{roce, udp};

/// Make `b` hold exactly `frame`.
fn put<B: PacketBuf>(b: &mut B, frame: &[u8]) -> bool {
    let len = b.len();
    let ok = if len > frame.len() {
        b.trim(len - frame.len()).is_ok()
    } else {
        b.append(frame.len() - len).is_ok()
    };
    if ok {
        b.data_mut().copy_from_slice(frame);
    }
    ok
}

impl TranslatorStage {
    pub(super) fn process_rdma<B: PacketBuf>(&mut self, batch: &mut Batch<B>, now_ns: u64) {
        let n = batch.len();
        self.flush_staged(batch);
        for i in 0..n {
            if !batch.disposition(i).is_continue() {
                continue;
            }
            let d = self.one_rdma(batch, i, now_ns);
            batch.set_disposition(i, d);
        }
    }

    /// After an idle spell: staged Append batches and postcards, in as many frames as the
    /// batch's spare buffers allow (the rest with the next batches).
    fn flush_staged<B: PacketBuf>(&mut self, batch: &mut Batch<B>) {
        let Some(r) = self.rdma.as_mut().filter(|r| r.flush_pending) else {
            return;
        };
        let budget = batch.spares().min(batch.room());
        let port = r.port;
        let mut sent = 0;
        let done = r.qp.flush_some(budget, |f| {
            if let Some(mut b) = batch.take_spare() {
                if put(&mut b, f) && batch.push(b, Disposition::tx(port)).is_ok() {
                    sent += 1;
                }
            }
        });
        r.flush_pending = !done;
        r.stats.sent += sent;
        self.dirty |= sent > 0;
    }

    fn one_rdma<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        now_ns: u64,
    ) -> Disposition {
        let rx_port = batch.rx_port;
        let Some((udp_at, src, len, dport)) = report_offsets(batch.pkts[i].data()) else {
            return Disposition::drop_as(self.not_report);
        };
        if dport == roce::UDP_PORT {
            return self.response(batch.pkts[i].data());
        }
        if dport != dta::UDP_PORT {
            return Disposition::drop_as(self.not_report);
        }
        let payload = &batch.pkts[i].data()[udp_at + udp::HEADER_LEN..udp_at + len];
        if self.workers > 1 {
            if let Some(w) = self.owner(payload) {
                if w as usize != self.worker {
                    self.handed_off += 1;
                    return Disposition::handoff(w, 0);
                }
            }
        }
        self.dirty = true;
        if let Some(l) = &mut self.limiter {
            if !l.allow(src, now_ns) {
                let r = self.t.refuse(Refusal::RateLimited, payload);
                let reason = self.refused[r.why.index()];
                return self.refused_as(&mut batch.pkts[i], udp_at, r.nack, reason, rx_port);
            }
        }
        let parsed = match dta::parse_one_word(payload, self.variant) {
            Some(p) => Ok(p),
            None => dta::Packet::new_checked(payload, self.variant)
                .and_then(|p| Repr::parse(&p))
                .map(|r| (r.primitive, r.retransmittable.then_some(r.seqnum)))
                .map_err(|e| match e {
                    peregrine_wire::Error::Truncated => Refusal::Truncated,
                    peregrine_wire::Error::Unsupported => Refusal::UnknownOpcode,
                    _ => Refusal::Malformed,
                }),
        }
        .and_then(|(p, nack)| {
            peregrine_dta::rdma::check(self.t.store().layout(), &p).map(|()| (p, nack))
        });
        let (prim, nack) = match parsed {
            Ok(r) => r,
            Err(why) => {
                let r = self.t.refuse(why, payload);
                let reason = self.refused[why.index()];
                return self.refused_as(&mut batch.pkts[i], udp_at, r.nack, reason, rx_port);
            }
        };
        let Some(out) = self.rdma.as_mut() else {
            return Disposition::drop_as(self.not_report);
        };
        let need = out.qp.max_frames(&prim);
        if batch.spares() < need || batch.room() < need {
            out.stats.no_buffer += 1;
            let reason = out.no_buffer;
            return self.refused_as(&mut batch.pkts[i], udp_at, nack, reason, rx_port);
        }
        // Every frame in a spare buffer appended to the batch, none in the report's own:
        // the batch goes out in packet order, and a QP's PSNs must leave in order.
        let port = out.port;
        let mut sent = 0u64;
        // Checked above.
        let done = out.qp.handle_checked(&prim, |f| {
            // Reserved above: a spare and room for every frame.
            if let Some(mut b) = batch.take_spare() {
                if put(&mut b, f) && batch.push(b, Disposition::tx(port)).is_ok() {
                    sent += 1;
                }
            }
        });
        out.stats.sent += sent;
        if let Err(why) = done {
            // Not expected after `check`; refused and counted, never taken silently.
            let payload = &batch.pkts[i].data()[udp_at + udp::HEADER_LEN..udp_at + len];
            let r = self.t.refuse(why, payload);
            let reason = self.refused[why.index()];
            return self.refused_as(&mut batch.pkts[i], udp_at, r.nack, reason, rx_port);
        }
        let c = &mut self.t.counters;
        match prim {
            Primitive::KeyWrite { .. } => c.key_write += 1,
            Primitive::KeyIncrement { .. } => c.key_increment += 1,
            Primitive::Append { .. } => c.append += 1,
            Primitive::Postcard { .. } => c.postcard += 1,
        }
        match self.loopback {
            // Benchmarks: the report goes round again, as in region mode.
            Some(l) => {
                l.advance(&mut batch.pkts[i].data_mut()[udp_at + udp::HEADER_LEN..udp_at + len]);
                Disposition::tx(rx_port ^ 1)
            }
            None => Disposition::drop_as(self.stored),
        }
    }

    /// A RoCEv2 frame: a response to the queue pair it names, on the worker that owns it.
    fn response(&mut self, frame: &[u8]) -> Disposition {
        let Some(out) = self.rdma.as_mut() else {
            return Disposition::drop_as(self.not_report);
        };
        let ip = &frame[peregrine_wire::ethernet::HEADER_LEN..];
        let at = ((ip[0] & 0x0f) as usize) * 4 + udp::HEADER_LEN;
        let Some(bth) = ip.get(at..).and_then(|b| roce::Bth::parse(b).ok()) else {
            return Disposition::drop_as(self.not_report);
        };
        match out.local_qps.iter().position(|q| *q == bth.dest_qp) {
            Some(w) if w == self.worker => {
                out.qp.on_response(ip);
                self.dirty = true;
                Disposition::drop_as(out.response)
            }
            Some(w) => {
                self.handed_off += 1;
                Disposition::handoff(w as u16, 0)
            }
            None => Disposition::drop_as(self.not_report),
        }
    }
}
