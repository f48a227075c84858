//! The discrete-event engine: two hosts running `braid_core::Connection`, joined by one link per
//! interface, in virtual time.
//!
//! ```text
//!   app (sender) ─write→ Connection ─poll_transmit→ Link[i] direction ─(arrival event)→
//!   Connection (peer) ─read→ app (receiver) → Recorder
//! ```
//! Each input to a host (a datagram, a timer, an application tick, a scripted action) is
//! followed by `pump`: connection events, application reads and writes, then every datagram the
//! connection wants to send, then its next timer. Same variant + same seed = same run, always:
//! no wall clock, no hash-map iteration, seeded generators only.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use braid_core::{AddrId, Connection, ConnectionStats, Event, Instant, PathStats, Side};
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use crate::link::{DirStats, Direction};
use crate::scenario::{Action, AppDirection, AppKind, Variant};

const CLIENT: usize = 0;
const SERVER: usize = 1;

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

/// A connection-loss event of the scenario (link blocked or address lost).
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

/// Everything a run recorded; metrics are computed from it.
#[derive(Debug, Clone, Default)]
pub struct RunRecord {
    pub duration: Duration,
    pub app_start: Duration,
    /// In-order deliveries at the receiving application: (time µs, bytes).
    pub deliveries: Vec<(u64, u32)>,
    /// CBR messages: (generation time µs, one-way delay µs).
    pub cbr: Vec<(u64, u32)>,
    pub samples: Vec<Sample>,
    pub loss_events: Vec<LossEvent>,
    pub link_names: Vec<String>,
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
    AppTick,
    Action(u32),
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

struct Link {
    /// [server→client, client→server]
    dirs: [Direction; 2],
    /// Packets on the wire per direction, in arrival order (links that keep order only: the
    /// event queue then holds just each FIFO's head).
    wire: [std::collections::VecDeque<InFlight>; 2],
    reorder: bool,
    rngs: [Pcg64Mcg; 2],
    /// The client's address on this link exists.
    addr_present: bool,
    backup: bool,
}

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
    backlog: std::collections::VecDeque<(u64, Instant)>,
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
    now: Instant,
    end: Instant,
    queue: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
    hosts: [Host; 2],
    links: Vec<Link>,
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
    deliveries: u64,
    head_events: u64,
}

/// Runs one variant with one seed.
pub fn run(variant: &Variant, seed: u64) -> RunRecord {
    let mut w = World::new(variant, seed);
    w.run();
    w.finish()
}

impl<'a> World<'a> {
    pub fn new(variant: &'a Variant, seed: u64) -> Self {
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
        let n = links.len();
        let mut rec = RunRecord {
            duration: s.duration.0,
            app_start: a.start.0,
            link_names: s.links.iter().map(|l| l.name.clone()).collect(),
            ..RunRecord::default()
        };
        // Loss events and the time each link came back before them.
        let mut back = vec![Duration::ZERO; n];
        for &(t, l, action) in &variant.timeline {
            match action {
                Action::Down | Action::AddrLost => rec.loss_events.push(LossEvent {
                    t,
                    link: l,
                    since: back[l],
                    sent_before: 0,
                }),
                Action::Up | Action::AddrBack => back[l] = t,
                _ => {}
            }
        }
        World {
            variant,
            now: Instant::ZERO,
            end: Instant::ZERO + s.duration.0,
            queue: BinaryHeap::new(),
            seq: 0,
            hosts,
            links,
            packets: Vec::new(),
            free: Vec::new(),
            spare: Vec::new(),
            app,
            rec,
            scratch: vec![0; 1 << 16],
            chunk: vec![0; 1 << 16],
            sample_every: s.metrics.sample.0.max(Duration::from_millis(1)),
            events: 0,
            deliveries: 0,
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
        // The client opens the first path; the others join once it is established (as MPTCP's
        // full-mesh path manager does after the MP_CAPABLE handshake).
        let backup = self.links[0].backup;
        let _ = self.hosts[CLIENT]
            .conn
            .open_path(Instant::ZERO, AddrId(0), AddrId(0), backup);
        for i in 0..self.variant.timeline.len() {
            let at = Instant::ZERO + self.variant.timeline[i].0;
            self.schedule(at, Kind::Action(i as u32));
        }
        self.schedule(self.app.start, Kind::AppTick);
        self.schedule(Instant::ZERO, Kind::Sample);
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
            if matches!(ev.kind, Kind::LinkHead { .. }) {
                self.head_events += 1;
            }

            match ev.kind {
                Kind::Deliver {
                    host,
                    link,
                    epoch,
                    packet,
                } => {
                    self.deliveries += 1;
                    self.deliver(host as usize, link as usize, epoch, packet)
                }
                Kind::LinkHead { link, dir } => self.link_head(link as usize, dir as usize),
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
                Kind::AppTick => self.app_tick(),
                Kind::Action(i) => self.action(i as usize),
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
            self.deliveries += 1;
            self.deliver(host, link, epoch, packet);
        }
    }

    fn deliver(&mut self, host: usize, link: usize, epoch: u32, packet: u32) {
        let data = std::mem::take(&mut self.packets[packet as usize]);
        self.free.push(packet);
        // Direction 0 carries server→client traffic, i.e. packets for the client.
        let dir = if host == CLIENT { 0 } else { 1 };
        if self.links[link].dirs[dir].epoch == epoch {
            let _ = self.hosts[host].conn.handle_datagram(self.now, &data);
        }
        // Otherwise the link went down while the packet was queued or on the wire.
        self.recycle(data);
        self.pump(host);
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
            let next =
                self.app.start + Duration::from_nanos(self.app.interval_ns.saturating_mul(seq + 1));
            self.schedule(next, Kind::AppTick);
        }
        self.pump(s);
    }

