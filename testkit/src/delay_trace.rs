//! Request/response traces for delay estimators (the fridge paper's section 5 workloads), as
//! abstract events: a time, a 64-bit ID hash and whether it is a request or a response.
//!
//! * [`synthetic`]: requests at a constant rate, a fraction answered after a log-uniform delay
//!   in `[min, max)` (section 5, "synthetic trace").
//! * [`tcp_like`]: a generated ISP-border TCP trace standing in for the seed's real one: data
//!   segments (requests) of many flows, delayed and stretch ACKs that match only the segment
//!   whose end they acknowledge, lost ACKs, port-scan orphans, responses matching nothing, and
//!   a heavy-tailed RTT (log-normal body with a Pareto tail).
//!
//! Every trace is a pure function of its seed.

use crate::rng::{below, normal, seeded, unit_f64, RngCore};

/// One packet of the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub t_ns: u64,
    pub id: u64,
    pub request: bool,
}

/// A trace sorted by time, with the true delay of every matched pair.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub events: Vec<Event>,
    /// True delays (ns) of the request/response pairs, in no particular order.
    pub delays: Vec<u64>,
}

impl Trace {
    pub fn requests(&self) -> usize {
        self.events.iter().filter(|e| e.request).count()
    }
}

fn finish(mut events: Vec<Event>, delays: Vec<u64>) -> Trace {
    // Stable: a response never sorts before its request (delays >= 1 ns).
    events.sort_by_key(|e| e.t_ns);
    Trace { events, delays }
}

/// Section 5's synthetic trace: `n_requests` requests at `rate` per second, each answered with
/// probability `answered` after a delay drawn log-uniformly in `[min_ns, max_ns)`.
pub fn synthetic(
    seed: u64,
    n_requests: usize,
    rate: f64,
    answered: f64,
    min_ns: u64,
    max_ns: u64,
) -> Trace {
    let mut rng = seeded(seed);
    let gap = 1e9 / rate;
    let (lo, hi) = ((min_ns.max(1) as f64).ln(), (max_ns.max(2) as f64).ln());
    let mut events = Vec::with_capacity(n_requests * 2);
    let mut delays = Vec::with_capacity(n_requests);
    for i in 0..n_requests {
        let t = (i as f64 * gap) as u64;
        let id = rng.next_u64();
        events.push(Event {
            t_ns: t,
            id,
            request: true,
        });
        if unit_f64(&mut rng) < answered {
            let d = ((lo + unit_f64(&mut rng) * (hi - lo)).exp() as u64).max(1);
            delays.push(d);
            events.push(Event {
                t_ns: t + d,
                id,
                request: false,
            });
        }
    }
    finish(events, delays)
}

/// Knobs of [`tcp_like`].
#[derive(Debug, Clone, Copy)]
pub struct TcpShape {
    /// Trace length.
    pub duration_ns: u64,
    /// New flows per second.
    pub flows_per_s: f64,
    /// Median RTT of the log-normal body and its sigma (of ln).
    pub rtt_median_ns: f64,
    pub rtt_sigma: f64,
    /// Share of flows whose RTT comes from a Pareto tail (alpha 1.5) starting at 4x median.
    pub tail_share: f64,
    /// Probability an ACK is lost before the vantage point.
    pub ack_loss: f64,
    /// Orphan requests (scans) per data segment.
    pub scans_per_segment: f64,
    /// Responses matching nothing (dup ACKs, RSTs to scans) per data segment.
    pub stray_per_segment: f64,
}

impl Default for TcpShape {
    /// About the seed's trace mix: ~60% requests, ~13% of requests answered, mean RTT near
    /// 58 ms.
    fn default() -> Self {
        TcpShape {
            duration_ns: 10_000_000_000,
            flows_per_s: 2_000.0,
            rtt_median_ns: 35e6,
            rtt_sigma: 0.8,
            tail_share: 0.05,
            ack_loss: 0.01,
            scans_per_segment: 1.6,
            stray_per_segment: 1.3,
        }
    }
}

