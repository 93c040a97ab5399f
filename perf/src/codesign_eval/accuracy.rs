//! The accuracy half of `pg-codesign-eval`: per-flow packet counts on skewed traffic at
//! equal sketch memory, sketch-only vs INT-only vs co-design, in virtual time (one window,
//! packets of all flows interleaved at random). All three sketches are the gate's own
//! Count-Min with conservative update ([`FlowGate`]), the code the INT source runs.
//!
//! * sketch-only: one d x w sketch counts every packet; estimate = the sketch's.
//! * INT-only: every packet carries INT: exact counts, INT bytes for every packet; and INT
//!   sampled with probability q chosen so its INT packets equal the co-design's (estimate =
//!   sampled / q).
//! * co-design: the gate with the same total memory (two windows of d x w/2); packets of
//!   small flows carry INT, counted exactly at the collector; a flow's estimate is n_INT plus,
//!   if it turned large, the sketch's growth after the switch (docs/codesign.md: no double
//!   counting).

use peregrine_int::gate::{FlowGate, GateConfig, GateUnit};
use peregrine_planner::gen::Rng;
use serde::Serialize;

/// One experiment's inputs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Setup {
    pub flows: usize,
    /// Zipf exponent s of the rank-size law size(r) = max(1, round(top / r^s)).
    pub zipf: f64,
    pub top: f64,
    /// Sketch memory per scheme, bytes (sketch-only: d x w x 4; co-design: 2 x d x w/2 x 4).
    pub memory_bytes: usize,
    pub rows: u8,
    /// T_hi in packets.
    pub large: u32,
    /// INT bytes per instrumented packet (the draft's 12 B per switch).
    pub int_bytes: u64,
    pub seed: u64,
}

/// One scheme's result.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Score {
    /// Fraction of flows with relative error < 10 %.
    pub within_10pct: f64,
    /// Mean relative error over small flows (true size < T_hi) and over large ones.
    pub small_mre: f64,
    pub large_mre: f64,
    pub int_packets: u64,
    pub int_bytes: u64,
}

/// The experiment's result.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub setup: Setup,
    pub packets: u64,
    pub small_flows: usize,
    pub sketch_only: Score,
    pub int_only: Score,
    pub int_sampled: Score,
    pub codesign: Score,
    /// Small flows that lost INT before their end (judged large through collisions).
    pub small_misclassified: usize,
    /// Their mean relative error, and their share of all small flows.
    pub misclassified_mre: f64,
    /// Packets of small flows that went without INT.
    pub small_packets_gated: u64,
}

fn zipf_sizes(s: &Setup) -> Vec<u32> {
    (1..=s.flows)
        .map(|r| (s.top / (r as f64).powf(s.zipf)).round().max(1.0) as u32)
        .collect()
}

