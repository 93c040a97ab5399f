//! The translator's logic for one worker, I/O-free: a DTA payload (the UDP payload of a
//! report) in, writes into the region out, every refusal counted by reason. The pipeline
//! stage (`peregrine-control`'s `dta-translator` kind) does the I/O: it finds the payload,
//! applies the per-source rate limit, and sends the NACKs this returns.

use crate::layout::Layout;
use crate::store::{Appender, PostcardOutcome, Postcarder, Store};
use crate::Refusal;
use peregrine_wire::dta::{self, Primitive, Repr, Variant};

/// Per-worker translator configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub variant: Variant,
    /// Postcarding cache entries per worker.
    pub pc_cache_slots: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            variant: Variant::Tracked,
            pc_cache_slots: 32_768,
        }
    }
}

/// Counters of one worker's translator.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    pub key_write: u64,
    pub key_increment: u64,
    pub append: u64,
    pub postcard: u64,
    /// Slot / counter / batch / chunk writes into the region (the seed's "RDMA writes").
    pub region_writes: u64,
    pub postcard_paths_complete: u64,
    pub postcard_early_flush: u64,
    pub postcard_duplicate_hop: u64,
    /// Refusals, indexed by [`Refusal::index`].
    pub refused: [u64; Refusal::COUNT],
}

impl Counters {
    pub fn refused_total(&self) -> u64 {
        self.refused.iter().sum()
    }

    /// Add another worker's counters.
    pub fn add(&mut self, o: &Counters) {
        self.key_write += o.key_write;
        self.key_increment += o.key_increment;
        self.append += o.append;
        self.postcard += o.postcard;
        self.region_writes += o.region_writes;
        self.postcard_paths_complete += o.postcard_paths_complete;
        self.postcard_early_flush += o.postcard_early_flush;
        self.postcard_duplicate_hop += o.postcard_duplicate_hop;
        for (a, b) in self.refused.iter_mut().zip(o.refused.iter()) {
            *a += b;
        }
    }
}

/// A refused report: why, and the sequence number to NACK if it was retransmittable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub why: Refusal,
    pub nack: Option<u8>,
}

/// One worker's translator.
#[derive(Debug)]
pub struct Translator {
    store: Store,
    cfg: Config,
    /// `cfg.variant.base_len()`.
    base: usize,
    appender: Appender,
    postcarder: Postcarder,
    pub counters: Counters,
}

