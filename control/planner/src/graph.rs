//! Shortest paths on the topology's arcs: Dijkstra, the nodes on any shortest path of an OD
//! pair (the draft's P_f), and Yen's K shortest loopless paths (candidate collection paths).

use crate::topology::Topology;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Distance to an unreachable node.
pub const INF: u64 = u64::MAX;

/// Single-source distances (sum of link weights), skipping banned nodes and arcs.
fn dijkstra_masked(
    t: &Topology,
    src: usize,
    banned_node: &[bool],
    banned_arc: &[bool],
) -> (Vec<u64>, Vec<Option<usize>>) {
    let n = t.node_count();
    let mut dist = vec![INF; n];
    let mut pred = vec![None; n];
    let mut heap = BinaryHeap::new();
    dist[src] = 0;
    heap.push(Reverse((0u64, src)));
    while let Some(Reverse((d, u))) = heap.pop() {
        if d > dist[u] {
            continue;
        }
        for &ai in &t.out[u] {
            let a = &t.arcs[ai];
            if banned_arc[ai] || banned_node[a.to] {
                continue;
            }
            let nd = d + u64::from(a.weight);
            // Ties broken by the lower arc index so paths are deterministic.
            if nd < dist[a.to] {
                dist[a.to] = nd;
                pred[a.to] = Some(ai);
                heap.push(Reverse((nd, a.to)));
            }
        }
    }
    (dist, pred)
}

/// Single-source distances.
pub fn dijkstra(t: &Topology, src: usize) -> Vec<u64> {
    let n = t.node_count();
    dijkstra_masked(t, src, &vec![false; n], &vec![false; t.arcs.len()]).0
}

/// All-pairs distances, `d[u][v]`.
pub fn all_pairs(t: &Topology) -> Vec<Vec<u64>> {
    (0..t.node_count()).map(|s| dijkstra(t, s)).collect()
}

/// Nodes lying on at least one shortest o-d path (o and d included); empty if d is unreachable.
pub fn on_shortest_paths(dist: &[Vec<u64>], o: usize, d: usize) -> Vec<usize> {
    let total = dist[o][d];
    if total == INF {
        return Vec::new();
    }
    (0..dist.len())
        .filter(|&v| {
            let (a, b) = (dist[o][v], dist[v][d]);
            a != INF && b != INF && a + b == total
        })
        .collect()
}

/// A path as the arcs it uses, with its total weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Path {
    pub arcs: Vec<usize>,
    pub cost: u64,
}

impl Path {
    fn nodes(&self, t: &Topology, src: usize) -> Vec<usize> {
        let mut v = vec![src];
        v.extend(self.arcs.iter().map(|&a| t.arcs[a].to));
        v
    }
}

fn shortest_masked(
    t: &Topology,
    src: usize,
    dst: usize,
    banned_node: &[bool],
    banned_arc: &[bool],
) -> Option<Path> {
    let (dist, pred) = dijkstra_masked(t, src, banned_node, banned_arc);
    if dist[dst] == INF {
        return None;
    }
    let mut arcs = Vec::new();
    let mut v = dst;
    while v != src {
        let a = pred[v]?;
        arcs.push(a);
        v = t.arcs[a].from;
    }
    arcs.reverse();
    Some(Path {
        arcs,
        cost: dist[dst],
    })
}

/// Yen's algorithm: up to `k` loopless src-dst paths in order of cost (ties by arc sequence).
pub fn k_shortest(t: &Topology, src: usize, dst: usize, k: usize) -> Vec<Path> {
    let n = t.node_count();
    let m = t.arcs.len();
    let mut found: Vec<Path> = Vec::new();
    let Some(first) = shortest_masked(t, src, dst, &vec![false; n], &vec![false; m]) else {
        return found;
    };
    found.push(first);
    let mut candidates: Vec<Path> = Vec::new();
    while found.len() < k {
        let last = found.last().expect("non-empty").clone();
        let last_nodes = last.nodes(t, src);
        for i in 0..last.arcs.len() {
            let spur = last_nodes[i];
            let root = &last.arcs[..i];
            let mut banned_arc = vec![false; m];
            for p in &found {
                if p.arcs.len() > i && p.arcs[..i] == *root {
                    banned_arc[p.arcs[i]] = true;
                }
            }
            let mut banned_node = vec![false; n];
            for &v in &last_nodes[..i] {
                banned_node[v] = true;
            }
            if let Some(tail) = shortest_masked(t, spur, dst, &banned_node, &banned_arc) {
                let mut arcs = root.to_vec();
                arcs.extend(tail.arcs);
                let cost = arcs.iter().map(|&a| u64::from(t.arcs[a].weight)).sum();
                let p = Path { arcs, cost };
                if !found.contains(&p) && !candidates.contains(&p) {
                    candidates.push(p);
                }
            }
        }
        if candidates.is_empty() {
            break;
        }
        let best = (0..candidates.len())
            .min_by(|&a, &b| {
                (candidates[a].cost, &candidates[a].arcs)
                    .cmp(&(candidates[b].cost, &candidates[b].arcs))
            })
            .expect("non-empty");
        found.push(candidates.swap_remove(best));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen;

    #[test]
    fn fat_tree_distances_and_shortest_path_sets() {
        let t = Topology::from_file(&gen::fat_tree(4, 0)).unwrap();
        let d = all_pairs(&t);
        // Edge switches in different pods are 4 hops apart; in the same pod 2.
        let edge = |pod: usize, i: usize| {
            t.names
                .iter()
                .position(|n| *n == format!("e{pod}_{i}"))
                .unwrap()
        };
        assert_eq!(d[edge(0, 0)][edge(1, 0)], 4);
        assert_eq!(d[edge(0, 0)][edge(0, 1)], 2);
        // Inter-pod: both edges, 2 + 2 aggregations, all 4 cores.
        assert_eq!(
            on_shortest_paths(&d, edge(0, 0), edge(1, 0)).len(),
            2 + 4 + 4
        );
        // Intra-pod: both edges and the pod's 2 aggregations.
        assert_eq!(on_shortest_paths(&d, edge(0, 0), edge(0, 1)).len(), 4);
    }

    #[test]
    fn yen_finds_distinct_loopless_paths_in_cost_order() {
        let t = Topology::from_file(&gen::fat_tree(4, 0)).unwrap();
        let a = t.names.iter().position(|n| n == "e0_0").unwrap();
        let b = t.names.iter().position(|n| n == "e1_0").unwrap();
        let ps = k_shortest(&t, a, b, 6);
        assert_eq!(ps.len(), 6);
        // Four equal-cost 4-hop paths exist (one per core), then longer ones.
        assert!(ps[..4].iter().all(|p| p.cost == 4));
        assert!(ps[4].cost > 4);
        for (i, p) in ps.iter().enumerate() {
            let nodes = p.nodes(&t, a);
            let mut s = nodes.clone();
            s.sort();
            s.dedup();
            assert_eq!(s.len(), nodes.len(), "loop in path {i}");
            assert_eq!(*nodes.last().unwrap(), b);
            for q in &ps[..i] {
                assert_ne!(p, q);
            }
        }
    }
}
