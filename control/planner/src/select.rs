//! Measurement-point selection (Sketch-INT co-design, Zhu et al., "Measurement Point
//! Selection"): the integer program, its Lagrangian relaxation with subgradient updates and
//! primal repair, and the exact optimum from a MILP solver. Symbols as in `docs/codesign.md`.
//!
//! With uncapacitated assignment each selected point reports to its nearest control node, so
//! the program reduces to: minimise  sum_g a_g z_g + sum_p b_p x_p  subject to
//! sum_{p in P_g} x_p + z_g >= 1 for every flow group g, x and z binary, where a group is the
//! flows with the same P_f, a_g = alpha |g| / |F| and b_p = (1 - alpha) delta(p, c(p)) / D.

use crate::graph::{all_pairs, on_shortest_paths, INF};
use crate::topology::Topology;
use std::collections::BTreeMap;

/// The reduced program.
#[derive(Clone, Debug)]
pub struct Instance {
    /// Candidate points j: node index (programmable and able to reach a control node).
    pub points: Vec<usize>,
    /// c(p): nearest control node of each candidate (lowest index on ties).
    pub control: Vec<usize>,
    /// delta(p, c(p)).
    pub distance: Vec<u64>,
    /// b_p: normalised collection cost of selecting candidate j.
    pub point_cost: Vec<f64>,
    /// Flow groups: the candidates on any shortest path (P_f), and a_g.
    pub groups: Vec<(Vec<usize>, f64)>,
    /// Flows per group, for coverage figures.
    pub group_flows: Vec<usize>,
    /// |F|.
    pub flows: usize,
}

impl Instance {
    /// Build the program for `alpha` (the topology's own `params.alpha` is not read here).
    pub fn new(t: &Topology, alpha: f64) -> Instance {
        let dist = all_pairs(t);
        let mut points = Vec::new();
        let mut control = Vec::new();
        let mut distance = Vec::new();
        for p in (0..t.node_count()).filter(|&p| t.programmable[p]) {
            let best = (0..t.node_count())
                .filter(|&c| t.control[c] && dist[p][c] != INF)
                .min_by_key(|&c| (dist[p][c], c));
            if let Some(c) = best {
                points.push(p);
                control.push(c);
                distance.push(dist[p][c]);
            }
        }
        let mut slot = vec![usize::MAX; t.node_count()];
        for (j, &p) in points.iter().enumerate() {
            slot[p] = j;
        }
        let total: u64 = distance.iter().sum();
        let d_norm = if total == 0 { 1.0 } else { total as f64 };
        let point_cost = distance
            .iter()
            .map(|&d| (1.0 - alpha) * d as f64 / d_norm)
            .collect();
        let mut by_cover: BTreeMap<Vec<usize>, usize> = BTreeMap::new();
        for &(o, d) in &t.flows {
            let cover: Vec<usize> = on_shortest_paths(&dist, o, d)
                .into_iter()
                .filter(|&v| slot[v] != usize::MAX)
                .map(|v| slot[v])
                .collect();
            *by_cover.entry(cover).or_default() += 1;
        }
        let flows = t.flows.len();
        let a = if flows == 0 {
            0.0
        } else {
            alpha / flows as f64
        };
        let group_flows = by_cover.values().copied().collect();
        let groups = by_cover
            .into_iter()
            .map(|(cover, n)| (cover, a * n as f64))
            .collect();
        Instance {
            points,
            control,
            distance,
            point_cost,
            groups,
            group_flows,
            flows,
        }
    }

    /// Objective of a selection (uncovered groups pay a_g).
    pub fn cost(&self, x: &[bool]) -> f64 {
        let points: f64 = x
            .iter()
            .zip(&self.point_cost)
            .filter(|(&s, _)| s)
            .map(|(_, &b)| b)
            .sum();
        let uncovered: f64 = self
            .groups
            .iter()
            .filter(|(cover, _)| !cover.iter().any(|&j| x[j]))
            .map(|&(_, a)| a)
            .sum();
        points + uncovered
    }

    /// Fraction of flows covered by a selection.
    pub fn coverage(&self, x: &[bool]) -> f64 {
        if self.flows == 0 {
            return 1.0;
        }
        let covered: usize = self
            .groups
            .iter()
            .zip(&self.group_flows)
            .filter(|((cover, _), _)| cover.iter().any(|&j| x[j]))
            .map(|(_, &n)| n)
            .sum();
        covered as f64 / self.flows as f64
    }

    /// Mean delta(p, c(p)) over the selected points (0 when none is selected).
    pub fn mean_distance(&self, x: &[bool]) -> f64 {
        let sel: Vec<u64> = (0..x.len())
            .filter(|&j| x[j])
            .map(|j| self.distance[j])
            .collect();
        if sel.is_empty() {
            0.0
        } else {
            sel.iter().sum::<u64>() as f64 / sel.len() as f64
        }
    }

    /// Groups each candidate appears in.
    fn point_groups(&self) -> Vec<Vec<usize>> {
        let mut pg = vec![Vec::new(); self.points.len()];
        for (g, (cover, _)) in self.groups.iter().enumerate() {
            for &j in cover {
                pg[j].push(g);
            }
        }
        pg
    }
}

