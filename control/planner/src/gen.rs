//! Topology generators for tests and the evaluation: k-ary fat-trees and random WANs
//! (Waxman graphs over a random spanning tree). Seeded, so a seed always gives the same file.

use crate::topology::{FlowSpec, LinkSpec, NodeSpec, ParamsSpec, TelemetrySpec, TopologyFile};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A seeded uniform source.
#[derive(Debug)]
pub struct Rng(Xoshiro256PlusPlus);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(Xoshiro256PlusPlus::seed_from_u64(seed))
    }
    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.f64() * n as f64) as usize % n
    }
}

/// The telemetry model the generated topologies use: a 1 MB sketch every 10 ms (800 Mbit/s
/// worst case), 10 % of capacity in small flows of 200 B packets, 12 B of INT per packet.
pub fn eval_telemetry() -> TelemetrySpec {
    TelemetrySpec {
        sketch_bytes: 1e6,
        window_s: 0.01,
        small_flow_share: 0.1,
        small_pkt_bytes: 200.0,
        int_bytes_per_pkt: 12.0,
    }
}

fn node(id: String, programmable: bool, control: bool) -> NodeSpec {
    NodeSpec {
        id,
        programmable,
        control,
    }
}

fn link(a: &str, b: &str, cap: f64, load: f64, weight: u32) -> LinkSpec {
    LinkSpec {
        a: a.to_string(),
        b: b.to_string(),
        capacity_bps: cap,
        load_bps: load,
        weight,
    }
}

/// A k-ary fat-tree (k even): (k/2)^2 cores `c{i}`, per pod k/2 aggregations `a{pod}_{i}` and
/// k/2 edges `e{pod}_{i}`; 10 Gbit/s links with a normal load uniform in [20 %, 60 %]. Every
/// switch is programmable; the control nodes are core `c0` and the last edge switch (a
/// collector in a rack). `flows` random OD pairs between distinct edge switches.
pub fn fat_tree(k: usize, seed: u64) -> TopologyFile {
    fat_tree_with(k, seed, 4 * k * k)
}

/// [`fat_tree`] with a chosen number of flows.
pub fn fat_tree_with(k: usize, seed: u64, flows: usize) -> TopologyFile {
    assert!(k >= 2 && k.is_multiple_of(2), "fat-tree arity must be even");
    let h = k / 2;
    let mut rng = Rng::new(seed);
    let mut nodes = Vec::new();
    let mut links = Vec::new();
    let cap = 10e9;
    let load = |rng: &mut Rng| cap * (0.2 + 0.4 * rng.f64());
    for c in 0..h * h {
        nodes.push(node(format!("c{c}"), true, c == 0));
    }
    let mut edges = Vec::new();
    for pod in 0..k {
        for i in 0..h {
            nodes.push(node(format!("a{pod}_{i}"), true, false));
        }
        for i in 0..h {
            let last = pod == k - 1 && i == h - 1;
            nodes.push(node(format!("e{pod}_{i}"), true, last));
            edges.push(format!("e{pod}_{i}"));
        }
        for i in 0..h {
            for j in 0..h {
                let l = load(&mut rng);
                links.push(link(
                    &format!("a{pod}_{i}"),
                    &format!("c{}", i * h + j),
                    cap,
                    l,
                    1,
                ));
            }
            for j in 0..h {
                let l = load(&mut rng);
                links.push(link(
                    &format!("e{pod}_{j}"),
                    &format!("a{pod}_{i}"),
                    cap,
                    l,
                    1,
                ));
            }
        }
    }
    let flows = (0..flows)
        .map(|_| {
            let o = rng.below(edges.len());
            let mut d = rng.below(edges.len() - 1);
            if d >= o {
                d += 1;
            }
            FlowSpec {
                src: edges[o].clone(),
                dst: edges[d].clone(),
            }
        })
        .collect();
    TopologyFile {
        nodes,
        links,
        flows,
        telemetry: eval_telemetry(),
        params: ParamsSpec::default(),
    }
}

/// A random WAN of `n` nodes: points in the unit square, a random spanning tree (each node
/// joins its nearest earlier node) plus Waxman links with probability
/// 0.4 exp(-d / (0.25 L)); weight = 1 + round(10 d); capacities 10 or 40 Gbit/s, normal load
/// uniform in [10 %, 60 %]. Half the nodes (at random) are programmable, two are control
/// nodes; `flows` random OD pairs.
pub fn wan(n: usize, flows: usize, seed: u64) -> TopologyFile {
    assert!(n >= 3, "a WAN needs at least 3 nodes");
    let mut rng = Rng::new(seed);
    let pos: Vec<(f64, f64)> = (0..n).map(|_| (rng.f64(), rng.f64())).collect();
    let dist =
        |a: usize, b: usize| ((pos[a].0 - pos[b].0).powi(2) + (pos[a].1 - pos[b].1).powi(2)).sqrt();
    let name = |i: usize| format!("w{i}");
    let c0 = rng.below(n);
    let mut c1 = rng.below(n - 1);
    if c1 >= c0 {
        c1 += 1;
    }
    let nodes = (0..n)
        .map(|i| node(name(i), rng.f64() < 0.5, i == c0 || i == c1))
        .collect();
    let mut adj = std::collections::HashSet::new();
    let mut pairs = Vec::new();
    for i in 1..n {
        let j = (0..i)
            .min_by(|&a, &b| dist(i, a).total_cmp(&dist(i, b)))
            .expect("i >= 1");
        adj.insert((j, i));
        pairs.push((j, i));
    }
    let l_max = 2f64.sqrt();
    for i in 0..n {
        for j in i + 1..n {
            if !adj.contains(&(i, j)) && rng.f64() < 0.4 * (-dist(i, j) / (0.25 * l_max)).exp() {
                pairs.push((i, j));
            }
        }
    }
    let links = pairs
        .into_iter()
        .map(|(a, b)| {
            let cap = if rng.f64() < 0.5 { 10e9 } else { 40e9 };
            let load = cap * (0.1 + 0.5 * rng.f64());
            let w = 1 + (10.0 * dist(a, b)).round() as u32;
            link(&name(a), &name(b), cap, load, w)
        })
        .collect();
    let flows = (0..flows)
        .map(|_| {
            let o = rng.below(n);
            let mut d = rng.below(n - 1);
            if d >= o {
                d += 1;
            }
            FlowSpec {
                src: name(o),
                dst: name(d),
            }
        })
        .collect();
    TopologyFile {
        nodes,
        links,
        flows,
        telemetry: eval_telemetry(),
        params: ParamsSpec::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{all_pairs, INF};
    use crate::topology::Topology;

    #[test]
    fn fat_tree_sizes() {
        for (k, n, l) in [(4, 20, 32), (8, 80, 256)] {
            let t = Topology::from_file(&fat_tree(k, 1)).unwrap();
            assert_eq!(t.node_count(), n);
            assert_eq!(t.arcs.len(), 2 * l);
            assert!(all_pairs(&t).iter().flatten().all(|&d| d != INF));
        }
    }

    #[test]
    fn wan_is_connected_and_repeatable() {
        for seed in 0..5 {
            let f = wan(30, 50, seed);
            assert_eq!(f, wan(30, 50, seed));
            let t = Topology::from_file(&f).unwrap();
            assert!(all_pairs(&t).iter().flatten().all(|&d| d != INF));
            assert_eq!(t.control.iter().filter(|&&c| c).count(), 2);
        }
    }
}
