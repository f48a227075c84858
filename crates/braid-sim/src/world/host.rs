//! Nodes and their connection endpoints: the path manager of a node that opens connections
//! (driven through `braid_pm::ConnAdapter`, as the tunnel daemon drives its own), timers, and
//! the measurement of the main application's connection.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use braid_core::scheduler::Priority;
use braid_core::wire::{self, Frame};
use braid_core::{AddrId, Connection, Instant, Side};
use braid_pm::{self as pm, Applied, ConnAdapter, PathManager};

use super::net::{Meta, Table};
use super::tunnel::TunnelEnd;
use super::{Kind, World, mix};
use crate::mobility::Mobility;
use crate::record::{PmDecision, Recovery, Sample};
use crate::scenario::Variant;

pub(super) struct Node {
    pub table: Table,
    /// Addresses of its interfaces, by interface.
    pub addrs: Vec<u32>,
    pub pm: Option<pm::Manager>,
    pub pm_timer: Option<Instant>,
    /// The path manager saw an event or a timeout since its timer was last read.
    pub pm_dirty: bool,
    /// Client endpoints whose connections the path manager drives.
    pub clients: Vec<usize>,
    /// Interfaces the path manager may use (those of the node's applications).
    pub pm_ifaces: Vec<usize>,
    pub motion: Option<Mobility>,
}

impl Node {
    pub fn owns(&self, addr: u32) -> bool {
        self.addrs.contains(&addr)
    }
}

pub(super) struct Endpoint {
    pub conn: Connection,
    pub node: usize,
    pub client: bool,
    /// The other end of the connection.
    pub peer: usize,
    /// Local addresses by address id, with their interface. A client's address i is its
    /// interface i; a server's address 0 is the one the first path goes to.
    pub locals: Vec<(Ipv4Addr, usize)>,
    /// Earliest timer event pending in the queue for this endpoint.
    pub timer: Option<Instant>,
    /// A client's binding to its node's path manager.
    pub adapter: Option<ConnAdapter>,
    /// `[tunnel]`: `conn` is the tunnel's connection and the application uses the host's
    /// end-to-end connection behind it.
    pub tunnel: Option<Box<TunnelEnd>>,
}

impl Endpoint {
    /// A CBR application here sends and receives over UDP through the tunnel.
    pub fn cbr_over_udp(&self) -> bool {
        self.tunnel.as_ref().is_some_and(|t| t.cbr_udp)
    }

    /// The connection the application writes and reads.
    pub fn app_conn(&mut self) -> &mut Connection {
        match &mut self.tunnel {
            Some(t) => &mut t.inner,
            None => &mut self.conn,
        }
    }
}

pub(super) fn nodes(variant: &Variant, seed: u64) -> Vec<Node> {
    let t = &variant.topology;
    let duration = variant.scenario.duration.0;
    t.nodes
        .iter()
        .enumerate()
        .map(|(n, def)| {
            let mut pm_ifaces: Vec<usize> = t
                .apps
                .iter()
                .filter(|a| a.client == n)
                .flat_map(|a| a.client_ifaces.iter().copied())
                .collect();
            pm_ifaces.sort_unstable();
            pm_ifaces.dedup();
            let motion = match (&def.waypoint, def.position) {
                (Some(w), _) => Some(Mobility::waypoint(
                    w.area,
                    w.speed_mps,
                    w.pause,
                    duration,
                    mix(seed, (3 << 20) | n as u64),
                )),
                (None, Some(p)) => Some(Mobility::fixed(p)),
                (None, None) => None,
            };
            Node {
                table: Table::default(),
                addrs: def.ifaces.iter().map(|f| u32::from(f.addr)).collect(),
                pm: def
                    .pm
                    .clone()
                    .map(|c| pm::Manager::new(c).expect("checked when the scenario loaded")),
                pm_timer: None,
                pm_dirty: true,
                clients: (0..t.apps.len())
                    .filter(|&k| t.apps[k].client == n)
                    .map(|k| 2 * k)
                    .collect(),
                pm_ifaces,
                motion,
            }
        })
        .collect()
}

fn sock(ip: Ipv4Addr) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(ip), 0)
}

