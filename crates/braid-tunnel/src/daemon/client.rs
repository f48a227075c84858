//! `braid tunnel client`: one connection to the gateway over every configured link, driven by
//! the path manager (braid-pm) as the simulator drives it, with link state and signal samples
//! as its inputs.
//!
//! Lifecycle: the secure layer's handshake comes first; when a session is established and
//! there is no connection, a new one starts (a fresh random connection id, the first path on
//! the first link that is up; the path manager opens the others). When the session expires
//! (the gateway stopped answering: restarted, or every link is down), the connection is
//! dropped with it, and the next session starts a new one. Re-keying keeps the connection.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use braid_core::{AddrId, Config, Event, PathId, Side};
use braid_io::signal::{SignalStats, spawn_socket};
use braid_pm::{self as pm, PathManager};
use rand::RngExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::config::{ClientConfig, batch};
use super::status::{self, Shared};
use super::tun::{TooBig, Tun};
use super::tunnel::{self, Tunnel};
use super::{Clock, DaemonError, STATUS_EVERY, udp};
use crate::frame::PtoSConfig;
use crate::secure::{Event as SecEvent, Initiator, InitiatorConfig, Keypair, Outcome};

/// Datagrams handled per wake-up before transmits are polled.
const RX_BUDGET: usize = 512;

/// First wait for a handshake response; doubles up to [`HANDSHAKE_RETRY_MAX`].
const HANDSHAKE_RETRY: Duration = Duration::from_millis(500);
const HANDSHAKE_RETRY_MAX: Duration = Duration::from_secs(1);
/// Data unanswered this long: a probing handshake (see `InitiatorConfig::probe_after`).
const PROBE_AFTER: Duration = Duration::from_millis(500);
/// A connection with data queued and no usable path this long is logged.
const PATHLESS_REPORT: Duration = Duration::from_secs(1);
/// Probes after a re-addressing beyond the first, and how far apart.
const REPROBES: u8 = 3;
const REPROBE_EVERY: Duration = Duration::from_millis(100);

/// Runs the client until SIGINT or SIGTERM.
pub async fn run_client(cfg: ClientConfig) -> Result<(), DaemonError> {
    run_client_until(cfg, super::shutdown_signal()).await
}

/// Runs the client until `stop` resolves (tests, embedding).
pub async fn run_client_until(
    cfg: ClientConfig,
    stop: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    if cfg.transport == super::Transport::Mptcp {
        return super::stream::run_client(cfg, stop).await;
    }
    let mut c = Client::new(cfg)?;
    let shared: Shared = Arc::new(Mutex::new(Value::Null));
    c.publish(&shared);
    let tasks = status::serve_ops(&c.cfg.ops, &shared).await?;
    let (sig_tx, mut sig_rx) = mpsc::channel(1024);
    let sig_task = match &c.cfg.pm.signal {
        Some(path) => Some(
            spawn_socket(path, sig_tx, c.signal.clone()).map_err(|e| DaemonError(e.to_string()))?,
        ),
        None => None,
    };
    info!(
        links = ?c.links.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(),
        tun = %c.cfg.tun.name,
        "client running"
    );
    let r = c.run(stop, &shared, &mut sig_rx).await;
    for t in tasks.into_iter().chain(sig_task) {
        t.abort();
    }
    if let Some(p) = &c.cfg.ops.control {
        let _ = std::fs::remove_file(p);
    }
    info!("client stopped");
    r
}

#[derive(Debug, Default)]
struct Drops {
    stale_connection: u64,
    short: u64,
    no_connection: u64,
    ptos_refused: u64,
    stop_invalid: u64,
    no_session: u64,
    send_errors: u64,
}

struct Link {
    name: String,
    gateway: SocketAddr,
    source: Option<IpAddr>,
    backup: bool,
    up: bool,
    /// The interface's addresses at the last look (sorted).
    addrs: Vec<IpAddr>,
}

impl Link {
    /// The link's local address as the path manager sees it: the configured source, else the
    /// interface's first address of the gateway's family (global before link-local), else the
    /// family's unspecified address.
    fn local_ip(&self) -> IpAddr {
        if let Some(ip) = self.source {
            return ip;
        }
        let v6 = self.gateway.is_ipv6();
        let link_local = |ip: &IpAddr| match ip {
            IpAddr::V6(a) => a.is_unicast_link_local(),
            IpAddr::V4(a) => a.is_link_local(),
        };
        let same: Vec<IpAddr> = self
            .addrs
            .iter()
            .copied()
            .filter(|a| a.is_ipv6() == v6)
            .collect();
        same.iter()
            .find(|a| !link_local(a))
            .or(same.first())
            .copied()
            .unwrap_or(if v6 {
                IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
            } else {
                IpAddr::V4(Ipv4Addr::UNSPECIFIED)
            })
    }
}

