//! Multipath routing for ad-hoc (MANET) nodes, sans-IO: seed 004 §III.D, Appendices A and C
//! (SPEC M4 "Multipath routing in MANETs").
//!
//! A [`Router`] runs on one node. It is fed
//!
//! - **observations of its own links** ([`Router::observe`]): for a neighbour heard on a local
//!   interface, the link's quality ([`Quality`]: seed 004's `if_quality`, the fraction of hello
//!   packets received, or *down*) and optionally its cost. A simulator reports one per hello
//!   interval and link; a daemon converts its routing daemon's neighbour reports (babeld's
//!   reachability and cost) into the same thing;
//! - **what other nodes reach** ([`Router::advertise`]): a node's adjacencies and costs, as a
//!   link-state advertisement (in a simulator: another router's [`Router::adjacencies`], as
//!   OSPF-MDR floods them) or as a distance-vector daemon's routes (babeld: the neighbour and,
//!   for each destination it offers, the metric it advertises);
//! - **time**: every input carries `now`; [`Router::poll_timeout`] says when to call
//!   [`Router::handle_timeout`].
//!
//! Every [`RouteConfig::period`] (2 s, OSPF-MDR's interval in seed 004 App. A), it
//! 1. adds one observation per link to that link's window (the mean quality reported since the
//!    last period, banded good/moderate/bad as seed 004 Table 2) and, with prediction on, runs
//!    Viterbi on the window ([`crate::hmm`]): a link predicted *disconnect* is withdrawn before
//!    it fails (App. A `update_routing_table`); a link reported down, or not heard for
//!    [`RouteConfig::dead_after`], is gone;
//! 2. builds the link-state graph (its kept links plus the advertisements not older than
//!    [`RouteConfig::max_age`]) and finds, per destination, the next hops on shortest paths
//!    ([`graph::next_hops`]; equal cost, or within [`RouteConfig::slack`]);
//! 3. gives each local interface its route by App. C ([`assign`]) and queues an [`Update`]
//!    for every route that changed.
//!
//! The result is a forwarding table keyed by (destination, local interface): the interface is
//! the route's *lane*. At the source of a connection it is the subflow's source interface; on
//! a relay it is the local interface on the subnet of the packet's destination address (seed
//! 004 gives interface eX of every node an address in subnet X and pairs subflows within a
//! subnet, so both name the same lane end to end). A route lists its next hops: the neighbour
//! and the local interface to send on.
//!
//! Neighbour connectivity, as seed 004's variants need it ([`Connectivity`], names in
//! [`Policy::from_name`]):
//! - *full path* (one-to-many; `mfxm`, with prediction `mmfxfm`): every lane's route holds every
//!   next hop over every usable link, so a flow's packets may take any of them;
//! - *part path* (one-to-one; `mpxm`, with prediction `mmpxm`): the primary interface keeps
//!   every next hop (seed 004 Table 3, the master subpath), every other interface eX exactly
//!   one, by App. C, sent over eX itself when that link is usable, so subflows of one
//!   connection use disjoint next hops.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use braid_core::Instant;
//! use braid_pm::IfaceId;
//! use braid_pm::route::{NodeId, Observation, Policy, Quality, RouteConfig, Router, Update};
//!
//! let ifaces = [IfaceId(0), IfaceId(1), IfaceId(2)];
//! let cfg = RouteConfig::new(&ifaces, Policy::from_name("mmpxm").unwrap());
//! let mut m1 = Router::new(NodeId(1), cfg).unwrap();
//! let now = Instant::ZERO;
//! // M1 hears M2 and M3 on every interface ...
//! for n in [2, 3] {
//!     for &iface in &ifaces {
//!         let obs = Observation::new(NodeId(n), iface, Quality::Delivery(1.0));
//!         m1.observe(now, &obs).unwrap();
//!     }
//! }
//! // ... and both advertise a link to M8 (cost 1).
//! m1.advertise(now, NodeId(2), &[(NodeId(8), 1)]).unwrap();
//! m1.advertise(now, NodeId(3), &[(NodeId(8), 1)]).unwrap();
//! // The driver calls handle_timeout when poll_timeout says so (here: at once, then every 2 s).
//! assert_eq!(m1.poll_timeout(), Some(now));
//! m1.handle_timeout(now);
//! assert_eq!(m1.poll_timeout(), Some(now + Duration::from_secs(2)));
//! // Towards M8: e0 keeps both next hops, e1 goes through M2, e2 through M3 (App. C, 2 hops).
//! let via = |i: u32| m1.next_hops(NodeId(8), IfaceId(i)).iter().map(|h| h.neighbour.0).collect::<Vec<_>>();
//! assert_eq!((via(0), via(1), via(2)), (vec![2, 3], vec![2], vec![3]));
//! // The changes, to install in a forwarding table:
//! while let Some(u) = m1.poll_update() {
//!     if let Update::Set { dest, iface, next_hops } = u {
//!         println!("to {dest} on {iface}: {next_hops:?}");
//!     }
//! }
//! // M1's own adjacencies, for the driver to give the other routers (flooding).
//! assert_eq!(m1.adjacencies(), vec![(NodeId(2), 1), (NodeId(3), 1)]);
//! ```