pub(super) fn endpoints(variant: &Variant) -> Vec<Endpoint> {
    let t = &variant.topology;
    let mut eps = Vec::new();
    for (k, a) in t.apps.iter().enumerate() {
        let client = &t.nodes[a.client];
        let server = &t.nodes[a.server];
        let mut order = vec![a.server_iface];
        order.extend((0..server.ifaces.len()).filter(|&i| i != a.server_iface));
        let primary = server.ifaces[a.server_iface].addr;
        let mut adapter = ConnAdapter::new(
            pm::ConnId(k as u64 + 1),
            pm::Endpoint {
                id: pm::AddrId(0),
                addr: Some(sock(primary)),
            },
        );
        for (i, f) in client.ifaces.iter().enumerate() {
            adapter.set_local(AddrId(i as u8), Some(sock(f.addr)));
        }
        let priority = a.priority.and_then(Priority::new);
        let conn = |side| {
            let mut c = Connection::new(variant.config.clone(), side, Instant::ZERO);
            if priority.is_some() {
                c.set_priority(priority);
            }
            c
        };
        eps.push(Endpoint {
            conn: conn(Side::Client),
            node: a.client,
            client: true,
            peer: 2 * k + 1,
            locals: client
                .ifaces
                .iter()
                .enumerate()
                .map(|(i, f)| (f.addr, i))
                .collect(),
            timer: None,
            adapter: Some(adapter),
            tunnel: variant
                .tunnel
                .as_ref()
                .filter(|_| k == 0)
                .map(|v| TunnelEnd::new(v, Side::Client)),
        });
        eps.push(Endpoint {
            conn: conn(Side::Server),
            node: a.server,
            client: false,
            peer: 2 * k,
            locals: order.iter().map(|&i| (server.ifaces[i].addr, i)).collect(),
            timer: None,
            adapter: None,
            tunnel: variant
                .tunnel
                .as_ref()
                .filter(|_| k == 0)
                .map(|v| TunnelEnd::new(v, Side::Server)),
        });
    }
    eps
}

