//! The DTA seed's appendix A analysis and Figures 12-14, measured through our translator
//! (`peregrine_dta::Translator`: report bytes parsed and stored into a real mapped region)
//! and our collector's queries. Deterministic: keys come from a fixed bijection of the
//! report index, interleavings from a seeded xoshiro stream, so a run repeats bit for bit.
//!
//! - [`key_write_errors`]: one stream of Key-Write reports; after report `t` the key written
//!   at `t - round(alpha M)` is queried for every alpha of the grid, i.e. with exactly
//!   `alpha M` distinct keys written after it (the appendix A.5 set-up). Empty = no slot
//!   with the key's checksum or no plurality; wrong = a plurality value that is not the
//!   key's.
//! - [`postcard_success`]: I flows interleaved at random, each sending hops 0..B once;
//!   success = the path was aggregated complete in the translator's cache and the collector
//!   decodes it (footnote 5: early emissions are failures).
//! - [`longevity`]: Figure 13's queryability of 5-hop paths (Key-Write, 7 data words, N = 2)
//!   against report age, for several region sizes.

use peregrine_dta::hash::g;
use peregrine_dta::{
    Collector, Config, KwAnswer, PathAnswer, PostcardMode, Region, Sizes, Store, Translator,
};
use peregrine_testkit::rng::{RngCore, SeedableRng, Xoshiro256PlusPlus};
use peregrine_wire::dta::{Primitive, Repr, Variant};
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;

/// The key of report `i`: a bijection, so keys are distinct.
pub fn key_of(i: u64) -> u32 {
    g(i as u32 ^ 0x5bd1_e995)
}

fn report(p: Primitive) -> ([u8; 48], usize) {
    let r = Repr::new(Variant::Tracked, p);
    let mut b = [0u8; 48];
    let n = r.emit(&mut b).expect("report fits");
    (b, n)
}

fn translator(dir: &Path, name: &str, sizes: Sizes, cache: usize) -> (Translator, Collector) {
    let region = Arc::new(Region::create(dir.join(name), sizes).expect("region"));
    let t = Translator::new(
        Store::new(region.clone()),
        Config {
            variant: Variant::Tracked,
            pc_cache_slots: cache,
        },
    );
    (t, Collector::new(region))
}

/// The appendix A.5 bounds for Key-Write: (empty lower, empty upper, wrong upper).
pub fn kw_bounds(alpha: f64, n: u32, b: u32) -> (f64, f64, f64) {
    let nf = n as f64;
    let p = 2f64.powi(-(b as i32));
    let over = 1.0 - (-alpha * nf).exp();
    let all = over.powi(n as i32);
    let t1 = all * (1.0 - p).powi(n as i32);
    let t2 = all * (1.0 - (1.0 - p).powi(n as i32) - nf * p * (1.0 - p).powi(n as i32 - 1));
    let mut t3 = 0.0;
    for j in 1..n {
        let jf = j as f64;
        t3 += binom(n, j)
            * over.powi(j as i32)
            * (-alpha * nf * (nf - jf)).exp()
            * (1.0 - (1.0 - p).powi(j as i32));
    }
    (t1 + t3, t1 + t2 + t3, all * nf * p)
}

fn binom(n: u32, k: u32) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

#[derive(Debug, Clone, Serialize)]
pub struct KwPoint {
    pub n: u32,
    pub checksum_bits: u32,
    pub alpha: f64,
    pub queries: u64,
    pub empty: u64,
    pub wrong: u64,
    pub empty_rate: f64,
    pub wrong_rate: f64,
    pub bound_empty_lo: f64,
    pub bound_empty_hi: f64,
    pub bound_wrong: f64,
}