pub mod assign;
pub mod graph;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::Duration;

use braid_core::Instant;

use crate::event::IfaceId;
use crate::hmm::{self, Model, Obs, State};
use graph::Graph;

/// A node (router) of the ad-hoc network, numbered by the driver (the simulator's node index;
/// a daemon's mapping of router ids or addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// The quality of a link to a neighbour, as measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Quality {
    /// Seed 004's `if_quality`, 0..=10000 (good above 8000, bad at most 5000, Table 2).
    IfQuality(u32),
    /// The fraction of hello packets received, 0..=1 (1 − hello loss; babeld's reachability
    /// bitmap gives received/16). Counted as `if_quality` = fraction × 10000. A report of 0
    /// does not count as hearing the neighbour.
    Delivery(f64),
    /// The neighbour is gone on this interface (out of range, carrier lost, the routing daemon
    /// flushed it): the link leaves the graph at the next recomputation.
    Down,
}

/// One observation of a local link: neighbour `neighbour` heard on local interface `iface`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    pub neighbour: NodeId,
    pub iface: IfaceId,
    pub quality: Quality,
    /// The link's cost (≥ 1); `None` keeps the last one reported, at first 1 (hop count, OSPF's
    /// cost when all interfaces cost the same).
    pub cost: Option<u32>,
}

impl Observation {
    pub fn new(neighbour: NodeId, iface: IfaceId, quality: Quality) -> Self {
        Observation {
            neighbour,
            iface,
            quality,
            cost: None,
        }
    }

    pub fn with_cost(mut self, cost: u32) -> Self {
        self.cost = Some(cost);
        self
    }
}

/// A next hop: the neighbour and the local interface to send on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NextHop {
    pub neighbour: NodeId,
    pub iface: IfaceId,
}

/// A forwarding-table change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// Install (or replace) the route of lane `iface` towards `dest`.
    Set {
        dest: NodeId,
        iface: IfaceId,
        next_hops: Vec<NextHop>,
    },
    /// Remove the route of lane `iface` towards `dest` (no usable next hop).
    Remove { dest: NodeId, iface: IfaceId },
}

/// How a lane's route uses the next hops (seed 004 §V.B's full and part paths).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connectivity {
    /// One-to-many: every lane, every next hop, every usable link.
    Full,
    /// One-to-one: the primary lane every next hop, each other lane one (App. C).
    Part,
}

/// A routing policy: the connectivity, and whether the HMM filters next hops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub connectivity: Connectivity,
    /// Seed 004's "Markov": withdraw links predicted *disconnect* (App. A).
    pub predict: bool,
}

impl Policy {
    /// The names, seed 004's variant names included (`tm` and `mfm` use one interface and any
    /// policy; `pmmfxm` and `pmmpxm` are `mmfxfm` and `mmpxm` with the QoE scheduler).
    pub const NAMES: &'static [&'static str] = &["full", "part", "hmm-full", "hmm-part"];

    pub fn from_name(name: &str) -> Option<Policy> {
        let (connectivity, predict) = match name {
            "full" | "mfxm" => (Connectivity::Full, false),
            "part" | "mpxm" => (Connectivity::Part, false),
            "hmm-full" | "mmfxfm" | "mmfxm" => (Connectivity::Full, true),
            "hmm-part" | "mmpxm" => (Connectivity::Part, true),
            _ => return None,
        };
        Some(Policy {
            connectivity,
            predict,
        })
    }

    pub fn name(self) -> &'static str {
        match (self.connectivity, self.predict) {
            (Connectivity::Full, false) => "full",
            (Connectivity::Part, false) => "part",
            (Connectivity::Full, true) => "hmm-full",
            (Connectivity::Part, true) => "hmm-part",
        }
    }
}

