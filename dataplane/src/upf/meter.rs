//! One worker's state of one QER meter slot in one cache line (64 bytes; it was 144 with a
//! general [`TrTcm`](crate::qos::TrTcm) and an optional [`Pacer`] side by side): an RFC 2698
//! TrTCM (colour-blind, as QERs meter: TS 29.244 section 5.2.1) with its two rates and
//! bursts copied in at (re)creation, or the session's pacer when the QER shapes its MBR.
//!
//! Arithmetic as [`crate::qos::trtcm`]: tokens in bytes x 10^9 so `elapsed_ns * rate`
//! refills exactly, here in `u64` (the product in `u128`, then capped), which holds bursts
//! up to 18.4 GB; a larger configured burst is held at that (at 400 Gbit/s a burst of
//! 18.4 GB is 368 ms of the rate; QER bursts are 10 ms of it).

use crate::qos::pacer::{Pacer, PacerConfig};
use crate::qos::trtcm::TrTcmConfig;
use crate::qos::{Colour, Pace};

const NS_PER_S: u64 = 1_000_000_000;

/// What a slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    /// Never created, or for another generation's rule.
    Dead = 0,
    /// Every packet green (a configuration the TrTCM refuses: PIR below CIR).
    Unlimited,
    Tcm,
    Pacer,
}

/// Per-worker meter state of one slot. For `Kind::Pacer` the fields hold the pacer:
/// `pir` its rate, `cbs` its burst tolerance in ns, `pbs` its queue limit in ns, `tp` its
/// theoretical arrival time.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
pub struct MeterSlot {
    /// Committed and peak tokens (bytes x 10^9).
    tc: u64,
    tp: u64,
    last_ns: u64,
    /// Rates in bytes/s.
    cir: u64,
    pir: u64,
    /// Capacities (bytes x 10^9).
    cbs: u64,
    pbs: u64,
    /// The generation in the low 32 bits, the [`Kind`] above ([`tag`]): the fast path's
    /// "this generation's TrTCM" is one compare.
    tag: u64,
}

/// A slot's `tag` for `kind` at `generation`.
#[inline(always)]
const fn tag(generation: u32, kind: Kind) -> u64 {
    generation as u64 | (kind as u64) << 32
}

const _: () = assert!(std::mem::size_of::<MeterSlot>() == 64);

impl MeterSlot {
    pub const EMPTY: MeterSlot = MeterSlot {
        tc: 0,
        tp: 0,
        last_ns: 0,
        cir: 0,
        pir: 0,
        cbs: 0,
        pbs: 0,
        tag: tag(0, Kind::Dead),
    };

    #[inline(always)]
    fn kind(&self) -> u64 {
        self.tag >> 32
    }

    /// Whether the slot holds the meter of generation `generation`.
    #[inline]
    pub fn is(&self, generation: u32) -> bool {
        self.kind() != Kind::Dead as u64 && self.tag as u32 == generation
    }

    /// Whether the slot shapes (a pacer) rather than polices.
    #[inline]
    pub fn shapes(&self) -> bool {
        self.kind() == Kind::Pacer as u64
    }

    /// (Re)create the slot for generation `generation` at `now_ns`, full buckets: the
    /// pacer if there is one (the TrTCM then only colours, and a shaped packet is coloured
    /// by its pacer), else the TrTCM of `cfg`.
    pub fn create(
        &mut self,
        cfg: TrTcmConfig,
        pacer: Option<PacerConfig>,
        generation: u32,
        now_ns: u64,
    ) {
        let scaled = |b: u64| b.saturating_mul(NS_PER_S);
        let (slot, kind) = match pacer {
            Some(p) => {
                let (rate, tau, queue, tat) = Pacer::new(p, now_ns).parts();
                let s = MeterSlot {
                    tp: tat,
                    pir: rate,
                    cbs: tau,
                    pbs: queue,
                    ..MeterSlot::EMPTY
                };
                (s, Kind::Pacer)
            }
            None if cfg.pir < cfg.cir => (MeterSlot::EMPTY, Kind::Unlimited),
            None => {
                let s = MeterSlot {
                    tc: scaled(cfg.cbs),
                    tp: scaled(cfg.pbs),
                    last_ns: now_ns,
                    cir: cfg.cir,
                    pir: cfg.pir,
                    cbs: scaled(cfg.cbs),
                    pbs: scaled(cfg.pbs),
                    ..MeterSlot::EMPTY
                };
                (s, Kind::Tcm)
            }
        };
        *self = MeterSlot {
            tag: tag(generation, kind),
            ..slot
        };
    }

    /// [`Self::mark`] if the slot holds the meter of generation `generation` and polices
    /// ([`Self::is`] and not [`Self::shapes`]), else `None` (nothing changed): the fast
    /// path's one meter, with one compare (generation and kind) on the common path.
    #[inline(always)]
    pub fn police(&mut self, generation: u32, now_ns: u64, len: u64) -> Option<Colour> {
        // Tests, not a `match` (which compiles to a jump table here); the common one first.
        if self.tag == tag(generation, Kind::Tcm) {
            Some(self.tcm(now_ns, len))
        } else if self.tag == tag(generation, Kind::Unlimited) {
            Some(Colour::Green)
        } else {
            // Another generation's, dead, or a pacer.
            None
        }
    }

