//! `[tunnel]` (seed 003): the application's flow end to end through `braid tunnel`.
//!
//! ```text
//!  app ─write→ end-to-end Connection (single path, CUBIC/NewReno: the hosts' TCP)
//!      ─poll_transmit→ [IPv4 ‖ TCP ‖ datagram] ─push→ braid_tunnel Tunnel (PtoS → stream, or
//!      per packet) ─poll_transmit→ the endpoint's paths ─links→ peer's Tunnel.handle
//!      ─drain (StoP / reorder buffer)→ [IPv4 ‖ TCP ‖ datagram] ─→ end-to-end peer ─read→ app
//! ```
//!
//! The tunnel is the daemon's own sans-IO `Tunnel`, with the daemon's defaults and the
//! scenario's `[connection]` as its core: the multipath connection of the endpoint is the
//! tunnel's (lent to it for each call, so the path manager, the links and the records see it
//! as any endpoint's). The end-to-end datagrams travel as IPv4/TCP packets so that the tunnel
//! classifies them as the daemon does: a datagram that carries no stream data is an
//! acknowledgement and travels as a pure TCP acknowledgement (40 bytes, the daemon sends those
//! per packet); its content waits at the far end in [`AckStore`], named by the TCP sequence
//! number. Not simulated: the secure layer (its connection id and AEAD overhead; a link's
//! `overhead` can add them).

use std::collections::BTreeMap;

use braid_core::{AddrId, Connection, Instant, Side};
use braid_tunnel::daemon::{CONN_ID_LEN, Tunnel};

use super::World;
use super::host::Endpoint;
use crate::scenario::INNER_HEADERS;

/// One end of the tunnel: the daemon's tunnel connection and the end-to-end connection of the
/// host behind it.
pub(super) struct TunnelEnd {
    pub tunnel: Tunnel,
    pub inner: Connection,
    /// Reused between calls: an end-to-end datagram, a wrapped packet, the packets the
    /// tunnel delivered (their buffers kept).
    dg: Vec<u8>,
    pkt: Vec<u8>,
    got: Vec<Vec<u8>>,
}

impl TunnelEnd {
    pub fn new(v: &crate::scenario::TunnelVariant, side: Side) -> Box<TunnelEnd> {
        Box::new(TunnelEnd {
            tunnel: Tunnel::new(&v.tunnel, side, Instant::ZERO, 1),
            inner: Connection::new(v.inner.clone(), side, Instant::ZERO),
            dg: Vec::new(),
            pkt: Vec::new(),
            got: Vec::new(),
        })
    }
}

/// The content of acknowledgements in flight as pure TCP acknowledgements, by sequence
/// number. Those lost on the way are forgotten once `KEEP` newer ones were stored.
#[derive(Default)]
pub(super) struct AckStore {
    next: u32,
    held: BTreeMap<u32, Vec<u8>>,
}

const KEEP: usize = 1 << 16;

impl AckStore {
    fn put(&mut self, datagram: &[u8]) -> u32 {
        let id = self.next;
        self.next = self.next.wrapping_add(1);
        self.held.insert(id, datagram.to_vec());
        while self.held.len() > KEEP {
            self.held.pop_first();
        }
        id
    }

    fn take(&mut self, id: u32) -> Option<Vec<u8>> {
        self.held.remove(&id)
    }
}

/// Runs `f` on the endpoint's tunnel with the endpoint's connection lent to it.
pub(super) fn with_tunnel<R>(
    ep: &mut Endpoint,
    f: impl FnOnce(&mut Tunnel, &mut Connection) -> R,
) -> Option<R> {
    with_end(ep, |t| f(&mut t.tunnel, &mut t.inner))
}

/// Runs `f` on the endpoint's tunnel end with the endpoint's connection lent to its tunnel.
fn with_end<R>(ep: &mut Endpoint, f: impl FnOnce(&mut TunnelEnd) -> R) -> Option<R> {
    let t = ep.tunnel.as_mut()?;
    std::mem::swap(&mut ep.conn, &mut t.tunnel.conn);
    let r = f(t);
    std::mem::swap(&mut ep.conn, &mut t.tunnel.conn);
    Some(r)
}

/// The end-to-end datagram `dg` as an IPv4/TCP packet into `out` (client 10.0.0.1:40000,
/// server 10.0.0.2:5201); `ack_id`: a pure acknowledgement standing for a stored datagram.
fn wrap(side: Side, dg: &[u8], ack_id: Option<u32>, out: &mut Vec<u8>) {
    let (src, dst, sport, dport) = match side {
        Side::Client => ([10, 0, 0, 1], [10, 0, 0, 2], 40000, 5201),
        Side::Server => ([10, 0, 0, 2], [10, 0, 0, 1], 5201, 40000),
    };
    let payload: &[u8] = if ack_id.is_some() { &[] } else { dg };
    let total = (INNER_HEADERS + payload.len()) as u16;
    out.clear();
    out.extend_from_slice(&[
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        0,
        0x40,
        0,
        64,
        6,
        0,
        0,
    ]);
    out.extend_from_slice(&src);
    out.extend_from_slice(&dst);
    out.extend_from_slice(&u16::to_be_bytes(sport));
    out.extend_from_slice(&u16::to_be_bytes(dport));
    out.extend_from_slice(&ack_id.unwrap_or(0).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
    out.extend_from_slice(payload);
}

/// The end-to-end datagram an IPv4/TCP packet of [`wrap`] carries.
fn unwrap<'a>(packet: &'a [u8], acks: &mut AckStore) -> Option<std::borrow::Cow<'a, [u8]>> {
    let payload = packet.get(INNER_HEADERS..)?;
    if !payload.is_empty() {
        return Some(payload.into());
    }
    let id = u32::from_be_bytes(packet.get(24..28)?.try_into().ok()?);
    acks.take(id).map(Into::into)
}

