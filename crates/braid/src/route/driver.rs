//! Between babeld, the routing policy and the kernel, without I/O: babeld's lines in, the
//! links and addresses of the lanes in (rtnetlink), time in; the router's observations and
//! advertisements made from babeld's state, and the kernel's tables and rules out as the
//! difference between what the router decided and what is installed. The daemon feeds it and
//! executes its [`Op`]s, so the policy is exactly the one the simulator runs.
//!
//! From babeld (its local interface, [`braid_io::babel`]):
//! - a **node** is a babeld router id; a neighbour (a link-local address on an interface) is
//!   identified as the node whose own prefixes it announces (`refmetric 0`);
//! - a neighbour's **link quality** is the share of hellos received among the newest
//!   `reach_bits` of babeld's 16-hello history (as `if_quality`, 0–10000: while babeld lists
//!   the neighbour it is heard, even when none of those hellos came), and its **cost**
//!   babeld's link cost (its infinite metric included); babeld flushing the neighbour is
//!   reported as the link being down (at the second sample after it: see [`Driver::tick`]);
//! - what a neighbour **reaches**: for every route babeld heard from it, the origin's node and
//!   the metric the neighbour advertised (`refmetric`): the distance-vector advertisement the
//!   router takes as that neighbour's adjacencies;
//! - the **prefixes of a node**: those of the routes babeld has to it (its addresses, as
//!   babeld redistributes local addresses, and whatever else it exports).
//!
//! To the kernel: lane `k` (the k-th configured interface) has table `table + k`, holding for
//! each destination prefix the lane's next hops (the neighbours' link-local addresses on the
//! interfaces the router chose), with the lane's own address as preferred source; rules send
//! packets from a lane's address (`rule_priority + k`) and to its subnet
//! (`rule_priority + 100 + k`) to that table. A destination the router has no route for on a
//! lane falls through to the main table, where babeld's own routes are.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::IpAddr;

use braid_core::Instant;
use braid_io::babel::{self, Header, Line, LineError, RouterId};
use braid_mptcp::route::{NextHop as KNextHop, Prefix, Route, Rule};
use braid_mptcp::rtmon::NetEvent;
use braid_pm::IfaceId;
use braid_pm::route::{NodeId, Observation, Quality, Router, Update};

use super::config::{PROTOCOL, RouteSettings};

/// Route changes and link verdicts kept for `status`.
const LOG_KEPT: usize = 64;

/// What the daemon asks the kernel to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Replace(Route),
    Delete { table: u32, dest: Prefix },
    AddRule(Rule),
    DeleteRule(Rule),
}

impl Op {
    pub fn name(&self) -> &'static str {
        match self {
            Op::Replace(_) => "RTM_NEWROUTE",
            Op::Delete { .. } => "RTM_DELROUTE",
            Op::AddRule(_) => "RTM_NEWRULE",
            Op::DeleteRule(_) => "RTM_DELRULE",
        }
    }
}

/// One configured interface.
#[derive(Debug, Clone, Default)]
pub struct Lane {
    pub name: String,
    pub ifindex: Option<u32>,
    /// Global unicast addresses with their prefix lengths.
    pub addrs: BTreeSet<(IpAddr, u8)>,
}

/// A route change the router made, for `status`.
#[derive(Debug, Clone)]
pub struct Change {
    pub at: Instant,
    pub dest: NodeId,
    pub lane: IfaceId,
    /// (neighbour, interface) of each next hop; empty: the lane's route was removed.
    pub next_hops: Vec<(NodeId, IfaceId)>,
}

/// A link's verdict changing (kept in the graph or withdrawn), for `status`.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub at: Instant,
    pub neighbour: NodeId,
    pub iface: IfaceId,
    pub kept: bool,
    /// The HMM predicted *disconnect* (rather than the link being gone).
    pub predicted: bool,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    pub lines: u64,
    /// Lines that are not babeld's protocol: counted and skipped.
    pub malformed: u64,
    pub connects: u64,
    pub disconnects: u64,
    /// Neighbours babeld reports whose node is not known (no route with `refmetric 0` through
    /// them yet), skipped.
    pub unidentified: u64,
    /// Observations and advertisements the router refused.
    pub refused: u64,
    pub kernel_ops: u64,
    pub kernel_errors: u64,
    /// Samples held because babeld had just flushed neighbours or routes (see
    /// [`Driver::tick`]).
    pub held_ticks: u64,
}

