//! The fridge's estimator is unbiased (Lemma 3.1 of the fridge paper): over many hash seeds on
//! one synthetic trace, the mean estimated count of pairs (in total and in the tail) is within
//! three standard errors of the truth, in both x modes and with two fridges; the simple
//! always-overwrite table (section 2.1) on the same trace and memory underestimates the tail
//! share by many standard errors.

use peregrine_dataplane::telemetry::fridge::baseline::SimpleTable;
use peregrine_dataplane::telemetry::fridge::{Estimator, FridgeSet, FridgeSpec, XMode};
use peregrine_testkit::delay_trace::{synthetic, Trace};

const SEEDS: u64 = 300;
const TAIL_NS: u64 = 1_000_000;

/// (estimated pairs, estimated pairs with delay > TAIL_NS) of one run.
fn run(e: &mut dyn Estimator, t: &Trace) -> (f64, f64) {
    let (mut all, mut tail) = (0.0, 0.0);
    for ev in &t.events {
        if ev.request {
            e.request(ev.id, ev.t_ns);
        } else if let Some(s) = e.response(ev.id, ev.t_ns) {
            all += s.weight;
            if s.delay_ns > TAIL_NS {
                tail += s.weight;
            }
        }
    }
    (all, tail)
}

fn mean_se(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
    (m, (var / n).sqrt())
}

fn trace() -> (Trace, f64, f64) {
    // 60k requests at 1 M/s, 40% answered, delays log-uniform in [1 us, 16 ms).
    let t = synthetic(42, 60_000, 1e6, 0.4, 1_000, 16_000_000);
    let all = t.delays.len() as f64;
    let tail = t.delays.iter().filter(|&&d| d > TAIL_NS).count() as f64;
    (t, all, tail)
}

fn check_unbiased(specs: &[FridgeSpec], mode: XMode) {
    let (t, true_all, true_tail) = trace();
    let (mut alls, mut tails) = (Vec::new(), Vec::new());
    for seed in 0..SEEDS {
        let mut f = FridgeSet::new(specs, mode, seed.wrapping_mul(0x9e37_79b9)).unwrap();
        let (a, b) = run(&mut f, &t);
        // Each fridge of a set estimates the whole distribution: average them to compare.
        alls.push(a / specs.len() as f64);
        tails.push(b / specs.len() as f64);
    }
    let (ma, sa) = mean_se(&alls);
    let (mt, st) = mean_se(&tails);
    assert!(
        (ma - true_all).abs() <= 3.0 * sa,
        "{mode:?} {specs:?}: pairs {ma} +- {sa}, truth {true_all}"
    );
    assert!(
        (mt - true_tail).abs() <= 3.0 * st,
        "{mode:?} {specs:?}: tail {mt} +- {st}, truth {true_tail}"
    );
    // The runs had real eviction pressure: the estimate is not trivially the raw count.
    assert!(sa > 0.0 && st > 0.0);
}

#[test]
fn one_fridge_is_unbiased_counting_insertions() {
    check_unbiased(
        &[FridgeSpec {
            m: 256,
            p: 1.0 / 64.0,
        }],
        XMode::Insertions,
    );
}

#[test]
fn one_fridge_is_unbiased_counting_requests() {
    check_unbiased(
        &[FridgeSpec {
            m: 256,
            p: 1.0 / 64.0,
        }],
        XMode::Requests,
    );
}

#[test]
fn each_fridge_of_a_pair_is_unbiased() {
    let specs = [
        FridgeSpec {
            m: 128,
            p: 1.0 / 16.0,
        },
        FridgeSpec {
            m: 128,
            p: 1.0 / 128.0,
        },
    ];
    check_unbiased(&specs, XMode::Insertions);
}

#[test]
fn simple_table_is_biased_against_the_tail_on_the_same_trace() {
    let (t, true_all, true_tail) = trace();
    let truth = true_tail / true_all;
    let (mut simple, mut fridge) = (Vec::new(), Vec::new());
    for seed in 0..60u64 {
        let (a, b) = run(&mut SimpleTable::new(256, seed), &t);
        simple.push(b / a);
        let mut f = FridgeSet::new(
            &[FridgeSpec {
                m: 256,
                p: 1.0 / 64.0,
            }],
            XMode::Insertions,
            seed,
        )
        .unwrap();
        let (a, b) = run(&mut f, &t);
        fridge.push(b / a);
    }
    let (ms, ss) = mean_se(&simple);
    let (mf, sf) = mean_se(&fridge);
    assert!(
        truth - ms > 10.0 * ss,
        "simple tail share {ms} +- {ss} vs truth {truth}: expected a clear bias"
    );
    // The fridge's share (a ratio, so not exactly unbiased: section 3.2.2) is close.
    assert!(
        (mf - truth).abs() < 0.1 * truth + 3.0 * sf,
        "fridge tail share {mf} +- {sf} vs truth {truth}"
    );
}

#[global_allocator]
static GLOBAL: peregrine_testkit::alloc::CountingAlloc =
    peregrine_testkit::alloc::CountingAlloc::new();

#[test]
fn insert_match_and_tally_allocate_nothing() {
    use peregrine_dataplane::telemetry::fridge::LogHist;
    let (t, _, _) = trace();
    let specs = [
        FridgeSpec { m: 1024, p: 0.25 },
        FridgeSpec { m: 1024, p: 0.5 },
    ];
    let mut f = FridgeSet::new(&specs, XMode::Insertions, 1).unwrap();
    let mut h = [LogHist::new(), LogHist::new()];
    let before = peregrine_testkit::alloc::thread_allocs();
    let mut n = 0u64;
    for ev in &t.events {
        if ev.request {
            f.request(ev.id, ev.t_ns);
        } else if let Some(s) = f.response(ev.id, ev.t_ns) {
            h[usize::from(s.fridge)].add(s.delay_ns, s.weight);
            n += 1;
        }
    }
    assert_eq!(peregrine_testkit::alloc::thread_allocs(), before);
    assert!(n > 1_000);
}
