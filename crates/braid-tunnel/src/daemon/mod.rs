//! The tunnel runtime: `braid tunnel client` and `braid tunnel gateway` on tokio.
//!
//! ```text
//!  client                                                         gateway
//!  TUN ─read batch→ PtoS ─write→ Connection ─poll_transmit→ [conn id ‖ datagram]
//!      ─Initiator.seal→ UDP socket of the path's link (SO_BINDTODEVICE) ──────────┐
//!                                                                                 ▼
//!  UDP socket ─Responder.handle (session by receiver index → peer)→ peer's Connection
//!      (path's peer address := datagram's source) ─read→ StoP ─packets→ TUN ─→ server
//!  and the same backwards: the gateway's TUN packet → peer by destination (allowed_ips)
//!      → that peer's PtoS → Connection → Responder.seal → the path's last source address.
//! ```
//!
//! Each daemon is one task that owns all protocol state (the secure layer, the connections,
//! the path manager) and waits on one thing at a time: a TUN batch, a readable socket, the
//! earliest timer, a signal sample, a link-state tick. After any input it drains what else is
//! ready without waiting (TUN reads, socket reads) and then polls every connection's
//! transmits, so datagrams and packets are handled in batches. The clock is one
//! [`std::time::Instant`] taken at start ([`Clock`]). Status is a JSON snapshot refreshed
//! every 250 ms, served on the control socket and as Prometheus text.

mod client;
mod config;
mod gateway;
mod status;
mod stream;
mod tun;
mod tunnel;
mod udp;

use std::time::Duration;

pub use client::{run_client, run_client_until};
pub use config::{
    BatchConfig, ClientConfig, ConfigError, ConnectionConfig, ENV_PREFIX, GatewayConfig,
    LinkConfig, OpsConfig, PeerConfig, PmConfig, Prefix, Transport, TunConfig,
};
pub use gateway::{run_gateway, run_gateway_until};
pub use status::{prometheus, status_table};

use crate::secure::Keypair;

/// A daemon that could not start or had to stop; the message is one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DaemonError(pub String);

impl From<ConfigError> for DaemonError {
    fn from(e: ConfigError) -> Self {
        DaemonError(e.0)
    }
}

/// A new key pair for `braid keygen`: (private, public), base64.
pub fn keygen() -> (String, String) {
    let mut rng = rand::rng();
    let pair = Keypair::generate(&mut rng);
    (pair.private.to_base64(), pair.public.to_base64())
}

/// The daemon's clock: microseconds since the daemon started, as the core counts time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock(std::time::Instant);

impl Clock {
    pub fn start() -> Clock {
        Clock(std::time::Instant::now())
    }

    pub fn now(&self) -> braid_core::Instant {
        braid_core::Instant::from_micros(self.0.elapsed().as_micros() as u64)
    }

    /// The tokio instant of a core instant.
    pub fn tokio(&self, t: braid_core::Instant) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.0 + t.since_epoch())
    }
}

/// How often the status snapshot is refreshed.
const STATUS_EVERY: Duration = Duration::from_millis(250);

/// Resolves on SIGINT or SIGTERM.
pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let term = signal(SignalKind::terminate());
    match term {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The secure layer's drops by reason, for the status document's `drops`.
pub(crate) fn secure_drops(
    stats: &crate::secure::Stats,
) -> serde_json::Map<String, serde_json::Value> {
    crate::secure::DropReason::ALL
        .iter()
        .map(|r| {
            (
                r.name().to_string(),
                serde_json::Value::from(stats.dropped(*r)),
            )
        })
        .collect()
}

/// All the secure layer's counters.
pub(crate) fn secure_json(stats: &crate::secure::Stats) -> serde_json::Value {
    stats
        .iter()
        .map(|(k, n)| (k.to_string(), serde_json::Value::from(n)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}
