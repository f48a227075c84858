//! The discrete-event engine: two hosts running `braid_core::Connection`, joined by one link per
//! interface, in virtual time. The client's paths are managed by a `braid_pm` path manager.
//!
//! ```text
//!   app (sender) ─write→ Connection ─poll_transmit→ Link[i] direction ─(arrival)→
//!   Connection (peer) ─read→ app (receiver) → RunRecord
//!   radio beacon ─RSS→ link rate/loss/up, path manager ─commands→ client Connection
//! ```
//! Each input to a host (a datagram, a timer, an application tick, a scripted action, a path
//! manager command) is followed by `pump`: connection events (fed to the path manager), its
//! commands, application reads and writes, every datagram the connection wants to send, then
//! its next timer. Same variant + same seed = same run, always: no wall clock, no hash-map
//! iteration, seeded generators only.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use braid_core::wire::{self, Frame};
use braid_core::{AddrId, Connection, ConnectionStats, Event, Instant, PathId, PathStats, Side};
use braid_pm::{self as pm, PathManager};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::link::{DirStats, Direction};
use crate::mobility::Mobility;
use crate::radio::{RadioSpec, Shadowing};
use crate::scenario::{Action, AddressPolicy, AppDirection, AppKind, Variant};

const CLIENT: usize = 0;
const SERVER: usize = 1;
/// The connection as the path manager knows it.
const CONN: pm::ConnId = pm::ConnId(1);

/// One sample of the time series.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    pub t: Duration,
    /// In-order bytes delivered to the receiving application so far.
    pub delivered: u64,
    /// Stream bytes received per link (duplicates included) so far.
    pub link_rx: Vec<u64>,
    /// Sender's congestion window per link (0 without a path).
    pub link_cwnd: Vec<u64>,
    /// Sender's smoothed RTT per link, µs (0 without a path).
    pub link_srtt_us: Vec<u64>,
    /// Receiver's reorder-buffer occupancy.
    pub ofo_bytes: u64,
    /// Sender's reinjected segments so far.
    pub reinjected: u64,
    /// Sender's DATA segments so far.
    pub data_packets: u64,
}

/// A connection-loss event: a link blocked, its address lost, or its radio out of range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossEvent {
    pub t: Duration,
    pub link: usize,
    /// When the link's address or signal returned before this event (or the run start).
    pub since: Duration,
    /// Stream bytes the sender had sent when the event happened: the handover is over once the
    /// receiver has all of them in order.
    pub sent_before: u64,
}

/// A link's smoothed signal rose above its threshold plus hysteresis (the path manager may use
/// it again), when data first arrived over the link afterwards, and when the signal fell
/// below the threshold again before that (the chance was missed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recovery {
    pub t: Duration,
    pub link: usize,
    pub first_data: Option<Duration>,
    pub lost: Option<Duration>,
}

/// A decision of the client's path manager.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PmDecision {
    pub t: Duration,
    pub link: usize,
    /// `true`: the link was demoted (backup or removed); `false`: promoted (created or active).
    pub demote: bool,
    /// A backup-flag change (counted as a flip).
    pub flip: bool,
}

/// Everything a run recorded; metrics are computed from it.
#[derive(Debug, Clone, Default)]
pub struct RunRecord {
    pub duration: Duration,
    pub app_start: Duration,
    /// In-order deliveries at the receiving application: (time µs, bytes).
    pub deliveries: Vec<(u64, u32)>,
    /// CBR messages delivered: (generation time µs, one-way delay µs).
    pub cbr: Vec<(u64, u32)>,
    /// Generation time (µs) of every CBR message the application generated, delivered or not.
    pub cbr_generated: Vec<u64>,
    pub samples: Vec<Sample>,
    pub loss_events: Vec<LossEvent>,
    pub recoveries: Vec<Recovery>,
    pub link_names: Vec<String>,
    pub thresholds: Vec<Option<f64>>,
    /// Signal samples: (time µs, link, raw dBm, smoothed dBm).
    pub rss: Vec<(u64, u8, f32, f32)>,
    pub decisions: Vec<PmDecision>,
    /// Stream bytes received per link at the end (duplicates included).
    pub link_bytes: Vec<u64>,
    /// Data sequence numbers received (time µs, link, dsn), when traced.
    pub dsn: Vec<(u64, u8, u64)>,
    /// File transfer completion time.
    pub completed: Option<Duration>,
    pub sender: ConnectionStats,
    pub receiver: ConnectionStats,
    /// Sender's path counters at the end, by link.
    pub sender_paths: Vec<(usize, PathStats)>,
    /// Link counters: (server→client, client→server).
    pub link_stats: Vec<(DirStats, DirStats)>,
    /// Events processed by the engine.
    pub events: u64,
}