/// Router settings.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteConfig {
    /// The local interfaces, in App. C order: e0, e1, e2, ...
    pub ifaces: Vec<IfaceId>,
    pub connectivity: Connectivity,
    /// `Some`: HMM prediction withdraws links predicted *disconnect* (seed 004 App. A).
    pub hmm: Option<Model>,
    /// Observations (one per period) in the Viterbi window.
    pub window: usize,
    /// The first interface keeps every next hop (seed 004 Table 3: the master subpath); when
    /// false, every interface gets one by App. C, the first numbered 1.
    pub primary_keeps_all: bool,
    /// Recomputation period (2 s: seed 004 App. A).
    pub period: Duration,
    /// A link not heard for this long is gone (two of seed 004's 1 s hello intervals).
    pub dead_after: Duration,
    /// Another node's advertisement older than this is dropped.
    pub max_age: Duration,
    /// Next hops whose path costs at most this much more than the shortest are kept too (0:
    /// equal-cost next hops only, as OSPF).
    pub slack: u32,
}

impl RouteConfig {
    pub fn new(ifaces: &[IfaceId], policy: Policy) -> Self {
        RouteConfig {
            ifaces: ifaces.to_vec(),
            connectivity: policy.connectivity,
            hmm: policy.predict.then(Model::default),
            window: 5,
            primary_keeps_all: true,
            period: Duration::from_secs(2),
            dead_after: Duration::from_secs(2),
            max_age: Duration::from_secs(6),
            slack: 0,
        }
    }

    /// Checks the settings; the message names the field and what is allowed.
    pub fn validate(&self) -> Result<(), RouteError> {
        let bad = |s: &str| Err(RouteError::Config(s.to_string()));
        if self.ifaces.is_empty() {
            return bad("ifaces: at least one interface is needed");
        }
        for (k, i) in self.ifaces.iter().enumerate() {
            if self.ifaces[..k].contains(i) {
                return Err(RouteError::Config(format!("ifaces: {i} listed twice")));
            }
        }
        if self.window == 0 || self.window > 64 {
            return bad("window must be within 1..=64 observations");
        }
        if self.period.is_zero() {
            return bad("period must be positive");
        }
        if self.dead_after.is_zero() {
            return bad("dead_after must be positive");
        }
        if self.max_age.is_zero() {
            return bad("max_age must be positive");
        }
        Ok(())
    }
}

/// Bad input: one line naming the value and what is allowed. A daemon counts and drops it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RouteError {
    #[error("route config: {0}")]
    Config(String),
    #[error("unknown interface {0}: not in the router's interface list")]
    UnknownIface(IfaceId),
    #[error("if_quality {0} out of range: allowed 0..=10000")]
    IfQuality(u32),
    #[error("delivery {0} out of range: allowed 0..=1 (fraction of hellos received)")]
    Delivery(f64),
    #[error("cost 0 for {0}: a link cost must be at least 1")]
    ZeroCost(NodeId),
    #[error("node {0} is this router itself")]
    SelfNode(NodeId),
}

/// What a router has seen and done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteStats {
    pub observations: u64,
    /// Observations and advertisements refused as bad input.
    pub rejected: u64,
    pub recomputations: u64,
    /// Times a link was withdrawn because the HMM predicted *disconnect*.
    pub predicted_withdrawals: u64,
    /// Links gone: reported down or not heard for `dead_after`.
    pub links_lost: u64,
    pub updates: u64,
}

/// The state of one local link, for status output.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkStatus {
    pub neighbour: NodeId,
    pub iface: IfaceId,
    pub cost: u32,
    /// The HMM observations in the window, oldest first.
    pub window: Vec<Obs>,
    pub predicted: Option<State>,
    /// In the graph at the last recomputation.
    pub kept: bool,
}

#[derive(Debug, Clone)]
struct Link {
    cost: u32,
    heard: Option<Instant>,
    down: bool,
    /// Quality reports since the last period: sum and count, in `if_quality` units.
    sum: u64,
    count: u32,
    window: VecDeque<Obs>,
    predicted: Option<State>,
    kept: bool,
}

#[derive(Debug, Clone)]
struct Advert {
    at: Instant,
    links: Vec<(NodeId, u32)>,
}

