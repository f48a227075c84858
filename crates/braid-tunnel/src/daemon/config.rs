//! The daemons' configuration: a TOML file, every key also settable from the environment.
//!
//! Environment overrides are applied to the parsed TOML before it is checked, so they obey the
//! same types and produce the same errors. The variable for a key is `BRAID_TUNNEL_` followed
//! by its path in upper case with `_` between the parts: `gateway` → `BRAID_TUNNEL_GATEWAY`,
//! `connection.scheduler` → `BRAID_TUNNEL_CONNECTION_SCHEDULER`, `link[1].backup` →
//! `BRAID_TUNNEL_LINK_1_BACKUP`, `pm.capacity.headroom` → `BRAID_TUNNEL_PM_CAPACITY_HEADROOM`.
//! A value is read as TOML (`8`, `true`, `["a", "b"]`) and
//! otherwise as a string.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::aqm::AqmConfig;
use braid_core::Config as CoreConfig;
use braid_core::cc::Algorithm;
use braid_core::reinject::Policy;
use braid_core::scheduler::Kind;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use std::sync::Arc;

use braid_hya::Weights;
use braid_hya::{ReceiverConfig, SenderConfig};

use super::perpacket::PerPacketConfig;
use super::tunnel::TunnelConfig;
use crate::class::{Carrier, Classes, Rule, parse_dscp, parse_ports, parse_protocol};
use crate::frame::PtoSConfig;
use crate::secure::{PrivateKey, PublicKey};

/// Prefix of the environment variables that override configuration keys.
pub const ENV_PREFIX: &str = "BRAID_TUNNEL_";

/// A configuration that cannot be used; the message is one line and names the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// `braid tunnel client`: the router or vehicle side.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    /// This client's private key (base64, `braid keygen`), or `private_key_file`.
    #[serde(default)]
    pub private_key: Option<String>,
    /// A file holding the private key (base64).
    #[serde(default)]
    pub private_key_file: Option<PathBuf>,
    /// The gateway's public key (base64).
    pub gateway_public_key: String,
    /// The gateway's UDP address, used by every link without its own `gateway`.
    #[serde(default)]
    pub gateway: Option<SocketAddr>,
    /// Network interfaces, one path each, in order (the first opens the connection).
    #[serde(rename = "link")]
    pub links: Vec<LinkConfig>,
    /// The TUN device.
    pub tun: TunConfig,
    /// The multipath connection.
    #[serde(default)]
    pub connection: ConnectionConfig,
    /// Batching of packets into the stream.
    #[serde(default)]
    pub batch: BatchConfig,
    /// The path manager.
    #[serde(default)]
    pub pm: PmConfig,
    /// Operations: control socket, metrics, logs.
    #[serde(default)]
    pub ops: OpsConfig,
    /// Without any authenticated datagram from the gateway for this long (ms), start over
    /// with a new handshake (the connection and what it holds stay); also how long a
    /// connection may have no usable path while the gateway answers before it is replaced.
    #[serde(default = "default_dead_after_ms")]
    pub dead_after_ms: u64,
    /// Keepalive interval towards the gateway when nothing else is sent (ms).
    #[serde(default = "default_keepalive_ms")]
    pub keepalive_ms: u64,
    /// What carries the packets: `braid`, `datagram` or `mptcp` (see [`Transport`]).
    #[serde(default)]
    pub transport: Transport,
    /// The per-packet carrier (`transport = "datagram"`, classes).
    #[serde(default)]
    pub datagram: DatagramConfig,
    /// Per-flow classes: packets matching a rule take its transport.
    #[serde(rename = "class", default)]
    pub classes: Vec<ClassConfig>,
}

/// What carries the packets between client and gateway. `braid` and `datagram` share one
/// wire (each end's setting only decides how it sends); `mptcp` needs it on both ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// The braid core over UDP, one socket per link: packets in one reliable stream;
    /// scheduler, reinjection, congestion control and path manager from this configuration.
    #[default]
    Braid,
    /// Per-packet hybrid access (HYA) over the same UDP links, session and paths: each packet
    /// alone in one datagram on one path chosen by a proportional scheduler (`[datagram]`
    /// ratio), reordered at the far end (JUGGLER-like timeouts), never retransmitted.
    Datagram,
    /// One kernel MPTCP connection (IPPROTO_MPTCP) to the gateway's `listen` address (TCP);
    /// the kernel's path manager opens the subflows (`braid pm` with the userspace path
    /// manager, or the in-kernel one). `[connection]`, `[batch]`, `[pm]`, `[datagram]` and
    /// classes do not apply.
    Mptcp,
}

/// The per-packet carrier (seed 003's HYA baseline; `braid_hya`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatagramConfig {
    /// The proportional scheduler's weights, one per link in link order (at a gateway, the
    /// client's link order): `"1:1"`, `"2:1"`, …; or `"auto"`: weights from the delivery rate
    /// measured on each link. Unset: equal weights.
    pub ratio: Option<String>,
    /// How long a packet waits behind a missing one before the gap is given up (JUGGLER's
    /// out-of-order timeout), µs.
    pub ofo_timeout_us: u64,
    /// How long packets in sequence wait to be written together (JUGGLER's in-sequence
    /// timeout), µs; 0: at once.
    pub inseq_timeout_us: u64,
    /// How often the receiver reports what each link delivered, ms.
    pub feedback_ms: u64,
    /// A link whose packets go unreported this long (and at least two round trips and two
    /// feedback intervals) is suspended until it delivers again, ms.
    pub stall_ms: u64,
    /// Packets held behind gaps at most.
    pub reorder_capacity: usize,
}

