//! The seed's baselines, on the same [`Estimator`] path as the fridge: the always-overwrite
//! hash-indexed array (section 2.1) and the expiry-T table with D stages (section 5, after
//! Chen et al., "Measuring TCP round-trip time in the data plane"). Their samples weigh 1.

use super::kernel::Sample;
use super::{Estimator, Keyed};

/// Section 2.1: every request overwrites its slot; a response that finds its ID reports the
/// delay and clears the slot.
#[derive(Debug)]
pub struct SimpleTable {
    sig: Box<[u32]>,
    ts: Box<[u64]>,
    m: u32,
    seed: u64,
}

impl SimpleTable {
    /// `m >= 1` slots.
    pub fn new(m: u32, seed: u64) -> SimpleTable {
        let m = m.max(1);
        SimpleTable {
            sig: vec![0; m as usize].into_boxed_slice(),
            ts: vec![0; m as usize].into_boxed_slice(),
            m,
            seed,
        }
    }
}

impl Estimator for SimpleTable {
    #[inline]
    fn request(&mut self, id: u64, now_ns: u64) {
        let k = Keyed::new(id, self.seed);
        let i = k.index(self.m);
        self.sig[i] = k.sig;
        self.ts[i] = now_ns;
    }

    #[inline]
    fn response(&mut self, id: u64, now_ns: u64) -> Option<Sample> {
        let k = Keyed::new(id, self.seed);
        let i = k.index(self.m);
        if self.sig[i] != k.sig {
            return None;
        }
        self.sig[i] = 0;
        Some(Sample {
            delay_ns: now_ns.saturating_sub(self.ts[i]),
            x: 0,
            fridge: 0,
            weight: 1.0,
        })
    }

    fn state_bytes(&self) -> usize {
        self.m as usize * 12
    }
}

/// `D` stages of `M/D` slots, each indexed by its own hash. A request takes the first stage
/// whose slot is empty or holds an entry older than `T` (expired); if every stage holds a
/// live entry the request is not stored (existing entries are favoured until they expire).
/// A response looks in every stage. With `T = 0` and one stage this is [`SimpleTable`].
#[derive(Debug)]
pub struct ExpiryTable {
    sig: Box<[u32]>,
    ts: Box<[u64]>,
    per_stage: u32,
    stages: u32,
    expiry_ns: u64,
    seed: u64,
    /// Requests refused because every stage's slot was live.
    pub refused: u64,
}

impl ExpiryTable {
    /// `m` slots in total split over `stages` (>= 1) stages; entries expire after `expiry_ns`.
    pub fn new(m: u32, stages: u32, expiry_ns: u64, seed: u64) -> ExpiryTable {
        let stages = stages.max(1);
        let per_stage = (m / stages).max(1);
        let n = (per_stage * stages) as usize;
        ExpiryTable {
            sig: vec![0; n].into_boxed_slice(),
            ts: vec![0; n].into_boxed_slice(),
            per_stage,
            stages,
            expiry_ns,
            seed,
            refused: 0,
        }
    }

    #[inline]
    fn slot(&self, k: Keyed, s: u32) -> usize {
        let i = if s == 0 {
            k.index(self.per_stage)
        } else {
            k.stage_index(s, self.per_stage)
        };
        (s * self.per_stage) as usize + i
    }
}

impl Estimator for ExpiryTable {
    #[inline]
    fn request(&mut self, id: u64, now_ns: u64) {
        let k = Keyed::new(id, self.seed);
        for s in 0..self.stages {
            let i = self.slot(k, s);
            if self.sig[i] == 0 || now_ns.saturating_sub(self.ts[i]) > self.expiry_ns {
                self.sig[i] = k.sig;
                self.ts[i] = now_ns;
                return;
            }
        }
        self.refused += 1;
    }

    #[inline]
    fn response(&mut self, id: u64, now_ns: u64) -> Option<Sample> {
        let k = Keyed::new(id, self.seed);
        for s in 0..self.stages {
            let i = self.slot(k, s);
            if self.sig[i] == k.sig {
                self.sig[i] = 0;
                return Some(Sample {
                    delay_ns: now_ns.saturating_sub(self.ts[i]),
                    x: 0,
                    fridge: 0,
                    weight: 1.0,
                });
            }
        }
        None
    }

    fn state_bytes(&self) -> usize {
        self.sig.len() * 12
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_table_overwrites() {
        let mut t = SimpleTable::new(1, 0);
        t.request(1, 10);
        t.request(2, 20);
        assert_eq!(t.response(1, 30), None, "overwritten by request 2");
        let s = t.response(2, 50).unwrap();
        assert_eq!((s.delay_ns, s.weight), (30, 1.0));
        assert_eq!(t.response(2, 60), None);
    }

    #[test]
    fn expiry_table_keeps_live_entries_and_replaces_expired_ones() {
        let mut t = ExpiryTable::new(1, 1, 100, 0);
        t.request(1, 0);
        t.request(2, 50); // slot live (age 50 <= 100): refused
        assert_eq!(t.refused, 1);
        assert_eq!(t.response(2, 60), None);
        t.request(3, 200); // age 200 > 100: request 1 expired, replaced
        assert_eq!(t.response(1, 210), None);
        assert_eq!(t.response(3, 230).unwrap().delay_ns, 30);
    }

    #[test]
    fn four_stages_hold_four_colliding_requests() {
        // One slot per stage: four live requests fit, the fifth is refused.
        let mut t = ExpiryTable::new(4, 4, u64::MAX, 5);
        for id in 0..5 {
            t.request(id, id * 10);
        }
        assert_eq!(t.refused, 1);
        let got = (0..5).filter(|&id| t.response(id, 100).is_some()).count();
        assert_eq!(got, 4);
        assert_eq!(t.state_bytes(), 48);
    }
}
