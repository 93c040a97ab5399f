//! The `impair` pipeline kind's main stage: a bump in the wire between two ports, each
//! direction an emulated link ([`LinkModel`]: loss, rate, delay, jitter), for live tests that
//! need a known delay on a path where `tc netem` is not available.
//!
//! A packet received on one port of a pair is offered to the model of the link towards the
//! other port, at the batch's time on the worker clock ([`Context::now_ns`]). A packet the
//! model drops gets a named reason (`impair_loss`, `impair_queue_full`); a delivered one is
//! sent on the other port through egress queue 0 with its departure time in
//! [`PacketMeta::enqueue_ns`] and [`flags::SHAPED`] set, so the port's egress scheduler holds
//! it on its timing wheel (`qos::wheel`, allocated once when the worker starts; 32.8 us slots,
//! a 268 ms horizon) until it is due. The worker serves its schedulers after every batch and
//! on every idle poll, so a held packet leaves within a slot of its time whether or not more
//! traffic arrives. The wheel holds at most the queue's depth ([`ImpairLink::egress`]); a
//! packet finding it full is the scheduler's tail drop (`egress_queue_full`, and per port
//! and queue).
//!
//! [`PacketMeta::enqueue_ns`]: crate::meta::PacketMeta::enqueue_ns
//! [`flags::SHAPED`]: crate::meta::flags::SHAPED

use super::impair::{ImpairConfigError, ImpairDrop, LinkConfig, LinkModel, Verdict};
use crate::buffer::PacketBuf;
use crate::io::PortId;
use crate::meta::flags;
use crate::qos::wheel::{HORIZON_NS, SLOT_SHIFT};
use crate::qos::{QueueClass, QueueConfig, SchedulerConfig, NUM_QUEUES};
use crate::runtime::{Batch, Context, Disposition, DropReason, EgressConfig, Reasons, Stage};

/// The farthest a packet may be held: the wheel's horizon less a slot of margin.
pub const MAX_HOLD_NS: u64 = HORIZON_NS - (1 << SLOT_SHIFT);

/// Why an impaired link's configuration was refused.
#[derive(Debug, thiserror::Error, Clone, Copy, PartialEq)]
pub enum LinkError {
    #[error(transparent)]
    Model(#[from] ImpairConfigError),
    #[error(
        "delay plus jitter can reach {0} ns, beyond the {MAX_HOLD_NS} ns the egress wheel holds"
    )]
    TooLong(u64),
    #[error("the rate limiter's queue can hold a packet {0} ns, beyond the {MAX_HOLD_NS} ns the egress wheel holds")]
    QueueTooLong(u64),
}

/// Check `cfg` and that the longest a packet can be held on its link fits the egress wheel:
/// queueing behind a full rate limiter (packets larger than the bucket are dropped, so each
/// queued one is at most `burst_bytes`), plus the delay, plus the jitter (the uniform's half
/// width, or six standard deviations of the normal).
pub fn check_link(cfg: &LinkConfig) -> Result<(), LinkError> {
    cfg.validate()?;
    let jitter = match cfg.jitter {
        super::impair::Jitter::Uniform => cfg.jitter_ns,
        super::impair::Jitter::Normal => cfg.jitter_ns.saturating_mul(6),
    };
    let hold = cfg.delay_ns.saturating_add(jitter);
    if hold > MAX_HOLD_NS {
        return Err(LinkError::TooLong(hold));
    }
    if let Some(rate) = cfg.rate_bytes_per_s {
        let bytes = (cfg.queue_limit as u64 + 1).saturating_mul(cfg.burst_bytes);
        let queue =
            u64::try_from(u128::from(bytes) * 1_000_000_000 / u128::from(rate)).unwrap_or(u64::MAX);
        if queue.saturating_add(hold) > MAX_HOLD_NS {
            return Err(LinkError::QueueTooLong(queue.saturating_add(hold)));
        }
    }
    Ok(())
}

