//! One tunnel connection: the multipath [`Connection`] with its two carriers, the reliable
//! stream (PtoS on the sending side, StoP on the receiving side) and the per-packet datagrams
//! ([`PerPacket`]), the classes that pick one per packet, and the connection id that prefixes
//! every datagram it sends. The client and the gateway drive it the same way.
//!
//! The plaintext of a secure data datagram is `connection id (4 bytes, big-endian) ‖ payload`,
//! the payload being a core datagram, a per-packet datagram (first byte 0xd1 or 0xd2, see
//! `braid_hya::wire`) or a liveness probe ([`probe`]). The client picks a new random id for
//! every connection it starts, so the gateway can tell a restarted client (new id: new
//! connection) from a re-keyed session of the same one (same id: same connection), and drop
//! late datagrams of a connection it replaced.

use std::sync::Arc;

use braid_core::{AddrId, Config, Connection, Instant, PathId, Side};
use serde_json::Value;

use super::perpacket::{PerPacket, PerPacketConfig};
use super::status;
use crate::aqm::{AqmConfig, Arrivals, Codel};
use crate::class::{Carrier, Classes};
use crate::frame::{FrameError, PtoS, PtoSConfig, PushError, StoP};

/// What a tunnel connection is made with, besides its side, time and id.
#[derive(Debug, Clone)]
pub struct TunnelConfig {
    /// The braid core's configuration.
    pub core: Arc<Config>,
    /// PtoS batching.
    pub ptos: PtoSConfig,
    /// Which carrier takes which packet.
    pub classes: Arc<Classes>,
    /// The per-packet carrier.
    pub per_packet: PerPacketConfig,
    /// Queue management of the stream's send queue.
    pub aqm: AqmConfig,
}

/// A datagram to send: its path and the local address (the client's link) it leaves from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Out {
    /// The path.
    pub path: PathId,
    /// The path's local address id.
    pub local: AddrId,
}

/// Bytes of the connection id in front of each core datagram.
pub const CONN_ID_LEN: usize = 4;

/// Bytes a core datagram gains inside its UDP datagram: the secure layer's data header and
/// tag, and the connection id.
pub const DATAGRAM_OVERHEAD: usize = crate::secure::wire::DATA_MIN + CONN_ID_LEN;

/// Bytes of a core datagram that are not stream payload, for the batching threshold: a PtoS
/// batch of `[batch] segments` fills that many datagrams.
pub(crate) const SEGMENT_HEADERS: usize = 40;

impl TunnelConfig {
    /// The largest UDP payload of this configuration's datagrams.
    pub fn udp_payload(&self) -> usize {
        self.core.max_datagram_size + DATAGRAM_OVERHEAD
    }

    /// This configuration for a connection whose UDP datagrams take at most `udp_payload`
    /// bytes (what its links and the peer carry): the core's datagram size follows, the
    /// per-packet carrier's limit with it, and a stream batch keeps its number of datagrams.
    /// Unchanged if the core cannot take that size (below its 200-byte minimum).
    pub fn for_udp_payload(&self, udp_payload: usize) -> TunnelConfig {
        let old = self.core.max_datagram_size;
        let new = udp_payload.saturating_sub(DATAGRAM_OVERHEAD);
        if new == old {
            return self.clone();
        }
        let mut core = (*self.core).clone();
        core.max_datagram_size = new;
        if core.validate().is_err() {
            return self.clone();
        }
        let segment = |mds: usize| mds.saturating_sub(SEGMENT_HEADERS).max(1);
        let mut ptos = self.ptos;
        ptos.threshold = segment(new) * (self.ptos.threshold / segment(old)).max(1);
        if ptos.validate().is_err() {
            ptos = self.ptos;
        }
        TunnelConfig {
            core: Arc::new(core),
            ptos,
            ..self.clone()
        }
    }
}

/// A connection with its framing.
#[derive(Debug)]
pub struct Tunnel {
    /// The multipath connection.
    pub conn: Connection,
    /// The id in front of every datagram of this connection.
    pub id: u32,
    ptos: PtoS,
    stop: StoP,
    read_buf: Vec<u8>,
    /// Packets dropped because StoP met an invalid header (the connection is then reset).
    pub stop_errors: u64,
    /// Since when the connection has had no usable path (`None`: it has one).
    pathless_since: Option<Instant>,
    /// The gateway instance the connection was made with (client; see
    /// `Initiator::gateway_instance`).
    pub gateway_instance: Option<u64>,
    classes: Arc<Classes>,
    per_packet: PerPacket,
    /// Scratch: one core datagram.
    dg: Vec<u8>,
    /// CoDel on the stream's send queue, and when its packets arrived.
    aqm: Codel,
    arrivals: Arrivals,
    /// The queue's delay at the last packet pushed into the stream.
    queue_delay: std::time::Duration,
}

