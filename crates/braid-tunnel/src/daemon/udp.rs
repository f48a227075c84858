//! The outer UDP sockets: one per client link (bound to its interface), one per gateway listen
//! address; large buffers; readiness over many sockets at once.
//!
//! I/O is batched with quinn-udp: datagrams queued for the same destination with the same size
//! leave in one `sendmsg` with UDP generic segmentation offload (GSO, the last segment may be
//! shorter), and one `recvmmsg` reads up to [`quinn_udp::BATCH_SIZE`] messages, each possibly
//! several datagrams coalesced by the kernel (GRO) and split again here by their stride. Where
//! the kernel lacks GSO, quinn-udp falls back to one datagram per call.

use std::future::poll_fn;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::task::Poll;

use nix::sys::socket::{setsockopt, sockopt};
use quinn_udp::{RecvMeta, Transmit, UdpSockRef, UdpSocketState};
use serde_json::{Map, Value};
use socket2::{Domain, Protocol, Type};
use tokio::io::Interest;
use tokio::net::UdpSocket;

use super::tunnel::{Out, Tunnel};

/// Socket buffers asked for (the kernel caps them at `net.core.{r,w}mem_max` unless root).
const SOCKET_BUFFER: usize = 4 << 20;
/// Bytes of one GSO send at most (the UDP length field bounds the super-datagram).
const GSO_BYTES: usize = 60_000;
/// Room for one received message: with GRO the kernel coalesces up to 64 KiB.
const RX_MESSAGE: usize = 64 * 1024;

/// A UDP socket with a send batch.
#[derive(Debug)]
pub struct Socket {
    io: UdpSocket,
    state: UdpSocketState,
    /// Queued datagrams, back to back: all `seg` bytes long but the last one, all for `to`.
    tx: Vec<u8>,
    to: Option<SocketAddr>,
    seg: usize,
    count: usize,
    /// The last queued datagram was shorter than `seg`: the batch takes no more.
    closed: bool,
    stats: IoStats,
}

/// System calls and datagrams, to show how well I/O batches.
#[derive(Debug, Default, Clone, Copy)]
pub struct IoStats {
    pub send_calls: u64,
    pub datagrams_sent: u64,
    pub recv_calls: u64,
    pub datagrams_received: u64,
}

/// A UDP socket for a client link: bound to interface `device` (SO_BINDTODEVICE) and to
/// `source` if given, port chosen by the kernel, of the family of `peer`.
pub fn link_socket(device: &str, source: Option<IpAddr>, peer: SocketAddr) -> io::Result<Socket> {
    let local = match (source, peer) {
        (Some(ip), _) => SocketAddr::new(ip, 0),
        (None, SocketAddr::V4(_)) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        (None, SocketAddr::V6(_)) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    };
    let s = new_socket(local, false)?;
    s.bind_device(Some(device.as_bytes()))
        .map_err(|e| io::Error::new(e.kind(), format!("bind to interface {device}: {e}")))?;
    s.bind(&local.into())
        .map_err(|e| io::Error::new(e.kind(), format!("bind {local}: {e}")))?;
    Socket::new(s)
}

/// The largest UDP payload a datagram to `peer` (out of interface `device`, from `source`,
/// when given) carries unfragmented: the path MTU less the IP and UDP headers. IPv4: the path
/// MTU the kernel has for the route (the interface's, a route's `mtu`, or a smaller one learnt
/// from ICMP), read from a socket connected like the datagrams' (nothing is sent); IPv6: the
/// interface's MTU (`device` needed). `None` when unknown (no route or no such interface now).
pub fn path_payload(
    device: Option<&str>,
    source: Option<IpAddr>,
    peer: SocketAddr,
) -> Option<usize> {
    // An IPv4 peer seen through a dual-stack socket goes out as IPv4.
    let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
    if peer.is_ipv6() {
        let mtu: usize = std::fs::read_to_string(format!("/sys/class/net/{}/mtu", device?))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        return mtu.checked_sub(48);
    }
    let s = socket2::Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).ok()?;
    if let Some(device) = device {
        s.bind_device(Some(device.as_bytes())).ok()?;
    }
    if let Some(ip) = source.filter(|ip| !ip.is_unspecified()) {
        s.bind(&SocketAddr::new(ip, 0).into()).ok()?;
    }
    s.connect(&peer.into()).ok()?;
    let mtu = nix::sys::socket::getsockopt(&s, sockopt::IpMtu).ok()?;
    usize::try_from(mtu).ok()?.checked_sub(28)
}