/// Options of a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Record the data sequence number of every data packet received (for plots).
    pub trace_dsn: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A packet on a link that may reorder (jitter with `reorder = true`).
    Deliver {
        host: u8,
        link: u8,
        epoch: u32,
        packet: u32,
    },
    /// The first packet waiting in a link direction's FIFO arrives.
    LinkHead {
        link: u8,
        dir: u8,
    },
    Timer {
        host: u8,
    },
    PmTimer,
    AppTick,
    Action(u32),
    /// A radio beacon on a link: a new signal sample.
    Beacon {
        link: u8,
    },
    /// Liveness probes on every link (`connection.liveness_probe`).
    Probe,
    /// The network manager notices a lost address (after the detection delay).
    AddrGone {
        link: u8,
        epoch: u32,
    },
    Sample,
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

/// A packet on the wire: arrival time, link epoch at sending, slot in `packets`.
type InFlight = (Instant, u32, u32);

struct Radio {
    spec: RadioSpec,
    shadowing: Shadowing,
    rng: Pcg64Mcg,
    /// Replay position, for signal replays.
    replay_idx: usize,
}

struct Link {
    /// [server→client, client→server]
    dirs: [Direction; 2],
    rngs: [Pcg64Mcg; 2],
    /// Packets on the wire per direction, in arrival order (links that keep order only: the
    /// event queue then holds just each FIFO's head).
    wire: [VecDeque<InFlight>; 2],
    reorder: bool,
    /// The client's address on this link exists.
    addr_present: bool,
    backup: bool,
    address: AddressPolicy,
    radio: Option<Radio>,
    /// Up as far as the radio (or the script) is concerned.
    covered: bool,
    /// Smoothed signal (the link's α), for the recovery metric.
    smoothed: Option<f64>,
    above: bool,
    /// When the link's signal or address last came back.
    since: Duration,
    /// Incremented at every loss, to cancel stale address removals.
    loss_epoch: u32,
    /// Consecutive beacons below (above) the cut-off, and when the current run below began
    /// with the stream position then.
    below: u32,
    above_run: u32,
    below_since: Option<(Instant, u64)>,
}

/// Beacons below (above) the cut-off before the link counts as out of (back in) coverage: 1 s
/// at 10 Hz, a beacon-loss timeout.
const LOSS_BEACONS: u32 = 10;
const BACK_BEACONS: u32 = 10;

struct Host {
    conn: Connection,
    /// Earliest timer event pending in the queue for this host.
    timer: Option<Instant>,
}

/// The application at both ends.
struct App {
    kind: AppKind,
    sender: usize,
    start: Instant,
    stop: Option<Instant>,
    /// CBR: message size, interval.
    size: usize,
    interval_ns: u64,
    next_seq: u64,
    /// CBR messages generated but not yet written: (seq, generation time).
    backlog: VecDeque<(u64, Instant)>,
    /// File: bytes still to write.
    remaining: Option<u64>,
    file_total: Option<u64>,
    written: u64,
    // Receiver side.
    msg_offset: usize,
    header: [u8; 16],
    delivered: u64,
}

pub struct World<'a> {
    variant: &'a Variant,
    opts: RunOptions,
    now: Instant,
    end: Instant,
    queue: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
    hosts: [Host; 2],
    links: Vec<Link>,
    pm: pm::Manager,
    pm_timer: Option<Instant>,
    /// The path manager saw an event or a timeout since its timer was last read.
    pm_dirty: bool,
    mobility: Option<Mobility>,
    /// Datagrams in flight, by slot.
    packets: Vec<Vec<u8>>,
    /// Free slots of `packets`.
    free: Vec<u32>,
    /// Empty buffers to reuse.
    spare: Vec<Vec<u8>>,
    app: App,
    rec: RunRecord,
    scratch: Vec<u8>,
    chunk: Vec<u8>,
    sample_every: Duration,
    events: u64,
    /// Packets delivered from link FIFOs (without a heap entry of their own).
    head_deliveries: u64,
    head_events: u64,
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

/// The client's address on link `i` (10.0.i.2) and the server's (10.0.i.1).
fn client_ip(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, i as u8, 2))
}

