//! Congestion-free collection (Sketch-INT co-design, Zhu et al., "Congestion-Free Data
//! Collection"): worst-case telemetry rate per point, K-shortest candidate paths to its
//! control node, and split ratios from an LP that minimises the maximum link utilisation
//! while keeping normal + telemetry load under the safety threshold on every link.
//! When no split fits, a second LP finds the largest common scale sigma of all rates that
//! fits (the draft's "scaled down proportionally"), and the plan says so.

use crate::graph::{k_shortest, Path};
use crate::topology::{TelemetrySpec, Topology};

/// Worst-case telemetry rate of a point, bit/s: 8 S / T + C_p phi B_INT / mu, with C_p the
/// sum of the capacities of the point's outgoing link directions.
pub fn worst_case_rate(t: &Topology, p: usize, tel: &TelemetrySpec) -> f64 {
    let c_p: f64 = t.out[p].iter().map(|&a| t.arcs[a].capacity_bps).sum();
    let sketch = 8.0 * tel.sketch_bytes / tel.window_s;
    let int = c_p * tel.small_flow_share * tel.int_bytes_per_pkt / tel.small_pkt_bytes;
    sketch + int
}

/// One point's demand: it sends `rate_bps` to `control` over `paths` (empty when p = c(p)).
#[derive(Clone, Debug)]
pub struct Demand {
    pub point: usize,
    pub control: usize,
    pub rate_bps: f64,
    pub paths: Vec<Path>,
}

/// Build the demands of the selected points.
pub fn demands(t: &Topology, points: &[(usize, usize)], k: usize) -> Vec<Demand> {
    points
        .iter()
        .map(|&(p, c)| Demand {
            point: p,
            control: c,
            rate_bps: worst_case_rate(t, p, &t.telemetry),
            paths: if p == c {
                Vec::new()
            } else {
                k_shortest(t, p, c, k)
            },
        })
        .collect()
}

/// The collection plan.
#[derive(Clone, Debug)]
pub struct Collection {
    /// Split ratio per demand and candidate path (sums to 1 per demand with paths).
    pub splits: Vec<Vec<f64>>,
    /// sigma: 1 when every worst-case rate fits; otherwise the largest common scale that fits
    /// (0 when the normal load alone breaks the threshold on an unavoidable link).
    pub scale: f64,
    /// Max utilisation (normal + telemetry at `scale`) over all link directions.
    pub max_util: f64,
    /// Link directions at or above the threshold after the plan, as (from, to) node indices.
    pub saturated: Vec<(usize, usize)>,
}

/// Utilisation of every arc under given splits and scale.
pub fn utilisation(t: &Topology, d: &[Demand], splits: &[Vec<f64>], scale: f64) -> Vec<f64> {
    let mut load: Vec<f64> = t.arcs.iter().map(|a| a.load_bps).collect();
    for (dm, s) in d.iter().zip(splits) {
        for (path, &r) in dm.paths.iter().zip(s) {
            for &a in &path.arcs {
                load[a] += scale * dm.rate_bps * r;
            }
        }
    }
    load.iter()
        .zip(&t.arcs)
        .map(|(l, a)| l / a.capacity_bps)
        .collect()
}

/// Without the collection step: every point sends its whole rate on its first shortest path.
pub fn single_path(d: &[Demand]) -> Vec<Vec<f64>> {
    d.iter().map(|dm| first_path(dm.paths.len())).collect()
}

/// Ratios over `n` candidate paths: all on the first (the shortest).
fn first_path(n: usize) -> Vec<f64> {
    (0..n).map(|i| if i == 0 { 1.0 } else { 0.0 }).collect()
}

/// What both LPs are built on: one ratio variable in [0, 1] per demand and candidate path
/// (added to `vars` in demand, then path order), the telemetry load of every arc (the
/// demands' rates times the ratios of the paths through it) and whether any path uses it.
fn path_vars(
    vars: &mut good_lp::ProblemVariables,
    t: &Topology,
    d: &[Demand],
) -> (
    Vec<Vec<good_lp::Variable>>,
    Vec<good_lp::Expression>,
    Vec<bool>,
) {
    use good_lp::{variable, Expression};
    let m = t.arcs.len();
    let ratios: Vec<Vec<_>> = d
        .iter()
        .map(|dm| {
            dm.paths
                .iter()
                .map(|_| vars.add(variable().min(0.0).max(1.0)))
                .collect()
        })
        .collect();
    let mut tele: Vec<Expression> = vec![Expression::from(0.0); m];
    let mut used = vec![false; m];
    for (dm, rv) in d.iter().zip(&ratios) {
        for (path, &v) in dm.paths.iter().zip(rv) {
            for &a in &path.arcs {
                tele[a] += dm.rate_bps * v;
                used[a] = true;
            }
        }
    }
    (ratios, tele, used)
}