/// A UDP socket listening on `addr` (the gateway). An IPv6 socket also takes IPv4 (mapped
/// addresses) unless `v6_only`: set it when an IPv4 socket listens on the same port.
pub fn listen_socket(addr: SocketAddr, v6_only: bool) -> io::Result<Socket> {
    let s = new_socket(addr, v6_only)?;
    s.bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("bind {addr}: {e}")))?;
    Socket::new(s)
}

fn new_socket(addr: SocketAddr, v6_only: bool) -> io::Result<socket2::Socket> {
    let s = socket2::Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
    // The FORCE variants pass rmem_max/wmem_max (root); otherwise the capped ones.
    if setsockopt(&s, sockopt::RcvBufForce, &SOCKET_BUFFER).is_err() {
        let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    }
    if setsockopt(&s, sockopt::SndBufForce, &SOCKET_BUFFER).is_err() {
        let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    }
    if addr.is_ipv6() {
        s.set_only_v6(v6_only)?;
    }
    Ok(s)
}

impl Socket {
    fn new(s: socket2::Socket) -> io::Result<Socket> {
        let state = UdpSocketState::new(UdpSockRef::from(&s))?;
        Ok(Socket {
            io: UdpSocket::from_std(s.into())?,
            state,
            tx: Vec::with_capacity(GSO_BYTES),
            to: None,
            seg: 0,
            count: 0,
            closed: false,
            stats: IoStats::default(),
        })
    }

    /// Queues one datagram for `to`, sending the batch first if the datagram cannot join it.
    /// Returns the number of datagrams lost to send errors (an interface down, no route): they
    /// are lost as on a wire.
    pub async fn send(&mut self, datagram: &[u8], to: SocketAddr) -> u64 {
        let mut lost = 0;
        if self.count > 0
            && (self.to != Some(to)
                || self.closed
                || datagram.len() > self.seg
                || self.count >= self.state.max_gso_segments()
                || self.tx.len() + datagram.len() > GSO_BYTES)
        {
            lost = self.flush().await;
        }
        if self.count == 0 {
            self.to = Some(to);
            self.seg = datagram.len();
        }
        self.tx.extend_from_slice(datagram);
        self.count += 1;
        self.closed = datagram.len() < self.seg;
        lost
    }

    /// Sends the queued batch, waiting while the socket buffer is full. Returns the number of
    /// datagrams lost to send errors.
    pub async fn flush(&mut self) -> u64 {
        let (Some(to), count) = (self.to, self.count) else {
            return 0;
        };
        if count == 0 {
            return 0;
        }
        let transmit = Transmit {
            destination: to,
            ecn: None,
            contents: &self.tx,
            segment_size: (count > 1).then_some(self.seg),
            src_ip: None,
        };
        let r = loop {
            let r = self.io.try_io(Interest::WRITABLE, || {
                self.state.try_send(UdpSockRef::from(&self.io), &transmit)
            });
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if let Err(e) = self.io.writable().await {
                        break Err(e);
                    }
                }
                r => break r,
            }
        };
        self.stats.send_calls += 1;
        if r.is_ok() {
            self.stats.datagrams_sent += count as u64;
        }
        self.tx.clear();
        self.count = 0;
        self.to = None;
        self.closed = false;
        match r {
            Ok(()) => 0,
            Err(_) => count as u64,
        }
    }

    /// Reads what is ready without waiting into `rx`; returns the number of messages read
    /// (0 when nothing was ready or on a receive error).
    pub fn try_recv(&mut self, rx: &mut RxBatch) -> usize {
        // The buffer is exactly BATCH_SIZE messages long (RxBatch::default).
        let mut chunks = rx.buf.chunks_mut(RX_MESSAGE);
        let mut iovs: [IoSliceMut<'_>; quinn_udp::BATCH_SIZE] =
            std::array::from_fn(|_| IoSliceMut::new(chunks.next().unwrap_or_default()));
        let r = self.io.try_io(Interest::READABLE, || {
            self.state
                .recv(UdpSockRef::from(&self.io), &mut iovs, &mut rx.meta)
        });
        let n = r.unwrap_or(0);
        rx.n = n;
        if n > 0 {
            self.stats.recv_calls += 1;
            self.stats.datagrams_received += rx.datagrams().count() as u64;
        }
        n
    }
}