impl Default for DatagramConfig {
    fn default() -> Self {
        DatagramConfig {
            ratio: None,
            ofo_timeout_us: 10_000,
            inseq_timeout_us: 1_000,
            feedback_ms: 50,
            stall_ms: 200,
            reorder_capacity: 4096,
        }
    }
}

/// A per-flow class: packets that match every condition given take `transport`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassConfig {
    /// `datagram` (one datagram per packet) or `braid` (the reliable stream).
    pub transport: Transport,
    /// IP protocol: `udp`, `tcp`, `icmp`, `icmpv6`, `sctp`, … or a number.
    #[serde(default)]
    pub protocol: Option<NameOrNumber>,
    /// Source or destination port, or a range: `5004`, `"5000-5010"`.
    #[serde(default)]
    pub port: Option<NameOrNumber>,
    /// DSCP: a number 0–63 or `ef`, `af41`, `cs5`, ….
    #[serde(default)]
    pub dscp: Option<NameOrNumber>,
}

/// A value written as a number or as a string.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum NameOrNumber {
    /// `5004`
    Number(i64),
    /// `"udp"`, `"5000-5010"`
    Name(String),
}

impl std::fmt::Display for NameOrNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NameOrNumber::Number(n) => write!(f, "{n}"),
            NameOrNumber::Name(s) => f.write_str(s),
        }
    }
}

/// One client interface.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    /// Interface name; the link's socket is bound to it (SO_BINDTODEVICE).
    pub name: String,
    /// Source address to bind (default: any address of the interface).
    #[serde(default)]
    pub source: Option<IpAddr>,
    /// The gateway address reached over this link (default: the top-level `gateway`).
    #[serde(default)]
    pub gateway: Option<SocketAddr>,
    /// Backup role (path manager modes `backup`, `cross-backup`).
    #[serde(default)]
    pub backup: bool,
    /// Signal threshold T of the cross-layer path manager (dBm); none: no signal input.
    #[serde(default)]
    pub threshold_dbm: Option<f64>,
    /// Weight α of a new signal sample (seed 000 Algorithm 1).
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// Hysteresis above T before a weak link is used again (dB).
    #[serde(default)]
    pub hysteresis_db: f64,
}

/// `braid tunnel gateway`: the network side, serving many clients.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// The gateway's private key (base64), or `private_key_file`.
    #[serde(default)]
    pub private_key: Option<String>,
    /// A file holding the private key (base64).
    #[serde(default)]
    pub private_key_file: Option<PathBuf>,
    /// UDP addresses to listen on (one socket each).
    pub listen: Vec<SocketAddr>,
    /// The TUN device.
    pub tun: TunConfig,
    /// The multipath connections (one per client).
    #[serde(default)]
    pub connection: ConnectionConfig,
    /// Batching of packets into the streams.
    #[serde(default)]
    pub batch: BatchConfig,
    /// Operations: control socket, metrics, logs.
    #[serde(default)]
    pub ops: OpsConfig,
    /// The clients allowed to connect.
    #[serde(rename = "client", default)]
    pub clients: Vec<PeerConfig>,
    /// A client silent for this long (ms) loses its connection.
    #[serde(default = "default_client_timeout_ms")]
    pub client_timeout_ms: u64,
    /// What carries the packets: `braid` or `datagram` (UDP on `listen`), or `mptcp` (MPTCP
    /// on `listen`, TCP); see [`Transport`].
    #[serde(default)]
    pub transport: Transport,
    /// The per-packet carrier (`transport = "datagram"`, classes).
    #[serde(default)]
    pub datagram: DatagramConfig,
    /// Per-flow classes: packets matching a rule take its transport.
    #[serde(rename = "class", default)]
    pub classes: Vec<ClassConfig>,
}

/// A client the gateway accepts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    /// A name for logs and status (default: the key's first characters).
    #[serde(default)]
    pub name: Option<String>,
    /// The client's public key (base64).
    pub public_key: String,
    /// Inner source addresses the client may use, and that are routed to it (CIDR).
    pub allowed_ips: Vec<String>,
}

/// The TUN device.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunConfig {
    /// Device name.
    #[serde(default = "default_tun_name")]
    pub name: String,
    /// Address with prefix length, e.g. `10.200.0.2/24` (IPv4 or IPv6).
    pub address: String,
    /// More addresses (CIDR).
    #[serde(default)]
    pub addresses: Vec<String>,
    /// Device MTU: the largest inner packet; both ends must agree.
    #[serde(default = "default_mtu")]
    pub mtu: u16,
    /// Routes (CIDR) sent into the tunnel.
    #[serde(default)]
    pub routes: Vec<String>,
    /// Transmit queue length of the device.
    #[serde(default = "default_txqueuelen")]
    pub txqueuelen: u32,
    /// TSO/GRO offload with batched reads and writes (virtio header): the kernel hands over
    /// and takes TCP segments of up to 64 kB, so the inner stacks process a few large
    /// segments instead of many small packets. On by default (about 4x the throughput of one
    /// TCP flow on unshaped links, README); `false` for a kernel without virtio headers on TUN.
    #[serde(default = "default_offload")]
    pub offload: bool,
}