/// Why the LP gave no answer (not infeasibility: that is a [`Collection`] with scale < 1).
#[derive(Debug, thiserror::Error)]
#[error("collection LP: {0}")]
pub struct LpError(String);

/// Split ratios under the safety threshold `safety` minimising the maximum utilisation.
pub fn plan(t: &Topology, d: &[Demand], safety: f64) -> Result<Collection, LpError> {
    use good_lp::{constraint, microlp, variable, variables, Expression, ResolutionError};
    use good_lp::{Solution, SolverModel};
    // Demands without paths to their control node cannot send anything: fail loudly.
    if let Some(dm) = d
        .iter()
        .find(|dm| dm.point != dm.control && dm.paths.is_empty())
    {
        return Err(LpError(format!(
            "point {} has no path to its control node",
            dm.point
        )));
    }
    let mut vars = variables!();
    let u = vars.add(variable().min(0.0));
    let (s, tele, used) = path_vars(&mut vars, t, d);
    let mut model = vars.minimise(u).using(microlp);
    for (dm, sv) in d.iter().zip(&s) {
        if !dm.paths.is_empty() {
            let sum: Expression = sv.iter().map(|&v| Expression::from(v)).sum();
            model = model.with(constraint!(sum == 1.0));
        }
    }
    for (a, arc) in t.arcs.iter().enumerate().filter(|&(a, _)| used[a]) {
        let load = arc.load_bps + tele[a].clone();
        model = model.with(constraint!(load.clone() <= safety * arc.capacity_bps));
        model = model.with(constraint!(load <= arc.capacity_bps * u));
    }
    match model.solve() {
        Ok(sol) => {
            let splits = s
                .iter()
                .map(|sv| sv.iter().map(|&v| sol.value(v).max(0.0)).collect())
                .collect();
            Ok(finish(t, d, splits, 1.0, safety))
        }
        Err(ResolutionError::Infeasible) => scaled(t, d, safety),
        Err(e) => Err(LpError(e.to_string())),
    }
}

/// The largest sigma in [0, 1] with r_pk = sigma s_pk, sum_k r_pk = sigma, every used link
/// under the threshold.
fn scaled(t: &Topology, d: &[Demand], safety: f64) -> Result<Collection, LpError> {
    use good_lp::{constraint, microlp, variable, variables, Expression, ResolutionError};
    use good_lp::{Solution, SolverModel};
    let mut vars = variables!();
    let sigma = vars.add(variable().min(0.0).max(1.0));
    let (r, tele, used) = path_vars(&mut vars, t, d);
    // Normal load alone over the threshold on a link every path of some demand uses: sigma = 0.
    let mut model = vars.maximise(sigma).using(microlp);
    for (dm, rv) in d.iter().zip(&r) {
        if !dm.paths.is_empty() {
            let sum: Expression = rv.iter().map(|&v| Expression::from(v)).sum();
            model = model.with(constraint!(sum == sigma));
        }
    }
    for (a, arc) in t.arcs.iter().enumerate().filter(|&(a, _)| used[a]) {
        let load = arc.load_bps + tele[a].clone();
        // A link already over the threshold may carry nothing more.
        let cap = (safety * arc.capacity_bps).max(arc.load_bps);
        model = model.with(constraint!(load <= cap));
    }
    match model.solve() {
        Ok(sol) => {
            let sg = sol.value(sigma).clamp(0.0, 1.0);
            let splits = r
                .iter()
                .map(|rv| {
                    let raw: Vec<f64> = rv.iter().map(|&v| sol.value(v).max(0.0)).collect();
                    let tot: f64 = raw.iter().sum();
                    if tot > 1e-12 {
                        raw.iter().map(|x| x / tot).collect()
                    } else {
                        // Nothing fits: report the shortest path with a zero rate.
                        first_path(raw.len())
                    }
                })
                .collect();
            Ok(finish(t, d, splits, sg, safety))
        }
        Err(ResolutionError::Infeasible) => Err(LpError("scaled LP infeasible".into())),
        Err(e) => Err(LpError(e.to_string())),
    }
}