impl<'a> World<'a> {
    pub fn new(variant: &'a Variant, seed: u64, opts: RunOptions) -> Self {
        let s = &variant.scenario;
        let links: Vec<Link> = variant
            .links
            .iter()
            .enumerate()
            .map(|(i, (down, up))| Link {
                reorder: down.reorder || up.reorder,
                wire: Default::default(),
                dirs: [Direction::new(down.clone()), Direction::new(up.clone())],
                rngs: [
                    Pcg64Mcg::seed_from_u64(mix(seed, 2 * i as u64)),
                    Pcg64Mcg::seed_from_u64(mix(seed, 2 * i as u64 + 1)),
                ],
                addr_present: true,
                backup: s.links[i].backup,
                address: s.links[i].address,
                radio: variant.radios[i].clone().map(|spec| Radio {
                    shadowing: Shadowing::new(
                        mix(seed, 100 + i as u64),
                        spec.shadowing_db,
                        spec.decorrelation_m,
                    ),
                    rng: Pcg64Mcg::seed_from_u64(mix(seed, 200 + i as u64)),
                    spec,
                    replay_idx: 0,
                }),
                covered: true,
                smoothed: None,
                above: false,
                since: Duration::ZERO,
                loss_epoch: 0,
                below: 0,
                above_run: 0,
                below_since: None,
            })
            .collect();
        let hosts = [
            Host {
                conn: Connection::new(variant.config.clone(), Side::Client, Instant::ZERO),
                timer: None,
            },
            Host {
                conn: Connection::new(variant.config.clone(), Side::Server, Instant::ZERO),
                timer: None,
            },
        ];
        let a = &s.app;
        let size = a.size.0 as usize;
        let rate = match (a.rate, a.bitrate) {
            (Some(r), _) => r,
            (None, Some(b)) => b.0 / (size as f64 * 8.0),
            _ => 0.0,
        };
        let app = App {
            kind: a.kind,
            sender: match a.direction {
                AppDirection::Down => SERVER,
                AppDirection::Up => CLIENT,
            },
            start: Instant::ZERO + a.start.0,
            stop: a.stop.map(|d| Instant::ZERO + d.0),
            size,
            interval_ns: if rate > 0.0 { (1e9 / rate) as u64 } else { 0 },
            next_seq: 0,
            backlog: Default::default(),
            remaining: a.bytes.map(|b| b.0),
            file_total: a.bytes.map(|b| b.0),
            written: 0,
            msg_offset: 0,
            header: [0; 16],
            delivered: 0,
        };
        let rec = RunRecord {
            duration: s.duration.0,
            app_start: a.start.0,
            link_names: s.links.iter().map(|l| l.name.clone()).collect(),
            thresholds: s.links.iter().map(|l| l.threshold_dbm).collect(),
            ..RunRecord::default()
        };
        let mobility = variant.route.as_ref().map(|r| {
            Mobility::new(
                r,
                s.mobility.as_ref().map_or(1.0, |m| m.speed_kmh / 3.6),
                s.duration.0,
                seed,
            )
        });
        World {
            variant,
            opts,
            now: Instant::ZERO,
            end: Instant::ZERO + s.duration.0,
            queue: BinaryHeap::new(),
            seq: 0,
            hosts,
            links,
            pm: pm::Manager::new(variant.pm.clone()).expect("checked when the scenario loaded"),
            pm_timer: None,
            pm_dirty: true,
            mobility,
            packets: Vec::new(),
            free: Vec::new(),
            spare: Vec::new(),
            app,
            rec,
            scratch: vec![0; 1 << 16],
            chunk: vec![0; 1 << 16],
            sample_every: s.metrics.sample.0.max(Duration::from_millis(1)),
            events: 0,
            head_deliveries: 0,
            head_events: 0,
        }
    }

    fn schedule(&mut self, at: Instant, kind: Kind) {
        self.seq += 1;
        self.queue.push(Reverse(Scheduled {
            key: (u128::from(at.micros()) << 64) | u128::from(self.seq),
            kind,
        }));
    }

