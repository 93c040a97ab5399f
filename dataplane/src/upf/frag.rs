//! Fragmentation of an oversize IPv4 user packet without DF before GTP-U encapsulation
//! (RFC 791 section 3.2, "An Example Fragmentation Procedure"), so that every piece is a
//! whole G-PDU that fits the N3/N9 MTU and the gNB has nothing to reassemble: RFC 4459
//! section 3 weighs fragmenting the inner packet against fragmenting the outer one; the
//! receiver of inner fragments is the UE (or the data-network host), which reassembles IP
//! anyway, while outer fragments make the tunnel endpoint (the gNB, usually a
//! constrained box) reassemble at line rate. The choice is argued in `docs/upf.md`.
//!
//! The stage's emit phase records a `FragJob` instead of a disposition; the stage then
//! calls `Work::fragment` with the batch in hand, which takes the extra pieces' buffers
//! from the batch's spares (the worker's pool, topped up between batches: nothing is
//! allocated here) and appends them to the batch with the packet's disposition.

use crate::buffer::PacketBuf;
use crate::classify::{flags, FIRST_FRAGMENT};
use crate::runtime::{Batch, Disposition};
use crate::upf::emit::Stamp;
use crate::upf::encap::{self, Psc};
use crate::upf::stats::Total;
use crate::upf::tables::OuterHeader;
use crate::upf::work::Work;
use peregrine_wire::ethernet::{self, ethertype, Address as MacAddr};
use peregrine_wire::ipv4;

/// Most pieces one packet is cut into (a 2048-byte buffer's packet over a 576-byte MTU
/// needs 4).
pub const MAX_PIECES: usize = 16;

/// Spare buffers the stage asks the worker to keep in each batch: a burst of 32 full-size
/// packets cut in 2, twice over.
pub const SPARES: usize = 64;

/// How the pieces leave: encapsulated toward a GTP-U peer, or routed on N6.
#[derive(Debug, Clone, Copy)]
pub(super) enum Out {
    Encap {
        outer: OuterHeader,
        psc: Psc,
        src_port: u16,
    },
    Routed,
}

/// A packet the emit phase decided to fragment: everything [`Work::fragment`] needs to
/// finish it. The packet holds exactly the user IPv4 packet, TTL already decremented.
#[derive(Debug, Clone, Copy)]
pub(super) struct FragJob {
    /// Largest piece (inner IPv4 packet) in bytes.
    pub budget: usize,
    pub out: Out,
    pub dst_mac: MacAddr,
    pub src_mac: MacAddr,
    pub disp: Disposition,
    pub stamp: Stamp,
}

/// Payload bytes per piece (a multiple of 8) and the number of pieces to cut an IPv4
/// packet of `len` bytes with a `hl`-byte header into, each at most `max` bytes; `None` if
/// not even 8 payload bytes fit (or the packet is not longer than its header).
pub fn plan(hl: usize, len: usize, max: usize) -> Option<(usize, usize)> {
    let unit = max.checked_sub(hl)? & !7;
    if unit == 0 || len <= hl {
        return None;
    }
    Some((unit, (len - hl).div_ceil(unit)))
}

/// The options of an IPv4 header that every fragment repeats (copied flag set, RFC 791
/// section 3.1), written to `out` and padded with End of Option List to a multiple of 4;
/// returns their length. A malformed option list ends the copy where it breaks.
pub fn copied_options(opts: &[u8], out: &mut [u8; 40]) -> usize {
    let mut i = 0;
    let mut n = 0;
    while i < opts.len().min(40) {
        match opts[i] {
            0 => break,
            1 => i += 1,
            t => {
                let Some(&l) = opts.get(i + 1) else { break };
                let l = usize::from(l);
                if l < 2 || i + l > opts.len() {
                    break;
                }
                if t & 0x80 != 0 {
                    out[n..n + l].copy_from_slice(&opts[i..i + l]);
                    n += l;
                }
                i += l;
            }
        }
    }
    let padded = (n + 3) & !3;
    out[n..padded].fill(0);
    padded
}

/// Write a fragment's header into `out` (exactly `20 + opts.len()` bytes): the original
/// header's fixed part `fixed` with `opts`, `payload` bytes at byte `offset` of the
/// original datagram, MF = `more`, header checksum filled.
pub fn write_header(
    out: &mut [u8],
    fixed: &[u8; 20],
    opts: &[u8],
    offset: usize,
    payload: usize,
    more: bool,
) {
    out[..20].copy_from_slice(fixed);
    out[20..20 + opts.len()].copy_from_slice(opts);
    let mut ip = ipv4::Packet::new_unchecked(&mut out[..]);
    ip.set_version_and_header_len(20 + opts.len());
    ip.set_total_len((20 + opts.len() + payload) as u16);
    ip.set_frag_offset(offset as u16);
    ip.set_more_frags(more);
    ip.fill_checksum();
}

