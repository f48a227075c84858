//! Two endpoints and a virtual clock, no sockets (after quinn-proto's `tests/util.rs`): tests
//! read like scripts: cut a path, advance time, assert what the application received.

#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Duration;

use braid_core::{AddrId, Config, Connection, Event, Instant, Side};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// One bidirectional path between the endpoints' addresses `i` and `i`.
#[derive(Debug, Clone)]
pub struct Link {
    pub delay: Duration,
    pub up: bool,
    pub loss: f64,
    pub duplicate: f64,
    /// Extra random delay in [0, jitter); reorders packets when larger than their spacing.
    pub jitter: Duration,
    /// Bytes per second; 0 = unlimited.
    pub rate: u64,
    /// Drop-tail queue, as the longest queueing delay it holds (rate-limited links only).
    pub max_queue: Duration,
    /// Drop the next `n` datagrams towards the server that carry stream byte `dsn`: (dsn, n).
    pub drop_dsn: Option<(u64, u32)>,
    busy_until: [Instant; 2],
}

impl Link {
    pub fn new(delay_ms: u64) -> Self {
        Link {
            delay: Duration::from_millis(delay_ms),
            up: true,
            loss: 0.0,
            duplicate: 0.0,
            jitter: Duration::ZERO,
            rate: 0,
            max_queue: Duration::from_millis(100),
            drop_dsn: None,
            busy_until: [Instant::ZERO; 2],
        }
    }

    pub fn rate_mbit(mut self, mbit: u64) -> Self {
        self.rate = mbit * 1_000_000 / 8;
        self
    }
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: Instant,
    order: u64,
    to_server: bool,
    link: usize,
    data: Vec<u8>,
}

pub struct Pair {
    pub client: Connection,
    pub server: Connection,
    pub now: Instant,
    pub links: Vec<Link>,
    queue: BinaryHeap<Reverse<InFlight>>,
    order: u64,
    rng: Pcg64Mcg,
    /// Everything the server application read, in order.
    pub server_received: Vec<u8>,
    pub client_received: Vec<u8>,
    pub client_events: Vec<Event>,
    pub server_events: Vec<Event>,
    /// Arrival times of in-order bytes at the server application: (time, bytes read).
    pub server_reads: Vec<(Instant, usize)>,
    pub datagrams: u64,
    /// When set, every datagram sent is recorded here.
    pub capture: Option<Vec<Vec<u8>>>,
    read_buf: Vec<u8>,
    /// Loop iterations, to catch a connection that keeps time crawling.
    iterations: u64,
}

impl Pair {
    pub fn new(cfg: Config, links: Vec<Link>, seed: u64) -> Self {
        let cfg = Arc::new(cfg);
        Pair {
            client: Connection::new(cfg.clone(), Side::Client, Instant::ZERO),
            server: Connection::new(cfg, Side::Server, Instant::ZERO),
            now: Instant::ZERO,
            links,
            queue: BinaryHeap::new(),
            order: 0,
            rng: Pcg64Mcg::seed_from_u64(seed),
            server_received: Vec::new(),
            client_received: Vec::new(),
            client_events: Vec::new(),
            server_events: Vec::new(),
            server_reads: Vec::new(),
            datagrams: 0,
            capture: None,
            read_buf: Vec::new(),
            iterations: 0,
        }
    }

    /// Opens one client path per link (address i to address i), flagged backup as given. As
    /// in MPTCP, the first path opens the connection and the others join once it is up.
    pub fn open_all(&mut self, backup: &[bool]) {
        let b0 = backup.first().copied().unwrap_or(false);
        self.client
            .open_path(self.now, AddrId(0), AddrId(0), b0)
            .unwrap();
        let deadline = self.now + Duration::from_secs(5);
        while !self.client.is_established() && self.now < deadline {
            let step = self.now + Duration::from_millis(1);
            self.run_until(step);
        }
        for i in 1..self.links.len() {
            let b = backup.get(i).copied().unwrap_or(false);
            self.client
                .open_path(self.now, AddrId(i as u8), AddrId(i as u8), b)
                .unwrap();
        }
    }

