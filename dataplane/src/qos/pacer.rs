//! MBR shaping by departure times: a per-session pacer (the virtual scheduling form of the
//! Generic Cell Rate Algorithm, ITU-T I.371 / ATM Forum TM 4.0) computes when each packet may
//! leave; the egress scheduler's timing wheel (`qos::wheel`) holds it until then, the
//! timestamp-and-wheel shaper of Carousel (Saeed et al., SIGCOMM 2017).
//!
//! The pacer keeps the theoretical arrival time `tat` of the session's next byte. A packet of
//! `L` bytes at `now` leaves at `max(now, tat - tau)` where `tau` is the burst tolerance
//! (`burst / rate`), and moves `tat` to `max(tat, now) + L / rate`. The delay it would wait is
//! the session's queue in time at its MBR: above `queue_ns` the packet is refused (tail drop,
//! counted by the caller as `mbr_queue_full`), which bounds the queued bytes to about
//! `rate * queue_ns + burst`. Time is passed in; integer nanoseconds, rounded up, so the
//! long-run rate never exceeds the MBR.

/// One session direction's shaping parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PacerConfig {
    /// The MBR, bytes/s (> 0).
    pub rate_bytes_per_s: u64,
    /// Bytes that may leave back to back before pacing starts.
    pub burst_bytes: u32,
    /// Longest delay (queue at the rate) accepted before a packet is dropped (32 bits: the
    /// compiled rules stay small; the config allows at most 250 ms).
    pub queue_ns: u32,
}

/// The per-session pacer state (per worker, like the meters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacer {
    rate: u64,
    tau_ns: u64,
    queue_ns: u64,
    tat_ns: u64,
}

/// What the pacer decided for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Leave now.
    Now,
    /// Leave at this worker-clock time (> now).
    At(u64),
    /// The session's queue is full: drop.
    Full,
}

const NS: u128 = 1_000_000_000;

fn ns_for(bytes: u64, rate: u64) -> u64 {
    if rate == 0 {
        return u64::MAX;
    }
    let t = (u128::from(bytes) * NS).div_ceil(u128::from(rate));
    u64::try_from(t).unwrap_or(u64::MAX)
}

impl Pacer {
    /// A pacer with its full burst available at `now_ns`.
    pub fn new(cfg: PacerConfig, now_ns: u64) -> Pacer {
        Pacer {
            rate: cfg.rate_bytes_per_s,
            tau_ns: ns_for(u64::from(cfg.burst_bytes), cfg.rate_bytes_per_s),
            queue_ns: u64::from(cfg.queue_ns),
            tat_ns: now_ns,
        }
    }

    /// (rate, burst tolerance ns, queue limit ns, theoretical arrival time ns): the state
    /// as plain words, for callers that pack it with other state (the UPF's meter slots).
    pub fn parts(&self) -> (u64, u64, u64, u64) {
        (self.rate, self.tau_ns, self.queue_ns, self.tat_ns)
    }

    /// The pacer [`Self::parts`] returned.
    pub fn from_parts(rate: u64, tau_ns: u64, queue_ns: u64, tat_ns: u64) -> Pacer {
        Pacer {
            rate,
            tau_ns,
            queue_ns,
            tat_ns,
        }
    }

    /// Schedule a packet of `len` bytes arriving at `now_ns`.
    #[inline]
    pub fn pace(&mut self, now_ns: u64, len: u64) -> Pace {
        let tat = self.tat_ns.max(now_ns);
        let depart = tat.saturating_sub(self.tau_ns).max(now_ns);
        if depart - now_ns > self.queue_ns {
            return Pace::Full;
        }
        self.tat_ns = tat.saturating_add(ns_for(len, self.rate));
        if depart == now_ns {
            Pace::Now
        } else {
            Pace::At(depart)
        }
    }

    /// The session's backlog at `now_ns` as time at its rate (0: none beyond the burst).
    pub fn backlog_ns(&self, now_ns: u64) -> u64 {
        self.tat_ns
            .saturating_sub(now_ns)
            .saturating_sub(self.tau_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn burst_then_paced_then_full() {
        // 1 MB/s, 3000-byte burst, 10 ms queue: 1000-byte packets all at t = 0.
        let mut p = Pacer::new(
            PacerConfig {
                rate_bytes_per_s: 1_000_000,
                burst_bytes: 3000,
                queue_ns: 10 * MS as u32,
            },
            0,
        );
        let got: Vec<Pace> = (0..16).map(|_| p.pace(0, 1000)).collect();
        // tau = 3 ms: packets 0..=3 leave now (tat - tau <= 0), then one per ms.
        assert_eq!(&got[..4], &[Pace::Now; 4]);
        assert_eq!(got[4], Pace::At(MS));
        assert_eq!(got[5], Pace::At(2 * MS));
        assert_eq!(got[13], Pace::At(10 * MS));
        assert_eq!(got[14], Pace::Full);
        assert_eq!(got[15], Pace::Full, "a refused packet takes no time");
        assert_eq!(p.backlog_ns(0), 11 * MS);
        // Idle for a second: the burst is back, no more.
        assert_eq!(p.pace(2000 * MS, 1000), Pace::Now);
        assert_eq!(p.backlog_ns(2000 * MS), 0);
    }
}
