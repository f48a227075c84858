//! `braid tunnel gateway`: many clients, each its own [`Tunnel`] (connection), found through
//! the secure session's peer; one TUN device whose packets go to the client owning their
//! destination (`allowed_ips`).
//!
//! A path's peer address is the source of the latest datagram that authenticated and that the
//! connection accepted on that path (one of its core datagrams, or the client's liveness probe
//! naming it, which comes every keepalive interval on each link), so a client behind a NAT
//! that rebinds, or that changes address, keeps its connection: answers follow it at once, or
//! within a keepalive interval when the client has nothing else to send on that path.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use braid_core::{Config, PathId, Side};
use rand::RngExt;
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use super::config::{GatewayConfig, Prefix, batch};
use super::status::{self, Shared};
use super::tun::{TooBig, Tun};
use super::tunnel::{self, Tunnel};
use super::{Clock, DaemonError, STATUS_EVERY, udp};
use crate::frame::PtoSConfig;
use crate::secure::{
    AllowedPeer, Event as SecEvent, Keypair, Outcome, PeerId, Responder, ResponderConfig,
};

/// Datagrams handled per wake-up before transmits are polled.
const RX_BUDGET: usize = 512;
/// Connection ids of replaced connections remembered per client.
const RETIRED_IDS: usize = 8;

/// Runs the gateway until SIGINT or SIGTERM.
pub async fn run_gateway(cfg: GatewayConfig) -> Result<(), DaemonError> {
    run_gateway_until(cfg, super::shutdown_signal()).await
}

/// Runs the gateway until `stop` resolves (tests, embedding).
pub async fn run_gateway_until(
    cfg: GatewayConfig,
    stop: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    if cfg.transport == super::Transport::Mptcp {
        return super::stream::run_gateway(cfg, stop).await;
    }
    let mut gw = Gateway::new(cfg)?;
    let shared: Shared = Arc::new(Mutex::new(Value::Null));
    gw.publish(&shared);
    let tasks = status::serve_ops(&gw.cfg.ops, &shared).await?;
    info!(
        listen = ?gw.cfg.listen,
        clients = gw.peers.len(),
        tun = %gw.cfg.tun.name,
        "gateway running"
    );
    let r = gw.run(stop, &shared).await;
    for t in tasks {
        t.abort();
    }
    if let Some(p) = &gw.cfg.ops.control {
        let _ = std::fs::remove_file(p);
    }
    info!("gateway stopped");
    r
}

#[derive(Debug, Default)]
struct Drops {
    /// A plaintext too short to hold a connection id.
    short: u64,
    /// A datagram of a connection the client replaced.
    stale_connection: u64,
    /// An inner packet whose source is not among the client's `allowed_ips`.
    inner_source: u64,
    /// A TUN packet for an address no connected client owns.
    no_route: u64,
    /// A TUN packet refused by PtoS (full buffer or invalid).
    ptos_refused: u64,
    /// Connections reset because StoP met an invalid packet.
    stop_invalid: u64,
    /// Datagrams that could not be sealed (no current session).
    no_session: u64,
    /// Datagrams the socket refused (no route, interface down).
    send_errors: u64,
}

struct Peer {
    name: String,
    allowed: Vec<Prefix>,
    tunnel: Option<Tunnel>,
    /// Where each path was last heard from: (socket, address).
    addrs: HashMap<PathId, (usize, SocketAddr)>,
    /// The latest authenticated source.
    last: Option<(usize, SocketAddr)>,
    retired: Vec<u32>,
    connections: u64,
}

struct Gateway {
    cfg: GatewayConfig,
    clock: Clock,
    socks: Vec<udp::Socket>,
    tun: Tun,
    too_big: TooBig,
    sec: Responder,
    peers: Vec<Peer>,
    core: Arc<Config>,
    ptos: PtoSConfig,
    rng: rand::rngs::ThreadRng,
    drops: Drops,
    /// Receive buffers, taken while datagrams are handled.
    rx: Option<udp::RxBatch>,
    dg: Vec<u8>,
    plain: Vec<u8>,
    sealed: Vec<u8>,
    replies: Vec<(usize, SocketAddr, Vec<u8>)>,
    /// Clients whose liveness probe is to be echoed.
    probes: Vec<PeerId>,
    rotate: usize,
}

