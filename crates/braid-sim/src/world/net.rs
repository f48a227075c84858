//! The network: links (each direction a [`Direction`] of the link model), forwarding tables,
//! hop-by-hop forwarding, and the hellos a routing policy observes.

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::time::Duration;

use braid_core::Instant;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use super::routing::{Observation, Route, mask};
use super::{Kind, World, mix};
use crate::link::Direction;
use crate::mobility::Point;
use crate::radio::{Coverage, RadioSpec, Shadowing, SignalWatch};
use crate::scenario::{AddressPolicy, Variant};

/// A packet on the wire: arrival time, link epoch at sending, slot in `packets`.
type InFlight = (Instant, u32, u32);

/// What the network layer knows of a datagram in flight.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Meta {
    pub src: u32,
    pub dst: u32,
    /// The application whose connection it belongs to.
    pub flow: u16,
    /// The client's address id of the path (the interface axis of the record).
    pub cid: u8,
    pub ttl: u8,
    pub hello: bool,
    /// Carries stream data (a DATA frame).
    pub data: bool,
}

const TTL: u8 = 64;
const HELLO_BYTES: usize = 64;

pub(super) struct Radio {
    pub spec: RadioSpec,
    pub shadowing: Shadowing,
    pub rng: Pcg64Mcg,
    /// Replay position, for signal replays.
    pub replay_idx: usize,
    /// The last signal and where both ends were then (topologies).
    pub rss: Option<f64>,
    pub last: Option<(Instant, Point, Point)>,
}

/// The seeds of link `i`'s shadowing and radio streams in the two-node form (its historical
/// streams).
pub(super) fn two_node_radio_seeds(seed: u64, i: usize) -> (u64, u64) {
    (mix(seed, 100 + i as u64), mix(seed, 200 + i as u64))
}

impl Radio {
    /// A radio's state at the start of a run, its random streams seeded.
    pub fn new(spec: RadioSpec, shadow_seed: u64, radio_seed: u64) -> Radio {
        Radio {
            shadowing: Shadowing::new(shadow_seed, spec.shadowing_db, spec.decorrelation_m),
            rng: Pcg64Mcg::seed_from_u64(radio_seed),
            spec,
            replay_idx: 0,
            rss: None,
            last: None,
        }
    }
}

pub(super) struct Link {
    /// `dirs[0]` carries `ends[0]` → `ends[1]` (server → client in the two-node form).
    pub dirs: [Direction; 2],
    pub rngs: [Pcg64Mcg; 2],
    /// Packets on the wire per direction, in arrival order (links that keep order only: the
    /// event queue then holds just each FIFO's head).
    pub wire: [VecDeque<InFlight>; 2],
    pub reorder: bool,
    /// (node, interface) at each end.
    pub ends: [(usize, usize); 2],
    /// The client's address on this link exists (two-node form).
    pub addr_present: bool,
    pub backup: bool,
    pub address: AddressPolicy,
    pub radio: Option<Radio>,
    /// Up as far as the radio (or the script) is concerned.
    pub covered: bool,
    /// Smoothed signal against the threshold, for the recovery metric.
    pub watch: SignalWatch,
    /// When the link's signal or address last came back.
    pub since: Duration,
    /// Incremented at every loss, to cancel stale address removals.
    pub loss_epoch: u32,
    /// Consecutive beacons below (above) the cut-off, and when the current run below began
    /// with the stream position then.
    pub coverage: Coverage,
    pub below_since: Option<(Instant, u64)>,
    /// Hellos heard per direction since the last hello tick.
    pub hellos: [bool; 2],
    /// The sending interface's rate per direction (a radio's rate stays below it).
    pub caps: [f64; 2],
    /// The shared medium it is on.
    pub medium: Option<usize>,
}

