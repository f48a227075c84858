//! The discrete-event engine: a topology of nodes running `braid_core::Connection` endpoints,
//! joined by links, in virtual time.
//!
//! ```text
//!   app ─write→ Connection ─poll_transmit→ node's table ─→ link direction ─(arrival)→
//!     node: own address? → Connection (peer) ─read→ app → RunRecord
//!           else        → node's table ─→ next link (hop by hop, TTL)
//!   radio beacon ─RSS→ link rate/loss/up;  hellos ─→ routing policy ─tables→ nodes
//!   client node's path manager ⇄ ConnAdapter ⇄ its connections
//! ```
//! A node has interfaces (an address and subnet each), connection endpoints, a forwarding
//! table, optionally a path manager (when it opens connections) and a position. The two-node
//! form of a scenario is a client and a server with one link per interface and fixed tables.
//! Each input to an endpoint (a datagram, a timer, an application tick, a scripted action, a
//! path-manager command) is followed by `pump`: connection events (fed to the node's path
//! manager), its commands, application reads and writes, every datagram the connection wants
//! to send, then its next timer. Same variant + same seed = same run, always: no wall clock, no
//! hash-map iteration, seeded generators only.
//!
//! A [`Capture`] sink, when given, sees every datagram a link direction accepts (relayed ones
//! on every link they cross) with its simulated time and addresses; it cannot change the run.
//!
//! Files: [`net`] (links, forwarding, hellos), [`host`] (endpoints, path managers), [`app`]
//! (applications), [`coverage`] (radio, scripted link and address changes), [`routing`] (the
//! routing policy interface and the built-in shortest-path policy), [`bound`] (what the
//! measured CBR stream's delays could at best have been).

mod app;
mod bound;
mod coverage;
mod host;
mod manet;
mod net;
pub mod routing;
mod tunnel;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use braid_core::Instant;

use crate::mobility::Mobility;
pub use crate::record::{
    FlowRecord, LossEvent, NetDrops, PmDecision, Recovery, RunOptions, RunRecord, Sample,
};
use crate::scenario::{Topology, Variant};
pub use coverage::{Beacon, radio_beacons};

use app::App;
use host::{Endpoint, Node};
use net::{Link, Meta};

/// Where a run's packet capture goes (`braid sim --pcap`): sans-IO, the engine only calls it.
pub trait Capture {
    /// Link `link`'s direction `dir` (`dirs[0]` carries `ends[0]` → `ends[1]`) accepted a
    /// braid datagram at `t` from `src` to `dst` (IPv4 addresses as `u32`), with hop limit
    /// `ttl` left. Datagrams the direction drops (down, queue full, loss) are not offered;
    /// routing hellos are not braid datagrams and are not offered either.
    #[allow(clippy::too_many_arguments)]
    fn datagram(
        &mut self,
        t: Instant,
        link: usize,
        dir: usize,
        src: u32,
        dst: u32,
        ttl: u8,
        data: &[u8],
    );
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A packet on a link that may reorder (jitter with `reorder = true`).
    Deliver {
        link: u16,
        dir: u8,
        epoch: u32,
        packet: u32,
    },
    /// The first packet waiting in a link direction's FIFO arrives.
    LinkHead {
        link: u16,
        dir: u8,
    },
    Timer {
        ep: u16,
    },
    PmTimer {
        node: u16,
    },
    AppTick {
        flow: u16,
    },
    /// A further application's connection opens.
    Open {
        flow: u16,
    },
    Action(u32),
    /// A radio beacon on a link: a new signal sample.
    Beacon {
        link: u16,
    },
    /// Liveness probes on every link (`connection.liveness_probe`).
    Probe,
    /// The network manager notices a lost address (after the detection delay).
    AddrGone {
        link: u16,
        epoch: u32,
    },
    Sample,
    /// Hellos on every link, and the last interval's outcomes to the routing policy.
    Hello,
    RouteTimer,
}

/// A queued event, ordered by (time, insertion order) packed into one key.
#[derive(Debug, Clone, Copy)]
struct Scheduled {
    key: u128,
    kind: Kind,
}

impl Scheduled {
    fn at(&self) -> Instant {
        Instant::from_micros((self.key >> 64) as u64)
    }
}

impl PartialEq for Scheduled {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.key.cmp(&o.key)
    }
}

