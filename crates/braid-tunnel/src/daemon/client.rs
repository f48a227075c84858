//! `braid tunnel client` over UDP (transports `braid` and `datagram`): one connection to the
//! gateway over every configured link, driven by the path manager (braid-pm) as the simulator
//! drives it, with link state and signal samples as its inputs.
//!
//! Lifecycle: the secure layer's handshake comes first; when a session is established and
//! there is no connection, a new one starts (a fresh random connection id, the first path on
//! the first link that is up; the path manager opens the others). When the session expires
//! (the gateway stopped answering: restarted, or every link is down), the connection is
//! dropped with it, and the next session starts a new one. Re-keying keeps the connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use braid_core::{AddrId, Instant, PathId, Side};
use braid_io::signal::{SignalStats, spawn_socket};
use braid_pm::{self as pm, PathManager};
use rand::RngExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::common::DaemonError;
use super::config::{ClientConfig, Transport as TransportName};
use super::links::{Link, link_states};
use super::pm_glue::Pm;
use super::run::Transport;
use super::tun::Tun;
use super::tunnel::{self, Tunnel, TunnelConfig};
use super::udp;
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
/// How often the paths of the links that are up are measured again (`udp::path_payload`).
const REMEASURE: Duration = Duration::from_secs(1);
/// Probes after a re-addressing beyond the first, and how far apart.
const REPROBES: u8 = 3;
const REPROBE_EVERY: Duration = Duration::from_millis(100);

/// What wakes the client besides the TUN device and its timers.
pub(crate) enum Input {
    /// A socket is readable (its index).
    Udp(usize),
    /// A signal sample.
    Signal(braid_pm::signal::Sample),
    /// Time to read the links' state.
    Watch,
    /// Time for the liveness probes.
    Probe,
}

pub(crate) struct Client {
    cfg: ClientConfig,
    links: Vec<Link>,
    /// One socket per link, in the same order.
    socks: Vec<udp::Socket>,
    /// The link of the connection's first path.
    first_link: usize,
    /// The link the next handshake datagram goes over: they take the links that are up in
    /// turn, so a link that is up but carries nothing (no uplink behind an access point, a
    /// dead hop) cannot hold the handshake.
    secure_next: usize,
    /// The link whose datagram completed the latest handshake: it reaches the gateway, so the
    /// connection's first path goes over it.
    answered_link: Option<usize>,
    sec: Initiator,
    tunnel: Option<Tunnel>,
    pm: Pm,
    tcfg: TunnelConfig,
    rng: rand::rngs::ThreadRng,
    signal: Arc<SignalStats>,
    signal_rx: mpsc::Receiver<braid_pm::signal::Sample>,
    signal_task: Option<tokio::task::JoinHandle<()>>,
    watch: tokio::time::Interval,
    probe_tick: tokio::time::Interval,
    drops: udp::Drops,
    connections: u64,
    /// Receive buffers, taken while datagrams are handled.
    rx: Option<udp::RxBatch>,
    /// Plaintext and sealed datagram buffers.
    bufs: (Vec<u8>, Vec<u8>),
    replies: Vec<(usize, SocketAddr, Vec<u8>)>,
    rotate: usize,
    /// The current connection's pathless episode was logged.
    pathless_reported: bool,
    /// After a re-addressing, probes still to send (one per watch tick at least
    /// [`REPROBE_EVERY`] apart) and when the next may go.
    reprobes: (u8, Instant),
    /// Since when the connection has had no usable path although a link was up and the
    /// gateway answered (the replacement clock: time with every link down or the gateway
    /// silent does not count).
    pathless_with_link: Option<Instant>,
    /// When the last authenticated datagram from the gateway arrived.
    heard_at: Option<Instant>,
    /// Connections replaced because they had no usable path for `dead_after_ms`.
    replaced_pathless: u64,
    /// Connections replaced because the gateway restarted (another instance answered).
    replaced_restart: u64,
    /// Connections replaced because the gateway said it had ended them (`tunnel::GONE`).
    replaced_gone: u64,
    /// The largest UDP payload of the current connection's datagrams.
    conn_payload: usize,
    /// Connections replaced because a link came up whose path carries less than that.
    replaced_mtu: u64,
    /// A link came up whose path carries smaller datagrams than the connection sends: a new
    /// handshake (announcing the smaller size) and then a new connection.
    restart_for_mtu: bool,
    /// When the links' paths were last measured.
    measured_at: Instant,
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(t) = &self.signal_task {
            t.abort();
        }
    }
}