/// The links of a variant, with generators seeded from `seed`.
pub(super) fn links(variant: &Variant, seed: u64) -> Vec<Link> {
    let s = &variant.scenario;
    let legacy = variant.topology.routing.is_none();
    variant
        .links
        .iter()
        .enumerate()
        .map(|(i, (down, up))| {
            let i64 = i as u64;
            // The two-node form keeps its historical streams.
            let (shadow_seed, radio_seed) = if legacy {
                two_node_radio_seeds(seed, i)
            } else {
                (mix(seed, (1 << 20) | i64), mix(seed, (2 << 20) | i64))
            };
            let ends = variant.topology.links[i].ends;
            let cap = |e: crate::scenario::topology::End| {
                variant.topology.nodes[e.node].ifaces[e.iface]
                    .rate
                    .unwrap_or(f64::INFINITY)
            };
            Link {
                caps: [cap(ends[0]), cap(ends[1])],
                medium: variant.topology.links[i].medium,
                reorder: down.reorder || up.reorder,
                wire: Default::default(),
                dirs: [Direction::new(down.clone()), Direction::new(up.clone())],
                rngs: [
                    Pcg64Mcg::seed_from_u64(mix(seed, 2 * i64)),
                    Pcg64Mcg::seed_from_u64(mix(seed, 2 * i64 + 1)),
                ],
                ends: [(ends[0].node, ends[0].iface), (ends[1].node, ends[1].iface)],
                addr_present: true,
                backup: s.links[i].backup,
                address: s.links[i].address,
                radio: variant.radios[i]
                    .clone()
                    .map(|spec| Radio::new(spec, shadow_seed, radio_seed)),
                covered: true,
                watch: SignalWatch::default(),
                since: Duration::ZERO,
                loss_epoch: 0,
                coverage: Coverage::default(),
                below_since: None,
                hellos: [false; 2],
            }
        })
        .collect()
}

/// A forwarding table: the first entry that matches wins (source-specific entries first, then
/// longer destination prefixes).
#[derive(Debug, Default)]
pub(super) struct Table {
    entries: Vec<Entry>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// (address, prefix length); length 0 with address 0: any source.
    src: (u32, u8),
    dst: (u32, u8),
    link: u16,
    dir: u8,
}

impl Table {
    fn set(&mut self, mut entries: Vec<Entry>) {
        // Stable: among equals the policy's order is kept.
        entries.sort_by_key(|e| (std::cmp::Reverse(e.src.1), std::cmp::Reverse(e.dst.1)));
        self.entries = entries;
    }

