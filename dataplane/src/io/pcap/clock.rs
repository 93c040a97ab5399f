//! The backend's time source: the real clocks, and a manual one for deterministic tests.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Time source of the backend: paces timed replay and stamps transmitted packets.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Monotonic nanoseconds from an arbitrary origin.
    fn monotonic_ns(&self) -> u64;
    /// Nanoseconds since the Unix epoch.
    fn wall_ns(&self) -> u64;
}

/// The real clocks: [`Instant`] and [`SystemTime`].
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    pub fn new() -> SystemClock {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn monotonic_ns(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn wall_ns(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// A clock that moves only when told to, for deterministic tests. Both readings return the
/// same value.
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ns: AtomicU64,
}

impl ManualClock {
    pub fn new(now_ns: u64) -> ManualClock {
        ManualClock {
            now_ns: AtomicU64::new(now_ns),
        }
    }

    pub fn set(&self, now_ns: u64) {
        self.now_ns.store(now_ns, Ordering::Relaxed);
    }

    pub fn advance(&self, ns: u64) {
        self.now_ns.fetch_add(ns, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn monotonic_ns(&self) -> u64 {
        self.now_ns.load(Ordering::Relaxed)
    }

    fn wall_ns(&self) -> u64 {
        self.now_ns.load(Ordering::Relaxed)
    }
}
