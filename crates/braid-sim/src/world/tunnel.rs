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
//! number. A CBR application's messages skip the end-to-end connection by default
//! (`cbr_over = "udp"`): each goes into the tunnel as an IPv4/UDP packet, fragmented as the
//! host's IP layer fragments one larger than the tunnel's MTU, and is the application's when
//! its last fragment comes out at the far end; nothing resends it end to end. Not simulated:
//! the secure layer (its connection id and AEAD overhead; a link's `overhead` can add them).

use std::collections::{BTreeMap, VecDeque};

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
    /// CBR messages travel as UDP packets (`cbr_over = "udp"`), not on `inner`.
    pub cbr_udp: bool,
    /// The IPv4 identification of the next UDP datagram sent, and the largest packet the
    /// tunnel takes (its TUN MTU).
    udp_id: u16,
    mtu: usize,
    /// UDP datagrams in reassembly, oldest first.
    frags: VecDeque<Fragments>,
    /// UDP payloads (CBR messages) received whole, for the application.
    pub udp_in: VecDeque<Vec<u8>>,
}

impl TunnelEnd {
    pub fn new(v: &crate::scenario::TunnelVariant, side: Side) -> Box<TunnelEnd> {
        Box::new(TunnelEnd {
            tunnel: Tunnel::new(&v.tunnel, side, Instant::ZERO, 1),
            inner: Connection::new(v.inner.clone(), side, Instant::ZERO),
            dg: Vec::new(),
            pkt: Vec::new(),
            got: Vec::new(),
            cbr_udp: v.cbr_udp,
            udp_id: 0,
            mtu: v.tunnel.ptos.max_packet_len,
            frags: VecDeque::new(),
            udp_in: VecDeque::new(),
        })
    }

    /// A UDP datagram from the peer's host, or one of its IPv4 fragments: its payload goes to
    /// `udp_in` once the datagram is whole. At most [`REASSEMBLY`] datagrams wait for missing
    /// fragments; beyond, the oldest is given up (lost), as a host's reassembly queue is bounded.
    fn receive_udp(frags: &mut VecDeque<Fragments>, udp_in: &mut VecDeque<Vec<u8>>, packet: &[u8]) {
        let (Some(id), Some(frag)) = (packet.get(4..6), packet.get(6..8)) else {
            return;
        };
        let id = u16::from_be_bytes([id[0], id[1]]);
        let frag = u16::from_be_bytes([frag[0], frag[1]]);
        let (more, offset) = (frag & MORE_FRAGMENTS != 0, usize::from(frag & 0x1fff) * 8);
        let piece = &packet[IPV4_HEADER.min(packet.len())..];
        if !more && offset == 0 {
            if let Some(payload) = piece.get(UDP_HEADER..) {
                udp_in.push_back(payload.to_vec());
            }
            return;
        }
        let i = match frags.iter().position(|f| f.id == id) {
            Some(i) => i,
            None => {
                if frags.len() == REASSEMBLY {
                    frags.pop_front();
                }
                frags.push_back(Fragments {
                    id,
                    data: Vec::new(),
                    have: 0,
                    total: None,
                });
                frags.len() - 1
            }
        };
        let f = &mut frags[i];
        let end = offset + piece.len();
        if f.data.len() < end {
            f.data.resize(end, 0);
        }
        f.data[offset..end].copy_from_slice(piece);
        f.have += piece.len();
        if !more {
            f.total = Some(end);
        }
        if f.total.is_some_and(|t| f.have >= t)
            && let Some(f) = frags.remove(i)
            && let Some(payload) = f.data.get(UDP_HEADER..)
        {
            udp_in.push_back(payload.to_vec());
        }
    }
}

/// A UDP datagram whose fragments are arriving.
struct Fragments {
    id: u16,
    /// The datagram (UDP header first) as far as its fragments say.
    data: Vec<u8>,
    /// Bytes of fragments received.
    have: usize,
    /// Its length, once the last fragment is in.
    total: Option<usize>,
}

/// IPv4 header, UDP header; the fragment field's "more fragments" flag.
const IPV4_HEADER: usize = 20;
const UDP_HEADER: usize = 8;
const MORE_FRAGMENTS: u16 = 0x2000;
/// Datagrams in reassembly at most.
const REASSEMBLY: usize = 64;
/// IPv4 protocol numbers.
const TCP: u8 = 6;
const UDP: u8 = 17;

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

/// The hosts' addresses and ports, sender's first: client 10.0.0.1:40000, server
/// 10.0.0.2:5201.
fn hosts(side: Side) -> ([u8; 4], [u8; 4], u16, u16) {
    match side {
        Side::Client => ([10, 0, 0, 1], [10, 0, 0, 2], 40000, 5201),
        Side::Server => ([10, 0, 0, 2], [10, 0, 0, 1], 5201, 40000),
    }
}

/// An IPv4 header into `out` (cleared first) for `len` bytes of payload; `frag` is the flags
/// and fragment offset field.
fn ipv4(side: Side, proto: u8, id: u16, frag: u16, len: usize, out: &mut Vec<u8>) {
    let (src, dst, _, _) = hosts(side);
    let total = ((IPV4_HEADER + len) as u16).to_be_bytes();
    let (id, frag) = (id.to_be_bytes(), frag.to_be_bytes());
    out.clear();
    out.extend_from_slice(&[
        0x45, 0, total[0], total[1], id[0], id[1], frag[0], frag[1], 64, proto, 0, 0,
    ]);
    out.extend_from_slice(&src);
    out.extend_from_slice(&dst);
}

