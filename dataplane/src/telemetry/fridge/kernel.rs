//! `fridge(M, p)` (section 3.2) and sets of fridges sharing one request stream (section 4.2).

use super::weight::{Weigher, XMode};
use super::{fmix64_by, Estimator, Keyed, FMIX64_MUL};

/// Most fridges in one set (the seed evaluates one and two; four leave room to try more).
pub const MAX_FRIDGES: usize = 4;

/// One fridge's size and entry probability.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FridgeSpec {
    /// Slots (`M >= 2`, section 3.3).
    pub m: u32,
    /// Entry probability `p` in `(0, 1]`.
    pub p: f64,
}

/// A delay sample: a response that found its request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Response time minus request time.
    pub delay_ns: u64,
    /// Counts (insertions or requests, see [`XMode`]) between request and response.
    pub x: u64,
    /// Index of the fridge in its set (0 for a baseline table).
    pub fridge: u8,
    /// Correction factor `1/q` (1 for the baselines).
    pub weight: f64,
}

/// Why a set refuses a configuration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    #[error("a fridge set has 1 to {MAX_FRIDGES} fridges, not {0}")]
    Count(usize),
    #[error("fridge {0}: M must be at least 2 (section 3.3 of the fridge paper), not {1}")]
    TooSmall(usize, u32),
    #[error("fridge {0}: p must be in (0, 1], not {1}")]
    BadP(usize, f64),
    #[error("the fridges' entry probabilities sum to {0}, more than 1")]
    SumAboveOne(f64),
}

/// What a set has seen (plain counters: the set is per worker).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetStats {
    pub requests: u64,
    /// Requests that entered a fridge.
    pub inserted: u64,
    /// Insertions that overwrote a live entry (a pending request lost).
    pub overwrote: u64,
    pub responses: u64,
    /// Responses whose coin picks no fridge (their request was never eligible).
    pub not_sampled: u64,
    /// Responses that found their request: samples.
    pub matched: u64,
    /// Responses whose slot held another ID or nothing (evicted, or no request seen).
    pub unmatched: u64,
}

#[derive(Debug)]
struct Table {
    sig: Box<[u32]>,
    /// Per slot, the request's timestamp and counter stamp side by side (one bounds check and
    /// one line for both).
    stamps: Box<[[u64; 2]]>,
    inserts: u64,
    m: u32,
    weigher: Weigher,
}

/// One or more fridges fed by one stream. Each ID's hash gives a uniform coin; fridge `k`
/// takes the IDs whose coin falls in its interval of width `p_k`, so each fridge sees every
/// request with probability `p_k` and estimates the whole distribution on its own (the
/// estimators are then combined per bin by inverse-variance weighting, `hist::combine_ivw`).
#[derive(Debug)]
pub struct FridgeSet {
    tables: Vec<Table>,
    /// Coin upper bounds (exclusive) per fridge, cumulative, over 2^32.
    bounds: [u64; MAX_FRIDGES],
    /// The last fridge's bound less one, the largest coin that enters a fridge: a coin above
    /// it enters none (one 32-bit compare decides entry for the common request; the fridge is
    /// picked only for those that enter).
    last: u32,
    /// Requests offered (the `x` clock of [`XMode::Requests`]; `stats().requests`).
    requests: u64,
    mode: XMode,
    seed: u64,
    /// [`FMIX64_MUL`], read from here by [`head`](Self::head).
    mul: [u64; 2],
    stats: SetStats,
}

impl FridgeSet {
    /// A set of `specs.len()` fridges (all slots empty), IDs hashed with `seed`. The entry
    /// probabilities are rounded to multiples of 2^-32 and the weights use the rounded ones.
    pub fn new(specs: &[FridgeSpec], mode: XMode, seed: u64) -> Result<FridgeSet, SpecError> {
        if specs.is_empty() || specs.len() > MAX_FRIDGES {
            return Err(SpecError::Count(specs.len()));
        }
        let mut bounds = [0u64; MAX_FRIDGES];
        let mut tables = Vec::with_capacity(specs.len());
        let (mut sum, mut lo) = (0.0f64, 0u64);
        for (i, s) in specs.iter().enumerate() {
            if s.m < 2 {
                return Err(SpecError::TooSmall(i, s.m));
            }
            if !(s.p > 0.0 && s.p <= 1.0) {
                return Err(SpecError::BadP(i, s.p));
            }
            sum += s.p;
            if sum > 1.0 + 1e-9 {
                return Err(SpecError::SumAboveOne(sum));
            }
            let hi = ((sum * 4_294_967_296.0).round() as u64).clamp(lo + 1, 1 << 32);
            let p = (hi - lo) as f64 / 4_294_967_296.0;
            bounds[i] = hi;
            lo = hi;
            let m = s.m as usize;
            tables.push(Table {
                sig: vec![0; m].into_boxed_slice(),
                stamps: vec![[0; 2]; m].into_boxed_slice(),
                inserts: 0,
                m: s.m,
                weigher: Weigher::new(s.m, p, mode),
            });
        }
        for b in bounds.iter_mut().skip(specs.len()) {
            *b = lo;
        }
        Ok(FridgeSet {
            tables,
            bounds,
            // Every bound is at least 1 and at most 2^32.
            last: (lo - 1) as u32,
            requests: 0,
            mode,
            seed,
            mul: FMIX64_MUL,
            stats: SetStats::default(),
        })
    }