impl Client {
    pub fn new(cfg: ClientConfig, now: Instant) -> Result<Client, DaemonError> {
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
            let payload = up
                .then(|| udp::path_payload(Some(&l.name), l.source, gateway))
                .flatten();
            links.push(Link {
                name: l.name.clone(),
                gateway,
                source: l.source,
                backup: l.backup,
                up,
                addrs,
                payload,
            });
        }
        let tcfg = cfg.tunnel_config()?;
        let manager = pm::Manager::new(cfg.pm_config()?).map_err(DaemonError)?;
        let signal = Arc::new(SignalStats::default());
        let (sig_tx, signal_rx) = mpsc::channel(1024);
        let signal_task = match &cfg.pm.signal {
            Some(path) => Some(
                spawn_socket(path, sig_tx, signal.clone())
                    .map_err(|e| DaemonError(e.to_string()))?,
            ),
            None => None,
        };
        let mut watch =
            tokio::time::interval(Duration::from_millis(cfg.pm.watch_interval_ms.max(1)));
        watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut probe_tick = tokio::time::interval(Duration::from_millis(cfg.keepalive_ms.max(1)));
        probe_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut c = Client {
            links,
            socks,
            first_link: 0,
            secure_next: 0,
            answered_link: None,
            sec,
            tunnel: None,
            pm: Pm {
                traffic: None,
                manager,
                conn_no: 0,
            },
            tcfg,
            rng: rand::rng(),
            signal,
            signal_rx,
            signal_task,
            watch,
            probe_tick,
            drops: udp::Drops::default(),
            connections: 0,
            rx: Some(udp::RxBatch::default()),
            bufs: (Vec::with_capacity(2048), Vec::with_capacity(2048)),
            replies: Vec::new(),
            rotate: 0,
            pathless_reported: false,
            reprobes: (0, Instant::ZERO),
            pathless_with_link: None,
            heard_at: None,
            replaced_pathless: 0,
            replaced_restart: 0,
            replaced_gone: 0,
            conn_payload: 0,
            replaced_mtu: 0,
            restart_for_mtu: false,
            measured_at: now,
            cfg,
        };
        let own = c.own_payload();
        c.sec
            .set_max_datagram(u16::try_from(own).unwrap_or(u16::MAX));
        for i in 0..c.links.len() {
            let up = c.links[i].up;
            let e = pm::Event::IfaceNew {
                iface: pm::IfaceId(i as u32),
                name: c.links[i].name.clone(),
                up,
            };
            c.pm.event(now, &e);
            if up {
                let e = c.addr_new(i);
                c.pm.event(now, &e);
            }
        }
        info!(
            links = ?c.links.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(),
            tun = %c.cfg.tun.name,
            "client running"
        );
        Ok(c)
    }
}

impl Transport for Client {
    type Input = Input;

    async fn start(&mut self, now: Instant) {
        let init = self.sec.start(now, &mut self.rng);
        self.send_secure(&init).await;
        self.flush_sockets().await;
    }

    async fn wait(&mut self) -> Input {
        tokio::select! {
            biased;
            i = udp::readable(&self.socks, self.rotate) => Input::Udp(i),
            Some(s) = self.signal_rx.recv() => Input::Signal(s),
            _ = self.watch.tick(), if self.cfg.pm.watch_links => Input::Watch,
            _ = self.probe_tick.tick() => Input::Probe,
        }
    }

    async fn on_input(
        &mut self,
        now: Instant,
        input: Input,
        _tun: &mut Tun,
    ) -> Result<(), DaemonError> {
        match input {
            Input::Udp(i) => {
                self.rotate = i + 1;
                self.on_udp(now).await;
            }
            Input::Signal(s) => self.on_signal(now, s),
            Input::Probe => self.probe(now).await,
            Input::Watch => {
                let readdressed = self.watch_links(now);
                if std::mem::take(&mut self.restart_for_mtu) {
                    self.start(now).await;
                }
                if readdressed {
                    // An interface was re-addressed: tell the gateway the path's new address
                    // now rather than at the next keepalive, and again a few times: the
                    // address often comes before its route (a network manager adds the route
                    // next), and a probe sent in between is lost.
                    self.probe(now).await;
                    self.reprobes = (REPROBES, now + REPROBE_EVERY);
                } else if self.reprobes.0 > 0 && now >= self.reprobes.1 {
                    self.probe(now).await;
                    self.reprobes = (self.reprobes.0 - 1, now + REPROBE_EVERY);
                }
            }
        }
        Ok(())
    }

