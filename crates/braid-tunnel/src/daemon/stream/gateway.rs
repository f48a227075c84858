//! The MPTCP transport's gateway: accepts MPTCP connections on the `listen` addresses, at most
//! [`HANDSHAKES`] handshakes at once (a new connection takes the oldest one's place, see
//! [`Slots`]); a client's new connection replaces its old one once its first record
//! authenticated.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::{
    AbortOnDrop, Counters, HANDSHAKE_TIMEOUT, HANDSHAKES, HANDSHAKES_PER_SOURCE, Opener, PROLOGUE,
    Pipe, QUEUE, Role, Sealer, Stream, listen, packets, read_message, transport, write_message,
    writer,
};
use crate::daemon::common::DaemonError;
use crate::daemon::config::{GatewayConfig, Prefix};
use crate::frame::{StoP, destination, source};
use crate::secure::{Keypair, PublicKey};

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
/// The gateway role: the clients and their current connections, served by the accepting task.
pub(crate) struct GatewayRole {
    peers: Peers,
    listen: Vec<SocketAddr>,
    _accept: AbortOnDrop,
}

/// The MPTCP transport's gateway.
pub(crate) type Gateway = Stream<GatewayRole>;

impl Stream<GatewayRole> {
    /// Starts listening.
    pub fn new(cfg: &GatewayConfig) -> Result<Gateway, DaemonError> {
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
        let max = usize::from(cfg.tun.mtu);
        let c = Arc::new(Counters::default());
        let (pipe, tun_tx) = Pipe::new(max, c.clone());
        info!(listen = ?cfg.listen, tun = %cfg.tun.name, "gateway running over kernel MPTCP");
        let accept = accept(listeners, keypair, peers.clone(), max, c, tun_tx);
        let role = GatewayRole {
            peers,
            listen: cfg.listen.clone(),
            _accept: AbortOnDrop(tokio::spawn(accept)),
        };
        Ok(Stream { pipe, role })
    }
}

impl Role for GatewayRole {
    const NAME: &'static str = "gateway";

    fn route(&self, packet: &[u8]) -> Option<mpsc::Sender<Vec<u8>>> {
        let dst = destination(packet)?;
        let peers = self.peers.lock().ok()?;
        peers
            .iter()
            .filter(|p| p.allowed.iter().any(|a| a.contains(dst)))
            .find_map(|p| p.conn.as_ref().map(|(_, tx)| tx.clone()))
    }

    fn status(&self) -> Value {
        let clients: Vec<Value> = self
            .peers
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
        json!({
            "listen": self.listen.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "clients": clients,
        })
    }
}

/// The handshakes in progress, by connection number and source address, oldest first. A
/// connection that arrives when [`HANDSHAKES`] are in progress takes the place of the oldest,
/// or of its own source's oldest when that source has [`HANDSHAKES_PER_SOURCE`]: connections
/// held open without a handshake (any host can open them) cannot lock clients out, as refusing
/// the newest would; a flood from one address displaces only its own.
#[derive(Debug)]
struct Slots {
    pending: VecDeque<(u64, IpAddr)>,
    max: usize,
    per_source: usize,
}

impl Slots {
    fn new(max: usize, per_source: usize) -> Slots {
        Slots {
            pending: VecDeque::new(),
            max: max.max(1),
            per_source: per_source.max(1),
        }
    }

    /// Admits handshake `id` from `from`; returns the handshake it displaces, if any.
    fn admit(&mut self, id: u64, from: IpAddr) -> Option<u64> {
        let same = self.pending.iter().filter(|(_, a)| *a == from).count();
        let evict = if same >= self.per_source {
            self.pending.iter().position(|(_, a)| *a == from)
        } else if self.pending.len() >= self.max {
            Some(0)
        } else {
            None
        };
        let gone = evict.and_then(|i| self.pending.remove(i)).map(|(id, _)| id);
        self.pending.push_back((id, from));
        gone
    }

    /// Handshake `id` ended (done, failed or displaced).
    fn done(&mut self, id: u64) {
        self.pending.retain(|(i, _)| *i != id);
    }

    fn contains(&self, id: u64) -> bool {
        self.pending.iter().any(|(i, _)| *i == id)
    }
}

/// Takes a connection's handshake slot off the list when its session leaves the handshake,
/// whichever way (also when the session is aborted).
struct SlotGuard {
    slots: Arc<Mutex<Slots>>,
    id: u64,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if let Ok(mut s) = self.slots.lock() {
            s.done(self.id);
        }
    }
}