    pub fn run(&mut self) {
        // The path manager learns the client's interfaces and addresses.
        for i in 0..self.links.len() {
            let name = self.rec.link_names[i].clone();
            self.pm_event(pm::Event::IfaceNew {
                iface: pm::IfaceId(i as u32),
                name,
                up: true,
            });
            self.pm_event(pm::Event::LocalAddrNew {
                iface: pm::IfaceId(i as u32),
                id: pm::AddrId(i as u8),
                addr: Some(client_ip(i)),
            });
        }
        // The client opens the first path on the first link; the path manager adds the others
        // once the connection is established (as MPTCP does after MP_CAPABLE).
        let backup = self.links[0].backup;
        let _ = self.hosts[CLIENT]
            .conn
            .open_path(Instant::ZERO, AddrId(0), AddrId(0), backup);
        self.pm_event(pm::Event::ConnectionCreated {
            conn: CONN,
            local: endpoint(0),
            remote: server_endpoint(),
            iface: Some(pm::IfaceId(0)),
            initiator: true,
        });
        for i in 0..self.variant.timeline.len() {
            let at = Instant::ZERO + self.variant.timeline[i].0;
            self.schedule(at, Kind::Action(i as u32));
        }
        for l in 0..self.links.len() {
            if self.links[l].radio.is_some() || self.variant.signals[l].is_some() {
                self.schedule(Instant::ZERO, Kind::Beacon { link: l as u8 });
            }
        }
        self.schedule(self.app.start, Kind::AppTick);
        self.schedule(Instant::ZERO, Kind::Sample);
        if let Some(every) = self.variant.scenario.connection.liveness_probe {
            self.schedule(Instant::ZERO + every.0, Kind::Probe);
        }
        self.pump(CLIENT);
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
                    host,
                    link,
                    epoch,
                    packet,
                } => self.deliver(host as usize, link as usize, epoch, packet),
                Kind::LinkHead { link, dir } => {
                    self.head_events += 1;
                    self.link_head(link as usize, dir as usize)
                }
                Kind::Timer { host } => {
                    let host = host as usize;
                    if self.hosts[host].timer.is_some_and(|t| t <= self.now) {
                        self.hosts[host].timer = None;
                    }
                    let conn = &mut self.hosts[host].conn;
                    if conn.poll_timeout().is_some_and(|t| t <= self.now) {
                        conn.handle_timeout(self.now);
                    }
                    self.pump(host);
                }
                Kind::PmTimer => {
                    if self.pm_timer.is_some_and(|t| t <= self.now) {
                        self.pm_timer = None;
                    }
                    if self.pm.poll_timeout().is_some_and(|t| t <= self.now) {
                        self.pm.handle_timeout(self.now);
                        self.pm_dirty = true;
                    }
                    self.pump(CLIENT);
                }
                Kind::AppTick => self.app_tick(),
                Kind::Action(i) => self.action(i as usize),
                Kind::Beacon { link } => self.beacon(link as usize),
                Kind::Probe => {
                    // A probe answered over a link that works both ways: each end hears its
                    // peer is alive.
                    if self.links.iter().any(|l| l.dirs.iter().all(|d| d.is_up())) {
                        for h in [CLIENT, SERVER] {
                            self.hosts[h].conn.peer_alive(self.now);
                        }
                        self.pump(CLIENT);
                        self.pump(SERVER);
                    }
                    if let Some(every) = self.variant.scenario.connection.liveness_probe {
                        self.schedule(self.now + every.0, Kind::Probe);
                    }
                }
                Kind::AddrGone { link, epoch } => self.addr_gone(link as usize, epoch),
                Kind::Sample => {
                    self.sample();
                    let next = self.now + self.sample_every;
                    self.schedule(next, Kind::Sample);
                }
            }
        }
        self.now = self.end;
        self.sample();
    }

    /// Delivers every packet of a FIFO that has arrived, then waits for the next one.
    fn link_head(&mut self, link: usize, dir: usize) {
        // Direction 0 carries server→client traffic.
        let host = if dir == 0 { CLIENT } else { SERVER };
        while let Some(&(at, epoch, packet)) = self.links[link].wire[dir].front() {
            if at > self.now {
                self.schedule(
                    at,
                    Kind::LinkHead {
                        link: link as u8,
                        dir: dir as u8,
                    },
                );
                return;
            }
            self.links[link].wire[dir].pop_front();
            self.head_deliveries += 1;
            self.deliver(host, link, epoch, packet);
        }
    }

    fn deliver(&mut self, host: usize, link: usize, epoch: u32, packet: u32) {
        let data = std::mem::take(&mut self.packets[packet as usize]);
        self.free.push(packet);
        // Direction 0 carries server→client traffic, i.e. packets for the client.
        let dir = if host == CLIENT { 0 } else { 1 };
        if self.links[link].dirs[dir].epoch == epoch {
            let receiver = host != self.app.sender;
            if receiver && (self.opts.trace_dsn || self.awaiting_recovery(link)) {
                self.trace_data(link, &data);
            }
            let _ = self.hosts[host].conn.handle_datagram(self.now, &data);
        }
        // Otherwise the link went down while the packet was queued or on the wire.
        self.recycle(data);
        self.pump(host);
    }

    fn awaiting_recovery(&self, link: usize) -> bool {
        self.rec
            .recoveries
            .last_mut_for(link)
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

    fn app_tick(&mut self) {
        let s = self.app.sender;
        if self.app.stop.is_some_and(|t| self.now >= t) {
            return;
        }
        if self.app.kind == AppKind::Cbr {
            let seq = self.app.next_seq;
            self.app.next_seq += 1;
            self.app.backlog.push_back((seq, self.now));
            self.rec.cbr_generated.push(self.now.micros());
            let next =
                self.app.start + Duration::from_nanos(self.app.interval_ns.saturating_mul(seq + 1));
            self.schedule(next, Kind::AppTick);
        }
        self.pump(s);
    }

    fn action(&mut self, i: usize) {
        let (_, l, action) = self.variant.timeline[i];
        match action {
            Action::Down => self.link_lost(l, false),
            Action::Up => self.link_back(l, false),
            Action::AddrLost => self.link_lost(l, true),
            Action::AddrBack => self.link_back(l, true),
            Action::Backup | Action::Primary => {
                let backup = action == Action::Backup;
                self.links[l].backup = backup;
                let addr = AddrId(l as u8);
                let ids: Vec<_> = self.hosts[CLIENT]
                    .conn
                    .paths()
                    .filter(|p| p.local == addr)
                    .map(|p| p.id)
                    .collect();
                for id in ids {
                    let _ = self.hosts[CLIENT].conn.set_backup(id, backup);
                }
            }
        }
        self.pump(CLIENT);
        self.pump(SERVER);
    }

    /// The link stops carrying packets. With `addr`, the client's address goes too: the
    /// transport learns it after its detection delay (scripted losses, seed 002), or the network
    /// manager removes it after that delay (radio coverage, `address = "lose"`).
    fn link_lost(&mut self, l: usize, addr: bool) {
        let sent = self.hosts[self.app.sender].conn.stream_sent();
        self.link_lost_at(l, addr, self.now, sent);
    }

    /// As [`World::link_lost`], the loss dated `at` with the sender's stream position `sent`
    /// then (a radio notices a lost link some beacons after the signal went).
    fn link_lost_at(&mut self, l: usize, addr: bool, at: Instant, sent: u64) {
        if !self.links[l].covered {
            return;
        }
        let now = self.now;
        self.links[l].covered = false;
        self.links[l].loss_epoch = self.links[l].loss_epoch.wrapping_add(1);
        for d in &mut self.links[l].dirs {
            d.set_up(now, false);
        }
        self.rec.loss_events.push(LossEvent {
            t: at.since_epoch(),
            link: l,
            since: self.links[l].since,
            sent_before: sent,
        });
        if addr {
            let delay = self.variant.config.remove_addr_delay;
            let epoch = self.links[l].loss_epoch;
            self.schedule(
                now + delay,
                Kind::AddrGone {
                    link: l as u8,
                    epoch,
                },
            );
        }
    }

    fn addr_gone(&mut self, l: usize, epoch: u32) {
        let link = &mut self.links[l];
        if link.covered || link.loss_epoch != epoch || !link.addr_present {
            return;
        }
        link.addr_present = false;
        self.hosts[CLIENT].conn.remove_local_addr(AddrId(l as u8));
        self.pm_event(pm::Event::LocalAddrRemoved {
            iface: pm::IfaceId(l as u32),
            id: pm::AddrId(l as u8),
        });
        self.pump(CLIENT);
        self.pump(SERVER);
    }

    fn link_back(&mut self, l: usize, addr: bool) {
        if self.links[l].covered {
            return;
        }
        let now = self.now;
        self.links[l].covered = true;
        self.links[l].since = now.since_epoch();
        for d in &mut self.links[l].dirs {
            d.set_up(now, true);
        }
        if addr || !self.links[l].addr_present {
            if self.links[l].addr_present {
                // Back before the loss was noticed.
                self.hosts[CLIENT].conn.local_addr_restored(AddrId(l as u8));
            } else {
                self.links[l].addr_present = true;
                self.pm_event(pm::Event::LocalAddrNew {
                    iface: pm::IfaceId(l as u32),
                    id: pm::AddrId(l as u8),
                    addr: Some(client_ip(l)),
                });
            }
        }
    }

    /// A radio beacon: a new signal sample, the link's rate, losses and coverage follow it, and
    /// the path manager hears it.
    fn beacon(&mut self, l: usize) {
        let t = self.now.since_epoch();
        let Some(rss) = self.sample_rss(l, t) else {
            return;
        };
        let lose_addr = self.links[l].address == AddressPolicy::Lose;
        let period = self.links[l]
            .radio
            .as_ref()
            .map_or(Duration::from_secs(1), |r| r.spec.beacon);
        if let Some(r) = &self.links[l].radio {
            // Packets follow the instantaneous signal; below the cut-off none gets through.
            let audible = rss >= r.spec.cutoff_dbm;
            let rate = r
                .spec
                .rate(rss)
                .max(r.spec.rates.last().map_or(1e6, |x| x.1));
            let per = if audible { r.spec.per(rss) } else { 1.0 };
            for d in &mut self.links[l].dirs {
                d.set_rate(rate);
                d.set_loss(per);
            }
            // Coverage is declared lost after LOSS_BEACONS inaudible beacons (dated from the
            // first) and back after BACK_BEACONS audible ones.
            let link = &mut self.links[l];
            if audible {
                link.below = 0;
                link.below_since = None;
                link.above_run += 1;
            } else {
                link.above_run = 0;
                link.below += 1;
                if link.below_since.is_none() {
                    let sent = self.hosts[self.app.sender].conn.stream_sent();
                    self.links[l].below_since = Some((self.now, sent));
                }
            }
            let link = &self.links[l];
            let lose = link.covered && link.below >= LOSS_BEACONS;
            let back = !link.covered && link.above_run >= BACK_BEACONS;
            if lose {
                let (at, sent) = link.below_since.unwrap_or((self.now, 0));
                self.link_lost_at(l, lose_addr, at, sent);
            } else if back {
                self.link_back(l, lose_addr);
            }
            // A cross-layer path manager hears the radio: beacons from an access point, or
            // none. A stock one does not (seed 000: that is the difference).
            if (lose || back) && self.variant.pm.mode.uses_signal() {
                self.pm_event(pm::Event::IfaceUpdated {
                    iface: pm::IfaceId(l as u32),
                    up: back,
                });
            }
            if !audible {
                self.schedule(self.now + period, Kind::Beacon { link: l as u8 });
                self.pump(CLIENT);
                self.pump(SERVER);
                return;
            }
        }
        // An audible beacon is a signal sample.
        {
            // Recovery metric: the link's own smoothing crossing its threshold (plus the
            // hysteresis) upwards, until it falls below the threshold again.
            let spec = &self.variant.scenario.links[l];
            let (alpha, hysteresis) = (spec.alpha, spec.hysteresis_db);
            let link = &mut self.links[l];
            let s = link
                .smoothed
                .map_or(rss, |p| (1.0 - alpha) * p + alpha * rss);
            link.smoothed = Some(s);
            if let Some(th) = self.rec.thresholds[l] {
                if !link.above && s > th + hysteresis {
                    link.above = true;
                    self.rec.recoveries.push(Recovery {
                        t,
                        link: l,
                        first_data: None,
                        lost: None,
                    });
                } else if link.above && s < th {
                    link.above = false;
                    if let Some(r) = self.rec.recoveries.iter_mut().rev().find(|r| r.link == l)
                        && r.first_data.is_none()
                        && r.lost.is_none()
                    {
                        r.lost = Some(t);
                    }
                }
            }
            self.rec
                .rss
                .push((self.now.micros(), l as u8, rss as f32, s as f32));
            self.pm_event(pm::Event::Signal {
                iface: pm::IfaceId(l as u32),
                rssi_dbm: rss,
            });
            self.pump(CLIENT);
        }
        self.schedule(self.now + period, Kind::Beacon { link: l as u8 });
        self.pump(CLIENT);
        self.pump(SERVER);
    }

    /// The signal strength on link `l` at time `t`: replayed, or from distance and shadowing.
    fn sample_rss(&mut self, l: usize, t: Duration) -> Option<f64> {
        if let Some(series) = &self.variant.signals[l] {
            let r = self.links[l].radio.as_mut();
            let mut idx = r.as_ref().map_or(0, |r| r.replay_idx);
            while idx + 1 < series.len() && series[idx + 1].0 <= t {
                idx += 1;
            }
            if let Some(r) = r {
                r.replay_idx = idx;
            }
            return series.get(idx).map(|&(_, v)| v);
        }
        let mobility = self.mobility.as_ref()?;
        let p = mobility.position(t);
        let (_, d) = mobility.nearest(t)?;
        let r = self.links[l].radio.as_mut()?;
        let shadow = r.shadowing.at(p.x, p.y);
        let _ = r.rng.random::<u8>();
        Some(r.spec.mean_rss(d) + shadow)
    }

    fn pm_event(&mut self, e: pm::Event) {
        self.pm.handle_event(self.now, &e);
        self.pm_dirty = true;
    }

    /// Feeds the client connection's events to the path manager and executes its commands.
    fn run_pm(&mut self) -> bool {
        let mut any = false;
        loop {
            let mut progress = false;
            while let Some(e) = self.hosts[CLIENT].conn.poll_event() {
                progress = true;
                if let Some(pe) = translate(&e) {
                    self.pm.handle_event(self.now, &pe);
                }
            }
            while let Some(c) = self.pm.poll_command() {
                progress = true;
                self.execute(c);
            }
            if !progress {
                break;
            }
            any = true;
        }
        // The path manager's deadline only moves when it handles something.
        let dirty = std::mem::take(&mut self.pm_dirty);
        if !(any || dirty) {
            return false;
        }
        if let Some(t) = self.pm.poll_timeout()
            && self.pm_timer.is_none_or(|cur| t < cur)
        {
            self.pm_timer = Some(t);
            self.schedule(t.max(self.now), Kind::PmTimer);
        }
        any
    }

    fn execute(&mut self, c: pm::Command) {
        let t = self.now.since_epoch();
        let conn = &mut self.hosts[CLIENT].conn;
        match c {
            pm::Command::CreateSubflow {
                iface,
                local,
                remote,
                backup,
                ..
            } => {
                let l = iface.0 as usize;
                if conn
                    .open_path(self.now, AddrId(local.id.0), AddrId(remote.id.0), backup)
                    .is_ok()
                {
                    self.rec.decisions.push(PmDecision {
                        t,
                        link: l,
                        demote: backup,
                        flip: false,
                    });
                } else {
                    // Refused: the manager forgets the request and asks again later.
                    let e = pm::Event::SubflowClosed {
                        conn: CONN,
                        subflow: None,
                        iface: Some(iface),
                    };
                    self.pm.handle_event(self.now, &e);
                }
            }
            pm::Command::RemoveSubflow { subflow, .. } => {
                let id = PathId(subflow.0 as u32);
                let link = conn.path(id).map(|p| p.local.0 as usize);
                if conn.close_path(id).is_ok()
                    && let Some(l) = link
                {
                    self.rec.decisions.push(PmDecision {
                        t,
                        link: l,
                        demote: true,
                        flip: false,
                    });
                }
            }
            pm::Command::SetBackup {
                subflow, backup, ..
            } => {
                let id = PathId(subflow.0 as u32);
                let link = conn.path(id).map(|p| p.local.0 as usize);
                if conn.set_backup(id, backup).is_ok()
                    && let Some(l) = link
                {
                    self.rec.decisions.push(PmDecision {
                        t,
                        link: l,
                        demote: backup,
                        flip: true,
                    });
                }
            }
            pm::Command::AnnounceAddr { local, .. } => {
                if let Some(addr) = local.addr {
                    conn.announce_addr(AddrId(local.id.0), addr, false);
                }
            }
            pm::Command::WithdrawAddr { id, .. } => conn.remove_local_addr(AddrId(id.0)),
        }
    }

    fn pump(&mut self, h: usize) {
        loop {
            let mut progress = false;
            if h == CLIENT {
                progress |= self.run_pm();
            } else {
                while self.hosts[h].conn.poll_event().is_some() {
                    progress = true;
                }
            }
            if h != self.app.sender {
                progress |= self.app_read(h);
            } else {
                progress |= self.app_write(h);
            }
            let mut buf = self.spare.pop().unwrap_or_default();
            while let Some(t) = self.hosts[h].conn.poll_transmit(self.now, &mut buf) {
                // The datagram buffer itself travels; the next one comes from the pool.
                let next = self.spare.pop().unwrap_or_default();
                let datagram = std::mem::replace(&mut buf, next);
                // The client sends from the address of the link; the server answers towards
                // the client's address (one server address, routes per client subnet).
                let link = if h == CLIENT { t.local.0 } else { t.remote.0 };
                self.send(h, link as usize, datagram);
            }
            self.recycle(buf);
            if !progress {
                break;
            }
        }
        if let Some(t) = self.hosts[h].conn.poll_timeout()
            && self.hosts[h].timer.is_none_or(|cur| t < cur)
        {
            self.hosts[h].timer = Some(t);
            self.schedule(t.max(self.now), Kind::Timer { host: h as u8 });
        }
    }

    fn send(&mut self, from: usize, link: usize, data: Vec<u8>) {
        let Some(l) = self.links.get_mut(link) else {
            return self.recycle(data);
        };
        let dir = if from == SERVER { 0 } else { 1 };
        let Ok(arrival) = l.dirs[dir].send(self.now, data.len(), &mut l.rngs[dir]) else {
            return self.recycle(data);
        };
        let epoch = l.dirs[dir].epoch;
        let idx = match self.free.pop() {
            Some(i) => {
                // The slot holds an empty vector: its buffer went back to the pool on delivery.
                self.packets[i as usize] = data;
                i
            }
            None => {
                self.packets.push(data);
                (self.packets.len() - 1) as u32
            }
        };
        let l = &mut self.links[link];
        if l.reorder {
            self.schedule(
                arrival,
                Kind::Deliver {
                    host: (1 - from) as u8,
                    link: link as u8,
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
                        link: link as u8,
                        dir: dir as u8,
                    },
                );
            }
        }
    }

    /// Returns a datagram buffer to the pool.
    fn recycle(&mut self, mut data: Vec<u8>) {
        data.clear();
        self.spare.push(data);
    }

    fn app_write(&mut self, h: usize) -> bool {
        if self.now < self.app.start || self.app.stop.is_some_and(|t| self.now >= t) {
            return false;
        }
        let conn = &mut self.hosts[h].conn;
        let mut wrote = false;
        match self.app.kind {
            AppKind::Cbr => {
                let size = self.app.size;
                while let Some(&(seq, gen_at)) = self.app.backlog.front() {
                    if conn.send_space() < size as u64 {
                        break;
                    }
                    let msg = &mut self.chunk[..size];
                    msg[..8].copy_from_slice(&seq.to_le_bytes());
                    msg[8..16].copy_from_slice(&gen_at.micros().to_le_bytes());
                    let n = conn.write(msg);
                    debug_assert_eq!(n, size);
                    self.app.backlog.pop_front();
                    wrote = true;
                }
            }
            AppKind::Bulk | AppKind::File => loop {
                let space = conn.send_space() as usize;
                let mut n = space.min(self.chunk.len());
                if let Some(r) = self.app.remaining {
                    n = n.min(r as usize);
                }
                if n == 0 {
                    break;
                }
                let w = conn.write(&self.chunk[..n]);
                if w == 0 {
                    break;
                }
                wrote = true;
                self.app.written += w as u64;
                if let Some(r) = &mut self.app.remaining {
                    *r -= w as u64;
                    if *r == 0 {
                        conn.finish();
                        break;
                    }
                }
            },
        }
        wrote
    }

    fn app_read(&mut self, h: usize) -> bool {
        let mut any = false;
        loop {
            let conn = &mut self.hosts[h].conn;
            let n = if self.app.kind == AppKind::Cbr {
                conn.read(&mut self.scratch)
            } else {
                conn.discard(usize::MAX)
            };
            if n == 0 {
                break;
            }
            any = true;
            self.rec.deliveries.push((self.now.micros(), n as u32));
            self.app.delivered += n as u64;
            if self.app.kind == AppKind::Cbr {
                self.parse_messages(n);
            }
        }
        if any
            && let Some(total) = self.app.file_total
            && self.app.delivered >= total
            && self.rec.completed.is_none()
        {
            self.rec.completed = Some(self.now.since_epoch());
        }
        any
    }

    /// Walks CBR messages in freshly read bytes, recording one-way delays from their headers.
    fn parse_messages(&mut self, n: usize) {
        let size = self.app.size;
        let mut i = 0;
        while i < n {
            let off = self.app.msg_offset;
            if off < 16 {
                let take = (16 - off).min(n - i);
                self.app.header[off..off + take].copy_from_slice(&self.scratch[i..i + take]);
            }
            let take = (size - off).min(n - i);
            i += take;
            self.app.msg_offset += take;
            if self.app.msg_offset == size {
                self.app.msg_offset = 0;
                let gen_us =
                    u64::from_le_bytes(self.app.header[8..16].try_into().expect("8 bytes"));
                let delay = self.now.micros().saturating_sub(gen_us);
                self.rec
                    .cbr
                    .push((gen_us, delay.min(u64::from(u32::MAX)) as u32));
            }
        }
    }

    /// Stream bytes received per link so far: the client numbers its addresses by link, and
    /// the server sees the client's address of each path as the peer address.
    fn link_rx(&self) -> Vec<u64> {
        let mut rx = vec![0; self.links.len()];
        let receiver = &self.hosts[1 - self.app.sender].conn;
        let counts: Vec<(AddrId, u64)> = if self.app.sender == SERVER {
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

    fn sample(&mut self) {
        let n = self.links.len();
        let sender = &self.hosts[self.app.sender].conn;
        let receiver = &self.hosts[1 - self.app.sender].conn;
        let mut cwnd = vec![0; n];
        let mut srtt = vec![0; n];
        let client_side = self.app.sender == CLIENT;
        for p in sender.paths() {
            let i = usize::from(if client_side { p.local.0 } else { p.remote.0 });
            if i < n {
                cwnd[i] = p.cwnd;
                srtt[i] = p.srtt.as_micros() as u64;
            }
        }
        let s = Sample {
            t: self.now.since_epoch(),
            delivered: self.app.delivered,
            link_rx: self.link_rx(),
            link_cwnd: cwnd,
            link_srtt_us: srtt,
            ofo_bytes: receiver.reorder_buffer_bytes(),
            reinjected: sender.stats().reinjected_packets,
            data_packets: sender.stats().data_packets_sent,
        };
        self.rec.samples.push(s);
    }

    fn finish(mut self) -> RunRecord {
        let s = self.app.sender;
        if std::env::var_os("BRAID_DEBUG_END").is_some() {
            for (n, h) in [("client", CLIENT), ("server", SERVER)] {
                let c = &self.hosts[h].conn;
                eprintln!("{n}: {} stats {:?}", c.debug_send_state(), c.stats());
                for p in c.paths() {
                    eprintln!("  {p:?}");
                }
            }
        }
        self.rec.sender = self.hosts[s].conn.stats().clone();
        self.rec.receiver = self.hosts[1 - s].conn.stats().clone();
        let client_side = s == CLIENT;
        self.rec.sender_paths = self.hosts[s]
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
        // Each packet delivery counts as one event, whether it had a queue entry of its own.
        self.rec.events = self.events - self.head_events + self.head_deliveries;
        self.rec
    }
}

/// Finds the latest recovery entry of a link.
trait LastForLink {
    fn last_mut_for(&self, link: usize) -> Option<&Recovery>;
}

impl LastForLink for Vec<Recovery> {
    fn last_mut_for(&self, link: usize) -> Option<&Recovery> {
        self.iter().rev().find(|r| r.link == link)
    }
}

fn endpoint(link: usize) -> pm::Endpoint {
    pm::Endpoint {
        id: pm::AddrId(link as u8),
        addr: Some(SocketAddr::new(client_ip(link), 0)),
    }
}

fn server_endpoint() -> pm::Endpoint {
    pm::Endpoint {
        id: pm::AddrId(0),
        addr: Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 0)),
    }
}