    /// The link direction for a packet from `src` to `dst`. Consecutive entries with the same
    /// prefixes are one multipath group: a flow (its two addresses) keeps one member, chosen
    /// by a hash as Linux does for multipath routes.
    pub fn lookup(&self, src: u32, dst: u32) -> Option<(usize, usize)> {
        let i = self
            .entries
            .iter()
            .position(|e| mask(src, e.src.1) == e.src.0 && mask(dst, e.dst.1) == e.dst.0)?;
        let first = self.entries[i];
        let n = self.entries[i..]
            .iter()
            .take_while(|e| e.src == first.src && e.dst == first.dst)
            .count();
        let e = if n == 1 {
            first
        } else {
            let h = (u64::from(src) << 32 | u64::from(dst)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            self.entries[i + (h >> 32) as usize % n]
        };
        Some((usize::from(e.link), usize::from(e.dir)))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

impl World<'_> {
    /// The fixed tables of the two-node form, or the routing policy's new tables.
    pub(super) fn install_tables(&mut self) {
        if self.legacy() {
            if self.nodes.iter().all(|n| n.table.len() == 0) {
                self.two_node_tables();
            }
            return;
        }
        while let Some((node, routes)) = self.routing.as_mut().and_then(|r| r.poll_table()) {
            let entries = routes
                .iter()
                .filter_map(|r| self.resolve(node, r))
                .collect();
            if let Some(n) = self.nodes.get_mut(node) {
                n.table.set(entries);
            }
        }
    }

    /// The client sends from the address of a link over that link (a source rule per link);
    /// the server answers over the link of the client's subnet.
    fn two_node_tables(&mut self) {
        let mut client = Vec::new();
        let mut server = Vec::new();
        for (l, link) in self.links.iter().enumerate() {
            let (cn, ci) = link.ends[1];
            let c = &self.topo.nodes[cn].ifaces[ci];
            client.push(Entry {
                src: (u32::from(c.addr), 32),
                dst: (0, 0),
                link: l as u16,
                dir: 1,
            });
            server.push(Entry {
                src: (0, 0),
                dst: (mask(u32::from(c.addr), c.prefix), c.prefix),
                link: l as u16,
                dir: 0,
            });
        }
        let (cn, sn) = (self.links[0].ends[1].0, self.links[0].ends[0].0);
        self.nodes[cn].table.set(client);
        self.nodes[sn].table.set(server);
    }

    /// The link of a route: from interface `out` of `node` to the neighbour address `via`.
    fn resolve(&self, node: usize, r: &Route) -> Option<Entry> {
        let (l, dir) = self.links.iter().enumerate().find_map(|(l, link)| {
            (0..2).find_map(|d| {
                let (from, to) = (link.ends[d], link.ends[1 - d]);
                let far = self.topo.nodes[to.0].ifaces[to.1].addr;
                (from == (node, r.out) && far == r.via).then_some((l, d))
            })
        })?;
        let src = r
            .src
            .map_or((0, 0), |p| (mask(u32::from(p.addr), p.len), p.len));
        Some(Entry {
            src,
            dst: (mask(u32::from(r.dst.addr), r.dst.len), r.dst.len),
            link: l as u16,
            dir: dir as u8,
        })
    }

    /// Sends a datagram from `node`: by its table to the next link, or dropped and counted.
    pub(super) fn forward(&mut self, node: usize, meta: Meta, data: Vec<u8>) {
        let Some((link, dir)) = self.nodes[node].table.lookup(meta.src, meta.dst) else {
            self.rec.net_drops.no_route += 1;
            return self.recycle(data);
        };
        self.send(link, dir, meta, data);
    }

    /// Offers a datagram to one direction of a link.
    pub(super) fn send(&mut self, link: usize, dir: usize, meta: Meta, data: Vec<u8>) {
        let Some(l) = self.links.get_mut(link) else {
            return self.recycle(data);
        };
        let sent = match l.medium {
            None => l.dirs[dir].send(self.now, data.len(), &mut l.rngs[dir]),
            Some(m) => {
                let air = &mut self.media[m];
                l.dirs[dir].send_shared(self.now, data.len(), &mut l.rngs[dir], air)
            }
        };
        let Ok(arrival) = sent else {
            return self.recycle(data);
        };
        l.dirs[dir].stats.data_sent += u64::from(meta.data);
        let epoch = l.dirs[dir].epoch;
        if let Some(c) = self.capture.as_deref_mut() {
            c.datagram(self.now, link, dir, meta.src, meta.dst, meta.ttl, &data);
        }
        let idx = self.slot(data, meta);
        let l = &mut self.links[link];
        if l.reorder {
            self.schedule(
                arrival,
                Kind::Deliver {
                    link: link as u16,
                    dir: dir as u8,
                    epoch,
                    packet: idx,
                },
            );
        } else {
            let was_empty = l.wire[dir].is_empty();
            l.wire[dir].push_back((arrival, epoch, idx));
            if was_empty {
                self.schedule(
                    arrival,
                    Kind::LinkHead {
                        link: link as u16,
                        dir: dir as u8,
                    },
                );
            }
        }
    }

    /// Stores a datagram in flight; returns its slot.
    fn slot(&mut self, data: Vec<u8>, meta: Meta) -> u32 {
        match self.free.pop() {
            Some(i) => {
                // The slot holds an empty vector: its buffer went back to the pool on delivery.
                self.packets[i as usize] = data;
                self.meta[i as usize] = meta;
                i
            }
            None => {
                self.packets.push(data);
                self.meta.push(meta);
                (self.packets.len() - 1) as u32
            }
        }
    }

    /// Returns a datagram buffer to the pool.
    pub(super) fn recycle(&mut self, mut data: Vec<u8>) {
        data.clear();
        self.spare.push(data);
    }

    /// Delivers every packet of a FIFO that has arrived, then waits for the next one.
    pub(super) fn link_head(&mut self, link: usize, dir: usize) {
        while let Some(&(at, epoch, packet)) = self.links[link].wire[dir].front() {
            if at > self.now {
                self.schedule(
                    at,
                    Kind::LinkHead {
                        link: link as u16,
                        dir: dir as u8,
                    },
                );
                return;
            }
            self.links[link].wire[dir].pop_front();
            self.head_deliveries += 1;
            self.deliver(link, dir, epoch, packet);
        }
    }

    /// A datagram arrives at the far end of a link direction: for the node itself, or
    /// forwarded.
    pub(super) fn deliver(&mut self, link: usize, dir: usize, epoch: u32, packet: u32) {
        let data = std::mem::take(&mut self.packets[packet as usize]);
        let mut meta = self.meta[packet as usize];
        self.free.push(packet);
        let (node, _) = self.links[link].ends[1 - dir];
        let alive = self.links[link].dirs[dir].epoch == epoch;
        if meta.hello {
            if alive {
                self.links[link].hellos[dir] = true;
            }
            return self.recycle(data);
        }
        if !self.nodes[node].owns(meta.dst) {
            // A relay: forward (a packet lost on the way is just lost).
            if !alive {
                return self.recycle(data);
            }
            meta.ttl = meta.ttl.saturating_sub(1);
            if meta.ttl == 0 {
                self.rec.net_drops.ttl += 1;
                return self.recycle(data);
            }
            return self.forward(node, meta, data);
        }
        let Some(ep) = self.endpoint_at(node, meta.flow) else {
            self.rec.net_drops.no_endpoint += 1;
            return self.recycle(data);
        };
        if alive {
            self.receive(ep, meta, &data);
        }
        // Otherwise the link went down while the packet was queued or on the wire.
        self.recycle(data);
        self.pump(ep);
    }

    /// The endpoint of application `flow` on `node`.
    fn endpoint_at(&self, node: usize, flow: u16) -> Option<usize> {
        let f = usize::from(flow);
        [2 * f, 2 * f + 1]
            .into_iter()
            .find(|&e| self.eps.get(e).is_some_and(|x| x.node == node))
    }

    /// A datagram from endpoint `ep`'s connection, addressed by its path's address ids;
    /// `stream` tells whether it carries stream data.
    pub(super) fn originate(
        &mut self,
        ep: usize,
        local: u8,
        remote: u8,
        stream: bool,
        data: Vec<u8>,
    ) {
        let e = &self.eps[ep];
        let peer = &self.eps[e.peer];
        let (Some(&(src, _)), Some(&(dst, _))) = (
            e.locals.get(usize::from(local)),
            peer.locals.get(usize::from(remote)),
        ) else {
            self.rec.net_drops.no_endpoint += 1;
            return self.recycle(data);
        };
        let meta = Meta {
            src: u32::from(src),
            dst: u32::from(dst),
            flow: (ep / 2) as u16,
            cid: if e.client { local } else { remote },
            ttl: TTL,
            hello: false,
            data: stream,
        };
        self.forward(e.node, meta, data);
    }

    /// Hellos: the outcome of the last interval to the routing policy, new hellos on every
    /// link direction.
    pub(super) fn hello(&mut self) {
        let Some(every) = self.routing.as_ref().and_then(|r| r.hello_interval()) else {
            return;
        };
        let now = self.now;
        for l in 0..self.links.len() {
            let ends = self.topo.links[l].ends;
            for d in 0..2 {
                let o = Observation {
                    link: l,
                    from: ends[d],
                    to: ends[1 - d],
                    heard: std::mem::take(&mut self.links[l].hellos[d]),
                    rss_dbm: self.links[l].radio.as_ref().and_then(|r| r.rss),
                };
                if let Some(r) = &mut self.routing {
                    r.observe(now, &o);
                }
            }
        }
        for l in 0..self.links.len() {
            for d in 0..2 {
                let (n, i) = self.links[l].ends[d];
                let meta = Meta {
                    src: u32::from(self.topo.nodes[n].ifaces[i].addr),
                    dst: u32::from(Ipv4Addr::BROADCAST),
                    hello: true,
                    ttl: 1,
                    ..Meta::default()
                };
                self.send_hello(l, d, meta);
            }
        }
        self.schedule(now + every, Kind::Hello);
        self.install_tables();
        self.arm_routing();
    }

    /// A hello goes ahead of the link's queue (control traffic has priority) and arrives
    /// unless the link is down or loses it.
    fn send_hello(&mut self, link: usize, dir: usize, meta: Meta) {
        let l = &mut self.links[link];
        let Ok(arrival) = l.dirs[dir].control(self.now, HELLO_BYTES, &mut l.rngs[dir]) else {
            return;
        };
        let epoch = l.dirs[dir].epoch;
        let data = self.spare.pop().unwrap_or_default();
        let idx = self.slot(data, meta);
        self.schedule(
            arrival,
            Kind::Deliver {
                link: link as u16,
                dir: dir as u8,
                epoch,
                packet: idx,
            },
        );
    }

    /// Schedules the routing policy's next timer.
    pub(super) fn arm_routing(&mut self) {
        if let Some(t) = self.routing.as_ref().and_then(|r| r.poll_timeout())
            && self.route_timer.is_none_or(|cur| t < cur)
        {
            self.route_timer = Some(t);
            self.schedule(t.max(self.now), Kind::RouteTimer);
        }
    }
}