/// Transport settings: the pluggable decisions by name, buffers and timers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConnectionConfig {
    /// `arrival` (the default: earliest estimated arrival, which keeps a slow link from holding
    /// the stream back), `minrtt`, `roundrobin`, `redundant` or `qoe` (`qoe:priority=1..6`).
    pub scheduler: String,
    /// `stock`, `pto`, `rejK` or `rejgK` (K ≥ 1): when a path's data is sent again on the
    /// others. Default `rejg1`: REJ with K = 1, guarded against the path's own queueing.
    pub reinjection: String,
    /// `newreno`, `cubic`, `lia` or `olia`.
    pub congestion: String,
    /// Loss recovery as current Linux runs it (`braid_core::Config::linux_recovery`): a
    /// retransmission lost again is resent on its path rather than after the RTO, and a
    /// path's window is reduced once per recovery episode.
    pub linux_recovery: bool,
    /// A path that reorders learns its reordering (`braid_core::Config::adaptive_reordering`):
    /// its DupThresh rises, losses are also declared by time, and the window cut of losses
    /// found spurious is undone, as Linux does. On by default.
    pub adaptive_reordering: bool,
    /// Shared receive buffer, bytes (≥ 2 × BDP of the slower path for aggregation).
    pub receive_buffer: u64,
    /// Send buffer, bytes.
    pub send_buffer: u64,
    /// Largest core datagram (0: derived from the outer MTU 1500 and the overheads).
    pub max_datagram_size: usize,
    /// Lower bound of the RTO, ms.
    pub rto_min_ms: u64,
    /// RTT assumed before the first sample, ms.
    pub initial_rtt_ms: u64,
    /// Initial congestion window, segments.
    pub initial_window: u64,
    /// Longest delay of an acknowledgement, ms.
    pub max_ack_delay_ms: u64,
    /// A path closes after this many consecutive RTO backoffs.
    pub broken_after_backoffs: u32,
    /// Floor of RTTVAR in the REJ formula, ms.
    pub rej_min_rttvar_ms: f64,
    /// CoDel's target for the delay of the stream's send queue, ms (0, the default: no queue
    /// management; see `braid_tunnel::aqm`).
    pub queue_target_ms: f64,
    /// CoDel's interval, ms (the largest smoothed RTT of the paths when longer).
    pub queue_interval_ms: u64,
    /// Pure TCP acknowledgements go per packet rather than behind the stream's queue
    /// (`class::Classes::acks_per_packet`; transport `braid`).
    pub acks_per_packet: bool,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            scheduler: "arrival".into(),
            reinjection: "rejg1".into(),
            congestion: "cubic".into(),
            linux_recovery: true,
            adaptive_reordering: true,
            receive_buffer: 16 << 20,
            send_buffer: 16 << 20,
            max_datagram_size: 0,
            rto_min_ms: 200,
            initial_rtt_ms: 100,
            initial_window: 10,
            max_ack_delay_ms: 25,
            broken_after_backoffs: 6,
            rej_min_rttvar_ms: 2.0,
            queue_target_ms: 0.0,
            queue_interval_ms: 100,
            acks_per_packet: true,
        }
    }
}

/// PtoS batching (SPEC M5): a batch is `segments` segment payloads or what waited `timeout_us`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BatchConfig {
    /// Threshold in segment payloads (the core's datagram payload).
    pub segments: usize,
    /// Longest wait of a buffered packet, µs.
    pub timeout_us: u64,
    /// Most bytes buffered while the connection does not take them.
    pub capacity: usize,
}

impl Default for BatchConfig {
    fn default() -> Self {
        BatchConfig {
            segments: 1,
            timeout_us: 200,
            capacity: 1 << 20,
        }
    }
}

/// The client's path manager.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PmConfig {
    /// `fullmesh`, `backup`, `cross` or `cross-backup`; `auto`: backup if a link is a backup.
    pub mode: String,
    /// JSON-lines signal input socket (the format of `braid pm`).
    pub signal: Option<PathBuf>,
    /// Backup modes: remove the weak primary's path instead of flagging it.
    pub remove_weak: bool,
    /// Watch the links' operational state (down: the path closes; up: it reopens).
    pub watch_links: bool,
    /// How often link state is read, ms.
    pub watch_interval_ms: u64,
    /// `[pm.hmm]`: seed 004's prediction of each link's next state from its signal (the keys
    /// of braid pm's `[hmm]`); off when absent.
    pub hmm: Option<braid_pm::HmmSettings>,
    /// `[pm.capacity]`: the capacity-aware modes' estimate (the keys of braid pm's
    /// `[capacity]`); its defaults when absent.
    pub capacity: Option<braid_pm::CapacitySettings>,
}

impl Default for PmConfig {
    fn default() -> Self {
        PmConfig {
            mode: "auto".into(),
            signal: None,
            remove_weak: false,
            watch_links: true,
            watch_interval_ms: 50,
            hmm: None,
            capacity: None,
        }
    }
}

/// Operations.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OpsConfig {
    /// Control socket for `braid status`.
    pub control: Option<PathBuf>,
    /// Prometheus text endpoint, e.g. `127.0.0.1:9477`.
    pub metrics: Option<SocketAddr>,
    /// `text` or `json`.
    pub log_format: String,
}

impl Default for OpsConfig {
    fn default() -> Self {
        OpsConfig {
            control: None,
            metrics: None,
            log_format: "text".into(),
        }
    }
}

fn default_alpha() -> f64 {
    0.5
}
fn default_tun_name() -> String {
    "braid0".into()
}
fn default_mtu() -> u16 {
    1400
}
fn default_txqueuelen() -> u32 {
    1000
}
fn default_offload() -> bool {
    true
}
fn default_dead_after_ms() -> u64 {
    5000
}
fn default_keepalive_ms() -> u64 {
    1000
}
fn default_client_timeout_ms() -> u64 {
    120_000
}

