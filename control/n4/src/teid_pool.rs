//! The UPF's own TEIDs (F-TEID CHOOSE, TS 29.244 section 5.5.3): dense under churn, never
//! reused while late packets of their old session may still arrive.
//!
//! A counter hands out 1, 2, 3, ... as before; what changes is release. Every TEID dropped
//! from the node's TEID table (Session Deletion, a PDR removed or its F-TEID changed by a
//! Modification, an association released or its CP function restarted) is queued with its
//! release time for the quarantine ([`crate::NodeConfig::teid_reuse_after`]). Once its
//! quarantine is over, a TEID the counter has passed becomes free for reuse; one beyond the
//! counter (a CP-assigned F-TEID, CH = 0) is simply forgotten, the counter reaching it later.
//! CHOOSE takes the lowest free TEID, then a queued one whose quarantine ended since the
//! pool was last settled (oldest first), and only then the counter's next one. So the live
//! TEIDs stay below about (peak of live + released within the quarantine), which is what
//! the dataplane's direct TEID slots want, and the counter advances only when that peak
//! grows. Free TEIDs are kept as ranges, and a free range reaching up to the counter gives
//! the counter back, so TEIDs freed together (an association released, a load test's
//! deletions) cost one entry.
//!
//! The quarantine protects a new session from the old one's G-PDUs still in flight (a gNB
//! that has not yet processed the release, packets queued or reordered on the way): within
//! it, a G-PDU to the released TEID matches no session rather than somebody else's.
//!
//! Costs, none depending on the number of sessions beyond a map's O(log n): a release
//! queues one entry; the queue is settled from its front ([`TeidPool::settle`], at every
//! commit, release and timer poll), each entry once; an allocation reads the lowest free
//! range and the queue's front without changing the pool (a refused request leaves it as
//! it was; the queue entries it skips there, released again, live or beyond the counter,
//! are read again by the next request until the pool is settled, at the latest at the next
//! timer poll, so that read is bounded by the releases since, not by the sessions). A
//! queued TEID taken meanwhile by a CP-assigned F-TEID is dropped when its entry is settled
//! (never handed out twice: the node's TEID table is checked first); one released again
//! since is queued again with its new release time.

use std::collections::{BTreeMap, VecDeque};

use crate::Nanos;

/// The counter's state: (next TEID, wrapped).
pub(crate) type Counter = (u32, bool);

/// The counter, the released TEIDs in quarantine and the free ones (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TeidPool {
    /// The counter: the next TEID never handed out (1, 2, ...; after u32::MAX back to 1).
    pub(crate) next: u32,
    /// The counter has wrapped: any TEID may have been handed out before.
    pub(crate) wrapped: bool,
    /// Minimum time between a TEID's release and its reuse.
    quarantine: Nanos,
    /// TEID in quarantine -> its latest release time (exactly one `queue` entry each).
    released: BTreeMap<u32, Nanos>,
    /// (release time, TEID), in release order.
    queue: VecDeque<(Nanos, u32)>,
    /// Free TEIDs below the counter, their quarantine over: ranges first -> last, disjoint
    /// and not adjacent. Never holds a TEID in use or in quarantine.
    free: BTreeMap<u32, u32>,
}

impl TeidPool {
    pub(crate) fn new(quarantine: Nanos) -> Self {
        TeidPool {
            next: 1,
            wrapped: false,
            quarantine,
            released: BTreeMap::new(),
            queue: VecDeque::new(),
            free: BTreeMap::new(),
        }
    }

    /// The counter has handed `teid` out before.
    pub(crate) fn passed(&self, teid: u32) -> bool {
        self.wrapped || teid < self.next
    }

    /// `teid` left the node's TEID table (`in_use`, as it is now) at `now`.
    pub(crate) fn release(&mut self, now: Nanos, teid: u32, in_use: &BTreeMap<u32, u64>) {
        if teid != 0 && self.released.insert(teid, now).is_none() {
            self.queue.push_back((now, teid));
        }
        self.settle(now, in_use);
    }

    /// `teid` is in the node's TEID table now (handed out, or a CP-assigned F-TEID).
    pub(crate) fn taken(&mut self, teid: u32) {
        let Some((&first, &last)) = self.free.range(..=teid).next_back() else {
            return;
        };
        if last < teid {
            return;
        }
        self.free.remove(&first);
        if first < teid {
            self.free.insert(first, teid - 1);
        }
        if teid < last {
            self.free.insert(teid + 1, last);
        }
    }

    /// Move the TEIDs whose quarantine is over at `now` from the queue to the free ranges
    /// (those the counter has not passed are forgotten, those in use again dropped).
    pub(crate) fn settle(&mut self, now: Nanos, in_use: &BTreeMap<u32, u64>) {
        while let Some(&(at, teid)) = self.queue.front() {
            if now < at.saturating_add(self.quarantine) {
                break;
            }
            self.queue.pop_front();
            let Some(&real) = self.released.get(&teid) else {
                continue;
            };
            if real != at {
                // Released again since this entry was queued: its quarantine restarted.
                self.queue.push_back((real, teid));
                continue;
            }
            self.released.remove(&teid);
            if !in_use.contains_key(&teid) && self.passed(teid) {
                self.free_insert(teid);
            }
        }
    }