    fn send_all(&mut self) {
        let mut buf = Vec::new();
        for to_server in [true, false] {
            loop {
                let conn = if to_server {
                    &mut self.client
                } else {
                    &mut self.server
                };
                let Some(t) = conn.poll_transmit(self.now, &mut buf) else {
                    break;
                };
                self.datagrams += 1;
                if let Some(c) = &mut self.capture {
                    c.push(buf.clone());
                }
                trace_datagram(self.now, to_server, "send", &buf);
                // The peer names the address ids of the paths it opens: a forged PATH_OPEN can
                // name one with no link, whose datagrams go nowhere (as in the tunnel).
                let link_idx = t.local.0 as usize;
                let Some(link) = self.links.get_mut(link_idx) else {
                    continue;
                };
                if to_server
                    && let Some((dsn, n)) = link.drop_dsn
                    && carries(&buf, dsn)
                {
                    link.drop_dsn = (n > 1).then_some((dsn, n - 1));
                    continue;
                }
                if !link.up || (link.loss > 0.0 && self.rng.random::<f64>() < link.loss) {
                    continue;
                }
                let dir = usize::from(!to_server);
                let mut depart = self.now;
                if let Some(per_byte_ns) = 1_000_000_000u64.checked_div(link.rate) {
                    let start = link.busy_until[dir].max(self.now);
                    if start - self.now > link.max_queue {
                        continue;
                    }
                    let tx = Duration::from_nanos(buf.len() as u64 * per_byte_ns);
                    depart = start + tx;
                    link.busy_until[dir] = depart;
                }
                let copies = if link.duplicate > 0.0 && self.rng.random::<f64>() < link.duplicate {
                    2
                } else {
                    1
                };
                for _ in 0..copies {
                    let jitter = if link.jitter.is_zero() {
                        Duration::ZERO
                    } else {
                        Duration::from_micros(
                            self.rng.random_range(0..link.jitter.as_micros() as u64),
                        )
                    };
                    self.order += 1;
                    self.queue.push(Reverse(InFlight {
                        at: depart + link.delay + jitter,
                        order: self.order,
                        to_server,
                        link: link_idx,
                        data: buf.clone(),
                    }));
                }
            }
        }
    }

    fn drain_apps(&mut self) {
        let mut tmp = std::mem::take(&mut self.read_buf);
        tmp.resize(1 << 16, 0);
        loop {
            let n = self.server.read(&mut tmp);
            if n == 0 {
                break;
            }
            self.server_reads.push((self.now, n));
            self.server_received.extend_from_slice(&tmp[..n]);
        }
        loop {
            let n = self.client.read(&mut tmp);
            if n == 0 {
                break;
            }
            self.client_received.extend_from_slice(&tmp[..n]);
        }
        while let Some(e) = self.client.poll_event() {
            self.client_events.push(e);
        }
        while let Some(e) = self.server.poll_event() {
            self.server_events.push(e);
        }
        self.read_buf = tmp;
    }

    /// Runs until virtual time `until`, or until nothing is left to do.
    pub fn run_until(&mut self, until: Instant) {
        self.run_until_with(until, |_| {});
    }

