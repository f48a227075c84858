//! The link-state graph and its shortest paths.
//!
//! Nodes are routers; a directed edge `u → v` with a cost says that `u` reaches its neighbour
//! `v` directly (this router's own links, or another router's advertisement). Costs are
//! positive, so Dijkstra applies; everything is ordered (`BTreeMap`, ties by node id), so the
//! same inputs give the same routes on every run.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use super::NodeId;

/// A directed graph with positive integer costs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    adj: BTreeMap<NodeId, BTreeMap<NodeId, u32>>,
}

impl Graph {
    /// Adds `from → to`; of two edges between the same nodes the cheaper one stays.
    pub fn add_edge(&mut self, from: NodeId, to: NodeId, cost: u32) {
        if from == to {
            return;
        }
        let c = self.adj.entry(from).or_default().entry(to).or_insert(cost);
        *c = (*c).min(cost);
        self.adj.entry(to).or_default();
    }

    /// The cost of the edge `from → to`, if there is one.
    pub fn edge(&self, from: NodeId, to: NodeId) -> Option<u32> {
        self.adj.get(&from)?.get(&to).copied()
    }

    /// The direct neighbours of `node` with their edge costs, by node id.
    pub fn neighbours(&self, node: NodeId) -> impl Iterator<Item = (NodeId, u32)> + '_ {
        self.adj
            .get(&node)
            .into_iter()
            .flat_map(|m| m.iter().map(|(&n, &c)| (n, c)))
    }

    /// Every node that appears in the graph.
    pub fn nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.adj.keys().copied()
    }

    /// Shortest distances from `src` to every node it reaches (Dijkstra).
    pub fn distances(&self, src: NodeId) -> BTreeMap<NodeId, u64> {
        let mut dist = BTreeMap::new();
        let mut heap = BinaryHeap::new();
        heap.push(Reverse((0u64, src)));
        while let Some(Reverse((d, u))) = heap.pop() {
            if dist.contains_key(&u) {
                continue;
            }
            dist.insert(u, d);
            for (v, c) in self.neighbours(u) {
                if !dist.contains_key(&v) {
                    heap.push(Reverse((d + u64::from(c), v)));
                }
            }
        }
        dist
    }
}

/// For every destination `me` reaches, its candidate next hops: the neighbours `n` with
/// `cost(me, n) + dist(n, dest) ≤ dist(me, dest) + slack` that are strictly closer to the
/// destination than `me` (`dist(n, dest) < dist(me, dest)`, so following next hops always
/// gets closer and never loops). With `slack` 0 these are exactly the neighbours on a
/// shortest path (OSPF's equal-cost next hops). Ordered by the cost of the path through them,
/// then by node id: App. C's "first", "second" and "third" hop.
pub fn next_hops(g: &Graph, me: NodeId, slack: u32) -> BTreeMap<NodeId, Vec<NodeId>> {
    let mine = g.distances(me);
    let theirs: Vec<(NodeId, u32, BTreeMap<NodeId, u64>)> = g
        .neighbours(me)
        .map(|(n, c)| (n, c, g.distances(n)))
        .collect();
    let mut out = BTreeMap::new();
    for (&dest, &d_me) in &mine {
        if dest == me {
            continue;
        }
        let mut hops: Vec<(u64, NodeId)> = theirs
            .iter()
            .filter_map(|(n, c, d)| {
                let d_n = *d.get(&dest)?;
                let via = u64::from(*c) + d_n;
                (d_n < d_me && via <= d_me + u64::from(slack)).then_some((via, *n))
            })
            .collect();
        hops.sort_unstable();
        if !hops.is_empty() {
            out.insert(dest, hops.into_iter().map(|(_, n)| n).collect());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(i: u32) -> NodeId {
        NodeId(i)
    }

    #[test]
    fn equal_cost_next_hops_in_order() {
        // 1 → {2, 3, 4} → 8, the path through 3 one cheaper.
        let mut g = Graph::default();
        for (a, c) in [(2, 2), (3, 1), (4, 2)] {
            g.add_edge(n(1), n(a), 1);
            g.add_edge(n(a), n(8), c);
        }
        let hops = next_hops(&g, n(1), 0);
        assert_eq!(hops[&n(8)], vec![n(3)]);
        assert_eq!(hops[&n(2)], vec![n(2)]);
        // Within the slack, but 2 and 4 are as far from 8 as 1 is: not downstream, not hops.
        assert_eq!(next_hops(&g, n(1), 1)[&n(8)], vec![n(3)]);
        // Three paths of cost 3 (through 3 the first hop costs 2): all three, by node id.
        let mut g2 = Graph::default();
        for (a, c1, c2) in [(2, 1, 2), (3, 2, 1), (4, 1, 2)] {
            g2.add_edge(n(1), n(a), c1);
            g2.add_edge(n(a), n(8), c2);
        }
        assert_eq!(next_hops(&g2, n(1), 0)[&n(8)], vec![n(2), n(3), n(4)]);
    }

    #[test]
    fn a_neighbour_behind_me_is_never_a_next_hop() {
        // 2 — 1 — 8: 2 reaches 8 only through 1; however large the slack, 2 is not a hop.
        let mut g = Graph::default();
        for (a, b) in [(1, 2), (2, 1), (1, 8), (8, 1)] {
            g.add_edge(n(a), n(b), 1);
        }
        assert_eq!(next_hops(&g, n(1), 100)[&n(8)], vec![n(8)]);
    }

    #[test]
    fn parallel_edges_keep_the_cheaper() {
        let mut g = Graph::default();
        g.add_edge(n(1), n(2), 5);
        g.add_edge(n(1), n(2), 3);
        g.add_edge(n(1), n(2), 4);
        assert_eq!(g.edge(n(1), n(2)), Some(3));
        assert_eq!(g.distances(n(1))[&n(2)], 3);
    }
}