impl Gateway {
    fn new(cfg: GatewayConfig) -> Result<Gateway, DaemonError> {
        let keypair = Keypair::from_private(cfg.private_key()?);
        let rcfg = ResponderConfig {
            idle_timeout: std::time::Duration::from_millis(cfg.client_timeout_ms),
            max_session_age: ResponderConfig::default()
                .max_session_age
                .max(std::time::Duration::from_millis(cfg.client_timeout_ms)),
            ..ResponderConfig::default()
        };
        let mut sec =
            Responder::new(keypair, [], rcfg).map_err(|e| DaemonError(format!("gateway: {e}")))?;
        // This run's instance: clients that find another one in a new session know at once
        // that their connection is gone (see `Responder::set_instance`).
        sec.set_instance(rand::rng().random_range(1..=u64::MAX));
        let mut peers = Vec::new();
        for (i, c) in cfg.clients.iter().enumerate() {
            let public = crate::secure::PublicKey::from_base64(c.public_key.trim())
                .map_err(|e| DaemonError(format!("client[{i}].public_key: {e}")))?;
            let name = c
                .name
                .clone()
                .unwrap_or_else(|| c.public_key.chars().take(8).collect());
            let id = sec
                .add_peer(AllowedPeer {
                    name: name.clone(),
                    public,
                })
                .map_err(|e| DaemonError(format!("client[{i}]: {e}")))?;
            debug_assert_eq!(id.0 as usize, peers.len());
            peers.push(Peer {
                name,
                allowed: c
                    .allowed_ips
                    .iter()
                    .filter_map(|a| Prefix::parse(a).ok())
                    .collect(),
                tunnel: None,
                addrs: HashMap::new(),
                last: None,
                retired: Vec::new(),
                connections: 0,
            });
        }
        let mut socks = Vec::new();
        let v6_only = cfg.listen.iter().any(|a| a.is_ipv4());
        for a in &cfg.listen {
            socks.push(
                udp::listen_socket(*a, v6_only).map_err(|e| DaemonError(format!("listen: {e}")))?,
            );
        }
        let outer = if cfg.listen.iter().any(|a| a.is_ipv6()) {
            1452
        } else {
            1472
        };
        let core = Arc::new(cfg.core_config(outer)?);
        let ptos = batch(&cfg.batch, core.max_datagram_size - 40, cfg.tun.mtu)?;
        let tun = Tun::create(&cfg.tun).map_err(|e| DaemonError(e.to_string()))?;
        Ok(Gateway {
            too_big: TooBig::new(cfg.tun.mtu),
            clock: Clock::start(),
            socks,
            tun,
            sec,
            peers,
            core,
            ptos,
            rng: rand::rng(),
            drops: Drops::default(),
            rx: Some(udp::RxBatch::default()),
            dg: Vec::with_capacity(2048),
            plain: Vec::with_capacity(2048),
            sealed: Vec::with_capacity(2048),
            replies: Vec::new(),
            probes: Vec::new(),
            rotate: 0,
            cfg,
        })
    }