/// The end-to-end datagram `dg` as an IPv4/TCP packet into `out`; `ack_id`: a pure
/// acknowledgement standing for a stored datagram.
fn wrap(side: Side, dg: &[u8], ack_id: Option<u32>, out: &mut Vec<u8>) {
    let (_, _, sport, dport) = hosts(side);
    let payload: &[u8] = if ack_id.is_some() { &[] } else { dg };
    // Don't fragment, as TCP's segments.
    ipv4(
        side,
        TCP,
        0,
        0x4000,
        INNER_HEADERS - IPV4_HEADER + payload.len(),
        out,
    );
    out.extend_from_slice(&u16::to_be_bytes(sport));
    out.extend_from_slice(&u16::to_be_bytes(dport));
    out.extend_from_slice(&ack_id.unwrap_or(0).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
    out.extend_from_slice(payload);
}

/// The CBR message `msg` as a UDP datagram in IPv4 packets of at most `mtu` bytes: one, or
/// fragments whose payloads are multiples of 8 bytes but the last (`emit` gets each).
fn wrap_udp(
    side: Side,
    id: u16,
    msg: &[u8],
    mtu: usize,
    out: &mut Vec<u8>,
    mut emit: impl FnMut(&[u8]),
) {
    let (_, _, sport, dport) = hosts(side);
    let len = UDP_HEADER + msg.len();
    let (s, d, l) = (
        sport.to_be_bytes(),
        dport.to_be_bytes(),
        (len.min(usize::from(u16::MAX)) as u16).to_be_bytes(),
    );
    let header = [s[0], s[1], d[0], d[1], l[0], l[1], 0, 0];
    let step = (mtu.saturating_sub(IPV4_HEADER) / 8 * 8).max(8);
    let mut at = 0;
    while at < len {
        // Bytes [at, end) of the datagram: the UDP header, then the message.
        let end = (at + step).min(len);
        let more = if end < len { MORE_FRAGMENTS } else { 0 };
        ipv4(side, UDP, id, more | (at / 8) as u16, end - at, out);
        out.extend_from_slice(&header[at.min(UDP_HEADER)..end.min(UDP_HEADER)]);
        out.extend_from_slice(&msg[at.max(UDP_HEADER) - UDP_HEADER..end - UDP_HEADER]);
        emit(out);
        at = end;
    }
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
                let (frags, udp_in) = (&mut e.frags, &mut e.udp_in);
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
                    if p.get(9) == Some(&UDP) {
                        TunnelEnd::receive_udp(frags, udp_in, p);
                        moved = true;
                    } else if let Some(d) = unwrap(p, acks) {
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

    /// The client's host opens its end-to-end connection (none for CBR over UDP).
    pub(super) fn tunnel_open(&mut self, ep: usize) {
        let now = self.now;
        if let Some(t) = &mut self.eps[ep].tunnel
            && !t.cbr_udp
        {
            let _ = t.inner.open_path(now, AddrId(0), AddrId(0), false);
        }
    }

    /// Endpoint `ep`'s host sends the CBR message `msg` over UDP through its tunnel. A packet
    /// the tunnel refuses (its stream's queue full) is dropped, as the TUN queue drops it.
    pub(super) fn tunnel_send_udp(&mut self, ep: usize, msg: &[u8]) {
        let now = self.now;
        let side = if self.eps[ep].client {
            Side::Client
        } else {
            Side::Server
        };
        with_end(&mut self.eps[ep], |e| {
            let id = e.udp_id;
            e.udp_id = e.udp_id.wrapping_add(1);
            let t = &mut e.tunnel;
            wrap_udp(side, id, msg, e.mtu, &mut e.pkt, |p| {
                let _ = t.push(now, p);
            });
        });
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

    #[test]
    fn a_udp_message_larger_than_the_mtu_arrives_whole_whatever_the_fragments_order() {
        let msg: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
        let mut frags = Vec::new();
        wrap_udp(Side::Client, 9, &msg, 1400, &mut Vec::new(), |p| {
            frags.push(p.to_vec())
        });
        // 3008 bytes of UDP in 1376-byte pieces (multiples of 8): three packets within 1400.
        assert_eq!(frags.len(), 3);
        assert!(frags.iter().all(|p| p.len() <= 1400 && p[9] == UDP));
        let (mut reasm, mut got) = (VecDeque::new(), VecDeque::new());
        for i in [2, 0, 1] {
            assert!(got.is_empty());
            TunnelEnd::receive_udp(&mut reasm, &mut got, &frags[i]);
        }
        assert_eq!(got.pop_front().as_deref(), Some(&msg[..]));
        assert!(reasm.is_empty());
        // One that fits goes whole; one missing a fragment never comes out, and a bounded
        // number of such wait.
        wrap_udp(Side::Server, 10, &msg[..500], 1400, &mut Vec::new(), |p| {
            TunnelEnd::receive_udp(&mut reasm, &mut got, p)
        });
        assert_eq!(got.pop_front().as_deref(), Some(&msg[..500]));
        for id in 0..200 {
            let mut n = 0;
            wrap_udp(Side::Client, id, &msg, 1400, &mut Vec::new(), |p| {
                if n != 1 {
                    TunnelEnd::receive_udp(&mut reasm, &mut got, p);
                }
                n += 1;
            });
        }
        assert!(got.is_empty());
        assert_eq!(reasm.len(), REASSEMBLY);
        // Truncated packets are ignored.
        TunnelEnd::receive_udp(&mut reasm, &mut got, &frags[0][..5]);
        TunnelEnd::receive_udp(&mut reasm, &mut got, &frags[1][..20]);
        assert!(got.is_empty());
    }
}