/// The routing policy of one node. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Router {
    me: NodeId,
    cfg: RouteConfig,
    links: BTreeMap<(NodeId, IfaceId), Link>,
    adverts: BTreeMap<NodeId, Advert>,
    table: BTreeMap<(NodeId, IfaceId), Vec<NextHop>>,
    adjacency: Vec<(NodeId, u32)>,
    updates: VecDeque<Update>,
    next_tick: Option<Instant>,
    stats: RouteStats,
}

impl Router {
    pub fn new(me: NodeId, cfg: RouteConfig) -> Result<Router, RouteError> {
        cfg.validate()?;
        Ok(Router {
            me,
            cfg,
            links: BTreeMap::new(),
            adverts: BTreeMap::new(),
            table: BTreeMap::new(),
            adjacency: Vec::new(),
            updates: VecDeque::new(),
            next_tick: None,
            stats: RouteStats::default(),
        })
    }

    pub fn id(&self) -> NodeId {
        self.me
    }

    pub fn config(&self) -> &RouteConfig {
        &self.cfg
    }

    /// A measurement of a local link. The first input of any kind schedules the first
    /// recomputation at its time.
    pub fn observe(&mut self, now: Instant, obs: &Observation) -> Result<(), RouteError> {
        let r = self.check(obs);
        if r.is_err() {
            self.stats.rejected += 1;
            return r;
        }
        self.start(now);
        self.stats.observations += 1;
        let quality = match obs.quality {
            Quality::IfQuality(q) => Some(q),
            Quality::Delivery(d) => Some((d * 10_000.0).round() as u32),
            Quality::Down => None,
        };
        let link = self
            .links
            .entry((obs.neighbour, obs.iface))
            .or_insert(Link {
                cost: 1,
                heard: None,
                down: false,
                sum: 0,
                count: 0,
                window: VecDeque::new(),
                predicted: None,
                kept: false,
            });
        if let Some(c) = obs.cost {
            link.cost = c;
        }
        match quality {
            None => link.down = true,
            Some(q) => {
                link.down = false;
                link.sum += u64::from(q);
                link.count += 1;
                // A hello report with nothing received is a measurement, not a hello heard.
                if obs.quality != Quality::Delivery(0.0) {
                    link.heard = Some(now);
                }
            }
        }
        Ok(())
    }

    /// What node `origin` reaches directly, with costs: replaces its previous advertisement.
    /// An empty list says it reaches nothing.
    pub fn advertise(
        &mut self,
        now: Instant,
        origin: NodeId,
        links: &[(NodeId, u32)],
    ) -> Result<(), RouteError> {
        let bad = if origin == self.me {
            Some(RouteError::SelfNode(origin))
        } else {
            links
                .iter()
                .find(|&&(_, c)| c == 0)
                .map(|&(n, _)| RouteError::ZeroCost(n))
        };
        if let Some(e) = bad {
            self.stats.rejected += 1;
            return Err(e);
        }
        self.start(now);
        self.adverts.insert(
            origin,
            Advert {
                at: now,
                links: links.to_vec(),
            },
        );
        Ok(())
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due: the next recomputation
    /// (`None` before any input).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_tick
    }