/// Key-Write empty / wrong rates for redundancy `n` and checksum width `bits` over `alphas`,
/// in a region of `slots` slots, from a stream long enough for `samples` queries per alpha.
pub fn key_write_errors(
    dir: &Path,
    slots: u64,
    n: u32,
    bits: u32,
    alphas: &[f64],
    samples: u64,
) -> Vec<KwPoint> {
    let sizes = Sizes {
        kw_slots: slots,
        kw_checksum_bits: bits,
        kw_max_redundancy: 16,
        ..Sizes::default()
    };
    let (mut t, c) = translator(dir, &format!("kw-{n}-{bits}"), sizes, 1);
    let lags: Vec<u64> = alphas
        .iter()
        .map(|a| (a * slots as f64).round() as u64)
        .collect();
    let max_lag = *lags.iter().max().unwrap_or(&0);
    let total = max_lag + samples;
    let mut pts: Vec<KwPoint> = alphas
        .iter()
        .map(|&alpha| {
            let (lo, hi, w) = kw_bounds(alpha, n, bits);
            KwPoint {
                n,
                checksum_bits: bits,
                alpha,
                queries: 0,
                empty: 0,
                wrong: 0,
                empty_rate: 0.0,
                wrong_rate: 0.0,
                bound_empty_lo: lo,
                bound_empty_hi: hi,
                bound_wrong: w,
            }
        })
        .collect();
    for i in 0..total {
        let (b, len) = report(Primitive::key_write(n as u8, key_of(i), &[i as u32]).expect("kw"));
        t.handle(&b[..len]).expect("translator accepts");
        for (p, &lag) in pts.iter_mut().zip(&lags) {
            // Query the key with exactly `lag` keys written after it, `samples` times.
            if i < lag || i - lag >= samples {
                continue;
            }
            let q = i - lag;
            p.queries += 1;
            match c.key_write(key_of(q), Some(n), 1).expect("query") {
                KwAnswer::Found { data, .. } if data[0] == q as u32 => {}
                KwAnswer::Found { .. } => p.wrong += 1,
                _ => p.empty += 1,
            }
        }
    }
    for p in &mut pts {
        p.empty_rate = p.empty as f64 / p.queries.max(1) as f64;
        p.wrong_rate = p.wrong as f64 / p.queries.max(1) as f64;
    }
    pts
}

#[derive(Debug, Clone, Serialize)]
pub struct PcPoint {
    pub cache_slots: usize,
    pub interleaved: usize,
    pub flows: u64,
    pub complete: u64,
    pub verified: u64,
    pub success_rate: f64,
    /// A first-order estimate: the other I-1 active flows all miss this flow's cache entry.
    pub model: f64,
}

