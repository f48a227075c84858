//! Transport (b): the packet stream over ONE kernel MPTCP connection (IPPROTO_MPTCP) instead of
//! the braid core over UDP. The kernel schedules, retransmits and reorders; its subflows are
//! managed by `braid pm` (the kernel's userspace path manager) or by the in-kernel one, as the
//! host is set up. The tunnel only carries the packets, encrypted.
//!
//! ```text
//!  client TUN ─batch→ [u16 len ‖ Noise record] ─MPTCP stream→ gateway ─open→ StoP → TUN
//! ```
//!
//! On the stream: the Noise IK handshake (the same keys and pattern as the datagram transport,
//! its own prologue), one message each way with a 2-byte length, then records of at most
//! [`MAX_RECORD`] plaintext bytes, each `u16 length ‖ ciphertext`, the plaintext being IP packets
//! back to back (SPEC M5, cut again by their IP length). Nonces count records in each direction
//! (the stream is reliable and ordered). A gateway keeps nothing for a connection until its
//! handshake is done, at most [`HANDSHAKES`] handshakes run at once (a new connection beyond
//! takes the place of the oldest, and of its own source's oldest beyond
//! [`HANDSHAKES_PER_SOURCE`], so idle connections cannot lock clients out), each for at most
//! [`HANDSHAKE_TIMEOUT`]; a client's new connection replaces its old one only once its first
//! record authenticated, so a replayed first message cannot take a client's place.
//!
//! Tasks: the daemon's run loop owns the TUN device (packets read go to the owning connection's
//! writer through a bounded queue, a full queue drops and counts as a router would; packets to
//! write come from every connection's reader through one queue), and each connection has a
//! writer and a reader task. `client.rs` and `gateway.rs` are the two roles.

mod client;
mod gateway;

pub(crate) use client::Client;
pub(crate) use gateway::Gateway;

use braid_core::Instant;

use super::run::Transport;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use snow::StatelessTransportState;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tracing::debug;

use super::common::DaemonError;
use super::tun::Tun;
use crate::frame::StoP;

/// Largest plaintext of one record.
pub const MAX_RECORD: usize = 16 * 1024;
/// Noise's tag on every record.
const TAG: usize = 16;
/// Handshakes a gateway runs at once; a new connection beyond takes the oldest one's place.
pub const HANDSHAKES: usize = 64;
/// Handshakes from one source address at once; beyond, its own oldest gives way.
pub const HANDSHAKES_PER_SOURCE: usize = 16;
/// A handshake not finished in this time is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Batches queued towards one connection's writer; beyond, packets are dropped and counted.
const QUEUE: usize = 256;
/// The stream transport's prologue (distinct from the datagram transport's).
const PROLOGUE: &[u8] = b"braid-tunnel-mptcp v1";
/// Pause before a client reconnects.
const RECONNECT: Duration = Duration::from_millis(500);

/// Counters shared by a daemon's tasks.
#[derive(Debug, Default)]
struct Counters {
    connections: AtomicU64,
    records_sent: AtomicU64,
    records_received: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    handshake_failed: AtomicU64,
    handshake_evicted: AtomicU64,
    unknown_client: AtomicU64,
    bad_record: AtomicU64,
    stop_invalid: AtomicU64,
    no_route: AtomicU64,
    queue_full: AtomicU64,
    inner_source: AtomicU64,
}

impl Counters {
    fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }

    fn json(&self) -> Value {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        json!({
            "connections_started": g(&self.connections),
            "stream": {
                "records_sent": g(&self.records_sent),
                "records_received": g(&self.records_received),
                "bytes_sent": g(&self.bytes_sent),
                "bytes_received": g(&self.bytes_received),
            },
            "drops": {
                "handshake_failed": g(&self.handshake_failed),
                "handshake_evicted": g(&self.handshake_evicted),
                "unknown_client": g(&self.unknown_client),
                "bad_record": g(&self.bad_record),
                "stop_invalid": g(&self.stop_invalid),
                "no_route": g(&self.no_route),
                "queue_full": g(&self.queue_full),
                "inner_source": g(&self.inner_source),
            },
        })
    }
}

/// An MPTCP socket (IPPROTO_MPTCP) of `addr`'s family.
fn mptcp_socket(addr: SocketAddr) -> io::Result<Socket> {
    Socket::new(
        Domain::for_address(addr),
        Type::STREAM,
        Some(Protocol::MPTCP),
    )
    .map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("MPTCP socket: {e} (is net.mptcp.enabled set to 1?)"),
        )
    })
}

