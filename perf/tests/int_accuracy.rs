//! Short version of the `int-accuracy` experiment (Miranda et al., Tables II-IV): a few seconds of
//! each test case, checked against the configured impairments. 9 s at 10000 pps also takes the
//! 16-bit HbH packet counters through a wrap.

use peregrine_perf::int_accuracy::{
    expected, run, summarise, Encoding, Nodes, RunConfig, RunOutput, StageOptions, Strategy,
    TestCase, Traffic, LINKS,
};

const IOAM: Nodes = Nodes::Stages(StageOptions {
    encoding: Encoding::Ioam,
    clock_offset_ns: 0,
    clock_drift_ppm: 0.0,
    processing_ns: 0,
});

fn short_with(
    tc: &TestCase,
    traffic: Traffic,
    strategy: Strategy,
    nodes: Nodes,
    samples: usize,
) -> RunOutput {
    let out = run(
        tc,
        &RunConfig {
            traffic,
            strategy,
            samples,
            warmup_s: 1,
            seed: 11,
            nodes,
        },
    );
    // Through the stages nothing may be dropped or altered by INT, and reports arrive.
    assert_eq!(out.counts.stage_drops, 0);
    assert_eq!(out.counts.altered, 0);
    if nodes != Nodes::Model {
        assert!(out.counts.int_hops > 0);
    }
    assert!(out.counts.reports > 0);
    out
}

fn short(tc: &TestCase, traffic: Traffic, strategy: Strategy) -> RunOutput {
    short_with(tc, traffic, strategy, IOAM, 8)
}

#[test]
fn throughput_follows_the_bottlenecks() {
    let cases = peregrine_perf::int_accuracy::table2();
    let tc = &cases[0];
    let e = expected(tc);
    for strategy in Strategy::defaults() {
        let out = short(tc, Traffic::Constant, strategy);
        assert_eq!(out.samples.len(), 8);
        assert!(out.counts.sent > 65_536, "the 16-bit counters wrap");
        let s = summarise(
            &out.samples,
            |q| q.throughput_mbps,
            std::array::from_fn(|k| e[k].throughput_mbps),
        );
        assert_eq!(
            s.n,
            8 * (LINKS + 1),
            "{strategy:?}: every sample has every row"
        );
        // Better than the seed's 0.28-0.50 Mbit/s (our clocks are exact).
        assert!(s.mae_all.unwrap() < 0.28, "{strategy:?}: {s:?}");
        // The bottlenecks drop the excess in their queues, as tc-netem did (seed Fig. 5).
        assert!(out.counts.queue_full[1] > 0 && out.counts.queue_full[3] > 0);
        assert_eq!(out.counts.queue_full[0], 0);
        // The 40 -> 20 Mbit/s hop loses half its input.
        let loss3 = summarise(&out.samples, |q| q.loss, [0.0; LINKS + 1]).mean[2].unwrap();
        assert!((loss3 - 0.5).abs() < 0.01, "hop 3 loss {loss3}");
    }
}

#[test]
fn delay_is_measured_to_the_configured_value() {
    let cases = peregrine_perf::int_accuracy::table2();
    let tc = &cases[1];
    let e = expected(tc);
    for traffic in [Traffic::Constant, Traffic::Bursty] {
        let out = short(tc, traffic, Strategy::Count(100));
        let s = summarise(
            &out.samples,
            |q| q.delay_ms,
            std::array::from_fn(|k| e[k].delay_ms),
        );
        assert!(s.n > 0);
        assert!(s.mae_all.unwrap() < 0.031, "{traffic:?}: {s:?}");
        assert!((s.mean[LINKS].unwrap() - 50.0).abs() < 0.01);
    }
}