impl Tunnel {
    /// A new connection at `now`.
    pub fn new(cfg: &TunnelConfig, side: Side, now: Instant, id: u32) -> Tunnel {
        let mtu = cfg.ptos.max_packet_len;
        let max_datagram = cfg.core.max_datagram_size;
        Tunnel {
            conn: Connection::new(cfg.core.clone(), side, now),
            id,
            ptos: PtoS::new(cfg.ptos).expect("checked when the configuration loaded"),
            stop: StoP::new(mtu),
            read_buf: vec![0; 256 * 1024],
            stop_errors: 0,
            pathless_since: Some(now),
            gateway_instance: None,
            classes: cfg.classes.clone(),
            per_packet: PerPacket::new(&cfg.per_packet, side, max_datagram),
            dg: Vec::with_capacity(2048),
            aqm: Codel::new(cfg.aqm),
            arrivals: Arrivals::default(),
            queue_delay: std::time::Duration::ZERO,
        }
    }

    /// Follows whether the connection has a usable path (call after every input); returns
    /// how long it has had none.
    pub fn track_paths(&mut self, now: Instant) -> Option<std::time::Duration> {
        if self.conn.paths().any(|p| p.usable) {
            self.pathless_since = None;
        } else {
            self.pathless_since.get_or_insert(now);
        }
        self.pathless(now)
    }

    /// How long the connection has had no usable path, as of the last [`Tunnel::track_paths`].
    pub fn pathless(&self, now: Instant) -> Option<std::time::Duration> {
        self.pathless_since.map(|t| now.saturating_since(t))
    }

    /// Bytes waiting to go: the stream's unacknowledged bytes and PtoS's batches.
    pub fn queued(&self) -> u64 {
        self.conn.send_buffered() + self.ptos.len() as u64
    }

    /// An IP packet read from the TUN device: per packet when its class says so (and it fits
    /// one datagram), else into the stream (batched by PtoS).
    pub fn push(&mut self, now: Instant, packet: &[u8]) -> Result<(), PushError> {
        if self.classes.carrier(packet) == Carrier::PerPacket
            && self.per_packet.push(now, &self.conn, packet).is_ok()
        {
            return Ok(());
        }
        if self.aqm_drop(now) {
            return Ok(());
        }
        self.ptos.push(now, packet)?;
        if self.aqm.config().enabled() {
            self.arrivals.push(self.ptos.end_offset(), now);
        }
        self.feed(now);
        Ok(())
    }

    /// CoDel's verdict on a packet entering the stream at `now` (see [`crate::aqm`]): the
    /// queue's delay is the age of the oldest packet not sent yet, the interval the configured
    /// one or the largest smoothed RTT of the usable paths when longer.
    fn aqm_drop(&mut self, now: Instant) -> bool {
        if !self.aqm.config().enabled() {
            return false;
        }
        let sent = self.conn.stream_sent();
        self.queue_delay = self.arrivals.delay(now, sent);
        let backlog = self.ptos.end_offset().saturating_sub(sent);
        let interval = self
            .conn
            .paths()
            .filter(|p| p.usable)
            .map(|p| p.srtt)
            .fold(self.aqm.config().interval, std::time::Duration::max);
        let mtu = self.ptos.config().max_packet_len as u64;
        self.aqm
            .on_arrival(now, self.queue_delay, backlog, mtu, interval)
    }

    /// Packets CoDel dropped at the entry of the stream.
    pub fn aqm_drops(&self) -> u64 {
        self.aqm.drops
    }

    /// A datagram's payload (after the connection id, not a probe) from the peer: a core
    /// datagram or a per-packet one. Returns the path it authenticated for, whose peer address
    /// is then the datagram's source.
    pub fn handle(&mut self, now: Instant, payload: &[u8]) -> Option<PathId> {
        if payload.first().is_some_and(|b| braid_hya::wire::is_hya(*b)) {
            return self.per_packet.handle(now, &self.conn, payload);
        }
        self.conn.handle_datagram(now, payload).ok()?;
        braid_core::wire::parse_header(payload)
            .ok()
            .map(|(h, _)| h.path)
    }