/// Router ids to the router's node numbers: the id's low 32 bits (readable: babeld's ids end
/// in the interface's MAC), another number when two ids share them.
#[derive(Debug, Clone, Default)]
struct NodeIds {
    by_id: BTreeMap<RouterId, NodeId>,
    by_node: BTreeMap<NodeId, RouterId>,
    next_spare: u32,
}

impl NodeIds {
    fn node(&mut self, id: RouterId) -> NodeId {
        if let Some(&n) = self.by_id.get(&id) {
            return n;
        }
        let mut n = NodeId(id.0 as u32);
        if self.by_node.contains_key(&n) {
            if self.next_spare == 0 {
                self.next_spare = u32::MAX;
            }
            while self.by_node.contains_key(&NodeId(self.next_spare)) {
                self.next_spare -= 1;
            }
            n = NodeId(self.next_spare);
        }
        self.by_id.insert(id, n);
        self.by_node.insert(n, id);
        n
    }

    fn get(&self, id: RouterId) -> Option<NodeId> {
        self.by_id.get(&id).copied()
    }

    fn id(&self, n: NodeId) -> Option<RouterId> {
        self.by_node.get(&n).copied()
    }
}

/// The driver. See the [module documentation](self).
#[derive(Debug)]
pub struct Driver {
    settings: RouteSettings,
    router: Option<Router>,
    pub babel: babel::Table,
    /// A whole dump has been applied since the last (re)connection.
    synced: bool,
    connected: bool,
    /// Sent `monitor`, waiting for the `ok` that ends its dump.
    awaiting_dump: bool,
    ids: NodeIds,
    pub lanes: Vec<Lane>,
    /// Interface index → name, for every link (addresses arrive by index).
    links: BTreeMap<u32, String>,
    /// What is in the kernel, as far as the driver knows.
    installed: BTreeMap<(u32, Prefix), Route>,
    rules: BTreeSet<Rule>,
    pub changes: VecDeque<Change>,
    pub verdicts: VecDeque<Verdict>,
    pub stats: Stats,
    pub last_malformed: Option<String>,
    /// Links whose neighbour babeld flushed since the last tick: reported down then.
    flushed: Vec<(NodeId, IfaceId)>,
    /// babeld flushed neighbours or routes since the last tick, and whether the last tick was
    /// held for it.
    settling: bool,
    held: bool,
    /// What the kernel's routes are made of besides the router's table, as babeld had it at
    /// the last tick that ran: every node's prefixes, and the address of each (node,
    /// interface) neighbour entry. The plan reads these, not babeld's live state, so the
    /// routes change with the router's decisions only (a hold, or babeld away, changes nothing).
    snapshot_prefixes: BTreeMap<NodeId, BTreeSet<Prefix>>,
    snapshot_addrs: BTreeMap<(NodeId, String), IpAddr>,
    /// Neighbour (address, interface) → node, as learnt from its own routes; kept while babeld
    /// lists the neighbour, so a link whose routes babeld retracted (a fading link) is still
    /// observed.
    known: BTreeMap<(IpAddr, String), NodeId>,
}

impl Driver {
    pub fn new(settings: RouteSettings) -> Driver {
        let lanes = settings
            .ifaces
            .iter()
            .map(|n| Lane {
                name: n.clone(),
                ..Lane::default()
            })
            .collect();
        Driver {
            settings,
            router: None,
            babel: babel::Table::default(),
            synced: false,
            connected: false,
            awaiting_dump: false,
            ids: NodeIds::default(),
            lanes,
            links: BTreeMap::new(),
            installed: BTreeMap::new(),
            rules: BTreeSet::new(),
            changes: VecDeque::new(),
            verdicts: VecDeque::new(),
            stats: Stats::default(),
            last_malformed: None,
            flushed: Vec::new(),
            settling: false,
            held: false,
            snapshot_prefixes: BTreeMap::new(),
            snapshot_addrs: BTreeMap::new(),
            known: BTreeMap::new(),
        }
    }

    pub fn settings(&self) -> &RouteSettings {
        &self.settings
    }

    pub fn router(&self) -> Option<&Router> {
        self.router.as_ref()
    }

    pub fn connected(&self) -> bool {
        self.connected
    }

    pub fn synced(&self) -> bool {
        self.synced
    }

