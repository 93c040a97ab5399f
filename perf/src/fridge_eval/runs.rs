//! One run of an estimator over a trace, and the parameter grids the figures search.

use super::{cdf_errors, errors, Errors, Truth};
use peregrine_dataplane::telemetry::fridge::baseline::{ExpiryTable, SimpleTable};
use peregrine_dataplane::telemetry::fridge::hist::{combine_ivw, IVW_GROUP};
use peregrine_dataplane::telemetry::fridge::tofino::{log2_bin, RangeTable, LOG2_BINS};
use peregrine_dataplane::telemetry::fridge::{
    Cdf, Estimator, FridgeSet, FridgeSpec, LogHist, XMode, NBINS,
};
use peregrine_testkit::delay_trace::Trace;

/// An algorithm with its memory and parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum Algo {
    /// One or more fridges (IVW-combined).
    Fridge(Vec<FridgeSpec>),
    /// One fridge with `p = 2^-p_exp`, factors from the generated range table; `log2_bins`
    /// also tallies into the prototype's 32 log2 bins.
    Tofino { m: u32, p_exp: u32, log2_bins: bool },
    /// Always-overwrite table (section 2.1).
    Simple(u32),
    /// Expiry-T table with `stages` stages.
    Expiry { m: u32, stages: u32, t_ns: u64 },
}

impl Algo {
    pub fn label(&self) -> String {
        match self {
            Algo::Fridge(s) => s
                .iter()
                .map(|f| {
                    format!(
                        "fridge(M=2^{:.0}, p=2^{:.1})",
                        f64::from(f.m).log2(),
                        f.p.log2()
                    )
                })
                .collect::<Vec<_>>()
                .join(" + "),
            Algo::Tofino {
                m,
                p_exp,
                log2_bins,
            } => format!(
                "tofino(M=2^{:.0}, p=2^-{p_exp}{})",
                f64::from(*m).log2(),
                if *log2_bins { ", 32 log2 bins" } else { "" }
            ),
            Algo::Simple(m) => format!("simple(M=2^{:.0})", f64::from(*m).log2()),
            Algo::Expiry { m, stages, t_ns } => format!(
                "expiry(M=2^{:.0}, {stages} stage{}, T={} ms)",
                f64::from(*m).log2(),
                if *stages == 1 { "" } else { "s" },
                t_ns / 1_000_000
            ),
        }
    }
}

/// What one run produced: per-bin estimated mass (normalise for a CDF), or the prototype's 32
/// log2 bins.
#[derive(Debug, Clone)]
pub enum Mass {
    Fine(Vec<f64>),
    Log2(Box<[f64; LOG2_BINS]>),
}

impl Mass {
    pub fn errors(&self, truth: &Truth) -> Errors {
        match self {
            Mass::Fine(m) => cdf_errors(truth, Cdf::from_mass(m).as_ref()),
            Mass::Log2(m) => {
                let total: f64 = m.iter().sum();
                if total <= 0.0 {
                    return cdf_errors(truth, None);
                }
                errors(truth, |q| log2_quantile(m, total, q))
            }
        }
    }

    /// Normalised to sum 1 (for pooling runs as the seed does: averaging their CDFs).
    pub fn normalised(&self) -> Vec<f64> {
        let v: Vec<f64> = match self {
            Mass::Fine(m) => m.clone(),
            Mass::Log2(m) => m.to_vec(),
        };
        let t: f64 = v.iter().sum();
        if t > 0.0 {
            v.iter().map(|x| x / t).collect()
        } else {
            v
        }
    }
}

/// A quantile from 32 log2 bins, interpolated log-linearly inside `[2^b, 2^(b+1))`.
fn log2_quantile(m: &[f64; LOG2_BINS], total: f64, q: f64) -> f64 {
    let mut acc = 0.0;
    for (b, &x) in m.iter().enumerate() {
        if x > 0.0 && acc + x >= q * total {
            let f = (q * total - acc) / x;
            return (b as f64 + f).exp2();
        }
        acc += x;
    }
    (LOG2_BINS as f64).exp2()
}

