//! The sketch-INT co-design planner (Zhu et al., draft-zhu-sketch-int-codesign-00), I/O-free:
//! a topology in, measurement points, their control nodes and collection paths with split
//! ratios out. The formulation, every symbol and every choice we made are in
//! `docs/codesign.md`.
//!
//! * [`topology`]: the JSON topology file and its checks;
//! * [`graph`]: shortest paths, P_f, K shortest paths;
//! * [`select`]: the integer program, Lagrangian relaxation, the exact MILP;
//! * [`collect`]: worst-case rates and the split LP;
//! * [`gen`]: fat-tree and random WAN generators.

pub mod collect;
pub mod gen;
pub mod graph;
pub mod select;
pub mod topology;

use serde::Serialize;
pub use topology::{Topology, TopologyError, TopologyFile};

/// One candidate collection path of a point and its split ratio.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PathShare {
    pub nodes: Vec<String>,
    pub ratio: f64,
}

/// One selected measurement point.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PointPlan {
    pub node: String,
    pub control: String,
    /// delta(p, c(p)).
    pub distance: u64,
    /// Worst-case telemetry rate, bit/s (before `scale`).
    pub rate_bps: f64,
    pub paths: Vec<PathShare>,
}

/// The planner's output.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Plan {
    pub alpha: f64,
    pub points: Vec<PointPlan>,
    /// Fraction of flows with a selected point on one of their shortest paths.
    pub coverage: f64,
    pub mean_distance: f64,
    /// Objective of the selection (upper bound) and the Lagrangian lower bound.
    pub objective: f64,
    pub lower_bound: f64,
    pub iterations: usize,
    /// sigma: 1 when every worst-case rate fits under the threshold, else the largest
    /// common scale that does (the points must cut their telemetry to it).
    pub scale: f64,
    pub feasible: bool,
    /// Max link utilisation with the split LP and with single shortest paths.
    pub max_util: f64,
    pub max_util_single_path: f64,
    /// Link directions at the threshold, "from->to".
    pub saturated: Vec<String>,
}

/// Why no plan was produced.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Lp(#[from] collect::LpError),
}

/// Plan with the topology's own parameters.
pub fn plan(t: &Topology) -> Result<Plan, PlanError> {
    plan_with(t, t.params.alpha, select::SubgradientParams::default())
}

/// Plan for a given alpha.
pub fn plan_with(
    t: &Topology,
    alpha: f64,
    sp: select::SubgradientParams,
) -> Result<Plan, PlanError> {
    let inst = select::Instance::new(t, alpha);
    let lr = select::lagrangian(&inst, sp);
    let chosen: Vec<(usize, usize)> = (0..inst.points.len())
        .filter(|&j| lr.x[j])
        .map(|j| (inst.points[j], inst.control[j]))
        .collect();
    let d = collect::demands(t, &chosen, t.params.k_paths);
    let c = collect::plan(t, &d, t.params.safety)?;
    let base = collect::utilisation(t, &d, &collect::single_path(&d), 1.0);
    let name = |v: usize| t.names[v].clone();
    let points = d
        .iter()
        .zip(&c.splits)
        .map(|(dm, s)| PointPlan {
            node: name(dm.point),
            control: name(dm.control),
            distance: dm.paths.first().map_or(0, |p| p.cost),
            rate_bps: dm.rate_bps,
            paths: dm
                .paths
                .iter()
                .zip(s)
                .map(|(p, &ratio)| PathShare {
                    nodes: std::iter::once(dm.point)
                        .chain(p.arcs.iter().map(|&a| t.arcs[a].to))
                        .map(name)
                        .collect(),
                    ratio,
                })
                .collect(),
        })
        .collect();
    Ok(Plan {
        alpha,
        points,
        coverage: inst.coverage(&lr.x),
        mean_distance: inst.mean_distance(&lr.x),
        objective: lr.upper,
        lower_bound: lr.lower,
        iterations: lr.iterations,
        scale: c.scale,
        feasible: c.scale >= 1.0,
        max_util: c.max_util,
        max_util_single_path: base.iter().copied().fold(0.0, f64::max),
        saturated: c
            .saturated
            .iter()
            .map(|&(a, b)| format!("{}->{}", t.names[a], t.names[b]))
            .collect(),
    })
}