/// One direction: packets received on `from` leave on `to` through `model`.
#[derive(Debug)]
struct Link {
    to: PortId,
    model: LinkModel,
}

/// The stage: for each port, the link its received packets take (at most one per port).
#[derive(Debug)]
pub struct ImpairLink {
    /// Indexed by rx port.
    links: Vec<Option<Link>>,
    loss: DropReason,
    queue_full: DropReason,
    no_link: DropReason,
}

impl ImpairLink {
    /// Links `(from, to, cfg)`; each port receives for at most one link.
    pub fn new(
        links: &[(PortId, PortId, LinkConfig)],
        reasons: &mut Reasons,
    ) -> Result<ImpairLink, LinkError> {
        let n = links
            .iter()
            .map(|&(f, _, _)| usize::from(f) + 1)
            .max()
            .unwrap_or(0);
        let mut out: Vec<Option<Link>> = (0..n).map(|_| None).collect();
        for &(from, to, cfg) in links {
            check_link(&cfg)?;
            out[usize::from(from)] = Some(Link {
                to,
                model: LinkModel::new(cfg)?,
            });
        }
        Ok(ImpairLink {
            links: out,
            loss: reasons.register("impair_loss"),
            queue_full: reasons.register("impair_queue_full"),
            no_link: reasons.register("impair_no_link"),
        })
    }

    /// The egress configuration of a port the stage sends on: queue 0 (strict priority)
    /// holds up to `hold` packets, on the wheel and queued; the other queues are unused.
    pub fn egress(hold: usize) -> EgressConfig {
        let mut scheduler = SchedulerConfig {
            queues: [QueueConfig {
                class: QueueClass::StrictPriority,
                depth: 1,
            }; NUM_QUEUES],
            ..SchedulerConfig::default()
        };
        scheduler.queues[0].depth = hold;
        EgressConfig {
            scheduler,
            default_qid: 0,
        }
    }

    /// The link model of packets received on `port` (its counters), if any.
    pub fn model(&self, port: PortId) -> Option<&LinkModel> {
        self.links
            .get(usize::from(port))?
            .as_ref()
            .map(|l| &l.model)
    }
}

