//! The scenario file's keys, as typed serde structures (one-line errors name the key that
//! failed). `[[node]]` and `[routing]` describe a topology; without them the file is the
//! two-node form: a client and a server joined by one link per `[[link]]`.

use std::collections::BTreeMap;
use std::time::Duration;

use braid_core::Config;
use serde::{Deserialize, Serialize};

use crate::metrics::MetricsSpec;
use crate::units::{Dur, DurOrOff, Rate, Size};

/// The published numbers of the seed paper, shown beside ours.
#[derive(Debug, Clone, Deserialize, Serialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Paper {
    pub source: String,
    #[serde(default)]
    pub note: String,
    /// variant → metric → value.
    #[serde(default)]
    pub values: BTreeMap<String, BTreeMap<String, f64>>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ConnectionSpec {
    /// minrtt | arrival | roundrobin | redundant | qoe (`qoe:priority=1..6`)
    pub scheduler: String,
    /// stock | pto | rejK | rejgK
    pub reinjection: String,
    /// newreno | cubic | lia | olia
    pub congestion: String,
    pub rto_min: Dur,
    pub rto_max: Dur,
    /// linux | rfc6298 | rfc793 (seed 004 Eq. 8: max(RTO_min, 2·SRTT))
    pub rto_formula: String,
    pub initial_rtt: Dur,
    pub tail_loss_probe: bool,
    pub tlp_delta: Dur,
    pub tlp_single_delta: Dur,
    pub broken_after_backoffs: u32,
    pub max_ack_delay: Dur,
    pub ack_frequency: u32,
    pub initial_window: u64,
    pub remove_addr_delay: Dur,
    pub send_buffer: Size,
    pub receive_buffer: Size,
    pub max_datagram_size: u32,
    pub opportunistic_retransmission: bool,
    /// Loss recovery as current Linux runs it (`Config::linux_recovery`: lost retransmissions
    /// resent on their path, one window reduction per recovery episode); off by default, as
    /// the README's figures were measured. The tunnel's hosts' TCP follows it.
    pub linux_recovery: bool,
    /// A path that reorders learns its reordering (`Config::adaptive_reordering`); off by
    /// default, as the README's figures were measured.
    pub adaptive_reordering: bool,
    /// Floor of RTTVAR in the REJ formula.
    pub rej_min_rttvar: Dur,
    /// Liveness probes as `braid tunnel` sends them (every keepalive on every link, answered
    /// by the peer): every this often, each link that carries packets both ways tells both
    /// ends that the peer is alive (`Connection::peer_alive`). Off when absent.
    pub liveness_probe: Option<Dur>,
}

