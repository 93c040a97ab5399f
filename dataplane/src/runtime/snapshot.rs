//! Read-mostly state published to workers by pointer swap (RCU style).
//!
//! The control thread builds a new immutable value and [`Publisher::publish`]es it. A worker's
//! [`Reader`] checks one atomic generation counter per batch and, only when it changed, takes
//! the new `Arc`. Old values are kept by the publisher until no reader holds them
//! (quiescence) and freed on the control thread by [`Publisher::reclaim`], so a worker never
//! pays for freeing a large table and never blocks.

use arc_swap::ArcSwap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug)]
struct Shared<T> {
    current: ArcSwap<T>,
    generation: AtomicU64,
    /// Origin of the pick-up timestamps readers record.
    epoch: Instant,
}

/// What a reader last acknowledged: the generation, and when it picked it up (ns since the
/// publisher's epoch), so publish latency is measured where the pick-up happens.
#[derive(Debug, Default)]
struct Ack {
    generation: AtomicU64,
    at_ns: AtomicU64,
}

/// The control side: publishes new versions.
#[derive(Debug)]
pub struct Publisher<T> {
    shared: Arc<Shared<T>>,
    /// Generation each reader has seen (one slot per reader).
    acks: Mutex<Vec<Arc<Ack>>>,
    retired: Mutex<Vec<Arc<T>>>,
}

/// The worker side: a cached `Arc` refreshed when the generation moves.
#[derive(Debug)]
pub struct Reader<T> {
    shared: Arc<Shared<T>>,
    cached: Arc<T>,
    seen: u64,
    ack: Arc<Ack>,
}

impl<T> Publisher<T> {
    pub fn new(initial: T) -> Publisher<T> {
        Publisher {
            shared: Arc::new(Shared {
                current: ArcSwap::from_pointee(initial),
                generation: AtomicU64::new(1),
                epoch: Instant::now(),
            }),
            acks: Mutex::new(Vec::new()),
            retired: Mutex::new(Vec::new()),
        }
    }

    /// A reader for one worker.
    pub fn reader(&self) -> Reader<T> {
        let g = self.shared.generation.load(Ordering::Acquire);
        let ack = Arc::new(Ack {
            generation: AtomicU64::new(g),
            at_ns: AtomicU64::new(0),
        });
        self.acks.lock().expect("acks lock").push(ack.clone());
        Reader {
            shared: self.shared.clone(),
            cached: self.shared.current.load_full(),
            seen: g,
            ack,
        }
    }

    /// Publish `value`; returns its generation.
    pub fn publish(&self, value: T) -> u64 {
        let old = self.shared.current.swap(Arc::new(value));
        let g = self.shared.generation.fetch_add(1, Ordering::AcqRel) + 1;
        self.retired.lock().expect("retired lock").push(old);
        g
    }

    /// The value most recently published.
    pub fn current(&self) -> Arc<T> {
        self.shared.current.load_full()
    }

    pub fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    /// True when every reader has picked up generation `g` (or a later one).
    pub fn all_seen(&self, g: u64) -> bool {
        let acks = self.acks.lock().expect("acks lock");
        acks.iter()
            .all(|a| Arc::strong_count(a) == 1 || a.generation.load(Ordering::Acquire) >= g)
    }

    /// Nanoseconds since this publisher's epoch (the clock of [`Publisher::seen_at`]).
    pub fn now_ns(&self) -> u64 {
        self.shared.epoch.elapsed().as_nanos() as u64
    }

    /// When the last reader picked up `g` (or a later version), in [`Publisher::now_ns`]
    /// time, once every live reader has; `None` before. Publish latency is this minus the
    /// publish time, measured where the readers pick versions up rather than when the
    /// publisher gets round to asking.
    pub fn seen_at(&self, g: u64) -> Option<u64> {
        let acks = self.acks.lock().expect("acks lock");
        let mut last = 0;
        for a in acks.iter().filter(|a| Arc::strong_count(a) > 1) {
            if a.generation.load(Ordering::Acquire) < g {
                return None;
            }
            last = last.max(a.at_ns.load(Ordering::Relaxed));
        }
        Some(last)
    }

    /// Wait until every reader has picked up `g`; returns how long that took, or `None` on
    /// timeout. Used to measure rule-publish latency.
    pub fn wait_seen(&self, g: u64, timeout: Duration) -> Option<Duration> {
        let t0 = Instant::now();
        loop {
            if self.all_seen(g) {
                return Some(t0.elapsed());
            }
            if t0.elapsed() > timeout {
                return None;
            }
            std::thread::yield_now();
        }
    }

    /// Free retired versions no reader holds any more. Returns how many were freed.
    pub fn reclaim(&self) -> usize {
        let mut r = self.retired.lock().expect("retired lock");
        let before = r.len();
        r.retain(|v| Arc::strong_count(v) > 1);
        before - r.len()
    }

    /// Retired versions still held by some reader.
    pub fn retired_len(&self) -> usize {
        self.retired.lock().expect("retired lock").len()
    }
}

impl<T> Reader<T> {
    /// The current value. One relaxed-cost atomic load when nothing changed; call once per
    /// batch, not per packet.
    #[inline]
    pub fn get(&mut self) -> &T {
        let g = self.shared.generation.load(Ordering::Acquire);
        if g != self.seen {
            self.refresh(g);
        }
        &self.cached
    }

    #[cold]
    fn refresh(&mut self, g: u64) {
        // The publisher keeps the old Arc in its retired list, so this drop never frees.
        self.cached = self.shared.current.load_full();
        self.seen = g;
        // A clock read per new version, not per batch: the cold path.
        let now = self.shared.epoch.elapsed().as_nanos() as u64;
        self.ack.at_ns.store(now, Ordering::Relaxed);
        self.ack.generation.store(g, Ordering::Release);
    }

    /// The value cached at the last `get`, without checking for a newer one.
    pub fn cached(&self) -> &T {
        &self.cached
    }

    /// The generation of [`Self::cached`] (each publish makes a new one), so a reader can
    /// keep results derived from one version until the next.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_see_new_versions_and_old_ones_are_reclaimed() {
        let p = Publisher::new(vec![1u32]);
        let mut r1 = p.reader();
        let mut r2 = p.reader();
        assert_eq!(r1.get(), &vec![1]);
        let g = p.publish(vec![2]);
        assert!(!p.all_seen(g));
        assert_eq!(p.reclaim(), 0, "readers still hold version 1");
        assert_eq!(r1.get(), &vec![2]);
        assert!(!p.all_seen(g));
        assert_eq!(r2.get(), &vec![2]);
        assert!(p.all_seen(g));
        assert_eq!(p.reclaim(), 1);
        assert_eq!(p.retired_len(), 0);
    }

    #[test]
    fn dropped_reader_does_not_block_quiescence() {
        let p = Publisher::new(0u8);
        let r = p.reader();
        drop(r);
        let g = p.publish(1);
        assert!(p.wait_seen(g, Duration::from_millis(10)).is_some());
    }

    #[test]
    fn concurrent_publish_and_read() {
        let p = Arc::new(Publisher::new(0u64));
        let mut readers: Vec<_> = (0..2).map(|_| p.reader()).collect();
        let handles: Vec<_> = readers
            .drain(..)
            .map(|mut r| {
                std::thread::spawn(move || {
                    let mut last = 0;
                    for _ in 0..200_000 {
                        let v = *r.get();
                        assert!(v >= last, "versions never go backwards");
                        last = v;
                    }
                    last
                })
            })
            .collect();
        for i in 1..=1000u64 {
            p.publish(i);
            p.reclaim();
        }
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*p.current(), 1000);
    }
}