    fn on_packet(&mut self, now: Instant, packet: &[u8]) {
        match &mut self.tunnel {
            Some(t) => {
                if t.push(now, packet).is_err() {
                    self.drops.ptos_refused += 1;
                }
            }
            None => self.drops.no_connection += 1,
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [
            self.tunnel.as_ref().and_then(|t| t.poll_timeout()),
            self.sec.poll_timeout(),
            self.pm.manager.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn on_timeout(&mut self, now: Instant) {
        if self.sec.poll_timeout().is_some_and(|t| t <= now) {
            self.sec.handle_timeout(now, &mut self.rng);
        }
        if let Some(t) = &mut self.tunnel
            && t.poll_timeout().is_some_and(|d| d <= now)
        {
            t.handle_timeout(now);
        }
        if self.pm.manager.poll_timeout().is_some_and(|t| t <= now) {
            self.pm.manager.handle_timeout(now);
        }
    }

    /// After any input: the secure layer's events and datagrams, the path manager, the
    /// stream to the TUN device, every datagram of the connection, then the socket batches.
    async fn flush(&mut self, now: Instant, tun: &mut Tun) {
        self.produce(now, tun).await;
        self.flush_sockets().await;
    }

    fn status(&self, now: Instant) -> Value {
        let conns: Vec<Value> = self
            .tunnel
            .iter()
            .map(|t| {
                let links = &self.links;
                let mut c = t.status_json(now, |path| {
                    let p = t.conn.path(path)?;
                    let l = links.get(usize::from(p.local.0))?;
                    Some(format!("{} → {}", l.name, l.gateway))
                });
                c["peer"] = "gateway".into();
                c
            })
            .collect();
        let manager = &self.pm.manager;
        json!({
            "role": "client",
            "transport": transport_name(self.cfg.transport),
            "secure_state": format!("{:?}", self.sec.state()),
            "links": self.links.iter().map(|l| json!({
                "name": l.name, "up": l.up, "gateway": l.gateway.to_string(), "backup": l.backup,
                "path_payload": l.payload,
            })).collect::<Vec<_>>(),
            "connections_started": self.connections,
            "datagram_payload": self.tunnel.as_ref().map(|_| self.conn_payload),
            "gateway_datagram_payload": self.sec.gateway_max_datagram(),
            "connections_replaced": {
                "no_usable_path": self.replaced_pathless,
                "gateway_restarted": self.replaced_restart,
                "gateway_ended_it": self.replaced_gone,
                "smaller_path_mtu": self.replaced_mtu,
            },
            "udp": udp::io_json(&self.socks),
            "drops": self.drops.json(self.sec.stats(), self.tunnel.iter()),
            "secure": udp::secure_json(self.sec.stats()),
            "signal": self.signal.to_json(),
            "pm": {
                "mode": format!("{:?}", manager.config().mode),
                "subflows_created": manager.stats().subflows_created,
                "subflows_removed": manager.stats().subflows_removed,
                "backup_set": manager.stats().backup_set,
                "backup_cleared": manager.stats().backup_cleared,
                "signal_samples": manager.stats().signal_samples,
                "traffic_samples": manager.stats().traffic_samples,
                "demotions_withheld": manager.stats().demotions_withheld,
                "backups_held": manager.stats().backups_held,
                "initial_reopened": manager.stats().initial_reopened,
                "demand_bps": manager.demand_bps(),
                "ifaces": manager.ifaces().map(|i| json!({
                    "name": i.name, "rssi_dbm": i.rssi_dbm, "good": i.good,
                    "rate_bps": i.rate_bps, "carried_bps": i.carried_bps,
                })).collect::<Vec<_>>(),
            },
            "connections": conns,
            // The path manager's last decisions, as `braid pm status` gives them.
            "decisions": manager.decisions().iter().rev().take(20).map(|d| json!({
                "t_s": d.at.secs_f64(),
                "iface": self.links.get(d.iface.0 as usize).map_or_else(|| d.iface.0.to_string(), |l| l.name.clone()),
                "command": d.command.describe(),
                "reason": d.reason.name(),
                "rssi_dbm": d.rssi_dbm,
            })).collect::<Vec<_>>(),
        })
    }
}

/// The configuration name of a transport, for the status document.
pub(crate) fn transport_name(t: TransportName) -> &'static str {
    match t {
        TransportName::Braid => "braid",
        TransportName::Mptcp => "mptcp",
        TransportName::Datagram => "datagram",
    }
}

impl Client {
    async fn on_udp(&mut self, now: Instant) {
        let mut rx = self.rx.take().unwrap_or_default();
        let mut socks = std::mem::take(&mut self.socks);
        udp::recv_all(&mut socks, &mut rx, RX_BUDGET, |i, _from, dg| {
            let sessions = self.sec.stats().sessions_established;
            let reply = self.on_datagram(now, dg);
            if self.sec.stats().sessions_established > sessions {
                self.answered_link = Some(i);
            }
            if let Some(r) = reply {
                let to = self.links[i].gateway;
                self.replies.push((i, to, r));
            }
        });
        self.socks = socks;
        self.rx = Some(rx);
        udp::send_all(&mut self.socks, &mut self.replies, &mut self.drops).await;
    }

    fn on_datagram(&mut self, now: Instant, dg: &[u8]) -> Option<Vec<u8>> {
        let plaintext = match self.sec.handle(now, dg) {
            Outcome::Reply(r) => return Some(r),
            Outcome::Drop(_) => return None,
            Outcome::Data { plaintext, .. } => plaintext,
        };
        self.heard_at = Some(now);
        if plaintext.is_empty() {
            return None;
        }
        let Some((id, core)) = tunnel::split(&plaintext) else {
            self.drops.short += 1;
            return None;
        };
        match &mut self.tunnel {
            Some(t) if t.id == id && core == tunnel::GONE => {
                // The gateway ended this connection (its session expired while every link was
                // away): a new one now, not after `dead_after_ms`.
                self.replaced_gone += 1;
                self.end_connection(now, "the gateway no longer has it");
                self.start_connection(now);
            }
            Some(t) if t.id == id => {
                if core.is_empty() {
                    // The gateway echoed a liveness probe: paths that backed off during an
                    // outage retransmit now rather than seconds later.
                    t.conn.peer_alive(now);
                } else {
                    t.handle(now, core);
                }
            }
            _ => self.drops.stale_connection += 1,
        }
        None
    }

    fn on_signal(&mut self, now: Instant, s: braid_pm::signal::Sample) {
        match self.links.iter().position(|l| l.name == s.iface) {
            Some(i) => self.pm.event(
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
    fn watch_links(&mut self, now: Instant) -> bool {
        let names: Vec<&str> = self.links.iter().map(|l| l.name.as_str()).collect();
        let states = link_states(&names);
        let mut readdressed = false;
        // Paths narrow without the link changing (a router's ICMP "fragmentation needed" lowers
        // the kernel's path MTU): looked at again every REMEASURE.
        let remeasure = now.saturating_since(self.measured_at) >= REMEASURE;
        if remeasure {
            self.measured_at = now;
        }
        for (i, (up, addrs)) in states.into_iter().enumerate() {
            let mut measure = false;
            if addrs != self.links[i].addrs {
                if up && !addrs.is_empty() {
                    info!(link = %self.links[i].name, ?addrs, "link addresses changed");
                    readdressed = true;
                    measure = true;
                }
                self.links[i].addrs = addrs;
            }
            if up && (measure || !self.links[i].up || remeasure) {
                self.measure_payload(now, i);
            }
            if up == self.links[i].up {
                continue;
            }
            self.links[i].up = up;
            info!(link = %self.links[i].name, up, "link state changed");
            let iface = pm::IfaceId(i as u32);
            if up {
                let e = self.addr_new(i);
                self.pm.event(now, &e);
            } else {
                if let Some(t) = &mut self.tunnel {
                    t.conn.remove_local_addr(AddrId(i as u8));
                }
                self.pm.event(
                    now,
                    &pm::Event::LocalAddrRemoved {
                        iface,
                        id: pm::AddrId(i as u8),
                    },
                );
            }
            if self.pm.manager.config().mode.uses_signal() {
                self.pm.event(now, &pm::Event::IfaceUpdated { iface, up });
            }
        }
        // The next handshakes announce what the links up now carry.
        let own = self.own_payload();
        self.sec
            .set_max_datagram(u16::try_from(own).unwrap_or(u16::MAX));
        readdressed
    }

    /// The largest UDP payload our datagrams may have: the configured core size's, else a
    /// 1500-byte path's or less, the smallest that the path of a link that is up carries.
    fn own_payload(&self) -> usize {
        let configured = self.tcfg.udp_payload();
        if self.cfg.connection.max_datagram_size != 0 {
            return configured;
        }
        self.links
            .iter()
            .filter(|l| l.up)
            .filter_map(|l| l.payload)
            .fold(configured, usize::min)
    }

    /// Measures link `i`'s path (it is up). A path that carries less than the connection's
    /// datagrams would lose them all: the connection is replaced after a new handshake.
    fn measure_payload(&mut self, now: Instant, i: usize) {
        let link = &self.links[i];
        let payload = udp::path_payload(Some(&link.name), link.source, link.gateway);
        self.links[i].payload = payload;
        if let Some(bytes) = payload
            && self.tunnel.is_some()
            && bytes < self.conn_payload
            && self.cfg.connection.max_datagram_size == 0
        {
            warn!(
                link = %self.links[i].name,
                carries = bytes,
                sent = self.conn_payload,
                "the link's path carries smaller datagrams than the connection sends: new connection"
            );
            self.replaced_mtu += 1;
            self.end_connection(now, "a link's path carries smaller datagrams");
            self.restart_for_mtu = true;
        }
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

    /// The link for the secure layer's own datagrams: the first that is up.
    fn primary(&self) -> usize {
        self.links.iter().position(|l| l.up).unwrap_or(0)
    }

    async fn send_secure(&mut self, datagram: &[u8]) {
        let n = self.links.len();
        let i = (0..n)
            .map(|k| (self.secure_next + k) % n)
            .find(|&i| self.links[i].up)
            .unwrap_or(0);
        self.secure_next = i + 1;
        let to = self.links[i].gateway;
        self.drops.send_errors += self.socks[i].send(datagram, to).await;
    }

    /// Sends the liveness probes of the current connection (see `tunnel::split`): one on
    /// every link that is up, naming the link's established path. The gateway learns from it
    /// the path's current address when the client has nothing else to send on the path (a
    /// download alone: the gateway's datagrams to a stale address bring nothing to
    /// acknowledge), and the link's NAT mapping is kept alive.
    async fn probe(&mut self, now: Instant) {
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
        let (plain, sealed) = &mut self.bufs;
        for (i, path) in probes {
            tunnel::probe_plaintext(id, path, plain);
            if self.sec.seal(now, plain, sealed).is_ok() {
                let to = self.links[i].gateway;
                self.drops.send_errors += self.socks[i].send(sealed, to).await;
            }
        }
    }

    fn start_connection(&mut self, now: Instant) {
        let id = loop {
            let id: u32 = self.rng.random();
            if id != 0 {
                break id;
            }
        };
        // Datagrams that every link up and the gateway take (a gateway that announced
        // nothing takes the configured size).
        let own = self.own_payload();
        let gateway = self
            .sec
            .gateway_max_datagram()
            .map_or(self.tcfg.udp_payload(), usize::from);
        let payload = own.min(gateway);
        let tcfg = self.tcfg.for_udp_payload(payload);
        self.conn_payload = tcfg.udp_payload();
        if self.conn_payload != self.tcfg.udp_payload() {
            info!(
                bytes = self.conn_payload,
                links = own,
                gateway,
                "datagrams sized to the links' and the gateway's"
            );
        }
        let mut t = Tunnel::new(&tcfg, Side::Client, now, id);
        t.gateway_instance = self.sec.gateway_instance();
        self.pathless_reported = false;
        self.pathless_with_link = None;
        let first = self
            .answered_link
            .filter(|&i| i < self.links.len() && self.links[i].up)
            .unwrap_or_else(|| self.primary());
        self.first_link = first;
        let _ = t.conn.open_path(
            now,
            AddrId(first as u8),
            AddrId(0),
            self.links[first].backup,
        );
        self.tunnel = Some(t);
        self.pm.conn_no += 1;
        self.connections += 1;
        info!(conn = format!("{id:08x}"), link = %self.links[first].name, "new connection");
        let e = self.pm.created(&self.links, first as u8);
        self.pm.event(now, &e);
    }

    fn end_connection(&mut self, now: Instant, why: &str) {
        if let Some(t) = self.tunnel.take() {
            info!(conn = format!("{:08x}", t.id), why, "connection dropped");
            let e = pm::Event::ConnectionClosed {
                conn: self.pm.conn(),
            };
            self.pm.event(now, &e);
        }
    }

    async fn flush_sockets(&mut self) {
        for s in &mut self.socks {
            self.drops.send_errors += s.flush().await;
        }
    }

    async fn produce(&mut self, now: Instant, tun: &mut Tun) {
        let mut probe_now = false;
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
                    match &mut self.tunnel {
                        // The gateway answered: paths that backed off while it was out of
                        // reach (every link silent) retransmit now, and the liveness probes
                        // tell the gateway's paths the same at once, not a keepalive later.
                        Some(t) => {
                            t.conn.peer_alive(now);
                            probe_now = true;
                        }
                        None => self.start_connection(now),
                    }
                }
                SecEvent::Expired { reason, .. } => {
                    // The connection outlives the session: a new handshake follows, and a
                    // gateway that lost the connection says so (`tunnel::GONE`) or, restarted,
                    // answers as another instance; either replaces it then. Ending it here
                    // dropped what it held after any few seconds of silent links.
                    warn!(
                        ?reason,
                        "session with the gateway expired; handshaking again"
                    );
                }
            }
        }
        while let Some(d) = self.sec.poll_transmit() {
            self.send_secure(&d).await;
        }
        if probe_now {
            self.probe(now).await;
        }
        let first = self.first_link as u8;
        self.pm.run(
            now,
            self.tunnel.as_mut().map(|t| &mut t.conn),
            &self.links,
            first,
        );
        if !self.links.iter().any(|l| l.up) {
            self.sec.links_down();
        }
        self.check_paths(now);
        let Some(t) = &mut self.tunnel else {
            return;
        };
        if t.drain(|p| {
            tun.queue(p);
        })
        .is_err()
        {
            self.drops.stop_invalid += 1;
            self.end_connection(now, "invalid packet in the stream");
            return;
        }
        if t.conn.is_closed() {
            self.end_connection(now, "connection closed");
            return;
        }
        t.feed(now);
        let Client {
            links,
            socks,
            sec,
            drops,
            bufs,
            ..
        } = self;
        udp::send_tunnel(
            t,
            now,
            bufs,
            socks,
            drops,
            |out| {
                let i = usize::from(out.local.0);
                links.get(i).map(|l| (i, l.gateway))
            },
            |plain, sealed| sec.seal(now, plain, sealed).is_ok(),
        )
        .await;
    }

    /// How recently the gateway must have been heard to count as answering: the liveness
    /// probes go every `keepalive_ms` and it echoes each, so two of them plus a second.
    fn answer_window(&self) -> Duration {
        Duration::from_millis(self.cfg.keepalive_ms.max(1)) * 2 + Duration::from_secs(1)
    }

    /// A connection with data queued and no usable path is logged after
    /// [`PATHLESS_REPORT`], and replaced once it has had no usable path for `dead_after_ms`
    /// of time with a link up and the gateway answering: the path manager reopens paths as
    /// soon as links return, so this is the last resort when the connection cannot get one
    /// although the gateway is there (it lost the connection, or refuses its paths).
    /// Keepalives and probes alone never keep such a connection. Time with every link down
    /// or silent does not count: the connection keeps what it holds for when they return,
    /// and its paths retransmit as soon as the gateway answers.
    fn check_paths(&mut self, now: Instant) {
        let window = self.answer_window();
        let Some(t) = &mut self.tunnel else { return };
        let Some(pathless) = t.track_paths(now) else {
            self.pathless_reported = false;
            self.pathless_with_link = None;
            return;
        };
        let answering = self
            .heard_at
            .is_some_and(|h| now.saturating_since(h) <= window);
        if !self.links.iter().any(|l| l.up) || !answering {
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
}