/// The I/O counters of `socks` summed, and the GSO segment limit, for the status document.
pub fn io_json(socks: &[Socket]) -> serde_json::Value {
    let mut t = IoStats::default();
    for s in socks {
        t.send_calls += s.stats.send_calls;
        t.datagrams_sent += s.stats.datagrams_sent;
        t.recv_calls += s.stats.recv_calls;
        t.datagrams_received += s.stats.datagrams_received;
    }
    serde_json::json!({
        "send_calls": t.send_calls,
        "datagrams_sent": t.datagrams_sent,
        "recv_calls": t.recv_calls,
        "datagrams_received": t.datagrams_received,
        "gso_segments_max": socks.iter().map(|s| s.state.max_gso_segments()).max().unwrap_or(1),
        "gro_segments": socks.iter().map(|s| s.state.gro_segments()).max().unwrap_or(1),
    })
}

/// Receive buffers for one batched read.
pub struct RxBatch {
    buf: Vec<u8>,
    meta: Vec<RecvMeta>,
    n: usize,
}

impl Default for RxBatch {
    fn default() -> Self {
        RxBatch {
            buf: vec![0; RX_MESSAGE * quinn_udp::BATCH_SIZE],
            meta: vec![RecvMeta::default(); quinn_udp::BATCH_SIZE],
            n: 0,
        }
    }
}

impl RxBatch {
    /// The datagrams of the last read with their source addresses, coalesced messages split.
    pub fn datagrams(&self) -> impl Iterator<Item = (SocketAddr, &[u8])> {
        self.meta[..self.n]
            .iter()
            .zip(self.buf.chunks(RX_MESSAGE))
            .flat_map(|(m, b)| {
                let stride = if m.stride == 0 {
                    m.len.max(1)
                } else {
                    m.stride
                };
                b[..m.len.min(b.len())]
                    .chunks(stride)
                    .map(move |d| (m.addr, d))
            })
    }
}

/// Waits until one of `socks` is readable and returns its index; fair by rotating `start`.
pub async fn readable(socks: &[Socket], start: usize) -> usize {
    poll_fn(|cx| {
        let n = socks.len();
        for k in 0..n {
            let i = (start + k) % n;
            if socks[i].io.poll_recv_ready(cx).is_ready() {
                return Poll::Ready(i);
            }
        }
        Poll::Pending
    })
    .await
}

/// Reads what every socket has, starting after the last one that was read, until none has
/// more or `budget` datagrams were handled; `handle(socket, source, datagram)` for each.
pub fn recv_all(
    socks: &mut [Socket],
    rx: &mut RxBatch,
    budget: usize,
    mut handle: impl FnMut(usize, SocketAddr, &[u8]),
) {
    let mut handled = 0;
    loop {
        let mut any = false;
        for (i, s) in socks.iter_mut().enumerate() {
            if s.try_recv(rx) == 0 {
                continue;
            }
            any = true;
            for (from, dg) in rx.datagrams() {
                handled += 1;
                handle(i, from, dg);
            }
        }
        if !any || handled >= budget {
            return;
        }
    }
}

/// Queues `replies` (socket, destination, datagram) on their sockets.
pub async fn send_all(
    socks: &mut [Socket],
    replies: &mut Vec<(usize, SocketAddr, Vec<u8>)>,
    drops: &mut Drops,
) {
    for (s, to, d) in replies.drain(..) {
        if let Some(sock) = socks.get_mut(s) {
            drops.send_errors += sock.send(&d, to).await;
        }
    }
}