#[test]
fn jitter_matches_the_uniform_expectation() {
    let cases = peregrine_perf::int_accuracy::table2();
    let tc = &cases[2];
    let e = expected(tc);
    let out = short(tc, Traffic::Constant, Strategy::Count(100));
    let j = summarise(
        &out.samples,
        |q| q.jitter_ms,
        std::array::from_fn(|k| e[k].jitter_mad_ms),
    );
    for (k, ek) in e.iter().enumerate() {
        let m = j.mean[k].unwrap();
        assert!(
            (m / ek.jitter_mad_ms - 1.0).abs() < 0.15,
            "row {k}: {m} vs {}",
            ek.jitter_mad_ms
        );
    }
    let d = summarise(
        &out.samples,
        |q| q.delay_ms,
        std::array::from_fn(|k| e[k].delay_ms),
    );
    assert!(d.mae_all.unwrap() < 0.5, "{d:?}");
}

#[test]
fn loss_is_measured_per_hop_and_end_to_end() {
    let cases = peregrine_perf::int_accuracy::table2();
    let tc = &cases[3];
    let e = expected(tc);
    for strategy in Strategy::defaults() {
        let out = short(tc, Traffic::Constant, strategy);
        let s = summarise(
            &out.samples,
            |q| q.loss.map(|l| l.map(|l| l * 100.0)),
            std::array::from_fn(|k| e[k].loss * 100.0),
        );
        assert_eq!(s.n, 8 * (LINKS + 1));
        assert!(s.mae_all.unwrap() < 0.4, "{strategy:?}: {s:?}");
        // Hop 3 (5 %) stands out from its neighbours (2 %).
        assert!(s.mean[2].unwrap() > 4.0 && s.mean[1].unwrap() < 3.0 && s.mean[3].unwrap() < 3.0);
        assert!((s.mean[LINKS].unwrap() - e[LINKS].loss * 100.0).abs() < 0.5);
    }
}

#[test]
fn seed_encoding_measures_the_same() {
    let cases = peregrine_perf::int_accuracy::table2();
    let seed = Nodes::Stages(StageOptions::ideal(Encoding::Seed));
    let e = expected(&cases[1]);
    let out = short_with(&cases[1], Traffic::Constant, Strategy::Count(100), seed, 3);
    let s = summarise(
        &out.samples,
        |q| q.delay_ms,
        std::array::from_fn(|k| e[k].delay_ms),
    );
    assert_eq!(s.n, 3 * (LINKS + 1), "every sample has every hop");
    assert!(s.mae_all.unwrap() < 0.031, "{s:?}");
    let e = expected(&cases[3]);
    let out = short_with(&cases[3], Traffic::Constant, Strategy::Count(100), seed, 3);
    let l = summarise(
        &out.samples,
        |q| q.loss.map(|l| l.map(|l| l * 100.0)),
        std::array::from_fn(|k| e[k].loss * 100.0),
    );
    assert!(l.mae_all.unwrap() < 0.6, "{l:?}");
}

#[test]
fn processing_time_and_clock_offsets_bias_the_delays() {
    let cases = peregrine_perf::int_accuracy::table2();
    let tc = &cases[1];
    let e = expected(tc);
    let truth = std::array::from_fn(|k| e[k].delay_ms);
    let with = |o: StageOptions| {
        let out = short_with(
            tc,
            Traffic::Constant,
            Strategy::Count(100),
            Nodes::Stages(o),
            3,
        );
        summarise(&out.samples, |q| q.delay_ms, truth)
    };
    // 10 us at every node before its egress link: each hop +10 us, the path +50 us.
    let p = with(StageOptions {
        processing_ns: 10_000,
        ..StageOptions::ideal(Encoding::Ioam)
    });
    for (k, ek) in e.iter().take(LINKS).enumerate() {
        let d = p.mean[k].unwrap() - ek.delay_ms;
        assert!((d - 0.010).abs() < 1e-4, "hop {k}: {d}");
    }
    assert!((p.mean[LINKS].unwrap() - 50.050).abs() < 1e-4);
    // Offsets up to 100 us: per-hop errors are offset differences, so under 0.2 ms, not 0.
    let c = with(StageOptions {
        clock_offset_ns: 100_000,
        ..StageOptions::ideal(Encoding::Ioam)
    });
    let mae = c.mae_all.unwrap();
    assert!(mae > 0.001 && mae < 0.2, "{c:?}");
    for k in 0..=LINKS {
        assert!(c.mae[k].unwrap() < 0.2, "row {k}: {c:?}");
    }
}