impl Default for ConnectionSpec {
    fn default() -> Self {
        let c = Config::default();
        ConnectionSpec {
            scheduler: "minrtt".into(),
            reinjection: "stock".into(),
            congestion: "cubic".into(),
            rto_min: Dur(c.rto_min),
            rto_max: Dur(c.rto_max),
            rto_formula: "linux".into(),
            initial_rtt: Dur(c.initial_rtt),
            tail_loss_probe: c.tail_loss_probe,
            tlp_delta: Dur(c.tlp_delta),
            tlp_single_delta: Dur(c.tlp_single_delta),
            broken_after_backoffs: c.broken_after_backoffs,
            max_ack_delay: Dur(c.max_ack_delay),
            ack_frequency: c.ack_frequency,
            initial_window: c.initial_window,
            remove_addr_delay: Dur(c.remove_addr_delay),
            send_buffer: Size(c.send_buffer),
            receive_buffer: Size(c.receive_buffer),
            max_datagram_size: c.max_datagram_size as u32,
            opportunistic_retransmission: c.opportunistic_retransmission,
            linux_recovery: c.linux_recovery,
            adaptive_reordering: c.adaptive_reordering,
            rej_min_rttvar: Dur(braid_core::reinject::REJ_MIN_RTTVAR),
            liveness_probe: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub name: String,
    /// In a topology: the two ends, `node.interface` (e.g. "M1.e0"). `rate`/`trace` is the
    /// capacity a→b, `up_rate`/`up_trace` b→a. Absent in the two-node form. `node.*` at both
    /// ends is one link per interface name the two nodes share, named `<name>.<interface>`.
    #[serde(default)]
    pub a: Option<String>,
    #[serde(default)]
    pub b: Option<String>,
    /// Capacity server→client (and client→server unless `up_rate`/`up_trace` is given).
    #[serde(default)]
    pub rate: Option<Rate>,
    /// Mahimahi trace for the capacity server→client, relative to the scenario file.
    #[serde(default)]
    pub trace: Option<String>,
    #[serde(default)]
    pub up_rate: Option<Rate>,
    #[serde(default)]
    pub up_trace: Option<String>,
    /// One-way propagation delay.
    pub delay: Dur,
    #[serde(default)]
    pub jitter: Dur,
    /// Time constant of the jitter (0: independent per packet).
    #[serde(default)]
    pub jitter_period: Dur,
    #[serde(default)]
    pub reorder: bool,
    /// Drop-tail queue in packets (default 100) ...
    #[serde(default)]
    pub queue: Option<u32>,
    /// ... or in bytes.
    #[serde(default)]
    pub queue_bytes: Option<Size>,
    /// Bernoulli loss probability per packet, 0 ≤ loss < 1. With a radio (its signal from
    /// distance or a replay) the signal's packet error rate adds to it: a frame is lost to either.
    #[serde(default)]
    pub loss: f64,
    /// The path on this link is flagged backup when opened.
    #[serde(default)]
    pub backup: bool,
    /// Bytes added per datagram on the wire (UDP/IP).
    #[serde(default = "default_overhead")]
    pub overhead: u32,
    /// Airtime every frame holds beyond its bytes at the link's rate (a wireless MAC's
    /// inter-frame spaces, backoff, preamble and link-layer ACK; 802.11b: ≈ 866 µs).
    #[serde(default)]
    pub frame_overhead: Dur,
    /// Link-layer retransmissions of a frame lost on the air before it is dropped (a wireless
    /// MAC's ARQ; 802.11: 7), each holding the medium for the frame's airtime and a backoff
    /// that doubles from `retry_backoff`. 0: a loss drops the frame at once.
    #[serde(default)]
    pub retries: u32,
    /// Mean backoff before the first link-layer retransmission (802.11b: 620 µs).
    #[serde(default)]
    pub retry_backoff: Dur,
    /// Links naming the same medium share its airtime (one radio channel): one packet on it at
    /// a time, whichever link and direction. A `node.*` link's medium is one per interface
    /// (`<medium>.<interface>`).
    #[serde(default)]
    pub medium: Option<String>,
    /// Cross-layer threshold T, dBm (links with a radio or a signal replay).
    #[serde(default)]
    pub threshold_dbm: Option<f64>,
    /// Weight of a new RSS sample in the path manager's smoothing (seed 000 Algorithm 1).
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// The path manager promotes a demoted link only above T + hysteresis.
    #[serde(default)]
    pub hysteresis_db: f64,
    /// What losing coverage does to the client's address on this link: `keep` (802.11p OCB:
    /// the address stays, only packets are lost) or `lose` (a Wi-Fi network manager removes
    /// it, after `connection.remove_addr_delay`, and adds it back on return).
    #[serde(default)]
    pub address: AddressPolicy,
    /// Capacity, losses and availability from the signal strength.
    #[serde(default)]
    pub radio: Option<RadioConfig>,
    /// Signal strength replayed from a file instead of computed from distance.
    #[serde(default)]
    pub signal: Option<SignalConfig>,
}

fn default_alpha() -> f64 {
    0.5
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum AddressPolicy {
    #[default]
    Keep,
    Lose,
}

/// `[link.radio]`: see `radio::RadioSpec` for the model; every field is optional.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct RadioConfig {
    pub tx_power_dbm: Option<f64>,
    pub ref_loss_db: Option<f64>,
    pub exponent: Option<f64>,
    pub shadowing_db: Option<f64>,
    pub decorrelation_m: Option<f64>,
    pub beacon: Option<Dur>,
    pub sensitivity_dbm: Option<f64>,
    pub cutoff_dbm: Option<f64>,
    /// Scale the rate table (e.g. 0.5 for a slower radio).
    pub rate_scale: Option<f64>,
    /// Whether the signal sets the link's rate (true) or only its losses and availability
    /// (false: the link keeps its `rate`).
    pub adapt_rate: Option<bool>,
    /// Time over which the shadowing decorrelates even when nothing moves (people, vehicles,
    /// doors around fixed nodes); absent: it changes only with distance moved.
    pub coherence: Option<Dur>,
}

/// `[link.signal]`: a replay of (time, dBm).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SignalConfig {
    /// Relative to the scenario file.
    pub file: String,
    /// `csv` (time_s,iface,rssi_dbm) or `driving` (the ../shared/traces/signal files).
    #[serde(default = "default_signal_format")]
    pub format: String,
    /// CSV: the interface name to take; driving: the column (default RSRP).
    #[serde(default)]
    pub select: Option<String>,
    /// Start the replay this far into the file.
    #[serde(default)]
    pub offset: Dur,
}

fn default_signal_format() -> String {
    "csv".into()
}

/// `pm.race` unless the file says otherwise: as long as the transport's initial
/// retransmission timeout (RFC 6298), so a first path that answers within it is never raced.
pub const RACE_DEFAULT: Duration = Duration::from_secs(1);

/// `[pm]`: the client's path manager.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PmSpec {
    /// auto (backup when a link is flagged backup, else full mesh) | fullmesh | backup |
    /// cross | cross-backup
    pub mode: String,
    pub remove_weak: bool,
    pub same_subnet: bool,
    pub hmm: Option<HmmSpec>,
    /// The capacity estimate of modes `cross-cap`, `cross-backup-cap` and their `…-dup`
    /// variants (defaults if absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacitySpec>,
    /// A connection whose first path has not answered after this long opens one over another
    /// interface too (Happy Eyeballs, `braid_pm::Config::race`), or `"off"`.
    pub race: DurOrOff,
}