    /// [`Keyed::head`]`(id, seed)`, the same function (tested equal): fmix64 with its
    /// multipliers read from the set, not written into the code. A 64-bit constant is an
    /// instruction of its own before each multiply; read from memory, it is the multiply's
    /// operand (two instructions fewer per request, from the set's line the seed and the
    /// coin's bound share).
    #[inline(always)]
    fn head(&self, id: u64) -> u64 {
        fmix64_by(id ^ self.seed, self.mul)
    }

    /// Number of fridges.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    pub fn mode(&self) -> XMode {
        self.mode
    }

    /// The weigher of fridge `k` (its effective `p` and `M`).
    pub fn weigher(&self, k: usize) -> Weigher {
        self.tables[k].weigher
    }

    /// Effective entry probability of fridge `k` (rounded to 2^-32).
    pub fn p(&self, k: usize) -> f64 {
        self.tables[k].weigher.inv_p().recip()
    }

    pub fn m(&self, k: usize) -> u32 {
        self.tables[k].m
    }

    pub fn stats(&self) -> SetStats {
        SetStats {
            requests: self.requests,
            ..self.stats
        }
    }

    /// Slots holding a pending request, over all fridges (a scan: for tests and reports).
    pub fn occupied(&self) -> usize {
        self.tables
            .iter()
            .map(|t| t.sig.iter().filter(|&&s| s != 0).count())
            .sum()
    }

    #[inline]
    fn pick(&self, coin: u32) -> Option<usize> {
        if coin > self.last {
            return None;
        }
        Some(self.pick_entering(u64::from(coin)))
    }

    /// The fridge of a coin at most [`last`](Self::last).
    #[inline(always)]
    fn pick_entering(&self, c: u64) -> usize {
        // The bounds never decrease (those past the last fridge repeat its bound), so the
        // fridge is the number of bounds at or below the coin: the first compare alone for
        // a coin of the first fridge (every entering coin of a one-fridge set), else three
        // more, no branch.
        let b = &self.bounds;
        if c < b[0] {
            return 0;
        }
        1 + usize::from(c >= b[1]) + usize::from(c >= b[2]) + usize::from(c >= b[3])
    }

    /// A request: count it, and if its coin picks a fridge, overwrite its slot there.
    #[inline]
    pub fn request(&mut self, id: u64, now_ns: u64) {
        self.requests += 1;
        // The coin first: a request that enters no fridge costs one finaliser and a compare.
        let h = self.head(id);
        let c = Keyed::coin_of(h);
        if c > self.last {
            return;
        }
        let c = u64::from(c);
        self.enter_at(h, c, now_ns);
    }

    /// [`request`](Self::request) with the entering half out of line, for a caller whose
    /// loop must stay small (the pipeline stage: with `p = 1/16` fifteen requests in sixteen
    /// stop at the coin). Same state, same result.
    #[inline(always)]
    pub fn request_sparse(&mut self, id: u64, now_ns: u64) {
        self.requests += 1;
        let h = self.head(id);
        let c = Keyed::coin_of(h);
        if c > self.last {
            return;
        }
        let c = u64::from(c);
        self.enter(h, c, now_ns);
    }

    #[inline(never)]
    fn enter(&mut self, h: u64, c: u64, now_ns: u64) {
        self.enter_at(h, c, now_ns);
    }

    /// A request whose coin `c` (of head `h`) enters a fridge: overwrite its slot.
    #[inline(always)]
    fn enter_at(&mut self, h: u64, c: u64, now_ns: u64) {
        let f = self.pick_entering(c);
        let k = Keyed::from_head_by(h, self.mul);
        let requests = self.requests;
        let t = &mut self.tables[f];
        t.inserts += 1;
        let i = k.index(t.m);
        self.stats.inserted += 1;
        self.stats.overwrote += u64::from(t.sig[i] != 0);
        t.sig[i] = k.sig;
        t.stamps[i] = [
            now_ns,
            match self.mode {
                XMode::Insertions => t.inserts,
                XMode::Requests => requests,
            },
        ];
    }

    /// A response: if its request is still in its slot, clear the slot and return the sample.
    #[inline]
    pub fn response(&mut self, id: u64, now_ns: u64) -> Option<Sample> {
        self.stats.responses += 1;
        let h = self.head(id);
        let Some(f) = self.pick(Keyed::coin_of(h)) else {
            self.stats.not_sampled += 1;
            return None;
        };
        let k = Keyed::from_head_by(h, self.mul);
        let requests = self.requests;
        let t = &mut self.tables[f];
        let i = k.index(t.m);
        if t.sig[i] != k.sig {
            self.stats.unmatched += 1;
            return None;
        }
        t.sig[i] = 0;
        let now_ctr = match self.mode {
            XMode::Insertions => t.inserts,
            XMode::Requests => requests,
        };
        let [ts, ctr] = t.stamps[i];
        let x = now_ctr.wrapping_sub(ctr);
        self.stats.matched += 1;
        Some(Sample {
            delay_ns: now_ns.saturating_sub(ts),
            x,
            fridge: f as u8,
            weight: t.weigher.weight(x),
        })
    }
}

