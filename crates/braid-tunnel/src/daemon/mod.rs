//! The tunnel runtime: `braid tunnel client` and `braid tunnel gateway` on tokio.
//!
//! ```text
//!  client                                                         gateway
//!  TUN ─read batch→ classes ─┬→ PtoS ─write→ Connection ─poll_transmit→ [conn id ‖ datagram]
//!                            └→ per packet (HYA) ──────────────────────→ [conn id ‖ 0xd1 …]
//!      ─Initiator.seal→ UDP socket of the path's link (SO_BINDTODEVICE) ──────────┐
//!                                                                                 ▼
//!  UDP socket ─Responder.handle (session by receiver index → peer)→ peer's Tunnel
//!      (path's peer address := datagram's source) ─read→ StoP / reorder ─packets→ TUN ─→ server
//!  and the same backwards: the gateway's TUN packet → peer by destination (allowed_ips)
//!      → that peer's Tunnel → Responder.seal → the path's last source address.
//! ```
//!
//! One run loop (`run.rs`) serves both roles and every transport: it owns the TUN device, the
//! MTU check, the status document and the operations endpoints, and drives a
//! [`run::Transport`]: the UDP client (`client.rs`) and gateway (`gateway.rs`) for the
//! transports `braid` and `datagram`, which differ only in the default carrier of a packet
//! (the reliable stream or one datagram per packet; `tunnel.rs`, `perpacket.rs`), or the MPTCP
//! client and gateway (`stream/`). The UDP transports keep all protocol state (the secure
//! layer, the connections, the path manager) in the loop's task, so after any input the loop
//! drains what else is ready and then flushes, in batches. The clock is one
//! [`std::time::Instant`] taken at start ([`common::Clock`]). Status is a JSON snapshot
//! refreshed every 250 ms, served on the control socket and as Prometheus text.
//!
//! The tunnel connection itself ([`Tunnel`], [`TunnelConfig`], [`default_tunnel_config`]) is
//! sans-IO and public: the simulator runs it (`braid sim`'s `[tunnel]`).
//!
//! Dependencies between the modules go one way: `mod.rs` → `run.rs` ← `client.rs`,
//! `gateway.rs`, `stream/` → `tunnel.rs` → `perpacket.rs`; all of them → `common.rs`,
//! `config.rs`, `status.rs`, `tun.rs`, `udp.rs`.

mod client;
mod common;
mod config;
mod gateway;
mod links;
mod perpacket;
mod pm_glue;
mod run;
mod status;
mod stream;
mod tun;
mod tunnel;
mod udp;

use std::future::Future;

pub use common::DaemonError;
pub use config::{
    BatchConfig, ClassConfig, ClientConfig, ConfigError, ConnectionConfig, DatagramConfig,
    ENV_PREFIX, GatewayConfig, LinkConfig, NameOrNumber, OpsConfig, PeerConfig, PmConfig, Prefix,
    Transport, TunConfig, default_tunnel_config,
};
pub use perpacket::PerPacketConfig;
pub use status::{prometheus, status_table};
pub use tunnel::{CONN_ID_LEN, Out, Tunnel, TunnelConfig};

use crate::secure::Keypair;
use common::Clock;

/// Runs the client until SIGINT or SIGTERM.
pub async fn run_client(cfg: ClientConfig) -> Result<(), DaemonError> {
    run_client_until(cfg, common::shutdown_signal()).await
}

/// Runs the client until `stop` resolves (tests, embedding).
pub async fn run_client_until(
    cfg: ClientConfig,
    stop: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    let (tun, ops, clock) = (cfg.tun.clone(), cfg.ops.clone(), Clock::start());
    match cfg.transport {
        Transport::Mptcp => run::run(stream::Client::new(&cfg)?, &tun, &ops, clock, stop).await,
        _ => {
            run::run(
                client::Client::new(cfg, clock.now())?,
                &tun,
                &ops,
                clock,
                stop,
            )
            .await
        }
    }
}

/// Runs the gateway until SIGINT or SIGTERM.
pub async fn run_gateway(cfg: GatewayConfig) -> Result<(), DaemonError> {
    run_gateway_until(cfg, common::shutdown_signal()).await
}

/// Runs the gateway until `stop` resolves (tests, embedding).
pub async fn run_gateway_until(
    cfg: GatewayConfig,
    stop: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    let (tun, ops, clock) = (cfg.tun.clone(), cfg.ops.clone(), Clock::start());
    match cfg.transport {
        Transport::Mptcp => run::run(stream::Gateway::new(&cfg)?, &tun, &ops, clock, stop).await,
        _ => run::run(gateway::Gateway::new(cfg)?, &tun, &ops, clock, stop).await,
    }
}

/// A new key pair for `braid keygen`: (private, public), base64.
pub fn keygen() -> (String, String) {
    let mut rng = rand::rng();
    let pair = Keypair::generate(&mut rng);
    (pair.private.to_base64(), pair.public.to_base64())
}