impl Translator {
    pub fn new(store: Store, cfg: Config) -> Translator {
        let l: Layout = *store.layout();
        Translator {
            appender: Appender::new(&l),
            postcarder: Postcarder::new(&l, cfg.pc_cache_slots),
            store,
            base: cfg.variant.base_len(),
            cfg,
            counters: Counters::default(),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Count a refusal decided outside (rate limit, not a report) and say whether to NACK.
    pub fn refuse(&mut self, why: Refusal, payload: &[u8]) -> Refused {
        self.counters.refused[why.index()] += 1;
        Refused {
            why,
            nack: nack_seq(payload, self.cfg.variant),
        }
    }

    /// Handle one report payload.
    #[inline]
    pub fn handle(&mut self, payload: &[u8]) -> Result<(), Refused> {
        match self.fast(payload) {
            Some(r) => r,
            None => self.handle_parsed(payload),
        }
    }

    /// [`handle`](Self::handle) for what the fast path does not take: the full parse (and
    /// every refusal of a malformed report).
    #[inline(never)]
    fn handle_parsed(&mut self, payload: &[u8]) -> Result<(), Refused> {
        let r = dta::Packet::new_checked(payload, self.cfg.variant)
            .and_then(|p| Repr::parse(&p))
            .map_err(|e| match e {
                peregrine_wire::Error::Truncated => Refusal::Truncated,
                peregrine_wire::Error::Unsupported => Refusal::UnknownOpcode,
                _ => Refusal::Malformed,
            });
        let r = match r {
            Ok(r) => r,
            Err(why) => return Err(self.refuse(why, payload)),
        };
        match self.apply(&r) {
            Ok(()) => Ok(()),
            Err(why) => {
                self.counters.refused[why.index()] += 1;
                Err(Refused {
                    why,
                    nack: r.retransmittable.then_some(r.seqnum),
                })
            }
        }
    }

    /// One-word Key-Write, Key-Increment, Append and Postcarding, the per-packet common
    /// cases, decoded straight from the payload's bytes by the wire crate's
    /// [`dta::decode_fast`] (no `Repr`, whose 7-word Key-Write data array is built and
    /// copied per report; the benchmark's hash-map collector decodes with the same function).
    /// `None` for anything else, which [`handle`](Self::handle) parses in full; a payload
    /// taken here has exactly the length `Packet::check_len` accepts for it, and is stored or
    /// refused as the full path would. Inlined into the caller's per-packet loop with
    /// [`handle`](Self::handle).
    #[inline(always)]
    fn fast(&mut self, payload: &[u8]) -> Option<Result<(), Refused>> {
        use dta::Fast;
        // Each arm counts its own report and writes (no merged `Result<u32, _>` to test
        // again after the match).
        let r = match dta::decode_fast(payload, self.base)? {
            Fast::KeyWrite {
                redundancy,
                key,
                data,
            } => self.store.key_write_one(redundancy, key, data).map(|w| {
                self.counters.key_write += 1;
                self.counters.region_writes += u64::from(w);
            }),
            Fast::KeyIncrement {
                redundancy,
                key,
                counter,
            } => self.store.key_increment(redundancy, key, counter).map(|w| {
                self.counters.key_increment += 1;
                self.counters.region_writes += u64::from(w);
            }),
            Fast::Append { list, data } => {
                self.appender.append(&mut self.store, list, data).map(|w| {
                    self.counters.append += 1;
                    self.counters.region_writes += u64::from(w);
                })
            }
            Fast::Postcard { key, hop, data } => self
                .postcarder
                .postcard(&mut self.store, key, hop, data)
                .map(|o| {
                    let w = self.count_postcard(o);
                    self.counters.region_writes += u64::from(w);
                }),
        };
        Some(r.map_err(|why| self.refused_fast(why, payload)))
    }

    /// A report the fast path refused: counted, NACKed when retransmittable. Out of line, so
    /// the stored reports' loop keeps its registers.
    #[cold]
    #[inline(never)]
    fn refused_fast(&mut self, why: Refusal, payload: &[u8]) -> Refused {
        self.counters.refused[why.index()] += 1;
        let p = dta::Packet::new_unchecked(payload, self.cfg.variant);
        Refused {
            why,
            nack: p.retransmittable().then(|| p.seqnum()),
        }
    }

    fn apply(&mut self, r: &Repr) -> Result<(), Refusal> {
        let c = &mut self.counters;
        match r.primitive {
            Primitive::KeyWrite {
                redundancy,
                key,
                words,
                data,
            } => {
                c.region_writes += self
                    .store
                    .key_write(redundancy, key, &data[..words as usize])?
                    as u64;
                c.key_write += 1;
            }
            Primitive::KeyIncrement {
                redundancy,
                key,
                counter,
            } => {
                c.region_writes += self.store.key_increment(redundancy, key, counter)? as u64;
                c.key_increment += 1;
            }
            Primitive::Append { list, data } => {
                c.region_writes += self.appender.append(&mut self.store, list, data)? as u64;
                c.append += 1;
            }
            Primitive::Postcard { key, hop, data } => {
                let o = self.postcarder.postcard(&mut self.store, key, hop, data)?;
                let w = self.count_postcard(o);
                self.counters.region_writes += u64::from(w);
            }
        }
        Ok(())
    }

    /// Count a stored postcard; returns its region writes (chunk copies written).
    #[inline]
    fn count_postcard(&mut self, o: PostcardOutcome) -> u32 {
        let c = &mut self.counters;
        c.postcard += 1;
        // Most postcards (B - 1 of every B on a clean stream) only fill their cache entry.
        if o == PostcardOutcome::default() {
            return 0;
        }
        c.postcard_paths_complete += o.complete as u64;
        c.postcard_early_flush += o.early as u64;
        c.postcard_duplicate_hop += o.duplicate_hop as u64;
        (o.complete + o.early) * self.store.layout().sizes.pc_redundancy
    }

    /// Write what is staged (partial Append batches, cached postcards).
    pub fn flush(&mut self) {
        let w = self.appender.flush_all(&mut self.store) as u64;
        let p = self.postcarder.flush_all(&mut self.store) as u64;
        self.counters.region_writes += w + p * self.store.layout().sizes.pc_redundancy as u64;
        self.counters.postcard_early_flush += p;
    }
}

/// The sequence number to NACK for a refused payload, if it is a retransmittable report
/// whose base header we can read.
fn nack_seq(payload: &[u8], v: Variant) -> Option<u8> {
    if v != Variant::Tracked || payload.len() < v.base_len() {
        return None;
    }
    let p = dta::Packet::new_unchecked(payload, v);
    p.retransmittable().then(|| p.seqnum())
}

/// A per-source token bucket (rate in reports/s, burst in reports), I/O-free: time is
/// passed in. Sources hash into a fixed table (no allocation per packet); colliding
/// sources share a bucket.
#[derive(Debug, Clone)]
pub struct RateLimiter {
    rate_per_ns: f64,
    burst: f64,
    buckets: Vec<(f64, u64)>,
}

impl RateLimiter {
    pub fn new(rate_per_s: f64, burst: f64, table: usize) -> RateLimiter {
        RateLimiter {
            rate_per_ns: rate_per_s / 1e9,
            burst,
            buckets: vec![(burst, 0); table.max(1)],
        }
    }

    /// Whether source `src` may send one more report at `now_ns`.
    pub fn allow(&mut self, src: u32, now_ns: u64) -> bool {
        let i = (crate::hash::g(src) as usize) % self.buckets.len();
        let (tokens, last) = &mut self.buckets[i];
        let dt = now_ns.saturating_sub(*last) as f64;
        *tokens = (*tokens + dt * self.rate_per_ns).min(self.burst);
        *last = now_ns;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}