impl Default for PmSpec {
    fn default() -> Self {
        PmSpec {
            mode: "auto".into(),
            remove_weak: false,
            same_subnet: false,
            hmm: None,
            capacity: None,
            race: DurOrOff(Some(RACE_DEFAULT)),
        }
    }
}

/// `[pm.capacity]`: see `braid_pm::CapacityConfig`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CapacitySpec {
    pub sample: Dur,
    pub demand_window: Dur,
    pub horizon: Dur,
    pub headroom: f64,
    pub main_share: f64,
    pub floor_db: f64,
}

impl Default for CapacitySpec {
    fn default() -> Self {
        let d = braid_pm::CapacityConfig::default();
        CapacitySpec {
            sample: Dur(d.sample),
            demand_window: Dur(d.demand_window),
            horizon: Dur(d.horizon),
            headroom: d.headroom,
            main_share: d.main_share,
            floor_db: d.floor_db,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HmmSpec {
    pub interval: Dur,
    pub window: usize,
    pub good_margin_db: f64,
    pub bad_margin_db: f64,
}

impl Default for HmmSpec {
    fn default() -> Self {
        let d = braid_pm::HmmConfig::default();
        HmmSpec {
            interval: Dur(d.interval),
            window: d.window,
            good_margin_db: d.good_margin_db,
            bad_margin_db: d.bad_margin_db,
        }
    }
}

/// `[mobility]`: the vehicle's route.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MobilitySpec {
    /// straight | loop | grid
    pub route: String,
    pub speed_kmh: f64,
    /// straight: start position and access points along the road.
    #[serde(default)]
    pub start_m: f64,
    #[serde(default)]
    pub aps_m: Vec<f64>,
    /// Distance of the access points from the road.
    #[serde(default = "default_offset")]
    pub offset_m: f64,
    /// loop: its length and where its access point stands.
    #[serde(default)]
    pub length_m: Option<f64>,
    #[serde(default)]
    pub ap_at_m: Option<f64>,
    /// grid: blocks per side, block length, road-side units at random intersections.
    #[serde(default)]
    pub blocks: Option<u32>,
    #[serde(default)]
    pub block_m: Option<f64>,
    #[serde(default)]
    pub rsus: Option<u32>,
}

fn default_offset() -> f64 {
    10.0
}

fn default_overhead() -> u32 {
    28
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AppKind {
    /// Constant bit rate with per-packet send timestamps (like D-ITG).
    Cbr,
    /// Greedy bulk transfer (like iperf3).
    Bulk,
    /// Transfer of `bytes` bytes (like nc).
    File,
}

/// An application's `rate`: a number of messages a second. A bit rate written there (`"4Mbit"`)
/// is refused with the key it belongs in.
fn messages_per_second<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    struct Visit;
    impl serde::de::Visitor<'_> for Visit {
        type Value = f64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a number of messages a second")
        }
        fn visit_f64<E>(self, v: f64) -> Result<f64, E> {
            Ok(v)
        }
        fn visit_i64<E>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_u64<E>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<f64, E> {
            Err(E::custom(format!(
                "{t:?} is not a number of messages a second; a bit rate goes in `bitrate` (bitrate = {t:?})"
            )))
        }
    }
    d.deserialize_any(Visit).map(Some)
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum AppDirection {
    /// Server to client (downlink, as in seed 002).
    #[default]
    Down,
    /// Client to server.
    Up,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    pub kind: AppKind,
    #[serde(default)]
    pub direction: AppDirection,
    /// CBR packets per second.
    #[serde(default, deserialize_with = "messages_per_second")]
    pub rate: Option<f64>,
    /// CBR bit rate (alternative to `rate`).
    #[serde(default)]
    pub bitrate: Option<Rate>,
    /// CBR message size.
    #[serde(default = "default_message")]
    pub size: Size,
    /// File size.
    #[serde(default)]
    pub bytes: Option<Size>,
    #[serde(default = "default_start")]
    pub start: Dur,
    #[serde(default)]
    pub stop: Option<Dur>,
    /// Names a `[[flow]]` (its metrics are `flow.<name>.<metric>`).
    #[serde(default)]
    pub name: Option<String>,
    /// In a topology: the node that opens the connection (and runs the path manager) ...
    #[serde(default)]
    pub client: Option<String>,
    /// ... and the node it connects to, optionally with the interface whose address the first
    /// path goes to (`"M1.e0"`; default its first interface).
    #[serde(default)]
    pub server: Option<String>,
    /// The client's interfaces the connection may use (default all of them).
    #[serde(default)]
    pub interfaces: Option<Vec<String>>,
    /// Application priority 1 (highest) ..= 6 (seed 004 App. B), for schedulers that use it.
    #[serde(default)]
    pub priority: Option<i64>,
}

fn default_message() -> Size {
    Size(1400)
}

fn default_start() -> Dur {
    Dur(Duration::from_secs(1))
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// The link is blocked (no signal to the transport).
    Down,
    Up,
    /// The client's address on the link disappears (REMOVE_ADDR after the detection delay).
    AddrLost,
    /// The address returns and a path is opened on it again.
    AddrBack,
    /// Flag the client's path on the link backup.
    Backup,
    /// Clear the backup flag.
    Primary,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    pub at: Dur,
    /// Link name or index.
    pub link: String,
    pub action: Action,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleKind {
    /// Address removed and re-added (seed 002 §IV.A).
    Addr,
    /// Physical blockage without signalling (seed 001).
    Blockage,
}

/// `count` cycles of loss and return, starting at `first`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    pub link: String,
    pub kind: ScheduleKind,
    pub first: Dur,
    /// How long the link stays lost; omitted: it never returns.
    #[serde(default)]
    pub down: Option<Dur>,
    /// How long it stays back before the next loss.
    #[serde(default)]
    pub up: Option<Dur>,
    #[serde(default = "one_u32")]
    pub count: u32,
}

fn one_u32() -> u32 {
    1
}

/// One scenario variant, fully typed.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub duration: Dur,
    #[serde(default = "one_u64")]
    pub seed: u64,
    #[serde(default = "one_u32")]
    pub repetitions: u32,
    #[serde(default)]
    pub paper: Option<Paper>,
    #[serde(default)]
    pub connection: ConnectionSpec,
    #[serde(rename = "link")]
    pub links: Vec<LinkSpec>,
    pub app: AppSpec,
    #[serde(default, rename = "event")]
    pub events: Vec<EventSpec>,
    #[serde(default)]
    pub schedule: Vec<ScheduleSpec>,
    #[serde(default)]
    pub metrics: MetricsSpec,
    #[serde(default)]
    pub pm: PmSpec,
    #[serde(default)]
    pub mobility: Option<MobilitySpec>,
    /// A topology: nodes with interfaces; `[[link]]`s then join `node.interface` pairs.
    #[serde(default, rename = "node")]
    pub nodes: Vec<NodeSpec>,
    /// Further applications, each with its own connection.
    #[serde(default, rename = "flow")]
    pub flows: Vec<AppSpec>,
    #[serde(default)]
    pub routing: Option<RoutingSpec>,
    /// The application end to end through a braid tunnel between the client and the server.
    #[serde(default)]
    pub tunnel: Option<TunnelSpec>,
}

