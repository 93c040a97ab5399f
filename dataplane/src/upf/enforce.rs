//! Enforce phase of the UPF stage (TS 29.244 section 5.2): the matched PDR's QERs (gate,
//! MBR / GBR meters as RFC 2698 TrTCM), URR volume counting and the FAR's apply action,
//! before the emit phase writes the packet out.

use crate::buffer::PacketBuf;
use crate::meta::flags;
use crate::qos::{Colour, Pace};
use crate::runtime::Disposition;
use crate::upf::parse::Flow;
use crate::upf::stats::Total;
use crate::upf::tables::{
    Direction, FarAction, MeterRef, OuterHeader, PdrRule, Shard, MAX_QERS_PER_PDR,
    MAX_URRS_PER_PDR, NONE,
};
use crate::upf::work::Work;

/// The flattened actions for one packet: from a fast-path record or from a matched PDR
/// with its QERs and FAR.
#[derive(Debug, Clone, Copy)]
pub(super) struct Plan {
    pub qfi: u8,
    pub gate_closed: bool,
    pub meters: [MeterRef; MAX_QERS_PER_PDR],
    pub meter_qers: [u32; MAX_QERS_PER_PDR],
    pub urrs: [u32; MAX_URRS_PER_PDR],
    /// `None`: the FAR index was dangling (dropped as `far_drop`).
    pub action: Option<FarAction>,
    pub remove_gtpu: bool,
    pub outer: Option<OuterHeader>,
}

impl Work<'_> {
    /// QERs, URRs and the FAR of the matched PDR. `inner_off` is where the user IP packet
    /// (`inner`) starts in the frame.
    #[allow(clippy::too_many_arguments)]
    pub fn apply<B: PacketBuf>(
        &mut self,
        p: &mut B,
        s: &Shard,
        pdr: &PdrRule,
        dir: Direction,
        pkt_qfi: Option<u8>,
        inner_off: usize,
        inner: &Flow,
    ) -> Disposition {
        // QFI: marked downlink (QER, else PDR), as received uplink.
        let mut qfi = match dir {
            Direction::Uplink => pkt_qfi.or(pdr.qfi).unwrap_or(0),
            Direction::Downlink => pdr.qfi.unwrap_or(0),
        };
        if dir == Direction::Downlink {
            if let Some(q) = pdr
                .qers
                .iter()
                .filter(|&&i| i != NONE)
                .find_map(|&i| s.qers.get(i as usize).and_then(|q| q.qfi))
            {
                qfi = q;
            }
        }
        let mut plan = Plan {
            qfi,
            gate_closed: false,
            meters: [MeterRef::NONE; MAX_QERS_PER_PDR],
            meter_qers: [NONE; MAX_QERS_PER_PDR],
            urrs: [NONE; MAX_URRS_PER_PDR],
            action: None,
            remove_gtpu: pdr.remove_gtpu,
            outer: None,
        };
        let mut k = 0;
        for &qi in pdr.qers.iter().filter(|&&i| i != NONE) {
            let Some(q) = s.qers.get(qi as usize) else {
                continue;
            };
            plan.gate_closed |= !q.gate_open;
            if q.meter_cfg.is_some() {
                plan.meters[k] = q.meter;
                plan.meter_qers[k] = qi;
                k += 1;
            }
        }
        for (d, u) in plan.urrs.iter_mut().zip(&pdr.urrs) {
            *d = u.slot;
        }
        if let Some(far) = s.fars.get(pdr.far as usize) {
            plan.action = Some(far.action);
            plan.outer = far.outer;
        }
        self.execute(p, s, &plan, dir, inner_off, inner)
    }

    /// Gate, meters (TS 29.244 section 5.2.1: QERs), usage counting (URRs) and the FAR
    /// action of a resolved plan; a forwarded packet goes on to the emit phase.
    pub fn execute<B: PacketBuf>(
        &mut self,
        p: &mut B,
        s: &Shard,
        plan: &Plan,
        dir: Direction,
        inner_off: usize,
        inner: &Flow,
    ) -> Disposition {
        let d = self.d;
        let len = inner.len as u64;
        let qfi = plan.qfi;
        if plan.gate_closed {
            return self.drop_q(dir, qfi, d.gate_closed);
        }
        let mut colour = None;
        // Shaping: the latest departure time any of the QERs asks for (0: now).
        let mut depart = 0u64;
        for (mr, &qi) in plan.meters.iter().zip(&plan.meter_qers) {
            if mr.slot == NONE {
                break;
            }
            let Some(m) = self.meters.get_mut(mr.slot as usize) else {
                self.stats.count(Total::MeterSlotsExceeded);
                continue;
            };
            if !m.is(mr.generation) {
                // A new QER in this slot, or a new MBR: start from full buckets.
                let Some(q) = s.qers.get(qi as usize) else {
                    continue;
                };
                let Some(cfg) = q.meter_cfg else {
                    continue;
                };
                m.create(cfg, q.pacer, mr.generation, self.now);
            }
            if let Some(pace) = m.pace(self.now, len) {
                // Shaped: delayed to the MBR (yellow), or dropped when the session's queue
                // is full; on time is green.
                let c = match pace {
                    Pace::Now => Colour::Green,
                    Pace::At(t) => {
                        depart = depart.max(t);
                        Colour::Yellow
                    }
                    Pace::Full => {
                        self.stats.qfi_colour(dir, qfi, Colour::Red);
                        return self.drop_q(dir, qfi, d.mbr_queue_full);
                    }
                };
                colour = colour.max(Some(c));
                continue;
            }
            let c = m.mark(self.now, len);
            colour = colour.max(Some(c));
            if c == Colour::Red {
                break;
            }
        }
        if let Some(c) = colour {
            self.stats.qfi_colour(dir, qfi, c);
            if c == Colour::Red {
                return self.drop_q(dir, qfi, d.mbr_exceeded);
            }
        }
        for &u in plan.urrs.iter().filter(|&&u| u != NONE) {
            self.stats.urr_add(u, dir, len, self.now);
        }
        match plan.action {
            None | Some(FarAction::Drop) => return self.drop_q(dir, qfi, d.far_drop),
            Some(FarAction::Buffer { .. }) => {
                self.stats.count(Total::Buffered);
                return Disposition::TO_CONTROL;
            }
            Some(FarAction::Forward) => {}
        }
        if dir == Direction::Uplink && !plan.remove_gtpu {
            return self.drop_q(dir, qfi, d.ul_without_decap);
        }
        if self.fix_l4 {
            let end = inner_off.saturating_add(inner.len);
            if let Some(ip) = p.data_mut().get_mut(inner_off..end) {
                if crate::upf::csum::fix_l4_checksum(ip) {
                    self.stats.count(Total::L4ChecksumsFixed);
                }
            }
        }
        let disp = self.forward(
            p,
            plan,
            dir,
            colour.unwrap_or(Colour::Green),
            inner_off,
            inner,
        );
        if depart > self.now {
            // The egress scheduler holds it until then (`qos::wheel`).
            let m = p.pkt_meta_mut();
            m.enqueue_ns = depart;
            m.flags |= flags::SHAPED;
        }
        disp
    }
}