pub struct World<'a> {
    variant: &'a Variant,
    topo: &'a Topology,
    opts: RunOptions,
    now: Instant,
    end: Instant,
    queue: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
    nodes: Vec<Node>,
    links: Vec<Link>,
    /// When each shared medium is free again, ns.
    media: Vec<u64>,
    /// Connection endpoints: application k's client is 2k, its server 2k + 1.
    eps: Vec<Endpoint>,
    apps: Vec<App>,
    routing: Option<Box<dyn routing::RoutingPolicy>>,
    route_timer: Option<Instant>,
    /// The vehicle of the two-node form.
    mobility: Option<Mobility>,
    /// Datagrams in flight, by slot, with their addresses.
    packets: Vec<Vec<u8>>,
    meta: Vec<Meta>,
    /// Free slots of `packets`.
    free: Vec<u32>,
    /// Empty buffers to reuse.
    spare: Vec<Vec<u8>>,
    rec: RunRecord,
    /// The measured stream's delay bounds (see [`bound`]).
    shadow: Option<bound::StreamShadow>,
    scratch: Vec<u8>,
    chunk: Vec<u8>,
    sample_every: Duration,
    events: u64,
    /// Packets delivered from link FIFOs (without a heap entry of their own).
    head_deliveries: u64,
    head_events: u64,
    capture: Option<&'a mut dyn Capture>,
    /// `[tunnel]`: acknowledgements travelling as pure TCP acknowledgements.
    tunnel_acks: tunnel::AckStore,
}

/// Runs one variant with one seed.
pub fn run(variant: &Variant, seed: u64) -> RunRecord {
    run_with(variant, seed, RunOptions::default())
}

pub fn run_with(variant: &Variant, seed: u64, opts: RunOptions) -> RunRecord {
    let mut w = World::new(variant, seed, opts);
    w.run();
    w.finish()
}

/// As [`run_with`], showing every datagram a link direction accepts to `capture`. The record
/// is the same as without it.
pub fn run_captured(
    variant: &Variant,
    seed: u64,
    opts: RunOptions,
    capture: &mut dyn Capture,
) -> RunRecord {
    let mut w = World::new(variant, seed, opts);
    w.capture = Some(capture);
    w.run();
    w.finish()
}

impl<'a> World<'a> {
    pub fn new(variant: &'a Variant, seed: u64, opts: RunOptions) -> Self {
        let s = &variant.scenario;
        let topo = &variant.topology;
        let links = net::links(variant, seed);
        let nodes = host::nodes(variant, seed);
        let eps = host::endpoints(variant);
        let apps = topo
            .apps
            .iter()
            .enumerate()
            .map(|(k, a)| App::new(a, k, topo.routing.is_some()))
            .collect();
        let legacy = topo.routing.is_none();
        let link_names = variant.link_names();
        let thresholds = if legacy {
            s.links.iter().map(|l| l.threshold_dbm).collect()
        } else {
            vec![None; link_names.len()]
        };
        let rec = RunRecord {
            duration: s.duration.0,
            app_start: s.app.start.0,
            link_names,
            thresholds,
            ..RunRecord::default()
        };
        let mobility = vehicle(variant, seed);
        World {
            variant,
            topo,
            opts,
            now: Instant::ZERO,
            end: Instant::ZERO + s.duration.0,
            queue: BinaryHeap::new(),
            seq: 0,
            nodes,
            links,
            media: vec![0; topo.media.len()],
            eps,
            apps,
            routing: routing::policy(topo),
            route_timer: None,
            mobility,
            packets: Vec::new(),
            meta: Vec::new(),
            free: Vec::new(),
            spare: Vec::new(),
            rec,
            shadow: None,
            scratch: vec![0; 1 << 16],
            chunk: vec![0; 1 << 16],
            sample_every: s.metrics.sample.0.max(Duration::from_millis(1)),
            events: 0,
            head_deliveries: 0,
            head_events: 0,
            capture: None,
            tunnel_acks: Default::default(),
        }
    }

    /// The two-node form (fixed tables, the client's interfaces are the links).
    fn legacy(&self) -> bool {
        self.topo.routing.is_none()
    }

    fn schedule(&mut self, at: Instant, kind: Kind) {
        self.seq += 1;
        self.queue.push(Reverse(Scheduled {
            key: (u128::from(at.micros()) << 64) | u128::from(self.seq),
            kind,
        }));
    }

