//! `braid tunnel gateway` over UDP (transports `braid` and `datagram`): many clients, each its
//! own [`Tunnel`] (connection), found through the secure session's peer; one TUN device whose
//! packets go to the client owning their destination (`allowed_ips`).
//!
//! A path's peer address is the source of the latest datagram that authenticated and that the
//! connection accepted on that path (one of its core datagrams or per-packet datagrams, or the
//! client's liveness probe naming it, which comes every keepalive interval on each link), so a
//! client behind a NAT that rebinds, or that changes address, keeps its connection: answers
//! follow it at once, or within a keepalive interval when the client has nothing else to send
//! on that path.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use braid_core::{Event, Instant, PathId, Side};
use rand::RngExt;
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use super::client::transport_name;
use super::common::DaemonError;
use super::config::{GatewayConfig, Prefix};
use super::run::Transport;
use super::tun::Tun;
use super::tunnel::{self, Tunnel, TunnelConfig};
use super::udp;
use crate::frame::{destination, source};
use crate::secure::{
    AllowedPeer, Event as SecEvent, Keypair, Outcome, PeerId, Responder, ResponderConfig,
};

/// Datagrams handled per wake-up before transmits are polled.
const RX_BUDGET: usize = 512;
/// Connection ids of replaced connections remembered per client.
const RETIRED_IDS: usize = 8;
/// At most one "connection gone" notice per client this often (`tunnel::GONE`).
const GONE_EVERY: Duration = Duration::from_millis(100);

struct Peer {
    name: String,
    allowed: Vec<Prefix>,
    tunnel: Option<Tunnel>,
    /// Where each path was last heard from: (socket, address).
    addrs: HashMap<PathId, (usize, SocketAddr)>,
    /// The latest authenticated source.
    last: Option<(usize, SocketAddr)>,
    retired: Vec<u32>,
    /// When the last "connection gone" notice went to this client.
    gone_sent: Option<Instant>,
    connections: u64,
}

impl Peer {
    /// Ends the connection, remembering its id so its late datagrams are not a new one.
    fn retire(&mut self) {
        if let Some(t) = self.tunnel.take() {
            self.retired.push(t.id);
            if self.retired.len() > RETIRED_IDS {
                self.retired.remove(0);
            }
        }
        self.addrs.clear();
    }
}

pub(crate) struct Gateway {
    cfg: GatewayConfig,
    socks: Vec<udp::Socket>,
    sec: Responder,
    peers: Vec<Peer>,
    tcfg: TunnelConfig,
    rng: rand::rngs::ThreadRng,
    drops: udp::Drops,
    /// Receive buffers, taken while datagrams are handled.
    rx: Option<udp::RxBatch>,
    /// Plaintext and sealed datagram buffers.
    bufs: (Vec<u8>, Vec<u8>),
    replies: Vec<(usize, SocketAddr, Vec<u8>)>,
    /// Clients whose liveness probe is to be echoed.
    probes: Vec<PeerId>,
    /// "Connection gone" notices to send: client, connection id, socket, address.
    gone: Vec<(PeerId, u32, usize, SocketAddr)>,
    rotate: usize,
}

impl Gateway {
    pub fn new(cfg: GatewayConfig) -> Result<Gateway, DaemonError> {
        let keypair = Keypair::from_private(cfg.private_key()?);
        let rcfg = ResponderConfig {
            idle_timeout: Duration::from_millis(cfg.client_timeout_ms),
            max_session_age: ResponderConfig::default()
                .max_session_age
                .max(Duration::from_millis(cfg.client_timeout_ms)),
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
                gone_sent: None,
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
        let mut tcfg = cfg.tunnel_config()?;
        if cfg.connection.max_datagram_size == 0 {
            // A 1500-byte path's datagrams, or less where an interface datagrams arrive on is
            // narrower (the TUN device aside).
            let narrowest = cfg
                .listen
                .iter()
                .flat_map(|a| {
                    super::links::receiving_interfaces(a.ip())
                        .into_iter()
                        .filter(|dev| *dev != cfg.tun.name)
                        .map(move |dev| (dev, *a))
                })
                .filter_map(|(dev, a)| {
                    // Nothing is sent: TEST-NET addresses, on link through the interface.
                    let far = if a.is_ipv4() {
                        SocketAddr::from(([192, 0, 2, 1], 7))
                    } else {
                        SocketAddr::from(([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1], 7))
                    };
                    let source = (!a.ip().is_unspecified()).then_some(a.ip());
                    udp::path_payload(Some(&dev), source, far)
                })
                .min();
            if let Some(bytes) = narrowest.filter(|&b| b < tcfg.udp_payload()) {
                info!(
                    bytes,
                    "datagrams sized to the narrowest interface they arrive on"
                );
                tcfg = tcfg.for_udp_payload(bytes);
            }
        }
        // Clients send no larger datagram than this (and say what theirs take).
        sec.set_max_datagram(u16::try_from(tcfg.udp_payload()).unwrap_or(u16::MAX));
        info!(
            listen = ?cfg.listen,
            clients = peers.len(),
            tun = %cfg.tun.name,
            "gateway running"
        );
        Ok(Gateway {
            socks,
            sec,
            peers,
            tcfg,
            rng: rand::rng(),
            drops: udp::Drops::default(),
            rx: Some(udp::RxBatch::default()),
            bufs: (Vec::with_capacity(2048), Vec::with_capacity(2048)),
            replies: Vec::new(),
            probes: Vec::new(),
            gone: Vec::new(),
            rotate: 0,
            cfg,
        })
    }
}

impl Transport for Gateway {
    type Input = usize;