/// The client connection's events as the path manager sees them (seed 000 Table I).
fn translate(e: &Event) -> Option<pm::Event> {
    Some(match *e {
        Event::Connected => pm::Event::ConnectionEstablished {
            conn: CONN,
            subflow: Some(pm::SubflowId(0)),
            local: endpoint(0),
            remote: server_endpoint(),
            iface: Some(pm::IfaceId(0)),
        },
        Event::PathEstablished {
            path,
            local,
            remote,
            backup,
        } => pm::Event::SubflowEstablished {
            conn: CONN,
            subflow: pm::SubflowId(u64::from(path.0)),
            iface: Some(pm::IfaceId(u32::from(local.0))),
            local: endpoint(local.0 as usize),
            remote: pm::Endpoint {
                id: pm::AddrId(remote.0),
                addr: None,
            },
            backup,
        },
        Event::PathClosed { path, local, .. } => pm::Event::SubflowClosed {
            conn: CONN,
            subflow: Some(pm::SubflowId(u64::from(path.0))),
            iface: Some(pm::IfaceId(u32::from(local.0))),
        },
        Event::PathPriority { path, backup, .. } => pm::Event::SubflowPriority {
            conn: CONN,
            subflow: pm::SubflowId(u64::from(path.0)),
            backup,
        },
        Event::PeerAddrAnnounced { id, addr, .. } => pm::Event::AddrAnnounced {
            conn: CONN,
            remote: pm::Endpoint {
                id: pm::AddrId(id.0),
                addr: Some(addr),
            },
        },
        Event::PeerAddrRemoved { id } => pm::Event::AddrRemoved {
            conn: CONN,
            id: pm::AddrId(id.0),
        },
        Event::Closed { .. } => pm::Event::ConnectionClosed { conn: CONN },
        _ => return None,
    })
}

/// SplitMix64 step: independent seeds for each generator from one scenario seed.
fn mix(seed: u64, stream: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(stream + 1));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