impl ClientConfig {
    /// Reads `path` and applies the process environment.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        load(path)
    }

    /// Parses TOML text and applies the overrides in `env` (name, value).
    pub fn parse(
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let c: ClientConfig = parse(text, env)?;
        c.check()?;
        Ok(c)
    }

    fn check(&self) -> Result<(), ConfigError> {
        private_key(&self.private_key, &self.private_key_file)?;
        key("gateway_public_key", &self.gateway_public_key)?;
        if self.links.is_empty() {
            return err("link: at least one [[link]] is needed");
        }
        timer_ms("keepalive_ms", self.keepalive_ms, MIN_KEEPALIVE_MS)?;
        timer_ms("dead_after_ms", self.dead_after_ms, MIN_DEAD_AFTER_MS)?;
        if self.dead_after_ms <= self.keepalive_ms {
            return err(format!(
                "dead_after_ms ({}) must be longer than keepalive_ms ({}): an idle connection would be replaced before its liveness probe is answered",
                self.dead_after_ms, self.keepalive_ms
            ));
        }
        for (i, l) in self.links.iter().enumerate() {
            ifname(&format!("link[{i}].name"), &l.name)?;
            if l.gateway.or(self.gateway).is_none() {
                return err(format!(
                    "link[{i}].gateway: no gateway address (set `gateway` or the link's own)"
                ));
            }
        }
        self.tun.check()?;
        self.tunnel_config()?;
        self.pm_config()?;
        log_format(&self.ops)?;
        Ok(())
    }

    /// The UDP payload that fits the links' path MTU (1500): less with any IPv6 gateway.
    fn outer_payload(&self) -> usize {
        let v6 = (0..self.links.len()).any(|i| self.link_gateway(i).is_ipv6());
        outer_payload(v6)
    }

    /// What each connection is made with.
    pub(crate) fn tunnel_config(&self) -> Result<TunnelConfig, ConfigError> {
        let weights = weights(self.datagram.ratio.as_deref(), Some(self.links.len()))?;
        tunnel_config(
            &self.connection,
            &self.batch,
            self.tun.mtu,
            self.transport,
            &self.classes,
            &self.datagram,
            weights,
            self.outer_payload(),
        )
    }

    /// The client's private key.
    pub fn private_key(&self) -> Result<PrivateKey, ConfigError> {
        private_key(&self.private_key, &self.private_key_file)
    }

    /// The gateway's public key.
    pub fn gateway_key(&self) -> Result<PublicKey, ConfigError> {
        key("gateway_public_key", &self.gateway_public_key)
    }

    /// The gateway address of link `i`.
    pub fn link_gateway(&self, i: usize) -> SocketAddr {
        self.links[i]
            .gateway
            .or(self.gateway)
            .expect("checked when loaded")
    }

    pub(crate) fn pm_config(&self) -> Result<braid_pm::Config, ConfigError> {
        let any_backup = self.links.iter().any(|l| l.backup);
        let mode = match self.pm.mode.as_str() {
            "auto" if any_backup => braid_pm::Mode::Backup,
            "auto" => braid_pm::Mode::FullMesh,
            m => braid_pm::Mode::from_name(m).ok_or_else(|| {
                ConfigError(format!(
                    "pm.mode: unknown mode `{m}`; allowed: auto, {}",
                    braid_pm::Mode::NAMES.join(", ")
                ))
            })?,
        };
        let cfg = braid_pm::Config {
            mode,
            ifaces: self
                .links
                .iter()
                .map(|l| braid_pm::IfaceConfig {
                    name: l.name.clone(),
                    threshold_dbm: l.threshold_dbm,
                    alpha: l.alpha,
                    hysteresis_db: l.hysteresis_db,
                    backup: l.backup,
                })
                .collect(),
            remove_weak: self.pm.remove_weak,
            hmm: self.pm.hmm.as_ref().map(braid_pm::HmmSettings::config),
            same_subnet: false,
            announce: false,
            capacity: self.pm.capacity.clone().unwrap_or_default().config(),
            // The connection's first path goes over the link whose handshake datagram the
            // gateway answered: it is not left waiting on a silent one.
            race: None,
        };
        cfg.validate()
            .map_err(|m| ConfigError(format!("pm: {m}")))?;
        Ok(cfg)
    }
}

impl GatewayConfig {
    /// Reads `path` and applies the process environment.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        load(path)
    }

    /// Parses TOML text and applies the overrides in `env` (name, value).
    pub fn parse(
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let c: GatewayConfig = parse(text, env)?;
        c.check()?;
        Ok(c)
    }

    fn check(&self) -> Result<(), ConfigError> {
        private_key(&self.private_key, &self.private_key_file)?;
        if self.listen.is_empty() {
            return err("listen: at least one UDP address is needed");
        }
        timer_ms(
            "client_timeout_ms",
            self.client_timeout_ms,
            MIN_DEAD_AFTER_MS,
        )?;
        for (i, c) in self.clients.iter().enumerate() {
            key(&format!("client[{i}].public_key"), &c.public_key)?;
            if c.allowed_ips.is_empty() {
                return err(format!("client[{i}].allowed_ips: give at least one prefix"));
            }
            for a in &c.allowed_ips {
                Prefix::parse(a)
                    .map_err(|m| ConfigError(format!("client[{i}].allowed_ips: {m}")))?;
            }
        }
        self.tun.check()?;
        self.tunnel_config()?;
        log_format(&self.ops)?;
        Ok(())
    }

    /// What each connection is made with.
    pub(crate) fn tunnel_config(&self) -> Result<TunnelConfig, ConfigError> {
        let weights = weights(self.datagram.ratio.as_deref(), None)?;
        let v6 = self.listen.iter().any(|a| a.is_ipv6());
        tunnel_config(
            &self.connection,
            &self.batch,
            self.tun.mtu,
            self.transport,
            &self.classes,
            &self.datagram,
            weights,
            outer_payload(v6),
        )
    }

    /// The gateway's private key.
    pub fn private_key(&self) -> Result<PrivateKey, ConfigError> {
        private_key(&self.private_key, &self.private_key_file)
    }
}