    /// babeld answered (header read); the daemon sends `monitor` next. The state is rebuilt
    /// from the dump that follows; until its `ok`, the installed routes stay as they are.
    pub fn babeld_connected(&mut self, header: &Header) -> Result<(), String> {
        let me = header
            .my_id
            .ok_or("babeld's header has no `my-id` line: not a babeld this daemon knows")?;
        let node = self.ids.node(me);
        if self.router.as_ref().is_some_and(|r| r.id() != node) {
            tracing::warn!(%me, "babeld's router id changed: the routing state starts over");
            self.router = None;
        }
        if self.router.is_none() {
            self.router =
                Some(Router::new(node, self.settings.router.clone()).map_err(|e| e.to_string())?);
        }
        self.babel.clear();
        self.babel.version = header.version.clone();
        self.babel.host = header.host.clone();
        self.babel.my_id = Some(me);
        self.connected = true;
        self.synced = false;
        self.awaiting_dump = true;
        self.stats.connects += 1;
        self.forget_flushes();
        Ok(())
    }

    /// Flushes not acted on are dropped: the dump that follows a connection is the state.
    fn forget_flushes(&mut self) {
        self.flushed.clear();
        self.settling = false;
        self.held = false;
    }

    /// The connection to babeld is gone: routes stay installed, the router stops (no
    /// observations, so no link is declared dead for babeld's silence) until it is back.
    pub fn babeld_lost(&mut self) {
        if self.connected {
            self.stats.disconnects += 1;
        }
        self.connected = false;
        self.synced = false;
        self.awaiting_dump = false;
        // babeld flushes every neighbour and route as it exits: that is its going away, not
        // the links'.
        self.forget_flushes();
    }

