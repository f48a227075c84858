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
//! handshake is done, at most [`HANDSHAKES`] handshakes run at once, each for at most
//! [`HANDSHAKE_TIMEOUT`]; a client's new connection replaces its old one only once its first
//! record authenticated, so a replayed first message cannot take a client's place.
//!
//! Tasks: one owns the TUN device (reads go to the owning connection's writer through a bounded
//! queue, a full queue drops and counts as a router would; writes come from every connection's
//! reader), and each connection has a writer and a reader half.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use snow::StatelessTransportState;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tracing::{debug, info, warn};

use super::config::{ClientConfig, GatewayConfig, Prefix};
use super::gateway::{destination, source};
use super::status::{self, Shared};
use super::tun::Tun;
use super::{Clock, DaemonError, STATUS_EVERY};
use crate::frame::StoP;
use crate::secure::{Keypair, PublicKey};

/// Largest plaintext of one record.
pub const MAX_RECORD: usize = 16 * 1024;
/// Noise's tag on every record.
const TAG: usize = 16;
/// Handshakes a gateway runs at once; more connections wait (unauthenticated, no state).
pub const HANDSHAKES: usize = 64;
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
    handshake_busy: AtomicU64,
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
                "handshake_busy": g(&self.handshake_busy),
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
    async fn send(&mut self, w: &mut OwnedWriteHalf, plain: &[u8], c: &Counters) -> io::Result<()> {
        self.out.clear();
        for chunk in plain.chunks(MAX_RECORD) {
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

/// The TUN task: packets read go to `route(packet)`'s queue; batches from `write` are written.
async fn tun_task(
    mut tun: Tun,
    mut write: mpsc::Receiver<Vec<u8>>,
    route: impl Fn(&[u8]) -> Option<mpsc::Sender<Vec<u8>>>,
    max: usize,
    c: Arc<Counters>,
) -> Result<(), DaemonError> {
    loop {
        tokio::select! {
            r = tun.recv() => {
                r.map_err(|e| DaemonError(format!("TUN read: {e}")))?;
                let mut batches: Vec<(mpsc::Sender<Vec<u8>>, Vec<u8>)> = Vec::new();
                for _ in 0..64 {
                    for p in tun.packets() {
                        let Some(tx) = route(p) else {
                            Counters::add(&c.no_route, 1);
                            continue;
                        };
                        match batches.iter_mut().find(|(t, _)| t.same_channel(&tx)) {
                            Some((_, b)) => b.extend_from_slice(p),
                            None => batches.push((tx, p.to_vec())),
                        }
                    }
                    if !matches!(tun.try_recv(), Ok(true)) {
                        break;
                    }
                }
                for (tx, b) in batches {
                    if tx.try_send(b).is_err() {
                        Counters::add(&c.queue_full, 1);
                    }
                }
            }
            Some(b) = write.recv() => {
                for p in packets(&b, max) {
                    if tun.queue(p) {
                        tun.flush().await;
                    }
                }
                while let Ok(b) = write.try_recv() {
                    for p in packets(&b, max) {
                        if tun.queue(p) {
                            tun.flush().await;
                        }
                    }
                }
                tun.flush().await;
            }
        }
    }
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

fn publish(shared: &Shared, role: &str, tun: &str, clock: &Clock, extra: Value, c: &Counters) {
    let mut v = c.json();
    v["role"] = role.into();
    v["tun"] = json!({ "name": tun });
    v["transport"] = "mptcp".into();
    v["uptime_s"] = clock.now().secs_f64().into();
    if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    if let Ok(mut s) = shared.lock() {
        *s = v;
    }
}

/// Aborts a task when dropped: a connection's writer ends with its reader.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs `work` and `status` until `stop` resolves or the TUN task fails; then stops the TUN
/// task and the operations tasks and removes the control socket.
async fn supervise(
    role: &str,
    stop: impl Future<Output = ()>,
    work: impl Future<Output = ()>,
    status: impl Future<Output = ()>,
    mut tun_task: tokio::task::JoinHandle<Result<(), DaemonError>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    control: Option<&std::path::Path>,
) -> Result<(), DaemonError> {
    let r = tokio::select! {
        () = stop => Ok(()),
        () = work => Ok(()),
        () = status => Ok(()),
        r = &mut tun_task => r.unwrap_or_else(|e| Err(DaemonError(format!("TUN task: {e}")))),
    };
    tun_task.abort();
    for t in tasks {
        t.abort();
    }
    if let Some(p) = control {
        let _ = std::fs::remove_file(p);
    }
    info!("{role} stopped");
    r
}

// ---------------------------------------------------------------------------------------------
// Client

/// Runs the client over kernel MPTCP until `stop` resolves.
pub async fn run_client(
    cfg: ClientConfig,
    stop: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    let keypair = Keypair::from_private(cfg.private_key()?);
    let gateway_key = cfg.gateway_key()?;
    let gateways: Vec<SocketAddr> = (0..cfg.links.len()).map(|i| cfg.link_gateway(i)).collect();
    let tun = Tun::create(&cfg.tun).map_err(|e| DaemonError(e.to_string()))?;
    let max = usize::from(cfg.tun.mtu);
    let c = Arc::new(Counters::default());
    let clock = Clock::start();
    let shared: Shared = Arc::new(Mutex::new(Value::Null));
    let conn: Arc<Mutex<Option<mpsc::Sender<Vec<u8>>>>> = Arc::new(Mutex::new(None));
    let state: Arc<Mutex<Value>> = Arc::new(Mutex::new(json!({"connected": false})));
    publish(
        &shared,
        "client",
        &cfg.tun.name,
        &clock,
        state.lock().unwrap().clone(),
        &c,
    );
    let tasks = status::serve_ops(&cfg.ops, &shared).await?;
    let (tun_tx, tun_rx) = mpsc::channel(QUEUE);
    let route_conn = conn.clone();
    let tun_c = c.clone();
    let tun_task = tokio::spawn(tun_task(
        tun,
        tun_rx,
        move |_| route_conn.lock().ok()?.clone(),
        max,
        tun_c,
    ));
    info!(gateways = ?gateways, tun = %cfg.tun.name, "client running over kernel MPTCP");
    let keep = async {
        let mut attempt = 0usize;
        loop {
            let to = gateways[attempt % gateways.len()];
            attempt += 1;
            match client_session(&keypair, &gateway_key, to, max, &c, &conn, &tun_tx, &state).await
            {
                Ok(()) => info!(gateway = %to, "stream closed; reconnecting"),
                Err(e) => warn!(gateway = %to, "connection: {e}; reconnecting"),
            }
            *conn.lock().unwrap() = None;
            state.lock().unwrap()["connected"] = false.into();
            tokio::time::sleep(RECONNECT).await;
        }
    };
    let mut tick = tokio::time::interval(STATUS_EVERY);
    let status_loop = async {
        loop {
            tick.tick().await;
            let extra = state.lock().map(|s| s.clone()).unwrap_or_default();
            publish(&shared, "client", &cfg.tun.name, &clock, extra, &c);
        }
    };
    let control = cfg.ops.control.as_deref();
    supervise("client", stop, keep, status_loop, tun_task, tasks, control).await
}

#[allow(clippy::too_many_arguments)]
async fn client_session(
    keypair: &Keypair,
    gateway_key: &PublicKey,
    to: SocketAddr,
    max: usize,
    c: &Arc<Counters>,
    conn: &Arc<Mutex<Option<mpsc::Sender<Vec<u8>>>>>,
    tun_tx: &mpsc::Sender<Vec<u8>>,
    state: &Arc<Mutex<Value>>,
) -> io::Result<()> {
    let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, connect(to))
        .await
        .map_err(|_| io::Error::other("connect timed out"))??;
    let local = stream.local_addr()?;
    let (mut r, mut w) = stream.into_split();
    let mut hs =
        crate::secure::noise::initiator(&keypair.private, gateway_key, PROLOGUE, &mut rand::rng())
            .map_err(|e| io::Error::other(format!("noise: {e}")))?;
    let mut buf = vec![0u8; 256];
    let n = hs
        .write_message(&[], &mut buf)
        .map_err(|e| io::Error::other(format!("noise: {e}")))?;
    write_message(&mut w, &buf[..n]).await?;
    let mut msg = Vec::new();
    tokio::time::timeout(HANDSHAKE_TIMEOUT, read_message(&mut r, &mut msg))
        .await
        .map_err(|_| io::Error::other("handshake timed out"))??;
    hs.read_message(&msg, &mut buf).map_err(|_| {
        Counters::add(&c.handshake_failed, 1);
        io::Error::other("the gateway's handshake answer did not authenticate")
    })?;
    let (st, _) = transport(hs).map_err(|e| io::Error::other(format!("noise: {e}")))?;
    let mut sealer = Sealer {
        state: st.clone(),
        nonce: 0,
        out: Vec::new(),
    };
    // The first record (empty) proves the handshake to the gateway.
    sealer.send(&mut w, &[], c).await?;
    Counters::add(&c.connections, 1);
    info!(gateway = %to, %local, "connected over MPTCP");
    {
        let mut s = state.lock().unwrap();
        s["connected"] = true.into();
        s["gateway"] = to.to_string().into();
        s["local"] = local.to_string().into();
    }
    let (tx, rx) = mpsc::channel(QUEUE);
    *conn.lock().unwrap() = Some(tx);
    let _writer = AbortOnDrop(tokio::spawn(writer(w, sealer, rx, c.clone())));
    let mut opener = Opener {
        state: st,
        nonce: 0,
        rec: Vec::new(),
        plain: Vec::new(),
        stop: StoP::new(max),
    };
    let r = loop {
        match opener.next(&mut r, c).await {
            Ok(p) if p.is_empty() => {}
            Ok(p) => {
                if tun_tx.send(p).await.is_err() {
                    break Ok(());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    *conn.lock().unwrap() = None;
    r
}

// ---------------------------------------------------------------------------------------------
// Gateway

struct Peer {
    name: String,
    public: PublicKey,
    allowed: Vec<Prefix>,
    /// The current connection's writer queue and its number.
    conn: Option<(u64, mpsc::Sender<Vec<u8>>)>,
    remote: Option<SocketAddr>,
    connections: u64,
}

type Peers = Arc<Mutex<Vec<Peer>>>;

/// Runs the gateway over kernel MPTCP until `stop` resolves.
pub async fn run_gateway(
    cfg: GatewayConfig,
    stop: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    let keypair = Arc::new(Keypair::from_private(cfg.private_key()?));
    let mut list = Vec::new();
    for (i, p) in cfg.clients.iter().enumerate() {
        let public = PublicKey::from_base64(p.public_key.trim())
            .map_err(|e| DaemonError(format!("client[{i}].public_key: {e}")))?;
        list.push(Peer {
            name: p
                .name
                .clone()
                .unwrap_or_else(|| p.public_key.chars().take(8).collect()),
            public,
            allowed: p
                .allowed_ips
                .iter()
                .filter_map(|a| Prefix::parse(a).ok())
                .collect(),
            conn: None,
            remote: None,
            connections: 0,
        });
    }
    let peers: Peers = Arc::new(Mutex::new(list));
    let mut listeners = Vec::new();
    let v6_only = cfg.listen.iter().any(|a| a.is_ipv4());
    for a in &cfg.listen {
        listeners.push(listen(*a, v6_only).map_err(|e| DaemonError(format!("listen: {e}")))?);
    }
    let tun = Tun::create(&cfg.tun).map_err(|e| DaemonError(e.to_string()))?;
    let max = usize::from(cfg.tun.mtu);
    let c = Arc::new(Counters::default());
    let clock = Clock::start();
    let shared: Shared = Arc::new(Mutex::new(Value::Null));
    let tasks = status::serve_ops(&cfg.ops, &shared).await?;
    let (tun_tx, tun_rx) = mpsc::channel(QUEUE);
    let route_peers = peers.clone();
    let tun_task = tokio::spawn(tun_task(
        tun,
        tun_rx,
        move |p| {
            let dst = destination(p)?;
            let peers = route_peers.lock().ok()?;
            peers
                .iter()
                .filter(|p| p.allowed.iter().any(|a| a.contains(dst)))
                .find_map(|p| p.conn.as_ref().map(|(_, tx)| tx.clone()))
        },
        max,
        c.clone(),
    ));
    info!(listen = ?cfg.listen, tun = %cfg.tun.name, "gateway running over kernel MPTCP");
    let budget = Arc::new(Semaphore::new(HANDSHAKES));
    let accept = async {
        let mut conn_no = 0u64;
        // Sessions end with the gateway: the set aborts them when it drops.
        let mut sessions = tokio::task::JoinSet::new();
        loop {
            while sessions.try_join_next().is_some() {}
            let accepted = futures_accept(&listeners).await;
            let (stream, from) = match accepted {
                Ok(x) => x,
                Err(e) => {
                    warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(permit) = budget.clone().try_acquire_owned() else {
                Counters::add(&c.handshake_busy, 1);
                continue;
            };
            conn_no += 1;
            let (keypair, peers, c, tun_tx) =
                (keypair.clone(), peers.clone(), c.clone(), tun_tx.clone());
            sessions.spawn(async move {
                if let Err(e) = gateway_session(
                    stream, from, conn_no, &keypair, &peers, max, &c, &tun_tx, permit,
                )
                .await
                {
                    debug!(%from, "connection ended: {e}");
                }
            });
        }
    };
    let mut tick = tokio::time::interval(STATUS_EVERY);
    let status_loop = async {
        loop {
            tick.tick().await;
            let clients: Vec<Value> = peers
                .lock()
                .map(|ps| {
                    ps.iter()
                        .map(|p| {
                            json!({
                                "name": p.name,
                                "connected": p.conn.is_some(),
                                "remote": p.remote.map(|r| r.to_string()),
                                "connections": p.connections,
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            let extra = json!({
                "listen": cfg.listen.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
                "clients": clients,
            });
            publish(&shared, "gateway", &cfg.tun.name, &clock, extra, &c);
        }
    };
    let control = cfg.ops.control.as_deref();
    supervise(
        "gateway",
        stop,
        accept,
        status_loop,
        tun_task,
        tasks,
        control,
    )
    .await
}

async fn futures_accept(listeners: &[TcpListener]) -> io::Result<(TcpStream, SocketAddr)> {
    std::future::poll_fn(|cx| {
        for l in listeners {
            if let std::task::Poll::Ready(r) = l.poll_accept(cx) {
                return std::task::Poll::Ready(r);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

#[allow(clippy::too_many_arguments)]
async fn gateway_session(
    stream: TcpStream,
    from: SocketAddr,
    conn_no: u64,
    keypair: &Keypair,
    peers: &Peers,
    max: usize,
    c: &Arc<Counters>,
    tun_tx: &mpsc::Sender<Vec<u8>>,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let (mut r, mut w) = stream.into_split();
    // Handshake, within the budget.
    let hs = async {
        let mut msg = Vec::new();
        read_message(&mut r, &mut msg).await?;
        let mut hs = crate::secure::noise::responder(&keypair.private, PROLOGUE, &mut rand::rng())
            .map_err(|e| io::Error::other(format!("noise: {e}")))?;
        let mut buf = vec![0u8; 256];
        hs.read_message(&msg, &mut buf)
            .map_err(|_| io::Error::other("handshake did not authenticate"))?;
        let remote = hs
            .get_remote_static()
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        let peer = peers
            .lock()
            .map_err(|_| io::Error::other("lock"))?
            .iter()
            .position(|p| p.public.as_bytes()[..] == remote[..])
            .ok_or_else(|| io::Error::other("unknown client key"))?;
        let n = hs
            .write_message(&[], &mut buf)
            .map_err(|e| io::Error::other(format!("noise: {e}")))?;
        write_message(&mut w, &buf[..n]).await?;
        let (st, _) = transport(hs).map_err(|e| io::Error::other(format!("noise: {e}")))?;
        Ok::<_, io::Error>((peer, st))
    };
    let (peer, st) = match tokio::time::timeout(HANDSHAKE_TIMEOUT, hs).await {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => {
            if e.to_string().contains("unknown client") {
                Counters::add(&c.unknown_client, 1);
            } else {
                Counters::add(&c.handshake_failed, 1);
            }
            return Err(e);
        }
        Err(_) => {
            Counters::add(&c.handshake_failed, 1);
            return Err(io::Error::other("handshake timed out"));
        }
    };
    let mut opener = Opener {
        state: st.clone(),
        nonce: 0,
        rec: Vec::new(),
        plain: Vec::new(),
        stop: StoP::new(max),
    };
    // The first record must authenticate before this connection takes the client's place.
    let first = tokio::time::timeout(HANDSHAKE_TIMEOUT, opener.next(&mut r, c))
        .await
        .map_err(|_| io::Error::other("no first record"))??;
    drop(permit);
    let (tx, rx) = mpsc::channel(QUEUE);
    let (name, allowed) = {
        let mut ps = peers.lock().map_err(|_| io::Error::other("lock"))?;
        let p = &mut ps[peer];
        p.conn = Some((conn_no, tx));
        p.remote = Some(from);
        p.connections += 1;
        (p.name.clone(), p.allowed.clone())
    };
    Counters::add(&c.connections, 1);
    info!(client = %name, %from, "client connected over MPTCP");
    let sealer = Sealer {
        state: st,
        nonce: 0,
        out: Vec::new(),
    };
    let _writer = AbortOnDrop(tokio::spawn(writer(w, sealer, rx, c.clone())));
    let forward = |batch: Vec<u8>| {
        let mut ok = Vec::with_capacity(batch.len());
        for p in packets(&batch, max) {
            if source(p).is_some_and(|s: IpAddr| allowed.iter().any(|a| a.contains(s))) {
                ok.extend_from_slice(p);
            } else {
                Counters::add(&c.inner_source, 1);
            }
        }
        ok
    };
    let mut res = Ok(());
    let mut pending = Some(first);
    loop {
        let batch = match pending.take() {
            Some(b) => b,
            None => match opener.next(&mut r, c).await {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
                Err(e) => {
                    res = Err(e);
                    break;
                }
            },
        };
        let ok = forward(batch);
        if !ok.is_empty() && tun_tx.send(ok).await.is_err() {
            break;
        }
    }
    if let Ok(mut ps) = peers.lock()
        && ps[peer].conn.as_ref().is_some_and(|(n, _)| *n == conn_no)
    {
        ps[peer].conn = None;
    }
    info!(client = %name, "client connection closed");
    res
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