/// Sends every datagram of `t`: its plaintext sealed by `seal` (false: no session), out of the
/// socket and to the address `route` gives for the datagram (none: not sent).
pub async fn send_tunnel(
    t: &mut Tunnel,
    now: braid_core::Instant,
    bufs: &mut (Vec<u8>, Vec<u8>),
    socks: &mut [Socket],
    drops: &mut Drops,
    mut route: impl FnMut(Out) -> Option<(usize, SocketAddr)>,
    mut seal: impl FnMut(&[u8], &mut Vec<u8>) -> bool,
) {
    let (plain, sealed) = bufs;
    while let Some(out) = t.poll_transmit(now, plain) {
        let Some((s, to)) = route(out) else {
            continue;
        };
        let Some(sock) = socks.get_mut(s) else {
            continue;
        };
        if !seal(plain, sealed) {
            drops.no_session += 1;
            continue;
        }
        drops.send_errors += sock.send(sealed, to).await;
    }
}

/// All the secure layer's counters, for the status document's `secure`.
pub fn secure_json(stats: &crate::secure::Stats) -> Value {
    stats
        .iter()
        .map(|(k, n)| (k.to_string(), Value::from(n)))
        .collect::<Map<_, _>>()
        .into()
}

/// Datagrams and packets the UDP transports dropped, by reason (both roles publish every key).
#[derive(Debug, Default)]
pub struct Drops {
    /// A plaintext too short to hold a connection id.
    pub short: u64,
    /// A datagram of a connection that was replaced.
    pub stale_connection: u64,
    /// A TUN packet with no connection to take it (client).
    pub no_connection: u64,
    /// An inner packet whose source is not among the client's `allowed_ips` (gateway).
    pub inner_source: u64,
    /// A TUN packet for an address no connected client owns (gateway).
    pub no_route: u64,
    /// A TUN packet refused by PtoS (full buffer or invalid).
    pub ptos_refused: u64,
    /// Connections reset because StoP met an invalid packet.
    pub stop_invalid: u64,
    /// Datagrams that could not be sealed (no current session).
    pub no_session: u64,
    /// Datagrams the socket refused (no route, interface down).
    pub send_errors: u64,
}