    fn free_insert(&mut self, teid: u32) {
        let (mut first, mut last) = (teid, teid);
        if let Some((&f, &l)) = self.free.range(..=teid).next_back() {
            if l >= teid {
                return;
            }
            if l + 1 == teid {
                self.free.remove(&f);
                first = f;
            }
        }
        if let Some(l) = teid.checked_add(1).and_then(|n| self.free.remove(&n)) {
            last = l;
        }
        if !self.wrapped && last.checked_add(1) == Some(self.next) {
            // The top of the counter's range is free again: the counter takes it back.
            self.next = first;
        } else {
            self.free.insert(first, last);
        }
    }

    /// The lowest free TEID at or above `from`.
    pub(crate) fn free_from(&self, from: u32) -> Option<u32> {
        match self.free.range(..=from).next_back() {
            Some((_, &last)) if last >= from => Some(from),
            _ => self
                .free
                .range(from..)
                .next()
                .map(|(&first, _)| first)
                .filter(|&f| f > from),
        }
    }

    /// Queue entry `i` (0: the oldest).
    pub(crate) fn queued_entry(&self, i: usize) -> Option<(Nanos, u32)> {
        self.queue.get(i).copied()
    }

    /// When `teid`, in quarantine, was last released.
    pub(crate) fn released_at(&self, teid: u32) -> Option<Nanos> {
        self.released.get(&teid).copied()
    }

    pub(crate) fn quarantine(&self) -> Nanos {
        self.quarantine
    }

    /// TEIDs in quarantine (or whose quarantine ended since the last settling).
    pub(crate) fn in_quarantine(&self) -> usize {
        self.released.len()
    }

    /// The pool's invariants, against the node's TEID table `in_use`.
    pub(crate) fn check(&self, in_use: &BTreeMap<u32, u64>) -> Result<(), String> {
        if self.next == 0 {
            return Err("TEID counter at 0".into());
        }
        if self.queue.len() != self.released.len() {
            return Err(format!(
                "{} TEID queue entries for {} released TEIDs",
                self.queue.len(),
                self.released.len()
            ));
        }
        let mut seen = BTreeMap::new();
        for &(at, t) in &self.queue {
            if seen.insert(t, at).is_some() {
                return Err(format!("TEID {t} queued twice"));
            }
            if self.released.get(&t).is_none_or(|&real| real < at) {
                return Err(format!("TEID {t} queued at {at} without its release"));
            }
            if self.free_from(t) == Some(t) {
                return Err(format!("TEID {t} both in quarantine and free"));
            }
        }
        let mut prev: Option<u32> = None;
        for (&first, &last) in &self.free {
            if first > last
                || first == 0
                || prev.is_some_and(|p| u64::from(p) + 1 >= u64::from(first))
            {
                return Err(format!("bad free TEID range {first}..={last}"));
            }
            if !self.wrapped && last >= self.next {
                return Err(format!("free TEIDs {first}..={last} beyond the counter"));
            }
            if let Some((&t, _)) = in_use.range(first..=last).next() {
                return Err(format!("TEID {t} in use and free"));
            }
            prev = Some(last);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: Nanos = 60;

    fn pool_with(next: u32) -> TeidPool {
        let mut p = TeidPool::new(Q);
        p.next = next;
        p
    }

    #[test]
    fn free_ranges_merge_split_and_give_the_counter_back() {
        let none = BTreeMap::new();
        let mut p = pool_with(11);
        for t in [3, 5, 4, 7] {
            p.release(0, t, &none);
        }
        assert_eq!(p.free_from(1), None, "quarantine");
        p.settle(Q - 1, &none);
        assert_eq!(p.in_quarantine(), 4);
        p.settle(Q, &none);
        assert_eq!(p.in_quarantine(), 0);
        assert_eq!(p.free, [(3, 5), (7, 7)].into());
        assert_eq!(
            (p.free_from(1), p.free_from(4), p.free_from(6)),
            (Some(3), Some(4), Some(7))
        );
        assert_eq!(p.free_from(8), None);
        p.taken(4);
        assert_eq!(p.free, [(3, 3), (5, 5), (7, 7)].into());
        // 8, 9, 10 freed: 7..=10 reaches the counter, which takes it back.
        for t in [10, 8, 9] {
            p.release(Q, t, &none);
        }
        p.settle(2 * Q, &none);
        assert_eq!(p.free, [(3, 3), (5, 5)].into());
        assert_eq!(p.next, 7);
        p.check(&none).unwrap();
    }

    #[test]
    fn beyond_the_counter_only_held_then_forgotten() {
        let none = BTreeMap::new();
        let mut p = pool_with(5);
        p.release(0, 1000, &none);
        assert_eq!(p.released_at(1000), Some(0));
        p.settle(Q, &none);
        assert_eq!((p.released_at(1000), p.free_from(1)), (None, None));
        assert_eq!(p.next, 5);
    }

    #[test]
    fn released_again_restarts_the_quarantine() {
        let none = BTreeMap::new();
        let mut p = pool_with(10);
        p.release(0, 3, &none);
        // Taken by a CP-assigned F-TEID and released again at 50.
        p.release(50, 3, &none);
        p.check(&none).unwrap();
        p.settle(Q, &none);
        assert_eq!((p.free_from(1), p.released_at(3)), (None, Some(50)));
        p.settle(50 + Q, &none);
        assert_eq!(p.free_from(1), Some(3));
        p.check(&none).unwrap();
    }

    #[test]
    fn in_use_when_its_quarantine_ends_is_not_freed() {
        let mut p = pool_with(10);
        p.release(0, 3, &BTreeMap::new());
        let live: BTreeMap<u32, u64> = [(3, 7)].into();
        p.settle(Q, &live);
        assert_eq!((p.free_from(1), p.in_quarantine()), (None, 0));
        p.check(&live).unwrap();
    }
}
