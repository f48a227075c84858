//! Scenario files (TOML): links, application, scripted events, metrics windows, and the
//! variants to compare (a `[sweep]` over option values and/or named `[[variant]]`s). Every value
//! can be overridden with `--set key=value` (`connection.reinjection=rej1`, `link.0.rate=50Mbit`,
//! `link.wlan.delay=20ms`). Errors are one line naming the file, the key and what is allowed.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use braid_core::Config;
use braid_core::cc::Algorithm;
use braid_core::reinject::{Policy, Rej};
use braid_core::rtt::RtoFormula;
use braid_core::scheduler::Kind;
use serde::{Deserialize, Serialize};

use crate::link::{Capacity, DirSpec, QueueLimit};
use crate::trace::Trace;
use crate::units::{Dur, Rate, Size};

/// A scenario error: `file: key `path`: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(k) => write!(f, "{}: key `{}`: {}", self.file, k, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

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
    /// minrtt | roundrobin | redundant
    pub scheduler: String,
    /// stock | pto | rejK
    pub reinjection: String,
    /// newreno | cubic | lia | olia
    pub congestion: String,
    pub rto_min: Dur,
    pub rto_max: Dur,
    /// linux | rfc6298
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
            rej_min_rttvar: Dur(braid_core::reinject::REJ_MIN_RTTVAR),
            liveness_probe: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub name: String,
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
    /// Bernoulli loss probability per packet, 0 ≤ loss < 1.
    #[serde(default)]
    pub loss: f64,
    /// The path on this link is flagged backup when opened.
    #[serde(default)]
    pub backup: bool,
    /// Bytes added per datagram on the wire (UDP/IP).
    #[serde(default = "default_overhead")]
    pub overhead: u32,
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
}

impl Default for PmSpec {
    fn default() -> Self {
        PmSpec {
            mode: "auto".into(),
            remove_weak: false,
            same_subnet: false,
            hmm: None,
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
    #[serde(default)]
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

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsSpec {
    /// Window around each loss event: this long before ...
    pub before: Dur,
    /// ... and this long after.
    pub after: Dur,
    /// Time-series sampling interval.
    pub sample: Dur,
    /// Ignored at the start for throughput and whole-run gaps.
    pub warmup: Dur,
    /// Metrics shown in the table (all measured ones if empty).
    pub show: Vec<String>,
}

impl Default for MetricsSpec {
    fn default() -> Self {
        MetricsSpec {
            before: Dur(Duration::from_millis(500)),
            after: Dur(Duration::from_secs(2)),
            sample: Dur(Duration::from_millis(100)),
            warmup: Dur(Duration::from_secs(2)),
            show: Vec::new(),
        }
    }
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
}

fn one_u64() -> u64 {
    1
}

/// A replayed signal: (time, dBm), in time order.
pub type SignalSeries = Arc<Vec<(Duration, f64)>>;

/// A variant ready to run: its name, the settings that define it, and the checked scenario.
#[derive(Debug, Clone)]
pub struct Variant {
    pub name: String,
    pub settings: BTreeMap<String, String>,
    pub scenario: Scenario,
    /// Resolved link directions: (server→client, client→server).
    pub links: Vec<(DirSpec, DirSpec)>,
    /// Scripted actions sorted by time: (time, link index, action).
    pub timeline: Vec<(Duration, usize, Action)>,
    pub config: Arc<Config>,
    /// The client's path manager.
    pub pm: braid_pm::Config,
    /// Per link: its radio model, if any.
    pub radios: Vec<Option<crate::radio::RadioSpec>>,
    /// Per link: a signal replay, if any.
    pub signals: Vec<Option<SignalSeries>>,
    pub route: Option<crate::mobility::Route>,
}

/// A loaded scenario file: the variants to compare.
#[derive(Debug, Clone)]
pub struct Plan {
    pub file: String,
    pub variants: Vec<Variant>,
}

impl Plan {
    pub fn name(&self) -> &str {
        &self.variants[0].scenario.name
    }

    pub fn base(&self) -> &Scenario {
        &self.variants[0].scenario
    }
}

/// Loads a scenario file, applies `--set` overrides, and checks every variant.
pub fn load(path: &Path, overrides: &[String]) -> Result<Plan, ScenarioError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        file: file.clone(),
        key: None,
        message: format!("cannot read the scenario: {e}"),
    })?;
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    load_str(&text, &file, &base_dir, overrides)
}