impl Estimator for FridgeSet {
    fn request(&mut self, id: u64, now_ns: u64) {
        FridgeSet::request(self, id, now_ns)
    }
    fn response(&mut self, id: u64, now_ns: u64) -> Option<Sample> {
        FridgeSet::response(self, id, now_ns)
    }
    /// 4 (signature) + 8 (timestamp) + 8 (counter) bytes per slot; the same per-slot cost is
    /// charged to the baselines (4 + 8), so equal M means the seed's "equal memory" in slots.
    fn state_bytes(&self) -> usize {
        self.tables.iter().map(|t| t.m as usize * 20).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(m: u32, p: f64) -> FridgeSet {
        FridgeSet::new(&[FridgeSpec { m, p }], XMode::Insertions, 7).unwrap()
    }

    #[test]
    fn match_clears_and_reports_delay_and_x() {
        let mut f = one(1024, 1.0);
        f.request(1, 100);
        f.request(2, 150);
        f.request(3, 170);
        let s = f.response(1, 1_100).expect("request 1 is in the fridge");
        assert_eq!(s.delay_ns, 1_000);
        assert_eq!(s.x, 2, "two insertions after request 1");
        assert_eq!(s.fridge, 0);
        let w = Weigher::new(1024, 1.0, XMode::Insertions);
        assert_eq!(s.weight, w.weight(2));
        assert!(f.response(1, 1_200).is_none(), "a slot answers once");
        let s3 = f.response(3, 1_300).unwrap();
        assert_eq!((s3.delay_ns, s3.x), (1_130, 0));
        assert_eq!(f.stats().matched, 2);
        assert_eq!(f.stats().unmatched, 1);
        assert_eq!(f.occupied(), 1);
    }

    /// The set's head is `Keyed::head` under its seed (and so is its coin).
    #[test]
    fn set_head_is_keyed_head() {
        for seed in [0, 1, 7, u64::MAX, 0x9e37_79b9_7f4a_7c15] {
            let f =
                FridgeSet::new(&[FridgeSpec { m: 8, p: 0.5 }], XMode::Insertions, seed).unwrap();
            let mut id = 0x0123_4567_89ab_cdefu64;
            for _ in 0..1_000 {
                assert_eq!(f.head(id), Keyed::head(id, seed), "id {id:#x}, seed {seed}");
                id = id.rotate_left(7).wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x5a;
            }
            assert_eq!(f.head(0), Keyed::head(0, seed));
            assert_eq!(f.head(u64::MAX), Keyed::head(u64::MAX, seed));
        }
    }

    /// `pick` is the number of bounds at or below the coin (below `last`), for sets of one to
    /// four fridges, at and around every bound.
    #[test]
    fn pick_counts_the_bounds_below_the_coin() {
        let ps: [&[f64]; 5] = [
            &[1.0],
            &[1.0 / 16.0],
            &[0.25, 0.5],
            &[0.1, 0.2, 0.3],
            &[0.25, 0.25, 0.25, 0.25],
        ];
        for p in ps {
            let specs: Vec<_> = p.iter().map(|&p| FridgeSpec { m: 8, p }).collect();
            let f = FridgeSet::new(&specs, XMode::Insertions, 1).unwrap();
            let mut coins = vec![0u32, 1, u32::MAX - 1, u32::MAX];
            for &b in &f.bounds {
                for d in [-2i64, -1, 0, 1] {
                    if let Ok(c) = u32::try_from(b as i64 + d) {
                        coins.push(c);
                    }
                }
            }
            for c in coins {
                let want =
                    (c <= f.last).then(|| f.bounds.iter().filter(|&&b| u64::from(c) >= b).count());
                assert_eq!(f.pick(c), want, "coin {c:#x}, p {p:?}");
            }
        }
    }

    #[test]
    fn request_sparse_is_request() {
        let specs = [FridgeSpec { m: 64, p: 0.25 }, FridgeSpec { m: 32, p: 0.5 }];
        let mut a = FridgeSet::new(&specs, XMode::Requests, 5).unwrap();
        let mut b = FridgeSet::new(&specs, XMode::Requests, 5).unwrap();
        for id in 0..2_000u64 {
            a.request(id, id);
            b.request_sparse(id, id);
        }
        assert_eq!(a.stats(), b.stats());
        for id in (0..2_000u64).step_by(3) {
            assert_eq!(a.response(id, 5_000), b.response(id, 5_000));
        }
        assert_eq!(a.stats(), b.stats());
    }

    #[test]
    fn requests_mode_counts_every_request() {
        let mut f = FridgeSet::new(&[FridgeSpec { m: 64, p: 0.5 }], XMode::Requests, 3).unwrap();
        // Find an ID that enters and 5 that do not.
        let entering: Vec<u64> = (0..1000)
            .filter(|&i| f.pick(Keyed::new(i, 3).coin).is_some())
            .take(1)
            .collect();
        let skipped: Vec<u64> = (0..1000)
            .filter(|&i| f.pick(Keyed::new(i, 3).coin).is_none())
            .take(5)
            .collect();
        f.request(entering[0], 0);
        for &s in &skipped {
            f.request(s, 1);
        }
        let s = f.response(entering[0], 10).unwrap();
        assert_eq!(s.x, 5, "five requests after it, none inserted");
        assert_eq!(f.stats().inserted, 1);
        assert_eq!(f.response(skipped[0], 11), None);
        assert_eq!(f.stats().not_sampled, 1);
    }

    #[test]
    fn overwrite_on_collision_and_bounded_state() {
        let mut f = one(4, 1.0);
        for id in 0..10_000u64 {
            f.request(id, id);
        }
        assert!(f.occupied() <= 4);
        assert_eq!(f.stats().inserted, 10_000);
        assert!(f.stats().overwrote >= 10_000 - 4);
        assert_eq!(f.state_bytes(), 80);
    }

    #[test]
    fn coins_split_ids_by_p_intervals() {
        let specs = [
            FridgeSpec { m: 256, p: 0.25 },
            FridgeSpec { m: 256, p: 0.5 },
        ];
        let f = FridgeSet::new(&specs, XMode::Insertions, 11).unwrap();
        let mut n = [0u32; 3];
        for id in 0..100_000u64 {
            n[f.pick(Keyed::new(id, 11).coin).unwrap_or(2)] += 1;
        }
        let frac = |c: u32| f64::from(c) / 100_000.0;
        assert!((frac(n[0]) - 0.25).abs() < 0.01, "{n:?}");
        assert!((frac(n[1]) - 0.5).abs() < 0.01, "{n:?}");
        assert!((frac(n[2]) - 0.25).abs() < 0.01, "{n:?}");
        assert_eq!(f.p(0), 0.25);
        assert_eq!(f.p(1), 0.5);
    }

    #[test]
    fn bad_specs_are_refused_by_name() {
        let e = |s: &[FridgeSpec]| FridgeSet::new(s, XMode::Insertions, 0).unwrap_err();
        assert_eq!(e(&[]), SpecError::Count(0));
        assert_eq!(e(&[FridgeSpec { m: 1, p: 0.5 }]), SpecError::TooSmall(0, 1));
        assert_eq!(e(&[FridgeSpec { m: 8, p: 0.0 }]), SpecError::BadP(0, 0.0));
        assert!(matches!(
            e(&[FridgeSpec { m: 8, p: f64::NAN }]),
            SpecError::BadP(0, _)
        ));
        let two = [FridgeSpec { m: 8, p: 0.7 }, FridgeSpec { m: 8, p: 0.7 }];
        assert!(matches!(e(&two), SpecError::SumAboveOne(_)));
        assert_eq!(e(&[FridgeSpec { m: 8, p: 1.0 }; 5]), SpecError::Count(5));
    }
}