impl World<'_> {
    /// Moves end-to-end datagrams between endpoint `ep`'s host connection and its tunnel, both
    /// ways, until neither has more; whether anything moved.
    pub(super) fn tunnel_io(&mut self, ep: usize) -> bool {
        let now = self.now;
        let side = if self.eps[ep].client {
            Side::Client
        } else {
            Side::Server
        };
        let mut any = false;
        loop {
            let mut moved = false;
            let acks = &mut self.tunnel_acks;
            with_end(&mut self.eps[ep], |e| {
                let (t, inner) = (&mut e.tunnel, &mut e.inner);
                while inner.poll_event().is_some() {}
                loop {
                    let before = inner.stats().data_packets_sent;
                    e.dg.resize(inner.config().max_datagram_size, 0);
                    let Some(tx) = inner.poll_transmit(now, &mut e.dg) else {
                        break;
                    };
                    let data = inner.stats().data_packets_sent != before;
                    let ack_id = (!data).then(|| acks.put(&e.dg[..tx.size]));
                    wrap(side, &e.dg[..tx.size], ack_id, &mut e.pkt);
                    // Refused (the stream's queue is full): dropped, as the TUN queue drops.
                    let _ = t.push(now, &e.pkt);
                    moved = true;
                }
                // The tunnel lends its packets only to the closure: copied into kept buffers.
                let mut n = 0;
                let got = &mut e.got;
                // A StoP error would be a framing bug; the packets before it are delivered.
                let _ = t.drain(|p| {
                    if got.len() == n {
                        got.push(Vec::new());
                    }
                    got[n].clear();
                    got[n].extend_from_slice(p);
                    n += 1;
                });
                for p in &got[..n] {
                    if let Some(d) = unwrap(p, acks) {
                        let _ = inner.handle_datagram(now, &d);
                        moved = true;
                    }
                }
            });
            if !moved {
                return any;
            }
            any = true;
        }
    }

    /// Sends what endpoint `ep`'s tunnel has to send on its paths.
    pub(super) fn tunnel_transmit(&mut self, ep: usize) {
        let now = self.now;
        loop {
            let mut out = self.spare.pop().unwrap_or_default();
            let sent_before = self.eps[ep].conn.stats().data_packets_sent;
            let Some(Some(o)) =
                with_tunnel(&mut self.eps[ep], |t, _| t.poll_transmit(now, &mut out))
            else {
                return self.recycle(out);
            };
            let stream = self.eps[ep].conn.stats().data_packets_sent != sent_before;
            let Some(remote) = self.eps[ep].conn.path(o.path).map(|p| p.remote) else {
                self.recycle(out);
                continue;
            };
            // The connection id is the secure layer's, not simulated.
            out.drain(..CONN_ID_LEN);
            self.originate(ep, o.local.0, remote.0, stream, out);
        }
    }

    /// The earliest deadline of endpoint `ep`'s tunnel and host connection.
    pub(super) fn tunnel_timeout(&mut self, ep: usize) -> Option<Instant> {
        with_tunnel(&mut self.eps[ep], |t, inner| {
            [t.poll_timeout(), inner.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
        })
        .flatten()
    }

    /// Runs the due timers of endpoint `ep`'s tunnel and host connection.
    pub(super) fn tunnel_timer(&mut self, ep: usize) {
        let now = self.now;
        with_tunnel(&mut self.eps[ep], |t, inner| {
            if t.poll_timeout().is_some_and(|d| d <= now) {
                t.handle_timeout(now);
            }
            if inner.poll_timeout().is_some_and(|d| d <= now) {
                inner.handle_timeout(now);
            }
        });
    }

    /// A datagram for endpoint `ep`'s tunnel (a core or a per-packet datagram).
    pub(super) fn tunnel_receive(&mut self, ep: usize, data: &[u8]) {
        let now = self.now;
        with_tunnel(&mut self.eps[ep], |t, _| t.handle(now, data));
    }

    /// The client's host opens its end-to-end connection.
    pub(super) fn tunnel_open(&mut self, ep: usize) {
        let now = self.now;
        if let Some(t) = &mut self.eps[ep].tunnel {
            let _ = t.inner.open_path(now, AddrId(0), AddrId(0), false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_come_out_as_they_went_in() {
        let mut acks = AckStore::default();
        let mut pkt = Vec::new();
        let dg: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        wrap(Side::Client, &dg, None, &mut pkt);
        assert_eq!(pkt.len(), INNER_HEADERS + dg.len());
        assert!(!braid_tunnel::class::is_pure_ack(&pkt));
        assert_eq!(unwrap(&pkt, &mut acks).as_deref(), Some(&dg[..]));
        let id = acks.put(&dg[..40]);
        wrap(Side::Server, &dg[..40], Some(id), &mut pkt);
        assert_eq!(pkt.len(), INNER_HEADERS);
        assert!(braid_tunnel::class::is_pure_ack(&pkt));
        assert_eq!(unwrap(&pkt, &mut acks).as_deref(), Some(&dg[..40]));
        // Taken once.
        assert_eq!(unwrap(&pkt, &mut acks), None);
    }
}