    /// Recomputes if a period is due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.next_tick.is_some_and(|t| now >= t) {
            self.recompute(now);
        }
    }

    /// Recomputes now (prediction, graph, routes) and schedules the next period from `now`.
    pub fn recompute(&mut self, now: Instant) {
        self.stats.recomputations += 1;
        self.next_tick = Some(now.saturating_add(self.cfg.period));
        self.update_links(now);
        let max_age = self.cfg.max_age;
        self.adverts
            .retain(|_, a| now.saturating_since(a.at) <= max_age);

        let mut g = Graph::default();
        for (&(n, _), l) in &self.links {
            if l.kept {
                g.add_edge(self.me, n, l.cost);
            }
        }
        self.adjacency = g.neighbours(self.me).collect();
        for (&origin, a) in &self.adverts {
            for &(n, c) in &a.links {
                g.add_edge(origin, n, c);
            }
        }

        let hops = graph::next_hops(&g, self.me, self.cfg.slack);
        let links = |n: NodeId| -> Vec<(IfaceId, u32)> {
            self.links
                .range((n, IfaceId(0))..=(n, IfaceId(u32::MAX)))
                .filter(|(_, l)| l.kept)
                .map(|(&(_, i), l)| (i, l.cost))
                .collect()
        };
        let mut table = BTreeMap::new();
        for (&dest, hops) in &hops {
            for (k, &lane) in self.cfg.ifaces.iter().enumerate() {
                let lane_no = if self.cfg.primary_keeps_all { k } else { k + 1 };
                let route = assign::lane_route(self.cfg.connectivity, lane, lane_no, hops, links);
                if !route.is_empty() {
                    table.insert((dest, lane), route);
                }
            }
        }
        self.diff(table);
    }

    /// The next forwarding-table change, oldest first.
    pub fn poll_update(&mut self) -> Option<Update> {
        self.updates.pop_front()
    }

    /// The next hops of lane `iface` towards `dest` (empty: no route).
    pub fn next_hops(&self, dest: NodeId, iface: IfaceId) -> &[NextHop] {
        self.table.get(&(dest, iface)).map_or(&[], Vec::as_slice)
    }

    /// The whole forwarding table: (destination, lane, next hops), ordered.
    pub fn table(&self) -> impl Iterator<Item = (NodeId, IfaceId, &[NextHop])> + '_ {
        self.table.iter().map(|(&(d, i), h)| (d, i, h.as_slice()))
    }

    /// This node's kept neighbours and the cheapest cost to each, at the last recomputation:
    /// its link-state advertisement for the other routers' [`advertise`](Self::advertise).
    pub fn adjacencies(&self) -> Vec<(NodeId, u32)> {
        self.adjacency.clone()
    }

    /// The local links, ordered by neighbour and interface.
    pub fn links(&self) -> impl Iterator<Item = LinkStatus> + '_ {
        self.links
            .iter()
            .map(|(&(neighbour, iface), l)| LinkStatus {
                neighbour,
                iface,
                cost: l.cost,
                window: l.window.iter().copied().collect(),
                predicted: l.predicted,
                kept: l.kept,
            })
    }

    pub fn stats(&self) -> RouteStats {
        self.stats
    }

    fn check(&self, obs: &Observation) -> Result<(), RouteError> {
        if obs.neighbour == self.me {
            return Err(RouteError::SelfNode(obs.neighbour));
        }
        if !self.cfg.ifaces.contains(&obs.iface) {
            return Err(RouteError::UnknownIface(obs.iface));
        }
        match obs.quality {
            Quality::IfQuality(q) if q > 10_000 => return Err(RouteError::IfQuality(q)),
            // NaN fails the range check too.
            Quality::Delivery(d) if !(0.0..=1.0).contains(&d) => {
                return Err(RouteError::Delivery(d));
            }
            _ => {}
        }
        if obs.cost == Some(0) {
            return Err(RouteError::ZeroCost(obs.neighbour));
        }
        Ok(())
    }

    fn start(&mut self, now: Instant) {
        if self.next_tick.is_none() {
            self.next_tick = Some(now);
        }
    }

    /// Step 1 of a period: the window, the prediction, which links stay.
    fn update_links(&mut self, now: Instant) {
        let (dead_after, window) = (self.cfg.dead_after, self.cfg.window);
        let before = self.links.len();
        self.links.retain(|_, l| {
            !l.down
                && l.heard
                    .is_some_and(|h| now.saturating_since(h) <= dead_after)
        });
        self.stats.links_lost += (before - self.links.len()) as u64;
        for l in self.links.values_mut() {
            if l.count > 0 {
                // seed 004 Table 2: the period's mean quality, banded.
                let q = (l.sum / u64::from(l.count)) as u32;
                l.window.push_back(hmm::observe_quality(q));
                while l.window.len() > window {
                    l.window.pop_front();
                }
                (l.sum, l.count) = (0, 0);
            }
            let was_kept = l.kept;
            l.predicted = match &self.cfg.hmm {
                Some(m) => m.predict(l.window.make_contiguous()),
                None => None,
            };
            // seed 004 App. A update_routing_table: only next hops predicted to stay connected.
            l.kept = l.predicted != Some(State::Disconnect);
            if was_kept && !l.kept {
                self.stats.predicted_withdrawals += 1;
            }
        }
    }

    fn diff(&mut self, table: BTreeMap<(NodeId, IfaceId), Vec<NextHop>>) {
        let queued = self.updates.len();
        for (&(dest, iface), hops) in &table {
            if self.table.get(&(dest, iface)) != Some(hops) {
                self.updates.push_back(Update::Set {
                    dest,
                    iface,
                    next_hops: hops.clone(),
                });
            }
        }
        for &(dest, iface) in self.table.keys() {
            if !table.contains_key(&(dest, iface)) {
                self.updates.push_back(Update::Remove { dest, iface });
            }
        }
        self.stats.updates += (self.updates.len() - queued) as u64;
        self.table = table;
    }
}