async fn connect(to: SocketAddr) -> io::Result<TcpStream> {
    let s = mptcp_socket(to)?;
    s.set_nonblocking(true)?;
    match s.connect(&to.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc_einprogress()) => {}
        Err(e) => return Err(e),
    }
    let stream = TcpStream::from_std(std::net::TcpStream::from(s))?;
    stream.writable().await?;
    if let Some(e) = stream.take_error()? {
        return Err(e);
    }
    stream.set_nodelay(true)?;
    Ok(stream)
}

fn libc_einprogress() -> i32 {
    nix::errno::Errno::EINPROGRESS as i32
}

/// An MPTCP listener on `addr`; IPv6 also takes IPv4 unless `v6_only` (see `udp::listen_socket`).
fn listen(addr: SocketAddr, v6_only: bool) -> io::Result<TcpListener> {
    let s = mptcp_socket(addr)?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(v6_only)?;
    }
    s.bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("bind {addr}: {e}")))?;
    s.listen(128)?;
    s.set_nonblocking(true)?;
    TcpListener::from_std(std::net::TcpListener::from(s))
}

async fn write_message(w: &mut OwnedWriteHalf, m: &[u8]) -> io::Result<()> {
    let len = u16::try_from(m.len()).map_err(|_| io::Error::other("message too long"))?;
    let mut buf = Vec::with_capacity(2 + m.len());
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(m);
    w.write_all(&buf).await
}

async fn read_message(r: &mut OwnedReadHalf, buf: &mut Vec<u8>) -> io::Result<()> {
    let mut len = [0u8; 2];
    r.read_exact(&mut len).await?;
    buf.resize(usize::from(u16::from_be_bytes(len)), 0);
    r.read_exact(buf).await?;
    Ok(())
}

/// The sending half of an established connection: seals batches of packets into records.
struct Sealer {
    state: Arc<StatelessTransportState>,
    nonce: u64,
    out: Vec<u8>,
}

impl Sealer {
    /// Seals `plain` into records of at most [`MAX_RECORD`] bytes and writes them; an empty
    /// `plain` is one empty record (the client's first, which proves its handshake).
    async fn send(&mut self, w: &mut OwnedWriteHalf, plain: &[u8], c: &Counters) -> io::Result<()> {
        self.out.clear();
        let mut rest = plain;
        loop {
            let (chunk, more) = rest.split_at(rest.len().min(MAX_RECORD));
            rest = more;
            let at = self.out.len();
            self.out.resize(at + 2 + chunk.len() + TAG, 0);
            let n = self
                .state
                .write_message(self.nonce, chunk, &mut self.out[at + 2..])
                .map_err(|e| io::Error::other(format!("seal: {e}")))?;
            self.nonce += 1;
            self.out[at..at + 2].copy_from_slice(&(n as u16).to_be_bytes());
            self.out.truncate(at + 2 + n);
            Counters::add(&c.records_sent, 1);
            if rest.is_empty() {
                break;
            }
        }
        Counters::add(&c.bytes_sent, plain.len() as u64);
        w.write_all(&self.out).await
    }
}

/// The receiving half: opens records and cuts the plaintext into packets.
struct Opener {
    state: Arc<StatelessTransportState>,
    nonce: u64,
    rec: Vec<u8>,
    plain: Vec<u8>,
    stop: StoP,
}

impl Opener {
    /// Reads one record; returns the packets it completed, back to back, or an error that ends
    /// the connection (closed stream, a record that does not authenticate, a bad packet).
    async fn next(&mut self, r: &mut OwnedReadHalf, c: &Counters) -> io::Result<Vec<u8>> {
        read_message(r, &mut self.rec).await?;
        self.plain.resize(self.rec.len(), 0);
        let n = self
            .state
            .read_message(self.nonce, &self.rec, &mut self.plain)
            .map_err(|_| {
                Counters::add(&c.bad_record, 1);
                io::Error::other("a record did not authenticate")
            })?;
        self.nonce += 1;
        Counters::add(&c.records_received, 1);
        Counters::add(&c.bytes_received, n as u64);
        self.stop.push(&self.plain[..n]);
        let mut out = Vec::new();
        loop {
            match self.stop.next_packet() {
                Ok(Some(p)) => out.extend_from_slice(p),
                Ok(None) => return Ok(out),
                Err(e) => {
                    Counters::add(&c.stop_invalid, 1);
                    return Err(io::Error::other(format!(
                        "invalid packet in the stream: {e}"
                    )));
                }
            }
        }
    }
}

