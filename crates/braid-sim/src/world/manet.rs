//! Seed 004's multipath routing in the simulator: one `braid_pm::route::Router` per node behind
//! the engine's [`RoutingPolicy`] interface.
//!
//! - Hellos: each hello heard is an observation of the sender on the receiving interface, with
//!   the fraction of the last `window` hellos received as its quality; a missed hello is no
//!   observation (a neighbour not heard for `dead` hellos is gone), so a period's quality
//!   falls as hellos go missing and the HMM sees a link fade over several periods.
//! - Flooding: after each recomputation every router's adjacencies go to every other router
//!   (OSPF-MDR's synchronised link-state database, one period late as flooding is).
//! - Routing converged before the run (as in the seed's testbed): at time zero every configured
//!   link counts as heard and the routers exchange advertisements until their tables settle.
//! - Tables: a route of lane X towards node D serves the packets this node sends from its
//!   address on X (the subflow's source interface) and the packets it relays to D's
//!   addresses on X's subnet; addresses of D on no local subnet follow the primary lane. The
//!   next hops on the route's first interface (the lane's own when it has links there) are
//!   one multipath group: a flow keeps one, chosen by a hash of its addresses, as Linux
//!   multipath routes do. Full path thus spreads the flows of a lane over every neighbour on
//!   its interface, part path gives each lane the one App. C assigns.

use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;
use std::time::Duration;

use braid_core::Instant;
use braid_pm::IfaceId;
use braid_pm::route::{self as pmr, NodeId, Quality, RouteConfig, Router};

use super::routing::{Observation, Prefix, Route, RoutingPolicy};
use crate::scenario::Topology;
use crate::scenario::topology::{End, RoutingDef};

pub struct Manet {
    routers: Vec<Router>,
    links: Vec<[End; 2]>,
    routed: Vec<bool>,
    addrs: Vec<Vec<(Ipv4Addr, u8)>>,
    /// (node, interface, neighbour) → the neighbour's address on the first routed link.
    vias: BTreeMap<(usize, usize, usize), Ipv4Addr>,
    /// Per link direction: the last hellos (bit 0 the latest) and how many were sent.
    heard: Vec<[(u64, u32); 2]>,
    window: u32,
    hello: Duration,
    out: VecDeque<(usize, Vec<Route>)>,
}

impl Manet {
    pub fn new(t: &Topology, def: &RoutingDef, predict: bool) -> Self {
        let policy = pmr::Policy {
            connectivity: if def.part {
                pmr::Connectivity::Part
            } else {
                pmr::Connectivity::Full
            },
            predict,
        };
        let routers = t
            .nodes
            .iter()
            .enumerate()
            .map(|(n, node)| {
                let ifaces: Vec<IfaceId> =
                    (0..node.ifaces.len()).map(|i| IfaceId(i as u32)).collect();
                let mut cfg = RouteConfig::new(&ifaces, policy);
                cfg.period = def.period;
                cfg.dead_after = def.hello * def.dead;
                Router::new(NodeId(n as u32), cfg).expect("checked when the scenario loaded")
            })
            .collect();
        let mut vias = BTreeMap::new();
        for (l, link) in t.links.iter().enumerate() {
            if !t.routed(l) {
                continue;
            }
            for d in 0..2 {
                let (a, b) = (link.ends[d], link.ends[1 - d]);
                let far = t.nodes[b.node].ifaces[b.iface].addr;
                vias.entry((a.node, a.iface, b.node)).or_insert(far);
            }
        }
        let mut m = Manet {
            vias,
            routers,
            links: t.links.iter().map(|l| l.ends).collect(),
            routed: (0..t.links.len()).map(|l| t.routed(l)).collect(),
            addrs: t
                .nodes
                .iter()
                .map(|n| n.ifaces.iter().map(|f| (f.addr, f.prefix)).collect())
                .collect(),
            heard: vec![[(0, 0); 2]; t.links.len()],
            window: def.window,
            hello: def.hello,
            out: VecDeque::new(),
        };
        m.converge(Instant::ZERO);
        m
    }

    /// Every configured link heard, advertisements exchanged until no table changes.
    fn converge(&mut self, now: Instant) {
        for l in 0..self.links.len() {
            if !self.routed[l] {
                continue;
            }
            for d in 0..2 {
                let (from, to) = (self.links[l][d], self.links[l][1 - d]);
                self.report(now, from, to, 1.0);
            }
        }
        for _ in 0..=self.routers.len() {
            for r in &mut self.routers {
                r.recompute(now);
            }
            self.flood(now);
            let mut changed = false;
            for r in &mut self.routers {
                r.recompute(now);
                while r.poll_update().is_some() {
                    changed = true;
                }
            }
            if !changed {
                break;
            }
            self.flood(now);
        }
        for n in 0..self.routers.len() {
            let routes = self.table(n);
            self.out.push_back((n, routes));
        }
    }