/// A generated TCP trace (see the module docs).
pub fn tcp_like(seed: u64, s: &TcpShape) -> Trace {
    let mut rng = seeded(seed);
    let mut events = Vec::new();
    let n_flows = (s.duration_ns as f64 / 1e9 * s.flows_per_s) as u64;
    let mut segments = 0u64;
    for _ in 0..n_flows {
        let start = below(&mut rng, s.duration_ns);
        let rtt = if unit_f64(&mut rng) < s.tail_share {
            // Pareto(alpha 1.5) from 4x the median, capped at 10 s.
            let u = 1.0 - unit_f64(&mut rng);
            (4.0 * s.rtt_median_ns * u.powf(-1.0 / 1.5)).min(10e9)
        } else {
            s.rtt_median_ns * (s.rtt_sigma * normal(&mut rng)).exp()
        };
        let flow = rng.next_u64();
        // Segments: heavy-tailed flow sizes (Pareto alpha 1.2, 2 .. 2000 segments).
        let u = 1.0 - unit_f64(&mut rng);
        let n = ((2.0 * u.powf(-1.0 / 1.2)) as u64).min(2_000);
        // ACK every k segments: 2 (delayed ACK), 4 or 8 (stretch ACKs).
        let k = match below(&mut rng, 10) {
            0..=5 => 2,
            6..=8 => 4,
            _ => 8,
        };
        let (mut t, mut sent, mut cwnd, mut seq) = (start as f64, 0u64, 10u64, 1u64);
        while sent < n && (t as u64) < s.duration_ns {
            let burst = cwnd.min(n - sent);
            for j in 0..burst {
                let ts = t + j as f64 * 12_000.0; // 1460 B at ~1 Gb/s
                seq += 1460;
                let id = crate::delay_trace::pair_id(flow, seq);
                events.push(Event {
                    t_ns: ts as u64,
                    id,
                    request: true,
                });
                segments += 1;
                let last = j + 1 == burst;
                if ((j + 1) % k == 0 || last) && unit_f64(&mut rng) >= s.ack_loss {
                    // A lone trailing segment waits for the delayed-ACK timer (<= 40 ms).
                    let hold = if (j + 1) % k != 0 {
                        unit_f64(&mut rng) * 40e6
                    } else {
                        0.0
                    };
                    let d = (rtt * (1.0 + 0.1 * unit_f64(&mut rng)) + hold).max(1.0) as u64;
                    events.push(Event {
                        t_ns: ts as u64 + d,
                        id,
                        request: false,
                    });
                }
            }
            sent += burst;
            cwnd = (cwnd * 2).min(64);
            t += rtt;
        }
    }
    let extra = |per: f64| (segments as f64 * per) as u64;
    for _ in 0..extra(s.scans_per_segment) {
        events.push(Event {
            t_ns: below(&mut rng, s.duration_ns),
            id: rng.next_u64(),
            request: true,
        });
    }
    for _ in 0..extra(s.stray_per_segment) {
        events.push(Event {
            t_ns: below(&mut rng, s.duration_ns),
            id: rng.next_u64(),
            request: false,
        });
    }
    // Drop responses past the end (their requests stay orphans) and their delays.
    let end = s.duration_ns;
    let kept: Vec<Event> = events.into_iter().filter(|e| e.t_ns < end).collect();
    let mut t = finish(kept, Vec::new());
    // Recompute true delays from the kept pairs only.
    t.delays = true_delays(&t.events);
    t
}

/// The ID hash of a TCP segment's expected ACK number in a flow.
pub fn pair_id(flow: u64, ack: u64) -> u64 {
    flow ^ ack.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The delays of request/response pairs in a sorted event list (a response matches the
/// latest unanswered request with its ID, as the seed's Definition 2.1 pairs them).
pub fn true_delays(events: &[Event]) -> Vec<u64> {
    let mut open = std::collections::HashMap::with_capacity(events.len() / 2);
    let mut out = Vec::new();
    for e in events {
        if e.request {
            open.insert(e.id, e.t_ns);
        } else if let Some(t0) = open.remove(&e.id) {
            out.push(e.t_ns - t0);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_matches_its_recipe() {
        let t = synthetic(1, 100_000, 1e6, 0.4, 1_000, 64_000_000);
        assert_eq!(t.requests(), 100_000);
        let answered = t.delays.len() as f64 / 1e5;
        assert!((answered - 0.4).abs() < 0.01, "{answered}");
        assert!(t.delays.iter().all(|&d| (1_000..64_000_000).contains(&d)));
        // Log-uniform: half the delays below the geometric middle.
        let mid = (1_000f64 * 64e6).sqrt() as u64;
        let below_mid = t.delays.iter().filter(|&&d| d < mid).count() as f64;
        assert!((below_mid / t.delays.len() as f64 - 0.5).abs() < 0.01);
        assert!(t.events.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
        let again = synthetic(1, 1000, 1e6, 0.4, 1_000, 64_000_000);
        assert_eq!(
            again.events,
            synthetic(1, 1000, 1e6, 0.4, 1_000, 64_000_000).events
        );
        assert_eq!(true_delays(&t.events).len(), t.delays.len());
    }

    #[test]
    fn tcp_like_has_the_seed_mix() {
        let shape = TcpShape {
            duration_ns: 2_000_000_000,
            ..TcpShape::default()
        };
        let t = tcp_like(3, &shape);
        let req = t.requests() as f64;
        let all = t.events.len() as f64;
        let matched = t.delays.len() as f64 / req;
        assert!((0.5..0.7).contains(&(req / all)), "requests {}", req / all);
        assert!((0.08..0.2).contains(&matched), "matched {matched}");
        let mean = t.delays.iter().sum::<u64>() as f64 / t.delays.len() as f64;
        assert!((30e6..120e6).contains(&mean), "mean RTT {mean}");
    }
}
