//! A scenario's topology: nodes with interfaces (each with its own address and subnet), links
//! joining (node, interface) pairs, the applications with the nodes they connect, and how the
//! nodes route. The two-node form (no `[[node]]`) is node 0, the client, and node 1, the
//! server, joined by one link per `[[link]]`: the client's address on link i is 10.0.i.2, the
//! server's 10.0.i.1.

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::time::Duration;

use super::spec::{AddressPolicy, AppSpec, LinkSpec, NodeSpec, RoutingSpec, Scenario};
use crate::mobility::Point;

type CheckError = (Option<String>, String);

/// Nodes, links, applications and routing of a variant.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    pub nodes: Vec<NodeDef>,
    /// Parallel to [`super::Variant::links`]; `dirs[0]` of link i carries `ends[0]` → `ends[1]`.
    pub links: Vec<LinkDef>,
    /// `[app]` first, then every `[[flow]]`.
    pub apps: Vec<AppDef>,
    /// `None` in the two-node form: its forwarding is fixed (the client sends from the address
    /// of a link over that link, the server answers over the link of the client's address).
    pub routing: Option<RoutingDef>,
    /// Names of the shared media.
    pub media: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeDef {
    pub name: String,
    pub ifaces: Vec<IfaceDef>,
    pub position: Option<Point>,
    pub waypoint: Option<Waypoint>,
    /// The path manager of a node that opens connections.
    pub pm: Option<braid_pm::Config>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IfaceDef {
    pub name: String,
    pub addr: Ipv4Addr,
    pub prefix: u8,
    pub backup: bool,
    /// Transmission rate cap, bit/s.
    pub rate: Option<f64>,
}

/// Random-waypoint movement of a node.
#[derive(Debug, Clone, PartialEq)]
pub struct Waypoint {
    pub area: (f64, f64),
    pub speed_mps: (f64, f64),
    pub pause: Duration,
}

/// One end of a link: (node, interface).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End {
    pub node: usize,
    pub iface: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LinkDef {
    pub name: String,
    pub ends: [End; 2],
    /// The shared medium it is on (an index into [`Topology::media`]).
    pub medium: Option<usize>,
}

/// An application and the connection it runs over.
#[derive(Debug, Clone, PartialEq)]
pub struct AppDef {
    pub name: String,
    pub spec: AppSpec,
    /// The node that opens the connection and the one it connects to.
    pub client: usize,
    pub server: usize,
    /// The server interface whose address the first path goes to.
    pub server_iface: usize,
    /// The client's interfaces the connection may use.
    pub client_ifaces: Vec<usize>,
    pub priority: Option<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoutingPolicyKind {
    /// Shortest paths of the configured topology, once.
    Static,
    /// Link state from hellos, recomputed periodically.
    Shortest,
    /// Seed 004's routing (`braid_pm::route`), with or without HMM prediction.
    Manet { predict: bool },
}

#[derive(Debug, Clone, PartialEq)]
pub struct RoutingDef {
    pub policy: RoutingPolicyKind,
    pub hello: Duration,
    pub period: Duration,
    pub dead: u32,
    pub window: u32,
    /// Part path: traffic stays on interfaces of its subnet.
    pub part: bool,
    /// Per node, per interface: whether its links carry routed traffic.
    pub routed: Vec<Vec<bool>>,
}

impl Topology {
    /// Whether links `l` joins two interfaces that carry routed traffic.
    pub fn routed(&self, l: usize) -> bool {
        let Some(r) = &self.routing else {
            return true;
        };
        self.links[l].ends.iter().all(|e| r.routed[e.node][e.iface])
    }

    /// The node names, for error messages.
    fn node_names(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The two-node form: the client (node 0) has one interface per link, named after it, with
/// address 10.0.i.2; the server (node 1) has 10.0.i.1 on the same links.
pub(super) fn two_node(s: &Scenario, pm: &braid_pm::Config) -> Result<Topology, CheckError> {
    for (i, l) in s.links.iter().enumerate() {
        if l.a.is_some() || l.b.is_some() {
            return Err((
                Some(format!("link[{i}].a")),
                "link ends need a topology: add [[node]] entries".into(),
            ));
        }
    }
    if s.routing.is_some() {
        return Err((
            Some("routing".into()),
            "[routing] needs a topology: add [[node]] entries".into(),
        ));
    }
    let iface = |i: usize, host: u8, l: &LinkSpec| IfaceDef {
        name: l.name.clone(),
        addr: Ipv4Addr::new(10, 0, i as u8, host),
        prefix: 24,
        backup: l.backup && host == 2,
        rate: None,
    };
    let client = NodeDef {
        name: "client".into(),
        ifaces: s
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| iface(i, 2, l))
            .collect(),
        position: None,
        waypoint: None,
        pm: Some(pm.clone()),
    };
    let server = NodeDef {
        name: "server".into(),
        ifaces: s
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| iface(i, 1, l))
            .collect(),
        position: None,
        waypoint: None,
        pm: None,
    };
    let links = s
        .links
        .iter()
        .enumerate()
        .map(|(i, l)| LinkDef {
            name: l.name.clone(),
            ends: [End { node: 1, iface: i }, End { node: 0, iface: i }],
            medium: None,
        })
        .collect();
    let mut t = Topology {
        nodes: vec![client, server],
        links,
        apps: Vec::new(),
        routing: None,
        media: Vec::new(),
    };
    media(&mut t, s);
    for (key, a) in app_keys(s) {
        for (f, v) in [("client", &a.client), ("server", &a.server)] {
            if v.is_some() {
                return Err((
                    Some(format!("{key}.{f}")),
                    "client and server nodes need a topology: add [[node]] entries".into(),
                ));
            }
        }
        if a.interfaces.is_some() {
            return Err((
                Some(format!("{key}.interfaces")),
                "choosing interfaces needs a topology: add [[node]] entries".into(),
            ));
        }
        let app = AppDef {
            name: app_name(&key, a),
            spec: a.clone(),
            client: 0,
            server: 1,
            server_iface: 0,
            client_ifaces: (0..s.links.len()).collect(),
            priority: priority(&key, a)?,
        };
        t.apps.push(app);
    }
    unique_flow_names(&t)?;
    Ok(t)
}

/// Numbers the media the links name.
fn media(t: &mut Topology, s: &Scenario) {
    for (def, spec) in t.links.iter_mut().zip(&s.links) {
        def.medium = spec.medium.as_ref().map(|m| {
            t.media.iter().position(|x| x == m).unwrap_or_else(|| {
                t.media.push(m.clone());
                t.media.len() - 1
            })
        });
    }
}

/// `node` of a `node.*` link end.
fn star(v: &Option<String>) -> Option<&str> {
    v.as_deref().and_then(|v| v.strip_suffix(".*"))
}

/// Links with `node.*` ends become one link per interface name both nodes have. Also returns,
/// per link, the index of the `[[link]]` entry it came from (for error keys).
pub(super) fn expand_links(mut s: Scenario) -> Result<(Scenario, Vec<usize>), CheckError> {
    let mut origins: Vec<usize> = (0..s.links.len()).collect();
    if s.nodes.is_empty() {
        return Ok((s, origins));
    }
    origins.clear();
    let names = |node: &str| -> Option<Vec<String>> {
        let n = s.nodes.iter().find(|n| n.name == node)?;
        Some(if n.iface.is_empty() {
            vec!["e0".to_string()]
        } else {
            n.iface.iter().map(|f| f.name.clone()).collect()
        })
    };
    let mut links = Vec::new();
    for (i, l) in s.links.iter().enumerate() {
        match (star(&l.a), star(&l.b)) {
            (None, None) => {
                links.push(l.clone());
                origins.push(i);
            }
            (Some(a), Some(b)) => {
                let (Some(fa), Some(fb)) = (names(a), names(b)) else {
                    let (k, n) = if names(a).is_none() {
                        ("a", a)
                    } else {
                        ("b", b)
                    };
                    let all: Vec<_> = s.nodes.iter().map(|n| n.name.as_str()).collect();
                    return Err((
                        Some(format!("link[{i}].{k}")),
                        format!("no node `{n}`; nodes are {}", all.join(", ")),
                    ));
                };
                let common: Vec<&String> = fa.iter().filter(|f| fb.contains(f)).collect();
                if common.is_empty() {
                    return Err((
                        Some(format!("link[{i}].b")),
                        format!("`{a}` and `{b}` have no interface name in common"),
                    ));
                }
                for f in common {
                    let mut x = l.clone();
                    x.name = format!("{}.{f}", l.name);
                    x.medium = l.medium.as_ref().map(|m| format!("{m}.{f}"));
                    x.a = Some(format!("{a}.{f}"));
                    x.b = Some(format!("{b}.{f}"));
                    links.push(x);
                    origins.push(i);
                }
            }
            _ => {
                return Err((
                    Some(format!("link[{i}].b")),
                    "`node.*` links every shared interface: give it at both ends".into(),
                ));
            }
        }
    }
    s.links = links;
    Ok((s, origins))
}

/// An error key of an expanded link, `link[i]…`, names the `[[link]]` entry it came from.
pub(super) fn origin_key(key: String, origins: &[usize]) -> String {
    let Some(rest) = key.strip_prefix("link[") else {
        return key;
    };
    let Some((i, tail)) = rest.split_once(']') else {
        return key;
    };
    match i.parse::<usize>().ok().and_then(|i| origins.get(i)) {
        Some(o) => format!("link[{o}]{tail}"),
        None => key,
    }
}

/// A topology from `[[node]]` and `[[link]]` entries with ends.
pub(super) fn build(s: &Scenario, pm: &braid_pm::Config) -> Result<Topology, CheckError> {
    if s.mobility.is_some() {
        return Err((
            Some("mobility".into()),
            "a topology moves its nodes with `node.mobility` (or fixes them with `position`)"
                .into(),
        ));
    }
    let mut nodes = Vec::new();
    for (i, n) in s.nodes.iter().enumerate() {
        nodes.push(node(i, n, &s.nodes[..i])?);
    }
    let mut seen: Vec<(Ipv4Addr, String)> = Vec::new();
    for n in &nodes {
        for f in &n.ifaces {
            if let Some((_, other)) = seen.iter().find(|(a, _)| *a == f.addr) {
                return Err((
                    Some(format!("node.{}.iface.{}.addr", n.name, f.name)),
                    format!("address {} is also {other}'s", f.addr),
                ));
            }
            seen.push((f.addr, format!("{}.{}", n.name, f.name)));
        }
    }
    let mut t = Topology {
        nodes,
        links: Vec::new(),
        apps: Vec::new(),
        routing: None,
        media: Vec::new(),
    };
    for (i, l) in s.links.iter().enumerate() {
        let key = |f: &str| Some(format!("link[{i}].{f}"));
        let only_two_node = [
            ("backup", l.backup),
            ("address", l.address != AddressPolicy::Keep),
            ("threshold_dbm", l.threshold_dbm.is_some()),
            ("signal", l.signal.is_some()),
        ];
        if let Some((f, _)) = only_two_node.iter().find(|(_, set)| *set) {
            return Err((
                key(f),
                "only in the two-node form (in a topology: an interface's `backup`)".into(),
            ));
        }
        let a = end(&t, l.a.as_deref(), key("a"))?;
        let b = end(&t, l.b.as_deref(), key("b"))?;
        if a == b {
            return Err((key("b"), "a link joins two different interfaces".into()));
        }
        if let Some(o) = t
            .links
            .iter()
            .find(|o| o.ends == [a, b] || o.ends == [b, a])
        {
            return Err((
                key("b"),
                format!(
                    "link `{}` already joins these interfaces (a route names its next hop by interface and address)",
                    o.name
                ),
            ));
        }
        if l.radio.is_some() {
            for e in [a, b] {
                let n = &t.nodes[e.node];
                if n.position.is_none() && n.waypoint.is_none() {
                    return Err((
                        key("radio"),
                        format!(
                            "a radio needs positions: give node `{}` a `position` or `mobility`",
                            n.name
                        ),
                    ));
                }
            }
        }
        t.links.push(LinkDef {
            name: l.name.clone(),
            ends: [a, b],
            medium: None,
        });
    }
    media(&mut t, s);
    t.routing = Some(routing(&t, s.routing.clone().unwrap_or_default())?);
    for (key, a) in app_keys(s) {
        let app = app(&t, &key, a)?;
        t.apps.push(app);
    }
    unique_flow_names(&t)?;
    // Each node that opens connections gets the scenario's path manager over its interfaces.
    let clients: Vec<usize> = t.apps.iter().map(|a| a.client).collect();
    for c in clients {
        let n = &mut t.nodes[c];
        let mut cfg = pm.clone();
        cfg.ifaces = n
            .ifaces
            .iter()
            .map(|f| braid_pm::IfaceConfig {
                backup: f.backup,
                ..braid_pm::IfaceConfig::new(&f.name)
            })
            .collect();
        cfg.validate().map_err(|m| (Some("pm.mode".into()), m))?;
        n.pm = Some(cfg);
    }
    Ok(t)
}

fn node(i: usize, n: &NodeSpec, before: &[NodeSpec]) -> Result<NodeDef, CheckError> {
    let key = |f: &str| Some(format!("node[{i}].{f}"));
    if n.name.is_empty() || n.name.contains('.') {
        return Err((key("name"), "a non-empty name without dots".into()));
    }
    if before.iter().any(|o| o.name == n.name) {
        return Err((key("name"), format!("duplicate node name `{}`", n.name)));
    }
    if i >= 250 {
        return Err((key("name"), "a topology holds at most 250 nodes".into()));
    }
    let specs = if n.iface.is_empty() {
        vec![super::spec::IfaceSpec {
            name: "e0".into(),
            addr: None,
            backup: false,
            rate: None,
        }]
    } else {
        n.iface.clone()
    };
    if specs.len() > 8 {
        return Err((key("iface"), "a node has at most 8 interfaces".into()));
    }
    let mut ifaces: Vec<IfaceDef> = Vec::new();
    for (j, f) in specs.iter().enumerate() {
        let fkey = |x: &str| Some(format!("node[{i}].iface[{j}].{x}"));
        if f.name.is_empty() || f.name.contains('.') {
            return Err((fkey("name"), "a non-empty name without dots".into()));
        }
        if ifaces.iter().any(|o| o.name == f.name) {
            return Err((fkey("name"), format!("duplicate interface `{}`", f.name)));
        }
        let (addr, prefix) = match &f.addr {
            None => (Ipv4Addr::new(10, i as u8 + 1, j as u8, 1), 24),
            Some(a) => parse_prefix(a).ok_or_else(|| {
                (
                    fkey("addr"),
                    format!("`{a}` is not an IPv4 address with a prefix, e.g. \"112.26.0.1/24\""),
                )
            })?,
        };
        if let Some(r) = f.rate
            && (r.0.is_nan() || r.0 <= 0.0)
        {
            return Err((fkey("rate"), "must be positive".into()));
        }
        ifaces.push(IfaceDef {
            name: f.name.clone(),
            addr,
            prefix,
            backup: f.backup,
            rate: f.rate.map(|r| r.0),
        });
    }
    let position = match n.position {
        None => None,
        Some([x, y]) if x.is_finite() && y.is_finite() => Some(Point { x, y }),
        Some(_) => return Err((key("position"), "finite metres [x, y]".into())),
    };
    let waypoint = match &n.mobility {
        None => None,
        Some(m) => {
            if m.model != "waypoint" {
                return Err((
                    key("mobility.model"),
                    format!("unknown model `{}`; allowed: waypoint", m.model),
                ));
            }
            let [w, h] = m.area;
            if !(w > 0.0 && h > 0.0 && w.is_finite() && h.is_finite()) {
                return Err((key("mobility.area"), "a positive [width, height]".into()));
            }
            let [lo, hi] = m.speed_mps;
            if !(lo > 0.0 && lo <= hi && hi < 100.0) {
                return Err((
                    key("mobility.speed_mps"),
                    "[min, max] with 0 < min ≤ max < 100 m/s".into(),
                ));
            }
            Some(Waypoint {
                area: (w, h),
                speed_mps: (lo, hi),
                pause: m.pause.0,
            })
        }
    };
    Ok(NodeDef {
        name: n.name.clone(),
        ifaces,
        position,
        waypoint,
        pm: None,
    })
}

/// "a.b.c.d/len"
fn parse_prefix(s: &str) -> Option<(Ipv4Addr, u8)> {
    let (a, l) = s.split_once('/')?;
    let len: u8 = l.parse().ok()?;
    (len <= 32).then_some((a.parse().ok()?, len))
}

/// Resolves `node.iface`.
fn end(t: &Topology, v: Option<&str>, key: Option<String>) -> Result<End, CheckError> {
    let Some(v) = v else {
        return Err((
            key,
            "a topology link names its ends: a = \"node.interface\", b = \"node.interface\"".into(),
        ));
    };
    let (n, f) = v.split_once('.').unwrap_or((v, ""));
    let node = t.nodes.iter().position(|x| x.name == n).ok_or_else(|| {
        (
            key.clone(),
            format!("no node `{n}`; nodes are {}", t.node_names()),
        )
    })?;
    let ifaces = &t.nodes[node].ifaces;
    let iface = ifaces.iter().position(|x| x.name == f).ok_or_else(|| {
        let names: Vec<_> = ifaces.iter().map(|x| x.name.as_str()).collect();
        (
            key.clone(),
            format!(
                "node `{n}` has no interface `{f}`; its interfaces are {}",
                names.join(", ")
            ),
        )
    })?;
    Ok(End { node, iface })
}

fn routing(t: &Topology, r: RoutingSpec) -> Result<RoutingDef, CheckError> {
    let key = |f: &str| Some(format!("routing.{f}"));
    let policy = match r.policy.as_str() {
        "static" => RoutingPolicyKind::Static,
        "shortest" => RoutingPolicyKind::Shortest,
        "manet" => RoutingPolicyKind::Manet { predict: r.hmm },
        other => {
            return Err((
                key("policy"),
                format!("unknown policy `{other}`; allowed: static, shortest, manet"),
            ));
        }
    };
    if r.hmm && !matches!(policy, RoutingPolicyKind::Manet { .. }) {
        return Err((key("hmm"), "HMM prediction needs policy = \"manet\"".into()));
    }
    let part = match r.connectivity.as_str() {
        "full" => false,
        "part" => true,
        other => {
            return Err((
                key("connectivity"),
                format!("unknown connectivity `{other}`; allowed: full, part"),
            ));
        }
    };
    // Periods of a millisecond and more: a shorter one would keep the clock at an instant.
    for (name, d) in [("hello", r.hello.0), ("period", r.period.0)] {
        if d < Duration::from_millis(1) {
            return Err((key(name), format!("{name} must be at least 1 ms")));
        }
    }
    if r.dead == 0 || r.window == 0 || r.window > 64 {
        return Err((key("window"), "dead ≥ 1 and 1 ≤ window ≤ 64 hellos".into()));
    }
    for name in &r.interfaces {
        if !t
            .nodes
            .iter()
            .any(|n| n.ifaces.iter().any(|f| f.name == *name))
        {
            return Err((
                key("interfaces"),
                format!("no node has an interface `{name}`"),
            ));
        }
    }
    let routed = t
        .nodes
        .iter()
        .map(|n| {
            n.ifaces
                .iter()
                .map(|f| r.interfaces.is_empty() || r.interfaces.contains(&f.name))
                .collect()
        })
        .collect();
    Ok(RoutingDef {
        policy,
        hello: r.hello.0,
        period: r.period.0,
        dead: r.dead,
        window: r.window,
        part,
        routed,
    })
}

/// `[app]` and every `[[flow]]` with the key that names them.
fn app_keys(s: &Scenario) -> Vec<(String, &AppSpec)> {
    std::iter::once(("app".to_string(), &s.app))
        .chain(
            s.flows
                .iter()
                .enumerate()
                .map(|(i, f)| (format!("flow[{i}]"), f)),
        )
        .collect()
}

fn app_name(key: &str, a: &AppSpec) -> String {
    a.name.clone().unwrap_or_else(|| key.to_string())
}

fn priority(key: &str, a: &AppSpec) -> Result<Option<u8>, CheckError> {
    match a.priority {
        None => Ok(None),
        Some(p) if (1..=6).contains(&p) => Ok(Some(p as u8)),
        Some(p) => Err((
            Some(format!("{key}.priority")),
            format!("{p} out of range: allowed 1 (highest) ..= 6"),
        )),
    }
}

fn unique_flow_names(t: &Topology) -> Result<(), CheckError> {
    for (i, a) in t.apps.iter().enumerate().skip(1) {
        if a.name.is_empty() || a.name.contains('.') {
            return Err((
                Some(format!("flow[{}].name", i - 1)),
                "a non-empty name without dots (metrics are flow.<name>.<metric>)".into(),
            ));
        }
        if t.apps[..i].iter().any(|o| o.name == a.name) {
            return Err((
                Some(format!("flow[{}].name", i - 1)),
                format!("duplicate flow name `{}`", a.name),
            ));
        }
    }
    Ok(())
}

fn app(t: &Topology, key: &str, a: &AppSpec) -> Result<AppDef, CheckError> {
    let k = |f: &str| Some(format!("{key}.{f}"));
    let (client, ci) = node_ref(t, key, "client", &a.client)?;
    if ci.is_some() {
        return Err((
            k("client"),
            "name the client node only (its interfaces: `interfaces`)".into(),
        ));
    }
    let (server, si) = node_ref(t, key, "server", &a.server)?;
    if client == server {
        return Err((k("server"), "the server must be another node".into()));
    }
    let server_iface = match si {
        None => 0,
        Some(f) => t.nodes[server]
            .ifaces
            .iter()
            .position(|x| x.name == f)
            .ok_or_else(|| {
                (
                    k("server"),
                    format!("node `{}` has no interface `{f}`", t.nodes[server].name),
                )
            })?,
    };
    let client_ifaces = match &a.interfaces {
        None => (0..t.nodes[client].ifaces.len()).collect(),
        Some(names) => {
            let mut v = Vec::new();
            for n in names {
                let i = t.nodes[client]
                    .ifaces
                    .iter()
                    .position(|x| x.name == *n)
                    .ok_or_else(|| {
                        (
                            k("interfaces"),
                            format!("node `{}` has no interface `{n}`", t.nodes[client].name),
                        )
                    })?;
                v.push(i);
            }
            if v.is_empty() {
                return Err((k("interfaces"), "at least one interface".into()));
            }
            v.sort_unstable();
            v.dedup();
            v
        }
    };
    if !connected(t, client, server) {
        return Err((
            k("server"),
            format!(
                "no route from `{}` to `{}`: the topology's routed links do not connect them",
                t.nodes[client].name, t.nodes[server].name
            ),
        ));
    }
    Ok(AppDef {
        name: app_name(key, a),
        spec: a.clone(),
        client,
        server,
        server_iface,
        client_ifaces,
        priority: priority(key, a)?,
    })
}

/// The node of `client`/`server` = "node" or "node.interface".
fn node_ref<'a>(
    t: &Topology,
    key: &str,
    f: &str,
    v: &'a Option<String>,
) -> Result<(usize, Option<&'a str>), CheckError> {
    let k = Some(format!("{key}.{f}"));
    let Some(v) = v else {
        return Err((
            k,
            format!("a topology needs the {f} node, e.g. {f} = \"M1\""),
        ));
    };
    let (n, i) = match v.split_once('.') {
        Some((n, i)) => (n, Some(i)),
        None => (v.as_str(), None),
    };
    let idx = t
        .nodes
        .iter()
        .position(|x| x.name == n)
        .ok_or_else(|| (k, format!("no node `{n}`; nodes are {}", t.node_names())))?;
    Ok((idx, i))
}

/// Whether routed links join node `a` to node `b`.
fn connected(t: &Topology, a: usize, b: usize) -> bool {
    let mut seen = vec![false; t.nodes.len()];
    let mut queue = VecDeque::from([a]);
    seen[a] = true;
    while let Some(n) = queue.pop_front() {
        if n == b {
            return true;
        }
        for (l, link) in t.links.iter().enumerate() {
            if !t.routed(l) {
                continue;
            }
            let [x, y] = link.ends;
            for (from, to) in [(x, y), (y, x)] {
                if from.node == n && !seen[to.node] {
                    seen[to.node] = true;
                    queue.push_back(to.node);
                }
            }
        }
    }
    false
}
