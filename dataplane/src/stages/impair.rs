//! Link impairment: rate limit with a bounded queue, fixed delay, jitter and Bernoulli loss.
//!
//! The daemon runs it as the `impair` pipeline kind ([`ImpairLink`](super::impair_link), a
//! bump in the wire between two ports, each direction its own link); `perf`'s `int-accuracy`
//! and the tests use the model and the stage directly (the test kit re-exports this module
//! as `peregrine_testkit::impair`).
//!
//! The kernel on our test machines has no `sch_netem`, so the seed's evaluation (Miranda et al.,
//! section IV-B: "Using Traffic Control (TC) Network Emulator (tc-netem) we applied performance
//! impairments on different hops") is reproduced with this model instead. It is usable two ways:
//!
//! * [`LinkModel`]: a pure per-packet model. Given a packet's arrival time and size it returns
//!   [`Verdict::Delivered`] with the time the packet leaves the link, or [`Verdict::Dropped`] with
//!   the reason. Discrete-event simulations (the `int-accuracy` experiment in `perf/`) call it
//!   directly; nothing is held.
//! * [`Impair`]: a pipeline [`Stage`] around one `LinkModel` that holds the packets in a
//!   time-ordered ring (allocated once) and puts them back into a batch when they are due.
//!
//! # The model, in order of a packet's path
//! 1. **Loss** (netem `loss random P`): each packet is dropped with probability `loss`
//!    (Bernoulli), before it is queued, as netem drops at enqueue. Reason `impair_loss`.
//! 2. **Rate** (netem `rate` / TBF `rate R burst B limit L`): a FIFO served by a token bucket
//!    of `burst_bytes` filled at `rate_bytes_per_s` ([`TokenBucket`], exact integer refill).
//!    A packet leaves the queue once every packet ahead of it has left and the bucket holds its
//!    size. At most `queue_limit` packets wait (those still waiting at the arrival time); a
//!    packet arriving at a full queue is tail-dropped (`impair_queue_full`), as is a packet
//!    larger than the bucket, which TBF can never send either.
//! 3. **Delay and jitter** (netem `delay D J [distribution]`): after the queue each packet is
//!    delayed by `delay + X`, with `X` uniform on `[-J, +J]` (netem's default table-less
//!    distribution) or normal with standard deviation `J` (netem `distribution normal`), the
//!    sum clamped at 0.
//! 4. **Reordering**: with [`LinkConfig::reorder`] (the default, as netem's tfifo sorts by send
//!    time) a packet with a smaller jitter sample may overtake an earlier one. Without it a
//!    packet never leaves before its predecessor (`max(own time, previous delivery)`), which is
//!    netem's behaviour when a rate is set or the jitter is added with a FIFO child qdisc.
//!
//! Everything is deterministic: time is an argument and the randomness comes from a seeded
//! splitmix64 (`rand_xoshiro`'s, the stream the test kit's `rng` names). Arrival times passed to one model must not
//! decrease (a stale time is treated as the latest one seen).

use crate::buffer::PacketBuf;
use crate::io::MAX_BURST;
use crate::qos::TokenBucket;
use crate::runtime::{Batch, Context, Disposition, DropReason, Reasons, Stage};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use std::collections::VecDeque;
use thiserror::Error;

