//! Routing in a topology: what a policy hears from the engine and what it gives back.
//!
//! A [`RoutingPolicy`] is sans-IO, like the path managers: the engine sends a hello over every
//! link direction each [`RoutingPolicy::hello_interval`] and reports, per direction and
//! interval, whether it arrived ([`Observation`], with the link's signal strength when it has
//! a radio); the policy answers with forwarding tables ([`Route`] lists, one node at a time)
//! whenever it recomputes them. The engine installs a table as it comes: the nodes forward by
//! their tables hop by hop. One policy instance serves the whole world (its link-state database
//! is the flooded one, identical on every node); a policy that wants per-node state keeps one
//! per node inside.
//!
//! Policies: [`Shortest`] (static or from hellos, ETX costs) and `manet` (seed 004's routing,
//! `braid_pm::route`, see `world::manet`). To add one: implement the trait (in the simulator,
//! or a wrapper around a sans-IO router in `braid_pm`), a name in
//! `scenario::topology::RoutingPolicyKind` with its keys, and its arm in [`policy`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::Ipv4Addr;
use std::time::Duration;

use braid_core::Instant;

use crate::scenario::Topology;
use crate::scenario::topology::{End, RoutingDef, RoutingPolicyKind};

/// One hello interval of one link direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    pub link: usize,
    /// The sender and the receiver of the hello.
    pub from: End,
    pub to: End,
    /// The hello of this interval arrived.
    pub heard: bool,
    /// The link's last signal strength, when it has a radio.
    pub rss_dbm: Option<f64>,
}

/// An IPv4 prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Prefix {
    pub fn host(addr: Ipv4Addr) -> Self {
        Prefix { addr, len: 32 }
    }

    pub fn contains(&self, a: Ipv4Addr) -> bool {
        mask(u32::from(a), self.len) == mask(u32::from(self.addr), self.len)
    }
}

pub(crate) fn mask(a: u32, len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        a & (u32::MAX << (32 - u32::from(len)))
    }
}

/// A forwarding entry: packets to `dst` (from `src`, when given: per-source-interface routes,
/// seed 004 App. C) leave by interface `out` towards the neighbour address `via`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub src: Option<Prefix>,
    pub dst: Prefix,
    pub out: usize,
    pub via: Ipv4Addr,
}

/// A routing policy (sans-IO; time is an argument).
pub trait RoutingPolicy: Send {
    /// How often the engine sends hellos (`None`: no hellos, the policy needs none).
    fn hello_interval(&self) -> Option<Duration>;
    /// The outcome of one hello.
    fn observe(&mut self, now: Instant, o: &Observation);
    fn handle_timeout(&mut self, now: Instant);
    fn poll_timeout(&self) -> Option<Instant>;
    /// A node's new forwarding table (replacing the one it has).
    fn poll_table(&mut self) -> Option<(usize, Vec<Route>)>;
}

/// The policy a scenario asks for.
pub fn policy(t: &Topology) -> Option<Box<dyn RoutingPolicy>> {
    let r = t.routing.as_ref()?;
    Some(match r.policy {
        RoutingPolicyKind::Static | RoutingPolicyKind::Shortest => Box::new(Shortest::new(t, r)),
        RoutingPolicyKind::Manet { predict } => Box::new(super::manet::Manet::new(t, r, predict)),
    })
}

/// Shortest paths by expected transmissions (ETX = 1 / (d_f · d_r), the delivery ratios of
/// the hellos of both directions over the last `window`), a neighbour gone after `dead`
/// hellos missed in either direction; recomputed every `period` (static: once, every link up).
/// Per-source-interface routes: a packet from the subnet of one of the node's interfaces is
/// routed as if it left by that interface; with part-path connectivity it stays on interfaces
/// of its subnet, with full-path it may change interface at any node (ties keep it).
pub struct Shortest {
    def: RoutingDef,
    dynamic: bool,
    /// Every (node, interface), numbered node by node.
    vertices: Vec<(usize, usize)>,
    first_vertex: Vec<usize>,
    addrs: Vec<Vec<(Ipv4Addr, u8)>>,
    links: Vec<[End; 2]>,
    /// Per vertex: the link directions that arrive at it.
    into: Vec<Vec<(usize, usize)>>,
    routed: Vec<bool>,
    /// Per link direction: recent hellos (bit 0 the latest), and how many were observed.
    heard: Vec<[(u64, u32); 2]>,
    next: Option<Instant>,
    out: std::collections::VecDeque<(usize, Vec<Route>)>,
}

/// Cost of changing interface inside a node on a full-path route (a tie-breaker).
const SWITCH: u64 = 1;
const UNIT: f64 = 1000.0;

/// The link direction a route leaves by, if any.
type Hop = Option<(usize, usize)>;

impl Shortest {
    pub fn new(t: &Topology, def: &RoutingDef) -> Self {
        let mut vertices = Vec::new();
        let mut first_vertex = Vec::new();
        for (n, node) in t.nodes.iter().enumerate() {
            first_vertex.push(vertices.len());
            vertices.extend((0..node.ifaces.len()).map(|i| (n, i)));
        }
        let mut into = vec![Vec::new(); vertices.len()];
        for (l, link) in t.links.iter().enumerate() {
            for d in 0..2 {
                let to = link.ends[1 - d];
                into[first_vertex[to.node] + to.iface].push((l, d));
            }
        }
        let mut s = Shortest {
            into,
            def: def.clone(),
            dynamic: def.policy == RoutingPolicyKind::Shortest,
            vertices,
            first_vertex,
            addrs: t
                .nodes
                .iter()
                .map(|n| n.ifaces.iter().map(|f| (f.addr, f.prefix)).collect())
                .collect(),
            links: t.links.iter().map(|l| l.ends).collect(),
            routed: (0..t.links.len()).map(|l| t.routed(l)).collect(),
            heard: vec![[(0, 0); 2]; t.links.len()],
            next: None,
            out: Default::default(),
        };
        s.recompute();
        if s.dynamic {
            s.next = Some(Instant::ZERO + def.period);
        }
        s
    }