/// Accepts connections and runs a session for each; sessions end with this task.
async fn accept(
    listeners: Vec<TcpListener>,
    keypair: Arc<Keypair>,
    peers: Peers,
    max: usize,
    c: Arc<Counters>,
    tun_tx: mpsc::Sender<Vec<u8>>,
) {
    let slots = Arc::new(Mutex::new(Slots::new(HANDSHAKES, HANDSHAKES_PER_SOURCE)));
    // Sessions still in their handshake, to abort one that is displaced.
    let mut handshaking: HashMap<u64, tokio::task::AbortHandle> = HashMap::new();
    let mut conn_no = 0u64;
    // Sessions end with the gateway: the set aborts them when it drops.
    let mut sessions = tokio::task::JoinSet::new();
    loop {
        while sessions.try_join_next().is_some() {}
        let (stream, from) = match futures_accept(&listeners).await {
            Ok(x) => x,
            Err(e) => {
                warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        conn_no += 1;
        let displaced = {
            let Ok(mut s) = slots.lock() else {
                return;
            };
            handshaking.retain(|id, _| s.contains(*id));
            s.admit(conn_no, from.ip())
        };
        if let Some(h) = displaced.and_then(|id| handshaking.remove(&id)) {
            h.abort();
            Counters::add(&c.handshake_evicted, 1);
        }
        let slot = SlotGuard {
            slots: slots.clone(),
            id: conn_no,
        };
        let (keypair, peers, c, tun_tx) =
            (keypair.clone(), peers.clone(), c.clone(), tun_tx.clone());
        let task = sessions.spawn(async move {
            if let Err(e) = session(
                stream, from, conn_no, &keypair, &peers, max, &c, &tun_tx, slot,
            )
            .await
            {
                debug!(%from, "connection ended: {e}");
            }
        });
        handshaking.insert(conn_no, task);
    }
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
async fn session(
    stream: TcpStream,
    from: SocketAddr,
    conn_no: u64,
    keypair: &Keypair,
    peers: &Peers,
    max: usize,
    c: &Arc<Counters>,
    tun_tx: &mpsc::Sender<Vec<u8>>,
    slot: SlotGuard,
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
    drop(slot);
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
    use crate::daemon::stream::Sealer;
    use std::sync::atomic::Ordering;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn a_new_handshake_displaces_the_oldest_and_a_source_its_own() {
        let mut s = Slots::new(4, 2);
        assert_eq!(s.admit(1, ip(1)), None);
        assert_eq!(s.admit(2, ip(2)), None);
        assert_eq!(s.admit(3, ip(3)), None);
        // Source 1's third displaces its own first, not the oldest of all.
        assert_eq!(s.admit(4, ip(1)), None);
        assert_eq!(s.admit(5, ip(1)), Some(1));
        // Full: the oldest of all gives way.
        assert_eq!(s.admit(6, ip(4)), Some(2));
        s.done(3);
        assert!(!s.contains(3) && s.contains(4));
        assert_eq!(s.admit(7, ip(5)), None);
        assert_eq!(s.pending.len(), 4);
        // Done twice, or after being displaced: nothing happens.
        s.done(1);
        s.done(3);
        assert_eq!(s.pending.len(), 4);
    }

    /// More connections than [`HANDSHAKES`] held open without a word, from many addresses and
    /// many from one, before a client connects: the client's handshake and first record still
    /// go through (before, every handshake slot was held and its connection was closed at once).
    #[tokio::test]
    async fn idle_connections_do_not_lock_a_client_out() {
        let mut rng = rand::rng();
        let gw = Keypair::generate(&mut rng);
        let client = Keypair::generate(&mut rng);
        let gw_public = gw.public;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let peers: Peers = Arc::new(Mutex::new(vec![Peer {
            name: "c".into(),
            public: client.public,
            allowed: Vec::new(),
            conn: None,
            remote: None,
            connections: 0,
        }]));
        let c = Arc::new(Counters::default());
        let (tun_tx, _tun_rx) = mpsc::channel(16);
        let gateway = tokio::spawn(accept(
            vec![l],
            Arc::new(gw),
            peers.clone(),
            1500,
            c.clone(),
            tun_tx,
        ));
        let from = |last: u8| async move {
            let s = tokio::net::TcpSocket::new_v4().unwrap();
            s.bind(SocketAddr::new(ip(last), 0)).unwrap();
            s.connect(addr).await.unwrap()
        };
        let mut idle = Vec::new();
        // Eight addresses with 12 each (96: the overall bound), and 40 from one more (its own).
        for last in 3..=10 {
            for _ in 0..12 {
                idle.push(from(last).await);
            }
        }
        for _ in 0..40 {
            idle.push(from(1).await);
        }
        let stream = from(2).await;
        let (mut r, mut w) = stream.into_split();
        let handshake = async {
            let mut hs = crate::secure::noise::initiator(
                &client.private,
                &gw_public,
                PROLOGUE,
                &mut rand::rng(),
            )
            .unwrap();
            let mut buf = vec![0u8; 256];
            let n = hs.write_message(&[], &mut buf).unwrap();
            write_message(&mut w, &buf[..n]).await?;
            let mut msg = Vec::new();
            read_message(&mut r, &mut msg).await?;
            hs.read_message(&msg, &mut buf).unwrap();
            let (st, _) = transport(hs).unwrap();
            let mut sealer = Sealer {
                state: st,
                nonce: 0,
                out: Vec::new(),
            };
            sealer.send(&mut w, &[], &Counters::default()).await?;
            while c.connections.load(Ordering::Relaxed) == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok::<_, io::Error>(())
        };
        tokio::time::timeout(Duration::from_secs(3), handshake)
            .await
            .expect("the client's handshake finished in time")
            .expect("the gateway answered the client's handshake");
        assert_eq!(peers.lock().unwrap()[0].connections, 1);
        // 136 idle connections and the client admitted; 64 slots.
        let evicted = c.handshake_evicted.load(Ordering::Relaxed);
        assert!(evicted >= 136 - HANDSHAKES as u64, "{evicted} displaced");
        gateway.abort();
        drop(idle);
    }
}