    /// One line from babeld (after the header). A malformed line is counted and skipped.
    pub fn on_line(&mut self, text: &str) -> Result<(), LineError> {
        self.stats.lines += 1;
        match babel::parse(text) {
            Ok(line) => {
                if matches!(line, Line::Ok) && self.awaiting_dump {
                    self.awaiting_dump = false;
                    self.synced = true;
                }
                if matches!(
                    line,
                    Line::Neighbour(babel::Kind::Flush, _) | Line::Route(babel::Kind::Flush, _)
                ) {
                    self.settling = true;
                }
                if let Line::Neighbour(babel::Kind::Flush, n) = &line
                    && let Some(lane) = self.lane_of(&n.ifname)
                {
                    if let Some(node) = self.known.remove(&(n.address, n.ifname.clone())) {
                        self.flushed.push((node, lane));
                    }
                }
                self.babel.apply(&line);
                Ok(())
            }
            Err(e) => {
                self.stats.malformed += 1;
                self.last_malformed = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// A change of the namespace's links or addresses.
    pub fn on_net(&mut self, e: &NetEvent) {
        match e {
            NetEvent::Link { index, name, .. } => {
                self.links.insert(*index, name.clone());
                for l in &mut self.lanes {
                    if &l.name == name {
                        if l.ifindex != Some(*index) {
                            l.addrs.clear();
                        }
                        l.ifindex = Some(*index);
                    } else if l.ifindex == Some(*index) {
                        // Renamed away.
                        l.ifindex = None;
                        l.addrs.clear();
                    }
                }
            }
            NetEvent::LinkGone { index } => {
                self.links.remove(index);
                for l in self.lanes.iter_mut().filter(|l| l.ifindex == Some(*index)) {
                    l.ifindex = None;
                    l.addrs.clear();
                }
            }
            NetEvent::AddrNew {
                index,
                addr,
                prefix_len,
            } if global(*addr) => {
                for l in self.lanes.iter_mut().filter(|l| l.ifindex == Some(*index)) {
                    l.addrs.retain(|(a, _)| a != addr);
                    l.addrs.insert((*addr, *prefix_len));
                }
            }
            NetEvent::AddrGone { index, addr } => {
                for l in self.lanes.iter_mut().filter(|l| l.ifindex == Some(*index)) {
                    l.addrs.retain(|(a, _)| a != addr);
                }
            }
            NetEvent::AddrNew { .. } => {}
        }
    }

    fn lane_of(&self, ifname: &str) -> Option<IfaceId> {
        self.lanes
            .iter()
            .position(|l| l.name == ifname)
            .map(|k| IfaceId(k as u32))
    }

    /// (neighbour address, interface) → the node that announces its own prefixes through it
    /// (`refmetric 0`, whatever the metric through it now), remembered while babeld lists the
    /// neighbour.
    fn neighbour_nodes(&mut self) -> BTreeMap<(IpAddr, String), NodeId> {
        let origins: Vec<(IpAddr, String, RouterId)> = self
            .babel
            .routes
            .values()
            .filter(|r| r.refmetric == 0)
            .map(|r| (r.via, r.ifname.clone(), r.router_id))
            .collect();
        for (via, ifname, id) in origins {
            let n = self.ids.node(id);
            self.known.insert((via, ifname), n);
        }
        let listed: BTreeSet<(IpAddr, &str)> = self
            .babel
            .neighbours
            .values()
            .map(|n| (n.address, n.ifname.as_str()))
            .collect();
        self.known
            .retain(|(a, i), _| listed.contains(&(*a, i.as_str())));
        self.known.clone()
    }

    /// Every `sample` interval: observations of every neighbour, advertisements, and the
    /// router's recomputation when due. Nothing while babeld is away or its dump incomplete.
    ///
    /// A tick that follows flushes from babeld is held once: babeld flushes every neighbour
    /// and route when it exits, before it closes its local interface, and acting on that
    /// would withdraw every route just as babeld goes away (which must leave them in place).
    /// If babeld is still there at the next tick, the flushes are acted on then: a neighbour
    /// babeld dropped is taken down at most one sample later than without the hold.
    pub fn tick(&mut self, now: Instant) {
        if !self.synced || self.router.is_none() {
            return;
        }
        if std::mem::take(&mut self.settling) && !self.held {
            self.held = true;
            self.stats.held_ticks += 1;
            return;
        }
        self.held = false;
        let who = self.neighbour_nodes();
        let me = self.router.as_ref().map(Router::id);
        let bits = self.settings.reach_bits;
        let mut observations = Vec::new();
        // node → (address, interface) of its neighbour entries.
        let mut faces: BTreeMap<NodeId, Vec<(IpAddr, String)>> = BTreeMap::new();
        for n in self.babel.neighbours.values() {
            let Some(&node) = who.get(&(n.address, n.ifname.clone())) else {
                self.stats.unidentified += 1;
                continue;
            };
            faces
                .entry(node)
                .or_default()
                .push((n.address, n.ifname.clone()));
            let Some(lane) = self.lane_of(&n.ifname) else {
                continue;
            };
            // While babeld lists the neighbour it is heard, however few of the newest hellos
            // came: a measurement of 0 is a bad observation for the HMM, not silence (which
            // would drop the link, and its history, after `dead_after`). A link babeld will not
            // use (infinite cost) keeps its history too, at babeld's infinite metric: the graph
            // uses it only when nothing else reaches that neighbour. Only babeld flushing the
            // neighbour takes the link down.
            let quality = Quality::IfQuality(delivered(n.reach, bits) * 10_000 / bits);
            let obs =
                Observation::new(node, lane, quality).with_cost(n.cost.clamp(1, babel::INFINITY));
            observations.push(obs);
        }
        // What each neighbour advertises: the best refmetric per destination node.
        let mut adverts: BTreeMap<NodeId, BTreeMap<NodeId, u32>> = BTreeMap::new();
        let routes: Vec<(IpAddr, String, RouterId, u32)> = self
            .babel
            .routes
            .values()
            .filter(|r| r.from.is_default() && r.metric < babel::INFINITY)
            .map(|r| (r.via, r.ifname.clone(), r.router_id, r.refmetric))
            .collect();
        for (via, ifname, origin, refmetric) in routes {
            let dest = self.ids.node(origin);
            let Some(&n) = who.get(&(via, ifname)) else {
                continue;
            };
            if dest == n || Some(dest) == me || refmetric >= babel::INFINITY {
                continue;
            }
            let c = adverts
                .entry(n)
                .or_default()
                .entry(dest)
                .or_insert(u32::MAX);
            *c = (*c).min(refmetric.max(1));
        }
        for (node, lane) in std::mem::take(&mut self.flushed) {
            if !observations
                .iter()
                .any(|o| o.neighbour == node && o.iface == lane)
            {
                observations.push(Observation::new(node, lane, Quality::Down));
            }
        }
        self.snapshot_prefixes = self.prefixes();
        self.snapshot_addrs = self
            .babel
            .neighbours
            .values()
            .filter_map(|n| {
                let node = *self.known.get(&(n.address, n.ifname.clone()))?;
                Some(((node, n.ifname.clone()), n.address))
            })
            .collect();
        let Some(router) = self.router.as_mut() else {
            return;
        };
        for o in &observations {
            if router.observe(now, o).is_err() {
                self.stats.refused += 1;
            }
        }
        for &n in faces.keys() {
            let links: Vec<(NodeId, u32)> = adverts
                .get(&n)
                .map(|m| m.iter().map(|(&d, &c)| (d, c)).collect())
                .unwrap_or_default();
            if router.advertise(now, n, &links).is_err() {
                self.stats.refused += 1;
            }
        }
        let before: BTreeMap<(NodeId, IfaceId), bool> = router
            .links()
            .map(|l| ((l.neighbour, l.iface), l.kept))
            .collect();
        router.handle_timeout(now);
        for l in router.links() {
            let was = before.get(&(l.neighbour, l.iface)).copied();
            if was != Some(l.kept) && (was.is_some() || !l.kept) {
                push(
                    &mut self.verdicts,
                    Verdict {
                        at: now,
                        neighbour: l.neighbour,
                        iface: l.iface,
                        kept: l.kept,
                        predicted: l.predicted == Some(braid_pm::hmm::State::Disconnect),
                    },
                );
            }
        }
        for (&(neighbour, iface), &kept) in &before {
            if kept
                && !router
                    .links()
                    .any(|l| (l.neighbour, l.iface) == (neighbour, iface))
            {
                push(
                    &mut self.verdicts,
                    Verdict {
                        at: now,
                        neighbour,
                        iface,
                        kept: false,
                        predicted: false,
                    },
                );
            }
        }
        while let Some(u) = router.poll_update() {
            let change = match u {
                Update::Set {
                    dest,
                    iface,
                    next_hops,
                } => Change {
                    at: now,
                    dest,
                    lane: iface,
                    next_hops: next_hops.iter().map(|h| (h.neighbour, h.iface)).collect(),
                },
                Update::Remove { dest, iface } => Change {
                    at: now,
                    dest,
                    lane: iface,
                    next_hops: Vec::new(),
                },
            };
            push(&mut self.changes, change);
        }
    }

    /// The node's name for status: its router id, or the number.
    pub fn node_name(&self, n: NodeId) -> String {
        self.ids
            .id(n)
            .map_or_else(|| n.to_string(), |id| id.to_string())
    }

    /// The prefixes babeld reaches for each node.
    pub fn prefixes(&self) -> BTreeMap<NodeId, BTreeSet<Prefix>> {
        let mut out: BTreeMap<NodeId, BTreeSet<Prefix>> = BTreeMap::new();
        for r in self.babel.routes.values() {
            if !r.from.is_default() || r.metric >= babel::INFINITY {
                continue;
            }
            if let (Some(n), Some(p)) = (
                self.ids.get(r.router_id),
                Prefix::new(r.prefix.addr, r.prefix.len),
            ) {
                out.entry(n).or_default().insert(p);
            }
        }
        out
    }

    /// babeld's neighbour entry of `node` on interface `ifname`.
    pub fn neighbour_entry(&self, node: NodeId, ifname: &str) -> Option<&babel::Neighbour> {
        self.babel.neighbours.values().find(|n| {
            n.ifname == ifname && self.known.get(&(n.address, n.ifname.clone())) == Some(&node)
        })
    }

    /// The routes the kernel should have: every lane's route of the router, for every prefix
    /// of its destination, through the next hops' addresses.
    pub fn desired_routes(&self) -> BTreeMap<(u32, Prefix), Route> {
        let mut out = BTreeMap::new();
        let Some(router) = &self.router else {
            return out;
        };
        let prefixes = &self.snapshot_prefixes;
        for (dest, lane, hops) in router.table() {
            let Some(ps) = prefixes.get(&dest) else {
                continue;
            };
            let k = lane.0 as usize;
            let table = self.settings.table + lane.0;
            let mut next_hops: Vec<KNextHop> = hops
                .iter()
                .filter_map(|h| {
                    let l = self.lanes.get(h.iface.0 as usize)?;
                    Some(KNextHop {
                        via: *self.snapshot_addrs.get(&(h.neighbour, l.name.clone()))?,
                        ifindex: l.ifindex?,
                    })
                })
                .collect();
            next_hops.dedup();
            if next_hops.is_empty() {
                continue;
            }
            for &p in ps {
                let prefsrc = self.lanes[k]
                    .addrs
                    .iter()
                    .map(|&(a, _)| a)
                    .find(|a| a.is_ipv4() == p.addr.is_ipv4());
                out.insert(
                    (table, p),
                    Route {
                        table,
                        dest: p,
                        next_hops: next_hops.clone(),
                        prefsrc,
                        protocol: PROTOCOL,
                    },
                );
            }
        }
        out
    }

    /// The rules the kernel should have: per lane, from each of its addresses and to each of
    /// its subnets, look up the lane's table.
    pub fn desired_rules(&self) -> BTreeSet<Rule> {
        let mut out = BTreeSet::new();
        for (k, l) in self.lanes.iter().enumerate() {
            if l.ifindex.is_none() {
                continue;
            }
            let k = k as u32;
            let table = self.settings.table + k;
            for &(a, len) in &l.addrs {
                let host = Prefix::host(a);
                out.insert(Rule {
                    priority: self.settings.rule_priority + k,
                    table,
                    from: Some(host),
                    to: None,
                    protocol: PROTOCOL,
                    ipv6: a.is_ipv6(),
                });
                if len > 0
                    && len < host.len
                    && let Some(net) = Prefix::new(a, len)
                {
                    out.insert(Rule {
                        priority: self.settings.rule_priority + 100 + k,
                        table,
                        from: None,
                        to: Some(net),
                        protocol: PROTOCOL,
                        ipv6: a.is_ipv6(),
                    });
                }
            }
        }
        out
    }

    /// The kernel requests that bring the installed state to the desired one: rules always;
    /// routes only with a complete view of babeld (while it is away, routes stay as they are).
    pub fn plan(&self) -> Vec<Op> {
        let mut ops = Vec::new();
        let rules = self.desired_rules();
        for r in self.rules.difference(&rules) {
            ops.push(Op::DeleteRule(r.clone()));
        }
        for r in rules.difference(&self.rules) {
            ops.push(Op::AddRule(r.clone()));
        }
        if self.synced {
            let want = self.desired_routes();
            for (k, r) in &want {
                if self.installed.get(k) != Some(r) {
                    ops.push(Op::Replace(r.clone()));
                }
            }
            for &(table, dest) in self.installed.keys() {
                if !want.contains_key(&(table, dest)) {
                    ops.push(Op::Delete { table, dest });
                }
            }
        }
        ops
    }

    /// The outcome of an [`Op`]: on success the installed state follows it; a failed request
    /// is planned again next time (a route whose deletion found nothing is gone anyway).
    pub fn applied(&mut self, op: &Op, ok: bool, gone: bool) {
        self.stats.kernel_ops += 1;
        if !ok {
            self.stats.kernel_errors += 1;
        }
        match op {
            Op::Replace(r) if ok => {
                self.installed.insert((r.table, r.dest), r.clone());
            }
            Op::Delete { table, dest } if ok || gone => {
                self.installed.remove(&(*table, *dest));
            }
            Op::AddRule(r) if ok => {
                self.rules.insert(r.clone());
            }
            Op::DeleteRule(r) if ok || gone => {
                self.rules.remove(r);
            }
            _ => {}
        }
    }

    /// What is installed (routes, rules), for the clean-up at exit and for `status`.
    pub fn installed(&self) -> (impl Iterator<Item = &Route>, impl Iterator<Item = &Rule>) {
        (self.installed.values(), self.rules.iter())
    }

    /// The tables the lanes use.
    pub fn tables(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.lanes.len() as u32).map(|k| self.settings.table + k)
    }
}

/// Hellos received among the newest `bits` of a 16-hello history (newest in the top bit).
pub fn delivered(reach: u16, bits: u32) -> u32 {
    let bits = bits.clamp(1, 16);
    (reach >> (16 - bits)).count_ones()
}

fn global(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(v) => !v.is_loopback() && !v.is_link_local() && !v.is_unspecified(),
        IpAddr::V6(v) => {
            !v.is_loopback() && !v.is_unspecified() && (v.segments()[0] & 0xffc0) != 0xfe80
        }
    }
}

fn push<T>(q: &mut VecDeque<T>, v: T) {
    if q.len() == LOG_KEPT {
        q.pop_front();
    }
    q.push_back(v);
}

#[cfg(test)]
mod tests;
