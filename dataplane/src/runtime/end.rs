//! The end of a run in two steps, for a control side that still has work once the packets
//! stop: the telemetry of the last windows, which leaves as frames through the workers'
//! ports (DTA reports of a replay's final Kestrel windows, say).
//!
//! 1. A worker that reaches its end (its replay exhausted, or a stop requested) drains as
//!    before, then hands over what its taps hold (`Tap::end`: a partly filled window),
//!    [`arrive`](EndGate::arrive)s and keeps sending what the control side injects.
//! 2. The control side, once every worker has arrived ([`Running::all_ended`]), drains its
//!    features and [`release`](EndGate::release)s the workers, which send what is left in
//!    their injection queues and return.
//!
//! Only a runtime started with [`start_held`](super::launch::start_held) holds its workers;
//! with [`start`](super::launch::start) a worker returns at once, as before. A held worker
//! waits at most [`END_HOLD_LIMIT`] for the release (a control side that never comes).
//!
//! [`Running::all_ended`]: super::running::Running::all_ended

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// How long a held worker waits for the control side's release before it returns anyway.
pub const END_HOLD_LIMIT: Duration = Duration::from_secs(10);

/// Shared by the workers and the control side of one runtime.
#[derive(Debug, Default)]
pub struct EndGate {
    held: bool,
    arrived: AtomicUsize,
    released: AtomicBool,
}

impl EndGate {
    pub fn new(held: bool) -> EndGate {
        EndGate {
            held,
            ..EndGate::default()
        }
    }

    /// Whether workers wait for a release at their end.
    pub fn held(&self) -> bool {
        self.held
    }

    /// A worker has reached its end and handed over what its taps hold.
    pub fn arrive(&self) {
        // Release: what the worker's taps handed over before is visible to whoever sees
        // the count.
        self.arrived.fetch_add(1, Ordering::Release);
    }

    /// Workers that have arrived.
    pub fn arrived(&self) -> usize {
        self.arrived.load(Ordering::Acquire)
    }

    /// Let the held workers return (after the control side's last injections).
    pub fn release(&self) {
        self.released.store(true, Ordering::Release);
    }

    pub fn released(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_arrivals_and_releases_once() {
        let g = EndGate::new(true);
        assert!(g.held() && !g.released());
        g.arrive();
        g.arrive();
        assert_eq!(g.arrived(), 2);
        g.release();
        assert!(g.released());
        assert!(!EndGate::new(false).held());
    }
}