/// Splits back-to-back packets (already validated by [`StoP`] or read one by one).
fn packets(buf: &[u8], max: usize) -> impl Iterator<Item = &[u8]> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let len = crate::frame::packet_len(&buf[at..], max).ok()??;
        let p = buf.get(at..at + len)?;
        at += len;
        Some(p)
    })
}

/// Forwards queued batches into the stream until the queue closes or the stream fails.
async fn writer(
    mut w: OwnedWriteHalf,
    mut sealer: Sealer,
    mut rx: mpsc::Receiver<Vec<u8>>,
    c: Arc<Counters>,
) {
    while let Some(mut plain) = rx.recv().await {
        // What else is queued joins the first batch, up to four records.
        while plain.len() < 4 * MAX_RECORD {
            match rx.try_recv() {
                Ok(more) => plain.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        if let Err(e) = sealer.send(&mut w, &plain, &c).await {
            debug!("stream write: {e}");
            break;
        }
    }
    let _ = w.shutdown().await;
}

fn transport(
    hs: snow::HandshakeState,
) -> Result<(Arc<StatelessTransportState>, Option<Vec<u8>>), snow::Error> {
    let remote = hs.get_remote_static().map(<[u8]>::to_vec);
    Ok((Arc::new(hs.into_stateless_transport_mode()?), remote))
}

/// What both roles share between the run loop and their connections: the queue of batches
/// their readers hand over for the TUN device, and the batches of packets read from it,
/// per connection writer, until the loop flushes.
struct Pipe {
    rx: mpsc::Receiver<Vec<u8>>,
    pending: Vec<(mpsc::Sender<Vec<u8>>, Vec<u8>)>,
    max: usize,
    c: Arc<Counters>,
}

impl Pipe {
    /// A pipe for packets of at most `max` bytes; the sender is the readers'.
    fn new(max: usize, c: Arc<Counters>) -> (Pipe, mpsc::Sender<Vec<u8>>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let pipe = Pipe {
            rx,
            pending: Vec::new(),
            max,
            c,
        };
        (pipe, tx)
    }

    /// The next batch from a reader.
    async fn wait(&mut self) -> Option<Vec<u8>> {
        self.rx.recv().await
    }

    /// Queues `batch`, and every batch already waiting, on the TUN device.
    async fn write(&mut self, batch: Option<Vec<u8>>, tun: &mut Tun) -> Result<(), DaemonError> {
        let Some(first) = batch else {
            return Err(DaemonError("the MPTCP connection tasks ended".into()));
        };
        let mut next = Some(first);
        while let Some(b) = next {
            for p in packets(&b, self.max) {
                if tun.queue(p) {
                    tun.flush().await;
                }
            }
            next = self.rx.try_recv().ok();
        }
        Ok(())
    }

    /// A packet read from the TUN device for the connection writing into `to` (none: dropped,
    /// counted).
    fn queue(&mut self, to: Option<mpsc::Sender<Vec<u8>>>, packet: &[u8]) {
        let Some(to) = to else {
            Counters::add(&self.c.no_route, 1);
            return;
        };
        match self.pending.iter_mut().find(|(t, _)| t.same_channel(&to)) {
            Some((_, b)) => b.extend_from_slice(packet),
            None => self.pending.push((to, packet.to_vec())),
        }
    }

    /// Hands the batches to their writers (a full queue drops the batch, counted).
    fn send(&mut self) {
        for (tx, b) in self.pending.drain(..) {
            if tx.try_send(b).is_err() {
                Counters::add(&self.c.queue_full, 1);
            }
        }
    }
}

/// What differs between the client and the gateway of the MPTCP transport.
trait Role {
    /// `client` or `gateway`.
    const NAME: &'static str;
    /// The writer queue of the connection that carries `packet`.
    fn route(&self, packet: &[u8]) -> Option<mpsc::Sender<Vec<u8>>>;
    /// The role's part of the status document.
    fn status(&self) -> Value;
}

/// The MPTCP transport of one role: the connections live in their own tasks (the role's), and
/// the run loop exchanges packet batches with them through the [`Pipe`].
pub(crate) struct Stream<R> {
    pipe: Pipe,
    role: R,
}

impl<R: Role> Transport for Stream<R> {
    type Input = Option<Vec<u8>>;

    async fn start(&mut self, _now: Instant) {}

    async fn wait(&mut self) -> Option<Vec<u8>> {
        self.pipe.wait().await
    }

    async fn on_input(
        &mut self,
        _now: Instant,
        batch: Option<Vec<u8>>,
        tun: &mut Tun,
    ) -> Result<(), DaemonError> {
        self.pipe.write(batch, tun).await
    }

    fn on_packet(&mut self, _now: Instant, packet: &[u8]) {
        let to = self.role.route(packet);
        self.pipe.queue(to, packet);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn on_timeout(&mut self, _now: Instant) {}

    async fn flush(&mut self, _now: Instant, _tun: &mut Tun) {
        self.pipe.send();
    }

    fn status(&self, _now: Instant) -> Value {
        let mut v = self.pipe.c.json();
        v["role"] = R::NAME.into();
        v["transport"] = "mptcp".into();
        if let (Value::Object(m), Value::Object(e)) = (&mut v, self.role.status()) {
            m.extend(e);
        }
        v
    }
}

/// Aborts a task when dropped: a connection's writer ends with its reader.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secure::Keypair;

    /// A handshake and records over a loopback TCP pair: packets arrive as sent, cut by their
    /// IP length across records; a flipped byte fails authentication and is counted.
    #[tokio::test]
    async fn records_carry_packets_and_tampering_is_detected() {
        let mut rng = rand::rng();
        let (a, b) = (Keypair::generate(&mut rng), Keypair::generate(&mut rng));
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (cs, ss) = tokio::join!(TcpStream::connect(addr), l.accept());
        let (mut cr, mut cw) = cs.unwrap().into_split();
        let (mut sr, mut sw) = ss.unwrap().0.into_split();

        let mut hi =
            crate::secure::noise::initiator(&a.private, &b.public, PROLOGUE, &mut rng).unwrap();
        let mut hr = crate::secure::noise::responder(&b.private, PROLOGUE, &mut rng).unwrap();
        let mut buf = vec![0u8; 256];
        let n = hi.write_message(&[], &mut buf).unwrap();
        write_message(&mut cw, &buf[..n]).await.unwrap();
        let mut msg = Vec::new();
        read_message(&mut sr, &mut msg).await.unwrap();
        hr.read_message(&msg, &mut buf).unwrap();
        assert_eq!(hr.get_remote_static().unwrap(), &a.public.as_bytes()[..]);
        let n = hr.write_message(&[], &mut buf).unwrap();
        write_message(&mut sw, &buf[..n]).await.unwrap();
        read_message(&mut cr, &mut msg).await.unwrap();
        hi.read_message(&msg, &mut buf).unwrap();
        let (ti, _) = transport(hi).unwrap();
        let (tr, _) = transport(hr).unwrap();

        let c = Counters::default();
        let mut sealer = Sealer {
            state: ti,
            nonce: 0,
            out: Vec::new(),
        };
        let mut opener = Opener {
            state: tr,
            nonce: 0,
            rec: Vec::new(),
            plain: Vec::new(),
            stop: StoP::new(1500),
        };
        // 30 IPv4 packets of 1400 bytes: 42 000 bytes, three records, packets cut across them.
        let mut stream = Vec::new();
        for i in 0..30u8 {
            let mut p = vec![i; 1400];
            p[0] = 0x45;
            p[2..4].copy_from_slice(&1400u16.to_be_bytes());
            stream.extend_from_slice(&p);
        }
        sealer.send(&mut cw, &stream, &c).await.unwrap();
        assert_eq!(c.records_sent.load(Ordering::Relaxed), 3);
        let mut got = Vec::new();
        for _ in 0..3 {
            got.extend(opener.next(&mut sr, &c).await.unwrap());
        }
        assert_eq!(got, stream);

        // Nothing to send is one empty record: the client's first, which the gateway waits
        // for before the connection is the client's (it sent none, and the gateway dropped an
        // idle client's connection after HANDSHAKE_TIMEOUT).
        sealer.send(&mut cw, &[], &c).await.unwrap();
        assert_eq!(opener.next(&mut sr, &c).await.unwrap(), Vec::<u8>::new());
        assert_eq!(c.records_received.load(Ordering::Relaxed), 4);

        // A record with one byte flipped on the wire.
        let mut evil = Sealer {
            state: sealer.state.clone(),
            nonce: sealer.nonce,
            out: Vec::new(),
        };
        let p = &stream[..1400];
        let n = evil
            .state
            .write_message(evil.nonce, p, {
                evil.out.resize(2 + p.len() + TAG, 0);
                &mut evil.out[2..]
            })
            .unwrap();
        evil.out[..2].copy_from_slice(&(n as u16).to_be_bytes());
        evil.out[10] ^= 1;
        cw.write_all(&evil.out).await.unwrap();
        assert!(opener.next(&mut sr, &c).await.is_err());
        assert_eq!(c.bad_record.load(Ordering::Relaxed), 1);
    }
}