/// Subgradient settings (defaults in `docs/codesign.md`).
#[derive(Clone, Copy, Debug)]
pub struct SubgradientParams {
    /// Polyak step scale theta_0.
    pub theta0: f64,
    /// Halve theta after this many iterations without a better lower bound.
    pub patience: usize,
    /// Stop when theta falls below this.
    pub theta_min: f64,
    /// Stop when (UB - LB) <= gap_tol * max(UB, 1e-12).
    pub gap_tol: f64,
    pub max_iter: usize,
}

impl Default for SubgradientParams {
    fn default() -> Self {
        SubgradientParams {
            theta0: 2.0,
            patience: 20,
            theta_min: 1e-3,
            gap_tol: 1e-4,
            max_iter: 3000,
        }
    }
}

/// Outcome of the Lagrangian solver.
#[derive(Clone, Debug)]
pub struct Lagrangian {
    /// Best repaired selection (x per candidate).
    pub x: Vec<bool>,
    /// Its objective: the upper bound UB.
    pub upper: f64,
    /// Best Lagrangian dual value: the lower bound LB <= optimum.
    pub lower: f64,
    pub iterations: usize,
}

/// L(lambda) and the subproblem's x. lambda_g is kept in [0, a_g], where z_g = 0 is optimal.
fn subproblem(inst: &Instance, pg: &[Vec<usize>], lambda: &[f64], x: &mut [bool]) -> f64 {
    let mut value: f64 = lambda.iter().sum();
    for (j, groups) in pg.iter().enumerate() {
        let penalty: f64 = groups.iter().map(|&g| lambda[g]).sum();
        let reduced = inst.point_cost[j] - penalty;
        x[j] = reduced < 0.0;
        if x[j] {
            value += reduced;
        }
    }
    value
}