impl Drops {
    /// The status document's `drops`: the secure layer's, these, the core's and the
    /// per-packet carrier's summed over `tunnels`.
    pub fn json<'a>(
        &self,
        sec: &crate::secure::Stats,
        tunnels: impl Iterator<Item = &'a Tunnel>,
    ) -> Map<String, Value> {
        let mut m: Map<String, Value> = crate::secure::DropReason::ALL
            .iter()
            .map(|r| (r.name().to_string(), sec.dropped(*r).into()))
            .collect();
        for (k, v) in [
            ("short_plaintext", self.short),
            ("stale_connection", self.stale_connection),
            ("no_connection", self.no_connection),
            ("inner_source", self.inner_source),
            ("no_route", self.no_route),
            ("ptos_refused", self.ptos_refused),
            ("stop_invalid", self.stop_invalid),
            ("no_session", self.no_session),
            ("send_errors", self.send_errors),
        ] {
            m.insert(k.into(), v.into());
        }
        let core = |d: &braid_core::Drops| {
            [
                ("core_malformed", d.malformed),
                ("core_unknown_path", d.unknown_path),
                ("core_closed_path", d.closed_path),
                ("core_too_many_paths", d.too_many_paths),
                ("core_too_many_holes", d.too_many_holes),
                ("core_protocol", d.protocol),
                ("core_closed", d.closed),
            ]
            .map(|(k, n)| (k.to_string(), n))
        };
        let per_packet = braid_hya::DropReason::ALL
            .iter()
            .map(|r| r.name())
            .chain(["no_path", "queue_full"]);
        // Every key from the start, so the metrics have every series.
        for k in core(&braid_core::Drops::default())
            .map(|(k, _)| k)
            .into_iter()
            .chain(per_packet.map(|k| format!("datagram_{k}")))
            .chain(["stream_aqm".to_string()])
        {
            m.insert(k, 0u64.into());
        }
        for t in tunnels {
            for (k, n) in core(&t.conn.stats().dropped)
                .into_iter()
                .chain(t.per_packet_drops())
                .chain([("stream_aqm".to_string(), t.aqm_drops())])
            {
                let v = m.entry(k).or_insert(Value::from(0u64));
                *v = (v.as_u64().unwrap_or(0) + n).into();
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    /// Datagrams of one size go out in few calls (GSO where the kernel has it), a shorter one
    /// closes the batch, a new destination starts another; every datagram arrives intact, in
    /// order, split again on the receiving side.
    #[tokio::test]
    async fn batches_split_back_into_the_datagrams_sent() {
        let mut tx = listen_socket(loopback(), false).unwrap();
        let mut rx = listen_socket(loopback(), false).unwrap();
        let mut other = listen_socket(loopback(), false).unwrap();
        let to = rx.io.local_addr().unwrap();
        let to_other = other.io.local_addr().unwrap();
        let mut sent = Vec::new();
        for i in 0..40u8 {
            let len = if i == 19 { 300 } else { 1200 };
            let d = vec![i; len];
            assert_eq!(tx.send(&d, to).await, 0);
            sent.push(d);
        }
        assert_eq!(tx.send(b"elsewhere", to_other).await, 0);
        assert_eq!(tx.flush().await, 0);
        assert_eq!(tx.stats.datagrams_sent, 41);
        if tx.state.max_gso_segments() > 1 {
            // Datagrams 0..=19 (the short one last), 20..40, and the other destination.
            assert_eq!(tx.stats.send_calls, 3, "{:?}", tx.stats);
        }
        let mut got = Vec::new();
        let mut batch = RxBatch::default();
        let t0 = std::time::Instant::now();
        while got.len() < sent.len() && t0.elapsed() < std::time::Duration::from_secs(5) {
            rx.io.readable().await.unwrap();
            if rx.try_recv(&mut batch) > 0 {
                got.extend(batch.datagrams().map(|(_, d)| d.to_vec()));
            }
        }
        assert_eq!(got, sent);
        assert_eq!(rx.stats.datagrams_received, 40);
        other.io.readable().await.unwrap();
        assert_eq!(other.try_recv(&mut batch), 1);
        let (from, d) = batch.datagrams().next().unwrap();
        assert_eq!(d, b"elsewhere");
        assert_eq!(from, tx.io.local_addr().unwrap());
    }

    /// A send that fails loses its datagrams and says how many; the socket goes on working.
    #[tokio::test]
    async fn send_errors_count_the_datagrams_lost() {
        let mut tx = listen_socket(loopback(), false).unwrap();
        let rx = listen_socket(loopback(), false).unwrap();
        // Broadcast without SO_BROADCAST: the kernel refuses with EACCES.
        let refused: SocketAddr = "255.255.255.255:9".parse().unwrap();
        for _ in 0..3 {
            assert_eq!(tx.send(&[0; 100], refused).await, 0);
        }
        assert_eq!(tx.flush().await, 3);
        assert_eq!(tx.stats.datagrams_sent, 0);
        tx.send(b"after", rx.io.local_addr().unwrap()).await;
        assert_eq!(tx.flush().await, 0);
        assert_eq!(tx.stats.datagrams_sent, 1);
    }

    /// A gateway listening on `0.0.0.0:P` and `[::]:P` together: the IPv6 socket is v6-only,
    /// so both bind; alone, `[::]:P` also takes IPv4.
    #[tokio::test]
    async fn dual_stack_listen_on_one_port() {
        let v4 = listen_socket("0.0.0.0:0".parse().unwrap(), true).unwrap();
        let port = v4.io.local_addr().unwrap().port();
        let v6 = listen_socket(SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), port), true);
        assert!(v6.is_ok(), "{:?}", v6.err());
        drop((v4, v6));
        let mut both = listen_socket("[::]:0".parse().unwrap(), false).unwrap();
        let to = SocketAddr::new(
            Ipv4Addr::LOCALHOST.into(),
            both.io.local_addr().unwrap().port(),
        );
        let mut tx = listen_socket(loopback(), false).unwrap();
        tx.send(b"v4 to a v6 socket", to).await;
        assert_eq!(tx.flush().await, 0);
        both.io.readable().await.unwrap();
        let mut batch = RxBatch::default();
        assert_eq!(both.try_recv(&mut batch), 1);
        assert_eq!(batch.datagrams().next().unwrap().1, b"v4 to a v6 socket");
    }
}