impl TunConfig {
    fn check(&self) -> Result<(), ConfigError> {
        ifname("tun.name", &self.name)?;
        Prefix::parse(&self.address).map_err(|m| ConfigError(format!("tun.address: {m}")))?;
        for a in &self.addresses {
            Prefix::parse(a).map_err(|m| ConfigError(format!("tun.addresses: {m}")))?;
        }
        for r in &self.routes {
            Prefix::parse(r).map_err(|m| ConfigError(format!("tun.routes: {m}")))?;
        }
        if !(576..=9000).contains(&self.mtu) {
            return err(format!(
                "tun.mtu: {} out of range: allowed 576..=9000",
                self.mtu
            ));
        }
        Ok(())
    }
}

/// An IP prefix `addr/len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// The address as written.
    pub addr: IpAddr,
    /// Prefix length.
    pub len: u8,
}

impl Prefix {
    /// Parses `10.0.0.0/24` or `fd00::1/64`; a bare address is a host prefix.
    pub fn parse(s: &str) -> Result<Prefix, String> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .trim()
            .parse()
            .map_err(|_| format!("`{s}` is not an address/prefix (e.g. 10.200.0.2/24)"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => max,
            Some(l) => l
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&l| l <= max)
                .ok_or_else(|| format!("`{s}`: prefix length must be 0..={max}"))?,
        };
        Ok(Prefix { addr, len })
    }

    /// Whether `ip` is inside the prefix.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(p) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                u128::from(p) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

fn err<T>(m: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(m.into()))
}

fn key(name: &str, text: &str) -> Result<PublicKey, ConfigError> {
    PublicKey::from_base64(text.trim()).map_err(|e| ConfigError(format!("{name}: {e}")))
}

fn private_key(text: &Option<String>, file: &Option<PathBuf>) -> Result<PrivateKey, ConfigError> {
    let text = match (text, file) {
        (Some(t), None) => t.clone(),
        (None, Some(f)) => {
            let text = std::fs::read_to_string(f)
                .map_err(|e| ConfigError(format!("private_key_file: {}: {e}", f.display())))?;
            return key_file(&text)
                .map_err(|e| ConfigError(format!("private_key_file: {}: {e}", f.display())));
        }
        (Some(_), Some(_)) => {
            return err("private_key: give private_key or private_key_file, not both");
        }
        (None, None) => {
            return err(
                "private_key: missing (give private_key or private_key_file; `braid keygen` makes one)",
            );
        }
    };
    PrivateKey::from_base64(text.trim()).map_err(|e| ConfigError(format!("private_key: {e}")))
}

/// `braid keygen`'s output as a file (`private_key = "…"` and `public_key = "…"`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    private_key: String,
    public_key: Option<String>,
}

/// A private key file's text: the base64 key alone (as `wg genkey` writes it), or what
/// `braid keygen` prints, whose public key, when present, must be the private key's.
fn key_file(text: &str) -> Result<PrivateKey, String> {
    let text = text.trim();
    if !text.contains("private_key") {
        return PrivateKey::from_base64(text).map_err(|e| e.to_string());
    }
    let f: KeyFile = toml::from_str(text).map_err(|e| format!("not a key: {}", e.message()))?;
    let key = PrivateKey::from_base64(f.private_key.trim()).map_err(|e| e.to_string())?;
    if let Some(public) = f.public_key {
        let derived = key.public_key().to_base64();
        if public.trim() != derived {
            return Err(format!(
                "public_key {public} is not the private key's (that is {derived})"
            ));
        }
    }
    Ok(key)
}

fn log_format(ops: &OpsConfig) -> Result<(), ConfigError> {
    ops.log_format
        .parse::<braid_io::LogFormat>()
        .map(|_| ())
        .map_err(|m| ConfigError(format!("ops.log_format: {m}")))
}

/// The longest timer a configuration may set (a day): a later deadline overflows a clock.
const MAX_TIMER_MS: u64 = 86_400_000;
/// The shortest liveness probe interval: 100 probes a second per link when idle.
const MIN_KEEPALIVE_MS: u64 = 10;
/// The shortest silence after which a peer is given up.
const MIN_DEAD_AFTER_MS: u64 = 100;

/// A timer of the daemons in milliseconds: at least `min` (a shorter one would flood the
/// links with probes or give up on a healthy peer between two of its packets), at most a day.
fn timer_ms(key: &str, v: u64, min: u64) -> Result<(), ConfigError> {
    if !(min..=MAX_TIMER_MS).contains(&v) {
        return err(format!(
            "{key}: {v} out of range: allowed {min}..={MAX_TIMER_MS} (a day)"
        ));
    }
    Ok(())
}

/// A network interface name as Linux takes it: 1 to 15 bytes, no `/`, `:` or white space.
fn ifname(key: &str, name: &str) -> Result<(), ConfigError> {
    if name.is_empty()
        || name.len() > 15
        || name == "."
        || name == ".."
        || name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace())
    {
        return err(format!(
            "{key}: `{name}` is not an interface name (1 to 15 characters, no `/`, `:` or spaces)"
        ));
    }
    Ok(())
}

/// The largest PtoS buffer a configuration may ask for.
const MAX_BATCH_CAPACITY: usize = 64 << 20;