/// Primal repair: add points while one lowers the cost (largest drop first), then drop
/// points whose cost exceeds the penalty of the groups only they cover; repeat until stable.
pub fn repair(inst: &Instance, pg: &[Vec<usize>], x: &mut [bool]) {
    let ng = inst.groups.len();
    let mut hits = vec![0usize; ng];
    for (j, groups) in pg.iter().enumerate() {
        if x[j] {
            for &g in groups {
                hits[g] += 1;
            }
        }
    }
    for _round in 0..4 * inst.points.len() + 4 {
        let mut changed = false;
        loop {
            let best = (0..x.len())
                .filter(|&j| !x[j])
                .map(|j| {
                    let gain: f64 = pg[j]
                        .iter()
                        .filter(|&&g| hits[g] == 0)
                        .map(|&g| inst.groups[g].1)
                        .sum();
                    (j, gain - inst.point_cost[j])
                })
                .filter(|&(_, net)| net > 1e-15)
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
            let Some((j, _)) = best else { break };
            x[j] = true;
            for &g in &pg[j] {
                hits[g] += 1;
            }
            changed = true;
        }
        let mut order: Vec<usize> = (0..x.len()).filter(|&j| x[j]).collect();
        order.sort_by(|&a, &b| {
            inst.point_cost[b]
                .total_cmp(&inst.point_cost[a])
                .then(a.cmp(&b))
        });
        for j in order {
            let loss: f64 = pg[j]
                .iter()
                .filter(|&&g| hits[g] == 1)
                .map(|&g| inst.groups[g].1)
                .sum();
            if inst.point_cost[j] > loss + 1e-15 {
                x[j] = false;
                for &g in &pg[j] {
                    hits[g] -= 1;
                }
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
}

/// Lagrangian relaxation of the coverage constraints, subgradient updates with the Polyak
/// step t_k = theta_k (UB - L(lambda_k)) / ||g_k||^2, theta halved after `patience`
/// iterations without a better bound; every subproblem solution is repaired into a feasible
/// selection and the best one kept.
pub fn lagrangian(inst: &Instance, sp: SubgradientParams) -> Lagrangian {
    let np = inst.points.len();
    let pg = inst.point_groups();
    // Start at the upper end: every group as valuable as leaving it uncovered.
    let mut lambda: Vec<f64> = inst.groups.iter().map(|&(_, a)| a).collect();
    let mut x = vec![false; np];
    let mut best_x = vec![false; np];
    repair(inst, &pg, &mut best_x);
    let mut upper = inst.cost(&best_x);
    let mut lower = f64::NEG_INFINITY;
    let mut theta = sp.theta0;
    let mut stale = 0;
    let mut g = vec![0.0; inst.groups.len()];
    let mut iterations = 0;
    while iterations < sp.max_iter {
        iterations += 1;
        let value = subproblem(inst, &pg, &lambda, &mut x);
        if value > lower + 1e-15 {
            lower = value;
            stale = 0;
        } else {
            stale += 1;
            if stale >= sp.patience {
                theta /= 2.0;
                stale = 0;
            }
        }
        let mut cand = x.clone();
        repair(inst, &pg, &mut cand);
        let c = inst.cost(&cand);
        if c < upper {
            upper = c;
            best_x = cand;
        }
        if upper - lower <= sp.gap_tol * upper.max(1e-12) || theta < sp.theta_min {
            break;
        }
        let mut norm = 0.0;
        for (gi, (cover, _)) in inst.groups.iter().enumerate() {
            let hits = cover.iter().filter(|&&j| x[j]).count() as f64;
            g[gi] = 1.0 - hits;
            norm += g[gi] * g[gi];
        }
        // The projected step cannot move lambda: it is optimal for the dual.
        let movable = inst.groups.iter().enumerate().any(|(gi, &(_, a))| {
            (g[gi] > 0.0 && lambda[gi] < a) || (g[gi] < 0.0 && lambda[gi] > 0.0)
        });
        if norm == 0.0 || !movable {
            break;
        }
        let step = theta * (upper - value).max(1e-12) / norm;
        for (gi, &(_, a)) in inst.groups.iter().enumerate() {
            lambda[gi] = (lambda[gi] + step * g[gi]).clamp(0.0, a);
        }
    }
    Lagrangian {
        x: best_x,
        upper,
        lower: lower.min(upper),
        iterations,
    }
}

/// Why the exact solver gave no answer.
#[derive(Debug, thiserror::Error)]
#[error("MILP solver: {0}")]
pub struct ExactError(String);

/// The exact optimum from the MILP solver (good_lp with the pure-Rust microlp backend):
/// x binary, z in [0, 1] (integral at the optimum since x is).
pub fn exact(inst: &Instance) -> Result<(Vec<bool>, f64), ExactError> {
    use good_lp::{constraint, microlp, variable, variables, Expression, Solution, SolverModel};
    let mut vars = variables!();
    let x: Vec<_> = (0..inst.points.len())
        .map(|_| vars.add(variable().binary()))
        .collect();
    let mut objective = Expression::from(0.0);
    let mut rows = Vec::new();
    for (cover, a) in &inst.groups {
        if cover.is_empty() {
            // Never coverable: its a_g is a constant of the objective (counted by cost()).
            continue;
        }
        let z = vars.add(variable().min(0.0).max(1.0));
        objective += *a * z;
        let mut row = Expression::from(z);
        for &j in cover {
            row += x[j];
        }
        rows.push(constraint!(row >= 1.0));
    }
    for (j, &b) in inst.point_cost.iter().enumerate() {
        objective += b * x[j];
    }
    let mut model = vars.minimise(objective).using(microlp);
    for r in rows {
        model = model.with(r);
    }
    let sol = model.solve().map_err(|e| ExactError(e.to_string()))?;
    let sel: Vec<bool> = x.iter().map(|&v| sol.value(v) > 0.5).collect();
    let c = inst.cost(&sel);
    Ok((sel, c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen;

    fn check(t: &Topology, alpha: f64) -> (f64, f64, f64) {
        let inst = Instance::new(t, alpha);
        let lr = lagrangian(&inst, SubgradientParams::default());
        let (xs, opt) = exact(&inst).unwrap();
        assert!((inst.cost(&xs) - opt).abs() < 1e-12);
        assert!((inst.cost(&lr.x) - lr.upper).abs() < 1e-12);
        assert!(lr.lower <= opt + 1e-9, "LB {} > OPT {opt}", lr.lower);
        assert!(opt <= lr.upper + 1e-9, "OPT {opt} > UB {}", lr.upper);
        (lr.lower, opt, lr.upper)
    }

    #[test]
    fn lower_bound_below_optimum_on_random_instances() {
        let mut gaps = Vec::new();
        for seed in 0..40 {
            let n = 8 + (seed as usize % 10);
            let t = Topology::from_file(&gen::wan(n, 30, seed)).unwrap();
            for alpha in [0.2, 0.5, 0.8, 1.0] {
                let (lb, opt, ub) = check(&t, alpha);
                gaps.push((ub - opt) / opt.max(1e-12));
                assert!(lb <= ub);
            }
        }
        // The repair is a heuristic, but on these small instances it is rarely far off.
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!(mean < 0.05, "mean Lagrangian gap {mean}");
    }

    #[test]
    fn lower_bound_below_optimum_on_fat_tree() {
        let t = Topology::from_file(&gen::fat_tree(4, 3)).unwrap();
        for alpha in [0.1, 0.5, 0.9] {
            check(&t, alpha);
        }
    }

    #[test]
    fn alpha_one_covers_every_coverable_flow_and_zero_selects_only_free_points() {
        let t = Topology::from_file(&gen::fat_tree(4, 5)).unwrap();
        let inst = Instance::new(&t, 1.0);
        let lr = lagrangian(&inst, SubgradientParams::default());
        assert_eq!(inst.coverage(&lr.x), 1.0);
        let inst = Instance::new(&t, 0.0);
        let lr = lagrangian(&inst, SubgradientParams::default());
        for (j, &s) in lr.x.iter().enumerate() {
            assert!(!s || inst.distance[j] == 0);
        }
    }
}