    async fn run(
        &mut self,
        stop: impl Future<Output = ()>,
        shared: &Shared,
    ) -> Result<(), DaemonError> {
        tokio::pin!(stop);
        let mut status_tick = tokio::time::interval(STATUS_EVERY);
        loop {
            let deadline = self.deadline();
            let sleep = tokio::time::sleep_until(self.clock.tokio(deadline));
            enum Wake {
                Stop,
                Tun(std::io::Result<()>),
                Udp(usize),
                Timer,
                Status,
            }
            let wake = tokio::select! {
                biased;
                () = &mut stop => Wake::Stop,
                i = udp::readable(&self.socks, self.rotate) => Wake::Udp(i),
                r = self.tun.recv() => Wake::Tun(r),
                () = sleep => Wake::Timer,
                _ = status_tick.tick() => Wake::Status,
            };
            let now = self.clock.now();
            match wake {
                Wake::Stop => return Ok(()),
                Wake::Tun(Ok(())) => {
                    self.on_tun(now);
                    // Drain what else is waiting, bounded so sockets get their turn.
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
            }
            self.flush(now).await;
        }
    }

    fn deadline(&self) -> braid_core::Instant {
        let conns = self
            .peers
            .iter()
            .filter_map(|p| p.tunnel.as_ref()?.poll_timeout());
        conns
            .chain(self.sec.poll_timeout())
            .min()
            .unwrap_or(self.clock.now() + std::time::Duration::from_secs(1))
    }

    fn on_timer(&mut self, now: braid_core::Instant) {
        if self.sec.poll_timeout().is_some_and(|t| t <= now) {
            self.sec.handle_timeout(now);
        }
        for p in &mut self.peers {
            if let Some(t) = &mut p.tunnel
                && t.poll_timeout().is_some_and(|d| d <= now)
            {
                t.handle_timeout(now);
            }
        }
    }

    fn on_tun(&mut self, now: braid_core::Instant) {
        let Gateway {
            tun,
            peers,
            drops,
            too_big,
            ..
        } = self;
        for packet in tun.packets() {
            if too_big.check(now, packet) {
                continue;
            }
            let Some(dst) = destination(packet) else {
                drops.no_route += 1;
                continue;
            };
            let Some(t) = peers
                .iter_mut()
                .filter(|p| p.allowed.iter().any(|a| a.contains(dst)))
                .find_map(|p| p.tunnel.as_mut())
            else {
                drops.no_route += 1;
                continue;
            };
            if t.push(now, packet).is_err() {
                drops.ptos_refused += 1;
            }
        }
        too_big.flush(tun);
    }

    async fn on_udp(&mut self, now: braid_core::Instant) {
        let mut handled = 0;
        let mut rx = self.rx.take().unwrap_or_default();
        loop {
            let mut any = false;
            for s in 0..self.socks.len() {
                if self.socks[s].try_recv(&mut rx) == 0 {
                    continue;
                }
                any = true;
                for (from, dg) in rx.datagrams() {
                    handled += 1;
                    self.on_datagram(now, s, from, dg);
                }
            }
            if !any || handled >= RX_BUDGET {
                break;
            }
        }
        self.rx = Some(rx);
        for (s, to, reply) in std::mem::take(&mut self.replies) {
            self.drops.send_errors += self.socks[s].send(&reply, to).await;
        }
    }

    fn on_datagram(&mut self, now: braid_core::Instant, sock: usize, from: SocketAddr, dg: &[u8]) {
        let (peer, plaintext) = match self.sec.handle(now, &from, dg, &mut self.rng) {
            Outcome::Reply(b) => {
                self.replies.push((sock, from, b));
                return;
            }
            Outcome::Drop(_) => return,
            Outcome::Data {
                peer, plaintext, ..
            } => (peer, plaintext),
        };
        let Some(p) = self.peers.get_mut(peer.0 as usize) else {
            return;
        };
        p.last = Some((sock, from));
        if plaintext.is_empty() {
            return; // a keepalive: the secure layer refreshed its timers
        }
        let Some((id, core)) = tunnel::split(&plaintext) else {
            self.drops.short += 1;
            return;
        };
        if p.retired.contains(&id) {
            self.drops.stale_connection += 1;
            return;
        }
        if p.tunnel.as_ref().map(|t| t.id) != Some(id) {
            if let Some(old) = p.tunnel.take() {
                retire(&mut p.retired, old.id);
            }
            info!(client = %p.name, conn = format!("{id:08x}"), %from, "new connection");
            p.tunnel = Some(Tunnel::new(
                self.core.clone(),
                Side::Server,
                now,
                id,
                self.ptos,
            ));
            p.addrs.clear();
            p.connections += 1;
        }
        let t = p.tunnel.as_mut().expect("just set");
        if let Some(path) = tunnel::probe(core) {
            // A liveness probe: echo it (see `tunnel::split`); the path it names is there,
            // and paths that backed off during an outage retransmit now.
            t.conn.peer_alive(now);
            if let Some(path) = path.filter(|&id| t.conn.path(id).is_some()) {
                let prev = p.addrs.insert(path, (sock, from));
                if prev.is_some_and(|(_, a)| a != from) {
                    info!(client = %p.name, path = path.0, %from, "path address changed (probe)");
                }
            }
            self.probes.push(peer);
            return;
        }
        if t.conn.handle_datagram(now, core).is_ok()
            && let Ok((h, _)) = braid_core::wire::parse_header(core)
        {
            let prev = p.addrs.insert(h.path, (sock, from));
            if prev.is_some_and(|(_, a)| a != from) {
                info!(client = %p.name, path = h.path.0, %from, "path address changed");
            }
        }
    }

    /// After any input: secure-layer transmits and events, every connection's stream to the
    /// TUN device and its datagrams to the sockets.
    async fn flush(&mut self, now: braid_core::Instant) {
        while let Some(ev) = self.sec.poll_event() {
            match ev {
                SecEvent::Established { peer, index } => {
                    debug!(client = self.name(peer), index, "session established");
                }
                SecEvent::Expired { peer, reason, .. } => {
                    info!(
                        client = self.name(peer),
                        ?reason,
                        "session expired: connection closed"
                    );
                    if let Some(p) = self.peers.get_mut(peer.0 as usize)
                        && let Some(t) = p.tunnel.take()
                    {
                        retire(&mut p.retired, t.id);
                        p.addrs.clear();
                    }
                }
            }
        }
        while let Some(t) = self.sec.poll_transmit() {
            if let Some((s, to)) = self.peers.get(t.peer.0 as usize).and_then(|p| p.last) {
                self.drops.send_errors += self.socks[s].send(&t.datagram, to).await;
            }
        }
        for peer in std::mem::take(&mut self.probes) {
            let Some(p) = self.peers.get(peer.0 as usize) else {
                continue;
            };
            let (Some(t), Some((s, to))) = (&p.tunnel, p.last) else {
                continue;
            };
            if self
                .sec
                .seal(now, peer, &t.id.to_be_bytes(), &mut self.sealed)
                .is_ok()
            {
                self.drops.send_errors += self.socks[s].send(&self.sealed, to).await;
            }
        }
        for pi in 0..self.peers.len() {
            self.flush_peer(now, pi).await;
        }
        for s in &mut self.socks {
            self.drops.send_errors += s.flush().await;
        }
        self.tun.flush().await;
    }

    async fn flush_peer(&mut self, now: braid_core::Instant, pi: usize) {
        let p = &mut self.peers[pi];
        let Some(t) = p.tunnel.as_mut() else {
            return;
        };
        while let Some(ev) = t.conn.poll_event() {
            debug!(client = %p.name, ?ev, "connection event");
        }
        t.track_paths(now);
        // Stream → packets → TUN, each checked against the client's addresses.
        let tun = &mut self.tun;
        let drops = &mut self.drops;
        let allowed = &p.allowed;
        let r = t.drain(|packet| {
            if source(packet).is_some_and(|s| allowed.iter().any(|a| a.contains(s))) {
                tun.queue(packet);
            } else {
                drops.inner_source += 1;
            }
        });
        if r.is_err() {
            warn!(client = %p.name, "invalid packet in the stream: connection reset");
            self.drops.stop_invalid += 1;
            if let Some(t) = p.tunnel.take() {
                retire(&mut p.retired, t.id);
            }
            return;
        }
        if t.conn.is_closed() {
            info!(client = %p.name, "connection closed");
            let id = t.id;
            p.tunnel = None;
            retire(&mut p.retired, id);
            return;
        }
        t.feed(now);
        while let Some(tx) = t.conn.poll_transmit(now, &mut self.dg) {
            let Some((s, to)) = p.addrs.get(&tx.path).copied().or(p.last) else {
                continue;
            };
            self.plain.clear();
            self.plain.extend_from_slice(&t.id.to_be_bytes());
            self.plain.extend_from_slice(&self.dg[..tx.size]);
            if self
                .sec
                .seal(now, PeerId(pi as u32), &self.plain, &mut self.sealed)
                .is_err()
            {
                self.drops.no_session += 1;
                continue;
            }
            self.drops.send_errors += self.socks[s].send(&self.sealed, to).await;
        }
    }

    fn name(&self, peer: PeerId) -> &str {
        self.peers
            .get(peer.0 as usize)
            .map_or("?", |p| p.name.as_str())
    }

    fn publish(&self, shared: &Shared) {
        let now = self.clock.now();
        let mut drops = super::secure_drops(self.sec.stats());
        let d = &self.drops;
        for (k, v) in [
            ("short_plaintext", d.short),
            ("stale_connection", d.stale_connection),
            ("inner_source", d.inner_source),
            ("no_route", d.no_route),
            ("ptos_refused", d.ptos_refused),
            ("stop_invalid", d.stop_invalid),
            ("no_session", d.no_session),
            ("send_errors", d.send_errors),
        ] {
            drops.insert(k.into(), v.into());
        }
        let mut core = braid_core::Drops::default();
        let conns: Vec<Value> = self
            .peers
            .iter()
            .filter_map(|p| {
                let t = p.tunnel.as_ref()?;
                let dr = &t.conn.stats().dropped;
                core.malformed += dr.malformed;
                core.unknown_path += dr.unknown_path;
                core.closed_path += dr.closed_path;
                core.too_many_paths += dr.too_many_paths;
                core.protocol += dr.protocol;
                core.closed += dr.closed;
                let mut c = status::connection_json(&t.conn, |path| {
                    p.addrs.get(&path).map(|(_, a)| a.to_string())
                });
                c["peer"] = p.name.clone().into();
                c["conn_id"] = format!("{:08x}", t.id).into();
                c["pathless_s"] = t.pathless(now).map_or(0.0, |d| d.as_secs_f64()).into();
                c["last_addr"] = p.last.map(|(_, a)| a.to_string()).into();
                c["connections"] = p.connections.into();
                c["framing"] = t.framing_json();
                Some(c)
            })
            .collect();
        for (k, v) in [
            ("core_malformed", core.malformed),
            ("core_unknown_path", core.unknown_path),
            ("core_closed_path", core.closed_path),
            ("core_too_many_paths", core.too_many_paths),
            ("core_protocol", core.protocol),
            ("core_closed", core.closed),
        ] {
            drops.insert(k.into(), v.into());
        }
        let v = json!({
            "role": "gateway",
            "uptime_s": self.clock.now().secs_f64(),
            "tun": {
                "name": self.cfg.tun.name,
                "write_errors": self.tun.write_errors,
                "too_big": self.too_big.json(),
            },
            "listen": self.cfg.listen.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "clients_configured": self.peers.len(),
            "sessions": self.sec.session_count(),
            "udp": udp::io_json(&self.socks),
            "drops": drops,
            "secure": super::secure_json(self.sec.stats()),
            "connections": conns,
        });
        if let Ok(mut s) = shared.lock() {
            *s = v;
        }
    }
}

fn retire(list: &mut Vec<u32>, id: u32) {
    list.push(id);
    if list.len() > RETIRED_IDS {
        list.remove(0);
    }
}

/// The destination address of an IP packet.
pub(crate) fn destination(p: &[u8]) -> Option<IpAddr> {
    match p.first()? >> 4 {
        4 if p.len() >= 20 => Some(IpAddr::from(<[u8; 4]>::try_from(&p[16..20]).ok()?)),
        6 if p.len() >= 40 => Some(IpAddr::from(<[u8; 16]>::try_from(&p[24..40]).ok()?)),
        _ => None,
    }
}

/// The source address of an IP packet.
pub(crate) fn source(p: &[u8]) -> Option<IpAddr> {
    match p.first()? >> 4 {
        4 if p.len() >= 20 => Some(IpAddr::from(<[u8; 4]>::try_from(&p[12..16]).ok()?)),
        6 if p.len() >= 40 => Some(IpAddr::from(<[u8; 16]>::try_from(&p[8..24]).ok()?)),
        _ => None,
    }
}