/// `[tunnel]` (seed 003, SPEC M5): the application's flow runs end to end, over its own
/// single-path TCP-like connection (a CBR application's over UDP unless `cbr_over = "tcp"`),
/// through `braid tunnel`'s connection between the client
/// (the tunnel client) and the server (the gateway): the daemon's own sans-IO tunnel
/// (`braid_tunnel::Tunnel`: PtoS/StoP over the multipath connection of `[connection]`, or one
/// datagram per packet with the reorder buffer), with the daemon's defaults for the rest.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TunnelSpec {
    /// braid (whole packets in the multipath connection's stream) | datagram (per packet,
    /// seed 003's HYA baseline) | none (no tunnel: the application's connection is the
    /// `[connection]` itself, as without `[tunnel]`)
    pub transport: String,
    /// datagram: the proportional scheduler's weights, one per link, as `datagram.ratio` of
    /// the daemon ("1:1", "2:1"; "auto": from measured delivery); default equal.
    pub ratio: Option<String>,
    /// datagram: the reorder buffer's out-of-order timeout (JUGGLER's; seed 003: 10 ms).
    pub ofo_timeout: Dur,
    /// datagram: the reorder buffer's in-sequence timeout (seed 003: 1 ms).
    pub inseq_timeout: Dur,
    /// The end-to-end flow's congestion control: cubic | newreno.
    pub congestion: String,
    /// How a CBR application's messages reach the tunnel: udp (each message one IPv4/UDP
    /// packet, as a real-time application sends them, nothing resent end to end; the
    /// default, as `braid lab` runs it) | tcp (one end-to-end TCP stream, the hosts' TCP, as
    /// for bulk and file transfers).
    pub cbr_over: String,
}