    /// Colour a packet of `len` bytes at `now_ns` (RFC 2698 section 3, colour-blind); a
    /// pacer slot colours nothing (use [`Self::pace`]).
    #[inline]
    pub fn mark(&mut self, now_ns: u64, len: u64) -> Colour {
        if self.kind() != Kind::Tcm as u64 {
            return Colour::Green;
        }
        self.tcm(now_ns, len)
    }

    /// [`Self::mark`] of a `Kind::Tcm` slot.
    #[inline(always)]
    fn tcm(&mut self, now_ns: u64, len: u64) -> Colour {
        if now_ns > self.last_ns {
            let dt = now_ns - self.last_ns;
            // `min(t + dt * rate, cap)` exactly: a sum past `u64::MAX` is past `cap` too, so
            // 64-bit arithmetic with an overflow check gives the 128-bit answer.
            let fill = |t: u64, rate: u64, cap: u64| match dt
                .checked_mul(rate)
                .and_then(|f| f.checked_add(t))
            {
                Some(t) => t.min(cap),
                None => cap,
            };
            self.tc = fill(self.tc, self.cir, self.cbs);
            self.tp = fill(self.tp, self.pir, self.pbs);
            self.last_ns = now_ns;
        }
        let b = len.saturating_mul(NS_PER_S);
        if self.tp < b {
            return Colour::Red;
        }
        self.tp -= b;
        if self.tc < b {
            return Colour::Yellow;
        }
        self.tc -= b;
        Colour::Green
    }

    /// Schedule a packet of `len` bytes at `now_ns` on the slot's pacer
    /// ([`Pacer::pace`]); `None` if the slot does not shape.
    #[inline]
    pub fn pace(&mut self, now_ns: u64, len: u64) -> Option<Pace> {
        if self.kind() != Kind::Pacer as u64 {
            return None;
        }
        let mut p = Pacer::from_parts(self.pir, self.cbs, self.pbs, self.tp);
        let r = p.pace(now_ns, len);
        self.tp = p.parts().3;
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qos::trtcm::{ColourMode, TrTcm};

    /// The slot marks exactly as the general TrTCM does (colour-blind), packet by packet.
    #[test]
    fn marks_as_the_general_trtcm() {
        let cfgs = [
            (1000, 1000, 2000, 2000),
            (0, 0, 125_000, 3_200),
            (5_000_000, 50_000, 6_000_000, 60_000),
        ];
        for (cir, cbs, pir, pbs) in cfgs {
            let cfg = TrTcmConfig {
                cir,
                cbs,
                pir,
                pbs,
                mode: ColourMode::Blind,
            };
            let mut general = TrTcm::new(cfg, 7).unwrap();
            let mut slot = MeterSlot::EMPTY;
            slot.create(cfg, None, 3, 7);
            assert!(slot.is(3) && !slot.is(2) && !slot.shapes());
            let mut t = 7u64;
            for i in 0..5000u64 {
                t += (i * 7919) % 900_000;
                let len = 40 + (i * 131) % 1460;
                assert_eq!(
                    slot.mark(t, len),
                    general.mark(t, len, Colour::Green),
                    "{i}"
                );
            }
            // A clock going backwards adds nothing, as in the general meter.
            assert_eq!(
                slot.mark(t - 5, 100),
                general.mark(t - 5, 100, Colour::Green)
            );
        }
        // PIR below CIR: refused by the TrTCM, unlimited here as the stage always did.
        let mut s = MeterSlot::EMPTY;
        let bad = TrTcmConfig {
            cir: 10,
            cbs: 10,
            pir: 1,
            pbs: 1,
            mode: ColourMode::Blind,
        };
        s.create(bad, None, 1, 0);
        assert_eq!(s.mark(1, 1_000_000), Colour::Green);
        assert!(!MeterSlot::EMPTY.is(0));
    }

    #[test]
    fn paces_as_the_pacer() {
        let pc = PacerConfig {
            rate_bytes_per_s: 1_000_000,
            burst_bytes: 3000,
            queue_ns: 10_000_000,
        };
        let mut p = Pacer::new(pc, 0);
        let mut s = MeterSlot::EMPTY;
        let cfg = TrTcmConfig {
            cir: 0,
            cbs: 0,
            pir: 1_000_000,
            pbs: 3000,
            mode: ColourMode::Blind,
        };
        s.create(cfg, Some(pc), 9, 0);
        assert!(s.shapes() && s.is(9));
        for i in 0..40u64 {
            let t = i * 300_000;
            assert_eq!(s.pace(t, 1000), Some(p.pace(t, 1000)), "{i}");
        }
        assert_eq!(s.mark(1, 1), Colour::Green);
    }
}