/// The PtoS configuration for segments of `segment_payload` bytes.
pub(crate) fn batch(
    b: &BatchConfig,
    segment_payload: usize,
    mtu: u16,
) -> Result<PtoSConfig, ConfigError> {
    // The batch buffers are allocated when a connection starts: bounded here, not then.
    if !(1..=4096).contains(&b.segments) {
        return err(format!(
            "batch.segments: {} out of range: allowed 1..=4096",
            b.segments
        ));
    }
    if b.capacity > MAX_BATCH_CAPACITY {
        return err(format!(
            "batch.capacity: {} bytes out of range: allowed up to {MAX_BATCH_CAPACITY} (64 MiB)",
            b.capacity
        ));
    }
    if b.timeout_us > 1_000_000 {
        return err(format!(
            "batch.timeout_us: {} out of range: allowed 0..=1000000",
            b.timeout_us
        ));
    }
    let cfg = PtoSConfig {
        threshold: segment_payload.saturating_mul(b.segments),
        timeout: Duration::from_micros(b.timeout_us),
        max_packet_len: usize::from(mtu),
        capacity: b.capacity,
    };
    cfg.validate()
        .map_err(|e| ConfigError(format!("batch: {e}")))?;
    Ok(cfg)
}

/// The core configuration; `outer_payload` is the UDP payload that fits the path MTU, of
/// which the secure layer takes its overhead.
pub(crate) fn core_config(
    c: &ConnectionConfig,
    outer_payload: usize,
) -> Result<CoreConfig, ConfigError> {
    let scheduler =
        Kind::parse(&c.scheduler).map_err(|e| ConfigError(format!("connection.scheduler: {e}")))?;
    let congestion = Algorithm::from_name(&c.congestion).ok_or_else(|| {
        ConfigError(format!(
            "connection.congestion: unknown congestion control `{}`; allowed: {}",
            c.congestion,
            Algorithm::NAMES.join(", ")
        ))
    })?;
    let policy = Policy::from_name(&c.reinjection).map_err(|m| {
        ConfigError(format!(
            "connection.reinjection: {m}; allowed: stock, pto, rejK or rejgK (guarded) with an integer K ≥ 1"
        ))
    })?;
    let floor = c.rej_min_rttvar_ms;
    if !(0.0..=10_000.0).contains(&floor) {
        return err(format!(
            "connection.rej_min_rttvar_ms: {floor} out of range: allowed 0 to 10000"
        ));
    }
    let reinjection = policy.with_min_rttvar(Duration::from_secs_f64(floor / 1000.0));
    let max_datagram_size = if c.max_datagram_size == 0 {
        outer_payload.saturating_sub(super::tunnel::DATAGRAM_OVERHEAD)
    } else {
        c.max_datagram_size
    };
    let d = CoreConfig::default();
    let cfg = CoreConfig {
        max_datagram_size,
        send_buffer: c.send_buffer,
        receive_buffer: c.receive_buffer,
        initial_rtt: Duration::from_millis(c.initial_rtt_ms),
        rto_min: Duration::from_millis(c.rto_min_ms),
        broken_after_backoffs: c.broken_after_backoffs,
        max_ack_delay: Duration::from_millis(c.max_ack_delay_ms),
        initial_window: c.initial_window,
        congestion: congestion.factory(c.initial_window),
        linux_recovery: c.linux_recovery,
        adaptive_reordering: c.adaptive_reordering,
        scheduler: scheduler.factory(),
        reinjection: reinjection.shared(),
        ..d
    };
    cfg.validate()
        .map_err(|m| ConfigError(format!("connection.{m}")))?;
    Ok(cfg)
}

/// The UDP payload of a 1500-byte path: 1500 − 20 (IPv4) or 40 (IPv6) − 8 (UDP).
fn outer_payload(v6: bool) -> usize {
    if v6 { 1452 } else { 1472 }
}

/// The core, the batching, the classes and the per-packet carrier of a connection.
#[allow(clippy::too_many_arguments)]
fn tunnel_config(
    c: &ConnectionConfig,
    b: &BatchConfig,
    mtu: u16,
    transport: Transport,
    classes: &[ClassConfig],
    d: &DatagramConfig,
    weights: Weights,
    outer_payload: usize,
) -> Result<TunnelConfig, ConfigError> {
    let core = core_config(c, outer_payload)?;
    let ptos = batch(
        b,
        core.max_datagram_size - super::tunnel::SEGMENT_HEADERS,
        mtu,
    )?;
    let mut classes = class_rules(transport, classes)?;
    classes.acks_per_packet = c.acks_per_packet && matches!(transport, Transport::Braid);
    let per_packet_max = core
        .max_datagram_size
        .saturating_sub(braid_hya::wire::DATA_HEADER_LEN);
    if classes.default == Carrier::PerPacket && usize::from(mtu) > per_packet_max {
        return err(format!(
            "tun.mtu: {mtu} is more than one datagram carries with transport = \"datagram\" \
             ({per_packet_max} bytes on these links); set tun.mtu = {per_packet_max} or less"
        ));
    }
    let check = |key: &str, v: u64, max: u64| {
        if v > max {
            err(format!(
                "datagram.{key}: {v} out of range: allowed 0..={max}"
            ))
        } else {
            Ok(())
        }
    };
    check("ofo_timeout_us", d.ofo_timeout_us, 10_000_000)?;
    check("inseq_timeout_us", d.inseq_timeout_us, 1_000_000)?;
    for (key, v, max) in [
        ("feedback_ms", d.feedback_ms, 10_000),
        ("stall_ms", d.stall_ms, 60_000),
        ("reorder_capacity", d.reorder_capacity as u64, 65_536),
    ] {
        if v == 0 {
            return err(format!("datagram.{key}: must be at least 1"));
        }
        check(key, v, max)?;
    }
    let feedback_interval = Duration::from_millis(d.feedback_ms);
    let reorder = braid_hya::reorder::Config {
        ofo_timeout: Duration::from_micros(d.ofo_timeout_us),
        inseq_timeout: Duration::from_micros(d.inseq_timeout_us),
        capacity: d.reorder_capacity,
        ..braid_hya::reorder::Config::default()
    };
    let aqm = aqm_config(c)?;
    Ok(TunnelConfig {
        core: Arc::new(core),
        ptos,
        classes: Arc::new(classes),
        aqm,
        per_packet: PerPacketConfig {
            sender: SenderConfig {
                weights,
                feedback_interval,
                stall_after: Duration::from_millis(d.stall_ms),
            },
            receiver: ReceiverConfig {
                reorder,
                feedback_interval,
            },
        },
    })
}

