//! GTP-U path supervision (TS 29.281 section 7.2.1), I/O-free: which remote GTP-U peers are
//! in use, when to send each an Echo Request, and when a path fails or recovers.
//!
//! A path is in use while at least one session has a FAR whose Outer Header Creation names
//! the peer (gNB on N3, UPF on N9); [`Paths::add`] / [`Paths::remove`] keep a count per peer,
//! so the cost of a request is its own FARs, not the number of sessions. For each path in
//! use an Echo Request goes out every `interval` (section 7.2.1: not more often than every
//! 60 s by default). An unanswered request is sent again after `t3`, up to `n3` times
//! (T3-RESPONSE / N3-REQUESTS); when the last one is unanswered too the path has failed.
//! A failed path keeps being probed every `interval`; the first Echo Response from it is its
//! recovery. The node tells its CP functions both in a PFCP Node Report Request (TS 29.244
//! section 6.2.9, tables 7.4.5.1.2-1 and 7.4.5.1.3-1; see `Node::poll_timers`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::Nanos;

/// Timers of the supervision; `interval` 0 turns it off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoConfig {
    pub interval: Nanos,
    pub t3: Nanos,
    pub n3: u32,
}

/// What the supervisor asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathOut {
    /// Send a GTP-U Echo Request with this sequence number to the peer.
    Echo { peer: IpAddr, seq: u16 },
    /// `n3` retransmissions went unanswered.
    Failed { peer: IpAddr },
    /// An Echo Response came from a failed peer.
    Recovered { peer: IpAddr },
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct PathState {
    /// Sessions' FARs that use the path.
    users: u32,
    next_at: Nanos,
    /// (sequence number, retransmissions so far) of the unanswered Echo Request.
    outstanding: Option<(u16, u32)>,
    failed: bool,
}

/// Counters for Prometheus.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathStats {
    pub echo_requests: u64,
    pub echo_retransmissions: u64,
    pub echo_responses: u64,
    /// Echo Responses from a peer not in use or with a sequence number not outstanding.
    pub echo_responses_unexpected: u64,
    pub failures: u64,
    pub recoveries: u64,
}

/// The paths in use and their supervision state.
#[derive(Debug, Clone)]
pub struct Paths {
    config: EchoConfig,
    paths: BTreeMap<IpAddr, PathState>,
    next_seq: u16,
    stats: PathStats,
}

impl Paths {
    pub fn new(config: EchoConfig) -> Paths {
        Paths {
            config,
            paths: BTreeMap::new(),
            next_seq: 1,
            stats: PathStats::default(),
        }
    }

    pub fn stats(&self) -> PathStats {
        self.stats
    }

    /// (paths in use, of which failed).
    pub fn counts(&self) -> (usize, usize) {
        (
            self.paths.len(),
            self.paths.values().filter(|p| p.failed).count(),
        )
    }

    /// One more FAR uses the path to `peer`; a new path's first Echo Request is due one
    /// interval from `now`.
    pub fn add(&mut self, peer: IpAddr, now: Nanos) {
        let interval = self.config.interval;
        self.paths
            .entry(peer)
            .or_insert(PathState {
                users: 0,
                next_at: now.saturating_add(interval),
                outstanding: None,
                failed: false,
            })
            .users += 1;
    }

    /// One FAR fewer uses the path; the last one ends its supervision.
    pub fn remove(&mut self, peer: IpAddr) {
        if let Some(p) = self.paths.get_mut(&peer) {
            p.users = p.users.saturating_sub(1);
            if p.users == 0 {
                self.paths.remove(&peer);
            }
        }
    }

    /// When [`Paths::poll`] next has something to do.
    pub fn next_due(&self) -> Option<Nanos> {
        if self.config.interval == 0 {
            return None;
        }
        self.paths.values().map(|p| p.next_at).min()
    }