fn finish(
    t: &Topology,
    d: &[Demand],
    splits: Vec<Vec<f64>>,
    scale: f64,
    safety: f64,
) -> Collection {
    let util = utilisation(t, d, &splits, scale);
    let max_util = util.iter().copied().fold(0.0, f64::max);
    let saturated = util
        .iter()
        .enumerate()
        .filter(|&(_, &x)| x >= safety - 1e-9)
        .map(|(a, _)| (t.arcs[a].from, t.arcs[a].to))
        .collect();
    Collection {
        splits,
        scale,
        max_util,
        saturated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;

    /// p - c over two disjoint 2-hop paths (p-m1-c, p-m2-c) and a 3-hop one (p-m3-m4-c).
    fn diamond(load_m1: f64, load_m2: f64, load_long: f64) -> Topology {
        let text = format!(
            r#"{{
  "nodes": [{{"id": "p", "programmable": true}}, {{"id": "c", "control": true}},
            {{"id": "m1"}}, {{"id": "m2"}}, {{"id": "m3"}}, {{"id": "m4"}}],
  "links": [
    {{"a": "p", "b": "m1", "capacity_bps": 10e9, "load_bps": {load_m1}}},
    {{"a": "m1", "b": "c", "capacity_bps": 10e9, "load_bps": {load_m1}}},
    {{"a": "p", "b": "m2", "capacity_bps": 10e9, "load_bps": {load_m2}}},
    {{"a": "m2", "b": "c", "capacity_bps": 10e9, "load_bps": {load_m2}}},
    {{"a": "p", "b": "m3", "capacity_bps": 10e9, "load_bps": {load_long}}},
    {{"a": "m3", "b": "m4", "capacity_bps": 10e9, "load_bps": {load_long}}},
    {{"a": "m4", "b": "c", "capacity_bps": 10e9, "load_bps": {load_long}}}
  ],
  "telemetry": {{"sketch_bytes": 2.5e7, "window_s": 0.1, "small_flow_share": 0.0,
                 "small_pkt_bytes": 200, "int_bytes_per_pkt": 12}}
}}"#
        );
        Topology::from_json(&text).unwrap()
    }

    #[test]
    fn rate_model() {
        let t = diamond(0.0, 0.0, 0.0);
        // 25 MB every 100 ms = 2 Gbit/s; no small flows.
        assert!((worst_case_rate(&t, 0, &t.telemetry) - 2e9).abs() < 1.0);
        let mut tel = t.telemetry.clone();
        tel.small_flow_share = 0.1;
        // C_p = 30 Gbit/s, 10 % in 200 B packets = 1.875 Mpkt/s, 12 B each = 180 Mbit/s.
        assert!((worst_case_rate(&t, 0, &tel) - 2.18e9).abs() < 1.0);
    }

    #[test]
    fn splits_respect_threshold_and_balance() {
        // Normal load 5 Gbit/s on all three paths, 2 Gbit/s of telemetry: one path alone
        // reaches 70 %, an even three-way split 56.7 %, the LP's optimum.
        let t = diamond(5e9, 5e9, 5e9);
        let d = demands(&t, &[(0, 1)], 3);
        assert_eq!(d[0].paths.len(), 3);
        let c = plan(&t, &d, 0.8).unwrap();
        assert_eq!(c.scale, 1.0);
        assert!(
            (c.max_util - (5e9 + 2e9 / 3.0) / 10e9).abs() < 1e-6,
            "{}",
            c.max_util
        );
        let util = utilisation(&t, &d, &c.splits, 1.0);
        assert!(util.iter().all(|&u| u <= 0.8 + 1e-9));
        let s = &c.splits[0];
        assert!((s.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        assert!(s.iter().all(|&r| (r - 1.0 / 3.0).abs() < 1e-6), "{s:?}");
        let base = utilisation(&t, &d, &single_path(&d), 1.0);
        assert!((base.iter().copied().fold(0.0, f64::max) - 0.7).abs() < 1e-6);
    }

    #[test]
    fn split_needed_to_fit() {
        // 7 Gbit/s normal load on every path: one path with 2 Gbit/s more is 90 % > 80 %;
        // split over three paths each gets 0.67 Gbit/s: 76.7 %.
        let t = diamond(7e9, 7e9, 7e9);
        let d = demands(&t, &[(0, 1)], 3);
        let c = plan(&t, &d, 0.8).unwrap();
        assert_eq!(c.scale, 1.0);
        assert!(c.max_util <= 0.8 + 1e-9);
        assert!(
            (c.max_util - (7e9 + 2e9 / 3.0) / 10e9).abs() < 1e-6,
            "{}",
            c.max_util
        );
        let base = utilisation(&t, &d, &single_path(&d), 1.0);
        assert!(base.iter().copied().fold(0.0, f64::max) > 0.8);
    }

    #[test]
    fn infeasible_is_reported_with_the_largest_scale() {
        // 7.5 Gbit/s everywhere: 0.5 Gbit/s headroom per path, 1.5 in total for 2 Gbit/s.
        let mut t = diamond(7.5e9, 7.5e9, 7.5e9);
        let d = demands(&t, &[(0, 1)], 3);
        let c = plan(&t, &d, 0.8).unwrap();
        assert!((c.scale - 0.75).abs() < 1e-6, "{}", c.scale);
        assert!(!c.saturated.is_empty());
        let util = utilisation(&t, &d, &c.splits, c.scale);
        assert!(util.iter().all(|&u| u <= 0.8 + 1e-9));
        // Normal load alone over the threshold: nothing can be sent.
        for a in &mut t.arcs {
            a.load_bps = 9e9;
        }
        let c = plan(&t, &d, 0.8).unwrap();
        assert_eq!(c.scale, 0.0);
    }
}