impl World<'_> {
    fn pm_event(&mut self, node: usize, e: pm::Event) {
        if let Some(pm) = &mut self.nodes[node].pm {
            pm.handle_event(self.now, &e);
            self.nodes[node].pm_dirty = true;
        }
    }

    /// A node's path manager learns the interfaces and addresses it may use.
    pub(super) fn announce_ifaces(&mut self, node: usize) {
        for k in 0..self.nodes[node].pm_ifaces.len() {
            let i = self.nodes[node].pm_ifaces[k];
            let f = &self.topo.nodes[node].ifaces[i];
            let (name, addr) = (f.name.clone(), f.addr);
            self.pm_event(
                node,
                pm::Event::IfaceNew {
                    iface: pm::IfaceId(i as u32),
                    name,
                    up: true,
                },
            );
            self.pm_event(
                node,
                pm::Event::LocalAddrNew {
                    iface: pm::IfaceId(i as u32),
                    id: pm::AddrId(i as u8),
                    addr: Some(IpAddr::V4(addr)),
                },
            );
        }
    }

    /// Application `flow`'s client opens the connection's first path (the path manager adds the
    /// others once it is established, as MPTCP does after MP_CAPABLE). In a topology the server
    /// announces its other addresses (ADD_ADDR).
    pub(super) fn open(&mut self, flow: usize) {
        let (c, s) = (2 * flow, 2 * flow + 1);
        let def = &self.topo.apps[flow];
        let first = def.client_ifaces[0];
        let backup = self.topo.nodes[def.client].ifaces[first].backup;
        let node = self.eps[c].node;
        let _ = self.eps[c]
            .conn
            .open_path(self.now, AddrId(first as u8), AddrId(0), backup);
        if let Some(a) = &mut self.eps[c].adapter {
            let e = a.created(AddrId(first as u8));
            self.pm_event(node, e);
        }
        self.tunnel_open(c);
        if !self.legacy() {
            let server = &mut self.eps[s];
            for (j, &(ip, _)) in server.locals.iter().enumerate().skip(1) {
                server.conn.announce_addr(AddrId(j as u8), sock(ip), false);
            }
        }
    }

    pub(super) fn pump(&mut self, ep: usize) {
        let flow = ep / 2;
        loop {
            let mut progress = false;
            let node = self.eps[ep].node;
            if self.eps[ep].client && self.nodes[node].pm.is_some() {
                progress |= self.run_pm(node);
            } else {
                while self.eps[ep].conn.poll_event().is_some() {
                    progress = true;
                }
            }
            if ep != self.apps[flow].sender {
                progress |= self.app_read(flow);
            } else {
                progress |= self.app_write(flow);
            }
            if self.eps[ep].tunnel.is_some() {
                progress |= self.tunnel_io(ep);
                self.tunnel_transmit(ep);
                if !progress {
                    break;
                }
                continue;
            }
            let mut buf = self.spare.pop().unwrap_or_default();
            let mut data_sent = self.eps[ep].conn.stats().data_packets_sent;
            while let Some(t) = self.eps[ep].conn.poll_transmit(self.now, &mut buf) {
                // The datagram buffer itself travels; the next one comes from the pool.
                let next = self.spare.pop().unwrap_or_default();
                let datagram = std::mem::replace(&mut buf, next);
                // A datagram carries at most one DATA frame; the connection counts them.
                let now_sent = self.eps[ep].conn.stats().data_packets_sent;
                let stream = now_sent != data_sent;
                data_sent = now_sent;
                self.originate(ep, t.local.0, t.remote.0, stream, datagram);
            }
            self.recycle(buf);
            if !progress {
                break;
            }
        }
        let next = if self.eps[ep].tunnel.is_some() {
            self.tunnel_timeout(ep)
        } else {
            self.eps[ep].conn.poll_timeout()
        };
        if let Some(t) = next
            && self.eps[ep].timer.is_none_or(|cur| t < cur)
        {
            self.eps[ep].timer = Some(t);
            self.schedule(t.max(self.now), Kind::Timer { ep: ep as u16 });
        }
    }

    pub(super) fn timer(&mut self, ep: usize) {
        if self.eps[ep].timer.is_some_and(|t| t <= self.now) {
            self.eps[ep].timer = None;
        }
        if self.eps[ep].tunnel.is_some() {
            self.tunnel_timer(ep);
            return self.pump(ep);
        }
        let conn = &mut self.eps[ep].conn;
        if conn.poll_timeout().is_some_and(|t| t <= self.now) {
            conn.handle_timeout(self.now);
        }
        self.pump(ep);
    }

    pub(super) fn pm_timer(&mut self, node: usize) {
        let now = self.now;
        let n = &mut self.nodes[node];
        if n.pm_timer.is_some_and(|t| t <= now) {
            n.pm_timer = None;
        }
        if let Some(pm) = &mut n.pm
            && pm.poll_timeout().is_some_and(|t| t <= now)
        {
            pm.handle_timeout(now);
            n.pm_dirty = true;
        }
        if self.nodes[node]
            .pm
            .as_ref()
            .is_some_and(|p| p.wants_traffic())
        {
            self.feed_traffic(node);
        }
        for k in 0..self.nodes[node].clients.len() {
            let ep = self.nodes[node].clients[k];
            self.pump(ep);
        }
    }

    /// The capacity-aware path managers' sample: the bytes each interface of the node carried,
    /// over all its client connections.
    fn feed_traffic(&mut self, node: usize) {
        let mut sum: Vec<(pm::IfaceId, u64)> = Vec::new();
        for k in 0..self.nodes[node].clients.len() {
            let ep = self.nodes[node].clients[k];
            let Endpoint { conn, adapter, .. } = &mut self.eps[ep];
            let Some(a) = adapter else { continue };
            for (i, b) in a.traffic(conn) {
                match sum.iter_mut().find(|(j, _)| *j == i) {
                    Some((_, t)) => *t += b,
                    None => sum.push((i, b)),
                }
            }
        }
        self.pm_event(node, pm::Event::Traffic { bytes: sum });
    }

    /// Feeds the node's client connections' events to its path manager and executes its
    /// commands.
    fn run_pm(&mut self, node: usize) -> bool {
        let now = self.now;
        let mut any = false;
        loop {
            let mut progress = false;
            for k in 0..self.nodes[node].clients.len() {
                let ep = self.nodes[node].clients[k];
                let Endpoint { conn, adapter, .. } = &mut self.eps[ep];
                let (Some(pm), Some(a)) = (&mut self.nodes[node].pm, adapter.as_ref()) else {
                    continue;
                };
                while let Some(e) = conn.poll_event() {
                    progress = true;
                    if let Some(pe) = a.translate(&e) {
                        pm.handle_event(now, &pe);
                    }
                }
            }
            while let Some(c) = self.nodes[node].pm.as_mut().and_then(|p| p.poll_command()) {
                progress = true;
                self.execute(node, &c);
            }
            if !progress {
                break;
            }
            any = true;
        }
        // The path manager's deadline only moves when it handles something.
        let n = &mut self.nodes[node];
        let dirty = std::mem::take(&mut n.pm_dirty);
        if !(any || dirty) {
            return false;
        }
        if let Some(t) = n.pm.as_ref().and_then(|p| p.poll_timeout())
            && n.pm_timer.is_none_or(|cur| t < cur)
        {
            n.pm_timer = Some(t);
            self.schedule(t.max(now), Kind::PmTimer { node: node as u16 });
        }
        any
    }

    fn execute(&mut self, node: usize, c: &pm::Command) {
        let Some(ep) = self.nodes[node].clients.iter().copied().find(|&e| {
            self.eps[e]
                .adapter
                .as_ref()
                .is_some_and(|a| a.conn() == c.conn())
        }) else {
            return;
        };
        let Some(pm) = &mut self.nodes[node].pm else {
            return;
        };
        let Endpoint { conn, adapter, .. } = &mut self.eps[ep];
        let Some(a) = adapter else { return };
        let applied = a.execute(self.now, conn, pm, c, |_| true);
        if ep != 0 {
            return;
        }
        let t = self.now.since_epoch();
        let (link, demote, flip) = match applied {
            Applied::Opened { iface, backup, .. } => (iface.0 as usize, backup, false),
            Applied::Closed { local, .. } => (local.0 as usize, true, false),
            Applied::Backup { local, backup, .. } => (local.0 as usize, backup, true),
            _ => return,
        };
        self.rec.decisions.push(PmDecision {
            t,
            link,
            demote,
            flip,
        });
    }

    /// A datagram for endpoint `ep` (the trace and the redundant-packet count look at it
    /// first).
    pub(super) fn receive(&mut self, ep: usize, meta: Meta, data: &[u8]) {
        let flow = ep / 2;
        if ep != self.apps[flow].sender {
            let link = usize::from(meta.cid);
            if flow == 0 && (self.opts.trace_dsn || self.awaiting_recovery(link)) {
                self.trace_data(link, data);
            }
            self.apps[flow].count_redundant(data);
        }
        if self.eps[ep].tunnel.is_some() {
            return self.tunnel_receive(ep, data);
        }
        let _ = self.eps[ep].conn.handle_datagram(self.now, data);
    }

    fn awaiting_recovery(&self, link: usize) -> bool {
        self.rec
            .recoveries
            .iter()
            .rfind(|r| r.link == link)
            .is_some_and(|r| r.first_data.is_none() && r.lost.is_none())
    }

    /// Records the data a receiver gets on a link (for plots and the recovery metric).
    fn trace_data(&mut self, link: usize, data: &[u8]) {
        let Ok((_, frames)) = wire::parse_header(data) else {
            return;
        };
        let now = self.now.micros();
        let mut carried = false;
        for f in frames.map_while(Result::ok) {
            if let Frame::Data { dsn, payload, .. } = f
                && !payload.is_empty()
            {
                carried = true;
                if self.opts.trace_dsn && self.rec.dsn.len() < 4_000_000 {
                    self.rec.dsn.push((now, link as u8, dsn));
                }
            }
        }
        if carried {
            let t = self.now.since_epoch();
            if let Some(r) = self
                .rec
                .recoveries
                .iter_mut()
                .rev()
                .find(|r| r.link == link)
                && r.first_data.is_none()
                && r.lost.is_none()
            {
                r.first_data = Some(t);
            }
        }
    }

    /// Stream bytes received per client interface so far: the client numbers its addresses by
    /// interface, and the server sees the client's address of each path as the peer address.
    pub(super) fn link_rx(&self) -> Vec<u64> {
        let mut rx = vec![0; self.rec.link_names.len()];
        let (snd, rcv) = (self.apps[0].sender, self.apps[0].receiver);
        let receiver = &self.eps[rcv].conn;
        let counts: Vec<(AddrId, u64)> = if !self.eps[snd].client {
            receiver
                .addr_stats()
                .map(|(a, s)| (a, s.data_bytes_received))
                .collect()
        } else {
            receiver
                .peer_addr_stats()
                .map(|(a, s)| (a, s.data_bytes_received))
                .collect()
        };
        for (a, b) in counts {
            if let Some(v) = rx.get_mut(a.0 as usize) {
                *v = b;
            }
        }
        rx
    }

    pub(super) fn sample(&mut self) {
        let n = self.rec.link_names.len();
        let (snd, rcv) = (self.apps[0].sender, self.apps[0].receiver);
        let sender = &self.eps[snd].conn;
        let receiver = &self.eps[rcv].conn;
        let mut cwnd = vec![0; n];
        let mut srtt = vec![0; n];
        let client_side = self.eps[snd].client;
        for p in sender.paths() {
            let i = usize::from(if client_side { p.local.0 } else { p.remote.0 });
            if i < n {
                cwnd[i] = p.cwnd;
                srtt[i] = p.srtt.as_micros() as u64;
            }
        }
        let s = Sample {
            t: self.now.since_epoch(),
            delivered: self.apps[0].delivered,
            link_rx: self.link_rx(),
            link_cwnd: cwnd,
            link_srtt_us: srtt,
            ofo_bytes: receiver.reorder_buffer_bytes(),
            reinjected: sender.stats().reinjected_packets,
            data_packets: sender.stats().data_packets_sent,
        };
        self.rec.samples.push(s);
    }

    /// A new recovery entry (the signal of client interface `link` rose above its threshold).
    pub(super) fn recovery(&mut self, link: usize) {
        self.rec.recoveries.push(Recovery {
            t: self.now.since_epoch(),
            link,
            first_data: None,
            lost: None,
        });
    }

    /// Signal, interface and address events of the two-node form's client.
    pub(super) fn client_pm_event(&mut self, e: pm::Event) {
        let node = self.eps[0].node;
        self.pm_event(node, e);
    }
}