impl<B: PacketBuf> Stage<B> for ImpairLink {
    fn name(&self) -> &'static str {
        "impair"
    }

    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        let now = cx.now_ns();
        let Some(Some(link)) = self.links.get_mut(usize::from(batch.rx_port)) else {
            batch.for_each_active(|_| Disposition::drop_as(self.no_link));
            return;
        };
        let (loss, queue_full) = (self.loss, self.queue_full);
        batch.for_each_active(|p| {
            let len = u32::try_from(p.len()).unwrap_or(u32::MAX);
            match link.model.offer(now, len) {
                Verdict::Dropped(ImpairDrop::Loss) => Disposition::drop_as(loss),
                Verdict::Dropped(ImpairDrop::QueueFull) => Disposition::drop_as(queue_full),
                Verdict::Delivered(due) => {
                    let m = p.pkt_meta_mut();
                    m.enqueue_ns = due;
                    m.flags |= flags::SHAPED;
                    Disposition::tx_queue(link.to, 0)
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qos::Scheduler;
    use crate::runtime::Action;
    use crate::OwnedBuf;

    const MS: u64 = 1_000_000;

    fn batch(port: PortId, n: usize) -> Batch<OwnedBuf> {
        let mut b = Batch::new();
        b.rx_port = port;
        for i in 0..n {
            b.pkts.push(OwnedBuf::from_slice(&[i as u8; 60]));
        }
        b.reset_dispositions();
        b
    }

    #[test]
    fn each_direction_takes_its_own_delay_through_the_scheduler_wheel() {
        let mut r = Reasons::new();
        let ab = LinkConfig {
            delay_ns: 15 * MS,
            ..LinkConfig::default()
        };
        let ba = LinkConfig {
            delay_ns: 5 * MS,
            ..LinkConfig::default()
        };
        let mut st = ImpairLink::new(&[(0, 1, ab), (1, 0, ba)], &mut r).unwrap();
        let mut sched: Scheduler<OwnedBuf> =
            Scheduler::new(&ImpairLink::egress(64).scheduler, 0).unwrap();
        // Long after the scheduler started, with its wheel idle all along (the wheel's
        // clock must be brought to the present before holding: its horizon is 268 ms).
        let t0 = 10_000 * MS;
        for (port, to, delay) in [(0u16, 1u16, 15 * MS), (1, 0, 5 * MS)] {
            let mut b = batch(port, 3);
            st.process(&mut b, &Context::fixed(t0, 0));
            for (p, d) in b.drain() {
                assert_eq!(d.action(), Action::Tx(to));
                assert_eq!(d.qid(), Some(0));
                assert_eq!(p.pkt_meta().enqueue_ns, t0 + delay);
                assert!(p.pkt_meta().has(flags::SHAPED));
                if port == 0 {
                    sched.enqueue(p, 0, t0).unwrap();
                }
            }
        }
        // Held on the wheel until due (a slot, 32.8 us, early at most).
        assert!(sched.dequeue(t0 + 14 * MS).is_none());
        assert_eq!(sched.shaped_waiting(), 3);
        let slot = 1u64 << SLOT_SHIFT;
        assert!(sched.dequeue(t0 + 15 * MS - 2 * slot).is_none());
        let out: Vec<_> = std::iter::from_fn(|| sched.dequeue(t0 + 15 * MS)).collect();
        assert_eq!(out.len(), 3, "all three due together, in order");
        let firsts: Vec<u8> = out.iter().map(|d| d.pkt.data()[0]).collect();
        assert_eq!(firsts, vec![0, 1, 2]);
        assert_eq!(st.model(0).unwrap().stats().delivered, 3);
        assert_eq!(st.model(1).unwrap().stats().delivered, 3);
    }

    #[test]
    fn drops_are_named_and_a_port_without_a_link_drops() {
        let mut r = Reasons::new();
        let lossy = LinkConfig {
            loss: 1.0,
            ..LinkConfig::default()
        };
        let mut st = ImpairLink::new(&[(0, 1, lossy)], &mut r).unwrap();
        let mut b = batch(0, 4);
        st.process(&mut b, &Context::fixed(0, 0));
        for d in b.dispositions() {
            let Action::Drop(why) = d.action() else {
                panic!("{d:?}")
            };
            assert_eq!(r.name(why), "impair_loss");
        }
        let mut b = batch(1, 2);
        st.process(&mut b, &Context::fixed(0, 0));
        for d in b.dispositions() {
            let Action::Drop(why) = d.action() else {
                panic!("{d:?}")
            };
            assert_eq!(r.name(why), "impair_no_link");
        }
    }

    #[test]
    fn holds_beyond_the_wheel_are_refused() {
        let mut r = Reasons::new();
        let long = LinkConfig {
            delay_ns: 300 * MS,
            ..LinkConfig::default()
        };
        assert!(matches!(
            ImpairLink::new(&[(0, 1, long)], &mut r),
            Err(LinkError::TooLong(_))
        ));
        let slow = LinkConfig {
            rate_bytes_per_s: Some(100_000),
            ..LinkConfig::default()
        };
        assert!(matches!(check_link(&slow), Err(LinkError::QueueTooLong(_))));
        let ok = LinkConfig {
            rate_bytes_per_s: Some(125_000_000),
            delay_ns: 10 * MS,
            jitter_ns: MS,
            ..LinkConfig::default()
        };
        assert_eq!(check_link(&ok), Ok(()));
        let bad = LinkConfig {
            loss: 2.0,
            ..LinkConfig::default()
        };
        assert!(matches!(check_link(&bad), Err(LinkError::Model(_))));
    }
}