    /// Echo Requests (new or repeated) and failures due at `now`.
    pub fn poll(&mut self, now: Nanos, out: &mut Vec<PathOut>) {
        if self.config.interval == 0 {
            return;
        }
        let EchoConfig { interval, t3, n3 } = self.config;
        for (&peer, p) in self.paths.iter_mut().filter(|(_, p)| p.next_at <= now) {
            match p.outstanding {
                Some((seq, tries)) if tries < n3 => {
                    p.outstanding = Some((seq, tries + 1));
                    p.next_at = now.saturating_add(t3);
                    self.stats.echo_retransmissions += 1;
                    out.push(PathOut::Echo { peer, seq });
                }
                Some(_) => {
                    p.outstanding = None;
                    p.next_at = now.saturating_add(interval);
                    if !p.failed {
                        p.failed = true;
                        self.stats.failures += 1;
                        out.push(PathOut::Failed { peer });
                    }
                }
                None => {
                    let seq = self.next_seq;
                    self.next_seq = self.next_seq.wrapping_add(1).max(1);
                    p.outstanding = Some((seq, 0));
                    p.next_at = now.saturating_add(t3);
                    self.stats.echo_requests += 1;
                    out.push(PathOut::Echo { peer, seq });
                }
            }
        }
    }

    /// An Echo Response from `peer` with `seq`: the outstanding request is answered; a
    /// failed path has recovered.
    pub fn on_response(&mut self, now: Nanos, peer: IpAddr, seq: u16, out: &mut Vec<PathOut>) {
        let Some(p) = self
            .paths
            .get_mut(&peer)
            .filter(|p| p.outstanding.is_some_and(|(s, _)| s == seq))
        else {
            self.stats.echo_responses_unexpected += 1;
            return;
        };
        self.stats.echo_responses += 1;
        p.outstanding = None;
        p.next_at = now.saturating_add(self.config.interval);
        if p.failed {
            p.failed = false;
            self.stats.recoveries += 1;
            out.push(PathOut::Recovered { peer });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    fn gnb() -> IpAddr {
        "192.0.2.10".parse().unwrap()
    }

    fn run(p: &mut Paths, now: Nanos) -> Vec<PathOut> {
        let mut out = Vec::new();
        p.poll(now, &mut out);
        out
    }

    #[test]
    fn echo_every_interval_retransmit_fail_and_recover() {
        let mut p = Paths::new(EchoConfig {
            interval: 60 * S,
            t3: 3 * S,
            n3: 2,
        });
        p.add(gnb(), 0);
        p.add(gnb(), 0);
        assert_eq!(p.next_due(), Some(60 * S));
        assert!(run(&mut p, 59 * S).is_empty());
        assert_eq!(
            run(&mut p, 60 * S),
            [PathOut::Echo {
                peer: gnb(),
                seq: 1
            }]
        );
        // Answered: the next one an interval later.
        let mut out = Vec::new();
        p.on_response(61 * S, gnb(), 1, &mut out);
        assert!(out.is_empty());
        assert_eq!(p.next_due(), Some(121 * S));
        // Unanswered: two retransmissions t3 apart, then the failure.
        assert_eq!(
            run(&mut p, 121 * S),
            [PathOut::Echo {
                peer: gnb(),
                seq: 2
            }]
        );
        assert_eq!(
            run(&mut p, 124 * S),
            [PathOut::Echo {
                peer: gnb(),
                seq: 2
            }]
        );
        assert_eq!(
            run(&mut p, 127 * S),
            [PathOut::Echo {
                peer: gnb(),
                seq: 2
            }]
        );
        assert_eq!(run(&mut p, 130 * S), [PathOut::Failed { peer: gnb() }]);
        assert_eq!(p.counts(), (1, 1));
        // Probed again an interval later; a stale response is counted, not taken.
        assert_eq!(
            run(&mut p, 190 * S),
            [PathOut::Echo {
                peer: gnb(),
                seq: 3
            }]
        );
        p.on_response(191 * S, gnb(), 2, &mut out);
        assert!(out.is_empty());
        p.on_response(191 * S, gnb(), 3, &mut out);
        assert_eq!(out, [PathOut::Recovered { peer: gnb() }]);
        let st = p.stats();
        assert_eq!(
            (st.echo_requests, st.echo_retransmissions, st.echo_responses),
            (3, 2, 2)
        );
        assert_eq!(
            (st.failures, st.recoveries, st.echo_responses_unexpected),
            (1, 1, 1)
        );
        // The last user gone: no more supervision.
        p.remove(gnb());
        assert_eq!(p.counts(), (1, 0));
        p.remove(gnb());
        assert_eq!((p.counts(), p.next_due()), ((0, 0), None));
    }

    #[test]
    fn interval_zero_is_off() {
        let mut p = Paths::new(EchoConfig {
            interval: 0,
            t3: S,
            n3: 1,
        });
        p.add(gnb(), 0);
        assert_eq!(p.next_due(), None);
        assert!(run(&mut p, 1000 * S).is_empty());
    }
}