    fn report(&mut self, now: Instant, from: End, to: End, delivery: f64) {
        let obs = pmr::Observation::new(
            NodeId(from.node as u32),
            IfaceId(to.iface as u32),
            Quality::Delivery(delivery),
        );
        // The interface list holds every interface of the node: nothing to refuse.
        let _ = self.routers[to.node].observe(now, &obs);
    }

    /// Every router's adjacencies to every other router.
    fn flood(&mut self, now: Instant) {
        let adverts: Vec<Vec<(NodeId, u32)>> =
            self.routers.iter().map(|r| r.adjacencies()).collect();
        for (origin, links) in adverts.iter().enumerate() {
            for (n, r) in self.routers.iter_mut().enumerate() {
                if n != origin {
                    let _ = r.advertise(now, NodeId(origin as u32), links);
                }
            }
        }
    }

    /// The address node `node` reaches `neighbour` at from interface `iface` (the first routed
    /// link between them).
    fn via(&self, node: usize, iface: usize, neighbour: usize) -> Option<Ipv4Addr> {
        self.vias.get(&(node, iface, neighbour)).copied()
    }

    /// Node `n`'s forwarding table from its router's routes.
    fn table(&self, n: usize) -> Vec<Route> {
        let mine = &self.addrs[n];
        let on_subnet = |lane: usize, a: Ipv4Addr| {
            let (sa, len) = mine[lane];
            Prefix { addr: sa, len }.contains(a)
        };
        let mut out = Vec::new();
        for (dest, lane, hops) in self.routers[n].table() {
            let (d, lane) = (dest.0 as usize, lane.0 as usize);
            let mut group: Vec<(usize, Ipv4Addr)> = hops
                .iter()
                .filter_map(|h| {
                    let (i, nb) = (h.iface.0 as usize, h.neighbour.0 as usize);
                    self.via(n, i, nb).map(|v| (i, v))
                })
                .collect();
            // The multipath group: the next hops on the first-listed interface (the lane's own
            // when it has links); the router lists the others after them as fallbacks.
            if let Some(&(first, _)) = group.first() {
                group.retain(|&(i, _)| i == first);
            }
            let mut push = |src: Option<Prefix>, dst: Ipv4Addr| {
                for &(out_iface, via) in &group {
                    out.push(Route {
                        src,
                        dst: Prefix::host(dst),
                        out: out_iface,
                        via,
                    });
                }
            };
            for &(a, _) in &self.addrs[d] {
                // Sent from this node's address on the lane ...
                push(Some(Prefix::host(mine[lane].0)), a);
                // ... relayed to an address on the lane's subnet, or on no local subnet at all
                // (the primary lane).
                let relayed =
                    on_subnet(lane, a) || (lane == 0 && !(0..mine.len()).any(|i| on_subnet(i, a)));
                if relayed {
                    push(None, a);
                }
            }
        }
        out
    }
}

impl RoutingPolicy for Manet {
    fn hello_interval(&self) -> Option<Duration> {
        Some(self.hello)
    }

    fn observe(&mut self, now: Instant, o: &Observation) {
        if !self.routed[o.link] {
            return;
        }
        let d = usize::from(self.links[o.link][0] != o.from);
        let (bits, n) = &mut self.heard[o.link][d];
        *bits = (*bits << 1) | u64::from(o.heard);
        *n = n.saturating_add(1);
        let w = (*n).min(self.window).max(1);
        let mask = if w >= 64 { u64::MAX } else { (1 << w) - 1 };
        let ratio = f64::from((*bits & mask).count_ones()) / f64::from(w);
        if o.heard {
            self.report(now, o.from, o.to, ratio);
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        let mut any = false;
        for r in &mut self.routers {
            if r.poll_timeout().is_some_and(|t| t <= now) {
                r.handle_timeout(now);
                any = true;
            }
        }
        if !any {
            return;
        }
        self.flood(now);
        for n in 0..self.routers.len() {
            let mut changed = false;
            while self.routers[n].poll_update().is_some() {
                changed = true;
            }
            if changed {
                let routes = self.table(n);
                self.out.push_back((n, routes));
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.routers.iter().filter_map(|r| r.poll_timeout()).min()
    }

    fn poll_table(&mut self) -> Option<(usize, Vec<Route>)> {
        self.out.pop_front()
    }
}