/// Postcarding aggregation success with `cache_slots` cache entries and `interleaved`
/// concurrently active flows, over `flows` flows of B = 5 hops.
pub fn postcard_success(
    dir: &Path,
    cache_slots: usize,
    interleaved: usize,
    flows: u64,
    seed: u64,
) -> PcPoint {
    let sizes = Sizes {
        pc_chunks: (flows * 4) | 1,
        pc_redundancy: 1,
        pc_value_bits: 18,
        pc_mode: PostcardMode::Hashed,
        ..Sizes::default()
    };
    let (mut t, c) = translator(
        dir,
        &format!("pc-{cache_slots}-{interleaved}"),
        sizes,
        cache_slots,
    );
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    // Active flows: (flow index, next hop).
    let mut active: Vec<(u64, u8)> = (0..interleaved as u64).map(|f| (f, 0)).collect();
    let mut next_flow = interleaved as u64;
    let mut started = interleaved as u64;
    while !active.is_empty() {
        let k = (rng.next_u64() % active.len() as u64) as usize;
        let (f, hop) = active[k];
        let v = (f as u32).wrapping_mul(5).wrapping_add(hop as u32) & 0x3_ffff;
        let (b, len) = report(Primitive::Postcard {
            key: key_of(f),
            hop,
            data: v,
        });
        t.handle(&b[..len]).expect("postcard accepted");
        if hop + 1 == 5 {
            if started < flows {
                active[k] = (next_flow, 0);
                next_flow += 1;
                started += 1;
            } else {
                active.swap_remove(k);
            }
        } else {
            active[k].1 += 1;
        }
    }
    let complete = t.counters.postcard_paths_complete;
    t.flush();
    let verified = (0..flows)
        .filter(|&f| {
            let want: Vec<u32> = (0..5u32)
                .map(|h| (f as u32).wrapping_mul(5).wrapping_add(h) & 0x3_ffff)
                .collect();
            matches!(c.path(key_of(f)), Ok(PathAnswer::Found { ref hops, .. }) if *hops == want)
        })
        .count() as u64;
    // Another active flow shares this one's entry with probability 1/C each; a flow
    // survives if none of the I-1 others does over its lifetime (a rough upper model).
    let model = (1.0 - 1.0 / cache_slots as f64).powi(interleaved as i32 - 1);
    PcPoint {
        cache_slots,
        interleaved,
        flows,
        complete,
        verified,
        success_rate: complete as f64 / flows as f64,
        model,
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LongevityPoint {
    pub slots: u64,
    pub bytes: u64,
    pub age: u64,
    pub queries: u64,
    pub success_rate: f64,
    /// 1 - the appendix's empty-return upper bound at alpha = age / slots.
    pub bound_success: f64,
}

/// Figure 13: 5-hop paths (7-word Key-Write slots, N = 2, 32-bit checksums) queried at
/// `ages` subsequent reports, `samples` queries per age, in a region of `slots` slots.
pub fn longevity(dir: &Path, slots: u64, ages: &[u64], samples: u64) -> Vec<LongevityPoint> {
    let sizes = Sizes {
        kw_slots: slots,
        kw_words: 7,
        ..Sizes::default()
    };
    let (mut t, c) = translator(dir, &format!("long-{slots}"), sizes, 1);
    let max_age = *ages.iter().max().unwrap_or(&0);
    let mut ok = vec![0u64; ages.len()];
    let mut q = vec![0u64; ages.len()];
    let path = |i: u64| -> [u32; 7] {
        let h = i as u32;
        [h, h ^ 1, h ^ 2, h ^ 3, h ^ 4, 0, 0]
    };
    for i in 0..max_age + samples {
        let (b, len) = report(Primitive::key_write(2, key_of(i), &path(i)).expect("kw"));
        t.handle(&b[..len]).expect("accepted");
        for (j, &age) in ages.iter().enumerate() {
            if i < age || i - age >= samples {
                continue;
            }
            let k = i - age;
            q[j] += 1;
            if let Ok(KwAnswer::Found { data, .. }) = c.key_write(key_of(k), Some(2), 1) {
                ok[j] += (data[..] == path(k)[..]) as u64;
            }
        }
    }
    let bytes = t.store().layout().sizes.kw_slot_bytes() * slots;
    ages.iter()
        .enumerate()
        .map(|(j, &age)| LongevityPoint {
            slots,
            bytes,
            age,
            queries: q[j],
            success_rate: ok[j] as f64 / q[j].max(1) as f64,
            bound_success: 1.0 - kw_bounds(age as f64 / slots as f64, 2, 32).1,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_match_the_seed_examples() {
        // Section 4: alpha = 0.1, b = 32: N = 1 9.5 %, N = 2 3.3 %, N = 4 1.2 % empty;
        // wrong at N = 2 about 1.6e-11.
        let e = |n| kw_bounds(0.1, n, 32).1;
        assert!((e(1) - 0.095).abs() < 0.001, "{}", e(1));
        assert!((e(2) - 0.033).abs() < 0.001, "{}", e(2));
        assert!((e(4) - 0.012).abs() < 0.001, "{}", e(4));
        let w = kw_bounds(0.1, 2, 32).2;
        assert!((1.4e-11..1.7e-11).contains(&w), "{w}");
    }

    #[test]
    fn small_run_tracks_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let pts = key_write_errors(dir.path(), 4093, 2, 32, &[0.1, 0.5], 4000);
        for p in pts {
            // Within a few standard errors of the leading term.
            let sd = (p.bound_empty_hi / p.queries as f64).sqrt();
            assert!(
                (p.empty_rate - p.bound_empty_hi).abs() < 5.0 * sd + 0.01,
                "{p:?}"
            );
            assert_eq!(p.wrong, 0);
        }
    }
}