fn drive(e: &mut impl Estimator, t: &Trace, mut tally: impl FnMut(u8, u64, u64, f64)) {
    for ev in &t.events {
        if ev.request {
            e.request(ev.id, ev.t_ns);
        } else if let Some(s) = e.response(ev.id, ev.t_ns) {
            tally(s.fridge, s.delay_ns, s.x, s.weight);
        }
    }
}

/// Run `algo` over `t` with hash seed `seed`.
pub fn run(algo: &Algo, t: &Trace, seed: u64, mode: XMode) -> Mass {
    let seed = peregrine_dataplane::telemetry::fridge::fmix64(seed ^ 0x5eed);
    match algo {
        Algo::Fridge(specs) => {
            let mut f = FridgeSet::new(specs, mode, seed).expect("valid grid");
            let mut h: Vec<LogHist> = specs.iter().map(|_| LogHist::new()).collect();
            drive(&mut f, t, |k, d, _, w| h[usize::from(k)].add(d, w));
            let mut out = vec![0.0; NBINS];
            combine_ivw(&h.iter().collect::<Vec<_>>(), IVW_GROUP, &mut out);
            Mass::Fine(out)
        }
        Algo::Tofino {
            m,
            p_exp,
            log2_bins,
        } => {
            let p = (-f64::from(*p_exp)).exp2();
            let mut f = FridgeSet::new(&[FridgeSpec { m: *m, p }], mode, seed).expect("valid grid");
            let table = RangeTable::generate(*m, *p_exp, mode);
            let mut h = LogHist::new();
            let mut l2 = [0.0; LOG2_BINS];
            drive(&mut f, t, |_, d, x, _| {
                let w = f64::from(table.lookup(x));
                if w > 0.0 {
                    h.add(d, w);
                    l2[log2_bin(d)] += w;
                }
            });
            if *log2_bins {
                Mass::Log2(Box::new(l2))
            } else {
                Mass::Fine(h.w.to_vec())
            }
        }
        Algo::Simple(m) => {
            let mut s = SimpleTable::new(*m, seed);
            let mut h = LogHist::new();
            drive(&mut s, t, |_, d, _, w| h.add(d, w));
            Mass::Fine(h.w.to_vec())
        }
        Algo::Expiry { m, stages, t_ns } => {
            let mut s = ExpiryTable::new(*m, *stages, *t_ns, seed);
            let mut h = LogHist::new();
            drive(&mut s, t, |_, d, _, w| h.add(d, w));
            Mass::Fine(h.w.to_vec())
        }
    }
}

/// Errors of `algo` on each seed, plus the error of the seeds' pooled (averaged) CDF.
pub fn seeds(
    algo: &Algo,
    t: &Trace,
    truth: &Truth,
    seeds: &[u64],
    mode: XMode,
) -> (Vec<Errors>, Errors) {
    let mut per = Vec::new();
    let mut pooled: Vec<f64> = Vec::new();
    for &s in seeds {
        let m = run(algo, t, s, mode);
        per.push(m.errors(truth));
        let n = m.normalised();
        if pooled.is_empty() {
            pooled = n;
        } else {
            pooled.iter_mut().zip(&n).for_each(|(a, b)| *a += b);
        }
    }
    let pooled_err = if pooled.len() == LOG2_BINS {
        let mut a = [0.0; LOG2_BINS];
        a.copy_from_slice(&pooled);
        Mass::Log2(Box::new(a)).errors(truth)
    } else {
        Mass::Fine(pooled).errors(truth)
    };
    (per, pooled_err)
}

/// Run `f` over `items` on `threads` threads, results in item order.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out: Vec<std::sync::Mutex<Option<R>>> =
        items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= items.len() {
                    break;
                }
                let r = f(&items[i]);
                *out[i].lock().expect("no panics while held") = Some(r);
            });
        }
    });
    out.into_iter()
        .map(|m| {
            m.into_inner()
                .expect("no panics while held")
                .expect("every item ran")
        })
        .collect()
}

/// The mean max-error of `algo` over `seeds` (what a grid search minimises).
pub fn score(algo: &Algo, t: &Trace, truth: &Truth, seeds: &[u64], mode: XMode) -> f64 {
    let (per, _) = self::seeds(algo, t, truth, seeds, mode);
    Errors::mean_sd(&per).0.max
}