impl Default for TunnelSpec {
    fn default() -> Self {
        TunnelSpec {
            transport: "braid".into(),
            ratio: None,
            ofo_timeout: Dur(Duration::from_millis(10)),
            inseq_timeout: Dur(Duration::from_millis(1)),
            congestion: "cubic".into(),
            cbr_over: "udp".into(),
        }
    }
}

/// `[[node]]`: a host or relay of a topology.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    pub name: String,
    /// Interfaces (default one, `e0`, with an address of its own).
    #[serde(default)]
    pub iface: Vec<IfaceSpec>,
    /// Fixed position, metres (for links with a radio).
    #[serde(default)]
    pub position: Option<[f64; 2]>,
    #[serde(default)]
    pub mobility: Option<NodeMobilitySpec>,
}

/// An interface of a node.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IfaceSpec {
    pub name: String,
    /// IPv4 address and prefix, e.g. "112.26.0.1/24" (default 10.<node>.<interface>.1/24).
    #[serde(default)]
    pub addr: Option<String>,
    /// The client's path from this interface is flagged backup.
    #[serde(default)]
    pub backup: bool,
    /// The interface's transmission rate: it caps the capacity of every link it sends on
    /// (seed 004 Table 4).
    #[serde(default)]
    pub rate: Option<Rate>,
}

/// A node that moves: random waypoint in `area` (metres from the origin), legs at a speed
/// drawn from `speed_mps`, a `pause` at each waypoint.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeMobilitySpec {
    /// waypoint
    pub model: String,
    pub area: [f64; 2],
    pub speed_mps: [f64; 2],
    #[serde(default)]
    pub pause: Dur,
}

/// `[routing]`: how the nodes of a topology fill their forwarding tables.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RoutingSpec {
    /// static (shortest paths of the configured topology, computed once) | shortest (link
    /// state from hellos, ETX costs, recomputed every `period`) | manet (seed 004's multipath
    /// routing, `braid_pm::route`: hop counts, equal-cost next hops given to interfaces by
    /// App. C, optionally filtered by the HMM)
    pub policy: String,
    /// manet: withdraw next hops the HMM predicts to disconnect (seed 004's "Markov").
    pub hmm: bool,
    /// Hello interval on every link (OSPF-MDR's HelloInterval).
    pub hello: Dur,
    /// Route recomputation period (seed 004: 2 s).
    pub period: Dur,
    /// Hellos missed before a neighbour counts as gone.
    pub dead: u32,
    /// Hellos over which a link's delivery ratio (its cost) is measured.
    pub window: u32,
    /// full (a route may continue over any interface of the next node: one-to-many) | part
    /// (traffic stays on the interfaces of one subnet: one-to-one)
    pub connectivity: String,
    /// Interfaces whose links carry routed traffic (default all), e.g. ["e0"] for routes
    /// generated for one interface only.
    pub interfaces: Vec<String>,
}

impl Default for RoutingSpec {
    fn default() -> Self {
        RoutingSpec {
            policy: "static".into(),
            hmm: false,
            hello: Dur(Duration::from_secs(1)),
            period: Dur(Duration::from_secs(2)),
            dead: 4,
            window: 10,
            connectivity: "full".into(),
            interfaces: Vec::new(),
        }
    }
}

fn one_u64() -> u64 {
    1
}