    /// The next datagram's plaintext (`connection id ‖ payload`) into `out`: per-packet
    /// datagrams first, then the core's.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<Out> {
        out.clear();
        out.extend_from_slice(&self.id.to_be_bytes());
        if let Some((path, local)) = self.per_packet.poll_transmit(now, &self.conn, out) {
            return Some(Out { path, local });
        }
        let tx = self.conn.poll_transmit(now, &mut self.dg)?;
        out.extend_from_slice(&self.dg[..tx.size]);
        Some(Out {
            path: tx.path,
            local: tx.local,
        })
    }

    /// Moves due PtoS batches into the connection, as far as its send buffer takes them.
    pub fn feed(&mut self, now: Instant) {
        loop {
            let ready = self.ptos.ready(now);
            if ready.is_empty() {
                return;
            }
            let want = ready.len();
            let n = self.conn.write(ready);
            self.ptos.consume(n);
            if n < want {
                return;
            }
        }
    }

    /// Hands every packet received to `emit`: those the reorder buffer released, then the
    /// in-order stream's whole packets. An invalid packet header poisons StoP: the error is
    /// returned and the caller must reset the connection.
    pub fn drain(&mut self, mut emit: impl FnMut(&[u8])) -> Result<(), FrameError> {
        self.per_packet.drain(&mut emit);
        loop {
            let n = self.conn.read(&mut self.read_buf);
            if n == 0 {
                return Ok(());
            }
            self.stop.push(&self.read_buf[..n]);
            loop {
                match self.stop.next_packet() {
                    Ok(Some(p)) => emit(p),
                    Ok(None) => break,
                    Err(e) => {
                        self.stop_errors += 1;
                        return Err(e);
                    }
                }
            }
        }
    }

    /// When the connection, PtoS or the per-packet carrier needs to be woken. PtoS's
    /// deadline counts only while the connection can take bytes (otherwise an acknowledgement
    /// wakes the loop).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let ptos = self
            .ptos
            .poll_timeout()
            .filter(|_| self.conn.send_space() > 0);
        [
            self.conn.poll_timeout(),
            ptos,
            self.per_packet.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.conn.poll_timeout().is_some_and(|t| t <= now) {
            self.conn.handle_timeout(now);
        }
        if self.per_packet.poll_timeout().is_some_and(|t| t <= now) {
            self.per_packet.handle_timeout(now);
        }
        self.feed(now);
    }

    /// The per-packet carrier's drops by reason (`datagram_<reason>`).
    pub fn per_packet_drops(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        self.per_packet.drops()
    }

    /// The connection's status; `addr_of` names a path's current peer address.
    pub fn status_json(&self, now: Instant, addr_of: impl Fn(PathId) -> Option<String>) -> Value {
        let mut c = status::connection_json(&self.conn, addr_of);
        c["conn_id"] = format!("{:08x}", self.id).into();
        c["pathless_s"] = self.pathless(now).map_or(0.0, |d| d.as_secs_f64()).into();
        c["framing"] = self.framing_json();
        c["queue"] = serde_json::json!({
            "delay_ms": self.queue_delay.as_secs_f64() * 1e3,
            "aqm_drops": self.aqm.drops,
            "aqm_target_ms": self.aqm.config().target.as_secs_f64() * 1e3,
        });
        if self.classes.uses(Carrier::PerPacket) || self.per_packet.active() {
            c["datagram"] = self.per_packet.json();
        }
        c
    }

    /// Counters for the status report.
    pub fn framing_json(&self) -> serde_json::Value {
        let p = self.ptos.stats();
        let s = self.stop.stats();
        serde_json::json!({
            "ptos": { "packets": p.packets, "bytes": p.bytes, "invalid": p.invalid,
                      "full": p.full, "buffered": self.ptos.len() },
            "stop": { "packets": s.packets, "bytes": s.bytes, "invalid": s.invalid,
                      "discarded": s.discarded },
        })
    }
}

/// Splits a plaintext into its connection id and core datagram. A plaintext of the id
/// alone (empty datagram), or of the id and a path id ([`probe`]), is a liveness probe:
/// the client sends one on every link each keepalive interval, naming the link's path, and
/// the gateway echoes it on the connection it belongs to, so a client whose gateway lost its
/// state notices (the secure layer's receive timeout) even when no data flows. A probe that
/// names a path also tells the gateway that path's current address (a NAT that rebound, a
/// re-addressed interface) when the client has nothing else to send on it.
pub fn split(plaintext: &[u8]) -> Option<(u32, &[u8])> {
    if plaintext.len() < CONN_ID_LEN {
        return None;
    }
    let (id, rest) = plaintext.split_at(CONN_ID_LEN);
    Some((u32::from_be_bytes([id[0], id[1], id[2], id[3]]), rest))
}

/// Bytes of the path id in a liveness probe that names its path.
pub const PROBE_PATH_LEN: usize = 4;

/// Whether the core part of a plaintext ([`split`]) is a liveness probe; with the path it
/// names, if any. A core datagram is never this short (its header alone takes 7 bytes).
pub fn probe(core: &[u8]) -> Option<Option<PathId>> {
    match core.len() {
        0 => Some(None),
        PROBE_PATH_LEN => Some(Some(PathId(u32::from_be_bytes([
            core[0], core[1], core[2], core[3],
        ])))),
        _ => None,
    }
}

/// The plaintext of a liveness probe of connection `id` naming `path`: into `out`.
pub fn probe_plaintext(id: u32, path: Option<PathId>, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&id.to_be_bytes());
    if let Some(p) = path {
        out.extend_from_slice(&p.0.to_be_bytes());
    }
}

/// The core part of a "connection gone" notice: the gateway answers a datagram of a
/// connection it has ended (its session expired while every link of the client was away, an
/// invalid stream) with the connection's id and this byte, so the client starts a new
/// connection at once instead of after `dead_after_ms`. No core datagram (7 bytes at least)
/// or liveness probe (0 or [`PROBE_PATH_LEN`] bytes) has this length.
pub const GONE: [u8; 1] = [0xff];

/// The plaintext of a "connection gone" notice for connection `id`: into `out`.
pub fn gone_plaintext(id: u32, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&GONE);
}

#[cfg(test)]
mod tests;