    /// Cost of link `l` in direction `d` (a→b for 0), `None` when unusable.
    fn cost(&self, l: usize, d: usize) -> Option<u64> {
        if !self.routed[l] {
            return None;
        }
        // Hellos not yet observed (a new link) count as heard.
        let ratio = |(bits, n): (u64, u32)| -> f64 {
            let w = n.min(self.def.window);
            let got = (bits & low_bits(w)).count_ones() + (self.def.window - w);
            f64::from(got) / f64::from(self.def.window)
        };
        let alive =
            |(bits, n): (u64, u32)| n < self.def.dead || bits & low_bits(self.def.dead) != 0;
        let (f, r) = (self.heard[l][d], self.heard[l][1 - d]);
        if !(alive(f) && alive(r)) {
            return None;
        }
        let (df, dr) = (ratio(f), ratio(r));
        if df <= 0.0 || dr <= 0.0 {
            return None;
        }
        Some(((UNIT / (df * dr)).round() as u64).max(1))
    }

    fn vertex(&self, e: End) -> usize {
        self.first_vertex[e.node] + e.iface
    }

    /// Distances of every vertex to node `dst` and the link direction each leaves by.
    fn towards(&self, dst: usize) -> Vec<(u64, Hop)> {
        let nv = self.vertices.len();
        let mut best: Vec<(u64, Hop)> = vec![(u64::MAX, None); nv];
        let mut heap = BinaryHeap::new();
        for i in 0..self.addrs[dst].len() {
            let v = self.first_vertex[dst] + i;
            best[v] = (0, None);
            heap.push(Reverse((0u64, v)));
        }
        let mut step: Vec<(usize, u64, Hop)> = Vec::new();
        while let Some(Reverse((d, v))) = heap.pop() {
            if d > best[v].0 {
                continue;
            }
            let (node, _) = self.vertices[v];
            step.clear();
            // Changing interface inside the node (full path) keeps v's first hop.
            if !self.def.part && node != dst {
                let first = self.first_vertex[node];
                for u in first..first + self.addrs[node].len() {
                    if u != v {
                        step.push((u, SWITCH, best[v].1));
                    }
                }
            }
            // Link directions into v: their sender leaves by them.
            for &(l, dir) in &self.into[v] {
                let from = self.links[l][dir];
                if from.node == dst {
                    continue;
                }
                if let Some(c) = self.cost(l, dir) {
                    step.push((self.vertex(from), c, Some((l, dir))));
                }
            }
            for &(u, c, hop) in &step {
                let nd = d.saturating_add(c);
                if nd < best[u].0 {
                    best[u] = (nd, hop);
                    heap.push(Reverse((nd, u)));
                }
            }
        }
        best
    }

    fn recompute(&mut self) {
        let n = self.addrs.len();
        let mut tables: Vec<Vec<Route>> = vec![Vec::new(); n];
        for dst in 0..n {
            let best = self.towards(dst);
            for (node, table) in tables.iter_mut().enumerate() {
                if node == dst {
                    continue;
                }
                let hop = |v: usize| -> Option<Route> {
                    let (_, h) = best[v];
                    let (l, d) = h?;
                    let (from, to) = (self.links[l][d], self.links[l][1 - d]);
                    Some(Route {
                        src: None,
                        dst: Prefix::host(Ipv4Addr::UNSPECIFIED),
                        out: from.iface,
                        via: self.addrs[to.node][to.iface].0,
                    })
                };
                let first = self.first_vertex[node];
                let ifaces = self.addrs[node].len();
                let overall = (first..first + ifaces)
                    .filter(|&v| best[v].1.is_some())
                    .min_by_key(|&v| best[v].0);
                for &(a, _) in &self.addrs[dst] {
                    for (i, &(sa, sl)) in self.addrs[node].iter().enumerate() {
                        if let Some(r) = hop(first + i) {
                            table.push(Route {
                                src: Some(Prefix { addr: sa, len: sl }),
                                dst: Prefix::host(a),
                                ..r
                            });
                        }
                    }
                    if let Some(r) = overall.and_then(hop) {
                        table.push(Route {
                            dst: Prefix::host(a),
                            ..r
                        });
                    }
                }
            }
        }
        self.out = tables.into_iter().enumerate().collect();
    }
}

fn low_bits(n: u32) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

impl RoutingPolicy for Shortest {
    fn hello_interval(&self) -> Option<Duration> {
        self.dynamic.then_some(self.def.hello)
    }

    fn observe(&mut self, _now: Instant, o: &Observation) {
        let d = usize::from(self.links[o.link][0] != o.from);
        let (bits, n) = &mut self.heard[o.link][d];
        *bits = (*bits << 1) | u64::from(o.heard);
        *n = n.saturating_add(1);
    }

    fn handle_timeout(&mut self, now: Instant) {
        let Some(t) = self.next else { return };
        if now < t {
            return;
        }
        self.recompute();
        self.next = Some(t + self.def.period);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.next
    }

    fn poll_table(&mut self) -> Option<(usize, Vec<Route>)> {
        self.out.pop_front()
    }
}

#[cfg(test)]
mod tests;