    /// Runs until `until`, calling `tick` after every step (to feed the application).
    pub fn run_until_with(&mut self, until: Instant, mut tick: impl FnMut(&mut Pair)) {
        let mut same_instant = 0u32;
        let mut last = self.now;
        loop {
            self.iterations += 1;
            // No sane run needs more than a few hundred thousand steps per simulated second.
            assert!(
                self.iterations < 2_000_000 * (self.now.micros() / 1_000_000 + 1),
                "the connection keeps time crawling: {} steps by {:?}",
                self.iterations,
                self.now
            );
            if self.now == last {
                same_instant += 1;
                assert!(
                    same_instant < 1_000_000,
                    "livelock at {:?}: time does not advance",
                    self.now
                );
            } else {
                same_instant = 0;
                last = self.now;
            }
            tick(self);
            self.send_all();
            self.drain_apps();
            let next_packet = self.queue.peek().map(|r| r.0.at);
            let next_timer = [self.client.poll_timeout(), self.server.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let Some(next) = [next_packet, next_timer].into_iter().flatten().min() else {
                self.now = self.now.max(until);
                return;
            };
            if next > until {
                self.now = until;
                return;
            }
            self.now = next.max(self.now);
            while let Some(Reverse(p)) = self.queue.peek() {
                if p.at > self.now {
                    break;
                }
                let Reverse(p) = self.queue.pop().unwrap();
                // A link that went down loses what was on the wire.
                if !self.links[p.link].up {
                    continue;
                }
                trace_datagram(self.now, p.to_server, "recv", &p.data);
                let conn = if p.to_server {
                    &mut self.server
                } else {
                    &mut self.client
                };
                let _ = conn.handle_datagram(self.now, &p.data);
            }
            if self.client.poll_timeout().is_some_and(|t| t <= self.now) {
                self.client.handle_timeout(self.now);
            }
            if self.server.poll_timeout().is_some_and(|t| t <= self.now) {
                self.server.handle_timeout(self.now);
            }
        }
    }

    pub fn run_for(&mut self, d: Duration) {
        let until = self.now + d;
        self.run_until(until);
    }

    /// Longest interval between consecutive reads at the server that ends within [from, to]
    /// (the last read before `from` counts as the start of the first interval).
    pub fn max_server_gap(&self, from: Instant, to: Instant) -> Duration {
        let before = self
            .server_reads
            .iter()
            .map(|(t, _)| *t)
            .rfind(|t| *t < from);
        let times: Vec<_> = before
            .into_iter()
            .chain(
                self.server_reads
                    .iter()
                    .map(|(t, _)| *t)
                    .filter(|t| *t >= from && *t <= to),
            )
            .collect();
        times
            .windows(2)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or_default()
    }
}

/// With BRAID_TRACE_DSN=N set, prints every datagram whose DATA covers stream byte N.
/// Whether a datagram carries stream byte `dsn` in a DATA frame.
fn carries(d: &[u8], dsn: u64) -> bool {
    braid_core::wire::parse(d).is_ok_and(|(_, frames)| {
        frames.iter().any(|f| {
            matches!(f, braid_core::wire::Frame::Data { dsn: s, payload, .. }
                if *s <= dsn && dsn < *s + payload.len() as u64)
        })
    })
}

fn trace_datagram(now: Instant, to_server: bool, what: &str, d: &[u8]) {
    let Some(dsn) = std::env::var("BRAID_TRACE_DSN")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return;
    };
    let Ok((h, frames)) = braid_core::wire::parse(d) else {
        return;
    };
    let dack_hit = std::env::var("BRAID_TRACE_DACK").is_ok()
        && frames.iter().any(|f| {
            matches!(f, braid_core::wire::Frame::DataAck { cum, ranges, .. }
                if *cum <= dsn + 1 && ranges.iter().any(|(s, e)| s <= dsn + 1 && dsn <= e))
        });
    let hit = dack_hit
        || frames.iter().any(|f| {
            matches!(f, braid_core::wire::Frame::Data { dsn: s, payload, .. }
            if *s <= dsn && dsn < *s + payload.len() as u64)
        });
    if hit {
        let summary: Vec<String> = frames
            .iter()
            .map(|f| match f {
                braid_core::wire::Frame::Data { dsn, payload, fin } => {
                    format!(
                        "DATA[{}..{}){}",
                        dsn,
                        dsn + payload.len() as u64,
                        if *fin { " FIN" } else { "" }
                    )
                }
                braid_core::wire::Frame::Ack { cum, .. } => format!("ACK({cum})"),
                braid_core::wire::Frame::DataAck { cum, ranges, .. } => {
                    format!(
                        "DACK({cum} {:?})",
                        ranges.iter().take(3).collect::<Vec<_>>()
                    )
                }
                other => format!("{other:?}"),
            })
            .collect();
        eprintln!(
            "{now:?} {what} {} {:?} seq {} {:?}",
            if to_server { "c->s" } else { "s->c" },
            h.path,
            h.seq,
            summary
        );
    }
}

/// Deterministic test data.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0] ^ seed)
        .collect()
}
