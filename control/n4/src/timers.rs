//! The URR timer index: every per-request and per-tick cost of usage reporting independent
//! of the number of sessions.
//!
//! Each usage [`Meter`] that has a time-based trigger armed (a periodic report, a Time
//! Threshold or a Time Quota; TS 29.244 section 5.2.2.2) has exactly one entry
//! `(deadline, UP SEID, URR ID)` in an ordered set, and remembers the deadline it filed
//! ([`Meter::armed`]) so the entry can be found and moved. A change to one meter (created,
//! re-armed by an Update URR, reported, removed) moves its one entry: O(log n). The earliest
//! deadline is the set's first element, so [`crate::Node::next_timer`] no longer walks every
//! meter, and [`crate::Node::poll_timers`] visits only the meters that are due.
//!
//! URRs whose triggers depend on counted volume (Volume Threshold, an unreported Volume
//! Quota) cannot be timed: the daemon polls their counters. They are kept in a second set
//! ([`UrrIndex::watched`]) so the poll reads only those counters, not every URR's.

use std::collections::BTreeSet;

use crate::usage::Meter;
use crate::{Nanos, Urr};

/// Deadline-ordered timers and the volume-watched set of every URR of every session.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct UrrIndex {
    due: BTreeSet<(Nanos, u64, u32)>,
    watched: BTreeSet<(u64, u32)>,
}

impl UrrIndex {
    /// File meter `(seid, id)` again after it or its rule changed (`urr` `None`: the rule
    /// could not be read, so nothing is armed).
    pub(crate) fn update(&mut self, seid: u64, id: u32, m: &mut Meter, urr: Option<&Urr>) {
        // u64::MAX is the meter's "none"; a deadline that far off is never reached anyway.
        let next = urr
            .and_then(|u| m.next_due(u))
            .map(|t| t.min(Nanos::MAX - 1));
        if next != m.armed() {
            if let Some(old) = m.armed() {
                self.due.remove(&(old, seid, id));
            }
            if let Some(at) = next {
                self.due.insert((at, seid, id));
            }
            m.set_armed(next);
        }
        if urr.is_some_and(|u| m.watches_volume(u)) {
            self.watched.insert((seid, id));
        } else {
            self.watched.remove(&(seid, id));
        }
    }

    /// Forget meter `(seid, id)` (its URR or session is gone).
    pub(crate) fn remove(&mut self, seid: u64, id: u32, m: &Meter) {
        if let Some(old) = m.armed() {
            self.due.remove(&(old, seid, id));
        }
        self.watched.remove(&(seid, id));
    }

    /// Whether meter `(seid, id)` is filed as `m` says and as `urr` asks (consistency check).
    pub(crate) fn filed_right(&self, seid: u64, id: u32, m: &Meter, urr: &Urr) -> bool {
        let want = m.next_due(urr).map(|t| t.min(Nanos::MAX - 1));
        want == m.armed()
            && want.is_none_or(|at| self.due.contains(&(at, seid, id)))
            && m.watches_volume(urr) == self.watched.contains(&(seid, id))
    }

    /// The earliest deadline.
    pub(crate) fn next(&self) -> Option<Nanos> {
        self.due.first().map(|e| e.0)
    }

    /// Meters due at `now`, earliest first.
    pub(crate) fn due(&self, now: Nanos) -> Vec<(u64, u32)> {
        self.due
            .range(..=(now, u64::MAX, u32::MAX))
            .map(|&(_, s, i)| (s, i))
            .collect()
    }

    /// URRs whose counters must be polled for volume triggers, in (SEID, URR ID) order.
    pub(crate) fn watched(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.watched.iter().copied()
    }

    pub(crate) fn watched_len(&self) -> usize {
        self.watched.len()
    }

    pub(crate) fn armed_len(&self) -> usize {
        self.due.len()
    }
}