fn score(truth: &[u32], est: &[f64], large: u32, int_packets: u64, int_bytes: u64) -> Score {
    let rel: Vec<f64> = truth
        .iter()
        .zip(est)
        .map(|(&t, &e)| (e - f64::from(t)).abs() / f64::from(t))
        .collect();
    let mean = |f: &dyn Fn(u32) -> bool| {
        let v: Vec<f64> = truth
            .iter()
            .zip(&rel)
            .filter(|(&t, _)| f(t))
            .map(|(_, &r)| r)
            .collect();
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    Score {
        within_10pct: rel.iter().filter(|&&r| r < 0.1).count() as f64 / rel.len() as f64,
        small_mre: mean(&|t| t < large),
        large_mre: mean(&|t| t >= large),
        int_packets,
        int_bytes: int_packets * int_bytes,
    }
}

fn gate(rows: u8, width: u32, large: u32) -> FlowGate {
    FlowGate::new(GateConfig {
        window_ms: 1_000_000,
        rows,
        width,
        unit: GateUnit::Packets,
        large,
        small: large.div_ceil(2),
        export: None,
        export_flows: 4096,
    })
    .expect("valid gate")
}

/// Run one setup.
pub fn run(s: &Setup) -> Outcome {
    let mut rng = Rng::new(s.seed);
    let sizes = zipf_sizes(s);
    let hashes: Vec<u32> = (0..s.flows)
        .map(|_| (rng.f64() * 4294967296.0) as u32)
        .collect();
    let mut order: Vec<u32> = Vec::new();
    for (f, &n) in sizes.iter().enumerate() {
        order.extend(std::iter::repeat_n(f as u32, n as usize));
    }
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let packets = order.len() as u64;
    // Sketch-only: d x w counters; co-design: two windows of d x w/2 (equal memory).
    let width = s.memory_bytes / (4 * usize::from(s.rows));
    assert!(width.is_power_of_two(), "memory must be d x 2^k x 4 bytes");
    let width = width as u32;
    let mut plain = gate(s.rows, width, u32::MAX);
    let mut cd = gate(s.rows, width / 2, s.large);
    let mut n_int = vec![0u32; s.flows];
    let mut switch_at: Vec<Option<u32>> = vec![None; s.flows];
    for (t, &f) in order.iter().enumerate() {
        let f = f as usize;
        plain.observe(hashes[f], 100, t as u64);
        let v = cd.observe(hashes[f], 100, t as u64);
        if v.large {
            switch_at[f].get_or_insert(v.estimate);
        } else {
            n_int[f] += 1;
        }
    }
    let sk: Vec<f64> = hashes
        .iter()
        .map(|&h| f64::from(plain.estimate(h)))
        .collect();
    let co: Vec<f64> = (0..s.flows)
        .map(|f| {
            let grow = switch_at[f].map_or(0, |c0| cd.estimate(hashes[f]) - c0);
            f64::from(n_int[f] + grow)
        })
        .collect();
    let co_int: u64 = n_int.iter().map(|&n| u64::from(n)).sum();
    // INT sampled at the co-design's INT budget.
    let q = co_int as f64 / packets as f64;
    let mut sampled = vec![0u32; s.flows];
    for &f in &order {
        if rng.f64() < q {
            sampled[f as usize] += 1;
        }
    }
    let smp: Vec<f64> = sampled.iter().map(|&n| f64::from(n) / q).collect();
    let exact: Vec<f64> = sizes.iter().map(|&n| f64::from(n)).collect();
    let small: Vec<usize> = (0..s.flows).filter(|&f| sizes[f] < s.large).collect();
    let mis: Vec<usize> = small
        .iter()
        .copied()
        .filter(|&f| switch_at[f].is_some())
        .collect();
    let mis_mre = if mis.is_empty() {
        0.0
    } else {
        mis.iter()
            .map(|&f| (co[f] - f64::from(sizes[f])).abs() / f64::from(sizes[f]))
            .sum::<f64>()
            / mis.len() as f64
    };
    Outcome {
        setup: *s,
        packets,
        small_flows: small.len(),
        sketch_only: score(&sizes, &sk, s.large, 0, s.int_bytes),
        int_only: score(&sizes, &exact, s.large, packets, s.int_bytes),
        int_sampled: score(
            &sizes,
            &smp,
            s.large,
            sampled.iter().map(|&n| u64::from(n)).sum(),
            s.int_bytes,
        ),
        codesign: score(&sizes, &co, s.large, co_int, s.int_bytes),
        small_misclassified: mis.len(),
        misclassified_mre: mis_mre,
        small_packets_gated: small.iter().map(|&f| u64::from(sizes[f] - n_int[f])).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codesign_beats_sketch_only_and_counts_small_flows_exactly_without_collisions() {
        let s = Setup {
            flows: 2000,
            zipf: 1.2,
            top: 20_000.0,
            memory_bytes: 8192,
            rows: 4,
            large: 32,
            int_bytes: 12,
            seed: 1,
        };
        let o = run(&s);
        assert!(o.codesign.within_10pct > o.sketch_only.within_10pct);
        assert!(o.codesign.int_packets < o.int_only.int_packets / 2);
        assert_eq!(o.int_only.within_10pct, 1.0);
        // Only misclassified small flows can have an error.
        let bad_small = o.codesign.small_mre * o.small_flows as f64;
        assert!((bad_small - o.misclassified_mre * o.small_misclassified as f64).abs() < 1e-6);
    }
}