    async fn start(&mut self, _now: Instant) {}

    async fn wait(&mut self) -> usize {
        udp::readable(&self.socks, self.rotate).await
    }

    async fn on_input(
        &mut self,
        now: Instant,
        i: usize,
        _tun: &mut Tun,
    ) -> Result<(), DaemonError> {
        self.rotate = i + 1;
        let mut rx = self.rx.take().unwrap_or_default();
        let mut socks = std::mem::take(&mut self.socks);
        udp::recv_all(&mut socks, &mut rx, RX_BUDGET, |s, from, dg| {
            self.on_datagram(now, s, from, dg)
        });
        self.socks = socks;
        self.rx = Some(rx);
        udp::send_all(&mut self.socks, &mut self.replies, &mut self.drops).await;
        Ok(())
    }

    fn on_packet(&mut self, now: Instant, packet: &[u8]) {
        let Some(dst) = destination(packet) else {
            self.drops.no_route += 1;
            return;
        };
        let Some(t) = self
            .peers
            .iter_mut()
            .filter(|p| p.allowed.iter().any(|a| a.contains(dst)))
            .find_map(|p| p.tunnel.as_mut())
        else {
            self.drops.no_route += 1;
            return;
        };
        if t.push(now, packet).is_err() {
            self.drops.ptos_refused += 1;
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let conns = self
            .peers
            .iter()
            .filter_map(|p| p.tunnel.as_ref()?.poll_timeout());
        conns.chain(self.sec.poll_timeout()).min()
    }

    fn on_timeout(&mut self, now: Instant) {
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

    /// After any input: secure-layer transmits and events, every connection's stream to the
    /// TUN device and its datagrams to the sockets.
    async fn flush(&mut self, now: Instant, tun: &mut Tun) {
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
                    if let Some(p) = self.peers.get_mut(peer.0 as usize) {
                        p.retire();
                    }
                }
            }
        }
        while let Some(t) = self.sec.poll_transmit() {
            if let Some((s, to)) = self.peers.get(t.peer.0 as usize).and_then(|p| p.last) {
                self.drops.send_errors += self.socks[s].send(&t.datagram, to).await;
            }
        }
        let (plain, sealed) = &mut self.bufs;
        for (peer, id, s, to) in std::mem::take(&mut self.gone) {
            tunnel::gone_plaintext(id, plain);
            if self.sec.seal(now, peer, plain, sealed).is_ok() {
                self.drops.send_errors += self.socks[s].send(sealed, to).await;
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
                .seal(now, peer, &t.id.to_be_bytes(), sealed)
                .is_ok()
            {
                self.drops.send_errors += self.socks[s].send(sealed, to).await;
            }
        }
        for pi in 0..self.peers.len() {
            self.flush_peer(now, pi, tun).await;
        }
        for s in &mut self.socks {
            self.drops.send_errors += s.flush().await;
        }
    }