struct Client {
    cfg: ClientConfig,
    clock: Clock,
    links: Vec<Link>,
    /// One socket per link, in the same order.
    socks: Vec<udp::Socket>,
    /// The link of the connection's first path.
    first_link: usize,
    tun: Tun,
    too_big: TooBig,
    sec: Initiator,
    tunnel: Option<Tunnel>,
    pm: pm::Manager,
    conn_no: u64,
    core: Arc<Config>,
    ptos: PtoSConfig,
    rng: rand::rngs::ThreadRng,
    signal: Arc<SignalStats>,
    drops: Drops,
    connections: u64,
    /// Receive buffers, taken while datagrams are handled.
    rx: Option<udp::RxBatch>,
    dg: Vec<u8>,
    plain: Vec<u8>,
    sealed: Vec<u8>,
    rotate: usize,
    /// The current connection's pathless episode was logged.
    pathless_reported: bool,
    /// After a re-addressing, probes still to send (one per watch tick at least
    /// [`REPROBE_EVERY`] apart) and when the next may go.
    reprobes: (u8, braid_core::Instant),
    /// Since when the connection has had no usable path although a link was up (the
    /// replacement clock: time with every link down does not count).
    pathless_with_link: Option<braid_core::Instant>,
    /// Connections replaced because they had no usable path for `dead_after_ms`.
    replaced_pathless: u64,
    /// Connections replaced because the gateway restarted (another instance answered).
    replaced_restart: u64,
}

impl Client {
    fn new(cfg: ClientConfig) -> Result<Client, DaemonError> {
        let keypair = Keypair::from_private(cfg.private_key()?);
        let dead_after = Duration::from_millis(cfg.dead_after_ms.max(1));
        let icfg = InitiatorConfig {
            keepalive: Duration::from_millis(cfg.keepalive_ms.max(1)),
            rx_timeout: dead_after,
            // A gateway that comes back is reached within about a second: initiations every
            // 0.5 s, then every 1 s (~150 bytes each) while it is away.
            handshake_retry: HANDSHAKE_RETRY,
            handshake_retry_max: HANDSHAKE_RETRY_MAX,
            // Silence after data: a probing handshake finds a restarted gateway (see
            // `produce`) long before `dead_after_ms`.
            probe_after: Some(
                PROBE_AFTER
                    .min(dead_after / 2)
                    .max(Duration::from_millis(1)),
            ),
            ..InitiatorConfig::default()
        };
        let sec = Initiator::new(keypair, cfg.gateway_key()?, icfg)
            .map_err(|e| DaemonError(format!("client: {e}")))?;
        let mut links = Vec::new();
        let mut socks = Vec::new();
        let names: Vec<&str> = cfg.links.iter().map(|l| l.name.as_str()).collect();
        let states = link_states(&names);
        for ((i, l), (up, addrs)) in cfg.links.iter().enumerate().zip(states) {
            let gateway = cfg.link_gateway(i);
            let sock = udp::link_socket(&l.name, l.source, gateway)
                .map_err(|e| DaemonError(format!("link[{i}] ({}): {e}", l.name)))?;
            socks.push(sock);
            links.push(Link {
                name: l.name.clone(),
                gateway,
                source: l.source,
                backup: l.backup,
                up,
                addrs,
            });
        }
        let outer = if links.iter().any(|l| l.gateway.is_ipv6()) {
            1452
        } else {
            1472
        };
        let core = Arc::new(cfg.core_config(outer)?);
        let ptos = batch(&cfg.batch, core.max_datagram_size - 40, cfg.tun.mtu)?;
        let pm = pm::Manager::new(cfg.pm_config()?).map_err(DaemonError)?;
        let tun = Tun::create(&cfg.tun).map_err(|e| DaemonError(e.to_string()))?;
        let too_big = TooBig::new(cfg.tun.mtu);
        let mut c = Client {
            too_big,
            clock: Clock::start(),
            links,
            socks,
            first_link: 0,
            tun,
            sec,
            tunnel: None,
            pm,
            conn_no: 0,
            core,
            ptos,
            rng: rand::rng(),
            signal: Arc::new(SignalStats::default()),
            drops: Drops::default(),
            connections: 0,
            rx: Some(udp::RxBatch::default()),
            dg: Vec::with_capacity(2048),
            plain: Vec::with_capacity(2048),
            sealed: Vec::with_capacity(2048),
            rotate: 0,
            pathless_reported: false,
            reprobes: (0, braid_core::Instant::ZERO),
            pathless_with_link: None,
            replaced_pathless: 0,
            replaced_restart: 0,
            cfg,
        };
        let now = c.clock.now();
        for i in 0..c.links.len() {
            let up = c.links[i].up;
            c.pm.handle_event(
                now,
                &pm::Event::IfaceNew {
                    iface: pm::IfaceId(i as u32),
                    name: c.links[i].name.clone(),
                    up,
                },
            );
            if up {
                c.pm.handle_event(now, &c.addr_new(i));
            }
        }
        Ok(c)
    }