/// Like [`load`], from text; trace paths are resolved against `base_dir`.
pub fn load_str(
    text: &str,
    file: &str,
    base_dir: &Path,
    overrides: &[String],
) -> Result<Plan, ScenarioError> {
    let err = |key: Option<String>, message: String| ScenarioError {
        file: file.to_string(),
        key,
        message,
    };
    let mut root: toml::Table = toml::from_str(text).map_err(|e| {
        let msg = e.message().to_string();
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
        match line {
            Some(l) => err(None, format!("line {l}: {msg}")),
            None => err(None, msg),
        }
    })?;
    // Command-line overrides win over everything in the file, sweeps and variants included.
    let mut cli: Vec<(String, toml::Value)> = Vec::new();
    for o in overrides {
        let (key, value) = o.split_once('=').ok_or_else(|| {
            err(
                None,
                format!("--set `{o}`: expected key=value, e.g. connection.reinjection=rej1"),
            )
        })?;
        let key = key.trim().to_string();
        let value = parse_value(value.trim());
        // Applied to the base now, to report errors in the key at once.
        set_path(&mut root, &key, value.clone()).map_err(|m| err(Some(key.clone()), m))?;
        // Overrides of the sweep or the variants change the plan itself, not each variant.
        let first = split_key(&key).unwrap_or_default().into_iter().next();
        if !matches!(first.as_deref(), Some("sweep" | "variant")) {
            cli.push((key, value));
        }
    }
    let sweep = match root.remove("sweep") {
        None => Vec::new(),
        Some(toml::Value::Table(t)) => t
            .into_iter()
            .map(|(k, v)| match v {
                toml::Value::Array(a) if !a.is_empty() => Ok((k, a)),
                _ => Err(err(
                    Some(format!("sweep.{k}")),
                    "expected a non-empty list of values".into(),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(err(Some("sweep".into()), "expected a table".into())),
    };
    // A swept key set on the command line is no longer swept.
    let overridden = |k: &str| {
        let k = split_key(k).unwrap_or_default();
        cli.iter()
            .any(|(c, _)| split_key(c).unwrap_or_default() == k)
    };
    let sweep: Vec<_> = sweep.into_iter().filter(|(k, _)| !overridden(k)).collect();
    let named = match root.remove("variant") {
        None => Vec::new(),
        Some(toml::Value::Array(a)) => a
            .into_iter()
            .enumerate()
            .map(|(i, v)| parse_variant(i, v).map_err(|(k, m)| err(Some(k), m)))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => {
            return Err(err(
                Some("variant".into()),
                "expected [[variant]] entries with `name` and `set`".into(),
            ));
        }
    };
    // Named variants × sweep combinations.
    let mut combos: Vec<Overrides> = vec![(String::new(), Vec::new())];
    if !named.is_empty() {
        combos = named;
    }
    // With several swept keys, a label names its key: `alpha=0.3-hysteresis_db=2`.
    let several = sweep.len() > 1;
    for (key, values) in &sweep {
        let mut next = Vec::new();
        for (name, sets) in &combos {
            for v in values {
                let label = if several {
                    let short = split_key(key)
                        .ok()
                        .and_then(|p| p.last().cloned())
                        .unwrap_or_else(|| key.clone());
                    format!("{short}={}", value_label(v))
                } else {
                    value_label(v)
                };
                let n = if name.is_empty() {
                    label
                } else {
                    format!("{name}-{label}")
                };
                let mut s = sets.clone();
                s.push((key.clone(), v.clone()));
                next.push((n, s));
            }
        }
        combos = next;
    }
    let mut variants = Vec::new();
    for (name, sets) in combos {
        let mut t = root.clone();
        for (k, v) in sets.iter().chain(&cli) {
            set_path(&mut t, k, v.clone()).map_err(|m| err(Some(k.clone()), m))?;
        }
        let scenario: Scenario =
            serde_path_to_error::deserialize(toml::Value::Table(t)).map_err(|e| {
                let path = e.path().to_string();
                err(
                    (path != "." && !path.is_empty()).then_some(path),
                    e.into_inner().message().to_string(),
                )
            })?;
        let name = if name.is_empty() {
            scenario.connection.reinjection.clone()
        } else {
            name
        };
        let settings = sets
            .iter()
            .map(|(k, v)| (k.clone(), value_label(v)))
            .collect();
        variants.push(check(scenario, name, settings, base_dir).map_err(|(k, m)| err(k, m))?);
    }
    let mut seen = std::collections::BTreeSet::new();
    for v in &variants {
        if !seen.insert(v.name.clone()) {
            return Err(err(None, format!("two variants are named `{}`", v.name)));
        }
    }
    Ok(Plan {
        file: file.to_string(),
        variants,
    })
}

/// A named set of overrides.
type Overrides = (String, Vec<(String, toml::Value)>);

fn parse_variant(i: usize, v: toml::Value) -> Result<Overrides, (String, String)> {
    let key = format!("variant[{i}]");
    let toml::Value::Table(mut t) = v else {
        return Err((key, "expected a table with `name` and `set`".into()));
    };
    let name = match t.remove("name") {
        Some(toml::Value::String(s)) if !s.is_empty() => s,
        _ => return Err((format!("{key}.name"), "expected a non-empty string".into())),
    };
    let sets = match t.remove("set") {
        Some(toml::Value::Table(s)) => s.into_iter().collect(),
        None => Vec::new(),
        Some(_) => {
            return Err((
                format!("{key}.set"),
                "expected a table of key = value, e.g. { \"connection.scheduler\" = \"redundant\" }"
                    .into(),
            ));
        }
    };
    if let Some(k) = t.keys().next() {
        return Err((
            format!("{key}.{k}"),
            "unknown key; allowed: name, set".into(),
        ));
    }
    Ok((name, sets))
}

fn value_label(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A `--set` value: a TOML literal (number, boolean, quoted string, array) or else a bare string.
fn parse_value(raw: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

/// Splits a key path at dots outside double quotes: `sweep."connection.reinjection"` has two
/// components.
fn split_key(path: &str) -> Result<Vec<String>, String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in path.chars() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => parts.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    if quoted {
        return Err("unbalanced quote in key".into());
    }
    parts.push(cur);
    if parts.iter().any(|p| p.is_empty()) {
        return Err("empty key component".into());
    }
    Ok(parts)
}

/// Sets `a.b.0.c` (array elements by index or by their `name`) in a TOML tree.
fn set_path(root: &mut toml::Table, path: &str, value: toml::Value) -> Result<(), String> {
    let parts = split_key(path)?;
    set_parts(root, &parts, value)
}

fn set_parts(root: &mut toml::Table, parts: &[String], value: toml::Value) -> Result<(), String> {
    let mut cur = root;
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        if last {
            cur.insert(part.clone(), value);
            return Ok(());
        }
        let entry = cur
            .entry(part.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = match entry {
            toml::Value::Table(t) => t,
            toml::Value::Array(a) => {
                let Some(sel) = parts.get(i + 1) else {
                    return Err(format!(
                        "`{part}` is a list: name an entry, e.g. {part}.0.key"
                    ));
                };
                let idx = match sel.parse::<usize>() {
                    Ok(n) if n < a.len() => n,
                    Ok(n) => return Err(format!("index {n} out of range ({} entries)", a.len())),
                    Err(_) => a
                        .iter()
                        .position(|e| e.get("name").and_then(|v| v.as_str()) == Some(sel))
                        .ok_or_else(|| format!("no `{part}` entry named `{sel}`"))?,
                };
                let rest = &parts[i + 2..];
                let toml::Value::Table(t) = &mut a[idx] else {
                    return Err(format!("`{part}` entries are not tables"));
                };
                if rest.is_empty() {
                    return Err("cannot replace a whole list entry; set one of its keys".into());
                }
                return set_parts(t, rest, value);
            }
            _ => return Err(format!("`{part}` is not a table")),
        };
    }
    Ok(())
}

type CheckError = (Option<String>, String);

fn check(
    s: Scenario,
    name: String,
    settings: BTreeMap<String, String>,
    base_dir: &Path,
) -> Result<Variant, CheckError> {
    let k = |key: &str| Some(key.to_string());
    if s.duration.0.is_zero() {
        return Err((k("duration"), "must be positive".into()));
    }
    if s.repetitions == 0 {
        return Err((k("repetitions"), "must be at least 1".into()));
    }
    if s.links.is_empty() || s.links.len() > 8 {
        return Err((k("link"), "a scenario needs 1 to 8 [[link]] entries".into()));
    }
    let config = build_config(&s.connection)?;
    let mut links = Vec::new();
    for (i, l) in s.links.iter().enumerate() {
        let key = |f: &str| Some(format!("link[{i}].{f}"));
        if s.links[..i].iter().any(|o| o.name == l.name) {
            return Err((key("name"), format!("duplicate link name `{}`", l.name)));
        }
        if !(0.0..1.0).contains(&l.loss) {
            return Err((
                key("loss"),
                format!("{} out of range: allowed 0 ≤ loss < 1", l.loss),
            ));
        }
        let queue = match (l.queue, l.queue_bytes) {
            (Some(_), Some(_)) => {
                return Err((
                    key("queue"),
                    "give either `queue` (packets) or `queue_bytes`".into(),
                ));
            }
            (Some(0), _) => return Err((key("queue"), "must be at least 1 packet".into())),
            (Some(n), None) => QueueLimit::Packets(n),
            (None, Some(b)) if b.0 < 1500 => {
                return Err((
                    key("queue_bytes"),
                    "must hold at least one packet (1500 B)".into(),
                ));
            }
            (None, Some(b)) => QueueLimit::Bytes(b.0),
            (None, None) => QueueLimit::Packets(100),
        };
        let field = |trace: &Option<String>, rate: &str, tr: &str| {
            if trace.is_some() { key(tr) } else { key(rate) }
        };
        let down = capacity(l.rate, &l.trace, base_dir)
            .map_err(|m| (field(&l.trace, "rate", "trace"), m))?;
        let up = if l.up_rate.is_some() || l.up_trace.is_some() {
            capacity(l.up_rate, &l.up_trace, base_dir)
                .map_err(|m| (field(&l.up_trace, "up_rate", "up_trace"), m))?
        } else {
            down.clone()
        };
        let dir = |capacity| DirSpec {
            capacity,
            delay: l.delay.0,
            jitter: l.jitter.0,
            jitter_period: l.jitter_period.0,
            reorder: l.reorder,
            queue,
            loss: l.loss,
            overhead: l.overhead,
        };
        links.push((dir(down), dir(up)));
    }
    let app = &s.app;
    match app.kind {
        AppKind::Cbr => {
            match (app.rate, app.bitrate) {
                (Some(_), Some(_)) => {
                    return Err((
                        k("app.rate"),
                        "give either `rate` (packets/s) or `bitrate`".into(),
                    ));
                }
                (None, None) => {
                    return Err((
                        k("app.rate"),
                        "a cbr application needs `rate` (packets/s) or `bitrate`".into(),
                    ));
                }
                (Some(r), None) if !(r > 0.0 && r <= 1e6) => {
                    return Err((
                        k("app.rate"),
                        format!("{r} out of range: allowed 0 < rate ≤ 1000000 packets/s"),
                    ));
                }
                _ => {}
            }
            if app.size.0 < 16 || app.size.0 > 65_000 {
                return Err((k("app.size"), "a cbr message holds 16..=65000 bytes".into()));
            }
        }
        AppKind::File => {
            if app.bytes.is_none_or(|b| b.0 == 0) {
                return Err((k("app.bytes"), "a file transfer needs `bytes` > 0".into()));
            }
        }
        AppKind::Bulk => {}
    }
    if app.start.0 >= s.duration.0 {
        return Err((
            k("app.start"),
            "the application must start before the end of the run".into(),
        ));
    }
    let link_index = |key: String, name: &str| -> Result<usize, CheckError> {
        if let Ok(i) = name.parse::<usize>()
            && i < s.links.len()
        {
            return Ok(i);
        }
        s.links.iter().position(|l| l.name == name).ok_or_else(|| {
            let names: Vec<_> = s.links.iter().map(|l| l.name.as_str()).collect();
            (
                Some(key),
                format!("no link `{name}`; links are {}", names.join(", ")),
            )
        })
    };
    let mut timeline = Vec::new();
    for (i, e) in s.events.iter().enumerate() {
        let li = link_index(format!("event[{i}].link"), &e.link)?;
        if e.at.0 > s.duration.0 {
            return Err((
                Some(format!("event[{i}].at")),
                "after the end of the run".into(),
            ));
        }
        timeline.push((e.at.0, li, e.action));
    }
    for (i, sch) in s.schedule.iter().enumerate() {
        let li = link_index(format!("schedule[{i}].link"), &sch.link)?;
        let (lost, back) = match sch.kind {
            ScheduleKind::Addr => (Action::AddrLost, Action::AddrBack),
            ScheduleKind::Blockage => (Action::Down, Action::Up),
        };
        if sch.count == 0 {
            return Err((
                Some(format!("schedule[{i}].count")),
                "must be at least 1".into(),
            ));
        }
        if sch.count > 1 && (sch.down.is_none() || sch.up.is_none()) {
            return Err((
                Some(format!("schedule[{i}].down")),
                "repeated cycles need both `down` and `up`".into(),
            ));
        }
        let mut t = sch.first.0;
        for _ in 0..sch.count {
            timeline.push((t, li, lost));
            let Some(down) = sch.down else { break };
            t += down.0;
            timeline.push((t, li, back));
            t += sch.up.map_or(Duration::ZERO, |u| u.0);
        }
        if t > s.duration.0 + sch.up.map_or(Duration::ZERO, |u| u.0) {
            return Err((
                Some(format!("schedule[{i}].count")),
                format!(
                    "the cycles end at {:.1} s, after the run ({:.1} s)",
                    t.as_secs_f64(),
                    s.duration.0.as_secs_f64()
                ),
            ));
        }
    }
    timeline.sort_by_key(|(t, l, _)| (*t, *l));
    for m in &s.metrics.show {
        let per_link = s.links.iter().any(|l| {
            *m == crate::metrics::link_key(&l.name) || *m == crate::metrics::link_mb_key(&l.name)
        });
        if !per_link && !crate::metrics::METRICS.iter().any(|d| d.key == m) {
            let mut all: Vec<String> = crate::metrics::METRICS
                .iter()
                .map(|d| d.key.to_string())
                .collect();
            all.extend(s.links.iter().map(|l| crate::metrics::link_key(&l.name)));
            return Err((
                k("metrics.show"),
                format!("unknown metric `{m}`; allowed: {}", all.join(", ")),
            ));
        }
    }
    let route = match &s.mobility {
        None => None,
        Some(m) => Some(build_route(m)?),
    };
    let mut radios = Vec::new();
    let mut signals = Vec::new();
    for (i, l) in s.links.iter().enumerate() {
        let key = |f: &str| Some(format!("link[{i}].{f}"));
        if !(l.alpha > 0.0 && l.alpha <= 1.0) {
            return Err((
                key("alpha"),
                format!("{} out of range: allowed 0 < alpha ≤ 1", l.alpha),
            ));
        }
        if !(l.hysteresis_db >= 0.0 && l.hysteresis_db.is_finite()) {
            return Err((key("hysteresis_db"), "must be zero or positive".into()));
        }
        if let Some(t) = l.threshold_dbm
            && !(-150.0..=0.0).contains(&t)
        {
            return Err((
                key("threshold_dbm"),
                format!("{t} out of range: allowed -150..=0 dBm"),
            ));
        }
        let radio = match &l.radio {
            None => None,
            Some(r) => {
                if route.is_none() && l.signal.is_none() {
                    return Err((
                        key("radio"),
                        "a radio needs a [mobility] route or a [link.signal] replay".into(),
                    ));
                }
                let d = crate::radio::RadioSpec::default();
                let spec = crate::radio::RadioSpec {
                    tx_power_dbm: r.tx_power_dbm.unwrap_or(d.tx_power_dbm),
                    ref_loss_db: r.ref_loss_db.unwrap_or(d.ref_loss_db),
                    exponent: r.exponent.unwrap_or(d.exponent),
                    shadowing_db: r.shadowing_db.unwrap_or(d.shadowing_db),
                    decorrelation_m: r.decorrelation_m.unwrap_or(d.decorrelation_m),
                    beacon: r.beacon.map_or(d.beacon, |b| b.0),
                    sensitivity_dbm: r.sensitivity_dbm.unwrap_or(d.sensitivity_dbm),
                    cutoff_dbm: r.cutoff_dbm.unwrap_or(d.cutoff_dbm),
                    rates: d
                        .rates
                        .iter()
                        .map(|&(m, rate)| (m, rate * r.rate_scale.unwrap_or(1.0)))
                        .collect(),
                };
                spec.validate().map_err(|m| (key("radio"), m))?;
                Some(spec)
            }
        };
        let signal = match &l.signal {
            None => None,
            Some(sc) => {
                let path = base_dir.join(&sc.file);
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    (
                        key("signal.file"),
                        format!("cannot read signal replay `{}`: {e}", path.display()),
                    )
                })?;
                let replay = match sc.format.as_str() {
                    "csv" => braid_pm::signal::parse_csv(&text),
                    "driving" => braid_pm::signal::parse_driving(
                        &text,
                        &l.name,
                        sc.select.as_deref().unwrap_or("RSRP"),
                    ),
                    other => Err(format!("unknown format `{other}`; allowed: csv, driving")),
                }
                .map_err(|m| (key("signal"), format!("{}: {m}", path.display())))?;
                let pick = sc.select.clone().unwrap_or_else(|| l.name.clone());
                let series: Vec<(Duration, f64)> = replay
                    .samples
                    .into_iter()
                    .filter(|(_, iface, _)| sc.format != "csv" || *iface == pick)
                    .filter(|(t, _, _)| *t >= sc.offset.0)
                    .map(|(t, _, v)| (t - sc.offset.0, v))
                    .collect();
                if series.is_empty() {
                    return Err((
                        key("signal"),
                        format!("{}: no usable samples for `{pick}`", path.display()),
                    ));
                }
                Some(Arc::new(series))
            }
        };
        if (radio.is_some() || signal.is_some()) && l.threshold_dbm.is_none() {
            // Allowed: the stock path manager ignores signal; cross-layer modes check below.
        }
        radios.push(radio);
        signals.push(signal);
    }
    let pm = build_pm(&s)?;
    Ok(Variant {
        name,
        settings,
        scenario: s,
        links,
        timeline,
        config: Arc::new(config),
        pm,
        radios,
        signals,
        route,
    })
}

fn build_route(m: &MobilitySpec) -> Result<crate::mobility::Route, CheckError> {
    use crate::mobility::Route;
    let k = |f: &str| Some(format!("mobility.{f}"));
    if !(m.speed_kmh > 0.0 && m.speed_kmh < 500.0) {
        return Err((k("speed_kmh"), "allowed 0 < speed_kmh < 500".into()));
    }
    Ok(match m.route.as_str() {
        "straight" => {
            if m.aps_m.is_empty() {
                return Err((
                    k("aps_m"),
                    "a straight route needs access points along it".into(),
                ));
            }
            Route::Straight {
                start_m: m.start_m,
                aps_m: m.aps_m.clone(),
                offset_m: m.offset_m,
            }
        }
        "loop" => {
            let length_m = m
                .length_m
                .ok_or((k("length_m"), "a loop needs its length".to_string()))?;
            if length_m <= 0.0 {
                return Err((k("length_m"), "must be positive".into()));
            }
            Route::Loop {
                length_m,
                ap_at_m: m.ap_at_m.unwrap_or(0.0),
                offset_m: m.offset_m,
            }
        }
        "grid" => {
            let blocks = m.blocks.unwrap_or(5);
            let block_m = m.block_m.unwrap_or(200.0);
            if !(1..=50).contains(&blocks) || block_m <= 0.0 {
                return Err((
                    k("blocks"),
                    "allowed 1..=50 blocks of positive length".into(),
                ));
            }
            Route::Grid {
                blocks,
                block_m,
                rsus: m.rsus.unwrap_or(6),
            }
        }
        other => {
            return Err((
                k("route"),
                format!("unknown route `{other}`; allowed: straight, loop, grid"),
            ));
        }
    })
}

fn build_pm(s: &Scenario) -> Result<braid_pm::Config, CheckError> {
    let k = |f: &str| Some(format!("pm.{f}"));
    let any_backup = s.links.iter().any(|l| l.backup);
    let mode = match s.pm.mode.as_str() {
        "auto" if any_backup => braid_pm::Mode::Backup,
        "auto" => braid_pm::Mode::FullMesh,
        m => braid_pm::Mode::from_name(m).ok_or_else(|| {
            (
                k("mode"),
                format!(
                    "unknown mode `{m}`; allowed: auto, {}",
                    braid_pm::Mode::NAMES.join(", ")
                ),
            )
        })?,
    };
    let ifaces = s
        .links
        .iter()
        .map(|l| braid_pm::IfaceConfig {
            name: l.name.clone(),
            threshold_dbm: l.threshold_dbm,
            alpha: l.alpha,
            hysteresis_db: l.hysteresis_db,
            backup: l.backup,
        })
        .collect();
    let cfg = braid_pm::Config {
        mode,
        ifaces,
        remove_weak: s.pm.remove_weak,
        hmm: s.pm.hmm.as_ref().map(|h| braid_pm::HmmConfig {
            interval: h.interval.0,
            window: h.window,
            good_margin_db: h.good_margin_db,
            bad_margin_db: h.bad_margin_db,
            ..braid_pm::HmmConfig::default()
        }),
        same_subnet: s.pm.same_subnet,
        announce: false,
    };
    cfg.validate().map_err(|m| (k("mode"), m))?;
    Ok(cfg)
}

fn capacity(
    rate: Option<Rate>,
    trace: &Option<String>,
    base_dir: &Path,
) -> Result<Capacity, String> {
    match (rate, trace) {
        (Some(_), Some(_)) => Err("give either a rate or a trace, not both".into()),
        (None, None) => Err("a link needs a `rate` (e.g. \"30Mbit\") or a `trace` file".into()),
        (Some(r), None) => Ok(Capacity::Rate(r.0)),
        (None, Some(t)) => {
            let p: PathBuf = base_dir.join(t);
            Trace::load(&p).map(Capacity::Trace)
        }
    }
}

fn build_config(c: &ConnectionSpec) -> Result<Config, CheckError> {
    let k = |f: &str| Some(format!("connection.{f}"));
    let scheduler = Kind::parse(&c.scheduler).map_err(|e| (k("scheduler"), e.to_string()))?;
    let congestion = Algorithm::from_name(&c.congestion).ok_or_else(|| {
        (
            k("congestion"),
            format!(
                "unknown congestion control `{}`; allowed: {}",
                c.congestion,
                Algorithm::NAMES.join(", ")
            ),
        )
    })?;
    let policy = Policy::from_name(&c.reinjection).map_err(|m| {
        (
            k("reinjection"),
            format!("{m}; allowed: stock, pto, rejK with an integer K ≥ 1 (rej1, rej2, rej4, …)"),
        )
    })?;
    let reinjection = match policy {
        Policy::Rej(r) => Policy::Rej(Rej {
            min_rttvar: c.rej_min_rttvar.0,
            ..r
        }),
        p => p,
    };
    let rto_formula = match c.rto_formula.as_str() {
        "linux" => RtoFormula::Linux,
        "rfc6298" => RtoFormula::Rfc6298,
        other => {
            return Err((
                k("rto_formula"),
                format!("unknown formula `{other}`; allowed: linux, rfc6298"),
            ));
        }
    };
    let cfg = Config {
        max_datagram_size: c.max_datagram_size as usize,
        send_buffer: c.send_buffer.0,
        receive_buffer: c.receive_buffer.0,
        initial_rtt: c.initial_rtt.0,
        rto_min: c.rto_min.0,
        rto_max: c.rto_max.0,
        rto_formula,
        broken_after_backoffs: c.broken_after_backoffs,
        tail_loss_probe: c.tail_loss_probe,
        tlp_delta: c.tlp_delta.0,
        tlp_single_delta: c.tlp_single_delta.0,
        max_ack_delay: c.max_ack_delay.0,
        ack_frequency: c.ack_frequency,
        initial_window: c.initial_window,
        remove_addr_delay: c.remove_addr_delay.0,
        max_paths: 8,
        idle_timeout: None,
        opportunistic_retransmission: c.opportunistic_retransmission,
        congestion: congestion.factory(c.initial_window),
        scheduler: scheduler.factory(),
        reinjection: reinjection.shared(),
    };
    cfg.validate().map_err(|m| {
        let field = m.split_whitespace().next().unwrap_or("").to_string();
        (k(&field), m)
    })?;
    Ok(cfg)
}

#[cfg(test)]
mod tests;
