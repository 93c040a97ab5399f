//! The planner half of `pg-codesign-eval`: coverage and collection distance against alpha,
//! the Lagrangian gap to the exact MILP optimum, run time, and the max link utilisation with
//! and without the collection-path step (`docs/codesign.md`).

use peregrine_planner::collect::{demands, plan, single_path, utilisation};
use peregrine_planner::gen::{fat_tree, wan};
use peregrine_planner::select::{exact, lagrangian, Instance, SubgradientParams};
use peregrine_planner::{Topology, TopologyFile};
use serde::Serialize;
use std::time::Instant;

/// A named evaluation topology.
#[derive(Debug)]
pub struct Case {
    pub name: String,
    pub topo: Topology,
}

fn case(name: &str, f: TopologyFile) -> Case {
    Case {
        name: name.to_string(),
        topo: Topology::from_file(&f).expect("generated topologies are valid"),
    }
}

/// Fat-tree k=4 and k=8, and three random 40-node WANs.
pub fn cases() -> Vec<Case> {
    vec![
        case("fat-tree k=4", fat_tree(4, 1)),
        case("fat-tree k=8", fat_tree(8, 1)),
        case("WAN n=40 seed 1", wan(40, 300, 1)),
        case("WAN n=40 seed 2", wan(40, 300, 2)),
        case("WAN n=40 seed 3", wan(40, 300, 3)),
    ]
}

/// One (topology, alpha) point of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    pub topology: String,
    pub alpha: f64,
    pub points: usize,
    pub coverage: f64,
    pub mean_distance: f64,
    pub upper: f64,
    pub lower: f64,
    pub iterations: usize,
    pub lagrangian_ms: f64,
    /// Exact optimum and its run time where the MILP was run.
    pub optimum: Option<f64>,
    pub exact_ms: Option<f64>,
}

/// Sweep alpha over a case; the exact MILP runs when `with_exact`.
pub fn sweep(c: &Case, alphas: &[f64], with_exact: bool) -> Vec<SweepRow> {
    alphas
        .iter()
        .map(|&alpha| {
            let inst = Instance::new(&c.topo, alpha);
            let t0 = Instant::now();
            let lr = lagrangian(&inst, SubgradientParams::default());
            let lagrangian_ms = t0.elapsed().as_secs_f64() * 1e3;
            let (optimum, exact_ms) = if with_exact {
                let t0 = Instant::now();
                let r = exact(&inst).expect("MILP solves the instance");
                (Some(r.1), Some(t0.elapsed().as_secs_f64() * 1e3))
            } else {
                (None, None)
            };
            SweepRow {
                topology: c.name.clone(),
                alpha,
                points: lr.x.iter().filter(|&&s| s).count(),
                coverage: inst.coverage(&lr.x),
                mean_distance: inst.mean_distance(&lr.x),
                upper: lr.upper,
                lower: lr.lower,
                iterations: lr.iterations,
                lagrangian_ms,
                optimum,
                exact_ms,
            }
        })
        .collect()
}

/// Gap statistics on many small random instances.
#[derive(Debug, Clone, Serialize)]
pub struct GapStats {
    pub instances: usize,
    /// (UB - OPT) / OPT.
    pub mean_gap: f64,
    pub max_gap: f64,
    /// Instances where the Lagrangian plan is optimal (gap < 1e-9).
    pub optimal: usize,
    /// (OPT - LB) / OPT.
    pub mean_bound_gap: f64,
    /// LB <= OPT on every instance.
    pub bound_holds: bool,
    pub mean_lagrangian_ms: f64,
    pub mean_exact_ms: f64,
}

/// Small WANs (10..=24 nodes) x seeds x alphas.
pub fn gaps(seeds: u64) -> GapStats {
    let mut g = Vec::new();
    let mut b = Vec::new();
    let (mut tl, mut te) = (0.0, 0.0);
    let mut holds = true;
    for seed in 0..seeds {
        for n in [10, 16, 24] {
            let t = Topology::from_file(&wan(n, 60, 1000 + seed)).expect("valid");
            for alpha in [0.2, 0.5, 0.8] {
                let inst = Instance::new(&t, alpha);
                let t0 = Instant::now();
                let lr = lagrangian(&inst, SubgradientParams::default());
                tl += t0.elapsed().as_secs_f64() * 1e3;
                let t0 = Instant::now();
                let (_, opt) = exact(&inst).expect("MILP solves the instance");
                te += t0.elapsed().as_secs_f64() * 1e3;
                let d = opt.max(1e-12);
                g.push(((lr.upper - opt) / d).max(0.0));
                b.push((opt - lr.lower) / d);
                holds &= lr.lower <= opt + 1e-9;
            }
        }
    }
    let n = g.len() as f64;
    GapStats {
        instances: g.len(),
        mean_gap: g.iter().sum::<f64>() / n,
        max_gap: g.iter().copied().fold(0.0, f64::max),
        optimal: g.iter().filter(|&&x| x < 1e-9).count(),
        mean_bound_gap: b.iter().sum::<f64>() / n,
        bound_holds: holds,
        mean_lagrangian_ms: tl / n,
        mean_exact_ms: te / n,
    }
}

/// Max utilisation with and without the collection step at one telemetry load factor.
#[derive(Debug, Clone, Serialize)]
pub struct CollectRow {
    pub topology: String,
    /// Multiplier on the sketch size S (the worst-case rate grows with it).
    pub load_factor: f64,
    pub points: usize,
    pub telemetry_gbps: f64,
    pub max_util_single: f64,
    pub over_threshold_single: usize,
    pub max_util_split: f64,
    pub scale: f64,
    pub lp_ms: f64,
}

/// Collection at alpha = 0.8 for growing telemetry load.
pub fn collection(c: &Case, factors: &[f64]) -> Vec<CollectRow> {
    let inst = Instance::new(&c.topo, 0.8);
    let lr = lagrangian(&inst, SubgradientParams::default());
    let chosen: Vec<(usize, usize)> = (0..inst.points.len())
        .filter(|&j| lr.x[j])
        .map(|j| (inst.points[j], inst.control[j]))
        .collect();
    factors
        .iter()
        .map(|&f| {
            let mut t = c.topo.clone();
            t.telemetry.sketch_bytes *= f;
            let d = demands(&t, &chosen, t.params.k_paths);
            let base = utilisation(&t, &d, &single_path(&d), 1.0);
            let t0 = Instant::now();
            let col = plan(&t, &d, t.params.safety).expect("collection LP solves");
            let lp_ms = t0.elapsed().as_secs_f64() * 1e3;
            CollectRow {
                topology: c.name.clone(),
                load_factor: f,
                points: chosen.len(),
                telemetry_gbps: d.iter().map(|x| x.rate_bps).sum::<f64>() / 1e9,
                max_util_single: base.iter().copied().fold(0.0, f64::max),
                over_threshold_single: base.iter().filter(|&&u| u > t.params.safety).count(),
                max_util_split: col.max_util,
                scale: col.scale,
                lp_ms,
            }
        })
        .collect()
}