    async fn run(
        &mut self,
        stop: impl Future<Output = ()>,
        shared: &Shared,
        signal: &mut mpsc::Receiver<braid_pm::signal::Sample>,
    ) -> Result<(), DaemonError> {
        tokio::pin!(stop);
        let mut status_tick = tokio::time::interval(STATUS_EVERY);
        let mut watch =
            tokio::time::interval(Duration::from_millis(self.cfg.pm.watch_interval_ms.max(1)));
        watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut probe = tokio::time::interval(Duration::from_millis(self.cfg.keepalive_ms.max(1)));
        probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let now = self.clock.now();
        let init = self.sec.start(now, &mut self.rng);
        self.send_secure(&init).await;
        self.flush_sockets().await;
        loop {
            let deadline = self.deadline();
            let sleep = tokio::time::sleep_until(self.clock.tokio(deadline));
            enum Wake {
                Stop,
                Tun(std::io::Result<()>),
                Udp(usize),
                Timer,
                Status,
                Watch,
                Signal(braid_pm::signal::Sample),
                Probe,
            }
            let wake = tokio::select! {
                biased;
                () = &mut stop => Wake::Stop,
                i = udp::readable(&self.socks, self.rotate) => Wake::Udp(i),
                r = self.tun.recv() => Wake::Tun(r),
                () = sleep => Wake::Timer,
                Some(s) = signal.recv() => Wake::Signal(s),
                _ = watch.tick(), if self.cfg.pm.watch_links => Wake::Watch,
                _ = status_tick.tick() => Wake::Status,
                _ = probe.tick() => Wake::Probe,
            };
            let now = self.clock.now();
            match wake {
                Wake::Stop => return Ok(()),
                Wake::Probe => self.probe(now).await,
                Wake::Tun(Ok(())) => {
                    self.on_tun(now);
                    for _ in 0..64 {
                        match self.tun.try_recv() {
                            Ok(true) => self.on_tun(now),
                            _ => break,
                        }
                    }
                }
                Wake::Tun(Err(e)) => return Err(DaemonError(format!("TUN read: {e}"))),
                Wake::Udp(i) => {
                    self.rotate = i + 1;
                    self.on_udp(now).await;
                }
                Wake::Timer => self.on_timer(now),
                Wake::Status => self.publish(shared),
                Wake::Watch => {
                    if self.watch_links(now) {
                        // An interface was re-addressed: tell the gateway the path's new
                        // address now rather than at the next keepalive, and again a few
                        // times: the address often comes before its route (a network manager
                        // adds the route next), and a probe sent in between is lost.
                        self.probe(now).await;
                        self.reprobes = (REPROBES, now + REPROBE_EVERY);
                    } else if self.reprobes.0 > 0 && now >= self.reprobes.1 {
                        self.probe(now).await;
                        self.reprobes = (self.reprobes.0 - 1, now + REPROBE_EVERY);
                    }
                }
                Wake::Signal(s) => self.on_signal(now, s),
            }
            self.flush(now).await;
        }
    }

