//! The MPTCP transport's client: one connection to the gateway at a time, reconnecting after
//! [`RECONNECT`], trying each link's gateway address in turn.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::{
    AbortOnDrop, Counters, HANDSHAKE_TIMEOUT, Opener, PROLOGUE, Pipe, QUEUE, RECONNECT, Role,
    Sealer, Stream, connect, read_message, transport, write_message, writer,
};
use crate::daemon::common::DaemonError;
use crate::daemon::config::ClientConfig;
use crate::frame::StoP;
use crate::secure::{Keypair, PublicKey};

/// The current connection's writer queue.
type Conn = Arc<Mutex<Option<mpsc::Sender<Vec<u8>>>>>;

/// The client role: one connection at a time, kept by its own task.
pub(crate) struct ClientRole {
    conn: Conn,
    state: Arc<Mutex<Value>>,
    _keep: AbortOnDrop,
}

/// The MPTCP transport's client.
pub(crate) type Client = Stream<ClientRole>;

impl Stream<ClientRole> {
    /// Starts connecting.
    pub fn new(cfg: &ClientConfig) -> Result<Client, DaemonError> {
        let keypair = Keypair::from_private(cfg.private_key()?);
        let gateway_key = cfg.gateway_key()?;
        let gateways: Vec<SocketAddr> = (0..cfg.links.len()).map(|i| cfg.link_gateway(i)).collect();
        let max = usize::from(cfg.tun.mtu);
        let c = Arc::new(Counters::default());
        let conn: Conn = Arc::new(Mutex::new(None));
        let state: Arc<Mutex<Value>> = Arc::new(Mutex::new(json!({"connected": false})));
        let (pipe, tun_tx) = Pipe::new(max, c.clone());
        info!(gateways = ?gateways, tun = %cfg.tun.name, "client running over kernel MPTCP");
        let (kconn, kstate) = (conn.clone(), state.clone());
        let keep = async move {
            let mut attempt = 0usize;
            loop {
                let to = gateways[attempt % gateways.len()];
                attempt += 1;
                let r = session(
                    &keypair,
                    &gateway_key,
                    to,
                    max,
                    &c,
                    &kconn,
                    &tun_tx,
                    &kstate,
                );
                match r.await {
                    Ok(()) => info!(gateway = %to, "stream closed; reconnecting"),
                    Err(e) => warn!(gateway = %to, "connection: {e}; reconnecting"),
                }
                *kconn.lock().unwrap() = None;
                kstate.lock().unwrap()["connected"] = false.into();
                tokio::time::sleep(RECONNECT).await;
            }
        };
        let role = ClientRole {
            conn,
            state,
            _keep: AbortOnDrop(tokio::spawn(keep)),
        };
        Ok(Stream { pipe, role })
    }
}

impl Role for ClientRole {
    const NAME: &'static str = "client";

    fn route(&self, _packet: &[u8]) -> Option<mpsc::Sender<Vec<u8>>> {
        self.conn.lock().ok().and_then(|c| c.clone())
    }

    fn status(&self) -> Value {
        self.state.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

#[allow(clippy::too_many_arguments)]
async fn session(
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