    pub fn run(&mut self) {
        self.install_tables();
        // Path managers learn their node's interfaces and addresses.
        for n in 0..self.nodes.len() {
            self.announce_ifaces(n);
        }
        // Every application's client opens its first path; further applications when they
        // start (as nc connects when it runs).
        self.open(0);
        for f in 1..self.apps.len() {
            let at = self.apps[f].start;
            self.schedule(at, Kind::Open { flow: f as u16 });
        }
        for i in 0..self.variant.timeline.len() {
            let at = Instant::ZERO + self.variant.timeline[i].0;
            self.schedule(at, Kind::Action(i as u32));
        }
        for l in 0..self.links.len() {
            if self.links[l].radio.is_some() || self.variant.signals[l].is_some() {
                self.schedule(Instant::ZERO, Kind::Beacon { link: l as u16 });
            }
        }
        let start = self.apps[0].start;
        self.schedule(start, Kind::AppTick { flow: 0 });
        self.schedule(Instant::ZERO, Kind::Sample);
        if let Some(every) = self.variant.scenario.connection.liveness_probe {
            self.schedule(Instant::ZERO + every.0, Kind::Probe);
        }
        if let Some(h) = self.routing.as_ref().and_then(|r| r.hello_interval()) {
            self.schedule(Instant::ZERO + h, Kind::Hello);
        }
        self.arm_routing();
        self.pump(0);
        let mut same_instant = 0u32;
        while let Some(Reverse(ev)) = self.queue.pop() {
            if ev.at() > self.end {
                break;
            }
            if ev.at() == self.now {
                same_instant += 1;
                // A connection that keeps asking to be woken at the same instant is a bug; stop
                // with the evidence rather than spin forever.
                assert!(
                    same_instant < 10_000_000,
                    "no progress: 10 million events at t = {:?} ({:?})",
                    self.now,
                    ev.kind
                );
            } else {
                same_instant = 0;
            }
            self.now = ev.at();
            self.events += 1;
            match ev.kind {
                Kind::Deliver {
                    link,
                    dir,
                    epoch,
                    packet,
                } => self.deliver(link as usize, dir as usize, epoch, packet),
                Kind::LinkHead { link, dir } => {
                    self.head_events += 1;
                    self.link_head(link as usize, dir as usize)
                }
                Kind::Timer { ep } => self.timer(ep as usize),
                Kind::PmTimer { node } => self.pm_timer(node as usize),
                Kind::AppTick { flow } => self.app_tick(flow as usize),
                Kind::Open { flow } => {
                    self.open(flow as usize);
                    self.pump(2 * flow as usize);
                    self.app_tick(flow as usize);
                }
                Kind::Action(i) => self.action(i as usize),
                Kind::Beacon { link } => self.beacon(link as usize),
                Kind::Probe => self.probe(),
                Kind::AddrGone { link, epoch } => self.addr_gone(link as usize, epoch),
                Kind::Sample => {
                    self.sample();
                    let next = self.now + self.sample_every;
                    self.schedule(next, Kind::Sample);
                }
                Kind::Hello => self.hello(),
                Kind::RouteTimer => {
                    if self.route_timer.is_some_and(|t| t <= self.now) {
                        self.route_timer = None;
                    }
                    if let Some(r) = &mut self.routing
                        && r.poll_timeout().is_some_and(|t| t <= self.now)
                    {
                        r.handle_timeout(self.now);
                    }
                    self.install_tables();
                    self.arm_routing();
                }
            }
        }
        self.now = self.end;
        self.sample();
    }

    /// Pumps every endpoint, in order (after an input that concerns them all).
    fn pump_all(&mut self) {
        for e in 0..self.eps.len() {
            self.pump(e);
        }
    }

    /// The record of the run (after [`World::run`]).
    pub fn finish(mut self) -> RunRecord {
        let (snd, rcv) = (self.apps[0].sender, self.apps[0].receiver);
        if std::env::var_os("BRAID_DEBUG_END").is_some() {
            for (n, e) in [("client", 0), ("server", 1)] {
                let c = &self.eps[e].conn;
                eprintln!("{n}: {} stats {:?}", c.debug_send_state(), c.stats());
                for p in c.paths() {
                    eprintln!("  {p:?}");
                }
            }
        }
        self.rec.sender = self.eps[snd].conn.stats().clone();
        self.rec.receiver = self.eps[rcv].conn.stats().clone();
        let client_side = snd == 0;
        self.rec.sender_paths = self.eps[snd]
            .conn
            .paths()
            .map(|p| {
                let l = if client_side { p.local.0 } else { p.remote.0 };
                (l as usize, p.stats)
            })
            .collect();
        self.rec.link_stats = self
            .links
            .iter()
            .map(|l| (l.dirs[0].stats.clone(), l.dirs[1].stats.clone()))
            .collect();
        self.rec.link_bytes = self.link_rx();
        self.rec.flows = self.apps.iter().map(|a| a.record()).collect();
        // Each packet delivery counts as one event, whether it had a queue entry of its own.
        self.rec.events = self.events - self.head_events + self.head_deliveries;
        self.rec
    }
}

/// SplitMix64 step: independent seeds for each generator from one scenario seed.
/// The two-node form's vehicle on its route, if the scenario has one.
fn vehicle(variant: &Variant, seed: u64) -> Option<Mobility> {
    let s = &variant.scenario;
    variant.route.as_ref().map(|r| {
        Mobility::new(
            r,
            s.mobility.as_ref().map_or(1.0, |m| m.speed_kmh / 3.6),
            s.duration.0,
            seed,
        )
    })
}

fn mix(seed: u64, stream: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(stream + 1));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