    fn deadline(&self) -> braid_core::Instant {
        [
            self.tunnel.as_ref().and_then(|t| t.poll_timeout()),
            self.sec.poll_timeout(),
            self.pm.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(self.clock.now() + Duration::from_secs(1))
    }

    fn on_timer(&mut self, now: braid_core::Instant) {
        if self.sec.poll_timeout().is_some_and(|t| t <= now) {
            self.sec.handle_timeout(now, &mut self.rng);
        }
        if let Some(t) = &mut self.tunnel
            && t.poll_timeout().is_some_and(|d| d <= now)
        {
            t.handle_timeout(now);
        }
        if self.pm.poll_timeout().is_some_and(|t| t <= now) {
            self.pm.handle_timeout(now);
        }
    }

    fn on_tun(&mut self, now: braid_core::Instant) {
        let Client {
            tun,
            tunnel,
            drops,
            too_big,
            ..
        } = self;
        for packet in tun.packets() {
            if too_big.check(now, packet) {
                continue;
            }
            match tunnel {
                Some(t) => {
                    if t.push(now, packet).is_err() {
                        drops.ptos_refused += 1;
                    }
                }
                None => drops.no_connection += 1,
            }
        }
        too_big.flush(tun);
    }

    async fn on_udp(&mut self, now: braid_core::Instant) {
        let mut handled = 0;
        let mut replies = Vec::new();
        let mut rx = self.rx.take().unwrap_or_default();
        loop {
            let mut any = false;
            for i in 0..self.links.len() {
                if self.socks[i].try_recv(&mut rx) == 0 {
                    continue;
                }
                any = true;
                for (_from, dg) in rx.datagrams() {
                    handled += 1;
                    if let Some(r) = self.on_datagram(now, dg) {
                        replies.push((i, r));
                    }
                }
            }
            if !any || handled >= RX_BUDGET {
                break;
            }
        }
        self.rx = Some(rx);
        for (i, r) in replies {
            let to = self.links[i].gateway;
            self.drops.send_errors += self.socks[i].send(&r, to).await;
        }
    }

    fn on_datagram(&mut self, now: braid_core::Instant, dg: &[u8]) -> Option<Vec<u8>> {
        let plaintext = match self.sec.handle(now, dg) {
            Outcome::Reply(r) => return Some(r),
            Outcome::Drop(_) => return None,
            Outcome::Data { plaintext, .. } => plaintext,
        };
        if plaintext.is_empty() {
            return None;
        }
        let Some((id, core)) = tunnel::split(&plaintext) else {
            self.drops.short += 1;
            return None;
        };
        match &mut self.tunnel {
            Some(t) if t.id == id => {
                if core.is_empty() {
                    // The gateway echoed a liveness probe: paths that backed off during an
                    // outage retransmit now rather than seconds later.
                    t.conn.peer_alive(now);
                } else {
                    let _ = t.conn.handle_datagram(now, core);
                }
            }
            _ => self.drops.stale_connection += 1,
        }
        None
    }

    fn on_signal(&mut self, now: braid_core::Instant, s: braid_pm::signal::Sample) {
        match self.links.iter().position(|l| l.name == s.iface) {
            Some(i) => self.pm.handle_event(
                now,
                &pm::Event::Signal {
                    iface: pm::IfaceId(i as u32),
                    rssi_dbm: s.rssi_dbm,
                },
            ),
            None => {
                self.signal.unknown_iface.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Reads each link's operational state and addresses; a change of state is an
    /// interface/address event. Returns whether an up link's addresses changed.
    fn watch_links(&mut self, now: braid_core::Instant) -> bool {
        let names: Vec<&str> = self.links.iter().map(|l| l.name.as_str()).collect();
        let states = link_states(&names);
        let mut readdressed = false;
        for (i, (up, addrs)) in states.into_iter().enumerate() {
            if addrs != self.links[i].addrs {
                if up && !addrs.is_empty() {
                    info!(link = %self.links[i].name, ?addrs, "link addresses changed");
                    readdressed = true;
                }
                self.links[i].addrs = addrs;
            }
            if up == self.links[i].up {
                continue;
            }
            self.links[i].up = up;
            info!(link = %self.links[i].name, up, "link state changed");
            let iface = pm::IfaceId(i as u32);
            if up {
                self.pm.handle_event(now, &self.addr_new(i));
            } else {
                if let Some(t) = &mut self.tunnel {
                    t.conn.remove_local_addr(AddrId(i as u8));
                }
                self.pm.handle_event(
                    now,
                    &pm::Event::LocalAddrRemoved {
                        iface,
                        id: pm::AddrId(i as u8),
                    },
                );
            }
            if self.pm.config().mode.uses_signal() {
                self.pm
                    .handle_event(now, &pm::Event::IfaceUpdated { iface, up });
            }
        }
        readdressed
    }

    fn addr_new(&self, i: usize) -> pm::Event {
        pm::Event::LocalAddrNew {
            iface: pm::IfaceId(i as u32),
            id: pm::AddrId(i as u8),
            addr: Some(self.endpoint(i).addr.expect("always set").ip()),
        }
    }

    fn endpoint(&self, i: usize) -> pm::Endpoint {
        let ip = self.links[i].local_ip();
        pm::Endpoint {
            id: pm::AddrId(i as u8),
            addr: Some(SocketAddr::new(ip, 0)),
        }
    }

    fn gateway_endpoint(&self) -> pm::Endpoint {
        pm::Endpoint {
            id: pm::AddrId(0),
            addr: Some(self.links[0].gateway),
        }
    }

    /// The link for the secure layer's own datagrams: the first that is up.
    fn primary(&self) -> usize {
        self.links.iter().position(|l| l.up).unwrap_or(0)
    }

    async fn send_secure(&mut self, datagram: &[u8]) {
        let i = self.primary();
        let to = self.links[i].gateway;
        self.drops.send_errors += self.socks[i].send(datagram, to).await;
    }

    /// Sends the liveness probes of the current connection (see `tunnel::split`): one on
    /// every link that is up, naming the link's established path. The gateway learns from it
    /// the path's current address when the client has nothing else to send on the path (a
    /// download alone: the gateway's datagrams to a stale address bring nothing to
    /// acknowledge), and the link's NAT mapping is kept alive.
    async fn probe(&mut self, now: braid_core::Instant) {
        let Some(t) = &self.tunnel else {
            return;
        };
        let id = t.id;
        let probes: Vec<(usize, Option<PathId>)> = (0..self.links.len())
            .filter(|&i| self.links[i].up)
            .map(|i| {
                let path = t
                    .conn
                    .paths()
                    .find(|p| usize::from(p.local.0) == i && p.established)
                    .map(|p| p.id);
                (i, path)
            })
            .collect();
        for (i, path) in probes {
            tunnel::probe_plaintext(id, path, &mut self.plain);
            if self.sec.seal(now, &self.plain, &mut self.sealed).is_ok() {
                let to = self.links[i].gateway;
                self.drops.send_errors += self.socks[i].send(&self.sealed, to).await;
            }
        }
    }

    fn start_connection(&mut self, now: braid_core::Instant) {
        let id = loop {
            let id: u32 = self.rng.random();
            if id != 0 {
                break id;
            }
        };
        let mut t = Tunnel::new(self.core.clone(), Side::Client, now, id, self.ptos);
        t.gateway_instance = self.sec.gateway_instance();
        self.pathless_reported = false;
        self.pathless_with_link = None;
        let first = self.primary();
        self.first_link = first;
        let _ = t.conn.open_path(
            now,
            AddrId(first as u8),
            AddrId(0),
            self.links[first].backup,
        );
        self.tunnel = Some(t);
        self.conn_no += 1;
        self.connections += 1;
        info!(conn = format!("{id:08x}"), link = %self.links[first].name, "new connection");
        let e = pm::Event::ConnectionCreated {
            conn: pm::ConnId(self.conn_no),
            local: self.endpoint(first),
            remote: self.gateway_endpoint(),
            iface: Some(pm::IfaceId(first as u32)),
            initiator: true,
        };
        self.pm.handle_event(now, &e);
    }

    fn end_connection(&mut self, now: braid_core::Instant, why: &str) {
        if let Some(t) = self.tunnel.take() {
            info!(conn = format!("{:08x}", t.id), why, "connection dropped");
            self.pm.handle_event(
                now,
                &pm::Event::ConnectionClosed {
                    conn: pm::ConnId(self.conn_no),
                },
            );
        }
    }

    /// After any input: produce every datagram, then send the socket batches.
    async fn flush(&mut self, now: braid_core::Instant) {
        self.produce(now).await;
        self.flush_sockets().await;
    }

    async fn flush_sockets(&mut self) {
        for s in &mut self.socks {
            self.drops.send_errors += s.flush().await;
        }
    }

    async fn produce(&mut self, now: braid_core::Instant) {
        while let Some(ev) = self.sec.poll_event() {
            match ev {
                SecEvent::Established { index, .. } => {
                    debug!(index, "session established");
                    let instance = self.sec.gateway_instance();
                    let restarted = self.tunnel.as_ref().is_some_and(|t| {
                        t.gateway_instance.is_some() && instance != t.gateway_instance
                    });
                    if restarted {
                        // The new session is authenticated by the gateway's static key and
                        // names another run of it: the old one, and our connection, are gone.
                        self.replaced_restart += 1;
                        self.end_connection(now, "gateway restarted");
                    }
                    if self.tunnel.is_none() {
                        self.start_connection(now);
                    }
                }
                SecEvent::Expired { reason, .. } => {
                    warn!(?reason, "session with the gateway expired");
                    self.end_connection(now, "session expired");
                }
            }
        }
        while let Some(d) = self.sec.poll_transmit() {
            self.send_secure(&d).await;
        }
        self.run_pm(now);
        if !self.links.iter().any(|l| l.up) {
            self.sec.links_down();
        }
        self.check_paths(now);
        let Some(t) = &mut self.tunnel else {
            self.tun.flush().await;
            return;
        };
        let tun = &mut self.tun;
        if t.drain(|p| {
            tun.queue(p);
        })
        .is_err()
        {
            self.drops.stop_invalid += 1;
            self.end_connection(now, "invalid packet in the stream");
            self.tun.flush().await;
            return;
        }
        if t.conn.is_closed() {
            self.end_connection(now, "connection closed");
            self.tun.flush().await;
            return;
        }
        t.feed(now);
        while let Some(tx) = t.conn.poll_transmit(now, &mut self.dg) {
            let i = usize::from(tx.local.0);
            let (Some(l), Some(sock)) = (self.links.get(i), self.socks.get_mut(i)) else {
                continue;
            };
            self.plain.clear();
            self.plain.extend_from_slice(&t.id.to_be_bytes());
            self.plain.extend_from_slice(&self.dg[..tx.size]);
            if self.sec.seal(now, &self.plain, &mut self.sealed).is_err() {
                self.drops.no_session += 1;
                continue;
            }
            self.drops.send_errors += sock.send(&self.sealed, l.gateway).await;
        }
        self.tun.flush().await;
    }

    /// A connection with data queued and no usable path is logged after
    /// [`PATHLESS_REPORT`], and replaced once it has had no usable path for `dead_after_ms`
    /// of time with a link up: the path manager reopens paths as soon as links return, so
    /// this is the last resort when the connection cannot get one (the gateway lost it, or
    /// refuses its paths). Keepalives and probes alone never keep such a connection.
    fn check_paths(&mut self, now: braid_core::Instant) {
        let Some(t) = &mut self.tunnel else { return };
        let Some(pathless) = t.track_paths(now) else {
            self.pathless_reported = false;
            self.pathless_with_link = None;
            return;
        };
        if !self.links.iter().any(|l| l.up) {
            self.pathless_with_link = None;
        } else {
            self.pathless_with_link.get_or_insert(now);
        }
        if !t.conn.is_established() || t.queued() == 0 {
            return;
        }
        if pathless >= PATHLESS_REPORT && !self.pathless_reported {
            self.pathless_reported = true;
            warn!(
                conn = format!("{:08x}", t.id),
                queued = t.queued(),
                "no usable path; data waiting"
            );
        }
        let dead_after = Duration::from_millis(self.cfg.dead_after_ms.max(1));
        let with_link = self
            .pathless_with_link
            .map_or(Duration::ZERO, |t| now.saturating_since(t));
        if with_link >= dead_after && self.sec.has_session() {
            self.replaced_pathless += 1;
            self.end_connection(now, "no usable path for dead_after_ms");
            self.start_connection(now);
        }
    }

    /// Connection events to the path manager, its commands to the connection (as the
    /// simulator's `run_pm`).
    fn run_pm(&mut self, now: braid_core::Instant) {
        let conn_id = pm::ConnId(self.conn_no);
        loop {
            let mut progress = false;
            if let Some(t) = &mut self.tunnel {
                while let Some(e) = t.conn.poll_event() {
                    progress = true;
                    debug!(?e, "connection event");
                    if let Some(pe) = translate(conn_id, &e, &self.links, self.first_link as u8) {
                        self.pm.handle_event(now, &pe);
                    }
                }
            }
            while let Some(c) = self.pm.poll_command() {
                progress = true;
                if c.conn() == conn_id {
                    self.execute(now, c);
                }
            }
            if !progress {
                break;
            }
        }
    }

    fn execute(&mut self, now: braid_core::Instant, c: pm::Command) {
        let Some(t) = &mut self.tunnel else {
            return;
        };
        debug!(?c, "path manager command");
        let conn = &mut t.conn;
        match c {
            pm::Command::CreateSubflow {
                iface,
                local,
                remote,
                backup,
                ..
            } => {
                let l = usize::from(local.id.0);
                let opened = self.links.get(l).is_some_and(|l| l.up)
                    && conn
                        .open_path(now, AddrId(local.id.0), AddrId(remote.id.0), backup)
                        .is_ok();
                if !opened {
                    // Refused: the manager forgets the request and asks again later.
                    let e = pm::Event::SubflowClosed {
                        conn: pm::ConnId(self.conn_no),
                        subflow: None,
                        iface: Some(iface),
                    };
                    self.pm.handle_event(now, &e);
                }
            }
            pm::Command::RemoveSubflow { subflow, .. } => {
                let _ = conn.close_path(PathId(subflow.0 as u32));
            }
            pm::Command::SetBackup {
                subflow, backup, ..
            } => {
                let _ = conn.set_backup(PathId(subflow.0 as u32), backup);
            }
            pm::Command::AnnounceAddr { local, .. } => {
                if let Some(addr) = local.addr {
                    conn.announce_addr(AddrId(local.id.0), addr, false);
                }
            }
            pm::Command::WithdrawAddr { id, .. } => conn.remove_local_addr(AddrId(id.0)),
        }
    }

    fn publish(&self, shared: &Shared) {
        let mut drops = super::secure_drops(self.sec.stats());
        let d = &self.drops;
        for (k, v) in [
            ("short_plaintext", d.short),
            ("stale_connection", d.stale_connection),
            ("no_connection", d.no_connection),
            ("ptos_refused", d.ptos_refused),
            ("stop_invalid", d.stop_invalid),
            ("no_session", d.no_session),
            ("send_errors", d.send_errors),
        ] {
            drops.insert(k.into(), v.into());
        }
        let conns: Vec<Value> = self
            .tunnel
            .iter()
            .map(|t| {
                let dr = &t.conn.stats().dropped;
                for (k, v) in [
                    ("core_malformed", dr.malformed),
                    ("core_unknown_path", dr.unknown_path),
                    ("core_closed_path", dr.closed_path),
                    ("core_protocol", dr.protocol),
                    ("core_closed", dr.closed),
                ] {
                    drops.insert(k.into(), v.into());
                }
                let links = &self.links;
                let mut c = status::connection_json(&t.conn, |path| {
                    let p = t.conn.path(path)?;
                    let l = links.get(usize::from(p.local.0))?;
                    Some(format!("{} → {}", l.name, l.gateway))
                });
                c["peer"] = "gateway".into();
                c["conn_id"] = format!("{:08x}", t.id).into();
                c["pathless_s"] = t
                    .pathless(self.clock.now())
                    .map_or(0.0, |d| d.as_secs_f64())
                    .into();
                c["framing"] = t.framing_json();
                c
            })
            .collect();
        let v = json!({
            "role": "client",
            "uptime_s": self.clock.now().secs_f64(),
            "tun": {
                "name": self.cfg.tun.name,
                "write_errors": self.tun.write_errors,
                "too_big": self.too_big.json(),
            },
            "secure_state": format!("{:?}", self.sec.state()),
            "links": self.links.iter().map(|l| json!({
                "name": l.name, "up": l.up, "gateway": l.gateway.to_string(), "backup": l.backup,
            })).collect::<Vec<_>>(),
            "connections_started": self.connections,
            "connections_replaced": {
                "no_usable_path": self.replaced_pathless,
                "gateway_restarted": self.replaced_restart,
            },
            "udp": udp::io_json(&self.socks),
            "drops": drops,
            "secure": super::secure_json(self.sec.stats()),
            "signal": self.signal.to_json(),
            "pm": {
                "mode": format!("{:?}", self.pm.config().mode),
                "subflows_created": self.pm.stats().subflows_created,
                "subflows_removed": self.pm.stats().subflows_removed,
                "backup_set": self.pm.stats().backup_set,
                "backup_cleared": self.pm.stats().backup_cleared,
                "signal_samples": self.pm.stats().signal_samples,
            },
            "connections": conns,
        });
        if let Ok(mut s) = shared.lock() {
            *s = v;
        }
    }
}

/// Each interface's state: whether it is usable (IFF_UP and IFF_LOWER_UP, not IFF_DORMANT: up,
/// with a carrier, and for Wi-Fi authenticated) and its addresses (sorted). Not IFF_RUNNING: the
/// kernel derives it from the operational state, which its link-watch work updates up to 1 s
/// after the carrier changes when several links change at once; the carrier and dormant flags
/// are current at once. One getifaddrs dump over netlink, in the calling
/// thread's network namespace (not /sys, which shows the namespace it was mounted in). A
/// missing interface is down without addresses.
fn link_states(names: &[&str]) -> Vec<(bool, Vec<IpAddr>)> {
    use nix::net::if_::InterfaceFlags;
    let mut st = vec![(false, Vec::new()); names.len()];
    for a in nix::ifaddrs::getifaddrs().into_iter().flatten() {
        let Some(i) = names.iter().position(|n| *n == a.interface_name) else {
            continue;
        };
        st[i].0 |= a
            .flags
            .contains(InterfaceFlags::IFF_UP | InterfaceFlags::IFF_LOWER_UP)
            && !a.flags.contains(InterfaceFlags::IFF_DORMANT);
        let ip = a.address.and_then(|a| {
            a.as_sockaddr_in()
                .map(|s| IpAddr::V4(s.ip()))
                .or_else(|| a.as_sockaddr_in6().map(|s| IpAddr::V6(s.ip())))
        });
        st[i].1.extend(ip);
    }
    for (_, addrs) in &mut st {
        addrs.sort();
    }
    st
}

/// The connection's events as the path manager sees them (seed 000 Table I), as in the
/// simulator.
fn translate(conn: pm::ConnId, e: &Event, links: &[Link], first: u8) -> Option<pm::Event> {
    let endpoint = |i: u8| pm::Endpoint {
        id: pm::AddrId(i),
        addr: links
            .get(usize::from(i))
            .map(|l| SocketAddr::new(l.local_ip(), 0)),
    };
    let gateway = pm::Endpoint {
        id: pm::AddrId(0),
        addr: links.first().map(|l| l.gateway),
    };
    Some(match *e {
        Event::PathEstablished {
            path,
            local,
            remote,
            backup,
        } => pm::Event::SubflowEstablished {
            conn,
            subflow: pm::SubflowId(u64::from(path.0)),
            iface: Some(pm::IfaceId(u32::from(local.0))),
            local: endpoint(local.0),
            remote: pm::Endpoint {
                id: pm::AddrId(remote.0),
                addr: None,
            },
            backup,
        },
        Event::Connected => pm::Event::ConnectionEstablished {
            conn,
            subflow: Some(pm::SubflowId(0)),
            local: endpoint(first),
            remote: gateway,
            iface: Some(pm::IfaceId(u32::from(first))),
        },
        Event::PathClosed { path, local, .. } => pm::Event::SubflowClosed {
            conn,
            subflow: Some(pm::SubflowId(u64::from(path.0))),
            iface: Some(pm::IfaceId(u32::from(local.0))),
        },
        Event::PathPriority { path, backup, .. } => pm::Event::SubflowPriority {
            conn,
            subflow: pm::SubflowId(u64::from(path.0)),
            backup,
        },
        Event::PeerAddrAnnounced { id, addr, .. } => pm::Event::AddrAnnounced {
            conn,
            remote: pm::Endpoint {
                id: pm::AddrId(id.0),
                addr: Some(addr),
            },
        },
        Event::PeerAddrRemoved { id } => pm::Event::AddrRemoved {
            conn,
            id: pm::AddrId(id.0),
        },
        Event::Closed { .. } => pm::Event::ConnectionClosed { conn },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(gateway: &str, source: Option<&str>, addrs: &[&str]) -> Link {
        Link {
            name: "c0".into(),
            gateway: gateway.parse().unwrap(),
            source: source.map(|s| s.parse().unwrap()),
            backup: false,
            up: true,
            addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn local_ip_follows_the_gateway_family_and_prefers_global() {
        let addrs = ["10.0.1.2", "fd00:1::2", "fe80::1"];
        assert_eq!(
            link("10.0.8.2:7000", None, &addrs).local_ip().to_string(),
            "10.0.1.2"
        );
        assert_eq!(
            link("[fd00:9::1]:7000", None, &["fe80::1", "fd00:1::2"])
                .local_ip()
                .to_string(),
            "fd00:1::2"
        );
        assert_eq!(
            link("[fd00:9::1]:7000", None, &["fe80::1"])
                .local_ip()
                .to_string(),
            "fe80::1"
        );
        assert_eq!(
            link("[fd00:9::1]:7000", None, &["10.0.1.2"])
                .local_ip()
                .to_string(),
            "::"
        );
        assert_eq!(
            link("10.0.8.2:7000", Some("10.0.1.9"), &addrs)
                .local_ip()
                .to_string(),
            "10.0.1.9"
        );
    }
}