    fn action(&mut self, i: usize) {
        let (t, l, action) = self.variant.timeline[i];
        let now = self.now;
        if matches!(action, Action::Down | Action::AddrLost) {
            let sent = self.hosts[self.app.sender].conn.stream_sent();
            if let Some(e) = self
                .rec
                .loss_events
                .iter_mut()
                .find(|e| e.t == t && e.link == l)
            {
                e.sent_before = sent;
            }
        }
        let addr = AddrId(l as u8);
        match action {
            Action::Down => self.set_link(l, false),
            Action::Up => self.set_link(l, true),
            Action::AddrLost => {
                self.set_link(l, false);
                self.links[l].addr_present = false;
                self.hosts[CLIENT].conn.local_addr_lost(now, addr);
            }
            Action::AddrBack => {
                self.set_link(l, true);
                self.links[l].addr_present = true;
                self.hosts[CLIENT].conn.local_addr_restored(addr);
                self.open_missing_path(l);
            }
            Action::Backup | Action::Primary => {
                let backup = action == Action::Backup;
                self.links[l].backup = backup;
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

    fn set_link(&mut self, l: usize, up: bool) {
        let now = self.now;
        for d in &mut self.links[l].dirs {
            d.set_up(now, up);
        }
    }

    /// Full-mesh path management: one path per link with an address, once connected.
    fn open_missing_path(&mut self, l: usize) {
        let conn = &mut self.hosts[CLIENT].conn;
        if !conn.is_established() || !self.links[l].addr_present {
            return;
        }
        let addr = AddrId(l as u8);
        if conn.paths().any(|p| p.local == addr) {
            return;
        }
        let _ = conn.open_path(self.now, addr, addr, self.links[l].backup);
    }

    fn pump(&mut self, h: usize) {
        loop {
            let mut progress = false;
            while let Some(e) = self.hosts[h].conn.poll_event() {
                progress = true;
                if h == CLIENT && e == Event::Connected {
                    for l in 1..self.links.len() {
                        self.open_missing_path(l);
                    }
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
                self.send(h, t.local.0 as usize, datagram);
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
                // Keep the pooled buffer's allocation: swap it out for this datagram.
                let old = std::mem::replace(&mut self.packets[i as usize], data);
                self.spare.push(old);
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

    fn sample(&mut self) {
        let n = self.links.len();
        let sender = &self.hosts[self.app.sender].conn;
        let receiver = &self.hosts[1 - self.app.sender].conn;
        let mut cwnd = vec![0; n];
        let mut srtt = vec![0; n];
        for p in sender.paths() {
            let i = usize::from(p.local.0);
            if i < n {
                cwnd[i] = p.cwnd;
                srtt[i] = p.srtt.as_micros() as u64;
            }
        }
        self.rec.samples.push(Sample {
            t: self.now.since_epoch(),
            delivered: self.app.delivered,
            link_cwnd: cwnd,
            link_srtt_us: srtt,
            ofo_bytes: receiver.reorder_buffer_bytes(),
            link_rx: {
                let mut rx = vec![0; n];
                for (a, st) in receiver.addr_stats() {
                    if let Some(v) = rx.get_mut(a.0 as usize) {
                        *v = st.data_bytes_received;
                    }
                }
                rx
            },
            reinjected: sender.stats().reinjected_packets,
            data_packets: sender.stats().data_packets_sent,
        });
    }

    fn link_heads(&self) -> u64 {
        self.head_events
    }

    fn finish(mut self) -> RunRecord {
        let s = self.app.sender;
        self.rec.sender = self.hosts[s].conn.stats().clone();
        self.rec.receiver = self.hosts[1 - s].conn.stats().clone();
        self.rec.sender_paths = self.hosts[s]
            .conn
            .paths()
            .map(|p| (p.local.0 as usize, p.stats))
            .collect();
        self.rec.link_stats = self
            .links
            .iter()
            .map(|l| (l.dirs[0].stats.clone(), l.dirs[1].stats.clone()))
            .collect();
        // Each packet delivery counts as one event, whether it had a queue entry of its own.
        self.rec.events = self.events - self.link_heads() + self.deliveries;
        self.rec
    }
}

/// SplitMix64 step: independent seeds for each generator from one scenario seed.
fn mix(seed: u64, stream: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(stream + 1));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