impl Work<'_> {
    /// Finish `job` for packet `i` of `batch` (see the module docs): cut it, write every
    /// piece out as the job says, append the later pieces to the batch and return the
    /// first one's disposition. Without enough spare buffers or batch room the packet is
    /// dropped as `frag_no_buffer`.
    pub(super) fn fragment<B: PacketBuf>(
        &mut self,
        batch: &mut Batch<B>,
        i: usize,
        job: &FragJob,
    ) -> Disposition {
        let d = self.d;
        let (dir, qfi) = (job.stamp.dir, job.stamp.qfi);
        let data = batch.pkts[i].data();
        let ip = ipv4::Packet::new_unchecked(data);
        let (hl, len) = (ip.header_len(), data.len());
        let (base_off, last_more) = (usize::from(ip.frag_offset()), ip.more_frags());
        let Some((unit, n)) = plan(hl, len, job.budget) else {
            return self.drop_q(dir, qfi, d.mtu_exceeded);
        };
        if base_off + len - hl > usize::from(u16::MAX) - 7 {
            return self.drop_q(dir, qfi, d.mtu_exceeded);
        }
        if n > MAX_PIECES || batch.spares() < n - 1 || batch.room() < n - 1 {
            return self.drop_q(dir, qfi, d.frag_no_buffer);
        }
        let fixed: [u8; 20] = data[..20].try_into().expect("20-byte header");
        let mut opts = [0u8; 40];
        let olen = copied_options(&data[20..hl], &mut opts);
        let later_hl = 20 + olen;
        let meta = batch.pkts[i].meta();
        let rec = *batch.pkts[i].pkt_meta();
        for k in 1..n {
            let Some(mut b) = batch.take_spare() else {
                break;
            };
            let start = hl + k * unit;
            let end = (start + unit).min(len);
            let src = &batch.pkts[i].data()[start..end];
            let ok = match b.append(later_hl + src.len()) {
                Ok(room) => {
                    let more = k < n - 1 || last_more;
                    let at = base_off + k * unit;
                    write_header(room, &fixed, &opts[..olen], at, src.len(), more);
                    room[later_hl..].copy_from_slice(src);
                    true
                }
                Err(_) => false,
            };
            b.set_meta(meta);
            *b.pkt_meta_mut() = rec;
            let disp = if ok && self.emit_piece(&mut b, job) {
                let m = b.pkt_meta_mut();
                m.inner_l4_off = 0;
                if !matches!(job.out, Out::Encap { .. }) {
                    m.l4_off = 0;
                }
                m.flags = (m.flags | flags::FRAGMENT) & !(flags::L4 | FIRST_FRAGMENT);
                job.disp
            } else {
                Disposition::drop_as(d.encap_failed)
            };
            // Room was checked above.
            let _ = batch.push(b, disp);
        }
        // The first piece stays in the packet's own buffer.
        let p = &mut batch.pkts[i];
        {
            let mut ip = ipv4::Packet::new_unchecked(p.data_mut());
            ip.set_total_len((hl + unit) as u16);
            ip.set_more_frags(true);
            ip.fill_checksum();
        }
        if encap::set_len(p, hl + unit).is_err() || !self.emit_piece(p, job) {
            return self.drop_q(dir, qfi, d.encap_failed);
        }
        let m = p.pkt_meta_mut();
        m.flags = (m.flags | FIRST_FRAGMENT) & !flags::FRAGMENT;
        self.stats.count(Total::PacketsFragmented);
        self.stats.count_n(Total::FragmentsMade, n as u64);
        self.stats.qfi_sent(dir, qfi, len as u64);
        job.disp
    }

    /// Write one piece (a buffer holding exactly an IPv4 packet) out as the job says, and
    /// stamp its record; `false` if the headers did not fit.
    fn emit_piece<B: PacketBuf>(&self, p: &mut B, job: &FragJob) -> bool {
        match job.out {
            Out::Encap {
                outer,
                psc,
                src_port,
            } => {
                let qfi = job.stamp.qfi;
                if encap::encap_gtpu(p, &outer, qfi, psc, src_port, job.dst_mac, job.src_mac)
                    .is_err()
                {
                    return false;
                }
                job.stamp
                    .encapsulated(p.pkt_meta_mut(), outer.peer.is_ipv6(), outer.teid);
            }
            Out::Routed => {
                match p.prepend(ethernet::HEADER_LEN) {
                    Ok(h) => encap::write_eth(h, job.dst_mac, job.src_mac, ethertype::IPV4),
                    Err(_) => return false,
                }
                job.stamp.routed(p.pkt_meta_mut());
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_cuts_in_eights() {
        // 1500-byte packet into 1456-byte pieces (1500 MTU minus GTP-U over IPv4).
        assert_eq!(plan(20, 1500, 1456), Some((1432, 2)));
        assert_eq!(plan(20, 1456, 1456), Some((1432, 2)));
        assert_eq!(plan(20, 1452, 1456), Some((1432, 1)));
        assert_eq!(plan(24, 100, 40), Some((16, 5)));
        assert_eq!(plan(20, 100, 27), None);
        assert_eq!(plan(60, 100, 20), None);
        assert_eq!(plan(20, 20, 1500), None);
    }

    #[test]
    fn only_copied_options_repeat() {
        // NOP, Record Route (7, not copied, len 7), Security (130, copied, len 11), EOL.
        let mut opts = vec![1u8, 7, 7, 4, 0, 0, 0, 0];
        opts.extend_from_slice(&[130, 11, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        opts.push(0);
        let mut out = [0xffu8; 40];
        let n = copied_options(&opts, &mut out);
        assert_eq!(n, 12);
        assert_eq!(&out[..11], &opts[8..19]);
        assert_eq!(out[11], 0);
        // Broken lengths end the copy instead of panicking.
        assert_eq!(copied_options(&[130, 1], &mut out), 0);
        assert_eq!(copied_options(&[130, 50, 0], &mut out), 0);
        assert_eq!(copied_options(&[130], &mut out), 0);
    }
}