    fn status(&self, now: Instant) -> Value {
        let conns: Vec<Value> = self
            .peers
            .iter()
            .filter_map(|p| {
                let t = p.tunnel.as_ref()?;
                let mut c =
                    t.status_json(now, |path| p.addrs.get(&path).map(|(_, a)| a.to_string()));
                c["peer"] = p.name.clone().into();
                c["last_addr"] = p.last.map(|(_, a)| a.to_string()).into();
                c["connections"] = p.connections.into();
                Some(c)
            })
            .collect();
        json!({
            "role": "gateway",
            "transport": transport_name(self.cfg.transport),
            "listen": self.cfg.listen.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "clients_configured": self.peers.len(),
            "sessions": self.sec.session_count(),
            "udp": udp::io_json(&self.socks),
            "drops": self.drops.json(
                self.sec.stats(),
                self.peers.iter().filter_map(|p| p.tunnel.as_ref()),
            ),
            "secure": udp::secure_json(self.sec.stats()),
            "connections": conns,
        })
    }
}

impl Gateway {
    fn on_datagram(&mut self, now: Instant, sock: usize, from: SocketAddr, dg: &[u8]) {
        let (peer, index, plaintext) = match self.sec.handle(now, &from, dg, &mut self.rng) {
            Outcome::Reply(b) => {
                self.replies.push((sock, from, b));
                return;
            }
            Outcome::Drop(_) => return,
            Outcome::Data {
                peer,
                index,
                plaintext,
            } => (peer, index, plaintext),
        };
        let Some(p) = self.peers.get_mut(peer.0 as usize) else {
            return;
        };
        p.last = Some((sock, from));
        if plaintext.is_empty() {
            return; // a keepalive: the secure layer refreshed its timers
        }
        let Some((id, payload)) = tunnel::split(&plaintext) else {
            self.drops.short += 1;
            return;
        };
        if p.retired.contains(&id) {
            // A connection we ended (its session expired while the client's links were all
            // away, say): the client, which still sends on it, is told at once rather than
            // waiting `dead_after_ms` with its links up.
            self.drops.stale_connection += 1;
            if p.gone_sent
                .is_none_or(|t| now.saturating_since(t) >= GONE_EVERY)
            {
                p.gone_sent = Some(now);
                self.gone.push((peer, id, sock, from));
            }
            return;
        }
        if p.tunnel.as_ref().map(|t| t.id) != Some(id) {
            p.retire();
            // Datagrams no larger than the client's links take, as its handshake said, nor
            // than the route back to it carries.
            let own = self.tcfg.udp_payload();
            let payload = [
                self.sec.peer_max_datagram(index).map(usize::from),
                (self.cfg.connection.max_datagram_size == 0)
                    .then(|| udp::path_payload(None, None, from))
                    .flatten(),
            ]
            .into_iter()
            .flatten()
            .fold(own, usize::min);
            let tcfg = self.tcfg.for_udp_payload(payload);
            info!(
                client = %p.name,
                conn = format!("{id:08x}"),
                %from,
                datagram_payload = tcfg.udp_payload(),
                "new connection"
            );
            p.tunnel = Some(Tunnel::new(&tcfg, Side::Server, now, id));
            p.connections += 1;
        }
        let t = p.tunnel.as_mut().expect("just set");
        let path = match tunnel::probe(payload) {
            Some(path) => {
                // A liveness probe: echo it (see `tunnel::split`); the path it names is there,
                // and paths that backed off during an outage retransmit now.
                t.conn.peer_alive(now);
                self.probes.push(peer);
                path.filter(|&id| t.conn.path(id).is_some())
            }
            None => t.handle(now, payload),
        };
        if let Some(path) = path {
            let prev = p.addrs.insert(path, (sock, from));
            if prev.is_some_and(|(_, a)| a != from) {
                info!(client = %p.name, path = path.0, %from, "path address changed");
            }
        }
    }

    async fn flush_peer(&mut self, now: Instant, pi: usize, tun: &mut Tun) {
        let Gateway {
            peers,
            sec,
            socks,
            drops,
            bufs,
            ..
        } = self;
        let p = &mut peers[pi];
        let Some(t) = p.tunnel.as_mut() else {
            return;
        };
        while let Some(ev) = t.conn.poll_event() {
            debug!(client = %p.name, ?ev, "connection event");
            // A closed path's address is forgotten: a client that opens and closes paths
            // would otherwise grow the map without end.
            if let Event::PathClosed { path, .. } = ev {
                p.addrs.remove(&path);
            }
        }
        t.track_paths(now);
        // Stream → packets → TUN, each checked against the client's addresses.
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
            drops.stop_invalid += 1;
            p.retire();
            return;
        }
        if t.conn.is_closed() {
            info!(client = %p.name, "connection closed");
            p.retire();
            return;
        }
        t.feed(now);
        let (addrs, last) = (&p.addrs, p.last);
        udp::send_tunnel(
            t,
            now,
            bufs,
            socks,
            drops,
            |out| addrs.get(&out.path).copied().or(last),
            |plain, sealed| sec.seal(now, PeerId(pi as u32), plain, sealed).is_ok(),
        )
        .await;
    }

    fn name(&self, peer: PeerId) -> &str {
        self.peers
            .get(peer.0 as usize)
            .map_or("?", |p| p.name.as_str())
    }
}