/// A number in `[0, 1)` with 53 random bits (the test kit's `rng::unit_f64`, same stream).
fn unit_f64(rng: &mut impl RngCore) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A standard normal draw (Box-Muller, one of the pair discarded; the test kit's
/// `rng::normal`, same stream).
fn normal(rng: &mut impl RngCore) -> f64 {
    // 1 - u is in (0, 1], so the logarithm is finite.
    let u1 = 1.0 - unit_f64(rng);
    let u2 = unit_f64(rng);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Distribution of the jitter term (netem `delay D J [distribution]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Jitter {
    /// Uniform on `[-J, +J]`: netem without a distribution table. Variance `J^2 / 3`.
    #[default]
    Uniform,
    /// Normal with standard deviation `J` (netem `distribution normal`).
    Normal,
}

/// One emulated link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// Rate limit in bytes/s; `None` for no limit (no queue either).
    pub rate_bytes_per_s: Option<u64>,
    /// Token bucket size in bytes (TBF `burst`); must hold the largest packet.
    pub burst_bytes: u64,
    /// Packets that may wait for the rate limiter (TBF/netem `limit`; netem's default is 1000).
    pub queue_limit: usize,
    /// Fixed one-way delay, ns.
    pub delay_ns: u64,
    /// Jitter, ns: the half-width of the uniform distribution or the normal's standard deviation.
    pub jitter_ns: u64,
    /// Jitter distribution.
    pub jitter: Jitter,
    /// Whether jitter may reorder packets (netem's tfifo does).
    pub reorder: bool,
    /// Bernoulli loss probability in `[0, 1]`.
    pub loss: f64,
    /// PRNG seed.
    pub seed: u64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate_bytes_per_s: None,
            burst_bytes: 1600,
            queue_limit: 1000,
            delay_ns: 0,
            jitter_ns: 0,
            jitter: Jitter::Uniform,
            reorder: true,
            loss: 0.0,
            seed: 1,
        }
    }
}

impl LinkConfig {
    /// Rate limit given in bit/s (tc's `rate 40mbit`), rounded down to whole bytes/s.
    pub fn with_rate_bps(mut self, bps: u64) -> LinkConfig {
        self.rate_bytes_per_s = Some(bps / 8);
        self
    }

    /// Check the configuration.
    pub fn validate(&self) -> Result<(), ImpairConfigError> {
        if !(0.0..=1.0).contains(&self.loss) {
            return Err(ImpairConfigError::Loss(self.loss));
        }
        if let Some(r) = self.rate_bytes_per_s {
            if r == 0 {
                return Err(ImpairConfigError::ZeroRate);
            }
            if self.queue_limit == 0 {
                return Err(ImpairConfigError::ZeroQueue);
            }
            if self.burst_bytes == 0 {
                return Err(ImpairConfigError::ZeroBurst);
            }
        }
        Ok(())
    }
}

/// Why a [`LinkConfig`] was refused.
#[derive(Debug, Error, Clone, Copy, PartialEq)]
pub enum ImpairConfigError {
    #[error("loss probability {0} is not in [0, 1]")]
    Loss(f64),
    #[error("rate limit of 0 bytes/s (use no limit instead)")]
    ZeroRate,
    #[error("rate-limited link with a queue limit of 0 packets")]
    ZeroQueue,
    #[error("rate-limited link with a 0-byte bucket")]
    ZeroBurst,
    #[error("hold ring of 0 packets")]
    ZeroHold,
}

/// Why the link dropped a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImpairDrop {
    /// Bernoulli loss (`impair_loss`).
    Loss,
    /// The rate limiter's queue was full, or the packet can never fit the bucket
    /// (`impair_queue_full`).
    QueueFull,
}

/// The fate of one packet offered to a [`LinkModel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Leaves the link (arrives at the next node) at this time, ns.
    Delivered(u64),
    /// Dropped on the link.
    Dropped(ImpairDrop),
}

/// Counters of one link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStats {
    pub offered: u64,
    pub delivered: u64,
    pub delivered_bytes: u64,
    pub lost: u64,
    pub queue_full: u64,
}

/// The per-packet link model (see the module docs for the order of impairments).
#[derive(Debug, Clone)]
pub struct LinkModel {
    cfg: LinkConfig,
    bucket: Option<TokenBucket>,
    /// Departure times from the rate limiter of the packets queued or in service, oldest
    /// first (a FIFO's departures never decrease). Capacity `queue_limit`, never grown.
    backlog: VecDeque<u64>,
    /// Departure time of the last packet accepted by the rate limiter.
    last_departure: u64,
    /// Latest delivery time handed out (for `reorder: false`).
    last_delivery: u64,
    /// Latest arrival time seen.
    now: u64,
    /// Loss threshold on 64 random bits: drop if `next_u64() < loss_threshold`
    /// (`None` when `loss == 1`, which drops everything).
    loss_threshold: Option<u64>,
    rng: SplitMix64,
    stats: LinkStats,
}

impl LinkModel {
    /// A link with `cfg`.
    pub fn new(cfg: LinkConfig) -> Result<LinkModel, ImpairConfigError> {
        cfg.validate()?;
        let loss_threshold = if cfg.loss >= 1.0 {
            None
        } else {
            // loss * 2^64, exact to the f64's 53 bits.
            Some((cfg.loss * 18_446_744_073_709_551_616.0) as u64)
        };
        Ok(LinkModel {
            bucket: cfg
                .rate_bytes_per_s
                .map(|r| TokenBucket::new(r, cfg.burst_bytes, 0)),
            backlog: VecDeque::with_capacity(if cfg.rate_bytes_per_s.is_some() {
                cfg.queue_limit
            } else {
                0
            }),
            last_departure: 0,
            last_delivery: 0,
            now: 0,
            loss_threshold,
            rng: SplitMix64::seed_from_u64(cfg.seed),
            stats: LinkStats::default(),
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// Packets waiting in the rate limiter at the latest arrival time seen.
    pub fn queue_len(&self) -> usize {
        self.backlog.len()
    }

    /// Offer a packet of `len` bytes arriving at `arrival_ns`.
    pub fn offer(&mut self, arrival_ns: u64, len: u32) -> Verdict {
        let t = arrival_ns.max(self.now);
        self.now = t;
        self.stats.offered += 1;

        // 1. Bernoulli loss at enqueue.
        let lost = match self.loss_threshold {
            None => true,
            Some(0) => false,
            Some(th) => self.rng.next_u64() < th,
        };
        if lost {
            self.stats.lost += 1;
            return Verdict::Dropped(ImpairDrop::Loss);
        }

        // 2. Rate limiter: FIFO served by the token bucket.
        let departure = match self.bucket.as_mut() {
            None => t,
            Some(bucket) => {
                while self.backlog.front().is_some_and(|&d| d <= t) {
                    self.backlog.pop_front();
                }
                if self.backlog.len() >= self.cfg.queue_limit
                    || u64::from(len) > self.cfg.burst_bytes
                {
                    self.stats.queue_full += 1;
                    return Verdict::Dropped(ImpairDrop::QueueFull);
                }
                let start = t.max(self.last_departure);
                bucket.refill(start);
                let mut dep = start;
                if !bucket.has(u64::from(len)) {
                    // Whole bytes short (rounded up by the floor of tokens_bytes); the wait
                    // is rounded up to the next ns, so the bucket then holds the packet.
                    let short = u64::from(len) - bucket.tokens_bytes().min(u64::from(len));
                    let rate = bucket.rate();
                    let wait = (u128::from(short) * 1_000_000_000).div_ceil(u128::from(rate));
                    dep = start.saturating_add(u64::try_from(wait).unwrap_or(u64::MAX));
                    bucket.refill(dep);
                }
                bucket.take(u64::from(len));
                self.last_departure = dep;
                // Capacity is queue_limit and we checked len < queue_limit: no growth.
                self.backlog.push_back(dep);
                dep
            }
        };

        // 3. Delay plus jitter, clamped at zero.
        let mut delay = self.cfg.delay_ns as f64;
        if self.cfg.jitter_ns > 0 {
            let j = self.cfg.jitter_ns as f64;
            delay += match self.cfg.jitter {
                Jitter::Uniform => (2.0 * unit_f64(&mut self.rng) - 1.0) * j,
                Jitter::Normal => normal(&mut self.rng) * j,
            };
        }
        let mut at = departure.saturating_add(delay.max(0.0).round() as u64);

        // 4. Optional order preservation.
        if !self.cfg.reorder {
            at = at.max(self.last_delivery);
        }
        self.last_delivery = self.last_delivery.max(at);
        self.stats.delivered += 1;
        self.stats.delivered_bytes += u64::from(len);
        Verdict::Delivered(at)
    }
}

/// The impairment stage: one [`LinkModel`] applied to every packet still `Continue`.
///
/// Packets the model delivers are taken out of the batch and held in a ring ordered by due
/// time (capacity fixed at construction, no allocation per packet); every time the stage runs
/// it puts the packets due by `cx.now_ns()` back into the batch as `Continue`, in due order, as
/// far as the batch has room, for the later stages to forward. Packets the model drops are
/// marked `impair_loss` / `impair_queue_full`, and a packet that finds the hold ring full is
/// dropped as `impair_hold_full`.
///
/// The worker runs the pipeline only when a burst arrives, so a held packet leaves with the
/// next batch after it is due: on a link with steady traffic that adds at most one poll
/// interval. Callers that own the loop (tests, replays) can flush an idle link with
/// [`Impair::release_into`].
#[derive(Debug)]
pub struct Impair<B> {
    model: LinkModel,
    /// Held packets with their due times, sorted by due time (ties keep arrival order).
    hold: VecDeque<(u64, B)>,
    hold_cap: usize,
    /// Scratch for the packets of the batch being processed (capacity `MAX_BURST`).
    scratch: Vec<(B, Disposition)>,
    loss: DropReason,
    queue_full: DropReason,
    hold_full: DropReason,
}

impl<B: PacketBuf> Impair<B> {
    /// A stage emulating the link `cfg`, holding at most `hold_capacity` packets in flight.
    pub fn new(
        cfg: LinkConfig,
        hold_capacity: usize,
        reasons: &mut Reasons,
    ) -> Result<Impair<B>, ImpairConfigError> {
        if hold_capacity == 0 {
            return Err(ImpairConfigError::ZeroHold);
        }
        Ok(Impair {
            model: LinkModel::new(cfg)?,
            hold: VecDeque::with_capacity(hold_capacity),
            hold_cap: hold_capacity,
            scratch: Vec::with_capacity(MAX_BURST),
            loss: reasons.register("impair_loss"),
            queue_full: reasons.register("impair_queue_full"),
            hold_full: reasons.register("impair_hold_full"),
        })
    }

    /// The link model (for its counters).
    pub fn model(&self) -> &LinkModel {
        &self.model
    }

    /// Packets held (in flight on the emulated link).
    pub fn held(&self) -> usize {
        self.hold.len()
    }

    /// Time the next held packet is due, if any.
    pub fn next_due(&self) -> Option<u64> {
        self.hold.front().map(|&(t, _)| t)
    }

    /// Put the held packets due by `now_ns` into `batch` as `Continue`, oldest due first,
    /// while it has room. Returns how many were released.
    pub fn release_into(&mut self, batch: &mut Batch<B>, now_ns: u64) -> usize {
        let mut n = 0;
        while self.hold.front().is_some_and(|&(t, _)| t <= now_ns) {
            if batch.pkts.is_full() {
                break;
            }
            let Some((_, pkt)) = self.hold.pop_front() else {
                break;
            };
            if let Err(_pkt) = batch.push(pkt, Disposition::CONTINUE) {
                // Not reached: fullness was checked above.
                break;
            }
            n += 1;
        }
        n
    }

    fn hold_packet(&mut self, due: u64, pkt: B) -> Result<(), B> {
        if self.hold.len() >= self.hold_cap {
            return Err(pkt);
        }
        // Usually the newest packet is due last; a jittered one may be due earlier.
        let pos = if self.hold.back().is_none_or(|&(t, _)| t <= due) {
            self.hold.len()
        } else {
            self.hold.partition_point(|&(t, _)| t <= due)
        };
        self.hold.insert(pos, (due, pkt));
        Ok(())
    }
}

impl<B: PacketBuf> Stage<B> for Impair<B> {
    fn name(&self) -> &'static str {
        "impair"
    }

    fn process(&mut self, batch: &mut Batch<B>, cx: &Context) {
        let now = cx.now_ns();
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.extend(batch.drain());
        for (pkt, d) in scratch.drain(..) {
            if !d.is_continue() {
                // Decided by an earlier stage: passes untouched. The batch had room for it.
                let _ = batch.push(pkt, d);
                continue;
            }
            let len = u32::try_from(pkt.len()).unwrap_or(u32::MAX);
            match self.model.offer(now, len) {
                Verdict::Dropped(ImpairDrop::Loss) => {
                    let _ = batch.push(pkt, Disposition::drop_as(self.loss));
                }
                Verdict::Dropped(ImpairDrop::QueueFull) => {
                    let _ = batch.push(pkt, Disposition::drop_as(self.queue_full));
                }
                Verdict::Delivered(due) => {
                    if let Err(pkt) = self.hold_packet(due, pkt) {
                        let _ = batch.push(pkt, Disposition::drop_as(self.hold_full));
                    }
                }
            }
        }
        self.scratch = scratch;
        self.release_into(batch, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Action;
    use crate::OwnedBuf;

    const MS: u64 = 1_000_000;

    #[test]
    fn rate_limit_holds_within_one_percent_under_double_load() {
        // 10 Mbit/s link offered 20 Mbit/s of 562-byte packets for 5 s.
        let rate = 1_250_000u64;
        let mut m = LinkModel::new(LinkConfig::default().with_rate_bps(10_000_000)).unwrap();
        let len = 562u32;
        let gap = u64::from(len) * 1_000_000_000 / (2 * rate);
        let mut last = 0;
        let mut bytes = 0u64;
        let horizon = 5_000 * MS;
        let mut t = 0;
        while t < horizon {
            if let Verdict::Delivered(at) = m.offer(t, len) {
                assert!(at >= last, "FIFO without jitter keeps order");
                last = at;
                if at < horizon {
                    bytes += u64::from(len);
                }
            }
            t += gap;
        }
        let got = bytes as f64 / 5.0;
        assert!(
            (got - rate as f64).abs() / (rate as f64) < 0.01,
            "delivered {got} B/s vs {rate}"
        );
        let s = m.stats();
        assert!(s.queue_full > 0, "the excess is tail-dropped");
        assert_eq!(s.lost, 0);
        assert_eq!(s.offered, s.delivered + s.queue_full);
        assert_eq!(m.queue_len(), 1000, "queue full at the end under overload");
    }

    #[test]
    fn queue_delay_is_bounded_by_the_limit() {
        // 100 packets of 1000 B at once into 1 MB/s with a 10-packet queue.
        let cfg = LinkConfig {
            rate_bytes_per_s: Some(1_000_000),
            burst_bytes: 1000,
            queue_limit: 10,
            ..LinkConfig::default()
        };
        let mut m = LinkModel::new(cfg).unwrap();
        let v: Vec<_> = (0..100).map(|_| m.offer(0, 1000)).collect();
        let delivered: Vec<u64> = v
            .iter()
            .filter_map(|v| match v {
                Verdict::Delivered(t) => Some(*t),
                _ => None,
            })
            .collect();
        // The first leaves at once on the full bucket (so never waits); then 10 wait, each
        // 1 ms for its tokens; the rest find the queue full.
        assert_eq!(delivered, (0..11).map(|i| i * MS).collect::<Vec<_>>());
        assert_eq!(v[11], Verdict::Dropped(ImpairDrop::QueueFull));
        // Once the queue drained, packets pass again.
        assert_eq!(m.offer(20 * MS, 1000), Verdict::Delivered(20 * MS));
        // A packet bigger than the bucket can never be sent.
        assert_eq!(
            m.offer(40 * MS, 1001),
            Verdict::Dropped(ImpairDrop::QueueFull)
        );
    }

    fn delay_moments(jitter: Jitter, reorder: bool) -> (f64, f64, bool) {
        let cfg = LinkConfig {
            delay_ns: 10 * MS,
            jitter_ns: 2 * MS,
            jitter,
            reorder,
            seed: 42,
            ..LinkConfig::default()
        };
        let mut m = LinkModel::new(cfg).unwrap();
        let n = 200_000u64;
        let (mut s, mut s2) = (0.0, 0.0);
        let mut reordered = false;
        let mut last = 0;
        for i in 0..n {
            let t = i * 100_000; // 0.1 ms apart
            let Verdict::Delivered(at) = m.offer(t, 100) else {
                panic!("no loss configured")
            };
            reordered |= at < last;
            last = at;
            let d = (at - t) as f64;
            s += d;
            s2 += d * d;
        }
        let mean = s / n as f64;
        (mean, s2 / n as f64 - mean * mean, reordered)
    }

    #[test]
    fn uniform_jitter_has_configured_mean_and_variance() {
        let (mean, var, reordered) = delay_moments(Jitter::Uniform, true);
        let j = 2.0 * MS as f64;
        // Standard error of the mean: sqrt(j^2/3 / n) ~ 2.6 us; allow ~4 sigma.
        assert!((mean - 10.0 * MS as f64).abs() < 10_000.0, "mean {mean}");
        let want = j * j / 3.0;
        assert!((var / want - 1.0).abs() < 0.02, "var {var} vs {want}");
        assert!(reordered, "jitter of 2 ms on 0.1 ms spacing reorders");
    }

    #[test]
    fn normal_jitter_has_configured_mean_and_variance() {
        let (mean, var, _) = delay_moments(Jitter::Normal, true);
        let j = 2.0 * MS as f64;
        assert!((mean - 10.0 * MS as f64).abs() < 20_000.0, "mean {mean}");
        // The clamp at 0 is 5 sigma away: negligible.
        assert!((var / (j * j) - 1.0).abs() < 0.02, "var {var}");
    }

    #[test]
    fn no_reorder_keeps_fifo_order() {
        let (mean, _, reordered) = delay_moments(Jitter::Uniform, false);
        assert!(!reordered);
        // Holding back behind a later predecessor only adds delay.
        assert!(mean > 10.0 * MS as f64);
    }

    #[test]
    fn bernoulli_loss_within_binomial_bounds() {
        for (p, seed) in [(0.01, 1u64), (0.05, 2), (0.3, 3)] {
            let mut m = LinkModel::new(LinkConfig {
                loss: p,
                seed,
                ..LinkConfig::default()
            })
            .unwrap();
            let n = 100_000u64;
            for i in 0..n {
                m.offer(i * 1000, 64);
            }
            let lost = m.stats().lost as f64;
            let mean = p * n as f64;
            let sd = (n as f64 * p * (1.0 - p)).sqrt();
            assert!(
                (lost - mean).abs() < 4.0 * sd,
                "p={p}: lost {lost}, expected {mean} +- {sd}"
            );
        }
        let mut all = LinkModel::new(LinkConfig {
            loss: 1.0,
            ..LinkConfig::default()
        })
        .unwrap();
        assert_eq!(all.offer(0, 1), Verdict::Dropped(ImpairDrop::Loss));
    }

    #[test]
    fn same_seed_same_fate() {
        let cfg = LinkConfig {
            loss: 0.2,
            jitter_ns: MS,
            delay_ns: MS,
            seed: 7,
            ..LinkConfig::default()
        };
        let run = || {
            let mut m = LinkModel::new(cfg).unwrap();
            (0..1000)
                .map(|i| m.offer(i * 1000, 100))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn bad_configs_are_refused() {
        let bad = |c: LinkConfig| LinkModel::new(c).is_err();
        assert!(bad(LinkConfig {
            loss: 1.5,
            ..Default::default()
        }));
        assert!(bad(LinkConfig {
            loss: f64::NAN,
            ..Default::default()
        }));
        assert!(bad(LinkConfig {
            rate_bytes_per_s: Some(0),
            ..Default::default()
        }));
        assert!(bad(LinkConfig {
            rate_bytes_per_s: Some(1),
            queue_limit: 0,
            ..Default::default()
        }));
    }

    fn batch_of(n: usize, tag: u8) -> Batch<OwnedBuf> {
        let mut b = Batch::new();
        for i in 0..n {
            b.pkts.push(OwnedBuf::from_slice(&[tag, i as u8, 0, 0]));
        }
        b.reset_dispositions();
        b
    }

    #[test]
    fn stage_holds_packets_until_due_and_releases_in_order() {
        let mut reasons = Reasons::new();
        let cfg = LinkConfig {
            delay_ns: 5 * MS,
            ..LinkConfig::default()
        };
        let mut st: Impair<OwnedBuf> = Impair::new(cfg, 64, &mut reasons).unwrap();
        let mut b = batch_of(3, 1);
        b.set_disposition(1, Disposition::tx(2));
        st.process(&mut b, &Context::fixed(0, 0));
        // Only the packet another stage already decided stays.
        assert_eq!(b.len(), 1);
        assert_eq!(b.disposition(0), Disposition::tx(2));
        assert_eq!(st.held(), 2);
        assert_eq!(st.next_due(), Some(5 * MS));
        b.drain().for_each(drop);

        let mut b = batch_of(1, 2);
        st.process(&mut b, &Context::fixed(5 * MS, 0));
        // The two from t=0 are due; the new one is held to 10 ms.
        let got: Vec<_> = b
            .drain()
            .map(|(p, d)| (p.data()[0], p.data()[1], d))
            .collect();
        assert_eq!(
            got,
            vec![(1, 0, Disposition::CONTINUE), (1, 2, Disposition::CONTINUE)]
        );
        let mut empty: Batch<OwnedBuf> = Batch::new();
        assert_eq!(st.release_into(&mut empty, 9 * MS), 0);
        assert_eq!(st.release_into(&mut empty, 10 * MS), 1);
        assert_eq!(st.held(), 0);
    }

    #[test]
    fn stage_drops_are_named_and_hold_overflow_is_counted() {
        let mut reasons = Reasons::new();
        let cfg = LinkConfig {
            loss: 0.5,
            delay_ns: MS,
            seed: 3,
            ..LinkConfig::default()
        };
        let mut st: Impair<OwnedBuf> = Impair::new(cfg, 8, &mut reasons).unwrap();
        let mut b = batch_of(64, 0);
        st.process(&mut b, &Context::fixed(0, 0));
        let mut by_reason = std::collections::HashMap::new();
        for d in b.dispositions() {
            match d.action() {
                Action::Drop(r) => *by_reason.entry(reasons.name(r)).or_insert(0) += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        let lost = by_reason["impair_loss"];
        assert_eq!(lost as u64, st.model().stats().lost);
        assert_eq!(st.held(), 8);
        assert_eq!(by_reason["impair_hold_full"], 64 - 8 - lost);
        assert_eq!(
            reasons.register("impair_queue_full"),
            reasons.register("impair_queue_full")
        );
    }
}