/// One tunnel connection's configuration as the daemons make it with their defaults
/// (`[connection]` extras, `[batch]`, CoDel off, pure acknowledgements per packet), given the
/// multipath connection's `core` configuration, the transport, the `[datagram]` settings and
/// the client's number of links. The TUN MTU is the daemons' default, or what one datagram
/// carries per packet when less. This is the tunnel `braid sim` runs (a scenario's `[tunnel]`
/// gives the core from its `[connection]`).
pub fn default_tunnel_config(
    core: CoreConfig,
    transport: Transport,
    datagram: &DatagramConfig,
    links: usize,
) -> Result<TunnelConfig, ConfigError> {
    let c = ConnectionConfig {
        max_datagram_size: core.max_datagram_size,
        ..ConnectionConfig::default()
    };
    let per_packet_max = core
        .max_datagram_size
        .saturating_sub(braid_hya::wire::DATA_HEADER_LEN);
    let mtu = default_mtu().min(u16::try_from(per_packet_max).unwrap_or(u16::MAX));
    let weights = weights(datagram.ratio.as_deref(), Some(links))?;
    let mut cfg = tunnel_config(
        &c,
        &BatchConfig::default(),
        mtu,
        transport,
        &[],
        datagram,
        weights,
        core.max_datagram_size,
    )?;
    cfg.core = Arc::new(core);
    Ok(cfg)
}

/// `connection.queue_target_ms` and `queue_interval_ms`: CoDel's parameters.
fn aqm_config(c: &ConnectionConfig) -> Result<AqmConfig, ConfigError> {
    let target = c.queue_target_ms;
    if !target.is_finite() || !(0.0..=10_000.0).contains(&target) {
        return err(format!(
            "connection.queue_target_ms: {target} out of range: allowed 0 (off) to 10000"
        ));
    }
    let interval = c.queue_interval_ms;
    if target > 0.0 && !(1..=60_000).contains(&interval) {
        return err(format!(
            "connection.queue_interval_ms: {interval} out of range: allowed 1..=60000"
        ));
    }
    if target > 0.0 && target >= interval as f64 {
        return err(format!(
            "connection.queue_target_ms: {target} must be less than queue_interval_ms ({interval})"
        ));
    }
    Ok(AqmConfig {
        target: Duration::from_secs_f64(target / 1000.0),
        interval: Duration::from_millis(interval),
    })
}

/// `datagram.ratio`: unset (equal), `auto`, or one weight ≥ 1 per link (`links`, when known)
/// separated by `:`.
fn weights(ratio: Option<&str>, links: Option<usize>) -> Result<Weights, ConfigError> {
    let Some(ratio) = ratio else {
        return Ok(Weights::Fixed(vec![1; links.unwrap_or(0)]));
    };
    if ratio.trim() == "auto" {
        return Ok(Weights::Measured);
    }
    let mut w = Vec::new();
    for part in ratio.split(':') {
        let n: u32 = part.trim().parse().map_err(|_| {
            ConfigError(format!(
                "datagram.ratio: `{ratio}` is not a ratio: weights separated by `:` (e.g. \"2:1\") or \"auto\""
            ))
        })?;
        if n == 0 {
            return err(format!(
                "datagram.ratio: a weight of 0 in `{ratio}`: every link needs at least 1 (a link \
                 that should carry nothing is a backup: link[i].backup = true)"
            ));
        }
        w.push(n);
    }
    if let Some(n) = links
        && w.len() != n
    {
        return err(format!(
            "datagram.ratio: `{ratio}` has {} weights for {n} links: one per [[link]], in order",
            w.len()
        ));
    }
    Ok(Weights::Fixed(w))
}

/// The classes: the transport's default carrier and the rules.
fn class_rules(transport: Transport, rules: &[ClassConfig]) -> Result<Classes, ConfigError> {
    let carrier = |t: Transport| match t {
        Transport::Braid => Some(Carrier::Stream),
        Transport::Datagram => Some(Carrier::PerPacket),
        Transport::Mptcp => None,
    };
    let Some(default) = carrier(transport) else {
        if !rules.is_empty() {
            return err(
                "class: per-flow classes need transport = \"braid\" or \"datagram\" (the MPTCP \
                 transport carries one stream)",
            );
        }
        return Ok(Classes::all(Carrier::Stream));
    };
    let mut out = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        let carrier = carrier(r.transport).ok_or_else(|| {
            ConfigError(format!(
                "class[{i}].transport: mptcp cannot carry a class; allowed: braid, datagram"
            ))
        })?;
        let field = |key: &str, v: &Option<NameOrNumber>| {
            v.as_ref().map(|v| (key.to_string(), v.to_string()))
        };
        let value = |kv: Option<(String, String)>, parse: fn(&str) -> Result<_, String>| {
            kv.map(|(k, v)| parse(&v).map_err(|m| ConfigError(format!("class[{i}].{k}: {m}"))))
                .transpose()
        };
        let protocol = value(field("protocol", &r.protocol), parse_protocol)?;
        let dscp = value(field("dscp", &r.dscp), parse_dscp)?;
        let ports = r
            .port
            .as_ref()
            .map(|v| parse_ports(&v.to_string()))
            .transpose()
            .map_err(|m| ConfigError(format!("class[{i}].port: {m}")))?;
        if protocol.is_none() && ports.is_none() && dscp.is_none() {
            return err(format!(
                "class[{i}]: give at least one of protocol, port, dscp"
            ));
        }
        out.push(Rule {
            carrier,
            protocol,
            ports,
            dscp,
        });
    }
    Ok(Classes {
        default,
        rules: out,
        acks_per_packet: false,
    })
}

/// The largest array index an environment override may name (`BRAID_TUNNEL_LINK_<i>_…`):
/// the entries up to it are created.
const MAX_ENV_INDEX: usize = 255;

fn load<T: DeserializeOwned + Checked>(path: &Path) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("config {}: {e}", path.display())))?;
    T::parse_checked(&text, env_overrides()?)
        .map_err(|e| ConfigError(format!("config {}: {}", path.display(), e.0)))
}

/// The process environment's `BRAID_TUNNEL_*` variables (`std::env::vars` panics on any
/// variable that is not Unicode, whatever its name; one of ours that is not is an error).
fn env_overrides() -> Result<Vec<(String, String)>, ConfigError> {
    let mut out = Vec::new();
    for (k, v) in std::env::vars_os() {
        let Some(k) = k.to_str().filter(|k| k.starts_with(ENV_PREFIX)) else {
            continue;
        };
        let Ok(v) = v.into_string() else {
            return err(format!("{k}: the value is not valid UTF-8"));
        };
        out.push((k.to_string(), v));
    }
    Ok(out)
}

trait Checked: Sized {
    fn parse_checked(
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError>;
}

impl Checked for ClientConfig {
    fn parse_checked(
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        ClientConfig::parse(text, env)
    }
}

impl Checked for GatewayConfig {
    fn parse_checked(
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        GatewayConfig::parse(text, env)
    }
}

/// Tables whose keys an environment variable may name (`BRAID_TUNNEL_<TABLE>_<KEY>`).
const TABLES: &[&str] = &["tun", "connection", "batch", "pm", "ops", "datagram"];
/// Tables inside those tables (`BRAID_TUNNEL_PM_CAPACITY_HEADROOM` → `pm.capacity.headroom`).
const SUBTABLES: &[(&str, &str)] = &[("pm", "hmm"), ("pm", "capacity")];
/// Arrays of tables (`BRAID_TUNNEL_<ARRAY>_<INDEX>_<KEY>`).
const ARRAYS: &[&str] = &["link", "client", "class"];

fn parse<T: DeserializeOwned>(
    text: &str,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<T, ConfigError> {
    let mut table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError(one_line(&format!("TOML: {}", e.message()))))?;
    let mut env: Vec<_> = env
        .into_iter()
        .filter(|(k, _)| k.starts_with(ENV_PREFIX))
        .collect();
    env.sort();
    for (name, value) in env {
        apply_env(&mut table, &name, &value)?;
    }
    let de = toml::Value::Table(table);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        ConfigError(one_line(&format!("key `{path}`: {}", e.inner())))
    })
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn env_value(v: &str) -> toml::Value {
    match format!("x = {v}").parse::<toml::Table>() {
        Ok(mut t) => t
            .remove("x")
            .unwrap_or_else(|| toml::Value::String(v.into())),
        Err(_) => toml::Value::String(v.into()),
    }
}

fn apply_env(table: &mut toml::Table, name: &str, value: &str) -> Result<(), ConfigError> {
    let rest = name[ENV_PREFIX.len()..].to_ascii_lowercase();
    let value = env_value(value);
    for t in TABLES {
        if let Some(k) = rest.strip_prefix(&format!("{t}_")) {
            let sub = table
                .entry(t.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            let Some(mut sub) = sub.as_table_mut() else {
                return err(format!("{name}: `{t}` is not a table in the file"));
            };
            let mut k = k;
            if let Some((inner, rest)) = SUBTABLES
                .iter()
                .filter(|(outer, _)| outer == t)
                .find_map(|(_, inner)| Some((*inner, k.strip_prefix(&format!("{inner}_"))?)))
            {
                let entry = sub
                    .entry(inner.to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                let Some(inner_table) = entry.as_table_mut() else {
                    return err(format!("{name}: `{t}.{inner}` is not a table in the file"));
                };
                sub = inner_table;
                k = rest;
            }
            sub.insert(k.to_string(), value);
            return Ok(());
        }
    }
    for a in ARRAYS {
        if let Some(r) = rest.strip_prefix(&format!("{a}_")) {
            let (idx, k) = r.split_once('_').unwrap_or((r, ""));
            let Ok(idx) = idx.parse::<usize>() else {
                return err(format!(
                    "{name}: expected {ENV_PREFIX}{}_<index>_<key>",
                    a.to_uppercase()
                ));
            };
            if idx > MAX_ENV_INDEX {
                return err(format!(
                    "{name}: index {idx} out of range: allowed 0..={MAX_ENV_INDEX}"
                ));
            }
            let arr = table
                .entry(a.to_string())
                .or_insert_with(|| toml::Value::Array(Vec::new()));
            let Some(arr) = arr.as_array_mut() else {
                return err(format!(
                    "{name}: `{a}` is not an array of tables in the file"
                ));
            };
            while arr.len() <= idx {
                arr.push(toml::Value::Table(toml::Table::new()));
            }
            let Some(t) = arr[idx].as_table_mut() else {
                return err(format!("{name}: `{a}[{idx}]` is not a table"));
            };
            t.insert(k.to_string(), value);
            return Ok(());
        }
    }
    table.insert(rest, value);
    Ok(())
}

#[cfg(test)]
mod tests;
